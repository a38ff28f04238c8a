/* CUDA kernels of the softmax cross-entropy: float32 or bf16 logits,
 * column-major with leading dimensions, device tiles, host index arrays
 * staged to the device in stream order, asynchronous on the caller's
 * stream. Same arithmetic as compute/cpu/crossentropy.c; see
 * tsr_compute_crossentropy.h. */
#include <cuda_runtime.h>
#include <stdlib.h>
#include "tsr_compute_crossentropy.h"
#include "tsr_compute_elem.h"
#include "tsr_cuda_util.cuh"

namespace {

/* One block per column: block-wide max, then block-wide sum of exp(x - max).
 * T: the logits' storage type (float, or bf16 read into float); the
 * statistics are float32 in either case. */
template <typename T>
__global__ void softmax_stats_kernel(int rows, int cols, const T *x, int ldx, float *stats, int lds, tsr_write_t mode)
{
    __shared__ float shared[kThreads / 32];
    for (int c = blockIdx.x; c < cols; c += gridDim.x) {
        const T *col = x + (size_t)c * ldx;
        float mx = -INFINITY;
        for (int r = threadIdx.x; r < rows; r += blockDim.x)
            mx = fmaxf(mx, load(&col[r]));
        mx = block_reduce<kThreads>(mx, MaxOp(), shared);
        float sum = 0.0f;
        for (int r = threadIdx.x; r < rows; r += blockDim.x)
            sum += expf(load(&col[r]) - mx);
        sum = block_reduce<kThreads>(sum, SumOp(), shared);
        if (threadIdx.x == 0) {
            float *st = stats + (size_t)c * lds;
            if (mode == TSR_ACCUMULATE) {
                tsr_elem_softmax_merge(&st[0], &st[1], mx, sum);
            } else {
                st[0] = mx;
                st[1] = sum;
            }
        }
    }
}

__global__ void stats_merge_kernel(int cols, float *dst, int ldd, const float *src, int lds)
{
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += gridDim.x * blockDim.x)
        tsr_elem_softmax_merge(&dst[(size_t)c * ldd], &dst[(size_t)c * ldd + 1], src[(size_t)c * lds],
                               src[(size_t)c * lds + 1]);
}

/* T: the logits' storage type; losses and statistics float32. */
template <typename T>
__global__ void crossentropy_loss_kernel(float *loss, int ldl, const float *stats, int lds, const T *const *logits,
                                         const int *ldx, const tsr_loss_ref_t *refs, int nrefs)
{
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < nrefs; k += gridDim.x * blockDim.x) {
        tsr_loss_ref_t e = refs[k];
        float x = load(&logits[e.src][(size_t)e.col * ldx[e.src] + e.row]);
        loss[(size_t)e.col * ldl] = tsr_elem_crossentropy_loss(stats + (size_t)e.col * lds, x);
    }
}

/* (p - [r == target]) * dloss with p = exp(x - max) / sum, as the CPU's
 * p * dloss for the other rows and (p - 1) * dloss for the target's. T: the
 * logits' storage type (in place, rounded on store); statistics float32. */
template <typename T>
__global__ void crossentropy_backward_kernel(int rows, int cols, T *x, int ldx, int valid, const float *stats, int lds,
                                             const int *target_row, float dloss)
{
    TSR_CUDA_TILE_LOOP(r, c, rows, cols) {
        T *e = x + (size_t)c * ldx + r;
        if (r >= valid) { /* padded vocabulary rows */
            store(e, 0.0f);
            continue;
        }
        const float *st = stats + (size_t)c * lds;
        float p = expf(load(e) - st[0]) * (1.0f / st[1]);
        store(e, r == target_row[c] ? (p - 1.0f) * dloss : p * dloss);
    }
}
} /* namespace */

extern "C" int tsr_cuda_softmax_stats_typed(void *stream, tsr_dtype_t t, int rows, int cols, const void *x, int ldx,
                                            float *stats, int lds, tsr_write_t mode)
{
    if (bad_type(t) || bad_tile(rows, cols, ldx) || lds < 2)
        return TSR_EINVAL;
    if (cols == 0)
        return 0;
    cudaStream_t s = (cudaStream_t)stream;
    if (t == TSR_BFLOAT16)
        softmax_stats_kernel<<<blocks_for(cols, 1), kThreads, 0, s>>>(rows, cols, (const __nv_bfloat16 *)x, ldx, stats,
                                                                      lds, mode);
    else
        softmax_stats_kernel<<<blocks_for(cols, 1), kThreads, 0, s>>>(rows, cols, (const float *)x, ldx, stats, lds,
                                                                      mode);
    return launched();
}

extern "C" int tsr_cuda_softmax_stats(void *stream, int rows, int cols, const float *x, int ldx, float *stats,
                                      int lds, tsr_write_t mode)
{
    return tsr_cuda_softmax_stats_typed(stream, TSR_FLOAT32, rows, cols, x, ldx, stats, lds, mode);
}

extern "C" int tsr_cuda_softmax_stats_merge(void *stream, int cols, float *dst, int ldd, const float *src, int lds)
{
    if (cols < 0 || ldd < 2 || lds < 2)
        return TSR_EINVAL;
    if (cols == 0)
        return 0;
    stats_merge_kernel<<<blocks_for(cols, kThreads), kThreads, 0, (cudaStream_t)stream>>>(cols, dst, ldd, src, lds);
    return launched();
}

extern "C" int tsr_cuda_crossentropy_loss_typed(void *stream, tsr_dtype_t t, float *loss, int ldl, const float *stats,
                                                int lds, const void *const *logits, const int *ldx, int nsrc,
                                                const tsr_loss_ref_t *refs, int nrefs)
{
    if (bad_type(t) || ldl < 1 || lds < 2 || nsrc < 0 || nrefs < 0 ||
        (nrefs > 0 && (!loss || !stats || !logits || !ldx || !refs)))
        return TSR_EINVAL;
    for (int k = 0; k < nrefs; k++) {
        tsr_loss_ref_t e = refs[k];
        if (e.src < 0 || e.src >= nsrc || e.col < 0 || e.row < 0 || !logits[e.src] || e.row >= ldx[e.src])
            return TSR_EINVAL;
    }
    if (nrefs == 0)
        return 0;
    cudaStream_t s = (cudaStream_t)stream;
    StreamBuffer buf(s);
    size_t o_logits = buf.add_host(logits, (size_t)nsrc * sizeof *logits);
    size_t o_ldx = buf.add_host(ldx, (size_t)nsrc * sizeof *ldx);
    size_t o_refs = buf.add_host(refs, (size_t)nrefs * sizeof *refs);
    if (int rc = buf.upload())
        return rc;
    if (t == TSR_BFLOAT16)
        crossentropy_loss_kernel<<<blocks_for(nrefs, kThreads), kThreads, 0, s>>>(
            loss, ldl, stats, lds, buf.dev<const __nv_bfloat16 *const>(o_logits), buf.dev<const int>(o_ldx),
            buf.dev<const tsr_loss_ref_t>(o_refs), nrefs);
    else
        crossentropy_loss_kernel<<<blocks_for(nrefs, kThreads), kThreads, 0, s>>>(
            loss, ldl, stats, lds, buf.dev<const float *const>(o_logits), buf.dev<const int>(o_ldx),
            buf.dev<const tsr_loss_ref_t>(o_refs), nrefs);
    return launched();
}

extern "C" int tsr_cuda_crossentropy_loss(void *stream, float *loss, int ldl, const float *stats, int lds,
                                          const float *const *logits, const int *ldx, int nsrc,
                                          const tsr_loss_ref_t *refs, int nrefs)
{
    return tsr_cuda_crossentropy_loss_typed(stream, TSR_FLOAT32, loss, ldl, stats, lds, (const void *const *)logits,
                                            ldx, nsrc, refs, nrefs);
}

extern "C" int tsr_cuda_crossentropy_backward_typed(void *stream, tsr_dtype_t t, int rows, int cols, void *x, int ldx,
                                                    int row0, int V, const float *stats, int lds,
                                                    const int *target_row, float dloss)
{
    if (bad_type(t) || bad_tile(rows, cols, ldx) || lds < 2 || (cols > 0 && !target_row))
        return TSR_EINVAL;
    if (rows == 0 || cols == 0)
        return 0;
    int valid = V - row0 < rows ? V - row0 : rows;
    if (valid < 0)
        valid = 0;
    cudaStream_t s = (cudaStream_t)stream;
    StreamBuffer buf(s);
    size_t o_target = buf.add_host(target_row, (size_t)cols * sizeof *target_row);
    if (int rc = buf.upload())
        return rc;
    if (t == TSR_BFLOAT16)
        crossentropy_backward_kernel<<<grid2d(rows, cols), block2d(), 0, s>>>(
            rows, cols, (__nv_bfloat16 *)x, ldx, valid, stats, lds, buf.dev<const int>(o_target), dloss);
    else
        crossentropy_backward_kernel<<<grid2d(rows, cols), block2d(), 0, s>>>(
            rows, cols, (float *)x, ldx, valid, stats, lds, buf.dev<const int>(o_target), dloss);
    return launched();
}

extern "C" int tsr_cuda_crossentropy_backward(void *stream, int rows, int cols, float *x, int ldx, int row0, int V,
                                              const float *stats, int lds, const int *target_row, float dloss)
{
    return tsr_cuda_crossentropy_backward_typed(stream, TSR_FLOAT32, rows, cols, x, ldx, row0, V, stats, lds,
                                                target_row, dloss);
}
