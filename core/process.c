/* The process's place in the run (tsr_ctx): its rank, the number of ranks,
 * whether Tessera is started. Every layer reads it; context.c fills it. */
#include <starpu_config.h> /* STARPU_SIMGRID */
#include "tsr_context.h"

tsr_context_t tsr_ctx = { .rank = 0, .size = 1 };

int tsr_initialized(void) { return tsr_ctx.initialized; }
int tsr_rank(void) { return tsr_ctx.rank; }
int tsr_size(void) { return tsr_ctx.size; }

/* A build against StarPU-SimGrid runs simulated ranks (docs/simulation.md). */
int tsr_simulated(void)
{
#ifdef STARPU_SIMGRID
    return 1;
#else
    return 0;
#endif
}
