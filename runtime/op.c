/* The op kit: codelets defined on first use from each op's table entry
 * (CPU and CUDA functions side by side), kernel failure reporting, and a
 * tile's reduction methods (the protocol that uses them: redux.c). */
#include <pthread.h>
#include <stdio.h>
#include "tsr_runtime.h"
#include "tsr_context.h"

static pthread_mutex_t define_lock = PTHREAD_MUTEX_INITIALIZER;

static void define_codelet(tsr_op_t *op, tsr_dtype_t t)
{
    struct starpu_codelet *cl = &op->cl[t];
    struct starpu_perfmodel *pm = &op->model[t];
    snprintf(op->symbol[t], sizeof op->symbol[t], "tsr_%s_%s", op->name, tsr_dtype_name(t));
    pm->type = STARPU_HISTORY_BASED;
    pm->symbol = op->symbol[t];
    starpu_codelet_init(cl);
    cl->cpu_funcs[0] = op->cpu;
    cl->cpu_funcs_name[0] = op->symbol[t];
#if TSR_HAVE_CUDA
    if (op->cuda) {
        cl->cuda_funcs[0] = op->cuda;
        cl->cuda_flags[0] = STARPU_CUDA_ASYNC; /* kernels are queued on the worker's stream */
    }
#endif
    /* StarPU allows per-task modes only with a variable buffer count */
    cl->nbuffers = op->nbuffers > 0 ? op->nbuffers : STARPU_VARIABLE_NBUFFERS;
    for (int b = 0; b < op->nbuffers; b++)
        cl->modes[b] = op->modes[b];
    cl->model = pm;
    cl->name = op->symbol[t];
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
    return &op->cl[t];
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

int tsr_tile_set_redux(tsr_tile_t A, tsr_op_t *add, tsr_op_t *init)
{
    starpu_data_handle_t h = tsr_tile_handle(A.d, A.bi, A.i, A.j);
    if (!h)
        return TSR_ENOMEM;
    tsr_dtype_t t = A.d->dtype;
    starpu_data_set_reduction_methods(h, tsr_op_codelet(add, t), tsr_op_codelet(init, t));
    return TSR_SUCCESS;
}
