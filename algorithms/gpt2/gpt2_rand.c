/* MT19937 + PyTorch-compatible normal_ + llm.c's Fisher-Yates shuffle.
 *
 * Compiled with -ffp-contract=off (see CMakeLists.txt): the Box-Muller
 * arithmetic must round exactly as llm.c's reference build
 * (gcc -O2 -std=c11 -ffp-contract=off) does, so no fused multiply-adds. */
#include "gpt2_rand.h"

#include <math.h>
#include <string.h>

#include "tsr_core.h"

#define MT_M 397
#define GPT2_PI 3.14159265358979323846 /* M_PI, without relying on _DEFAULT_SOURCE */
#define MT_MATRIX_A 0x9908b0dfu
#define MT_UPPER 0x80000000u
#define MT_LOWER 0x7fffffffu

void tsr_gpt2_rng_seed(tsr_gpt2_rng_t *rng, uint32_t seed)
{
    rng->state[0] = seed;
    for (uint32_t i = 1; i < TSR_GPT2_MT_N; i++) {
        uint32_t prev = rng->state[i - 1];
        rng->state[i] = 1812433253u * (prev ^ (prev >> 30)) + i;
    }
    /* PyTorch draws lazily: the first draw twists the whole state */
    rng->left = 1;
    rng->next = 0;
}

static uint32_t mt_mix(uint32_t upper_word, uint32_t lower_word, uint32_t far)
{
    uint32_t y = (upper_word & MT_UPPER) | (lower_word & MT_LOWER);
    return far ^ (y >> 1) ^ ((y & 1u) ? MT_MATRIX_A : 0u);
}

static void mt_twist(tsr_gpt2_rng_t *rng)
{
    uint32_t *s = rng->state;
    int i;
    for (i = 0; i < TSR_GPT2_MT_N - MT_M; i++)
        s[i] = mt_mix(s[i], s[i + 1], s[i + MT_M]);
    for (; i < TSR_GPT2_MT_N - 1; i++)
        s[i] = mt_mix(s[i], s[i + 1], s[i + MT_M - TSR_GPT2_MT_N]);
    s[TSR_GPT2_MT_N - 1] = mt_mix(s[TSR_GPT2_MT_N - 1], s[0], s[MT_M - 1]);
    rng->left = TSR_GPT2_MT_N;
    rng->next = 0;
}

uint32_t tsr_gpt2_rng_u32(tsr_gpt2_rng_t *rng)
{
    rng->left--;
    if (rng->left <= 0)
        mt_twist(rng);
    uint32_t y = rng->state[rng->next++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

float tsr_gpt2_rng_float(tsr_gpt2_rng_t *rng)
{
    uint32_t bits = tsr_gpt2_rng_u32(rng) & 0xffffffu;
    return (float)bits * (1.0f / 16777216.0f);
}

double tsr_gpt2_rng_double(tsr_gpt2_rng_t *rng)
{
    uint64_t hi = tsr_gpt2_rng_u32(rng);
    uint64_t lo = tsr_gpt2_rng_u32(rng);
    uint64_t bits = ((hi << 32) | lo) & ((UINT64_C(1) << 53) - 1);
    return (double)bits * (1.0 / 9007199254740992.0);
}

/* Box-Muller on 16 uniforms in place: pairs (t, t + 8), t < 8. Every
 * operation is float except theta, formed in double and rounded once, as in
 * PyTorch / llm.c. The order of operations below is part of the contract. */
static void box_muller_16(float *d, float mean, float std)
{
    for (int t = 0; t < 8; t++) {
        float u1 = 1.0f - d[t];
        float u2 = d[t + 8];
        float radius = sqrtf(-2.0f * logf(u1 + 1e-12f));
        float theta = (float)(2.0 * GPT2_PI * (double)u2);
        float c = radius * cosf(theta);
        float s = radius * sinf(theta);
        d[t] = c * std + mean;
        d[t + 8] = s * std + mean;
    }
}

void tsr_gpt2_rng_normal(float *data, size_t n, float mean, float std, tsr_gpt2_rng_t *rng)
{
    if (n >= 16) {
        for (size_t i = 0; i < n; i++)
            data[i] = tsr_gpt2_rng_float(rng);
        size_t i = 0;
        for (; i + 16 <= n; i += 16)
            box_muller_16(data + i, mean, std);
        if (n % 16 != 0) {
            /* the tail: redraw the last 16 values (overlapping the previous
             * block) and transform them again */
            float *tail = data + n - 16;
            for (int k = 0; k < 16; k++)
                tail[k] = tsr_gpt2_rng_float(rng);
            box_muller_16(tail, mean, std);
        }
        return;
    }
    /* fewer than 16: pairs from two double uniforms each, the second value
     * of a pair kept (as double) for the next element */
    double pending = 0.0;
    int have_pending = 0;
    for (size_t t = 0; t < n; t++) {
        if (have_pending) {
            data[t] = (float)(pending * std + mean);
            have_pending = 0;
            continue;
        }
        float u1 = (float)tsr_gpt2_rng_double(rng);
        float u2 = (float)tsr_gpt2_rng_double(rng);
        float radius = sqrtf(-2.0f * logf(1.0f - u2 + 1e-12f));
        float theta = (float)(2.0 * GPT2_PI * (double)u1);
        pending = radius * sinf(theta);
        have_pending = 1;
        float c = radius * cosf(theta);
        data[t] = c * std + mean;
    }
}

void tsr_gpt2_identity_permutation(int *perm, int n)
{
    for (int i = 0; i < n; i++)
        perm[i] = i;
}

void tsr_gpt2_shuffle(int *perm, int n, tsr_gpt2_rng_t *rng)
{
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(tsr_gpt2_rng_u32(rng) % (uint32_t)(i + 1));
        int tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
}

static void put_u32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void tsr_gpt2_rng_pack(const tsr_gpt2_rng_t *rng, unsigned char out[TSR_GPT2_RNG_PACKED_BYTES])
{
    for (int i = 0; i < TSR_GPT2_MT_N; i++)
        put_u32(out + 4 * i, rng->state[i]);
    put_u32(out + 4 * TSR_GPT2_MT_N, (uint32_t)rng->left);
    put_u32(out + 4 * (TSR_GPT2_MT_N + 1), rng->next);
}

int tsr_gpt2_rng_unpack(tsr_gpt2_rng_t *rng, const unsigned char in[TSR_GPT2_RNG_PACKED_BYTES])
{
    tsr_gpt2_rng_t r;
    for (int i = 0; i < TSR_GPT2_MT_N; i++)
        r.state[i] = get_u32(in + 4 * i);
    uint32_t left = get_u32(in + 4 * TSR_GPT2_MT_N);
    r.next = get_u32(in + 4 * (TSR_GPT2_MT_N + 1));
    /* just seeded: left 1, next 0; afterwards left + next == N + 1 */
    int ok = left >= 1 && left <= TSR_GPT2_MT_N && r.next <= TSR_GPT2_MT_N &&
             ((left == 1 && r.next == 0) || left + r.next == TSR_GPT2_MT_N + 1);
    if (!ok) {
        tsr_log(TSR_LOG_ERROR, "MT19937 state: inconsistent position (left %u, next %u)",
                left, r.next);
        return TSR_EFORMAT;
    }
    r.left = (int32_t)left;
    *rng = r;
    return 0;
}
