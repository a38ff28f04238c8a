/* CUDA kernels of AdamW (llm.c): float32 tiles (bf16 gradient and copy
 * for the master-weight form), column-major with leading dimensions,
 * asynchronous on the caller's stream. Same arithmetic as
 * compute/cpu/adamw.c; see tsr_compute_adamw.h. */
#include <cuda_runtime.h>
#include <stdlib.h>
#include "tsr_compute_adamw.h"
#include "tsr_compute_elem.h"
#include "tsr_cuda_util.cuh"

namespace {

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
} /* namespace */

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
