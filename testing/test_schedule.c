/* The recorded schedule (cfg.schedule_png): task list, critical path, chart.
 *  - a chain: ordered GEMM into one C tile over 8 k-tiles. Its 8 tasks must
 *    be in the CSV and run one after another: asserted on the dependencies
 *    (the critical path, which the analysis computes on the task graph from
 *    each task's own duration, covers all of them: >= the sum of their
 *    durations), not on start and end times from different cores' clocks,
 *    which may be skewed (a chained GEMM once seemed to start before its
 *    predecessor's end on a CI VM). Only times of one worker (one clock) are
 *    compared: its tasks never overlap;
 *  - independent tasks: 16 C tiles with one k-tile each. The critical path
 *    is one task long (plus the fills), far below the sum of the work;
 *  - the replay of each graph on 2 .. 32 workers (each task costing the
 *    run's mean runtime cost c more) lies between the bounds of a list
 *    schedule: max(work' / W, critical path) and work' / W + critical path
 *    + tasks c, with work' = work + tasks c; on 32 workers (more than either
 *    graph's tasks can use) it is the critical path plus c for each task on
 *    it;
 *  - the PNG is a PNG; bad chart names are refused before StarPU starts.
 *   test_schedule WORKDIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tessera.h"
#include "tsr_check.h"
#include "tsr_schedule_report.h"

#define ROUNDING 0.06 /* ms: the summary prints one decimal, the CSV three */
/* ms: the CSV's rounding of two times (0.5 us each) */
#define CSV_SLACK 0.001
enum { MAX_WORKERS = 64, MAX_TASKS = 4096 };

typedef struct { int worker; double start, end; } interval_t;

static int by_start(const void *a, const void *b)
{
    double x = ((const interval_t *)a)->start, y = ((const interval_t *)b)->start;
    return (x > y) - (x < y);
}

/* Tasks that start before the previous one of their worker (one clock) ends. */
static int overlapping(interval_t *iv, int n)
{
    double prev_end[MAX_WORKERS];
    for (int w = 0; w < MAX_WORKERS; w++)
        prev_end[w] = -INFINITY;
    qsort(iv, (size_t)n, sizeof *iv, by_start);
    int count = 0;
    for (int i = 0; i < n; i++) {
        count += iv[i].start < prev_end[iv[i].worker] - CSV_SLACK;
        prev_end[iv[i].worker] = iv[i].end;
    }
    return count;
}

typedef struct {
    int gemms;
    double gemm_sum_ms, gemm_max_ms;
    int overlapping; /* tasks that start before the previous one of their worker ends (beyond CSV_SLACK) */
    double critical_path_ms, work_ms;
    long tasks;
    int nreplays;
    int replay_workers[8];
    double replay_ms[8], replay_task_cost_ms;
} run_result_t;

/* GEMM m x n x k in tiles of 64, recorded; the summary goes to TXT. */
static int run_recorded(const char *png, const char *txt, int m, int n, int k)
{
    tsr_config_t cfg;
    tsr_config_default(&cfg);
    cfg.schedule_png = png;
    cfg.schedule_report = tsr_schedule_report;
    cfg.ncpus = 2;
    int rc = tsr_init(&cfg, NULL, NULL);
    if (rc)
        return rc;
    tsr_desc_t *A, *B, *C;
    tsr_dist_t grid = tsr_dist_block_cyclic(1, 1);
    tsr_desc_create_2d(&A, TSR_FLOAT32, m, k, 64, 64, &grid);
    tsr_desc_create_2d(&B, TSR_FLOAT32, k, n, 64, 64, &grid);
    tsr_desc_create_2d(&C, TSR_FLOAT32, m, n, 64, 64, &grid);
    tsr_desc_fill_random(A, 1);
    tsr_desc_fill_random(B, 2);
    rc = tsr_gemm(TSR_NOTRANS, TSR_NOTRANS, 1.0, A, B, 0.0, C, TSR_REDUCTION_ORDERED);
    tsr_wait();
    tsr_desc_destroy(A);
    tsr_desc_destroy(B);
    tsr_desc_destroy(C);
    /* the summary is printed on stderr by tsr_finalize */
    fflush(stderr);
    FILE *saved = fdopen(dup(fileno(stderr)), "w");
    if (!freopen(txt, "w", stderr))
        return -1;
    int frc = tsr_finalize();
    fflush(stderr);
    dup2(fileno(saved), fileno(stderr));
    fclose(saved);
    return rc ? rc : frc;
}

static int read_results(const char *csv, const char *txt, run_result_t *r)
{
    memset(r, 0, sizeof *r);
    FILE *f = fopen(csv, "r");
    if (!f)
        return -1;
    char line[512], kind[128];
    static interval_t iv[MAX_TASKS];
    int niv = 0;
    if (!fgets(line, sizeof line, f) || strncmp(line, "task,kind,worker,", 17) != 0) {
        fclose(f);
        return -1;
    }
    while (fgets(line, sizeof line, f)) {
        unsigned long id;
        int worker;
        char wname[64];
        double ready, start, end;
        if (sscanf(line, "%lu,%127[^,],%d,%63[^,],%lf,%lf,%lf", &id, kind, &worker, wname, &ready, &start, &end) != 7)
            continue;
        r->tasks++;
        if (worker >= 0 && worker < MAX_WORKERS && niv < MAX_TASKS)
            iv[niv++] = (interval_t){ worker, start, end };
        if (strcmp(kind, "tsr_gemm_float32") != 0)
            continue;
        r->gemms++;
        r->gemm_sum_ms += end - start;
        r->gemm_max_ms = fmax(r->gemm_max_ms, end - start);
    }
    fclose(f);
    r->overlapping = overlapping(iv, niv);
    f = fopen(txt, "r");
    if (!f)
        return -1;
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "; work ");
        if (strncmp(line, "schedule", 8) == 0 && p &&
            sscanf(p, "; work %lf ms; critical path %lf ms", &r->work_ms, &r->critical_path_ms) == 2)
            found = 1;
        p = strstr(line, "replay of the run with the measured task times and ");
        if (p && sscanf(p, "replay of the run with the measured task times and %lf", &r->replay_task_cost_ms) == 1 &&
            (p = strstr(p, "): ")) && sscanf(p, "): %d workers %lf ms", &r->replay_workers[0], &r->replay_ms[0]) == 2) {
            r->replay_task_cost_ms /= 1e3;
            r->nreplays = 1;
            for (p = strchr(p, ','); p && r->nreplays < 8; p = strchr(p + 1, ','))
                if (sscanf(p, ", %d: %lf ms", &r->replay_workers[r->nreplays], &r->replay_ms[r->nreplays]) == 2)
                    r->nreplays++;
        }
        fputs(line, stdout);
    }
    fclose(f);
    return found ? 0 : -1;
}

static int is_png(const char *path)
{
    unsigned char sig[8] = { 0 };
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(sig, 1, 8, f) : 0;
    if (f)
        fclose(f);
    return n == 8 && memcmp(sig, "\x89PNG\r\n\x1a\n", 8) == 0;
}

/* Records GEMM m x n x k into DIR/NAME.png / .csv / .txt and reads the
 * results back into *r (every step checked). */
static void recorded_case(const char *dir, const char *name, int m, int n, int k, run_result_t *r)
{
    char png[4096], csv[4096], txt[4096];
    snprintf(png, sizeof png, "%s/%s.png", dir, name);
    snprintf(csv, sizeof csv, "%s/%s.csv", dir, name);
    snprintf(txt, sizeof txt, "%s/%s.txt", dir, name);
    CHECK_RC(run_recorded(png, txt, m, n, k), TSR_SUCCESS);
    CHECK(read_results(csv, txt, r) == 0);
    CHECK(is_png(png));
}

/* The replays on 2, 4, 8, 16 and 32 workers against a list schedule's bounds
 * (printed numbers are compared: three times the rounding); path_tasks: the
 * tasks on the critical path. */
static void check_replays(const run_result_t *r, int path_tasks)
{
    const double tol = 3 * ROUNDING, cost = r->tasks * r->replay_task_cost_ms, work = r->work_ms + cost;
    CHECK(r->nreplays == 5);
    CHECK(r->replay_task_cost_ms >= 0);
    for (int i = 0; i < r->nreplays; i++) {
        double w = r->replay_workers[i], t = r->replay_ms[i];
        CHECK(r->replay_workers[i] == 2 << i);
        CHECK(t >= fmax(work / w, r->critical_path_ms) - tol);
        CHECK(t <= work / w + r->critical_path_ms + cost + tol);
    }
    CHECK(fabs(r->replay_ms[r->nreplays - 1] - (r->critical_path_ms + path_tasks * r->replay_task_cost_ms)) <= tol);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s WORKDIR\n", argv[0]);
        return 2;
    }
    run_result_t r;

    /* a chain of 8 GEMMs on one C tile */
    recorded_case(argv[1], "chain", 64, 64, 512, &r);
    CHECK(r.gemms == 8);
    CHECK(r.overlapping == 0);
    CHECK(r.critical_path_ms >= r.gemm_sum_ms - ROUNDING); /* the 8 are chained */
    CHECK(r.critical_path_ms <= r.work_ms + ROUNDING);
    check_replays(&r, 8);

    /* 16 independent GEMMs */
    recorded_case(argv[1], "independent", 256, 256, 64, &r);
    CHECK(r.gemms == 16);
    CHECK(r.overlapping == 0);
    CHECK(r.critical_path_ms >= r.gemm_max_ms - ROUNDING);
    CHECK(r.critical_path_ms < r.work_ms - r.gemm_sum_ms + 2 * r.gemm_max_ms + ROUNDING);
    check_replays(&r, 1);

    /* bad chart names: refused by tsr_init, nothing started */
    tsr_config_t cfg;
    tsr_config_default(&cfg);
    cfg.schedule_png = "chart.png"; /* and no analysis to run */
    CHECK_RC(tsr_init(&cfg, NULL, NULL), TSR_EINVAL);
    cfg.schedule_report = tsr_schedule_report;
    cfg.schedule_png = "chart.jpg";
    CHECK_RC(tsr_init(&cfg, NULL, NULL), TSR_EINVAL);
    cfg.schedule_png = "/nonexistent-directory/chart.png";
    CHECK_RC(tsr_init(&cfg, NULL, NULL), TSR_EIO);
    CHECK(!tsr_initialized());
    return tsr_check_report("test_schedule");
}
