/* AdamW tile kernel, llm.c's update rule. Its three divisions and square
 * root per element cost about as much as its 28 bytes of memory traffic (on
 * the 2-core Xeon VM 0.89 ns an element in cache, 1.2-1.6 from memory), so
 * it is compiled for AVX-512 and AVX2 as well (wider divide units);
 * CMakeLists.txt compiles this file with -ffp-contract=off, so those
 * versions round exactly as the baseline one (no fused multiply-adds).
 * The divisions by the step's constants corr1 and corr2 could be
 * multiplications by their reciprocals in double, rounded to float: the
 * same floats (a quotient of 24-bit floats lies at least 2^-49 of itself
 * from a rounding midpoint, the double product within 2^-52) and 30 %
 * faster in cache, but a step's tiles come from memory, where it measured
 * no faster (1.35-1.50 against 1.27-1.56 ns), so the divisions stay. */
#include <math.h>
#include "simd_math.h" /* TSR_SIMD_CLONES */
#include "tsr_compute_adamw.h"
#include "tsr_compute_elem.h"

TSR_SIMD_CLONES
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

void tsr_cpu_adamw_master(int rows, int cols, float *p, int ldp, const float *g, int ldg, float *m, int ldm,
                          float *v, int ldv, float *out, int ldo, const tsr_adamw_step_t *s)
{
    tsr_cpu_adamw(rows, cols, p, ldp, g, ldg, m, ldm, v, ldv, s);
    for (int c = 0; c < cols; c++)
        for (int r = 0; r < rows; r++)
            out[(size_t)c * ldo + r] = p[(size_t)c * ldp + r];
}
