/*
 * test_pass_inline_for_partition.c — which calls are inlined (wire-touching,
 * pure-ONNX, single-call) and which survive (multi-call without wire ops),
 * renaming, formal binding, slot declarations carried to the root, net_in
 * formals, home_class of class modules, and node naming.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bbc_fixture.h"

typedef struct t {
    bb_model *m;
    bb_function *f;
    bbc_state st;
    bbc_error err;
} t;

static int run_inline(t *x)
{
    int rc = fx_state(&x->st, x->m, NULL, NULL, NULL, &x->err);
    return rc == BB_OK ? fx_run(&x->st, "inline_for_partition") : rc;
}

/* Child(x) -> y: PassThrough; declares slot "agg". */
static bb_function *child(bb_model *m, const char *name, bool wire)
{
    bb_function *c = bb_model_add_function(m, "user.app", name);
    bb_str_list_push(m->arena, &c->inputs, "x");
    bb_str_list_push(m->arena, &c->outputs, "y");
    fx_type(m, c, "x", &BB_TYPE_TRIGGER);
    fx_node(m, c, NULL, BB_DOMAIN_SYSCALL, "PassThrough", FX_L("x"), FX_L("y"));
    if (wire)
        fx_node(m, c, NULL, BB_DOMAIN_WIRE, "Recv", FX_NOL, FX_L("t", "p"));
    fx_concrete(m, c, "agg", "agg::FedAvg", "Aggregator");
    return c;
}

static void test_single_call_inlined(void **state)
{
    (void)state;
    t x = {0};
    x.m = fx_model(&x.f);
    child(x.m, "Child", false);
    fx_node(x.m, x.f, NULL, BB_DOMAIN_SYSCALL, "Pulse", FX_NOL, FX_L("go"));
    bb_node *call = fx_node(x.m, x.f, NULL, "user.app", "Child", FX_L("go"), FX_L("out"));
    fx_meta(x.m, call, BB_META_HOME_CLASS, "Server");
    fx_node(x.m, x.f, NULL, BB_DOMAIN_SYSCALL, "OnTrigger", FX_L("out"), FX_L("z"));
    assert_int_equal(run_inline(&x), BB_OK);
    const bb_function *r = x.st.root;
    assert_int_equal(r->nodes.n, 3);
    assert_null(fx_find(r, "Child", 0));
    const bb_node *pt = fx_find(r, "PassThrough", 0);
    /* Formals bound to the actuals: go -> PassThrough -> out. */
    assert_string_equal(pt->inputs.v[0], "go");
    assert_string_equal(pt->outputs.v[0], "out");
    assert_string_equal(pt->name, "Child/PassThrough_0");
    assert_string_equal(bbc_meta(pt, BB_META_HOME_CLASS), "Server");
    /* Unnamed root nodes get names too. */
    assert_string_equal(fx_find(r, "Pulse", 0)->name, "Pulse_0");
    /* The child's slot is now declared by the root. */
    assert_int_equal(r->attribute_protos.n, 1);
    assert_string_equal(r->attribute_protos.v[0]->name, "agg");
    assert_string_equal(bb_kv_get(&r->metadata, "ai.bytesandbrains.concrete_type.agg"),
                        "agg::FedAvg");
    /* Idempotent. */
    assert_int_equal(fx_run(&x.st, "inline_for_partition"), BB_OK);
    assert_int_equal(r->nodes.n, 3);
    bbc_state_free(&x.st);
}

static void test_multi_call_survives_unless_wire(void **state)
{
    (void)state;
    t x = {0};
    x.m = fx_model(&x.f);
    child(x.m, "Plain", false);
    child(x.m, "Net", true);
    fx_node(x.m, x.f, NULL, BB_DOMAIN_SYSCALL, "Pulse", FX_NOL, FX_L("go"));
    fx_node(x.m, x.f, NULL, "user.app", "Plain", FX_L("go"), FX_L("a"));
    fx_node(x.m, x.f, NULL, "user.app", "Plain", FX_L("a"), FX_L("b"));
    fx_node(x.m, x.f, NULL, "user.app", "Net", FX_L("b"), FX_L("c"));
    fx_node(x.m, x.f, NULL, "user.app", "Net", FX_L("c"), FX_L("d"));
    assert_int_equal(run_inline(&x), BB_OK);
    const bb_function *r = x.st.root;
    /* Two Plain calls stay; both Net calls are inlined with distinct prefixes. */
    assert_int_equal(fx_count(r, "Plain"), 2);
    assert_int_equal(fx_count(r, "Net"), 0);
    assert_int_equal(fx_count(r, "Recv"), 2);
    assert_string_equal(fx_find(r, "Recv", 0)->outputs.v[1], "Net/p");
    assert_string_equal(fx_find(r, "Recv", 1)->outputs.v[1], "Net_1/p");
    bbc_state_free(&x.st);
}

static void test_pure_onnx_inlined(void **state)
{
    (void)state;
    t x = {0};
    x.m = fx_model(&x.f);
    bb_function *c = bb_model_add_function(x.m, "user.app", "Sq");
    bb_str_list_push(x.m->arena, &c->inputs, "x");
    bb_str_list_push(x.m->arena, &c->outputs, "y");
    fx_node(x.m, c, NULL, "", "Mul", FX_L("x", "x"), FX_L("y"));
    bb_str_list_push(x.m->arena, &x.f->inputs, "v");
    fx_type(x.m, x.f, "v", &BB_TYPE_TENSOR_F32);
    fx_node(x.m, x.f, NULL, "user.app", "Sq", FX_L("v"), FX_L("v2"));
    fx_node(x.m, x.f, NULL, "user.app", "Sq", FX_L("v2"), FX_L("v4"));
    assert_int_equal(run_inline(&x), BB_OK);
    assert_int_equal(fx_count(x.st.root, "Sq"), 0);
    assert_int_equal(fx_count(x.st.root, "Mul"), 2);
    bbc_state_free(&x.st);
}

/* A class module that calls one pure-ONNX function twice: inlining the
 * class module leaves its two calls with the placeholder name "Server/";
 * each must still get its own prefix ("Server/Sq", "Server/Sq_1") so the
 * two inlined bodies never write the same value. */
static void test_nested_calls_get_distinct_prefixes(void **state)
{
    (void)state;
    t x = {0};
    x.m = fx_model(&x.f);
    bb_function *sq = bb_model_add_function(x.m, "user.app", "Sq");
    bb_str_list_push(x.m->arena, &sq->inputs, "x");
    bb_str_list_push(x.m->arena, &sq->outputs, "y");
    fx_node(x.m, sq, NULL, "", "Mul", FX_L("x", "x"), FX_L("t"));
    fx_node(x.m, sq, NULL, "", "Relu", FX_L("t"), FX_L("y"));
    bb_function *srv = bb_model_add_function(x.m, "user.app", "Server");
    bb_kv_set(x.m->arena, &srv->metadata, BB_META_HOME_CLASS, "Server");
    bb_str_list_push(x.m->arena, &srv->inputs, "v");
    fx_type(x.m, srv, "v", &BB_TYPE_TENSOR_F32);
    fx_node(x.m, srv, NULL, "user.app", "Sq", FX_L("v"), FX_L("v2"));
    fx_node(x.m, srv, NULL, "user.app", "Sq", FX_L("v2"), FX_L("v4"));
    fx_node(x.m, srv, NULL, BB_DOMAIN_SYSCALL, "AppEmit", FX_L("v4"), FX_NOL);
    bb_str_list_push(x.m->arena, &x.f->inputs, "in");
    fx_type(x.m, x.f, "in", &BB_TYPE_TENSOR_F32);
    fx_node(x.m, x.f, NULL, "user.app", "Server", FX_L("in"), FX_NOL);
    assert_int_equal(run_inline(&x), BB_OK);
    const bb_function *r = x.st.root;
    assert_int_equal(fx_count(r, "Sq"), 0);
    assert_int_equal(fx_count(r, "Mul"), 2);
    assert_string_equal(fx_find(r, "Mul", 0)->outputs.v[0], "Server/Sq/t");
    assert_string_equal(fx_find(r, "Mul", 1)->outputs.v[0], "Server/Sq_1/t");
    assert_string_equal(fx_find(r, "Mul", 1)->inputs.v[0], "Server/v2");
    assert_string_equal(fx_find(r, "Mul", 0)->name, "Server/Sq/Mul_0");
    char why[256];
    assert_int_equal(bbc_verify_function(r, why, sizeof why), BB_OK);
    bbc_state_free(&x.st);
}

static void test_net_in_formal(void **state)
{
    (void)state;
    t x = {0};
    x.m = fx_model(&x.f);
    bb_function *c = bb_model_add_function(x.m, "user.app", "Client");
    bb_kv_set(x.m->arena, &c->metadata, BB_META_HOME_CLASS, "Client");
    bb_str_list_push(x.m->arena, &c->inputs, "weights");
    fx_type(x.m, c, "weights", &BB_TYPE_TENSOR_F32);
    bb_kv_set(x.m->arena, &c->metadata, "ai.bytesandbrains.net_in.weights", "weights");
    fx_node(x.m, c, NULL, BB_DOMAIN_SYSCALL, "PassThrough", FX_L("weights"), FX_L("w2"));
    fx_node(x.m, x.f, NULL, "user.app", "Client", FX_L(""), FX_NOL);
    assert_int_equal(run_inline(&x), BB_OK);
    const bb_function *r = x.st.root;
    assert_int_equal(x.st.net_ins.n, 1);
    assert_string_equal(x.st.net_ins.v[0].port, "weights");
    assert_string_equal(x.st.net_ins.v[0].value, "Client/weights");
    assert_string_equal(x.st.net_ins.v[0].cls, "Client");
    assert_true(bb_str_list_find(&r->inputs, "Client/weights") >= 0);
    assert_ptr_equal(bbc_value_type(r, "Client/weights"), &BB_TYPE_TENSOR_F32);
    assert_string_equal(bbc_meta(fx_find(r, "PassThrough", 0), BB_META_HOME_CLASS), "Client");
    bbc_state_free(&x.st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_call_inlined),
        cmocka_unit_test(test_multi_call_survives_unless_wire),
        cmocka_unit_test(test_pure_onnx_inlined),
        cmocka_unit_test(test_net_in_formal),
        cmocka_unit_test(test_nested_calls_get_distinct_prefixes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
