/* tsr_gpt2's training state files: see gpt2_train_state.h. */
#include <stdlib.h>
#include <string.h>
#include "gpt2_train_state.h"
#include "tsr_core.h"
#include "tsr_files.h"

#define STATE_MAGIC 0x31525354 /* "TSR1" */
#define STATE_VERSION 2
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
    if (h.magic != STATE_MAGIC || h.version < 1 || h.version > STATE_VERSION) {
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
    if ((uint64_t)size < fixed || h.loader_bytes != (uint64_t)size - fixed) {
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
