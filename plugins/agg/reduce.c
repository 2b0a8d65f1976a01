/*
 * reduce.c — the aggregation kernels. Aggregation is memory-bandwidth
 * bound, so each kernel reads every contribution's bytes exactly once:
 * the output is produced block by block (a block of every contribution
 * fits in L1/L2), so the only DRAM traffic is one read of each input and
 * one write of the result.
 *
 *   weighted sum   out = sum_i w_i x_i, accumulated in the output block
 *                  (L1-resident) one contribution at a time.
 *   sorted         the block of each contribution is copied into a tile
 *                  (row = contribution), the rows are sorted column-wise
 *                  by Batcher's merge network (each comparator is an
 *                  elementwise min/max of two rows, which the compiler
 *                  vectorizes across the block), then the median or trimmed
 *                  mean is read off the sorted rows. Beyond SORT_NETWORK_MAX
 *                  contributions a per-coordinate sort takes over.
 */
#include <assert.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agg.h"

#define BLOCK 4096           /* floats per block: 16 KiB output, L1-sized */
#define TILE 256             /* floats per column tile of the sorted kernels */
#define SORT_NETWORK_MAX 64  /* contributions sorted by the network */

/* Non-finite test that vectorizes: |v| <= FLT_MAX is false for inf/NaN. */
static size_t first_non_finite(const float *restrict v, size_t n)
{
    int bad = 0;
    for (size_t j = 0; j < n; j++)
        bad |= !(fabsf(v[j]) <= FLT_MAX);
    if (!bad)
        return SIZE_MAX;
    for (size_t j = 0; j < n; j++)
        if (!(fabsf(v[j]) <= FLT_MAX))
            return j;
    return SIZE_MAX;
}

static void scale_into(float *restrict out, const float *restrict x, float w, size_t n)
{
    for (size_t j = 0; j < n; j++)
        out[j] = w * x[j];
}

static void axpy2(float *restrict out, const float *restrict a, float wa, const float *restrict b,
                  float wb, size_t n)
{
    for (size_t j = 0; j < n; j++)
        out[j] += wa * a[j] + wb * b[j];
}

static void axpy1(float *restrict out, const float *restrict a, float wa, size_t n)
{
    for (size_t j = 0; j < n; j++)
        out[j] += wa * a[j];
}

size_t agg_reduce_weighted(const float *const *x, const float *w, size_t n, size_t len, float *out)
{
    size_t bad = SIZE_MAX;
    for (size_t j0 = 0; j0 < len; j0 += BLOCK) {
        size_t b = len - j0 < BLOCK ? len - j0 : BLOCK;
        float *o = out + j0;
        scale_into(o, x[0] + j0, w[0], b);
        size_t i = 1;
        for (; i + 1 < n; i += 2)
            axpy2(o, x[i] + j0, w[i], x[i + 1] + j0, w[i + 1], b);
        if (i < n)
            axpy1(o, x[i] + j0, w[i], b);
        if (bad == SIZE_MAX) {
            size_t k = first_non_finite(o, b);
            if (k != SIZE_MAX)
                bad = j0 + k;
        }
    }
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

int agg_reduce_sorted(agg_kind kind, const float *const *x, size_t n, size_t k, size_t len,
                      float *out)
{
    if (n > SORT_NETWORK_MAX)
        return reduce_per_coordinate(kind, x, n, k, len, out);
    static_assert(SORT_NETWORK_MAX <= 64, "the network table is sized for 64 rows");
    uint8_t net[544][2];
    size_t n_net = batcher_network(n, net, sizeof net / sizeof *net);
    float *tile = aligned_alloc(64, n * TILE * sizeof *tile);
    if (!tile)
        return BB_ENOMEM;
    float *row[SORT_NETWORK_MAX];
    for (size_t i = 0; i < n; i++)
        row[i] = tile + i * TILE;
    for (size_t j0 = 0; j0 < len; j0 += TILE) {
        size_t b = len - j0 < TILE ? len - j0 : TILE;
        for (size_t i = 0; i < n; i++)
            load_row(row[i], x[i] + j0, b);
        for (size_t c = 0; c < n_net; c++)
            compare_exchange(row[net[c][0]], row[net[c][1]], b);
        finish_sorted(kind, row, n, k, b, out + j0);
    }
    free(tile);
    return BB_OK;
}
