/* Tiled AdamW: one task per parameter tile. */
#include <math.h>
#include "tsr_adamw.h"
#include "tsr_runtime_adamw.h"
#include "internal/tsr_operands.h"

/* The hyper-parameters checked, and the step's bias corrections. */
static int adamw_step(const char *fn, float lr, float beta1, float beta2, float eps, float weight_decay, int step,
                      tsr_adamw_step_t *s)
{
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
    *s = (tsr_adamw_step_t){ lr, beta1, beta2, eps, weight_decay, 1.0f - powf(beta1, t), 1.0f - powf(beta2, t) };
    return TSR_SUCCESS;
}

int tsr_adamw(tsr_desc_t *params, tsr_desc_t *grads, tsr_desc_t *m, tsr_desc_t *v, float lr, float beta1,
              float beta2, float eps, float weight_decay, int step)
{
    const char *fn = "tsr_adamw";
    const tsr_operand_t ops[] = { { "params", params, TSR_OP_OUT, TSR_FLOAT32, TSR_LIKE(params), NULL },
                                  { "grads", grads, TSR_OP_IN, TSR_FLOAT32, TSR_LIKE(params), NULL },
                                  { "m", m, TSR_OP_OUT, TSR_FLOAT32, TSR_LIKE(params), NULL },
                                  { "v", v, TSR_OP_OUT, TSR_FLOAT32, TSR_LIKE(params), NULL } };
    tsr_adamw_step_t s;
    int rc = tsr_check_operands(fn, ops, 4);
    if (!rc)
        rc = adamw_step(fn, lr, beta1, beta2, eps, weight_decay, step, &s);
    if (rc)
        return rc;
    for (int bi = 0; bi < params->bt && !rc; bi++)
        for (int i = 0; i < params->mt && !rc; i++)
            for (int j = 0; j < params->nt && !rc; j++)
                rc = tsr_insert_adamw(tsr_tile(params, bi, i, j), tsr_tile(grads, bi, i, j), tsr_tile(m, bi, i, j),
                                      tsr_tile(v, bi, i, j), &s);
    tsr_desc_flush(grads);
    return rc;
}

int tsr_adamw_master(tsr_desc_t *master, tsr_desc_t *grads, tsr_desc_t *m, tsr_desc_t *v, tsr_desc_t *params,
                     float lr, float beta1, float beta2, float eps, float weight_decay, int step)
{
    const char *fn = "tsr_adamw_master";
    const tsr_operand_t ops[] = { { "master", master, TSR_OP_OUT, TSR_FLOAT32, TSR_LIKE(master), NULL },
                                  { "grads", grads, TSR_OP_IN, TSR_FLOAT32, TSR_LIKE(master), NULL },
                                  { "m", m, TSR_OP_OUT, TSR_FLOAT32, TSR_LIKE(master), NULL },
                                  { "v", v, TSR_OP_OUT, TSR_FLOAT32, TSR_LIKE(master), NULL },
                                  { "params", params, TSR_OP_OUT, TSR_FLOAT32, TSR_LIKE(master), NULL } };
    tsr_adamw_step_t s;
    int rc = tsr_check_operands(fn, ops, 5);
    if (rc)
        return rc;
    /* the table takes bf16 for float32; the state itself must be float32 */
    const tsr_desc_t *state[3] = { master, m, v };
    for (int k = 0; k < 3; k++)
        if (state[k]->dtype != TSR_FLOAT32) {
            tsr_log(TSR_LOG_ERROR, "%s: %s is %s, expected float32 (the master state)", fn, ops[k == 0 ? 0 : k + 1].name,
                    tsr_dtype_name(state[k]->dtype));
            return TSR_EDTYPE;
        }
    if ((rc = adamw_step(fn, lr, beta1, beta2, eps, weight_decay, step, &s)))
        return rc;
    for (int bi = 0; bi < master->bt && !rc; bi++)
        for (int i = 0; i < master->mt && !rc; i++)
            for (int j = 0; j < master->nt && !rc; j++)
                rc = tsr_insert_adamw_master(tsr_tile(master, bi, i, j), tsr_tile(grads, bi, i, j),
                                             tsr_tile(m, bi, i, j), tsr_tile(v, bi, i, j), tsr_tile(params, bi, i, j),
                                             &s);
    tsr_desc_flush(grads);
    return rc;
}
