/* The ops of the encoder, the softmax cross-entropy and AdamW (float32),
 * and the softmax-statistics reduction methods. Each op: its CPU function,
 * its CUDA function, its table entry. */
#include <stdlib.h>
#include <string.h>
#include "tsr_runtime_misc.h"
#include "tsr_compute.h"
#if TSR_HAVE_CUDA
#include "tsr_compute_cuda.h"
#endif

/* cl_arg layouts: a fixed header followed by a variable-length array */
typedef struct { tsr_write_t mode; int nsrc, nmap; } gather_args_t;        /* + tsr_colmap_t[nmap] */
typedef struct { int rows; tsr_write_t mode; } stats_args_t;
typedef struct { int nrefs; } loss_args_t;                           /* + tsr_loss_ref_t[nrefs] */
typedef struct { int row0, V, cols; float dloss; } ce_backward_args_t; /* + int[cols] */

/* The source tiles of a task, from buffer `first` on: pointers and leading
 * dimensions (float32 tiles, or bf16 ones on a CUDA worker when the op's
 * kernels take bf16 tiles themselves: the float type is the CPU's). */
typedef struct { const float *ptr[TSR_MAX_TASK_TILES]; int ld[TSR_MAX_TASK_TILES]; } sources_t;

static sources_t sources(void *buffers[], int first, int n, const tsr_exec_t *ex)
{
    sources_t s = { { NULL }, { 0 } };
    for (int k = 0; k < n; k++) {
        tsr_view_t v = tsr_view(buffers[first + k], ex);
        s.ptr[k] = (const float *)v.ptr;
        s.ld[k] = v.ld;
    }
    return s;
}

/* ---- gather_columns: dst[:, e.dst_col] += src[e.src][:, e.src_col] (encoder) ------ */

static void cpu_gather(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const gather_args_t *a = cl_arg;
    tsr_view_t D = tsr_view(buffers[0], ex);
    sources_t s = sources(buffers, 1, a->nsrc, ex);
    tsr_cpu_gather_add_columns(D.rows, D.cols, (float *)D.ptr, D.ld, a->mode, s.ptr, s.ld,
                               (const tsr_colmap_t *)(a + 1), a->nmap);
}

#if TSR_HAVE_CUDA
/* float32 or bf16 tiles (s.ptr then points to bf16 tiles) */
static void cuda_gather(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const gather_args_t *a = cl_arg;
    tsr_view_t D = tsr_view(buffers[0], ex);
    sources_t s = sources(buffers, 1, a->nsrc, ex);
    tsr_kernel_check(tsr_cuda_gather_add_columns_typed(ex->stream, ex->dtype, D.rows, D.cols, D.ptr, D.ld, a->mode,
                                                       (const void *const *)s.ptr, s.ld,
                                                       (const tsr_colmap_t *)(a + 1), a->nmap));
}
#endif

/* the destination's mode (W, RW, REDUX) and the source count vary per task */
static tsr_op_t op_gather = { .name = "gather_columns", .cpu = cpu_gather, .cuda = TSR_CUDA(cuda_gather),
                              .no_float64 = 1, .timed_by_first_tile = 1, .cuda_bf16 = 1 };

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
    sources_t x = sources(buffers, 2, nsrc, ex);
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
    sources_t x = sources(buffers, 2, nsrc, ex);
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

/* ---- adamw: one AdamW step on a parameter tile ------------------------------------ */

static void adamw(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const tsr_adamw_step_t *s = cl_arg;
    tsr_view_t P = tsr_view(buffers[0], ex), G = tsr_view(buffers[1], ex), M = tsr_view(buffers[2], ex),
               V = tsr_view(buffers[3], ex);
    for (int z = 0; z < P.depth; z++)
        TSR_KERNEL(ex, adamw, P.rows, P.cols, tsr_view_at(P, z), P.ld, tsr_view_at(G, z), G.ld, tsr_view_at(M,
                z), M.ld,
                               tsr_view_at(V, z), V.ld, s);
}

static tsr_op_t op_adamw = { .name = "adamw", .cpu = adamw, .cuda = TSR_CUDA(adamw), .nbuffers = 4,
                             .modes = { STARPU_RW, STARPU_R, STARPU_RW, STARPU_RW }, .no_float64 = 1 };

/* ---- adamw_master: AdamW on float32 master weights, and their bf16 copy ---------------- */

static void adamw_master(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const tsr_adamw_step_t *s = cl_arg;
    tsr_view_t P = tsr_view(buffers[0], ex), G = tsr_view(buffers[1], ex), M = tsr_view(buffers[2], ex),
               V = tsr_view(buffers[3], ex), O = tsr_view(buffers[4], ex);
    for (int z = 0; z < P.depth; z++)
        tsr_cpu_adamw_master(P.rows, P.cols, tsr_view_at(P, z), P.ld, tsr_view_at(G, z), G.ld, tsr_view_at(M, z),
                             M.ld, tsr_view_at(V, z), V.ld, tsr_view_at(O, z), O.ld, s);
}

#if TSR_HAVE_CUDA
/* the master, m and v are float32 whatever the task's type */
static void cuda_adamw_master(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const tsr_adamw_step_t *s = cl_arg;
    tsr_view_t P = tsr_view_typed(buffers[0], TSR_FLOAT32), G = tsr_view(buffers[1], ex),
               M = tsr_view_typed(buffers[2], TSR_FLOAT32), V = tsr_view_typed(buffers[3], TSR_FLOAT32),
               O = tsr_view(buffers[4], ex);
    for (int z = 0; z < P.depth; z++)
        tsr_kernel_check(tsr_cuda_adamw_master(ex->stream, ex->dtype, P.rows, P.cols, tsr_view_at(P, z), P.ld,
                                               tsr_view_at(G, z), G.ld, tsr_view_at(M, z), M.ld, tsr_view_at(V, z),
                                               V.ld, tsr_view_at(O, z), O.ld, s));
}
#endif

/* master, m, v stay float32 in the bf16 task; the gradient and the copy are bf16 */
static tsr_op_t op_adamw_master = { .name = "adamw_master", .cpu = adamw_master,
                                    .cuda = TSR_CUDA(cuda_adamw_master), .cuda_bf16 = 1, .nbuffers = 5,
                                    .modes = { STARPU_RW, STARPU_R, STARPU_RW, STARPU_RW, STARPU_W },
                                    .no_float64 = 1, .fp32_in_bf16 = 1u << 0 | 1u << 2 | 1u << 3 };

/* ---- insert helpers ------------------------------------------------------------------- */

/* A header followed by n items, in one malloc'd block (NULL when out of memory). */
static void *pack_args(const void *header, size_t hsize, const void *items, size_t isize, int n, size_t *total)
{
    *total = hsize + isize * (size_t)n;
    char *buf = malloc(*total);
    if (!buf)
        return NULL;
    memcpy(buf, header, hsize);
    if (n > 0)
        memcpy(buf + hsize, items, isize * (size_t)n);
    return buf;
}

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
    void *arg = pack_args(&h, sizeof h, map, sizeof *map, nmap, &size);
    if (!arg)
        return TSR_ENOMEM;
    double flops = (double)nmap * tsr_tile_rows(dst.d, dst.i);
    int rc = tsr_submit(&op_gather, tiles, modes, 1 + nsrc, arg, size, exec_rank, flops);
    free(arg);
    return rc;
}

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
    void *arg = pack_args(&h, sizeof h, refs, sizeof *refs, nrefs, &size);
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
    void *arg = pack_args(&h, sizeof h, target_row, sizeof *target_row, cols, &size);
    if (!arg)
        return TSR_ENOMEM;
    tsr_tile_t tiles[2] = { logits, stats };
    enum starpu_data_access_mode modes[2] = { STARPU_RW, STARPU_R };
    double flops = 4.0 * tsr_tile_rows(logits.d, logits.i) * cols;
    int rc = tsr_submit(&op_ce_backward, tiles, modes, 2, arg, size, -1, flops);
    free(arg);
    return rc;
}

int tsr_insert_adamw(tsr_tile_t p, tsr_tile_t g, tsr_tile_t m, tsr_tile_t v, const tsr_adamw_step_t *step)
{
    tsr_tile_t tiles[4] = { p, g, m, v };
    enum starpu_data_access_mode modes[4] = { STARPU_RW, STARPU_R, STARPU_RW, STARPU_RW };
    double flops = 12.0 * tsr_tile_depth(p.d, p.bi) * tsr_tile_rows(p.d, p.i) * tsr_tile_cols(p.d, p.j);
    return tsr_submit(&op_adamw, tiles, modes, 4, step, sizeof *step, -1, flops);
}

int tsr_insert_adamw_master(tsr_tile_t p, tsr_tile_t g, tsr_tile_t m, tsr_tile_t v, tsr_tile_t out,
                            const tsr_adamw_step_t *step)
{
    tsr_tile_t tiles[5] = { p, g, m, v, out };
    enum starpu_data_access_mode modes[5] = { STARPU_RW, STARPU_R, STARPU_RW, STARPU_RW, STARPU_W };
    double flops = 12.0 * tsr_tile_depth(p.d, p.bi) * tsr_tile_rows(p.d, p.i) * tsr_tile_cols(p.d, p.j);
    return tsr_submit(&op_adamw_master, tiles, modes, 5, step, sizeof *step, -1, flops);
}
