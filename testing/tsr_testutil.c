#include <math.h>
#include <stdlib.h>
#include "tsr_testutil.h"

float *tsr_test_gather_f32(tsr_desc_t *d)
{
    size_t n = (size_t)d->b * d->m * d->n;
    float *full = tsr_rank() == 0 ? malloc(n * sizeof *full) : NULL;
    if (tsr_desc_gather(d, full, d->m, 0) != 0) {
        free(full);
        return NULL;
    }
    return full;
}

int tsr_test_scatter_f32(tsr_desc_t *d, const float *full)
{
    return tsr_desc_scatter(d, full, d->m, 0);
}

/* max |x - ref| / scale, scale = max(|ref|, floor) or 1 (absolute). */
static double max_err(const float *x, const float *ref, size_t n, double floor, int relative)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double scale = relative ? fmax(fabs((double)ref[i]), floor) : 1.0;
        double e = fabs((double)x[i] - ref[i]) / scale;
        if (isnan(e))
            return INFINITY;
        worst = fmax(worst, e);
    }
    return worst;
}

double tsr_test_max_rel_err(const float *x, const float *ref, size_t n, double floor)
{
    return max_err(x, ref, n, floor, 1);
}

double tsr_test_max_abs_err(const float *x, const float *ref, size_t n)
{
    return max_err(x, ref, n, 0.0, 0);
}

int tsr_test_init_one_worker(int *argc, char ***argv)
{
    tsr_config_t cfg;
    tsr_config_default(&cfg);
    cfg.ncpus = 1;
    return tsr_init(&cfg, argc, argv) != 0;
}

int tsr_test_init(int *argc, char ***argv, tsr_dist_t *grid)
{
    tsr_config_t cfg;
    tsr_config_default(&cfg);
    cfg.verbose = 0;
    if (tsr_mpi_launched())
        cfg.ncpus = 1;
    if (tsr_init(&cfg, argc, argv) != 0)
        return 1;
    int P = *argc > 1 ? atoi((*argv)[1]) : 1;
    if (P < 1 || tsr_size() % P != 0)
        P = 1;
    *grid = tsr_dist_block_cyclic(P, tsr_size() / P);
    return 0;
}

void tsr_test_destroy(tsr_desc_t *const *all, size_t n)
{
    for (size_t i = 0; i < n; i++)
        tsr_desc_destroy(all[i]);
}

/* out = softmax(q k^T / sqrt(hd), causal) v, head by head, in double. */
void tsr_test_attention_ref(int heads, int T, int hd, const float *Q, const float *K, const float *V, float *out)
{
    double *w = malloc(sizeof(double) * T);
    for (int h = 0; h < heads; h++)
        for (int t = 0; t < T; t++) {
            const float *q = Q + ((size_t)h * T + t) * hd;
            double max = -INFINITY, sum = 0;
            for (int u = 0; u <= t; u++) {
                const float *k = K + ((size_t)h * T + u) * hd;
                double s = 0;
                for (int d = 0; d < hd; d++)
                    s += (double)q[d] * k[d];
                w[u] = s / sqrt((double)hd);
                max = fmax(max, w[u]);
            }
            for (int u = 0; u <= t; u++)
                sum += w[u] = exp(w[u] - max);
            for (int d = 0; d < hd; d++) {
                double o = 0;
                for (int u = 0; u <= t; u++)
                    o += w[u] * V[((size_t)h * T + u) * hd + d];
                out[((size_t)h * T + t) * hd + d] = (float)(o / sum);
            }
        }
    free(w);
}

double tsr_test_central_diff(double *x, double h, double (*loss)(void *arg), void *arg)
{
    double x0 = *x;
    *x = x0 + h;
    double up = loss(arg);
    *x = x0 - h;
    double down = loss(arg);
    *x = x0;
    return (up - down) / (2 * h);
}

int tsr_test_scatter_bf16(tsr_desc_t *d, const float *x)
{
    size_t n = (size_t)d->b * d->m * d->n;
    tsr_bf16_t *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = tsr_float_to_bf16(x[i]);
    int rc = tsr_desc_scatter(d, h, d->m, 0);
    free(h);
    return rc;
}
