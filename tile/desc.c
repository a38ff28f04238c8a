#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <starpu.h>
#include "tsr_tile_internal.h"
#include "tsr_bf16.h"
#include "tsr_context.h"
#if TSR_USE_MPI
#include <starpu_mpi.h>
#endif

static int next_desc_id;

const char *tsr_dtype_name(tsr_dtype_t t)
{
    return t == TSR_FLOAT64 ? "float64" : t == TSR_BFLOAT16 ? "bf16" : "float32";
}

tsr_dist_t tsr_dist_block_cyclic(int P, int Q)
{
    tsr_dist_t d = { .kind = TSR_DIST_BLOCK_CYCLIC, .P = P, .Q = Q };
    return d;
}

tsr_dist_t tsr_dist_single(int rank)
{
    tsr_dist_t d = { .kind = TSR_DIST_SINGLE, .P = 1, .Q = 1, .root = rank };
    return d;
}

tsr_dist_t tsr_dist_custom(tsr_owner_fn owner, void *arg)
{
    tsr_dist_t d = { .kind = TSR_DIST_CUSTOM, .P = 1, .Q = 1, .owner = owner, .arg = arg };
    return d;
}

static int dist_owner(const tsr_dist_t *dist, int bi, int i, int j)
{
    switch (dist->kind) {
    case TSR_DIST_BLOCK_CYCLIC:
        return ((i % dist->P) * dist->Q + (j % dist->Q) + bi) % (dist->P * dist->Q);
    case TSR_DIST_SINGLE:
        return dist->root;
    case TSR_DIST_CUSTOM:
    default:
        return dist->owner(bi, i, j, dist->arg);
    }
}

int tsr_desc_ntiles(const tsr_desc_t *d) { return d->bt * d->mt * d->nt; }

int tsr_tile_index(const tsr_desc_t *d, int bi, int i, int j) { return (bi * d->mt + i) * d->nt + j; }

static int edge_size(int total, int tile, int idx)
{
    int rest = total - idx * tile;
    return rest < tile ? rest : tile;
}

static size_t tile_bytes(const tsr_desc_t *d, int bi, int i, int j)
{
    return (size_t)edge_size(d->b, d->bb, bi) * edge_size(d->m, d->mb, i) * edge_size(d->n, d->nb, j) * d->elsize;
}

int tsr_tile_depth(const tsr_desc_t *d, int bi) { return edge_size(d->b, d->bb, bi); }
int tsr_tile_rows(const tsr_desc_t *d, int i) { return edge_size(d->m, d->mb, i); }
int tsr_tile_cols(const tsr_desc_t *d, int j) { return edge_size(d->n, d->nb, j); }
int tsr_tile_owner(const tsr_desc_t *d, int bi, int i, int j) { return dist_owner(&d->dist, bi, i, j); }
int tsr_tile_is_local(const tsr_desc_t *d, int bi, int i, int j) { return tsr_tile_owner(d, bi, i, j) == tsr_ctx.rank; }

static int validate_dist(const tsr_dist_t *dist, int bt, int mt, int nt)
{
    int size = tsr_ctx.size;
    switch (dist->kind) {
    case TSR_DIST_BLOCK_CYCLIC:
        if (dist->P < 1 || dist->Q < 1 || (long long)dist->P * dist->Q > size) {
            tsr_log(TSR_LOG_ERROR, "descriptor: process grid %d x %d does not fit %d rank(s)", dist->P, dist->Q, size);
            return TSR_EDIST;
        }
        return TSR_SUCCESS;
    case TSR_DIST_SINGLE:
        if (dist->root < 0 || dist->root >= size) {
            tsr_log(TSR_LOG_ERROR, "descriptor: owner rank %d is not in [0, %d)", dist->root, size);
            return TSR_EDIST;
        }
        return TSR_SUCCESS;
    case TSR_DIST_CUSTOM:
        if (!dist->owner)
            return TSR_EINVAL;
        for (int bi = 0; bi < bt; bi++)
            for (int i = 0; i < mt; i++)
                for (int j = 0; j < nt; j++) {
                    int r = dist->owner(bi, i, j, dist->arg);
                    if (r < 0 || r >= size) {
                        tsr_log(TSR_LOG_ERROR, "descriptor: custom owner of tile (%d,%d,%d) is rank %d, not in [0, %d)",
                                bi, i, j, r, size);
                        return TSR_EDIST;
                    }
                }
        return TSR_SUCCESS;
    }
    return TSR_EINVAL;
}

/* Tiles along a dimension of n elements ((n + tile - 1) / tile overflows
 * near INT_MAX). */
static int tile_count(int n, int tile) { return (n - 1) / tile + 1; }

/* Sizes Tessera and StarPU can hold: at most 1e8 tiles (the handle arrays,
 * int tile indices), the tensor's bytes in a size_t, and at most 2^32 - 1
 * elements in a tile's matrix (StarPU's block interface has 32-bit strides). */
static int check_sizes(int b, int m, int n, int bb, int mb, int nb, size_t elsize)
{
    int bt = tile_count(b, bb), mt = tile_count(m, mb), nt = tile_count(n, nb);
    if ((double)bt * mt * nt > 1e8) {
        tsr_log(TSR_LOG_ERROR, "descriptor: shape %d x %d x %d in tiles of %d x %d x %d: %d x %d x %d tiles, more "
                "than 1e8", b, m, n, bb, mb, nb, bt, mt, nt);
        return TSR_EINVAL;
    }
    double bytes = (double)b * m * n * elsize;
    if (bytes > (double)PTRDIFF_MAX) {
        tsr_log(TSR_LOG_ERROR, "descriptor: shape %d x %d x %d: %.3g bytes, too large to address", b, m, n, bytes);
        return TSR_EINVAL;
    }
    double tile_elements = (double)(mb < m ? mb : m) * (nb < n ? nb : n);
    if (tile_elements > UINT32_MAX) {
        tsr_log(TSR_LOG_ERROR, "descriptor: tiles of %d x %d (shape %d x %d x %d): %.0f elements in a tile matrix, "
                "more than StarPU's 4294967295", mb < m ? mb : m, nb < n ? nb : n, b, m, n, tile_elements);
        return TSR_EINVAL;
    }
    return TSR_SUCCESS;
}

/* The checks every descriptor passes: *desc set to NULL first. */
static int check_desc(tsr_desc_t **desc, tsr_dtype_t dtype, int b, int m, int n, int bb, int mb, int nb)
{
    if (!desc)
        return TSR_EINVAL;
    *desc = NULL;
    if (!tsr_ctx.initialized)
        return TSR_ENOTINIT;
    if (dtype != TSR_FLOAT32 && dtype != TSR_FLOAT64 && dtype != TSR_BFLOAT16) {
        tsr_log(TSR_LOG_ERROR, "descriptor: unknown element type %d", (int)dtype);
        return TSR_EINVAL;
    }
    if (b < 1 || m < 1 || n < 1 || bb < 1 || mb < 1 || nb < 1) {
        tsr_log(TSR_LOG_ERROR, "descriptor: shape %d x %d x %d and tiles %d x %d x %d must be positive",
                b, m, n, bb, mb, nb);
        return TSR_EINVAL;
    }
    return check_sizes(b, m, n, bb, mb, nb, tsr_dtype_size(dtype));
}

/* A descriptor of checked sizes and distribution, no tile registered yet. */
static int desc_alloc(tsr_desc_t **desc, tsr_dtype_t dtype, int b, int m, int n, int bb, int mb, int nb,
                      const tsr_dist_t *dist)
{
    int bt = tile_count(b, bb), mt = tile_count(m, mb), nt = tile_count(n, nb);
    tsr_desc_t *d = calloc(1, sizeof *d);
    if (!d)
        return TSR_ENOMEM;
    d->dtype = dtype;
    d->elsize = tsr_dtype_size(dtype);
    d->b = b; d->m = m; d->n = n;
    d->bb = bb; d->mb = mb; d->nb = nb;
    d->bt = bt; d->mt = mt; d->nt = nt;
    d->dist = *dist;
    d->storage = calloc((size_t)bt * mt * nt, sizeof *d->storage);
    d->handles = calloc((size_t)bt * mt * nt, sizeof *d->handles);
    if (!d->storage || !d->handles) {
        free(d->storage);
        free(d->handles);
        free(d);
        return TSR_ENOMEM;
    }
    d->tag_base = tsr_tag_alloc((int64_t)bt * mt * nt);
    d->id = __atomic_fetch_add(&next_desc_id, 1, __ATOMIC_RELAXED);
    *desc = d;
    return TSR_SUCCESS;
}

int tsr_desc_create(tsr_desc_t **desc, tsr_dtype_t dtype, int b, int m, int n,
                    int bb, int mb, int nb, const tsr_dist_t *dist)
{
    int rc = check_desc(desc, dtype, b, m, n, bb, mb, nb);
    if (rc)
        return rc;
    tsr_dist_t dd = dist ? *dist : tsr_dist_block_cyclic(tsr_ctx.size, 1);
    rc = validate_dist(&dd, tile_count(b, bb), tile_count(m, mb), tile_count(n, nb));
    return rc ? rc : desc_alloc(desc, dtype, b, m, n, bb, mb, nb, &dd);
}

/* The caller's array as StarPU's block interface sees a tile of it: rows
 * ld apart, matrices ld * n apart, in 32-bit element strides. */
static int check_user_array(int b, int m, int n, int bb, int nb, const void *ptr, int ld)
{
    if (tsr_ctx.size > 1) {
        tsr_log(TSR_LOG_ERROR, "descriptor over the caller's array: one process only, not %d ranks (scatter the "
                "array into a distributed descriptor instead)", tsr_ctx.size);
        return TSR_EINVAL;
    }
    if (!ptr || ld < m) {
        tsr_log(TSR_LOG_ERROR, "descriptor over the caller's array: array %p with leading dimension %d for %d rows",
                ptr, ld, m);
        return TSR_EINVAL;
    }
    double stride = (double)ld * (bb > 1 && b > 1 ? n : (nb < n ? nb : n));
    if (stride > UINT32_MAX) {
        tsr_log(TSR_LOG_ERROR, "descriptor over the caller's array: a tile spans %.0f elements (leading dimension "
                "%d), more than StarPU's 4294967295", stride, ld);
        return TSR_EINVAL;
    }
    return TSR_SUCCESS;
}

enum { TILE_ALIGN = 64, HUGE_PAGE = 2 << 20 };

static size_t aligned_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux >= 6.1 (older C libraries lack the name; older kernels answer EINVAL) */
#endif

/* The caller's array on transparent huge pages, as advice: a tile view of a
 * large array spans many 4 KiB pages (a 512-row float tile with leading
 * dimension 4096: 512 pages), and BLIS's packing of it misses the TLB
 * (tsr_gemm_array at 4096^3: 1.077 times tsr_gemm's time on descriptors on
 * 4 KiB pages, 0.995 on huge pages). MADV_COLLAPSE backs the range, already
 * filled, with huge pages now, values unchanged (MADV_HUGEPAGE alone leaves
 * that to khugepaged, much later); MADV_HUGEPAGE keeps the range's later
 * faults on huge pages. Only the 2 MiB-aligned interior of the array: the
 * pages around it hold other data. Every error is ignored (THP off, an
 * older kernel, no huge page free, memory that is not anonymous). */
static void advise_huge_pages(const void *ptr, size_t bytes)
{
    uintptr_t lo = aligned_up((uintptr_t)ptr, HUGE_PAGE), hi = ((uintptr_t)ptr + bytes) / HUGE_PAGE * HUGE_PAGE;
    if (hi <= lo)
        return;
    if (madvise((void *)lo, hi - lo, MADV_HUGEPAGE) == 0)
        madvise((void *)lo, hi - lo, MADV_COLLAPSE);
}

int tsr_desc_create_user(tsr_desc_t **desc, tsr_dtype_t dtype, int b, int m, int n, int bb, int mb, int nb,
                         void *ptr, int ld)
{
    int rc = check_desc(desc, dtype, b, m, n, bb, mb, nb);
    rc = rc ? rc : check_user_array(b, m, n, bb, nb, ptr, ld);
    if (rc)
        return rc;
    tsr_dist_t single = tsr_dist_single(0);
    rc = desc_alloc(desc, dtype, b, m, n, bb, mb, nb, &single);
    if (!rc) {
        (*desc)->user = ptr;
        (*desc)->user_ld = ld;
        size_t elements = ((size_t)(b - 1) * n + (size_t)(n - 1)) * (size_t)ld + (size_t)m;
        advise_huge_pages(ptr, elements * tsr_dtype_size(dtype));
    }
    return rc;
}

int tsr_desc_create_2d_user(tsr_desc_t **desc, tsr_dtype_t dtype, int m, int n, int mb, int nb, void *ptr, int ld)
{
    return tsr_desc_create_user(desc, dtype, 1, m, n, 1, mb, nb, ptr, ld);
}

int tsr_desc_create_2d(tsr_desc_t **desc, tsr_dtype_t dtype, int m, int n,
                       int mb, int nb, const tsr_dist_t *dist)
{
    return tsr_desc_create(desc, dtype, 1, m, n, 1, mb, nb, dist);
}

/* The owned tiles of a descriptor live in one anonymous mapping (the slab),
 * made when the first one is needed and carved in order of first use:
 * - zero pages from the kernel, touched first by the task that first writes
 *   a tile (on a worker, in parallel, not a memset on the submitting thread:
 *   2.4 GB of GPT-2 124M state took seconds of page faults there);
 * - 2 MiB-aligned with transparent huge pages (MADV_HUGEPAGE, a hint: no
 *   error where THP is off): the 124M B4 T64 steady step ran 2.6-4.5 %
 *   faster in alternating runs, while first touch (steps 0-1) took 0.4-1.8 s
 *   longer on this VM, whose host backs guest memory lazily. One GEMM call
 *   on cold operands does not gain from huge pages (time_blas_cold), so
 *   where the step gains is not established.
 * With CUDA workers each tile is pinned, as starpu_malloc does, for
 * asynchronous transfers. */
static size_t owned_bytes(const tsr_desc_t *d)
{
    size_t total = 0;
    for (int bi = 0; bi < d->bt; bi++)
        for (int i = 0; i < d->mt; i++)
            for (int j = 0; j < d->nt; j++)
                if (tsr_tile_is_local(d, bi, i, j))
                    total += aligned_up(tile_bytes(d, bi, i, j), TILE_ALIGN);
    return total;
}

/* Map the slab: HUGE_PAGE-aligned when it holds at least one huge page. */
static int slab_map(tsr_desc_t *d)
{
    size_t bytes = aligned_up(owned_bytes(d), 4096), align = bytes >= HUGE_PAGE ? HUGE_PAGE : 4096;
    char *p = mmap(NULL, bytes + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return TSR_ENOMEM;
    char *start = (char *)aligned_up((uintptr_t)p, align);
    if (start > p)
        munmap(p, (size_t)(start - p));
    munmap(start + bytes, (size_t)(p + align - start)); /* the rest of the slack */
    if (align == HUGE_PAGE)
        madvise(start, bytes, MADV_HUGEPAGE);
    d->slab = start;
    d->slab_bytes = bytes;
    d->slab_used = 0;
    return TSR_SUCCESS;
}

static void *tile_alloc(tsr_desc_t *d, size_t bytes)
{
    if (!d->slab && slab_map(d))
        return NULL;
    size_t need = aligned_up(bytes, TILE_ALIGN);
    if (d->slab_used + need > d->slab_bytes)
        return NULL; /* cannot happen: the slab holds every owned tile */
    void *p = d->slab + d->slab_used;
    d->slab_used += need;
    if (starpu_cuda_worker_get_count() > 0)
        starpu_memory_pin(p, bytes);
    return p;
}

/* Another thread may read the handles while the submitting thread registers
 * them (tsr_desc_resident_bytes, sampled by tsr_gpt2 --profile): a handle is
 * stored with release once StarPU (and StarPU-MPI) know it, and read here
 * with acquire, so a reader sees NULL or a complete handle. */
starpu_data_handle_t tsr_tile_registered_handle(const tsr_desc_t *d, int bi, int i, int j)
{
    return __atomic_load_n(&d->handles[tsr_tile_index(d, bi, i, j)], __ATOMIC_ACQUIRE);
}

/* A tile as StarPU's block interface (rows x cols x depth; columns ld
 * elements apart, matrices zstride apart: packed, or a view of the caller's
 * array), registered as starpu_block_data_register does but without its accessibility check: that
 * check reads the tile's first and last byte, so the submitting thread took
 * the first-touch page faults of every tile (zeroing 2 MiB huge pages) while
 * the workers waited for tasks: 8 % of a 3-step 124M run, most of step 1's
 * AdamW submission. Now the first task that writes a tile touches it. */
static void register_block(starpu_data_handle_t *h, int home, uintptr_t ptr, int rows, int cols, int depth,
                           int ld, size_t zstride, size_t elsize)
{
    struct starpu_block_interface block = {
        .id = STARPU_BLOCK_INTERFACE_ID,
        .ptr = ptr,
        .dev_handle = ptr,
        .offset = 0,
        .nx = (uint32_t)rows,
        .ny = (uint32_t)cols,
        .nz = (uint32_t)depth,
        .ldy = (uint32_t)ld,
        .ldz = (uint32_t)zstride,
        .elemsize = elsize,
    };
    starpu_data_register(h, home, &block, &starpu_interface_block_ops);
}

/* Tile (bi, i, j) of a descriptor over the caller's array: a view in place. */
static uintptr_t user_tile(const tsr_desc_t *d, int bi, int i, int j)
{
    size_t ld = (size_t)d->user_ld, matrix = (size_t)bi * d->bb;
    size_t offset = (matrix * d->n + (size_t)j * d->nb) * ld + (size_t)i * d->mb;
    return (uintptr_t)((char *)d->user + offset * d->elsize);
}

/* Several submitting threads may ask for the same unregistered tile (a
 * parameter read by every sub-batch): one registers it, under this lock. */
static starpu_pthread_mutex_t register_lock = STARPU_PTHREAD_MUTEX_INITIALIZER;

static starpu_data_handle_t register_tile(tsr_desc_t *d, int bi, int i, int j);

starpu_data_handle_t tsr_tile_handle(tsr_desc_t *d, int bi, int i, int j)
{
    starpu_data_handle_t h = tsr_tile_registered_handle(d, bi, i, j);
    if (h)
        return h;
    starpu_pthread_mutex_lock(&register_lock);
    h = tsr_tile_registered_handle(d, bi, i, j);
    if (!h)
        h = register_tile(d, bi, i, j);
    starpu_pthread_mutex_unlock(&register_lock);
    return h;
}

static starpu_data_handle_t register_tile(tsr_desc_t *d, int bi, int i, int j)
{
    int idx = tsr_tile_index(d, bi, i, j);
    int depth = tsr_tile_depth(d, bi), rows = tsr_tile_rows(d, i), cols = tsr_tile_cols(d, j);
    int owner = tsr_tile_owner(d, bi, i, j);
    int home = -1, ld = rows;
    size_t zstride = (size_t)rows * cols;
    uintptr_t ptr = 0;
    if (d->user) { /* one process: every tile is this rank's */
        home = STARPU_MAIN_RAM;
        ptr = user_tile(d, bi, i, j);
        ld = d->user_ld;
        zstride = (size_t)ld * (depth > 1 ? d->n : cols); /* depth 1: never used, kept in 32 bits */
    } else if (owner == tsr_ctx.rank && d->alloc_on_write) {
        home = -1; /* StarPU allocates it on the first write, frees it on invalidation */
    } else if (owner == tsr_ctx.rank) {
        size_t bytes = tile_bytes(d, bi, i, j);
        void *p = tile_alloc(d, bytes);
        if (!p) {
            tsr_log(TSR_LOG_ERROR, "out of memory allocating a %zu-byte tile", bytes);
            return NULL;
        }
        d->storage[idx] = p;
        home = STARPU_MAIN_RAM;
        ptr = (uintptr_t)p;
    }
    starpu_data_handle_t h;
    register_block(&h, home, ptr, rows, cols, depth, ld, zstride, d->elsize);
#if TSR_USE_MPI
    if (tsr_ctx.mpi_active)
        starpu_mpi_data_register(h, d->tag_base + idx, owner);
#endif
    __atomic_store_n(&d->handles[idx], h, __ATOMIC_RELEASE); /* published: tsr_tile_registered_handle */
    return h;
}

/* The owner of a view's tile: its parent's. */
static int view_owner(int bi, int i, int j, void *arg)
{
    const tsr_desc_t *v = arg;
    return tsr_tile_owner(v->parent, bi, v->i0 + i, v->j0 + j);
}

/* Extent of tiles [t0, t0 + nt) of a dimension of total elements in tiles of
 * tile: the last may be partial. */
static int span(int total, int tile, int t0, int nt)
{
    int end = (t0 + nt) * tile;
    return (end < total ? end : total) - t0 * tile;
}

int tsr_desc_view(tsr_desc_t **view, tsr_desc_t *parent, int i0, int mt, int j0, int nt)
{
    if (!view)
        return TSR_EINVAL;
    *view = NULL;
    if (!parent || parent->parent || i0 < 0 || mt < 1 || i0 + mt > parent->mt || j0 < 0 || nt < 1 ||
        j0 + nt > parent->nt) {
        tsr_log(TSR_LOG_ERROR, "tsr_desc_view: tiles [%d, %d) x [%d, %d) of %s", i0, i0 + mt, j0, j0 + nt,
                !parent ? "no descriptor" : parent->parent ? "a view" : "the parent's tiles");
        return TSR_EINVAL;
    }
    tsr_desc_t *v = malloc(sizeof *v);
    if (!v)
        return TSR_ENOMEM;
    *v = *parent;
    v->m = span(parent->m, parent->mb, i0, mt);
    v->n = span(parent->n, parent->nb, j0, nt);
    v->mt = mt;
    v->nt = nt;
    v->parent = parent;
    v->i0 = i0;
    v->j0 = j0;
    v->dist = tsr_dist_custom(view_owner, v);
    v->slab = NULL; /* the parent's to unmap */
    v->id = __atomic_fetch_add(&next_desc_id, 1, __ATOMIC_RELAXED);
    size_t n = (size_t)v->bt * mt * nt;
    v->storage = calloc(n, sizeof *v->storage);
    v->handles = calloc(n, sizeof *v->handles);
    int rc = v->storage && v->handles ? TSR_SUCCESS : TSR_ENOMEM;
    for (int bi = 0; bi < v->bt && !rc; bi++)
        for (int i = 0; i < mt && !rc; i++)
            for (int j = 0; j < nt && !rc; j++) {
                int t = tsr_tile_index(v, bi, i, j);
                if (!(v->handles[t] = tsr_tile_handle(parent, bi, i0 + i, j0 + j)))
                    rc = TSR_ENOMEM;
                else
                    v->storage[t] = parent->storage[tsr_tile_index(parent, bi, i0 + i, j0 + j)];
            }
    if (rc) {
        free(v->storage);
        free(v->handles);
        free(v);
        return rc;
    }
    *view = v;
    return TSR_SUCCESS;
}

int tsr_desc_destroy(tsr_desc_t *d)
{
    if (!d)
        return TSR_SUCCESS;
    if (d->parent) { /* the tiles are the parent's */
        free(d->handles);
        free(d->storage);
        free(d);
        return TSR_SUCCESS;
    }
    for (int bi = 0; bi < d->bt; bi++)
        for (int i = 0; i < d->mt; i++)
            for (int j = 0; j < d->nt; j++) {
                int t = tsr_tile_index(d, bi, i, j);
                if (d->handles[t])
                    starpu_data_unregister(d->handles[t]);
                if (d->storage[t] && starpu_cuda_worker_get_count() > 0)
                    starpu_memory_unpin(d->storage[t], tile_bytes(d, bi, i, j));
            }
    if (d->slab)
        munmap(d->slab, d->slab_bytes);
    free(d->handles);
    free(d->storage);
    free(d);
    return TSR_SUCCESS;
}
