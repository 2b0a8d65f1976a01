/*
 * dump.c — the readable text form of a model (bb_model_dump) and of one
 * TypeProto (bb_type_proto_str), as printed by `bbc dump`.
 *
 * The output is deterministic (IR order, no addresses, no timestamps) so
 * tests can compare it with golden files. Layout:
 *
 *   model                          header: ir_version, producer, opsets, metadata
 *   function <domain>::<name>      signature, slots, value_info, metadata, nodes
 *   graph "<name>"                 inputs/outputs, initializers, nodes
 *
 * A node is one line, `[i] <domain>::<op_type> "<name>" (ins) -> (outs)`,
 * followed by its attributes and metadata one per line, indented. Strings
 * that are printable UTF-8 are printed quoted; other bytes as hex, cut
 * after HEX_MAX bytes with the full length.
 */
#include "bb/model_io.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

#define HEX_MAX 32
/* TypeProtos nest (seq(seq(...))); deeper than this prints "...". */
#define TYPE_DEPTH_MAX 32

/* ---- bounded string building for bb_type_proto_str ------------------------ */

typedef struct sbuf {
    char *buf;
    size_t cap, len;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    if (b->len + 1 >= b->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->buf + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    b->len += (size_t)n;
    if (b->len >= b->cap)
        b->len = b->cap - 1; /* truncated; vsnprintf wrote the NUL */
}

static const char *elem_name(int32_t dt)
{
    return bb_dtype_name(dt);
}

static void type_str(sbuf *b, const bb_type_proto *t, int depth)
{
    if (!t) {
        sb_printf(b, "?");
        return;
    }
    if (depth > TYPE_DEPTH_MAX) {
        sb_printf(b, "...");
        return;
    }
    switch (t->kind) {
    case BB_TP_TENSOR:
    case BB_TP_SPARSE_TENSOR:
        sb_printf(b, "%s(%s)", t->kind == BB_TP_TENSOR ? "tensor" : "sparse_tensor",
                  elem_name(t->elem_type));
        if (t->has_shape) {
            sb_printf(b, "[");
            for (size_t i = 0; i < t->shape.n; i++) {
                const bb_dim *d = &t->shape.v[i];
                if (i)
                    sb_printf(b, ",");
                if (d->has_value)
                    sb_printf(b, "%" PRId64, d->value);
                else if (d->param)
                    sb_printf(b, "%s", d->param);
                else
                    sb_printf(b, "?");
            }
            sb_printf(b, "]");
        }
        break;
    case BB_TP_SEQUENCE:
    case BB_TP_OPTIONAL:
        sb_printf(b, "%s(", t->kind == BB_TP_SEQUENCE ? "seq" : "optional");
        type_str(b, t->elem, depth + 1);
        sb_printf(b, ")");
        break;
    case BB_TP_MAP:
        sb_printf(b, "map(%s,", elem_name(t->map_key_type));
        type_str(b, t->elem, depth + 1);
        sb_printf(b, ")");
        break;
    case BB_TP_OPAQUE:
        if (t->opaque_domain && t->opaque_domain[0])
            sb_printf(b, "opaque(%s.%s)", t->opaque_domain,
                      t->opaque_name ? t->opaque_name : "");
        else
            sb_printf(b, "opaque(%s)", t->opaque_name ? t->opaque_name : "");
        break;
    case BB_TP_NONE:
    default:
        sb_printf(b, "none");
        break;
    }
}

char *bb_type_proto_str(const bb_type_proto *t, char *buf, size_t cap)
{
    if (!buf || cap == 0)
        return buf;
    sbuf b = {buf, cap, 0};
    buf[0] = 0;
    type_str(&b, t, 0);
    return buf;
}

/* ---- printing strings and bytes ------------------------------------------ */

/* Printable: valid UTF-8 without control characters other than \t \n \r. */
static bool printable(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n;) {
        if (p[i] < 0x20 && p[i] != '\t' && p[i] != '\n' && p[i] != '\r')
            return false;
        if (p[i] == 0x7f)
            return false;
        size_t l = bb__utf8_len(p + i, n - i);
        if (!l)
            return false;
        i += l;
    }
    return true;
}

static void put_quoted(FILE *out, const uint8_t *p, size_t n)
{
    fputc('"', out);
    for (size_t i = 0; i < n; i++) {
        switch (p[i]) {
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\n': fputs("\\n", out); break;
        case '\t': fputs("\\t", out); break;
        case '\r': fputs("\\r", out); break;
        default: fputc(p[i], out); break;
        }
    }
    fputc('"', out);
}

/* Printable bytes as a quoted string, others as <hex ...>. */
static void put_bytes(FILE *out, const uint8_t *p, size_t n)
{
    if (!p)
        n = 0;
    if (n == 0 || printable(p, n)) {
        put_quoted(out, p, n);
        return;
    }
    fputs("<hex ", out);
    for (size_t i = 0; i < n && i < HEX_MAX; i++)
        fprintf(out, "%02x", p[i]);
    if (n > HEX_MAX)
        fputs("...", out);
    fprintf(out, " (%zu bytes)>", n);
}

static void put_str(FILE *out, const char *s)
{
    if (!s)
        fputs("(none)", out);
    else
        put_bytes(out, (const uint8_t *)s, strlen(s));
}

/* Identifiers (names in lists) print bare unless they need quoting. */
static void put_name(FILE *out, const char *s)
{
    if (!s) {
        fputs("(none)", out);
        return;
    }
    bool bare = s[0] != 0;
    for (const char *c = s; *c && bare; c++)
        if ((unsigned char)*c <= ' ' || *c == ',' || *c == '(' || *c == ')' || *c == '"' ||
            *c == '\\' || (unsigned char)*c >= 0x7f)
            bare = false;
    if (bare)
        fputs(s, out);
    else
        put_str(out, s);
}

static void put_name_list(FILE *out, const bb_str_list *l)
{
    fputc('(', out);
    for (size_t i = 0; i < l->n; i++) {
        if (i)
            fputs(", ", out);
        put_name(out, l->v[i]);
    }
    fputc(')', out);
}

static void indent(FILE *out, int n)
{
    fprintf(out, "%*s", n, "");
}

static const char *domain_name(const char *d)
{
    return d && d[0] ? d : "ai.onnx";
}

/* ---- pieces -------------------------------------------------------------- */

static void dump_kv(FILE *out, int ind, const char *label, const bb_kv_list *l)
{
    if (!l->n)
        return;
    indent(out, ind);
    fprintf(out, "%s:\n", label);
    for (size_t i = 0; i < l->n; i++) {
        indent(out, ind + 2);
        put_name(out, l->v[i].key);
        fputs(" = ", out);
        put_str(out, l->v[i].value);
        fputc('\n', out);
    }
}

static void dump_opsets(FILE *out, int ind, const bb_opset_list *l)
{
    if (!l->n)
        return;
    indent(out, ind);
    fputs("opset_import:", out);
    for (size_t i = 0; i < l->n; i++)
        fprintf(out, "%s %s=%" PRId64, i ? "," : "", domain_name(l->v[i].domain),
                l->v[i].version);
    fputc('\n', out);
}

static void dump_doc(FILE *out, int ind, const char *doc)
{
    if (!doc)
        return;
    indent(out, ind);
    fputs("doc_string: ", out);
    put_str(out, doc);
    fputc('\n', out);
}

static void dump_verbatim(FILE *out, int ind, const char *label, const bb_bytes *v, size_t n)
{
    if (!n)
        return;
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += v[i].len;
    indent(out, ind);
    fprintf(out, "%s: %zu kept verbatim (%zu bytes)\n", label, n, total);
}

/* "float[2,3] "w" raw 24 bytes" */
static void tensor_summary(FILE *out, const bb_tensor_proto *t)
{
    if (!t) {
        fputs("(none)", out);
        return;
    }
    fprintf(out, "%s[", bb_dtype_name(t->data_type));
    for (size_t i = 0; i < t->dims.n; i++)
        fprintf(out, "%s%" PRId64, i ? "," : "", t->dims.v[i]);
    fputc(']', out);
    if (t->name) {
        fputc(' ', out);
        put_str(out, t->name);
    }
    if (t->has_data_location && t->data_location == 1) {
        fputs(" external", out);
        const char *loc = bb_kv_get(&t->external_data, "location");
        if (loc) {
            fputs(" location=", out);
            put_str(out, loc);
        }
    } else if (t->data_type == BB_DT_STRING) {
        fprintf(out, " %zu strings", t->string_data.n);
    } else {
        fprintf(out, " %zu bytes", t->raw_data.len);
    }
    if (t->has_segment)
        fprintf(out, " segment=[%" PRId64 ",%" PRId64 ")", t->segment_begin, t->segment_end);
}

static void dump_graph(FILE *out, int ind, const bb_graph *g);

/* Shortest decimal that reads back as the same float ("0.1", not "0.100000001"). */
static void put_float(FILE *out, float v)
{
    char buf[48];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v)
            break;
    }
    fputs(buf, out);
}

static const char *attr_type_name(bb_attr_type t)
{
    static const char *const names[] = {
        "undefined", "float", "int",     "string",        "tensor",         "graph",
        "floats",    "ints",  "strings", "tensors",       "graphs",         "sparse_tensor",
        "sparse_tensors", "type_proto", "type_protos",
    };
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

static void dump_attr(FILE *out, int ind, const bb_attr *at)
{
    char tbuf[256];
    indent(out, ind);
    put_name(out, at->name);
    fprintf(out, ": %s", attr_type_name(at->type));
    if (at->ref_attr_name) {
        fputs(" = @", out);
        put_name(out, at->ref_attr_name);
        fputc('\n', out);
        dump_doc(out, ind + 2, at->doc_string);
        return;
    }
    switch (at->type) {
    case BB_ATTR_GRAPH: /* the graph itself follows, indented */
    case BB_ATTR_TENSORS:
    case BB_ATTR_GRAPHS:
    case BB_ATTR_SPARSE_TENSORS:
        break;
    default:
        fputs(" = ", out);
    }
    switch (at->type) {
    case BB_ATTR_FLOAT:
        put_float(out, at->f);
        break;
    case BB_ATTR_INT:
        fprintf(out, "%" PRId64, at->i);
        break;
    case BB_ATTR_STRING:
        put_bytes(out, at->s.data, at->s.len);
        break;
    case BB_ATTR_TENSOR:
        tensor_summary(out, at->t);
        break;
    case BB_ATTR_GRAPH:
        if (!at->g)
            fputs(" (none)", out);
        break;
    case BB_ATTR_TYPE_PROTO:
        fputs(bb_type_proto_str(at->tp, tbuf, sizeof tbuf), out);
        break;
    case BB_ATTR_SPARSE_TENSOR:
        fprintf(out, "<kept verbatim, %zu bytes>", at->sparse_tensor.len);
        break;
    case BB_ATTR_FLOATS:
        fputc('[', out);
        for (size_t i = 0; i < at->floats.n; i++) {
            fputs(i ? ", " : "", out);
            put_float(out, at->floats.v[i]);
        }
        fputc(']', out);
        break;
    case BB_ATTR_INTS:
        fputc('[', out);
        for (size_t i = 0; i < at->ints.n; i++)
            fprintf(out, "%s%" PRId64, i ? ", " : "", at->ints.v[i]);
        fputc(']', out);
        break;
    case BB_ATTR_STRINGS:
        fputc('[', out);
        for (size_t i = 0; i < at->strings.n; i++) {
            if (i)
                fputs(", ", out);
            put_bytes(out, at->strings.v[i].data, at->strings.v[i].len);
        }
        fputc(']', out);
        break;
    case BB_ATTR_TENSORS:
        fprintf(out, " (%zu)", at->tensors.n);
        break;
    case BB_ATTR_GRAPHS:
        fprintf(out, " (%zu)", at->graphs.n);
        break;
    case BB_ATTR_SPARSE_TENSORS:
        fprintf(out, " (%zu, kept verbatim)", at->sparse_tensors.n);
        break;
    case BB_ATTR_TYPE_PROTOS:
        fputc('[', out);
        for (size_t i = 0; i < at->type_protos.n; i++)
            fprintf(out, "%s%s", i ? ", " : "",
                    bb_type_proto_str(at->type_protos.v[i], tbuf, sizeof tbuf));
        fputc(']', out);
        break;
    default:
        fputs("?", out);
        break;
    }
    fputc('\n', out);
    dump_doc(out, ind + 2, at->doc_string);
    /* Nested payloads go under the attribute line. */
    if (at->type == BB_ATTR_GRAPH && at->g)
        dump_graph(out, ind + 2, at->g);
    if (at->type == BB_ATTR_TENSOR && at->t && at->t->data_type == BB_DT_STRING)
        for (size_t i = 0; i < at->t->string_data.n; i++) {
            indent(out, ind + 2);
            fprintf(out, "[%zu] ", i);
            put_bytes(out, at->t->string_data.v[i].data, at->t->string_data.v[i].len);
            fputc('\n', out);
        }
    for (size_t i = 0; at->type == BB_ATTR_TENSORS && i < at->tensors.n; i++) {
        indent(out, ind + 2);
        fprintf(out, "[%zu] ", i);
        tensor_summary(out, at->tensors.v[i]);
        fputc('\n', out);
    }
    for (size_t i = 0; at->type == BB_ATTR_GRAPHS && i < at->graphs.n; i++)
        if (at->graphs.v[i])
            dump_graph(out, ind + 2, at->graphs.v[i]);
}

static void dump_node(FILE *out, int ind, size_t idx, const bb_node *n)
{
    indent(out, ind);
    fprintf(out, "[%zu] %s::", idx, domain_name(n->domain));
    put_name(out, n->op_type);
    fputc(' ', out);
    put_str(out, n->name ? n->name : "");
    fputc(' ', out);
    put_name_list(out, &n->inputs);
    fputs(" -> ", out);
    put_name_list(out, &n->outputs);
    fputc('\n', out);
    int sub = ind + (int)snprintf(NULL, 0, "[%zu] ", idx);
    if (n->overload) {
        indent(out, sub);
        fputs("overload: ", out);
        put_str(out, n->overload);
        fputc('\n', out);
    }
    dump_doc(out, sub, n->doc_string);
    for (size_t i = 0; i < n->attrs.n; i++)
        if (n->attrs.v[i])
            dump_attr(out, sub, n->attrs.v[i]);
    for (size_t i = 0; i < n->metadata.n; i++) {
        indent(out, sub);
        fputs("meta ", out);
        put_name(out, n->metadata.v[i].key);
        fputs(" = ", out);
        put_str(out, n->metadata.v[i].value);
        fputc('\n', out);
    }
    dump_verbatim(out, sub, "device_configurations", n->device_configurations.v,
                  n->device_configurations.n);
}

static void dump_value_infos(FILE *out, int ind, const char *label,
                             const bb_value_info_list *l)
{
    char tbuf[512];
    if (!l->n)
        return;
    indent(out, ind);
    fprintf(out, "%s:\n", label);
    for (size_t i = 0; i < l->n; i++) {
        const bb_value_info *vi = l->v[i];
        if (!vi)
            continue;
        indent(out, ind + 2);
        put_name(out, vi->name);
        fprintf(out, ": %s\n", vi->type ? bb_type_proto_str(vi->type, tbuf, sizeof tbuf) : "?");
        dump_doc(out, ind + 4, vi->doc_string);
        dump_kv(out, ind + 4, "metadata", &vi->metadata);
    }
}

static void dump_nodes(FILE *out, int ind, const bb_node_list *l)
{
    if (!l->n)
        return;
    indent(out, ind);
    fprintf(out, "nodes: %zu\n", l->n);
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i])
            dump_node(out, ind, i, l->v[i]);
}

static void dump_graph(FILE *out, int ind, const bb_graph *g)
{
    indent(out, ind);
    fputs("graph ", out);
    put_str(out, g->name ? g->name : "");
    fputc('\n', out);
    ind += 2;
    dump_doc(out, ind, g->doc_string);
    dump_value_infos(out, ind, "inputs", &g->inputs);
    dump_value_infos(out, ind, "outputs", &g->outputs);
    if (g->initializers.n) {
        indent(out, ind);
        fputs("initializers:\n", out);
        for (size_t i = 0; i < g->initializers.n; i++) {
            indent(out, ind + 2);
            tensor_summary(out, g->initializers.v[i]);
            fputc('\n', out);
        }
    }
    dump_verbatim(out, ind, "sparse_initializers", g->sparse_initializers.v,
                  g->sparse_initializers.n);
    dump_value_infos(out, ind, "value_info", &g->value_info);
    dump_verbatim(out, ind, "quantization_annotations", g->quantization_annotations.v,
                  g->quantization_annotations.n);
    dump_kv(out, ind, "metadata", &g->metadata);
    dump_nodes(out, ind, &g->nodes);
}

static void dump_function(FILE *out, const bb_function *f)
{
    fprintf(out, "function %s::", domain_name(f->domain));
    put_name(out, f->name);
    fputc('\n', out);
    if (f->overload) {
        fputs("  overload: ", out);
        put_str(out, f->overload);
        fputc('\n', out);
    }
    dump_doc(out, 2, f->doc_string);
    fputs("  inputs: ", out);
    put_name_list(out, &f->inputs);
    fputs("\n  outputs: ", out);
    put_name_list(out, &f->outputs);
    fputc('\n', out);
    if (f->attributes.n) {
        fputs("  attribute: ", out);
        put_name_list(out, &f->attributes);
        fputc('\n', out);
    }
    if (f->attribute_protos.n) {
        fputs("  attribute_proto:\n", out);
        for (size_t i = 0; i < f->attribute_protos.n; i++)
            if (f->attribute_protos.v[i])
                dump_attr(out, 4, f->attribute_protos.v[i]);
    }
    dump_opsets(out, 2, &f->opset_imports);
    dump_value_infos(out, 2, "value_info", &f->value_info);
    dump_kv(out, 2, "metadata", &f->metadata);
    dump_nodes(out, 2, &f->nodes);
}

void bb_model_dump(const bb_model *m, FILE *out)
{
    fputs("model\n", out);
    fprintf(out, "  ir_version: %" PRId64 "\n", m->ir_version);
    if (m->producer_name || m->producer_version) {
        fputs("  producer: ", out);
        put_str(out, m->producer_name);
        fputc(' ', out);
        put_str(out, m->producer_version);
        fputc('\n', out);
    }
    if (m->domain) {
        fputs("  domain: ", out);
        put_str(out, m->domain);
        fputc('\n', out);
    }
    if (m->has_model_version)
        fprintf(out, "  model_version: %" PRId64 "\n", m->model_version);
    dump_doc(out, 2, m->doc_string);
    dump_opsets(out, 2, &m->opset_imports);
    dump_kv(out, 2, "metadata", &m->metadata);
    dump_verbatim(out, 2, "training_info", m->training_info.v, m->training_info.n);
    dump_verbatim(out, 2, "configuration", m->configuration.v, m->configuration.n);
    fprintf(out, "  functions: %zu\n", m->functions.n);
    for (size_t i = 0; i < m->functions.n; i++) {
        if (!m->functions.v[i])
            continue;
        fputc('\n', out);
        dump_function(out, m->functions.v[i]);
    }
    if (m->graph) {
        fputc('\n', out);
        dump_graph(out, 0, m->graph);
    }
}
