/*
 * kmeans.c — Lloyd's k-means for ProductQuantization's codebooks: small
 * dimensions (a PQ sub-vector is a few floats) and k <= 256, so plain loops
 * the compiler vectorizes beat a GEMM formulation. Deterministic for a seed:
 * the initial centroids are distinct points drawn by a seeded shuffle
 * (points repeat when there are fewer points than centroids), ties go to
 * the lowest centroid index, and a centroid left without points moves to
 * the point farthest from its own centroid, so none stays dead.
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "plugins/common/plugin_rng.h"

uint32_t codec_nearest(const float *v, const float *centroids, uint32_t k, uint32_t d,
                       float *dist)
{
    uint32_t best = 0;
    float bd = FLT_MAX;
    for (uint32_t c = 0; c < k; c++) {
        const float *q = centroids + (size_t)c * d;
        float s = 0;
        for (uint32_t j = 0; j < d; j++) {
            float t = v[j] - q[j];
            s += t * t;
        }
        if (s < bd) {
            bd = s;
            best = c;
        }
    }
    if (dist)
        *dist = bd;
    return best;
}

static void init_centroids(const float *x, size_t n, size_t stride, uint32_t d, uint32_t k,
                           uint64_t seed, uint32_t *order, float *centroids)
{
    bbp_rng rng;
    bbp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++)
        order[i] = (uint32_t)i;
    bbp_rng_shuffle_u32(&rng, order, n);
    for (uint32_t c = 0; c < k; c++)
        memcpy(centroids + (size_t)c * d, x + order[c % n] * stride, d * sizeof *centroids);
}

/* Centroids that lost every point take the points farthest from their own
 * centroids, one each. */
static void reseed_empty(const float *x, size_t n, size_t stride, uint32_t d, uint32_t k,
                         const uint32_t *count, float *dist, float *centroids)
{
    for (uint32_t c = 0; c < k; c++) {
        if (count[c])
            continue;
        size_t far = 0;
        for (size_t i = 1; i < n; i++)
            if (dist[i] > dist[far])
                far = i;
        if (dist[far] <= 0)
            return; /* every point sits on a centroid: nothing to split */
        memcpy(centroids + (size_t)c * d, x + far * stride, d * sizeof *centroids);
        dist[far] = 0;
    }
}

int codec_kmeans(const float *x, size_t n, size_t stride, uint32_t d, uint32_t k,
                 uint32_t iters, uint64_t seed, float *centroids)
{
    uint32_t *assign = malloc(n * sizeof *assign), *count = calloc(k, sizeof *count);
    float *dist = malloc(n * sizeof *dist);
    double *sum = malloc((size_t)k * d * sizeof *sum); /* float sums drift over many points */
    int rc = assign && count && dist && sum ? BB_OK : BB_ENOMEM;
    if (!rc)
        init_centroids(x, n, stride, d, k, seed, assign, centroids);
    for (uint32_t it = 0; !rc && it < iters; it++) {
        memset(count, 0, k * sizeof *count);
        memset(sum, 0, (size_t)k * d * sizeof *sum);
        for (size_t i = 0; i < n; i++) {
            const float *p = x + i * stride;
            uint32_t c = assign[i] = codec_nearest(p, centroids, k, d, &dist[i]);
            count[c]++;
            for (uint32_t j = 0; j < d; j++)
                sum[(size_t)c * d + j] += p[j];
        }
        for (uint32_t c = 0; c < k; c++)
            for (uint32_t j = 0; count[c] && j < d; j++)
                centroids[(size_t)c * d + j] = (float)(sum[(size_t)c * d + j] / count[c]);
        reseed_empty(x, n, stride, d, k, count, dist, centroids);
    }
    free(assign);
    free(count);
    free(dist);
    free(sum);
    return rc;
}
