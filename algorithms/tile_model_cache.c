/* The on-disk cache of the calibrated tile models (see
 * internal/tsr_tile_model.h). */
#include <errno.h>
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
