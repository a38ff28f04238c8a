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

size_t tsr_cpu_attention_fwd_scratch(int nq, int nk) { return (size_t)nq * nk; }
size_t tsr_cpu_attention_bwd_scratch(int nq, int nk) { return 2 * (size_t)nq * nk; }

/* Turns score column s (nk keys, nv visible) into the weights of this key
 * block relative to the new running logsumexp, which it returns through *lse;
 * returns the factor that rescales the old output column. */
static inline float fwd_column(float *s, int nk, int nv, float *lse, int first)
{
    float old = first ? -INFINITY : *lse;
    zero_floats(s + nv, nk - nv);
    if (nv == 0) {
        if (first)
            *lse = -INFINITY;
        return 1.0f;
    }
    float mx = max_of(s, nv);
    float sum = exp_shift_sum(s, nv, mx);
    float now = log_add_exp(old, mx + logf(sum));
    scale_floats(s, nv, expf(mx - now));
    *lse = now;
    return first ? 0.0f : expf(old - now);
}


/* The forward's softmax work on the nk x nq score block S: weights in S,
 * running logsumexp in L row 0, old output columns rescaled. */
TSR_SIMD_CLONES
static void fwd_block_weights(const tsr_attn_pair_t *p, float *S, float *O, int ldo, float *L, int ldl, int first)
{
    for (int ii = 0; ii < p->nq; ii++) {
        float keep = fwd_column(S + (size_t)ii * p->nk, p->nk, tsr_attn_visible_keys(p, ii), L + (size_t)ii * ldl,
                                first);
        if (!first && keep != 1.0f)
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

void tsr_cpu_attention_fwd_step(const tsr_attn_pair_t *p, const float *Q, int ldq, const float *K, int ldk,
                                const float *V, int ldv, float *O, int ldo, float *L, int ldl, int first,
                                float *scratch, int nthreads)
{
    int nq = p->nq, nk = p->nk, hd = p->hd;
    float *S = scratch; /* nk x nq scores, then weights; one query per column */
    tsr_cpu_gemm(TSR_FLOAT32, TSR_TRANS, TSR_NOTRANS, nk, nq, hd, p->scale, K, ldk, Q, ldq, 0.0, S, nk, nthreads);
    fwd_block_weights(p, S, O, ldo, L, ldl, first);
    tsr_cpu_gemm(TSR_FLOAT32, TSR_NOTRANS, TSR_NOTRANS, hd, nq, nk, 1.0, V, ldv, S, nk, first ? 0.0 : 1.0, O, ldo,
                 nthreads);
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

void tsr_cpu_attention_bwd_step(const tsr_attn_pair_t *p, const float *Q, int ldq, const float *K, int ldk,
                                const float *V, int ldv, const float *dO, int lddo, const float *L, int ldl,
                                float *dQ, int lddq, float *dK, int lddk, float *dV, int lddv,
                                int first_q, int first_kv, float *scratch, int nthreads)
{
    int nq = p->nq, nk = p->nk, hd = p->hd;
    float *P = scratch, *dS = scratch + (size_t)nq * nk; /* nk x nq each */
    double beta_q = first_q ? 0.0 : 1.0, beta_kv = first_kv ? 0.0 : 1.0;
    tsr_cpu_gemm(TSR_FLOAT32, TSR_TRANS, TSR_NOTRANS, nk, nq, hd, p->scale, K, ldk, Q, ldq, 0.0, P, nk, nthreads);
    bwd_block_probs(p, P, L, ldl);
    tsr_cpu_gemm(TSR_FLOAT32, TSR_NOTRANS, TSR_TRANS, hd, nk, nq, 1.0, dO, lddo, P, nk, beta_kv, dV, lddv, nthreads);
    tsr_cpu_gemm(TSR_FLOAT32, TSR_TRANS, TSR_NOTRANS, nk, nq, hd, 1.0, V, ldv, dO, lddo, 0.0, dS, nk, nthreads);
    bwd_block_dscores(p, P, dS, L, ldl);
    tsr_cpu_gemm(TSR_FLOAT32, TSR_NOTRANS, TSR_NOTRANS, hd, nq, nk, p->scale, K, ldk, dS, nk, beta_q, dQ, lddq,
                 nthreads);
    tsr_cpu_gemm(TSR_FLOAT32, TSR_NOTRANS, TSR_TRANS, hd, nk, nq, p->scale, Q, ldq, dS, nk, beta_kv, dK, lddk,
                 nthreads);
}
