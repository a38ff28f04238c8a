/* The one internal BLAS interface: every CPU tile kernel calls BLAS here. */
#include "tsr_build_config.h"
#include "tsr_compute.h"
#if TSR_BLAS_BLIS
#include <blis.h>
#else
#include <cblas.h>
#endif

const char *tsr_blas_name(void) { return TSR_BLAS_NAME; }

#if TSR_BLAS_BLIS
void tsr_cpu_gemm(tsr_dtype_t t, tsr_trans_t ta, tsr_trans_t tb, int m, int n, int k,
                  double alpha, const void *A, int lda, const void *B, int ldb,
                  double beta, void *C, int ldc, int nthreads)
{
    /* The per-call runtime object keeps the thread count local to this call,
     * so concurrent tasks with different sizes do not disturb each other. */
    rntm_t rntm = BLIS_RNTM_INITIALIZER;
    bli_rntm_set_num_threads(nthreads > 0 ? nthreads : 1, &rntm);
    trans_t bta = ta == TSR_TRANS ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE;
    trans_t btb = tb == TSR_TRANS ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE;
    if (t == TSR_FLOAT64) {
        double a = alpha, b = beta;
        bli_dgemm_ex(bta, btb, m, n, k, &a, (double *)A, 1, lda, (double *)B, 1, ldb,
                     &b, (double *)C, 1, ldc, NULL, &rntm);
    } else {
        float a = (float)alpha, b = (float)beta;
        bli_sgemm_ex(bta, btb, m, n, k, &a, (float *)A, 1, lda, (float *)B, 1, ldb,
                     &b, (float *)C, 1, ldc, NULL, &rntm);
    }
}
#else
static _Thread_local int openblas_threads_seen;

void tsr_cpu_gemm(tsr_dtype_t t, tsr_trans_t ta, tsr_trans_t tb, int m, int n, int k,
                  double alpha, const void *A, int lda, const void *B, int ldb,
                  double beta, void *C, int ldc, int nthreads)
{
    /* OpenBLAS's thread count is global: set it only when it changes. */
    if (nthreads < 1)
        nthreads = 1;
    if (openblas_threads_seen != nthreads || openblas_get_num_threads() != nthreads) {
        openblas_set_num_threads(nthreads);
        openblas_threads_seen = nthreads;
    }
    enum CBLAS_TRANSPOSE cta = ta == TSR_TRANS ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE ctb = tb == TSR_TRANS ? CblasTrans : CblasNoTrans;
    if (t == TSR_FLOAT64)
        cblas_dgemm(CblasColMajor, cta, ctb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    else
        cblas_sgemm(CblasColMajor, cta, ctb, m, n, k, (float)alpha, A, lda, B, ldb, (float)beta, C, ldc);
}
#endif
