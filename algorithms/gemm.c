/* Tiled GEMM: C = alpha op(A) op(B) + beta C. */
#include "tsr_algorithms.h"
#include "tsr_runtime.h"

/* Rows/cols (and tile sizes) of op(X). */
static int op_rows(const tsr_desc_t *X, tsr_trans_t t) { return t == TSR_TRANS ? X->n : X->m; }
static int op_cols(const tsr_desc_t *X, tsr_trans_t t) { return t == TSR_TRANS ? X->m : X->n; }
static int op_rows_tile(const tsr_desc_t *X, tsr_trans_t t) { return t == TSR_TRANS ? X->nb : X->mb; }
static int op_cols_tile(const tsr_desc_t *X, tsr_trans_t t) { return t == TSR_TRANS ? X->mb : X->nb; }

static int same_grid(const tsr_desc_t *X, const tsr_desc_t *Y)
{
    if (X->dist.kind != TSR_DIST_BLOCK_CYCLIC || Y->dist.kind != TSR_DIST_BLOCK_CYCLIC)
        return 1;
    return X->dist.P == Y->dist.P && X->dist.Q == Y->dist.Q;
}

static int check_gemm(tsr_trans_t ta, tsr_trans_t tb, const tsr_desc_t *A, const tsr_desc_t *B,
                      const tsr_desc_t *C, tsr_accum_t accum)
{
    if (!A || !B || !C)
        return TSR_EINVAL;
    if (!tsr_initialized())
        return TSR_ENOTINIT;
    /* C's tiles are written while A's or B's are still to be read */
    if (C == A || C == B) {
        tsr_log(TSR_LOG_ERROR, "tsr_gemm: C and %s are the same descriptor: the output cannot also be an input",
                C == A ? "A" : "B");
        return TSR_EINVAL;
    }
    if ((ta != TSR_NOTRANS && ta != TSR_TRANS) || (tb != TSR_NOTRANS && tb != TSR_TRANS) ||
        (accum != TSR_ACCUM_ORDERED && accum != TSR_ACCUM_REDUX)) {
        tsr_log(TSR_LOG_ERROR, "tsr_gemm: bad transpose (%d, %d) or accumulation (%d)", ta, tb, accum);
        return TSR_EINVAL;
    }
    if (A->dtype != C->dtype || B->dtype != C->dtype) {
        tsr_log(TSR_LOG_ERROR, "tsr_gemm: element types differ (A %s, B %s, C %s)", tsr_dtype_name(A->dtype),
                tsr_dtype_name(B->dtype), tsr_dtype_name(C->dtype));
        return TSR_EDTYPE;
    }
    if (A->b != C->b || B->b != C->b || op_rows(A, ta) != C->m || op_cols(B, tb) != C->n ||
        op_cols(A, ta) != op_rows(B, tb)) {
        tsr_log(TSR_LOG_ERROR, "tsr_gemm: shapes do not match: op(A) %d x %d x %d, op(B) %d x %d x %d, C %d x %d x %d",
                A->b, op_rows(A, ta), op_cols(A, ta), B->b, op_rows(B, tb), op_cols(B, tb), C->b, C->m, C->n);
        return TSR_ESHAPE;
    }
    if (A->bb != C->bb || B->bb != C->bb || op_rows_tile(A, ta) != C->mb || op_cols_tile(B, tb) != C->nb ||
        op_cols_tile(A, ta) != op_rows_tile(B, tb)) {
        tsr_log(TSR_LOG_ERROR, "tsr_gemm: tile sizes do not line up: op(A) %d x %d, op(B) %d x %d, C %d x %d",
                op_rows_tile(A, ta), op_cols_tile(A, ta), op_rows_tile(B, tb), op_cols_tile(B, tb), C->mb, C->nb);
        return TSR_ETILE;
    }
    if (!same_grid(A, C) || !same_grid(B, C)) {
        tsr_log(TSR_LOG_ERROR, "tsr_gemm: A, B and C are not on the same process grid");
        return TSR_EDIST;
    }
    return TSR_SUCCESS;
}

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
             double beta, tsr_desc_t *C, tsr_accum_t accum)
{
    int rc = check_gemm(ta, tb, A, B, C, accum);
    if (rc)
        return rc;
    int kt = ta == TSR_TRANS ? A->mt : A->nt;
    for (int bi = 0; bi < C->bt; bi++)
        for (int i = 0; i < C->mt; i++)
            for (int j = 0; j < C->nt; j++) {
                tsr_tile_t c = tsr_tile(C, bi, i, j);
                rc = accum == TSR_ACCUM_REDUX ? gemm_redux(ta, tb, alpha, A, B, beta, c, kt)
                                              : gemm_ordered(ta, tb, alpha, A, B, beta, c, kt);
                if (rc)
                    return rc;
            }
    if (accum == TSR_ACCUM_REDUX)
        tsr_redux_finish(C);
    /* inputs' remote copies are dropped so that no stale copy survives a later write */
    tsr_desc_flush(A);
    tsr_desc_flush(B);
    return TSR_SUCCESS;
}

int tsr_gemm_array(tsr_dtype_t dtype, tsr_trans_t ta, tsr_trans_t tb, int m, int n, int k,
                   double alpha, const void *A, int lda, const void *B, int ldb,
                   double beta, void *C, int ldc, int tile, tsr_accum_t accum)
{
    if (m < 1 || n < 1 || k < 1 || tile < 1)
        return TSR_EINVAL;
    if (!tsr_initialized())
        return TSR_ENOTINIT;
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
