/* Worker groups without a GPU (TSR_CPU_WORKER_GROUPS=1: each of 2 CPU
 * workers a group of its own), from the recorded schedule:
 *  - every task touching a descriptor placed on a group (tsr_desc_run_on)
 *    runs on that group's worker, whichever other tiles it reads;
 *  - a task touching none, but a descriptor homed on a group
 *    (tsr_desc_home_on), runs on that group's worker;
 *  - without TSR_CPU_WORKER_GROUPS there is no group (CPU workers are
 *    grouped only for tests), and a bad value is refused by tsr_init.
 *   test_worker_groups            (under mpirun: the placement on each rank) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tessera.h"
#include "tsr_check.h"
#include "tsr_schedule.h"

enum { N = 128, TILE = 64, TILES = (N / TILE) * (N / TILE), MAX_HANDLES = 4 * TILES };

/* Each recorded handle, the worker its tasks must run on, and whether its
 * descriptor is placed (2) or homed (1) there. */
static starpu_data_handle_t handles[MAX_HANDLES];
static int expected_worker[MAX_HANDLES], strength[MAX_HANDLES], nhandles, tasks_checked, tasks_misplaced;

static void expect(tsr_desc_t *d, int worker, int placed)
{
    for (int i = 0; i < d->mt; i++)
        for (int j = 0; j < d->nt; j++) {
            handles[nhandles] = tsr_tile_registered_handle(d, 0, i, j);
            strength[nhandles] = placed ? 2 : 1;
            expected_worker[nhandles++] = worker;
        }
}

/* The worker a task must run on: that of its first placed handle, else of
 * its first homed one; -1 for none. */
static int worker_of(const tsr_task_record_t *t)
{
    for (int want = 2; want >= 1; want--)
        for (int k = 0; k < t->nhandles && k < TSR_RECORD_HANDLES; k++)
            for (int h = 0; h < nhandles; h++)
                if (t->handles[k] == handles[h] && strength[h] == want)
                    return expected_worker[h];
    return -1;
}

static int check_placement(const tsr_recording_t *rec)
{
    for (long i = 0; i < rec->ntasks; i++) {
        const tsr_task_record_t *t = tsr_recorded_task(i);
        int want = worker_of(t);
        if (want < 0)
            continue;
        tasks_checked++;
        if (t->worker != want) {
            tasks_misplaced++;
            fprintf(stderr, "task %s ran on worker %d, not %d\n", t->kind, t->worker, want);
        }
    }
    return 0;
}

static tsr_desc_t *matrix(uint64_t seed)
{
    tsr_desc_t *d = NULL;
    CHECK_RC(tsr_desc_create_2d(&d, TSR_FLOAT32, N, N, TILE, TILE, NULL), TSR_SUCCESS);
    CHECK_RC(tsr_desc_fill_random(d, seed), TSR_SUCCESS);
    return d;
}

static int start(int ncpus, int record)
{
    tsr_config_t cfg;
    tsr_config_default(&cfg);
    cfg.ncpus = ncpus;
    cfg.ncuda = 0;
    cfg.schedule_summary = record;
    cfg.schedule_report = record ? check_placement : NULL;
    return tsr_init(&cfg, NULL, NULL);
}

/* a and b placed on groups 0 and 1, h homed on group 0, f free: each task
 * below must run where its first placed (else homed) descriptor says (under
 * MPI on each rank, of the tasks of its tiles). Returns the ranks. */
static int placed_tasks(void)
{
    CHECK_RC(start(2, 1), TSR_SUCCESS);
    int ranks = tsr_size();
    CHECK(tsr_worker_groups() == 2);
    char name[64];
    tsr_worker_group_name(1, name, sizeof name);
    CHECK(strcmp(name, "CPU worker 1") == 0);
    CHECK(tsr_worker_group_of(5) == 1);
    tsr_desc_t *a = matrix(1), *b = matrix(2), *h = matrix(3), *f = matrix(4), *out = matrix(5);
    tsr_desc_run_on(a, 0);
    tsr_desc_run_on(b, 1);
    tsr_desc_home_on(h, 0);
    for (int rep = 0; rep < 8; rep++) {
        CHECK_RC(tsr_residual_forward(a, f, a), TSR_SUCCESS);   /* group 0 */
        CHECK_RC(tsr_residual_forward(h, b, b), TSR_SUCCESS);   /* group 1: b is placed, h only homed */
        CHECK_RC(tsr_residual_forward(f, b, out), TSR_SUCCESS); /* group 1 */
        CHECK_RC(tsr_residual_forward(f, h, f), TSR_SUCCESS);   /* group 0: h's home */
    }
    CHECK_RC(tsr_wait(), TSR_SUCCESS);
    expect(a, 0, 1);
    expect(b, 1, 1);
    expect(h, 0, 0);
    tsr_desc_t *all[] = { a, b, h, f, out };
    for (int k = 0; k < 5; k++)
        tsr_desc_destroy(all[k]);
    CHECK_RC(tsr_finalize(), TSR_SUCCESS);
    printf("placed tasks: %d checked, %d on another worker\n", tasks_checked, tasks_misplaced);
    CHECK(tasks_checked >= 8 * 4 * TILES / ranks); /* under MPI a rank runs the tasks of its tiles */
    CHECK(tasks_misplaced == 0);
    return ranks;
}

int main(void)
{
    CHECK(setenv("TSR_CPU_WORKER_GROUPS", "1", 1) == 0);
    if (placed_tasks() > 1) /* MPI is finalized: no second start */
        return tsr_check_report("test_worker_groups");
    /* one CPU worker: no groups (a single group places nothing) */
    CHECK_RC(start(1, 0), TSR_SUCCESS);
    CHECK(tsr_worker_groups() == 0);
    CHECK(tsr_worker_group_of(3) == -1);
    CHECK_RC(tsr_finalize(), TSR_SUCCESS);
    CHECK(unsetenv("TSR_CPU_WORKER_GROUPS") == 0);
    CHECK_RC(start(2, 0), TSR_SUCCESS);
    CHECK(tsr_worker_groups() == 0);
    CHECK_RC(tsr_finalize(), TSR_SUCCESS);
    CHECK(setenv("TSR_CPU_WORKER_GROUPS", "yes", 1) == 0);
    CHECK_RC(start(2, 0), TSR_EINVAL);
    return tsr_check_report("test_worker_groups");
}
