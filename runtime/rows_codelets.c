/* The row ops (float32; bf16 tiles through the op table's float32 copies):
 * one op per entry of TSR_ROW_OPS, all with the same function, which
 * unpacks the tiles and runs the op's row function. */
#include "tsr_runtime_rows.h"

typedef struct {
    tsr_row_op_t op;
    float eps;
    tsr_write_t write[TSR_ROW_MAX_OUT]; /* from each output's access mode */
} row_args_t;

/* A tile's stride between tokens: 0 for a single column (a per-feature vector). */
static int token_stride(tsr_view_t v) { return v.cols > 1 ? v.ld : 0; }

static void row(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const row_args_t *a = cl_arg;
    tsr_row_info_t info = tsr_row_info(a->op);
    tsr_rows_t r = { .eps = a->eps };
    tsr_view_t x = tsr_view(buffers[0], ex);
    r.m = x.rows;
    for (int k = 0; k < info.nin; k++) {
        tsr_view_t v = tsr_view(buffers[k], ex);
        r.in[k] = (const float *)v.ptr;
        r.ldin[k] = token_stride(v);
    }
    for (int k = 0; k < info.nout; k++) {
        tsr_view_t v = tsr_view(buffers[info.nin + k], ex);
        r.out[k] = (float *)v.ptr;
        r.ldout[k] = token_stride(v);
        r.mout[k] = v.rows;
        r.write[k] = a->write[k];
    }
    /* not TSR_KERNEL: the CPU side also fails (out of memory for its staging) */
#if TSR_HAVE_CUDA
    if (ex->cuda) {
        tsr_kernel_check(tsr_cuda_rows(ex->stream, a->op, x.cols, &r));
        return;
    }
#endif
    tsr_kernel_check(tsr_cpu_rows(a->op, x.cols, &r));
}

static tsr_op_t row_ops[TSR_NROW_OPS] = {
#define TSR_ROW_ENTRY(op, nin, nout, nsum, flops) { .name = #op, .cpu = row, .cuda = TSR_CUDA(row), .no_float64 = 1 },
    TSR_ROW_OPS(TSR_ROW_ENTRY)
#undef TSR_ROW_ENTRY
};

int tsr_insert_row(tsr_row_op_t op, const tsr_tile_t *tiles, const enum starpu_data_access_mode *out_modes, float eps,
                   int exec_rank)
{
    if ((int)op < 0 || op >= TSR_NROW_OPS)
        return TSR_EINVAL;
    tsr_row_info_t info = tsr_row_info(op);
    int n = info.nin + info.nout;
    enum starpu_data_access_mode modes[TSR_MAX_TASK_TILES];
    row_args_t a = { .op = op, .eps = eps };
    for (int k = 0; k < n; k++)
        modes[k] = k < info.nin ? STARPU_R : out_modes ? out_modes[k - info.nin] : STARPU_W;
    for (int k = 0; k < info.nout; k++)
        a.write[k] = tsr_write_of(modes[info.nin + k]);
    double elems = (double)tsr_tile_rows(tiles[0].d, tiles[0].i) * tsr_tile_cols(tiles[0].d, tiles[0].j);
    return tsr_submit(&row_ops[op], tiles, modes, n, &a, sizeof a, exec_rank, info.flops * elems);
}
