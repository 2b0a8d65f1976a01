/*
 * data.h — internal interface of the data plugin (data::Csv, data::Idx,
 * data::Synthetic).
 *
 * Every type builds a table (rows of f32 features plus an optional f32
 * label) — or take it prepared from the host's shared cache, when another
 * node of the host read the same table with the same split (data.c) — then
 * run the same pipeline (split.c):
 *   held-out split  the fraction `holdout` of the rows, drawn with
 *                   `split_seed`, is set aside — every node that reads the
 *                   same file with the same seed sets aside the same rows;
 *   normalization   statistics from the training rows only, applied to all;
 *   part            which rows this source serves: "train", "holdout", "all";
 *   shard           shard_index of shard_count, IID or non-IID by label
 *                   (Dirichlet(alpha) label skew, or classes per client), drawn with
 *                   `partition_seed` so the shards of all clients are
 *                   disjoint and cover the part.
 * The result is a source (source.c): NextBatch cycles epochs over its rows
 * (reshuffled each epoch from `seed`), Reset starts a new epoch, EvalSet
 * hands out the evaluation rows (the held-out rows when there are any, else
 * the source's own rows) as one cached tensor pair.
 */
#ifndef BB_DATA_INTERNAL_H
#define BB_DATA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bb/plugin.h>

#include "plugins/common/plugin_config.h"
#include "plugins/common/plugin_rng.h"

#define DATA_MAX_LABEL 65535 /* largest class id the by-label partitions accept */

/* The parsed / generated table. */
typedef struct data_table {
    size_t rows, cols;   /* cols = feature count */
    float *x;            /* rows x cols */
    float *y;            /* rows labels, or NULL (unsupervised) */
} data_table;

void data_table_free(data_table *t);

typedef enum data_part { PART_TRAIN, PART_HOLDOUT, PART_ALL } data_part;
typedef enum data_norm { NORM_NONE, NORM_MINMAX, NORM_STANDARDIZE } data_norm;
typedef enum data_partition { PARTITION_IID, PARTITION_DIRICHLET, PARTITION_CLASSES } data_partition;

typedef struct data_options {
    int64_t batch_size;
    bool shuffle;
    uint64_t seed;            /* shuffle seed */
    data_norm norm;
    double holdout;
    data_part part;
    uint64_t split_seed;
    int64_t shard_index, shard_count;
    data_partition partition;
    double dirichlet_alpha;
    int64_t dirichlet_min_rows;
    int64_t classes_per_client;
    uint64_t partition_seed;
    uint32_t sample_nd;       /* 0: flat rows [b, d]; else [b, sample_dims...] */
    int64_t sample_dims[BB_MAX_DIMS - 1];
} data_options;

/* The runtime state of one source. */
typedef struct data_source {
    const char *type_name;
    char who[160];            /* "data::Csv at slot 'data' (digits.csv.gz)" */
    size_t n, d;              /* rows served, features */
    uint32_t sample_nd;       /* a batch is [b, sample_dims...], or [b, d] when 0 */
    int64_t sample_dims[BB_MAX_DIMS - 1];
    bb_value *x, *y;          /* [n, d] and [n] (y NULL when unsupervised) */
    bb_value *eval_x, *eval_y;/* the evaluation rows (may share x / y) */
    int64_t batch_size;
    bool shuffle;
    bbp_rng rng;
    uint32_t *order;          /* this epoch's row order */
    size_t cursor;            /* next position in order */
    uint64_t epoch;
} data_source;

/* The config keys both types take (expanded into each type's table). */
#define DATA_COMMON_DECLS                                                                     \
    {"batch_size", "int", "32", "rows per NextBatch (the last batch of an epoch may be short)"}, \
    {"shuffle", "bool", "true", "reshuffle the rows at the start of every epoch"},            \
    {"seed", "int", "null", "shuffle seed (default: the seed the host gives the slot)"},      \
    {"normalization", "string", "\"none\"",                                                 \
     "\"none\", \"min-max\" (to [0, 1]) or \"standardize\" (zero mean, unit variance); "     \
     "statistics come from the training rows only"},                                          \
    {"holdout", "float", "0",                                                                 \
     "fraction of the rows set aside as the held-out evaluation set (EvalSet); the same "     \
     "file and split_seed give every node the same held-out rows"},                           \
    {"part", "string", "\"train\"",                                                          \
     "the rows NextBatch serves: \"train\" (all but the held-out rows), \"holdout\" or "      \
     "\"all\""},                                                                               \
    {"split_seed", "int", "0", "seed of the held-out draw (keep it equal on every node)"},    \
    {"shard_index", "int", "0", "this node's shard, 0 <= shard_index < shard_count"},         \
    {"shard_count", "int", "1", "how many shards the part is cut into (one per client)"},     \
    {"partition", "string", "\"iid\"",                                                       \
     "how rows go to shards: \"iid\" (uniformly at random), \"dirichlet\" (per class, "     \
     "shares drawn from Dirichlet(dirichlet_alpha)) or \"classes\" (sorted by label, cut "    \
     "into shard_count * classes_per_client pieces, classes_per_client pieces per shard)"},   \
    {"dirichlet_alpha", "float", "0.5", "concentration of the Dirichlet partition (small = "  \
                                        "more skewed)"},                                      \
    {"dirichlet_min_rows", "int", "1",                                                        \
     "the Dirichlet partition draws again (at most 100 times) until every shard holds at "    \
     "least this many rows"},                                                                 \
    {"classes_per_client", "int", "2", "label pieces per shard of the \"classes\" partition"}, \
    {"partition_seed", "int", "0", "seed of the shard draw (keep it equal on every client)"},   \
    {"sample_shape", "array", "null",                                                         \
     "the shape of one sample in NextBatch and EvalSet, e.g. [1, 28, 28] for a CNN's NCHW "   \
     "input (the product must be the feature count); null: flat rows [batch, features]"}

#define DATA_COMMON_DECL_COUNT 15

/* Options shared by both types, read from the config. */
int data_options_read(const bbp_config *cfg, uint64_t host_seed, data_options *o, bb_error *err);

/* ---- split.c: table + options -> prepared table -> source rows -------------- */
/* The prepared table of t (its memory is taken, t is emptied): every row
 * normalized, the labels and the held-out rows, as one new Composite value
 * that nodes reading the same table with the same holdout, split_seed and
 * normalization share (data.c keys it for ctx->shared_put). */
int data_prepare(const data_source *s, data_table *t, const data_options *o, bb_value **out,
                 bb_error *err);
/* The node's own rows (part and shard) from a prepared table (borrowed;
 * s keeps references to its evaluation tensors). */
int data_source_build(data_source *s, const bb_value *prepared, const data_options *o,
                      bb_error *err);

/* ---- source.c: the ops ---------------------------------------------------------- */
void data_source_free(data_source *s);
bb_dispatch_result data_source_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                        bb_value **outputs, bb_error *err);
int data_source_snapshot(void *inst, uint8_t **out, size_t *out_len, bb_error *err);
int data_source_restore(void *inst, const uint8_t *data, size_t len, bb_error *err);
extern const bb_opset_decl DATA_OPSETS[];
extern const uint32_t DATA_N_OPSETS;

/* ---- csv.c / synthetic.c ------------------------------------------------------ */
/* Reads the config's path (gzip detected by its magic bytes) into t. */
int data_csv_load(const bbp_config *cfg, data_table *t, bb_error *err);
/* Parse CSV text already in memory (file names the input in messages). */
int data_csv_parse(const char *file, const char *text, size_t len, const bbp_config *cfg,
                   data_table *t, bb_error *err);
int data_synthetic_generate(const bbp_config *cfg, data_table *t, bb_error *err);

/* ---- idx.c -------------------------------------------------------------------------- */
#define DATA_IDX_MAX_DIMS 16
/* What an IDX header says (dims[0] samples of `features` values each). */
typedef struct data_idx_info {
    uint8_t type;             /* IDX value type byte (0x08 u8 ... 0x0e f64) */
    uint32_t ndims;
    uint32_t dims[DATA_IDX_MAX_DIMS];
    size_t elem_size, header_bytes, data_bytes, rows, features;
} data_idx_info;
/* Checks the header at the start of p[0..len) (file names it in messages):
 * magic, value type, dimensions, and the data size against max_bytes. */
int data_idx_header(const char *file, const uint8_t *p, size_t len, uint64_t max_bytes,
                    data_idx_info *h, bb_error *err);
/* Reads the config's path (samples) and label_path (labels, optional),
 * plain or gzip, into t. */
int data_idx_load(const bbp_config *cfg, data_table *t, bb_error *err);

#endif
