/* llm.c token files and a data loader that serves batches in llm.c's order.
 *
 * Token file (little-endian): 256 x int32 header {20240520, 1, N, 0, ...},
 * then N uint16 token ids; the size must be exactly 1024 + 2N.
 *
 * Loader (llm.c's DataLoader on one file, one process): a sample is B*T + 1
 * consecutive tokens starting at token k*B*T, k = 0 .. n-1 with
 * n = (N - 1) / (B*T); inputs are its first B*T tokens, targets the B*T
 * shifted by one (row b of the batch = tokens [b*T, b*T + T) of the sample).
 * With shuffling, each epoch visits the samples in the order of a
 * permutation made by resetting it to the identity and running Fisher-Yates
 * (i from n-1 down to 1, j = u32 % (i+1)) on one MT19937 stream seeded once
 * (llm.c: seed 42) and re-used across epochs. Without shuffling, sample k at
 * the k-th step of each epoch (validation: batch i = tokens
 * [B*T*i, B*T*i + B*T + 1)). Plain C, no StarPU. */
#ifndef GPT2_DATA_H
#define GPT2_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "gpt2_rand.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSR_GPT2_TOKENS_MAGIC 20240520
#define TSR_GPT2_TOKENS_VERSION 1
#define TSR_GPT2_DEFAULT_SHUFFLE_SEED 42

typedef struct {
    char *path;       /* copy of the file name (for messages) */
    size_t ntok;      /* N */
    uint16_t *tokens; /* N token ids */
} tsr_gpt2_tokens_t;

/* Reads a whole token file. V > 0: every id must be < V (else TSR_EFORMAT
 * naming the first bad position); V <= 0: no check. Errors: TSR_EIO (missing,
 * unreadable), TSR_EFORMAT (truncated header, bad magic, bad version, N <= 0,
 * size != 1024 + 2N, token >= V), TSR_ENOMEM. *toks is zeroed on error. */
int tsr_gpt2_tokens_read(const char *path, int V, tsr_gpt2_tokens_t *toks);
void tsr_gpt2_tokens_free(tsr_gpt2_tokens_t *toks);

typedef struct {
    tsr_gpt2_tokens_t data; /* owned */
    int B, T;
    size_t nsamples;        /* n = (N - 1) / (B*T) */
    int shuffle;
    uint32_t seed;          /* shuffle seed given to open (used by reset) */
    uint64_t epoch;         /* epochs started so far - 1 (0 during the first) */
    size_t pos;             /* steps served in the current epoch (next index into perm) */
    size_t last_sample;     /* sample served by the last next() (SIZE_MAX before any) */
    tsr_gpt2_rng_t rng;     /* shuffle stream (unused without shuffling) */
    int *perm;              /* current epoch's order (identity without shuffling) */
} tsr_gpt2_loader_t;

/* Opens path as a token file (V as in tsr_gpt2_tokens_read) and prepares
 * epoch 0 (shuffled with MT19937(seed) when shuffle != 0). Errors as
 * tsr_gpt2_tokens_read, TSR_EINVAL for B, T < 1, TSR_ESHAPE when the file
 * has fewer than B*T + 1 tokens (not one batch). *ld is zeroed on error, so
 * tsr_gpt2_loader_free is always safe. */
int tsr_gpt2_loader_open(tsr_gpt2_loader_t *ld, const char *path, int V, int B, int T,
                         int shuffle, uint32_t seed);
void tsr_gpt2_loader_free(tsr_gpt2_loader_t *ld);

/* Next training batch: inputs and targets are B*T ints each (either may be
 * NULL); *sample (may be NULL) gets the sample index k. When an epoch is
 * exhausted the next epoch starts (re-shuffled from the same stream). */
int tsr_gpt2_loader_next(tsr_gpt2_loader_t *ld, int *inputs, int *targets, size_t *sample);
/* Back to the state right after open (epoch 0, re-seeded with the seed given
 * to open); llm.c resets its unshuffled validation loader before every
 * evaluation. */
int tsr_gpt2_loader_reset(tsr_gpt2_loader_t *ld);
/* Sample k directly (no state change): tokens [k*B*T, k*B*T + B*T + 1). */
int tsr_gpt2_loader_sample(const tsr_gpt2_loader_t *ld, size_t k, int *inputs, int *targets);

/* Exact resume: a self-describing little-endian byte image of the position
 * (B, T, N, nsamples, shuffle, epoch, pos, last sample, RNG state, current
 * permutation). restore checks that it belongs to a loader of the same
 * shape (B, T, N, shuffle) and is consistent (a real permutation, pos <= n)
 * and returns TSR_EFORMAT otherwise, leaving the loader unchanged. */
size_t tsr_gpt2_loader_state_bytes(const tsr_gpt2_loader_t *ld);
int tsr_gpt2_loader_save_state(const tsr_gpt2_loader_t *ld, void *buf, size_t bytes);
int tsr_gpt2_loader_restore_state(tsr_gpt2_loader_t *ld, const void *buf, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif
