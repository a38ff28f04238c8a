/* llm.c token files and the llm.c-ordered batch loader (one file or a glob of shards). */
#define _GNU_SOURCE
#include "gpt2_data.h"

#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2_model_io.h" /* file helpers */
#include "tsr_core.h"

static const char *const TOKF = "token file";

/* ---- token files ------------------------------------------------------------- */

/* Opens a token file and checks its header and size; *ntok: its token
 * count. The file is left open (at the first token) on success. */
static int open_token_file(const char *path, FILE **fp, size_t *ntok)
{
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
    *fp = f;
    *ntok = n;
    return 0;
}

/* TSR_EFORMAT, naming the token, when one of t[0..n) is not below V (V > 0). */
static int check_token_ids(const uint16_t *t, size_t n, int V, const char *path, size_t first)
{
    for (size_t i = 0; V > 0 && i < n; i++)
        if ((int)t[i] >= V) {
            tsr_log(TSR_LOG_ERROR, "%s %s: token id %d at position %zu is out of range for the vocabulary size V = %d",
                    TOKF, path, (int)t[i], first + i, V);
            return TSR_EFORMAT;
        }
    return 0;
}

int tsr_gpt2_tokens_read(const char *path, int V, tsr_gpt2_tokens_t *toks)
{
    int rc = tsr_gpt2_output_clear(toks, sizeof *toks, "tsr_gpt2_tokens_read");
    if (rc)
        return rc;
    FILE *f;
    size_t n;
    if ((rc = open_token_file(path, &f, &n)))
        return rc;
    void *body;
    if ((rc = tsr_gpt2_file_read_body(f, n * sizeof(uint16_t), n, "tokens", path, TOKF, "the tokens", &body)))
        return rc;
    uint16_t *t = body;
    if ((rc = check_token_ids(t, n, V, path, 0))) {
        free(t);
        return rc;
    }
    char *p = malloc(strlen(path) + 1);
    if (!p) {
        tsr_log(TSR_LOG_ERROR, "%s %s: out of memory for %zu tokens", TOKF, path, n);
        free(t);
        return TSR_ENOMEM;
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

/* ---- loader: the shards ------------------------------------------------------------ */

/* At most this many shards (llm.c's FineWeb-10B has about 100). */
#define MAX_SHARDS (1 << 20)

static int has_wildcard(const char *s) { return strpbrk(s, "*?[") != NULL; }

static char *copy_string(const char *s)
{
    char *c = malloc(strlen(s) + 1);
    if (c)
        strcpy(c, s);
    return c;
}

/* The file names pattern stands for: itself when it has no wildcard (its
 * open then says what is wrong with it), else glob's sorted matches. */
static int list_shards(tsr_gpt2_loader_t *ld, const char *pattern)
{
    glob_t g;
    memset(&g, 0, sizeof g);
    size_t n = 1;
    if (has_wildcard(pattern)) {
        int grc = glob(pattern, GLOB_ERR, NULL, &g);
        if (grc == GLOB_NOMATCH || (grc == 0 && g.gl_pathc == 0)) {
            tsr_log(TSR_LOG_ERROR, "%s %s: no file matches the pattern", TOKF, pattern);
            globfree(&g);
            return TSR_EIO;
        }
        if (grc != 0) {
            tsr_log(TSR_LOG_ERROR, "%s %s: cannot expand the pattern (%s)", TOKF, pattern,
                    grc == GLOB_NOSPACE ? "out of memory" : "a directory could not be read");
            globfree(&g);
            return TSR_EIO;
        }
        n = g.gl_pathc;
        if (n > MAX_SHARDS) {
            tsr_log(TSR_LOG_ERROR, "%s %s: %zu files match, at most %d shards are read", TOKF, pattern, n,
                    MAX_SHARDS);
            globfree(&g);
            return TSR_EINVAL;
        }
    }
    ld->shards = calloc(n, sizeof *ld->shards);
    int rc = ld->shards ? 0 : TSR_ENOMEM;
    for (size_t i = 0; i < n && !rc; i++) {
        ld->shards[i].path = copy_string(g.gl_pathc ? g.gl_pathv[i] : pattern);
        rc = ld->shards[i].path ? 0 : TSR_ENOMEM;
    }
    ld->nshards = (int)n;
    globfree(&g);
    return rc;
}

int tsr_gpt2_data_id(const char *pattern, tsr_gpt2_file_id_t *id)
{
    if (!has_wildcard(pattern))
        return tsr_gpt2_file_id(pattern, id);
    glob_t g;
    memset(&g, 0, sizeof g);
    *id = (tsr_gpt2_file_id_t){ -1, 0, ENOENT };
    if (glob(pattern, GLOB_ERR, NULL, &g) != 0 || g.gl_pathc == 0) {
        globfree(&g);
        return TSR_EIO;
    }
    tsr_gpt2_file_id_t all = { 0, 0xcbf29ce484222325u, 0 };
    for (size_t i = 0; i < g.gl_pathc; i++) {
        tsr_gpt2_file_id_t f;
        if (tsr_gpt2_file_id(g.gl_pathv[i], &f) != 0) {
            *id = f;
            globfree(&g);
            return TSR_EIO;
        }
        all.size += f.size;
        for (int b = 0; b < 8; b++) /* FNV-1a over the shards' hashes, in name order */
            all.hash = (all.hash ^ ((f.hash >> (8 * b)) & 0xff)) * 0x100000001b3u;
    }
    globfree(&g);
    *id = all;
    return 0;
}

/* Reads every shard's header: token counts, samples, the largest shard. */
static int scan_shards(tsr_gpt2_loader_t *ld)
{
    size_t bt = (size_t)ld->B * (size_t)ld->T;
    for (int i = 0; i < ld->nshards; i++) {
        tsr_gpt2_shard_t *sh = &ld->shards[i];
        FILE *f;
        int rc = open_token_file(sh->path, &f, &sh->ntok);
        if (rc)
            return rc;
        fclose(f);
        if (sh->ntok < bt + 1) {
            tsr_log(TSR_LOG_ERROR, "%s %s: too small for one batch: %zu tokens, a batch needs B*T + 1 = %zu (B %d, T %d)",
                    TOKF, sh->path, sh->ntok, bt + 1, ld->B, ld->T);
            return TSR_ESHAPE;
        }
        sh->nsamples = (sh->ntok - 1) / bt;
        if (sh->nsamples > (size_t)INT_MAX) {
            tsr_log(TSR_LOG_ERROR, "%s %s: %zu samples of B*T tokens, at most %d a shard", TOKF, sh->path,
                    sh->nsamples, INT_MAX);
            return TSR_EINVAL;
        }
        ld->ntok += sh->ntok;
        ld->nsamples += sh->nsamples;
        if (sh->nsamples > ld->max_samples)
            ld->max_samples = sh->nsamples;
    }
    return 0;
}

/* The shard holding global sample k (shards numbered in glob order); *j its
 * index there. */
static int shard_of_sample(const tsr_gpt2_loader_t *ld, size_t k, size_t *j)
{
    int s = 0;
    while (k >= ld->shards[s].nsamples)
        k -= ld->shards[s++].nsamples;
    *j = k;
    return s;
}

static size_t first_sample_of(const tsr_gpt2_loader_t *ld, int s)
{
    size_t k = 0;
    for (int i = 0; i < s; i++)
        k += ld->shards[i].nsamples;
    return k;
}

/* Reads rows row0 .. row0 + nrows - 1 of sample j of shard s. */
static int read_sample(tsr_gpt2_loader_t *ld, int s, size_t j, int *inputs, int *targets)
{
    const tsr_gpt2_shard_t *sh = &ld->shards[s];
    if (ld->open_shard != s) {
        if (ld->file)
            fclose(ld->file);
        ld->open_shard = -1;
        size_t ntok;
        int rc = open_token_file(sh->path, &ld->file, &ntok);
        if (rc)
            return rc;
        if (ntok != sh->ntok) {
            tsr_log(TSR_LOG_ERROR, "%s %s: changed while training: %zu tokens, %zu when opened", TOKF, sh->path,
                    ntok, sh->ntok);
            return TSR_EIO;
        }
        ld->open_shard = s;
    }
    size_t bt = (size_t)ld->B * ld->T, first = j * bt + (size_t)ld->row0 * ld->T, n = (size_t)ld->nrows * ld->T;
    size_t bytes = (n + 1) * sizeof(uint16_t);
    off_t at = (off_t)(TSR_GPT2_HEADER_INTS * sizeof(int32_t) + first * sizeof(uint16_t));
    ssize_t got = pread(fileno(ld->file), ld->buf, bytes, at);
    if (got != (ssize_t)bytes) {
        tsr_log(TSR_LOG_ERROR, "%s %s: cannot read tokens %zu .. %zu: %s", TOKF, sh->path, first, first + n,
                got < 0 ? strerror(errno) : "the file is shorter than when it was opened");
        return TSR_EIO;
    }
    int rc = check_token_ids(ld->buf, n + 1, ld->V, sh->path, first);
    if (rc)
        return rc;
    size_t skip = (size_t)ld->row0 * ld->T;
    if (inputs) {
        memset(inputs, 0, bt * sizeof(int));
        for (size_t i = 0; i < n; i++)
            inputs[skip + i] = (int)ld->buf[i];
    }
    if (targets) {
        memset(targets, 0, bt * sizeof(int));
        for (size_t i = 0; i < n; i++)
            targets[skip + i] = (int)ld->buf[i + 1];
    }
    return 0;
}

/* ---- loader: the order ------------------------------------------------------------- */

static const tsr_gpt2_shard_t *current_shard(const tsr_gpt2_loader_t *ld)
{
    return &ld->shards[ld->shard_order[ld->shard_pos]];
}

/* The current shard's sample order (llm.c: prepare_intra_shard_indices_). */
static void start_shard(tsr_gpt2_loader_t *ld)
{
    int n = (int)current_shard(ld)->nsamples;
    ld->pos = 0;
    tsr_gpt2_identity_permutation(ld->perm, n);
    if (ld->shuffle)
        tsr_gpt2_shuffle(ld->perm, n, &ld->rng);
}

/* A new epoch (llm.c: dataloader_reset): the shard order permuted further,
 * then the first shard's sample order. */
static void start_epoch(tsr_gpt2_loader_t *ld)
{
    if (ld->shuffle)
        tsr_gpt2_shuffle(ld->shard_order, ld->nshards, &ld->rng);
    ld->shard_pos = 0;
    start_shard(ld);
}

int tsr_gpt2_loader_open(tsr_gpt2_loader_t *ld, const char *pattern, int V, int B, int T,
                         int shuffle, uint32_t seed)
{
    if (!ld) {
        tsr_log(TSR_LOG_ERROR, "tsr_gpt2_loader_open: NULL loader");
        return TSR_EINVAL;
    }
    memset(ld, 0, sizeof *ld);
    ld->open_shard = -1;
    if (!pattern || B < 1 || T < 1 || (size_t)B * (size_t)T >= (size_t)INT_MAX) {
        tsr_log(TSR_LOG_ERROR, "%s %s: bad batch shape B = %d, T = %d", TOKF, pattern ? pattern : "(null)", B, T);
        return TSR_EINVAL;
    }
    ld->B = B;
    ld->T = T;
    ld->V = V;
    ld->nrows = B;
    ld->shuffle = shuffle != 0;
    ld->seed = seed;
    ld->pattern = copy_string(pattern);
    int rc = ld->pattern ? list_shards(ld, pattern) : TSR_ENOMEM;
    if (!rc)
        rc = scan_shards(ld);
    if (!rc) {
        ld->shard_order = malloc((size_t)ld->nshards * sizeof(int));
        ld->perm = malloc(ld->max_samples * sizeof(int));
        ld->buf = malloc(((size_t)B * T + 1) * sizeof(uint16_t));
        rc = ld->shard_order && ld->perm && ld->buf ? 0 : TSR_ENOMEM;
    }
    if (!rc)
        rc = tsr_gpt2_loader_reset(ld);
    if (rc) {
        if (rc == TSR_ENOMEM)
            tsr_log(TSR_LOG_ERROR, "%s %s: out of memory", TOKF, pattern);
        tsr_gpt2_loader_free(ld);
    }
    return rc;
}

void tsr_gpt2_loader_free(tsr_gpt2_loader_t *ld)
{
    if (!ld)
        return;
    for (int i = 0; ld->shards && i < ld->nshards; i++)
        free(ld->shards[i].path);
    if (ld->file)
        fclose(ld->file);
    free(ld->shards);
    free(ld->pattern);
    free(ld->shard_order);
    free(ld->perm);
    free(ld->buf);
    memset(ld, 0, sizeof *ld);
    ld->open_shard = -1;
}

int tsr_gpt2_loader_set_rows(tsr_gpt2_loader_t *ld, int row0, int nrows)
{
    if (!ld || !ld->perm || row0 < 0 || nrows < 0 || row0 > ld->B - nrows) {
        tsr_log(TSR_LOG_ERROR, "tsr_gpt2_loader_set_rows: rows %d .. %d of a batch of %d (or loader not open)", row0,
                row0 + nrows - 1, ld ? ld->B : 0);
        return TSR_EINVAL;
    }
    ld->row0 = row0;
    ld->nrows = nrows;
    return 0;
}

int tsr_gpt2_loader_reset(tsr_gpt2_loader_t *ld)
{
    if (!ld || !ld->perm) {
        tsr_log(TSR_LOG_ERROR, "tsr_gpt2_loader_reset: loader not open");
        return TSR_EINVAL;
    }
    tsr_gpt2_rng_seed(&ld->rng, ld->seed);
    tsr_gpt2_identity_permutation(ld->shard_order, ld->nshards);
    ld->epoch = 0;
    ld->last_sample = SIZE_MAX;
    start_epoch(ld);
    return 0;
}

int tsr_gpt2_loader_sample(tsr_gpt2_loader_t *ld, size_t k, int *inputs, int *targets)
{
    if (!ld || !ld->perm) {
        tsr_log(TSR_LOG_ERROR, "tsr_gpt2_loader_sample: loader not open");
        return TSR_EINVAL;
    }
    if (k >= ld->nsamples) {
        tsr_log(TSR_LOG_ERROR, "%s %s: sample %zu out of range (%zu samples of B*T = %d x %d)", TOKF, ld->pattern, k,
                ld->nsamples, ld->B, ld->T);
        return TSR_EINVAL;
    }
    size_t j;
    int s = shard_of_sample(ld, k, &j);
    return read_sample(ld, s, j, inputs, targets);
}

int tsr_gpt2_loader_next(tsr_gpt2_loader_t *ld, int *inputs, int *targets, size_t *sample)
{
    if (!ld || !ld->perm) {
        tsr_log(TSR_LOG_ERROR, "tsr_gpt2_loader_next: loader not open");
        return TSR_EINVAL;
    }
    /* as llm.c: the next shard's (or epoch's) order is drawn when its first batch is asked for */
    if (ld->pos >= current_shard(ld)->nsamples) {
        if (ld->shard_pos + 1 < ld->nshards) {
            ld->shard_pos++;
            start_shard(ld);
        } else {
            ld->epoch++;
            start_epoch(ld);
        }
    }
    int s = ld->shard_order[ld->shard_pos];
    size_t j = (size_t)ld->perm[ld->pos++];
    ld->last_sample = first_sample_of(ld, s) + j;
    if (sample)
        *sample = ld->last_sample;
    return read_sample(ld, s, j, inputs, targets);
}

/* ---- state image ------------------------------------------------------------------- */

#define STATE_MAGIC 0x3152444cu /* "LDR1" little-endian */
#define STATE_VERSION 2u
/* magic, version, B, T, shuffle, seed, shards (7 x u32); ntok, nsamples,
 * max_samples, epoch, shard_pos, pos, last_sample (7 x u64); RNG image;
 * shards x u32 shard order; max_samples x u32 sample order (the current
 * shard's first, zeros after) */
#define STATE_FIXED (7 * 4 + 7 * 8 + TSR_GPT2_RNG_PACKED_BYTES)
/* version 1 (one file): magic, version, B, T, shuffle, seed (6 x u32); ntok,
 * nsamples, epoch, pos, last_sample (5 x u64); RNG image; nsamples x u32 */
#define STATE1_FIXED (6 * 4 + 5 * 8 + TSR_GPT2_RNG_PACKED_BYTES)

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
    return STATE_FIXED + 4 * ((size_t)ld->nshards + ld->max_samples);
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
    p = put32(p, (uint32_t)ld->nshards);
    p = put64(p, ld->ntok);
    p = put64(p, ld->nsamples);
    p = put64(p, ld->max_samples);
    p = put64(p, ld->epoch);
    p = put64(p, (uint64_t)ld->shard_pos);
    p = put64(p, ld->pos);
    p = put64(p, ld->last_sample == SIZE_MAX ? UINT64_MAX : (uint64_t)ld->last_sample);
    tsr_gpt2_rng_pack(&ld->rng, p);
    p += TSR_GPT2_RNG_PACKED_BYTES;
    for (int i = 0; i < ld->nshards; i++)
        p = put32(p, (uint32_t)ld->shard_order[i]);
    size_t n = current_shard(ld)->nsamples;
    for (size_t i = 0; i < ld->max_samples; i++)
        p = put32(p, i < n ? (uint32_t)ld->perm[i] : 0);
    return 0;
}

/* Reads n u32 that must be a permutation of 0 .. n-1 into out. */
static const unsigned char *get_permutation(const unsigned char *p, size_t n, int *out, unsigned char *seen, int *ok)
{
    memset(seen, 0, n);
    *ok = 1;
    for (size_t i = 0; i < n; i++) {
        uint32_t v;
        p = get32(p, &v);
        if (v >= n || seen[v])
            *ok = 0;
        else
            seen[v] = 1;
        out[i] = (int)v;
    }
    return p;
}

/* The position an image holds, checked against the loader before any of it is used. */
typedef struct {
    uint32_t B, T, shuffle, seed, nshards;
    uint64_t ntok, nsamples, max_samples, epoch, shard_pos, pos, last;
    const unsigned char *rng, *order, *perm; /* order NULL: version 1 (one shard, identity) */
} image_t;

static int parse_image(const tsr_gpt2_loader_t *ld, const unsigned char *p, size_t bytes, image_t *im)
{
    const char *path = ld->pattern;
    uint32_t magic, version;
    if (bytes < 8) {
        tsr_log(TSR_LOG_ERROR, "loader state for %s: truncated (%zu bytes)", path, bytes);
        return TSR_EFORMAT;
    }
    p = get32(p, &magic);
    p = get32(p, &version);
    if (magic != STATE_MAGIC || (version != 1 && version != STATE_VERSION)) {
        tsr_log(TSR_LOG_ERROR, "loader state for %s: bad magic or version (%#x, %u)", path, magic, version);
        return TSR_EFORMAT;
    }
    memset(im, 0, sizeof *im);
    if (bytes < (version == 1 ? STATE1_FIXED : STATE_FIXED)) {
        tsr_log(TSR_LOG_ERROR, "loader state for %s: truncated (%zu bytes)", path, bytes);
        return TSR_EFORMAT;
    }
    p = get32(p, &im->B);
    p = get32(p, &im->T);
    p = get32(p, &im->shuffle);
    p = get32(p, &im->seed);
    im->nshards = 1;
    if (version != 1)
        p = get32(p, &im->nshards);
    p = get64(p, &im->ntok);
    p = get64(p, &im->nsamples);
    im->max_samples = im->nsamples;
    if (version != 1)
        p = get64(p, &im->max_samples);
    p = get64(p, &im->epoch);
    if (version != 1)
        p = get64(p, &im->shard_pos);
    p = get64(p, &im->pos);
    p = get64(p, &im->last);
    im->rng = p;
    p += TSR_GPT2_RNG_PACKED_BYTES;
    im->order = version == 1 ? NULL : p;
    im->perm = version == 1 ? p : p + 4 * (size_t)im->nshards;
    if (im->B != (uint32_t)ld->B || im->T != (uint32_t)ld->T || im->shuffle != (uint32_t)ld->shuffle ||
        im->nshards != (uint32_t)ld->nshards || im->ntok != ld->ntok || im->nsamples != ld->nsamples ||
        im->max_samples != ld->max_samples) {
        tsr_log(TSR_LOG_ERROR,
                "loader state for %s: saved for B %u T %u, %u shard(s) of %llu tokens, shuffle %u; this loader has "
                "B %d T %d, %d shard(s) of %zu tokens, shuffle %d",
                path, im->B, im->T, im->nshards, (unsigned long long)im->ntok, im->shuffle, ld->B, ld->T,
                ld->nshards, ld->ntok, ld->shuffle);
        return TSR_EFORMAT;
    }
    size_t want = (version == 1 ? STATE1_FIXED : STATE_FIXED + 4 * (size_t)ld->nshards) + 4 * ld->max_samples;
    if (bytes != want) {
        tsr_log(TSR_LOG_ERROR, "loader state for %s: %zu bytes, expected %zu", path, bytes, want);
        return TSR_EFORMAT;
    }
    if (im->shard_pos >= im->nshards || (im->last != UINT64_MAX && im->last >= im->nsamples)) {
        tsr_log(TSR_LOG_ERROR, "loader state for %s: position out of range (%u shards, %llu samples)", path,
                im->nshards, (unsigned long long)im->nsamples);
        return TSR_EFORMAT;
    }
    return 0;
}

int tsr_gpt2_loader_restore_state(tsr_gpt2_loader_t *ld, const void *buf, size_t bytes)
{
    if (!ld || !ld->perm || !buf) {
        tsr_log(TSR_LOG_ERROR, "tsr_gpt2_loader_restore_state: loader not open or NULL buffer");
        return TSR_EINVAL;
    }
    image_t im;
    int rc = parse_image(ld, buf, bytes, &im);
    if (rc)
        return rc;
    const char *path = ld->pattern;
    tsr_gpt2_rng_t rng;
    if (tsr_gpt2_rng_unpack(&rng, im.rng) != 0) {
        tsr_log(TSR_LOG_ERROR, "loader state for %s: bad RNG state", path);
        return TSR_EFORMAT;
    }
    int *order = malloc((size_t)ld->nshards * sizeof(int)), *perm = malloc(ld->max_samples * sizeof(int));
    size_t seen_n = ld->max_samples > (size_t)ld->nshards ? ld->max_samples : (size_t)ld->nshards;
    unsigned char *seen = malloc(seen_n);
    if (!order || !perm || !seen) {
        free(order);
        free(perm);
        free(seen);
        tsr_log(TSR_LOG_ERROR, "loader state for %s: out of memory", path);
        return TSR_ENOMEM;
    }
    int ok = 1;
    if (im.order)
        get_permutation(im.order, (size_t)ld->nshards, order, seen, &ok);
    else
        order[0] = 0;
    size_t n = ok ? ld->shards[order[im.shard_pos]].nsamples : 0;
    if (ok && im.pos > n)
        ok = 0;
    if (ok)
        get_permutation(im.perm, n, perm, seen, &ok);
    free(seen);
    if (!ok) {
        tsr_log(TSR_LOG_ERROR, "loader state for %s: the shard or sample order is not a permutation, or the "
                "position is out of range", path);
        free(order);
        free(perm);
        return TSR_EFORMAT;
    }
    free(ld->shard_order);
    free(ld->perm);
    ld->shard_order = order;
    ld->perm = perm;
    ld->rng = rng;
    ld->seed = im.seed;
    ld->epoch = im.epoch;
    ld->shard_pos = (int)im.shard_pos;
    ld->pos = (size_t)im.pos;
    ld->last_sample = im.last == UINT64_MAX ? SIZE_MAX : (size_t)im.last;
    return 0;
}
