/* Tessera runtime layer (internal): task-insert helpers of the LayerNorm and
 * residual tile kernels (float32; residual also float64). An output given
 * in mode STARPU_W is overwritten; in STARPU_RW or STARPU_REDUX the kernel
 * adds to it. exec_rank: the rank that runs the task under MPI (-1: the
 * owner of the first written tile). */
#ifndef TSR_RUNTIME_LAYERNORM_H
#define TSR_RUNTIME_LAYERNORM_H
#include "tsr_runtime.h"

/* Whole LayerNorm of a token tile holding every feature: out, mean, rstd written. */
int tsr_insert_layernorm_fwd(tsr_tile_t x, tsr_tile_t w, tsr_tile_t b, tsr_tile_t out, tsr_tile_t mean,
                             tsr_tile_t rstd, float eps);
/* s (per token) gets the sum of the tile's features. */
int tsr_insert_layernorm_sum(tsr_tile_t x, tsr_tile_t s, enum starpu_data_access_mode smode, int exec_rank);
/* q gets the tile's sum of (x - s / C)^2; s holds complete sums. */
int tsr_insert_layernorm_sqdev(tsr_tile_t x, tsr_tile_t s, int C, tsr_tile_t q,
                               enum starpu_data_access_mode qmode, int exec_rank);
/* mean = mean / C, rstd = 1 / sqrt(rstd / C + eps), in place. */
int tsr_insert_layernorm_stats(int C, float eps, tsr_tile_t mean, tsr_tile_t rstd);
/* out = (x - mean) * rstd * w + b (out written). */
int tsr_insert_layernorm_normalize(tsr_tile_t x, tsr_tile_t w, tsr_tile_t b, tsr_tile_t mean, tsr_tile_t rstd,
                                   tsr_tile_t out);

/* dinp of a token tile holding every feature. */
int tsr_insert_layernorm_bwd(tsr_tile_t dout, tsr_tile_t x, tsr_tile_t w, tsr_tile_t mean, tsr_tile_t rstd,
                             tsr_tile_t dinp, enum starpu_data_access_mode dmode);
/* sums (2 x n tile) gets the tile's sums of dnorm and dnorm * norm. */
int tsr_insert_layernorm_bwd_sums(tsr_tile_t dout, tsr_tile_t x, tsr_tile_t w, tsr_tile_t mean, tsr_tile_t rstd,
                                  tsr_tile_t sums, enum starpu_data_access_mode smode, int exec_rank);
/* dinp of a feature tile from the complete sums over C features. */
int tsr_insert_layernorm_bwd_dinp(tsr_tile_t dout, tsr_tile_t x, tsr_tile_t w, tsr_tile_t mean, tsr_tile_t rstd,
                                  tsr_tile_t sums, int C, tsr_tile_t dinp, enum starpu_data_access_mode dmode);
/* dw += / = sum over the tile's tokens of norm * dout, db of dout. */
int tsr_insert_layernorm_bwd_params(tsr_tile_t dout, tsr_tile_t x, tsr_tile_t mean, tsr_tile_t rstd,
                                    tsr_tile_t dw, enum starpu_data_access_mode wmode,
                                    tsr_tile_t db, enum starpu_data_access_mode bmode, int exec_rank);

/* out = a + b (out written; float32 or float64). */
int tsr_insert_residual_fwd(tsr_tile_t a, tsr_tile_t b, tsr_tile_t out);
#endif
