/* The BLAS reports its kernel set, and BLIS does not run its generic kernels
 * on an AVX-512 CPU unless BLIS_ARCH_TYPE asks for them. tsr_cpu_gemm gives
 * the BLAS's own GEMM's results (with BLIS, its float32 calls run on
 * Tessera's packing) across edge sizes, blockings, transposes, padded leading
 * dimensions, and beta == 0 on a C full of NaN: within float rounding, as
 * BLIS's haswell/zen configurations run small products on other kernels, and
 * bitwise with the skx and the generic kernels (`test_blas generic` runs the
 * latter, whose micro-kernel prefers row-stored C). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "tsr_build_config.h"
#include "tsr_compute.h"
#include "tsr_check.h"
#if TSR_BLAS_BLIS
#include <blis.h>
#endif

static float value(size_t i) { return (float)((i * 7919) % 1000) / 500.0f - 1.0f; }

static int bitwise_different; /* results that were not bitwise equal */

/* One product in both routines; returns 1 when the results agree. */
static int same_as_blas_gemm(tsr_trans_t ta, tsr_trans_t tb, int m, int n, int k, double alpha, double beta)
{
    int pad = 3; /* leading dimensions larger than the rows */
    int ar = ta == TSR_TRANS ? k : m, ac = ta == TSR_TRANS ? m : k;
    int br = tb == TSR_TRANS ? n : k, bc = tb == TSR_TRANS ? k : n;
    int lda = ar + pad, ldb = br + pad, ldc = m + pad;
    float *A = malloc(sizeof(float) * lda * ac), *B = malloc(sizeof(float) * ldb * bc);
    float *C = malloc(sizeof(float) * ldc * n), *R = malloc(sizeof(float) * ldc * n);
    if (!A || !B || !C || !R) {
        free(A), free(B), free(C), free(R);
        return 0;
    }
    for (size_t i = 0; i < (size_t)lda * ac; i++) A[i] = value(i);
    for (size_t i = 0; i < (size_t)ldb * bc; i++) B[i] = value(i + 17);
    for (size_t i = 0; i < (size_t)ldc * n; i++) C[i] = R[i] = beta == 0.0 ? NAN : value(i + 5);
    tsr_cpu_gemm(TSR_FLOAT32, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, 1);
    tsr_cpu_blas_gemm(TSR_FLOAT32, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, R, ldc, 1);
    /* |entries| <= 1: each result is a sum of k terms of at most |alpha| */
    double tolerance = 4 * FLT_EPSILON * (k * fabs(alpha) + fabs(beta));
    int same = 1;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < ldc; i++) {
            float c = C[(size_t)j * ldc + i], r = R[(size_t)j * ldc + i];
            int bitwise = memcmp(&c, &r, sizeof c) == 0;
            bitwise_different += !bitwise;
            if (i >= m ? !bitwise /* the padding rows stay untouched */
                       : !(fabs((double)c - r) <= tolerance))
                same = 0;
        }
    if (!same)
        printf("differs: %c%c m %d n %d k %d alpha %g beta %g\n", ta == TSR_TRANS ? 'T' : 'N', tb == TSR_TRANS ? 'T' : 'N',
               m, n, k, alpha, beta);
    free(A), free(B), free(C), free(R);
    return same;
}

static void check_against_blas_gemm(void)
{
    /* below a micro-tile, micro-tile edges, k over several cache blocks,
     * m over a cache block (BLIS skx: MC 480), n over one (NC 3072) */
    const int shapes[][3] = { { 3, 2, 4 },     { 33, 13, 385 }, { 64, 24, 1000 }, { 500, 20, 50 },
                              { 40, 3100, 20 }, { 256, 384, 384 } };
    const double betas[] = { 0.0, 0.5 };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            for (int b = 0; b < 2; b++)
                CHECK(same_as_blas_gemm(t & 1 ? TSR_TRANS : TSR_NOTRANS, t & 2 ? TSR_TRANS : TSR_NOTRANS, shapes[s][0],
                                        shapes[s][1], shapes[s][2], 1.5, betas[b]));
    printf("%d results not bitwise equal to the BLAS's own GEMM\n", bitwise_different);
    const char *d = tsr_blas_description();
    if (TSR_BLAS_BLIS && (strstr(d, "skx kernels") || strstr(d, "generic kernels")))
        CHECK(bitwise_different == 0);
}

/* `test_blas generic`: BLIS's generic kernels, whose micro-kernel prefers
 * row-stored C (Tessera's packing then computes C^T = op(B)^T op(A)^T). */
static int select_generic_kernels(void)
{
#if TSR_BLAS_BLIS
    char id[16];
    snprintf(id, sizeof id, "%d", (int)BLIS_ARCH_GENERIC);
    return setenv("BLIS_ARCH_TYPE", id, 1);
#else
    return 0;
#endif
}

int main(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "generic") != 0 || select_generic_kernels() != 0)) {
        fprintf(stderr, "usage: %s [generic]\n", argv[0]);
        return 2;
    }
    const char *d = tsr_blas_description();
    printf("%s\n", d);
    CHECK(strstr(d, TSR_BLAS_NAME) == d);
    CHECK(strstr(d, " kernels") != NULL);
    if (TSR_BLAS_BLIS) /* the packing below is Tessera's */
        CHECK(strstr(d, "float32 tile GEMMs packed by Tessera") != NULL);
    __builtin_cpu_init();
    int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                 __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
    if (TSR_BLAS_BLIS && argc > 1)
        CHECK(strstr(d, "generic kernels") != NULL);
    if (TSR_BLAS_BLIS && avx512 && !getenv("BLIS_ARCH_TYPE"))
        CHECK(strstr(d, "generic") == NULL && strstr(d, "skx kernels") != NULL);
    /* the kernels work: a 3 x 2 x 4 product */
    float A[12], B[8], C[6];
    for (int i = 0; i < 12; i++) A[i] = (float)(i + 1);
    for (int i = 0; i < 8; i++) B[i] = (float)(i % 3);
    tsr_cpu_gemm(TSR_FLOAT32, TSR_NOTRANS, TSR_NOTRANS, 3, 2, 4, 1.0, A, 3, B, 4, 0.0, C, 3, 1);
    for (int j = 0; j < 2; j++)
        for (int i = 0; i < 3; i++) {
            float ref = 0;
            for (int l = 0; l < 4; l++)
                ref += A[l * 3 + i] * B[j * 4 + l];
            CHECK(C[j * 3 + i] == ref);
        }
    check_against_blas_gemm();
    return tsr_check_report("test_blas");
}
