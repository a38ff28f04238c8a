/* Tessera compute layer: per-tile kernels of the encoder: the column gather-add,
 * (float32, column-major with leading dimensions, no StarPU). */
#ifndef TSR_COMPUTE_ENCODER_H
#define TSR_COMPUTE_ENCODER_H
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

/* ---- CUDA (compute/cuda/encoder.cu, built with TSR_USE_CUDA) -----------------
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
/* gather_add_columns with dst and the sources of type t (float32 or bf16:
 * summed in float in the same order, rounded once on store). */
int tsr_cuda_gather_add_columns_typed(void *stream, tsr_dtype_t t, int rows, int cols, void *dst, int ldd,
                                      tsr_write_t mode, const void *const *src, const int *lds,
                                      const tsr_colmap_t *map, int nmap);

#ifdef __cplusplus
}
#endif
#endif
