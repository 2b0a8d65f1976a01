/*
 * reduce.c — the aggregation kernels. Aggregation is memory-bandwidth
 * bound, so each kernel reads every contribution's bytes exactly once and
 * writes the result once:
 *
 *   weighted sum   out = sum_i w_i x_i with every input streamed side by
 *                  side and the sum in registers (below).
 *   sorted         the block of each contribution is copied into a tile
 *                  (row = contribution), the rows are sorted column-wise
 *                  by Batcher's merge network (each comparator is an
 *                  elementwise min/max of two rows, which the compiler
 *                  vectorizes across the block), then the median or trimmed
 *                  mean is read off the sorted rows. Beyond SORT_NETWORK_MAX
 *                  contributions a per-coordinate sort takes over.
 *
 * Both split a large model by element range over the instance's threads
 * (pool.c); each element is computed the same way in any part, so the
 * result is bit for bit the same with one thread or several.
 */
#include <assert.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "agg.h"

#define TILE 256             /* floats per column tile of the sorted kernels */
#define SORT_NETWORK_MAX 64  /* contributions sorted by the network */

/* ---- the weighted sum ----------------------------------------------------------------
 *
 * out[j] = (accumulate ? out[j] : 0) + w[0] x[0][j] + w[1] x[1][j] + ..., in that order.
 * Up to GROUP inputs are read side by side, 16 floats (one cache line) of each
 * at a time: one sequential stream per input, which the hardware prefetchers
 * follow, and the sum stays in registers, so each input is read once and the
 * output written once. More inputs take further passes that add into out. A
 * large output is written with non-temporal stores: its lines are not read
 * from memory before they are overwritten (a fifth of the traffic for 8
 * inputs) and do not evict the inputs from the cache.
 *
 * Non-finite outputs are caught on the way: v - v is 0 for a finite v and
 * NaN otherwise, summed per lane; only a range that ends NaN is scanned
 * again for the first bad index. */

#define GROUP 8
#define LINE 16                        /* floats per 64-byte line */
#define STREAM_MIN ((size_t)2 << 20)   /* outputs from 8 MiB bypass the cache */

typedef float v4 __attribute__((vector_size(16)));
typedef float v4u __attribute__((vector_size(16), aligned(4), may_alias));

static inline v4 ld(const float *p)
{
    return *(const v4u *)(const void *)p;
}

static inline void st(float *p, v4 v, bool stream)
{
#if defined(__SSE2__)
    if (stream) {
        _mm_stream_ps(p, (__m128)v);
        return;
    }
#else
    (void)stream;
#endif
    *(v4u *)(void *)p = v;
}

static size_t first_non_finite(const float *v, size_t n)
{
    for (size_t j = 0; j < n; j++)
        if (!(fabsf(v[j]) <= FLT_MAX))
            return j;
    return SIZE_MAX;
}

/* One pass over [lo, hi) with inputs x[0..n), n <= GROUP. true when an
 * output of the range is not finite. */
static bool wsum_pass(const float *const *x, const float *w, size_t n, float *out, bool acc,
                      bool stream, size_t lo, size_t hi)
{
    v4 chk = {0, 0, 0, 0};
    size_t j = lo;
    /* non-temporal stores need 16-byte aligned addresses */
    stream = stream && ((uintptr_t)(out + lo) & 15) == 0;
    for (; j + LINE <= hi; j += LINE) {
        v4 a0, a1, a2, a3;
        size_t i = 0;
        if (acc) {
            a0 = ld(out + j), a1 = ld(out + j + 4), a2 = ld(out + j + 8), a3 = ld(out + j + 12);
        } else {
            const float *p = x[0] + j;
            v4 wi = {w[0], w[0], w[0], w[0]};
            a0 = wi * ld(p), a1 = wi * ld(p + 4), a2 = wi * ld(p + 8), a3 = wi * ld(p + 12);
            i = 1;
        }
        for (; i < n; i++) {
            const float *p = x[i] + j;
            v4 wi = {w[i], w[i], w[i], w[i]};
            a0 += wi * ld(p), a1 += wi * ld(p + 4), a2 += wi * ld(p + 8), a3 += wi * ld(p + 12);
        }
        chk += (a0 - a0) + (a1 - a1) + (a2 - a2) + (a3 - a3);
        st(out + j, a0, stream), st(out + j + 4, a1, stream);
        st(out + j + 8, a2, stream), st(out + j + 12, a3, stream);
    }
#if defined(__SSE2__)
    if (stream)
        _mm_sfence(); /* the stores are visible before another thread reads them */
#endif
    bool bad = chk[0] != 0 || chk[1] != 0 || chk[2] != 0 || chk[3] != 0;
    for (; j < hi; j++) { /* the same sum, element by element */
        float a = acc ? out[j] : w[0] * x[0][j];
        for (size_t i = acc ? 0 : 1; i < n; i++)
            a += w[i] * x[i][j];
        out[j] = a;
        bad |= !(fabsf(a) <= FLT_MAX);
    }
    return bad;
}

typedef struct wsum_job {
    const float *const *x;
    const float *w;
    size_t n, len;
    float *out;
    bool acc, stream;
    unsigned parts;
    size_t bad[AGG_MAX_THREADS]; /* first non-finite index per part */
} wsum_job;

/* Part p of parts over [0, len), cut at whole lines. */
static void part_range(size_t len, unsigned parts, unsigned p, size_t *lo, size_t *hi)
{
    size_t lines = (len + LINE - 1) / LINE;
    *lo = lines * p / parts * LINE;
    *hi = lines * (p + 1) / parts * LINE;
    if (*lo > len)
        *lo = len;
    if (*hi > len)
        *hi = len;
}

static void wsum_part(void *arg, unsigned part)
{
    wsum_job *j = arg;
    size_t lo, hi;
    part_range(j->len, j->parts, part, &lo, &hi);
    bool bad = false;
    for (size_t g = 0; g < j->n; g += GROUP) {
        size_t n = j->n - g < GROUP ? j->n - g : GROUP;
        bad = wsum_pass(j->x + g, j->w + g, n, j->out, j->acc || g > 0, j->stream, lo, hi);
    }
    j->bad[part] = bad ? first_non_finite(j->out + lo, hi - lo) : SIZE_MAX;
    if (j->bad[part] != SIZE_MAX)
        j->bad[part] += lo;
}

unsigned agg_parts(agg_par par, size_t len, size_t inputs)
{
    size_t touched = len * (inputs + 1), parts = touched / AGG_PART_MIN_FLOATS;
    if (parts > par.threads)
        parts = par.threads;
    return parts ? (unsigned)parts : 1;
}

size_t agg_reduce_weighted(agg_par par, const float *const *x, const float *w, size_t n,
                           size_t len, float *out, bool accumulate)
{
    wsum_job j = {.x = x, .w = w, .n = n, .len = len, .out = out, .acc = accumulate,
                  .stream = len >= STREAM_MIN, .parts = agg_parts(par, len, n)};
    if (n == 0)
        return SIZE_MAX;
    agg_pool_run(par.pool, j.parts, wsum_part, &j);
    size_t bad = SIZE_MAX;
    for (unsigned p = 0; p < j.parts; p++)
        bad = j.bad[p] < bad ? j.bad[p] : bad;
    return bad;
}

/* NaN becomes +inf so it orders (min/max on NaN are not a total order). */
static void load_row(float *restrict dst, const float *restrict src, size_t b)
{
    for (size_t j = 0; j < b; j++)
        dst[j] = src[j] != src[j] ? INFINITY : src[j];
}

/* Both results are computed before either store: written store by store,
 * GCC vectorizes the loop only where it has a blend instruction (SSE4.1,
 * AVX), and the baseline x86-64 build ran TrimmedMean and Median 4x slower
 * (docs/DECISIONS.md). */
static void compare_exchange(float *restrict lo, float *restrict hi, size_t b)
{
    for (size_t j = 0; j < b; j++) {
        float a = lo[j], c = hi[j];
        float min = a < c ? a : c, max = a < c ? c : a;
        lo[j] = min;
        hi[j] = max;
    }
}

static void axpy1(float *restrict out, const float *restrict a, float wa, size_t n)
{
    for (size_t j = 0; j < n; j++)
        out[j] += wa * a[j];
}

/* Reads the answer off rows sorted ascending. */
static void finish_sorted(agg_kind kind, float *const *row, size_t n, size_t k, size_t b, float *out)
{
    if (kind == AGG_MEDIAN) {
        const float *m0 = row[(n - 1) / 2], *m1 = row[n / 2];
        for (size_t j = 0; j < b; j++)
            out[j] = 0.5f * (m0[j] + m1[j]);
        return;
    }
    float scale = 1.0f / (float)(n - 2 * k);
    for (size_t j = 0; j < b; j++)
        out[j] = row[k][j];
    for (size_t i = k + 1; i < n - k; i++)
        axpy1(out, row[i], 1.0f, b);
    for (size_t j = 0; j < b; j++)
        out[j] *= scale;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static int reduce_per_coordinate(agg_kind kind, const float *const *x, size_t n, size_t k,
                                 size_t len, float *out)
{
    float *col = malloc(n * sizeof *col);
    if (!col)
        return BB_ENOMEM;
    for (size_t j = 0; j < len; j++) {
        for (size_t i = 0; i < n; i++)
            col[i] = x[i][j] != x[i][j] ? INFINITY : x[i][j];
        qsort(col, n, sizeof *col, cmp_float);
        if (kind == AGG_MEDIAN) {
            out[j] = 0.5f * (col[(n - 1) / 2] + col[n / 2]);
        } else {
            double s = 0;
            for (size_t i = k; i < n - k; i++)
                s += col[i];
            out[j] = (float)(s / (double)(n - 2 * k));
        }
    }
    free(col);
    return BB_OK;
}

/* Batcher's odd-even merge sort network for the next power of two >= n,
 * minus the comparators that touch a row >= n (those rows would hold +inf
 * and never move). 19 comparators for n = 8, 543 for n = 64. */
static size_t batcher_network(size_t n, uint8_t (*net)[2], size_t cap)
{
    size_t m = 1, count = 0;
    while (m < n)
        m <<= 1;
    for (size_t p = 1; p < m; p <<= 1)
        for (size_t k = p; k >= 1; k >>= 1)
            for (size_t j = k % p; j + k < m; j += 2 * k)
                for (size_t i = 0; i < k && i + j + k < m; i++)
                    if ((i + j) / (2 * p) == (i + j + k) / (2 * p) && i + j + k < n &&
                        count < cap) {
                        net[count][0] = (uint8_t)(i + j);
                        net[count][1] = (uint8_t)(i + j + k);
                        count++;
                    }
    return count;
}

typedef struct sorted_job {
    agg_kind kind;
    const float *const *x;
    size_t n, k, len;
    float *out;
    const uint8_t (*net)[2];
    size_t n_net;
    unsigned parts;
    int rc[AGG_MAX_THREADS];
} sorted_job;

/* Tiles of TILE columns over the part's range (cut at whole tiles). */
static void sorted_part(void *arg, unsigned part)
{
    sorted_job *s = arg;
    size_t tiles = (s->len + TILE - 1) / TILE;
    size_t lo = tiles * part / s->parts * TILE, hi = tiles * (part + 1) / s->parts * TILE;
    hi = hi < s->len ? hi : s->len;
    size_t n = s->n;
    float *tile = aligned_alloc(64, n * TILE * sizeof *tile);
    s->rc[part] = tile ? BB_OK : BB_ENOMEM;
    if (!tile)
        return;
    float *row[SORT_NETWORK_MAX];
    for (size_t i = 0; i < n; i++)
        row[i] = tile + i * TILE;
    for (size_t j0 = lo; j0 < hi; j0 += TILE) {
        size_t b = hi - j0 < TILE ? hi - j0 : TILE;
        for (size_t i = 0; i < n; i++)
            load_row(row[i], s->x[i] + j0, b);
        for (size_t c = 0; c < s->n_net; c++)
            compare_exchange(row[s->net[c][0]], row[s->net[c][1]], b);
        finish_sorted(s->kind, row, n, s->k, b, s->out + j0);
    }
    free(tile);
}

int agg_reduce_sorted(agg_par par, agg_kind kind, const float *const *x, size_t n, size_t k,
                      size_t len, float *out)
{
    if (n > SORT_NETWORK_MAX)
        return reduce_per_coordinate(kind, x, n, k, len, out);
    static_assert(SORT_NETWORK_MAX <= 64, "the network table is sized for 64 rows");
    uint8_t net[544][2];
    sorted_job s = {.kind = kind, .x = x, .n = n, .k = k, .len = len, .out = out, .net = net,
                    .n_net = batcher_network(n, net, sizeof net / sizeof *net),
                    .parts = agg_parts(par, len, n)};
    agg_pool_run(par.pool, s.parts, sorted_part, &s);
    for (unsigned p = 0; p < s.parts; p++)
        if (s.rc[p])
            return s.rc[p];
    return BB_OK;
}
