/* The row-op kit's tiled call: one task per token tile, the summed outputs
 * reduced over the token tiles (algorithms/internal/tsr_rows.h). */
#include "internal/tsr_rows.h"
#include "tsr_runtime_rows.h"

/* Operand d's tile for token tile j: a per-feature vector has one. */
static tsr_tile_t token_tile(tsr_desc_t *d, int j) { return tsr_tile(d, 0, 0, j < d->nt ? j : 0); }

/* The access mode of output k in token tile j's task: a per-token output is
 * overwritten or added into; a summed one is added into by every task (under
 * REDUX, or in a chain that the first task starts when it overwrites). */
static enum starpu_data_access_mode output_mode(int summed, tsr_write_t write, tsr_reduction_t reduction, int j)
{
    if (summed && reduction == TSR_REDUCTION_REDUX)
        return STARPU_REDUX;
    if (write == TSR_OVERWRITE && (!summed || j == 0))
        return STARPU_W;
    return STARPU_RW;
}

/* Each summed output's REDUX start: its value before the sum, kept or zeroed. */
static int start_sums(tsr_desc_t *const *sums, int nsum, const tsr_write_t *write)
{
    int rc = TSR_SUCCESS;
    for (int k = 0; k < nsum && !rc; k++)
        rc = tsr_redux_start(token_tile(sums[k], 0), write[k] == TSR_ACCUMULATE ? 1.0 : 0.0, NULL);
    return rc;
}

int tsr_rows_apply(const char *fn, tsr_row_op_t op, tsr_desc_t *const *operands, const tsr_write_t *writes,
                   tsr_reduction_t reduction, float eps)
{
    tsr_row_info_t info = tsr_row_info(op);
    tsr_desc_t *tokens = operands[0];
    if (tokens->mt != 1) {
        tsr_log(TSR_LOG_ERROR, "%s: the %d features must be in one tile (tiles of %d)", fn, tokens->m, tokens->mb);
        return TSR_ETILE;
    }
    tsr_write_t write[TSR_ROW_MAX_OUT] = { TSR_OVERWRITE };
    for (int k = 0; k < info.nout && writes; k++)
        write[k] = writes[k];
    int first_sum = info.nout - info.nsum, redux = info.nsum > 0 && reduction == TSR_REDUCTION_REDUX;
    tsr_desc_t *const *sums = operands + info.nin + first_sum;
    int rc = redux ? start_sums(sums, info.nsum, write + first_sum) : TSR_SUCCESS;
    for (int j = 0; j < tokens->nt && !rc; j++) {
        tsr_tile_t tiles[TSR_MAX_TASK_TILES];
        enum starpu_data_access_mode modes[TSR_ROW_MAX_OUT];
        for (int k = 0; k < info.nin + info.nout; k++)
            tiles[k] = token_tile(operands[k], j);
        for (int k = 0; k < info.nout; k++)
            modes[k] = output_mode(k >= first_sum, write[k], reduction, j);
        /* a REDUX contribution runs where its tokens live (the ranks' partial sums are combined) */
        int exec = redux ? tsr_tile_owner(tokens, 0, 0, j) : -1;
        rc = tsr_insert_row(op, tiles, modes, eps, exec);
    }
    for (int k = 0; k < info.nsum && !rc && redux; k++)
        tsr_redux_finish(sums[k]);
    for (int k = 0; k < info.nin; k++)
        tsr_desc_flush(operands[k]);
    return rc;
}
