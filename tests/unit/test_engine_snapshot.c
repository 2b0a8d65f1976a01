/*
 * test_engine_snapshot.c — snapshot / restore (ENGINE.md Part 15): a run
 * snapshotted mid-cascade (op budget), with timers, a semaphore, a queue,
 * component state, metrics and unprocessed ingress, restored into a fresh
 * engine produces the same outputs as the uninterrupted run; suspended
 * component ops re-dispatch; in-flight envelopes and the address book
 * survive; corrupt / truncated / foreign snapshots are refused cleanly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/engine_fixtures.h"

static bb_model *rich_model(void)
{
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x,pull", "");
    char a[16], b[16];
    for (int i = 0; i < 40; i++) {
        snprintf(a, sizeof a, i ? "c%d" : "x", i - 1);
        snprintf(b, sizeof b, "c%d", i);
        fx_op(m, f, FX_SYS, "PassThrough", a, b);
    }
    bb_node *n = fx_op(m, f, "test.echo", "Count", "c39", "cnt");
    fx_meta(m, n, "ai.bytesandbrains.slot", "echo");
    n = fx_op(m, f, FX_SYS, "Limit.Acquire", "c39", "held");
    fx_str(m, n, "name", "one");
    n = fx_op(m, f, FX_SYS, "After", "held", "slept");
    fx_int(m, n, "delay_ns", 100);
    n = fx_op(m, f, FX_SYS, "Limit.Release", "slept", "");
    fx_str(m, n, "name", "one");
    fx_op(m, f, FX_SYS, "Gate", "cnt,slept", "g");
    n = fx_op(m, f, FX_SYS, "AppEmit", "g", "");
    fx_str(m, n, "name", "done");
    n = fx_op(m, f, FX_SYS, "IncrMetric", "x", "");
    fx_str(m, n, "name", "seen");
    n = fx_op(m, f, FX_SYS, "Serialize.Enqueue", "x", "");
    fx_str(m, n, "queue", "q");
    n = fx_op(m, f, FX_SYS, "Serialize.Dequeue", "pull", "pulled");
    fx_str(m, n, "queue", "q");
    n = fx_op(m, f, FX_SYS, "AppEmit", "pulled", "");
    fx_str(m, n, "name", "pulled");
    n = fx_op(m, f, FX_SYS, "Record", "x", "");
    fx_str(m, n, "name", "rec");
    fx_bind(m, "Main", "echo", "Protocol|test::Echo|1");
    return m;
}

static bb_engine *fresh(bb_model *m)
{
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    cfg.cycle_op_budget = 25;
    bb_engine *e = fx_engine(1, 7001, &cfg);
    bb_error err = {0};
    if (fx_install(e, m, "Main", &err))
        fail_msg("%s", err.msg);
    return e;
}

static void inv(bb_engine *e, const char *name, bb_value *v)
{
    bb_engine_input in = {.name = name, .value = v};
    assert_int_equal(bb_engine_invoke(e, "Main", &in, 1, NULL, NULL), BB_OK);
    bb_value_unref(v);
}

/* The schedule both runs follow after the snapshot point. */
static void finish(bb_engine *e, fx_log *log)
{
    static const uint64_t times[] = {1, 1, 1, 50, 101, 101, 150, 201, 201, 301, 301, 401, 401, 501, 501, 601, 601};
    for (size_t i = 0; i < sizeof times / sizeof times[0]; i++) {
        bb_steps s;
        bb_steps_init(&s);
        bb_engine_poll(e, times[i], &s);
        for (size_t k = 0; k < s.n; k++)
            fx_log_add(log, &s.v[k]);
        bb_steps_free(&s);
    }
    inv(e, "pull", bb_value_trigger());
    inv(e, "pull", bb_value_trigger());
    fx_run(e, log, 700, 20);
}

static void start(bb_engine *e)
{
    for (uint64_t v = 1; v <= 3; v++)
        inv(e, "x", bb_value_u64(&BB_TYPE_U64, v));
    bb_steps s;
    bb_steps_init(&s);
    bb_engine_poll(e, 1, &s); /* 25 ops: mid-cascade */
    assert_int_equal(s.v[s.n - 1].kind, BB_STEP_CYCLE_BUDGET_EXCEEDED);
    bb_steps_free(&s);
    inv(e, "x", bb_value_u64(&BB_TYPE_U64, 4)); /* still in the ingress */
}

static void same_logs(const fx_log *a, const fx_log *b)
{
    assert_int_equal(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        assert_int_equal(a->v[i].kind, b->v[i].kind);
        assert_int_equal(a->v[i].exec, b->v[i].exec);
        if (a->v[i].kind == BB_STEP_APP_EVENT) {
            assert_string_equal(a->v[i].b, b->v[i].b);
            assert_true(bb_value_equal(a->v[i].value, b->v[i].value));
        }
    }
}

static void test_snapshot_mid_cascade_restores_same_outputs(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = rich_model();
    /* uninterrupted */
    bb_engine *u = fresh(m);
    start(u);
    fx_log lu = {0};
    finish(u, &lu);
    assert_int_equal(fx_log_count(&lu, BB_STEP_APP_EVENT), 6); /* 4 done + 2 pulled */
    assert_int_equal(bb_engine_counter(u, "seen"), 4);
    /* interrupted: snapshot, drop the engine, restore into a fresh one */
    bb_engine *a = fresh(m);
    start(a);
    uint8_t *snap;
    size_t len;
    bb_error err = {0};
    if (bb_engine_snapshot(a, &snap, &len, &err))
        fail_msg("%s", err.msg);
    assert_true(bb_engine_live_executions(a) > 0);
    bb_engine_free(a);
    bb_engine *r = fresh(m);
    if (bb_engine_restore(r, snap, len, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(bb_engine_incarnation(r), 2);
    fx_log lr = {0};
    finish(r, &lr);
    same_logs(&lu, &lr);
    assert_int_equal(bb_engine_counter(r, "seen"), 4);
    assert_int_equal(bb_engine_record_count(r), 4);
    assert_int_equal(bb_engine_live_slots(r), 0);
    assert_int_equal(bb_engine_live_executions(r), 0);
    assert_int_equal(bb_engine_counter(r, "ingress.bytes_in_flight"), 0);
    /* restoring twice, or after running, is refused */
    assert_int_equal(bb_engine_restore(r, snap, len, &err), BB_ESTATE);
    free(snap);
    fx_log_free(&lu);
    fx_log_free(&lr);
    bb_engine_free(u);
    bb_engine_free(r);
    bb_model_free(m);
}

static void test_snapshot_refusals_and_truncations(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = rich_model();
    bb_engine *a = fresh(m);
    start(a);
    uint8_t *snap;
    size_t len;
    assert_int_equal(bb_engine_snapshot(a, &snap, &len, NULL), BB_OK);
    bb_engine_free(a);
    /* another install: fingerprint mismatch */
    bb_model *other = fx_model();
    fx_chain(other, "Main", 3);
    bb_engine *o = fresh(other);
    bb_error err = {0};
    assert_int_equal(bb_engine_restore(o, snap, len, &err), BB_EVALIDATE);
    assert_non_null(strstr(err.msg, "different install"));
    bb_engine_free(o);
    bb_model_free(other);
    /* every truncation fails cleanly and leaves the engine restorable */
    bb_engine *r = fresh(m);
    for (size_t n = 0; n < len; n++)
        assert_int_not_equal(bb_engine_restore(r, snap, n, NULL), BB_OK);
    assert_int_equal(bb_engine_live_executions(r), 0);
    assert_int_equal(bb_engine_counter(r, "ingress.bytes_in_flight"), 0);
    assert_int_equal(bb_engine_restore(r, snap, len, NULL), BB_OK);
    bb_engine_free(r);
    /* byte flips never crash: either refused or a usable engine */
    for (size_t i = 8; i < len; i += 5) {
        uint8_t *c = malloc(len);
        memcpy(c, snap, len);
        c[i] ^= 0x5a;
        bb_engine *f = fresh(m);
        if (bb_engine_restore(f, c, len, NULL) == BB_OK)
            fx_run(f, NULL, 1000, 50);
        bb_engine_free(f);
        free(c);
    }
    free(snap);
    bb_model_free(m);
}

static void test_parked_component_op_redispatches(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x", "y");
    bb_node *n = fx_op(m, f, "test.echo", "Later", "x", "y");
    fx_meta(m, n, "ai.bytesandbrains.slot", "echo");
    fx_bind(m, "Main", "echo", "Protocol|test::Echo|1");
    bb_engine *a = fresh(m);
    inv(a, "x", bb_value_u64(&BB_TYPE_U64, 12));
    fx_run(a, NULL, 1, 5);
    assert_int_equal(bb_engine_pending_async_count(a), 1);
    uint8_t *snap;
    size_t len;
    assert_int_equal(bb_engine_snapshot(a, &snap, &len, NULL), BB_OK);
    bb_engine_free(a); /* the echo instance (and its handle) are gone */
    fx_reset();
    bb_engine *r = fresh(m);
    assert_int_equal(bb_engine_restore(r, snap, len, NULL), BB_OK);
    free(snap);
    fx_log log = {0};
    fx_run(r, &log, 2, 5);
    fx_echo *echo = fx_echo_at(0);
    assert_int_equal(echo->n_pending, 1); /* dispatched again */
    assert_int_equal(echo->calls, 2);     /* the restored counter went on from 1 */
    bb_value *v = bb_value_ref(echo->pending_in[0]);
    assert_int_equal(bb_complete_ok(echo->pending[0], &v, 1), BB_OK);
    fx_run(r, &log, 3, 5);
    assert_int_equal(fx_log_app(&log, "y", 0)->value->u.u64, 12);
    bb_value_unref(echo->pending_in[0]);
    echo->n_pending = 0;
    fx_log_free(&log);
    bb_engine_free(r);
    bb_model_free(m);
}

static void test_inflight_envelope_and_address_book_survive(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "", "got");
    fx_recv(m, f, 55, "t", "got", &BB_TYPE_U64);
    bb_engine *a = fresh(m);
    bb_peerid p = fx_peer(3);
    uint8_t addr[32];
    bb_engine_addr ad = {addr, fx_addr(9003, addr)};
    assert_int_equal(bb_engine_add_peer(a, &p, &ad, 1, NULL), BB_OK);
    const char *tg[1] = {"Client"};
    assert_int_equal(bb_engine_peer_connected(a, &p, tg, 1, NULL), BB_OK);
    size_t n;
    uint8_t *buf = fx_envelope_u64(55, 77, 0, 0, &n);
    assert_int_equal(bb_engine_deliver_envelope(a, &p, NULL, buf, n, NULL), BB_OK);
    free(buf);
    uint8_t *snap;
    size_t len;
    assert_int_equal(bb_engine_snapshot(a, &snap, &len, NULL), BB_OK);
    /* the source engine still has its ingress after a snapshot */
    fx_log la = {0};
    fx_run(a, &la, 1, 5);
    assert_int_equal(fx_log_app(&la, "got", 0)->value->u.u64, 77);
    bb_engine *b = fresh(m);
    assert_int_equal(bb_engine_restore(b, snap, len, NULL), BB_OK);
    free(snap);
    fx_log lb = {0};
    fx_run(b, &lb, 1, 5);
    assert_int_equal(fx_log_app(&lb, "got", 0)->value->u.u64, 77);
    const bb_engine_addr *got;
    assert_int_equal(bb_engine_peer_addrs(b, &p, &got), 1);
    assert_memory_equal(got[0].data, addr, ad.len);
    fx_log_free(&la);
    fx_log_free(&lb);
    bb_engine_free(a);
    bb_engine_free(b);
    bb_model_free(m);
}

/* Bootstrap progress survives: an ALL walk waiting for B's inputs resumes in
 * the restored engine without re-running A. */
static void test_bootstrap_progress_survives(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = fx_model();
    bb_function *a = fx_fn(m, "A", "x", "");
    fx_op(m, a, FX_SYS, "Pulse", "", "pulse");
    bb_node *n = fx_op(m, a, FX_SYS, "AppNotify", "pulse", "");
    fx_str(m, n, "name", "pulse");
    const char *names[2] = {"A__bootstrap", "B__bootstrap"};
    for (int i = 0; i < 2; i++) {
        bb_function *b = fx_fn(m, names[i], i ? "seed" : "", "");
        bb_kv_set(m->arena, &b->metadata, "ai.bytesandbrains.module_phase", "bootstrap");
        if (i) {
            n = fx_op(m, b, FX_SYS, "AppEmit", "seed", "");
        } else {
            bb_node *c = fx_op(m, b, FX_SYS, "Constant", "", "k");
            fx_int(m, c, "value", 1);
            n = fx_op(m, b, FX_SYS, "AppEmit", "k", "");
        }
        fx_str(m, n, "name", i ? "boot_b" : "boot_a");
    }
    fx_fn(m, "B", "x", "");
    bb_engine *e = fx_engine(1, 7001, NULL);
    assert_int_equal(fx_install(e, m, "A,B", NULL), BB_OK);
    bb_bootstrap_target all = {.kind = BB_BOOTSTRAP_ALL};
    assert_int_equal(bb_engine_run_bootstrap(e, &all, NULL), BB_OK);
    fx_log log = {0};
    fx_run(e, &log, 1, 5);
    assert_non_null(fx_log_app(&log, "boot_a", 0));
    assert_int_equal(bb_engine_bootstrap_status(e), BB_BOOTSTRAP_WAITING_FOR_INPUT);
    uint8_t *snap;
    size_t len;
    assert_int_equal(bb_engine_snapshot(e, &snap, &len, NULL), BB_OK);
    bb_engine_free(e);
    fx_log_free(&log);
    bb_engine *r = fx_engine(1, 7001, NULL);
    assert_int_equal(fx_install(r, m, "A,B", NULL), BB_OK);
    assert_int_equal(bb_engine_restore(r, snap, len, NULL), BB_OK);
    free(snap);
    assert_int_equal(bb_engine_bootstrap_status(r), BB_BOOTSTRAP_WAITING_FOR_INPUT);
    bb_value *v = bb_value_u64(&BB_TYPE_U64, 5);
    bb_engine_input seed = {.name = "seed", .value = v};
    bb_bootstrap_request rq = {.target = "B", .inputs = &seed, .n_inputs = 1};
    bb_bootstrap_target t = {.kind = BB_BOOTSTRAP_MODULE_REQUESTS, .requests = &rq, .n_requests = 1};
    assert_int_equal(bb_engine_run_bootstrap(r, &t, NULL), BB_OK);
    bb_value_unref(v);
    fx_run(r, &log, 2, 5);
    assert_null(fx_log_app(&log, "boot_a", 0)); /* A stays done */
    assert_int_equal(fx_log_app(&log, "boot_b", 0)->value->u.u64, 5);
    assert_non_null(fx_log_app(&log, "pulse", 0));
    assert_int_equal(fx_log_count(&log, BB_STEP_BOOTSTRAP_COMPLETE), 1);
    assert_int_equal(bb_engine_bootstrap_status(r), BB_BOOTSTRAP_IDLE);
    fx_log_free(&log);
    bb_engine_free(r);
    bb_model_free(m);
}

/* A suspended execution of a graph with a Constant (its site is pre-filled
 * in every frame) restores and finishes. */
static void test_constant_frame_restores(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x", "out");
    bb_node *c = fx_op(m, f, FX_SYS, "Constant", "", "k");
    fx_int(m, c, "value", 31);
    bb_node *n = fx_op(m, f, FX_SYS, "After", "x", "woke");
    fx_int(m, n, "delay_ns", 100);
    fx_op(m, f, FX_SYS, "Gate", "k,woke", "out");
    bb_engine *a = fresh(m);
    inv(a, "x", bb_value_trigger());
    fx_run(a, NULL, 1, 5);
    assert_int_equal(bb_engine_live_executions(a), 1);
    uint8_t *snap;
    size_t len;
    assert_int_equal(bb_engine_snapshot(a, &snap, &len, NULL), BB_OK);
    bb_engine_free(a);
    bb_engine *r = fresh(m);
    bb_error err = {0};
    if (bb_engine_restore(r, snap, len, &err))
        fail_msg("%s", err.msg);
    free(snap);
    fx_log log = {0};
    fx_run(r, &log, 101, 5);
    assert_int_equal(fx_log_app(&log, "out", 0)->value->u.u64, 31);
    assert_int_equal(bb_engine_live_slots(r), 0);
    fx_log_free(&log);
    bb_engine_free(r);
    bb_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_snapshot_mid_cascade_restores_same_outputs),
        cmocka_unit_test(test_snapshot_refusals_and_truncations),
        cmocka_unit_test(test_parked_component_op_redispatches),
        cmocka_unit_test(test_inflight_envelope_and_address_book_survive),
        cmocka_unit_test(test_bootstrap_progress_survives),
        cmocka_unit_test(test_constant_frame_restores),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
