/* CUDA LayerNorm and residual tile kernels (float32; residual also float64).
 * Feature-major tiles as on the CPU: token t's m features at x + t * ldx.
 * Per-token reductions: one warp per token, two passes (mean, then squared
 * deviations) as llm.c. Asynchronous on the caller's stream. */
#include <cuda_runtime.h>
#include "tsr_compute_layernorm.h"

namespace {

const int kWarp = 32;
const int kTokensPerBlock = 4; /* warps per block, one token each */

__device__ float warp_sum(float v)
{
    for (int o = kWarp / 2; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* The whole warp of token t takes the same branch: the warp-wide shuffles are safe. */
__global__ void ln_fwd_kernel(int m, int n, const float *x, int ldx, const float *w, const float *b, float *out,
                              int ldo, float *mean, int incm, float *rstd, int incr, float eps)
{
    int t = blockIdx.x * blockDim.y + threadIdx.y, lane = threadIdx.x;
    if (t >= n)
        return;
    const float *xt = x + (size_t)t * ldx;
    float s = 0.0f;
    for (int r = lane; r < m; r += kWarp)
        s += xt[r];
    float mu = warp_sum(s) / m;
    float v = 0.0f;
    for (int r = lane; r < m; r += kWarp) {
        float d = xt[r] - mu;
        v += d * d;
    }
    float rs = 1.0f / sqrtf(warp_sum(v) / m + eps);
    float *ot = out + (size_t)t * ldo;
    for (int r = lane; r < m; r += kWarp)
        ot[r] = rs * (xt[r] - mu) * w[r] + b[r];
    if (lane == 0) {
        mean[(size_t)t * incm] = mu;
        rstd[(size_t)t * incr] = rs;
    }
}

__global__ void ln_bwd_kernel(int m, int n, const float *dout, int lddo, const float *x, int ldx, const float *w,
                              const float *mean, int incm, const float *rstd, int incr, float *dinp, int lddi,
                              int accumulate)
{
    int t = blockIdx.x * blockDim.y + threadIdx.y, lane = threadIdx.x;
    if (t >= n)
        return;
    const float *dt = dout + (size_t)t * lddo, *xt = x + (size_t)t * ldx;
    float mu = mean[(size_t)t * incm], s = rstd[(size_t)t * incr], a = 0.0f, c = 0.0f;
    for (int r = lane; r < m; r += kWarp) {
        float dnorm = w[r] * dt[r];
        a += dnorm;
        c += dnorm * (xt[r] - mu) * s;
    }
    float dnorm_mean = warp_sum(a) / m, dnorm_norm_mean = warp_sum(c) / m;
    float *di = dinp + (size_t)t * lddi;
    for (int r = lane; r < m; r += kWarp) {
        float norm = (xt[r] - mu) * s;
        float dval = (w[r] * dt[r] - dnorm_mean - norm * dnorm_norm_mean) * s;
        di[r] = accumulate ? di[r] + dval : dval;
    }
}

/* One thread per feature, tokens in order; consecutive threads read consecutive features. */
__global__ void ln_bwd_params_kernel(int m, int n, const float *dout, int lddo, const float *x, int ldx,
                                     const float *mean, int incm, const float *rstd, int incr, float *dw,
                                     int accumulate_w, float *db, int accumulate_b)
{
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < m; r += gridDim.x * blockDim.x) {
        float gw = accumulate_w ? dw[r] : 0.0f, gb = accumulate_b ? db[r] : 0.0f;
        for (int t = 0; t < n; t++) {
            float g = dout[(size_t)t * lddo + r];
            gb += g;
            gw += (x[(size_t)t * ldx + r] - mean[(size_t)t * incm]) * rstd[(size_t)t * incr] * g;
        }
        dw[r] = gw;
        db[r] = gb;
    }
}

template <typename T>
__global__ void residual_kernel(int m, int n, const T *a, int lda, const T *b, int ldb, T *out, int ldo)
{
    for (int c = blockIdx.y * blockDim.y + threadIdx.y; c < n; c += gridDim.y * blockDim.y)
        for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < m; r += gridDim.x * blockDim.x)
            out[(size_t)c * ldo + r] = a[(size_t)c * lda + r] + b[(size_t)c * ldb + r];
}

bool bad_tile(int m, int n, int ld) { return m < 0 || n < 0 || ld < (m > 1 ? m : 1); }

dim3 token_grid(int n) { return dim3((unsigned)((n + kTokensPerBlock - 1) / kTokensPerBlock)); }

int launched() { return cudaGetLastError() == cudaSuccess ? 0 : TSR_ERUNTIME; }

} /* namespace */

extern "C" int tsr_cuda_layernorm_fwd(void *stream, int m, int n, const float *x, int ldx, const float *w,
                                      const float *b, float *out, int ldo, float *mean, int incm, float *rstd,
                                      int incr, float eps)
{
    if (bad_tile(m, n, ldx) || bad_tile(m, n, ldo) || incm < 1 || incr < 1)
        return TSR_EINVAL;
    if (m == 0 || n == 0)
        return 0;
    ln_fwd_kernel<<<token_grid(n), dim3(kWarp, kTokensPerBlock), 0, (cudaStream_t)stream>>>(
        m, n, x, ldx, w, b, out, ldo, mean, incm, rstd, incr, eps);
    return launched();
}

extern "C" int tsr_cuda_layernorm_bwd(void *stream, int m, int n, const float *dout, int lddo, const float *x,
                                      int ldx, const float *w, const float *mean, int incm, const float *rstd,
                                      int incr, float *dinp, int lddi, int accumulate)
{
    if (bad_tile(m, n, lddo) || bad_tile(m, n, ldx) || bad_tile(m, n, lddi) || incm < 1 || incr < 1)
        return TSR_EINVAL;
    if (m == 0 || n == 0)
        return 0;
    ln_bwd_kernel<<<token_grid(n), dim3(kWarp, kTokensPerBlock), 0, (cudaStream_t)stream>>>(
        m, n, dout, lddo, x, ldx, w, mean, incm, rstd, incr, dinp, lddi, accumulate);
    return launched();
}

extern "C" int tsr_cuda_layernorm_bwd_params(void *stream, int m, int n, const float *dout, int lddo,
                                             const float *x, int ldx, const float *mean, int incm,
                                             const float *rstd, int incr, float *dw, int accumulate_w, float *db,
                                             int accumulate_b)
{
    if (bad_tile(m, n, lddo) || bad_tile(m, n, ldx) || incm < 1 || incr < 1)
        return TSR_EINVAL;
    if (m == 0)
        return 0;
    const int threads = 128;
    unsigned blocks = (unsigned)((m + threads - 1) / threads);
    ln_bwd_params_kernel<<<blocks, threads, 0, (cudaStream_t)stream>>>(m, n, dout, lddo, x, ldx, mean, incm, rstd,
                                                                        incr, dw, accumulate_w, db, accumulate_b);
    return launched();
}

extern "C" int tsr_cuda_residual_fwd(void *stream, tsr_dtype_t t, int m, int n, const void *a, int lda,
                                     const void *b, int ldb, void *out, int ldo)
{
    if ((t != TSR_FLOAT32 && t != TSR_FLOAT64) || bad_tile(m, n, lda) || bad_tile(m, n, ldb) || bad_tile(m, n, ldo))
        return TSR_EINVAL;
    if (m == 0 || n == 0)
        return 0;
    dim3 block(32, 8);
    unsigned gy = (unsigned)((n + block.y - 1) / block.y);
    dim3 grid((unsigned)((m + block.x - 1) / block.x), gy < 65535u ? gy : 65535u);
    cudaStream_t s = (cudaStream_t)stream;
    if (t == TSR_FLOAT64)
        residual_kernel<double><<<grid, block, 0, s>>>(m, n, (const double *)a, lda, (const double *)b, ldb,
                                                       (double *)out, ldo);
    else
        residual_kernel<float><<<grid, block, 0, s>>>(m, n, (const float *)a, lda, (const float *)b, ldb,
                                                      (float *)out, ldo);
    return launched();
}
