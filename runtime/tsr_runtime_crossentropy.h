/* Tessera runtime layer (internal): codelets and insert helpers of
 * the softmax cross-entropy. */
#ifndef TSR_RUNTIME_CROSSENTROPY_H
#define TSR_RUNTIME_CROSSENTROPY_H
#include "tsr_runtime.h"
#include "tsr_compute_crossentropy.h"

/* Softmax statistics (2 x cols tile) of the first `rows` rows of a logits
 * tile: smode STARPU_W sets them, STARPU_RW / STARPU_REDUX merge them in
 * (REDUX needs tsr_tile_enable_softmax_redux on the stats tile). */
int tsr_insert_softmax_stats(tsr_tile_t stats, enum starpu_data_access_mode smode, tsr_tile_t logits,
                             int rows, int exec_rank);
/* Give a statistics tile the zero-init + merge reduction methods (a zero
 * statistic is the identity of the merge, so tsr_insert_local_zero starts
 * a partial statistic on another rank). */
int tsr_tile_enable_softmax_redux(tsr_tile_t stats);

/* loss[0, ref.col] = log(sum) + max - logits[ref.src][ref.row, ref.col] for
 * each ref; lmode STARPU_W or STARPU_RW (other columns are left alone). At most
 * TSR_MAX_TASK_TILES - 2 logits tiles. */
int tsr_insert_crossentropy_loss(tsr_tile_t loss, enum starpu_data_access_mode lmode, tsr_tile_t stats,
                                 const tsr_tile_t *logits, int nlogits, const tsr_loss_ref_t *refs,
                                 int nrefs);
/* In place: logits = (softmax - onehot) * dloss over global rows < V of the
 * tile (its first row is global row row0), 0 on rows >= V; target_row[c] is
 * column c's target row inside the tile or -1 (one entry per tile column). */
int tsr_insert_crossentropy_backward(tsr_tile_t logits, tsr_tile_t stats, int row0, int V,
                                     const int *target_row, float dloss);
#endif
