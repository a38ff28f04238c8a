/* AdamW tile kernel, llm.c's update rule. */
#include <math.h>
#include "tsr_compute_misc.h"
#include "tsr_compute_elem.h"

void tsr_cpu_adamw(int rows, int cols, float *p, int ldp, const float *g, int ldg, float *m, int ldm,
                   float *v, int ldv, const tsr_adamw_step_t *s)
{
    for (int c = 0; c < cols; c++) {
        float *pc = p + (size_t)c * ldp, *mc = m + (size_t)c * ldm, *vc = v + (size_t)c * ldv;
        const float *gc = g + (size_t)c * ldg;
        for (int r = 0; r < rows; r++) {
            tsr_elem_adamw(s, gc[r], &pc[r], &mc[r], &vc[r]);
        }
    }
}
