/* CUDA kernels of the encoder (column gather-add), the softmax
 * cross-entropy and AdamW: float32, column-major with leading dimensions,
 * device tiles, host index arrays staged to the device in stream order,
 * asynchronous on the caller's stream. Same arithmetic as
 * compute/cpu/{encoder,crossentropy,adamw}.c; see tsr_compute_misc.h. */
#include <cuda_runtime.h>
#include <stdlib.h>
#include "tsr_compute_misc.h"
#include "tsr_compute_elem.h"
#include "tsr_cuda_util.cuh"

namespace {

/* Destination column ucol[u] += the sources of entries off[u] .. off[u+1]
 * (ent[e] = (source, source column)), in map order: each element sees the
 * CPU kernel's additions in the CPU's order. T: the storage type of dst and
 * the sources (bf16: summed in float, rounded once on store). */
template <typename T>
__global__ void gather_add_kernel(int rows, T *dst, int ldd, const T *const *src, const int *lds, const int *ucol,
                                  const int *off, const int2 *ent, int nu)
{
    for (int u = blockIdx.y; u < nu; u += gridDim.y) {
        T *d = dst + (size_t)ucol[u] * ldd;
        int e0 = off[u], e1 = off[u + 1];
        for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += gridDim.x * blockDim.x) {
            float acc = load(&d[r]);
            for (int e = e0; e < e1; e++) {
                int2 q = ent[e];
                acc += load(&src[q.x][(size_t)q.y * lds[q.x] + r]);
            }
            store(&d[r], acc);
        }
    }
}

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

__global__ void adamw_kernel(int rows, int cols, float *p, int ldp, const float *g, int ldg, float *m, int ldm,
                             float *v, int ldv, tsr_adamw_step_t s)
{
    TSR_CUDA_TILE_LOOP(r, c, rows, cols)
        tsr_elem_adamw(&s, g[(size_t)c * ldg + r], &p[(size_t)c * ldp + r], &m[(size_t)c * ldm + r],
                       &v[(size_t)c * ldv + r]);
}

/* AdamW on float32 master weights p, then out = p in out's storage type G;
 * g in G too (bf16 in a bf16 task, float in a float32 one). */
template <typename G>
__global__ void adamw_master_kernel(int rows, int cols, float *p, int ldp, const G *g, int ldg, float *m, int ldm,
                                    float *v, int ldv, G *out, int ldo, tsr_adamw_step_t s)
{
    TSR_CUDA_TILE_LOOP(r, c, rows, cols) {
        float *pe = &p[(size_t)c * ldp + r];
        tsr_elem_adamw(&s, load(&g[(size_t)c * ldg + r]), pe, &m[(size_t)c * ldm + r], &v[(size_t)c * ldv + r]);
        store(&out[(size_t)c * ldo + r], *pe);
    }
}

/* The host-side plan of a gather: the map grouped by destination column
 * (stable, so map order is kept within a column). */
struct GatherPlan {
    int nsrc = 0, nu = 0;
    int *ucol = nullptr, *off = nullptr; /* nu, nu + 1 */
    int2 *ent = nullptr;                 /* nmap */
    ~GatherPlan()
    {
        free(ucol);
        free(off);
        free(ent);
    }
};

/* TSR_EINVAL on an entry outside the tiles, TSR_ERUNTIME when out of memory. */
int plan_gather(int rows, int cols, const void *const *src, const int *lds, const tsr_colmap_t *map, int nmap,
                GatherPlan *pl)
{
    for (int e = 0; e < nmap; e++) {
        tsr_colmap_t q = map[e];
        if (q.dst_col < 0 || q.dst_col >= cols || q.src < 0 || q.src_col < 0)
            return TSR_EINVAL;
        if (q.src >= pl->nsrc)
            pl->nsrc = q.src + 1;
    }
    for (int k = 0; k < pl->nsrc; k++)
        if (!src[k] || lds[k] < (rows > 1 ? rows : 1))
            return TSR_EINVAL;
    int *count = (int *)calloc((size_t)cols, sizeof(int));
    pl->ent = (int2 *)malloc((size_t)nmap * sizeof(int2));
    if (!count || !pl->ent) {
        free(count);
        return TSR_ERUNTIME;
    }
    for (int e = 0; e < nmap; e++)
        count[map[e].dst_col]++;
    for (int c = 0; c < cols; c++)
        pl->nu += count[c] > 0;
    pl->ucol = (int *)malloc((size_t)pl->nu * sizeof(int));
    pl->off = (int *)malloc(((size_t)pl->nu + 1) * sizeof(int));
    if (!pl->ucol || !pl->off) {
        free(count);
        return TSR_ERUNTIME;
    }
    /* count[c] becomes the next slot of column c */
    int u = 0, at = 0;
    for (int c = 0; c < cols; c++)
        if (count[c] > 0) {
            pl->ucol[u] = c;
            pl->off[u++] = at;
            int n = count[c];
            count[c] = at;
            at += n;
        }
    pl->off[u] = at;
    for (int e = 0; e < nmap; e++)
        pl->ent[count[map[e].dst_col]++] = make_int2(map[e].src, map[e].src_col);
    free(count);
    return 0;
}

} /* namespace */

extern "C" int tsr_cuda_gather_add_columns_typed(void *stream, tsr_dtype_t t, int rows, int cols, void *dst, int ldd,
                                                 tsr_write_t mode, const void *const *src, const int *lds,
                                                 const tsr_colmap_t *map, int nmap)
{
    if (bad_type(t) || bad_tile(rows, cols, ldd) || nmap < 0 || (nmap > 0 && (!src || !lds || !map)))
        return TSR_EINVAL;
    GatherPlan pl;
    int rc = nmap > 0 ? plan_gather(rows, cols, src, lds, map, nmap, &pl) : 0;
    if (rc || rows == 0 || cols == 0)
        return rc;
    cudaStream_t s = (cudaStream_t)stream;
    size_t es = tsr_dtype_size(t); /* +0 is all zero bits in both types */
    if (mode == TSR_OVERWRITE &&
        (rc = cuda_rc(cudaMemset2DAsync(dst, (size_t)ldd * es, 0, (size_t)rows * es, (size_t)cols, s))))
        return rc;
    if (nmap == 0)
        return 0;
    StreamBuffer buf(s);
    size_t o_src = buf.add_host(src, (size_t)pl.nsrc * sizeof *src);
    size_t o_lds = buf.add_host(lds, (size_t)pl.nsrc * sizeof *lds);
    size_t o_ucol = buf.add_host(pl.ucol, (size_t)pl.nu * sizeof *pl.ucol);
    size_t o_off = buf.add_host(pl.off, ((size_t)pl.nu + 1) * sizeof *pl.off);
    size_t o_ent = buf.add_host(pl.ent, (size_t)nmap * sizeof *pl.ent);
    if ((rc = buf.upload()))
        return rc;
    dim3 grid(blocks_for(rows, kThreads), pl.nu < (int)kMaxGridY ? (unsigned)pl.nu : kMaxGridY);
    if (t == TSR_BFLOAT16)
        gather_add_kernel<<<grid, kThreads, 0, s>>>(rows, (__nv_bfloat16 *)dst, ldd,
                                                    buf.dev<const __nv_bfloat16 *const>(o_src),
                                                    buf.dev<const int>(o_lds), buf.dev<const int>(o_ucol),
                                                    buf.dev<const int>(o_off), buf.dev<const int2>(o_ent), pl.nu);
    else
        gather_add_kernel<<<grid, kThreads, 0, s>>>(rows, (float *)dst, ldd, buf.dev<const float *const>(o_src),
                                                    buf.dev<const int>(o_lds), buf.dev<const int>(o_ucol),
                                                    buf.dev<const int>(o_off), buf.dev<const int2>(o_ent), pl.nu);
    return launched();
}

extern "C" int tsr_cuda_gather_add_columns(void *stream, int rows, int cols, float *dst, int ldd, tsr_write_t mode,
                                           const float *const *src, const int *lds, const tsr_colmap_t *map,
                                           int nmap)
{
    return tsr_cuda_gather_add_columns_typed(stream, TSR_FLOAT32, rows, cols, dst, ldd, mode,
                                             (const void *const *)src, lds, map, nmap);
}

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

extern "C" int tsr_cuda_adamw(void *stream, int rows, int cols, float *p, int ldp, const float *g, int ldg, float *m,
                              int ldm, float *v, int ldv, const tsr_adamw_step_t *s)
{
    if (!s || bad_tile(rows, cols, ldp) || bad_tile(rows, cols, ldg) || bad_tile(rows, cols, ldm) ||
        bad_tile(rows, cols, ldv))
        return TSR_EINVAL;
    if (rows == 0 || cols == 0)
        return 0;
    adamw_kernel<<<grid2d(rows, cols), block2d(), 0, (cudaStream_t)stream>>>(rows, cols, p, ldp, g, ldg, m, ldm, v,
                                                                            ldv, *s);
    return launched();
}

extern "C" int tsr_cuda_adamw_master(void *stream, tsr_dtype_t gt, int rows, int cols, float *p, int ldp,
                                     const void *g, int ldg, float *m, int ldm, float *v, int ldv, void *out, int ldo,
                                     const tsr_adamw_step_t *s)
{
    if (!s || (gt != TSR_FLOAT32 && gt != TSR_BFLOAT16) || bad_tile(rows, cols, ldp) || bad_tile(rows, cols, ldg) ||
        bad_tile(rows, cols, ldm) || bad_tile(rows, cols, ldv) || bad_tile(rows, cols, ldo))
        return TSR_EINVAL;
    if (rows == 0 || cols == 0)
        return 0;
    cudaStream_t st = (cudaStream_t)stream;
    if (gt == TSR_BFLOAT16)
        adamw_master_kernel<<<grid2d(rows, cols), block2d(), 0, st>>>(
            rows, cols, p, ldp, (const __nv_bfloat16 *)g, ldg, m, ldm, v, ldv, (__nv_bfloat16 *)out, ldo, *s);
    else
        adamw_master_kernel<<<grid2d(rows, cols), block2d(), 0, st>>>(rows, cols, p, ldp, (const float *)g, ldg, m,
                                                                      ldm, v, ldv, (float *)out, ldo, *s);
    return launched();
}
