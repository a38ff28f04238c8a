/* The operand checker of the tiled algorithms (algorithms/operands.c); not
 * installed. A call states its descriptor operands as a table, expected
 * type, shape and tiling included, and tsr_check_operands checks them all
 * in one order with one message format:
 *   presence (TSR_EINVAL), tsr_init (TSR_ENOTINIT), outputs that are another
 *   operand (TSR_EINVAL), element types (TSR_EDTYPE), shapes (TSR_ESHAPE),
 *   tiles (TSR_ETILE), process grids (TSR_EDIST).
 * What a table cannot say (a scalar argument, a relation such as heads x
 * head size = channels) stays a small check in the algorithm. */
#ifndef TSR_OPERANDS_H
#define TSR_OPERANDS_H

#include "tsr_algorithms.h"

/* What the call does with an operand. An output may not be any other
 * operand of the call (a task would read tiles that another task is
 * overwriting), except its may_be. Optional operands may be NULL; of the
 * TSR_OP_OUT_SOME outputs (the gradients a backward computes on demand) at
 * least one must be given. */
typedef enum { TSR_OP_IN, TSR_OP_OUT, TSR_OP_IN_OPT, TSR_OP_OUT_OPT, TSR_OP_OUT_SOME } tsr_op_role_t;

/* The dimensions of a descriptor: batch, rows, columns. */
enum { TSR_DIM_B, TSR_DIM_M, TSR_DIM_N };

/* One expected size along a dimension: an extent in `shape`, a tile size in
 * `tiles`. Either that of another operand `of` along `dim` (its extent, or
 * its tile size), or fixed: 0 any, TSR_WHOLE_DIM (tiles) the whole extent
 * in one tile, else that value. A reference to an optional operand that is
 * NULL asks for nothing. */
typedef struct {
    int fixed;
    const tsr_desc_t *of;
    int dim;
} tsr_want_t;

#define TSR_WHOLE_DIM (-1)

#define TSR_ANY { 0, NULL, 0 }
#define TSR_FIXED(v) { (v), NULL, 0 }
#define TSR_WHOLE { TSR_WHOLE_DIM, NULL, 0 }
#define TSR_OF(X, d) { 0, (X), (d) }
#define TSR_BATCH(X) TSR_OF(X, TSR_DIM_B)
#define TSR_ROWS(X) TSR_OF(X, TSR_DIM_M)
#define TSR_COLS(X) TSR_OF(X, TSR_DIM_N)
/* The shape and the tiles of an operand (its `shape` and `tiles` fields)
 * from one set of wants: an extent taken from another operand comes with
 * that operand's tiles; a fixed extent is in one tile (a tile of at least
 * the extent). */
#define TSR_SIZES(b, m, n) { b, m, n }, { b, m, n }
#define TSR_2D(m, n) { TSR_FIXED(1), m, n }, { TSR_FIXED(1), m, n }
/* the shape and the tiles of X */
#define TSR_LIKE(X) { TSR_BATCH(X), TSR_ROWS(X), TSR_COLS(X) }, { TSR_BATCH(X), TSR_ROWS(X), TSR_COLS(X) }

/* dtype: a tsr_dtype_t (TSR_FLOAT32 also takes TSR_BFLOAT16: bf16 tiles
 * compute in float32), or that of the table's first operand that is present */
#define TSR_DTYPE_FIRST (-1)

typedef struct {
    const char *name;
    const tsr_desc_t *desc;
    tsr_op_role_t role;
    int dtype;
    tsr_want_t shape[3]; /* b, m, n */
    /* bb, mb, nb, compared as they cut the shape: a tile larger than its
     * extent is the extent (one tile either way) */
    tsr_want_t tiles[3];
    const tsr_desc_t *may_be; /* an output's one input that it may be (in place), or NULL */
} tsr_operand_t;

/* TSR_SUCCESS, or the first error in the order above (logged as "fn: ..."). */
int tsr_check_operands(const char *fn, const tsr_operand_t *ops, int n);

/* Scalar arguments (TSR_EINVAL): an enum or a set of flags whose values
 * are 0 .. count - 1; the accumulation mode. */
int tsr_check_choice(const char *fn, const char *what, int value, int count);
int tsr_check_accum(const char *fn, tsr_reduction_t accum);
/* A backward's modes: dinp_mode, dparam_mode, then accum. */
int tsr_check_backward_modes(const char *fn, tsr_write_t dinp_mode, tsr_write_t dparam_mode, tsr_reduction_t accum);

#endif
