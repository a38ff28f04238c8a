/* Worker groups: data parallelism inside one process. Each group is a set
 * of StarPU workers that runs every task touching a descriptor placed on it
 * (tsr_desc_run_on; runtime/submit.c gives the task the group's worker mask,
 * so the scheduler still orders, prefetches and times it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <starpu.h>
#include "tsr_context.h"

enum { MASK_WORDS = (STARPU_NMAXWORKERS + 31) / 32 };

static struct {
    int n;                                  /* groups, 0: none */
    int gpu;                                /* 1: a group a GPU, 0: a CPU worker each */
    int device[STARPU_NMAXWORKERS];         /* the group's GPU, or CPU worker index */
    int workers[STARPU_NMAXWORKERS];        /* workers in the group */
    unsigned node[STARPU_NMAXWORKERS];      /* the group's memory node */
    uint32_t mask[STARPU_NMAXWORKERS][MASK_WORDS];
} groups;

/* The memory node of the rank's one GPU when its CUDA workers run alone on
 * it (no groups: one GPU makes none), else -1. */
static int only_gpu_node = -1;

static int group_of_node(unsigned node)
{
    for (int g = 0; g < groups.n; g++)
        if (groups.node[g] == node)
            return g;
    return -1;
}

static void add_worker(int g, int worker)
{
    groups.mask[g][worker / 32] |= UINT32_C(1) << (worker % 32);
    groups.workers[g]++;
}

/* A group per GPU (memory node) of the CUDA workers. */
static void group_by_gpu(void)
{
    int ids[STARPU_NMAXWORKERS];
    int n = (int)starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, ids, STARPU_NMAXWORKERS);
    for (int k = 0; k < n; k++) {
        unsigned node = starpu_worker_get_memory_node((unsigned)ids[k]);
        int g = group_of_node(node);
        if (g < 0) {
            g = groups.n++;
            groups.node[g] = node;
            groups.device[g] = starpu_worker_get_devid(ids[k]);
        }
        add_worker(g, ids[k]);
    }
    groups.gpu = 1;
}

/* A group per CPU worker (TSR_CPU_WORKER_GROUPS=1: tests of the placement
 * without a GPU). */
static void group_by_cpu_worker(void)
{
    int ids[STARPU_NMAXWORKERS];
    int n = (int)starpu_worker_get_ids_by_type(STARPU_CPU_WORKER, ids, STARPU_NMAXWORKERS);
    for (int k = 0; k < n; k++) {
        groups.device[k] = k;
        groups.node[k] = starpu_worker_get_memory_node((unsigned)ids[k]);
        add_worker(k, ids[k]);
    }
    groups.n = n;
    groups.gpu = 0;
}

/* Under MPI each rank spreads its sub-batches over its own groups
 * (tsr_worker_group_of), and the default split counts them: every rank
 * must have as many, else none places (heterogeneous nodes: the scheduler
 * balances each rank's GPUs). */
static int same_count_on_every_rank(int n)
{
    double lo = n, hi = n;
    if (tsr_allreduce_double(&lo, TSR_REDUCE_MIN) || tsr_allreduce_double(&hi, TSR_REDUCE_MAX))
        return 0;
    if (lo != hi && tsr_ctx.rank == 0)
        tsr_log(TSR_LOG_INFO, "warning: the ranks have %g to %g worker groups (a GPU each; one GPU makes none): "
                "sub-batches are not placed on GPUs, each rank's scheduler spreads its tasks", lo, hi);
    return lo == hi;
}

void tsr_worker_groups_start(int ncpu, int ncuda)
{
    memset(&groups, 0, sizeof groups);
    /* GPUs alone: with CPU workers beside them the scheduler balances the kinds */
    if (ncuda > 0 && ncpu == 0)
        group_by_gpu();
    else if (ncuda == 0 && tsr_ctx.cpu_worker_groups)
        group_by_cpu_worker();
    only_gpu_node = groups.gpu && groups.n == 1 ? (int)groups.node[0] : -1;
    int n = groups.n < 2 ? 0 : groups.n; /* a single group places nothing */
    if (!same_count_on_every_rank(n) || n == 0) /* every rank joins the count */
        memset(&groups, 0, sizeof groups);
}

void tsr_worker_groups_stop(void)
{
    memset(&groups, 0, sizeof groups);
    only_gpu_node = -1;
}

int tsr_worker_groups(void) { return groups.n; }

int tsr_worker_group_of(int part) { return groups.n > 0 && part >= 0 ? part % groups.n : -1; }

const uint32_t *tsr_worker_group_mask(int group, unsigned *words)
{
    if (group < 0 || group >= groups.n) {
        *words = 0;
        return NULL;
    }
    *words = MASK_WORDS;
    return groups.mask[group];
}

int tsr_worker_group_memory_node(int group) { return group >= 0 && group < groups.n ? (int)groups.node[group] : -1; }

int tsr_gpu_memory_nodes(int *nodes, int max)
{
    int n = 0;
    for (int g = 0; g < groups.n && groups.gpu && n < max; g++)
        nodes[n++] = (int)groups.node[g];
    if (only_gpu_node >= 0 && n < max)
        nodes[n++] = only_gpu_node;
    return n;
}

void tsr_worker_group_name(int group, char *buf, size_t size)
{
    if (group < 0 || group >= groups.n)
        snprintf(buf, size, "any worker");
    else if (groups.gpu)
        snprintf(buf, size, "GPU %d%s", groups.device[group], groups.workers[group] > 1 ? " (its CUDA workers)" : "");
    else
        snprintf(buf, size, "CPU worker %d", groups.device[group]);
}
