/*
 * test_type_source.c — bb/type_source.h: an array source finds, lists and
 * searches its types by op; every lookup is NULL-safe (no source, a source
 * that cannot list, an index past the end). The loader source is exercised
 * in test_plugin_loader.c, the engine's use in the engine tests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "bb/type_source.h"

static const bb_op_decl AGG_OPS[] = {{.op_type = "Contribute"}, {.op_type = "Aggregate"}};
static const bb_opset_decl AGG_OPSETS[] = {{"ai.bytesandbrains.role.aggregator", 1, AGG_OPS, 2}};
static const bb_op_decl ADD_OPS[] = {{.op_type = "Add"}};
static const bb_opset_decl ADD_OPSETS[] = {{"", 20, ADD_OPS, 1}};

static const bb_component_type AGG = {.type_name = "t::Agg", .role = BB_ROLE_AGGREGATOR,
                                      .opsets = AGG_OPSETS, .n_opsets = 1};
static const bb_component_type CPU = {.type_name = "t::Cpu", .role = BB_ROLE_BACKEND,
                                      .opsets = ADD_OPSETS, .n_opsets = 1};
static const bb_component_type *const TYPES[] = {&AGG, NULL, &CPU};

static void test_array_source(void **state)
{
    (void)state;
    bb_type_array arr = {TYPES, 3};
    bb_type_source ts;
    bb_type_source_from_array(&ts, &arr);
    assert_ptr_equal(bb_type_source_find(&ts, "t::Cpu"), &CPU);
    assert_ptr_equal(bb_type_source_find(&ts, "t::Agg"), &AGG);
    assert_null(bb_type_source_find(&ts, "t::Nope"));
    assert_null(bb_type_source_find(&ts, NULL));
    assert_int_equal(bb_type_source_count(&ts), 3);
    assert_ptr_equal(bb_type_source_at(&ts, 0), &AGG);
    assert_null(bb_type_source_at(&ts, 1)); /* a hole in the array */
    assert_null(bb_type_source_at(&ts, 3));
    assert_string_equal(ts.where, "the in-process type table");
    /* by op: the role domain, and ai.onnx spelled "" or "ai.onnx" */
    assert_ptr_equal(bb_type_source_find_op(&ts, "ai.bytesandbrains.role.aggregator", "Aggregate"),
                     &AGG);
    assert_ptr_equal(bb_type_source_find_op(&ts, "ai.onnx", "Add"), &CPU);
    assert_ptr_equal(bb_type_source_find_op(&ts, "", "Add"), &CPU);
    assert_null(bb_type_source_find_op(&ts, "ai.bytesandbrains.role.aggregator", "Add"));
}

static void test_null_safety(void **state)
{
    (void)state;
    assert_null(bb_type_source_find(NULL, "t::Agg"));
    assert_int_equal(bb_type_source_count(NULL), 0);
    assert_null(bb_type_source_at(NULL, 0));
    assert_null(bb_type_source_find_op(NULL, "", "Add"));
    /* a source that finds but cannot list its types */
    bb_type_array arr = {TYPES, 3};
    bb_type_source all;
    bb_type_source_from_array(&all, &arr);
    bb_type_source find_only = {.ctx = all.ctx, .find = all.find};
    assert_ptr_equal(bb_type_source_find(&find_only, "t::Agg"), &AGG);
    assert_int_equal(bb_type_source_count(&find_only), 0);
    assert_null(bb_type_source_at(&find_only, 0));
    assert_null(bb_type_source_find_op(&find_only, "", "Add"));
    bb_type_source empty = {0};
    assert_null(bb_type_source_find(&empty, "t::Agg"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_array_source),
        cmocka_unit_test(test_null_safety),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
