/* Tiled GPT-2 encoder: token + position embeddings (forward) and the
 * scatter-add of their gradients (backward). Every task adds columns of
 * source tiles into columns of one destination tile (a column gather-add);
 * the column maps travel in the task arguments. */
#include <stdlib.h>
#include "tsr_encoder.h"
#include "tsr_runtime_encoder.h"
#include "internal/tsr_operands.h"

/* One column added into a destination tile: column src_col of tile
 * (row i, column j) of src goes to column dst_col. */
typedef struct { tsr_desc_t *src; int j, src_col, dst_col; } contrib_t;

/* Contributions grouped by destination tile: those of tile k are
 * c[start[k] .. start[k+1]). */
typedef struct { contrib_t *c; int *start; int nbuckets; } buckets_t;

/* Validation shared by forward and backward: act is out (forward) or dout,
 * wte and wpe the embeddings or their gradients (backward: either may be
 * NULL); all C x columns with the channel tiles of act. */
static int check_encoder(const char *fn, const tsr_desc_t *act, const tsr_desc_t *wte, const tsr_desc_t *wpe,
                         const int *tokens, int B, int T, int backward)
{
    if (!tokens) {
        tsr_log(TSR_LOG_ERROR, "%s: tokens is NULL", fn);
        return TSR_EINVAL;
    }
    tsr_op_role_t act_role = backward ? TSR_OP_IN : TSR_OP_OUT, emb_role = backward ? TSR_OP_OUT_SOME : TSR_OP_IN;
    const tsr_operand_t ops[] = {
        { backward ? "dout" : "out", act, act_role, TSR_FLOAT32, TSR_2D(TSR_ANY, TSR_ANY), NULL },
        { backward ? "dwte" : "wte", wte, emb_role, TSR_FLOAT32, TSR_2D(TSR_ROWS(act), TSR_ANY), NULL },
        { backward ? "dwpe" : "wpe", wpe, emb_role, TSR_FLOAT32, TSR_2D(TSR_ROWS(act), TSR_ANY), NULL },
    };
    int rc = tsr_check_operands(fn, ops, 3);
    if (rc)
        return rc;
    if (B < 1 || T < 1 || (long long)B * T != act->n) {
        tsr_log(TSR_LOG_ERROR, "%s: B = %d, T = %d for activations with %d token columns", fn, B, T, act->n);
        return B < 1 || T < 1 ? TSR_EINVAL : TSR_ESHAPE;
    }
    if (wpe && wpe->n < T) {
        tsr_log(TSR_LOG_ERROR, "%s: T = %d is longer than wpe's %d positions", fn, T, wpe->n);
        return TSR_ESHAPE;
    }
    if ((wte && wte->parent && !backward) || (wpe && wpe->parent)) {
        tsr_log(TSR_LOG_ERROR, "%s: %s is a view (tsr_desc_view): only dwte may be", fn, wpe && wpe->parent ?
                (backward ? "dwpe" : "wpe") : "wte");
        return TSR_EINVAL;
    }
    int vocab = wte ? (wte->parent ? wte->parent->n : wte->n) : 0;
    for (int k = 0; wte && k < act->n; k++)
        if (tokens[k] < 0 || tokens[k] >= vocab) {
            tsr_log(TSR_LOG_ERROR, "%s: token %d at position %d is not in [0, %d)", fn, tokens[k], k, vocab);
            return TSR_EINVAL;
        }
    return TSR_SUCCESS;
}

/* Pack the contributions c[0..n) (consecutive per source tile) into tasks of
 * at most TSR_MAX_TASK_TILES - 1 source tiles, chained in order on dst. With
 * TSR_OVERWRITE the first task writes dst from zero (a tile nothing hits is
 * zeroed). */
static int submit_ordered(tsr_tile_t dst, const contrib_t *c, int n, tsr_write_t mode, tsr_colmap_t *map)
{
    if (n == 0)
        return mode == TSR_OVERWRITE ? tsr_insert_zero(dst) : TSR_SUCCESS;
    int first = 1;
    for (int k = 0; k < n;) {
        tsr_tile_t src[TSR_MAX_TASK_TILES];
        int nsrc = 0, nmap = 0;
        for (; k < n; k++) {
            int same = nsrc > 0 && c[k].src == src[nsrc - 1].d && c[k].j == src[nsrc - 1].j;
            if (!same) {
                if (nsrc == TSR_MAX_TASK_TILES - 1)
                    break;
                src[nsrc++] = tsr_tile(c[k].src, 0, dst.i, c[k].j);
            }
            map[nmap++] = (tsr_colmap_t){ c[k].dst_col, nsrc - 1, c[k].src_col };
        }
        enum starpu_data_access_mode dmode = first && mode == TSR_OVERWRITE ? STARPU_W : STARPU_RW;
        int rc = tsr_insert_gather_columns(dst, dmode, src, nsrc, map, nmap, -1);
        if (rc)
            return rc;
        first = 0;
    }
    return TSR_SUCCESS;
}

/* One STARPU_REDUX task per source tile: the contributions of the token
 * tiles run in parallel. Under MPI they run on dst's owner too (the dout
 * tiles travel there, as in the ordered chain): a cross-rank reduction would
 * send a whole partial gradient tile from every rank, mostly zeros for an
 * embedding. */
static int submit_redux(tsr_tile_t dst, const contrib_t *c, int n, tsr_write_t mode, tsr_colmap_t *map)
{
    if (n == 0)
        return mode == TSR_OVERWRITE ? tsr_insert_zero(dst) : TSR_SUCCESS;
    int rc = tsr_tile_enable_redux(dst);
    if (!rc && mode == TSR_OVERWRITE)
        rc = tsr_insert_zero(dst);
    for (int k = 0; k < n && !rc;) {
        tsr_tile_t src = tsr_tile(c[k].src, 0, dst.i, c[k].j);
        int nmap = 0;
        for (; k < n && c[k].src == src.d && c[k].j == src.j; k++)
            map[nmap++] = (tsr_colmap_t){ c[k].dst_col, 0, c[k].src_col };
        rc = tsr_insert_gather_columns(dst, STARPU_REDUX, &src, 1, map, nmap, -1);
    }
    return rc;
}

static int cmp_contrib(const void *a, const void *b)
{
    const contrib_t *x = a, *y = b;
    if (x->j != y->j)
        return x->j < y->j ? -1 : 1;
    return (x->dst_col > y->dst_col) - (x->dst_col < y->dst_col);
}

/* Forward contributions to token tile j: the wpe columns, then the wte
 * columns, each sorted by source tile. Returns the count. */
static int forward_contribs(tsr_desc_t *out, tsr_desc_t *wte, tsr_desc_t *wpe, const int *tokens, int T, int j,
                            contrib_t *c)
{
    int cols = tsr_tile_cols(out, j);
    for (int col = 0; col < cols; col++) {
        int bt = j * out->nb + col, t = bt % T;
        c[col] = (contrib_t){ wpe, t / wpe->nb, t % wpe->nb, col };
        c[cols + col] = (contrib_t){ wte, tokens[bt] / wte->nb, tokens[bt] % wte->nb, col };
    }
    qsort(c, cols, sizeof *c, cmp_contrib);
    qsort(c + cols, cols, sizeof *c, cmp_contrib);
    return 2 * cols;
}

int tsr_encoder_forward(tsr_desc_t *out, tsr_desc_t *wte, tsr_desc_t *wpe, const int *tokens, int B, int T)
{
    int rc = check_encoder("tsr_encoder_forward", out, wte, wpe, tokens, B, T, 0);
    if (rc)
        return rc;
    contrib_t *c = malloc(2 * (size_t)out->nb * sizeof *c);
    tsr_colmap_t *map = malloc(2 * (size_t)out->nb * sizeof *map);
    if (!c || !map)
        rc = TSR_ENOMEM;
    for (int j = 0; j < out->nt && !rc; j++) {
        int n = forward_contribs(out, wte, wpe, tokens, T, j, c);
        for (int i = 0; i < out->mt && !rc; i++)
            rc = submit_ordered(tsr_tile(out, 0, i, j), c, n, TSR_OVERWRITE, map);
    }
    free(c);
    free(map);
    tsr_desc_flush(wte);
    tsr_desc_flush(wpe);
    return rc;
}

/* Counting sort of the token columns of dout by destination tile
 * (dst_tile[bt], column dst_col[bt]; tile -1: none, left out); stable, so
 * token order is kept inside a bucket and the source tiles come in
 * increasing order. */
static int bucket_tokens(tsr_desc_t *dout, const int *dst_tile, const int *dst_col, int nbuckets, buckets_t *b)
{
    int BT = dout->n;
    b->nbuckets = nbuckets;
    b->c = malloc((size_t)BT * sizeof *b->c);
    b->start = calloc((size_t)nbuckets + 1, sizeof *b->start);
    int *fill = malloc((size_t)nbuckets * sizeof *fill);
    if (!b->c || !b->start || !fill) {
        free(fill);
        return TSR_ENOMEM;
    }
    for (int bt = 0; bt < BT; bt++)
        if (dst_tile[bt] >= 0)
            b->start[dst_tile[bt] + 1]++;
    for (int k = 0; k < nbuckets; k++) {
        b->start[k + 1] += b->start[k];
        fill[k] = b->start[k];
    }
    for (int bt = 0; bt < BT; bt++)
        if (dst_tile[bt] >= 0)
            b->c[fill[dst_tile[bt]]++] = (contrib_t){ dout, bt / dout->nb, bt % dout->nb, dst_col[bt] };
    free(fill);
    return TSR_SUCCESS;
}

/* Buckets of the columns of dout by wte tile (which == 0) or wpe tile; a
 * dwte view (tsr_desc_view) takes the tokens of its columns alone. */
static int gradient_buckets(tsr_desc_t *dout, tsr_desc_t *grad, const int *tokens, int T, int which, buckets_t *b)
{
    int BT = dout->n, first = grad->j0 * grad->nb; /* the view's first embedding row */
    int *tile = malloc((size_t)BT * sizeof *tile), *col = malloc((size_t)BT * sizeof *col);
    int rc = tile && col ? TSR_SUCCESS : TSR_ENOMEM;
    for (int bt = 0; bt < BT && !rc; bt++) {
        int row = (which == 0 ? tokens[bt] : bt % T) - first; /* embedding row of this token */
        int in = row >= 0 && row < grad->n;
        tile[bt] = in ? row / grad->nb : -1;
        col[bt] = in ? row % grad->nb : 0;
    }
    if (!rc)
        rc = bucket_tokens(dout, tile, col, grad->nt, b);
    free(tile);
    free(col);
    return rc;
}

/* Submit every tile of one gradient descriptor. */
static int submit_gradient(tsr_desc_t *grad, const buckets_t *b, tsr_write_t mode, tsr_reduction_t accum,
                           tsr_colmap_t *map)
{
    int rc = TSR_SUCCESS;
    for (int i = 0; i < grad->mt && !rc; i++)
        for (int k = 0; k < grad->nt && !rc; k++) {
            const contrib_t *c = b->c + b->start[k];
            int n = b->start[k + 1] - b->start[k];
            tsr_tile_t dst = tsr_tile(grad, 0, i, k);
            rc = accum == TSR_REDUCTION_REDUX ? submit_redux(dst, c, n, mode, map)
                                          : submit_ordered(dst, c, n, mode, map);
        }
    return rc;
}

int tsr_encoder_backward(tsr_desc_t *dwte, tsr_desc_t *dwpe, tsr_desc_t *dout, const int *tokens, int B, int T,
                         tsr_write_t mode, tsr_reduction_t accum)
{
    const char *fn = "tsr_encoder_backward";
    int rc = check_encoder(fn, dout, dwte, dwpe, tokens, B, T, 1);
    rc = rc ? rc : tsr_check_choice(fn, "mode", mode, 2);
    rc = rc ? rc : tsr_check_accum(fn, accum);
    if (rc)
        return rc;
    tsr_desc_t *grads[2] = { dwte, dwpe };
    buckets_t b[2] = { { NULL, NULL, 0 }, { NULL, NULL, 0 } };
    tsr_colmap_t *map = malloc((size_t)dout->n * sizeof *map);
    if (!map)
        rc = TSR_ENOMEM;
    for (int w = 0; w < 2 && !rc; w++)
        if (grads[w])
            rc = gradient_buckets(dout, grads[w], tokens, T, w, &b[w]);
    for (int w = 0; w < 2 && !rc; w++)
        if (grads[w])
            rc = submit_gradient(grads[w], &b[w], mode, accum, map);
    for (int w = 0; w < 2; w++) {
        free(b[w].c);
        free(b[w].start);
    }
    free(map);
    tsr_desc_flush(dout);
    return rc;
}
