/* The process's place in the run (tsr_ctx): its rank, the number of ranks,
 * whether Tessera is started. Every layer reads it; context.c fills it. */
#include "tsr_context.h"

tsr_context_t tsr_ctx = { .rank = 0, .size = 1 };

int tsr_initialized(void) { return tsr_ctx.initialized; }
int tsr_rank(void) { return tsr_ctx.rank; }
int tsr_size(void) { return tsr_ctx.size; }
