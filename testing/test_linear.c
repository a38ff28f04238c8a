/* test_linear: the fused linear layers against plain-loop references with
 * llm.c semantics (computed in double), on shapes that do not divide by the
 * tiles, with 1-wide tiles and single tiles, ordered and REDUX:
 *   fwd     GEMM + bias, GEMM + bias + GeLU (pre-activation kept)
 *   bwd     dinp / dW / dbias, overwrite and accumulate, with the GeLU
 *           derivative fused (separate dpre and in place)
 *   heads   QKV projection into Q, K, V [B*NH, hd, T] and the attention
 *           projection from Y [B*NH, hd, T], forward and backward, fused and
 *           fallback (explicit reshape), plus split / merge and the per-head
 *           GEMM kernel (run it with TSR_LINEAR_PER_HEAD=1 to send the fused
 *           tasks through that kernel too)
 *   fd      the GeLU kernels, and central finite differences of a double
 *           forward vs the float32 GeLU-linear backward
 *   errors  bad arguments: error code, no task submitted
 * usage: test_linear [GROUP ...] [--P p] (default: every group; --P p runs
 * on a p x (ranks/p) block-cyclic grid). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tessera.h"
#include "tsr_check.h"
#include "tsr_testutil.h"
#include "tsr_compute_linear.h"

static tsr_dist_t grid;
static char case_name[256];

/* ---- data ------------------------------------------------------------------- */

/* n values uniform in [-scale, scale) */
static float *random_floats(size_t n, uint64_t seed, double scale)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; x && i < n; i++)
        x[i] = (float)(2.0 * scale * tsr_random_value(seed, 0, (int)i, 7));
    return x;
}

static tsr_desc_t *make3(int b, int m, int n, int bb, int mb, int nb)
{
    tsr_desc_t *d = NULL;
    CHECK_RC(tsr_desc_create(&d, TSR_FLOAT32, b, m, n, bb, mb, nb, &grid), TSR_SUCCESS);
    return d;
}

static tsr_desc_t *make2(int m, int n, int mb, int nb) { return make3(1, m, n, 1, mb, nb); }

/* A descriptor holding x (column-major, every rank passes the same array). */
static tsr_desc_t *upload3(const float *x, int b, int m, int n, int bb, int mb, int nb)
{
    tsr_desc_t *d = make3(b, m, n, bb, mb, nb);
    CHECK_RC(tsr_test_scatter_f32(d, x), TSR_SUCCESS);
    return d;
}

static tsr_desc_t *upload2(const float *x, int m, int n, int mb, int nb) { return upload3(x, 1, m, n, 1, mb, nb); }

/* ---- llm.c-style references (double) --------------------------------------- */

#define GELU_SCALING_FACTOR 0.7978845608028654 /* sqrt(2 / pi) */

static double gelu_ref(double x)
{
    return 0.5 * x * (1.0 + tanh(GELU_SCALING_FACTOR * (x + 0.044715 * x * x * x)));
}

/* The same function as x sigmoid(2u): in double too, 1 + tanh(u) cancels
 * for u below about -18 (x < -7), so relative accuracy needs this form. */
static double gelu_ref_stable(double x)
{
    return x / (1.0 + exp(-2.0 * GELU_SCALING_FACTOR * (x + 0.044715 * x * x * x)));
}

static double gelu_grad_ref(double x)
{
    double u = GELU_SCALING_FACTOR * (x + 0.044715 * x * x * x), th = tanh(u);
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * GELU_SCALING_FACTOR * (1.0 + 3.0 * 0.044715 * x * x);
}

/* pre[t][o] = bias[o] + sum_i inp[t][i] W[o][i]; absb: the same with |.| */
static void ref_forward(int IC, int OC, int BT, const float *inp, const float *W, const float *bias, double *pre,
                        double *absb)
{
    for (int t = 0; t < BT; t++)
        for (int o = 0; o < OC; o++) {
            double s = bias ? bias[o] : 0.0, a = bias ? fabs(bias[o]) : 0.0;
            for (int i = 0; i < IC; i++) {
                double p = (double)inp[(size_t)t * IC + i] * W[(size_t)o * IC + i];
                s += p;
                a += fabs(p);
            }
            pre[(size_t)t * OC + o] = s;
            absb[(size_t)t * OC + o] = a;
        }
}

/* Gradients from dp (= dout, or dout * gelu'(pre)) with abs bounds adp:
 * dinp[t][i] = init + sum_o W[o][i] dp[t][o], dW[o][i] = init + sum_t
 * inp[t][i] dp[t][o], dbias[o] = init + sum_t dp[t][o]; init NULL: none. */
typedef struct { double *dinp, *dW, *dbias, *a_dinp, *a_dW, *a_dbias; } grads_ref_t;

static void ref_backward(int IC, int OC, int BT, const float *inp, const float *W, const double *dp,
                         const double *adp, const float *init_dinp, const float *init_dW, const float *init_dbias,
                         grads_ref_t *g)
{
    for (int t = 0; t < BT; t++)
        for (int i = 0; i < IC; i++) {
            size_t x = (size_t)t * IC + i;
            double s = init_dinp ? init_dinp[x] : 0.0, a = fabs(s);
            for (int o = 0; o < OC; o++) {
                s += (double)W[(size_t)o * IC + i] * dp[(size_t)t * OC + o];
                a += fabs(W[(size_t)o * IC + i]) * adp[(size_t)t * OC + o];
            }
            g->dinp[x] = s;
            g->a_dinp[x] = a;
        }
    for (int o = 0; o < OC; o++) {
        for (int i = 0; i < IC; i++) {
            size_t x = (size_t)o * IC + i;
            double s = init_dW ? init_dW[x] : 0.0, a = fabs(s);
            for (int t = 0; t < BT; t++) {
                s += (double)inp[(size_t)t * IC + i] * dp[(size_t)t * OC + o];
                a += fabs(inp[(size_t)t * IC + i]) * adp[(size_t)t * OC + o];
            }
            g->dW[x] = s;
            g->a_dW[x] = a;
        }
        double s = init_dbias ? init_dbias[o] : 0.0, a = fabs(s);
        for (int t = 0; t < BT; t++) {
            s += dp[(size_t)t * OC + o];
            a += adp[(size_t)t * OC + o];
        }
        g->dbias[o] = s;
        g->a_dbias[o] = a;
    }
}

static grads_ref_t grads_alloc(int IC, int OC, int BT)
{
    grads_ref_t g;
    g.dinp = malloc((size_t)IC * BT * sizeof(double));
    g.a_dinp = malloc((size_t)IC * BT * sizeof(double));
    g.dW = malloc((size_t)IC * OC * sizeof(double));
    g.a_dW = malloc((size_t)IC * OC * sizeof(double));
    g.dbias = malloc((size_t)OC * sizeof(double));
    g.a_dbias = malloc((size_t)OC * sizeof(double));
    return g;
}

static void grads_free(grads_ref_t *g)
{
    free(g->dinp); free(g->a_dinp); free(g->dW); free(g->a_dW); free(g->dbias); free(g->a_dbias);
}

/* Element (b*NH + h, r, t) of head part p <-> feature p*C + h*hd + r of token
 * b*T + t in a feature-major [nparts*C, B*T] array. */
typedef struct { int B, T, NH, hd, nparts; } heads_shape_t;

static size_t head_index(heads_shape_t s, int z, int r, int t) { return ((size_t)z * s.T + t) * s.hd + r; }
static size_t flat_index(heads_shape_t s, int p, int z, int r, int t)
{
    int C = s.NH * s.hd, b = z / s.NH, h = z % s.NH;
    return (size_t)(b * s.T + t) * (s.nparts * C) + p * C + h * s.hd + r;
}

static void heads_to_flat(heads_shape_t s, int p, const float *h, float *flat)
{
    for (int z = 0; z < s.B * s.NH; z++)
        for (int t = 0; t < s.T; t++)
            for (int r = 0; r < s.hd; r++)
                flat[flat_index(s, p, z, r, t)] = h[head_index(s, z, r, t)];
}

static void flat_to_heads(heads_shape_t s, int p, const double *flat, double *h)
{
    for (int z = 0; z < s.B * s.NH; z++)
        for (int t = 0; t < s.T; t++)
            for (int r = 0; r < s.hd; r++)
                h[head_index(s, z, r, t)] = flat[flat_index(s, p, z, r, t)];
}

/* ---- comparison --------------------------------------------------------------- */

/* Float32 sums of k terms err by at most about (k + 2) eps sum|terms|: the
 * error, in units of (k + 2) eps max|bound|, must stay below 10 (a normwise
 * bound in the way Chameleon's tests scale residuals; a lost tile, a
 * misplaced head or a wrong derivative is orders of magnitude above). */
static void expect_close(const char *what, const float *x, const double *ref, const double *absb, size_t n, int k)
{
    if (tsr_rank() != 0)
        return;
    double scale = 0.0, worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        scale = fmax(scale, absb[i]);
        double e = fabs((double)x[i] - ref[i]);
        worst = isnan(e) ? INFINITY : fmax(worst, e);
    }
    double ratio = worst / ((k + 2) * (double)FLT_EPSILON * scale + DBL_MIN);
    if (!(ratio < 10.0))
        fprintf(stderr, "  %s: %s: error %.3g = %.3g x (k+2) eps scale (k %d)\n", case_name, what, worst, ratio, k);
    CHECK(ratio < 10.0);
}

/* Compare a descriptor with a reference (gathers on rank 0). */
static void expect_desc(const char *what, tsr_desc_t *d, const double *ref, const double *absb, int k)
{
    float *x = tsr_test_gather_f32(d);
    if (tsr_rank() == 0)
        CHECK(x != NULL);
    if (x)
        expect_close(what, x, ref, absb, (size_t)d->b * d->m * d->n, k);
    free(x);
}

static void expect_tasks(uint64_t got, uint64_t want)
{
    if (tsr_size() != 1)
        return; /* under MPI a rank counts the tasks it executes */
    if (got != want)
        fprintf(stderr, "  %s: %llu tasks, expected %llu\n", case_name, (unsigned long long)got,
                (unsigned long long)want);
    CHECK(got == want);
}

static int ceil_div(int a, int b) { return (a + b - 1) / b; }
static const char *accum_name(tsr_reduction_t a) { return a == TSR_REDUCTION_REDUX ? "redux" : "ordered"; }

/* ---- forward ----------------------------------------------------------------- */

typedef struct { int IC, OC, BT; } shape_t;
typedef struct { int kb, ob, nb; } tiles_t;

static void forward_case(shape_t s, tiles_t t, int gelu, int with_bias, tsr_reduction_t accum)
{
    snprintf(case_name, sizeof case_name, "fwd IC %d OC %d BT %d tiles kb %d ob %d nb %d %s%s %s", s.IC, s.OC, s.BT,
             t.kb, t.ob, t.nb, gelu ? "gelu" : "linear", with_bias ? "+bias" : "", accum_name(accum));
    size_t nout = (size_t)s.OC * s.BT;
    float *inp = random_floats((size_t)s.IC * s.BT, 1, 1.0), *W = random_floats((size_t)s.IC * s.OC, 2, 0.5);
    float *bias = random_floats(s.OC, 3, 1.0);
    tsr_desc_t *d[5] = { upload2(inp, s.IC, s.BT, t.kb, t.nb), upload2(W, s.IC, s.OC, t.kb, t.ob),
                         with_bias ? upload2(bias, s.OC, 1, t.ob, 1) : NULL, make2(s.OC, s.BT, t.ob, t.nb),
                         gelu ? make2(s.OC, s.BT, t.ob, t.nb) : NULL };
    uint64_t before = tsr_tasks_submitted();
    int rc = gelu ? tsr_linear_gelu_forward(d[0], d[1], d[2], d[4], d[3], accum)
                  : tsr_linear_forward(d[0], d[1], d[2], d[3], accum);
    CHECK_RC(rc, TSR_SUCCESS);
    uint64_t ntasks = tsr_tasks_submitted() - before;
    int kt = ceil_div(s.IC, t.kb), tiles = ceil_div(s.OC, t.ob) * ceil_div(s.BT, t.nb);
    /* ordered (or one k tile): one fused task per (tile, k), nothing else */
    if (accum == TSR_REDUCTION_ORDERED || kt == 1)
        expect_tasks(ntasks, (uint64_t)tiles * kt);
    else
        expect_tasks(ntasks, (uint64_t)tiles * (kt + 1 + gelu));

    double *pre = malloc(nout * sizeof *pre), *absb = malloc(nout * sizeof *absb);
    double *out = malloc(nout * sizeof *out), *aout = malloc(nout * sizeof *aout);
    ref_forward(s.IC, s.OC, s.BT, inp, W, with_bias ? bias : NULL, pre, absb);
    for (size_t i = 0; i < nout; i++) {
        out[i] = gelu ? gelu_ref(pre[i]) : pre[i];
        /* gelu is 1.13-Lipschitz, and its float evaluation adds a few eps */
        aout[i] = gelu ? 1.2 * absb[i] + 4.0 * fabs(out[i]) : absb[i];
    }
    expect_desc("out", d[3], out, aout, s.IC);
    if (gelu)
        expect_desc("pre", d[4], pre, absb, s.IC);
    tsr_test_destroy(d, 5);
    free(inp); free(W); free(bias); free(pre); free(absb); free(out); free(aout);
}

static void ref_dpre(size_t n, int gelu, const float *pre, const float *dout, double *dp, double *adp);

/* The unfused building blocks: tsr_gemm, tsr_linear_bias_add, tsr_gelu_forward
 * in place, tsr_gelu_backward into another descriptor. */
static void unfused_case(shape_t s, tiles_t t)
{
    snprintf(case_name, sizeof case_name, "unfused IC %d OC %d BT %d tiles kb %d ob %d nb %d", s.IC, s.OC, s.BT, t.kb,
             t.ob, t.nb);
    size_t nout = (size_t)s.OC * s.BT;
    float *inp = random_floats((size_t)s.IC * s.BT, 1, 1.0), *W = random_floats((size_t)s.IC * s.OC, 2, 0.5);
    float *bias = random_floats(s.OC, 3, 1.0), *dout = random_floats(nout, 4, 1.0);
    tsr_desc_t *d[5] = { upload2(inp, s.IC, s.BT, t.kb, t.nb), upload2(W, s.IC, s.OC, t.kb, t.ob),
                         upload2(bias, s.OC, 1, t.ob, 1), make2(s.OC, s.BT, t.ob, t.nb),
                         upload2(dout, s.OC, s.BT, t.ob, t.nb) };
    CHECK_RC(tsr_gemm(TSR_TRANS, TSR_NOTRANS, 1.0, d[1], d[0], 0.0, d[3], TSR_REDUCTION_ORDERED), TSR_SUCCESS);
    CHECK_RC(tsr_linear_bias_add(d[2], d[3]), TSR_SUCCESS);
    float *pre = tsr_test_gather_f32(d[3]);
    CHECK_RC(tsr_gelu_backward(d[3], d[4], d[4]), TSR_SUCCESS); /* dout *= gelu'(pre), in place */
    CHECK_RC(tsr_gelu_forward(d[3], d[3]), TSR_SUCCESS);        /* in place */
    double *ref = malloc(nout * sizeof *ref), *absb = malloc(nout * sizeof *absb);
    double *out = malloc(nout * sizeof *out), *aout = malloc(nout * sizeof *aout);
    double *dp = malloc(nout * sizeof *dp), *adp = malloc(nout * sizeof *adp);
    ref_forward(s.IC, s.OC, s.BT, inp, W, bias, ref, absb);
    for (size_t i = 0; i < nout; i++) {
        out[i] = gelu_ref(ref[i]);
        aout[i] = 1.2 * absb[i] + 4.0 * fabs(out[i]);
    }
    expect_desc("gelu(W^T inp + bias)", d[3], out, aout, s.IC);
    if (pre) /* rank 0; the gather in expect_desc is collective */
        ref_dpre(nout, 1, pre, dout, dp, adp);
    expect_desc("dout * gelu'(pre)", d[4], dp, adp, 8);
    tsr_test_destroy(d, 5);
    free(inp); free(W); free(bias); free(dout); free(pre); free(ref); free(absb); free(out); free(aout);
    free(dp); free(adp);
}

static void test_forward(void)
{
    const shape_t small = { 7, 5, 6 }, odd = { 37, 29, 23 };
    const tiles_t ones = { 1, 1, 1 };
    const tiles_t configs[] = { { 8, 6, 5 }, { 64, 64, 64 }, { 16, 29, 4 }, { 1, 7, 1 } };
    /* under MPI tiny tasks cost communication latency: fewer configurations */
    size_t nconf = tsr_size() > 1 ? 2 : sizeof configs / sizeof configs[0];
    for (int a = 0; a < 2; a++) {
        tsr_reduction_t accum = a ? TSR_REDUCTION_REDUX : TSR_REDUCTION_ORDERED;
        for (int gelu = 0; gelu < 2; gelu++)
            for (int bias = 0; bias < 2; bias++) {
                forward_case(small, ones, gelu, bias, accum);
                for (size_t c = 0; c < nconf; c++)
                    forward_case(odd, configs[c], gelu, bias, accum);
            }
    }
    unfused_case(small, ones);
    unfused_case(odd, configs[0]);
    unfused_case(odd, configs[1]);
}

/* ---- backward ----------------------------------------------------------------- */

enum { WANT_DINP = 1, WANT_DW = 2, WANT_DBIAS = 4, WANT_ALL = 7 };

/* dp = dout * gelu'(pre) (gelu) or dout, with its abs bound: the float
 * evaluation of gelu' errs by a few eps relative to |dout| (1 + |pre|). */
static void ref_dpre(size_t n, int gelu, const float *pre, const float *dout, double *dp, double *adp)
{
    for (size_t i = 0; i < n; i++) {
        dp[i] = gelu ? dout[i] * gelu_grad_ref(pre[i]) : dout[i];
        adp[i] = gelu ? fabs(dout[i]) * (1.0 + fabs(pre[i])) : fabs(dout[i]);
    }
}

static void backward_case(shape_t s, tiles_t t, int gelu, int in_place, tsr_write_t mode,
                          tsr_reduction_t accum, int want)
{
    snprintf(case_name, sizeof case_name, "bwd IC %d OC %d BT %d tiles kb %d ob %d nb %d %s%s %s %s want %d", s.IC,
             s.OC, s.BT, t.kb, t.ob, t.nb, gelu ? "gelu" : "linear", in_place ? " in-place" : "",
             mode == TSR_ACCUMULATE ? "accumulate" : "overwrite", accum_name(accum), want);
    int acc = mode == TSR_ACCUMULATE;
    size_t nout = (size_t)s.OC * s.BT;
    float *inp = random_floats((size_t)s.IC * s.BT, 1, 1.0), *W = random_floats((size_t)s.IC * s.OC, 2, 0.5);
    float *dout = random_floats(nout, 4, 1.0), *pre = random_floats(nout, 5, 2.0);
    float *g0_dinp = random_floats((size_t)s.IC * s.BT, 11, 1.0), *g0_dW = random_floats((size_t)s.IC * s.OC, 12, 1.0);
    float *g0_dbias = random_floats(s.OC, 13, 1.0);
    enum { I, WW, DOUT, PRE, DPRE, DINP, DW, DB, ND };
    tsr_desc_t *d[ND] = { 0 };
    d[I] = upload2(inp, s.IC, s.BT, t.kb, t.nb);
    d[WW] = upload2(W, s.IC, s.OC, t.kb, t.ob);
    d[DOUT] = upload2(dout, s.OC, s.BT, t.ob, t.nb);
    if (gelu) {
        d[PRE] = upload2(pre, s.OC, s.BT, t.ob, t.nb);
        d[DPRE] = in_place ? NULL : make2(s.OC, s.BT, t.ob, t.nb);
    }
    /* accumulate: the gradients start from g0 (overwrite: from garbage) */
    if (want & WANT_DINP)
        d[DINP] = upload2(g0_dinp, s.IC, s.BT, t.kb, t.nb);
    if (want & WANT_DW)
        d[DW] = upload2(g0_dW, s.IC, s.OC, t.kb, t.ob);
    if (want & WANT_DBIAS)
        d[DB] = upload2(g0_dbias, s.OC, 1, t.ob, 1);
    tsr_desc_t *dpre = in_place ? d[DOUT] : d[DPRE];
    uint64_t before = tsr_tasks_submitted();
    int rc = gelu ? tsr_linear_gelu_backward(d[I], d[WW], d[PRE], d[DOUT], dpre, d[DINP], d[DW], d[DB], mode, mode,
                                             accum)
                  : tsr_linear_backward(d[I], d[WW], d[DOUT], d[DINP], d[DW], d[DB], mode, mode, accum);
    CHECK_RC(rc, TSR_SUCCESS);
    uint64_t ntasks = tsr_tasks_submitted() - before;
    int it = ceil_div(s.IC, t.kb), ot = ceil_div(s.OC, t.ob), nt = ceil_div(s.BT, t.nb);
    if (accum == TSR_REDUCTION_ORDERED) {
        /* one dpre task per tile; dbias rides in the dW tasks when there are some */
        uint64_t want_tasks = (uint64_t)gelu * ot * nt + (want & WANT_DINP ? (uint64_t)it * nt * ot : 0) +
                              (want & WANT_DW ? (uint64_t)it * ot * nt : (want & WANT_DBIAS ? (uint64_t)ot * nt : 0));
        expect_tasks(ntasks, want_tasks);
    }

    double *dp = malloc(nout * sizeof *dp), *adp = malloc(nout * sizeof *adp);
    ref_dpre(nout, gelu, pre, dout, dp, adp);
    grads_ref_t g = grads_alloc(s.IC, s.OC, s.BT);
    ref_backward(s.IC, s.OC, s.BT, inp, W, dp, adp, acc ? g0_dinp : NULL, acc ? g0_dW : NULL, acc ? g0_dbias : NULL,
                 &g);
    int extra = gelu ? 8 : 0; /* the few eps of gelu' in every term */
    if (gelu)
        expect_desc("dpre", dpre, dp, adp, 8);
    if (want & WANT_DINP)
        expect_desc("dinp", d[DINP], g.dinp, g.a_dinp, s.OC + extra);
    if (want & WANT_DW)
        expect_desc("dW", d[DW], g.dW, g.a_dW, s.BT + extra);
    if (want & WANT_DBIAS)
        expect_desc("dbias", d[DB], g.dbias, g.a_dbias, s.BT + extra);
    grads_free(&g);
    tsr_test_destroy(d, ND);
    free(inp); free(W); free(dout); free(pre); free(g0_dinp); free(g0_dW); free(g0_dbias); free(dp); free(adp);
}

static void test_backward(void)
{
    const shape_t small = { 7, 5, 6 }, odd = { 37, 29, 23 };
    const tiles_t ones = { 1, 1, 1 };
    const tiles_t configs[] = { { 8, 6, 5 }, { 64, 64, 64 }, { 37, 4, 23 }, { 1, 7, 1 } };
    size_t nconf = tsr_size() > 1 ? 2 : sizeof configs / sizeof configs[0];
    for (int a = 0; a < 2; a++) {
        tsr_reduction_t accum = a ? TSR_REDUCTION_REDUX : TSR_REDUCTION_ORDERED;
        for (int gelu = 0; gelu < 2; gelu++)
            for (int m = 0; m < 2; m++) {
                tsr_write_t mode = m ? TSR_ACCUMULATE : TSR_OVERWRITE;
                int in_place = gelu && m; /* dpre in place of dout in half the GeLU cases */
                backward_case(small, ones, gelu, in_place, mode, accum, WANT_ALL);
                for (size_t c = 0; c < nconf; c++)
                    backward_case(odd, configs[c], gelu, in_place, mode, accum, WANT_ALL);
            }
        /* some gradients only: dbias without dW runs its own row-sum tasks */
        backward_case(odd, configs[0], 0, 0, TSR_ACCUMULATE, accum, WANT_DBIAS);
        backward_case(odd, configs[0], 1, 0, TSR_OVERWRITE, accum, WANT_DINP);
        backward_case(odd, configs[0], 0, 0, TSR_OVERWRITE, accum, WANT_DW | WANT_DBIAS);
    }
}

/* ---- heads: QKV and attention projection ------------------------------------------ */

/* kb: tile of C (inp features / W rows), ob: tile of W's columns (output
 * features), nb: token tile; hbb x hmb x hnb: the 3D tiles. */
typedef struct { int kb, ob, nb, hbb, hmb, hnb, fused; } heads_tiles_t;

static void heads_case_name(const char *what, heads_shape_t s, heads_tiles_t t, tsr_reduction_t accum,
                            tsr_write_t mode)
{
    snprintf(case_name, sizeof case_name,
             "%s B %d T %d NH %d hd %d tiles kb %d ob %d nb %d heads %dx%dx%d (%s) %s %s", what, s.B, s.T, s.NH,
             s.hd, t.kb, t.ob, t.nb, t.hbb, t.hmb, t.hnb, t.fused ? "fused" : "fallback", accum_name(accum),
             mode == TSR_ACCUMULATE ? "accumulate" : "overwrite");
}

static void qkv_forward_case(heads_shape_t s, heads_tiles_t t, tsr_reduction_t accum)
{
    heads_case_name("qkv fwd", s, t, accum, TSR_OVERWRITE);
    int C = s.NH * s.hd, BT = s.B * s.T, C3 = 3 * C;
    size_t nh = (size_t)BT * C;
    float *inp = random_floats((size_t)C * BT, 21, 1.0), *W = random_floats((size_t)C * C3, 22, 0.5);
    float *bias = random_floats(C3, 23, 1.0);
    tsr_desc_t *d[6] = { upload2(inp, C, BT, t.kb, t.nb), upload2(W, C, C3, t.kb, t.ob),
                         upload2(bias, C3, 1, t.ob, 1) };
    for (int p = 0; p < 3; p++)
        d[3 + p] = make3(s.B * s.NH, s.hd, s.T, t.hbb, t.hmb, t.hnb);
    CHECK(tsr_linear_qkv_fusable(d[0], d[1], d[3]) == t.fused);
    uint64_t before = tsr_tasks_submitted();
    CHECK_RC(tsr_linear_qkv_forward(d[0], d[1], d[2], d[3], d[4], d[5], accum), TSR_SUCCESS);
    uint64_t ntasks = tsr_tasks_submitted() - before;
    int kt = ceil_div(C, t.kb);
    /* fused: exactly the GEMM tasks, no reshape task */
    if (t.fused && (accum == TSR_REDUCTION_ORDERED || kt == 1))
        expect_tasks(ntasks, (uint64_t)ceil_div(C3, t.ob) * ceil_div(BT, t.nb) * kt);

    double *pre = malloc((size_t)C3 * BT * sizeof *pre), *absb = malloc((size_t)C3 * BT * sizeof *absb);
    double *h = malloc(nh * sizeof *h), *ah = malloc(nh * sizeof *ah);
    ref_forward(C, C3, BT, inp, W, bias, pre, absb);
    s.nparts = 3;
    static const char *names[3] = { "Q", "K", "V" };
    for (int p = 0; p < 3; p++) {
        flat_to_heads(s, p, pre, h);
        flat_to_heads(s, p, absb, ah);
        expect_desc(names[p], d[3 + p], h, ah, C);
    }
    tsr_test_destroy(d, 6);
    free(inp); free(W); free(bias); free(pre); free(absb); free(h); free(ah);
}

static void qkv_backward_case(heads_shape_t s, heads_tiles_t t, tsr_write_t mode, tsr_reduction_t accum)
{
    heads_case_name("qkv bwd", s, t, accum, mode);
    int C = s.NH * s.hd, BT = s.B * s.T, C3 = 3 * C, acc = mode == TSR_ACCUMULATE;
    size_t nh = (size_t)BT * C;
    s.nparts = 3;
    float *inp = random_floats((size_t)C * BT, 21, 1.0), *W = random_floats((size_t)C * C3, 22, 0.5);
    float *dflat = malloc((size_t)C3 * BT * sizeof *dflat), *dh[3];
    float *g0_dinp = random_floats((size_t)C * BT, 31, 1.0), *g0_dW = random_floats((size_t)C * C3, 32, 1.0);
    float *g0_dbias = random_floats(C3, 33, 1.0);
    tsr_desc_t *d[9] = { upload2(inp, C, BT, t.kb, t.nb), upload2(W, C, C3, t.kb, t.ob) };
    for (int p = 0; p < 3; p++) {
        dh[p] = random_floats(nh, 24 + p, 1.0);
        heads_to_flat(s, p, dh[p], dflat);
        d[2 + p] = upload3(dh[p], s.B * s.NH, s.hd, s.T, t.hbb, t.hmb, t.hnb);
    }
    d[5] = upload2(g0_dinp, C, BT, t.kb, t.nb);
    d[6] = upload2(g0_dW, C, C3, t.kb, t.ob);
    d[7] = upload2(g0_dbias, C3, 1, t.ob, 1);
    CHECK(tsr_linear_qkv_fusable(d[0], d[1], d[2]) == t.fused);
    uint64_t before = tsr_tasks_submitted();
    CHECK_RC(tsr_linear_qkv_backward(d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], mode, mode, accum),
             TSR_SUCCESS);
    uint64_t ntasks = tsr_tasks_submitted() - before;
    int it = ceil_div(C, t.kb), ot = ceil_div(C3, t.ob), nt = ceil_div(BT, t.nb);
    if (t.fused && accum == TSR_REDUCTION_ORDERED)
        expect_tasks(ntasks, 2ull * it * ot * nt);

    size_t nout = (size_t)C3 * BT;
    double *dp = malloc(nout * sizeof *dp), *adp = malloc(nout * sizeof *adp);
    ref_dpre(nout, 0, NULL, dflat, dp, adp);
    grads_ref_t g = grads_alloc(C, C3, BT);
    ref_backward(C, C3, BT, inp, W, dp, adp, acc ? g0_dinp : NULL, acc ? g0_dW : NULL, acc ? g0_dbias : NULL, &g);
    expect_desc("dinp", d[5], g.dinp, g.a_dinp, C3);
    expect_desc("dW", d[6], g.dW, g.a_dW, BT);
    expect_desc("dbias", d[7], g.dbias, g.a_dbias, BT);
    grads_free(&g);
    tsr_test_destroy(d, 9);
    for (int p = 0; p < 3; p++)
        free(dh[p]);
    free(inp); free(W); free(dflat); free(g0_dinp); free(g0_dW); free(g0_dbias); free(dp); free(adp);
}

static void attproj_forward_case(heads_shape_t s, heads_tiles_t t, tsr_reduction_t accum)
{
    heads_case_name("attproj fwd", s, t, accum, TSR_OVERWRITE);
    int C = s.NH * s.hd, BT = s.B * s.T;
    size_t n = (size_t)C * BT;
    s.nparts = 1;
    float *y = random_floats(n, 41, 1.0), *W = random_floats((size_t)C * C, 42, 0.5);
    float *bias = random_floats(C, 43, 1.0), *yflat = malloc(n * sizeof *yflat);
    heads_to_flat(s, 0, y, yflat);
    tsr_desc_t *d[4] = { upload3(y, s.B * s.NH, s.hd, s.T, t.hbb, t.hmb, t.hnb), upload2(W, C, C, t.kb, t.ob),
                         upload2(bias, C, 1, t.ob, 1), make2(C, BT, t.ob, t.nb) };
    CHECK(tsr_linear_attproj_fusable(d[0], d[1], d[3]) == t.fused);
    uint64_t before = tsr_tasks_submitted();
    CHECK_RC(tsr_linear_attproj_forward(d[0], d[1], d[2], d[3], accum), TSR_SUCCESS);
    uint64_t ntasks = tsr_tasks_submitted() - before;
    int kt = ceil_div(C, t.kb);
    if (t.fused && (accum == TSR_REDUCTION_ORDERED || kt == 1))
        expect_tasks(ntasks, (uint64_t)ceil_div(C, t.ob) * ceil_div(BT, t.nb) * kt);
    double *out = malloc(n * sizeof *out), *absb = malloc(n * sizeof *absb);
    ref_forward(C, C, BT, yflat, W, bias, out, absb);
    expect_desc("out", d[3], out, absb, C);
    tsr_test_destroy(d, 4);
    free(y); free(W); free(bias); free(yflat); free(out); free(absb);
}

static void attproj_backward_case(heads_shape_t s, heads_tiles_t t, tsr_write_t mode, tsr_reduction_t accum)
{
    heads_case_name("attproj bwd", s, t, accum, mode);
    int C = s.NH * s.hd, BT = s.B * s.T, acc = mode == TSR_ACCUMULATE;
    size_t n = (size_t)C * BT;
    s.nparts = 1;
    float *y = random_floats(n, 41, 1.0), *W = random_floats((size_t)C * C, 42, 0.5);
    float *dout = random_floats(n, 44, 1.0), *yflat = malloc(n * sizeof *yflat);
    float *g0_dy = random_floats(n, 51, 1.0), *g0_dW = random_floats((size_t)C * C, 52, 1.0);
    float *g0_dbias = random_floats(C, 53, 1.0), *g0_flat = malloc(n * sizeof *g0_flat);
    heads_to_flat(s, 0, y, yflat);
    heads_to_flat(s, 0, g0_dy, g0_flat);
    int h3[3] = { t.hbb, t.hmb, t.hnb };
    tsr_desc_t *d[6] = { upload3(y, s.B * s.NH, s.hd, s.T, h3[0], h3[1], h3[2]), upload2(W, C, C, t.kb, t.ob),
                         upload2(dout, C, BT, t.ob, t.nb), upload3(g0_dy, s.B * s.NH, s.hd, s.T, h3[0], h3[1], h3[2]),
                         upload2(g0_dW, C, C, t.kb, t.ob), upload2(g0_dbias, C, 1, t.ob, 1) };
    CHECK(tsr_linear_attproj_fusable(d[0], d[1], d[2]) == t.fused);
    uint64_t before = tsr_tasks_submitted();
    CHECK_RC(tsr_linear_attproj_backward(d[0], d[1], d[2], d[3], d[4], d[5], mode, mode, accum), TSR_SUCCESS);
    uint64_t ntasks = tsr_tasks_submitted() - before;
    int it = ceil_div(C, t.kb), ot = ceil_div(C, t.ob), nt = ceil_div(BT, t.nb);
    if (t.fused && accum == TSR_REDUCTION_ORDERED)
        expect_tasks(ntasks, 2ull * it * ot * nt);

    double *dp = malloc(n * sizeof *dp), *adp = malloc(n * sizeof *adp);
    double *dyh = malloc(n * sizeof *dyh), *adyh = malloc(n * sizeof *adyh);
    ref_dpre(n, 0, NULL, dout, dp, adp);
    grads_ref_t g = grads_alloc(C, C, BT);
    ref_backward(C, C, BT, yflat, W, dp, adp, acc ? g0_flat : NULL, acc ? g0_dW : NULL, acc ? g0_dbias : NULL, &g);
    flat_to_heads(s, 0, g.dinp, dyh);
    flat_to_heads(s, 0, g.a_dinp, adyh);
    expect_desc("dY", d[3], dyh, adyh, C);
    expect_desc("dW", d[4], g.dW, g.a_dW, BT);
    expect_desc("dbias", d[5], g.dbias, g.a_dbias, BT);
    grads_free(&g);
    tsr_test_destroy(d, 6);
    free(y); free(W); free(dout); free(yflat); free(g0_dy); free(g0_dW); free(g0_dbias); free(g0_flat);
    free(dp); free(adp); free(dyh); free(adyh);
}

/* tsr_heads_split and tsr_heads_merge on any tiling (exact copies and sums):
 * split X into Q, K, V (overwrite), split it again into V, K, Q (accumulate),
 * merge Q, K, V back (overwrite) and Q alone onto a C-row X1 (accumulate). */
static void split_merge_case(heads_shape_t s, int xmb, int xnb, int bb, int mb, int nb)
{
    snprintf(case_name, sizeof case_name, "split/merge B %d T %d NH %d hd %d X tiles %dx%d heads %dx%dx%d", s.B, s.T,
             s.NH, s.hd, xmb, xnb, bb, mb, nb);
    int C = s.NH * s.hd, BT = s.B * s.T, z_count = s.B * s.NH;
    size_t nh = (size_t)C * BT;
    float *x = random_floats(3 * nh, 61, 1.0), *x1 = random_floats(nh, 62, 1.0);
    tsr_desc_t *d[6] = { upload2(x, 3 * C, BT, xmb, xnb), make3(z_count, s.hd, s.T, bb, mb, nb),
                         make3(z_count, s.hd, s.T, bb, mb, nb), make3(z_count, s.hd, s.T, bb, mb, nb),
                         make2(3 * C, BT, xmb, xnb), upload2(x1, C, BT, xmb, xnb) };
    CHECK_RC(tsr_heads_split(d[0], d[1], d[2], d[3], TSR_OVERWRITE), TSR_SUCCESS);
    CHECK_RC(tsr_heads_split(d[0], d[3], d[2], d[1], TSR_ACCUMULATE), TSR_SUCCESS);
    CHECK_RC(tsr_heads_merge(d[1], d[2], d[3], d[4], TSR_OVERWRITE), TSR_SUCCESS);
    CHECK_RC(tsr_heads_merge(d[1], NULL, NULL, d[5], TSR_ACCUMULATE), TSR_SUCCESS);
    /* now Q = xQ + xV, K = 2 xK, V = xV + xQ */
    double *ref = malloc(3 * nh * sizeof *ref), *ref1 = malloc(nh * sizeof *ref1);
    double *absb = malloc(3 * nh * sizeof *absb);
    heads_shape_t s1 = s;
    s.nparts = 3;
    s1.nparts = 1;
    for (int z = 0; z < z_count; z++)
        for (int t = 0; t < s.T; t++)
            for (int r = 0; r < s.hd; r++) {
                double xq = x[flat_index(s, 0, z, r, t)], xk = x[flat_index(s, 1, z, r, t)];
                double xv = x[flat_index(s, 2, z, r, t)];
                ref[flat_index(s, 0, z, r, t)] = xq + xv;
                ref[flat_index(s, 1, z, r, t)] = 2.0 * xk;
                ref[flat_index(s, 2, z, r, t)] = xv + xq;
                ref1[flat_index(s1, 0, z, r, t)] = x1[flat_index(s1, 0, z, r, t)] + xq + xv;
            }
    for (size_t i = 0; i < 3 * nh; i++)
        absb[i] = 4.0; /* sums of at most 3 values below 1 */
    expect_desc("merged X", d[4], ref, absb, 1);
    expect_desc("merged onto X1", d[5], ref1, absb, 1);
    tsr_test_destroy(d, 6);
    free(x); free(x1); free(ref); free(ref1); free(absb);
}

/* The per-head GEMM kernel (the codelets' way when no workspace can be
 * allocated) on each cut dimension, with head-layout operands, against a
 * plain loop: C = op(A) op(B) + 0.5 C with 4 heads of 3 along the cut. */
static void test_chunked_gemm(void)
{
    const int hd = 3, nh = 4, L = hd * nh;
    for (int dim = TSR_CHUNK_M; dim <= TSR_CHUNK_K; dim++) {
        snprintf(case_name, sizeof case_name, "chunked gemm along %c", "?MNK"[dim]);
        int m = dim == TSR_CHUNK_M ? L : 5, n = dim == TSR_CHUNK_N ? L : 7, k = dim == TSR_CHUNK_K ? L : 6;
        tsr_trans_t ta = dim == TSR_CHUNK_N ? TSR_NOTRANS : TSR_TRANS;
        tsr_trans_t tb = dim == TSR_CHUNK_N ? TSR_TRANS : TSR_NOTRANS;
        float *A = random_floats((size_t)m * k, 81, 1.0), *B = random_floats((size_t)k * n, 82, 1.0);
        float *C = random_floats((size_t)m * n, 83, 1.0);
        double *ref = malloc((size_t)m * n * sizeof *ref), *absb = malloc((size_t)m * n * sizeof *absb);
        float *got = malloc((size_t)m * n * sizeof *got);
        /* storage index of op(A)(i, l), op(B)(l, j), C(i, j) */
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                size_t ci = dim == TSR_CHUNK_M ? (size_t)(i / hd) * hd * n + (size_t)j * hd + i % hd
                                               : (size_t)j * m + i;
                double sum = 0.5 * C[ci], a = fabs(0.5 * C[ci]);
                for (int l = 0; l < k; l++) {
                    size_t ai = ta == TSR_TRANS ? (size_t)i * k + l : (size_t)l * m + i;
                    size_t bi = dim == TSR_CHUNK_M   ? (size_t)j * k + l
                                : dim == TSR_CHUNK_K ? (size_t)(l / hd) * hd * n + (size_t)j * hd + l % hd
                                                     : (size_t)(j / hd) * hd * k + (size_t)l * hd + j % hd;
                    sum += (double)A[ai] * B[bi];
                    a += fabs((double)A[ai] * B[bi]);
                }
                ref[(size_t)j * m + i] = sum;
                absb[(size_t)j * m + i] = a;
            }
        /* M: A^T's rows are A's columns (cut every hd*k), C in heads; K: A^T's
         * columns are A's rows (cut every hd), B in heads; N: B^T's columns
         * are B's rows, in heads, C's columns cut every hd*m */
        size_t a_cut = dim == TSR_CHUNK_M ? (size_t)hd * k : dim == TSR_CHUNK_K ? (size_t)hd : 0;
        size_t b_cut = dim == TSR_CHUNK_K ? (size_t)hd * n : dim == TSR_CHUNK_N ? (size_t)hd * k : 0;
        size_t c_cut = dim == TSR_CHUNK_M ? (size_t)hd * n : dim == TSR_CHUNK_N ? (size_t)hd * m : 0;
        tsr_chunked_t ca = { A, ta == TSR_TRANS ? k : m, a_cut };
        tsr_chunked_t cb = { B, dim == TSR_CHUNK_M ? k : hd, b_cut };
        tsr_chunked_t cc = { C, dim == TSR_CHUNK_M ? hd : m, c_cut };
        tsr_cpu_gemm_chunked(ta, tb, m, n, k, (tsr_chunk_dim_t)dim, hd, 1.0f, ca, cb, 0.5f, cc, 1);
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++)
                got[(size_t)j * m + i] =
                    C[dim == TSR_CHUNK_M ? (size_t)(i / hd) * hd * n + (size_t)j * hd + i % hd : (size_t)j * m + i];
        expect_close("C", got, ref, absb, (size_t)m * n, k);
        free(A); free(B); free(C); free(ref); free(absb); free(got);
    }
}

static void test_heads(void)
{
    test_chunked_gemm();
    const heads_shape_t s = { 2, 10, 3, 4, 3 }; /* C = 12, B*T = 20 */
    /* under MPI: the first four of each list */
    const heads_tiles_t qkv[] = {
        { 5, 4, 5, 1, 4, 5, 1 },     /* fused: one head per tile, kb does not divide C */
        { 12, 12, 10, 3, 4, 10, 1 }, /* fused: a whole batch's heads per tile, one k tile */
        { 5, 5, 3, 2, 3, 4, 0 },     /* fallback: nothing lines up */
        { 12, 36, 20, 6, 4, 10, 0 }, /* fallback: single tiles (a 36-row tile straddles Q, K, V) */
        { 1, 12, 2, 3, 4, 2, 1 },    /* fused: 1-wide k tiles */
        { 1, 1, 1, 1, 1, 1, 0 },     /* fallback: 1-wide everything */
        { 5, 4, 5, 2, 4, 5, 0 },     /* fallback: 2 heads per 3D tile, 1 per GEMM tile */
    };
    const heads_tiles_t proj[] = {
        { 4, 5, 5, 1, 4, 5, 1 },     /* fused: one head per k tile, ob does not divide C */
        { 12, 12, 10, 3, 4, 10, 1 }, /* fused: single k and output tiles */
        { 5, 7, 3, 2, 3, 4, 0 },     /* fallback */
        { 12, 12, 20, 6, 4, 20, 0 }, /* fallback: single tiles (token tile spans batches) */
        { 4, 1, 1, 1, 4, 1, 1 },     /* fused: 1-wide output and token tiles */
        { 1, 1, 1, 1, 1, 1, 0 },     /* fallback: 1-wide */
    };
    size_t nqkv = tsr_size() > 1 ? 4 : sizeof qkv / sizeof qkv[0];
    size_t nproj = tsr_size() > 1 ? 4 : sizeof proj / sizeof proj[0];
    for (int a = 0; a < 2; a++) {
        tsr_reduction_t accum = a ? TSR_REDUCTION_REDUX : TSR_REDUCTION_ORDERED;
        for (size_t c = 0; c < nqkv; c++) {
            qkv_forward_case(s, qkv[c], accum);
            qkv_backward_case(s, qkv[c], c % 2 ? TSR_ACCUMULATE : TSR_OVERWRITE, accum);
        }
        for (size_t c = 0; c < nproj; c++) {
            attproj_forward_case(s, proj[c], accum);
            attproj_backward_case(s, proj[c], c % 2 ? TSR_OVERWRITE : TSR_ACCUMULATE, accum);
        }
    }
    /* one batch: token tiles need not divide T */
    const heads_shape_t s1 = { 1, 7, 2, 3, 3 }; /* C = 6, B*T = 7 */
    const heads_tiles_t qkv1[] = { { 4, 3, 3, 1, 3, 3, 1 }, { 6, 6, 7, 2, 3, 7, 1 }, { 4, 3, 3, 1, 3, 2, 0 } };
    const heads_tiles_t proj1[] = { { 3, 4, 3, 1, 3, 3, 1 }, { 6, 6, 7, 2, 3, 7, 1 }, { 3, 4, 3, 1, 3, 2, 0 } };
    for (size_t c = 0; c < 3; c++) {
        tsr_reduction_t accum = c % 2 ? TSR_REDUCTION_REDUX : TSR_REDUCTION_ORDERED;
        qkv_forward_case(s1, qkv1[c], accum);
        qkv_backward_case(s1, qkv1[c], TSR_OVERWRITE, accum);
        attproj_forward_case(s1, proj1[c], accum);
        attproj_backward_case(s1, proj1[c], TSR_ACCUMULATE, accum);
    }
    split_merge_case(s, 5, 3, 2, 3, 4);
    split_merge_case(s, 1, 1, 1, 1, 1);
    split_merge_case(s, 36, 20, 6, 4, 10);
}

/* ---- finite differences ----------------------------------------------------------- */

/* L = sum_{o,t} G[t][o] gelu(pre[t][o]), pre = bias + W^T inp, in double. */
static double fd_loss(int IC, int OC, int BT, const double *inp, const double *W, const double *bias, const float *G)
{
    double L = 0.0;
    for (int t = 0; t < BT; t++)
        for (int o = 0; o < OC; o++) {
            double p = bias[o];
            for (int i = 0; i < IC; i++)
                p += inp[(size_t)t * IC + i] * W[(size_t)o * IC + i];
            L += G[(size_t)t * OC + o] * gelu_ref(p);
        }
    return L;
}

/* fd_loss's arguments, for tsr_test_central_diff. */
typedef struct {
    int IC, OC, BT;
    const double *inp, *W, *bias;
    const float *G;
} fd_loss_args_t;

static double fd_loss_of(void *arg)
{
    const fd_loss_args_t *a = arg;
    return fd_loss(a->IC, a->OC, a->BT, a->inp, a->W, a->bias, a->G);
}

/* Central difference of L along x[idx] (x is one of inp, W, bias). */
static double fd_grad(int IC, int OC, int BT, double *inp, double *W, double *bias, const float *G, double *x,
                      size_t idx)
{
    fd_loss_args_t a = { IC, OC, BT, inp, W, bias, G };
    return tsr_test_central_diff(&x[idx], 1e-3, fd_loss_of, &a);
}

/* Tessera's float32 gradient g against the finite difference fd. Error
 * budget: the central difference errs by h^2/6 |L'''| ~ 1e-7 (h = 1e-3,
 * O(1) data, gelu''' bounded) plus 1e-16 |L| / h rounding; the float32
 * backward by ~ (BT + 8) eps sum|terms| ~ 1e-5 at most here. A tolerance of
 * 1e-4 + 1e-3 |fd| sits well above both, and far below the O(0.1) errors of
 * a wrong GeLU derivative or a missing term. */
static void expect_fd(const char *what, double g, double fd)
{
    double tol = 1e-4 + 1e-3 * fabs(fd);
    if (!(fabs(g - fd) <= tol))
        fprintf(stderr, "  %s: %s: backward %.8g, finite difference %.8g\n", case_name, what, g, fd);
    CHECK(fabs(g - fd) <= tol);
}

static void fd_case(tiles_t t, tsr_reduction_t accum)
{
    const int IC = 9, OC = 7, BT = 5;
    snprintf(case_name, sizeof case_name, "fd IC %d OC %d BT %d tiles kb %d ob %d nb %d %s", IC, OC, BT, t.kb, t.ob,
             t.nb, accum_name(accum));
    float *inp = random_floats((size_t)IC * BT, 71, 1.0), *W = random_floats((size_t)IC * OC, 72, 0.7);
    float *bias = random_floats(OC, 73, 1.0), *G = random_floats((size_t)OC * BT, 74, 1.0);
    tsr_desc_t *d[9] = { upload2(inp, IC, BT, t.kb, t.nb), upload2(W, IC, OC, t.kb, t.ob),
                         upload2(bias, OC, 1, t.ob, 1),
                         make2(OC, BT, t.ob, t.nb), make2(OC, BT, t.ob, t.nb), upload2(G, OC, BT, t.ob, t.nb),
                         make2(IC, BT, t.kb, t.nb), make2(IC, OC, t.kb, t.ob), make2(OC, 1, t.ob, 1) };
    /* Tessera: forward (pre, out), then backward with dout = G, dpre in place */
    CHECK_RC(tsr_linear_gelu_forward(d[0], d[1], d[2], d[3], d[4], accum), TSR_SUCCESS);
    CHECK_RC(tsr_linear_gelu_backward(d[0], d[1], d[3], d[5], d[5], d[6], d[7], d[8], TSR_OVERWRITE,
                                      TSR_OVERWRITE, accum),
             TSR_SUCCESS);
    float *dinp = tsr_test_gather_f32(d[6]), *dW = tsr_test_gather_f32(d[7]), *dbias = tsr_test_gather_f32(d[8]);
    if (tsr_rank() == 0) {
        double *xi = malloc((size_t)IC * BT * sizeof *xi), *xw = malloc((size_t)IC * OC * sizeof *xw);
        double *xb = malloc(OC * sizeof *xb);
        for (int i = 0; i < IC * BT; i++)
            xi[i] = inp[i];
        for (int i = 0; i < IC * OC; i++)
            xw[i] = W[i];
        for (int i = 0; i < OC; i++)
            xb[i] = bias[i];
        for (int o = 0; o < OC; o++)
            expect_fd("dbias", dbias[o], fd_grad(IC, OC, BT, xi, xw, xb, G, xb, o));
        for (size_t i = 0; i < (size_t)IC * OC; i += 4)
            expect_fd("dW", dW[i], fd_grad(IC, OC, BT, xi, xw, xb, G, xw, i));
        for (size_t i = 0; i < (size_t)IC * BT; i += 3)
            expect_fd("dinp", dinp[i], fd_grad(IC, OC, BT, xi, xw, xb, G, xi, i));
        free(xi); free(xw); free(xb);
    }
    tsr_test_destroy(d, 9);
    free(inp); free(W); free(bias); free(G); free(dinp); free(dW); free(dbias);
}

/* The GeLU kernels against the double formula, out to where float overflows
 * inside them: no NaN, and errors at the float rounding level. Relative
 * accuracy holds down to tiny values (the kernels avoid the cancellation of
 * 1 + tanh(u) for negative u); only the rounding of the argument u, which
 * exp turns into a relative error of about 2 |u| eps, grows with |x|. */
static void test_gelu_kernels(void)
{
    snprintf(case_name, sizeof case_name, "gelu kernels");
    double worst_f = 0.0, worst_g = 0.0;
    for (int i = -6000; i <= 6000; i++) {
        float x = i / 100.0f;
        double r = gelu_ref_stable(x), rg = gelu_grad_ref(x);
        double u = fabs(GELU_SCALING_FACTOR * (x + 0.044715 * x * x * x));
        if (fabs(r) > 1e-30)
            worst_f = fmax(worst_f, fabs(tsr_gelu(x) - r) / (fabs(r) * FLT_EPSILON * (1.0 + u)));
        worst_g = fmax(worst_g, fabs(tsr_gelu_grad(x) - rg) / ((1.0 + fabs(x)) * FLT_EPSILON));
    }
    /* a few float operations: a few eps (units above: eps (1 + |u|), eps (1 + |x|)) */
    if (!(worst_f < 16 && worst_g < 16))
        fprintf(stderr, "  %s: relative error %.3g, gradient error %.3g (in eps units)\n", case_name, worst_f,
                worst_g);
    CHECK(worst_f < 16);
    CHECK(worst_g < 16);
    const float big[] = { 1e3f, 1e6f, 1e12f };
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        CHECK(tsr_gelu(big[i]) == big[i] && tsr_gelu(-big[i]) == 0.0f);
        CHECK(tsr_gelu_grad(big[i]) == 1.0f && tsr_gelu_grad(-big[i]) == 0.0f);
    }
}

static void test_fd(void)
{
    test_gelu_kernels();
    const tiles_t configs[] = { { 4, 3, 2 }, { 1, 1, 1 }, { 9, 7, 5 } };
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
        fd_case(configs[c], TSR_REDUCTION_ORDERED);
        fd_case(configs[c], TSR_REDUCTION_REDUX);
    }
}

/* ---- bad arguments ------------------------------------------------------------------- */

static uint64_t err_before; /* tasks submitted before the bad calls */

/* rc must be `code`, and still no task submitted */
static void expect_err(const char *what, int rc, int code)
{
    int ok = rc == code && tsr_tasks_submitted() == err_before;
    if (!ok)
        fprintf(stderr, "  errors: %s: got %d (%s), expected %d, %llu tasks\n", what, rc, tsr_strerror(rc), code,
                (unsigned long long)(tsr_tasks_submitted() - err_before));
    CHECK(ok);
}

static void test_errors(void)
{
    int verbose = tsr_get_verbose();
    tsr_set_verbose(0); /* the expected failures would print errors */
    const tsr_reduction_t O = TSR_REDUCTION_ORDERED;
    const tsr_write_t OW = TSR_OVERWRITE;
    /* good: IC 6, OC 8, BT 5, tiles kb 4, ob 3, nb 2 */
    tsr_desc_t *inp = make2(6, 5, 4, 2), *W = make2(6, 8, 4, 3), *bias = make2(8, 1, 3, 1), *out = make2(8, 5, 3, 2);
    tsr_desc_t *pre = make2(8, 5, 3, 2), *dinp = make2(6, 5, 4, 2), *dW = make2(6, 8, 4, 3);
    tsr_desc_t *inp_tile = make2(6, 5, 3, 2), *out_nb = make2(8, 5, 3, 3), *bias_len = make2(7, 1, 3, 1);
    tsr_desc_t *inp3 = make3(2, 6, 5, 1, 4, 2), *inp_short = make2(5, 5, 4, 2);
    tsr_desc_t *dbias_tile = make2(8, 1, 2, 1), *inp64 = NULL;
    CHECK_RC(tsr_desc_create(&inp64, TSR_FLOAT64, 1, 6, 5, 1, 4, 2, &grid), TSR_SUCCESS);
    err_before = tsr_tasks_submitted();

    expect_err("fwd NULL", tsr_linear_forward(NULL, W, bias, out, O), TSR_EINVAL);
    expect_err("fwd accum", tsr_linear_forward(inp, W, bias, out, (tsr_reduction_t)5), TSR_EINVAL);
    expect_err("fwd float64", tsr_linear_forward(inp64, W, bias, out, O), TSR_EDTYPE);
    expect_err("fwd IC", tsr_linear_forward(inp_short, W, bias, out, O), TSR_ESHAPE);
    expect_err("fwd 3D inp", tsr_linear_forward(inp3, W, bias, out, O), TSR_ESHAPE);
    expect_err("fwd bias", tsr_linear_forward(inp, W, bias_len, out, O), TSR_ESHAPE);
    expect_err("fwd kb", tsr_linear_forward(inp_tile, W, bias, out, O), TSR_ETILE);
    expect_err("fwd nb", tsr_linear_forward(inp, W, bias, out_nb, O), TSR_ETILE);
    expect_err("fwd out = pre", tsr_linear_gelu_forward(inp, W, bias, out, out, O), TSR_EINVAL);
    expect_err("fwd no pre", tsr_linear_gelu_forward(inp, W, bias, NULL, out, O), TSR_EINVAL);
    expect_err("bwd nothing wanted", tsr_linear_backward(inp, W, out, NULL, NULL, NULL, OW, OW, O), TSR_EINVAL);
    expect_err("bwd mode", tsr_linear_backward(inp, W, out, dinp, dW, NULL, (tsr_write_t)2, OW, O), TSR_EINVAL);
    expect_err("bwd dinp = inp", tsr_linear_backward(inp, W, out, inp, dW, NULL, OW, OW, O), TSR_EINVAL);
    expect_err("bwd dW shape", tsr_linear_backward(inp, W, out, dinp, pre, NULL, OW, OW, O), TSR_ESHAPE);
    expect_err("bwd dbias tiles", tsr_linear_backward(inp, W, out, dinp, dW, dbias_tile, OW, OW, O), TSR_ETILE);
    expect_err("gelu bwd dpre = pre", tsr_linear_gelu_backward(inp, W, pre, out, pre, dinp, dW, NULL, OW, OW, O),
               TSR_EINVAL);
    expect_err("gelu bwd pre shape", tsr_linear_gelu_backward(inp, W, dinp, out, out, NULL, dW, NULL, OW, OW, O),
               TSR_ESHAPE);
    expect_err("bias_add", tsr_linear_bias_add(bias_len, out), TSR_ESHAPE);
    expect_err("gelu tiles", tsr_gelu_forward(pre, out_nb), TSR_ETILE);
    expect_err("gelu bwd alias", tsr_gelu_backward(pre, out, pre), TSR_EINVAL);

    /* heads: C = 6 (NH 3, hd 2), B 1, T 5 */
    tsr_desc_t *Wq = make2(6, 18, 4, 2), *q = make3(3, 2, 5, 1, 2, 5), *k = make3(3, 2, 5, 1, 2, 5);
    tsr_desc_t *v = make3(3, 2, 5, 1, 2, 5), *v_bad = make3(3, 2, 4, 1, 2, 5), *v_tile = make3(3, 2, 5, 3, 2, 5);
    tsr_desc_t *hd5 = make3(3, 5, 5, 1, 5, 5), *hd5k = make3(3, 5, 5, 1, 5, 5), *hd5v = make3(3, 5, 5, 1, 5, 5);
    tsr_desc_t *Wp = make2(6, 6, 2, 3), *outp = make2(6, 5, 3, 5);
    tsr_desc_t *outp_tile = make2(6, 5, 2, 5), *qkv = make2(18, 5, 6, 5);
    err_before = tsr_tasks_submitted();
    expect_err("qkv NULL V", tsr_linear_qkv_forward(inp, Wq, NULL, q, k, NULL, O), TSR_EINVAL);
    expect_err("qkv W not C x 3C", tsr_linear_qkv_forward(inp, W, NULL, q, k, v, O), TSR_ESHAPE);
    expect_err("qkv V shape", tsr_linear_qkv_forward(inp, Wq, NULL, q, k, v_bad, O), TSR_ESHAPE);
    expect_err("qkv V tiles", tsr_linear_qkv_forward(inp, Wq, NULL, q, k, v_tile, O), TSR_ETILE);
    expect_err("qkv hd does not divide C", tsr_linear_qkv_forward(inp, Wq, NULL, hd5, hd5k, hd5v, O), TSR_ESHAPE);
    expect_err("qkv Q = K", tsr_linear_qkv_forward(inp, Wq, NULL, q, q, v, O), TSR_EINVAL);
    expect_err("qkv bwd float64 inp", tsr_linear_qkv_backward(inp64, Wq, q, k, v, dinp, NULL, NULL, OW, OW, O),
               TSR_EDTYPE);
    expect_err("attproj out shape", tsr_linear_attproj_forward(q, Wp, NULL, out, O), TSR_ESHAPE);
    expect_err("attproj out tiles", tsr_linear_attproj_forward(q, Wp, NULL, outp_tile, O), TSR_ETILE);
    expect_err("attproj bwd dY shape", tsr_linear_attproj_backward(q, Wp, outp, v_bad, NULL, NULL, OW, OW, O),
               TSR_ESHAPE);
    expect_err("attproj bwd accum", tsr_linear_attproj_backward(q, Wp, outp, k, NULL, NULL, OW, OW, (tsr_reduction_t)-1),
               TSR_EINVAL);
    expect_err("split K without V", tsr_heads_split(out, q, k, NULL, OW), TSR_EINVAL);
    expect_err("split rows", tsr_heads_split(out, q, k, v, OW), TSR_ESHAPE);
    /* the K rows would overwrite (or be added to) the Q rows */
    expect_err("split Q = K", tsr_heads_split(qkv, q, q, v, OW), TSR_EINVAL);
    expect_err("split Q = V", tsr_heads_split(qkv, q, k, q, TSR_ACCUMULATE), TSR_EINVAL);
    expect_err("merge mode", tsr_heads_merge(q, NULL, NULL, outp, (tsr_write_t)9), TSR_EINVAL);
    CHECK(!tsr_linear_qkv_fusable(NULL, Wq, q));
    if (tsr_size() == 2) {
        tsr_dist_t rows = tsr_dist_block_cyclic(2, 1), cols = tsr_dist_block_cyclic(1, 2);
        tsr_desc_t *a = NULL, *b = NULL;
        CHECK_RC(tsr_desc_create(&a, TSR_FLOAT32, 1, 6, 5, 1, 4, 2, &rows), TSR_SUCCESS);
        CHECK_RC(tsr_desc_create(&b, TSR_FLOAT32, 1, 8, 5, 1, 3, 2, &cols), TSR_SUCCESS);
        err_before = tsr_tasks_submitted();
        expect_err("grids 2x1 vs 1x2", tsr_linear_forward(a, W, bias, b, O), TSR_EDIST);
        tsr_desc_destroy(a);
        tsr_desc_destroy(b);
    }
    /* the good calls do submit tasks */
    err_before = tsr_tasks_submitted();
    CHECK_RC(tsr_linear_forward(inp, W, bias, out, O), TSR_SUCCESS);
    CHECK_RC(tsr_linear_qkv_forward(inp, Wq, NULL, q, k, v, O), TSR_SUCCESS);
    CHECK_RC(tsr_heads_merge(q, q, v, qkv, OW), TSR_SUCCESS); /* inputs may be the same */
    CHECK_RC(tsr_wait(), TSR_SUCCESS);
    CHECK(tsr_tasks_submitted() > err_before || tsr_size() > 1);
    tsr_desc_t *all[] = { inp, W, bias, out, pre, dinp, dW, inp_tile, out_nb, bias_len, inp3, inp_short, inp64,
                          Wq, q, k, v, v_bad, v_tile, hd5, hd5k, hd5v, Wp, outp, outp_tile, dbias_tile, qkv };
    tsr_test_destroy(all, sizeof all / sizeof all[0]);
    tsr_set_verbose(verbose);
}

/* Before tsr_init: nothing is dereferenced, TSR_ENOTINIT. */
static void test_not_initialized(void)
{
    tsr_desc_t *fake = (tsr_desc_t *)16;
    CHECK_RC(tsr_linear_forward(fake, fake, NULL, fake, TSR_REDUCTION_ORDERED), TSR_ENOTINIT);
    CHECK_RC(tsr_linear_backward(fake, fake, fake, fake, NULL, NULL, TSR_OVERWRITE, TSR_OVERWRITE,
                                 TSR_REDUCTION_ORDERED),
             TSR_ENOTINIT);
    CHECK_RC(tsr_linear_qkv_forward(fake, fake, NULL, fake, fake, fake, TSR_REDUCTION_ORDERED), TSR_ENOTINIT);
    CHECK_RC(tsr_linear_attproj_backward(fake, fake, fake, fake, NULL, NULL, TSR_OVERWRITE,
                                         TSR_OVERWRITE, TSR_REDUCTION_ORDERED),
             TSR_ENOTINIT);
    CHECK_RC(tsr_heads_split(fake, fake, NULL, NULL, TSR_OVERWRITE), TSR_ENOTINIT);
    CHECK_RC(tsr_gelu_forward(fake, fake), TSR_ENOTINIT);
}

/* ---- main ------------------------------------------------------------------------------ */

static int wants(int argc, char **argv, const char *group)
{
    int any = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--P")) {
            i++;
            continue;
        }
        any = 1;
        if (!strcmp(argv[i], group))
            return 1;
    }
    return !any;
}

int main(int argc, char **argv)
{
    int P = 1;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--P") && i + 1 < argc)
            P = atoi(argv[i + 1]);
    test_not_initialized();
    tsr_config_t cfg;
    tsr_config_default(&cfg);
    if (tsr_mpi_launched())
        cfg.ncpus = 1;
    CHECK_RC(tsr_init(&cfg, &argc, &argv), TSR_SUCCESS);
    if (P < 1 || tsr_size() % P) {
        fprintf(stderr, "--P %d does not divide %d ranks\n", P, tsr_size());
        tsr_finalize();
        return 2;
    }
    grid = tsr_dist_block_cyclic(P, tsr_size() / P);
    if (wants(argc, argv, "errors"))
        test_errors();
    if (wants(argc, argv, "fwd"))
        test_forward();
    if (wants(argc, argv, "bwd"))
        test_backward();
    if (wants(argc, argv, "heads"))
        test_heads();
    if (wants(argc, argv, "fd"))
        test_fd();
    tsr_finalize();
    return tsr_check_report("test_linear");
}
