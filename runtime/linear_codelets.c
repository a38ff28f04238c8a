/* The ops of the fused linear layers (float32 only): the fused GEMM task
 * (bias, GeLU epilogue, bias gradient, head-split operands) as three ops so
 * that forward, backward-data and backward-weight tasks keep separate
 * perf-model histories, and the small element-wise ops (bias, GeLU, row
 * sums, head reshape) used by REDUX epilogues, fallbacks and the unfused
 * variants. Each op: its CPU function, its CUDA function, its table entry. */
#include <stdlib.h>
#include <string.h>
#include "tsr_runtime_linear.h"
#if TSR_HAVE_CUDA
#include <starpu_cublas_v2.h>
#endif

enum { LIN_BIAS = 1, LIN_GELU = 2, LIN_DBIAS = 4 };

typedef struct {
    tsr_trans_t ta, tb;
    float alpha, beta, dbias_beta;
    tsr_chunk_dim_t chunk;
    int hd, heads, flags;
} lin_args_t;

typedef struct { float beta; } scalar_arg_t;

/* TSR_LINEAR_PER_HEAD=1 in the environment: head tiles go through one GEMM
 * per head instead of the workspace (for tests and timing comparisons). */
static int per_head_gemms(void)
{
    static int value = -1;
    if (value < 0) {
        const char *env = getenv("TSR_LINEAR_PER_HEAD");
        value = env && *env && strcmp(env, "0") != 0;
    }
    return value;
}
typedef struct { tsr_heads_geom_t g; int to_heads; float beta; } heads_arg_t;

/* ---- linear_fwd / _bwd_data / _bwd_weight: the fused GEMM task -------------------- */

enum { CUT_NONE, CUT_ROWS, CUT_COLS };

static int logical_rows(tsr_view_t v, int heads) { return heads ? v.depth * v.rows : v.rows; }

/* Where chunk c of an operand starts: a head tile is cut between its
 * matrices, a 2D tile every hd rows or every hd columns. */
static tsr_chunked_t chunked(tsr_view_t v, int heads, int cut, int hd)
{
    tsr_chunked_t c = { (float *)v.ptr, v.ld, 0 };
    if (cut == CUT_ROWS)
        c.cstride = heads ? v.zstride / tsr_dtype_size(v.dtype) : (size_t)hd;
    else if (cut == CUT_COLS)
        c.cstride = (size_t)hd * v.ld;
    return c;
}

/* Storage dimension of an operand that the chunked GEMM dimension d runs
 * along: op(X) spans the GEMM dimensions rows x cols, X stored as op(X)
 * (TSR_NOTRANS) or transposed. */
static int cut_of(tsr_chunk_dim_t d, tsr_chunk_dim_t rows, tsr_chunk_dim_t cols, tsr_trans_t t)
{
    if (d == rows)
        return t == TSR_NOTRANS ? CUT_ROWS : CUT_COLS;
    if (d == cols)
        return t == TSR_NOTRANS ? CUT_COLS : CUT_ROWS;
    return CUT_NONE;
}

/* op(A) is m x k, op(B) k x n, C m x n. */
static int cut_of_a(tsr_chunk_dim_t d, tsr_trans_t ta) { return cut_of(d, TSR_CHUNK_M, TSR_CHUNK_K, ta); }
static int cut_of_b(tsr_chunk_dim_t d, tsr_trans_t tb) { return cut_of(d, TSR_CHUNK_K, TSR_CHUNK_N, tb); }
static int cut_of_c(tsr_chunk_dim_t d) { return cut_of(d, TSR_CHUNK_M, TSR_CHUNK_N, TSR_NOTRANS); }

/* The GEMM with its head operand (A, B or C, depth > 1) seen as one 2D
 * matrix through a workspace: one BLAS call on the whole tile (see
 * tsr_compute_linear.h). Returns 0 when the workspace cannot be allocated. */
static int gemm_through_workspace(const lin_args_t *a, tsr_view_t A, tsr_view_t B, tsr_view_t C, float beta, int m,
                                  int n, int k)
{
    int ha = a->heads & TSR_LIN_HEADS_A, hb = a->heads & TSR_LIN_HEADS_B, hc = a->heads & TSR_LIN_HEADS_C;
    tsr_view_t H = ha ? A : hb ? B : C;
    int rows = H.depth * H.rows;
    size_t hstride = H.zstride / sizeof(float);
    float *w = malloc(sizeof(float) * (size_t)rows * H.cols);
    if (!w)
        return 0;
    int nt = tsr_task_threads();
    if (hc) {
        tsr_cpu_gemm(TSR_FLOAT32, a->ta, a->tb, m, n, k, a->alpha, A.ptr, A.ld, B.ptr, B.ld, 0.0, w, rows, nt);
        tsr_cpu_heads_unpack(C.depth, C.rows, C.cols, w, rows, beta, (float *)C.ptr, C.ld, hstride);
    } else {
        tsr_cpu_heads_pack(H.depth, H.rows, H.cols, (const float *)H.ptr, H.ld, hstride, w, rows);
        tsr_cpu_gemm(TSR_FLOAT32, a->ta, a->tb, m, n, k, a->alpha, ha ? w : (float *)A.ptr, ha ? rows : A.ld,
                     hb ? w : (float *)B.ptr, hb ? rows : B.ld, beta, C.ptr, C.ld, nt);
    }
    free(w);
    return 1;
}

/* A fused GEMM task's buffers (A, B, C, then the optional bias, GeLU output
 * and bias gradient) and its GEMM sizes, the same for the CPU and CUDA sides. */
typedef struct {
    tsr_view_t A, B, C, out;
    float *bias, *dbias;
    int ha, hb, hc; /* which operand is a head tile */
    int m, n, k;
} lin_operands_t;

static lin_operands_t linear_operands(void *buffers[], const lin_args_t *a, const tsr_exec_t *ex)
{
    lin_operands_t o = { .A = tsr_view(buffers[0], ex), .B = tsr_view(buffers[1], ex), .C = tsr_view(buffers[2], ex) };
    o.ha = a->heads & TSR_LIN_HEADS_A;
    o.hb = a->heads & TSR_LIN_HEADS_B;
    o.hc = a->heads & TSR_LIN_HEADS_C;
    int next = 3;
    if (a->flags & LIN_BIAS)
        o.bias = (float *)tsr_view(buffers[next++], ex).ptr;
    if (a->flags & LIN_GELU)
        o.out = tsr_view(buffers[next++], ex);
    if (a->flags & LIN_DBIAS)
        o.dbias = (float *)tsr_view(buffers[next++], ex).ptr;
    o.m = logical_rows(o.C, o.hc);
    o.n = o.C.cols;
    o.k = a->ta == TSR_NOTRANS ? o.A.cols : logical_rows(o.A, o.ha);
    return o;
}

static void cpu_linear_gemm(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const lin_args_t *a = cl_arg;
    lin_operands_t o = linear_operands(buffers, a, ex);
    tsr_view_t A = o.A, B = o.B, C = o.C;
    float beta = a->beta;
    if (o.bias) {
        for (int z = 0; z < C.depth; z++)
            tsr_cpu_bias_fill(C.rows, C.cols, o.bias + (size_t)z * C.rows, tsr_view_at(C, z), C.ld);
        beta = 1.0f;
    }
    /* a head tile of several heads: one GEMM through a workspace; otherwise
     * (or without memory) one GEMM per head, straight on the tiles */
    int depth = o.ha ? A.depth : o.hb ? B.depth : o.hc ? C.depth : 1;
    if (depth < 2 || per_head_gemms() || !gemm_through_workspace(a, A, B, C, beta, o.m, o.n, o.k))
        tsr_cpu_gemm_chunked(a->ta, a->tb, o.m, o.n, o.k, a->chunk, a->hd, a->alpha,
                             chunked(A, o.ha, cut_of_a(a->chunk, a->ta), a->hd),
                             chunked(B, o.hb, cut_of_b(a->chunk, a->tb), a->hd), beta,
                             chunked(C, o.hc, cut_of_c(a->chunk), a->hd), tsr_task_threads());
    if (a->flags & LIN_GELU)
        for (int z = 0; z < C.depth; z++)
            tsr_cpu_gelu_forward(C.rows, C.cols, tsr_view_at(C, z), C.ld, tsr_view_at(o.out, z), o.out.ld);
    /* B's rows (head z: rows z*B.rows ..) are the bias gradient's rows */
    if (o.dbias)
        for (int z = 0; z < B.depth; z++)
            tsr_cpu_rowsum(B.rows, B.cols, tsr_view_at(B, z), B.ld, a->dbias_beta, o.dbias + (size_t)z * B.rows);
}

#if TSR_HAVE_CUDA
/* Element i of the vector at p, of the task's element type. */
static void *element(void *p, size_t i, const tsr_exec_t *ex) { return (char *)p + i * tsr_dtype_size(ex->dtype); }

/* The same steps as cpu_linear_gemm; head tiles go through one GEMM per head.
 * float32 or bf16 tiles (bf16: cuBLAS's bf16 GEMMs, float32 sums). */
static void cuda_linear_gemm(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const lin_args_t *a = cl_arg;
    void *stream = ex->stream;
    tsr_dtype_t t = ex->dtype;
    lin_operands_t o = linear_operands(buffers, a, ex);
    tsr_view_t A = o.A, B = o.B, C = o.C;
    float beta = a->beta;
    if (o.bias) {
        for (int z = 0; z < C.depth; z++)
            tsr_kernel_check(tsr_cuda_bias_fill_typed(stream, t, C.rows, C.cols,
                                                      element(o.bias, (size_t)z * C.rows, ex), tsr_view_at(C, z),
                                                      C.ld));
        beta = 1.0f;
    }
    tsr_kernel_check(tsr_cuda_gemm_chunked(starpu_cublas_get_local_handle(), t, a->ta, a->tb, o.m, o.n, o.k,
                                           a->chunk, a->hd, a->alpha,
                                           chunked(A, o.ha, cut_of_a(a->chunk, a->ta), a->hd),
                                           chunked(B, o.hb, cut_of_b(a->chunk, a->tb), a->hd), beta,
                                           chunked(C, o.hc, cut_of_c(a->chunk), a->hd)));
    if (a->flags & LIN_GELU)
        for (int z = 0; z < C.depth; z++)
            tsr_kernel_check(tsr_cuda_gelu_forward_typed(stream, t, C.rows, C.cols, tsr_view_at(C, z), C.ld,
                                                         tsr_view_at(o.out, z), o.out.ld));
    if (o.dbias)
        for (int z = 0; z < B.depth; z++)
            tsr_kernel_check(tsr_cuda_rowsum_typed(stream, t, B.rows, B.cols, tsr_view_at(B, z), B.ld,
                                                   a->dbias_beta, element(o.dbias, (size_t)z * B.rows, ex)));
}
#endif

/* C's mode (W, RW, REDUX) and the optional tiles vary per task; indexed by tsr_lin_kind_t */
static tsr_op_t op_linear[TSR_LIN_NKINDS] = {
    { .name = "linear_fwd", .cpu = cpu_linear_gemm, .cuda = TSR_CUDA(cuda_linear_gemm), .parallel = 1,
      .no_float64 = 1, .cuda_bf16 = 1 },
    { .name = "linear_bwd_data", .cpu = cpu_linear_gemm, .cuda = TSR_CUDA(cuda_linear_gemm), .parallel = 1,
      .no_float64 = 1, .cuda_bf16 = 1,
      .priority = TSR_PRIO_CRITICAL },
    { .name = "linear_bwd_weight", .cpu = cpu_linear_gemm, .cuda = TSR_CUDA(cuda_linear_gemm), .parallel = 1,
      .no_float64 = 1, .cuda_bf16 = 1 },
};

/* ---- bias_fill: C = bias broadcast along columns (no bias: 0) ----------------------- */

static void bias_fill(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    (void)cl_arg;
    tsr_view_t C = tsr_view(buffers[0], ex);
    const float *bias = STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) > 1
                            ? (const float *)tsr_view(buffers[1], ex).ptr : NULL;
    for (int z = 0; z < C.depth; z++)
        TSR_KERNEL(ex, bias_fill, C.rows, C.cols, bias ? bias + (size_t)z * C.rows : NULL, tsr_view_at(C, z), C.ld);
}

/* buffers: C (W), and the bias (R) when there is one */
static tsr_op_t op_bias_fill = { .name = "bias_fill", .cpu = bias_fill, .cuda = TSR_CUDA(bias_fill),
                                 .no_float64 = 1 };

/* ---- bias_add: C += bias broadcast along columns ---------------------------------------- */

static void bias_add(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    (void)cl_arg;
    tsr_view_t C = tsr_view(buffers[0], ex), bias = tsr_view(buffers[1], ex);
    for (int z = 0; z < C.depth; z++)
        TSR_KERNEL(ex, bias_add, C.rows, C.cols, (const float *)bias.ptr + (size_t)z * C.rows, tsr_view_at(C, z),
                C.ld);
}

static tsr_op_t op_bias_add = { .name = "bias_add", .cpu = bias_add, .cuda = TSR_CUDA(bias_add),
                                .nbuffers = 2, .modes = { STARPU_RW, STARPU_R }, .no_float64 = 1 };

/* ---- gelu_fwd: out = gelu(pre) ----------------------------------------------------------- */

/* buffers: pre, out; or out alone (in place) */
static void gelu_forward(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    (void)cl_arg;
    int nbuf = STARPU_TASK_GET_NBUFFERS(starpu_task_get_current());
    tsr_view_t pre = tsr_view(buffers[0], ex), out = nbuf > 1 ? tsr_view(buffers[1], ex) : pre;
    for (int z = 0; z < out.depth; z++)
        TSR_KERNEL(ex, gelu_forward, out.rows, out.cols, tsr_view_at(pre, z), pre.ld, tsr_view_at(out, z), out.ld);
}

/* buffers: pre (R), out (W); or out alone (RW, in place) */
static tsr_op_t op_gelu_fwd = { .name = "gelu_fwd", .cpu = gelu_forward, .cuda = TSR_CUDA(gelu_forward),
                                .no_float64 = 1 };

/* ---- gelu_bwd: dpre = dout * gelu'(pre) ---------------------------------------------------- */

/* buffers: pre, dout, dpre; or pre, dout (in place: dpre is dout) */
static void gelu_backward_views(void *buffers[], const tsr_exec_t *ex, tsr_view_t *pre, tsr_view_t *dout,
                                tsr_view_t *dpre)
{
    int nbuf = STARPU_TASK_GET_NBUFFERS(starpu_task_get_current());
    *pre = tsr_view(buffers[0], ex);
    *dout = tsr_view(buffers[1], ex);
    *dpre = nbuf > 2 ? tsr_view(buffers[2], ex) : *dout;
}

static void cpu_gelu_backward(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    (void)cl_arg;
    tsr_view_t pre, dout, dpre;
    gelu_backward_views(buffers, ex, &pre, &dout, &dpre);
    for (int z = 0; z < dpre.depth; z++)
        tsr_cpu_gelu_backward(dpre.rows, dpre.cols, tsr_view_at(pre, z), pre.ld, tsr_view_at(dout, z), dout.ld,
                              tsr_view_at(dpre, z), dpre.ld);
}

#if TSR_HAVE_CUDA
/* float32 or bf16 tiles */
static void cuda_gelu_backward(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    (void)cl_arg;
    tsr_view_t pre, dout, dpre;
    gelu_backward_views(buffers, ex, &pre, &dout, &dpre);
    for (int z = 0; z < dpre.depth; z++)
        tsr_kernel_check(tsr_cuda_gelu_backward_typed(ex->stream, ex->dtype, dpre.rows, dpre.cols, tsr_view_at(pre, z),
                                                      pre.ld, tsr_view_at(dout, z), dout.ld, tsr_view_at(dpre, z),
                                                      dpre.ld));
}
#endif

/* buffers: pre (R), dout (R), dpre (W); or pre (R), dout (RW, in place) */
static tsr_op_t op_gelu_bwd = { .name = "gelu_bwd", .cpu = cpu_gelu_backward,
                                .cuda = TSR_CUDA(cuda_gelu_backward), .no_float64 = 1, .cuda_bf16 = 1 };

/* ---- rowsum: y = beta y + row sums of X ---------------------------------------------------- */

static void rowsum(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const scalar_arg_t *a = cl_arg;
    tsr_view_t X = tsr_view(buffers[0], ex), y = tsr_view(buffers[1], ex);
    for (int z = 0; z < X.depth; z++)
        TSR_KERNEL(ex, rowsum, X.rows, X.cols, tsr_view_at(X, z), X.ld, a->beta,
                (float *)y.ptr + (size_t)z * X.rows);
}

/* y's mode (W, RW, REDUX) varies per task */
static tsr_op_t op_rowsum = { .name = "rowsum", .cpu = rowsum, .cuda = TSR_CUDA(rowsum),
                              .no_float64 = 1 };

/* ---- heads_copy: between feature-major X and a head tile --------------------------------- */

/* buffers: source (read), destination (read-write); X the feature-major
 * tile, Y the head tile, whichever way the copy goes */
static void heads_views(void *buffers[], const heads_arg_t *a, const tsr_exec_t *ex, tsr_view_t *X, tsr_view_t *Y)
{
    tsr_view_t src = tsr_view(buffers[0], ex), dst = tsr_view(buffers[1], ex);
    *X = a->to_heads ? src : dst;
    *Y = a->to_heads ? dst : src;
}

static void cpu_heads_copy(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const heads_arg_t *a = cl_arg;
    tsr_view_t X, Y;
    heads_views(buffers, a, ex, &X, &Y);
    tsr_cpu_heads_copy(&a->g, a->to_heads, a->beta, (float *)X.ptr, X.rows, X.cols, X.ld, (float *)Y.ptr, Y.depth,
                       Y.rows, Y.cols, Y.ld, Y.zstride / sizeof(float));
}

#if TSR_HAVE_CUDA
/* float32 or bf16 tiles: a bf16 task copies only its head's elements (no
 * conversion of the whole tiles) */
static void cuda_heads_copy(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const heads_arg_t *a = cl_arg;
    tsr_view_t X, Y;
    heads_views(buffers, a, ex, &X, &Y);
    tsr_kernel_check(tsr_cuda_heads_copy_typed(ex->stream, ex->dtype, &a->g, a->to_heads, a->beta, X.ptr, X.rows,
                                               X.cols, X.ld, Y.ptr, Y.depth, Y.rows, Y.cols, Y.ld,
                                               Y.zstride / tsr_dtype_size(ex->dtype)));
}
#endif

/* the destination is W or RW per task */
static tsr_op_t op_heads_copy = { .name = "heads_copy", .cpu = cpu_heads_copy, .cuda = TSR_CUDA(cuda_heads_copy),
                                  .no_float64 = 1, .cuda_bf16 = 1 };

static int same_tile(tsr_tile_t a, tsr_tile_t b)
{
    return a.d == b.d && a.bi == b.bi && a.i == b.i && a.j == b.j;
}

/* Elements of a tile (all its matrices). */
static double tile_elems(tsr_tile_t t)
{
    return (double)tsr_tile_depth(t.d, t.bi) * tsr_tile_rows(t.d, t.i) * tsr_tile_cols(t.d, t.j);
}

/* ---- insert helpers --------------------------------------------------------- */

int tsr_insert_linear_gemm(const tsr_lin_task_t *t)
{
    if (t->kind < 0 || t->kind >= TSR_LIN_NKINDS)
        return TSR_EINVAL;
    lin_args_t args = { t->ta, t->tb, (float)t->alpha, (float)t->beta, (float)t->dbias_beta, t->chunk, t->hd,
                        t->heads, 0 };
    tsr_tile_t tiles[TSR_MAX_TASK_TILES] = { t->A, t->B, t->C };
    enum starpu_data_access_mode modes[TSR_MAX_TASK_TILES] = { STARPU_R, STARPU_R, t->cmode };
    int n = 3;
    if (t->bias.d) {
        args.flags |= LIN_BIAS;
        tiles[n] = t->bias;
        modes[n++] = STARPU_R;
    }
    if (t->out.d) {
        args.flags |= LIN_GELU;
        tiles[n] = t->out;
        modes[n++] = STARPU_W;
    }
    if (t->dbias.d) {
        args.flags |= LIN_DBIAS;
        tiles[n] = t->dbias;
        modes[n++] = t->dbias_mode;
    }
    /* k: op(A)'s columns, counting every head of a head tile */
    int a_rows = tsr_tile_rows(t->A.d, t->A.i) * (t->heads & TSR_LIN_HEADS_A ? tsr_tile_depth(t->A.d, t->A.bi) : 1);
    int k = t->ta == TSR_NOTRANS ? tsr_tile_cols(t->A.d, t->A.j) : a_rows;
    double flops = 2.0 * tile_elems(t->C) * k;
    return tsr_submit(&op_linear[t->kind], tiles, modes, n, &args, sizeof args, t->exec_rank, flops);
}

int tsr_insert_bias_fill(tsr_tile_t bias, tsr_tile_t C)
{
    tsr_tile_t tiles[2] = { C, bias };
    enum starpu_data_access_mode modes[2] = { STARPU_W, STARPU_R };
    return tsr_submit(&op_bias_fill, tiles, modes, bias.d ? 2 : 1, NULL, 0, -1, 0.0);
}

int tsr_insert_bias_add(tsr_tile_t bias, tsr_tile_t C)
{
    tsr_tile_t tiles[2] = { C, bias };
    enum starpu_data_access_mode modes[2] = { STARPU_RW, STARPU_R };
    return tsr_submit(&op_bias_add, tiles, modes, 2, NULL, 0, -1, tile_elems(C));
}

int tsr_insert_gelu_forward(tsr_tile_t pre, tsr_tile_t out)
{
    int in_place = same_tile(pre, out);
    tsr_tile_t tiles[2] = { in_place ? out : pre, out };
    enum starpu_data_access_mode modes[2] = { in_place ? STARPU_RW : STARPU_R, STARPU_W };
    return tsr_submit(&op_gelu_fwd, tiles, modes, in_place ? 1 : 2, NULL, 0, -1, 0.0);
}

int tsr_insert_gelu_backward(tsr_tile_t pre, tsr_tile_t dout, tsr_tile_t dpre)
{
    int in_place = same_tile(dout, dpre);
    tsr_tile_t tiles[3] = { pre, dout, dpre };
    enum starpu_data_access_mode modes[3] = { STARPU_R, in_place ? STARPU_RW : STARPU_R, STARPU_W };
    return tsr_submit(&op_gelu_bwd, tiles, modes, in_place ? 2 : 3, NULL, 0, -1, 0.0);
}

int tsr_insert_rowsum(tsr_tile_t X, double beta, tsr_tile_t y, enum starpu_data_access_mode ymode, int exec_rank)
{
    scalar_arg_t arg = { (float)beta };
    tsr_tile_t tiles[2] = { X, y };
    enum starpu_data_access_mode modes[2] = { STARPU_R, ymode };
    return tsr_submit(&op_rowsum, tiles, modes, 2, &arg, sizeof arg, exec_rank, tile_elems(X));
}

int tsr_insert_heads_copy(const tsr_heads_geom_t *g, int to_heads, double beta, tsr_tile_t X, tsr_tile_t Y,
                          int first_write)
{
    heads_arg_t arg = { *g, to_heads, (float)beta };
    tsr_tile_t tiles[2] = { to_heads ? X : Y, to_heads ? Y : X };
    enum starpu_data_access_mode modes[2] = { STARPU_R, first_write ? STARPU_W : STARPU_RW };
    return tsr_submit(&op_heads_copy, tiles, modes, 2, &arg, sizeof arg, -1, 0.0);
}
