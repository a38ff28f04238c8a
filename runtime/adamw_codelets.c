/* The ops of AdamW (llm.c): float32, and float32 master weights with a bf16 copy.
 * Each op: its CPU function, its CUDA function, its table entry. */
#include <stdlib.h>
#include "tsr_runtime_adamw.h"
#include "tsr_compute.h"
#if TSR_HAVE_CUDA
#include "tsr_compute_cuda.h"
#endif

/* ---- adamw: one AdamW step on a parameter tile ------------------------------------ */

static void adamw(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const tsr_adamw_step_t *s = cl_arg;
    tsr_view_t P = tsr_view(buffers[0], ex), G = tsr_view(buffers[1], ex), M = tsr_view(buffers[2], ex),
               V = tsr_view(buffers[3], ex);
    for (int z = 0; z < P.depth; z++)
        TSR_KERNEL(ex, adamw, P.rows, P.cols, tsr_view_at(P, z), P.ld, tsr_view_at(G, z), G.ld, tsr_view_at(M,
                z), M.ld,
                               tsr_view_at(V, z), V.ld, s);
}

static tsr_op_t op_adamw = { .name = "adamw", .cpu = adamw, .cuda = TSR_CUDA(adamw), .nbuffers = 4,
                             .modes = { STARPU_RW, STARPU_R, STARPU_RW, STARPU_RW }, .no_float64 = 1 };

/* ---- adamw_master: AdamW on float32 master weights, and their bf16 copy ---------------- */

static void adamw_master(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const tsr_adamw_step_t *s = cl_arg;
    tsr_view_t P = tsr_view(buffers[0], ex), G = tsr_view(buffers[1], ex), M = tsr_view(buffers[2], ex),
               V = tsr_view(buffers[3], ex), O = tsr_view(buffers[4], ex);
    for (int z = 0; z < P.depth; z++)
        tsr_cpu_adamw_master(P.rows, P.cols, tsr_view_at(P, z), P.ld, tsr_view_at(G, z), G.ld, tsr_view_at(M, z),
                             M.ld, tsr_view_at(V, z), V.ld, tsr_view_at(O, z), O.ld, s);
}

#if TSR_HAVE_CUDA
/* the master, m and v are float32 whatever the task's type */
static void cuda_adamw_master(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    const tsr_adamw_step_t *s = cl_arg;
    tsr_view_t P = tsr_view_typed(buffers[0], TSR_FLOAT32), G = tsr_view(buffers[1], ex),
               M = tsr_view_typed(buffers[2], TSR_FLOAT32), V = tsr_view_typed(buffers[3], TSR_FLOAT32),
               O = tsr_view(buffers[4], ex);
    for (int z = 0; z < P.depth; z++)
        tsr_kernel_check(tsr_cuda_adamw_master(ex->stream, ex->dtype, P.rows, P.cols, tsr_view_at(P, z), P.ld,
                                               tsr_view_at(G, z), G.ld, tsr_view_at(M, z), M.ld, tsr_view_at(V, z),
                                               V.ld, tsr_view_at(O, z), O.ld, s));
}
#endif

/* master, m, v stay float32 in the bf16 task; the gradient and the copy are bf16 */
static tsr_op_t op_adamw_master = { .name = "adamw_master", .cpu = adamw_master,
                                    .cuda = TSR_CUDA(cuda_adamw_master), .cuda_bf16 = 1, .nbuffers = 5,
                                    .modes = { STARPU_RW, STARPU_R, STARPU_RW, STARPU_RW, STARPU_W },
                                    .no_float64 = 1, .fp32_in_bf16 = 1u << 0 | 1u << 2 | 1u << 3 };

int tsr_insert_adamw(tsr_tile_t p, tsr_tile_t g, tsr_tile_t m, tsr_tile_t v, const tsr_adamw_step_t *step)
{
    tsr_tile_t tiles[4] = { p, g, m, v };
    enum starpu_data_access_mode modes[4] = { STARPU_RW, STARPU_R, STARPU_RW, STARPU_RW };
    double flops = 12.0 * tsr_tile_depth(p.d, p.bi) * tsr_tile_rows(p.d, p.i) * tsr_tile_cols(p.d, p.j);
    return tsr_submit(&op_adamw, tiles, modes, 4, step, sizeof *step, -1, flops);
}

int tsr_insert_adamw_master(tsr_tile_t p, tsr_tile_t g, tsr_tile_t m, tsr_tile_t v, tsr_tile_t out,
                            const tsr_adamw_step_t *step)
{
    tsr_tile_t tiles[5] = { p, g, m, v, out };
    enum starpu_data_access_mode modes[5] = { STARPU_RW, STARPU_R, STARPU_RW, STARPU_RW, STARPU_W };
    double flops = 12.0 * tsr_tile_depth(p.d, p.bi) * tsr_tile_rows(p.d, p.i) * tsr_tile_cols(p.d, p.j);
    return tsr_submit(&op_adamw_master, tiles, modes, 5, step, sizeof *step, -1, flops);
}
