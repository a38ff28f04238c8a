/* Tessera compute layer, CUDA side: the same kernels as tsr_compute.h on
 * device pointers, through cuBLAS and small .cu kernels, asynchronous on
 * the given stream. Compiled when TSR_USE_CUDA is on. */
#ifndef TSR_COMPUTE_CUDA_H
#define TSR_COMPUTE_CUDA_H
#include "tsr_core.h"

#ifdef __cplusplus
extern "C" {
#endif
/* cublas: a cublasHandle_t, stream: a cudaStream_t (void * keeps CUDA
 * headers out of C code); cublas must be in CUBLAS_POINTER_MODE_HOST (the
 * default). Return 0, TSR_EINVAL (bad sizes or leading dimensions, checked
 * before anything is queued) or TSR_ERUNTIME (CUDA or cuBLAS failure). */
int tsr_cuda_gemm(void *cublas, tsr_dtype_t t, tsr_trans_t ta, tsr_trans_t tb, int m, int n, int k,
                  double alpha, const void *A, int lda, const void *B, int ldb,
                  double beta, void *C, int ldc);
int tsr_cuda_scale(void *stream, tsr_dtype_t t, int m, int n, double alpha, void *A, int lda);
int tsr_cuda_add(void *stream, tsr_dtype_t t, int m, int n, double alpha, const void *A, int lda,
                 double beta, void *B, int ldb);
int tsr_cuda_zero(void *stream, tsr_dtype_t t, int m, int n, void *A, int lda);
#ifdef __cplusplus
}
#endif
#endif
