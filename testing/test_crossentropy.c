/* Softmax cross-entropy forward (statistics, per-token losses, mean loss)
 * and in-place backward against a double-precision plain-loop reference and
 * central finite differences; padded vocabulary rows; shapes that do not
 * divide by the tiles, 1-wide tiles, a single tile, ordered and REDUX
 * statistics; bad arguments. Under mpirun the descriptors are block-cyclic
 * over a P x (size/P) grid (argument: P, default 1). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "tessera.h"
#include "tsr_check.h"
#include "tsr_expect.h"
#include "tsr_testutil.h"

enum { V = 101, VP = 128, BT = 45 };

typedef struct { int mbv, nb, mbs; } tiles_t;

static tsr_dist_t grid;
static int targets[BT];
static float logits[BT * VP]; /* column-major VP x BT: token c's logits at c * VP */

static tsr_desc_t *make(tsr_dtype_t t, int m, int n, int mb, int nb)
{
    tsr_desc_t *d = NULL;
    CHECK_RC(tsr_desc_create(&d, t, 1, m, n, 1, mb, nb, &grid), TSR_SUCCESS);
    return d;
}

/* Logits in [-2, 2), one token with large logits (+60), one with very
 * negative ones (-200: exp underflows unless the max is subtracted); the
 * padded rows hold large values that must not enter the softmax. */
static void make_data(void)
{
    for (int c = 0; c < BT; c++) {
        float shift = c == 5 ? 60.0f : c == 6 ? -200.0f : 0.0f;
        for (int r = 0; r < VP; r++)
            logits[c * VP + r] = r < V ? shift + 4.0f * (float)tsr_random_value(11, 0, r, c)
                                       : 50.0f + (float)tsr_random_value(12, 0, r, c);
        targets[c] = (int)((tsr_random_value(13, 0, c, 0) + 0.5) * V);
    }
    targets[0] = 0;
    targets[1] = V - 1;
}

/* -log softmax(x)[target] of one token over rows < V, in double. */
static double column_loss(const double *x, int target)
{
    double mx = -INFINITY, sum = 0.0;
    for (int r = 0; r < V; r++)
        mx = fmax(mx, x[r]);
    for (int r = 0; r < V; r++)
        sum += exp(x[r] - mx);
    return log(sum) + mx - x[target];
}

/* Reference statistics (max, sum) of token c, in double. */
static void column_stats(int c, double *mx, double *sum)
{
    *mx = -INFINITY;
    *sum = 0.0;
    for (int r = 0; r < V; r++)
        *mx = fmax(*mx, logits[c * VP + r]);
    for (int r = 0; r < V; r++)
        *sum += exp((double)logits[c * VP + r] - *mx);
}


/* Error bounds. A float statistic goes through at most nv tile merges, each
 * rescaling the sum by one expf and adding: a few ulps per merge, so its
 * relative error stays below 4 (nv + 2) eps. The loss log(s) + max - x_t
 * adds that relative error of s plus the rounding of three additions of
 * values up to |max| + |x_t| + |log s|. */
static double sum_tol(int nv) { return 4.0 * (nv + 2) * FLT_EPSILON; }
static double loss_tol(int nv, double mx, double xt, double s)
{
    return sum_tol(nv) + 4.0 * FLT_EPSILON * (fabs(mx) + fabs(xt) + fabs(log(s)) + 1.0);
}

static double mean_loss_ref(void)
{
    double total = 0.0, x[VP];
    for (int c = 0; c < BT; c++) {
        for (int r = 0; r < VP; r++)
            x[r] = logits[c * VP + r];
        total += column_loss(x, targets[c]);
    }
    return total / BT;
}

/* The mean's error: at most the average of the per-token bounds, plus the
 * rounding of the mean to float. */
static double mean_loss_tol(int nv)
{
    double total = 0.0;
    for (int c = 0; c < BT; c++) {
        double mx, sum;
        column_stats(c, &mx, &sum);
        total += loss_tol(nv, mx, logits[c * VP + targets[c]], sum);
    }
    return total / BT + FLT_EPSILON * fabs(mean_loss_ref());
}

static void check_forward_results(const tiles_t *tl, const float *stats, const float *losses)
{
    int nv = (V + tl->mbv - 1) / tl->mbv, ok_stats = 1, ok_loss = 1;
    for (int c = 0; c < BT; c++) {
        double mx, sum;
        column_stats(c, &mx, &sum);
        /* the max of floats is exact */
        if (stats[2 * c] != (float)mx || !(fabs(stats[2 * c + 1] - sum) <= sum_tol(nv) * sum)) {
            fprintf(stderr, "  token %d: stats (%.9g, %.9g), expected (%.9g, %.9g)\n", c, stats[2 * c],
                    stats[2 * c + 1], mx, sum);
            ok_stats = 0;
        }
        double x[VP];
        for (int r = 0; r < VP; r++)
            x[r] = logits[c * VP + r];
        double ref = column_loss(x, targets[c]);
        if (!(fabs(losses[c] - ref) <= loss_tol(nv, mx, x[targets[c]], sum))) {
            fprintf(stderr, "  token %d: loss %.9g, expected %.9g\n", c, losses[c], ref);
            ok_loss = 0;
        }
    }
    CHECK(ok_stats);
    CHECK(ok_loss);
}

/* dlogits against the analytic gradient (p - onehot) dloss in double: p
 * inherits the statistic's relative error, plus the rounding of x - max
 * (u |x - max| inside expf), of expf and of the division; padded rows must
 * be exactly 0. Then against central differences of the double forward
 * (h = 1e-3: truncation h^2 |L'''| / 6 < 1e-6 dloss as |L'''| <= 2 for a
 * log-softmax; rounding 1e-16 L / h is negligible): within the same bound
 * plus 2e-6 dloss. A wrong target term, scale or softmax is off by
 * O(dloss) or O(dloss p), far above that. */
static void check_backward_results(const tiles_t *tl, const float *d, double dloss)
{
    int nv = (V + tl->mbv - 1) / tl->mbv, ok = 1, ok_fd = 1, ok_pad = 1;
    const double h = 1e-3;
    for (int c = 0; c < BT; c++) {
        double mx, sum, x[VP];
        column_stats(c, &mx, &sum);
        for (int r = 0; r < VP; r++)
            x[r] = logits[c * VP + r];
        for (int r = 0; r < VP; r++) {
            double got = d[c * VP + r];
            if (r >= V) {
                ok_pad &= got == 0.0;
                continue;
            }
            double p = exp(x[r] - mx) / sum;
            double ref = (p - (r == targets[c])) * dloss;
            double tol = dloss * (p * (sum_tol(nv) + 4.0 * FLT_EPSILON * (fabs(x[r] - mx) + 1.0)) + FLT_EPSILON);
            if (!(fabs(got - ref) <= tol)) {
                if (ok)
                    fprintf(stderr, "  dlogits[%d, %d] = %.9g, expected %.9g\n", r, c, got, ref);
                ok = 0;
            }
            double keep = x[r];
            x[r] = keep + h;
            double lp = column_loss(x, targets[c]);
            x[r] = keep - h;
            double lm = column_loss(x, targets[c]);
            x[r] = keep;
            double fd = (lp - lm) / (2.0 * h) * dloss;
            if (!(fabs(got - fd) <= tol + 2e-6 * dloss)) {
                if (ok_fd)
                    fprintf(stderr, "  dlogits[%d, %d] = %.9g, finite difference %.9g\n", r, c, got, fd);
                ok_fd = 0;
            }
        }
    }
    CHECK(ok);
    CHECK(ok_fd);
    CHECK(ok_pad);
}

static void run(const tiles_t *tl, tsr_reduction_t accum, float dloss)
{
    tsr_desc_t *dx = make(TSR_FLOAT32, VP, BT, tl->mbv, tl->nb);
    tsr_desc_t *ds = make(TSR_FLOAT32, 2, BT, tl->mbs, tl->nb);
    tsr_desc_t *dl = make(TSR_FLOAT32, 1, BT, 1, tl->nb);
    CHECK_RC(tsr_test_scatter_f32(dx, logits), TSR_SUCCESS);
    CHECK_RC(tsr_desc_fill_random(ds, 5), TSR_SUCCESS); /* overwritten */
    CHECK_RC(tsr_crossentropy_forward(dx, ds, dl, targets, V, accum), TSR_SUCCESS);
    float mean = NAN;
    CHECK_RC(tsr_crossentropy_mean(dl, &mean), TSR_SUCCESS);
    float *stats = tsr_test_gather_f32(ds), *losses = tsr_test_gather_f32(dl);
    int nv = (V + tl->mbv - 1) / tl->mbv;
    /* every rank gets the mean */
    CHECK(fabs(mean - mean_loss_ref()) <= mean_loss_tol(nv));
    if (tsr_rank() == 0) {
        CHECK(stats && losses);
        if (stats && losses)
            check_forward_results(tl, stats, losses);
    }
    CHECK_RC(tsr_crossentropy_backward(dx, ds, targets, V, dloss), TSR_SUCCESS);
    float *d = tsr_test_gather_f32(dx);
    if (tsr_rank() == 0) {
        CHECK(d != NULL);
        if (d)
            check_backward_results(tl, d, dloss == 0.0f ? 1.0 / BT : dloss);
    }
    if (tsr_checks_failed && tsr_rank() == 0)
        fprintf(stderr, "  (tiles %d x %d, stats tiles %d, %s, dloss %g)\n", tl->mbv, tl->nb, tl->mbs,
                accum == TSR_REDUCTION_REDUX ? "redux" : "ordered", dloss);
    free(stats);
    free(losses);
    free(d);
    tsr_desc_destroy(dx);
    tsr_desc_destroy(ds);
    tsr_desc_destroy(dl);
}


static void check_errors(void)
{
    tsr_desc_t *x = make(TSR_FLOAT32, VP, BT, 16, 7), *s = make(TSR_FLOAT32, 2, BT, 2, 7);
    tsr_desc_t *l = make(TSR_FLOAT32, 1, BT, 1, 7), *x64 = make(TSR_FLOAT64, VP, BT, 16, 7);
    tsr_desc_t *s3 = make(TSR_FLOAT32, 3, BT, 3, 7), *s_mb1 = make(TSR_FLOAT32, 2, BT, 1, 7);
    tsr_desc_t *s_nb = make(TSR_FLOAT32, 2, BT, 2, 8), *l_n = make(TSR_FLOAT32, 1, BT - 1, 1, 7);
    int bad[BT];
    float mean;
    uint64_t n0 = tsr_tasks_submitted();
    const char *fn = "forward";
    tsr_expect_error(tsr_crossentropy_forward(NULL, s, l, targets, V, TSR_REDUCTION_ORDERED), TSR_EINVAL, n0, fn);
    tsr_expect_error(tsr_crossentropy_forward(x, s, l, NULL, V, TSR_REDUCTION_ORDERED), TSR_EINVAL, n0, "NULL targets");
    tsr_expect_error(tsr_crossentropy_forward(x, s, l, targets, VP + 1, TSR_REDUCTION_ORDERED), TSR_EINVAL, n0, "V > Vp");
    tsr_expect_error(tsr_crossentropy_forward(x, s, l, targets, 0, TSR_REDUCTION_ORDERED), TSR_EINVAL, n0, "V = 0");
    tsr_expect_error(tsr_crossentropy_forward(x, s, l, targets, V, (tsr_reduction_t)3), TSR_EINVAL, n0, "accum");
    tsr_expect_error(tsr_crossentropy_forward(x, x, l, targets, V, TSR_REDUCTION_ORDERED), TSR_EINVAL, n0, "stats == logits");
    tsr_expect_error(tsr_crossentropy_forward(x64, s, l, targets, V, TSR_REDUCTION_ORDERED), TSR_EDTYPE, n0, "float64");
    tsr_expect_error(tsr_crossentropy_forward(x, s3, l, targets, V, TSR_REDUCTION_ORDERED), TSR_ESHAPE, n0, "3-row stats");
    tsr_expect_error(tsr_crossentropy_forward(x, s_mb1, l, targets, V, TSR_REDUCTION_REDUX), TSR_ETILE, n0, "stats mb 1");
    tsr_expect_error(tsr_crossentropy_forward(x, s_nb, l, targets, V, TSR_REDUCTION_REDUX), TSR_ETILE, n0, "stats nb");
    tsr_expect_error(tsr_crossentropy_forward(x, s, l_n, targets, V, TSR_REDUCTION_REDUX), TSR_ESHAPE, n0, "losses n");
    memcpy(bad, targets, sizeof bad);
    bad[BT - 3] = V; /* a padded row is not a valid target */
    tsr_expect_error(tsr_crossentropy_forward(x, s, l, bad, V, TSR_REDUCTION_ORDERED), TSR_EINVAL, n0, "target V");
    tsr_expect_error(tsr_crossentropy_backward(x, s, bad, V, 0.0f), TSR_EINVAL, n0, "backward target V");
    bad[BT - 3] = -1;
    tsr_expect_error(tsr_crossentropy_forward(x, s, l, bad, V, TSR_REDUCTION_REDUX), TSR_EINVAL, n0, "target -1");
    tsr_expect_error(tsr_crossentropy_backward(x, s, bad, V, 0.0f), TSR_EINVAL, n0, "backward target -1");
    tsr_expect_error(tsr_crossentropy_backward(x, s, targets, V, NAN), TSR_EINVAL, n0, "dloss NaN");
    tsr_expect_error(tsr_crossentropy_backward(x, s_nb, targets, V, 1.0f), TSR_ETILE, n0, "backward stats nb");
    tsr_expect_error(tsr_crossentropy_backward(x, NULL, targets, V, 1.0f), TSR_EINVAL, n0, "backward NULL stats");
    tsr_expect_error(tsr_crossentropy_mean(l, NULL), TSR_EINVAL, n0, "mean NULL");
    tsr_expect_error(tsr_crossentropy_mean(s, &mean), TSR_ESHAPE, n0, "mean of 2 rows");
    /* good calls submit tasks; the losses may be left out */
    CHECK_RC(tsr_crossentropy_forward(x, s, NULL, targets, V, TSR_REDUCTION_ORDERED), TSR_SUCCESS);
    CHECK_RC(tsr_crossentropy_backward(x, s, targets, V, 0.0f), TSR_SUCCESS);
    tsr_expect_tasks_ran(n0);
    TSR_TEST_DESTROY(x, s, l, x64, s3, s_mb1, s_nb, l_n);
}

int main(int argc, char **argv)
{
    if (tsr_test_init(&argc, &argv, &grid) != 0)
        return 2;
    make_data();
    /* 1-wide tiles; tiles that divide nothing (a vocabulary tile across V);
     * many vocabulary tiles per token tile (loss tasks chained over at most
     * 6 logits tiles); a single tile (stats tile taller than needed) */
    const tiles_t configs[] = { { 1, 1, 2 }, { 16, 7, 2 }, { 5, 45, 2 }, { VP, BT, 3 } };
    for (size_t k = 0; k < sizeof configs / sizeof configs[0]; k++)
        for (int accum = 0; accum < 2; accum++)
            run(&configs[k], (tsr_reduction_t)accum, 0.0f);
    run(&configs[1], TSR_REDUCTION_REDUX, 0.37f);
    check_errors();
    return tsr_test_finish("test_crossentropy");
}
