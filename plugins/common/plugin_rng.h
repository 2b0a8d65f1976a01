/*
 * plugin_rng.h — the deterministic random numbers of the standard plugins:
 * xoshiro256** seeded through splitmix64, uniform / normal / gamma draws and
 * a Fisher-Yates shuffle. Every draw derives from a seed the config or the
 * host gives, never from the clock, so two nodes with the same seed see the
 * same numbers (clients agreeing on a data partition) and runs replay.
 *
 * Header-only (static inline): each plugin .so compiles its own copy.
 */
#ifndef BBP_PLUGIN_RNG_H
#define BBP_PLUGIN_RNG_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

typedef struct bbp_rng {
    uint64_t s[4];
} bbp_rng;

static inline uint64_t bbp_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline void bbp_rng_seed(bbp_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = bbp_splitmix64(&seed);
}

static inline uint64_t bbp_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t bbp_rng_u64(bbp_rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = bbp_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = bbp_rotl(s[3], 45);
    return out;
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double bbp_rng_uniform(bbp_rng *r)
{
    return (double)(bbp_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform integer in [0, n), n > 0 (Lemire's unbiased multiply-shift). */
static inline uint64_t bbp_rng_below(bbp_rng *r, uint64_t n)
{
    unsigned __int128 m = (unsigned __int128)bbp_rng_u64(r) * n;
    uint64_t lo = (uint64_t)m;
    if (lo < n) {
        uint64_t floor_ = -n % n;
        while (lo < floor_) {
            m = (unsigned __int128)bbp_rng_u64(r) * n;
            lo = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

/* Standard normal (Box-Muller; one draw per call keeps replay simple). */
static inline double bbp_rng_normal(bbp_rng *r)
{
    double u1 = bbp_rng_uniform(r), u2 = bbp_rng_uniform(r);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Gamma(shape, 1), shape > 0 (Marsaglia-Tsang; shape < 1 boosted). */
static inline double bbp_rng_gamma(bbp_rng *r, double shape)
{
    double boost = 1.0;
    if (shape < 1.0) {
        double u = bbp_rng_uniform(r);
        boost = pow(u > 1e-300 ? u : 1e-300, 1.0 / shape);
        shape += 1.0;
    }
    double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = bbp_rng_normal(r), v = 1.0 + c * x;
        if (v <= 0)
            continue;
        v = v * v * v;
        double u = bbp_rng_uniform(r);
        if (u < 1.0 - 0.0331 * x * x * x * x || log(u) < 0.5 * x * x + d * (1.0 - v + log(v)))
            return boost * d * v;
    }
}

/* Fisher-Yates over n indices. */
static inline void bbp_rng_shuffle_u32(bbp_rng *r, uint32_t *v, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)bbp_rng_below(r, i);
        uint32_t t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

#endif
