/* Tessera runtime layer (internal): codelets and insert helpers of
 * AdamW. */
#ifndef TSR_RUNTIME_ADAMW_H
#define TSR_RUNTIME_ADAMW_H
#include "tsr_runtime.h"
#include "tsr_compute_adamw.h"

/* One AdamW step on a parameter tile (p, m, v read-write, g read). */
int tsr_insert_adamw(tsr_tile_t p, tsr_tile_t g, tsr_tile_t m, tsr_tile_t v, const tsr_adamw_step_t *step);
/* AdamW on float32 master tile p (and m, v), then out = p rounded to out's
 * type (bf16): g and out may be bf16. */
int tsr_insert_adamw_master(tsr_tile_t p, tsr_tile_t g, tsr_tile_t m, tsr_tile_t v, tsr_tile_t out,
                            const tsr_adamw_step_t *step);
#endif
