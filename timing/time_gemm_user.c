/* time_gemm_user: tsr_gemm_array in place on the caller's arrays (no copy)
 * against tsr_gemm on Tessera's own descriptors, C = A B in float32, the two
 * alternated round by round in one run (the machine drifts between runs),
 * and the peak resident memory after the in-place calls alone (before any
 * descriptor of Tessera's own exists): no copy of A, B or C means a peak
 * within a few MB of the arrays themselves.
 *   time_gemm_user [--n N] [--tile T] [--threads W] [--rounds R] [--huge 1]
 * --huge 1: the arrays advised to transparent huge pages (MADV_HUGEPAGE)
 * before they are filled, as Tessera's own tiles are (tile/desc.c); off by
 * default: filled on 4 KiB pages, which tsr_desc_create_user moves onto huge
 * pages (MADV_COLLAPSE) in the first, untimed in-place call.
 * CSV on stdout: one row per timed call, then a summary row per mode (best
 * and median seconds) and the ratio rows. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "tessera.h"

/* A field of /proc/self/status in MiB (VmRSS, VmHWM). */
static double status_mib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kib = NAN;
    size_t len = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, len) == 0 && line[len] == ':')
            kib = atof(line + len + 1);
    if (f)
        fclose(f);
    return kib / 1024.0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int option(int argc, char **argv, const char *name, int value)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return atoi(argv[i + 1]);
    return value;
}

int main(int argc, char **argv)
{
    int n = option(argc, argv, "--n", 4096), tile = option(argc, argv, "--tile", 512);
    int threads = option(argc, argv, "--threads", 2), rounds = option(argc, argv, "--rounds", 5);
    int huge = option(argc, argv, "--huge", 0);
    if (n < 1 || tile < 1 || threads < 1 || rounds < 1 || rounds > 100) {
        fprintf(stderr, "usage: time_gemm_user [--n N] [--tile T] [--threads W] [--rounds R (1..100)] [--huge 0|1]\n");
        return 2;
    }
    tsr_config_t cfg;
    tsr_config_default(&cfg);
    cfg.ncpus = threads;
    int rc = tsr_init(&cfg, &argc, &argv);
    if (rc) {
        fprintf(stderr, "tsr_init: %s\n", tsr_strerror(rc));
        return 1;
    }
    size_t nn = (size_t)n * n;
    float *A = NULL, *B = NULL, *C = NULL;
    size_t bytes = (nn * sizeof(float) + 4095) / 4096 * 4096;
    if (posix_memalign((void **)&A, 2 << 20, bytes) || posix_memalign((void **)&B, 2 << 20, bytes) ||
        posix_memalign((void **)&C, 2 << 20, bytes)) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    if (huge) {
        madvise(A, bytes, MADV_HUGEPAGE);
        madvise(B, bytes, MADV_HUGEPAGE);
        madvise(C, bytes, MADV_HUGEPAGE);
    }
    for (size_t i = 0; i < nn; i++) {
        A[i] = (float)tsr_random_value(1, 0, (int)(i % n), (int)(i / n));
        B[i] = (float)tsr_random_value(2, 0, (int)(i % n), (int)(i / n));
        C[i] = 0.0f;
    }
    const double flops = 2.0 * n * n * (double)n, arrays_mib = 3.0 * nn * sizeof(float) / (1 << 20);
    printf("mode,round,n,tile,workers,huge_pages,seconds,gflops\n");
    /* in place alone first (its first call warms up): the peak memory of
     * the process before any descriptor of Tessera's own exists */
    double rss_arrays = status_mib("VmRSS");
    double t_user[100], t_desc[100];
    for (int r = 0; r < 2 && !rc; r++)
        rc = tsr_gemm_array(TSR_FLOAT32, TSR_NOTRANS, TSR_NOTRANS, n, n, n, 1.0, A, n, B, n, 0.0, C, n, tile,
                            TSR_REDUCTION_ORDERED);
    double hwm_user = status_mib("VmHWM");
    /* descriptors of Tessera's own, the same values */
    tsr_desc_t *dA = NULL, *dB = NULL, *dC = NULL;
    rc = rc ? rc : tsr_desc_create_2d(&dA, TSR_FLOAT32, n, n, tile, tile, NULL);
    rc = rc ? rc : tsr_desc_create_2d(&dB, TSR_FLOAT32, n, n, tile, tile, NULL);
    rc = rc ? rc : tsr_desc_create_2d(&dC, TSR_FLOAT32, n, n, tile, tile, NULL);
    rc = rc ? rc : tsr_desc_scatter(dA, A, n, 0);
    rc = rc ? rc : tsr_desc_scatter(dB, B, n, 0);
    rc = rc ? rc : tsr_gemm(TSR_NOTRANS, TSR_NOTRANS, 1.0, dA, dB, 0.0, dC, TSR_REDUCTION_ORDERED); /* warm-up */
    rc = rc ? rc : tsr_wait();
    double rss_desc = status_mib("VmRSS");
    for (int r = 0; r < rounds && !rc; r++) { /* alternated: descriptors, then in place */
        double t0 = tsr_wtime();
        rc = tsr_gemm(TSR_NOTRANS, TSR_NOTRANS, 1.0, dA, dB, 0.0, dC, TSR_REDUCTION_ORDERED);
        rc = rc ? rc : tsr_wait();
        t_desc[r] = tsr_wtime() - t0;
        printf("descriptors,%d,%d,%d,%d,%d,%.6f,%.2f\n", r, n, tile, threads, huge, t_desc[r], flops / t_desc[r] * 1e-9);
        t0 = tsr_wtime();
        rc = rc ? rc : tsr_gemm_array(TSR_FLOAT32, TSR_NOTRANS, TSR_NOTRANS, n, n, n, 1.0, A, n, B, n, 0.0, C, n,
                                      tile, TSR_REDUCTION_ORDERED);
        t_user[r] = tsr_wtime() - t0;
        printf("in_place,%d,%d,%d,%d,%d,%.6f,%.2f\n", r, n, tile, threads, huge, t_user[r], flops / t_user[r] * 1e-9);
        fflush(stdout);
    }
    if (rc) {
        fprintf(stderr, "time_gemm_user: %s\n", tsr_strerror(rc));
    } else {
        double best_desc = t_desc[0], best_user = t_user[0];
        for (int r = 1; r < rounds; r++)
            best_desc = fmin(best_desc, t_desc[r]), best_user = fmin(best_user, t_user[r]);
        double med_desc = median(t_desc, rounds), med_user = median(t_user, rounds);
        printf("# best seconds: descriptors %.4f, in place %.4f; in place / descriptors %.4f (median %.4f / %.4f = "
               "%.4f)\n", best_desc, best_user, best_user / best_desc, med_user, med_desc, med_user / med_desc);
        printf("# memory (MiB): A, B, C %.1f; resident after filling them %.1f; peak after the in-place calls %.1f "
               "(+%.1f); resident with descriptors of Tessera's own %.1f (+%.1f: their copies)\n",
               arrays_mib, rss_arrays, hwm_user, hwm_user - rss_arrays, rss_desc, rss_desc - hwm_user);
    }
    tsr_desc_destroy(dA);
    tsr_desc_destroy(dB);
    tsr_desc_destroy(dC);
    free(A); free(B); free(C);
    int frc = tsr_finalize();
    return rc || frc ? 1 : 0;
}
