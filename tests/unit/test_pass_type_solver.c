/*
 * test_pass_type_solver.c — the type solver over small fragments:
 * narrowing through ports and forwarding ops, Trigger inputs, contradictions
 * (TypeConstraintFailed), strict vs permissive (UnresolvedType), wire-edge
 * adoption, and the post-synthesis storage check (IncompatibleStorageOnEdge).
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
    bbc_options o;
    bb_type_source ts;
    bb_type_array arr;
} t;

static void begin(t *x)
{
    memset(x, 0, sizeof *x);
    x->m = fx_model(&x->f);
    fx_types(&x->ts, &x->arr);
    bbc_options_init(&x->o);
}

static int solve(t *x)
{
    int rc = fx_state(&x->st, x->m, &x->o, &x->ts, NULL, &x->err);
    if (rc == BB_OK)
        rc = fx_run(&x->st, "type_solver");
    return rc;
}

static const bb_type_node *ty(t *x, const char *v)
{
    return bbc_value_type(x->st.root, v);
}

static void test_narrow_through_forwarding(void **state)
{
    (void)state;
    t x;
    begin(&x);
    /* Params (bound nn::Mlp: tensor_f32) -> PassThrough -> Gate -> LoadParameters. */
    fx_concrete(x.m, x.f, "model", "nn::Mlp", "Model");
    bb_node *p = fx_node(x.m, x.f, "params", BB_DOMAIN_ROLE_MODEL, "Params", FX_NOL, FX_L("w"));
    fx_on_slot(x.m, p, "model", "nn::Mlp");
    fx_node(x.m, x.f, "pt", BB_DOMAIN_SYSCALL, "PassThrough", FX_L("w"), FX_L("w2"));
    fx_node(x.m, x.f, "pulse", BB_DOMAIN_SYSCALL, "Pulse", FX_NOL, FX_L("go"));
    fx_node(x.m, x.f, "gate", BB_DOMAIN_SYSCALL, "Gate", FX_L("w2", "go"), FX_L("w3"));
    bb_node *l = fx_node(x.m, x.f, "load", BB_DOMAIN_ROLE_MODEL, "LoadParameters", FX_L("w3"),
                         FX_L("cmd"));
    fx_on_slot(x.m, l, "model", "nn::Mlp");
    /* A Trigger input takes the CommandId (it only fires on arrival). */
    bb_node *r = fx_node(x.m, x.f, "rel", BB_DOMAIN_SYSCALL, "Limit.Release", FX_L("cmd"), FX_NOL);
    bb_node_set_attr_string(x.m->arena, r, "name", "round");
    assert_int_equal(solve(&x), BB_OK);
    assert_ptr_equal(ty(&x, "w"), &BB_TYPE_TENSOR_F32);
    assert_ptr_equal(ty(&x, "w2"), &BB_TYPE_TENSOR_F32);
    assert_ptr_equal(ty(&x, "w3"), &BB_TYPE_TENSOR_F32);
    assert_ptr_equal(ty(&x, "go"), &BB_TYPE_TRIGGER);
    assert_ptr_equal(ty(&x, "cmd"), &BB_TYPE_COMMAND_ID);
    bbc_state_free(&x.st);
}

static void test_constraint_failed(void **state)
{
    (void)state;
    t x;
    begin(&x);
    /* A PeerId vector into LoadParameters(params: tensor). */
    fx_concrete(x.m, x.f, "sel", "peers::Connected", "PeerSelector");
    fx_concrete(x.m, x.f, "model", "nn::Mlp", "Model");
    bb_node *s = fx_node(x.m, x.f, "sample", BB_DOMAIN_ROLE_PEER_SELECTOR, "Sample", FX_NOL,
                         FX_L("peers"));
    fx_on_slot(x.m, s, "sel", "peers::Connected");
    bb_node *l = fx_node(x.m, x.f, "load", BB_DOMAIN_ROLE_MODEL, "LoadParameters",
                         FX_L("peers"), FX_L("cmd"));
    fx_on_slot(x.m, l, "model", "nn::Mlp");
    assert_int_equal(solve(&x), BB_ECOMPILE);
    assert_int_equal(x.err.kind, BBC_E_TYPE_CONSTRAINT_FAILED);
    assert_string_equal(x.err.pass, "type_solver");
    assert_non_null(strstr(x.err.msg, "'load'"));
    assert_non_null(strstr(x.err.msg, "tensor_f32"));
    assert_non_null(strstr(x.err.msg, "peer_id_vec"));
    bbc_state_free(&x.st);
}

static void test_strict_and_permissive(void **state)
{
    (void)state;
    t x;
    begin(&x);
    /* Serialize.Dequeue yields ANY; AppEmit consumes it. */
    fx_node(x.m, x.f, "pulse", BB_DOMAIN_SYSCALL, "Pulse", FX_NOL, FX_L("go"));
    bb_node *d = fx_node(x.m, x.f, "deq", BB_DOMAIN_SYSCALL, "Serialize.Dequeue", FX_L("go"),
                         FX_L("v"));
    bb_node_set_attr_string(x.m->arena, d, "queue", "q");
    bb_node *e = fx_node(x.m, x.f, "emit", BB_DOMAIN_SYSCALL, "AppEmit", FX_L("v"), FX_NOL);
    bb_node_set_attr_string(x.m->arena, e, "name", "out");
    assert_int_equal(solve(&x), BB_ECOMPILE);
    assert_int_equal(x.err.kind, BBC_E_UNRESOLVED_TYPE);
    assert_non_null(strstr(x.err.msg, "value 'v'"));
    assert_non_null(strstr(x.err.msg, "'deq'"));
    bbc_state_free(&x.st);

    begin(&x);
    x.o.permissive_types = true;
    fx_node(x.m, x.f, "pulse", BB_DOMAIN_SYSCALL, "Pulse", FX_NOL, FX_L("go"));
    d = fx_node(x.m, x.f, "deq", BB_DOMAIN_SYSCALL, "Serialize.Dequeue", FX_L("go"), FX_L("v"));
    bb_node_set_attr_string(x.m->arena, d, "queue", "q");
    assert_int_equal(solve(&x), BB_OK);
    assert_ptr_equal(ty(&x, "v"), &BB_TYPE_ANY);
    assert_ptr_equal(ty(&x, "go"), &BB_TYPE_TRIGGER);
    bbc_state_free(&x.st);
}

static void test_onnx_rules(void **state)
{
    (void)state;
    t x;
    begin(&x);
    x.o.permissive_types = true;
    bb_str_list_push(x.m->arena, &x.f->inputs, "a");
    fx_type(x.m, x.f, "a", &BB_TYPE_TENSOR_F64);
    bb_str_list_push(x.m->arena, &x.f->inputs, "b");
    fx_type(x.m, x.f, "b", &BB_TYPE_TENSOR);
    fx_node(x.m, x.f, "add", "", "Add", FX_L("a", "b"), FX_L("c"));
    bb_node *cast = fx_node(x.m, x.f, "cast", "", "Cast", FX_L("c"), FX_L("d"));
    bb_node_set_attr_int(x.m->arena, cast, "to", BB_DT_INT32);
    fx_node(x.m, x.f, "eq", "", "Equal", FX_L("d", "d"), FX_L("e"));
    assert_int_equal(solve(&x), BB_OK);
    assert_ptr_equal(ty(&x, "b"), &BB_TYPE_TENSOR_F64); /* binary op unifies inputs */
    assert_ptr_equal(ty(&x, "c"), &BB_TYPE_TENSOR_F64);
    assert_ptr_equal(ty(&x, "d"), &BB_TYPE_TENSOR_I32);
    assert_ptr_equal(ty(&x, "e"), &BB_TYPE_TENSOR_BOOL);
    bbc_state_free(&x.st);
}

/* Send(port P) of f32 -> Recv(port P) whose payload type is free, and a
 * consumer that wants u8 or nothing. */
static void edge(t *x, const bb_type_node *recv_payload)
{
    fx_concrete(x->m, x->f, "model", "nn::Mlp", "Model");
    fx_concrete(x->m, x->f, "sel", "peers::Connected", "PeerSelector");
    bb_node *p = fx_node(x->m, x->f, "params", BB_DOMAIN_ROLE_MODEL, "Params", FX_NOL, FX_L("w"));
    fx_on_slot(x->m, p, "model", "nn::Mlp");
    bb_node *s = fx_node(x->m, x->f, "sample", BB_DOMAIN_ROLE_PEER_SELECTOR, "Sample", FX_NOL,
                         FX_L("peers"));
    fx_on_slot(x->m, s, "sel", "peers::Connected");
    bb_node *snd = fx_node(x->m, x->f, "send", BB_DOMAIN_WIRE, "Send", FX_L("w", "peers"), FX_NOL);
    fx_meta(x->m, snd, BB_META_PORT, "P");
    bb_node *r = fx_node(x->m, x->f, "recv", BB_DOMAIN_WIRE, "Recv", FX_NOL, FX_L("t", "got"));
    fx_meta(x->m, r, BB_META_PORT, "P");
    if (recv_payload)
        fx_type(x->m, x->f, "got", recv_payload);
    bb_node *e = fx_node(x->m, x->f, "emit", BB_DOMAIN_SYSCALL, "AppEmit", FX_L("got"), FX_NOL);
    bb_node_set_attr_string(x->m->arena, e, "name", "out");
}

static void test_edge_adoption(void **state)
{
    (void)state;
    t x;
    begin(&x);
    edge(&x, NULL);
    assert_int_equal(solve(&x), BB_OK);
    /* The receive site's type is inferred from the send. */
    assert_ptr_equal(ty(&x, "got"), &BB_TYPE_TENSOR_F32);
    /* The storage check records it on the Recv. */
    x.st.pass = "type_solver";
    assert_int_equal(bbc_check_wire_storage(&x.st), BB_OK);
    const bb_attr *pt = bb_node_attr(fx_named(x.st.root, "recv"), "payload_type");
    assert_non_null(pt);
    assert_ptr_equal(bb_type_from_proto(pt->tp), &BB_TYPE_TENSOR_F32);
    bbc_state_free(&x.st);
}

static void test_incompatible_storage(void **state)
{
    (void)state;
    t x;
    begin(&x);
    edge(&x, &BB_TYPE_TENSOR_U8);
    /* The solver leaves the contradiction to the edge check... */
    assert_int_equal(solve(&x), BB_OK);
    assert_ptr_equal(ty(&x, "got"), &BB_TYPE_TENSOR_U8);
    /* ...which names both types and suggests a codec. */
    x.st.pass = "type_solver";
    assert_int_equal(bbc_check_wire_storage(&x.st), BB_ECOMPILE);
    assert_int_equal(x.err.kind, BBC_E_INCOMPATIBLE_STORAGE_ON_EDGE);
    assert_non_null(strstr(x.err.msg, "Send 'send' -> Recv 'recv'"));
    assert_non_null(strstr(x.err.msg, "tensor_f32"));
    assert_non_null(strstr(x.err.msg, "tensor_u8"));
    assert_non_null(strstr(x.err.msg, "Codec"));
    char hash[32];
    snprintf(hash, sizeof hash, "0x%016llx", (unsigned long long)BB_TYPE_TENSOR_F32.wire_hash);
    assert_non_null(strstr(x.err.msg, hash));
    bbc_state_free(&x.st);
}

static void test_idempotent(void **state)
{
    (void)state;
    t x;
    begin(&x);
    edge(&x, NULL);
    assert_int_equal(solve(&x), BB_OK);
    size_t n = x.st.root->value_info.n;
    assert_int_equal(fx_run(&x.st, "type_solver"), BB_OK);
    assert_int_equal(x.st.root->value_info.n, n);
    bbc_state_free(&x.st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_narrow_through_forwarding),
        cmocka_unit_test(test_constraint_failed),
        cmocka_unit_test(test_strict_and_permissive),
        cmocka_unit_test(test_onnx_rules),
        cmocka_unit_test(test_edge_adoption),
        cmocka_unit_test(test_incompatible_storage),
        cmocka_unit_test(test_idempotent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
