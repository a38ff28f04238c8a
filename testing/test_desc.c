/* Descriptors: random fill independent of tiling and grid, scatter/gather
 * round trips from any root, norms and sums, lazy allocation, distributions. Runs
 * with any number of MPI ranks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "tessera.h"
#include "tsr_check.h"
#include "tsr_expect.h"
#include "tsr_testutil.h"

typedef struct { int bb, mb, nb; } tiling_t;

static int diagonal_owner(int bi, int i, int j, void *arg)
{
    return (bi + i + j) % *(int *)arg;
}

static double value_at(const tsr_desc_t *d, const void *buf, size_t k)
{
    if (d->dtype == TSR_BFLOAT16)
        return tsr_bf16_to_float(((const tsr_bf16_t *)buf)[k]);
    return d->dtype == TSR_FLOAT64 ? ((const double *)buf)[k] : ((const float *)buf)[k];
}

/* v as d's element type stores it. */
static double stored(const tsr_desc_t *d, double v)
{
    if (d->dtype == TSR_BFLOAT16)
        return tsr_bf16_to_float(tsr_float_to_bf16((float)v));
    return d->dtype == TSR_FLOAT32 ? (float)v : v;
}

/* float <-> bf16: round to nearest even, NaN kept, overflow to infinity. */
static void check_bf16_conversion(void)
{
    CHECK(tsr_float_to_bf16(1.0f) == 0x3f80 && tsr_bf16_to_float(0x3f80) == 1.0f);
    CHECK(tsr_float_to_bf16(-2.0f) == 0xc000);
    /* 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties to the even 1 */
    CHECK(tsr_float_to_bf16(1.0f + 0x1p-8f) == 0x3f80);
    /* 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up */
    CHECK(tsr_float_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82);
    CHECK(tsr_float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 0x3f81); /* above half: up */
    CHECK(isnan(tsr_bf16_to_float(tsr_float_to_bf16(NAN))));
    CHECK(isnan(tsr_bf16_to_float(tsr_float_to_bf16(-NAN))) && (tsr_float_to_bf16(-NAN) & 0x8000));
    float nan_low; /* a NaN with only low mantissa bits: truncation would give infinity */
    uint32_t bits = 0x7f800001u;
    memcpy(&nan_low, &bits, sizeof nan_low);
    CHECK(isnan(tsr_bf16_to_float(tsr_float_to_bf16(nan_low))));
    CHECK(isinf(tsr_bf16_to_float(tsr_float_to_bf16(INFINITY))));
    CHECK(isinf(tsr_bf16_to_float(tsr_float_to_bf16(3.4e38f)))); /* past bf16's largest, 3.39e38 */
    CHECK(tsr_bf16_to_float(tsr_float_to_bf16(1e-40f)) != 0.0f); /* subnormals are kept */
    CHECK(tsr_dtype_size(TSR_BFLOAT16) == 2 && strcmp(tsr_dtype_name(TSR_BFLOAT16), "bf16") == 0);
}

static void *alloc_full(const tsr_desc_t *d, int lda)
{
    return calloc((size_t)d->b * lda * d->n, d->elsize);
}

/* Gathered random fill equals tsr_random_value element by element. */
static void check_fill(tsr_desc_t *d, int seed)
{
    CHECK_RC(tsr_desc_fill_random(d, seed), TSR_SUCCESS);
    void *buf = tsr_rank() == 0 ? alloc_full(d, d->m) : NULL;
    CHECK_RC(tsr_desc_gather(d, buf, d->m, 0), TSR_SUCCESS);
    if (tsr_rank() == 0) {
        int bad = 0;
        size_t k = 0;
        for (int z = 0; z < d->b; z++)
            for (int c = 0; c < d->n; c++)
                for (int r = 0; r < d->m; r++, k++) {
                    double want = stored(d, tsr_random_value(seed, z, r, c));
                    bad += value_at(d, buf, k) != want;
                }
        CHECK(bad == 0);
    }
    free(buf);
}

/* Scatter from the last rank with a padded lda, gather on rank 0: same values. */
static void check_round_trip(tsr_desc_t *d)
{
    int root = tsr_size() - 1, lda = d->m + 3;
    void *src = NULL, *back = NULL;
    if (tsr_rank() == root) {
        src = alloc_full(d, lda);
        size_t n = (size_t)d->b * lda * d->n;
        for (size_t k = 0; k < n; k++) {
            if (d->dtype == TSR_FLOAT64)
                ((double *)src)[k] = (double)k + 0.25;
            else if (d->dtype == TSR_BFLOAT16)
                ((tsr_bf16_t *)src)[k] = tsr_float_to_bf16((float)(k % 100000) + 0.25f);
            else
                ((float *)src)[k] = (float)(k % 100000) + 0.25f;
        }
    }
    CHECK_RC(tsr_desc_scatter(d, src, lda, root), TSR_SUCCESS);
    if (tsr_rank() == 0)
        back = alloc_full(d, lda);
    CHECK_RC(tsr_desc_gather(d, back, lda, 0), TSR_SUCCESS);
    /* compare on rank 0 against the same formula (root may be another rank) */
    if (tsr_rank() == 0) {
        int bad = 0;
        for (int z = 0; z < d->b; z++)
            for (int c = 0; c < d->n; c++)
                for (int r = 0; r < d->m; r++) {
                    size_t k = ((size_t)z * d->n + c) * lda + r;
                    double want = d->dtype == TSR_FLOAT64 ? (double)k + 0.25 : stored(d, (float)(k % 100000) + 0.25f);
                    bad += value_at(d, back, k) != want;
                }
        CHECK(bad == 0);
    }
    free(src);
    free(back);
}

static void check_norms(tsr_desc_t *d, int seed)
{
    CHECK_RC(tsr_desc_fill_random(d, seed), TSR_SUCCESS);
    double nmax = -1, nfro = -1, want_max = 0, want_sq = 0;
    CHECK_RC(tsr_desc_norm(d, TSR_NORM_MAX, &nmax), TSR_SUCCESS);
    CHECK_RC(tsr_desc_norm(d, TSR_NORM_FRO, &nfro), TSR_SUCCESS);
    for (int z = 0; z < d->b; z++)
        for (int c = 0; c < d->n; c++)
            for (int r = 0; r < d->m; r++) {
                double v = stored(d, tsr_random_value(seed, z, r, c));
                want_max = fmax(want_max, fabs(v));
                want_sq += v * v;
            }
    CHECK(nmax == want_max);
    CHECK(fabs(nfro - sqrt(want_sq)) <= 1e-12 * sqrt(want_sq));
}

/* tsr_desc_sum: each tile's elements in storage order, then the tiles in
 * order; recomputed here from the generator alone, so equality (bitwise)
 * shows the result does not depend on the grid or on the rank. */
static void check_sum(tsr_desc_t *d, int seed)
{
    CHECK_RC(tsr_desc_fill_random(d, seed), TSR_SUCCESS);
    double sum = NAN, want = 0;
    CHECK_RC(tsr_desc_sum(d, &sum), TSR_SUCCESS);
    for (int bi = 0; bi < d->bt; bi++)
        for (int i = 0; i < d->mt; i++)
            for (int j = 0; j < d->nt; j++) {
                double tile = 0;
                for (int z = bi * d->bb; z < d->b && z < (bi + 1) * d->bb; z++)
                    for (int c = j * d->nb; c < d->n && c < (j + 1) * d->nb; c++)
                        for (int r = i * d->mb; r < d->m && r < (i + 1) * d->mb; r++)
                            tile += stored(d, tsr_random_value(seed, z, r, c));
                want += tile;
            }
    CHECK(sum == want);
}

/* Only owned tiles get storage; the owner is what the distribution says. */
static void check_lazy_storage(tsr_desc_t *d)
{
    int bad = 0;
    for (int bi = 0; bi < d->bt; bi++)
        for (int i = 0; i < d->mt; i++)
            for (int j = 0; j < d->nt; j++) {
                int t = (bi * d->mt + i) * d->nt + j;
                int local = tsr_tile_is_local(d, bi, i, j);
                bad += local ? d->storage[t] == NULL : d->storage[t] != NULL;
            }
    CHECK(bad == 0);
}

/* An invalidated descriptor takes new values: invalidate, write, read back. */
static void check_invalidate(tsr_desc_t *d)
{
    CHECK_RC(tsr_desc_fill_random(d, 5), TSR_SUCCESS);
    tsr_desc_invalidate(d);
    check_round_trip(d);
    tsr_desc_invalidate(d);
    check_fill(d, 9);
}

/* Received copies kept for reads (tsr_desc_keep_received) never go stale:
 * C (rank 1) = A (rank 0) I, three times; between the products A is
 * rewritten on its owner by a task (A = 2 X I, which drops the other
 * rank's copy) and then by a scatter (which drops it too). */
static tsr_desc_t *small(int rank, const double *values)
{
    tsr_dist_t on = tsr_dist_single(rank);
    tsr_desc_t *d = NULL;
    CHECK_RC(tsr_desc_create_2d(&d, TSR_FLOAT64, 4, 4, 4, 4, &on), TSR_SUCCESS);
    if (d)
        CHECK_RC(tsr_desc_scatter(d, values, 4, 0), TSR_SUCCESS);
    return d;
}

static void check_keep_received(void)
{
    double a[16], id[16] = { 0 }, c[16], scale[3] = { 1, 2, 10 };
    for (int k = 0; k < 16; k++)
        a[k] = k + 1;
    for (int k = 0; k < 4; k++)
        id[k * 5] = 1;
    tsr_desc_t *A = small(0, a), *X = small(0, a), *I = small(1, id), *C = small(1, id);
    if (!A || !X || !I || !C)
        return;
    tsr_desc_keep_received(A, 1);
    for (int round = 0; round < 3; round++) {
        if (round == 1) /* a task on rank 0 rewrites A */
            CHECK_RC(tsr_gemm(TSR_NOTRANS, TSR_NOTRANS, 2.0, X, I, 0.0, A, TSR_REDUCTION_ORDERED), TSR_SUCCESS);
        if (round == 2) { /* a scatter rewrites A */
            double b[16];
            for (int k = 0; k < 16; k++)
                b[k] = 10 * a[k];
            CHECK_RC(tsr_desc_scatter(A, b, 4, 0), TSR_SUCCESS);
        }
        CHECK_RC(tsr_gemm(TSR_NOTRANS, TSR_NOTRANS, 1.0, A, I, 0.0, C, TSR_REDUCTION_ORDERED), TSR_SUCCESS);
        CHECK_RC(tsr_desc_gather(C, c, 4, 0), TSR_SUCCESS);
        int bad = 0;
        for (int k = 0; tsr_rank() == 0 && k < 16; k++)
            bad += c[k] != scale[round] * a[k];
        CHECK(bad == 0);
    }
    tsr_desc_destroy(A);
    tsr_desc_destroy(X);
    tsr_desc_destroy(I);
    tsr_desc_destroy(C);
}

/* Gates in a batch (tsr_desc_fetch_batch_begin/end: one gate task for A
 * and B) and tasks on a rank's own tiles (inserted without StarPU-MPI):
 * A and B on rank 0 are read on rank 1 (C = A I, D = B I) after the gate;
 * A, kept received there, is then rewritten by a task on rank 0's own
 * tiles (A = 2 X J), and rank 1 reads the new value: the send of the old
 * one is forgotten (else rank 1 would wait for a copy never sent). */
static void check_fetch_batch(void)
{
    double a[16], id[16] = { 0 }, c[16], d[16];
    for (int k = 0; k < 16; k++)
        a[k] = k + 1;
    for (int k = 0; k < 4; k++)
        id[k * 5] = 1;
    tsr_desc_t *A = small(0, a), *B = small(0, a), *X = small(0, a), *J = small(0, id), *I = small(1, id),
               *C = small(1, id), *D = small(1, id), *G = NULL;
    tsr_dist_t row = tsr_dist_block_cyclic(1, tsr_size()); /* a gate tile on every rank */
    CHECK_RC(tsr_desc_create_2d(&G, TSR_FLOAT64, 4, 4 * tsr_size(), 4, 4, &row), TSR_SUCCESS);
    double *zeros = calloc((size_t)16 * tsr_size(), sizeof *zeros);
    if (G && zeros)
        CHECK_RC(tsr_desc_scatter(G, zeros, 4, 0), TSR_SUCCESS);
    free(zeros);
    if (!A || !B || !X || !J || !I || !C || !D || !G)
        return;
    tsr_desc_keep_received(A, 1);
    for (int round = 0; round < 2; round++) {
        if (round == 1)
            CHECK_RC(tsr_gemm(TSR_NOTRANS, TSR_NOTRANS, 2.0, X, J, 0.0, A, TSR_REDUCTION_ORDERED), TSR_SUCCESS);
        tsr_desc_fetch_batch_begin();
        CHECK_RC(tsr_desc_fetch_after(A, G), TSR_SUCCESS);
        CHECK_RC(tsr_desc_fetch_after(B, G), TSR_SUCCESS);
        CHECK_RC(tsr_desc_fetch_batch_end(), TSR_SUCCESS);
        CHECK_RC(tsr_gemm(TSR_NOTRANS, TSR_NOTRANS, 1.0, A, I, 0.0, C, TSR_REDUCTION_ORDERED), TSR_SUCCESS);
        CHECK_RC(tsr_gemm(TSR_NOTRANS, TSR_NOTRANS, 1.0, B, I, 0.0, D, TSR_REDUCTION_ORDERED), TSR_SUCCESS);
        CHECK_RC(tsr_desc_gather(C, c, 4, 0), TSR_SUCCESS);
        CHECK_RC(tsr_desc_gather(D, d, 4, 0), TSR_SUCCESS);
        int bad = 0;
        for (int k = 0; tsr_rank() == 0 && k < 16; k++)
            bad += c[k] != (1.0 + round) * a[k] || d[k] != a[k];
        CHECK(bad == 0);
    }
    tsr_desc_t *all[] = { A, B, X, J, I, C, D, G };
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        tsr_desc_destroy(all[k]);
}

/* An alloc-on-write descriptor (tsr_desc_alloc_on_write) holds memory from
 * a task's write to its invalidation, and refuses scatter and gather:
 * A = X I, C = A I read back, A invalidated (its memory goes back), and
 * written and read again. */
static void check_alloc_on_write(void)
{
    double a[16], id[16] = { 0 }, c[16];
    for (int k = 0; k < 16; k++)
        a[k] = k + 1;
    for (int k = 0; k < 4; k++)
        id[k * 5] = 1;
    tsr_desc_t *X = small(0, a), *I = small(0, id), *C = small(0, id), *A = NULL;
    tsr_dist_t on0 = tsr_dist_single(0);
    CHECK_RC(tsr_desc_create_2d(&A, TSR_FLOAT64, 4, 4, 4, 4, &on0), TSR_SUCCESS);
    if (!A || !X || !I || !C)
        return;
    tsr_desc_alloc_on_write(A);
    CHECK_RC(tsr_desc_scatter(A, a, 4, 0), TSR_EINVAL);
    CHECK_RC(tsr_desc_gather(A, c, 4, 0), TSR_EINVAL);
    double whole = tsr_rank() == 0 ? 16 * sizeof(double) : 0;
    for (int round = 0; round < 2; round++) {
        CHECK_RC(tsr_gemm(TSR_NOTRANS, TSR_NOTRANS, 1.0 + round, X, I, 0.0, A, TSR_REDUCTION_ORDERED), TSR_SUCCESS);
        CHECK_RC(tsr_gemm(TSR_NOTRANS, TSR_NOTRANS, 1.0, A, I, 0.0, C, TSR_REDUCTION_ORDERED), TSR_SUCCESS);
        CHECK_RC(tsr_desc_gather(C, c, 4, 0), TSR_SUCCESS);
        int bad = 0;
        for (int k = 0; tsr_rank() == 0 && k < 16; k++)
            bad += c[k] != (1.0 + round) * a[k];
        CHECK(bad == 0);
        CHECK(tsr_desc_resident_bytes(A, 1) == whole);
        tsr_desc_invalidate(A);
        CHECK_RC(tsr_wait(), TSR_SUCCESS);
        CHECK(tsr_desc_resident_bytes(A, 1) == 0);
    }
    tsr_desc_destroy(A);
    tsr_desc_destroy(X);
    tsr_desc_destroy(I);
    tsr_desc_destroy(C);
}

/* tsr_desc_view: tiles [1, 3) x [4, 6) of a random 37 x 29 float32 matrix
 * in 8 x 5 tiles spread over the ranks (its last tile column 4 wide): the
 * view's shape, owners and handles are the parent's, its gathered values
 * the parent's block; bad ranges and a view of a view are refused; the
 * parent outlives the view. */
static void check_view(const tsr_dist_t *dist)
{
    enum { M = 37, N = 29, MB = 8, NB = 5, R0 = MB, C0 = 4 * NB, VM = 2 * MB, VN = N - C0 };
    tsr_desc_t *A = NULL, *V = NULL, *W = NULL;
    CHECK_RC(tsr_desc_create_2d(&A, TSR_FLOAT32, M, N, MB, NB, dist), TSR_SUCCESS);
    if (!A)
        return;
    CHECK_RC(tsr_desc_fill_random(A, 7), TSR_SUCCESS);
    CHECK_RC(tsr_desc_view(&V, A, 1, 2, 4, 2), TSR_SUCCESS);
    if (!V) {
        tsr_desc_destroy(A);
        return;
    }
    CHECK(V->m == VM && V->n == VN && V->mt == 2 && V->nt == 2 && tsr_tile_cols(V, 1) == N - 5 * NB);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            CHECK(tsr_tile_owner(V, 0, i, j) == tsr_tile_owner(A, 0, 1 + i, 4 + j) &&
                  tsr_tile_handle(V, 0, i, j) == tsr_tile_handle(A, 0, 1 + i, 4 + j));
    float a[M * N], v[VM * VN];
    CHECK_RC(tsr_desc_gather(A, a, M, 0), TSR_SUCCESS);
    CHECK_RC(tsr_desc_gather(V, v, VM, 0), TSR_SUCCESS);
    int bad = 0;
    for (int c = 0; tsr_rank() == 0 && c < VN; c++)
        for (int r = 0; r < VM; r++)
            bad += v[c * VM + r] != a[(C0 + c) * M + R0 + r];
    CHECK(bad == 0);
    CHECK_RC(tsr_desc_view(&W, A, 4, 2, 0, 1), TSR_EINVAL);
    CHECK_RC(tsr_desc_view(&W, A, 0, 1, -1, 1), TSR_EINVAL);
    CHECK_RC(tsr_desc_view(&W, A, 0, 0, 0, 1), TSR_EINVAL);
    CHECK_RC(tsr_desc_view(&W, V, 0, 1, 0, 1), TSR_EINVAL);
    CHECK(W == NULL);
    tsr_desc_destroy(V);
    CHECK_RC(tsr_desc_gather(A, a, M, 0), TSR_SUCCESS);
    tsr_desc_destroy(A);
}

/* tsr_desc_write_local / tsr_desc_read_local on a float32 37 x 29 matrix
 * (tiles 8 x 5): every rank writes the same block across tile edges into
 * the tiles it owns; the gathered matrix holds the block over the random
 * fill, and every rank's tiles, read locally, hold the same. */
#define LOCAL_R0 3
#define LOCAL_C0 4
#define LOCAL_ROWS 20
#define LOCAL_COLS 17
static float local_want(int r, int c)
{
    int in = r >= LOCAL_R0 && r < LOCAL_R0 + LOCAL_ROWS && c >= LOCAL_C0 && c < LOCAL_C0 + LOCAL_COLS;
    return in ? 1000.0f + (float)((c - LOCAL_C0) * LOCAL_ROWS + r - LOCAL_R0) : (float)tsr_random_value(3, 0, r, c);
}

static int check_local_tile(const tsr_desc_t *d, int bi, int i, int j, const void *tile, void *arg)
{
    const float *t = tile;
    long *counts = arg; /* elements visited, elements wrong */
    (void)bi;
    for (int c = 0; c < tsr_tile_cols(d, j); c++)
        for (int r = 0; r < tsr_tile_rows(d, i); r++, counts[0]++)
            counts[1] += *t++ != local_want(i * d->mb + r, j * d->nb + c);
    return 0;
}

static void check_local_access(const tsr_dist_t *dist)
{
    tsr_desc_t *d = NULL;
    CHECK_RC(tsr_desc_create_2d(&d, TSR_FLOAT32, 37, 29, 8, 5, dist), TSR_SUCCESS);
    if (!d)
        return;
    CHECK_RC(tsr_desc_fill_random(d, 3), TSR_SUCCESS);
    float block[LOCAL_ROWS * LOCAL_COLS], *all = tsr_rank() == 0 ? malloc(37 * 29 * sizeof(float)) : NULL;
    for (int k = 0; k < LOCAL_ROWS * LOCAL_COLS; k++)
        block[k] = 1000.0f + (float)k;
    CHECK_RC(tsr_desc_write_local(d, LOCAL_R0, LOCAL_C0, LOCAL_ROWS, LOCAL_COLS, block, LOCAL_ROWS), TSR_SUCCESS);
    CHECK_RC(tsr_desc_write_local(d, 30, 0, 8, 1, block, 8), TSR_EINVAL); /* rows 30..37: past the edge */
    long counts[2] = { 0, 0 }, *every = calloc(2 * (size_t)tsr_size(), sizeof *every);
    CHECK_RC(tsr_desc_read_local(d, check_local_tile, counts), TSR_SUCCESS);
    CHECK(counts[1] == 0);
    CHECK_RC(tsr_allgather(counts, every, sizeof counts), TSR_SUCCESS);
    long total = 0;
    for (int r = 0; r < tsr_size(); r++)
        total += every[2 * r];
    CHECK(total == 37 * 29); /* every tile visited once, by its owner */
    CHECK_RC(tsr_desc_gather(d, all, 37, 0), TSR_SUCCESS);
    int bad = 0;
    for (int k = 0; all && k < 37 * 29; k++)
        bad += all[k] != local_want(k % 37, k / 37);
    CHECK(bad == 0);
    free(all);
    free(every);
    tsr_desc_destroy(d);
}

static void check_descriptor(tsr_dtype_t dtype, tiling_t t, const tsr_dist_t *dist)
{
    tsr_desc_t *d = NULL;
    CHECK_RC(tsr_desc_create(&d, dtype, 3, 37, 29, t.bb, t.mb, t.nb, dist), TSR_SUCCESS);
    if (!d)
        return;
    CHECK(d->bt == (3 + t.bb - 1) / t.bb && d->mt == (37 + t.mb - 1) / t.mb && d->nt == (29 + t.nb - 1) / t.nb);
    check_fill(d, 7);
    check_lazy_storage(d);
    check_round_trip(d);
    check_norms(d, 11);
    check_sum(d, 13);
    check_invalidate(d);
    CHECK_RC(tsr_desc_destroy(d), TSR_SUCCESS);
}

int main(int argc, char **argv)
{
    if (tsr_test_init_one_worker(&argc, &argv) != 0)
        return 2;
    int size = tsr_size();
    check_bf16_conversion();
    tiling_t tilings[] = { { 1, 1, 1 }, { 2, 8, 5 }, { 3, 37, 29 }, { 1, 16, 64 } };
    for (int dt = 0; dt < TSR_NDTYPES; dt++)
        for (size_t t = 0; t < sizeof tilings / sizeof tilings[0]; t++) {
            for (int P = 1; P <= size; P++) {
                if (size % P)
                    continue;
                tsr_dist_t grid = tsr_dist_block_cyclic(P, size / P);
                check_descriptor(dt, tilings[t], &grid);
            }
            tsr_dist_t single = tsr_dist_single(size - 1);
            check_descriptor(dt, tilings[t], &single);
            tsr_dist_t custom = tsr_dist_custom(diagonal_owner, &size);
            check_descriptor(dt, tilings[t], &custom);
        }
    for (int P = 1; P <= size; P++) {
        tsr_dist_t grid = tsr_dist_block_cyclic(P, size / P);
        if (size % P == 0)
            check_local_access(&grid);
    }
    tsr_dist_t custom = tsr_dist_custom(diagonal_owner, &size);
    check_local_access(&custom);
    check_view(&custom);
    if (size >= 2) {
        check_keep_received();
        check_fetch_batch();
    }
    check_alloc_on_write();
    /* the block-cyclic formula itself */
    if (size >= 4) {
        tsr_desc_t *d = NULL;
        tsr_dist_t g = tsr_dist_block_cyclic(2, 2);
        CHECK_RC(tsr_desc_create(&d, TSR_FLOAT32, 4, 4, 4, 1, 1, 1, &g), TSR_SUCCESS);
        CHECK(tsr_tile_owner(d, 0, 1, 0) == 2 && tsr_tile_owner(d, 0, 1, 1) == 3 && tsr_tile_owner(d, 1, 1, 1) == 0);
        tsr_desc_destroy(d);
    }
    return tsr_test_finish("test_desc");
}
