/* tsr_gpt2's training state files (--save / --resume): everything needed to
 * continue a run bit for bit. Little-endian, one file:
 *   header {magic "TSR1", version 1, maxT V Vp L NH C, B, T, step, 0,
 *           loader_bytes, num_params, sampler RNG}
 *   parameters, AdamW m, AdamW v (num_params float32 each),
 *   the training loader's position (tsr_gpt2_loader_save_state, loader_bytes).
 * Plain C (no StarPU); every function returns 0 or a negative TSR_E* code and
 * logs a message naming the file and the problem. */
#ifndef GPT2_TRAIN_STATE_H
#define GPT2_TRAIN_STATE_H

#include <stdint.h>
#include "gpt2_data.h"
#include "gpt2_model_io.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int step;         /* next step to run, >= 0 */
    uint64_t gen_rng; /* sampling RNG (llm.c's xorshift), never 0 */
    float *params, *m, *v; /* tsr_gpt2_num_params(cfg) floats each */
} tsr_gpt2_train_state_t;

/* Writes st and train's position atomically (tsr_atomic_*). */
int tsr_gpt2_train_state_write(const char *path, const tsr_gpt2_config_t *cfg, int B, int T,
                               const tsr_gpt2_train_state_t *st, const tsr_gpt2_loader_t *train);

/* Reads a state saved for this model (cfg), batch shape (B, T) and training
 * file (train, whose position is restored): every header field is checked,
 * the file size must be exact (no trailing bytes). On success st holds
 * malloc'd arrays (tsr_gpt2_train_state_free); on error st is empty and train
 * is unchanged. TSR_EIO, TSR_EFORMAT (naming the field that does not fit),
 * TSR_ENOMEM. */
int tsr_gpt2_train_state_read(const char *path, const tsr_gpt2_config_t *cfg, int B, int T,
                              tsr_gpt2_loader_t *train, tsr_gpt2_train_state_t *st);
void tsr_gpt2_train_state_free(tsr_gpt2_train_state_t *st);

#ifdef __cplusplus
}
#endif
#endif
