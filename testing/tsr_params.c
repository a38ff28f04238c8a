#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tsr_params.h"
#include "tsr_schedule_report.h"

enum { TSR_SWEEP_MAX_PARAMS = 64, TSR_SWEEP_MAX_FLAGS = 16 };

/* The one number parser of the drivers: the whole text must be the number
 * (no blanks, signs other than a leading '-', or trailing characters: strtol
 * and strtod would skip or stop at them). Integers must fit an int (the
 * drivers' sizes are ints: a long cast to int wrapped 4294967360 to 64),
 * reals must be finite. Returns NULL, or why the text is refused. */
static const char *parse_int(const char *s, long *out)
{
    if (!isdigit((unsigned char)s[s[0] == '-']))
        return "not an integer";
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end)
        return "not an integer";
    if (errno == ERANGE || v < INT_MIN || v > INT_MAX)
        return "out of range (an int: -2147483648 to 2147483647)";
    *out = v;
    return NULL;
}

static const char *parse_real(const char *s, double *out)
{
    if (!isdigit((unsigned char)s[s[0] == '-']) && s[s[0] == '-'] != '.')
        return "not a decimal number";
    char *end;
    double v = strtod(s, &end);
    if (*end)
        return "not a decimal number";
    if (!isfinite(v))
        return "not a finite number";
    *out = v;
    return NULL;
}

static const char *add_value(tsr_param_t *p, long v)
{
    if (p->count >= TSR_PARAM_MAX_VALUES)
        return "more than 256 values";
    p->values[p->count++] = v;
    return NULL;
}

static const char *add_word(tsr_param_t *p, const char *item)
{
    double unused;
    const char *why = p->is_text == TSR_PARAM_REALS ? parse_real(item, &unused) : NULL;
    if (why)
        return why;
    if (strlen(item) >= sizeof p->words[0])
        return "too long";
    if (p->count >= TSR_PARAM_MAX_VALUES)
        return "more than 256 values";
    strcpy(p->words[p->count++], item);
    return NULL;
}

/* One comma-separated item: a number, a "start:end[:step]" range or a word. */
static const char *add_item(tsr_param_t *p, char *item)
{
    if (!*item)
        return "an empty list item";
    if (p->is_text)
        return add_word(p, item);
    char *colon = strchr(item, ':');
    long v, start, end, step = 1;
    const char *why;
    if (!colon)
        return (why = parse_int(item, &v)) ? why : add_value(p, v);
    *colon = '\0';
    char *step_text = strchr(colon + 1, ':');
    if (step_text)
        *step_text++ = '\0';
    if ((why = parse_int(item, &start)) || (why = parse_int(colon + 1, &end)) ||
        (step_text && (why = parse_int(step_text, &step))))
        return why;
    if (step <= 0 || end < start)
        return "a range needs start <= end and a positive step";
    for (v = start; v <= end; v += step)
        if ((why = add_value(p, v)))
            return why;
    return NULL;
}

/* Items are split at every comma (strtok would skip empty ones: "64,,128"). */
static const char *set_values(tsr_param_t *p, const char *text)
{
    char buf[4096];
    if (strlen(text) >= sizeof buf)
        return "too long";
    if (p->is_text == TSR_PARAM_PATH) {
        p->path = text;
        p->count = 1;
        return *text ? NULL : "an empty file name";
    }
    strcpy(buf, text);
    p->count = 0;
    for (char *item = buf, *comma; item; item = comma ? comma + 1 : NULL) {
        comma = strchr(item, ',');
        if (comma)
            *comma = '\0';
        const char *why = add_item(p, item);
        if (why)
            return why;
    }
    return NULL;
}

int tsr_param_set(tsr_param_t *p, const char *text)
{
    if (!text) {
        fprintf(stderr, "error: --%s needs a value (%s)\n", p->name, p->help);
        return -1;
    }
    const char *why = set_values(p, text);
    if (why)
        fprintf(stderr, "error: bad value '%s' for --%s (%s): %s\n", text, p->name, p->help, why);
    return why ? -1 : 0;
}

double tsr_param_real(const tsr_param_t *p, int i)
{
    double v = 0;
    parse_real(p->words[i], &v); /* checked when set */
    return v;
}

int tsr_params_parse(int argc, char **argv, tsr_param_t *params, int nparams,
                     const char **flag_names, int *flag_values, int nflags)
{
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        if (strncmp(arg, "--", 2) != 0) {
            fprintf(stderr, "error: unexpected argument '%s' (options start with --)\n", arg);
            return -1;
        }
        char name[64];
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
        if (len >= sizeof name) {
            fprintf(stderr, "error: unknown option '%s'\n", arg);
            return -1;
        }
        memcpy(name, arg + 2, len);
        name[len] = '\0';
        int matched = 0;
        for (int f = 0; f < nflags && !matched; f++)
            if (strcmp(name, flag_names[f]) == 0) {
                flag_values[f] = 1;
                matched = 1;
            }
        for (int p = 0; p < nparams && !matched; p++) {
            if (strcmp(name, params[p].name) != 0)
                continue;
            const char *value = eq ? eq + 1 : (a + 1 < argc ? argv[++a] : NULL);
            if (tsr_param_set(&params[p], value))
                return -1;
            matched = 1;
        }
        if (!matched) {
            fprintf(stderr, "error: unknown option '--%s' (see --help)\n", name);
            return -1;
        }
    }
    return 0;
}

void tsr_params_usage(const char *prog, const char *what, const tsr_param_t *params, int nparams,
                      const char **flag_names, const char **flag_help, int nflags)
{
    printf("usage: %s [options]\n%s\n\nLists: 1,2,4  ranges: 128:1024:128 (inclusive); the cartesian product of all lists runs.\n\n", prog, what);
    for (int p = 0; p < nparams; p++) {
        if (params[p].is_text == TSR_PARAM_PATH) {
            printf("  --%-10s %s\n", params[p].name, params[p].help);
            continue;
        }
        printf("  --%-10s %s (default: ", params[p].name, params[p].help);
        for (int v = 0; v < params[p].count; v++) {
            if (params[p].is_text)
                printf("%s%s", v ? "," : "", params[p].words[v]);
            else
                printf("%s%ld", v ? "," : "", params[p].values[v]);
        }
        printf(")\n");
    }
    for (int f = 0; f < nflags; f++)
        printf("  --%-10s %s\n", flag_names[f], flag_help[f]);
}

int tsr_params_next(const tsr_param_t *params, int nparams, int *idx)
{
    for (int p = nparams - 1; p >= 0; p--) {
        if (++idx[p] < params[p].count)
            return 1;
        idx[p] = 0;
    }
    return 0;
}

int tsr_param_check_words(const tsr_param_t *p, const char *a, const char *b)
{
    for (int i = 0; i < p->count; i++)
        if (strcmp(p->words[i], a) && strcmp(p->words[i], b)) {
            fprintf(stderr, "error: bad value '%s' for --%s (%s)\n", p->words[i], p->name, p->help);
            return -1;
        }
    return 0;
}

int tsr_param_check_min(const tsr_param_t *p, long min)
{
    for (int i = 0; i < p->count; i++)
        if (p->values[i] < min) {
            fprintf(stderr, "error: bad value '%ld' for --%s (%s): must be >= %ld\n", p->values[i], p->name, p->help,
                    min);
            return -1;
        }
    return 0;
}

int tsr_param_check_run(const tsr_param_t *threads, const tsr_param_t *niter, const tsr_param_t *warmup)
{
    if (tsr_param_check_min(threads, -1) || tsr_param_check_min(niter, 1) || tsr_param_check_min(warmup, 0))
        return -1;
    for (int i = 0; i < threads->count; i++)
        if (threads->values[i] == 0) {
            fprintf(stderr, "error: --threads 0: need at least one CPU worker (-1: all cores)\n");
            return -1;
        }
    if (niter->count > 1 || warmup->count > 1) {
        fprintf(stderr, "error: --niter and --warmup take a single value\n");
        return -1;
    }
    return 0;
}

int tsr_param_check_trace(const tsr_param_t *trace, const tsr_param_t *threads)
{
    if (trace->path && threads->count != 1) {
        fprintf(stderr, "error: --%s records one StarPU run: give a single --%s value\n", trace->name, threads->name);
        return -1;
    }
    return 0;
}

void tsr_param_apply_trace(const tsr_param_t *trace, tsr_config_t *cfg)
{
    const char *path = trace->path;
    size_t n = path ? strlen(path) : 0;
    if (n > 4 && strcmp(path + n - 4, ".png") == 0) {
        cfg->schedule_png = path;
        cfg->schedule_report = tsr_schedule_report;
    } else
        cfg->trace_dir = path;
}

int tsr_stdout_close(int status)
{
    errno = 0;
    int failed = fflush(stdout) != 0 || ferror(stdout), err = errno;
    /* simulated ranks share one process and its stdout: flush, do not close */
    if (!tsr_simulated() && fclose(stdout) != 0 && !failed) {
        failed = 1;
        err = errno;
    }
    if (!failed)
        return status;
    /* a failed write earlier (rows are flushed one by one) leaves no errno */
    fprintf(stderr, "error: cannot write the output: %s\n", err ? strerror(err) : "a write to stdout failed");
    return status ? status : 1;
}

int tsr_params_cli(int argc, char **argv, const char *about, tsr_param_t *params, int nparams,
                   const char **flag_names, const char **flag_help, int *flags, int nflags)
{
    if (tsr_params_parse(argc, argv, params, nparams, flag_names, flags, nflags))
        return 2;
    for (int f = 0; f < nflags; f++)
        if (flags[f] && strcmp(flag_names[f], "help") == 0) {
            tsr_params_usage(argv[0], about, params, nparams, flag_names, flag_help, nflags);
            return 0;
        }
    return -1;
}

int tsr_driver_init(const char *prog, int ncpus, const tsr_param_t *trace, int *argc, char ***argv)
{
    tsr_config_t cfg;
    tsr_config_default(&cfg);
    cfg.ncpus = ncpus;
    if (trace)
        tsr_param_apply_trace(trace, &cfg);
    int rc = tsr_init(&cfg, argc, argv);
    if (rc) {
        fprintf(stderr, "error: tsr_init (%d CPU workers): %s\n", ncpus, tsr_strerror(rc));
        return 1;
    }
    if (tsr_rank() == 0)
        fprintf(stderr, "%s: %s; %s\n", prog, tsr_runtime_summary(), tsr_blas_description());
    return 0;
}

int tsr_baseline_threads(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return tsr_ncpu_workers() > 0 ? tsr_ncpu_workers() : cores > 0 ? (int)cores : 1;
}

/* Every case of one worker count, between tsr_init and tsr_finalize. */
static int sweep_worker_count(const tsr_sweep_t *s, int ncpus, const int *flags, int *ran, int *argc, char ***argv)
{
    static int header_printed;
    if (tsr_driver_init(s->prog, ncpus, &s->params[TSR_SWEEP_TRACE], argc, argv))
        return 1;
    if (tsr_rank() == 0 && !header_printed++) {
        printf("%s\n", s->csv_header);
        fflush(stdout);
    }
    int status = 0, idx[TSR_SWEEP_MAX_PARAMS] = { 0 };
    do {
        char what[256] = "";
        int rc = s->run_case(idx, flags, what, sizeof what);
        if (rc == TSR_SWEEP_SKIP)
            continue;
        ++*ran;
        if (rc < 0) {
            fprintf(stderr, "error: %s: %s\n", what, tsr_strerror(rc));
            rc = 1;
        }
        status = rc;
    } while (!status && tsr_params_next(s->params + TSR_SWEEP_FIRST_CASE, s->nparams - TSR_SWEEP_FIRST_CASE,
                                              idx + TSR_SWEEP_FIRST_CASE));
    if (tsr_finalize() && !status)
        status = 1; /* e.g. the trace could not be converted */
    return status;
}

static int sweep_run(const tsr_sweep_t *s, int argc, char **argv)
{
    int flags[TSR_SWEEP_MAX_FLAGS] = { 0 };
    int cli = tsr_params_cli(argc, argv, s->about, s->params, s->nparams, s->flag_names, s->flag_help, flags,
                             s->nflags);
    if (cli >= 0)
        return cli;
    const tsr_param_t *threads = &s->params[TSR_SWEEP_THREADS];
    if (s->validate() ||
        tsr_param_check_run(threads, &s->params[TSR_SWEEP_NITER], &s->params[TSR_SWEEP_WARMUP]) ||
        tsr_param_check_trace(&s->params[TSR_SWEEP_TRACE], threads))
        return 2;
    int status = s->start ? s->start(&argc, &argv) : 0, ran = 0;
    if (status)
        return status;
    for (int t = 0; !status && t < threads->count; t++)
        status = sweep_worker_count(s, (int)threads->values[t], flags, &ran, &argc, &argv);
    if (!status && !ran) {
        fprintf(stderr, "error: no case ran: the options skip every combination (see the messages above)\n");
        status = 2;
    }
    if (s->stop)
        s->stop();
    return status;
}

int tsr_sweep_main(const tsr_sweep_t *s, int argc, char **argv)
{
    if (s->nparams > TSR_SWEEP_MAX_PARAMS || s->nflags > TSR_SWEEP_MAX_FLAGS) {
        fprintf(stderr, "error: %s: more options than tsr_sweep_main holds\n", s->prog);
        return 1;
    }
    return tsr_stdout_close(sweep_run(s, argc, argv));
}
