/* tsr_gpt2's training state files (--save / --resume): everything needed to
 * continue a run bit for bit. Little-endian, one file:
 *   header {magic "TSR1", version 2, maxT V Vp L NH C, B, T, step, 0,
 *           loader_bytes, num_params, sampler RNG}
 *   the training file's identity {its size in bytes, FNV-1a 64 of its bytes}
 *           (version 2; version 1 files, without it, are still read)
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
    tsr_gpt2_file_id_t data; /* the training file's identity (size, hash): written as given;
                              * read back, size -1 for a version 1 file (not recorded) */
} tsr_gpt2_train_state_t;

/* A state file's header. */
typedef struct {
    int version;           /* 1 or 2 */
    tsr_gpt2_config_t cfg; /* the model it was saved for (valid) */
    int B, T, step;
    uint64_t gen_rng, loader_bytes;
    tsr_gpt2_file_id_t data; /* the training file's identity; size -1 in a version 1 file */
} tsr_gpt2_train_state_info_t;

/* Reads and checks a state file's header alone (cheap: no parameters read):
 * magic, version, a valid model, B, T, step, sampler, the exact file size.
 * For checks before a model is built. */
int tsr_gpt2_train_state_info(const char *path, tsr_gpt2_train_state_info_t *info);

/* Writes st and train's position atomically (tsr_atomic_*). */
int tsr_gpt2_train_state_write(const char *path, const tsr_gpt2_config_t *cfg, int B, int T,
                               const tsr_gpt2_train_state_t *st, const tsr_gpt2_loader_t *train);

/* Reads a state saved for this model (cfg), batch shape (B, T) and training
 * file (train, whose position is restored; NULL: the position is not read
 * back): every header field is checked, the file size must be exact (no
 * trailing bytes). The training file's identity is returned in st->data, not
 * compared (the caller decides). On success st holds malloc'd arrays
 * (tsr_gpt2_train_state_free); on error st is empty and train is unchanged. TSR_EIO, TSR_EFORMAT (naming the field that does not fit),
 * TSR_ENOMEM. */
int tsr_gpt2_train_state_read(const char *path, const tsr_gpt2_config_t *cfg, int B, int T,
                              tsr_gpt2_loader_t *train, tsr_gpt2_train_state_t *st);
void tsr_gpt2_train_state_free(tsr_gpt2_train_state_t *st);

#ifdef __cplusplus
}
#endif
#endif
