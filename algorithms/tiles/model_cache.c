/* The on-disk cache of the calibrated tile models (see
 * internal/tsr_tile_model.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tsr_algorithms.h"
#include "tsr_files.h"
#include "internal/tsr_tile_model.h"

static unsigned long long fnv1a(const char *s)
{
    unsigned long long h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The cache's root: $TSR_CACHE_DIR, else $XDG_CACHE_HOME/tessera, else
 * ~/.cache/tessera with ~ from $HOME or the password database when that
 * directory exists; "" (no cache) otherwise. Never a shared directory such
 * as /tmp. */
static void cache_base(char *base, size_t n)
{
    const char *dir = getenv("TSR_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (!home || !*home) {
        const struct passwd *pw = getpwuid(getuid());
        home = pw && pw->pw_dir && *pw->pw_dir == '/' ? pw->pw_dir : NULL;
    }
    struct stat st;
    if (home && (stat(home, &st) != 0 || !S_ISDIR(st.st_mode)))
        home = NULL; /* a home that does not exist is not made */
    if (dir && *dir)
        snprintf(base, n, "%s", dir);
    else if (xdg && *xdg)
        snprintf(base, n, "%s/tessera", xdg);
    else if (home)
        snprintf(base, n, "%s/.cache/tessera", home);
    else
        base[0] = '\0';
}

void tsr_tile_cache_init(tsr_tile_cache_t *c, const char *name)
{
    char base[3000];
    cache_base(base, sizeof base);
    snprintf(c->key, sizeof c->key, "%s, %d CPU workers, %d CUDA workers, %s", name, tsr_ncpu_workers(),
             tsr_ncuda_workers(), tsr_blas_description());
    char file[64]; /* the name up to its first comma, e.g. "gemm float32" -> gemm_float32 */
    snprintf(file, sizeof file, "%.*s", (int)strcspn(name, ","), name);
    for (char *p = file; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
            *p = '_';
    if (base[0])
        snprintf(c->path, sizeof c->path, "%s/tile_models/%s_%016llx.txt", base, file, fnv1a(c->key));
    else
        c->path[0] = '\0';
}

/* mkdir -p dir, the directories it makes with mode 0700: 0, or -1 with
 * errno (the first real failure). */
static int make_dirs(char *dir)
{
    for (char *p = dir + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char keep = *p;
        *p = '\0';
        int rc = mkdir(dir, 0700);
        *p = keep;
        if (rc != 0 && errno != EEXIST)
            return -1;
        if (!keep)
            return 0;
    }
}

/* The directory holding path, made where missing, and usable: owned by
 * this user and writable by nobody else, so that no other user can plant
 * or swap its files. 0, or -1 (said once a process). */
static int private_dir(const char *path)
{
    static int told;
    char dir[sizeof ((tsr_tile_cache_t *)0)->path];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return -1;
    *slash = '\0';
    if (make_dirs(dir) != 0) {
        if (!told++)
            tsr_log(TSR_LOG_INFO, "tile models: cannot create %s: %s (calibrations are not cached)", dir,
                    strerror(errno));
        return -1;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 022)) {
        if (!told++)
            tsr_log(TSR_LOG_INFO,
                    "tile models: %s is not a directory of yours that only you can write: calibrations are not "
                    "cached (set TSR_CACHE_DIR)", dir);
        return -1;
    }
    return 0;
}

FILE *tsr_tile_cache_read(const tsr_tile_cache_t *c)
{
    if (!c->path[0] || private_dir(c->path) != 0)
        return NULL;
    FILE *f = tsr_open_regular(c->path); /* a FIFO or device planted there is never opened */
    if (!f) {
        if (errno == EINVAL)
            tsr_log(TSR_LOG_INFO, "tile models: %s is not a regular file: ignored", c->path);
        return NULL;
    }
    char line[1024];
    size_t n = strlen(c->key);
    if (fgets(line, sizeof line, f) && strncmp(line, "# ", 2) == 0 && strncmp(line + 2, c->key, n) == 0 &&
        (line[2 + n] == '\n' || line[2 + n] == '\0'))
        return f;
    fclose(f);
    return NULL;
}

static int lock_fd = -1;

void tsr_tile_cache_unlock(void)
{
    if (lock_fd >= 0)
        close(lock_fd); /* releases the flock */
    lock_fd = -1;
}

/* This process holds the lock of the directory holding path, taken now
 * if need be without waiting: 0, or -1 (said once a process). */
static int hold_lock(const char *path)
{
    static int told;
    if (lock_fd >= 0)
        return 0;
    char lock[sizeof ((tsr_tile_cache_t *)0)->path + 8];
    snprintf(lock, sizeof lock, "%.*s/.lock", (int)(strrchr(path, '/') - path), path);
    int fd = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        fd = -1;
        errno = EINVAL;
    }
    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (!told++)
            tsr_log(TSR_LOG_INFO, "warning: tile models: another process is measuring (%s is locked): this run "
                    "measures beside it and caches nothing", lock);
        close(fd);
        return -1;
    }
    if (fd < 0) {
        if (!told++)
            tsr_log(TSR_LOG_INFO, "warning: tile models: cannot lock %s: %s (calibrations are not cached)", lock,
                    errno == EINVAL ? "not a regular file" : strerror(errno));
        return -1;
    }
    lock_fd = fd;
    return 0;
}

int tsr_tile_cache_writable(const tsr_tile_cache_t *c)
{
    static int told;
    if (tsr_rank() != 0 || !c->path[0] || private_dir(c->path) != 0)
        return 0;
    char dir[sizeof c->path];
    snprintf(dir, sizeof dir, "%.*s", (int)(strrchr(c->path, '/') - c->path), c->path);
    if (access(dir, W_OK | X_OK) != 0) { /* read-only: still read, never written */
        if (!told++)
            tsr_log(TSR_LOG_INFO, "warning: tile models: cannot write in %s: %s (calibrations are read but not cached)",
                    dir, strerror(errno));
        return 0;
    }
    return hold_lock(c->path) == 0;
}

const char *tsr_tile_cache_note(const tsr_tile_cache_t *c, char *buf, size_t n)
{
    if (tsr_tile_cache_writable(c))
        snprintf(buf, n, "once; cached in %s", c->path);
    else
        snprintf(buf, n, "not cached");
    return buf;
}

FILE *tsr_tile_cache_write(const tsr_tile_cache_t *c, tsr_atomic_file_t *af)
{
    if (!tsr_tile_cache_writable(c) || tsr_atomic_begin(af, c->path) != 0)
        return NULL;
    fprintf(af->f, "# %s\n", c->key);
    return af->f;
}

void tsr_tile_cache_commit(tsr_atomic_file_t *af)
{
    if (tsr_atomic_commit(af) != 0)
        tsr_log(TSR_LOG_INFO, "tile models: the calibration is not cached");
}

int tsr_tile_time_ok(double seconds)
{
    return seconds >= TSR_TILE_TIME_MIN && seconds <= TSR_TILE_TIME_MAX; /* false for NaN */
}

/* One integer of a cache line, within int's range. */
static int read_int(FILE *f, int *v)
{
    long long x;
    if (fscanf(f, "%lld", &x) != 1 || x < INT_MIN || x > INT_MAX)
        return 0;
    *v = (int)x;
    return 1;
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
            ok = read_int(f, &tr->key[tr->n][i]);
        if (!ok || fscanf(f, "%lf", &tr->seconds[tr->n]) != 1)
            break;
        tr->n += tsr_tile_time_ok(tr->seconds[tr->n]); /* a damaged time is dropped */
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
    tsr_atomic_file_t af;
    FILE *f = tr->added && tsr_rank() == 0 ? tsr_tile_cache_write(&tr->cache, &af) : NULL;
    for (int j = 0; f && j < tr->n; j++) {
        for (int i = 0; i < tr->nkeys; i++)
            fprintf(f, "%d ", tr->key[j][i]);
        fprintf(f, "%.17g\n", tr->seconds[j]);
    }
    if (f)
        tsr_tile_cache_commit(&af);
    tr->added = 0;
}

int tsr_trials_measure(tsr_trials_t *tr, const int *key, int (*run)(void *ctx, double *seconds), void *ctx,
                       double *seconds, int *ran)
{
    if ((*seconds = tsr_trials_find(tr, key)) > 0)
        return TSR_SUCCESS;
    int rc = run(ctx, seconds);
    if (!rc) {
        tsr_trials_add(tr, key, *seconds);
        if (ran)
            *ran = 1;
    }
    return rc;
}
