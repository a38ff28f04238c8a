/* CPU kernels of flash-style causal attention (see tsr_compute_attention.h):
 * the score blocks go through tsr_cpu_gemm, the softmax work is plain C
 * written so that the compiler vectorises it. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "tsr_compute.h"
#include "tsr_compute_attention.h"
#include "simd_math.h"


/* x[j] = exp(x[j] - shift) for j < n; returns their sum. */
static inline float exp_shift_sum(float *x, int n, float shift)
{
    float lane[LANES] = { 0 };
    int j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int u = 0; u < LANES; u++) {
            float e = exp_approx(x[j + u] - shift);
            x[j + u] = e;
            lane[u] += e;
        }
    float s = 0.0f;
    for (; j < n; j++) {
        x[j] = exp_approx(x[j] - shift);
        s += x[j];
    }
    for (int u = 0; u < LANES; u++)
        s += lane[u];
    return s;
}

/* x[j] = exp(x[j] - shift) for j < n (no sum). */
static inline void exp_shift(float *x, int n, float shift)
{
    for (int j = 0; j < n; j++)
        x[j] = exp_approx(x[j] - shift);
}

static inline void scale_floats(float *x, int n, float a)
{
    for (int j = 0; j < n; j++)
        x[j] *= a;
}

/* ds[j] = p[j] * (ds[j] - d) for j < n. */
static inline void softmax_grad(const float *p, float *ds, int n, float d)
{
    for (int j = 0; j < n; j++)
        ds[j] = p[j] * (ds[j] - d);
}

static inline void zero_floats(float *x, int n)
{
    if (n > 0)
        memset(x, 0, (size_t)n * sizeof *x);
}

/* log(exp(a) + exp(b)) with a possibly -inf. */
static inline float log_add_exp(float a, float b)
{
    float hi = a > b ? a : b, lo = a > b ? b : a;
    if (lo == -INFINITY)
        return hi;
    return hi + log1pf(expf(lo - hi));
}

int tsr_attn_visible_keys(const tsr_attn_pair_t *p, int ii)
{
    long v = (long)p->q0 + ii - p->k0 + 1;
    return v < 0 ? 0 : (v > p->nk ? p->nk : (int)v);
}

static int imin(int a, int b) { return a < b ? a : b; }

/* The kernels below walk the query block in chunks of TSR_ATTN_QUERY_CHUNK
 * queries, each against the keys its last query sees: a diagonal block
 * computes about half of its score block, not all of it, and a chunk's
 * scores (at most nk x chunk floats) stay in cache between the GEMMs.
 * The sub-pair of queries [c0, c0 + cq) against the keys they see. */
static tsr_attn_pair_t chunk_pair(const tsr_attn_pair_t *p, int c0, int cq)
{
    tsr_attn_pair_t c = *p;
    c.nq = cq;
    c.q0 = p->q0 + c0;
    c.nk = tsr_attn_visible_keys(p, c0 + cq - 1);
    return c;
}

long long tsr_attn_visible_pairs(const tsr_attn_pair_t *p)
{
    long long n = 0;
    for (int ii = 0; ii < p->nq; ii++)
        n += tsr_attn_visible_keys(p, ii);
    return n;
}

long long tsr_attn_computed_pairs(const tsr_attn_pair_t *p)
{
    long long n = 0;
    for (int c0 = 0; c0 < p->nq; c0 += TSR_ATTN_QUERY_CHUNK) {
        int cq = imin(TSR_ATTN_QUERY_CHUNK, p->nq - c0);
        n += (long long)cq * chunk_pair(p, c0, cq).nk;
    }
    return n;
}

size_t tsr_cpu_attention_fwd_scratch(int nq, int nk) { return (size_t)imin(nq, TSR_ATTN_QUERY_CHUNK) * nk; }
size_t tsr_cpu_attention_bwd_scratch(int nq, int nk) { return 2 * tsr_cpu_attention_fwd_scratch(nq, nk); }

/* Turns score column s (nk keys, nv visible) into the weights of this key
 * block relative to the new running logsumexp, which it returns through *lse;
 * returns the factor that rescales the old output column. */
static inline float fwd_column(float *s, int nk, int nv, float *lse, tsr_write_t o_mode)
{
    float old = o_mode == TSR_OVERWRITE ? -INFINITY : *lse;
    zero_floats(s + nv, nk - nv);
    if (nv == 0) {
        if (o_mode == TSR_OVERWRITE)
            *lse = -INFINITY;
        return 1.0f;
    }
    float mx = max_of(s, nv);
    float sum = exp_shift_sum(s, nv, mx);
    float now = log_add_exp(old, mx + logf(sum));
    scale_floats(s, nv, expf(mx - now));
    *lse = now;
    return o_mode == TSR_OVERWRITE ? 0.0f : expf(old - now);
}


/* The forward's softmax work on the nk x nq score block S: weights in S,
 * running logsumexp in L row 0, old output columns rescaled. */
TSR_SIMD_CLONES
static void fwd_block_weights(const tsr_attn_pair_t *p, float *S, float *O, int ldo, float *L, int ldl,
                              tsr_write_t o_mode)
{
    for (int ii = 0; ii < p->nq; ii++) {
        float keep = fwd_column(S + (size_t)ii * p->nk, p->nk, tsr_attn_visible_keys(p, ii), L + (size_t)ii * ldl,
                                o_mode);
        if (o_mode == TSR_ACCUMULATE && keep != 1.0f)
            scale_floats(O + (size_t)ii * ldo, p->hd, keep);
    }
}

/* P = exp(S - lse) on visible keys, 0 on masked ones. */
TSR_SIMD_CLONES
static void bwd_block_probs(const tsr_attn_pair_t *p, float *P, const float *L, int ldl)
{
    for (int ii = 0; ii < p->nq; ii++) {
        int nv = tsr_attn_visible_keys(p, ii);
        float *col = P + (size_t)ii * p->nk;
        exp_shift(col, nv, L[(size_t)ii * ldl]);
        zero_floats(col + nv, p->nk - nv);
    }
}

/* dS = P o (dP - D) on visible keys (dS holds dP on entry), 0 on masked ones. */
TSR_SIMD_CLONES
static void bwd_block_dscores(const tsr_attn_pair_t *p, const float *P, float *dS, const float *L, int ldl)
{
    for (int ii = 0; ii < p->nq; ii++) {
        int nv = tsr_attn_visible_keys(p, ii);
        float *col = dS + (size_t)ii * p->nk;
        softmax_grad(P + (size_t)ii * p->nk, col, nv, L[(size_t)ii * ldl + 1]);
        zero_floats(col + nv, p->nk - nv);
    }
}

/* Queries that see no key of the block: the first key block of their chain
 * leaves them an empty sum (O 0, logsumexp -inf); a later one changes nothing. */
static void fwd_no_keys(int hd, int cq, float *O, int ldo, float *L, int ldl, tsr_write_t o_mode)
{
    for (int ii = 0; o_mode == TSR_OVERWRITE && ii < cq; ii++) {
        zero_floats(O + (size_t)ii * ldo, hd);
        L[(size_t)ii * ldl] = -INFINITY;
    }
}

void tsr_cpu_attention_fwd_step(const tsr_attn_pair_t *p, const float *Q, int ldq, const float *K, int ldk,
                                const float *V, int ldv, float *O, int ldo, float *L, int ldl, tsr_write_t o_mode,
                                float *scratch, int nthreads)
{
    float *S = scratch; /* nk x cq scores, then weights; one query per column */
    for (int c0 = 0; c0 < p->nq; c0 += TSR_ATTN_QUERY_CHUNK) {
        tsr_attn_pair_t c = chunk_pair(p, c0, imin(TSR_ATTN_QUERY_CHUNK, p->nq - c0));
        const float *q = Q + (size_t)c0 * ldq;
        float *o = O + (size_t)c0 * ldo, *l = L + (size_t)c0 * ldl;
        if (c.nk == 0) {
            fwd_no_keys(c.hd, c.nq, o, ldo, l, ldl, o_mode);
            continue;
        }
        tsr_cpu_gemm(TSR_FLOAT32, TSR_TRANS, TSR_NOTRANS, c.nk, c.nq, c.hd, c.scale, K, ldk, q, ldq, 0.0, S, c.nk,
                     nthreads);
        fwd_block_weights(&c, S, o, ldo, l, ldl, o_mode);
        tsr_cpu_gemm(TSR_FLOAT32, TSR_NOTRANS, TSR_NOTRANS, c.hd, c.nq, c.nk, 1.0, V, ldv, S, c.nk,
                     o_mode == TSR_OVERWRITE ? 0.0 : 1.0, o, ldo, nthreads);
    }
}

void tsr_cpu_attention_bwd_prep(int hd, int nq, const float *O, int ldo, const float *dO, int lddo,
                                float *L, int ldl)
{
    for (int ii = 0; ii < nq; ii++) {
        const float *o = O + (size_t)ii * ldo, *g = dO + (size_t)ii * lddo;
        double d = 0.0;
        for (int r = 0; r < hd; r++)
            d += (double)o[r] * g[r];
        L[(size_t)ii * ldl + 1] = (float)d;
    }
}

static void zero_columns(float *X, int ld, int rows, int c0, int c1)
{
    for (int j = c0; j < c1; j++)
        zero_floats(X + (size_t)j * ld, rows);
}

/* One chunk's backward (c: its sub-pair, pointers at its first query). */
static void bwd_chunk(const tsr_attn_pair_t *c, const float *Q, int ldq, const float *K, int ldk, const float *V,
                      int ldv, const float *dO, int lddo, const float *L, int ldl, float *dQ, int lddq, float *dK,
                      int lddk, float *dV, int lddv, double beta_q, double beta_kv, float *scratch, int nthreads)
{
    int nq = c->nq, nk = c->nk, hd = c->hd;
    float *P = scratch, *dS = scratch + (size_t)nq * nk; /* nk x nq each */
    tsr_cpu_gemm(TSR_FLOAT32, TSR_TRANS, TSR_NOTRANS, nk, nq, hd, c->scale, K, ldk, Q, ldq, 0.0, P, nk, nthreads);
    bwd_block_probs(c, P, L, ldl);
    tsr_cpu_gemm(TSR_FLOAT32, TSR_NOTRANS, TSR_TRANS, hd, nk, nq, 1.0, dO, lddo, P, nk, beta_kv, dV, lddv, nthreads);
    tsr_cpu_gemm(TSR_FLOAT32, TSR_TRANS, TSR_NOTRANS, nk, nq, hd, 1.0, V, ldv, dO, lddo, 0.0, dS, nk, nthreads);
    bwd_block_dscores(c, P, dS, L, ldl);
    tsr_cpu_gemm(TSR_FLOAT32, TSR_NOTRANS, TSR_NOTRANS, hd, nq, nk, c->scale, K, ldk, dS, nk, beta_q, dQ, lddq,
                 nthreads);
    tsr_cpu_gemm(TSR_FLOAT32, TSR_NOTRANS, TSR_TRANS, hd, nk, nq, c->scale, Q, ldq, dS, nk, beta_kv, dK, lddk,
                 nthreads);
}

void tsr_cpu_attention_bwd_step(const tsr_attn_pair_t *p, const float *Q, int ldq, const float *K, int ldk,
                                const float *V, int ldv, const float *dO, int lddo, const float *L, int ldl,
                                float *dQ, int lddq, float *dK, int lddk, float *dV, int lddv,
                                tsr_write_t dq_mode, tsr_write_t dkv_mode, float *scratch, int nthreads)
{
    /* Last chunk first: it sees the most keys, so when dK, dV are overwritten it writes
     * every dK, dV column an earlier chunk adds to; the keys no query sees
     * get zero gradients. */
    int last = p->nq > 0 ? (p->nq - 1) / TSR_ATTN_QUERY_CHUNK * TSR_ATTN_QUERY_CHUNK : -1;
    if (dkv_mode == TSR_OVERWRITE) {
        int seen = p->nq > 0 ? tsr_attn_visible_keys(p, p->nq - 1) : 0;
        zero_columns(dK, lddk, p->hd, seen, p->nk);
        zero_columns(dV, lddv, p->hd, seen, p->nk);
    }
    for (int c0 = last; c0 >= 0; c0 -= TSR_ATTN_QUERY_CHUNK) {
        tsr_attn_pair_t c = chunk_pair(p, c0, imin(TSR_ATTN_QUERY_CHUNK, p->nq - c0));
        float *dq = dQ + (size_t)c0 * lddq;
        if (c.nk == 0) {
            if (dq_mode == TSR_OVERWRITE)
                zero_columns(dq, lddq, c.hd, 0, c.nq);
            continue;
        }
        double beta_kv = dkv_mode == TSR_OVERWRITE && c0 == last ? 0.0 : 1.0;
        bwd_chunk(&c, Q + (size_t)c0 * ldq, ldq, K, ldk, V, ldv, dO + (size_t)c0 * lddo, lddo, L + (size_t)c0 * ldl,
                  ldl, dq, lddq, dK, lddk, dV, lddv, dq_mode == TSR_OVERWRITE ? 0.0 : 1.0, beta_kv, scratch, nthreads);
    }
}
