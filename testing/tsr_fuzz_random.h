/* The fuzzers' deterministic random numbers (xorshift64; seed rng_state
 * with a non-zero value). One state per program. */
#ifndef TSR_FUZZ_RANDOM_H
#define TSR_FUZZ_RANDOM_H
#include <stdint.h>

static uint64_t rng_state;

static inline uint64_t next_random(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

#endif
