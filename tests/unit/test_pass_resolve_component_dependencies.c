/*
 * test_pass_resolve_component_dependencies.c — a bound type's declared
 * dependencies must name bound slots of the declared role
 * (UnboundDependency otherwise); satisfied dependency slots join the
 * partitions that need them with their declarations.
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
    bbc_bindings b;
    bbc_partition *p;
} t;

/* nn::Mlp depends on Backend "backend" and DataSource "data". */
static void begin(t *x, const char *data_type)
{
    memset(x, 0, sizeof *x);
    x->m = fx_model(&x->f);
    fx_types(&x->ts, &x->arr);
    bbc_bindings_init(&x->b);
    fx_concrete(x->m, x->f, "model", "nn::Mlp", "Model");
    fx_concrete(x->m, x->f, "backend", "cpu::CpuBackend", "Backend");
    if (data_type)
        bbc_bindings_add(&x->b, "data", data_type, NULL, "--bind", NULL);
    assert_int_equal(fx_state(&x->st, x->m, NULL, &x->ts, &x->b, &x->err), BB_OK);
    x->p = fx_part(&x->st, "@self");
    bb_node *n = fx_node(x->p->model, x->p->fn, "params", BB_DOMAIN_ROLE_MODEL, "Params", FX_NOL,
                         FX_L("w"));
    fx_on_slot(x->p->model, n, "model", "nn::Mlp");
}

static void end(t *x)
{
    bbc_state_free(&x->st);
    bbc_bindings_free(&x->b);
}

static void test_satisfied(void **state)
{
    (void)state;
    t x;
    begin(&x, "data::Csv");
    assert_int_equal(fx_run(&x.st, "resolve_component_dependencies"), BB_OK);
    const bb_function *f = x.p->fn;
    /* backend (recorded concrete) and data (binding only) joined the partition. */
    bool backend = false;
    for (size_t i = 0; i < f->attribute_protos.n; i++)
        backend |= bbc_str_eq(f->attribute_protos.v[i]->name, "backend");
    assert_true(backend);
    assert_string_equal(bb_kv_get(&f->metadata, "ai.bytesandbrains.concrete_type.backend"),
                        "cpu::CpuBackend");
    assert_true(bb_str_list_find(&f->attributes, "data") >= 0);
    size_t na = f->attributes.n, np = f->attribute_protos.n;
    assert_int_equal(fx_run(&x.st, "resolve_component_dependencies"), BB_OK);
    assert_int_equal(f->attributes.n, na);
    assert_int_equal(f->attribute_protos.n, np);
    end(&x);
}

static void test_unbound(void **state)
{
    (void)state;
    t x;
    begin(&x, NULL);
    assert_int_equal(fx_run(&x.st, "resolve_component_dependencies"), BB_ECOMPILE);
    assert_int_equal(x.err.kind, BBC_E_UNBOUND_DEPENDENCY);
    assert_non_null(strstr(x.err.msg, "'nn::Mlp' bound at slot 'model'"));
    assert_non_null(strstr(x.err.msg, "role DataSource at slot 'data'"));
    end(&x);
}

static void test_wrong_role(void **state)
{
    (void)state;
    t x;
    begin(&x, "agg::FedAvg");
    assert_int_equal(fx_run(&x.st, "resolve_component_dependencies"), BB_ECOMPILE);
    assert_int_equal(x.err.kind, BBC_E_UNBOUND_DEPENDENCY);
    assert_non_null(strstr(x.err.msg, "holds 'agg::FedAvg' of role Aggregator"));
    end(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_satisfied),
        cmocka_unit_test(test_unbound),
        cmocka_unit_test(test_wrong_role),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
