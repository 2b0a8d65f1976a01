/*
 * test_pass_validate_bootstrap_composition.c — bootstrap call graphs: a
 * call to a missing function is BootstrapCompositionGap, a call cycle is
 * BootstrapCompositionCycle naming the chain, calls that resolve pass.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bbc_fixture.h"

static bb_function *fn(bb_model *m, const char *name, bool boot)
{
    bb_function *f = bb_model_add_function(m, "user.app", name);
    if (boot)
        bb_kv_set(m->arena, &f->metadata, BB_META_MODULE_PHASE, "bootstrap");
    return f;
}

static int check(bb_model *m, bbc_error *err)
{
    bbc_state st;
    int rc = fx_state(&st, m, NULL, NULL, NULL, err);
    if (rc == BB_OK)
        rc = fx_run(&st, "validate_bootstrap_composition");
    bbc_state_free(&st);
    return rc;
}

static void test_ok(void **state)
{
    (void)state;
    bb_function *root;
    bb_model *m = fx_model(&root);
    bb_function *b = fn(m, "M__bootstrap", true);
    bb_function *child = fn(m, "Child__bootstrap", true);
    fx_node(m, child, "p", BB_DOMAIN_SYSCALL, "Pulse", FX_NOL, FX_L("go"));
    fx_node(m, b, "c", "user.app", "Child__bootstrap", FX_NOL, FX_NOL);
    bbc_error err;
    assert_int_equal(check(m, &err), BB_OK);
}

static void test_gap(void **state)
{
    (void)state;
    bb_function *root;
    bb_model *m = fx_model(&root);
    bb_function *b = fn(m, "M__bootstrap", true);
    fx_node(m, b, "c", "user.app", "Missing__bootstrap", FX_NOL, FX_NOL);
    bbc_error err;
    assert_int_equal(check(m, &err), BB_ECOMPILE);
    assert_int_equal(err.kind, BBC_E_BOOTSTRAP_COMPOSITION_GAP);
    assert_string_equal(err.pass, "validate_bootstrap_composition");
    assert_non_null(strstr(err.msg, "user.app::Missing__bootstrap"));
    assert_non_null(strstr(err.msg, "'M__bootstrap'"));
}

static void test_cycle(void **state)
{
    (void)state;
    bb_function *root;
    bb_model *m = fx_model(&root);
    bb_function *b = fn(m, "M__bootstrap", true);
    bb_function *x = fn(m, "X", false), *y = fn(m, "Y", false);
    fx_node(m, b, "c", "user.app", "X", FX_NOL, FX_NOL);
    fx_node(m, x, "c", "user.app", "Y", FX_NOL, FX_NOL);
    fx_node(m, y, "c", "user.app", "X", FX_NOL, FX_NOL);
    bbc_error err;
    assert_int_equal(check(m, &err), BB_ECOMPILE);
    assert_int_equal(err.kind, BBC_E_BOOTSTRAP_COMPOSITION_CYCLE);
    assert_non_null(strstr(err.msg, "X -> Y -> X"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ok),
        cmocka_unit_test(test_gap),
        cmocka_unit_test(test_cycle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
