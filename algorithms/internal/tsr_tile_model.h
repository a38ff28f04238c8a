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

/* Whole-run trials of a GEMM product or an attention pass: the fastest of
 * TSR_TRIAL_RUNS timed runs after an untimed one, run only when they are
 * cheap: one process (the caller's grid is not known to the tile chooser),
 * operands of at most TSR_TRIAL_BYTES, and TSR_TRIAL_BUDGET seconds at most
 * for all of them as the model puts them. */
#define TSR_TRIAL_RUNS 2
#define TSR_TRIAL_BUDGET 2.0
#define TSR_TRIAL_BYTES (1024.0 * 1048576)
#define TSR_TRIAL_MAX 8       /* candidates tried at most */
#define TSR_TRIAL_WINDOW 1.5  /* the slowest prediction, against the best, of a candidate tried for its granularity */
#define TSR_TRIAL_PLANNED 64  /* candidates a plan looks at, at most */
#define TSR_TRIAL_GRAINS 64   /* granularities told apart */

/* A candidate's granularity: its tasks' rounds on the workers,
 * ceil(tasks / workers), as a power of 2 (0: one round, 1: two, 2: 3-4 ...,
 * at most TSR_TRIAL_GRAINS - 1). */
int tsr_trials_granularity(double tasks, int workers);

/* Which of n candidates to try (n at most TSR_TRIAL_PLANNED), given best
 * first by the model (predicted seconds, tasks): in order[], first the best
 * of each granularity predicted within TSR_TRIAL_WINDOW of the best (a
 * model misjudges granularity most: the balance and contention of many
 * workers), then the others best first. Returns how many of order[] the
 * trials afford (the longest prefix within the budget, TSR_TRIAL_MAX at
 * most), or 0 when fewer than 2 are: the model then decides alone. */
int tsr_trials_plan(const double *predicted, const double *tasks, int n, double bytes, int *order);

#endif
