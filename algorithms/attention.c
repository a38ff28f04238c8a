/* Flash-style causal attention over tiles: one task per (head tile, query
 * tile, key tile) pair that has a visible key; see tsr_attention.h. */
#include "tsr_attention.h"
#include "tsr_runtime.h"
#include "tsr_runtime_attention.h"
#include "internal/tsr_operands.h"
#include "internal/tsr_sequence.h"

/* An operand of heads x rows x tokens like Q (rows: Q's head size, or 2 for
 * the softmax statistics), all rows in one tile, Q's heads per tile and the
 * token tiles of `tokens` (Q: query tiles, K: key tiles). */
static tsr_operand_t head_op(const char *name, const tsr_desc_t *d, tsr_op_role_t role, const tsr_desc_t *Q,
                             const tsr_desc_t *tokens, int stats)
{
    tsr_want_t rows = stats ? (tsr_want_t)TSR_FIXED(2) : (tsr_want_t)TSR_ROWS(Q);
    return (tsr_operand_t){ name, d, role, TSR_FLOAT32, { TSR_BATCH(Q), rows, TSR_COLS(Q) },
                            { TSR_BATCH(Q), TSR_WHOLE, TSR_COLS(tokens) }, NULL };
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
    const tsr_operand_t ops[] = { head_op("Q", Q, TSR_OP_IN, Q, Q, 0), head_op("K", K, TSR_OP_IN, Q, K, 0),
                                  head_op("V", V, TSR_OP_IN, Q, K, 0), head_op("out", out, TSR_OP_OUT, Q, Q, 0),
                                  head_op("stats", stats, TSR_OP_OUT, Q, Q, 1) };
    int rc = tsr_check_operands("tsr_attention_forward", ops, 5);
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

/* REDUX: give every tile of X the reduction methods; TSR_OVERWRITE: zero it
 * on its owner; under MPI every other rank starts its partial sum at zero. */
static int redux_prepare(tsr_desc_t *X, tsr_write_t mode)
{
    for (int bi = 0; bi < X->bt; bi++)
        for (int j = 0; j < X->nt; j++) {
            int rc = tsr_redux_start(tsr_tile(X, bi, 0, j), mode == TSR_ACCUMULATE ? 1.0 : 0.0, NULL);
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
static int backward_head_tile(const bwd_operands_t *o, int bi, tsr_write_t mode, tsr_reduction_t accum)
{
    for (int qi = 0; qi < o->Q->nt; qi++)
        for (int kj = 0; kj <= last_key_tile(o->Q, o->K, qi); kj++) {
            enum starpu_data_access_mode qmode = STARPU_REDUX, kvmode = STARPU_REDUX;
            if (accum == TSR_REDUCTION_ORDERED) {
                qmode = kj == 0 && mode == TSR_OVERWRITE ? STARPU_W : STARPU_RW;
                kvmode = qi == first_query_tile(o->Q, o->K, kj) && mode == TSR_OVERWRITE ? STARPU_W : STARPU_RW;
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
                           tsr_desc_t *stats, tsr_desc_t *dQ, tsr_desc_t *dK, tsr_desc_t *dV, tsr_write_t mode,
                           tsr_reduction_t accum)
{
    const char *fn = "tsr_attention_backward";
    const tsr_operand_t ops[] = {
        head_op("Q", Q, TSR_OP_IN, Q, Q, 0),        head_op("K", K, TSR_OP_IN, Q, K, 0),
        head_op("V", V, TSR_OP_IN, Q, K, 0),        head_op("out", out, TSR_OP_IN, Q, Q, 0),
        head_op("dout", dout, TSR_OP_IN, Q, Q, 0),  head_op("stats", stats, TSR_OP_OUT, Q, Q, 1),
        head_op("dQ", dQ, TSR_OP_OUT, Q, Q, 0),     head_op("dK", dK, TSR_OP_OUT, Q, K, 0),
        head_op("dV", dV, TSR_OP_OUT, Q, K, 0),
    };
    int rc = tsr_check_operands(fn, ops, 9);
    rc = rc ? rc : tsr_check_choice(fn, "mode", mode, 2);
    rc = rc ? rc : tsr_check_accum(fn, accum);
    if (rc)
        return rc;
    for (int bi = 0; bi < Q->bt && !rc; bi++)
        for (int qi = 0; qi < Q->nt && !rc; qi++)
            rc = tsr_insert_attention_bwd_prep(tsr_tile(out, bi, 0, qi), tsr_tile(dout, bi, 0, qi),
                                               tsr_tile(stats, bi, 0, qi));
    if (!rc && accum == TSR_REDUCTION_REDUX && !(rc = redux_prepare(dQ, mode)) &&
        !(rc = redux_prepare(dK, mode)))
        rc = redux_prepare(dV, mode);
    const bwd_operands_t o = { Q, K, V, dout, stats, dQ, dK, dV };
    for (int bi = 0; bi < Q->bt && !rc; bi++)
        rc = backward_head_tile(&o, bi, mode, accum);
    if (rc)
        return rc;
    if (accum == TSR_REDUCTION_REDUX && tsr_size() > 1) {
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

/* ---- on the caller's arrays ------------------------------------------------------ */

static int check_attention_array(const char *fn, int heads, int T, int hd, int tile)
{
    if (!tsr_initialized())
        return TSR_ENOTINIT;
    if (heads < 1 || T < 1 || hd < 1 || tile < 1) {
        tsr_log(TSR_LOG_ERROR, "%s: heads %d, T %d, hd %d and tile %d must be positive", fn, heads, T, hd, tile);
        return TSR_EINVAL;
    }
    return TSR_SUCCESS;
}

/* An array of heads x T x hd as the descriptor [heads, hd, T]: one head per
 * tile, tile tokens per tile, the head dimension whole. */
static tsr_array_t head_array(const char *name, const float *p, int heads, int T, int hd, int tile, int written)
{
    return (tsr_array_t){ name, TSR_FLOAT32, heads, hd, T, 1, hd, tile, hd, p, written, NULL };
}

/* The softmax statistics of a pass: a temporary of Tessera's own. */
static int create_stats(tsr_desc_t **stats, int heads, int T, int tile)
{
    return tsr_desc_create(stats, TSR_FLOAT32, heads, 2, T, 1, 2, tile, NULL);
}

int tsr_attention_array_async(tsr_sequence_t *seq, int heads, int T, int hd, const float *Q, const float *K,
                              const float *V, float *out, int tile)
{
    const char *fn = "tsr_attention_array_async";
    int rc = tsr_sequence_begin(seq, fn);
    if (rc)
        return rc;
    tsr_array_t x[4] = { head_array("Q", Q, heads, T, hd, tile, 0), head_array("K", K, heads, T, hd, tile, 0),
                         head_array("V", V, heads, T, hd, tile, 0), head_array("out", out, heads, T, hd, tile, 1) };
    rc = check_attention_array(fn, heads, T, hd, tile);
    rc = rc ? rc : tsr_check_arrays(fn, x, 4);
    rc = rc ? rc : tsr_sequence_views(seq, x, 4);
    tsr_desc_t *stats = NULL;
    rc = rc ? rc : create_stats(&stats, heads, T, tile);
    rc = rc ? rc : tsr_sequence_adopt(seq, stats);
    if (rc)
        tsr_desc_destroy(stats);
    rc = rc ? rc : tsr_attention_forward(x[0].desc, x[1].desc, x[2].desc, x[3].desc, stats);
    return tsr_sequence_record(seq, rc);
}

/* Under MPI with several ranks: the arrays (on rank 0) scattered over the
 * ranks, out gathered back. */
static int attention_array_copied(int heads, int T, int hd, const float *Q, const float *K, const float *V,
                                  float *out, int tile)
{
    tsr_desc_t *d[5] = { NULL };
    const float *in[3] = { Q, K, V };
    int rc = TSR_SUCCESS;
    for (int i = 0; i < 4 && !rc; i++)
        rc = tsr_desc_create(&d[i], TSR_FLOAT32, heads, hd, T, 1, hd, tile, NULL);
    rc = rc ? rc : create_stats(&d[4], heads, T, tile);
    for (int i = 0; i < 3 && !rc; i++)
        rc = tsr_desc_scatter(d[i], in[i], hd, 0);
    rc = rc ? rc : tsr_attention_forward(d[0], d[1], d[2], d[3], d[4]);
    rc = rc ? rc : tsr_desc_gather(d[3], out, hd, 0);
    for (int i = 0; i < 5; i++)
        tsr_desc_destroy(d[i]);
    return rc;
}

int tsr_attention_array(int heads, int T, int hd, const float *Q, const float *K, const float *V, float *out,
                        int tile)
{
    int rc = check_attention_array("tsr_attention_array", heads, T, hd, tile);
    if (rc)
        return rc;
    if (tsr_size() > 1)
        return attention_array_copied(heads, T, hd, Q, K, V, out, tile);
    tsr_array_t x[4] = { head_array("Q", Q, heads, T, hd, tile, 0), head_array("K", K, heads, T, hd, tile, 0),
                         head_array("V", V, heads, T, hd, tile, 0), head_array("out", out, heads, T, hd, tile, 1) };
    rc = tsr_check_arrays("tsr_attention_array", x, 4);
    tsr_sequence_t *seq = NULL;
    rc = rc ? rc : tsr_sequence_create(&seq);
    rc = rc ? rc : tsr_attention_array_async(seq, heads, T, hd, Q, K, V, out, tile);
    int wait_rc = tsr_sequence_destroy(seq);
    return rc ? rc : wait_rc;
}
