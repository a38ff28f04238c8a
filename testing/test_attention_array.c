/* tsr_attention_array: causal attention on the caller's arrays (heads x T x
 * hd, element (h, t, d) at (h * T + t) * hd + d), in place, against a plain
 * loop; tiles that do not divide T; bad arguments fail with a message and
 * submit nothing. Under MPI with 2 ranks the arrays of rank 0 are copied
 * (scatter / gather). */
#include <math.h>
#include <stdlib.h>
#include "tessera.h"
#include "tsr_check.h"
#include "tsr_expect.h"
#include "tsr_testutil.h"

static float *random_array(size_t n, uint64_t seed)
{
    float *x = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)tsr_random_value(seed, 0, (int)i, 0);
    return x;
}

static void run(int heads, int T, int hd, int tile)
{
    size_t n = (size_t)heads * T * hd;
    int root = tsr_rank() == 0;
    float *Q = NULL, *K = NULL, *V = NULL, *out = NULL, *ref = NULL;
    if (root) {
        Q = random_array(n, 1), K = random_array(n, 2), V = random_array(n, 3);
        out = calloc(n, sizeof(float)), ref = malloc(sizeof(float) * n);
        tsr_test_attention_ref(heads, T, hd, Q, K, V, ref);
    }
    CHECK_RC(tsr_attention_array(heads, T, hd, Q, K, V, out, tile), TSR_SUCCESS);
    if (root) {
        double err = tsr_test_max_abs_err(out, ref, n);
        if (err > 1e-5)
            fprintf(stderr, "  heads %d T %d hd %d tile %d: error %.3g\n", heads, T, hd, tile, err);
        CHECK(err <= 1e-5);
    }
    free(Q); free(K); free(V); free(out); free(ref);
}

static void bad_arguments(void)
{
    enum { H = 2, T = 16, HD = 8 };
    static float Q[H * T * HD], K[H * T * HD], V[H * T * HD], out[H * T * HD];
    char log[4096];
    uint64_t before = tsr_tasks_submitted();
    tsr_capture_t c = tsr_capture_start();
    tsr_expect_error(tsr_attention_array(H, T, HD, NULL, K, V, out, 4), TSR_EINVAL, before, "Q NULL");
    tsr_capture_end(c, log, sizeof log);
    tsr_expect_message(log, "tsr_attention_array: Q is (nil)", "Q NULL");
    c = tsr_capture_start();
    tsr_expect_error(tsr_attention_array(H, T, 0, Q, K, V, out, 4), TSR_EINVAL, before, "hd 0");
    tsr_capture_end(c, log, sizeof log);
    tsr_expect_message(log, "heads 2, T 16, hd 0 and tile 4 must be positive", "hd 0");
    c = tsr_capture_start();
    tsr_expect_error(tsr_attention_array(H, T, HD, Q, K, V, Q, 4), TSR_EINVAL, before, "out = Q");
    tsr_capture_end(c, log, sizeof log);
    tsr_expect_message(log, "tsr_attention_array: out overlaps Q in memory", "out = Q");
    /* out overlapping V by one head */
    tsr_expect_error(tsr_attention_array(H, T, HD, Q, K, V, V + T * HD, 4), TSR_EINVAL, before, "out in V");
    tsr_expect_error(tsr_attention_array(H, T, HD, Q, K, V, out, -1), TSR_EINVAL, before, "tile -1");
}

int main(int argc, char **argv)
{
    tsr_dist_t grid;
    if (tsr_test_init(&argc, &argv, &grid))
        return 2;
    run(1, 64, 16, 16);
    run(3, 37, 8, 10);  /* tiles that do not divide T */
    run(2, 50, 64, 64); /* one tile */
    run(1, 5, 3, 1);
    if (tsr_size() == 1)
        bad_arguments();
    int rc = tsr_rank() == 0 ? tsr_check_report("test_attention_array") : (tsr_checks_failed ? 1 : 0);
    tsr_finalize();
    return rc;
}
