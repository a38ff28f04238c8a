/* MPI-aware task insertion. */
#include <stdlib.h>
#include <string.h>
#include "tsr_runtime.h"
#include "tsr_context.h"
#if TSR_USE_MPI
#include <starpu_mpi.h>
#endif

static int first_written_owner(const tsr_tile_t *tiles, const enum starpu_data_access_mode *modes, int n)
{
    for (int t = 0; t < n; t++)
        if (modes[t] & (STARPU_W | STARPU_REDUX))
            return tsr_tile_owner(tiles[t].d, tiles[t].bi, tiles[t].i, tiles[t].j);
    return tsr_tile_owner(tiles[0].d, tiles[0].bi, tiles[0].i, tiles[0].j);
}

/* A rank that keeps a received copy of a tile the task writes must see the
 * task too, so that StarPU-MPI drops the stale copy. */
static int holds_stale_copy(const tsr_tile_t *t, enum starpu_data_access_mode mode)
{
#if TSR_USE_MPI
    if (!(mode & (STARPU_W | STARPU_REDUX)))
        return 0;
    starpu_data_handle_t h = tsr_tile_registered_handle(t->d, t->bi, t->i, t->j);
    return h && starpu_mpi_cached_receive(h);
#else
    (void)t;
    (void)mode;
    return 0;
#endif
}

static int involves_rank(const tsr_tile_t *tiles, const enum starpu_data_access_mode *modes, int n,
                         int exec_rank, int me)
{
    if (exec_rank == me)
        return 1;
    for (int t = 0; t < n; t++)
        if (tsr_tile_owner(tiles[t].d, tiles[t].bi, tiles[t].i, tiles[t].j) == me ||
            holds_stale_copy(&tiles[t], modes[t]))
            return 1;
    return 0;
}

int tsr_task_involves_me(const tsr_tile_t *tiles, const enum starpu_data_access_mode *modes, int ntiles)
{
    if (!tsr_ctx.mpi_active)
        return 1;
    return involves_rank(tiles, modes, ntiles, first_written_owner(tiles, modes, ntiles), tsr_ctx.rank);
}

/* The task's element type: that of its tiles, or bf16 when it has a bf16
 * tile and its other tiles are bf16 or float32 where the op allows it. */
static int task_dtype(const tsr_op_t *op, const tsr_tile_t *tiles, int ntiles, tsr_dtype_t *dtype)
{
    *dtype = tiles[0].d->dtype;
    for (int t = 1; t < ntiles; t++)
        if (tiles[t].d->dtype == TSR_BFLOAT16)
            *dtype = TSR_BFLOAT16;
    if (op->no_float64 && *dtype == TSR_FLOAT64) {
        tsr_log(TSR_LOG_ERROR, "%s: float32 or bf16 tiles only, got float64", op->name);
        return TSR_EINVAL;
    }
    for (int t = 0; t < ntiles; t++) {
        tsr_dtype_t have = tiles[t].d->dtype;
        int float32_kept = *dtype == TSR_BFLOAT16 && have == TSR_FLOAT32 && (op->fp32_in_bf16 >> t & 1u);
        if (have != *dtype && !float32_kept) {
            tsr_log(TSR_LOG_ERROR, "%s: tile %d is %s in a %s task%s", op->name, t, tsr_dtype_name(have),
                    tsr_dtype_name(*dtype), *dtype == TSR_BFLOAT16 ? " (this operand cannot stay float32)" : "");
            return TSR_EDTYPE;
        }
    }
    return TSR_SUCCESS;
}

/* A task that no running worker could execute is refused here, with the
 * reason, rather than by StarPU (-ENODEV, or an abort). */
static int check_workers(const tsr_op_t *op, tsr_dtype_t dtype)
{
    int cpu = tsr_op_runs_on_cpu(op, dtype) && tsr_ncpu_workers() > 0;
    int cuda = tsr_op_runs_on_cuda(op, dtype) && tsr_ncuda_workers() > 0;
    if (cpu || cuda)
        return TSR_SUCCESS;
    if (!tsr_op_runs_on_cpu(op, dtype))
        tsr_log(TSR_LOG_ERROR, "%s: %s needs a CUDA worker (the op has no CPU kernel), and none is running", op->name,
                tsr_dtype_name(dtype));
    else
        tsr_log(TSR_LOG_ERROR, "%s: %s tasks need a CPU worker (the op has no %s CUDA kernel), and none is running",
                op->name, tsr_dtype_name(dtype), tsr_dtype_name(dtype));
    return TSR_ENOTSUP;
}

/* Under simulation kernels do not run and the submitting thread's own work
 * takes no simulated time: each call charges it its measured cost (us
 * microseconds; tsr_ctx.sim_task_us, sim_skip_us), before the task is
 * inserted, so that the task is available only once it would have been.
 * The cost is slept in slices of at least 100 us (a task of 13.7 us lands
 * at most that early): one sleep a task would take most of a run's time.
 * Each submitting thread (tsr_submit_streams) is charged its own tasks. */
static void charge_submission(double us)
{
    if (!tsr_simulated() || us <= 0)
        return;
    double *owed_us = tsr_submitter_owed_us(); /* each submitting thread its own */
    *owed_us += us;
    if (*owed_us >= 100.0) {
        starpu_sleep((float)(*owed_us * 1e-6));
        *owed_us = 0;
    }
}

/* The workers allowed to run the task: those of the worker group of its
 * first tile placed on one (tsr_desc_run_on), else of its first tile homed
 * on one (tsr_desc_home_on); NULL and 0 words: any. */
static const uint32_t *task_workers(const tsr_tile_t *tiles, int ntiles, unsigned *words)
{
    for (int t = 0; t < ntiles; t++)
        if (tiles[t].d->group > 0)
            return tsr_worker_group_mask(tiles[t].d->group - 1, words);
    for (int t = 0; t < ntiles; t++)
        if (tiles[t].d->home > 0)
            return tsr_worker_group_mask(tiles[t].d->home - 1, words);
    *words = 0;
    return NULL;
}

#if TSR_USE_MPI
/* Whether StarPU-MPI has nothing to exchange for a task this rank runs: it
 * owns every tile, none is reduced (STARPU_REDUX, or an MPI reduction
 * pending on it). The task is then inserted as a plain one, without
 * starpu_mpi_task_insert's decoding and per-tile lookups, and forget_sends
 * does what that call does after it. */
static int runs_on_own_tiles(const struct starpu_data_descr *data, int ntiles, int me)
{
    for (int t = 0; t < ntiles; t++)
        if ((data[t].mode & STARPU_REDUX) || starpu_mpi_data_get_rank(data[t].handle) != me ||
            starpu_mpi_data_get_redux_map(data[t].handle))
            return 0;
    return 1;
}

/* The tiles a task writes have a new value: their copies sent before are
 * stale, so the next read elsewhere sends them again. */
static void forget_sends(const struct starpu_data_descr *data, int ntiles)
{
    for (int t = 0; t < ntiles; t++)
        if (data[t].mode & STARPU_W)
            starpu_mpi_cached_send_clear(data[t].handle);
}
#endif

static void *copy_arg(const void *arg, size_t argsize)
{
    void *copy = malloc(argsize);
    if (copy)
        memcpy(copy, arg, argsize);
    return copy;
}

int tsr_submit(tsr_op_t *op, const tsr_tile_t *tiles, const enum starpu_data_access_mode *modes,
               int ntiles, const void *arg, size_t argsize, int exec_rank, double flops)
{
    if (!tsr_ctx.initialized)
        return TSR_ENOTINIT;
    if (ntiles < 1 || ntiles > TSR_MAX_TASK_TILES)
        return TSR_EINVAL;
    tsr_dtype_t dtype;
    int rc = task_dtype(op, tiles, ntiles, &dtype);
    if (rc)
        return rc;
    if ((rc = check_workers(op, dtype)))
        return rc;
    struct starpu_codelet *cl = tsr_op_codelet(op, dtype);
    int me = tsr_ctx.rank;
    if (tsr_ctx.mpi_active) {
        if (exec_rank < 0)
            exec_rank = first_written_owner(tiles, modes, ntiles);
        if (!involves_rank(tiles, modes, ntiles, exec_rank, me)) {
            charge_submission(tsr_ctx.sim_skip_us);
            return TSR_SUCCESS;
        }
    }
    charge_submission(tsr_ctx.sim_task_us);
    struct starpu_data_descr data[TSR_MAX_TASK_TILES];
    for (int t = 0; t < ntiles; t++) {
        data[t].handle = tsr_tile_handle(tiles[t].d, tiles[t].bi, tiles[t].i, tiles[t].j);
        data[t].mode = modes[t];
        if (!data[t].handle)
            return TSR_ENOMEM;
    }
    int executes = !tsr_ctx.mpi_active || exec_rank == me;
    void *arg_copy = NULL;
    if (executes && argsize) {
        if (!(arg_copy = copy_arg(arg, argsize)))
            return TSR_ENOMEM;
    }
    unsigned words;
    /* StarPU reads the mask, not a copy: the groups' masks live until tsr_finalize */
    uint32_t *workers = (uint32_t *)task_workers(tiles, ntiles, &words);
    int ret;
#if TSR_USE_MPI
    int plain = !tsr_ctx.mpi_active || (executes && runs_on_own_tiles(data, ntiles, me));
    if (!plain) {
        if (executes)
            ret = starpu_mpi_task_insert(tsr_ctx.comm, cl, STARPU_DATA_MODE_ARRAY, data, ntiles,
                                         STARPU_CL_ARGS, arg_copy, argsize, STARPU_EXECUTE_ON_NODE, exec_rank,
                                         STARPU_FLOPS, flops, STARPU_TASK_WORKERIDS, words, workers,
                                         STARPU_PRIORITY, op->priority, 0);
        else
            ret = starpu_mpi_task_insert(tsr_ctx.comm, cl, STARPU_DATA_MODE_ARRAY, data, ntiles,
                                         STARPU_EXECUTE_ON_NODE, exec_rank, 0);
    } else
#endif
        ret = starpu_task_insert(cl, STARPU_DATA_MODE_ARRAY, data, ntiles, STARPU_CL_ARGS, arg_copy, argsize,
                                 STARPU_FLOPS, flops, STARPU_TASK_WORKERIDS, words, workers, STARPU_PRIORITY,
                                 op->priority, 0);
#if TSR_USE_MPI
    if (plain && tsr_ctx.mpi_active && ret == 0)
        forget_sends(data, ntiles);
#endif
    if (ret != 0) {
        tsr_log(TSR_LOG_ERROR, "task submission of %s failed (%d)", cl->name, ret);
        return TSR_ERUNTIME;
    }
    if (executes)
        tsr_count_task();
    return TSR_SUCCESS;
}

void tsr_tile_mpi_redux(tsr_tile_t A)
{
#if TSR_USE_MPI
    if (tsr_ctx.mpi_active)
        starpu_mpi_redux_data(tsr_ctx.comm, tsr_tile_handle(A.d, A.bi, A.i, A.j));
#else
    (void)A;
#endif
}

tsr_sources_t tsr_task_sources(void *buffers[], int first, int n, const tsr_exec_t *ex)
{
    tsr_sources_t s = { { NULL }, { 0 } };
    for (int k = 0; k < n; k++) {
        tsr_view_t v = tsr_view(buffers[first + k], ex);
        s.ptr[k] = (const float *)v.ptr;
        s.ld[k] = v.ld;
    }
    return s;
}

void *tsr_pack_args(const void *header, size_t hsize, const void *items, size_t isize, int n, size_t *total)
{
    *total = hsize + isize * (size_t)n;
    char *buf = malloc(*total);
    if (!buf)
        return NULL;
    memcpy(buf, header, hsize);
    if (n > 0)
        memcpy(buf + hsize, items, isize * (size_t)n);
    return buf;
}
