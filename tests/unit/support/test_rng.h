/*
 * test_rng.h — the deterministic PRNG of the fuzz-style tests (xorshift64):
 * one seed, one run. Each test file owns its state, g_rng.
 */
#ifndef BB_TEST_RNG_H
#define BB_TEST_RNG_H

#include <stddef.h>
#include <stdint.h>

static uint64_t g_rng = 0x2545f4914f6cdd1dULL;

static inline uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

/* Uniform enough in [0, n); 0 for n == 0. */
static inline size_t below(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

#endif
