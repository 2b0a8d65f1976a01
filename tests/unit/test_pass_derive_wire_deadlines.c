/*
 * test_pass_derive_wire_deadlines.c — deadline_ns = chain_depth x per-hop
 * budget on every wire send (chain_depth 1 by default), authored deadlines
 * kept, bad chain_depth refused.
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
} t;

static bb_node *send(t *x, const char *name, const char *op)
{
    return fx_node(x->m, x->f, name, BB_DOMAIN_WIRE, op, FX_L("d", "peers"), FX_NOL);
}

static void test_budget_and_depth(void **state)
{
    (void)state;
    t x = {0};
    x.m = fx_model(&x.f);
    bbc_options_init(&x.o);
    x.o.per_hop_budget_ns = 1000;
    send(&x, "a", "Send");
    bb_node *b = send(&x, "b", "SendReqBatched");
    fx_meta(x.m, b, BB_META_CHAIN_DEPTH, "3");
    bb_node *c = send(&x, "c", "Send");
    bb_node_set_attr_int(x.m->arena, c, "deadline_ns", 77);
    fx_node(x.m, x.f, "r", BB_DOMAIN_WIRE, "Recv", FX_NOL, FX_L("t", "p"));
    assert_int_equal(fx_state(&x.st, x.m, &x.o, NULL, NULL, &x.err), BB_OK);
    assert_int_equal(fx_run(&x.st, "derive_wire_deadlines"), BB_OK);
    const bb_function *f = x.st.root;
    assert_int_equal(bb_node_attr_int(fx_named(f, "a"), "deadline_ns", -1), 1000);
    assert_int_equal(bb_node_attr_int(fx_named(f, "b"), "deadline_ns", -1), 3000);
    assert_int_equal(bb_node_attr_int(fx_named(f, "c"), "deadline_ns", -1), 77);
    assert_null(bb_node_attr(fx_named(f, "r"), "deadline_ns"));
    /* Idempotent. */
    assert_int_equal(fx_run(&x.st, "derive_wire_deadlines"), BB_OK);
    assert_int_equal(fx_named(f, "a")->attrs.n, 1);
    bbc_state_free(&x.st);
}

static void test_bad_depth(void **state)
{
    (void)state;
    t x = {0};
    x.m = fx_model(&x.f);
    bb_node *a = send(&x, "a", "Send");
    fx_meta(x.m, a, BB_META_CHAIN_DEPTH, "many");
    assert_int_equal(fx_state(&x.st, x.m, NULL, NULL, NULL, &x.err), BB_OK);
    assert_int_equal(fx_run(&x.st, "derive_wire_deadlines"), BB_ECOMPILE);
    assert_non_null(strstr(x.err.msg, "chain_depth 'many'"));
    bbc_state_free(&x.st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_budget_and_depth),
        cmocka_unit_test(test_bad_depth),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
