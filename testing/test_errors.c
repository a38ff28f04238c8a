/* Bad arguments: every wrong call returns its TSR_E* code, submits no task
 * and does not crash. Under mpirun -np 2 it also checks process-grid
 * mismatches. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tessera.h"
#include "tsr_check.h"
#include "tsr_expect.h"
#include "tsr_testutil.h"

static tsr_desc_t *make(tsr_dtype_t t, int b, int m, int n, int bb, int mb, int nb, const tsr_dist_t *dist)
{
    tsr_desc_t *d = NULL;
    CHECK_RC(tsr_desc_create(&d, t, b, m, n, bb, mb, nb, dist), TSR_SUCCESS);
    return d;
}

/* tsr_gemm must fail with `code` and leave the task counter unchanged. */
static void expect_gemm_error(int code, tsr_trans_t ta, tsr_trans_t tb, tsr_desc_t *A, tsr_desc_t *B, tsr_desc_t *C,
                              tsr_reduction_t accum, const char *what)
{
    uint64_t before = tsr_tasks_submitted();
    int rc = tsr_gemm(ta, tb, 1.0, A, B, 0.0, C, accum);
    tsr_expect_error(rc, code, before, what);
}

static void check_before_init(void)
{
    tsr_desc_t *d = (tsr_desc_t *)1;
    CHECK_RC(tsr_desc_create(&d, TSR_FLOAT32, 1, 4, 4, 1, 2, 2, NULL), TSR_ENOTINIT);
    CHECK(d == NULL);
    CHECK_RC(tsr_wait(), TSR_ENOTINIT);
    CHECK_RC(tsr_finalize(), TSR_ENOTINIT);
    CHECK_RC(tsr_gemm(TSR_NOTRANS, TSR_NOTRANS, 1, NULL, NULL, 0, NULL, TSR_REDUCTION_ORDERED), TSR_EINVAL);
    tsr_config_t cfg;
    tsr_config_default(&cfg);
    cfg.ncpus = 0;
    CHECK_RC(tsr_init(&cfg, NULL, NULL), TSR_EINVAL);
    cfg.ncpus = 1000;
    CHECK_RC(tsr_init(&cfg, NULL, NULL), TSR_EINVAL);
    cfg.ncpus = 1;
    cfg.parallel_worker_size = 0;
    CHECK_RC(tsr_init(&cfg, NULL, NULL), TSR_EINVAL);
}

static int bad_owner(int bi, int i, int j, void *arg)
{
    (void)bi, (void)j, (void)arg;
    return i == 1 ? 99 : 0;
}

/* Sizes near INT_MAX: the tile counts were computed as (m + mb - 1) / mb,
 * which overflowed (negative counts in the message, ENOMEM for a valid
 * descriptor, success with no tile for INT_MAX tiles). */
static void check_huge_descriptors(void)
{
    tsr_desc_t *d = NULL;
    char log[4096];
    tsr_capture_t c = tsr_capture_start();
    CHECK_RC(tsr_desc_create_2d(&d, TSR_FLOAT32, INT_MAX, INT_MAX, 4096, 4096, NULL), TSR_EINVAL);
    tsr_capture_end(c, log, sizeof log);
    tsr_expect_message(log, "2147483647 x 2147483647 in tiles of 1 x 4096 x 4096: 1 x 524288 x 524288 tiles", "INT_MAX^2");
    c = tsr_capture_start();
    CHECK_RC(tsr_desc_create(&d, TSR_FLOAT64, INT_MAX, INT_MAX, INT_MAX, INT_MAX, INT_MAX, INT_MAX, NULL), TSR_EINVAL);
    tsr_capture_end(c, log, sizeof log);
    tsr_expect_message(log, "2147483647 x 2147483647 x 2147483647", "INT_MAX^3");
    /* one tile of 70000 x 70000: more elements than StarPU's 32-bit tile strides */
    CHECK_RC(tsr_desc_create_2d(&d, TSR_FLOAT32, 70000, 70000, 70000, 70000, NULL), TSR_EINVAL);
    CHECK(d == NULL);
    /* a 65536 x 65536 grid has 2^32 ranks, not 0 */
    tsr_dist_t huge_grid = tsr_dist_block_cyclic(65536, 65536);
    CHECK_RC(tsr_desc_create_2d(&d, TSR_FLOAT32, 4, 4, 2, 2, &huge_grid), TSR_EDIST);
    /* valid (8 GiB, never touched: tiles are allocated on first use) */
    CHECK_RC(tsr_desc_create_2d(&d, TSR_FLOAT32, INT_MAX, 1, 4096, 1, NULL), TSR_SUCCESS);
    CHECK(d && d->mt == 524288 && d->nt == 1);
    tsr_desc_destroy(d);
}

static void check_descriptor_errors(void)
{
    tsr_desc_t *d = NULL;
    CHECK_RC(tsr_desc_create(NULL, TSR_FLOAT32, 1, 4, 4, 1, 2, 2, NULL), TSR_EINVAL);
    CHECK_RC(tsr_desc_create(&d, (tsr_dtype_t)7, 1, 4, 4, 1, 2, 2, NULL), TSR_EINVAL);
    CHECK_RC(tsr_desc_create(&d, TSR_FLOAT32, 1, -4, 4, 1, 2, 2, NULL), TSR_EINVAL);
    CHECK_RC(tsr_desc_create(&d, TSR_FLOAT32, 1, 4, 4, 1, 0, 2, NULL), TSR_EINVAL);
    CHECK_RC(tsr_desc_create(&d, TSR_FLOAT32, 0, 4, 4, 1, 2, 2, NULL), TSR_EINVAL);
    tsr_dist_t too_big = tsr_dist_block_cyclic(tsr_size() + 1, 1);
    CHECK_RC(tsr_desc_create(&d, TSR_FLOAT32, 1, 4, 4, 1, 2, 2, &too_big), TSR_EDIST);
    tsr_dist_t nobody = tsr_dist_single(tsr_size());
    CHECK_RC(tsr_desc_create(&d, TSR_FLOAT32, 1, 4, 4, 1, 2, 2, &nobody), TSR_EDIST);
    tsr_dist_t wrong = tsr_dist_custom(bad_owner, NULL);
    CHECK_RC(tsr_desc_create(&d, TSR_FLOAT32, 1, 4, 4, 1, 2, 2, &wrong), TSR_EDIST);
    tsr_dist_t no_fn = tsr_dist_custom(NULL, NULL);
    CHECK_RC(tsr_desc_create(&d, TSR_FLOAT32, 1, 4, 4, 1, 2, 2, &no_fn), TSR_EINVAL);
    CHECK(d == NULL);

    check_huge_descriptors();
    CHECK_RC(tsr_desc_destroy(NULL), TSR_SUCCESS);

    d = make(TSR_FLOAT32, 1, 6, 5, 1, 4, 4, NULL);
    float buf[30] = { 0 };
    int me = tsr_rank();
    /* a bad buffer on the root fails the call on every rank (no rank hangs) */
    CHECK_RC(tsr_desc_scatter(d, me == 0 ? NULL : buf, 6, 0), TSR_EINVAL);
    CHECK_RC(tsr_desc_gather(d, buf, me == 0 ? 3 : 6, 0), TSR_EINVAL);
    if (tsr_size() == 1) {
        CHECK_RC(tsr_desc_scatter(d, buf, 5, 0), TSR_EINVAL);   /* lda < m */
        CHECK_RC(tsr_desc_gather(d, buf, 6, 1), TSR_EINVAL);    /* no rank 1 */
    }
    double v;
    CHECK_RC(tsr_desc_norm(d, (tsr_norm_t)5, &v), TSR_EINVAL);
    CHECK_RC(tsr_desc_norm(d, TSR_NORM_MAX, NULL), TSR_EINVAL);
    CHECK_RC(tsr_desc_fill_random(NULL, 1), TSR_EINVAL);
    tsr_desc_destroy(d);
}

static void check_gemm_errors(void)
{
    /* good shapes: C 10x8, A 10x6, B 6x8, tiles 4 x 3 (k) x 4 */
    tsr_desc_t *A = make(TSR_FLOAT32, 1, 10, 6, 1, 4, 3, NULL);
    tsr_desc_t *B = make(TSR_FLOAT32, 1, 6, 8, 1, 3, 4, NULL);
    tsr_desc_t *C = make(TSR_FLOAT32, 1, 10, 8, 1, 4, 4, NULL);
    tsr_desc_t *Cd = make(TSR_FLOAT64, 1, 10, 8, 1, 4, 4, NULL);
    tsr_desc_t *Cshape = make(TSR_FLOAT32, 1, 11, 8, 1, 4, 4, NULL);
    tsr_desc_t *Bk = make(TSR_FLOAT32, 1, 7, 8, 1, 3, 4, NULL);
    tsr_desc_t *Cbatch = make(TSR_FLOAT32, 2, 10, 8, 1, 4, 4, NULL);
    tsr_desc_t *Ctile = make(TSR_FLOAT32, 1, 10, 8, 1, 5, 4, NULL);
    tsr_desc_t *Bktile = make(TSR_FLOAT32, 1, 6, 8, 1, 2, 4, NULL);
    tsr_desc_t *At = make(TSR_FLOAT32, 1, 6, 10, 1, 3, 4, NULL); /* A^T layout */

    expect_gemm_error(TSR_EINVAL, TSR_NOTRANS, TSR_NOTRANS, NULL, B, C, TSR_REDUCTION_ORDERED, "NULL A");
    expect_gemm_error(TSR_EINVAL, (tsr_trans_t)3, TSR_NOTRANS, A, B, C, TSR_REDUCTION_ORDERED, "bad transA");
    expect_gemm_error(TSR_EINVAL, TSR_NOTRANS, TSR_NOTRANS, A, B, C, (tsr_reduction_t)9, "bad accum");
    expect_gemm_error(TSR_EDTYPE, TSR_NOTRANS, TSR_NOTRANS, A, B, Cd, TSR_REDUCTION_ORDERED, "dtype");
    expect_gemm_error(TSR_ESHAPE, TSR_NOTRANS, TSR_NOTRANS, A, B, Cshape, TSR_REDUCTION_ORDERED, "m");
    expect_gemm_error(TSR_ESHAPE, TSR_NOTRANS, TSR_NOTRANS, A, Bk, C, TSR_REDUCTION_REDUX, "k");
    expect_gemm_error(TSR_ESHAPE, TSR_NOTRANS, TSR_NOTRANS, A, B, Cbatch, TSR_REDUCTION_ORDERED, "batch");
    expect_gemm_error(TSR_ETILE, TSR_NOTRANS, TSR_NOTRANS, A, B, Ctile, TSR_REDUCTION_ORDERED, "mb");
    expect_gemm_error(TSR_ETILE, TSR_NOTRANS, TSR_NOTRANS, A, Bktile, C, TSR_REDUCTION_REDUX, "kb");
    expect_gemm_error(TSR_ESHAPE, TSR_TRANS, TSR_NOTRANS, A, B, C, TSR_REDUCTION_ORDERED, "A is not transposed");
    /* and the good calls do submit tasks */
    uint64_t before = tsr_tasks_submitted();
    CHECK_RC(tsr_gemm(TSR_TRANS, TSR_NOTRANS, 1.0, At, B, 0.0, C, TSR_REDUCTION_ORDERED), TSR_SUCCESS);
    CHECK_RC(tsr_gemm(TSR_NOTRANS, TSR_NOTRANS, 1.0, A, B, 1.0, C, TSR_REDUCTION_REDUX), TSR_SUCCESS);
    CHECK_RC(tsr_wait(), TSR_SUCCESS);
    CHECK(tsr_tasks_submitted() > before || tsr_size() > 1);

    if (tsr_size() == 2) {
        tsr_dist_t rows = tsr_dist_block_cyclic(2, 1), cols = tsr_dist_block_cyclic(1, 2);
        tsr_desc_t *A21 = make(TSR_FLOAT32, 1, 10, 6, 1, 4, 3, &rows);
        tsr_desc_t *B12 = make(TSR_FLOAT32, 1, 6, 8, 1, 3, 4, &cols);
        tsr_desc_t *C21 = make(TSR_FLOAT32, 1, 10, 8, 1, 4, 4, &rows);
        expect_gemm_error(TSR_EDIST, TSR_NOTRANS, TSR_NOTRANS, A21, B12, C21, TSR_REDUCTION_ORDERED, "grids 2x1 vs 1x2");
        tsr_desc_destroy(A21);
        tsr_desc_destroy(B12);
        tsr_desc_destroy(C21);
    }
    TSR_TEST_DESTROY(A, B, C, Cd, Cshape, Bk, Cbatch, Ctile, Bktile, At);
}

/* An output that is also an input gave a wrong C (tiles of A or B were
 * overwritten while still to be read), and with REDUX and A = B = C StarPU
 * aborted. A = B (two inputs) is fine. */
static void check_gemm_aliases(void)
{
    tsr_desc_t *X = make(TSR_FLOAT32, 1, 8, 8, 1, 4, 4, NULL), *Y = make(TSR_FLOAT32, 1, 8, 8, 1, 4, 4, NULL);
    char log[4096];
    tsr_capture_t c = tsr_capture_start();
    expect_gemm_error(TSR_EINVAL, TSR_NOTRANS, TSR_NOTRANS, X, Y, X, TSR_REDUCTION_ORDERED, "C = A");
    tsr_capture_end(c, log, sizeof log);
    tsr_expect_message(log, "tsr_gemm: C and A are the same descriptor", "C = A");
    c = tsr_capture_start();
    expect_gemm_error(TSR_EINVAL, TSR_TRANS, TSR_NOTRANS, Y, X, X, TSR_REDUCTION_REDUX, "C = B");
    tsr_capture_end(c, log, sizeof log);
    tsr_expect_message(log, "tsr_gemm: C and B are the same descriptor", "C = B");
    expect_gemm_error(TSR_EINVAL, TSR_NOTRANS, TSR_TRANS, X, X, X, TSR_REDUCTION_ORDERED, "A = B = C");
    expect_gemm_error(TSR_EINVAL, TSR_NOTRANS, TSR_NOTRANS, X, X, X, TSR_REDUCTION_REDUX, "A = B = C, REDUX");
    CHECK_RC(tsr_gemm(TSR_NOTRANS, TSR_TRANS, 1.0, X, X, 0.0, Y, TSR_REDUCTION_REDUX), TSR_SUCCESS);
    CHECK_RC(tsr_wait(), TSR_SUCCESS);
    tsr_desc_destroy(X);
    tsr_desc_destroy(Y);
}

/* A NULL output of tsr_gemm_auto_tiles is named in its message. */
static void check_auto_tiles_null(void)
{
    char log[4096];
    tsr_capture_t c = tsr_capture_start();
    CHECK_RC(tsr_gemm_auto_tiles(TSR_FLOAT32, 64, 64, 64, TSR_REDUCTION_ORDERED, NULL), TSR_EINVAL);
    tsr_capture_end(c, log, sizeof log);
    tsr_expect_message(log, "tsr_gemm_auto_tiles: the output (tsr_tiles_t *) is NULL", "auto tiles, NULL");
    c = tsr_capture_start();
    CHECK_RC(tsr_attention_auto_tiles(64, 16, 1, 1, 0, TSR_REDUCTION_ORDERED, NULL), TSR_EINVAL);
    tsr_capture_end(c, log, sizeof log);
    tsr_expect_message(log, "tsr_attention_auto_tiles: the output (tsr_tiles_t *) is NULL", "attention auto tiles, NULL");
}

/* tsr_gemm_array's bad sizes are named in its message (it returned
 * TSR_EINVAL and said nothing). */
static void check_gemm_array_sizes(void)
{
    double A[4] = { 1, 2, 3, 4 }, B[4] = { 1, 0, 0, 1 }, C[4] = { 0 };
    char log[4096];
    tsr_capture_t c = tsr_capture_start();
    CHECK_RC(tsr_gemm_array(TSR_FLOAT64, TSR_NOTRANS, TSR_NOTRANS, 0, 2, 2, 1.0, A, 2, B, 2, 0.0, C, 2, 2,
                            TSR_REDUCTION_ORDERED), TSR_EINVAL);
    tsr_capture_end(c, log, sizeof log);
    tsr_expect_message(log, "tsr_gemm_array: m = 0", "gemm_array, m 0");
    c = tsr_capture_start();
    CHECK_RC(tsr_gemm_array(TSR_FLOAT64, TSR_NOTRANS, TSR_NOTRANS, 2, 2, 2, 1.0, A, 2, B, 2, 0.0, C, 2, 0,
                            TSR_REDUCTION_ORDERED), TSR_EINVAL);
    tsr_capture_end(c, log, sizeof log);
    tsr_expect_message(log, "tsr_gemm_array: tile = 0", "gemm_array, tile 0");
}

static void check_strerror(void)
{
    for (int code = 0; code >= TSR_EALREADY; code--) {
        const char *s = tsr_strerror(code);
        CHECK(s && *s && strcmp(s, "unknown error") != 0);
    }
    CHECK(strcmp(tsr_strerror(-1000), "unknown error") == 0);
}

/* tsr_init turns off StarPU's early write-back of dirty GPU buffers (the
 * data stays resident: docs/runtime.md), unless the user set it. */
static void check_resident_gpu_data(void)
{
    const char *minimum = getenv("STARPU_MINIMUM_CLEAN_BUFFERS"), *target = getenv("STARPU_TARGET_CLEAN_BUFFERS");
    CHECK(minimum && strcmp(minimum, "0") == 0);
    CHECK(target && strcmp(target, "7") == 0);
}

/* --abort-ranks: rank 1 ends every rank (tsr_abort_ranks) while rank 0
 * waits for it in a barrier it never joins; CTest passes on rank 1's line
 * and fails on rank 0's or a timeout. On one rank it returns. */
static int check_abort_ranks(void)
{
    if (tsr_size() == 1) {
        tsr_abort_ranks(3);
        printf("abort_ranks: one rank: tsr_abort_ranks returned\n");
        return 0;
    }
    if (tsr_rank() == 1) {
        printf("abort_ranks: rank 1 ends every rank\n");
        tsr_abort_ranks(3);
    }
    tsr_barrier();
    printf("abort_ranks: rank %d passed the barrier\n", tsr_rank());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--abort-ranks") == 0) {
        tsr_config_t cfg;
        tsr_config_default(&cfg);
        cfg.ncpus = 1;
        CHECK_RC(tsr_init(&cfg, &argc, &argv), TSR_SUCCESS);
        int rc = check_abort_ranks();
        tsr_finalize();
        return rc;
    }
    check_before_init();
    check_strerror();
    tsr_config_t cfg;
    tsr_config_default(&cfg);
    cfg.ncpus = 1;
    cfg.verbose = 0; /* the expected failures would print errors */
    /* a user's own setting of StarPU's clean-buffer thresholds is kept */
    setenv("STARPU_TARGET_CLEAN_BUFFERS", "7", 1);
    unsetenv("STARPU_MINIMUM_CLEAN_BUFFERS");
    CHECK_RC(tsr_init(&cfg, &argc, &argv), TSR_SUCCESS);
    CHECK_RC(tsr_init(&cfg, &argc, &argv), TSR_EALREADY);
    check_resident_gpu_data();
    check_descriptor_errors();
    check_gemm_errors();
    check_auto_tiles_null();
    check_gemm_array_sizes();
    check_gemm_aliases();
    int rc = tsr_checks_failed ? 1 : 0;
    if (tsr_rank() == 0)
        rc = tsr_check_report("test_errors");
    CHECK_RC(tsr_finalize(), TSR_SUCCESS);
    return rc;
}
