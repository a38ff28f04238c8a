/* Flash-style causal attention over tiles: one task per (head tile, query
 * tile, key tile) pair that has a visible key; see tsr_attention.h. */
#include "tsr_attention.h"
#include "tsr_runtime.h"
#include "tsr_runtime_attention.h"

/* How an operand is tiled along the tokens. */
enum { ROLE_QUERY, ROLE_KEY, ROLE_STATS };

typedef struct {
    tsr_desc_t *d;
    const char *name;
    int role;
    int written;
} operand_t;

static int same_grid(const tsr_desc_t *X, const tsr_desc_t *Y)
{
    if (X->dist.kind != TSR_DIST_BLOCK_CYCLIC || Y->dist.kind != TSR_DIST_BLOCK_CYCLIC)
        return 1;
    return X->dist.P == Y->dist.P && X->dist.Q == Y->dist.Q;
}

static int check_present(const char *fn, const operand_t *ops, int n)
{
    for (int i = 0; i < n; i++)
        if (!ops[i].d) {
            tsr_log(TSR_LOG_ERROR, "%s: %s is NULL", fn, ops[i].name);
            return TSR_EINVAL;
        }
    return tsr_initialized() ? TSR_SUCCESS : TSR_ENOTINIT;
}

/* A written descriptor may not be any other operand (a task cannot read and
 * write the same tile through two buffers). */
static int check_aliases(const char *fn, const operand_t *ops, int n)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (ops[i].d == ops[j].d && (ops[i].written || ops[j].written)) {
                tsr_log(TSR_LOG_ERROR, "%s: %s and %s are the same descriptor", fn, ops[j].name, ops[i].name);
                return TSR_EINVAL;
            }
    return TSR_SUCCESS;
}

/* ops[0] is Q (reference of the shape and of query tiles), ops[1] is K
 * (reference of key tiles). */
static int check_layout(const char *fn, const operand_t *ops, int n)
{
    const tsr_desc_t *Q = ops[0].d, *K = ops[1].d;
    for (int i = 0; i < n; i++)
        if (ops[i].d->dtype != TSR_FLOAT32) {
            tsr_log(TSR_LOG_ERROR, "%s: %s is %s, attention needs float32", fn, ops[i].name,
                    tsr_dtype_name(ops[i].d->dtype));
            return TSR_EDTYPE;
        }
    for (int i = 0; i < n; i++) {
        const tsr_desc_t *d = ops[i].d;
        int m = ops[i].role == ROLE_STATS ? 2 : Q->m;
        if (d->b != Q->b || d->m != m || d->n != Q->n) {
            tsr_log(TSR_LOG_ERROR, "%s: %s is %d x %d x %d, expected %d x %d x %d (heads x %s x tokens)", fn,
                    ops[i].name, d->b, d->m, d->n, Q->b, m, Q->n, ops[i].role == ROLE_STATS ? "2" : "hd");
            return TSR_ESHAPE;
        }
    }
    for (int i = 0; i < n; i++) {
        const tsr_desc_t *d = ops[i].d, *ref = ops[i].role == ROLE_KEY ? K : Q;
        if (d->bb != Q->bb || d->mb < d->m || d->nb != ref->nb) {
            tsr_log(TSR_LOG_ERROR, "%s: %s has tiles %d x %d x %d; needs %d heads per tile (as %s), all %d rows in "
                    "one tile and %d tokens per tile (as %s)", fn, ops[i].name, d->bb, d->mb, d->nb, Q->bb,
                    ops[0].name, d->m, ref->nb, ref == K ? ops[1].name : ops[0].name);
            return TSR_ETILE;
        }
    }
    for (int i = 1; i < n; i++)
        if (!same_grid(ops[i].d, Q)) {
            tsr_log(TSR_LOG_ERROR, "%s: %s and %s are not on the same process grid", fn, ops[0].name, ops[i].name);
            return TSR_EDIST;
        }
    return TSR_SUCCESS;
}

static int check_operands(const char *fn, const operand_t *ops, int n)
{
    int rc = check_present(fn, ops, n);
    if (!rc)
        rc = check_aliases(fn, ops, n);
    if (!rc)
        rc = check_layout(fn, ops, n);
    return rc;
}

/* Index of the last key tile that query tile qi sees. */
static int last_key_tile(const tsr_desc_t *Q, const tsr_desc_t *K, int qi)
{
    int last_query = qi * Q->nb + tsr_tile_cols(Q, qi) - 1;
    return last_query / K->nb;
}

/* Index of the first query tile that sees key tile kj. */
static int first_query_tile(const tsr_desc_t *Q, const tsr_desc_t *K, int kj)
{
    return kj * K->nb / Q->nb;
}

static tsr_attn_pos_t pair_pos(const tsr_desc_t *Q, const tsr_desc_t *K, int qi, int kj)
{
    tsr_attn_pos_t pos = { qi * Q->nb, kj * K->nb };
    return pos;
}

int tsr_attention_forward(tsr_desc_t *Q, tsr_desc_t *K, tsr_desc_t *V, tsr_desc_t *out, tsr_desc_t *stats)
{
    const operand_t ops[] = {
        { Q, "Q", ROLE_QUERY, 0 }, { K, "K", ROLE_KEY, 0 }, { V, "V", ROLE_KEY, 0 },
        { out, "out", ROLE_QUERY, 1 }, { stats, "stats", ROLE_STATS, 1 },
    };
    int rc = check_operands("tsr_attention_forward", ops, 5);
    if (rc)
        return rc;
    for (int bi = 0; bi < Q->bt; bi++)
        for (int qi = 0; qi < Q->nt; qi++)
            for (int kj = 0; kj <= last_key_tile(Q, K, qi); kj++) {
                rc = tsr_insert_attention_fwd(tsr_tile(Q, bi, 0, qi), tsr_tile(K, bi, 0, kj), tsr_tile(V, bi, 0, kj),
                                              tsr_tile(out, bi, 0, qi), tsr_tile(stats, bi, 0, qi),
                                              pair_pos(Q, K, qi, kj), kj == 0 ? STARPU_W : STARPU_RW);
                if (rc)
                    return rc;
            }
    tsr_desc_flush(Q);
    tsr_desc_flush(K);
    tsr_desc_flush(V);
    return TSR_SUCCESS;
}

/* REDUX: give every tile of X the reduction methods; overwrite: zero it on
 * its owner; under MPI every other rank starts its partial sum at zero. */
static int redux_prepare(tsr_desc_t *X, int accumulate)
{
    for (int bi = 0; bi < X->bt; bi++)
        for (int j = 0; j < X->nt; j++) {
            int rc = tsr_redux_start(tsr_tile(X, bi, 0, j), accumulate ? 1.0 : 0.0, NULL);
            if (rc)
                return rc;
        }
    return TSR_SUCCESS;
}

typedef struct {
    tsr_desc_t *Q, *K, *V, *dout, *stats, *dQ, *dK, *dV;
} bwd_operands_t;

/* The tasks of one head tile: query tiles in order and, inside, key tiles in
 * order, so the ordered chains of dQ (over key tiles) and of dK, dV (over
 * query tiles) both start with their first contribution. */
static int backward_head_tile(const bwd_operands_t *o, int bi, int accumulate, tsr_accum_t accum)
{
    for (int qi = 0; qi < o->Q->nt; qi++)
        for (int kj = 0; kj <= last_key_tile(o->Q, o->K, qi); kj++) {
            enum starpu_data_access_mode qmode = STARPU_REDUX, kvmode = STARPU_REDUX;
            if (accum == TSR_ACCUM_ORDERED) {
                qmode = kj == 0 && !accumulate ? STARPU_W : STARPU_RW;
                kvmode = qi == first_query_tile(o->Q, o->K, kj) && !accumulate ? STARPU_W : STARPU_RW;
            }
            int rc = tsr_insert_attention_bwd(tsr_tile(o->Q, bi, 0, qi), tsr_tile(o->K, bi, 0, kj),
                                              tsr_tile(o->V, bi, 0, kj), tsr_tile(o->dout, bi, 0, qi),
                                              tsr_tile(o->stats, bi, 0, qi), tsr_tile(o->dQ, bi, 0, qi),
                                              tsr_tile(o->dK, bi, 0, kj), tsr_tile(o->dV, bi, 0, kj),
                                              pair_pos(o->Q, o->K, qi, kj), qmode, kvmode, -1);
            if (rc)
                return rc;
        }
    return TSR_SUCCESS;
}

int tsr_attention_backward(tsr_desc_t *Q, tsr_desc_t *K, tsr_desc_t *V, tsr_desc_t *out, tsr_desc_t *dout,
                           tsr_desc_t *stats, tsr_desc_t *dQ, tsr_desc_t *dK, tsr_desc_t *dV, int accumulate,
                           tsr_accum_t accum)
{
    const char *fn = "tsr_attention_backward";
    const operand_t ops[] = {
        { Q, "Q", ROLE_QUERY, 0 }, { K, "K", ROLE_KEY, 0 }, { V, "V", ROLE_KEY, 0 },
        { out, "out", ROLE_QUERY, 0 }, { dout, "dout", ROLE_QUERY, 0 }, { stats, "stats", ROLE_STATS, 1 },
        { dQ, "dQ", ROLE_QUERY, 1 }, { dK, "dK", ROLE_KEY, 1 }, { dV, "dV", ROLE_KEY, 1 },
    };
    int rc = check_present(fn, ops, 9);
    if (rc)
        return rc;
    if ((accumulate != 0 && accumulate != 1) || (accum != TSR_ACCUM_ORDERED && accum != TSR_ACCUM_REDUX)) {
        tsr_log(TSR_LOG_ERROR, "%s: bad accumulate (%d, expected 0 or 1) or accumulation mode (%d)", fn, accumulate,
                (int)accum);
        return TSR_EINVAL;
    }
    if ((rc = check_operands(fn, ops, 9)) != 0)
        return rc;
    for (int bi = 0; bi < Q->bt && !rc; bi++)
        for (int qi = 0; qi < Q->nt && !rc; qi++)
            rc = tsr_insert_attention_bwd_prep(tsr_tile(out, bi, 0, qi), tsr_tile(dout, bi, 0, qi),
                                               tsr_tile(stats, bi, 0, qi));
    if (!rc && accum == TSR_ACCUM_REDUX && !(rc = redux_prepare(dQ, accumulate)) &&
        !(rc = redux_prepare(dK, accumulate)))
        rc = redux_prepare(dV, accumulate);
    const bwd_operands_t o = { Q, K, V, dout, stats, dQ, dK, dV };
    for (int bi = 0; bi < Q->bt && !rc; bi++)
        rc = backward_head_tile(&o, bi, accumulate, accum);
    if (rc)
        return rc;
    if (accum == TSR_ACCUM_REDUX && tsr_size() > 1) {
        tsr_redux_finish(dQ);
        tsr_redux_finish(dK);
        tsr_redux_finish(dV);
    }
    tsr_desc_flush(Q);
    tsr_desc_flush(K);
    tsr_desc_flush(V);
    tsr_desc_flush(out);
    tsr_desc_flush(dout);
    tsr_desc_flush(stats);
    return TSR_SUCCESS;
}
