/*
 * source.c — the ops of a data source, shared by data::Csv and
 * data::Synthetic (the rows were prepared at create, split.c).
 *
 * ai.bytesandbrains.role.data_loader:
 *   NextBatch() -> (batch [b, d] f32, labels [b] f32; [0] when unsupervised)
 *       (batch [b, sample_shape...] when sample_shape is set)
 *       b = batch_size, shorter for the last batch of an epoch, so an epoch
 *       is exactly n rows; after the last batch a new epoch starts
 *       (reshuffled when shuffle is on).
 *   Reset(trigger) -> trigger   ends the current epoch: the next batch is
 *       the first of a new (reshuffled) epoch.
 *   OnDataLoaded() -> trigger   the data is loaded (the file was parsed at
 *       create, so this answers at once).
 * bb-data.DataSource.atomic (what nn::Mlp asks a source for):
 *   NumSamples() -> U64         rows per epoch
 *   EvalSet() -> (x [m, d], y [m])  the evaluation rows: the held-out rows
 *       when holdout > 0, else this source's own rows. Cached, shared.
 *
 * All ops are cheap and run inline on the engine thread.
 */
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "bb/bytes.h"

void data_source_free(data_source *s)
{
    bb_value_unref(s->x);
    bb_value_unref(s->y);
    bb_value_unref(s->eval_x);
    bb_value_unref(s->eval_y);
    free(s->order);
    free(s);
}

static void new_epoch(data_source *s)
{
    for (size_t i = 0; i < s->n; i++)
        s->order[i] = (uint32_t)i;
    if (s->shuffle)
        bbp_rng_shuffle_u32(&s->rng, s->order, s->n);
    s->cursor = 0;
    s->epoch++;
}

static int next_batch(data_source *s, uint32_t n_out, bb_value **out, bb_error *err)
{
    if (s->cursor >= s->n)
        new_epoch(s);
    size_t b = s->n - s->cursor;
    b = b < (size_t)s->batch_size ? b : (size_t)s->batch_size;
    int64_t dx[BB_MAX_DIMS] = {(int64_t)b, (int64_t)s->d}, dy = s->y ? (int64_t)b : 0;
    if (s->sample_nd)
        memcpy(dx + 1, s->sample_dims, s->sample_nd * sizeof *dx);
    bb_value *x = bb_value_tensor_new(BB_DT_FLOAT, s->sample_nd ? 1 + s->sample_nd : 2, dx);
    bb_value *y = n_out > 1 ? bb_value_tensor_new(BB_DT_FLOAT, 1, &dy) : NULL;
    if (!x || (n_out > 1 && !y)) {
        bb_value_unref(x);
        bb_value_unref(y);
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", s->who);
    }
    const float *sx = bb_tensor_f32(s->x);
    float *px = bb_tensor_f32(x);
    for (size_t k = 0; k < b; k++) {
        size_t row = s->order[s->cursor + k];
        memcpy(px + k * s->d, sx + row * s->d, s->d * sizeof *px);
        if (y && s->y)
            bb_tensor_f32(y)[k] = bb_tensor_f32(s->y)[row];
    }
    s->cursor += b;
    out[0] = x;
    if (n_out > 1)
        out[1] = y;
    return BB_OK;
}

static int eval_set(data_source *s, uint32_t n_out, bb_value **out, bb_error *err)
{
    bb_value *y = NULL;
    if (n_out > 1) {
        int64_t zero = 0; /* unsupervised: empty labels */
        y = s->eval_y ? bb_value_ref(s->eval_y) : bb_value_tensor_new(BB_DT_FLOAT, 1, &zero);
        if (!y)
            return bb_error_set(err, BB_ENOMEM, "%s: out of memory", s->who);
        out[1] = y;
    }
    out[0] = bb_value_ref(s->eval_x);
    return BB_OK;
}

static int trigger(data_source *s, bb_value **out, bb_error *err)
{
    *out = bb_value_trigger();
    return *out ? BB_OK : bb_error_set(err, BB_ENOMEM, "%s: out of memory", s->who);
}

#define EXT_DOMAIN "bb-data.DataSource.atomic"

/* By name: the extension ops may arrive under either domain (the engine
 * resolves role-domain nodes against every opset of the type). */
bb_dispatch_result data_source_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                        bb_value **outputs, bb_error *err)
{
    data_source *s = inst;
    (void)ctx;
    const char *op = call->op_type ? call->op_type : "";
    int rc = BB_OK;
    if (call->n_outputs < 1)
        rc = bb_error_set(err, BB_EINVAL, "%s: %s needs an output", s->who, op);
    else if (strcmp(op, "NextBatch") == 0)
        rc = next_batch(s, call->n_outputs, outputs, err);
    else if (strcmp(op, "Reset") == 0) {
        s->cursor = s->n; /* the next batch starts a new epoch */
        rc = trigger(s, outputs, err);
    } else if (strcmp(op, "OnDataLoaded") == 0)
        rc = trigger(s, outputs, err);
    else if (strcmp(op, "EvalSet") == 0)
        rc = eval_set(s, call->n_outputs, outputs, err);
    else if (strcmp(op, "NumSamples") == 0)
        rc = (outputs[0] = bb_value_u64(&BB_TYPE_U64, s->n))
                 ? BB_OK
                 : bb_error_set(err, BB_ENOMEM, "%s: out of memory", s->who);
    else
        rc = bb_error_set(err, BB_EUNSUPPORTED, "%s: no op %s", s->who, op);
    return rc == BB_OK ? BB_DISPATCH_NOW_OK : BB_DISPATCH_NOW_ERR;
}

/* ---- snapshot: where the source is in its epoch ----------------------------------
 * "BBDS" u32 version=1, u64 n, u64 epoch, u64 cursor, 4 x u64 rng, n x u32 order */

#define MAGIC "BBDS"
#define VERSION 1u

int data_source_snapshot(void *inst, uint8_t **out, size_t *out_len, bb_error *err)
{
    const data_source *s = inst;
    bb_writer w = {0};
    bb_writer_put(&w, MAGIC, 4);
    bb_writer_put_u32le(&w, VERSION);
    bb_writer_put_u64le(&w, s->n);
    bb_writer_put_u64le(&w, s->epoch);
    bb_writer_put_u64le(&w, s->cursor);
    bb_writer_put(&w, s->rng.s, sizeof s->rng.s);
    bb_writer_put(&w, s->order, s->n * sizeof *s->order);
    if (!bb_writer_take(&w, out, out_len))
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", s->who);
    return BB_OK;
}

int data_source_restore(void *inst, const uint8_t *data, size_t len, bb_error *err)
{
    data_source *s = inst;
    bb_reader r;
    bb_reader_init(&r, data, len);
    char magic[4];
    uint32_t version = 0;
    uint64_t n = 0, epoch = 0, cursor = 0;
    bbp_rng rng;
    if (!bb_reader_get(&r, magic, 4) || memcmp(magic, MAGIC, 4) ||
        !bb_reader_u32le(&r, &version) || version != VERSION || !bb_reader_u64le(&r, &n) ||
        !bb_reader_u64le(&r, &epoch) || !bb_reader_u64le(&r, &cursor) ||
        !bb_reader_get(&r, rng.s, sizeof rng.s))
        return bb_error_set(err, BB_EDECODE, "%s: not a data source snapshot", s->who);
    if (n != s->n || cursor > n || bb_reader_left(&r) != n * sizeof(uint32_t))
        return bb_error_set(err, BB_EDECODE,
                            "%s: snapshot of %llu rows does not fit this source's %zu rows",
                            s->who, (unsigned long long)n, s->n);
    uint32_t *order = malloc((n ? n : 1) * sizeof *order);
    uint8_t *seen = calloc(n ? n : 1, 1);
    int rc = order && seen ? BB_OK : bb_error_set(err, BB_ENOMEM, "%s: out of memory", s->who);
    if (!rc)
        bb_reader_get(&r, order, n * sizeof *order);
    for (uint64_t i = 0; !rc && i < n; i++) {
        if (order[i] >= n || seen[order[i]]++)
            rc = bb_error_set(err, BB_EDECODE, "%s: snapshot row order is not a permutation",
                              s->who);
    }
    free(seen);
    if (rc) {
        free(order);
        return rc;
    }
    free(s->order);
    s->order = order;
    s->epoch = epoch;
    s->cursor = cursor;
    s->rng = rng;
    return BB_OK;
}

/* ---- declarations ------------------------------------------------------------------ */

static const bb_port_decl BATCH_OUT[] = {
    {.name = "batch", .type = &BB_TYPE_TENSOR_F32},
    {.name = "labels", .type = &BB_TYPE_TENSOR_F32, .optional = true},
};
static const bb_port_decl TRIGGER_IN[] = {{.name = "trigger", .type = &BB_TYPE_ANY}};
static const bb_port_decl TRIGGER_OUT[] = {{.name = "trigger", .type = &BB_TYPE_TRIGGER}};
static const bb_port_decl EVAL_OUT[] = {
    {.name = "x", .type = &BB_TYPE_TENSOR_F32},
    {.name = "y", .type = &BB_TYPE_TENSOR_F32, .optional = true},
};
static const bb_port_decl COUNT_OUT[] = {{.name = "num_samples", .type = &BB_TYPE_U64}};

static const bb_op_decl ROLE_OPS[] = {
    {"NextBatch", NULL, 0, BATCH_OUT, 2,
                       "next (batch, labels); the last batch of an epoch may be short"},
    {"OnDataLoaded", NULL, 0, TRIGGER_OUT, 1,
                           "fires once the data is loaded (parsed at create)"},
    {"Reset", TRIGGER_IN, 1, TRIGGER_OUT, 1,
                  "ends the epoch: the next batch starts a new (reshuffled) epoch"},
};
static const bb_op_decl EXT_OPS[] = {
    {"EvalSet", NULL, 0, EVAL_OUT, 2,
                     "the evaluation rows: the held-out rows, else this source's rows"},
    {"NumSamples", NULL, 0, COUNT_OUT, 1, "rows per epoch"},
};

const bb_opset_decl DATA_OPSETS[] = {
    {"ai.bytesandbrains.role.data_loader", 1, ROLE_OPS, sizeof ROLE_OPS / sizeof *ROLE_OPS},
    {EXT_DOMAIN, 1, EXT_OPS, sizeof EXT_OPS / sizeof *EXT_OPS},
};
const uint32_t DATA_N_OPSETS = 2;
