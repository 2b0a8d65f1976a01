/*
 * Unit tests for ModelProto / TensorProto load and save (bb/model_io.h):
 * lossless round trip of a model using every IR field, typed tensor data
 * normalisation, every malformed-input class (with status and a message
 * naming the file), file errors, atomic save, and a mutation fuzz loop.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <protobuf-c/protobuf-c.h>

#include "bb/io.h"
#include "bb/model_io.h"
#include "onnx-ml.pb-c.h"
#include "tests/unit/support/model_fixture.h"

/* ---- deep IR comparison (reports the first difference) -------------------- */

static char diff_at[512];

static bool differ(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(diff_at, sizeof diff_at, fmt, ap);
    va_end(ap);
    return false;
}

static bool str_same(const char *x, const char *y)
{
    if (!x || !y)
        return x == y;
    return strcmp(x, y) == 0;
}

#define SAME_STR(where, x, y)                                                            \
    do {                                                                                 \
        if (!str_same((x), (y)))                                                         \
            return differ("%s: '%s' vs '%s'", (where), (x) ? (x) : "(null)",             \
                          (y) ? (y) : "(null)");                                         \
    } while (0)
#define SAME_INT(where, x, y)                                                            \
    do {                                                                                 \
        if ((long long)(x) != (long long)(y))                                            \
            return differ("%s: %lld vs %lld", (where), (long long)(x), (long long)(y));  \
    } while (0)

static bool bytes_same(const char *where, const bb_bytes *x, const bb_bytes *y)
{
    if (x->len != y->len)
        return differ("%s: %zu vs %zu bytes", where, x->len, y->len);
    if (x->len && memcmp(x->data, y->data, x->len))
        return differ("%s: bytes differ", where);
    return true;
}

static bool kv_same(const char *where, const bb_kv_list *x, const bb_kv_list *y)
{
    SAME_INT(where, x->n, y->n);
    for (size_t i = 0; i < x->n; i++) {
        SAME_STR(where, x->v[i].key, y->v[i].key);
        SAME_STR(where, x->v[i].value, y->v[i].value);
    }
    return true;
}

static bool strs_same(const char *where, const bb_str_list *x, const bb_str_list *y)
{
    SAME_INT(where, x->n, y->n);
    for (size_t i = 0; i < x->n; i++)
        SAME_STR(where, x->v[i], y->v[i]);
    return true;
}

static bool opsets_same(const bb_opset_list *x, const bb_opset_list *y)
{
    SAME_INT("opset count", x->n, y->n);
    for (size_t i = 0; i < x->n; i++) {
        SAME_STR("opset domain", x->v[i].domain, y->v[i].domain);
        SAME_INT("opset version", x->v[i].version, y->v[i].version);
    }
    return true;
}

#define BYTES_VEC_SAME(where, x, y)                                   \
    do {                                                              \
        SAME_INT(where, (x)->n, (y)->n);                              \
        for (size_t i_ = 0; i_ < (x)->n; i_++)                        \
            if (!bytes_same(where, &(x)->v[i_], &(y)->v[i_]))         \
                return false;                                         \
    } while (0)

static bool tensor_same(const bb_tensor_proto *x, const bb_tensor_proto *y)
{
    if (!x || !y)
        return x == y ? true : differ("tensor presence");
    SAME_STR("tensor name", x->name, y->name);
    SAME_STR("tensor doc", x->doc_string, y->doc_string);
    SAME_INT("tensor data_type", x->data_type, y->data_type);
    SAME_INT("tensor rank", x->dims.n, y->dims.n);
    for (size_t i = 0; i < x->dims.n; i++)
        SAME_INT("tensor dim", x->dims.v[i], y->dims.v[i]);
    SAME_INT("tensor has_raw_data", x->has_raw_data, y->has_raw_data);
    if (x->has_raw_data && !bytes_same("tensor raw_data", &x->raw_data, &y->raw_data))
        return false;
    BYTES_VEC_SAME("tensor string_data", &x->string_data, &y->string_data);
    SAME_INT("tensor has_segment", x->has_segment, y->has_segment);
    SAME_INT("segment begin", x->segment_begin, y->segment_begin);
    SAME_INT("segment end", x->segment_end, y->segment_end);
    if (!kv_same("external_data", &x->external_data, &y->external_data))
        return false;
    SAME_INT("has_data_location", x->has_data_location, y->has_data_location);
    SAME_INT("data_location", x->data_location, y->data_location);
    return kv_same("tensor metadata", &x->metadata, &y->metadata);
}

static bool type_same(const bb_type_proto *x, const bb_type_proto *y)
{
    if (!x || !y)
        return x == y ? true : differ("type presence");
    SAME_INT("type kind", x->kind, y->kind);
    SAME_STR("type denotation", x->denotation, y->denotation);
    SAME_INT("elem_type", x->elem_type, y->elem_type);
    SAME_INT("has_shape", x->has_shape, y->has_shape);
    SAME_INT("rank", x->shape.n, y->shape.n);
    for (size_t i = 0; i < x->shape.n; i++) {
        SAME_INT("dim has_value", x->shape.v[i].has_value, y->shape.v[i].has_value);
        SAME_INT("dim value", x->shape.v[i].value, y->shape.v[i].value);
        SAME_STR("dim param", x->shape.v[i].param, y->shape.v[i].param);
        SAME_STR("dim denotation", x->shape.v[i].denotation, y->shape.v[i].denotation);
    }
    SAME_INT("map key", x->map_key_type, y->map_key_type);
    SAME_STR("opaque domain", x->opaque_domain, y->opaque_domain);
    SAME_STR("opaque name", x->opaque_name, y->opaque_name);
    return type_same(x->elem, y->elem);
}

static bool vis_same(const char *where, const bb_value_info_list *x, const bb_value_info_list *y)
{
    SAME_INT(where, x->n, y->n);
    for (size_t i = 0; i < x->n; i++) {
        SAME_STR(where, x->v[i]->name, y->v[i]->name);
        SAME_STR(where, x->v[i]->doc_string, y->v[i]->doc_string);
        if (!type_same(x->v[i]->type, y->v[i]->type) ||
            !kv_same(where, &x->v[i]->metadata, &y->v[i]->metadata))
            return false;
    }
    return true;
}

static bool graph_same(const bb_graph *x, const bb_graph *y);

static bool attr_same(const bb_attr *x, const bb_attr *y)
{
    SAME_STR("attr name", x->name, y->name);
    SAME_STR("attr ref", x->ref_attr_name, y->ref_attr_name);
    SAME_STR("attr doc", x->doc_string, y->doc_string);
    SAME_INT("attr type", x->type, y->type);
    if (x->f != y->f)
        return differ("attr %s f: %g vs %g", x->name, x->f, y->f);
    SAME_INT("attr i", x->i, y->i);
    SAME_INT("attr has_s", x->has_s, y->has_s);
    if (x->has_s && !bytes_same("attr s", &x->s, &y->s))
        return false;
    if (!tensor_same(x->t, y->t))
        return false;
    if ((x->g || y->g) && (!x->g || !y->g || !graph_same(x->g, y->g)))
        return x->g && y->g ? false : differ("attr g presence");
    if (!type_same(x->tp, y->tp))
        return false;
    SAME_INT("attr has_sparse", x->has_sparse_tensor, y->has_sparse_tensor);
    if (x->has_sparse_tensor && !bytes_same("attr sparse", &x->sparse_tensor, &y->sparse_tensor))
        return false;
    SAME_INT("floats", x->floats.n, y->floats.n);
    for (size_t i = 0; i < x->floats.n; i++)
        if (x->floats.v[i] != y->floats.v[i])
            return differ("attr %s floats[%zu]", x->name, i);
    SAME_INT("ints", x->ints.n, y->ints.n);
    for (size_t i = 0; i < x->ints.n; i++)
        SAME_INT("ints", x->ints.v[i], y->ints.v[i]);
    BYTES_VEC_SAME("strings", &x->strings, &y->strings);
    SAME_INT("tensors", x->tensors.n, y->tensors.n);
    for (size_t i = 0; i < x->tensors.n; i++)
        if (!tensor_same(x->tensors.v[i], y->tensors.v[i]))
            return false;
    SAME_INT("graphs", x->graphs.n, y->graphs.n);
    for (size_t i = 0; i < x->graphs.n; i++)
        if (!graph_same(x->graphs.v[i], y->graphs.v[i]))
            return false;
    BYTES_VEC_SAME("sparse_tensors", &x->sparse_tensors, &y->sparse_tensors);
    SAME_INT("type_protos", x->type_protos.n, y->type_protos.n);
    for (size_t i = 0; i < x->type_protos.n; i++)
        if (!type_same(x->type_protos.v[i], y->type_protos.v[i]))
            return false;
    return true;
}

static bool attrs_same(const bb_attr_list *x, const bb_attr_list *y)
{
    SAME_INT("attr count", x->n, y->n);
    for (size_t i = 0; i < x->n; i++)
        if (!attr_same(x->v[i], y->v[i]))
            return false;
    return true;
}

static bool nodes_same(const bb_node_list *x, const bb_node_list *y)
{
    SAME_INT("node count", x->n, y->n);
    for (size_t i = 0; i < x->n; i++) {
        const bb_node *a = x->v[i], *b = y->v[i];
        SAME_STR("node name", a->name, b->name);
        SAME_STR("node op", a->op_type, b->op_type);
        SAME_STR("node domain", a->domain, b->domain);
        SAME_STR("node overload", a->overload, b->overload);
        SAME_STR("node doc", a->doc_string, b->doc_string);
        if (!strs_same("node inputs", &a->inputs, &b->inputs) ||
            !strs_same("node outputs", &a->outputs, &b->outputs) ||
            !attrs_same(&a->attrs, &b->attrs) ||
            !kv_same("node metadata", &a->metadata, &b->metadata))
            return false;
        BYTES_VEC_SAME("device_configurations", &a->device_configurations,
                       &b->device_configurations);
    }
    return true;
}

static bool graph_same(const bb_graph *x, const bb_graph *y)
{
    if (!x || !y)
        return x == y ? true : differ("graph presence");
    SAME_STR("graph name", x->name, y->name);
    SAME_STR("graph doc", x->doc_string, y->doc_string);
    if (!nodes_same(&x->nodes, &y->nodes))
        return false;
    SAME_INT("initializers", x->initializers.n, y->initializers.n);
    for (size_t i = 0; i < x->initializers.n; i++)
        if (!tensor_same(x->initializers.v[i], y->initializers.v[i]))
            return false;
    BYTES_VEC_SAME("sparse_initializers", &x->sparse_initializers, &y->sparse_initializers);
    BYTES_VEC_SAME("quantization_annotations", &x->quantization_annotations,
                   &y->quantization_annotations);
    return vis_same("inputs", &x->inputs, &y->inputs) &&
           vis_same("outputs", &x->outputs, &y->outputs) &&
           vis_same("value_info", &x->value_info, &y->value_info) &&
           kv_same("graph metadata", &x->metadata, &y->metadata);
}

static bool model_same(const bb_model *x, const bb_model *y)
{
    SAME_INT("ir_version", x->ir_version, y->ir_version);
    SAME_INT("has_model_version", x->has_model_version, y->has_model_version);
    SAME_INT("model_version", x->model_version, y->model_version);
    SAME_STR("producer_name", x->producer_name, y->producer_name);
    SAME_STR("producer_version", x->producer_version, y->producer_version);
    SAME_STR("domain", x->domain, y->domain);
    SAME_STR("doc_string", x->doc_string, y->doc_string);
    if (!opsets_same(&x->opset_imports, &y->opset_imports) || !graph_same(x->graph, y->graph) ||
        !kv_same("model metadata", &x->metadata, &y->metadata))
        return false;
    SAME_INT("functions", x->functions.n, y->functions.n);
    for (size_t i = 0; i < x->functions.n; i++) {
        const bb_function *a = x->functions.v[i], *b = y->functions.v[i];
        SAME_STR("fn name", a->name, b->name);
        SAME_STR("fn domain", a->domain, b->domain);
        SAME_STR("fn overload", a->overload, b->overload);
        SAME_STR("fn doc", a->doc_string, b->doc_string);
        if (!strs_same("fn inputs", &a->inputs, &b->inputs) ||
            !strs_same("fn outputs", &a->outputs, &b->outputs) ||
            !strs_same("fn attributes", &a->attributes, &b->attributes) ||
            !attrs_same(&a->attribute_protos, &b->attribute_protos) ||
            !nodes_same(&a->nodes, &b->nodes) ||
            !opsets_same(&a->opset_imports, &b->opset_imports) ||
            !vis_same("fn value_info", &a->value_info, &b->value_info) ||
            !kv_same("fn metadata", &a->metadata, &b->metadata))
            return false;
    }
    BYTES_VEC_SAME("training_info", &x->training_info, &y->training_info);
    BYTES_VEC_SAME("configuration", &x->configuration, &y->configuration);
    return true;
}

#define assert_model_same(x, y)                     \
    do {                                            \
        diff_at[0] = '\0';                          \
        bool same_ = model_same((x), (y));          \
        if (!same_)                                 \
            print_error("first difference: %s\n", diff_at); \
        assert_true(same_);                         \
    } while (0)

/* ---- byte builders for hand-made inputs ---------------------------------- */

typedef struct wbuf {
    uint8_t *p;
    size_t n, cap;
} wbuf;

static void wb_put(wbuf *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void wb_varint(wbuf *b, uint64_t v)
{
    uint8_t t[10];
    size_t n = 0;
    while (v >= 0x80) {
        t[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    t[n++] = (uint8_t)v;
    wb_put(b, t, n);
}

static void wb_field(wbuf *b, unsigned num, const void *p, size_t n)
{
    wb_varint(b, (uint64_t)num << 3 | 2);
    wb_varint(b, n);
    wb_put(b, p, n);
}

static void wb_int(wbuf *b, unsigned num, uint64_t v)
{
    wb_varint(b, (uint64_t)num << 3);
    wb_varint(b, v);
}

/* ModelProto whose graph nests `depth` GraphProtos (If then_branch). */
static wbuf nested_graph_model(unsigned depth)
{
    wbuf g = {0};
    wb_field(&g, 2, "leaf", 4);
    for (unsigned i = 1; i < depth; i++) {
        wbuf attr = {0}, node = {0}, outer = {0};
        wb_field(&attr, 1, "then_branch", 11);
        wb_int(&attr, 20, 5);
        wb_field(&attr, 6, g.p, g.n);
        wb_field(&node, 4, "If", 2);
        wb_field(&node, 5, attr.p, attr.n);
        wb_field(&outer, 1, node.p, node.n);
        free(attr.p);
        free(node.p);
        free(g.p);
        g = outer;
    }
    wbuf m = {0};
    wb_int(&m, 1, 10);
    wb_field(&m, 7, g.p, g.n);
    free(g.p);
    return m;
}

/* ModelProto with one graph input typed sequence(sequence(...(tensor))). */
static wbuf nested_type_model(unsigned depth)
{
    wbuf t = {0};
    wbuf tt = {0};
    wb_int(&tt, 1, 1);
    wb_field(&t, 1, tt.p, tt.n); /* tensor_type { elem_type: FLOAT } */
    free(tt.p);
    for (unsigned i = 0; i < depth; i++) {
        wbuf seq = {0}, outer = {0};
        wb_field(&seq, 1, t.p, t.n);
        wb_field(&outer, 4, seq.p, seq.n);
        free(seq.p);
        free(t.p);
        t = outer;
    }
    wbuf vi = {0}, g = {0}, m = {0};
    wb_field(&vi, 1, "x", 1);
    wb_field(&vi, 2, t.p, t.n);
    wb_field(&g, 11, vi.p, vi.n);
    wb_int(&m, 1, 10);
    wb_field(&m, 7, g.p, g.n);
    free(t.p);
    free(vi.p);
    free(g.p);
    return m;
}

static int load_buf(const void *p, size_t n, bb_model **m, bb_error *err)
{
    return bb_model_load_mem(p, n, "input.onnx", m, err);
}

#define assert_msg_has(err, needle)                                              \
    do {                                                                         \
        if (!strstr((err).msg, (needle)))                                        \
            print_error("message '%s' lacks '%s'\n", (err).msg, (needle));       \
        assert_non_null(strstr((err).msg, (needle)));                            \
    } while (0)

/* ---- round trip ------------------------------------------------------------ */

static void test_roundtrip_full(void **state)
{
    (void)state;
    bb_model *m = bb_test_model_full();
    assert_non_null(m);
    bb_error err = {0};
    uint8_t *b1 = NULL, *b2 = NULL;
    size_t n1 = 0, n2 = 0;
    assert_int_equal(bb_model_save_mem(m, &b1, &n1, &err), BB_OK);
    assert_true(n1 > 500);

    bb_model *back = NULL;
    int rc = bb_model_load_mem(b1, n1, "full.onnx", &back, &err);
    if (rc)
        print_error("%s\n", err.msg);
    assert_int_equal(rc, BB_OK);
    assert_model_same(m, back);

    /* spot checks on fields a generic comparison could miss if both sides
     * lost them */
    assert_string_equal(back->functions.v[0]->overload, "v2");
    assert_int_equal(back->functions.v[0]->attribute_protos.n, 2);
    assert_int_equal(back->functions.v[0]->value_info.n, 1);
    assert_string_equal(bb_kv_get(&back->functions.v[0]->metadata, "bb.role"), "client");
    assert_string_equal(bb_kv_get(&back->graph->metadata, "bb.graph"), "main");
    const bb_node *n0 = back->graph->nodes.v[0];
    assert_string_equal(n0->overload, "v2");
    assert_string_equal(bb_kv_get(&n0->metadata, "bb.site"), "3");
    assert_int_equal(n0->device_configurations.n, 1);
    assert_string_equal(n0->inputs.v[1], "");
    const bb_attr *body = bb_node_attr(n0, "body");
    assert_non_null(body);
    assert_string_equal(body->g->nodes.v[0]->attrs.v[0]->g->nodes.v[0]->attrs.v[0]->g->name,
                        "g3");
    assert_true(bb_node_attr_float(n0, "alpha", 0) == 0.25f);
    assert_int_equal(bb_node_attr_int(n0, "axis", 0), -1);
    assert_string_equal(bb_node_attr_string(n0, "mode", NULL), "constant");
    assert_int_equal(back->training_info.n, 1);
    assert_int_equal(back->configuration.n, 1);
    assert_int_equal(back->graph->value_info.v[0]->type->kind, BB_TP_MAP);
    assert_int_equal(back->graph->value_info.v[1]->type->kind, BB_TP_OPTIONAL);
    assert_int_equal(back->graph->value_info.v[2]->type->kind, BB_TP_SPARSE_TENSOR);
    assert_int_equal(back->graph->value_info.v[3]->type->kind, BB_TP_NONE);
    assert_null(back->graph->value_info.v[5]->type);
    assert_true(back->graph->inputs.v[2]->type->has_shape);
    assert_int_equal(back->graph->inputs.v[2]->type->shape.n, 0);
    /* strings read back NUL-terminated */
    assert_int_equal(back->graph->initializers.v[2]->string_data.v[0].data[3], 0);

    /* saving what was loaded gives the same bytes */
    assert_int_equal(bb_model_save_mem(back, &b2, &n2, &err), BB_OK);
    assert_int_equal(n1, n2);
    assert_memory_equal(b1, b2, n1);

    /* a clone (ir.c) saves to the same bytes too */
    bb_model *cl = bb_model_clone(back);
    assert_non_null(cl);
    uint8_t *b3 = NULL;
    size_t n3 = 0;
    assert_int_equal(bb_model_save_mem(cl, &b3, &n3, &err), BB_OK);
    assert_int_equal(n1, n3);
    assert_memory_equal(b1, b3, n1);
    free(b3);
    bb_model_free(cl);

    free(b1);
    free(b2);
    bb_model_free(back);
    bb_model_free(m);
}

/* Presence rules written down in model_io.c, checked on the protobuf side. */
static void test_save_presence(void **state)
{
    (void)state;
    bb_model *m = bb_test_model_full();
    assert_non_null(m);
    m->ir_version = 0;
    m->doc_string = NULL;
    m->domain = "";
    bb_error err = {0};
    uint8_t *b = NULL;
    size_t n = 0;
    assert_int_equal(bb_model_save_mem(m, &b, &n, &err), BB_OK);
    Onnx__ModelProto *p = onnx__model_proto__unpack(NULL, n, b);
    assert_non_null(p);
    assert_true(p->has_ir_version); /* always written */
    assert_int_equal(p->ir_version, 0);
    assert_null(p->doc_string);
    assert_non_null(p->domain);
    assert_string_equal(p->domain, "");
    assert_int_equal(p->n_training_info, 1);
    assert_non_null(p->training_info[0]->initialization);
    assert_string_equal(p->training_info[0]->initialization->name, "init");
    assert_int_equal(p->n_configuration, 1);
    assert_int_equal(p->configuration[0]->num_devices, 2);
    const Onnx__NodeProto *n0 = p->graph->node[0];
    assert_int_equal(n0->n_device_configurations, 1);
    assert_int_equal(n0->device_configurations[0]->pipeline_stage, 1);
    assert_int_equal(p->graph->n_sparse_initializer, 1);
    assert_int_equal(p->graph->n_quantization_annotation, 1);
    assert_int_equal(p->n_functions, 2);
    /* reference attributes carry no value */
    const Onnx__AttributeProto *ref = p->functions[0]->node[0]->attribute[0];
    assert_string_equal(ref->ref_attr_name, "rounds");
    assert_false(ref->has_i);
    assert_true(ref->has_type);
    /* value attributes do */
    assert_true(n0->attribute[0]->has_f);
    assert_false(n0->attribute[0]->has_i);
    assert_true(n0->attribute[1]->has_i);
    assert_false(n0->attribute[1]->has_f);
    /* typed payload fields are never written */
    const Onnx__TensorProto *w = p->graph->initializer[0];
    assert_true(w->has_raw_data);
    assert_int_equal(w->n_float_data, 0);
    onnx__model_proto__free_unpacked(p, NULL);
    free(b);
    bb_model_free(m);
}

static void test_roundtrip_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/bb-model-io-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    bb_model *m = bb_test_model_full();
    assert_non_null(m);
    bb_error err = {0};
    /* overwrite an existing file */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("old contents", f);
    fclose(f);
    assert_int_equal(bb_model_save_file(m, path, &err), BB_OK);
    bb_model *back = NULL;
    assert_int_equal(bb_model_load_file(path, &back, &err), BB_OK);
    assert_model_same(m, back);
    /* no temp file left behind */
    DIR *d = opendir(dir);
    assert_non_null(d);
    int entries = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            entries++;
    closedir(d);
    assert_int_equal(entries, 1);

    /* save into a directory that does not exist: EIO naming the path */
    char bad[300];
    snprintf(bad, sizeof bad, "%s/missing/model.onnx", dir);
    assert_int_equal(bb_model_save_file(m, bad, &err), BB_EIO);
    assert_int_equal(err.code, BB_EIO);
    assert_msg_has(err, bad);

    unlink(path);
    rmdir(dir);
    bb_model_free(back);
    bb_model_free(m);
}

/* ---- typed tensor data ----------------------------------------------------- */

/* A ModelProto with one initializer t, serialized with protobuf-c. */
static uint8_t *model_with_tensor(Onnx__TensorProto *t, size_t *len)
{
    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    Onnx__TensorProto *inits[] = {t};
    g.n_initializer = 1;
    g.initializer = inits;
    Onnx__ModelProto mp = ONNX__MODEL_PROTO__INIT;
    mp.has_ir_version = 1;
    mp.ir_version = 10;
    mp.graph = &g;
    *len = onnx__model_proto__get_packed_size(&mp);
    uint8_t *b = malloc(*len);
    assert_non_null(b);
    onnx__model_proto__pack(&mp, b);
    return b;
}

static const bb_tensor_proto *load_tensor(const uint8_t *b, size_t n, bb_model **m)
{
    bb_error err = {0};
    int rc = bb_model_load_mem(b, n, "typed.onnx", m, &err);
    if (rc)
        print_error("%s\n", err.msg);
    assert_int_equal(rc, BB_OK);
    return (*m)->graph->initializers.v[0];
}

static void test_typed_data_normalised(void **state)
{
    (void)state;
    struct {
        int32_t dt;
        int which; /* 0 float, 1 int32, 2 int64, 3 double, 4 uint64 */
        size_t count;
        const uint8_t expect[16];
        size_t expect_len;
    } cases[] = {
        {BB_DT_FLOAT, 0, 2, {0, 0, 0x80, 0x3f, 0, 0, 0x20, 0xc0}, 8},        /* 1.0, -2.5 */
        {BB_DT_COMPLEX64, 0, 2, {0, 0, 0x80, 0x3f, 0, 0, 0x20, 0xc0}, 8},
        {BB_DT_INT32, 1, 2, {0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0}, 8},     /* -1, 2 */
        {BB_DT_FLOAT16, 1, 2, {0x00, 0x3c, 0x00, 0xc0}, 4},                   /* 0x3c00, 0xc000 */
        {BB_DT_INT8, 1, 2, {0xff, 0x02}, 2},
        {BB_DT_BOOL, 1, 2, {0x01, 0x00}, 2},
        {BB_DT_INT4, 1, 2, {0x21, 0xf3}, 2},                                  /* packed pairs */
        {BB_DT_FLOAT8E5M2, 1, 2, {0x3c, 0xc0}, 2},
        {BB_DT_FLOAT8E8M0, 1, 2, {0x7f, 0x80}, 2},                             /* 2^0, 2^1 */
        {BB_DT_INT2, 1, 2, {0xe4, 0x1b}, 2},                                  /* packed quads */
        {BB_DT_INT64, 2, 2, {0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 7, 0, 0, 0, 0, 0, 0, 0}, 16},
        {BB_DT_DOUBLE, 3, 1, {0, 0, 0, 0, 0, 0, 0xf0, 0x3f}, 8},              /* 1.0 */
        {BB_DT_UINT32, 4, 2, {0xff, 0xff, 0xff, 0xff, 5, 0, 0, 0}, 8},
        {BB_DT_UINT64, 4, 1, {0xff, 0xff, 0xff, 0xff, 0x01, 0, 0, 0}, 8},     /* 2^32 + 2^32-1 */
    };
    float fv[] = {1.0f, -2.5f};
    int32_t i32_by_dt[][2] = {{-1, 2},       {0x3c00, 0xc000}, {-1, 2},       {1, 0},
                              {0x21, 0xf3},  {0x3c, 0xc0},     {0x7f, 0x80},  {0xe4, 0x1b}};
    int64_t i64[] = {-2, 7};
    double dv[] = {1.0};
    uint64_t u32[] = {0xffffffffu, 5}, u64[] = {0x1ffffffffULL};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
        t.name = "t";
        t.has_data_type = 1;
        t.data_type = cases[k].dt;
        switch (cases[k].which) {
        case 0:
            t.n_float_data = cases[k].count;
            t.float_data = fv;
            break;
        case 1: {
            int row = cases[k].dt == BB_DT_INT32 ? 0 : cases[k].dt == BB_DT_FLOAT16 ? 1
                    : cases[k].dt == BB_DT_INT8 ? 2 : cases[k].dt == BB_DT_BOOL ? 3
                    : cases[k].dt == BB_DT_INT4 ? 4 : cases[k].dt == BB_DT_FLOAT8E5M2 ? 5
                    : cases[k].dt == BB_DT_FLOAT8E8M0 ? 6 : 7;
            t.n_int32_data = cases[k].count;
            t.int32_data = i32_by_dt[row];
            break;
        }
        case 2:
            t.n_int64_data = cases[k].count;
            t.int64_data = i64;
            break;
        case 3:
            t.n_double_data = cases[k].count;
            t.double_data = dv;
            break;
        default:
            t.n_uint64_data = cases[k].count;
            t.uint64_data = cases[k].dt == BB_DT_UINT32 ? u32 : u64;
            break;
        }
        size_t n;
        uint8_t *b = model_with_tensor(&t, &n);
        bb_model *m = NULL;
        const bb_tensor_proto *bt = load_tensor(b, n, &m);
        assert_true(bt->has_raw_data);
        if (bt->raw_data.len != cases[k].expect_len)
            print_error("case %zu (%s)\n", k, bb_dtype_name(cases[k].dt));
        assert_int_equal(bt->raw_data.len, cases[k].expect_len);
        assert_memory_equal(bt->raw_data.data, cases[k].expect, cases[k].expect_len);
        /* saved back as raw_data only */
        bb_error err = {0};
        uint8_t *out = NULL;
        size_t on = 0;
        assert_int_equal(bb_model_save_mem(m, &out, &on, &err), BB_OK);
        Onnx__ModelProto *p = onnx__model_proto__unpack(NULL, on, out);
        assert_non_null(p);
        const Onnx__TensorProto *pt = p->graph->initializer[0];
        assert_true(pt->has_raw_data);
        assert_int_equal(pt->n_float_data + pt->n_int32_data + pt->n_int64_data +
                             pt->n_double_data + pt->n_uint64_data, 0);
        assert_memory_equal(pt->raw_data.data, cases[k].expect, cases[k].expect_len);
        onnx__model_proto__free_unpacked(p, NULL);
        free(out);
        bb_model_free(m);
        free(b);
    }
}

static void test_typed_data_errors(void **state)
{
    (void)state;
    float fv[] = {1.0f};
    /* float_data cannot hold an int64 tensor */
    Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
    t.name = "weights";
    t.has_data_type = 1;
    t.data_type = BB_DT_INT64;
    t.n_float_data = 1;
    t.float_data = fv;
    size_t n;
    uint8_t *b = model_with_tensor(&t, &n);
    bb_model *m = NULL;
    bb_error err = {0};
    assert_int_equal(bb_model_load_mem(b, n, "typed.onnx", &m, &err), BB_EPARSE);
    assert_null(m);
    assert_msg_has(err, "typed.onnx: ");
    assert_msg_has(err, "'weights'");
    assert_msg_has(err, "float_data");
    free(b);

    /* both raw_data and float_data */
    uint8_t raw[4] = {0};
    t.data_type = BB_DT_FLOAT;
    t.has_raw_data = 1;
    t.raw_data.len = 4;
    t.raw_data.data = raw;
    b = model_with_tensor(&t, &n);
    assert_int_equal(bb_model_load_mem(b, n, "typed.onnx", &m, &err), BB_EPARSE);
    assert_msg_has(err, "more than one");
    free(b);
}

/* ---- malformed input ------------------------------------------------------- */

static void test_bad_files(void **state)
{
    (void)state;
    struct {
        const char *file;
        int code;
        const char *needle;
    } cases[] = {
        {"testdata/bad/empty.onnx", BB_EPARSE, "empty (0 bytes)"},
        {"testdata/bad/not_protobuf.onnx", BB_EPARSE, "looks like text"},
        {"testdata/bad/truncated.onnx", BB_ETRUNC, "truncated at byte 2: graph declares 50 bytes"},
        {"testdata/bad/absurd_length.onnx", BB_ELIMIT, "1099511627776"},
        {"testdata/bad/wrong_wire_type.onnx", BB_EPARSE, "ir_version"},
        {"testdata/bad/deep_graphs.onnx", BB_ELIMIT, "graphs nested deeper than 64"},
        {"testdata/bad/no_such_file.onnx", BB_EIO, "cannot open"},
        {"testdata/bad", BB_EIO, "directory"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bb_model *m = (bb_model *)1;
        bb_error err = {0};
        int rc = bb_model_load_file(cases[i].file, &m, &err);
        if (rc != cases[i].code)
            print_error("%s: got %s (%s)\n", cases[i].file, bb_status_name(rc), err.msg);
        assert_int_equal(rc, cases[i].code);
        assert_int_equal(err.code, cases[i].code);
        assert_null(m);
        /* "<file>: <what is wrong>" */
        assert_int_equal(strncmp(err.msg, cases[i].file, strlen(cases[i].file)), 0);
        assert_msg_has(err, cases[i].needle);
    }
}

static void test_bad_mem(void **state)
{
    (void)state;
    bb_model *m = NULL;
    bb_error err = {0};

    assert_int_equal(load_buf("", 0, &m, &err), BB_EPARSE);
    assert_msg_has(err, "input.onnx: empty");

    /* binary garbage that is not protobuf */
    static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    assert_int_equal(load_buf(junk, sizeof junk, &m, &err), BB_EPARSE);
    assert_msg_has(err, "input.onnx: not an ONNX model");

    /* field number 0 */
    static const uint8_t zero_field[] = {0x08, 0x0a, 0x00, 0x01};
    assert_int_equal(load_buf(zero_field, sizeof zero_field, &m, &err), BB_EPARSE);
    assert_msg_has(err, "field number 0");
    assert_msg_has(err, "at byte 2");

    /* group wire type */
    static const uint8_t group[] = {0x08, 0x0a, 0x1b};
    assert_int_equal(load_buf(group, sizeof group, &m, &err), BB_EPARSE);
    assert_msg_has(err, "unsupported wire type 3");

    /* varint running off the end: truncation */
    static const uint8_t cut_varint[] = {0x08, 0x8a};
    assert_int_equal(load_buf(cut_varint, sizeof cut_varint, &m, &err), BB_ETRUNC);
    assert_msg_has(err, "truncated at byte 1");

    /* 11-byte varint */
    static const uint8_t long_varint[] = {0x08, 0x0a, 0x28, 0x80, 0x80, 0x80, 0x80, 0x80,
                                          0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
    assert_int_equal(load_buf(long_varint, sizeof long_varint, &m, &err), BB_EPARSE);
    assert_msg_has(err, "longer than 10 bytes");

    /* a nested message longer than its parent: corruption, not truncation */
    static const uint8_t overrun[] = {0x08, 0x0a, 0x3a, 0x04, 0x12, 0x10, 'a', 'b', 'c', 'd'};
    assert_int_equal(load_buf(overrun, sizeof overrun, &m, &err), BB_EPARSE);
    assert_msg_has(err, "enclosing message");
    assert_msg_has(err, "graph.name");

    /* packed float_data whose length is not a multiple of 4 */
    static const uint8_t bad_packed[] = {0x08, 0x0a, 0x3a, 0x07, 0x2a, 0x05, 0x22, 0x03, 1, 2, 3};
    assert_int_equal(load_buf(bad_packed, sizeof bad_packed, &m, &err), BB_EPARSE);
    assert_msg_has(err, "graph.initializer.float_data");

    /* absurd length, in memory */
    static const uint8_t absurd[] = {0x08, 0x0a, 0x3a, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f, 'x'};
    assert_int_equal(load_buf(absurd, sizeof absurd, &m, &err), BB_ELIMIT);
    assert_msg_has(err, "input.onnx: graph at byte 2 declares a length of");

    /* a 6-byte length prefix below the limit is non-canonical for protobuf-c */
    static const uint8_t long_len[] = {0x08, 0x0a, 0x12, 0x81, 0x80, 0x80, 0x80, 0x80, 0x00, 'x'};
    assert_int_equal(load_buf(long_len, sizeof long_len, &m, &err), BB_EPARSE);

    /* only unknown fields: valid protobuf, not a model */
    static const uint8_t unknown_only[] = {0xf8, 0x07, 0x01};
    assert_int_equal(load_buf(unknown_only, sizeof unknown_only, &m, &err), BB_EPARSE);
    assert_msg_has(err, "no");

    /* unknown fields next to known ones are fine */
    static const uint8_t with_unknown[] = {0x08, 0x0a, 0xf8, 0x07, 0x01, 0x82, 0x08, 0x01, 'z'};
    assert_int_equal(load_buf(with_unknown, sizeof with_unknown, &m, &err), BB_OK);
    assert_int_equal(m->ir_version, 10);
    bb_model_free(m);
    m = NULL;

    /* every proper prefix of a real model fails cleanly or loads */
    bb_model *full = bb_test_model_full();
    uint8_t *b = NULL;
    size_t n = 0;
    assert_int_equal(bb_model_save_mem(full, &b, &n, &err), BB_OK);
    size_t truncs = 0;
    for (size_t cut = 0; cut < n; cut++) {
        int rc = load_buf(b, cut, &m, &err);
        if (rc == BB_OK) {
            bb_model_free(m);
            m = NULL;
            continue;
        }
        assert_true(rc == BB_EPARSE || rc == BB_ETRUNC);
        assert_int_equal(strncmp(err.msg, "input.onnx: ", 12), 0);
        truncs += rc == BB_ETRUNC;
    }
    assert_true(truncs > n / 2);
    free(b);
    bb_model_free(full);
}

static void test_depth_limits(void **state)
{
    (void)state;
    bb_model *m = NULL;
    bb_error err = {0};
    wbuf ok = nested_graph_model(BB_MODEL_MAX_GRAPH_DEPTH);
    int rc = load_buf(ok.p, ok.n, &m, &err);
    if (rc)
        print_error("%s\n", err.msg);
    assert_int_equal(rc, BB_OK);
    /* and it saves back */
    uint8_t *b = NULL;
    size_t n = 0;
    assert_int_equal(bb_model_save_mem(m, &b, &n, &err), BB_OK);
    free(b);

    /* one more level, built in the IR: save refuses */
    bb_graph *g = m->graph;
    while (g->nodes.n && g->nodes.v[0]->attrs.n)
        g = g->nodes.v[0]->attrs.v[0]->g;
    bb_node *nn = bb_graph_add_node(m->arena, g, "", "If");
    bb_attr *at = bb_node_add_attr(m->arena, nn, "then_branch", BB_ATTR_GRAPH);
    at->g = bb_graph_new(m->arena, "too_deep");
    assert_int_equal(bb_model_save_mem(m, &b, &n, &err), BB_ELIMIT);
    assert_null(b);
    assert_msg_has(err, "nested deeper than 64");
    bb_model_free(m);
    m = NULL;
    free(ok.p);

    wbuf deep = nested_graph_model(BB_MODEL_MAX_GRAPH_DEPTH + 1);
    assert_int_equal(load_buf(deep.p, deep.n, &m, &err), BB_ELIMIT);
    assert_msg_has(err, "input.onnx: graphs nested deeper than 64");
    free(deep.p);

    /* deep but legal type nesting loads (and exercises protobuf-c's recursion) */
    wbuf types = nested_type_model(120);
    rc = load_buf(types.p, types.n, &m, &err);
    if (rc)
        print_error("%s\n", err.msg);
    assert_int_equal(rc, BB_OK);
    bb_model_free(m);
    m = NULL;
    free(types.p);

    wbuf deeper = nested_type_model(1000);
    assert_int_equal(load_buf(deeper.p, deeper.n, &m, &err), BB_ELIMIT);
    assert_msg_has(err, "messages nested deeper than");
    free(deeper.p);
}

/* Many empty messages: tiny on the wire, large as protobuf-c structs. */
static void test_decode_budget(void **state)
{
    (void)state;
    size_t nodes = 1u << 20;
    wbuf g = {0};
    for (size_t i = 0; i < nodes; i++)
        wb_put(&g, "\x0a\x00", 2); /* node {} */
    wbuf m = {0};
    wb_int(&m, 1, 10);
    wb_field(&m, 7, g.p, g.n);
    bb_model *out = NULL;
    bb_error err = {0};
    assert_int_equal(load_buf(m.p, m.n, &out, &err), BB_ELIMIT);
    assert_null(out);
    assert_msg_has(err, "input.onnx: decoding needs more than");
    /* a tenth of that is fine */
    wbuf small = {0};
    wb_int(&small, 1, 10);
    wb_field(&small, 7, g.p, (nodes / 10) * 2);
    assert_int_equal(load_buf(small.p, small.n, &out, &err), BB_OK);
    assert_int_equal(out->graph->nodes.n, nodes / 10);
    bb_model_free(out);
    free(small.p);
    free(m.p);
    free(g.p);
}

static void test_file_limits(void **state)
{
    (void)state;
    char path[] = "/tmp/bb-model-io-big-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    /* sparse: no disk space used */
    assert_int_equal(ftruncate(fd, (off_t)BB_MODEL_MAX_BYTES + 1), 0);
    close(fd);
    bb_model *m = NULL;
    bb_error err = {0};
    assert_int_equal(bb_model_load_file(path, &m, &err), BB_ELIMIT);
    assert_int_equal(strncmp(err.msg, path, strlen(path)), 0);
    assert_msg_has(err, "over the");
    unlink(path);

    /* the same reader with another limit: whole, NUL-terminated, or refused */
    char small[] = "/tmp/bb-read-file-XXXXXX";
    fd = mkstemp(small);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "0123456789", 10), 10);
    close(fd);
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(bb_read_file(small, 10, &buf, &len, &err), BB_OK);
    assert_int_equal(len, 10);
    assert_string_equal((char *)buf, "0123456789");
    free(buf);
    assert_int_equal(bb_read_file(small, 9, &buf, &len, &err), BB_ELIMIT);
    assert_msg_has(err, "10 bytes, over the 9-byte limit");
    unlink(small);

    assert_int_equal(bb_model_load_file(NULL, &m, &err), BB_EINVAL);
    assert_int_equal(bb_model_load_mem(NULL, 4, "x", &m, &err), BB_EINVAL);
    assert_int_equal(bb_model_save_mem(NULL, NULL, NULL, &err), BB_EINVAL);
    assert_int_equal(bb_model_load_mem("", 0, "x", &m, NULL), BB_EPARSE); /* err may be NULL */
}

static void test_bad_verbatim_on_save(void **state)
{
    (void)state;
    bb_model *m = bb_test_model_full();
    assert_non_null(m);
    static uint8_t garbage[] = {0xff, 0xff, 0xff};
    m->training_info.v[0].data = garbage;
    m->training_info.v[0].len = sizeof garbage;
    bb_error err = {0};
    uint8_t *b = NULL;
    size_t n = 0;
    assert_int_equal(bb_model_save_mem(m, &b, &n, &err), BB_EINVAL);
    assert_null(b);
    assert_msg_has(err, "training_info[0]");
    bb_model_free(m);
}

/* ---- single tensors -------------------------------------------------------- */

static void test_tensor_codec(void **state)
{
    (void)state;
    bb_model *m = bb_test_model_full();
    assert_non_null(m);
    bb_error err = {0};
    for (size_t i = 0; i < m->graph->initializers.n; i++) {
        const bb_tensor_proto *t = m->graph->initializers.v[i];
        uint8_t *b = NULL;
        size_t n = 0;
        assert_int_equal(bb_tensor_proto_encode(t, &b, &n, &err), BB_OK);
        bb_tensor_proto *back = NULL;
        assert_int_equal(bb_tensor_proto_decode(m->arena, b, n, "t.pb", &back, &err), BB_OK);
        diff_at[0] = '\0';
        if (!tensor_same(t, back))
            print_error("%s\n", diff_at);
        assert_true(tensor_same(t, back));
        free(b);
    }
    bb_tensor_proto *t = NULL;
    assert_int_equal(bb_tensor_proto_decode(m->arena, "", 0, "t.pb", &t, &err), BB_EPARSE);
    assert_msg_has(err, "t.pb: empty");
    static const uint8_t cut[] = {0x4a, 0x10, 1, 2}; /* raw_data of 16 bytes, 2 present */
    assert_int_equal(bb_tensor_proto_decode(m->arena, cut, sizeof cut, "t.pb", &t, &err),
                     BB_ETRUNC);
    assert_msg_has(err, "t.pb: truncated at byte 0");
    assert_msg_has(err, "raw_data");
    assert_null(t);
    /* typed data is normalised here too */
    static const uint8_t typed[] = {0x08, 0x01, 0x10, 0x07, 0x3a, 0x01, 0x05}; /* int64 [5] */
    assert_int_equal(bb_tensor_proto_decode(m->arena, typed, sizeof typed, "t.pb", &t, &err),
                     BB_OK);
    assert_true(t->has_raw_data);
    assert_int_equal(t->raw_data.len, 8);
    assert_int_equal(t->raw_data.data[0], 5);
    bb_model_free(m);
}

/* ---- fuzz ------------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static void test_fuzz(void **state)
{
    (void)state;
    bb_model *full = bb_test_model_full();
    assert_non_null(full);
    bb_error err = {0};
    uint8_t *seed = NULL;
    size_t seed_n = 0;
    assert_int_equal(bb_model_save_mem(full, &seed, &seed_n, &err), BB_OK);
    bb_model_free(full);

    size_t cap = seed_n + 512;
    uint8_t *buf = malloc(cap);
    assert_non_null(buf);
    unsigned loaded = 0, rejected = 0;
    for (unsigned iter = 0; iter < 4000; iter++) {
        size_t n;
        switch (rnd() % 5) {
        case 0: /* random bytes */
            n = rnd() % 300;
            for (size_t i = 0; i < n; i++)
                buf[i] = (uint8_t)rnd();
            break;
        case 1: /* flip a few bytes */
            memcpy(buf, seed, n = seed_n);
            for (unsigned k = 1 + rnd() % 8; k; k--)
                buf[rnd() % n] ^= (uint8_t)(1 + rnd() % 255);
            break;
        case 2: /* truncate */
            n = rnd() % seed_n;
            memcpy(buf, seed, n);
            break;
        case 3: { /* insert random bytes */
            size_t at = rnd() % seed_n, k = 1 + rnd() % 16;
            memcpy(buf, seed, at);
            for (size_t i = 0; i < k; i++)
                buf[at + i] = (uint8_t)rnd();
            memcpy(buf + at + k, seed + at, seed_n - at);
            n = seed_n + k;
            break;
        }
        default: { /* overwrite with a huge varint */
            static const uint8_t big[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
            memcpy(buf, seed, n = seed_n);
            size_t at = rnd() % (n - sizeof big);
            memcpy(buf + at, big, 1 + rnd() % sizeof big);
            break;
        }
        }
        bb_model *m = NULL;
        int rc = bb_model_load_mem(buf, n, "fuzz", &m, &err);
        if (rc != BB_OK) {
            if (rc != BB_EPARSE && rc != BB_ETRUNC && rc != BB_ELIMIT)
                print_error("iter %u: %s %s\n", iter, bb_status_name(rc), err.msg);
            assert_true(rc == BB_EPARSE || rc == BB_ETRUNC || rc == BB_ELIMIT);
            assert_null(m);
            assert_int_equal(strncmp(err.msg, "fuzz: ", 6), 0);
            rejected++;
            continue;
        }
        loaded++;
        /* whatever loads saves, reloads, and then saves to the same bytes */
        uint8_t *b1 = NULL, *b2 = NULL;
        size_t n1 = 0, n2 = 0;
        rc = bb_model_save_mem(m, &b1, &n1, &err);
        if (rc)
            print_error("iter %u: save: %s\n", iter, err.msg);
        assert_int_equal(rc, BB_OK);
        bb_model *m2 = NULL;
        rc = bb_model_load_mem(b1, n1, "fuzz2", &m2, &err);
        if (rc)
            print_error("iter %u: reload: %s\n", iter, err.msg);
        assert_int_equal(rc, BB_OK);
        assert_int_equal(bb_model_save_mem(m2, &b2, &n2, &err), BB_OK);
        assert_int_equal(n1, n2);
        assert_memory_equal(b1, b2, n1);
        free(b1);
        free(b2);
        bb_model_free(m2);
        bb_model_free(m);

        /* single-tensor decoding of the same bytes must not crash either */
        bb_arena *a = bb_arena_create();
        bb_tensor_proto *t = NULL;
        rc = bb_tensor_proto_decode(a, buf, n, "fuzz", &t, &err);
        assert_true(rc == BB_OK || rc == BB_EPARSE || rc == BB_ETRUNC || rc == BB_ELIMIT);
        bb_arena_destroy(a);
    }
    /* the mutations reach both outcomes */
    assert_true(loaded > 100);
    assert_true(rejected > 1000);
    free(buf);
    free(seed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_full),
        cmocka_unit_test(test_save_presence),
        cmocka_unit_test(test_roundtrip_file),
        cmocka_unit_test(test_typed_data_normalised),
        cmocka_unit_test(test_typed_data_errors),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_bad_mem),
        cmocka_unit_test(test_depth_limits),
        cmocka_unit_test(test_decode_budget),
        cmocka_unit_test(test_file_limits),
        cmocka_unit_test(test_bad_verbatim_on_save),
        cmocka_unit_test(test_tensor_codec),
        cmocka_unit_test(test_fuzz),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
