/* The bad-argument check shared by the test programs: a call must fail with
 * its error code and submit no task. */
#ifndef TSR_EXPECT_H
#define TSR_EXPECT_H
#include <stdint.h>
#include "tessera.h"
#include "tsr_check.h"

/* rc: what the call returned; before: tsr_tasks_submitted() before it. */
static inline void tsr_expect_error(int rc, int code, uint64_t before, const char *what)
{
    uint64_t submitted = tsr_tasks_submitted() - before;
    if (rc != code || submitted)
        fprintf(stderr, "  case '%s': got %d (%s), %llu tasks submitted\n", what, rc, tsr_strerror(rc),
                (unsigned long long)submitted);
    CHECK(rc == code && submitted == 0);
}

/* The end of a test's main: rank 0 prints the report (tsr_check_report),
 * StarPU stops. Returns the exit status. */
static inline int tsr_test_finish(const char *name)
{
    int rc = tsr_rank() == 0 ? tsr_check_report(name) : (tsr_checks_failed ? 1 : 0);
    tsr_finalize();
    return rc;
}

/* The good call after the bad ones (before: tsr_tasks_submitted() before
 * them) ran to the end and submitted tasks (on one rank: with several, this
 * rank may own none of its tiles). */
static inline void tsr_expect_tasks_ran(uint64_t before)
{
    CHECK_RC(tsr_wait(), TSR_SUCCESS);
    CHECK(tsr_tasks_submitted() > before || tsr_size() > 1);
}
#endif
