/* time_fusion: fused vs unfused linear layers on GPT-2-like shapes.
 *   gelu: out = gelu(W^T inp + bias), W: C x (mult*C) (the MLP's fc layer)
 *         fused   tsr_linear_gelu_forward (GEMM + bias + GeLU in the GEMM tasks)
 *         unfused tsr_gemm, then tsr_linear_bias_add and tsr_gelu_forward
 *                 (one bias task and one GeLU task per output tile)
 *   qkv:  [Q; K; V] = W^T inp + bias, W: C x 3C, Q, K, V [B*NH, hd, T]
 *         fused   tsr_linear_qkv_forward (the GEMM tasks write the heads; it
 *                 falls back to reshape tasks when tiles do not line up with
 *                 heads: column fused_path = 0)
 *         unfused tsr_gemm into a 3C x BT descriptor, tsr_linear_bias_add,
 *                 then tsr_heads_split (reshape tasks)
 * Square tiles kb = ob = tile (nb = tile unless --nb), or with --tiles auto
 * ob, nb, kb from the GEMM tile model (tsr_gemm_auto_tiles_ruled; qkv: whole
 * heads dividing C, token tiles dividing T). Each case runs the
 * two variants alternately, warmup + niter times, and reports the best.
 * CSV on stdout (header first), messages on stderr. Exit 2 on bad options
 * (also when they skip every case), 1 on a Tessera error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tessera.h"
#include "tsr_compute.h"
#include "tsr_params.h"

enum { P_OP = TSR_SWEEP_FIRST_CASE, P_C, P_MULT, P_BT, P_T, P_NH, P_TILES, P_TILE, P_NB, P_ACCUM, NP };

static tsr_param_t params[NP] = {
    TSR_SWEEP_RUN_PARAMS("CPU workers (-1: all cores), one value",
                         "timed repetitions of each variant, the best is reported", "untimed repetitions first"),
    [P_OP] = { "op", "gelu (Linear+bias+GeLU) and/or qkv (Linear+bias+reshape)", 1, 2, {0}, { "gelu", "qkv" } },
    [P_C] = { "C", "channels (input features)", 0, 1, { 768 } },
    [P_MULT] = { "mult", "gelu: hidden features = mult * C", 0, 1, { 4 } },
    [P_BT] = { "BT", "tokens B*T", 0, 3, { 256, 1024, 4096 } },
    [P_T] = { "T", "qkv: sequence length (0: min(BT, 1024)); B = BT / T", 0, 1, { 0 } },
    [P_NH] = { "NH", "qkv: heads (hd = C / NH)", 0, 1, { 12 } },
    [P_TILES] = { "tiles", "manual (--tile, --nb) or auto (ob, nb, kb from the calibrated GEMM tile model; "
                  "qkv: whole heads dividing C, token tiles dividing T)", 1, 1, { 0 }, { "manual" } },
    [P_TILE] = { "tile", "tile size kb = ob (features)", 0, 5, { 64, 128, 256, 384, 768 } },
    [P_NB] = { "nb", "token tile (0: = tile)", 0, 1, { 0 } },
    [P_ACCUM] = { "accum", "k accumulation: ordered or redux", 1, 1, {0}, { "ordered" } },
};

TSR_ONLY_HELP_FLAG;
static const char *about =
    "Time fused vs unfused Linear+bias+GeLU (op gelu) and Linear+bias+reshape into Q, K, V\n"
    "(op qkv). CSV columns: op,C,OC,BT,T,kb,ob,nb,workers,accum,variant,fused_path,tasks,\n"
    "seconds,gflops,ratio_fused_unfused (fused seconds / unfused seconds: below 1 fusion pays;\n"
    "the unfused row has 1),tiles,predicted_seconds (the GEMM model's time with --tiles auto, else nan).\n"
    "gflops counts the GEMM's 2*C*OC*BT flops.";
static const char *csv_header =
    "op,C,OC,BT,T,kb,ob,nb,workers,accum,variant,fused_path,tasks,seconds,gflops,ratio_fused_unfused,tiles,"
    "predicted_seconds";

typedef struct {
    int qkv;
    int C, OC, BT, T, B, NH, hd, kb, ob, nb;
    tsr_reduction_t accum;
    int auto_tiles;           /* ob, nb, kb from the GEMM tile model */
    double predicted_seconds; /* that model's GEMM time (auto), else nan */
} fusion_case_t;

typedef struct { tsr_desc_t *inp, *W, *bias, *pre, *out, *h[3]; } fusion_descs_t;

/* ---- options -------------------------------------------------------------- */

static int validate_params(void)
{
    const int positive[] = { P_C, P_MULT, P_BT, P_NH, P_TILE };
    for (size_t i = 0; i < sizeof positive / sizeof positive[0]; i++)
        if (tsr_param_check_min(&params[positive[i]], 1))
            return -1;
    if (tsr_param_check_min(&params[P_T], 0) || tsr_param_check_min(&params[P_NB], 0) ||
        tsr_param_check_words(&params[P_OP], "gelu", "qkv") || tsr_param_check_words(&params[P_TILES], "manual", "auto") ||
        tsr_param_check_words(&params[P_ACCUM], "ordered", "redux"))
        return -1;
    if (params[TSR_SWEEP_THREADS].count != 1) { /* StarPU starts once here */
        fprintf(stderr, "error: --threads takes one value\n");
        return -1;
    }
    return 0;
}

/* Returns 0, or prints why the case is skipped and returns -1. */
static int make_case(const int *idx, fusion_case_t *c)
{
#define V(p) (int)params[p].values[idx[p]]
    c->qkv = strcmp(params[P_OP].words[idx[P_OP]], "qkv") == 0;
    c->accum = strcmp(params[P_ACCUM].words[idx[P_ACCUM]], "redux") == 0 ? TSR_REDUCTION_REDUX : TSR_REDUCTION_ORDERED;
    c->C = V(P_C);
    c->OC = c->qkv ? 3 * c->C : V(P_MULT) * c->C;
    c->BT = V(P_BT);
    c->T = V(P_T) ? V(P_T) : (c->BT < 1024 ? c->BT : 1024);
    c->NH = V(P_NH);
    c->kb = c->ob = V(P_TILE);
    c->nb = V(P_NB) ? V(P_NB) : V(P_TILE);
#undef V
    c->auto_tiles = strcmp(params[P_TILES].words[idx[P_TILES]], "auto") == 0;
    c->predicted_seconds = NAN;
    if (c->auto_tiles && (idx[P_TILE] > 0 || idx[P_NB] > 0))
        return -1; /* auto tiles ignore --tile and --nb: the case repeats the first one */
    if (c->qkv && (c->BT % c->T || c->C % c->NH)) {
        fprintf(stderr, "skipped: qkv needs T | BT and NH | C (BT %d, T %d, C %d, NH %d)\n", c->BT, c->T, c->C, c->NH);
        return -1;
    }
    c->B = c->BT / c->T;
    c->hd = c->C / c->NH;
    return 0;
}

/* ---- descriptors ------------------------------------------------------------ */

static int create_descs(const fusion_case_t *c, fusion_descs_t *d)
{
    int rc = tsr_desc_create_2d(&d->inp, TSR_FLOAT32, c->C, c->BT, c->kb, c->nb, NULL);
    if (!rc)
        rc = tsr_desc_create_2d(&d->W, TSR_FLOAT32, c->C, c->OC, c->kb, c->ob, NULL);
    if (!rc)
        rc = tsr_desc_create_2d(&d->bias, TSR_FLOAT32, c->OC, 1, c->ob, 1, NULL);
    /* gelu: pre and out; qkv: the unfused GEMM output and Q, K, V with the
     * head tiles the fused path wants (ob / hd heads, when that is whole) */
    if (!rc)
        rc = tsr_desc_create_2d(&d->pre, TSR_FLOAT32, c->OC, c->BT, c->ob, c->nb, NULL);
    if (!rc && !c->qkv)
        rc = tsr_desc_create_2d(&d->out, TSR_FLOAT32, c->OC, c->BT, c->ob, c->nb, NULL);
    int bb = c->ob % c->hd == 0 ? c->ob / c->hd : 1;
    for (int p = 0; c->qkv && p < 3 && !rc; p++)
        rc = tsr_desc_create(&d->h[p], TSR_FLOAT32, c->B * c->NH, c->hd, c->T, bb, c->hd, c->nb, NULL);
    if (!rc)
        rc = tsr_desc_fill_random(d->inp, 1);
    if (!rc)
        rc = tsr_desc_fill_random(d->W, 2);
    if (!rc)
        rc = tsr_desc_fill_random(d->bias, 3);
    return rc;
}

static void destroy_descs(fusion_descs_t *d)
{
    tsr_desc_t *all[] = { d->inp, d->W, d->bias, d->pre, d->out, d->h[0], d->h[1], d->h[2] };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i])
            tsr_desc_destroy(all[i]);
}

/* ---- one run ------------------------------------------------------------------ */

static int submit_fused(const fusion_case_t *c, fusion_descs_t *d)
{
    if (c->qkv)
        return tsr_linear_qkv_forward(d->inp, d->W, d->bias, d->h[0], d->h[1], d->h[2], c->accum);
    return tsr_linear_gelu_forward(d->inp, d->W, d->bias, d->pre, d->out, c->accum);
}

static int submit_unfused(const fusion_case_t *c, fusion_descs_t *d)
{
    int rc = tsr_gemm(TSR_TRANS, TSR_NOTRANS, 1.0, d->W, d->inp, 0.0, d->pre, c->accum);
    if (!rc)
        rc = tsr_linear_bias_add(d->bias, d->pre);
    if (!rc && c->qkv)
        rc = tsr_heads_split(d->pre, d->h[0], d->h[1], d->h[2], TSR_OVERWRITE);
    else if (!rc)
        rc = tsr_gelu_forward(d->pre, d->out);
    return rc;
}

/* One variant from a barrier to the end of its tasks. */
static int timed_run(const fusion_case_t *c, fusion_descs_t *d, int fused, double *seconds, uint64_t *tasks)
{
    int rc = tsr_barrier();
    uint64_t before = tsr_tasks_submitted();
    double t0 = tsr_wtime();
    if (!rc)
        rc = fused ? submit_fused(c, d) : submit_unfused(c, d);
    if (!rc)
        rc = tsr_wait();
    *seconds = tsr_wtime() - t0;
    *tasks = tsr_tasks_submitted() - before;
    return rc;
}

static void print_row(const fusion_case_t *c, const fusion_descs_t *d, int fused, uint64_t tasks, double s,
                      double ratio)
{
    int path = !c->qkv || tsr_linear_qkv_fusable(d->inp, d->W, d->h[0]);
    double gflops = 2.0 * c->C * c->OC * c->BT / s * 1e-9;
    printf("%s,%d,%d,%d,%d,%d,%d,%d,%d,%s,%s,%d,%llu,%.6f,%.2f,%.3f,%s,%.6f\n", c->qkv ? "qkv" : "gelu", c->C, c->OC,
           c->BT, c->T, c->kb, c->ob, c->nb, tsr_ncpu_workers(), c->accum == TSR_REDUCTION_REDUX ? "redux" : "ordered",
           fused ? "fused" : "unfused", fused ? path : 0, (unsigned long long)tasks, s, gflops, ratio,
           c->auto_tiles ? "auto" : "manual", c->predicted_seconds);
    fflush(stdout);
}

/* --tiles auto: the GEMM W^T inp (OC x BT, k = C) tiles from the model; the
 * fused QKV projection writes whole heads (ob a multiple of hd dividing C)
 * and token tiles of one sequence (nb dividing T) when there are several. */
static int choose_tiles(fusion_case_t *c)
{
    if (!c->auto_tiles)
        return TSR_SUCCESS;
    tsr_gemm_tile_rules_t rules = { { 0 }, { 0 } };
    if (c->qkv) {
        rules.multiple_of[0] = c->hd;
        rules.divisor_of[0] = c->C;
        rules.divisor_of[1] = c->B > 1 ? c->T : 0;
    }
    tsr_tiles_t t;
    int rc = tsr_gemm_auto_tiles_ruled(TSR_FLOAT32, c->OC, c->BT, c->C, c->accum, &rules, &t);
    if (rc)
        return rc;
    c->ob = t.mb;
    c->nb = t.nb;
    c->kb = t.kb;
    c->predicted_seconds = t.predicted_seconds;
    if (tsr_rank() == 0)
        fprintf(stderr, "time_fusion: --tiles auto for %s C %d BT %d: ob %d nb %d kb %d, GEMM predicted %.4f s\n",
                c->qkv ? "qkv" : "gelu", c->C, c->BT, c->ob, c->nb, c->kb, c->predicted_seconds);
    return TSR_SUCCESS;
}

/* Both variants alternately, in alternating order (so that machine noise and
 * cache state hit both alike), best of niter. */
static int run_case(fusion_case_t *c, int niter, int warmup)
{
    fusion_descs_t d = { 0 };
    int rc = choose_tiles(c);
    if (!rc)
        rc = create_descs(c, &d);
    double best[2] = { INFINITY, INFINITY };
    uint64_t tasks[2] = { 0, 0 };
    for (int it = 0; !rc && it < warmup + niter; it++)
        for (int k = 0; k < 2 && !rc; k++) {
            int v = (it + k) % 2; /* 0: fused; which goes first alternates */
            double s;
            rc = timed_run(c, &d, v == 0, &s, &tasks[v]);
            if (it >= warmup && s < best[v])
                best[v] = s;
        }
    if (!rc && tsr_rank() == 0) {
        print_row(c, &d, 1, tasks[0], best[0], best[0] / best[1]);
        print_row(c, &d, 0, tasks[1], best[1], 1.0);
    }
    destroy_descs(&d);
    return rc;
}

/* One combination of the lists: TSR_SWEEP_SKIP or run_case's code. */
static int sweep_case(const int *idx, const int *flags, char *what, size_t what_size)
{
    (void)flags;
    fusion_case_t c;
    if (make_case(idx, &c))
        return TSR_SWEEP_SKIP;
    int rc = run_case(&c, (int)params[TSR_SWEEP_NITER].values[0], (int)params[TSR_SWEEP_WARMUP].values[0]);
    snprintf(what, what_size, "%s C %d BT %d tile %d", c.qkv ? "qkv" : "gelu", c.C, c.BT, c.kb);
    return rc;
}

int main(int argc, char **argv)
{
    const tsr_sweep_t sweep = { "time_fusion", about, csv_header, params, NP, flag_names, flag_help, NF,
                                validate_params, NULL, NULL, sweep_case };
    return tsr_sweep_main(&sweep, argc, argv);
}
