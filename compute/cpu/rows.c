/* The row ops on a CPU worker: the op's function over the tile's tokens. */
#include "tsr_compute_rows.h"

void tsr_cpu_rows(tsr_row_op_t op, int n, const tsr_rows_t *r)
{
    switch (op) {
#define TSR_ROW_CASE(name, nin, nout, flops)                                                                 \
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
