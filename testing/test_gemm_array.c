/* Solver-style use: tsr_gemm_array on plain column-major arrays (with a
 * padded leading dimension), against one BLAS call: in place with one
 * process, copied under MPI; C = A B with C over A (copied); bad arguments
 * fail with a message and submit nothing. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include "tessera.h"
#include "tsr_compute.h"
#include "tsr_check.h"
#include "tsr_expect.h"
#include "tsr_testutil.h"

static void run(tsr_trans_t ta, tsr_trans_t tb, tsr_reduction_t accum, int tile)
{
    const int m = 45, n = 33, k = 27, pad = 2;
    int lda = (ta == TSR_TRANS ? k : m) + pad, ldb = (tb == TSR_TRANS ? n : k) + pad, ldc = m + pad;
    int root = tsr_rank() == 0;
    double *A = NULL, *B = NULL, *C = NULL, *Cref = NULL;
    if (root) {
        A = malloc(sizeof(double) * lda * (ta == TSR_TRANS ? m : k));
        B = malloc(sizeof(double) * ldb * (tb == TSR_TRANS ? k : n));
        C = malloc(sizeof(double) * ldc * n);
        Cref = malloc(sizeof(double) * ldc * n);
        for (int i = 0; i < lda * (ta == TSR_TRANS ? m : k); i++)
            A[i] = tsr_random_value(1, 0, i, 0);
        for (int i = 0; i < ldb * (tb == TSR_TRANS ? k : n); i++)
            B[i] = tsr_random_value(2, 0, i, 0);
        for (int i = 0; i < ldc * n; i++)
            C[i] = Cref[i] = tsr_random_value(3, 0, i, 0);
        tsr_cpu_gemm(TSR_FLOAT64, ta, tb, m, n, k, 0.7, A, lda, B, ldb, 0.3, Cref, ldc, 1);
    }
    CHECK_RC(tsr_gemm_array(TSR_FLOAT64, ta, tb, m, n, k, 0.7, A, lda, B, ldb, 0.3, C, ldc, tile, accum),
             TSR_SUCCESS);
    if (root) {
        double err = 0;
        for (int j = 0; j < n; j++)
            for (int i = 0; i < ldc; i++) /* padding rows must be untouched */
                err = fmax(err, fabs(C[j * ldc + i] - Cref[j * ldc + i]));
        CHECK(err < 10 * k * DBL_EPSILON);
    }
    free(A); free(B); free(C); free(Cref);
}

/* C = A B with C the same array as A: the copying path (in place, tasks
 * would overwrite tiles of A still to be read). */
static void c_over_a(void)
{
    enum { N = 40 };
    double *A = malloc(sizeof(double) * N * N), *B = malloc(sizeof(double) * N * N), *ref = malloc(sizeof(double) * N * N);
    for (int i = 0; i < N * N; i++)
        A[i] = tsr_random_value(4, 0, i, 0), B[i] = tsr_random_value(5, 0, i, 0);
    tsr_cpu_gemm(TSR_FLOAT64, TSR_NOTRANS, TSR_NOTRANS, N, N, N, 1.0, A, N, B, N, 0.0, ref, N, 1);
    CHECK_RC(tsr_gemm_array(TSR_FLOAT64, TSR_NOTRANS, TSR_NOTRANS, N, N, N, 1.0, A, N, B, N, 0.0, A, N, 16,
                            TSR_REDUCTION_ORDERED), TSR_SUCCESS);
    double err = 0;
    for (int i = 0; i < N * N; i++)
        err = fmax(err, fabs(A[i] - ref[i]));
    CHECK(err < 10 * N * DBL_EPSILON);
    free(A); free(B); free(ref);
}

/* tsr_gemm_array (m = n = 8, B and C 8 x 8, beta 0) refused with EINVAL, no
 * task submitted since before, and a message saying text; the log in log. */
static void expect_gemm_array_error(tsr_dtype_t t, tsr_trans_t ta, int k, const double *A, int lda, int tile,
                                    tsr_reduction_t accum, const char *text, uint64_t before, char *log, size_t size)
{
    static double B[64], C[64];
    tsr_capture_t c = tsr_capture_start();
    int rc = tsr_gemm_array(t, ta, TSR_NOTRANS, 8, 8, k, 1, A, lda, B, 8, 0, C, 8, tile, accum);
    tsr_capture_end(c, log, size);
    tsr_expect_error(rc, TSR_EINVAL, before, text);
    tsr_expect_message(log, text, text);
}

static void bad_arguments(void)
{
    static double A[64];
    char log[4096];
    uint64_t before = tsr_tasks_submitted();
    const tsr_reduction_t ordered = TSR_REDUCTION_ORDERED;
    expect_gemm_array_error(TSR_FLOAT64, TSR_NOTRANS, 8, NULL, 8, 4, ordered, "tsr_gemm_array: A is (nil)", before,
                            log, sizeof log);
    expect_gemm_array_error(TSR_FLOAT64, TSR_TRANS, 4, A, 3, 4, ordered, "A is 0x", before, log, sizeof log);
    tsr_expect_message(log, "with leading dimension 3, for 4 rows", "lda");
    expect_gemm_array_error(TSR_FLOAT64, (tsr_trans_t)5, 8, A, 8, 4, ordered, "tsr_gemm_array: bad transpose (5, 0)",
                            before, log, sizeof log);
    expect_gemm_array_error(TSR_FLOAT64, TSR_NOTRANS, 8, A, 8, 0, ordered,
                            "tile = 0: m, n, k and tile must be at least 1", before, log, sizeof log);
    expect_gemm_array_error(TSR_FLOAT64, TSR_NOTRANS, 8, A, 8, 4, (tsr_reduction_t)3, "tsr_gemm_array: accum", before,
                            log, sizeof log);
    expect_gemm_array_error((tsr_dtype_t)9, TSR_NOTRANS, 8, A, 8, 4, ordered, "tsr_gemm_array: unknown element type 9",
                            before, log, sizeof log);
}

int main(int argc, char **argv)
{
    if (tsr_test_init_one_worker(&argc, &argv) != 0)
        return 2;
    for (int t = 0; t < 4; t++)
        for (int tile = 7; tile <= 64; tile *= 3)
            run(t & 1 ? TSR_TRANS : TSR_NOTRANS, t & 2 ? TSR_TRANS : TSR_NOTRANS,
                tile == 21 ? TSR_REDUCTION_REDUX : TSR_REDUCTION_ORDERED, tile);
    if (tsr_size() == 1) {
        c_over_a();
        bad_arguments();
    }
    return tsr_test_finish("test_gemm_array");
}
