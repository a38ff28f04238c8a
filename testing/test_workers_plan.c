/* The workers and scheduler tsr_init starts StarPU with (tsr_plan_workers),
 * for every kind of machine and setting, without starting StarPU: GPUs
 * found or not, --threads, STARPU_NCPU, STARPU_NCUDA, STARPU_SCHED, --pws,
 * CUDA_VISIBLE_DEVICES. Runs on any machine (no GPU needed). */
#include <stdio.h>
#include <string.h>
#include "tsr_context.h"
#include "tsr_check.h"

/* A machine with `gpus` GPUs and the default configuration. */
static tsr_workers_in_t machine(int gpus)
{
    tsr_workers_in_t in = { gpus, -1, -1, NULL, 1, NULL, NULL, NULL };
    return in;
}

static int said(const tsr_workers_plan_t *p, const char *text) { return strstr(p->reason, text) != NULL; }

static void check_defaults(void)
{
    tsr_workers_plan_t p;
    tsr_workers_in_t in = machine(0); /* no GPU: every core, lws, nothing to say */
    CHECK_RC(tsr_plan_workers(&in, &p), TSR_SUCCESS);
    CHECK(p.ncpus == -1 && p.ncuda == -1 && !p.gpu_only && !p.cuda_off && strcmp(p.sched, "lws") == 0 &&
          p.reason[0] == '\0');
    in = machine(1); /* a GPU: it alone, dmdas, and why */
    CHECK_RC(tsr_plan_workers(&in, &p), TSR_SUCCESS);
    CHECK(p.ncpus == 0 && p.ncuda == -1 && p.gpu_only && strcmp(p.sched, "dmdas") == 0);
    CHECK(said(&p, "GPU only") && said(&p, "--threads N"));
    in = machine(8);
    CHECK_RC(tsr_plan_workers(&in, &p), TSR_SUCCESS);
    CHECK(p.ncpus == 0 && p.gpu_only && strcmp(p.sched, "dmdas") == 0);
    in = machine(-1); /* a simulation: its platform has the workers StarPU's variables ask for */
    CHECK_RC(tsr_plan_workers(&in, &p), TSR_SUCCESS);
    CHECK(p.ncpus == -1 && !p.gpu_only && strcmp(p.sched, "lws") == 0);
}

static void check_cpu_workers_asked(void)
{
    tsr_workers_plan_t p;
    tsr_workers_in_t in = machine(1);
    in.ncpus = 4; /* --threads 4 */
    CHECK_RC(tsr_plan_workers(&in, &p), TSR_SUCCESS);
    CHECK(p.ncpus == 4 && !p.gpu_only && strcmp(p.sched, "dmdas") == 0 && said(&p, "--threads"));
    in = machine(0);
    in.ncpus = 4;
    CHECK_RC(tsr_plan_workers(&in, &p), TSR_SUCCESS);
    CHECK(p.ncpus == 4 && strcmp(p.sched, "lws") == 0 && p.reason[0] == '\0');
    in = machine(1);
    in.env_ncpu = "2"; /* STARPU_NCPU wins over the default and over --threads */
    CHECK_RC(tsr_plan_workers(&in, &p), TSR_SUCCESS);
    CHECK(!p.gpu_only && said(&p, "STARPU_NCPU=2"));
    in.ncpus = 4;
    CHECK_RC(tsr_plan_workers(&in, &p), TSR_SUCCESS);
    CHECK(!p.gpu_only && said(&p, "STARPU_NCPU=2"));
    in = machine(1);
    in.env_ncpu = "0";
    CHECK_RC(tsr_plan_workers(&in, &p), TSR_SUCCESS);
    CHECK(p.gpu_only && said(&p, "STARPU_NCPU=0"));
    in = machine(1);
    in.parallel_worker_size = 4; /* --pws: parallel CPU workers beside the GPU, peager */
    CHECK_RC(tsr_plan_workers(&in, &p), TSR_SUCCESS);
    CHECK(p.ncpus == -1 && !p.gpu_only && strcmp(p.sched, "peager") == 0 && said(&p, "--pws 4"));
}

static void check_gpus_turned_off(void)
{
    tsr_workers_plan_t p;
    tsr_workers_in_t in = machine(1);
    in.ncuda = 0; /* --gpus 0: the CPUs as without a GPU */
    CHECK_RC(tsr_plan_workers(&in, &p), TSR_SUCCESS);
    CHECK(p.ncpus == -1 && p.ncuda == 0 && p.cuda_off && !p.gpu_only && strcmp(p.sched, "lws") == 0);
    in = machine(1);
    in.env_ncuda = "0";
    in.ncuda = 1; /* STARPU_NCUDA wins over --gpus */
    CHECK_RC(tsr_plan_workers(&in, &p), TSR_SUCCESS);
    CHECK(p.ncpus == -1 && p.cuda_off && !p.gpu_only && strcmp(p.sched, "lws") == 0);
    in.ncuda = 0;
    in.env_ncuda = "2"; /* STARPU_NCUDA=2 wins over --gpus 0 */
    CHECK_RC(tsr_plan_workers(&in, &p), TSR_SUCCESS);
    CHECK(!p.cuda_off && p.gpu_only);
    /* the count tsr_init holds the started GPUs to, and what asked for it */
    CHECK(p.gpus_asked == 2 && strcmp(p.gpus_asked_by, "STARPU_NCUDA") == 0 && p.gpus_found == 1);
    in = machine(0); /* turned off without a GPU too (tsr_init's warning about unused GPUs reads it) */
    in.ncuda = 0;
    CHECK_RC(tsr_plan_workers(&in, &p), TSR_SUCCESS);
    CHECK(p.cuda_off);
    in = machine(2);
    in.ncuda = 1; /* --gpus 1 of 2 */
    CHECK_RC(tsr_plan_workers(&in, &p), TSR_SUCCESS);
    CHECK(p.ncpus == 0 && p.ncuda == 1 && p.gpu_only && !p.cuda_off);
    CHECK(p.gpus_asked == 1 && strstr(p.gpus_asked_by, "--gpus") != NULL);
    /* no worker at all: refused with the reason */
    in = machine(0);
    in.env_ncpu = "0";
    CHECK_RC(tsr_plan_workers(&in, &p), TSR_EINVAL);
    CHECK(said(&p, "STARPU_NCPU=0") && said(&p, "no GPU found"));
    in = machine(1);
    in.env_ncpu = "0";
    in.ncuda = 0;
    CHECK_RC(tsr_plan_workers(&in, &p), TSR_EINVAL);
    CHECK(said(&p, "CUDA workers turned off"));
}

static void check_scheduler(void)
{
    tsr_workers_plan_t p;
    tsr_workers_in_t in = machine(1);
    in.env_sched = "eager"; /* STARPU_SCHED: the GPU alone still, with that scheduler */
    CHECK_RC(tsr_plan_workers(&in, &p), TSR_SUCCESS);
    CHECK(p.gpu_only && strcmp(p.sched, "eager") == 0);
    in.sched = "lws"; /* StarPU takes STARPU_SCHED over the configured name */
    CHECK_RC(tsr_plan_workers(&in, &p), TSR_SUCCESS);
    CHECK(strcmp(p.sched, "eager") == 0);
    in.env_sched = NULL;
    CHECK_RC(tsr_plan_workers(&in, &p), TSR_SUCCESS);
    CHECK(strcmp(p.sched, "lws") == 0 && p.gpu_only);
}

static void check_visible_gpus(void)
{
    CHECK(tsr_visible_gpus(2, NULL) == 2);
    CHECK(tsr_visible_gpus(2, "") == 0);
    CHECK(tsr_visible_gpus(2, "-1") == 0);
    CHECK(tsr_visible_gpus(2, "1") == 1);
    CHECK(tsr_visible_gpus(2, "0,1") == 2);
    CHECK(tsr_visible_gpus(2, "0,1,2,3") == 2);
    CHECK(tsr_visible_gpus(4, "0,-1,2") == 1);
    CHECK(tsr_visible_gpus(4, "GPU-8f3c,MIG-1") == 2);
    CHECK(tsr_visible_gpus(0, "0") == 0);
}

int main(void)
{
    check_defaults();
    check_cpu_workers_asked();
    check_gpus_turned_off();
    check_scheduler();
    check_visible_gpus();
    return tsr_check_report("test_workers_plan");
}
