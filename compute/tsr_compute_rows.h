/* Tessera compute layer: row ops, per-token functions over the m features of
 * one column of a tile (float32, column-major), each written once for both
 * kinds of worker: TSR_HD makes it a host and device function, the CPU runs
 * it over the tile's columns (compute/cpu/rows.c), the GPU runs one thread
 * per column (compute/cuda/rows.cu), and the runtime makes one op (codelet,
 * perf model tsr_<name>_float32) per entry of TSR_ROW_OPS
 * (runtime/rows_codelets.c). A new row op is its function here and its line
 * in TSR_ROW_OPS. No StarPU here.
 *
 * A row function only ever writes token t's values of its outputs; the kit
 * does the rest: an output that the task adds into (TSR_ACCUMULATE), and a
 * summed output (a per-feature sum over the tile's tokens, such as a weight
 * gradient), are staged: the function writes into a float32 scratch, token
 * t's values at column t, and the kit then adds them into the tile or sums
 * them over the tokens, in token order on both kinds of worker. */
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
 * per-feature vector such as a weight, the same for every token). Token t's
 * values of output k are at out[k] + t * ldout[k], mout[k] of them; for a
 * summed output these are token t's terms of the sum. */
typedef struct {
    int m;  /* features per token */
    const float *in[TSR_ROW_MAX_IN];
    int ldin[TSR_ROW_MAX_IN];
    float *out[TSR_ROW_MAX_OUT];
    int ldout[TSR_ROW_MAX_OUT];
    int mout[TSR_ROW_MAX_OUT];          /* values per token: m, or 1 (a per-token statistic) */
    tsr_write_t write[TSR_ROW_MAX_OUT]; /* overwrite the tile, or add into it */
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

/* RMSNorm backward of token t, with xhat = x * rstd:
 *   dx = rstd * (w dy - xhat * mean(w dy xhat)), token t's term of dw: dy xhat.
 * in: dy (m x n), x (m x n), w (m x 1), rstd (1 x n); out: dx (m x n), dw (m x 1, summed). */
static inline TSR_HD void tsr_row_rmsnorm_bwd(const tsr_rows_t *r, int t)
{
    const float *dy = r->in[0] + (size_t)t * r->ldin[0], *x = r->in[1] + (size_t)t * r->ldin[1], *w = r->in[2];
    float s = r->in[3][(size_t)t * r->ldin[3]];
    float *dx = r->out[0] + (size_t)t * r->ldout[0], *dw = r->out[1] + (size_t)t * r->ldout[1];
    float dot = 0.0f;
    for (int i = 0; i < r->m; i++)
        dot += w[i] * dy[i] * x[i] * s;
    float mean = dot / (float)r->m;
    for (int i = 0; i < r->m; i++) {
        float xhat = x[i] * s;
        dx[i] = s * (w[i] * dy[i] - xhat * mean);
        dw[i] = dy[i] * xhat;
    }
}

/* The row ops: X(name, inputs, outputs, summed, flops per element) for each
 * tsr_row_<name>; the last `summed` outputs are summed over the tokens. */
#define TSR_ROW_OPS(X) X(rmsnorm_fwd, 2, 2, 0, 4) X(rmsnorm_bwd, 4, 2, 1, 10)

typedef enum {
#define TSR_ROW_ENUM(name, nin, nout, nsum, flops) TSR_ROW_##name,
    TSR_ROW_OPS(TSR_ROW_ENUM)
#undef TSR_ROW_ENUM
    TSR_NROW_OPS
} tsr_row_op_t;

/* A row op's entry in TSR_ROW_OPS. */
typedef struct { int nin, nout, nsum; double flops; } tsr_row_info_t;
static inline tsr_row_info_t tsr_row_info(tsr_row_op_t op)
{
    static const tsr_row_info_t info[] = {
#define TSR_ROW_INFO(name, nin, nout, nsum, flops) { nin, nout, nsum, flops },
        TSR_ROW_OPS(TSR_ROW_INFO)
#undef TSR_ROW_INFO
    };
    return info[op];
}

/* ---- the kit's staging, shared by both kinds of worker --------------------- */

/* Whether output k of op goes through a scratch (mout[k] x n, leading
 * dimension mout[k]): a summed output, or one added into. */
static inline int tsr_row_staged(tsr_row_op_t op, const tsr_rows_t *r, int k)
{
    tsr_row_info_t info = tsr_row_info(op);
    return k >= info.nout - info.nsum || r->write[k] == TSR_ACCUMULATE;
}

/* Summed output k, row i: the sum of the n tokens' terms staged in s, in
 * token order, written or added into the tile's one column. */
static inline TSR_HD void tsr_row_sum_staged(const tsr_rows_t *r, int k, const float *s, int n, int i)
{
    float sum = 0.0f;
    for (int t = 0; t < n; t++)
        sum += s[i + (size_t)t * r->mout[k]];
    float *o = r->out[k] + i;
    *o = r->write[k] == TSR_ACCUMULATE ? *o + sum : sum;
}

/* Output k, token t: its values staged in s added into the tile. */
static inline TSR_HD void tsr_row_add_staged(const tsr_rows_t *r, int k, const float *s, int t)
{
    float *o = r->out[k] + (size_t)t * r->ldout[k];
    const float *v = s + (size_t)t * r->mout[k];
    for (int i = 0; i < r->mout[k]; i++)
        o[i] += v[i];
}

#ifdef __cplusplus
extern "C" {
#endif
/* Row op `op` on tokens 0..n-1 of r: 0, TSR_EINVAL (bad op or sizes) or
 * TSR_ENOMEM (no memory for the staging). */
int tsr_cpu_rows(tsr_row_op_t op, int n, const tsr_rows_t *r);
/* The same on the stream; 0, TSR_EINVAL or TSR_ERUNTIME. */
int tsr_cuda_rows(void *stream, tsr_row_op_t op, int n, const tsr_rows_t *r);
#ifdef __cplusplus
}
#endif
#endif
