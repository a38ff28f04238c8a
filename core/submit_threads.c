/* Several submitting threads. One thread inserting every task of a step
 * caps the step at tasks x its cost a task, however many workers wait
 * (docs/tiles-auto.md); streams of tasks that write disjoint data (the
 * sub-batches of a layer) are submitted here by a pool of threads, each
 * stream by one thread in its own order, so that the tasks and their
 * dependencies are those of one thread submitting them in turn.
 *
 * The threads are StarPU's (starpu_pthread_*): under StarPU-SimGrid they
 * are simulated actors, and each is charged its own submissions. */
#include <stdlib.h>
#include <starpu.h>
#include "tsr_context.h"

typedef struct {
    starpu_pthread_t thread;
    int index;           /* 1 .. helpers; 0 is the calling thread */
    unsigned long seen;  /* the last phase it took part in (or that was over when it started) */
    double owed_us;      /* simulated submission cost not yet slept (charge_submission) */
} submitter_t;

static struct {
    starpu_pthread_mutex_t lock;
    starpu_pthread_cond_t work, done;
    int helpers;                  /* threads started */
    int stopping;
    unsigned long phase;          /* incremented for each call with work */
    int n, width, pending;        /* the phase: n items over width threads; helpers not done */
    int (*submit)(int, void *);
    void *arg;
    int *rcs;
} pool = { .lock = STARPU_PTHREAD_MUTEX_INITIALIZER };

static submitter_t submitters[TSR_MAX_SUBMIT_THREADS]; /* [0]: the calling thread */

/* Items k, k + width, k + 2 width, ... in order; a failure ends the share. */
static void run_share(int k)
{
    for (int i = k; i < pool.n; i += pool.width)
        if ((pool.rcs[i] = pool.submit(i, pool.arg)) != TSR_SUCCESS)
            break;
}

static void *submitter_main(void *p)
{
    submitter_t *s = p;
    starpu_pthread_mutex_lock(&pool.lock);
    for (;;) {
        while (!pool.stopping && pool.phase == s->seen)
            starpu_pthread_cond_wait(&pool.work, &pool.lock);
        if (pool.stopping)
            break;
        s->seen = pool.phase;
        if (s->index >= pool.width)
            continue;
        starpu_pthread_mutex_unlock(&pool.lock);
        run_share(s->index);
        starpu_pthread_mutex_lock(&pool.lock);
        if (--pool.pending == 0)
            starpu_pthread_cond_signal(&pool.done);
    }
    starpu_pthread_mutex_unlock(&pool.lock);
    return NULL;
}

/* Starts helpers up to want (under the lock, no phase running); fewer when
 * a thread cannot be made. */
static void start_helpers(int want)
{
    if (pool.helpers == 0) {
        starpu_pthread_cond_init(&pool.work, NULL);
        starpu_pthread_cond_init(&pool.done, NULL);
    }
    while (pool.helpers < want) {
        submitter_t *s = &submitters[pool.helpers + 1];
        s->index = pool.helpers + 1;
        s->seen = pool.phase; /* not the phases before it */
        s->owed_us = 0;
        if (starpu_pthread_create(&s->thread, NULL, submitter_main, s) != 0) {
            tsr_log(TSR_LOG_INFO, "warning: could not start a submitting thread: %d of %d run", pool.helpers + 1,
                    want + 1);
            return;
        }
        pool.helpers++;
    }
}

/* Phase: n streams over width threads (under the lock). */
static void begin_phase(int n, int width, int (*submit)(int, void *), void *arg, int *rcs)
{
    pool.n = n;
    pool.width = width;
    pool.pending = width - 1;
    pool.submit = submit;
    pool.arg = arg;
    pool.rcs = rcs;
    pool.phase++;
    starpu_pthread_cond_broadcast(&pool.work);
}

int tsr_submit_streams(int n, int (*submit)(int stream, void *arg), void *arg)
{
    int width = n < tsr_ctx.submit_threads ? n : tsr_ctx.submit_threads;
    int *rcs = width > 1 ? calloc((size_t)n, sizeof *rcs) : NULL;
    if (rcs) {
        starpu_pthread_mutex_lock(&pool.lock);
        start_helpers(width - 1);
        width = width < pool.helpers + 1 ? width : pool.helpers + 1;
        if (width > 1)
            begin_phase(n, width, submit, arg, rcs);
        starpu_pthread_mutex_unlock(&pool.lock);
    }
    if (!rcs || width <= 1) { /* one thread (or no memory for more): in turn */
        free(rcs);
        int rc = TSR_SUCCESS;
        for (int i = 0; i < n && !rc; i++)
            rc = submit(i, arg);
        return rc;
    }
    run_share(0);
    starpu_pthread_mutex_lock(&pool.lock);
    while (pool.pending > 0)
        starpu_pthread_cond_wait(&pool.done, &pool.lock);
    starpu_pthread_mutex_unlock(&pool.lock);
    int rc = TSR_SUCCESS; /* the first stream's failure, whichever thread met it first */
    for (int i = 0; i < n && !rc; i++)
        rc = rcs[i];
    free(rcs);
    return rc;
}

int tsr_submit_threads(void) { return tsr_ctx.submit_threads; }

double *tsr_submitter_owed_us(void)
{
    starpu_pthread_t self = starpu_pthread_self();
    for (int k = 1; k <= pool.helpers; k++)
        if (starpu_pthread_equal(submitters[k].thread, self))
            return &submitters[k].owed_us;
    return &submitters[0].owed_us;
}

void tsr_submit_threads_stop(void)
{
    starpu_pthread_mutex_lock(&pool.lock);
    int helpers = pool.helpers;
    pool.stopping = 1;
    if (helpers)
        starpu_pthread_cond_broadcast(&pool.work);
    starpu_pthread_mutex_unlock(&pool.lock);
    for (int k = 1; k <= helpers; k++)
        starpu_pthread_join(submitters[k].thread, NULL);
    if (helpers) {
        starpu_pthread_cond_destroy(&pool.work);
        starpu_pthread_cond_destroy(&pool.done);
    }
    pool.helpers = 0;
    pool.stopping = 0;
    submitters[0].owed_us = 0;
}
