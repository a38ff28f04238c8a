/* Sharded training states: see gpt2_state_shards.h. */
#define _GNU_SOURCE
#include "gpt2_state_shards.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tsr_bf16.h"
#include "tsr_files.h"

static const char *const SHARD = "training state shard";

/* The descriptor of slot s of kind k: the float32 parameters (bf16: the
 * master weights), AdamW m, AdamW v. */
static tsr_desc_t *kind_desc(const tsr_gpt2_model_t *m, int k, int s)
{
    if (k == 0)
        return m->master ? m->master[s] : m->params[s];
    return k == 1 ? m->adam_m[s] : m->adam_v[s];
}

/* Tile (i, j) of a slot's grid: its first row and column, its size. */
static void saved_tile(const tsr_gpt2_shard_slot_t *sl, int i, int j, int *r0, int *c0, int *rows, int *cols)
{
    *r0 = i * sl->rtile;
    *c0 = j * sl->ctile;
    *rows = sl->rows - *r0 < sl->rtile ? sl->rows - *r0 : sl->rtile;
    *cols = sl->cols - *c0 < sl->ctile ? sl->cols - *c0 : sl->ctile;
}

/* The manifest path's directory and last name, a symbolic link followed
 * (its target is the manifest: tsr_atomic_begin replaces it, the link
 * stays), in dir and base. 0, or TSR_EIO with a message. */
static int manifest_place(const char *path, char dir[PATH_MAX], char base[NAME_MAX + 1])
{
    struct stat st;
    char *target = lstat(path, &st) == 0 && S_ISLNK(st.st_mode) ? realpath(path, NULL) : strdup(path);
    if (!target) {
        tsr_log(TSR_LOG_ERROR, "%s: %s", path, strerror(errno));
        return TSR_EIO;
    }
    const char *slash = strrchr(target, '/');
    int rc = 0;
    if (!slash)
        snprintf(dir, PATH_MAX, ".");
    else if (slash == target)
        snprintf(dir, PATH_MAX, "/");
    else if (snprintf(dir, PATH_MAX, "%.*s", (int)(slash - target), target) >= PATH_MAX)
        rc = TSR_EIO;
    if (!rc && snprintf(base, NAME_MAX + 1, "%s", slash ? slash + 1 : target) > NAME_MAX)
        rc = TSR_EIO;
    if (rc)
        tsr_log(TSR_LOG_ERROR, "%s: name too long", path);
    free(target);
    return rc;
}

/* dir/name in out (PATH_MAX bytes): 0, or TSR_EIO with a message naming
 * the manifest when too long. */
static int shard_path(const char *dir, const char *name, const char *manifest, char out[PATH_MAX])
{
    int len = snprintf(out, PATH_MAX, "%s/%s", dir, name);
    if (len >= 0 && len < PATH_MAX)
        return 0;
    tsr_log(TSR_LOG_ERROR, "%s: name too long for its shard file %s", manifest, name);
    return TSR_EIO;
}

/* ---- save ------------------------------------------------------------------------ */

/* Who saves: rank 0's host and process and a random generation, in every
 * shard's name (stale files are told by their dead process). */
typedef struct {
    char host[64];
    int64_t pid;
    uint64_t generation;
} save_id_t;

static uint64_t random_generation(void)
{
    uint64_t g = 0;
    FILE *f = fopen("/dev/urandom", "rbe");
    if (!f || fread(&g, sizeof g, 1, f) != 1) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        g = ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 16);
    }
    if (f)
        fclose(f);
    return g;
}

/* "<base>.shard.<host>.<pid>." : the names of a process's shards start so. */
static int shard_prefix(const char *base, const char *host, long pid, char *out, size_t n)
{
    int len = snprintf(out, n, "%s.shard.%s.%ld.", base, host, pid);
    return len < 0 || (size_t)len >= n ? -1 : len;
}

/* Rank r's shard name in l (0, or TSR_EIO when too long). */
static int shard_name(const char *base, const save_id_t *id, int r, tsr_gpt2_shard_layout_t *l)
{
    char *out = l->names[r];
    int len = shard_prefix(base, id->host, (long)id->pid, out, TSR_GPT2_SHARD_NAME);
    if (len < 0 || snprintf(out + len, TSR_GPT2_SHARD_NAME - len, "%016llx.r%d", (unsigned long long)id->generation, r) >=
                       TSR_GPT2_SHARD_NAME - len || len + 24 > NAME_MAX) {
        tsr_log(TSR_LOG_ERROR, "--save %s: the name is too long for its shard files' names", base);
        return TSR_EIO;
    }
    return 0;
}

/* The model's grids and where each tile goes: rank r's file holds the tiles
 * it owns, kind after kind, slot after slot, in tile order, after its
 * header. */
static int plan_layout(const tsr_gpt2_model_t *m, int nfiles, tsr_gpt2_shard_layout_t *l)
{
    tsr_gpt2_shard_slot_t *slots = malloc((size_t)m->ntensors * sizeof *slots);
    if (!slots)
        return TSR_ENOMEM;
    for (int s = 0; s < m->ntensors; s++) {
        const tsr_desc_t *d = kind_desc(m, 0, s);
        slots[s] = (tsr_gpt2_shard_slot_t){ d->m, d->n, d->mb, d->nb };
    }
    int rc = tsr_gpt2_shard_layout_init(l, m->ntensors, slots, nfiles);
    free(slots);
    for (int f = 0; !rc && f < nfiles; f++)
        l->file_bytes[f] = sizeof(tsr_gpt2_shard_header_t);
    for (int k = 0; !rc && k < TSR_GPT2_SHARD_KINDS; k++)
        for (int s = 0; s < m->ntensors; s++) {
            const tsr_desc_t *d = kind_desc(m, k, s);
            for (int i = 0; i < d->mt; i++)
                for (int j = 0; j < d->nt; j++) {
                    tsr_gpt2_shard_record_t *r = &l->records[tsr_gpt2_shard_record(l, k, s, i, j)];
                    r->file = tsr_tile_owner(d, 0, i, j);
                    r->offset = l->file_bytes[r->file];
                    l->file_bytes[r->file] += (uint64_t)tsr_tile_rows(d, i) * tsr_tile_cols(d, j) * sizeof(float);
                }
        }
    return rc;
}

/* A shard file being written: its records' hashes are filled in. */
typedef struct {
    FILE *f;
    const char *path;
    tsr_gpt2_shard_layout_t *l;
    int k, s;
    uint64_t at; /* bytes written */
} shard_writer_t;

static int write_tile(const tsr_desc_t *d, int bi, int i, int j, const void *tile, void *arg)
{
    shard_writer_t *w = arg;
    tsr_gpt2_shard_record_t *r = &w->l->records[tsr_gpt2_shard_record(w->l, w->k, w->s, i, j)];
    size_t bytes = (size_t)tsr_tile_rows(d, i) * tsr_tile_cols(d, j) * sizeof(float);
    if (r->offset != w->at) { /* the plan and the tiles visited disagree: a bug */
        tsr_log(TSR_LOG_ERROR, "%s: tile (%d, %d) of slot %d at byte %llu, planned at %llu", w->path, i, j, w->s,
                (unsigned long long)w->at, (unsigned long long)r->offset);
        return TSR_ERUNTIME;
    }
    r->hash = tsr_gpt2_hash64(tile, bytes);
    w->at += bytes;
    if (fwrite(tile, 1, bytes, w->f) != bytes) {
        tsr_log(TSR_LOG_ERROR, "%s: write failed: %s", w->path, strerror(errno));
        return TSR_EIO;
    }
    return 0;
}

static void fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd); /* best effort: some file systems refuse fsync on directories */
        close(fd);
    }
}

/* This rank's shard file, new (O_EXCL: never a file or link already
 * there), written, fsynced, given the manifest's mode; removed on error. */
static int write_shard(tsr_gpt2_model_t *m, tsr_gpt2_shard_layout_t *l, const char *dir, const char *manifest,
                       int rank)
{
    char path[PATH_MAX];
    if (shard_path(dir, l->names[rank], manifest, path))
        return TSR_EIO;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        tsr_log(TSR_LOG_ERROR, "%s: cannot create %s %s: %s", manifest, SHARD, path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(path);
        }
        return TSR_EIO;
    }
    tsr_gpt2_shard_header_t h = { TSR_GPT2_SHARD_MAGIC, 1, l->generation, rank, l->nfiles };
    shard_writer_t w = { f, path, l, 0, 0, sizeof h };
    int rc = fwrite(&h, sizeof h, 1, f) == 1 ? 0 : TSR_EIO;
    for (w.k = 0; !rc && w.k < TSR_GPT2_SHARD_KINDS; w.k++)
        for (w.s = 0; !rc && w.s < m->ntensors; w.s++)
            rc = tsr_desc_read_local(kind_desc(m, w.k, w.s), write_tile, &w);
    if (!rc && (fflush(f) != 0 || fsync(fileno(f)) != 0 || tsr_temp_publish_mode(fileno(f), manifest) != 0)) {
        tsr_log(TSR_LOG_ERROR, "%s: write failed: %s", path, strerror(errno));
        rc = TSR_EIO;
    }
    if (fclose(f) != 0 && !rc) {
        tsr_log(TSR_LOG_ERROR, "%s: close failed: %s", path, strerror(errno));
        rc = TSR_EIO;
    }
    if (rc)
        unlink(path);
    else
        fsync_dir(dir);
    return rc;
}

static void test_die_in_save(void)
{
    static int saves;
    const char *e = getenv(TSR_GPT2_TEST_DIE_IN_SAVE);
    int rank, nth;
    saves++;
    if (e && sscanf(e, "%d:%d", &rank, &nth) == 2 && rank == tsr_rank() && nth == saves) {
        fprintf(stderr, "%s: rank %d dies in save %d, its shard written, before the commit\n",
                TSR_GPT2_TEST_DIE_IN_SAVE, rank, nth);
        raise(SIGKILL);
    }
}

/* Every rank's hashes of its own tiles into rank 0's records. */
static int collect_hashes(tsr_gpt2_shard_layout_t *l)
{
    int P = tsr_size();
    if (P == 1)
        return 0;
    uint64_t *mine = malloc(l->nrecords * 8), *all = malloc((size_t)P * l->nrecords * 8);
    int rc = mine && all ? 0 : TSR_ENOMEM;
    if (!tsr_any(rc)) {
        for (size_t r = 0; r < l->nrecords; r++)
            mine[r] = l->records[r].hash;
        rc = tsr_allgather(mine, all, l->nrecords * 8);
        for (size_t r = 0; !rc && r < l->nrecords; r++)
            l->records[r].hash = all[(size_t)l->records[r].file * l->nrecords + r];
    } else {
        rc = rc ? rc : TSR_ENOMEM;
    }
    free(mine);
    free(all);
    return rc;
}

/* Rank 0, before the commit: every shard is there, of its size, in rank 0's
 * view of the directory (the ranks must share it). */
static int check_shards_visible(const tsr_gpt2_shard_layout_t *l, const char *dir, const char *manifest)
{
    for (int f = 0; f < l->nfiles; f++) {
        char path[PATH_MAX];
        struct stat st;
        if (shard_path(dir, l->names[f], manifest, path))
            return TSR_EIO;
        errno = 0;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != l->file_bytes[f]) {
            tsr_log(TSR_LOG_ERROR, "%s: rank %d's %s %s is not there for rank 0 (%s): every rank must save into "
                    "the same directory (a file system they share)", manifest, f, SHARD, path,
                    errno ? strerror(errno) : "another size");
            return TSR_EIO;
        }
    }
    return 0;
}

/* Rank 0, after a commit: the shard files of earlier saves to this manifest
 * that it no longer names, left by this process or a dead one of this host
 * (a crash between a shard's write and the commit; a zombie counts as dead,
 * tsr_process_runs). Files of other users, hosts or live processes stay. */
static void remove_old_shards(const tsr_gpt2_shard_layout_t *l, const char *dir, const char *base)
{
    char host[64], prefix[NAME_MAX + 96];
    tsr_host_name(host, sizeof host);
    int plen = snprintf(prefix, sizeof prefix, "%s.shard.%s.", base, host);
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && plen > 0 && (size_t)plen < sizeof prefix && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, (size_t)plen) != 0)
            continue;
        int named = 0;
        for (int f = 0; f < l->nfiles && !named; f++)
            named = strcmp(e->d_name, l->names[f]) == 0;
        char *end;
        errno = 0;
        long pid = strtol(e->d_name + plen, &end, 10);
        if (named || errno || pid <= 0 || *end != '.' ||
            (pid != (long)getpid() && tsr_process_runs(pid)))
            continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
            st.st_uid != getuid())
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0)
            tsr_log(TSR_LOG_DEBUG, "removed %s/%s, a shard file no manifest names", dir, e->d_name);
    }
    if (d)
        closedir(d);
}

/* Rank 0, after a commit: the files of the set it replaced (prev, the
 * previous manifest's layout; any host's) that the new one (l) does not
 * name, regular files of this user only. */
static void remove_replaced(const tsr_gpt2_shard_layout_t *prev, const tsr_gpt2_shard_layout_t *l, const char *dir)
{
    DIR *d = opendir(dir);
    for (int f = 0; d && f < prev->nfiles; f++) {
        int named = 0;
        for (int g = 0; g < l->nfiles && !named; g++)
            named = strcmp(prev->names[f], l->names[g]) == 0;
        struct stat st;
        if (!named && fstatat(dirfd(d), prev->names[f], &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
            st.st_uid == getuid())
            unlinkat(dirfd(d), prev->names[f], 0);
    }
    if (d)
        closedir(d);
}

int tsr_gpt2_state_save(tsr_gpt2_model_t *m, const char *path, const tsr_gpt2_train_state_t *st,
                        const void *loader_state, size_t loader_bytes)
{
    int rank = tsr_rank(), P = tsr_size(), root = rank == 0;
    char dir[PATH_MAX], base[NAME_MAX + 1];
    save_id_t id = { { 0 }, 0, 0 };
    tsr_gpt2_shard_layout_t l;
    memset(&l, 0, sizeof l);
    if (root) {
        tsr_host_name(id.host, sizeof id.host);
        id.pid = getpid();
        id.generation = random_generation();
    }
    int rc = tsr_broadcast(&id, sizeof id, 0);
    if (!rc)
        rc = manifest_place(path, dir, base);
    if (!rc)
        rc = plan_layout(m, P, &l);
    l.generation = id.generation;
    for (int r = 0; !rc && r < P; r++)
        rc = shard_name(base, &id, r, &l);
    int wrote = 0;
    if (!tsr_any(rc)) {
        rc = write_shard(m, &l, dir, path, rank);
        wrote = !rc;
        if (wrote)
            test_die_in_save();
    }
    if (!tsr_any(rc))
        rc = collect_hashes(&l);
    tsr_gpt2_shard_layout_t prev; /* the set the commit replaces (rank 0) */
    tsr_gpt2_train_state_info_t prev_info;
    memset(&prev, 0, sizeof prev);
    if (!tsr_any(rc) && root) {
        if (tsr_gpt2_train_state_is_manifest(path) && tsr_gpt2_train_state_manifest_read(path, &prev_info, &prev, NULL))
            tsr_log(TSR_LOG_INFO, "%s: the state it replaces is damaged: its shard files are left", path);
        rc = check_shards_visible(&l, dir, path);
        if (!rc)
            rc = tsr_gpt2_train_state_manifest_write(path, &m->cfg, m->B, m->T, st, &l, loader_state, loader_bytes);
    }
    int failed = tsr_any(rc);
    if (failed && wrote) { /* path still names the previous set (or nothing) */
        char shard[PATH_MAX];
        if (!shard_path(dir, l.names[rank], path, shard))
            unlink(shard);
    }
    if (!failed && root) {
        remove_replaced(&prev, &l, dir);
        remove_old_shards(&l, dir, base);
    }
    tsr_gpt2_shard_layout_free(&prev);
    tsr_gpt2_shard_layout_free(&l);
    return failed ? (rc ? rc : TSR_EIO) : 0;
}

/* ---- load ------------------------------------------------------------------------ */

/* The shard files of a manifest, opened as a rank first needs them. */
typedef struct {
    const tsr_gpt2_shard_layout_t *l;
    char dir[PATH_MAX];
    const char *manifest;
    FILE **f; /* per file, NULL until opened */
} shard_reader_t;

/* File n, opened and its header and size checked. */
static int open_shard(shard_reader_t *rd, int n, FILE **out)
{
    if (rd->f[n]) {
        *out = rd->f[n];
        return 0;
    }
    char path[PATH_MAX];
    int64_t size = 0;
    tsr_gpt2_shard_header_t h;
    if (shard_path(rd->dir, rd->l->names[n], rd->manifest, path))
        return TSR_EIO;
    int rc = tsr_gpt2_file_open(path, SHARD, &rd->f[n], &size);
    if (!rc)
        rc = tsr_gpt2_file_read(rd->f[n], &h, sizeof h, path, SHARD, "header");
    if (!rc && (h.magic != TSR_GPT2_SHARD_MAGIC || h.version != 1 || h.generation != rd->l->generation ||
                h.rank != n || h.nranks != rd->l->nfiles || (uint64_t)size != rd->l->file_bytes[n])) {
        tsr_log(TSR_LOG_ERROR, "%s %s: not the shard file %d of %d that %s names (another save's, or damaged: "
                "%lld bytes, %llu expected)", SHARD, path, n, rd->l->nfiles, rd->manifest, (long long)size,
                (unsigned long long)rd->l->file_bytes[n]);
        rc = TSR_EFORMAT;
    }
    *out = rd->f[n];
    return rc;
}

/* Whether rows x cols at (r0, c0) overlaps a tile of d this rank owns. */
static int overlaps_local(const tsr_desc_t *d, int r0, int c0, int rows, int cols)
{
    for (int i = r0 / d->mb; i * d->mb < r0 + rows && i < d->mt; i++)
        for (int j = c0 / d->nb; j * d->nb < c0 + cols && j < d->nt; j++)
            if (tsr_tile_is_local(d, 0, i, j))
                return 1;
    return 0;
}

/* Saved tile (i, j) of slot s, kind k into this rank's tiles it overlaps
 * (buf holds a tile; bf16 a bf16 copy of it, for the rounded parameters). */
static int load_tile(tsr_gpt2_model_t *m, shard_reader_t *rd, int k, int s, int i, int j, float *buf,
                     tsr_bf16_t *bf16)
{
    const tsr_gpt2_shard_slot_t *sl = &rd->l->slots[s];
    const tsr_gpt2_shard_record_t *r = &rd->l->records[tsr_gpt2_shard_record(rd->l, k, s, i, j)];
    tsr_desc_t *d = kind_desc(m, k, s);
    int r0, c0, rows, cols;
    saved_tile(sl, i, j, &r0, &c0, &rows, &cols);
    if (!overlaps_local(d, r0, c0, rows, cols))
        return 0;
    FILE *f;
    size_t n = (size_t)rows * cols, bytes = n * sizeof(float);
    int rc = open_shard(rd, r->file, &f);
    if (rc)
        return rc;
    ssize_t got = pread(fileno(f), buf, bytes, (off_t)r->offset);
    if (got != (ssize_t)bytes || tsr_gpt2_hash64(buf, bytes) != r->hash) {
        tsr_log(TSR_LOG_ERROR, "%s %s/%s: %s at byte %llu (slot %d, tile (%d, %d))", SHARD, rd->dir,
                rd->l->names[r->file], got < 0 ? strerror(errno) : got != (ssize_t)bytes ? "truncated"
                : "a tile's checksum does not match", (unsigned long long)r->offset, s, i, j);
        return got < 0 ? TSR_EIO : TSR_EFORMAT;
    }
    rc = tsr_desc_write_local(d, r0, c0, rows, cols, buf, rows);
    if (!rc && k == 0 && m->master) { /* bf16: the rounded copy the forward reads */
        for (size_t e = 0; e < n; e++)
            bf16[e] = tsr_float_to_bf16(buf[e]);
        rc = tsr_desc_write_local(m->params[s], r0, c0, rows, cols, bf16, rows);
    }
    return rc;
}

/* The manifest's grids against the model's parameter shapes. */
static int check_slots(const tsr_gpt2_model_t *m, const tsr_gpt2_shard_layout_t *l, const char *path)
{
    for (int s = 0; s < m->ntensors && l->nslots == m->ntensors; s++) {
        const tsr_desc_t *d = kind_desc(m, 0, s);
        if (l->slots[s].rows != d->m || l->slots[s].cols != d->n) {
            tsr_log(TSR_LOG_ERROR, "%s: slot %d is %d x %d, this model's %d x %d", path, s, l->slots[s].rows,
                    l->slots[s].cols, d->m, d->n);
            return TSR_EFORMAT;
        }
    }
    return l->nslots == m->ntensors ? 0 : TSR_EFORMAT;
}

static int read_tiles(tsr_gpt2_model_t *m, shard_reader_t *rd)
{
    const tsr_gpt2_shard_layout_t *l = rd->l;
    size_t most = 0;
    for (int s = 0; s < l->nslots; s++)
        if ((size_t)l->slots[s].rtile * l->slots[s].ctile > most)
            most = (size_t)l->slots[s].rtile * l->slots[s].ctile;
    float *buf = malloc(most * sizeof(float));
    tsr_bf16_t *bf16 = m->master ? malloc(most * sizeof *bf16) : NULL;
    int rc = buf && (bf16 || !m->master) ? 0 : TSR_ENOMEM;
    for (int k = 0; !rc && k < TSR_GPT2_SHARD_KINDS; k++)
        for (int s = 0; !rc && s < l->nslots; s++)
            for (int i = 0; !rc && i * l->slots[s].rtile < l->slots[s].rows; i++)
                for (int j = 0; !rc && j * l->slots[s].ctile < l->slots[s].cols; j++)
                    rc = load_tile(m, rd, k, s, i, j, buf, bf16);
    free(buf);
    free(bf16);
    return rc;
}

int tsr_gpt2_state_load(tsr_gpt2_model_t *m, const char *path, tsr_gpt2_train_state_info_t *info,
                        void **loader_state)
{
    tsr_gpt2_shard_layout_t l;
    shard_reader_t rd = { &l, { 0 }, path, NULL };
    char base[NAME_MAX + 1];
    *loader_state = NULL;
    int rc = tsr_gpt2_train_state_manifest_read(path, info, &l, loader_state);
    if (!rc)
        rc = check_slots(m, &l, path);
    if (!rc)
        rc = manifest_place(path, rd.dir, base);
    if (!rc && !(rd.f = calloc((size_t)l.nfiles, sizeof *rd.f)))
        rc = TSR_ENOMEM;
    if (!rc)
        rc = read_tiles(m, &rd);
    for (int f = 0; rd.f && f < l.nfiles; f++)
        if (rd.f[f])
            fclose(rd.f[f]);
    free(rd.f);
    tsr_gpt2_shard_layout_free(&l);
    if (tsr_any(rc)) {
        free(*loader_state);
        *loader_state = NULL;
        return rc ? rc : TSR_EFORMAT;
    }
    return 0;
}
