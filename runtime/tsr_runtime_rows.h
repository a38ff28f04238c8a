/* Tessera runtime layer (internal): the row ops of compute/tsr_compute_rows.h
 * as tasks, one op per entry of TSR_ROW_OPS. */
#ifndef TSR_RUNTIME_ROWS_H
#define TSR_RUNTIME_ROWS_H
#include "tsr_runtime.h"
#include "tsr_compute_rows.h"

/* One task of row op `op` on tiles: its inputs (read), then its outputs, in
 * the order of its TSR_ROW_OPS entry; the first input holds the tokens.
 * out_modes: each output's access mode, STARPU_W (overwritten), STARPU_RW
 * or STARPU_REDUX (added into; a summed output gets the sum over the tile's
 * tokens added); NULL: all STARPU_W. eps: the op's constant; exec_rank as
 * tsr_submit's. */
int tsr_insert_row(tsr_row_op_t op, const tsr_tile_t *tiles, const enum starpu_data_access_mode *out_modes, float eps,
                   int exec_rank);
#endif
