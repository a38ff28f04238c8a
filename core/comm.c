/* Host-side communication between ranks, outside tasks: barriers, broadcasts,
 * gathers, reductions of one value and tile moves for scatter/gather.
 *
 * Normally these are MPI calls on Tessera's own communicator. Under
 * StarPU-SimGrid (tsr_simulated) the application may not call MPI itself:
 * SMPI's ranks are SimGrid actors and only StarPU-MPI's progress actor is an
 * MPI process. There every operation is built from StarPU-MPI point-to-point
 * messages (rank 0 gathers, then sends to all), so that it also costs
 * simulated network time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <starpu.h>
#include "tsr_context.h"
#if TSR_USE_MPI
#include <starpu_mpi.h>
#endif

#if TSR_USE_MPI
/* Under simulation, the n-th message from one rank to another has tag
 * HOST_TAG + n (both sides count in program order), far above the tags
 * tsr_tag_alloc hands out to tiles. Sends are synchronous: a message that
 * arrived before its receive was posted (StarPU-MPI's early data) was never
 * delivered under SMPI, and the run deadlocked (docs/simulation.md). */
#define HOST_TAG ((starpu_mpi_tag_t)1 << 60)

static int simulated_transfer(void *buf, size_t bytes, int peer, int send)
{
    static int64_t *sent, *received; /* messages to / from each rank so far */
    if (!sent && (!(sent = calloc((size_t)tsr_ctx.size, sizeof *sent)) ||
                  !(received = calloc((size_t)tsr_ctx.size, sizeof *received))))
        return TSR_ENOMEM;
    if (bytes == 0)
        return TSR_SUCCESS;
    starpu_mpi_tag_t tag = HOST_TAG + (send ? sent[peer]++ : received[peer]++);
    starpu_data_handle_t h;
    starpu_vector_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)buf, (uint32_t)bytes, 1);
    int rc;
    if (send) {
        starpu_mpi_req req;
        rc = starpu_mpi_issend(h, &req, peer, tag, tsr_ctx.comm);
        if (rc == 0)
            rc = starpu_mpi_wait(&req, MPI_STATUS_IGNORE);
    } else
        rc = starpu_mpi_recv(h, peer, tag, tsr_ctx.comm, MPI_STATUS_IGNORE);
    starpu_data_unregister(h);
    return rc == 0 ? TSR_SUCCESS : TSR_ERUNTIME;
}
#endif

int tsr_send_bytes(const void *buf, size_t bytes, int to)
{
#if TSR_USE_MPI
    if (tsr_simulated())
        return simulated_transfer((void *)buf, bytes, to, 1);
    return MPI_Send(buf, (int)bytes, MPI_BYTE, to, 0, tsr_ctx.raw_comm) == MPI_SUCCESS ? TSR_SUCCESS : TSR_ERUNTIME;
#else
    (void)buf, (void)bytes, (void)to;
    return TSR_EDIST;
#endif
}

int tsr_recv_bytes(void *buf, size_t bytes, int from)
{
#if TSR_USE_MPI
    if (tsr_simulated())
        return simulated_transfer(buf, bytes, from, 0);
    return MPI_Recv(buf, (int)bytes, MPI_BYTE, from, 0, tsr_ctx.raw_comm, MPI_STATUS_IGNORE) == MPI_SUCCESS
               ? TSR_SUCCESS
               : TSR_ERUNTIME;
#else
    (void)buf, (void)bytes, (void)from;
    return TSR_EDIST;
#endif
}

/* Simulated collectives are binomial trees, as an MPI library's are: log2 P
 * rounds of messages, not P - 1 messages from one rank in turn (at 64 ranks
 * the per-step loss reduction was thousands of messages in a row). */

/* root's buf to every rank (simulation only): a rank receives from its parent
 * (its rank relative to root less its lowest set bit), then sends to the
 * ranks below it in the tree, farthest first. */
static int simulated_broadcast(void *buf, size_t bytes, int root)
{
    int size = tsr_ctx.size, me = (tsr_ctx.rank - root + size) % size, mask = 1, rc = TSR_SUCCESS;
    while (mask < size && !(me & mask))
        mask <<= 1;
    if (me != 0)
        rc = tsr_recv_bytes(buf, bytes, (me - mask + root) % size);
    for (mask >>= 1; mask > 0 && !rc; mask >>= 1)
        if (me + mask < size)
            rc = tsr_send_bytes(buf, bytes, (me + mask + root) % size);
    return rc;
}

int tsr_barrier(void)
{
    if (!tsr_ctx.initialized)
        return TSR_ENOTINIT;
#if TSR_USE_MPI
    if (tsr_ctx.mpi_active && tsr_simulated())
        return starpu_mpi_barrier(tsr_ctx.comm) == 0 ? TSR_SUCCESS : TSR_ERUNTIME;
    if (tsr_ctx.mpi_active)
        return MPI_Barrier(tsr_ctx.raw_comm) == MPI_SUCCESS ? TSR_SUCCESS : TSR_ERUNTIME;
#endif
    return TSR_SUCCESS;
}

int tsr_broadcast(void *buf, size_t bytes, int root)
{
    if (!tsr_ctx.mpi_active || bytes == 0)
        return TSR_SUCCESS;
    if (tsr_simulated())
        return simulated_broadcast(buf, bytes, root);
#if TSR_USE_MPI
    return MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, tsr_ctx.raw_comm) == MPI_SUCCESS ? TSR_SUCCESS : TSR_ERUNTIME;
#else
    (void)root;
    return TSR_SUCCESS;
#endif
}

int tsr_allgather(const void *mine, void *all, size_t bytes)
{
    if (!tsr_ctx.mpi_active) {
        memcpy(all, mine, bytes);
        return TSR_SUCCESS;
    }
    if (tsr_simulated()) { /* gathered on rank 0, then broadcast */
        int rc = TSR_SUCCESS;
        if (tsr_ctx.rank != 0) {
            rc = tsr_send_bytes(mine, bytes, 0);
        } else {
            memcpy(all, mine, bytes);
            for (int r = 1; r < tsr_ctx.size && !rc; r++)
                rc = tsr_recv_bytes((char *)all + (size_t)r * bytes, bytes, r);
        }
        return rc ? rc : simulated_broadcast(all, bytes * (size_t)tsr_ctx.size, 0);
    }
#if TSR_USE_MPI
    return MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, tsr_ctx.raw_comm) == MPI_SUCCESS
               ? TSR_SUCCESS
               : TSR_ERUNTIME;
#else
    return TSR_SUCCESS;
#endif
}

static double combine(double a, double b, tsr_reduce_op_t op)
{
    return op == TSR_REDUCE_SUM ? a + b : op == TSR_REDUCE_MAX ? (b > a ? b : a) : (b < a ? b : a);
}

/* v[0..n-1] reduced up a binomial tree to rank 0, then broadcast from it
 * (simulation only): every rank ends with rank 0's bits. */
static int simulated_allreduce(double *v, int n, tsr_reduce_op_t op)
{
    size_t bytes = (size_t)n * sizeof *v;
    double *other = malloc(bytes);
    int rc = other ? TSR_SUCCESS : TSR_ENOMEM;
    for (int mask = 1; mask < tsr_ctx.size && !rc; mask <<= 1) {
        if (tsr_ctx.rank & mask) {
            rc = tsr_send_bytes(v, bytes, tsr_ctx.rank - mask);
            break;
        }
        if (tsr_ctx.rank + mask < tsr_ctx.size) {
            rc = tsr_recv_bytes(other, bytes, tsr_ctx.rank + mask);
            for (int k = 0; k < n && !rc; k++)
                v[k] = combine(v[k], other[k], op);
        }
    }
    free(other);
    return rc ? rc : simulated_broadcast(v, bytes, 0);
}

int tsr_allreduce_doubles(double *v, int n, tsr_reduce_op_t op)
{
    if (!tsr_ctx.mpi_active || n == 0)
        return TSR_SUCCESS;
    if (!v || n < 0)
        return TSR_EINVAL;
    if (tsr_simulated())
        return simulated_allreduce(v, n, op);
#if TSR_USE_MPI
    MPI_Op mop = op == TSR_REDUCE_SUM ? MPI_SUM : op == TSR_REDUCE_MAX ? MPI_MAX : MPI_MIN;
    return MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, mop, tsr_ctx.raw_comm) == MPI_SUCCESS ? TSR_SUCCESS
                                                                                           : TSR_ERUNTIME;
#else
    (void)op;
    return TSR_SUCCESS;
#endif
}

int tsr_allreduce_double(double *value, tsr_reduce_op_t op)
{
    return tsr_allreduce_doubles(value, 1, op);
}

int tsr_any(int flag)
{
    double any = flag != 0;
    if (tsr_allreduce_double(&any, TSR_REDUCE_MAX))
        return 1; /* cannot agree: every rank that sees this stops */
    return any != 0;
}

void tsr_abort_ranks(int status)
{
#if TSR_USE_MPI
    if (tsr_ctx.mpi_active && tsr_ctx.size > 1 && !tsr_simulated()) {
        fflush(stdout);
        fflush(stderr);
        MPI_Abort(tsr_ctx.raw_comm, status);
    }
#else
    (void)status;
#endif
}
