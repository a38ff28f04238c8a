/* tsr_gpt2's training state files: see gpt2_train_state.h. */
#include <stdlib.h>
#include <string.h>
#include "gpt2_train_state.h"
#include "tsr_core.h"
#include "tsr_files.h"

#define STATE_MAGIC 0x31525354 /* "TSR1" */
#define STATE_VERSION 2   /* one file */
#define SHARDED_VERSION 3 /* a manifest of shard files */
#define KIND "training state"

typedef struct {
    int32_t magic, version;
    int32_t cfg[6]; /* maxT V Vp L NH C */
    int32_t B, T, step;
    int32_t pad;
    uint64_t loader_bytes, num_params, gen_rng;
} state_header_t;

/* Version 2: the training file's identity follows the header. */
typedef struct {
    uint64_t data_bytes, data_hash;
} state_data_t;

static void config_ints(const tsr_gpt2_config_t *cfg, int32_t out[6])
{
    int32_t v[6] = { cfg->maxT, cfg->V, cfg->Vp, cfg->L, cfg->NH, cfg->C };
    memcpy(out, v, sizeof v);
}

int tsr_gpt2_train_state_write(const char *path, const tsr_gpt2_config_t *cfg, int B, int T,
                               const tsr_gpt2_train_state_t *st, const tsr_gpt2_loader_t *train)
{
    size_t np = tsr_gpt2_num_params(cfg), lb = tsr_gpt2_loader_state_bytes(train);
    state_header_t h = { STATE_MAGIC, STATE_VERSION, { 0 }, B, T, st->step, 0, lb, np, st->gen_rng };
    state_data_t d = { st->data.size > 0 ? (uint64_t)st->data.size : 0, st->data.hash };
    config_ints(cfg, h.cfg);
    void *ls = malloc(lb ? lb : 1);
    if (!ls)
        return TSR_ENOMEM;
    int rc = tsr_gpt2_loader_save_state(train, ls, lb);
    tsr_atomic_file_t af;
    if (!rc)
        rc = tsr_atomic_begin(&af, path);
    if (!rc) {
        rc = tsr_atomic_write(&af, &h, sizeof h);
        if (!rc) rc = tsr_atomic_write(&af, &d, sizeof d);
        if (!rc) rc = tsr_atomic_write(&af, st->params, np * sizeof(float));
        if (!rc) rc = tsr_atomic_write(&af, st->m, np * sizeof(float));
        if (!rc) rc = tsr_atomic_write(&af, st->v, np * sizeof(float));
        if (!rc) rc = tsr_atomic_write(&af, ls, lb);
        if (!rc) rc = tsr_atomic_commit(&af);
        else tsr_atomic_abort(&af);
    }
    free(ls);
    return rc;
}

/* The header (and, from version 2, the data identity) of an open state file
 * of `size` bytes, checked on its own: format, version, a valid model, the
 * step, the sampler and the exact file size. */
static int read_info(FILE *f, const char *path, int64_t size, tsr_gpt2_train_state_info_t *info)
{
    state_header_t h = { 0 };
    state_data_t d = { 0 };
    memset(info, 0, sizeof *info);
    int rc = tsr_gpt2_file_read(f, &h, sizeof h, path, KIND, "header");
    if (rc)
        return rc;
    if (h.magic != STATE_MAGIC || h.version < 1 || h.version > SHARDED_VERSION) {
        tsr_log(TSR_LOG_ERROR, "%s: not a tsr_gpt2 training state (bad magic or version)", path);
        return TSR_EFORMAT;
    }
    if (h.version >= 2 && (rc = tsr_gpt2_file_read(f, &d, sizeof d, path, KIND, "data identity")) != 0)
        return rc;
    tsr_gpt2_config_t c = { h.cfg[0], h.cfg[1], h.cfg[2], h.cfg[3], h.cfg[4], h.cfg[5] };
    char what[4200];
    snprintf(what, sizeof what, "%s: the model it was saved for", path);
    if ((rc = tsr_gpt2_config_validate(&c, what)) != 0)
        return TSR_EFORMAT;
    size_t np = tsr_gpt2_num_params(&c);
    if (h.num_params != np || h.pad != 0 || h.B < 1 || h.T < 1) {
        tsr_log(TSR_LOG_ERROR, "%s: corrupt header (%llu parameters for a model of %zu, B %d, T %d)", path,
                (unsigned long long)h.num_params, np, h.B, h.T);
        return TSR_EFORMAT;
    }
    if (h.step < 0 || h.gen_rng == 0) {
        tsr_log(TSR_LOG_ERROR, "%s: corrupt header (step %d, sampler state %s)", path, h.step,
                h.gen_rng ? "set" : "zero");
        return TSR_EFORMAT;
    }
    uint64_t fixed = sizeof h + (h.version >= 2 ? sizeof d : 0) + 3 * (uint64_t)np * sizeof(float);
    if (h.version == SHARDED_VERSION) /* its size is checked with its layout */
        fixed = 0;
    else if ((uint64_t)size < fixed || h.loader_bytes != (uint64_t)size - fixed) {
        tsr_log(TSR_LOG_ERROR, "%s: %lld bytes, expected %llu (truncated or trailing bytes)", path, (long long)size,
                (unsigned long long)(fixed + h.loader_bytes));
        return TSR_EFORMAT;
    }
    if (h.version >= 2 && (d.data_bytes == 0 || d.data_bytes > INT64_MAX)) {
        tsr_log(TSR_LOG_ERROR, "%s: corrupt header (a training file of %llu bytes)", path,
                (unsigned long long)d.data_bytes);
        return TSR_EFORMAT;
    }
    info->version = h.version;
    info->cfg = c;
    info->B = h.B;
    info->T = h.T;
    info->step = h.step;
    info->gen_rng = h.gen_rng;
    info->loader_bytes = h.loader_bytes;
    info->data.size = h.version >= 2 ? (int64_t)d.data_bytes : -1;
    info->data.hash = d.data_hash;
    return 0;
}

int tsr_gpt2_train_state_info(const char *path, tsr_gpt2_train_state_info_t *info)
{
    FILE *f = NULL;
    int64_t size = 0;
    int rc = tsr_gpt2_file_open(path, KIND, &f, &size);
    if (!rc)
        rc = read_info(f, path, size, info);
    if (f)
        fclose(f);
    if (!rc && info->version == SHARDED_VERSION) { /* the whole manifest checked */
        tsr_gpt2_shard_layout_t l;
        rc = tsr_gpt2_train_state_manifest_read(path, info, &l, NULL);
        tsr_gpt2_shard_layout_free(&l);
    }
    return rc;
}

/* The header against what this run expects; the message names the first
 * field that does not fit. */
static int check_run(const tsr_gpt2_train_state_info_t *h, const char *path, const tsr_gpt2_config_t *cfg, int B,
                     int T, const tsr_gpt2_loader_t *train)
{
    static const char *cfg_names[6] = { "maxT", "V", "Vp", "L", "NH", "C" };
    int32_t want[6], have[6];
    config_ints(cfg, want);
    config_ints(&h->cfg, have);
    for (int i = 0; i < 6; i++)
        if (have[i] != want[i]) {
            tsr_log(TSR_LOG_ERROR, "%s: saved for another model (%s %d, this model has %d)", path, cfg_names[i],
                    have[i], want[i]);
            return TSR_EFORMAT;
        }
    if (h->B != B || h->T != T) {
        tsr_log(TSR_LOG_ERROR, "%s: saved for another batch shape (B %d T %d, this run has B %d T %d)", path, h->B,
                h->T, B, T);
        return TSR_EFORMAT;
    }
    if (train && h->loader_bytes != tsr_gpt2_loader_state_bytes(train)) {
        tsr_log(TSR_LOG_ERROR, "%s: saved for another training file (its data position does not fit %s)",
                path, train->pattern);
        return TSR_EFORMAT;
    }
    return 0;
}

int tsr_gpt2_train_state_read(const char *path, const tsr_gpt2_config_t *cfg, int B, int T,
                              tsr_gpt2_loader_t *train, tsr_gpt2_train_state_t *st)
{
    memset(st, 0, sizeof *st);
    FILE *f = NULL;
    int64_t size = 0;
    tsr_gpt2_train_state_info_t h;
    void *ls = NULL;
    size_t np = tsr_gpt2_num_params(cfg);
    int rc = tsr_gpt2_file_open(path, KIND, &f, &size);
    if (!rc)
        rc = read_info(f, path, size, &h);
    if (!rc && h.version == SHARDED_VERSION) {
        tsr_log(TSR_LOG_ERROR, "%s: a sharded state: its tiles are read by the ranks that own them", path);
        rc = TSR_EFORMAT;
    }
    if (!rc)
        rc = check_run(&h, path, cfg, B, T, train);
    if (!rc) {
        st->params = malloc(np * sizeof(float));
        st->m = malloc(np * sizeof(float));
        st->v = malloc(np * sizeof(float));
        ls = malloc(h.loader_bytes ? h.loader_bytes : 1);
        rc = st->params && st->m && st->v && ls ? 0 : TSR_ENOMEM;
    }
    if (!rc) rc = tsr_gpt2_file_read(f, st->params, np * sizeof(float), path, KIND, "parameters");
    if (!rc) rc = tsr_gpt2_file_read(f, st->m, np * sizeof(float), path, KIND, "AdamW m");
    if (!rc) rc = tsr_gpt2_file_read(f, st->v, np * sizeof(float), path, KIND, "AdamW v");
    if (!rc) rc = tsr_gpt2_file_read(f, ls, h.loader_bytes, path, KIND, "data position");
    if (!rc && train) rc = tsr_gpt2_loader_restore_state(train, ls, h.loader_bytes);
    if (f)
        fclose(f);
    free(ls);
    if (rc) {
        tsr_gpt2_train_state_free(st);
        return rc;
    }
    st->step = h.step;
    st->gen_rng = h.gen_rng;
    st->data = h.data;
    return 0;
}

void tsr_gpt2_train_state_free(tsr_gpt2_train_state_t *st)
{
    free(st->params);
    free(st->m);
    free(st->v);
    memset(st, 0, sizeof *st);
}

/* ---- sharded states -------------------------------------------------------------- */

/* Slots of a model: wte, wpe, lnfw, lnfb, then 12 per layer (gpt2_model.h). */
static int model_slots(const tsr_gpt2_config_t *cfg) { return 4 + 12 * cfg->L; }

static size_t slot_tiles(const tsr_gpt2_shard_slot_t *s)
{
    return (size_t)((s->rows + s->rtile - 1) / s->rtile) * (size_t)((s->cols + s->ctile - 1) / s->ctile);
}

int tsr_gpt2_shard_layout_init(tsr_gpt2_shard_layout_t *l, int nslots, const tsr_gpt2_shard_slot_t *slots,
                               int nfiles)
{
    memset(l, 0, sizeof *l);
    l->nslots = nslots;
    l->nfiles = nfiles;
    l->slots = malloc((size_t)nslots * sizeof *l->slots);
    l->first = malloc((size_t)nslots * sizeof *l->first);
    l->file_bytes = calloc((size_t)nfiles, sizeof *l->file_bytes);
    l->names = calloc((size_t)nfiles, sizeof *l->names);
    if (!l->slots || !l->first || !l->file_bytes || !l->names) {
        tsr_gpt2_shard_layout_free(l);
        return TSR_ENOMEM;
    }
    memcpy(l->slots, slots, (size_t)nslots * sizeof *slots);
    for (int s = 0; s < nslots; s++) {
        l->first[s] = l->per_kind;
        l->per_kind += slot_tiles(&slots[s]);
    }
    l->nrecords = TSR_GPT2_SHARD_KINDS * l->per_kind;
    l->records = calloc(l->nrecords ? l->nrecords : 1, sizeof *l->records);
    if (!l->records) {
        tsr_gpt2_shard_layout_free(l);
        return TSR_ENOMEM;
    }
    return 0;
}

void tsr_gpt2_shard_layout_free(tsr_gpt2_shard_layout_t *l)
{
    free(l->slots);
    free(l->first);
    free(l->file_bytes);
    free(l->names);
    free(l->records);
    memset(l, 0, sizeof *l);
}

size_t tsr_gpt2_shard_record(const tsr_gpt2_shard_layout_t *l, int k, int s, int i, int j)
{
    const tsr_gpt2_shard_slot_t *sl = &l->slots[s];
    return (size_t)k * l->per_kind + l->first[s] + (size_t)i * ((sl->cols + sl->ctile - 1) / sl->ctile) + j;
}

uint64_t tsr_gpt2_hash64(const void *data, size_t bytes)
{
    const unsigned char *p = data;
    uint64_t h = 14695981039346656037ull, w;
    size_t n = 0;
    for (; n + 8 <= bytes; n += 8) {
        memcpy(&w, p + n, 8);
        h = (h ^ w) * 1099511628211ull;
    }
    for (; n < bytes; n++)
        h = (h ^ p[n]) * 1099511628211ull;
    return h;
}

typedef struct {
    uint64_t generation;
    int32_t nfiles, nslots;
} shard_counts_t;

/* The manifest's bytes after the header and data identity, up to its hash. */
static size_t layout_bytes(const tsr_gpt2_shard_layout_t *l)
{
    return sizeof(shard_counts_t) + (size_t)l->nslots * sizeof(tsr_gpt2_shard_slot_t) +
           (size_t)l->nfiles * (8 + TSR_GPT2_SHARD_NAME) + l->nrecords * sizeof(tsr_gpt2_shard_record_t);
}

/* Appends n bytes at *at. */
static void put(unsigned char **at, const void *src, size_t n)
{
    memcpy(*at, src, n);
    *at += n;
}

int tsr_gpt2_train_state_manifest_write(const char *path, const tsr_gpt2_config_t *cfg, int B, int T,
                                        const tsr_gpt2_train_state_t *st, const tsr_gpt2_shard_layout_t *l,
                                        const void *loader_state, size_t loader_bytes)
{
    size_t np = tsr_gpt2_num_params(cfg);
    state_header_t h = { STATE_MAGIC, SHARDED_VERSION, { 0 }, B, T, st->step, 0, loader_bytes, np, st->gen_rng };
    state_data_t d = { st->data.size > 0 ? (uint64_t)st->data.size : 0, st->data.hash };
    shard_counts_t c = { l->generation, l->nfiles, l->nslots };
    config_ints(cfg, h.cfg);
    size_t total = sizeof h + sizeof d + layout_bytes(l) + loader_bytes;
    unsigned char *buf = malloc(total + 8), *at = buf;
    if (!buf)
        return TSR_ENOMEM;
    put(&at, &h, sizeof h);
    put(&at, &d, sizeof d);
    put(&at, &c, sizeof c);
    put(&at, l->slots, (size_t)l->nslots * sizeof *l->slots);
    for (int f = 0; f < l->nfiles; f++) {
        put(&at, &l->file_bytes[f], 8);
        put(&at, l->names[f], TSR_GPT2_SHARD_NAME);
    }
    put(&at, l->records, l->nrecords * sizeof *l->records);
    put(&at, loader_state, loader_bytes);
    uint64_t hash = tsr_gpt2_hash64(buf, total);
    put(&at, &hash, 8);
    tsr_atomic_file_t af;
    int rc = tsr_atomic_begin(&af, path);
    if (!rc) {
        tsr_atomic_write(&af, buf, total + 8); /* a failed write fails the commit */
        rc = tsr_atomic_commit(&af);
    }
    free(buf);
    return rc;
}

/* A shard file's name as a manifest may give it: a plain name in the
 * manifest's directory (no '/', not "." or ".."). */
static int plain_name(const char *name)
{
    return memchr(name, '\0', TSR_GPT2_SHARD_NAME) && *name && !strchr(name, '/') && strcmp(name, ".") &&
           strcmp(name, "..");
}

/* The layout part of a manifest (buf, n bytes after the header and data
 * identity, the loader's position and the hash excluded), checked. */
static int parse_layout(const unsigned char *buf, size_t n, const char *path, const tsr_gpt2_config_t *cfg,
                        tsr_gpt2_shard_layout_t *l)
{
    shard_counts_t c;
    if (n < sizeof c)
        goto short_file;
    memcpy(&c, buf, sizeof c);
    if (c.nslots != model_slots(cfg) || c.nfiles < 1 || c.nfiles > (1 << 20)) {
        tsr_log(TSR_LOG_ERROR, "%s: corrupt layout (%d slots for %d layers, %d shard files)", path, c.nslots, cfg->L,
                c.nfiles);
        return TSR_EFORMAT;
    }
    size_t slot_bytes = (size_t)c.nslots * sizeof(tsr_gpt2_shard_slot_t);
    if (n < sizeof c + slot_bytes)
        goto short_file;
    tsr_gpt2_shard_slot_t *copy = malloc(slot_bytes);
    if (!copy)
        return TSR_ENOMEM;
    memcpy(copy, buf + sizeof c, slot_bytes);
    size_t elems = 0, np = tsr_gpt2_num_params(cfg), tiles = 0;
    for (int s = 0; s < c.nslots; s++) {
        const tsr_gpt2_shard_slot_t *sl = &copy[s];
        if (sl->rows < 1 || sl->cols < 1 || sl->rtile < 1 || sl->rtile > sl->rows || sl->ctile < 1 ||
            sl->ctile > sl->cols || (uint64_t)sl->rows * (uint64_t)sl->cols > np - elems) {
            tsr_log(TSR_LOG_ERROR, "%s: corrupt layout (slot %d: %d x %d in tiles of %d x %d, for a model of %zu "
                    "parameters)", path, s, sl->rows, sl->cols, sl->rtile, sl->ctile, np);
            free(copy);
            return TSR_EFORMAT;
        }
        elems += (size_t)sl->rows * sl->cols;
        tiles += slot_tiles(sl);
    }
    /* sizes checked before anything is allocated from them */
    uint64_t want = sizeof c + slot_bytes + (uint64_t)c.nfiles * (8 + TSR_GPT2_SHARD_NAME) +
                    TSR_GPT2_SHARD_KINDS * (uint64_t)tiles * sizeof(tsr_gpt2_shard_record_t);
    int rc = 0;
    if (elems != np) {
        tsr_log(TSR_LOG_ERROR, "%s: corrupt layout (its slots hold %zu parameters, the model %zu)", path, elems, np);
        rc = TSR_EFORMAT;
    } else if (n != want) {
        tsr_log(TSR_LOG_ERROR, "%s: %s (its layout takes %llu bytes, the file leaves %zu for it)", path,
                n < want ? "truncated" : "trailing bytes", (unsigned long long)want, n);
        rc = TSR_EFORMAT;
    }
    if (!rc)
        rc = tsr_gpt2_shard_layout_init(l, c.nslots, copy, c.nfiles);
    free(copy);
    if (rc)
        return rc;
    l->generation = c.generation;
    const unsigned char *at = buf + sizeof c + slot_bytes;
    for (int f = 0; f < l->nfiles; f++, at += 8 + TSR_GPT2_SHARD_NAME) {
        memcpy(&l->file_bytes[f], at, 8);
        memcpy(l->names[f], at + 8, TSR_GPT2_SHARD_NAME);
        if (!plain_name(l->names[f])) {
            tsr_log(TSR_LOG_ERROR, "%s: corrupt layout (shard file %d's name is not a plain file name)", path, f);
            return TSR_EFORMAT;
        }
    }
    memcpy(l->records, at, l->nrecords * sizeof *l->records);
    for (int k = 0; k < TSR_GPT2_SHARD_KINDS; k++)
        for (int s = 0; s < l->nslots; s++) {
            const tsr_gpt2_shard_slot_t *sl = &l->slots[s];
            for (int i = 0; i * sl->rtile < sl->rows; i++)
                for (int j = 0; j * sl->ctile < sl->cols; j++) {
                    const tsr_gpt2_shard_record_t *r = &l->records[tsr_gpt2_shard_record(l, k, s, i, j)];
                    int rows = sl->rows - i * sl->rtile, cols = sl->cols - j * sl->ctile;
                    uint64_t bytes = (uint64_t)(rows < sl->rtile ? rows : sl->rtile) *
                                     (uint64_t)(cols < sl->ctile ? cols : sl->ctile) * sizeof(float);
                    if (r->file < 0 || r->file >= l->nfiles || r->pad || r->offset < sizeof(tsr_gpt2_shard_header_t) ||
                        r->offset > l->file_bytes[r->file] || bytes > l->file_bytes[r->file] - r->offset) {
                        tsr_log(TSR_LOG_ERROR, "%s: corrupt layout (slot %d tile (%d, %d) of kind %d is not inside "
                                "its shard file)", path, s, i, j, k);
                        return TSR_EFORMAT;
                    }
                }
        }
    return 0;
short_file:
    tsr_log(TSR_LOG_ERROR, "%s: truncated: the layout does not fit in the file", path);
    return TSR_EFORMAT;
}

int tsr_gpt2_train_state_is_manifest(const char *path)
{
    int32_t head[2] = { 0, 0 };
    FILE *f = tsr_open_regular(path);
    int is = f && fread(head, sizeof head, 1, f) == 1 && head[0] == STATE_MAGIC && head[1] == SHARDED_VERSION;
    if (f)
        fclose(f);
    return is;
}

int tsr_gpt2_train_state_manifest_read(const char *path, tsr_gpt2_train_state_info_t *info,
                                       tsr_gpt2_shard_layout_t *l, void **loader_state)
{
    memset(l, 0, sizeof *l);
    if (loader_state)
        *loader_state = NULL;
    FILE *f = NULL;
    int64_t size = 0;
    unsigned char *buf = NULL;
    int rc = tsr_gpt2_file_open(path, KIND, &f, &size);
    if (!rc)
        rc = read_info(f, path, size, info);
    if (!rc && info->version != SHARDED_VERSION) {
        tsr_log(TSR_LOG_ERROR, "%s: a single-file state, not a manifest of shards", path);
        rc = TSR_EFORMAT;
    }
    size_t head = sizeof(state_header_t) + sizeof(state_data_t);
    if (!rc && ((uint64_t)size < head + 8 || info->loader_bytes > (uint64_t)size - head - 8 ||
                size > ((int64_t)1 << 32))) {
        tsr_log(TSR_LOG_ERROR, "%s: %lld bytes: %s for a manifest", path, (long long)size,
                (uint64_t)size < head ? "truncated" : "the wrong size");
        rc = TSR_EFORMAT;
    }
    if (!rc && fseek(f, 0, SEEK_SET) != 0)
        rc = TSR_EIO;
    if (!rc && !(buf = malloc((size_t)size)))
        rc = TSR_ENOMEM;
    if (!rc)
        rc = tsr_gpt2_file_read(f, buf, (size_t)size, path, KIND, "manifest");
    if (f)
        fclose(f);
    uint64_t hash = 0;
    size_t body = rc ? 0 : (size_t)size - 8;
    if (!rc)
        memcpy(&hash, buf + body, 8);
    if (!rc)
        rc = parse_layout(buf + head, body - head - info->loader_bytes, path, &info->cfg, l);
    if (!rc && hash != tsr_gpt2_hash64(buf, body)) {
        tsr_log(TSR_LOG_ERROR, "%s: corrupt manifest (its checksum does not match its bytes)", path);
        rc = TSR_EFORMAT;
    }
    if (!rc && loader_state) {
        *loader_state = malloc(info->loader_bytes ? info->loader_bytes : 1);
        if (*loader_state)
            memcpy(*loader_state, buf + body - info->loader_bytes, info->loader_bytes);
        else
            rc = TSR_ENOMEM;
    }
    free(buf);
    if (rc)
        tsr_gpt2_shard_layout_free(l);
    return rc;
}
