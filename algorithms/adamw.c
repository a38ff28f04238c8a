/* Tiled AdamW: one task per parameter tile. */
#include <math.h>
#include "tsr_adamw.h"
#include "tsr_runtime_misc.h"
#include "internal/tsr_operands.h"

int tsr_adamw(tsr_desc_t *params, tsr_desc_t *grads, tsr_desc_t *m, tsr_desc_t *v, float lr, float beta1,
              float beta2, float eps, float weight_decay, int step)
{
    const char *fn = "tsr_adamw";
    const tsr_operand_t ops[] = { { "params", params, TSR_OP_OUT, TSR_FLOAT32, TSR_LIKE(params), NULL },
                                  { "grads", grads, TSR_OP_IN, TSR_FLOAT32, TSR_LIKE(params), NULL },
                                  { "m", m, TSR_OP_OUT, TSR_FLOAT32, TSR_LIKE(params), NULL },
                                  { "v", v, TSR_OP_OUT, TSR_FLOAT32, TSR_LIKE(params), NULL } };
    int rc = tsr_check_operands(fn, ops, 4);
    if (rc)
        return rc;
    /* written so that NaN hyper-parameters fail too */
    if (!(lr >= 0.0f) || !(eps >= 0.0f) || !(weight_decay >= 0.0f) || !(beta1 >= 0.0f && beta1 < 1.0f) ||
        !(beta2 >= 0.0f && beta2 < 1.0f) || !isfinite(lr) || !isfinite(eps) || !isfinite(weight_decay) ||
        step < 0) {
        tsr_log(TSR_LOG_ERROR, "%s: bad hyper-parameters lr %g beta1 %g beta2 %g eps %g weight decay %g step %d", fn,
                lr, beta1, beta2, eps, weight_decay, step);
        return TSR_EINVAL;
    }
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
