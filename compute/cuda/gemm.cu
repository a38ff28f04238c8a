/* CUDA tile kernels: GEMM through cuBLAS, element-wise ops as small
 * templated kernels. Column-major with leading dimensions, device pointers,
 * asynchronous on the caller's stream (the cuBLAS handle's stream for GEMM). */
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include "tsr_compute_cuda.h"
#include "tsr_cuda_util.cuh"

namespace {

bool bad_args(tsr_dtype_t t, int m, int n, int ld)
{
    return (t != TSR_FLOAT32 && t != TSR_FLOAT64 && t != TSR_BFLOAT16) || bad_tile(m, n, ld);
}

/* T: the storage type; C: the arithmetic (float for bf16) */
template <typename T, typename C = typename Compute<T>::type>
__global__ void scale_kernel(int m, int n, C alpha, T *A, int lda)
{
    TSR_CUDA_TILE_LOOP(r, c, m, n) {
        T *a = A + (size_t)c * lda + r;
        store(a, alpha * load(a));
    }
}

/* read_b: beta != 0 as the CPU tests it (on the double), so that a beta that
 * rounds to 0 in float still reads B as on the CPU. */
template <typename T, typename C = typename Compute<T>::type>
__global__ void add_kernel(int m, int n, C alpha, const T *A, int lda, C beta, bool read_b, T *B, int ldb)
{
    TSR_CUDA_TILE_LOOP(r, c, m, n) {
        T *b = B + (size_t)c * ldb + r;
        C v = alpha * load(A + (size_t)c * lda + r);
        store(b, read_b ? v + beta * load(b) : v); /* beta == 0: B is not read */
    }
}

template <typename T>
int launch_scale(cudaStream_t s, int m, int n, double alpha, void *A, int lda)
{
    using C = typename Compute<T>::type;
    scale_kernel<T><<<grid2d(m, n), block2d(), 0, s>>>(m, n, (C)alpha, (T *)A, lda);
    return launched();
}

template <typename T>
int launch_add(cudaStream_t s, int m, int n, double alpha, const void *A, int lda, double beta, void *B, int ldb)
{
    using C = typename Compute<T>::type;
    add_kernel<T><<<grid2d(m, n), block2d(), 0, s>>>(m, n, (C)alpha, (const T *)A, lda, (C)beta, beta != 0.0,
                                                     (T *)B, ldb);
    return launched();
}

/* dst = src element by element in dst's type, over depth matrices */
template <typename S, typename D>
__global__ void convert_kernel(const S *src, D *dst, int rows, int cols, int depth, size_t ld, size_t ldz)
{
    for (int z = 0; z < depth; z++)
        TSR_CUDA_TILE_LOOP(r, c, rows, cols) {
            size_t at = (size_t)z * ldz + (size_t)c * ld + r;
            store(dst + at, load(src + at));
        }
}

template <typename S, typename D>
int convert(void *stream, const S *src, D *dst, int rows, int cols, int depth, size_t ld, size_t ldz)
{
    if (rows < 0 || cols < 0 || depth < 0 || ld < (size_t)rows)
        return TSR_EINVAL;
    if (rows == 0 || cols == 0 || depth == 0)
        return 0;
    convert_kernel<<<grid2d(rows, cols), block2d(), 0, (cudaStream_t)stream>>>(src, dst, rows, cols, depth, ld, ldz);
    return launched();
}

} /* namespace */

extern "C" int tsr_cuda_gemm(void *cublas, tsr_dtype_t t, tsr_trans_t ta, tsr_trans_t tb,
                             int m, int n, int k, double alpha, const void *A, int lda,
                             const void *B, int ldb, double beta, void *C, int ldc)
{
    if (!cublas || k < 0 || bad_args(t, m, n, ldc))
        return TSR_EINVAL;
    if (m == 0 || n == 0)
        return 0;
    cublasHandle_t h = (cublasHandle_t)cublas;
    if (k == 0) { /* C = beta C, on the handle's stream; beta == 0: C is not read */
        cudaStream_t s;
        int rc = handle_stream(cublas, &s);
        if (rc)
            return rc;
        if (beta == 0.0)
            return tsr_cuda_zero(s, t, m, n, C, ldc);
        return beta == 1.0 ? 0 : tsr_cuda_scale(s, t, m, n, beta, C, ldc);
    }
    if (bad_gemm_lds(ta, tb, m, n, k, lda, ldb, ldc))
        return TSR_EINVAL;
    /* alpha and beta are host scalars: the handle must be in
     * CUBLAS_POINTER_MODE_HOST (the default, and StarPU's). */
    if (t == TSR_BFLOAT16) { /* bf16 operands, float32 accumulation and scalars */
        float a = (float)alpha, b = (float)beta;
        return cublas_rc(cublasGemmEx(h, op(ta), op(tb), m, n, k, &a, A, CUDA_R_16BF, lda, B, CUDA_R_16BF, ldb, &b,
                                      C, CUDA_R_16BF, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
    if (t == TSR_FLOAT64)
        return cublas_rc(cublasDgemm(h, op(ta), op(tb), m, n, k, &alpha, (const double *)A, lda,
                                     (const double *)B, ldb, &beta, (double *)C, ldc));
    float a = (float)alpha, b = (float)beta;
    return cublas_rc(cublasSgemm(h, op(ta), op(tb), m, n, k, &a, (const float *)A, lda, (const float *)B, ldb, &b,
                                 (float *)C, ldc));
}

extern "C" int tsr_cuda_scale(void *stream, tsr_dtype_t t, int m, int n, double alpha,
                              void *A, int lda)
{
    if (bad_args(t, m, n, lda))
        return TSR_EINVAL;
    if (m == 0 || n == 0)
        return 0;
    cudaStream_t s = (cudaStream_t)stream;
    if (t == TSR_BFLOAT16)
        return launch_scale<__nv_bfloat16>(s, m, n, alpha, A, lda);
    return t == TSR_FLOAT64 ? launch_scale<double>(s, m, n, alpha, A, lda)
                            : launch_scale<float>(s, m, n, alpha, A, lda);
}

extern "C" int tsr_cuda_add(void *stream, tsr_dtype_t t, int m, int n, double alpha,
                            const void *A, int lda, double beta, void *B, int ldb)
{
    if (bad_args(t, m, n, lda) || bad_args(t, m, n, ldb))
        return TSR_EINVAL;
    if (m == 0 || n == 0)
        return 0;
    cudaStream_t s = (cudaStream_t)stream;
    if (t == TSR_BFLOAT16)
        return launch_add<__nv_bfloat16>(s, m, n, alpha, A, lda, beta, B, ldb);
    return t == TSR_FLOAT64 ? launch_add<double>(s, m, n, alpha, A, lda, beta, B, ldb)
                            : launch_add<float>(s, m, n, alpha, A, lda, beta, B, ldb);
}

extern "C" int tsr_cuda_zero(void *stream, tsr_dtype_t t, int m, int n, void *A, int lda)
{
    if (bad_args(t, m, n, lda))
        return TSR_EINVAL;
    if (m == 0 || n == 0)
        return 0;
    size_t es = tsr_dtype_size(t); /* +0 is all zero bits in every type */
    return cuda_rc(cudaMemset2DAsync(A, (size_t)lda * es, 0, (size_t)m * es, (size_t)n, (cudaStream_t)stream));
}

extern "C" int tsr_cuda_bf16_to_float(void *stream, const void *src, float *dst, int rows, int cols, int depth,
                                      size_t ld, size_t ldz)
{
    return convert(stream, (const __nv_bfloat16 *)src, dst, rows, cols, depth, ld, ldz);
}

extern "C" int tsr_cuda_float_to_bf16(void *stream, const float *src, void *dst, int rows, int cols, int depth,
                                      size_t ld, size_t ldz)
{
    return convert(stream, src, (__nv_bfloat16 *)dst, rows, cols, depth, ld, ldz);
}

extern "C" int tsr_cuda_scratch_alloc(void *stream, size_t bytes, void **ptr)
{
    keep_pool_memory();
    return cuda_rc(cudaMallocAsync(ptr, bytes, (cudaStream_t)stream));
}

extern "C" int tsr_cuda_scratch_free(void *stream, void *ptr)
{
    return cuda_rc(cudaFreeAsync(ptr, (cudaStream_t)stream));
}
