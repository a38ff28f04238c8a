/* test_attention: flash-style causal attention (tsr_attention_forward /
 * tsr_attention_backward) against a plain-loop double-precision reference
 * written here with llm.c's semantics (preatt, causal softmax att, out; the
 * backward through datt and dpreatt).
 *
 * usage: test_attention SUITE [P]
 *   tiles   small shapes that do not divide by the tiles, 1-wide tiles, a
 *           single tile over everything, query tile != key tile, several heads
 *           per tile, ordered and REDUX, overwrite and accumulate
 *   large   T = 1000 and 1024 with several tile sizes
 *   causal  changing K and V after a position changes nothing before it
 *   fd      central finite differences of a double-precision forward
 *   errors  bad arguments: error code and no task submitted
 *   mpi     the tiles checks on block-cyclic descriptors (grid P x size/P)
 * Prints "test_attention SUITE: N passed, M failed"; exits 1 on failure. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tessera.h"
#include "tsr_check.h"
#include "tsr_expect.h"
#include "tsr_testutil.h"

/* ---- plain-loop reference (double, one head, llm.c semantics) ------------
 * A head's q, k, v, out are hd x T column-major: token t at x + t * hd. */

static double dot(const double *a, const double *b, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* att[0..t] of query t (llm.c: preatt, maxval, expsum, att); returns the
 * logsumexp maxval + log(expsum) of the scaled scores. */
static double ref_att_row(int hd, int t, const double *q, const double *k, double *att)
{
    double scale = 1.0 / sqrt((double)hd), maxval = -INFINITY, expsum = 0.0;
    for (int t2 = 0; t2 <= t; t2++) {
        att[t2] = dot(q + (size_t)t * hd, k + (size_t)t2 * hd, hd) * scale;
        maxval = fmax(maxval, att[t2]);
    }
    for (int t2 = 0; t2 <= t; t2++) {
        att[t2] = exp(att[t2] - maxval);
        expsum += att[t2];
    }
    for (int t2 = 0; t2 <= t; t2++)
        att[t2] /= expsum;
    /* expsum >= 1 (the term at the maximum is exp(0)), whatever cppcheck assumes of t */
    // cppcheck-suppress invalidFunctionArg
    return maxval + log(expsum);
}

/* out and lse (may be NULL) of one head; att: T doubles of scratch. */
static void ref_forward(int hd, int T, const double *q, const double *k, const double *v, double *out,
                        double *lse, double *att)
{
    for (int t = 0; t < T; t++) {
        double l = ref_att_row(hd, t, q, k, att);
        if (lse)
            lse[t] = l;
        double *o = out + (size_t)t * hd;
        for (int i = 0; i < hd; i++)
            o[i] = 0.0;
        for (int t2 = 0; t2 <= t; t2++)
            for (int i = 0; i < hd; i++)
                o[i] += att[t2] * v[(size_t)t2 * hd + i];
    }
}

/* dpreatt[t3] = sum_t2 att[t2] (delta(t2,t3) - att[t3]) datt[t2], t2, t3 <= t:
 * llm.c's double loop when `literal`, else its O(t) closed form
 * att[t3] (datt[t3] - sum_t2 att[t2] datt[t2]). */
static void ref_dpreatt(int t, const double *att, const double *datt, double *dpreatt, int literal)
{
    if (literal) {
        for (int t3 = 0; t3 <= t; t3++)
            dpreatt[t3] = 0.0;
        for (int t2 = 0; t2 <= t; t2++)
            for (int t3 = 0; t3 <= t; t3++)
                dpreatt[t3] += att[t2] * ((t2 == t3 ? 1.0 : 0.0) - att[t3]) * datt[t2];
        return;
    }
    double s = 0.0;
    for (int t2 = 0; t2 <= t; t2++)
        s += att[t2] * datt[t2];
    for (int t3 = 0; t3 <= t; t3++)
        dpreatt[t3] = att[t3] * (datt[t3] - s);
}

/* dq, dk, dv (overwritten) of one head; scratch: 3 T doubles. */
static void ref_backward(int hd, int T, const double *q, const double *k, const double *v, const double *dout,
                         double *dq, double *dk, double *dv, double *scratch, int literal)
{
    double scale = 1.0 / sqrt((double)hd), *att = scratch, *datt = scratch + T, *dpre = scratch + 2 * T;
    memset(dq, 0, (size_t)hd * T * sizeof *dq);
    memset(dk, 0, (size_t)hd * T * sizeof *dk);
    memset(dv, 0, (size_t)hd * T * sizeof *dv);
    for (int t = 0; t < T; t++) {
        const double *g = dout + (size_t)t * hd;
        ref_att_row(hd, t, q, k, att);
        for (int t2 = 0; t2 <= t; t2++) {
            datt[t2] = dot(v + (size_t)t2 * hd, g, hd);
            for (int i = 0; i < hd; i++)
                dv[(size_t)t2 * hd + i] += att[t2] * g[i];
        }
        ref_dpreatt(t, att, datt, dpre, literal);
        for (int t2 = 0; t2 <= t; t2++)
            for (int i = 0; i < hd; i++) {
                dq[(size_t)t * hd + i] += dpre[t2] * k[(size_t)t2 * hd + i] * scale;
                dk[(size_t)t2 * hd + i] += dpre[t2] * q[(size_t)t * hd + i] * scale;
            }
    }
}

/* ---- test data ----------------------------------------------------------- */

typedef struct {
    int nh, hd, T;         /* B*NH heads, head dim, tokens */
    int bb, qb, kb, mb;    /* heads per tile, query / key tile, tile rows (>= hd) */
    tsr_reduction_t accum;
    int P;                 /* process grid rows (columns = ranks / P) */
} attn_case_t;

/* Host arrays (rank 0): float inputs as given to Tessera, double copies and
 * the double reference results. Layout: head h at h * hd * T. */
typedef struct {
    size_t n;      /* nh * hd * T */
    float *q, *k, *v, *dout;
    double *dq_in, *dk_in, *dv_in, *ddout;
    double *out, *lse, *dq, *dk, *dv;
} host_t;

/* Q and K are scaled up so that the softmax is far from uniform. */
static void fill_inputs(host_t *h, const attn_case_t *c, uint64_t seed)
{
    for (int b = 0; b < c->nh; b++)
        for (int t = 0; t < c->T; t++)
            for (int i = 0; i < c->hd; i++) {
                size_t x = ((size_t)b * c->T + t) * c->hd + i;
                h->q[x] = (float)(4.0 * tsr_random_value(seed, b, i, t));
                h->k[x] = (float)(4.0 * tsr_random_value(seed + 1, b, i, t));
                h->v[x] = (float)tsr_random_value(seed + 2, b, i, t);
                h->dout[x] = (float)tsr_random_value(seed + 3, b, i, t);
            }
}

static void to_double(const float *x, double *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i];
}

/* Reference of every head from the float inputs. */
static void compute_reference(host_t *h, const attn_case_t *c)
{
    size_t hs = (size_t)c->hd * c->T;
    double *scratch = malloc(3 * (size_t)c->T * sizeof *scratch);
    to_double(h->q, h->dq_in, h->n);
    to_double(h->k, h->dk_in, h->n);
    to_double(h->v, h->dv_in, h->n);
    to_double(h->dout, h->ddout, h->n);
    for (int b = 0; b < c->nh; b++) {
        ref_forward(c->hd, c->T, h->dq_in + b * hs, h->dk_in + b * hs, h->dv_in + b * hs, h->out + b * hs,
                    h->lse + (size_t)b * c->T, scratch);
        ref_backward(c->hd, c->T, h->dq_in + b * hs, h->dk_in + b * hs, h->dv_in + b * hs, h->ddout + b * hs,
                     h->dq + b * hs, h->dk + b * hs, h->dv + b * hs, scratch, 0);
    }
    free(scratch);
}

static int host_alloc(host_t *h, const attn_case_t *c)
{
    memset(h, 0, sizeof *h);
    h->n = (size_t)c->nh * c->hd * c->T;
    float **f[] = { &h->q, &h->k, &h->v, &h->dout };
    double **d[] = { &h->dq_in, &h->dk_in, &h->dv_in, &h->ddout, &h->out, &h->dq, &h->dk, &h->dv };
    int ok = 1;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        ok &= (*f[i] = malloc(h->n * sizeof(float))) != NULL;
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        ok &= (*d[i] = malloc(h->n * sizeof(double))) != NULL;
    ok &= (h->lse = malloc((size_t)c->nh * c->T * sizeof(double))) != NULL;
    return ok ? 0 : -1;
}

static void host_free(host_t *h)
{
    void *all[] = { h->q, h->k, h->v, h->dout, h->dq_in, h->dk_in, h->dv_in, h->ddout,
                    h->out, h->lse, h->dq, h->dk, h->dv };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

/* ---- descriptors ---------------------------------------------------------- */

typedef struct { tsr_desc_t *Q, *K, *V, *out, *stats, *dout, *dQ, *dK, *dV; } descs_t;

static int create_descs(descs_t *d, const attn_case_t *c)
{
    tsr_dist_t dist = tsr_dist_block_cyclic(c->P, tsr_size() / c->P);
    memset(d, 0, sizeof *d);
    tsr_desc_t **query[] = { &d->Q, &d->out, &d->dout, &d->dQ }, **key[] = { &d->K, &d->V, &d->dK, &d->dV };
    int rc = 0;
    for (int i = 0; i < 4 && !rc; i++)
        rc = tsr_desc_create(query[i], TSR_FLOAT32, c->nh, c->hd, c->T, c->bb, c->mb, c->qb, &dist);
    for (int i = 0; i < 4 && !rc; i++)
        rc = tsr_desc_create(key[i], TSR_FLOAT32, c->nh, c->hd, c->T, c->bb, c->mb, c->kb, &dist);
    if (!rc)
        rc = tsr_desc_create(&d->stats, TSR_FLOAT32, c->nh, 2, c->T, c->bb, 2, c->qb, &dist);
    return rc;
}

static void destroy_descs(descs_t *d)
{
    TSR_TEST_DESTROY(d->Q, d->K, d->V, d->out, d->stats, d->dout, d->dQ, d->dK, d->dV);
}

/* Fill a descriptor with NaN (collective): outputs must not be read. */
/* Descriptors for c holding h's inputs (as rank 0 has them), after the
 * forward and the backward (accum). */
static void run_passes(descs_t *d, const attn_case_t *c, const host_t *h, tsr_reduction_t accum)
{
    CHECK_RC(create_descs(d, c), TSR_SUCCESS);
    CHECK_RC(tsr_test_scatter_f32(d->Q, h->q), TSR_SUCCESS);
    CHECK_RC(tsr_test_scatter_f32(d->K, h->k), TSR_SUCCESS);
    CHECK_RC(tsr_test_scatter_f32(d->V, h->v), TSR_SUCCESS);
    CHECK_RC(tsr_test_scatter_f32(d->dout, h->dout), TSR_SUCCESS);
    CHECK_RC(tsr_attention_forward(d->Q, d->K, d->V, d->out, d->stats), TSR_SUCCESS);
    CHECK_RC(tsr_attention_backward(d->Q, d->K, d->V, d->out, d->dout, d->stats, d->dQ, d->dK, d->dV, TSR_OVERWRITE,
                                    accum), TSR_SUCCESS);
}

static int fill_nan(tsr_desc_t *d)
{
    size_t n = (size_t)d->b * d->m * d->n;
    float *x = NULL;
    if (tsr_rank() == 0) {
        x = malloc(n * sizeof *x);
        for (size_t i = 0; x && i < n; i++)
            x[i] = NAN;
    }
    int rc = tsr_test_scatter_f32(d, x);
    free(x);
    return rc;
}

/* ---- comparisons ----------------------------------------------------------- */

static double max_abs_d(const double *x, size_t n, size_t stride)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i += stride)
        m = fmax(m, fabs(x[i]));
    return m;
}

/* max |x - factor * ref| / max |factor * ref| (NaN -> inf); x, ref of n
 * elements, x read with stride xs (2 for a stats row). */
static double rel_err(const float *x, size_t xs, const double *ref, size_t n, double factor)
{
    double worst = 0.0, scale = fabs(factor) * max_abs_d(ref, n, 1);
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)x[i * xs] - factor * ref[i]);
        if (isnan(e))
            return INFINITY;
        worst = fmax(worst, e);
    }
    return worst / (scale > 0 ? scale : 1.0);
}

/* Error bounds, in float32 epsilons relative to the largest reference value.
 * A score s = q.k/sqrt(hd) is a float dot product of hd terms (error ~ hd eps
 * |q||k|/sqrt(hd)), the weights exp(s - lse) inherit that error times |s|, the
 * online softmax adds a rounding per key tile, and each output sums up to T
 * weighted terms. tol = 8 (hd + T) eps covers these with a margin; measured
 * errors are reported next to it. */
static double tolerance(const attn_case_t *c)
{
    return 8.0 * (c->hd + c->T) * FLT_EPSILON;
}

/* ---- one case -------------------------------------------------------------- */

static const char *accum_name(tsr_reduction_t a) { return a == TSR_REDUCTION_REDUX ? "redux" : "ordered"; }

/* Gather the outputs and compare with the reference (gradients times
 * grad_factor: 1 after an overwrite, 2 after overwrite + accumulate). */
static void compare(const attn_case_t *c, descs_t *d, const host_t *h, double grad_factor, int check_forward)
{
    float *out = tsr_test_gather_f32(d->out), *stats = tsr_test_gather_f32(d->stats);
    float *dq = tsr_test_gather_f32(d->dQ), *dk = tsr_test_gather_f32(d->dK), *dv = tsr_test_gather_f32(d->dV);
    if (tsr_rank() == 0) {
        double tol = tolerance(c);
        double e_out = check_forward ? rel_err(out, 1, h->out, h->n, 1.0) : 0.0;
        double e_lse = check_forward ? rel_err(stats, 2, h->lse, (size_t)c->nh * c->T, 1.0) : 0.0;
        double e_dq = rel_err(dq, 1, h->dq, h->n, grad_factor), e_dk = rel_err(dk, 1, h->dk, h->n, grad_factor);
        double e_dv = rel_err(dv, 1, h->dv, h->n, grad_factor);
        int ok = e_out < tol && e_lse < tol && e_dq < tol && e_dk < tol && e_dv < tol;
        printf("  nh %d hd %d T %4d bb %d qb %4d kb %4d mb %d P %d %-7s %s: err/eps out %.1f lse %.1f dq %.1f "
               "dk %.1f dv %.1f (tol %.0f) %s\n", c->nh, c->hd, c->T, c->bb, c->qb, c->kb, c->mb, c->P,
               accum_name(c->accum), grad_factor == 1.0 ? "overwrite " : "accumulate", e_out / FLT_EPSILON,
               e_lse / FLT_EPSILON, e_dq / FLT_EPSILON, e_dk / FLT_EPSILON, e_dv / FLT_EPSILON,
               tol / FLT_EPSILON, ok ? "ok" : "FAILED");
        CHECK(ok);
    }
    free(out);
    free(stats);
    free(dq);
    free(dk);
    free(dv);
}

static void run_case(const attn_case_t *c, const host_t *h)
{
    descs_t d;
    int rc = create_descs(&d, c);
    CHECK_RC(rc, TSR_SUCCESS);
    if (rc)
        return;
    const float *in[] = { h->q, h->k, h->v, h->dout };
    tsr_desc_t *din[] = { d.Q, d.K, d.V, d.dout }, *dnan[] = { d.out, d.stats, d.dQ, d.dK, d.dV };
    for (int i = 0; i < 4; i++)
        CHECK_RC(tsr_test_scatter_f32(din[i], tsr_rank() == 0 ? in[i] : NULL), TSR_SUCCESS);
    for (int i = 0; i < 5; i++)
        CHECK_RC(fill_nan(dnan[i]), TSR_SUCCESS);
    CHECK_RC(tsr_attention_forward(d.Q, d.K, d.V, d.out, d.stats), TSR_SUCCESS);
    CHECK_RC(tsr_attention_backward(d.Q, d.K, d.V, d.out, d.dout, d.stats, d.dQ, d.dK, d.dV, TSR_OVERWRITE, c->accum),
             TSR_SUCCESS);
    compare(c, &d, h, 1.0, 1);
    CHECK_RC(tsr_attention_backward(d.Q, d.K, d.V, d.out, d.dout, d.stats, d.dQ, d.dK, d.dV, TSR_ACCUMULATE, c->accum),
             TSR_SUCCESS);
    compare(c, &d, h, 2.0, 0);
    destroy_descs(&d);
}

/* Every tile configuration of `tiles` (qb, kb, bb, mb; 0 = T, nh or hd) and
 * every accumulation on one problem. */
static void run_tile_sweep(attn_case_t c, const int (*tiles)[4], int ntiles)
{
    host_t h;
    int ok = tsr_rank() != 0 || host_alloc(&h, &c) == 0;
    CHECK(ok);
    if (!ok)
        return;
    if (tsr_rank() == 0) {
        fill_inputs(&h, &c, 1000 + c.T);
        compute_reference(&h, &c);
    }
    for (int i = 0; i < ntiles; i++)
        for (int a = 0; a < 2; a++) {
            c.qb = tiles[i][0] ? tiles[i][0] : c.T;
            c.kb = tiles[i][1] ? tiles[i][1] : c.T;
            c.bb = tiles[i][2] ? tiles[i][2] : c.nh;
            c.mb = tiles[i][3] ? tiles[i][3] : c.hd;
            c.accum = a ? TSR_REDUCTION_REDUX : TSR_REDUCTION_ORDERED;
            run_case(&c, &h);
        }
    if (tsr_rank() == 0)
        host_free(&h);
}

/* T = 37, hd = 12, 5 heads: nothing divides; single tiles, 1-wide tiles,
 * qb != kb both ways, tile rows above hd, 1..5 heads per tile. */
static const int small_tiles[][4] = {
    { 0, 0, 0, 0 }, { 1, 1, 1, 0 }, { 1, 0, 5, 0 }, { 0, 1, 2, 0 }, { 8, 5, 2, 0 },
    { 5, 8, 3, 16 }, { 16, 16, 1, 0 }, { 10, 37, 4, 0 },
};
/* Under MPI fewer of them (every 1-wide tile pair would be a message). */
static const int mpi_tiles[][4] = { { 0, 0, 0, 0 }, { 8, 5, 2, 0 }, { 3, 37, 5, 16 } };

static void suite_tiles(int P, int mpi)
{
    attn_case_t c = { 5, 12, 37, 0, 0, 0, 0, TSR_REDUCTION_ORDERED, P };
    if (mpi)
        run_tile_sweep(c, mpi_tiles, sizeof mpi_tiles / sizeof mpi_tiles[0]);
    else
        run_tile_sweep(c, small_tiles, sizeof small_tiles / sizeof small_tiles[0]);
    /* T = 1 and hd = 1 edge cases */
    static const int single[][4] = { { 0, 0, 0, 0 }, { 1, 1, 1, 0 } };
    attn_case_t one_token = { 3, 4, 1, 0, 0, 0, 0, TSR_REDUCTION_ORDERED, P };
    run_tile_sweep(one_token, single, 2);
    static const int hd1[][4] = { { 3, 2, 1, 0 } };
    attn_case_t one_dim = { 2, 1, 9, 0, 0, 0, 0, TSR_REDUCTION_ORDERED, P };
    run_tile_sweep(one_dim, hd1, 1);
}

static void suite_large(void)
{
    static const int tiles[][4] = { { 0, 0, 1, 0 }, { 128, 128, 2, 0 }, { 100, 256, 1, 0 }, { 256, 64, 2, 0 } };
    attn_case_t c = { 2, 32, 1024, 0, 0, 0, 0, TSR_REDUCTION_ORDERED, 1 };
    run_tile_sweep(c, tiles, sizeof tiles / sizeof tiles[0]);
    /* the CPU kernels' query chunks: not a multiple of the chunk, and (qb = T,
     * kb 300) chunks that see none of a key tile */
    static const int odd[][4] = { { 97, 61, 1, 0 }, { 0, 300, 1, 0 } };
    attn_case_t c2 = { 3, 24, 1000, 0, 0, 0, 0, TSR_REDUCTION_ORDERED, 1 };
    run_tile_sweep(c2, odd, sizeof odd / sizeof odd[0]);
}

/* ---- causal masking is exact ---------------------------------------------------- */

/* With K, V changed after position t0 (large values) and dout zero after t0,
 * every output at positions <= t0 (out, stats, dQ, dK, dV) is bit-for-bit
 * the same: masked scores get weight exactly 0 and tiles above the diagonal
 * are skipped. Ordered accumulation, so the summation order is the same.
 * With CPU and CUDA workers together a tile may run on a CPU in one run and
 * on the GPU in the other, whose kernels round differently: there the
 * outputs must agree to 1e-4 of the output's scale, still far below what one
 * leaked masked score (keys x40, values x1e4) would change. */
static void suite_causal(void)
{
    const int nh = 3, hd = 8, T = 45, t0 = 21;
    static const int tiles[][3] = { { 45, 45, 3 }, { 7, 5, 1 }, { 1, 1, 2 }, { 16, 16, 3 }, { 22, 10, 1 } };
    size_t n = (size_t)nh * hd * T;
    for (size_t ti = 0; ti < sizeof tiles / sizeof tiles[0]; ti++) {
        attn_case_t c = { nh, hd, T, tiles[ti][2], tiles[ti][0], tiles[ti][1], hd, TSR_REDUCTION_ORDERED, 1 };
        float *res[2][5] = { { 0 } };
        for (int run = 0; run < 2; run++) {
            host_t h;
            CHECK(host_alloc(&h, &c) == 0);
            fill_inputs(&h, &c, 77);
            for (int b = 0; b < nh; b++)
                for (int t = t0 + 1; t < T; t++)
                    for (int i = 0; i < hd; i++) {
                        size_t x = ((size_t)b * T + t) * hd + i;
                        h.dout[x] = 0.0f;
                        if (run) {
                            h.k[x] = (float)(40.0 * tsr_random_value(5, b, i, t));
                            h.v[x] = (float)(1e4 * tsr_random_value(6, b, i, t));
                        }
                    }
            descs_t d;
            run_passes(&d, &c, &h, TSR_REDUCTION_ORDERED);
            tsr_desc_t *outs[5] = { d.out, d.stats, d.dQ, d.dK, d.dV };
            for (int i = 0; i < 5; i++)
                res[run][i] = tsr_test_gather_f32(outs[i]);
            destroy_descs(&d);
            host_free(&h);
        }
        const int mixed_kernels = tsr_ncpu_workers() > 0 && tsr_ncuda_workers() > 0;
        int same = 1, changed = 0;
        for (int i = 0; i < 5; i++) {
            int rows = i == 1 ? 2 : hd;
            double scale = 0.0;
            for (size_t x = 0; x < (size_t)nh * T * rows; x++)
                scale = fmax(scale, fabs(res[0][i][x]));
            const double tolerance = mixed_kernels ? 1e-4 * scale : 0.0;
            for (int b = 0; b < nh; b++)
                for (int t = 0; t < T; t++)
                    for (int r = 0; r < rows; r++) {
                        size_t x = ((size_t)b * T + t) * rows + r;
                        if (t <= t0)
                            same &= fabs((double)res[0][i][x] - res[1][i][x]) <= tolerance;
                        else if (i == 0)
                            changed |= res[0][i][x] != res[1][i][x];
                    }
            free(res[0][i]);
            free(res[1][i]);
        }
        printf("  causal: qb %d kb %d bb %d: outputs up to t0 = %d %s, later outputs %s\n", c.qb, c.kb, c.bb, t0,
               same ? (mixed_kernels ? "equal to 1e-4 (CPU and CUDA kernels)" : "identical") : "CHANGED",
               changed ? "changed" : "UNCHANGED");
        CHECK(same);
        CHECK(changed); /* the test itself can tell a difference */
        (void)n;
    }
}

/* ---- finite differences --------------------------------------------------------- */

/* loss = sum(out o W) of the double reference forward over all heads. */
static double ref_loss(const attn_case_t *c, const double *q, const double *k, const double *v, const double *w,
                       double *out, double *att)
{
    size_t hs = (size_t)c->hd * c->T;
    double loss = 0.0;
    for (int b = 0; b < c->nh; b++) {
        ref_forward(c->hd, c->T, q + b * hs, k + b * hs, v + b * hs, out, NULL, att);
        for (size_t i = 0; i < hs; i++)
            loss += out[i] * w[b * hs + i];
    }
    return loss;
}

/* ref_loss's arguments, for tsr_test_central_diff. */
typedef struct {
    const attn_case_t *c;
    const double *q, *k, *v, *w;
    double *out, *att;
} ref_loss_args_t;

static double ref_loss_of(void *arg)
{
    const ref_loss_args_t *a = arg;
    return ref_loss(a->c, a->q, a->k, a->v, a->w, a->out, a->att);
}

/* d loss / d x[i] for every element of x (one of q, k, v), central
 * differences with step hstep. */
static void finite_differences(const attn_case_t *c, double *q, double *k, double *v, const double *w, double *x,
                               double hstep, double *grad)
{
    size_t n = (size_t)c->nh * c->hd * c->T;
    ref_loss_args_t a = { c, q, k, v, w, malloc((size_t)c->hd * c->T * sizeof(double)),
                          malloc((size_t)c->T * sizeof(double)) };
    for (size_t i = 0; i < n; i++)
        grad[i] = tsr_test_central_diff(&x[i], hstep, ref_loss_of, &a);
    free(a.out);
    free(a.att);
}

/* max |x - ref| / max |ref| for float or double x. */
static double rel_err_dd(const double *x, const double *ref, size_t n)
{
    double worst = 0.0, scale = max_abs_d(ref, n, 1);
    for (size_t i = 0; i < n; i++)
        worst = fmax(worst, isnan(x[i]) ? INFINITY : fabs(x[i] - ref[i]));
    return worst / (scale > 0 ? scale : 1.0);
}

/* The gradient of loss = sum(out o dout) by central differences of the
 * double-precision reference forward (step 1e-4: truncation error ~ h^2
 * |f'''| ~ 1e-8 relative, rounding ~ 1e-16 / h = 1e-12) against (a) the
 * double reference backward: tolerance 1e-6, and (b) Tessera's float32
 * backward: tolerance 1e-4, which is 8 (hd + T) eps = 2e-5 for this size
 * plus the 1e-6 of (a), with margin. Also checks llm.c's literal O(T^3)
 * dpreatt loop against the closed form used by the reference. */
static void suite_fd(void)
{
    static const int tiles[][4] = { { 4, 3, 1, 0 }, { 1, 1, 2, 0 }, { 0, 0, 0, 0 } };
    attn_case_t c = { 2, 8, 13, 0, 0, 0, 0, TSR_REDUCTION_ORDERED, 1 };
    host_t h;
    CHECK(host_alloc(&h, &c) == 0);
    fill_inputs(&h, &c, 4242);
    compute_reference(&h, &c);
    size_t n = h.n, hs = (size_t)c.hd * c.T;
    double *fd[3], *lit[3], *scratch = malloc(3 * (size_t)c.T * sizeof *scratch);
    double *xs[3] = { h.dq_in, h.dk_in, h.dv_in }, *an[3] = { h.dq, h.dk, h.dv };
    const char *names[3] = { "dQ", "dK", "dV" };
    for (int i = 0; i < 3; i++) {
        fd[i] = malloc(n * sizeof *fd[i]);
        lit[i] = malloc(n * sizeof *lit[i]);
        finite_differences(&c, h.dq_in, h.dk_in, h.dv_in, h.ddout, xs[i], 1e-4, fd[i]);
    }
    for (int b = 0; b < c.nh; b++)
        ref_backward(c.hd, c.T, h.dq_in + b * hs, h.dk_in + b * hs, h.dv_in + b * hs, h.ddout + b * hs,
                     lit[0] + b * hs, lit[1] + b * hs, lit[2] + b * hs, scratch, 1);
    for (int i = 0; i < 3; i++) {
        double e_ref = rel_err_dd(an[i], fd[i], n), e_lit = rel_err_dd(lit[i], an[i], n);
        printf("  fd: %s reference vs finite differences %.2e (tol 1e-6), llm.c loop vs closed form %.2e\n",
               names[i], e_ref, e_lit);
        CHECK(e_ref < 1e-6);
        CHECK(e_lit < 1e-12);
    }
    for (size_t ti = 0; ti < sizeof tiles / sizeof tiles[0]; ti++) {
        c.qb = tiles[ti][0] ? tiles[ti][0] : c.T;
        c.kb = tiles[ti][1] ? tiles[ti][1] : c.T;
        c.bb = tiles[ti][2] ? tiles[ti][2] : c.nh;
        c.mb = c.hd;
        for (int a = 0; a < 2; a++) {
            c.accum = a ? TSR_REDUCTION_REDUX : TSR_REDUCTION_ORDERED;
            descs_t d;
            run_passes(&d, &c, &h, c.accum);
            tsr_desc_t *g[3] = { d.dQ, d.dK, d.dV };
            for (int i = 0; i < 3; i++) {
                float *x = tsr_test_gather_f32(g[i]);
                double e = rel_err(x, 1, fd[i], n, 1.0);
                printf("  fd: qb %2d kb %2d bb %d %-7s Tessera %s vs finite differences %.2e (tol 1e-4)\n", c.qb,
                       c.kb, c.bb, accum_name(c.accum), names[i], e);
                CHECK(e < 1e-4);
                free(x);
            }
            destroy_descs(&d);
        }
    }
    for (int i = 0; i < 3; i++) {
        free(fd[i]);
        free(lit[i]);
    }
    free(scratch);
    host_free(&h);
}

/* ---- bad arguments ----------------------------------------------------------------- */

static tsr_desc_t *make(tsr_dtype_t t, int b, int m, int n, int bb, int mb, int nb, const tsr_dist_t *dist)
{
    tsr_desc_t *d = NULL;
    CHECK_RC(tsr_desc_create(&d, t, b, m, n, bb, mb, nb, dist), TSR_SUCCESS);
    return d;
}

typedef struct { tsr_desc_t *Q, *K, *V, *out, *stats, *dout, *dQ, *dK, *dV; tsr_write_t mode; tsr_reduction_t accum; } call_t;

/* The forward (fwd) or backward call must return `code` and submit nothing. */
static void expect_error(int code, int fwd, call_t a, const char *what)
{
    uint64_t before = tsr_tasks_submitted();
    int rc = fwd ? tsr_attention_forward(a.Q, a.K, a.V, a.out, a.stats)
                 : tsr_attention_backward(a.Q, a.K, a.V, a.out, a.dout, a.stats, a.dQ, a.dK, a.dV, a.mode, a.accum);
    tsr_expect_error(rc, code, before, what);
}

static void suite_errors(void)
{
    /* good: 3 heads, hd 6, T 10, query tiles 4, key tiles 3, 2 heads per tile */
    const int nh = 3, hd = 6, T = 10;
    tsr_desc_t *Q = make(TSR_FLOAT32, nh, hd, T, 2, hd, 4, NULL), *K = make(TSR_FLOAT32, nh, hd, T, 2, hd, 3, NULL);
    tsr_desc_t *V = make(TSR_FLOAT32, nh, hd, T, 2, 8, 3, NULL), *out = make(TSR_FLOAT32, nh, hd, T, 2, hd, 4, NULL);
    tsr_desc_t *st = make(TSR_FLOAT32, nh, 2, T, 2, 2, 4, NULL), *dout = make(TSR_FLOAT32, nh, hd, T, 2, hd, 4, NULL);
    tsr_desc_t *dQ = make(TSR_FLOAT32, nh, hd, T, 2, hd, 4, NULL), *dK = make(TSR_FLOAT32, nh, hd, T, 2, hd, 3, NULL);
    tsr_desc_t *dV = make(TSR_FLOAT32, nh, hd, T, 2, hd, 3, NULL);
    /* wrong ones */
    tsr_desc_t *K64 = make(TSR_FLOAT64, nh, hd, T, 2, hd, 3, NULL), *Kshort = make(TSR_FLOAT32, nh, hd, T - 1, 2, hd, 3, NULL);
    tsr_desc_t *Vhd = make(TSR_FLOAT32, nh, hd + 1, T, 2, hd + 1, 3, NULL), *Vb = make(TSR_FLOAT32, nh + 1, hd, T, 2, hd, 3, NULL);
    tsr_desc_t *st1 = make(TSR_FLOAT32, nh, 1, T, 2, 1, 4, NULL), *st_nb = make(TSR_FLOAT32, nh, 2, T, 2, 2, 3, NULL);
    tsr_desc_t *st_mb = make(TSR_FLOAT32, nh, 2, T, 2, 1, 4, NULL), *Qmb = make(TSR_FLOAT32, nh, hd, T, 2, hd - 1, 4, NULL);
    tsr_desc_t *out_nb = make(TSR_FLOAT32, nh, hd, T, 2, hd, 3, NULL), *V_nb = make(TSR_FLOAT32, nh, hd, T, 2, hd, 4, NULL);
    tsr_desc_t *out_bb = make(TSR_FLOAT32, nh, hd, T, 1, hd, 4, NULL), *dout64 = make(TSR_FLOAT64, nh, hd, T, 2, hd, 4, NULL);

    call_t g = { Q, K, V, out, st, dout, dQ, dK, dV, TSR_OVERWRITE, TSR_REDUCTION_ORDERED }, a;
    a = g; a.Q = NULL;      expect_error(TSR_EINVAL, 1, a, "forward: NULL Q");
    a = g; a.stats = NULL;  expect_error(TSR_EINVAL, 1, a, "forward: NULL stats");
    a = g; a.out = Q;       expect_error(TSR_EINVAL, 1, a, "forward: out is Q");
    a = g; a.stats = out;   expect_error(TSR_EINVAL, 1, a, "forward: stats is out");
    a = g; a.K = K64;       expect_error(TSR_EDTYPE, 1, a, "forward: float64 K");
    a = g; a.K = Kshort;    expect_error(TSR_ESHAPE, 1, a, "forward: K shorter");
    a = g; a.V = Vhd;       expect_error(TSR_ESHAPE, 1, a, "forward: V head dim");
    a = g; a.V = Vb;        expect_error(TSR_ESHAPE, 1, a, "forward: V heads");
    a = g; a.stats = st1;   expect_error(TSR_ESHAPE, 1, a, "forward: stats with one row");
    a = g; a.stats = st_nb; expect_error(TSR_ETILE, 1, a, "forward: stats tiled like keys");
    a = g; a.stats = st_mb; expect_error(TSR_ETILE, 1, a, "forward: stats rows split");
    a = g; a.Q = Qmb;       expect_error(TSR_ETILE, 1, a, "forward: hd split over tiles");
    a = g; a.out = out_nb;  expect_error(TSR_ETILE, 1, a, "forward: out tiled like keys");
    a = g; a.V = V_nb;      expect_error(TSR_ETILE, 1, a, "forward: V tiled like queries");
    a = g; a.out = out_bb;  expect_error(TSR_ETILE, 1, a, "forward: heads per tile");
    a = g; a.dQ = NULL;     expect_error(TSR_EINVAL, 0, a, "backward: NULL dQ");
    a = g; a.mode = (tsr_write_t)2; expect_error(TSR_EINVAL, 0, a, "backward: mode 2");
    a = g; a.accum = (tsr_reduction_t)7; expect_error(TSR_EINVAL, 0, a, "backward: accum 7");
    a = g; a.dK = a.dV;     expect_error(TSR_EINVAL, 0, a, "backward: dK is dV");
    a = g; a.dQ = a.dout;   expect_error(TSR_EINVAL, 0, a, "backward: dQ is dout");
    a = g; a.dV = a.V;      expect_error(TSR_EINVAL, 0, a, "backward: dV is V");
    a = g; a.dout = dout64; expect_error(TSR_EDTYPE, 0, a, "backward: float64 dout");
    a = g; a.dK = dQ; a.dQ = dK; expect_error(TSR_ETILE, 0, a, "backward: dQ, dK swapped");
    a = g; a.dV = Vhd;      expect_error(TSR_ESHAPE, 0, a, "backward: dV head dim");
    a = g; a.stats = st1;   expect_error(TSR_ESHAPE, 0, a, "backward: stats with one row");
    a = g; a.dout = out_nb; expect_error(TSR_ETILE, 0, a, "backward: dout tiled like keys");

    if (tsr_size() == 2) {
        /* the descriptors above are on the default 2 x 1 grid */
        tsr_dist_t cols = tsr_dist_block_cyclic(1, 2);
        tsr_desc_t *K12 = make(TSR_FLOAT32, nh, hd, T, 2, hd, 3, &cols), *Q12 = make(TSR_FLOAT32, nh, hd, T, 2, hd, 4, &cols);
        a = g; a.Q = Q12; expect_error(TSR_EDIST, 1, a, "forward: Q on a 1x2 grid, the others 2x1");
        a = g; a.dK = K12; expect_error(TSR_EDIST, 0, a, "backward: dK on a 1x2 grid, the others 2x1");
        tsr_desc_destroy(K12);
        tsr_desc_destroy(Q12);
    }
    /* and the good calls do submit tasks and succeed */
    uint64_t before = tsr_tasks_submitted();
    CHECK_RC(tsr_attention_forward(Q, K, V, out, st), TSR_SUCCESS);
    CHECK_RC(tsr_attention_backward(Q, K, V, out, dout, st, dQ, dK, dV, TSR_OVERWRITE, TSR_REDUCTION_ORDERED), TSR_SUCCESS);
    CHECK_RC(tsr_attention_backward(Q, K, V, out, dout, st, dQ, dK, dV, TSR_ACCUMULATE, TSR_REDUCTION_REDUX), TSR_SUCCESS);
    CHECK_RC(tsr_wait(), TSR_SUCCESS);
    CHECK(tsr_tasks_submitted() > before);
    TSR_TEST_DESTROY(Q, K, V, out, st, dout, dQ, dK, dV, K64, Kshort, Vhd, Vb, st1, st_nb, st_mb, Qmb, out_nb, V_nb,
                     out_bb, dout64);
}

/* Before tsr_init: NULL is EINVAL, anything else ENOTINIT. */
static void check_before_init(void)
{
    static tsr_desc_t dummy;
    tsr_desc_t *x = &dummy;
    CHECK_RC(tsr_attention_forward(NULL, x, x, x, x), TSR_EINVAL);
    CHECK_RC(tsr_attention_forward(x, x, x, x, x), TSR_ENOTINIT);
    CHECK_RC(tsr_attention_backward(x, x, x, x, x, x, x, x, x, TSR_OVERWRITE, TSR_REDUCTION_ORDERED), TSR_ENOTINIT);
}

int main(int argc, char **argv)
{
    const char *suite = argc > 1 ? argv[1] : "tiles";
    int P = argc > 2 ? atoi(argv[2]) : 1;
    if (strcmp(suite, "errors") == 0)
        check_before_init();
    tsr_config_t cfg;
    tsr_config_default(&cfg);
    if (tsr_mpi_launched())
        cfg.ncpus = 1;
    if (strcmp(suite, "errors") == 0)
        cfg.verbose = 0; /* the expected failures would print errors */
    int rc = tsr_init(&cfg, &argc, &argv);
    if (rc) {
        fprintf(stderr, "tsr_init: %s\n", tsr_strerror(rc));
        return 1;
    }
    if (P < 1 || tsr_size() % P) {
        fprintf(stderr, "P = %d does not divide %d ranks\n", P, tsr_size());
        tsr_finalize();
        return 2;
    }
    if (strcmp(suite, "tiles") == 0 || strcmp(suite, "mpi") == 0)
        suite_tiles(P, strcmp(suite, "mpi") == 0);
    else if (strcmp(suite, "large") == 0)
        suite_large();
    else if (strcmp(suite, "causal") == 0)
        suite_causal();
    else if (strcmp(suite, "fd") == 0)
        suite_fd();
    else if (strcmp(suite, "errors") == 0)
        suite_errors();
    else {
        fprintf(stderr, "unknown suite '%s' (tiles, large, causal, fd, errors, mpi)\n", suite);
        tsr_finalize();
        return 2;
    }
    char name[64];
    snprintf(name, sizeof name, "test_attention %s", suite);
    int status = tsr_checks_failed ? 1 : 0;
    if (tsr_rank() == 0)
        status = tsr_check_report(name);
    tsr_finalize();
    return status;
}
