/* Tessera: crossentropy algorithms (float32 transformer layers; see docs/transformer.md). */
#ifndef TSR_CROSSENTROPY_H
#define TSR_CROSSENTROPY_H
#include "tsr_tile.h"
#include "tsr_algorithms.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Softmax cross-entropy on the LM-head output (llm.c crossentropy_forward
 * with the softmax fused in). logits: Vp x B*T (vocabulary rows, token
 * columns); the softmax runs over the first V rows only (rows V..Vp-1 are
 * padding). stats: 2 x B*T, one tile row (mb >= 2), the logits' token
 * tiling: per token (max, sum exp(logit - max)) over the V rows, reduced
 * across vocabulary tiles as an ordered chain or with STARPU_REDUX (accum;
 * under MPI REDUX contributions run on the logits tiles' owners and the call
 * waits for its tasks). losses: 1 x B*T with the same token tiling, gets
 * -log softmax[target] per token; NULL to compute the statistics only.
 * targets: B*T ids in [0, V) (else TSR_EINVAL, nothing submitted), the same
 * array on every rank. Everything float32 2D (TSR_EDTYPE / TSR_ESHAPE /
 * TSR_ETILE). Only the statistics are stored: no probability tensor. */
int tsr_crossentropy_forward(tsr_desc_t *logits, tsr_desc_t *stats, tsr_desc_t *losses, const int *targets, int V,
                             tsr_reduction_t accum);

/* Mean of the 1 x n losses descriptor (the loss of the step, llm.c's
 * mean_loss); every rank gets it. Collective and synchronous. */
int tsr_crossentropy_mean(tsr_desc_t *losses, float *mean);

/* Backward, in place: logits becomes dlogits = (softmax - onehot(target)) *
 * dloss on rows < V and 0 on the padded rows, from the statistics of
 * tsr_crossentropy_forward (the probabilities are recomputed, never stored).
 * dloss is the gradient of the loss of each token: 0 means the mean loss's,
 * 1 / (B*T). Same requirements as the forward. */
int tsr_crossentropy_backward(tsr_desc_t *logits, tsr_desc_t *stats, const int *targets, int V, float dloss);

#ifdef __cplusplus
}
#endif
#endif
