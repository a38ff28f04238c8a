/* Tiled AdamW: one task per parameter tile. */
#include <math.h>
#include "tsr_adamw.h"
#include "tsr_runtime_misc.h"

static int same_layout(const tsr_desc_t *a, const tsr_desc_t *b)
{
    return a->b == b->b && a->m == b->m && a->n == b->n;
}

static int same_tiles(const tsr_desc_t *a, const tsr_desc_t *b)
{
    return a->bb == b->bb && a->mb == b->mb && a->nb == b->nb;
}

static int check_adamw(const tsr_desc_t *p, const tsr_desc_t *g, const tsr_desc_t *m, const tsr_desc_t *v,
                       float lr, float beta1, float beta2, float eps, float weight_decay, int step)
{
    const char *fn = "tsr_adamw";
    if (!p || !g || !m || !v) {
        tsr_log(TSR_LOG_ERROR, "%s: NULL descriptor", fn);
        return TSR_EINVAL;
    }
    if (!tsr_initialized())
        return TSR_ENOTINIT;
    if (p == g || p == m || p == v || g == m || g == v || m == v) {
        tsr_log(TSR_LOG_ERROR, "%s: params, grads, m and v must be distinct descriptors", fn);
        return TSR_EINVAL;
    }
    /* written so that NaN hyper-parameters fail too */
    if (!(lr >= 0.0f) || !(eps >= 0.0f) || !(weight_decay >= 0.0f) || !(beta1 >= 0.0f && beta1 < 1.0f) ||
        !(beta2 >= 0.0f && beta2 < 1.0f) || !isfinite(lr) || !isfinite(eps) || !isfinite(weight_decay) ||
        step < 0) {
        tsr_log(TSR_LOG_ERROR, "%s: bad hyper-parameters lr %g beta1 %g beta2 %g eps %g weight decay %g step %d", fn,
                lr, beta1, beta2, eps, weight_decay, step);
        return TSR_EINVAL;
    }
    if (p->dtype != TSR_FLOAT32 || g->dtype != TSR_FLOAT32 || m->dtype != TSR_FLOAT32 || v->dtype != TSR_FLOAT32) {
        tsr_log(TSR_LOG_ERROR, "%s: params, grads, m and v must be float32", fn);
        return TSR_EDTYPE;
    }
    if (!same_layout(p, g) || !same_layout(p, m) || !same_layout(p, v)) {
        tsr_log(TSR_LOG_ERROR, "%s: params (%d x %d x %d), grads, m and v must have the same shape", fn, p->b, p->m,
                p->n);
        return TSR_ESHAPE;
    }
    if (!same_tiles(p, g) || !same_tiles(p, m) || !same_tiles(p, v)) {
        tsr_log(TSR_LOG_ERROR, "%s: params (tiles %d x %d x %d), grads, m and v must have the same tiles", fn, p->bb,
                p->mb, p->nb);
        return TSR_ETILE;
    }
    return TSR_SUCCESS;
}

int tsr_adamw(tsr_desc_t *params, tsr_desc_t *grads, tsr_desc_t *m, tsr_desc_t *v, float lr, float beta1,
              float beta2, float eps, float weight_decay, int step)
{
    int rc = check_adamw(params, grads, m, v, lr, beta1, beta2, eps, weight_decay, step);
    if (rc)
        return rc;
    /* bias corrections as llm.c computes them (float) */
    float t = (float)step + 1.0f;
    tsr_adamw_step_t s = { lr, beta1, beta2, eps, weight_decay, 1.0f - powf(beta1, t), 1.0f - powf(beta2, t) };
    for (int bi = 0; bi < params->bt && !rc; bi++)
        for (int i = 0; i < params->mt && !rc; i++)
            for (int j = 0; j < params->nt && !rc; j++)
                rc = tsr_insert_adamw(tsr_tile(params, bi, i, j), tsr_tile(grads, bi, i, j), tsr_tile(m, bi, i, j),
                                      tsr_tile(v, bi, i, j), &s);
    tsr_desc_flush(grads);
    return rc;
}
