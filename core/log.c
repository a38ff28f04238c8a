#include <stdarg.h>
#include <stdio.h>
#include "tsr_core.h"

static int verbose_level = 1;

void tsr_set_verbose(int level) { verbose_level = level; }
int tsr_get_verbose(void) { return verbose_level; }

void tsr_log(tsr_log_level_t level, const char *fmt, ...)
{
    if ((int)level > verbose_level)
        return;
    FILE *out = stderr; /* stdout is the program's: CSV, step lines */
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (tsr_size() > 1)
        fprintf(out, "[tessera rank %d] %s%s\n", tsr_rank(), level == TSR_LOG_ERROR ? "error: " : "", msg);
    else
        fprintf(out, "[tessera] %s%s\n", level == TSR_LOG_ERROR ? "error: " : "", msg);
    fflush(out);
}
