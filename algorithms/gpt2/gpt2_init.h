/* llm.c's from-scratch GPT-2 initialisation, bit for bit (train_gpt2.cu's
 * init loop with llmc/rand.h): MT19937 seeded with seed, PyTorch CPU normal_,
 * drawn in this order: wte (first V rows only; padded rows stay 0), wpe, then
 * for each layer l: qkvw[l], attprojw[l], fcw[l], fcprojw[l]. Weights
 * N(0, 0.02); attprojw and fcprojw N(0, 0.02 / sqrt(2L)) (the scale computed
 * in float as llm.c does); LayerNorm weights 1; biases and LayerNorm biases 0.
 * llm.c's own trainer uses seed 42. */
#ifndef GPT2_INIT_H
#define GPT2_INIT_H

#include <stdint.h>

#include "gpt2_model_io.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fills params (tsr_gpt2_num_params(cfg) floats). TSR_EINVAL on a bad
 * config or NULL pointer. */
int tsr_gpt2_init_params(const tsr_gpt2_config_t *cfg, uint32_t seed, float *params);
/* Same into a malloc'd array (*params NULL on error; free() it). */
int tsr_gpt2_init_alloc(const tsr_gpt2_config_t *cfg, uint32_t seed, float **params);

#ifdef __cplusplus
}
#endif
#endif
