/* A solver calling Tessera's tiled GEMM on its own column-major arrays. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <tessera.h>

int main(int argc, char **argv)
{
    int n = 300, rc;
    if ((rc = tsr_init(NULL, &argc, &argv)) != 0) {
        fprintf(stderr, "tsr_init: %s\n", tsr_strerror(rc));
        return 1;
    }
    double *A = malloc(sizeof(double) * n * n), *B = malloc(sizeof(double) * n * n), *C = calloc(n * n, sizeof(double));
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++) {
            A[j * n + i] = i == j ? 2.0 : 0.0; /* A = 2 I */
            B[j * n + i] = i + 0.5 * j;
        }
    /* C = A B with 64 x 64 tiles, k contributions accumulated with REDUX */
    rc = tsr_gemm_array(TSR_FLOAT64, TSR_NOTRANS, TSR_NOTRANS, n, n, n, 1.0, A, n, B, n, 0.0, C, n, 64,
                        TSR_REDUCTION_REDUX);
    double err = 0;
    for (int k = 0; k < n * n; k++)
        err = fmax(err, fabs(C[k] - 2.0 * B[k]));
    printf("solver_gemm: %s, max error %.1e\n", rc ? tsr_strerror(rc) : "ok", err);
    free(A); free(B); free(C);
    tsr_finalize();
    return rc || err > 1e-12;
}
