/* Tessera compute layer: per-tile kernels of the encoder (column
 * gather-add), the softmax cross-entropy and AdamW. float32, column-major
 * with leading dimensions, no StarPU. */
#ifndef TSR_COMPUTE_MISC_H
#define TSR_COMPUTE_MISC_H
#include <stddef.h>
#include "tsr_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- encoder: column gather-add ----------------------------------------- */

/* dst column dst_col += column src_col of source src. */
typedef struct { int dst_col, src, src_col; } tsr_colmap_t;

/* For each entry e of map, in order: dst[:, e.dst_col] += src[e.src][:, e.src_col]
 * (rows elements per column; lds[k] is the leading dimension of source k).
 * mode TSR_OVERWRITE: dst (rows x cols) is set to 0 first (dst is then not read). */
void tsr_cpu_gather_add_columns(int rows, int cols, float *dst, int ldd, tsr_write_t mode,
                                const float *const *src, const int *lds,
                                const tsr_colmap_t *map, int nmap);

/* ---- softmax cross-entropy ------------------------------------------------
 * Statistics of a column are (max, sum exp(x - max)) stored as 2 consecutive
 * floats of a 2 x cols tile. A sum of 0 marks an empty statistic (no row
 * seen yet), which makes an all-zero tile the identity of the merge. */

/* Statistics of the first `rows` rows of each column of x (rows x cols).
 * mode TSR_OVERWRITE: stats = those; TSR_ACCUMULATE: stats = merge(stats, those). */
void tsr_cpu_softmax_stats(int rows, int cols, const float *x, int ldx, float *stats, int lds, tsr_write_t mode);
/* dst = merge(dst, src), column by column (cols columns of 2 floats). */
void tsr_cpu_softmax_stats_merge(int cols, float *dst, int ldd, const float *src, int lds);
/* loss[c] = log(sum_c) + max_c - x_c, where x_c is the target logit of column c. */
float tsr_cpu_crossentropy_loss(const float *stats, float target_logit);
/* Token column col's target logit is row `row` of column col of logits tile
 * number src. */
typedef struct { int col, src, row; } tsr_loss_ref_t;
/* For each ref e: loss[e.col * ldl] = tsr_cpu_crossentropy_loss(stats + e.col * lds, x)
 * with x = logits[e.src][e.col * ldx[e.src] + e.row]; loss columns no ref
 * names are not written. logits / ldx: nsrc tiles and their leading dimensions. */
void tsr_cpu_crossentropy_loss_refs(float *loss, int ldl, const float *stats, int lds, const float *const *logits,
                                    const int *ldx, int nsrc, const tsr_loss_ref_t *refs, int nrefs);
/* In place, columns of x (rows x cols, global row offset row0, softmax over
 * global rows < V): x = (exp(x - max) / sum - [row == target]) * dloss;
 * rows >= V are set to 0. target_row[c] is the target's row inside the tile
 * or -1 when the target is in another tile. */
void tsr_cpu_crossentropy_backward(int rows, int cols, float *x, int ldx, int row0, int V,
                                   const float *stats, int lds, const int *target_row, float dloss);

/* ---- AdamW (llm.c) --------------------------------------------------------- */

/* Hyper-parameters of one step; corr1 = 1 - beta1^t, corr2 = 1 - beta2^t. */
typedef struct { float lr, beta1, beta2, eps, weight_decay, corr1, corr2; } tsr_adamw_step_t;

/* One AdamW step on rows x cols tiles:
 * m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 * p -= lr * ((m / corr1) / (sqrt(v / corr2) + eps) + wd * p). */
void tsr_cpu_adamw(int rows, int cols, float *p, int ldp, const float *g, int ldg, float *m, int ldm,
                   float *v, int ldv, const tsr_adamw_step_t *s);
/* The same step on float32 master weights p, then out = p: the copy that
 * the forward and backward read (bf16 on CPU workers: the op kit rounds it). */
void tsr_cpu_adamw_master(int rows, int cols, float *p, int ldp, const float *g, int ldg, float *m, int ldm,
                          float *v, int ldv, float *out, int ldo, const tsr_adamw_step_t *s);

/* ---- CUDA (compute/cuda/misc.cu, built with TSR_USE_CUDA) -----------------
 * The same kernels, asynchronous on `stream` (a cudaStream_t). The tiles
 * (dst, src[k], x, stats, loss, logits[k], p, g, m, v) are device memory; the
 * small index arrays are HOST memory, as the codelets keep them: map, the
 * src / lds arrays (the pointers in src are device pointers), target_row,
 * logits / ldx (device pointers in a host array), refs, and s. Each call
 * copies what it needs to the device in stream order (cudaMallocAsync +
 * cudaMemcpyAsync + cudaFreeAsync), so the host arrays may be freed as soon
 * as it returns. Return 0, TSR_EINVAL (bad sizes or indices, checked before
 * anything is queued) or TSR_ERUNTIME (CUDA failure).
 * Differences from the CPU: the softmax sums are float block reductions (the
 * CPU adds float lanes in double) with CUDA's expf instead of the CPU's
 * polynomial exp; per-element formulas come from tsr_compute_elem.h. The
 * gather-add keeps the CPU's order per destination element (map order), so
 * it is bitwise the CPU's result. */
int tsr_cuda_gather_add_columns(void *stream, int rows, int cols, float *dst, int ldd, tsr_write_t mode,
                                const float *const *src, const int *lds, const tsr_colmap_t *map, int nmap);
int tsr_cuda_softmax_stats(void *stream, int rows, int cols, const float *x, int ldx, float *stats, int lds,
                           tsr_write_t mode);
int tsr_cuda_softmax_stats_merge(void *stream, int cols, float *dst, int ldd, const float *src, int lds);
int tsr_cuda_crossentropy_loss(void *stream, float *loss, int ldl, const float *stats, int lds,
                               const float *const *logits, const int *ldx, int nsrc, const tsr_loss_ref_t *refs,
                               int nrefs);
int tsr_cuda_crossentropy_backward(void *stream, int rows, int cols, float *x, int ldx, int row0, int V,
                                   const float *stats, int lds, const int *target_row, float dloss);
/* gather_add_columns with dst and the sources of type t (float32 or bf16:
 * summed in float in the same order, rounded once on store). */
int tsr_cuda_gather_add_columns_typed(void *stream, tsr_dtype_t t, int rows, int cols, void *dst, int ldd,
                                      tsr_write_t mode, const void *const *src, const int *lds,
                                      const tsr_colmap_t *map, int nmap);
/* The loss's kernels with the logits of type t (float32 or bf16: read into
 * float, and crossentropy_backward's result rounded to nearest even on
 * store); stats and loss float32 in either case. */
int tsr_cuda_softmax_stats_typed(void *stream, tsr_dtype_t t, int rows, int cols, const void *x, int ldx,
                                 float *stats, int lds, tsr_write_t mode);
int tsr_cuda_crossentropy_loss_typed(void *stream, tsr_dtype_t t, float *loss, int ldl, const float *stats, int lds,
                                     const void *const *logits, const int *ldx, int nsrc, const tsr_loss_ref_t *refs,
                                     int nrefs);
int tsr_cuda_crossentropy_backward_typed(void *stream, tsr_dtype_t t, int rows, int cols, void *x, int ldx, int row0,
                                         int V, const float *stats, int lds, const int *target_row, float dloss);
int tsr_cuda_adamw(void *stream, int rows, int cols, float *p, int ldp, const float *g, int ldg, float *m, int ldm,
                   float *v, int ldv, const tsr_adamw_step_t *s);
/* tsr_cpu_adamw_master with g and out of type gt (float32 or bf16: its
 * rounding to nearest even); p, m, v float32. */
int tsr_cuda_adamw_master(void *stream, tsr_dtype_t gt, int rows, int cols, float *p, int ldp, const void *g, int ldg,
                          float *m, int ldm, float *v, int ldv, void *out, int ldo, const tsr_adamw_step_t *s);

#ifdef __cplusplus
}
#endif
#endif
