/* The ops of flash-style causal attention (float32; bf16 tiles on CUDA
 * workers as they are, on CPU workers through float32 copies). Tiles are 3D [heads,
 * hd, tokens]; a CPU task loops over the heads of its tiles and calls the
 * per-head kernels of compute/, a CUDA task passes all its heads to one call
 * (batched cuBLAS, one launch per kernel). On a CPU worker the score blocks
 * of a task live in per-task scratch, allocated with starpu_malloc_flags so
 * that StarPU's allocation hooks see it; the CUDA kernels allocate their
 * own, stream-ordered. Each op: its CPU function, its CUDA function, its
 * table entry. */
#include <math.h>
#include "tsr_runtime_attention.h"
#include "tsr_compute_attention.h"
#if TSR_HAVE_CUDA
#include <starpu_cublas_v2.h>
#endif

typedef struct {
    tsr_attn_pos_t pos;
    tsr_write_t o_mode;            /* forward: O and L */
    tsr_write_t dq_mode, dkv_mode; /* backward: dQ / dK, dV */
} attn_args_t;

/* Per-task scratch of n floats, or NULL (logged, and the task counted as
 * failed: tsr_wait reports it). */
static float *scratch_alloc(size_t n)
{
    void *p = NULL;
    if (starpu_malloc_flags(&p, n * sizeof(float), 0) != 0 || !p) {
        tsr_log(TSR_LOG_ERROR, "attention: out of memory for %zu bytes of task scratch", n * sizeof(float));
        tsr_kernel_check(TSR_ENOMEM);
        return NULL;
    }
    return p;
}

static void scratch_free(float *p, size_t n)
{
    starpu_free_flags(p, n * sizeof(float), 0);
}

/* A failed task leaves NaN in the tile it writes, so the failure shows. */
static void fill_nan(tsr_view_t v)
{
    for (int z = 0; z < v.depth; z++)
        for (int c = 0; c < v.cols; c++)
            for (int r = 0; r < v.rows; r++)
                ((float *)tsr_view_at(v, z))[(size_t)c * v.ld + r] = NAN;
}

static tsr_attn_pair_t pair_of(tsr_view_t q, tsr_view_t k, tsr_attn_pos_t pos)
{
    tsr_attn_pair_t p = { q.rows, q.cols, k.cols, pos.q0, pos.k0, 1.0f / sqrtf((float)q.rows) };
    return p;
}

/* buffers: Q, K, V, O, L */
static void cpu_fwd(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const attn_args_t *a = cl_arg;
    tsr_view_t Q = tsr_view(buffers[0], ex), K = tsr_view(buffers[1], ex), V = tsr_view(buffers[2], ex);
    tsr_view_t O = tsr_view(buffers[3], ex), L = tsr_view(buffers[4], ex);
    tsr_attn_pair_t p = pair_of(Q, K, a->pos);
    size_t n = tsr_cpu_attention_fwd_scratch(p.nq, p.nk);
    float *s = scratch_alloc(n);
    if (!s) {
        fill_nan(O);
        return;
    }
    for (int z = 0; z < O.depth; z++)
        tsr_cpu_attention_fwd_step(&p, tsr_view_at(Q, z), Q.ld, tsr_view_at(K, z), K.ld, tsr_view_at(V, z), V.ld,
                                   tsr_view_at(O, z), O.ld, tsr_view_at(L, z), L.ld, a->o_mode, s,
                                   tsr_task_threads());
    scratch_free(s, n);
}

#if TSR_HAVE_CUDA
/* The elements between a 3D tile's consecutive heads (the CUDA kernels take
 * every head of a tile in one call). */
static size_t head_stride(tsr_view_t v) { return v.zstride / tsr_dtype_size(v.dtype); }

static void cuda_fwd(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const attn_args_t *a = cl_arg;
    tsr_view_t Q = tsr_view(buffers[0], ex), K = tsr_view(buffers[1], ex), V = tsr_view(buffers[2], ex);
    tsr_view_t O = tsr_view(buffers[3], ex), L = tsr_view(buffers[4], ex);
    tsr_attn_pair_t p = pair_of(Q, K, a->pos);
    tsr_kernel_check(tsr_cuda_attention_fwd_step(starpu_cublas_get_local_handle(), O.dtype, &p, O.depth, Q.ptr, Q.ld,
                                                 head_stride(Q), K.ptr, K.ld, head_stride(K), V.ptr, V.ld,
                                                 head_stride(V), O.ptr, O.ld, head_stride(O), L.ptr, L.ld,
                                                 head_stride(L), a->o_mode));
}
#endif

/* O and L are W, RW or REDUX per task; bf16 tiles go to the CUDA kernels as they are */
static tsr_op_t op_fwd = { .name = "attention_fwd", .cpu = cpu_fwd, .cuda = TSR_CUDA(cuda_fwd), .parallel = 1,
                           .no_float64 = 1, .cuda_bf16 = 1 };

/* buffers: O, dO, L */
static void cpu_bwd_prep(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    (void)cl_arg;
    tsr_view_t O = tsr_view(buffers[0], ex), dO = tsr_view(buffers[1], ex), L = tsr_view(buffers[2], ex);
    for (int z = 0; z < O.depth; z++)
        tsr_cpu_attention_bwd_prep(O.rows, O.cols, tsr_view_at(O, z), O.ld, tsr_view_at(dO, z), dO.ld,
                                   tsr_view_at(L, z), L.ld);
}

#if TSR_HAVE_CUDA
static void cuda_bwd_prep(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    (void)cl_arg;
    tsr_view_t O = tsr_view(buffers[0], ex), dO = tsr_view(buffers[1], ex), L = tsr_view(buffers[2], ex);
    tsr_kernel_check(tsr_cuda_attention_bwd_prep(ex->stream, O.dtype, O.rows, O.cols, O.depth, O.ptr,
                                                 O.ld, head_stride(O), dO.ptr, dO.ld, head_stride(dO), L.ptr, L.ld,
                                                 head_stride(L)));
}
#endif

static tsr_op_t op_bwd_prep = { .name = "attention_bwd_prep", .cpu = cpu_bwd_prep, .cuda = TSR_CUDA(cuda_bwd_prep),
                                .nbuffers = 3, .modes = { STARPU_R, STARPU_R, STARPU_RW }, .no_float64 = 1,
                                .cuda_bf16 = 1 };

/* A backward task's views (buffers: Q, K, V, dO, L, dQ, dK, dV). */
typedef struct { tsr_view_t Q, K, V, dO, L, dQ, dK, dV; } bwd_views_t;

static bwd_views_t bwd_views(void *buffers[], const tsr_exec_t *ex)
{
    bwd_views_t v = { tsr_view(buffers[0], ex), tsr_view(buffers[1], ex), tsr_view(buffers[2], ex),
                      tsr_view(buffers[3], ex), tsr_view(buffers[4], ex), tsr_view(buffers[5], ex),
                      tsr_view(buffers[6], ex), tsr_view(buffers[7], ex) };
    return v;
}

static void cpu_bwd(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const attn_args_t *a = cl_arg;
    bwd_views_t v = bwd_views(buffers, ex);
    tsr_attn_pair_t p = pair_of(v.Q, v.K, a->pos);
    size_t n = tsr_cpu_attention_bwd_scratch(p.nq, p.nk);
    float *s = scratch_alloc(n);
    if (!s) {
        fill_nan(v.dQ);
        fill_nan(v.dK);
        fill_nan(v.dV);
        return;
    }
    for (int z = 0; z < v.Q.depth; z++)
        tsr_cpu_attention_bwd_step(&p, tsr_view_at(v.Q, z), v.Q.ld, tsr_view_at(v.K, z), v.K.ld, tsr_view_at(v.V, z),
                                   v.V.ld, tsr_view_at(v.dO, z), v.dO.ld, tsr_view_at(v.L, z), v.L.ld,
                                   tsr_view_at(v.dQ, z), v.dQ.ld, tsr_view_at(v.dK, z), v.dK.ld, tsr_view_at(v.dV, z),
                                   v.dV.ld, a->dq_mode, a->dkv_mode, s, tsr_task_threads());
    scratch_free(s, n);
}

#if TSR_HAVE_CUDA
static void cuda_bwd(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const attn_args_t *a = cl_arg;
    bwd_views_t v = bwd_views(buffers, ex);
    tsr_attn_pair_t p = pair_of(v.Q, v.K, a->pos);
    tsr_kernel_check(tsr_cuda_attention_bwd_step(
        starpu_cublas_get_local_handle(), v.Q.dtype, &p, v.Q.depth, v.Q.ptr, v.Q.ld, head_stride(v.Q), v.K.ptr,
        v.K.ld, head_stride(v.K), v.V.ptr, v.V.ld, head_stride(v.V), v.dO.ptr, v.dO.ld, head_stride(v.dO), v.L.ptr,
        v.L.ld, head_stride(v.L), v.dQ.ptr, v.dQ.ld, head_stride(v.dQ), v.dK.ptr, v.dK.ld, head_stride(v.dK), v.dV.ptr,
        v.dV.ld, head_stride(v.dV), a->dq_mode, a->dkv_mode));
}
#endif

/* dQ, dK and dV are W, RW or REDUX per task */
static tsr_op_t op_bwd = { .name = "attention_bwd", .cpu = cpu_bwd, .cuda = TSR_CUDA(cuda_bwd), .parallel = 1,
                           .no_float64 = 1, .cuda_bf16 = 1 };

/* ---- insert helpers --------------------------------------------------------------- */

/* Useful flops of a tile pair: ngemm GEMMs of 2 * hd flops per (query,
 * visible key) pair and head, as time_attention counts them; the kernels
 * skip most masked scores, but not all (see tsr_attn_computed_pairs). */
static double pair_flops(tsr_tile_t Q, tsr_tile_t K, tsr_attn_pos_t pos, int ngemm)
{
    int hd = tsr_tile_rows(Q.d, Q.i);
    tsr_attn_pair_t p = { hd, tsr_tile_cols(Q.d, Q.j), tsr_tile_cols(K.d, K.j), pos.q0, pos.k0, 1.0f };
    return 2.0 * ngemm * tsr_tile_depth(Q.d, Q.bi) * hd * (double)tsr_attn_visible_pairs(&p);
}

int tsr_insert_attention_fwd(tsr_tile_t Q, tsr_tile_t K, tsr_tile_t V, tsr_tile_t O, tsr_tile_t L,
                             tsr_attn_pos_t pos, enum starpu_data_access_mode omode)
{
    attn_args_t args = { pos, tsr_write_of(omode), TSR_OVERWRITE, TSR_OVERWRITE };
    tsr_tile_t tiles[5] = { Q, K, V, O, L };
    enum starpu_data_access_mode modes[5] = { STARPU_R, STARPU_R, STARPU_R, omode, omode };
    return tsr_submit(&op_fwd, tiles, modes, 5, &args, sizeof args, -1, pair_flops(Q, K, pos, 2));
}

int tsr_insert_attention_bwd_prep(tsr_tile_t O, tsr_tile_t dO, tsr_tile_t L)
{
    tsr_tile_t tiles[3] = { O, dO, L };
    enum starpu_data_access_mode modes[3] = { STARPU_R, STARPU_R, STARPU_RW };
    double flops = 2.0 * tsr_tile_depth(O.d, O.bi) * tsr_tile_rows(O.d, O.i) * tsr_tile_cols(O.d, O.j);
    return tsr_submit(&op_bwd_prep, tiles, modes, 3, NULL, 0, -1, flops);
}

int tsr_insert_attention_bwd(tsr_tile_t Q, tsr_tile_t K, tsr_tile_t V, tsr_tile_t dO, tsr_tile_t L,
                             tsr_tile_t dQ, tsr_tile_t dK, tsr_tile_t dV, tsr_attn_pos_t pos,
                             enum starpu_data_access_mode qmode, enum starpu_data_access_mode kvmode,
                             int exec_rank)
{
    attn_args_t args = { pos, TSR_OVERWRITE, tsr_write_of(qmode), tsr_write_of(kvmode) };
    tsr_tile_t tiles[8] = { Q, K, V, dO, L, dQ, dK, dV };
    enum starpu_data_access_mode modes[8] = { STARPU_R, STARPU_R, STARPU_R, STARPU_R, STARPU_R, qmode, kvmode, kvmode };
    return tsr_submit(&op_bwd, tiles, modes, 8, &args, sizeof args, exec_rank, pair_flops(Q, K, pos, 5));
}
