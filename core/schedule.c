/* Schedule recording from StarPU's per-task profiling data (no FxT needed).
 *
 * Every Tessera codelet has tsr_schedule_task_done as its codelet callback:
 * StarPU calls it when a task ends, also for the reduction tasks StarPU
 * submits itself on REDUX tiles. While recording, it copies the task's
 * profiling data (worker, ready, start and end times), its flops, tile sizes
 * and data accesses. At tsr_finalize the records go to the configured
 * analysis (tsr_config_t.schedule_report; analysis/schedule_report.c), which
 * gives:
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
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <starpu.h>
#include <starpu_profiling.h>
#include "tsr_context.h"
#include "tsr_files.h"
#include "tsr_schedule.h"

#define CHUNK_RECORDS 16384 /* records are never moved: callbacks write while the array grows */
#define MAX_CHUNKS 256      /* at most 4M tasks recorded */
#define MAX_MARKS 4096

typedef tsr_task_record_t task_record_t;
typedef tsr_schedule_mark_t mark_t;

static struct {
    int wanted; /* a chart or a summary was asked for: the same on every rank */
    atomic_int recording;
    char png[4096]; /* "" : summary only */
    tsr_schedule_report_t report;
    pthread_mutex_t lock;
    task_record_t *_Atomic chunks[MAX_CHUNKS]; /* read outside the lock while another callback allocates one */
    atomic_long next;  /* next free record */
    atomic_long dropped;
    mark_t marks[MAX_MARKS];
    int nmarks;
} rec = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

int tsr_schedule_prepare(const char *png, int summary, tsr_schedule_report_t report)
{
    rec.png[0] = '\0';
    if ((png || summary) && !report) {
        tsr_log(TSR_LOG_ERROR, "tsr_init: schedule_png or schedule_summary needs schedule_report "
                               "(tsr_schedule_report, library tessera_schedule)");
        return TSR_EINVAL;
    }
    rec.report = report;
    if (png) {
        if (!ends_with(png, ".png") || strlen(png) >= sizeof rec.png - 16) {
            tsr_log(TSR_LOG_ERROR, "schedule: the Gantt chart's name must end in .png ('%s')", png);
            return TSR_EINVAL;
        }
        snprintf(rec.png, sizeof rec.png, "%s", png);
    }
    rec.wanted = png || summary;
    atomic_store(&rec.recording, rec.wanted);
    return TSR_SUCCESS;
}

/* This rank's chart and task list can be written, before a long run. */
static int check_outputs(void)
{
    char csv[4200], png[4200];
    tsr_schedule_rank_path(csv, sizeof csv, rec.png, ".csv");
    tsr_schedule_rank_path(png, sizeof png, rec.png, ".png");
    int rc = tsr_atomic_check(csv); /* a regular file or absent, in a writable directory */
    return rc ? rc : tsr_atomic_check(png);
}

int tsr_schedule_start(void)
{
    if (!atomic_load(&rec.recording))
        return TSR_SUCCESS;
    if (rec.png[0] && check_outputs() != TSR_SUCCESS) {
        atomic_store(&rec.recording, 0);
        return TSR_EIO;
    }
    atomic_store(&rec.next, 0);
    atomic_store(&rec.dropped, 0);
    rec.nmarks = 0;
    starpu_profiling_status_set(STARPU_PROFILING_ENABLE);
    for (unsigned w = 0; w < starpu_worker_get_count(); w++)
        starpu_profiling_worker_get_info((int)w, NULL); /* resets the worker counters */
    return TSR_SUCCESS;
}

/* Adds the bytes StarPU copied from host memory to GPU memory and back,
 * and the bytes and copies between GPUs, since the last call to the
 * running totals of m (reading a bus's counters resets them). */
static void add_bus_traffic(mark_t *m)
{
    for (int b = 0; b < starpu_bus_get_count(); b++) {
        struct starpu_profiling_bus_info info;
        if (starpu_bus_get_profiling_info(b, &info) != 0)
            continue;
        enum starpu_node_kind src = starpu_node_get_kind((unsigned)starpu_bus_get_src(b));
        enum starpu_node_kind dst = starpu_node_get_kind((unsigned)starpu_bus_get_dst(b));
        if (src == STARPU_CPU_RAM && dst == STARPU_CUDA_RAM)
            m->bytes_to_gpus += (double)info.transferred_bytes;
        else if (src == STARPU_CUDA_RAM && dst == STARPU_CPU_RAM)
            m->bytes_from_gpus += (double)info.transferred_bytes;
        else if (src == STARPU_CUDA_RAM && dst == STARPU_CUDA_RAM) {
            m->bytes_between_gpus += (double)info.transferred_bytes;
            m->copies_between_gpus += info.transfer_count;
        }
    }
}

void tsr_schedule_mark(const char *label)
{
    if (!atomic_load(&rec.recording) || !tsr_ctx.initialized || rec.nmarks >= MAX_MARKS)
        return;
    mark_t *m = &rec.marks[rec.nmarks];
    /* the copy totals so far, then this mark's own */
    if (rec.nmarks)
        *m = rec.marks[rec.nmarks - 1];
    else
        memset(m, 0, sizeof *m);
    snprintf(m->label, sizeof m->label, "%s", label ? label : "");
    m->us = starpu_timing_now();
    add_bus_traffic(m);
    rec.nmarks++;
}

static task_record_t *record_at(long i) { return &rec.chunks[i / CHUNK_RECORDS][i % CHUNK_RECORDS]; }

const tsr_task_record_t *tsr_recorded_task(long i) { return record_at(i); }

static task_record_t *new_record(void)
{
    long i = atomic_fetch_add(&rec.next, 1);
    long c = i / CHUNK_RECORDS;
    if (c >= MAX_CHUNKS) {
        atomic_fetch_add(&rec.dropped, 1);
        return NULL;
    }
    if (!rec.chunks[c]) {
        pthread_mutex_lock(&rec.lock);
        if (!rec.chunks[c])
            rec.chunks[c] = malloc(sizeof(task_record_t) * CHUNK_RECORDS);
        pthread_mutex_unlock(&rec.lock);
        if (!rec.chunks[c]) {
            atomic_fetch_add(&rec.dropped, 1);
            return NULL;
        }
    }
    return record_at(i);
}

static void tile_size(starpu_data_handle_t h, task_record_t *r)
{
    if (starpu_data_get_interface_id(h) == STARPU_BLOCK_INTERFACE_ID) {
        r->rows = (int)starpu_block_get_nx(h);
        r->cols = (int)starpu_block_get_ny(h);
        r->depth = (int)starpu_block_get_nz(h);
    }
}

void tsr_schedule_task_done(void *arg)
{
    (void)arg;
    if (!atomic_load(&rec.recording))
        return;
    struct starpu_task *task = starpu_task_get_current();
    struct starpu_profiling_task_info *pi = task ? task->profiling_info : NULL;
    if (!pi || !task->cl)
        return;
    task_record_t *r = new_record();
    if (!r)
        return;
    r->kind = task->cl->name ? task->cl->name : "?";
    r->job = starpu_task_get_job_id(task);
    r->worker = pi->workerid;
    r->flops = task->flops;
    r->ready_us = starpu_timing_timespec_to_us(&pi->push_start_time);
    r->start_us = starpu_timing_timespec_to_us(&pi->start_time);
    r->end_us = starpu_timing_timespec_to_us(&pi->end_time);
    int n = (int)STARPU_TASK_GET_NBUFFERS(task);
    r->nhandles = n < TSR_RECORD_HANDLES ? n : TSR_RECORD_HANDLES;
    r->rows = r->cols = r->depth = 0;
    for (int b = 0; b < r->nhandles; b++) {
        r->handles[b] = STARPU_TASK_GET_HANDLE(task, b);
        r->modes[b] = STARPU_TASK_GET_MODE(task, b);
        if (!r->rows && (r->modes[b] & (STARPU_W | STARPU_REDUX)))
            tile_size(r->handles[b], r);
    }
}

void tsr_schedule_rank_path(char *out, size_t size, const char *png, const char *ext)
{
    int stem = (int)strlen(png) - 4;
    if (tsr_ctx.size > 1)
        snprintf(out, size, "%.*s.rank%d%s", stem, png, tsr_ctx.rank, ext);
    else
        snprintf(out, size, "%.*s%s", stem, png, ext);
}

static void free_records(void)
{
    for (int c = 0; c < MAX_CHUNKS; c++) {
        free(rec.chunks[c]);
        rec.chunks[c] = NULL;
    }
}

/* Stops the recording once every task is done; the count of records. */
static long stop_recording(void)
{
    starpu_task_wait_for_all();
    atomic_store(&rec.recording, 0);
    starpu_profiling_status_set(STARPU_PROFILING_DISABLE);
    long n = atomic_load(&rec.next);
    return n < (long)MAX_CHUNKS * CHUNK_RECORDS ? n : (long)MAX_CHUNKS * CHUNK_RECORDS;
}

/* The first start of the n records of every rank (collective; a rank that
 * recorded nothing gives none): each rank's own first task would shift its
 * chart by how late that started. */
static double ranks_first_start(long n)
{
    double first = INFINITY;
    for (long i = 0; i < n; i++)
        first = fmin(first, tsr_recorded_task(i)->start_us);
    tsr_allreduce_double(&first, TSR_REDUCE_MIN); /* failed: this rank's own */
    return first;
}

/* This rank's report of its n records, its summary into out. */
static int report_recording(long n, double origin, FILE *out)
{
    if (atomic_load(&rec.dropped))
        tsr_log(TSR_LOG_ERROR, "schedule: %ld tasks not recorded (the first %ld are)", atomic_load(&rec.dropped), n);
    if (n == 0) {
        tsr_log(TSR_LOG_INFO, "schedule: no task ran while recording");
        free_records();
        return TSR_SUCCESS;
    }
    tsr_recording_t run = { n, rec.marks, rec.nmarks, rec.png, out, origin };
    int rc = rec.report(&run);
    free_records();
    return rc;
}

/* Every rank's summary printed by rank 0, in rank order: mpirun forwards
 * each rank's output in chunks of its own, and summaries printed by
 * several ranks at once came out cut into each other. */
enum { SUMMARY_CHUNK = 65536 };
static void print_summaries(const char *text)
{
    uint64_t len = strlen(text);
    if (!tsr_ctx.mpi_active || tsr_ctx.size < 2) {
        fputs(text, stderr);
        return;
    }
    if (tsr_ctx.rank != 0) {
        int rc = tsr_send_bytes(&len, sizeof len, 0);
        for (uint64_t at = 0; !rc && at < len; at += SUMMARY_CHUNK)
            rc = tsr_send_bytes(text + at, len - at < SUMMARY_CHUNK ? len - at : SUMMARY_CHUNK, 0);
        return;
    }
    fputs(text, stderr);
    static char chunk[SUMMARY_CHUNK];
    for (int r = 1; r < tsr_ctx.size; r++) {
        int rc = tsr_recv_bytes(&len, sizeof len, r);
        for (uint64_t at = 0; !rc && at < len; at += SUMMARY_CHUNK) {
            size_t n = len - at < SUMMARY_CHUNK ? len - at : SUMMARY_CHUNK;
            if (!(rc = tsr_recv_bytes(chunk, n, r)))
                fwrite(chunk, 1, n, stderr);
        }
    }
}

int tsr_schedule_finish(void)
{
    if (!rec.wanted)
        return TSR_SUCCESS;
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    int recording = atomic_load(&rec.recording); /* off on a rank whose outputs could not be written */
    long n = recording ? stop_recording() : 0;
    double origin = ranks_first_start(n); /* on every rank */
    int rc = recording ? report_recording(n, origin, mem ? mem : stderr) : TSR_SUCCESS;
    if (mem)
        fclose(mem);
    print_summaries(mem && text ? text : "");
    free(text);
    tsr_barrier(); /* no rank goes on printing before rank 0 is done */
    rec.wanted = 0;
    return rc;
}
