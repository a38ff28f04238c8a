/* CUDA kernels of the encoder (column gather-add), the softmax
 * cross-entropy and AdamW: float32, column-major with leading dimensions,
 * device pointers, asynchronous on the caller's stream. Same arithmetic as
 * compute/cpu/{encoder,crossentropy,adamw}.c. */
#include <cuda_runtime.h>
#include "tsr_compute_misc.h"

namespace {

const dim3 kBlock2d(32, 8);  /* element-wise kernels: 32 rows x 8 columns */
const int kThreads = 256;    /* 1D kernels and per-column reductions */

dim3 grid2d(int m, int n)
{
    unsigned gx = (unsigned)((m + kBlock2d.x - 1) / kBlock2d.x);
    unsigned gy = (unsigned)((n + kBlock2d.y - 1) / kBlock2d.y);
    return dim3(gx, gy < 65535u ? gy : 65535u);
}

int launched() { return cudaGetLastError() == cudaSuccess ? 0 : TSR_ERUNTIME; }

/* One thread per row walks the map in order: entries hitting the same
 * destination column accumulate in the CPU kernel's order. */
__global__ void gather_add_kernel(int rows, float *dst, int ldd, const float *const *src, const int *lds,
                                  const tsr_colmap_t *map, int nmap)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows)
        return;
    for (int e = 0; e < nmap; e++) {
        tsr_colmap_t c = map[e];
        dst[(size_t)c.dst_col * ldd + r] += src[c.src][(size_t)c.src_col * lds[c.src] + r];
    }
}

__device__ void merge_one(float *m, float *s, float m2, float s2)
{
    if (s2 == 0.0f)
        return;
    if (*s == 0.0f) {
        *m = m2;
        *s = s2;
        return;
    }
    float mx = fmaxf(*m, m2);
    *s = *s * expf(*m - mx) + s2 * expf(m2 - mx);
    *m = mx;
}

/* One block per column: block-wide max, then block-wide sum of exp(x - max). */
__global__ void softmax_stats_kernel(int rows, int cols, const float *x, int ldx, float *stats, int lds, int merge)
{
    __shared__ float red[kThreads];
    for (int c = blockIdx.x; c < cols; c += gridDim.x) {
        const float *col = x + (size_t)c * ldx;
        float mx = -INFINITY;
        for (int r = threadIdx.x; r < rows; r += blockDim.x)
            mx = fmaxf(mx, col[r]);
        red[threadIdx.x] = mx;
        __syncthreads();
        for (int h = blockDim.x / 2; h > 0; h /= 2) {
            if (threadIdx.x < h)
                red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + h]);
            __syncthreads();
        }
        mx = red[0];
        __syncthreads();
        float sum = 0.0f;
        for (int r = threadIdx.x; r < rows; r += blockDim.x)
            sum += expf(col[r] - mx);
        red[threadIdx.x] = sum;
        __syncthreads();
        for (int h = blockDim.x / 2; h > 0; h /= 2) {
            if (threadIdx.x < h)
                red[threadIdx.x] += red[threadIdx.x + h];
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            float *st = stats + (size_t)c * lds;
            if (merge) {
                merge_one(&st[0], &st[1], mx, red[0]);
            } else {
                st[0] = mx;
                st[1] = red[0];
            }
        }
        __syncthreads();
    }
}

__global__ void stats_merge_kernel(int cols, float *dst, int ldd, const float *src, int lds)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < cols)
        merge_one(&dst[(size_t)c * ldd], &dst[(size_t)c * ldd + 1], src[(size_t)c * lds], src[(size_t)c * lds + 1]);
}

__global__ void crossentropy_backward_kernel(int rows, int cols, float *x, int ldx, int valid, const float *stats,
                                             int lds, const int *target_row, float dloss)
{
    for (int c = blockIdx.y * blockDim.y + threadIdx.y; c < cols; c += gridDim.y * blockDim.y)
        for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += gridDim.x * blockDim.x) {
            float *e = x + (size_t)c * ldx + r;
            if (r >= valid) { /* padded vocabulary rows */
                *e = 0.0f;
                continue;
            }
            const float *st = stats + (size_t)c * lds;
            float p = expf(*e - st[0]) * (1.0f / st[1]);
            *e = (p - (r == target_row[c] ? 1.0f : 0.0f)) * dloss;
        }
}

__global__ void adamw_kernel(int rows, int cols, float *p, int ldp, const float *g, int ldg, float *m, int ldm,
                             float *v, int ldv, tsr_adamw_step_t s)
{
    for (int c = blockIdx.y * blockDim.y + threadIdx.y; c < cols; c += gridDim.y * blockDim.y)
        for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += gridDim.x * blockDim.x) {
            float grad = g[(size_t)c * ldg + r];
            float *pe = p + (size_t)c * ldp + r, *me = m + (size_t)c * ldm + r, *ve = v + (size_t)c * ldv + r;
            float mr = s.beta1 * *me + (1.0f - s.beta1) * grad;
            float vr = s.beta2 * *ve + (1.0f - s.beta2) * grad * grad;
            float mhat = mr / s.corr1, vhat = vr / s.corr2;
            *me = mr;
            *ve = vr;
            *pe -= s.lr * (mhat / (sqrtf(vhat) + s.eps) + s.weight_decay * *pe);
        }
}

bool bad(int rows, int cols, int ld) { return rows < 0 || cols < 0 || ld < (rows > 1 ? rows : 1); }

} /* namespace */

extern "C" int tsr_cuda_gather_add_columns(void *stream, int rows, int cols, float *dst, int ldd, int zero_first,
                                           const float *const *src, const int *lds, const tsr_colmap_t *map,
                                           int nmap)
{
    if (bad(rows, cols, ldd) || nmap < 0 || (nmap > 0 && (!src || !lds || !map)))
        return TSR_EINVAL;
    if (rows == 0 || cols == 0)
        return 0;
    cudaStream_t s = (cudaStream_t)stream;
    if (zero_first &&
        cudaMemset2DAsync(dst, (size_t)ldd * sizeof(float), 0, (size_t)rows * sizeof(float), (size_t)cols, s) !=
            cudaSuccess)
        return TSR_ERUNTIME;
    if (nmap == 0)
        return 0;
    gather_add_kernel<<<(rows + kThreads - 1) / kThreads, kThreads, 0, s>>>(rows, dst, ldd, src, lds, map, nmap);
    return launched();
}

extern "C" int tsr_cuda_softmax_stats(void *stream, int rows, int cols, const float *x, int ldx, float *stats,
                                      int lds, int merge)
{
    if (bad(rows, cols, ldx) || lds < 2)
        return TSR_EINVAL;
    if (cols == 0)
        return 0;
    int blocks = cols < 65535 ? cols : 65535;
    softmax_stats_kernel<<<blocks, kThreads, 0, (cudaStream_t)stream>>>(rows, cols, x, ldx, stats, lds, merge);
    return launched();
}

extern "C" int tsr_cuda_softmax_stats_merge(void *stream, int cols, float *dst, int ldd, const float *src, int lds)
{
    if (cols < 0 || ldd < 2 || lds < 2)
        return TSR_EINVAL;
    if (cols == 0)
        return 0;
    stats_merge_kernel<<<(cols + kThreads - 1) / kThreads, kThreads, 0, (cudaStream_t)stream>>>(cols, dst, ldd, src,
                                                                                                lds);
    return launched();
}

extern "C" int tsr_cuda_crossentropy_backward(void *stream, int rows, int cols, float *x, int ldx, int row0, int V,
                                              const float *stats, int lds, const int *target_row, float dloss)
{
    if (bad(rows, cols, ldx) || lds < 2)
        return TSR_EINVAL;
    if (rows == 0 || cols == 0)
        return 0;
    int valid = V - row0 < rows ? V - row0 : rows;
    if (valid < 0)
        valid = 0;
    crossentropy_backward_kernel<<<grid2d(rows, cols), kBlock2d, 0, (cudaStream_t)stream>>>(
        rows, cols, x, ldx, valid, stats, lds, target_row, dloss);
    return launched();
}

extern "C" int tsr_cuda_adamw(void *stream, int rows, int cols, float *p, int ldp, const float *g, int ldg, float *m,
                              int ldm, float *v, int ldv, tsr_adamw_step_t s)
{
    if (bad(rows, cols, ldp) || bad(rows, cols, ldg) || bad(rows, cols, ldm) || bad(rows, cols, ldv))
        return TSR_EINVAL;
    if (rows == 0 || cols == 0)
        return 0;
    adamw_kernel<<<grid2d(rows, cols), kBlock2d, 0, (cudaStream_t)stream>>>(rows, cols, p, ldp, g, ldg, m, ldm, v,
                                                                           ldv, s);
    return launched();
}
