/* CUDA tile kernels of the fused linear layers (float32): head-chunked GEMM
 * (cuBLAS), bias fill / add, row sums, GeLU forward and backward and the
 * head reshape; column-major with leading dimensions, device pointers,
 * asynchronous on the caller's stream (the cuBLAS handle's for the GEMM).
 * Same formulas as compute/cpu/linear.c (tsr_compute_elem.h). */
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include "tsr_compute_cuda.h"
#include "tsr_compute_linear.h"
#include "tsr_compute_elem.h"
#include "tsr_cuda_util.cuh"

namespace {

/* T: the storage type (float, or bf16 computed in float) */
template <typename T>
__global__ void bias_fill_kernel(int m, int n, const T *bias, T *C, int ldc)
{
    TSR_CUDA_TILE_LOOP(r, c, m, n)
        C[(size_t)c * ldc + r] = bias[r];
}

__global__ void bias_add_kernel(int m, int n, const float *bias, float *C, int ldc)
{
    TSR_CUDA_TILE_LOOP(r, c, m, n)
        C[(size_t)c * ldc + r] += bias[r];
}

/* beta y as the CPU's y *= beta (rounded before the sums are added; beta == 0:
 * y is not read). */
template <typename T>
__device__ float scaled_y(float beta, const T *y)
{
    return beta == 0.0f ? 0.0f : beta == 1.0f ? load(y) : __fmul_rn(beta, load(y));
}

/* Row sums over the tokens [blockIdx.y * chunk, + chunk): each of the 8
 * thread rows of the block sums every 8th token, then the 8 partial sums are
 * added in order. part != NULL: written to part[blockIdx.y * m + r] (more
 * chunks follow); else y[r] = beta y[r] + the sum (a single chunk). */
template <typename T>
__global__ void rowsum_kernel(int m, int n, const T *X, int ldx, int chunk, float beta, T *y, float *part)
{
    __shared__ float partial[kTileCols][kTileRows];
    int r = blockIdx.x * kTileRows + threadIdx.x;
    int t0 = blockIdx.y * chunk, t1 = n - t0 < chunk ? n : t0 + chunk;
    float acc = 0.0f;
    if (r < m)
        for (int t = t0 + threadIdx.y; t < t1; t += kTileCols)
            acc += load(&X[(size_t)t * ldx + r]);
    partial[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && r < m) {
        float total = partial[0][threadIdx.x];
        for (int i = 1; i < kTileCols; i++)
            total += partial[i][threadIdx.x];
        if (part)
            part[(size_t)blockIdx.y * m + r] = total;
        else
            store(&y[r], scaled_y(beta, &y[r]) + total);
    }
}

/* y[r] = beta y[r] + the nchunks partial sums, in chunk order. */
template <typename T>
__global__ void rowsum_finish_kernel(int m, int nchunks, const float *part, float beta, T *y)
{
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < m; r += gridDim.x * blockDim.x) {
        float acc = scaled_y(beta, &y[r]);
        for (int c = 0; c < nchunks; c++)
            acc += part[(size_t)c * m + r];
        store(&y[r], acc);
    }
}

template <typename T>
__global__ void gelu_forward_kernel(int m, int n, const T *pre, int ldp, T *out, int ldo)
{
    TSR_CUDA_TILE_LOOP(r, c, m, n)
        store(&out[(size_t)c * ldo + r], tsr_elem_gelu(load(&pre[(size_t)c * ldp + r])));
}

template <typename T>
__global__ void gelu_backward_kernel(int m, int n, const T *pre, int ldp, const T *dout, int ldd, T *dpre, int lddp)
{
    TSR_CUDA_TILE_LOOP(r, c, m, n)
        store(&dpre[(size_t)c * lddp + r],
              load(&dout[(size_t)c * ldd + r]) * tsr_elem_gelu_grad(load(&pre[(size_t)c * ldp + r])));
}

/* Head matrix z per grid z, its overlap with X per grid (x, y), as
 * tsr_cpu_heads_copy. T: the storage type (beta 0: a copy, bitwise). */
template <typename T>
__global__ void heads_copy_kernel(tsr_heads_geom_t g, int to_heads, float beta, T *X, int xrows, int xcols, int ldx,
                                  T *Y, int depth, int yrows, int ycols, int ldy, size_t ystride)
{
    for (int z = blockIdx.z; z < depth; z += gridDim.z) {
        int r0, r1, t0, t1, xr, xc;
        if (!tsr_elem_head_overlap(&g, z, xrows, xcols, yrows, ycols, &r0, &r1, &t0, &t1, &xr, &xc))
            continue;
        for (int t = t0 + blockIdx.y * blockDim.y + threadIdx.y; t < t1; t += gridDim.y * blockDim.y)
            for (int r = r0 + blockIdx.x * blockDim.x + threadIdx.x; r < r1; r += gridDim.x * blockDim.x) {
                T *x = X + (size_t)(xc + t) * ldx + (xr + r), *y = Y + z * ystride + (size_t)t * ldy + r;
                T *dst = to_heads ? y : x;
                const T *src = to_heads ? x : y;
                if (beta == 0.0f)
                    *dst = *src;
                else
                    store(dst, load(src) + beta * load(dst));
            }
    }
}

/* Chunk c of an operand: cstride elements of type t per chunk. */
void *chunk_at(tsr_chunked_t x, tsr_dtype_t t, int c) { return (char *)x.p + (size_t)c * x.cstride * tsr_dtype_size(t); }

template <typename T>
int launch_rowsum(cudaStream_t s, int m, int n, const T *X, int ldx, float beta, T *y)
{
    if (n == 0) {
        rowsum_finish_kernel<<<blocks_for(m, kThreads), kThreads, 0, s>>>(m, 0, nullptr, beta, y);
        return launched();
    }
    int chunk = 256; /* tokens per block; more blocks than chunks of them fill the GPU for small m */
    if ((n + chunk - 1) / chunk > (int)kMaxGridY)
        chunk = (n + (int)kMaxGridY - 1) / (int)kMaxGridY;
    int nchunks = (n + chunk - 1) / chunk;
    dim3 grid((unsigned)((m + kTileRows - 1) / kTileRows), (unsigned)nchunks);
    if (nchunks == 1) {
        rowsum_kernel<<<grid, block2d(), 0, s>>>(m, n, X, ldx, chunk, beta, y, nullptr);
        return launched();
    }
    StreamBuffer buf(s);
    size_t o_part = buf.add_scratch((size_t)nchunks * m * sizeof(float));
    int rc = buf.upload();
    if (rc)
        return rc;
    rowsum_kernel<<<grid, block2d(), 0, s>>>(m, n, X, ldx, chunk, beta, y, buf.dev<float>(o_part));
    if ((rc = launched()))
        return rc;
    rowsum_finish_kernel<<<blocks_for(m, kThreads), kThreads, 0, s>>>(m, nchunks, buf.dev<const float>(o_part), beta,
                                                                      y);
    return launched();
}

} /* namespace */

extern "C" int tsr_cuda_gemm_chunked(void *cublas, tsr_dtype_t t, tsr_trans_t ta, tsr_trans_t tb, int m, int n,
                                     int k, tsr_chunk_dim_t dim, int csize, float alpha, tsr_chunked_t A,
                                     tsr_chunked_t B, float beta, tsr_chunked_t C)
{
    if (!cublas || bad_type(t) || m < 0 || n < 0 || k < 0 ||
        (dim != TSR_CHUNK_NONE && dim != TSR_CHUNK_M && dim != TSR_CHUNK_N && dim != TSR_CHUNK_K))
        return TSR_EINVAL;
    int total = dim == TSR_CHUNK_M ? m : dim == TSR_CHUNK_N ? n : dim == TSR_CHUNK_K ? k : 0;
    if (dim == TSR_CHUNK_NONE || csize < 1 || csize >= total)
        return tsr_cuda_gemm(cublas, t, ta, tb, m, n, k, alpha, A.p, A.ld, B.p, B.ld, beta, C.p, C.ld);
    if (m == 0 || n == 0)
        return 0;
    /* every chunk but the last has csize rows / columns / terms */
    int mc = dim == TSR_CHUNK_M ? csize : m, nc = dim == TSR_CHUNK_N ? csize : n, kc = dim == TSR_CHUNK_K ? csize : k;
    if (kc > 0 && bad_gemm_lds(ta, tb, mc, nc, kc, A.ld, B.ld, C.ld))
        return TSR_EINVAL;
    int nfull = total / csize, done = 0, rc = 0;
    if (dim != TSR_CHUNK_K && nfull > 1 && k > 0 && C.cstride != 0) {
        /* the full chunks of M or N are independent GEMMs: one batched call */
        if (C.cstride > (size_t)INT64_MAX || A.cstride > (size_t)INT64_MAX || B.cstride > (size_t)INT64_MAX)
            return TSR_EINVAL;
        rc = gemm_strided_batched((cublasHandle_t)cublas, t, t, ta, tb, mc, nc, kc, alpha, A.p, A.ld,
                                  (long long)A.cstride, B.p, B.ld, (long long)B.cstride, beta, C.p, C.ld,
                                  (long long)C.cstride, nfull);
        done = nfull;
    }
    for (int c = done; !rc && c * csize < total; c++) {
        int len = total - c * csize < csize ? total - c * csize : csize;
        /* along K the chunks are summed: beta applies to the first one only */
        float b = dim == TSR_CHUNK_K && c > 0 ? 1.0f : beta;
        rc = tsr_cuda_gemm(cublas, t, ta, tb, dim == TSR_CHUNK_M ? len : m, dim == TSR_CHUNK_N ? len : n,
                           dim == TSR_CHUNK_K ? len : k, alpha, chunk_at(A, t, c), A.ld, chunk_at(B, t, c), B.ld, b,
                           chunk_at(C, t, c), C.ld);
    }
    return rc;
}

extern "C" int tsr_cuda_bias_fill_typed(void *stream, tsr_dtype_t t, int m, int n, const void *bias, void *C,
                                        int ldc)
{
    if (bad_type(t) || bad_tile(m, n, ldc))
        return TSR_EINVAL;
    if (m == 0 || n == 0)
        return 0;
    cudaStream_t s = (cudaStream_t)stream;
    size_t es = tsr_dtype_size(t);
    if (!bias)
        return cuda_rc(cudaMemset2DAsync(C, (size_t)ldc * es, 0, (size_t)m * es, (size_t)n, s));
    if (t == TSR_BFLOAT16)
        bias_fill_kernel<<<grid2d(m, n), block2d(), 0, s>>>(m, n, (const __nv_bfloat16 *)bias, (__nv_bfloat16 *)C,
                                                            ldc);
    else
        bias_fill_kernel<<<grid2d(m, n), block2d(), 0, s>>>(m, n, (const float *)bias, (float *)C, ldc);
    return launched();
}

extern "C" int tsr_cuda_bias_fill(void *stream, int m, int n, const float *bias, float *C, int ldc)
{
    return tsr_cuda_bias_fill_typed(stream, TSR_FLOAT32, m, n, bias, C, ldc);
}

extern "C" int tsr_cuda_bias_add(void *stream, int m, int n, const float *bias, float *C, int ldc)
{
    if (bad_tile(m, n, ldc) || !bias)
        return TSR_EINVAL;
    if (m == 0 || n == 0)
        return 0;
    bias_add_kernel<<<grid2d(m, n), block2d(), 0, (cudaStream_t)stream>>>(m, n, bias, C, ldc);
    return launched();
}

extern "C" int tsr_cuda_rowsum_typed(void *stream, tsr_dtype_t t, int m, int n, const void *X, int ldx, float beta,
                                     void *y)
{
    if (bad_type(t) || bad_tile(m, n, ldx) || (m > 0 && !y))
        return TSR_EINVAL;
    if (m == 0 || (n == 0 && beta == 1.0f))
        return 0;
    cudaStream_t s = (cudaStream_t)stream;
    if (t == TSR_BFLOAT16)
        return launch_rowsum(s, m, n, (const __nv_bfloat16 *)X, ldx, beta, (__nv_bfloat16 *)y);
    return launch_rowsum(s, m, n, (const float *)X, ldx, beta, (float *)y);
}

extern "C" int tsr_cuda_rowsum(void *stream, int m, int n, const float *X, int ldx, float beta, float *y)
{
    return tsr_cuda_rowsum_typed(stream, TSR_FLOAT32, m, n, X, ldx, beta, y);
}

extern "C" int tsr_cuda_gelu_forward_typed(void *stream, tsr_dtype_t t, int m, int n, const void *pre, int ldp,
                                           void *out, int ldo)
{
    if (bad_type(t) || bad_tile(m, n, ldp) || bad_tile(m, n, ldo))
        return TSR_EINVAL;
    if (m == 0 || n == 0)
        return 0;
    cudaStream_t s = (cudaStream_t)stream;
    if (t == TSR_BFLOAT16)
        gelu_forward_kernel<<<grid2d(m, n), block2d(), 0, s>>>(m, n, (const __nv_bfloat16 *)pre, ldp,
                                                               (__nv_bfloat16 *)out, ldo);
    else
        gelu_forward_kernel<<<grid2d(m, n), block2d(), 0, s>>>(m, n, (const float *)pre, ldp, (float *)out, ldo);
    return launched();
}

extern "C" int tsr_cuda_gelu_forward(void *stream, int m, int n, const float *pre, int ldp, float *out, int ldo)
{
    return tsr_cuda_gelu_forward_typed(stream, TSR_FLOAT32, m, n, pre, ldp, out, ldo);
}

extern "C" int tsr_cuda_gelu_backward_typed(void *stream, tsr_dtype_t t, int m, int n, const void *pre, int ldp,
                                            const void *dout, int ldd, void *dpre, int lddp)
{
    if (bad_type(t) || bad_tile(m, n, ldp) || bad_tile(m, n, ldd) || bad_tile(m, n, lddp))
        return TSR_EINVAL;
    if (m == 0 || n == 0)
        return 0;
    cudaStream_t s = (cudaStream_t)stream;
    if (t == TSR_BFLOAT16)
        gelu_backward_kernel<<<grid2d(m, n), block2d(), 0, s>>>(m, n, (const __nv_bfloat16 *)pre, ldp,
                                                                (const __nv_bfloat16 *)dout, ldd,
                                                                (__nv_bfloat16 *)dpre, lddp);
    else
        gelu_backward_kernel<<<grid2d(m, n), block2d(), 0, s>>>(m, n, (const float *)pre, ldp, (const float *)dout,
                                                                ldd, (float *)dpre, lddp);
    return launched();
}

extern "C" int tsr_cuda_gelu_backward(void *stream, int m, int n, const float *pre, int ldp, const float *dout,
                                      int ldd, float *dpre, int lddp)
{
    return tsr_cuda_gelu_backward_typed(stream, TSR_FLOAT32, m, n, pre, ldp, dout, ldd, dpre, lddp);
}

extern "C" int tsr_cuda_heads_copy_typed(void *stream, tsr_dtype_t t, const tsr_heads_geom_t *g, int to_heads,
                                         float beta, void *X, int xrows, int xcols, int ldx, void *Y, int depth,
                                         int yrows, int ycols, int ldy, size_t ystride)
{
    if (bad_type(t) || !g || g->NH < 1 || depth < 0 || bad_tile(xrows, xcols, ldx) || bad_tile(yrows, ycols, ldy))
        return TSR_EINVAL;
    /* the grid covers the largest overlap of a head matrix (none: nothing to do) */
    int rows = 0, cols = 0;
    for (int z = 0; z < depth; z++) {
        int r0, r1, t0, t1, xr, xc;
        if (tsr_elem_head_overlap(g, z, xrows, xcols, yrows, ycols, &r0, &r1, &t0, &t1, &xr, &xc)) {
            rows = r1 - r0 > rows ? r1 - r0 : rows;
            cols = t1 - t0 > cols ? t1 - t0 : cols;
        }
    }
    if (rows == 0)
        return 0;
    dim3 grid = grid2d(rows, cols);
    grid.z = (unsigned)depth < kMaxGridY ? (unsigned)depth : kMaxGridY;
    cudaStream_t s = (cudaStream_t)stream;
    if (t == TSR_BFLOAT16)
        heads_copy_kernel<<<grid, block2d(), 0, s>>>(*g, to_heads, beta, (__nv_bfloat16 *)X, xrows, xcols, ldx,
                                                     (__nv_bfloat16 *)Y, depth, yrows, ycols, ldy, ystride);
    else
        heads_copy_kernel<<<grid, block2d(), 0, s>>>(*g, to_heads, beta, (float *)X, xrows, xcols, ldx, (float *)Y,
                                                     depth, yrows, ycols, ldy, ystride);
    return launched();
}

extern "C" int tsr_cuda_heads_copy(void *stream, const tsr_heads_geom_t *g, int to_heads, float beta, float *X,
                                   int xrows, int xcols, int ldx, float *Y, int depth, int yrows, int ycols, int ldy,
                                   size_t ystride)
{
    return tsr_cuda_heads_copy_typed(stream, TSR_FLOAT32, g, to_heads, beta, X, xrows, xcols, ldx, Y, depth, yrows,
                                     ycols, ldy, ystride);
}
