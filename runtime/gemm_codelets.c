/* The basic tile ops (float32 and float64): GEMM, scale, zero, add, and the
 * REDUX zero-init + add methods. Each op: its CPU function, its CUDA
 * function, its table entry, its insert helper. */
#include "tsr_runtime.h"
#include "tsr_context.h"
#include "tsr_compute.h"
#if TSR_HAVE_CUDA
#include <starpu_cublas_v2.h>
#include "tsr_compute_cuda.h"
#endif

/* Arguments carried by every task of this file. */
typedef struct {
    tsr_trans_t ta, tb;
    double alpha, beta;
} tsr_basic_args_t;

/* ---- gemm: C = alpha op(A) op(B) + beta C --------------------------------------- */

static void cpu_gemm(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const tsr_basic_args_t *a = cl_arg;
    tsr_view_t A = tsr_view(buffers[0], ex), B = tsr_view(buffers[1], ex), C = tsr_view(buffers[2], ex);
    int k = a->ta == TSR_TRANS ? A.rows : A.cols;
    int nt = tsr_task_threads();
    for (int z = 0; z < C.depth; z++)
        tsr_cpu_gemm(ex->dtype, a->ta, a->tb, C.rows, C.cols, k, a->alpha, tsr_view_at(A, z), A.ld,
                     tsr_view_at(B, z), B.ld, a->beta, tsr_view_at(C, z), C.ld, nt);
}

#if TSR_HAVE_CUDA
static void cuda_gemm(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const tsr_basic_args_t *a = cl_arg;
    tsr_view_t A = tsr_view(buffers[0], ex), B = tsr_view(buffers[1], ex), C = tsr_view(buffers[2], ex);
    int k = a->ta == TSR_TRANS ? A.rows : A.cols;
    for (int z = 0; z < C.depth; z++)
        tsr_kernel_check(tsr_cuda_gemm(starpu_cublas_get_local_handle(), ex->dtype, a->ta, a->tb, C.rows, C.cols,
                                       k, a->alpha, tsr_view_at(A, z), A.ld, tsr_view_at(B, z), B.ld, a->beta,
                                       tsr_view_at(C, z), C.ld));
}
#endif

/* C's mode is chosen per task (W, RW or REDUX) */
static tsr_op_t op_gemm = { .name = "gemm", .cpu = cpu_gemm, .cuda = TSR_CUDA(cuda_gemm), .parallel = 1,
                            .cuda_bf16 = 1 /* cublasGemmEx, float32 accumulation */ };

/* ---- scale: A = alpha A ------------------------------------------------------------ */

static void scale(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const tsr_basic_args_t *a = cl_arg;
    tsr_view_t A = tsr_view(buffers[0], ex);
    for (int z = 0; z < A.depth; z++)
        TSR_KERNEL(ex, scale, ex->dtype, A.rows, A.cols, a->alpha, tsr_view_at(A, z), A.ld);
}

static tsr_op_t op_scale = { .name = "scale", .cpu = scale, .cuda = TSR_CUDA(scale),
                             .nbuffers = 1, .modes = { STARPU_RW }, .cuda_bf16 = 1 };

/* ---- zero: A = 0 (also the REDUX identity) ---------------------------------------- */

static void zero(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    (void)cl_arg;
    tsr_view_t A = tsr_view(buffers[0], ex);
    for (int z = 0; z < A.depth; z++)
        TSR_KERNEL(ex, zero, A.dtype, A.rows, A.cols, tsr_view_at(A, z), A.ld);
}

static tsr_op_t op_zero = { .name = "zero", .cpu = zero, .cuda = TSR_CUDA(zero),
                            .nbuffers = 1, .modes = { STARPU_W }, .cuda_bf16 = 1 };

/* The REDUX identity: the same kernel, under its own name so that inits show
 * apart in traces. StarPU calls it outside any task, without argument, so
 * the function itself tells the element type: one per type. */
static void redux_init(void *buffers[], tsr_dtype_t t, int cuda)
{
    tsr_exec_t ex = { t, cuda, NULL };
#if TSR_HAVE_CUDA
    if (cuda)
        ex.stream = starpu_cuda_get_local_stream();
#endif
    zero(buffers, NULL, &ex);
}
static void cpu_redux_init_float32(void *buffers[], void *cl_arg) { (void)cl_arg; redux_init(buffers, TSR_FLOAT32, 0); }
static void cpu_redux_init_float64(void *buffers[], void *cl_arg) { (void)cl_arg; redux_init(buffers, TSR_FLOAT64, 0); }
static void cpu_redux_init_bf16(void *buffers[], void *cl_arg) { (void)cl_arg; redux_init(buffers, TSR_BFLOAT16, 0); }
#if TSR_HAVE_CUDA
static void cuda_redux_init_float32(void *buffers[], void *cl_arg) { (void)cl_arg; redux_init(buffers, TSR_FLOAT32, 1); }
static void cuda_redux_init_float64(void *buffers[], void *cl_arg) { (void)cl_arg; redux_init(buffers, TSR_FLOAT64, 1); }
static void cuda_redux_init_bf16(void *buffers[], void *cl_arg) { (void)cl_arg; redux_init(buffers, TSR_BFLOAT16, 1); }
#endif

static tsr_op_t op_redux_init = {
    .name = "redux_init", .nbuffers = 1, .modes = { STARPU_W },
    .cpu_of = { cpu_redux_init_float32, cpu_redux_init_float64, cpu_redux_init_bf16 },
    .cuda_of = { TSR_CUDA_CODELET(cuda_redux_init_float32), TSR_CUDA_CODELET(cuda_redux_init_float64),
                 TSR_CUDA_CODELET(cuda_redux_init_bf16) } };

/* ---- add: B = alpha A + beta B ------------------------------------------------------ */

static void add(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const tsr_basic_args_t *a = cl_arg;
    tsr_view_t A = tsr_view(buffers[0], ex), B = tsr_view(buffers[1], ex);
    for (int z = 0; z < B.depth; z++)
        TSR_KERNEL(ex, add, ex->dtype, B.rows, B.cols, a->alpha, tsr_view_at(A, z), A.ld, a->beta,
                             tsr_view_at(B, z), B.ld);
}

/* B is W (beta 0) or RW per task */
static tsr_op_t op_add = { .name = "add", .cpu = add, .cuda = TSR_CUDA(add), .cuda_bf16 = 1 };

/* ---- redux_add: dst += src, the reduction method (first buffer plain RW) ----------- */

static void redux_add(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    (void)cl_arg;
    tsr_view_t D = tsr_view(buffers[0], ex), S = tsr_view(buffers[1], ex);
    for (int z = 0; z < D.depth; z++)
        TSR_KERNEL(ex, add, D.dtype, D.rows, D.cols, 1.0, tsr_view_at(S, z), S.ld, 1.0, tsr_view_at(D, z), D.ld);
}

static tsr_op_t op_redux_add = { .name = "redux_add", .cpu = redux_add, .cuda = TSR_CUDA(redux_add),
                                 .nbuffers = 2, .modes = { STARPU_RW, STARPU_R }, .cuda_bf16 = 1 };

/* ---- insert helpers --------------------------------------------------------------- */

static double gemm_flops(tsr_tile_t C, int k)
{
    return 2.0 * tsr_tile_depth(C.d, C.bi) * tsr_tile_rows(C.d, C.i) * tsr_tile_cols(C.d, C.j) * k;
}

int tsr_insert_gemm(tsr_trans_t ta, tsr_trans_t tb, double alpha, tsr_tile_t A, tsr_tile_t B,
                    double beta, tsr_tile_t C, enum starpu_data_access_mode cmode, int exec_rank)
{
    tsr_basic_args_t args = { ta, tb, alpha, beta };
    tsr_tile_t tiles[3] = { A, B, C };
    enum starpu_data_access_mode modes[3] = { STARPU_R, STARPU_R, cmode };
    int k = ta == TSR_TRANS ? tsr_tile_rows(A.d, A.i) : tsr_tile_cols(A.d, A.j);
    return tsr_submit(&op_gemm, tiles, modes, 3, &args, sizeof args, exec_rank, gemm_flops(C, k));
}

int tsr_insert_scale(double alpha, tsr_tile_t A)
{
    tsr_basic_args_t args = { TSR_NOTRANS, TSR_NOTRANS, alpha, 0.0 };
    enum starpu_data_access_mode mode = STARPU_RW;
    return tsr_submit(&op_scale, &A, &mode, 1, &args, sizeof args, -1, 0.0);
}

int tsr_insert_zero(tsr_tile_t A)
{
    enum starpu_data_access_mode mode = STARPU_W;
    return tsr_submit(&op_zero, &A, &mode, 1, NULL, 0, -1, 0.0);
}

int tsr_insert_add(double alpha, tsr_tile_t A, double beta, tsr_tile_t B)
{
    tsr_basic_args_t args = { TSR_NOTRANS, TSR_NOTRANS, alpha, beta };
    tsr_tile_t tiles[2] = { A, B };
    enum starpu_data_access_mode modes[2] = { STARPU_R, beta == 0.0 ? STARPU_W : STARPU_RW };
    return tsr_submit(&op_add, tiles, modes, 2, &args, sizeof args, -1, 0.0);
}

int tsr_insert_local_zero(tsr_tile_t A)
{
    starpu_data_handle_t h = tsr_tile_handle(A.d, A.bi, A.i, A.j);
    if (!h)
        return TSR_ENOMEM;
    if (starpu_task_insert(tsr_op_codelet(&op_zero, A.d->dtype), STARPU_W, h, 0) != 0)
        return TSR_ERUNTIME;
    tsr_count_task();
    return TSR_SUCCESS;
}

int tsr_tile_enable_redux(tsr_tile_t A)
{
    return tsr_tile_set_redux(A, &op_redux_add);
}

int tsr_tile_set_redux(tsr_tile_t A, tsr_op_t *add)
{
    starpu_data_handle_t h = tsr_tile_handle(A.d, A.bi, A.i, A.j);
    if (!h)
        return TSR_ENOMEM;
    tsr_dtype_t t = A.d->dtype;
    starpu_data_set_reduction_methods(h, tsr_op_codelet(add, t), tsr_op_codelet(&op_redux_init, t));
    return TSR_SUCCESS;
}
