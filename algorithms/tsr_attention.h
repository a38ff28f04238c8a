/* Tessera: attention algorithms (float32 transformer layers; see docs/transformer.md). */
#ifndef TSR_ATTENTION_H
#define TSR_ATTENTION_H
#include "tsr_tile.h"
#include "tsr_algorithms.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Flash-style causal self-attention, as llm.c's attention_forward /
 * attention_backward compute it per head: query t attends to keys t2 <= t
 * with weights softmax_t2(q_t . k_t2 / sqrt(hd)), out_t = sum_t2 w v_t2.
 *
 * Tensors (float32, 3D descriptors, b = B*NH with batch index b*NH + h):
 *   Q, out, dQ, dout   [B*NH, hd, T], tiles bb x (mb >= hd) x qb  (query tiles)
 *   K, V, dK, dV       [B*NH, hd, T], tiles bb x (mb >= hd) x kb  (key tiles)
 *   stats              [B*NH, 2, T],  tiles bb x (mb >= 2) x qb
 * The query tile qb and key tile kb are independent; the head dimension fits
 * in one tile; the batch tile bb (heads per task) is the same everywhere.
 * stats row 0 is the per-query logsumexp of the scaled scores (written by the
 * forward, read by the backward); row 1 is the backward's D_i = dout_i . out_i.
 *
 * One task per (head tile, query tile, key tile) pair with at least one
 * visible key: key tiles entirely after the query tile are skipped, the
 * diagonal ones are masked per element. The T x T score matrix is never
 * formed: on a CPU a task holds the scores of 64 queries (kb x 64, twice
 * that in the backward) as scratch and skips each 64-query chunk's masked
 * keys beyond its last query; on a GPU it holds a qb x kb block per head.
 *
 * Errors (nothing is submitted): TSR_EINVAL (NULL, an output that is also an
 * input or another output, bad mode / accum), TSR_ENOTINIT, TSR_EDTYPE
 * (not float32), TSR_ESHAPE, TSR_ETILE (tile sizes above not met), TSR_EDIST
 * (block-cyclic descriptors on different process grids). Asynchronous, like
 * the other algorithms (except REDUX under MPI, see tsr_reduction_t). */

/* Forward: out and stats (row 0) are overwritten. For each query tile the key
 * tiles are folded in order by an online softmax (an ordered chain of tasks
 * on the out and stats tiles; out always holds the normalised partial result,
 * so no final pass is needed). Q, K, V are only read. */
int tsr_attention_forward(tsr_desc_t *Q, tsr_desc_t *K, tsr_desc_t *V, tsr_desc_t *out, tsr_desc_t *stats);

/* Backward: from the forward's Q, K, V, out, stats and the output gradient
 * dout, computes dQ, dK, dV: mode TSR_OVERWRITE overwrites them,
 * TSR_ACCUMULATE adds to them (llm.c's +=). One preprocessing task per query tile writes D (stats row 1);
 * then each tile-pair task recomputes its scores from Q, K and the logsumexp
 * and contributes to dQ (summed over key tiles) and dK, dV (summed over query
 * tiles): TSR_REDUCTION_ORDERED chains them (RW), TSR_REDUCTION_REDUX lets them run
 * in parallel with STARPU_REDUX (per-worker copies of dQ, dK, dV tiles, so
 * more temporary memory). */
int tsr_attention_backward(tsr_desc_t *Q, tsr_desc_t *K, tsr_desc_t *V, tsr_desc_t *out, tsr_desc_t *dout,
                           tsr_desc_t *stats, tsr_desc_t *dQ, tsr_desc_t *dK, tsr_desc_t *dV, tsr_write_t mode,
                           tsr_reduction_t accum);

/* The forward on the caller's float32 arrays, in place (no copy; one
 * process, see tsr_desc_create_user): Q, K, V and out hold heads
 * independent heads (B * NH) of T tokens x hd, element (h, t, d) at
 * [(h * T + t) * hd + d] (PyTorch's contiguous (B, NH, T, hd)), the
 * descriptors [heads, hd, T] above with leading dimension hd. tile: the
 * query and key tile (tokens); one head per task. out may not overlap Q, K
 * or V (TSR_EINVAL). Synchronous: out holds the result on return. Under MPI
 * with several ranks the arrays of rank 0 are scattered and out gathered
 * (other ranks pass NULL). */
int tsr_attention_array(int heads, int T, int hd, const float *Q, const float *K, const float *V, float *out,
                        int tile);
/* The same in a sequence (tsr_algorithms.h): submitted, not waited for. A
 * GEMM of the sequence that wrote Q as an hd x (heads * T) matrix in tiles
 * of hd (or more) rows and tile columns, with heads 1, is the same view:
 * the attention follows it without a wait. */
int tsr_attention_array_async(tsr_sequence_t *seq, int heads, int T, int hd, const float *Q, const float *K,
                              const float *V, float *out, int tile);

/* Tiles for one pass (backward 0: the forward; 1: the backward with accum)
 * over heads heads of hd x T with bb heads per tile: the query and key tiles
 * among 64..1024 dividing T whose predicted time is the smallest, from each
 * candidate tile pair's task measured on the running workers (on first use,
 * cached in $TSR_CACHE_DIR/tile_models as the GEMM model) and a model of
 * the pass's schedule (chains, rounds, REDUX additions; see
 * algorithms/tiles/attention.c); when the pass is small enough (tensors of
 * at most 1 GiB, one process), as many tile pairs as 2 s of trials afford
 * (2 to 8) run as whole passes and the fastest wins (cached per pass).
 * tiles: qb, kvb (the query and key tiles) and predicted_seconds, the
 * model's time for the chosen tiles (mb, nb, kb 0). TSR_EINVAL, TSR_ENOTINIT,
 * or an error of the calibration. Collective under MPI (the calibration runs
 * on rank 0). */
int tsr_attention_auto_tiles(int T, int hd, int heads, int bb, int backward, tsr_reduction_t accum,
                             tsr_tiles_t *tiles);

#ifdef __cplusplus
}
#endif
#endif
