/* The on-disk cache of the calibrated tile models (see
 * internal/tsr_tile_model.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tsr_algorithms.h"
#include "tsr_compute.h"
#include "internal/tsr_tile_model.h"

static unsigned long long fnv1a(const char *s)
{
    unsigned long long h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

void tsr_tile_cache_init(tsr_tile_cache_t *c, const char *name)
{
    const char *dir = getenv("TSR_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char base[3000];
    if (dir && *dir)
        snprintf(base, sizeof base, "%s", dir);
    else if (xdg && *xdg)
        snprintf(base, sizeof base, "%s/tessera", xdg);
    else
        snprintf(base, sizeof base, "%s/.cache/tessera", home && *home ? home : "/tmp");
    snprintf(c->key, sizeof c->key, "%s, %d CPU workers, %d CUDA workers, %s", name, tsr_ncpu_workers(),
             tsr_ncuda_workers(), tsr_blas_description());
    char file[64]; /* the name up to its first comma, e.g. "gemm float32" -> gemm_float32 */
    snprintf(file, sizeof file, "%.*s", (int)strcspn(name, ","), name);
    for (char *p = file; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
            *p = '_';
    snprintf(c->path, sizeof c->path, "%s/tile_models/%s_%016llx.txt", base, file, fnv1a(c->key));
}

FILE *tsr_tile_cache_read(const tsr_tile_cache_t *c)
{
    FILE *f = fopen(c->path, "r");
    if (!f)
        return NULL;
    char line[1024];
    size_t n = strlen(c->key);
    if (fgets(line, sizeof line, f) && strncmp(line, "# ", 2) == 0 && strncmp(line + 2, c->key, n) == 0 &&
        (line[2 + n] == '\n' || line[2 + n] == '\0'))
        return f;
    fclose(f);
    return NULL;
}

FILE *tsr_tile_cache_write(const tsr_tile_cache_t *c)
{
    char dir[sizeof c->path];
    snprintf(dir, sizeof dir, "%s", c->path);
    for (char *p = dir + 1; *p; p++) /* mkdir -p of the directory */
        if (*p == '/') {
            *p = '\0';
            mkdir(dir, 0777);
            *p = '/';
        }
    char tmp[sizeof c->path + 32];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", c->path, (long)getpid()); /* processes may calibrate at once */
    FILE *f = fopen(tmp, "w");
    if (!f) {
        tsr_log(TSR_LOG_INFO, "tile models: cannot cache a calibration in %s: %s", c->path, strerror(errno));
        return NULL;
    }
    fprintf(f, "# %s\n", c->key);
    return f;
}

void tsr_tile_cache_commit(const tsr_tile_cache_t *c, FILE *f)
{
    char tmp[sizeof c->path + 32];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", c->path, (long)getpid());
    if (fclose(f) != 0 || rename(tmp, c->path) != 0) {
        tsr_log(TSR_LOG_INFO, "tile models: cannot cache a calibration in %s: %s", c->path, strerror(errno));
        remove(tmp);
    }
}

int tsr_trials_load(tsr_trials_t *tr, const char *name, int nkeys)
{
    tsr_tile_cache_t now = { "", "" };
    tsr_tile_cache_init(&now, name);
    nkeys = nkeys < TSR_TRIAL_KEYS ? nkeys : TSR_TRIAL_KEYS;
    if (strcmp(now.key, tr->cache.key) == 0 && nkeys == tr->nkeys)
        return TSR_SUCCESS; /* the same workers: tr holds the file and what was added since */
    tr->cache = now;
    tr->nkeys = nkeys;
    tr->n = tr->added = 0;
    FILE *f = tsr_rank() == 0 ? tsr_tile_cache_read(&tr->cache) : NULL;
    while (f && tr->n < TSR_MAX_TRIALS) {
        int ok = 1;
        for (int i = 0; ok && i < tr->nkeys; i++)
            ok = fscanf(f, "%d", &tr->key[tr->n][i]) == 1;
        if (!ok || fscanf(f, "%lf", &tr->seconds[tr->n]) != 1)
            break;
        tr->n += tr->seconds[tr->n] > 0 && tr->seconds[tr->n] < 1e30; /* a damaged time is dropped */
    }
    if (f)
        fclose(f);
    int rc = tsr_broadcast(&tr->n, sizeof tr->n, 0);
    if (!rc)
        rc = tsr_broadcast(tr->key, sizeof tr->key[0] * tr->n, 0);
    if (!rc)
        rc = tsr_broadcast(tr->seconds, sizeof tr->seconds[0] * tr->n, 0);
    if (rc)
        tr->cache.key[0] = '\0'; /* load again next time */
    return rc;
}

double tsr_trials_find(const tsr_trials_t *tr, const int *key)
{
    for (int j = 0; j < tr->n; j++)
        if (memcmp(tr->key[j], key, tr->nkeys * sizeof(int)) == 0)
            return tr->seconds[j];
    return -1;
}

void tsr_trials_add(tsr_trials_t *tr, const int *key, double seconds)
{
    if (tr->n == TSR_MAX_TRIALS)
        return;
    memcpy(tr->key[tr->n], key, tr->nkeys * sizeof(int));
    tr->seconds[tr->n++] = seconds;
    tr->added = 1;
}

void tsr_trials_save(tsr_trials_t *tr)
{
    FILE *f = tr->added && tsr_rank() == 0 ? tsr_tile_cache_write(&tr->cache) : NULL;
    for (int j = 0; f && j < tr->n; j++) {
        for (int i = 0; i < tr->nkeys; i++)
            fprintf(f, "%d ", tr->key[j][i]);
        fprintf(f, "%.17g\n", tr->seconds[j]);
    }
    if (f)
        tsr_tile_cache_commit(&tr->cache, f);
    tr->added = 0;
}

int tsr_trials_granularity(double tasks, int workers)
{
    double rounds = ceil(tasks / (workers > 0 ? workers : 1));
    int g = rounds > 1 ? (int)ceil(log2(rounds)) : 0;
    return g < TSR_TRIAL_GRAINS - 1 ? g : TSR_TRIAL_GRAINS - 1;
}

int tsr_trials_plan(const double *predicted, const double *tasks, int n, double bytes, int *order)
{
    int workers = (tsr_ncpu_workers() + tsr_ncuda_workers()) * tsr_size(), k = 0;
    char seen[TSR_TRIAL_GRAINS] = { 0 }, taken[TSR_TRIAL_PLANNED] = { 0 };
    n = n < TSR_TRIAL_PLANNED ? n : TSR_TRIAL_PLANNED;
    for (int i = 0; i < n; i++) {
        int g = tsr_trials_granularity(tasks[i], workers);
        if (predicted[i] <= TSR_TRIAL_WINDOW * predicted[0] && !seen[g]) {
            seen[g] = taken[i] = 1;
            order[k++] = i;
        }
    }
    for (int i = 0; i < n; i++)
        if (!taken[i])
            order[k++] = i;
    if (tsr_size() != 1 || bytes > TSR_TRIAL_BYTES)
        return 0;
    int afford = 0;
    double cost = 0;
    while (afford < n && afford < TSR_TRIAL_MAX &&
           (TSR_TRIAL_RUNS + 1) * (cost + predicted[order[afford]]) <= TSR_TRIAL_BUDGET)
        cost += predicted[order[afford++]];
    return afford >= 2 ? afford : 0;
}
