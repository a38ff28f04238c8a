/* StarPU codelets of the encoder, the softmax cross-entropy and AdamW
 * (float32), with history-based perf models, and the softmax-statistics
 * reduction methods. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "tsr_runtime_misc.h"

enum {
    MCL_GATHER, MCL_STATS, MCL_STATS_MERGE, MCL_STATS_INIT, MCL_LOSS, MCL_CE_BACKWARD, MCL_ADAMW, MCL_COUNT
};
static struct starpu_codelet mcodelets[MCL_COUNT];
static struct starpu_perfmodel mmodels[MCL_COUNT];
static pthread_once_t mcodelets_once = PTHREAD_ONCE_INIT;

/* cl_arg layouts: a fixed header followed by a variable-length array */
typedef struct { int zero_first, nsrc, nmap; } gather_args_t;        /* + tsr_colmap_t[nmap] */
typedef struct { int rows, merge; } stats_args_t;
typedef struct { int nrefs; } loss_args_t;                           /* + tsr_target_ref_t[nrefs] */
typedef struct { int row0, V, cols; float dloss; } ce_backward_args_t; /* + int[cols] */

static void cpu_gather(void *buffers[], void *cl_arg)
{
    const gather_args_t *a = cl_arg;
    const tsr_colmap_t *map = (const tsr_colmap_t *)(a + 1);
    tsr_view_t D = tsr_view(buffers[0]);
    const float *src[TSR_MAX_TASK_TILES];
    int lds[TSR_MAX_TASK_TILES];
    for (int k = 0; k < a->nsrc; k++) {
        tsr_view_t S = tsr_view(buffers[1 + k]);
        src[k] = (const float *)S.ptr;
        lds[k] = S.ld;
    }
    tsr_cpu_gather_add_columns(D.rows, D.cols, (float *)D.ptr, D.ld, a->zero_first, src, lds, map, a->nmap);
}

static void cpu_stats(void *buffers[], void *cl_arg)
{
    const stats_args_t *a = cl_arg;
    tsr_view_t S = tsr_view(buffers[0]), L = tsr_view(buffers[1]);
    tsr_cpu_softmax_stats(a->rows, L.cols, (const float *)L.ptr, L.ld, (float *)S.ptr, S.ld, a->merge);
}

/* reduction: first buffer plain STARPU_RW */
static void cpu_stats_merge(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    tsr_view_t D = tsr_view(buffers[0]), S = tsr_view(buffers[1]);
    tsr_cpu_softmax_stats_merge(D.cols, (float *)D.ptr, D.ld, (const float *)S.ptr, S.ld);
}

static void cpu_stats_init(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    tsr_view_t S = tsr_view(buffers[0]);
    for (int c = 0; c < S.cols; c++)
        memset((float *)S.ptr + (size_t)c * S.ld, 0, (size_t)S.rows * sizeof(float));
}

static void cpu_loss(void *buffers[], void *cl_arg)
{
    const loss_args_t *a = cl_arg;
    const tsr_target_ref_t *refs = (const tsr_target_ref_t *)(a + 1);
    tsr_view_t Lo = tsr_view(buffers[0]), S = tsr_view(buffers[1]);
    float *loss = (float *)Lo.ptr;
    const float *stats = (const float *)S.ptr;
    for (int k = 0; k < a->nrefs; k++) {
        tsr_view_t X = tsr_view(buffers[2 + refs[k].src]);
        int c = refs[k].col;
        float x = ((const float *)X.ptr)[(size_t)c * X.ld + refs[k].row];
        loss[(size_t)c * Lo.ld] = tsr_cpu_crossentropy_loss(stats + (size_t)c * S.ld, x);
    }
}

static void cpu_ce_backward(void *buffers[], void *cl_arg)
{
    const ce_backward_args_t *a = cl_arg;
    const int *target_row = (const int *)(a + 1);
    tsr_view_t X = tsr_view(buffers[0]), S = tsr_view(buffers[1]);
    tsr_cpu_crossentropy_backward(X.rows, X.cols, (float *)X.ptr, X.ld, a->row0, a->V, (const float *)S.ptr,
                                  S.ld, target_row, a->dloss);
}

static void cpu_adamw(void *buffers[], void *cl_arg)
{
    const tsr_adamw_step_t *s = cl_arg;
    tsr_view_t P = tsr_view(buffers[0]), G = tsr_view(buffers[1]), M = tsr_view(buffers[2]),
               V = tsr_view(buffers[3]);
    for (int z = 0; z < P.depth; z++)
        tsr_cpu_adamw(P.rows, P.cols, tsr_view_at(P, z), P.ld, tsr_view_at(G, z), G.ld, tsr_view_at(M, z), M.ld,
                      tsr_view_at(V, z), V.ld, s);
}

static void define_mcodelets(void)
{
    static const enum starpu_data_access_mode merge_modes[] = { STARPU_RW, STARPU_R };
    static const enum starpu_data_access_mode init_modes[] = { STARPU_W };
    static const enum starpu_data_access_mode backward_modes[] = { STARPU_RW, STARPU_R };
    static const enum starpu_data_access_mode adamw_modes[] = { STARPU_RW, STARPU_R, STARPU_RW, STARPU_RW };
    /* NULL modes: the written tile's mode (W, RW, REDUX) or the buffer count varies per task */
    tsr_codelet_init(&mcodelets[MCL_GATHER], &mmodels[MCL_GATHER], "tsr_gather_columns_float32", cpu_gather,
                     NULL, 0, NULL);
    tsr_codelet_init(&mcodelets[MCL_STATS], &mmodels[MCL_STATS], "tsr_softmax_stats_float32", cpu_stats, NULL,
                     2, NULL);
    tsr_codelet_init(&mcodelets[MCL_STATS_MERGE], &mmodels[MCL_STATS_MERGE], "tsr_softmax_stats_merge_float32",
                     cpu_stats_merge, NULL, 2, merge_modes);
    tsr_codelet_init(&mcodelets[MCL_STATS_INIT], &mmodels[MCL_STATS_INIT], "tsr_softmax_stats_init_float32",
                     cpu_stats_init, NULL, 1, init_modes);
    tsr_codelet_init(&mcodelets[MCL_LOSS], &mmodels[MCL_LOSS], "tsr_crossentropy_loss_float32", cpu_loss, NULL,
                     0, NULL);
    tsr_codelet_init(&mcodelets[MCL_CE_BACKWARD], &mmodels[MCL_CE_BACKWARD], "tsr_crossentropy_backward_float32",
                     cpu_ce_backward, NULL, 2, backward_modes);
    tsr_codelet_init(&mcodelets[MCL_ADAMW], &mmodels[MCL_ADAMW], "tsr_adamw_float32", cpu_adamw, NULL, 4,
                     adamw_modes);
}

static struct starpu_codelet *mcodelet(int which)
{
    pthread_once(&mcodelets_once, define_mcodelets);
    return &mcodelets[which];
}

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

int tsr_insert_gather_columns(tsr_tile_t dst, enum starpu_data_access_mode dmode, int zero_first,
                              const tsr_tile_t *src, int nsrc, const tsr_colmap_t *map, int nmap,
                              int exec_rank)
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
    gather_args_t h = { zero_first, nsrc, nmap };
    size_t size;
    void *arg = pack_args(&h, sizeof h, map, sizeof *map, nmap, &size);
    if (!arg)
        return TSR_ENOMEM;
    double flops = (double)nmap * tsr_tile_rows(dst.d, dst.i);
    int rc = tsr_submit(mcodelet(MCL_GATHER), tiles, modes, 1 + nsrc, arg, size, exec_rank, flops);
    free(arg);
    return rc;
}

int tsr_insert_softmax_stats(tsr_tile_t stats, enum starpu_data_access_mode smode, tsr_tile_t logits,
                             int rows, int exec_rank)
{
    stats_args_t a = { rows, smode != STARPU_W };
    tsr_tile_t tiles[2] = { stats, logits };
    enum starpu_data_access_mode modes[2] = { smode, STARPU_R };
    double flops = 3.0 * rows * tsr_tile_cols(logits.d, logits.j);
    return tsr_submit(mcodelet(MCL_STATS), tiles, modes, 2, &a, sizeof a, exec_rank, flops);
}

int tsr_tile_enable_softmax_redux(tsr_tile_t stats)
{
    starpu_data_handle_t h = tsr_tile_handle(stats.d, stats.bi, stats.i, stats.j);
    if (!h)
        return TSR_ENOMEM;
    starpu_data_set_reduction_methods(h, mcodelet(MCL_STATS_MERGE), mcodelet(MCL_STATS_INIT));
    return TSR_SUCCESS;
}

int tsr_insert_crossentropy_loss(tsr_tile_t loss, enum starpu_data_access_mode lmode, tsr_tile_t stats,
                                 const tsr_tile_t *logits, int nlogits, const tsr_target_ref_t *refs,
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
    int rc = tsr_submit(mcodelet(MCL_LOSS), tiles, modes, 2 + nlogits, arg, size, -1, 3.0 * nrefs);
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
    int rc = tsr_submit(mcodelet(MCL_CE_BACKWARD), tiles, modes, 2, arg, size, -1, flops);
    free(arg);
    return rc;
}

int tsr_insert_adamw(tsr_tile_t p, tsr_tile_t g, tsr_tile_t m, tsr_tile_t v, const tsr_adamw_step_t *step)
{
    tsr_tile_t tiles[4] = { p, g, m, v };
    enum starpu_data_access_mode modes[4] = { STARPU_RW, STARPU_R, STARPU_RW, STARPU_RW };
    double flops = 12.0 * tsr_tile_depth(p.d, p.bi) * tsr_tile_rows(p.d, p.i) * tsr_tile_cols(p.d, p.j);
    return tsr_submit(mcodelet(MCL_ADAMW), tiles, modes, 4, step, sizeof *step, -1, flops);
}
