/* The environment variables StarPU reads at start-up, checked before it
 * starts: StarPU aborts with a backtrace on a malformed one. Each bad value
 * gets a message naming the variable, and tsr_init fails with TSR_EINVAL. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <starpu.h>
#include "tsr_context.h"

/* StarPU's variables that must hold a non-negative integer (its
 * starpu_get_env_number aborts on anything else). */
static const char *const numeric_vars[] = {
    "STARPU_NCPU", "STARPU_NCPUS", "STARPU_NCUDA", "STARPU_NOPENCL", "STARPU_NWORKER_PER_CUDA",
    "STARPU_CUDA_PIPELINE", "STARPU_CALIBRATE", "STARPU_PREFETCH", "STARPU_MIN_WORKERSIZE",
    "STARPU_MAX_WORKERSIZE", "STARPU_WORKERS_NOBIND", "STARPU_SILENT", "STARPU_LIMIT_CPU_MEM",
    "STARPU_LIMIT_CUDA_MEM", "STARPU_MINIMUM_CLEAN_BUFFERS", "STARPU_TARGET_CLEAN_BUFFERS",
    "STARPU_MINIMUM_AVAILABLE_MEM", "STARPU_TARGET_AVAILABLE_MEM", "STARPU_NTHREADS_PER_CORE",
    "STARPU_RESERVE_NCPU", "STARPU_MAIN_THREAD_BIND", "STARPU_BUS_STATS", "STARPU_WORKER_STATS",
};

/* A non-negative decimal integer that fits a long, the whole string. */
static int is_count(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || s[0] == '-' || s[0] == '+' || s[0] == ' ')
        return 0;
    *out = v;
    return 1;
}

/* STARPU_WORKERS_CPUID: CPU numbers N, ranges N-M or N- (to the last CPU),
 * separated by commas or spaces; at least one. */
static int is_cpu_list(const char *s)
{
    int entries = 0;
    while (*s) {
        if (*s == ',' || *s == ' ') {
            s++;
            continue;
        }
        if (*s < '0' || *s > '9')
            return 0;
        char *end;
        long first = strtol(s, &end, 10);
        s = end;
        if (*s == '-') {
            s++;
            if (*s >= '0' && *s <= '9') {
                long last = strtol(s, &end, 10);
                s = end;
                if (last < first)
                    return 0;
            }
        }
        if (*s && *s != ',' && *s != ' ')
            return 0;
        entries++;
    }
    return entries > 0;
}

/* dir is a directory this user can write, or does not exist yet and its
 * nearest existing parent is one (StarPU makes the missing part). */
static int writable_dir_or_creatable(const char *dir)
{
    char path[4096];
    struct stat st;
    if (!*dir || strlen(dir) >= sizeof path)
        return 0;
    strcpy(path, dir);
    while (stat(path, &st) != 0) {
        char *slash = strrchr(path, '/');
        if (errno != ENOENT || !slash)
            return errno == ENOENT && !slash && access(".", W_OK | X_OK) == 0;
        if (slash == path)
            slash[1] = '\0';
        else
            *slash = '\0';
    }
    return S_ISDIR(st.st_mode) && access(path, W_OK | X_OK) == 0;
}

/* Where StarPU keeps its performance models: $STARPU_PERF_MODEL_DIR, else
 * .starpu/sampling below the first of $XDG_CACHE_HOME, $STARPU_HOME and
 * $HOME that is set (StarPU's order; with none, a temporary directory).
 * StarPU makes that path and aborts when it cannot: the directory named
 * must be one this user can write. */
static int check_starpu_home(void)
{
    static const char *const vars[] = { "STARPU_PERF_MODEL_DIR", "XDG_CACHE_HOME", "STARPU_HOME", "HOME" };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *dir = getenv(vars[i]);
        if (!dir)
            continue;
        if (!writable_dir_or_creatable(dir)) {
            tsr_log(TSR_LOG_ERROR, "tsr_init: %s=%s is not a directory this user can write or make (StarPU keeps its "
                    "performance models there; set STARPU_HOME to one)", vars[i], dir);
            return TSR_EINVAL;
        }
        return TSR_SUCCESS;
    }
    return TSR_SUCCESS;
}

/* TSR_SIM_SUBMIT_COST=TASK[,SKIP]: microseconds a task inserted and a call
 * skipped cost the submitting thread, charged in simulated time (unset: the
 * reference, TSR_SIM_TASK_US and TSR_SIM_SKIP_US; 0: nothing charged). */
static int read_sim_submit_cost(void)
{
    tsr_ctx.sim_task_us = TSR_SIM_TASK_US;
    tsr_ctx.sim_skip_us = TSR_SIM_SKIP_US;
    const char *v = getenv("TSR_SIM_SUBMIT_COST");
    if (!v)
        return TSR_SUCCESS;
    char *end;
    errno = 0;
    double task = strtod(v, &end), skip = 0;
    int ok = end != v && errno == 0;
    if (ok && *end == ',') {
        const char *s = end + 1;
        skip = strtod(s, &end);
        ok = end != s && errno == 0;
    } else if (ok) {
        skip = task * TSR_SIM_SKIP_US / TSR_SIM_TASK_US; /* the reference ratio */
    }
    if (!ok || *end || !(task >= 0 && task <= 1e6) || !(skip >= 0 && skip <= 1e6)) {
        tsr_log(TSR_LOG_ERROR, "tsr_init: TSR_SIM_SUBMIT_COST=%s: expected microseconds a task and, after a comma, "
                "a skipped call, each in [0, 1e6] (e.g. 13.7,3.8; 0: charge nothing)", v);
        return TSR_EINVAL;
    }
    tsr_ctx.sim_task_us = task;
    tsr_ctx.sim_skip_us = skip;
    return TSR_SUCCESS;
}

/* TSR_CPU_WORKER_GROUPS=0|1: 1 makes each CPU worker a worker group of its
 * own (tsr_worker_groups), so that tests without a GPU pin sub-batches. */
static int read_cpu_worker_groups(void)
{
    const char *v = getenv("TSR_CPU_WORKER_GROUPS");
    tsr_ctx.cpu_worker_groups = v && strcmp(v, "1") == 0;
    if (v && strcmp(v, "0") != 0 && strcmp(v, "1") != 0) {
        tsr_log(TSR_LOG_ERROR, "tsr_init: TSR_CPU_WORKER_GROUPS=%s: expected 0 or 1 (1: a worker group a CPU "
                "worker, for tests)", v);
        return TSR_EINVAL;
    }
    return TSR_SUCCESS;
}

/* TSR_SUBMIT_THREADS=N (1-64, default 2): at most N threads submit the
 * independent streams of a step (tsr_submit_streams: the sub-batches of a
 * layer); 1 submits everything from the calling thread. 2 is the fastest
 * measured on the simulated GPU clusters (docs/simulation.md). */
static int read_submit_threads(void)
{
    const char *v = getenv("TSR_SUBMIT_THREADS");
    long n = 2;
    if (v && (!is_count(v, &n) || n < 1 || n > TSR_MAX_SUBMIT_THREADS)) {
        tsr_log(TSR_LOG_ERROR, "tsr_init: TSR_SUBMIT_THREADS=%s: expected a whole number of threads from 1 to %d", v,
                TSR_MAX_SUBMIT_THREADS);
        return TSR_EINVAL;
    }
    tsr_ctx.submit_threads = (int)n;
    return TSR_SUCCESS;
}

int tsr_check_environment(void)
{
    if (read_submit_threads())
        return TSR_EINVAL;
    if (tsr_simulated() && read_sim_submit_cost())
        return TSR_EINVAL;
    if (read_cpu_worker_groups())
        return TSR_EINVAL;
    for (size_t i = 0; i < sizeof numeric_vars / sizeof numeric_vars[0]; i++) {
        const char *v = getenv(numeric_vars[i]);
        long n;
        if (v && !is_count(v, &n)) {
            tsr_log(TSR_LOG_ERROR, "tsr_init: %s=%s: StarPU needs a non-negative integer there", numeric_vars[i], v);
            return TSR_EINVAL;
        }
    }
    const char *cpus = getenv("STARPU_WORKERS_CPUID");
    if (cpus && !is_cpu_list(cpus)) {
        tsr_log(TSR_LOG_ERROR, "tsr_init: STARPU_WORKERS_CPUID=%s: expected CPU numbers N, ranges N-M or N- "
                "separated by commas or spaces", cpus);
        return TSR_EINVAL;
    }
    int rc = check_starpu_home();
    if (rc)
        return rc;
    long ncpu, cores = sysconf(_SC_NPROCESSORS_ONLN);
    const char *v = getenv("STARPU_NCPU") ? getenv("STARPU_NCPU") : getenv("STARPU_NCPUS");
    if (v && is_count(v, &ncpu) && cores > 0 && ncpu > cores && !tsr_simulated()) /* simulated cores are not these */
        tsr_log(TSR_LOG_INFO, "warning: STARPU_NCPU=%s asks for more CPU workers than the %ld cores: StarPU "
                "runs up to %ld of them sharing the cores, slower than one a core", v, cores,
                ncpu < STARPU_MAXCPUS ? ncpu : (long)STARPU_MAXCPUS);
    return TSR_SUCCESS;
}
