/* Encoder forward/backward against llm.c-style plain loops: shapes that do
 * not divide by the tiles, repeated tokens (scatter-add), 1-wide tiles,
 * chained tasks with many vocabulary tiles, a single tile; ordered and
 * REDUX accumulation, overwrite and accumulate; bad arguments. Under
 * mpirun the descriptors are block-cyclic over a P x (size/P) grid
 * (argument: P, default 1). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "tessera.h"
#include "tsr_check.h"
#include "tsr_expect.h"
#include "tsr_testutil.h"

enum { C = 37, V = 101, VP = 128, MAXT = 20, B = 3, T = 15, BT = B * T };

typedef struct { int mb, nb, nbv, nbp; } tiles_t;

static tsr_dist_t grid;
static int tokens[BT];
static float wte[VP * C], wpe[MAXT * C], dout[BT * C], g0_wte[VP * C], g0_wpe[MAXT * C];

static tsr_desc_t *make(tsr_dtype_t t, int m, int n, int mb, int nb)
{
    tsr_desc_t *d = NULL;
    CHECK_RC(tsr_desc_create(&d, t, 1, m, n, 1, mb, nb, &grid), TSR_SUCCESS);
    return d;
}

static void fill(float *x, int n, uint64_t seed)
{
    for (int k = 0; k < n; k++)
        x[k] = (float)tsr_random_value(seed, 0, k, 0);
}

/* Every third token is one of 0..3 (many repeats, also inside one token
 * tile); the others are spread over the vocabulary; the last is V - 1. */
static void make_tokens(void)
{
    for (int bt = 0; bt < BT; bt++)
        tokens[bt] = bt % 3 == 0 ? bt % 4 : (int)((tsr_random_value(7, 0, bt, 0) + 0.5) * V);
    tokens[BT - 1] = V - 1;
}

/* llm.c encoder_backward, in its order (sequential float sums), starting
 * from g0 (accumulate) or zero; absum/nterms: the size of the summation
 * error bound of each element. */
static void reference_backward(tsr_write_t mode, float *dwte, float *dwpe, double *abs_wte, double *abs_wpe,
                               int *n_wte, int *n_wpe)
{
    for (int k = 0; k < VP * C; k++) {
        dwte[k] = mode == TSR_ACCUMULATE ? g0_wte[k] : 0.0f;
        abs_wte[k] = fabs(dwte[k]);
        n_wte[k] = 1;
    }
    for (int k = 0; k < MAXT * C; k++) {
        dwpe[k] = mode == TSR_ACCUMULATE ? g0_wpe[k] : 0.0f;
        abs_wpe[k] = fabs(dwpe[k]);
        n_wpe[k] = 1;
    }
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *d = dout + (b * T + t) * C;
            int ix = tokens[b * T + t];
            for (int c = 0; c < C; c++) {
                dwte[ix * C + c] += d[c];
                dwpe[t * C + c] += d[c];
                abs_wte[ix * C + c] += fabs(d[c]);
                abs_wpe[t * C + c] += fabs(d[c]);
                n_wte[ix * C + c]++;
                n_wpe[t * C + c]++;
            }
        }
}

/* exact: the same summation order as the reference, bit for bit. Otherwise
 * both sums differ from the exact one by at most (n-1) u sum|terms| (the
 * standard recursive-summation bound), so from each other by twice that. */
static int grad_ok(const float *got, const float *ref, const double *absum, const int *nterms, int n, int exact)
{
    for (int k = 0; k < n; k++) {
        double err = fabs((double)got[k] - ref[k]);
        double tol = exact ? 0.0 : 2.0 * nterms[k] * FLT_EPSILON * absum[k];
        if (!(err <= tol)) {
            fprintf(stderr, "  element %d: got %.9g, expected %.9g (tolerance %.3g)\n", k, got[k], ref[k], tol);
            return 0;
        }
    }
    return 1;
}

static void check_forward(const tiles_t *tl)
{
    tsr_desc_t *out = make(TSR_FLOAT32, C, BT, tl->mb, tl->nb);
    tsr_desc_t *dwte = make(TSR_FLOAT32, C, VP, tl->mb, tl->nbv);
    tsr_desc_t *dwpe = make(TSR_FLOAT32, C, MAXT, tl->mb, tl->nbp);
    CHECK_RC(tsr_test_scatter_f32(dwte, wte), TSR_SUCCESS);
    CHECK_RC(tsr_test_scatter_f32(dwpe, wpe), TSR_SUCCESS);
    CHECK_RC(tsr_desc_fill_random(out, 99), TSR_SUCCESS); /* overwritten */
    CHECK_RC(tsr_encoder_forward(out, dwte, dwpe, tokens, B, T), TSR_SUCCESS);
    float *got = tsr_test_gather_f32(out);
    if (tsr_rank() == 0) {
        /* one float addition per element, the same as llm.c: exact */
        float ref[BT * C];
        for (int bt = 0; bt < BT; bt++)
            for (int c = 0; c < C; c++)
                ref[bt * C + c] = wte[tokens[bt] * C + c] + wpe[(bt % T) * C + c];
        double err = got ? tsr_test_max_abs_err(got, ref, BT * C) : INFINITY;
        if (err != 0.0)
            fprintf(stderr, "  forward tiles %d/%d/%d/%d: max error %g\n", tl->mb, tl->nb, tl->nbv, tl->nbp, err);
        CHECK(err == 0.0);
    }
    free(got);
    tsr_desc_destroy(out);
    tsr_desc_destroy(dwte);
    tsr_desc_destroy(dwpe);
}

static void check_backward(const tiles_t *tl, tsr_reduction_t accum, tsr_write_t mode, int with_dwpe)
{
    tsr_desc_t *dO = make(TSR_FLOAT32, C, BT, tl->mb, tl->nb);
    tsr_desc_t *dwte = make(TSR_FLOAT32, C, VP, tl->mb, tl->nbv);
    tsr_desc_t *dwpe = make(TSR_FLOAT32, C, MAXT, tl->mb, tl->nbp);
    CHECK_RC(tsr_test_scatter_f32(dO, dout), TSR_SUCCESS);
    /* garbage in the gradients: overwrite must not read it */
    CHECK_RC(tsr_test_scatter_f32(dwte, g0_wte), TSR_SUCCESS);
    CHECK_RC(tsr_test_scatter_f32(dwpe, g0_wpe), TSR_SUCCESS);
    CHECK_RC(tsr_encoder_backward(dwte, with_dwpe ? dwpe : NULL, dO, tokens, B, T, mode, accum), TSR_SUCCESS);
    float *got_wte = tsr_test_gather_f32(dwte), *got_wpe = tsr_test_gather_f32(dwpe);
    if (tsr_rank() == 0) {
        static float ref_wte[VP * C], ref_wpe[MAXT * C];
        static double abs_wte[VP * C], abs_wpe[MAXT * C];
        static int n_wte[VP * C], n_wpe[MAXT * C];
        reference_backward(mode, ref_wte, ref_wpe, abs_wte, abs_wpe, n_wte, n_wpe);
        int exact = accum == TSR_REDUCTION_ORDERED;
        int ok_wte = got_wte && grad_ok(got_wte, ref_wte, abs_wte, n_wte, VP * C, exact);
        /* without dwpe the descriptor keeps what it held */
        int ok_wpe = got_wpe && (with_dwpe ? grad_ok(got_wpe, ref_wpe, abs_wpe, n_wpe, MAXT * C, exact)
                                           : memcmp(got_wpe, g0_wpe, sizeof g0_wpe) == 0);
        if (!ok_wte || !ok_wpe)
            fprintf(stderr, "  backward tiles %d/%d/%d/%d %s %s%s: dwte %s, dwpe %s\n", tl->mb, tl->nb, tl->nbv,
                    tl->nbp, accum == TSR_REDUCTION_REDUX ? "redux" : "ordered", mode == TSR_ACCUMULATE ? "accumulate" : "overwrite",
                    with_dwpe ? "" : " (no dwpe)", ok_wte ? "ok" : "WRONG", ok_wpe ? "ok" : "WRONG");
        CHECK(ok_wte);
        CHECK(ok_wpe);
    }
    free(got_wte);
    free(got_wpe);
    tsr_desc_destroy(dO);
    tsr_desc_destroy(dwte);
    tsr_desc_destroy(dwpe);
}


static void check_errors(void)
{
    tsr_desc_t *out = make(TSR_FLOAT32, C, BT, 8, 7), *wt = make(TSR_FLOAT32, C, VP, 8, 16);
    tsr_desc_t *wp = make(TSR_FLOAT32, C, MAXT, 8, 6), *wt64 = make(TSR_FLOAT64, C, VP, 8, 16);
    tsr_desc_t *wt_mb = make(TSR_FLOAT32, C, VP, 9, 16), *wp_short = make(TSR_FLOAT32, C, T - 1, 8, 6);
    tsr_desc_t *wt_c = make(TSR_FLOAT32, C + 1, VP, 8, 16);
    int bad[BT];
    uint64_t n0 = tsr_tasks_submitted();
    tsr_expect_error(tsr_encoder_forward(NULL, wt, wp, tokens, B, T), TSR_EINVAL, n0, "NULL out");
    tsr_expect_error(tsr_encoder_forward(out, NULL, wp, tokens, B, T), TSR_EINVAL, n0, "NULL wte");
    tsr_expect_error(tsr_encoder_forward(out, wt, wp, NULL, B, T), TSR_EINVAL, n0, "NULL tokens");
    tsr_expect_error(tsr_encoder_forward(out, wt, wp, tokens, 0, T), TSR_EINVAL, n0, "B = 0");
    tsr_expect_error(tsr_encoder_forward(out, wt, wp, tokens, B, T + 1), TSR_ESHAPE, n0, "B*T != columns");
    tsr_expect_error(tsr_encoder_forward(out, wt64, wp, tokens, B, T), TSR_EDTYPE, n0, "float64 wte");
    tsr_expect_error(tsr_encoder_forward(out, wt_mb, wp, tokens, B, T), TSR_ETILE, n0, "channel tiles");
    tsr_expect_error(tsr_encoder_forward(out, wt_c, wp, tokens, B, T), TSR_ESHAPE, n0, "channels");
    tsr_expect_error(tsr_encoder_forward(out, wt, wp_short, tokens, B, T), TSR_ESHAPE, n0, "T > maxT");
    tsr_expect_error(tsr_encoder_forward(out, out, wp, tokens, B, T), TSR_EINVAL, n0, "out == wte");
    memcpy(bad, tokens, sizeof bad);
    bad[BT / 2] = VP;
    tsr_expect_error(tsr_encoder_forward(out, wt, wp, bad, B, T), TSR_EINVAL, n0, "token >= Vp");
    bad[BT / 2] = -1;
    tsr_expect_error(tsr_encoder_forward(out, wt, wp, bad, B, T), TSR_EINVAL, n0, "token < 0");
    const tsr_write_t set = TSR_OVERWRITE, add = TSR_ACCUMULATE;
    tsr_expect_error(tsr_encoder_backward(wt, wp, out, bad, B, T, set, TSR_REDUCTION_ORDERED), TSR_EINVAL, n0, "backward token");
    tsr_expect_error(tsr_encoder_backward(NULL, NULL, out, tokens, B, T, set, TSR_REDUCTION_ORDERED), TSR_EINVAL, n0, "no grads");
    tsr_expect_error(tsr_encoder_backward(wt, wp, out, tokens, B, T, (tsr_write_t)2, TSR_REDUCTION_ORDERED), TSR_EINVAL, n0, "mode 2");
    tsr_expect_error(tsr_encoder_backward(wt, wp, out, tokens, B, T, set, (tsr_reduction_t)5), TSR_EINVAL, n0, "accum 5");
    tsr_expect_error(tsr_encoder_backward(wt64, wp, out, tokens, B, T, add, TSR_REDUCTION_REDUX), TSR_EDTYPE, n0, "float64 dwte");
    tsr_expect_error(tsr_encoder_backward(wt, wp_short, out, tokens, B, T, add, TSR_REDUCTION_REDUX), TSR_ESHAPE, n0, "short dwpe");
    tsr_expect_error(tsr_encoder_backward(NULL, wt_mb, out, tokens, B, T, add, TSR_REDUCTION_REDUX), TSR_ETILE, n0, "dwpe tiles");
    /* a good call does submit */
    CHECK_RC(tsr_encoder_backward(NULL, wp, out, tokens, B, T, add, TSR_REDUCTION_ORDERED), TSR_SUCCESS);
    tsr_expect_tasks_ran(n0);
    TSR_TEST_DESTROY(out, wt, wp, wt64, wt_mb, wp_short, wt_c);
}

int main(int argc, char **argv)
{
    if (tsr_test_init(&argc, &argv, &grid) != 0)
        return 2;

    make_tokens();
    fill(wte, VP * C, 1);
    fill(wpe, MAXT * C, 2);
    fill(dout, BT * C, 3);
    fill(g0_wte, VP * C, 4);
    fill(g0_wpe, MAXT * C, 5);
    /* 1-wide tiles; tiles that divide nothing; many vocabulary tiles per
     * token tile (chains of tasks of at most 7 sources); a single tile */
    const tiles_t configs[] = { { 1, 1, 1, 1 }, { 8, 7, 16, 6 }, { 5, 45, 3, 20 }, { C, BT, VP, MAXT } };
    for (size_t k = 0; k < sizeof configs / sizeof configs[0]; k++) {
        check_forward(&configs[k]);
        for (int accum = 0; accum < 2; accum++)
            for (int mode = 0; mode < 2; mode++)
                /* the 1-wide tiles (thousands of tasks) run two of the four variants */
                if (k != 0 || accum == mode)
                    check_backward(&configs[k], (tsr_reduction_t)accum, (tsr_write_t)mode, 1);
    }
    check_backward(&configs[1], TSR_REDUCTION_ORDERED, TSR_OVERWRITE, 0);
    check_backward(&configs[2], TSR_REDUCTION_REDUX, TSR_ACCUMULATE, 0);
    check_errors();
    return tsr_test_finish("test_encoder");
}
