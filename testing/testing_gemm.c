/* testing_gemm: Chameleon-style test driver for tsr_gemm. Runs the
 * cartesian product of the parameter lists; with --check, compares every
 * result against one BLAS call per batch slice with the scaled residual
 *   ||C - Cref||max / ((|alpha| max(||A||max, ||B||max) + |beta| ||C0||max) k eps) < 10.
 * Prints one CSV line per case and "N passed, M failed"; exits 1 on failure. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tessera.h"
#include "tsr_compute.h"
#include "tsr_params.h"

enum { P_M, P_N, P_K, P_MB, P_NB, P_KB, P_B, P_BB, P_P, P_DTYPE, P_TA, P_TB, P_ACCUM, P_ALPHA, P_BETA, P_SEED, NP };

static tsr_param_t params[NP] = {
    [P_M] = { "m", "rows of C", 0, 1, { 500 } },
    [P_N] = { "n", "columns of C", 0, 1, { 300 } },
    [P_K] = { "k", "inner dimension", 0, 1, { 200 } },
    [P_MB] = { "mb", "tile rows of C", 0, 1, { 128 } },
    [P_NB] = { "nb", "tile columns of C", 0, 1, { 128 } },
    [P_KB] = { "kb", "tile size along k", 0, 1, { 64 } },
    [P_B] = { "batch", "batch size (3D descriptors)", 0, 1, { 1 } },
    [P_BB] = { "bb", "batch tile size", 0, 1, { 1 } },
    [P_P] = { "P", "process grid rows (Q = ranks / P)", 0, 1, { 1 } },
    [P_DTYPE] = { "dtype", "s (float32) or d (float64)", 1, 1, {0}, { "s" } },
    [P_TA] = { "transA", "N or T", 1, 1, {0}, { "N" } },
    [P_TB] = { "transB", "N or T", 1, 1, {0}, { "N" } },
    [P_ACCUM] = { "accum", "ordered or redux", 1, 1, {0}, { "ordered" } },
    [P_ALPHA] = { "alpha", "alpha (decimal)", TSR_PARAM_REALS, 1, {0}, { "1.5" } },
    [P_BETA] = { "beta", "beta (decimal; 0 means C is not read)", TSR_PARAM_REALS, 1, {0}, { "-0.5" } },
    [P_SEED] = { "seed", "random seed of A (B: seed+1, C: seed+2)", 0, 1, { 42 } },
};

typedef struct {
    int m, n, k, mb, nb, kb, b, bb, P, Q;
    tsr_dtype_t dtype;
    tsr_trans_t ta, tb;
    tsr_reduction_t accum;
    double alpha, beta;
    long seed;
} gemm_case_t;

/* Everything that can be checked before StarPU starts. */
static int validate_params(void)
{
    const int positive[] = { P_M, P_N, P_K, P_MB, P_NB, P_KB, P_B, P_BB, P_P };
    for (size_t i = 0; i < sizeof positive / sizeof positive[0]; i++)
        if (tsr_param_check_min(&params[positive[i]], 1))
            return -1;
    if (tsr_param_check_words(&params[P_DTYPE], "s", "d") || tsr_param_check_words(&params[P_TA], "N", "T") ||
        tsr_param_check_words(&params[P_TB], "N", "T") || tsr_param_check_words(&params[P_ACCUM], "ordered", "redux"))
        return -1;
    return 0;
}

static int parse_case(const int *idx, int size, gemm_case_t *c)
{
#define V(p) params[p].values[idx[p]]
#define W(p) params[p].words[idx[p]]
    c->m = V(P_M); c->n = V(P_N); c->k = V(P_K);
    c->mb = V(P_MB); c->nb = V(P_NB); c->kb = V(P_KB);
    c->b = V(P_B); c->bb = V(P_BB); c->P = V(P_P); c->seed = V(P_SEED);
    c->Q = size / c->P;
    c->dtype = strcmp(W(P_DTYPE), "d") == 0 ? TSR_FLOAT64 : TSR_FLOAT32;
    c->ta = strcmp(W(P_TA), "T") == 0 ? TSR_TRANS : TSR_NOTRANS;
    c->tb = strcmp(W(P_TB), "T") == 0 ? TSR_TRANS : TSR_NOTRANS;
    c->accum = strcmp(W(P_ACCUM), "redux") == 0 ? TSR_REDUCTION_REDUX : TSR_REDUCTION_ORDERED;
    c->alpha = tsr_param_real(&params[P_ALPHA], idx[P_ALPHA]);
    c->beta = tsr_param_real(&params[P_BETA], idx[P_BETA]);
    if (size % c->P) {
        fprintf(stderr, "error: P = %d does not divide the %d rank(s)\n", c->P, size);
        return -1;
    }
    return 0;
#undef V
#undef W
}

static double max_abs(const void *X, size_t n, tsr_dtype_t t)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double v = t == TSR_FLOAT64 ? ((const double *)X)[i] : ((const float *)X)[i];
        m = isnan(v) || isnan(m) ? NAN : fmax(m, fabs(v));
    }
    return m;
}

static double max_abs_diff(const void *X, const void *Y, size_t n, tsr_dtype_t t)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = t == TSR_FLOAT64 ? ((const double *)X)[i] - ((const double *)Y)[i]
                                    : (double)((const float *)X)[i] - ((const float *)Y)[i];
        m = isnan(d) || isnan(m) ? NAN : fmax(m, fabs(d));
    }
    return m;
}

typedef struct { tsr_desc_t *A, *B, *C; } gemm_descs_t;

static int create_descs(const gemm_case_t *c, gemm_descs_t *d)
{
    tsr_dist_t dist = tsr_dist_block_cyclic(c->P, c->Q);
    int am = c->ta == TSR_TRANS ? c->k : c->m, an = c->ta == TSR_TRANS ? c->m : c->k;
    int amb = c->ta == TSR_TRANS ? c->kb : c->mb, anb = c->ta == TSR_TRANS ? c->mb : c->kb;
    int bm = c->tb == TSR_TRANS ? c->n : c->k, bn = c->tb == TSR_TRANS ? c->k : c->n;
    int bmb = c->tb == TSR_TRANS ? c->nb : c->kb, bnb = c->tb == TSR_TRANS ? c->kb : c->nb;
    int rc = tsr_desc_create(&d->A, c->dtype, c->b, am, an, c->bb, amb, anb, &dist);
    if (!rc)
        rc = tsr_desc_create(&d->B, c->dtype, c->b, bm, bn, c->bb, bmb, bnb, &dist);
    if (!rc)
        rc = tsr_desc_create(&d->C, c->dtype, c->b, c->m, c->n, c->bb, c->mb, c->nb, &dist);
    if (!rc)
        rc = tsr_desc_fill_random(d->A, c->seed);
    if (!rc)
        rc = tsr_desc_fill_random(d->B, c->seed + 1);
    if (!rc)
        rc = tsr_desc_fill_random(d->C, c->seed + 2);
    return rc;
}

static void *gather_all(tsr_desc_t *d, int *rc)
{
    size_t bytes = (size_t)d->b * d->m * d->n * d->elsize;
    void *buf = tsr_rank() == 0 ? malloc(bytes) : NULL;
    if (tsr_rank() == 0 && !buf) {
        *rc = TSR_ENOMEM;
        return NULL;
    }
    *rc = tsr_desc_gather(d, buf, d->m, 0);
    return buf;
}

/* Cref = alpha op(A) op(B) + beta C0, one BLAS call per batch slice. */
static double residual(const gemm_case_t *c, const gemm_descs_t *d, const void *A, const void *B,
                       void *C0, const void *C)
{
    size_t es = d->C->elsize, sa = (size_t)d->A->m * d->A->n, sb = (size_t)d->B->m * d->B->n,
           sc = (size_t)c->m * c->n;
    double nA = max_abs(A, sa * c->b, c->dtype), nB = max_abs(B, sb * c->b, c->dtype);
    double nC = max_abs(C0, sc * c->b, c->dtype);
    for (int z = 0; z < c->b; z++)
        tsr_cpu_gemm(c->dtype, c->ta, c->tb, c->m, c->n, c->k, c->alpha, (const char *)A + z * sa * es, d->A->m,
                     (const char *)B + z * sb * es, d->B->m, c->beta, (char *)C0 + z * sc * es, c->m, 1);
    double eps = c->dtype == TSR_FLOAT64 ? DBL_EPSILON : FLT_EPSILON;
    double denom = (fabs(c->alpha) * fmax(nA, nB) + fabs(c->beta) * nC) * c->k * eps;
    double diff = max_abs_diff(C, C0, sc * c->b, c->dtype);
    return denom > 0 ? diff / denom : diff;
}

static int run_case(const gemm_case_t *c, int check, int *passed)
{
    gemm_descs_t d = { 0 };
    int rc = create_descs(c, &d);
    void *A = NULL, *B = NULL, *C0 = NULL, *C = NULL;
    if (!rc && check) {
        A = gather_all(d.A, &rc);
        if (!rc) B = gather_all(d.B, &rc);
        if (!rc) C0 = gather_all(d.C, &rc);
    }
    double t0 = 0, seconds = 0;
    if (!rc) {
        tsr_barrier();
        t0 = tsr_wtime();
        rc = tsr_gemm(c->ta, c->tb, c->alpha, d.A, d.B, c->beta, d.C, c->accum);
    }
    if (!rc) {
        rc = tsr_wait();
        seconds = tsr_wtime() - t0;
    }
    if (!rc && check)
        C = gather_all(d.C, &rc);
    double res = 0;
    int ok = rc == 0;
    if (ok && check && tsr_rank() == 0) {
        res = residual(c, &d, A, B, C0, C);
        ok = res < 10.0;
    }
    if (tsr_rank() == 0) {
        double gflops = 2.0 * c->b * c->m * c->n * c->k / seconds * 1e-9;
        printf("%s,%c,%c,%s,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%.6f,%.2f,%.3e,%s\n", tsr_dtype_name(c->dtype),
               c->ta == TSR_TRANS ? 'T' : 'N', c->tb == TSR_TRANS ? 'T' : 'N',
               c->accum == TSR_REDUCTION_REDUX ? "redux" : "ordered", c->b, c->m, c->n, c->k, c->bb, c->mb, c->nb, c->kb,
               c->P, c->Q, tsr_ncpu_workers(), seconds, gflops, res,
               rc ? tsr_strerror(rc) : !check ? "-" : ok ? "PASS" : "FAIL");
        fflush(stdout);
    }
    free(A); free(B); free(C0); free(C);
    tsr_desc_destroy(d.A);
    tsr_desc_destroy(d.B);
    tsr_desc_destroy(d.C);
    *passed = ok;
    return rc;
}

static int run(int argc, char **argv)
{
    const char *flag_names[] = { "check", "help" };
    const char *flag_help[] = { "compare against one BLAS call (scaled residual < 10)", "print this help" };
    int flags[2] = { 0, 0 };
    /* process-wide settings (one value each) after the per-case parameters */
    tsr_param_t all[NP + 2];
    memcpy(all, params, sizeof params);
    all[NP] = (tsr_param_t){ .name = "threads", .help = "CPU workers per rank (-1: all cores)", .count = 1,
                             .values = { -1 } };
    all[NP + 1] = (tsr_param_t){ .name = "pws", .help = "parallel-worker size: GEMM tasks on combined workers of that many cores",
                                 .count = 1, .values = { 1 } };
    if (tsr_params_parse(argc, argv, all, NP + 2, flag_names, flags, 2))
        return 2;
    memcpy(params, all, sizeof params);
    if (validate_params())
        return 2;
    if (flags[1]) {
        tsr_params_usage(argv[0], "Test tsr_gemm (C = alpha op(A) op(B) + beta C) on tiled descriptors.", all,
                         NP + 2, flag_names, flag_help, 2);
        return 0;
    }
    tsr_config_t cfg;
    tsr_config_default(&cfg);
    cfg.ncpus = (int)all[NP].values[0];
    cfg.parallel_worker_size = (int)all[NP + 1].values[0];
    int rc = tsr_init(&cfg, &argc, &argv);
    if (rc) {
        fprintf(stderr, "error: tsr_init: %s\n", tsr_strerror(rc));
        return 2;
    }
    if (cfg.parallel_worker_size > 1 && cfg.parallel_worker_size > tsr_ncpu_workers()) {
        if (tsr_rank() == 0) /* as tsr_gpt2: StarPU would make no parallel worker of that size */
            fprintf(stderr, "error: --pws %d is larger than the %d CPU workers\n", cfg.parallel_worker_size,
                    tsr_ncpu_workers());
        tsr_finalize();
        return 2;
    }
    if (tsr_rank() == 0)
        printf("dtype,transA,transB,accum,batch,m,n,k,bb,mb,nb,kb,P,Q,workers,seconds,gflops,residual,status\n");
    int idx[NP] = { 0 }, npass = 0, nfail = 0;
    do {
        gemm_case_t c;
        int ok = 0;
        if (parse_case(idx, tsr_size(), &c) == 0)
            run_case(&c, flags[0], &ok);
        if (ok)
            npass++;
        else
            nfail++;
    } while (tsr_params_next(params, NP, idx));
    if (tsr_rank() == 0)
        printf("testing_gemm: %d passed, %d failed\n", npass, nfail);
    tsr_finalize();
    return nfail ? 1 : 0;
}

int main(int argc, char **argv)
{
    return tsr_stdout_close(run(argc, argv));
}
