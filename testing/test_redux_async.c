/* REDUX across ranks does not make tsr_gemm wait: on a 1 x nranks grid every
 * C tile gets contributions from every rank, combined by
 * starpu_mpi_redux_data, which in StarPU 1.4 submits its reduction tree as
 * tasks (1.3's waited for them). The call must return long before its tasks
 * end, and the product must be right. Run under mpirun -np 2. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "tessera.h"
#include "tsr_check.h"
#include "tsr_expect.h"
#include "tsr_testutil.h"

int main(int argc, char **argv)
{
    tsr_dist_t grid;
    if (tsr_test_init(&argc, &argv, &grid) != 0)
        return 2;
    grid = tsr_dist_block_cyclic(1, tsr_size());
    const int m = 1024, n = 1024, k = 4096, tile = 256;
    tsr_desc_t *A, *B, *C;
    CHECK_RC(tsr_desc_create_2d(&A, TSR_FLOAT32, m, k, tile, tile, &grid), TSR_SUCCESS);
    CHECK_RC(tsr_desc_create_2d(&B, TSR_FLOAT32, k, n, tile, tile, &grid), TSR_SUCCESS);
    CHECK_RC(tsr_desc_create_2d(&C, TSR_FLOAT32, m, n, tile, tile, &grid), TSR_SUCCESS);
    tsr_desc_fill_random(A, 1);
    tsr_desc_fill_random(B, 2);
    tsr_wait();
    tsr_barrier();

    double t0 = tsr_wtime();
    CHECK_RC(tsr_gemm(TSR_NOTRANS, TSR_NOTRANS, 1.0, A, B, 0.0, C, TSR_REDUCTION_REDUX), TSR_SUCCESS);
    double t_call = tsr_wtime() - t0;
    tsr_wait();
    double t_all = tsr_wtime() - t0;
    if (tsr_rank() == 0)
        printf("tsr_gemm REDUX on %d rank(s): the call took %.1f ms, its tasks %.1f ms\n", tsr_size(),
               1e3 * t_call, 1e3 * t_all);
    CHECK(t_call < 0.5 * t_all);

    /* C(0,0) against a plain dot product of the random fills */
    float *c = tsr_test_gather_f32(C);
    if (tsr_rank() == 0 && c) {
        double ref = 0;
        for (int l = 0; l < k; l++)
            ref += tsr_random_value(1, 0, 0, l) * tsr_random_value(2, 0, l, 0);
        CHECK(fabs(c[0] - ref) < 1e-4 * k);
    }
    free(c);
    tsr_desc_destroy(A);
    tsr_desc_destroy(B);
    tsr_desc_destroy(C);
    return tsr_test_finish("test_redux_async");
}
