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
/* The op kit's bf16 path for ops without bf16 CUDA kernels (runtime/op.c):
 * rows x cols x depth elements, column c of matrix z at z * ldz + c * ld in
 * both arrays, converted bf16 -> float / float -> bf16 (rounded to nearest
 * even); and stream-ordered device scratch (cudaMallocAsync / cudaFreeAsync). */
int tsr_cuda_bf16_to_float(void *stream, const void *src, float *dst, int rows, int cols, int depth, size_t ld,
                           size_t ldz);
int tsr_cuda_float_to_bf16(void *stream, const float *src, void *dst, int rows, int cols, int depth, size_t ld,
                           size_t ldz);
int tsr_cuda_scratch_alloc(void *stream, size_t bytes, void **ptr);
int tsr_cuda_scratch_free(void *stream, void *ptr);
#ifdef __cplusplus
}
#endif
#endif
