/*
 * test_pass_validate.c — the validate pass, one fragment per rule (1-8):
 * a well-formed fragment passes, each broken one fails with its
 * ValidationError variant and a message naming the culprit.
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
    bb_type_source ts;
    bb_type_array arr;
} t;

static void begin(t *x)
{
    memset(x, 0, sizeof *x);
    x->m = fx_model(&x->f);
    fx_types(&x->ts, &x->arr);
}

static int validate(t *x)
{
    int rc = fx_state(&x->st, x->m, NULL, &x->ts, NULL, &x->err);
    if (rc == BB_OK)
        rc = fx_run(&x->st, "validate");
    return rc;
}

static void end(t *x)
{
    bbc_state_free(&x->st);
}

/* Pulse -> OnTrigger -> AppNotify: a valid body. */
static void valid_body(t *x)
{
    fx_node(x->m, x->f, "p", BB_DOMAIN_SYSCALL, "Pulse", FX_NOL, FX_L("a"));
    fx_node(x->m, x->f, "o", BB_DOMAIN_SYSCALL, "OnTrigger", FX_L("a"), FX_L("b"));
    bb_node *n = fx_node(x->m, x->f, "e", BB_DOMAIN_SYSCALL, "AppNotify", FX_L("b"), FX_NOL);
    bb_node_set_attr_string(x->m->arena, n, "name", "done");
}

static void test_valid(void **state)
{
    (void)state;
    t x;
    begin(&x);
    valid_body(&x);
    assert_int_equal(validate(&x), BB_OK);
    end(&x);
}

static void test_rule1_unknown_op(void **state)
{
    (void)state;
    t x;
    begin(&x);
    valid_body(&x);
    fx_node(x.m, x.f, "bogus", BB_DOMAIN_SYSCALL, "Teleport", FX_L("a"), FX_NOL);
    assert_int_equal(validate(&x), BB_EVALIDATE);
    assert_int_equal(x.err.kind, BBC_E_UNKNOWN_OP);
    assert_string_equal(x.err.pass, "validate");
    assert_non_null(strstr(x.err.msg, "'bogus' (ai.bytesandbrains.syscall::Teleport)"));
    end(&x);
    /* A plugin-declared op of a foreign domain is known. */
    begin(&x);
    fx_concrete(x.m, x.f, "model", "nn::Mlp", "Model");
    bb_node *n = fx_node(x.m, x.f, "fw", BB_DOMAIN_ROLE_MODEL, "Forward", FX_L("in"), FX_L("out"));
    fx_on_slot(x.m, n, "model", "nn::Mlp");
    bb_str_list_push(x.m->arena, &x.f->inputs, "in");
    fx_type(x.m, x.f, "in", &BB_TYPE_TENSOR_F32);
    bb_node *u = fx_node(x.m, x.f, "q", "vendor.x", "Quux", FX_NOL, FX_NOL);
    (void)u;
    bb_opset_list_add(x.m->arena, &x.m->opset_imports, "vendor.x", 1);
    assert_int_equal(validate(&x), BB_EVALIDATE);
    assert_int_equal(x.err.kind, BBC_E_UNKNOWN_OP);
    assert_non_null(strstr(x.err.msg, "vendor.x::Quux"));
    end(&x);
}

static void test_rule2_dangling(void **state)
{
    (void)state;
    t x;
    begin(&x);
    valid_body(&x);
    fx_node(x.m, x.f, "lost", BB_DOMAIN_SYSCALL, "OnTrigger", FX_L("nowhere"), FX_L("c"));
    assert_int_equal(validate(&x), BB_EVALIDATE);
    assert_int_equal(x.err.kind, BBC_E_DANGLING_INPUT);
    assert_non_null(strstr(x.err.msg, "'lost'"));
    assert_non_null(strstr(x.err.msg, "'nowhere'"));
    end(&x);
}

static void test_rule3_duplicate(void **state)
{
    (void)state;
    t x;
    begin(&x);
    valid_body(&x);
    fx_node(x.m, x.f, "twin", BB_DOMAIN_SYSCALL, "Pulse", FX_NOL, FX_L("a"));
    assert_int_equal(validate(&x), BB_EVALIDATE);
    assert_int_equal(x.err.kind, BBC_E_DUPLICATE_OUTPUT);
    assert_non_null(strstr(x.err.msg, "'a'"));
    assert_non_null(strstr(x.err.msg, "'p'"));
    assert_non_null(strstr(x.err.msg, "'twin'"));
    end(&x);
}

/* Server: SendReqBatched(port P) / RecvRespBatched; Client: RecvReq(P) -> SendResp. */
static void request_pair(t *x, bool with_resp)
{
    fx_concrete(x->m, x->f, "sel", "peers::Connected", "PeerSelector");
    bb_node *s = fx_node(x->m, x->f, "sample", BB_DOMAIN_ROLE_PEER_SELECTOR, "Sample", FX_NOL,
                         FX_L("peers"));
    fx_on_slot(x->m, s, "sel", "peers::Connected");
    bb_node_set_attr_int(x->m->arena, s, "n", 2);
    fx_node(x->m, x->f, "p", BB_DOMAIN_SYSCALL, "Pulse", FX_NOL, FX_L("go"));
    bb_node *rq = fx_node(x->m, x->f, "req", BB_DOMAIN_WIRE, "SendReqBatched", FX_L("go", "peers"),
                          FX_L("rid", "resps"));
    fx_meta(x->m, rq, BB_META_PORT, "P");
    fx_node(x->m, x->f, "collect", BB_DOMAIN_WIRE, "RecvRespBatched", FX_L("rid"),
            FX_L("t", "batch"));
    bb_node *rr = fx_node(x->m, x->f, "serve", BB_DOMAIN_WIRE, "RecvReq", FX_NOL,
                          FX_L("t2", "payload", "rid2"));
    fx_meta(x->m, rr, BB_META_PORT, "P");
    if (with_resp)
        fx_node(x->m, x->f, "answer", BB_DOMAIN_WIRE, "SendResp", FX_L("payload", "", "rid2"),
                FX_NOL);
}

static void test_rule4_pairing(void **state)
{
    (void)state;
    t x;
    begin(&x);
    request_pair(&x, true);
    assert_int_equal(validate(&x), BB_OK);
    end(&x);

    begin(&x);
    request_pair(&x, false);
    assert_int_equal(validate(&x), BB_EVALIDATE);
    assert_int_equal(x.err.kind, BBC_E_UNPAIRED_WIRE_REQUEST);
    assert_non_null(strstr(x.err.msg, "'req'"));
    assert_non_null(strstr(x.err.msg, "port 'P'"));
    assert_non_null(strstr(x.err.msg, "answered by 0"));
    end(&x);

    /* Two answers are as wrong as none. */
    begin(&x);
    request_pair(&x, true);
    fx_node(x.m, x.f, "again", BB_DOMAIN_WIRE, "SendResp", FX_L("payload", "", "rid2"), FX_NOL);
    assert_int_equal(validate(&x), BB_EVALIDATE);
    assert_int_equal(x.err.kind, BBC_E_UNPAIRED_WIRE_REQUEST);
    assert_non_null(strstr(x.err.msg, "answered by 2"));
    end(&x);

    /* A request on a Protocol slot is the component's to answer. */
    begin(&x);
    request_pair(&x, false);
    fx_concrete(x.m, x.f, "net", "framework_wire::BarrierNetworkReqResp", "Protocol");
    fx_on_slot(x.m, fx_named(x.f, "req"), "net", "framework_wire::BarrierNetworkReqResp");
    assert_int_equal(validate(&x), BB_OK);
    end(&x);
}

static void test_rule5_missing_type(void **state)
{
    (void)state;
    t x;
    begin(&x);
    bb_str_list_push(x.m->arena, &x.f->inputs, "x");
    fx_node(x.m, x.f, "o", BB_DOMAIN_SYSCALL, "PassThrough", FX_L("x"), FX_L("y"));
    assert_int_equal(validate(&x), BB_EVALIDATE);
    assert_int_equal(x.err.kind, BBC_E_MISSING_TYPE_INFO);
    assert_non_null(strstr(x.err.msg, "input 'x'"));
    end(&x);
}

static void test_rule6_slot_metadata(void **state)
{
    (void)state;
    t x;
    begin(&x);
    fx_node(x.m, x.f, "naked", BB_DOMAIN_ROLE_MODEL, "Params", FX_NOL, FX_L("w"));
    assert_int_equal(validate(&x), BB_EVALIDATE);
    assert_int_equal(x.err.kind, BBC_E_MALFORMED_SLOT_METADATA);
    assert_non_null(strstr(x.err.msg, "'naked'"));
    assert_non_null(strstr(x.err.msg, "neither"));
    end(&x);

    begin(&x);
    bb_node *n = fx_node(x.m, x.f, "g", BB_DOMAIN_ROLE_MODEL, "Params", FX_NOL, FX_L("w"));
    fx_meta(x.m, n, BB_META_REQUIRED_TRAIT, "Model");
    fx_meta(x.m, n, BB_META_SLOT_ID, "x7");
    assert_int_equal(validate(&x), BB_EVALIDATE);
    assert_int_equal(x.err.kind, BBC_E_MALFORMED_SLOT_METADATA);
    assert_non_null(strstr(x.err.msg, "slot_id is not a decimal"));
    end(&x);
}

static void test_rule7_cycle(void **state)
{
    (void)state;
    t x;
    begin(&x);
    fx_node(x.m, x.f, "a", BB_DOMAIN_SYSCALL, "PassThrough", FX_L("v2"), FX_L("v1"));
    fx_node(x.m, x.f, "b", BB_DOMAIN_SYSCALL, "PassThrough", FX_L("v1"), FX_L("v2"));
    assert_int_equal(validate(&x), BB_EVALIDATE);
    assert_int_equal(x.err.kind, BBC_E_CYCLIC_GRAPH);
    assert_non_null(strstr(x.err.msg, "'a'"));
    assert_non_null(strstr(x.err.msg, "'b'"));
    end(&x);
}

static void test_rule8_opset(void **state)
{
    (void)state;
    t x;
    begin(&x);
    valid_body(&x);
    /* Drop the syscall import. */
    for (size_t i = 0; i < x.m->opset_imports.n; i++)
        if (bbc_str_eq(x.m->opset_imports.v[i].domain, BB_DOMAIN_SYSCALL))
            x.m->opset_imports.v[i].domain = "something.else";
    assert_int_equal(validate(&x), BB_EVALIDATE);
    assert_int_equal(x.err.kind, BBC_E_OPSET_NOT_IMPORTED);
    assert_non_null(strstr(x.err.msg, "uses domain 'ai.bytesandbrains.syscall' (version 1)"));
    end(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_rule1_unknown_op),
        cmocka_unit_test(test_rule2_dangling),
        cmocka_unit_test(test_rule3_duplicate),
        cmocka_unit_test(test_rule4_pairing),
        cmocka_unit_test(test_rule5_missing_type),
        cmocka_unit_test(test_rule6_slot_metadata),
        cmocka_unit_test(test_rule7_cycle),
        cmocka_unit_test(test_rule8_opset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
