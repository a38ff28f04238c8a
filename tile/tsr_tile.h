/* Tessera tile layer: 2D/3D tiled tensors (descriptors), distributions,
 * per-tile StarPU handles, conversions between user buffers and tiles. */
#ifndef TSR_TILE_H
#define TSR_TILE_H

#include <stddef.h>
#include <stdint.h>
#include "tsr_core.h"

/* StarPU's handle type, as starpu_data.h declares it: the public headers do
 * not include starpu.h, which with a CUDA StarPU pulls in the CUDA headers
 * (and their deprecation warnings) into every program using Tessera. */
typedef struct _starpu_data_state *starpu_data_handle_t;

#ifdef __cplusplus
extern "C" {
#endif

const char *tsr_dtype_name(tsr_dtype_t t);

/* Owner of tile (bi, i, j) for a custom distribution. */
typedef int (*tsr_owner_fn)(int bi, int i, int j, void *arg);

typedef enum { TSR_DIST_BLOCK_CYCLIC = 0, TSR_DIST_SINGLE, TSR_DIST_CUSTOM } tsr_dist_kind_t;

typedef struct {
    tsr_dist_kind_t kind;
    int P, Q;           /* block-cyclic process grid */
    int root;           /* TSR_DIST_SINGLE: the rank owning every tile */
    tsr_owner_fn owner; /* TSR_DIST_CUSTOM */
    void *arg;
} tsr_dist_t;

/* owner(bi,i,j) = ((i % P) * Q + j % Q + bi) % (P * Q) */
tsr_dist_t tsr_dist_block_cyclic(int P, int Q);
/* every tile on one rank (e.g. model parameters kept on rank 0) */
tsr_dist_t tsr_dist_single(int rank);
tsr_dist_t tsr_dist_custom(tsr_owner_fn owner, void *arg);

/* A tensor of shape b x m x n cut in tiles of bb x mb x nb (edge tiles
 * smaller). Each tile is stored contiguously: depth consecutive column-major
 * (rows x cols) matrices with leading dimension = rows. Read-only for users. */
typedef struct tsr_desc {
    tsr_dtype_t dtype;
    size_t elsize;
    int b, m, n;        /* shape */
    int bb, mb, nb;     /* tile sizes */
    int bt, mt, nt;     /* number of tiles along each dimension */
    tsr_dist_t dist;
    int64_t tag_base;   /* MPI tag of tile 0 */
    void **storage;     /* local storage of owned tiles (carved lazily from slab) */
    char *slab;         /* one mapping for every owned tile (see desc.c) */
    size_t slab_bytes, slab_used;
    starpu_data_handle_t *handles; /* registered lazily */
    int id;
    int keep_received;  /* tsr_desc_keep_received: flushes leave received copies */
    int alloc_on_write; /* tsr_desc_alloc_on_write: owned tiles have no storage of their own */
    void *user;         /* tsr_desc_create_user: the caller's array the tiles view, else NULL */
    int user_ld;        /* its leading dimension */
    struct tsr_desc *parent; /* tsr_desc_view: the descriptor whose tiles these are, else NULL */
    int i0, j0;         /* tsr_desc_view: tile (bi, i, j) is the parent's (bi, i0 + i, j0 + j) */
    int group;          /* tsr_desc_run_on: 1 + the worker group of its tasks, 0: any worker */
    int home;           /* tsr_desc_home_on: 1 + the worker group of its other tasks, 0: any worker */
} tsr_desc_t;

/* Create a descriptor; dist NULL = 1 x 1 grid (everything on rank 0 with one
 * rank, block-cyclic P=size, Q=1 otherwise). Tiles read as zero. Every rank
 * must create descriptors in the same order. TSR_EINVAL for sizes it cannot
 * hold: more than 1e8 tiles, more bytes than a size_t, or a tile matrix
 * (rows x cols) of more than 2^32 - 1 elements. */
int tsr_desc_create(tsr_desc_t **desc, tsr_dtype_t dtype, int b, int m, int n,
                    int bb, int mb, int nb, const tsr_dist_t *dist);
/* 2D: b = bb = 1 */
int tsr_desc_create_2d(tsr_desc_t **desc, tsr_dtype_t dtype, int m, int n,
                       int mb, int nb, const tsr_dist_t *dist);
/* A descriptor over the caller's own column-major array, no copy: tile
 * (bi, i, j) is a view of ptr in place, with the caller's leading dimension
 * ld >= m (the layout of tsr_desc_scatter: matrix bi starts ld * n elements
 * after matrix bi - 1). Tasks read and write the array itself, so it must
 * stay allocated, and be neither read nor written by the caller, until the
 * tasks using it are done (tsr_wait, or tsr_desc_destroy). One process only:
 * under MPI with several ranks TSR_EINVAL (scatter into a distributed
 * descriptor instead). tsr_desc_destroy unregisters the tiles, which brings
 * their latest values back into the array, and never frees it. Scatter,
 * gather, fill, norm and sum refuse it (TSR_EINVAL): read the array. The
 * array's whole 2 MiB pages are advised onto transparent huge pages
 * (MADV_HUGEPAGE, and MADV_COLLAPSE on Linux >= 6.1, values unchanged): its
 * tiles then run as fast as a descriptor's own; the first wrap of a filled
 * array pays the move (192 MiB: 0.5-2 s on the loaded 2-core VM), later
 * wraps next to nothing. */
int tsr_desc_create_user(tsr_desc_t **desc, tsr_dtype_t dtype, int b, int m, int n, int bb, int mb, int nb,
                         void *ptr, int ld);
/* 2D: b = bb = 1 */
int tsr_desc_create_2d_user(tsr_desc_t **desc, tsr_dtype_t dtype, int m, int n, int mb, int nb, void *ptr, int ld);
/* A view of the tiles [i0, i0 + mt) x [j0, j0 + nt) of parent (every
 * matrix bi): the same tiles (handles, storage, owners), so tasks on the view
 * and on the parent are ordered as on one descriptor. For running an
 * algorithm on part of a tensor, e.g. a few columns of a gradient at a time.
 * Only the parent's last tile of a dimension may be partial, so the view's
 * tiles keep the parent's sizes. TSR_EINVAL for a range outside the parent
 * or a view of a view. Destroy it before the parent: tsr_desc_destroy frees
 * the view alone, never the tiles. */
int tsr_desc_view(tsr_desc_t **view, tsr_desc_t *parent, int i0, int mt, int j0, int nt);
/* Wait for the tasks using it, unregister every handle, free storage and
 * the descriptor itself: desc must not be used again, destroyed again
 * included (set your pointer to NULL). NULL is a no-op (TSR_SUCCESS). */
int tsr_desc_destroy(tsr_desc_t *desc);
/* Declare the values of every tile dead (asynchronous, in task order):
 * once the tasks submitted so far are done with them, StarPU drops the
 * tiles' copies (device replicates and MPI-received copies are freed, never
 * transferred or written back) and the next task must write before reading.
 * For temporaries that are rewritten before their next use (collective
 * under MPI: every rank calls it at the same point). Reading a tile before
 * it is written again is a programming error: StarPU aborts on it
 * ("handle->initialized"), except where there was nothing to drop (one
 * memory node and tiles with storage of their own: the call then leaves
 * them as they are, at no cost). */
void tsr_desc_invalidate(tsr_desc_t *desc);

int tsr_desc_ntiles(const tsr_desc_t *d);
int tsr_tile_depth(const tsr_desc_t *d, int bi);
int tsr_tile_rows(const tsr_desc_t *d, int i);
int tsr_tile_cols(const tsr_desc_t *d, int j);
int tsr_tile_owner(const tsr_desc_t *d, int bi, int i, int j);
int tsr_tile_is_local(const tsr_desc_t *d, int bi, int i, int j);
/* The tile's StarPU handle, registered on first use. */
starpu_data_handle_t tsr_tile_handle(tsr_desc_t *d, int bi, int i, int j);
/* The tile's StarPU handle if it is registered already, else NULL. */
starpu_data_handle_t tsr_tile_registered_handle(const tsr_desc_t *d, int bi, int i, int j);
/* Forget StarPU-MPI cached copies of every tile of d, so that no stale copy
 * survives a later write (collective; nothing to do without MPI). */
void tsr_desc_flush(tsr_desc_t *d);
/* Keep (keep != 0) the copies this rank receives of d's tiles until their
 * owner writes them (StarPU-MPI drops them then; tsr_desc_scatter and
 * tsr_desc_invalidate drop them too), whatever the algorithms flush: for
 * data read several times between writes, such as a model's parameters
 * within a training step (fetched once a step instead of once a read). */
void tsr_desc_keep_received(tsr_desc_t *d, int keep);
/* Drop the copies this rank received of d's tiles now, kept or not (once
 * the tasks submitted so far that read them are done; collective like
 * tsr_desc_flush; nothing to do without MPI). */
void tsr_desc_drop_received(tsr_desc_t *d);
/* Run every task that touches a tile of d on the workers of worker group
 * `group` (tsr_worker_groups: one GPU of several; -1 or no such group: on
 * any worker, the scheduler's choice). For data parallelism inside one
 * process: the activations of a sub-batch placed on its GPU keep all its
 * tasks there. A task touching tiles of several groups runs on the first
 * one's. */
void tsr_desc_run_on(tsr_desc_t *d, int group);
/* Run on `group`'s workers the tasks that touch a tile of d and none of a
 * descriptor given tsr_desc_run_on: data that lives on one GPU (a model's
 * parameters and optimizer state there, updated there) but that tasks
 * placed elsewhere read. -1: any worker. */
void tsr_desc_home_on(tsr_desc_t *d, int group);
/* Copy this rank's tiles of d to the memory of `group` (a GPU of several)
 * once the tasks submitted so far that write gate's first tile are done:
 * ahead of the group's tasks that read them later, which would otherwise
 * fetch them only once ready, all GPUs at once. The copy is of d's value
 * at that moment (a task writing d later drops it: a wasted copy, not a
 * stale read). Nothing to do for a group in main memory or no group. */
int tsr_desc_prefetch_to_group_after(tsr_desc_t *d, int group, tsr_desc_t *gate);
/* MPI: copy the tiles of d this rank has received from other ranks (their
 * receives submitted: a task reading them was) to each GPU its tasks run on
 * alone, as soon as they arrive, rather than when the tasks there that
 * read them are ready. Call it before the flush that drops them. Nothing
 * to do where CPU workers run tasks. */
int tsr_desc_prefetch_received(tsr_desc_t *d);
/* Give d's owned tiles no storage of their own: StarPU allocates a tile when
 * a task first writes it and frees it when tsr_desc_invalidate's
 * invalidation runs, so a tile holds memory only from its first write to
 * its last read before an invalidation (a gradient that lives from the
 * backward to its reduction). Call before the first task uses d. A tile
 * must be written before it is read; scatter, gather, fill, norm and sum
 * refuse d (TSR_EINVAL). Without CUDA workers the memory goes back at once;
 * with them StarPU keeps it for its next allocation of the same size. */
void tsr_desc_alloc_on_write(tsr_desc_t *d);
/* Under MPI, hold back the next access to each of d's tiles until the tasks
 * submitted so far that write this rank's first tile of gate (and those
 * that access the other tiles the same gate task holds back) are done: on a
 * tile's owner its next send (and its next task), elsewhere its next receive
 * (and the buffer it lands in) wait for them. For data dropped after a use
 * (tsr_desc_flush) and read again later: it comes back only shortly before
 * the tasks that read it (a prefetch window), instead of as soon as its
 * owner has it; or for an alloc-on-write tile whose first writer would
 * otherwise run early. Every rank calls it at the same point, each gated by
 * its own tile; a rank owning no tile of gate does nothing, and so does a
 * run without MPI. */
int tsr_desc_fetch_after(tsr_desc_t *d, tsr_desc_t *gate);
/* tsr_desc_fetch_after for the tiles pick(d, bi, i, j, arg) says yes to
 * alone (pick NULL: every tile): a rank gates only the tiles it sends or
 * receives, not those of the whole descriptor. */
typedef int (*tsr_tile_pick_fn)(const tsr_desc_t *d, int bi, int i, int j, void *arg);
int tsr_desc_fetch_after_some(tsr_desc_t *d, tsr_desc_t *gate, tsr_tile_pick_fn pick, void *arg);
/* A batch of the calls above: between begin and end (nested pairs count as
 * one), the calls with the same gate go in as one task, submitted at the
 * end or at the next call with another gate, so nothing else may be
 * submitted in between. Saves an insertion a call (the gates of one layer's
 * parameters, of each sub-batch's partial gradients). */
void tsr_desc_fetch_batch_begin(void);
int tsr_desc_fetch_batch_end(void);
/* Owner-computes without walking the other ranks' tasks. A rank that leaves
 * out an algorithm call whose tasks all run on `rank` and read every tile of
 * d (it neither runs nor writes any of them) does what the call would have
 * done to d here: it sends each tile of d it owns to `rank` (StarPU-MPI's
 * cached send: the receive is posted by that rank's own submission of the
 * call) and then flushes it as the call does (tsr_desc_flush). It needs the
 * StarPU-MPI communication cache (off with STARPU_MPI_CACHE=0:
 * tsr_mpi_cache_enabled says 0 and tsr_desc_send_read returns TSR_ENOTSUP;
 * then every rank must submit every call). Nothing to do without MPI. */
int tsr_mpi_cache_enabled(void);
int tsr_desc_send_read(tsr_desc_t *d, int rank);
/* This rank's copy of every tile of d another rank owns, received now
 * (StarPU-MPI's cached receive, ordered after the accesses submitted so
 * far): the tasks that read them, submitted next, then find them received,
 * whichever thread submits them first (tsr_submit_streams). */
int tsr_desc_receive_read(tsr_desc_t *d);
/* Bytes of d's tiles that StarPU allocated in this process's memory and
 * that hold a value now: with owned 0 the copies of other ranks' tiles
 * (received, or on their way to be dropped), with owned 1 the tiles of an
 * alloc-on-write descriptor this rank owns (0 otherwise). A sample: it may
 * be called from another thread while tasks run. */
double tsr_desc_resident_bytes(const tsr_desc_t *d, int owned);
/* Bytes StarPU has allocated itself in this process's memory now: copies of
 * other ranks' tiles, alloc-on-write tiles, receive buffers. */
double tsr_runtime_allocated_bytes(void);

/* User buffer layout: column-major b x (m x n), leading dimension lda >= m,
 * matrix bi starts at A + bi * lda * n elements. */
/* Copy the user buffer held by rank root into the descriptor's tiles. */
int tsr_desc_scatter(tsr_desc_t *d, const void *A, int lda, int root);
/* Copy the descriptor into the user buffer on rank root (waits for tasks). */
int tsr_desc_gather(tsr_desc_t *d, void *A, int lda, int root);

/* Per-rank access to the tiles this rank owns, with no communication (for
 * files each rank reads and writes itself). read_local calls fn on every
 * local tile of d in tile order (bi, i, j), its storage read-only: depth x
 * (rows x cols) column-major, leading dimension rows; it waits for the
 * tasks writing the tile and stops at fn's first non-zero return, which it
 * returns. */
typedef int (*tsr_local_tile_fn)(const tsr_desc_t *d, int bi, int i, int j, const void *tile, void *arg);
int tsr_desc_read_local(tsr_desc_t *d, tsr_local_tile_fn fn, void *arg);
/* Copies the block of rows x cols elements at (r0, c0) of a 2D d, given
 * column-major in A (leading dimension lda >= rows, d's element type), into
 * the parts of this rank's tiles it overlaps; other tiles are left alone.
 * Copies of these tiles that other ranks received earlier are not dropped:
 * for a descriptor no task has read from another rank since it was last
 * scattered (a model being loaded). TSR_EINVAL for a block outside d. */
int tsr_desc_write_local(tsr_desc_t *d, int r0, int c0, int rows, int cols, const void *A, int lda);

/* Fill with uniform values in [-0.5, 0.5) from a counter-based generator:
 * element (bi, r, c) depends only on (seed, bi, r, c), so the tensor is the
 * same whatever the tile sizes and process grid. */
int tsr_desc_fill_random(tsr_desc_t *d, uint64_t seed);
/* The value tsr_desc_fill_random puts at (bi, r, c). */
double tsr_random_value(uint64_t seed, int bi, int r, int c);

typedef enum { TSR_NORM_MAX = 0, TSR_NORM_FRO } tsr_norm_t;
/* Norm over all ranks (every rank gets the value; waits for tasks). */
int tsr_desc_norm(tsr_desc_t *d, tsr_norm_t which, double *value);
/* Sum of all elements in double: each tile's in storage order, then the
 * tiles' sums in tile order. Every rank gets the same bits, whatever the
 * process grid; one reduction of a double per tile (collective; waits for
 * the tasks writing d). */
int tsr_desc_sum(tsr_desc_t *d, double *sum);

#ifdef __cplusplus
}
#endif
#endif
