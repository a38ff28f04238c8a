/* Tessera: linear algorithms (float32 transformer layers; see docs/transformer.md). */
#ifndef TSR_LINEAR_H
#define TSR_LINEAR_H
#include "tsr_tile.h"
#include "tsr_algorithms.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fused linear layers, llm.c conventions (float32 only, TSR_EDTYPE otherwise):
 *   inp  IC x BT (m = IC features, n = B*T tokens), tiles kb x nb
 *   W    the llm.c (OC, IC) weight: m = IC, n = OC, tiles kb x ob
 *   bias OC x 1, tiles ob x (any); NULL for no bias
 *   out  OC x BT, tiles ob x nb;  out = W^T inp + bias
 * All 2D, block-cyclic descriptors on one process grid (TSR_EDIST). Like
 * every algorithm they validate first (nothing submitted on error), run
 * asynchronously and flush the descriptors they only read.
 *
 * Task shapes. One GEMM task per (output tile, k tile); the bias is an extra
 * read buffer of the first k task (C = bias + A B) and the GeLU an epilogue
 * of the last one in an ordered chain (TSR_REDUCTION_ORDERED). With
 * TSR_REDUCTION_REDUX the k tasks of a tile run in parallel into a tile that a
 * bias-fill task initialises, and the GeLU is a task of its own after the
 * reduction. A single k tile always gives one task per output tile. */

/* out = W^T inp + bias */
int tsr_linear_forward(tsr_desc_t *inp, tsr_desc_t *W, tsr_desc_t *bias, tsr_desc_t *out, tsr_reduction_t accum);

/* pre = W^T inp + bias, out = gelu(pre) (tanh approximation, llm.c's
 * gelu_forward). pre (the backward needs it) and out: OC x BT, tiles ob x nb. */
int tsr_linear_gelu_forward(tsr_desc_t *inp, tsr_desc_t *W, tsr_desc_t *bias, tsr_desc_t *pre, tsr_desc_t *out,
                            tsr_reduction_t accum);

/* Backward of tsr_linear_forward, dout OC x BT (tiles ob x nb):
 *   dinp  (IC x BT)        = W dout                          (dinp_mode)
 *   dW    (m = IC, n = OC) = inp dout^T, summed over tokens  (dparam_mode)
 *   dbias (OC x 1)         = row sums of dout over tokens    (dparam_mode)
 * Each of dinp, dW, dbias may be NULL (not computed; not all three). The
 * bias gradient rides in the dW tasks of the first IC tile (one task less per
 * tile); accum picks ordered chains or REDUX for every sum over tiles. */
int tsr_linear_backward(tsr_desc_t *inp, tsr_desc_t *W, tsr_desc_t *dout, tsr_desc_t *dinp, tsr_desc_t *dW,
                        tsr_desc_t *dbias, tsr_write_t dinp_mode, tsr_write_t dparam_mode,
                        tsr_reduction_t accum);

/* Backward of tsr_linear_gelu_forward: dout is d(out); first
 * dpre = dout * gelu'(pre), one task per tile, which then feeds both GEMMs
 * (llm.c's dfch); dpre may be dout itself (overwritten in place, no extra
 * memory). Then as tsr_linear_backward with dpre in place of dout. */
int tsr_linear_gelu_backward(tsr_desc_t *inp, tsr_desc_t *W, tsr_desc_t *pre, tsr_desc_t *dout, tsr_desc_t *dpre,
                             tsr_desc_t *dinp, tsr_desc_t *dW, tsr_desc_t *dbias, tsr_write_t dinp_mode,
                             tsr_write_t dparam_mode, tsr_reduction_t accum);

/* Linear layers fused with the attention reshape. Q, K, V and the attention
 * output Y are 3D [B*NH, hd, T] (head z = b*NH + h, m = hd, n = T), all of
 * the same shape and tiling. The reshape is fused into the GEMM tasks (each
 * head's hd rows are written to / read from its own matrix of a 3D tile) when
 * the tiles line up with the heads:
 *   - the feature tile fb (W's tile along the head side: ob for QKV, kb for
 *     attproj) is a multiple of hd and divides C,
 *   - the 3D tiles are whole: mb = hd and bb = fb / hd heads,
 *   - their token tile is nb (the 2D token tile) and divides T (any nb
 *     when B = 1).
 * Otherwise the call falls back to explicit reshape tasks through temporary
 * 2D descriptors, which it destroys, so it then waits for its tasks. */

/* QKV projection: [Q; K; V] = W^T inp + bias with W: m = C, n = 3C, bias 3C x 1. */
int tsr_linear_qkv_forward(tsr_desc_t *inp, tsr_desc_t *W, tsr_desc_t *bias, tsr_desc_t *Q, tsr_desc_t *K,
                           tsr_desc_t *V, tsr_reduction_t accum);
/* Its backward: dout = [dQ; dK; dV] read straight from the 3D tiles. */
int tsr_linear_qkv_backward(tsr_desc_t *inp, tsr_desc_t *W, tsr_desc_t *dQ, tsr_desc_t *dK, tsr_desc_t *dV,
                            tsr_desc_t *dinp, tsr_desc_t *dW, tsr_desc_t *dbias, tsr_write_t dinp_mode,
                            tsr_write_t dparam_mode, tsr_reduction_t accum);
/* Attention output projection: out (C x BT) = W^T Y + bias, Y read straight
 * from the 3D tiles as the C x BT input; W: m = C, n = C. */
int tsr_linear_attproj_forward(tsr_desc_t *Y, tsr_desc_t *W, tsr_desc_t *bias, tsr_desc_t *out, tsr_reduction_t accum);
/* Its backward: dY (3D, may be NULL) = W dout written per head, dW, dbias. */
int tsr_linear_attproj_backward(tsr_desc_t *Y, tsr_desc_t *W, tsr_desc_t *dout, tsr_desc_t *dY, tsr_desc_t *dW,
                                tsr_desc_t *dbias, tsr_write_t dinp_mode, tsr_write_t dparam_mode,
                                tsr_reduction_t accum);
/* 1 when the calls above fuse the reshape for these descriptors, 0 when they
 * fall back (or the arguments are invalid). */
int tsr_linear_qkv_fusable(const tsr_desc_t *inp, const tsr_desc_t *W, const tsr_desc_t *Q);
int tsr_linear_attproj_fusable(const tsr_desc_t *Y, const tsr_desc_t *W, const tsr_desc_t *out);

/* Unfused building blocks (one task per tile each; also the fallbacks and
 * the baselines of timing/time_fusion): */
/* out += bias (bias OC x 1 with out's row tiles) */
int tsr_linear_bias_add(tsr_desc_t *bias, tsr_desc_t *out);
/* out = gelu(pre), same shape and tiles; out may be pre */
int tsr_gelu_forward(tsr_desc_t *pre, tsr_desc_t *out);
/* dpre = dout * gelu'(pre), same shape and tiles; dpre may be dout */
int tsr_gelu_backward(tsr_desc_t *pre, tsr_desc_t *dout, tsr_desc_t *dpre);
/* X ([Q; K; V] rows, nparts*C x B*T, 2D) -> Q, K, V (3D, any tiling, not
 * necessarily the same for the three: e.g. query and key tiles); K and
 * V NULL: X is C x B*T and goes to Q alone. mode: the destination is
 * overwritten or X is added to it. Q, K and V must be different descriptors
 * (TSR_EINVAL; as inputs of tsr_heads_merge they may be the same). */
int tsr_heads_split(tsr_desc_t *X, tsr_desc_t *Q, tsr_desc_t *K, tsr_desc_t *V, tsr_write_t mode);
/* The reverse: Q, K, V (K, V may be NULL) -> X. */
int tsr_heads_merge(tsr_desc_t *Q, tsr_desc_t *K, tsr_desc_t *V, tsr_desc_t *X, tsr_write_t mode);

#ifdef __cplusplus
}
#endif
#endif
