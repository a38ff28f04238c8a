/* CUDA LayerNorm and residual tile kernels (float32; residual also float64).
 * Feature-major tiles as on the CPU: token t's m features at x + t * ldx.
 * Per-token reductions: one warp per token, two passes (mean, then squared
 * deviations) as llm.c; element-wise passes: one thread per element.
 * Asynchronous on the caller's stream. */
#include <cuda_runtime.h>
#include "tsr_compute_layernorm.h"
#include "tsr_cuda_util.cuh"

namespace {

typedef __nv_bfloat16 bf; /* the bf16 storage type, for the typed entry points' casts */
const int kWarp = 32;
const int kTokensPerBlock = 4; /* warps per block, one token each */

dim3 token_block() { return dim3(kWarp, kTokensPerBlock); }
dim3 token_grid(int n) { return dim3((unsigned)((n + kTokensPerBlock - 1) / kTokensPerBlock)); }

__device__ float warp_sum(float v) { return warp_reduce(v, SumOp()); }

/* sum_r xt[r] of a token's m features, in every lane of its warp. */
template <typename T>
__device__ float token_sum(int m, const T *xt)
{
    float s = 0.0f;
    for (int r = threadIdx.x; r < m; r += kWarp)
        s += load(&xt[r]);
    return warp_sum(s);
}

/* sum_r (xt[r] - mu)^2 of a token's m features, in every lane of its warp. */
template <typename T>
__device__ float token_sqdev(int m, const T *xt, float mu)
{
    float v = 0.0f;
    for (int r = threadIdx.x; r < m; r += kWarp) {
        float d = load(&xt[r]) - mu;
        v += d * d;
    }
    return warp_sum(v);
}

/* In the per-token kernels the whole warp of token t takes the same
 * branches: the warp-wide shuffles are safe. The kernels templated over T
 * (the storage type of every operand: float, or bf16 read into float and
 * rounded on store) compute in float either way. */

template <typename T>
__global__ void ln_fwd_kernel(int m, int n, const T *x, int ldx, const T *w, const T *b, T *out, int ldo, T *mean,
                              int incm, T *rstd, int incr, float eps)
{
    int t = blockIdx.x * blockDim.y + threadIdx.y, lane = threadIdx.x;
    if (t >= n)
        return;
    const T *xt = x + (size_t)t * ldx;
    float mu = token_sum(m, xt) / m;
    float rs = 1.0f / sqrtf(token_sqdev(m, xt, mu) / m + eps);
    T *ot = out + (size_t)t * ldo;
    for (int r = lane; r < m; r += kWarp)
        store(&ot[r], rs * (load(&xt[r]) - mu) * load(&w[r]) + load(&b[r]));
    if (lane == 0) { /* out above used mu and rs unrounded, as the conversion path does */
        store(&mean[(size_t)t * incm], mu);
        store(&rstd[(size_t)t * incr], rs);
    }
}

__global__ void ln_sum_kernel(int m, int n, const float *x, int ldx, float *s, int incs, tsr_write_t mode)
{
    int t = blockIdx.x * blockDim.y + threadIdx.y, lane = threadIdx.x;
    if (t >= n)
        return;
    const float *xt = x + (size_t)t * ldx;
    float a = token_sum(m, xt);
    if (lane == 0) {
        float *st = &s[(size_t)t * incs];
        *st = mode == TSR_ACCUMULATE ? *st + a : a;
    }
}

__global__ void ln_sqdev_kernel(int m, int n, const float *x, int ldx, const float *s, int incs, int C, float *q,
                                int incq, tsr_write_t mode)
{
    int t = blockIdx.x * blockDim.y + threadIdx.y, lane = threadIdx.x;
    if (t >= n)
        return;
    const float *xt = x + (size_t)t * ldx;
    float mu = s[(size_t)t * incs] / C, v = token_sqdev(m, xt, mu);
    if (lane == 0) {
        float *qt = &q[(size_t)t * incq];
        *qt = mode == TSR_ACCUMULATE ? *qt + v : v;
    }
}

__global__ void ln_stats_kernel(int n, int C, float eps, float *mean, int incm, float *rstd, int incr)
{
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < n; t += gridDim.x * blockDim.x) {
        float *mt = &mean[(size_t)t * incm], *rt = &rstd[(size_t)t * incr];
        *mt = *mt / C;
        *rt = 1.0f / sqrtf(*rt / C + eps);
    }
}

__global__ void ln_normalize_kernel(int m, int n, const float *x, int ldx, const float *w, const float *b,
                                    const float *mean, int incm, const float *rstd, int incr, float *out, int ldo)
{
    TSR_CUDA_TILE_LOOP(r, t, m, n) {
        float nrm = rstd[(size_t)t * incr] * (x[(size_t)t * ldx + r] - mean[(size_t)t * incm]);
        out[(size_t)t * ldo + r] = nrm * w[r] + b[r];
    }
}

/* sum_r dnorm and sum_r dnorm * norm of token t, in every lane. */
template <typename T>
__device__ void token_bwd_sums(int m, const T *dt, const T *xt, const T *w, float mu, float s, float *a, float *c)
{
    float sa = 0.0f, sc = 0.0f;
    for (int r = threadIdx.x; r < m; r += kWarp) {
        float norm = (load(&xt[r]) - mu) * s;
        float dnorm = load(&w[r]) * load(&dt[r]);
        sa += dnorm;
        sc += dnorm * norm;
    }
    *a = warp_sum(sa);
    *c = warp_sum(sc);
}

template <typename T>
__global__ void ln_bwd_kernel(int m, int n, const T *dout, int lddo, const T *x, int ldx, const T *w, const T *mean,
                              int incm, const T *rstd, int incr, T *dinp, int lddi, tsr_write_t mode)
{
    int t = blockIdx.x * blockDim.y + threadIdx.y, lane = threadIdx.x;
    if (t >= n)
        return;
    const T *dt = dout + (size_t)t * lddo, *xt = x + (size_t)t * ldx;
    float mu = load(&mean[(size_t)t * incm]), s = load(&rstd[(size_t)t * incr]), a, c;
    token_bwd_sums(m, dt, xt, w, mu, s, &a, &c);
    float dnorm_mean = a / m, dnorm_norm_mean = c / m;
    T *di = dinp + (size_t)t * lddi;
    for (int r = lane; r < m; r += kWarp) {
        float norm = (load(&xt[r]) - mu) * s;
        float dval = (load(&w[r]) * load(&dt[r]) - dnorm_mean - norm * dnorm_norm_mean) * s;
        store(&di[r], mode == TSR_ACCUMULATE ? load(&di[r]) + dval : dval);
    }
}

__global__ void ln_bwd_sums_kernel(int m, int n, const float *dout, int lddo, const float *x, int ldx,
                                   const float *w, const float *mean, int incm, const float *rstd, int incr,
                                   float *sums, int lds, tsr_write_t mode)
{
    int t = blockIdx.x * blockDim.y + threadIdx.y;
    if (t >= n)
        return;
    float a, c;
    token_bwd_sums(m, dout + (size_t)t * lddo, x + (size_t)t * ldx, w, mean[(size_t)t * incm],
                   rstd[(size_t)t * incr], &a, &c);
    if (threadIdx.x == 0) {
        float *st = &sums[(size_t)t * lds];
        st[0] = mode == TSR_ACCUMULATE ? st[0] + a : a;
        st[1] = mode == TSR_ACCUMULATE ? st[1] + c : c;
    }
}

__global__ void ln_bwd_dinp_kernel(int m, int n, const float *dout, int lddo, const float *x, int ldx,
                                   const float *w, const float *mean, int incm, const float *rstd, int incr,
                                   const float *sums, int lds, int C, float *dinp, int lddi, tsr_write_t mode)
{
    TSR_CUDA_TILE_LOOP(r, t, m, n) {
        const float *st = &sums[(size_t)t * lds];
        float mu = mean[(size_t)t * incm], s = rstd[(size_t)t * incr];
        float norm = (x[(size_t)t * ldx + r] - mu) * s;
        float dnorm = w[r] * dout[(size_t)t * lddo + r];
        float dval = (dnorm - st[0] / C - norm * (st[1] / C)) * s;
        float *di = &dinp[(size_t)t * lddi + r];
        *di = mode == TSR_ACCUMULATE ? *di + dval : dval;
    }
}

/* dw and db in two passes, so that a tile of a few hundred features still
 * fills the GPU: blocks of 32 features x 8 token lanes each sum a chunk of
 * the tokens (consecutive threads read consecutive features), then one
 * thread per feature adds the chunks' sums in order (deterministic). */
const int kParamFeatures = 32, kParamLanes = 8;
const int kParamMaxChunks = 32, kParamMinChunkTokens = 32;

int param_chunks(int n)
{
    int c = (n + kParamMinChunkTokens - 1) / kParamMinChunkTokens;
    return c < kParamMaxChunks ? c : kParamMaxChunks;
}

/* part[2c m + r]: chunk c's sum of dout * norm for feature r; part[(2c + 1) m + r]: of dout (float). */
template <typename T>
__global__ void ln_bwd_params_part_kernel(int m, int n, int chunk, const T *dout, int lddo, const T *x, int ldx,
                                          const T *mean, int incm, const T *rstd, int incr, float *part)
{
    __shared__ float sw[kParamLanes][kParamFeatures], sb[kParamLanes][kParamFeatures];
    int r = blockIdx.x * kParamFeatures + threadIdx.x, c = blockIdx.y;
    int t1 = min(n, (c + 1) * chunk);
    float gw = 0.0f, gb = 0.0f;
    if (r < m)
        for (int t = c * chunk + threadIdx.y; t < t1; t += kParamLanes) {
            float g = load(&dout[(size_t)t * lddo + r]);
            gb += g;
            gw += (load(&x[(size_t)t * ldx + r]) - load(&mean[(size_t)t * incm])) * load(&rstd[(size_t)t * incr]) * g;
        }
    sw[threadIdx.y][threadIdx.x] = gw;
    sb[threadIdx.y][threadIdx.x] = gb;
    __syncthreads();
    if (threadIdx.y == 0 && r < m) {
        for (int l = 1; l < kParamLanes; l++) {
            gw += sw[l][threadIdx.x];
            gb += sb[l][threadIdx.x];
        }
        part[(size_t)(2 * c) * m + r] = gw;
        part[(size_t)(2 * c + 1) * m + r] = gb;
    }
}

/* dw, db (T) = what they held (accumulating) + the chunks' sums, rounded once. */
template <typename T>
__global__ void ln_bwd_params_sum_kernel(int m, int nchunks, const float *part, T *dw, tsr_write_t dw_mode, T *db,
                                         tsr_write_t db_mode)
{
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < m; r += gridDim.x * blockDim.x) {
        float gw = dw_mode == TSR_ACCUMULATE ? load(&dw[r]) : 0.0f;
        float gb = db_mode == TSR_ACCUMULATE ? load(&db[r]) : 0.0f;
        for (int c = 0; c < nchunks; c++) {
            gw += part[(size_t)(2 * c) * m + r];
            gb += part[(size_t)(2 * c + 1) * m + r];
        }
        store(&dw[r], gw);
        store(&db[r], gb);
    }
}

template <typename T>
int launch_bwd_params(cudaStream_t s, int m, int n, const T *dout, int lddo, const T *x, int ldx, const T *mean,
                      int incm, const T *rstd, int incr, T *dw, tsr_write_t dw_mode, T *db, tsr_write_t db_mode)
{
    int nchunks = n > 0 ? param_chunks(n) : 0, rc;
    StreamBuffer buf(s);
    size_t o_part = buf.add_scratch((size_t)2 * nchunks * m * sizeof(float));
    if ((rc = buf.upload()))
        return rc;
    float *part = buf.dev<float>(o_part);
    if (nchunks > 0) {
        dim3 grid((unsigned)((m + kParamFeatures - 1) / kParamFeatures), (unsigned)nchunks);
        int chunk = (n + nchunks - 1) / nchunks;
        ln_bwd_params_part_kernel<<<grid, dim3(kParamFeatures, kParamLanes), 0, s>>>(m, n, chunk, dout, lddo, x, ldx,
                                                                                     mean, incm, rstd, incr, part);
        if ((rc = launched()))
            return rc;
    }
    const int threads = 128;
    ln_bwd_params_sum_kernel<<<blocks_for(m, threads), threads, 0, s>>>(m, nchunks, part, dw, dw_mode, db,
                                                                       db_mode);
    return launched();
}

template <typename T>
__global__ void residual_kernel(int m, int n, const T *a, int lda, const T *b, int ldb, T *out, int ldo)
{
    TSR_CUDA_TILE_LOOP(r, c, m, n)
        out[(size_t)c * ldo + r] = a[(size_t)c * lda + r] + b[(size_t)c * ldb + r];
}

} /* namespace */

extern "C" int tsr_cuda_layernorm_fwd_typed(void *stream, tsr_dtype_t t, int m, int n, const void *x, int ldx,
                                            const void *w, const void *b, void *out, int ldo, void *mean, int incm,
                                            void *rstd, int incr, float eps)
{
    if (bad_type(t) || bad_tile(m, n, ldx) || bad_tile(m, n, ldo) || incm < 1 || incr < 1)
        return TSR_EINVAL;
    if (m == 0 || n == 0)
        return 0;
    cudaStream_t s = (cudaStream_t)stream;
    if (t == TSR_BFLOAT16)
        ln_fwd_kernel<<<token_grid(n), token_block(), 0, s>>>(m, n, (const bf *)x, ldx, (const bf *)w, (const bf *)b,
                                                              (bf *)out, ldo, (bf *)mean, incm, (bf *)rstd, incr, eps);
    else
        ln_fwd_kernel<<<token_grid(n), token_block(), 0, s>>>(m, n, (const float *)x, ldx, (const float *)w,
                                                              (const float *)b, (float *)out, ldo, (float *)mean, incm,
                                                              (float *)rstd, incr, eps);
    return launched();
}

extern "C" int tsr_cuda_layernorm_fwd(void *stream, int m, int n, const float *x, int ldx, const float *w,
                                      const float *b, float *out, int ldo, float *mean, int incm, float *rstd,
                                      int incr, float eps)
{
    return tsr_cuda_layernorm_fwd_typed(stream, TSR_FLOAT32, m, n, x, ldx, w, b, out, ldo, mean, incm, rstd, incr,
                                        eps);
}

extern "C" int tsr_cuda_layernorm_sum(void *stream, int m, int n, const float *x, int ldx, float *s, int incs,
                                      tsr_write_t mode)
{
    if (bad_tile(m, n, ldx) || incs < 1)
        return TSR_EINVAL;
    if (n == 0)
        return 0;
    ln_sum_kernel<<<token_grid(n), token_block(), 0, (cudaStream_t)stream>>>(m, n, x, ldx, s, incs, mode);
    return launched();
}

extern "C" int tsr_cuda_layernorm_sqdev(void *stream, int m, int n, const float *x, int ldx, const float *s,
                                        int incs, int C, float *q, int incq, tsr_write_t mode)
{
    if (bad_tile(m, n, ldx) || incs < 1 || incq < 1 || C < 1)
        return TSR_EINVAL;
    if (n == 0)
        return 0;
    ln_sqdev_kernel<<<token_grid(n), token_block(), 0, (cudaStream_t)stream>>>(m, n, x, ldx, s, incs, C, q, incq,
                                                                               mode);
    return launched();
}

extern "C" int tsr_cuda_layernorm_stats(void *stream, int n, int C, float eps, float *mean, int incm, float *rstd,
                                        int incr)
{
    if (n < 0 || C < 1 || incm < 1 || incr < 1)
        return TSR_EINVAL;
    if (n == 0)
        return 0;
    ln_stats_kernel<<<blocks_for(n, kThreads), kThreads, 0, (cudaStream_t)stream>>>(n, C, eps, mean, incm, rstd,
                                                                                    incr);
    return launched();
}

extern "C" int tsr_cuda_layernorm_normalize(void *stream, int m, int n, const float *x, int ldx, const float *w,
                                            const float *b, const float *mean, int incm, const float *rstd,
                                            int incr, float *out, int ldo)
{
    if (bad_tile(m, n, ldx) || bad_tile(m, n, ldo) || incm < 1 || incr < 1)
        return TSR_EINVAL;
    if (m == 0 || n == 0)
        return 0;
    ln_normalize_kernel<<<grid2d(m, n), block2d(), 0, (cudaStream_t)stream>>>(m, n, x, ldx, w, b, mean, incm, rstd,
                                                                              incr, out, ldo);
    return launched();
}

extern "C" int tsr_cuda_layernorm_bwd_typed(void *stream, tsr_dtype_t t, int m, int n, const void *dout, int lddo,
                                            const void *x, int ldx, const void *w, const void *mean, int incm,
                                            const void *rstd, int incr, void *dinp, int lddi, tsr_write_t mode)
{
    if (bad_type(t) || bad_tile(m, n, lddo) || bad_tile(m, n, ldx) || bad_tile(m, n, lddi) || incm < 1 || incr < 1)
        return TSR_EINVAL;
    if (m == 0 || n == 0)
        return 0;
    cudaStream_t s = (cudaStream_t)stream;
    if (t == TSR_BFLOAT16)
        ln_bwd_kernel<<<token_grid(n), token_block(), 0, s>>>(m, n, (const bf *)dout, lddo, (const bf *)x, ldx,
                                                              (const bf *)w, (const bf *)mean, incm, (const bf *)rstd,
                                                              incr, (bf *)dinp, lddi, mode);
    else
        ln_bwd_kernel<<<token_grid(n), token_block(), 0, s>>>(m, n, (const float *)dout, lddo, (const float *)x, ldx,
                                                              (const float *)w, (const float *)mean, incm,
                                                              (const float *)rstd, incr, (float *)dinp, lddi, mode);
    return launched();
}

extern "C" int tsr_cuda_layernorm_bwd(void *stream, int m, int n, const float *dout, int lddo, const float *x,
                                      int ldx, const float *w, const float *mean, int incm, const float *rstd,
                                      int incr, float *dinp, int lddi, tsr_write_t mode)
{
    return tsr_cuda_layernorm_bwd_typed(stream, TSR_FLOAT32, m, n, dout, lddo, x, ldx, w, mean, incm, rstd, incr,
                                        dinp, lddi, mode);
}

extern "C" int tsr_cuda_layernorm_bwd_sums(void *stream, int m, int n, const float *dout, int lddo, const float *x,
                                           int ldx, const float *w, const float *mean, int incm, const float *rstd,
                                           int incr, float *sums, int lds, tsr_write_t mode)
{
    if (bad_tile(m, n, lddo) || bad_tile(m, n, ldx) || incm < 1 || incr < 1 || lds < 2)
        return TSR_EINVAL;
    if (n == 0)
        return 0;
    ln_bwd_sums_kernel<<<token_grid(n), token_block(), 0, (cudaStream_t)stream>>>(
        m, n, dout, lddo, x, ldx, w, mean, incm, rstd, incr, sums, lds, mode);
    return launched();
}

extern "C" int tsr_cuda_layernorm_bwd_dinp(void *stream, int m, int n, const float *dout, int lddo, const float *x,
                                           int ldx, const float *w, const float *mean, int incm, const float *rstd,
                                           int incr, const float *sums, int lds, int C, float *dinp, int lddi,
                                           tsr_write_t mode)
{
    if (bad_tile(m, n, lddo) || bad_tile(m, n, ldx) || bad_tile(m, n, lddi) || incm < 1 || incr < 1 || lds < 2 ||
        C < 1)
        return TSR_EINVAL;
    if (m == 0 || n == 0)
        return 0;
    ln_bwd_dinp_kernel<<<grid2d(m, n), block2d(), 0, (cudaStream_t)stream>>>(
        m, n, dout, lddo, x, ldx, w, mean, incm, rstd, incr, sums, lds, C, dinp, lddi, mode);
    return launched();
}

extern "C" int tsr_cuda_layernorm_bwd_params_typed(void *stream, tsr_dtype_t t, int m, int n, const void *dout,
                                                   int lddo, const void *x, int ldx, const void *mean, int incm,
                                                   const void *rstd, int incr, void *dw, tsr_write_t dw_mode, void *db,
                                                   tsr_write_t db_mode)
{
    if (bad_type(t) || bad_tile(m, n, lddo) || bad_tile(m, n, ldx) || incm < 1 || incr < 1)
        return TSR_EINVAL;
    if (m == 0)
        return 0;
    cudaStream_t s = (cudaStream_t)stream;
    if (t == TSR_BFLOAT16)
        return launch_bwd_params(s, m, n, (const bf *)dout, lddo, (const bf *)x, ldx, (const bf *)mean, incm,
                                 (const bf *)rstd, incr, (bf *)dw, dw_mode, (bf *)db, db_mode);
    return launch_bwd_params(s, m, n, (const float *)dout, lddo, (const float *)x, ldx, (const float *)mean, incm,
                             (const float *)rstd, incr, (float *)dw, dw_mode, (float *)db, db_mode);
}

extern "C" int tsr_cuda_layernorm_bwd_params(void *stream, int m, int n, const float *dout, int lddo,
                                             const float *x, int ldx, const float *mean, int incm,
                                             const float *rstd, int incr, float *dw, tsr_write_t dw_mode, float *db,
                                             tsr_write_t db_mode)
{
    return tsr_cuda_layernorm_bwd_params_typed(stream, TSR_FLOAT32, m, n, dout, lddo, x, ldx, mean, incm, rstd, incr,
                                               dw, dw_mode, db, db_mode);
}

extern "C" int tsr_cuda_residual_fwd(void *stream, tsr_dtype_t t, int m, int n, const void *a, int lda,
                                     const void *b, int ldb, void *out, int ldo)
{
    if ((t != TSR_FLOAT32 && t != TSR_FLOAT64) || bad_tile(m, n, lda) || bad_tile(m, n, ldb) || bad_tile(m, n, ldo))
        return TSR_EINVAL;
    if (m == 0 || n == 0)
        return 0;
    cudaStream_t s = (cudaStream_t)stream;
    if (t == TSR_FLOAT64)
        residual_kernel<double><<<grid2d(m, n), block2d(), 0, s>>>(m, n, (const double *)a, lda, (const double *)b,
                                                                   ldb, (double *)out, ldo);
    else
        residual_kernel<float><<<grid2d(m, n), block2d(), 0, s>>>(m, n, (const float *)a, lda, (const float *)b, ldb,
                                                                  (float *)out, ldo);
    return launched();
}
