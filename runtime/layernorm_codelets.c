/* The ops of LayerNorm (float32) and of the residual (float32 and float64).
 * Whether a kernel overwrites or adds to its output follows the output's
 * access mode (W: overwrite; RW, REDUX: add). Each op: its CPU function, its
 * CUDA function, its table entry. */
#include "tsr_runtime_layernorm.h"
#include "tsr_compute_layernorm.h"

/* Arguments of every task of this file. out0/out1: how the kernel writes
 * its first/second output. */
typedef struct {
    int C;
    float eps;
    tsr_write_t out0, out1;
} tsr_ln_args_t;

static const float *cf(tsr_view_t v) { return (const float *)v.ptr; }
static float *wf(tsr_view_t v) { return (float *)v.ptr; }

/* ---- layernorm_fwd --------------------------------------------------------- */

static void cpu_ln_fwd(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const tsr_ln_args_t *a = cl_arg;
    tsr_view_t X = tsr_view(buffers[0], ex), W = tsr_view(buffers[1], ex), B = tsr_view(buffers[2], ex);
    tsr_view_t O = tsr_view(buffers[3], ex), M = tsr_view(buffers[4], ex), R = tsr_view(buffers[5], ex);
    tsr_cpu_layernorm_fwd(X.rows, X.cols, cf(X), X.ld, cf(W), cf(B), wf(O), O.ld, wf(M), M.ld, wf(R), R.ld, a->eps);
}

#if TSR_HAVE_CUDA
/* float32 or bf16 tiles (mean and rstd too) */
static void cuda_ln_fwd(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const tsr_ln_args_t *a = cl_arg;
    tsr_view_t X = tsr_view(buffers[0], ex), W = tsr_view(buffers[1], ex), B = tsr_view(buffers[2], ex);
    tsr_view_t O = tsr_view(buffers[3], ex), M = tsr_view(buffers[4], ex), R = tsr_view(buffers[5], ex);
    tsr_kernel_check(tsr_cuda_layernorm_fwd_typed(ex->stream, ex->dtype, X.rows, X.cols, X.ptr, X.ld, W.ptr, B.ptr,
                                                  O.ptr, O.ld, M.ptr, M.ld, R.ptr, R.ld, a->eps));
}
#endif

static tsr_op_t op_ln_fwd = { .name = "layernorm_fwd", .cpu = cpu_ln_fwd, .cuda = TSR_CUDA(cuda_ln_fwd),
                              .nbuffers = 6, .modes = { STARPU_R, STARPU_R, STARPU_R, STARPU_W, STARPU_W, STARPU_W },
                              .no_float64 = 1, .cuda_bf16 = 1 };

/* ---- layernorm_sum --------------------------------------------------------- */

static void cpu_ln_sum(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const tsr_ln_args_t *a = cl_arg;
    tsr_view_t X = tsr_view(buffers[0], ex), S = tsr_view(buffers[1], ex);
    tsr_cpu_layernorm_sum(X.rows, X.cols, cf(X), X.ld, wf(S), S.ld, a->out0);
}

#if TSR_HAVE_CUDA
static void cuda_ln_sum(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const tsr_ln_args_t *a = cl_arg;
    tsr_view_t X = tsr_view(buffers[0], ex), S = tsr_view(buffers[1], ex);
    tsr_kernel_check(
        tsr_cuda_layernorm_sum(ex->stream, X.rows, X.cols, cf(X), X.ld, wf(S), S.ld, a->out0));
}
#endif

/* the sum's mode (W, RW, REDUX) varies per task */
static tsr_op_t op_ln_sum = { .name = "layernorm_sum", .cpu = cpu_ln_sum, .cuda = TSR_CUDA(cuda_ln_sum),
                              .no_float64 = 1 };

/* ---- layernorm_sqdev ------------------------------------------------------- */

static void ln_sqdev(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const tsr_ln_args_t *a = cl_arg;
    tsr_view_t X = tsr_view(buffers[0], ex), S = tsr_view(buffers[1], ex), Q = tsr_view(buffers[2], ex);
    TSR_KERNEL(ex, layernorm_sqdev, X.rows, X.cols, cf(X), X.ld, cf(S), S.ld, a->C, wf(Q), Q.ld, a->out0);
}

/* the output's mode varies per task */
static tsr_op_t op_ln_sqdev = { .name = "layernorm_sqdev", .cpu = ln_sqdev, .cuda = TSR_CUDA(ln_sqdev),
                                .no_float64 = 1 };

/* ---- layernorm_stats ------------------------------------------------------- */

static void cpu_ln_stats(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const tsr_ln_args_t *a = cl_arg;
    tsr_view_t M = tsr_view(buffers[0], ex), R = tsr_view(buffers[1], ex);
    tsr_cpu_layernorm_stats(M.cols, a->C, a->eps, wf(M), M.ld, wf(R), R.ld);
}

#if TSR_HAVE_CUDA
static void cuda_ln_stats(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const tsr_ln_args_t *a = cl_arg;
    tsr_view_t M = tsr_view(buffers[0], ex), R = tsr_view(buffers[1], ex);
    tsr_kernel_check(
        tsr_cuda_layernorm_stats(ex->stream, M.cols, a->C, a->eps, wf(M), M.ld, wf(R), R.ld));
}
#endif

static tsr_op_t op_ln_stats = { .name = "layernorm_stats", .cpu = cpu_ln_stats, .cuda = TSR_CUDA(cuda_ln_stats),
                                .nbuffers = 2, .modes = { STARPU_RW, STARPU_RW }, .no_float64 = 1 };

/* ---- layernorm_normalize --------------------------------------------------- */

static void ln_normalize(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    (void)cl_arg;
    tsr_view_t X = tsr_view(buffers[0], ex), W = tsr_view(buffers[1], ex), B = tsr_view(buffers[2], ex);
    tsr_view_t M = tsr_view(buffers[3], ex), R = tsr_view(buffers[4], ex), O = tsr_view(buffers[5], ex);
    TSR_KERNEL(ex, layernorm_normalize, X.rows, X.cols, cf(X), X.ld, cf(W), cf(B), cf(M), M.ld, cf(R), R.ld,
            wf(O), O.ld);
}

static tsr_op_t op_ln_normalize = { .name = "layernorm_normalize", .cpu = ln_normalize,
                                    .cuda = TSR_CUDA(ln_normalize), .nbuffers = 6,
                                    .modes = { STARPU_R, STARPU_R, STARPU_R, STARPU_R, STARPU_R, STARPU_W },
                                    .no_float64 = 1 };

/* ---- layernorm_bwd --------------------------------------------------------- */

static void cpu_ln_bwd(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const tsr_ln_args_t *a = cl_arg;
    tsr_view_t D = tsr_view(buffers[0], ex), X = tsr_view(buffers[1], ex), W = tsr_view(buffers[2], ex);
    tsr_view_t M = tsr_view(buffers[3], ex), R = tsr_view(buffers[4], ex), DI = tsr_view(buffers[5], ex);
    tsr_cpu_layernorm_bwd(X.rows, X.cols, cf(D), D.ld, cf(X), X.ld, cf(W), cf(M), M.ld, cf(R), R.ld, wf(DI), DI.ld,
                          a->out0);
}

#if TSR_HAVE_CUDA
/* float32 or bf16 tiles */
static void cuda_ln_bwd(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const tsr_ln_args_t *a = cl_arg;
    tsr_view_t D = tsr_view(buffers[0], ex), X = tsr_view(buffers[1], ex), W = tsr_view(buffers[2], ex);
    tsr_view_t M = tsr_view(buffers[3], ex), R = tsr_view(buffers[4], ex), DI = tsr_view(buffers[5], ex);
    tsr_kernel_check(tsr_cuda_layernorm_bwd_typed(ex->stream, ex->dtype, X.rows, X.cols, D.ptr, D.ld, X.ptr, X.ld,
                                                  W.ptr, M.ptr, M.ld, R.ptr, R.ld, DI.ptr, DI.ld, a->out0));
}
#endif

/* dinp's mode varies per task */
static tsr_op_t op_ln_bwd = { .name = "layernorm_bwd", .cpu = cpu_ln_bwd, .cuda = TSR_CUDA(cuda_ln_bwd),
                              .no_float64 = 1, .cuda_bf16 = 1 };

/* ---- layernorm_bwd_sums ---------------------------------------------------- */

static void ln_bwd_sums(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const tsr_ln_args_t *a = cl_arg;
    tsr_view_t D = tsr_view(buffers[0], ex), X = tsr_view(buffers[1], ex), W = tsr_view(buffers[2], ex);
    tsr_view_t M = tsr_view(buffers[3], ex), R = tsr_view(buffers[4], ex), S = tsr_view(buffers[5], ex);
    TSR_KERNEL(ex, layernorm_bwd_sums, X.rows, X.cols, cf(D), D.ld, cf(X), X.ld, cf(W), cf(M), M.ld, cf(R), R.ld,
            wf(S), S.ld,
                                        a->out0);
}

/* the sums' mode varies per task */
static tsr_op_t op_ln_bwd_sums = { .name = "layernorm_bwd_sums", .cpu = ln_bwd_sums,
                                   .cuda = TSR_CUDA(ln_bwd_sums), .no_float64 = 1,
                                   .fp32_in_bf16 = 1u << 5 /* the float32 workspace */ };

/* ---- layernorm_bwd_dinp ---------------------------------------------------- */

static void ln_bwd_dinp(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const tsr_ln_args_t *a = cl_arg;
    tsr_view_t D = tsr_view(buffers[0], ex), X = tsr_view(buffers[1], ex), W = tsr_view(buffers[2], ex);
    tsr_view_t M = tsr_view(buffers[3], ex), R = tsr_view(buffers[4], ex), S = tsr_view(buffers[5], ex);
    tsr_view_t DI = tsr_view(buffers[6], ex);
    TSR_KERNEL(ex, layernorm_bwd_dinp, X.rows, X.cols, cf(D), D.ld, cf(X), X.ld, cf(W), cf(M), M.ld, cf(R), R.ld,
            cf(S), S.ld,
                                        a->C, wf(DI), DI.ld, a->out0);
}

/* dinp's mode varies per task */
static tsr_op_t op_ln_bwd_dinp = { .name = "layernorm_bwd_dinp", .cpu = ln_bwd_dinp,
                                   .cuda = TSR_CUDA(ln_bwd_dinp), .no_float64 = 1,
                                   .fp32_in_bf16 = 1u << 5 /* the float32 workspace */ };

/* ---- layernorm_bwd_params -------------------------------------------------- */

static void cpu_ln_bwd_params(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const tsr_ln_args_t *a = cl_arg;
    tsr_view_t D = tsr_view(buffers[0], ex), X = tsr_view(buffers[1], ex), M = tsr_view(buffers[2], ex);
    tsr_view_t R = tsr_view(buffers[3], ex), DW = tsr_view(buffers[4], ex), DB = tsr_view(buffers[5], ex);
    tsr_cpu_layernorm_bwd_params(X.rows, X.cols, cf(D), D.ld, cf(X), X.ld, cf(M), M.ld, cf(R), R.ld, wf(DW), a->out0,
                                 wf(DB), a->out1);
}

#if TSR_HAVE_CUDA
/* float32 or bf16 tiles (float sums, dw and db rounded once) */
static void cuda_ln_bwd_params(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const tsr_ln_args_t *a = cl_arg;
    tsr_view_t D = tsr_view(buffers[0], ex), X = tsr_view(buffers[1], ex), M = tsr_view(buffers[2], ex);
    tsr_view_t R = tsr_view(buffers[3], ex), DW = tsr_view(buffers[4], ex), DB = tsr_view(buffers[5], ex);
    tsr_kernel_check(tsr_cuda_layernorm_bwd_params_typed(ex->stream, ex->dtype, X.rows, X.cols, D.ptr, D.ld, X.ptr,
                                                         X.ld, M.ptr, M.ld, R.ptr, R.ld, DW.ptr, a->out0, DB.ptr,
                                                         a->out1));
}
#endif

/* the gradients' modes vary per task */
static tsr_op_t op_ln_bwd_params = { .name = "layernorm_bwd_params", .cpu = cpu_ln_bwd_params,
                                     .cuda = TSR_CUDA(cuda_ln_bwd_params), .no_float64 = 1, .cuda_bf16 = 1 };

/* ---- residual_fwd ---------------------------------------------------------- */

static void residual_fwd(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    (void)cl_arg;
    tsr_view_t A = tsr_view(buffers[0], ex), B = tsr_view(buffers[1], ex), O = tsr_view(buffers[2], ex);
    for (int z = 0; z < O.depth; z++)
        TSR_KERNEL(ex, residual_fwd, O.dtype, O.rows, O.cols, tsr_view_at(A, z), A.ld, tsr_view_at(B, z), B.ld,
                                      tsr_view_at(O, z), O.ld);
}

static tsr_op_t op_residual_fwd = { .name = "residual_fwd", .cpu = residual_fwd,
                                    .cuda = TSR_CUDA(residual_fwd), .nbuffers = 3,
                                    .modes = { STARPU_R, STARPU_R, STARPU_W } };

/* ---- insert helpers ------------------------------------------------------------- */

/* Elements of a tile (for the flop estimates given to the perf models). */
static double tile_size(tsr_tile_t t) { return (double)tsr_tile_rows(t.d, t.i) * tsr_tile_cols(t.d, t.j); }

int tsr_insert_layernorm_fwd(tsr_tile_t x, tsr_tile_t w, tsr_tile_t b, tsr_tile_t out, tsr_tile_t mean, tsr_tile_t rstd,
                             float eps)
{
    tsr_ln_args_t args = {x.d->m, eps, TSR_OVERWRITE, TSR_OVERWRITE};
    tsr_tile_t tiles[6] = {x, w, b, out, mean, rstd};
    enum starpu_data_access_mode modes[6] = {STARPU_R, STARPU_R, STARPU_R, STARPU_W, STARPU_W, STARPU_W};
    /* out first among the written tiles: the task runs where out lives */
    return tsr_submit(&op_ln_fwd, tiles, modes, 6, &args, sizeof args, -1, 8.0 * tile_size(x));
}

int tsr_insert_layernorm_sum(tsr_tile_t x, tsr_tile_t s, enum starpu_data_access_mode smode, int exec_rank)
{
    tsr_ln_args_t args = {x.d->m, 0.0f, tsr_write_of(smode), TSR_OVERWRITE};
    tsr_tile_t tiles[2] = {x, s};
    enum starpu_data_access_mode modes[2] = {STARPU_R, smode};
    return tsr_submit(&op_ln_sum, tiles, modes, 2, &args, sizeof args, exec_rank, tile_size(x));
}

int tsr_insert_layernorm_sqdev(tsr_tile_t x, tsr_tile_t s, int C, tsr_tile_t q, enum starpu_data_access_mode qmode,
                               int exec_rank)
{
    tsr_ln_args_t args = {C, 0.0f, tsr_write_of(qmode), TSR_OVERWRITE};
    tsr_tile_t tiles[3] = {x, s, q};
    enum starpu_data_access_mode modes[3] = {STARPU_R, STARPU_R, qmode};
    return tsr_submit(&op_ln_sqdev, tiles, modes, 3, &args, sizeof args, exec_rank, 3.0 * tile_size(x));
}

int tsr_insert_layernorm_stats(int C, float eps, tsr_tile_t mean, tsr_tile_t rstd)
{
    tsr_ln_args_t args = {C, eps, TSR_OVERWRITE, TSR_OVERWRITE};
    tsr_tile_t tiles[2] = {mean, rstd};
    enum starpu_data_access_mode modes[2] = {STARPU_RW, STARPU_RW};
    return tsr_submit(&op_ln_stats, tiles, modes, 2, &args, sizeof args, -1, 4.0 * tile_size(mean));
}

int tsr_insert_layernorm_normalize(tsr_tile_t x, tsr_tile_t w, tsr_tile_t b, tsr_tile_t mean, tsr_tile_t rstd,
                                   tsr_tile_t out)
{
    tsr_ln_args_t args = {x.d->m, 0.0f, TSR_OVERWRITE, TSR_OVERWRITE};
    tsr_tile_t tiles[6] = {x, w, b, mean, rstd, out};
    enum starpu_data_access_mode modes[6] = {STARPU_R, STARPU_R, STARPU_R, STARPU_R, STARPU_R, STARPU_W};
    return tsr_submit(&op_ln_normalize, tiles, modes, 6, &args, sizeof args, -1, 4.0 * tile_size(x));
}

int tsr_insert_layernorm_bwd(tsr_tile_t dout, tsr_tile_t x, tsr_tile_t w, tsr_tile_t mean, tsr_tile_t rstd,
                             tsr_tile_t dinp, enum starpu_data_access_mode dmode)
{
    tsr_ln_args_t args = {x.d->m, 0.0f, tsr_write_of(dmode), TSR_OVERWRITE};
    tsr_tile_t tiles[6] = {dout, x, w, mean, rstd, dinp};
    enum starpu_data_access_mode modes[6] = {STARPU_R, STARPU_R, STARPU_R, STARPU_R, STARPU_R, dmode};
    return tsr_submit(&op_ln_bwd, tiles, modes, 6, &args, sizeof args, -1, 14.0 * tile_size(x));
}

int tsr_insert_layernorm_bwd_sums(tsr_tile_t dout, tsr_tile_t x, tsr_tile_t w, tsr_tile_t mean, tsr_tile_t rstd,
                                  tsr_tile_t sums, enum starpu_data_access_mode smode, int exec_rank)
{
    tsr_ln_args_t args = {x.d->m, 0.0f, tsr_write_of(smode), TSR_OVERWRITE};
    tsr_tile_t tiles[6] = {dout, x, w, mean, rstd, sums};
    enum starpu_data_access_mode modes[6] = {STARPU_R, STARPU_R, STARPU_R, STARPU_R, STARPU_R, smode};
    return tsr_submit(&op_ln_bwd_sums, tiles, modes, 6, &args, sizeof args, exec_rank, 6.0 * tile_size(x));
}

int tsr_insert_layernorm_bwd_dinp(tsr_tile_t dout, tsr_tile_t x, tsr_tile_t w, tsr_tile_t mean, tsr_tile_t rstd,
                                  tsr_tile_t sums, int C, tsr_tile_t dinp, enum starpu_data_access_mode dmode)
{
    tsr_ln_args_t args = {C, 0.0f, tsr_write_of(dmode), TSR_OVERWRITE};
    tsr_tile_t tiles[7] = {dout, x, w, mean, rstd, sums, dinp};
    enum starpu_data_access_mode modes[7] = {STARPU_R, STARPU_R, STARPU_R, STARPU_R, STARPU_R, STARPU_R, dmode};
    return tsr_submit(&op_ln_bwd_dinp, tiles, modes, 7, &args, sizeof args, -1, 8.0 * tile_size(x));
}

int tsr_insert_layernorm_bwd_params(tsr_tile_t dout, tsr_tile_t x, tsr_tile_t mean, tsr_tile_t rstd, tsr_tile_t dw,
                                    enum starpu_data_access_mode wmode, tsr_tile_t db,
                                    enum starpu_data_access_mode bmode, int exec_rank)
{
    tsr_ln_args_t args = {x.d->m, 0.0f, tsr_write_of(wmode), tsr_write_of(bmode)};
    tsr_tile_t tiles[6] = {dout, x, mean, rstd, dw, db};
    enum starpu_data_access_mode modes[6] = {STARPU_R, STARPU_R, STARPU_R, STARPU_R, wmode, bmode};
    return tsr_submit(&op_ln_bwd_params, tiles, modes, 6, &args, sizeof args, exec_rank, 5.0 * tile_size(x));
}

int tsr_insert_residual_fwd(tsr_tile_t a, tsr_tile_t b, tsr_tile_t out)
{
    tsr_tile_t tiles[3] = {a, b, out};
    enum starpu_data_access_mode modes[3] = {STARPU_R, STARPU_R, STARPU_W};
    double flops = tile_size(out) * tsr_tile_depth(out.d, out.bi);
    return tsr_submit(&op_residual_fwd, tiles, modes, 3, NULL, 0, -1, flops);
}
