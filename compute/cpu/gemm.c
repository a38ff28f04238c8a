/* The one internal BLAS interface: every CPU tile kernel calls BLAS here. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tsr_build_config.h"
#include "tsr_compute.h"
#if TSR_BLAS_BLIS
#include "gemm_blis_packed.h"
#else
#include <cblas.h>
#endif

const char *tsr_blas_name(void) { return TSR_BLAS_NAME; }

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static char blas_description[256];

static int cpu_has_avx512(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}

#if TSR_BLAS_BLIS
/* Debian's BLIS 0.9 does not know recent CPUs such as AMD Zen 5 and silently
 * runs its generic kernels there (68 instead of 360 GFLOP/s on 2 cores).
 * Unless the user chose (BLIS_ARCH_TYPE), a CPU with AVX-512 F/DQ/BW/VL gets
 * BLIS's Skylake-X kernels, BLIS's own choice on Intel AVX-512 CPUs. This
 * must run before BLIS's first call, where BLIS reads BLIS_ARCH_TYPE. */
static int choose_blis_kernels(void)
{
    if (getenv("BLIS_ARCH_TYPE") || !cpu_has_avx512())
        return 0;
    char id[16];
    snprintf(id, sizeof id, "%d", (int)BLIS_ARCH_SKX);
    setenv("BLIS_ARCH_TYPE", id, 0);
    return 1;
}

/* Why BLIS's kernels `id` (a BLIS_ARCH_TYPE value) cannot run on this CPU,
 * or NULL when they can. BLIS would die of an illegal instruction, or stop
 * on an id it does not know, before any message. */
static const char *blis_arch_unusable(const char *id)
{
    char *end;
    errno = 0;
    long a = strtol(id, &end, 10);
    if (errno || end == id || *end || a < 0 || a >= BLIS_NUM_ARCHS)
        return "not one of BLIS's architecture numbers";
    __builtin_cpu_init();
    switch ((arch_t)a) {
    case BLIS_ARCH_SKX:
        return cpu_has_avx512() ? NULL : "its skx kernels need AVX-512, which this CPU lacks";
    case BLIS_ARCH_KNL:
        return __builtin_cpu_supports("avx512er") ? NULL : "its knl kernels need a Xeon Phi (AVX-512 ER)";
    case BLIS_ARCH_HASWELL:
    case BLIS_ARCH_ZEN:
    case BLIS_ARCH_ZEN2:
    case BLIS_ARCH_ZEN3:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? NULL
                                                                               : "its kernels need AVX2 and FMA";
    case BLIS_ARCH_SANDYBRIDGE:
        return __builtin_cpu_supports("avx") ? NULL : "its sandybridge kernels need AVX";
    case BLIS_ARCH_PENRYN:
    case BLIS_ARCH_GENERIC:
        return NULL;
    case BLIS_ARCH_EXCAVATOR:
    case BLIS_ARCH_STEAMROLLER:
    case BLIS_ARCH_PILEDRIVER:
    case BLIS_ARCH_BULLDOZER:
        return __builtin_cpu_supports("fma4") ? NULL : "its AMD Bulldozer-family kernels need FMA4";
    default:
        return "not an x86-64 architecture";
    }
}

static void setup_blas(void)
{
    const char *user = getenv("BLIS_ARCH_TYPE");
    const char *why = user ? blis_arch_unusable(user) : NULL;
    if (why) {
        tsr_log(TSR_LOG_ERROR, "BLIS_ARCH_TYPE=%s ignored: %s", user, why);
        unsetenv("BLIS_ARCH_TYPE");
        user = NULL;
    }
    int chosen = choose_blis_kernels();
    bli_init(); /* reads BLIS_ARCH_TYPE and sets up the kernel contexts */
    arch_t arch = bli_arch_query_id();
    int packed = tsr_blis_packed_gemm_init();
    snprintf(blas_description, sizeof blas_description, "BLIS %s, %s kernels%s%s", bli_info_get_version_str(),
             bli_arch_string(arch),
             chosen ? " (chosen by Tessera for this AVX-512 CPU; BLIS_ARCH_TYPE overrides)"
             : user ? " (BLIS_ARCH_TYPE)" : "",
             packed ? ", float32 tile GEMMs packed by Tessera" : "");
    if (arch == BLIS_ARCH_GENERIC && !user && __builtin_cpu_supports("avx2"))
        tsr_log(TSR_LOG_INFO, "warning: BLIS runs its generic (slow) kernels on this AVX2 CPU; "
                "BLIS_ARCH_TYPE=%d selects its Haswell kernels", (int)BLIS_ARCH_HASWELL);
}

void tsr_cpu_blas_gemm(tsr_dtype_t t, tsr_trans_t ta, tsr_trans_t tb, int m, int n, int k,
                       double alpha, const void *A, int lda, const void *B, int ldb,
                       double beta, void *C, int ldc, int nthreads)
{
    pthread_once(&blas_once, setup_blas);
    /* The per-call runtime object keeps the thread count local to this call,
     * so concurrent tasks with different sizes do not disturb each other. */
    rntm_t rntm = BLIS_RNTM_INITIALIZER;
    bli_rntm_set_num_threads(nthreads > 0 ? nthreads : 1, &rntm);
    trans_t bta = ta == TSR_TRANS ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE;
    trans_t btb = tb == TSR_TRANS ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE;
    if (t == TSR_FLOAT64) {
        double a = alpha, b = beta;
        bli_dgemm_ex(bta, btb, m, n, k, &a, (double *)A, 1, lda, (double *)B, 1, ldb,
                     &b, (double *)C, 1, ldc, NULL, &rntm);
    } else {
        float a = (float)alpha, b = (float)beta;
        bli_sgemm_ex(bta, btb, m, n, k, &a, (float *)A, 1, lda, (float *)B, 1, ldb,
                     &b, (float *)C, 1, ldc, NULL, &rntm);
    }
}

void tsr_cpu_gemm(tsr_dtype_t t, tsr_trans_t ta, tsr_trans_t tb, int m, int n, int k,
                  double alpha, const void *A, int lda, const void *B, int ldb,
                  double beta, void *C, int ldc, int nthreads)
{
    pthread_once(&blas_once, setup_blas);
    /* float32 in one thread, the tile tasks' case: BLIS's micro-kernel, Tessera's packing */
    if (t == TSR_FLOAT32 && nthreads <= 1 &&
        tsr_blis_packed_sgemm(ta == TSR_TRANS ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE,
                              tb == TSR_TRANS ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, m, n, k, (float)alpha, A, lda, B,
                              ldb, (float)beta, C, ldc))
        return;
    tsr_cpu_blas_gemm(t, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, nthreads);
}
#else
static void setup_blas(void)
{
    snprintf(blas_description, sizeof blas_description, "OpenBLAS (%s), %s kernels", openblas_get_config(),
             openblas_get_corename());
    (void)cpu_has_avx512;
}

static _Thread_local int openblas_threads_seen;

void tsr_cpu_gemm(tsr_dtype_t t, tsr_trans_t ta, tsr_trans_t tb, int m, int n, int k,
                  double alpha, const void *A, int lda, const void *B, int ldb,
                  double beta, void *C, int ldc, int nthreads)
{
    pthread_once(&blas_once, setup_blas);
    /* OpenBLAS's thread count is global: set it only when it changes. */
    if (nthreads < 1)
        nthreads = 1;
    if (openblas_threads_seen != nthreads || openblas_get_num_threads() != nthreads) {
        openblas_set_num_threads(nthreads);
        openblas_threads_seen = nthreads;
    }
    enum CBLAS_TRANSPOSE cta = ta == TSR_TRANS ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE ctb = tb == TSR_TRANS ? CblasTrans : CblasNoTrans;
    if (t == TSR_FLOAT64)
        cblas_dgemm(CblasColMajor, cta, ctb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    else
        cblas_sgemm(CblasColMajor, cta, ctb, m, n, k, (float)alpha, A, lda, B, ldb, (float)beta, C, ldc);
}

void tsr_cpu_blas_gemm(tsr_dtype_t t, tsr_trans_t ta, tsr_trans_t tb, int m, int n, int k,
                       double alpha, const void *A, int lda, const void *B, int ldb,
                       double beta, void *C, int ldc, int nthreads)
{
    tsr_cpu_gemm(t, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, nthreads);
}
#endif

const char *tsr_blas_description(void)
{
    pthread_once(&blas_once, setup_blas);
    return blas_description;
}

/* ---- element-wise tile ops (scale, add, zero): GEMM's beta and the REDUX methods ---- */

#define TSR_COLUMN(T, P, ld, c) ((T *)(P) + (size_t)(c) * (ld))

void tsr_cpu_scale(tsr_dtype_t t, int m, int n, double alpha, void *A, int lda)
{
    for (int c = 0; c < n; c++) {
        if (t == TSR_FLOAT64) {
            double *a = TSR_COLUMN(double, A, lda, c);
            for (int r = 0; r < m; r++)
                a[r] *= alpha;
        } else {
            float *a = TSR_COLUMN(float, A, lda, c), s = (float)alpha;
            for (int r = 0; r < m; r++)
                a[r] *= s;
        }
    }
}

void tsr_cpu_add(tsr_dtype_t t, int m, int n, double alpha, const void *A, int lda,
                 double beta, void *B, int ldb)
{
    for (int c = 0; c < n; c++) {
        if (t == TSR_FLOAT64) {
            const double *a = TSR_COLUMN(const double, A, lda, c);
            double *b = TSR_COLUMN(double, B, ldb, c);
            for (int r = 0; r < m; r++)
                b[r] = beta == 0.0 ? alpha * a[r] : alpha * a[r] + beta * b[r];
        } else {
            const float *a = TSR_COLUMN(const float, A, lda, c);
            float *b = TSR_COLUMN(float, B, ldb, c), fa = (float)alpha, fb = (float)beta;
            if (beta == 0.0)
                for (int r = 0; r < m; r++)
                    b[r] = fa * a[r];
            else
                for (int r = 0; r < m; r++)
                    b[r] = fa * a[r] + fb * b[r];
        }
    }
}

void tsr_cpu_zero(tsr_dtype_t t, int m, int n, void *A, int lda)
{
    size_t es = tsr_dtype_size(t); /* +0 is all zero bits in every type */
    if (lda == m) {
        memset(A, 0, (size_t)m * n * es);
        return;
    }
    for (int c = 0; c < n; c++)
        memset((char *)A + (size_t)c * lda * es, 0, (size_t)m * es);
}
