/* Sharded training states (version 3 of gpt2_train_state.h): every rank
 * writes the tiles of the parameters and AdamW moments it owns to a file of
 * its own and reads back the tiles it owns, from whichever files hold them,
 * whatever the number of ranks or the tiles of the run that saved them.
 * Nothing is gathered on one rank. docs/files.md describes the files. */
#ifndef GPT2_STATE_SHARDS_H
#define GPT2_STATE_SHARDS_H

#include "gpt2_model.h"
#include "gpt2_train_state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Saves m's parameters (bf16: the float32 master weights) and AdamW moments
 * with st's step, sampler and training-file identity (st's arrays unused)
 * and the loader's position (loader_state: rank 0's, loader_bytes on every
 * rank) as a manifest at path and one shard file per rank beside it.
 * Atomic for the whole set: the shards are written under new names and
 * fsynced, and rank 0's rename of the manifest over path commits them; a
 * failure or a crash before it leaves path as it was. After the commit,
 * rank 0 removes the shard files of earlier saves to path that no manifest
 * at path names any more (its own process's, or a process of this host
 * that no longer runs). Collective; 0 on every rank, or an error on every
 * rank (said by the rank that met it). */
int tsr_gpt2_state_save(tsr_gpt2_model_t *m, const char *path, const tsr_gpt2_train_state_t *st,
                        const void *loader_state, size_t loader_bytes);

/* Reads a manifest at path into m: each rank reads the tiles it owns (every
 * saved tile overlapping one of them, checked against its checksum).
 * *info gets the header (step, sampler, data identity) and *loader_state
 * the loader's position (malloc'd, info->loader_bytes; free() it), on
 * every rank. The caller has checked the header against the run (the
 * model's configuration, B, T). Collective; 0 or an error on every rank. */
int tsr_gpt2_state_load(tsr_gpt2_model_t *m, const char *path, tsr_gpt2_train_state_info_t *info,
                        void **loader_state);

/* Test hook: with TSR_GPT2_TEST_DIE_IN_SAVE=RANK:N in the environment, rank
 * RANK kills itself (SIGKILL) during its N-th save, after its shard file is
 * written and before the manifest is committed (the crash the format must
 * survive, made deterministic for testing/check_gpt2_state_shards.sh). */
#define TSR_GPT2_TEST_DIE_IN_SAVE "TSR_GPT2_TEST_DIE_IN_SAVE"

#ifdef __cplusplus
}
#endif
#endif
