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

__device__ int visible_keys(tsr_attn_pair_t p, int ii)
{
    long v = (long)p.q0 + ii - p.k0 + 1;
    return v < 0 ? 0 : (v > p.nk ? p.nk : (int)v);
}

/* One block per query column ii: the forward weights of the key block (in
 * S), the new logsumexp (L row 0) and the rescaled old output column. */
__global__ void fwd_weights_kernel(tsr_attn_pair_t p, float *S, float *O, int ldo, float *L, int ldl, int first)
{
    __shared__ float shared[kColThreads / 32];
    int ii = blockIdx.x, nv = visible_keys(p, ii);
    float *s = S + (size_t)ii * p.nk, *lse = L + (size_t)ii * ldl;
    for (int j = nv + threadIdx.x; j < p.nk; j += kColThreads)
        s[j] = 0.0f;
    if (nv == 0) {
        if (first && threadIdx.x == 0)
            *lse = -INFINITY;
        return;
    }
    float old = first ? -INFINITY : *lse;
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
    float f = expf(mx - now), keep = first ? 0.0f : expf(old - now);
    for (int j = threadIdx.x; j < nv; j += kColThreads)
        s[j] *= f;
    if (!first)
        for (int r = threadIdx.x; r < p.hd; r += kColThreads)
            O[(size_t)ii * ldo + r] *= keep;
    __syncthreads(); /* every thread has read *lse */
    if (threadIdx.x == 0)
        *lse = now;
}

/* P = exp(S - lse) on visible keys, 0 on masked ones (one block per column). */
__global__ void bwd_probs_kernel(tsr_attn_pair_t p, float *P, const float *L, int ldl)
{
    int ii = blockIdx.x, nv = visible_keys(p, ii);
    float lse = L[(size_t)ii * ldl], *col = P + (size_t)ii * p.nk;
    for (int j = threadIdx.x; j < p.nk; j += kColThreads)
        col[j] = j < nv ? expf(col[j] - lse) : 0.0f;
}

/* dS = P o (dP - D) on visible keys (dS holds dP on entry), 0 on masked ones. */
__global__ void bwd_dscores_kernel(tsr_attn_pair_t p, const float *P, float *dS, const float *L, int ldl)
{
    int ii = blockIdx.x, nv = visible_keys(p, ii);
    float d = L[(size_t)ii * ldl + 1], *col = dS + (size_t)ii * p.nk;
    const float *pc = P + (size_t)ii * p.nk;
    for (int j = threadIdx.x; j < p.nk; j += kColThreads)
        col[j] = j < nv ? pc[j] * (col[j] - d) : 0.0f;
}

/* L row 1: D = dO . O per query (one block per column), accumulated in
 * double as on the CPU. */
__global__ void bwd_prep_kernel(int hd, const float *O, int ldo, const float *dO, int lddo, float *L, int ldl)
{
    __shared__ double shared[kColThreads / 32];
    int ii = blockIdx.x;
    double d = 0.0;
    for (int r = threadIdx.x; r < hd; r += kColThreads)
        d += (double)O[(size_t)ii * ldo + r] * dO[(size_t)ii * lddo + r];
    d = block_reduce<kColThreads>(d, SumOp(), shared);
    if (threadIdx.x == 0)
        L[(size_t)ii * ldl + 1] = (float)d;
}

/* hd >= 1, nq, nk >= 0 (an empty key block still resets O / dQ when first) */
bool bad_pair(const tsr_attn_pair_t *p) { return !p || p->hd < 1 || p->nq < 0 || p->nk < 0; }

} /* namespace */

extern "C" int tsr_cuda_attention_fwd_step(void *cublas, const tsr_attn_pair_t *p, const float *Q, int ldq,
                                           const float *K, int ldk, const float *V, int ldv, float *O, int ldo,
                                           float *L, int ldl, int first)
{
    if (!cublas || bad_pair(p) || ldl < 1 || bad_tile(p->hd, p->nq, ldq) || bad_tile(p->hd, p->nk, ldk) ||
        bad_tile(p->hd, p->nk, ldv) || bad_tile(p->hd, p->nq, ldo))
        return TSR_EINVAL;
    int nq = p->nq, nk = p->nk, hd = p->hd;
    if (nq == 0)
        return 0;
    cudaStream_t s;
    int rc = handle_stream(cublas, &s);
    if (rc)
        return rc;
    StreamBuffer buf(s);
    size_t o_S = buf.add_scratch((size_t)nq * nk * sizeof(float));
    if ((rc = buf.upload()))
        return rc;
    float *S = buf.dev<float>(o_S); /* nk x nq scores, then weights; one query per column */
    int lds = nk > 0 ? nk : 1;
    rc = tsr_cuda_gemm(cublas, TSR_FLOAT32, TSR_TRANS, TSR_NOTRANS, nk, nq, hd, p->scale, K, ldk, Q, ldq, 0.0, S, lds);
    if (!rc) {
        fwd_weights_kernel<<<nq, kColThreads, 0, s>>>(*p, S, O, ldo, L, ldl, first);
        rc = launched();
    }
    if (!rc)
        rc = tsr_cuda_gemm(cublas, TSR_FLOAT32, TSR_NOTRANS, TSR_NOTRANS, hd, nq, nk, 1.0, V, ldv, S, lds,
                           first ? 0.0 : 1.0, O, ldo);
    return rc;
}

extern "C" int tsr_cuda_attention_bwd_prep(void *stream, int hd, int nq, const float *O, int ldo, const float *dO,
                                           int lddo, float *L, int ldl)
{
    if (hd < 0 || nq < 0 || ldl < 2 || bad_tile(hd, nq, ldo) || bad_tile(hd, nq, lddo))
        return TSR_EINVAL;
    if (nq == 0)
        return 0;
    bwd_prep_kernel<<<nq, kColThreads, 0, (cudaStream_t)stream>>>(hd, O, ldo, dO, lddo, L, ldl);
    return launched();
}

extern "C" int tsr_cuda_attention_bwd_step(void *cublas, const tsr_attn_pair_t *p, const float *Q, int ldq,
                                           const float *K, int ldk, const float *V, int ldv, const float *dO,
                                           int lddo, const float *L, int ldl, float *dQ, int lddq, float *dK,
                                           int lddk, float *dV, int lddv, int first_q, int first_kv)
{
    if (!cublas || bad_pair(p) || ldl < 2 || bad_tile(p->hd, p->nq, ldq) || bad_tile(p->hd, p->nk, ldk) ||
        bad_tile(p->hd, p->nk, ldv) || bad_tile(p->hd, p->nq, lddo) || bad_tile(p->hd, p->nq, lddq) ||
        bad_tile(p->hd, p->nk, lddk) || bad_tile(p->hd, p->nk, lddv))
        return TSR_EINVAL;
    int nq = p->nq, nk = p->nk, hd = p->hd;
    double beta_q = first_q ? 0.0 : 1.0, beta_kv = first_kv ? 0.0 : 1.0;
    cudaStream_t s;
    int rc = handle_stream(cublas, &s);
    if (rc)
        return rc;
    StreamBuffer buf(s);
    size_t o_P = buf.add_scratch((size_t)nq * nk * sizeof(float));
    size_t o_dS = buf.add_scratch((size_t)nq * nk * sizeof(float));
    if ((rc = buf.upload()))
        return rc;
    float *P = buf.dev<float>(o_P), *dS = buf.dev<float>(o_dS); /* nk x nq each */
    int lds = nk > 0 ? nk : 1;
    rc = tsr_cuda_gemm(cublas, TSR_FLOAT32, TSR_TRANS, TSR_NOTRANS, nk, nq, hd, p->scale, K, ldk, Q, ldq, 0.0, P, lds);
    if (!rc && nq > 0) {
        bwd_probs_kernel<<<nq, kColThreads, 0, s>>>(*p, P, L, ldl);
        rc = launched();
    }
    if (!rc)
        rc = tsr_cuda_gemm(cublas, TSR_FLOAT32, TSR_NOTRANS, TSR_TRANS, hd, nk, nq, 1.0, dO, lddo, P, lds, beta_kv,
                           dV, lddv);
    if (!rc)
        rc = tsr_cuda_gemm(cublas, TSR_FLOAT32, TSR_TRANS, TSR_NOTRANS, nk, nq, hd, 1.0, V, ldv, dO, lddo, 0.0, dS,
                           lds);
    if (!rc && nq > 0) {
        bwd_dscores_kernel<<<nq, kColThreads, 0, s>>>(*p, P, dS, L, ldl);
        rc = launched();
    }
    if (!rc)
        rc = tsr_cuda_gemm(cublas, TSR_FLOAT32, TSR_NOTRANS, TSR_NOTRANS, hd, nq, nk, p->scale, K, ldk, dS, lds,
                           beta_q, dQ, lddq);
    if (!rc)
        rc = tsr_cuda_gemm(cublas, TSR_FLOAT32, TSR_NOTRANS, TSR_TRANS, hd, nk, nq, p->scale, Q, ldq, dS, lds,
                           beta_kv, dK, lddk);
    return rc;
}
