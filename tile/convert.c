/* User column-major buffers <-> tiles, across ranks. */
#include <stdlib.h>
#include <string.h>
#include "tsr_tile_internal.h"
#include "tsr_context.h"
#if TSR_USE_MPI
#include <starpu_mpi.h>
#endif

void *tsr_tile_storage(tsr_desc_t *d, int bi, int i, int j)
{
    if (!tsr_tile_handle(d, bi, i, j))
        return NULL;
    return d->storage[tsr_tile_index(d, bi, i, j)];
}

void tsr_desc_keep_received(tsr_desc_t *d, int keep)
{
    if (d)
        d->keep_received = keep != 0;
}

/* 1 + group, or 0 for -1 or a group that does not exist */
static int group_field(int group) { return group >= 0 && group < tsr_worker_groups() ? group + 1 : 0; }

void tsr_desc_run_on(tsr_desc_t *d, int group)
{
    if (d)
        d->group = group_field(group);
}

void tsr_desc_home_on(tsr_desc_t *d, int group)
{
    if (d)
        d->home = group_field(group);
}

/* A copy tsr_desc_prefetch_to_group_after holds back: tiles to a memory
 * node once the gate tile is written. */
typedef struct {
    starpu_data_handle_t gate;
    int node, n;
    starpu_data_handle_t tiles[];
} prefetch_t;

static void prefetch_when_gate_written(void *arg)
{
    prefetch_t *p = arg;
    starpu_data_release_on_node(p->gate, STARPU_ACQUIRE_NO_NODE);
    for (int t = 0; t < p->n; t++)
        starpu_data_prefetch_on_node(p->tiles[t], (unsigned)p->node, 1);
    free(p);
}

int tsr_desc_prefetch_to_group_after(tsr_desc_t *d, int group, tsr_desc_t *gate)
{
    int node = tsr_worker_group_memory_node(group), n = 0;
    if (!d || !gate || node < 0 || starpu_node_get_kind((unsigned)node) == STARPU_CPU_RAM ||
        !tsr_tile_is_local(gate, 0, 0, 0))
        return TSR_SUCCESS;
    prefetch_t *p = malloc(sizeof *p + (size_t)d->bt * d->mt * d->nt * sizeof(starpu_data_handle_t));
    if (!p || !(p->gate = tsr_tile_handle(gate, 0, 0, 0))) {
        free(p);
        return TSR_ENOMEM;
    }
    for (int bi = 0; bi < d->bt; bi++)
        for (int i = 0; i < d->mt; i++)
            for (int j = 0; j < d->nt; j++)
                if (tsr_tile_is_local(d, bi, i, j) && !(p->tiles[n++] = tsr_tile_handle(d, bi, i, j))) {
                    free(p);
                    return TSR_ENOMEM;
                }
    p->node = node;
    p->n = n;
    if (starpu_data_acquire_on_node_cb_sequential_consistency(p->gate, STARPU_ACQUIRE_NO_NODE, STARPU_R,
                                                              prefetch_when_gate_written, p, 1) != 0) {
        free(p);
        tsr_log(TSR_LOG_ERROR, "tsr_desc_prefetch_to_group_after: StarPU refused to wait for the gate");
        return TSR_ERUNTIME;
    }
    return TSR_SUCCESS;
}

#if TSR_USE_MPI
typedef struct {
    starpu_data_handle_t h;
    int node;
} held_copy_t;

static void release_when_copied(void *arg)
{
    held_copy_t *c = arg;
    starpu_data_release_on_node(c->h, c->node);
    free(c);
}
#endif

int tsr_desc_prefetch_received(tsr_desc_t *d)
{
#if TSR_USE_MPI
    int nodes[STARPU_MAXNODES], ngpus = tsr_gpu_memory_nodes(nodes, STARPU_MAXNODES);
    for (int t = 0; d && tsr_ctx.mpi_active && ngpus > 0 && t < tsr_desc_ntiles(d); t++) {
        starpu_data_handle_t h = d->handles[t];
        if (!h || starpu_mpi_data_get_rank(h) == tsr_ctx.rank || !starpu_mpi_cached_receive(h))
            continue; /* its own tile (tsr_desc_prefetch_to_group_after), or none received */
        for (int g = 0; g < ngpus; g++) {
            held_copy_t *c = malloc(sizeof *c);
            if (!c)
                return TSR_ENOMEM;
            *c = (held_copy_t){ h, nodes[g] };
            /* ordered after the receive (a write), and before the flush that drops the copy */
            if (starpu_data_acquire_on_node_cb_sequential_consistency(h, nodes[g], STARPU_R, release_when_copied, c,
                                                                      1)) {
                free(c);
                tsr_log(TSR_LOG_ERROR, "tsr_desc_prefetch_received: StarPU refused to copy a received tile");
                return TSR_ERUNTIME;
            }
        }
    }
#else
    (void)d;
#endif
    return TSR_SUCCESS;
}

void tsr_desc_alloc_on_write(tsr_desc_t *d)
{
    if (d && !d->user)
        d->alloc_on_write = 1;
}

#if TSR_USE_MPI
/* Whether flushing h (starpu_mpi_cache_flush) has something to do: on its
 * owner, clear the marks of the sends (the receivers drop their copies); on
 * another rank, drop the copy it received or holds from a task it ran. The
 * flush submits an invalidation for every tile of another rank, copy or
 * none, so the tiles a rank never held are left out (at 4 ranks, most of
 * the remote tiles a GPT-2 step flushes). */
static int has_copy_to_flush(starpu_data_handle_t h)
{
    if (starpu_mpi_data_get_rank(h) == tsr_ctx.rank || starpu_mpi_cached_receive(h))
        return 1;
    for (unsigned node = 0; node < starpu_memory_nodes_get_count(); node++)
        if (starpu_data_test_if_allocated_on_node(h, node))
            return 1;
    return 0;
}
#endif

void tsr_desc_drop_received(tsr_desc_t *d)
{
#if TSR_USE_MPI
    if (!d || !tsr_ctx.mpi_active)
        return;
    int n = tsr_desc_ntiles(d);
    for (int t = 0; t < n; t++)
        if (d->handles[t] && has_copy_to_flush(d->handles[t]))
            starpu_mpi_cache_flush(tsr_ctx.comm, d->handles[t]);
#else
    (void)d;
#endif
}

#if TSR_USE_MPI
/* A task that runs nowhere: StarPU orders it after the accesses to its
 * tiles submitted before it and before those submitted after it, and
 * touches no data (no allocation, no transfer, the values and their copies
 * stay as they are). Its modes are writes only because StarPU refuses to
 * let a task read a tile nobody has written yet (a copy not received). */
static struct starpu_codelet gate_cl = {
    .where = STARPU_NOWHERE,
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .name = "fetch_gate",
};

/* The handle of the first tile of d this rank owns (NULL: none). */
static starpu_data_handle_t first_local_handle(tsr_desc_t *d)
{
    for (int bi = 0; bi < d->bt; bi++)
        for (int i = 0; i < d->mt; i++)
            for (int j = 0; j < d->nt; j++)
                if (tsr_tile_is_local(d, bi, i, j))
                    return tsr_tile_handle(d, bi, i, j);
    return NULL;
}

/* The gate task being built: gate handle g, then the tiles it holds back;
 * open while tsr_desc_fetch_batch_begin calls outnumber the ends. */
static struct {
    int open, n, cap;
    starpu_data_handle_t g;
    struct starpu_data_descr *data;
} pending;

static int submit_pending(void)
{
    int n = pending.n;
    pending.n = 0;
    if (n > 1 && starpu_task_insert(&gate_cl, STARPU_DATA_MODE_ARRAY, pending.data, n, 0) != 0) {
        tsr_log(TSR_LOG_ERROR, "tsr_desc_fetch_after: task submission failed");
        return TSR_ERUNTIME;
    }
    return TSR_SUCCESS;
}

static int add_pending(starpu_data_handle_t h)
{
    if (pending.n == pending.cap) {
        int cap = pending.cap ? 2 * pending.cap : 64;
        struct starpu_data_descr *data = realloc(pending.data, (size_t)cap * sizeof *data);
        if (!data) {
            tsr_log(TSR_LOG_ERROR, "tsr_desc_fetch_after: out of memory");
            return TSR_ENOMEM;
        }
        pending.data = data;
        pending.cap = cap;
    }
    pending.data[pending.n++] = (struct starpu_data_descr){ .handle = h, .mode = STARPU_W };
    return TSR_SUCCESS;
}

/* d's picked tiles join the gate task of g (one insertion for them all,
 * and for the other calls of a batch with the same gate). */
static int gate_tiles(tsr_desc_t *d, starpu_data_handle_t g, tsr_tile_pick_fn pick, void *arg)
{
    int rc = pending.n && pending.g != g ? submit_pending() : TSR_SUCCESS;
    if (!rc && !pending.n) {
        pending.g = g;
        rc = add_pending(g);
    }
    for (int bi = 0; bi < d->bt && !rc; bi++)
        for (int i = 0; i < d->mt && !rc; i++)
            for (int j = 0; j < d->nt && !rc; j++) {
                if (pick && !pick(d, bi, i, j, arg))
                    continue;
                starpu_data_handle_t h = tsr_tile_handle(d, bi, i, j);
                rc = !h ? TSR_ENOMEM : h != g ? add_pending(h) : TSR_SUCCESS;
            }
    if (rc)
        pending.n = 0;
    else if (!pending.open)
        rc = submit_pending();
    return rc;
}
#endif

int tsr_desc_fetch_after(tsr_desc_t *d, tsr_desc_t *gate)
{
    return tsr_desc_fetch_after_some(d, gate, NULL, NULL);
}

int tsr_desc_fetch_after_some(tsr_desc_t *d, tsr_desc_t *gate, tsr_tile_pick_fn pick, void *arg)
{
#if TSR_USE_MPI
    if (!d || !gate || !tsr_ctx.mpi_active)
        return TSR_SUCCESS;
    starpu_data_handle_t g = first_local_handle(gate);
    return g ? gate_tiles(d, g, pick, arg) : TSR_SUCCESS;
#else
    (void)d;
    (void)gate;
    (void)pick;
    (void)arg;
#endif
    return TSR_SUCCESS;
}

void tsr_desc_fetch_batch_begin(void)
{
#if TSR_USE_MPI
    pending.open++;
#endif
}

int tsr_desc_fetch_batch_end(void)
{
#if TSR_USE_MPI
    if (pending.open > 0 && --pending.open == 0)
        return submit_pending();
#endif
    return TSR_SUCCESS;
}

int tsr_mpi_cache_enabled(void)
{
#if TSR_USE_MPI
    return !tsr_ctx.mpi_active || starpu_mpi_cache_is_enabled();
#else
    return 1;
#endif
}

#if TSR_USE_MPI
/* Each tile of d this rank owns (own 1: sent to node, then flushed as the
 * reading call's tsr_desc_flush unless d keeps received copies) or does not
 * own (own 0: received here, node this rank), through StarPU-MPI's cached
 * transfers. */
static int tiles_to_node(tsr_desc_t *d, int own, int node)
{
    for (int bi = 0; bi < d->bt; bi++)
        for (int i = 0; i < d->mt; i++)
            for (int j = 0; j < d->nt; j++) {
                if (tsr_tile_is_local(d, bi, i, j) != own)
                    continue;
                starpu_data_handle_t h = tsr_tile_handle(d, bi, i, j);
                if (!h)
                    return TSR_ENOMEM;
                if (starpu_mpi_get_data_on_node_detached(tsr_ctx.comm, h, node, NULL, NULL) != 0) {
                    tsr_log(TSR_LOG_ERROR, "%s a tile of descriptor %d %s rank %d failed",
                            own ? "sending" : "receiving", d->id, own ? "to" : "on", node);
                    return TSR_ERUNTIME;
                }
                if (own && !d->keep_received)
                    starpu_mpi_cache_flush(tsr_ctx.comm, h);
            }
    return TSR_SUCCESS;
}
#endif

int tsr_desc_send_read(tsr_desc_t *d, int rank)
{
#if TSR_USE_MPI
    if (!d || !tsr_ctx.mpi_active || rank == tsr_ctx.rank)
        return TSR_SUCCESS;
    if (!starpu_mpi_cache_is_enabled())
        return TSR_ENOTSUP;
    return tiles_to_node(d, 1, rank);
#else
    (void)d;
    (void)rank;
    return TSR_SUCCESS;
#endif
}

int tsr_desc_receive_read(tsr_desc_t *d)
{
#if TSR_USE_MPI
    if (!d || !tsr_ctx.mpi_active)
        return TSR_SUCCESS;
    return tiles_to_node(d, 0, tsr_ctx.rank);
#else
    (void)d;
    return TSR_SUCCESS;
#endif
}

void tsr_desc_flush(tsr_desc_t *d)
{
    if (!d->keep_received)
        tsr_desc_drop_received(d);
}

/* Whether invalidating d's own tiles frees anything: their replicates on
 * other memory nodes (GPUs, NUMA nodes), or the memory of tiles allocated on
 * write. With one memory node a tile's only copy is its own storage, which
 * stays: the invalidation would cost a StarPU request a tile for nothing. */
static int own_tiles_have_copies(const tsr_desc_t *d)
{
    const tsr_desc_t *owner = d->parent ? d->parent : d; /* a view's tiles are its parent's */
    return owner->alloc_on_write || starpu_memory_nodes_get_count() > 1;
}

void tsr_desc_invalidate(tsr_desc_t *d)
{
    if (!d)
        return;
    tsr_desc_drop_received(d); /* MPI: its copies elsewhere are dead too */
    if (!own_tiles_have_copies(d))
        return;
    for (int bi = 0; bi < d->bt; bi++)
        for (int i = 0; i < d->mt; i++)
            for (int j = 0; j < d->nt; j++) {
                starpu_data_handle_t h = tsr_tile_registered_handle(d, bi, i, j);
                if (h && !d->user && tsr_tile_is_local(d, bi, i, j)) /* owned here, not the caller's array */
                    starpu_data_invalidate_submit(h);
            }
}

int tsr_desc_refuse_user(const tsr_desc_t *d)
{
    if (d->alloc_on_write) {
        tsr_log(TSR_LOG_ERROR, "descriptor %d has its tiles allocated on write (tsr_desc_alloc_on_write): no storage "
                "to read or write outside tasks", d->id);
        return TSR_EINVAL;
    }
    if (!d->user)
        return TSR_SUCCESS;
    tsr_log(TSR_LOG_ERROR, "descriptor %d is over the caller's array (tsr_desc_create_user): read or write the array "
            "itself, after tsr_wait", d->id);
    return TSR_EINVAL;
}

int tsr_foreach_local_tile(tsr_desc_t *d, enum starpu_data_access_mode mode, tsr_tile_visit_fn fn, void *arg)
{
    if (tsr_desc_refuse_user(d))
        return TSR_EINVAL;
    for (int bi = 0; bi < d->bt; bi++)
        for (int i = 0; i < d->mt; i++)
            for (int j = 0; j < d->nt; j++) {
                if (!tsr_tile_is_local(d, bi, i, j))
                    continue;
                void *p = tsr_tile_storage(d, bi, i, j);
                if (!p)
                    return TSR_ENOMEM;
                starpu_data_handle_t h = tsr_tile_handle(d, bi, i, j);
                starpu_data_acquire(h, mode);
                int rc = fn(d, bi, i, j, p, arg);
                starpu_data_release(h);
                if (rc)
                    return rc;
            }
    return TSR_SUCCESS;
}

static size_t tile_bytes(const tsr_desc_t *d, int bi, int i, int j)
{
    return (size_t)tsr_tile_depth(d, bi) * tsr_tile_rows(d, i) * tsr_tile_cols(d, j) * d->elsize;
}

/* Copy between a tile and the user buffer; to_tile selects the direction. */
static void copy_tile(const tsr_desc_t *d, int bi, int i, int j, void *tile,
                      void *user, int lda, int to_tile)
{
    int depth = tsr_tile_depth(d, bi), rows = tsr_tile_rows(d, i), cols = tsr_tile_cols(d, j);
    size_t es = d->elsize, col_bytes = (size_t)rows * es;
    char *t = tile;
    for (int z = 0; z < depth; z++)
        for (int c = 0; c < cols; c++) {
            size_t gb = (size_t)bi * d->bb + z, gr = (size_t)i * d->mb, gc = (size_t)j * d->nb + c;
            char *u = (char *)user + ((gb * d->n + gc) * lda + gr) * es;
            if (to_tile)
                memcpy(t, u, col_bytes);
            else
                memcpy(u, t, col_bytes);
            t += col_bytes;
        }
}

static int check_user_buffer(const tsr_desc_t *d, const void *A, int lda, int root)
{
    if (!d)
        return TSR_EINVAL;
    if (!tsr_ctx.initialized)
        return TSR_ENOTINIT;
    if (tsr_desc_refuse_user(d))
        return TSR_EINVAL;
    if (root < 0 || root >= tsr_ctx.size) {
        tsr_log(TSR_LOG_ERROR, "scatter/gather: root %d is not a rank in [0, %d)", root, tsr_ctx.size);
        return TSR_EINVAL;
    }
    if (tsr_ctx.rank == root && (!A || lda < d->m)) {
        tsr_log(TSR_LOG_ERROR, "scatter/gather: buffer %p with lda %d for a %d-row tensor", A, lda, d->m);
        return TSR_EINVAL;
    }
    return TSR_SUCCESS;
}

double tsr_desc_resident_bytes(const tsr_desc_t *d, int owned)
{
    double bytes = 0;
    if (!d || (owned && !d->alloc_on_write))
        return 0;
    for (int bi = 0; bi < d->bt; bi++)
        for (int i = 0; i < d->mt; i++)
            for (int j = 0; j < d->nt; j++) {
                starpu_data_handle_t h = tsr_tile_registered_handle(d, bi, i, j);
                if (h && tsr_tile_is_local(d, bi, i, j) == owned && starpu_data_is_on_node(h, STARPU_MAIN_RAM))
                    bytes += (double)tile_bytes(d, bi, i, j);
            }
    return bytes;
}

double tsr_runtime_allocated_bytes(void)
{
    return tsr_ctx.initialized ? (double)starpu_memory_get_used(STARPU_MAIN_RAM) : 0;
}

/* Move one tile between the root's buffer and the owner's storage. */
static int move_tile(tsr_desc_t *d, int bi, int i, int j, void *A, int lda, int root, int to_tile)
{
    int me = tsr_ctx.rank, owner = tsr_tile_owner(d, bi, i, j);
    if (me != root && me != owner)
        return TSR_SUCCESS;
    starpu_data_handle_t h = owner == me ? tsr_tile_handle(d, bi, i, j) : NULL;
    if (owner == me && !h)
        return TSR_ENOMEM;
    void *storage = owner == me ? tsr_tile_storage(d, bi, i, j) : NULL;
    if (owner == me)
        starpu_data_acquire(h, to_tile ? STARPU_W : STARPU_R);
    int rc = TSR_SUCCESS;
    if (owner == root) {
        copy_tile(d, bi, i, j, storage, A, lda, to_tile);
    } else {
        size_t bytes = tile_bytes(d, bi, i, j);
        if (me == owner) {
            rc = to_tile ? tsr_recv_bytes(storage, bytes, root) : tsr_send_bytes(storage, bytes, root);
        } else {
            void *tmp = malloc(bytes);
            if (!tmp)
                return TSR_ENOMEM;
            if (to_tile) {
                copy_tile(d, bi, i, j, tmp, A, lda, 1);
                rc = tsr_send_bytes(tmp, bytes, owner);
            } else {
                rc = tsr_recv_bytes(tmp, bytes, owner);
                copy_tile(d, bi, i, j, tmp, A, lda, 0);
            }
            free(tmp);
        }
    }
    if (owner == me)
        starpu_data_release(h);
    return rc;
}

/* Every rank returns the same verdict, so that a bad buffer on the root does
 * not leave the other ranks waiting for tiles. */
static int agree(int rc)
{
    double worst = rc; /* error codes are negative: the lowest wins */
    return tsr_allreduce_double(&worst, TSR_REDUCE_MIN) ? TSR_ERUNTIME : (int)worst;
}

static int move_all(tsr_desc_t *d, void *A, int lda, int root, int to_tile)
{
    if (!d)
        return TSR_EINVAL;
    int rc = check_user_buffer(d, A, lda, root);
    if (rc == TSR_ENOTINIT || (rc = agree(rc)) != 0)
        return rc;
    if (to_tile)
        tsr_desc_drop_received(d); /* the user's data replaces every tile */
    for (int bi = 0; bi < d->bt; bi++)
        for (int i = 0; i < d->mt; i++)
            for (int j = 0; j < d->nt; j++)
                if ((rc = move_tile(d, bi, i, j, A, lda, root, to_tile)) != 0)
                    return rc;
    return TSR_SUCCESS;
}

int tsr_desc_scatter(tsr_desc_t *d, const void *A, int lda, int root)
{
    return move_all(d, (void *)A, lda, root, 1);
}

int tsr_desc_gather(tsr_desc_t *d, void *A, int lda, int root)
{
    return move_all(d, A, lda, root, 0);
}

/* ---- per-rank tile access ------------------------------------------------------ */

/* The tile's visit for tsr_desc_read_local (the internal visitor's signature). */
typedef struct {
    tsr_local_tile_fn fn;
    void *arg;
} read_local_arg_t;

static int read_local_tile(tsr_desc_t *d, int bi, int i, int j, void *tile, void *arg)
{
    const read_local_arg_t *a = arg;
    return a->fn(d, bi, i, j, tile, a->arg);
}

int tsr_desc_read_local(tsr_desc_t *d, tsr_local_tile_fn fn, void *arg)
{
    if (!d || !fn)
        return TSR_EINVAL;
    read_local_arg_t a = { fn, arg };
    return tsr_foreach_local_tile(d, STARPU_R, read_local_tile, &a);
}

/* [lo, hi) of the tiles of size nb along a dimension that rows [r0, r0 + n) touch. */
static void tile_range(int r0, int n, int nb, int *lo, int *hi)
{
    *lo = r0 / nb;
    *hi = (r0 + n + nb - 1) / nb;
}

int tsr_desc_write_local(tsr_desc_t *d, int r0, int c0, int rows, int cols, const void *A, int lda)
{
    if (!d || !A || d->b != 1 || r0 < 0 || c0 < 0 || rows < 1 || cols < 1 || lda < rows || r0 > d->m - rows ||
        c0 > d->n - cols) {
        tsr_log(TSR_LOG_ERROR, "tsr_desc_write_local: a %d x %d block at (%d, %d) (lda %d) is not inside descriptor "
                "%d (%d x %d x %d)", rows, cols, r0, c0, lda, d ? d->id : -1, d ? d->b : 0, d ? d->m : 0,
                d ? d->n : 0);
        return TSR_EINVAL;
    }
    if (tsr_desc_refuse_user(d))
        return TSR_EINVAL;
    int ilo, ihi, jlo, jhi;
    tile_range(r0, rows, d->mb, &ilo, &ihi);
    tile_range(c0, cols, d->nb, &jlo, &jhi);
    size_t es = d->elsize;
    for (int i = ilo; i < ihi; i++)
        for (int j = jlo; j < jhi; j++) {
            if (!tsr_tile_is_local(d, 0, i, j))
                continue;
            char *tile = tsr_tile_storage(d, 0, i, j);
            if (!tile)
                return TSR_ENOMEM;
            /* the overlap, in d's coordinates */
            int tr = i * d->mb, tc = j * d->nb, trows = tsr_tile_rows(d, i);
            int a = r0 > tr ? r0 : tr, b = r0 + rows < tr + trows ? r0 + rows : tr + trows;
            int c = c0 > tc ? c0 : tc, e = c0 + cols < tc + tsr_tile_cols(d, j) ? c0 + cols : tc + tsr_tile_cols(d, j);
            starpu_data_handle_t h = tsr_tile_handle(d, 0, i, j);
            starpu_data_acquire(h, STARPU_RW); /* a part of the tile: the rest is kept */
            for (int col = c; col < e; col++)
                memcpy(tile + ((size_t)(col - tc) * trows + (size_t)(a - tr)) * es,
                       (const char *)A + ((size_t)(col - c0) * lda + (size_t)(a - r0)) * es, (size_t)(b - a) * es);
            starpu_data_release(h);
        }
    return TSR_SUCCESS;
}
