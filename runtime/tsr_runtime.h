/* Tessera runtime layer (internal): StarPU codelets, task-insert helpers
 * taking descriptors and tile indices, REDUX methods, MPI-aware insertion.
 * No loops over tiles here. */
#ifndef TSR_RUNTIME_H
#define TSR_RUNTIME_H
#include <starpu.h>
#include "tsr_build_config.h"
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

/* What a task's op function is told besides its buffers and arguments: the
 * element type of its tiles (its codelet's) and where it runs (on a CUDA
 * worker: cuda 1 and the worker's stream, which may be the default stream,
 * NULL itself). */
typedef struct { tsr_dtype_t dtype; int cuda; void *stream; } tsr_exec_t;
/* A bf16 task reaches its op's function with bf16 tiles only on a CUDA
 * worker of an op with cuda_bf16 set; otherwise the op kit gives it float32
 * copies and ex->dtype TSR_FLOAT32. */

/* A tile (StarPU block interface) as depth consecutive column-major
 * matrices of element type dtype: rows x cols with leading dimension ld,
 * zstride bytes apart. */
typedef struct { void *ptr; int rows, cols, depth, ld; size_t zstride; tsr_dtype_t dtype; } tsr_view_t;
/* Reports a tile whose elements are not of the task's element type and
 * aborts (a broken invariant: tsr_submit refuses such tasks). */
void tsr_view_mismatch(size_t elemsize, tsr_dtype_t dtype);
/* The view of a buffer whose elements are of type dtype (the element size
 * is never taken for a type): a float32 operand of a bf16 task (fp32_in_bf16)
 * on a CUDA worker. */
static inline tsr_view_t tsr_view_typed(void *iface, tsr_dtype_t dtype)
{
    tsr_view_t v;
    size_t es = STARPU_BLOCK_GET_ELEMSIZE(iface);
    if (es != tsr_dtype_size(dtype))
        tsr_view_mismatch(es, dtype);
    v.ptr = (void *)STARPU_BLOCK_GET_PTR(iface);
    v.rows = (int)STARPU_BLOCK_GET_NX(iface);
    v.cols = (int)STARPU_BLOCK_GET_NY(iface);
    v.depth = (int)STARPU_BLOCK_GET_NZ(iface);
    v.ld = (int)STARPU_BLOCK_GET_LDY(iface);
    v.zstride = (size_t)STARPU_BLOCK_GET_LDZ(iface) * es;
    v.dtype = dtype;
    return v;
}
/* The view of a buffer of the task ex, of the task's element type. */
static inline tsr_view_t tsr_view(void *iface, const tsr_exec_t *ex) { return tsr_view_typed(iface, ex->dtype); }
/* How a kernel writes an output that its task has in mode m: STARPU_W
 * overwrites it, STARPU_RW and STARPU_REDUX add to it. */
static inline tsr_write_t tsr_write_of(enum starpu_data_access_mode m)
{
    return m == STARPU_W ? TSR_OVERWRITE : TSR_ACCUMULATE;
}
/* Pointer to matrix z of the view. */
static inline void *tsr_view_at(tsr_view_t v, int z) { return (char *)v.ptr + (size_t)z * v.zstride; }
/* Threads available to the running task (>1 on a combined worker). */
static inline int tsr_task_threads(void)
{
    int n = starpu_combined_worker_get_size();
    return n > 0 ? n : 1;
}

/* CUDA implementations exist when Tessera is built with CUDA and StarPU has
 * it; TSR_CUDA(f) names an op's CUDA function (TSR_CUDA_CODELET(f) a StarPU
 * codelet function), or NULL without them. A simulation build (StarPU on
 * SimGrid) compiles no CUDA code, but StarPU simulates CUDA workers, a
 * task's duration taken from performance models measured on a GPU: there
 * every op that has a CUDA function gets a stand-in that StarPU never calls,
 * so that the simulated GPU runs the tasks a real one would. */
#define TSR_HAVE_CUDA (TSR_USE_CUDA && STARPU_HAS_CUDA)
#ifdef STARPU_SIMGRID
#define TSR_SIMULATED_CUDA 1
#else
#define TSR_SIMULATED_CUDA 0
#endif
#if TSR_HAVE_CUDA
#define TSR_CUDA(f) (f)
#define TSR_CUDA_CODELET(f) (f)
#elif TSR_SIMULATED_CUDA
#define TSR_CUDA(f) tsr_simulated_cuda
#define TSR_CUDA_CODELET(f) tsr_simulated_cuda_codelet
#else
#define TSR_CUDA(f) NULL
#define TSR_CUDA_CODELET(f) NULL
#endif

typedef void (*tsr_op_func_t)(void *buffers[], void *cl_arg, const tsr_exec_t *ex);
#if TSR_SIMULATED_CUDA
void tsr_simulated_cuda(void *buffers[], void *cl_arg, const tsr_exec_t *ex);
void tsr_simulated_cuda_codelet(void *buffers[], void *cl_arg);
#endif

/* An op whose CPU kernel tsr_cpu_K(args) and CUDA kernel
 * tsr_cuda_K(stream, args) take the same arguments is written once, as one
 * function for both kinds of worker:
 *   static void NAME(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
 *   { <unpack the buffers>; TSR_KERNEL(ex, K, args); }
 * TSR_KERNEL calls tsr_cpu_K on a CPU worker and tsr_cuda_K on the worker's
 * stream (a failure is reported by tsr_kernel_check) on a CUDA worker. */
#if TSR_HAVE_CUDA
#define TSR_KERNEL(ex, K, ...)                                                                              \
    ((ex)->cuda ? tsr_kernel_check(tsr_cuda_##K((ex)->stream, __VA_ARGS__)) : tsr_cpu_##K(__VA_ARGS__))
#else
#define TSR_KERNEL(ex, K, ...) ((void)(ex), tsr_cpu_##K(__VA_ARGS__))
#endif

/* One operation of the runtime ("op"): its CPU and CUDA functions side by
 * side (the same function when TSR_KERNEL serves both), its buffers, and,
 * filled on first use, one StarPU codelet and one history-based perf model
 * (symbol tsr_<name>_<dtype>) per element type, so that float32 and float64
 * histories stay apart and a task's codelet tells its element type. A
 * codelet file defines each op as a static tsr_op_t with designated
 * initialisers:
 *     static tsr_op_t op_scale = { .name = "scale", .cpu = scale,
 *                                  .cuda = TSR_CUDA(scale),
 *                                  .nbuffers = 1, .modes = { STARPU_RW } };
 * nbuffers 0: the buffer count and the modes are given per task (a written
 * tile in W, RW or REDUX; optional tiles). */
typedef struct tsr_op tsr_op_t;
/* The priority of ops on a training step's critical path (the default is 0):
 * the activation-gradient GEMMs. A finished backward task makes one of them
 * ready together with several weight-gradient GEMMs; taken first, the chain
 * of activation gradients through the backward does not queue behind work
 * that nothing waits for yet. */
#define TSR_PRIO_CRITICAL 1
/* The codelet of one element type; cl first, so that a running task's
 * codelet leads back to its op and element type. */
typedef struct {
    struct starpu_codelet cl;
    tsr_op_t *op;
    tsr_dtype_t dtype;
    struct starpu_perfmodel model;
    char symbol[64];
} tsr_op_codelet_t;
struct tsr_op {
    const char *name;
    tsr_op_func_t cpu, cuda;     /* cuda NULL: the op runs on CPU workers only */
    int nbuffers;
    enum starpu_data_access_mode modes[TSR_MAX_TASK_TILES];
    int no_float64;              /* float32 kernels only: tasks on float64 tiles are refused
                                  * (bf16 tasks run them on float32 copies: op.c) */
    int cuda_bf16;               /* its CUDA function takes bf16 tiles itself; otherwise a
                                  * bf16 task on a GPU, as on a CPU, runs it on float32
                                  * copies (op.c) */
    unsigned fp32_in_bf16;       /* bit k: buffer k may stay float32 in a bf16 task (a loss,
                                  * a master weight); any other tile of it must be bf16 */
    int parallel;                /* BLAS-heavy: may run on combined CPU workers */
    int priority;                /* StarPU priority of its tasks (TSR_PRIO_CRITICAL or 0) */
    int timed_by_first_tile;     /* its tile count depends on the data: the perf model's
                                  * history is kept per first tile (runtime/op.c) */
    /* StarPU calls a reduction's init outside any task (nothing tells it the
     * element type), so that op gives its codelet functions per type */
    void (*cpu_of[TSR_NDTYPES])(void *buffers[], void *cl_arg);
    void (*cuda_of[TSR_NDTYPES])(void *buffers[], void *cl_arg);
    /* filled on first use (tsr_op_codelet) */
    int ready;
    tsr_op_codelet_t kind[TSR_NDTYPES];
};

/* Whether op has a CPU / a CUDA function for tasks of element type t (a bf16
 * task runs through the float32 function on float32 copies of its bf16
 * tiles, except on a GPU when the op's CUDA function takes bf16: cuda_bf16). */
int tsr_op_runs_on_cpu(const tsr_op_t *op, tsr_dtype_t t);
int tsr_op_runs_on_cuda(const tsr_op_t *op, tsr_dtype_t t);
/* The op's codelet for element type t (defined on first use; thread-safe). */
struct starpu_codelet *tsr_op_codelet(tsr_op_t *op, tsr_dtype_t t);

/* A CUDA (or CPU) codelet function reports its kernel's return code here:
 * a failure is logged with the task's name and makes tsr_wait() and
 * tsr_finalize() return TSR_ERUNTIME (a codelet cannot return an error). */
void tsr_kernel_check(int rc);

/* Submit one task of op on tiles, all of one element type (TSR_EDTYPE
 * otherwise). With MPI the task runs on exec_rank (-1: the owner of the
 * first written tile); a rank that neither executes it, nor owns any of its
 * tiles, nor holds a received copy of a tile it writes skips the call. arg (argsize bytes) is copied. */
int tsr_submit(tsr_op_t *op, const tsr_tile_t *tiles, const enum starpu_data_access_mode *modes,
               int ntiles, const void *arg, size_t argsize, int exec_rank, double flops);
/* Whether tsr_submit would insert a task on these tiles here (exec_rank -1)
 * rather than skip it: an algorithm that knows the task's tiles may leave
 * out the call, and what it computes for it, where this says 0. 1 without
 * MPI. */
int tsr_task_involves_me(const tsr_tile_t *tiles, const enum starpu_data_access_mode *modes, int ntiles);

/* The source tiles of a task, from buffer `first` on: pointers and leading
 * dimensions (float32 tiles, or bf16 ones on a CUDA worker when the op's
 * kernels take bf16 tiles themselves: the float type is the CPU's). */
typedef struct { const float *ptr[TSR_MAX_TASK_TILES]; int ld[TSR_MAX_TASK_TILES]; } tsr_sources_t;
tsr_sources_t tsr_task_sources(void *buffers[], int first, int n, const tsr_exec_t *ex);
/* A cl_arg of a fixed header followed by n items, in one malloc'd block
 * (NULL when out of memory); *total is its size. */
void *tsr_pack_args(const void *header, size_t hsize, const void *items, size_t isize, int n, size_t *total);

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

/* ---- accumulation protocol (STARPU_REDUX) ----------------------------------- */
/* Give the tile reduction methods: `add` (dst += src; its first buffer plain
 * STARPU_RW) and zero as the init (the identity of every add here). */
int tsr_tile_set_redux(tsr_tile_t A, tsr_op_t *add);
/* The element type's zero and add as reduction methods. */
int tsr_tile_enable_redux(tsr_tile_t A);
/* Start a STARPU_REDUX accumulation into c: the zero/add reduction methods;
 * then, on c's owner, c's value before the contributions: beta c (beta 0:
 * zeroed, 1: kept as it is) or, when bias is given, bias broadcast along c's
 * columns (bias->d NULL: zero); then, under MPI, every other rank starts its
 * own partial sum at zero, so a contribution may run on any rank
 * (tsr_redux_finish combines the partial sums). */
int tsr_redux_start(tsr_tile_t c, double beta, const tsr_tile_t *bias);
/* Combine the ranks' partial sums of tile A onto its owner (collective:
 * every rank calls it, in the same order; nothing to do with one rank). */
void tsr_tile_mpi_redux(tsr_tile_t A);
/* tsr_tile_mpi_redux on every tile of d. */
void tsr_redux_finish(tsr_desc_t *d);
#endif
