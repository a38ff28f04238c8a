/* Fused linear layers: GEMM + bias (+ GeLU) forward, backward with the bias
 * gradient and the GeLU derivative fused, and GEMM + attention reshape
 * (QKV projection, attention output projection). See tsr_linear.h. */
#include <stdlib.h>
#include "tsr_linear.h"
#include "tsr_runtime_linear.h"
#include "internal/tsr_operands.h"

/* ---- operands: a 2D feature-major descriptor, or 3D head tensors ---------- */

/* An activation operand as the GEMMs see it: features x tokens. Either a 2D
 * descriptor, or nparts head tensors [B*NH, hd, T] whose tiles line up with
 * feature tiles of fb rows (whole heads) and token tiles of nb tokens. */
typedef struct {
    tsr_desc_t *d;    /* 2D descriptor, NULL for head tensors */
    tsr_desc_t *h[3]; /* head tensors: features [p*C, (p+1)*C) are h[p] */
    int nparts, C, NH, hd, T, B;
    int fb, nb;
} lin_op_t;

static lin_op_t op_2d(tsr_desc_t *d)
{
    lin_op_t o = { 0 };
    o.d = d;
    return o;
}

/* Head tensors seen as features x tokens with tiles of fb x nb (aligned). */
static lin_op_t op_heads(tsr_desc_t *const *h, int nparts, int C, int fb)
{
    lin_op_t o = { 0 };
    for (int p = 0; p < nparts; p++)
        o.h[p] = h[p];
    o.nparts = nparts;
    o.C = C;
    o.hd = h[0]->m;
    o.NH = C / o.hd;
    o.T = h[0]->n;
    o.B = h[0]->b / o.NH;
    o.fb = fb;
    o.nb = h[0]->nb;
    return o;
}

static int op_is_heads(const lin_op_t *o) { return o->d == NULL; }
static int op_feature_tiles(const lin_op_t *o) { return o->d ? o->d->mt : o->nparts * o->C / o->fb; }
static int op_token_tiles(const lin_op_t *o) { return o->d ? o->d->nt : (o->B * o->T + o->nb - 1) / o->nb; }

/* Tile (feature tile fi, token tile j): for head tensors the 3D tile holding
 * those heads of that batch's tokens. */
static tsr_tile_t op_tile(const lin_op_t *o, int fi, int j)
{
    if (o->d)
        return tsr_tile(o->d, 0, fi, j);
    int f0 = fi * o->fb, part = f0 / o->C, h0 = (f0 % o->C) / o->hd;
    int tok0 = j * o->nb, b = tok0 / o->T, jt = (tok0 % o->T) / o->nb;
    tsr_desc_t *H = o->h[part];
    return tsr_tile(H, (b * o->NH + h0) / H->bb, 0, jt);
}

/* ---- REDUX helpers ------------------------------------------------------------ */

/* Start a REDUX accumulation into tile c, from init_bias (or zero: no bias
 * tile) when init is set, else from c's value. */
static int redux_start(tsr_tile_t c, int init, tsr_tile_t init_bias)
{
    return tsr_redux_start(c, init ? 0.0 : 1.0, init ? &init_bias : NULL);
}

/* ---- GEMM tasks ---------------------------------------------------------------- */

/* The GEMM task C += op(A) op(B) of a kind (alpha = beta = 1; no bias, GeLU
 * or dbias tile; placed by StarPU). At most one side of the product is in
 * heads: rows, the operand whose features are C's rows (heads_flag: C or A),
 * whose heads chunk the m dimension; or other, the B operand, whose heads
 * chunk other_chunk (k or n). */
static tsr_lin_task_t lin_task(tsr_lin_kind_t kind, tsr_trans_t ta, tsr_trans_t tb, tsr_tile_t A, tsr_tile_t B,
                               tsr_tile_t C, const lin_op_t *rows, int heads_flag, const lin_op_t *other,
                               tsr_chunk_dim_t other_chunk)
{
    tsr_lin_task_t t = { 0 };
    t.kind = kind;
    t.ta = ta;
    t.tb = tb;
    t.alpha = t.beta = 1.0;
    t.chunk = op_is_heads(rows) ? TSR_CHUNK_M : op_is_heads(other) ? other_chunk : TSR_CHUNK_NONE;
    t.hd = op_is_heads(rows) ? rows->hd : other->hd;
    t.heads = (op_is_heads(rows) ? heads_flag : 0) | (op_is_heads(other) ? TSR_LIN_HEADS_B : 0);
    t.A = A;
    t.B = B;
    t.C = C;
    t.bias = t.out = t.dbias = tsr_no_tile();
    t.exec_rank = -1;
    return t;
}

/* ---- forward ---------------------------------------------------------------- */

typedef struct {
    lin_op_t inp, acc;  /* acc: W^T inp + bias accumulates here (out, or pre with GeLU) */
    tsr_desc_t *W, *bias;
    tsr_desc_t *gelu_out; /* NULL, or out = gelu(acc) */
} fwd_plan_t;

/* acc(i, j) += W(l, i)^T inp(l, j); in heads: the output's rows (QKV) or the
 * k dimension (attproj) */
static tsr_lin_task_t fwd_task(const fwd_plan_t *p, int i, int j, int l)
{
    return lin_task(TSR_LIN_FWD, TSR_TRANS, TSR_NOTRANS, tsr_tile(p->W, 0, l, i), op_tile(&p->inp, l, j),
                    op_tile(&p->acc, i, j), &p->acc, TSR_LIN_HEADS_C, &p->inp, TSR_CHUNK_K);
}

/* Ordered chain: the first k task starts from the bias (C write-only), the
 * last one applies the GeLU once the sum is complete and keeps the
 * pre-activation in C. */
static int fwd_tile_ordered(const fwd_plan_t *p, int i, int j)
{
    int kt = p->W->mt;
    for (int l = 0; l < kt; l++) {
        tsr_lin_task_t t = fwd_task(p, i, j, l);
        if (l == 0) {
            t.beta = 0.0;
            t.cmode = STARPU_W;
            t.bias = p->bias ? tsr_tile(p->bias, 0, i, 0) : tsr_no_tile();
        } else {
            t.cmode = STARPU_RW;
        }
        if (l == kt - 1 && p->gelu_out)
            t.out = tsr_tile(p->gelu_out, 0, i, j);
        int rc = tsr_insert_linear_gemm(&t);
        if (rc)
            return rc;
    }
    return TSR_SUCCESS;
}

/* REDUX: a bias-fill task starts the tile, the k tasks run in parallel,
 * each on the owner of its W tile. The GeLU cannot ride on the last
 * submitted k task here: with REDUX, tasks finish in any order and the
 * partial sums are only combined when the tile is next read, so it is a
 * separate task submitted after the reduction (fwd_gelu_epilogue). */
static int fwd_tile_redux(const fwd_plan_t *p, int i, int j)
{
    tsr_tile_t c = op_tile(&p->acc, i, j);
    int rc = redux_start(c, 1, p->bias ? tsr_tile(p->bias, 0, i, 0) : tsr_no_tile());
    for (int l = 0; l < p->W->mt && !rc; l++) {
        tsr_lin_task_t t = fwd_task(p, i, j, l);
        t.cmode = STARPU_REDUX;
        t.exec_rank = tsr_tile_owner(p->W, 0, l, i);
        rc = tsr_insert_linear_gemm(&t);
    }
    return rc;
}

static int fwd_gelu_epilogue(const fwd_plan_t *p)
{
    for (int i = 0; i < op_feature_tiles(&p->acc); i++)
        for (int j = 0; j < op_token_tiles(&p->acc); j++) {
            int rc = tsr_insert_gelu_forward(op_tile(&p->acc, i, j), tsr_tile(p->gelu_out, 0, i, j));
            if (rc)
                return rc;
        }
    return TSR_SUCCESS;
}

static void mpi_redux_op(const lin_op_t *o)
{
    for (int i = 0; i < op_feature_tiles(o); i++)
        for (int j = 0; j < op_token_tiles(o); j++)
            tsr_tile_mpi_redux(op_tile(o, i, j));
}

static int fwd_run(const fwd_plan_t *p, tsr_reduction_t accum)
{
    /* with a single k tile there is nothing to reduce: one fused task per tile */
    int redux = accum == TSR_REDUCTION_REDUX && p->W->mt > 1;
    int rc = TSR_SUCCESS;
    for (int i = 0; i < op_feature_tiles(&p->acc) && !rc; i++)
        for (int j = 0; j < op_token_tiles(&p->acc) && !rc; j++)
            rc = redux ? fwd_tile_redux(p, i, j) : fwd_tile_ordered(p, i, j);
    if (rc || !redux)
        return rc;
    if (tsr_size() > 1)
        mpi_redux_op(&p->acc);
    return p->gelu_out ? fwd_gelu_epilogue(p) : TSR_SUCCESS;
}

/* ---- backward ---------------------------------------------------------------- */

typedef struct {
    lin_op_t inp, dout, dinp;
    int has_dinp; /* 0: no input gradient (dinp unused) */
    tsr_desc_t *W, *dW, *dbias;
    double dinp_beta, dparam_beta; /* 0: overwrite, 1: accumulate */
} bwd_plan_t;

/* dinp(l, j) = sum_i W(l, i) dout(i, j) */
static tsr_lin_task_t dinp_task(const bwd_plan_t *p, int l, int j, int i)
{
    return lin_task(TSR_LIN_BWD_DATA, TSR_NOTRANS, TSR_NOTRANS, tsr_tile(p->W, 0, l, i), op_tile(&p->dout, i, j),
                    op_tile(&p->dinp, l, j), &p->dinp, TSR_LIN_HEADS_C, &p->dout, TSR_CHUNK_K);
}

static int dinp_tile(const bwd_plan_t *p, int l, int j, int redux)
{
    int it = p->W->nt, rc = TSR_SUCCESS;
    if (redux)
        rc = redux_start(op_tile(&p->dinp, l, j), p->dinp_beta == 0.0, tsr_no_tile());
    for (int i = 0; i < it && !rc; i++) {
        tsr_lin_task_t t = dinp_task(p, l, j, i);
        if (redux) {
            t.cmode = STARPU_REDUX;
            t.exec_rank = tsr_tile_owner(p->W, 0, l, i);
        } else {
            t.beta = i == 0 ? p->dinp_beta : 1.0;
            t.cmode = t.beta == 0.0 ? STARPU_W : STARPU_RW;
        }
        rc = tsr_insert_linear_gemm(&t);
    }
    return rc;
}

/* dW(l, i) = sum_j inp(l, j) dout(i, j)^T; the first IC tile's tasks also
 * sum dout's rows into dbias(i). */
static tsr_lin_task_t dw_task(const bwd_plan_t *p, int l, int i, int j)
{
    tsr_lin_task_t t = lin_task(TSR_LIN_BWD_WEIGHT, TSR_NOTRANS, TSR_TRANS, op_tile(&p->inp, l, j),
                                op_tile(&p->dout, i, j), tsr_tile(p->dW, 0, l, i), &p->inp, TSR_LIN_HEADS_A,
                                &p->dout, TSR_CHUNK_N);
    t.dbias_beta = 1.0;
    return t;
}

static int dw_tile(const bwd_plan_t *p, int l, int i, int redux)
{
    int with_dbias = l == 0 && p->dbias;
    tsr_tile_t db = with_dbias ? tsr_tile(p->dbias, 0, i, 0) : tsr_no_tile();
    int rc = TSR_SUCCESS;
    if (redux)
        rc = redux_start(tsr_tile(p->dW, 0, l, i), p->dparam_beta == 0.0, tsr_no_tile());
    if (!rc && redux && with_dbias)
        rc = redux_start(db, p->dparam_beta == 0.0, tsr_no_tile());
    for (int j = 0; j < op_token_tiles(&p->dout) && !rc; j++) {
        tsr_lin_task_t t = dw_task(p, l, i, j);
        t.dbias = db;
        if (redux) {
            t.cmode = t.dbias_mode = STARPU_REDUX;
            t.exec_rank = tsr_tile_owner(t.A.d, t.A.bi, t.A.i, t.A.j);
        } else {
            t.beta = t.dbias_beta = j == 0 ? p->dparam_beta : 1.0;
            t.cmode = t.dbias_mode = t.beta == 0.0 ? STARPU_W : STARPU_RW;
        }
        rc = tsr_insert_linear_gemm(&t);
    }
    return rc;
}

/* dbias alone (no dW wanted): row sums of dout's tiles. */
static int dbias_tile(const bwd_plan_t *p, int i, int redux)
{
    tsr_tile_t db = tsr_tile(p->dbias, 0, i, 0);
    int rc = redux ? redux_start(db, p->dparam_beta == 0.0, tsr_no_tile()) : TSR_SUCCESS;
    for (int j = 0; j < op_token_tiles(&p->dout) && !rc; j++) {
        tsr_tile_t x = op_tile(&p->dout, i, j);
        if (redux)
            rc = tsr_insert_rowsum(x, 1.0, db, STARPU_REDUX, tsr_tile_owner(x.d, x.bi, x.i, x.j));
        else {
            double beta = j == 0 ? p->dparam_beta : 1.0;
            rc = tsr_insert_rowsum(x, beta, db, beta == 0.0 ? STARPU_W : STARPU_RW, -1);
        }
    }
    return rc;
}

static void bwd_mpi_redux(const bwd_plan_t *p, int dinp_redux, int param_redux)
{
    if (p->has_dinp && dinp_redux)
        mpi_redux_op(&p->dinp);
    if (param_redux && p->dW)
        tsr_redux_finish(p->dW);
    if (param_redux && p->dbias)
        tsr_redux_finish(p->dbias);
}

/* The input gradient first: it is on the critical path of the backward pass. */
static int bwd_run(const bwd_plan_t *p, tsr_reduction_t accum)
{
    int dinp_redux = accum == TSR_REDUCTION_REDUX && p->W->nt > 1;
    int param_redux = accum == TSR_REDUCTION_REDUX && op_token_tiles(&p->dout) > 1;
    int rc = TSR_SUCCESS;
    for (int l = 0; p->has_dinp && l < op_feature_tiles(&p->inp) && !rc; l++)
        for (int j = 0; j < op_token_tiles(&p->dout) && !rc; j++)
            rc = dinp_tile(p, l, j, dinp_redux);
    for (int i = 0; i < p->W->nt && !rc; i++) {
        for (int l = 0; p->dW && l < p->W->mt && !rc; l++)
            rc = dw_tile(p, l, i, param_redux);
        if (!rc && !p->dW && p->dbias)
            rc = dbias_tile(p, i, param_redux);
    }
    if (!rc && tsr_size() > 1)
        bwd_mpi_redux(p, dinp_redux, param_redux);
    return rc;
}

/* dpre = dout * gelu'(pre), one task per tile. */
static int gelu_backward_tiles(tsr_desc_t *pre, tsr_desc_t *dout, tsr_desc_t *dpre)
{
    for (int i = 0; i < dout->mt; i++)
        for (int j = 0; j < dout->nt; j++) {
            int rc = tsr_insert_gelu_backward(tsr_tile(pre, 0, i, j), tsr_tile(dout, 0, i, j),
                                              tsr_tile(dpre, 0, i, j));
            if (rc)
                return rc;
        }
    return TSR_SUCCESS;
}

/* ---- head reshape (fallback and unfused variants) ------------------------------ */

/* For every (3D tile of part p, 2D tile of X) pair that shares elements,
 * one copy task into the destination side. */
typedef struct {
    tsr_desc_t *X;
    tsr_desc_t *h[3];
    int nparts, C, NH, hd, T;
} heads_map_t;

static heads_map_t heads_map(tsr_desc_t *X, tsr_desc_t *const *h, int nparts)
{
    heads_map_t m = { 0 };
    m.X = X;
    for (int p = 0; p < nparts; p++)
        m.h[p] = h[p];
    m.nparts = nparts;
    m.C = X->m / nparts;
    m.hd = h[0]->m;
    m.NH = m.C / m.hd;
    m.T = h[0]->n;
    return m;
}

/* Mark in `seen` (X->mt x X->nt) the 2D tiles that 3D tile (bi, i3, j3) of
 * part p touches, listing them once in list; returns how many. */
static int touched_tiles(const heads_map_t *m, int p, int bi, int i3, int j3, unsigned char *seen, int *list)
{
    tsr_desc_t *H = m->h[p], *X = m->X;
    int n = 0, rows = tsr_tile_rows(H, i3), cols = tsr_tile_cols(H, j3);
    for (int z = 0; z < tsr_tile_depth(H, bi); z++) {
        int gz = bi * H->bb + z, b = gz / m->NH, h = gz % m->NH;
        int f0 = p * m->C + h * m->hd + i3 * H->mb, c0 = b * m->T + j3 * H->nb;
        for (int i2 = f0 / X->mb; i2 <= (f0 + rows - 1) / X->mb; i2++)
            for (int j2 = c0 / X->nb; j2 <= (c0 + cols - 1) / X->nb; j2++)
                if (!seen[i2 * X->nt + j2]) {
                    seen[i2 * X->nt + j2] = 1;
                    list[n++] = i2 * X->nt + j2;
                }
    }
    return n;
}

static int copy_pair(const heads_map_t *m, int p, int bi, int i3, int j3, int i2, int j2, int to_heads, double beta,
                     int first_write)
{
    tsr_desc_t *H = m->h[p], *X = m->X;
    tsr_heads_geom_t g = { m->C, m->NH, m->hd, m->T, p, i2 * X->mb, j2 * X->nb, bi * H->bb, i3 * H->mb, j3 * H->nb };
    return tsr_insert_heads_copy(&g, to_heads, beta, tsr_tile(X, 0, i2, j2), tsr_tile(H, bi, i3, j3), first_write);
}

/* With beta 0 the copies overwrite the whole destination: the first copy
 * into each destination tile is write-only (written[] tracks the 2D
 * destination tiles; a head tile's copies are consecutive). */
static int heads_reshape(const heads_map_t *m, int to_heads, double beta)
{
    size_t nx = (size_t)m->X->mt * m->X->nt;
    unsigned char *seen = calloc(nx, 1), *written = calloc(nx, 1);
    int *list = malloc(nx * sizeof *list);
    int rc = seen && written && list ? TSR_SUCCESS : TSR_ENOMEM;
    for (int p = 0; p < m->nparts && !rc; p++) {
        tsr_desc_t *H = m->h[p];
        for (int bi = 0; bi < H->bt && !rc; bi++)
            for (int i3 = 0; i3 < H->mt && !rc; i3++)
                for (int j3 = 0; j3 < H->nt && !rc; j3++) {
                    int n = touched_tiles(m, p, bi, i3, j3, seen, list);
                    for (int t = 0; t < n; t++) {
                        int first = beta == 0.0 && (to_heads ? t == 0 : !written[list[t]]);
                        if (!rc)
                            rc = copy_pair(m, p, bi, i3, j3, list[t] / m->X->nt, list[t] % m->X->nt, to_heads, beta,
                                           first);
                        seen[list[t]] = 0;
                        written[list[t]] = 1;
                    }
                }
    }
    free(seen);
    free(written);
    free(list);
    return rc;
}

/* A temporary 2D descriptor (fallback paths); destroyed by temp_destroy,
 * which waits for the tasks using it. */
static int temp_create(tsr_desc_t **d, int m, int n, int mb, int nb, const tsr_desc_t *like)
{
    return tsr_desc_create_2d(d, TSR_FLOAT32, m, n, mb, nb, &like->dist);
}

/* A temporary (as temp_create) filled from the head tensors h[0 .. nparts)
 * by reshape tasks; *d stays NULL when it cannot be created. */
static int temp_from_heads(tsr_desc_t **d, int m, int n, int mb, int nb, const tsr_desc_t *like,
                           tsr_desc_t *const *h, int nparts)
{
    *d = NULL;
    int rc = temp_create(d, m, n, mb, nb, like);
    heads_map_t map = *d ? heads_map(*d, h, nparts) : (heads_map_t){ 0 };
    if (!rc)
        rc = heads_reshape(&map, 0, 0.0);
    return rc;
}

static void temp_destroy(tsr_desc_t *d)
{
    if (!d)
        return;
    tsr_desc_flush(d);
    tsr_desc_destroy(d);
}

/* A forward's inputs flushed once its tasks are in: X, W and the bias, if any. */
static void flush_fwd_inputs(tsr_desc_t *X, tsr_desc_t *W, tsr_desc_t *bias)
{
    tsr_desc_flush(X);
    tsr_desc_flush(W);
    if (bias)
        tsr_desc_flush(bias);
}

/* ---- checks the operand tables cannot state -------------------------------------- */

/* Head tensor H is [B*NH, hd, T] for C = NH*hd channels and B*T = BT tokens. */
static int check_head_layout(const char *fn, const char *name, const tsr_desc_t *H, int C, int BT)
{
    int hd = H->m, T = H->n;
    if (C % hd != 0 || H->b % (C / hd) != 0 || (long)(H->b / (C / hd)) * T != BT) {
        tsr_log(TSR_LOG_ERROR, "%s: %s is %d x %d x %d, not [B*NH, hd, T] for C = %d and B*T = %d", fn, name, H->b,
                hd, T, C, BT);
        return TSR_ESHAPE;
    }
    return TSR_SUCCESS;
}

static int check_qkv_weight(const char *fn, const tsr_desc_t *W)
{
    if (W->n != 3 * W->m) {
        tsr_log(TSR_LOG_ERROR, "%s: W is %d x %d, the QKV weight is C x 3C", fn, W->m, W->n);
        return TSR_ESHAPE;
    }
    return TSR_SUCCESS;
}

/* ---- forward API ------------------------------------------------------------------ */

static int linear_forward_impl(const char *fn, tsr_desc_t *inp, tsr_desc_t *W, tsr_desc_t *bias, tsr_desc_t *pre,
                               tsr_desc_t *out, int gelu, tsr_reduction_t accum)
{
    const tsr_operand_t ops[] = {
        { "inp", inp, TSR_OP_IN, TSR_FLOAT32, TSR_2D(TSR_ROWS(W), TSR_ANY), NULL },
        { "W", W, TSR_OP_IN, TSR_FLOAT32, TSR_2D(TSR_ANY, TSR_ANY), NULL },
        { "bias", bias, TSR_OP_IN_OPT, TSR_FLOAT32, TSR_2D(TSR_COLS(W), TSR_FIXED(1)), NULL },
        { "out", out, TSR_OP_OUT, TSR_FLOAT32, TSR_2D(TSR_COLS(W), TSR_COLS(inp)), NULL },
        { "pre", pre, gelu ? TSR_OP_OUT : TSR_OP_OUT_OPT, TSR_FLOAT32, TSR_LIKE(out), NULL },
    };
    int rc = tsr_check_operands(fn, ops, 5);
    rc = rc ? rc : tsr_check_accum(fn, accum);
    if (rc)
        return rc;
    fwd_plan_t p = { op_2d(inp), op_2d(gelu ? pre : out), W, bias, gelu ? out : NULL };
    rc = fwd_run(&p, accum);
    flush_fwd_inputs(inp, W, bias);
    if (gelu)
        tsr_desc_flush(pre);
    return rc;
}

int tsr_linear_forward(tsr_desc_t *inp, tsr_desc_t *W, tsr_desc_t *bias, tsr_desc_t *out, tsr_reduction_t accum)
{
    return linear_forward_impl("tsr_linear_forward", inp, W, bias, NULL, out, 0, accum);
}

int tsr_linear_gelu_forward(tsr_desc_t *inp, tsr_desc_t *W, tsr_desc_t *bias, tsr_desc_t *pre, tsr_desc_t *out,
                            tsr_reduction_t accum)
{
    return linear_forward_impl("tsr_linear_gelu_forward", inp, W, bias, pre, out, 1, accum);
}

/* ---- backward API ------------------------------------------------------------------ */

static int linear_backward_impl(const char *fn, tsr_desc_t *inp, tsr_desc_t *W, tsr_desc_t *pre, tsr_desc_t *dout,
                                tsr_desc_t *dpre, tsr_desc_t *dinp, tsr_desc_t *dW, tsr_desc_t *dbias,
                                tsr_write_t dinp_mode, tsr_write_t dparam_mode, tsr_reduction_t accum,
                                int gelu)
{
    /* dpre may be dout (computed in place) */
    const tsr_operand_t ops[] = {
        { "inp", inp, TSR_OP_IN, TSR_FLOAT32, TSR_2D(TSR_ROWS(W), TSR_COLS(dout)), NULL },
        { "W", W, TSR_OP_IN, TSR_FLOAT32, TSR_2D(TSR_ANY, TSR_ANY), NULL },
        { "dout", dout, TSR_OP_IN, TSR_FLOAT32, TSR_2D(TSR_COLS(W), TSR_ANY), NULL },
        { "pre", pre, gelu ? TSR_OP_IN : TSR_OP_IN_OPT, TSR_FLOAT32, TSR_LIKE(dout), NULL },
        { "dpre", dpre, gelu ? TSR_OP_OUT : TSR_OP_OUT_OPT, TSR_FLOAT32, TSR_LIKE(dout), dout },
        { "dinp", dinp, TSR_OP_OUT_SOME, TSR_FLOAT32, TSR_LIKE(inp), NULL },
        { "dW", dW, TSR_OP_OUT_SOME, TSR_FLOAT32, TSR_LIKE(W), NULL },
        { "dbias", dbias, TSR_OP_OUT_SOME, TSR_FLOAT32, TSR_2D(TSR_COLS(W), TSR_FIXED(1)), NULL },
    };
    int rc = tsr_check_operands(fn, ops, 8);
    rc = rc ? rc : tsr_check_backward_modes(fn, dinp_mode, dparam_mode, accum);
    if (rc)
        return rc;
    if (gelu)
        rc = gelu_backward_tiles(pre, dout, dpre);
    bwd_plan_t p = { op_2d(inp), op_2d(gelu ? dpre : dout), op_2d(dinp), dinp != NULL, W, dW, dbias,
                     dinp_mode == TSR_ACCUMULATE, dparam_mode == TSR_ACCUMULATE };
    if (!rc)
        rc = bwd_run(&p, accum);
    tsr_desc_flush(inp);
    tsr_desc_flush(W);
    tsr_desc_flush(dout);
    if (gelu) {
        tsr_desc_flush(pre);
        if (dpre != dout)
            tsr_desc_flush(dpre);
    }
    return rc;
}

int tsr_linear_backward(tsr_desc_t *inp, tsr_desc_t *W, tsr_desc_t *dout, tsr_desc_t *dinp, tsr_desc_t *dW,
                        tsr_desc_t *dbias, tsr_write_t dinp_mode, tsr_write_t dparam_mode,
                        tsr_reduction_t accum)
{
    return linear_backward_impl("tsr_linear_backward", inp, W, NULL, dout, NULL, dinp, dW, dbias, dinp_mode,
                                dparam_mode, accum, 0);
}

int tsr_linear_gelu_backward(tsr_desc_t *inp, tsr_desc_t *W, tsr_desc_t *pre, tsr_desc_t *dout, tsr_desc_t *dpre,
                             tsr_desc_t *dinp, tsr_desc_t *dW, tsr_desc_t *dbias, tsr_write_t dinp_mode,
                             tsr_write_t dparam_mode, tsr_reduction_t accum)
{
    return linear_backward_impl("tsr_linear_gelu_backward", inp, W, pre, dout, dpre, dinp, dW, dbias, dinp_mode,
                                dparam_mode, accum, 1);
}

/* ---- linear layers fused with the attention reshape ------------------------------ */

/* Whether head tensor H lines up with feature tiles of fb rows (C features
 * per tensor) and token tiles of nb: then one 2D tile is one whole 3D tile.
 * Token tiles must not cross batches: nb divides T, or there is one batch. */
static int heads_aligned(const tsr_desc_t *H, int C, int fb, int nb)
{
    int hd = H->m, T = H->n;
    if (hd < 1 || C % hd != 0)
        return 0;
    int one_batch = H->b == C / hd;
    return fb % hd == 0 && C % fb == 0 && H->mt == 1 && H->bb == fb / hd && H->nb == nb &&
           (T % nb == 0 || one_batch);
}

int tsr_linear_qkv_fusable(const tsr_desc_t *inp, const tsr_desc_t *W, const tsr_desc_t *Q)
{
    return inp && W && Q && heads_aligned(Q, W->m, W->nb, inp->nb);
}

int tsr_linear_attproj_fusable(const tsr_desc_t *Y, const tsr_desc_t *W, const tsr_desc_t *out)
{
    return Y && W && out && heads_aligned(Y, W->m, W->mb, out->nb);
}

int tsr_linear_qkv_forward(tsr_desc_t *inp, tsr_desc_t *W, tsr_desc_t *bias, tsr_desc_t *Q, tsr_desc_t *K,
                           tsr_desc_t *V, tsr_reduction_t accum)
{
    const char *fn = "tsr_linear_qkv_forward";
    tsr_desc_t *h[3] = { Q, K, V };
    const tsr_operand_t ops[] = {
        { "inp", inp, TSR_OP_IN, TSR_FLOAT32, TSR_2D(TSR_ROWS(W), TSR_ANY), NULL },
        { "W", W, TSR_OP_IN, TSR_FLOAT32, TSR_2D(TSR_ANY, TSR_ANY), NULL },
        { "bias", bias, TSR_OP_IN_OPT, TSR_FLOAT32, TSR_2D(TSR_COLS(W), TSR_FIXED(1)), NULL },
        { "Q", Q, TSR_OP_OUT, TSR_FLOAT32, TSR_SIZES(TSR_ANY, TSR_ANY, TSR_ANY), NULL },
        { "K", K, TSR_OP_OUT, TSR_FLOAT32, TSR_LIKE(Q), NULL },
        { "V", V, TSR_OP_OUT, TSR_FLOAT32, TSR_LIKE(Q), NULL },
    };
    int rc = tsr_check_operands(fn, ops, 6);
    rc = rc ? rc : check_qkv_weight(fn, W);
    rc = rc ? rc : check_head_layout(fn, "Q", Q, W->m, inp->n);
    rc = rc ? rc : tsr_check_accum(fn, accum);
    if (rc)
        return rc;
    if (heads_aligned(Q, W->m, W->nb, inp->nb)) {
        fwd_plan_t p = { op_2d(inp), op_heads(h, 3, W->m, W->nb), W, bias, NULL };
        rc = fwd_run(&p, accum);
    } else {
        /* fallback: the GEMM into a 3C x BT temporary, then reshape tasks */
        tsr_desc_t *tmp = NULL;
        rc = temp_create(&tmp, W->n, inp->n, W->nb, inp->nb, inp);
        fwd_plan_t p = { op_2d(inp), op_2d(tmp), W, bias, NULL };
        if (!rc)
            rc = fwd_run(&p, accum);
        heads_map_t m = tmp ? heads_map(tmp, h, 3) : (heads_map_t){ 0 };
        if (!rc)
            rc = heads_reshape(&m, 1, 0.0);
        temp_destroy(tmp);
    }
    flush_fwd_inputs(inp, W, bias);
    return rc;
}

int tsr_linear_qkv_backward(tsr_desc_t *inp, tsr_desc_t *W, tsr_desc_t *dQ, tsr_desc_t *dK, tsr_desc_t *dV,
                            tsr_desc_t *dinp, tsr_desc_t *dW, tsr_desc_t *dbias, tsr_write_t dinp_mode,
                            tsr_write_t dparam_mode, tsr_reduction_t accum)
{
    const char *fn = "tsr_linear_qkv_backward";
    tsr_desc_t *h[3] = { dQ, dK, dV };
    const tsr_operand_t ops[] = {
        { "inp", inp, TSR_OP_IN, TSR_FLOAT32, TSR_2D(TSR_ROWS(W), TSR_ANY), NULL },
        { "W", W, TSR_OP_IN, TSR_FLOAT32, TSR_2D(TSR_ANY, TSR_ANY), NULL },
        { "dQ", dQ, TSR_OP_IN, TSR_FLOAT32, TSR_SIZES(TSR_ANY, TSR_ANY, TSR_ANY), NULL },
        { "dK", dK, TSR_OP_IN, TSR_FLOAT32, TSR_LIKE(dQ), NULL },
        { "dV", dV, TSR_OP_IN, TSR_FLOAT32, TSR_LIKE(dQ), NULL },
        { "dinp", dinp, TSR_OP_OUT_SOME, TSR_FLOAT32, TSR_LIKE(inp), NULL },
        { "dW", dW, TSR_OP_OUT_SOME, TSR_FLOAT32, TSR_LIKE(W), NULL },
        { "dbias", dbias, TSR_OP_OUT_SOME, TSR_FLOAT32, TSR_2D(TSR_COLS(W), TSR_FIXED(1)), NULL },
    };
    int rc = tsr_check_operands(fn, ops, 8);
    rc = rc ? rc : check_qkv_weight(fn, W);
    rc = rc ? rc : check_head_layout(fn, "dQ", dQ, W->m, inp->n);
    rc = rc ? rc : tsr_check_backward_modes(fn, dinp_mode, dparam_mode, accum);
    if (rc)
        return rc;
    double dinp_beta = dinp_mode == TSR_ACCUMULATE, dparam_beta = dparam_mode == TSR_ACCUMULATE;
    if (heads_aligned(dQ, W->m, W->nb, inp->nb)) {
        bwd_plan_t p = { op_2d(inp), op_heads(h, 3, W->m, W->nb), op_2d(dinp), dinp != NULL, W, dW, dbias,
                         dinp_beta, dparam_beta };
        rc = bwd_run(&p, accum);
    } else {
        /* fallback: [dQ; dK; dV] reshaped into a 3C x BT temporary first */
        tsr_desc_t *tmp;
        rc = temp_from_heads(&tmp, W->n, inp->n, W->nb, inp->nb, inp, h, 3);
        bwd_plan_t p = { op_2d(inp), op_2d(tmp), op_2d(dinp), dinp != NULL, W, dW, dbias, dinp_beta, dparam_beta };
        if (!rc)
            rc = bwd_run(&p, accum);
        temp_destroy(tmp);
    }
    tsr_desc_flush(inp);
    tsr_desc_flush(W);
    for (int p = 0; p < 3; p++)
        tsr_desc_flush(h[p]);
    return rc;
}

int tsr_linear_attproj_forward(tsr_desc_t *Y, tsr_desc_t *W, tsr_desc_t *bias, tsr_desc_t *out, tsr_reduction_t accum)
{
    const char *fn = "tsr_linear_attproj_forward";
    const tsr_operand_t ops[] = {
        { "Y", Y, TSR_OP_IN, TSR_FLOAT32, TSR_SIZES(TSR_ANY, TSR_ANY, TSR_ANY), NULL },
        { "W", W, TSR_OP_IN, TSR_FLOAT32, TSR_2D(TSR_ANY, TSR_ANY), NULL },
        { "bias", bias, TSR_OP_IN_OPT, TSR_FLOAT32, TSR_2D(TSR_COLS(W), TSR_FIXED(1)), NULL },
        { "out", out, TSR_OP_OUT, TSR_FLOAT32, TSR_2D(TSR_COLS(W), TSR_ANY), NULL },
    };
    int rc = tsr_check_operands(fn, ops, 4);
    rc = rc ? rc : check_head_layout(fn, "Y", Y, W->m, out->n);
    rc = rc ? rc : tsr_check_accum(fn, accum);
    if (rc)
        return rc;
    if (heads_aligned(Y, W->m, W->mb, out->nb)) {
        fwd_plan_t p = { op_heads(&Y, 1, W->m, W->mb), op_2d(out), W, bias, NULL };
        rc = fwd_run(&p, accum);
    } else {
        /* fallback: Y reshaped into a C x BT temporary first */
        tsr_desc_t *tmp;
        rc = temp_from_heads(&tmp, W->m, out->n, W->mb, out->nb, out, &Y, 1);
        fwd_plan_t p = { op_2d(tmp), op_2d(out), W, bias, NULL };
        if (!rc)
            rc = fwd_run(&p, accum);
        temp_destroy(tmp);
    }
    flush_fwd_inputs(Y, W, bias);
    return rc;
}

/* Fallback of the attention projection backward: Y and dY through C x BT
 * temporaries. */
static int attproj_backward_unfused(tsr_desc_t *Y, tsr_desc_t *W, tsr_desc_t *dout, tsr_desc_t *dY, tsr_desc_t *dW,
                                    tsr_desc_t *dbias, double dinp_beta, double dparam_beta, tsr_reduction_t accum)
{
    tsr_desc_t *tY, *tD = NULL;
    int rc = temp_from_heads(&tY, W->m, dout->n, W->mb, dout->nb, dout, &Y, 1);
    if (!rc && dY)
        rc = temp_create(&tD, W->m, dout->n, W->mb, dout->nb, dout);
    bwd_plan_t p = { op_2d(tY), op_2d(dout), op_2d(tD), dY != NULL, W, dW, dbias, 0.0, dparam_beta };
    if (!rc)
        rc = bwd_run(&p, accum);
    heads_map_t mD = tD ? heads_map(tD, &dY, 1) : (heads_map_t){ 0 };
    if (!rc && dY)
        rc = heads_reshape(&mD, 1, dinp_beta);
    temp_destroy(tY);
    temp_destroy(tD);
    return rc;
}

int tsr_linear_attproj_backward(tsr_desc_t *Y, tsr_desc_t *W, tsr_desc_t *dout, tsr_desc_t *dY, tsr_desc_t *dW,
                                tsr_desc_t *dbias, tsr_write_t dinp_mode, tsr_write_t dparam_mode,
                                tsr_reduction_t accum)
{
    const char *fn = "tsr_linear_attproj_backward";
    const tsr_operand_t ops[] = {
        { "Y", Y, TSR_OP_IN, TSR_FLOAT32, TSR_SIZES(TSR_ANY, TSR_ANY, TSR_ANY), NULL },
        { "W", W, TSR_OP_IN, TSR_FLOAT32, TSR_2D(TSR_ANY, TSR_ANY), NULL },
        { "dout", dout, TSR_OP_IN, TSR_FLOAT32, TSR_2D(TSR_COLS(W), TSR_ANY), NULL },
        { "dY", dY, TSR_OP_OUT_SOME, TSR_FLOAT32, TSR_LIKE(Y), NULL },
        { "dW", dW, TSR_OP_OUT_SOME, TSR_FLOAT32, TSR_LIKE(W), NULL },
        { "dbias", dbias, TSR_OP_OUT_SOME, TSR_FLOAT32, TSR_2D(TSR_COLS(W), TSR_FIXED(1)), NULL },
    };
    int rc = tsr_check_operands(fn, ops, 6);
    rc = rc ? rc : check_head_layout(fn, "Y", Y, W->m, dout->n);
    rc = rc ? rc : tsr_check_backward_modes(fn, dinp_mode, dparam_mode, accum);
    if (rc)
        return rc;
    double dinp_beta = dinp_mode == TSR_ACCUMULATE, dparam_beta = dparam_mode == TSR_ACCUMULATE;
    if (heads_aligned(Y, W->m, W->mb, dout->nb)) {
        bwd_plan_t p = { op_heads(&Y, 1, W->m, W->mb), op_2d(dout), dY ? op_heads(&dY, 1, W->m, W->mb) : op_2d(NULL),
                         dY != NULL, W, dW, dbias, dinp_beta, dparam_beta };
        rc = bwd_run(&p, accum);
    } else {
        rc = attproj_backward_unfused(Y, W, dout, dY, dW, dbias, dinp_beta, dparam_beta, accum);
    }
    tsr_desc_flush(Y);
    tsr_desc_flush(W);
    tsr_desc_flush(dout);
    return rc;
}

/* ---- unfused building blocks ------------------------------------------------------- */

int tsr_linear_bias_add(tsr_desc_t *bias, tsr_desc_t *out)
{
    const tsr_operand_t ops[] = { { "bias", bias, TSR_OP_IN, TSR_FLOAT32, TSR_2D(TSR_ROWS(out), TSR_FIXED(1)), NULL },
                                  { "out", out, TSR_OP_OUT, TSR_FLOAT32, TSR_2D(TSR_ANY, TSR_ANY), NULL } };
    int rc = tsr_check_operands("tsr_linear_bias_add", ops, 2);
    if (rc)
        return rc;
    for (int i = 0; i < out->mt && !rc; i++)
        for (int j = 0; j < out->nt && !rc; j++)
            rc = tsr_insert_bias_add(tsr_tile(bias, 0, i, 0), tsr_tile(out, 0, i, j));
    if (!rc)
        tsr_desc_flush(bias);
    return rc;
}

int tsr_gelu_forward(tsr_desc_t *pre, tsr_desc_t *out)
{
    /* out may be pre (computed in place) */
    const tsr_operand_t ops[] = { { "pre", pre, TSR_OP_IN, TSR_FLOAT32, TSR_2D(TSR_ANY, TSR_ANY), NULL },
                                  { "out", out, TSR_OP_OUT, TSR_FLOAT32, TSR_LIKE(pre), pre } };
    int rc = tsr_check_operands("tsr_gelu_forward", ops, 2);
    if (rc)
        return rc;
    for (int i = 0; i < out->mt && !rc; i++)
        for (int j = 0; j < out->nt && !rc; j++)
            rc = tsr_insert_gelu_forward(tsr_tile(pre, 0, i, j), tsr_tile(out, 0, i, j));
    if (!rc && pre != out)
        tsr_desc_flush(pre);
    return rc;
}

int tsr_gelu_backward(tsr_desc_t *pre, tsr_desc_t *dout, tsr_desc_t *dpre)
{
    /* dpre may be dout (computed in place); pre may be neither */
    const tsr_operand_t ops[] = { { "pre", pre, TSR_OP_IN, TSR_FLOAT32, TSR_2D(TSR_ANY, TSR_ANY), NULL },
                                  { "dout", dout, TSR_OP_IN, TSR_FLOAT32, TSR_LIKE(pre), NULL },
                                  { "dpre", dpre, TSR_OP_OUT, TSR_FLOAT32, TSR_LIKE(pre), dout } };
    int rc = tsr_check_operands("tsr_gelu_backward", ops, 3);
    if (!rc && dout == pre) {
        tsr_log(TSR_LOG_ERROR, "tsr_gelu_backward: pre and dout are the same descriptor");
        rc = TSR_EINVAL;
    }
    if (!rc)
        rc = gelu_backward_tiles(pre, dout, dpre);
    if (!rc) {
        tsr_desc_flush(pre);
        if (dpre != dout)
            tsr_desc_flush(dout);
    }
    return rc;
}

/* X and nparts head tensors of one shape; to_heads: the head tensors are the outputs. */
static int heads_reshape_api(const char *fn, tsr_desc_t *X, tsr_desc_t *Q, tsr_desc_t *K, tsr_desc_t *V,
                             tsr_write_t mode, int to_heads)
{
    tsr_op_role_t x_role = to_heads ? TSR_OP_IN : TSR_OP_OUT, q_role = to_heads ? TSR_OP_OUT : TSR_OP_IN;
    tsr_op_role_t kv_role = to_heads ? TSR_OP_OUT_OPT : TSR_OP_IN_OPT;
    const tsr_operand_t ops[] = {
        { "X", X, x_role, TSR_FLOAT32, TSR_2D(TSR_ANY, TSR_ANY), NULL },
        { "Q", Q, q_role, TSR_FLOAT32, TSR_SIZES(TSR_ANY, TSR_ANY, TSR_ANY), NULL },
        { "K", K, kv_role, TSR_FLOAT32, { TSR_BATCH(Q), TSR_ROWS(Q), TSR_COLS(Q) }, { TSR_ANY }, NULL },
        { "V", V, kv_role, TSR_FLOAT32, { TSR_BATCH(Q), TSR_ROWS(Q), TSR_COLS(Q) }, { TSR_ANY }, NULL },
    };
    if ((!K) != (!V)) {
        tsr_log(TSR_LOG_ERROR, "%s: K and V must be both given or both NULL", fn);
        return TSR_EINVAL;
    }
    int nparts = K ? 3 : 1, rc = tsr_check_operands(fn, ops, 4);
    if (!rc && X->m % nparts != 0) {
        tsr_log(TSR_LOG_ERROR, "%s: X has %d rows, not %d x C", fn, X->m, nparts);
        rc = TSR_ESHAPE;
    }
    rc = rc ? rc : check_head_layout(fn, "Q", Q, X->m / nparts, X->n);
    rc = rc ? rc : tsr_check_choice(fn, "mode", mode, 2);
    if (rc)
        return rc;
    tsr_desc_t *h[3] = { Q, K, V };
    heads_map_t m = heads_map(X, h, nparts);
    rc = heads_reshape(&m, to_heads, mode == TSR_ACCUMULATE ? 1.0 : 0.0);
    if (to_heads)
        tsr_desc_flush(X);
    else
        for (int p = 0; p < nparts; p++)
            tsr_desc_flush(h[p]);
    return rc;
}

int tsr_heads_split(tsr_desc_t *X, tsr_desc_t *Q, tsr_desc_t *K, tsr_desc_t *V, tsr_write_t mode)
{
    return heads_reshape_api("tsr_heads_split", X, Q, K, V, mode, 1);
}

int tsr_heads_merge(tsr_desc_t *Q, tsr_desc_t *K, tsr_desc_t *V, tsr_desc_t *X, tsr_write_t mode)
{
    return heads_reshape_api("tsr_heads_merge", X, Q, K, V, mode, 0);
}
