/* AdamW: several steps against llm.c's plain loop (gpt2_update) on shapes
 * that do not divide by the tiles, 1-wide tiles, a single tile, a 3D
 * tensor and gradients held by another distribution; bad arguments. Under
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

enum { NSTEPS = 5 };
static const float lr = 1e-2f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, wd = 0.1f;

typedef struct { int b, m, n, bb, mb, nb, grads_single; } case_t;

static tsr_dist_t grid;

static tsr_desc_t *make(const case_t *k, const tsr_dist_t *dist)
{
    tsr_desc_t *d = NULL;
    CHECK_RC(tsr_desc_create(&d, TSR_FLOAT32, k->b, k->m, k->n, k->bb, k->mb, k->nb, dist), TSR_SUCCESS);
    return d;
}

/* llm.c gpt2_update, one step, t = step + 1 */
static void reference_step(size_t n, float *p, const float *g, float *m, float *v, int t)
{
    for (size_t i = 0; i < n; i++) {
        float param = p[i], grad = g[i];
        float mi = beta1 * m[i] + (1.0f - beta1) * grad;
        float vi = beta2 * v[i] + (1.0f - beta2) * grad * grad;
        float m_hat = mi / (1.0f - powf(beta1, t));
        float v_hat = vi / (1.0f - powf(beta2, t));
        m[i] = mi;
        v[i] = vi;
        p[i] -= lr * (m_hat / (sqrtf(v_hat) + eps) + wd * param);
    }
}

/* The tiled step evaluates the same float expressions; a compiler may
 * still round differently (e.g. contract a multiply-add), by a few ulps of
 * each term per step. Terms: |p|; the update lr (|mhat| / sqrt(vhat) +
 * wd |p|), where Cauchy-Schwarz bounds |mhat| / sqrt(vhat) by
 * (1-b1) / sqrt((1-b2)(1-b1^2/b2)) * sqrt(1-b2^t) / (1-b1^t) < 3 for
 * t <= 5; |m| + |g| <= |m| + 0.5 and |v| + g^2 <= |v| + 0.25. Allow 8 eps
 * of those per step. */
static int close_enough(const float *got, const float *ref, const float *scale, size_t n, double extra)
{
    for (size_t i = 0; i < n; i++) {
        double tol = NSTEPS * 8.0 * FLT_EPSILON * (fabs(scale[i]) + extra);
        if (!(fabs((double)got[i] - ref[i]) <= tol)) {
            fprintf(stderr, "  element %zu: %.9g, expected %.9g\n", i, got[i], ref[i]);
            return 0;
        }
    }
    return 1;
}

static void fill(float *x, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)tsr_random_value(seed, 0, (int)i, 0);
}

static void run(const case_t *k)
{
    size_t n = (size_t)k->b * k->m * k->n;
    tsr_dist_t single = tsr_dist_single(tsr_size() - 1);
    tsr_desc_t *dp = make(k, &grid), *dm = make(k, &grid), *dv = make(k, &grid);
    tsr_desc_t *dg = make(k, k->grads_single ? &single : &grid);
    float *p = malloc(n * sizeof *p), *g = malloc(n * sizeof *g), *m = calloc(n, sizeof *m),
          *v = calloc(n, sizeof *v);
    fill(p, n, 21);
    CHECK_RC(tsr_test_scatter_f32(dp, p), TSR_SUCCESS);
    CHECK_RC(tsr_test_scatter_f32(dm, m), TSR_SUCCESS);
    CHECK_RC(tsr_test_scatter_f32(dv, v), TSR_SUCCESS);
    for (int step = 0; step < NSTEPS; step++) {
        fill(g, n, 100 + step);
        CHECK_RC(tsr_test_scatter_f32(dg, g), TSR_SUCCESS);
        CHECK_RC(tsr_adamw(dp, dg, dm, dv, lr, beta1, beta2, eps, wd, step), TSR_SUCCESS);
        reference_step(n, p, g, m, v, step + 1);
    }
    float *gp = tsr_test_gather_f32(dp), *gm = tsr_test_gather_f32(dm), *gv = tsr_test_gather_f32(dv);
    if (tsr_rank() == 0) {
        int ok = gp && gm && gv;
        ok = ok && close_enough(gp, p, p, n, 3.0 * lr);
        ok = ok && close_enough(gm, m, m, n, 0.5);
        ok = ok && close_enough(gv, v, v, n, 0.25);
        if (!ok)
            fprintf(stderr, "  case %d x %d x %d, tiles %d x %d x %d%s\n", k->b, k->m, k->n, k->bb, k->mb, k->nb,
                    k->grads_single ? ", grads on one rank" : "");
        CHECK(ok);
    }
    free(gp); free(gm); free(gv);
    free(p); free(g); free(m); free(v);
    tsr_desc_destroy(dp); tsr_desc_destroy(dg); tsr_desc_destroy(dm); tsr_desc_destroy(dv);
}


static void check_errors(void)
{
    const case_t base = { 1, 10, 9, 1, 4, 4, 0 }, shape = { 1, 10, 8, 1, 4, 4, 0 }, tile = { 1, 10, 9, 1, 5, 4, 0 };
    tsr_desc_t *p = make(&base, &grid), *g = make(&base, &grid), *m = make(&base, &grid), *v = make(&base, &grid);
    tsr_desc_t *g_shape = make(&shape, &grid), *g_tile = make(&tile, &grid), *g64 = NULL;
    CHECK_RC(tsr_desc_create(&g64, TSR_FLOAT64, 1, 10, 9, 1, 4, 4, &grid), TSR_SUCCESS);
    uint64_t n0 = tsr_tasks_submitted();
    tsr_expect_error(tsr_adamw(NULL, g, m, v, lr, beta1, beta2, eps, wd, 0), TSR_EINVAL, n0, "NULL params");
    tsr_expect_error(tsr_adamw(p, g, m, m, lr, beta1, beta2, eps, wd, 0), TSR_EINVAL, n0, "m == v");
    tsr_expect_error(tsr_adamw(p, g, m, v, -1.0f, beta1, beta2, eps, wd, 0), TSR_EINVAL, n0, "lr < 0");
    tsr_expect_error(tsr_adamw(p, g, m, v, NAN, beta1, beta2, eps, wd, 0), TSR_EINVAL, n0, "lr NaN");
    tsr_expect_error(tsr_adamw(p, g, m, v, lr, 1.0f, beta2, eps, wd, 0), TSR_EINVAL, n0, "beta1 = 1");
    tsr_expect_error(tsr_adamw(p, g, m, v, lr, beta1, -0.5f, eps, wd, 0), TSR_EINVAL, n0, "beta2 < 0");
    tsr_expect_error(tsr_adamw(p, g, m, v, lr, beta1, beta2, -eps, wd, 0), TSR_EINVAL, n0, "eps < 0");
    tsr_expect_error(tsr_adamw(p, g, m, v, lr, beta1, beta2, eps, -wd, 0), TSR_EINVAL, n0, "weight decay < 0");
    tsr_expect_error(tsr_adamw(p, g, m, v, lr, beta1, beta2, eps, wd, -1), TSR_EINVAL, n0, "step -1");
    tsr_expect_error(tsr_adamw(p, g64, m, v, lr, beta1, beta2, eps, wd, 0), TSR_EDTYPE, n0, "float64 grads");
    tsr_expect_error(tsr_adamw(p, g_shape, m, v, lr, beta1, beta2, eps, wd, 0), TSR_ESHAPE, n0, "grads shape");
    tsr_expect_error(tsr_adamw(p, g_tile, m, v, lr, beta1, beta2, eps, wd, 0), TSR_ETILE, n0, "grads tiles");
    CHECK_RC(tsr_adamw(p, g, m, v, lr, beta1, beta2, eps, wd, 0), TSR_SUCCESS);
    tsr_expect_tasks_ran(n0);
    TSR_TEST_DESTROY(p, g, m, v, g_shape, g_tile, g64);
}

int main(int argc, char **argv)
{
    if (tsr_test_init(&argc, &argv, &grid) != 0)
        return 2;
    const case_t cases[] = {
        { 1, 37, 45, 1, 1, 1, 0 },  /* 1-wide tiles */
        { 1, 37, 45, 1, 8, 7, 0 },  /* tiles that divide nothing */
        { 1, 37, 45, 1, 37, 45, 0 }, /* a single tile */
        { 5, 13, 11, 2, 4, 6, 0 },  /* 3D, batch tiles of 2 */
        { 1, 37, 45, 1, 16, 16, 1 }, /* gradients all on the last rank */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        run(&cases[k]);
    check_errors();
    return tsr_test_finish("test_adamw");
}
