/* The row ops on a CPU worker: the op's function over the tile's tokens,
 * with the staged outputs (tsr_compute_rows.h) in malloc'd scratch. */
#include <stdlib.h>
#include "tsr_compute_rows.h"

static void run_tokens(tsr_row_op_t op, int n, const tsr_rows_t *r)
{
    switch (op) {
#define TSR_ROW_CASE(name, nin, nout, nsum, flops)                                                           \
    case TSR_ROW_##name:                                                                                     \
        for (int t = 0; t < n; t++)                                                                          \
            tsr_row_##name(r, t);                                                                            \
        break;
        TSR_ROW_OPS(TSR_ROW_CASE)
#undef TSR_ROW_CASE
    default:
        break;
    }
}

/* Output k's staged values (in s, n tokens) into its tile. */
static void unstage(tsr_row_op_t op, const tsr_rows_t *r, int k, const float *s, int n)
{
    tsr_row_info_t info = tsr_row_info(op);
    if (k >= info.nout - info.nsum)
        for (int i = 0; i < r->mout[k]; i++)
            tsr_row_sum_staged(r, k, s, n, i);
    else
        for (int t = 0; t < n; t++)
            tsr_row_add_staged(r, k, s, t);
}

int tsr_cpu_rows(tsr_row_op_t op, int n, const tsr_rows_t *r)
{
    if ((int)op < 0 || op >= TSR_NROW_OPS || n < 0 || r->m < 1)
        return TSR_EINVAL;
    if (n == 0)
        return TSR_SUCCESS;
    int nout = tsr_row_info(op).nout, rc = TSR_SUCCESS;
    tsr_rows_t staged = *r; /* what the function writes: the staged outputs' scratch */
    float *scratch[TSR_ROW_MAX_OUT] = { NULL };
    for (int k = 0; k < nout && !rc; k++) {
        if (!tsr_row_staged(op, r, k))
            continue;
        scratch[k] = malloc((size_t)r->mout[k] * n * sizeof(float));
        staged.out[k] = scratch[k];
        staged.ldout[k] = r->mout[k];
        rc = scratch[k] ? TSR_SUCCESS : TSR_ENOMEM;
    }
    if (!rc) {
        run_tokens(op, n, &staged);
        for (int k = 0; k < nout; k++)
            if (scratch[k])
                unstage(op, r, k, scratch[k], n);
    }
    for (int k = 0; k < nout; k++)
        free(scratch[k]);
    return rc;
}
