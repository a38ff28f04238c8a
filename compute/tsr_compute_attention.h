/* Tessera compute layer: per-tile kernels of flash-style causal attention
 * (float32, one head at a time, no StarPU).
 *
 * A block of Q, K, V, out or their gradients is hd x n, column-major with a
 * leading dimension (one token's head vector per column). A block pair is a
 * query block of nq tokens starting at global position q0 and a key block of
 * nk tokens starting at k0: query q sees key k when k <= q, so the causal
 * mask is exact whatever the tiling. Scores are s = scale * q . k.
 *
 * Per-query statistics: a 2 x nq block with leading dimension ldl; row 0 is
 * the logsumexp of the query's visible scores (written by the forward), row 1
 * is D = dout . out (written by tsr_cpu_attention_bwd_prep for the backward). */
#ifndef TSR_COMPUTE_ATTENTION_H
#define TSR_COMPUTE_ATTENTION_H
#include <stddef.h>
#include "tsr_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Geometry of one (query block, key block) pair. */
typedef struct {
    int hd;      /* head dimension (rows of every block) */
    int nq, nk;  /* queries / keys in the blocks */
    int q0, k0;  /* global positions of the first query / key */
    float scale; /* score scale, 1/sqrt(hd) for GPT-2 */
} tsr_attn_pair_t;

/* Keys of the key block that query column ii sees (0 .. nk). */
int tsr_attn_visible_keys(const tsr_attn_pair_t *p, int ii);

/* (query, key) pairs of the block a query sees: the useful work. */
long long tsr_attn_visible_pairs(const tsr_attn_pair_t *p);

/* The CPU kernels take the queries in chunks of this many, each against the
 * keys up to the chunk's last visible one, and skip the rest of the block. */
#ifndef TSR_ATTN_QUERY_CHUNK
#define TSR_ATTN_QUERY_CHUNK 64
#endif

/* (query, key) pairs whose scores the CPU kernels compute (>= visible). */
long long tsr_attn_computed_pairs(const tsr_attn_pair_t *p);

/* Scratch floats the kernels below need (scores of one chunk). */
size_t tsr_cpu_attention_fwd_scratch(int nq, int nk);
size_t tsr_cpu_attention_bwd_scratch(int nq, int nk);

/* One online-softmax step: folds the key block into the running output O
 * (hd x nq) and the running logsumexp (row 0 of L). O always holds the
 * softmax-weighted sum of the key blocks folded so far, normalised by their
 * logsumexp, so after the last key block O is the attention output and L
 * holds the final logsumexp. o_mode TSR_OVERWRITE: O and L are not read
 * (first key block of the chain). */
void tsr_cpu_attention_fwd_step(const tsr_attn_pair_t *p, const float *Q, int ldq, const float *K, int ldk,
                                const float *V, int ldv, float *O, int ldo, float *L, int ldl, tsr_write_t o_mode,
                                float *scratch, int nthreads);

/* Row 1 of L: D_i = sum_d dO[d,i] O[d,i] for the nq queries. */
void tsr_cpu_attention_bwd_prep(int hd, int nq, const float *O, int ldo, const float *dO, int lddo,
                                float *L, int ldl);

/* Backward of one block pair: recomputes P = exp(s - lse) from Q, K and L
 * (rows 0 and 1 filled), then
 *   dV (hd x nk) += dO P^T,  dS = P o (V^T dO - D),
 *   dQ (hd x nq) += scale K dS,  dK (hd x nk) += scale Q dS^T.
 * dq_mode / dkv_mode TSR_OVERWRITE: dQ / (dK, dV) are overwritten, not read. */
void tsr_cpu_attention_bwd_step(const tsr_attn_pair_t *p, const float *Q, int ldq, const float *K, int ldk,
                                const float *V, int ldv, const float *dO, int lddo, const float *L, int ldl,
                                float *dQ, int lddq, float *dK, int lddk, float *dV, int lddv,
                                tsr_write_t dq_mode, tsr_write_t dkv_mode, float *scratch, int nthreads);

/* CUDA side (compute/cuda/attention.cu, built when TSR_USE_CUDA is on): the
 * same steps on device pointers, for nh heads at once (a 3D tile's heads:
 * each operand's z-th block starts `s*` elements after its first, its
 * zstride), so that a task makes a few batched cuBLAS calls and kernel
 * launches whatever its heads. Every tile is of type t: TSR_FLOAT32, or
 * TSR_BFLOAT16 (GEMMs on bf16 operands with float accumulation, the softmax
 * in float). Asynchronous on the stream of the cuBLAS handle `cublas` (a
 * cublasHandle_t) or on `stream` (a cudaStream_t). The steps allocate their
 * score scratch (nh whole nk x nq blocks) themselves, in stream order
 * (cudaMallocAsync / cudaFreeAsync). The softmax sums are float block
 * reductions with CUDA's exp (bwd_prep accumulates in double as the CPU).
 * Return 0, TSR_EINVAL (bad sizes or type, checked before anything is queued)
 * or TSR_ERUNTIME (CUDA or cuBLAS failure, out of device memory included). */
int tsr_cuda_attention_fwd_step(void *cublas, tsr_dtype_t t, const tsr_attn_pair_t *p, int nh, const void *Q,
                                int ldq, size_t sq, const void *K, int ldk, size_t sk, const void *V, int ldv,
                                size_t sv, void *O, int ldo, size_t so, void *L, int ldl, size_t sl,
                                tsr_write_t o_mode);
int tsr_cuda_attention_bwd_prep(void *stream, tsr_dtype_t t, int hd, int nq, int nh, const void *O, int ldo,
                                size_t so, const void *dO, int lddo, size_t sdo, void *L, int ldl, size_t sl);
int tsr_cuda_attention_bwd_step(void *cublas, tsr_dtype_t t, const tsr_attn_pair_t *p, int nh, const void *Q,
                                int ldq, size_t sq, const void *K, int ldk, size_t sk, const void *V, int ldv,
                                size_t sv, const void *dO, int lddo, size_t sdo, const void *L, int ldl, size_t sl,
                                void *dQ, int lddq, size_t sdq, void *dK, int lddk, size_t sdk, void *dV, int lddv,
                                size_t sdv, tsr_write_t dq_mode, tsr_write_t dkv_mode);

#ifdef __cplusplus
}
#endif
#endif
