/* Single-threaded float32 GEMM on BLIS's own micro-kernel, with Tessera's
 * packing and loop nest (the Goto/BLIS algorithm: pack a kc x nc block of
 * op(B) and an mc x kc block of op(A) into micro-panels, then run the
 * micro-kernel over them).
 *
 * Why not bli_sgemm: BLIS 0.9's Skylake-X sgemm kernel is 32 x 12, and 0.9
 * has packing-kernel slots for panels of at most 31 rows, so every 32-row
 * panel of op(A) is packed by a generic strided copy (bli_scal2m), one
 * scalar at a time. In a 124M step that copy took ~11 % of all samples. This
 * packing copies contiguous columns and transposes rows in 8 x 8 register
 * blocks (see docs/results.md for the rates). The micro-kernel, its block
 * sizes and so the arithmetic are BLIS's: results are bitwise those of
 * bli_sgemm wherever it packs too (not where BLIS's haswell/zen
 * configurations run small products on their unpacked "sup" kernels).
 *
 * A weight tile is read from memory once a pass, by its packing. Software
 * prefetches of the next block's source, a few lines between micro-kernel
 * calls with op(A) cut in four blocks, cut the packing's samples by a third
 * in a 124M B4 T64 step, but the prefetches stalled as long themselves
 * (2-core Xeon VM), so none is issued. */
#include "tsr_build_config.h"
#if TSR_BLAS_BLIS
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <xmmintrin.h>
#endif
#include "simd_math.h" /* TSR_SIMD_CLONES */
#include "gemm_blis_packed.h"

typedef struct {
    sgemm_ukr_ft ukr;
    cntx_t *cntx;
    dim_t mr, nr, mc, kc, kc_max, nc;
    int prefers_rows;
} micro_kernel_t;

static micro_kernel_t kernel;
static int kernel_usable;
static pthread_key_t pack_key;

typedef struct {
    float *a, *b;
    size_t a_cap, b_cap; /* in floats */
} pack_buffers_t;

static void free_pack_buffers(void *p)
{
    pack_buffers_t *buf = p;
    free(buf->a);
    free(buf->b);
    free(buf);
}

int tsr_blis_packed_gemm_init(void)
{
    cntx_t *cntx = bli_gks_query_cntx();
    micro_kernel_t k = {
        .ukr = (sgemm_ukr_ft)bli_cntx_get_l3_nat_ukr_dt(BLIS_FLOAT, BLIS_GEMM_UKR, cntx),
        .cntx = cntx,
        .mr = bli_cntx_get_blksz_def_dt(BLIS_FLOAT, BLIS_MR, cntx),
        .nr = bli_cntx_get_blksz_def_dt(BLIS_FLOAT, BLIS_NR, cntx),
        .mc = bli_cntx_get_blksz_def_dt(BLIS_FLOAT, BLIS_MC, cntx),
        .kc = bli_cntx_get_blksz_def_dt(BLIS_FLOAT, BLIS_KC, cntx),
        .kc_max = bli_cntx_get_blksz_max_dt(BLIS_FLOAT, BLIS_KC, cntx),
        .nc = bli_cntx_get_blksz_def_dt(BLIS_FLOAT, BLIS_NC, cntx),
        .prefers_rows = bli_cntx_l3_nat_ukr_prefers_rows_dt(BLIS_FLOAT, BLIS_GEMM_UKR, cntx),
    };
    /* Only the plain panel format is written here: panels of exactly MR and
     * NR rows (BLIS pads them to the blocksize's maximum where that differs). */
    int plain = k.ukr && k.mr > 0 && k.nr > 0 && k.mc >= k.mr && k.kc > 0 && k.kc_max >= k.kc && k.nc >= k.nr &&
                bli_cntx_get_blksz_max_dt(BLIS_FLOAT, BLIS_MR, cntx) == k.mr &&
                bli_cntx_get_blksz_max_dt(BLIS_FLOAT, BLIS_NR, cntx) == k.nr;
    if (!plain || pthread_key_create(&pack_key, free_pack_buffers) != 0)
        return 0;
    kernel = k;
    kernel_usable = 1;
    return 1;
}

/* Grows *p to hold n floats; 64-byte aligned as the micro-kernels want. */
static int reserve(float **p, size_t *cap, size_t n)
{
    if (n <= *cap)
        return 1;
    free(*p);
    *cap = 0;
    *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!*p)
        return 0;
    *cap = n;
    return 1;
}

static pack_buffers_t *pack_buffers(size_t a_floats, size_t b_floats)
{
    pack_buffers_t *buf = pthread_getspecific(pack_key);
    if (!buf) {
        buf = calloc(1, sizeof *buf);
        if (!buf || pthread_setspecific(pack_key, buf) != 0) {
            free(buf);
            return NULL;
        }
    }
    if (!reserve(&buf->a, &buf->a_cap, a_floats) || !reserve(&buf->b, &buf->b_cap, b_floats))
        return NULL;
    return buf;
}

/* dst[p * w + i] = src[p * inc_along + i] for i < n, p < len. Called with a
 * micro-kernel's width as a constant n, each column's copy is inlined as a
 * few vector moves instead of a memcpy call for 24 to 128 bytes. */
static inline __attribute__((always_inline)) void copy_columns(float *dst, dim_t w, dim_t len, const float *src,
                                                               inc_t inc_along, dim_t n)
{
    for (dim_t p = 0; p < len; p++)
        memcpy(dst + p * w, src + p * inc_along, (size_t)n * sizeof *dst);
}

#if defined(__has_builtin)
#if __has_builtin(__builtin_shufflevector)
#define TRANSPOSE_8X8 1
#endif
#endif

#if TRANSPOSE_8X8
typedef float v8sf __attribute__((vector_size(32)));

/* dst[p * w + i] = src[i * inc_across + p] for i, p < 8: an 8 x 8 transpose
 * in registers (unpack, pair shuffle, half swap). */
static inline __attribute__((always_inline)) void transpose_8x8(float *dst, dim_t w, const float *src, inc_t inc_across)
{
    v8sf r0, r1, r2, r3, r4, r5, r6, r7;
    memcpy(&r0, src, sizeof r0);
    memcpy(&r1, src + inc_across, sizeof r1);
    memcpy(&r2, src + 2 * inc_across, sizeof r2);
    memcpy(&r3, src + 3 * inc_across, sizeof r3);
    memcpy(&r4, src + 4 * inc_across, sizeof r4);
    memcpy(&r5, src + 5 * inc_across, sizeof r5);
    memcpy(&r6, src + 6 * inc_across, sizeof r6);
    memcpy(&r7, src + 7 * inc_across, sizeof r7);
    v8sf t0 = __builtin_shufflevector(r0, r1, 0, 8, 1, 9, 4, 12, 5, 13);
    v8sf t1 = __builtin_shufflevector(r0, r1, 2, 10, 3, 11, 6, 14, 7, 15);
    v8sf t2 = __builtin_shufflevector(r2, r3, 0, 8, 1, 9, 4, 12, 5, 13);
    v8sf t3 = __builtin_shufflevector(r2, r3, 2, 10, 3, 11, 6, 14, 7, 15);
    v8sf t4 = __builtin_shufflevector(r4, r5, 0, 8, 1, 9, 4, 12, 5, 13);
    v8sf t5 = __builtin_shufflevector(r4, r5, 2, 10, 3, 11, 6, 14, 7, 15);
    v8sf t6 = __builtin_shufflevector(r6, r7, 0, 8, 1, 9, 4, 12, 5, 13);
    v8sf t7 = __builtin_shufflevector(r6, r7, 2, 10, 3, 11, 6, 14, 7, 15);
    v8sf u0 = __builtin_shufflevector(t0, t2, 0, 1, 8, 9, 4, 5, 12, 13);
    v8sf u1 = __builtin_shufflevector(t0, t2, 2, 3, 10, 11, 6, 7, 14, 15);
    v8sf u2 = __builtin_shufflevector(t1, t3, 0, 1, 8, 9, 4, 5, 12, 13);
    v8sf u3 = __builtin_shufflevector(t1, t3, 2, 3, 10, 11, 6, 7, 14, 15);
    v8sf u4 = __builtin_shufflevector(t4, t6, 0, 1, 8, 9, 4, 5, 12, 13);
    v8sf u5 = __builtin_shufflevector(t4, t6, 2, 3, 10, 11, 6, 7, 14, 15);
    v8sf u6 = __builtin_shufflevector(t5, t7, 0, 1, 8, 9, 4, 5, 12, 13);
    v8sf u7 = __builtin_shufflevector(t5, t7, 2, 3, 10, 11, 6, 7, 14, 15);
    v8sf c[8] = { /* columns 0-3 from the low halves, 4-7 from the high ones */
        __builtin_shufflevector(u0, u4, 0, 1, 2, 3, 8, 9, 10, 11),
        __builtin_shufflevector(u1, u5, 0, 1, 2, 3, 8, 9, 10, 11),
        __builtin_shufflevector(u2, u6, 0, 1, 2, 3, 8, 9, 10, 11),
        __builtin_shufflevector(u3, u7, 0, 1, 2, 3, 8, 9, 10, 11),
        __builtin_shufflevector(u0, u4, 4, 5, 6, 7, 12, 13, 14, 15),
        __builtin_shufflevector(u1, u5, 4, 5, 6, 7, 12, 13, 14, 15),
        __builtin_shufflevector(u2, u6, 4, 5, 6, 7, 12, 13, 14, 15),
        __builtin_shufflevector(u3, u7, 4, 5, 6, 7, 12, 13, 14, 15),
    };
    for (int j = 0; j < 8; j++)
        memcpy(dst + j * w, &c[j], sizeof c[j]);
}
#endif

/* One micro-panel: dst[p * w + i] = src[i * inc_across + p * inc_along] for
 * i < n_across (rows of the panel, zero-padded up to its width w) and p < len.
 * Compiled for AVX-512, AVX2 and baseline x86-64: wider moves keep more of a
 * cold source's loads in flight (a 1536 x 384 panel set from memory: 0.36
 * ns a float against 0.68 with SSE moves, on the 2-core Xeon). */
TSR_SIMD_CLONES
static void pack_micro_panel(float *dst, dim_t w, dim_t n_across, dim_t len, const float *src, inc_t inc_across,
                             inc_t inc_along)
{
    dim_t i = 0;
    if (inc_across == 1) { /* each column of the panel is contiguous: copy it */
        switch (n_across) { /* the panel widths of BLIS's skx (32 x 12) and haswell/zen (6 x 16) kernels */
        case 32: copy_columns(dst, w, len, src, inc_along, 32); break;
        case 16: copy_columns(dst, w, len, src, inc_along, 16); break;
        case 12: copy_columns(dst, w, len, src, inc_along, 12); break;
        case 6: copy_columns(dst, w, len, src, inc_along, 6); break;
        default: copy_columns(dst, w, len, src, inc_along, n_across);
        }
        i = n_across;
    }
#if defined(__SSE2__)
    else if (inc_along == 1) { /* each row is contiguous: transpose 8 x 8 blocks, then 4 x 4 */
#if TRANSPOSE_8X8
        /* eight whole panel columns at a time, so that each is written once
         * (0.33 ns a float against 0.62 a row block at a time) */
        dim_t n8 = n_across / 8 * 8, p8 = 0;
        for (; p8 + 8 <= len; p8 += 8)
            for (dim_t i8 = 0; i8 < n8; i8 += 8)
                transpose_8x8(dst + p8 * w + i8, w, src + i8 * inc_across + p8, inc_across);
        for (; p8 < len; p8++)
            for (dim_t r = 0; r < n8; r++)
                dst[p8 * w + r] = src[r * inc_across + p8];
        i = n8;
#endif
        for (; i + 4 <= n_across; i += 4) {
            const float *s0 = src + i * inc_across, *s1 = s0 + inc_across, *s2 = s1 + inc_across,
                        *s3 = s2 + inc_across;
            dim_t p = 0;
            for (; p + 4 <= len; p += 4) {
                __m128 r0 = _mm_loadu_ps(s0 + p), r1 = _mm_loadu_ps(s1 + p);
                __m128 r2 = _mm_loadu_ps(s2 + p), r3 = _mm_loadu_ps(s3 + p);
                _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
                _mm_storeu_ps(dst + (p + 0) * w + i, r0);
                _mm_storeu_ps(dst + (p + 1) * w + i, r1);
                _mm_storeu_ps(dst + (p + 2) * w + i, r2);
                _mm_storeu_ps(dst + (p + 3) * w + i, r3);
            }
            for (; p < len; p++) {
                float *d = dst + p * w + i;
                d[0] = s0[p], d[1] = s1[p], d[2] = s2[p], d[3] = s3[p];
            }
        }
    }
#endif
    for (; i < n_across; i++) /* rows left over, or general strides */
        for (dim_t p = 0; p < len; p++)
            dst[p * w + i] = src[i * inc_across + p * inc_along];
    if (n_across < w) /* the micro-kernel reads whole panels */
        for (dim_t p = 0; p < len; p++)
            memset(dst + p * w + n_across, 0, (size_t)(w - n_across) * sizeof *dst);
}

/* op(A)(i,p) = A[i * rsa + p * csa], op(B)(p,j) = B[p * rsb + j * csb], C(i,j) = C[i * rsc + j * csc]. */
static void packed_gemm(const micro_kernel_t *K, pack_buffers_t *buf, dim_t m, dim_t n, dim_t k, float alpha,
                        const float *A, inc_t rsa, inc_t csa, const float *B, inc_t rsb, inc_t csb, float beta,
                        float *C, inc_t rsc, inc_t csc)
{
    auxinfo_t aux;
    memset(&aux, 0, sizeof aux);
    bli_auxinfo_set_schema_a(BLIS_PACKED_ROW_PANELS, &aux);
    bli_auxinfo_set_schema_b(BLIS_PACKED_COL_PANELS, &aux);
    bli_auxinfo_set_is_a(1, &aux);
    bli_auxinfo_set_is_b(1, &aux);
    for (dim_t jc = 0; jc < n; jc += K->nc) {
        dim_t nc = bli_min(K->nc, n - jc);
        for (dim_t pc = 0; pc < k;) {
            /* a remainder up to kc_max joins the last block rather than forming a thin one */
            dim_t kc = k - pc <= K->kc_max ? k - pc : K->kc;
            float beta_block = pc == 0 ? beta : 1.0f;
            for (dim_t jr = 0; jr < nc; jr += K->nr)
                pack_micro_panel(buf->b + jr * kc, K->nr, bli_min(K->nr, nc - jr), kc, B + pc * rsb + (jc + jr) * csb,
                                 csb, rsb);
            for (dim_t ic = 0; ic < m; ic += K->mc) {
                dim_t mc = bli_min(K->mc, m - ic);
                for (dim_t ir = 0; ir < mc; ir += K->mr)
                    pack_micro_panel(buf->a + ir * kc, K->mr, bli_min(K->mr, mc - ir), kc,
                                     A + (ic + ir) * rsa + pc * csa, rsa, csa);
                for (dim_t jr = 0; jr < nc; jr += K->nr)
                    for (dim_t ir = 0; ir < mc; ir += K->mr) {
                        /* the next micro-panels, which the kernel may prefetch */
                        int last_ir = ir + K->mr >= mc;
                        dim_t next_jr = !last_ir ? jr : jr + K->nr < nc ? jr + K->nr : 0;
                        bli_auxinfo_set_next_a(buf->a + (last_ir ? 0 : ir + K->mr) * kc, &aux);
                        bli_auxinfo_set_next_b(buf->b + next_jr * kc, &aux);
                        K->ukr(bli_min(K->mr, mc - ir), bli_min(K->nr, nc - jr), kc, &alpha, buf->a + ir * kc,
                               buf->b + jr * kc, &beta_block, C + (ic + ir) * rsc + (jc + jr) * csc, rsc, csc, &aux,
                               K->cntx);
                    }
            }
            pc += kc;
        }
    }
}

int tsr_blis_packed_sgemm(trans_t ta, trans_t tb, dim_t m, dim_t n, dim_t k, float alpha, const float *A, inc_t lda,
                          const float *B, inc_t ldb, float beta, float *C, inc_t ldc)
{
    if (!kernel_usable || m <= 0 || n <= 0 || k <= 0 || alpha == 0.0f)
        return 0; /* BLIS handles the degenerate cases (C = beta C) */
    const micro_kernel_t *K = &kernel;
    /* strides of op(A), op(B) and C, all three column-major */
    inc_t rsa = ta == BLIS_TRANSPOSE ? lda : 1, csa = ta == BLIS_TRANSPOSE ? 1 : lda;
    inc_t rsb = tb == BLIS_TRANSPOSE ? ldb : 1, csb = tb == BLIS_TRANSPOSE ? 1 : ldb;
    inc_t rsc = 1, csc = ldc;
    if (K->prefers_rows) { /* compute C^T = op(B)^T op(A)^T: C^T's rows are C's columns */
        const float *t = A;
        A = B, B = t;
        dim_t d = m;
        m = n, n = d;
        inc_t r = rsa, c = csa;
        rsa = csb, csa = rsb, rsb = c, csb = r;
        rsc = ldc, csc = 1;
    }
    pack_buffers_t *buf =
        pack_buffers((size_t)(K->mc + K->mr) * K->kc_max, (size_t)(bli_min(K->nc, n) + K->nr) * K->kc_max);
    if (!buf)
        return 0; /* no memory for the panels: BLIS allocates from its own pool */
    packed_gemm(K, buf, m, n, k, alpha, A, rsa, csa, B, rsb, csb, beta, C, rsc, csc);
    return 1;
}
#endif
