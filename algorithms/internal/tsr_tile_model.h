/* What the tile models share (algorithms/tiles/: gemm.c, attention.c,
 * model_cache.c; and algorithms/gpt2/gpt2_tiles_auto.c); not installed: the public headers are the .h files
 * directly in algorithms/. */
#ifndef TSR_TILE_MODEL_H
#define TSR_TILE_MODEL_H

#include <stdio.h>
#include "tsr_files.h"

/* Memory traffic one core sustains streaming tiles: a GEMM task that
 * accumulates into C (every k-tile after the first) reads and writes its C
 * tile; a REDUX addition reads two copies and writes one. */
#define TSR_TILE_BYTES_PER_S 8e9

/* The cache file of a calibrated tile model:
 * $TSR_CACHE_DIR/tile_models/<name up to its first comma>_<hash of the key>.txt (TSR_CACHE_DIR
 * defaults to ${XDG_CACHE_HOME:-~/.cache}/tessera, as for the StarPU
 * prefix; ~ from $HOME or the password database; no cache when neither is
 * known). Its first line is "# <key>"; the key names everything the
 * measured times depend on: the model, the worker set (CPU and CUDA workers
 * apart: a GPU's times are not a CPU core's) and the BLAS kernels. The
 * directory tile_models is made with mode 0700 and used only if it belongs
 * to the user and nobody else can write it; only regular files are read
 * (a FIFO planted there is never opened); files are written through a
 * private temporary renamed over them. */
typedef struct {
    char path[4200], key[512];
} tsr_tile_cache_t;

/* The cache of the model `name` (e.g. "gemm float32") for the running workers. */
void tsr_tile_cache_init(tsr_tile_cache_t *c, const char *name);
/* The cache file opened after its key line, or NULL when there is none or
 * it belongs to another key. */
FILE *tsr_tile_cache_read(const tsr_tile_cache_t *c);
/* A new version of the file (its directory made, the key line written):
 * the FILE * of af, an atomic file (tsr_files.h) put in place by
 * tsr_tile_cache_commit; NULL (logged) when it cannot be created: the
 * model then lives for the process only. */
FILE *tsr_tile_cache_write(const tsr_tile_cache_t *c, tsr_atomic_file_t *af);
void tsr_tile_cache_commit(tsr_atomic_file_t *af);
/* Whether what is measured now will be cached (rank 0 writes): the
 * directory is private and writable (else one warning a process, and the
 * run goes on without caching), and this process holds the cache's lock,
 * tile_models/.lock (flock): a second process measuring at the same time
 * measures beside the first, so it caches nothing, and says so once. The
 * lock is taken here and held until tsr_tile_cache_unlock or the exit. */
int tsr_tile_cache_writable(const tsr_tile_cache_t *c);
void tsr_tile_cache_unlock(void);
/* "once; cached in PATH", or "not cached" when it will not be: the end of
 * the messages that announce a measurement. */
const char *tsr_tile_cache_note(const tsr_tile_cache_t *c, char *buf, size_t n);

/* A measured time read back from a cache file is used only within these
 * bounds (a damaged or planted 1e308, 0, NaN is dropped): no tile task,
 * product, pass or step measured here takes under a nanosecond or over a
 * day. */
#define TSR_TILE_TIME_MIN 1e-9
#define TSR_TILE_TIME_MAX 86400.0
int tsr_tile_time_ok(double seconds);

/* Trials: measured times (of whole runs, a GEMM product, an attention pass,
 * a GPT-2 step, or of calibration tasks), each named by nkeys integers (the
 * problem and the tiles), cached as lines "k1 .. kn seconds" in the file of
 * `name` for the running workers. tsr_trials_load reads the file when the
 * worker set (the key) changed since the last load of tr, else keeps what
 * tr holds; collective under MPI (rank 0 reads, every rank gets its
 * entries). tsr_trials_save writes the file (rank 0) when trials were
 * added. */
#define TSR_TRIAL_KEYS 10
#define TSR_MAX_TRIALS 1024
typedef struct {
    tsr_tile_cache_t cache;
    int nkeys, n, added;
    int key[TSR_MAX_TRIALS][TSR_TRIAL_KEYS];
    double seconds[TSR_MAX_TRIALS];
} tsr_trials_t;

int tsr_trials_load(tsr_trials_t *tr, const char *name, int nkeys);
/* The time of the trial named key, or -1 when it was not run. */
double tsr_trials_find(const tsr_trials_t *tr, const int *key);
void tsr_trials_add(tsr_trials_t *tr, const int *key, double seconds);
void tsr_trials_save(tsr_trials_t *tr);
/* The time of the trial named key: tr's, else measured by run(ctx,
 * seconds) and added to tr (*ran, unless ran is NULL, set to 1). */
int tsr_trials_measure(tsr_trials_t *tr, const int *key, int (*run)(void *ctx, double *seconds), void *ctx,
                       double *seconds, int *ran);

/* ---- the tile search (tiles/search.c) -------------------------------------
 *
 * One driver chooses the tiles of every problem (a GEMM product, an
 * attention pass, a GPT-2 step), in stages:
 *   candidates  every combination of the problem's sizes per dimension;
 *   model       each priced by the problem's model from calibrated tasks;
 *               the best of each group (combinations that share their
 *               first group_dims sizes) competes;
 *   shortlist   the policy's best groups, best first; with budgeted trials
 *               also the best of each other granularity within
 *               TSR_TRIAL_WINDOW of the best;
 *   refine      the shortlist priced again with its tasks' own shapes
 *               measured (once, cached), best first; a tie within
 *               policy.tie goes to the larger tiles;
 *   trial plan  budgeted (tsr_trials_plan: as many as TSR_TRIAL_BUDGET
 *               affords, none for large problems) or with the default
 *               (the tried - 1 best and the problem's default tiles);
 *   trials      each planned candidate run whole (cached per problem and
 *               worker set: run once);
 *   fastest     the fastest trial wins; without trials the model's best.
 *
 * Its numbers, each named once here (docs/tiles-auto.md: how they were
 * found); a problem's own (its candidate sizes, the GPT-2 step's tasks
 * besides the GEMMs, its trial steps) are named in its file. */
#define TSR_CALIBRATION_RUNS 3  /* timed runs of a calibration, the fastest kept, after an untimed one */
#define TSR_TILE_SHORTLIST 6    /* groups refined (GEMM, GPT-2) */
#define TSR_TILE_TIE 1.01       /* GEMM: larger tiles win a tie within 1 % (fewer tasks, less runtime cost) */
#define TSR_TRIAL_RUNS 2        /* timed runs of a budgeted trial, the fastest kept, after an untimed one */
#define TSR_TRIAL_BUDGET 2.0    /* seconds the model puts all budgeted trials at, at most */
#define TSR_TRIAL_BYTES (1024.0 * 1048576) /* larger data: no budgeted trials */
#define TSR_TRIAL_MAX 8         /* budgeted trials at most */
#define TSR_TRIAL_WINDOW 1.5    /* a granularity's best is tried when predicted within 1.5x of the best */
#define TSR_TRIAL_PLANNED 64    /* candidates a trial plan looks at, at most */
#define TSR_TRIAL_GRAINS 64     /* granularities told apart */

#define TSR_TILE_DIMS 5   /* sizes a choice has at most (GPT-2: token, channel, hidden, vocabulary, heads) */
#define TSR_TILE_SIZES 64 /* candidate sizes per dimension at most */

/* A phase of `tasks` tasks on p workers: max(work / p, rounds of tasks,
 * the longest chain), the rounds ceil(tasks / p) of the mean task
 * task_work / tasks (task_work: the tasks' own work, without work the
 * tasks do not count, e.g. attention's REDUX additions). */
double tsr_tile_phase_seconds(double work, double tasks, double task_work, double chain, int p);

/* A candidate's granularity: its tasks' rounds on the workers,
 * ceil(tasks / workers), as a power of 2 (0: one round, 1: two, 2: 3-4 ...,
 * at most TSR_TRIAL_GRAINS - 1). */
int tsr_trials_granularity(double tasks, int workers);

/* Which of n candidates to try (n at most TSR_TRIAL_PLANNED), given best
 * first by the model (predicted seconds, tasks): in order[], first the best
 * of each granularity predicted within TSR_TRIAL_WINDOW of the best (a
 * model misjudges granularity most: the balance and contention of many
 * workers), then the others best first. Returns how many of order[] the
 * trials afford (one process, operands of at most TSR_TRIAL_BYTES; the
 * longest prefix whose TSR_TRIAL_RUNS + 1 runs the model puts within
 * TSR_TRIAL_BUDGET, TSR_TRIAL_MAX at most), or 0 when fewer than 2 are:
 * the model then decides alone. */
int tsr_trials_plan(const double *predicted, const double *tasks, int n, double bytes, int *order);

typedef enum {
    TSR_TRIALS_BUDGETED,     /* tsr_trials_plan over the shortlist */
    TSR_TRIALS_WITH_DEFAULT, /* always the tried - 1 best and the default tiles */
} tsr_trial_policy_t;

typedef struct {
    int shortlist;            /* groups the model keeps (at most TSR_TRIAL_PLANNED) */
    int refine;               /* 1: the shortlist priced again with its tasks measured */
    double tie;               /* larger tiles (the product of the sizes) win within this factor; 0: none */
    tsr_trial_policy_t trials;
    int tried;                /* TSR_TRIALS_WITH_DEFAULT: tile sets tried, the default among them */
} tsr_tile_policy_t;

typedef struct {
    int tile[TSR_TILE_DIMS];
    double predicted; /* the model's seconds */
    double tasks;     /* the task count (its granularity) */
} tsr_tile_choice_t;

/* A problem: its candidates, its model, its trials. */
typedef struct {
    char name[160];                  /* the log lines' */
    const tsr_tile_policy_t *policy;
    int ndims, group_dims;           /* sizes a choice has; those naming its group */
    const char *dim_names[TSR_TILE_DIMS];
    int nsizes[TSR_TILE_DIMS];
    int sizes[TSR_TILE_DIMS][TSR_TILE_SIZES];
    double bytes;                    /* the problem's data: TSR_TRIALS_BUDGETED tries none over TSR_TRIAL_BYTES */
    tsr_trials_t *trials;            /* the trials' cache (one per kind of problem: kept between calls) */
    char trials_name[160];
    int nkeys, key[TSR_TRIAL_KEYS];  /* a trial's key: these, then the tiles */
    void *ctx;                       /* the callbacks' */
    /* The model's seconds for tile (measured 0: its tasks priced from the
     * calibration alone; 1: from their measured shapes too) and its task count. */
    double (*predict)(void *ctx, const int *tile, int measured, double *tasks);
    /* Measures the tasks of the shortlist before it is refined (NULL:
     * predict measures them itself). */
    int (*measure)(void *ctx, const tsr_tile_choice_t *list, int n);
    void (*default_tile)(void *ctx, int *tile); /* TSR_TRIALS_WITH_DEFAULT */
    int (*trial)(void *ctx, const int *tile, double *seconds);
} tsr_tile_problem_t;

/* The search above: *choice, and the fastest trial's time (INFINITY when
 * none ran). */
int tsr_tile_search(const tsr_tile_problem_t *pb, tsr_tile_choice_t *choice, double *trial_seconds);

#endif
