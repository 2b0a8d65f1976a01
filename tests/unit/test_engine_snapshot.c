/*
 * test_engine_snapshot.c — snapshot / restore (ENGINE.md Part 15): a run
 * snapshotted mid-cascade (op budget), with timers, a semaphore, a queue,
 * component state, metrics and unprocessed ingress, restored into a fresh
 * engine produces the same outputs as the uninterrupted run; suspended
 * component ops re-dispatch; in-flight envelopes and the address book
 * survive; corrupt / truncated / foreign snapshots are refused cleanly.
 * The format, section by section: every section round-trips byte for
 * byte; a broken field is reported with its section and offset; the
 * framing refuses what it cannot read (old and new formats, layout
 * versions, sections out of place, trailing bytes).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bb/uvarint.h"
#include "libbbengine/src/snapshot.h"
#include "support/engine_fixtures.h"

/* Main(x, pull): a 40-op cascade, a component op with state, a semaphore
 * held across a sleep, a metric, a queue, a record. */
static void add_rich_main(bb_model *m, bb_function *f)
{
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
}

static bb_model *rich_model(void)
{
    bb_model *m = fx_model();
    add_rich_main(m, fx_fn(m, "Main", "x,pull", ""));
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

/* ---- the format, section by section ------------------------------------------------------ */

typedef struct section_view {
    size_t at;   /* its header's offset in the snapshot */
    size_t body; /* its body's offset */
    size_t len;  /* its body's length */
} section_view;

static size_t read_varint_at(const uint8_t *p, size_t n, size_t *pos)
{
    uint64_t v;
    size_t used;
    assert_int_equal(bb_uvarint_read_u64(p + *pos, n - *pos, &v, &used), BB_UVARINT_OK);
    *pos += used;
    return (size_t)v;
}

/* Walk the framing to section `name` (every section in table order). */
static section_view find_section(const uint8_t *snap, size_t len, const char *name)
{
    assert_memory_equal(snap, "BBSNAP3", 8);
    size_t pos = 8;
    for (size_t i = 0; i < bbe__snap_n_sections; i++) {
        section_view v = {.at = pos};
        assert_int_equal(read_varint_at(snap, len, &pos), bbe__snap_sections[i].tag);
        assert_int_equal(read_varint_at(snap, len, &pos), bbe__snap_sections[i].version);
        v.len = read_varint_at(snap, len, &pos);
        v.body = pos;
        assert_true(v.len <= len - pos);
        if (strcmp(bbe__snap_sections[i].name, name) == 0)
            return v;
        pos += v.len;
    }
    fail_msg("no section '%s'", name);
    return (section_view){0};
}

/* snap with section v's header written as (tag, version) and its body
 * replaced by body[0..n) (malloc'd; *out_len its size). */
static uint8_t *splice_section(const uint8_t *snap, size_t len, section_view v, uint64_t tag,
                               uint64_t version, const uint8_t *body, size_t n, size_t *out_len)
{
    size_t rest = len - (v.body + v.len);
    uint8_t *out = malloc(v.at + 30 + n + rest);
    assert_non_null(out);
    memcpy(out, snap, v.at);
    size_t pos = v.at;
    pos += bb_uvarint_encode(tag, out + pos);
    pos += bb_uvarint_encode(version, out + pos);
    pos += bb_uvarint_encode(n, out + pos);
    memcpy(out + pos, body, n);
    pos += n;
    memcpy(out + pos, snap + v.body + v.len, rest);
    *out_len = pos + rest;
    return out;
}

static const bbe__snap_section *section_named(const char *name)
{
    for (size_t i = 0; i < bbe__snap_n_sections; i++)
        if (strcmp(bbe__snap_sections[i].name, name) == 0)
            return &bbe__snap_sections[i];
    fail_msg("no section '%s'", name);
    return NULL;
}

static bb_engine *fresh_targets(bb_model *m, const char *targets)
{
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    cfg.cycle_op_budget = 25;
    bb_engine *e = fx_engine(1, 7001, &cfg);
    bb_error err = {0};
    if (fx_install(e, m, targets, &err))
        fail_msg("%s", err.msg);
    return e;
}

#define EVERY_TARGET "Main,Client,Server"

/* Main (add_rich_main) plus a hold and an EventSource for PeerDown, its
 * bootstrap, a Client that sends batched requests and a Server (behind
 * DedupGateRx) that answers them. */
static bb_model *every_section_model(void)
{
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x,pull", "");
    add_rich_main(m, f);
    bb_node *n = fx_op(m, f, FX_SYS, "Hold.Stash", "x", "");
    fx_str(m, n, "slot", "h");
    n = fx_op(m, f, FX_SYS, "EventSource", "", "down");
    fx_int(m, n, "kind", BB_EVENT_PEER_DOWN);
    n = fx_op(m, f, FX_SYS, "AppEmit", "down", "");
    fx_str(m, n, "name", "peer_down");
    bb_function *b = fx_fn(m, "Main__bootstrap", "", "");
    bb_kv_set(m->arena, &b->metadata, "ai.bytesandbrains.module_phase", "bootstrap");
    n = fx_op(m, b, FX_SYS, "Constant", "", "k");
    fx_int(m, n, "value", 1);
    n = fx_op(m, b, FX_SYS, "AppEmit", "k", "");
    fx_str(m, n, "name", "booted");
    bb_function *c = fx_fn(m, "Client", "x,peers", "batch");
    fx_type(m, c, "x", &BB_TYPE_U64);
    n = fx_op(m, c, FX_WIRE, "SendReqBatched", "x,peers", "rid");
    fx_meta(m, n, "ai.bytesandbrains.port", "ping");
    fx_op(m, c, FX_WIRE, "RecvRespBatched", "rid", "t,batch");
    bb_function *v = fx_fn(m, "Server", "", "");
    n = fx_op(m, v, FX_WIRE, "RecvReq", "", "rt,p,rid");
    fx_meta(m, n, "ai.bytesandbrains.port", "ping");
    fx_type(m, v, "p", &BB_TYPE_U64);
    fx_op(m, v, FX_SYS, "DedupGateRx", "p", "q");
    fx_op(m, v, FX_WIRE, "SendResp", "q,rid", "");
    return m;
}

static void request(bb_engine *e, uint64_t x, const uint8_t *seeds, size_t n)
{
    bb_value *items[2];
    for (size_t i = 0; i < n; i++) {
        bb_peerid p = fx_peer(seeds[i]);
        items[i] = bb_value_bytes(&BB_TYPE_PEER_ID, p.bytes, p.len);
    }
    bb_value *peers = bb_value_list(&BB_TYPE_PEER_ID_VEC, items, n);
    bb_value *xv = bb_value_u64(&BB_TYPE_U64, x);
    bb_engine_input in[2] = {{.name = "x", .value = xv}, {.name = "peers", .value = peers}};
    assert_int_equal(bb_engine_invoke(e, "Client", in, 2, NULL, NULL), BB_OK);
    bb_value_unref(xv);
    bb_value_unref(peers);
}

/* An engine (peer 1) with something in every section: its bootstrap done;
 * a request to itself and peer 2, answered by itself (the request it
 * served, the dedup window) and waiting for peer 2; peer 2 in the address
 * book, down after failed sends, its PeerDown still on the bus; Main with
 * a semaphore held across a sleep and a waiter, queued values, a hold, a
 * record and a metric; then a poll cut short by the op budget (a frontier,
 * a self-addressed envelope not yet delivered) and an invocation left in
 * the ingress. */
static bb_engine *every_section_engine(bb_model *m)
{
    bb_engine *e = fresh_targets(m, EVERY_TARGET);
    bb_peerid p2 = fx_peer(2);
    uint8_t a[32];
    bb_engine_addr ad = {a, fx_addr(7002, a)};
    assert_int_equal(bb_engine_add_peer(e, &p2, &ad, 1, NULL), BB_OK);
    bb_bootstrap_target all = {.kind = BB_BOOTSTRAP_ALL};
    assert_int_equal(bb_engine_run_bootstrap(e, &all, NULL), BB_OK);
    fx_run(e, NULL, 1, 20);
    const uint8_t both[2] = {1, 2}, self[1] = {1};
    request(e, 5, both, 2);
    fx_run(e, NULL, 1, 20);
    inv(e, "x", bb_value_u64(&BB_TYPE_U64, 1));
    inv(e, "x", bb_value_u64(&BB_TYPE_U64, 2));
    fx_run(e, NULL, 1, 20);
    for (int i = 0; i < 8; i++)
        bb_engine_report_send(e, &p2, false);
    request(e, 6, self, 1);
    inv(e, "x", bb_value_u64(&BB_TYPE_U64, 3));
    bb_steps s;
    bb_steps_init(&s);
    bb_engine_poll(e, 2, &s);
    assert_int_equal(s.v[s.n - 1].kind, BB_STEP_CYCLE_BUDGET_EXCEEDED);
    bb_steps_free(&s);
    inv(e, "x", bb_value_u64(&BB_TYPE_U64, 4));
    return e;
}

static void snapshot_of(bb_engine *e, uint8_t **snap, size_t *len)
{
    bb_error err = {0};
    if (bb_engine_snapshot(e, snap, len, &err))
        fail_msg("snapshot: %s", err.msg);
}

/* Every section holds state in the scenario, and a restored engine writes
 * every section back the same, byte for byte (the engine section's
 * incarnation one up). */
static void test_every_section_round_trips(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = every_section_model();
    bb_engine *idle = fresh_targets(m, EVERY_TARGET), *e = every_section_engine(m);
    uint8_t *s0, *s1, *s2;
    size_t l0, l1, l2;
    snapshot_of(idle, &s0, &l0);
    snapshot_of(e, &s1, &l1);
    bb_engine_free(idle);
    bb_engine_free(e);
    bb_engine *r = fresh_targets(m, EVERY_TARGET);
    bb_error err = {0};
    if (bb_engine_restore(r, s1, l1, &err))
        fail_msg("restore: %s", err.msg);
    snapshot_of(r, &s2, &l2);
    for (size_t i = 0; i < bbe__snap_n_sections; i++) {
        const char *name = bbe__snap_sections[i].name;
        section_view v0 = find_section(s0, l0, name), v1 = find_section(s1, l1, name),
                     v2 = find_section(s2, l2, name);
        if (v0.len == v1.len && memcmp(s0 + v0.body, s1 + v1.body, v0.len) == 0)
            fail_msg("section '%s' holds nothing the idle engine does not", name);
        size_t skip = 0;
        if (strcmp(name, "engine") == 0) { /* fingerprint, then the incarnation */
            size_t p1 = v1.body, p2 = v2.body;
            read_varint_at(s1, l1, &p1);
            read_varint_at(s2, l2, &p2);
            size_t inc1 = read_varint_at(s1, l1, &p1), inc2 = read_varint_at(s2, l2, &p2);
            assert_int_equal(inc2, inc1 + 1);
            assert_int_equal(p1 - v1.body, p2 - v2.body);
            skip = p1 - v1.body;
        }
        if (v1.len != v2.len || memcmp(s1 + v1.body + skip, s2 + v2.body + skip, v1.len - skip))
            fail_msg("section '%s' (%zu bytes) comes back as %zu other bytes", name, v1.len,
                     v2.len);
    }
    /* and the restored engine runs on */
    fx_run(r, NULL, 1000, 50);
    free(s0);
    free(s1);
    free(s2);
    bb_engine_free(r);
    bb_model_free(m);
}

/* restore(snap) fails with code, its message containing every `want`. */
static void refused(bb_model *m, const uint8_t *snap, size_t len, int code, const char *want1,
                    const char *want2)
{
    bb_engine *r = fresh_targets(m, EVERY_TARGET);
    bb_error err = {0};
    int rc = bb_engine_restore(r, snap, len, &err);
    if (rc != code || !strstr(err.msg, want1) || (want2 && !strstr(err.msg, want2)))
        fail_msg("restore gave %d \"%s\"; wanted %d with \"%s\"%s%s", rc, err.msg, code, want1,
                 want2 ? " and " : "", want2 ? want2 : "");
    /* refused cleanly: nothing restored, and the engine can still restore */
    assert_int_equal(bb_engine_live_executions(r), 0);
    assert_int_equal(bb_engine_counter(r, "ingress.bytes_in_flight"), 0);
    bb_engine_free(r);
}

/* The every-section scenario's model and a snapshot of it (malloc'd). */
static bb_model *every_section_snapshot(uint8_t **snap, size_t *len)
{
    fx_reset();
    bb_model *m = every_section_model();
    bb_engine *e = every_section_engine(m);
    snapshot_of(e, snap, len);
    bb_engine_free(e);
    return m;
}

/* A byte broken inside a section: the error names the section and the
 * offset of the field inside it. */
static void test_corrupt_field_names_section_and_offset(void **state)
{
    (void)state;
    uint8_t *snap;
    size_t len;
    bb_model *m = every_section_snapshot(&snap, &len);
    uint8_t *c = malloc(len);
    char want[96];

    /* timers: timer_seq, intervals_armed, count, then at, seq, kind */
    section_view v = find_section(snap, len, "timers");
    size_t pos = v.body;
    for (int i = 0; i < 5; i++)
        read_varint_at(snap, len, &pos);
    memcpy(c, snap, len);
    c[pos] = 99; /* no such timer kind */
    snprintf(want, sizeof want, "section 'timers' malformed at byte %zu of %zu", pos - v.body,
             v.len);
    refused(m, c, len, BB_EDECODE, want, "timer kind");

    /* executions: count, then the first frame's ExecId and graph */
    v = find_section(snap, len, "executions");
    pos = v.body;
    for (int i = 0; i < 2; i++)
        read_varint_at(snap, len, &pos);
    memcpy(c, snap, len);
    c[pos] = 120; /* no such graph */
    snprintf(want, sizeof want, "section 'executions' malformed at byte %zu of %zu (byte %zu of",
             pos - v.body, v.len, pos);
    refused(m, c, len, BB_EDECODE, want, "graph index");

    /* every section one byte short: its reader runs out inside it */
    for (size_t i = 0; i < bbe__snap_n_sections; i++) {
        const bbe__snap_section *sec = &bbe__snap_sections[i];
        v = find_section(snap, len, sec->name);
        size_t n;
        uint8_t *cut = splice_section(snap, len, v, sec->tag, sec->version, snap + v.body,
                                      v.len - 1, &n);
        bb_engine *r = fresh_targets(m, EVERY_TARGET);
        bb_error err = {0};
        assert_int_not_equal(bb_engine_restore(r, cut, n, &err), BB_OK);
        snprintf(want, sizeof want, "section '%s'", sec->name);
        if (!strstr(err.msg, want) || !strstr(err.msg, "of the snapshot"))
            fail_msg("section '%s' one byte short: \"%s\"", sec->name, err.msg);
        bb_engine_free(r);
        free(cut);
    }
    free(c);
    free(snap);
    bb_model_free(m);
}

/* The framing: a file cut short, a section out of place or unknown, a
 * layout version or format this engine does not read, bytes a section's
 * reader does not know. */
static void test_framing_refusals(void **state)
{
    (void)state;
    uint8_t *snap;
    size_t len;
    bb_model *m = every_section_snapshot(&snap, &len);
    section_view v = find_section(snap, len, "timers");
    const bbe__snap_section *timers = section_named("timers");
    char want[96];

    /* truncated inside a section's body, and inside a header */
    snprintf(want, sizeof want, "section 'timers' (byte %zu) declares %zu bytes", v.at, v.len);
    refused(m, snap, v.body + 1, BB_ETRUNC, want, NULL);
    refused(m, snap, v.at + 1, BB_ETRUNC, "ends at byte", "section 'timers'");

    /* an older, a newer format */
    uint8_t *c = malloc(len);
    memcpy(c, snap, len);
    memcpy(c, "BBSNAP2", 8);
    refused(m, c, len, BB_EUNSUPPORTED, "snapshot format BBSNAP2 is older than this engine's "
            "(BBSNAP3)", NULL);
    memcpy(c, "BBSNAP4", 8);
    refused(m, c, len, BB_EUNSUPPORTED, "BBSNAP4 is newer", NULL);
    memcpy(c, "NOTASNAP", 8);
    refused(m, c, len, BB_EDECODE, "not an engine snapshot", NULL);

    /* a layout version this engine does not read */
    size_t n;
    uint8_t *s = splice_section(snap, len, v, timers->tag, timers->version + 1, snap + v.body,
                                v.len, &n);
    refused(m, s, n, BB_EUNSUPPORTED, "section 'timers'", "layout version 2");
    free(s);
    /* a section where another belongs, an unknown one */
    s = splice_section(snap, len, v, section_named("peers")->tag, 1, snap + v.body, v.len, &n);
    refused(m, s, n, BB_EDECODE, "section 'peers' where section 'timers' belongs", NULL);
    free(s);
    s = splice_section(snap, len, v, 99, 1, snap + v.body, v.len, &n);
    refused(m, s, n, BB_EDECODE, "unknown tag 99 where section 'timers' belongs", NULL);
    free(s);
    /* a trailing byte inside a section: refused, not skipped */
    uint8_t *longer = malloc(v.len + 1);
    memcpy(longer, snap + v.body, v.len);
    longer[v.len] = 0;
    s = splice_section(snap, len, v, timers->tag, timers->version, longer, v.len + 1, &n);
    snprintf(want, sizeof want, "section 'timers' ends with 1 byte its reader does not know "
             "(byte %zu of %zu", v.len, v.len + 1);
    refused(m, s, n, BB_EDECODE, want, NULL);
    free(s);
    free(longer);
    /* bytes after the last section */
    uint8_t *more = malloc(len + 1);
    memcpy(more, snap, len);
    more[len] = 0;
    refused(m, more, len + 1, BB_EDECODE, "1 byte after the last section", NULL);
    free(more);
    free(c);
    free(snap);
    bb_model_free(m);
}

/* Every byte of the every-section snapshot flipped in turn (two ways):
 * each restore is refused cleanly or gives an engine that runs — no crash,
 * no leak, no invariant check firing (the tests link the checked engine). */
static void test_every_section_survives_byte_flips(void **state)
{
    (void)state;
    uint8_t *snap;
    size_t len;
    bb_model *m = every_section_snapshot(&snap, &len);
    uint8_t *c = malloc(len);
    size_t restored = 0;
    for (size_t i = 8; i < len; i++) {
        const uint8_t flips[2] = {0x01, 0x80};
        for (int k = 0; k < 2; k++) {
            memcpy(c, snap, len);
            c[i] ^= flips[k];
            bb_engine *r = fresh_targets(m, EVERY_TARGET);
            if (bb_engine_restore(r, c, len, NULL) == BB_OK) {
                restored++;
                fx_run(r, NULL, 1000, 20);
            }
            bb_engine_free(r);
        }
    }
    assert_true(restored > 0); /* a flipped value is still a snapshot */
    free(c);
    free(snap);
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
        cmocka_unit_test(test_every_section_round_trips),
        cmocka_unit_test(test_corrupt_field_names_section_and_offset),
        cmocka_unit_test(test_framing_refusals),
        cmocka_unit_test(test_every_section_survives_byte_flips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
