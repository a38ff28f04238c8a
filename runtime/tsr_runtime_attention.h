/* Tessera runtime layer (internal): codelets and task-insert helpers of
 * flash-style causal attention (float32). One task per (query tile, key
 * tile) pair; tiles are 3D [heads, hd, tokens] and the kernels loop over the
 * heads of the tile. See tsr_compute_attention.h for the block semantics. */
#ifndef TSR_RUNTIME_ATTENTION_H
#define TSR_RUNTIME_ATTENTION_H
#include "tsr_runtime.h"

/* Global token positions of the first query / key of the tile pair. */
typedef struct { int q0, k0; } tsr_attn_pos_t;

/* Online-softmax step: O (and row 0 of the statistics tile L) fold in the
 * key tile. omode: STARPU_W for the first key tile of the chain (O and L are
 * not read), STARPU_RW afterwards. Runs on O's owner. */
int tsr_insert_attention_fwd(tsr_tile_t Q, tsr_tile_t K, tsr_tile_t V, tsr_tile_t O, tsr_tile_t L,
                             tsr_attn_pos_t pos, enum starpu_data_access_mode omode);

/* Row 1 of L = dO . O per query (L in RW: row 0 is kept). */
int tsr_insert_attention_bwd_prep(tsr_tile_t O, tsr_tile_t dO, tsr_tile_t L);

/* Backward of one tile pair. qmode (dQ) and kvmode (dK, dV): STARPU_W
 * (overwrite: first contribution), STARPU_RW (accumulate) or STARPU_REDUX
 * (accumulate into a reduction buffer; the tiles need
 * tsr_tile_enable_redux). exec_rank as in tsr_submit (-1: dQ's owner). */
int tsr_insert_attention_bwd(tsr_tile_t Q, tsr_tile_t K, tsr_tile_t V, tsr_tile_t dO, tsr_tile_t L,
                             tsr_tile_t dQ, tsr_tile_t dK, tsr_tile_t dV, tsr_attn_pos_t pos,
                             enum starpu_data_access_mode qmode, enum starpu_data_access_mode kvmode,
                             int exec_rank);
#endif
