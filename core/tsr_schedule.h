/* Tessera core (internal to core/ and analysis/): the schedule a run
 * recorded. core/schedule.c records it; at tsr_finalize it hands it to the
 * configured analysis (tsr_config_t.schedule_report, e.g. analysis/'s
 * tsr_schedule_report), which reads it through these declarations. */
#ifndef TSR_SCHEDULE_H
#define TSR_SCHEDULE_H
#include <stddef.h>
#include <stdio.h>
#include <starpu.h>
#include "tsr_core.h"

#define TSR_RECORD_HANDLES 8 /* buffers recorded per task (Tessera's tasks have <= 8) */

/* One task that ran. */
typedef struct {
    const char *kind; /* codelet name (static storage) */
    unsigned long job; /* submission order */
    int worker, nhandles;
    int rows, cols, depth; /* the first written tile */
    double flops, ready_us, start_us, end_us;
    starpu_data_handle_t handles[TSR_RECORD_HANDLES];
    enum starpu_data_access_mode modes[TSR_RECORD_HANDLES];
} tsr_task_record_t;

/* A labelled point in time (tsr_schedule_mark). */
typedef struct {
    char label[32];
    double us;
    double bytes_to_gpus, bytes_from_gpus; /* host <-> GPU transfers so far */
    double bytes_between_gpus;             /* GPU -> GPU transfers so far */
    long copies_between_gpus;
} tsr_schedule_mark_t;

/* What tsr_finalize hands to the analysis: ntasks records (tsr_recorded_task),
 * the marks, png, the Gantt chart's name ("" : summary only), the stream
 * the summary goes to, and the time origin of the chart and task list.
 * StarPU still runs while the analysis does. */
struct tsr_recording {
    long ntasks;
    const tsr_schedule_mark_t *marks;
    int nmarks;
    const char *png;
    FILE *out;        /* where the summary goes (NULL: stderr) */
    double origin_us; /* the first task any rank recorded: ranks on one machine or
                         simulated share a clock, so their charts line up */
};
typedef struct tsr_recording tsr_recording_t;

/* Record i (0 <= i < ntasks), in the order the tasks ended. */
const tsr_task_record_t *tsr_recorded_task(long i);
/* This rank's file of the chart png with extension ext: NAME.ext, or
 * NAME.rankR.ext when there are several ranks. */
void tsr_schedule_rank_path(char *out, size_t size, const char *png, const char *ext);
#endif
