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
#include <mma.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <math.h>
#include "tsr_compute_cuda.h"
#include "tsr_compute_attention.h"
#include "tsr_cuda_util.cuh"

namespace {

typedef __nv_bfloat16 bf16;

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

/* ---- fused bf16 steps (head size 64, compute capability 8.0 and up) --------
 * With bf16 tiles of head size 64, a step runs as FlashAttention-2 does: the
 * scores of 64 queries x 64 keys at a time in shared memory, tensor-core
 * GEMMs (WMMA, bf16 operands, float accumulation), the softmax in float, and
 * key blocks that the causal mask hides skipped. The unfused path above
 * writes each head's whole nk x nq score block (float, and a bf16 copy) to
 * device memory and reads it back several times. Both round the weights and
 * dS to bf16 for their GEMMs and take the logsumexp and D from L. A block
 * runs 4 warps, a warp 16 query (or key) rows: the forward, one block per 64
 * queries; the backward, dK and dV per 64 keys and dQ per 64 queries (each
 * recomputes the weights; no atomics, so the sums are deterministic). */
namespace wmma = nvcuda::wmma;

constexpr int kHd = 64;                /* head size of the fused kernels */
constexpr int kRows = 64;              /* queries or keys of a block */
constexpr int kWarps = kRows / 16;     /* a warp per 16 rows */
constexpr int kFusedThreads = kWarps * 32;
constexpr int kLdb = kHd + 8;          /* shared bf16 row stride (a multiple of 8) */
constexpr int kLdf = kRows + 4;        /* shared float row stride (a multiple of 4) */
constexpr size_t kTileB = (size_t)kRows * kLdb * sizeof(bf16);        /* a 64-row operand */
constexpr size_t kWarpF = (size_t)kWarps * 16 * kLdf * sizeof(float); /* 16 x 64 floats a warp */
constexpr size_t kWarpB = (size_t)kWarps * 16 * kLdb * sizeof(bf16);  /* 16 x 64 bf16 a warp */
constexpr size_t kFwdSmem = 3 * kTileB + 2 * kWarpF + kWarpB + kRows * 2 * sizeof(float);
constexpr size_t kBwdSmem = 4 * kTileB + 2 * kWarpF + kWarpB + kRows * 2 * sizeof(float);

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define TSR_FUSED_BODY 1 /* bf16 WMMA needs sm_80; the host never launches the kernels below it */
#endif

#ifdef TSR_FUSED_BODY
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> Acc;

/* 64 rows of a head's block (row = a token's 64 values, ld apart) on their
 * way to shared memory, a thread's share of them in registers: fetched from
 * device memory while the block computes on the previous rows, then put.
 * 16-byte loads: the caller checked that ld, the head stride and the pointer
 * allow them. */
struct Rows {
    uint4 v[kRows * (kHd / 8) / kFusedThreads];
};

/* Rows r0 .. r0 + 63 of src, zeros past row n. */
__device__ void fetch_rows(Rows &x, const bf16 *src, int ld, int r0, int n)
{
    for (int k = 0; k < (int)(sizeof x.v / sizeof x.v[0]); k++) {
        int i = threadIdx.x + k * kFusedThreads, r = i / (kHd / 8), c = i % (kHd / 8) * 8;
        x.v[k] = r0 + r < n ? *(const uint4 *)(src + (size_t)(r0 + r) * ld + c) : make_uint4(0, 0, 0, 0);
    }
}

/* Into shared [64][kLdb]. */
__device__ void put_rows(bf16 *dst, const Rows &x)
{
    for (int k = 0; k < (int)(sizeof x.v / sizeof x.v[0]); k++) {
        int i = threadIdx.x + k * kFusedThreads, r = i / (kHd / 8), c = i % (kHd / 8) * 8;
        *(uint4 *)(dst + r * kLdb + c) = x.v[k];
    }
}

__device__ void load_rows(bf16 *dst, const bf16 *src, int ld, int r0, int n)
{
    Rows x;
    fetch_rows(x, src, ld, r0, n);
    put_rows(dst, x);
}

/* K and V rows kb .. kb + 63 into the registers, if the key loop visits
 * block kb (kend: the keys it visits). */
__device__ void fetch_key_block(Rows &nextK, Rows &nextV, const bf16 *K, int ldk, const bf16 *V, int ldv, int nk,
                                int kb, int kend)
{
    if (kb < kend)
        fetch_rows(nextK, K, ldk, kb, nk), fetch_rows(nextV, V, ldv, kb, nk);
}

/* The key loop's step to block kb: K and V rows kb .. kb + 63 from the
 * registers into Ks, Vs, and the next block's fetched. Every thread of the
 * block calls it. */
__device__ void next_key_block(bf16 *Ks, bf16 *Vs, Rows &nextK, Rows &nextV, const bf16 *K, int ldk, const bf16 *V,
                               int ldv, int nk, int kb, int kend)
{
    __syncthreads(); /* the last K and V block read (and what the block wrote before the loop) */
    put_rows(Ks, nextK);
    put_rows(Vs, nextV);
    __syncthreads();
    fetch_key_block(nextK, nextV, K, ldk, V, ldv, nk, kb + kRows, kend);
}

/* acc (+)= A op(B) for a warp: A its 16 x 64 rows (row stride kLdb), B 64
 * rows of [64][kLdb]; op(B) = B^T with BLayout col_major (16 x 64 dot
 * products of A's rows with B's rows), B itself with row_major. */
template <typename BLayout>
__device__ void warp_gemm(Acc acc[4], const bf16 *A, const bf16 *B)
{
    constexpr bool bt = std::is_same<BLayout, wmma::col_major>::value;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a[4];
    for (int kt = 0; kt < 4; kt++)
        wmma::load_matrix_sync(a[kt], A + kt * 16, kLdb);
    for (int nt = 0; nt < 4; nt++)
        for (int kt = 0; kt < 4; kt++) {
            wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, BLayout> b;
            wmma::load_matrix_sync(b, bt ? B + nt * 16 * kLdb + kt * 16 : B + kt * 16 * kLdb + nt * 16, kLdb);
            wmma::mma_sync(acc[nt], a[kt], b, acc[nt]);
        }
}

/* Scores: acc (+)= A_w B^T (rows of A against rows of B). */
__device__ void rows_dot_rows(Acc acc[4], const bf16 *A, const bf16 *B) { warp_gemm<wmma::col_major>(acc, A, B); }

/* Weighted sums: acc (+)= W B (W a warp's 16 x 64 weights). */
__device__ void weights_times_rows(Acc acc[4], const bf16 *W, const bf16 *B) { warp_gemm<wmma::row_major>(acc, W, B); }

__device__ void zero(Acc acc[4])
{
    for (int nt = 0; nt < 4; nt++)
        wmma::fill_fragment(acc[nt], 0.0f);
}

/* A warp's 16 x 64 accumulators into its floats F (row stride kLdf). */
__device__ void store_acc(float *F, Acc acc[4])
{
    for (int nt = 0; nt < 4; nt++)
        wmma::store_matrix_sync(F + nt * 16, acc[nt], kLdf, wmma::mem_row_major);
}

/* Scores into a warp's floats F: F = A_w B^T, as rows_dot_rows from zero. */
__device__ void store_rows_dot_rows(float *F, const bf16 *A, const bf16 *B)
{
    Acc acc[4];
    zero(acc);
    rows_dot_rows(acc, A, B);
    store_acc(F, acc);
}

/* Out rows row0 .. row0 + 15 (below n) = f * F + (accumulate ? g * Out : 0),
 * f, g per row (g read only when accumulating), by the warp, coalesced. */
__device__ void write_rows(bf16 *out, int ld, int row0, int n, const float *F, const float *f, const float *g,
                           bool accumulate)
{
    int lane = threadIdx.x % 32;
    for (int i = lane; i < 16 * kHd; i += 32) {
        int r = i / kHd, d = i % kHd;
        if (row0 + r >= n)
            break; /* rows in order: the rest are past n too */
        bf16 *o = out + (size_t)(row0 + r) * ld + d;
        float v = F[r * kLdf + d] * f[r];
        if (accumulate)
            v += load(o) * g[r];
        store(o, v);
    }
}

#endif /* TSR_FUSED_BODY */

/* Forward: grid (query blocks, heads). */
__global__ void __launch_bounds__(kFusedThreads)
    fused_fwd_kernel(tsr_attn_pair_t p, const bf16 *Q, int ldq, size_t sq, const bf16 *K, int ldk, size_t sk,
                     const bf16 *V, int ldv, size_t sv, bf16 *O, int ldo, size_t so, bf16 *L, int ldl, size_t sl,
                     tsr_write_t o_mode)
{
#ifdef TSR_FUSED_BODY
    extern __shared__ __align__(128) unsigned char smem[];
    bf16 *Qs = (bf16 *)smem, *Ks = (bf16 *)(smem + kTileB), *Vs = (bf16 *)(smem + 2 * kTileB);
    int w = threadIdx.x / 32, lane = threadIdx.x % 32, z = blockIdx.y;
    float *S = (float *)(smem + 3 * kTileB) + w * 16 * kLdf;          /* scores of the warp's 16 queries */
    float *Of = (float *)(smem + 3 * kTileB + kWarpF) + w * 16 * kLdf; /* their unnormalised outputs */
    bf16 *W = (bf16 *)(smem + 3 * kTileB + 2 * kWarpF) + w * 16 * kLdb; /* their weights, bf16 */
    float *fnew = (float *)(smem + 3 * kTileB + 2 * kWarpF + kWarpB) + w * 16, *fold = fnew + kRows;
    /* the lane: row r, and of its columns those of parity h, in an order that
     * puts the 32 lanes' accesses in 32 different shared memory banks */
    int qb = blockIdx.x * kRows, r = lane / 2, h = lane % 2;
    auto col = [r, h](int i) { return 2 * ((i + r) & 31) + h; };
    int ii = qb + w * 16 + r, nv = ii < p.nq ? visible_keys(p, ii) : 0;
    int kend = visible_keys(p, min(p.nq, qb + kRows) - 1); /* keys the block's last query sees */
    Q += z * sq, K += z * sk, V += z * sv, O += z * so, L += z * sl;
    load_rows(Qs, Q, ldq, qb, p.nq);
    for (int i = 0; i < 32; i++)
        Of[r * kLdf + col(i)] = 0.0f;
    float m = -INFINITY, l = 0.0f; /* the row's running maximum and sum */
    Acc acc[4];
    Rows nextK, nextV;
    fetch_key_block(nextK, nextV, K, ldk, V, ldv, p.nk, 0, kend);
    for (int kb = 0; kb < kend; kb += kRows) {
        next_key_block(Ks, Vs, nextK, nextV, K, ldk, V, ldv, p.nk, kb, kend);
        store_rows_dot_rows(S, Qs + w * 16 * kLdb, Ks);
        __syncwarp();
        int lim = nv - kb; /* the row sees columns < lim */
        float mb = -INFINITY;
        for (int i = 0; i < 32; i++)
            if (col(i) < lim)
                mb = fmaxf(mb, S[r * kLdf + col(i)] * p.scale);
        mb = fmaxf(mb, __shfl_xor_sync(0xffffffffu, mb, 1));
        float mnew = fmaxf(m, mb), rescale = mnew == -INFINITY ? 1.0f : expf(m - mnew), sum = 0.0f;
        for (int i = 0; i < 32; i++) {
            int c = col(i);
            float e = c < lim ? expf(S[r * kLdf + c] * p.scale - mnew) : 0.0f;
            sum += e;
            W[r * kLdb + c] = __float2bfloat16(e);
            Of[r * kLdf + c] *= rescale;
        }
        l = l * rescale + sum + __shfl_xor_sync(0xffffffffu, sum, 1);
        m = mnew;
        __syncwarp();
        for (int nt = 0; nt < 4; nt++)
            wmma::load_matrix_sync(acc[nt], Of + nt * 16, kLdf, wmma::mem_row_major);
        weights_times_rows(acc, W, Vs);
        store_acc(Of, acc);
        __syncwarp();
    }
    /* fold the block into O and the logsumexp, as fwd_weights_kernel does */
    float blk = l > 0.0f ? m + logf(l) : -INFINITY, now = blk, keep = 0.0f, f = l > 0.0f ? 1.0f / l : 0.0f;
    bf16 *lse = L + (size_t)ii * ldl;
    if (o_mode == TSR_ACCUMULATE && ii < p.nq) {
        float old = load(lse);
        if (blk == -INFINITY) {
            now = old, keep = 1.0f; /* nothing visible: O and the logsumexp stay */
        } else {
            float hi = fmaxf(old, blk), lo = fminf(old, blk);
            now = lo == -INFINITY ? hi : hi + log1pf(expf(lo - hi));
            keep = expf(old - now), f = expf(blk - now) / l;
        }
    }
    __syncwarp(); /* both lanes of the row have read the old logsumexp */
    if (h == 0) {
        fnew[r] = f, fold[r] = keep;
        if (ii < p.nq)
            store(lse, now);
    }
    __syncwarp();
    write_rows(O, ldo, qb + w * 16, p.nq, Of, fnew, fold, o_mode == TSR_ACCUMULATE);
#endif
}

/* Backward, dK and dV: grid (key blocks, heads). */
__global__ void __launch_bounds__(kFusedThreads)
    fused_bwd_dkdv_kernel(tsr_attn_pair_t p, const bf16 *Q, int ldq, size_t sq, const bf16 *K, int ldk, size_t sk,
                          const bf16 *V, int ldv, size_t sv, const bf16 *dO, int lddo, size_t sdo, const bf16 *L,
                          int ldl, size_t sl, bf16 *dK, int lddk, size_t sdk, bf16 *dV, int lddv, size_t sdv,
                          tsr_write_t kv_mode)
{
#ifdef TSR_FUSED_BODY
    extern __shared__ __align__(128) unsigned char smem[];
    bf16 *Ks = (bf16 *)smem, *Vs = (bf16 *)(smem + kTileB), *Qs = (bf16 *)(smem + 2 * kTileB);
    bf16 *dOs = (bf16 *)(smem + 3 * kTileB);
    int w = threadIdx.x / 32, lane = threadIdx.x % 32, z = blockIdx.y;
    float *P = (float *)(smem + 4 * kTileB) + w * 16 * kLdf;           /* P^T: the warp's 16 keys x 64 queries */
    float *dP = (float *)(smem + 4 * kTileB + kWarpF) + w * 16 * kLdf; /* dP^T */
    bf16 *Pb = (bf16 *)(smem + 4 * kTileB + 2 * kWarpF) + w * 16 * kLdb; /* P^T, then dS^T, bf16 */
    float *lse = (float *)(smem + 4 * kTileB + 2 * kWarpF + kWarpB), *D = lse + kRows;
    int kb = blockIdx.x * kRows, j0 = kb + w * 16; /* the warp's first key; a lane: columns lane, lane + 32 */
    Q += z * sq, K += z * sk, V += z * sv, dO += z * sdo, L += z * sl, dK += z * sdk, dV += z * sdv;
    load_rows(Ks, K, ldk, kb, p.nk);
    load_rows(Vs, V, ldv, kb, p.nk);
    Acc dk[4], dv[4];
    zero(dk);
    zero(dv);
    long first = (long)p.k0 + kb - p.q0; /* the first query that sees key kb */
    int qs0 = first > 0 ? (int)(first / kRows * kRows) : 0;
    Rows nextQ, nextdO;
    float next_lse = 0.0f, next_D = 0.0f; /* thread i < 64: query i's */
    auto fetch = [&](int qs) {
        fetch_rows(nextQ, Q, ldq, qs, p.nq);
        fetch_rows(nextdO, dO, lddo, qs, p.nq);
        int q = qs + threadIdx.x;
        if (threadIdx.x < kRows && q < p.nq)
            next_lse = load(&L[(size_t)q * ldl]), next_D = load(&L[(size_t)q * ldl + 1]);
    };
    if (qs0 < p.nq)
        fetch(qs0);
    for (int qs = qs0; qs < p.nq; qs += kRows) {
        __syncthreads(); /* the last Q and dO block read (and Ks, Vs written) */
        put_rows(Qs, nextQ);
        put_rows(dOs, nextdO);
        if (threadIdx.x < kRows)
            lse[threadIdx.x] = next_lse, D[threadIdx.x] = next_D;
        __syncthreads();
        if (qs + kRows < p.nq)
            fetch(qs + kRows);
        store_rows_dot_rows(P, Ks + w * 16 * kLdb, Qs);
        __syncwarp();
        for (int c = lane; c < kRows; c += 32) {
            int q = qs + c, seen = q < p.nq ? visible_keys(p, q) : 0; /* keys j < seen see query q */
            for (int r = 0; r < 16; r++) {
                float v = j0 + r < seen ? expf(P[r * kLdf + c] * p.scale - lse[c]) : 0.0f;
                P[r * kLdf + c] = v;
                Pb[r * kLdb + c] = __float2bfloat16(v);
            }
        }
        __syncwarp();
        weights_times_rows(dv, Pb, dOs);
        store_rows_dot_rows(dP, Vs + w * 16 * kLdb, dOs);
        __syncwarp();
        for (int c = lane; c < kRows; c += 32)
            for (int r = 0; r < 16; r++)
                Pb[r * kLdb + c] = __float2bfloat16(P[r * kLdf + c] * (dP[r * kLdf + c] - D[c]));
        __syncwarp();
        weights_times_rows(dk, Pb, Qs);
    }
    store_acc(P, dv);
    store_acc(dP, dk);
    float *ones = lse + w * 16, *scales = D + w * 16; /* per-row factors; the loop is done with lse and D */
    __syncthreads();
    if (lane < 16)
        ones[lane] = 1.0f, scales[lane] = p.scale;
    __syncwarp();
    bool acc_kv = kv_mode == TSR_ACCUMULATE;
    write_rows(dV, lddv, kb + w * 16, p.nk, P, ones, ones, acc_kv);
    write_rows(dK, lddk, kb + w * 16, p.nk, dP, scales, ones, acc_kv);
#endif
}

/* Backward, dQ: grid (query blocks, heads). */
__global__ void __launch_bounds__(kFusedThreads)
    fused_bwd_dq_kernel(tsr_attn_pair_t p, const bf16 *Q, int ldq, size_t sq, const bf16 *K, int ldk, size_t sk,
                        const bf16 *V, int ldv, size_t sv, const bf16 *dO, int lddo, size_t sdo, const bf16 *L,
                        int ldl, size_t sl, bf16 *dQ, int lddq, size_t sdq, tsr_write_t q_mode)
{
#ifdef TSR_FUSED_BODY
    extern __shared__ __align__(128) unsigned char smem[];
    bf16 *Qs = (bf16 *)smem, *dOs = (bf16 *)(smem + kTileB), *Ks = (bf16 *)(smem + 2 * kTileB);
    bf16 *Vs = (bf16 *)(smem + 3 * kTileB);
    int w = threadIdx.x / 32, lane = threadIdx.x % 32, z = blockIdx.y;
    float *S = (float *)(smem + 4 * kTileB) + w * 16 * kLdf;           /* the warp's 16 queries x 64 keys */
    float *dP = (float *)(smem + 4 * kTileB + kWarpF) + w * 16 * kLdf;
    bf16 *dS = (bf16 *)(smem + 4 * kTileB + 2 * kWarpF) + w * 16 * kLdb;
    float *lse = (float *)(smem + 4 * kTileB + 2 * kWarpF + kWarpB), *D = lse + kRows; /* the block's queries' */
    int qb = blockIdx.x * kRows, i0 = qb + w * 16; /* the warp's first query; a lane: columns lane, lane + 32 */
    Q += z * sq, K += z * sk, V += z * sv, dO += z * sdo, L += z * sl, dQ += z * sdq;
    int kend = visible_keys(p, min(p.nq, qb + kRows) - 1);
    for (int i = threadIdx.x; i < kRows; i += kFusedThreads) {
        bool in = qb + i < p.nq;
        lse[i] = in ? load(&L[(size_t)(qb + i) * ldl]) : 0.0f;
        D[i] = in ? load(&L[(size_t)(qb + i) * ldl + 1]) : 0.0f;
    }
    lse += w * 16, D += w * 16;
    load_rows(Qs, Q, ldq, qb, p.nq);
    load_rows(dOs, dO, lddo, qb, p.nq);
    Acc dq[4];
    zero(dq);
    Rows nextK, nextV;
    fetch_key_block(nextK, nextV, K, ldk, V, ldv, p.nk, 0, kend);
    for (int kb = 0; kb < kend; kb += kRows) {
        next_key_block(Ks, Vs, nextK, nextV, K, ldk, V, ldv, p.nk, kb, kend);
        store_rows_dot_rows(S, Qs + w * 16 * kLdb, Ks);
        store_rows_dot_rows(dP, dOs + w * 16 * kLdb, Vs);
        __syncwarp();
        for (int r = 0; r < 16; r++) {
            int lim = (i0 + r < p.nq ? visible_keys(p, i0 + r) : 0) - kb; /* the row sees columns < lim */
            for (int c = lane; c < kRows; c += 32) {
                float pr = c < lim ? expf(S[r * kLdf + c] * p.scale - lse[r]) : 0.0f;
                dS[r * kLdb + c] = __float2bfloat16(pr * (dP[r * kLdf + c] - D[r]));
            }
        }
        __syncwarp();
        weights_times_rows(dq, dS, Ks);
    }
    store_acc(S, dq);
    __syncthreads(); /* every thread has written (and read) lse and D: the warp's rows become its factors */
    if (lane < 16)
        lse[lane] = p.scale, D[lane] = 1.0f;
    __syncwarp();
    write_rows(dQ, lddq, i0, p.nq, S, lse, D, q_mode == TSR_ACCUMULATE);
#endif
}

/* Whether the current device runs the fused kernels (compute capability 8.0
 * or more), their shared memory allowed once per device. */
bool fused_device()
{
    static int state[64]; /* per device: 0 unknown, 1 yes, 2 no */
    int dev, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    if (dev < 0 || dev >= 64)
        return false;
    int s = __atomic_load_n(&state[dev], __ATOMIC_RELAXED);
    if (s)
        return s == 1;
    bool ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 8 &&
              cudaFuncSetAttribute(fused_fwd_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kFwdSmem) ==
                  cudaSuccess &&
              cudaFuncSetAttribute(fused_bwd_dkdv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   (int)kBwdSmem) == cudaSuccess &&
              cudaFuncSetAttribute(fused_bwd_dq_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   (int)kBwdSmem) == cudaSuccess;
    if (!ok)
        (void)cudaGetLastError();
    __atomic_store_n(&state[dev], ok ? 1 : 2, __ATOMIC_RELAXED);
    return ok;
}

/* An operand the fused kernels can read and write with 16-byte accesses. */
bool rows_aligned(const void *x, int ld, size_t zstride)
{
    return (uintptr_t)x % 16 == 0 && ld % 8 == 0 && zstride % 8 == 0;
}

/* The fused steps take this pair: bf16, head size 64, aligned operands, a GPU that has them. */
bool fused_ok(const tsr_attn_pair_t *p, const void *Q, int ldq, size_t sq, const void *K, int ldk, size_t sk,
                  const void *V, int ldv, size_t sv, const void *O, int ldo, size_t so)
{
    return p->hd == kHd && rows_aligned(Q, ldq, sq) && rows_aligned(K, ldk, sk) && rows_aligned(V, ldv, sv) &&
           rows_aligned(O, ldo, so) && fused_device();
}

int fused_fwd_step(void *cublas, const tsr_attn_pair_t *p, int nh, const bf16 *Q, int ldq, size_t sq, const bf16 *K,
                   int ldk, size_t sk, const bf16 *V, int ldv, size_t sv, bf16 *O, int ldo, size_t so, bf16 *L, int ldl,
                   size_t sl, tsr_write_t o_mode)
{
    if (p->nq == 0)
        return 0;
    cudaStream_t s;
    int rc = handle_stream(cublas, &s);
    if (rc)
        return rc;
    dim3 grid((unsigned)((p->nq + kRows - 1) / kRows), (unsigned)nh);
    fused_fwd_kernel<<<grid, kFusedThreads, kFwdSmem, s>>>(*p, Q, ldq, sq, K, ldk, sk, V, ldv, sv, O, ldo, so, L, ldl,
                                                           sl, o_mode);
    return launched();
}

int fused_bwd_step(void *cublas, const tsr_attn_pair_t *p, int nh, const bf16 *Q, int ldq, size_t sq, const bf16 *K,
                   int ldk, size_t sk, const bf16 *V, int ldv, size_t sv, const bf16 *dO, int lddo, size_t sdo,
                   const bf16 *L, int ldl, size_t sl, bf16 *dQ, int lddq, size_t sdq, bf16 *dK, int lddk, size_t sdk,
                   bf16 *dV, int lddv, size_t sdv, tsr_write_t dq_mode, tsr_write_t dkv_mode)
{
    cudaStream_t s;
    int rc = handle_stream(cublas, &s);
    if (rc)
        return rc;
    if (p->nk > 0) {
        dim3 grid((unsigned)((p->nk + kRows - 1) / kRows), (unsigned)nh);
        fused_bwd_dkdv_kernel<<<grid, kFusedThreads, kBwdSmem, s>>>(*p, Q, ldq, sq, K, ldk, sk, V, ldv, sv, dO, lddo,
                                                                    sdo, L, ldl, sl, dK, lddk, sdk, dV, lddv, sdv,
                                                                    dkv_mode);
        if ((rc = launched()))
            return rc;
    }
    if (p->nq > 0) {
        dim3 grid((unsigned)((p->nq + kRows - 1) / kRows), (unsigned)nh);
        fused_bwd_dq_kernel<<<grid, kFusedThreads, kBwdSmem, s>>>(*p, Q, ldq, sq, K, ldk, sk, V, ldv, sv, dO, lddo,
                                                                  sdo, L, ldl, sl, dQ, lddq, sdq, dq_mode);
        rc = launched();
    }
    return rc;
}


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
    if (fused_ok(p, Q, ldq, sq, K, ldk, sk, V, ldv, sv, O, ldo, so))
        return fused_fwd_step(cublas, p, nh, (const bf16 *)Q, ldq, sq, (const bf16 *)K, ldk, sk, (const bf16 *)V, ldv,
                              sv, (bf16 *)O, ldo, so, (bf16 *)L, ldl, sl, o_mode);
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
    if (fused_ok(p, Q, ldq, sq, K, ldk, sk, V, ldv, sv, dO, lddo, sdo) && rows_aligned(dQ, lddq, sdq) &&
        rows_aligned(dK, lddk, sdk) && rows_aligned(dV, lddv, sdv))
        return fused_bwd_step(cublas, p, nh, (const bf16 *)Q, ldq, sq, (const bf16 *)K, ldk, sk, (const bf16 *)V, ldv,
                              sv, (const bf16 *)dO, lddo, sdo, (const bf16 *)L, ldl, sl, (bf16 *)dQ, lddq, sdq,
                              (bf16 *)dK, lddk, sdk, (bf16 *)dV, lddv, sdv, dq_mode, dkv_mode);
    return bwd_step(cublas, p, nh, (const bf16 *)Q, ldq, sq, (const bf16 *)K, ldk, sk, (const bf16 *)V, ldv, sv,
                    (const bf16 *)dO, lddo, sdo, (const bf16 *)L, ldl, sl, (bf16 *)dQ, lddq, sdq, (bf16 *)dK, lddk,
                    sdk, (bf16 *)dV, lddv, sdv, dq_mode, dkv_mode);
}
