/* bf16 tiles on CPU workers: each op run on bf16 descriptors against the same
 * op in float32 on the same (bf16-representable) inputs: GEMM (ordered and
 * REDUX accumulation over k tiles that do not divide), the linear layer, the
 * LayerNorm forward, the RMSNorm forward (a row op), causal attention forward
 * and backward, AdamW on float32 master weights with bf16 gradients and a
 * bf16 parameter copy; and the
 * refusals: mixtures an op does not take, an op without a CPU kernel on a
 * machine without a CUDA worker. Then the ops
 * with bf16 CUDA kernels of their own against the conversion path (see
 * check_native). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tessera.h"
#include "tsr_check.h"
#include "tsr_expect.h"
#include "tsr_runtime.h"
#include "tsr_testutil.h"

/* one bf16 unit in the last place, relative */
#define BF16_ULP 0x1p-7

/* argument "gpu": CUDA workers beside the CPUs (testing/gpu.cmake; under
 * check_gpu.sh gpu-only, CUDA workers alone); the ops with bf16 CUDA kernels
 * (GEMM, linear, AdamW with master weights, the check_native ops) run them
 * there on bf16 tiles */
static int on_gpu;

static tsr_desc_t *make(tsr_dtype_t t, int m, int n, int mb, int nb)
{
    tsr_desc_t *d = NULL;
    CHECK_RC(tsr_desc_create_2d(&d, t, m, n, mb, nb, NULL), TSR_SUCCESS);
    return d;
}

static tsr_desc_t *make3(tsr_dtype_t t, int b, int m, int n, int bb, int mb, int nb)
{
    tsr_desc_t *d = NULL;
    CHECK_RC(tsr_desc_create(&d, t, b, m, n, bb, mb, nb, NULL), TSR_SUCCESS);
    return d;
}

/* Each check runs its op on float32 tiles, then on bf16 ones. */
static const tsr_dtype_t both_types[2] = { TSR_FLOAT32, TSR_BFLOAT16 };

/* Random values rounded to bf16, so that both runs start from the same numbers. */
static float *random_bf16_values(size_t n, uint64_t seed, float scale)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = tsr_bf16_to_float(tsr_float_to_bf16(scale * (float)tsr_random_value(seed, 0, (int)i, 0)));
    return x;
}

/* The float values x (d->b matrices of d->m x d->n, column-major) into d, in d's type. */
static void put(tsr_desc_t *d, const float *x)
{
    if (d->dtype == TSR_FLOAT32)
        CHECK_RC(tsr_desc_scatter(d, x, d->m, 0), TSR_SUCCESS);
    else
        CHECK_RC(tsr_test_scatter_bf16(d, x), TSR_SUCCESS);
}

/* d's values as floats (malloc'd). */
static float *get(tsr_desc_t *d)
{
    size_t n = (size_t)d->b * d->m * d->n;
    float *x = malloc(n * sizeof *x);
    if (d->dtype == TSR_FLOAT32) {
        CHECK_RC(tsr_desc_gather(d, x, d->m, 0), TSR_SUCCESS);
        return x;
    }
    tsr_bf16_t *h = malloc(n * sizeof *h);
    CHECK_RC(tsr_desc_gather(d, h, d->m, 0), TSR_SUCCESS);
    for (size_t i = 0; i < n; i++)
        x[i] = tsr_bf16_to_float(h[i]);
    free(h);
    return x;
}

/* |got - ref| <= ulps bf16 units of (|ref| + floor) everywhere; reports the worst. */
static void check_close(const char *what, const float *got, const float *ref, size_t n, double ulps, double floor)
{
    double worst = 0;
    int bad = 0, rounded = 0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - ref[i]), scale = fabs(ref[i]) + floor;
        worst = fmax(worst, err / scale);
        bad += !(err <= ulps * BF16_ULP * scale);
        rounded += got[i] != ref[i];
    }
    printf("  %-34s worst %.2f bf16 ulps of (|ref| + %.3g); %d of %zu differ from float32\n", what,
           worst / BF16_ULP, floor, rounded, n);
    CHECK(bad == 0);
}

static double max_abs(const float *x, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(x[i]));
    return m;
}

/* C = A B on k tiles that do not divide k: each k tile's partial sum is
 * rounded to bf16 once (the ordered chain keeps C in bf16 between tasks). */
static void check_gemm(tsr_reduction_t accum)
{
    int M = 37, N = 29, K = 45, tb = 16;
    float *a = random_bf16_values((size_t)M * K, 1, 1.0f), *b = random_bf16_values((size_t)K * N, 2, 1.0f);
    float *res[2];
    for (int t = 0; t < 2; t++) {
        tsr_dtype_t ty = both_types[t];
        tsr_desc_t *A = make(ty, M, K, tb, tb), *B = make(ty, K, N, tb, tb), *C = make(ty, M, N, tb, tb);
        put(A, a);
        put(B, b);
        CHECK_RC(tsr_gemm(TSR_NOTRANS, TSR_NOTRANS, 1.0, A, B, 0.0, C, accum), TSR_SUCCESS);
        res[t] = get(C);
        tsr_desc_destroy(A);
        tsr_desc_destroy(B);
        tsr_desc_destroy(C);
    }
    /* 3 k tiles: up to 3 roundings of sums of at most 16 products of |x| <= 0.5 */
    check_close(accum == TSR_REDUCTION_REDUX ? "gemm (REDUX over k tiles)" : "gemm (ordered over k tiles)", res[1], res[0],
                (size_t)M * N, 3.0, 16 * 0.25);
    free(a);
    free(b);
    free(res[0]);
    free(res[1]);
}

/* out = W^T inp + bias over 2 input-feature tiles. */
static void check_linear(void)
{
    int C = 48, OC = 40, BT = 21;
    float *x = random_bf16_values((size_t)C * BT, 3, 2.0f), *w = random_bf16_values((size_t)C * OC, 4, 0.2f),
          *bias = random_bf16_values(OC, 5, 1.0f);
    float *res[2];
    for (int t = 0; t < 2; t++) {
        tsr_desc_t *X = make(both_types[t], C, BT, 24, 8), *W = make(both_types[t], C, OC, 24, 16),
                   *B = make(both_types[t], OC, 1, 16, 1), *Y = make(both_types[t], OC, BT, 16, 8);
        put(X, x);
        put(W, w);
        put(B, bias);
        CHECK_RC(tsr_linear_forward(X, W, B, Y, TSR_REDUCTION_ORDERED), TSR_SUCCESS);
        res[t] = get(Y);
        tsr_desc_destroy(X);
        tsr_desc_destroy(W);
        tsr_desc_destroy(B);
        tsr_desc_destroy(Y);
    }
    check_close("linear forward", res[1], res[0], (size_t)OC * BT, 3.0, max_abs(res[0], (size_t)OC * BT) / 8);
    free(x);
    free(w);
    free(bias);
    free(res[0]);
    free(res[1]);
}

/* LayerNorm forward, the features in two tiles; mean and rstd stored in bf16
 * too, so out is normalised with rounded statistics. */
static void check_layernorm(void)
{
    int C = 40, BT = 19;
    float *x = random_bf16_values((size_t)C * BT, 6, 3.0f), *w = random_bf16_values(C, 7, 1.0f),
          *bias = random_bf16_values(C, 8, 1.0f);
    float *res[2];
    for (int t = 0; t < 2; t++) {
        tsr_dtype_t ty = both_types[t];
        tsr_desc_t *X = make(ty, C, BT, 24, 8), *W = make(ty, C, 1, 24, 1), *B = make(ty, C, 1, 24, 1),
                   *Y = make(ty, C, BT, 24, 8), *mean = make(ty, 1, BT, 1, 8), *rstd = make(ty, 1, BT, 1, 8);
        put(X, x);
        put(W, w);
        put(B, bias);
        CHECK_RC(tsr_layernorm_forward(X, W, B, Y, mean, rstd, TSR_REDUCTION_ORDERED), TSR_SUCCESS);
        res[t] = get(Y);
        tsr_desc_t *all[] = { X, W, B, Y, mean, rstd };
        for (int k = 0; k < 6; k++)
            tsr_desc_destroy(all[k]);
    }
    /* normalised values are O(1): an absolute floor of 1 */
    check_close("layernorm forward", res[1], res[0], (size_t)C * BT, 4.0, 1.0);
    free(x);
    free(w);
    free(bias);
    free(res[0]);
    free(res[1]);
}

/* RMSNorm forward, a row op (the row-op kit: its float32 function on
 * float32 copies of the bf16 tiles), over token tiles that do not divide BT. */
static void check_rmsnorm(void)
{
    int C = 40, BT = 19;
    float *x = random_bf16_values((size_t)C * BT, 9, 3.0f), *w = random_bf16_values(C, 10, 1.0f);
    float *res[2];
    for (int t = 0; t < 2; t++) {
        tsr_dtype_t ty = both_types[t];
        tsr_desc_t *X = make(ty, C, BT, C, 8), *W = make(ty, C, 1, C, 1), *Y = make(ty, C, BT, C, 8),
                   *rstd = make(ty, 1, BT, 1, 8);
        put(X, x);
        put(W, w);
        CHECK_RC(tsr_rmsnorm_forward(X, W, Y, rstd, 1e-5f), TSR_SUCCESS);
        res[t] = get(Y);
        tsr_desc_t *all[] = { X, W, Y, rstd };
        for (int k = 0; k < 4; k++)
            tsr_desc_destroy(all[k]);
    }
    /* out is rounded once to bf16; normalised values are O(1) */
    check_close("rmsnorm forward (row op)", res[1], res[0], (size_t)C * BT, 1.0, 1.0);
    free(x);
    free(w);
    free(res[0]);
    free(res[1]);
}

/* AdamW on float32 master weights from bf16 gradients: the master, m and v
 * are exactly the float32 AdamW's on the same gradients, and the parameter
 * copy is the master rounded to bf16. */
static void check_adamw_master(void)
{
    int rows = 23, cols = 9;
    size_t n = (size_t)rows * cols;
    float *p0 = random_bf16_values(n, 9, 1.0f), *zero = calloc(n, sizeof(float));
    tsr_desc_t *P = make(TSR_FLOAT32, rows, cols, 8, 4), *G = make(TSR_FLOAT32, rows, cols, 8, 4),
               *M = make(TSR_FLOAT32, rows, cols, 8, 4), *V = make(TSR_FLOAT32, rows, cols, 8, 4);
    tsr_desc_t *master = make(TSR_FLOAT32, rows, cols, 8, 4), *Gb = make(TSR_BFLOAT16, rows, cols, 8, 4),
               *Mb = make(TSR_FLOAT32, rows, cols, 8, 4), *Vb = make(TSR_FLOAT32, rows, cols, 8, 4),
               *Pb = make(TSR_BFLOAT16, rows, cols, 8, 4);
    put(P, p0);
    put(master, p0);
    put(M, zero);
    put(V, zero);
    put(Mb, zero);
    put(Vb, zero);
    for (int step = 0; step < 3; step++) {
        float *g = random_bf16_values(n, 10 + step, 1.0f);
        put(G, g);
        put(Gb, g);
        free(g);
        CHECK_RC(tsr_adamw(P, G, M, V, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, step), TSR_SUCCESS);
        CHECK_RC(tsr_adamw_master(master, Gb, Mb, Vb, Pb, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, step), TSR_SUCCESS);
    }
    float *want = get(P), *got = get(master), *copy = get(Pb), *m1 = get(M), *m2 = get(Mb);
    /* on a GPU either update may run on the CPU or the GPU (nvcc fuses
     * multiply-adds): a few float ulps apart */
    int same = memcmp(want, got, n * sizeof(float)) == 0 && memcmp(m1, m2, n * sizeof(float)) == 0, rounded = 1;
    if (on_gpu)
        same = tsr_test_max_rel_err(got, want, n, 1e-3) <= 1e-5 && tsr_test_max_rel_err(m2, m1, n, 1e-3) <= 1e-5;
    for (size_t i = 0; i < n; i++)
        rounded &= copy[i] == tsr_bf16_to_float(tsr_float_to_bf16(got[i]));
    printf("  adamw_master: master and m %s the float32 AdamW's, the bf16 copy %s the master rounded\n",
           same ? "equal" : "DIFFER FROM", rounded ? "is" : "IS NOT");
    CHECK(same && rounded);
    /* mixtures it refuses: a bf16 master; float32 params with bf16 gradients */
    uint64_t before = tsr_tasks_submitted();
    tsr_expect_error(tsr_adamw_master(Pb, Gb, Mb, Vb, master, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 0), TSR_EDTYPE, before,
                     "bf16 master");
    before = tsr_tasks_submitted();
    CHECK_RC(tsr_adamw(P, Gb, M, V, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 0), TSR_EDTYPE);
    CHECK(tsr_tasks_submitted() == before);
    tsr_desc_t *all[] = { P, G, M, V, master, Gb, Mb, Vb, Pb };
    for (int k = 0; k < 9; k++)
        tsr_desc_destroy(all[k]);
    float *bufs[] = { p0, zero, want, got, copy, m1, m2 };
    for (int k = 0; k < 7; k++)
        free(bufs[k]);
}

/* Causal attention forward and backward over 3 query and 3 key tiles (the
 * online softmax across key tiles, the backward's sums over tiles), bf16
 * against float32 on the same inputs, the statistics in bf16 too (as in
 * GPT-2's bf16 runs). On a GPU the bf16 tasks run the CUDA kernels on the
 * bf16 tiles: bf16 GEMM operands, the softmax weights rounded to bf16 for
 * their GEMMs, as llm.c's; head size 64 takes the fused kernels (on tiles
 * of 72 tokens: blocks of 64 that straddle tiles, partial last blocks). */
static void check_attention(int nh, int hd, int T, int tb)
{
    size_t n = (size_t)nh * hd * T;
    float *in[4], *res[2][4];
    for (int i = 0; i < 4; i++) /* Q, K, V, dout */
        in[i] = random_bf16_values(n, 20 + i, 2.0f);
    for (int t = 0; t < 2; t++) {
        tsr_desc_t *d[9]; /* Q, K, V, dout, out, dQ, dK, dV, stats */
        for (int i = 0; i < 8; i++)
            d[i] = make3(both_types[t], nh, hd, T, nh, hd, tb);
        d[8] = make3(both_types[t], nh, 2, T, nh, 2, tb);
        for (int i = 0; i < 4; i++)
            put(d[i], in[i]);
        CHECK_RC(tsr_attention_forward(d[0], d[1], d[2], d[4], d[8]), TSR_SUCCESS);
        CHECK_RC(tsr_attention_backward(d[0], d[1], d[2], d[4], d[3], d[8], d[5], d[6], d[7], TSR_OVERWRITE,
                                        TSR_REDUCTION_ORDERED),
                 TSR_SUCCESS);
        for (int i = 0; i < 4; i++)
            res[t][i] = get(d[4 + i]);
        for (int i = 0; i < 9; i++)
            tsr_desc_destroy(d[i]);
    }
    const char *names[4] = { "attention out", "attention dQ", "attention dK", "attention dV" };
    for (int i = 0; i < 4; i++) {
        /* errors relative to the tensor's largest value: the logsumexp and D
         * are stored in bf16, which shifts whole columns of weights */
        check_close(names[i], res[1][i], res[0][i], n, 4.0, max_abs(res[0][i], n));
        free(res[0][i]);
        free(res[1][i]);
    }
    for (int i = 0; i < 4; i++)
        free(in[i]);
}

/* ---- the bf16 CUDA kernels against the conversion path ------------------------
 * The ops with bf16 CUDA kernels of their own (heads_copy, softmax_stats,
 * crossentropy_loss / _backward, gelu_bwd, layernorm_fwd / _bwd /
 * _bwd_params, gather_columns) run on bf16 tiles and on float32 tiles holding
 * the same values; each bf16 output is compared with the float32 run's,
 * rounded to bf16: what the conversion path gives (bf16 -> float, the
 * float32 kernel, each output rounded once on store). Every case is built
 * so that an output element is rounded once in the bf16 run (one writing
 * task per tile). On workers of one kind (CPU workers alone: the conversion
 * path on both sides; `gpu` under check_gpu.sh gpu-only: the bf16 CUDA
 * kernels against the float32 ones) the copies and element-wise ops must
 * agree bitwise; with CPU and CUDA workers together each run may land on
 * either, whose float arithmetic differs in the last bits (expf, fused
 * multiply-adds, reduction order): within 1 bf16 ulp of (|ref| + floor). */

static int one_worker_kind(void) { return tsr_ncpu_workers() == 0 || tsr_ncuda_workers() == 0; }

/* x rounded to bf16 in place, as the conversion path stores a bf16 output. */
static void round_to_bf16(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = tsr_bf16_to_float(tsr_float_to_bf16(x[i]));
}

/* got (the bf16 run) against ref (the float32 run, rounded where the output
 * is bf16): bitwise when exact and the workers are of one kind, else within
 * 1 bf16 ulp of (|ref| + floor). Reports how many elements differ ("from
 * float32": from the float32 run). */
static void check_native(const char *what, const float *got, const float *ref, size_t n, int exact, double floor)
{
    if (!exact || !one_worker_kind()) {
        check_close(what, got, ref, n, 1.0, floor);
        return;
    }
    size_t differ = 0;
    for (size_t i = 0; i < n; i++)
        differ += memcmp(&got[i], &ref[i], sizeof(float)) != 0;
    printf("  %-34s %zu of %zu differ bitwise from the conversion path\n", what, differ, n);
    CHECK(differ == 0);
}

/* heads_copy both ways: X split into Q, K, V (copies), split again into V, K,
 * Q (accumulating: one float sum rounded), Q, K, V merged into X2 (copies). */
static void check_native_heads(void)
{
    int B = 2, T = 5, NH = 2, hd = 3, C = NH * hd, BT = B * T, Z = B * NH;
    size_t nx = (size_t)3 * C * BT, nh = (size_t)Z * hd * T;
    float *x = random_bf16_values(nx, 21, 1.0f);
    float *res[2][4];
    for (int t = 0; t < 2; t++) {
        tsr_desc_t *X = make(both_types[t], 3 * C, BT, 7, 4), *X2 = make(both_types[t], 3 * C, BT, 7, 4), *H[3];
        for (int p = 0; p < 3; p++)
            H[p] = make3(both_types[t], Z, hd, T, 3, 2, 3);
        put(X, x);
        CHECK_RC(tsr_heads_split(X, H[0], H[1], H[2], TSR_OVERWRITE), TSR_SUCCESS);
        CHECK_RC(tsr_heads_split(X, H[2], H[1], H[0], TSR_ACCUMULATE), TSR_SUCCESS);
        CHECK_RC(tsr_heads_merge(H[0], H[1], H[2], X2, TSR_OVERWRITE), TSR_SUCCESS);
        for (int p = 0; p < 3; p++) {
            res[t][p] = get(H[p]);
            tsr_desc_destroy(H[p]);
        }
        res[t][3] = get(X2);
        tsr_desc_destroy(X);
        tsr_desc_destroy(X2);
    }
    const char *names[4] = { "heads_copy: split, Q", "heads_copy: split, K", "heads_copy: split, V",
                             "heads_copy: merged" };
    for (int k = 0; k < 4; k++) {
        size_t n = k < 3 ? nh : nx;
        round_to_bf16(res[0][k], n);
        check_native(names[k], res[1][k], res[0][k], n, 1, 0.0);
        free(res[0][k]);
        free(res[1][k]);
    }
    free(x);
}

/* The softmax cross-entropy on bf16 logits (Vp x BT, 3 x 3 tiles: the
 * statistics set then merged over the vocabulary tiles, or REDUX), float32
 * statistics and losses as in tsr_gpt2: softmax_stats, crossentropy_loss,
 * then crossentropy_backward in place. */
static void check_native_crossentropy(tsr_reduction_t accum)
{
    int V = 37, Vp = 40, BT = 9, targets[9];
    for (int k = 0; k < BT; k++)
        targets[k] = (k * 7 + 3) % V;
    float *logits = random_bf16_values((size_t)Vp * BT, 22, 8.0f);
    float *res[2][3];
    for (int t = 0; t < 2; t++) {
        tsr_desc_t *L = make(both_types[t], Vp, BT, 16, 4), *S = make(TSR_FLOAT32, 2, BT, 2, 4),
                   *Lo = make(TSR_FLOAT32, 1, BT, 1, 4);
        put(L, logits);
        CHECK_RC(tsr_crossentropy_forward(L, S, Lo, targets, V, accum), TSR_SUCCESS);
        CHECK_RC(tsr_crossentropy_backward(L, S, targets, V, 0.0f), TSR_SUCCESS);
        res[t][0] = get(S);
        res[t][1] = get(Lo);
        res[t][2] = get(L);
        tsr_desc_destroy(L);
        tsr_desc_destroy(S);
        tsr_desc_destroy(Lo);
    }
    int redux = accum == TSR_REDUCTION_REDUX;
    round_to_bf16(res[0][2], (size_t)Vp * BT);
    check_native(redux ? "softmax_stats (REDUX)" : "softmax_stats", res[1][0], res[0][0], (size_t)2 * BT, 0, 0.0);
    check_native(redux ? "crossentropy_loss (REDUX stats)" : "crossentropy_loss", res[1][1], res[0][1], BT, 0, 0.0);
    check_native(redux ? "crossentropy_backward (REDUX stats)" : "crossentropy_backward", res[1][2], res[0][2],
                 (size_t)Vp * BT, 0, max_abs(res[0][2], (size_t)Vp * BT) / 64);
    for (int k = 0; k < 3; k++) {
        free(res[0][k]);
        free(res[1][k]);
    }
    free(logits);
}

/* Statistics and losses given as bf16 too (operands that the loss's bf16
 * CUDA kernels read as float32): such tasks take the conversion path
 * (runtime/op.c), on a CUDA worker as well. Against the float32 run: the
 * losses and gradients computed from statistics rounded to bf16 (max below
 * 4: off by 2^-7 at most) and rounded themselves. */
static void check_crossentropy_bf16_stats(void)
{
    int V = 37, BT = 9, targets[9];
    for (int k = 0; k < BT; k++)
        targets[k] = (k * 5 + 1) % V;
    float *logits = random_bf16_values((size_t)V * BT, 25, 8.0f);
    float *res[2][2];
    for (int t = 0; t < 2; t++) {
        tsr_desc_t *L = make(both_types[t], V, BT, 16, 4), *S = make(both_types[t], 2, BT, 2, 4),
                   *Lo = make(both_types[t], 1, BT, 1, 4);
        put(L, logits);
        CHECK_RC(tsr_crossentropy_forward(L, S, Lo, targets, V, TSR_REDUCTION_ORDERED), TSR_SUCCESS);
        CHECK_RC(tsr_crossentropy_backward(L, S, targets, V, 0.0f), TSR_SUCCESS);
        res[t][0] = get(Lo);
        res[t][1] = get(L);
        tsr_desc_destroy(L);
        tsr_desc_destroy(S);
        tsr_desc_destroy(Lo);
    }
    check_close("crossentropy_loss (bf16 stats)", res[1][0], res[0][0], BT, 4.0, 1.0);
    check_close("crossentropy_backward (bf16 stats)", res[1][1], res[0][1], (size_t)V * BT, 4.0,
                max_abs(res[0][1], (size_t)V * BT) / 16);
    for (int k = 0; k < 2; k++) {
        free(res[0][k]);
        free(res[1][k]);
    }
    free(logits);
}

/* gelu_bwd into another tile and in place (dout becomes dpre). */
static void check_native_gelu_backward(void)
{
    int m = 37, n = 19;
    size_t len = (size_t)m * n;
    float *pre = random_bf16_values(len, 23, 6.0f), *dout = random_bf16_values(len, 24, 1.0f);
    float *res[2][2];
    for (int t = 0; t < 2; t++) {
        tsr_desc_t *P = make(both_types[t], m, n, 24, 8), *D = make(both_types[t], m, n, 24, 8),
                   *DP = make(both_types[t], m, n, 24, 8);
        put(P, pre);
        put(D, dout);
        CHECK_RC(tsr_gelu_backward(P, D, DP), TSR_SUCCESS);
        CHECK_RC(tsr_gelu_backward(P, D, D), TSR_SUCCESS);
        res[t][0] = get(DP);
        res[t][1] = get(D);
        tsr_desc_destroy(P);
        tsr_desc_destroy(D);
        tsr_desc_destroy(DP);
    }
    for (int k = 0; k < 2; k++) {
        round_to_bf16(res[0][k], len);
        check_native(k ? "gelu_bwd (in place)" : "gelu_bwd", res[1][k], res[0][k], len, 1,
                     max_abs(res[0][k], len) / 16);
        free(res[0][k]);
        free(res[1][k]);
    }
    free(pre);
    free(dout);
}

/* LayerNorm with every feature in one tile (layernorm_fwd; layernorm_bwd and
 * layernorm_bwd_params): the forward over 3 token tiles (out, mean and rstd
 * rounded); the backward over one token tile, so that dw and db get one
 * task, accumulating onto values already there (one rounding after the
 * addition), from its own mean and rstd. */
static void check_native_layernorm(void)
{
    int C = 40, BT = 19;
    float *x = random_bf16_values((size_t)C * BT, 26, 3.0f), *w = random_bf16_values(C, 27, 1.0f),
          *bias = random_bf16_values(C, 28, 1.0f), *dout = random_bf16_values((size_t)C * BT, 29, 1.0f),
          *dinp0 = random_bf16_values((size_t)C * BT, 30, 1.0f), *dw0 = random_bf16_values(C, 31, 1.0f),
          *db0 = random_bf16_values(C, 32, 1.0f), *mean = random_bf16_values(BT, 33, 1.0f),
          *rstd = random_bf16_values(BT, 34, 1.0f);
    for (int k = 0; k < BT; k++)
        rstd[k] = 0.5f + fabsf(rstd[k]);
    round_to_bf16(rstd, BT); /* both runs from the same values */
    float *res[2][6];
    for (int t = 0; t < 2; t++) {
        tsr_dtype_t ty = both_types[t];
        tsr_desc_t *X = make(ty, C, BT, 48, 8), *W = make(ty, C, 1, 48, 1), *B = make(ty, C, 1, 48, 1),
                   *Y = make(ty, C, BT, 48, 8), *M = make(ty, 1, BT, 1, 8), *R = make(ty, 1, BT, 1, 8);
        put(X, x);
        put(W, w);
        put(B, bias);
        CHECK_RC(tsr_layernorm_forward(X, W, B, Y, M, R, TSR_REDUCTION_ORDERED), TSR_SUCCESS);
        res[t][0] = get(Y);
        res[t][1] = get(M);
        res[t][2] = get(R);
        tsr_desc_t *X1 = make(ty, C, BT, 48, 32), *D = make(ty, C, BT, 48, 32), *DI = make(ty, C, BT, 48, 32),
                   *DW = make(ty, C, 1, 48, 1), *DB = make(ty, C, 1, 48, 1), *M1 = make(ty, 1, BT, 1, 32),
                   *R1 = make(ty, 1, BT, 1, 32);
        put(X1, x);
        put(D, dout);
        put(DI, dinp0);
        put(DW, dw0);
        put(DB, db0);
        put(M1, mean);
        put(R1, rstd);
        CHECK_RC(tsr_layernorm_backward(D, X1, W, M1, R1, DI, DW, DB, TSR_ACCUMULATE, TSR_ACCUMULATE,
                                        TSR_REDUCTION_ORDERED, NULL),
                 TSR_SUCCESS);
        res[t][3] = get(DI);
        res[t][4] = get(DW);
        res[t][5] = get(DB);
        tsr_desc_t *all[] = { X, W, B, Y, M, R, X1, D, DI, DW, DB, M1, R1 };
        for (int k = 0; k < 13; k++)
            tsr_desc_destroy(all[k]);
    }
    const char *names[6] = { "layernorm_fwd: out", "layernorm_fwd: mean", "layernorm_fwd: rstd",
                             "layernorm_bwd: dinp (+=)", "layernorm_bwd_params: dw (+=)",
                             "layernorm_bwd_params: db (+=)" };
    size_t len[6] = { (size_t)C * BT, BT, BT, (size_t)C * BT, C, C };
    for (int k = 0; k < 6; k++) {
        round_to_bf16(res[0][k], len[k]);
        check_native(names[k], res[1][k], res[0][k], len[k], 0, max_abs(res[0][k], len[k]) / 16);
        free(res[0][k]);
        free(res[1][k]);
    }
    float *in[] = { x, w, bias, dout, dinp0, dw0, db0, mean, rstd };
    for (int k = 0; k < 9; k++)
        free(in[k]);
}

/* gather_columns through the encoder: the forward (out = wte column + wpe
 * column, out tiles over several wte tiles) and the backward over one token
 * tile, so that each gradient tile gets one task, accumulating onto values
 * already there; every token and position once, so that a REDUX task's
 * zeroed copy (then added to the tile) holds one value, exact in bf16. */
static void check_native_gather(tsr_reduction_t accum)
{
    int C = 24, Vp = 29, maxT = 13, B = 1, T = 12, BT = B * T, tokens[12];
    for (int k = 0; k < BT; k++)
        tokens[k] = (k * 11 + 3) % Vp; /* all different */
    float *wte = random_bf16_values((size_t)C * Vp, 35, 1.0f), *wpe = random_bf16_values((size_t)C * maxT, 36, 1.0f),
          *dout = random_bf16_values((size_t)C * BT, 37, 1.0f);
    float *res[2][3];
    for (int t = 0; t < 2; t++) {
        tsr_dtype_t ty = both_types[t];
        tsr_desc_t *E = make(ty, C, Vp, 16, 8), *P = make(ty, C, maxT, 16, 4), *O = make(ty, C, BT, 16, 5),
                   *D = make(ty, C, BT, 16, 16);
        put(E, wte);
        put(P, wpe);
        put(D, dout);
        CHECK_RC(tsr_encoder_forward(O, E, P, tokens, B, T), TSR_SUCCESS);
        CHECK_RC(tsr_encoder_backward(E, P, D, tokens, B, T, TSR_ACCUMULATE, accum), TSR_SUCCESS);
        res[t][0] = get(O);
        res[t][1] = get(E);
        res[t][2] = get(P);
        tsr_desc_t *all[] = { E, P, O, D };
        for (int k = 0; k < 4; k++)
            tsr_desc_destroy(all[k]);
    }
    int redux = accum == TSR_REDUCTION_REDUX;
    const char *names[3] = { "gather_columns: encoder forward",
                             redux ? "gather_columns: dwte (+=, REDUX)" : "gather_columns: dwte (+=)",
                             redux ? "gather_columns: dwpe (+=, REDUX)" : "gather_columns: dwpe (+=)" };
    size_t len[3] = { (size_t)C * BT, (size_t)C * Vp, (size_t)C * maxT };
    for (int k = 0; k < 3; k++) {
        round_to_bf16(res[0][k], len[k]);
        check_native(names[k], res[1][k], res[0][k], len[k], 1, 0.0);
        free(res[0][k]);
        free(res[1][k]);
    }
    free(wte);
    free(wpe);
    free(dout);
}

/* An op with no CPU kernel (a CUDA-only one) on bf16 tiles, on a machine
 * without CUDA workers: refused at submission with the op's name and the
 * reason, nothing handed to StarPU. */
static void cuda_only(void *buffers[], void *cl_arg, const tsr_exec_t *ex)
{
    (void)buffers;
    (void)cl_arg;
    (void)ex;
}
static tsr_op_t op_cuda_only = { .name = "cuda_only_example", .cuda = TSR_CUDA(cuda_only), .cuda_bf16 = 1,
                                 .nbuffers = 1, .modes = { STARPU_RW } };

static void check_cuda_only_refused(void)
{
    if (tsr_ncuda_workers() > 0)
        return;
    tsr_desc_t *d = make(TSR_BFLOAT16, 4, 4, 4, 4);
    tsr_tile_t t = tsr_tile(d, 0, 0, 0);
    enum starpu_data_access_mode mode = STARPU_RW;
    /* the message goes to stderr: catch it in a file */
    char path[] = "/tmp/tsr_bf16_XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    fflush(stderr);
    dup2(fd, 2);
    uint64_t before = tsr_tasks_submitted();
    int rc = tsr_submit(&op_cuda_only, &t, &mode, 1, NULL, 0, -1, 0.0);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char text[512] = "";
    ssize_t got = pread(fd, text, sizeof text - 1, 0);
    text[got > 0 ? got : 0] = '\0';
    close(fd);
    unlink(path);
    printf("  CUDA-only op on CPU workers: %s", text);
    CHECK(rc == TSR_ENOTSUP && tsr_tasks_submitted() == before);
    CHECK(strstr(text, "cuda_only_example") && strstr(text, "bf16 needs a CUDA worker"));
    tsr_desc_destroy(d);
}

int main(int argc, char **argv)
{
    tsr_config_t cfg;
    tsr_config_default(&cfg);
    cfg.verbose = 0;
    on_gpu = argc > 1 && strcmp(argv[1], "gpu") == 0;
    if (!on_gpu)
        cfg.ncuda = 0; /* the CPU fallback is what this tests */
    if (tsr_init(&cfg, &argc, &argv) != 0)
        return 2;
    check_gemm(TSR_REDUCTION_ORDERED);
    check_gemm(TSR_REDUCTION_REDUX);
    check_linear();
    check_layernorm();
    check_rmsnorm();
    check_attention(2, 8, 24, 8);
    check_attention(3, 64, 200, 72);
    check_adamw_master();
    check_cuda_only_refused();
    check_native_heads();
    check_native_crossentropy(TSR_REDUCTION_ORDERED);
    check_native_crossentropy(TSR_REDUCTION_REDUX);
    check_crossentropy_bf16_stats();
    check_native_gelu_backward();
    check_native_layernorm();
    check_native_gather(TSR_REDUCTION_ORDERED);
    check_native_gather(TSR_REDUCTION_REDUX);
    int rc = tsr_check_report("test_bf16");
    tsr_finalize();
    return rc;
}
