/* time_blas_cold: one GEMM call in one thread on operands that are in cache
 * or not, the situation of a GEMM task inside a training step (each weight
 * tile is read once a step), through tsr_cpu_gemm (what the tile tasks call:
 * with BLIS, BLIS's micro-kernel on Tessera's packing) and through the BLAS's
 * own GEMM routine. For each routine it runs the same call `reps` times:
 *   warm        on the same A, B, C every time (what time_gemm measures)
 *   cold        cycling through `sets` different A, B, C (4 KiB pages)
 *   cold_read   the same, each operand read once just before the call
 *               (brings it into the caches and the TLB: a prefetch)
 *   cold_huge   cycling through the sets on 2 MiB transparent huge pages
 * and prints GFLOP/s, the ratio to the same routine's warm rate and the
 * ratio to the BLAS routine's rate in the same mode, all from the same run. CSV on
 * stdout, messages on stderr; exit 2 on bad options, 1 when out of memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "tessera.h"
#include "tsr_compute.h"
#include "tsr_params.h"

enum { P_M, P_N, P_K, P_TRANSA, P_SETS, P_REPS, P_GEMM, NP };
static tsr_param_t params[NP] = {
    [P_M] = { "m", "rows of C", 0, 1, { 256 } },
    [P_N] = { "n", "columns of C", 0, 1, { 384 } },
    [P_K] = { "k", "inner dimension", 0, 1, { 384 } },
    [P_TRANSA] = { "transA", "N or T (a weight tile in a forward GEMM is T)", 1, 1, { 0 }, { "T" } },
    [P_SETS] = { "sets", "different operand sets cycled through (64 x 256x384x384: 76 MB)", 0, 1, { 64 } },
    [P_REPS] = { "reps", "calls timed per mode", 0, 1, { 256 } },
    [P_GEMM] = { "gemm", "tessera (tsr_cpu_gemm) and/or blas (the BLAS's own routine)", 1, 2, { 0 },
                 { "tessera", "blas" } },
};
TSR_ONLY_HELP_FLAG;
static const char *about =
    "Time one single-threaded float32 GEMM call of the BLAS Tessera uses on operands in cache (warm) and\n"
    "not (cold: cycling through --sets copies; cold_read: each operand read first; cold_huge: on 2 MiB\n"
    "pages), through tsr_cpu_gemm (tessera) and the BLAS's own routine (blas). CSV columns:\n"
    "m,n,k,transA,sets,gemm,mode,us_per_call,gflops,rate_vs_warm (over the same routine's warm rate),\n"
    "rate_vs_blas (over the blas routine's rate in the same mode; empty when it did not run).";

enum { WARM, COLD, COLD_READ, COLD_HUGE, NMODES };
static const char *mode_names[NMODES] = { "warm", "cold", "cold_read", "cold_huge" };

typedef struct {
    int m, n, k, ta, sets;
    size_t a_len, b_len, c_len; /* floats, each rounded up to 16 (64 bytes) */
    float *base;                /* sets x (A, B, C), 2 MiB-aligned inside map */
    void *map;
    size_t map_bytes;
} operands_t;

static float *set_a(const operands_t *o, int s) { return o->base + (size_t)s * (o->a_len + o->b_len + o->c_len); }
static float *set_b(const operands_t *o, int s) { return set_a(o, s) + o->a_len; }
static float *set_c(const operands_t *o, int s) { return set_b(o, s) + o->b_len; }

/* The operand sets in one 2 MiB-aligned mapping, on huge pages or on 4 KiB
 * pages (MADV_NOHUGEPAGE: also where THP is "always"). Returns 0 or -1. */
static int operands_map(operands_t *o, int huge)
{
    size_t per_set = o->a_len + o->b_len + o->c_len, align = 2 << 20;
    size_t bytes = (per_set * o->sets * sizeof(float) + align - 1) / align * align;
    o->map_bytes = bytes + align;
    o->map = mmap(NULL, o->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (o->map == MAP_FAILED)
        return -1;
    o->base = (float *)(((uintptr_t)o->map + align - 1) / align * align);
    madvise(o->base, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    for (size_t i = 0; i < per_set * o->sets; i++)
        o->base[i] = (float)(i % 13) * 1e-3f;
    return 0;
}

static void operands_unmap(operands_t *o)
{
    munmap(o->map, o->map_bytes);
    o->base = NULL;
}

/* Reads one float per cache line. */
static float read_lines(const float *p, size_t n)
{
    float s = 0;
    for (size_t i = 0; i < n; i += 16)
        s += p[i];
    return s;
}

enum { TESSERA, BLAS, NGEMMS };
static const char *gemm_names[NGEMMS] = { "tessera", "blas" };

static double run_mode(const operands_t *o, int gemm, int mode, int reps)
{
    volatile float sink = 0;
    tsr_trans_t ta = o->ta ? TSR_TRANS : TSR_NOTRANS;
    int lda = o->ta ? o->k : o->m;
    double t0 = tsr_wtime();
    for (int r = 0; r < reps; r++) {
        int s = mode == WARM ? 0 : r % o->sets;
        if (mode == COLD_READ)
            sink += read_lines(set_a(o, s), o->a_len) + read_lines(set_b(o, s), o->b_len) +
                    read_lines(set_c(o, s), o->c_len);
        (gemm == TESSERA ? tsr_cpu_gemm : tsr_cpu_blas_gemm)(TSR_FLOAT32, ta, TSR_NOTRANS, o->m, o->n, o->k, 1.0,
                                                             set_a(o, s), lda, set_b(o, s), o->k, 1.0, set_c(o, s),
                                                             o->m, 1);
    }
    (void)sink;
    return (tsr_wtime() - t0) / reps;
}

static size_t rounded(size_t n) { return (n + 15) / 16 * 16; }

static int run(int argc, char **argv)
{
    int flags[NF] = { 0 }, cli = tsr_params_cli(argc, argv, about, params, NP, flag_names, flag_help, flags, NF);
    if (cli >= 0)
        return cli;
    const int positive[] = { P_M, P_N, P_K, P_SETS, P_REPS };
    for (size_t i = 0; i < sizeof positive / sizeof positive[0]; i++)
        if (tsr_param_check_min(&params[positive[i]], 1))
            return 2;
    if (tsr_param_check_words(&params[P_TRANSA], "N", "T"))
        return 2;
    if (tsr_param_check_words(&params[P_GEMM], "tessera", "blas"))
        return 2;
    int run[NGEMMS] = { 0 };
    for (int i = 0; i < params[P_GEMM].count; i++)
        run[strcmp(params[P_GEMM].words[i], "blas") == 0 ? BLAS : TESSERA] = 1;
    operands_t o = { 0 };
    o.m = (int)params[P_M].values[0];
    o.n = (int)params[P_N].values[0];
    o.k = (int)params[P_K].values[0];
    o.ta = strcmp(params[P_TRANSA].words[0], "T") == 0;
    o.sets = (int)params[P_SETS].values[0];
    o.a_len = rounded((size_t)o.m * o.k);
    o.b_len = rounded((size_t)o.k * o.n);
    o.c_len = rounded((size_t)o.m * o.n);
    int reps = (int)params[P_REPS].values[0];
    fprintf(stderr, "time_blas_cold: %s, one thread\n", tsr_blas_description());
    printf("m,n,k,transA,sets,gemm,mode,us_per_call,gflops,rate_vs_warm,rate_vs_blas\n");
    double warm[NGEMMS] = { 0 }, flops = 2.0 * o.m * o.n * o.k;
    for (int mode = 0; mode < NMODES; mode++) {
        if (operands_map(&o, mode == COLD_HUGE)) {
            fprintf(stderr, "error: cannot map %d operand sets of %zu bytes\n", o.sets,
                    (o.a_len + o.b_len + o.c_len) * sizeof(float));
            return 1;
        }
        double seconds[NGEMMS] = { 0 };
        for (int g = NGEMMS - 1; g >= 0; g--) { /* blas first: the baseline of the ratio */
            if (!run[g])
                continue;
            run_mode(&o, g, mode, o.sets); /* first touch, and the routine's own buffers */
            seconds[g] = run_mode(&o, g, mode, reps);
            if (mode == WARM)
                warm[g] = seconds[g];
            char vs_blas[16] = "";
            if (run[BLAS])
                snprintf(vs_blas, sizeof vs_blas, "%.3f", seconds[BLAS] / seconds[g]);
            printf("%d,%d,%d,%s,%d,%s,%s,%.1f,%.1f,%.3f,%s\n", o.m, o.n, o.k, o.ta ? "T" : "N", o.sets, gemm_names[g],
                   mode_names[mode], seconds[g] * 1e6, flops / seconds[g] * 1e-9, warm[g] / seconds[g], vs_blas);
            fflush(stdout);
        }
        operands_unmap(&o);
    }
    return 0;
}

int main(int argc, char **argv)
{
    return tsr_stdout_close(run(argc, argv));
}
