/* time_attention: timing and peak extra memory of flash-style causal
 * attention (tsr_attention_forward / tsr_attention_backward) over the
 * cartesian product of the parameter lists, next to a naive materialised
 * attention in this binary (a T x T score matrix per head, BLAS GEMMs and a
 * plain softmax). CSV on stdout (rank 0), messages on stderr. Exit 2 on bad
 * options, 1 on a Tessera error.
 *
 * Memory: StarPU allocation hooks (starpu_malloc_set_hooks) count every
 * buffer StarPU allocates in main memory: descriptor tiles, replicas
 * (REDUX per-worker copies, MPI receive buffers) and the attention tasks'
 * scratch score blocks (allocated with starpu_malloc_flags). extra_bytes is
 * the peak of that count during the attention calls (warmup and timed)
 * minus its value before the first call, when Q, K, V, out (and for the
 * backward dout, dQ, dK, dV) are already allocated and filled; the stats
 * descriptor [heads, 2, T] is first touched by the forward, so it is part
 * of extra_bytes. The naive version's extra_bytes is what it mallocs: one
 * T x T float matrix per thread (forward) or two (backward). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <starpu.h>
#include "tessera.h"
#include "tsr_compute.h"
#include "tsr_params.h"

enum { P_T = TSR_SWEEP_FIRST_CASE, P_HD, P_HEADS, P_BB, P_TILES, P_QB, P_KB, P_PASS, P_MODE, NP };

static tsr_param_t params[NP] = {
    TSR_SWEEP_RUN_PARAMS("CPU workers, a list: StarPU restarts for each (-1: all cores)",
                         "timed repetitions, the best is reported (one value)",
                         "untimed repetitions before timing (one value)"),
    [P_T] = { "T", "sequence length", 0, 6, { 256, 512, 1024, 2048, 4096, 8192 } },
    [P_HD] = { "hd", "head dimension", 0, 1, { 64 } },
    [P_HEADS] = { "heads", "B*NH heads", 0, 1, { 4 } },
    [P_BB] = { "bb", "heads per tile", 0, 1, { 1 } },
    [P_TILES] = { "tiles", "manual (--qb --kb) or auto (tsr_attention_auto_tiles: each pass's tiles from "
                  "calibrated tile-pair tasks and a schedule model)", 1, 1, { 0 }, { "manual" } },
    [P_QB] = { "qb", "query tile (tokens)", 0, 1, { 256 } },
    [P_KB] = { "kb", "key tile (tokens; 0: same as qb)", 0, 1, { 0 } },
    [P_PASS] = { "pass", "fwd or bwd", 1, 2, { 0 }, { "fwd", "bwd" } },
    [P_MODE] = { "mode", "backward accumulation: ordered or redux (the forward has none: its CSV mode is \"online\", the online softmax)", 1, 1, { 0 },
                 { "ordered" } },
};

enum { F_NO_NAIVE, F_HELP, NF };
static const char *flag_names[NF] = { "no-naive", "help" };
static const char *flag_help[NF] = { "skip the naive materialised attention (naive_* = nan)", "print this help" };

static const char *about =
    "Time flash-style causal attention on [heads, hd, T] descriptors, best of --niter, next to a naive\n"
    "materialised attention (one T x T score matrix per head and thread; GEMMs in the same BLAS, one\n"
    "thread per CPU worker, or per core when GPUs run Tessera alone; heads spread over the\n"
    "threads). gflops counts the useful causal work for both: forward 2 GEMMs, backward 5\n"
    "GEMMs of 2*hd flops per (query, visible key) pair, i.e.\n"
    "{4,10} * hd * heads * T(T+1)/2. extra_bytes: peak temporary memory beyond the inputs and outputs\n"
    "(StarPU allocation hooks; see the source); extra_pct_TxT = 100 * extra_bytes / (4 T^2).\n"
    "CSV columns: T,hd,heads,bb,qb,kb,workers,pass,mode,seconds,gflops,extra_bytes,extra_pct_TxT,\n"
    "naive_seconds,naive_gflops,naive_extra_bytes,speedup_vs_naive,tiles,predicted_seconds (the model's time\n"
    "with --tiles auto, else nan)";
static const char *csv_header =
    "T,hd,heads,bb,qb,kb,workers,pass,mode,seconds,gflops,extra_bytes,extra_pct_TxT,naive_seconds,"
    "naive_gflops,naive_extra_bytes,speedup_vs_naive,tiles,predicted_seconds";

typedef struct {
    int T, hd, heads, bb, qb, kb, bwd;
    int auto_tiles;           /* qb, kb from tsr_attention_auto_tiles */
    double predicted_seconds; /* its model's time (auto), else nan */
    tsr_reduction_t mode;
    int niter, warmup;
} attn_case_t;

/* ---- StarPU allocation hooks: current and peak bytes ------------------------
 * Each block carries its size in a 64-byte header (starpu_free passes no size). */

enum { MEM_HEADER = 64 };
static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t mem_current, mem_peak;

static int hook_malloc(unsigned node, void **A, size_t dim, int flags)
{
    (void)node;
    (void)flags;
    void *p = NULL;
    if (posix_memalign(&p, MEM_HEADER, dim + MEM_HEADER) != 0)
        return -ENOMEM;
    memcpy(p, &dim, sizeof dim);
    pthread_mutex_lock(&mem_lock);
    mem_current += dim;
    if (mem_current > mem_peak)
        mem_peak = mem_current;
    pthread_mutex_unlock(&mem_lock);
    *A = (char *)p + MEM_HEADER;
    return 0;
}

static int hook_free(unsigned node, void *A, size_t dim, int flags)
{
    (void)node;
    (void)dim;
    (void)flags;
    if (!A)
        return 0;
    void *p = (char *)A - MEM_HEADER;
    size_t n;
    memcpy(&n, p, sizeof n);
    pthread_mutex_lock(&mem_lock);
    mem_current -= n;
    pthread_mutex_unlock(&mem_lock);
    free(p);
    return 0;
}

/* Current bytes; the peak restarts from it. */
static size_t mem_reset_peak(void)
{
    pthread_mutex_lock(&mem_lock);
    size_t c = mem_current;
    mem_peak = c;
    pthread_mutex_unlock(&mem_lock);
    return c;
}

static size_t mem_get_peak(void)
{
    pthread_mutex_lock(&mem_lock);
    size_t p = mem_peak;
    pthread_mutex_unlock(&mem_lock);
    return p;
}

/* ---- options ----------------------------------------------------------------- */

static int validate_params(void)
{
    const int positive[] = { P_T, P_HD, P_HEADS, P_BB, P_QB };
    for (size_t i = 0; i < sizeof positive / sizeof positive[0]; i++)
        if (tsr_param_check_min(&params[positive[i]], 1))
            return -1;
    if (tsr_param_check_min(&params[P_KB], 0) ||
        tsr_param_check_words(&params[P_PASS], "fwd", "bwd") || tsr_param_check_words(&params[P_MODE], "ordered", "redux") ||
        tsr_param_check_words(&params[P_TILES], "manual", "auto"))
        return -1;
    return 0;
}

static void make_case(const int *idx, attn_case_t *c)
{
#define V(p) (int)params[p].values[idx[p]]
#define W(p) params[p].words[idx[p]]
    c->T = V(P_T); c->hd = V(P_HD); c->heads = V(P_HEADS); c->bb = V(P_BB);
    c->qb = V(P_QB); c->kb = V(P_KB) ? V(P_KB) : c->qb;
    c->bwd = strcmp(W(P_PASS), "bwd") == 0;
    c->auto_tiles = strcmp(W(P_TILES), "auto") == 0;
    c->predicted_seconds = NAN;
    c->mode = strcmp(W(P_MODE), "redux") == 0 ? TSR_REDUCTION_REDUX : TSR_REDUCTION_ORDERED;
    c->niter = (int)params[TSR_SWEEP_NITER].values[0];
    c->warmup = (int)params[TSR_SWEEP_WARMUP].values[0];
#undef V
#undef W
}

static double case_flops(const attn_case_t *c)
{
    return (c->bwd ? 10.0 : 4.0) * c->hd * c->heads * (double)c->T * (c->T + 1) / 2.0;
}

/* ---- naive materialised attention (plain arrays, rank 0) ------------------------
 * A head is hd x T column-major (token t at + t * hd); S, P, dP are T x T with
 * one query per column (keys along rows). */

typedef struct {
    int hd, T, heads, nthreads, bwd;
    float *q, *k, *v, *out, *dout, *dq, *dk, *dv;
} naive_t;

/* Column t of S (keys 0..T-1 of query t): softmax over keys <= t, 0 after. */
static void naive_softmax_column(float *s, int T, int t)
{
    float mx = -INFINITY, sum = 0.0f;
    for (int j = 0; j <= t; j++)
        mx = s[j] > mx ? s[j] : mx;
    for (int j = 0; j <= t; j++) {
        s[j] = expf(s[j] - mx);
        sum += s[j];
    }
    for (int j = 0; j <= t; j++)
        s[j] /= sum;
    for (int j = t + 1; j < T; j++)
        s[j] = 0.0f;
}

/* P = causal softmax(scale K^T Q) of one head into S (T x T). */
static void naive_probs(const naive_t *a, const float *q, const float *k, float *S)
{
    int T = a->T;
    tsr_cpu_gemm(TSR_FLOAT32, TSR_TRANS, TSR_NOTRANS, T, T, a->hd, 1.0 / sqrt(a->hd), k, a->hd, q, a->hd, 0.0, S,
                 T, 1);
    for (int t = 0; t < T; t++)
        naive_softmax_column(S + (size_t)t * T, T, t);
}

static void naive_forward_head(const naive_t *a, size_t off, float *S)
{
    naive_probs(a, a->q + off, a->k + off, S);
    tsr_cpu_gemm(TSR_FLOAT32, TSR_NOTRANS, TSR_NOTRANS, a->hd, a->T, a->T, 1.0, a->v + off, a->hd, S, a->T, 0.0,
                 a->out + off, a->hd, 1);
}

/* dV = dO P^T, dP = V^T dO, dS = P o (dP - D), dQ = s K dS, dK = s Q dS^T. */
static void naive_backward_head(const naive_t *a, size_t off, float *P, float *dS)
{
    int T = a->T, hd = a->hd;
    double scale = 1.0 / sqrt(hd);
    naive_probs(a, a->q + off, a->k + off, P);
    tsr_cpu_gemm(TSR_FLOAT32, TSR_NOTRANS, TSR_TRANS, hd, T, T, 1.0, a->dout + off, hd, P, T, 0.0, a->dv + off, hd, 1);
    tsr_cpu_gemm(TSR_FLOAT32, TSR_TRANS, TSR_NOTRANS, T, T, hd, 1.0, a->v + off, hd, a->dout + off, hd, 0.0, dS, T, 1);
    for (int t = 0; t < T; t++) {
        float d = 0.0f, *p = P + (size_t)t * T, *ds = dS + (size_t)t * T;
        for (int j = 0; j <= t; j++)
            d += p[j] * ds[j];
        for (int j = 0; j < T; j++)
            ds[j] = p[j] * (ds[j] - d);
    }
    tsr_cpu_gemm(TSR_FLOAT32, TSR_NOTRANS, TSR_NOTRANS, hd, T, T, scale, a->k + off, hd, dS, T, 0.0, a->dq + off, hd, 1);
    tsr_cpu_gemm(TSR_FLOAT32, TSR_NOTRANS, TSR_TRANS, hd, T, T, scale, a->q + off, hd, dS, T, 0.0, a->dk + off, hd, 1);
}

typedef struct { const naive_t *a; int id; int failed; } naive_thread_t;

/* Thread id takes heads id, id + nthreads, ... with its own T x T buffers. */
static void *naive_thread(void *arg)
{
    naive_thread_t *th = arg;
    const naive_t *a = th->a;
    size_t tt = (size_t)a->T * a->T;
    float *S = malloc(tt * sizeof *S), *S2 = a->bwd ? malloc(tt * sizeof *S2) : NULL;
    th->failed = !S || (a->bwd && !S2);
    for (int h = th->id; !th->failed && h < a->heads; h += a->nthreads) {
        size_t off = (size_t)h * a->hd * a->T;
        if (a->bwd)
            naive_backward_head(a, off, S, S2);
        else
            naive_forward_head(a, off, S);
    }
    free(S);
    free(S2);
    return NULL;
}

static int naive_run(const naive_t *a)
{
    pthread_t tid[64];
    naive_thread_t th[64];
    int n = a->nthreads, failed = 0;
    for (int i = 0; i < n; i++) {
        th[i] = (naive_thread_t){ a, i, 0 };
        pthread_create(&tid[i], NULL, naive_thread, &th[i]);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(tid[i], NULL);
        failed |= th[i].failed;
    }
    return failed ? TSR_ENOMEM : 0;
}

static float *random_floats(size_t n, uint64_t seed, int rows)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; x && i < n; i++)
        x[i] = (float)tsr_random_value(seed, 0, (int)(i % rows), (int)(i / rows));
    return x;
}

/* Best of niter naive runs after warmup ones (StarPU workers paused). */
static int time_naive(const attn_case_t *c, int nthreads, double *best, double *extra)
{
    size_t n = (size_t)c->heads * c->hd * c->T;
    naive_t a = { c->hd, c->T, c->heads, nthreads < c->heads ? nthreads : c->heads, c->bwd, 0, 0, 0, 0, 0, 0, 0, 0 };
    if (a.nthreads > 64)
        a.nthreads = 64;
    float **arrays[] = { &a.q, &a.k, &a.v, &a.out, &a.dout, &a.dq, &a.dk, &a.dv };
    int rc = 0;
    for (int i = 0; i < 8; i++)
        if (!(*arrays[i] = random_floats(n, 10 + i, c->hd)))
            rc = TSR_ENOMEM;
    *best = INFINITY;
    *extra = (double)a.nthreads * (c->bwd ? 2 : 1) * c->T * (double)c->T * sizeof(float);
    tsr_pause();
    for (int it = 0; !rc && it < c->warmup + c->niter; it++) {
        double t0 = tsr_wtime();
        rc = naive_run(&a);
        double s = tsr_wtime() - t0;
        if (it >= c->warmup && s < *best)
            *best = s;
    }
    tsr_resume();
    for (int i = 0; i < 8; i++)
        free(*arrays[i]);
    return rc;
}

typedef struct { int T, hd, heads, bwd, threads; double seconds, extra; } naive_entry_t;
static naive_entry_t naive_cache[256];
static int naive_cached;

/* Naive seconds and extra bytes for this shape, pass and thread count, measured once. */
static int naive_measure(const attn_case_t *c, int nthreads, double *seconds, double *extra)
{
    for (int i = 0; i < naive_cached; i++) {
        const naive_entry_t *e = &naive_cache[i];
        if (e->T == c->T && e->hd == c->hd && e->heads == c->heads && e->bwd == c->bwd && e->threads == nthreads) {
            *seconds = e->seconds;
            *extra = e->extra;
            return 0;
        }
    }
    int rc = time_naive(c, nthreads, seconds, extra);
    if (!rc && naive_cached < (int)(sizeof naive_cache / sizeof naive_cache[0]))
        naive_cache[naive_cached++] = (naive_entry_t){ c->T, c->hd, c->heads, c->bwd, nthreads, *seconds, *extra };
    return rc;
}

/* ---- Tessera ------------------------------------------------------------------- */

typedef struct { tsr_desc_t *Q, *K, *V, *out, *stats, *dout, *dQ, *dK, *dV; } descs_t;

static int create_descs(const attn_case_t *c, descs_t *d)
{
    memset(d, 0, sizeof *d);
    tsr_desc_t **query[] = { &d->Q, &d->out, &d->dout, &d->dQ }, **key[] = { &d->K, &d->V, &d->dK, &d->dV };
    int nq = c->bwd ? 4 : 2, rc = 0; /* the forward needs no dout, dQ, dK, dV */
    for (int i = 0; i < nq && !rc; i++)
        rc = tsr_desc_create(query[i], TSR_FLOAT32, c->heads, c->hd, c->T, c->bb, c->hd, c->qb, NULL);
    for (int i = 0; i < nq && !rc; i++)
        rc = tsr_desc_create(key[i], TSR_FLOAT32, c->heads, c->hd, c->T, c->bb, c->hd, c->kb, NULL);
    if (!rc)
        rc = tsr_desc_create(&d->stats, TSR_FLOAT32, c->heads, 2, c->T, c->bb, 2, c->qb, NULL);
    /* every input and output tile allocated and filled before the measurement */
    tsr_desc_t *filled[] = { d->Q, d->K, d->V, d->out, d->dout, d->dQ, d->dK, d->dV };
    for (int i = 0; i < 8 && !rc; i++)
        if (filled[i])
            rc = tsr_desc_fill_random(filled[i], 20 + i);
    return rc;
}

static void destroy_descs(descs_t *d)
{
    tsr_desc_t *all[] = { d->Q, d->K, d->V, d->out, d->stats, d->dout, d->dQ, d->dK, d->dV };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i])
            tsr_desc_destroy(all[i]);
}

static int one_pass(const attn_case_t *c, descs_t *d)
{
    if (!c->bwd)
        return tsr_attention_forward(d->Q, d->K, d->V, d->out, d->stats);
    return tsr_attention_backward(d->Q, d->K, d->V, d->out, d->dout, d->stats, d->dQ, d->dK, d->dV,
                                  TSR_OVERWRITE, c->mode);
}

/* Best of niter timed passes (after warmup ones); peak extra bytes. The
 * backward runs after one forward, which is inside the memory window. */
static int time_tessera(const attn_case_t *c, double *best, double *extra)
{
    descs_t d;
    int rc = create_descs(c, &d);
    if (!rc)
        rc = tsr_wait();
    size_t base = mem_reset_peak();
    if (!rc && c->bwd)
        rc = tsr_attention_forward(d.Q, d.K, d.V, d.out, d.stats);
    if (!rc)
        rc = tsr_wait();
    *best = INFINITY;
    for (int it = 0; !rc && it < c->warmup + c->niter; it++) {
        rc = tsr_barrier();
        double t0 = tsr_wtime();
        if (!rc)
            rc = one_pass(c, &d);
        if (!rc)
            rc = tsr_wait();
        double s = tsr_wtime() - t0;
        if (it >= c->warmup && s < *best)
            *best = s;
    }
    *extra = (double)(mem_get_peak() - base);
    destroy_descs(&d);
    return rc;
}

/* ---- one case -------------------------------------------------------------------- */

static void print_row(const attn_case_t *c, int workers, double s, double extra, double ns, double nextra)
{
    double flops = case_flops(c), txt = 4.0 * c->T * (double)c->T;
    printf("%d,%d,%d,%d,%d,%d,%d,%s,%s,%.6f,%.2f,%.0f,%.3f,%.6f,%.2f,%.0f,%.3f,%s,%.6f\n", c->T, c->hd, c->heads,
           c->bb, c->qb, c->kb, workers, c->bwd ? "bwd" : "fwd",
           c->bwd ? (c->mode == TSR_REDUCTION_REDUX ? "redux" : "ordered") : "online", s, flops / s * 1e-9, extra,
           100.0 * extra / txt, ns, flops / ns * 1e-9, nextra, ns / s, c->auto_tiles ? "auto" : "manual",
           c->predicted_seconds);
    fflush(stdout);
}

/* --tiles auto: the pass's tiles from tsr_attention_auto_tiles. */
static int choose_tiles(attn_case_t *c)
{
    if (!c->auto_tiles)
        return TSR_SUCCESS;
    tsr_tiles_t t;
    int rc = tsr_attention_auto_tiles(c->T, c->hd, c->heads, c->bb, c->bwd, c->mode, &t);
    if (!rc)
        c->qb = t.qb, c->kb = t.kvb, c->predicted_seconds = t.predicted_seconds;
    if (!rc && tsr_rank() == 0)
        fprintf(stderr, "time_attention: --tiles auto for T %d %s: qb %d kb %d, predicted %.4f s\n", c->T,
                c->bwd ? "bwd" : "fwd", c->qb, c->kb, c->predicted_seconds);
    return rc;
}

static int run_case(attn_case_t *c, int naive)
{
    int workers = tsr_ncpu_workers();
    double ns = NAN, nextra = NAN, s, extra;
    int rc = choose_tiles(c);
    if (rc)
        return rc;
    if (naive && tsr_rank() == 0)
        rc = naive_measure(c, tsr_baseline_threads(), &ns, &nextra);
    if (!rc)
        rc = time_tessera(c, &s, &extra);
    if (!rc && tsr_rank() == 0)
        print_row(c, workers, s, extra, ns, nextra);
    return rc;
}

/* A case is skipped when it repeats another: the forward has no accumulation
 * mode, auto tiles ignore --qb and --kb. */
static int duplicate_case(const attn_case_t *c, const int *idx)
{
    return (!c->bwd && idx[P_MODE] > 0) || (c->auto_tiles && (idx[P_QB] > 0 || idx[P_KB] > 0));
}

/* One combination of the lists: TSR_SWEEP_SKIP or run_case's code. */
static int sweep_case(const int *idx, const int *flags, char *what, size_t what_size)
{
    attn_case_t c;
    make_case(idx, &c);
    if (duplicate_case(&c, idx))
        return TSR_SWEEP_SKIP;
    int rc = run_case(&c, !flags[F_NO_NAIVE]);
    snprintf(what, what_size, "attention T %d hd %d heads %d tiles %d/%d/%d", c.T, c.hd, c.heads, c.bb, c.qb,
             c.kb);
    return rc;
}

static int start(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    starpu_malloc_set_hooks(hook_malloc, hook_free);
    return 0;
}

int main(int argc, char **argv)
{
    const tsr_sweep_t sweep = { "time_attention", about, csv_header, params, NP, flag_names, flag_help, NF,
                                validate_params, start, NULL, sweep_case };
    return tsr_sweep_main(&sweep, argc, argv);
}
