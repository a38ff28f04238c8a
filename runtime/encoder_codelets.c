/* The ops of the encoder: the column gather-add (float32, bf16 on CUDA).
 * Each op: its CPU function, its CUDA function, its table entry. */
#include <stdlib.h>
#include "tsr_runtime_encoder.h"
#include "tsr_compute.h"
#if TSR_HAVE_CUDA
#include "tsr_compute_cuda.h"
#endif

typedef struct { tsr_write_t mode; int nsrc, nmap; } gather_args_t;        /* + tsr_colmap_t[nmap] */

/* ---- gather_columns: dst[:, e.dst_col] += src[e.src][:, e.src_col] (encoder) ------ */

static void cpu_gather(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const gather_args_t *a = cl_arg;
    tsr_view_t D = tsr_view(buffers[0], ex);
    tsr_sources_t s = tsr_task_sources(buffers, 1, a->nsrc, ex);
    tsr_cpu_gather_add_columns(D.rows, D.cols, (float *)D.ptr, D.ld, a->mode, s.ptr, s.ld,
                               (const tsr_colmap_t *)(a + 1), a->nmap);
}

#if TSR_HAVE_CUDA
/* float32 or bf16 tiles (s.ptr then points to bf16 tiles) */
static void cuda_gather(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const gather_args_t *a = cl_arg;
    tsr_view_t D = tsr_view(buffers[0], ex);
    tsr_sources_t s = tsr_task_sources(buffers, 1, a->nsrc, ex);
    tsr_kernel_check(tsr_cuda_gather_add_columns_typed(ex->stream, ex->dtype, D.rows, D.cols, D.ptr, D.ld, a->mode,
                                                       (const void *const *)s.ptr, s.ld,
                                                       (const tsr_colmap_t *)(a + 1), a->nmap));
}
#endif

/* the destination's mode (W, RW, REDUX) and the source count vary per task */
static tsr_op_t op_gather = { .name = "gather_columns", .cpu = cpu_gather, .cuda = TSR_CUDA(cuda_gather),
                              .no_float64 = 1, .timed_by_first_tile = 1, .cuda_bf16 = 1 };

int tsr_insert_gather_columns(tsr_tile_t dst, enum starpu_data_access_mode dmode, const tsr_tile_t *src, int nsrc,
                              const tsr_colmap_t *map, int nmap, int exec_rank)
{
    if (nsrc < 0 || nsrc > TSR_MAX_TASK_TILES - 1 || nmap < 0)
        return TSR_EINVAL;
    tsr_tile_t tiles[TSR_MAX_TASK_TILES];
    enum starpu_data_access_mode modes[TSR_MAX_TASK_TILES];
    tiles[0] = dst;
    modes[0] = dmode;
    for (int k = 0; k < nsrc; k++) {
        tiles[1 + k] = src[k];
        modes[1 + k] = STARPU_R;
    }
    gather_args_t h = { tsr_write_of(dmode), nsrc, nmap };
    size_t size;
    void *arg = tsr_pack_args(&h, sizeof h, map, sizeof *map, nmap, &size);
    if (!arg)
        return TSR_ENOMEM;
    double flops = (double)nmap * tsr_tile_rows(dst.d, dst.i);
    int rc = tsr_submit(&op_gather, tiles, modes, 1 + nsrc, arg, size, exec_rank, flops);
    free(arg);
    return rc;
}
