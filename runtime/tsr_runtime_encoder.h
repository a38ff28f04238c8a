/* Tessera runtime layer (internal): codelets and insert helpers of
 * the encoder (the column gather-add). */
#ifndef TSR_RUNTIME_ENCODER_H
#define TSR_RUNTIME_ENCODER_H
#include "tsr_runtime.h"
#include "tsr_compute_encoder.h"

/* dst (mode STARPU_W, STARPU_RW or STARPU_REDUX) gets, for each map entry in
 * order, dst[:, dst_col] += src[map.src][:, src_col]; STARPU_W clears dst
 * first. At most TSR_MAX_TASK_TILES - 1
 * sources, all with dst's row count. exec_rank as in tsr_submit. */
int tsr_insert_gather_columns(tsr_tile_t dst, enum starpu_data_access_mode dmode, const tsr_tile_t *src, int nsrc,
                              const tsr_colmap_t *map, int nmap, int exec_rank);
#endif
