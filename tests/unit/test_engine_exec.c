/*
 * test_engine_exec.c — execution core: invoke, frontier, readiness, ExecIds,
 * slot GC, function calls, unresolved dispatch, op budget, async suspension
 * and completion (in-cycle and cross-thread), deadlines, tracing.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/engine_fixtures.h"

static bb_engine *make(bb_model *m, const char *targets, const bb_engine_config *cfg)
{
    bb_engine *e = fx_engine(1, 7001, cfg);
    assert_non_null(e);
    bb_error err = {0};
    int rc = fx_install(e, m, targets, &err);
    if (rc)
        fail_msg("install: %s", err.msg);
    return e;
}

static bb_value *u64v(uint64_t v) { return bb_value_u64(&BB_TYPE_U64, v); }

static bb_exec_id invoke1(bb_engine *e, const char *target, const char *input, bb_value *v)
{
    bb_engine_input in = {.name = input, .value = v};
    bb_exec_id id = 0;
    bb_error err = {0};
    int rc = bb_engine_invoke(e, target, &in, 1, &id, &err);
    if (rc)
        fail_msg("invoke: %s", err.msg);
    bb_value_unref(v);
    return id;
}

static void test_chain_invoke(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = fx_model();
    fx_chain(m, "Main", 10);
    bb_engine *e = make(m, "Main", NULL);
    bb_exec_id id = invoke1(e, "Main", "in", u64v(42));
    assert_int_equal(bb_engine_next_deadline(e), 0);
    fx_log log = {0};
    fx_run(e, &log, 1, 10);
    const fx_rec *r = fx_log_app(&log, "out", 0);
    assert_non_null(r);
    assert_string_equal(r->a, "Main");
    assert_int_equal(r->exec, id);
    assert_int_equal(r->value->u.u64, 42);
    assert_int_equal(fx_log_count(&log, BB_STEP_APP_EVENT), 1);
    assert_int_equal(bb_engine_counter(e, "ops.invoked"), 10);
    assert_int_equal(bb_engine_live_executions(e), 0);
    assert_int_equal(bb_engine_live_slots(e), 0);
    assert_int_equal(bb_engine_next_deadline(e), UINT64_MAX);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_invoke_bytes_decoded_by_type(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *f = fx_chain(m, "Main", 1);
    fx_type(m, f, "in", &BB_TYPE_U64);
    bb_engine *e = make(m, "Main", NULL);
    uint8_t bytes[8] = {7, 1, 0, 0, 0, 0, 0, 0};
    bb_engine_input in = {.name = "in", .bytes = bytes, .len = 8};
    assert_int_equal(bb_engine_invoke(e, "Main", &in, 1, NULL, NULL), BB_OK);
    /* wrong length fails synchronously with EDECODE */
    in.len = 3;
    bb_error err = {0};
    assert_int_equal(bb_engine_invoke(e, "Main", &in, 1, NULL, &err), BB_EDECODE);
    assert_non_null(strstr(err.msg, "in"));
    /* unknown target / input */
    in.len = 8;
    assert_int_equal(bb_engine_invoke(e, "Nope", &in, 1, NULL, NULL), BB_ENOTFOUND);
    in.name = "zzz";
    assert_int_equal(bb_engine_invoke(e, "Main", &in, 1, NULL, NULL), BB_ENOTFOUND);
    fx_log log = {0};
    fx_run(e, &log, 1, 10);
    const fx_rec *r = fx_log_app(&log, "out", 0);
    assert_non_null(r);
    assert_int_equal(r->value->u.u64, 263);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_concurrent_executions_isolated(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    fx_chain(m, "Main", 5);
    bb_engine *e = make(m, "Main", NULL);
    bb_exec_id ids[100];
    for (int i = 0; i < 100; i++)
        ids[i] = invoke1(e, "Main", "in", u64v((uint64_t)i * 3));
    fx_log log = {0};
    fx_run(e, &log, 1, 10);
    assert_int_equal(fx_log_count(&log, BB_STEP_APP_EVENT), 100);
    for (int i = 0; i < 100; i++) {
        const fx_rec *r = fx_log_app(&log, "out", (size_t)i);
        assert_int_equal(r->exec, ids[i]); /* FIFO: executions finish in order */
        assert_int_equal(r->value->u.u64, (uint64_t)i * 3);
    }
    assert_int_equal(bb_engine_live_slots(e), 0);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_readiness_required_and_anyof(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "a,b,c", "both,first,thr");
    fx_op(m, f, FX_SYS, "Gate", "a,b", "both");           /* Required: a AND b */
    fx_op(m, f, FX_SYS, "Any", "a,b", "first");           /* AnyOf */
    bb_node *t = fx_op(m, f, FX_SYS, "Threshold", "a,b,c", "thr");
    fx_int(m, t, "n", 2);
    bb_engine *e = make(m, "Main", NULL);
    fx_log log = {0};
    /* only b: Any fires, Gate and Threshold do not */
    bb_value *v = u64v(5);
    bb_engine_input in = {.value = v};
    assert_int_equal(bb_engine_deliver_event(e, "Main", "b", &in, NULL, NULL), BB_OK);
    fx_run(e, &log, 1, 10);
    assert_non_null(fx_log_app(&log, "first", 0));
    assert_null(fx_log_app(&log, "both", 0));
    assert_null(fx_log_app(&log, "thr", 0));
    /* all three in one execution: Gate once, Any once, Threshold exactly once */
    bb_engine_input three[3] = {{.name = "a", .value = v}, {.name = "b", .value = v}, {.name = "c", .value = v}};
    assert_int_equal(bb_engine_invoke(e, "Main", three, 3, NULL, NULL), BB_OK);
    fx_run(e, &log, 1, 10);
    assert_int_equal(fx_log_count(&log, BB_STEP_APP_EVENT), 4);
    assert_non_null(fx_log_app(&log, "both", 0));
    assert_non_null(fx_log_app(&log, "thr", 0));
    assert_null(fx_log_app(&log, "thr", 1));
    assert_non_null(fx_log_app(&log, "first", 1));
    bb_value_unref(v);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_function_call_splice(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *main = fx_fn(m, "Main", "x", "y,z");
    fx_op(m, main, "ai.bytesandbrains.module", "Sub", "x", "s1");
    fx_op(m, main, "ai.bytesandbrains.module", "Sub", "s1", "y");
    fx_op(m, main, FX_SYS, "PassThrough", "s1", "z");
    bb_function *sub = bb_model_add_function(m, "ai.bytesandbrains.module", "Sub");
    bb_str_list_push(m->arena, &sub->inputs, "p");
    bb_str_list_push(m->arena, &sub->outputs, "q");
    fx_op(m, sub, FX_SYS, "PassThrough", "p", "q");
    /* an identical duplicate body dedupes (ODR) */
    bb_function *dup = bb_model_add_function(m, "ai.bytesandbrains.module", "Sub");
    bb_str_list_push(m->arena, &dup->inputs, "p");
    bb_str_list_push(m->arena, &dup->outputs, "q");
    fx_op(m, dup, FX_SYS, "PassThrough", "p", "q");
    bb_engine *e = make(m, "Main", NULL);
    bb_exec_id id = invoke1(e, "Main", "x", u64v(9));
    fx_log log = {0};
    fx_run(e, &log, 1, 10);
    const fx_rec *y = fx_log_app(&log, "y", 0), *z = fx_log_app(&log, "z", 0);
    assert_non_null(y);
    assert_non_null(z);
    assert_int_equal(y->value->u.u64, 9);
    assert_int_equal(y->exec, id); /* surfaces in the caller's execution */
    assert_int_equal(fx_log_count(&log, BB_STEP_APP_EVENT), 2);
    assert_int_equal(bb_engine_live_executions(e), 0);
    assert_int_equal(bb_engine_live_slots(e), 0);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_unresolved_fails_at_invoke(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x", "y");
    fx_op(m, f, "vendor.unknown", "Frobnicate", "x", "y");
    bb_engine *e = make(m, "Main", NULL); /* installs: nobody serves the domain */
    invoke1(e, "Main", "x", u64v(1));
    fx_log log = {0};
    fx_run(e, &log, 1, 10);
    const fx_rec *r = fx_log_nth(&log, BB_STEP_OP_FAILED, 0);
    assert_non_null(r);
    assert_string_equal(r->b, "Frobnicate");
    assert_non_null(strstr(r->c, "unresolved dispatch for vendor.unknown::Frobnicate"));
    assert_null(fx_log_app(&log, "y", 0));
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_op_budget(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    fx_chain(m, "Main", 100);
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    cfg.cycle_op_budget = 30;
    bb_engine *e = make(m, "Main", &cfg);
    invoke1(e, "Main", "in", u64v(3));
    bb_steps s;
    bb_steps_init(&s);
    bb_engine_poll(e, 1, &s);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.v[0].kind, BB_STEP_CYCLE_BUDGET_EXCEEDED);
    assert_int_equal(s.v[0].u.budget.ops, 30);
    assert_int_equal(bb_engine_next_deadline(e), 0);
    int polls = 1;
    bool done = false;
    while (!done && polls < 10) {
        bb_engine_poll(e, 1, &s);
        polls++;
        for (size_t i = 0; i < s.n; i++)
            done |= s.v[i].kind == BB_STEP_APP_EVENT;
    }
    assert_true(done);
    assert_int_equal(polls, 4);
    assert_int_equal(bb_engine_counter(e, "cycle.budget_exceeded"), 3);
    bb_steps_free(&s);
    bb_engine_free(e);
    bb_model_free(m);
}

/* ---- async ---------------------------------------------------------------------- */

static bb_model *async_model(int64_t deadline_ns)
{
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x", "y");
    bb_node *n = fx_op(m, f, "test.echo", "Later", "x", "l");
    fx_meta(m, n, "ai.bytesandbrains.slot", "echo");
    if (deadline_ns)
        fx_int(m, n, "deadline_ns", deadline_ns);
    fx_op(m, f, FX_SYS, "PassThrough", "l", "y");
    fx_bind(m, "Main", "echo", "Protocol|test::Echo|1");
    return m;
}

typedef struct wake_count {
    int n;
} wake_count;

static void on_wake(void *ud) { __atomic_add_fetch(&((wake_count *)ud)->n, 1, __ATOMIC_SEQ_CST); }

typedef struct thread_arg {
    bb_completion *c;
    bb_value *v;
    int rc1, rc2;
} thread_arg;

static void *complete_thread(void *p)
{
    thread_arg *a = p;
    bb_value *v = a->v;
    a->rc1 = bb_complete_ok(a->c, &v, 1);
    bb_value *v2 = bb_value_u64(&BB_TYPE_U64, 1);
    a->rc2 = bb_complete_ok(a->c, &v2, 1); /* double completion */
    return NULL;
}

static void test_async_cross_thread_completion(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = async_model(0);
    bb_engine *e = make(m, "Main", NULL);
    wake_count wc = {0};
    bb_engine_set_wake(e, on_wake, &wc);
    bb_exec_id id = invoke1(e, "Main", "x", u64v(11));
    assert_int_equal(wc.n, 1);
    fx_log log = {0};
    fx_run(e, &log, 1, 10);
    assert_int_equal(bb_engine_pending_async_count(e), 1);
    assert_int_equal(bb_engine_live_executions(e), 1);
    assert_int_equal(bb_engine_next_deadline(e), UINT64_MAX);
    fx_echo *echo = fx_echo_at(0);
    assert_int_equal(echo->n_pending, 1);
    thread_arg a = {.c = echo->pending[0], .v = u64v(77)};
    pthread_t th;
    pthread_create(&th, NULL, complete_thread, &a);
    pthread_join(th, NULL);
    assert_int_equal(a.rc1, BB_OK);
    assert_int_equal(a.rc2, BB_ESTATE);
    assert_int_equal(wc.n, 2);
    assert_int_equal(bb_engine_next_deadline(e), 0);
    fx_run(e, &log, 2, 10);
    const fx_rec *r = fx_log_app(&log, "y", 0);
    assert_non_null(r);
    assert_int_equal(r->exec, id);
    assert_int_equal(r->value->u.u64, 77);
    assert_int_equal(bb_engine_pending_async_count(e), 0);
    assert_int_equal(bb_engine_live_executions(e), 0);
    assert_int_equal(bb_engine_live_slots(e), 0);
    /* a late duplicate on the engine thread is refused too */
    bb_value *late = u64v(5);
    assert_int_equal(bb_complete_ok(echo->pending[0], &late, 1), BB_ESTATE);
    bb_value_unref(echo->pending_in[0]);
    echo->n_pending = 0;
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_async_in_cycle_completion(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x,go", "y,flushed");
    bb_node *n = fx_op(m, f, "test.echo", "Later", "x", "y");
    fx_meta(m, n, "ai.bytesandbrains.slot", "echo");
    n = fx_op(m, f, "test.echo", "Flush", "go", "flushed");
    fx_meta(m, n, "ai.bytesandbrains.slot", "echo");
    fx_bind(m, "Main", "echo", "Protocol|test::Echo|1");
    bb_engine *e = make(m, "Main", NULL);
    invoke1(e, "Main", "x", u64v(21));
    fx_log log = {0};
    fx_run(e, &log, 1, 10);
    assert_int_equal(bb_engine_pending_async_count(e), 1);
    /* Flush completes the parked handle from inside a dispatch: phase 5 */
    bb_steps s;
    bb_steps_init(&s);
    invoke1(e, "Main", "go", u64v(1));
    bb_engine_poll(e, 2, &s);
    bool got = false;
    for (size_t i = 0; i < s.n; i++)
        got |= s.v[i].kind == BB_STEP_APP_EVENT && strcmp(s.v[i].u.app.topic, "y") == 0 &&
               s.v[i].u.app.value->u.u64 == 21;
    assert_true(got);
    assert_int_equal(bb_engine_pending_async_count(e), 0);
    bb_steps_free(&s);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_async_deadline_drops_op(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = async_model(1000);
    bb_engine *e = make(m, "Main", NULL);
    invoke1(e, "Main", "x", u64v(1));
    fx_log log = {0};
    fx_run(e, &log, 100, 10);
    assert_int_equal(bb_engine_next_deadline(e), 1100);
    fx_run(e, &log, 1100, 10);
    const fx_rec *r = fx_log_nth(&log, BB_STEP_OP_FAILED, 0);
    assert_non_null(r);
    assert_non_null(strstr(r->c, "timed out"));
    assert_int_equal(bb_engine_pending_async_count(e), 0);
    assert_int_equal(bb_engine_live_slots(e), 0);
    fx_echo *echo = fx_echo_at(0);
    bb_value *late = u64v(5);
    assert_int_equal(bb_complete_ok(echo->pending[0], &late, 1), BB_ESTATE);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_component_failure_stops_downstream(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x", "y");
    bb_node *n = fx_op(m, f, "test.echo", "Fail", "x", "f");
    fx_meta(m, n, "ai.bytesandbrains.slot", "echo");
    fx_op(m, f, FX_SYS, "PassThrough", "f", "y");
    fx_bind(m, "Main", "echo", "Protocol|test::Echo|1");
    bb_engine *e = make(m, "Main", NULL);
    invoke1(e, "Main", "x", u64v(1));
    fx_log log = {0};
    fx_run(e, &log, 1, 10);
    const fx_rec *r = fx_log_nth(&log, BB_STEP_OP_FAILED, 0);
    assert_non_null(r);
    assert_string_equal(r->d, "test.echo");
    assert_non_null(strstr(r->c, "echo failed on purpose"));
    assert_null(fx_log_app(&log, "y", 0));
    assert_int_equal(bb_engine_live_slots(e), 0);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_dependency_call(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "a,b", "y");
    bb_node *n = fx_op(m, f, "test.dep", "Plus", "a,b", "y");
    fx_meta(m, n, "ai.bytesandbrains.slot", "dep");
    fx_bind(m, "Main", "dep", "Protocol|test::Dep|2");
    fx_bind(m, "Main", "compute", "Backend|test::Backend|1");
    bb_engine *e = make(m, "Main", NULL);
    float a[2] = {1, 2}, b[2] = {10, 20}, want[2] = {11, 22};
    bb_value *va = fx_f32(a, 2), *vb = fx_f32(b, 2);
    bb_engine_input in[2] = {{.name = "a", .value = va}, {.name = "b", .value = vb}};
    assert_int_equal(bb_engine_invoke(e, "Main", in, 2, NULL, NULL), BB_OK);
    bb_value_unref(va);
    bb_value_unref(vb);
    fx_log log = {0};
    fx_run(e, &log, 1, 10);
    const fx_rec *r = fx_log_app(&log, "y", 0);
    assert_non_null(r);
    assert_true(fx_f32_eq(r->value, want, 2));
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

/* ---- tracing ---------------------------------------------------------------------------- */

typedef struct trace_count {
    int invoke, poll, other;
} trace_count;

static void on_trace(void *ud, const bb_trace_event *ev)
{
    trace_count *t = ud;
    if (ev->cat == BB_TRACE_INVOKE) {
        t->invoke++;
        assert_non_null(ev->op_type);
    } else if (ev->cat == BB_TRACE_POLL) {
        t->poll++;
    } else {
        t->other++;
    }
}

static void test_tracing_filter(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    fx_chain(m, "Main", 4);
    bb_engine *e = make(m, "Main", NULL);
    trace_count tc = {0};
    bb_engine_set_trace(e, on_trace, &tc);
    invoke1(e, "Main", "in", u64v(1));
    fx_run(e, NULL, 1, 5);
    assert_int_equal(tc.invoke + tc.poll + tc.other, 0); /* filter off by default */
    assert_int_equal(bb_engine_set_trace_filter(e, "invoke", NULL), BB_OK);
    invoke1(e, "Main", "in", u64v(1));
    fx_run(e, NULL, 1, 5);
    assert_int_equal(tc.invoke, 4);
    assert_int_equal(tc.poll, 0);
    assert_int_equal(bb_engine_set_trace_filter(e, "bb::engine=debug,poll", NULL), BB_EINVAL);
    assert_int_equal(bb_engine_set_trace_filter(e, "poll, invoke", NULL), BB_OK);
    assert_int_equal(bb_engine_trace_mask(e), BB_TRACE_POLL | BB_TRACE_INVOKE);
    invoke1(e, "Main", "in", u64v(1));
    fx_run(e, NULL, 1, 5);
    assert_true(tc.poll > 0);
    assert_int_equal(bb_engine_set_trace_filter(e, "off", NULL), BB_OK);
    assert_int_equal(bb_engine_trace_mask(e), 0);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_op_steps_opt_in(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x,t", "y,tt");
    bb_node *n = fx_op(m, f, "test.echo", "Later", "x", "l");
    fx_meta(m, n, "ai.bytesandbrains.slot", "echo");
    fx_op(m, f, FX_SYS, "PassThrough", "l", "y"); /* a value: OpCompleted */
    fx_op(m, f, FX_SYS, "OnTrigger", "t", "tt");  /* only a Trigger: OpTrigger */
    n = fx_op(m, f, FX_SYS, "IncrMetric", "t", ""); /* nothing downstream: OpSink */
    fx_str(m, n, "name", "m");
    fx_bind(m, "Main", "echo", "Protocol|test::Echo|1");
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    cfg.emit_op_steps = true;
    bb_engine *e = make(m, "Main", &cfg);
    invoke1(e, "Main", "x", u64v(1));
    fx_log log = {0};
    fx_run(e, &log, 1, 5);
    assert_int_equal(fx_log_count(&log, BB_STEP_ASYNC_SUSPENDED), 1);
    fx_echo *echo = fx_echo_at(0);
    bb_value *v = u64v(2);
    assert_int_equal(bb_complete_ok(echo->pending[0], &v, 1), BB_OK);
    fx_run(e, &log, 2, 5);
    assert_int_equal(fx_log_count(&log, BB_STEP_OP_COMPLETED), 1); /* the PassThrough */
    assert_int_equal(fx_log_count(&log, BB_STEP_OP_TRIGGER), 0);
    invoke1(e, "Main", "t", bb_value_trigger());
    fx_run(e, &log, 3, 5);
    assert_int_equal(fx_log_count(&log, BB_STEP_OP_TRIGGER), 1);
    assert_int_equal(fx_log_count(&log, BB_STEP_OP_SINK), 1);
    assert_int_equal(fx_log_count(&log, BB_STEP_OP_COMPLETED), 1);
    assert_string_equal(bb_step_kind_name(BB_STEP_OP_SINK), "OpSink");
    assert_string_equal(bb_step_kind_name(BB_STEP_OP_TRIGGER), "OpTrigger");
    /* without the option none of the op-level steps appear */
    bb_engine *quiet = make(m, "Main", NULL);
    invoke1(quiet, "Main", "t", bb_value_trigger());
    fx_log ql = {0};
    fx_run(quiet, &ql, 1, 5);
    assert_int_equal(fx_log_count(&ql, BB_STEP_APP_EVENT), 1); /* tt */
    assert_int_equal(fx_log_count(&ql, BB_STEP_OP_TRIGGER) + fx_log_count(&ql, BB_STEP_OP_SINK) +
                         fx_log_count(&ql, BB_STEP_OP_COMPLETED), 0);
    fx_log_free(&ql);
    bb_engine_free(quiet);
    bb_value_unref(echo->pending_in[0]);
    echo->n_pending = 0;
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

/* Every entry point opens a span: invoke / deliver_event, inbound envelopes
 * and their fills, lifecycle phases, completions, bootstrap. */
typedef struct span_names {
    char seen[16][24];
    int n;
} span_names;

static void on_span(void *ud, const bb_trace_event *ev)
{
    span_names *s = ud;
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->seen[i], ev->name) == 0)
            return;
    if (s->n < 16)
        snprintf(s->seen[s->n++], sizeof s->seen[0], "%s", ev->name);
}

static bool saw(const span_names *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->seen[i], name) == 0)
            return true;
    return false;
}

static void test_entry_point_spans(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = async_model(0);
    bb_function *f = m->functions.v[0];
    fx_recv(m, f, 77, "tick", NULL, NULL);
    bb_node *n = fx_op(m, f, FX_SYS, "LifecyclePhase", "", "shut");
    fx_int(m, n, "phase", 1);
    bb_engine *e = make(m, "Main", NULL);
    span_names sn = {0};
    bb_engine_set_trace(e, on_span, &sn);
    assert_int_equal(bb_engine_set_trace_filter(e, "event,inbound,bootstrap", NULL), BB_OK);
    invoke1(e, "Main", "x", u64v(1));
    bb_value *t = bb_value_trigger();
    bb_engine_input in = {.value = t};
    assert_int_equal(bb_engine_deliver_event(e, "Main", "x", &in, NULL, NULL), BB_OK);
    bb_value_unref(t);
    size_t len;
    uint8_t *env = fx_envelope_u64(77, 1, 1, 0, &len);
    bb_peerid p = fx_peer(4);
    assert_int_equal(bb_engine_deliver_envelope(e, &p, NULL, env, len, NULL), BB_OK);
    free(env);
    assert_int_equal(bb_engine_fire_lifecycle(e, 1, NULL), BB_OK);
    fx_run(e, NULL, 1, 5);
    fx_echo *echo = fx_echo_at(0);
    for (int i = 0; i < echo->n_pending; i++) {
        bb_value *v = u64v(2);
        assert_int_equal(bb_complete_ok(echo->pending[i], &v, 1), BB_OK);
        bb_value_unref(echo->pending_in[i]);
    }
    echo->n_pending = 0;
    fx_run(e, NULL, 2, 5);
    const char *want[] = {"invoke", "deliver_event", "deliver_inbound", "deliver_fill",
                          "fire_lifecycle", "handle_completion"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!saw(&sn, want[i]))
            fail_msg("no '%s' span", want[i]);
    assert_false(saw(&sn, "node.poll")); /* poll spans are filtered out */
    bb_engine_free(e);
    bb_model_free(m);
}

/* ---- the component host API: timers, the worker pool, address-book views ------------------ */

typedef struct pool {
    bb_engine *e;
    pthread_t th[4];
    int n;
} pool;

typedef struct pool_job {
    pool *p;
    void (*work)(void *);
    void *arg;
    uint64_t token;
} pool_job;

static void *pool_thread(void *a)
{
    pool_job *j = a;
    j->work(j->arg);
    assert_int_equal(bb_engine_work_done(j->p->e, j->token), BB_OK);
    free(j);
    return NULL;
}

static int pool_submit(void *ud, void (*work)(void *), void *arg, uint64_t token)
{
    pool *p = ud;
    pool_job *j = malloc(sizeof *j);
    if (!j || p->n == 4) {
        free(j);
        return BB_EFULL; /* the engine then runs the work inline */
    }
    *j = (pool_job){p, work, arg, token};
    return pthread_create(&p->th[p->n++], NULL, pool_thread, j) ? BB_ERUNTIME : BB_OK;
}

static void test_component_timer_worker_pool_and_views(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x,n,p", "y,w,peers,addrs");
    const char *ops[4][3] = {{"Wait", "x", "y"}, {"Work", "n", "w"}, {"Peers", "x", "peers"},
                             {"Addrs", "p", "addrs"}};
    for (int i = 0; i < 4; i++) {
        bb_node *n = fx_op(m, f, "test.echo", ops[i][0], ops[i][1], ops[i][2]);
        fx_meta(m, n, "ai.bytesandbrains.slot", "echo");
    }
    fx_bind(m, "Main", "echo", "Protocol|test::Echo|1");
    pool pl = {0};
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    cfg.submit_work = pool_submit;
    cfg.submit_work_ud = &pl;
    bb_engine *e = make(m, "Main", &cfg);
    pl.e = e;
    bb_peerid p5 = fx_peer(5), p6 = fx_peer(6);
    uint8_t a5[32];
    bb_engine_addr ad5 = {a5, fx_addr(9005, a5)};
    assert_int_equal(bb_engine_add_peer(e, &p5, &ad5, 1, NULL), BB_OK);
    bb_value *x = u64v(3), *n = u64v(21), *pv = bb_value_bytes(&BB_TYPE_PEER_ID, p5.bytes, p5.len);
    bb_engine_input in[3] = {{.name = "x", .value = x}, {.name = "n", .value = n},
                             {.name = "p", .value = pv}};
    assert_int_equal(bb_engine_invoke(e, "Main", in, 3, NULL, NULL), BB_OK);
    fx_log log = {0};
    bb_steps st;
    bb_steps_init(&st);
    bb_engine_poll(e, 1, &st); /* one poll: the worker's return waits for the next */
    for (size_t i = 0; i < st.n; i++)
        fx_log_add(&log, &st.v[i]);
    bb_steps_free(&st);
    /* views answer inline */
    const fx_rec *r = fx_log_app(&log, "peers", 0);
    assert_non_null(r);
    assert_int_equal(r->value->u.list.n, 1);
    assert_memory_equal(r->value->u.list.items[0]->u.bytes.data, p5.bytes, p5.len);
    r = fx_log_app(&log, "addrs", 0);
    assert_non_null(r);
    assert_int_equal(r->value->u.list.n, 1);
    assert_memory_equal(r->value->u.list.items[0]->u.bytes.data, a5, ad5.len);
    assert_int_equal(bb_engine_pending_async_count(e), 2);
    /* the worker finishes: its done() runs on the engine thread at the next poll */
    for (int i = 0; i < pl.n; i++)
        pthread_join(pl.th[i], NULL);
    assert_int_equal(pl.n, 1);
    assert_int_equal(bb_engine_next_deadline(e), 0);
    fx_run(e, &log, 2, 5);
    r = fx_log_app(&log, "w", 0);
    assert_non_null(r);
    assert_int_equal(r->value->u.u64, 42);
    assert_null(fx_log_app(&log, "y", 0));
    assert_int_equal(bb_engine_next_deadline(e), 101);
    /* the component timer fires at +100 ns and completes Wait in the same cycle */
    fx_run(e, &log, 101, 5);
    r = fx_log_app(&log, "y", 0);
    assert_non_null(r);
    assert_int_equal(r->value->u.u64, 3);
    assert_int_equal(fx_echo_by_slot("echo")->timers_fired, 1);
    assert_int_equal(bb_engine_live_executions(e), 0);
    /* a peer the book does not know has no addresses */
    bb_value *q = bb_value_bytes(&BB_TYPE_PEER_ID, p6.bytes, p6.len);
    bb_engine_input one = {.value = q};
    assert_int_equal(bb_engine_deliver_event(e, "Main", "p", &one, NULL, NULL), BB_OK);
    fx_run(e, &log, 102, 5);
    assert_non_null(strstr(fx_log_nth(&log, BB_STEP_OP_FAILED, 0)->c, "no addresses"));
    bb_value_unref(q);
    bb_value_unref(x);
    bb_value_unref(n);
    bb_value_unref(pv);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

/* A host cache of one entry, as bbsim keeps one per process. */
typedef struct one_cache {
    char key[64];
    bb_value *v;
    int gets, puts;
} one_cache;

static bb_value *cache_get(void *ud, const char *key)
{
    one_cache *c = ud;
    c->gets++;
    return c->v && strcmp(c->key, key) == 0 ? bb_value_ref(c->v) : NULL;
}

static bb_value *cache_put(void *ud, const char *key, bb_value *v)
{
    one_cache *c = ud;
    c->puts++;
    if (!c->v) {
        snprintf(c->key, sizeof c->key, "%s", key);
        c->v = bb_value_ref(v);
    }
    return bb_value_ref(strcmp(c->key, key) == 0 ? c->v : v);
}

/* Share(x) through an engine with the host cache (or without: NULL). */
static uint64_t shared_by(one_cache *c, uint64_t x)
{
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x", "y");
    fx_meta(m, fx_op(m, f, "test.echo", "Share", "x", "y"), "ai.bytesandbrains.slot", "echo");
    fx_bind(m, "Main", "echo", "Protocol|test::Echo|1");
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    if (c) {
        cfg.shared_get = cache_get;
        cfg.shared_put = cache_put;
        cfg.shared_ud = c;
    }
    bb_engine *e = make(m, "Main", &cfg);
    bb_value *xv = u64v(x);
    bb_engine_input in = {.name = "x", .value = xv};
    assert_int_equal(bb_engine_invoke(e, "Main", &in, 1, NULL, NULL), BB_OK);
    fx_log log = {0};
    fx_run(e, &log, 1, 5);
    const fx_rec *r = fx_log_app(&log, "y", 0);
    assert_non_null(r);
    uint64_t got = r->value->u.u64;
    bb_value_unref(xv);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
    return got;
}

/* ctx->shared_get / shared_put reach the host's cache: the second engine
 * gets the first one's value; without a cache put hands the value back. */
static void test_shared_cache_through_the_host(void **state)
{
    (void)state;
    fx_reset();
    one_cache c = {0};
    assert_int_equal(shared_by(&c, 3), 3);
    assert_int_equal(shared_by(&c, 4), 3); /* the first engine's, shared */
    assert_int_equal(c.gets, 2);
    assert_int_equal(c.puts, 1);
    assert_int_equal(shared_by(NULL, 5), 5);
    assert_int_equal(shared_by(NULL, 6), 6);
    bb_value_unref(c.v);
}

/* share_model: engines run the host's model itself (no clone); each still
 * works on its own, and freeing them leaves the model to its owner (ASan
 * would see a double free or a use after free). */
static void test_engines_share_the_model(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = fx_model();
    fx_chain(m, "Main", 3);
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    cfg.share_model = true;
    bb_engine *e[2] = {make(m, "Main", &cfg), make(m, "Main", &cfg)};
    size_t arena_before = bb_arena_used(m->arena);
    for (int i = 0; i < 2; i++) {
        invoke1(e[i], "Main", "in", u64v(40 + (uint64_t)i));
        fx_log log = {0};
        fx_run(e[i], &log, 1, 10);
        const fx_rec *r = fx_log_app(&log, "out", 0);
        assert_non_null(r);
        assert_int_equal(r->value->u.u64, 40 + (uint64_t)i);
        fx_log_free(&log);
    }
    assert_int_equal(bb_arena_used(m->arena), arena_before); /* nothing written into it */
    bb_engine_free(e[0]);
    bb_engine_free(e[1]);
    assert_int_equal(m->functions.n, 1);
    bb_model_free(m);
}

/* ---- the poll cycle: phases in order (ENGINE.md Part 7) ------------------------------------ */

#define MAX_SEEN 64
typedef struct phase_rec {
    const char *phases[MAX_SEEN]; /* POLL spans, in order */
    int n_phases;
    struct {
        char node[32];
        int phase; /* index into phases[] when the op ran */
        const char *concrete, *instance, *outcome;
        uint64_t duration;
    } ops[MAX_SEEN];
    int n_ops;
    uint64_t clock;
} phase_rec;

static void on_phase_trace(void *ud, const bb_trace_event *ev)
{
    phase_rec *p = ud;
    if (ev->cat == BB_TRACE_POLL && p->n_phases < MAX_SEEN) {
        p->phases[p->n_phases++] = ev->name;
    } else if (ev->cat == BB_TRACE_INVOKE && strcmp(ev->name, "invoke") == 0 && p->n_ops < MAX_SEEN) {
        assert_non_null(ev->phase);
        assert_string_equal(ev->phase, p->phases[p->n_phases - 1]);
        snprintf(p->ops[p->n_ops].node, sizeof p->ops[p->n_ops].node, "%s", ev->node);
        p->ops[p->n_ops].phase = p->n_phases - 1;
        p->ops[p->n_ops].concrete = ev->concrete_type;
        p->ops[p->n_ops].instance = ev->instance;
        p->ops[p->n_ops].outcome = ev->detail;
        p->ops[p->n_ops].duration = ev->duration_ns;
        p->n_ops++;
    }
}

static uint64_t fake_clock(void *ud)
{
    phase_rec *p = ud;
    return p->clock += 5;
}

static int op_phase(const phase_rec *p, const char *node)
{
    for (int i = 0; i < p->n_ops; i++)
        if (strcmp(p->ops[i].node, node) == 0)
            return p->ops[i].phase;
    return -1;
}

static bb_node *named(bb_model *m, bb_function *f, const char *dom, const char *op, const char *in,
                      const char *out, const char *name)
{
    bb_node *n = fx_op(m, f, dom, op, in, out);
    n->name = bb_arena_strdup(m->arena, name);
    return n;
}

/* One poll does every phase's work: the ingress seeds an execution whose ops
 * (first frontier walk) fail a component op (-> bus -> EventSource), arm a
 * zero-delay After (-> timer), complete a parked handle from inside a
 * dispatch (-> pending completions) and send an envelope (-> outbound). The
 * follow-up ops run in the second frontier walk and the SendEnvelope step
 * comes last. */
static void test_poll_phases_in_order(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x,peers", "");
    bb_node *n = named(m, f, "test.echo", "Later", "x", "parked", "later");
    fx_meta(m, n, "ai.bytesandbrains.slot", "echo");
    n = named(m, f, "test.echo", "Flush", "x", "", "flush");
    fx_meta(m, n, "ai.bytesandbrains.slot", "echo");
    named(m, f, FX_SYS, "PassThrough", "parked", "after_completion", "on_completion");
    n = named(m, f, "test.echo", "Fail", "x", "", "fail");
    fx_meta(m, n, "ai.bytesandbrains.slot", "echo");
    n = named(m, f, FX_SYS, "EventSource", "", "ev", "events");
    fx_int(m, n, "kind", BB_EVENT_OP_FAILURE);
    named(m, f, FX_SYS, "PassThrough", "ev", "after_bus", "on_bus");
    n = named(m, f, FX_SYS, "After", "x", "woke", "after");
    fx_int(m, n, "delay_ns", 0);
    named(m, f, FX_SYS, "PassThrough", "woke", "after_timer", "on_timer");
    n = named(m, f, FX_WIRE, "Send", "x,peers", "", "send");
    fx_meta(m, n, "ai.bytesandbrains.wire_dest_site", "77");
    fx_bind(m, "Main", "echo", "Protocol|test::Echo|1");
    bb_engine *e = make(m, "Main", NULL);
    bb_peerid p2 = fx_peer(2);
    uint8_t a[32];
    bb_engine_addr addr = {a, fx_addr(7002, a)};
    assert_int_equal(bb_engine_add_peer(e, &p2, &addr, 1, NULL), BB_OK);
    phase_rec pr = {0};
    bb_engine_set_trace(e, on_phase_trace, &pr);
    bb_engine_set_trace_clock(e, fake_clock, &pr);
    assert_int_equal(bb_engine_set_trace_filter(e, "poll,invoke", NULL), BB_OK);
    bb_value *peers[1] = {bb_value_bytes(&BB_TYPE_PEER_ID, p2.bytes, p2.len)};
    bb_value *pv = bb_value_list(&BB_TYPE_PEER_ID_VEC, peers, 1);
    bb_engine_input in[2] = {{.name = "x", .value = NULL}, {.name = "peers", .value = pv}};
    in[0].value = u64v(4);
    assert_int_equal(bb_engine_invoke(e, "Main", in, 2, NULL, NULL), BB_OK);
    bb_value_unref((bb_value *)in[0].value);
    bb_value_unref(pv);
    bb_steps s;
    bb_steps_init(&s);
    assert_int_equal(bb_engine_poll(e, 10, &s), BB_OK);
    static const char *const want[] = {
        "node.poll", "engine.drain_ingress", "engine.drain_frontier", "engine.route_bus_events",
        "engine.poll_timers", "engine.drain_pending_completions", "engine.drain_frontier",
        "engine.drain_outbound"};
    assert_int_equal(pr.n_phases, 8);
    for (int i = 0; i < 8; i++)
        assert_string_equal(pr.phases[i], want[i]);
    /* phase 2 ran the seeded ops; 6 ran what phases 3-5 made ready */
    const char *first[] = {"later", "flush", "fail", "after", "send"};
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(op_phase(&pr, first[i]), 2);
    assert_int_equal(op_phase(&pr, "on_bus"), 6);
    assert_int_equal(op_phase(&pr, "on_timer"), 6);
    assert_int_equal(op_phase(&pr, "on_completion"), 6);
    /* the component op's span names its type and instance, timed by the clock */
    for (int i = 0; i < pr.n_ops; i++) {
        if (strcmp(pr.ops[i].node, "later") == 0) {
            assert_string_equal(pr.ops[i].concrete, "test::Echo");
            assert_string_equal(pr.ops[i].instance, "echo");
            assert_string_equal(pr.ops[i].outcome, "suspended");
            assert_int_equal(pr.ops[i].duration, 5);
        } else if (strcmp(pr.ops[i].node, "fail") == 0) {
            assert_string_equal(pr.ops[i].outcome, "failed");
        } else if (strcmp(pr.ops[i].node, "on_bus") == 0) {
            assert_null(pr.ops[i].concrete);
        }
    }
    /* the failure surfaced in phase 2, the envelope in phase 7 */
    assert_int_equal(s.n, 2);
    assert_int_equal(s.v[0].kind, BB_STEP_OP_FAILED);
    assert_int_equal(s.v[1].kind, BB_STEP_SEND_ENVELOPE);
    assert_int_equal(bb_engine_live_executions(e), 0);
    assert_int_equal(bb_engine_live_slots(e), 0);
    bb_steps_free(&s);
    bb_engine_free(e);
    bb_model_free(m);
}


/* An Interval tick runs the zero-input ops connected to it (a round's
 * Model.Params), not those of an unrelated part of the graph. */
static void test_event_source_runs_connected_sources(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "", "");
    bb_node *n = fx_op(m, f, FX_SYS, "Interval", "", "tick");
    fx_int(m, n, "period_ns", 100);
    n = fx_op(m, f, "test.echo", "Count", "", "c");        /* connected via Gate */
    fx_meta(m, n, "ai.bytesandbrains.slot", "echo");
    fx_op(m, f, FX_SYS, "Gate", "c,tick", "gated");
    n = fx_op(m, f, FX_SYS, "AppEmit", "gated", "");
    fx_str(m, n, "name", "round");
    n = fx_op(m, f, "test.echo", "Count", "", "other");    /* unrelated */
    fx_meta(m, n, "ai.bytesandbrains.slot", "echo");
    n = fx_op(m, f, FX_SYS, "AppEmit", "other", "");
    fx_str(m, n, "name", "other");
    fx_bind(m, "Main", "echo", "Protocol|test::Echo|1");
    bb_engine *e = make(m, "Main", NULL);
    fx_log log = {0};
    fx_run(e, &log, 1000, 5); /* arms the timer */
    fx_run(e, &log, 1100, 5);
    fx_run(e, &log, 1200, 5);
    assert_int_equal(fx_log_count(&log, BB_STEP_APP_EVENT), 2);
    assert_non_null(fx_log_app(&log, "round", 0));
    assert_non_null(fx_log_app(&log, "round", 1));
    assert_null(fx_log_app(&log, "other", 0));
    assert_int_equal(fx_echo_at(0)->calls, 2);
    assert_int_equal(bb_engine_live_executions(e), 0);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

/* Complete echo's pending calls [from, to) with 100 + their index. */
static void complete_pending(fx_echo *echo, int from, int to)
{
    for (int i = from; i < to; i++) {
        bb_value *v = u64v(100 + (uint64_t)i);
        assert_int_equal(bb_complete_ok(echo->pending[i], &v, 1), BB_OK);
    }
}

/* Frames of finished executions are pooled while others run, and every pool
 * shrinks back to one frame when the last execution ends (a burst gives its
 * memory back). */
static void test_frame_pools_shrink_when_idle(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = async_model(0);
    bb_engine *e = make(m, "Main", NULL);
    fx_log log = {0};
    for (uint64_t i = 0; i < 10; i++)
        invoke1(e, "Main", "x", u64v(i));
    fx_run(e, &log, 1, 10);
    fx_echo *echo = fx_echo_at(0);
    assert_int_equal(echo->n_pending, 10);
    assert_int_equal(bb_engine_live_executions(e), 10);
    complete_pending(echo, 0, 6); /* six finish, four still run */
    fx_run(e, &log, 2, 10);
    assert_int_equal(bb_engine_live_executions(e), 4);
    assert_int_equal(bb_engine_counter(e, "frames.pooled_extra"), 5); /* 6 pooled, 1 kept */
    complete_pending(echo, 6, 10);
    fx_run(e, &log, 3, 10);
    assert_int_equal(bb_engine_live_executions(e), 0);
    assert_int_equal(bb_engine_counter(e, "frames.pooled_extra"), 0);
    assert_int_equal(fx_log_count(&log, BB_STEP_APP_EVENT), 10);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_invoke),
        cmocka_unit_test(test_invoke_bytes_decoded_by_type),
        cmocka_unit_test(test_concurrent_executions_isolated),
        cmocka_unit_test(test_readiness_required_and_anyof),
        cmocka_unit_test(test_function_call_splice),
        cmocka_unit_test(test_unresolved_fails_at_invoke),
        cmocka_unit_test(test_op_budget),
        cmocka_unit_test(test_async_cross_thread_completion),
        cmocka_unit_test(test_async_in_cycle_completion),
        cmocka_unit_test(test_async_deadline_drops_op),
        cmocka_unit_test(test_component_failure_stops_downstream),
        cmocka_unit_test(test_dependency_call),
        cmocka_unit_test(test_component_timer_worker_pool_and_views),
        cmocka_unit_test(test_shared_cache_through_the_host),
        cmocka_unit_test(test_engines_share_the_model),
        cmocka_unit_test(test_tracing_filter),
        cmocka_unit_test(test_entry_point_spans),
        cmocka_unit_test(test_op_steps_opt_in),
        cmocka_unit_test(test_poll_phases_in_order),
        cmocka_unit_test(test_event_source_runs_connected_sources),
        cmocka_unit_test(test_frame_pools_shrink_when_idle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
