/* Internal helpers of the tile layer (not installed). */
#ifndef TSR_TILE_INTERNAL_H
#define TSR_TILE_INTERNAL_H
#include <starpu.h>
#include "tsr_tile.h"

typedef int (*tsr_tile_visit_fn)(tsr_desc_t *d, int bi, int i, int j, void *tile, void *arg);

/* TSR_EINVAL, with a message, for a descriptor over the caller's array
 * (tsr_desc_create_user): the per-tile copies and reductions of this layer
 * read packed tiles. */
int tsr_desc_refuse_user(const tsr_desc_t *d);
/* Acquire every tile this rank owns in `mode`, call fn on its storage, release. */
int tsr_foreach_local_tile(tsr_desc_t *d, enum starpu_data_access_mode mode, tsr_tile_visit_fn fn, void *arg);
/* Position of tile (bi, i, j) in the descriptor's tile arrays, 0 .. tsr_desc_ntiles - 1. */
int tsr_tile_index(const tsr_desc_t *d, int bi, int i, int j);
/* Local storage of an owned tile (allocated and registered on first use). */
void *tsr_tile_storage(tsr_desc_t *d, int bi, int i, int j);
#endif
