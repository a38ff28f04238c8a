/* Several submitting threads (tsr_submit_streams), with TSR_SUBMIT_THREADS=4
 * (set here; the default is 2):
 *  - every stream is submitted once, by 4 threads, each submitting its
 *    streams in increasing order, the calling thread the first ones (also
 *    when threads are started after a first call needed fewer);
 *  - the lowest failing stream's error comes back, and the thread that met
 *    it submits none of its later streams;
 *  - streams of GEMMs, each on its own C, reading one A and one B whose
 *    tiles no thread has registered yet, give the same C, bit for bit, as
 *    the same GEMMs submitted one after another.
 *   test_submit_streams */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "tessera.h"
#include "tsr_check.h"
#include "tsr_testutil.h"

enum { STREAMS = 10, N = 192, TILE = 64 };

typedef struct {
    int order;            /* 1 + the rank of this stream's start among all */
    pthread_t thread;
} stream_seen_t;

static stream_seen_t seen[STREAMS];
static int started;
static int fail_at[STREAMS]; /* the error stream s returns */

static int record(int s, void *arg)
{
    (void)arg;
    seen[s].order = __atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
    seen[s].thread = pthread_self();
    return fail_at[s];
}

static int same_thread(int a, int b) { return pthread_equal(seen[a].thread, seen[b].thread); }

static void every_stream_once(void)
{
    memset(seen, 0, sizeof seen);
    started = 0;
    CHECK_RC(tsr_submit_streams(2, record, NULL), TSR_SUCCESS); /* one thread started */
    CHECK(started == 2 && !same_thread(0, 1));
    memset(seen, 0, sizeof seen);
    started = 0;
    CHECK_RC(tsr_submit_streams(STREAMS, record, NULL), TSR_SUCCESS); /* two more: none takes the last phase up */
    CHECK(started == STREAMS);
    int threads = 0;
    for (int s = 0; s < STREAMS; s++) {
        CHECK(seen[s].order > 0);
        int first = 1;
        for (int e = 0; e < s; e++)
            if (same_thread(e, s)) {
                first = 0;
                CHECK(seen[e].order < seen[s].order); /* a thread's streams in increasing order */
            }
        threads += first;
    }
    CHECK(threads == 4);
    CHECK(pthread_equal(seen[0].thread, pthread_self()));
    CHECK(same_thread(0, 4) && same_thread(1, 5) && !same_thread(0, 1)); /* dealt in turn */
    CHECK_RC(tsr_submit_streams(0, record, NULL), TSR_SUCCESS);
}

static void errors(void)
{
    memset(seen, 0, sizeof seen);
    started = 0;
    fail_at[1] = TSR_ENOMEM; /* thread 1: streams 1, 5, 9: 5 and 9 are not submitted */
    fail_at[6] = TSR_EINVAL;
    CHECK_RC(tsr_submit_streams(STREAMS, record, NULL), TSR_ENOMEM);
    CHECK(seen[1].order > 0 && seen[5].order == 0 && seen[9].order == 0);
    CHECK(seen[6].order > 0 && seen[2].order > 0 && seen[8].order > 0 && seen[7].order > 0);
    fail_at[1] = fail_at[6] = TSR_SUCCESS;
}

typedef struct {
    tsr_desc_t *A, *B, *C[STREAMS];
} gemms_t;

static int gemm_stream(int s, void *arg)
{
    gemms_t *g = arg;
    double alpha = 1.0 + s; /* each stream its own product */
    return tsr_gemm(TSR_NOTRANS, TSR_NOTRANS, alpha, g->A, g->B, 0.0, g->C[s], TSR_REDUCTION_ORDERED);
}

/* The streams' C, gathered after submitting them by threads or (serial) one
 * after another; 0 on success. */
static int run_gemms(int serial, float *out)
{
    gemms_t g = { 0 };
    int rc = tsr_desc_create_2d(&g.A, TSR_FLOAT32, N, N, TILE, TILE, NULL);
    rc = rc ? rc : tsr_desc_create_2d(&g.B, TSR_FLOAT32, N, N, TILE, TILE, NULL);
    for (int s = 0; s < STREAMS && !rc; s++)
        rc = tsr_desc_create_2d(&g.C[s], TSR_FLOAT32, N, N, TILE, TILE, NULL);
    rc = rc ? rc : tsr_desc_fill_random(g.A, 7);
    rc = rc ? rc : tsr_desc_fill_random(g.B, 8);
    rc = rc ? rc : tsr_wait(); /* A and B written: the streams only read them */
    if (!rc && serial)
        for (int s = 0; s < STREAMS && !rc; s++)
            rc = gemm_stream(s, &g);
    else if (!rc)
        rc = tsr_submit_streams(STREAMS, gemm_stream, &g);
    for (int s = 0; s < STREAMS && !rc; s++)
        rc = tsr_desc_gather(g.C[s], out + (size_t)s * N * N, N, 0);
    for (int s = 0; s < STREAMS; s++)
        tsr_desc_destroy(g.C[s]);
    tsr_desc_destroy(g.B);
    tsr_desc_destroy(g.A);
    return rc;
}

static void gemms_as_serial(void)
{
    size_t n = (size_t)STREAMS * N * N;
    float *threads = malloc(n * sizeof(float)), *serial = malloc(n * sizeof(float));
    CHECK(threads && serial);
    if (threads && serial) {
        CHECK_RC(run_gemms(0, threads), TSR_SUCCESS);
        CHECK_RC(run_gemms(1, serial), TSR_SUCCESS);
        CHECK(memcmp(threads, serial, n * sizeof(float)) == 0);
        CHECK(threads[N * N + 5] != 0.0f); /* a product, not zeros */
    }
    free(threads);
    free(serial);
}

int main(int argc, char **argv)
{
    tsr_dist_t grid;
    if (setenv("TSR_SUBMIT_THREADS", "4", 1) != 0 || tsr_test_init(&argc, &argv, &grid))
        return 2;
    CHECK(tsr_submit_threads() == 4);
    every_stream_once();
    errors();
    gemms_as_serial();
    int rc = tsr_check_report("test_submit_streams");
    tsr_finalize();
    return rc;
}
