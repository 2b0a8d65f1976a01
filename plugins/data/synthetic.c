/*
 * synthetic.c — data::Synthetic's generator: Gaussian blobs, a
 * classification table of any size without a file (scale tests, demos).
 *
 * Class c has a center drawn uniformly from [-center_box, center_box]^d;
 * row i belongs to class i mod classes (balanced) and is its center plus
 * N(0, cluster_std^2) noise per feature. Everything derives from
 * generator_seed, so every node generating with the same config holds the
 * same table (and the shards of the pipeline line up across clients).
 */
#include <stdlib.h>
#include <string.h>

#include "data.h"

#define MAX_CELLS (UINT64_C(1) << 32) /* 16 GiB of features: refuse beyond */

int data_synthetic_generate(const bbp_config *cfg, data_table *t, bb_error *err)
{
    int64_t rows = 0, cols = 0, classes = 0, seed = 0;
    double std = 0, box = 0;
    int rc = bbp_config_int(cfg, "samples", 1, INT64_C(1) << 32, &rows, err);
    if (!rc)
        rc = bbp_config_int(cfg, "features", 1, 1 << 20, &cols, err);
    if (!rc)
        rc = bbp_config_int(cfg, "classes", 1, DATA_MAX_LABEL + 1, &classes, err);
    if (!rc)
        rc = bbp_config_double(cfg, "cluster_std", 0, 1e6, &std, err);
    if (!rc)
        rc = bbp_config_double(cfg, "center_box", 0, 1e6, &box, err);
    if (!rc)
        rc = bbp_config_int(cfg, "generator_seed", 0, INT64_MAX, &seed, err);
    if (rc)
        return rc;
    if ((uint64_t)rows * (uint64_t)cols > MAX_CELLS)
        return bb_error_set(err, BB_ELIMIT, "%s: %lld x %lld features exceed the %llu-value limit",
                            cfg->who, (long long)rows, (long long)cols,
                            (unsigned long long)MAX_CELLS);
    bbp_rng rng;
    bbp_rng_seed(&rng, (uint64_t)seed);
    float *centers = malloc((size_t)classes * (size_t)cols * sizeof *centers);
    t->x = malloc((size_t)rows * (size_t)cols * sizeof *t->x);
    t->y = malloc((size_t)rows * sizeof *t->y);
    if (!centers || !t->x || !t->y) {
        free(centers);
        data_table_free(t);
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory for %lld rows", cfg->who,
                            (long long)rows);
    }
    for (size_t k = 0; k < (size_t)classes * (size_t)cols; k++)
        centers[k] = (float)((2 * bbp_rng_uniform(&rng) - 1) * box);
    for (size_t i = 0; i < (size_t)rows; i++) {
        size_t c = i % (size_t)classes;
        float *row = t->x + i * (size_t)cols;
        for (size_t j = 0; j < (size_t)cols; j++)
            row[j] = centers[c * (size_t)cols + j] + (float)(std * bbp_rng_normal(&rng));
        t->y[i] = (float)c;
    }
    free(centers);
    t->rows = (size_t)rows;
    t->cols = (size_t)cols;
    return BB_OK;
}
