/*
 * test_pass_refine_polymorphic_value_info.c — the recorder's placeholder
 * tensor types on role ports narrow to the bound type's declared storage;
 * contradicting types and unbound slots are left alone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bbc_fixture.h"

static bb_model *fragment(bb_function **f, const bb_type_node *in_type)
{
    bb_model *m = fx_model(f);
    fx_concrete(m, *f, "model", "nn::Mlp", "Model");
    bb_str_list_push(m->arena, &(*f)->inputs, "x");
    fx_type(m, *f, "x", in_type);
    bb_node *n = fx_node(m, *f, "fw", BB_DOMAIN_ROLE_MODEL, "Forward", FX_L("x"), FX_L("y"));
    fx_on_slot(m, n, "model", "nn::Mlp");
    fx_type(m, *f, "y", &BB_TYPE_TENSOR);
    return m;
}

static void test_narrows(void **state)
{
    (void)state;
    bb_function *f;
    bb_model *m = fragment(&f, &BB_TYPE_TENSOR);
    bb_type_source ts;
    bb_type_array arr;
    fx_types(&ts, &arr);
    bbc_state st;
    bbc_error err;
    assert_int_equal(fx_state(&st, m, NULL, &ts, NULL, &err), BB_OK);
    assert_int_equal(fx_run(&st, "refine_polymorphic_value_info"), BB_OK);
    assert_ptr_equal(bbc_value_type(st.root, "x"), &BB_TYPE_TENSOR_F32);
    assert_ptr_equal(bbc_value_type(st.root, "y"), &BB_TYPE_TENSOR_F32);
    bbc_state_free(&st);
}

static void test_leaves_contradiction_and_unbound(void **state)
{
    (void)state;
    bb_function *f;
    bb_model *m = fragment(&f, &BB_TYPE_TENSOR_U8);
    bb_type_source ts;
    bb_type_array arr;
    fx_types(&ts, &arr);
    bbc_state st;
    bbc_error err;
    assert_int_equal(fx_state(&st, m, NULL, &ts, NULL, &err), BB_OK);
    assert_int_equal(fx_run(&st, "refine_polymorphic_value_info"), BB_OK);
    assert_ptr_equal(bbc_value_type(st.root, "x"), &BB_TYPE_TENSOR_U8); /* the solver reports it */
    bbc_state_free(&st);

    /* No type source: nothing to narrow with. */
    m = fragment(&f, &BB_TYPE_TENSOR);
    assert_int_equal(fx_state(&st, m, NULL, NULL, NULL, &err), BB_OK);
    assert_int_equal(fx_run(&st, "refine_polymorphic_value_info"), BB_OK);
    assert_ptr_equal(bbc_value_type(st.root, "y"), &BB_TYPE_TENSOR);
    bbc_state_free(&st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_narrows),
        cmocka_unit_test(test_leaves_contradiction_and_unbound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
