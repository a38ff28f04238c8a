/* llm.c's debug-state file (oracle of one forward + backward) and a losses
 * file, as in shared/reference/README.md.
 *
 * Debug state (little-endian): 256 x int32 header {20240327, 2, B, T, 0, ...},
 * x: B*T int32, y: B*T int32, logits: B*T*V float32 (the first V of each
 * padded row), loss: 1 float32, grads: num_params float32 in checkpoint
 * order. Losses file: lines "step loss", steps 0, 1, 2, ... Plain C. */
#ifndef GPT2_DEBUG_STATE_H
#define GPT2_DEBUG_STATE_H

#include <stddef.h>

#include "gpt2_model_io.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSR_GPT2_DEBUG_STATE_MAGIC 20240327
#define TSR_GPT2_DEBUG_STATE_VERSION 2

typedef struct {
    int B, T, V;
    size_t num_params;
    int *x;        /* B*T inputs */
    int *y;        /* B*T targets */
    float *logits; /* B*T*V */
    float loss;
    float *grads;  /* num_params, checkpoint order */
} tsr_gpt2_debug_state_t;

/* Reads the file for the model cfg (V, maxT, number of parameters).
 * Errors: TSR_EIO (missing), TSR_EFORMAT (truncated, bad magic or version,
 * B or T <= 0 or T > maxT, size != the one cfg implies, token ids outside
 * [0, V)), TSR_EINVAL (bad cfg), TSR_ENOMEM. *st is zeroed on error. */
int tsr_gpt2_debug_state_read(const char *path, const tsr_gpt2_config_t *cfg,
                              tsr_gpt2_debug_state_t *st);
void tsr_gpt2_debug_state_free(tsr_gpt2_debug_state_t *st);

/* Reads "step loss" lines (steps must be 0, 1, 2, ...) into a malloc'd
 * array of *nsteps doubles. Errors: TSR_EIO, TSR_EFORMAT (a line that is not
 * "int float", steps out of order, no line), TSR_ENOMEM. */
int tsr_gpt2_losses_read(const char *path, double **losses, int *nsteps);

#ifdef __cplusplus
}
#endif
#endif
