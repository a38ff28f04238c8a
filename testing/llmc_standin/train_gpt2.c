/* A stand-in for llm.c's train_gpt2.c (check_llmc_cpu_cblas.sh): the two
 * functions timing/llmc_cpu_cblas.sh replaces, laid out as llm.c lays them
 * out, and a main that checks the replacements against plain loops with
 * llm.c's semantics (weights (OC, C) row-major; backward accumulates). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "llmc/utils.h"

void matmul_forward(float* out,
                    const float* inp, const float* weight, const float* bias,
                    int B, int T, int C, int OC) {
    abort(); /* replaced by the script */
}

void matmul_backward(float* dinp, float* dweight, float* dbias,
                     const float* dout, const float* inp, const float* weight,
                     int B, int T, int C, int OC) {
    abort(); /* replaced by the script */
}

static float* random_array(size_t n, unsigned* seed) {
    float* x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)rand_r(seed) / RAND_MAX - 0.5f;
    return x;
}

static int close_to(const float* got, const double* want, size_t n, const char* what) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs(got[i] - want[i]) / (1.0 + fabs(want[i])));
    printf("%s: worst relative difference %.2e\n", what, worst);
    return worst < 1e-4;
}

int main(void) {
    const int B = 3, T = 5, C = 24, OC = 40, BT = B * T;
    unsigned seed = 7;
    float *inp = random_array((size_t)BT * C, &seed), *w = random_array((size_t)OC * C, &seed),
          *bias = random_array(OC, &seed), *dout = random_array((size_t)BT * OC, &seed),
          *dinp = random_array((size_t)BT * C, &seed), *dw = random_array((size_t)OC * C, &seed),
          *dbias = random_array(OC, &seed), *out = malloc((size_t)BT * OC * sizeof(float));
    double *want_out = malloc((size_t)BT * OC * sizeof(double)), *want_dinp = malloc((size_t)BT * C * sizeof(double)),
           *want_dw = malloc((size_t)OC * C * sizeof(double)), *want_dbias = malloc(OC * sizeof(double));
    for (int i = 0; i < BT * C; i++) want_dinp[i] = dinp[i];
    for (int i = 0; i < OC * C; i++) want_dw[i] = dw[i];
    for (int o = 0; o < OC; o++) want_dbias[o] = dbias[o];
    for (int bt = 0; bt < BT; bt++)
        for (int o = 0; o < OC; o++) {
            double s = bias[o];
            for (int i = 0; i < C; i++) s += (double)inp[bt * C + i] * w[o * C + i];
            want_out[bt * OC + o] = s;
            for (int i = 0; i < C; i++) {
                want_dinp[bt * C + i] += (double)w[o * C + i] * dout[bt * OC + o];
                want_dw[o * C + i] += (double)inp[bt * C + i] * dout[bt * OC + o];
            }
            want_dbias[o] += dout[bt * OC + o];
        }
    matmul_forward(out, inp, w, bias, B, T, C, OC);
    matmul_backward(dinp, dw, dbias, dout, inp, w, B, T, C, OC);
    int ok = close_to(out, want_out, (size_t)BT * OC, "forward") & close_to(dinp, want_dinp, (size_t)BT * C, "dinp") &
             close_to(dw, want_dw, (size_t)OC * C, "dweight") & close_to(dbias, want_dbias, OC, "dbias");
    puts(ok ? "matmuls: all checks passed" : "matmuls: FAILED");
    return ok ? 0 : 1;
}
