#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <stdatomic.h>
#include <dirent.h>
#include <starpu.h>
#include <hwloc.h>
#include "tsr_context.h"
#if TSR_USE_CUDA && STARPU_HAS_CUDA
#include <cublas_v2.h>
#include <starpu_cublas_v2.h>
#endif
#if TSR_USE_MPI
#include <starpu_mpi.h>
#if !defined(STARPU_SIMGRID) && defined(__has_include) && __has_include(<mpi-ext.h>)
#include <mpi-ext.h> /* Open MPI's MPIX_Query_cuda_support; not SMPI's */
#endif
#endif

static _Atomic uint64_t tasks_submitted;
static _Atomic uint64_t tasks_failed; /* tasks whose kernel reported an error */
static char sched_name[64];
static char runtime_summary[512];

void tsr_config_default(tsr_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->ncpus = -1;
    cfg->ncuda = -1;
    cfg->sched = NULL;
    cfg->parallel_worker_size = 1;
    cfg->mpi = TSR_MPI_AUTO;
    const char *v = getenv("TSR_VERBOSE");
    cfg->verbose = v ? atoi(v) : 1;
    const char *tf32 = getenv("TSR_GPU_TF32");
    cfg->gpu_tf32 = !(tf32 && strcmp(tf32, "0") == 0);
}

static int count_physical_cores(void)
{
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0)
        return 1;
    int n = 1;
    if (hwloc_topology_load(topo) == 0) {
        n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
        if (n <= 0)
            n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    }
    hwloc_topology_destroy(topo);
    return n > 0 ? n : 1;
}

/* Cores this process may run on (its CPU binding, e.g. one core per rank under mpirun). */
static int count_bound_cores(void)
{
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0)
        return 1;
    int n = 0;
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (set && hwloc_topology_load(topo) == 0 && hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_PROCESS) == 0) {
        n = hwloc_get_nbobjs_inside_cpuset_by_type(topo, set, HWLOC_OBJ_CORE);
        if (n <= 0)
            n = hwloc_bitmap_weight(set);
    }
    hwloc_bitmap_free(set);
    hwloc_topology_destroy(topo);
    return n > 0 ? n : 1;
}

int tsr_mpi_launched(void)
{
    if (tsr_simulated()) /* a simulated build runs only under (starpu_)smpirun */
        return 1;
    const char *vars[] = { "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS" };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *s = getenv(vars[i]);
        if (s && atoi(s) > 1)
            return 1;
    }
    return 0;
}

static int want_mpi(const tsr_config_t *cfg)
{
#if TSR_USE_MPI
    if (cfg->mpi == TSR_MPI_OFF)
        return 0;
    if (cfg->mpi == TSR_MPI_ON)
        return 1;
    if (tsr_mpi_launched()) /* first: under simulation MPI_Initialized is not ours to call */
        return 1;
    int already = 0;
    MPI_Initialized(&already);
    return already;
#else
    (void)cfg;
    return 0;
#endif
}

/* A scheduler StarPU knows: else it would warn and fall back to its default. */
static int check_scheduler_name(const char *name, const char *from)
{
    struct starpu_sched_policy **policies = starpu_sched_get_predefined_policies();
    char known[1024] = "";
    for (int i = 0; policies[i]; i++) {
        if (strcmp(policies[i]->policy_name, name) == 0)
            return TSR_SUCCESS;
        if (strlen(known) + strlen(policies[i]->policy_name) + 2 < sizeof known)
            strcat(strcat(known, " "), policies[i]->policy_name);
    }
    tsr_log(TSR_LOG_ERROR, "tsr_init: unknown StarPU scheduler '%s' (%s); known:%s", name, from, known);
    return TSR_EINVAL;
}

static int validate_config(const tsr_config_t *c)
{
    if (c->ncpus < -1 || c->ncpus == 0 || c->ncuda < -1 || c->parallel_worker_size < 1) {
        tsr_log(TSR_LOG_ERROR, "tsr_init: bad config (ncpus=%d ncuda=%d parallel_worker_size=%d)",
                c->ncpus, c->ncuda, c->parallel_worker_size);
        return TSR_EINVAL;
    }
    if (c->ncpus > STARPU_MAXCPUS) {
        tsr_log(TSR_LOG_ERROR, "tsr_init: %d CPU workers requested, this StarPU supports at most %d",
                c->ncpus, STARPU_MAXCPUS);
        return TSR_EINVAL;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (c->ncpus > 0 && cores > 0 && c->ncpus > cores && !tsr_simulated()) /* as STARPU_NCPU (environment.c) */
        tsr_log(TSR_LOG_INFO, "warning: %d CPU workers asked for (--threads) and this machine has %ld cores: they "
                "share the cores, slower than one a core", c->ncpus, cores);
    const char *env_sched = getenv("STARPU_SCHED");
    if (c->sched && check_scheduler_name(c->sched, "the configured scheduler"))
        return TSR_EINVAL;
    if (env_sched && check_scheduler_name(env_sched, "STARPU_SCHED")) /* StarPU takes it over c->sched */
        return TSR_EINVAL;
    if (c->ncuda > 0 && !(STARPU_HAS_CUDA && TSR_USE_CUDA) && !tsr_simulated()) { /* a simulation has simulated GPUs */
        tsr_log(TSR_LOG_ERROR, "tsr_init: %d CUDA worker(s) requested, but %s was built without CUDA", c->ncuda,
                STARPU_HAS_CUDA ? "Tessera" : "this StarPU");
        return TSR_ENOTSUP;
    }
#if !TSR_USE_MPI
    if (c->mpi == TSR_MPI_ON) {
        tsr_log(TSR_LOG_ERROR, "tsr_init: MPI requested but Tessera was built without MPI");
        return TSR_ENOTSUP;
    }
#endif
    return TSR_SUCCESS;
}

#if TSR_USE_MPI
static int start_mpi(int *argc, char ***argv)
{
    tsr_ctx.comm = MPI_COMM_WORLD;
    if (tsr_simulated()) /* MPI runs in StarPU-MPI's actor; rank and size come from it once started */
        return TSR_SUCCESS;
    int already = 0, provided = 0;
    MPI_Initialized(&already);
    if (!already) {
        if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
            tsr_log(TSR_LOG_ERROR, "tsr_init: MPI_Init_thread failed");
            return TSR_ERUNTIME;
        }
        tsr_ctx.we_initialized_mpi = 1;
    } else {
        MPI_Query_thread(&provided);
    }
    /* Our scatter/gather/norm calls run beside StarPU-MPI's progress thread
     * (SMPI's ranks and threads are SimGrid actors: it reports level 0). */
    if (provided < MPI_THREAD_MULTIPLE && !tsr_simulated()) {
        tsr_log(TSR_LOG_ERROR, "tsr_init: the MPI library must provide MPI_THREAD_MULTIPLE (got level %d)", provided);
        return TSR_ERUNTIME;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &tsr_ctx.raw_comm);
    MPI_Comm_rank(MPI_COMM_WORLD, &tsr_ctx.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &tsr_ctx.size);
    return TSR_SUCCESS;
}
#endif

/* NVIDIA GPUs the kernel driver knows of (0 without the driver). */
static int count_nvidia_gpus(void)
{
    DIR *d = opendir("/proc/driver/nvidia/gpus");
    if (!d)
        return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The workers and scheduler to start (tsr_plan_workers) from this machine's
 * GPUs, the configuration and StarPU's variables. */
static int plan_workers(const tsr_config_t *cfg, tsr_workers_plan_t *plan)
{
    int gpus = tsr_simulated() ? -1 /* the simulated platform's */
               : STARPU_HAS_CUDA && TSR_USE_CUDA ? tsr_visible_gpus(count_nvidia_gpus(), getenv("CUDA_VISIBLE_DEVICES"))
                                                 : 0;
    tsr_workers_in_t in = { gpus, cfg->ncpus, cfg->ncuda, cfg->sched, cfg->parallel_worker_size,
                            getenv("STARPU_NCPU") ? getenv("STARPU_NCPU") : getenv("STARPU_NCPUS"),
                            getenv("STARPU_NCUDA"), getenv("STARPU_SCHED") };
    int rc = tsr_plan_workers(&in, plan);
    if (rc)
        tsr_log(TSR_LOG_ERROR, "tsr_init: %s", plan->reason);
    snprintf(sched_name, sizeof sched_name, "%s", plan->sched);
    return rc;
}

/* Whether the MPI library takes GPU buffers (Open MPI's
 * MPIX_Query_cuda_support): StarPU-MPI then sends tiles from GPU memory
 * (STARPU_MPI_GPUDIRECT, on by default), else through host memory. */
static int mpi_is_cuda_aware(void)
{
#if TSR_USE_MPI && defined(MPIX_CUDA_AWARE_SUPPORT)
    return MPIX_Query_cuda_support();
#else
    return 0;
#endif
}

/* Under MPI with CUDA workers: how tiles on a GPU travel between ranks. */
static const char *gpu_traffic(void)
{
    if (tsr_ctx.size < 2 || tsr_ncuda_workers() == 0)
        return "";
    return mpi_is_cuda_aware() ? ", MPI CUDA-aware (GPU tiles sent from GPU memory)"
                               : ", MPI not CUDA-aware (GPU tiles staged in host memory)";
}

static void describe_runtime(int tf32, const char *reason)
{
    int major, minor, release;
    starpu_get_version(&major, &minor, &release);
    snprintf(runtime_summary, sizeof runtime_summary,
             "StarPU %d.%d.%d (CUDA %s, FxT %s, max %d CPUs), %d CPU + %d CUDA workers%s, scheduler %s, %d rank(s)%s%s%s",
             major, minor, release, STARPU_HAS_CUDA ? "yes" : "no", STARPU_HAS_FXT ? "yes" : "no",
             STARPU_MAXCPUS, tsr_ncpu_workers(), tsr_ncuda_workers(),
             tsr_ncuda_workers() == 0 ? "" : tf32 ? " (GEMMs in TF32)" : " (GEMMs in strict float32)", sched_name,
             tsr_ctx.size, gpu_traffic(), *reason ? "; " : "", reason);
}

#if TSR_USE_CUDA && STARPU_HAS_CUDA
/* On each CUDA worker: its cuBLAS handle's math mode (TF32 tensor cores on
 * GPUs that have them, else ignored by cuBLAS). */
static void set_cublas_math(void *arg)
{
    cublasMath_t mode = *(const int *)arg ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
    if (cublasSetMathMode(starpu_cublas_get_local_handle(), mode) != CUBLAS_STATUS_SUCCESS)
        tsr_log(TSR_LOG_ERROR, "tsr_init: cannot set the cuBLAS math mode of a CUDA worker");
}

/* A cuBLAS handle per CUDA worker, on its stream, in the configured math mode. */
static void start_cublas(int tf32)
{
    starpu_cublas_init();
    starpu_execute_on_each_worker(set_cublas_math, &tf32, STARPU_CUDA);
}
#endif

/* Cores or GPUs that this build cannot use: say why and what to do. */
/* Under simulation the tiles that StarPU allocates (copies of other ranks'
 * tiles, reduction buffers) are never computed on, so they are "folded": SMPI
 * shares one block of memory among them all and skips copying messages into
 * them. A simulated rank then costs its own tiles' memory, not every tile it
 * receives: docs/simulation.md. */
static void fold_simulated_allocations(void)
{
    starpu_malloc_on_node_set_default_flags(STARPU_MAIN_RAM, STARPU_MALLOC_PINNED | STARPU_MALLOC_COUNT |
                                                                 STARPU_MALLOC_SIMULATION_FOLDED);
}

static void warn_unused_hardware(const tsr_workers_plan_t *plan)
{
    int cores = count_physical_cores();
    if (cores > STARPU_MAXCPUS)
        tsr_log(TSR_LOG_INFO, "warning: this machine has %d cores but this StarPU runs at most %d CPU workers; "
                "build StarPU with deps/starpu/build.sh (--enable-maxcpus=256) to use them all",
                cores, STARPU_MAXCPUS);
    int gpus = count_nvidia_gpus();
    if (gpus == 0 || plan->cuda_off)
        return;
    if (!STARPU_HAS_CUDA)
        tsr_log(TSR_LOG_INFO, "warning: %d NVIDIA GPU(s) found but this StarPU was built without CUDA; "
                "rebuild it with deps/starpu/build.sh where nvcc is found (CUDA_HOME), then rebuild Tessera", gpus);
    else if (!TSR_USE_CUDA)
        tsr_log(TSR_LOG_INFO, "warning: %d NVIDIA GPU(s) found but Tessera was built without CUDA kernels; "
                "reconfigure with -DTSR_USE_CUDA=ON (nvcc and cuBLAS needed)", gpus);
    else if (tsr_ncuda_workers() == 0)
        tsr_log(TSR_LOG_INFO, "warning: %d NVIDIA GPU(s) found but StarPU started no CUDA worker "
                "(check the driver and CUDA_VISIBLE_DEVICES; TSR_VERBOSE=2 shows StarPU's messages)", gpus);
}

/* Ranks on this host and their CPU workers: with MPI, the ranks sharing this
 * host's memory (MPI_COMM_TYPE_SHARED; collective); without, the launcher's
 * count of local ranks (Open MPI, MPICH) times this rank's workers. */
static void host_ranks_workers(int use_mpi, int *ranks, int *workers)
{
    *ranks = 1;
    *workers = tsr_ncpu_workers();
#if TSR_USE_MPI
    MPI_Comm host;
    if (use_mpi && MPI_Comm_split_type(tsr_ctx.raw_comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host) == MPI_SUCCESS) {
        int mine = *workers;
        MPI_Comm_size(host, ranks);
        MPI_Allreduce(&mine, workers, 1, MPI_INT, MPI_SUM, host);
        MPI_Comm_free(&host);
        return;
    }
#endif
    (void)use_mpi;
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE") ? getenv("OMPI_COMM_WORLD_LOCAL_SIZE")
                                                              : getenv("MPI_LOCALNRANKS");
    if (local && atoi(local) > 1) {
        *ranks = atoi(local);
        *workers *= *ranks;
    }
}

/* More CPU workers on this host than cores: the ranks' workers poll for
 * tasks on shared cores and run several times slower (mpirun -np 2 with all
 * cores each on a 2-core machine: 8x). One line on rank 0; collective. */
static void warn_oversubscribed(int use_mpi)
{
    if (tsr_simulated()) /* simulated cores are not these */
        return;
    int ranks, workers, cores = count_physical_cores();
    host_ranks_workers(use_mpi, &ranks, &workers);
    if (tsr_ctx.rank == 0 && ranks > 1 && workers > cores)
        tsr_log(TSR_LOG_INFO, "warning: %d ranks on this host run %d CPU workers on its %d cores: they share cores "
                "and run slower; give each rank fewer workers (--threads or STARPU_NCPU, at most %d a rank here)",
                ranks, workers, cores, cores / ranks > 0 ? cores / ranks : 1);
}

/* StarPU starts at most the GPUs it finds, with no error when that is fewer
 * than asked for: a run asked for on 3 GPUs would go on with 1, or on the
 * CPUs alone. Checks the devices its CUDA workers drive against the plan's
 * count asked for. */
static int check_gpus_started(const tsr_workers_plan_t *plan)
{
    int started = 0;
    if (plan->gpus_asked <= 0)
        return TSR_SUCCESS;
    unsigned char seen[256] = { 0 };
    for (unsigned w = 0; w < starpu_worker_get_count(); w++) {
        int dev = starpu_worker_get_devid((int)w);
        if (starpu_worker_get_type((int)w) == STARPU_CUDA_WORKER && dev >= 0 && dev < 256 && !seen[dev]) {
            seen[dev] = 1;
            started++;
        }
    }
    if (started >= plan->gpus_asked)
        return TSR_SUCCESS;
    tsr_log(TSR_LOG_ERROR, "tsr_init: %d GPU(s) asked for (%s), but StarPU started %d (%d visible here%s)",
            plan->gpus_asked, plan->gpus_asked_by, started, plan->gpus_found >= 0 ? plan->gpus_found : started,
            getenv("CUDA_VISIBLE_DEVICES") ? ", CUDA_VISIBLE_DEVICES set" : "");
    return TSR_EINVAL;
}

static int start_starpu(int use_mpi, int *argc, char ***argv, struct starpu_conf *conf)
{
#if TSR_USE_MPI
    if (use_mpi)
        return starpu_mpi_init_conf(argc, argv, 0, tsr_ctx.comm, conf);
#endif
    (void)use_mpi;
    return starpu_init(conf);
}

int tsr_init(const tsr_config_t *user_cfg, int *argc, char ***argv)
{
    if (tsr_ctx.initialized)
        return TSR_EALREADY;
    tsr_config_t cfg;
    if (user_cfg)
        cfg = *user_cfg;
    else
        tsr_config_default(&cfg);
    tsr_set_verbose(cfg.verbose);
    tsr_workers_plan_t plan;
    int rc = validate_config(&cfg);
    if (!rc)
        rc = tsr_check_environment();
    if (!rc)
        rc = plan_workers(&cfg, &plan);
    if (rc)
        return rc;

    if ((rc = tsr_trace_prepare(cfg.trace_dir)) != 0 ||
        (rc = tsr_schedule_prepare(cfg.schedule_png, cfg.schedule_summary, cfg.schedule_report)) != 0)
        return rc;
    int use_mpi = want_mpi(&cfg);
#if TSR_USE_MPI
    if (use_mpi && (rc = start_mpi(argc, argv)) != 0)
        return rc;
#endif
    if (cfg.verbose < 2)
        setenv("STARPU_SILENT", "1", 0);
    /* StarPU keeps 5-10 % of each GPU's buffers clean by writing dirty ones
     * back to host memory ahead of any need: with every tile rewritten each
     * step (GPT-2's parameters, gradients, AdamW state) that copied 1.7 GB a
     * step from an H100 whose memory was 90 % free. Tessera keeps its data
     * resident; StarPU still evicts (writing back) when a GPU runs out. */
    setenv("STARPU_MINIMUM_CLEAN_BUFFERS", "0", 0);
    setenv("STARPU_TARGET_CLEAN_BUFFERS", "0", 0);
    if (cfg.parallel_worker_size > 1) {
        char s[16];
        snprintf(s, sizeof s, "%d", cfg.parallel_worker_size);
        setenv("STARPU_MIN_WORKERSIZE", s, 1);
        setenv("STARPU_MAX_WORKERSIZE", s, 1);
        /* the BLAS threads a parallel task starts inherit its worker's CPU
         * binding: with bound workers they would all share one core */
        setenv("STARPU_WORKERS_NOBIND", "1", 0);
    }

    struct starpu_conf conf;
    starpu_conf_init(&conf);
    if (plan.ncpus >= 0)
        conf.ncpus = plan.ncpus;
    else if (use_mpi && count_bound_cores() == 1) {
        /* StarPU-MPI would reserve this rank's only core for its progress
         * thread and start no CPU worker: the thread shares the core instead */
        conf.ncpus = 1;
        tsr_log(TSR_LOG_DEBUG, "one core for this rank: 1 CPU worker, sharing it with the MPI progress thread");
    }
    if (cfg.ncuda >= 0)
        conf.ncuda = cfg.ncuda;
    conf.nopencl = 0;
    conf.sched_policy_name = sched_name;

    int ret = start_starpu(use_mpi, argc, argv, &conf);
    if (ret == -ENODEV && plan.gpu_only && !getenv("STARPU_NCPU") && !getenv("STARPU_NCPUS")) {
        /* a GPU was found but StarPU started no CUDA worker on it */
        conf.ncpus = -1;
        if (!cfg.sched && !getenv("STARPU_SCHED"))
            snprintf(sched_name, sizeof sched_name, "lws");
        snprintf(plan.reason, sizeof plan.reason, "CPU only: StarPU started no CUDA worker on the GPU found");
        ret = start_starpu(use_mpi, argc, argv, &conf);
    }
    if (ret != 0) {
        tsr_log(TSR_LOG_ERROR, "tsr_init: StarPU failed to start (%s)", strerror(-ret));
        return TSR_ERUNTIME;
    }
    tsr_ctx.mpi_active = use_mpi;
    if (tsr_simulated()) /* kernels do not run: the tiles StarPU allocates need no memory */
        fold_simulated_allocations();
#if TSR_USE_MPI
    if (use_mpi && tsr_simulated()) {
        starpu_mpi_comm_rank(tsr_ctx.comm, &tsr_ctx.rank);
        starpu_mpi_comm_size(tsr_ctx.comm, &tsr_ctx.size);
    }
#endif
#if TSR_USE_MPI
    if (use_mpi && (cfg.schedule_summary || cfg.schedule_png))
        starpu_mpi_comm_stats_enable(); /* tsr_comm_bytes_sent, when profiling */
#endif
    tsr_ctx.parallel_worker_size = cfg.parallel_worker_size;
    tsr_ctx.next_tag = 1;
    tsr_ctx.initialized = 1;
    atomic_store(&tasks_submitted, 0);
    atomic_store(&tasks_failed, 0);
#if TSR_USE_CUDA && STARPU_HAS_CUDA
    start_cublas(cfg.gpu_tf32);
#endif
    rc = check_gpus_started(&plan);
    if (tsr_any(rc)) { /* every rank stops if one has fewer GPUs than asked for */
        tsr_finalize();
        return rc ? rc : TSR_EINVAL;
    }
    rc = tsr_schedule_start();
    if (tsr_any(rc)) { /* every rank stops if one cannot write its chart */
        tsr_finalize();
        return rc ? rc : TSR_EIO;
    }
    tsr_worker_groups_start(tsr_ncpu_workers(), tsr_ncuda_workers());
    describe_runtime(cfg.gpu_tf32, plan.reason);
    tsr_log(TSR_LOG_DEBUG, "started: %s", runtime_summary);
    warn_oversubscribed(use_mpi);
    if (tsr_ctx.rank == 0)
        warn_unused_hardware(&plan);
    return TSR_SUCCESS;
}

/* TSR_ERUNTIME once a task's kernel has failed (the tasks logged why). */
static int failed_tasks_error(void)
{
    uint64_t n = atomic_load(&tasks_failed);
    if (n == 0)
        return TSR_SUCCESS;
    tsr_log(TSR_LOG_ERROR, "%llu task(s) failed in their kernels: results are wrong", (unsigned long long)n);
    return TSR_ERUNTIME;
}

int tsr_finalize(void)
{
    if (!tsr_ctx.initialized)
        return TSR_ENOTINIT;
    starpu_task_wait_for_all();
    tsr_submit_threads_stop();
    tsr_worker_groups_stop();
    int rc = tsr_schedule_finish();
    if (!rc)
        rc = failed_tasks_error();
#if TSR_USE_CUDA && STARPU_HAS_CUDA
    starpu_cublas_shutdown();
#endif
#if TSR_USE_MPI
    if (tsr_ctx.mpi_active) {
        starpu_mpi_wait_for_all(tsr_ctx.comm);
        starpu_mpi_shutdown(); /* also shuts StarPU down */
    } else
#endif
        starpu_shutdown();
    if (tsr_trace_active()) {
        tsr_barrier(); /* every rank has written its trace file */
        int trace_rc = tsr_trace_finish(tsr_ctx.rank, tsr_ctx.size);
        rc = rc ? rc : trace_rc;
    }
#if TSR_USE_MPI
    if (tsr_ctx.mpi_active && !tsr_simulated()) {
        MPI_Comm_free(&tsr_ctx.raw_comm);
        if (tsr_ctx.we_initialized_mpi)
            MPI_Finalize();
    }
#endif
    tsr_ctx.initialized = 0;
    tsr_ctx.mpi_active = 0;
    tsr_ctx.rank = 0;
    tsr_ctx.size = 1;
    runtime_summary[0] = '\0';
    return rc;
}

int tsr_mpi_active(void) { return tsr_ctx.mpi_active; }
int tsr_ncpu_workers(void) { return tsr_ctx.initialized ? (int)starpu_cpu_worker_get_count() : 0; }
int tsr_ncuda_workers(void) { return tsr_ctx.initialized ? (int)starpu_cuda_worker_get_count() : 0; }
const char *tsr_sched_name(void) { return sched_name; }
const char *tsr_runtime_summary(void) { return runtime_summary; }
int tsr_parallel_worker_size(void) { return tsr_ctx.parallel_worker_size; }

int tsr_wait(void)
{
    if (!tsr_ctx.initialized)
        return TSR_ENOTINIT;
#if TSR_USE_MPI
    if (tsr_ctx.mpi_active) {
        if (starpu_mpi_wait_for_all(tsr_ctx.comm) != 0)
            return TSR_ERUNTIME;
        /* Under simulation, host messages are StarPU-MPI synchronous sends
         * (comm.c). StarPU-MPI 1.4 wakes a rank waiting for its requests only
         * when its progress thread has nothing at all to do, and an unmatched
         * synchronous send from a rank that already left this wait gives it
         * something forever: the waiting rank never wakes up (SimGrid's
         * "Deadlock detected", docs/simulation.md). No rank leaves before all
         * have finished (tsr_barrier: an MPI barrier there, which sends no
         * such message). */
        int rc = tsr_simulated() ? tsr_barrier() : TSR_SUCCESS;
        return rc ? rc : failed_tasks_error();
    }
#endif
    if (starpu_task_wait_for_all() != 0)
        return TSR_ERUNTIME;
    return failed_tasks_error();
}

int tsr_pause(void)
{
    if (!tsr_ctx.initialized)
        return TSR_ENOTINIT;
    starpu_pause();
    return TSR_SUCCESS;
}

int tsr_resume(void)
{
    if (!tsr_ctx.initialized)
        return TSR_ENOTINIT;
    starpu_resume();
    return TSR_SUCCESS;
}

void tsr_comm_bytes_sent(double *sent)
{
    for (int r = 0; r < tsr_ctx.size; r++)
        sent[r] = 0;
#if TSR_USE_MPI
    if (tsr_ctx.mpi_active && tsr_ctx.initialized) {
        size_t *stats = calloc((size_t)tsr_ctx.size, sizeof *stats);
        if (stats) {
            starpu_mpi_comm_stats_retrieve(stats); /* enabled by tsr_init */
            for (int r = 0; r < tsr_ctx.size; r++)
                sent[r] = (double)stats[r];
        }
        free(stats);
    }
#endif
}

int64_t tsr_tag_alloc(int64_t n)
{
    return __atomic_fetch_add(&tsr_ctx.next_tag, n, __ATOMIC_RELAXED); /* descriptors made by several submitting threads */
}

void tsr_count_task(void) { atomic_fetch_add(&tasks_submitted, 1); }
void tsr_count_failed_task(void) { atomic_fetch_add(&tasks_failed, 1); }
uint64_t tsr_failed_tasks(void) { return atomic_load(&tasks_failed); }
uint64_t tsr_tasks_submitted(void) { return atomic_load(&tasks_submitted); }

/* Seconds on a monotonic clock; under StarPU-SimGrid, the simulated clock
 * (kernels do not run there, so the wall clock would measure nothing). */
double tsr_wtime(void)
{
    if (tsr_simulated())
        return starpu_timing_now() * 1e-6;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
