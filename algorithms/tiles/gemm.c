/* Tile sizes for tsr_gemm chosen from a calibrated model.
 *
 * Kernel model: the time of one GEMM task with square tiles t x t x t,
 * measured through StarPU with every worker busy (p independent tasks at
 * once, so memory contention and the runtime's per-task cost are included),
 * for t in CALIBRATED; cached per BLAS kernels, element type and worker
 * count. A task costs the runtime's per-task overhead (from the smallest
 * size) plus its flops at the best rate times the geometric mean of the
 * efficiencies of its three sides (each the square size's, interpolated on
 * log t).
 *
 * Schedule model, p workers: with W the work (sum of the task times), N the
 * task count and CP the longest chain (ordered: the kt tasks of one C tile;
 * REDUX: one task plus the additions of the per-worker buffers), the
 * predicted time is max(W / p, ceil(N / p) * W / N, CP) plus, for REDUX, the
 * additions' work spread over the workers; every task also pays for
 * reading its A and B tiles, and a task that accumulates into C for reading
 * and writing its C tile. Every (mb, nb, kb) from
 * CANDIDATES (and the whole dimension, when smaller) is evaluated; the
 * TSR_TILE_SHORTLIST fastest are then refined: their exact task shape is
 * measured the same way as the squares (once, cached with them) and
 * replaces the model's task time; the fastest wins, the larger tiles on a
 * tie within TSR_TILE_TIE. The search itself is tiles/search.c's.
 *
 * Trials: when the product is small enough (operands of at most 1 GiB; one
 * process), as many candidates as 2 s of trials afford by the model (up to
 * 8: the refined ones and the model's best of each other granularity, task
 * rounds on the workers, not far behind; the best of each granularity
 * first, see tsr_trials_plan) run as whole products on the running
 * workers instead, and the fastest measured wins:
 * what the model leaves out (the scheduler's order, memory contention
 * between many workers, ragged edge tiles) then decides. The trial times
 * are cached per product, element type and worker set. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tsr_algorithms.h"
#include "internal/tsr_tile_model.h"

static const int CALIBRATED[] = { 32, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048 };
#define NCAL (int)(sizeof CALIBRATED / sizeof CALIBRATED[0])
/* Candidates stop at the largest calibrated size: beyond it the model would
 * extrapolate (CPU tiles of 4096 measured 15 % below the 768-tile rate).
 * On GPUs alone the whole dimension, up to MAX_WHOLE, is a candidate too:
 * there one task's runtime cost (tens of us) outweighs a 2048 tile's
 * arithmetic, and larger tiles only gain (H100, TF32: 4096^3 in one task
 * 0.6 ms, in 2048 tiles 0.7 ms; 512 x 512 x 65536 in one task 0.2 ms, with
 * k tiles of 2048 1.2 ms). */
static const int CANDIDATES[] = { 32, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048 };
#define NCAND (int)(sizeof CANDIDATES / sizeof CANDIDATES[0])
#define MAX_WHOLE 65536

#define MAX_SHAPES 2048 /* task shapes measured for themselves */

typedef struct {
    int mb, nb, kb;
    double seconds;
} measured_shape_t;

typedef struct {
    double seconds[NCAL]; /* one task of t x t x t with every worker busy */
    int nshapes;          /* tasks of exactly mb x nb x kb, measured the same way */
    measured_shape_t shapes[MAX_SHAPES];
    tsr_tile_cache_t cache; /* its file, and the key naming the workers and kernels it was measured on */
} gemm_model_t;

/* ---- calibration and its cache ---------------------------------------------- */

/* The cache file after its key line: NCAL "t seconds" lines, then the
 * measured task shapes, "mb nb kb seconds". */
static int read_model(gemm_model_t *m)
{
    FILE *f = tsr_tile_cache_read(&m->cache);
    if (!f)
        return -1;
    int ok = 1;
    for (int i = 0; ok && i < NCAL; i++) {
        int t;
        ok = fscanf(f, "%d %lf", &t, &m->seconds[i]) == 2 && t == CALIBRATED[i] && tsr_tile_time_ok(m->seconds[i]);
    }
    m->nshapes = 0;
    while (ok && m->nshapes < MAX_SHAPES) {
        int a, b, c;
        double sec;
        if (fscanf(f, "%d %d %d %lf", &a, &b, &c, &sec) != 4)
            break;
        if (a > 0 && b > 0 && c > 0 && tsr_tile_time_ok(sec))
            m->shapes[m->nshapes++] = (measured_shape_t){ a, b, c, sec };
    }
    fclose(f);
    return ok ? 0 : -1;
}

static void write_model(const gemm_model_t *m)
{
    tsr_atomic_file_t af;
    FILE *f = tsr_tile_cache_write(&m->cache, &af);
    if (!f)
        return;
    for (int i = 0; i < NCAL; i++)
        fprintf(f, "%d %.17g\n", CALIBRATED[i], m->seconds[i]);
    for (int i = 0; i < m->nshapes; i++)
        fprintf(f, "%d %d %d %.17g\n", m->shapes[i].mb, m->shapes[i].nb, m->shapes[i].kb, m->shapes[i].seconds);
    tsr_tile_cache_commit(&af);
}

/* The fastest of `runs` products C (M x N) = A B in tiles mb x nb x kb
 * after an untimed one; under MPI on a 1 x 1 grid (rank 0 runs them), every
 * rank gets the time. */
static int time_product(tsr_dtype_t dtype, int M, int N, int K, int mb, int nb, int kb, tsr_reduction_t accum, int runs,
                        double *seconds)
{
    tsr_dist_t grid = tsr_dist_block_cyclic(1, 1);
    tsr_desc_t *A = NULL, *B = NULL, *C = NULL;
    int rc = tsr_desc_create_2d(&A, dtype, M, K, mb, kb, &grid);
    if (!rc) rc = tsr_desc_create_2d(&B, dtype, K, N, kb, nb, &grid);
    if (!rc) rc = tsr_desc_create_2d(&C, dtype, M, N, mb, nb, &grid);
    if (!rc) rc = tsr_desc_fill_random(A, 1);
    if (!rc) rc = tsr_desc_fill_random(B, 2);
    if (!rc) rc = tsr_wait();
    *seconds = INFINITY;
    for (int it = 0; !rc && it <= runs; it++) {
        tsr_barrier();
        double t0 = tsr_wtime();
        rc = tsr_gemm(TSR_NOTRANS, TSR_NOTRANS, 1.0, A, B, 0.0, C, accum);
        if (!rc)
            rc = tsr_wait();
        double s = tsr_wtime() - t0;
        if (it > 0 && s < *seconds)
            *seconds = s;
    }
    if (A) tsr_desc_destroy(A);
    if (B) tsr_desc_destroy(B);
    if (C) tsr_desc_destroy(C);
    return rc ? rc : tsr_broadcast(seconds, sizeof *seconds, 0);
}

/* p independent mb x nb x kb tasks at once (C: mb x p*nb, one tile each);
 * the best of TSR_CALIBRATION_RUNS after a warm-up. */
static int calibrate_shape(tsr_dtype_t dtype, int mb, int nb, int kb, int p, double *seconds)
{
    return time_product(dtype, mb, p * nb, kb, mb, nb, kb, TSR_REDUCTION_ORDERED, TSR_CALIBRATION_RUNS, seconds);
}

static int load_or_calibrate(tsr_dtype_t dtype, gemm_model_t *m)
{
    int p = tsr_ncpu_workers() + tsr_ncuda_workers();
    int cached = tsr_rank() == 0 ? read_model(m) == 0 : 0;
    int rc = tsr_broadcast(&cached, sizeof cached, 0);
    if (!rc && !cached) {
        char note[sizeof m->cache.path + 32];
        tsr_log(TSR_LOG_INFO, "gemm tiles: calibrating the %s GEMM kernel at %d tile sizes on %d workers "
                "(%s)", tsr_dtype_name(dtype), NCAL, p, tsr_tile_cache_note(&m->cache, note, sizeof note));
        m->nshapes = 0;
        for (int i = 0; !rc && i < NCAL; i++)
            rc = calibrate_shape(dtype, CALIBRATED[i], CALIBRATED[i], CALIBRATED[i], p, &m->seconds[i]);
        if (!rc && tsr_rank() == 0)
            write_model(m);
    }
    if (!rc)
        rc = tsr_broadcast(m->seconds, sizeof m->seconds, 0);
    if (!rc)
        rc = tsr_broadcast(&m->nshapes, sizeof m->nshapes, 0);
    if (!rc)
        rc = tsr_broadcast(m->shapes, sizeof m->shapes, 0);
    return rc;
}

/* The measured time of a task shape, or -1. */
static double measured_shape(const gemm_model_t *m, int mb, int nb, int kb)
{
    for (int i = 0; i < m->nshapes; i++)
        if (m->shapes[i].mb == mb && m->shapes[i].nb == nb && m->shapes[i].kb == kb)
            return m->shapes[i].seconds;
    return -1;
}

/* Measures the task shape mb x nb x kb unless it was (once: cached with the
 * model by the caller, write_model); *added is set when it is new. */
static int measure_shape(gemm_model_t *m, tsr_dtype_t dtype, int mb, int nb, int kb, int *added)
{
    if (measured_shape(m, mb, nb, kb) > 0 || m->nshapes == MAX_SHAPES)
        return TSR_SUCCESS;
    double sec;
    int rc = calibrate_shape(dtype, mb, nb, kb, tsr_ncpu_workers() + tsr_ncuda_workers(), &sec);
    if (!rc) {
        m->shapes[m->nshapes++] = (measured_shape_t){ mb, nb, kb, sec };
        *added = 1;
    }
    return rc;
}

/* ---- the model ------------------------------------------------------------------ */

/* The runtime's cost of one task: the smallest calibrated time (the
 * smallest tiles' arithmetic is negligible against it). */
static double task_overhead(const gemm_model_t *m)
{
    double o = m->seconds[0];
    for (int i = 1; i < NCAL; i++)
        o = fmin(o, m->seconds[i]);
    return o;
}

/* Kernel rate of the calibrated size i: without the overhead where the
 * arithmetic dominates (twice the overhead or more), else the whole time
 * (small tiles: the overhead hides the kernel). */
static double kernel_rate(const gemm_model_t *m, double overhead, int i)
{
    double s = m->seconds[i] >= 2 * overhead ? m->seconds[i] - overhead : m->seconds[i];
    return 2.0 * pow(CALIBRATED[i], 3) / s;
}

static double peak_rate(const gemm_model_t *m, double overhead)
{
    double peak = 0;
    for (int i = 0; i < NCAL; i++)
        peak = fmax(peak, kernel_rate(m, overhead, i));
    return peak;
}

/* Kernel efficiency (0..1] of the square size t, log-interpolated between
 * calibrated sizes, clamped to their range. */
static double efficiency(const gemm_model_t *m, double overhead, double peak, int t)
{
    if (t <= CALIBRATED[0])
        return kernel_rate(m, overhead, 0) / peak;
    if (t >= CALIBRATED[NCAL - 1])
        return kernel_rate(m, overhead, NCAL - 1) / peak;
    int i = 0;
    while (CALIBRATED[i + 1] < t)
        i++;
    double w = log((double)t / CALIBRATED[i]) / log((double)CALIBRATED[i + 1] / CALIBRATED[i]);
    return exp((1 - w) * log(kernel_rate(m, overhead, i)) + w * log(kernel_rate(m, overhead, i + 1))) / peak;
}

/* Seconds of one mb x nb x kb task: its measured time when `measured` and
 * the shape was measured; else the per-task overhead plus its flops at the
 * peak rate times the geometric mean of its three sides' efficiencies (a
 * square tile: its calibrated time). */
static double task_seconds(const gemm_model_t *m, int mb, int nb, int kb, int measured)
{
    double shape = measured ? measured_shape(m, mb, nb, kb) : -1;
    if (shape > 0)
        return shape;
    double o = task_overhead(m), peak = peak_rate(m, o);
    double e = cbrt(efficiency(m, o, peak, mb) * efficiency(m, o, peak, nb) * efficiency(m, o, peak, kb));
    return o + 2.0 * mb * nb * (double)kb / (peak * e);
}

/* The workers are GPUs alone (no CPU worker). */
static int gpus_only(void)
{
    return tsr_ncpu_workers() == 0;
}

/* Moving `bytes` of tiles through CPU memory: the calibration runs on tiles
 * already in cache, a pass reads most of them cold (time_blas_cold: 13-26 %
 * of a 256 x 384 x 384 call's time). On GPUs alone the calibration's tiles
 * live in device memory as a run's do: nothing to add. */
static double streaming_seconds(double bytes)
{
    return gpus_only() ? 0.0 : bytes / TSR_TILE_BYTES_PER_S;
}

/* Reading a task's A and B tiles. */
static double operands_seconds(size_t esize, int mb, int nb, int kb)
{
    return streaming_seconds(((double)mb * kb + (double)kb * nb) * esize);
}

/* The ordered product C (M x N) = sum over K of op(A) op(B) in mb x nb x kb
 * tiles (edge tiles included): the work of all its tasks, their count, the
 * longest chain (one C tile's tasks along k) and one full task. Each task
 * pays its calibrated time and reading its A and B tiles; past the first k
 * tile it also reads and writes C again. */
typedef struct { double work, tasks, chain, full; } gemm_phase_t;

static gemm_phase_t ordered_phase(const gemm_model_t *m, size_t esize, int M, int N, int K, int mb, int nb, int kb,
                                  int measured)
{
    int mt = (M + mb - 1) / mb, nt = (N + nb - 1) / nb, kt = (K + kb - 1) / kb;
    int sizes_m[2] = { mb, M - (mt - 1) * mb }, sizes_n[2] = { nb, N - (nt - 1) * nb },
        sizes_k[2] = { kb, K - (kt - 1) * kb };
    int count_m[2] = { mt - 1, 1 }, count_n[2] = { nt - 1, 1 }, count_k[2] = { kt - 1, 1 };
    gemm_phase_t ph = { .tasks = (double)mt * nt * kt };
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++)
            for (int c = 0; c < 2; c++)
                ph.work += (double)count_m[a] * count_n[b] * count_k[c] *
                           (task_seconds(m, sizes_m[a], sizes_n[b], sizes_k[c], measured) +
                            operands_seconds(esize, sizes_m[a], sizes_n[b], sizes_k[c]));
    double accumulate = streaming_seconds((double)mb * nb * esize * 2); /* C read + written again */
    ph.work += (double)mt * nt * (kt - 1) * accumulate;
    ph.full = task_seconds(m, mb, nb, kb, measured) + operands_seconds(esize, mb, nb, kb) + accumulate;
    double last = task_seconds(m, mb, nb, sizes_k[1], measured) + operands_seconds(esize, mb, nb, sizes_k[1]);
    ph.chain = (kt - 1) * ph.full + last; /* kt tasks, kt - 1 of them accumulating */
    return ph;
}

/* The product a tile choice is for, and its model. */
typedef struct {
    gemm_model_t *model;
    tsr_dtype_t dtype;
    int m, n, k;
    tsr_reduction_t accum;
    int workers;
    size_t esize;
} product_t;

/* tsr_tile_problem_t.predict: the product in tiles mb x nb x kb, and its
 * task count (without REDUX's additions). */
static double predict(void *ctx, const int *tile, int measured, double *tasks)
{
    const product_t *pr = ctx;
    int M = pr->m, N = pr->n, K = pr->k, mb = tile[0], nb = tile[1], kb = tile[2], p = pr->workers;
    int mt = (M + mb - 1) / mb, nt = (N + nb - 1) / nb, kt = (K + kb - 1) / kb;
    *tasks = (double)mt * nt * kt;
    gemm_phase_t ph = ordered_phase(pr->model, pr->esize, M, N, K, mb, nb, kb, measured);
    if (pr->accum == TSR_REDUCTION_REDUX) { /* the k tasks run in parallel; each C tile's copies are added up */
        int buffers = kt < p ? kt : p; /* per-worker copies of a C tile to add up */
        double add = streaming_seconds((double)mb * nb * pr->esize * 3) + pr->model->seconds[0];
        ph.chain = ph.full + ceil(log2(buffers + 1.0)) * add;
        ph.work += (double)mt * nt * buffers * add;
        ph.tasks += (double)mt * nt * buffers;
    }
    return tsr_tile_phase_seconds(ph.work, ph.tasks, ph.work, ph.chain, p);
}

/* Candidate tile sizes along a dimension of size n: CANDIDATES below n, and
 * n itself when the model has measured tiles that large (on GPUs alone: up
 * to MAX_WHOLE). A rule (0: none)
 * keeps the sizes that are multiples of `multiple` (CANDIDATES rounded up to
 * one) and divide `divisor` (every such size up to the largest calibrated
 * one, the largest MAX_RULED of them). Returns how many. */
#define MAX_RULED 48
static int candidates(int n, int multiple, int divisor, int gpu_only, int *out)
{
    int c = 0, largest = CANDIDATES[NCAND - 1], step = multiple ? multiple : 1;
    if (divisor) {
        int top = divisor < n ? divisor : n;
        for (int t = (largest < top ? largest : top) / step * step; t >= step && c < MAX_RULED; t -= step)
            if (divisor % t == 0)
                out[c++] = t;
        return c;
    }
    for (int i = 0, last = 0; i < NCAND; i++) {
        int t = (CANDIDATES[i] + step - 1) / step * step;
        if (t < n && t <= largest && t != last)
            out[c++] = last = t;
    }
    if ((n <= largest || (gpu_only && n <= MAX_WHOLE)) && n % step == 0)
        out[c++] = n;
    return c;
}

/* The model of the running workers for dtype, calibrated (or read from the
 * cache) on first use, and again when the worker set changes (a restart
 * with other CPU or CUDA workers). */
static int current_model(tsr_dtype_t dtype, gemm_model_t **out)
{
    static gemm_model_t model[TSR_NDTYPES];
    if (!tsr_initialized())
        return TSR_ENOTINIT;
    if (dtype != TSR_FLOAT32 && dtype != TSR_FLOAT64)
        return TSR_EINVAL;
    char name[32];
    snprintf(name, sizeof name, "gemm %s", tsr_dtype_name(dtype));
    tsr_tile_cache_t now = { "", "" };
    tsr_tile_cache_init(&now, name);
    gemm_model_t *m = &model[dtype];
    if (strcmp(m->cache.key, now.key) != 0) {
        m->cache = now;
        int rc = load_or_calibrate(dtype, m);
        if (rc) {
            m->cache.key[0] = '\0'; /* calibrate again next time */
            return rc;
        }
    }
    *out = m;
    return TSR_SUCCESS;
}

int tsr_gemm_task_seconds(tsr_dtype_t dtype, int mb, int nb, int kb, double *seconds)
{
    gemm_model_t *m;
    if (mb < 1 || nb < 1 || kb < 1 || !seconds)
        return TSR_EINVAL;
    int rc = current_model(dtype, &m);
    if (!rc)
        *seconds = task_seconds(m, mb, nb, kb, 1);
    return rc;
}

/* Measures the task shapes of the tiled product (its full and edge tiles)
 * that the model has not measured yet, and caches them. */
static int measure_phase_shapes(gemm_model_t *m, tsr_dtype_t dtype, int M, int N, int K, int mb, int nb, int kb)
{
    mb = mb < M ? mb : M, nb = nb < N ? nb : N, kb = kb < K ? kb : K;
    int sizes_m[2] = { mb, M - (M - 1) / mb * mb }, sizes_n[2] = { nb, N - (N - 1) / nb * nb },
        sizes_k[2] = { kb, K - (K - 1) / kb * kb };
    int added = 0, rc = 0;
    for (int a = 0; a < 2 && !rc; a++)
        for (int b = 0; b < 2 && !rc; b++)
            for (int c = 0; c < 2 && !rc; c++)
                rc = measure_shape(m, dtype, sizes_m[a], sizes_n[b], sizes_k[c], &added);
    if (added && tsr_rank() == 0)
        write_model(m);
    return rc;
}

int tsr_gemm_phase_seconds(tsr_dtype_t dtype, int M, int N, int K, int mb, int nb, int kb, int measured,
                           double *work, double *tasks, double *chain)
{
    gemm_model_t *m;
    if (M < 1 || N < 1 || K < 1 || mb < 1 || nb < 1 || kb < 1 || !work || !tasks || !chain)
        return TSR_EINVAL;
    int rc = current_model(dtype, &m);
    if (!rc && measured)
        rc = measure_phase_shapes(m, dtype, M, N, K, mb, nb, kb);
    if (rc)
        return rc;
    gemm_phase_t ph = ordered_phase(m, tsr_dtype_size(dtype), M, N, K, mb, nb, kb, measured != 0);
    *work = ph.work, *tasks = ph.tasks, *chain = ph.chain;
    return TSR_SUCCESS;
}

static int bad_rule(const tsr_gemm_tile_rules_t *rules)
{
    for (int d = 0; rules && d < 3; d++)
        if (rules->multiple_of[d] < 0 || rules->divisor_of[d] < 0)
            return 1;
    return 0;
}

/* tsr_tile_problem_t.measure: the shortlist's task shapes, measured once
 * (cached with the model). */
static int measure_products(void *ctx, const tsr_tile_choice_t *list, int n)
{
    const product_t *pr = ctx;
    int added = 0, rc = TSR_SUCCESS;
    for (int i = 0; !rc && i < n; i++)
        rc = measure_shape(pr->model, pr->dtype, list[i].tile[0], list[i].tile[1], list[i].tile[2], &added);
    if (!rc && added && tsr_rank() == 0)
        write_model(pr->model);
    return rc;
}

/* tsr_tile_problem_t.trial: the whole product. */
static int trial_product(void *ctx, const int *tile, double *seconds)
{
    const product_t *pr = ctx;
    return time_product(pr->dtype, pr->m, pr->n, pr->k, tile[0], tile[1], tile[2], pr->accum, TSR_TRIAL_RUNS,
                        seconds);
}

/* The search of a product's tiles: the TSR_TILE_SHORTLIST best refined
 * (their task shapes measured), the larger tiles on a tie within
 * TSR_TILE_TIE; trials when the product is small. */
static const tsr_tile_policy_t GEMM_POLICY = { TSR_TILE_SHORTLIST, 1, TSR_TILE_TIE, TSR_TRIALS_BUDGETED, 0 };

int tsr_gemm_auto_tiles(tsr_dtype_t dtype, int m, int n, int k, tsr_reduction_t accum, tsr_tiles_t *out)
{
    return tsr_gemm_auto_tiles_ruled(dtype, m, n, k, accum, NULL, out);
}

int tsr_gemm_auto_tiles_ruled(tsr_dtype_t dtype, int m, int n, int k, tsr_reduction_t accum,
                              const tsr_gemm_tile_rules_t *rules, tsr_tiles_t *out)
{
    int negative_rule = bad_rule(rules);
    if (!out) {
        tsr_log(TSR_LOG_ERROR, "tsr_gemm_auto_tiles: the output (tsr_tiles_t *) is NULL");
        return TSR_EINVAL;
    }
    if (m < 1 || n < 1 || k < 1 || (accum != TSR_REDUCTION_ORDERED && accum != TSR_REDUCTION_REDUX) ||
        (dtype != TSR_FLOAT32 && dtype != TSR_FLOAT64) || negative_rule) {
        tsr_log(TSR_LOG_ERROR, "tsr_gemm_auto_tiles: bad arguments (m %d, n %d, k %d, accumulation %d%s)", m, n, k,
                accum, negative_rule ? ", a negative tile rule" : "");
        return TSR_EINVAL;
    }
    if (!tsr_initialized())
        return TSR_ENOTINIT;
    const int none[3] = { 0, 0, 0 }, *mult = rules ? rules->multiple_of : none, *divs = rules ? rules->divisor_of : none;
    const int gpus = gpus_only();
    int cm[MAX_RULED], cn[MAX_RULED], ck[MAX_RULED];
    int nm = candidates(m, mult[0], divs[0], gpus, cm), nn = candidates(n, mult[1], divs[1], gpus, cn),
        nk = candidates(k, mult[2], divs[2], gpus, ck);
    if (!nm || !nn || !nk) {
        int d = !nm ? 0 : !nn ? 1 : 2, size[3] = { m, n, k };
        tsr_log(TSR_LOG_ERROR, "tsr_gemm_auto_tiles: no tile size along %c (%d) is a multiple of %d, divides %d and is "
                "at most %d", "mnk"[d], size[d], mult[d] ? mult[d] : 1, divs[d], CANDIDATES[NCAND - 1]);
        return TSR_EINVAL;
    }
    gemm_model_t *model;
    int rc = current_model(dtype, &model);
    if (rc)
        return rc;
    product_t pr = { model, dtype, m, n, k, accum, (tsr_ncpu_workers() + tsr_ncuda_workers()) * tsr_size(),
                     tsr_dtype_size(dtype) };
    static tsr_trials_t trials;
    tsr_tile_problem_t pb = { .policy = &GEMM_POLICY, .ndims = 3, .group_dims = 3, .dim_names = { "mb", "nb", "kb" },
                              .nsizes = { nm, nn, nk }, .trials = &trials, .nkeys = 4, .key = { m, n, k, (int)accum },
                              .ctx = &pr, .predict = predict, .measure = measure_products,
                              .trial = trial_product };
    pb.bytes = ((double)m * k + (double)k * n + (double)m * n) * pr.esize;
    snprintf(pb.name, sizeof pb.name, "gemm tiles %dx%dx%d %s", m, n, k, accum == TSR_REDUCTION_REDUX ? "redux" : "ordered");
    snprintf(pb.trials_name, sizeof pb.trials_name, "gemm trials %s", tsr_dtype_name(dtype));
    memcpy(pb.sizes[0], cm, nm * sizeof *cm);
    memcpy(pb.sizes[1], cn, nn * sizeof *cn);
    memcpy(pb.sizes[2], ck, nk * sizeof *ck);
    tsr_tile_choice_t c;
    rc = tsr_tile_search(&pb, &c, NULL);
    if (!rc)
        *out = (tsr_tiles_t){ .mb = c.tile[0], .nb = c.tile[1], .kb = c.tile[2], .predicted_seconds = c.predicted };
    return rc;
}
