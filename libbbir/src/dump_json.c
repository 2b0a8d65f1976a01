/*
 * dump_json.c — bb_model_dump_json: the model in the canonical protobuf JSON
 * mapping, matching python's
 *   json_format.MessageToDict(m, preserving_proto_field_name=True)
 * for the same ModelProto, so tools and tests can compare the two.
 *
 * Rules (proto2 schema, proto/onnx-ml.proto):
 *   - keys are proto field names, in field-number order;
 *   - absent optional fields and empty repeated fields are omitted;
 *   - int64/uint64 (also sint/fixed variants) are JSON strings, int32/uint32
 *     JSON numbers, bool true/false;
 *   - float fields print the shortest decimal (from 6 significant digits up)
 *     that reads back as the same float32, double fields with 17 digits;
 *     NaN and infinities are the strings "NaN", "Infinity", "-Infinity";
 *   - bytes are standard base64 with padding;
 *   - enums print their value name; a value the schema does not know is
 *     omitted (python keeps it among the unknown fields, which it does not
 *     print); TensorProto.data_type is an int32, so it is a number.
 *
 * The IR does not record presence for every scalar, so presence follows
 * the rules bb_model_save_mem writes by (model_io.c): opset versions
 * always; ir_version, data_type, elem_type, key_type and
 * AttributeProto.type when non-zero; f / i when the attribute's type is
 * FLOAT / INT and it is not a reference; strings when non-NULL. Tensor data
 * that a file stored in a typed field (float_data, int64_data, ...) is
 * normalised into raw_data on load (has_raw_data true), so it prints as
 * raw_data; an in-memory tensor with data but has_raw_data false is printed
 * in the typed field its data_type calls for. Sub-messages
 * the IR keeps verbatim (training_info, sparse tensors, annotations, device
 * configurations) are decoded with the generated protobuf-c descriptors and
 * printed generically.
 */
#include "bb/model_io.h"
#include "bb/le.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx-ml.pb-c.h"
#include "utf8.h"

/* ---- JSON writer ----------------------------------------------------------- */

typedef struct jw {
    FILE *out;
    int depth;
    bool first; /* no element written yet at this level */
} jw;

static void put_indent(jw *w)
{
    fprintf(w->out, "%*s", w->depth * 2, "");
}

static void put_json_string(FILE *out, const uint8_t *p, size_t n);

/* Separator, indentation and "key": for the next element (key NULL in arrays). */
static void jw_key(jw *w, const char *key)
{
    fputs(w->first ? "\n" : ",\n", w->out);
    w->first = false;
    put_indent(w);
    if (key) {
        put_json_string(w->out, (const uint8_t *)key, strlen(key));
        fputs(": ", w->out);
    }
}

static void jw_open(jw *w, const char *key, char c)
{
    jw_key(w, key);
    fputc(c, w->out);
    w->depth++;
    w->first = true;
}

static void jw_close(jw *w, char c)
{
    w->depth--;
    if (!w->first) {
        fputc('\n', w->out);
        put_indent(w);
    }
    fputc(c, w->out);
    w->first = false;
}

/* A JSON string; invalid UTF-8 bytes become U+FFFD so the output stays JSON. */
static void put_json_string(FILE *out, const uint8_t *p, size_t n)
{
    fputc('"', out);
    for (size_t i = 0; i < n;) {
        uint8_t c = p[i];
        if (c < 0x80) {
            switch (c) {
            case '"': fputs("\\\"", out); break;
            case '\\': fputs("\\\\", out); break;
            case '\n': fputs("\\n", out); break;
            case '\r': fputs("\\r", out); break;
            case '\t': fputs("\\t", out); break;
            case '\b': fputs("\\b", out); break;
            case '\f': fputs("\\f", out); break;
            default:
                if (c < 0x20)
                    fprintf(out, "\\u%04x", c);
                else
                    fputc(c, out);
            }
            i++;
            continue;
        }
        size_t l = bb__utf8_len(p + i, n - i);
        if (!l) {
            fputs("\\ufffd", out);
            i++;
        } else {
            fwrite(p + i, 1, l, out);
            i += l;
        }
    }
    fputc('"', out);
}

static void j_str(jw *w, const char *key, const char *s)
{
    jw_key(w, key);
    put_json_string(w->out, (const uint8_t *)s, strlen(s));
}

static void j_opt_str(jw *w, const char *key, const char *s)
{
    if (s)
        j_str(w, key, s);
}

static void j_i64(jw *w, const char *key, int64_t v)
{
    jw_key(w, key);
    fprintf(w->out, "\"%" PRId64 "\"", v);
}

static void j_u64(jw *w, const char *key, uint64_t v)
{
    jw_key(w, key);
    fprintf(w->out, "\"%" PRIu64 "\"", v);
}

static void j_i32(jw *w, const char *key, int32_t v)
{
    jw_key(w, key);
    fprintf(w->out, "%" PRId32, v);
}

static void j_u32(jw *w, const char *key, uint32_t v)
{
    jw_key(w, key);
    fprintf(w->out, "%" PRIu32, v);
}

static bool non_finite(jw *w, double v)
{
    if (isnan(v))
        fputs("\"NaN\"", w->out);
    else if (isinf(v))
        fputs(v < 0 ? "\"-Infinity\"" : "\"Infinity\"", w->out);
    else
        return false;
    return true;
}

/* python's type_checkers.ToShortestFloat: fewest digits, starting at 6, whose
 * decimal reads back (through a double) as the same float32. */
static void j_float(jw *w, const char *key, float v)
{
    jw_key(w, key);
    if (non_finite(w, v))
        return;
    char buf[64];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)v);
        if ((float)strtod(buf, NULL) == v)
            break;
    }
    fputs(buf, w->out);
}

static void j_double(jw *w, const char *key, double v)
{
    jw_key(w, key);
    if (!non_finite(w, v))
        fprintf(w->out, "%.17g", v);
}

static void j_bool(jw *w, const char *key, bool v)
{
    jw_key(w, key);
    fputs(v ? "true" : "false", w->out);
}

static void j_base64(jw *w, const char *key, const uint8_t *p, size_t n)
{
    static const char tbl[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    jw_key(w, key);
    fputc('"', w->out);
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        fputc(tbl[v >> 18], w->out);
        fputc(tbl[(v >> 12) & 63], w->out);
        fputc(tbl[(v >> 6) & 63], w->out);
        fputc(tbl[v & 63], w->out);
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)p[i] << 16;
        fputc(tbl[v >> 18], w->out);
        fputc(tbl[(v >> 12) & 63], w->out);
        fputs("==", w->out);
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
        fputc(tbl[v >> 18], w->out);
        fputc(tbl[(v >> 12) & 63], w->out);
        fputc(tbl[(v >> 6) & 63], w->out);
        fputc('=', w->out);
    }
    fputc('"', w->out);
}

static void j_bytes(jw *w, const char *key, const bb_bytes *b)
{
    j_base64(w, key, b->data, b->data ? b->len : 0);
}

/* ---- generic protobuf-c messages (the verbatim sub-messages) ------------- */

static void gen_message(jw *w, const ProtobufCMessage *msg);

static void gen_value(jw *w, const char *key, const ProtobufCFieldDescriptor *f, const void *p)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        j_i32(w, key, *(const int32_t *)p);
        break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        j_u32(w, key, *(const uint32_t *)p);
        break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        j_i64(w, key, *(const int64_t *)p);
        break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        j_u64(w, key, *(const uint64_t *)p);
        break;
    case PROTOBUF_C_TYPE_FLOAT:
        j_float(w, key, *(const float *)p);
        break;
    case PROTOBUF_C_TYPE_DOUBLE:
        j_double(w, key, *(const double *)p);
        break;
    case PROTOBUF_C_TYPE_BOOL:
        j_bool(w, key, *(const protobuf_c_boolean *)p);
        break;
    case PROTOBUF_C_TYPE_ENUM: {
        const ProtobufCEnumValue *ev =
            protobuf_c_enum_descriptor_get_value(f->descriptor, *(const int *)p);
        j_str(w, key, ev ? ev->name : "");
        break;
    }
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)p;
        j_str(w, key, s ? s : "");
        break;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *b = p;
        j_base64(w, key, b->data, b->data ? b->len : 0);
        break;
    }
    case PROTOBUF_C_TYPE_MESSAGE:
        jw_open(w, key, '{');
        if (*(ProtobufCMessage *const *)p)
            gen_message(w, *(ProtobufCMessage *const *)p);
        jw_close(w, '}');
        break;
    }
}

static size_t gen_elem_size(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_ENUM:
        return sizeof(int);
    default:
        return 4;
    }
}

static bool gen_enum_known(const ProtobufCFieldDescriptor *f, const void *p)
{
    return f->type != PROTOBUF_C_TYPE_ENUM ||
           protobuf_c_enum_descriptor_get_value(f->descriptor, *(const int *)p) != NULL;
}

/* Presence of a singular field, as protobuf-c's packer decides it. */
static bool gen_present(const ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f)
{
    const char *base = (const char *)msg;
    const void *member = base + f->offset;
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
        return *(const uint32_t *)(base + f->quantifier_offset) == f->id;
    if (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE) {
        const void *ptr = *(const void *const *)member;
        return ptr != NULL && ptr != f->default_value;
    }
    if (f->label == PROTOBUF_C_LABEL_REQUIRED)
        return true;
    return *(const protobuf_c_boolean *)(base + f->quantifier_offset);
}

static void gen_message(jw *w, const ProtobufCMessage *msg)
{
    const ProtobufCMessageDescriptor *d = msg->descriptor;
    const char *base = (const char *)msg;
    /* protobuf-c keeps fields sorted by number: the order python prints. */
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)(base + f->quantifier_offset);
            const char *arr = *(const char *const *)(base + f->offset);
            size_t es = gen_elem_size(f->type), shown = 0;
            for (size_t k = 0; k < n; k++)
                shown += gen_enum_known(f, arr + k * es);
            if (!shown)
                continue;
            jw_open(w, f->name, '[');
            for (size_t k = 0; k < n; k++)
                if (gen_enum_known(f, arr + k * es))
                    gen_value(w, NULL, f, arr + k * es);
            jw_close(w, ']');
        } else if (gen_present(msg, f) && gen_enum_known(f, base + f->offset)) {
            gen_value(w, f->name, f, base + f->offset);
        }
    }
}

/* A repeated field of verbatim messages. Bytes that do not decode (the
 * loader accepted them, so this does not happen for loaded models) print
 * as an empty object. */
static void gen_verbatim_list(jw *w, const char *key, const ProtobufCMessageDescriptor *d,
                              const bb_bytes *v, size_t n)
{
    if (!n)
        return;
    jw_open(w, key, '[');
    for (size_t i = 0; i < n; i++) {
        ProtobufCMessage *msg =
            protobuf_c_message_unpack(d, NULL, v[i].data ? v[i].len : 0, v[i].data);
        jw_open(w, NULL, '{');
        if (msg) {
            gen_message(w, msg);
            protobuf_c_message_free_unpacked(msg, NULL);
        }
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

static void gen_verbatim_one(jw *w, const char *key, const ProtobufCMessageDescriptor *d,
                             const bb_bytes *b)
{
    ProtobufCMessage *msg = protobuf_c_message_unpack(d, NULL, b->data ? b->len : 0, b->data);
    jw_open(w, key, '{');
    if (msg) {
        gen_message(w, msg);
        protobuf_c_message_free_unpacked(msg, NULL);
    }
    jw_close(w, '}');
}

/* ---- IR messages ------------------------------------------------------------ */

static void j_str_list(jw *w, const char *key, const bb_str_list *l)
{
    if (!l->n)
        return;
    jw_open(w, key, '[');
    for (size_t i = 0; i < l->n; i++)
        j_str(w, NULL, l->v[i] ? l->v[i] : "");
    jw_close(w, ']');
}

static void j_kv_list(jw *w, const char *key, const bb_kv_list *l)
{
    if (!l->n)
        return;
    jw_open(w, key, '[');
    for (size_t i = 0; i < l->n; i++) {
        jw_open(w, NULL, '{');
        j_opt_str(w, "key", l->v[i].key);
        j_opt_str(w, "value", l->v[i].value);
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

static void j_opsets(jw *w, const char *key, const bb_opset_list *l)
{
    if (!l->n)
        return;
    jw_open(w, key, '[');
    for (size_t i = 0; i < l->n; i++) {
        jw_open(w, NULL, '{');
        j_opt_str(w, "domain", l->v[i].domain);
        j_i64(w, "version", l->v[i].version);
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

static void j_bytes_list(jw *w, const char *key, const bb_bytes *v, size_t n)
{
    if (!n)
        return;
    jw_open(w, key, '[');
    for (size_t i = 0; i < n; i++)
        j_bytes(w, NULL, &v[i]);
    jw_close(w, ']');
}

/* Typed data normalised into raw_data (little-endian), printed back in its
 * typed field. */
static void j_typed_data(jw *w, const bb_tensor_proto *t)
{
    const uint8_t *p = t->raw_data.data;
    size_t len = p ? t->raw_data.len : 0;
    if (!len)
        return;
    switch (t->data_type) {
    case BB_DT_FLOAT:
    case BB_DT_COMPLEX64:
        jw_open(w, "float_data", '[');
        for (size_t i = 0; i + 4 <= len; i += 4) {
            uint32_t u = (uint32_t)bb_le_get(p + i, 4);
            float f;
            memcpy(&f, &u, sizeof f);
            j_float(w, NULL, f);
        }
        jw_close(w, ']');
        break;
    case BB_DT_DOUBLE:
    case BB_DT_COMPLEX128:
        jw_open(w, "double_data", '[');
        for (size_t i = 0; i + 8 <= len; i += 8) {
            uint64_t u = bb_le_get(p + i, 8);
            double d;
            memcpy(&d, &u, sizeof d);
            j_double(w, NULL, d);
        }
        jw_close(w, ']');
        break;
    case BB_DT_INT64:
        jw_open(w, "int64_data", '[');
        for (size_t i = 0; i + 8 <= len; i += 8)
            j_i64(w, NULL, (int64_t)bb_le_get(p + i, 8));
        jw_close(w, ']');
        break;
    case BB_DT_UINT32:
    case BB_DT_UINT64: {
        size_t es = t->data_type == BB_DT_UINT32 ? 4 : 8;
        jw_open(w, "uint64_data", '[');
        for (size_t i = 0; i + es <= len; i += es)
            j_u64(w, NULL, bb_le_get(p + i, es));
        jw_close(w, ']');
        break;
    }
    case BB_DT_INT32:
        jw_open(w, "int32_data", '[');
        for (size_t i = 0; i + 4 <= len; i += 4)
            j_i32(w, NULL, (int32_t)(uint32_t)bb_le_get(p + i, 4));
        jw_close(w, ']');
        break;
    case BB_DT_INT16:
        jw_open(w, "int32_data", '[');
        for (size_t i = 0; i + 2 <= len; i += 2)
            j_i32(w, NULL, (int16_t)(uint16_t)bb_le_get(p + i, 2));
        jw_close(w, ']');
        break;
    case BB_DT_UINT16:
    case BB_DT_FLOAT16:
    case BB_DT_BFLOAT16:
        jw_open(w, "int32_data", '[');
        for (size_t i = 0; i + 2 <= len; i += 2)
            j_i32(w, NULL, (int32_t)bb_le_get(p + i, 2));
        jw_close(w, ']');
        break;
    case BB_DT_INT8:
        jw_open(w, "int32_data", '[');
        for (size_t i = 0; i < len; i++)
            j_i32(w, NULL, (int8_t)p[i]);
        jw_close(w, ']');
        break;
    default: /* one byte per int32 element: uint8, bool, float8s, packed 4-bit pairs */
        jw_open(w, "int32_data", '[');
        for (size_t i = 0; i < len; i++)
            j_i32(w, NULL, p[i]);
        jw_close(w, ']');
        break;
    }
}

static void j_tensor(jw *w, const char *key, const bb_tensor_proto *t)
{
    jw_open(w, key, '{');
    if (!t) {
        jw_close(w, '}');
        return;
    }
    if (t->dims.n) {
        jw_open(w, "dims", '[');
        for (size_t i = 0; i < t->dims.n; i++)
            j_i64(w, NULL, t->dims.v[i]);
        jw_close(w, ']');
    }
    if (t->data_type != 0)
        j_i32(w, "data_type", t->data_type);
    if (t->has_segment) {
        jw_open(w, "segment", '{');
        j_i64(w, "begin", t->segment_begin);
        j_i64(w, "end", t->segment_end);
        jw_close(w, '}');
    }
    bool typed = !t->has_raw_data && t->data_type != BB_DT_STRING;
    if (typed) /* float_data(4), int32_data(5), int64_data(7) come before name(8) */
        switch (t->data_type) {
        case BB_DT_DOUBLE:
        case BB_DT_COMPLEX128:
        case BB_DT_UINT32:
        case BB_DT_UINT64:
            break;
        default:
            if (t->data_type != BB_DT_INT64)
                j_typed_data(w, t);
        }
    j_bytes_list(w, "string_data", t->string_data.v, t->string_data.n);
    if (typed && t->data_type == BB_DT_INT64)
        j_typed_data(w, t);
    j_opt_str(w, "name", t->name);
    if (t->has_raw_data)
        j_bytes(w, "raw_data", &t->raw_data);
    if (typed && (t->data_type == BB_DT_DOUBLE || t->data_type == BB_DT_COMPLEX128 ||
                  t->data_type == BB_DT_UINT32 || t->data_type == BB_DT_UINT64))
        j_typed_data(w, t);
    j_opt_str(w, "doc_string", t->doc_string);
    j_kv_list(w, "external_data", &t->external_data);
    if (t->has_data_location && (t->data_location == 0 || t->data_location == 1))
        j_str(w, "data_location", t->data_location ? "EXTERNAL" : "DEFAULT");
    j_kv_list(w, "metadata_props", &t->metadata);
    jw_close(w, '}');
}

static void j_type(jw *w, const char *key, const bb_type_proto *t);

static void j_shape_type(jw *w, const char *key, const bb_type_proto *t)
{
    jw_open(w, key, '{');
    if (t->elem_type != 0)
        j_i32(w, "elem_type", t->elem_type);
    if (t->has_shape) {
        jw_open(w, "shape", '{');
        if (t->shape.n) {
            jw_open(w, "dim", '[');
            for (size_t i = 0; i < t->shape.n; i++) {
                const bb_dim *d = &t->shape.v[i];
                jw_open(w, NULL, '{');
                if (d->has_value)
                    j_i64(w, "dim_value", d->value);
                else if (d->param)
                    j_str(w, "dim_param", d->param);
                j_opt_str(w, "denotation", d->denotation);
                jw_close(w, '}');
            }
            jw_close(w, ']');
        }
        jw_close(w, '}');
    }
    jw_close(w, '}');
}

static void j_type_value(jw *w, const bb_type_proto *t)
{
    switch (t->kind) {
    case BB_TP_TENSOR:
        j_shape_type(w, "tensor_type", t);
        break;
    case BB_TP_SPARSE_TENSOR:
        j_shape_type(w, "sparse_tensor_type", t);
        break;
    case BB_TP_SEQUENCE:
    case BB_TP_OPTIONAL:
        jw_open(w, t->kind == BB_TP_SEQUENCE ? "sequence_type" : "optional_type", '{');
        if (t->elem)
            j_type(w, "elem_type", t->elem);
        jw_close(w, '}');
        break;
    case BB_TP_MAP:
        jw_open(w, "map_type", '{');
        if (t->map_key_type != 0)
            j_i32(w, "key_type", t->map_key_type);
        if (t->elem)
            j_type(w, "value_type", t->elem);
        jw_close(w, '}');
        break;
    case BB_TP_OPAQUE:
        jw_open(w, "opaque_type", '{');
        j_opt_str(w, "domain", t->opaque_domain);
        j_opt_str(w, "name", t->opaque_name);
        jw_close(w, '}');
        break;
    default:
        break;
    }
}

static void j_type(jw *w, const char *key, const bb_type_proto *t)
{
    jw_open(w, key, '{');
    if (t) {
        /* tensor_type(1), sequence_type(4), map_type(5) precede denotation(6);
         * opaque_type(7), sparse_tensor_type(8), optional_type(9) follow it. */
        bool early = t->kind == BB_TP_TENSOR || t->kind == BB_TP_SEQUENCE ||
                     t->kind == BB_TP_MAP;
        if (early)
            j_type_value(w, t);
        j_opt_str(w, "denotation", t->denotation);
        if (!early)
            j_type_value(w, t);
    }
    jw_close(w, '}');
}

static void j_value_infos(jw *w, const char *key, const bb_value_info_list *l)
{
    if (!l->n)
        return;
    jw_open(w, key, '[');
    for (size_t i = 0; i < l->n; i++) {
        const bb_value_info *vi = l->v[i];
        jw_open(w, NULL, '{');
        if (vi) {
            j_opt_str(w, "name", vi->name);
            if (vi->type)
                j_type(w, "type", vi->type);
            j_opt_str(w, "doc_string", vi->doc_string);
            j_kv_list(w, "metadata_props", &vi->metadata);
        }
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

static void j_graph(jw *w, const char *key, const bb_graph *g);

static const char *attr_type_enum(bb_attr_type t)
{
    static const char *const names[] = {
        "UNDEFINED", "FLOAT",   "INT",     "STRING",        "TENSOR",
        "GRAPH",     "FLOATS",  "INTS",    "STRINGS",       "TENSORS",
        "GRAPHS",    "SPARSE_TENSOR", "SPARSE_TENSORS", "TYPE_PROTO", "TYPE_PROTOS",
    };
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : NULL;
}

/* Presence of the scalar value fields, which the IR does not flag: as the
 * saver writes them (model_io.c), f and i are present when the attribute's
 * type says it holds them and it is not a reference to a parent attribute. */
static bool attr_f_present(const bb_attr *at)
{
    return at->type == BB_ATTR_FLOAT && !at->ref_attr_name;
}

static bool attr_i_present(const bb_attr *at)
{
    return at->type == BB_ATTR_INT && !at->ref_attr_name;
}

static void j_attr(jw *w, const bb_attr *at)
{
    jw_open(w, NULL, '{');
    if (!at) {
        jw_close(w, '}');
        return;
    }
    j_opt_str(w, "name", at->name);
    if (attr_f_present(at))
        j_float(w, "f", at->f);
    if (attr_i_present(at))
        j_i64(w, "i", at->i);
    if (at->has_s)
        j_bytes(w, "s", &at->s);
    if (at->t)
        j_tensor(w, "t", at->t);
    if (at->g)
        j_graph(w, "g", at->g);
    if (at->floats.n) {
        jw_open(w, "floats", '[');
        for (size_t i = 0; i < at->floats.n; i++)
            j_float(w, NULL, at->floats.v[i]);
        jw_close(w, ']');
    }
    if (at->ints.n) {
        jw_open(w, "ints", '[');
        for (size_t i = 0; i < at->ints.n; i++)
            j_i64(w, NULL, at->ints.v[i]);
        jw_close(w, ']');
    }
    j_bytes_list(w, "strings", at->strings.v, at->strings.n);
    if (at->tensors.n) {
        jw_open(w, "tensors", '[');
        for (size_t i = 0; i < at->tensors.n; i++)
            j_tensor(w, NULL, at->tensors.v[i]);
        jw_close(w, ']');
    }
    if (at->graphs.n) {
        jw_open(w, "graphs", '[');
        for (size_t i = 0; i < at->graphs.n; i++)
            j_graph(w, NULL, at->graphs.v[i]);
        jw_close(w, ']');
    }
    j_opt_str(w, "doc_string", at->doc_string);
    if (at->tp)
        j_type(w, "tp", at->tp);
    if (at->type_protos.n) {
        jw_open(w, "type_protos", '[');
        for (size_t i = 0; i < at->type_protos.n; i++)
            j_type(w, NULL, at->type_protos.v[i]);
        jw_close(w, ']');
    }
    if (at->type != BB_ATTR_UNDEFINED && attr_type_enum(at->type))
        j_str(w, "type", attr_type_enum(at->type));
    j_opt_str(w, "ref_attr_name", at->ref_attr_name);
    if (at->has_sparse_tensor)
        gen_verbatim_one(w, "sparse_tensor", &onnx__sparse_tensor_proto__descriptor,
                         &at->sparse_tensor);
    gen_verbatim_list(w, "sparse_tensors", &onnx__sparse_tensor_proto__descriptor,
                      at->sparse_tensors.v, at->sparse_tensors.n);
    jw_close(w, '}');
}

static void j_attr_list(jw *w, const char *key, const bb_attr_list *l)
{
    if (!l->n)
        return;
    jw_open(w, key, '[');
    for (size_t i = 0; i < l->n; i++)
        j_attr(w, l->v[i]);
    jw_close(w, ']');
}

static void j_node(jw *w, const bb_node *n)
{
    jw_open(w, NULL, '{');
    if (n) {
        j_str_list(w, "input", &n->inputs);
        j_str_list(w, "output", &n->outputs);
        j_opt_str(w, "name", n->name);
        j_opt_str(w, "op_type", n->op_type);
        j_attr_list(w, "attribute", &n->attrs);
        j_opt_str(w, "doc_string", n->doc_string);
        j_opt_str(w, "domain", n->domain);
        j_opt_str(w, "overload", n->overload);
        j_kv_list(w, "metadata_props", &n->metadata);
        gen_verbatim_list(w, "device_configurations",
                          &onnx__node_device_configuration_proto__descriptor,
                          n->device_configurations.v, n->device_configurations.n);
    }
    jw_close(w, '}');
}

static void j_node_list(jw *w, const char *key, const bb_node_list *l)
{
    if (!l->n)
        return;
    jw_open(w, key, '[');
    for (size_t i = 0; i < l->n; i++)
        j_node(w, l->v[i]);
    jw_close(w, ']');
}

static void j_graph(jw *w, const char *key, const bb_graph *g)
{
    jw_open(w, key, '{');
    if (!g) {
        jw_close(w, '}');
        return;
    }
    j_node_list(w, "node", &g->nodes);
    j_opt_str(w, "name", g->name);
    if (g->initializers.n) {
        jw_open(w, "initializer", '[');
        for (size_t i = 0; i < g->initializers.n; i++)
            j_tensor(w, NULL, g->initializers.v[i]);
        jw_close(w, ']');
    }
    j_opt_str(w, "doc_string", g->doc_string);
    j_value_infos(w, "input", &g->inputs);
    j_value_infos(w, "output", &g->outputs);
    j_value_infos(w, "value_info", &g->value_info);
    gen_verbatim_list(w, "quantization_annotation", &onnx__tensor_annotation__descriptor,
                      g->quantization_annotations.v, g->quantization_annotations.n);
    gen_verbatim_list(w, "sparse_initializer", &onnx__sparse_tensor_proto__descriptor,
                      g->sparse_initializers.v, g->sparse_initializers.n);
    j_kv_list(w, "metadata_props", &g->metadata);
    jw_close(w, '}');
}

static void j_function(jw *w, const bb_function *f)
{
    jw_open(w, NULL, '{');
    if (f) {
        j_opt_str(w, "name", f->name);
        j_str_list(w, "input", &f->inputs);
        j_str_list(w, "output", &f->outputs);
        j_str_list(w, "attribute", &f->attributes);
        j_node_list(w, "node", &f->nodes);
        j_opt_str(w, "doc_string", f->doc_string);
        j_opsets(w, "opset_import", &f->opset_imports);
        j_opt_str(w, "domain", f->domain);
        j_attr_list(w, "attribute_proto", &f->attribute_protos);
        j_value_infos(w, "value_info", &f->value_info);
        j_opt_str(w, "overload", f->overload);
        j_kv_list(w, "metadata_props", &f->metadata);
    }
    jw_close(w, '}');
}

void bb_model_dump_json(const bb_model *m, FILE *out)
{
    jw w = {out, 1, true};
    fputc('{', out);
    /* The saver always writes ir_version, but a loaded file without one
     * (python omits it) is far likelier than a saved model whose version
     * is 0. */
    if (m->ir_version != 0)
        j_i64(&w, "ir_version", m->ir_version);
    j_opt_str(&w, "producer_name", m->producer_name);
    j_opt_str(&w, "producer_version", m->producer_version);
    j_opt_str(&w, "domain", m->domain);
    if (m->has_model_version)
        j_i64(&w, "model_version", m->model_version);
    j_opt_str(&w, "doc_string", m->doc_string);
    if (m->graph)
        j_graph(&w, "graph", m->graph);
    j_opsets(&w, "opset_import", &m->opset_imports);
    j_kv_list(&w, "metadata_props", &m->metadata);
    gen_verbatim_list(&w, "training_info", &onnx__training_info_proto__descriptor,
                      m->training_info.v, m->training_info.n);
    if (m->functions.n) {
        jw_open(&w, "functions", '[');
        for (size_t i = 0; i < m->functions.n; i++)
            j_function(&w, m->functions.v[i]);
        jw_close(&w, ']');
    }
    gen_verbatim_list(&w, "configuration", &onnx__device_configuration_proto__descriptor,
                      m->configuration.v, m->configuration.n);
    jw_close(&w, '}');
    fputc('\n', out);
}
