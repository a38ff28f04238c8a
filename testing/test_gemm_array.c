/* Solver-style use: tsr_gemm_array on plain column-major arrays (with a
 * padded leading dimension), against one BLAS call. */
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

int main(int argc, char **argv)
{
    if (tsr_test_init_one_worker(&argc, &argv) != 0)
        return 2;
    for (int t = 0; t < 4; t++)
        for (int tile = 7; tile <= 64; tile *= 3)
            run(t & 1 ? TSR_TRANS : TSR_NOTRANS, t & 2 ? TSR_TRANS : TSR_NOTRANS,
                tile == 21 ? TSR_REDUCTION_REDUX : TSR_REDUCTION_ORDERED, tile);
    return tsr_test_finish("test_gemm_array");
}
