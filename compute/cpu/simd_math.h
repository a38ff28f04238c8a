/* Vectorisable float math shared by the CPU softmax kernels (attention,
 * cross-entropy): written so that GCC vectorises the loops without
 * -ffast-math. Internal to compute/cpu; include it before the file's own
 * functions. */
#ifndef TSR_SIMD_MATH_H
#define TSR_SIMD_MATH_H
#include <math.h>
#include <stdint.h>
#include <string.h>

/* The softmax loops compare floats (clamps, maxima); GCC only turns those
 * into vector selects when it may ignore floating-point traps, which nothing
 * here relies on. This applies to every function after this point in the
 * including file. */
#pragma GCC optimize("no-trapping-math")

/* Partial sums / maxima kept in this many lanes, so the loops vectorise
 * without -ffast-math (a single accumulator would be a serial chain). */
#define LANES 16

/* exp(x), accurate to a few float ulps for x <= 0 (every exponent here is a
 * score minus an upper bound of it), as straight-line code the compiler
 * vectorises, unlike a call to expf. x = n ln2 + r with |r| <= ln2/2 (ln2
 * split in two so that n * ln2_hi is exact), exp(r) by its degree-7 Taylor
 * polynomial (truncation below 5e-9), 2^n written into the exponent bits.
 * x < -87 (e.g. -inf) gives 0; positive x are clamped at 88. */
static inline float exp_approx(float x)
{
    const float log2e = 1.44269504f, ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
    const float round_magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float xc = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    float shifted = xc * log2e + round_magic;
    uint32_t bits;
    memcpy(&bits, &shifted, sizeof bits);
    float n = shifted - round_magic;
    float r = (xc - n * ln2_hi) - n * ln2_lo;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* the low bits of `shifted` hold n (0x4B400000 is round_magic's pattern) */
    uint32_t pow2_bits = (bits - 0x4B400000u + 127u) << 23;
    float pow2;
    memcpy(&pow2, &pow2_bits, sizeof pow2);
    return x < -87.0f ? 0.0f : p * pow2;
}

/* The float's bits as an int with the same order as the floats (negative
 * floats have their magnitude bits flipped); the map is its own inverse.
 * An integer maximum vectorises without -ffinite-math-only, a float one
 * does not. */
static inline int32_t ordered_bits(float x)
{
    int32_t b;
    memcpy(&b, &x, sizeof b);
    return b < 0 ? b ^ 0x7fffffff : b;
}

/* Largest of x[0 .. n), n >= 1 (no NaN). */
static inline float max_of(const float *x, int n)
{
    int32_t m = ordered_bits(x[0]);
    for (int j = 1; j < n; j++) {
        int32_t b = ordered_bits(x[j]);
        m = b > m ? b : m;
    }
    int32_t r = m < 0 ? m ^ 0x7fffffff : m;
    float f;
    memcpy(&f, &r, sizeof f);
    return f;
}

/* Function multiversioning: the softmax loops marked with it are compiled for
 * AVX-512, AVX2 and baseline x86-64, and the loader picks the best one the
 * CPU supports (the GEMMs get the same from the BLAS). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#define TSR_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TSR_SIMD_CLONES
#endif

#endif
