/* tsr_gpt2's training state files (--save / --resume): everything needed to
 * continue a run bit for bit. Two formats, told apart by their version.
 *
 * Sharded (version 3, what tsr_gpt2 writes: docs/files.md): a manifest
 * FILE and one shard file per saving rank beside it, each rank's own tiles
 * of the parameters and AdamW m and v. The manifest, little-endian:
 *   the header and data identity of version 2 (below; loader_bytes and
 *           num_params as there),
 *   {generation, nfiles, nslots}, per slot (parameter descriptor, the
 *           model's order) {rows, cols, row tile, column tile}, per file
 *           {bytes, name (TSR_GPT2_SHARD_NAME bytes, NUL-padded, no '/')},
 *   one record {file, 0, offset, hash} per tile, for the parameters, then
 *           m, then v; slot after slot, tiles (i, j) row after row,
 *   the training loader's position (loader_bytes),
 *   the tsr_gpt2_hash64 of every byte before it.
 * A tile is rows x cols float32 column-major at offset in its file; a shard
 * file starts with {"TSRS", 1, generation, rank, nranks}.
 *
 * Single file (versions 1 and 2, still read):
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
    int version;           /* 1, 2 (one file) or 3 (a manifest of shards) */
    tsr_gpt2_config_t cfg; /* the model it was saved for (valid) */
    int B, T, step;
    uint64_t gen_rng, loader_bytes;
    tsr_gpt2_file_id_t data; /* the training file's identity; size -1 in a version 1 file */
} tsr_gpt2_train_state_info_t;

/* Reads and checks a state file's header alone (cheap: no parameters read):
 * magic, version, a valid model, B, T, step, sampler, the exact file size.
 * For checks before a model is built. */
int tsr_gpt2_train_state_info(const char *path, tsr_gpt2_train_state_info_t *info);

/* Writes st and train's position atomically (tsr_atomic_*) as one file of
 * version 2 (tsr_gpt2 itself saves sharded states: gpt2_state_shards.h;
 * this one serves tools and tests, gpt2_state_single). */
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

/* ---- sharded states (version 3) ---- */
#define TSR_GPT2_SHARD_KINDS 3   /* parameters, AdamW m, AdamW v */
#define TSR_GPT2_SHARD_NAME 256  /* bytes of a shard file's name in the manifest */
#define TSR_GPT2_SHARD_MAGIC 0x53525354 /* "TSRS" */
typedef struct {
    int32_t magic, version;
    uint64_t generation;
    int32_t rank, nranks;
} tsr_gpt2_shard_header_t;
typedef struct {
    int32_t rows, cols, rtile, ctile;
} tsr_gpt2_shard_slot_t;
typedef struct {
    int32_t file, pad;
    uint64_t offset, hash;
} tsr_gpt2_shard_record_t;
typedef struct {
    uint64_t generation;
    int nfiles, nslots;
    tsr_gpt2_shard_slot_t *slots;       /* nslots */
    uint64_t *file_bytes;               /* nfiles */
    char (*names)[TSR_GPT2_SHARD_NAME]; /* nfiles */
    size_t *first;                      /* per slot, its first record within a kind */
    size_t per_kind, nrecords;          /* records of one kind, of all three */
    tsr_gpt2_shard_record_t *records;   /* nrecords */
} tsr_gpt2_shard_layout_t;

/* A layout for nslots slots (their grids given) and nfiles files, records
 * zeroed: TSR_ENOMEM or 0 (then tsr_gpt2_shard_layout_free). */
int tsr_gpt2_shard_layout_init(tsr_gpt2_shard_layout_t *l, int nslots, const tsr_gpt2_shard_slot_t *slots,
                               int nfiles);
void tsr_gpt2_shard_layout_free(tsr_gpt2_shard_layout_t *l);
/* The index of tile (i, j) of slot s's kind k in l->records. */
size_t tsr_gpt2_shard_record(const tsr_gpt2_shard_layout_t *l, int k, int s, int i, int j);
/* A 64-bit hash of bytes (FNV-1a over 8-byte words, then the last bytes):
 * the checksum of tiles and manifests. */
uint64_t tsr_gpt2_hash64(const void *data, size_t bytes);

/* Writes a manifest atomically (tsr_atomic_*: the rename is the commit). */
int tsr_gpt2_train_state_manifest_write(const char *path, const tsr_gpt2_config_t *cfg, int B, int T,
                                        const tsr_gpt2_train_state_t *st, const tsr_gpt2_shard_layout_t *l,
                                        const void *loader_state, size_t loader_bytes);
/* 1 when path is a regular file that starts as a manifest does (magic and
 * version 3), else 0; quiet, never blocks. */
int tsr_gpt2_train_state_is_manifest(const char *path);
/* Reads and checks a whole manifest: its header (info), its layout
 * (records inside their files, names without '/'), its hash; with
 * loader_state non-NULL also the loader's position (malloc'd,
 * info->loader_bytes). TSR_EFORMAT naming the problem, TSR_EIO, TSR_ENOMEM;
 * on error nothing is left allocated. */
int tsr_gpt2_train_state_manifest_read(const char *path, tsr_gpt2_train_state_info_t *info,
                                       tsr_gpt2_shard_layout_t *l, void **loader_state);

#ifdef __cplusplus
}
#endif
#endif
