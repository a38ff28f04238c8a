/* Tessera compute layer: LayerNorm and residual tile kernels (float32, llm.c
 * numerics). Tiles are feature-major: an m x n tile holds n tokens, token t's
 * m features at x + t * ldx. Per-token vectors (mean, rstd, partial sums) are
 * 1 x n tiles: element t at p[t * inc]. No StarPU here. */
#ifndef TSR_COMPUTE_LAYERNORM_H
#define TSR_COMPUTE_LAYERNORM_H
#include "tsr_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- forward ---- */
/* The whole LayerNorm of n tokens whose m = C features are all in the tile
 * (llm.c layernorm_forward): mean, biased variance, rstd = 1/sqrt(var + eps),
 * out = (x - mean) * rstd * w + b. */
void tsr_cpu_layernorm_fwd(int m, int n, const float *x, int ldx, const float *w, const float *b,
                           float *out, int ldo, float *mean, int incm, float *rstd, int incr, float eps);
/* Feature tiles of a split C, pass 1: s[t] (+)= sum_r x[r, t]. */
void tsr_cpu_layernorm_sum(int m, int n, const float *x, int ldx, float *s, int incs, tsr_write_t mode);
/* Pass 2, with s the complete per-token sum over C features:
 * q[t] (+)= sum_r (x[r, t] - s[t] / C)^2. */
void tsr_cpu_layernorm_sqdev(int m, int n, const float *x, int ldx, const float *s, int incs, int C,
                             float *q, int incq, tsr_write_t mode);
/* In place: mean[t] = mean[t] / C (it held the sum), rstd[t] = 1 / sqrt(rstd[t] / C + eps)
 * (it held the sum of squared deviations). */
void tsr_cpu_layernorm_stats(int n, int C, float eps, float *mean, int incm, float *rstd, int incr);
/* out = (x - mean) * rstd * w + b with the per-token statistics. */
void tsr_cpu_layernorm_normalize(int m, int n, const float *x, int ldx, const float *w, const float *b,
                                 const float *mean, int incm, const float *rstd, int incr, float *out, int ldo);

/* ---- backward (llm.c layernorm_backward); norm = (x - mean) * rstd, dnorm = w * dout ---- */
/* The whole backward for dinp when the tile holds all C = m features:
 * dinp (+)= rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)). */
void tsr_cpu_layernorm_bwd(int m, int n, const float *dout, int lddo, const float *x, int ldx, const float *w,
                           const float *mean, int incm, const float *rstd, int incr,
                           float *dinp, int lddi, tsr_write_t mode);
/* Feature tiles of a split C, pass 1: per token, sums[0 + t * lds] (+)= sum_r dnorm and
 * sums[1 + t * lds] (+)= sum_r dnorm * norm (a 2 x n tile). */
void tsr_cpu_layernorm_bwd_sums(int m, int n, const float *dout, int lddo, const float *x, int ldx, const float *w,
                                const float *mean, int incm, const float *rstd, int incr,
                                float *sums, int lds, tsr_write_t mode);
/* Pass 2, with the complete sums over C features. */
void tsr_cpu_layernorm_bwd_dinp(int m, int n, const float *dout, int lddo, const float *x, int ldx, const float *w,
                                const float *mean, int incm, const float *rstd, int incr,
                                const float *sums, int lds, int C, float *dinp, int lddi, tsr_write_t mode);
/* Parameter gradients of one tile (tokens in order, as llm.c):
 * dw[r] (+)= sum_t norm[r, t] * dout[r, t], db[r] (+)= sum_t dout[r, t]. */
void tsr_cpu_layernorm_bwd_params(int m, int n, const float *dout, int lddo, const float *x, int ldx,
                                  const float *mean, int incm, const float *rstd, int incr,
                                  float *dw, tsr_write_t dw_mode, float *db, tsr_write_t db_mode);

/* ---- residual ---- */
/* out = a + b (float32 or float64) */
void tsr_cpu_residual_fwd(tsr_dtype_t t, int m, int n, const void *a, int lda, const void *b, int ldb,
                          void *out, int ldo);

/* ---- CUDA (compute/cuda/layernorm.cu, built when TSR_USE_CUDA is on) ----
 * The same kernels with the same arguments on device pointers, asynchronous
 * on `stream` (a cudaStream_t). Per-token reductions run one warp per token,
 * so their float sums are in another order than the CPU's (and nvcc fuses
 * multiply-adds); bwd_params keeps the CPU's token order per feature.
 * Return 0, TSR_EINVAL (bad sizes, checked before anything is queued) or
 * TSR_ERUNTIME (launch failure). */
int tsr_cuda_layernorm_fwd(void *stream, int m, int n, const float *x, int ldx, const float *w, const float *b,
                           float *out, int ldo, float *mean, int incm, float *rstd, int incr, float eps);
int tsr_cuda_layernorm_sum(void *stream, int m, int n, const float *x, int ldx, float *s, int incs, tsr_write_t mode);
int tsr_cuda_layernorm_sqdev(void *stream, int m, int n, const float *x, int ldx, const float *s, int incs, int C,
                             float *q, int incq, tsr_write_t mode);
int tsr_cuda_layernorm_stats(void *stream, int n, int C, float eps, float *mean, int incm, float *rstd, int incr);
int tsr_cuda_layernorm_normalize(void *stream, int m, int n, const float *x, int ldx, const float *w, const float *b,
                                 const float *mean, int incm, const float *rstd, int incr, float *out, int ldo);
int tsr_cuda_layernorm_bwd(void *stream, int m, int n, const float *dout, int lddo, const float *x, int ldx,
                           const float *w, const float *mean, int incm, const float *rstd, int incr,
                           float *dinp, int lddi, tsr_write_t mode);
int tsr_cuda_layernorm_bwd_sums(void *stream, int m, int n, const float *dout, int lddo, const float *x, int ldx,
                                const float *w, const float *mean, int incm, const float *rstd, int incr,
                                float *sums, int lds, tsr_write_t mode);
int tsr_cuda_layernorm_bwd_dinp(void *stream, int m, int n, const float *dout, int lddo, const float *x, int ldx,
                                const float *w, const float *mean, int incm, const float *rstd, int incr,
                                const float *sums, int lds, int C, float *dinp, int lddi, tsr_write_t mode);
int tsr_cuda_layernorm_bwd_params(void *stream, int m, int n, const float *dout, int lddo, const float *x, int ldx,
                                  const float *mean, int incm, const float *rstd, int incr,
                                  float *dw, tsr_write_t dw_mode, float *db, tsr_write_t db_mode);
int tsr_cuda_residual_fwd(void *stream, tsr_dtype_t t, int m, int n, const void *a, int lda, const void *b, int ldb,
                          void *out, int ldo);
/* layernorm_fwd, _bwd and _bwd_params with every operand of type t (float32,
 * or bf16: read into float, computed in float as above, each output rounded
 * to nearest even once on store, an accumulated one after the addition). */
int tsr_cuda_layernorm_fwd_typed(void *stream, tsr_dtype_t t, int m, int n, const void *x, int ldx, const void *w,
                                 const void *b, void *out, int ldo, void *mean, int incm, void *rstd, int incr,
                                 float eps);
int tsr_cuda_layernorm_bwd_typed(void *stream, tsr_dtype_t t, int m, int n, const void *dout, int lddo, const void *x,
                                 int ldx, const void *w, const void *mean, int incm, const void *rstd, int incr,
                                 void *dinp, int lddi, tsr_write_t mode);
int tsr_cuda_layernorm_bwd_params_typed(void *stream, tsr_dtype_t t, int m, int n, const void *dout, int lddo,
                                        const void *x, int ldx, const void *mean, int incm, const void *rstd, int incr,
                                        void *dw, tsr_write_t dw_mode, void *db, tsr_write_t db_mode);

#ifdef __cplusplus
}
#endif
#endif
