/*
 * test_pass_merge_partitions_into_one.c — one ModelProto: partition
 * functions in order, each followed by its sub-functions, shared ones
 * deduplicated, conflicting bodies refused; opset_import is the union of
 * the domains used (ai.onnx first); metadata carries the passport and every
 * partition's bindings; the graph is empty; ir_version is the target.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bbc_fixture.h"

static bb_function *helper(bbc_partition *p, const char *op)
{
    bb_function *h = bb_model_add_function(p->model, "user.app", "Helper");
    fx_node(p->model, h, "h", BB_DOMAIN_SYSCALL, op, FX_L("i"), FX_L("o"));
    fx_node(p->model, p->fn, "call", "user.app", "Helper", FX_L("x"), FX_L("y"));
    return h;
}

static void setup(bbc_state *st, bbc_error *err, bbc_options *o, const char *second_op)
{
    bb_function *f;
    bb_model *m = fx_model(&f);
    bb_kv_set(m->arena, &m->metadata, "author.note", "kept");
    bb_kv_set(m->arena, &m->metadata, BB_META_COMPILED, "v0");
    assert_int_equal(fx_state(st, m, o, NULL, NULL, err), BB_OK);
    bbc_partition *a = fx_part(st, "A"), *b = fx_part(st, "B");
    fx_node(a->model, a->fn, "p", BB_DOMAIN_SYSCALL, "Pulse", FX_NOL, FX_L("x"));
    fx_node(b->model, b->fn, "mm", "", "MatMul", FX_L("x", "x"), FX_L("z"));
    helper(a, "PassThrough");
    helper(b, second_op);
    bb_kv_set(a->model->arena, &a->model->metadata, "ai.bytesandbrains.binding.A.s", "Model|t|0");
    bb_kv_set(b->model->arena, &b->model->metadata, "ai.bytesandbrains.binding.B.s", "Model|t|0");
}

static void test_merge(void **state)
{
    (void)state;
    bbc_state st;
    bbc_error err;
    bbc_options o;
    bbc_options_init(&o);
    o.target_ir_version = 11;
    setup(&st, &err, &o, "PassThrough");
    assert_int_equal(fx_run(&st, "merge_partitions_into_one"), BB_OK);
    const bb_model *out = st.out;
    assert_int_equal(out->functions.n, 3);
    assert_string_equal(out->functions.v[0]->name, "A");
    assert_string_equal(out->functions.v[1]->name, "Helper");
    assert_string_equal(out->functions.v[2]->name, "B");
    assert_int_equal(out->graph->nodes.n, 0);
    assert_int_equal(out->ir_version, 11);
    assert_string_equal(bb_kv_get(&out->metadata, BB_META_COMPILED), "v1");
    assert_string_equal(bb_kv_get(&out->metadata, "author.note"), "kept");
    assert_non_null(bb_kv_get(&out->metadata, "ai.bytesandbrains.binding.A.s"));
    assert_non_null(bb_kv_get(&out->metadata, "ai.bytesandbrains.binding.B.s"));
    /* opset_import: ai.onnx first, then sorted; the call domain too. */
    assert_true(out->opset_imports.n >= 3);
    assert_true(bb_domain_is_onnx(out->opset_imports.v[0].domain));
    for (size_t i = 2; i < out->opset_imports.n; i++)
        assert_true(strcmp(out->opset_imports.v[i - 1].domain, out->opset_imports.v[i].domain) < 0);
    assert_true(bb_opset_list_version(&out->opset_imports, "user.app") >= 1);
    assert_true(bb_opset_list_version(&out->opset_imports, BB_DOMAIN_SYSCALL) >= 1);
    bbc_state_free(&st);
}

static void test_odr(void **state)
{
    (void)state;
    bbc_state st;
    bbc_error err;
    setup(&st, &err, NULL, "DeadlineCheck");
    assert_int_equal(fx_run(&st, "merge_partitions_into_one"), BB_ECOMPILE);
    assert_int_equal(err.kind, BBC_E_INTERNAL);
    assert_non_null(strstr(err.msg, "user.app::Helper"));
    assert_non_null(strstr(err.msg, "`B`"));
    bbc_state_free(&st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_odr),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
