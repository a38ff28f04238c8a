/* CUDA kernel of the encoder (column gather-add): float32 or bf16,
 * column-major with leading dimensions, device tiles, host index arrays
 * staged to the device in stream order, asynchronous on the caller's
 * stream. Same arithmetic as compute/cpu/encoder.c; see tsr_compute_encoder.h. */
#include <cuda_runtime.h>
#include <stdlib.h>
#include "tsr_compute_encoder.h"
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
