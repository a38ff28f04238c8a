/* Which workers and scheduler StarPU starts with (tsr_plan_workers): a pure
 * function of what was found, configured and set in the environment, so that
 * every case is unit-tested without a GPU (testing/test_workers_plan.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tsr_context.h"

/* GPUs left visible by CUDA_VISIBLE_DEVICES (NULL: all of them): its entries
 * up to the first invalid one (CUDA's rule), at most the GPUs found. */
int tsr_visible_gpus(int found, const char *cuda_visible_devices)
{
    if (!cuda_visible_devices || found <= 0)
        return found;
    int n = 0;
    for (const char *s = cuda_visible_devices; *s && n < found;) {
        while (*s == ' ')
            s++;
        if (*s == '-' || *s == ',' || *s == '\0') /* "-1", an empty entry: the list stops */
            break;
        n++;
        s += strcspn(s, ",");
        if (*s == ',')
            s++;
    }
    return n;
}

/* What a worker count came from: an environment variable wins (StarPU reads
 * it over starpu_conf), then the configuration; -1 when neither sets it. */
static int chosen_count(const char *env, int configured)
{
    return env ? atoi(env) : configured;
}

static void plan_scheduler(const tsr_workers_in_t *in, int gpus_used, tsr_workers_plan_t *p)
{
    /* StarPU takes STARPU_SCHED over the configured name */
    const char *name = in->env_sched ? in->env_sched
                       : in->sched ? in->sched
                       : in->parallel_worker_size > 1 ? "peager"
                       /* with GPUs, places each task by its data and the GPUs' queues: one
                        * worker kind needs no calibration against another */
                       : gpus_used ? "dmdas"
                                   : "lws";
    snprintf(p->sched, sizeof p->sched, "%s", name);
}

int tsr_plan_workers(const tsr_workers_in_t *in, tsr_workers_plan_t *p)
{
    memset(p, 0, sizeof *p);
    int ncuda = chosen_count(in->env_ncuda, in->ncuda), ncpu = chosen_count(in->env_ncpu, in->ncpus);
    p->cuda_off = ncuda == 0;
    p->gpus_asked = ncuda;
    p->gpus_asked_by = in->env_ncuda ? "STARPU_NCUDA" : "tsr_config_t.ncuda, tsr_gpt2 --gpus";
    p->gpus_found = in->gpus;
    int gpus_used = in->gpus > 0 && !p->cuda_off;
    p->ncuda = in->ncuda;
    p->ncpus = in->ncpus > 0 ? in->ncpus : -1;
    plan_scheduler(in, gpus_used, p);
    if (in->env_ncpu && ncpu == 0 && !gpus_used && in->gpus >= 0) {
        snprintf(p->reason, sizeof p->reason, "STARPU_NCPU=%s and no CUDA worker (%s): no worker would run the "
                 "tasks", in->env_ncpu, in->gpus == 0 ? "no GPU found" : "CUDA workers turned off");
        return TSR_EINVAL;
    }
    if (!gpus_used)
        return TSR_SUCCESS;
    if (in->env_ncpu && ncpu == 0) {
        p->gpu_only = 1;
        snprintf(p->reason, sizeof p->reason, "GPU only (STARPU_NCPU=0)");
    } else if (in->env_ncpu)
        snprintf(p->reason, sizeof p->reason, "CPU workers beside the GPUs (STARPU_NCPU=%s)", in->env_ncpu);
    else if (in->ncpus > 0)
        snprintf(p->reason, sizeof p->reason, "%d CPU worker(s) beside the GPUs as asked (--threads)", in->ncpus);
    else if (in->parallel_worker_size > 1)
        snprintf(p->reason, sizeof p->reason, "CPU workers beside the GPUs for the parallel workers (--pws %d)",
                 in->parallel_worker_size);
    else {
        p->ncpus = 0;
        p->gpu_only = 1;
        snprintf(p->reason, sizeof p->reason,
                 "GPU only: CPU workers are slower than the GPU for GPT-2 (124M B8 T1024 on an H200: 65 ms a step "
                 "on the GPU alone, 109 ms with 15 CPU workers beside it, 9.3 s the first step); --threads N "
                 "adds them");
    }
    return TSR_SUCCESS;
}
