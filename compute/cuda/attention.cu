/* CUDA kernels of flash-style causal attention: the same block steps as
 * compute/cpu/attention.c (see tsr_compute_attention.h) on device pointers,
 * GEMMs through tsr_cuda_gemm (cuBLAS) and the softmax work as small kernels
 * with one thread block per query column, all on the cuBLAS handle's stream;
 * the score blocks live in device scratch allocated in stream order.
 * T, the tiles' storage type, is float or bf16. The scores and their softmax
 * are float in either; with bf16 tiles the weights that feed a GEMM are also
 * kept as a bf16 copy (cuBLAS wants both operands of one type), and the
 * GEMMs take bf16 operands with float accumulation, as llm.c's. */
#include <type_traits>
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
 * z * so and z * sl elements in. */

/* One block per query column ii: the forward weights of the key block (in
 * W: S itself for float tiles), the new logsumexp (L row 0) and the rescaled
 * old output column. */
template <typename T>
__global__ void fwd_weights_kernel(tsr_attn_pair_t p, float *S, T *W, T *O, int ldo, size_t so, T *L, int ldl,
                                   size_t sl, tsr_write_t o_mode)
{
    __shared__ float shared[kColThreads / 32];
    int ii = blockIdx.x, z = blockIdx.y, nv = visible_keys(p, ii);
    size_t off = ((size_t)z * p.nq + ii) * p.nk;
    float *s = S + off;
    T *w = W + off, *lse = L + z * sl + (size_t)ii * ldl;
    O += z * so;
    for (int j = nv + threadIdx.x; j < p.nk; j += kColThreads)
        store(&w[j], 0.0f);
    if (nv == 0) {
        if (o_mode == TSR_OVERWRITE && threadIdx.x == 0)
            store(lse, -INFINITY);
        return;
    }
    float old = o_mode == TSR_OVERWRITE ? -INFINITY : load(lse);
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
        store(&w[j], s[j] * f);
    if (o_mode == TSR_ACCUMULATE)
        for (int r = threadIdx.x; r < p.hd; r += kColThreads)
            store(&O[(size_t)ii * ldo + r], load(&O[(size_t)ii * ldo + r]) * keep);
    __syncthreads(); /* every thread has read *lse */
    if (threadIdx.x == 0)
        store(lse, now);
}

/* P = exp(S - lse) on visible keys, 0 on masked ones (one block per column),
 * into P and its copy Pw (P itself for float tiles). */
template <typename T>
__global__ void bwd_probs_kernel(tsr_attn_pair_t p, float *P, T *Pw, const T *L, int ldl, size_t sl)
{
    int ii = blockIdx.x, z = blockIdx.y, nv = visible_keys(p, ii);
    size_t off = ((size_t)z * p.nq + ii) * p.nk;
    float lse = load(&L[z * sl + (size_t)ii * ldl]), *col = P + off;
    T *wc = Pw + off;
    for (int j = threadIdx.x; j < p.nk; j += kColThreads) {
        float v = j < nv ? expf(col[j] - lse) : 0.0f;
        col[j] = v;
        store(&wc[j], v);
    }
}

/* dS = P o (dP - D) on visible keys (dS holds dP on entry), 0 on masked
 * ones, into dSw (dS itself for float tiles). */
template <typename T>
__global__ void bwd_dscores_kernel(tsr_attn_pair_t p, const float *P, const float *dS, T *dSw, const T *L, int ldl,
                                   size_t sl)
{
    int ii = blockIdx.x, z = blockIdx.y, nv = visible_keys(p, ii);
    size_t off = ((size_t)z * p.nq + ii) * p.nk;
    float d = load(&L[z * sl + (size_t)ii * ldl + 1]);
    const float *col = dS + off, *pc = P + off;
    T *wc = dSw + off;
    for (int j = threadIdx.x; j < p.nk; j += kColThreads)
        store(&wc[j], j < nv ? pc[j] * (col[j] - d) : 0.0f);
}

/* L row 1: D = dO . O per query, a warp per column (kPrepColumns per block,
 * heads on grid y), accumulated in double as on the CPU. */
template <typename T>
__global__ void bwd_prep_kernel(int hd, int nq, const T *O, int ldo, size_t so, const T *dO, int lddo, size_t sdo,
                                T *L, int ldl, size_t sl)
{
    int ii = blockIdx.x * kPrepColumns + threadIdx.y, z = blockIdx.y;
    if (ii >= nq)
        return;
    const T *o = O + z * so + (size_t)ii * ldo, *d = dO + z * sdo + (size_t)ii * lddo;
    double acc = 0.0;
    for (int r = threadIdx.x; r < hd; r += 32)
        acc += (double)load(&o[r]) * load(&d[r]);
    acc = warp_reduce(acc, SumOp());
    if (threadIdx.x == 0)
        store(&L[z * sl + (size_t)ii * ldl + 1], (float)acc);
}

template <typename T> constexpr bool is_float() { return std::is_same<T, float>::value; }
template <typename T> tsr_dtype_t dtype_of() { return is_float<T>() ? TSR_FLOAT32 : TSR_BFLOAT16; }

/* C_z = alpha op(A_z) op(B_z) + beta C_z for the nh heads z, X_z = X + z * sx:
 * one gemm_strided_batched call, float32 when every operand is, else bf16 A
 * and B with C of type TC (k == 0, which only scales or zeroes C, goes head
 * by head through tsr_cuda_gemm). */
template <typename T, typename TC>
int gemm_heads(void *cublas, int nh, tsr_trans_t ta, tsr_trans_t tb, int m, int n, int k, float alpha, const T *A,
               int lda, size_t sa, const T *B, int ldb, size_t sb, float beta, TC *C, int ldc, size_t sc)
{
    if (m == 0 || n == 0)
        return 0;
    if (k == 0) {
        int rc = 0;
        for (int z = 0; z < nh && !rc; z++)
            rc = tsr_cuda_gemm(cublas, dtype_of<TC>(), ta, tb, m, n, k, alpha, A + z * sa, lda, B + z * sb, ldb,
                               beta, C + z * sc, ldc);
        return rc;
    }
    return gemm_strided_batched((cublasHandle_t)cublas, dtype_of<T>(), dtype_of<TC>(), ta, tb, m, n, k, alpha, A,
                                lda, (long long)sa, B, ldb, (long long)sb, beta, C, ldc, (long long)sc, nh);
}

/* hd >= 1, nq, nk >= 0 (an empty key block still resets O / dQ when first) */
bool bad_pair(const tsr_attn_pair_t *p) { return !p || p->hd < 1 || p->nq < 0 || p->nk < 0; }

/* nh heads on grid y, zstrides that keep the heads apart */
bool bad_heads(int nh) { return nh < 1 || (unsigned)nh > kMaxGridY; }

} /* namespace */

/* The steps over storage type T (the entry points below check the sizes). */
namespace {

template <typename T>
int fwd_step(void *cublas, const tsr_attn_pair_t *p, int nh, const T *Q, int ldq, size_t sq, const T *K, int ldk,
             size_t sk, const T *V, int ldv, size_t sv, T *O, int ldo, size_t so, T *L, int ldl, size_t sl,
             tsr_write_t o_mode)
{
    int nq = p->nq, nk = p->nk, hd = p->hd;
    if (nq == 0)
        return 0;
    cudaStream_t s;
    int rc = handle_stream(cublas, &s);
    if (rc)
        return rc;
    size_t ss = (size_t)nq * nk;
    StreamBuffer buf(s);
    size_t o_S = buf.add_scratch((size_t)nh * ss * sizeof(float));
    size_t o_W = is_float<T>() ? 0 : buf.add_scratch((size_t)nh * ss * sizeof(T));
    if ((rc = buf.upload()))
        return rc;
    float *S = buf.dev<float>(o_S); /* per head nk x nq scores, then weights; one query per column */
    T *W = is_float<T>() ? (T *)S : buf.dev<T>(o_W);
    int lds = nk > 0 ? nk : 1;
    rc = gemm_heads(cublas, nh, TSR_TRANS, TSR_NOTRANS, nk, nq, hd, p->scale, K, ldk, sk, Q, ldq, sq, 0.0f, S, lds,
                    ss);
    if (!rc) {
        fwd_weights_kernel<<<dim3(nq, nh), kColThreads, 0, s>>>(*p, S, W, O, ldo, so, L, ldl, sl, o_mode);
        rc = launched();
    }
    if (!rc)
        rc = gemm_heads(cublas, nh, TSR_NOTRANS, TSR_NOTRANS, hd, nq, nk, 1.0f, V, ldv, sv, (const T *)W, lds, ss,
                        o_mode == TSR_OVERWRITE ? 0.0f : 1.0f, O, ldo, so);
    return rc;
}

template <typename T>
int bwd_prep(void *stream, int hd, int nq, int nh, const T *O, int ldo, size_t so, const T *dO, int lddo, size_t sdo,
             T *L, int ldl, size_t sl)
{
    if (nq == 0)
        return 0;
    dim3 grid((unsigned)((nq + kPrepColumns - 1) / kPrepColumns), (unsigned)nh);
    bwd_prep_kernel<<<grid, dim3(32, kPrepColumns), 0, (cudaStream_t)stream>>>(hd, nq, O, ldo, so, dO, lddo, sdo, L,
                                                                               ldl, sl);
    return launched();
}

template <typename T>
int bwd_step(void *cublas, const tsr_attn_pair_t *p, int nh, const T *Q, int ldq, size_t sq, const T *K, int ldk,
             size_t sk, const T *V, int ldv, size_t sv, const T *dO, int lddo, size_t sdo, const T *L, int ldl,
             size_t sl, T *dQ, int lddq, size_t sdq, T *dK, int lddk, size_t sdk, T *dV, int lddv, size_t sdv,
             tsr_write_t dq_mode, tsr_write_t dkv_mode)
{
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
    size_t o_Pw = is_float<T>() ? 0 : buf.add_scratch((size_t)nh * ss * sizeof(T));
    size_t o_dSw = is_float<T>() ? 0 : buf.add_scratch((size_t)nh * ss * sizeof(T));
    if ((rc = buf.upload()))
        return rc;
    float *P = buf.dev<float>(o_P), *dS = buf.dev<float>(o_dS); /* per head nk x nq each */
    T *Pw = is_float<T>() ? (T *)P : buf.dev<T>(o_Pw), *dSw = is_float<T>() ? (T *)dS : buf.dev<T>(o_dSw);
    int lds = nk > 0 ? nk : 1;
    rc = gemm_heads(cublas, nh, TSR_TRANS, TSR_NOTRANS, nk, nq, hd, p->scale, K, ldk, sk, Q, ldq, sq, 0.0f, P, lds,
                    ss);
    if (!rc && nq > 0 && nk > 0) {
        bwd_probs_kernel<<<dim3(nq, nh), kColThreads, 0, s>>>(*p, P, Pw, L, ldl, sl);
        rc = launched();
    }
    if (!rc)
        rc = gemm_heads(cublas, nh, TSR_NOTRANS, TSR_TRANS, hd, nk, nq, 1.0f, dO, lddo, sdo, (const T *)Pw, lds, ss,
                        beta_kv, dV, lddv, sdv);
    if (!rc)
        rc = gemm_heads(cublas, nh, TSR_TRANS, TSR_NOTRANS, nk, nq, hd, 1.0f, V, ldv, sv, dO, lddo, sdo, 0.0f, dS,
                        lds, ss);
    if (!rc && nq > 0 && nk > 0) {
        bwd_dscores_kernel<<<dim3(nq, nh), kColThreads, 0, s>>>(*p, P, dS, dSw, L, ldl, sl);
        rc = launched();
    }
    if (!rc)
        rc = gemm_heads(cublas, nh, TSR_NOTRANS, TSR_NOTRANS, hd, nq, nk, p->scale, K, ldk, sk, (const T *)dSw, lds,
                        ss, beta_q, dQ, lddq, sdq);
    if (!rc)
        rc = gemm_heads(cublas, nh, TSR_NOTRANS, TSR_TRANS, hd, nk, nq, p->scale, Q, ldq, sq, (const T *)dSw, lds,
                        ss, beta_kv, dK, lddk, sdk);
    return rc;
}

typedef __nv_bfloat16 bf16;

} /* namespace */

extern "C" int tsr_cuda_attention_fwd_step(void *cublas, tsr_dtype_t t, const tsr_attn_pair_t *p, int nh,
                                           const void *Q, int ldq, size_t sq, const void *K, int ldk, size_t sk,
                                           const void *V, int ldv, size_t sv, void *O, int ldo, size_t so, void *L,
                                           int ldl, size_t sl, tsr_write_t o_mode)
{
    if (!cublas || bad_type(t) || bad_pair(p) || bad_heads(nh) || ldl < 1 || bad_tile(p->hd, p->nq, ldq) ||
        bad_tile(p->hd, p->nk, ldk) || bad_tile(p->hd, p->nk, ldv) || bad_tile(p->hd, p->nq, ldo))
        return TSR_EINVAL;
    if (t == TSR_FLOAT32)
        return fwd_step(cublas, p, nh, (const float *)Q, ldq, sq, (const float *)K, ldk, sk, (const float *)V, ldv,
                        sv, (float *)O, ldo, so, (float *)L, ldl, sl, o_mode);
    return fwd_step(cublas, p, nh, (const bf16 *)Q, ldq, sq, (const bf16 *)K, ldk, sk, (const bf16 *)V, ldv, sv,
                    (bf16 *)O, ldo, so, (bf16 *)L, ldl, sl, o_mode);
}

extern "C" int tsr_cuda_attention_bwd_prep(void *stream, tsr_dtype_t t, int hd, int nq, int nh, const void *O,
                                           int ldo, size_t so, const void *dO, int lddo, size_t sdo, void *L,
                                           int ldl, size_t sl)
{
    if (bad_type(t) || hd < 0 || nq < 0 || bad_heads(nh) || ldl < 2 || bad_tile(hd, nq, ldo) || bad_tile(hd, nq, lddo))
        return TSR_EINVAL;
    if (t == TSR_FLOAT32)
        return bwd_prep(stream, hd, nq, nh, (const float *)O, ldo, so, (const float *)dO, lddo, sdo, (float *)L, ldl,
                        sl);
    return bwd_prep(stream, hd, nq, nh, (const bf16 *)O, ldo, so, (const bf16 *)dO, lddo, sdo, (bf16 *)L, ldl, sl);
}

extern "C" int tsr_cuda_attention_bwd_step(void *cublas, tsr_dtype_t t, const tsr_attn_pair_t *p, int nh,
                                           const void *Q, int ldq, size_t sq, const void *K, int ldk, size_t sk,
                                           const void *V, int ldv, size_t sv, const void *dO, int lddo, size_t sdo,
                                           const void *L, int ldl, size_t sl, void *dQ, int lddq, size_t sdq,
                                           void *dK, int lddk, size_t sdk, void *dV, int lddv, size_t sdv,
                                           tsr_write_t dq_mode, tsr_write_t dkv_mode)
{
    if (!cublas || bad_type(t) || bad_pair(p) || bad_heads(nh) || ldl < 2 || bad_tile(p->hd, p->nq, ldq) ||
        bad_tile(p->hd, p->nk, ldk) || bad_tile(p->hd, p->nk, ldv) || bad_tile(p->hd, p->nq, lddo) ||
        bad_tile(p->hd, p->nq, lddq) || bad_tile(p->hd, p->nk, lddk) || bad_tile(p->hd, p->nk, lddv))
        return TSR_EINVAL;
    if (t == TSR_FLOAT32)
        return bwd_step(cublas, p, nh, (const float *)Q, ldq, sq, (const float *)K, ldk, sk, (const float *)V, ldv,
                        sv, (const float *)dO, lddo, sdo, (const float *)L, ldl, sl, (float *)dQ, lddq, sdq,
                        (float *)dK, lddk, sdk, (float *)dV, lddv, sdv, dq_mode, dkv_mode);
    return bwd_step(cublas, p, nh, (const bf16 *)Q, ldq, sq, (const bf16 *)K, ldk, sk, (const bf16 *)V, ldv, sv,
                    (const bf16 *)dO, lddo, sdo, (const bf16 *)L, ldl, sl, (bf16 *)dQ, lddq, sdq, (bf16 *)dK, lddk,
                    sdk, (bf16 *)dV, lddv, sdv, dq_mode, dkv_mode);
}
