/* Unit tests for the IR construction, lookup, clone and dtype helpers (bb/ir.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "bb/ir.h"

static void test_model_new_free_str(void **state)
{
    (void)state;
    bb_model *m = bb_model_new();
    assert_non_null(m);
    assert_non_null(m->arena);
    assert_null(m->graph);
    assert_int_equal(m->functions.n, 0);
    char buf[8] = "abc";
    const char *s = bb_model_str(m, buf);
    buf[0] = 'x'; /* the copy is independent */
    assert_string_equal(s, "abc");
    assert_null(bb_model_str(m, NULL));
    bb_model_free(m);
    bb_model_free(NULL);
}

static void test_graph_function_nodes(void **state)
{
    (void)state;
    bb_model *m = bb_model_new();
    bb_graph *g = bb_graph_new(m->arena, "main");
    assert_non_null(g);
    assert_string_equal(g->name, "main");
    assert_null(bb_graph_new(m->arena, NULL)->name);

    bb_node *gn = bb_graph_add_node(m->arena, g, "", "Relu");
    assert_non_null(gn);
    assert_int_equal(g->nodes.n, 1);
    assert_ptr_equal(g->nodes.v[0], gn);
    assert_string_equal(gn->op_type, "Relu");
    assert_string_equal(gn->domain, "");

    bb_function *f = bb_model_add_function(m, "user.app", "Client");
    assert_non_null(f);
    assert_int_equal(m->functions.n, 1);
    assert_string_equal(f->domain, "user.app");
    assert_string_equal(f->name, "Client");
    bb_node *n1 = bb_function_add_node(m, f, "ai.bytesandbrains.syscall", "Interval");
    bb_node *n2 = bb_function_add_node(m, f, NULL, "Add");
    assert_int_equal(f->nodes.n, 2);
    assert_ptr_equal(f->nodes.v[0], n1);
    assert_ptr_equal(f->nodes.v[1], n2);
    assert_null(n2->domain);

    bb_node *free_node = bb_node_new(m->arena, "d", "Op");
    assert_string_equal(free_node->domain, "d");
    assert_string_equal(free_node->op_type, "Op");
    assert_int_equal(free_node->inputs.n, 0);
    bb_model_free(m);
}

static void test_str_list(void **state)
{
    (void)state;
    bb_arena *a = bb_arena_create();
    bb_str_list l = {0};
    char buf[4] = "x";
    for (int i = 0; i < 20; i++) {
        buf[1] = (char)('a' + i);
        assert_int_equal(bb_str_list_push(a, &l, buf), BB_OK);
    }
    assert_int_equal(bb_str_list_push(a, &l, ""), BB_OK);
    assert_int_equal(bb_str_list_push(a, &l, NULL), BB_OK);
    assert_int_equal(l.n, 22);
    assert_string_equal(l.v[0], "xa");
    assert_int_equal(bb_str_list_find(&l, "xc"), 2);
    assert_int_equal(bb_str_list_find(&l, "xt"), 19);
    assert_int_equal(bb_str_list_find(&l, ""), 20);
    assert_int_equal(bb_str_list_find(&l, NULL), 21);
    assert_int_equal(bb_str_list_find(&l, "zz"), -1);
    bb_arena_destroy(a);
}

static void test_kv(void **state)
{
    (void)state;
    bb_arena *a = bb_arena_create();
    bb_kv_list l = {0};
    assert_null(bb_kv_get(&l, "k"));
    assert_int_equal(bb_kv_set(a, &l, "k", "1"), BB_OK);
    assert_int_equal(bb_kv_set(a, &l, "j", "2"), BB_OK);
    assert_int_equal(bb_kv_set(a, &l, "k", "3"), BB_OK); /* replaces */
    assert_int_equal(l.n, 2);
    assert_string_equal(bb_kv_get(&l, "k"), "3");
    assert_string_equal(l.v[0].key, "k"); /* position kept */
    assert_string_equal(bb_kv_get(&l, "j"), "2");
    assert_true(bb_kv_remove(&l, "k"));
    assert_false(bb_kv_remove(&l, "k"));
    assert_null(bb_kv_get(&l, "k"));
    assert_int_equal(l.n, 1);
    assert_string_equal(l.v[0].key, "j");
    bb_arena_destroy(a);
}

static void test_opsets(void **state)
{
    (void)state;
    bb_arena *a = bb_arena_create();
    bb_opset_list l = {0};
    assert_int_equal(bb_opset_list_version(&l, ""), -1);
    assert_int_equal(bb_opset_list_add(a, &l, "", 17), BB_OK);
    assert_int_equal(bb_opset_list_add(a, &l, "ai.bytesandbrains.syscall", 1), BB_OK);
    assert_int_equal(bb_opset_list_version(&l, "ai.onnx"), 17);
    assert_int_equal(bb_opset_list_version(&l, NULL), 17);
    assert_int_equal(bb_opset_list_version(&l, ""), 17);
    assert_int_equal(bb_opset_list_version(&l, "ai.bytesandbrains.syscall"), 1);
    assert_int_equal(bb_opset_list_version(&l, "ai.bytesandbrains.wire"), -1);
    /* same domain again (spelled differently) updates, no duplicate */
    assert_int_equal(bb_opset_list_add(a, &l, "ai.onnx", 18), BB_OK);
    assert_int_equal(l.n, 2);
    assert_int_equal(bb_opset_list_version(&l, ""), 18);
    bb_arena_destroy(a);
}

static void test_attrs(void **state)
{
    (void)state;
    bb_arena *a = bb_arena_create();
    bb_node *n = bb_node_new(a, "", "Op");
    bb_attr *g = bb_node_add_attr(a, n, "body", BB_ATTR_GRAPH);
    assert_non_null(g);
    assert_int_equal(g->type, BB_ATTR_GRAPH);
    assert_non_null(bb_node_set_attr_int(a, n, "axis", 3));
    assert_non_null(bb_node_set_attr_float(a, n, "alpha", 0.5f));
    assert_non_null(bb_node_set_attr_string(a, n, "mode", "fast"));
    const int64_t perm[] = {2, 0, 1};
    bb_attr *ints = bb_node_set_attr_ints(a, n, "perm", perm, 3);
    assert_non_null(ints);
    assert_int_equal(ints->ints.n, 3);
    assert_int_equal(ints->ints.v[2], 1);
    assert_int_equal(n->attrs.n, 5);

    assert_ptr_equal(bb_node_attr(n, "body"), g);
    assert_null(bb_node_attr(n, "nope"));
    assert_int_equal(bb_node_attr_int(n, "axis", -1), 3);
    assert_int_equal(bb_node_attr_int(n, "alpha", -1), -1); /* wrong type */
    assert_int_equal(bb_node_attr_int(n, "nope", 7), 7);
    assert_true(bb_node_attr_float(n, "alpha", 0) == 0.5f);
    assert_true(bb_node_attr_float(n, "axis", 2.0f) == 2.0f);
    assert_string_equal(bb_node_attr_string(n, "mode", "x"), "fast");
    assert_string_equal(bb_node_attr_string(n, "axis", "x"), "x");
    assert_null(bb_node_attr_string(n, "nope", NULL));
    const bb_attr *s = bb_node_attr(n, "mode");
    assert_true(s->has_s);
    assert_int_equal(s->s.len, 4);

    /* set replaces in place, possibly changing type */
    assert_non_null(bb_node_set_attr_string(a, n, "axis", "0123456789abcdef"));
    assert_int_equal(n->attrs.n, 5);
    assert_string_equal(n->attrs.v[1]->name, "axis");
    assert_string_equal(bb_node_attr_string(n, "axis", NULL), "0123456789abcdef");
    assert_int_equal(bb_node_attr_int(n, "axis", -1), -1);
    assert_non_null(bb_node_set_attr_ints(a, n, "empty", NULL, 0));
    assert_int_equal(bb_node_attr(n, "empty")->ints.n, 0);
    assert_non_null(bb_node_set_attr_string(a, n, "nul", NULL));
    assert_string_equal(bb_node_attr_string(n, "nul", "x"), "");
    bb_arena_destroy(a);
}

static void test_value_info_and_types(void **state)
{
    (void)state;
    bb_arena *a = bb_arena_create();
    bb_type_proto *t = bb_type_proto_tensor(a, BB_DT_FLOAT);
    assert_int_equal(t->kind, BB_TP_TENSOR);
    assert_int_equal(t->elem_type, BB_DT_FLOAT);
    assert_false(t->has_shape);
    bb_value_info_list l = {0};
    bb_value_info *vi = bb_value_info_new(a, "x", t);
    assert_string_equal(vi->name, "x");
    assert_ptr_equal(vi->type, t);
    *(bb_value_info **)BB_VEC_PUSH(a, &l) = vi;
    *(bb_value_info **)BB_VEC_PUSH(a, &l) = bb_value_info_new(a, "y", NULL);
    assert_ptr_equal(bb_value_info_find(&l, "x"), vi);
    assert_null(bb_value_info_find(&l, "y")->type);
    assert_null(bb_value_info_find(&l, "z"));

    bb_type_proto *o = bb_type_proto_opaque(a, "ai.bytesandbrains", "PeerId");
    assert_int_equal(o->kind, BB_TP_OPAQUE);
    assert_string_equal(o->opaque_domain, "ai.bytesandbrains");
    assert_string_equal(o->opaque_name, "PeerId");
    bb_type_proto *sq = bb_type_proto_sequence(a, o);
    assert_int_equal(sq->kind, BB_TP_SEQUENCE);
    assert_ptr_equal(sq->elem, o);
    bb_arena_destroy(a);
}

static void add_dim(bb_arena *a, bb_type_proto *t, int64_t v, const char *param)
{
    t->has_shape = true;
    bb_dim *d = BB_VEC_PUSH(a, &t->shape);
    d->has_value = param == NULL;
    d->value = v;
    d->param = param;
}

static void test_type_equal(void **state)
{
    (void)state;
    bb_arena *a = bb_arena_create();
    bb_type_proto *x = bb_type_proto_tensor(a, BB_DT_FLOAT);
    bb_type_proto *y = bb_type_proto_tensor(a, BB_DT_FLOAT);
    assert_true(bb_type_proto_equal(x, y));
    assert_true(bb_type_proto_equal(NULL, NULL));
    assert_false(bb_type_proto_equal(x, NULL));
    assert_false(bb_type_proto_equal(x, bb_type_proto_tensor(a, BB_DT_INT64)));
    add_dim(a, x, 0, "N");
    assert_false(bb_type_proto_equal(x, y)); /* shape vs no shape */
    add_dim(a, y, 0, "N");
    assert_true(bb_type_proto_equal(x, y));
    add_dim(a, x, 784, NULL);
    add_dim(a, y, 785, NULL);
    assert_false(bb_type_proto_equal(x, y));
    y->shape.v[1].value = 784;
    y->denotation = "IMAGE"; /* denotations do not matter */
    assert_true(bb_type_proto_equal(x, y));
    y->shape.v[0].param = "M";
    assert_false(bb_type_proto_equal(x, y));

    bb_type_proto *o1 = bb_type_proto_opaque(a, "d", "A");
    bb_type_proto *o2 = bb_type_proto_opaque(a, "d", "A");
    bb_type_proto *o3 = bb_type_proto_opaque(a, "d", "B");
    assert_true(bb_type_proto_equal(o1, o2));
    assert_false(bb_type_proto_equal(o1, o3));
    assert_false(bb_type_proto_equal(o1, x));
    assert_true(bb_type_proto_equal(bb_type_proto_sequence(a, o1),
                                    bb_type_proto_sequence(a, o2)));
    assert_false(bb_type_proto_equal(bb_type_proto_sequence(a, o1),
                                     bb_type_proto_sequence(a, o3)));
    assert_false(bb_type_proto_equal(bb_type_proto_sequence(a, o1),
                                     bb_type_proto_sequence(a, NULL)));
    bb_type_proto *m1 = bb_type_proto_sequence(a, o1), *m2 = bb_type_proto_sequence(a, o1);
    m1->kind = m2->kind = BB_TP_MAP;
    m1->map_key_type = BB_DT_STRING;
    m2->map_key_type = BB_DT_INT64;
    assert_false(bb_type_proto_equal(m1, m2));
    m2->map_key_type = BB_DT_STRING;
    assert_true(bb_type_proto_equal(m1, m2));
    bb_arena_destroy(a);
}

static void test_find_function(void **state)
{
    (void)state;
    bb_model *m = bb_model_new();
    bb_function *a = bb_model_add_function(m, "user.app", "Server");
    bb_function *b = bb_model_add_function(m, "user.app", "Client");
    bb_function *c = bb_model_add_function(m, "user.app", "Client");
    c->overload = bb_model_str(m, "v2");
    bb_function *d = bb_model_add_function(m, NULL, "Local");
    assert_ptr_equal(bb_model_find_function(m, "user.app", "Server", NULL), a);
    assert_ptr_equal(bb_model_find_function(m, "user.app", "Client", NULL), b);
    assert_ptr_equal(bb_model_find_function(m, "user.app", "Client", ""), b);
    assert_ptr_equal(bb_model_find_function(m, "user.app", "Client", "v2"), c);
    assert_ptr_equal(bb_model_find_function(m, "", "Local", NULL), d);
    assert_null(bb_model_find_function(m, "other", "Server", NULL));
    assert_null(bb_model_find_function(m, "user.app", "Nope", NULL));
    bb_model_free(m);
}

/* Build a model touching every field kind, for the clone test. */
static bb_model *rich_model(void)
{
    bb_model *m = bb_model_new();
    bb_arena *a = m->arena;
    m->ir_version = 10;
    m->has_model_version = true;
    m->model_version = 3;
    m->producer_name = bb_model_str(m, "bytesandbrains");
    m->domain = bb_model_str(m, "user.app");
    bb_opset_list_add(a, &m->opset_imports, "", 17);
    bb_kv_set(a, &m->metadata, "k", "v");
    bb_bytes *ti = BB_VEC_PUSH(a, &m->training_info);
    ti->data = bb_arena_memdup(a, "\x0a\x00", 2);
    ti->len = 2;

    m->graph = bb_graph_new(a, "main");
    bb_tensor_proto *t = bb_arena_alloc(a, sizeof *t);
    t->name = "w";
    t->data_type = BB_DT_FLOAT;
    *(int64_t *)BB_VEC_PUSH(a, &t->dims) = 2;
    float w[2] = {1.5f, -2.0f};
    t->raw_data.data = bb_arena_memdup(a, w, sizeof w);
    t->raw_data.len = sizeof w;
    t->has_raw_data = true;
    bb_kv_set(a, &t->metadata, "tk", "tv");
    *(bb_tensor_proto **)BB_VEC_PUSH(a, &m->graph->initializers) = t;
    bb_type_proto *tt = bb_type_proto_tensor(a, BB_DT_FLOAT);
    add_dim(a, tt, 0, "N");
    *(bb_value_info **)BB_VEC_PUSH(a, &m->graph->inputs) = bb_value_info_new(a, "x", tt);
    bb_node *gn = bb_graph_add_node(a, m->graph, "", "If");
    bb_str_list_push(a, &gn->inputs, "x");
    bb_attr *body = bb_node_add_attr(a, gn, "then_branch", BB_ATTR_GRAPH);
    body->g = bb_graph_new(a, "then");
    bb_graph_add_node(a, body->g, "", "Identity");

    bb_function *f = bb_model_add_function(m, "user.app", "Client");
    bb_str_list_push(a, &f->inputs, "in");
    bb_str_list_push(a, &f->outputs, "out");
    bb_str_list_push(a, &f->attributes, "model");
    bb_opset_list_add(a, &f->opset_imports, "ai.bytesandbrains.syscall", 1);
    bb_kv_set(a, &f->metadata, "bb.home_class", "Client");
    bb_attr *cs = bb_arena_alloc(a, sizeof *cs);
    cs->name = "codec";
    cs->type = BB_ATTR_STRING;
    cs->s.data = bb_arena_memdup(a, "{}", 3);
    cs->s.len = 2;
    cs->has_s = true;
    cs->t = bb_tensor_proto_clone(a, t);
    *(bb_attr **)BB_VEC_PUSH(a, &f->attribute_protos) = cs;
    *(bb_value_info **)BB_VEC_PUSH(a, &f->value_info) =
        bb_value_info_new(a, "in", bb_type_proto_sequence(a, bb_type_proto_opaque(a, "d", "P")));
    bb_node *n = bb_function_add_node(m, f, "ai.bytesandbrains.syscall", "Send");
    n->name = "send0";
    bb_str_list_push(a, &n->inputs, "in");
    bb_str_list_push(a, &n->inputs, "");
    bb_str_list_push(a, &n->outputs, "out");
    const int64_t iv[] = {1, 2};
    bb_node_set_attr_ints(a, n, "ids", iv, 2);
    bb_attr *ts = bb_node_add_attr(a, n, "tps", BB_ATTR_TYPE_PROTOS);
    *(bb_type_proto **)BB_VEC_PUSH(a, &ts->type_protos) = tt;
    bb_attr *tens = bb_node_add_attr(a, n, "ts", BB_ATTR_TENSORS);
    *(bb_tensor_proto **)BB_VEC_PUSH(a, &tens->tensors) = t;
    bb_attr *strs = bb_node_add_attr(a, n, "ss", BB_ATTR_STRINGS);
    bb_bytes *sb = BB_VEC_PUSH(a, &strs->strings);
    sb->data = bb_arena_memdup(a, "ab", 3);
    sb->len = 2;
    bb_kv_set(a, &n->metadata, "bb.site", "1");
    return m;
}

static void test_clones(void **state)
{
    (void)state;
    bb_model *m = rich_model();
    bb_model *c = bb_model_clone(m);
    assert_non_null(c);
    assert_ptr_not_equal(c->arena, m->arena);
    /* clobber the original's storage: the clone must not share it */
    bb_model_free(m);

    assert_int_equal(c->ir_version, 10);
    assert_true(c->has_model_version);
    assert_int_equal(c->model_version, 3);
    assert_string_equal(c->producer_name, "bytesandbrains");
    assert_int_equal(bb_opset_list_version(&c->opset_imports, ""), 17);
    assert_string_equal(bb_kv_get(&c->metadata, "k"), "v");
    assert_int_equal(c->training_info.n, 1);
    assert_memory_equal(c->training_info.v[0].data, "\x0a\x00", 2);

    bb_graph *g = c->graph;
    assert_string_equal(g->name, "main");
    assert_int_equal(g->initializers.n, 1);
    bb_tensor_proto *t = g->initializers.v[0];
    assert_string_equal(t->name, "w");
    assert_int_equal(t->dims.n, 1);
    assert_int_equal(t->dims.v[0], 2);
    float w[2];
    assert_int_equal(t->raw_data.len, sizeof w);
    memcpy(w, t->raw_data.data, sizeof w);
    assert_true(w[0] == 1.5f && w[1] == -2.0f);
    assert_string_equal(bb_kv_get(&t->metadata, "tk"), "tv");
    assert_string_equal(g->inputs.v[0]->type->shape.v[0].param, "N");
    const bb_attr *body = bb_node_attr(g->nodes.v[0], "then_branch");
    assert_string_equal(body->g->name, "then");
    assert_string_equal(body->g->nodes.v[0]->op_type, "Identity");

    bb_function *f = bb_model_find_function(c, "user.app", "Client", NULL);
    assert_non_null(f);
    assert_int_equal(bb_str_list_find(&f->attributes, "model"), 0);
    assert_string_equal(bb_kv_get(&f->metadata, "bb.home_class"), "Client");
    assert_int_equal(bb_opset_list_version(&f->opset_imports, "ai.bytesandbrains.syscall"), 1);
    assert_memory_equal(f->attribute_protos.v[0]->s.data, "{}", 3);
    assert_int_equal(f->attribute_protos.v[0]->t->raw_data.len, 8);
    bb_type_proto *vt = f->value_info.v[0]->type;
    assert_int_equal(vt->kind, BB_TP_SEQUENCE);
    assert_string_equal(vt->elem->opaque_name, "P");
    bb_node *n = f->nodes.v[0];
    assert_string_equal(n->name, "send0");
    assert_int_equal(n->inputs.n, 2);
    assert_string_equal(n->inputs.v[1], "");
    assert_int_equal(n->attrs.n, 4);
    assert_int_equal(bb_node_attr(n, "ids")->ints.v[1], 2);
    assert_int_equal(bb_node_attr(n, "tps")->type_protos.v[0]->shape.n, 1);
    assert_string_equal(bb_node_attr(n, "ts")->tensors.v[0]->name, "w");
    assert_memory_equal(bb_node_attr(n, "ss")->strings.v[0].data, "ab", 3);
    assert_string_equal(bb_kv_get(&n->metadata, "bb.site"), "1");

    /* per-object clones into a foreign arena */
    bb_arena *a = bb_arena_create();
    bb_function *fc = bb_function_clone(a, f);
    bb_node *nc = bb_node_clone(a, n);
    bb_graph *gc = bb_graph_clone(a, g);
    bb_value_info *vc = bb_value_info_clone(a, f->value_info.v[0]);
    bb_attr *ac = bb_attr_clone(a, f->attribute_protos.v[0]);
    bb_type_proto *tc = bb_type_proto_clone(a, vt);
    bb_tensor_proto *tpc = bb_tensor_proto_clone(a, t);
    assert_null(bb_node_clone(a, NULL));
    assert_null(bb_type_proto_clone(a, NULL));
    assert_ptr_not_equal(fc->nodes.v[0], n);
    bb_model_free(c);
    assert_string_equal(fc->nodes.v[0]->name, "send0");
    assert_string_equal(nc->outputs.v[0], "out");
    assert_string_equal(gc->initializers.v[0]->name, "w");
    assert_string_equal(vc->name, "in");
    assert_string_equal(ac->name, "codec");
    assert_true(bb_type_proto_equal(tc, vc->type));
    assert_int_equal(tpc->data_type, BB_DT_FLOAT);
    bb_arena_destroy(a);
}

/* A model clone keeps one copy of each repeated short string (domains, op
 * types, metadata) in its own arena; long strings are copied per use. */
static void test_clone_shares_repeated_strings(void **state)
{
    (void)state;
    bb_model *m = bb_model_new();
    bb_arena *a = m->arena;
    bb_function *f = bb_model_add_function(m, "user.app", "F");
    char long_value[100];
    memset(long_value, 'x', sizeof long_value - 1);
    long_value[sizeof long_value - 1] = '\0';
    for (int i = 0; i < 3; i++) {
        bb_node *n = bb_function_add_node(m, f, "ai.bytesandbrains.syscall", "PassThrough");
        bb_kv_set(a, &n->metadata, "ai.bytesandbrains.home_class", "Client");
        bb_kv_set(a, &n->metadata, "long", long_value);
    }
    bb_model *c = bb_model_clone(m);
    assert_non_null(c);
    bb_model_free(m); /* the clone owns what it shares */
    const bb_function *cf = c->functions.v[0];
    const bb_node *n0 = cf->nodes.v[0];
    for (int i = 1; i < 3; i++) {
        const bb_node *n = cf->nodes.v[i];
        assert_ptr_equal(n->domain, n0->domain);
        assert_ptr_equal(n->op_type, n0->op_type);
        assert_ptr_equal(n->metadata.v[0].key, n0->metadata.v[0].key);
        assert_ptr_equal(n->metadata.v[0].value, n0->metadata.v[0].value);
        assert_ptr_not_equal(n->metadata.v[1].value, n0->metadata.v[1].value);
        assert_string_equal(n->metadata.v[1].value, long_value);
    }
    assert_string_equal(n0->domain, "ai.bytesandbrains.syscall");
    assert_string_equal(bb_kv_get(&n0->metadata, "ai.bytesandbrains.home_class"), "Client");
    /* a plain per-object clone shares nothing */
    bb_arena *b = bb_arena_create();
    bb_node *x = bb_node_clone(b, n0), *y = bb_node_clone(b, n0);
    assert_ptr_not_equal(x->domain, y->domain);
    bb_arena_destroy(b);
    bb_model_free(c);
}

static void test_domain_is_onnx(void **state)
{
    (void)state;
    assert_true(bb_domain_is_onnx(NULL));
    assert_true(bb_domain_is_onnx(""));
    assert_true(bb_domain_is_onnx("ai.onnx"));
    assert_false(bb_domain_is_onnx("ai.onnx.ml"));
    assert_false(bb_domain_is_onnx("ai.onnxx"));
    assert_false(bb_domain_is_onnx("ai.onn"));
    assert_false(bb_domain_is_onnx("ai.o"));
    assert_false(bb_domain_is_onnx("ai.bytesandbrains.syscall"));
}

static void test_dtypes(void **state)
{
    (void)state;
    assert_int_equal(bb_dtype_size(BB_DT_FLOAT), 4);
    assert_int_equal(bb_dtype_size(BB_DT_INT64), 8);
    assert_int_equal(bb_dtype_size(BB_DT_BOOL), 1);
    assert_int_equal(bb_dtype_size(BB_DT_FLOAT16), 2);
    assert_int_equal(bb_dtype_size(BB_DT_COMPLEX128), 16);
    assert_int_equal(bb_dtype_size(BB_DT_FLOAT8E5M2FNUZ), 1);
    assert_int_equal(bb_dtype_size(BB_DT_STRING), 0);
    assert_int_equal(bb_dtype_size(BB_DT_INT4), 0);
    assert_int_equal(bb_dtype_size(BB_DT_UINT2), 0);
    assert_int_equal(bb_dtype_size(BB_DT_FLOAT8E8M0), 1);
    assert_int_equal(bb_dtype_size(-1), 0);
    assert_int_equal(bb_dtype_size(99), 0);

    assert_int_equal(bb_dtype_nbytes(BB_DT_FLOAT, 10), 40);
    assert_int_equal(bb_dtype_nbytes(BB_DT_FLOAT, 0), 0);
    assert_int_equal(bb_dtype_nbytes(BB_DT_INT4, 3), 2);
    assert_int_equal(bb_dtype_nbytes(BB_DT_UINT4, 4), 2);
    assert_int_equal(bb_dtype_nbytes(BB_DT_FLOAT4E2M1, 1), 1);
    /* 2-bit types pack four per byte */
    assert_int_equal(bb_dtype_nbytes(BB_DT_INT2, 4), 1);
    assert_int_equal(bb_dtype_nbytes(BB_DT_UINT2, 5), 2);
    assert_int_equal(bb_dtype_nbytes(BB_DT_INT2, 0), 0);
    assert_int_equal(bb_dtype_nbytes(BB_DT_FLOAT8E8M0, 3), 3);
    assert_int_equal(bb_dtype_nbytes(BB_DT_STRING, 5), 0);
    assert_true(bb_dtype_nbytes(BB_DT_DOUBLE, UINT64_MAX / 4) == SIZE_MAX);

    assert_string_equal(bb_dtype_name(BB_DT_FLOAT), "float");
    assert_string_equal(bb_dtype_name(BB_DT_INT64), "int64");
    assert_string_equal(bb_dtype_name(BB_DT_BFLOAT16), "bfloat16");
    assert_string_equal(bb_dtype_name(BB_DT_FLOAT4E2M1), "float4e2m1");
    assert_string_equal(bb_dtype_name(BB_DT_FLOAT8E8M0), "float8e8m0");
    assert_string_equal(bb_dtype_name(BB_DT_UINT2), "uint2");
    assert_string_equal(bb_dtype_name(BB_DT_INT2), "int2");
    assert_string_equal(bb_dtype_name(27), "undefined");
    /* every canonical value up to BB_DT_MAX has a name */
    for (int32_t dt = 1; dt <= BB_DT_MAX; dt++)
        assert_string_not_equal(bb_dtype_name(dt), "undefined");
    assert_string_equal(bb_dtype_name(0), "undefined");
    assert_string_equal(bb_dtype_name(1000), "undefined");
    assert_string_equal(bb_dtype_name(-3), "undefined");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_new_free_str),
        cmocka_unit_test(test_graph_function_nodes),
        cmocka_unit_test(test_str_list),
        cmocka_unit_test(test_kv),
        cmocka_unit_test(test_opsets),
        cmocka_unit_test(test_attrs),
        cmocka_unit_test(test_value_info_and_types),
        cmocka_unit_test(test_type_equal),
        cmocka_unit_test(test_find_function),
        cmocka_unit_test(test_clones),
        cmocka_unit_test(test_clone_shares_repeated_strings),
        cmocka_unit_test(test_domain_is_onnx),
        cmocka_unit_test(test_dtypes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
