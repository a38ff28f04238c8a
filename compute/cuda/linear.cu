/* CUDA element-wise kernels of the fused linear layers (float32): bias add,
 * GeLU forward and backward, column-major with leading dimensions, device
 * pointers, asynchronous on the caller's stream. Same formulas as
 * compute/cpu/linear.c (llm.c's tanh GeLU evaluated as x sigmoid(2u)). */
#include <cuda_runtime.h>
#include "tsr_compute_linear.h"

namespace {

const dim3 kBlock(32, 8); /* 32 rows (coalesced) x 8 columns per block */

dim3 grid_for(int m, int n)
{
    unsigned gx = (unsigned)((m + kBlock.x - 1) / kBlock.x);
    unsigned gy = (unsigned)((n + kBlock.y - 1) / kBlock.y);
    return dim3(gx, gy < 65535u ? gy : 65535u);
}

bool bad_args(int m, int n, int ld) { return m < 0 || n < 0 || ld < (m > 1 ? m : 1); }

__device__ float gelu_arg(float x) { return 0.7978845608028654f * (x + 0.044715f * x * x * x); }

__device__ float gelu(float x) { return x / (1.0f + expf(-2.0f * gelu_arg(x))); }

__device__ float gelu_grad(float x)
{
    float e = expf(-2.0f * gelu_arg(x)), s = 1.0f / (1.0f + e);
    float one_minus_s = isinf(e) ? 1.0f : e * s;
    return s + 2.0f * x * s * one_minus_s * 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * x * x);
}

__global__ void bias_add_kernel(int m, int n, const float *bias, float *C, int ldc)
{
    for (int c = blockIdx.y * blockDim.y + threadIdx.y; c < n; c += gridDim.y * blockDim.y)
        for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < m; r += gridDim.x * blockDim.x)
            C[(size_t)c * ldc + r] += bias[r];
}

__global__ void gelu_forward_kernel(int m, int n, const float *pre, int ldp, float *out, int ldo)
{
    for (int c = blockIdx.y * blockDim.y + threadIdx.y; c < n; c += gridDim.y * blockDim.y)
        for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < m; r += gridDim.x * blockDim.x)
            out[(size_t)c * ldo + r] = gelu(pre[(size_t)c * ldp + r]);
}

__global__ void gelu_backward_kernel(int m, int n, const float *pre, int ldp, const float *dout, int ldd,
                                     float *dpre, int lddp)
{
    for (int c = blockIdx.y * blockDim.y + threadIdx.y; c < n; c += gridDim.y * blockDim.y)
        for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < m; r += gridDim.x * blockDim.x)
            dpre[(size_t)c * lddp + r] = dout[(size_t)c * ldd + r] * gelu_grad(pre[(size_t)c * ldp + r]);
}

int launched(void) { return cudaGetLastError() == cudaSuccess ? 0 : TSR_ERUNTIME; }

} /* namespace */

extern "C" int tsr_cuda_bias_add(void *stream, int m, int n, const float *bias, float *C, int ldc)
{
    if (bad_args(m, n, ldc) || !bias)
        return TSR_EINVAL;
    if (m == 0 || n == 0)
        return 0;
    bias_add_kernel<<<grid_for(m, n), kBlock, 0, (cudaStream_t)stream>>>(m, n, bias, C, ldc);
    return launched();
}

extern "C" int tsr_cuda_gelu_forward(void *stream, int m, int n, const float *pre, int ldp, float *out, int ldo)
{
    if (bad_args(m, n, ldp) || bad_args(m, n, ldo))
        return TSR_EINVAL;
    if (m == 0 || n == 0)
        return 0;
    gelu_forward_kernel<<<grid_for(m, n), kBlock, 0, (cudaStream_t)stream>>>(m, n, pre, ldp, out, ldo);
    return launched();
}

extern "C" int tsr_cuda_gelu_backward(void *stream, int m, int n, const float *pre, int ldp, const float *dout,
                                      int ldd, float *dpre, int lddp)
{
    if (bad_args(m, n, ldp) || bad_args(m, n, ldd) || bad_args(m, n, lddp))
        return TSR_EINVAL;
    if (m == 0 || n == 0)
        return 0;
    gelu_backward_kernel<<<grid_for(m, n), kBlock, 0, (cudaStream_t)stream>>>(m, n, pre, ldp, dout, ldd, dpre,
                                                                              lddp);
    return launched();
}
