#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include "tsr_params.h"

static int parse_long(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

static int add_value(tsr_param_t *p, long v)
{
    if (p->count >= TSR_PARAM_MAX_VALUES)
        return -1;
    p->values[p->count++] = v;
    return 0;
}

/* One comma-separated item: a number, a "start:end[:step]" range or a word. */
static int add_item(tsr_param_t *p, char *item)
{
    if (p->is_text) {
        if (!*item || strlen(item) >= sizeof p->words[0] || p->count >= TSR_PARAM_MAX_VALUES)
            return -1;
        strcpy(p->words[p->count++], item);
        return 0;
    }
    char *colon = strchr(item, ':');
    if (!colon) {
        long v;
        return parse_long(item, &v) || add_value(p, v);
    }
    *colon = '\0';
    char *step_text = strchr(colon + 1, ':');
    if (step_text)
        *step_text++ = '\0';
    long start, end, step = 1;
    if (parse_long(item, &start) || parse_long(colon + 1, &end) || (step_text && parse_long(step_text, &step)) ||
        step <= 0 || end < start)
        return -1;
    for (long v = start; v <= end; v += step)
        if (add_value(p, v))
            return -1;
    return 0;
}

int tsr_param_set(tsr_param_t *p, const char *text)
{
    char buf[4096];
    if (!text || strlen(text) >= sizeof buf)
        return -1;
    if (p->is_text == TSR_PARAM_PATH) {
        p->path = text;
        p->count = 1;
        return *text ? 0 : -1;
    }
    strcpy(buf, text);
    p->count = 0;
    for (char *save = NULL, *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save))
        if (add_item(p, item))
            return -1;
    return p->count > 0 ? 0 : -1;
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
            if (!value || tsr_param_set(&params[p], value)) {
                fprintf(stderr, "error: bad value '%s' for --%s (%s)\n", value ? value : "(missing)", name,
                        params[p].help);
                return -1;
            }
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
            fprintf(stderr, "error: --%s %ld: must be >= %ld\n", p->name, p->values[i], min);
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
    if (n > 4 && strcmp(path + n - 4, ".png") == 0)
        cfg->schedule_png = path;
    else
        cfg->trace_dir = path;
}
