/*
 * model_fixture.c — test helper: builds a model that sets every IR field
 * (see model_fixture.h). Used by test_model_io and by the onnx_schema
 * integration test, which writes it to a file and checks it with protoc,
 * python protobuf and Debian's onnx.
 */
#include "tests/unit/support/model_fixture.h"

#include <string.h>

#define CHECK(x)         \
    do {                 \
        if (!(x))        \
            return NULL; \
    } while (0)

/* IR byte buffers carry a NUL after len (bb/ir.h, ir.c). */
static bool set_bytes(bb_arena *a, bb_bytes *b, const void *p, size_t n)
{
    uint8_t *q = bb_arena_alloc(a, n + 1);
    if (!q)
        return false;
    if (n)
        memcpy(q, p, n);
    b->data = q;
    b->len = n;
    return true;
}

static bb_bytes *push_bytes(bb_arena *a, void *vec, const void *p, size_t n)
{
    bb_bytes *b = bb__vec_push(a, vec, sizeof *b);
    if (!b || !set_bytes(a, b, p, n))
        return NULL;
    return b;
}

static bb_tensor_proto *tensor_raw(bb_arena *a, const char *name, int32_t dt,
                                   const int64_t *dims, size_t ndims, const void *raw,
                                   size_t nraw)
{
    bb_tensor_proto *t = bb_arena_alloc(a, sizeof *t);
    CHECK(t);
    t->name = bb_arena_strdup(a, name);
    t->data_type = dt;
    for (size_t i = 0; i < ndims; i++) {
        int64_t *d = BB_VEC_PUSH(a, &t->dims);
        CHECK(d);
        *d = dims[i];
    }
    CHECK(set_bytes(a, &t->raw_data, raw, nraw));
    t->has_raw_data = true;
    return t;
}

static bb_type_proto *tensor_type(bb_arena *a, int32_t elem, const int64_t *dims, size_t n,
                                  const char *sym)
{
    bb_type_proto *t = bb_type_proto_tensor(a, elem);
    CHECK(t);
    t->has_shape = true;
    for (size_t i = 0; i < n; i++) {
        bb_dim *d = BB_VEC_PUSH(a, &t->shape);
        CHECK(d);
        d->has_value = true;
        d->value = dims[i];
    }
    if (sym) {
        bb_dim *d = BB_VEC_PUSH(a, &t->shape);
        CHECK(d);
        d->param = bb_arena_strdup(a, sym);
        d->denotation = bb_arena_strdup(a, "DATA_BATCH");
    }
    return t;
}

static bb_value_info *add_vi(bb_arena *a, bb_value_info_list *l, const char *name,
                             bb_type_proto *type)
{
    bb_value_info *vi = bb_value_info_new(a, name, type);
    CHECK(vi);
    bb_value_info **slot = BB_VEC_PUSH(a, l);
    CHECK(slot);
    *slot = vi;
    return vi;
}

/* Serialized sub-messages the IR keeps verbatim (hand-encoded). */
static const uint8_t TRAINING_INFO[] = {
    0x0a, 0x06, 0x12, 0x04, 'i', 'n', 'i', 't',             /* initialization {name} */
    0x22, 0x0a, 0x0a, 0x01, 'w', 0x12, 0x05, 'w', '_', 'n', 'e', 'w', /* update_binding */
};
static const uint8_t DEVICE_CONFIG[] = {
    0x0a, 0x03, 'c', 'f', 'g', 0x10, 0x02,                  /* name, num_devices */
    0x1a, 0x04, 'g', 'p', 'u', '0', 0x1a, 0x04, 'g', 'p', 'u', '1',
};
static const uint8_t NODE_DEVICE_CONFIG[] = {
    0x0a, 0x03, 'c', 'f', 'g',                              /* configuration_id */
    0x12, 0x07, 0x0a, 0x01, 'x', 0x10, 0x00, 0x10, 0x01,    /* sharding_spec */
    0x18, 0x01,                                             /* pipeline_stage */
};
static const uint8_t SPARSE_TENSOR[] = {
    0x0a, 0x08, 0x08, 0x01, 0x10, 0x01, 0x42, 0x02, 's', 'p', /* values */
    0x18, 0x04,                                               /* dims */
};
static const uint8_t QUANT_ANNOTATION[] = {
    0x0a, 0x01, 'x', 0x12, 0x17, 0x0a, 0x0c, 'S', 'C', 'A', 'L', 'E', '_', 'T', 'E', 'N', 'S',
    'O', 'R', 0x12, 0x07, 'x', '_', 's', 'c', 'a', 'l', 'e',
};

/* A graph named name whose one node carries a GRAPH attribute holding
 * inner (or nothing when inner is NULL). */
static bb_graph *wrap_graph(bb_arena *a, const char *name, bb_graph *inner)
{
    bb_graph *g = bb_graph_new(a, name);
    CHECK(g);
    bb_node *n = bb_graph_add_node(a, g, "", inner ? "If" : "Identity");
    CHECK(n);
    CHECK(bb_str_list_push(a, &n->inputs, "c") == 0);
    CHECK(bb_str_list_push(a, &n->outputs, name) == 0);
    if (inner) {
        bb_attr *at = bb_node_add_attr(a, n, "then_branch", BB_ATTR_GRAPH);
        CHECK(at);
        at->g = inner;
    }
    CHECK(add_vi(a, &g->outputs, name, bb_type_proto_tensor(a, BB_DT_FLOAT)));
    return g;
}

static bb_node *full_node(bb_arena *a, bb_graph *g)
{
    bb_node *n = bb_graph_add_node(a, g, "user.app", "Everything");
    CHECK(n);
    n->name = "node0";
    n->overload = "v2";
    n->doc_string = "a node with every attribute kind";
    CHECK(bb_str_list_push(a, &n->inputs, "x") == 0);
    CHECK(bb_str_list_push(a, &n->inputs, "") == 0); /* omitted optional input */
    CHECK(bb_str_list_push(a, &n->inputs, "w") == 0);
    CHECK(bb_str_list_push(a, &n->outputs, "y") == 0);
    CHECK(bb_kv_set(a, &n->metadata, "bb.site", "3") == 0);
    CHECK(bb_kv_set(a, &n->metadata, "bb.note", "") == 0);
    CHECK(push_bytes(a, &n->device_configurations, NODE_DEVICE_CONFIG,
                     sizeof NODE_DEVICE_CONFIG));

    CHECK(bb_node_set_attr_float(a, n, "alpha", 0.25f));
    CHECK(bb_node_set_attr_int(a, n, "axis", -1));
    bb_attr *s = bb_node_set_attr_string(a, n, "mode", "constant");
    CHECK(s);
    s->doc_string = "string attribute";
    static const uint8_t bin[] = {0x00, 0xff, 0x10};
    bb_attr *sb = bb_node_add_attr(a, n, "blob", BB_ATTR_STRING);
    CHECK(sb && set_bytes(a, &sb->s, bin, sizeof bin));
    sb->has_s = true;

    static const float tv[] = {1.5f, -2.0f};
    static const int64_t tdims[] = {2};
    bb_attr *t = bb_node_add_attr(a, n, "value", BB_ATTR_TENSOR);
    CHECK(t && (t->t = tensor_raw(a, "value", BB_DT_FLOAT, tdims, 1, tv, sizeof tv)));

    /* nested graphs: node0.body -> g1 -> g2 -> g3 */
    bb_attr *ga = bb_node_add_attr(a, n, "body", BB_ATTR_GRAPH);
    CHECK(ga);
    CHECK(ga->g = wrap_graph(a, "g1", wrap_graph(a, "g2", wrap_graph(a, "g3", NULL))));

    static const float fl[] = {0.5f, 1.0f, -3.75f};
    bb_attr *fs = bb_node_add_attr(a, n, "scales", BB_ATTR_FLOATS);
    CHECK(fs);
    for (size_t i = 0; i < 3; i++) {
        float *p = BB_VEC_PUSH(a, &fs->floats);
        CHECK(p);
        *p = fl[i];
    }
    static const int64_t iv[] = {1, -2, 4294967296LL};
    CHECK(bb_node_set_attr_ints(a, n, "pads", iv, 3));
    bb_attr *ss = bb_node_add_attr(a, n, "names", BB_ATTR_STRINGS);
    CHECK(ss && push_bytes(a, &ss->strings, "a", 1) && push_bytes(a, &ss->strings, "", 0) &&
          push_bytes(a, &ss->strings, "bc", 2));

    bb_attr *ts = bb_node_add_attr(a, n, "tensors", BB_ATTR_TENSORS);
    CHECK(ts);
    static const int32_t i32[] = {7, -8};
    static const uint16_t f16[] = {0x3c00, 0xc000};
    bb_tensor_proto **tp = BB_VEC_PUSH(a, &ts->tensors);
    CHECK(tp && (*tp = tensor_raw(a, "i32", BB_DT_INT32, tdims, 1, i32, sizeof i32)));
    tp = BB_VEC_PUSH(a, &ts->tensors);
    CHECK(tp && (*tp = tensor_raw(a, "f16", BB_DT_FLOAT16, tdims, 1, f16, sizeof f16)));

    bb_attr *gs = bb_node_add_attr(a, n, "branches", BB_ATTR_GRAPHS);
    CHECK(gs);
    bb_graph **gp = BB_VEC_PUSH(a, &gs->graphs);
    CHECK(gp && (*gp = wrap_graph(a, "branch0", NULL)));
    gp = BB_VEC_PUSH(a, &gs->graphs);
    CHECK(gp && (*gp = wrap_graph(a, "branch1", NULL)));

    bb_attr *sp = bb_node_add_attr(a, n, "sparse", BB_ATTR_SPARSE_TENSOR);
    CHECK(sp && set_bytes(a, &sp->sparse_tensor, SPARSE_TENSOR, sizeof SPARSE_TENSOR));
    sp->has_sparse_tensor = true;
    bb_attr *sps = bb_node_add_attr(a, n, "sparses", BB_ATTR_SPARSE_TENSORS);
    CHECK(sps && push_bytes(a, &sps->sparse_tensors, SPARSE_TENSOR, sizeof SPARSE_TENSOR) &&
          push_bytes(a, &sps->sparse_tensors, SPARSE_TENSOR, sizeof SPARSE_TENSOR));

    bb_attr *tpa = bb_node_add_attr(a, n, "dtype", BB_ATTR_TYPE_PROTO);
    CHECK(tpa && (tpa->tp = bb_type_proto_opaque(a, "ai.bytesandbrains", "PeerId")));
    bb_attr *tps = bb_node_add_attr(a, n, "dtypes", BB_ATTR_TYPE_PROTOS);
    CHECK(tps);
    bb_type_proto **tt = BB_VEC_PUSH(a, &tps->type_protos);
    CHECK(tt && (*tt = bb_type_proto_tensor(a, BB_DT_INT64)));
    tt = BB_VEC_PUSH(a, &tps->type_protos);
    CHECK(tt && (*tt = bb_type_proto_sequence(a, bb_type_proto_tensor(a, BB_DT_FLOAT))));
    return n;
}

static bb_function *full_function(bb_model *m)
{
    bb_arena *a = m->arena;
    bb_function *f = bb_model_add_function(m, "user.app", "Client");
    CHECK(f);
    f->overload = "v2";
    f->doc_string = "client role";
    CHECK(bb_str_list_push(a, &f->inputs, "x") == 0);
    CHECK(bb_str_list_push(a, &f->outputs, "y") == 0);
    CHECK(bb_str_list_push(a, &f->attributes, "peer_selector") == 0);
    bb_node holder = {0};
    CHECK(bb_node_set_attr_int(a, &holder, "rounds", 10));
    bb_attr *cfg = bb_node_set_attr_string(a, &holder, "compressor", "topk");
    CHECK(cfg);
    cfg->doc_string = "concrete impl slot";
    f->attribute_protos = holder.attrs;
    bb_node *n = bb_function_add_node(m, f, "ai.bytesandbrains.syscall", "Interval");
    CHECK(n);
    CHECK(bb_str_list_push(a, &n->inputs, "x") == 0);
    CHECK(bb_str_list_push(a, &n->outputs, "y") == 0);
    bb_attr *ref = bb_node_add_attr(a, n, "count", BB_ATTR_INT);
    CHECK(ref);
    ref->ref_attr_name = "rounds";
    bb_attr *ref2 = bb_node_add_attr(a, n, "ratio", BB_ATTR_FLOAT);
    CHECK(ref2);
    ref2->ref_attr_name = "ratio";
    CHECK(bb_opset_list_add(a, &f->opset_imports, "", 21) == 0);
    CHECK(bb_opset_list_add(a, &f->opset_imports, "ai.bytesandbrains.syscall", 1) == 0);
    CHECK(add_vi(a, &f->value_info, "x",
                 bb_type_proto_opaque(a, "ai.bytesandbrains", "PeerId")));
    CHECK(bb_kv_set(a, &f->metadata, "bb.role", "client") == 0);

    bb_function *f2 = bb_model_add_function(m, "user.app", "Server");
    CHECK(f2);
    CHECK(bb_str_list_push(a, &f2->inputs, "a") == 0);
    CHECK(bb_str_list_push(a, &f2->outputs, "b") == 0);
    bb_node *n2 = bb_function_add_node(m, f2, "", "Identity");
    CHECK(n2);
    CHECK(bb_str_list_push(a, &n2->inputs, "a") == 0);
    CHECK(bb_str_list_push(a, &n2->outputs, "b") == 0);
    CHECK(bb_opset_list_add(a, &f2->opset_imports, "", 21) == 0);
    return f;
}

bb_model *bb_test_model_full(void)
{
    bb_model *m = bb_model_new();
    if (!m)
        return NULL;
    bb_arena *a = m->arena;
    bool ok = false;
    do {
        m->ir_version = BB_FRAMEWORK_IR_VERSION;
        m->has_model_version = true;
        m->model_version = 7;
        m->producer_name = "bbc";
        m->producer_version = "0.1";
        m->domain = "user.app";
        m->doc_string = "every field";
        if (bb_opset_list_add(a, &m->opset_imports, "", 21) ||
            bb_opset_list_add(a, &m->opset_imports, "ai.bytesandbrains.syscall", 1) ||
            bb_opset_list_add(a, &m->opset_imports, "user.app", 1))
            break;
        if (bb_kv_set(a, &m->metadata, "bb.targets", "client,server") ||
            bb_kv_set(a, &m->metadata, "bb.version", "1"))
            break;
        if (!push_bytes(a, &m->training_info, TRAINING_INFO, sizeof TRAINING_INFO) ||
            !push_bytes(a, &m->configuration, DEVICE_CONFIG, sizeof DEVICE_CONFIG))
            break;

        bb_graph *g = bb_graph_new(a, "main");
        if (!g)
            break;
        m->graph = g;
        g->doc_string = "main graph";
        if (bb_kv_set(a, &g->metadata, "bb.graph", "main"))
            break;
        if (!full_node(a, g))
            break;

        static const float w[] = {0.5f, -1.25f, 3.0f, 1e-3f};
        static const int64_t wd[] = {2, 2};
        static const int64_t cnt[] = {-1, 42};
        static const int64_t cd[] = {2};
        bb_tensor_proto *t1 = tensor_raw(a, "w", BB_DT_FLOAT, wd, 2, w, sizeof w);
        bb_tensor_proto *t2 = tensor_raw(a, "counts", BB_DT_INT64, cd, 1, cnt, sizeof cnt);
        bb_tensor_proto *t3 = tensor_raw(a, "labels", BB_DT_STRING, cd, 1, NULL, 0);
        bb_tensor_proto *t4 = tensor_raw(a, "ext", BB_DT_DOUBLE, cd, 1, NULL, 0);
        if (!t1 || !t2 || !t3 || !t4)
            break;
        t1->doc_string = "weights";
        if (bb_kv_set(a, &t1->metadata, "bb.trainable", "1"))
            break;
        t3->has_raw_data = false;
        t3->raw_data.data = NULL;
        t3->raw_data.len = 0;
        if (!push_bytes(a, &t3->string_data, "cat", 3) || !push_bytes(a, &t3->string_data, "", 0))
            break;
        t4->has_raw_data = false;
        t4->raw_data.data = NULL;
        t4->raw_data.len = 0;
        t4->has_data_location = true;
        t4->data_location = 1;
        t4->has_segment = true;
        t4->segment_begin = 0;
        t4->segment_end = 2;
        if (bb_kv_set(a, &t4->external_data, "location", "weights.bin") ||
            bb_kv_set(a, &t4->external_data, "offset", "4096"))
            break;
        bb_tensor_proto *ts[] = {t1, t2, t3, t4};
        bool pushed = true;
        for (size_t i = 0; i < 4 && pushed; i++) {
            bb_tensor_proto **slot = BB_VEC_PUSH(a, &g->initializers);
            if (slot)
                *slot = ts[i];
            else
                pushed = false;
        }
        if (!pushed)
            break;
        if (!push_bytes(a, &g->sparse_initializers, SPARSE_TENSOR, sizeof SPARSE_TENSOR) ||
            !push_bytes(a, &g->quantization_annotations, QUANT_ANNOTATION,
                        sizeof QUANT_ANNOTATION))
            break;

        /* inputs / outputs / value_info cover every TypeProto kind */
        static const int64_t xd[] = {784};
        bb_value_info *x = add_vi(a, &g->inputs, "x", tensor_type(a, BB_DT_FLOAT, xd, 1, "N"));
        if (!x)
            break;
        x->doc_string = "input images";
        if (bb_kv_set(a, &x->metadata, "bb.port", "in"))
            break;
        if (!add_vi(a, &g->inputs, "w", tensor_type(a, BB_DT_FLOAT, wd, 2, NULL)))
            break;
        bb_type_proto *scalar = bb_type_proto_tensor(a, BB_DT_INT64);
        if (!scalar)
            break;
        scalar->has_shape = true; /* rank 0: shape present, no dims */
        if (!add_vi(a, &g->inputs, "round", scalar))
            break;
        if (!add_vi(a, &g->outputs, "y", bb_type_proto_opaque(a, "ai.bytesandbrains", "PeerId")))
            break;

        bb_type_proto *map = bb_arena_alloc(a, sizeof *map);
        bb_type_proto *opt = bb_arena_alloc(a, sizeof *opt);
        bb_type_proto *sparse = bb_arena_alloc(a, sizeof *sparse);
        bb_type_proto *none = bb_arena_alloc(a, sizeof *none);
        bb_type_proto *seq = bb_type_proto_sequence(
            a, bb_type_proto_sequence(a, tensor_type(a, BB_DT_INT32, cd, 1, NULL)));
        if (!map || !opt || !sparse || !none || !seq)
            break;
        map->kind = BB_TP_MAP;
        map->map_key_type = BB_DT_INT64;
        map->elem = bb_type_proto_tensor(a, BB_DT_FLOAT);
        opt->kind = BB_TP_OPTIONAL;
        opt->elem = bb_type_proto_opaque(a, "ai.bytesandbrains", "Address");
        sparse->kind = BB_TP_SPARSE_TENSOR;
        sparse->elem_type = BB_DT_FLOAT;
        sparse->has_shape = true;
        bb_dim *sd = BB_VEC_PUSH(a, &sparse->shape);
        if (!sd)
            break;
        sd->has_value = true;
        sd->value = 4;
        bb_dim *empty = BB_VEC_PUSH(a, &sparse->shape); /* unknown dim */
        if (!empty)
            break;
        empty->denotation = "CHANNEL";
        none->kind = BB_TP_NONE;
        none->denotation = "IMAGE";
        seq->denotation = "SEQ";
        if (!add_vi(a, &g->value_info, "m", map) || !add_vi(a, &g->value_info, "o", opt) ||
            !add_vi(a, &g->value_info, "s", sparse) || !add_vi(a, &g->value_info, "n", none) ||
            !add_vi(a, &g->value_info, "q", seq) || !add_vi(a, &g->value_info, "untyped", NULL))
            break;

        if (!full_function(m))
            break;
        ok = true;
    } while (0);
    if (!ok) {
        bb_model_free(m);
        return NULL;
    }
    return m;
}
