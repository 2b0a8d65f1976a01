/*
 * test_engine_caps.c — backpressure and capacity (ENGINE.md Part 16):
 * ingress capacity + drop counter, bus drop-oldest, per-item caps on events,
 * invocations and completions, the ingress byte budget (charged before
 * allocation, released when slots are freed), max_pending_async, and the
 * default / edge presets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/engine_fixtures.h"

static bb_engine *install(bb_model *m, const bb_engine_config *cfg)
{
    bb_engine *e = fx_engine(1, 7001, cfg);
    bb_error err = {0};
    if (fx_install(e, m, "Main", &err))
        fail_msg("%s", err.msg);
    return e;
}

static void test_presets(void **state)
{
    (void)state;
    bb_engine_caps d, e;
    bb_engine_caps_default(&d);
    bb_engine_caps_edge(&e);
    assert_int_equal(d.bus_capacity, 1024);
    assert_int_equal(d.ingress_capacity, 4096);
    assert_int_equal(d.ingress_byte_budget, 256u << 20);
    assert_int_equal(d.max_app_event_bytes, 1u << 20);
    assert_int_equal(d.max_invoke_inputs, 100);
    assert_int_equal(d.max_invoke_bytes, 10u << 20);
    assert_int_equal(d.max_completion_result_bytes, 4u << 20);
    assert_int_equal(d.dedup_window, 8192);
    assert_int_equal(d.peer_failure_threshold, 5);
    assert_int_equal(d.backoff_base_ns, 10000000ULL);
    assert_int_equal(d.backoff_max_ns, 60000000000ULL);
    assert_int_equal(e.ingress_byte_budget, 8u << 20);
    assert_int_equal(e.max_app_event_bytes, 64u << 10);
    assert_int_equal(e.max_invoke_inputs, 16);
    assert_int_equal(e.max_invoke_bytes, 256u << 10);
    assert_int_equal(e.max_completion_result_bytes, 64u << 10);
}

static void test_ingress_capacity(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    fx_chain(m, "Main", 1);
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    cfg.caps.ingress_capacity = 4;
    bb_engine *e = install(m, &cfg);
    bb_value *v = bb_value_u64(&BB_TYPE_U64, 1);
    bb_engine_input in = {.name = "in", .value = v};
    for (int i = 0; i < 4; i++)
        assert_int_equal(bb_engine_invoke(e, "Main", &in, 1, NULL, NULL), BB_OK);
    bb_error err = {0};
    assert_int_equal(bb_engine_invoke(e, "Main", &in, 1, NULL, &err), BB_EFULL);
    assert_int_equal(bb_engine_counter(e, "ingress.dropped"), 1);
    fx_log log = {0};
    fx_run(e, &log, 1, 5);
    assert_int_equal(fx_log_count(&log, BB_STEP_APP_EVENT), 4);
    const fx_rec *r = fx_log_infra(&log, BB_INFRA_INGRESS_DROPPED, -1);
    assert_non_null(r);
    assert_int_equal(r->count, 1);
    /* room again after the drain */
    assert_int_equal(bb_engine_invoke(e, "Main", &in, 1, NULL, NULL), BB_OK);
    bb_value_unref(v);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_bus_drop_oldest(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x", "");
    bb_node *t = fx_op(m, f, FX_SYS, "Tee", "x", "a,b,c");
    (void)t;
    const char *ins[3] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++) {
        bb_node *n = fx_op(m, f, "test.echo", "Fail", ins[i], "");
        fx_meta(m, n, "ai.bytesandbrains.slot", "echo");
    }
    bb_node *n = fx_op(m, f, FX_SYS, "EventSource", "", "ev");
    fx_int(m, n, "kind", 1);
    n = fx_op(m, f, FX_SYS, "AppNotify", "ev", "");
    fx_str(m, n, "name", "seen");
    fx_bind(m, "Main", "echo", "Protocol|test::Echo|1");
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    cfg.caps.bus_capacity = 2;
    bb_engine *e = install(m, &cfg);
    bb_value *v = bb_value_trigger();
    bb_engine_input in = {.name = "x", .value = v};
    assert_int_equal(bb_engine_invoke(e, "Main", &in, 1, NULL, NULL), BB_OK);
    bb_value_unref(v);
    fx_log log = {0};
    fx_run(e, &log, 1, 5);
    assert_int_equal(bb_engine_counter(e, "bus.dropped"), 1);
    assert_non_null(fx_log_infra(&log, BB_INFRA_BUS_DROPPED, -1));
    assert_int_equal(fx_log_count(&log, BB_STEP_APP_EVENT), 2);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_per_item_caps(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    fx_fn(m, "Main", "a,b,c", "");
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    cfg.caps.max_app_event_bytes = 16;
    cfg.caps.max_invoke_inputs = 2;
    cfg.caps.max_invoke_bytes = 24;
    bb_engine *e = install(m, &cfg);
    uint8_t buf[32] = {0};
    bb_engine_input big = {.bytes = buf, .len = 17};
    bb_error err = {0};
    assert_int_equal(bb_engine_deliver_event(e, "Main", "a", &big, NULL, &err), BB_ELIMIT);
    assert_non_null(strstr(err.msg, "OversizePayload"));
    big.len = 16;
    assert_int_equal(bb_engine_deliver_event(e, "Main", "a", &big, NULL, &err), BB_OK);
    bb_engine_input three[3] = {{.name = "a", .bytes = buf, .len = 1},
                                {.name = "b", .bytes = buf, .len = 1},
                                {.name = "c", .bytes = buf, .len = 1}};
    assert_int_equal(bb_engine_invoke(e, "Main", three, 3, NULL, &err), BB_ELIMIT);
    assert_non_null(strstr(err.msg, "TooManyInputs"));
    three[0].len = 20;
    three[1].len = 5;
    assert_int_equal(bb_engine_invoke(e, "Main", three, 2, NULL, &err), BB_ELIMIT);
    three[0].len = 19;
    assert_int_equal(bb_engine_invoke(e, "Main", three, 2, NULL, &err), BB_OK);
    fx_log log = {0};
    fx_run(e, &log, 1, 5);
    assert_non_null(fx_log_infra(&log, BB_INFRA_APP_INGRESS_ERROR, BB_APP_INGRESS_PER_ITEM_CAP_EXCEEDED));
    assert_non_null(fx_log_infra(&log, BB_INFRA_APP_INGRESS_ERROR, BB_APP_INGRESS_TOO_MANY_INPUTS));
    assert_int_equal(bb_engine_counter(e, "app_ingress.errors"), 3);
    assert_int_equal(bb_engine_counter(e, "ingress.bytes_in_flight"), 0);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static bb_model *later_model(void)
{
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x", "y");
    bb_node *n = fx_op(m, f, "test.echo", "Later", "x", "y");
    fx_meta(m, n, "ai.bytesandbrains.slot", "echo");
    fx_bind(m, "Main", "echo", "Protocol|test::Echo|1");
    return m;
}

static void test_byte_budget_released_on_gc(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = later_model();
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    cfg.caps.ingress_byte_budget = 100;
    bb_engine *e = install(m, &cfg);
    uint8_t buf[60] = {1};
    bb_engine_input in = {.name = "x", .bytes = buf, .len = 60};
    assert_int_equal(bb_engine_invoke(e, "Main", &in, 1, NULL, NULL), BB_OK);
    fx_log log = {0};
    fx_run(e, &log, 1, 5); /* the 60 bytes now sit in a parked execution's slot */
    assert_int_equal(bb_engine_counter(e, "ingress.bytes_in_flight"), 60);
    bb_error err = {0};
    assert_int_equal(bb_engine_invoke(e, "Main", &in, 1, NULL, &err), BB_EBUDGET);
    assert_non_null(strstr(err.msg, "BudgetExceeded"));
    fx_echo *echo = fx_echo_at(0);
    bb_value *r = bb_value_u64(&BB_TYPE_U64, 1);
    assert_int_equal(bb_complete_ok(echo->pending[0], &r, 1), BB_OK);
    bb_value_unref(echo->pending_in[0]);
    echo->n_pending = 0;
    fx_run(e, &log, 2, 5);
    assert_non_null(fx_log_app(&log, "y", 0));
    assert_non_null(fx_log_infra(&log, BB_INFRA_APP_INGRESS_ERROR, BB_APP_INGRESS_BUDGET_EXCEEDED));
    assert_int_equal(bb_engine_counter(e, "ingress.bytes_in_flight"), 0);
    assert_int_equal(bb_engine_invoke(e, "Main", &in, 1, NULL, NULL), BB_OK);
    fx_run(e, &log, 3, 5);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_completion_result_cap_and_pending_cap(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = later_model();
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    cfg.caps.max_completion_result_bytes = 16;
    cfg.caps.max_pending_async = 1;
    bb_engine *e = install(m, &cfg);
    bb_value *v = bb_value_u64(&BB_TYPE_U64, 1);
    bb_engine_input in = {.name = "x", .value = v};
    assert_int_equal(bb_engine_invoke(e, "Main", &in, 1, NULL, NULL), BB_OK);
    assert_int_equal(bb_engine_invoke(e, "Main", &in, 1, NULL, NULL), BB_OK);
    bb_value_unref(v);
    fx_log log = {0};
    fx_run(e, &log, 1, 5);
    assert_int_equal(bb_engine_pending_async_count(e), 1);
    const fx_rec *f = fx_log_nth(&log, BB_STEP_OP_FAILED, 0);
    assert_non_null(f);
    assert_non_null(strstr(f->c, "max_pending_async"));
    fx_echo *echo = fx_echo_at(0);
    float big[16] = {0};
    bb_value *t = fx_f32(big, 16);
    assert_int_equal(bb_complete_ok(echo->pending[0], &t, 1), BB_ELIMIT);
    bb_value *small = bb_value_u64(&BB_TYPE_U64, 2); /* the op failed: nothing lands now */
    assert_int_equal(bb_complete_ok(echo->pending[0], &small, 1), BB_ESTATE);
    fx_run(e, &log, 2, 5);
    assert_non_null(fx_log_infra(&log, BB_INFRA_APP_INGRESS_ERROR, BB_APP_INGRESS_PER_ITEM_CAP_EXCEEDED));
    f = fx_log_nth(&log, BB_STEP_OP_FAILED, 1);
    assert_non_null(f);
    assert_non_null(strstr(f->c, "64 bytes exceeds max_completion_result_bytes 16"));
    assert_null(fx_log_app(&log, "y", 0));
    assert_int_equal(bb_engine_pending_async_count(e), 0);
    for (int i = 0; i < echo->n_pending; i++)
        bb_value_unref(echo->pending_in[i]);
    echo->n_pending = 0;
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

/* A completion's result joins the in-flight bytes until its slot is freed;
 * a result that would overrun the budget is refused and its op fails with
 * the reason (left parked, an op without a deadline would wait for ever:
 * no component completes a handle twice). */
static void test_completion_result_charged_to_budget(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x", "y");
    bb_node *n = fx_op(m, f, "test.echo", "Later", "x", "l");
    fx_meta(m, n, "ai.bytesandbrains.slot", "echo");
    n = fx_op(m, f, FX_SYS, "After", "l", "y"); /* holds the result while it sleeps */
    fx_int(m, n, "delay_ns", 100);
    fx_bind(m, "Main", "echo", "Protocol|test::Echo|1");
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    cfg.caps.ingress_byte_budget = 100;
    bb_engine *e = install(m, &cfg);
    bb_value *t = bb_value_trigger();
    bb_engine_input in = {.name = "x", .value = t};
    assert_int_equal(bb_engine_invoke(e, "Main", &in, 1, NULL, NULL), BB_OK);
    assert_int_equal(bb_engine_invoke(e, "Main", &in, 1, NULL, NULL), BB_OK);
    bb_value_unref(t);
    fx_log log = {0};
    fx_run(e, &log, 1, 5);
    fx_echo *echo = fx_echo_at(0);
    assert_int_equal(echo->n_pending, 2);
    float v16[16] = {1}, v12[12] = {2};
    bb_value *r = fx_f32(v16, 16); /* 64 bytes */
    assert_int_equal(bb_complete_ok(echo->pending[0], &r, 1), BB_OK);
    assert_int_equal(bb_engine_counter(e, "ingress.bytes_in_flight"), 64);
    fx_run(e, &log, 2, 5); /* written into the slot After reads */
    assert_int_equal(bb_engine_counter(e, "ingress.bytes_in_flight"), 64);
    r = fx_f32(v12, 12); /* 48 more would be 112 */
    assert_int_equal(bb_complete_ok(echo->pending[1], &r, 1), BB_EBUDGET);
    r = fx_f32(v12, 12);
    assert_int_equal(bb_complete_ok(echo->pending[1], &r, 1), BB_ESTATE); /* failed already */
    fx_run(e, &log, 200, 5); /* the first execution ends: its 64 bytes come back */
    assert_non_null(fx_log_app(&log, "y", 0));
    assert_null(fx_log_app(&log, "y", 1));
    assert_int_equal(bb_engine_counter(e, "ingress.bytes_in_flight"), 0);
    assert_non_null(fx_log_infra(&log, BB_INFRA_APP_INGRESS_ERROR, BB_APP_INGRESS_BUDGET_EXCEEDED));
    const fx_rec *failed = fx_log_nth(&log, BB_STEP_OP_FAILED, 0);
    assert_non_null(failed);
    assert_non_null(strstr(failed->c, "48 bytes exceeds the ingress byte budget (64 of 100 bytes"));
    assert_int_equal(bb_engine_live_executions(e), 0);
    for (int i = 0; i < echo->n_pending; i++)
        bb_value_unref(echo->pending_in[i]);
    echo->n_pending = 0;
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

/* Envelope caps at the boundary (size before the copy, fills and address
 * lists while decoding), the edge preset in force, and the counters. */
static void test_envelope_caps_edge_preset_and_counters(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x", "pa,pb,pc");
    bb_node *t = fx_op(m, f, FX_SYS, "Tee", "x", "a,b,c");
    fx_int(m, t, "fanout", 3);
    fx_op(m, f, FX_SYS, "PassThrough", "a", "pa"); /* three ready at once: depth 3 */
    fx_op(m, f, FX_SYS, "PassThrough", "b", "pb");
    fx_op(m, f, FX_SYS, "PassThrough", "c", "pc");
    fx_recv(m, f, 400, "tick", NULL, NULL);
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    bb_engine_caps_edge(&cfg.caps);
    cfg.caps.max_envelope_bytes = 256;
    cfg.caps.max_envelope_fills = 2;
    cfg.caps.max_envelope_addresses = 2;
    bb_engine *e = install(m, &cfg);
    bb_peerid src = fx_peer(4), bad = {0};
    uint8_t big[300] = {0};
    bb_error err = {0};
    assert_int_equal(bb_engine_deliver_envelope(e, &src, NULL, big, 300, &err), BB_ELIMIT);
    assert_non_null(strstr(err.msg, "300 bytes exceeds the 256 cap"));
    assert_int_equal(bb_engine_deliver_envelope(e, &bad, NULL, big, 10, &err), BB_EINVAL);
    fx_fill fills[3] = {{.site = 400}, {.site = 400}, {.site = 400}};
    fx_env env = {.fills = fills, .n_fills = 3};
    size_t n;
    uint8_t *b = fx_envelope(&env, &n);
    assert_int_equal(bb_engine_deliver_envelope(e, &src, NULL, b, n, NULL), BB_OK);
    free(b);
    uint8_t a[3][32];
    bb_engine_addr addrs[3];
    for (int i = 0; i < 3; i++)
        addrs[i] = (bb_engine_addr){a[i], fx_addr((uint16_t)(9000 + i), a[i])};
    fx_env many = {.fills = fills, .n_fills = 1, .src = addrs, .n_src = 3};
    b = fx_envelope(&many, &n);
    assert_int_equal(bb_engine_deliver_envelope(e, &src, NULL, b, n, NULL), BB_OK);
    free(b);
    many.n_src = 2; /* within the caps: delivered, and the sender's addresses learned */
    b = fx_envelope(&many, &n);
    assert_int_equal(bb_engine_deliver_envelope(e, &src, NULL, b, n, NULL), BB_OK);
    free(b);
    /* the edge preset's per-item cap: 64 KiB events */
    uint8_t *blob = calloc(1, (64u << 10) + 1);
    bb_engine_input ev = {.bytes = blob, .len = (64u << 10) + 1};
    assert_int_equal(bb_engine_deliver_event(e, "Main", "x", &ev, NULL, &err), BB_ELIMIT);
    ev.len = 64u << 10;
    assert_int_equal(bb_engine_deliver_event(e, "Main", "x", &ev, NULL, &err), BB_OK);
    free(blob);
    fx_log log = {0};
    fx_run(e, &log, 1, 5);
    const fx_rec *r = fx_log_infra(&log, BB_INFRA_WIRE_RECEIVE_ERROR, BB_WIRE_RX_BUDGET_EXCEEDED);
    assert_non_null(r);
    assert_non_null(strstr(r->c, "max_envelope_bytes"));
    size_t malformed = 0;
    for (size_t i = 0; i < log.n; i++)
        if (log.v[i].kind == BB_STEP_INFRA_EVENT && log.v[i].infra == BB_INFRA_ENVELOPE_MALFORMED) {
            malformed++;
            assert_true(strstr(log.v[i].c, "more than 2 fills") ||
                        strstr(log.v[i].c, "more than 2 destination addresses"));
        }
    assert_int_equal(malformed, 2);
    assert_int_equal(fx_log_count(&log, BB_STEP_APP_EVENT), 3); /* pa, pb, pc of the event */
    assert_int_equal(bb_engine_peer_addrs(e, &src, NULL), 2);
    /* counters by name, and the iteration that lists them */
    assert_true(bb_engine_counter(e, "frontier.depth_peak") >= 3);
    assert_int_equal(bb_engine_counter(e, "pending_async.count"), 0);
    assert_int_equal(bb_engine_counter(e, "envelopes.in"), 3);
    assert_int_equal(bb_engine_counter(e, "nonexistent.counter"), 0);
    const char *want[] = {"frontier.depth_peak", "ingress.dropped", "bus.dropped",
                          "pending_async.count", "ops.invoked", "exec.live",
                          "ingress.bytes_in_flight"};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        bool seen = false;
        const char *name;
        uint64_t val;
        for (size_t i = 0; bb_engine_counter_at(e, i, &name, &val); i++)
            seen |= strcmp(name, want[k]) == 0;
        if (!seen)
            fail_msg("counter %s not listed", want[k]);
    }
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_presets),
        cmocka_unit_test(test_ingress_capacity),
        cmocka_unit_test(test_bus_drop_oldest),
        cmocka_unit_test(test_per_item_caps),
        cmocka_unit_test(test_byte_budget_released_on_gc),
        cmocka_unit_test(test_completion_result_cap_and_pending_cap),
        cmocka_unit_test(test_completion_result_charged_to_budget),
        cmocka_unit_test(test_envelope_caps_edge_preset_and_counters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
