/* Tiled GEMM: C = alpha op(A) op(B) + beta C. */
#include "tsr_algorithms.h"
#include "tsr_runtime.h"
#include "internal/tsr_operands.h"
#include "internal/tsr_sequence.h"

/* Tile (bi, row, col) of X as op(X) sees it. */
static tsr_tile_t op_tile(tsr_desc_t *X, tsr_trans_t t, int bi, int row, int col)
{
    return t == TSR_TRANS ? tsr_tile(X, bi, col, row) : tsr_tile(X, bi, row, col);
}

static int gemm_ordered(tsr_trans_t ta, tsr_trans_t tb, double alpha, tsr_desc_t *A, tsr_desc_t *B,
                        double beta, tsr_tile_t c, int kt)
{
    for (int l = 0; l < kt; l++) {
        double b = l == 0 ? beta : 1.0;
        int rc = tsr_insert_gemm(ta, tb, alpha, op_tile(A, ta, c.bi, c.i, l), op_tile(B, tb, c.bi, l, c.j), b, c,
                                 b == 0.0 ? STARPU_W : STARPU_RW, -1);
        if (rc)
            return rc;
    }
    return TSR_SUCCESS;
}

static int gemm_redux(tsr_trans_t ta, tsr_trans_t tb, double alpha, tsr_desc_t *A, tsr_desc_t *B,
                      double beta, tsr_tile_t c, int kt)
{
    /* beta C first; then the k contributions in parallel */
    int rc = tsr_redux_start(c, beta, NULL);
    for (int l = 0; l < kt && !rc; l++) {
        tsr_tile_t a = op_tile(A, ta, c.bi, c.i, l);
        rc = tsr_insert_gemm(ta, tb, alpha, a, op_tile(B, tb, c.bi, l, c.j), 1.0, c, STARPU_REDUX,
                             tsr_tile_owner(a.d, a.bi, a.i, a.j));
    }
    return rc;
}

int tsr_gemm(tsr_trans_t ta, tsr_trans_t tb, double alpha, tsr_desc_t *A, tsr_desc_t *B,
             double beta, tsr_desc_t *C, tsr_reduction_t accum)
{
    /* the dimensions of A and B that are the rows and the columns of op(A) and op(B) */
    int a_rows = ta == TSR_TRANS ? TSR_DIM_N : TSR_DIM_M, a_cols = ta == TSR_TRANS ? TSR_DIM_M : TSR_DIM_N;
    int b_rows = tb == TSR_TRANS ? TSR_DIM_N : TSR_DIM_M, b_cols = tb == TSR_TRANS ? TSR_DIM_M : TSR_DIM_N;
    tsr_operand_t ops[] = { { "A", A, TSR_OP_IN, TSR_DTYPE_FIRST, { TSR_BATCH(C) }, { TSR_BATCH(C) }, NULL },
                            { "B", B, TSR_OP_IN, TSR_DTYPE_FIRST, { TSR_BATCH(C) }, { TSR_BATCH(C) }, NULL },
                            { "C", C, TSR_OP_OUT, TSR_DTYPE_FIRST, { TSR_ANY }, { TSR_ANY }, NULL } };
    /* op(A) is C->m x k and op(B) k x C->n, in shape and in tiles */
    ops[0].shape[a_rows] = ops[0].tiles[a_rows] = (tsr_want_t)TSR_ROWS(C);
    ops[1].shape[b_rows] = ops[1].tiles[b_rows] = (tsr_want_t)TSR_OF(A, a_cols);
    ops[1].shape[b_cols] = ops[1].tiles[b_cols] = (tsr_want_t)TSR_COLS(C);
    int rc = tsr_check_operands("tsr_gemm", ops, 3);
    if (!rc && ((ta != TSR_NOTRANS && ta != TSR_TRANS) || (tb != TSR_NOTRANS && tb != TSR_TRANS))) {
        tsr_log(TSR_LOG_ERROR, "tsr_gemm: bad transpose (%d, %d)", ta, tb);
        rc = TSR_EINVAL;
    }
    rc = rc ? rc : tsr_check_accum("tsr_gemm", accum);
    if (rc)
        return rc;
    int kt = ta == TSR_TRANS ? A->mt : A->nt;
    for (int bi = 0; bi < C->bt; bi++)
        for (int i = 0; i < C->mt; i++)
            for (int j = 0; j < C->nt; j++) {
                tsr_tile_t c = tsr_tile(C, bi, i, j);
                rc = accum == TSR_REDUCTION_REDUX ? gemm_redux(ta, tb, alpha, A, B, beta, c, kt)
                                              : gemm_ordered(ta, tb, alpha, A, B, beta, c, kt);
                if (rc)
                    return rc;
            }
    if (accum == TSR_REDUCTION_REDUX)
        tsr_redux_finish(C);
    /* inputs' remote copies are dropped so that no stale copy survives a later write */
    tsr_desc_flush(A);
    tsr_desc_flush(B);
    return TSR_SUCCESS;
}

/* The scalar arguments of the array calls. */
static int check_gemm_array(const char *fn, tsr_dtype_t dtype, tsr_trans_t ta, tsr_trans_t tb, int m, int n, int k,
                            int tile, tsr_reduction_t accum)
{
    if (!tsr_initialized()) {
        tsr_log(TSR_LOG_ERROR, "%s: Tessera is not initialised (tsr_init)", fn);
        return TSR_ENOTINIT;
    }
    if (dtype != TSR_FLOAT32 && dtype != TSR_FLOAT64 && dtype != TSR_BFLOAT16) {
        tsr_log(TSR_LOG_ERROR, "%s: unknown element type %d", fn, (int)dtype);
        return TSR_EINVAL;
    }
    if (m < 1 || n < 1 || k < 1 || tile < 1) {
        const char *what = m < 1 ? "m" : n < 1 ? "n" : k < 1 ? "k" : "tile";
        tsr_log(TSR_LOG_ERROR, "%s: %s = %d: m, n, k and tile must be at least 1 (m %d, n %d, k %d, tile %d)", fn,
                what, m < 1 ? m : n < 1 ? n : k < 1 ? k : tile, m, n, k, tile);
        return TSR_EINVAL;
    }
    if ((ta != TSR_NOTRANS && ta != TSR_TRANS) || (tb != TSR_NOTRANS && tb != TSR_TRANS)) {
        tsr_log(TSR_LOG_ERROR, "%s: bad transpose (%d, %d)", fn, ta, tb);
        return TSR_EINVAL;
    }
    return tsr_check_accum(fn, accum);
}

/* A, B, C as arrays in tiles of tile x tile. */
static void gemm_arrays(tsr_array_t x[3], tsr_dtype_t dtype, tsr_trans_t ta, tsr_trans_t tb, int m, int n, int k,
                        const void *A, int lda, const void *B, int ldb, void *C, int ldc, int tile)
{
    int am = ta == TSR_TRANS ? k : m, an = ta == TSR_TRANS ? m : k;
    int bm = tb == TSR_TRANS ? n : k, bn = tb == TSR_TRANS ? k : n;
    x[0] = (tsr_array_t){ "A", dtype, 1, am, an, 1, tile, tile, lda, A, 0, NULL };
    x[1] = (tsr_array_t){ "B", dtype, 1, bm, bn, 1, tile, tile, ldb, B, 0, NULL };
    x[2] = (tsr_array_t){ "C", dtype, 1, m, n, 1, tile, tile, ldc, C, 1, NULL };
}

int tsr_gemm_array_async(tsr_sequence_t *seq, tsr_dtype_t dtype, tsr_trans_t ta, tsr_trans_t tb, int m, int n, int k,
                         double alpha, const void *A, int lda, const void *B, int ldb, double beta, void *C, int ldc,
                         int tile, tsr_reduction_t accum)
{
    const char *fn = "tsr_gemm_array_async";
    int rc = tsr_sequence_begin(seq, fn);
    if (rc)
        return rc;
    tsr_array_t x[3];
    gemm_arrays(x, dtype, ta, tb, m, n, k, A, lda, B, ldb, C, ldc, tile);
    rc = check_gemm_array(fn, dtype, ta, tb, m, n, k, tile, accum);
    rc = rc ? rc : tsr_check_arrays(fn, x, 3);
    rc = rc ? rc : tsr_sequence_views(seq, x, 3);
    rc = rc ? rc : tsr_gemm(ta, tb, alpha, x[0].desc, x[1].desc, beta, x[2].desc, accum);
    return tsr_sequence_record(seq, rc);
}

/* The copying form: the arrays (on rank 0) scattered into block-cyclic
 * descriptors over every rank, multiplied, C gathered back. */
static int gemm_array_copied(tsr_dtype_t dtype, tsr_trans_t ta, tsr_trans_t tb, int m, int n, int k,
                             double alpha, const void *A, int lda, const void *B, int ldb,
                             double beta, void *C, int ldc, int tile, tsr_reduction_t accum)
{
    int am = ta == TSR_TRANS ? k : m, an = ta == TSR_TRANS ? m : k;
    int bm = tb == TSR_TRANS ? n : k, bn = tb == TSR_TRANS ? k : n;
    tsr_desc_t *dA = NULL, *dB = NULL, *dC = NULL;
    int rc = tsr_desc_create_2d(&dA, dtype, am, an, tile, tile, NULL);
    if (!rc)
        rc = tsr_desc_create_2d(&dB, dtype, bm, bn, tile, tile, NULL);
    if (!rc)
        rc = tsr_desc_create_2d(&dC, dtype, m, n, tile, tile, NULL);
    if (!rc)
        rc = tsr_desc_scatter(dA, A, lda, 0);
    if (!rc)
        rc = tsr_desc_scatter(dB, B, ldb, 0);
    if (!rc && beta != 0.0)
        rc = tsr_desc_scatter(dC, C, ldc, 0);
    if (!rc)
        rc = tsr_gemm(ta, tb, alpha, dA, dB, beta, dC, accum);
    if (!rc)
        rc = tsr_desc_gather(dC, C, ldc, 0);
    tsr_desc_destroy(dA);
    tsr_desc_destroy(dB);
    tsr_desc_destroy(dC);
    return rc;
}

/* One process: in place, a sequence of one call. The arrays are copied
 * only where they must be: under MPI with several ranks (the tiles go to
 * other processes) and when C overlaps A or B (in place, tasks would
 * overwrite tiles still to be read). */
int tsr_gemm_array(tsr_dtype_t dtype, tsr_trans_t ta, tsr_trans_t tb, int m, int n, int k,
                   double alpha, const void *A, int lda, const void *B, int ldb,
                   double beta, void *C, int ldc, int tile, tsr_reduction_t accum)
{
    int rc = check_gemm_array("tsr_gemm_array", dtype, ta, tb, m, n, k, tile, accum);
    if (rc)
        return rc;
    tsr_array_t x[3];
    gemm_arrays(x, dtype, ta, tb, m, n, k, A, lda, B, ldb, C, ldc, tile);
    if (tsr_size() > 1 || (C && (tsr_arrays_overlap(&x[2], &x[0]) || tsr_arrays_overlap(&x[2], &x[1]))))
        return gemm_array_copied(dtype, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, tile, accum);
    rc = tsr_check_arrays("tsr_gemm_array", x, 3);
    tsr_sequence_t *seq = NULL;
    rc = rc ? rc : tsr_sequence_create(&seq);
    rc = rc ? rc : tsr_gemm_array_async(seq, dtype, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, tile, accum);
    int wait_rc = tsr_sequence_destroy(seq);
    return rc ? rc : wait_rc;
}
