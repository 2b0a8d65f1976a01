/*
 * test_pass_partition_by_wire_ops.c — one partition per class in order of
 * first appearance, named after the class; nodes, formals, value_info,
 * slots (declared by the class or used by its nodes), sub-functions and the
 * class bootstrap travel with it; wire edges are recorded; a classless
 * program is one "@self" partition whose root bootstrap is renamed.
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

static bb_node *homed(t *x, bb_node *n, const char *cls)
{
    fx_meta(x->m, n, BB_META_HOME_CLASS, cls);
    return n;
}

static void two_classes(t *x)
{
    x->m = fx_model(&x->f);
    /* Class modules (already inlined) declared their slots. */
    bb_function *sm = bb_model_add_function(x->m, "user.app", "Server");
    bb_kv_set(x->m->arena, &sm->metadata, BB_META_HOME_CLASS, "Server");
    fx_concrete(x->m, sm, "agg", "agg::FedAvg", "Aggregator");
    bb_function *cm = bb_model_add_function(x->m, "user.app", "Client");
    bb_kv_set(x->m->arena, &cm->metadata, BB_META_HOME_CLASS, "Client");
    fx_concrete(x->m, cm, "data", "data::Csv", "DataSource");
    fx_concrete(x->m, x->f, "agg", "agg::FedAvg", "Aggregator");
    fx_concrete(x->m, x->f, "data", "data::Csv", "DataSource");
    fx_concrete(x->m, x->f, "sel", "peers::Connected", "PeerSelector");
    /* A multi-call helper the client calls. */
    bb_function *h = bb_model_add_function(x->m, "user.app", "Helper");
    bb_str_list_push(x->m->arena, &h->inputs, "i");
    bb_str_list_push(x->m->arena, &h->outputs, "o");
    fx_node(x->m, h, "h", BB_DOMAIN_SYSCALL, "PassThrough", FX_L("i"), FX_L("o"));
    /* The server's bootstrap. */
    bb_function *b = bb_model_add_function(x->m, "user.app", "Server__bootstrap");
    bb_kv_set(x->m->arena, &b->metadata, BB_META_MODULE_PHASE, "bootstrap");
    bb_kv_set(x->m->arena, &b->metadata, BB_META_HOME_CLASS, "Server");
    fx_node(x->m, b, "bp", BB_DOMAIN_SYSCALL, "Pulse", FX_NOL, FX_L("bt"));

    homed(x, fx_node(x->m, x->f, "p", BB_DOMAIN_SYSCALL, "Pulse", FX_NOL, FX_L("go")), "Server");
    bb_node *s = homed(x, fx_node(x->m, x->f, "sample", BB_DOMAIN_ROLE_PEER_SELECTOR, "Sample",
                                  FX_NOL, FX_L("peers")), "Server");
    fx_on_slot(x->m, s, "sel", "peers::Connected");
    bb_node *snd = homed(x, fx_node(x->m, x->f, "send", BB_DOMAIN_WIRE, "Send",
                                    FX_L("go", "peers"), FX_NOL), "Server");
    fx_meta(x->m, snd, BB_META_PORT, "P");
    fx_meta(x->m, snd, BB_META_DEST_CLASS, "Client");
    bb_node *r = homed(x, fx_node(x->m, x->f, "recv", BB_DOMAIN_WIRE, "Recv", FX_NOL,
                                  FX_L("t", "v")), "Client");
    fx_meta(x->m, r, BB_META_PORT, "P");
    homed(x, fx_node(x->m, x->f, "call", "user.app", "Helper", FX_L("v"), FX_L("w")), "Client");
    homed(x, fx_node(x->m, x->f, "call2", "user.app", "Helper", FX_L("w"), FX_L("w2")), "Client");
    fx_type(x->m, x->f, "go", &BB_TYPE_TRIGGER);
    fx_type(x->m, x->f, "v", &BB_TYPE_TRIGGER);
    fx_type(x->m, x->f, "w", &BB_TYPE_TRIGGER);
}

static void test_two_classes(void **state)
{
    (void)state;
    t x = {0};
    two_classes(&x);
    assert_int_equal(fx_state(&x.st, x.m, NULL, NULL, NULL, &x.err), BB_OK);
    assert_int_equal(fx_run(&x.st, "partition_by_wire_ops"), BB_OK);
    assert_int_equal(x.st.parts.n, 2);
    bbc_partition *s = x.st.parts.v[0], *c = x.st.parts.v[1];
    assert_string_equal(s->cls, "Server");
    assert_string_equal(c->cls, "Client");
    assert_string_equal(s->fn->name, "Server");
    assert_int_equal(s->fn->nodes.n, 3);
    assert_int_equal(c->fn->nodes.n, 3);
    assert_string_equal(s->fn->nodes.v[2]->name, "send");
    assert_int_equal(strlen(s->hash), 16);
    /* value_info follows the values. */
    assert_non_null(bb_value_info_find(&s->fn->value_info, "go"));
    assert_null(bb_value_info_find(&s->fn->value_info, "v"));
    assert_non_null(bb_value_info_find(&c->fn->value_info, "v"));
    /* Slots: declared by the class or used by its nodes. */
    assert_int_equal(s->fn->attribute_protos.n, 2); /* agg (declared), sel (used) */
    assert_int_equal(c->fn->attribute_protos.n, 1); /* data */
    assert_string_equal(c->fn->attribute_protos.v[0]->name, "data");
    assert_null(bb_kv_get(&c->fn->metadata, "ai.bytesandbrains.concrete_type.agg"));
    assert_string_equal(bb_kv_get(&c->fn->metadata, BB_META_HOME_CLASS), "Client");
    /* The client brings its helper, the server its bootstrap. */
    assert_non_null(fx_fn(c->model, "Helper"));
    assert_null(fx_fn(s->model, "Helper"));
    assert_non_null(fx_fn(s->model, "Server__bootstrap"));
    assert_null(fx_fn(c->model, "Server__bootstrap"));
    /* opset_import lists what each body uses. */
    assert_true(bb_opset_list_version(&s->fn->opset_imports, BB_DOMAIN_ROLE_PEER_SELECTOR) >= 1);
    assert_int_equal(bb_opset_list_version(&c->fn->opset_imports, BB_DOMAIN_ROLE_PEER_SELECTOR), -1);
    /* One wire edge Server.send -> Client.recv. */
    assert_int_equal(x.st.edges.n, 1);
    assert_string_equal(x.st.edges.v[0].producer_class, "Server");
    assert_string_equal(x.st.edges.v[0].consumer_class, "Client");
    assert_string_equal(x.st.edges.v[0].send_node, "send");
    assert_string_equal(x.st.edges.v[0].recv_node, "recv");
    assert_string_equal(x.st.edges.v[0].value_name, "go");
    assert_string_equal(x.st.edges.v[0].recv_value, "v");
    /* Idempotent: a second run keeps the partitions. */
    assert_int_equal(fx_run(&x.st, "partition_by_wire_ops"), BB_OK);
    assert_int_equal(x.st.parts.n, 2);
    bbc_state_free(&x.st);
}

static void test_self_class(void **state)
{
    (void)state;
    t x = {0};
    x.m = fx_model(&x.f);
    bb_function *b = bb_model_add_function(x.m, "user.app", "M__bootstrap");
    bb_kv_set(x.m->arena, &b->metadata, BB_META_MODULE_PHASE, "bootstrap");
    fx_node(x.m, b, "bp", BB_DOMAIN_SYSCALL, "Pulse", FX_NOL, FX_L("bt"));
    homed(&x, fx_node(x.m, x.f, "p", BB_DOMAIN_SYSCALL, "Pulse", FX_NOL, FX_L("go")), BB_SELF_CLASS);
    assert_int_equal(fx_state(&x.st, x.m, NULL, NULL, NULL, &x.err), BB_OK);
    assert_int_equal(fx_run(&x.st, "partition_by_wire_ops"), BB_OK);
    assert_int_equal(x.st.parts.n, 1);
    assert_string_equal(x.st.parts.v[0]->fn->name, "@self");
    const bb_function *bf = fx_fn(x.st.parts.v[0]->model, "@self__bootstrap");
    assert_non_null(bf);
    assert_string_equal(bb_kv_get(&bf->metadata, BB_META_HOME_CLASS), BB_SELF_CLASS);
    bbc_state_free(&x.st);
}

static void test_unhomed_node(void **state)
{
    (void)state;
    t x = {0};
    x.m = fx_model(&x.f);
    fx_node(x.m, x.f, "p", BB_DOMAIN_SYSCALL, "Pulse", FX_NOL, FX_L("go"));
    assert_int_equal(fx_state(&x.st, x.m, NULL, NULL, NULL, &x.err), BB_OK);
    assert_int_equal(fx_run(&x.st, "partition_by_wire_ops"), BB_ECOMPILE);
    assert_int_equal(x.err.kind, BBC_E_INTERNAL);
    assert_non_null(strstr(x.err.msg, "'p'"));
    bbc_state_free(&x.st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_classes),
        cmocka_unit_test(test_self_class),
        cmocka_unit_test(test_unhomed_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
