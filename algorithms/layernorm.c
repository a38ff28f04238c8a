/* Tiled LayerNorm (forward, backward) and residual add. Activations are
 * feature-major: C x BT descriptors, tile (i, j) = feature tile i of token
 * tile j. Per-token reductions over C run across the feature tiles i of a
 * token tile j, into a 1 x nb (or 2 x nb) tile, as an ordered chain or with
 * STARPU_REDUX; parameter gradients reduce across token tiles j. */
#include <stdio.h>
#include "tsr_layernorm.h"
#include "tsr_runtime_layernorm.h"
#include "internal/tsr_operands.h"
#include "internal/tsr_rows.h"

#define LN_EPS 1e-5f

/* The operands against inp (C x BT): an activation is C x BT in inp's tiles,
 * a parameter C x 1 in inp's feature tiles, a per-token statistic rows x BT
 * in one tile row and inp's token tiles. */
static tsr_operand_t activation(const char *name, const tsr_desc_t *d, tsr_op_role_t role, const tsr_desc_t *inp)
{
    return (tsr_operand_t){ name, d, role, TSR_FLOAT32, TSR_2D(TSR_ROWS(inp), TSR_COLS(inp)), NULL };
}
static tsr_operand_t parameter(const char *name, const tsr_desc_t *d, tsr_op_role_t role, const tsr_desc_t *inp)
{
    return (tsr_operand_t){ name, d, role, TSR_FLOAT32, TSR_2D(TSR_ROWS(inp), TSR_FIXED(1)), NULL };
}
static tsr_operand_t statistic(const char *name, const tsr_desc_t *d, tsr_op_role_t role, int rows,
                               const tsr_desc_t *inp)
{
    return (tsr_operand_t){ name, d, role, TSR_FLOAT32, TSR_2D(TSR_FIXED(rows), TSR_COLS(inp)), NULL };
}

/* ---- forward ------------------------------------------------------------ */

/* What a feature tile contributes to a per-token accumulator. */
typedef enum { PART_SUM, PART_SQDEV, PART_BWD_SUMS } ln_part_t;

typedef struct {
    ln_part_t what;
    tsr_desc_t *dout, *inp, *weight, *mean, *rstd;
} ln_partial_t;

/* Under MPI a REDUX contribution runs where its input tiles live (the ranks'
 * partial sums are combined afterwards); a link of an ordered chain runs on
 * the accumulator's owner: its inputs are independent transfers that
 * overlap, while moving the accumulator would put two message latencies on
 * the chain's critical path at every link. */
static int exec_rank(const tsr_desc_t *inp, int i, int j, enum starpu_data_access_mode mode)
{
    return mode == STARPU_REDUX ? tsr_tile_owner(inp, 0, i, j) : -1;
}

static int insert_partial(const ln_partial_t *p, int i, int j, tsr_tile_t acc, enum starpu_data_access_mode mode)
{
    int exec = exec_rank(p->inp, i, j, mode);
    tsr_tile_t x = tsr_tile(p->inp, 0, i, j);
    switch (p->what) {
    case PART_SUM:
        return tsr_insert_layernorm_sum(x, acc, mode, exec);
    case PART_SQDEV:
        return tsr_insert_layernorm_sqdev(x, tsr_tile(p->mean, 0, 0, j), p->inp->m, acc, mode, exec);
    case PART_BWD_SUMS:
    default:
        return tsr_insert_layernorm_bwd_sums(tsr_tile(p->dout, 0, i, j), x, tsr_tile(p->weight, 0, i, 0),
                                             tsr_tile(p->mean, 0, 0, j), tsr_tile(p->rstd, 0, 0, j), acc, mode,
                                             exec);
    }
}

/* Token tile j: acc(0, j) = sum over the feature tiles of their partials. */
static int reduce_features(const ln_partial_t *p, tsr_desc_t *acc_desc, int j, tsr_reduction_t accum)
{
    tsr_tile_t acc = tsr_tile(acc_desc, 0, 0, j);
    int rc = accum == TSR_REDUCTION_REDUX ? tsr_redux_start(acc, 0.0, NULL) : TSR_SUCCESS;
    for (int i = 0; i < p->inp->mt && !rc; i++) {
        enum starpu_data_access_mode mode = accum == TSR_REDUCTION_REDUX ? STARPU_REDUX : i == 0 ? STARPU_W : STARPU_RW;
        rc = insert_partial(p, i, j, acc, mode);
    }
    return rc;
}

/* All token tiles; with REDUX under MPI the ranks' partial sums are combined
 * (collective) before anyone reads them. */
static int reduce_features_all(const ln_partial_t *p, tsr_desc_t *acc_desc, tsr_reduction_t accum)
{
    for (int j = 0; j < p->inp->nt; j++) {
        int rc = reduce_features(p, acc_desc, j, accum);
        if (rc)
            return rc;
    }
    if (accum == TSR_REDUCTION_REDUX)
        tsr_redux_finish(acc_desc);
    return TSR_SUCCESS;
}

/* C in one feature tile: one task per token tile does everything (llm.c numerics). */
static int forward_single(tsr_desc_t *inp, tsr_desc_t *weight, tsr_desc_t *bias, tsr_desc_t *out,
                          tsr_desc_t *mean, tsr_desc_t *rstd)
{
    for (int j = 0; j < inp->nt; j++) {
        int rc = tsr_insert_layernorm_fwd(tsr_tile(inp, 0, 0, j), tsr_tile(weight, 0, 0, 0), tsr_tile(bias, 0, 0, 0),
                                          tsr_tile(out, 0, 0, j), tsr_tile(mean, 0, 0, j), tsr_tile(rstd, 0, 0, j),
                                          LN_EPS);
        if (rc)
            return rc;
    }
    return TSR_SUCCESS;
}

/* C split over feature tiles: mean holds the sums of x, then rstd the sums of
 * squared deviations from the complete mean (two passes, as llm.c), then
 * both are finalised and every tile is normalised. */
static int forward_split(tsr_desc_t *inp, tsr_desc_t *weight, tsr_desc_t *bias, tsr_desc_t *out,
                         tsr_desc_t *mean, tsr_desc_t *rstd, tsr_reduction_t accum)
{
    ln_partial_t sum = { PART_SUM, NULL, inp, NULL, NULL, NULL };
    ln_partial_t sqdev = { PART_SQDEV, NULL, inp, NULL, mean, NULL };
    int rc = reduce_features_all(&sum, mean, accum);
    if (!rc)
        rc = reduce_features_all(&sqdev, rstd, accum);
    for (int j = 0; j < inp->nt && !rc; j++)
        rc = tsr_insert_layernorm_stats(inp->m, LN_EPS, tsr_tile(mean, 0, 0, j), tsr_tile(rstd, 0, 0, j));
    for (int j = 0; j < inp->nt && !rc; j++)
        for (int i = 0; i < inp->mt && !rc; i++)
            rc = tsr_insert_layernorm_normalize(tsr_tile(inp, 0, i, j), tsr_tile(weight, 0, i, 0),
                                                tsr_tile(bias, 0, i, 0), tsr_tile(mean, 0, 0, j),
                                                tsr_tile(rstd, 0, 0, j), tsr_tile(out, 0, i, j));
    return rc;
}

int tsr_layernorm_forward(tsr_desc_t *inp, tsr_desc_t *weight, tsr_desc_t *bias, tsr_desc_t *out,
                          tsr_desc_t *mean, tsr_desc_t *rstd, tsr_reduction_t accum)
{
    const char *fn = "tsr_layernorm_forward";
    const tsr_operand_t ops[] = {
        activation("inp", inp, TSR_OP_IN, inp),         parameter("weight", weight, TSR_OP_IN, inp),
        parameter("bias", bias, TSR_OP_IN, inp),        activation("out", out, TSR_OP_OUT, inp),
        statistic("mean", mean, TSR_OP_OUT, 1, inp),    statistic("rstd", rstd, TSR_OP_OUT, 1, inp),
    };
    int rc = tsr_check_operands(fn, ops, 6);
    rc = rc ? rc : tsr_check_accum(fn, accum);
    if (rc)
        return rc;
    rc = inp->mt == 1 ? forward_single(inp, weight, bias, out, mean, rstd)
                      : forward_split(inp, weight, bias, out, mean, rstd, accum);
    /* inputs' remote copies are dropped so that no stale copy survives a later write */
    tsr_desc_flush(inp);
    tsr_desc_flush(weight);
    tsr_desc_flush(bias);
    return rc;
}

/* ---- RMSNorm: row ops, the features of a token in one tile ------------- */

int tsr_rmsnorm_forward(tsr_desc_t *inp, tsr_desc_t *weight, tsr_desc_t *out, tsr_desc_t *rstd, float eps)
{
    const char *fn = "tsr_rmsnorm_forward";
    const tsr_operand_t ops[] = {
        activation("inp", inp, TSR_OP_IN, inp),      parameter("weight", weight, TSR_OP_IN, inp),
        activation("out", out, TSR_OP_OUT, inp),     statistic("rstd", rstd, TSR_OP_OUT, 1, inp),
    };
    int rc = tsr_check_operands(fn, ops, 4);
    if (rc)
        return rc;
    if (!(eps > 0.0f)) {
        tsr_log(TSR_LOG_ERROR, "%s: eps is %g, expected > 0", fn, (double)eps);
        return TSR_EINVAL;
    }
    tsr_desc_t *operands[] = { inp, weight, out, rstd };
    return tsr_rows_apply(fn, TSR_ROW_rmsnorm_fwd, operands, NULL, TSR_REDUCTION_ORDERED, eps);
}

/* RMSNorm backward: the same row op kit, dweight summed over the token tiles. */
int tsr_rmsnorm_backward(tsr_desc_t *dout, tsr_desc_t *inp, tsr_desc_t *weight, tsr_desc_t *rstd, tsr_desc_t *dinp,
                         tsr_desc_t *dweight, tsr_write_t dinp_mode, tsr_write_t dweight_mode,
                         tsr_reduction_t reduction)
{
    const char *fn = "tsr_rmsnorm_backward";
    const tsr_operand_t ops[] = {
        activation("dout", dout, TSR_OP_IN, inp),    activation("inp", inp, TSR_OP_IN, inp),
        parameter("weight", weight, TSR_OP_IN, inp), statistic("rstd", rstd, TSR_OP_IN, 1, inp),
        activation("dinp", dinp, TSR_OP_OUT, inp),   parameter("dweight", dweight, TSR_OP_OUT, inp),
    };
    int rc = tsr_check_operands(fn, ops, 6);
    rc = rc ? rc : tsr_check_choice(fn, "dinp_mode", dinp_mode, 2);
    rc = rc ? rc : tsr_check_choice(fn, "dweight_mode", dweight_mode, 2);
    rc = rc ? rc : tsr_check_accum(fn, reduction);
    if (rc)
        return rc;
    tsr_desc_t *operands[] = { dout, inp, weight, rstd, dinp, dweight };
    const tsr_write_t writes[] = { dinp_mode, dweight_mode };
    return tsr_rows_apply(fn, TSR_ROW_rmsnorm_bwd, operands, writes, reduction, 0.0f);
}

/* ---- backward ----------------------------------------------------------- */

/* The mode of a chain's task on its output: the first one writes it unless
 * the call accumulates. */
static enum starpu_data_access_mode chain_mode(int first, tsr_write_t mode)
{
    return first && mode == TSR_OVERWRITE ? STARPU_W : STARPU_RW;
}

/* dweight, dbias: feature tile i reduced over the token tiles. */
static int backward_params(tsr_desc_t *dout, tsr_desc_t *inp, tsr_desc_t *mean, tsr_desc_t *rstd,
                           tsr_desc_t *dweight, tsr_desc_t *dbias, tsr_write_t mode, tsr_reduction_t accum)
{
    for (int i = 0; i < inp->mt; i++) {
        tsr_tile_t dw = tsr_tile(dweight, 0, i, 0), db = tsr_tile(dbias, 0, i, 0);
        int rc = TSR_SUCCESS;
        if (accum == TSR_REDUCTION_REDUX) {
            double beta = mode == TSR_ACCUMULATE ? 1.0 : 0.0;
            rc = tsr_redux_start(dw, beta, NULL);
            if (!rc)
                rc = tsr_redux_start(db, beta, NULL);
        }
        for (int j = 0; j < inp->nt && !rc; j++) {
            int redux = accum == TSR_REDUCTION_REDUX;
            rc = tsr_insert_layernorm_bwd_params(tsr_tile(dout, 0, i, j), tsr_tile(inp, 0, i, j),
                                                 tsr_tile(mean, 0, 0, j), tsr_tile(rstd, 0, 0, j), dw,
                                                 redux ? STARPU_REDUX : chain_mode(j == 0, mode), db,
                                                 redux ? STARPU_REDUX : chain_mode(j == 0, mode),
                                                 exec_rank(inp, i, j, redux ? STARPU_REDUX : STARPU_RW));
        }
        if (rc)
            return rc;
    }
    return TSR_SUCCESS;
}

static int backward_dinp(tsr_desc_t *dout, tsr_desc_t *inp, tsr_desc_t *weight, tsr_desc_t *mean,
                         tsr_desc_t *rstd, tsr_desc_t *dinp, tsr_write_t mode, tsr_reduction_t accum,
                         tsr_desc_t *work)
{
    enum starpu_data_access_mode dmode = mode == TSR_ACCUMULATE ? STARPU_RW : STARPU_W;
    if (inp->mt == 1) {
        for (int j = 0; j < inp->nt; j++) {
            int rc = tsr_insert_layernorm_bwd(tsr_tile(dout, 0, 0, j), tsr_tile(inp, 0, 0, j),
                                              tsr_tile(weight, 0, 0, 0), tsr_tile(mean, 0, 0, j),
                                              tsr_tile(rstd, 0, 0, j), tsr_tile(dinp, 0, 0, j), dmode);
            if (rc)
                return rc;
        }
        return TSR_SUCCESS;
    }
    ln_partial_t sums = { PART_BWD_SUMS, dout, inp, weight, mean, rstd };
    int rc = reduce_features_all(&sums, work, accum);
    for (int j = 0; j < inp->nt && !rc; j++)
        for (int i = 0; i < inp->mt && !rc; i++)
            rc = tsr_insert_layernorm_bwd_dinp(tsr_tile(dout, 0, i, j), tsr_tile(inp, 0, i, j),
                                               tsr_tile(weight, 0, i, 0), tsr_tile(mean, 0, 0, j),
                                               tsr_tile(rstd, 0, 0, j), tsr_tile(work, 0, 0, j), inp->m,
                                               tsr_tile(dinp, 0, i, j), dmode);
    return rc;
}

int tsr_layernorm_backward(tsr_desc_t *dout, tsr_desc_t *inp, tsr_desc_t *weight, tsr_desc_t *mean,
                           tsr_desc_t *rstd, tsr_desc_t *dinp, tsr_desc_t *dweight, tsr_desc_t *dbias,
                           tsr_write_t dinp_mode, tsr_write_t dparam_mode, tsr_reduction_t accum, tsr_desc_t *work)
{
    const char *fn = "tsr_layernorm_backward";
    const tsr_operand_t ops[] = {
        activation("dout", dout, TSR_OP_IN, inp),       activation("inp", inp, TSR_OP_IN, inp),
        parameter("weight", weight, TSR_OP_IN, inp),    statistic("mean", mean, TSR_OP_IN, 1, inp),
        statistic("rstd", rstd, TSR_OP_IN, 1, inp),     activation("dinp", dinp, TSR_OP_OUT, inp),
        parameter("dweight", dweight, TSR_OP_OUT, inp), parameter("dbias", dbias, TSR_OP_OUT, inp),
        statistic("work", work, TSR_OP_OUT_OPT, 2, inp),
    };
    int rc = tsr_check_operands(fn, ops, 9);
    rc = rc ? rc : tsr_check_backward_modes(fn, dinp_mode, dparam_mode, accum);
    if (rc)
        return rc;
    tsr_desc_t *own_work = NULL;
    if (inp->mt > 1 && !work) {
        rc = tsr_layernorm_workspace_create(&own_work, mean);
        if (rc)
            return rc;
        work = own_work;
    }
    rc = backward_dinp(dout, inp, weight, mean, rstd, dinp, dinp_mode, accum, work);
    if (!rc)
        rc = backward_params(dout, inp, mean, rstd, dweight, dbias, dparam_mode, accum);
    if (!rc && accum == TSR_REDUCTION_REDUX) {
        tsr_redux_finish(dweight);
        tsr_redux_finish(dbias);
    }
    tsr_desc_flush(dout);
    tsr_desc_flush(inp);
    tsr_desc_flush(weight);
    tsr_desc_flush(mean);
    tsr_desc_flush(rstd);
    if (work)
        tsr_desc_flush(work);
    tsr_desc_destroy(own_work); /* waits for the tasks that use it */
    return rc;
}

int tsr_layernorm_workspace_create(tsr_desc_t **work, const tsr_desc_t *mean)
{
    if (!work || !mean) {
        tsr_log(TSR_LOG_ERROR, "tsr_layernorm_workspace_create: %s is NULL", work ? "mean" : "work");
        return TSR_EINVAL;
    }
    return tsr_desc_create(work, TSR_FLOAT32, 1, 2, mean->n, 1, 2, mean->nb, &mean->dist);
}

/* ---- residual ------------------------------------------------------------ */

/* One output tile of out = a + b, in place when out is a or b. */
static int residual_tile(tsr_desc_t *a, tsr_desc_t *b, tsr_desc_t *out, int bi, int i, int j)
{
    tsr_tile_t ta = tsr_tile(a, bi, i, j), tb = tsr_tile(b, bi, i, j), to = tsr_tile(out, bi, i, j);
    if (a == b && b == out)
        return tsr_insert_scale(2.0, to);
    if (a == b)
        return tsr_insert_add(2.0, ta, 0.0, to);
    if (out == a)
        return tsr_insert_add(1.0, tb, 1.0, to);
    if (out == b)
        return tsr_insert_add(1.0, ta, 1.0, to);
    return tsr_insert_residual_fwd(ta, tb, to);
}

int tsr_residual_forward(tsr_desc_t *a, tsr_desc_t *b, tsr_desc_t *out)
{
    /* float32 or float64, all alike; out may be a or b (the sum is then made in place) */
    const tsr_operand_t ops[] = { { "a", a, TSR_OP_IN, TSR_DTYPE_FIRST, TSR_LIKE(a), NULL },
                                  { "b", b, TSR_OP_IN, TSR_DTYPE_FIRST, TSR_LIKE(a), NULL },
                                  { "out", out, TSR_OP_OUT, TSR_DTYPE_FIRST, TSR_LIKE(a), out == b ? b : a } };
    int rc = tsr_check_operands("tsr_residual_forward", ops, 3);
    if (rc)
        return rc;
    for (int bi = 0; bi < out->bt; bi++)
        for (int i = 0; i < out->mt; i++)
            for (int j = 0; j < out->nt; j++) {
                rc = residual_tile(a, b, out, bi, i, j);
                if (rc)
                    return rc;
            }
    if (a != out)
        tsr_desc_flush(a);
    if (b != out && b != a)
        tsr_desc_flush(b);
    return TSR_SUCCESS;
}

int tsr_residual_backward(tsr_desc_t *dout, tsr_desc_t *da, tsr_desc_t *db, tsr_write_t da_mode, tsr_write_t db_mode)
{
    const char *fn = "tsr_residual_backward";
    const tsr_operand_t ops[] = { { "dout", dout, TSR_OP_IN, TSR_DTYPE_FIRST, TSR_LIKE(dout), NULL },
                                  { "da", da, TSR_OP_OUT_SOME, TSR_DTYPE_FIRST, TSR_LIKE(dout), NULL },
                                  { "db", db, TSR_OP_OUT_SOME, TSR_DTYPE_FIRST, TSR_LIKE(dout), NULL } };
    int rc = tsr_check_operands(fn, ops, 3);
    rc = rc ? rc : tsr_check_choice(fn, "da_mode", da_mode, 2);
    rc = rc ? rc : tsr_check_choice(fn, "db_mode", db_mode, 2);
    if (rc)
        return rc;
    double beta_a = da_mode == TSR_ACCUMULATE ? 1.0 : 0.0;
    double beta_b = db_mode == TSR_ACCUMULATE ? 1.0 : 0.0;
    for (int bi = 0; bi < dout->bt; bi++)
        for (int i = 0; i < dout->mt; i++)
            for (int j = 0; j < dout->nt; j++) {
                tsr_tile_t g = tsr_tile(dout, bi, i, j);
                if (da && (rc = tsr_insert_add(1.0, g, beta_a, tsr_tile(da, bi, i, j))))
                    return rc;
                if (db && (rc = tsr_insert_add(1.0, g, beta_b, tsr_tile(db, bi, i, j))))
                    return rc;
            }
    tsr_desc_flush(dout);
    return TSR_SUCCESS;
}

/* ---- sum of several parts by a tree ---------------------------------------- */

/* The part the tree of tile (bi, i, j) starts from: the first one held by the
 * sum tile's owner (the last addition then reads it in place), else part 0. */
static int tree_root(tsr_desc_t *const *parts, int n, const tsr_desc_t *sum, int bi, int i, int j)
{
    int owner = tsr_tile_owner(sum, bi, i, j);
    for (int r = 0; r < n; r++)
        if (tsr_tile_owner(parts[r], bi, i, j) == owner)
            return r;
    return 0;
}

/* One tile: the parts in ring order from the root; at level h the part at
 * position q (a multiple of 2h) adds in the one at q + h, on its own rank;
 * the last level's addition writes the sum. A rank leaves out the additions
 * it neither runs nor feeds (tsr_task_involves_me) without building them:
 * with a part per rank that is all but log2 n of a tile's n - 1. */
static int sum_tile_by_tree(tsr_desc_t *const *parts, int n, tsr_desc_t *sum, int bi, int i, int j)
{
    int root = tree_root(parts, n, sum, bi, i, j);
    for (int h = 1; h < n; h *= 2)
        for (int q = 0; q + h < n; q += 2 * h) {
            int last = 2 * h >= n;
            tsr_tile_t t[3] = { tsr_tile(parts[(root + q) % n], bi, i, j),
                                tsr_tile(parts[(root + q + h) % n], bi, i, j), tsr_tile(sum, bi, i, j) };
            const enum starpu_data_access_mode modes[3] = { last ? STARPU_R : STARPU_RW, STARPU_R, STARPU_W };
            if (!tsr_task_involves_me(t, modes, last ? 3 : 2))
                continue;
            int rc = last ? tsr_insert_residual_fwd(t[0], t[1], t[2]) : tsr_insert_add(1.0, t[1], 1.0, t[0]);
            if (rc)
                return rc;
        }
    return TSR_SUCCESS;
}

int tsr_sum_tree_reader(tsr_desc_t *const *parts, int n, const tsr_desc_t *sum, int r, int bi, int i, int j)
{
    int root = tree_root(parts, n, sum, bi, i, j), pos = (r - root + n) % n;
    int h = pos & -pos; /* the level at which it is added in (the root: the last) */
    int reader = pos == 0 || 2 * h >= n ? tsr_tile_owner(sum, bi, i, j)
                                        : tsr_tile_owner(parts[(root + pos - h) % n], bi, i, j);
    return reader == tsr_tile_owner(parts[r], bi, i, j) ? -1 : reader;
}

static int check_sum_parts(const char *fn, tsr_desc_t *const *parts, int n, const tsr_desc_t *sum)
{
    if (!parts || n < 2) {
        tsr_log(TSR_LOG_ERROR, "%s: %s", fn, parts ? "needs at least 2 parts" : "parts is NULL");
        return TSR_EINVAL;
    }
    for (int r = 0; r < n; r++) {
        char name[32];
        snprintf(name, sizeof name, "parts[%d]", r);
        const tsr_operand_t ops[] = { { "parts[0]", parts[0], TSR_OP_IN, TSR_DTYPE_FIRST, TSR_LIKE(parts[0]), NULL },
                                      { name, parts[r], TSR_OP_IN, TSR_DTYPE_FIRST, TSR_LIKE(parts[0]), NULL },
                                      { "sum", sum, TSR_OP_OUT, TSR_DTYPE_FIRST, TSR_LIKE(parts[0]), NULL } };
        int rc = tsr_check_operands(fn, ops, 3);
        if (rc)
            return rc;
        for (int t = 0; t < r; t++)
            if (parts[t] == parts[r]) {
                tsr_log(TSR_LOG_ERROR, "%s: parts[%d] and parts[%d] are the same descriptor", fn, t, r);
                return TSR_EINVAL;
            }
    }
    return TSR_SUCCESS;
}

int tsr_sum_tree(tsr_desc_t *const *parts, int n, tsr_desc_t *sum)
{
    int rc = check_sum_parts("tsr_sum_tree", parts, n, sum);
    if (rc)
        return rc;
    for (int bi = 0; bi < sum->bt; bi++)
        for (int i = 0; i < sum->mt; i++)
            for (int j = 0; j < sum->nt; j++)
                if ((rc = sum_tile_by_tree(parts, n, sum, bi, i, j)))
                    return rc;
    for (int r = 0; r < n; r++)
        tsr_desc_flush(parts[r]);
    return TSR_SUCCESS;
}
