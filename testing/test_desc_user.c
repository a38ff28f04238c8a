/* tsr_desc_create_user / tsr_desc_create_2d_user: descriptors whose tiles are
 * views of the caller's array (no copy). tsr_gemm on them against one BLAS
 * call, 2D with padded leading dimensions and batched 3D; the padding is
 * left untouched and the arrays are never freed (they are static here);
 * bad arguments fail with a message; wrapping a large array leaves its
 * values as they were. Under MPI with 2 ranks: TSR_EINVAL. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include "tessera.h"
#include "tsr_compute.h"
#include "tsr_check.h"
#include "tsr_expect.h"

enum { M = 45, N = 33, K = 27, PAD = 3, BATCH = 3 };
static double A[BATCH * (M + PAD) * K], B[BATCH * (K + PAD) * N], C[BATCH * (M + PAD) * N],
    Cref[BATCH * (M + PAD) * N];

static void fill(double *x, int n, uint64_t seed)
{
    for (int i = 0; i < n; i++)
        x[i] = tsr_random_value(seed, 0, i, 0);
}

/* C = 0.7 A B + 0.3 C on views of the static arrays, batch matrices of them
 * in tiles bb x mb x nb (k tiles kb). */
static void gemm_case(int batch, int bb, int mb, int nb, int kb, tsr_reduction_t accum)
{
    int lda = M + PAD, ldb = K + PAD, ldc = M + PAD;
    fill(A, batch * lda * K, 1);
    fill(B, batch * ldb * N, 2);
    fill(C, batch * ldc * N, 3);
    for (int i = 0; i < batch * ldc * N; i++)
        Cref[i] = C[i];
    for (int z = 0; z < batch; z++)
        tsr_cpu_gemm(TSR_FLOAT64, TSR_NOTRANS, TSR_NOTRANS, M, N, K, 0.7, A + z * lda * K, lda, B + z * ldb * N, ldb,
                     0.3, Cref + z * ldc * N, ldc, 1);
    tsr_desc_t *dA, *dB, *dC;
    CHECK_RC(tsr_desc_create_user(&dA, TSR_FLOAT64, batch, M, K, bb, mb, kb, A, lda), TSR_SUCCESS);
    CHECK_RC(tsr_desc_create_user(&dB, TSR_FLOAT64, batch, K, N, bb, kb, nb, B, ldb), TSR_SUCCESS);
    CHECK_RC(tsr_desc_create_user(&dC, TSR_FLOAT64, batch, M, N, bb, mb, nb, C, ldc), TSR_SUCCESS);
    CHECK_RC(tsr_gemm(TSR_NOTRANS, TSR_NOTRANS, 0.7, dA, dB, 0.3, dC, accum), TSR_SUCCESS);
    /* destroy waits and leaves the values in C (and frees nothing of it) */
    tsr_desc_destroy(dA);
    tsr_desc_destroy(dB);
    tsr_desc_destroy(dC);
    double err = 0;
    for (int i = 0; i < batch * ldc * N; i++) /* the padding rows too: untouched */
        err = fmax(err, fabs(C[i] - Cref[i]));
    if (err >= 10 * K * DBL_EPSILON)
        fprintf(stderr, "  batch %d bb %d tiles %d x %d x %d: error %.3g\n", batch, bb, mb, nb, kb, err);
    CHECK(err < 10 * K * DBL_EPSILON);
}

/* tsr_desc_create_2d_user refused with EINVAL, no descriptor made, and a
 * message saying text. */
static void expect_einval(tsr_dtype_t t, int m, int n, int nb, double *array, int ld, const char *text,
                          const char *what)
{
    char log[4096];
    tsr_desc_t *d = (tsr_desc_t *)1;
    tsr_capture_t c = tsr_capture_start();
    int rc = tsr_desc_create_2d_user(&d, t, m, n, 8, nb, array, ld);
    tsr_capture_end(c, log, sizeof log);
    CHECK_RC(rc, TSR_EINVAL);
    CHECK(d == NULL);
    tsr_expect_message(log, text, what);
}

static void bad_arguments(void)
{
    char log[4096];
    tsr_desc_t *d = NULL;
    expect_einval(TSR_FLOAT64, M, N, 8, NULL, M, "array (nil) with leading dimension 45 for 45 rows", "NULL array");
    expect_einval(TSR_FLOAT64, M, N, 8, C, M - 1, "leading dimension 44 for 45 rows", "ld < m");
    expect_einval(TSR_FLOAT64, M, 0, 8, C, M, "must be positive", "n = 0");
    expect_einval((tsr_dtype_t)7, M, N, 8, C, M, "unknown element type 7", "dtype");
    /* a tile that would span more elements than StarPU's 32-bit strides */
    expect_einval(TSR_FLOAT64, M, 70000, 70000, C, 70000, "more than StarPU's 4294967295", "ld x nb");
    CHECK_RC(tsr_desc_create_2d_user(NULL, TSR_FLOAT64, M, N, 8, 8, C, M), TSR_EINVAL);

    /* the copies and reductions of the tile layer read packed tiles: refused */
    CHECK_RC(tsr_desc_create_2d_user(&d, TSR_FLOAT64, M, N, 8, 8, C, M), TSR_SUCCESS);
    uint64_t before = tsr_tasks_submitted();
    double v;
    tsr_capture_t c = tsr_capture_start();
    tsr_expect_error(tsr_desc_scatter(d, A, M, 0), TSR_EINVAL, before, "scatter");
    tsr_expect_error(tsr_desc_gather(d, A, M, 0), TSR_EINVAL, before, "gather");
    tsr_expect_error(tsr_desc_fill_random(d, 1), TSR_EINVAL, before, "fill");
    tsr_expect_error(tsr_desc_norm(d, TSR_NORM_MAX, &v), TSR_EINVAL, before, "norm");
    tsr_expect_error(tsr_desc_sum(d, &v), TSR_EINVAL, before, "sum");
    tsr_capture_end(c, log, sizeof log);
    tsr_expect_message(log, "is over the caller's array (tsr_desc_create_user)", "scatter");
    CHECK_RC(tsr_desc_destroy(d), TSR_SUCCESS);
}

/* An array of several huge pages is advised onto them when wrapped
 * (MADV_HUGEPAGE, MADV_COLLAPSE where the kernel has it): its values, and
 * those of the memory around it, are unchanged. The array starts 8 bytes
 * past a page, so that only its 2 MiB-aligned interior is advised. */
static void huge_page_advice(void)
{
    enum { ROWS = 1000, COLS = 1000, EXTRA = 1 << 16 }; /* 7.6 MiB of doubles, and 512 KiB on each side */
    size_t total = (size_t)ROWS * COLS + 2 * EXTRA;
    double *buffer = malloc(total * sizeof *buffer);
    CHECK(buffer != NULL);
    if (!buffer)
        return;
    fill(buffer, (int)total, 4);
    tsr_desc_t *d;
    CHECK_RC(tsr_desc_create_2d_user(&d, TSR_FLOAT64, ROWS, COLS, 256, 256, buffer + EXTRA + 1, ROWS), TSR_SUCCESS);
    tsr_desc_destroy(d);
    int changed = 0;
    for (size_t i = 0; i < total; i++)
        changed += buffer[i] != tsr_random_value(4, 0, (int)i, 0);
    CHECK(changed == 0);
    free(buffer);
}

/* Several ranks: refused with a message. */
static void several_ranks(void)
{
    expect_einval(TSR_FLOAT64, M, N, 8, C, M, "one process only, not 2 ranks", "MPI");
}

int main(int argc, char **argv)
{
    tsr_config_t cfg;
    tsr_config_default(&cfg);
    cfg.ncpus = 2;
    if (tsr_init(&cfg, &argc, &argv) != 0)
        return 2;
    if (tsr_size() > 1) {
        several_ranks();
    } else {
        gemm_case(1, 1, 8, 8, 8, TSR_REDUCTION_ORDERED);
        gemm_case(1, 1, 16, 7, 5, TSR_REDUCTION_REDUX);
        gemm_case(1, 1, 64, 64, 64, TSR_REDUCTION_ORDERED);
        gemm_case(BATCH, 2, 16, 11, 9, TSR_REDUCTION_ORDERED);
        gemm_case(BATCH, 3, 7, 33, 4, TSR_REDUCTION_REDUX);
        bad_arguments();
        huge_page_advice();
    }
    int rc = tsr_rank() == 0 ? tsr_check_report("test_desc_user") : (tsr_checks_failed ? 1 : 0);
    tsr_finalize();
    return rc;
}
