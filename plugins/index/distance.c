/*
 * distance.c — the vector arithmetic every index shares: squared L2, dot
 * product, normalization, and the growth of id-indexed arrays.
 *
 * The two kernels are the inner loop of every HNSW hop and k-means
 * assignment tail, so they are written with GCC vector extensions: two
 * independent 8-lane accumulators (the adds of one do not wait on the
 * other), unaligned loads through memcpy (vectors sit at any float
 * offset), a scalar tail. The plugin targets baseline x86-64 (SSE2:
 * each 8-lane operation is two instructions), so the two kernels are also
 * cloned for AVX2 and the loader picks the clone the CPU runs (GCC's
 * target_clones, an ifunc); AVX-512 stays out so valgrind runs them.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "index.h"

typedef float ix_v8 __attribute__((vector_size(32)));

/* The 8-lane helpers below pass ix_v8 by value, which GCC warns changes the
 * calling convention without AVX. They are static and inlined into the two
 * kernels of this file: no such value crosses a call anyone else makes. */
#pragma GCC diagnostic ignored "-Wpsabi"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define IX_KERNEL __attribute__((target_clones("avx2", "default")))
#else
#define IX_KERNEL
#endif

static inline ix_v8 load8(const float *p)
{
    ix_v8 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline float hsum8(ix_v8 v)
{
    return (v[0] + v[4]) + (v[1] + v[5]) + (v[2] + v[6]) + (v[3] + v[7]);
}

IX_KERNEL float ix_l2sq(const float *a, const float *b, uint32_t dim)
{
    ix_v8 s0 = {0}, s1 = {0};
    uint32_t i = 0;
    for (; i + 16 <= dim; i += 16) {
        ix_v8 d0 = load8(a + i) - load8(b + i), d1 = load8(a + i + 8) - load8(b + i + 8);
        s0 += d0 * d0;
        s1 += d1 * d1;
    }
    if (i + 8 <= dim) {
        ix_v8 d0 = load8(a + i) - load8(b + i);
        s0 += d0 * d0;
        i += 8;
    }
    float s = hsum8(s0 + s1);
    for (; i < dim; i++) {
        float d = a[i] - b[i];
        s += d * d;
    }
    return s;
}

IX_KERNEL float ix_dot(const float *a, const float *b, uint32_t dim)
{
    ix_v8 s0 = {0}, s1 = {0};
    uint32_t i = 0;
    for (; i + 16 <= dim; i += 16) {
        s0 += load8(a + i) * load8(b + i);
        s1 += load8(a + i + 8) * load8(b + i + 8);
    }
    if (i + 8 <= dim) {
        s0 += load8(a + i) * load8(b + i);
        i += 8;
    }
    float s = hsum8(s0 + s1);
    for (; i < dim; i++)
        s += a[i] * b[i];
    return s;
}

bool ix_normalize(float *v, uint32_t dim)
{
    double s = 0;
    for (uint32_t i = 0; i < dim; i++)
        s += (double)v[i] * v[i];
    if (!(s > 0) || !isfinite(s))
        return false;
    float inv = (float)(1.0 / sqrt(s));
    for (uint32_t i = 0; i < dim; i++)
        v[i] *= inv;
    return true;
}

bool ix_grow(void **p, size_t old_n, size_t new_n, size_t size)
{
    if (new_n <= old_n)
        return true;
    if (size && new_n > SIZE_MAX / size)
        return false;
    void *q = realloc(*p, new_n * size);
    if (!q)
        return false;
    memset((char *)q + old_n * size, 0, (new_n - old_n) * size);
    *p = q;
    return true;
}

size_t ix_next_cap(size_t cap, size_t need)
{
    size_t c = cap < 64 ? 64 : cap;
    while (c < need)
        c = c > SIZE_MAX / 2 ? need : c * 2;
    return c;
}
