/* The bad-argument check shared by the test programs: a call must fail with
 * its error code and submit no task. */
#ifndef TSR_EXPECT_H
#define TSR_EXPECT_H
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
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

/* stderr (where tsr_log writes) captured between start and end. */
typedef struct { FILE *file; int saved; } tsr_capture_t;
static inline tsr_capture_t tsr_capture_start(void)
{
    tsr_capture_t c = { tmpfile(), -1 };
    fflush(stderr);
    if (c.file) {
        c.saved = dup(2);
        dup2(fileno(c.file), 2);
    }
    return c;
}
static inline void tsr_capture_end(tsr_capture_t c, char *buf, size_t size)
{
    buf[0] = '\0';
    if (!c.file)
        return;
    fflush(stderr);
    dup2(c.saved, 2);
    close(c.saved);
    rewind(c.file);
    buf[fread(buf, 1, size - 1, c.file)] = '\0';
    fclose(c.file);
}
/* The log holds text. */
static inline void tsr_expect_message(const char *log, const char *text, const char *what)
{
    if (!strstr(log, text))
        fprintf(stderr, "  case '%s': the message does not say '%s': %s\n", what, text, log);
    CHECK(strstr(log, text) != NULL);
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
