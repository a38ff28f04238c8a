/* Tessera compute layer: per-tile kernels, pure functions on raw pointers
 * with leading dimensions (column-major). No StarPU here. */
#ifndef TSR_COMPUTE_H
#define TSR_COMPUTE_H
#include "tsr_core.h"

/* C = alpha op(A) op(B) + beta C; C is m x n, op(A) m x k. When beta == 0,
 * C is not read. nthreads: BLAS threads for this call (1 inside a task). */
void tsr_cpu_gemm(tsr_dtype_t t, tsr_trans_t ta, tsr_trans_t tb, int m, int n, int k,
                  double alpha, const void *A, int lda, const void *B, int ldb,
                  double beta, void *C, int ldc, int nthreads);
/* The same through the BLAS's own GEMM routine. tsr_cpu_gemm differs with
 * BLIS: its float32 calls in one thread (the tile tasks') run BLIS's
 * micro-kernel on Tessera's packing, with bitwise the same results where BLIS
 * packs too (its skx and generic kernels; its haswell/zen configurations run
 * small products on other kernels, so there the two agree to float
 * rounding). This one is the baseline benchmarks compare that with. */
void tsr_cpu_blas_gemm(tsr_dtype_t t, tsr_trans_t ta, tsr_trans_t tb, int m, int n, int k,
                       double alpha, const void *A, int lda, const void *B, int ldb,
                       double beta, void *C, int ldc, int nthreads);
/* A = alpha A */
void tsr_cpu_scale(tsr_dtype_t t, int m, int n, double alpha, void *A, int lda);
/* B = alpha A + beta B (beta == 0: B is not read) */
void tsr_cpu_add(tsr_dtype_t t, int m, int n, double alpha, const void *A, int lda,
                 double beta, void *B, int ldb);
/* A = 0 */
void tsr_cpu_zero(tsr_dtype_t t, int m, int n, void *A, int lda);

/* Name of the BLAS behind tsr_cpu_gemm ("BLIS" or "OpenBLAS"). */
const char *tsr_blas_name(void);
/* The BLAS, its version and the kernel set it runs, e.g. "BLIS 0.9.0, skx
 * kernels (chosen by Tessera ...)". With BLIS on an AVX-512 CPU and no
 * BLIS_ARCH_TYPE set, the first call (of this or tsr_cpu_gemm) selects BLIS's
 * Skylake-X kernels, which BLIS 0.9 does not pick on CPUs it does not know. */
const char *tsr_blas_description(void);

#endif
