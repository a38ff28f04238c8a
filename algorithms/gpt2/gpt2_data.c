/* llm.c token files and the llm.c-ordered batch loader. */
#include "gpt2_data.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2_model_io.h" /* file helpers */
#include "tsr_core.h"

static const char *const TOKF = "token file";

/* ---- token files ------------------------------------------------------------- */

int tsr_gpt2_tokens_read(const char *path, int V, tsr_gpt2_tokens_t *toks)
{
    if (!toks) {
        tsr_log(TSR_LOG_ERROR, "tsr_gpt2_tokens_read: NULL output");
        return TSR_EINVAL;
    }
    memset(toks, 0, sizeof *toks);
    FILE *f;
    int64_t fsize;
    int32_t h[TSR_GPT2_HEADER_INTS];
    int rc = tsr_gpt2_file_open_header(path, TOKF, TSR_GPT2_TOKENS_MAGIC, "an llm.c token file", &f, &fsize, h);
    if (rc)
        return rc;
    if (h[1] != TSR_GPT2_TOKENS_VERSION) {
        tsr_log(TSR_LOG_ERROR, "%s %s: bad version %d (expected %d: uint16 tokens)", TOKF, path,
                h[1], TSR_GPT2_TOKENS_VERSION);
        fclose(f);
        return TSR_EFORMAT;
    }
    if (h[2] <= 0) {
        tsr_log(TSR_LOG_ERROR, "%s %s: inconsistent header: token count %d", TOKF, path, h[2]);
        fclose(f);
        return TSR_EFORMAT;
    }
    size_t n = (size_t)h[2];
    int64_t expect = (int64_t)sizeof h + 2 * (int64_t)n;
    if (fsize != expect) {
        tsr_log(TSR_LOG_ERROR, "%s %s: %s: %lld bytes, but the header's %zu tokens need %lld",
                TOKF, path, fsize < expect ? "truncated" : "trailing bytes after the tokens",
                (long long)fsize, n, (long long)expect);
        fclose(f);
        return TSR_EFORMAT;
    }
    uint16_t *t = malloc(n * sizeof(uint16_t));
    char *p = malloc(strlen(path) + 1);
    if (!t || !p) {
        tsr_log(TSR_LOG_ERROR, "%s %s: out of memory for %zu tokens", TOKF, path, n);
        free(t);
        free(p);
        fclose(f);
        return TSR_ENOMEM;
    }
    rc = tsr_gpt2_file_read(f, t, n * sizeof(uint16_t), path, TOKF, "the tokens");
    fclose(f);
    if (rc) {
        free(t);
        free(p);
        return rc;
    }
    if (V > 0) {
        for (size_t i = 0; i < n; i++) {
            if ((int)t[i] >= V) {
                tsr_log(TSR_LOG_ERROR,
                        "%s %s: token id %d at position %zu is out of range for the vocabulary "
                        "size V = %d",
                        TOKF, path, (int)t[i], i, V);
                free(t);
                free(p);
                return TSR_EFORMAT;
            }
        }
    }
    strcpy(p, path);
    toks->path = p;
    toks->ntok = n;
    toks->tokens = t;
    return 0;
}

void tsr_gpt2_tokens_free(tsr_gpt2_tokens_t *toks)
{
    if (!toks)
        return;
    free(toks->path);
    free(toks->tokens);
    memset(toks, 0, sizeof *toks);
}

/* ---- loader ---------------------------------------------------------------------- */

static void new_epoch_order(tsr_gpt2_loader_t *ld)
{
    tsr_gpt2_identity_permutation(ld->perm, (int)ld->nsamples);
    if (ld->shuffle)
        tsr_gpt2_shuffle(ld->perm, (int)ld->nsamples, &ld->rng);
}

int tsr_gpt2_loader_open(tsr_gpt2_loader_t *ld, const char *path, int V, int B, int T,
                         int shuffle, uint32_t seed)
{
    if (!ld) {
        tsr_log(TSR_LOG_ERROR, "tsr_gpt2_loader_open: NULL loader");
        return TSR_EINVAL;
    }
    memset(ld, 0, sizeof *ld);
    if (B < 1 || T < 1 || (size_t)B * (size_t)T >= (size_t)INT_MAX) {
        tsr_log(TSR_LOG_ERROR, "%s %s: bad batch shape B = %d, T = %d", TOKF, path ? path : "(null)",
                B, T);
        return TSR_EINVAL;
    }
    tsr_gpt2_tokens_t toks;
    int rc = tsr_gpt2_tokens_read(path, V, &toks);
    if (rc)
        return rc;
    size_t bt = (size_t)B * (size_t)T;
    if (toks.ntok < bt + 1) {
        tsr_log(TSR_LOG_ERROR,
                "%s %s: too small for one batch: %zu tokens, a batch needs B*T + 1 = %zu "
                "(B %d, T %d)",
                TOKF, path, toks.ntok, bt + 1, B, T);
        tsr_gpt2_tokens_free(&toks);
        return TSR_ESHAPE;
    }
    size_t n = (toks.ntok - 1) / bt;
    int *perm = malloc(n * sizeof(int));
    if (!perm) {
        tsr_log(TSR_LOG_ERROR, "%s %s: out of memory", TOKF, path);
        tsr_gpt2_tokens_free(&toks);
        return TSR_ENOMEM;
    }
    ld->data = toks;
    ld->B = B;
    ld->T = T;
    ld->nsamples = n;
    ld->shuffle = shuffle != 0;
    ld->seed = seed;
    ld->perm = perm;
    return tsr_gpt2_loader_reset(ld);
}

void tsr_gpt2_loader_free(tsr_gpt2_loader_t *ld)
{
    if (!ld)
        return;
    tsr_gpt2_tokens_free(&ld->data);
    free(ld->perm);
    memset(ld, 0, sizeof *ld);
}

int tsr_gpt2_loader_reset(tsr_gpt2_loader_t *ld)
{
    if (!ld || !ld->perm) {
        tsr_log(TSR_LOG_ERROR, "tsr_gpt2_loader_reset: loader not open");
        return TSR_EINVAL;
    }
    tsr_gpt2_rng_seed(&ld->rng, ld->seed);
    ld->epoch = 0;
    ld->pos = 0;
    ld->last_sample = SIZE_MAX;
    new_epoch_order(ld);
    return 0;
}

int tsr_gpt2_loader_sample(const tsr_gpt2_loader_t *ld, size_t k, int *inputs, int *targets)
{
    if (!ld || !ld->perm) {
        tsr_log(TSR_LOG_ERROR, "tsr_gpt2_loader_sample: loader not open");
        return TSR_EINVAL;
    }
    if (k >= ld->nsamples) {
        tsr_log(TSR_LOG_ERROR, "%s %s: sample %zu out of range (%zu samples of B*T = %d x %d)",
                TOKF, ld->data.path, k, ld->nsamples, ld->B, ld->T);
        return TSR_EINVAL;
    }
    size_t bt = (size_t)ld->B * (size_t)ld->T;
    const uint16_t *s = ld->data.tokens + k * bt;
    if (inputs)
        for (size_t i = 0; i < bt; i++)
            inputs[i] = (int)s[i];
    if (targets)
        for (size_t i = 0; i < bt; i++)
            targets[i] = (int)s[i + 1];
    return 0;
}

int tsr_gpt2_loader_next(tsr_gpt2_loader_t *ld, int *inputs, int *targets, size_t *sample)
{
    if (!ld || !ld->perm) {
        tsr_log(TSR_LOG_ERROR, "tsr_gpt2_loader_next: loader not open");
        return TSR_EINVAL;
    }
    if (ld->pos >= ld->nsamples) {
        /* as llm.c: the next epoch's order is drawn when its first batch is asked for */
        ld->epoch++;
        ld->pos = 0;
        new_epoch_order(ld);
    }
    size_t k = (size_t)ld->perm[ld->pos++];
    ld->last_sample = k;
    if (sample)
        *sample = k;
    return tsr_gpt2_loader_sample(ld, k, inputs, targets);
}

/* ---- state image ------------------------------------------------------------------- */

#define STATE_MAGIC 0x3152444cu /* "LDR1" little-endian */
#define STATE_VERSION 1u
/* magic, version, B, T, shuffle, seed (6 x u32); ntok, nsamples, epoch, pos,
 * last_sample (5 x u64); RNG image; nsamples x u32 permutation */
#define STATE_FIXED (6 * 4 + 5 * 8 + TSR_GPT2_RNG_PACKED_BYTES)

static unsigned char *put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
    return p + 4;
}
static unsigned char *put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
    return p + 8;
}
static const unsigned char *get32(const unsigned char *p, uint32_t *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++)
        *v |= (uint32_t)p[i] << (8 * i);
    return p + 4;
}
static const unsigned char *get64(const unsigned char *p, uint64_t *v)
{
    *v = 0;
    for (int i = 0; i < 8; i++)
        *v |= (uint64_t)p[i] << (8 * i);
    return p + 8;
}

size_t tsr_gpt2_loader_state_bytes(const tsr_gpt2_loader_t *ld)
{
    if (!ld || !ld->perm)
        return 0;
    return STATE_FIXED + 4 * ld->nsamples;
}

int tsr_gpt2_loader_save_state(const tsr_gpt2_loader_t *ld, void *buf, size_t bytes)
{
    if (!ld || !ld->perm || !buf) {
        tsr_log(TSR_LOG_ERROR, "tsr_gpt2_loader_save_state: loader not open or NULL buffer");
        return TSR_EINVAL;
    }
    if (bytes < tsr_gpt2_loader_state_bytes(ld)) {
        tsr_log(TSR_LOG_ERROR, "tsr_gpt2_loader_save_state: buffer of %zu bytes, %zu needed", bytes,
                tsr_gpt2_loader_state_bytes(ld));
        return TSR_EINVAL;
    }
    unsigned char *p = buf;
    p = put32(p, STATE_MAGIC);
    p = put32(p, STATE_VERSION);
    p = put32(p, (uint32_t)ld->B);
    p = put32(p, (uint32_t)ld->T);
    p = put32(p, (uint32_t)ld->shuffle);
    p = put32(p, ld->seed);
    p = put64(p, ld->data.ntok);
    p = put64(p, ld->nsamples);
    p = put64(p, ld->epoch);
    p = put64(p, ld->pos);
    p = put64(p, ld->last_sample == SIZE_MAX ? UINT64_MAX : (uint64_t)ld->last_sample);
    tsr_gpt2_rng_pack(&ld->rng, p);
    p += TSR_GPT2_RNG_PACKED_BYTES;
    for (size_t i = 0; i < ld->nsamples; i++)
        p = put32(p, (uint32_t)ld->perm[i]);
    return 0;
}

int tsr_gpt2_loader_restore_state(tsr_gpt2_loader_t *ld, const void *buf, size_t bytes)
{
    if (!ld || !ld->perm || !buf) {
        tsr_log(TSR_LOG_ERROR, "tsr_gpt2_loader_restore_state: loader not open or NULL buffer");
        return TSR_EINVAL;
    }
    const char *path = ld->data.path;
    if (bytes < STATE_FIXED) {
        tsr_log(TSR_LOG_ERROR, "loader state for %s: truncated (%zu bytes)", path, bytes);
        return TSR_EFORMAT;
    }
    const unsigned char *p = buf;
    uint32_t magic, version, B, T, shuffle, seed;
    uint64_t ntok, nsamples, epoch, pos, last;
    p = get32(p, &magic);
    p = get32(p, &version);
    p = get32(p, &B);
    p = get32(p, &T);
    p = get32(p, &shuffle);
    p = get32(p, &seed);
    p = get64(p, &ntok);
    p = get64(p, &nsamples);
    p = get64(p, &epoch);
    p = get64(p, &pos);
    p = get64(p, &last);
    if (magic != STATE_MAGIC || version != STATE_VERSION) {
        tsr_log(TSR_LOG_ERROR, "loader state for %s: bad magic or version (%#x, %u)", path, magic,
                version);
        return TSR_EFORMAT;
    }
    if (B != (uint32_t)ld->B || T != (uint32_t)ld->T || ntok != ld->data.ntok ||
        nsamples != ld->nsamples || shuffle != (uint32_t)ld->shuffle) {
        tsr_log(TSR_LOG_ERROR,
                "loader state for %s: saved for B %u T %u, %llu tokens, shuffle %u; this loader "
                "has B %d T %d, %zu tokens, shuffle %d",
                path, B, T, (unsigned long long)ntok, shuffle, ld->B, ld->T, ld->data.ntok,
                ld->shuffle);
        return TSR_EFORMAT;
    }
    if (bytes != STATE_FIXED + 4 * nsamples) {
        tsr_log(TSR_LOG_ERROR, "loader state for %s: %zu bytes, expected %zu", path, bytes,
                (size_t)(STATE_FIXED + 4 * nsamples));
        return TSR_EFORMAT;
    }
    if (pos > nsamples || (last != UINT64_MAX && last >= nsamples)) {
        tsr_log(TSR_LOG_ERROR, "loader state for %s: position %llu out of range (%llu samples)",
                path, (unsigned long long)pos, (unsigned long long)nsamples);
        return TSR_EFORMAT;
    }
    tsr_gpt2_rng_t rng;
    if (tsr_gpt2_rng_unpack(&rng, p) != 0) {
        tsr_log(TSR_LOG_ERROR, "loader state for %s: bad RNG state", path);
        return TSR_EFORMAT;
    }
    p += TSR_GPT2_RNG_PACKED_BYTES;
    /* the permutation must be one: every index once */
    int *perm = malloc(nsamples * sizeof(int));
    unsigned char *seen = calloc(nsamples, 1);
    if (!perm || !seen) {
        free(perm);
        free(seen);
        tsr_log(TSR_LOG_ERROR, "loader state for %s: out of memory", path);
        return TSR_ENOMEM;
    }
    for (size_t i = 0; i < nsamples; i++) {
        uint32_t v;
        p = get32(p, &v);
        if (v >= nsamples || seen[v]) {
            tsr_log(TSR_LOG_ERROR, "loader state for %s: the sample order is not a permutation", path);
            free(perm);
            free(seen);
            return TSR_EFORMAT;
        }
        seen[v] = 1;
        perm[i] = (int)v;
    }
    free(seen);
    free(ld->perm);
    ld->perm = perm;
    ld->rng = rng;
    ld->seed = seed;
    ld->epoch = epoch;
    ld->pos = (size_t)pos;
    ld->last_sample = last == UINT64_MAX ? SIZE_MAX : (size_t)last;
    return 0;
}
