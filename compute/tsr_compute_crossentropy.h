/* Tessera compute layer: per-tile kernels of the softmax cross-entropy,
 * (float32, column-major with leading dimensions, no StarPU). */
#ifndef TSR_COMPUTE_CROSSENTROPY_H
#define TSR_COMPUTE_CROSSENTROPY_H
#include <stddef.h>
#include "tsr_core.h"

#ifdef __cplusplus
extern "C" {
#endif

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

/* ---- CUDA (compute/cuda/crossentropy.cu, built with TSR_USE_CUDA) -----------------
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
int tsr_cuda_softmax_stats(void *stream, int rows, int cols, const float *x, int ldx, float *stats, int lds,
                           tsr_write_t mode);
int tsr_cuda_softmax_stats_merge(void *stream, int cols, float *dst, int ldd, const float *src, int lds);
int tsr_cuda_crossentropy_loss(void *stream, float *loss, int ldl, const float *stats, int lds,
                               const float *const *logits, const int *ldx, int nsrc, const tsr_loss_ref_t *refs,
                               int nrefs);
int tsr_cuda_crossentropy_backward(void *stream, int rows, int cols, float *x, int ldx, int row0, int V,
                                   const float *stats, int lds, const int *target_row, float dloss);
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

#ifdef __cplusplus
}
#endif
#endif
