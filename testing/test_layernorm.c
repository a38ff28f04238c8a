/* LayerNorm forward/backward, RMSNorm forward/backward and residual add
 * against plain-loop references written here after llm.c (float32) or in
 * double, double-precision finite-difference checks of the backwards, and
 * bad arguments. C = 67 features, BT = 45 tokens: no tile size below
 * divides them. With one rank the descriptors live on rank 0; under mpirun
 * they are block-cyclic on a P x (size / P) grid, P given as the first
 * argument (parameters also on a single rank). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "tessera.h"
#include "tsr_check.h"
#include "tsr_expect.h"
#include "tsr_testutil.h"

enum { C = 67, BT = 45 };
static const double EPS32 = FLT_EPSILON; /* float32 machine epsilon (twice the unit roundoff) */

/* ---- data (the same on every rank: a formula of the element index) ---- */

typedef struct {
    float x[C * BT], w[C], b[C], dout[C * BT];
    float g_act[C * BT], g_par[2 * C], g_stat[2 * BT]; /* "garbage" initial outputs */
    double fd_dx[C * BT], fd_dw[C], fd_db[C];         /* finite-difference gradients */
} ln_data_t;
static ln_data_t D;

static float rnd(int seed, int k) { return (float)tsr_random_value((uint64_t)seed, 0, k, 0); }

static void make_data(void)
{
    for (int k = 0; k < C * BT; k++) {
        D.x[k] = 2.0f * rnd(1, k) + 0.3f; /* a non-zero mean per token */
        D.dout[k] = rnd(2, k);
        D.g_act[k] = rnd(3, k);
    }
    for (int i = 0; i < C; i++) {
        D.w[i] = 1.0f + rnd(4, i);
        D.b[i] = 0.5f * rnd(5, i);
    }
    for (int k = 0; k < 2 * C; k++)
        D.g_par[k] = rnd(6, k);
    for (int k = 0; k < 2 * BT; k++)
        D.g_stat[k] = rnd(7, k);
}

/* ---- references (llm.c layout: token t's C features at t * C) ---- */

static void ref_forward(const float *x, const float *w, const float *b, float *out, float *mean, float *rstd)
{
    for (int t = 0; t < BT; t++) {
        const float *xt = x + t * C;
        float m = 0.0f;
        for (int i = 0; i < C; i++)
            m += xt[i];
        m = m / C;
        float v = 0.0f;
        for (int i = 0; i < C; i++) {
            float xs = xt[i] - m;
            v += xs * xs;
        }
        v = v / C;
        float s = 1.0f / sqrtf(v + 1e-5f);
        for (int i = 0; i < C; i++) {
            float n = s * (xt[i] - m);
            out[t * C + i] = n * w[i] + b[i];
        }
        mean[t] = m;
        rstd[t] = s;
    }
}

/* llm.c layernorm_backward: accumulates (+=) into dinp, dweight, dbias. */
static void ref_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *x,
                         const float *w, const float *mean, const float *rstd)
{
    for (int t = 0; t < BT; t++) {
        const float *dt = dout + t * C, *xt = x + t * C;
        float m = mean[t], s = rstd[t], dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
        for (int i = 0; i < C; i++) {
            float norm = (xt[i] - m) * s;
            float dnorm = w[i] * dt[i];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean = dnorm_mean / C;
        dnorm_norm_mean = dnorm_norm_mean / C;
        for (int i = 0; i < C; i++) {
            float norm = (xt[i] - m) * s;
            float dnorm = w[i] * dt[i];
            dbias[i] += dt[i];
            dweight[i] += norm * dt[i];
            float dval = dnorm;
            dval -= dnorm_mean;
            dval -= norm * dnorm_norm_mean;
            dval *= s;
            dinp[t * C + i] += dval;
        }
    }
}

/* L_t = sum_i out[t, i] * dout[t, i] in double, token t only. */
static double token_loss(const double *xt, const double *w, const double *b, const float *dt)
{
    double m = 0, v = 0, loss = 0;
    for (int i = 0; i < C; i++)
        m += xt[i];
    m /= C;
    for (int i = 0; i < C; i++)
        v += (xt[i] - m) * (xt[i] - m);
    double s = 1.0 / sqrt(v / C + 1e-5);
    for (int i = 0; i < C; i++)
        loss += ((xt[i] - m) * s * w[i] + b[i]) * dt[i];
    return loss;
}

static double total_loss(const double *x, const double *w, const double *b)
{
    double loss = 0;
    for (int t = 0; t < BT; t++)
        loss += token_loss(x + t * C, w, b, D.dout + t * C);
    return loss;
}

/* Central differences of L = sum(out * dout) on a double-precision forward.
 * h = 1e-4: truncation ~h^2 |f'''| ~ 1e-7, rounding ~1e-16 |L| / h ~ 1e-11. */
static void finite_differences(void)
{
    static double x[C * BT];
    double w[C], b[C], h = 1e-4;
    for (int k = 0; k < C * BT; k++)
        x[k] = D.x[k];
    for (int i = 0; i < C; i++) {
        w[i] = D.w[i];
        b[i] = D.b[i];
    }
    for (int t = 0; t < BT; t++)
        for (int i = 0; i < C; i++) { /* x[t, i] only changes token t's loss */
            double *xt = x + t * C, keep = xt[i];
            xt[i] = keep + h;
            double up = token_loss(xt, w, b, D.dout + t * C);
            xt[i] = keep - h;
            double down = token_loss(xt, w, b, D.dout + t * C);
            xt[i] = keep;
            D.fd_dx[t * C + i] = (up - down) / (2 * h);
        }
    for (int i = 0; i < C; i++) {
        double *p[2] = { w, b }, *out[2] = { D.fd_dw, D.fd_db };
        for (int q = 0; q < 2; q++) {
            double keep = p[q][i];
            p[q][i] = keep + h;
            double up = total_loss(x, w, b);
            p[q][i] = keep - h;
            double down = total_loss(x, w, b);
            p[q][i] = keep;
            out[q][i] = (up - down) / (2 * h);
        }
    }
}

/* ---- comparison ---- */

static double max_abs(const float *v, int n)
{
    double m = 0;
    for (int k = 0; k < n; k++)
        m = fmax(m, fabs(v[k]));
    return m;
}

/* max |got - want| <= tol; prints what failed. */
static void expect_close(const char *what, const char *config, const float *got, const float *want, int n,
                         double tol)
{
    double err = tsr_test_max_abs_err(got, want, (size_t)n);
    if (!(err <= tol))
        fprintf(stderr, "  %s [%s]: max error %.3g > tolerance %.3g\n", what, config, err, tol);
    CHECK(err <= tol);
}

static void expect_close_fd(const char *what, const char *config, const float *got, const double *fd, int n)
{
    double err = 0, scale = 0;
    for (int k = 0; k < n; k++) {
        err = fmax(err, isnan(got[k]) ? INFINITY : fabs(got[k] - fd[k]));
        scale = fmax(scale, fabs(fd[k]));
    }
    /* float32 backward: sums of up to max(C, BT) terms, each a few roundings,
     * so |error| <~ 4 n eps max|grad| (worst case, all roundings aligned);
     * the finite differences add ~1e-7, negligible next to 4 * 67 * 1.2e-7 ~ 3e-5. */
    double tol = 4.0 * (C > BT ? C : BT) * EPS32 * fmax(scale, 1.0) + 1e-6;
    if (!(err <= tol))
        fprintf(stderr, "  %s vs finite differences [%s]: max error %.3g > tolerance %.3g\n", what, config, err, tol);
    CHECK(err <= tol);
}

/* ---- one configuration: tiling, grid, accumulation ---- */

typedef struct {
    int mb, nb;
    tsr_dist_t act, par; /* activations / statistics, parameters */
    tsr_reduction_t accum;
    tsr_write_t dinp_mode, dparam_mode;
    int use_work;        /* pass a workspace (or let the call make one) */
    char name[160];
} ln_config_t;

typedef struct {
    tsr_desc_t *inp, *w, *b, *out, *mean, *rstd, *dout, *dinp, *dw, *db, *work;
} ln_descs_t;

static tsr_desc_t *make(int m, int n, int mb, int nb, const tsr_dist_t *dist)
{
    tsr_desc_t *d = NULL;
    CHECK_RC(tsr_desc_create_2d(&d, TSR_FLOAT32, m, n, mb, nb, dist), TSR_SUCCESS);
    return d;
}

static void make_descs(ln_descs_t *s, const ln_config_t *c)
{
    s->inp = make(C, BT, c->mb, c->nb, &c->act);
    s->out = make(C, BT, c->mb, c->nb, &c->act);
    s->dout = make(C, BT, c->mb, c->nb, &c->act);
    s->dinp = make(C, BT, c->mb, c->nb, &c->act);
    s->mean = make(1, BT, 1, c->nb, &c->act);
    s->rstd = make(1, BT, 1, c->nb, &c->act);
    s->w = make(C, 1, c->mb, 1, &c->par);
    s->b = make(C, 1, c->mb, 1, &c->par);
    s->dw = make(C, 1, c->mb, 1, &c->par);
    s->db = make(C, 1, c->mb, 1, &c->par);
    s->work = NULL;
    if (c->use_work)
        CHECK_RC(tsr_layernorm_workspace_create(&s->work, s->mean), TSR_SUCCESS);
}

static void destroy_descs(ln_descs_t *s)
{
    TSR_TEST_DESTROY(s->inp, s->w, s->b, s->out, s->mean, s->rstd, s->dout, s->dinp, s->dw, s->db, s->work);
}

static void scatter(tsr_desc_t *d, const float *v) { CHECK_RC(tsr_test_scatter_f32(d, v), TSR_SUCCESS); }

/* Forward: out, mean, rstd (pre-filled with garbage) against ref_forward.
 * Tolerances (worst-case rounding; the observed errors are far smaller):
 * a float sum of C terms in any order is within C eps sum|x| of the exact
 * sum, so |dmean| <= 2 C eps max|x| between two orders; var and rstd get a
 * relative 2 C eps (+ a few eps); out = w (x - mean) rstd + b then moves by
 * |w| (|dmean| rstd + |norm| drstd/rstd) + a few eps |out|. */
static void check_forward(const ln_config_t *c, ln_descs_t *s, float *mean_out, float *rstd_out)
{
    static float out_ref[C * BT];
    float mean_ref[BT], rstd_ref[BT];
    scatter(s->inp, D.x);
    scatter(s->w, D.w);
    scatter(s->b, D.b);
    scatter(s->out, D.g_act);
    scatter(s->mean, D.g_stat);
    scatter(s->rstd, D.g_stat + BT);
    CHECK_RC(tsr_layernorm_forward(s->inp, s->w, s->b, s->out, s->mean, s->rstd, c->accum), TSR_SUCCESS);
    float *out = tsr_test_gather_f32(s->out), *mean = tsr_test_gather_f32(s->mean);
    float *rstd = tsr_test_gather_f32(s->rstd);
    if (tsr_rank() == 0) {
        ref_forward(D.x, D.w, D.b, out_ref, mean_ref, rstd_ref);
        double tol_mean = 2.0 * C * EPS32 * max_abs(D.x, C * BT);
        double tol_rstd_rel = 2.0 * C * EPS32 + 4 * EPS32;
        double rmax = max_abs(rstd_ref, BT), nmax = 0;
        for (int k = 0; k < C * BT; k++)
            nmax = fmax(nmax, fabs((D.x[k] - mean_ref[k / C]) * rstd_ref[k / C]));
        double tol_out = max_abs(D.w, C) * (tol_mean * rmax + nmax * tol_rstd_rel) + 4 * EPS32 * max_abs(out_ref, C * BT);
        expect_close("mean", c->name, mean, mean_ref, BT, tol_mean);
        expect_close("rstd", c->name, rstd, rstd_ref, BT, tol_rstd_rel * rmax);
        expect_close("out", c->name, out, out_ref, C * BT, tol_out);
        memcpy(mean_out, mean, sizeof(float) * BT);
        memcpy(rstd_out, rstd, sizeof(float) * BT);
    }
    free(out);
    free(mean);
    free(rstd);
}

/* Backward against ref_backward (same mean/rstd: the forward's), outputs
 * pre-filled with garbage (kept when accumulating, ignored otherwise).
 * Tolerances (worst case): each gradient rests on float sums of n terms in a
 * different order than the reference (n = C for the per-token sums behind
 * dinp, n = BT for dweight and dbias): |error| <= 2 n eps max|term| per sum,
 * doubled for the rounding of the terms themselves, and propagated through
 * dinp = rstd (dnorm - sum/C - norm sum'/C); plus a few eps of the result
 * and of the accumulated initial values. */
static void check_backward(const ln_config_t *c, ln_descs_t *s, const float *mean, const float *rstd)
{
    static float dinp_ref[C * BT];
    float dw_ref[C], db_ref[C];
    scatter(s->dout, D.dout);
    scatter(s->dinp, D.g_act);
    scatter(s->dw, D.g_par);
    scatter(s->db, D.g_par + C);
    CHECK_RC(tsr_layernorm_backward(s->dout, s->inp, s->w, s->mean, s->rstd, s->dinp, s->dw, s->db, c->dinp_mode,
                                    c->dparam_mode, c->accum, s->work),
             TSR_SUCCESS);
    float *dinp = tsr_test_gather_f32(s->dinp), *dw = tsr_test_gather_f32(s->dw), *db = tsr_test_gather_f32(s->db);
    if (tsr_rank() == 0) {
        for (int k = 0; k < C * BT; k++)
            dinp_ref[k] = c->dinp_mode == TSR_ACCUMULATE ? D.g_act[k] : 0.0f;
        for (int i = 0; i < C; i++) {
            dw_ref[i] = c->dparam_mode == TSR_ACCUMULATE ? D.g_par[i] : 0.0f;
            db_ref[i] = c->dparam_mode == TSR_ACCUMULATE ? D.g_par[C + i] : 0.0f;
        }
        ref_backward(dinp_ref, dw_ref, db_ref, D.dout, D.x, D.w, mean, rstd);
        double dmax = 0, nmax = 0, dnmax = 0, ndmax = 0, rmax = max_abs(rstd, BT);
        for (int k = 0; k < C * BT; k++) {
            double norm = (D.x[k] - mean[k / C]) * rstd[k / C], dnorm = D.w[k % C] * D.dout[k];
            dmax = fmax(dmax, fabs(dnorm));
            nmax = fmax(nmax, fabs(norm));
            dnmax = fmax(dnmax, fabs(dnorm * norm));
            ndmax = fmax(ndmax, fabs(norm * D.dout[k]));
        }
        double gmax = max_abs(D.g_act, C * BT) + max_abs(D.g_par, 2 * C);
        double tol_dinp = rmax * 4.0 * C * EPS32 * (dmax + nmax * dnmax) + 4 * EPS32 * (max_abs(dinp_ref, C * BT) + gmax);
        double tol_dw = 4.0 * BT * EPS32 * ndmax + 4 * EPS32 * (max_abs(dw_ref, C) + gmax);
        double tol_db = 4.0 * BT * EPS32 * max_abs(D.dout, C * BT) + 4 * EPS32 * (max_abs(db_ref, C) + gmax);
        expect_close("dinp", c->name, dinp, dinp_ref, C * BT, tol_dinp);
        expect_close("dweight", c->name, dw, dw_ref, C, tol_dw);
        expect_close("dbias", c->name, db, db_ref, C, tol_db);
        if (c->dinp_mode == TSR_OVERWRITE && c->dparam_mode == TSR_OVERWRITE) {
            expect_close_fd("dinp", c->name, dinp, D.fd_dx, C * BT);
            expect_close_fd("dweight", c->name, dw, D.fd_dw, C);
            expect_close_fd("dbias", c->name, db, D.fd_db, C);
        }
    }
    free(dinp);
    free(dw);
    free(db);
}

static void run_config(ln_config_t *c)
{
    float mean[BT], rstd[BT];
    ln_descs_t s;
    make_descs(&s, c);
    check_forward(c, &s, mean, rstd);
    check_backward(c, &s, mean, rstd);
    destroy_descs(&s);
}

static const char *dist_name(const tsr_dist_t *d, char *buf, size_t n)
{
    if (d->kind == TSR_DIST_SINGLE)
        snprintf(buf, n, "rank %d", d->root);
    else
        snprintf(buf, n, "%dx%d", d->P, d->Q);
    return buf;
}

/* Every tiling x accumulation x accumulate flags. One rank: 1 x 1 tiles,
 * one tile covering everything, edge tiles both ways, C in one tile (fused
 * kernels) over several token tiles, C split over one token tile. Several
 * ranks (where StarPU-MPI's cost per task makes 3015 tiles too slow): 1-row
 * and 1-column tiles separately; parameters either on the activations' grid
 * or all on the last rank. */
static void check_layernorm(tsr_dist_t act)
{
    static const int one_rank[][2] = { { 1, 1 }, { 100, 64 }, { 16, 8 }, { 67, 7 }, { 20, 45 } };
    static const int ranks[][2] = { { 1, 16 }, { 16, 1 }, { 100, 64 }, { 16, 8 }, { 67, 7 } };
    /* (dinp_mode, dparam_mode): overwrite both, then the accumulating choices */
    static const tsr_write_t modes[][2] = { { TSR_OVERWRITE, TSR_OVERWRITE }, { TSR_ACCUMULATE, TSR_ACCUMULATE },
                                            { TSR_ACCUMULATE, TSR_OVERWRITE }, { TSR_OVERWRITE, TSR_ACCUMULATE } };
    const int (*tilings)[2] = tsr_size() > 1 ? ranks : one_rank;
    tsr_dist_t last = tsr_dist_single(tsr_size() - 1);
    int several = tsr_size() > 1, run = 0;
    for (int t = 0; t < 5; t++)
        for (int a = 0; a < 2; a++)
            for (int f = 0; f < (several ? 1 : 2); f++, run++) {
                /* overwrite (compared with finite differences too) or one of the accumulate choices;
                 * under MPI one of the two per tiling and accumulation mode */
                int overwrite = several ? (t + a) % 2 == 0 : f == 0;
                tsr_dist_t par = several && t % 2 ? last : act;
                const tsr_write_t *m = modes[overwrite ? 0 : 1 + run % 3];
                ln_config_t c = { tilings[t][0], tilings[t][1], act, par, a ? TSR_REDUCTION_REDUX : TSR_REDUCTION_ORDERED,
                                  m[0], m[1], (a + f + t / 2) % 2, "" };
                char g1[24], g2[24];
                snprintf(c.name, sizeof c.name, "mb %d nb %d grid %s params %s %s accumulate dinp %d dparams %d%s",
                         c.mb, c.nb, dist_name(&act, g1, sizeof g1), dist_name(&par, g2, sizeof g2),
                         a ? "redux" : "ordered", c.dinp_mode, c.dparam_mode, c.use_work ? " workspace" : "");
                run_config(&c);
            }
}

/* ---- residual ---- */

/* Element k of a float32 or float64 buffer. */
static double value(tsr_dtype_t t, const void *p, size_t k)
{
    return t == TSR_FLOAT32 ? (double)((const float *)p)[k] : ((const double *)p)[k];
}

/* x + y rounded in type t (what one addition in that type gives). */
static double add_in(tsr_dtype_t t, double x, double y)
{
    return t == TSR_FLOAT32 ? (double)((float)x + (float)y) : x + y;
}

/* A buffer of `total` elements of type t with tsr_random_value(seed, ...) values. */
static void *random_buffer(tsr_dtype_t t, size_t total, int seed)
{
    void *p = malloc(total * tsr_dtype_size(t));
    for (size_t k = 0; k < total; k++) {
        double v = tsr_random_value((uint64_t)seed, 0, (int)k, 0);
        if (t == TSR_FLOAT32)
            ((float *)p)[k] = (float)v;
        else
            ((double *)p)[k] = v;
    }
    return p;
}

typedef enum { RES_FWD, RES_FWD_INTO_A, RES_FWD_INTO_B, RES_BWD, RES_BWD_ACC, RES_BWD_DA_ACC, RES_BWD_DB } res_case_t;

/* Run one residual case on A = a, B = b, G = g, dA = a, dB = b; return the
 * descriptor holding the result (and in *second dB when both gradients are made). */
static tsr_desc_t *run_residual(res_case_t q, tsr_desc_t **d, tsr_desc_t **second)
{
    tsr_desc_t *A = d[0], *B = d[1], *O = d[2], *G = d[3], *dA = d[4], *dB = d[5];
    *second = NULL;
    switch (q) {
    case RES_FWD:
        CHECK_RC(tsr_residual_forward(A, B, O), TSR_SUCCESS);
        return O;
    case RES_FWD_INTO_A:
        CHECK_RC(tsr_residual_forward(A, B, A), TSR_SUCCESS);
        return A;
    case RES_FWD_INTO_B:
        CHECK_RC(tsr_residual_forward(A, B, B), TSR_SUCCESS);
        return B;
    case RES_BWD:
        CHECK_RC(tsr_residual_backward(G, dA, dB, TSR_OVERWRITE, TSR_OVERWRITE), TSR_SUCCESS);
        *second = dB;
        return dA;
    case RES_BWD_ACC:
        CHECK_RC(tsr_residual_backward(G, dA, dB, TSR_ACCUMULATE, TSR_ACCUMULATE), TSR_SUCCESS);
        *second = dB;
        return dA;
    case RES_BWD_DA_ACC:
        CHECK_RC(tsr_residual_backward(G, dA, NULL, TSR_ACCUMULATE, TSR_OVERWRITE), TSR_SUCCESS);
        return dA;
    case RES_BWD_DB:
    default:
        CHECK_RC(tsr_residual_backward(G, NULL, dB, TSR_OVERWRITE, TSR_OVERWRITE), TSR_SUCCESS);
        return dB;
    }
}

/* Expected element k of the result (first) or of dB (second). */
static double residual_want(res_case_t q, tsr_dtype_t t, double a, double b, double g, int second)
{
    switch (q) {
    case RES_FWD:
    case RES_FWD_INTO_A:
    case RES_FWD_INTO_B:
        return add_in(t, a, b);
    case RES_BWD_ACC:
        return add_in(t, second ? b : a, g);
    case RES_BWD_DA_ACC:
        return add_in(t, a, g);
    case RES_BWD:
    case RES_BWD_DB:
    default:
        return g;
    }
}

/* Residual forward/backward, every aliasing and accumulate choice. Additions
 * of the same two operands in the same type: results are exact (tolerance 0). */
static void check_residual_case(int b, int m, int n, int bb, int mb, int nb, tsr_dtype_t t, const tsr_dist_t *dist)
{
    tsr_desc_t *d[6];
    for (int k = 0; k < 6; k++)
        CHECK_RC(tsr_desc_create(&d[k], t, b, m, n, bb, mb, nb, dist), TSR_SUCCESS);
    size_t total = (size_t)b * m * n;
    void *va = random_buffer(t, total, 11), *vb = random_buffer(t, total, 12), *vg = random_buffer(t, total, 13);
    void *got = malloc(total * 8), *got2 = malloc(total * 8);
    const void *init[6] = { va, vb, va, vg, va, vb }; /* A, B, O (overwritten), G, dA, dB */
    for (res_case_t q = RES_FWD; q <= RES_BWD_DB; q++) {
        for (int k = 0; k < 6; k++)
            CHECK_RC(tsr_desc_scatter(d[k], init[k], m, 0), TSR_SUCCESS);
        tsr_desc_t *second, *result = run_residual(q, d, &second);
        CHECK_RC(tsr_desc_gather(result, got, m, 0), TSR_SUCCESS);
        if (second)
            CHECK_RC(tsr_desc_gather(second, got2, m, 0), TSR_SUCCESS);
        if (tsr_rank() != 0)
            continue;
        size_t bad = 0;
        for (size_t k = 0; k < total; k++) {
            double a = value(t, va, k), bv = value(t, vb, k), g = value(t, vg, k);
            bad += value(t, got, k) != residual_want(q, t, a, bv, g, 0);
            if (second)
                bad += value(t, got2, k) != residual_want(q, t, a, bv, g, 1);
        }
        if (bad)
            fprintf(stderr, "  residual case %d (%s, %d x %d x %d, tiles %d x %d x %d): %zu wrong values\n", (int)q,
                    tsr_dtype_name(t), b, m, n, bb, mb, nb, bad);
        CHECK(bad == 0);
    }
    for (int k = 0; k < 6; k++)
        tsr_desc_destroy(d[k]);
    free(va);
    free(vb);
    free(vg);
    free(got);
    free(got2);
}

static void check_residual(const tsr_dist_t *dist)
{
    /* under MPI (StarPU-MPI's cost per task and per collective scatter/gather):
     * no 1 x 1 tiles, no single tile */
    int one = tsr_size() == 1;
    check_residual_case(1, C, BT, 1, 1, one ? 1 : 9, TSR_FLOAT32, dist);
    check_residual_case(3, 13, 10, 2, 5, 4, TSR_FLOAT32, dist); /* batched (3D) descriptors */
    check_residual_case(1, C, BT, 1, 20, 7, TSR_FLOAT64, dist);
    if (one) {
        check_residual_case(1, C, BT, 1, 16, 8, TSR_FLOAT32, dist);
        check_residual_case(1, C, BT, 1, 100, 64, TSR_FLOAT32, dist);
    }
}

/* ---- bad arguments: each returns its code and submits no task ---- */

static void expect(int got, int code, const char *what, uint64_t before)
{
    tsr_expect_error(got, code, before, what);
}

static tsr_desc_t *make_t(tsr_dtype_t t, int b, int m, int n, int mb, int nb, const tsr_dist_t *dist)
{
    tsr_desc_t *d = NULL;
    CHECK_RC(tsr_desc_create(&d, t, b, m, n, 1, mb, nb, dist), TSR_SUCCESS);
    return d;
}

static void check_errors(void)
{
    enum { M = 10, N = 9, MB = 4, NB = 3 };
    tsr_desc_t *x = make_t(TSR_FLOAT32, 1, M, N, MB, NB, NULL), *y = make_t(TSR_FLOAT32, 1, M, N, MB, NB, NULL);
    tsr_desc_t *dy = make_t(TSR_FLOAT32, 1, M, N, MB, NB, NULL), *dx = make_t(TSR_FLOAT32, 1, M, N, MB, NB, NULL);
    tsr_desc_t *w = make_t(TSR_FLOAT32, 1, M, 1, MB, 1, NULL), *b = make_t(TSR_FLOAT32, 1, M, 1, MB, 1, NULL);
    tsr_desc_t *dw = make_t(TSR_FLOAT32, 1, M, 1, MB, 1, NULL), *db = make_t(TSR_FLOAT32, 1, M, 1, MB, 1, NULL);
    tsr_desc_t *mu = make_t(TSR_FLOAT32, 1, 1, N, 1, NB, NULL), *rs = make_t(TSR_FLOAT32, 1, 1, N, 1, NB, NULL);
    tsr_desc_t *x64 = make_t(TSR_FLOAT64, 1, M, N, MB, NB, NULL), *xbig = make_t(TSR_FLOAT32, 1, M + 1, N, MB, NB, NULL);
    tsr_desc_t *x3d = make_t(TSR_FLOAT32, 2, M, N, MB, NB, NULL), *xtile = make_t(TSR_FLOAT32, 1, M, N, MB + 1, NB, NULL);
    tsr_desc_t *w2 = make_t(TSR_FLOAT32, 1, M, 2, MB, 1, NULL), *wtile = make_t(TSR_FLOAT32, 1, M, 1, 5, 1, NULL);
    tsr_desc_t *mu2 = make_t(TSR_FLOAT32, 1, 2, N, 1, NB, NULL), *mutile = make_t(TSR_FLOAT32, 1, 1, N, 1, 2, NULL);
    tsr_desc_t *work = NULL, *work1 = make_t(TSR_FLOAT32, 1, 2, N, 1, NB, NULL), *none = NULL;
    tsr_desc_t *dw64 = make_t(TSR_FLOAT64, 1, M, 1, MB, 1, NULL), *work_row = make_t(TSR_FLOAT32, 1, 1, N, 1, NB, NULL);
    CHECK_RC(tsr_layernorm_workspace_create(&work, mu), TSR_SUCCESS);
    CHECK_RC(tsr_layernorm_workspace_create(NULL, mu), TSR_EINVAL);
    CHECK_RC(tsr_layernorm_workspace_create(&none, NULL), TSR_EINVAL);
    const tsr_reduction_t O = TSR_REDUCTION_ORDERED, R = TSR_REDUCTION_REDUX;
    uint64_t t0 = tsr_tasks_submitted();

    /* forward */
    expect(tsr_layernorm_forward(NULL, w, b, y, mu, rs, O), TSR_EINVAL, "fwd NULL inp", t0);
    expect(tsr_layernorm_forward(x, w, NULL, y, mu, rs, O), TSR_EINVAL, "fwd NULL bias", t0);
    expect(tsr_layernorm_forward(x, w, b, y, mu, rs, (tsr_reduction_t)5), TSR_EINVAL, "fwd bad accum", t0);
    expect(tsr_layernorm_forward(x, w, b, x, mu, rs, O), TSR_EINVAL, "fwd out == inp", t0);
    expect(tsr_layernorm_forward(x, w, b, y, mu, mu, O), TSR_EINVAL, "fwd mean == rstd", t0);
    expect(tsr_layernorm_forward(x64, w, b, y, mu, rs, O), TSR_EDTYPE, "fwd float64 inp", t0);
    expect(tsr_layernorm_forward(x, w, b, xbig, mu, rs, O), TSR_ESHAPE, "fwd out has C + 1 rows", t0);
    expect(tsr_layernorm_forward(x3d, w, b, y, mu, rs, O), TSR_ESHAPE, "fwd 3D inp", t0);
    expect(tsr_layernorm_forward(x, w2, b, y, mu, rs, O), TSR_ESHAPE, "fwd weight C x 2", t0);
    expect(tsr_layernorm_forward(x, w, b, y, mu2, rs, O), TSR_ESHAPE, "fwd mean 2 x BT", t0);
    expect(tsr_layernorm_forward(x, w, b, y, mu, xbig, O), TSR_ESHAPE, "fwd rstd C x BT", t0);
    expect(tsr_layernorm_forward(x, w, b, xtile, mu, rs, O), TSR_ETILE, "fwd out tiles", t0);
    expect(tsr_layernorm_forward(x, wtile, b, y, mu, rs, O), TSR_ETILE, "fwd weight tiles", t0);
    expect(tsr_layernorm_forward(x, w, b, y, mu, mutile, O), TSR_ETILE, "fwd rstd tiles", t0);

    /* backward */
    const tsr_write_t A = TSR_ACCUMULATE;
    expect(tsr_layernorm_backward(dy, x, w, mu, rs, dx, dw, NULL, A, A, O, work), TSR_EINVAL, "bwd NULL dbias", t0);
    const tsr_write_t bad_mode = (tsr_write_t)2;
    const tsr_reduction_t bad_accum = (tsr_reduction_t)-1;
    expect(tsr_layernorm_backward(dy, x, w, mu, rs, dx, dw, db, bad_mode, A, O, work), TSR_EINVAL, "bwd bad dinp_mode", t0);
    expect(tsr_layernorm_backward(dy, x, w, mu, rs, dx, dw, db, A, bad_mode, O, work), TSR_EINVAL, "bwd bad dparam_mode", t0);
    expect(tsr_layernorm_backward(dy, x, w, mu, rs, dx, dw, db, A, A, bad_accum, work), TSR_EINVAL, "bwd bad accum", t0);
    expect(tsr_layernorm_backward(dy, x, w, mu, rs, dy, dw, db, A, A, O, work), TSR_EINVAL, "bwd dinp == dout", t0);
    expect(tsr_layernorm_backward(dy, x, w, mu, rs, x, dw, db, A, A, O, work), TSR_EINVAL, "bwd dinp == inp", t0);
    expect(tsr_layernorm_backward(dy, x, w, mu, rs, dx, dw, dw, A, A, O, work), TSR_EINVAL, "bwd dweight == dbias", t0);
    expect(tsr_layernorm_backward(dy, x, w, mu, rs, dx, dw64, db, A, A, O, work), TSR_EDTYPE, "bwd float64 dweight", t0);
    expect(tsr_layernorm_backward(xbig, x, w, mu, rs, dx, dw, db, A, A, O, work), TSR_ESHAPE, "bwd dout shape", t0);
    expect(tsr_layernorm_backward(dy, x, w, mu, rs, dx, w2, db, A, A, R, work), TSR_ESHAPE, "bwd dweight shape", t0);
    expect(tsr_layernorm_backward(dy, x, w, mu, rs, dx, dw, db, A, A, O, work_row), TSR_ESHAPE, "bwd work 1 x BT", t0);
    expect(tsr_layernorm_backward(dy, x, w, mu, rs, dx, dw, db, A, A, O, mu), TSR_EINVAL, "bwd work == mean", t0);
    expect(tsr_layernorm_backward(dy, x, w, mu, rs, dx, dw, db, A, A, O, work1), TSR_ETILE, "bwd work tiles 1 x nb", t0);
    expect(tsr_layernorm_backward(dy, x, w, mu, rs, xtile, dw, db, A, A, O, work), TSR_ETILE, "bwd dinp tiles", t0);
    expect(tsr_layernorm_backward(dy, x, w, mutile, rs, dx, dw, db, A, A, O, work), TSR_ETILE, "bwd mean tiles", t0);

    /* residual */
    expect(tsr_residual_forward(x, NULL, y), TSR_EINVAL, "res NULL b", t0);
    expect(tsr_residual_forward(x, x64, y), TSR_EDTYPE, "res float64 b", t0);
    expect(tsr_residual_forward(x, xbig, y), TSR_ESHAPE, "res shape", t0);
    expect(tsr_residual_forward(x, x3d, y), TSR_ESHAPE, "res batch", t0);
    expect(tsr_residual_forward(x, y, xtile), TSR_ETILE, "res tiles", t0);
    expect(tsr_residual_backward(dy, NULL, NULL, TSR_OVERWRITE, TSR_OVERWRITE), TSR_EINVAL, "res bwd no output", t0);
    expect(tsr_residual_backward(NULL, dx, y, TSR_OVERWRITE, TSR_OVERWRITE), TSR_EINVAL, "res bwd NULL dout", t0);
    expect(tsr_residual_backward(dy, dx, y, (tsr_write_t)4, TSR_OVERWRITE), TSR_EINVAL, "res bwd bad da_mode", t0);
    expect(tsr_residual_backward(dy, dx, y, TSR_OVERWRITE, (tsr_write_t)2), TSR_EINVAL, "res bwd bad db_mode", t0);
    expect(tsr_residual_backward(dy, dy, y, TSR_OVERWRITE, TSR_OVERWRITE), TSR_EINVAL, "res bwd da == dout", t0);
    expect(tsr_residual_backward(dy, dx, dx, TSR_OVERWRITE, TSR_OVERWRITE), TSR_EINVAL, "res bwd da == db", t0);
    expect(tsr_residual_backward(dy, NULL, x64, TSR_OVERWRITE, TSR_OVERWRITE), TSR_EDTYPE, "res bwd float64 db", t0);
    expect(tsr_residual_backward(dy, xtile, NULL, TSR_OVERWRITE, TSR_OVERWRITE), TSR_ETILE, "res bwd da tiles", t0);

    if (tsr_size() == 2) { /* grids that differ */
        tsr_dist_t rows = tsr_dist_block_cyclic(2, 1), cols = tsr_dist_block_cyclic(1, 2);
        tsr_desc_t *x21 = make_t(TSR_FLOAT32, 1, M, N, MB, NB, &rows), *y12 = make_t(TSR_FLOAT32, 1, M, N, MB, NB, &cols);
        tsr_desc_t *m12 = make_t(TSR_FLOAT32, 1, 1, N, 1, NB, &cols);
        tsr_desc_t *w21 = make_t(TSR_FLOAT32, 1, M, 1, MB, 1, &rows), *b21 = make_t(TSR_FLOAT32, 1, M, 1, MB, 1, &rows);
        tsr_desc_t *r21 = make_t(TSR_FLOAT32, 1, 1, N, 1, NB, &rows), *m21 = make_t(TSR_FLOAT32, 1, 1, N, 1, NB, &rows);
        t0 = tsr_tasks_submitted();
        expect(tsr_layernorm_forward(x21, w21, b21, y12, m21, r21, O), TSR_EDIST, "fwd grids 2x1 vs 1x2", t0);
        expect(tsr_layernorm_forward(x21, w21, b21, x, m12, r21, O), TSR_EDIST, "fwd mean on 1x2", t0);
        expect(tsr_residual_forward(x21, y12, x21), TSR_EDIST, "res grids", t0);
        tsr_desc_t *more[] = { x21, y12, m12, w21, b21, r21, m21 };
        for (int k = 0; k < 7; k++)
            tsr_desc_destroy(more[k]);
    }
    /* and the good calls do submit tasks (every argument above was fine but one) */
    t0 = tsr_tasks_submitted();
    CHECK_RC(tsr_layernorm_forward(x, w, b, y, mu, rs, R), TSR_SUCCESS);
    CHECK_RC(tsr_layernorm_backward(dy, x, w, mu, rs, dx, dw, db, A, A, O, work), TSR_SUCCESS);
    CHECK_RC(tsr_residual_forward(x, y, y), TSR_SUCCESS);
    CHECK_RC(tsr_residual_backward(dy, dx, NULL, TSR_ACCUMULATE, TSR_OVERWRITE), TSR_SUCCESS);
    CHECK_RC(tsr_wait(), TSR_SUCCESS);
    CHECK(tsr_tasks_submitted() > t0 || tsr_size() > 1);
    TSR_TEST_DESTROY(x, y, dy, dx, w, b, dw, db, mu, rs, x64, xbig, x3d, xtile, w2, wtile, mu2, mutile, work, work1,
                     dw64, work_row);
}

/* ---- RMSNorm forward ---- */

/* RMSNorm forward against a plain double loop, over token tiles that do not
 * divide BT (one feature tile: the op needs every feature of a token in one
 * tile), then its argument errors. Tolerance: a float sum of C squares is
 * within C eps of the exact one, so rstd moves by a relative C eps and out by
 * C eps |out| (+ a few eps). */
static void check_rmsnorm(const tsr_dist_t *grid)
{
    static const int token_tiles[] = { 1, 7, 16, 45 };
    const float eps = 1e-5f;
    static float out_ref[C * BT];
    float rstd_ref[BT];
    for (int t = 0; t < BT; t++) {
        double ss = 0;
        for (int i = 0; i < C; i++)
            ss += (double)D.x[t * C + i] * D.x[t * C + i];
        double r = 1.0 / sqrt(ss / C + eps);
        rstd_ref[t] = (float)r;
        for (int i = 0; i < C; i++)
            out_ref[t * C + i] = (float)(D.x[t * C + i] * r * D.w[i]);
    }
    for (size_t k = 0; k < sizeof token_tiles / sizeof token_tiles[0]; k++) {
        int nb = token_tiles[k];
        tsr_desc_t *x = make_t(TSR_FLOAT32, 1, C, BT, C, nb, grid), *w = make_t(TSR_FLOAT32, 1, C, 1, C, 1, grid);
        tsr_desc_t *y = make_t(TSR_FLOAT32, 1, C, BT, C, nb, grid), *r = make_t(TSR_FLOAT32, 1, 1, BT, 1, nb, grid);
        scatter(x, D.x);
        scatter(w, D.w);
        scatter(y, D.g_act); /* garbage that must be overwritten */
        scatter(r, D.g_stat);
        CHECK_RC(tsr_rmsnorm_forward(x, w, y, r, eps), TSR_SUCCESS);
        float *out = tsr_test_gather_f32(y), *rstd = tsr_test_gather_f32(r);
        if (tsr_rank() == 0) {
            char name[64];
            snprintf(name, sizeof name, "rmsnorm nb %d", nb);
            expect_close("rmsnorm out", name, out, out_ref, C * BT, (C + 4) * EPS32 * max_abs(out_ref, C * BT));
            expect_close("rmsnorm rstd", name, rstd, rstd_ref, BT, (C + 4) * EPS32 * max_abs(rstd_ref, BT));
        }
        free(out);
        free(rstd);
        tsr_desc_destroy(x);
        tsr_desc_destroy(w);
        tsr_desc_destroy(y);
        tsr_desc_destroy(r);
    }
    /* errors: features over two tiles, eps <= 0, out == inp; nothing submitted */
    tsr_desc_t *x = make_t(TSR_FLOAT32, 1, C, BT, 32, 16, grid), *w = make_t(TSR_FLOAT32, 1, C, 1, 32, 1, grid);
    tsr_desc_t *y = make_t(TSR_FLOAT32, 1, C, BT, 32, 16, grid), *r = make_t(TSR_FLOAT32, 1, 1, BT, 1, 16, grid);
    uint64_t t0 = tsr_tasks_submitted();
    expect(tsr_rmsnorm_forward(x, w, y, r, eps), TSR_ETILE, "rmsnorm features over two tiles", t0);
    tsr_desc_t *x1 = make_t(TSR_FLOAT32, 1, C, BT, C, 16, grid), *w1 = make_t(TSR_FLOAT32, 1, C, 1, C, 1, grid);
    tsr_desc_t *y1 = make_t(TSR_FLOAT32, 1, C, BT, C, 16, grid);
    expect(tsr_rmsnorm_forward(x1, w1, y1, r, 0.0f), TSR_EINVAL, "rmsnorm eps 0", t0);
    expect(tsr_rmsnorm_forward(x1, w1, x1, r, eps), TSR_EINVAL, "rmsnorm out == inp", t0);
    expect(tsr_rmsnorm_forward(x1, w1, y1, NULL, eps), TSR_EINVAL, "rmsnorm NULL rstd", t0);
    tsr_desc_t *all[] = { x, w, y, r, x1, w1, y1 };
    for (int k = 0; k < 7; k++)
        tsr_desc_destroy(all[k]);
}

/* ---- RMSNorm backward ---- */

/* The backward's inputs and the outputs' initial values, as the tiles hold
 * them (rounded to bf16 for a bf16 case). */
typedef struct {
    float x[C * BT], dy[C * BT], w[C], rstd[BT], g_act[C * BT], g_par[C];
} rms_in_t;

static float stored(tsr_dtype_t t, float v) { return t == TSR_BFLOAT16 ? tsr_bf16_to_float(tsr_float_to_bf16(v)) : v; }

/* rstd of token t in double, as the forward defines it (eps 1e-5). */
static double rms_rstd(const double *xt)
{
    double ss = 0;
    for (int i = 0; i < C; i++)
        ss += xt[i] * xt[i];
    return 1.0 / sqrt(ss / C + 1e-5);
}

static void rms_inputs(tsr_dtype_t t, rms_in_t *in)
{
    for (int k = 0; k < C * BT; k++) {
        in->x[k] = stored(t, D.x[k]);
        in->dy[k] = stored(t, D.dout[k]);
        in->g_act[k] = stored(t, D.g_act[k]);
    }
    for (int i = 0; i < C; i++) {
        in->w[i] = stored(t, D.w[i]);
        in->g_par[i] = stored(t, D.g_par[i]);
    }
    for (int tok = 0; tok < BT; tok++) {
        double xt[C];
        for (int i = 0; i < C; i++)
            xt[i] = in->x[tok * C + i];
        in->rstd[tok] = stored(t, (float)rms_rstd(xt));
    }
}

/* The gradients in double from the stored inputs, and each one's scale: the
 * sum of the magnitudes of what makes it (what float rounding is relative to). */
static void ref_rmsnorm_backward(const rms_in_t *in, double *dx, double *dx_scale, double *dw, double *dw_scale)
{
    for (int i = 0; i < C; i++)
        dw[i] = dw_scale[i] = 0;
    for (int t = 0; t < BT; t++) {
        const float *x = in->x + t * C, *dy = in->dy + t * C;
        double s = in->rstd[t], dot = 0, dot_abs = 0;
        for (int i = 0; i < C; i++) {
            dot += (double)in->w[i] * dy[i] * x[i] * s;
            dot_abs += fabs((double)in->w[i] * dy[i] * x[i] * s);
        }
        for (int i = 0; i < C; i++) {
            double xhat = x[i] * s;
            dx[t * C + i] = s * (in->w[i] * dy[i] - xhat * dot / C);
            dx_scale[t * C + i] = s * (fabs((double)in->w[i] * dy[i]) + fabs(xhat) * dot_abs / C);
            dw[i] += dy[i] * xhat;
            dw_scale[i] += fabs(dy[i] * xhat);
        }
    }
}

/* L = sum(out * dout) of the RMSNorm forward, in double. */
static double rms_loss(const double *x, const double *w)
{
    double loss = 0;
    for (int t = 0; t < BT; t++) {
        double s = rms_rstd(x + t * C);
        for (int i = 0; i < C; i++)
            loss += x[t * C + i] * s * w[i] * D.dout[t * C + i];
    }
    return loss;
}

/* The reference's formulas against central differences of rms_loss (h =
 * 1e-4: truncation and rounding far below the tolerance), at two elements of
 * dx and two of dw. */
static void check_rmsnorm_fd(void)
{
    static rms_in_t in;
    static double x[C * BT], dx[C * BT], dx_scale[C * BT];
    double w[C], dw[C], dw_scale[C], h = 1e-4;
    rms_inputs(TSR_FLOAT32, &in);
    ref_rmsnorm_backward(&in, dx, dx_scale, dw, dw_scale);
    for (int k = 0; k < C * BT; k++)
        x[k] = D.x[k];
    for (int i = 0; i < C; i++)
        w[i] = D.w[i];
    const int dx_at[2] = { 3 * C + 5, (BT - 1) * C + C - 1 }, dw_at[2] = { 0, C / 2 };
    for (int q = 0; q < 4; q++) {
        double *p = q < 2 ? &x[dx_at[q]] : &w[dw_at[q - 2]], keep = *p;
        *p = keep + h;
        double up = rms_loss(x, w);
        *p = keep - h;
        double fd = (up - rms_loss(x, w)) / (2 * h);
        *p = keep;
        /* rstd was stored in float: a relative 2^-24 on the reference */
        double ref = q < 2 ? dx[dx_at[q]] : dw[dw_at[q - 2]], scale = q < 2 ? dx_scale[dx_at[q]] : dw_scale[dw_at[q - 2]];
        if (!(fabs(ref - fd) <= 1e-6 * (scale + 1)))
            fprintf(stderr, "  rmsnorm backward reference vs finite differences: %s %.9g vs %.9g\n",
                    q < 2 ? "dx" : "dw", ref, fd);
        CHECK(fabs(ref - fd) <= 1e-6 * (scale + 1));
    }
}

/* A float array into a descriptor of float32 or bf16, and back. */
static void scatter_as(tsr_desc_t *d, const float *v)
{
    if (d->dtype == TSR_FLOAT32)
        scatter(d, v);
    else
        CHECK_RC(tsr_test_scatter_bf16(d, v), TSR_SUCCESS);
}

static float *gather_as(tsr_desc_t *d)
{
    if (d->dtype == TSR_FLOAT32)
        return tsr_test_gather_f32(d);
    size_t n = (size_t)d->m * d->n;
    tsr_bf16_t *h = tsr_rank() == 0 ? malloc(n * sizeof *h) : NULL;
    float *v = tsr_rank() == 0 ? malloc(n * sizeof *v) : NULL;
    CHECK_RC(tsr_desc_gather(d, h, d->m, 0), TSR_SUCCESS);
    for (size_t k = 0; v && k < n; k++)
        v[k] = tsr_bf16_to_float(h[k]);
    free(h);
    return v;
}

/* |got - want| <= rel * scale everywhere; prints the worst. */
static void expect_near(const char *what, const char *config, const float *got, const double *want,
                        const double *scale, int n, double rel)
{
    double worst = 0;
    for (int k = 0; k < n; k++)
        worst = fmax(worst, isnan(got[k]) ? INFINITY : fabs(got[k] - want[k]) / (rel * scale[k] + DBL_MIN));
    if (!(worst <= 1.0))
        fprintf(stderr, "  %s [%s]: error %.3g times the tolerance\n", what, config, worst);
    CHECK(worst <= 1.0);
}

typedef struct {
    tsr_dtype_t dtype;
    int nb;
    tsr_reduction_t reduction;
    tsr_write_t dx_mode, dw_mode;
} rms_case_t;

/* One case, outputs pre-filled with garbage (kept when added into).
 * Tolerance, relative to each gradient's scale (ref_rmsnorm_backward), plus
 * the garbage: float sums of C terms behind dx and of BT behind dw, a few
 * roundings more; bf16 (8 significant bits: a relative 2^-8 per rounding)
 * rounds dx once and dw once per token tile, and its REDUX combination. */
static void check_rmsnorm_backward_case(const rms_case_t *c, const tsr_dist_t *grid)
{
    static rms_in_t in;
    static double dx_want[C * BT], dx_scale[C * BT];
    double dw_want[C], dw_scale[C];
    rms_inputs(c->dtype, &in);
    tsr_desc_t *x = make_t(c->dtype, 1, C, BT, C, c->nb, grid), *dy = make_t(c->dtype, 1, C, BT, C, c->nb, grid);
    tsr_desc_t *w = make_t(c->dtype, 1, C, 1, C, 1, grid), *r = make_t(c->dtype, 1, 1, BT, 1, c->nb, grid);
    tsr_desc_t *dx = make_t(c->dtype, 1, C, BT, C, c->nb, grid), *dw = make_t(c->dtype, 1, C, 1, C, 1, grid);
    scatter_as(x, in.x);
    scatter_as(dy, in.dy);
    scatter_as(w, in.w);
    scatter_as(r, in.rstd);
    scatter_as(dx, in.g_act);
    scatter_as(dw, in.g_par);
    CHECK_RC(tsr_rmsnorm_backward(dy, x, w, r, dx, dw, c->dx_mode, c->dw_mode, c->reduction), TSR_SUCCESS);
    float *dx_got = gather_as(dx), *dw_got = gather_as(dw);
    if (tsr_rank() == 0) {
        ref_rmsnorm_backward(&in, dx_want, dx_scale, dw_want, dw_scale);
        for (int k = 0; k < C * BT && c->dx_mode == TSR_ACCUMULATE; k++) {
            dx_want[k] += in.g_act[k];
            dx_scale[k] += fabs(in.g_act[k]);
        }
        for (int i = 0; i < C && c->dw_mode == TSR_ACCUMULATE; i++) {
            dw_want[i] += in.g_par[i];
            dw_scale[i] += fabs(in.g_par[i]);
        }
        int bf16 = c->dtype == TSR_BFLOAT16, tiles = (BT + c->nb - 1) / c->nb;
        char name[96];
        snprintf(name, sizeof name, "rmsnorm backward %s nb %d %s dx %s dw %s", tsr_dtype_name(c->dtype), c->nb,
                 c->reduction == TSR_REDUCTION_REDUX ? "redux" : "ordered", c->dx_mode ? "+=" : "=",
                 c->dw_mode ? "+=" : "=");
        expect_near("dinp", name, dx_got, dx_want, dx_scale, C * BT, (C + 8) * EPS32 + bf16 * 0x1p-8);
        expect_near("dweight", name, dw_got, dw_want, dw_scale, C, (BT + 8) * EPS32 + bf16 * (tiles + 1) * 0x1p-8);
    }
    free(dx_got);
    free(dw_got);
    tsr_desc_t *all[] = { x, dy, w, r, dx, dw };
    for (int k = 0; k < 6; k++)
        tsr_desc_destroy(all[k]);
}

/* Each reduction with each write mode of dw, dx in both modes, on token
 * tiles that do not divide BT (and one token per tile), two of them on bf16
 * tiles; then argument errors (nothing submitted). */
static void check_rmsnorm_backward(const tsr_dist_t *grid)
{
    const tsr_reduction_t O = TSR_REDUCTION_ORDERED, R = TSR_REDUCTION_REDUX;
    const tsr_write_t W = TSR_OVERWRITE, A = TSR_ACCUMULATE;
    const rms_case_t cases[] = {
        { TSR_FLOAT32, 1, O, W, W },   { TSR_FLOAT32, 7, O, A, A },  { TSR_FLOAT32, 16, O, W, A },
        { TSR_FLOAT32, 45, O, A, W },  { TSR_FLOAT32, 7, R, W, W },  { TSR_FLOAT32, 16, R, A, A },
        { TSR_FLOAT32, 45, R, W, A },  { TSR_FLOAT32, 1, R, A, W },  { TSR_BFLOAT16, 16, O, W, W },
        { TSR_BFLOAT16, 7, R, A, A },
    };
    if (tsr_rank() == 0)
        check_rmsnorm_fd();
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        check_rmsnorm_backward_case(&cases[k], grid);

    tsr_desc_t *x = make_t(TSR_FLOAT32, 1, C, BT, C, 16, grid), *dy = make_t(TSR_FLOAT32, 1, C, BT, C, 16, grid);
    tsr_desc_t *w = make_t(TSR_FLOAT32, 1, C, 1, C, 1, grid), *r = make_t(TSR_FLOAT32, 1, 1, BT, 1, 16, grid);
    tsr_desc_t *dx = make_t(TSR_FLOAT32, 1, C, BT, C, 16, grid), *dw = make_t(TSR_FLOAT32, 1, C, 1, C, 1, grid);
    tsr_desc_t *x2 = make_t(TSR_FLOAT32, 1, C, BT, 32, 16, grid), *dy2 = make_t(TSR_FLOAT32, 1, C, BT, 32, 16, grid);
    tsr_desc_t *w2 = make_t(TSR_FLOAT32, 1, C, 1, 32, 1, grid), *dx2 = make_t(TSR_FLOAT32, 1, C, BT, 32, 16, grid);
    tsr_desc_t *dw2 = make_t(TSR_FLOAT32, 1, C, 1, 32, 1, grid);
    uint64_t t0 = tsr_tasks_submitted();
    expect(tsr_rmsnorm_backward(dy2, x2, w2, r, dx2, dw2, W, W, O), TSR_ETILE, "rmsnorm bwd features over two tiles",
           t0);
    expect(tsr_rmsnorm_backward(dy, x, w, r, x, dw, W, W, O), TSR_EINVAL, "rmsnorm bwd dinp == inp", t0);
    expect(tsr_rmsnorm_backward(dy, x, w, r, dx, NULL, W, W, O), TSR_EINVAL, "rmsnorm bwd NULL dweight", t0);
    expect(tsr_rmsnorm_backward(dy, x, w, r, dx, dw, (tsr_write_t)2, W, O), TSR_EINVAL, "rmsnorm bwd bad dinp_mode",
           t0);
    expect(tsr_rmsnorm_backward(dy, x, w, r, dx, dw, W, W, (tsr_reduction_t)5), TSR_EINVAL,
           "rmsnorm bwd bad reduction", t0);
    tsr_desc_t *all[] = { x, dy, w, r, dx, dw, x2, dy2, w2, dx2, dw2 };
    for (int k = 0; k < 11; k++)
        tsr_desc_destroy(all[k]);
}

/* ---- sum of parts by a tree ---- */

/* n parts, part r on rank r % ranks (the sum's tiles on the grid): the tree's
 * sum against the plain one; float32 rounding differs with the order. */
static void check_sum_tree_case(int n, int mb, int nb, tsr_dtype_t t, const tsr_dist_t *grid)
{
    tsr_desc_t *parts[5], *sum;
    void *values[5];
    size_t total = (size_t)C * BT;
    for (int r = 0; r < n; r++) {
        tsr_dist_t on = tsr_dist_single(r % tsr_size());
        CHECK_RC(tsr_desc_create(&parts[r], t, 1, C, BT, 1, mb, nb, &on), TSR_SUCCESS);
        values[r] = random_buffer(t, total, 20 + r);
        CHECK_RC(tsr_desc_scatter(parts[r], values[r], C, 0), TSR_SUCCESS);
    }
    CHECK_RC(tsr_desc_create(&sum, t, 1, C, BT, 1, mb, nb, grid), TSR_SUCCESS);
    CHECK_RC(tsr_sum_tree(parts, n, sum), TSR_SUCCESS);
    void *got = malloc(total * 8);
    CHECK_RC(tsr_desc_gather(sum, got, C, 0), TSR_SUCCESS);
    double tol = n * (t == TSR_FLOAT32 ? 4e-7 : 1e-15);
    size_t bad = 0;
    for (size_t k = 0; tsr_rank() == 0 && k < total; k++) {
        double want = 0;
        for (int r = 0; r < n; r++)
            want += value(t, values[r], k);
        bad += fabs(value(t, got, k) - want) > tol;
    }
    if (bad)
        fprintf(stderr, "  sum tree of %d parts (%s, tiles %d x %d): %zu wrong values\n", n, tsr_dtype_name(t), mb, nb,
                bad);
    CHECK(bad == 0);
    for (int r = 0; r < n; r++) {
        tsr_desc_destroy(parts[r]);
        free(values[r]);
    }
    tsr_desc_destroy(sum);
    free(got);
}

/* Too few parts, a part twice, the sum among the parts, unlike shapes: refused
 * before any task. */
static void check_sum_tree_errors(void)
{
    tsr_desc_t *a = make_t(TSR_FLOAT32, 1, 10, 9, 4, 3, NULL), *b = make_t(TSR_FLOAT32, 1, 10, 9, 4, 3, NULL);
    tsr_desc_t *s = make_t(TSR_FLOAT32, 1, 10, 9, 4, 3, NULL), *big = make_t(TSR_FLOAT32, 1, 11, 9, 4, 3, NULL);
    tsr_desc_t *one[] = { a }, *twice[] = { a, b, a }, *with_sum[] = { a, s }, *unlike[] = { a, big };
    uint64_t t0 = tsr_tasks_submitted();
    expect(tsr_sum_tree(one, 1, s), TSR_EINVAL, "sum tree of one part", t0);
    expect(tsr_sum_tree(NULL, 2, s), TSR_EINVAL, "sum tree without parts", t0);
    expect(tsr_sum_tree(twice, 3, s), TSR_EINVAL, "sum tree with a part twice", t0);
    expect(tsr_sum_tree(with_sum, 2, s), TSR_EINVAL, "sum tree into one of its parts", t0);
    expect(tsr_sum_tree(unlike, 2, s), TSR_ESHAPE, "sum tree of unlike parts", t0);
    tsr_desc_t *all[] = { a, b, s, big };
    for (int k = 0; k < 4; k++)
        tsr_desc_destroy(all[k]);
}

static void check_sum_tree(const tsr_dist_t *grid)
{
    check_sum_tree_errors();
    for (int n = 2; n <= 5; n++)
        check_sum_tree_case(n, 9, 7, TSR_FLOAT32, grid);
    check_sum_tree_case(4, 20, 45, TSR_FLOAT64, grid);
}

int main(int argc, char **argv)
{
    tsr_config_t cfg;
    tsr_config_default(&cfg);
    if (tsr_mpi_launched())
        cfg.ncpus = 1;
    if (tsr_init(&cfg, &argc, &argv) != 0)
        return 2;
    make_data();
    if (tsr_rank() == 0)
        finite_differences();
    check_errors(); /* prints the expected error messages */
    /* under mpirun: grid P x (ranks / P), P from the command line (default 1) */
    int size = tsr_size(), P = argc > 1 ? atoi(argv[1]) : 1;
    if (P < 1 || size % P) {
        fprintf(stderr, "usage: test_layernorm [P], P dividing the %d rank(s)\n", size);
        tsr_finalize();
        return 2;
    }
    tsr_dist_t grid = tsr_dist_block_cyclic(P, size / P);
    check_layernorm(grid);
    check_residual(&grid);
    check_sum_tree(&grid);
    check_rmsnorm(&grid);
    check_rmsnorm_backward(&grid);
    return tsr_test_finish("test_layernorm");
}
