/* StarPU codelets for the basic tile kernels, with history-based perf
 * models and the REDUX (zero-init + add) methods. One codelet per element
 * type so that perf-model histories of float32 and float64 stay apart. */
#include <pthread.h>
#include <stdio.h>
#include "tsr_runtime.h"
#include "tsr_context.h"
#include "tsr_compute.h"
#if TSR_USE_CUDA && STARPU_HAS_CUDA
#include <starpu_cublas_v2.h>
#include "tsr_compute_cuda.h"
#endif

enum { CL_GEMM, CL_SCALE, CL_ZERO, CL_ADD, CL_REDUX_INIT, CL_REDUX_ADD, CL_COUNT };
static const char *cl_names[CL_COUNT] = { "gemm", "scale", "zero", "add", "redux_init", "redux_add" };

static struct starpu_codelet codelets[TSR_NDTYPES][CL_COUNT];
static struct starpu_perfmodel models[TSR_NDTYPES][CL_COUNT];
static char symbols[TSR_NDTYPES][CL_COUNT][48];
static pthread_once_t codelets_once = PTHREAD_ONCE_INIT;

/* Arguments carried by every task of this file. */
typedef struct {
    tsr_dtype_t dtype;
    tsr_trans_t ta, tb;
    double alpha, beta;
} tsr_basic_args_t;

static void cpu_gemm(void *buffers[], void *cl_arg)
{
    const tsr_basic_args_t *a = cl_arg;
    tsr_view_t A = tsr_view(buffers[0]), B = tsr_view(buffers[1]), C = tsr_view(buffers[2]);
    int k = a->ta == TSR_TRANS ? A.rows : A.cols;
    int nt = tsr_task_threads();
    for (int z = 0; z < C.depth; z++)
        tsr_cpu_gemm(a->dtype, a->ta, a->tb, C.rows, C.cols, k, a->alpha, tsr_view_at(A, z), A.ld,
                     tsr_view_at(B, z), B.ld, a->beta, tsr_view_at(C, z), C.ld, nt);
}

static void cpu_scale(void *buffers[], void *cl_arg)
{
    const tsr_basic_args_t *a = cl_arg;
    tsr_view_t A = tsr_view(buffers[0]);
    for (int z = 0; z < A.depth; z++)
        tsr_cpu_scale(a->dtype, A.rows, A.cols, a->alpha, tsr_view_at(A, z), A.ld);
}

static void cpu_add(void *buffers[], void *cl_arg)
{
    const tsr_basic_args_t *a = cl_arg;
    tsr_view_t A = tsr_view(buffers[0]), B = tsr_view(buffers[1]);
    for (int z = 0; z < B.depth; z++)
        tsr_cpu_add(a->dtype, B.rows, B.cols, a->alpha, tsr_view_at(A, z), A.ld, a->beta,
                    tsr_view_at(B, z), B.ld);
}

static void cpu_zero(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    tsr_view_t A = tsr_view(buffers[0]);
    for (int z = 0; z < A.depth; z++)
        tsr_cpu_zero(A.dtype, A.rows, A.cols, tsr_view_at(A, z), A.ld);
}

/* dst += src: the reduction codelet (first buffer plain STARPU_RW). */
static void cpu_redux_add(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    tsr_view_t D = tsr_view(buffers[0]), S = tsr_view(buffers[1]);
    for (int z = 0; z < D.depth; z++)
        tsr_cpu_add(D.dtype, D.rows, D.cols, 1.0, tsr_view_at(S, z), S.ld, 1.0, tsr_view_at(D, z), D.ld);
}

#if TSR_USE_CUDA && STARPU_HAS_CUDA
static void cuda_gemm(void *buffers[], void *cl_arg)
{
    const tsr_basic_args_t *a = cl_arg;
    tsr_view_t A = tsr_view(buffers[0]), B = tsr_view(buffers[1]), C = tsr_view(buffers[2]);
    int k = a->ta == TSR_TRANS ? A.rows : A.cols;
    for (int z = 0; z < C.depth; z++)
        tsr_cuda_gemm(starpu_cublas_get_local_handle(), a->dtype, a->ta, a->tb, C.rows, C.cols, k, a->alpha,
                      tsr_view_at(A, z), A.ld, tsr_view_at(B, z), B.ld, a->beta,
                      tsr_view_at(C, z), C.ld);
}

static void cuda_scale(void *buffers[], void *cl_arg)
{
    const tsr_basic_args_t *a = cl_arg;
    tsr_view_t A = tsr_view(buffers[0]);
    for (int z = 0; z < A.depth; z++)
        tsr_cuda_scale(starpu_cuda_get_local_stream(), a->dtype, A.rows, A.cols, a->alpha,
                       tsr_view_at(A, z), A.ld);
}

static void cuda_add(void *buffers[], void *cl_arg)
{
    const tsr_basic_args_t *a = cl_arg;
    tsr_view_t A = tsr_view(buffers[0]), B = tsr_view(buffers[1]);
    for (int z = 0; z < B.depth; z++)
        tsr_cuda_add(starpu_cuda_get_local_stream(), a->dtype, B.rows, B.cols, a->alpha,
                     tsr_view_at(A, z), A.ld, a->beta, tsr_view_at(B, z), B.ld);
}

static void cuda_zero(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    tsr_view_t A = tsr_view(buffers[0]);
    for (int z = 0; z < A.depth; z++)
        tsr_cuda_zero(starpu_cuda_get_local_stream(), A.dtype, A.rows, A.cols, tsr_view_at(A, z), A.ld);
}

static void cuda_redux_add(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    tsr_view_t D = tsr_view(buffers[0]), S = tsr_view(buffers[1]);
    for (int z = 0; z < D.depth; z++)
        tsr_cuda_add(starpu_cuda_get_local_stream(), D.dtype, D.rows, D.cols, 1.0, tsr_view_at(S, z), S.ld,
                     1.0, tsr_view_at(D, z), D.ld);
}
#endif

void tsr_codelet_init(struct starpu_codelet *cl, struct starpu_perfmodel *pm, const char *symbol,
                      starpu_cpu_func_t cpu, void *cuda, int nbuffers, const enum starpu_data_access_mode *modes)
{
    pm->type = STARPU_HISTORY_BASED;
    pm->symbol = symbol;
    starpu_codelet_init(cl);
    cl->cpu_funcs[0] = cpu;
    cl->cpu_funcs_name[0] = symbol;
#if TSR_USE_CUDA && STARPU_HAS_CUDA
    if (cuda) {
        cl->cuda_funcs[0] = (starpu_cuda_func_t)cuda;
        cl->cuda_flags[0] = STARPU_CUDA_ASYNC;
    }
#else
    (void)cuda;
#endif
    /* A NULL modes list: the access modes are chosen per task (e.g. C in W,
     * RW or REDUX), which StarPU only allows with a variable buffer count. */
    cl->nbuffers = modes ? nbuffers : STARPU_VARIABLE_NBUFFERS;
    for (int b = 0; modes && b < nbuffers; b++)
        cl->modes[b] = modes[b];
    cl->model = pm;
    cl->name = symbol;
    cl->callback_func = tsr_schedule_task_done; /* records the task when a schedule is recorded */
}

void tsr_codelet_allow_parallel(struct starpu_codelet *cl)
{
    if (tsr_parallel_worker_size() > 1) {
        cl->type = STARPU_FORKJOIN;
        cl->max_parallelism = tsr_parallel_worker_size();
    }
}

static void define_codelet(tsr_dtype_t t, int which, starpu_cpu_func_t cpu, void *cuda,
                           int nbuffers, const enum starpu_data_access_mode *modes)
{
    struct starpu_codelet *cl = &codelets[t][which];
    snprintf(symbols[t][which], sizeof symbols[t][which], "tsr_%s_%s", cl_names[which], tsr_dtype_name(t));
    tsr_codelet_init(cl, &models[t][which], symbols[t][which], cpu, cuda, nbuffers, modes);
    if (which == CL_GEMM)
        tsr_codelet_allow_parallel(cl);
}

#if TSR_USE_CUDA && STARPU_HAS_CUDA
#define CUDA_FN(f) ((void *)(f))
#else
#define CUDA_FN(f) NULL
#endif

static void define_codelets(void)
{
    static const enum starpu_data_access_mode one_rw[] = { STARPU_RW };
    static const enum starpu_data_access_mode one_w[] = { STARPU_W };
    static const enum starpu_data_access_mode redux_modes[] = { STARPU_RW, STARPU_R };
    for (int t = 0; t < TSR_NDTYPES; t++) {
        define_codelet(t, CL_GEMM, cpu_gemm, CUDA_FN(cuda_gemm), 3, NULL);
        define_codelet(t, CL_SCALE, cpu_scale, CUDA_FN(cuda_scale), 1, one_rw);
        define_codelet(t, CL_ZERO, cpu_zero, CUDA_FN(cuda_zero), 1, one_w);
        define_codelet(t, CL_ADD, cpu_add, CUDA_FN(cuda_add), 2, NULL);
        define_codelet(t, CL_REDUX_INIT, cpu_zero, CUDA_FN(cuda_zero), 1, one_w);
        define_codelet(t, CL_REDUX_ADD, cpu_redux_add, CUDA_FN(cuda_redux_add), 2, redux_modes);
    }
#if TSR_USE_CUDA && STARPU_HAS_CUDA
    starpu_cublas_init();
#endif
}

static struct starpu_codelet *codelet(tsr_dtype_t t, int which)
{
    pthread_once(&codelets_once, define_codelets);
    return &codelets[t][which];
}

static double gemm_flops(tsr_tile_t C, int k)
{
    return 2.0 * tsr_tile_depth(C.d, C.bi) * tsr_tile_rows(C.d, C.i) * tsr_tile_cols(C.d, C.j) * k;
}

int tsr_insert_gemm(tsr_trans_t ta, tsr_trans_t tb, double alpha, tsr_tile_t A, tsr_tile_t B,
                    double beta, tsr_tile_t C, enum starpu_data_access_mode cmode, int exec_rank)
{
    tsr_basic_args_t args = { C.d->dtype, ta, tb, alpha, beta };
    tsr_tile_t tiles[3] = { A, B, C };
    enum starpu_data_access_mode modes[3] = { STARPU_R, STARPU_R, cmode };
    int k = ta == TSR_TRANS ? tsr_tile_rows(A.d, A.i) : tsr_tile_cols(A.d, A.j);
    return tsr_submit(codelet(C.d->dtype, CL_GEMM), tiles, modes, 3, &args, sizeof args, exec_rank,
                      gemm_flops(C, k));
}

int tsr_insert_scale(double alpha, tsr_tile_t A)
{
    tsr_basic_args_t args = { A.d->dtype, TSR_NOTRANS, TSR_NOTRANS, alpha, 0.0 };
    enum starpu_data_access_mode mode = STARPU_RW;
    return tsr_submit(codelet(A.d->dtype, CL_SCALE), &A, &mode, 1, &args, sizeof args, -1, 0.0);
}

int tsr_insert_zero(tsr_tile_t A)
{
    enum starpu_data_access_mode mode = STARPU_W;
    return tsr_submit(codelet(A.d->dtype, CL_ZERO), &A, &mode, 1, NULL, 0, -1, 0.0);
}

int tsr_insert_add(double alpha, tsr_tile_t A, double beta, tsr_tile_t B)
{
    tsr_basic_args_t args = { B.d->dtype, TSR_NOTRANS, TSR_NOTRANS, alpha, beta };
    tsr_tile_t tiles[2] = { A, B };
    enum starpu_data_access_mode modes[2] = { STARPU_R, beta == 0.0 ? STARPU_W : STARPU_RW };
    return tsr_submit(codelet(B.d->dtype, CL_ADD), tiles, modes, 2, &args, sizeof args, -1, 0.0);
}

int tsr_insert_local_zero(tsr_tile_t A)
{
    starpu_data_handle_t h = tsr_tile_handle(A.d, A.bi, A.i, A.j);
    if (!h)
        return TSR_ENOMEM;
    int ret = starpu_task_insert(codelet(A.d->dtype, CL_ZERO), STARPU_W, h, 0);
    if (ret != 0)
        return TSR_ERUNTIME;
    tsr_count_task();
    return TSR_SUCCESS;
}

int tsr_tile_enable_redux(tsr_tile_t A)
{
    starpu_data_handle_t h = tsr_tile_handle(A.d, A.bi, A.i, A.j);
    if (!h)
        return TSR_ENOMEM;
    starpu_data_set_reduction_methods(h, codelet(A.d->dtype, CL_REDUX_ADD), codelet(A.d->dtype, CL_REDUX_INIT));
    return TSR_SUCCESS;
}
