/* Tessera core: context (StarPU, StarPU-MPI, hwloc), configuration, errors,
 * logging. Every function returns 0 or a negative TSR_E* code. */
#ifndef TSR_CORE_H
#define TSR_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    TSR_SUCCESS = 0,
    TSR_EINVAL = -1,    /* invalid argument (NULL, negative size, bad enum) */
    TSR_ESHAPE = -2,    /* tensor shapes do not match */
    TSR_ETILE = -3,     /* tile sizes do not match */
    TSR_EDTYPE = -4,    /* element types do not match */
    TSR_EDIST = -5,     /* distributions / process grids do not match */
    TSR_ENOMEM = -6,    /* out of memory */
    TSR_ERUNTIME = -7,  /* StarPU or MPI reported an error */
    TSR_ENOTINIT = -8,  /* tsr_init has not been called */
    TSR_EIO = -9,       /* file could not be read or written */
    TSR_EFORMAT = -10,  /* bad file contents (magic, version, truncated) */
    TSR_ENOTSUP = -11,  /* not supported by this build */
    TSR_ENAN = -12,     /* a NaN or Inf appeared */
    TSR_EALREADY = -13  /* tsr_init called twice */
};

/* Element types, transposition and write mode, shared by every layer. */
/* TSR_BFLOAT16: bfloat16 storage (tsr_bf16.h); its ops compute in float32:
 * on a CPU worker the op kit runs the float32 kernel on converted tiles. */
typedef enum { TSR_FLOAT32 = 0, TSR_FLOAT64 = 1, TSR_BFLOAT16 = 2 } tsr_dtype_t;
#define TSR_NDTYPES 3
/* Bytes an element of type t takes (bf16: 2). */
static inline size_t tsr_dtype_size(tsr_dtype_t t)
{
    return t == TSR_FLOAT64 ? 8 : t == TSR_BFLOAT16 ? 2 : 4;
}
typedef enum { TSR_NOTRANS = 0, TSR_TRANS = 1 } tsr_trans_t;
/* Whether a result overwrites its destination or is added to it (llm.c's
 * "+=" for gradients: accumulating lets a training step skip the zero-grad
 * pass), from the public calls down to the tile kernels. */
typedef enum { TSR_OVERWRITE = 0, TSR_ACCUMULATE = 1 } tsr_write_t;

/* Text for a TSR_E* code (never NULL). */
const char *tsr_strerror(int code);

typedef enum { TSR_MPI_AUTO = 0, TSR_MPI_OFF, TSR_MPI_ON } tsr_mpi_mode_t;

/* An analysis of the recorded schedule (tsr_config_t.schedule_report). */
struct tsr_recording;
typedef int (*tsr_schedule_report_t)(const struct tsr_recording *rec);

typedef struct {
    int ncpus;          /* CPU workers; -1 = all cores (less one for StarPU-MPI under mpirun),
                         * or none when CUDA workers will run (the GPUs alone) */
    int ncuda;          /* CUDA workers; -1 = all GPUs StarPU sees, 0 = none */
    const char *sched;  /* StarPU scheduler; NULL = "lws" on CPU only, "dmdas" with GPUs
                         * (STARPU_SCHED, when set, wins: StarPU reads it first) */
    int parallel_worker_size; /* >1: tasks may run on combined workers of that many cores */
    tsr_mpi_mode_t mpi; /* AUTO: StarPU-MPI only when launched by mpirun with >1 process
                         * or when MPI is already initialised by the caller */
    int verbose;        /* 0 quiet (errors only), 1 normal, 2 verbose */
    const char *trace_dir; /* non-NULL: record StarPU's FxT execution trace; tsr_finalize
                            * converts it with starpu_fxt_tool into this directory
                            * (paje.trace for ViTE, tasks.rec: the task list). Needs a
                            * StarPU built with FxT (deps/starpu/build.sh builds one) */
    const char *schedule_png; /* non-NULL (a name ending in .png): record every task from
                               * StarPU's profiling data (no FxT needed); tsr_finalize prints
                               * the schedule summary (stderr), draws the Gantt chart into this file
                               * (gnuplot) and writes the task list beside it (.csv); under
                               * MPI each rank writes NAME.rankR.png / .csv */
    int schedule_summary;     /* 1: record tasks as above and print only the summary */
    tsr_schedule_report_t schedule_report; /* what tsr_finalize runs on the recorded tasks;
                               * needed with schedule_png or schedule_summary:
                               * tsr_schedule_report (tsr_schedule_report.h, library
                               * tessera_schedule) prints and draws as above */
    int gpu_tf32;       /* 1: float32 GEMMs on CUDA workers may use TF32 tensor cores
                         * (10-bit mantissa inputs, float32 sums; as llm.c and PyTorch's
                         * default for convolutions); 0: strict float32. Default from
                         * $TSR_GPU_TF32 (default 1); no effect without CUDA workers */
} tsr_config_t;

/* A time mark in the recorded schedule (e.g. "step 3"; drawn on the Gantt
 * chart); does nothing unless cfg.schedule_png or schedule_summary is set. */
void tsr_schedule_mark(const char *label);

/* Defaults: all GPUs alone where there are some, else all cores; default scheduler, no parallel workers,
 * MPI auto, verbose from $TSR_VERBOSE (default 1), TF32 from $TSR_GPU_TF32
 * (default 1). */
void tsr_config_default(tsr_config_t *cfg);

/* Start StarPU (and StarPU-MPI, hwloc). cfg may be NULL for the defaults.
 * argc/argv may be NULL. */
int tsr_init(const tsr_config_t *cfg, int *argc, char ***argv);
/* Wait for every task, release descriptors' runtime state, stop StarPU. */
int tsr_finalize(void);
int tsr_initialized(void);

/* 1 when this process was started by mpirun (Open MPI, MPICH/PMI, PMIx) with
 * more than one rank. A program that calls tsr_init/tsr_finalize several
 * times under MPI initialises MPI itself first (tsr_finalize only finalises
 * MPI when tsr_init started it). */
int tsr_mpi_launched(void);
/* 1 in a build against StarPU-SimGrid (docs/simulation.md): kernels do not
 * run, tsr_wtime is the simulated clock, every rank shares one process. */
int tsr_simulated(void);
int tsr_rank(void);          /* MPI rank, 0 without MPI */
int tsr_size(void);          /* number of MPI ranks, 1 without MPI */
int tsr_mpi_active(void);    /* 1 when StarPU-MPI is in use */
int tsr_ncpu_workers(void);
int tsr_ncuda_workers(void);
const char *tsr_sched_name(void);
int tsr_parallel_worker_size(void);
/* Worker groups, for data parallelism inside each process (a rank): with
 * CUDA workers alone on 2 or more GPUs, a group a GPU (its CUDA workers);
 * with TSR_CPU_WORKER_GROUPS=1 and CPU workers alone (tests), a group a CPU
 * worker; else none (0). Under MPI every rank has as many, else none has.
 * Every task touching a descriptor placed on a group (tsr_desc_run_on) runs
 * on that group's workers. */
int tsr_worker_groups(void);
/* The group of part `part` of a split (part mod the groups; -1 with none). */
int tsr_worker_group_of(int part);
/* "GPU 1", "CPU worker 0" ("any worker" for -1). */
void tsr_worker_group_name(int group, char *buf, size_t size);
/* One line for program headers: StarPU version and features, workers per
 * kind, scheduler, ranks. Empty before tsr_init. */
const char *tsr_runtime_summary(void);

/* Several submitting threads: submit(s, arg) for each stream s in [0, n),
 * the streams dealt in turn to at most TSR_SUBMIT_THREADS threads (default
 * 2; the calling thread is one of them), each submitting its streams in
 * increasing order; returns once all are submitted. The streams must write
 * disjoint data and, under several MPI ranks, neither make descriptors (a
 * descriptor's MPI tags are taken in the order of creation) nor read a tile
 * of another rank not received yet (tsr_desc_receive_read): then the tasks
 * and their dependencies are those of the streams submitted one after
 * another. Returns the lowest failing stream's error (a thread stops at its
 * first failure). */
int tsr_submit_streams(int n, int (*submit)(int stream, void *arg), void *arg);
/* TSR_SUBMIT_THREADS: at most this many threads submit streams. */
int tsr_submit_threads(void);

/* Wait for every submitted task (of this rank). */
int tsr_wait(void);
/* Stop / restart the workers: idle StarPU workers poll for work and take
 * CPU time from code running outside tasks (e.g. a BLAS baseline). */
int tsr_pause(void);
int tsr_resume(void);
/* Barrier over all ranks (no-op without MPI). */
int tsr_barrier(void);
/* Copy `bytes` bytes from root's buf to every rank's buf (collective). */
int tsr_broadcast(void *buf, size_t bytes, int root);
/* 1 when flag is non-zero on any rank (collective; the flag itself without MPI). */
int tsr_any(int flag);
/* Ends every rank with exit status `status` (MPI_Abort), for a failure on
 * one rank in the middle of a step: the others would wait forever on the
 * messages it no longer sends. Returns (doing nothing) on a single rank,
 * without MPI and under simulation. */
void tsr_abort_ranks(int status);
/* Every rank's `bytes` bytes at mine, in rank order, into all (collective;
 * without MPI a copy). */
int tsr_allgather(const void *mine, void *all, size_t bytes);
/* Bytes this rank's StarPU-MPI has sent to each rank since tsr_init, into
 * sent[0 .. tsr_size() - 1]; counted only when the run records its schedule
 * (tsr_config_t.schedule_summary or schedule_png; all 0 otherwise and
 * without MPI). */
void tsr_comm_bytes_sent(double *sent);
/* Number of tasks this rank has submitted since tsr_init (for tests/timing). */
uint64_t tsr_tasks_submitted(void);

/* Wall clock in seconds (the simulated clock when tsr_simulated()). */
double tsr_wtime(void);

/* Logging, on stderr (stdout is the program's: CSV, step lines): messages are
 * prefixed with "[tessera]", "[tessera rank R]" under MPI. */
typedef enum { TSR_LOG_ERROR = 0, TSR_LOG_INFO = 1, TSR_LOG_DEBUG = 2 } tsr_log_level_t;
void tsr_set_verbose(int level);
int tsr_get_verbose(void);
void tsr_log(tsr_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif
#endif
