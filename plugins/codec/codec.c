/*
 * codec.c — the shell of the four codecs (codec.h): configuration, the ops,
 * the snapshot frame, the plugin entry.
 *
 * Ops (ai.bytesandbrains.role.compressor, IR_AND_DSL.md 5c.2; In = f32):
 *   TrainCodebook(training: In) -> cmd   fits the codec to samples
 *       (Int8Affine's ranges, ProductQuantization's codebooks); answers a
 *       CommandId counting the fits; F16 and TopK have nothing to fit
 *   Compress(t: In) -> code: Out         Out = tensor_f16 (F16) or
 *       tensor_u8 (the others): the storage types the type solver checks
 *       wire edges with
 *   Decompress(code: Out) -> t: In
 * bb-codec.Codec.atomic:
 *   DecompressBatch(responses: ResponseBatch) -> ResponseBatch
 *       Decompress of every answer of a RecvRespBatched (the worked
 *       example's `codec.decompress(g, batched_grads)`): an answer that is a
 *       code is decoded, a bundled answer (Composite) has its first child
 *       decoded and keeps the rest; the senders are kept.
 *
 * Every op runs inline on the engine thread. Codes are untrusted: a
 * malformed one fails the op with a message naming the byte or element.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "plugins/common/plugin_type.h"

#define ATOMIC_DOMAIN "bb-codec.Codec.atomic"
#define SNAP_MAGIC "BBCD"
#define SNAP_VERSION 1u

int codec_oom(const codec *c, bb_error *err)
{
    return bb_error_set(err, BB_ENOMEM, "%s: out of memory", c->who);
}

int codec_check_f32(const codec *c, const char *op, const bb_value *t, bb_error *err)
{
    if (!t || t->type->kind != BB_VK_TENSOR || t->u.tensor.dtype != BB_DT_FLOAT)
        return bb_error_set(err, BB_ETYPE, "%s: %s takes an f32 tensor, not %s", c->who, op,
                            !t ? "nothing"
                            : t->type->kind == BB_VK_TENSOR ? bb_dtype_name(t->u.tensor.dtype)
                                                            : t->type->name);
    size_t n = bb_tensor_numel(t);
    if (n > c->max_elements)
        return bb_error_set(err, BB_ELIMIT, "%s: %s got %zu elements (max_elements %llu)",
                            c->who, op, n, (unsigned long long)c->max_elements);
    return BB_OK;
}

size_t codec_first_nonfinite(const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return i;
    return n;
}

/* ---- create / destroy ---------------------------------------------------------------- */

void codec_destroy(void *inst)
{
    codec *c = inst;
    if (!c)
        return;
    if (c->kind->fini)
        c->kind->fini(c);
    free(c);
}

int codec_create(const codec_kind *k, const bb_create_args *a, void **out, bb_error *err)
{
    bbp_config cfg;
    int rc = bbp_config_load(&cfg, a, k->type_name, k->config, k->n_config, err);
    if (rc)
        return rc;
    codec *c = calloc(1, k->size);
    if (!c) {
        bbp_config_free(&cfg);
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", k->type_name);
    }
    c->kind = k;
    snprintf(c->who, sizeof c->who, "%s", cfg.who);
    int64_t max = 0;
    rc = bbp_config_int(&cfg, "max_elements", 1, INT64_C(1) << 40, &max, err);
    c->max_elements = (uint64_t)max;
    if (!rc)
        rc = k->init(c, &cfg, a ? a->seed : 0, err);
    bbp_config_free(&cfg);
    if (rc) {
        codec_destroy(c);
        return rc;
    }
    *out = c;
    return BB_OK;
}

/* ---- the ops ------------------------------------------------------------------------ */

static int train_codebook(codec *c, const bb_value *samples, bb_value **cmd, bb_error *err)
{
    if (c->kind->train) {
        int rc = codec_check_f32(c, "TrainCodebook", samples, err);
        if (!rc)
            rc = c->kind->train(c, samples, err);
        if (rc)
            return rc;
    }
    *cmd = bb_value_u64(&BB_TYPE_COMMAND_ID, ++c->changes);
    return *cmd ? BB_OK : codec_oom(c, err);
}

static int compress(codec *c, const bb_value *t, bb_value **code, bb_error *err)
{
    int rc = codec_check_f32(c, "Compress", t, err);
    return rc ? rc : c->kind->encode(c, t, code, err);
}

static int decompress(const codec *c, const bb_value *code, bb_value **t, bb_error *err)
{
    if (!code)
        return bb_error_set(err, BB_ETYPE, "%s: Decompress needs a code", c->who);
    return c->kind->decode(c, code, t, err);
}

/* One answer of a batch decoded: a code, or a Composite whose first child
 * is the code (a bundle), one-child wrappers unwrapped. */
static int decode_answer(const codec *c, const bb_value *v, size_t i, bb_value **out,
                         bb_error *err)
{
    for (int depth = 0; depth < 16 && v->type->kind == BB_VK_COMPOSITE && v->u.list.n == 1;
         depth++)
        v = v->u.list.items[0];
    int rc;
    if (v->type->kind != BB_VK_COMPOSITE) {
        if ((rc = decompress(c, v, out, err)))
            bb_error_prefix(err, "answer %zu", i);
        return rc;
    }
    size_t n = v->u.list.n;
    if (n == 0)
        return bb_error_set(err, BB_ETYPE, "%s: answer %zu is an empty Composite", c->who, i);
    bb_value *small[BB_VALUE_LIST_INLINE], **items = small;
    if (n > BB_VALUE_LIST_INLINE && !(items = malloc(n * sizeof *items)))
        return codec_oom(c, err);
    if ((rc = decompress(c, v->u.list.items[0], &items[0], err))) {
        bb_error_prefix(err, "answer %zu", i);
    } else {
        for (size_t k = 1; k < n; k++)
            items[k] = bb_value_ref(v->u.list.items[k]);
        if (!(*out = bb_value_list(&BB_TYPE_COMPOSITE, items, n))) /* takes items */
            rc = codec_oom(c, err);
    }
    if (items != small)
        free(items);
    return rc;
}

static int decompress_batch(const codec *c, const bb_value *b, bb_value **out, bb_error *err)
{
    if (!b || b->type->kind != BB_VK_RESPONSE_BATCH)
        return bb_error_set(err, BB_ETYPE, "%s: DecompressBatch takes a ResponseBatch, not %s",
                            c->who, b ? b->type->name : "nothing");
    size_t n = b->u.batch.n;
    bb_value **items = calloc(n ? 2 * n : 1, sizeof *items);
    if (!items)
        return codec_oom(c, err);
    bb_value **peers = items + n;
    int rc = BB_OK;
    size_t done = 0;
    for (; done < n && !rc; done++) {
        rc = decode_answer(c, b->u.batch.items[done], done, &items[done], err);
        peers[done] = bb_value_ref(b->u.batch.peers[done]);
    }
    if (rc) {
        for (size_t i = 0; i < done; i++) {
            bb_value_unref(items[i]);
            bb_value_unref(peers[i]);
        }
    } else if (!(*out = bb_value_response_batch(items, peers, n))) { /* takes both */
        rc = codec_oom(c, err);
    }
    free(items);
    return rc;
}

bb_dispatch_result codec_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                  bb_value **outputs, bb_error *err)
{
    codec *c = inst;
    (void)ctx;
    const char *op = call->op_type ? call->op_type : "(null)";
    const bb_value *in = call->n_inputs ? call->inputs[0] : NULL;
    int rc;
    if (call->n_outputs < 1)
        rc = bb_error_set(err, BB_EINVAL, "%s: %s needs an output", c->who, op);
    else if (!strcmp(op, "Compress"))
        rc = compress(c, in, &outputs[0], err);
    else if (!strcmp(op, "Decompress"))
        rc = decompress(c, in, &outputs[0], err);
    else if (!strcmp(op, "TrainCodebook"))
        rc = train_codebook(c, in, &outputs[0], err);
    else if (!strcmp(op, "DecompressBatch"))
        rc = decompress_batch(c, in, &outputs[0], err);
    else
        rc = bb_error_set(err, BB_EUNSUPPORTED, "%s: no op %s", c->who, op);
    return rc ? BB_DISPATCH_NOW_ERR : BB_DISPATCH_NOW_OK;
}

/* ---- snapshot -------------------------------------------------------------------------
 * "BBCD" u32 version, u32 type-name length + the TYPE_NAME, u64 fits so
 * far, then the kind's state (nothing for a stateless kind). */

int codec_snapshot(void *inst, uint8_t **out, size_t *out_len, bb_error *err)
{
    const codec *c = inst;
    uint32_t name_len = (uint32_t)strlen(c->kind->type_name);
    bb_writer w = {0};
    bb_writer_put(&w, SNAP_MAGIC, 4);
    bb_writer_put_u32le(&w, SNAP_VERSION);
    bb_writer_put_u32le(&w, name_len);
    bb_writer_put(&w, c->kind->type_name, name_len);
    bb_writer_put_u64le(&w, c->changes);
    if (c->kind->save)
        c->kind->save(c, &w);
    return bb_writer_take(&w, out, out_len) ? BB_OK : codec_oom(c, err);
}

int codec_restore(void *inst, const uint8_t *data, size_t len, bb_error *err)
{
    codec *c = inst;
    bb_reader r;
    bb_reader_init(&r, data, len);
    char magic[4], name[64];
    uint32_t version = 0, name_len = 0;
    uint64_t changes = 0;
    if (!bb_reader_get(&r, magic, 4) || memcmp(magic, SNAP_MAGIC, 4) ||
        !bb_reader_u32le(&r, &version) || version != SNAP_VERSION ||
        !bb_reader_u32le(&r, &name_len) || name_len >= sizeof name ||
        !bb_reader_get(&r, name, name_len))
        return bb_error_set(err, BB_EDECODE, "%s: not a codec snapshot", c->who);
    name[name_len] = '\0';
    if (strcmp(name, c->kind->type_name))
        return bb_error_set(err, BB_EDECODE, "%s: the snapshot is of a %s", c->who, name);
    if (!bb_reader_u64le(&r, &changes))
        return bb_error_set(err, BB_EDECODE, "%s: the snapshot is truncated", c->who);
    int rc = c->kind->load ? c->kind->load(c, &r, err) : BB_OK;
    if (!rc && bb_reader_left(&r))
        rc = bb_error_set(err, BB_EDECODE, "%s: %zu bytes after the snapshot's state", c->who,
                          bb_reader_left(&r));
    if (!rc)
        c->changes = changes;
    return rc;
}

/* ---- declarations ------------------------------------------------------------------------ */

#define P(nm, ty) {.name = nm, .type = &BB_TYPE_##ty}
#define OPD(name, in, out, doc) {name, in, BBP_COUNT(in), out, BBP_COUNT(out), doc}
#define DOC_TRAIN "fits the codec to samples (ranges, codebooks); a CommandId counting the fits"
#define DOC_COMPRESS "encodes an f32 tensor"
#define DOC_DECOMPRESS "decodes a code back to an f32 tensor (refuses malformed codes)"
#define DOC_BATCH                                                                             \
    "Decompress of every answer of a RecvRespBatched: a code, or the first child of a "       \
    "bundled answer; senders kept"

static const bb_port_decl IN_T[] = {P("t", TENSOR_F32)};
static const bb_port_decl IN_TRAINING[] = {P("training", TENSOR_F32)};
static const bb_port_decl OUT_T[] = {P("t", TENSOR_F32)};
static const bb_port_decl OUT_CMD[] = {P("cmd", COMMAND_ID)};
static const bb_port_decl IN_BATCH[] = {P("responses", RESPONSE_BATCH)};
static const bb_port_decl OUT_BATCH[] = {P("responses", RESPONSE_BATCH)};
static const bb_port_decl IN_CODE_U8[] = {P("code", TENSOR_U8)};
static const bb_port_decl OUT_CODE_U8[] = {P("code", TENSOR_U8)};
static const bb_port_decl IN_CODE_F16[] = {P("code", TENSOR_F16)};
static const bb_port_decl OUT_CODE_F16[] = {P("code", TENSOR_F16)};

static const bb_op_decl ROLE_OPS_U8[] = {
    OPD("Compress", IN_T, OUT_CODE_U8, DOC_COMPRESS),
    OPD("Decompress", IN_CODE_U8, OUT_T, DOC_DECOMPRESS),
    OPD("TrainCodebook", IN_TRAINING, OUT_CMD, DOC_TRAIN),
};
static const bb_op_decl ROLE_OPS_F16[] = {
    OPD("Compress", IN_T, OUT_CODE_F16, DOC_COMPRESS),
    OPD("Decompress", IN_CODE_F16, OUT_T, DOC_DECOMPRESS),
    OPD("TrainCodebook", IN_TRAINING, OUT_CMD, DOC_TRAIN),
};
static const bb_op_decl ATOMIC_OPS[] = {OPD("DecompressBatch", IN_BATCH, OUT_BATCH, DOC_BATCH)};

const bb_opset_decl CODEC_OPSETS_U8[CODEC_N_OPSETS] = {
    {"ai.bytesandbrains.role.compressor", 1, ROLE_OPS_U8, BBP_COUNT(ROLE_OPS_U8)},
    {ATOMIC_DOMAIN, 1, ATOMIC_OPS, BBP_COUNT(ATOMIC_OPS)},
};
const bb_opset_decl CODEC_OPSETS_F16[CODEC_N_OPSETS] = {
    {"ai.bytesandbrains.role.compressor", 1, ROLE_OPS_F16, BBP_COUNT(ROLE_OPS_F16)},
    {ATOMIC_DOMAIN, 1, ATOMIC_OPS, BBP_COUNT(ATOMIC_OPS)},
};

static const bb_component_type *const TYPES[] = {&CODEC_TYPE_F16, &CODEC_TYPE_INT8_AFFINE,
                                                 &CODEC_TYPE_PQ, &CODEC_TYPE_TOPK};

BBP_PLUGIN_ENTRY("codec", TYPES)
