/* Tessera runtime layer (internal): codelets and insert helpers of the
 * encoder, the softmax cross-entropy and AdamW (float32 tiles). */
#ifndef TSR_RUNTIME_MISC_H
#define TSR_RUNTIME_MISC_H
#include "tsr_runtime.h"
#include "tsr_compute_misc.h"

/* dst (mode STARPU_W, STARPU_RW or STARPU_REDUX) gets, for each map entry in
 * order, dst[:, dst_col] += src[map.src][:, src_col]; STARPU_W clears dst
 * first. At most TSR_MAX_TASK_TILES - 1
 * sources, all with dst's row count. exec_rank as in tsr_submit. */
int tsr_insert_gather_columns(tsr_tile_t dst, enum starpu_data_access_mode dmode, const tsr_tile_t *src, int nsrc,
                              const tsr_colmap_t *map, int nmap, int exec_rank);

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

/* One AdamW step on a parameter tile (p, m, v read-write, g read). */
int tsr_insert_adamw(tsr_tile_t p, tsr_tile_t g, tsr_tile_t m, tsr_tile_t v, const tsr_adamw_step_t *step);
/* AdamW on float32 master tile p (and m, v), then out = p rounded to out's
 * type (bf16): g and out may be bf16. */
int tsr_insert_adamw_master(tsr_tile_t p, tsr_tile_t g, tsr_tile_t m, tsr_tile_t v, tsr_tile_t out,
                            const tsr_adamw_step_t *step);
#endif
