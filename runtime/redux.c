/* The STARPU_REDUX accumulation protocol every algorithm shares: a tile that
 * sums contributions gets its initial value on its owner, every rank adds
 * into its own copy, and the partial sums are combined across ranks at the
 * end (tsr_runtime.h). */
#include "tsr_runtime.h"
#include "tsr_runtime_linear.h"
#include "tsr_context.h"

/* c's value before the contributions, written on its owner. */
static int redux_initial_value(tsr_tile_t c, double beta, const tsr_tile_t *bias)
{
    if (bias)
        return tsr_insert_bias_fill(*bias, c);
    if (beta == 0.0)
        return tsr_insert_zero(c);
    if (beta != 1.0)
        return tsr_insert_scale(beta, c);
    return TSR_SUCCESS;
}

int tsr_redux_start(tsr_tile_t c, double beta, const tsr_tile_t *bias)
{
    int rc = tsr_tile_enable_redux(c);
    if (!rc)
        rc = redux_initial_value(c, beta, bias);
    /* after the owner's write: a rank that sees that task drops its cached
     * copy of c, which would also drop a partial sum started before it */
    if (!rc && tsr_size() > 1 && !tsr_tile_is_local(c.d, c.bi, c.i, c.j))
        rc = tsr_insert_local_zero(c);
    return rc;
}

void tsr_redux_finish(tsr_desc_t *d)
{
    if (tsr_size() < 2)
        return;
    for (int bi = 0; bi < d->bt; bi++)
        for (int i = 0; i < d->mt; i++)
            for (int j = 0; j < d->nt; j++)
                tsr_tile_mpi_redux(tsr_tile(d, bi, i, j));
}
