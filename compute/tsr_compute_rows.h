/* Tessera compute layer: row ops, per-token functions over the m features of
 * one column of a tile (float32, column-major), each written once for both
 * kinds of worker: TSR_HD makes it a host and device function, the CPU runs
 * it over the tile's columns (compute/cpu/rows.c), the GPU runs one thread
 * per column (compute/cuda/rows.cu), and the runtime makes one op (codelet,
 * perf model tsr_<name>_float32) per entry of TSR_ROW_OPS
 * (runtime/rows_codelets.c). A new row op is its function here and its line
 * in TSR_ROW_OPS. No StarPU here. */
#ifndef TSR_COMPUTE_ROWS_H
#define TSR_COMPUTE_ROWS_H
#include <math.h>
#include <stddef.h>
#include "tsr_core.h"

#ifdef __CUDACC__
#define TSR_HD __host__ __device__
#else
#define TSR_HD
#endif

#define TSR_ROW_MAX_IN 4
#define TSR_ROW_MAX_OUT 4

/* A row op's tiles: inputs then outputs, each a pointer and the stride
 * between the values of consecutive tokens (its leading dimension; 0 for a
 * per-feature vector such as a weight, the same for every token). */
typedef struct {
    int m;  /* features per token */
    const float *in[TSR_ROW_MAX_IN];
    int ldin[TSR_ROW_MAX_IN];
    float *out[TSR_ROW_MAX_OUT];
    int ldout[TSR_ROW_MAX_OUT];
    float eps;
} tsr_rows_t;

/* RMSNorm forward of token t: y = x / sqrt(mean(x^2) + eps) * w, rstd = 1 / sqrt(mean(x^2) + eps).
 * in: x (m x n), w (m x 1); out: y (m x n), rstd (1 x n). */
static inline TSR_HD void tsr_row_rmsnorm_fwd(const tsr_rows_t *r, int t)
{
    const float *x = r->in[0] + (size_t)t * r->ldin[0], *w = r->in[1];
    float *y = r->out[0] + (size_t)t * r->ldout[0];
    float ss = 0.0f;
    for (int i = 0; i < r->m; i++)
        ss += x[i] * x[i];
    float s = 1.0f / sqrtf(ss / (float)r->m + r->eps);
    for (int i = 0; i < r->m; i++)
        y[i] = x[i] * s * w[i];
    r->out[1][(size_t)t * r->ldout[1]] = s;
}

/* The row ops: X(name, inputs, outputs, flops per element) for each
 * tsr_row_<name>. */
#define TSR_ROW_OPS(X) X(rmsnorm_fwd, 2, 2, 4)

typedef enum {
#define TSR_ROW_ENUM(name, nin, nout, flops) TSR_ROW_##name,
    TSR_ROW_OPS(TSR_ROW_ENUM)
#undef TSR_ROW_ENUM
    TSR_NROW_OPS
} tsr_row_op_t;

#ifdef __cplusplus
extern "C" {
#endif
/* Row op `op` on tokens 0..n-1 of r. */
void tsr_cpu_rows(tsr_row_op_t op, int n, const tsr_rows_t *r);
/* The same on the stream; 0, TSR_EINVAL (bad op or sizes) or TSR_ERUNTIME. */
int tsr_cuda_rows(void *stream, tsr_row_op_t op, int n, const tsr_rows_t *r);
#ifdef __cplusplus
}
#endif
#endif
