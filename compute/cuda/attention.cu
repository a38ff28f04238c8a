/* CUDA kernels of flash-style causal attention: the same block steps as
 * compute/cpu/attention.c (see tsr_compute_attention.h) on device pointers,
 * GEMMs through tsr_cuda_gemm (cuBLAS) and the softmax work as small kernels
 * with one thread block per query column, all on the cuBLAS handle's stream.
 * Compiled when TSR_USE_CUDA is on; no StarPU codelet uses them yet. */
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <math.h>
#include "tsr_compute_cuda.h"
#include "tsr_compute_attention.h"

namespace {

const int kThreads = 128; /* threads per query column (4 warps) */

__device__ int visible_keys(tsr_attn_pair_t p, int ii)
{
    long v = (long)p.q0 + ii - p.k0 + 1;
    return v < 0 ? 0 : (v > p.nk ? p.nk : (int)v);
}

struct MaxOp {
    __device__ float operator()(float a, float b) const { return a > b ? a : b; }
};
struct SumOp {
    __device__ float operator()(float a, float b) const { return a + b; }
};

/* Reduction over the kThreads threads of the block; every thread gets the result. */
template <typename Op>
__device__ float block_reduce(float v, Op op, float *shared)
{
    for (int off = 16; off > 0; off >>= 1)
        v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads(); /* shared may still be read by a previous reduction */
    if (lane == 0)
        shared[warp] = v;
    __syncthreads();
    v = shared[0];
    for (int w = 1; w < kThreads / 32; w++)
        v = op(v, shared[w]);
    return v;
}

/* One block per query column ii: the forward weights of the key block (in
 * S), the new logsumexp (L row 0) and the rescaled old output column. */
__global__ void fwd_weights_kernel(tsr_attn_pair_t p, float *S, float *O, int ldo, float *L, int ldl, int first)
{
    __shared__ float shared[kThreads / 32];
    int ii = blockIdx.x, nv = visible_keys(p, ii);
    float *s = S + (size_t)ii * p.nk, *lse = L + (size_t)ii * ldl;
    for (int j = nv + threadIdx.x; j < p.nk; j += kThreads)
        s[j] = 0.0f;
    if (nv == 0) {
        if (first && threadIdx.x == 0)
            *lse = -INFINITY;
        return;
    }
    float old = first ? -INFINITY : *lse;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < nv; j += kThreads)
        mx = fmaxf(mx, s[j]);
    mx = block_reduce(mx, MaxOp(), shared);
    float sum = 0.0f;
    for (int j = threadIdx.x; j < nv; j += kThreads) {
        float e = __expf(s[j] - mx);
        s[j] = e;
        sum += e;
    }
    sum = block_reduce(sum, SumOp(), shared);
    float blk = mx + logf(sum), hi = fmaxf(old, blk), lo = fminf(old, blk);
    float now = lo == -INFINITY ? hi : hi + log1pf(expf(lo - hi));
    float f = expf(mx - now), keep = first ? 0.0f : expf(old - now);
    for (int j = threadIdx.x; j < nv; j += kThreads)
        s[j] *= f;
    if (!first)
        for (int r = threadIdx.x; r < p.hd; r += kThreads)
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
    for (int j = threadIdx.x; j < p.nk; j += kThreads)
        col[j] = j < nv ? __expf(col[j] - lse) : 0.0f;
}

/* dS = P o (dP - D) on visible keys (dS holds dP on entry), 0 on masked ones. */
__global__ void bwd_dscores_kernel(tsr_attn_pair_t p, const float *P, float *dS, const float *L, int ldl)
{
    int ii = blockIdx.x, nv = visible_keys(p, ii);
    float d = L[(size_t)ii * ldl + 1], *col = dS + (size_t)ii * p.nk;
    const float *pc = P + (size_t)ii * p.nk;
    for (int j = threadIdx.x; j < p.nk; j += kThreads)
        col[j] = j < nv ? pc[j] * (col[j] - d) : 0.0f;
}

/* L row 1: D = dO . O per query (one block per column). */
__global__ void bwd_prep_kernel(int hd, const float *O, int ldo, const float *dO, int lddo, float *L, int ldl)
{
    __shared__ float shared[kThreads / 32];
    int ii = blockIdx.x;
    float d = 0.0f;
    for (int r = threadIdx.x; r < hd; r += kThreads)
        d += O[(size_t)ii * ldo + r] * dO[(size_t)ii * lddo + r];
    d = block_reduce(d, SumOp(), shared);
    if (threadIdx.x == 0)
        L[(size_t)ii * ldl + 1] = d;
}

int handle_stream(void *cublas, cudaStream_t *s)
{
    return cublasGetStream((cublasHandle_t)cublas, s) == CUBLAS_STATUS_SUCCESS ? 0 : TSR_ERUNTIME;
}

int launched(void) { return cudaGetLastError() == cudaSuccess ? 0 : TSR_ERUNTIME; }

bool bad_pair(const tsr_attn_pair_t *p) { return !p || p->hd < 1 || p->nq < 1 || p->nk < 1; }

} /* namespace */

extern "C" int tsr_cuda_attention_fwd_step(void *cublas, const tsr_attn_pair_t *p, const float *Q, int ldq,
                                           const float *K, int ldk, const float *V, int ldv, float *O, int ldo,
                                           float *L, int ldl, int first, float *scratch)
{
    if (!cublas || bad_pair(p) || !scratch)
        return TSR_EINVAL;
    cudaStream_t s;
    int rc = handle_stream(cublas, &s);
    if (!rc)
        rc = tsr_cuda_gemm(cublas, TSR_FLOAT32, TSR_TRANS, TSR_NOTRANS, p->nk, p->nq, p->hd, p->scale, K, ldk, Q,
                           ldq, 0.0, scratch, p->nk);
    if (!rc) {
        fwd_weights_kernel<<<p->nq, kThreads, 0, s>>>(*p, scratch, O, ldo, L, ldl, first);
        rc = launched();
    }
    if (!rc)
        rc = tsr_cuda_gemm(cublas, TSR_FLOAT32, TSR_NOTRANS, TSR_NOTRANS, p->hd, p->nq, p->nk, 1.0, V, ldv,
                           scratch, p->nk, first ? 0.0 : 1.0, O, ldo);
    return rc;
}

extern "C" int tsr_cuda_attention_bwd_prep(void *stream, int hd, int nq, const float *O, int ldo, const float *dO,
                                           int lddo, float *L, int ldl)
{
    if (hd < 1 || nq < 0)
        return TSR_EINVAL;
    if (nq == 0)
        return 0;
    bwd_prep_kernel<<<nq, kThreads, 0, (cudaStream_t)stream>>>(hd, O, ldo, dO, lddo, L, ldl);
    return launched();
}

extern "C" int tsr_cuda_attention_bwd_step(void *cublas, const tsr_attn_pair_t *p, const float *Q, int ldq,
                                           const float *K, int ldk, const float *V, int ldv, const float *dO,
                                           int lddo, const float *L, int ldl, float *dQ, int lddq, float *dK,
                                           int lddk, float *dV, int lddv, int first_q, int first_kv,
                                           float *scratch)
{
    if (!cublas || bad_pair(p) || !scratch)
        return TSR_EINVAL;
    int nq = p->nq, nk = p->nk, hd = p->hd;
    float *P = scratch, *dS = scratch + (size_t)nq * nk;
    double beta_q = first_q ? 0.0 : 1.0, beta_kv = first_kv ? 0.0 : 1.0;
    cudaStream_t s;
    int rc = handle_stream(cublas, &s);
    if (!rc)
        rc = tsr_cuda_gemm(cublas, TSR_FLOAT32, TSR_TRANS, TSR_NOTRANS, nk, nq, hd, p->scale, K, ldk, Q, ldq, 0.0,
                           P, nk);
    if (!rc) {
        bwd_probs_kernel<<<nq, kThreads, 0, s>>>(*p, P, L, ldl);
        rc = launched();
    }
    if (!rc)
        rc = tsr_cuda_gemm(cublas, TSR_FLOAT32, TSR_NOTRANS, TSR_TRANS, hd, nk, nq, 1.0, dO, lddo, P, nk, beta_kv,
                           dV, lddv);
    if (!rc)
        rc = tsr_cuda_gemm(cublas, TSR_FLOAT32, TSR_TRANS, TSR_NOTRANS, nk, nq, hd, 1.0, V, ldv, dO, lddo, 0.0, dS,
                           nk);
    if (!rc) {
        bwd_dscores_kernel<<<nq, kThreads, 0, s>>>(*p, P, dS, L, ldl);
        rc = launched();
    }
    if (!rc)
        rc = tsr_cuda_gemm(cublas, TSR_FLOAT32, TSR_NOTRANS, TSR_NOTRANS, hd, nq, nk, p->scale, K, ldk, dS, nk,
                           beta_q, dQ, lddq);
    if (!rc)
        rc = tsr_cuda_gemm(cublas, TSR_FLOAT32, TSR_NOTRANS, TSR_TRANS, hd, nk, nq, p->scale, Q, ldq, dS, nk,
                           beta_kv, dK, lddk);
    return rc;
}
