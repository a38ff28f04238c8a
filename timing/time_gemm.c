/* time_gemm: timing of tsr_gemm (C = A B, float descriptors on a P x Q
 * block-cyclic grid) over the cartesian product of the parameter lists,
 * against one call of the same BLAS on plain arrays. CSV on stdout (rank 0),
 * messages on stderr. Exit 2 on bad options, 1 on a Tessera error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tessera.h"
#include "tsr_compute.h"
#include "tsr_params.h"
#if TSR_USE_MPI
#include <mpi.h>
#endif

/* The run parameters (TSR_SWEEP_RUN_PARAMS) are outside the cartesian
 * product: the product runs over params[P_M .. NP). */
enum { P_M = TSR_SWEEP_FIRST_CASE, P_N, P_K, P_TILES, P_TILE, P_MB, P_NB, P_KB, P_P, P_MODE, P_DTYPE, NP };

static tsr_param_t params[NP] = {
    TSR_SWEEP_RUN_PARAMS("CPU workers per rank, a list: StarPU restarts for each (-1: all cores)",
                         "timed repetitions, the best is reported (one value)",
                         "untimed repetitions before timing (one value)"),
    [P_M] = { "m", "rows of C and A", 0, 1, { 2048 } },
    [P_N] = { "n", "columns of C and B", 0, 1, { 2048 } },
    [P_K] = { "k", "inner dimension", 0, 1, { 2048 } },
    [P_TILES] = { "tiles", "manual (--tile or --mb --nb --kb) or auto (tsr_gemm_auto_tiles: a calibrated "
                           "model; predicted_seconds in the CSV), a list", 1, 1, {0}, { "manual" } },
    [P_TILE] = { "tile", "square tiles: mb = nb = kb = tile (0: use --mb --nb --kb)", 0, 1, { 0 } },
    [P_MB] = { "mb", "tile rows (C, A)", 0, 1, { 512 } },
    [P_NB] = { "nb", "tile columns (C, B)", 0, 1, { 512 } },
    [P_KB] = { "kb", "tile size along k", 0, 1, { 512 } },
    [P_P] = { "P", "process grid rows (Q = ranks / P)", 0, 1, { 1 } },
    [P_MODE] = { "mode", "k accumulation: ordered or redux", 1, 2, {0}, { "ordered", "redux" } },
    [P_DTYPE] = { "dtype", "s (float32) or d (float64)", 1, 1, {0}, { "s" } },
};

enum { F_NO_BASELINE, F_HELP, NF };
static const char *flag_names[NF] = { "no-baseline", "help" };
static const char *flag_help[NF] = {
    "skip the BLAS baseline (ratio_to_blas = nan)",
    "print this help",
};

static const char *about =
    "Time tsr_gemm (C = A B, beta = 0) on block-cyclic descriptors; best of --niter.\n"
    "Baseline: one call of the same BLAS (single node) on plain column-major arrays with as\n"
    "many threads as CPU workers (every core when GPUs run Tessera alone), measured on rank 0\n"
    "alone (with several MPI ranks it is still a single-node BLAS on one rank's workers).\n"
    "ratio_to_blas = BLAS seconds / Tessera seconds. CSV columns: m,n,k,mb,nb,kb,P,Q,workers,\n"
    "mode,seconds,gflops,ratio_to_blas,dtype,tiles,\n"
    "predicted_seconds (the model's time with --tiles auto, else nan)";
static const char *csv_header =
    "m,n,k,mb,nb,kb,P,Q,workers,mode,seconds,gflops,ratio_to_blas,dtype,tiles,predicted_seconds";

typedef struct {
    int m, n, k, mb, nb, kb, P, Q;
    tsr_dtype_t dtype;
    tsr_reduction_t mode;
    int niter, warmup;
    int auto_tiles;           /* mb, nb, kb from tsr_gemm_auto_tiles */
    double predicted_seconds; /* its prediction (auto), else NAN */
} gemm_case_t;

/* ---- options -------------------------------------------------------------- */

/* Everything that can be checked before StarPU starts. */
static int validate_params(void)
{
    const int positive[] = { P_M, P_N, P_K, P_MB, P_NB, P_KB, P_P };
    for (size_t i = 0; i < sizeof positive / sizeof positive[0]; i++)
        if (tsr_param_check_min(&params[positive[i]], 1))
            return -1;
    if (tsr_param_check_min(&params[P_TILE], 0) ||
        tsr_param_check_words(&params[P_MODE], "ordered", "redux") ||
        tsr_param_check_words(&params[P_TILES], "manual", "auto") || tsr_param_check_words(&params[P_DTYPE], "s", "d"))
        return -1;
    return 0;
}

static void make_case(const int *idx, int nranks, gemm_case_t *c)
{
#define V(p) (int)params[p].values[idx[p]]
#define W(p) params[p].words[idx[p]]
    c->m = V(P_M); c->n = V(P_N); c->k = V(P_K);
    c->mb = V(P_MB); c->nb = V(P_NB); c->kb = V(P_KB);
    if (V(P_TILE) > 0)
        c->mb = c->nb = c->kb = V(P_TILE);
    c->P = V(P_P);
    c->Q = nranks / c->P;
    c->dtype = strcmp(W(P_DTYPE), "d") == 0 ? TSR_FLOAT64 : TSR_FLOAT32;
    c->mode = strcmp(W(P_MODE), "redux") == 0 ? TSR_REDUCTION_REDUX : TSR_REDUCTION_ORDERED;
    c->niter = (int)params[TSR_SWEEP_NITER].values[0];
    c->warmup = (int)params[TSR_SWEEP_WARMUP].values[0];
    c->auto_tiles = strcmp(W(P_TILES), "auto") == 0;
    c->predicted_seconds = NAN;
#undef V
#undef W
}

/* ---- MPI: initialised here when launched with several ranks, so that
 * tsr_finalize leaves it alone and tsr_init can run again per worker count. */

#if TSR_USE_MPI
static int mpi_started;
#endif

static int mpi_start(int *argc, char ***argv)
{
#if TSR_USE_MPI
    int provided;
    if (!tsr_mpi_launched() || tsr_simulated()) /* simulated: StarPU started MPI before main */
        return 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
        return -1;
    mpi_started = 1;
#else
    (void)argc, (void)argv;
#endif
    return 0;
}

static void mpi_stop(void)
{
#if TSR_USE_MPI
    if (mpi_started)
        MPI_Finalize();
#endif
}

/* ---- BLAS baseline -------------------------------------------------------- */

static void *random_array(tsr_dtype_t t, int m, int n, uint64_t seed)
{
    void *X = malloc((size_t)m * n * tsr_dtype_size(t));
    for (int j = 0; X && j < n; j++)
        for (int i = 0; i < m; i++) {
            double v = tsr_random_value(seed, 0, i, j);
            if (t == TSR_FLOAT64)
                ((double *)X)[(size_t)j * m + i] = v;
            else
                ((float *)X)[(size_t)j * m + i] = (float)v;
        }
    return X;
}

/* Best of niter single calls of the BLAS's own GEMM (after warmup ones), or a negative code.
 * Idle StarPU workers poll their cores, which slowed a 2-thread BLAS call down
 * 2-3x in a test: they are paused (asleep) while BLAS runs. */
static double measure_blas(const gemm_case_t *c, int nthreads)
{
    void *A = random_array(c->dtype, c->m, c->k, 1), *B = random_array(c->dtype, c->k, c->n, 2);
    void *C = calloc((size_t)c->m * c->n, tsr_dtype_size(c->dtype));
    double best = TSR_ENOMEM;
    tsr_pause();
    for (int it = 0; A && B && C && it < c->warmup + c->niter; it++) {
        double t0 = tsr_wtime();
        tsr_cpu_blas_gemm(c->dtype, TSR_NOTRANS, TSR_NOTRANS, c->m, c->n, c->k, 1.0, A, c->m, B, c->k, 0.0, C,
                          c->m, nthreads);
        double s = tsr_wtime() - t0;
        if (it >= c->warmup && (best < 0 || s < best))
            best = s;
    }
    tsr_resume();
    free(A); free(B); free(C);
    return best;
}

typedef struct { int m, n, k, threads; tsr_dtype_t dtype; double seconds; } blas_entry_t;
static blas_entry_t blas_cache[1024];
static int blas_cached;

/* BLAS seconds for this shape, dtype and thread count, measured once. */
static double blas_seconds(const gemm_case_t *c, int nthreads)
{
    for (int i = 0; i < blas_cached; i++) {
        const blas_entry_t *e = &blas_cache[i];
        if (e->m == c->m && e->n == c->n && e->k == c->k && e->dtype == c->dtype && e->threads == nthreads)
            return e->seconds;
    }
    double s = measure_blas(c, nthreads);
    if (s >= 0 && blas_cached < (int)(sizeof blas_cache / sizeof blas_cache[0]))
        blas_cache[blas_cached++] = (blas_entry_t){ c->m, c->n, c->k, nthreads, c->dtype, s };
    return s;
}

/* ---- Tessera -------------------------------------------------------------- */

typedef struct { tsr_desc_t *A, *B, *C; } gemm_descs_t;

static int create_descs(const gemm_case_t *c, gemm_descs_t *d)
{
    tsr_dist_t dist = tsr_dist_block_cyclic(c->P, c->Q);
    int rc = tsr_desc_create_2d(&d->A, c->dtype, c->m, c->k, c->mb, c->kb, &dist);
    if (!rc)
        rc = tsr_desc_create_2d(&d->B, c->dtype, c->k, c->n, c->kb, c->nb, &dist);
    if (!rc)
        rc = tsr_desc_create_2d(&d->C, c->dtype, c->m, c->n, c->mb, c->nb, &dist);
    if (!rc)
        rc = tsr_desc_fill_random(d->A, 1);
    if (!rc)
        rc = tsr_desc_fill_random(d->B, 2);
    return rc;
}

static void destroy_descs(gemm_descs_t *d)
{
    if (d->A) tsr_desc_destroy(d->A);
    if (d->B) tsr_desc_destroy(d->B);
    if (d->C) tsr_desc_destroy(d->C);
}

/* One gemm, from a barrier to the end of its tasks; seconds in *s. */
static int timed_gemm(const gemm_case_t *c, gemm_descs_t *d, double *s)
{
    int rc = tsr_barrier();
    double t0 = tsr_wtime();
    if (!rc)
        rc = tsr_gemm(TSR_NOTRANS, TSR_NOTRANS, 1.0, d->A, d->B, 0.0, d->C, c->mode);
    if (!rc)
        rc = tsr_wait();
    *s = tsr_wtime() - t0;
    return rc;
}

/* Best of niter timed gemms after warmup untimed ones. */
static int time_tessera(const gemm_case_t *c, double *best)
{
    gemm_descs_t d = { 0 };
    int rc = create_descs(c, &d);
    *best = INFINITY;
    for (int it = 0; !rc && it < c->warmup + c->niter; it++) {
        double s;
        rc = timed_gemm(c, &d, &s);
        if (it >= c->warmup && s < *best)
            *best = s;
    }
    destroy_descs(&d);
    return rc;
}

/* ---- one case ------------------------------------------------------------- */

static void print_row(const gemm_case_t *c, int workers, double seconds, double blas)
{
    double gflops = 2.0 * c->m * c->n * c->k / seconds * 1e-9;
    printf("%d,%d,%d,%d,%d,%d,%d,%d,%d,%s,%.6f,%.2f,%.3f,%s,%s,%.6f\n", c->m, c->n, c->k, c->mb, c->nb, c->kb, c->P,
           c->Q, workers, c->mode == TSR_REDUCTION_REDUX ? "redux" : "ordered", seconds, gflops, blas / seconds,
           c->dtype == TSR_FLOAT64 ? "d" : "s", c->auto_tiles ? "auto" : "manual", c->predicted_seconds);
    fflush(stdout);
}

/* The baseline comes first (rank 0 alone, before the descriptors exist), then
 * Tessera on every rank. */
static int run_case(gemm_case_t *c, int baseline)
{
    int workers = tsr_ncpu_workers();
    double blas = NAN, seconds;
    if (c->auto_tiles) {
        tsr_tiles_t t;
        int rc = tsr_gemm_auto_tiles(c->dtype, c->m, c->n, c->k, c->mode, &t);
        if (rc)
            return rc;
        c->mb = t.mb, c->nb = t.nb, c->kb = t.kb, c->predicted_seconds = t.predicted_seconds;
        if (tsr_rank() == 0)
            fprintf(stderr, "time_gemm: --tiles auto for %dx%dx%d %s: mb %d nb %d kb %d, predicted %.4f s\n", c->m,
                    c->n, c->k, c->mode == TSR_REDUCTION_REDUX ? "redux" : "ordered", c->mb, c->nb, c->kb,
                    c->predicted_seconds);
    }
    if (baseline && tsr_rank() == 0) {
        blas = blas_seconds(c, tsr_baseline_threads());
        if (blas < 0)
            return (int)blas;
    }
    int rc = time_tessera(c, &seconds);
    if (!rc && tsr_rank() == 0)
        print_row(c, workers, seconds, blas);
    return rc;
}

/* One combination of the lists: TSR_SWEEP_SKIP, 2 (bad P) or run_case's code. */
static int sweep_case(const int *idx, const int *flags, char *what, size_t what_size)
{
    gemm_case_t c;
    make_case(idx, tsr_size(), &c);
    if (c.auto_tiles && (idx[P_TILE] || idx[P_MB] || idx[P_NB] || idx[P_KB]))
        return TSR_SWEEP_SKIP; /* auto ignores the manual tile lists: once per shape */
    if (tsr_size() % c.P) {
        if (tsr_rank() == 0)
            fprintf(stderr, "error: --P %d does not divide the %d rank(s)\n", c.P, tsr_size());
        return 2;
    }
    int rc = run_case(&c, !flags[F_NO_BASELINE] && !tsr_simulated());
    snprintf(what, what_size, "tsr_gemm %dx%dx%d tiles %dx%dx%d", c.m, c.n, c.k, c.mb, c.nb, c.kb);
    return rc;
}

static int start(int *argc, char ***argv)
{
    if (mpi_start(argc, argv)) {
        fprintf(stderr, "error: MPI_Init_thread failed\n");
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const tsr_sweep_t sweep = { "time_gemm", about, csv_header, params, NP, flag_names, flag_help, NF,
                                validate_params, start, mpi_stop, sweep_case };
    return tsr_sweep_main(&sweep, argc, argv);
}
