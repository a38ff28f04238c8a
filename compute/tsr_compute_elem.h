/* Tessera compute layer, internal: the per-element formulas and index math
 * that the CPU kernels (compute/cpu) and their CUDA twins (compute/cuda)
 * share, so that both sides evaluate the same expression. Plain C that also
 * compiles as CUDA C++: under nvcc every function is __host__ __device__.
 * Only the scalar formulas live here; the loops around them (vectorised on
 * the CPU, one thread per element on the GPU) stay in each side's kernel.
 * The GPU may still differ from the CPU in the last bits: nvcc contracts
 * a * b + c into fused multiply-adds and its expf / logf / sqrtf are not
 * glibc's. */
#ifndef TSR_COMPUTE_ELEM_H
#define TSR_COMPUTE_ELEM_H
#include <math.h>
#include "tsr_compute_adamw.h" /* tsr_adamw_step_t */
#include "tsr_compute_linear.h" /* tsr_heads_geom_t */

#ifdef __CUDACC__
#define TSR_HOST_DEVICE __host__ __device__
#else
#define TSR_HOST_DEVICE
#endif

/* ---- GeLU, tanh approximation ----------------------------------------------
 * llm.c's gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
 * written with 0.5 (1 + tanh(u)) = sigmoid(2u) = 1 / (1 + exp(-2u)): the same
 * function, without the cancellation of 1 + tanh(u) for negative u (up to 6%
 * relative error there in float) and 3-5x faster than tanhf. */

/* sqrt(2 / pi), llm.c's GELU_SCALING_FACTOR */
#define TSR_GELU_SCALE 0.7978845608028654f
#define TSR_GELU_CUBIC 0.044715f

static inline TSR_HOST_DEVICE float tsr_elem_gelu_arg(float x)
{
    return TSR_GELU_SCALE * (x + TSR_GELU_CUBIC * x * x * x);
}

/* gelu(x) and its gradient from e = exp(-2u) (each side computes e with
 * its own exp: expf on the GPU, a vectorisable one on the CPU; e = inf for
 * very negative x gives 0 for both). */
static inline TSR_HOST_DEVICE float tsr_elem_gelu_from_exp(float x, float e)
{
    return x / (1.0f + e);
}

/* d/dx [x s(2u)] = s + 2 x s (1 - s) u', and llm.c's 0.5 sech^2(u) is the
 * same 2 s (1 - s); 1 - s = e s is exact where s is close to 1. */
static inline TSR_HOST_DEVICE float tsr_elem_gelu_grad_from_exp(float x, float e)
{
    float s = 1.0f / (1.0f + e);
    float one_minus_s = isinf(e) ? 1.0f : e * s; /* x -> -inf: s = 0, the gradient 0 */
    return s + 2.0f * x * s * one_minus_s * TSR_GELU_SCALE * (1.0f + 3.0f * TSR_GELU_CUBIC * x * x);
}

static inline TSR_HOST_DEVICE float tsr_elem_gelu(float x)
{
    return tsr_elem_gelu_from_exp(x, expf(-2.0f * tsr_elem_gelu_arg(x)));
}

static inline TSR_HOST_DEVICE float tsr_elem_gelu_grad(float x)
{
    return tsr_elem_gelu_grad_from_exp(x, expf(-2.0f * tsr_elem_gelu_arg(x)));
}

/* ---- softmax cross-entropy ------------------------------------------------ */

/* (m, s) = merge((m, s), (m2, s2)), the online-softmax rescaling of two
 * (max, sum exp(x - max)) statistics; a sum of 0 is the empty statistic. */
static inline TSR_HOST_DEVICE void tsr_elem_softmax_merge(float *m, float *s, float m2, float s2)
{
    if (s2 == 0.0f)
        return;
    if (*s == 0.0f) {
        *m = m2;
        *s = s2;
        return;
    }
    float mx = fmaxf(*m, m2);
    *s = *s * expf(*m - mx) + s2 * expf(m2 - mx);
    *m = mx;
}

/* Loss of one token: -log(exp(x_t - max) / sum) from its statistics
 * (stats[0] = max, stats[1] = sum) and its target logit. */
static inline TSR_HOST_DEVICE float tsr_elem_crossentropy_loss(const float *stats, float target_logit)
{
    return logf(stats[1]) + stats[0] - target_logit;
}

/* ---- AdamW (llm.c) ----------------------------------------------------------
 * One element: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 * p -= lr * ((m / corr1) / (sqrt(v / corr2) + eps) + wd * p). */
static inline TSR_HOST_DEVICE void tsr_elem_adamw(const tsr_adamw_step_t *s, float grad, float *p, float *m,
                                                  float *v)
{
    float mr = s->beta1 * *m + (1.0f - s->beta1) * grad;
    float vr = s->beta2 * *v + (1.0f - s->beta2) * grad * grad;
    float mhat = mr / s->corr1;
    float vhat = vr / s->corr2;
    *m = mr;
    *v = vr;
    *p -= s->lr * (mhat / (sqrtf(vhat) + s->eps) + s->weight_decay * *p);
}

/* ---- head reshape geometry (tsr_heads_copy) -------------------------------
 * The part of head matrix z of a head tile (yrows x ycols matrices) that lies
 * in the X tile (xrows x xcols): rows [*r0, *r1), tokens [*t0, *t1), and
 * where its row 0 / token 0 sits in X's coordinates (*xr, *xc). Returns 0
 * when they share nothing. */
static inline TSR_HOST_DEVICE int tsr_elem_head_overlap(const tsr_heads_geom_t *g, int z, int xrows, int xcols,
                                                        int yrows, int ycols, int *r0, int *r1, int *t0, int *t1,
                                                        int *xr, int *xc)
{
    int gz = g->y_z0 + z, b = gz / g->NH, h = gz % g->NH;
    int fbase = g->part * g->C + h * g->hd + g->y_row0; /* feature of row 0 */
    int cbase = b * g->T + g->y_col0;                   /* token of column 0 */
    int lo, hi;
    lo = g->x_row0 - fbase;
    *r0 = lo > 0 ? lo : 0;
    hi = g->x_row0 + xrows - fbase;
    *r1 = hi < yrows ? hi : yrows;
    lo = g->x_col0 - cbase;
    *t0 = lo > 0 ? lo : 0;
    hi = g->x_col0 + xcols - cbase;
    *t1 = hi < ycols ? hi : ycols;
    *xr = fbase - g->x_row0;
    *xc = cbase - g->x_col0;
    return *r0 < *r1 && *t0 < *t1;
}

#endif
