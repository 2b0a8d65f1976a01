/*
 * test_pass_validate_runtime_complete.c — the final pre-flight: a partition
 * with both gate chains and paired deadlines passes; a missing gate is
 * Internal naming the partition; an unpaired deadline is RuntimeIncomplete.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bbc/gates.h"
#include "bbc_fixture.h"

#define BBC_GATE_NAME(i) (BBC_GATE_CONTRACTS[i].op)

static const char *const ALL[] = {"insert_dedup_gate_rx", "insert_peer_health_gate_rx",
                                  "insert_backoff_gate_rx", "insert_peer_health_gate_tx",
                                  "insert_backoff_gate_tx", "insert_async_deadlines"};

typedef struct t {
    bb_model *m;
    bb_function *f;
    bbc_state st;
    bbc_error err;
    bbc_partition *p;
} t;

static void begin(t *x, const char *skip)
{
    memset(x, 0, sizeof *x);
    x->m = fx_model(&x->f);
    assert_int_equal(fx_state(&x->st, x->m, NULL, NULL, NULL, &x->err), BB_OK);
    x->p = fx_wire_part(&x->st);
    bb_node_set_attr_int(x->p->model->arena, fx_named(x->p->fn, "send"), "deadline_ns", 100);
    for (size_t i = 0; i < sizeof ALL / sizeof *ALL; i++)
        if (!skip || strcmp(skip, ALL[i]) != 0)
            assert_int_equal(fx_run(&x->st, ALL[i]), BB_OK);
}

static void test_complete(void **state)
{
    (void)state;
    t x;
    begin(&x, NULL);
    assert_int_equal(fx_run(&x.st, "validate_runtime_complete"), BB_OK);
    bbc_state_free(&x.st);
}

static void test_missing_gates(void **state)
{
    (void)state;
    for (size_t i = 0; i < 5; i++) {
        t x;
        begin(&x, ALL[i]);
        assert_int_equal(fx_run(&x.st, "validate_runtime_complete"), BB_ECOMPILE);
        assert_int_equal(x.err.kind, BBC_E_INTERNAL);
        assert_non_null(strstr(x.err.msg, "partition `@self`"));
        assert_non_null(strstr(x.err.msg, BBC_GATE_NAME(i)));
        bbc_state_free(&x.st);
    }
}

static void test_unpaired_deadline(void **state)
{
    (void)state;
    t x;
    begin(&x, "insert_async_deadlines");
    assert_int_equal(fx_run(&x.st, "validate_runtime_complete"), BB_ECOMPILE);
    assert_int_equal(x.err.kind, BBC_E_RUNTIME_INCOMPLETE);
    assert_non_null(strstr(x.err.msg, "Send 'send' carries deadline_ns"));
    bbc_state_free(&x.st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_complete),
        cmocka_unit_test(test_missing_gates),
        cmocka_unit_test(test_unpaired_deadline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
