/* Random numbers that reproduce llm.c (and PyTorch's CPU generator) bit for
 * bit: MT19937 seeded the way torch.manual_seed seeds it, 24-bit uniform
 * floats, PyTorch's CPU normal_ (uniforms first, then Box-Muller in blocks of
 * 16; counts below 16 use double uniforms), and llm.c's Fisher-Yates shuffle.
 *
 * Plain C, no StarPU. The state is a plain struct of fixed-size integers, so
 * it can be copied, saved and restored (tsr_gpt2_rng_pack/unpack give a
 * portable little-endian byte image). */
#ifndef GPT2_RAND_H
#define GPT2_RAND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TSR_GPT2_MT_N 624

typedef struct {
    uint32_t state[TSR_GPT2_MT_N];
    int32_t left;  /* words left before the next twist (as PyTorch's left_) */
    uint32_t next; /* index of the next word in state (as PyTorch's next_) */
} tsr_gpt2_rng_t;

/* Bytes of tsr_gpt2_rng_pack's image: 624 + 2 little-endian uint32. */
#define TSR_GPT2_RNG_PACKED_BYTES (4 * (TSR_GPT2_MT_N + 2))

void tsr_gpt2_rng_seed(tsr_gpt2_rng_t *rng, uint32_t seed);
uint32_t tsr_gpt2_rng_u32(tsr_gpt2_rng_t *rng);
/* (u32 & (2^24 - 1)) / 2^24, in [0, 1) */
float tsr_gpt2_rng_float(tsr_gpt2_rng_t *rng);
/* ((u32 << 32 | u32) & (2^53 - 1)) / 2^53, in [0, 1) */
double tsr_gpt2_rng_double(tsr_gpt2_rng_t *rng);

/* PyTorch CPU normal_(mean, std) on n floats (llm.c's normal_): for n >= 16
 * n uniforms, Box-Muller on each full block of 16 (pairs t, t + 8), and when
 * n % 16 != 0 the last 16 values are redrawn and transformed again (n + 16
 * draws in all); for n < 16 two double uniforms per pair of values. */
void tsr_gpt2_rng_normal(float *data, size_t n, float mean, float std, tsr_gpt2_rng_t *rng);

/* perm[0..n) = 0..n-1 */
void tsr_gpt2_identity_permutation(int *perm, int n);
/* Fisher-Yates as llm.c: for i = n-1 down to 1, j = u32 % (i + 1), swap. */
void tsr_gpt2_shuffle(int *perm, int n, tsr_gpt2_rng_t *rng);

/* Portable byte image of the state (for checkpoints). unpack validates it
 * (left in 1..624, next <= 624, left + next consistent) and returns 0 or
 * TSR_EFORMAT. */
void tsr_gpt2_rng_pack(const tsr_gpt2_rng_t *rng, unsigned char out[TSR_GPT2_RNG_PACKED_BYTES]);
int tsr_gpt2_rng_unpack(tsr_gpt2_rng_t *rng, const unsigned char in[TSR_GPT2_RNG_PACKED_BYTES]);

#ifdef __cplusplus
}
#endif
#endif
