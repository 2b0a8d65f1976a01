/*
 * test_engine_gates.c — the compiler-inserted wire gates, allow and deny
 * paths with their stable reason labels: DedupGateRx (window), PeerHealth
 * RX/TX (blocklist, allowlist, cooldown), Backoff RX/TX (10 ms doubling to
 * 60 s, cleared on success), DeadlineCheck, the PeerDown / PeerUp
 * transitions of the governor (threshold 5), the default dedup window, and
 * both gate chains between two engines exchanging real envelopes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/engine_fixtures.h"

#define MS 1000000ULL

static bb_model *rx_model(void)
{
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Rx", "", "out");
    fx_recv(m, f, 201, "t", "p", &BB_TYPE_U64);
    fx_op(m, f, FX_SYS, "DedupGateRx", "p", "g1");
    fx_op(m, f, FX_SYS, "PeerHealthGateRx", "g1", "g2");
    fx_op(m, f, FX_SYS, "BackoffGateRx", "g2", "g3");
    fx_op(m, f, FX_SYS, "DeadlineCheck", "g3", "out");
    return m;
}

static bb_engine *install(bb_model *m, const char *t, const bb_engine_config *cfg)
{
    bb_engine *e = fx_engine(9, 7009, cfg);
    bb_error err = {0};
    if (fx_install(e, m, t, &err))
        fail_msg("%s", err.msg);
    return e;
}

/* Deliver one envelope carrying value v to site 201 from peer `from`. */
static void send_value(bb_engine *e, uint8_t from, uint64_t v, uint64_t sent_at, uint64_t deadline)
{
    size_t n;
    uint8_t *buf = fx_envelope_u64(201, v, sent_at, deadline, &n);
    bb_peerid p = fx_peer(from);
    assert_int_equal(bb_engine_deliver_envelope(e, &p, NULL, buf, n, NULL), BB_OK);
    free(buf);
}

/* Poll at now; returns 1 if "out" surfaced, 0 if a gate denied (reason
 * checked), -1 otherwise. */
static int outcome(bb_engine *e, uint64_t now, const char *reason)
{
    fx_log log = {0};
    fx_run(e, &log, now, 5);
    int r = -1;
    if (fx_log_app(&log, "out", 0)) {
        r = 1;
    } else {
        const fx_rec *f = fx_log_nth(&log, BB_STEP_OP_FAILED, 0);
        if (f) {
            r = 0;
            if (reason && !strstr(f->c, reason))
                fail_msg("'%s' not in '%s'", reason, f->c);
        }
    }
    fx_log_free(&log);
    return r;
}

static void test_dedup_gate(void **state)
{
    (void)state;
    bb_model *m = rx_model();
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    cfg.caps.dedup_window = 2;
    bb_engine *e = install(m, "Rx", &cfg);
    send_value(e, 1, 7, 100, 0);
    assert_int_equal(outcome(e, 1, NULL), 1);
    send_value(e, 1, 7, 100, 0); /* the same envelope again */
    assert_int_equal(outcome(e, 1, "DedupGateRx dropped envelope: reason=duplicate"), 0);
    send_value(e, 1, 7, 101, 0); /* same value, a new send */
    assert_int_equal(outcome(e, 1, NULL), 1);
    send_value(e, 1, 8, 102, 0);
    assert_int_equal(outcome(e, 1, NULL), 1);
    send_value(e, 1, 7, 100, 0); /* evicted from the 2-entry window */
    assert_int_equal(outcome(e, 1, NULL), 1);
    assert_int_equal(bb_engine_counter(e, "gate.denied"), 1);
    assert_int_equal(bb_engine_counter(e, "gate.dedup_denied"), 1); /* its own count too */
    bb_engine_free(e);
    bb_model_free(m);
}

/* Rx2: a Bytes site 202 behind DedupGateRx only. */
static bb_model *bytes_rx_model(void)
{
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Rx", "", "out");
    fx_recv(m, f, 202, "t", "p", &BB_TYPE_BYTES);
    fx_op(m, f, FX_SYS, "DedupGateRx", "p", "out");
    return m;
}

/* Deliver an envelope with payload[0..n) for site 202 from peer `from`. */
static void send_bytes(bb_engine *e, uint8_t from, const uint8_t *payload, size_t n,
                       uint64_t sent_at)
{
    fx_fill f = {.site = 202, .payload = payload, .len = n};
    fx_env env = {.fills = &f, .n_fills = 1, .sent_at_ns = sent_at};
    size_t len;
    uint8_t *buf = fx_envelope(&env, &len);
    bb_peerid p = fx_peer(from);
    assert_int_equal(bb_engine_deliver_envelope(e, &p, NULL, buf, len, NULL), BB_OK);
    free(buf);
}

/* The dedup key hashes a large payload's ends only (docs/DECISIONS.md):
 * a replayed envelope is still dropped, envelopes that differ anywhere in
 * the hashed part or in their sender are not, and a payload that differs
 * only in its middle is told apart by sent_at_ns, as every sender makes it
 * strictly increasing. */
static void test_dedup_large_payloads(void **state)
{
    (void)state;
    bb_model *m = bytes_rx_model();
    bb_engine *e = install(m, "Rx", NULL);
    size_t n = 1 << 20;
    uint8_t *a = calloc(1, n), *b = calloc(1, n);
    assert_non_null(a);
    assert_non_null(b);
    b[n / 2] = 1; /* differs from a in the middle only */
    send_bytes(e, 1, a, n, 100);
    assert_int_equal(outcome(e, 1, NULL), 1);
    send_bytes(e, 1, a, n, 100); /* replayed */
    assert_int_equal(outcome(e, 1, "DedupGateRx dropped envelope: reason=duplicate"), 0);
    send_bytes(e, 2, a, n, 100); /* the same bytes from another peer */
    assert_int_equal(outcome(e, 1, NULL), 1);
    send_bytes(e, 1, b, n, 101); /* a new send */
    assert_int_equal(outcome(e, 1, NULL), 1);
    send_bytes(e, 1, b, n, 101); /* replayed */
    assert_int_equal(outcome(e, 1, "reason=duplicate"), 0);
    b[n / 2] = 0;
    b[10] = 1; /* differs in the first 2 KiB */
    send_bytes(e, 1, b, n, 100);
    assert_int_equal(outcome(e, 1, NULL), 1);
    b[10] = 0;
    b[n - 10] = 1; /* in the last 2 KiB */
    send_bytes(e, 1, b, n, 100);
    assert_int_equal(outcome(e, 1, NULL), 1);
    send_bytes(e, 1, a, n - 1, 100); /* a different length */
    assert_int_equal(outcome(e, 1, NULL), 1);
    send_bytes(e, 1, a, 4096, 100); /* small payloads are hashed whole */
    assert_int_equal(outcome(e, 1, NULL), 1);
    a[2048] = 1;
    send_bytes(e, 1, a, 4096, 100);
    assert_int_equal(outcome(e, 1, NULL), 1);
    send_bytes(e, 1, a, 4096, 100);
    assert_int_equal(outcome(e, 1, "reason=duplicate"), 0);
    assert_int_equal(bb_engine_counter(e, "gate.denied"), 3);
    free(a);
    free(b);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_peer_health_rx(void **state)
{
    (void)state;
    bb_model *m = rx_model();
    bb_engine *e = install(m, "Rx", NULL);
    bb_peerid p1 = fx_peer(1), p2 = fx_peer(2);
    assert_int_equal(bb_engine_block_peer(e, &p1, true), BB_OK);
    send_value(e, 1, 1, 1, 0);
    assert_int_equal(outcome(e, 1, "PeerHealthGateRx dropped envelope: reason=blocklisted"), 0);
    send_value(e, 2, 1, 2, 0);
    assert_int_equal(outcome(e, 1, NULL), 1);
    assert_int_equal(bb_engine_block_peer(e, &p1, false), BB_OK);
    assert_int_equal(bb_engine_allow_peer(e, &p2, true), BB_OK);
    send_value(e, 3, 1, 3, 0);
    assert_int_equal(outcome(e, 1, "reason=not_allowlisted"), 0);
    send_value(e, 2, 1, 4, 0);
    assert_int_equal(outcome(e, 1, NULL), 1);
    assert_int_equal(bb_engine_allow_peer(e, &p2, false), BB_OK);
    send_value(e, 3, 1, 5, 0); /* empty allowlist allows everyone again */
    assert_int_equal(outcome(e, 1, NULL), 1);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_backoff_rx(void **state)
{
    (void)state;
    bb_model *m = rx_model();
    bb_engine *e = install(m, "Rx", NULL);
    fx_run(e, NULL, 1000 * MS, 1); /* the engine learns the time */
    bb_peerid p1 = fx_peer(1);
    bb_engine_report_send(e, &p1, false); /* next retry at +10 ms */
    send_value(e, 1, 1, 1, 0);
    assert_int_equal(outcome(e, 1005 * MS, "BackoffGateRx dropped envelope: reason=cooldown"), 0);
    send_value(e, 1, 1, 2, 0);
    assert_int_equal(outcome(e, 1010 * MS, NULL), 1);
    bb_engine_free(e);
    bb_model_free(m);
}

/* Deadlines are the sender's absolute time; the receiver moves them onto
 * its own clock by the sender's offset (the least arrival - sent_at seen),
 * so skew costs nothing while a delay beyond the fastest transit is
 * charged (issue 21: a client 3 s ahead dropped every request). */
static void test_deadline_check(void **state)
{
    (void)state;
    bb_model *m = rx_model();
    bb_engine *e = install(m, "Rx", NULL);
    bb_peerid p1 = fx_peer(1), p2 = fx_peer(2);
    uint8_t a[32];
    bb_engine_addr addr = {a, fx_addr(9, a)};
    assert_int_equal(bb_engine_add_peer(e, &p1, &addr, 1, NULL), BB_OK);
    assert_int_equal(bb_engine_add_peer(e, &p2, &addr, 1, NULL), BB_OK);
    /* peer 1, on our clock: sent at 1000, 500 ns to live, arrives at once */
    send_value(e, 1, 1, 1000, 1500);
    assert_int_equal(outcome(e, 1000, NULL), 1);
    /* the same peer, held up 1000 ns longer than that: past its budget */
    send_value(e, 1, 1, 2000, 2500);
    assert_int_equal(outcome(e, 3000, "DeadlineCheck dropped envelope: reason=deadline_exceeded"), 0);
    /* peer 2 runs 5 s ahead of us: its stamps are all "in the future" and
     * its deadline is met (and one 5 s behind: in the past, met too) */
    uint64_t ahead = 5000000000ull;
    send_value(e, 2, 1, 4000 + ahead, 4500 + ahead);
    assert_int_equal(outcome(e, 4000, NULL), 1);
    send_value(e, 2, 1, 5000 + ahead, 5400 + ahead);
    assert_int_equal(outcome(e, 5100, NULL), 1);
    /* a deadline that had passed when it was sent */
    send_value(e, 1, 1, 6000, 5000);
    assert_int_equal(outcome(e, 6000, "DeadlineCheck dropped envelope: reason=deadline_exceeded"), 0);
    send_value(e, 1, 1, 7000, 0); /* no deadline */
    assert_int_equal(outcome(e, 9000, NULL), 1);
    bb_engine_free(e);
    bb_model_free(m);
}

static bb_model *tx_model(void)
{
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Tx", "x", "out");
    bb_peerid p2 = fx_peer(2);
    bb_node *g = fx_op(m, f, FX_SYS, "PeerHealthGateTx", "x", "a");
    fx_bytes_attr(m, g, "peer", p2.bytes, p2.len);
    g = fx_op(m, f, FX_SYS, "BackoffGateTx", "a", "out");
    fx_bytes_attr(m, g, "peer", p2.bytes, p2.len);
    return m;
}

static int tx_outcome(bb_engine *e, uint64_t now, const char *reason)
{
    bb_value *v = bb_value_u64(&BB_TYPE_U64, 1);
    bb_engine_input in = {.name = "x", .value = v};
    assert_int_equal(bb_engine_invoke(e, "Tx", &in, 1, NULL, NULL), BB_OK);
    bb_value_unref(v);
    return outcome(e, now, reason);
}

static void test_tx_gates_and_backoff_schedule(void **state)
{
    (void)state;
    bb_model *m = tx_model();
    bb_engine *e = install(m, "Tx", NULL);
    bb_peerid p2 = fx_peer(2);
    assert_int_equal(tx_outcome(e, 1 * MS, NULL), 1);
    bb_engine_block_peer(e, &p2, true);
    assert_int_equal(tx_outcome(e, 1 * MS, "PeerHealthGateTx dropped envelope: reason=blocklisted"), 0);
    bb_engine_block_peer(e, &p2, false);
    /* failures at t=1ms: retry delays 10, 20, 40 ms ... */
    uint64_t t = 1 * MS;
    uint64_t delay = 10 * MS;
    for (int k = 1; k <= 4; k++) {
        bb_engine_report_send(e, &p2, false);
        assert_int_equal(tx_outcome(e, t + delay - 1, "PeerHealthGateTx dropped envelope: reason=cooldown retry_ns="), 0);
        assert_int_equal(tx_outcome(e, t + delay, NULL), 1);
        t += delay;
        delay *= 2;
    }
    /* the cap: many failures never wait longer than 60 s */
    for (int k = 0; k < 30; k++)
        bb_engine_report_send(e, &p2, false);
    assert_int_equal(tx_outcome(e, t + 60000 * MS - 1, "reason=cooldown"), 0);
    assert_int_equal(tx_outcome(e, t + 60000 * MS, NULL), 1);
    /* a success clears the state */
    bb_engine_report_send(e, &p2, false);
    bb_engine_report_send(e, &p2, true);
    assert_int_equal(tx_outcome(e, t + 60000 * MS, NULL), 1);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_backoff_tx_alone(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Tx", "x", "out");
    bb_peerid p2 = fx_peer(2);
    bb_node *g = fx_op(m, f, FX_SYS, "BackoffGateTx", "x", "out");
    fx_bytes_attr(m, g, "peer", p2.bytes, p2.len);
    bb_engine *e = install(m, "Tx", NULL);
    fx_run(e, NULL, 5 * MS, 1);
    bb_engine_report_send(e, &p2, false);
    assert_int_equal(tx_outcome(e, 10 * MS, "BackoffGateTx dropped envelope: reason=cooldown"), 0);
    assert_int_equal(tx_outcome(e, 15 * MS, NULL), 1);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_peer_down_and_up(void **state)
{
    (void)state;
    bb_model *m = tx_model();
    bb_engine *e = install(m, "Tx", NULL);
    bb_peerid p2 = fx_peer(2);
    fx_log log = {0};
    for (int k = 0; k < 4; k++)
        bb_engine_report_send(e, &p2, false);
    fx_run(e, &log, 1, 2);
    assert_int_equal(fx_log_count(&log, BB_STEP_PEER_DOWN), 0);
    bb_engine_report_send(e, &p2, false); /* the 5th consecutive failure */
    bb_engine_report_send(e, &p2, false);
    bb_steps s;
    bb_steps_init(&s);
    bb_engine_poll(e, 2, &s);
    for (size_t i = 0; i < s.n; i++)
        fx_log_add(&log, &s.v[i]);
    assert_int_equal(fx_log_count(&log, BB_STEP_PEER_DOWN), 1);
    assert_true(bb_peerid_equal(&fx_log_nth(&log, BB_STEP_PEER_DOWN, 0)->peer, &p2));
    bb_engine_report_send(e, &p2, true);
    bb_engine_poll(e, 3, &s);
    for (size_t i = 0; i < s.n; i++)
        fx_log_add(&log, &s.v[i]);
    assert_int_equal(fx_log_count(&log, BB_STEP_PEER_UP), 1);
    bb_steps_free(&s);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

/* The default dedup window holds the last 8192 envelopes. */
static void test_dedup_default_window(void **state)
{
    (void)state;
    bb_model *m = rx_model();
    bb_engine *e = install(m, "Rx", NULL);
    bb_engine_caps caps;
    bb_engine_caps_default(&caps);
    assert_int_equal(caps.dedup_window, 8192);
    for (uint64_t i = 0; i <= 8192; i++) { /* 8193 distinct envelopes */
        send_value(e, 1, 1, 1000 + i, 0);
        if (i % 1000 == 999)
            fx_run(e, NULL, 1, 3);
    }
    fx_run(e, NULL, 1, 3);
    assert_int_equal(bb_engine_counter(e, "app.events"), 8193);
    send_value(e, 1, 1, 1000 + 8192, 0); /* the newest: still in the window */
    assert_int_equal(outcome(e, 1, "reason=duplicate"), 0);
    send_value(e, 1, 1, 1000, 0); /* the oldest was evicted */
    assert_int_equal(outcome(e, 1, NULL), 1);
    assert_int_equal(bb_engine_counter(e, "gate.denied"), 1);
    bb_engine_free(e);
    bb_model_free(m);
}

/* ---- the gate chains the compiler inserts, between two engines ------------------------ */

/* A: x -> PeerHealthGateTx(B) -> BackoffGateTx(B) -> Send(port g, deadline 1 ms)
 * B: Recv(port g) -> DedupGateRx -> PeerHealthGateRx -> BackoffGateRx -> DeadlineCheck -> out */
static bb_model *chain_model(void)
{
    bb_model *m = fx_model();
    bb_function *tx = fx_fn(m, "A", "x,peers", "");
    bb_peerid pb = fx_peer(2);
    bb_node *g = fx_op(m, tx, FX_SYS, "PeerHealthGateTx", "x", "h");
    fx_bytes_attr(m, g, "peer", pb.bytes, pb.len);
    g = fx_op(m, tx, FX_SYS, "BackoffGateTx", "h", "b");
    fx_bytes_attr(m, g, "peer", pb.bytes, pb.len);
    bb_node *s = fx_op(m, tx, FX_WIRE, "Send", "b,peers", "");
    fx_meta(m, s, "ai.bytesandbrains.port", "g");
    fx_int(m, s, "deadline_ns", 1 * (int64_t)MS);
    bb_function *rx = fx_fn(m, "B", "", "out");
    bb_node *r = fx_op(m, rx, FX_WIRE, "Recv", "", "t,p");
    fx_meta(m, r, "ai.bytesandbrains.port", "g");
    fx_type(m, rx, "p", &BB_TYPE_U64);
    fx_op(m, rx, FX_SYS, "DedupGateRx", "p", "g1");
    fx_op(m, rx, FX_SYS, "PeerHealthGateRx", "g1", "g2");
    fx_op(m, rx, FX_SYS, "BackoffGateRx", "g2", "g3");
    fx_op(m, rx, FX_SYS, "DeadlineCheck", "g3", "out");
    return m;
}

typedef struct pair {
    bb_engine *a, *b;
    uint8_t *last;    /* the last envelope A sent (for replays) */
    size_t last_len;
} pair;

/* Invoke A with v at time ta and carry its envelopes to B; returns how many.
 * a_reason: the denial A's TX gates must report (NULL: none may fail). */
static int a_sends(pair *p, uint64_t v, uint64_t ta, const char *a_reason)
{
    bb_value *x = bb_value_u64(&BB_TYPE_U64, v);
    bb_peerid pb = fx_peer(2);
    bb_value *items[1] = {bb_value_bytes(&BB_TYPE_PEER_ID, pb.bytes, pb.len)};
    bb_value *peers = bb_value_list(&BB_TYPE_PEER_ID_VEC, items, 1);
    bb_engine_input in[2] = {{.name = "x", .value = x}, {.name = "peers", .value = peers}};
    assert_int_equal(bb_engine_invoke(p->a, "A", in, 2, NULL, NULL), BB_OK);
    bb_value_unref(x);
    bb_value_unref(peers);
    bb_steps s;
    bb_steps_init(&s);
    bb_engine_poll(p->a, ta, &s);
    int carried = 0;
    bool denied = false;
    for (size_t i = 0; i < s.n; i++) {
        if (s.v[i].kind == BB_STEP_OP_FAILED) {
            denied = true;
            if (!a_reason || !strstr(s.v[i].u.op_failed.message, a_reason))
                fail_msg("A: unexpected failure '%s'", s.v[i].u.op_failed.message);
        }
        if (s.v[i].kind != BB_STEP_SEND_ENVELOPE)
            continue;
        free(p->last);
        p->last_len = s.v[i].u.send.len;
        p->last = malloc(p->last_len);
        memcpy(p->last, s.v[i].u.send.bytes, p->last_len);
        assert_int_equal(bb_engine_deliver_envelope(p->b, bb_engine_peer_id(p->a), NULL, p->last,
                                                    p->last_len, NULL), BB_OK);
        carried++;
    }
    if (a_reason && !denied)
        fail_msg("A: expected a denial with '%s'", a_reason);
    bb_steps_free(&s);
    return carried;
}

static void replay(pair *p)
{
    assert_int_equal(bb_engine_deliver_envelope(p->b, bb_engine_peer_id(p->a), NULL, p->last,
                                                p->last_len, NULL), BB_OK);
}

static void test_gate_chains_between_two_engines(void **state)
{
    (void)state;
    bb_model *m = chain_model();
    pair p = {fx_engine(1, 7001, NULL), fx_engine(2, 7002, NULL), NULL, 0};
    assert_int_equal(fx_install(p.a, m, "A", NULL), BB_OK);
    assert_int_equal(fx_install(p.b, m, "B", NULL), BB_OK);
    bb_peerid pa = fx_peer(1), pb = fx_peer(2), pc = fx_peer(3);
    uint8_t ab[32];
    bb_engine_addr addr_b = {ab, fx_addr(7002, ab)};
    assert_int_equal(bb_engine_add_peer(p.a, &pb, &addr_b, 1, NULL), BB_OK);
    uint64_t t = 1000 * MS;
    /* every gate allows */
    assert_int_equal(a_sends(&p, 1, t, NULL), 1);
    assert_int_equal(outcome(p.b, t, NULL), 1);
    /* DedupGateRx: the network delivers the same envelope twice */
    replay(&p);
    assert_int_equal(outcome(p.b, t, "DedupGateRx dropped envelope: reason=duplicate"), 0);
    /* PeerHealthGateRx: B blocks A, then allows only C */
    bb_engine_block_peer(p.b, &pa, true);
    assert_int_equal(a_sends(&p, 2, t, NULL), 1);
    assert_int_equal(outcome(p.b, t, "PeerHealthGateRx dropped envelope: reason=blocklisted"), 0);
    bb_engine_block_peer(p.b, &pa, false);
    bb_engine_allow_peer(p.b, &pc, true);
    assert_int_equal(a_sends(&p, 3, t, NULL), 1);
    assert_int_equal(outcome(p.b, t, "PeerHealthGateRx dropped envelope: reason=not_allowlisted"), 0);
    bb_engine_allow_peer(p.b, &pa, true);
    assert_int_equal(a_sends(&p, 4, t, NULL), 1);
    assert_int_equal(outcome(p.b, t, NULL), 1);
    bb_engine_allow_peer(p.b, &pa, false);
    bb_engine_allow_peer(p.b, &pc, false);
    /* BackoffGateRx: B's last send to A failed, A is cooling down for 10 ms */
    bb_engine_report_send(p.b, &pa, false);
    assert_int_equal(a_sends(&p, 5, t, NULL), 1);
    assert_int_equal(outcome(p.b, t + 9 * MS, "BackoffGateRx dropped envelope: reason=cooldown"), 0);
    assert_int_equal(a_sends(&p, 6, t + 10 * MS, NULL), 1);
    assert_int_equal(outcome(p.b, t + 10 * MS, NULL), 1);
    t += 10 * MS;
    /* DeadlineCheck: the envelope (deadline 1 ms after it left) lands late */
    assert_int_equal(a_sends(&p, 7, t, NULL), 1);
    assert_int_equal(outcome(p.b, t + 2 * MS, "DeadlineCheck dropped envelope: reason=deadline_exceeded"), 0);
    t += 2 * MS;
    /* PeerHealthGateTx: A blocks B: nothing leaves A */
    bb_engine_block_peer(p.a, &pb, true);
    assert_int_equal(a_sends(&p, 8, t, "PeerHealthGateTx dropped envelope: reason=blocklisted"), 0);
    bb_engine_block_peer(p.a, &pb, false);
    /* the transport reports a failed send: A cools B down (10 ms, then 20 ms) */
    bb_engine_report_send(p.a, &pb, false);
    assert_int_equal(a_sends(&p, 9, t + 5 * MS, "reason=cooldown"), 0);
    assert_int_equal(a_sends(&p, 10, t + 10 * MS, NULL), 1);
    assert_int_equal(outcome(p.b, t + 10 * MS, NULL), 1);
    bb_engine_report_send(p.a, &pb, false);
    assert_int_equal(a_sends(&p, 11, t + 25 * MS, "reason=cooldown"), 0);
    assert_int_equal(a_sends(&p, 12, t + 30 * MS, NULL), 1);
    assert_int_equal(outcome(p.b, t + 30 * MS, NULL), 1);
    assert_int_equal(bb_engine_counter(p.a, "gate.denied"), 3);
    assert_int_equal(bb_engine_counter(p.b, "gate.denied"), 5);
    for (int i = 0; i < 2; i++) {
        bb_engine *e = i ? p.b : p.a;
        assert_int_equal(bb_engine_live_executions(e), 0);
        assert_int_equal(bb_engine_live_slots(e), 0);
    }
    free(p.last);
    bb_engine_free(p.a);
    bb_engine_free(p.b);
    bb_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dedup_gate),
        cmocka_unit_test(test_dedup_large_payloads),
        cmocka_unit_test(test_peer_health_rx),
        cmocka_unit_test(test_backoff_rx),
        cmocka_unit_test(test_deadline_check),
        cmocka_unit_test(test_tx_gates_and_backoff_schedule),
        cmocka_unit_test(test_backoff_tx_alone),
        cmocka_unit_test(test_peer_down_and_up),
        cmocka_unit_test(test_dedup_default_window),
        cmocka_unit_test(test_gate_chains_between_two_engines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
