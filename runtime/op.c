/* The op kit: codelets defined on first use from each op's table entry
 * (CPU and CUDA functions side by side) and called with the task's element
 * type, and kernel failure reporting. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "tsr_runtime.h"
#include "tsr_context.h"
#include "tsr_bf16.h"
#if TSR_HAVE_CUDA
#include "tsr_compute_cuda.h"
#endif

static pthread_mutex_t define_lock = PTHREAD_MUTEX_INITIALIZER;

/* The running task's op and element type, from its codelet. */
static const tsr_op_codelet_t *current_codelet(void)
{
    return (const tsr_op_codelet_t *)starpu_task_get_current()->cl;
}

/* ---- bf16 through float32 kernels ------------------------------------------
 * A bf16 tile (2-byte elements) of the task becomes a float32 scratch tile of
 * the same layout (the same ld and z stride, in elements), read in when the
 * task reads it; the op's float32 kernel runs on the copies, and the tiles it
 * writes are rounded back to bf16. Tiles of 4-byte elements (float32 operands
 * of a mixed task: losses, master weights) are used as they are. This is
 * bf16 storage with float32 arithmetic for every op: on a CPU worker always,
 * on a CUDA worker (device scratch, conversions on the worker's stream) for
 * the ops without bf16 CUDA kernels of their own (cuda_bf16 unset), and for
 * the tasks of those ops that give a float32-kept operand as bf16. */

typedef struct starpu_block_interface block_t;

/* Elements from a tile's first to its last, padding included. */
static size_t block_span(const block_t *b)
{
    return (size_t)b->ldz * (b->nz - 1) + (size_t)b->ldy * (b->ny - 1) + b->nx;
}

static int reads(enum starpu_data_access_mode m) { return (m & STARPU_R) || (m & STARPU_REDUX); }
static int writes(enum starpu_data_access_mode m) { return (m & STARPU_W) || (m & STARPU_REDUX); }

/* Float32 scratch for tile b where the worker w computes (NULL: no memory). */
static float *scratch_alloc(const tsr_exec_t *w, const block_t *b)
{
    size_t bytes = block_span(b) * sizeof(float);
#if TSR_HAVE_CUDA
    if (w->cuda) {
        void *p = NULL;
        return tsr_cuda_scratch_alloc(w->stream, bytes, &p) ? NULL : p;
    }
#else
    (void)w;
#endif
    return malloc(bytes);
}

static void scratch_free(const tsr_exec_t *w, float *p)
{
#if TSR_HAVE_CUDA
    if (w->cuda) {
        tsr_kernel_check(tsr_cuda_scratch_free(w->stream, p));
        return;
    }
#else
    (void)w;
#endif
    free(p);
}

/* scratch = b (to_bf16 0) or b = scratch rounded (to_bf16 1). */
static int convert(const tsr_exec_t *w, const block_t *b, float *scratch, int to_bf16)
{
#if TSR_HAVE_CUDA
    if (w->cuda)
        return to_bf16 ? tsr_cuda_float_to_bf16(w->stream, scratch, (void *)b->ptr, b->nx, b->ny, b->nz, b->ldy, b->ldz)
                       : tsr_cuda_bf16_to_float(w->stream, (const void *)b->ptr, scratch, b->nx, b->ny, b->nz, b->ldy,
                                                b->ldz);
#else
    (void)w;
#endif
    if (to_bf16)
        tsr_float_to_bf16_block(scratch, (tsr_bf16_t *)b->ptr, b->nx, b->ny, b->nz, b->ldy, b->ldz);
    else
        tsr_bf16_to_float_block((const tsr_bf16_t *)b->ptr, scratch, b->nx, b->ny, b->nz, b->ldy, b->ldz);
    return TSR_SUCCESS;
}

/* f, a float32 op function, on the worker w (its cuda and stream) for a bf16 task. */
static void run_bf16_as_float32(tsr_op_func_t f, void *buffers[], void *cl_arg, int n,
                                const enum starpu_data_access_mode *modes, const tsr_exec_t *w)
{
    block_t copy[TSR_MAX_TASK_TILES];
    void *bufs[TSR_MAX_TASK_TILES];
    int rc = TSR_SUCCESS, made = 0;
    for (; made < n && !rc; made++) {
        const block_t *b = buffers[made];
        bufs[made] = buffers[made];
        if (b->elemsize != sizeof(tsr_bf16_t))
            continue;
        float *scratch = scratch_alloc(w, b);
        if (!scratch) { /* no error path out of a codelet: the task fails */
            rc = TSR_ENOMEM;
            break;
        }
        copy[made] = *b;
        copy[made].ptr = copy[made].dev_handle = (uintptr_t)scratch;
        copy[made].offset = 0;
        copy[made].elemsize = sizeof(float);
        bufs[made] = &copy[made];
        if (reads(modes[made]))
            rc = convert(w, b, scratch, 0);
    }
    if (!rc) {
        tsr_exec_t ex = { TSR_FLOAT32, w->cuda, w->stream };
        f(bufs, cl_arg, &ex);
    }
    for (int i = 0; i < made; i++) {
        if (bufs[i] == buffers[i])
            continue;
        if (!rc && writes(modes[i]))
            rc = convert(w, buffers[i], (float *)copy[i].ptr, 1);
        scratch_free(w, (float *)copy[i].ptr);
    }
    tsr_kernel_check(rc);
}

/* The modes of the running task's n buffers. */
static int task_modes(enum starpu_data_access_mode *modes)
{
    struct starpu_task *task = starpu_task_get_current();
    int n = STARPU_TASK_GET_NBUFFERS(task);
    for (int i = 0; i < n; i++)
        modes[i] = STARPU_TASK_GET_MODE(task, i);
    return n;
}

/* f, an op function, on the running task's tiles, or (via_float32) on
 * float32 copies of its bf16 tiles. */
static void run_op_function(tsr_op_func_t f, int via_float32, void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    if (!via_float32) {
        f(buffers, cl_arg, ex);
        return;
    }
    enum starpu_data_access_mode modes[TSR_MAX_TASK_TILES];
    int n = task_modes(modes);
    run_bf16_as_float32(f, buffers, cl_arg, n, modes, ex);
}

/* The codelet functions of every op: they call the op's own with the task's
 * element type and worker. */
static void cpu_entry(void *buffers[], void *cl_arg)
{
    const tsr_op_codelet_t *k = current_codelet();
    tsr_exec_t ex = { k->dtype, 0, NULL };
    run_op_function(k->op->cpu, k->dtype == TSR_BFLOAT16, buffers, cl_arg, &ex);
}

#if TSR_HAVE_CUDA
/* Whether the op's CUDA function takes the running bf16 task's tiles as they
 * are: it takes bf16 (cuda_bf16) and the operands it keeps in float32
 * (fp32_in_bf16) are float32 here. Such an operand given as bf16 (a bf16
 * loss or statistics descriptor) sends the task through the float32 copies,
 * as on a CPU worker, since the bf16 kernels read those operands as float32. */
static int cuda_takes_tiles(const tsr_op_t *op, void *buffers[])
{
    if (!op->cuda_bf16)
        return 0;
    int n = STARPU_TASK_GET_NBUFFERS(starpu_task_get_current());
    for (int i = 0; i < n && i < 32; i++)
        if ((op->fp32_in_bf16 >> i & 1u) && ((const block_t *)buffers[i])->elemsize != sizeof(float))
            return 0;
    return 1;
}

static void cuda_entry(void *buffers[], void *cl_arg)
{
    const tsr_op_codelet_t *k = current_codelet();
    tsr_exec_t ex = { k->dtype, 1, starpu_cuda_get_local_stream() };
    /* a bf16 task whose CUDA function takes float32 tiles runs on copies */
    run_op_function(k->op->cuda, k->dtype == TSR_BFLOAT16 && !cuda_takes_tiles(k->op, buffers), buffers, cl_arg,
                    &ex);
}
#elif TSR_SIMULATED_CUDA
/* The stand-ins of a simulation build (tsr_runtime.h): StarPU on SimGrid
 * takes a CUDA task's duration from its performance model and calls none of
 * them; a call would be a bug, reported as a kernel failure. */
void tsr_simulated_cuda(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    (void)buffers, (void)cl_arg, (void)ex;
    tsr_kernel_check(TSR_ERUNTIME);
}

void tsr_simulated_cuda_codelet(void *buffers[], void *cl_arg)
{
    (void)buffers, (void)cl_arg;
    tsr_kernel_check(TSR_ERUNTIME);
}

static void (*const cuda_entry)(void *buffers[], void *cl_arg) = tsr_simulated_cuda_codelet;
#endif

/* The performance-model footprint of a task whose tile count depends on the
 * data (a gather from, or a loss over, however many tiles hold some tokens
 * or targets): its first tile's shape alone. A history per tile set would
 * never hold enough samples of each to predict a run (docs/simulation.md). */
static uint32_t first_tile_footprint(struct starpu_task *task)
{
    starpu_data_handle_t h = STARPU_TASK_GET_HANDLE(task, 0);
    uint32_t dims[4] = { starpu_block_get_nx(h), starpu_block_get_ny(h), starpu_block_get_nz(h),
                         (uint32_t)starpu_block_get_elemsize(h) };
    return starpu_hash_crc32c_be_n(dims, sizeof dims, 0);
}

int tsr_op_runs_on_cpu(const tsr_op_t *op, tsr_dtype_t t) { return op->cpu_of[t] || op->cpu; }

int tsr_op_runs_on_cuda(const tsr_op_t *op, tsr_dtype_t t) { return op->cuda_of[t] || op->cuda; }

static void define_codelet(tsr_op_t *op, tsr_dtype_t t)
{
    tsr_op_codelet_t *k = &op->kind[t];
    struct starpu_codelet *cl = &k->cl;
    struct starpu_perfmodel *pm = &k->model;
    k->op = op;
    k->dtype = t;
    snprintf(k->symbol, sizeof k->symbol, "tsr_%s_%s", op->name, tsr_dtype_name(t));
    pm->type = STARPU_HISTORY_BASED;
    pm->symbol = k->symbol;
    if (op->timed_by_first_tile)
        pm->footprint = first_tile_footprint;
    starpu_codelet_init(cl);
    if (tsr_op_runs_on_cpu(op, t)) {
        cl->cpu_funcs[0] = op->cpu_of[t] ? op->cpu_of[t] : cpu_entry;
        cl->cpu_funcs_name[0] = k->symbol;
    }
#if TSR_HAVE_CUDA || TSR_SIMULATED_CUDA
    if (tsr_op_runs_on_cuda(op, t)) {
        cl->cuda_funcs[0] = op->cuda_of[t] ? op->cuda_of[t] : cuda_entry;
        cl->cuda_flags[0] = STARPU_CUDA_ASYNC; /* kernels are queued on the worker's stream */
    }
#endif
    /* StarPU allows per-task modes only with a variable buffer count */
    cl->nbuffers = op->nbuffers > 0 ? op->nbuffers : STARPU_VARIABLE_NBUFFERS;
    for (int b = 0; b < op->nbuffers; b++)
        cl->modes[b] = op->modes[b];
    cl->model = pm;
    cl->name = k->symbol;
    cl->callback_func = tsr_schedule_task_done; /* records the task when a schedule is recorded */
    if (op->parallel && tsr_parallel_worker_size() > 1) {
        cl->type = STARPU_FORKJOIN;
        cl->max_parallelism = tsr_parallel_worker_size();
    }
}

struct starpu_codelet *tsr_op_codelet(tsr_op_t *op, tsr_dtype_t t)
{
    if (!__atomic_load_n(&op->ready, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&define_lock);
        if (!op->ready) {
            for (int d = 0; d < TSR_NDTYPES; d++)
                define_codelet(op, (tsr_dtype_t)d);
            __atomic_store_n(&op->ready, 1, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&define_lock);
    }
    return &op->kind[t].cl;
}

void tsr_view_mismatch(size_t elemsize, tsr_dtype_t dtype)
{
    const tsr_op_codelet_t *k = current_codelet();
    tsr_log(TSR_LOG_ERROR, "task %s: a tile of %zu-byte elements where %s (%zu bytes) was expected", k->symbol,
            elemsize, tsr_dtype_name(dtype), tsr_dtype_size(dtype));
    abort();
}

void tsr_kernel_check(int rc)
{
    if (rc == TSR_SUCCESS)
        return;
    struct starpu_task *task = starpu_task_get_current();
    char worker[64] = "?";
    starpu_worker_get_name(starpu_worker_get_id(), worker, sizeof worker);
    tsr_log(TSR_LOG_ERROR, "task %s failed on worker %s: %s", task && task->cl ? task->cl->name : "?", worker,
            tsr_strerror(rc));
    tsr_count_failed_task();
}
