/* Tessera runtime layer (internal): StarPU codelets, task-insert helpers
 * taking descriptors and tile indices, REDUX methods, MPI-aware insertion.
 * No loops over tiles here. */
#ifndef TSR_RUNTIME_H
#define TSR_RUNTIME_H
#include <starpu.h>
#include "tsr_tile.h"

/* at most this many tiles per task (StarPU's STARPU_NMAXBUFS) */
#define TSR_MAX_TASK_TILES 8

/* One tile of a descriptor. */
typedef struct { tsr_desc_t *d; int bi, i, j; } tsr_tile_t;
static inline tsr_tile_t tsr_tile(tsr_desc_t *d, int bi, int i, int j)
{
    tsr_tile_t t = { d, bi, i, j };
    return t;
}

/* A tile (StarPU block interface) as depth consecutive column-major
 * matrices: rows x cols with leading dimension ld, zstride bytes apart. */
typedef struct { void *ptr; int rows, cols, depth, ld; size_t zstride; tsr_dtype_t dtype; } tsr_view_t;
static inline tsr_view_t tsr_view(void *iface)
{
    tsr_view_t v;
    size_t es = STARPU_BLOCK_GET_ELEMSIZE(iface);
    v.ptr = (void *)STARPU_BLOCK_GET_PTR(iface);
    v.rows = (int)STARPU_BLOCK_GET_NX(iface);
    v.cols = (int)STARPU_BLOCK_GET_NY(iface);
    v.depth = (int)STARPU_BLOCK_GET_NZ(iface);
    v.ld = (int)STARPU_BLOCK_GET_LDY(iface);
    v.zstride = (size_t)STARPU_BLOCK_GET_LDZ(iface) * es;
    v.dtype = es == sizeof(double) ? TSR_FLOAT64 : TSR_FLOAT32;
    return v;
}
/* Pointer to matrix z of the view. */
static inline void *tsr_view_at(tsr_view_t v, int z) { return (char *)v.ptr + (size_t)z * v.zstride; }
/* Threads available to the running task (>1 on a combined worker). */
static inline int tsr_task_threads(void)
{
    int n = starpu_combined_worker_get_size();
    return n > 0 ? n : 1;
}

/* Fill a codelet with one CPU (and, when StarPU has CUDA, one CUDA)
 * implementation and a history-based perf model named `symbol` (static
 * storage). modes NULL: modes are given per task (variable buffer count). */
void tsr_codelet_init(struct starpu_codelet *cl, struct starpu_perfmodel *pm, const char *symbol,
                      starpu_cpu_func_t cpu, void *cuda, int nbuffers, const enum starpu_data_access_mode *modes);

/* Let a BLAS-heavy codelet run on combined workers of the configured
 * parallel-worker size (tensor parallelism inside a task: its kernels pass
 * tsr_task_threads() to the BLAS). No effect when that size is 1. */
void tsr_codelet_allow_parallel(struct starpu_codelet *cl);

/* Submit one task. With MPI the task runs on exec_rank (-1: the owner of the
 * first written tile); a rank that neither executes it, nor owns any of its
 * tiles, nor holds a received copy of a tile it writes skips the call. arg (argsize bytes) is copied. */
int tsr_submit(struct starpu_codelet *cl, const tsr_tile_t *tiles, const enum starpu_data_access_mode *modes,
               int ntiles, const void *arg, size_t argsize, int exec_rank, double flops);

/* C = alpha op(A) op(B) + beta C on tiles; mode of C: STARPU_W (beta must be
 * 0), STARPU_RW or STARPU_REDUX (beta must be 1). */
int tsr_insert_gemm(tsr_trans_t ta, tsr_trans_t tb, double alpha, tsr_tile_t A, tsr_tile_t B,
                    double beta, tsr_tile_t C, enum starpu_data_access_mode cmode, int exec_rank);
/* A = alpha A */
int tsr_insert_scale(double alpha, tsr_tile_t A);
/* A = 0 (write-only) */
int tsr_insert_zero(tsr_tile_t A);
/* B = alpha A + beta B */
int tsr_insert_add(double alpha, tsr_tile_t A, double beta, tsr_tile_t B);
/* Zero a tile on this rank only, whoever owns it (starts a local REDUX copy). */
int tsr_insert_local_zero(tsr_tile_t A);

/* Give the tile the zero-init + add reduction methods (for STARPU_REDUX). */
int tsr_tile_enable_redux(tsr_tile_t A);
/* Reduce the contributions several ranks made to the tile onto its owner
 * (collective: every rank calls it, in the same order; waits for tasks). */
void tsr_tile_mpi_redux(tsr_tile_t A);
/* Forget StarPU-MPI cached copies of every tile of d (collective). */
void tsr_desc_flush(tsr_desc_t *d);
#endif
