/* llm.c token files and a data loader that serves batches in llm.c's order.
 *
 * Token file (little-endian): 256 x int32 header {20240520, 1, N, 0, ...},
 * then N uint16 token ids; the size must be exactly 1024 + 2N.
 *
 * Loader (llm.c's DataLoader in one process, over one file or a glob of
 * shards): a sample of a shard is B*T + 1 consecutive tokens starting at
 * token k*B*T, k = 0 .. n-1 with n = (N - 1) / (B*T); inputs are its first
 * B*T tokens, targets the B*T shifted by one (row b of the batch = tokens
 * [b*T, b*T + T) of the sample). Tokens are read from disk batch by batch
 * (pread), never whole files. With shuffling, the shards' order is
 * permuted at each epoch and each shard's samples are visited in the order
 * of a permutation made by resetting it to the identity and running
 * Fisher-Yates (i from n-1 down to 1, j = u32 % (i+1)), all on one MT19937
 * stream seeded once (llm.c: seed 42). Without shuffling, shards in glob
 * order, samples in file order (validation: batch i = tokens
 * [B*T*i, B*T*i + B*T + 1) of the first shard). Plain C, no StarPU. */
#ifndef GPT2_DATA_H
#define GPT2_DATA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gpt2_model_io.h" /* tsr_gpt2_file_id_t */
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

/* One shard of a loader: a token file, its token count and its samples. */
typedef struct {
    char *path;
    size_t ntok;
    size_t nsamples; /* (ntok - 1) / (B*T) */
} tsr_gpt2_shard_t;

typedef struct {
    char *pattern;             /* the name or glob pattern given to open (messages) */
    tsr_gpt2_shard_t *shards;  /* the matching files, in glob's (sorted) order */
    int nshards;
    int B, T, V;
    int row0, nrows;           /* the batch rows next() reads (all by default) */
    size_t ntok;               /* tokens of all shards */
    size_t nsamples;           /* samples of all shards: one epoch */
    size_t max_samples;        /* samples of the largest shard */
    int shuffle;
    uint32_t seed;             /* shuffle seed given to open (used by reset) */
    uint64_t epoch;            /* epochs started so far - 1 (0 during the first) */
    int *shard_order;          /* the epochs' shard order (permuted again at each epoch) */
    int shard_pos;             /* the current shard: shards[shard_order[shard_pos]] */
    size_t pos;                /* samples served from the current shard (next index into perm) */
    size_t last_sample;        /* global index of the sample served last (SIZE_MAX before any) */
    tsr_gpt2_rng_t rng;        /* shuffle stream (unused without shuffling) */
    int *perm;                 /* the current shard's sample order (max_samples allocated) */
    FILE *file;                /* the current shard, open for pread */
    int open_shard;            /* index into shards of `file` (-1: none) */
    uint16_t *buf;             /* one read: nrows * T + 1 tokens */
} tsr_gpt2_loader_t;

/* Opens a loader on pattern: one token file, or a glob pattern of token
 * files (shards, e.g. "data/fineweb_train_*.bin"), checked header by header
 * (each must hold one batch, B*T + 1 tokens); no token is read until next().
 * Memory does not depend on the data's size beyond one shard's sample order.
 * The order is llm.c's DataLoader's in one process: shuffle != 0 draws, at
 * each epoch, a new shard order (Fisher-Yates on the previous one) and, at
 * each shard, an order of its samples, all from one MT19937(seed) stream;
 * without shuffling, shards in glob order and samples in file order. V > 0:
 * next() checks every token it reads is < V. Errors: TSR_EIO (missing,
 * unreadable, no file matches), TSR_EFORMAT (a bad header or size),
 * TSR_ESHAPE (a shard too small for one batch), TSR_EINVAL (B, T < 1),
 * TSR_ENOMEM. *ld is zeroed on error, so tsr_gpt2_loader_free is always
 * safe. */
int tsr_gpt2_loader_open(tsr_gpt2_loader_t *ld, const char *pattern, int V, int B, int T,
                         int shuffle, uint32_t seed);
void tsr_gpt2_loader_free(tsr_gpt2_loader_t *ld);

/* The identity of the data a pattern names: tsr_gpt2_file_id of the file,
 * or for a glob of shards their total size and an FNV-1a 64 over their
 * hashes in name order (every byte of every shard is read). */
int tsr_gpt2_data_id(const char *pattern, tsr_gpt2_file_id_t *id);

/* Rows row0 .. row0 + nrows - 1 of each batch are read from disk by next()
 * and sample(); the other rows of inputs and targets are set to 0 (a
 * process that computes part of the batch reads that part alone). */
int tsr_gpt2_loader_set_rows(tsr_gpt2_loader_t *ld, int row0, int nrows);

/* Next training batch: inputs and targets are B*T ints each (either may be
 * NULL); *sample (may be NULL) gets its global index (the shards' samples
 * numbered in glob order). When a shard is exhausted the next one starts,
 * and after the last one the next epoch. */
int tsr_gpt2_loader_next(tsr_gpt2_loader_t *ld, int *inputs, int *targets, size_t *sample);
/* Back to the state right after open (epoch 0, re-seeded with the seed given
 * to open); llm.c resets its unshuffled validation loader before every
 * evaluation. */
int tsr_gpt2_loader_reset(tsr_gpt2_loader_t *ld);
/* Global sample k directly (no change of position): in its shard, tokens
 * [j*B*T, j*B*T + B*T + 1) for its index j there. */
int tsr_gpt2_loader_sample(tsr_gpt2_loader_t *ld, size_t k, int *inputs, int *targets);

/* Exact resume: a self-describing little-endian byte image of the position
 * (B, T, shard count, tokens, epoch, shard order and position, sample
 * position, last sample, RNG state, the current shard's permutation). Its
 * size is the same for every position of a loader. restore checks that it
 * belongs to a loader of the same shape (B, T, shards, tokens, shuffle) and
 * is consistent (real permutations, positions in range) and returns
 * TSR_EFORMAT otherwise, leaving the loader unchanged. A one-file image of
 * the earlier format (version 1) is read too. */
size_t tsr_gpt2_loader_state_bytes(const tsr_gpt2_loader_t *ld);
int tsr_gpt2_loader_save_state(const tsr_gpt2_loader_t *ld, void *buf, size_t bytes);
int tsr_gpt2_loader_restore_state(tsr_gpt2_loader_t *ld, const void *buf, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif
