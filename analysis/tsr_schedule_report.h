/* Tessera schedule analysis (library tessera_schedule): what tsr_finalize
 * reports on a recorded schedule when tsr_config_t.schedule_report is
 * tsr_schedule_report: the summary on stderr (time per operation, workers'
 * busy and idle time, critical path, ideal makespan, replay on more workers),
 * and with schedule_png the task list (.csv) and the Gantt chart (.png, by
 * gnuplot). See docs/schedule.md. */
#ifndef TSR_SCHEDULE_REPORT_H
#define TSR_SCHEDULE_REPORT_H
#include "tsr_core.h"

#ifdef __cplusplus
extern "C" {
#endif
int tsr_schedule_report(const struct tsr_recording *rec);
#ifdef __cplusplus
}
#endif
#endif
