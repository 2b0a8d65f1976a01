/*
 * test_pass_expand_ops.c — catalog attribute defaults are written onto the
 * nodes that leave them out; a missing required attribute is
 * ExpansionFailed; compiler-inserted ops are left alone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bbc_fixture.h"

static void test_defaults(void **state)
{
    (void)state;
    bb_function *f;
    bb_model *m = fx_model(&f);
    fx_node(m, f, "p", BB_DOMAIN_SYSCALL, "Pulse", FX_NOL, FX_L("go"));
    bb_node *acq = fx_node(m, f, "acq", BB_DOMAIN_SYSCALL, "Limit.Acquire", FX_L("go"), FX_L("ok"));
    bb_node_set_attr_string(m->arena, acq, "name", "round");
    bb_node *inc = fx_node(m, f, "inc", BB_DOMAIN_SYSCALL, "IncrMetric", FX_L("ok"), FX_NOL);
    bb_node_set_attr_string(m->arena, inc, "name", "rounds");
    bb_node_set_attr_int(m->arena, inc, "delta", 5);
    bb_node *any = fx_node(m, f, "any", BB_DOMAIN_SYSCALL, "Any", FX_L("go", "ok"), FX_L("v"));
    bbc_state st;
    bbc_error err;
    assert_int_equal(fx_state(&st, m, NULL, NULL, NULL, &err), BB_OK);
    assert_int_equal(fx_run(&st, "expand_ops"), BB_OK);
    assert_int_equal(bb_node_attr_int(acq, "n", -1), 1);
    assert_int_equal(bb_node_attr_int(inc, "delta", -1), 5); /* authored value kept */
    assert_string_equal(bb_node_attr_string(any, "group", "unset"), "");
    size_t n = acq->attrs.n;
    assert_int_equal(fx_run(&st, "expand_ops"), BB_OK);
    assert_int_equal(acq->attrs.n, n);
    bbc_state_free(&st);
}

static void test_required_missing(void **state)
{
    (void)state;
    bb_function *f;
    bb_model *m = fx_model(&f);
    fx_node(m, f, "p", BB_DOMAIN_SYSCALL, "Pulse", FX_NOL, FX_L("go"));
    fx_node(m, f, "nap", BB_DOMAIN_SYSCALL, "Sleep", FX_L("go"), FX_L("woke"));
    bbc_state st;
    bbc_error err;
    assert_int_equal(fx_state(&st, m, NULL, NULL, NULL, &err), BB_OK);
    assert_int_equal(fx_run(&st, "expand_ops"), BB_ECOMPILE);
    assert_int_equal(err.kind, BBC_E_EXPANSION_FAILED);
    assert_non_null(strstr(err.msg, "'nap' (ai.bytesandbrains.syscall::Sleep)"));
    assert_non_null(strstr(err.msg, "'duration_ns'"));
    bbc_state_free(&st);
}

static void test_inserted_skipped(void **state)
{
    (void)state;
    bb_function *f;
    bb_model *m = fx_model(&f);
    fx_node(m, f, "p", BB_DOMAIN_SYSCALL, "Pulse", FX_NOL, FX_L("go"));
    /* A TX gate without `peer` (dynamic destinations): not an error here. */
    fx_node(m, f, "g", BB_DOMAIN_SYSCALL, "PeerHealthGateTx", FX_L("go"), FX_L("g1"));
    bbc_state st;
    bbc_error err;
    assert_int_equal(fx_state(&st, m, NULL, NULL, NULL, &err), BB_OK);
    assert_int_equal(fx_run(&st, "expand_ops"), BB_OK);
    bbc_state_free(&st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_required_missing),
        cmocka_unit_test(test_inserted_skipped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
