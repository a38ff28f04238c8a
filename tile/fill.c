/* Seeded random fill and norms. */
#include <math.h>
#include <stdlib.h>
#include "tsr_tile_internal.h"
#include "tsr_context.h"
#include "tsr_bf16.h"

/* Element k of a tile or buffer of d's element type, as a double. */
static double element(const tsr_desc_t *d, const void *p, size_t k)
{
    if (d->dtype == TSR_FLOAT64)
        return ((const double *)p)[k];
    if (d->dtype == TSR_BFLOAT16)
        return tsr_bf16_to_float(((const tsr_bf16_t *)p)[k]);
    return ((const float *)p)[k];
}

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

double tsr_random_value(uint64_t seed, int bi, int r, int c)
{
    uint64_t h = splitmix64(seed);
    h = splitmix64(h ^ (uint64_t)(uint32_t)bi);
    h = splitmix64(h ^ ((uint64_t)(uint32_t)r << 32 | (uint32_t)c));
    return (double)(h >> 11) * 0x1.0p-53 - 0.5;
}

static int fill_tile(tsr_desc_t *d, int bi, int i, int j, void *tile, void *arg)
{
    uint64_t seed = *(uint64_t *)arg;
    int depth = tsr_tile_depth(d, bi), rows = tsr_tile_rows(d, i), cols = tsr_tile_cols(d, j);
    size_t k = 0;
    for (int z = 0; z < depth; z++)
        for (int c = 0; c < cols; c++)
            for (int r = 0; r < rows; r++, k++) {
                double v = tsr_random_value(seed, bi * d->bb + z, i * d->mb + r, j * d->nb + c);
                if (d->dtype == TSR_FLOAT64)
                    ((double *)tile)[k] = v;
                else if (d->dtype == TSR_BFLOAT16)
                    ((tsr_bf16_t *)tile)[k] = tsr_float_to_bf16((float)v);
                else
                    ((float *)tile)[k] = (float)v;
            }
    return TSR_SUCCESS;
}

int tsr_desc_fill_random(tsr_desc_t *d, uint64_t seed)
{
    if (!d)
        return TSR_EINVAL;
    if (!tsr_ctx.initialized)
        return TSR_ENOTINIT;
    tsr_desc_flush(d);
    return tsr_foreach_local_tile(d, STARPU_W, fill_tile, &seed);
}

struct norm_acc { tsr_norm_t which; double value; };

static int norm_tile(tsr_desc_t *d, int bi, int i, int j, void *tile, void *arg)
{
    struct norm_acc *acc = arg;
    size_t n = (size_t)tsr_tile_depth(d, bi) * tsr_tile_rows(d, i) * tsr_tile_cols(d, j);
    for (size_t k = 0; k < n; k++) {
        double v = element(d, tile, k);
        if (isnan(v) || isnan(acc->value))
            acc->value = NAN; /* a NaN anywhere makes the norm NaN */
        else if (acc->which == TSR_NORM_MAX)
            acc->value = fmax(acc->value, fabs(v));
        else
            acc->value += v * v;
    }
    return TSR_SUCCESS;
}

int tsr_desc_norm(tsr_desc_t *d, tsr_norm_t which, double *value)
{
    if (!d || !value || (which != TSR_NORM_MAX && which != TSR_NORM_FRO))
        return TSR_EINVAL;
    if (!tsr_ctx.initialized)
        return TSR_ENOTINIT;
    struct norm_acc acc = { which, 0.0 };
    int rc = tsr_foreach_local_tile(d, STARPU_R, norm_tile, &acc);
    if (rc)
        return rc;
    double total = acc.value;
    rc = tsr_allreduce_double(&total, which == TSR_NORM_MAX ? TSR_REDUCE_MAX : TSR_REDUCE_SUM);
    if (rc)
        return rc;
    *value = which == TSR_NORM_FRO ? sqrt(total) : total;
    return TSR_SUCCESS;
}

/* The sum of one tile's elements in storage order, into the tile's slot. */
static int sum_tile(tsr_desc_t *d, int bi, int i, int j, void *tile, void *arg)
{
    double *sums = arg, s = 0.0;
    size_t n = (size_t)tsr_tile_depth(d, bi) * tsr_tile_rows(d, i) * tsr_tile_cols(d, j);
    for (size_t k = 0; k < n; k++)
        s += element(d, tile, k);
    sums[tsr_tile_index(d, bi, i, j)] = s;
    return TSR_SUCCESS;
}

/* Each rank sums its own tiles; one reduction adds each tile's sum to zeros
 * (exact: a tile has one owner), and the tiles' sums are added in tile
 * order, so every rank count gives the same bits. */
int tsr_desc_sum(tsr_desc_t *d, double *sum)
{
    if (!d || !sum)
        return TSR_EINVAL;
    if (!tsr_ctx.initialized)
        return TSR_ENOTINIT;
    if (tsr_desc_refuse_user(d))
        return TSR_EINVAL;
    int ntiles = tsr_desc_ntiles(d); /* at most 1e8: the descriptor's limit */
    double *sums = calloc((size_t)ntiles + 1, sizeof *sums); /* and, last, the ranks that failed */
    if (tsr_any(!sums)) {
        free(sums);
        return TSR_ENOMEM;
    }
    sums[ntiles] = tsr_foreach_local_tile(d, STARPU_R, sum_tile, sums) != TSR_SUCCESS;
    int rc = tsr_allreduce_doubles(sums, ntiles + 1, TSR_REDUCE_SUM);
    if (!rc && sums[ntiles] > 0)
        rc = TSR_ENOMEM; /* a rank could not read one of its tiles */
    double s = 0.0;
    for (int k = 0; k < ntiles && !rc; k++)
        s += sums[k];
    free(sums);
    if (!rc)
        *sum = s;
    return rc;
}
