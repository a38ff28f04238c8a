/* Tessera: layernorm algorithms (float32 transformer layers; see docs/transformer.md). */
#ifndef TSR_LAYERNORM_H
#define TSR_LAYERNORM_H
#include "tsr_tile.h"
#include "tsr_algorithms.h"

#ifdef __cplusplus
extern "C" {
#endif

/* LayerNorm over the C features of each token (llm.c layernorm_forward):
 *   mean = sum(x) / C, var = sum((x - mean)^2) / C (biased), rstd = 1 / sqrt(var + 1e-5),
 *   out = (x - mean) * rstd * weight + bias.
 * inp, out: C x BT (features x tokens), tiles mb x nb, same tiling;
 * weight, bias: C x 1, tiles mb along C; mean, rstd: 1 x BT (written), tiles
 * nb along tokens. Everything float32 (TSR_EDTYPE), 2D (TSR_ESHAPE), tile
 * sizes as above (TSR_ETILE), block-cyclic descriptors on one P x Q grid
 * (TSR_EDIST); out must differ from inp (TSR_EINVAL).
 * When C spans several feature tiles the per-token sums (of x, then of the
 * squared deviations) are accumulated across feature tiles into mean and
 * rstd before the normalising tasks: `accum` picks an ordered chain of tasks
 * or STARPU_REDUX (which, under MPI, makes the call wait for its tasks). */
int tsr_layernorm_forward(tsr_desc_t *inp, tsr_desc_t *weight, tsr_desc_t *bias, tsr_desc_t *out,
                          tsr_desc_t *mean, tsr_desc_t *rstd, tsr_reduction_t accum);

/* RMSNorm over the C features of each token: rstd = 1 / sqrt(mean(x^2) + eps),
 * out = x * rstd * weight. inp, out: C x BT, every feature in one tile
 * (mb >= C, else TSR_ETILE), tokens in tiles of nb; weight: C x 1; rstd:
 * 1 x BT (written), tiles nb along tokens. float32, 2D, on one process grid,
 * out distinct from inp; eps > 0 (TSR_EINVAL). */
int tsr_rmsnorm_forward(tsr_desc_t *inp, tsr_desc_t *weight, tsr_desc_t *out, tsr_desc_t *rstd, float eps);

/* RMSNorm backward, with xhat = inp * rstd (rstd: what the forward wrote):
 *   dinp    (+)= rstd * (weight * dout - xhat * mean_C(weight * dout * xhat)),
 *   dweight (+)= sum over tokens of dout * xhat,
 * where dinp_mode (dinp) and dweight_mode (dweight) say TSR_OVERWRITE (=) or
 * TSR_ACCUMULATE (+=, as llm.c does). `reduction` chooses how the token
 * tiles' contributions to dweight are added: an ordered chain or
 * STARPU_REDUX (which, under MPI, makes the call wait for its tasks).
 * dout, inp, dinp: C x BT like inp of the forward, every feature in one tile
 * (TSR_ETILE); weight, dweight: C x 1; rstd: 1 x BT. float32 (or bf16
 * throughout), 2D, on one process grid; dinp and dweight distinct from the
 * inputs and each other (TSR_EINVAL). */
int tsr_rmsnorm_backward(tsr_desc_t *dout, tsr_desc_t *inp, tsr_desc_t *weight, tsr_desc_t *rstd, tsr_desc_t *dinp,
                         tsr_desc_t *dweight, tsr_write_t dinp_mode, tsr_write_t dweight_mode,
                         tsr_reduction_t reduction);

/* LayerNorm backward (llm.c layernorm_backward), with norm = (x - mean) * rstd,
 * dnorm = weight * dout:
 *   dinp    (+)= rstd * (dnorm - mean_C(dnorm) - norm * mean_C(dnorm * norm)),
 *   dweight (+)= sum over tokens of norm * dout, dbias (+)= sum over tokens of dout,
 * where dinp_mode (dinp) and dparam_mode (dweight, dbias) say TSR_OVERWRITE (=) or
 * TSR_ACCUMULATE (+=, as llm.c does).
 * dout, inp, dinp: C x BT like inp of the forward; weight, dweight, dbias:
 * C x 1; mean, rstd: what the forward wrote. `accum` chooses how the
 * contributions of the token tiles to dweight/dbias (and, when C spans several
 * tiles, of the feature tiles to the per-token sums) are added: ordered
 * chains or STARPU_REDUX. When C spans several feature tiles, the per-token
 * sums need a workspace: `work` from tsr_layernorm_workspace_create (reusable);
 * with work NULL a temporary one is created and destroyed, which makes the
 * call wait for its tasks. Errors as for the forward; dinp must differ from
 * dout and inp, dweight from dbias (TSR_EINVAL). */
int tsr_layernorm_backward(tsr_desc_t *dout, tsr_desc_t *inp, tsr_desc_t *weight, tsr_desc_t *mean,
                           tsr_desc_t *rstd, tsr_desc_t *dinp, tsr_desc_t *dweight, tsr_desc_t *dbias,
                           tsr_write_t dinp_mode, tsr_write_t dparam_mode, tsr_reduction_t accum, tsr_desc_t *work);

/* The backward's workspace for the per-token sums: a float32 2 x BT descriptor
 * tiled and distributed like mean (1 x BT). Free it with tsr_desc_destroy.
 * Collective under MPI, like every descriptor creation. */
int tsr_layernorm_workspace_create(tsr_desc_t **work, const tsr_desc_t *mean);

/* Residual connection: out = a + b, tile by tile. a, b, out: same shape
 * (TSR_ESHAPE), tile sizes (TSR_ETILE) and element type (float32 or float64,
 * TSR_EDTYPE); out may be a or b (in-place add). */
int tsr_residual_forward(tsr_desc_t *a, tsr_desc_t *b, tsr_desc_t *out);

/* Residual backward: da (+)= dout, db (+)= dout (da_mode, db_mode:
 * TSR_ACCUMULATE +=, TSR_OVERWRITE =).
 * da or db may be NULL (that gradient is not wanted), not both; neither may
 * be dout, and da must differ from db (TSR_EINVAL). Same requirements on
 * shapes, tiles and types as the forward. */
int tsr_residual_backward(tsr_desc_t *dout, tsr_desc_t *da, tsr_desc_t *db, tsr_write_t da_mode, tsr_write_t db_mode);

/* sum = parts[0] + ... + parts[n - 1], tile by tile, by a tree of pairwise
 * additions (ceil(log2 n) deep) instead of a chain of n - 1. Under MPI each
 * tile's tree starts from a part held by the sum tile's owner and every other
 * addition runs where its first part lives, so the additions spread over the
 * ranks and each part's tile travels once. The parts are consumed: they hold
 * partial sums afterwards. n >= 2, distinct parts, sum none of them
 * (TSR_EINVAL); shapes, tiles and element type as tsr_residual_forward's. */
int tsr_sum_tree(tsr_desc_t *const *parts, int n, tsr_desc_t *sum);
/* The rank that receives tile (bi, i, j) of parts[r] in tsr_sum_tree's tree
 * (the one whose addition reads it), or -1 where that is its owner: with its
 * owner, the ranks that move the tile (to gate it: tsr_desc_fetch_after_some). */
int tsr_sum_tree_reader(tsr_desc_t *const *parts, int n, const tsr_desc_t *sum, int r, int bi, int i, int j);

#ifdef __cplusplus
}
#endif
#endif
