/* The tiles --tiles auto picks for fixed problems, from fixed measurements:
 * the GEMM calibration, its task shapes, the attention tile-pair tasks and
 * every trial are written into the cache beforehand (made-up times, the
 * same on every machine: a smooth kernel model with a deterministic
 * jitter), so that nothing is measured and the choice is a function of the
 * problem alone. The expected tiles (and the model's time for them, to a
 * rounding error) are those the choosers picked before they shared one
 * driver (algorithms/tiles/search.c); the cache files are
 * unchanged afterwards (nothing was measured).   test_tile_search CACHE_DIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tessera.h"
#include "tsr_check.h"
#include "internal/tsr_tile_model.h"

/* A deterministic jitter in [0, 1) of a few integers. */
static double jitter(const int *v, int n)
{
    unsigned long long h = 1469598103934665603ull;
    for (int i = 0; i < n; i++)
        h = (h ^ (unsigned)v[i]) * 1099511628211ull;
    h ^= h >> 29;
    return (double)(h % 1000003) / 1000003.0;
}

/* The made-up kernel: a task's overhead, and a rate rising with the tile size. */
#define OVERHEAD 5e-6
#define RATE 5e9
static double efficiency(int t)
{
    return (double)t / (t + 64.0);
}

static double gemm_task(int mb, int nb, int kb)
{
    return OVERHEAD + 2.0 * mb * nb * (double)kb / (RATE * cbrt(efficiency(mb) * efficiency(nb) * efficiency(kb)));
}

/* The GEMM candidates along a dimension of n (gemm.c's list, no rule). */
static int gemm_sizes(int n, int *out)
{
    static const int sizes[] = { 32, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048 };
    int c = 0;
    for (int i = 0; i < 12; i++)
        if (sizes[i] < n)
            out[c++] = sizes[i];
    if (n <= 2048)
        out[c++] = n;
    return c;
}

typedef struct { int m, n, k; tsr_reduction_t accum; } product_t;

static const product_t PRODUCTS[] = { { 300, 200, 500, TSR_REDUCTION_ORDERED }, { 300, 200, 500, TSR_REDUCTION_REDUX },
                                      { 2000, 1000, 1100, TSR_REDUCTION_ORDERED } }; /* too slow to try */
#define NPRODUCTS 3

/* The cache files written (for the check that nothing was measured). */
static char written[4][4200];
static int nwritten;

/* A new cache file of the model or trials `name`, its key line written. */
static FILE *cache_file(const char *name, tsr_atomic_file_t *af)
{
    tsr_tile_cache_t c = { "", "" };
    tsr_tile_cache_init(&c, name);
    snprintf(written[nwritten++], sizeof written[0], "%s", c.path);
    FILE *f = tsr_tile_cache_write(&c, af);
    CHECK(f != NULL);
    return f;
}

/* The GEMM model: the calibrated squares, then every candidate shape of
 * the products (a jitter of up to +-20 % on the smooth model: the
 * refinement reorders the shortlist); and the trials of every candidate of
 * the products small enough to be tried. */
static void write_gemm(void)
{
    static const int squares[] = { 32, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048 };
    tsr_atomic_file_t af;
    FILE *f = cache_file("gemm float32", &af);
    for (int i = 0; f && i < 12; i++)
        fprintf(f, "%d %.17g\n", squares[i], gemm_task(squares[i], squares[i], squares[i]));
    int cm[16], cn[16], ck[16];
    for (int p = 0; f && p < NPRODUCTS; p++) {
        if (p > 0 && PRODUCTS[p].m == PRODUCTS[p - 1].m && PRODUCTS[p].n == PRODUCTS[p - 1].n &&
            PRODUCTS[p].k == PRODUCTS[p - 1].k)
            continue;
        int nm = gemm_sizes(PRODUCTS[p].m, cm), nn = gemm_sizes(PRODUCTS[p].n, cn), nk = gemm_sizes(PRODUCTS[p].k, ck);
        for (int a = 0; a < nm; a++)
            for (int b = 0; b < nn; b++)
                for (int d = 0; d < nk; d++) {
                    const int v[3] = { cm[a], cn[b], ck[d] };
                    fprintf(f, "%d %d %d %.17g\n", cm[a], cn[b], ck[d],
                            gemm_task(cm[a], cn[b], ck[d]) * (0.8 + 0.4 * jitter(v, 3)));
                }
    }
    if (f)
        tsr_tile_cache_commit(&af);
    f = cache_file("gemm trials float32", &af);
    for (int p = 0; f && p < NPRODUCTS - 1; p++) {
        const product_t *pr = &PRODUCTS[p];
        int nm = gemm_sizes(pr->m, cm), nn = gemm_sizes(pr->n, cn), nk = gemm_sizes(pr->k, ck);
        for (int a = 0; a < nm; a++)
            for (int b = 0; b < nn; b++)
                for (int d = 0; d < nk; d++) {
                    const int key[7] = { pr->m, pr->n, pr->k, (int)pr->accum, cm[a], cn[b], ck[d] };
                    double whole = 2.0 * pr->m * pr->n * (double)pr->k / (2 * RATE);
                    fprintf(f, "%d %d %d %d %d %d %d %.17g\n", key[0], key[1], key[2], key[3], key[4], key[5], key[6],
                            whole * (1.0 + jitter(key, 7)));
                }
    }
    if (f)
        tsr_tile_cache_commit(&af);
}

typedef struct { int T, hd, heads, bb, backward; tsr_reduction_t accum; } pass_t;

static const pass_t PASSES[] = { { 512, 64, 4, 1, 0, TSR_REDUCTION_ORDERED },
                                 { 512, 64, 4, 1, 1, TSR_REDUCTION_ORDERED },
                                 { 512, 64, 4, 1, 1, TSR_REDUCTION_REDUX },
                                 { 512, 64, 4096, 1, 1, TSR_REDUCTION_ORDERED } }; /* too large to try */
#define NPASSES 4

/* The tile-pair tasks of hd 64, bb 1 (fully visible and on the diagonal,
 * forward and backward) and the trials of every pair of the small passes. */
static void write_attention(void)
{
    static const int sizes[] = { 64, 128, 256, 512 };
    tsr_atomic_file_t af;
    FILE *f = cache_file("attention tasks", &af);
    for (int a = 0; f && a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int backward = 0; backward <= 1; backward++)
                for (int diagonal = 0; diagonal <= 1; diagonal++) {
                    const int key[6] = { 64, 1, sizes[a], sizes[b], backward, diagonal };
                    double s = (backward ? 2.5 : 1.0) * (diagonal ? 0.6 : 1.0) *
                               (OVERHEAD + 4.0 * 64 * sizes[a] * (double)sizes[b] /
                                               (RATE * sqrt(efficiency(sizes[a]) * efficiency(sizes[b]))));
                    fprintf(f, "64 1 %d %d %d %d %.17g\n", sizes[a], sizes[b], backward, diagonal,
                            s * (0.9 + 0.2 * jitter(key, 6)));
                }
    if (f)
        tsr_tile_cache_commit(&af);
    f = cache_file("attention trials", &af);
    for (int p = 0; f && p < NPASSES - 1; p++)
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 4; b++) {
                const pass_t *ps = &PASSES[p];
                const int key[8] = { ps->T, ps->hd, ps->heads, ps->bb, ps->backward, (int)ps->accum, sizes[a], sizes[b] };
                fprintf(f, "%d %d %d %d %d %d %d %d %.17g\n", key[0], key[1], key[2], key[3], key[4], key[5], key[6],
                        key[7], 0.01 * (1.0 + jitter(key, 8)));
            }
    if (f)
        tsr_tile_cache_commit(&af);
}

/* The text of the cache files written, concatenated (static). */
static const char *cache_text(void)
{
    static char text[1 << 20];
    size_t n = 0;
    for (int i = 0; i < nwritten; i++) {
        FILE *f = fopen(written[i], "r");
        if (f) {
            n += fread(text + n, 1, sizeof text - 1 - n, f);
            fclose(f);
        }
    }
    text[n] = '\0';
    return text;
}

int main(int argc, char **argv)
{
    if (!tsr_check_cache_dir_arg(argc, argv))
        return 2;
    tsr_config_t cfg;
    tsr_config_default(&cfg);
    cfg.ncpus = 2;
    cfg.ncuda = 0;
    CHECK_RC(tsr_init(&cfg, NULL, NULL), TSR_SUCCESS);
    write_gemm();
    write_attention();
    static char before[1 << 20];
    snprintf(before, sizeof before, "%s", cache_text());

    /* the tiles the choosers picked before the driver */
    static const int gemm_expected[NPRODUCTS][3] = { { 128, 192, 500 }, { 128, 192, 192 }, { 1024, 768, 1100 } };
    static const double gemm_predicted[NPRODUCTS] = { 0.0088224762531338013, 0.0097844525921323318,
                                                      0.45746535787910619 };
    for (int p = 0; p < NPRODUCTS; p++) {
        const product_t *pr = &PRODUCTS[p];
        tsr_tiles_t t = { 0 };
        CHECK_RC(tsr_gemm_auto_tiles(TSR_FLOAT32, pr->m, pr->n, pr->k, pr->accum, &t), TSR_SUCCESS);
        printf("gemm %dx%dx%d %s: %d x %d x %d, predicted %.17g s\n", pr->m, pr->n, pr->k,
               pr->accum == TSR_REDUCTION_REDUX ? "redux" : "ordered", t.mb, t.nb, t.kb, t.predicted_seconds);
        CHECK(t.mb == gemm_expected[p][0] && t.nb == gemm_expected[p][1] && t.kb == gemm_expected[p][2]);
        CHECK(fabs(t.predicted_seconds / gemm_predicted[p] - 1) < 1e-12);
    }
    static const int attention_expected[NPASSES][2] = { { 256, 256 }, { 128, 128 }, { 128, 512 }, { 128, 512 } };
    static const double attention_predicted[NPASSES] = { 0.019010731534411157, 0.052141158779512156,
                                                         0.029062338062436709, 29.457844287935188 };
    for (int p = 0; p < NPASSES; p++) {
        const pass_t *ps = &PASSES[p];
        tsr_tiles_t t = { 0 };
        CHECK_RC(tsr_attention_auto_tiles(ps->T, ps->hd, ps->heads, ps->bb, ps->backward, ps->accum, &t),
                 TSR_SUCCESS);
        int qb = t.qb, kb = t.kvb;
        double predicted = t.predicted_seconds;
        printf("attention T %d heads %d %s %s: %d x %d, predicted %.17g s\n", ps->T, ps->heads,
               ps->backward ? "backward" : "forward", ps->accum == TSR_REDUCTION_REDUX ? "redux" : "ordered", qb, kb,
               predicted);
        CHECK(qb == attention_expected[p][0] && kb == attention_expected[p][1]);
        CHECK(fabs(predicted / attention_predicted[p] - 1) < 1e-12);
    }
    CHECK(strcmp(cache_text(), before) == 0); /* nothing measured */
    tsr_finalize();
    return tsr_check_report("test_tile_search");
}
