/* llm.c debug-state and losses files. */
#include "gpt2_debug_state.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tsr_core.h"

static const char *const DBG = "debug-state file";
static const char *const LOSSES = "losses file";

int tsr_gpt2_debug_state_read(const char *path, const tsr_gpt2_config_t *cfg,
                              tsr_gpt2_debug_state_t *st)
{
    if (!st) {
        tsr_log(TSR_LOG_ERROR, "tsr_gpt2_debug_state_read: NULL output");
        return TSR_EINVAL;
    }
    memset(st, 0, sizeof *st);
    int rc = tsr_gpt2_config_validate(cfg, "debug state: model config");
    if (rc)
        return rc;
    FILE *f;
    int64_t fsize;
    int32_t h[TSR_GPT2_HEADER_INTS];
    rc = tsr_gpt2_file_open_header(path, DBG, TSR_GPT2_DEBUG_STATE_MAGIC, NULL, &f, &fsize, h);
    if (rc)
        return rc;
    if (h[1] != TSR_GPT2_DEBUG_STATE_VERSION) {
        tsr_log(TSR_LOG_ERROR, "%s %s: bad version %d (expected %d)", DBG, path, h[1],
                TSR_GPT2_DEBUG_STATE_VERSION);
        fclose(f);
        return TSR_EFORMAT;
    }
    int B = h[2], T = h[3];
    if (B <= 0 || T <= 0 || T > cfg->maxT || B > (1 << 20)) {
        tsr_log(TSR_LOG_ERROR, "%s %s: inconsistent header: B = %d, T = %d (model maxT = %d)", DBG,
                path, B, T, cfg->maxT);
        fclose(f);
        return TSR_EFORMAT;
    }
    size_t bt = (size_t)B * (size_t)T, V = (size_t)cfg->V;
    size_t np = tsr_gpt2_num_params(cfg);
    int64_t expect = (int64_t)sizeof h + 8 * (int64_t)bt + 4 * (int64_t)(bt * V) + 4 + 4 * (int64_t)np;
    if (fsize != expect) {
        tsr_log(TSR_LOG_ERROR,
                "%s %s: %lld bytes, but B %d T %d with V %d and %zu parameters need %lld (%s)", DBG,
                path, (long long)fsize, B, T, cfg->V, np, (long long)expect,
                fsize < expect ? "truncated, or a different model" : "trailing bytes, or a different model");
        fclose(f);
        return TSR_EFORMAT;
    }
    st->x = malloc(bt * sizeof(int));
    st->y = malloc(bt * sizeof(int));
    st->logits = malloc(bt * V * sizeof(float));
    st->grads = malloc(np * sizeof(float));
    if (!st->x || !st->y || !st->logits || !st->grads) {
        tsr_log(TSR_LOG_ERROR, "%s %s: out of memory", DBG, path);
        rc = TSR_ENOMEM;
        goto fail;
    }
    _Static_assert(sizeof(int) == sizeof(int32_t), "the file stores int32 tokens");
    if ((rc = tsr_gpt2_file_read(f, st->x, bt * 4, path, DBG, "x")) ||
        (rc = tsr_gpt2_file_read(f, st->y, bt * 4, path, DBG, "y")) ||
        (rc = tsr_gpt2_file_read(f, st->logits, bt * V * 4, path, DBG, "the logits")) ||
        (rc = tsr_gpt2_file_read(f, &st->loss, 4, path, DBG, "the loss")) ||
        (rc = tsr_gpt2_file_read(f, st->grads, np * 4, path, DBG, "the gradients")))
        goto fail;
    for (size_t i = 0; i < bt; i++) {
        if (st->x[i] < 0 || st->x[i] >= cfg->V || st->y[i] < 0 || st->y[i] >= cfg->V) {
            tsr_log(TSR_LOG_ERROR, "%s %s: token %zu (x %d, y %d) out of range for V = %d", DBG,
                    path, i, st->x[i], st->y[i], cfg->V);
            rc = TSR_EFORMAT;
            goto fail;
        }
    }
    fclose(f);
    st->B = B;
    st->T = T;
    st->V = cfg->V;
    st->num_params = np;
    return 0;
fail:
    fclose(f);
    tsr_gpt2_debug_state_free(st);
    return rc;
}

void tsr_gpt2_debug_state_free(tsr_gpt2_debug_state_t *st)
{
    if (!st)
        return;
    free(st->x);
    free(st->y);
    free(st->logits);
    free(st->grads);
    memset(st, 0, sizeof *st);
}

int tsr_gpt2_losses_read(const char *path, double **losses, int *nsteps)
{
    if (!losses || !nsteps) {
        tsr_log(TSR_LOG_ERROR, "tsr_gpt2_losses_read: NULL output");
        return TSR_EINVAL;
    }
    *losses = NULL;
    *nsteps = 0;
    FILE *f;
    int rc = tsr_gpt2_file_open(path, LOSSES, &f, NULL);
    if (rc)
        return rc;
    double *v = NULL;
    int n = 0, cap = 0, lineno = 0;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\n' || *p == '\r' || *p == '\0' || *p == '#')
            continue;
        int step;
        double loss;
        char extra;
        if (sscanf(p, "%d %lf %c", &step, &loss, &extra) != 2) {
            tsr_log(TSR_LOG_ERROR, "%s %s: line %d is not \"step loss\"", LOSSES, path, lineno);
            rc = TSR_EFORMAT;
            break;
        }
        if (step != n) {
            tsr_log(TSR_LOG_ERROR, "%s %s: line %d has step %d, expected %d", LOSSES, path, lineno,
                    step, n);
            rc = TSR_EFORMAT;
            break;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            double *nv = realloc(v, (size_t)cap * sizeof(double));
            if (!nv) {
                tsr_log(TSR_LOG_ERROR, "%s %s: out of memory", LOSSES, path);
                rc = TSR_ENOMEM;
                break;
            }
            v = nv;
        }
        v[n++] = loss;
    }
    if (!rc && ferror(f)) {
        tsr_log(TSR_LOG_ERROR, "%s %s: read error: %s", LOSSES, path, strerror(errno));
        rc = TSR_EIO;
    }
    if (!rc && n == 0) {
        tsr_log(TSR_LOG_ERROR, "%s %s: no \"step loss\" line", LOSSES, path);
        rc = TSR_EFORMAT;
    }
    fclose(f);
    if (rc) {
        free(v);
        return rc;
    }
    *losses = v;
    *nsteps = n;
    return 0;
}
