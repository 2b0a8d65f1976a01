/*
 * test_pass_validate_all_slots_bound.c — every slot a partition declares
 * or runs on needs a TYPE_NAME; an unbound generic slot is UnboundSlot
 * naming the partition, the slot and its role.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bbc_fixture.h"

static int run(bbc_bindings *b, bbc_error *err)
{
    bb_function *f;
    bb_model *m = fx_model(&f);
    fx_generic(m, f, "compute", "Backend");
    bbc_state st;
    int rc = fx_state(&st, m, NULL, NULL, b, err);
    assert_int_equal(rc, BB_OK);
    bbc_partition *p = fx_part(&st, "Worker");
    bb_str_list_push(p->model->arena, &p->fn->attributes, "compute");
    rc = fx_run(&st, "validate_all_slots_bound");
    bbc_state_free(&st);
    return rc;
}

static void test_unbound(void **state)
{
    (void)state;
    bbc_error err;
    assert_int_equal(run(NULL, &err), BB_ECOMPILE);
    assert_int_equal(err.kind, BBC_E_UNBOUND_SLOT);
    assert_non_null(strstr(err.msg, "partition `Worker`"));
    assert_non_null(strstr(err.msg, "slot 'compute' (Backend)"));
    assert_non_null(strstr(err.msg, "--bind compute=TYPE_NAME"));
}

static void test_bound(void **state)
{
    (void)state;
    bbc_bindings b;
    bbc_bindings_init(&b);
    assert_int_equal(bbc_bindings_add_arg(&b, "compute=cpu::CpuBackend", NULL), BB_OK);
    bbc_error err;
    assert_int_equal(run(&b, &err), BB_OK);
    bbc_bindings_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unbound),
        cmocka_unit_test(test_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
