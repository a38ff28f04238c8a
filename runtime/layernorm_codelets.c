/* StarPU codelets of the LayerNorm and residual kernels, with history-based
 * perf models. LayerNorm codelets are float32 only; the residual has one
 * codelet per element type. Whether a kernel overwrites or adds to its output
 * follows the output's access mode (W: overwrite; RW, REDUX: add). */
#include <pthread.h>
#include <stdio.h>
#include "tsr_runtime_layernorm.h"
#include "tsr_compute_layernorm.h"

enum {
    LN_FWD, LN_SUM, LN_SQDEV, LN_STATS, LN_NORMALIZE,
    LN_BWD, LN_BWD_SUMS, LN_BWD_DINP, LN_BWD_PARAMS, LN_COUNT
};
static const char *ln_names[LN_COUNT] = {
    "tsr_layernorm_fwd_float32", "tsr_layernorm_sum_float32", "tsr_layernorm_sqdev_float32",
    "tsr_layernorm_stats_float32", "tsr_layernorm_normalize_float32", "tsr_layernorm_bwd_float32",
    "tsr_layernorm_bwd_sums_float32", "tsr_layernorm_bwd_dinp_float32", "tsr_layernorm_bwd_params_float32"
};

static struct starpu_codelet ln_codelets[LN_COUNT];
static struct starpu_perfmodel ln_models[LN_COUNT];
static struct starpu_codelet residual_codelets[TSR_NDTYPES];
static struct starpu_perfmodel residual_models[TSR_NDTYPES];
static char residual_symbols[TSR_NDTYPES][48];
static pthread_once_t ln_once = PTHREAD_ONCE_INIT;

/* Arguments of every task of this file. acc0/acc1: the kernel adds to its
 * first/second output instead of overwriting it. */
typedef struct {
    int C;
    float eps;
    int acc0, acc1;
} tsr_ln_args_t;

static const float *cf(tsr_view_t v) { return (const float *)v.ptr; }
static float *wf(tsr_view_t v) { return (float *)v.ptr; }

static void cpu_ln_fwd(void *buffers[], void *cl_arg)
{
    const tsr_ln_args_t *a = cl_arg;
    tsr_view_t X = tsr_view(buffers[0]), W = tsr_view(buffers[1]), B = tsr_view(buffers[2]);
    tsr_view_t O = tsr_view(buffers[3]), M = tsr_view(buffers[4]), R = tsr_view(buffers[5]);
    tsr_cpu_layernorm_fwd(X.rows, X.cols, cf(X), X.ld, cf(W), cf(B), wf(O), O.ld, wf(M), M.ld, wf(R), R.ld, a->eps);
}

static void cpu_ln_sum(void *buffers[], void *cl_arg)
{
    const tsr_ln_args_t *a = cl_arg;
    tsr_view_t X = tsr_view(buffers[0]), S = tsr_view(buffers[1]);
    tsr_cpu_layernorm_sum(X.rows, X.cols, cf(X), X.ld, wf(S), S.ld, a->acc0);
}

static void cpu_ln_sqdev(void *buffers[], void *cl_arg)
{
    const tsr_ln_args_t *a = cl_arg;
    tsr_view_t X = tsr_view(buffers[0]), S = tsr_view(buffers[1]), Q = tsr_view(buffers[2]);
    tsr_cpu_layernorm_sqdev(X.rows, X.cols, cf(X), X.ld, cf(S), S.ld, a->C, wf(Q), Q.ld, a->acc0);
}

static void cpu_ln_stats(void *buffers[], void *cl_arg)
{
    const tsr_ln_args_t *a = cl_arg;
    tsr_view_t M = tsr_view(buffers[0]), R = tsr_view(buffers[1]);
    tsr_cpu_layernorm_stats(M.cols, a->C, a->eps, wf(M), M.ld, wf(R), R.ld);
}

static void cpu_ln_normalize(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    tsr_view_t X = tsr_view(buffers[0]), W = tsr_view(buffers[1]), B = tsr_view(buffers[2]);
    tsr_view_t M = tsr_view(buffers[3]), R = tsr_view(buffers[4]), O = tsr_view(buffers[5]);
    tsr_cpu_layernorm_normalize(X.rows, X.cols, cf(X), X.ld, cf(W), cf(B), cf(M), M.ld, cf(R), R.ld, wf(O), O.ld);
}

static void cpu_ln_bwd(void *buffers[], void *cl_arg)
{
    const tsr_ln_args_t *a = cl_arg;
    tsr_view_t D = tsr_view(buffers[0]), X = tsr_view(buffers[1]), W = tsr_view(buffers[2]);
    tsr_view_t M = tsr_view(buffers[3]), R = tsr_view(buffers[4]), DI = tsr_view(buffers[5]);
    tsr_cpu_layernorm_bwd(X.rows, X.cols, cf(D), D.ld, cf(X), X.ld, cf(W), cf(M), M.ld, cf(R), R.ld,
                          wf(DI), DI.ld, a->acc0);
}

static void cpu_ln_bwd_sums(void *buffers[], void *cl_arg)
{
    const tsr_ln_args_t *a = cl_arg;
    tsr_view_t D = tsr_view(buffers[0]), X = tsr_view(buffers[1]), W = tsr_view(buffers[2]);
    tsr_view_t M = tsr_view(buffers[3]), R = tsr_view(buffers[4]), S = tsr_view(buffers[5]);
    tsr_cpu_layernorm_bwd_sums(X.rows, X.cols, cf(D), D.ld, cf(X), X.ld, cf(W), cf(M), M.ld, cf(R), R.ld,
                               wf(S), S.ld, a->acc0);
}

static void cpu_ln_bwd_dinp(void *buffers[], void *cl_arg)
{
    const tsr_ln_args_t *a = cl_arg;
    tsr_view_t D = tsr_view(buffers[0]), X = tsr_view(buffers[1]), W = tsr_view(buffers[2]);
    tsr_view_t M = tsr_view(buffers[3]), R = tsr_view(buffers[4]), S = tsr_view(buffers[5]);
    tsr_view_t DI = tsr_view(buffers[6]);
    tsr_cpu_layernorm_bwd_dinp(X.rows, X.cols, cf(D), D.ld, cf(X), X.ld, cf(W), cf(M), M.ld, cf(R), R.ld,
                               cf(S), S.ld, a->C, wf(DI), DI.ld, a->acc0);
}

static void cpu_ln_bwd_params(void *buffers[], void *cl_arg)
{
    const tsr_ln_args_t *a = cl_arg;
    tsr_view_t D = tsr_view(buffers[0]), X = tsr_view(buffers[1]), M = tsr_view(buffers[2]);
    tsr_view_t R = tsr_view(buffers[3]), DW = tsr_view(buffers[4]), DB = tsr_view(buffers[5]);
    tsr_cpu_layernorm_bwd_params(X.rows, X.cols, cf(D), D.ld, cf(X), X.ld, cf(M), M.ld, cf(R), R.ld,
                                 wf(DW), a->acc0, wf(DB), a->acc1);
}

static void cpu_residual_fwd(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    tsr_view_t A = tsr_view(buffers[0]), B = tsr_view(buffers[1]), O = tsr_view(buffers[2]);
    for (int z = 0; z < O.depth; z++)
        tsr_cpu_residual_fwd(O.dtype, O.rows, O.cols, tsr_view_at(A, z), A.ld, tsr_view_at(B, z), B.ld,
                             tsr_view_at(O, z), O.ld);
}

static void define_ln(int which, starpu_cpu_func_t cpu, int nbuffers, const enum starpu_data_access_mode *modes)
{
    tsr_codelet_init(&ln_codelets[which], &ln_models[which], ln_names[which], cpu, NULL, nbuffers, modes);
}

static void define_codelets(void)
{
    static const enum starpu_data_access_mode fwd[] = { STARPU_R, STARPU_R, STARPU_R, STARPU_W, STARPU_W, STARPU_W };
    static const enum starpu_data_access_mode stats[] = { STARPU_RW, STARPU_RW };
    static const enum starpu_data_access_mode normalize[] = { STARPU_R, STARPU_R, STARPU_R, STARPU_R, STARPU_R,
                                                              STARPU_W };
    static const enum starpu_data_access_mode residual[] = { STARPU_R, STARPU_R, STARPU_W };
    define_ln(LN_FWD, cpu_ln_fwd, 6, fwd);
    define_ln(LN_SUM, cpu_ln_sum, 2, NULL);
    define_ln(LN_SQDEV, cpu_ln_sqdev, 3, NULL);
    define_ln(LN_STATS, cpu_ln_stats, 2, stats);
    define_ln(LN_NORMALIZE, cpu_ln_normalize, 6, normalize);
    define_ln(LN_BWD, cpu_ln_bwd, 6, NULL);
    define_ln(LN_BWD_SUMS, cpu_ln_bwd_sums, 6, NULL);
    define_ln(LN_BWD_DINP, cpu_ln_bwd_dinp, 7, NULL);
    define_ln(LN_BWD_PARAMS, cpu_ln_bwd_params, 6, NULL);
    for (int t = 0; t < TSR_NDTYPES; t++) {
        snprintf(residual_symbols[t], sizeof residual_symbols[t], "tsr_residual_fwd_%s",
                 tsr_dtype_name((tsr_dtype_t)t));
        tsr_codelet_init(&residual_codelets[t], &residual_models[t], residual_symbols[t], cpu_residual_fwd, NULL,
                         3, residual);
    }
}

static struct starpu_codelet *ln_codelet(int which)
{
    pthread_once(&ln_once, define_codelets);
    return &ln_codelets[which];
}

static int adds(enum starpu_data_access_mode mode) { return mode != STARPU_W; }

/* Elements of a tile (for the flop estimates given to the perf models). */
static double tile_size(tsr_tile_t t)
{
    return (double)tsr_tile_rows(t.d, t.i) * tsr_tile_cols(t.d, t.j);
}

int tsr_insert_layernorm_fwd(tsr_tile_t x, tsr_tile_t w, tsr_tile_t b, tsr_tile_t out, tsr_tile_t mean,
                             tsr_tile_t rstd, float eps)
{
    tsr_ln_args_t args = { x.d->m, eps, 0, 0 };
    tsr_tile_t tiles[6] = { x, w, b, out, mean, rstd };
    enum starpu_data_access_mode modes[6] = { STARPU_R, STARPU_R, STARPU_R, STARPU_W, STARPU_W, STARPU_W };
    /* out first among the written tiles: the task runs where out lives */
    return tsr_submit(ln_codelet(LN_FWD), tiles, modes, 6, &args, sizeof args, -1, 8.0 * tile_size(x));
}

int tsr_insert_layernorm_sum(tsr_tile_t x, tsr_tile_t s, enum starpu_data_access_mode smode, int exec_rank)
{
    tsr_ln_args_t args = { x.d->m, 0.0f, adds(smode), 0 };
    tsr_tile_t tiles[2] = { x, s };
    enum starpu_data_access_mode modes[2] = { STARPU_R, smode };
    return tsr_submit(ln_codelet(LN_SUM), tiles, modes, 2, &args, sizeof args, exec_rank, tile_size(x));
}

int tsr_insert_layernorm_sqdev(tsr_tile_t x, tsr_tile_t s, int C, tsr_tile_t q,
                               enum starpu_data_access_mode qmode, int exec_rank)
{
    tsr_ln_args_t args = { C, 0.0f, adds(qmode), 0 };
    tsr_tile_t tiles[3] = { x, s, q };
    enum starpu_data_access_mode modes[3] = { STARPU_R, STARPU_R, qmode };
    return tsr_submit(ln_codelet(LN_SQDEV), tiles, modes, 3, &args, sizeof args, exec_rank, 3.0 * tile_size(x));
}

int tsr_insert_layernorm_stats(int C, float eps, tsr_tile_t mean, tsr_tile_t rstd)
{
    tsr_ln_args_t args = { C, eps, 0, 0 };
    tsr_tile_t tiles[2] = { mean, rstd };
    enum starpu_data_access_mode modes[2] = { STARPU_RW, STARPU_RW };
    return tsr_submit(ln_codelet(LN_STATS), tiles, modes, 2, &args, sizeof args, -1, 4.0 * tile_size(mean));
}

int tsr_insert_layernorm_normalize(tsr_tile_t x, tsr_tile_t w, tsr_tile_t b, tsr_tile_t mean, tsr_tile_t rstd,
                                   tsr_tile_t out)
{
    tsr_ln_args_t args = { x.d->m, 0.0f, 0, 0 };
    tsr_tile_t tiles[6] = { x, w, b, mean, rstd, out };
    enum starpu_data_access_mode modes[6] = { STARPU_R, STARPU_R, STARPU_R, STARPU_R, STARPU_R, STARPU_W };
    return tsr_submit(ln_codelet(LN_NORMALIZE), tiles, modes, 6, &args, sizeof args, -1, 4.0 * tile_size(x));
}

int tsr_insert_layernorm_bwd(tsr_tile_t dout, tsr_tile_t x, tsr_tile_t w, tsr_tile_t mean, tsr_tile_t rstd,
                             tsr_tile_t dinp, enum starpu_data_access_mode dmode)
{
    tsr_ln_args_t args = { x.d->m, 0.0f, adds(dmode), 0 };
    tsr_tile_t tiles[6] = { dout, x, w, mean, rstd, dinp };
    enum starpu_data_access_mode modes[6] = { STARPU_R, STARPU_R, STARPU_R, STARPU_R, STARPU_R, dmode };
    return tsr_submit(ln_codelet(LN_BWD), tiles, modes, 6, &args, sizeof args, -1, 14.0 * tile_size(x));
}

int tsr_insert_layernorm_bwd_sums(tsr_tile_t dout, tsr_tile_t x, tsr_tile_t w, tsr_tile_t mean, tsr_tile_t rstd,
                                  tsr_tile_t sums, enum starpu_data_access_mode smode, int exec_rank)
{
    tsr_ln_args_t args = { x.d->m, 0.0f, adds(smode), 0 };
    tsr_tile_t tiles[6] = { dout, x, w, mean, rstd, sums };
    enum starpu_data_access_mode modes[6] = { STARPU_R, STARPU_R, STARPU_R, STARPU_R, STARPU_R, smode };
    return tsr_submit(ln_codelet(LN_BWD_SUMS), tiles, modes, 6, &args, sizeof args, exec_rank,
                      6.0 * tile_size(x));
}

int tsr_insert_layernorm_bwd_dinp(tsr_tile_t dout, tsr_tile_t x, tsr_tile_t w, tsr_tile_t mean, tsr_tile_t rstd,
                                  tsr_tile_t sums, int C, tsr_tile_t dinp, enum starpu_data_access_mode dmode)
{
    tsr_ln_args_t args = { C, 0.0f, adds(dmode), 0 };
    tsr_tile_t tiles[7] = { dout, x, w, mean, rstd, sums, dinp };
    enum starpu_data_access_mode modes[7] = { STARPU_R, STARPU_R, STARPU_R, STARPU_R, STARPU_R, STARPU_R, dmode };
    return tsr_submit(ln_codelet(LN_BWD_DINP), tiles, modes, 7, &args, sizeof args, -1, 8.0 * tile_size(x));
}

int tsr_insert_layernorm_bwd_params(tsr_tile_t dout, tsr_tile_t x, tsr_tile_t mean, tsr_tile_t rstd,
                                    tsr_tile_t dw, enum starpu_data_access_mode wmode,
                                    tsr_tile_t db, enum starpu_data_access_mode bmode, int exec_rank)
{
    tsr_ln_args_t args = { x.d->m, 0.0f, adds(wmode), adds(bmode) };
    tsr_tile_t tiles[6] = { dout, x, mean, rstd, dw, db };
    enum starpu_data_access_mode modes[6] = { STARPU_R, STARPU_R, STARPU_R, STARPU_R, wmode, bmode };
    return tsr_submit(ln_codelet(LN_BWD_PARAMS), tiles, modes, 6, &args, sizeof args, exec_rank,
                      5.0 * tile_size(x));
}

int tsr_insert_residual_fwd(tsr_tile_t a, tsr_tile_t b, tsr_tile_t out)
{
    pthread_once(&ln_once, define_codelets);
    tsr_tile_t tiles[3] = { a, b, out };
    enum starpu_data_access_mode modes[3] = { STARPU_R, STARPU_R, STARPU_W };
    double flops = tile_size(out) * tsr_tile_depth(out.d, out.bi);
    return tsr_submit(&residual_codelets[out.d->dtype], tiles, modes, 3, NULL, 0, -1, flops);
}
