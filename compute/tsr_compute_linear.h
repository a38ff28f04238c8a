/* Tessera compute layer: per-tile kernels of the fused linear layers
 * (float32, column-major, raw pointers + leading dimensions, no StarPU).
 *
 * Head-split operands. An attention tensor [B*NH, hd, T] is stored per head:
 * a 3D tile holds `depth` heads, each an hd x cols matrix. When such a tile
 * is an operand of a GEMM whose other operands are plain 2D tiles, one GEMM
 * dimension (M, N or K) is cut in chunks of hd: chunk c of every operand
 * along that dimension is one head. tsr_chunked_t says where chunk c of an
 * operand starts (p + c * cstride) and its leading dimension; an operand that
 * does not span the cut dimension has cstride 0. So a plain 2D tile cut along
 * its rows has cstride = hd, cut along its columns cstride = hd * ld, and a
 * head tile has cstride = hd * cols (the distance between its matrices) with
 * ld = hd. The per-head GEMMs write each head's rows straight into its own
 * matrix: the reshape costs no copy.
 *
 * The other way, used by the CPU codelets: pack the head operand into a
 * workspace as one 2D matrix (or compute C there and unpack it into the
 * heads) and make a single GEMM. It copies the tile once but runs BLIS on
 * whole tiles instead of hd-row slivers: per-head GEMMs measured 7-15%
 * slower on 128- and 256-wide tiles (hd = 64), where the copy costs a few %. */
#ifndef TSR_COMPUTE_LINEAR_H
#define TSR_COMPUTE_LINEAR_H
#include <stddef.h>
#include "tsr_compute.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct { float *p; int ld; size_t cstride; } tsr_chunked_t;
typedef enum { TSR_CHUNK_NONE = 0, TSR_CHUNK_M, TSR_CHUNK_N, TSR_CHUNK_K } tsr_chunk_dim_t;

/* C = alpha op(A) op(B) + beta C (C m x n, op(A) m x k), as one GEMM per
 * chunk of csize along dim (the last chunk may be shorter); TSR_CHUNK_NONE:
 * one GEMM on A.p, B.p, C.p. beta == 0: C is not read. */
void tsr_cpu_gemm_chunked(tsr_trans_t ta, tsr_trans_t tb, int m, int n, int k, tsr_chunk_dim_t dim, int csize,
                          float alpha, tsr_chunked_t A, tsr_chunked_t B, float beta, tsr_chunked_t C,
                          int nthreads);

/* X ((depth*rows) x cols, leading dimension ldx) = the head tile's depth
 * matrices (rows x cols, ldh, hstride elements apart) stacked by rows. */
void tsr_cpu_heads_pack(int depth, int rows, int cols, const float *H, int ldh, size_t hstride, float *X, int ldx);
/* The reverse: H_z = X's rows [z*rows, (z+1)*rows) + beta H_z (beta 0: H is
 * not read). */
void tsr_cpu_heads_unpack(int depth, int rows, int cols, const float *X, int ldx, float beta, float *H, int ldh,
                          size_t hstride);

/* C(r, t) = bias[r] (bias NULL: 0), C m x n. */
void tsr_cpu_bias_fill(int m, int n, const float *bias, float *C, int ldc);
/* C(r, t) += bias[r] */
void tsr_cpu_bias_add(int m, int n, const float *bias, float *C, int ldc);
/* y[r] = beta y[r] + sum_t X(r, t) (beta == 0: y is not read), X m x n. */
void tsr_cpu_rowsum(int m, int n, const float *X, int ldx, float beta, float *y);

/* GeLU, tanh approximation (llm.c gelu_forward / gelu_backward: the same
 * function, evaluated as x sigmoid(2u), see tsr_compute_elem.h). */
float tsr_gelu(float x);
/* d gelu(x) / dx */
float tsr_gelu_grad(float x);
/* out = gelu(pre), m x n; out may be pre. */
void tsr_cpu_gelu_forward(int m, int n, const float *pre, int ldp, float *out, int ldo);
/* dpre = dout * gelu'(pre), m x n; dpre may be dout (in place). */
void tsr_cpu_gelu_backward(int m, int n, const float *pre, int ldp, const float *dout, int ldd,
                           float *dpre, int lddp);

/* Reshape between X, feature-major [nparts*C, B*T] (2D), and part `part` of
 * the head tensors [B*NH, hd, T] (3D; head z = b*NH + h holds features
 * part*C + h*hd + r of tokens b*T + t). A 2D tile of X starts at
 * (x_row0, x_col0); a 3D tile starts at head y_z0, row y_row0, token y_col0. */
typedef struct {
    int C, NH, hd, T, part;
    int x_row0, x_col0;
    int y_z0, y_row0, y_col0;
} tsr_heads_geom_t;

/* 1 when the X tile (xrows x xcols) and the head tile (depth x yrows x ycols)
 * share at least one element. */
int tsr_heads_overlap(const tsr_heads_geom_t *g, int xrows, int xcols, int depth, int yrows, int ycols);
/* On the elements the two tiles share: to_heads: Y = X + beta Y, else
 * X = Y + beta X (beta 0: the destination is not read). Y's matrices are
 * ystride elements apart, leading dimension ldy. */
void tsr_cpu_heads_copy(const tsr_heads_geom_t *g, int to_heads, float beta,
                        float *X, int xrows, int xcols, int ldx,
                        float *Y, int depth, int yrows, int ycols, int ldy, size_t ystride);

/* ---- CUDA (compute/cuda/linear.cu, built when TSR_USE_CUDA is on) --------
 * The same kernels with the same arguments on device pointers (g is a host
 * pointer), asynchronous on `stream` (a cudaStream_t) or on the stream of
 * `cublas` (a cublasHandle_t in CUBLAS_POINTER_MODE_HOST). Return 0,
 * TSR_EINVAL (bad sizes, checked before anything is queued) or TSR_ERUNTIME
 * (CUDA or cuBLAS failure). gemm_chunked makes one strided-batched cuBLAS
 * call for the full chunks of M or N and one GEMM per chunk of K. rowsum
 * adds the tokens in chunks (another order than the CPU's); GeLU uses the
 * formulas of tsr_compute_elem.h. No twin of heads_pack / heads_unpack: on
 * the GPU, gemm_chunked works on the head tiles directly. */
int tsr_cuda_gemm_chunked(void *cublas, tsr_dtype_t t, tsr_trans_t ta, tsr_trans_t tb, int m, int n, int k,
                          tsr_chunk_dim_t dim, int csize, float alpha, tsr_chunked_t A, tsr_chunked_t B, float beta,
                          tsr_chunked_t C);
int tsr_cuda_bias_fill(void *stream, int m, int n, const float *bias, float *C, int ldc);
int tsr_cuda_bias_add(void *stream, int m, int n, const float *bias, float *C, int ldc);
int tsr_cuda_rowsum(void *stream, int m, int n, const float *X, int ldx, float beta, float *y);
int tsr_cuda_gelu_forward(void *stream, int m, int n, const float *pre, int ldp, float *out, int ldo);
/* The linear layer's bf16 path (t TSR_FLOAT32 or TSR_BFLOAT16: the tiles'
 * storage, computed in float32): gemm_chunked above with t (bf16 operands
 * through cublasGemmEx / cublasGemmStridedBatchedEx, CUBLAS_COMPUTE_32F;
 * A.p, B.p, C.p then point to bf16 data and cstride counts bf16 elements),
 * bias_fill, rowsum (float sums) and gelu_forward on tiles of type t. */
int tsr_cuda_bias_fill_typed(void *stream, tsr_dtype_t t, int m, int n, const void *bias, void *C, int ldc);
int tsr_cuda_rowsum_typed(void *stream, tsr_dtype_t t, int m, int n, const void *X, int ldx, float beta, void *y);
int tsr_cuda_gelu_forward_typed(void *stream, tsr_dtype_t t, int m, int n, const void *pre, int ldp, void *out,
                                int ldo);
int tsr_cuda_gelu_backward(void *stream, int m, int n, const float *pre, int ldp, const float *dout, int ldd,
                           float *dpre, int lddp);
/* gelu_backward on tiles of type t (float32 or bf16: read into float, the
 * result rounded on store); dpre may be dout (in place). */
int tsr_cuda_gelu_backward_typed(void *stream, tsr_dtype_t t, int m, int n, const void *pre, int ldp,
                                 const void *dout, int ldd, void *dpre, int lddp);
int tsr_cuda_heads_copy(void *stream, const tsr_heads_geom_t *g, int to_heads, float beta,
                        float *X, int xrows, int xcols, int ldx,
                        float *Y, int depth, int yrows, int ycols, int ldy, size_t ystride);
/* heads_copy on tiles of type t (float32 or bf16; ystride in elements of t):
 * beta 0 copies the elements as they are, else float arithmetic rounded once. */
int tsr_cuda_heads_copy_typed(void *stream, tsr_dtype_t t, const tsr_heads_geom_t *g, int to_heads, float beta,
                              void *X, int xrows, int xcols, int ldx, void *Y, int depth, int yrows, int ycols,
                              int ldy, size_t ystride);

#ifdef __cplusplus
}
#endif
#endif
