/*
 * data.c — the data plugin: data::Csv (a numeric CSV file, plain or gzip),
 * data::Idx (IDX files: MNIST, Fashion-MNIST) and data::Synthetic (Gaussian
 * blobs), three DataSources over one pipeline
 * (data.h) and one set of ops (source.c). The table is read or generated at
 * create, so a bad file fails the install with its name, line and column;
 * a host that runs many nodes (bbsim) shares one prepared copy of it among
 * them through ctx->shared_get / shared_put, keyed by what determines it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "plugins/common/plugin_type.h"

#define MAX_SEED 9007199254740992.0 /* 2^53: exact in a JSON number */

static const bb_config_decl CSV_CONFIG[] = {
    {"path", "string", NULL, "the CSV file (gzip-compressed files are detected and read too)"},
    {"label_column", "int", "-1",
     "column holding the label: a 0-based index (negative counts from the end), a column "
     "name when header is true, or null for an unsupervised source"},
    {"header", "bool", "false", "the first line (after skip_rows) names the columns"},
    {"skip_rows", "int", "0", "lines to skip before the header or the data"},
    {"delimiter", "string", "\",\"", "the one-character field separator"},
    {"max_bytes", "int", "1073741824", "refuse files larger than this once decompressed"},
    DATA_COMMON_DECLS,
};

static const bb_config_decl IDX_CONFIG[] = {
    {"path", "string", NULL,
     "the IDX file of samples (e.g. train-images-idx3-ubyte.gz; gzip is detected): the first "
     "dimension counts the samples, the others are flattened into the features"},
    {"label_path", "string", "null",
     "the IDX file of labels, one value per sample (e.g. train-labels-idx1-ubyte.gz); null "
     "for an unsupervised source"},
    {"scale", "float", "null",
     "every sample value is multiplied by this as it is read; null: 1/255 for unsigned-byte "
     "files (pixels to [0, 1]), else 1. Unlike normalization it needs no statistics, so a "
     "test file and a training file scale alike"},
    {"max_bytes", "int", "1073741824", "refuse files whose data is larger than this once "
                                       "decompressed"},
    DATA_COMMON_DECLS,
};

static const bb_config_decl SYNTHETIC_CONFIG[] = {
    {"samples", "int", "1000", "rows generated"},
    {"features", "int", "2", "features per row"},
    {"classes", "int", "2", "blobs (classes); row i has label i mod classes"},
    {"cluster_std", "float", "1.0", "standard deviation of each blob"},
    {"center_box", "float", "10.0", "blob centers are uniform in [-center_box, center_box]"},
    {"generator_seed", "int", "0", "seed of the data itself (equal on every node)"},
    DATA_COMMON_DECLS,
};

_Static_assert(sizeof CSV_CONFIG / sizeof *CSV_CONFIG == 6 + DATA_COMMON_DECL_COUNT,
               "DATA_COMMON_DECL_COUNT is out of date");

static int read_seed(const bbp_config *cfg, const char *key, uint64_t fallback, uint64_t *out,
                     bb_error *err)
{
    double v = 0;
    bool present = false;
    int rc = bbp_config_number(cfg, key, true, 0, MAX_SEED, &v, &present, err);
    *out = present ? (uint64_t)v : fallback;
    return rc;
}

static int read_sample_shape(const bbp_config *cfg, data_options *o, bb_error *err)
{
    cJSON *owned;
    const cJSON *v = bbp_config_get(cfg, "sample_shape", &owned);
    int rc = BB_OK, n = v ? (cJSON_IsArray(v) ? cJSON_GetArraySize(v) : -1) : 0;
    if (n < 0 || n >= BB_MAX_DIMS)
        rc = bb_error_set(err, BB_ECONFIG,
                          "%s: config key 'sample_shape' must be null or an array of 1 to %d "
                          "dimensions",
                          cfg->who, BB_MAX_DIMS - 1);
    for (int i = 0; !rc && i < n; i++) {
        const cJSON *e = cJSON_GetArrayItem(v, i);
        if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < 1 ||
            e->valuedouble > (double)(1u << 30))
            rc = bb_error_set(err, BB_ECONFIG, "%s: sample_shape[%d] must be a whole number in "
                              "[1, 2^30]", cfg->who, i);
        else
            o->sample_dims[i] = (int64_t)e->valuedouble;
    }
    o->sample_nd = rc ? 0 : (uint32_t)n;
    cJSON_Delete(owned);
    return rc;
}

int data_options_read(const bbp_config *cfg, uint64_t host_seed, data_options *o, bb_error *err)
{
    static const char *const NORM[] = {"none", "min-max", "standardize"};
    static const char *const PART[] = {"train", "holdout", "all"};
    static const char *const PARTITION[] = {"iid", "dirichlet", "classes"};
    int norm = 0, part = 0, partition = 0;
    memset(o, 0, sizeof *o);
    int rc = bbp_config_int(cfg, "batch_size", 1, 1 << 24, &o->batch_size, err);
    if (!rc)
        rc = bbp_config_bool(cfg, "shuffle", &o->shuffle, err);
    if (!rc)
        rc = read_seed(cfg, "seed", host_seed, &o->seed, err);
    if (!rc)
        rc = bbp_config_enum(cfg, "normalization", NORM, 3, &norm, err);
    if (!rc)
        rc = bbp_config_double(cfg, "holdout", 0, 0.95, &o->holdout, err);
    if (!rc)
        rc = bbp_config_enum(cfg, "part", PART, 3, &part, err);
    if (!rc)
        rc = read_seed(cfg, "split_seed", 0, &o->split_seed, err);
    if (!rc)
        rc = bbp_config_int(cfg, "shard_count", 1, 1 << 20, &o->shard_count, err);
    if (!rc)
        rc = bbp_config_int(cfg, "shard_index", 0, o->shard_count - 1, &o->shard_index, err);
    if (!rc)
        rc = bbp_config_enum(cfg, "partition", PARTITION, 3, &partition, err);
    if (!rc)
        rc = bbp_config_double(cfg, "dirichlet_alpha", 1e-6, 1e6, &o->dirichlet_alpha, err);
    if (!rc)
        rc = bbp_config_int(cfg, "dirichlet_min_rows", 1, 1 << 30, &o->dirichlet_min_rows, err);
    if (!rc)
        rc = bbp_config_int(cfg, "classes_per_client", 1, 1 << 16, &o->classes_per_client, err);
    if (!rc)
        rc = read_seed(cfg, "partition_seed", 0, &o->partition_seed, err);
    if (!rc)
        rc = read_sample_shape(cfg, o, err);
    o->norm = (data_norm)norm;
    o->part = (data_part)part;
    o->partition = (data_partition)partition;
    return rc;
}

typedef int (*table_fn)(const bbp_config *cfg, data_table *t, bb_error *err);

/* What makes two nodes' prepared tables equal: the type, its own keys (the
 * file or the generator: the decls before the common ones), the held-out
 * split and the normalization — never the shard, the shuffle or the batch. */
static int prepared_key(const bbp_config *cfg, const char *type_name, char *key, size_t cap,
                        bb_error *err)
{
    static const char *const SPLIT_KEYS[] = {"holdout", "split_seed", "normalization"};
    uint32_t n_own = cfg->n_decls - DATA_COMMON_DECL_COUNT;
    size_t len = (size_t)snprintf(key, cap, "bb-data.prepared/1|%s", type_name);
    for (uint32_t i = 0; i < n_own + 3 && len < cap; i++) {
        const char *k = i < n_own ? cfg->decls[i].key : SPLIT_KEYS[i - n_own];
        cJSON *owned;
        const cJSON *v = bbp_config_get(cfg, k, &owned);
        char *text = v ? cJSON_PrintUnformatted(v) : NULL;
        len += (size_t)snprintf(key + len, cap - len, "|%s=%s", k, text ? text : "null");
        cJSON_free(text);
        cJSON_Delete(owned);
    }
    if (len >= cap)
        return bb_error_set(err, BB_ELIMIT, "%s: its table's settings exceed %zu bytes", cfg->who,
                            cap - 1);
    return BB_OK;
}

/* The prepared table: the host's shared copy when it has one (another node
 * read the same table), else made here and offered to the host. */
static int prepared_table(const bb_create_args *args, const bbp_config *cfg,
                          const data_source *s, const data_options *o, table_fn make_table,
                          bb_value **out, bb_error *err)
{
    char key[BB_SHARED_KEY_MAX + 1];
    bb_ctx *ctx = args->ctx;
    bool shared = ctx && BB_CTX_HAS(ctx, shared_put);
    int rc = shared ? prepared_key(cfg, s->type_name, key, sizeof key, err) : BB_OK;
    if (rc || (shared && (*out = ctx->api->shared_get(ctx, key))))
        return rc;
    data_table t = {0};
    bb_value *mine = NULL;
    rc = make_table(cfg, &t, err);
    if (!rc)
        rc = data_prepare(s, &t, o, &mine, err);
    data_table_free(&t);
    if (rc || !shared) {
        *out = mine;
        return rc;
    }
    *out = ctx->api->shared_put(ctx, key, mine);
    bb_value_unref(mine);
    return *out ? BB_OK : bb_error_set(err, BB_ENOMEM, "%s: out of memory", s->who);
}

static int create_source(const bb_create_args *args, const char *type_name,
                         const bb_config_decl *decls, uint32_t n_decls, table_fn make_table,
                         void **out, bb_error *err)
{
    bbp_config cfg;
    int rc = bbp_config_load(&cfg, args, type_name, decls, n_decls, err);
    if (rc)
        return rc;
    data_source *s = calloc(1, sizeof *s);
    data_options o;
    bb_value *prepared = NULL;
    if (!s) {
        bbp_config_free(&cfg);
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", type_name);
    }
    s->type_name = type_name;
    char path[256] = "";
    if (bbp_config_decl(&cfg, "path"))
        bbp_config_string(&cfg, "path", path, sizeof path, NULL);
    int w = snprintf(s->who, sizeof s->who, "%s", cfg.who);
    if (path[0] && w > 0 && (size_t)w < sizeof s->who)
        snprintf(s->who + w, sizeof s->who - (size_t)w, " (%.*s)", 100, path);
    rc = data_options_read(&cfg, args->seed, &o, err);
    if (!rc)
        rc = prepared_table(args, &cfg, s, &o, make_table, &prepared, err);
    bbp_config_free(&cfg);
    if (!rc)
        rc = data_source_build(s, prepared, &o, err);
    bb_value_unref(prepared);
    if (rc) {
        data_source_free(s);
        return rc;
    }
    s->batch_size = o.batch_size;
    s->shuffle = o.shuffle;
    bbp_rng_seed(&s->rng, o.seed);
    s->cursor = s->n; /* the first NextBatch opens epoch 1 */
    s->epoch = 0;
    for (size_t i = 0; i < s->n; i++) /* a snapshot before that holds a valid order */
        s->order[i] = (uint32_t)i;
    *out = s;
    return BB_OK;
}

static int csv_create(const bb_create_args *args, void **out, bb_error *err)
{
    return create_source(args, "data::Csv", CSV_CONFIG, sizeof CSV_CONFIG / sizeof *CSV_CONFIG,
                         data_csv_load, out, err);
}

static int idx_create(const bb_create_args *args, void **out, bb_error *err)
{
    return create_source(args, "data::Idx", IDX_CONFIG, sizeof IDX_CONFIG / sizeof *IDX_CONFIG,
                         data_idx_load, out, err);
}

static int synthetic_create(const bb_create_args *args, void **out, bb_error *err)
{
    return create_source(args, "data::Synthetic", SYNTHETIC_CONFIG,
                         sizeof SYNTHETIC_CONFIG / sizeof *SYNTHETIC_CONFIG,
                         data_synthetic_generate, out, err);
}

static void source_destroy(void *inst) { data_source_free(inst); }

#define DATA_TYPE(sym, name, docstr, createfn, decls)                                  \
    static const bb_component_type sym = {                                             \
        BBP_TYPE_ABI,                                                                  \
        .type_name = name,                                                             \
        .role = BB_ROLE_DATA_SOURCE,                                                   \
        .doc = docstr,                                                                 \
        .opsets = DATA_OPSETS,                                                         \
        .n_opsets = 2,                                                                 \
        .config = decls,                                                               \
        .n_config = sizeof decls / sizeof *decls,                                      \
        .create = createfn,                                                            \
        .destroy = source_destroy,                                                     \
        .dispatch = data_source_dispatch,                                              \
        .snapshot = data_source_snapshot,                                              \
        .restore = data_source_restore,                                                \
    }

DATA_TYPE(CSV, "data::Csv",
          "a numeric CSV file (plain or gzip) of features and a label column, with held-out "
          "split, normalization, shuffling, batching and IID / non-IID sharding",
          csv_create, CSV_CONFIG);
DATA_TYPE(IDX, "data::Idx",
          "IDX files (MNIST, Fashion-MNIST; plain or gzip): samples and labels, with the same "
          "split, normalization, batching and sharding as data::Csv",
          idx_create, IDX_CONFIG);
DATA_TYPE(SYNTHETIC, "data::Synthetic",
          "deterministic Gaussian blobs of any size (classification without a file), with the "
          "same split, normalization, batching and sharding as data::Csv",
          synthetic_create, SYNTHETIC_CONFIG);

static const bb_component_type *const TYPES[] = {&CSV, &IDX, &SYNTHETIC};

BBP_PLUGIN_ENTRY("data", TYPES)
