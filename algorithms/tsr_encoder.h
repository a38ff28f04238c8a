/* Tessera: encoder algorithms (float32 transformer layers; see docs/transformer.md). */
#ifndef TSR_ENCODER_H
#define TSR_ENCODER_H
#include "tsr_tile.h"
#include "tsr_algorithms.h"

#ifdef __cplusplus
extern "C" {
#endif

/* GPT-2 token + position embedding (llm.c encoder_forward):
 *   out[:, b*T + t] = wte[:, tokens[b*T + t]] + wpe[:, t]
 * out: C x B*T activations; wte: llm.c's (Vp, C) token embedding, a C x Vp
 * descriptor; wpe: llm.c's (maxT, C), a C x maxT descriptor. tokens: B*T ids
 * in [0, Vp), the same array on every rank. Requirements: float32 2D
 * descriptors (TSR_EDTYPE / TSR_ESHAPE), the same channel tile size mb
 * (TSR_ETILE), T <= maxT (TSR_ESHAPE), out distinct from wte and wpe. */
int tsr_encoder_forward(tsr_desc_t *out, tsr_desc_t *wte, tsr_desc_t *wpe, const int *tokens, int B, int T);

/* Backward: the columns of dout are scatter-added into the rows of the
 * embeddings they came from:
 *   dwte[:, tokens[bt]] += dout[:, bt],  dwpe[:, bt % T] += dout[:, bt].
 * mode TSR_ACCUMULATE: added to the gradients already there; TSR_OVERWRITE: the
 * gradients are overwritten (columns no token hits become 0), so no separate zero pass is
 * needed. accum: TSR_REDUCTION_ORDERED chains the tasks writing a gradient tile
 * in token order (the result is the sequential sum, bit for bit);
 * TSR_REDUCTION_REDUX runs the contributions of the token tiles to a gradient
 * tile in parallel (in any order; under MPI on the gradient tile's owner,
 * like the ordered chain, so the call does not wait). dwte or dwpe may be
 * NULL (not computed), not both. dwte may be a view of some of the
 * gradient's columns (tsr_desc_view): only the tokens in them are added
 * there, so the gradient can be made a few tiles at a time.
 * Same requirements as the forward (no view in it; wpe and dwpe whole). */
int tsr_encoder_backward(tsr_desc_t *dwte, tsr_desc_t *dwpe, tsr_desc_t *dout, const int *tokens, int B, int T,
                         tsr_write_t mode, tsr_reduction_t accum);

#ifdef __cplusplus
}
#endif
#endif
