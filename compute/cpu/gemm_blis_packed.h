/* Float32 GEMM on BLIS's micro-kernel with Tessera's packing (BLIS builds
 * only; see gemm_blis_packed.c for why). Internal to compute/cpu. */
#ifndef TSR_BLIS_PACKED_GEMM_H
#define TSR_BLIS_PACKED_GEMM_H
#include <blis.h>

/* Call once, after bli_init(). Returns 1 when the active BLIS configuration's
 * sgemm micro-kernel can be driven here, 0 otherwise (then every call below
 * returns 0). */
int tsr_blis_packed_gemm_init(void);

/* Single-threaded C = alpha op(A) op(B) + beta C, all column-major, with
 * bli_sgemm's arguments and results. Returns 0, having done nothing, for
 * cases it leaves to BLIS (an empty product, alpha == 0, no memory). */
int tsr_blis_packed_sgemm(trans_t ta, trans_t tb, dim_t m, dim_t n, dim_t k, float alpha, const float *A, inc_t lda,
                          const float *B, inc_t ldb, float beta, float *C, inc_t ldc);

#endif
