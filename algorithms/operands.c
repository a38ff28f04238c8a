/* The operand checker of the tiled algorithms: see internal/tsr_operands.h. */
#include <stdio.h>
#include "internal/tsr_operands.h"

static int extent(const tsr_desc_t *d, int dim)
{
    return dim == TSR_DIM_B ? d->b : dim == TSR_DIM_M ? d->m : d->n;
}

static int tile_size(const tsr_desc_t *d, int dim)
{
    return dim == TSR_DIM_B ? d->bb : dim == TSR_DIM_M ? d->mb : d->nb;
}

/* A tile size as it cuts an extent. */
static int cut(int tile, int ext) { return tile < ext ? tile : ext; }

static int optional(const tsr_operand_t *o)
{
    return o->role == TSR_OP_IN_OPT || o->role == TSR_OP_OUT_OPT || o->role == TSR_OP_OUT_SOME;
}

static int written(const tsr_operand_t *o)
{
    return o->role == TSR_OP_OUT || o->role == TSR_OP_OUT_OPT || o->role == TSR_OP_OUT_SOME;
}

/* The size that w asks of operand o along dim (tiles: a tile size, cut by
 * o's extent); 0: any. */
static int wanted(const tsr_operand_t *o, const tsr_want_t *w, int dim, int tiles)
{
    int v = w->fixed;
    if (w->of)
        v = tiles ? tile_size(w->of, w->dim) : extent(w->of, w->dim);
    else if (v == TSR_WHOLE_DIM)
        v = extent(o->desc, dim);
    return tiles && v > 0 ? cut(v, extent(o->desc, dim)) : v;
}

/* "b x m x n" of three sizes, 0 printed as "*". */
static void format_sizes(char *buf, size_t size, const int v[3])
{
    char s[3][16] = { "*", "*", "*" };
    for (int k = 0; k < 3; k++)
        if (v[k] > 0)
            snprintf(s[k], sizeof s[k], "%d", v[k]);
    snprintf(buf, size, "%s x %s x %s", s[0], s[1], s[2]);
}

/* " (from X, Y)": the other operands that the wants w of o refer to; "" if none. */
static void format_sources(char *buf, size_t size, const tsr_operand_t *ops, int n, const tsr_operand_t *o,
                           const tsr_want_t *w)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int k = 0; k < 3; k++) {
        const char *name = NULL;
        for (int i = 0; i < n && w[k].of && w[k].of != o->desc; i++)
            if (ops[i].desc == w[k].of)
                name = ops[i].name;
        int seen = 0;
        for (int l = 0; l < k; l++)
            seen |= w[l].of == w[k].of;
        if (name && !seen && len < size)
            len += (size_t)snprintf(buf + len, size - len, "%s%s", len ? ", " : " (from ", name);
    }
    if (len && len < size)
        snprintf(buf + len, size - len, ")");
}

static int check_present(const char *fn, const tsr_operand_t *ops, int n)
{
    char some[256] = "";
    size_t len = 0;
    int given = 0;
    for (int i = 0; i < n; i++) {
        if (!ops[i].desc && !optional(&ops[i])) {
            tsr_log(TSR_LOG_ERROR, "%s: %s is NULL", fn, ops[i].name);
            return TSR_EINVAL;
        }
        if (ops[i].role != TSR_OP_OUT_SOME)
            continue;
        given |= ops[i].desc != NULL;
        if (len < sizeof some)
            len += (size_t)snprintf(some + len, sizeof some - len, "%s%s", len ? ", " : "", ops[i].name);
    }
    if (len && !given) {
        tsr_log(TSR_LOG_ERROR, "%s: %s are all NULL: nothing to compute", fn, some);
        return TSR_EINVAL;
    }
    return TSR_SUCCESS;
}

static int check_aliases(const char *fn, const tsr_operand_t *ops, int n)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n && ops[i].desc && written(&ops[i]); j++)
            if (j != i && ops[j].desc == ops[i].desc && ops[j].desc != ops[i].may_be) {
                tsr_log(TSR_LOG_ERROR, "%s: %s and %s are the same descriptor: an output cannot also be another "
                        "operand", fn, ops[i].name, ops[j].name);
                return TSR_EINVAL;
            }
    return TSR_SUCCESS;
}

static int check_dtypes(const char *fn, const tsr_operand_t *ops, int n)
{
    const tsr_operand_t *first = NULL;
    for (int i = 0; i < n; i++) {
        const tsr_desc_t *d = ops[i].desc;
        if (!d)
            continue;
        first = first ? first : &ops[i];
        int same = ops[i].dtype == TSR_DTYPE_FIRST, want = same ? (int)first->desc->dtype : ops[i].dtype;
        /* a float32 operand may be bf16: the op kit computes bf16 tiles in
         * float32 (tsr_submit refuses the mixtures an op does not take) */
        int bf16_ok = want == TSR_FLOAT32 && d->dtype == TSR_BFLOAT16;
        if ((int)d->dtype != want && !bf16_ok) {
            if (same)
                tsr_log(TSR_LOG_ERROR, "%s: %s is %s, expected %s (the type of %s)", fn, ops[i].name,
                        tsr_dtype_name(d->dtype), tsr_dtype_name(first->desc->dtype), first->name);
            else
                tsr_log(TSR_LOG_ERROR, "%s: %s is %s, expected %s", fn, ops[i].name, tsr_dtype_name(d->dtype),
                        tsr_dtype_name((tsr_dtype_t)want));
            return TSR_EDTYPE;
        }
    }
    return TSR_SUCCESS;
}

/* Shapes (tiles = 0) or tile sizes (tiles = 1) against the wants. */
static int check_sizes(const char *fn, const tsr_operand_t *ops, int n, int tiles)
{
    for (int i = 0; i < n; i++) {
        const tsr_operand_t *o = &ops[i];
        if (!o->desc)
            continue;
        const tsr_want_t *w = tiles ? o->tiles : o->shape;
        int want[3], has[3], tile[3], bad = 0;
        for (int k = 0; k < 3; k++) {
            want[k] = wanted(o, &w[k], k, tiles);
            has[k] = extent(o->desc, k);
            tile[k] = cut(tile_size(o->desc, k), has[k]);
            bad |= want[k] > 0 && (tiles ? tile[k] : has[k]) != want[k];
        }
        if (!bad)
            continue;
        char s_has[64], s_tile[64], s_want[64], from[256];
        format_sizes(s_has, sizeof s_has, has);
        format_sizes(s_tile, sizeof s_tile, tile);
        format_sizes(s_want, sizeof s_want, want);
        format_sources(from, sizeof from, ops, n, o, w);
        if (tiles)
            tsr_log(TSR_LOG_ERROR, "%s: %s is %s in tiles of %s, expected tiles of %s%s", fn, o->name, s_has, s_tile,
                    s_want, from);
        else
            tsr_log(TSR_LOG_ERROR, "%s: %s is %s, expected %s%s", fn, o->name, s_has, s_want, from);
        return tiles ? TSR_ETILE : TSR_ESHAPE;
    }
    return TSR_SUCCESS;
}

/* Tasks may move tiles between any ranks, but two block-cyclic operands on
 * different grids are a mistake of the caller: refused. */
static int check_grids(const char *fn, const tsr_operand_t *ops, int n)
{
    const tsr_operand_t *first = NULL;
    for (int i = 0; i < n; i++) {
        const tsr_desc_t *d = ops[i].desc;
        if (!d || d->dist.kind != TSR_DIST_BLOCK_CYCLIC)
            continue;
        first = first ? first : &ops[i];
        const tsr_dist_t *f = &first->desc->dist;
        if (d->dist.P != f->P || d->dist.Q != f->Q) {
            tsr_log(TSR_LOG_ERROR, "%s: %s is on a %d x %d process grid, %s on %d x %d", fn, ops[i].name, d->dist.P,
                    d->dist.Q, first->name, f->P, f->Q);
            return TSR_EDIST;
        }
    }
    return TSR_SUCCESS;
}

int tsr_check_operands(const char *fn, const tsr_operand_t *ops, int n)
{
    int rc = check_present(fn, ops, n);
    if (!rc && !tsr_initialized())
        rc = TSR_ENOTINIT; /* nothing is read from a descriptor before tsr_init */
    if (!rc)
        rc = check_aliases(fn, ops, n);
    if (!rc)
        rc = check_dtypes(fn, ops, n);
    if (!rc)
        rc = check_sizes(fn, ops, n, 0);
    if (!rc)
        rc = check_sizes(fn, ops, n, 1);
    if (!rc)
        rc = check_grids(fn, ops, n);
    return rc;
}

int tsr_check_choice(const char *fn, const char *what, int value, int count)
{
    if (value < 0 || value >= count) {
        tsr_log(TSR_LOG_ERROR, "%s: %s is %d, expected 0 to %d", fn, what, value, count - 1);
        return TSR_EINVAL;
    }
    return TSR_SUCCESS;
}

int tsr_check_accum(const char *fn, tsr_reduction_t accum)
{
    return tsr_check_choice(fn, "accum (TSR_REDUCTION_ORDERED or TSR_REDUCTION_REDUX)", (int)accum, 2);
}

int tsr_check_backward_modes(const char *fn, tsr_write_t dinp_mode, tsr_write_t dparam_mode, tsr_reduction_t accum)
{
    int rc = tsr_check_choice(fn, "dinp_mode", dinp_mode, 2);
    rc = rc ? rc : tsr_check_choice(fn, "dparam_mode", dparam_mode, 2);
    return rc ? rc : tsr_check_accum(fn, accum);
}
