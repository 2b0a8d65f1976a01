/*
 * test_pass_resolve_slots.c — role nodes of every partition function
 * (bootstraps included) get their slot and model-wide slot_id; unknown
 * slots are MissingBinding, a concrete type held by two slots with no slot
 * stamp is AmbiguousRole, an op the bound type does not declare is
 * RoleMethodFailed.
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
    bbc_partition *p;
} t;

static void begin(t *x)
{
    memset(x, 0, sizeof *x);
    x->m = fx_model(&x->f);
    fx_types(&x->ts, &x->arr);
    fx_concrete(x->m, x->f, "model", "nn::Mlp", "Model");
    fx_generic(x->m, x->f, "agg", "Aggregator");
}

static void start(t *x, bbc_bindings *b)
{
    assert_int_equal(fx_state(&x->st, x->m, NULL, &x->ts, b, &x->err), BB_OK);
    x->p = fx_part(&x->st, "@self");
}

static bb_node *node(t *x, const char *name, const char *dom, const char *op)
{
    return fx_node(x->p->model, x->p->fn, name, dom, op, FX_NOL, FX_L(name));
}

static void test_stamps(void **state)
{
    (void)state;
    t x;
    begin(&x);
    bbc_bindings b;
    bbc_bindings_init(&b);
    bbc_bindings_add_arg(&b, "agg=agg::FedAvg", NULL);
    start(&x, &b);
    bb_node *c = node(&x, "params", BB_DOMAIN_ROLE_MODEL, "Params");
    fx_meta(x.p->model, c, BB_META_CONCRETE_TYPE, "nn::Mlp"); /* no slot stamp */
    fx_meta(x.p->model, c, BB_META_INSTANCE, "0");
    bb_node *g = node(&x, "agg", BB_DOMAIN_ROLE_AGGREGATOR, "Aggregate");
    fx_meta(x.p->model, g, BB_META_REQUIRED_TRAIT, "Aggregator");
    fx_meta(x.p->model, g, BB_META_SLOT_ID, "0");
    fx_meta(x.p->model, g, BB_META_SLOT, "agg");
    bb_str_list_push(x.p->model->arena, &x.p->fn->attributes, "agg");
    /* A bootstrap in the partition is resolved too. */
    bb_function *bf = bb_model_add_function(x.p->model, "user.app", "@self__bootstrap");
    bb_node *bn = fx_node(x.p->model, bf, "bp", BB_DOMAIN_ROLE_MODEL, "Params", FX_NOL, FX_L("w"));
    fx_on_slot(x.p->model, bn, "model", "nn::Mlp");
    assert_int_equal(fx_run(&x.st, "resolve_slots"), BB_OK);
    const bbc_slot *ms = bbc_state_slot(&x.st, "model"), *as = bbc_state_slot(&x.st, "agg");
    char id[16];
    assert_string_equal(bbc_meta(c, BB_META_SLOT), "model");
    snprintf(id, sizeof id, "%u", ms->slot_id);
    assert_string_equal(bbc_meta(c, BB_META_SLOT_ID), id);
    assert_string_equal(bbc_meta(bn, BB_META_SLOT_ID), id);
    snprintf(id, sizeof id, "%u", as->slot_id);
    assert_string_equal(bbc_meta(g, BB_META_SLOT_ID), id);
    assert_int_equal(as->slot_id, 0); /* the recorded generic id is kept */
    assert_int_equal(ms->slot_id, 1);
    assert_string_equal(bb_kv_get(&x.p->fn->metadata, "ai.bytesandbrains.slot_id.agg"), "0");
    bbc_state_free(&x.st);
    bbc_bindings_free(&b);
}

static void test_missing_binding(void **state)
{
    (void)state;
    t x;
    begin(&x);
    start(&x, NULL);
    bb_node *n = node(&x, "ghost", BB_DOMAIN_ROLE_MODEL, "Params");
    fx_on_slot(x.p->model, n, "phantom", "nn::Mlp");
    assert_int_equal(fx_run(&x.st, "resolve_slots"), BB_ECOMPILE);
    assert_int_equal(x.err.kind, BBC_E_MISSING_BINDING);
    assert_non_null(strstr(x.err.msg, "'ghost'"));
    assert_non_null(strstr(x.err.msg, "slot 'phantom'"));
    bbc_state_free(&x.st);
}

/* A slot only a node names (recorded into the slot table, but declared by
 * no module) is MissingBinding, unless a binding supplies it. */
static void test_missing_binding_named_by_node_only(void **state)
{
    (void)state;
    for (int bound = 0; bound < 2; bound++) {
        t x;
        begin(&x);
        bb_node *n = fx_node(x.m, x.f, "contrib", BB_DOMAIN_ROLE_AGGREGATOR, "Contribute",
                             FX_NOL, FX_L("cmd"));
        fx_meta(x.m, n, BB_META_SLOT, "ghost");
        fx_meta(x.m, n, BB_META_REQUIRED_TRAIT, "Aggregator");
        fx_meta(x.m, n, BB_META_SLOT_ID, "7");
        bbc_bindings b;
        bbc_bindings_init(&b);
        if (bound)
            assert_int_equal(bbc_bindings_add_arg(&b, "ghost=agg::FedAvg", NULL), BB_OK);
        start(&x, &b);
        assert_non_null(bbc_state_slot(&x.st, "ghost"));
        bb_node *c = node(&x, "contrib", BB_DOMAIN_ROLE_AGGREGATOR, "Contribute");
        fx_meta(x.p->model, c, BB_META_SLOT, "ghost");
        fx_meta(x.p->model, c, BB_META_REQUIRED_TRAIT, "Aggregator");
        fx_meta(x.p->model, c, BB_META_SLOT_ID, "7");
        if (bound) {
            assert_int_equal(fx_run(&x.st, "resolve_slots"), BB_OK);
        } else {
            assert_int_equal(fx_run(&x.st, "resolve_slots"), BB_ECOMPILE);
            assert_int_equal(x.err.kind, BBC_E_MISSING_BINDING);
            assert_non_null(strstr(x.err.msg, "node 'contrib' "
                                              "(ai.bytesandbrains.role.aggregator::Contribute) "
                                              "runs on slot 'ghost', which no module declares"));
        }
        bbc_state_free(&x.st);
        bbc_bindings_free(&b);
    }
}

static void test_ambiguous(void **state)
{
    (void)state;
    t x;
    begin(&x);
    fx_concrete(x.m, x.f, "teacher", "nn::Mlp", "Model");
    start(&x, NULL);
    bb_node *n = node(&x, "which", BB_DOMAIN_ROLE_MODEL, "Params");
    fx_meta(x.p->model, n, BB_META_CONCRETE_TYPE, "nn::Mlp");
    fx_meta(x.p->model, n, BB_META_INSTANCE, "0");
    assert_int_equal(fx_run(&x.st, "resolve_slots"), BB_ECOMPILE);
    assert_int_equal(x.err.kind, BBC_E_AMBIGUOUS_ROLE);
    assert_non_null(strstr(x.err.msg, "'nn::Mlp'"));
    assert_non_null(strstr(x.err.msg, "2 slots"));
    bbc_state_free(&x.st);
}

static void test_role_method_failed(void **state)
{
    (void)state;
    t x;
    begin(&x);
    start(&x, NULL);
    bb_node *n = node(&x, "apply", BB_DOMAIN_ROLE_MODEL, "ApplyDelta");
    fx_on_slot(x.p->model, n, "model", "nn::Mlp");
    assert_int_equal(fx_run(&x.st, "resolve_slots"), BB_ECOMPILE);
    assert_int_equal(x.err.kind, BBC_E_ROLE_METHOD_FAILED);
    assert_non_null(strstr(x.err.msg, "ApplyDelta"));
    assert_non_null(strstr(x.err.msg, "'nn::Mlp'"));
    bbc_state_free(&x.st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stamps),
        cmocka_unit_test(test_missing_binding),
        cmocka_unit_test(test_missing_binding_named_by_node_only),
        cmocka_unit_test(test_ambiguous),
        cmocka_unit_test(test_role_method_failed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
