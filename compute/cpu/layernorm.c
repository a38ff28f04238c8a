/* LayerNorm and residual tile kernels (plain C, float32, llm.c numerics:
 * float accumulation in feature order, two-pass mean / variance). */
#include <math.h>
#include <stddef.h>
#include "tsr_compute_layernorm.h"

/* Token t's feature vector in a column-major tile. */
static const float *token(const float *p, int ld, int t) { return p + (size_t)t * ld; }
static float *token_w(float *p, int ld, int t) { return p + (size_t)t * ld; }

static float vec_sum(int m, const float *x)
{
    float s = 0.0f;
    for (int r = 0; r < m; r++)
        s += x[r];
    return s;
}

static float vec_sqdev(int m, const float *x, float mu)
{
    float v = 0.0f;
    for (int r = 0; r < m; r++) {
        float d = x[r] - mu;
        v += d * d;
    }
    return v;
}

static void vec_normalize(int m, const float *x, const float *w, const float *b, float mu, float s, float *out)
{
    for (int r = 0; r < m; r++) {
        float n = s * (x[r] - mu);
        out[r] = n * w[r] + b[r];
    }
}

void tsr_cpu_layernorm_fwd(int m, int n, const float *x, int ldx, const float *w, const float *b,
                           float *out, int ldo, float *mean, int incm, float *rstd, int incr, float eps)
{
    for (int t = 0; t < n; t++) {
        const float *xt = token(x, ldx, t);
        float mu = vec_sum(m, xt) / m;
        float v = vec_sqdev(m, xt, mu) / m;
        float s = 1.0f / sqrtf(v + eps);
        vec_normalize(m, xt, w, b, mu, s, token_w(out, ldo, t));
        mean[(size_t)t * incm] = mu;
        rstd[(size_t)t * incr] = s;
    }
}

void tsr_cpu_layernorm_sum(int m, int n, const float *x, int ldx, float *s, int incs, tsr_write_t mode)
{
    for (int t = 0; t < n; t++) {
        float v = vec_sum(m, token(x, ldx, t));
        float *st = &s[(size_t)t * incs];
        *st = mode == TSR_ACCUMULATE ? *st + v : v;
    }
}

void tsr_cpu_layernorm_sqdev(int m, int n, const float *x, int ldx, const float *s, int incs, int C,
                             float *q, int incq, tsr_write_t mode)
{
    for (int t = 0; t < n; t++) {
        float mu = s[(size_t)t * incs] / C;
        float v = vec_sqdev(m, token(x, ldx, t), mu);
        float *qt = &q[(size_t)t * incq];
        *qt = mode == TSR_ACCUMULATE ? *qt + v : v;
    }
}

void tsr_cpu_layernorm_stats(int n, int C, float eps, float *mean, int incm, float *rstd, int incr)
{
    for (int t = 0; t < n; t++) {
        float *mt = &mean[(size_t)t * incm], *rt = &rstd[(size_t)t * incr];
        *mt = *mt / C;
        *rt = 1.0f / sqrtf(*rt / C + eps);
    }
}

void tsr_cpu_layernorm_normalize(int m, int n, const float *x, int ldx, const float *w, const float *b,
                                 const float *mean, int incm, const float *rstd, int incr, float *out, int ldo)
{
    for (int t = 0; t < n; t++)
        vec_normalize(m, token(x, ldx, t), w, b, mean[(size_t)t * incm], rstd[(size_t)t * incr],
                      token_w(out, ldo, t));
}

/* sum_r dnorm and sum_r dnorm * norm of one token's features. */
static void token_bwd_sums(int m, const float *dout, const float *x, const float *w, float mu, float s,
                           float *sum_dnorm, float *sum_dnorm_norm)
{
    float a = 0.0f, c = 0.0f;
    for (int r = 0; r < m; r++) {
        float norm = (x[r] - mu) * s;
        float dnorm = w[r] * dout[r];
        a += dnorm;
        c += dnorm * norm;
    }
    *sum_dnorm = a;
    *sum_dnorm_norm = c;
}

/* dinp of one token given the means over C of dnorm and dnorm * norm. */
static void token_bwd_dinp(int m, const float *dout, const float *x, const float *w, float mu, float s,
                           float dnorm_mean, float dnorm_norm_mean, float *dinp, tsr_write_t mode)
{
    for (int r = 0; r < m; r++) {
        float norm = (x[r] - mu) * s;
        float dnorm = w[r] * dout[r];
        float dval = dnorm - dnorm_mean - norm * dnorm_norm_mean;
        dval *= s;
        dinp[r] = mode == TSR_ACCUMULATE ? dinp[r] + dval : dval;
    }
}

void tsr_cpu_layernorm_bwd(int m, int n, const float *dout, int lddo, const float *x, int ldx, const float *w,
                           const float *mean, int incm, const float *rstd, int incr,
                           float *dinp, int lddi, tsr_write_t mode)
{
    for (int t = 0; t < n; t++) {
        float mu = mean[(size_t)t * incm], s = rstd[(size_t)t * incr], a, c;
        const float *dt = token(dout, lddo, t), *xt = token(x, ldx, t);
        token_bwd_sums(m, dt, xt, w, mu, s, &a, &c);
        token_bwd_dinp(m, dt, xt, w, mu, s, a / m, c / m, token_w(dinp, lddi, t), mode);
    }
}

void tsr_cpu_layernorm_bwd_sums(int m, int n, const float *dout, int lddo, const float *x, int ldx, const float *w,
                                const float *mean, int incm, const float *rstd, int incr,
                                float *sums, int lds, tsr_write_t mode)
{
    for (int t = 0; t < n; t++) {
        float a, c, *st = &sums[(size_t)t * lds];
        token_bwd_sums(m, token(dout, lddo, t), token(x, ldx, t), w, mean[(size_t)t * incm],
                       rstd[(size_t)t * incr], &a, &c);
        st[0] = mode == TSR_ACCUMULATE ? st[0] + a : a;
        st[1] = mode == TSR_ACCUMULATE ? st[1] + c : c;
    }
}

void tsr_cpu_layernorm_bwd_dinp(int m, int n, const float *dout, int lddo, const float *x, int ldx, const float *w,
                                const float *mean, int incm, const float *rstd, int incr,
                                const float *sums, int lds, int C, float *dinp, int lddi, tsr_write_t mode)
{
    for (int t = 0; t < n; t++) {
        const float *st = &sums[(size_t)t * lds];
        token_bwd_dinp(m, token(dout, lddo, t), token(x, ldx, t), w, mean[(size_t)t * incm],
                       rstd[(size_t)t * incr], st[0] / C, st[1] / C, token_w(dinp, lddi, t), mode);
    }
}

void tsr_cpu_layernorm_bwd_params(int m, int n, const float *dout, int lddo, const float *x, int ldx,
                                  const float *mean, int incm, const float *rstd, int incr,
                                  float *dw, tsr_write_t dw_mode, float *db, tsr_write_t db_mode)
{
    for (int r = 0; r < m; r++) {
        if (dw_mode == TSR_OVERWRITE)
            dw[r] = 0.0f;
        if (db_mode == TSR_OVERWRITE)
            db[r] = 0.0f;
    }
    for (int t = 0; t < n; t++) {
        const float *dt = token(dout, lddo, t), *xt = token(x, ldx, t);
        float mu = mean[(size_t)t * incm], s = rstd[(size_t)t * incr];
        for (int r = 0; r < m; r++) {
            float norm = (xt[r] - mu) * s;
            db[r] += dt[r];
            dw[r] += norm * dt[r];
        }
    }
}

void tsr_cpu_residual_fwd(tsr_dtype_t t, int m, int n, const void *a, int lda, const void *b, int ldb,
                          void *out, int ldo)
{
    for (int c = 0; c < n; c++) {
        if (t == TSR_FLOAT64) {
            const double *ac = (const double *)a + (size_t)c * lda, *bc = (const double *)b + (size_t)c * ldb;
            double *oc = (double *)out + (size_t)c * ldo;
            for (int r = 0; r < m; r++)
                oc[r] = ac[r] + bc[r];
        } else {
            const float *ac = (const float *)a + (size_t)c * lda, *bc = (const float *)b + (size_t)c * ldb;
            float *oc = (float *)out + (size_t)c * ldo;
            for (int r = 0; r < m; r++)
                oc[r] = ac[r] + bc[r];
        }
    }
}
