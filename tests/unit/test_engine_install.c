/*
 * test_engine_install.c — bb_engine_install: target resolution, bindings,
 * slot dedupe across targets, and every install error variant.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/engine_fixtures.h"

/* Install and expect failure of `kind`; returns the message. */
static void expect_fail(bb_model *m, const char *targets, bb_install_error kind, const char *needle)
{
    bb_engine *e = fx_engine(1, 7001, NULL);
    bb_error err = {0};
    int rc = fx_install(e, m, targets, &err);
    assert_int_equal(rc, BB_EINSTALL);
    if (bb_engine_install_error(e) != kind)
        fail_msg("expected %s, got %s: %s", bb_install_error_name(kind),
                 bb_install_error_name(bb_engine_install_error(e)), err.msg);
    assert_non_null(strstr(err.msg, bb_install_error_name(kind)));
    if (needle && !strstr(err.msg, needle))
        fail_msg("'%s' not in: %s", needle, err.msg);
    assert_int_equal(bb_engine_target_count(e), 0);
    bb_engine_free(e);
    bb_model_free(m);
}

static bb_model *echo_model(const char *fn_name)
{
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, fn_name, "x", "y");
    bb_node *n = fx_op(m, f, "test.echo", "Echo", "x", "y");
    fx_meta(m, n, "ai.bytesandbrains.slot_id", "7");
    return m;
}

static void test_empty_targets(void **state)
{
    (void)state;
    bb_model *m = echo_model("Main");
    bb_engine *e = fx_engine(1, 7001, NULL);
    bb_error err = {0};
    assert_int_equal(bb_engine_install(e, m, NULL, 0, fx_registry(), &err), BB_EINSTALL);
    assert_int_equal(bb_engine_install_error(e), BB_INSTALL_EMPTY_TARGETS);
    assert_non_null(strstr(err.msg, "EmptyTargets"));
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_not_compiled(void **state)
{
    (void)state;
    bb_model *m = echo_model("Main");
    bb_kv_remove(&m->metadata, "ai.bytesandbrains.compiled");
    expect_fail(m, "Main", BB_INSTALL_NOT_COMPILED, "passport");
}

static void test_unknown_and_hashed_targets(void **state)
{
    (void)state;
    expect_fail(echo_model("Main"), "Other", BB_INSTALL_UNKNOWN_TARGET, "Other");
    /* a model whose only function is a bootstrap has no target at all */
    expect_fail(echo_model("Main__bootstrap"), "Main", BB_INSTALL_UNKNOWN_TARGET,
                "'Main': the model: the compiled model has no partition function");
    /* "<target>#<hash>" fallback */
    bb_model *m = echo_model("Client#0123456789abcdef");
    fx_bind(m, "Client#0123456789abcdef", "echo", "Protocol|test::Echo|7");
    bb_engine *e = fx_engine(1, 7001, NULL);
    bb_error err = {0};
    assert_int_equal(fx_install(e, m, "Client", &err), BB_OK);
    assert_string_equal(bb_engine_target_at(e, 0), "Client");
    bb_value *v = bb_value_u64(&BB_TYPE_U64, 4);
    bb_engine_input in = {.name = "x", .value = v};
    assert_int_equal(bb_engine_invoke(e, "Client", &in, 1, NULL, NULL), BB_OK);
    bb_value_unref(v);
    fx_log log = {0};
    fx_run(e, &log, 1, 5);
    assert_non_null(fx_log_app(&log, "y", 0));
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
    /* two hashed candidates are ambiguous */
    m = echo_model("Client#aaaa");
    bb_function *f = fx_fn(m, "Client#bbbb", "x", "y");
    fx_op(m, f, FX_SYS, "PassThrough", "x", "y");
    expect_fail(m, "Client", BB_INSTALL_AMBIGUOUS_TARGET, "Client#bbbb");
}

static void test_malformed_binding(void **state)
{
    (void)state;
    bb_model *m = echo_model("Main");
    fx_bind(m, "Main", "echo", "Protocol|test::Echo");
    expect_fail(m, "Main", BB_INSTALL_MALFORMED_BINDING, "ai.bytesandbrains.binding.Main.echo");
    m = echo_model("Main");
    fx_bind(m, "Main", "echo", "Protocol|test::Echo|x7");
    expect_fail(m, "Main", BB_INSTALL_MALFORMED_BINDING, "slot_id");
}

static void test_slot_binding_conflict(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *a = fx_fn(m, "Client", "x", "y");
    fx_op(m, a, FX_SYS, "PassThrough", "x", "y");
    bb_function *b = fx_fn(m, "Server", "x", "y");
    fx_op(m, b, FX_SYS, "PassThrough", "x", "y");
    fx_bind(m, "Client", "agg", "Aggregator|test::Agg|3");
    fx_bind(m, "Server", "agg", "Aggregator|test::Other|3");
    expect_fail(m, "Client,Server", BB_INSTALL_SLOT_BINDING_CONFLICT,
                "Client binds Aggregator|test::Agg; Server binds Aggregator|test::Other");
}

static void test_shared_slot_one_component(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = fx_model();
    const char *names[2] = {"Client", "Server"};
    for (int i = 0; i < 2; i++) {
        bb_function *f = fx_fn(m, names[i], "x", "y");
        bb_node *n = fx_op(m, f, "test.echo", "Count", "x", "y");
        fx_meta(m, n, "ai.bytesandbrains.slot_id", "7");
        fx_bind(m, names[i], "echo", "Protocol|test::Echo|7");
    }
    bb_engine *e = fx_engine(1, 7001, NULL);
    bb_error err = {0};
    assert_int_equal(fx_install(e, m, "Client,Server", &err), BB_OK);
    assert_int_equal(fx_echo_count(), 1);
    bb_value *v = bb_value_trigger();
    bb_engine_input in = {.name = "x", .value = v};
    assert_int_equal(bb_engine_invoke(e, "Client", &in, 1, NULL, NULL), BB_OK);
    assert_int_equal(bb_engine_invoke(e, "Server", &in, 1, NULL, NULL), BB_OK);
    bb_value_unref(v);
    fx_log log = {0};
    fx_run(e, &log, 1, 5);
    /* both partitions dispatch into the same instance */
    assert_int_equal(fx_log_app(&log, "y", 0)->value->u.u64, 1);
    assert_int_equal(fx_log_app(&log, "y", 1)->value->u.u64, 2);
    assert_string_equal(fx_log_app(&log, "y", 0)->a, "Client");
    assert_string_equal(fx_log_app(&log, "y", 1)->a, "Server");
    fx_log_free(&log);
    bb_engine_free(e);
    assert_int_equal(fx_echo_count(), 0);
    bb_model_free(m);
}

static void test_unbound_generic_slot(void **state)
{
    (void)state;
    bb_model *m = echo_model("Main");
    bb_str_list_push(m->arena, &m->functions.v[0]->attributes, "backend");
    fx_bind(m, "Main", "echo", "Protocol|test::Echo|7");
    expect_fail(m, "Main", BB_INSTALL_UNBOUND_GENERIC_SLOT, "backend");
    /* a node naming a slot_id nobody binds */
    m = echo_model("Main");
    expect_fail(m, "Main", BB_INSTALL_UNBOUND_GENERIC_SLOT, "slot_id 7");
}

static void test_unregistered_type_and_role_mismatch(void **state)
{
    (void)state;
    bb_model *m = echo_model("Main");
    fx_bind(m, "Main", "echo", "Protocol|vendor::Missing|7");
    expect_fail(m, "Main", BB_INSTALL_UNREGISTERED_CONCRETE_TYPE, "vendor::Missing");
    m = echo_model("Main");
    fx_bind(m, "Main", "echo", "Backend|test::Echo|7");
    expect_fail(m, "Main", BB_INSTALL_ROLE_MISMATCH, "test::Echo");
}

static void test_unbound_dependency(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "a,b", "y");
    bb_node *n = fx_op(m, f, "test.dep", "Plus", "a,b", "y");
    fx_meta(m, n, "ai.bytesandbrains.slot", "dep");
    fx_bind(m, "Main", "dep", "Protocol|test::Dep|2");
    expect_fail(m, "Main", BB_INSTALL_UNBOUND_DEPENDENCY, "compute");
}

static void test_function_definition_conflict(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *main = fx_fn(m, "Main", "x", "y");
    fx_op(m, main, "ai.bytesandbrains.module", "Sub", "x", "y");
    for (int i = 0; i < 2; i++) {
        bb_function *s = bb_model_add_function(m, "ai.bytesandbrains.module", "Sub");
        bb_str_list_push(m->arena, &s->inputs, "p");
        bb_str_list_push(m->arena, &s->outputs, "q");
        fx_op(m, s, FX_SYS, i ? "OnTrigger" : "PassThrough", "p", "q");
    }
    expect_fail(m, "Main", BB_INSTALL_FUNCTION_DEFINITION_CONFLICT, "Sub");
}

static void test_recursive_function_call(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *main = fx_fn(m, "Main", "x", "y");
    fx_op(m, main, "ai.bytesandbrains.module", "A", "x", "y");
    const char *names[2] = {"A", "B"};
    for (int i = 0; i < 2; i++) {
        bb_function *s = bb_model_add_function(m, "ai.bytesandbrains.module", names[i]);
        bb_str_list_push(m->arena, &s->inputs, "p");
        bb_str_list_push(m->arena, &s->outputs, "q");
        fx_op(m, s, "ai.bytesandbrains.module", names[1 - i], "p", "q");
    }
    expect_fail(m, "Main", BB_INSTALL_RECURSIVE_FUNCTION_CALL, "Main -> A -> B");
}

static void test_incompatible_runtime(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x", "y");
    bb_node *n = fx_op(m, f, "test.echo", "Teleport", "x", "a");
    fx_meta(m, n, "ai.bytesandbrains.slot_id", "7");
    n = fx_op(m, f, "test.echo", "Warp", "a", "b");
    fx_meta(m, n, "ai.bytesandbrains.slot_id", "7");
    fx_op(m, f, FX_SYS, "NoSuchSyscall", "b", "y");
    fx_bind(m, "Main", "echo", "Protocol|test::Echo|7");
    expect_fail(m, "Main", BB_INSTALL_INCOMPATIBLE_RUNTIME,
                "opset test.echo missing Teleport Warp; opset ai.bytesandbrains.syscall missing NoSuchSyscall");
}

static void test_malformed_graph(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x", "y");
    fx_op(m, f, FX_SYS, "PassThrough", "x", "y");
    fx_op(m, f, FX_SYS, "PassThrough", "x", "y");
    expect_fail(m, "Main", BB_INSTALL_MALFORMED_GRAPH, "defined twice");
    m = fx_model();
    f = fx_fn(m, "Main", "x", "y");
    fx_op(m, f, FX_SYS, "Gate", "x", "y"); /* Gate needs 2 inputs */
    expect_fail(m, "Main", BB_INSTALL_MALFORMED_GRAPH, "Gate");
    m = fx_model();
    f = fx_fn(m, "Main", "x", "y");
    fx_op(m, f, FX_SYS, "After", "x", "y"); /* no delay_ns */
    expect_fail(m, "Main", BB_INSTALL_MALFORMED_GRAPH, "delay_ns");
}

static void test_component_create_failed(void **state)
{
    (void)state;
    bb_model *m = echo_model("Main");
    fx_bind(m, "Main", "failing", "Protocol|test::Echo|7");
    expect_fail(m, "Main", BB_INSTALL_COMPONENT_CREATE_FAILED, "slot 'failing' (test::Echo): echo: asked to fail");
}

static void test_already_installed_and_retry_after_failure(void **state)
{
    (void)state;
    bb_model *m = echo_model("Main");
    fx_bind(m, "Main", "echo", "Protocol|test::Echo|7");
    bb_engine *e = fx_engine(1, 7001, NULL);
    bb_error err = {0};
    assert_int_equal(fx_install(e, m, "Nope", &err), BB_EINSTALL); /* fails cleanly ... */
    assert_int_equal(fx_install(e, m, "Main", &err), BB_OK);       /* ... and can retry */
    assert_int_equal(fx_install(e, m, "Main", &err), BB_EINSTALL);
    assert_int_equal(bb_engine_install_error(e), BB_INSTALL_ALREADY_INSTALLED);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_concrete_slot_from_attribute_proto(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x", "y");
    bb_node *n = fx_op(m, f, "test.echo", "Echo", "x", "y");
    fx_meta(m, n, "ai.bytesandbrains.concrete_type", "test::Echo");
    bb_attr **slot = BB_VEC_PUSH(m->arena, &f->attribute_protos);
    *slot = bb_arena_alloc(m->arena, sizeof **slot);
    (*slot)->name = "echo";
    (*slot)->type = BB_ATTR_STRING;
    bb_kv_set(m->arena, &f->metadata, "ai.bytesandbrains.concrete_type.echo", "test::Echo");
    bb_engine *e = fx_engine(1, 7001, NULL);
    bb_error err = {0};
    if (fx_install(e, m, "Main", &err))
        fail_msg("%s", err.msg);
    assert_int_equal(fx_echo_count(), 1);
    assert_string_equal(fx_echo_at(0)->slot, "echo");
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_ai_onnx_routes_to_backend(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "a", "y");
    fx_op(m, f, "", "Relu", "a", "y");
    fx_bind(m, "Main", "compute", "Backend|test::Backend|1");
    bb_engine *e = fx_engine(1, 7001, NULL);
    bb_error err = {0};
    assert_int_equal(fx_install(e, m, "Main", &err), BB_OK);
    float in[3] = {-1, 2, -3}, want[3] = {0, 2, 0};
    bb_value *v = fx_f32(in, 3);
    bb_engine_input i = {.name = "a", .value = v};
    assert_int_equal(bb_engine_invoke(e, "Main", &i, 1, NULL, NULL), BB_OK);
    bb_value_unref(v);
    fx_log log = {0};
    fx_run(e, &log, 1, 5);
    assert_true(fx_f32_eq(fx_log_app(&log, "y", 0)->value, want, 3));
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
    /* an op the backend does not declare is listed by the pre-flight */
    m = fx_model();
    f = fx_fn(m, "Main", "a", "y");
    fx_op(m, f, "ai.onnx", "Conv", "a", "y");
    fx_bind(m, "Main", "compute", "Backend|test::Backend|1");
    expect_fail(m, "Main", BB_INSTALL_INCOMPATIBLE_RUNTIME, "opset ai.onnx missing Conv");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_targets),
        cmocka_unit_test(test_not_compiled),
        cmocka_unit_test(test_unknown_and_hashed_targets),
        cmocka_unit_test(test_malformed_binding),
        cmocka_unit_test(test_slot_binding_conflict),
        cmocka_unit_test(test_shared_slot_one_component),
        cmocka_unit_test(test_unbound_generic_slot),
        cmocka_unit_test(test_unregistered_type_and_role_mismatch),
        cmocka_unit_test(test_unbound_dependency),
        cmocka_unit_test(test_function_definition_conflict),
        cmocka_unit_test(test_recursive_function_call),
        cmocka_unit_test(test_incompatible_runtime),
        cmocka_unit_test(test_malformed_graph),
        cmocka_unit_test(test_component_create_failed),
        cmocka_unit_test(test_already_installed_and_retry_after_failure),
        cmocka_unit_test(test_concrete_slot_from_attribute_proto),
        cmocka_unit_test(test_ai_onnx_routes_to_backend),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
