/*
 * model_io.c — ONNX ModelProto / TensorProto bytes <-> libbbir IR (bb/ir.h).
 *
 * Loading has three steps:
 *   1. scan (pb_scan.c): walk the protobuf wire format against the
 *      generated schema, checking every tag, varint, length and wire type
 *      and bounding nesting depth. protobuf-c recurses without limit and
 *      reports no position, so this keeps hostile input away from it and
 *      produces the "<file>: <problem> at byte N" messages.
 *   2. protobuf_c_message_unpack into a scratch arena (freed in one go).
 *   3. convert into the model's arena: typed tensor payloads (float_data,
 *      int32_data, ...) are normalised to little-endian raw_data, and the
 *      sub-messages the IR keeps verbatim are re-serialised to bytes.
 * Saving builds protobuf-c structs in a scratch arena that point at the
 * IR's own strings and bytes (no copies); verbatim sub-messages are emitted
 * as pre-encoded fields through protobuf-c's unknown-field list, after a
 * scan that proves they are well formed.
 *
 * Presence on save (a dump of the saved file shows exactly these):
 *   - strings: NULL is absent, "" is present and empty;
 *   - ModelProto.ir_version and OperatorSetIdProto.version: always written;
 *   - ints the IR holds without a has-flag (TensorProto.data_type,
 *     TypeProto elem_type/key_type, AttributeProto.type): written when != 0;
 *   - AttributeProto.f / .i: written when type is FLOAT / INT and the
 *     attribute is not a reference (ref_attr_name == NULL);
 *   - tensor payload: raw_data when has_raw_data (never the typed fields).
 */
#include "bb/model_io.h"
#include "bb/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <protobuf-c/protobuf-c.h>

#include "onnx-ml.pb-c.h"
#include "bb/io.h"
#include "bb/le.h"
#include "bb/uvarint.h"
#include "pb_scan.h"

#define MAX_MSG_DEPTH BB__PB_MAX_MSG_DEPTH

/* ======================================================================= */
/* protobuf-c over an arena                                                */
/* ======================================================================= */

/* protobuf-c structs can be ~100x larger than their wire form (an empty
 * NodeProto is 2 bytes on the wire), so decoding memory is budgeted. */
#define DECODE_BUDGET_BASE ((size_t)64 << 20)
#define DECODE_BUDGET_PER_BYTE 32

typedef struct pb_arena {
    bb_arena *a;
    size_t budget;
    bool oom, over;
} pb_arena;

static void *pb_alloc(void *data, size_t size)
{
    pb_arena *p = data;
    if (size > p->budget || bb_arena_used(p->a) > p->budget - size) {
        p->over = true;
        return NULL;
    }
    void *r = bb_arena_alloc(p->a, size);
    if (!r)
        p->oom = true;
    return r;
}

static void pb_free(void *data, void *ptr)
{
    (void)data;
    (void)ptr; /* the scratch arena is destroyed in one go */
}

/* Scan then unpack into scratch. */
static int unpack_checked(const void *data, size_t len, const char *name,
                          const ProtobufCMessageDescriptor *d, const char *what,
                          bb_arena *scratch, ProtobufCMessage **out, bb_error *err)
{
    int rc = bb__pb_scan(data, len, name, d, what, err);
    if (rc)
        return rc;
    pb_arena pa = {scratch, DECODE_BUDGET_BASE, false, false};
    if (len < (SIZE_MAX - DECODE_BUDGET_BASE) / DECODE_BUDGET_PER_BYTE)
        pa.budget += len * DECODE_BUDGET_PER_BYTE;
    else
        pa.budget = SIZE_MAX;
    ProtobufCAllocator alloc = {pb_alloc, pb_free, &pa};
    ProtobufCMessage *m = protobuf_c_message_unpack(d, &alloc, len, data);
    if (pa.over)
        return bb_error_set(err, BB_ELIMIT, "%s: decoding needs more than %zu bytes of memory, "
                            "the limit for a %zu-byte input (too many empty messages?)", name,
                            pa.budget, len);
    if (pa.oom)
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory while decoding", name);
    if (!m)
        return bb_error_set(err, BB_EPARSE, "%s: protobuf decoding of %s failed", name,
                            d->short_name);
    *out = m;
    return BB_OK;
}

/* ======================================================================= */
/* protobuf-c -> IR                                                        */
/* ======================================================================= */

typedef struct ld {
    bb_arena *a; /* destination (model) arena */
    const char *name;
    bb_error *err;
} ld;

#define TRY(x)                   \
    do {                         \
        int rc_ = (x);           \
        if (rc_)                 \
            return rc_;          \
    } while (0)

static int ld_oom(ld *c)
{
    return bb_error_set(c->err, BB_ENOMEM, "%s: out of memory", c->name);
}

/* Allocate a vector of count zeroed elements (returns from the caller on
 * failure). */
#define VEC_SET(c, vec, count)                                                      \
    do {                                                                            \
        size_t n_ = (count);                                                        \
        (vec)->v = n_ ? bb_arena_calloc((c)->a, n_, sizeof *(vec)->v) : NULL;       \
        if (n_ && !(vec)->v)                                                        \
            return ld_oom(c);                                                       \
        (vec)->n = (vec)->cap = n_;                                                 \
    } while (0)

static int ld_str(ld *c, const char **dst, const char *s)
{
    *dst = NULL;
    if (!s)
        return BB_OK;
    if (!(*dst = bb_arena_strdup(c->a, s)))
        return ld_oom(c);
    return BB_OK;
}

/* IR byte buffers are non-NULL when present and carry a NUL after len. */
static int ld_bytes(ld *c, bb_bytes *dst, const uint8_t *p, size_t n)
{
    if (n == SIZE_MAX)
        return ld_oom(c);
    uint8_t *q = bb_arena_alloc(c->a, n + 1);
    if (!q)
        return ld_oom(c);
    if (n)
        memcpy(q, p, n);
    dst->data = q;
    dst->len = n;
    return BB_OK;
}

static int ld_kv(ld *c, bb_kv_list *l, Onnx__StringStringEntryProto *const *v, size_t n)
{
    VEC_SET(c, l, n);
    for (size_t i = 0; i < n; i++) {
        TRY(ld_str(c, &l->v[i].key, v[i]->key));
        TRY(ld_str(c, &l->v[i].value, v[i]->value));
    }
    return BB_OK;
}

static int ld_strs(ld *c, bb_str_list *l, char *const *v, size_t n)
{
    VEC_SET(c, l, n);
    for (size_t i = 0; i < n; i++)
        TRY(ld_str(c, &l->v[i], v[i] ? v[i] : ""));
    return BB_OK;
}

static int ld_opsets(ld *c, bb_opset_list *l, Onnx__OperatorSetIdProto *const *v, size_t n)
{
    VEC_SET(c, l, n);
    for (size_t i = 0; i < n; i++) {
        TRY(ld_str(c, &l->v[i].domain, v[i]->domain));
        l->v[i].version = v[i]->has_version ? v[i]->version : 0;
    }
    return BB_OK;
}

/* Re-serialise a sub-message the IR keeps verbatim. */
static int ld_verbatim(ld *c, bb_bytes *dst, const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    if (n == SIZE_MAX)
        return ld_oom(c);
    uint8_t *q = bb_arena_alloc(c->a, n + 1);
    if (!q)
        return ld_oom(c);
    protobuf_c_message_pack(m, q);
    dst->data = q;
    dst->len = n;
    return BB_OK;
}

#define LD_VERBATIM_LIST(c, vec, arr, count)                          \
    do {                                                              \
        VEC_SET((c), (vec), (count));                                 \
        for (size_t i_ = 0; i_ < (count); i_++)                       \
            TRY(ld_verbatim((c), &(vec)->v[i_], &(arr)[i_]->base));   \
    } while (0)

/* ---- tensors ------------------------------------------------------------ */

/* Bytes one int32_data element occupies in raw_data, or 0 when int32_data
 * cannot carry the type. 4-bit and 2-bit types hold two / four elements
 * per int32_data value (one packed byte). */
static size_t int32_data_width(int32_t dt)
{
    switch (dt) {
    case BB_DT_INT32:
        return 4;
    case BB_DT_INT16:
    case BB_DT_UINT16:
    case BB_DT_FLOAT16:
    case BB_DT_BFLOAT16:
        return 2;
    case BB_DT_INT8:
    case BB_DT_UINT8:
    case BB_DT_BOOL:
    case BB_DT_FLOAT8E4M3FN:
    case BB_DT_FLOAT8E4M3FNUZ:
    case BB_DT_FLOAT8E5M2:
    case BB_DT_FLOAT8E5M2FNUZ:
    case BB_DT_UINT4:
    case BB_DT_INT4:
    case BB_DT_FLOAT4E2M1:
    case BB_DT_FLOAT8E8M0:
    case BB_DT_UINT2:
    case BB_DT_INT2:
        return 1;
    }
    return 0;
}

/* Normalise the typed payload fields into raw_data. */
static int ld_tensor_payload(ld *c, bb_tensor_proto *t, const Onnx__TensorProto *p)
{
    const char *field = NULL;
    size_t count = 0, width = 0, nfields = 0;
    int32_t dt = t->data_type;
    const char *tn = t->name ? t->name : "";

    if (p->n_float_data) {
        nfields++;
        field = "float_data", count = p->n_float_data;
        width = dt == BB_DT_FLOAT || dt == BB_DT_COMPLEX64 ? 4 : 0;
    }
    if (p->n_int32_data) {
        nfields++;
        field = "int32_data", count = p->n_int32_data;
        width = int32_data_width(dt);
    }
    if (p->n_int64_data) {
        nfields++;
        field = "int64_data", count = p->n_int64_data;
        width = dt == BB_DT_INT64 ? 8 : 0;
    }
    if (p->n_double_data) {
        nfields++;
        field = "double_data", count = p->n_double_data;
        width = dt == BB_DT_DOUBLE || dt == BB_DT_COMPLEX128 ? 8 : 0;
    }
    if (p->n_uint64_data) {
        nfields++;
        field = "uint64_data", count = p->n_uint64_data;
        width = dt == BB_DT_UINT64 ? 8 : dt == BB_DT_UINT32 ? 4 : 0;
    }
    if (nfields == 0)
        return BB_OK;
    if (nfields > 1 || p->has_raw_data)
        return bb_error_set(c->err, BB_EPARSE, "%s: tensor '%s' stores its values in more than "
                            "one of raw_data/float_data/int32_data/int64_data/double_data/"
                            "uint64_data", c->name, tn);
    if (width == 0)
        return bb_error_set(c->err, BB_EPARSE, "%s: tensor '%s' has %s, which cannot hold "
                            "data_type %d (%s)", c->name, tn, field, (int)dt, bb_dtype_name(dt));
    if (count > (SIZE_MAX - 1) / width)
        return ld_oom(c);
    uint8_t *q = bb_arena_alloc(c->a, count * width + 1);
    if (!q)
        return ld_oom(c);
    for (size_t i = 0; i < count; i++) {
        uint64_t v;
        if (p->n_float_data) {
            uint32_t u;
            memcpy(&u, &p->float_data[i], 4);
            v = u;
        } else if (p->n_int32_data) {
            v = (uint32_t)p->int32_data[i];
        } else if (p->n_int64_data) {
            v = (uint64_t)p->int64_data[i];
        } else if (p->n_double_data) {
            memcpy(&v, &p->double_data[i], 8);
        } else {
            v = p->uint64_data[i];
        }
        bb_le_put(q + i * width, v, width);
    }
    t->raw_data.data = q;
    t->raw_data.len = count * width;
    t->has_raw_data = true;
    return BB_OK;
}

static int ld_tensor(ld *c, const Onnx__TensorProto *p, bb_tensor_proto **out)
{
    bb_tensor_proto *t = bb_arena_alloc(c->a, sizeof *t);
    if (!t)
        return ld_oom(c);
    TRY(ld_str(c, &t->name, p->name));
    TRY(ld_str(c, &t->doc_string, p->doc_string));
    t->data_type = p->has_data_type ? p->data_type : 0;
    VEC_SET(c, &t->dims, p->n_dims);
    if (p->n_dims)
        memcpy(t->dims.v, p->dims, p->n_dims * sizeof *p->dims);
    if (p->segment) {
        t->has_segment = true;
        t->segment_begin = p->segment->has_begin ? p->segment->begin : 0;
        t->segment_end = p->segment->has_end ? p->segment->end : 0;
    }
    if (p->has_raw_data) {
        TRY(ld_bytes(c, &t->raw_data, p->raw_data.data, p->raw_data.len));
        t->has_raw_data = true;
    }
    TRY(ld_tensor_payload(c, t, p));
    VEC_SET(c, &t->string_data, p->n_string_data);
    for (size_t i = 0; i < p->n_string_data; i++)
        TRY(ld_bytes(c, &t->string_data.v[i], p->string_data[i].data, p->string_data[i].len));
    TRY(ld_kv(c, &t->external_data, p->external_data, p->n_external_data));
    t->has_data_location = p->has_data_location;
    t->data_location = p->has_data_location ? (int32_t)p->data_location : 0;
    TRY(ld_kv(c, &t->metadata, p->metadata_props, p->n_metadata_props));
    *out = t;
    return BB_OK;
}

/* ---- types -------------------------------------------------------------- */

static int ld_shape(ld *c, bb_type_proto *t, const Onnx__TensorShapeProto *s)
{
    if (!s)
        return BB_OK;
    t->has_shape = true;
    VEC_SET(c, &t->shape, s->n_dim);
    for (size_t i = 0; i < s->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = s->dim[i];
        bb_dim *o = &t->shape.v[i];
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            o->has_value = true;
            o->value = d->dim_value;
        } else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM) {
            TRY(ld_str(c, &o->param, d->dim_param));
        }
        TRY(ld_str(c, &o->denotation, d->denotation));
    }
    return BB_OK;
}

static int ld_type(ld *c, const Onnx__TypeProto *p, bb_type_proto **out)
{
    *out = NULL;
    if (!p)
        return BB_OK;
    bb_type_proto *t = bb_arena_alloc(c->a, sizeof *t);
    if (!t)
        return ld_oom(c);
    TRY(ld_str(c, &t->denotation, p->denotation));
    switch (p->value_case) {
    case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
        t->kind = BB_TP_TENSOR;
        t->elem_type = p->tensor_type->has_elem_type ? p->tensor_type->elem_type : 0;
        TRY(ld_shape(c, t, p->tensor_type->shape));
        break;
    case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE:
        t->kind = BB_TP_SPARSE_TENSOR;
        t->elem_type =
            p->sparse_tensor_type->has_elem_type ? p->sparse_tensor_type->elem_type : 0;
        TRY(ld_shape(c, t, p->sparse_tensor_type->shape));
        break;
    case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
        t->kind = BB_TP_SEQUENCE;
        TRY(ld_type(c, p->sequence_type->elem_type, &t->elem));
        break;
    case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
        t->kind = BB_TP_OPTIONAL;
        TRY(ld_type(c, p->optional_type->elem_type, &t->elem));
        break;
    case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
        t->kind = BB_TP_MAP;
        t->map_key_type = p->map_type->has_key_type ? p->map_type->key_type : 0;
        TRY(ld_type(c, p->map_type->value_type, &t->elem));
        break;
    case ONNX__TYPE_PROTO__VALUE_OPAQUE_TYPE:
        t->kind = BB_TP_OPAQUE;
        TRY(ld_str(c, &t->opaque_domain, p->opaque_type->domain));
        TRY(ld_str(c, &t->opaque_name, p->opaque_type->name));
        break;
    default:
        t->kind = BB_TP_NONE;
        break;
    }
    *out = t;
    return BB_OK;
}

static int ld_value_info(ld *c, const Onnx__ValueInfoProto *p, bb_value_info **out)
{
    bb_value_info *vi = bb_arena_alloc(c->a, sizeof *vi);
    if (!vi)
        return ld_oom(c);
    TRY(ld_str(c, &vi->name, p->name));
    TRY(ld_type(c, p->type, &vi->type));
    TRY(ld_str(c, &vi->doc_string, p->doc_string));
    TRY(ld_kv(c, &vi->metadata, p->metadata_props, p->n_metadata_props));
    *out = vi;
    return BB_OK;
}

static int ld_value_infos(ld *c, bb_value_info_list *l, Onnx__ValueInfoProto *const *v, size_t n)
{
    VEC_SET(c, l, n);
    for (size_t i = 0; i < n; i++)
        TRY(ld_value_info(c, v[i], &l->v[i]));
    return BB_OK;
}

/* ---- attributes, nodes, graphs, functions -------------------------------- */

static int ld_graph(ld *c, const Onnx__GraphProto *p, bb_graph **out);

static int ld_attr(ld *c, const Onnx__AttributeProto *p, bb_attr **out)
{
    bb_attr *at = bb_arena_alloc(c->a, sizeof *at);
    if (!at)
        return ld_oom(c);
    TRY(ld_str(c, &at->name, p->name));
    TRY(ld_str(c, &at->ref_attr_name, p->ref_attr_name));
    TRY(ld_str(c, &at->doc_string, p->doc_string));
    at->type = p->has_type ? (bb_attr_type)p->type : BB_ATTR_UNDEFINED;
    at->f = p->has_f ? p->f : 0.0f;
    at->i = p->has_i ? p->i : 0;
    if (p->has_s) {
        TRY(ld_bytes(c, &at->s, p->s.data, p->s.len));
        at->has_s = true;
    }
    if (p->t)
        TRY(ld_tensor(c, p->t, &at->t));
    if (p->g)
        TRY(ld_graph(c, p->g, &at->g));
    if (p->tp)
        TRY(ld_type(c, p->tp, &at->tp));
    if (p->sparse_tensor) {
        TRY(ld_verbatim(c, &at->sparse_tensor, &p->sparse_tensor->base));
        at->has_sparse_tensor = true;
    }
    VEC_SET(c, &at->floats, p->n_floats);
    if (p->n_floats)
        memcpy(at->floats.v, p->floats, p->n_floats * sizeof *p->floats);
    VEC_SET(c, &at->ints, p->n_ints);
    if (p->n_ints)
        memcpy(at->ints.v, p->ints, p->n_ints * sizeof *p->ints);
    VEC_SET(c, &at->strings, p->n_strings);
    for (size_t i = 0; i < p->n_strings; i++)
        TRY(ld_bytes(c, &at->strings.v[i], p->strings[i].data, p->strings[i].len));
    VEC_SET(c, &at->tensors, p->n_tensors);
    for (size_t i = 0; i < p->n_tensors; i++)
        TRY(ld_tensor(c, p->tensors[i], &at->tensors.v[i]));
    VEC_SET(c, &at->graphs, p->n_graphs);
    for (size_t i = 0; i < p->n_graphs; i++)
        TRY(ld_graph(c, p->graphs[i], &at->graphs.v[i]));
    LD_VERBATIM_LIST(c, &at->sparse_tensors, p->sparse_tensors, p->n_sparse_tensors);
    VEC_SET(c, &at->type_protos, p->n_type_protos);
    for (size_t i = 0; i < p->n_type_protos; i++)
        TRY(ld_type(c, p->type_protos[i], &at->type_protos.v[i]));
    *out = at;
    return BB_OK;
}

static int ld_attrs(ld *c, bb_attr_list *l, Onnx__AttributeProto *const *v, size_t n)
{
    VEC_SET(c, l, n);
    for (size_t i = 0; i < n; i++)
        TRY(ld_attr(c, v[i], &l->v[i]));
    return BB_OK;
}

static int ld_node(ld *c, const Onnx__NodeProto *p, bb_node **out)
{
    bb_node *n = bb_arena_alloc(c->a, sizeof *n);
    if (!n)
        return ld_oom(c);
    TRY(ld_str(c, &n->name, p->name));
    TRY(ld_str(c, &n->op_type, p->op_type));
    TRY(ld_str(c, &n->domain, p->domain));
    TRY(ld_str(c, &n->overload, p->overload));
    TRY(ld_str(c, &n->doc_string, p->doc_string));
    TRY(ld_strs(c, &n->inputs, p->input, p->n_input));
    TRY(ld_strs(c, &n->outputs, p->output, p->n_output));
    TRY(ld_attrs(c, &n->attrs, p->attribute, p->n_attribute));
    TRY(ld_kv(c, &n->metadata, p->metadata_props, p->n_metadata_props));
    LD_VERBATIM_LIST(c, &n->device_configurations, p->device_configurations,
                     p->n_device_configurations);
    *out = n;
    return BB_OK;
}

static int ld_nodes(ld *c, bb_node_list *l, Onnx__NodeProto *const *v, size_t n)
{
    VEC_SET(c, l, n);
    for (size_t i = 0; i < n; i++)
        TRY(ld_node(c, v[i], &l->v[i]));
    return BB_OK;
}

static int ld_graph(ld *c, const Onnx__GraphProto *p, bb_graph **out)
{
    bb_graph *g = bb_arena_alloc(c->a, sizeof *g);
    if (!g)
        return ld_oom(c);
    TRY(ld_str(c, &g->name, p->name));
    TRY(ld_str(c, &g->doc_string, p->doc_string));
    TRY(ld_nodes(c, &g->nodes, p->node, p->n_node));
    VEC_SET(c, &g->initializers, p->n_initializer);
    for (size_t i = 0; i < p->n_initializer; i++)
        TRY(ld_tensor(c, p->initializer[i], &g->initializers.v[i]));
    LD_VERBATIM_LIST(c, &g->sparse_initializers, p->sparse_initializer, p->n_sparse_initializer);
    LD_VERBATIM_LIST(c, &g->quantization_annotations, p->quantization_annotation,
                     p->n_quantization_annotation);
    TRY(ld_value_infos(c, &g->inputs, p->input, p->n_input));
    TRY(ld_value_infos(c, &g->outputs, p->output, p->n_output));
    TRY(ld_value_infos(c, &g->value_info, p->value_info, p->n_value_info));
    TRY(ld_kv(c, &g->metadata, p->metadata_props, p->n_metadata_props));
    *out = g;
    return BB_OK;
}

static int ld_function(ld *c, const Onnx__FunctionProto *p, bb_function **out)
{
    bb_function *f = bb_arena_alloc(c->a, sizeof *f);
    if (!f)
        return ld_oom(c);
    TRY(ld_str(c, &f->name, p->name));
    TRY(ld_str(c, &f->domain, p->domain));
    TRY(ld_str(c, &f->overload, p->overload));
    TRY(ld_str(c, &f->doc_string, p->doc_string));
    TRY(ld_strs(c, &f->inputs, p->input, p->n_input));
    TRY(ld_strs(c, &f->outputs, p->output, p->n_output));
    TRY(ld_strs(c, &f->attributes, p->attribute, p->n_attribute));
    TRY(ld_attrs(c, &f->attribute_protos, p->attribute_proto, p->n_attribute_proto));
    TRY(ld_nodes(c, &f->nodes, p->node, p->n_node));
    TRY(ld_opsets(c, &f->opset_imports, p->opset_import, p->n_opset_import));
    TRY(ld_value_infos(c, &f->value_info, p->value_info, p->n_value_info));
    TRY(ld_kv(c, &f->metadata, p->metadata_props, p->n_metadata_props));
    *out = f;
    return BB_OK;
}

static int ld_model(ld *c, bb_model *m, const Onnx__ModelProto *p)
{
    m->ir_version = p->has_ir_version ? p->ir_version : 0;
    m->has_model_version = p->has_model_version;
    m->model_version = p->has_model_version ? p->model_version : 0;
    TRY(ld_str(c, &m->producer_name, p->producer_name));
    TRY(ld_str(c, &m->producer_version, p->producer_version));
    TRY(ld_str(c, &m->domain, p->domain));
    TRY(ld_str(c, &m->doc_string, p->doc_string));
    TRY(ld_opsets(c, &m->opset_imports, p->opset_import, p->n_opset_import));
    if (p->graph)
        TRY(ld_graph(c, p->graph, &m->graph));
    VEC_SET(c, &m->functions, p->n_functions);
    for (size_t i = 0; i < p->n_functions; i++)
        TRY(ld_function(c, p->functions[i], &m->functions.v[i]));
    TRY(ld_kv(c, &m->metadata, p->metadata_props, p->n_metadata_props));
    LD_VERBATIM_LIST(c, &m->training_info, p->training_info, p->n_training_info);
    LD_VERBATIM_LIST(c, &m->configuration, p->configuration, p->n_configuration);
    return BB_OK;
}

/* ======================================================================= */
/* Public: load                                                            */
/* ======================================================================= */

int bb_model_load_mem(const void *data, size_t len, const char *name, bb_model **out,
                      bb_error *err)
{
    if (!out || (!data && len))
        return bb_error_set(err, BB_EINVAL, "bb_model_load_mem: NULL argument");
    *out = NULL;
    if (!name)
        name = "<memory>";
    bb_arena *scratch = bb_arena_create();
    if (!scratch)
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", name);
    ProtobufCMessage *pm = NULL;
    int rc = unpack_checked(data ? data : "", len, name, &onnx__model_proto__descriptor,
                            "an ONNX model", scratch, &pm, err);
    if (rc) {
        bb_arena_destroy(scratch);
        return rc;
    }
    bb_model *m = bb_model_new();
    if (!m) {
        bb_arena_destroy(scratch);
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", name);
    }
    ld c = {m->arena, name, err};
    rc = ld_model(&c, m, (const Onnx__ModelProto *)pm);
    bb_arena_destroy(scratch);
    if (rc) {
        bb_model_free(m);
        return rc;
    }
    *out = m;
    return BB_OK;
}

static const char *errstr(int e, char *buf, size_t cap)
{
    return strerror_r(e, buf, cap); /* GNU variant: returns the text */
}

int bb_model_load_file(const char *path, bb_model **out, bb_error *err)
{
    if (!path || !out)
        return bb_error_set(err, BB_EINVAL, "bb_model_load_file: NULL argument");
    *out = NULL;
    uint8_t *buf;
    size_t len;
    int rc = bb_read_file(path, BB_MODEL_MAX_BYTES, &buf, &len, err);
    if (rc)
        return rc;
    rc = bb_model_load_mem(buf, len, path, out, err);
    free(buf);
    return rc;
}

int bb_tensor_proto_decode(bb_arena *a, const void *data, size_t len, const char *name,
                           bb_tensor_proto **out, bb_error *err)
{
    if (!a || !out || (!data && len))
        return bb_error_set(err, BB_EINVAL, "bb_tensor_proto_decode: NULL argument");
    *out = NULL;
    if (!name)
        name = "<tensor>";
    bb_arena *scratch = bb_arena_create();
    if (!scratch)
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", name);
    ProtobufCMessage *pm = NULL;
    int rc = unpack_checked(data ? data : "", len, name, &onnx__tensor_proto__descriptor,
                            "a TensorProto", scratch, &pm, err);
    if (!rc) {
        ld c = {a, name, err};
        rc = ld_tensor(&c, (const Onnx__TensorProto *)pm, out);
    }
    bb_arena_destroy(scratch);
    return rc;
}

/* ======================================================================= */
/* IR -> protobuf-c                                                        */
/* ======================================================================= */

typedef struct sv {
    bb_arena *a; /* scratch for the protobuf-c structs */
    const char *name;
    bb_error *err;
} sv;

static int sv_oom(sv *c)
{
    return bb_error_set(c->err, BB_ENOMEM, "%s: out of memory while encoding", c->name);
}

/* Allocate a protobuf-c message and run its init. */
#define SV_NEW(c, var, Type, INIT)                       \
    do {                                                 \
        (var) = bb_arena_alloc((c)->a, sizeof(Type));    \
        if (!(var))                                      \
            return sv_oom(c);                            \
        Type init_ = INIT;                               \
        *(var) = init_;                                  \
    } while (0)

/* Allocate a pointer/value array of count elements into arr, n_arr. */
#define SV_ARR(c, arr, narr, count)                                         \
    do {                                                                    \
        size_t n_ = (count);                                                \
        (arr) = n_ ? bb_arena_calloc((c)->a, n_, sizeof *(arr)) : NULL;     \
        if (n_ && !(arr))                                                   \
            return sv_oom(c);                                               \
        (narr) = n_;                                                        \
    } while (0)

static char *sv_str(const char *s)
{
    return (char *)s; /* protobuf-c only reads it while packing */
}

static ProtobufCBinaryData sv_bytes(const bb_bytes *b)
{
    ProtobufCBinaryData d = {b->len, b->data};
    return d;
}

static int sv_kv(sv *c, Onnx__StringStringEntryProto ***arr, size_t *narr, const bb_kv_list *l)
{
    SV_ARR(c, *arr, *narr, l->n);
    for (size_t i = 0; i < l->n; i++) {
        Onnx__StringStringEntryProto *e;
        SV_NEW(c, e, Onnx__StringStringEntryProto, ONNX__STRING_STRING_ENTRY_PROTO__INIT);
        e->key = sv_str(l->v[i].key);
        e->value = sv_str(l->v[i].value);
        (*arr)[i] = e;
    }
    return BB_OK;
}

static int sv_strs(sv *c, char ***arr, size_t *narr, const bb_str_list *l)
{
    SV_ARR(c, *arr, *narr, l->n);
    for (size_t i = 0; i < l->n; i++)
        (*arr)[i] = sv_str(l->v[i] ? l->v[i] : "");
    return BB_OK;
}

static int sv_opsets(sv *c, Onnx__OperatorSetIdProto ***arr, size_t *narr,
                     const bb_opset_list *l)
{
    SV_ARR(c, *arr, *narr, l->n);
    for (size_t i = 0; i < l->n; i++) {
        Onnx__OperatorSetIdProto *o;
        SV_NEW(c, o, Onnx__OperatorSetIdProto, ONNX__OPERATOR_SET_ID_PROTO__INIT);
        o->domain = sv_str(l->v[i].domain);
        o->has_version = 1;
        o->version = l->v[i].version;
        (*arr)[i] = o;
    }
    return BB_OK;
}

/* Emit n verbatim sub-messages as field num of m. Each is scanned against
 * its schema first so a pass cannot make us write an unloadable file. */
static int sv_verbatim(sv *c, ProtobufCMessage *m, uint32_t num,
                       const ProtobufCMessageDescriptor *d, const char *what,
                       const bb_bytes *v, size_t n)
{
    if (!n)
        return BB_OK;
    size_t old = m->n_unknown_fields;
    ProtobufCMessageUnknownField *u = bb_arena_calloc(c->a, old + n, sizeof *u);
    if (!u)
        return sv_oom(c);
    if (old)
        memcpy(u, m->unknown_fields, old * sizeof *u);
    for (size_t i = 0; i < n; i++) {
        if (v[i].len) {
            bb_error sub;
            char label[160];
            snprintf(label, sizeof label, "%s[%zu]", what, i);
            if (bb__pb_scan(v[i].data, v[i].len, label, d, d->short_name, &sub) != BB_OK)
                return bb_error_set(c->err, BB_EINVAL, "%s: verbatim %s is not a valid %s: %s",
                                    c->name, label, d->short_name, sub.msg);
        }
        uint8_t hdr[BB_UVARINT_MAX_U64];
        size_t h = bb_uvarint_encode(v[i].len, hdr); /* protobuf's varint encoding too */
        uint8_t *data = bb_arena_alloc(c->a, h + v[i].len);
        if (!data)
            return sv_oom(c);
        memcpy(data, hdr, h);
        if (v[i].len)
            memcpy(data + h, v[i].data, v[i].len);
        u[old + i].tag = num;
        u[old + i].wire_type = PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED;
        u[old + i].len = h + v[i].len;
        u[old + i].data = data;
    }
    m->unknown_fields = u;
    m->n_unknown_fields = old + n;
    return BB_OK;
}

/* ---- tensors and types -------------------------------------------------- */

static int sv_tensor(sv *c, const bb_tensor_proto *t, Onnx__TensorProto **out)
{
    Onnx__TensorProto *p;
    SV_NEW(c, p, Onnx__TensorProto, ONNX__TENSOR_PROTO__INIT);
    p->name = sv_str(t->name);
    p->doc_string = sv_str(t->doc_string);
    if (t->data_type) {
        p->has_data_type = 1;
        p->data_type = t->data_type;
    }
    p->n_dims = t->dims.n;
    p->dims = t->dims.v;
    if (t->has_segment) {
        SV_NEW(c, p->segment, Onnx__TensorProto__Segment, ONNX__TENSOR_PROTO__SEGMENT__INIT);
        p->segment->has_begin = p->segment->has_end = 1;
        p->segment->begin = t->segment_begin;
        p->segment->end = t->segment_end;
    }
    if (t->has_raw_data) {
        p->has_raw_data = 1;
        p->raw_data = sv_bytes(&t->raw_data);
    }
    SV_ARR(c, p->string_data, p->n_string_data, t->string_data.n);
    for (size_t i = 0; i < t->string_data.n; i++)
        p->string_data[i] = sv_bytes(&t->string_data.v[i]);
    TRY(sv_kv(c, &p->external_data, &p->n_external_data, &t->external_data));
    if (t->has_data_location) {
        p->has_data_location = 1;
        p->data_location = (Onnx__TensorProto__DataLocation)t->data_location;
    }
    TRY(sv_kv(c, &p->metadata_props, &p->n_metadata_props, &t->metadata));
    *out = p;
    return BB_OK;
}

static int sv_shape(sv *c, const bb_type_proto *t, Onnx__TensorShapeProto **out)
{
    *out = NULL;
    if (!t->has_shape)
        return BB_OK;
    Onnx__TensorShapeProto *s;
    SV_NEW(c, s, Onnx__TensorShapeProto, ONNX__TENSOR_SHAPE_PROTO__INIT);
    SV_ARR(c, s->dim, s->n_dim, t->shape.n);
    for (size_t i = 0; i < t->shape.n; i++) {
        const bb_dim *d = &t->shape.v[i];
        Onnx__TensorShapeProto__Dimension *o;
        SV_NEW(c, o, Onnx__TensorShapeProto__Dimension, ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT);
        if (d->has_value) {
            o->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            o->dim_value = d->value;
        } else if (d->param) {
            o->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            o->dim_param = sv_str(d->param);
        }
        o->denotation = sv_str(d->denotation);
        s->dim[i] = o;
    }
    *out = s;
    return BB_OK;
}

static int sv_type(sv *c, const bb_type_proto *t, unsigned depth, Onnx__TypeProto **out)
{
    *out = NULL;
    if (!t)
        return BB_OK;
    if (depth > MAX_MSG_DEPTH)
        return bb_error_set(c->err, BB_ELIMIT, "%s: type nested deeper than %d", c->name,
                            MAX_MSG_DEPTH);
    Onnx__TypeProto *p;
    SV_NEW(c, p, Onnx__TypeProto, ONNX__TYPE_PROTO__INIT);
    p->denotation = sv_str(t->denotation);
    switch (t->kind) {
    case BB_TP_TENSOR: {
        Onnx__TypeProto__Tensor *x;
        SV_NEW(c, x, Onnx__TypeProto__Tensor, ONNX__TYPE_PROTO__TENSOR__INIT);
        x->has_elem_type = t->elem_type != 0;
        x->elem_type = t->elem_type;
        TRY(sv_shape(c, t, &x->shape));
        p->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
        p->tensor_type = x;
        break;
    }
    case BB_TP_SPARSE_TENSOR: {
        Onnx__TypeProto__SparseTensor *x;
        SV_NEW(c, x, Onnx__TypeProto__SparseTensor, ONNX__TYPE_PROTO__SPARSE_TENSOR__INIT);
        x->has_elem_type = t->elem_type != 0;
        x->elem_type = t->elem_type;
        TRY(sv_shape(c, t, &x->shape));
        p->value_case = ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE;
        p->sparse_tensor_type = x;
        break;
    }
    case BB_TP_SEQUENCE: {
        Onnx__TypeProto__Sequence *x;
        SV_NEW(c, x, Onnx__TypeProto__Sequence, ONNX__TYPE_PROTO__SEQUENCE__INIT);
        TRY(sv_type(c, t->elem, depth + 1, &x->elem_type));
        p->value_case = ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
        p->sequence_type = x;
        break;
    }
    case BB_TP_OPTIONAL: {
        Onnx__TypeProto__Optional *x;
        SV_NEW(c, x, Onnx__TypeProto__Optional, ONNX__TYPE_PROTO__OPTIONAL__INIT);
        TRY(sv_type(c, t->elem, depth + 1, &x->elem_type));
        p->value_case = ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE;
        p->optional_type = x;
        break;
    }
    case BB_TP_MAP: {
        Onnx__TypeProto__Map *x;
        SV_NEW(c, x, Onnx__TypeProto__Map, ONNX__TYPE_PROTO__MAP__INIT);
        x->has_key_type = t->map_key_type != 0;
        x->key_type = t->map_key_type;
        TRY(sv_type(c, t->elem, depth + 1, &x->value_type));
        p->value_case = ONNX__TYPE_PROTO__VALUE_MAP_TYPE;
        p->map_type = x;
        break;
    }
    case BB_TP_OPAQUE: {
        Onnx__TypeProto__Opaque *x;
        SV_NEW(c, x, Onnx__TypeProto__Opaque, ONNX__TYPE_PROTO__OPAQUE__INIT);
        x->domain = sv_str(t->opaque_domain);
        x->name = sv_str(t->opaque_name);
        p->value_case = ONNX__TYPE_PROTO__VALUE_OPAQUE_TYPE;
        p->opaque_type = x;
        break;
    }
    case BB_TP_NONE:
    default:
        break;
    }
    *out = p;
    return BB_OK;
}

static int sv_value_infos(sv *c, Onnx__ValueInfoProto ***arr, size_t *narr,
                          const bb_value_info_list *l)
{
    SV_ARR(c, *arr, *narr, l->n);
    for (size_t i = 0; i < l->n; i++) {
        const bb_value_info *vi = l->v[i];
        Onnx__ValueInfoProto *p;
        SV_NEW(c, p, Onnx__ValueInfoProto, ONNX__VALUE_INFO_PROTO__INIT);
        if (vi) {
            p->name = sv_str(vi->name);
            TRY(sv_type(c, vi->type, 0, &p->type));
            p->doc_string = sv_str(vi->doc_string);
            TRY(sv_kv(c, &p->metadata_props, &p->n_metadata_props, &vi->metadata));
        }
        (*arr)[i] = p;
    }
    return BB_OK;
}

/* ---- attributes, nodes, graphs, functions -------------------------------- */

static int sv_graph(sv *c, const bb_graph *g, unsigned depth, Onnx__GraphProto **out);

static int sv_attr(sv *c, const bb_attr *at, unsigned depth, Onnx__AttributeProto **out)
{
    Onnx__AttributeProto *p;
    SV_NEW(c, p, Onnx__AttributeProto, ONNX__ATTRIBUTE_PROTO__INIT);
    p->name = sv_str(at->name);
    p->ref_attr_name = sv_str(at->ref_attr_name);
    p->doc_string = sv_str(at->doc_string);
    if (at->type != BB_ATTR_UNDEFINED) {
        p->has_type = 1;
        p->type = (Onnx__AttributeProto__AttributeType)at->type;
    }
    /* A reference (ref_attr_name) carries no value of its own. */
    if (!at->ref_attr_name) {
        if (at->type == BB_ATTR_FLOAT) {
            p->has_f = 1;
            p->f = at->f;
        } else if (at->type == BB_ATTR_INT) {
            p->has_i = 1;
            p->i = at->i;
        }
    }
    if (at->has_s) {
        p->has_s = 1;
        p->s = sv_bytes(&at->s);
    }
    if (at->t)
        TRY(sv_tensor(c, at->t, &p->t));
    if (at->g)
        TRY(sv_graph(c, at->g, depth + 1, &p->g));
    if (at->tp)
        TRY(sv_type(c, at->tp, 0, &p->tp));
    if (at->has_sparse_tensor)
        TRY(sv_verbatim(c, &p->base, 22, &onnx__sparse_tensor_proto__descriptor,
                        "attribute sparse_tensor", &at->sparse_tensor, 1));
    p->n_floats = at->floats.n;
    p->floats = at->floats.v;
    p->n_ints = at->ints.n;
    p->ints = at->ints.v;
    SV_ARR(c, p->strings, p->n_strings, at->strings.n);
    for (size_t i = 0; i < at->strings.n; i++)
        p->strings[i] = sv_bytes(&at->strings.v[i]);
    SV_ARR(c, p->tensors, p->n_tensors, at->tensors.n);
    for (size_t i = 0; i < at->tensors.n; i++)
        TRY(sv_tensor(c, at->tensors.v[i], &p->tensors[i]));
    SV_ARR(c, p->graphs, p->n_graphs, at->graphs.n);
    for (size_t i = 0; i < at->graphs.n; i++)
        TRY(sv_graph(c, at->graphs.v[i], depth + 1, &p->graphs[i]));
    TRY(sv_verbatim(c, &p->base, 23, &onnx__sparse_tensor_proto__descriptor,
                    "attribute sparse_tensors", at->sparse_tensors.v, at->sparse_tensors.n));
    SV_ARR(c, p->type_protos, p->n_type_protos, at->type_protos.n);
    for (size_t i = 0; i < at->type_protos.n; i++)
        TRY(sv_type(c, at->type_protos.v[i], 0, &p->type_protos[i]));
    *out = p;
    return BB_OK;
}

static int sv_attrs(sv *c, Onnx__AttributeProto ***arr, size_t *narr, const bb_attr_list *l,
                    unsigned depth)
{
    SV_ARR(c, *arr, *narr, l->n);
    for (size_t i = 0; i < l->n; i++)
        TRY(sv_attr(c, l->v[i], depth, &(*arr)[i]));
    return BB_OK;
}

static int sv_nodes(sv *c, Onnx__NodeProto ***arr, size_t *narr, const bb_node_list *l,
                    unsigned depth)
{
    SV_ARR(c, *arr, *narr, l->n);
    for (size_t i = 0; i < l->n; i++) {
        const bb_node *n = l->v[i];
        Onnx__NodeProto *p;
        SV_NEW(c, p, Onnx__NodeProto, ONNX__NODE_PROTO__INIT);
        p->name = sv_str(n->name);
        p->op_type = sv_str(n->op_type);
        p->domain = sv_str(n->domain);
        p->overload = sv_str(n->overload);
        p->doc_string = sv_str(n->doc_string);
        TRY(sv_strs(c, &p->input, &p->n_input, &n->inputs));
        TRY(sv_strs(c, &p->output, &p->n_output, &n->outputs));
        TRY(sv_attrs(c, &p->attribute, &p->n_attribute, &n->attrs, depth));
        TRY(sv_kv(c, &p->metadata_props, &p->n_metadata_props, &n->metadata));
        TRY(sv_verbatim(c, &p->base, 10, &onnx__node_device_configuration_proto__descriptor,
                        "node device_configurations", n->device_configurations.v,
                        n->device_configurations.n));
        (*arr)[i] = p;
    }
    return BB_OK;
}

static int sv_graph(sv *c, const bb_graph *g, unsigned depth, Onnx__GraphProto **out)
{
    if (depth > BB_MODEL_MAX_GRAPH_DEPTH)
        return bb_error_set(c->err, BB_ELIMIT, "%s: graphs nested deeper than %d", c->name,
                            BB_MODEL_MAX_GRAPH_DEPTH);
    Onnx__GraphProto *p;
    SV_NEW(c, p, Onnx__GraphProto, ONNX__GRAPH_PROTO__INIT);
    p->name = sv_str(g->name);
    p->doc_string = sv_str(g->doc_string);
    TRY(sv_nodes(c, &p->node, &p->n_node, &g->nodes, depth));
    SV_ARR(c, p->initializer, p->n_initializer, g->initializers.n);
    for (size_t i = 0; i < g->initializers.n; i++)
        TRY(sv_tensor(c, g->initializers.v[i], &p->initializer[i]));
    TRY(sv_value_infos(c, &p->input, &p->n_input, &g->inputs));
    TRY(sv_value_infos(c, &p->output, &p->n_output, &g->outputs));
    TRY(sv_value_infos(c, &p->value_info, &p->n_value_info, &g->value_info));
    TRY(sv_kv(c, &p->metadata_props, &p->n_metadata_props, &g->metadata));
    TRY(sv_verbatim(c, &p->base, 14, &onnx__tensor_annotation__descriptor,
                    "graph quantization_annotation", g->quantization_annotations.v,
                    g->quantization_annotations.n));
    TRY(sv_verbatim(c, &p->base, 15, &onnx__sparse_tensor_proto__descriptor,
                    "graph sparse_initializer", g->sparse_initializers.v,
                    g->sparse_initializers.n));
    *out = p;
    return BB_OK;
}

static int sv_function(sv *c, const bb_function *f, Onnx__FunctionProto **out)
{
    Onnx__FunctionProto *p;
    SV_NEW(c, p, Onnx__FunctionProto, ONNX__FUNCTION_PROTO__INIT);
    p->name = sv_str(f->name);
    p->domain = sv_str(f->domain);
    p->overload = sv_str(f->overload);
    p->doc_string = sv_str(f->doc_string);
    TRY(sv_strs(c, &p->input, &p->n_input, &f->inputs));
    TRY(sv_strs(c, &p->output, &p->n_output, &f->outputs));
    TRY(sv_strs(c, &p->attribute, &p->n_attribute, &f->attributes));
    /* Graphs in a function body are top-level graphs (depth 1), as when
     * the scan reads them back. */
    TRY(sv_attrs(c, &p->attribute_proto, &p->n_attribute_proto, &f->attribute_protos, 0));
    TRY(sv_nodes(c, &p->node, &p->n_node, &f->nodes, 0));
    TRY(sv_opsets(c, &p->opset_import, &p->n_opset_import, &f->opset_imports));
    TRY(sv_value_infos(c, &p->value_info, &p->n_value_info, &f->value_info));
    TRY(sv_kv(c, &p->metadata_props, &p->n_metadata_props, &f->metadata));
    *out = p;
    return BB_OK;
}

static int sv_model(sv *c, const bb_model *m, Onnx__ModelProto **out)
{
    Onnx__ModelProto *p;
    SV_NEW(c, p, Onnx__ModelProto, ONNX__MODEL_PROTO__INIT);
    p->has_ir_version = 1; /* "This field MUST be present." */
    p->ir_version = m->ir_version;
    TRY(sv_opsets(c, &p->opset_import, &p->n_opset_import, &m->opset_imports));
    p->producer_name = sv_str(m->producer_name);
    p->producer_version = sv_str(m->producer_version);
    p->domain = sv_str(m->domain);
    if (m->has_model_version) {
        p->has_model_version = 1;
        p->model_version = m->model_version;
    }
    p->doc_string = sv_str(m->doc_string);
    if (m->graph)
        TRY(sv_graph(c, m->graph, 1, &p->graph));
    TRY(sv_kv(c, &p->metadata_props, &p->n_metadata_props, &m->metadata));
    SV_ARR(c, p->functions, p->n_functions, m->functions.n);
    for (size_t i = 0; i < m->functions.n; i++)
        TRY(sv_function(c, m->functions.v[i], &p->functions[i]));
    TRY(sv_verbatim(c, &p->base, 20, &onnx__training_info_proto__descriptor,
                    "model training_info", m->training_info.v, m->training_info.n));
    TRY(sv_verbatim(c, &p->base, 26, &onnx__device_configuration_proto__descriptor,
                    "model configuration", m->configuration.v, m->configuration.n));
    *out = p;
    return BB_OK;
}

/* Pack a built message into a malloc'd buffer. */
static int pack_malloc(sv *c, const ProtobufCMessage *pm, uint8_t **out, size_t *out_len)
{
    size_t n = protobuf_c_message_get_packed_size(pm);
    if (n > BB_MODEL_MAX_BYTES)
        return bb_error_set(c->err, BB_ELIMIT, "%s: encodes to %zu bytes, over the %zu-byte "
                            "limit", c->name, n, (size_t)BB_MODEL_MAX_BYTES);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        return sv_oom(c);
    size_t w = protobuf_c_message_pack(pm, buf);
    if (w != n) { /* cannot happen with a consistent message */
        free(buf);
        return bb_error_set(c->err, BB_EINVAL, "%s: encoder wrote %zu of %zu bytes", c->name, w,
                            n);
    }
    *out = buf;
    *out_len = n;
    return BB_OK;
}

/* ======================================================================= */
/* Public: save                                                            */
/* ======================================================================= */

int bb_model_save_mem(const bb_model *m, uint8_t **out, size_t *out_len, bb_error *err)
{
    if (!m || !out || !out_len)
        return bb_error_set(err, BB_EINVAL, "bb_model_save_mem: NULL argument");
    *out = NULL;
    *out_len = 0;
    sv c = {bb_arena_create(), "model", err};
    if (!c.a)
        return bb_error_set(err, BB_ENOMEM, "model: out of memory");
    Onnx__ModelProto *p = NULL;
    int rc = sv_model(&c, m, &p);
    if (!rc)
        rc = pack_malloc(&c, &p->base, out, out_len);
    bb_arena_destroy(c.a);
    /* Never hand out bytes the loader would refuse (nesting limits). */
    if (!rc && (rc = bb__pb_scan(*out, *out_len, "model", &onnx__model_proto__descriptor,
                              "an ONNX model", err)) != BB_OK) {
        free(*out);
        *out = NULL;
        *out_len = 0;
    }
    return rc;
}

int bb_tensor_proto_encode(const bb_tensor_proto *t, uint8_t **out, size_t *out_len,
                           bb_error *err)
{
    if (!t || !out || !out_len)
        return bb_error_set(err, BB_EINVAL, "bb_tensor_proto_encode: NULL argument");
    *out = NULL;
    *out_len = 0;
    char label[160];
    snprintf(label, sizeof label, "tensor '%s'", t->name ? t->name : "");
    sv c = {bb_arena_create(), label, err};
    if (!c.a)
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", label);
    Onnx__TensorProto *p = NULL;
    int rc = sv_tensor(&c, t, &p);
    if (!rc)
        rc = pack_malloc(&c, &p->base, out, out_len);
    bb_arena_destroy(c.a);
    return rc;
}

int bb_model_save_file(const bb_model *m, const char *path, bb_error *err)
{
    if (!m || !path)
        return bb_error_set(err, BB_EINVAL, "bb_model_save_file: NULL argument");
    uint8_t *buf;
    size_t len;
    int rc = bb_model_save_mem(m, &buf, &len, err);
    if (rc) {
        bb_error_prefix(err, "%s", path);
        return rc;
    }
    rc = bb_model_write_file(path, buf, len, err);
    free(buf);
    return rc;
}

int bb_model_write_file(const char *path, const uint8_t *buf, size_t len, bb_error *err)
{
    if (!path || (!buf && len))
        return bb_error_set(err, BB_EINVAL, "bb_model_write_file: NULL argument");
    int rc = BB_OK;
    /* Write a sibling temp file and rename it over path, so readers see
     * the old file or the new one, never half of one. */
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 64);
    if (!tmp)
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", path);
    char eb[128];
    int fd = -1, e = 0;
    for (unsigned attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(tmp, plen + 64, "%s.tmp.%ld.%u", path, (long)getpid(), attempt);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        e = errno;
        if (fd < 0 && e != EEXIST)
            break;
    }
    if (fd < 0) {
        rc = bb_error_set(err, BB_EIO, "%s: cannot create %s: %s", path, tmp,
                          errstr(e, eb, sizeof eb));
        free(tmp);
        return rc;
    }
    const char *step = NULL;
    if (bb_write_all(fd, buf, len) != 0)
        step = "write";
    else if (fsync(fd) != 0)
        step = "fsync";
    e = errno;
    if (close(fd) != 0 && !step) {
        step = "close";
        e = errno;
    }
    if (!step && rename(tmp, path) != 0) {
        step = "rename";
        e = errno;
    }
    if (step) {
        unlink(tmp);
        rc = bb_error_set(err, BB_EIO, "%s: %s failed: %s", path, step, errstr(e, eb, sizeof eb));
    }
    free(tmp);
    return rc;
}
