/* The BLAS reports its kernel set, and BLIS does not run its generic kernels
 * on an AVX-512 CPU unless BLIS_ARCH_TYPE asks for them. */
#include <stdlib.h>
#include <string.h>
#include "tsr_build_config.h"
#include "tsr_compute.h"
#include "tsr_check.h"

int main(void)
{
    const char *d = tsr_blas_description();
    printf("%s\n", d);
    CHECK(strstr(d, TSR_BLAS_NAME) == d);
    CHECK(strstr(d, " kernels") != NULL);
    __builtin_cpu_init();
    int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                 __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
    if (TSR_BLAS_BLIS && avx512 && !getenv("BLIS_ARCH_TYPE"))
        CHECK(strstr(d, "generic") == NULL && strstr(d, "skx kernels") != NULL);
    /* the kernels work: a 3 x 2 x 4 product */
    float A[12], B[8], C[6];
    for (int i = 0; i < 12; i++) A[i] = (float)(i + 1);
    for (int i = 0; i < 8; i++) B[i] = (float)(i % 3);
    tsr_cpu_gemm(TSR_FLOAT32, TSR_NOTRANS, TSR_NOTRANS, 3, 2, 4, 1.0, A, 3, B, 4, 0.0, C, 3, 1);
    for (int j = 0; j < 2; j++)
        for (int i = 0; i < 3; i++) {
            float ref = 0;
            for (int l = 0; l < 4; l++)
                ref += A[l * 3 + i] * B[j * 4 + l];
            CHECK(C[j * 3 + i] == ref);
        }
    return tsr_check_report("test_blas");
}
