/* Tiled softmax cross-entropy on the LM-head output: per-token softmax
 * statistics reduced across vocabulary tiles, the loss picked from the
 * target's tile, and the backward written in place into the logits. */
#include <math.h>
#include <stdlib.h>
#include "tsr_crossentropy.h"
#include "tsr_runtime_crossentropy.h"
#include "internal/tsr_operands.h"

/* backward: the gradient is written into the logits, the statistics are read */
static int check_crossentropy(const char *fn, const tsr_desc_t *logits, const tsr_desc_t *stats,
                              const tsr_desc_t *losses, const int *targets, int V, int backward)
{
    if (!targets) {
        tsr_log(TSR_LOG_ERROR, "%s: targets is NULL", fn);
        return TSR_EINVAL;
    }
    /* per-token statistics (2 rows) and losses (1 row) in one tile row, tiled like the logits' tokens */
    tsr_op_role_t logits_role = backward ? TSR_OP_OUT : TSR_OP_IN, stats_role = backward ? TSR_OP_IN : TSR_OP_OUT;
    const tsr_operand_t ops[] = {
        { "logits", logits, logits_role, TSR_FLOAT32, TSR_2D(TSR_ANY, TSR_ANY), NULL },
        { "stats", stats, stats_role, TSR_FLOAT32, TSR_2D(TSR_FIXED(2), TSR_COLS(logits)), NULL },
        { "losses", losses, TSR_OP_OUT_OPT, TSR_FLOAT32, TSR_2D(TSR_FIXED(1), TSR_COLS(logits)), NULL },
    };
    int rc = tsr_check_operands(fn, ops, 3);
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
static int submit_stats(tsr_desc_t *logits, tsr_desc_t *stats, int j, int V, tsr_reduction_t accum)
{
    int nv = (V + logits->mb - 1) / logits->mb;
    tsr_tile_t st = tsr_tile(stats, 0, 0, j);
    int rc = TSR_SUCCESS;
    if (accum == TSR_REDUCTION_REDUX) {
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
        if (accum == TSR_REDUCTION_REDUX)
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
                             tsr_reduction_t accum)
{
    const char *fn = "tsr_crossentropy_forward";
    int rc = check_crossentropy(fn, logits, stats, losses, targets, V, 0);
    rc = rc ? rc : tsr_check_accum(fn, accum);
    if (rc)
        return rc;
    for (int j = 0; j < logits->nt && !rc; j++)
        rc = submit_stats(logits, stats, j, V, accum);
    if (!rc && accum == TSR_REDUCTION_REDUX)
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
    const tsr_operand_t ops[] = { { "losses", losses, TSR_OP_IN, TSR_FLOAT32, TSR_2D(TSR_FIXED(1), TSR_ANY), NULL } };
    if (!mean) {
        tsr_log(TSR_LOG_ERROR, "tsr_crossentropy_mean: the result pointer is NULL");
        return TSR_EINVAL;
    }
    int rc = tsr_check_operands("tsr_crossentropy_mean", ops, 1);
    if (rc)
        return rc;
    double sum;
    rc = tsr_desc_sum(losses, &sum); /* the same bits on every rank */
    if (!rc)
        *mean = (float)(sum / losses->n);
    return rc;
}

int tsr_crossentropy_backward(tsr_desc_t *logits, tsr_desc_t *stats, const int *targets, int V, float dloss)
{
    const char *fn = "tsr_crossentropy_backward";
    int rc = check_crossentropy(fn, logits, stats, NULL, targets, V, 1);
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
