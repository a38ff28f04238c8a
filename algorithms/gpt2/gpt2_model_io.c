/* GPT-2 configuration, parameter layout, llm.c checkpoints, atomic writes. */
#define _XOPEN_SOURCE 700 /* POSIX 2008 + realpath */
#include "gpt2_model_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tsr_core.h"
#include "tsr_files.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the llm.c file formats are little-endian; this reader assumes a little-endian host"
#endif

static const char *const param_names[TSR_GPT2_NUM_PARAM_TENSORS] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};

const char *tsr_gpt2_param_name(int tensor)
{
    if (tensor < 0 || tensor >= TSR_GPT2_NUM_PARAM_TENSORS)
        return "?";
    return param_names[tensor];
}

/* ---- presets -------------------------------------------------------------- */

static const struct {
    const char *name;
    tsr_gpt2_config_t cfg; /* maxT, V, Vp, L, NH, C */
} presets[] = {
    /* GPT-2 small, medium, large and XL: llm.c's d12, d24, d36, d48 (train_gpt2.cu) */
    {"124M", {1024, 50257, 50304, 12, 12, 768}},
    {"350M", {1024, 50257, 50304, 24, 16, 1024}},
    {"774M", {1024, 50257, 50304, 36, 20, 1280}},
    {"1558M", {1024, 50257, 50304, 48, 25, 1600}},
    {"d2", {64, 50257, 50304, 2, 4, 128}},
    {"micro", {32, 500, 512, 2, 4, 64}},
};
#define NPRESETS (sizeof presets / sizeof presets[0])

const char *tsr_gpt2_preset_names(void) { return "124M, 350M, 774M, 1558M, d2, micro"; }

int tsr_gpt2_config_preset(const char *name, tsr_gpt2_config_t *cfg)
{
    if (!name || !cfg) {
        tsr_log(TSR_LOG_ERROR, "tsr_gpt2_config_preset: NULL argument");
        return TSR_EINVAL;
    }
    for (size_t i = 0; i < NPRESETS; i++) {
        if (strcmp(name, presets[i].name) == 0) {
            *cfg = presets[i].cfg;
            return 0;
        }
    }
    tsr_log(TSR_LOG_ERROR, "unknown GPT-2 preset '%s' (known: %s)", name, tsr_gpt2_preset_names());
    return TSR_EINVAL;
}

/* ---- sizes ------------------------------------------------------------------ */

/* Upper bound on the parameter count we accept: keeps every size_t product
 * and the file size far from overflow (2^40 floats = 4 TiB). */
#define MAX_PARAMS_LOG2 40

int tsr_gpt2_config_validate(const tsr_gpt2_config_t *cfg, const char *what)
{
    const char *w = what ? what : "GPT-2 config";
    if (!cfg) {
        tsr_log(TSR_LOG_ERROR, "%s: NULL config", w);
        return TSR_EINVAL;
    }
    const struct {
        const char *name;
        int v;
    } dims[] = {{"maxT", cfg->maxT}, {"V", cfg->V}, {"Vp", cfg->Vp},
                {"L", cfg->L},       {"NH", cfg->NH}, {"C", cfg->C}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        if (dims[i].v <= 0) {
            tsr_log(TSR_LOG_ERROR, "%s: %s = %d must be positive", w, dims[i].name, dims[i].v);
            return TSR_EINVAL;
        }
    }
    if (cfg->C % cfg->NH != 0) {
        tsr_log(TSR_LOG_ERROR, "%s: channels C = %d is not a multiple of the number of heads NH = %d",
                w, cfg->C, cfg->NH);
        return TSR_EINVAL;
    }
    if (cfg->Vp < cfg->V) {
        tsr_log(TSR_LOG_ERROR, "%s: padded vocabulary Vp = %d is smaller than the vocabulary V = %d",
                w, cfg->Vp, cfg->V);
        return TSR_EINVAL;
    }
    /* estimate in double first: every product below then fits in 64 bits */
    double C = cfg->C, L = cfg->L;
    double est = (double)cfg->Vp * C + (double)cfg->maxT * C + L * (12.0 * C * C + 13.0 * C) + 2.0 * C;
    if (est > (double)((uint64_t)1 << MAX_PARAMS_LOG2) || est * 4.0 > (double)SIZE_MAX) {
        tsr_log(TSR_LOG_ERROR, "%s: implausibly large model (%.3g parameters; maxT %d V %d Vp %d L %d NH %d C %d)",
                w, est, cfg->maxT, cfg->V, cfg->Vp, cfg->L, cfg->NH, cfg->C);
        return TSR_EINVAL;
    }
    return 0;
}

void tsr_gpt2_param_sizes(const tsr_gpt2_config_t *cfg, size_t sizes[TSR_GPT2_NUM_PARAM_TENSORS])
{
    size_t Vp = (size_t)cfg->Vp, C = (size_t)cfg->C, maxT = (size_t)cfg->maxT, L = (size_t)cfg->L;
    sizes[TSR_GPT2_WTE] = Vp * C;
    sizes[TSR_GPT2_WPE] = maxT * C;
    sizes[TSR_GPT2_LN1W] = L * C;
    sizes[TSR_GPT2_LN1B] = L * C;
    sizes[TSR_GPT2_QKVW] = L * 3 * C * C;
    sizes[TSR_GPT2_QKVB] = L * 3 * C;
    sizes[TSR_GPT2_ATTPROJW] = L * C * C;
    sizes[TSR_GPT2_ATTPROJB] = L * C;
    sizes[TSR_GPT2_LN2W] = L * C;
    sizes[TSR_GPT2_LN2B] = L * C;
    sizes[TSR_GPT2_FCW] = L * 4 * C * C;
    sizes[TSR_GPT2_FCB] = L * 4 * C;
    sizes[TSR_GPT2_FCPROJW] = L * C * 4 * C;
    sizes[TSR_GPT2_FCPROJB] = L * C;
    sizes[TSR_GPT2_LNFW] = C;
    sizes[TSR_GPT2_LNFB] = C;
}

void tsr_gpt2_param_offsets(const tsr_gpt2_config_t *cfg, size_t offsets[TSR_GPT2_NUM_PARAM_TENSORS])
{
    size_t sizes[TSR_GPT2_NUM_PARAM_TENSORS];
    tsr_gpt2_param_sizes(cfg, sizes);
    size_t off = 0;
    for (int i = 0; i < TSR_GPT2_NUM_PARAM_TENSORS; i++) {
        offsets[i] = off;
        off += sizes[i];
    }
}

size_t tsr_gpt2_num_params(const tsr_gpt2_config_t *cfg)
{
    size_t sizes[TSR_GPT2_NUM_PARAM_TENSORS];
    tsr_gpt2_param_sizes(cfg, sizes);
    size_t n = 0;
    for (int i = 0; i < TSR_GPT2_NUM_PARAM_TENSORS; i++)
        n += sizes[i];
    return n;
}

/* ---- file helpers ------------------------------------------------------------ */

int tsr_gpt2_file_open(const char *path, const char *kind, FILE **f, int64_t *size)
{
    *f = NULL;
    if (!path) {
        tsr_log(TSR_LOG_ERROR, "%s: no file name given", kind);
        return TSR_EINVAL;
    }
    /* non-blocking open: a FIFO without a writer must not hang the open */
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    FILE *fp = NULL;
    if (fd >= 0 && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0)
        fp = fdopen(fd, "rb");
    if (!fp) {
        tsr_log(TSR_LOG_ERROR, "%s %s: cannot open: %s", kind, path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return TSR_EIO;
    }
    struct stat st;
    if (fstat(fileno(fp), &st) != 0) {
        tsr_log(TSR_LOG_ERROR, "%s %s: cannot stat: %s", kind, path, strerror(errno));
        fclose(fp);
        return TSR_EIO;
    }
    if (!S_ISREG(st.st_mode)) {
        tsr_log(TSR_LOG_ERROR, "%s %s: not a regular file", kind, path);
        fclose(fp);
        return TSR_EIO;
    }
    *f = fp;
    if (size)
        *size = (int64_t)st.st_size;
    return 0;
}

int tsr_gpt2_file_id(const char *path, tsr_gpt2_file_id_t *id)
{
    id->size = -1;
    id->hash = 0;
    id->err = 0;
    int fd = path ? open(path, O_RDONLY | O_NONBLOCK) : -1;
    int err = !path ? EINVAL : fd < 0 ? errno : 0;
    struct stat st;
    if (fd >= 0)
        err = fstat(fd, &st) != 0 ? errno : !S_ISREG(st.st_mode) ? EINVAL : 0;
    if (err) {
        id->err = err;
        if (fd >= 0)
            close(fd);
        return TSR_EIO;
    }
    enum { PIECE = 1 << 20 };
    unsigned char *buf = malloc(PIECE);
    uint64_t h = 14695981039346656037ull;
    int64_t total = 0;
    ssize_t n = 0;
    while (buf && (n = read(fd, buf, PIECE)) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        for (ssize_t i = 0; i < n; i++)
            h = (h ^ buf[i]) * 1099511628211ull;
        total += n;
    }
    err = !buf ? ENOMEM : n < 0 ? errno : 0;
    free(buf);
    close(fd);
    if (err) {
        id->err = err;
        return TSR_EIO;
    }
    id->size = total;
    id->hash = h;
    return 0;
}

int tsr_gpt2_file_read(FILE *f, void *buf, size_t bytes, const char *path, const char *kind,
                       const char *what)
{
    size_t got = fread(buf, 1, bytes, f);
    if (got == bytes)
        return 0;
    if (ferror(f)) {
        tsr_log(TSR_LOG_ERROR, "%s %s: read error in %s: %s", kind, path, what, strerror(errno));
        return TSR_EIO;
    }
    tsr_log(TSR_LOG_ERROR, "%s %s: truncated: %s needs %zu bytes, only %zu left", kind, path,
            what, bytes, got);
    return TSR_EFORMAT;
}

int tsr_gpt2_file_read_body(FILE *f, size_t bytes, size_t n, const char *units, const char *path, const char *kind,
                            const char *what, void **buf)
{
    *buf = NULL;
    void *b = malloc(bytes);
    if (!b) {
        tsr_log(TSR_LOG_ERROR, "%s %s: out of memory for %zu %s", kind, path, n, units);
        fclose(f);
        return TSR_ENOMEM;
    }
    int rc = tsr_gpt2_file_read(f, b, bytes, path, kind, what);
    fclose(f);
    if (rc) {
        free(b);
        return rc;
    }
    *buf = b;
    return 0;
}

int tsr_gpt2_output_clear(void *out, size_t size, const char *fn)
{
    if (!out) {
        tsr_log(TSR_LOG_ERROR, "%s: NULL output", fn);
        return TSR_EINVAL;
    }
    memset(out, 0, size);
    return 0;
}

int tsr_gpt2_read_header(FILE *f, int64_t fsize, const char *path, const char *kind, int32_t magic,
                         const char *is_not, int32_t h[TSR_GPT2_HEADER_INTS])
{
    if (fsize < TSR_GPT2_HEADER_BYTES) {
        tsr_log(TSR_LOG_ERROR, "%s %s: truncated: %lld bytes, shorter than the %d-byte header", kind, path,
                (long long)fsize, TSR_GPT2_HEADER_BYTES);
        return TSR_EFORMAT;
    }
    int rc = tsr_gpt2_file_read(f, h, TSR_GPT2_HEADER_BYTES, path, kind, "the header");
    if (rc)
        return rc;
    if (h[0] != magic) {
        tsr_log(TSR_LOG_ERROR, "%s %s: bad magic %d (expected %d)%s%s", kind, path, h[0], magic,
                is_not ? ": not " : "", is_not ? is_not : "");
        return TSR_EFORMAT;
    }
    return TSR_SUCCESS;
}

int tsr_gpt2_file_open_header(const char *path, const char *kind, int32_t magic, const char *is_not, FILE **f,
                              int64_t *size, int32_t h[TSR_GPT2_HEADER_INTS])
{
    int64_t fsize;
    int rc = tsr_gpt2_file_open(path, kind, f, &fsize);
    if (rc)
        return rc;
    rc = tsr_gpt2_read_header(*f, fsize, path, kind, magic, is_not, h);
    if (rc) {
        fclose(*f);
        *f = NULL;
        return rc;
    }
    *size = fsize;
    return TSR_SUCCESS;
}

/* ---- checkpoints -------------------------------------------------------------- */

static const char *const CKPT = "checkpoint";

/* The header's config, checked against the file's size. */
static int checkpoint_config(const int32_t *h, int64_t fsize, const char *path, tsr_gpt2_config_t *cfg)
{
    if (h[1] != TSR_GPT2_CHECKPOINT_VERSION) {
        if (h[1] == 5)
            tsr_log(TSR_LOG_ERROR, "%s %s: version 5 (bf16) is not supported, only version 3 (fp32)",
                    CKPT, path);
        else
            tsr_log(TSR_LOG_ERROR, "%s %s: bad version %d (expected %d: fp32, padded vocabulary)",
                    CKPT, path, h[1], TSR_GPT2_CHECKPOINT_VERSION);
        return TSR_EFORMAT;
    }
    tsr_gpt2_config_t c = {.maxT = h[2], .V = h[3], .L = h[4], .NH = h[5], .C = h[6], .Vp = h[7]};
    char what[512];
    snprintf(what, sizeof what, "%s %s: inconsistent header", CKPT, path);
    if (tsr_gpt2_config_validate(&c, what) != 0)
        return TSR_EFORMAT;
    size_t np = tsr_gpt2_num_params(&c);
    int64_t expect = TSR_GPT2_HEADER_BYTES + (int64_t)np * 4;
    if (fsize != expect) {
        tsr_log(TSR_LOG_ERROR,
                "%s %s: %s: %lld bytes, but the header (maxT %d V %d Vp %d L %d NH %d C %d: %zu "
                "parameters) needs %lld",
                CKPT, path, fsize < expect ? "truncated" : "trailing bytes after the parameters",
                (long long)fsize, c.maxT, c.V, c.Vp, c.L, c.NH, c.C, np, (long long)expect);
        return TSR_EFORMAT;
    }
    *cfg = c;
    return 0;
}

/* The checkpoint open after its header, its config in *cfg; or an error
 * with the file closed. */
static int checkpoint_open(const char *path, FILE **f, tsr_gpt2_config_t *cfg)
{
    int32_t h[TSR_GPT2_HEADER_INTS];
    int64_t fsize;
    int rc = tsr_gpt2_file_open_header(path, CKPT, TSR_GPT2_CHECKPOINT_MAGIC, "an llm.c GPT-2 checkpoint", f,
                                       &fsize, h);
    if (rc)
        return rc;
    rc = checkpoint_config(h, fsize, path, cfg);
    if (rc) {
        fclose(*f);
        *f = NULL;
    }
    return rc;
}

int tsr_gpt2_checkpoint_read_config(const char *path, tsr_gpt2_config_t *cfg)
{
    if (!cfg) {
        tsr_log(TSR_LOG_ERROR, "tsr_gpt2_checkpoint_read_config: NULL config");
        return TSR_EINVAL;
    }
    FILE *f;
    int rc = checkpoint_open(path, &f, cfg);
    if (!rc)
        fclose(f);
    return rc;
}

int tsr_gpt2_checkpoint_read(const char *path, tsr_gpt2_config_t *cfg, float **params)
{
    if (!cfg || !params) {
        tsr_log(TSR_LOG_ERROR, "tsr_gpt2_checkpoint_read: NULL argument");
        return TSR_EINVAL;
    }
    *params = NULL;
    FILE *f;
    tsr_gpt2_config_t c;
    int rc = checkpoint_open(path, &f, &c);
    if (rc)
        return rc;
    size_t np = tsr_gpt2_num_params(&c);
    void *p;
    rc = tsr_gpt2_file_read_body(f, np * sizeof(float), np, "parameters", path, CKPT, "the parameters", &p);
    if (rc)
        return rc;
    *cfg = c;
    *params = p;
    return 0;
}

int tsr_gpt2_checkpoint_write(const char *path, const tsr_gpt2_config_t *cfg, const float *params)
{
    if (!path || !cfg || !params) {
        tsr_log(TSR_LOG_ERROR, "tsr_gpt2_checkpoint_write: NULL argument");
        return TSR_EINVAL;
    }
    char what[512];
    snprintf(what, sizeof what, "%s %s", CKPT, path);
    int rc = tsr_gpt2_config_validate(cfg, what);
    if (rc)
        return rc;
    int32_t h[TSR_GPT2_HEADER_INTS];
    memset(h, 0, sizeof h);
    h[0] = TSR_GPT2_CHECKPOINT_MAGIC;
    h[1] = TSR_GPT2_CHECKPOINT_VERSION;
    h[2] = cfg->maxT;
    h[3] = cfg->V;
    h[4] = cfg->L;
    h[5] = cfg->NH;
    h[6] = cfg->C;
    h[7] = cfg->Vp;
    tsr_atomic_file_t af;
    rc = tsr_atomic_begin(&af, path);
    if (rc)
        return rc;
    tsr_atomic_write(&af, h, sizeof h);
    tsr_atomic_write(&af, params, tsr_gpt2_num_params(cfg) * sizeof(float));
    return tsr_atomic_commit(&af);
}
