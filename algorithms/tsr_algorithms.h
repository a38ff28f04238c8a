/* Tessera tiled algorithms: loops over tiles that submit one task per tile
 * operation. Asynchronous: call tsr_wait() (or read the result with
 * tsr_desc_gather / tsr_desc_norm) before using the data. Arguments are
 * validated first: on error nothing is submitted. */
#ifndef TSR_ALGORITHMS_H
#define TSR_ALGORITHMS_H
#include "tsr_tile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The BLAS the CPU tile kernels call and the kernels it runs, e.g. "BLIS
 * 0.9.0, skx kernels (...)", for reports and cache keys (defined by the
 * compute layer; the first call sets the BLAS up). */
const char *tsr_blas_description(void);

/* How a sum over tiles (the k contributions to a C tile, the key tiles of
 * attention, ...) is formed. Not to be confused with tsr_write_t, which says
 * whether an output is overwritten or added into. */
typedef enum {
    TSR_REDUCTION_ORDERED = 0, /* a chain of read-write tasks, k = 0, 1, 2, ... */
    TSR_REDUCTION_REDUX = 1    /* STARPU_REDUX: contributions run in parallel into
                                * per-worker buffers, then are added; across ranks
                                * each contribution runs on the owner of its A tile
                                * and starpu_mpi_redux_data combines them with a
                                * reduction tree of tasks (asynchronous: the call
                                * does not wait, test_redux_async) */
} tsr_reduction_t;

/* C = alpha op(A) op(B) + beta C. For 3D descriptors the product is batched:
 * C[b] = alpha op(A[b]) op(B[b]) + beta C[b]. Requirements: same element type
 * (TSR_EDTYPE), op(A) m x k, op(B) k x n, C m x n, same batch (TSR_ESHAPE),
 * tile sizes that line up: op(A) tiles mb x kb, op(B) kb x nb, C mb x nb, same
 * batch tile (TSR_ETILE); block-cyclic descriptors on the same P x Q grid
 * (TSR_EDIST); C may not be A or B (TSR_EINVAL; A may be B). When beta == 0,
 * C is not read. */
int tsr_gemm(tsr_trans_t ta, tsr_trans_t tb, double alpha, tsr_desc_t *A, tsr_desc_t *B,
             double beta, tsr_desc_t *C, tsr_reduction_t accum);

/* The same on the caller's column-major arrays, cut in tiles of tile x tile.
 * One process: in place, without a copy (descriptors over the arrays,
 * tsr_desc_create_user). Copied, as before, only where needed: under MPI
 * with several ranks (the arrays held by rank 0, NULL on the others, are
 * scattered over the ranks and C gathered back) and when C overlaps A or B.
 * Synchronous: C holds the result on return. */
int tsr_gemm_array(tsr_dtype_t dtype, tsr_trans_t ta, tsr_trans_t tb, int m, int n, int k,
                   double alpha, const void *A, int lda, const void *B, int ldb,
                   double beta, void *C, int ldc, int tile, tsr_reduction_t accum);

/* ---- asynchronous calls on the caller's arrays: submit several, wait once ---- */
/* A sequence chains calls on the caller's arrays without a wait between
 * them; tsr_sequence_wait waits for them all and returns the first error.
 * Thin over StarPU, whose tasks are asynchronous already and ordered by the
 * data they access, so a sequence only:
 * - keeps the descriptors it makes over the caller's arrays (one per view:
 *   memory, shape, leading dimension, tile sizes) until it waits, so that a
 *   later call on the same array gets the same StarPU handles and its tasks
 *   follow the earlier ones on their own. An array a later call sees through
 *   another view (other tiles, a part of it) is another handle, which StarPU
 *   would not order: there the submitting call first waits for the earlier
 *   view's tasks (when either writes), then goes on;
 * - records the first error: later calls submit nothing and return it;
 * - waits by unregistering its descriptors: each waits for its own tasks
 *   and leaves the values in the caller's arrays, without waiting for other
 *   work (no starpu_task_wait_for_all).
 * The arrays must stay allocated and untouched by the caller until the wait.
 * One process only (TSR_EINVAL under MPI with several ranks). A sequence is
 * used by one thread at a time and may be reused after a wait. */
typedef struct tsr_sequence tsr_sequence_t;
int tsr_sequence_create(tsr_sequence_t **seq);
/* Wait for every call of seq; their first error, or TSR_ERUNTIME when a
 * task's kernel failed meanwhile. seq starts again empty and error-free. */
int tsr_sequence_wait(tsr_sequence_t *seq);
/* tsr_sequence_wait, then free seq (NULL: a no-op). */
int tsr_sequence_destroy(tsr_sequence_t *seq);
/* tsr_gemm_array in seq: submitted, not waited for. C may not overlap A or B
 * (TSR_EINVAL). */
int tsr_gemm_array_async(tsr_sequence_t *seq, tsr_dtype_t dtype, tsr_trans_t ta, tsr_trans_t tb, int m, int n, int k,
                         double alpha, const void *A, int lda, const void *B, int ldb, double beta, void *C, int ldc,
                         int tile, tsr_reduction_t accum);

/* What the automatic tile calls (--tiles auto: tsr_gemm_auto_tiles,
 * tsr_gemm_auto_tiles_ruled, tsr_attention_auto_tiles) return: the tiles of
 * the operation asked for (the other fields 0) and the model's time. */
typedef struct {
    int mb, nb, kb;           /* GEMM: C in tiles of mb x nb, k in tiles of kb */
    int qb, kvb;              /* attention: query tiles, key (and value) tiles, in tokens */
    double predicted_seconds; /* the model's time for the operation in these tiles */
} tsr_tiles_t;

/* Tile sizes for tsr_gemm on the running workers, chosen from a model:
 * the GEMM kernel's time at 12 square tile sizes (32 .. 2048), measured
 * through StarPU with every worker busy on the first call for a given
 * element type, worker count and BLAS kernel set (about a second; cached in
 * $TSR_CACHE_DIR/tile_models, default ~/.cache/tessera/tile_models), and a
 * schedule model (work per worker, task rounds, the longest chain: kt tasks
 * ordered, one task plus the buffer additions with REDUX). Every
 * (mb, nb, kb) from 32 .. 2048 (and each whole dimension up to 2048) is
 * evaluated; the best have their exact task shape measured. When the product
 * is small enough (operands of at most 1 GiB, one process), as many
 * candidates as 2 s of trials afford by the model (2 to 8, the best of each
 * granularity, rounds of tasks on the workers, first) run as whole products
 * and the fastest wins; the trial times are cached like the calibration,
 * per product.
 * Collective under MPI. tiles: mb, nb, kb and predicted_seconds, the
 * model's time for C = A B (qb, kvb 0). */
int tsr_gemm_auto_tiles(tsr_dtype_t dtype, int m, int n, int k, tsr_reduction_t accum, tsr_tiles_t *tiles);
/* Rules the tile sizes must follow, per dimension (m, n, k; 0: no rule):
 * a multiple of multiple_of[d] that divides divisor_of[d]. For example a
 * fused QKV projection wants whole heads dividing C (multiple_of[0] = hd,
 * divisor_of[0] = C) and token tiles dividing T (divisor_of[1] = T). */
typedef struct {
    int multiple_of[3];
    int divisor_of[3];
} tsr_gemm_tile_rules_t;
/* tsr_gemm_auto_tiles among the tile sizes that follow rules (NULL: none;
 * with a rule, every conforming size up to 2048 is a candidate).
 * TSR_EINVAL when no size along a dimension follows its rule. */
int tsr_gemm_auto_tiles_ruled(tsr_dtype_t dtype, int m, int n, int k, tsr_reduction_t accum,
                              const tsr_gemm_tile_rules_t *rules, tsr_tiles_t *tiles);
/* The same model's time for one mb x nb x kb GEMM task (with every worker
 * busy); calibrates on first use like tsr_gemm_auto_tiles. */
int tsr_gemm_task_seconds(tsr_dtype_t dtype, int mb, int nb, int kb, double *seconds);
/* The same model for a whole ordered tiled product C (M x N) = sum over K
 * in mb x nb x kb tiles: the work of all its tasks in seconds (each also
 * reading its A and B tiles, and C again past the first k tile), their
 * count, and the longest chain (one C tile's tasks along k). measured 0:
 * every task priced from the square sizes (the same answer whatever was
 * measured before); 1: its task shapes (full and edge tiles) measured as
 * tsr_gemm_auto_tiles measures its best candidates (once: cached with the
 * model) and priced from those measurements. Collective under MPI. */
int tsr_gemm_phase_seconds(tsr_dtype_t dtype, int M, int N, int K, int mb, int nb, int kb, int measured,
                           double *work, double *tasks, double *chain);

#ifdef __cplusplus
}
#endif
#endif
