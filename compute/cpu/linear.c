/* CPU tile kernels of the fused linear layers (float32): head-chunked GEMM,
 * bias, row sums, GeLU and the head reshape. See tsr_compute_linear.h. */
#include <math.h>
#include <string.h>
#include "tsr_compute_linear.h"
#include "simd_math.h" /* before tsr_compute_elem.h: its pragma applies to what follows */
#include "tsr_compute_elem.h"

static int imin(int a, int b) { return a < b ? a : b; }

void tsr_cpu_gemm_chunked(tsr_trans_t ta, tsr_trans_t tb, int m, int n, int k, tsr_chunk_dim_t dim, int csize,
                          float alpha, tsr_chunked_t A, tsr_chunked_t B, float beta, tsr_chunked_t C,
                          int nthreads)
{
    int total = dim == TSR_CHUNK_M ? m : dim == TSR_CHUNK_N ? n : dim == TSR_CHUNK_K ? k : 0;
    if (dim == TSR_CHUNK_NONE || csize < 1 || csize >= total) {
        tsr_cpu_gemm(TSR_FLOAT32, ta, tb, m, n, k, alpha, A.p, A.ld, B.p, B.ld, beta, C.p, C.ld, nthreads);
        return;
    }
    for (int c = 0, off = 0; off < total; c++, off += csize) {
        int len = imin(csize, total - off);
        int mc = dim == TSR_CHUNK_M ? len : m, nc = dim == TSR_CHUNK_N ? len : n, kc = dim == TSR_CHUNK_K ? len : k;
        /* along K the chunks are summed: beta applies to the first one only */
        float b = dim == TSR_CHUNK_K && c > 0 ? 1.0f : beta;
        tsr_cpu_gemm(TSR_FLOAT32, ta, tb, mc, nc, kc, alpha, A.p + c * A.cstride, A.ld, B.p + c * B.cstride, B.ld,
                     b, C.p + c * C.cstride, C.ld, nthreads);
    }
}

void tsr_cpu_heads_pack(int depth, int rows, int cols, const float *H, int ldh, size_t hstride, float *X, int ldx)
{
    for (int z = 0; z < depth; z++)
        for (int t = 0; t < cols; t++)
            memcpy(X + (size_t)t * ldx + (size_t)z * rows, H + z * hstride + (size_t)t * ldh,
                   (size_t)rows * sizeof *X);
}

void tsr_cpu_heads_unpack(int depth, int rows, int cols, const float *X, int ldx, float beta, float *H, int ldh,
                          size_t hstride)
{
    for (int z = 0; z < depth; z++)
        for (int t = 0; t < cols; t++) {
            const float *x = X + (size_t)t * ldx + (size_t)z * rows;
            float *h = H + z * hstride + (size_t)t * ldh;
            if (beta == 0.0f)
                memcpy(h, x, (size_t)rows * sizeof *h);
            else
                for (int r = 0; r < rows; r++)
                    h[r] = x[r] + beta * h[r];
        }
}

void tsr_cpu_bias_fill(int m, int n, const float *bias, float *C, int ldc)
{
    for (int t = 0; t < n; t++) {
        float *c = C + (size_t)t * ldc;
        if (bias)
            memcpy(c, bias, (size_t)m * sizeof *c);
        else
            memset(c, 0, (size_t)m * sizeof *c);
    }
}

void tsr_cpu_bias_add(int m, int n, const float *bias, float *C, int ldc)
{
    for (int t = 0; t < n; t++) {
        float *c = C + (size_t)t * ldc;
        for (int r = 0; r < m; r++)
            c[r] += bias[r];
    }
}

void tsr_cpu_rowsum(int m, int n, const float *X, int ldx, float beta, float *y)
{
    if (beta == 0.0f)
        memset(y, 0, (size_t)m * sizeof *y);
    else if (beta != 1.0f)
        for (int r = 0; r < m; r++)
            y[r] *= beta;
    /* column by column: each token's vector is contiguous */
    for (int t = 0; t < n; t++) {
        const float *x = X + (size_t)t * ldx;
        for (int r = 0; r < m; r++)
            y[r] += x[r];
    }
}

/* The formulas are in tsr_compute_elem.h, shared with compute/cuda/linear.cu;
 * here e = exp(-2u) comes from exp_approx, which the compiler vectorises
 * (expf is a call): a few float ulps, inf where expf overflows. */
static inline float gelu_exp(float x)
{
    float a = -2.0f * tsr_elem_gelu_arg(x);
    return a > 88.0f ? INFINITY : exp_approx(a);
}

static inline float gelu(float x) { return tsr_elem_gelu_from_exp(x, gelu_exp(x)); }
static inline float gelu_grad(float x) { return tsr_elem_gelu_grad_from_exp(x, gelu_exp(x)); }

/* exported (not inlined under -fPIC): the loops below call the static ones */
float tsr_gelu(float x) { return gelu(x); }
float tsr_gelu_grad(float x) { return gelu_grad(x); }

TSR_SIMD_CLONES
void tsr_cpu_gelu_forward(int m, int n, const float *pre, int ldp, float *out, int ldo)
{
    for (int t = 0; t < n; t++) {
        const float *p = pre + (size_t)t * ldp;
        float *o = out + (size_t)t * ldo;
        for (int r = 0; r < m; r++)
            o[r] = gelu(p[r]);
    }
}

TSR_SIMD_CLONES
void tsr_cpu_gelu_backward(int m, int n, const float *pre, int ldp, const float *dout, int ldd,
                           float *dpre, int lddp)
{
    for (int t = 0; t < n; t++) {
        const float *p = pre + (size_t)t * ldp, *d = dout + (size_t)t * ldd;
        float *g = dpre + (size_t)t * lddp;
        for (int r = 0; r < m; r++)
            g[r] = d[r] * gelu_grad(p[r]);
    }
}

int tsr_heads_overlap(const tsr_heads_geom_t *g, int xrows, int xcols, int depth, int yrows, int ycols)
{
    int r0, r1, t0, t1, xr, xc;
    for (int z = 0; z < depth; z++)
        if (tsr_elem_head_overlap(g, z, xrows, xcols, yrows, ycols, &r0, &r1, &t0, &t1, &xr, &xc))
            return 1;
    return 0;
}

void tsr_cpu_heads_copy(const tsr_heads_geom_t *g, int to_heads, float beta,
                        float *X, int xrows, int xcols, int ldx,
                        float *Y, int depth, int yrows, int ycols, int ldy, size_t ystride)
{
    int r0, r1, t0, t1, xr, xc;
    for (int z = 0; z < depth; z++) {
        if (!tsr_elem_head_overlap(g, z, xrows, xcols, yrows, ycols, &r0, &r1, &t0, &t1, &xr, &xc))
            continue;
        int len = r1 - r0;
        for (int t = t0; t < t1; t++) {
            float *x = X + (size_t)(xc + t) * ldx + (xr + r0), *y = Y + z * ystride + (size_t)t * ldy + r0;
            float *dst = to_heads ? y : x;
            const float *src = to_heads ? x : y;
            if (beta == 0.0f)
                memcpy(dst, src, (size_t)len * sizeof *dst);
            else
                for (int r = 0; r < len; r++)
                    dst[r] = src[r] + beta * dst[r];
        }
    }
}
