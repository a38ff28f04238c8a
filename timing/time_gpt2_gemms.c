/* time_gpt2_gemms: the matrix products of one GPT-2 training step alone, each
 * as one whole-matrix call of the BLAS's own multi-threaded GEMM routine: the
 * time a step would take if everything but its GEMMs were free (llm.c's
 * matmuls with nothing around them). It is the baseline of the "step time
 * against the GEMM limit" ratio that timing/time_gpt2_gemm_limit.sh measures.
 *
 * Per layer: qkv (3C x C), attention projection (C x C), fc (4C x C) and its
 * projection (C x 4C); then the LM head (Vp x C). Each runs forward
 * (Y = W X), backward on the data (dX = W^T dY) and on the weights
 * (dW += dY X^T), on N = B * T tokens, in Tessera's layout (column-major,
 * a token's vector contiguous). Every layer has its own weights and weight
 * gradients, so they stream from memory as in a real step; activations are
 * shared between layers. The attention's own products (Q K^T, P V) are not
 * GEMMs in llm.c and are left out.
 *
 * CSV on stdout (one line per timed step, a median line, and a "square" line:
 * the step's GFLOP at the BLAS's rate on a large square product), messages on
 * stderr; exit 2 on bad options, 1 when out of memory. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "tessera.h"
#include "tsr_compute.h"
#include "tsr_params.h"
#include "gpt2_model_io.h"

enum { P_MODEL, P_B, P_T, P_THREADS, P_STEPS, NP };
static tsr_param_t params[NP] = {
    [P_MODEL] = { "model", "a tsr_gpt2 preset (124M, 350M, 774M, 1558M, d2, micro): its L, C and Vp", 1, 1, { 0 }, { "124M" } },
    [P_B] = { "B", "sequences per step", 0, 1, { 4 } },
    [P_T] = { "T", "sequence length", 0, 1, { 64 } },
    [P_THREADS] = { "threads", "BLAS threads (-1: all cores)", 0, 1, { -1 } },
    [P_STEPS] = { "steps", "timed steps (after one untimed step)", 0, 1, { 5 } },
};
TSR_ONLY_HELP_FLAG;
static const char *about =
    "Time the GEMMs of one GPT-2 training step alone (forward, backward data, backward weights of every\n"
    "linear layer and the LM head), each one whole-matrix call of the BLAS's own multi-threaded routine.\n"
    "CSV columns: model,B,T,threads,step,fwd_ms,bwd_data_ms,bwd_weight_ms,total_ms,gflop,gflops\n"
    "(step: the timed step's number, \"median\", or \"square\": the same GFLOP at the rate of one\n"
    "2048^3 product through the same routine, the step's pure-GEMM time).";

enum { FWD, BWD_DATA, BWD_WEIGHT, NPASSES };

typedef struct {
    int out, in; /* W is in x out, column-major: Y (out x N) = W^T X (in x N) */
} linear_t;

typedef struct {
    int L, C, Vp, N;
    linear_t lin[5];      /* the four per-layer linears, then the LM head */
    float **w, **dw;      /* L * 4 + 1 weights and weight gradients */
    float *x, *y, *dx, *dy; /* activations, sized for the widest layer */
} step_t;

static size_t weight_floats(const linear_t *l) { return (size_t)l->in * l->out; }

/* The step's weights: four a layer, then the LM head's. */
static int nweights(const step_t *s) { return s->L * 4 + 1; }
static const linear_t *linear_of(const step_t *s, int i) { return &s->lin[i == nweights(s) - 1 ? 4 : i % 4]; }

static int step_alloc(step_t *s)
{
    int nw = nweights(s), widest = s->Vp > 4 * s->C ? s->Vp : 4 * s->C;
    s->w = calloc((size_t)nw, sizeof *s->w);
    s->dw = calloc((size_t)nw, sizeof *s->dw);
    if (!s->w || !s->dw)
        return -1;
    for (int i = 0; i < nw; i++) {
        const linear_t *l = linear_of(s, i);
        s->w[i] = malloc(weight_floats(l) * sizeof(float));
        s->dw[i] = malloc(weight_floats(l) * sizeof(float));
        if (!s->w[i] || !s->dw[i])
            return -1;
        for (size_t e = 0; e < weight_floats(l); e++)
            s->w[i][e] = (float)(e % 17) * 1e-3f - 8e-3f, s->dw[i][e] = 0.0f;
    }
    size_t act = (size_t)widest * s->N;
    s->x = malloc(act * sizeof(float));
    s->y = malloc(act * sizeof(float));
    s->dx = malloc(act * sizeof(float));
    s->dy = malloc(act * sizeof(float));
    if (!s->x || !s->y || !s->dx || !s->dy)
        return -1;
    for (size_t e = 0; e < act; e++)
        s->x[e] = (float)(e % 13) * 1e-3f, s->y[e] = s->dx[e] = 0.0f, s->dy[e] = (float)(e % 7) * 1e-3f;
    return 0;
}

static void step_free(step_t *s)
{
    for (int i = 0; s->w && i < nweights(s); i++)
        free(s->w[i]), free(s->dw[i]);
    free(s->w), free(s->dw), free(s->x), free(s->y), free(s->dx), free(s->dy);
}

/* One pass of linear i over the N tokens, through the BLAS's own routine. */
static void linear_pass(const step_t *s, int i, int pass, int threads)
{
    const linear_t *l = linear_of(s, i);
    int n = s->N;
    if (pass == FWD) /* Y = W^T X */
        tsr_cpu_blas_gemm(TSR_FLOAT32, TSR_TRANS, TSR_NOTRANS, l->out, n, l->in, 1.0, s->w[i], l->in, s->x, l->in,
                          0.0, s->y, l->out, threads);
    else if (pass == BWD_DATA) /* dX = W dY */
        tsr_cpu_blas_gemm(TSR_FLOAT32, TSR_NOTRANS, TSR_NOTRANS, l->in, n, l->out, 1.0, s->w[i], l->in, s->dy,
                          l->out, 0.0, s->dx, l->in, threads);
    else /* dW += X dY^T */
        tsr_cpu_blas_gemm(TSR_FLOAT32, TSR_NOTRANS, TSR_TRANS, l->in, l->out, n, 1.0, s->x, l->in, s->dy, l->out,
                          1.0, s->dw[i], l->in, threads);
}

/* Seconds of each pass over every linear of the step: the forward in layer
 * order, the backward in reverse, as a step runs them. */
static void time_step(const step_t *s, int threads, double seconds[NPASSES])
{
    int nw = nweights(s);
    double t0 = tsr_wtime();
    for (int i = 0; i < nw; i++)
        linear_pass(s, i, FWD, threads);
    seconds[FWD] = tsr_wtime() - t0;
    seconds[BWD_DATA] = seconds[BWD_WEIGHT] = 0;
    for (int i = nw - 1; i >= 0; i--)
        for (int pass = BWD_DATA; pass <= BWD_WEIGHT; pass++) {
            double t = tsr_wtime();
            linear_pass(s, i, pass, threads);
            seconds[pass] += tsr_wtime() - t;
        }
}

static double step_flops(const step_t *s)
{
    double per_token = 0;
    for (int i = 0; i < nweights(s); i++)
        per_token += 2.0 * (double)weight_floats(linear_of(s, i));
    return 3.0 * per_token * s->N; /* forward and the two backward products */
}

/* The BLAS's rate on one large square product (SQUARE^3, the best of three
 * calls) through the same routine and threads: the rate a step's GEMMs would
 * have if their shapes and cold operands cost nothing. 0 when out of memory. */
enum { SQUARE = 2048 };
static double square_gflops(int threads)
{
    size_t n = (size_t)SQUARE * SQUARE;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = calloc(n, sizeof *c);
    double best = 0;
    if (a && b && c) {
        for (size_t e = 0; e < n; e++)
            a[e] = (float)(e % 11) * 1e-3f, b[e] = (float)(e % 5) * 1e-3f;
        for (int rep = 0; rep < 4; rep++) { /* the first warms the BLAS's buffers and threads */
            double t = tsr_wtime();
            tsr_cpu_blas_gemm(TSR_FLOAT32, TSR_NOTRANS, TSR_NOTRANS, SQUARE, SQUARE, SQUARE, 1.0, a, SQUARE, b, SQUARE,
                              0.0, c, SQUARE, threads);
            double rate = 2.0 * SQUARE * SQUARE * SQUARE / (tsr_wtime() - t) * 1e-9;
            if (rep > 0 && rate > best)
                best = rate;
        }
    }
    free(a), free(b), free(c);
    return best;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int run(int argc, char **argv)
{
    int flags[NF] = { 0 }, cli = tsr_params_cli(argc, argv, about, params, NP, flag_names, flag_help, flags, NF);
    if (cli >= 0)
        return cli;
    tsr_gpt2_config_t model;
    if (tsr_gpt2_config_preset(params[P_MODEL].words[0], &model) || tsr_param_check_min(&params[P_B], 1) ||
        tsr_param_check_min(&params[P_T], 1) || tsr_param_check_min(&params[P_STEPS], 1))
        return 2;
    long threads = params[P_THREADS].values[0];
    if (threads == -1)
        threads = sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1) {
        fprintf(stderr, "error: --threads must be -1 (all cores) or >= 1, not %ld\n", params[P_THREADS].values[0]);
        return 2;
    }
    long tokens = params[P_B].values[0] * params[P_T].values[0];
    if (tokens > 1 << 20) {
        fprintf(stderr, "error: B * T = %ld tokens is more than this program times (1048576)\n", tokens);
        return 2;
    }
    step_t s = { .L = model.L, .C = model.C, .Vp = model.Vp, .N = (int)tokens };
    int C = s.C;
    s.lin[0] = (linear_t){ 3 * C, C };
    s.lin[1] = (linear_t){ C, C };
    s.lin[2] = (linear_t){ 4 * C, C };
    s.lin[3] = (linear_t){ C, 4 * C };
    s.lin[4] = (linear_t){ s.Vp, C };
    if (step_alloc(&s)) {
        fprintf(stderr, "error: out of memory for the %s step's weights and activations\n", params[P_MODEL].words[0]);
        step_free(&s);
        return 1;
    }
    fprintf(stderr, "time_gpt2_gemms: %s; its own GEMM routine, %ld thread(s)\n", tsr_blas_description(), threads);
    printf("model,B,T,threads,step,fwd_ms,bwd_data_ms,bwd_weight_ms,total_ms,gflop,gflops\n");
    int steps = (int)params[P_STEPS].values[0];
    double flops = step_flops(&s), sec[NPASSES], *totals = malloc((size_t)steps * sizeof *totals);
    if (!totals) {
        step_free(&s);
        return 1;
    }
    time_step(&s, (int)threads, sec); /* first touch, the BLAS's buffers and threads */
    for (int st = 0; st < steps; st++) {
        time_step(&s, (int)threads, sec);
        totals[st] = sec[FWD] + sec[BWD_DATA] + sec[BWD_WEIGHT];
        printf("%s,%ld,%ld,%ld,%d,%.1f,%.1f,%.1f,%.1f,%.2f,%.1f\n", params[P_MODEL].words[0], params[P_B].values[0],
               params[P_T].values[0], threads, st + 1, sec[FWD] * 1e3, sec[BWD_DATA] * 1e3, sec[BWD_WEIGHT] * 1e3,
               totals[st] * 1e3, flops * 1e-9, flops / totals[st] * 1e-9);
    }
    qsort(totals, (size_t)steps, sizeof *totals, cmp_double);
    double med = steps % 2 ? totals[steps / 2] : 0.5 * (totals[steps / 2 - 1] + totals[steps / 2]);
    printf("%s,%ld,%ld,%ld,median,,,,%.1f,%.2f,%.1f\n", params[P_MODEL].words[0], params[P_B].values[0],
           params[P_T].values[0], threads, med * 1e3, flops * 1e-9, flops / med * 1e-9);
    double peak = square_gflops((int)threads);
    if (peak > 0)
        printf("%s,%ld,%ld,%ld,square,,,,%.1f,%.2f,%.1f\n", params[P_MODEL].words[0], params[P_B].values[0],
               params[P_T].values[0], threads, flops / peak * 1e-6, flops * 1e-9, peak);
    free(totals);
    step_free(&s);
    return 0;
}

int main(int argc, char **argv)
{
    return tsr_stdout_close(run(argc, argv));
}
