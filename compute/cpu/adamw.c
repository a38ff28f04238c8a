/* AdamW tile kernel, llm.c's update rule. */
#include <math.h>
#include "tsr_compute_misc.h"

void tsr_cpu_adamw(int rows, int cols, float *p, int ldp, const float *g, int ldg, float *m, int ldm,
                   float *v, int ldv, const tsr_adamw_step_t *s)
{
    for (int c = 0; c < cols; c++) {
        float *pc = p + (size_t)c * ldp, *mc = m + (size_t)c * ldm, *vc = v + (size_t)c * ldv;
        const float *gc = g + (size_t)c * ldg;
        for (int r = 0; r < rows; r++) {
            float grad = gc[r];
            float mr = s->beta1 * mc[r] + (1.0f - s->beta1) * grad;
            float vr = s->beta2 * vc[r] + (1.0f - s->beta2) * grad * grad;
            float mhat = mr / s->corr1;
            float vhat = vr / s->corr2;
            mc[r] = mr;
            vc[r] = vr;
            pc[r] -= s->lr * (mhat / (sqrtf(vhat) + s->eps) + s->weight_decay * pc[r]);
        }
    }
}
