/*
 * test_engine_bootstrap.c — host-driven bootstrap (ENGINE.md 6.8): ALL in
 * install order then Pulse, FRESH (components, then ALL), module requests
 * with inputs, validation errors, component bootstraps (NOW and LATER), the
 * per-component body-op gate (is_op_locked) and BootstrapStatus.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/engine_fixtures.h"

static bb_function *boot_fn(bb_model *m, const char *name, const char *inputs)
{
    bb_function *f = fx_fn(m, name, inputs, "");
    bb_kv_set(m->arena, &f->metadata, "ai.bytesandbrains.module_phase", "bootstrap");
    return f;
}

static bb_node *echo(bb_model *m, bb_function *f, const char *op, const char *in, const char *out,
                     const char *slot)
{
    bb_node *n = fx_op(m, f, "test.echo", op, in, out);
    fx_meta(m, n, "ai.bytesandbrains.slot", slot);
    return n;
}

static void emit(bb_model *m, bb_function *f, const char *in, const char *name)
{
    bb_node *n = fx_op(m, f, FX_SYS, "AppEmit", in, "");
    fx_str(m, n, "name", name);
}

static bb_model *two_modules(void)
{
    bb_model *m = fx_model();
    bb_function *a = fx_fn(m, "A", "x", "");
    bb_node *p = fx_op(m, a, FX_SYS, "Pulse", "", "pulse");
    (void)p;
    emit(m, a, "pulse", "pulse");
    echo(m, a, "Echo", "x", "ax", "echo");
    bb_function *ab = boot_fn(m, "A__bootstrap", "");
    bb_node *c = fx_op(m, ab, FX_SYS, "Constant", "", "seven");
    fx_int(m, c, "value", 7);
    echo(m, ab, "Echo", "seven", "e1", "echo");
    emit(m, ab, "e1", "boot_a");
    bb_function *b = fx_fn(m, "B", "x", "");
    emit(m, b, "x", "b_body");
    bb_function *bb = boot_fn(m, "B__bootstrap", "seed");
    fx_type(m, bb, "seed", &BB_TYPE_U64);
    echo(m, bb, "Echo", "seed", "e2", "echo2");
    emit(m, bb, "e2", "boot_b");
    fx_bind(m, "A", "echo", "Protocol|test::Echo|1");
    fx_bind(m, "B", "echo2", "Protocol|test::Echo|2");
    return m;
}

static bb_engine *install(bb_model *m, const char *targets)
{
    bb_engine *e = fx_engine(1, 7001, NULL);
    bb_error err = {0};
    if (fx_install(e, m, targets, &err))
        fail_msg("%s", err.msg);
    return e;
}

static size_t index_of(const fx_log *l, bb_step_kind kind, const char *a)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].kind == kind && ((l->v[i].a && a && strcmp(l->v[i].a, a) == 0) ||
                                     (l->v[i].b && a && strcmp(l->v[i].b, a) == 0)))
            return i;
    return SIZE_MAX;
}

static void test_all_in_install_order_then_pulse(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = two_modules();
    bb_engine *e = install(m, "A,B");
    assert_int_equal(bb_engine_bootstrap_status(e), BB_BOOTSTRAP_IDLE);
    fx_log log = {0};
    fx_run(e, &log, 1, 5);
    assert_null(fx_log_app(&log, "pulse", 0)); /* nothing runs before the host asks */
    bb_bootstrap_target all = {.kind = BB_BOOTSTRAP_ALL};
    assert_int_equal(bb_engine_run_bootstrap(e, &all, NULL), BB_OK);
    /* staged, not yet polled: the request is waiting */
    assert_int_equal(bb_engine_bootstrap_status(e), BB_BOOTSTRAP_WAITING_FOR_INPUT);
    fx_run(e, &log, 2, 10);
    size_t ia = index_of(&log, BB_STEP_BOOTSTRAP_COMPLETE, "A");
    size_t iboot = index_of(&log, BB_STEP_APP_EVENT, "boot_a");
    assert_true(iboot < ia && ia != SIZE_MAX);
    assert_int_equal(fx_log_app(&log, "boot_a", 0)->value->u.u64, 7);
    /* B's bootstrap takes an input: the walk waits for it instead of running
     * B without it, and no Pulse fires before the walk ends */
    assert_int_equal(index_of(&log, BB_STEP_BOOTSTRAP_COMPLETE, "B"), SIZE_MAX);
    assert_null(fx_log_app(&log, "pulse", 0));
    assert_int_equal(bb_engine_bootstrap_status(e), BB_BOOTSTRAP_WAITING_FOR_INPUT);
    assert_int_equal(bb_engine_next_deadline(e), UINT64_MAX); /* waiting is not busy */
    bb_value *v = bb_value_u64(&BB_TYPE_U64, 3);
    bb_engine_input seed = {.name = "seed", .value = v};
    bb_bootstrap_request rq = {.target = "B", .inputs = &seed, .n_inputs = 1};
    bb_bootstrap_target t = {.kind = BB_BOOTSTRAP_MODULE_REQUESTS, .requests = &rq, .n_requests = 1};
    assert_int_equal(bb_engine_run_bootstrap(e, &t, NULL), BB_OK);
    bb_value_unref(v);
    fx_run(e, &log, 3, 10);
    size_t ib = index_of(&log, BB_STEP_BOOTSTRAP_COMPLETE, "B");
    size_t ip = index_of(&log, BB_STEP_APP_EVENT, "pulse");
    assert_true(ia < ib && ib != SIZE_MAX);
    assert_true(ib < ip && ip != SIZE_MAX);
    assert_int_equal(fx_log_app(&log, "boot_b", 0)->value->u.u64, 3);
    assert_int_equal(bb_engine_bootstrap_status(e), BB_BOOTSTRAP_IDLE);
    /* ALL again is a no-op: every module is done, no second pulse */
    assert_int_equal(bb_engine_run_bootstrap(e, &all, NULL), BB_OK);
    fx_run(e, &log, 4, 10);
    assert_null(fx_log_app(&log, "pulse", 1));
    assert_int_equal(fx_log_count(&log, BB_STEP_BOOTSTRAP_COMPLETE), 2);
    assert_int_equal(bb_engine_live_executions(e), 0);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

/* FRESH (a host's fresh start): every component bootstrap, then the ALL
 * walk and its Pulse. */
static void test_fresh_start_components_then_all(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = two_modules();
    bb_engine *e = install(m, "A");
    bb_bootstrap_target fresh = {.kind = BB_BOOTSTRAP_FRESH};
    assert_int_equal(bb_engine_run_bootstrap(e, &fresh, NULL), BB_OK);
    fx_log log = {0};
    fx_run(e, &log, 1, 10);
    size_t icomp = index_of(&log, BB_STEP_BOOTSTRAP_COMPLETE, "echo");
    size_t ia = index_of(&log, BB_STEP_BOOTSTRAP_COMPLETE, "A");
    size_t ip = index_of(&log, BB_STEP_APP_EVENT, "pulse");
    assert_true(icomp < ia && ia < ip && ip != SIZE_MAX);
    assert_int_equal(fx_log_count(&log, BB_STEP_BOOTSTRAP_COMPLETE), 2);
    assert_int_equal(bb_engine_bootstrap_status(e), BB_BOOTSTRAP_IDLE);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

/* A module bootstrap whose body fails ends as BootstrapFailed; a component
 * bootstrap completed with an error too; staging what is already in flight is
 * rejected with an InfraEvent. */
static void test_bootstrap_failed_and_rejected(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x", "");
    emit(m, f, "x", "body");
    bb_function *b = boot_fn(m, "Main__bootstrap", "");
    bb_node *c = fx_op(m, b, FX_SYS, "Constant", "", "k");
    fx_int(m, c, "value", 1);
    echo(m, b, "Fail", "k", "o", "plain");
    fx_bind(m, "Main", "plain", "Protocol|test::Echo|1");
    fx_bind(m, "Main", "later_echo", "Protocol|test::Echo|2");
    bb_engine *e = install(m, "Main");
    bb_bootstrap_target all = {.kind = BB_BOOTSTRAP_ALL};
    assert_int_equal(bb_engine_run_bootstrap(e, &all, NULL), BB_OK);
    fx_log log = {0};
    fx_run(e, &log, 1, 5);
    const fx_rec *r = fx_log_nth(&log, BB_STEP_BOOTSTRAP_FAILED, 0);
    assert_non_null(r);
    assert_string_equal(r->a, "Main");
    assert_non_null(strstr(r->c, "echo failed on purpose"));
    assert_int_equal(fx_log_count(&log, BB_STEP_BOOTSTRAP_COMPLETE), 0);
    assert_int_equal(bb_engine_bootstrap_status(e), BB_BOOTSTRAP_IDLE);
    /* component bootstrap: LATER, then staged again while in flight */
    const char *slots[1] = {"later_echo"};
    bb_bootstrap_target t = {.kind = BB_BOOTSTRAP_SLOTS, .names = slots, .n_names = 1};
    assert_int_equal(bb_engine_run_bootstrap(e, &t, NULL), BB_OK);
    fx_run(e, &log, 2, 5);
    assert_int_equal(bb_engine_bootstrap_status(e), BB_BOOTSTRAP_RUNNING);
    assert_int_equal(bb_engine_run_bootstrap(e, &t, NULL), BB_OK);
    fx_run(e, &log, 3, 5);
    r = fx_log_infra(&log, BB_INFRA_BOOTSTRAP_REJECTED, -1);
    assert_non_null(r);
    assert_non_null(strstr(r->c, "AlreadyTransitivelyQueued: later_echo"));
    fx_echo *le = fx_echo_by_slot("later_echo");
    assert_non_null(le);
    assert_int_equal(bb_complete_err(le->boot_pending, BB_ECONFIG, "no seed peers"), BB_OK);
    fx_run(e, &log, 4, 5);
    r = fx_log_nth(&log, BB_STEP_BOOTSTRAP_FAILED, 1);
    assert_non_null(r);
    assert_string_equal(r->b, "later_echo");
    assert_non_null(strstr(r->c, "no seed peers"));
    assert_int_equal(bb_engine_bootstrap_status(e), BB_BOOTSTRAP_IDLE);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_module_requests_and_errors(void **state)
{
    (void)state;
    bb_model *m = two_modules();
    bb_engine *e = install(m, "A,B");
    bb_value *v = bb_value_u64(&BB_TYPE_U64, 5);
    bb_engine_input seed = {.name = "seed", .value = v};
    bb_engine_input wrong = {.name = "nope", .value = v};
    bb_bootstrap_request rq = {.target = "B", .inputs = &seed, .n_inputs = 1};
    bb_bootstrap_target t = {.kind = BB_BOOTSTRAP_MODULE_REQUESTS, .requests = &rq, .n_requests = 1};
    bb_error err = {0};
    /* errors first: nothing is staged */
    rq.n_inputs = 0;
    assert_int_equal(bb_engine_run_bootstrap(e, &t, &err), BB_EINVAL);
    assert_non_null(strstr(err.msg, "MissingInput 'seed'"));
    bb_engine_input two[2] = {seed, wrong};
    rq.inputs = two;
    rq.n_inputs = 2;
    assert_int_equal(bb_engine_run_bootstrap(e, &t, &err), BB_EINVAL);
    rq.n_inputs = 1;
    rq.inputs = &wrong;
    assert_int_equal(bb_engine_run_bootstrap(e, &t, &err), BB_EINVAL);
    assert_non_null(strstr(err.msg, "MissingInput"));
    rq.target = "Zed";
    assert_int_equal(bb_engine_run_bootstrap(e, &t, &err), BB_ENOTFOUND);
    assert_non_null(strstr(err.msg, "UnknownTarget 'Zed'"));
    bb_bootstrap_request dup[2] = {{.target = "B", .inputs = &seed, .n_inputs = 1},
                                   {.target = "B", .inputs = &seed, .n_inputs = 1}};
    t.requests = dup;
    t.n_requests = 2;
    assert_int_equal(bb_engine_run_bootstrap(e, &t, &err), BB_EINVAL);
    assert_non_null(strstr(err.msg, "AlreadyTransitivelyQueued"));
    const char *names[1] = {"Nope"};
    bb_bootstrap_target nt = {.kind = BB_BOOTSTRAP_MODULE_NAMES, .names = names, .n_names = 1};
    assert_int_equal(bb_engine_run_bootstrap(e, &nt, &err), BB_ENOTFOUND);
    fx_log log = {0};
    fx_run(e, &log, 1, 5);
    assert_int_equal(fx_log_count(&log, BB_STEP_BOOTSTRAP_COMPLETE), 0);
    /* the valid request */
    rq.target = "B";
    rq.inputs = &seed;
    rq.n_inputs = 1;
    t.requests = &rq;
    t.n_requests = 1;
    assert_int_equal(bb_engine_run_bootstrap(e, &t, &err), BB_OK);
    fx_run(e, &log, 2, 5);
    assert_int_equal(fx_log_app(&log, "boot_b", 0)->value->u.u64, 5);
    assert_non_null(fx_log_nth(&log, BB_STEP_BOOTSTRAP_COMPLETE, 0));
    assert_string_equal(fx_log_nth(&log, BB_STEP_BOOTSTRAP_COMPLETE, 0)->a, "B");
    /* module names for A (no formals) */
    names[0] = "A";
    assert_int_equal(bb_engine_run_bootstrap(e, &nt, &err), BB_OK);
    fx_run(e, &log, 3, 5);
    assert_non_null(fx_log_app(&log, "boot_a", 0));
    bb_value_unref(v);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_component_bootstrap_locks_touching_ops(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x", "y,z");
    echo(m, f, "Echo", "x", "y", "later_echo");
    echo(m, f, "Echo", "x", "z", "plain");
    fx_bind(m, "Main", "later_echo", "Protocol|test::Echo|1");
    fx_bind(m, "Main", "plain", "Protocol|test::Echo|2");
    bb_engine *e = install(m, "Main");
    const char *slots[2] = {"later_echo", "plain"};
    bb_bootstrap_target t = {.kind = BB_BOOTSTRAP_SLOTS, .names = slots, .n_names = 2};
    assert_int_equal(bb_engine_run_bootstrap(e, &t, NULL), BB_OK);
    fx_log log = {0};
    fx_run(e, &log, 1, 5);
    /* plain completes inline; later_echo is in flight */
    assert_int_equal(fx_log_count(&log, BB_STEP_BOOTSTRAP_COMPLETE), 1);
    assert_string_equal(fx_log_nth(&log, BB_STEP_BOOTSTRAP_COMPLETE, 0)->b, "plain");
    assert_int_equal(bb_engine_bootstrap_status(e), BB_BOOTSTRAP_RUNNING);
    assert_int_equal(fx_log_count(&log, BB_STEP_WAITING_ON_BOOTSTRAP), 1);
    assert_string_equal(fx_log_nth(&log, BB_STEP_WAITING_ON_BOOTSTRAP, 0)->b, "later_echo");
    bb_value *v = bb_value_u64(&BB_TYPE_U64, 1);
    bb_engine_input in = {.name = "x", .value = v};
    assert_int_equal(bb_engine_invoke(e, "Main", &in, 1, NULL, NULL), BB_OK);
    bb_value_unref(v);
    fx_run(e, &log, 2, 5);
    assert_non_null(fx_log_app(&log, "z", 0)); /* disjoint component fires */
    assert_null(fx_log_app(&log, "y", 0));     /* parked behind the bootstrap */
    assert_int_equal(bb_engine_live_executions(e), 1);
    fx_echo *le = fx_echo_by_slot("later_echo");
    assert_non_null(le);
    assert_non_null(le->boot_pending);
    assert_int_equal(bb_complete_ok(le->boot_pending, NULL, 0), BB_OK);
    fx_run(e, &log, 3, 5);
    assert_int_equal(fx_log_count(&log, BB_STEP_BOOTSTRAP_COMPLETE), 2);
    assert_non_null(fx_log_app(&log, "y", 0));
    assert_int_equal(bb_engine_bootstrap_status(e), BB_BOOTSTRAP_IDLE);
    assert_int_equal(bb_engine_live_executions(e), 0);
    assert_int_equal(bb_engine_live_slots(e), 0);
    /* an unknown slot (or one without a bootstrap) is refused */
    const char *bad[1] = {"nope"};
    bb_bootstrap_target bt = {.kind = BB_BOOTSTRAP_SLOTS, .names = bad, .n_names = 1};
    assert_int_equal(bb_engine_run_bootstrap(e, &bt, NULL), BB_ENOTFOUND);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_module_bootstrap_locks_its_touch_set(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x", "y,z");
    echo(m, f, "Echo", "x", "y", "busy");
    echo(m, f, "Echo", "x", "z", "free");
    bb_function *b = boot_fn(m, "Main__bootstrap", "");
    fx_op(m, b, FX_SYS, "Constant", "", "c");
    fx_int(m, b->nodes.v[0], "value", 1);
    echo(m, b, "Later", "c", "done", "busy"); /* the bootstrap waits on `busy` */
    emit(m, b, "done", "boot_done");
    fx_bind(m, "Main", "busy", "Protocol|test::Echo|1");
    fx_bind(m, "Main", "free", "Protocol|test::Echo|2");
    bb_engine *e = install(m, "Main");
    bb_bootstrap_target all = {.kind = BB_BOOTSTRAP_ALL};
    assert_int_equal(bb_engine_run_bootstrap(e, &all, NULL), BB_OK);
    fx_log log = {0};
    fx_run(e, &log, 1, 5);
    assert_int_equal(bb_engine_bootstrap_status(e), BB_BOOTSTRAP_RUNNING);
    bb_value *v = bb_value_u64(&BB_TYPE_U64, 1);
    bb_engine_input in = {.name = "x", .value = v};
    assert_int_equal(bb_engine_invoke(e, "Main", &in, 1, NULL, NULL), BB_OK);
    bb_value_unref(v);
    fx_run(e, &log, 2, 5);
    assert_non_null(fx_log_app(&log, "z", 0));
    assert_null(fx_log_app(&log, "y", 0));
    fx_echo *busy = fx_echo_by_slot("busy");
    assert_int_equal(busy->n_pending, 1); /* the bootstrap's own op ran */
    bb_value *r = bb_value_u64(&BB_TYPE_U64, 9);
    assert_int_equal(bb_complete_ok(busy->pending[0], &r, 1), BB_OK);
    bb_value_unref(busy->pending_in[0]);
    busy->n_pending = 0;
    fx_run(e, &log, 3, 5);
    size_t idone = index_of(&log, BB_STEP_BOOTSTRAP_COMPLETE, "Main");
    assert_true(idone != SIZE_MAX);
    assert_true(index_of(&log, BB_STEP_APP_EVENT, "boot_done") < idone);
    assert_true(idone < index_of(&log, BB_STEP_APP_EVENT, "y"));
    assert_int_equal(bb_engine_live_slots(e), 0);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_conflicting_requests_wait(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = fx_model();
    const char *mods[3] = {"A", "B", "C"};
    for (int i = 0; i < 3; i++) {
        bb_function *f = fx_fn(m, mods[i], "x", "");
        emit(m, f, "x", "body");
        char bn[32];
        snprintf(bn, sizeof bn, "%s__bootstrap", mods[i]);
        bb_function *b = boot_fn(m, bn, "");
        bb_node *c = fx_op(m, b, FX_SYS, "Constant", "", "k");
        fx_int(m, c, "value", i);
        /* A waits on `busy`; B touches `busy` too; C touches only `free` */
        echo(m, b, i == 0 ? "Later" : "Echo", "k", "o", i == 2 ? "free" : "busy");
        char topic[16];
        snprintf(topic, sizeof topic, "boot_%s", mods[i]);
        emit(m, b, "o", topic);
    }
    fx_bind(m, "A", "busy", "Protocol|test::Echo|1");
    fx_bind(m, "B", "busy", "Protocol|test::Echo|1");
    fx_bind(m, "C", "free", "Protocol|test::Echo|2");
    bb_engine *e = install(m, "A,B,C");
    bb_bootstrap_target t = {.kind = BB_BOOTSTRAP_MODULE_NAMES, .names = mods, .n_names = 3};
    assert_int_equal(bb_engine_run_bootstrap(e, &t, NULL), BB_OK);
    fx_log log = {0};
    fx_run(e, &log, 1, 5);
    /* C is disjoint and completes; B overlaps A's touch set and waits */
    assert_non_null(fx_log_app(&log, "boot_C", 0));
    assert_null(fx_log_app(&log, "boot_B", 0));
    assert_int_equal(fx_log_count(&log, BB_STEP_BOOTSTRAP_COMPLETE), 1);
    assert_int_equal(bb_engine_bootstrap_status(e), BB_BOOTSTRAP_RUNNING);
    fx_echo *busy = fx_echo_by_slot("busy");
    assert_int_equal(busy->n_pending, 1);
    bb_value *v = bb_value_ref(busy->pending_in[0]);
    assert_int_equal(bb_complete_ok(busy->pending[0], &v, 1), BB_OK);
    bb_value_unref(busy->pending_in[0]);
    busy->n_pending = 0;
    fx_run(e, &log, 2, 5);
    assert_non_null(fx_log_app(&log, "boot_A", 0));
    assert_non_null(fx_log_app(&log, "boot_B", 0));
    assert_true(index_of(&log, BB_STEP_BOOTSTRAP_COMPLETE, "A") <
                index_of(&log, BB_STEP_BOOTSTRAP_COMPLETE, "B"));
    assert_int_equal(bb_engine_bootstrap_status(e), BB_BOOTSTRAP_IDLE);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_in_install_order_then_pulse),
        cmocka_unit_test(test_fresh_start_components_then_all),
        cmocka_unit_test(test_bootstrap_failed_and_rejected),
        cmocka_unit_test(test_module_requests_and_errors),
        cmocka_unit_test(test_component_bootstrap_locks_touching_ops),
        cmocka_unit_test(test_module_bootstrap_locks_its_touch_set),
        cmocka_unit_test(test_conflicting_requests_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
