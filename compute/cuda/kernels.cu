/* CUDA tile kernels: GEMM through cuBLAS, element-wise ops as small
 * templated kernels. Column-major with leading dimensions, device pointers,
 * asynchronous on the caller's stream (the cuBLAS handle's stream for GEMM). */
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include "tsr_compute_cuda.h"

namespace {

const dim3 kBlock(32, 8); /* 32 rows (coalesced) x 8 columns per block */

/* A 2D grid over (rows, cols); the kernels stride over what it does not cover. */
dim3 grid_for(int m, int n)
{
    unsigned gx = (unsigned)((m + kBlock.x - 1) / kBlock.x);
    unsigned gy = (unsigned)((n + kBlock.y - 1) / kBlock.y);
    return dim3(gx, gy < 65535u ? gy : 65535u);
}

bool bad_args(tsr_dtype_t t, int m, int n, int ld)
{
    return (t != TSR_FLOAT32 && t != TSR_FLOAT64) || m < 0 || n < 0 || ld < (m > 1 ? m : 1);
}

template <typename T>
__global__ void scale_kernel(int m, int n, T alpha, T *A, int lda)
{
    for (int c = blockIdx.y * blockDim.y + threadIdx.y; c < n; c += gridDim.y * blockDim.y)
        for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < m; r += gridDim.x * blockDim.x)
            A[(size_t)c * lda + r] *= alpha;
}

template <typename T>
__global__ void add_kernel(int m, int n, T alpha, const T *A, int lda, T beta, T *B, int ldb)
{
    const bool read_b = beta != T(0);
    for (int c = blockIdx.y * blockDim.y + threadIdx.y; c < n; c += gridDim.y * blockDim.y)
        for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < m; r += gridDim.x * blockDim.x) {
            T *b = B + (size_t)c * ldb + r;
            T v = alpha * A[(size_t)c * lda + r];
            *b = read_b ? v + beta * *b : v; /* beta == 0: B is not read */
        }
}

template <typename T>
int launch_scale(cudaStream_t s, int m, int n, double alpha, void *A, int lda)
{
    scale_kernel<T><<<grid_for(m, n), kBlock, 0, s>>>(m, n, (T)alpha, (T *)A, lda);
    return cudaGetLastError() == cudaSuccess ? 0 : TSR_ERUNTIME;
}

template <typename T>
int launch_add(cudaStream_t s, int m, int n, double alpha, const void *A, int lda,
               double beta, void *B, int ldb)
{
    add_kernel<T><<<grid_for(m, n), kBlock, 0, s>>>(m, n, (T)alpha, (const T *)A, lda,
                                                    (T)beta, (T *)B, ldb);
    return cudaGetLastError() == cudaSuccess ? 0 : TSR_ERUNTIME;
}

cublasOperation_t op(tsr_trans_t t) { return t == TSR_TRANS ? CUBLAS_OP_T : CUBLAS_OP_N; }

} /* namespace */

extern "C" int tsr_cuda_gemm(void *handle, tsr_dtype_t t, tsr_trans_t ta, tsr_trans_t tb,
                             int m, int n, int k, double alpha, const void *A, int lda,
                             const void *B, int ldb, double beta, void *C, int ldc)
{
    if (!handle || k < 0 || bad_args(t, m, n, ldc))
        return TSR_EINVAL;
    if (m == 0 || n == 0)
        return 0;
    cublasHandle_t h = (cublasHandle_t)handle;
    if (k == 0) { /* C = beta C, on the handle's stream; beta == 0: C is not read */
        cudaStream_t s;
        if (cublasGetStream(h, &s) != CUBLAS_STATUS_SUCCESS)
            return TSR_ERUNTIME;
        if (beta == 0.0)
            return tsr_cuda_zero(s, t, m, n, C, ldc);
        return beta == 1.0 ? 0 : tsr_cuda_scale(s, t, m, n, beta, C, ldc);
    }
    /* alpha and beta are host scalars: the handle must be in
     * CUBLAS_POINTER_MODE_HOST (the default, and StarPU's). */
    cublasStatus_t st;
    if (t == TSR_FLOAT64) {
        st = cublasDgemm(h, op(ta), op(tb), m, n, k, &alpha, (const double *)A, lda,
                         (const double *)B, ldb, &beta, (double *)C, ldc);
    } else {
        float a = (float)alpha, b = (float)beta;
        st = cublasSgemm(h, op(ta), op(tb), m, n, k, &a, (const float *)A, lda,
                         (const float *)B, ldb, &b, (float *)C, ldc);
    }
    return st == CUBLAS_STATUS_SUCCESS ? 0 : TSR_ERUNTIME;
}

extern "C" int tsr_cuda_scale(void *stream, tsr_dtype_t t, int m, int n, double alpha,
                              void *A, int lda)
{
    if (bad_args(t, m, n, lda))
        return TSR_EINVAL;
    if (m == 0 || n == 0)
        return 0;
    cudaStream_t s = (cudaStream_t)stream;
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
    return t == TSR_FLOAT64 ? launch_add<double>(s, m, n, alpha, A, lda, beta, B, ldb)
                            : launch_add<float>(s, m, n, alpha, A, lda, beta, B, ldb);
}

extern "C" int tsr_cuda_zero(void *stream, tsr_dtype_t t, int m, int n, void *A, int lda)
{
    if (bad_args(t, m, n, lda))
        return TSR_EINVAL;
    if (m == 0 || n == 0)
        return 0;
    size_t es = t == TSR_FLOAT64 ? sizeof(double) : sizeof(float);
    cudaError_t e = cudaMemset2DAsync(A, (size_t)lda * es, 0, (size_t)m * es, (size_t)n,
                                      (cudaStream_t)stream);
    return e == cudaSuccess ? 0 : TSR_ERUNTIME;
}
