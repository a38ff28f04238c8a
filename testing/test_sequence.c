/* Sequences: tsr_gemm_array_async and tsr_attention_array_async chained on
 * the caller's arrays with one wait, against plain references: a GEMM that
 * reads the previous one's C (the same view), through other views (other
 * tiles, transposed), and Q, K made by GEMMs feeding an attention. Errors:
 * the first one is kept, later calls submit nothing and return it, the
 * wait returns it, and the sequence is reusable after; NULL sequences,
 * outputs over inputs. Under MPI with 2 ranks: TSR_EINVAL with a message. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "tessera.h"
#include "tsr_compute.h"
#include "tsr_check.h"
#include "tsr_expect.h"
#include "tsr_testutil.h"

static double *random_doubles(int n, uint64_t seed)
{
    double *x = malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++)
        x[i] = tsr_random_value(seed, 0, i, 0);
    return x;
}

static double max_diff(const double *x, const double *y, int n)
{
    double e = 0;
    for (int i = 0; i < n; i++)
        e = fmax(e, fabs(x[i] - y[i]));
    return e;
}

/* C1 = A B, C2 = C1 D (C1 read as written: the same view), C3 = C1^T E in
 * other tiles (another view: the call waits for C1's tasks), C2 += A F
 * (C2 again), one wait. */
static void gemm_chain(void)
{
    enum { M = 50, K = 30, N = 41, P = 23 };
    double *A = random_doubles(M * K, 1), *B = random_doubles(K * N, 2), *D = random_doubles(N * P, 3);
    double *E = random_doubles(M * P, 4), *F = random_doubles(K * P, 5);
    double *C1 = calloc(M * N, sizeof(double)), *C2 = calloc(M * P, sizeof(double)), *C3 = calloc(N * P, sizeof(double));
    double *R1 = calloc(M * N, sizeof(double)), *R2 = calloc(M * P, sizeof(double)), *R3 = calloc(N * P, sizeof(double));
    const tsr_trans_t nt = TSR_NOTRANS;
    tsr_sequence_t *seq;
    char log[8192];
    CHECK_RC(tsr_sequence_create(&seq), TSR_SUCCESS);
    tsr_set_verbose(2); /* the sequence tells where it waits */
    tsr_capture_t c = tsr_capture_start();
    CHECK_RC(tsr_gemm_array_async(seq, TSR_FLOAT64, nt, nt, M, N, K, 1, A, M, B, K, 0, C1, M, 8,
                                  TSR_REDUCTION_ORDERED), TSR_SUCCESS);
    CHECK_RC(tsr_gemm_array_async(seq, TSR_FLOAT64, nt, nt, M, P, N, 1, C1, M, D, N, 0, C2, M, 8,
                                  TSR_REDUCTION_REDUX), TSR_SUCCESS);
    CHECK_RC(tsr_gemm_array_async(seq, TSR_FLOAT64, TSR_TRANS, nt, N, P, M, 1, C1, M, E, M, 0, C3, N, 16,
                                  TSR_REDUCTION_ORDERED), TSR_SUCCESS);
    CHECK_RC(tsr_gemm_array_async(seq, TSR_FLOAT64, nt, nt, M, P, K, 0.5, A, M, F, K, 1, C2, M, 8,
                                  TSR_REDUCTION_ORDERED), TSR_SUCCESS);
    tsr_capture_end(c, log, sizeof log);
    tsr_set_verbose(0);
    /* once: C3's call reads C1 through other tiles */
    const char *wait = "sequence: A is another view of memory an earlier call used";
    tsr_expect_message(log, wait, "C1 in other tiles");
    CHECK(strstr(log, wait) && !strstr(strstr(log, wait) + strlen(wait), "another view"));
    CHECK_RC(tsr_sequence_destroy(seq), TSR_SUCCESS);
    tsr_cpu_gemm(TSR_FLOAT64, nt, nt, M, N, K, 1, A, M, B, K, 0, R1, M, 1);
    tsr_cpu_gemm(TSR_FLOAT64, nt, nt, M, P, N, 1, R1, M, D, N, 0, R2, M, 1);
    tsr_cpu_gemm(TSR_FLOAT64, TSR_TRANS, nt, N, P, M, 1, R1, M, E, M, 0, R3, N, 1);
    tsr_cpu_gemm(TSR_FLOAT64, nt, nt, M, P, K, 0.5, A, M, F, K, 1, R2, M, 1);
    double tol = 100 * (M + N + K) * DBL_EPSILON;
    CHECK(max_diff(C1, R1, M * N) < tol);
    CHECK(max_diff(C2, R2, M * P) < tol);
    CHECK(max_diff(C3, R3, N * P) < tol);
    free(A); free(B); free(D); free(E); free(F);
    free(C1); free(C2); free(C3); free(R1); free(R2); free(R3);
}

/* Q = Wq X and K = Wk X (hd x T: one head), out = attention(Q, K, V), one
 * wait; then the same sequence again for a second result. */
static void attention_chain(int tile)
{
    enum { HD = 16, C = 24, T = 70 };
    float *Wq = malloc(sizeof(float) * HD * C), *Wk = malloc(sizeof(float) * HD * C), *X = malloc(sizeof(float) * C * T);
    float *V = malloc(sizeof(float) * HD * T), *Q = malloc(sizeof(float) * HD * T), *K = malloc(sizeof(float) * HD * T);
    float *out = malloc(sizeof(float) * HD * T), *Qr = malloc(sizeof(float) * HD * T), *Kr = malloc(sizeof(float) * HD * T);
    float *ref = malloc(sizeof(float) * HD * T);
    for (int i = 0; i < HD * C; i++)
        Wq[i] = (float)tsr_random_value(6, 0, i, 0), Wk[i] = (float)tsr_random_value(7, 0, i, 0);
    for (int i = 0; i < C * T; i++)
        X[i] = (float)tsr_random_value(8, 0, i, 0);
    for (int i = 0; i < HD * T; i++)
        V[i] = (float)tsr_random_value(9, 0, i, 0);
    tsr_sequence_t *seq;
    char log[8192];
    CHECK_RC(tsr_sequence_create(&seq), TSR_SUCCESS);
    for (int round = 0; round < 2; round++) {
        const tsr_trans_t nt = TSR_NOTRANS;
        tsr_set_verbose(2);
        tsr_capture_t c = tsr_capture_start();
        CHECK_RC(tsr_gemm_array_async(seq, TSR_FLOAT32, nt, nt, HD, T, C, 1, Wq, HD, X, C, 0, Q, HD, tile,
                                      TSR_REDUCTION_ORDERED), TSR_SUCCESS);
        CHECK_RC(tsr_gemm_array_async(seq, TSR_FLOAT32, nt, nt, HD, T, C, 1, Wk, HD, X, C, 0, K, HD, tile,
                                      TSR_REDUCTION_ORDERED), TSR_SUCCESS);
        CHECK_RC(tsr_attention_array_async(seq, 1, T, HD, Q, K, V, out, tile), TSR_SUCCESS);
        tsr_capture_end(c, log, sizeof log);
        tsr_set_verbose(0);
        CHECK(!strstr(log, "another view")); /* Q and K as the GEMMs wrote them: no wait */
        CHECK_RC(tsr_sequence_wait(seq), TSR_SUCCESS);
        tsr_cpu_gemm(TSR_FLOAT32, nt, nt, HD, T, C, 1, Wq, HD, X, C, 0, Qr, HD, 1);
        tsr_cpu_gemm(TSR_FLOAT32, nt, nt, HD, T, C, 1, Wk, HD, X, C, 0, Kr, HD, 1);
        tsr_test_attention_ref(1, T, HD, Qr, Kr, V, ref);
        double err = tsr_test_max_abs_err(out, ref, (size_t)HD * T);
        if (err > 1e-4)
            fprintf(stderr, "  attention chain, tile %d round %d: error %.3g\n", tile, round, err);
        CHECK(err <= 1e-4);
        for (int i = 0; i < HD * C; i++) /* another product next round */
            Wq[i] *= -0.5f;
    }
    CHECK_RC(tsr_sequence_destroy(seq), TSR_SUCCESS);
    free(Wq); free(Wk); free(X); free(V); free(Q); free(K); free(out); free(Qr); free(Kr); free(ref);
}

static void errors(void)
{
    static double A[64], B[64], C[64];
    static float F[64];
    const tsr_trans_t nt = TSR_NOTRANS;
    char log[4096];
    uint64_t before = tsr_tasks_submitted();
    tsr_capture_t c = tsr_capture_start();
    tsr_expect_error(tsr_gemm_array_async(NULL, TSR_FLOAT64, nt, nt, 8, 8, 8, 1, A, 8, B, 8, 0, C, 8, 4,
                                          TSR_REDUCTION_ORDERED), TSR_EINVAL, before, "NULL sequence");
    tsr_expect_error(tsr_attention_array_async(NULL, 1, 8, 8, F, F, F, F, 4), TSR_EINVAL, before, "NULL sequence");
    CHECK_RC(tsr_sequence_create(NULL), TSR_EINVAL);
    CHECK_RC(tsr_sequence_wait(NULL), TSR_EINVAL);
    tsr_capture_end(c, log, sizeof log);
    tsr_expect_message(log, "tsr_gemm_array_async: seq is NULL", "NULL sequence");
    tsr_expect_message(log, "tsr_attention_array_async: seq is NULL", "NULL sequence");
    CHECK_RC(tsr_sequence_destroy(NULL), TSR_SUCCESS);

    tsr_sequence_t *seq;
    CHECK_RC(tsr_sequence_create(&seq), TSR_SUCCESS);
    c = tsr_capture_start();
    tsr_expect_error(tsr_gemm_array_async(seq, TSR_FLOAT64, nt, nt, 8, 8, 8, 1, A, 8, B, 8, 0, A, 8, 4,
                                          TSR_REDUCTION_ORDERED), TSR_EINVAL, before, "C over A");
    tsr_capture_end(c, log, sizeof log);
    tsr_expect_message(log, "tsr_gemm_array_async: C overlaps A in memory", "C over A");
    /* the first error stays: a valid call submits nothing and returns it */
    tsr_expect_error(tsr_gemm_array_async(seq, TSR_FLOAT64, nt, nt, 8, 8, 8, 1, A, 8, B, 8, 0, C, 8, 4,
                                          TSR_REDUCTION_ORDERED), TSR_EINVAL, before, "after an error");
    tsr_expect_error(tsr_attention_array_async(seq, 1, 8, 8, F, F, F, F + 8, 4), TSR_EINVAL, before,
                     "after an error");
    CHECK_RC(tsr_sequence_wait(seq), TSR_EINVAL);
    /* and the sequence starts again */
    c = tsr_capture_start();
    tsr_expect_error(tsr_gemm_array_async(seq, TSR_FLOAT64, nt, nt, 8, 8, 8, 1, A, 8, B, 8, 0, C, 7, 4,
                                          TSR_REDUCTION_ORDERED), TSR_EINVAL, before, "ldc");
    tsr_capture_end(c, log, sizeof log);
    tsr_expect_message(log, "tsr_gemm_array_async: C is 0x", "ldc");
    CHECK_RC(tsr_sequence_wait(seq), TSR_EINVAL);
    CHECK_RC(tsr_gemm_array_async(seq, TSR_FLOAT64, nt, nt, 8, 8, 8, 1, A, 8, B, 8, 0, C, 8, 4,
                                  TSR_REDUCTION_ORDERED), TSR_SUCCESS);
    CHECK_RC(tsr_sequence_destroy(seq), TSR_SUCCESS);
}

/* Several ranks: the caller's arrays are not split over processes. */
static void several_ranks(void)
{
    static double A[64], B[64], C[64];
    char log[4096];
    tsr_sequence_t *seq;
    CHECK_RC(tsr_sequence_create(&seq), TSR_SUCCESS);
    uint64_t before = tsr_tasks_submitted();
    tsr_capture_t c = tsr_capture_start();
    tsr_expect_error(tsr_gemm_array_async(seq, TSR_FLOAT64, TSR_NOTRANS, TSR_NOTRANS, 8, 8, 8, 1, A, 8, B, 8, 0, C,
                                          8, 4, TSR_REDUCTION_ORDERED), TSR_EINVAL, before, "MPI");
    tsr_capture_end(c, log, sizeof log);
    tsr_expect_message(log, "one process only, not 2 ranks", "MPI");
    CHECK_RC(tsr_sequence_destroy(seq), TSR_EINVAL);
}

int main(int argc, char **argv)
{
    tsr_dist_t grid;
    if (tsr_test_init(&argc, &argv, &grid))
        return 2;
    if (tsr_size() > 1) {
        several_ranks();
    } else {
        gemm_chain();
        attention_chain(16);
        attention_chain(32); /* GEMM tiles of 32 rows over 16: the attention's view still */
        errors();
    }
    int rc = tsr_rank() == 0 ? tsr_check_report("test_sequence") : (tsr_checks_failed ? 1 : 0);
    tsr_finalize();
    return rc;
}
