/* Tessera runtime layer (internal): task-insert helpers of the fused linear
 * layers (float32). Each call submits one task on the given tiles through
 * tsr_submit (MPI-aware); no loops over tiles here. */
#ifndef TSR_RUNTIME_LINEAR_H
#define TSR_RUNTIME_LINEAR_H
#include "tsr_runtime.h"
#include "tsr_compute_linear.h"

/* Which codelet (and so which perf-model history) a linear GEMM task uses. */
typedef enum { TSR_LIN_FWD = 0, TSR_LIN_BWD_DATA, TSR_LIN_BWD_WEIGHT, TSR_LIN_NKINDS } tsr_lin_kind_t;

/* Operands that are head tiles of a 3D [B*NH, hd, T] tensor (bit mask). */
enum { TSR_LIN_HEADS_A = 1, TSR_LIN_HEADS_B = 2, TSR_LIN_HEADS_C = 4 };

/* One fused GEMM task: C = alpha op(A) op(B) + beta C, plus the optional
 * parts whose tile has d != NULL:
 *   bias:  C = bias + alpha op(A) op(B) (bias broadcast along columns; beta
 *          is ignored, C may be write-only);
 *   out:   afterwards out = gelu(C) (out write-only; C keeps the
 *          pre-activation);
 *   dbias: dbias = dbias_beta dbias + row sums of B (B is stored as
 *          op(B)^T, i.e. tb == TSR_TRANS: B's rows are C's columns).
 * chunk/hd/heads: the GEMM dimension cut in heads of hd rows and the
 * operands that are head tiles (see tsr_compute_linear.h). */
typedef struct {
    tsr_lin_kind_t kind;
    tsr_trans_t ta, tb;
    double alpha, beta;
    tsr_chunk_dim_t chunk;
    int hd, heads;
    tsr_tile_t A, B, C;
    enum starpu_data_access_mode cmode; /* STARPU_W, STARPU_RW or STARPU_REDUX */
    tsr_tile_t bias, out, dbias;
    enum starpu_data_access_mode dbias_mode;
    double dbias_beta;
    int exec_rank; /* -1: the owner of C */
} tsr_lin_task_t;

/* A tile that is absent (for the optional parts above). */
static inline tsr_tile_t tsr_no_tile(void)
{
    tsr_tile_t t = { NULL, 0, 0, 0 };
    return t;
}

int tsr_insert_linear_gemm(const tsr_lin_task_t *t);
/* C = bias broadcast along columns (bias.d NULL: C = 0); C write-only.
 * For a head tile C, head z takes bias rows z*rows .. */
int tsr_insert_bias_fill(tsr_tile_t bias, tsr_tile_t C);
/* C += bias broadcast along columns */
int tsr_insert_bias_add(tsr_tile_t bias, tsr_tile_t C);
/* out = gelu(pre) (out write-only); out may be the pre tile (in place) */
int tsr_insert_gelu_forward(tsr_tile_t pre, tsr_tile_t out);
/* dpre = dout * gelu'(pre); dpre may be the dout tile (in place) */
int tsr_insert_gelu_backward(tsr_tile_t pre, tsr_tile_t dout, tsr_tile_t dpre);
/* y = beta y + row sums of X (y: rows x 1); ymode STARPU_W (beta 0),
 * STARPU_RW or STARPU_REDUX (beta 1); exec_rank -1: the owner of y. */
int tsr_insert_rowsum(tsr_tile_t X, double beta, tsr_tile_t y, enum starpu_data_access_mode ymode, int exec_rank);
/* Reshape the elements X (2D tile) and Y (head tile) share, geometry g with
 * the tiles' origins filled in: to_heads: Y = X + beta Y, else X = Y + beta X.
 * The destination is read-write (several tasks fill parts of it), or
 * write-only for the first of the tasks that together overwrite it
 * (first_write, beta 0), so it needs no valid previous value. */
int tsr_insert_heads_copy(const tsr_heads_geom_t *g, int to_heads, double beta, tsr_tile_t X, tsr_tile_t Y,
                          int first_write);
#endif
