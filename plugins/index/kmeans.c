/*
 * kmeans.c — Lloyd's k-means for IvfPq's coarse quantizer and its product
 * quantizer codebooks.
 *
 * Assignment is the costly part (n x k distances per iteration), so it is
 * blocked matrix products: for a block of rows, cblas_sgemm gives x.c for
 * every centroid and the distance is ||c||^2 - 2 x.c (the row's own norm
 * does not change which centroid wins). Initial centroids are k distinct
 * rows drawn from the seed; an emptied cluster takes half of the largest
 * one (its centroid nudged apart), as FAISS does, so k clusters survive.
 * Deterministic for a seed (given the same BLAS).
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "index.h"

#define ROW_BLOCK 1024
#define SPLIT_EPS (1.0f / 1024.0f)

int ix_assign(const float *x, size_t n, const float *c, uint32_t k, uint32_t dim, bool by_ip,
              uint32_t *out, float *dist_out)
{
    size_t rb = n < ROW_BLOCK ? n : ROW_BLOCK;
    float *ip = malloc((rb ? rb : 1) * (size_t)k * sizeof *ip);
    float *cn = malloc((size_t)k * sizeof *cn);
    if (!ip || !cn) {
        free(ip);
        free(cn);
        return BB_ENOMEM;
    }
    for (uint32_t j = 0; j < k; j++)
        cn[j] = by_ip ? 0.0f : ix_dot(c + (size_t)j * dim, c + (size_t)j * dim, dim);
    for (size_t r0 = 0; r0 < n; r0 += rb) {
        size_t nr = n - r0 < rb ? n - r0 : rb;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nr, (int)k, (int)dim, 1.0f,
                    x + r0 * dim, (int)dim, c, (int)dim, 0.0f, ip, (int)k);
        for (size_t i = 0; i < nr; i++) {
            const float *row = ip + i * k;
            float best = INFINITY;
            uint32_t arg = 0;
            for (uint32_t j = 0; j < k; j++) {
                float d = by_ip ? -row[j] : cn[j] - 2.0f * row[j];
                if (d < best) {
                    best = d;
                    arg = j;
                }
            }
            out[r0 + i] = arg;
            if (dist_out)
                dist_out[r0 + i] = best;
        }
    }
    free(ip);
    free(cn);
    return BB_OK;
}

/* k distinct rows of x, drawn from the seed, as the first centroids. */
static int init_centroids(const float *x, size_t n, uint32_t dim, uint32_t k, bbp_rng *rng,
                          float *out)
{
    uint32_t *perm = malloc(n * sizeof *perm);
    if (!perm)
        return BB_ENOMEM;
    for (size_t i = 0; i < n; i++)
        perm[i] = (uint32_t)i;
    for (uint32_t j = 0; j < k; j++) { /* partial Fisher-Yates */
        size_t r = j + (size_t)bbp_rng_below(rng, n - j);
        uint32_t t = perm[j];
        perm[j] = perm[r];
        perm[r] = t;
        memcpy(out + (size_t)j * dim, x + (size_t)perm[j] * dim, dim * sizeof(float));
    }
    free(perm);
    return BB_OK;
}

/* Give every empty cluster half of the largest one. */
static void split_empty(float *c, uint32_t dim, uint32_t k, size_t *count)
{
    for (uint32_t j = 0; j < k; j++) {
        if (count[j])
            continue;
        uint32_t big = 0;
        for (uint32_t i = 1; i < k; i++)
            if (count[i] > count[big])
                big = i;
        if (count[big] < 2)
            return; /* nothing left to split: duplicates in the data */
        float *cj = c + (size_t)j * dim, *cb = c + (size_t)big * dim;
        for (uint32_t d = 0; d < dim; d++) {
            float sign = (d % 2) ? 1.0f : -1.0f;
            cj[d] = cb[d] * (1.0f + sign * SPLIT_EPS);
            cb[d] = cb[d] * (1.0f - sign * SPLIT_EPS);
        }
        count[j] = count[big] / 2;
        count[big] -= count[j];
    }
}

int ix_kmeans(const float *x, size_t n, uint32_t dim, uint32_t k, uint32_t iters, uint64_t seed,
              float *out, const atomic_bool *stop)
{
    bbp_rng rng;
    bbp_rng_seed(&rng, seed);
    uint32_t *assign = malloc(n * sizeof *assign);
    double *sum = malloc((size_t)k * dim * sizeof *sum);
    size_t *count = malloc((size_t)k * sizeof *count);
    int rc = assign && sum && count ? init_centroids(x, n, dim, k, &rng, out) : BB_ENOMEM;
    for (uint32_t it = 0; !rc && it < iters; it++) {
        if (stop && atomic_load(stop)) {
            rc = BB_ESTATE;
            break;
        }
        if ((rc = ix_assign(x, n, out, k, dim, false, assign, NULL)))
            break;
        memset(sum, 0, (size_t)k * dim * sizeof *sum);
        memset(count, 0, (size_t)k * sizeof *count);
        for (size_t i = 0; i < n; i++) {
            double *s = sum + (size_t)assign[i] * dim;
            const float *xi = x + i * dim;
            for (uint32_t d = 0; d < dim; d++)
                s[d] += xi[d];
            count[assign[i]]++;
        }
        for (uint32_t j = 0; j < k; j++)
            for (uint32_t d = 0; count[j] && d < dim; d++)
                out[(size_t)j * dim + d] = (float)(sum[(size_t)j * dim + d] / (double)count[j]);
        split_empty(out, dim, k, count);
    }
    free(assign);
    free(sum);
    free(count);
    return rc;
}
