/* Tessera compute layer: per-tile kernels of AdamW (llm.c),
 * (float32, column-major with leading dimensions, no StarPU). */
#ifndef TSR_COMPUTE_ADAMW_H
#define TSR_COMPUTE_ADAMW_H
#include <stddef.h>
#include "tsr_core.h"

#ifdef __cplusplus
extern "C" {
#endif

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

/* ---- CUDA (compute/cuda/adamw.cu, built with TSR_USE_CUDA) -----------------
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
