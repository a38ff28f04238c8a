/* Tessera: adamw algorithms (float32 transformer layers; see docs/transformer.md). */
#ifndef TSR_ADAMW_H
#define TSR_ADAMW_H
#include "tsr_tile.h"
#include "tsr_algorithms.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One AdamW step (llm.c's gpt2_update) on every tile of a parameter tensor,
 * with t = step + 1 (step counts from 0):
 *   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
 *   mhat = m / (1 - beta1^t);     vhat = v / (1 - beta2^t)
 *   params -= lr (mhat / (sqrt(vhat) + eps) + weight_decay params)
 * params, grads, m, v: float32 descriptors (2D or 3D) of identical shape
 * and tiling (TSR_EDTYPE / TSR_ESHAPE / TSR_ETILE), m and v zero before the
 * first step. Hyper-parameters: lr, eps, weight_decay >= 0, beta1, beta2 in
 * [0, 1), step >= 0 (TSR_EINVAL). Each tile's task runs on its params
 * tile's owner. */
int tsr_adamw(tsr_desc_t *params, tsr_desc_t *grads, tsr_desc_t *m, tsr_desc_t *v, float lr, float beta1,
              float beta2, float eps, float weight_decay, int step);
/* Mixed precision (llm.c's bf16 trainer): the same step on float32 master
 * weights with float32 m and v, from grads that may be bf16, and then params
 * = master rounded to params' type (bf16: the copy the forward and backward
 * read). Every operand of identical shape and tiling; master, m, v float32,
 * grads and params both float32 or both bf16 (TSR_EDTYPE otherwise). */
int tsr_adamw_master(tsr_desc_t *master, tsr_desc_t *grads, tsr_desc_t *m, tsr_desc_t *v, tsr_desc_t *params,
                     float lr, float beta1, float beta2, float eps, float weight_decay, int step);

#ifdef __cplusplus
}
#endif
#endif
