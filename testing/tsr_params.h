/* Command-line parameters for the testing and timing drivers: every numeric
 * or named parameter takes a list ("128,256"), a range ("128:1024:128",
 * inclusive) or a mix ("64,128:512:128"); the drivers run the cartesian
 * product of all lists. */
#ifndef TSR_PARAMS_H
#define TSR_PARAMS_H

#include "tessera.h"

#define TSR_PARAM_MAX_VALUES 256

/* Numbers are ints (out of range: refused), reals finite decimals (kept as
 * their text in words; tsr_param_real converts). */
enum { TSR_PARAM_NUMBERS = 0, TSR_PARAM_WORDS = 1, TSR_PARAM_PATH = 2, TSR_PARAM_REALS = 3 };

typedef struct {
    const char *name;   /* option name without "--" */
    const char *help;
    int is_text;        /* TSR_PARAM_NUMBERS, _WORDS (e.g. N,T), _REALS or _PATH (one
                         * file name, taken whole: no lists) */
    int count;
    long values[TSR_PARAM_MAX_VALUES];
    char words[TSR_PARAM_MAX_VALUES][16];
    const char *path;   /* TSR_PARAM_PATH: the value (points into argv), NULL if not given */
} tsr_param_t;

/* Parse "--name value" / "--name=value" pairs into params (which hold the
 * defaults). Flags (options without value) are listed in flags and set to 1.
 * Returns 0, or prints a message naming the bad option and returns -1. */
int tsr_params_parse(int argc, char **argv, tsr_param_t *params, int nparams,
                     const char **flag_names, int *flag_values, int nflags);
/* Set a parameter's values from a text like "1,2:8:2". Returns 0, or prints
 * a message naming the option, the value and what is wrong and returns -1. */
int tsr_param_set(tsr_param_t *p, const char *text);
/* Value i of a TSR_PARAM_REALS parameter. */
double tsr_param_real(const tsr_param_t *p, int i);
void tsr_params_usage(const char *prog, const char *what, const tsr_param_t *params, int nparams,
                      const char **flag_names, const char **flag_help, int nflags);
/* A driver whose only flag is --help: its flag tables for tsr_params_cli. */
#define TSR_ONLY_HELP_FLAG                                                                                  \
    enum { F_HELP, NF };                                                                                    \
    static const char *flag_names[NF] = { "help" };                                                         \
    static const char *flag_help[NF] = { "print this help" }

/* A driver's options: parses them and prints the usage on --help (the
 * flag named "help"). Returns -1 to go on, else the exit status: 0 after --help,
 * 2 on a bad option (named). */
int tsr_params_cli(int argc, char **argv, const char *about, tsr_param_t *params, int nparams,
                   const char **flag_names, const char **flag_help, int *flags, int nflags);
/* tsr_init with ncpus CPU workers and --trace (NULL: none); rank 0 prints
 * "PROG: <runtime>; <BLAS>" on stderr. 0, or 1 after saying what failed. */
int tsr_driver_init(const char *prog, int ncpus, const tsr_param_t *trace, int *argc, char ***argv);
/* Threads for a CPU baseline (BLAS, naive loops) beside Tessera's run: one a
 * CPU worker, or every core when the GPUs run Tessera alone (no CPU worker). */
int tsr_baseline_threads(void);
/* Every value of p is a or b / is >= min; else a message naming the option
 * and -1. */
int tsr_param_check_words(const tsr_param_t *p, const char *a, const char *b);
int tsr_param_check_min(const tsr_param_t *p, long min);
/* The run settings every timing program shares: --threads values are -1
 * (all cores) or >= 1, --niter >= 1 and --warmup >= 0 take one value each. */
int tsr_param_check_run(const tsr_param_t *threads, const tsr_param_t *niter, const tsr_param_t *warmup);
/* --trace DIR (FxT trace of the run) or FILE.png (Gantt chart + task list +
 * schedule summary) needs a single --threads value: the trace of one
 * StarPU start. */
int tsr_param_check_trace(const tsr_param_t *trace, const tsr_param_t *threads);
/* Puts --trace into the config: a name ending in .png is the Gantt chart
 * (cfg->schedule_png), anything else the FxT directory (cfg->trace_dir). */
void tsr_param_apply_trace(const tsr_param_t *trace, tsr_config_t *cfg);
#define TSR_TRACE_HELP "DIR or FILE.png: DIR records the run's FxT trace (paje.trace for ViTE, tasks.rec); " \
                       "FILE.png draws the Gantt chart of the run's tasks, writes their list to FILE.csv and " \
                       "prints the schedule summary"
/* A timing program: its options, then for each --threads value StarPU
 * starts (tsr_driver_init with --trace), rank 0 prints the CSV header (once
 * in all), every combination of params[TSR_SWEEP_FIRST_CASE .. nparams) goes
 * to run_case, and StarPU stops. Its parameter table starts with
 * TSR_SWEEP_RUN_PARAMS: --threads (a list, -1: all cores), --niter and
 * --warmup (one value each) and --trace (checked by tsr_param_check_run and
 * tsr_param_check_trace after validate). */
enum { TSR_SWEEP_THREADS, TSR_SWEEP_NITER, TSR_SWEEP_WARMUP, TSR_SWEEP_TRACE, TSR_SWEEP_FIRST_CASE };
#define TSR_SWEEP_RUN_PARAMS(threads_help, niter_help, warmup_help)                                         \
    [TSR_SWEEP_THREADS] = { "threads", threads_help, 0, 1, { -1 } },                                        \
    [TSR_SWEEP_NITER] = { "niter", niter_help, 0, 1, { 3 } },                                               \
    [TSR_SWEEP_WARMUP] = { "warmup", warmup_help, 0, 1, { 1 } },                                            \
    [TSR_SWEEP_TRACE] = { "trace", TSR_TRACE_HELP, TSR_PARAM_PATH }
enum { TSR_SWEEP_SKIP = 100 };
typedef struct {
    const char *prog, *about, *csv_header; /* csv_header without the newline */
    tsr_param_t *params;
    int nparams;
    const char **flag_names, **flag_help;  /* with "help" */
    int nflags;
    /* The program's own checks before StarPU starts: 0, or -1 after a message. */
    int (*validate)(void);
    /* NULL, or before StarPU's first start: 0, or an exit status after a message. */
    int (*start)(int *argc, char ***argv);
    void (*stop)(void);                    /* NULL, or after StarPU's last stop (when start succeeded) */
    /* One combination (idx[p] indexes params[p].values; flags[f] is 1 where
     * flag f was given): 0 (ran), TSR_SWEEP_SKIP (it repeats another or does
     * not apply), an exit status after saying what failed, or a Tessera error
     * code after writing the case into what ("error: <what>: <error>"). A
     * status or an error ends the sweep. */
    int (*run_case)(const int *idx, const int *flags, char *what, size_t what_size);
} tsr_sweep_t;
/* The program's main: returns its exit status (tsr_stdout_close'd): 0, 2 on
 * a bad option or when every combination was skipped, 1 when tsr_init, a case
 * or tsr_finalize failed, or the status of start or run_case. */
int tsr_sweep_main(const tsr_sweep_t *sweep, int argc, char **argv);
/* Odometer over the cartesian product: idx[] holds one index per parameter.
 * Returns 0 when every combination has been visited. */
int tsr_params_next(const tsr_param_t *params, int nparams, int *idx);
/* The end of a driver's main: flushes and closes stdout. A write error
 * (> /dev/full, a full disk) would otherwise lose the CSV with exit status
 * 0: it prints "cannot write the output" and makes status 0 into 1.
 * Returns the exit status. */
int tsr_stdout_close(int status);
#endif
