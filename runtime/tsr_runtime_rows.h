/* Tessera runtime layer (internal): the row ops of compute/tsr_compute_rows.h
 * as tasks, one op per entry of TSR_ROW_OPS. */
#ifndef TSR_RUNTIME_ROWS_H
#define TSR_RUNTIME_ROWS_H
#include "tsr_runtime.h"
#include "tsr_compute_rows.h"

/* One task of row op `op` on tiles: its inputs (read), then its outputs
 * (written), in the order of its TSR_ROW_OPS entry; the first input holds
 * the tokens. eps: the op's constant. */
int tsr_insert_row(tsr_row_op_t op, const tsr_tile_t *tiles, float eps);
#endif
