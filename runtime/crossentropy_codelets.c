/* The ops of the softmax cross-entropy (float32, bf16 logits on CUDA), and the
 * softmax-statistics reduction method.
 * Each op: its CPU function, its CUDA function, its table entry. */
#include <stdlib.h>
#include "tsr_runtime_crossentropy.h"
#include "tsr_compute.h"
#if TSR_HAVE_CUDA
#include "tsr_compute_cuda.h"
#endif

typedef struct { int rows; tsr_write_t mode; } stats_args_t;
typedef struct { int nrefs; } loss_args_t;                           /* + tsr_loss_ref_t[nrefs] */
typedef struct { int row0, V, cols; float dloss; } ce_backward_args_t; /* + int[cols] */

/* ---- softmax_stats: (max, sum exp) of each logits column, set or merged in ------- */

static void cpu_stats(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const stats_args_t *a = cl_arg;
    tsr_view_t S = tsr_view(buffers[0], ex), L = tsr_view(buffers[1], ex);
    tsr_cpu_softmax_stats(a->rows, L.cols, (const float *)L.ptr, L.ld, (float *)S.ptr, S.ld, a->mode);
}

#if TSR_HAVE_CUDA
/* float32 or bf16 logits; the statistics float32 (a bf16 task gets here
 * with float32 ones only: runtime/op.c) */
static void cuda_stats(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const stats_args_t *a = cl_arg;
    tsr_view_t S = tsr_view_typed(buffers[0], TSR_FLOAT32), L = tsr_view(buffers[1], ex);
    tsr_kernel_check(tsr_cuda_softmax_stats_typed(ex->stream, ex->dtype, a->rows, L.cols, L.ptr, L.ld, (float *)S.ptr,
                                                  S.ld, a->mode));
}
#endif

/* the statistics' mode (W, RW, REDUX) varies per task */
static tsr_op_t op_stats = { .name = "softmax_stats", .cpu = cpu_stats, .cuda = TSR_CUDA(cuda_stats),
                             .no_float64 = 1, .cuda_bf16 = 1, .fp32_in_bf16 = 1u << 0 /* float32 statistics */ };

/* ---- softmax_stats_merge: the statistics' reduction method -------------- */

static void stats_merge(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    (void)cl_arg;
    tsr_view_t D = tsr_view(buffers[0], ex), S = tsr_view(buffers[1], ex);
    TSR_KERNEL(ex, softmax_stats_merge, D.cols, (float *)D.ptr, D.ld, (const float *)S.ptr, S.ld);
}

/* a reduction method: first buffer plain STARPU_RW */
static tsr_op_t op_stats_merge = { .name = "softmax_stats_merge", .cpu = stats_merge,
                                   .cuda = TSR_CUDA(stats_merge), .nbuffers = 2,
                                   .modes = { STARPU_RW, STARPU_R }, .no_float64 = 1 };

/* ---- crossentropy_loss: the loss of the columns named by the refs ----------------- */

/* buffers: loss, stats, logits tiles */
static void cpu_loss(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const loss_args_t *a = cl_arg;
    tsr_view_t Lo = tsr_view(buffers[0], ex), S = tsr_view(buffers[1], ex);
    int nsrc = STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) - 2;
    tsr_sources_t x = tsr_task_sources(buffers, 2, nsrc, ex);
    tsr_cpu_crossentropy_loss_refs((float *)Lo.ptr, Lo.ld, (const float *)S.ptr, S.ld, x.ptr, x.ld, nsrc,
                                   (const tsr_loss_ref_t *)(a + 1), a->nrefs);
}

#if TSR_HAVE_CUDA
/* float32 or bf16 logits (x.ptr then points to bf16 tiles); the losses and
 * the statistics float32 */
static void cuda_loss(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const loss_args_t *a = cl_arg;
    tsr_view_t Lo = tsr_view_typed(buffers[0], TSR_FLOAT32), S = tsr_view_typed(buffers[1], TSR_FLOAT32);
    int nsrc = STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) - 2;
    tsr_sources_t x = tsr_task_sources(buffers, 2, nsrc, ex);
    tsr_kernel_check(tsr_cuda_crossentropy_loss_typed(ex->stream, ex->dtype, (float *)Lo.ptr, Lo.ld,
                                                      (const float *)S.ptr, S.ld, (const void *const *)x.ptr, x.ld,
                                                      nsrc, (const tsr_loss_ref_t *)(a + 1), a->nrefs));
}
#endif

/* the loss's mode and the logits tile count vary per task */
static tsr_op_t op_loss = { .name = "crossentropy_loss", .cpu = cpu_loss, .cuda = TSR_CUDA(cuda_loss),
                            .no_float64 = 1, .timed_by_first_tile = 1, .cuda_bf16 = 1,
                            .fp32_in_bf16 = 1u << 0 | 1u << 1 /* float32 losses and statistics */ };

/* ---- crossentropy_backward: logits = (softmax - onehot) * dloss, in place --------- */

static void cpu_ce_backward(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const ce_backward_args_t *a = cl_arg;
    tsr_view_t X = tsr_view(buffers[0], ex), S = tsr_view(buffers[1], ex);
    tsr_cpu_crossentropy_backward(X.rows, X.cols, (float *)X.ptr, X.ld, a->row0, a->V, (const float *)S.ptr, S.ld,
                                  (const int *)(a + 1), a->dloss);
}

#if TSR_HAVE_CUDA
/* float32 or bf16 logits, in place; the statistics float32 */
static void cuda_ce_backward(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const ce_backward_args_t *a = cl_arg;
    tsr_view_t X = tsr_view(buffers[0], ex), S = tsr_view_typed(buffers[1], TSR_FLOAT32);
    tsr_kernel_check(tsr_cuda_crossentropy_backward_typed(ex->stream, ex->dtype, X.rows, X.cols, X.ptr, X.ld, a->row0,
                                                          a->V, (const float *)S.ptr, S.ld, (const int *)(a + 1),
                                                          a->dloss));
}
#endif

static tsr_op_t op_ce_backward = { .name = "crossentropy_backward", .cpu = cpu_ce_backward,
                                   .cuda = TSR_CUDA(cuda_ce_backward), .nbuffers = 2,
                                   .modes = { STARPU_RW, STARPU_R }, .no_float64 = 1, .cuda_bf16 = 1,
                                   .fp32_in_bf16 = 1u << 1 /* float32 statistics */ };

int tsr_insert_softmax_stats(tsr_tile_t stats, enum starpu_data_access_mode smode, tsr_tile_t logits,
                             int rows, int exec_rank)
{
    stats_args_t a = { rows, tsr_write_of(smode) };
    tsr_tile_t tiles[2] = { stats, logits };
    enum starpu_data_access_mode modes[2] = { smode, STARPU_R };
    double flops = 3.0 * rows * tsr_tile_cols(logits.d, logits.j);
    return tsr_submit(&op_stats, tiles, modes, 2, &a, sizeof a, exec_rank, flops);
}

int tsr_tile_enable_softmax_redux(tsr_tile_t stats)
{
    return tsr_tile_set_redux(stats, &op_stats_merge); /* an all-zero statistic is the identity of the merge */
}

int tsr_insert_crossentropy_loss(tsr_tile_t loss, enum starpu_data_access_mode lmode, tsr_tile_t stats,
                                 const tsr_tile_t *logits, int nlogits, const tsr_loss_ref_t *refs,
                                 int nrefs)
{
    if (nlogits < 1 || nlogits > TSR_MAX_TASK_TILES - 2 || nrefs < 0)
        return TSR_EINVAL;
    tsr_tile_t tiles[TSR_MAX_TASK_TILES] = { loss, stats };
    enum starpu_data_access_mode modes[TSR_MAX_TASK_TILES] = { lmode, STARPU_R };
    for (int k = 0; k < nlogits; k++) {
        tiles[2 + k] = logits[k];
        modes[2 + k] = STARPU_R;
    }
    loss_args_t h = { nrefs };
    size_t size;
    void *arg = tsr_pack_args(&h, sizeof h, refs, sizeof *refs, nrefs, &size);
    if (!arg)
        return TSR_ENOMEM;
    int rc = tsr_submit(&op_loss, tiles, modes, 2 + nlogits, arg, size, -1, 3.0 * nrefs);
    free(arg);
    return rc;
}

int tsr_insert_crossentropy_backward(tsr_tile_t logits, tsr_tile_t stats, int row0, int V,
                                     const int *target_row, float dloss)
{
    int cols = tsr_tile_cols(logits.d, logits.j);
    ce_backward_args_t h = { row0, V, cols, dloss };
    size_t size;
    void *arg = tsr_pack_args(&h, sizeof h, target_row, sizeof *target_row, cols, &size);
    if (!arg)
        return TSR_ENOMEM;
    tsr_tile_t tiles[2] = { logits, stats };
    enum starpu_data_access_mode modes[2] = { STARPU_RW, STARPU_R };
    double flops = 4.0 * tsr_tile_rows(logits.d, logits.i) * cols;
    int rc = tsr_submit(&op_ce_backward, tiles, modes, 2, arg, size, -1, flops);
    free(arg);
    return rc;
}
