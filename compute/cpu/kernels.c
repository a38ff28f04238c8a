/* Plain-C tile kernels (element-wise); GEMM lives in blas.c. */
#include <string.h>
#include "tsr_compute.h"

#define TSR_COLUMN(T, P, ld, c) ((T *)(P) + (size_t)(c) * (ld))

void tsr_cpu_scale(tsr_dtype_t t, int m, int n, double alpha, void *A, int lda)
{
    for (int c = 0; c < n; c++) {
        if (t == TSR_FLOAT64) {
            double *a = TSR_COLUMN(double, A, lda, c);
            for (int r = 0; r < m; r++)
                a[r] *= alpha;
        } else {
            float *a = TSR_COLUMN(float, A, lda, c), s = (float)alpha;
            for (int r = 0; r < m; r++)
                a[r] *= s;
        }
    }
}

void tsr_cpu_add(tsr_dtype_t t, int m, int n, double alpha, const void *A, int lda,
                 double beta, void *B, int ldb)
{
    for (int c = 0; c < n; c++) {
        if (t == TSR_FLOAT64) {
            const double *a = TSR_COLUMN(const double, A, lda, c);
            double *b = TSR_COLUMN(double, B, ldb, c);
            for (int r = 0; r < m; r++)
                b[r] = beta == 0.0 ? alpha * a[r] : alpha * a[r] + beta * b[r];
        } else {
            const float *a = TSR_COLUMN(const float, A, lda, c);
            float *b = TSR_COLUMN(float, B, ldb, c), fa = (float)alpha, fb = (float)beta;
            if (beta == 0.0)
                for (int r = 0; r < m; r++)
                    b[r] = fa * a[r];
            else
                for (int r = 0; r < m; r++)
                    b[r] = fa * a[r] + fb * b[r];
        }
    }
}

void tsr_cpu_zero(tsr_dtype_t t, int m, int n, void *A, int lda)
{
    size_t es = tsr_dtype_size(t); /* +0 is all zero bits in every type */
    if (lda == m) {
        memset(A, 0, (size_t)m * n * es);
        return;
    }
    for (int c = 0; c < n; c++)
        memset((char *)A + (size_t)c * lda * es, 0, (size_t)m * es);
}
