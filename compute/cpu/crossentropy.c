/* Softmax cross-entropy tile kernels. The softmax statistics of a token are
 * (max, sum exp(x - max)) over the vocabulary rows, reduced across vocabulary
 * tiles with merge(); a sum of 0 marks an empty statistic. */
#include <math.h>
#include "tsr_compute_crossentropy.h"
#include "simd_math.h"
#include "tsr_compute_elem.h" /* after simd_math.h: its pragma applies to these too */

/* sum of exp(x[r] - mx), r < n: LANES float partial sums (each of at most
 * n / LANES terms <= 1) added in double; one pass, vectorised. */
static inline double exp_sum(const float *x, int n, float mx)
{
    float lane[LANES] = { 0 };
    int r = 0;
    for (; r + LANES <= n; r += LANES)
        for (int u = 0; u < LANES; u++)
            lane[u] += exp_approx(x[r + u] - mx);
    double sum = 0.0;
    for (; r < n; r++)
        sum += exp_approx(x[r] - mx);
    for (int u = 0; u < LANES; u++)
        sum += lane[u];
    return sum;
}

TSR_SIMD_CLONES
void tsr_cpu_softmax_stats(int rows, int cols, const float *x, int ldx, float *stats, int lds, tsr_write_t mode)
{
    for (int c = 0; c < cols; c++) {
        const float *col = x + (size_t)c * ldx;
        float mx = rows > 0 ? max_of(col, rows) : -INFINITY;
        double sum = rows > 0 ? exp_sum(col, rows, mx) : 0.0;
        float *st = stats + (size_t)c * lds;
        if (mode == TSR_ACCUMULATE) {
            tsr_elem_softmax_merge(&st[0], &st[1], mx, (float)sum);
        } else {
            st[0] = mx;
            st[1] = (float)sum;
        }
    }
}

void tsr_cpu_softmax_stats_merge(int cols, float *dst, int ldd, const float *src, int lds)
{
    for (int c = 0; c < cols; c++) {
        float *d = dst + (size_t)c * ldd;
        const float *s = src + (size_t)c * lds;
        tsr_elem_softmax_merge(&d[0], &d[1], s[0], s[1]);
    }
}

float tsr_cpu_crossentropy_loss(const float *stats, float target_logit)
{
    return tsr_elem_crossentropy_loss(stats, target_logit);
}

void tsr_cpu_crossentropy_loss_refs(float *loss, int ldl, const float *stats, int lds, const float *const *logits,
                                    const int *ldx, int nsrc, const tsr_loss_ref_t *refs, int nrefs)
{
    (void)nsrc; /* the CUDA twin needs it to stage logits and ldx */
    for (int k = 0; k < nrefs; k++) {
        tsr_loss_ref_t e = refs[k];
        float x = logits[e.src][(size_t)e.col * ldx[e.src] + e.row];
        loss[(size_t)e.col * ldl] = tsr_cpu_crossentropy_loss(stats + (size_t)e.col * lds, x);
    }
}

TSR_SIMD_CLONES
void tsr_cpu_crossentropy_backward(int rows, int cols, float *x, int ldx, int row0, int V,
                                   const float *stats, int lds, const int *target_row, float dloss)
{
    int valid = V - row0 < rows ? V - row0 : rows;
    if (valid < 0)
        valid = 0;
    for (int c = 0; c < cols; c++) {
        float *col = x + (size_t)c * ldx;
        const float *st = stats + (size_t)c * lds;
        float mx = st[0], inv_sum = 1.0f / st[1];
        /* (p - [r == target]) * dloss in one vectorised pass, then the
         * target's row fixed up */
        int t = target_row[c];
        float p_target = t >= 0 && t < valid ? exp_approx(col[t] - mx) * inv_sum : 0.0f;
        for (int r = 0; r < valid; r++)
            col[r] = exp_approx(col[r] - mx) * inv_sum * dloss;
        if (t >= 0 && t < valid)
            col[t] = (p_target - 1.0f) * dloss;
        for (int r = valid; r < rows; r++) /* padded vocabulary rows */
            col[r] = 0.0f;
    }
}
