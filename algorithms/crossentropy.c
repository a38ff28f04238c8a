/* Tiled softmax cross-entropy on the LM-head output: per-token softmax
 * statistics reduced across vocabulary tiles, the loss picked from the
 * target's tile, and the backward written in place into the logits. */
#include <math.h>
#include <stdlib.h>
#include "tsr_crossentropy.h"
#include "tsr_runtime_misc.h"

static int check_2d_f32(const char *fn, const char *name, const tsr_desc_t *d)
{
    if (d->dtype != TSR_FLOAT32) {
        tsr_log(TSR_LOG_ERROR, "%s: %s must be float32, not %s", fn, name, tsr_dtype_name(d->dtype));
        return TSR_EDTYPE;
    }
    if (d->b != 1) {
        tsr_log(TSR_LOG_ERROR, "%s: %s must be a 2D descriptor (batch %d)", fn, name, d->b);
        return TSR_ESHAPE;
    }
    return TSR_SUCCESS;
}

/* A per-token row descriptor (stats: rows = 2, losses: rows = 1) tiled like
 * the logits' tokens, in one tile row. */
static int check_token_rows(const char *fn, const char *name, const tsr_desc_t *d, int rows, const tsr_desc_t *logits)
{
    int rc = check_2d_f32(fn, name, d);
    if (rc)
        return rc;
    if (d->m != rows || d->n != logits->n) {
        tsr_log(TSR_LOG_ERROR, "%s: %s is %d x %d, expected %d x %d", fn, name, d->m, d->n, rows, logits->n);
        return TSR_ESHAPE;
    }
    if (d->mt != 1 || d->nb != logits->nb) {
        tsr_log(TSR_LOG_ERROR, "%s: %s needs one tile row and the logits' token tiles (%d), has tiles %d x %d", fn,
                name, logits->nb, d->mb, d->nb);
        return TSR_ETILE;
    }
    return TSR_SUCCESS;
}

static int check_crossentropy(const char *fn, const tsr_desc_t *logits, const tsr_desc_t *stats,
                              const tsr_desc_t *losses, const int *targets, int V)
{
    if (!logits || !stats || !targets) {
        tsr_log(TSR_LOG_ERROR, "%s: NULL logits, stats or targets", fn);
        return TSR_EINVAL;
    }
    if (!tsr_initialized())
        return TSR_ENOTINIT;
    if (logits == stats || logits == losses || stats == losses) {
        tsr_log(TSR_LOG_ERROR, "%s: logits, stats and losses must be distinct descriptors", fn);
        return TSR_EINVAL;
    }
    int rc = check_2d_f32(fn, "logits", logits);
    if (!rc)
        rc = check_token_rows(fn, "stats", stats, 2, logits);
    if (!rc && losses)
        rc = check_token_rows(fn, "losses", losses, 1, logits);
    if (rc)
        return rc;
    if (V < 1 || V > logits->m) {
        tsr_log(TSR_LOG_ERROR, "%s: vocabulary size %d is not in [1, %d] (the logits' rows)", fn, V, logits->m);
        return TSR_EINVAL;
    }
    for (int k = 0; k < logits->n; k++)
        if (targets[k] < 0 || targets[k] >= V) {
            tsr_log(TSR_LOG_ERROR, "%s: target %d of token %d is not in [0, %d)", fn, targets[k], k, V);
            return TSR_EINVAL;
        }
    return TSR_SUCCESS;
}

/* Rows of vocabulary tile v that belong to the softmax (< V). */
static int valid_rows(const tsr_desc_t *logits, int v, int V)
{
    int rows = tsr_tile_rows(logits, v), rest = V - v * logits->mb;
    return rest < rows ? rest : rows;
}

/* Softmax statistics of token tile j over the vocabulary tiles holding rows < V. */
static int submit_stats(tsr_desc_t *logits, tsr_desc_t *stats, int j, int V, tsr_accum_t accum)
{
    int nv = (V + logits->mb - 1) / logits->mb;
    tsr_tile_t st = tsr_tile(stats, 0, 0, j);
    int rc = TSR_SUCCESS;
    if (accum == TSR_ACCUM_REDUX) {
        /* STARPU_REDUX merges into the tile's current value: start from the
         * empty statistic (zero), here and in every other rank's partial copy */
        rc = tsr_tile_enable_softmax_redux(st);
        if (!rc)
            rc = tsr_insert_zero(st);
        if (!rc && tsr_size() > 1 && !tsr_tile_is_local(stats, 0, 0, j))
            rc = tsr_insert_local_zero(st);
    }
    for (int v = 0; v < nv && !rc; v++) {
        tsr_tile_t x = tsr_tile(logits, 0, v, j);
        if (accum == TSR_ACCUM_REDUX)
            rc = tsr_insert_softmax_stats(st, STARPU_REDUX, x, valid_rows(logits, v, V),
                                          tsr_tile_owner(logits, 0, v, j));
        else
            rc = tsr_insert_softmax_stats(st, v == 0 ? STARPU_W : STARPU_RW, x, valid_rows(logits, v, V), -1);
    }
    return rc;
}

static int cmp_ref(const void *a, const void *b)
{
    const tsr_loss_ref_t *x = a, *y = b;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    return (x->col > y->col) - (x->col < y->col);
}

/* Losses of token tile j: each token reads its target's logit from the
 * vocabulary tile holding it; tasks take at most TSR_MAX_TASK_TILES - 2 of
 * those tiles and write disjoint columns of the loss tile. */
static int submit_losses(tsr_desc_t *logits, tsr_desc_t *stats, tsr_desc_t *losses, const int *targets, int j,
                         tsr_loss_ref_t *refs, tsr_loss_ref_t *task_refs)
{
    int cols = tsr_tile_cols(logits, j);
    for (int c = 0; c < cols; c++) {
        int tgt = targets[j * logits->nb + c];
        refs[c] = (tsr_loss_ref_t){ c, tgt / logits->mb, tgt % logits->mb }; /* src: vocabulary tile for now */
    }
    qsort(refs, cols, sizeof *refs, cmp_ref);
    int first = 1;
    for (int k = 0; k < cols;) {
        tsr_tile_t x[TSR_MAX_TASK_TILES];
        int nx = 0, n = 0;
        for (; k < cols; k++) {
            if (nx == 0 || refs[k].src != x[nx - 1].i) {
                if (nx == TSR_MAX_TASK_TILES - 2)
                    break;
                x[nx++] = tsr_tile(logits, 0, refs[k].src, j);
            }
            task_refs[n++] = (tsr_loss_ref_t){ refs[k].col, nx - 1, refs[k].row };
        }
        int rc = tsr_insert_crossentropy_loss(tsr_tile(losses, 0, 0, j), first ? STARPU_W : STARPU_RW,
                                              tsr_tile(stats, 0, 0, j), x, nx, task_refs, n);
        if (rc)
            return rc;
        first = 0;
    }
    return TSR_SUCCESS;
}

int tsr_crossentropy_forward(tsr_desc_t *logits, tsr_desc_t *stats, tsr_desc_t *losses, const int *targets, int V,
                             tsr_accum_t accum)
{
    const char *fn = "tsr_crossentropy_forward";
    int rc = check_crossentropy(fn, logits, stats, losses, targets, V);
    if (rc)
        return rc;
    if (accum != TSR_ACCUM_ORDERED && accum != TSR_ACCUM_REDUX) {
        tsr_log(TSR_LOG_ERROR, "%s: accum must be ordered or redux (got %d)", fn, accum);
        return TSR_EINVAL;
    }
    for (int j = 0; j < logits->nt && !rc; j++)
        rc = submit_stats(logits, stats, j, V, accum);
    if (!rc && accum == TSR_ACCUM_REDUX)
        tsr_redux_finish(stats);
    if (!rc && losses) {
        tsr_loss_ref_t *refs = malloc((size_t)logits->nb * sizeof *refs);
        tsr_loss_ref_t *task_refs = malloc((size_t)logits->nb * sizeof *task_refs);
        rc = refs && task_refs ? TSR_SUCCESS : TSR_ENOMEM;
        for (int j = 0; j < logits->nt && !rc; j++)
            rc = submit_losses(logits, stats, losses, targets, j, refs, task_refs);
        free(refs);
        free(task_refs);
    }
    tsr_desc_flush(logits);
    tsr_desc_flush(stats);
    return rc;
}

int tsr_crossentropy_mean(tsr_desc_t *losses, float *mean)
{
    const char *fn = "tsr_crossentropy_mean";
    if (!losses || !mean) {
        tsr_log(TSR_LOG_ERROR, "%s: NULL losses or result", fn);
        return TSR_EINVAL;
    }
    if (!tsr_initialized())
        return TSR_ENOTINIT;
    int rc = check_2d_f32(fn, "losses", losses);
    if (rc)
        return rc;
    if (losses->m != 1) {
        tsr_log(TSR_LOG_ERROR, "%s: losses must have one row (has %d)", fn, losses->m);
        return TSR_ESHAPE;
    }
    double sum;
    rc = tsr_desc_sum(losses, &sum); /* the same bits on every rank */
    if (!rc)
        *mean = (float)(sum / losses->n);
    return rc;
}

int tsr_crossentropy_backward(tsr_desc_t *logits, tsr_desc_t *stats, const int *targets, int V, float dloss)
{
    const char *fn = "tsr_crossentropy_backward";
    int rc = check_crossentropy(fn, logits, stats, NULL, targets, V);
    if (rc)
        return rc;
    if (!isfinite(dloss)) {
        tsr_log(TSR_LOG_ERROR, "%s: dloss %g is not finite", fn, dloss);
        return TSR_EINVAL;
    }
    float dl = dloss == 0.0f ? 1.0f / logits->n : dloss;
    int *target_row = malloc((size_t)logits->nb * sizeof *target_row);
    if (!target_row)
        return TSR_ENOMEM;
    for (int j = 0; j < logits->nt && !rc; j++)
        for (int v = 0; v < logits->mt && !rc; v++) {
            int row0 = v * logits->mb, rows = tsr_tile_rows(logits, v);
            if (row0 >= V) { /* padding only: no probability, no gradient */
                rc = tsr_insert_zero(tsr_tile(logits, 0, v, j));
                continue;
            }
            for (int c = 0; c < tsr_tile_cols(logits, j); c++) {
                int tgt = targets[j * logits->nb + c];
                target_row[c] = tgt >= row0 && tgt < row0 + rows ? tgt - row0 : -1;
            }
            rc = tsr_insert_crossentropy_backward(tsr_tile(logits, 0, v, j), tsr_tile(stats, 0, 0, j), row0, V,
                                                  target_row, dl);
        }
    free(target_row);
    tsr_desc_flush(stats);
    return rc;
}
