/* The row-op kit's tiled call (algorithms/rows.c); not installed. An
 * algorithm whose op is a row op (compute/tsr_compute_rows.h) checks its
 * operands and hands them to tsr_rows_apply, which submits one task per
 * token tile and adds the summed outputs over the token tiles. */
#ifndef TSR_ROWS_H
#define TSR_ROWS_H
#include "tsr_algorithms.h"
#include "tsr_compute_rows.h"

/* Row op `op` on operands (inputs, then outputs, in the order of its
 * TSR_ROW_OPS entry): one task per token tile j, on tile (0, j) of each
 * operand, tile (0, 0) of a per-feature vector (C x 1, one token tile).
 * The first input holds the tokens; every feature of a token must be in
 * its one tile row (TSR_ETILE otherwise, logged as fn's). writes[k]: how
 * output k is written, TSR_OVERWRITE or TSR_ACCUMULATE (NULL: all
 * overwritten); a summed output is the sum over every token tile, added
 * as `reduction` says: an ordered chain of tasks or STARPU_REDUX (combined
 * across ranks under MPI, collectively). The inputs' remote copies are
 * dropped afterwards. */
int tsr_rows_apply(const char *fn, tsr_row_op_t op, tsr_desc_t *const *operands, const tsr_write_t *writes,
                   tsr_reduction_t reduction, float eps);
#endif
