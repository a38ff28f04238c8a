/* Internal (not installed): process-wide context shared by the layers. */
#ifndef TSR_CONTEXT_H
#define TSR_CONTEXT_H
#include <stdint.h>
#include "tsr_build_config.h"
#include "tsr_core.h"
#if TSR_USE_MPI
#include <mpi.h>
#endif

typedef struct {
    int initialized;
    int mpi_active;
    int rank, size;
    int parallel_worker_size;
#if TSR_USE_MPI
    MPI_Comm comm;      /* communicator given to StarPU-MPI */
    MPI_Comm raw_comm;  /* our own duplicate for scatter/gather/norms */
    int we_initialized_mpi;
#endif
    int64_t next_tag;   /* MPI tag range allocator (same order on every rank) */
    /* under simulation: the submitting thread's cost charged in simulated
     * time, microseconds per task it inserts and per call it skips
     * (TSR_SIM_SUBMIT_COST, tsr_check_environment) */
    double sim_task_us, sim_skip_us;
    int cpu_worker_groups; /* TSR_CPU_WORKER_GROUPS=1: a worker group a CPU worker (tests) */
    int submit_threads;    /* TSR_SUBMIT_THREADS: at most this many threads submit independent streams */
} tsr_context_t;

extern tsr_context_t tsr_ctx;

#define TSR_MAX_SUBMIT_THREADS 64
/* The calling submitting thread's simulated submission cost not yet charged. */
double *tsr_submitter_owed_us(void);
/* Joins the submitting threads (tsr_finalize). */
void tsr_submit_threads_stop(void);

/* StarPU's start-up variables checked before it starts (core/environment.c):
 * TSR_EINVAL with a message naming the variable, else TSR_SUCCESS. */
int tsr_check_environment(void);
/* The workers and scheduler StarPU starts with (core/workers_plan.c): */
typedef struct {
    int gpus;              /* GPUs this process may use (found, within CUDA_VISIBLE_DEVICES);
                            * 0 in a build without CUDA; -1: unknown (a simulation's platform) */
    int ncpus, ncuda;      /* tsr_config_t's (-1: the default) */
    const char *sched;     /* tsr_config_t's, or NULL */
    int parallel_worker_size;
    const char *env_ncpu, *env_ncuda, *env_sched; /* STARPU_NCPU (else STARPU_NCPUS), STARPU_NCUDA,
                                                   * STARPU_SCHED, or NULL when unset */
} tsr_workers_in_t;
typedef struct {
    int ncpus, ncuda;      /* for starpu_conf: -1 StarPU's default, 0 none, N (StarPU's variables still win) */
    int gpu_only;          /* no CPU worker runs tasks: the GPUs run them all */
    int cuda_off;          /* CUDA workers turned off: STARPU_NCUDA=0, or the configuration's ncuda 0
                            * (StarPU reads the variable over it), GPUs found or not */
    int gpus_asked;        /* GPUs asked for: STARPU_NCUDA over the configuration's ncuda, as StarPU
                            * reads them (-1: every GPU found) */
    const char *gpus_asked_by; /* what asked for them, for a message */
    int gpus_found;        /* tsr_workers_in_t's gpus */
    char sched[64];        /* the scheduler */
    char reason[256];      /* why, for the runtime line ("" when there is nothing to say), or the error */
} tsr_workers_plan_t;
/* With GPUs and no CPU worker count asked for (configuration, STARPU_NCPU),
 * the GPUs alone: CPU workers beside a GPU make GPT-2 slower (their tasks
 * are slower than the GPU's, and dmdas first calibrates every kernel on
 * them). TSR_EINVAL (the reason says why) when no worker would start. */
int tsr_plan_workers(const tsr_workers_in_t *in, tsr_workers_plan_t *plan);
/* GPUs of the found ones that CUDA_VISIBLE_DEVICES (NULL: unset) leaves visible. */
int tsr_visible_gpus(int found, const char *cuda_visible_devices);
/* The reference submission cost a simulation charges (docs/simulation.md):
 * 13.7 us a task, what the main thread of one rank took beside 16 busy
 * Xeon workers to submit a 124M B4 T64 step (182 ms, 13,120 tasks), and a
 * skipped call at the ratio measured on the 2-core machine (1.7 against
 * 6.1 us a task inserted: 3.8 us). */
#define TSR_SIM_TASK_US 13.7
#define TSR_SIM_SKIP_US 3.8
/* Worker groups (core/worker_groups.c): made once StarPU runs, from its CPU
 * and CUDA worker counts, dropped before it stops. The mask of a group's
 * workers for starpu_task::workerids (words uint32_t values; NULL and 0 for
 * no group). */
void tsr_worker_groups_start(int ncpu, int ncuda);
void tsr_worker_groups_stop(void);
const uint32_t *tsr_worker_group_mask(int group, unsigned *words);
/* The memory node of a group's workers (-1: no such group). */
int tsr_worker_group_memory_node(int group);
/* The memory nodes of the GPUs this rank's tasks run on alone (a group's
 * each, or the one GPU of a rank without groups) into nodes[0 .. max);
 * returns their number, 0 where CPU workers run tasks too. */
int tsr_gpu_memory_nodes(int *nodes, int max);
/* Reserve n consecutive MPI tags; every rank must call it in the same order. */
int64_t tsr_tag_alloc(int64_t n);
/* FxT tracing (core/trace.c): prepare before StarPU starts (dir NULL: off);
 * finish once every rank's StarPU has stopped (rank 0 converts the files). */
int tsr_trace_prepare(const char *dir);
int tsr_trace_active(void);
int tsr_trace_finish(int rank, int nranks);
/* Schedule recording (core/schedule.c): prepare before StarPU starts (png
 * NULL and summary 0: off), start once it runs, finish before it stops
 * (hands the records to report). task_done is every Tessera codelet's
 * callback. */
int tsr_schedule_prepare(const char *png, int summary, tsr_schedule_report_t report);
int tsr_schedule_start(void);
int tsr_schedule_finish(void);
void tsr_schedule_task_done(void *arg);
/* Host-side transfers and reductions between ranks (core/comm.c): MPI on
 * Tessera's communicator, StarPU-MPI messages under simulation. */
int tsr_send_bytes(const void *buf, size_t bytes, int to);
int tsr_recv_bytes(void *buf, size_t bytes, int from);
typedef enum { TSR_REDUCE_MIN, TSR_REDUCE_MAX, TSR_REDUCE_SUM } tsr_reduce_op_t;
/* *value, or v[0..n-1] element by element, combined over all ranks
 * (collective; unchanged without MPI) */
int tsr_allreduce_double(double *value, tsr_reduce_op_t op);
int tsr_allreduce_doubles(double *v, int n, tsr_reduce_op_t op);
/* Count a submitted task. */
void tsr_count_task(void);
/* Count a task whose kernel failed (tsr_wait and tsr_finalize then fail). */
void tsr_count_failed_task(void);
/* Tasks whose kernel failed since tsr_init (a sequence compares it before and after). */
uint64_t tsr_failed_tasks(void);
#endif
