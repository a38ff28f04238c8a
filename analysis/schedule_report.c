/* The analysis of a recorded schedule (core/schedule.c records it and hands
 * it over at tsr_finalize):
 *  - the schedule summary: time per operation kind, per worker busy / idle /
 *    runtime overhead, the critical path of the task graph (rebuilt from the
 *    tasks' data accesses in submission order, the dependencies StarPU's
 *    sequential consistency implies) with measured durations, the ideal
 *    makespan max(work / workers, critical path), a replay of the graph on
 *    1-16 times the workers (list schedule, measured task times) and a
 *    verdict on the tiles;
 *  - optionally FILE.csv (one line per task) and FILE.png (a Gantt chart
 *    drawn by gnuplot, one lane per worker, steps marked). */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <starpu.h>
#include "tsr_schedule_report.h"
#include "tsr_schedule.h"
#include "tsr_files.h"

#define MAX_HANDLES TSR_RECORD_HANDLES

typedef tsr_task_record_t task_record_t;
typedef tsr_schedule_mark_t mark_t;

static const tsr_recording_t *run; /* the recording being analysed */

static const task_record_t *record_at(long i) { return tsr_recorded_task(i); }

/* ---- the task graph and its critical path ---------------------------------- */

/* The dependency edges as successor lists (CSR over submission positions),
 * the ones StarPU's sequential consistency implies: every access waits for
 * the last writer; reads and writes also for the REDUX contributions since;
 * writes also for every reader since. Edges point forwards in submission
 * order. */
typedef struct {
    long *first, *succ, *npred; /* first[n + 1] */
    long nedges;
} graph_t;

typedef struct {
    starpu_data_handle_t h;
    long writer, readers, reduxes; /* writer: position; readers/reduxes: list heads in the node pool */
} access_state_t;

typedef struct {
    long pos, next;
} node_t;

static void free_graph(graph_t *g)
{
    free(g->first);
    free(g->succ);
    free(g->npred);
}

/* Calls add(from, to) for every edge; returns 0, or -1 on allocation failure. */
static int for_each_edge(const long *order, long n, void (*add)(graph_t *, long, long), graph_t *g)
{
    size_t cap = 64;
    while (cap < (size_t)n * MAX_HANDLES * 2)
        cap *= 2;
    access_state_t *slots = calloc(cap, sizeof *slots);
    node_t *pool = malloc(sizeof(node_t) * (size_t)n * MAX_HANDLES);
    if (!slots || !pool) {
        free(slots);
        free(pool);
        return -1;
    }
    long used = 0;
    for (long k = 0; k < n; k++) {
        const task_record_t *r = record_at(order[k]);
        for (int b = 0; b < r->nhandles; b++) {
            size_t i = ((uintptr_t)r->handles[b] >> 4) * 0x9E3779B97F4A7C15ull & (cap - 1);
            while (slots[i].h && slots[i].h != r->handles[b])
                i = (i + 1) & (cap - 1);
            access_state_t *s = &slots[i];
            if (!s->h)
                *s = (access_state_t){ r->handles[b], -1, -1, -1 };
            enum starpu_data_access_mode mode = r->modes[b];
            int redux = (mode & STARPU_REDUX) != 0, write = (mode & STARPU_W) && !redux;
            if (s->writer >= 0)
                add(g, s->writer, k);
            if (!redux)
                for (long e = s->reduxes; e >= 0; e = pool[e].next)
                    add(g, pool[e].pos, k);
            if (write) {
                for (long e = s->readers; e >= 0; e = pool[e].next)
                    add(g, pool[e].pos, k);
                *s = (access_state_t){ s->h, k, -1, -1 };
            } else {
                pool[used] = (node_t){ k, redux ? s->reduxes : s->readers };
                *(redux ? &s->reduxes : &s->readers) = used++;
            }
        }
    }
    free(slots);
    free(pool);
    return 0;
}

/* (A task that names one handle twice would otherwise wait for itself.) */
static void count_edge(graph_t *g, long from, long to)
{
    if (from == to)
        return;
    g->first[from + 1]++;
    g->npred[to]++;
    g->nedges++;
}

static void store_edge(graph_t *g, long from, long to)
{
    if (from != to)
        g->succ[g->first[from]++] = to;
}

static int build_graph(const long *order, long n, graph_t *g)
{
    *g = (graph_t){ calloc((size_t)n + 1, sizeof(long)), NULL, calloc((size_t)n, sizeof(long)), 0 };
    if (!g->first || !g->npred || for_each_edge(order, n, count_edge, g) != 0)
        return -1;
    for (long k = 0; k < n; k++)
        g->first[k + 1] += g->first[k];
    g->succ = malloc(sizeof(long) * (size_t)(g->nedges ? g->nedges : 1));
    if (!g->succ || for_each_edge(order, n, store_edge, g) != 0)
        return -1;
    for (long k = n; k > 0; k--) /* store_edge advanced each first[k] to first[k + 1] */
        g->first[k] = g->first[k - 1];
    g->first[0] = 0;
    return 0;
}

/* The longest path through the graph, each task weighted by its measured
 * duration: cp_end[k] is where task k ends on it, pred[k] its predecessor
 * there (-1: none), by submission position. Returns the position ending the
 * path. One pass in submission order sees every task's predecessors first:
 * until task k is reached, cp_end[k] holds the latest end among them. */
static long critical_path(const long *order, long n, const graph_t *g, double *cp_end, long *pred)
{
    for (long k = 0; k < n; k++) {
        cp_end[k] = 0;
        pred[k] = -1;
    }
    long last = -1;
    for (long k = 0; k < n; k++) {
        const task_record_t *r = record_at(order[k]);
        cp_end[k] += r->end_us - r->start_us;
        for (long j = g->first[k]; j < g->first[k + 1]; j++) {
            long s = g->succ[j];
            if (cp_end[k] > cp_end[s]) {
                cp_end[s] = cp_end[k];
                pred[s] = k;
            }
        }
        if (last < 0 || cp_end[k] > cp_end[last])
            last = k;
    }
    return last;
}

/* ---- summary ---------------------------------------------------------------- */

typedef struct {
    const char *kind;
    long count, on_path;
    double us, flops;
} kind_stat_t;

typedef struct {
    double busy, idle, overhead;
    long tasks;
} worker_stat_t;

#define MAX_KINDS 256

/* "tsr_linear_fwd_float32" -> "linear_fwd", "..._float64" -> "... f64". */
static const char *display_name(const char *kind, char *buf, size_t size)
{
    const char *k = strncmp(kind, "tsr_", 4) == 0 ? kind + 4 : kind;
    size_t n = strlen(k);
    if (n > 8 && strcmp(k + n - 8, "_float32") == 0)
        snprintf(buf, size, "%.*s", (int)(n - 8), k);
    else if (n > 8 && strcmp(k + n - 8, "_float64") == 0)
        snprintf(buf, size, "%.*s f64", (int)(n - 8), k);
    else
        snprintf(buf, size, "%s", k);
    return buf;
}

/* The kind's entry (added when new); -1 when the table is full. */
static int kind_index(kind_stat_t *kinds, int *nkinds, const char *kind)
{
    for (int k = 0; k < *nkinds; k++)
        if (kinds[k].kind == kind || strcmp(kinds[k].kind, kind) == 0)
            return k;
    if (*nkinds == MAX_KINDS)
        return -1;
    kinds[*nkinds] = (kind_stat_t){ kind, 0, 0, 0, 0 };
    return (*nkinds)++;
}

static int by_job(const void *a, const void *b)
{
    unsigned long x = record_at(*(const long *)a)->job, y = record_at(*(const long *)b)->job;
    return x < y ? -1 : x > y;
}

static int by_start(const void *a, const void *b)
{
    double x = record_at(*(const long *)a)->start_us, y = record_at(*(const long *)b)->start_us;
    return x < y ? -1 : x > y;
}

/* The workers a record ran on: its worker, or the members of a combined
 * worker (a parallel task occupies each of them). */
static int task_workers(const task_record_t *r, int *ids, int max)
{
    int nw = (int)starpu_worker_get_count();
    if (r->worker >= 0 && r->worker < nw) {
        ids[0] = r->worker;
        return 1;
    }
    int size = 0, *members = NULL;
    if (starpu_combined_worker_get_description(r->worker, &size, &members) != 0 || size <= 0)
        return 0;
    size = size < max ? size : max;
    memcpy(ids, members, (size_t)size * sizeof(int));
    return size;
}

/* Busy time (union of the worker's task intervals: a CUDA worker overlaps
 * tasks), runtime overhead (gaps while the next task was already ready: pop,
 * data acquisition, release, callbacks) and idle time (gaps while no task
 * was ready) of each worker within [t0, t1]. */
static void worker_times(const long *order, long n, double t0, double t1, worker_stat_t *ws, int nw)
{
    long *lane = malloc(sizeof(long) * (size_t)(n ? n : 1));
    for (int w = 0; lane && w < nw; w++) {
        long m = 0;
        for (long k = 0; k < n; k++) {
            int ids[STARPU_NMAXWORKERS], c = task_workers(record_at(order[k]), ids, STARPU_NMAXWORKERS);
            for (int j = 0; j < c; j++)
                if (ids[j] == w)
                    lane[m++] = order[k];
        }
        qsort(lane, (size_t)m, sizeof *lane, by_start);
        double free_at = t0;
        ws[w] = (worker_stat_t){ 0, 0, 0, m };
        for (long k = 0; k < m; k++) {
            const task_record_t *r = record_at(lane[k]);
            if (r->start_us > free_at) {
                double ready = r->ready_us > free_at ? r->ready_us : free_at;
                double overhead = r->start_us > ready ? r->start_us - ready : 0;
                ws[w].overhead += overhead;
                ws[w].idle += r->start_us - free_at - overhead;
            }
            double from = r->start_us > free_at ? r->start_us : free_at;
            if (r->end_us > from)
                ws[w].busy += r->end_us - from;
            if (r->end_us > free_at)
                free_at = r->end_us;
        }
        ws[w].idle += t1 > free_at ? t1 - free_at : 0;
    }
    free(lane);
}

static void print_verdict(FILE *out, double makespan, double ideal, double cp, double overhead_share,
                          double idle_share, double mean_task, double per_task_overhead)
{
    fprintf(out, "  verdict: ");
    if (overhead_share >= 0.10 && overhead_share >= idle_share)
        fprintf(out, "tiles too small: %.0f%% of the time is task overhead (mean task %.0f us, %.0f us of "
                "runtime overhead per task); larger tiles\n", 100 * overhead_share, mean_task, per_task_overhead);
    else if (idle_share >= 0.20 && cp >= 0.5 * makespan)
        fprintf(out, "tiles too big: workers idle %.0f%% waiting on the critical path (%.1f ms of a %.1f ms "
                "run); smaller tiles or more independent work\n", 100 * idle_share, cp / 1e3, makespan / 1e3);
    else if (idle_share >= 0.20)
        fprintf(out, "workers idle %.0f%% although the critical path is short (%.1f ms of %.1f ms): tasks "
                "arrive too slowly (submission, transfers or pauses between iterations)\n", 100 * idle_share,
                cp / 1e3, makespan / 1e3);
    else
        fprintf(out, "tiles fit: %.0f%% of the ideal makespan reached, overhead %.0f%%, idle %.0f%%\n",
                100 * ideal / makespan, 100 * overhead_share, 100 * idle_share);
}

/* ---- replay on other worker counts ------------------------------------------ */

/* The recorded task graph replayed on W identical workers with the measured
 * task durations plus the mean runtime cost per task measured in the run: a
 * list schedule in which a free worker takes the ready task submitted
 * first. It shows how far more workers could take this graph (tile sizes,
 * chains), not what they would measure: it leaves out memory contention,
 * transfers, and how the runtime's cost grows with the workers. */

typedef struct {
    double key;
    long idx;
} heap_item_t;

typedef struct {
    heap_item_t *items;
    long size;
} heap_t;

static void heap_push(heap_t *h, double key, long idx)
{
    long i = h->size++;
    while (i > 0 && h->items[(i - 1) / 2].key > key) {
        h->items[i] = h->items[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->items[i] = (heap_item_t){ key, idx };
}

static heap_item_t heap_pop(heap_t *h)
{
    heap_item_t top = h->items[0], last = h->items[--h->size];
    long i = 0;
    for (;;) {
        long c = 2 * i + 1;
        if (c >= h->size)
            break;
        if (c + 1 < h->size && h->items[c + 1].key < h->items[c].key)
            c++;
        if (h->items[c].key >= last.key)
            break;
        h->items[i] = h->items[c];
        i = c;
    }
    h->items[i] = last;
    return top;
}

/* The replayed makespan on nworkers, in us (each task costs `per_task` us
 * more than it ran); -1 on allocation failure. */
static double replay(const long *order, long n, const graph_t *g, int nworkers, double per_task)
{
    long *waiting = malloc(sizeof(long) * (size_t)n);
    heap_t ready = { malloc(sizeof(heap_item_t) * (size_t)n), 0 };
    heap_t running = { malloc(sizeof(heap_item_t) * (size_t)n), 0 };
    double now = 0, makespan = -1;
    if (waiting && ready.items && running.items) {
        memcpy(waiting, g->npred, sizeof(long) * (size_t)n);
        for (long k = 0; k < n; k++)
            if (!waiting[k])
                heap_push(&ready, (double)k, k);
        int idle = nworkers;
        long done = 0;
        while (done < n) {
            for (; idle > 0 && ready.size; idle--) {
                long k = heap_pop(&ready).idx;
                const task_record_t *r = record_at(order[k]);
                heap_push(&running, now + (r->end_us - r->start_us) + per_task, k);
            }
            if (!running.size) /* cannot happen: edges point forwards in submission order */
                break;
            heap_item_t e = heap_pop(&running);
            now = e.key;
            idle++;
            done++;
            for (long j = g->first[e.idx]; j < g->first[e.idx + 1]; j++)
                if (--waiting[g->succ[j]] == 0)
                    heap_push(&ready, (double)g->succ[j], g->succ[j]);
        }
        makespan = done == n ? now : -1;
    }
    free(waiting);
    free(ready.items);
    free(running.items);
    return makespan;
}

/* Whether the tasks can be replayed: one process, CPU workers alone, each
 * task on one worker. */
static int replayable(const long *order, long n)
{
    int nw = (int)starpu_worker_get_count();
    if (n == 0 || tsr_size() > 1 || starpu_cpu_worker_get_count() != (unsigned)nw)
        return 0;
    for (long k = 0; k < n; k++)
        if (record_at(order[k])->worker < 0 || record_at(order[k])->worker >= nw)
            return 0;
    return 1;
}

/* One line: the replay of these tasks (graph g, each costing per_task us of
 * runtime more than it ran) on the run's own worker count (how far the
 * replay is from the measured span) and on 2 .. 16 times as many. */
static void print_replay(FILE *out, const char *what, const long *order, long n, const graph_t *g, double per_task,
                         double measured)
{
    int nw = (int)starpu_worker_get_count();
    double t[5]; /* on nw, 2 nw, .. 16 nw workers */
    int ok = 1;
    for (int i = 0; i < 5; i++)
        ok &= (t[i] = replay(order, n, g, nw << i, per_task)) >= 0;
    if (!ok)
        return;
    fprintf(out, "  replay of %s with the measured task times and %.1f us of runtime cost a task (no contention): "
            "%d workers %.1f ms (measured %.1f ms)", what, per_task, nw, t[0] / 1e3, measured / 1e3);
    for (int i = 1; i < 5; i++)
        fprintf(out, ", %d: %.1f ms", nw << i, t[i] / 1e3);
    fputc('\n', out);
}

/* The replay of the tasks that start in the steady window [lo, hi) (their
 * own graph; the runtime cost a task measured over them). The window's
 * first tasks find their predecessors done: the replay starts the steps
 * ahead by at most part of one step. */
static void print_window_replay(FILE *out, const long *order, long n, double lo, double hi)
{
    int nw = (int)starpu_worker_get_count();
    long *window = malloc(sizeof(long) * (size_t)n), m = 0;
    worker_stat_t *ws = calloc((size_t)nw, sizeof *ws);
    graph_t g = { 0 };
    for (long k = 0; window && k < n; k++) {
        double start = record_at(order[k])->start_us;
        if (start >= lo && start < hi)
            window[m++] = order[k];
    }
    if (window && ws && replayable(window, m) && build_graph(window, m, &g) == 0) {
        double end = lo, overhead = 0;
        for (long k = 0; k < m; k++)
            end = fmax(end, record_at(window[k])->end_us);
        worker_times(window, m, lo, end, ws, nw);
        for (int w = 0; w < nw; w++)
            overhead += ws[w].overhead;
        print_replay(out, "these steps", window, m, &g, overhead / m, hi - lo);
    }
    free_graph(&g);
    free(ws);
    free(window);
}

/* Per operation kind: tasks, time and flops of the tasks that start in
 * [lo, hi) (all of them: -inf, inf). Returns the number of kinds. */
static int kind_totals(const long *order, long n, double lo, double hi, kind_stat_t *kinds)
{
    int nkinds = 0;
    for (long i = 0; i < n; i++) {
        const task_record_t *r = record_at(order[i]);
        int k = r->start_us >= lo && r->start_us < hi ? kind_index(kinds, &nkinds, r->kind) : -1;
        if (k < 0)
            continue;
        kinds[k].count++;
        kinds[k].us += r->end_us - r->start_us;
        kinds[k].flops += r->flops;
    }
    return nkinds;
}

static double kinds_work(const kind_stat_t *kinds, int nkinds)
{
    double work = 0;
    for (int k = 0; k < nkinds; k++)
        work += kinds[k].us;
    return work;
}

/* One line per kind: tasks, ms, share of the work, mean, GFLOP/s and, with
 * on_path, how many of its tasks lie on the critical path. */
static void print_kinds(FILE *out, const kind_stat_t *kinds, int nkinds, int on_path)
{
    double work = kinds_work(kinds, nkinds);
    fprintf(out, "  %-24s %8s %10s %6s %10s %9s", "operation", "tasks", "ms", "share", "mean us", "GFLOP/s");
    fprintf(out, on_path ? " %8s\n" : "\n", "on path");
    char name[64];
    for (int k = 0; k < nkinds; k++) {
        fprintf(out, "  %-24s %8ld %10.1f %5.1f%% %10.1f %9.1f", display_name(kinds[k].kind, name, sizeof name),
                kinds[k].count, kinds[k].us / 1e3, work > 0 ? 100 * kinds[k].us / work : 0,
                kinds[k].us / kinds[k].count, kinds[k].us > 0 ? kinds[k].flops / kinds[k].us / 1e3 : 0);
        if (on_path)
            fprintf(out, " %8ld", kinds[k].on_path);
        fputc('\n', out);
    }
}

/* The operations again over the steady steps alone, when the run marked
 * steps (tsr_gpt2): the tasks that start between the third mark and the
 * last one. The first steps pay first-touch page faults and the last one
 * drains the pipeline, so rates over the whole run understate them. */
static void print_steady_window(FILE *out, const long *order, long n)
{
    if (run->nmarks < 4)
        return;
    const mark_t *from = &run->marks[2], *to = &run->marks[run->nmarks - 1];
    kind_stat_t *kinds = calloc(MAX_KINDS, sizeof *kinds);
    if (!kinds)
        return;
    int nkinds = kind_totals(order, n, from->us, to->us, kinds);
    double span = to->us - from->us, work = kinds_work(kinds, nkinds);
    int nw = (int)starpu_worker_get_count();
    fprintf(out, "  steady steps, tasks starting from '%s' to '%s' (%.1f ms): work %.1f ms, workers busy %.0f%%\n",
            from->label, to->label, span / 1e3, work / 1e3, span > 0 ? 100 * work / (span * nw) : 0);
    if (starpu_cuda_worker_get_count() > 0) {
        /* residency: what a steady step copies between host and GPU memory */
        int steps = run->nmarks - 3;
        fprintf(out, "  steady steps' host <-> GPU copies: %.3f MB host to GPU, %.3f MB GPU to host a step "
                "(%d steps)\n", (to->bytes_to_gpus - from->bytes_to_gpus) / 1e6 / steps,
                (to->bytes_from_gpus - from->bytes_from_gpus) / 1e6 / steps, steps);
        /* data parallelism over GPUs: each copy between them is a fixed cost */
        if (starpu_cuda_worker_get_count() > 1)
            fprintf(out, "  steady steps' GPU <-> GPU copies: %.1f copies, %.1f MB a step (%d steps)\n",
                    (double)(to->copies_between_gpus - from->copies_between_gpus) / steps,
                    (to->bytes_between_gpus - from->bytes_between_gpus) / 1e6 / steps, steps);
    }
    print_window_replay(out, order, n, from->us, to->us);
    print_kinds(out, kinds, nkinds, 0);
    free(kinds);
}

/* The run spans [t0, t1]; cp is the critical path's length. */
static void print_summary(FILE *out, const long *order, long n, const graph_t *g, double t0, double t1,
                          double cp, const kind_stat_t *kinds, int nkinds)
{
    int nw = (int)starpu_worker_get_count();
    double work = 0;
    worker_stat_t *ws = calloc((size_t)nw, sizeof *ws);
    if (!ws)
        return;
    worker_times(order, n, t0, t1, ws, nw);
    double makespan = t1 - t0, busy = 0, idle = 0, overhead = 0;
    for (int w = 0; w < nw; w++) {
        busy += ws[w].busy;
        idle += ws[w].idle;
        overhead += ws[w].overhead;
    }
    work = kinds_work(kinds, nkinds);
    double ideal = fmax(busy / nw, cp);
    char prefix[32] = "";
    if (tsr_size() > 1)
        snprintf(prefix, sizeof prefix, " (rank %d)", tsr_rank());
    fprintf(out, "schedule%s: %ld tasks on %d workers in %.1f ms; work %.1f ms; critical path %.1f ms; "
            "ideal makespan %.1f ms = %.0f%% of the measured one\n", prefix, n, nw, makespan / 1e3, work / 1e3,
            cp / 1e3, ideal / 1e3, makespan > 0 ? 100 * ideal / makespan : 0);
    if (g && replayable(order, n))
        print_replay(out, "the run", order, n, g, overhead / n, makespan);
    print_kinds(out, kinds, nkinds, 1);
    print_steady_window(out, order, n);
    char name[64];
    fprintf(out, "  %-24s %8s %9s %9s %9s\n", "worker", "tasks", "busy", "idle", "overhead");
    for (int w = 0; w < nw; w++) {
        starpu_worker_get_name(w, name, sizeof name);
        fprintf(out, "  %-24s %8ld %8.1f%% %8.1f%% %8.1f%%\n", name, ws[w].tasks,
                makespan > 0 ? 100 * ws[w].busy / makespan : 0, makespan > 0 ? 100 * ws[w].idle / makespan : 0,
                makespan > 0 ? 100 * ws[w].overhead / makespan : 0);
    }
    double total = makespan * nw;
    print_verdict(out, makespan, ideal, cp, total > 0 ? overhead / total : 0, total > 0 ? idle / total : 0,
                  n ? work / n : 0, n ? overhead / n : 0);
    free(ws);
}

/* ---- task list (CSV) and Gantt chart (gnuplot) ----------------------------- */

static int write_csv(const char *path, const long *order, long n, double t0)
{
    tsr_atomic_file_t af; /* never blocks (a FIFO planted since the start is refused), never half-written */
    if (tsr_atomic_begin(&af, path) != 0)
        return TSR_EIO; /* said */
    FILE *f = af.f;
    fprintf(f, "task,kind,worker,worker_name,ready_ms,start_ms,end_ms,rows,cols,depth,flops\n");
    for (long k = 0; k < n; k++) {
        const task_record_t *r = record_at(order[k]);
        char name[64] = "combined";
        if (r->worker >= 0 && r->worker < (int)starpu_worker_get_count())
            starpu_worker_get_name(r->worker, name, sizeof name);
        fprintf(f, "%lu,%s,%d,%s,%.3f,%.3f,%.3f,%d,%d,%d,%.0f\n", r->job, r->kind, r->worker, name,
                (r->ready_us - t0) / 1e3, (r->start_us - t0) / 1e3, (r->end_us - t0) / 1e3, r->rows, r->cols,
                r->depth, r->flops);
    }
    if (tsr_atomic_commit(&af) != 0) {
        tsr_log(TSR_LOG_ERROR, "schedule: writing %s failed", path);
        return TSR_EIO;
    }
    return TSR_SUCCESS;
}

/* A distinct colour per kind: a qualitative palette of 20 colours that do
 * not look alike (Trubetskoy's, the first most distinct; its beige, unseen on
 * white, is a dark grey here), then hues around the circle at two lightness
 * levels. */
static void kind_colour(int k, char out[8])
{
    static const char *const palette[] = { "#e6194b", "#3cb44b", "#ffe119", "#4363d8", "#f58231", "#911eb4", "#42d4f4",
                                           "#f032e6", "#bfef45", "#fabed4", "#469990", "#dcbeff", "#9a6324", "#404040",
                                           "#800000", "#aaffc3", "#808000", "#ffd8b1", "#000075", "#a9a9a9" };
    if (k < (int)(sizeof palette / sizeof palette[0])) {
        snprintf(out, 8, "%s", palette[k]);
        return;
    }
    double h = fmod(k * 0.618033988749895, 1.0) * 6, s = 0.75, v = k % 2 ? 0.70 : 0.95;
    double c = v * s, x = c * (1 - fabs(fmod(h, 2) - 1)), m = v - c, rgb[3];
    int sector = (int)h;
    double table[6][3] = { { c, x, 0 }, { x, c, 0 }, { 0, c, x }, { 0, x, c }, { x, 0, c }, { c, 0, x } };
    for (int i = 0; i < 3; i++)
        rgb[i] = table[sector % 6][i] + m;
    snprintf(out, 8, "#%02x%02x%02x", (int)(255 * rgb[0]), (int)(255 * rgb[1]), (int)(255 * rgb[2]));
}

/* One gnuplot data block per kind (x centre, lane, half width, half height). */
static int write_gantt_data(FILE *f, const long *order, long n, double t0, kind_stat_t *kinds, int nkinds)
{
    for (int k = 0; k < nkinds; k++) {
        fprintf(f, "# %s\n", kinds[k].kind);
        int any = 0;
        for (long j = 0; j < n; j++) {
            const task_record_t *r = record_at(order[j]);
            if (strcmp(r->kind, kinds[k].kind) != 0)
                continue;
            int ids[STARPU_NMAXWORKERS], c = task_workers(r, ids, STARPU_NMAXWORKERS);
            double a = (r->start_us - t0) / 1e3, b = (r->end_us - t0) / 1e3;
            for (int i = 0; i < c; i++, any = 1)
                fprintf(f, "%.4f %d %.4f 0.4\n", (a + b) / 2, ids[i], (b - a) / 2);
        }
        if (!any)
            fprintf(f, "-1 -1 0 0\n");
        fprintf(f, "\n\n");
    }
    return ferror(f) ? TSR_EIO : TSR_SUCCESS;
}

/* s as text for a single-quoted gnuplot string: printable ASCII without
 * quotes or backslashes (no name reaches gnuplot's parser as code). */
static const char *gp_text(const char *s, char *out, size_t n)
{
    size_t k = 0;
    for (; s && *s && k + 1 < n; s++)
        out[k++] = *s >= 0x20 && *s < 0x7f && *s != '\'' && *s != '\\' && *s != '"' ? *s : '_';
    out[k] = '\0';
    return out;
}

/* Copies the file from over to (atomically: tsr_atomic_*). */
static int copy_over(const char *from, const char *to)
{
    FILE *in = tsr_open_regular(from);
    if (!in) {
        tsr_log(TSR_LOG_ERROR, "schedule: cannot read the drawn chart %s: %s", from, strerror(errno));
        return TSR_EIO;
    }
    tsr_atomic_file_t af;
    int rc = tsr_atomic_begin(&af, to);
    char buf[65536];
    size_t got;
    while (!rc && (got = fread(buf, 1, sizeof buf, in)) > 0)
        rc = tsr_atomic_write(&af, buf, got);
    if (!rc && ferror(in))
        rc = TSR_EIO;
    if (!rc)
        rc = tsr_atomic_commit(&af);
    else
        tsr_atomic_abort(&af); /* nothing left when begin failed */
    fclose(in);
    return rc;
}

/* The marks (steps): a dashed line each, and its label above the chart on
 * one of two staggered rows; a label that would overlap the previous one on
 * both rows is left out (its line stays). Label widths are estimated on
 * the safe side: 1000 of the chart's 1600 pixels for the time axis (the key
 * takes the right), 6 pixels a character of the 8-point font. */
static void draw_marks(FILE *gp, double t0, double t1)
{
    double span = (t1 - t0) / 1e3, ms_per_char = span > 0 ? 6.0 * span / 1000.0 : 0;
    double row_end[2] = { -INFINITY, -INFINITY }; /* where each row's last label ends (ms) */
    for (int i = 0; i < run->nmarks; i++) {
        double x = (run->marks[i].us - t0) / 1e3;
        if (x < -span || x > span)
            continue; /* a mark from before or after the run */
        x = x < 0 ? 0 : x;
        fprintf(gp, "set arrow from %.3f, graph 0 to %.3f, graph 1 nohead dt 2 lc rgb '#404040' front\n", x, x);
        char text[64];
        gp_text(run->marks[i].label, text, sizeof text);
        int row = x >= row_end[0] ? 0 : x >= row_end[1] ? 1 : -1;
        if (row < 0)
            continue;
        row_end[row] = x + (strlen(text) + 2) * ms_per_char; /* a gap of two characters */
        fprintf(gp, "set label '%s' at %.3f, graph %.3f font 'sans,8'\n", text, x, row ? 1.045 : 1.01);
    }
}

static int draw_gantt(const char *png, const long *order, long n, double t0, double t1, kind_stat_t *kinds,
                      int nkinds)
{
    char data[] = "/tmp/tsr_gantt_XXXXXX";
    int fd = mkstemp(data);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        tsr_log(TSR_LOG_ERROR, "schedule: cannot create a temporary file: %s", strerror(errno));
        return TSR_EIO;
    }
    int rc = write_gantt_data(f, order, n, t0, kinds, nkinds);
    if (fclose(f) != 0 || rc) {
        unlink(data);
        tsr_log(TSR_LOG_ERROR, "schedule: cannot write the chart's data");
        return TSR_EIO;
    }
    FILE *gp = popen("gnuplot", "w");
    if (!gp) {
        unlink(data);
        tsr_log(TSR_LOG_ERROR, "schedule: cannot run gnuplot (Debian package gnuplot-nox)");
        return TSR_EIO;
    }
    int nw = (int)starpu_worker_get_count();
    fprintf(gp, "set terminal pngcairo noenhanced size 1600,%d font 'sans,10'\nset output '%s'\n",
            nw < 8 ? 360 + 40 * nw : 200 + 28 * nw, png);
    fprintf(gp, "set title 'Tessera schedule: %ld tasks, %d workers, %.1f ms' offset 0,1\nset tmargin 5\n", n, nw,
            (t1 - t0) / 1e3);
    fprintf(gp, "set xlabel 'time (ms)'\nset xrange [0:%.3f]\nset yrange [-0.6:%d.6] reverse\n", (t1 - t0) / 1e3,
            nw - 1);
    fprintf(gp, "set key outside right top vertical maxrows %d font 'sans,9'\nset grid xtics\nset ytics (",
            nkinds < 12 ? 12 : (nkinds + 1) / 2);
    for (int w = 0; w < nw; w++) {
        char name[64], text[64];
        starpu_worker_get_name(w, name, sizeof name);
        fprintf(gp, "%s'%s' %d", w ? ", " : "", gp_text(name, text, sizeof text), w);
    }
    fprintf(gp, ")\n");
    draw_marks(gp, t0, t1);
    fprintf(gp, "plot ");
    for (int k = 0; k < nkinds; k++) {
        char colour[8], name[64], text[64];
        kind_colour(k, colour);
        fprintf(gp, "%s'%s' index %d using 1:2:3:4 with boxxyerror fs solid 1.0 noborder lc rgb '%s' title '%s'",
                k ? ", \\\n  " : "", data, k, colour,
                gp_text(display_name(kinds[k].kind, name, sizeof name), text, sizeof text));
    }
    fprintf(gp, "\n");
    int status = pclose(gp);
    unlink(data);
    if (status != 0) {
        tsr_log(TSR_LOG_ERROR, "schedule: gnuplot failed to draw the chart (status %d; is gnuplot-nox installed?)",
                status);
        return TSR_EIO;
    }
    return TSR_SUCCESS;
}

/* gnuplot draws into a temporary of ours (the script holds no name the user
 * gave), which then replaces png. */
static int write_gantt(const char *png, const long *order, long n, double t0, double t1, kind_stat_t *kinds,
                       int nkinds)
{
    char drawn[] = "/tmp/tsr_gantt_XXXXXX.png";
    int dfd = mkstemps(drawn, 4);
    if (dfd < 0) {
        tsr_log(TSR_LOG_ERROR, "schedule: cannot create a temporary file: %s", strerror(errno));
        return TSR_EIO;
    }
    close(dfd);
    int rc = draw_gantt(drawn, order, n, t0, t1, kinds, nkinds);
    if (!rc)
        rc = copy_over(drawn, png);
    unlink(drawn);
    return rc;
}

int tsr_schedule_report(const tsr_recording_t *r)
{
    long n = r->ntasks;
    run = r;
    int rc = TSR_SUCCESS;
    long *order = malloc(sizeof(long) * (size_t)n), *pred = malloc(sizeof(long) * (size_t)n);
    double *cp_end = malloc(sizeof(double) * (size_t)n);
    kind_stat_t *kinds = calloc(MAX_KINDS, sizeof *kinds);
    if (!order || !pred || !cp_end || !kinds)
        rc = TSR_ENOMEM;
    int nkinds = 0, have_graph = 0;
    long last = -1;
    graph_t g = { 0 };
    if (!rc) {
        for (long i = 0; i < n; i++)
            order[i] = i;
        qsort(order, (size_t)n, sizeof *order, by_job);
        have_graph = build_graph(order, n, &g) == 0; /* without it: no critical path, no replay */
        if (have_graph)
            last = critical_path(order, n, &g, cp_end, pred);
        nkinds = kind_totals(order, n, -INFINITY, INFINITY, kinds);
        for (long k = last; k >= 0; k = pred[k]) {
            const task_record_t *r = record_at(order[k]);
            int k = kind_index(kinds, &nkinds, r->kind);
            if (k < 0)
                continue;
            kinds[k].on_path++;
        }
    }
    double t0 = INFINITY, t1 = -INFINITY; /* the recorded run's span */
    for (long i = 0; i < n; i++) {
        t0 = fmin(t0, record_at(i)->start_us);
        t1 = fmax(t1, record_at(i)->end_us);
    }
    if (!rc)
        print_summary(r->out ? r->out : stderr, order, n, have_graph ? &g : NULL, t0, t1,
                      last >= 0 ? cp_end[last] : 0, kinds, nkinds);
    if (!rc && r->png[0]) {
        char csv[4200], png[4200];
        tsr_schedule_rank_path(csv, sizeof csv, r->png, ".csv");
        tsr_schedule_rank_path(png, sizeof png, r->png, ".png");
        double origin = isfinite(r->origin_us) ? r->origin_us : t0;
        rc = write_csv(csv, order, n, origin);
        if (!rc)
            rc = write_gantt(png, order, n, origin, t1, kinds, nkinds);
        if (!rc)
            tsr_log(TSR_LOG_INFO, "schedule: Gantt chart %s, task list %s", png, csv);
    }
    free_graph(&g);
    free(order);
    free(pred);
    free(cp_end);
    free(kinds);
    run = NULL;
    return rc;
}
