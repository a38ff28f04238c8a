/* The op kit: codelets defined on first use from each op's table entry
 * (CPU and CUDA functions side by side) and called with the task's element
 * type, and kernel failure reporting. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "tsr_runtime.h"
#include "tsr_context.h"

static pthread_mutex_t define_lock = PTHREAD_MUTEX_INITIALIZER;

/* The running task's op and element type, from its codelet. */
static const tsr_op_codelet_t *current_codelet(void)
{
    return (const tsr_op_codelet_t *)starpu_task_get_current()->cl;
}

/* The codelet functions of every op: they call the op's own with the task's
 * element type and worker. */
static void cpu_entry(void *buffers[], void *cl_arg)
{
    const tsr_op_codelet_t *k = current_codelet();
    tsr_exec_t ex = { k->dtype, 0, NULL };
    k->op->cpu(buffers, cl_arg, &ex);
}

#if TSR_HAVE_CUDA
static void cuda_entry(void *buffers[], void *cl_arg)
{
    const tsr_op_codelet_t *k = current_codelet();
    tsr_exec_t ex = { k->dtype, 1, starpu_cuda_get_local_stream() };
    k->op->cuda(buffers, cl_arg, &ex);
}
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
    cl->cpu_funcs[0] = op->cpu_of[t] ? op->cpu_of[t] : cpu_entry;
    cl->cpu_funcs_name[0] = k->symbol;
#if TSR_HAVE_CUDA
    if (op->cuda || op->cuda_of[t]) {
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
