/* bfloat16 storage: the top 16 bits of an IEEE float (sign, 8-bit exponent,
 * 7-bit mantissa). Conversions for C and for the host side of CUDA code;
 * kernels compute in float and store with tsr_float_to_bf16's rounding. */
#ifndef TSR_BF16_H
#define TSR_BF16_H
#include <stdint.h>
#include <string.h>

typedef uint16_t tsr_bf16_t;

/* Round to nearest, ties to even; a NaN stays a (quiet) NaN of the same sign,
 * and values past the largest bf16 round to infinity, as IEEE rounding does. */
static inline tsr_bf16_t tsr_float_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (tsr_bf16_t)((u >> 16) | 0x0040u); /* NaN: truncating could make it infinity */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (tsr_bf16_t)(u >> 16);
}

/* Exact: every bf16 is a float. */
static inline float tsr_bf16_to_float(tsr_bf16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* n values of a strided layout: rows x cols x depth, column c of matrix z
 * at element z * ldz + c * ld (both arrays alike). */
static inline void tsr_bf16_to_float_block(const tsr_bf16_t *src, float *dst, int rows, int cols, int depth,
                                           size_t ld, size_t ldz)
{
    for (int z = 0; z < depth; z++)
        for (int c = 0; c < cols; c++) {
            size_t at = (size_t)z * ldz + (size_t)c * ld;
            for (int r = 0; r < rows; r++)
                dst[at + r] = tsr_bf16_to_float(src[at + r]);
        }
}

static inline void tsr_float_to_bf16_block(const float *src, tsr_bf16_t *dst, int rows, int cols, int depth,
                                           size_t ld, size_t ldz)
{
    for (int z = 0; z < depth; z++)
        for (int c = 0; c < cols; c++) {
            size_t at = (size_t)z * ldz + (size_t)c * ld;
            for (int r = 0; r < rows; r++)
                dst[at + r] = tsr_float_to_bf16(src[at + r]);
        }
}

#endif
