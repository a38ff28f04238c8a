/* The row ops (float32): one op per entry of TSR_ROW_OPS, all with the same
 * function, which unpacks the tiles and runs the op's row function. */
#include "tsr_runtime_rows.h"

typedef struct {
    tsr_row_op_t op;
    float eps;
} row_args_t;

#define TSR_ROW_IN(name, nin, nout, flops) nin,
#define TSR_ROW_OUT(name, nin, nout, flops) nout,
#define TSR_ROW_FLOPS(name, nin, nout, flops) flops,
static const int row_nin[] = { TSR_ROW_OPS(TSR_ROW_IN) };
static const int row_nout[] = { TSR_ROW_OPS(TSR_ROW_OUT) };
static const double row_flops[] = { TSR_ROW_OPS(TSR_ROW_FLOPS) };

/* A tile's stride between tokens: 0 for a single column (a per-feature vector). */
static int token_stride(tsr_view_t v) { return v.cols > 1 ? v.ld : 0; }

static void row(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const row_args_t *a = cl_arg;
    int nin = row_nin[a->op], nout = row_nout[a->op];
    tsr_rows_t r = { .eps = a->eps };
    tsr_view_t x = tsr_view(buffers[0], ex);
    r.m = x.rows;
    for (int k = 0; k < nin; k++) {
        tsr_view_t v = tsr_view(buffers[k], ex);
        r.in[k] = (const float *)v.ptr;
        r.ldin[k] = token_stride(v);
    }
    for (int k = 0; k < nout; k++) {
        tsr_view_t v = tsr_view(buffers[nin + k], ex);
        r.out[k] = (float *)v.ptr;
        r.ldout[k] = token_stride(v);
    }
    TSR_KERNEL(ex, rows, a->op, x.cols, &r);
}

static tsr_op_t row_ops[TSR_NROW_OPS] = {
#define TSR_ROW_ENTRY(op, nin, nout, flops) { .name = #op, .cpu = row, .cuda = TSR_CUDA(row), .no_float64 = 1 },
    TSR_ROW_OPS(TSR_ROW_ENTRY)
#undef TSR_ROW_ENTRY
};

int tsr_insert_row(tsr_row_op_t op, const tsr_tile_t *tiles, float eps)
{
    if ((int)op < 0 || op >= TSR_NROW_OPS)
        return TSR_EINVAL;
    int n = row_nin[op] + row_nout[op];
    enum starpu_data_access_mode modes[TSR_MAX_TASK_TILES];
    for (int k = 0; k < n; k++)
        modes[k] = k < row_nin[op] ? STARPU_R : STARPU_W;
    row_args_t a = { op, eps };
    double elems = (double)tsr_tile_rows(tiles[0].d, tiles[0].i) * tsr_tile_cols(tiles[0].d, tiles[0].j);
    return tsr_submit(&row_ops[op], tiles, modes, n, &a, sizeof a, -1, row_flops[op] * elems);
}
