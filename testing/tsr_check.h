/* Tiny assertion helpers shared by the test programs: CHECK counts a
 * passed or failed expectation and prints the failures with their line. */
#ifndef TSR_CHECK_H
#define TSR_CHECK_H
#include <stdio.h>
#include <stdlib.h>

static int tsr_checks_passed, tsr_checks_failed;

static inline void tsr_check(int ok, const char *what, const char *file, int line)
{
    if (ok) {
        tsr_checks_passed++;
    } else {
        tsr_checks_failed++;
        fprintf(stderr, "FAILED %s:%d: %s\n", file, line, what);
    }
}
#define CHECK(cond) tsr_check((cond) != 0, #cond, __FILE__, __LINE__)
#define CHECK_RC(expr, code) tsr_check((expr) == (code), #expr " == " #code, __FILE__, __LINE__)

/* Prints "<name>: N passed, M failed"; returns the exit status. */
static inline int tsr_check_report(const char *name)
{
    printf("%s: %d passed, %d failed\n", name, tsr_checks_passed, tsr_checks_failed);
    return tsr_checks_failed ? 1 : 0;
}

/* The tests that write tile models take the cache folder as their one
 * argument: sets TSR_CACHE_DIR to it; 0 (after a usage line) when absent. */
static inline int tsr_check_cache_dir_arg(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CACHE_DIR\n", argv[0]);
        return 0;
    }
    setenv("TSR_CACHE_DIR", argv[1], 1);
    return 1;
}
#endif
