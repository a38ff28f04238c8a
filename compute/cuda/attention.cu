/* CUDA kernels of flash-style causal attention: the same block steps as
 * compute/cpu/attention.c (see tsr_compute_attention.h) on device pointers,
 * GEMMs through tsr_cuda_gemm (cuBLAS) and the softmax work as small kernels
 * with one thread block per query column, all on the cuBLAS handle's stream;
 * the score blocks live in device scratch allocated in stream order. */
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <math.h>
#include "tsr_compute_cuda.h"
#include "tsr_compute_attention.h"
#include "tsr_cuda_util.cuh"

namespace {

const int kColThreads = 128; /* threads per query column (4 warps) */
const int kPrepColumns = 4;  /* bwd_prep: query columns per block, a warp each */

__device__ int visible_keys(tsr_attn_pair_t p, int ii)
{
    long v = (long)p.q0 + ii - p.k0 + 1;
    return v < 0 ? 0 : (v > p.nk ? p.nk : (int)v);
}

/* The kernels below run on a grid of (query columns, heads): blockIdx.y is
 * the head z, whose score block is S + z * nk * nq and whose O and L start
 * z * so and z * sl floats in. */

/* One block per query column ii: the forward weights of the key block (in
 * S), the new logsumexp (L row 0) and the rescaled old output column. */
__global__ void fwd_weights_kernel(tsr_attn_pair_t p, float *S, float *O, int ldo, size_t so, float *L, int ldl,
                                   size_t sl, tsr_write_t o_mode)
{
    __shared__ float shared[kColThreads / 32];
    int ii = blockIdx.x, z = blockIdx.y, nv = visible_keys(p, ii);
    float *s = S + ((size_t)z * p.nq + ii) * p.nk, *lse = L + z * sl + (size_t)ii * ldl;
    O += z * so;
    for (int j = nv + threadIdx.x; j < p.nk; j += kColThreads)
        s[j] = 0.0f;
    if (nv == 0) {
        if (o_mode == TSR_OVERWRITE && threadIdx.x == 0)
            *lse = -INFINITY;
        return;
    }
    float old = o_mode == TSR_OVERWRITE ? -INFINITY : *lse;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < nv; j += kColThreads)
        mx = fmaxf(mx, s[j]);
    mx = block_reduce<kColThreads>(mx, MaxOp(), shared);
    float sum = 0.0f;
    for (int j = threadIdx.x; j < nv; j += kColThreads) {
        float e = expf(s[j] - mx);
        s[j] = e;
        sum += e;
    }
    sum = block_reduce<kColThreads>(sum, SumOp(), shared);
    float blk = mx + logf(sum), hi = fmaxf(old, blk), lo = fminf(old, blk);
    float now = lo == -INFINITY ? hi : hi + log1pf(expf(lo - hi));
    float f = expf(mx - now), keep = o_mode == TSR_OVERWRITE ? 0.0f : expf(old - now);
    for (int j = threadIdx.x; j < nv; j += kColThreads)
        s[j] *= f;
    if (o_mode == TSR_ACCUMULATE)
        for (int r = threadIdx.x; r < p.hd; r += kColThreads)
            O[(size_t)ii * ldo + r] *= keep;
    __syncthreads(); /* every thread has read *lse */
    if (threadIdx.x == 0)
        *lse = now;
}

/* P = exp(S - lse) on visible keys, 0 on masked ones (one block per column). */
__global__ void bwd_probs_kernel(tsr_attn_pair_t p, float *P, const float *L, int ldl, size_t sl)
{
    int ii = blockIdx.x, z = blockIdx.y, nv = visible_keys(p, ii);
    float lse = L[z * sl + (size_t)ii * ldl], *col = P + ((size_t)z * p.nq + ii) * p.nk;
    for (int j = threadIdx.x; j < p.nk; j += kColThreads)
        col[j] = j < nv ? expf(col[j] - lse) : 0.0f;
}

/* dS = P o (dP - D) on visible keys (dS holds dP on entry), 0 on masked ones. */
__global__ void bwd_dscores_kernel(tsr_attn_pair_t p, const float *P, float *dS, const float *L, int ldl, size_t sl)
{
    int ii = blockIdx.x, z = blockIdx.y, nv = visible_keys(p, ii);
    size_t off = ((size_t)z * p.nq + ii) * p.nk;
    float d = L[z * sl + (size_t)ii * ldl + 1], *col = dS + off;
    const float *pc = P + off;
    for (int j = threadIdx.x; j < p.nk; j += kColThreads)
        col[j] = j < nv ? pc[j] * (col[j] - d) : 0.0f;
}

/* L row 1: D = dO . O per query, a warp per column (kPrepColumns per block,
 * heads on grid y), accumulated in double as on the CPU. */
__global__ void bwd_prep_kernel(int hd, int nq, const float *O, int ldo, size_t so, const float *dO, int lddo,
                                size_t sdo, float *L, int ldl, size_t sl)
{
    int ii = blockIdx.x * kPrepColumns + threadIdx.y, z = blockIdx.y;
    if (ii >= nq)
        return;
    const float *o = O + z * so + (size_t)ii * ldo, *d = dO + z * sdo + (size_t)ii * lddo;
    double acc = 0.0;
    for (int r = threadIdx.x; r < hd; r += 32)
        acc += (double)o[r] * d[r];
    acc = warp_reduce(acc, SumOp());
    if (threadIdx.x == 0)
        L[z * sl + (size_t)ii * ldl + 1] = (float)acc;
}

cublasOperation_t op(tsr_trans_t t) { return t == TSR_TRANS ? CUBLAS_OP_T : CUBLAS_OP_N; }

/* C_z = alpha op(A_z) op(B_z) + beta C_z for the nh heads z, X_z = X + z * sx:
 * one strided-batched cuBLAS call (k == 0, which only scales or zeroes C,
 * goes head by head through tsr_cuda_gemm). */
int gemm_heads(void *cublas, int nh, tsr_trans_t ta, tsr_trans_t tb, int m, int n, int k, float alpha,
               const float *A, int lda, size_t sa, const float *B, int ldb, size_t sb, float beta, float *C, int ldc,
               size_t sc)
{
    if (m == 0 || n == 0)
        return 0;
    if (k == 0) {
        int rc = 0;
        for (int z = 0; z < nh && !rc; z++)
            rc = tsr_cuda_gemm(cublas, TSR_FLOAT32, ta, tb, m, n, k, alpha, A + z * sa, lda, B + z * sb, ldb, beta,
                               C + z * sc, ldc);
        return rc;
    }
    return cublas_rc(cublasSgemmStridedBatched((cublasHandle_t)cublas, op(ta), op(tb), m, n, k, &alpha, A, lda,
                                               (long long)sa, B, ldb, (long long)sb, &beta, C, ldc, (long long)sc,
                                               nh));
}

/* hd >= 1, nq, nk >= 0 (an empty key block still resets O / dQ when first) */
bool bad_pair(const tsr_attn_pair_t *p) { return !p || p->hd < 1 || p->nq < 0 || p->nk < 0; }

/* nh heads on grid y, zstrides that keep the heads apart */
bool bad_heads(int nh) { return nh < 1 || (unsigned)nh > kMaxGridY; }

} /* namespace */

extern "C" int tsr_cuda_attention_fwd_step(void *cublas, const tsr_attn_pair_t *p, int nh, const float *Q, int ldq,
                                           size_t sq, const float *K, int ldk, size_t sk, const float *V, int ldv,
                                           size_t sv, float *O, int ldo, size_t so, float *L, int ldl, size_t sl,
                                           tsr_write_t o_mode)
{
    if (!cublas || bad_pair(p) || bad_heads(nh) || ldl < 1 || bad_tile(p->hd, p->nq, ldq) ||
        bad_tile(p->hd, p->nk, ldk) || bad_tile(p->hd, p->nk, ldv) || bad_tile(p->hd, p->nq, ldo))
        return TSR_EINVAL;
    int nq = p->nq, nk = p->nk, hd = p->hd;
    if (nq == 0)
        return 0;
    cudaStream_t s;
    int rc = handle_stream(cublas, &s);
    if (rc)
        return rc;
    StreamBuffer buf(s);
    size_t o_S = buf.add_scratch((size_t)nh * nq * nk * sizeof(float));
    if ((rc = buf.upload()))
        return rc;
    float *S = buf.dev<float>(o_S); /* per head nk x nq scores, then weights; one query per column */
    int lds = nk > 0 ? nk : 1;
    size_t ss = (size_t)nq * nk;
    rc = gemm_heads(cublas, nh, TSR_TRANS, TSR_NOTRANS, nk, nq, hd, p->scale, K, ldk, sk, Q, ldq, sq, 0.0f, S, lds,
                    ss);
    if (!rc) {
        fwd_weights_kernel<<<dim3(nq, nh), kColThreads, 0, s>>>(*p, S, O, ldo, so, L, ldl, sl, o_mode);
        rc = launched();
    }
    if (!rc)
        rc = gemm_heads(cublas, nh, TSR_NOTRANS, TSR_NOTRANS, hd, nq, nk, 1.0f, V, ldv, sv, S, lds, ss,
                        o_mode == TSR_OVERWRITE ? 0.0f : 1.0f, O, ldo, so);
    return rc;
}

extern "C" int tsr_cuda_attention_bwd_prep(void *stream, int hd, int nq, int nh, const float *O, int ldo, size_t so,
                                           const float *dO, int lddo, size_t sdo, float *L, int ldl, size_t sl)
{
    if (hd < 0 || nq < 0 || bad_heads(nh) || ldl < 2 || bad_tile(hd, nq, ldo) || bad_tile(hd, nq, lddo))
        return TSR_EINVAL;
    if (nq == 0)
        return 0;
    dim3 grid((unsigned)((nq + kPrepColumns - 1) / kPrepColumns), (unsigned)nh);
    bwd_prep_kernel<<<grid, dim3(32, kPrepColumns), 0, (cudaStream_t)stream>>>(hd, nq, O, ldo, so, dO, lddo, sdo, L,
                                                                               ldl, sl);
    return launched();
}

extern "C" int tsr_cuda_attention_bwd_step(void *cublas, const tsr_attn_pair_t *p, int nh, const float *Q, int ldq,
                                           size_t sq, const float *K, int ldk, size_t sk, const float *V, int ldv,
                                           size_t sv, const float *dO, int lddo, size_t sdo, const float *L,
                                           int ldl, size_t sl, float *dQ, int lddq, size_t sdq, float *dK, int lddk,
                                           size_t sdk, float *dV, int lddv, size_t sdv, tsr_write_t dq_mode,
                                           tsr_write_t dkv_mode)
{
    if (!cublas || bad_pair(p) || bad_heads(nh) || ldl < 2 || bad_tile(p->hd, p->nq, ldq) ||
        bad_tile(p->hd, p->nk, ldk) || bad_tile(p->hd, p->nk, ldv) || bad_tile(p->hd, p->nq, lddo) ||
        bad_tile(p->hd, p->nq, lddq) || bad_tile(p->hd, p->nk, lddk) || bad_tile(p->hd, p->nk, lddv))
        return TSR_EINVAL;
    int nq = p->nq, nk = p->nk, hd = p->hd;
    float beta_q = dq_mode == TSR_OVERWRITE ? 0.0f : 1.0f, beta_kv = dkv_mode == TSR_OVERWRITE ? 0.0f : 1.0f;
    cudaStream_t s;
    int rc = handle_stream(cublas, &s);
    if (rc)
        return rc;
    StreamBuffer buf(s);
    size_t ss = (size_t)nq * nk;
    size_t o_P = buf.add_scratch((size_t)nh * ss * sizeof(float));
    size_t o_dS = buf.add_scratch((size_t)nh * ss * sizeof(float));
    if ((rc = buf.upload()))
        return rc;
    float *P = buf.dev<float>(o_P), *dS = buf.dev<float>(o_dS); /* per head nk x nq each */
    int lds = nk > 0 ? nk : 1;
    rc = gemm_heads(cublas, nh, TSR_TRANS, TSR_NOTRANS, nk, nq, hd, p->scale, K, ldk, sk, Q, ldq, sq, 0.0f, P, lds,
                    ss);
    if (!rc && nq > 0 && nk > 0) {
        bwd_probs_kernel<<<dim3(nq, nh), kColThreads, 0, s>>>(*p, P, L, ldl, sl);
        rc = launched();
    }
    if (!rc)
        rc = gemm_heads(cublas, nh, TSR_NOTRANS, TSR_TRANS, hd, nk, nq, 1.0f, dO, lddo, sdo, P, lds, ss, beta_kv, dV,
                        lddv, sdv);
    if (!rc)
        rc = gemm_heads(cublas, nh, TSR_TRANS, TSR_NOTRANS, nk, nq, hd, 1.0f, V, ldv, sv, dO, lddo, sdo, 0.0f, dS,
                        lds, ss);
    if (!rc && nq > 0 && nk > 0) {
        bwd_dscores_kernel<<<dim3(nq, nh), kColThreads, 0, s>>>(*p, P, dS, L, ldl, sl);
        rc = launched();
    }
    if (!rc)
        rc = gemm_heads(cublas, nh, TSR_NOTRANS, TSR_NOTRANS, hd, nq, nk, p->scale, K, ldk, sk, dS, lds, ss, beta_q,
                        dQ, lddq, sdq);
    if (!rc)
        rc = gemm_heads(cublas, nh, TSR_NOTRANS, TSR_TRANS, hd, nk, nq, p->scale, Q, ldq, sq, dS, lds, ss, beta_kv,
                        dK, lddk, sdk);
    return rc;
}
