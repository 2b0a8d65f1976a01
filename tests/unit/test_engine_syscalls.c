/*
 * test_engine_syscalls.c — the framework ops of ai.bytesandbrains.syscall,
 * .address_book and .composite, observed through a real engine.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/engine_fixtures.h"

static bb_engine *install(bb_model *m, uint8_t seed)
{
    bb_engine *e = fx_engine(seed, 7001, NULL);
    bb_error err = {0};
    if (fx_install(e, m, "Main", &err))
        fail_msg("%s", err.msg);
    return e;
}

static void inv(bb_engine *e, const char *input, bb_value *v)
{
    bb_engine_input in = {.name = input, .value = v};
    bb_error err = {0};
    if (bb_engine_invoke(e, "Main", &in, 1, NULL, &err))
        fail_msg("%s", err.msg);
    bb_value_unref(v);
}

static bb_value *trig(void) { return bb_value_trigger(); }

static void test_tee_constant_bundle(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x", "y0,y1,k,parts0,parts1");
    bb_node *t = fx_op(m, f, FX_SYS, "Tee", "x", "y0,y1");
    fx_int(m, t, "fanout", 2);
    bb_node *c = fx_op(m, f, FX_SYS, "Constant", "", "kv");
    fx_int(m, c, "value", 99);
    fx_op(m, f, FX_SYS, "Gate", "kv,x", "k");
    fx_op(m, f, FX_COMP, "Bundle", "x,kv", "b");
    bb_node *u = fx_op(m, f, FX_COMP, "Unbundle", "b", "parts0,parts1");
    fx_int(m, u, "ai.bytesandbrains.composite.child_count", 2);
    bb_engine *e = install(m, 1);
    inv(e, "x", bb_value_u64(&BB_TYPE_U64, 5));
    fx_log log = {0};
    fx_run(e, &log, 1, 5);
    assert_int_equal(fx_log_app(&log, "y0", 0)->value->u.u64, 5);
    assert_int_equal(fx_log_app(&log, "y1", 0)->value->u.u64, 5);
    assert_int_equal(fx_log_app(&log, "k", 0)->value->u.u64, 99);
    assert_int_equal(fx_log_app(&log, "parts0", 0)->value->u.u64, 5);
    assert_int_equal(fx_log_app(&log, "parts1", 0)->value->u.u64, 99);
    assert_int_equal(bb_engine_live_slots(e), 0);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_clock_rng_tokens(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x", "now,r,tok");
    fx_op(m, f, FX_SYS, "Clock", "x", "now");
    fx_op(m, f, FX_SYS, "RngU64", "x", "r");
    fx_op(m, f, FX_SYS, "CorrelateTag", "x", "tok");
    uint64_t r[3];
    for (int i = 0; i < 3; i++) {
        bb_engine *e = install(m, i < 2 ? 4 : 5); /* same seed twice, then another */
        inv(e, "x", trig());
        fx_log log = {0};
        fx_run(e, &log, 12345, 5);
        assert_int_equal(fx_log_app(&log, "now", 0)->value->u.u64, 12345);
        assert_ptr_equal(fx_log_app(&log, "now", 0)->value->type, &BB_TYPE_TIMESTAMP);
        assert_ptr_equal(fx_log_app(&log, "tok", 0)->value->type, &BB_TYPE_CORRELATION_TOKEN);
        r[i] = fx_log_app(&log, "r", 0)->value->u.u64;
        fx_log_free(&log);
        bb_engine_free(e);
    }
    assert_int_equal(r[0], r[1]);
    assert_int_not_equal(r[0], r[2]);
    bb_model_free(m);
}

static void test_after_and_sleep(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x", "a,s");
    bb_node *n = fx_op(m, f, FX_SYS, "After", "x", "a");
    fx_int(m, n, "delay_ns", 1000);
    n = fx_op(m, f, FX_SYS, "Sleep", "x", "s");
    fx_int(m, n, "duration_ns", 3000);
    bb_engine *e = install(m, 1);
    inv(e, "x", trig());
    fx_log log = {0};
    fx_run(e, &log, 100, 5);
    assert_int_equal(fx_log_count(&log, BB_STEP_APP_EVENT), 0);
    assert_int_equal(bb_engine_pending_async_count(e), 2);
    assert_int_equal(bb_engine_next_deadline(e), 1100);
    fx_run(e, &log, 1099, 5);
    assert_null(fx_log_app(&log, "a", 0));
    fx_run(e, &log, 1100, 5);
    assert_non_null(fx_log_app(&log, "a", 0));
    assert_null(fx_log_app(&log, "s", 0));
    fx_run(e, &log, 3100, 5);
    assert_non_null(fx_log_app(&log, "s", 0));
    assert_int_equal(bb_engine_live_executions(e), 0);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_limit_semaphore(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x,y", "done,free");
    bb_node *n = fx_op(m, f, FX_SYS, "Limit.Acquire", "x", "held");
    fx_str(m, n, "name", "round");
    fx_int(m, n, "n", 1);
    n = fx_op(m, f, FX_SYS, "After", "held", "slept");
    fx_int(m, n, "delay_ns", 100);
    n = fx_op(m, f, FX_SYS, "Limit.Release", "slept", "");
    fx_str(m, n, "name", "round");
    fx_op(m, f, FX_SYS, "PassThrough", "slept", "done");
    /* y: acquire and finish without releasing: released when the execution ends */
    n = fx_op(m, f, FX_SYS, "Limit.Acquire", "y", "free");
    fx_str(m, n, "name", "round");
    fx_int(m, n, "n", 1);
    bb_engine *e = install(m, 1);
    for (int i = 0; i < 3; i++)
        inv(e, "x", trig());
    fx_log log = {0};
    fx_run(e, &log, 0, 5);
    for (uint64_t t = 100; t <= 300; t += 100) {
        fx_run(e, &log, t, 5);
        assert_int_equal(fx_log_count(&log, BB_STEP_APP_EVENT), t / 100);
    }
    inv(e, "y", trig());
    inv(e, "y", trig());
    fx_run(e, &log, 400, 5);
    assert_int_equal(fx_log_count(&log, BB_STEP_APP_EVENT), 5);
    assert_int_equal(bb_engine_live_executions(e), 0);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_serialize_queue_and_hold(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "put,get,stash,flush", "got,flushed");
    bb_node *n = fx_op(m, f, FX_SYS, "Serialize.Enqueue", "put", "ok");
    fx_str(m, n, "queue", "q");
    n = fx_op(m, f, FX_SYS, "Serialize.Dequeue", "get", "got");
    fx_str(m, n, "queue", "q");
    n = fx_op(m, f, FX_SYS, "Hold.Stash", "stash", "");
    fx_str(m, n, "slot", "h");
    n = fx_op(m, f, FX_SYS, "Hold.Flush", "flush", "flushed");
    fx_str(m, n, "slot", "h");
    bb_engine *e = install(m, 1);
    fx_log log = {0};
    inv(e, "get", trig()); /* parks: the queue is empty */
    fx_run(e, &log, 1, 5);
    assert_int_equal(bb_engine_pending_async_count(e), 1);
    inv(e, "put", bb_value_u64(&BB_TYPE_U64, 17));
    inv(e, "put", bb_value_u64(&BB_TYPE_U64, 18));
    inv(e, "get", trig());
    fx_run(e, &log, 1, 5);
    assert_int_equal(fx_log_app(&log, "got", 0)->value->u.u64, 17);
    assert_int_equal(fx_log_app(&log, "got", 1)->value->u.u64, 18);
    inv(e, "flush", trig()); /* empty hold: nothing */
    inv(e, "stash", bb_value_u64(&BB_TYPE_U64, 3));
    inv(e, "flush", trig());
    inv(e, "flush", trig()); /* flushed once only */
    fx_run(e, &log, 1, 5);
    assert_int_equal(fx_log_app(&log, "flushed", 0)->value->u.u64, 3);
    assert_null(fx_log_app(&log, "flushed", 1));
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_app_record_metric_lifecycle_events(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x,bad", "");
    bb_node *n = fx_op(m, f, FX_SYS, "AppEmit", "x", "");
    fx_str(m, n, "name", "progress");
    n = fx_op(m, f, FX_SYS, "Record", "x", "");
    fx_str(m, n, "name", "trace");
    n = fx_op(m, f, FX_SYS, "IncrMetric", "x", "");
    fx_str(m, n, "name", "rounds");
    fx_int(m, n, "delta", 3);
    n = fx_op(m, f, FX_SYS, "LifecyclePhase", "", "shut");
    fx_int(m, n, "phase", 1);
    n = fx_op(m, f, FX_SYS, "AppNotify", "shut", "");
    fx_str(m, n, "name", "shutdown");
    n = fx_op(m, f, FX_SYS, "LifecyclePhase", "", "snap");
    fx_int(m, n, "phase", 2);
    n = fx_op(m, f, FX_SYS, "AppNotify", "snap", "");
    fx_str(m, n, "name", "snapshot");
    /* an op failure published on the bus wakes an EventSource(kind 1) */
    n = fx_op(m, f, "test.echo", "Fail", "bad", "");
    fx_meta(m, n, "ai.bytesandbrains.slot", "echo");
    n = fx_op(m, f, FX_SYS, "EventSource", "", "ev");
    fx_int(m, n, "kind", 1);
    n = fx_op(m, f, FX_SYS, "AppEmit", "ev", "");
    fx_str(m, n, "name", "failure_seen");
    fx_bind(m, "Main", "echo", "Protocol|test::Echo|1");
    bb_engine *e = install(m, 1);
    inv(e, "x", bb_value_u64(&BB_TYPE_U64, 1));
    inv(e, "x", bb_value_u64(&BB_TYPE_U64, 2));
    fx_log log = {0};
    fx_run(e, &log, 1, 5);
    assert_int_equal(fx_log_app(&log, "progress", 1)->value->u.u64, 2);
    assert_string_equal(fx_log_app(&log, "progress", 0)->a, "Main");
    assert_int_equal(bb_engine_counter(e, "rounds"), 6);
    assert_int_equal(bb_engine_record_count(e), 2);
    const char *rn;
    const bb_value *rv;
    assert_true(bb_engine_record_at(e, 1, &rn, &rv));
    assert_string_equal(rn, "trace");
    assert_int_equal(rv->u.u64, 2);
    assert_int_equal(fx_log_count(&log, BB_STEP_TELEMETRY), 4);
    assert_int_equal(bb_engine_fire_lifecycle(e, 1, NULL), BB_OK);
    fx_run(e, &log, 1, 5);
    assert_non_null(fx_log_app(&log, "shutdown", 0));
    assert_null(fx_log_app(&log, "snapshot", 0));
    assert_int_equal(bb_engine_fire_lifecycle(e, 2, NULL), BB_OK);
    fx_run(e, &log, 1, 5);
    assert_non_null(fx_log_app(&log, "snapshot", 0));
    assert_null(fx_log_app(&log, "shutdown", 1));
    inv(e, "bad", trig());
    fx_run(e, &log, 1, 5);
    const fx_rec *ev = fx_log_app(&log, "failure_seen", 0);
    assert_non_null(ev);
    assert_int_equal(ev->value->u.u64, 1);
    assert_ptr_equal(ev->value->type, &BB_TYPE_EVENT_KIND);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_interval(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "", "tick");
    bb_node *n = fx_op(m, f, FX_SYS, "Interval", "", "tick");
    fx_int(m, n, "period_ns", 100);
    bb_engine *e = install(m, 1);
    fx_log log = {0};
    fx_run(e, &log, 1000, 5); /* arms at the first poll */
    assert_int_equal(bb_engine_next_deadline(e), 1100);
    fx_run(e, &log, 1100, 5);
    fx_run(e, &log, 1250, 5);
    assert_int_equal(fx_log_count(&log, BB_STEP_APP_EVENT), 2);
    assert_int_equal(fx_log_app(&log, "tick", 1)->value->u.u64, 1250);
    assert_int_equal(bb_engine_next_deadline(e), 1300);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_address_book_ops(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "peer,addrs,addr,q", "found");
    fx_op(m, f, FX_AB, "InsertMany", "peer,addrs", "");
    fx_op(m, f, FX_AB, "Insert", "peer,addr", "");
    fx_op(m, f, FX_AB, "Lookup", "q", "found");
    bb_engine *e = install(m, 1);
    bb_peerid p = fx_peer(5);
    uint8_t a1[32], a2[32], a3[32];
    size_t l1 = fx_addr(9001, a1), l2 = fx_addr(9002, a2), l3 = fx_addr(9003, a3);
    bb_value *items[2] = {bb_value_bytes(&BB_TYPE_MULTIADDRESS, a1, l1),
                          bb_value_bytes(&BB_TYPE_MULTIADDRESS, a2, l2)};
    bb_value *pv = bb_value_bytes(&BB_TYPE_PEER_ID, p.bytes, p.len);
    bb_value *addrs = bb_value_list(&BB_TYPE_ADDRESS_VEC, items, 2);
    bb_value *one = bb_value_bytes(&BB_TYPE_MULTIADDRESS, a3, l3);
    bb_engine_input in[3] = {{.name = "peer", .value = pv}, {.name = "addrs", .value = addrs},
                             {.name = "addr", .value = one}};
    assert_int_equal(bb_engine_invoke(e, "Main", in, 3, NULL, NULL), BB_OK);
    fx_log log = {0};
    fx_run(e, &log, 1, 5);
    assert_int_equal(bb_engine_peer_addrs(e, &p, NULL), 3);
    inv(e, "q", bb_value_ref(pv));
    bb_peerid unknown = fx_peer(6);
    inv(e, "q", bb_value_bytes(&BB_TYPE_PEER_ID, unknown.bytes, unknown.len));
    fx_run(e, &log, 1, 5);
    const fx_rec *r = fx_log_app(&log, "found", 0);
    assert_non_null(r);
    assert_int_equal(r->value->u.list.n, 3);
    assert_memory_equal(r->value->u.list.items[2]->u.bytes.data, a3, l3);
    assert_non_null(strstr(fx_log_nth(&log, BB_STEP_OP_FAILED, 0)->c, "unknown peer"));
    bb_value_unref(pv);
    bb_value_unref(addrs);
    bb_value_unref(one);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

/* Compiler-inserted GateDispatch / MintDispatch / GateManyDispatch, and
 * OnTrigger re-firing on every arrival. */
static void test_dispatch_gates_and_on_trigger(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "v,g1,g2,t", "gated,token,many,again");
    fx_op(m, f, FX_SYS, "GateDispatch", "v", "gated");
    fx_op(m, f, FX_SYS, "MintDispatch", "t", "token");
    fx_op(m, f, FX_SYS, "GateManyDispatch", "v,g1,g2", "many");
    fx_op(m, f, FX_SYS, "OnTrigger", "t", "again");
    bb_engine *e = install(m, 1);
    fx_log log = {0};
    /* value and one gate: GateManyDispatch holds */
    bb_value *v = bb_value_u64(&BB_TYPE_U64, 8), *t = trig();
    bb_engine_input two[2] = {{.name = "v", .value = v}, {.name = "g1", .value = t}};
    assert_int_equal(bb_engine_invoke(e, "Main", two, 2, NULL, NULL), BB_OK);
    fx_run(e, &log, 1, 5);
    assert_int_equal(fx_log_app(&log, "gated", 0)->value->u.u64, 8);
    assert_null(fx_log_app(&log, "many", 0));
    /* every gate in: the value passes */
    bb_engine_input three[3] = {{.name = "v", .value = v}, {.name = "g1", .value = t},
                                {.name = "g2", .value = t}};
    assert_int_equal(bb_engine_invoke(e, "Main", three, 3, NULL, NULL), BB_OK);
    fx_run(e, &log, 1, 5);
    assert_int_equal(fx_log_app(&log, "many", 0)->value->u.u64, 8);
    /* two triggers, two firings, two distinct tokens */
    bb_engine_input tin = {.value = t};
    assert_int_equal(bb_engine_deliver_event(e, "Main", "t", &tin, NULL, NULL), BB_OK);
    assert_int_equal(bb_engine_deliver_event(e, "Main", "t", &tin, NULL, NULL), BB_OK);
    fx_run(e, &log, 1, 5);
    assert_non_null(fx_log_app(&log, "again", 1));
    const fx_rec *k0 = fx_log_app(&log, "token", 0), *k1 = fx_log_app(&log, "token", 1);
    assert_ptr_equal(k0->value->type, &BB_TYPE_CORRELATION_TOKEN);
    assert_int_not_equal(k0->value->u.u64, k1->value->u.u64);
    bb_value_unref(v);
    bb_value_unref(t);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

/* DeadlineMatch: the first of `then` / `timeout` wins, once per execution. */
static void test_deadline_match(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x", "winner");
    bb_node *n = fx_op(m, f, FX_SYS, "After", "x", "then");
    fx_int(m, n, "delay_ns", 100);
    n = fx_op(m, f, FX_SYS, "After", "x", "timeout");
    fx_int(m, n, "delay_ns", 300);
    fx_op(m, f, FX_SYS, "DeadlineMatch", "then,timeout", "winner");
    bb_engine *e = install(m, 1);
    fx_log log = {0};
    inv(e, "x", trig());
    fx_run(e, &log, 0, 5);
    fx_run(e, &log, 100, 5);
    assert_non_null(fx_log_app(&log, "winner", 0));
    assert_ptr_equal(fx_log_app(&log, "winner", 0)->value->type, &BB_TYPE_TRIGGER);
    fx_run(e, &log, 300, 5); /* the timeout fires too, but the match is decided */
    assert_null(fx_log_app(&log, "winner", 1));
    assert_int_equal(bb_engine_live_executions(e), 0);
    assert_int_equal(bb_engine_live_slots(e), 0);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

/* Failure paths of Unbundle, the address-book ops and the Record ring. */
static void test_syscall_error_paths(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "notcomp,comp3,peer,addrs,addr,q,rec", "");
    fx_op(m, f, FX_COMP, "Unbundle", "notcomp", "a0,a1");
    fx_op(m, f, FX_COMP, "Unbundle", "comp3", "b0,b1");
    fx_op(m, f, FX_AB, "InsertMany", "peer,addrs", "");
    fx_op(m, f, FX_AB, "Insert", "peer,addr", "");
    fx_op(m, f, FX_AB, "Lookup", "q", "found");
    bb_node *n = fx_op(m, f, FX_SYS, "Record", "rec", "");
    fx_str(m, n, "name", "r");
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    cfg.caps.address_book_max_addrs = 1;
    cfg.caps.record_ring = 2;
    bb_engine *e = fx_engine(1, 7001, &cfg);
    assert_int_equal(fx_install(e, m, "Main", NULL), BB_OK);
    fx_log log = {0};
    /* Unbundle of a U64, and of a 3-child composite into 2 outputs */
    inv(e, "notcomp", bb_value_u64(&BB_TYPE_U64, 1));
    bb_value *kids[3] = {trig(), trig(), trig()};
    inv(e, "comp3", bb_value_list(&BB_TYPE_COMPOSITE, kids, 3));
    fx_run(e, &log, 1, 5);
    assert_non_null(strstr(fx_log_nth(&log, BB_STEP_OP_FAILED, 0)->c, "not Composite"));
    assert_non_null(strstr(fx_log_nth(&log, BB_STEP_OP_FAILED, 1)->c, "3 children, node declares 2"));
    /* InsertMany of an empty list; Insert past the per-peer cap */
    bb_peerid p = fx_peer(5);
    uint8_t a1[32], a2[32];
    size_t l1 = fx_addr(9001, a1), l2 = fx_addr(9002, a2);
    bb_value *pv = bb_value_bytes(&BB_TYPE_PEER_ID, p.bytes, p.len);
    bb_value *empty = bb_value_list(&BB_TYPE_ADDRESS_VEC, NULL, 0);
    bb_value *one = bb_value_bytes(&BB_TYPE_MULTIADDRESS, a1, l1);
    bb_value *another = bb_value_bytes(&BB_TYPE_MULTIADDRESS, a2, l2);
    bb_engine_input in[2] = {{.name = "peer", .value = pv}, {.name = "addrs", .value = empty}};
    assert_int_equal(bb_engine_invoke(e, "Main", in, 2, NULL, NULL), BB_OK);
    in[1].name = "addr";
    in[1].value = one;
    assert_int_equal(bb_engine_invoke(e, "Main", in, 2, NULL, NULL), BB_OK);
    in[1].value = another;
    assert_int_equal(bb_engine_invoke(e, "Main", in, 2, NULL, NULL), BB_OK);
    fx_run(e, &log, 1, 5);
    assert_non_null(strstr(fx_log_nth(&log, BB_STEP_OP_FAILED, 2)->c, "InsertMany: empty address list"));
    assert_non_null(strstr(fx_log_nth(&log, BB_STEP_OP_FAILED, 3)->c, "Insert: Full"));
    assert_int_equal(bb_engine_peer_addrs(e, &p, NULL), 1);
    /* Lookup of a known peer without addresses */
    bb_peerid bare = fx_peer(6);
    assert_int_equal(bb_engine_block_peer(e, &bare, false), BB_OK); /* known, no address */
    inv(e, "q", bb_value_bytes(&BB_TYPE_PEER_ID, bare.bytes, bare.len));
    inv(e, "q", bb_value_u64(&BB_TYPE_U64, 3)); /* not a PeerId */
    fx_run(e, &log, 1, 5);
    assert_non_null(strstr(fx_log_nth(&log, BB_STEP_OP_FAILED, 4)->c, "Lookup: empty address list"));
    assert_non_null(strstr(fx_log_nth(&log, BB_STEP_OP_FAILED, 5)->c, "Lookup: input is not a PeerId"));
    /* the Record ring keeps the newest record_ring entries */
    for (uint64_t i = 1; i <= 3; i++)
        inv(e, "rec", bb_value_u64(&BB_TYPE_U64, i));
    fx_run(e, &log, 1, 5);
    assert_int_equal(bb_engine_record_count(e), 2);
    const bb_value *rv;
    assert_true(bb_engine_record_at(e, 0, NULL, &rv));
    assert_int_equal(rv->u.u64, 2);
    assert_true(bb_engine_record_at(e, 1, NULL, &rv));
    assert_int_equal(rv->u.u64, 3);
    assert_false(bb_engine_record_at(e, 2, NULL, &rv));
    bb_value_unref(pv);
    bb_value_unref(empty);
    bb_value_unref(one);
    bb_value_unref(another);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tee_constant_bundle),
        cmocka_unit_test(test_clock_rng_tokens),
        cmocka_unit_test(test_after_and_sleep),
        cmocka_unit_test(test_limit_semaphore),
        cmocka_unit_test(test_serialize_queue_and_hold),
        cmocka_unit_test(test_app_record_metric_lifecycle_events),
        cmocka_unit_test(test_interval),
        cmocka_unit_test(test_address_book_ops),
        cmocka_unit_test(test_dispatch_gates_and_on_trigger),
        cmocka_unit_test(test_deadline_match),
        cmocka_unit_test(test_syscall_error_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
