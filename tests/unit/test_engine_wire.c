/*
 * test_engine_wire.c — the wire opset between in-process engines:
 * request/response round trip (ENGINE.md Part 18), fire-and-forget sends,
 * PeerResolveFailed, loopback, address-book merge, envelope bytes checked
 * against the protobuf-c code generated from proto/bb_envelope.proto,
 * partial delivery and every WireReceiveError kind, control-plane fills,
 * backend materialization, batched-request deadlines and quorum, and a
 * federated round across three engines.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bb/multiaddr.h"
#include "bb/uvarint.h"
#include "bb_envelope.pb-c.h"
#include "support/engine_fixtures.h"

static bb_engine *node(uint8_t seed, bb_model *m, const char *targets, const bb_engine_config *cfg)
{
    bb_engine *e = fx_engine(seed, (uint16_t)(7000 + seed), cfg);
    assert_non_null(e);
    bb_error err = {0};
    if (fx_install(e, m, targets, &err))
        fail_msg("install %s: %s", targets, err.msg);
    return e;
}

static void know(bb_engine *e, uint8_t seed) { assert_int_equal(fx_know(e, seed), BB_OK); }

static bb_value *peers_of(const uint8_t *seeds, size_t n)
{
    bb_value *items[8];
    for (size_t i = 0; i < n; i++) {
        bb_peerid p = fx_peer(seeds[i]);
        items[i] = bb_value_bytes(&BB_TYPE_PEER_ID, p.bytes, p.len);
    }
    return bb_value_list(&BB_TYPE_PEER_ID_VEC, items, n);
}

static void invoke2(bb_engine *e, const char *target, const char *n1, bb_value *v1, const char *n2,
                    bb_value *v2)
{
    bb_engine_input in[2] = {{.name = n1, .value = v1}, {.name = n2, .value = v2}};
    bb_error err = {0};
    if (bb_engine_invoke(e, target, in, v2 ? 2 : 1, NULL, &err))
        fail_msg("invoke: %s", err.msg);
    bb_value_unref(v1);
    bb_value_unref(v2);
}

/* Client: SendReqBatched(x, peers) -> RecvRespBatched -> "batch".
 * Server: RecvReq -> PassThrough -> SendResp. Same port on both sides. */
static bb_model *rr_model(int64_t deadline_ns, int64_t quorum)
{
    bb_model *m = fx_model();
    bb_function *c = fx_fn(m, "Client", "x,peers", "batch");
    fx_type(m, c, "x", &BB_TYPE_U64);
    bb_node *s = fx_op(m, c, FX_WIRE, "SendReqBatched", "x,peers", "rid");
    fx_meta(m, s, "ai.bytesandbrains.port", "ping");
    if (deadline_ns)
        fx_int(m, s, "deadline_ns", deadline_ns);
    if (quorum >= 0)
        fx_int(m, s, "quorum", quorum);
    fx_op(m, c, FX_WIRE, "RecvRespBatched", "rid", "t,batch");
    bb_function *v = fx_fn(m, "Server", "", "");
    bb_node *r = fx_op(m, v, FX_WIRE, "RecvReq", "", "rt,p,rid");
    fx_meta(m, r, "ai.bytesandbrains.port", "ping");
    fx_type(m, v, "p", &BB_TYPE_U64);
    fx_op(m, v, FX_SYS, "PassThrough", "p", "q");
    fx_op(m, v, FX_WIRE, "SendResp", "q,rid", "");
    return m;
}

/* Grab the first SendEnvelope of one poll and check it decodes with protobuf-c. */
static void test_request_response_round_trip(void **state)
{
    (void)state;
    bb_model *m = rr_model(0, -1);
    bb_engine *a = node(1, m, "Client", NULL);
    bb_engine *b = node(2, m, "Server", NULL);
    know(a, 2);
    uint8_t srv = 2;
    invoke2(a, "Client", "x", bb_value_u64(&BB_TYPE_U64, 5), "peers", peers_of(&srv, 1));
    bb_steps s;
    bb_steps_init(&s);
    bb_engine_poll(a, 100, &s);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.v[0].kind, BB_STEP_SEND_ENVELOPE);
    bb_peerid pb = fx_peer(2);
    assert_true(bb_peerid_equal(&s.v[0].u.send.peer, &pb));
    assert_int_equal(s.v[0].u.send.n_addrs, 1);
    Bb__Core__WireEnvelope *env = bb__core__wire_envelope__unpack(NULL, s.v[0].u.send.len, s.v[0].u.send.bytes);
    assert_non_null(env);
    uint8_t addr_a[32], addr_b[32];
    size_t la = fx_addr(7001, addr_a), lb = fx_addr(7002, addr_b);
    assert_int_equal(env->n_dest_peer_addresses, 1);
    assert_memory_equal(env->dest_peer_addresses[0].data, addr_b, lb);
    assert_int_equal(env->n_src_peer_addresses, 1);
    assert_memory_equal(env->src_peer_addresses[0].data, addr_a, la);
    assert_non_null(env->correlation);
    assert_int_equal(env->correlation->kind, BB__CORE__CORRELATION_KIND__REQUEST);
    assert_true(env->correlation->wire_req_id != 0);
    assert_int_equal(env->sent_at_ns, 100);
    assert_int_equal(env->n_fills, 1);
    bb_suffix sfx;
    assert_int_equal(bb_suffix_parse(env->fills[0]->dest_suffix.data, env->fills[0]->dest_suffix.len, &sfx, NULL), BB_OK);
    assert_int_equal(sfx.kind, BB_SUFFIX_SITE);
    assert_int_equal(env->fills[0]->payload.len, 8);
    assert_int_equal(env->fills[0]->payload.data[0], 5);
    /* the engine re-encodes the protobuf-c packing byte for byte */
    size_t packed = bb__core__wire_envelope__get_packed_size(env);
    assert_int_equal(packed, s.v[0].u.send.len);
    uint8_t *re = malloc(packed);
    bb__core__wire_envelope__pack(env, re);
    assert_memory_equal(re, s.v[0].u.send.bytes, packed);
    free(re);
    bb__core__wire_envelope__free_unpacked(env, NULL);
    /* carry it to B by hand, then let the network finish */
    assert_int_equal(bb_engine_deliver_envelope(b, bb_engine_peer_id(a), NULL, s.v[0].u.send.bytes,
                                                s.v[0].u.send.len, NULL), BB_OK);
    bb_steps_free(&s);
    fx_net net = {0};
    net.now = 200;
    fx_net_add(&net, a);
    fx_net_add(&net, b);
    fx_net_run(&net, 20);
    const fx_rec *r = fx_log_app(&net.log[0], "batch", 0);
    assert_non_null(r);
    assert_int_equal(r->value->type->kind, BB_VK_RESPONSE_BATCH);
    assert_int_equal(r->value->u.batch.n, 1);
    assert_int_equal(r->value->u.batch.items[0]->u.u64, 5);
    assert_memory_equal(r->value->u.batch.peers[0]->u.bytes.data, pb.bytes, pb.len);
    /* B learned A's address from src_peer_addresses */
    bb_peerid pa = fx_peer(1);
    const bb_engine_addr *got;
    assert_int_equal(bb_engine_peer_addrs(b, &pa, &got), 1);
    assert_memory_equal(got[0].data, addr_a, la);
    assert_int_equal(bb_engine_counter(b, "envelopes.out"), 1);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(bb_engine_live_slots(net.e[i]), 0);
        assert_int_equal(bb_engine_live_executions(net.e[i]), 0);
    }
    fx_net_free(&net);
    bb_model_free(m);
}

static bb_model *send_model(bool trigger_only, const char *wire_site)
{
    bb_model *m = fx_model();
    bb_function *c = fx_fn(m, "Tx", "x,peers", "");
    bb_node *s = fx_op(m, c, FX_WIRE, "Send", "x,peers", "");
    fx_meta(m, s, "ai.bytesandbrains.port", "data");
    if (trigger_only)
        fx_meta(m, s, "ai.bytesandbrains.wire_transport", "trigger_only");
    bb_function *v = fx_fn(m, "Rx", "", "got,tick");
    bb_node *r = fx_op(m, v, FX_WIRE, "Recv", "", "tick,got");
    fx_meta(m, r, wire_site ? "ai.bytesandbrains.wire_site" : "ai.bytesandbrains.port",
            wire_site ? wire_site : "data");
    fx_type(m, v, "got", &BB_TYPE_U64);
    return m;
}

static void test_send_and_peer_resolve_failed(void **state)
{
    (void)state;
    bb_model *m = send_model(false, NULL);
    bb_engine *a = node(1, m, "Tx", NULL);
    bb_engine *b = node(2, m, "Rx", NULL);
    know(a, 2);
    fx_net net = {0};
    fx_net_add(&net, a);
    fx_net_add(&net, b);
    uint8_t to[2] = {2, 9}; /* 9 is unknown to the address book */
    invoke2(a, "Tx", "x", bb_value_u64(&BB_TYPE_U64, 33), "peers", peers_of(to, 2));
    fx_net_run(&net, 10);
    assert_int_equal(fx_log_count(&net.log[0], BB_STEP_SEND_ENVELOPE), 1);
    const fx_rec *pr = fx_log_nth(&net.log[0], BB_STEP_PEER_RESOLVE_FAILED, 0);
    assert_non_null(pr);
    bb_peerid p9 = fx_peer(9);
    assert_true(bb_peerid_equal(&pr->peer, &p9));
    assert_int_equal(bb_engine_counter(a, "peer.resolve_failed"), 1);
    const fx_rec *got = fx_log_app(&net.log[1], "got", 0);
    assert_non_null(got);
    assert_int_equal(got->value->u.u64, 33);
    assert_non_null(fx_log_app(&net.log[1], "tick", 0));
    fx_net_free(&net);
    bb_model_free(m);
}

static void test_trigger_only_and_loopback(void **state)
{
    (void)state;
    bb_model *m = send_model(true, NULL);
    bb_engine *a = node(1, m, "Tx,Rx", NULL); /* both partitions on one node */
    fx_log log = {0};
    uint8_t self = 1;
    invoke2(a, "Tx", "x", bb_value_u64(&BB_TYPE_U64, 8), "peers", peers_of(&self, 1));
    fx_run(a, &log, 1, 10);
    assert_int_equal(fx_log_count(&log, BB_STEP_SEND_ENVELOPE), 0); /* loopback */
    assert_non_null(fx_log_app(&log, "tick", 0));
    assert_null(fx_log_app(&log, "got", 0)); /* trigger-only: no payload */
    assert_int_equal(bb_engine_counter(a, "envelopes.in"), 1);
    fx_log_free(&log);
    bb_engine_free(a);
    bb_model_free(m);
}

/* ---- inbound error paths with hand-packed envelopes ------------------------------------ */

static uint8_t *pack(const fx_fill *fs, size_t n, int corr, uint64_t wire_id, uint64_t deadline,
                     size_t *len)
{
    fx_env env = {.fills = fs, .n_fills = n, .corr = corr, .wire_req_id = wire_id,
                  .deadline_ns = deadline};
    return fx_envelope(&env, len);
}

static void deliver(bb_engine *e, uint8_t from, const uint8_t *b, size_t n)
{
    bb_peerid p = fx_peer(from);
    assert_int_equal(bb_engine_deliver_envelope(e, &p, NULL, b, n, NULL), BB_OK);
}

/* pack, then deliver from peer `from`. */
static void deliver_fills(bb_engine *e, uint8_t from, const fx_fill *fs, size_t n, int corr,
                          uint64_t wire_id)
{
    size_t len;
    uint8_t *env = pack(fs, n, corr, wire_id, 0, &len);
    deliver(e, from, env, len);
    free(env);
}

/* A fill for op `op` of component 1; sfx (64 bytes) holds its suffix. */
static fx_fill control_fill(const char *op, uint8_t *sfx, const uint8_t *payload, size_t len)
{
    size_t sl;
    assert_int_equal(bb_suffix_component_op(2, op, sfx, 64, &sl, NULL), BB_OK); /* slot id of echo */
    return (fx_fill){.suffix = sfx, .suffix_len = sl, .payload = payload, .len = len};
}

/* Sink: Recv sites 101 (U64), 102 (U64), 103 (f32 via backend), 104 (f32 via
 * backend), 105 (Composite) -> outputs a..e. */
static bb_model *sink_model(void)
{
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Sink", "", "a,b,c,d,e");
    const char *outs[5] = {"a", "b", "c", "d", "e"};
    const bb_type_node *types[5] = {&BB_TYPE_U64, &BB_TYPE_U64, &BB_TYPE_TENSOR_F32,
                                    &BB_TYPE_TENSOR_F32, &BB_TYPE_COMPOSITE};
    const char *trig[5] = {"t0", "t1", "t2", "t3", "t4"};
    for (int i = 0; i < 5; i++) {
        bb_node *r = fx_recv(m, f, 101 + (uint64_t)i, trig[i], outs[i], types[i]);
        if (i == 2 || i == 3)
            fx_meta(m, r, "ai.bytesandbrains.recv_slot_id", "1");
    }
    fx_bind(m, "Sink", "compute", "Backend|test::Backend|1");
    fx_bind(m, "Sink", "echo", "Protocol|test::Echo|2");
    return m;
}

static void test_partial_delivery_and_rx_errors(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = sink_model();
    bb_engine *e = node(2, m, "Sink", NULL);
    uint8_t good[8] = {42}, bad3[3] = {1, 2, 3}, garbage[4] = {0xff, 0xff, 0xff, 0xff};
    /* an int64 tensor for the f32 site: the backend decodes it, the type does not match */
    int64_t dim = 2, iv[2] = {1, 2};
    bb_value *i64 = bb_value_tensor_copy(BB_DT_INT64, 1, &dim, iv, sizeof iv);
    uint8_t *i64b;
    size_t i64l;
    assert_int_equal(bb_value_encode(i64, &i64b, &i64l, NULL), BB_OK);
    bb_value_unref(i64);
    /* a Composite whose child carries a wire hash nobody knows */
    uint8_t comp[32];
    size_t cl = bb_uvarint_encode(1, comp);
    uint64_t h = 0x1234567890abcdefULL;
    memcpy(comp + cl, &h, 8);
    cl += 8;
    cl += bb_uvarint_encode(0, comp + cl);
    uint8_t unknown_sfx[16];
    size_t usl;
    bb_suffix_site(999999, unknown_sfx, 16, &usl, NULL);
    fx_fill fs[7] = {
        {.site = 101, .payload = good, .len = 8},      /* delivered */
        {.site = 102, .payload = bad3, .len = 3},      /* DecodeFailed */
        {.site = 999999, .payload = good, .len = 8},   /* unknown site: dropped silently */
        {.site = 103, .payload = garbage, .len = 4},   /* BackendMaterializeFailed */
        {.site = 104, .payload = i64b, .len = i64l},   /* TypeMismatch */
        {.site = 105, .payload = comp, .len = cl},     /* UnknownTypeHash */
        {.suffix = garbage, .suffix_len = 4, .payload = good, .len = 8}, /* bad suffix */
    };
    deliver_fills(e, 1, fs, 7, 0, 0);
    free(i64b);
    deliver(e, 1, garbage, 4); /* not an envelope at all */
    fx_log log = {0};
    fx_run(e, &log, 1, 5);
    const fx_rec *a = fx_log_app(&log, "a", 0);
    assert_non_null(a);
    assert_int_equal(a->value->u.u64, 42);
    assert_int_equal(fx_log_count(&log, BB_STEP_APP_EVENT), 1);
    assert_non_null(fx_log_infra(&log, BB_INFRA_WIRE_RECEIVE_ERROR, BB_WIRE_RX_DECODE_FAILED));
    assert_non_null(fx_log_infra(&log, BB_INFRA_WIRE_RECEIVE_ERROR, BB_WIRE_RX_BACKEND_MATERIALIZE_FAILED));
    assert_non_null(fx_log_infra(&log, BB_INFRA_WIRE_RECEIVE_ERROR, BB_WIRE_RX_TYPE_MISMATCH));
    assert_non_null(fx_log_infra(&log, BB_INFRA_WIRE_RECEIVE_ERROR, BB_WIRE_RX_UNKNOWN_TYPE_HASH));
    assert_non_null(strstr(fx_log_infra(&log, BB_INFRA_WIRE_RECEIVE_ERROR, BB_WIRE_RX_DECODE_FAILED)->c, "site b"));
    assert_non_null(fx_log_infra(&log, BB_INFRA_ENVELOPE_MALFORMED, -1));
    assert_int_equal(bb_engine_counter(e, "wire.unroutable"), 2);
    const fx_rec *un = fx_log_infra(&log, BB_INFRA_UNROUTABLE_FILL, -1); /* one per envelope */
    assert_non_null(un);
    assert_int_equal(un->count, 2);
    assert_int_equal(bb_engine_counter(e, "ingress.bytes_in_flight"), 0);
    assert_int_equal(bb_engine_live_slots(e), 0);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_budget_exceeded_fill(void **state)
{
    (void)state;
    bb_model *m = sink_model();
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    cfg.caps.ingress_byte_budget = 64;
    bb_engine *e = node(2, m, "Sink", &cfg);
    uint8_t big[80] = {0}, good[8] = {9};
    /* at the boundary: charged before the copy, refused, reported next poll */
    fx_fill fs = {.site = 101, .payload = big, .len = 80};
    size_t n;
    uint8_t *env = pack(&fs, 1, 0, 0, 0, &n);
    bb_error err = {0};
    bb_peerid p = fx_peer(1);
    assert_int_equal(bb_engine_deliver_envelope(e, &p, NULL, env, n, &err), BB_EBUDGET);
    free(env);
    fs.payload = good;
    fs.len = 8;
    deliver_fills(e, 1, &fs, 1, 0, 0);
    fx_log log = {0};
    fx_run(e, &log, 1, 5);
    assert_non_null(fx_log_infra(&log, BB_INFRA_WIRE_RECEIVE_ERROR, BB_WIRE_RX_BUDGET_EXCEEDED));
    assert_non_null(fx_log_app(&log, "a", 0));
    assert_int_equal(bb_engine_counter(e, "ingress.bytes_in_flight"), 0);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
    /* per fill: a self-addressed send is charged when its fill lands */
    m = fx_model();
    bb_function *tx = fx_fn(m, "Tx", "x,peers", "");
    bb_node *s = fx_op(m, tx, FX_WIRE, "Send", "x,peers", "");
    fx_meta(m, s, "ai.bytesandbrains.wire_dest_site", "Rx/got");
    bb_function *rx = fx_fn(m, "Rx", "got", "out");
    fx_op(m, rx, FX_SYS, "PassThrough", "got", "out");
    cfg.caps.ingress_byte_budget = 64;
    e = node(1, m, "Tx,Rx", &cfg);
    uint8_t self = 1;
    bb_value *payload = bb_value_bytes(&BB_TYPE_BYTES, big, 80);
    invoke2(e, "Tx", "x", payload, "peers", peers_of(&self, 1));
    fx_run(e, &log, 1, 5);
    const fx_rec *r = fx_log_infra(&log, BB_INFRA_WIRE_RECEIVE_ERROR, BB_WIRE_RX_BUDGET_EXCEEDED);
    assert_non_null(r);
    assert_non_null(strstr(r->c, "80 bytes"));
    assert_null(fx_log_app(&log, "out", 0));
    /* a small one passes and the budget is whole again afterwards */
    invoke2(e, "Tx", "x", bb_value_bytes(&BB_TYPE_BYTES, big, 40), "peers", peers_of(&self, 1));
    fx_run(e, &log, 1, 5);
    const fx_rec *o = fx_log_app(&log, "out", 0);
    assert_non_null(o);
    assert_int_equal(o->value->u.bytes.len, 40);
    assert_int_equal(bb_engine_counter(e, "ingress.bytes_in_flight"), 0);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_control_plane_and_backend_fill(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = sink_model();
    bb_engine *e = node(2, m, "Sink", NULL);
    uint8_t sfx[64];
    uint8_t payload[5] = {'h', 'e', 'l', 'l', 'o'};
    float tv[2] = {1.5f, -2.5f};
    bb_value *t = fx_f32(tv, 2);
    uint8_t *tb;
    size_t tl;
    assert_int_equal(bb_value_encode(t, &tb, &tl, NULL), BB_OK);
    bb_value_unref(t);
    fx_fill fs[2] = {control_fill("Control", sfx, payload, 5),
                     {.site = 103, .payload = tb, .len = tl}};
    deliver_fills(e, 1, fs, 2, 0, 0);
    free(tb);
    fx_log log = {0};
    fx_run(e, &log, 1, 5);
    fx_echo *echo = fx_echo_at(0);
    assert_non_null(echo);
    assert_int_equal(echo->n_control, 1);
    assert_int_equal(echo->last_control->u.bytes.len, 5);
    assert_memory_equal(echo->last_control->u.bytes.data, "hello", 5);
    assert_int_equal(fx_backend_materialized(), 1);
    const fx_rec *c = fx_log_app(&log, "c", 0);
    assert_non_null(c);
    assert_true(fx_f32_eq(c->value, tv, 2));
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

/* A control fill whose op answers LATER keeps its completion: a failure
 * completed afterwards is an OpFailed step naming slot/op, like a failure
 * at dispatch; a success is quiet (a control fill's outputs go nowhere). */
static void test_control_fill_completed_later(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = sink_model();
    bb_engine *e = node(2, m, "Sink", NULL);
    uint8_t sfx[64];
    for (uint8_t k = 0; k < 2; k++) {
        uint8_t payload[3] = {k, 2, 3};
        fx_fill f = control_fill("Later", sfx, payload, 3);
        deliver_fills(e, 1, &f, 1, 0, 0);
    }
    fx_log log = {0};
    fx_run(e, &log, 1, 5);
    fx_echo *echo = fx_echo_at(0);
    assert_non_null(echo);
    assert_int_equal(echo->n_pending, 2);
    assert_int_equal(fx_log_count(&log, BB_STEP_OP_FAILED), 0);

    assert_int_equal(bb_complete_err(echo->pending[0], BB_ERUNTIME, "disk full"), BB_OK);
    bb_value_unref(echo->pending_in[0]);
    bb_value *v = echo->pending_in[1];
    assert_int_equal(bb_complete_ok(echo->pending[1], &v, 1), BB_OK);
    echo->n_pending = 0;
    fx_run(e, &log, 1, 5);
    assert_int_equal(fx_log_count(&log, BB_STEP_OP_FAILED), 1);
    const fx_rec *f = fx_log_nth(&log, BB_STEP_OP_FAILED, 0);
    assert_non_null(strstr(f->a, "/Later")); /* slot/op */
    assert_string_equal(f->b, "Later");
    assert_string_equal(f->d, "test.echo");
    assert_non_null(strstr(f->c, "disk full"));
    assert_int_equal(bb_engine_counter(e, "ops.failed"), 1);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

/* ---- the control plane: requests between components and their answers ---- */

/* echo (on engine a) asks op `op` of the echo on seed `to`; returns the token. */
static uint64_t ask(fx_echo *echo, uint8_t to, const char *op, const char *payload,
                    uint64_t timeout_ns)
{
    bb_peerid p = fx_peer(to);
    bb_value *peer = bb_value_bytes(&BB_TYPE_PEER_ID, p.bytes, p.len);
    uint64_t token = 0;
    bb_error err = {0};
    int rc = echo->ctx->api->send_fill(echo->ctx, peer, NULL, op, (const uint8_t *)payload,
                                       strlen(payload), timeout_ns, &token, &err);
    bb_value_unref(peer);
    if (rc)
        fail_msg("send_fill %s: %s", op, err.msg);
    return token;
}

/* The i-th answer echo received: its token, status and bytes. */
static void assert_answer(const fx_echo *echo, int i, uint64_t token, int status, const char *text)
{
    assert_true(echo->n_answers > i);
    assert_true(echo->answer_token[i] == token);
    assert_int_equal(echo->answer_status[i], status);
    const bb_value *v = echo->answer[i];
    char got[256];
    snprintf(got, sizeof got, "%.*s", (int)v->u.bytes.len, (const char *)v->u.bytes.data);
    if (status == BB_OK)
        assert_string_equal(got, text);
    else if (!strstr(got, text))
        fail_msg("answer %d: '%s' does not say '%s'", i, got, text);
}

/* A component asks its counterpart on another node (send_fill with a
 * timeout) and hears back through on_answer: an op answering NOW, one
 * answering LATER through its completion (the path a DHT lookup takes),
 * a failing op, an unknown op, a one-way fill, a deadline, an unreachable
 * peer, and an answer from a peer that was not asked (dropped). */
static void test_control_requests_and_answers(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = sink_model();
    fx_net net = {.now = 1};
    int a = fx_net_add(&net, node(1, m, "Sink", NULL));
    int b = fx_net_add(&net, node(2, m, "Sink", NULL));
    know(net.e[a], 2);
    know(net.e[a], 3); /* a peer that never answers */
    fx_net_run(&net, 5);
    fx_echo *ea = fx_echo_at(0), *eb = fx_echo_at(1);
    assert_non_null(ea);
    assert_non_null(eb);

    uint64_t t_now = ask(ea, 2, "Echo", "ping", 1000000000);
    fx_net_run(&net, 10);
    assert_answer(ea, 0, t_now, BB_OK, "ping");

    uint64_t t_later = ask(ea, 2, "Later", "slow", 1000000000);
    fx_net_run(&net, 10);
    assert_int_equal(ea->n_answers, 1); /* B holds the op */
    assert_int_equal(eb->n_pending, 1);
    bb_value *late = bb_value_bytes(&BB_TYPE_BYTES, (const uint8_t *)"late", 4);
    assert_int_equal(bb_complete_ok(eb->pending[0], &late, 1), BB_OK);
    bb_value_unref(eb->pending_in[0]);
    eb->n_pending = 0;
    fx_net_run(&net, 10);
    assert_answer(ea, 1, t_later, BB_OK, "late");

    uint64_t t_fail = ask(ea, 2, "Fail", "x", 1000000000);
    uint64_t t_nope = ask(ea, 2, "Nope", "x", 1000000000);
    fx_net_run(&net, 10);
    assert_answer(ea, 2, t_fail, BB_ERUNTIME, "on purpose");
    assert_answer(ea, 3, t_nope, BB_ERUNTIME, "no component op");
    assert_non_null(fx_log_nth(&net.log[b], BB_STEP_OP_FAILED, 0)); /* B reports its failure */

    ask(ea, 2, "Control", "one-way", 0);
    fx_net_run(&net, 10);
    assert_int_equal(eb->n_control, 1);
    assert_int_equal(ea->n_answers, 4); /* nothing comes back */

    uint64_t t_slow = ask(ea, 2, "Later", "never", 1000);
    fx_net_run(&net, 10);
    net.now += 2000;
    fx_net_run(&net, 10);
    assert_answer(ea, 4, t_slow, BB_ETIMEOUT, "in time");
    /* B's late answer finds nothing pending: dropped, not a second answer */
    bb_value *v = bb_value_bytes(&BB_TYPE_BYTES, (const uint8_t *)"too late", 8);
    assert_int_equal(bb_complete_ok(eb->pending[0], &v, 1), BB_OK);
    bb_value_unref(eb->pending_in[0]);
    eb->n_pending = 0;
    fx_net_run(&net, 10);
    assert_int_equal(ea->n_answers, 5);

    uint64_t t_gone = ask(ea, 3, "Echo", "anyone?", 1000000000);
    fx_net_run(&net, 10);
    bb_peerid three = fx_peer(3);
    bb_engine_report_send(net.e[a], &three, false); /* the host could not reach it */
    fx_net_run(&net, 10);
    assert_answer(ea, 5, t_gone, BB_EIO, "unreachable");

    /* an answer from seed 3 for a request to B: not B, so not an answer */
    uint64_t t_spoof = ask(ea, 2, "Later", "who", 1000000000);
    fx_net_run(&net, 10);
    uint8_t sfx[64];
    size_t sl;
    assert_int_equal(bb_suffix_component_op(2, "Later", sfx, sizeof sfx, &sl, NULL), BB_OK);
    fx_fill f = {.suffix = sfx, .suffix_len = sl, .payload = (const uint8_t *)"fake", .len = 4};
    fx_env env = {.fills = &f, .n_fills = 1, .corr = 2, .wire_req_id = t_spoof};
    size_t len;
    uint8_t *bytes = fx_envelope(&env, &len);
    assert_int_equal(bb_engine_deliver_envelope(net.e[a], &three, NULL, bytes, len, NULL), BB_OK);
    free(bytes);
    fx_net_run(&net, 10);
    assert_int_equal(ea->n_answers, 6);
    v = bb_value_bytes(&BB_TYPE_BYTES, (const uint8_t *)"real", 4);
    assert_int_equal(bb_complete_ok(eb->pending[0], &v, 1), BB_OK);
    bb_value_unref(eb->pending_in[0]);
    eb->n_pending = 0;
    fx_net_run(&net, 10);
    assert_answer(ea, 6, t_spoof, BB_OK, "real");

    /* refusals: no such slot, a payload over the envelope cap */
    bb_error err = {0};
    bb_value *pb = bb_value_bytes(&BB_TYPE_PEER_ID, fx_peer(2).bytes, fx_peer(2).len);
    assert_int_equal(ea->ctx->api->send_fill(ea->ctx, pb, "nosuch", "Echo", NULL, 0, 1000, NULL,
                                             &err),
                     BB_ENOTFOUND);
    assert_non_null(strstr(err.msg, "nosuch"));
    static uint8_t big[(64u << 20) + 1];
    assert_int_equal(ea->ctx->api->send_fill(ea->ctx, pb, NULL, "Echo", big, sizeof big, 0, NULL,
                                             &err),
                     BB_ELIMIT);
    bb_value_unref(pb);
    fx_net_free(&net);
    bb_model_free(m);
}

/* A type from a plugin built before ABI 2.2 (struct_size ends before
 * on_answer) may send one-way fills, but not requests: it could never hear
 * the answer. */
static void test_control_from_an_older_type(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = fx_model();
    fx_fn(m, "Old", "", "");
    fx_bind(m, "Old", "echo", "Protocol|test::OldEcho|2");
    bb_model *sink = sink_model();
    fx_net net = {.now = 1};
    int a = fx_net_add(&net, node(1, m, "Old", NULL));
    fx_net_add(&net, node(2, sink, "Sink", NULL));
    know(net.e[a], 2);
    fx_net_run(&net, 5);
    fx_echo *old = fx_echo_at(0), *eb = fx_echo_at(1);
    assert_non_null(old);
    assert_non_null(eb);
    bb_value *pb = bb_value_bytes(&BB_TYPE_PEER_ID, fx_peer(2).bytes, fx_peer(2).len);
    bb_error err = {0};
    assert_int_equal(old->ctx->api->send_fill(old->ctx, pb, NULL, "Echo", (const uint8_t *)"x",
                                              1, 1000000, NULL, &err),
                     BB_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "on_answer"));
    ask(old, 2, "Control", "one-way", 0);
    fx_net_run(&net, 10);
    assert_int_equal(eb->n_control, 1);
    assert_int_equal(old->n_answers, 0);
    bb_value_unref(pb);
    fx_net_free(&net);
    bb_model_free(m);
    bb_model_free(sink);
}

static void test_unknown_correlation(void **state)
{
    (void)state;
    bb_model *m = sink_model();
    bb_engine *e = node(2, m, "Sink", NULL);
    uint8_t good[8] = {1};
    fx_fill fs = {.site = 101, .payload = good, .len = 8};
    deliver_fills(e, 1, &fs, 1, 2 /* RESPONSE */, 777);
    fx_log log = {0};
    fx_run(e, &log, 1, 5);
    const fx_rec *r = fx_log_infra(&log, BB_INFRA_UNKNOWN_CORRELATION, -1);
    assert_non_null(r);
    assert_int_equal(r->count, 777);
    assert_int_equal(fx_log_count(&log, BB_STEP_APP_EVENT), 0);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_batch_deadline_and_quorum(void **state)
{
    (void)state;
    for (int quorum = 1; quorum <= 2; quorum++) {
        bb_model *m = rr_model(1000, quorum);
        bb_engine *a = node(1, m, "Client", NULL);
        bb_engine *b = node(2, m, "Server", NULL);
        know(a, 2);
        know(a, 3); /* peer 3 has an address but never answers */
        fx_net net = {0};
        net.now = 10;
        fx_net_add(&net, a);
        fx_net_add(&net, b);
        uint8_t to[2] = {2, 3};
        invoke2(a, "Client", "x", bb_value_u64(&BB_TYPE_U64, 6), "peers", peers_of(to, 2));
        fx_net_run(&net, 20);
        assert_null(fx_log_app(&net.log[0], "batch", 0)); /* still waiting for peer 3 */
        assert_int_equal(bb_engine_next_deadline(a), 1010);
        net.now = 1010;
        fx_net_run(&net, 20);
        if (quorum == 1) {
            const fx_rec *r = fx_log_app(&net.log[0], "batch", 0);
            assert_non_null(r);
            assert_int_equal(r->value->u.batch.n, 1);
            assert_int_equal(r->value->u.batch.items[0]->u.u64, 6);
        } else {
            assert_null(fx_log_app(&net.log[0], "batch", 0));
            assert_non_null(fx_log_infra(&net.log[0], BB_INFRA_QUORUM_FAILED, -1));
            assert_non_null(fx_log_nth(&net.log[0], BB_STEP_OP_FAILED, 0));
        }
        assert_int_equal(bb_engine_live_executions(a), 0);
        assert_int_equal(bb_engine_pending_async_count(a), 0);
        fx_net_free(&net);
        bb_model_free(m);
    }
}

/* Access control on sends to peers picked at run time (a PeerIdVec input,
 * no static `peer`): a blocked peer, or one off the allow list, gets no
 * envelope and is not in the batch's cohort, so the request completes with
 * the others; counted as gate.send_refused. */
static void test_secure_send_refuses_blocked_runtime_peers(void **state)
{
    (void)state;
    bb_model *m = rr_model(1000000, -1);
    bb_engine *a = node(1, m, "Client", NULL);
    bb_engine *b = node(2, m, "Server", NULL);
    bb_engine *c = node(3, m, "Server", NULL);
    know(a, 2);
    know(a, 3);
    bb_peerid p2 = fx_peer(2), p3 = fx_peer(3);
    uint8_t to[2] = {2, 3};
    fx_net net = {0};
    net.now = 10;
    fx_net_add(&net, a);
    fx_net_add(&net, b);
    fx_net_add(&net, c);
    for (int round = 0; round < 3; round++) {
        /* 0: 3 blocked; 1: only 2 allowed; 2: policy cleared, both asked */
        bb_engine_block_peer(a, &p3, round == 0);
        bb_engine_allow_peer(a, &p2, round == 1);
        const char *why = bb_engine_peer_access(a, &p3);
        assert_string_equal(why ? why : "", round == 0   ? "blocklisted"
                                            : round == 1 ? "not_allowlisted"
                                                         : "");
        uint64_t refused = bb_engine_counter(a, "gate.send_refused");
        uint64_t got_c = bb_engine_counter(c, "envelopes.in");
        invoke2(a, "Client", "x", bb_value_u64(&BB_TYPE_U64, 6), "peers", peers_of(to, 2));
        fx_net_run(&net, 20);
        const fx_rec *r = fx_log_app(&net.log[0], "batch", round);
        assert_non_null(r); /* complete without waiting for the refused peer */
        assert_int_equal(r->value->u.batch.n, round == 2 ? 2 : 1);
        assert_int_equal(bb_engine_counter(a, "gate.send_refused"), refused + (round < 2));
        assert_int_equal(bb_engine_counter(c, "envelopes.in"), got_c + (round == 2));
        net.now += 1000;
    }
    bb_engine_peer_info pi;
    assert_true(bb_engine_peer_info_get(a, &p2, &pi));
    assert_false(pi.allowed);
    fx_net_free(&net);
    bb_model_free(m);
}

/* A batch answered before its deadline leaves a dead deadline timer behind;
 * a client sending far more requests than fit in one deadline keeps the
 * heap bounded (dead timers are compacted away) and every answer lands. */
static void test_answered_batches_do_not_pile_up_timers(void **state)
{
    (void)state;
    bb_model *m = rr_model(1000000000, -1); /* 1 s: never reached below */
    bb_engine *a = node(1, m, "Client", NULL);
    bb_engine *b = node(2, m, "Server", NULL);
    know(a, 2);
    fx_net net = {0};
    net.now = 10;
    fx_net_add(&net, a);
    fx_net_add(&net, b);
    uint8_t srv = 2;
    size_t peak = 0;
    for (int i = 0; i < 1000; i++) {
        invoke2(a, "Client", "x", bb_value_u64(&BB_TYPE_U64, (uint64_t)i), "peers",
                peers_of(&srv, 1));
        fx_net_run(&net, 20);
        net.now += 1000; /* 1 us per request: 1000 requests in 1 ms */
        size_t n = (size_t)bb_engine_counter(a, "timers.count");
        peak = n > peak ? n : peak;
        assert_non_null(fx_log_app(&net.log[0], "batch", (size_t)i));
    }
    assert_true(peak <= 128);
    assert_int_equal(bb_engine_live_executions(a), 0);
    /* the dead deadlines that remain fire as no-ops */
    net.now += 2000000000;
    fx_net_run(&net, 20);
    assert_int_equal(bb_engine_counter(a, "timers.count"), 0);
    assert_null(fx_log_infra(&net.log[0], BB_INFRA_QUORUM_FAILED, -1));
    fx_net_free(&net);
    bb_model_free(m);
}

/* Client A (seed 1) invoked with x = 9 and polled at t = 100: s->v[0] is
 * its request envelope to Server B (seed 2). */
static void client_request(bb_model **m, bb_engine **a, bb_engine **b, bb_steps *s)
{
    *m = rr_model(0, -1);
    *a = node(1, *m, "Client", NULL);
    *b = node(2, *m, "Server", NULL);
    know(*a, 2);
    uint8_t srv = 2;
    invoke2(*a, "Client", "x", bb_value_u64(&BB_TYPE_U64, 9), "peers", peers_of(&srv, 1));
    bb_steps_init(s);
    bb_engine_poll(*a, 100, s);
    assert_int_equal(s->v[0].kind, BB_STEP_SEND_ENVELOPE);
}

/* The server's side of Part 18: the response envelope's correlation echoes
 * the request's id and goes to the address the request claimed; a requester
 * with no known address gets PeerResolveFailed; open requests are bounded. */
static void test_response_envelope_and_request_tracking(void **state)
{
    (void)state;
    bb_model *m;
    bb_engine *a, *b;
    bb_steps s;
    client_request(&m, &a, &b, &s);
    Bb__Core__WireEnvelope *rq = bb__core__wire_envelope__unpack(NULL, s.v[0].u.send.len, s.v[0].u.send.bytes);
    assert_non_null(rq);
    uint64_t req_id = rq->correlation->wire_req_id;
    assert_int_equal(bb_engine_deliver_envelope(b, bb_engine_peer_id(a), NULL, s.v[0].u.send.bytes,
                                                s.v[0].u.send.len, NULL), BB_OK);
    bb_engine_poll(b, 150, &s);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.v[0].kind, BB_STEP_SEND_ENVELOPE);
    bb_peerid pa = fx_peer(1);
    assert_true(bb_peerid_equal(&s.v[0].u.send.peer, &pa));
    Bb__Core__WireEnvelope *rs = bb__core__wire_envelope__unpack(NULL, s.v[0].u.send.len, s.v[0].u.send.bytes);
    assert_non_null(rs);
    assert_int_equal(rs->correlation->kind, BB__CORE__CORRELATION_KIND__RESPONSE);
    assert_int_equal(rs->correlation->wire_req_id, req_id);
    uint8_t addr_a[32], addr_b[32];
    size_t la = fx_addr(7001, addr_a), lb = fx_addr(7002, addr_b);
    assert_int_equal(rs->n_dest_peer_addresses, 1); /* learned from the request */
    assert_memory_equal(rs->dest_peer_addresses[0].data, addr_a, la);
    assert_int_equal(rs->n_src_peer_addresses, 1);
    assert_memory_equal(rs->src_peer_addresses[0].data, addr_b, lb);
    assert_int_equal(rs->echo_sent_at_ns, rq->sent_at_ns); /* RTT piggyback */
    assert_int_equal(rs->echo_delay_ns, 0);
    assert_int_equal(rs->n_fills, 1);
    bb_value *payload = NULL;
    assert_int_equal(bb_value_decode(BB_TYPE_COMPOSITE.wire_hash, rs->fills[0]->payload.data,
                                     rs->fills[0]->payload.len, NULL, &payload, NULL), BB_OK);
    assert_int_equal(payload->u.list.n, 1);
    assert_int_equal(payload->u.list.items[0]->u.u64, 9);
    bb_value_unref(payload);
    bb__core__wire_envelope__free_unpacked(rs, NULL);
    /* a requester that claims no address and is unknown: nowhere to answer */
    uint8_t pl[8] = {4};
    fx_fill f = {.site = 0, .payload = pl, .len = 8};
    uint8_t sfx[16];
    size_t sl;
    bb_suffix_site(bb_fnv1a64("port:ping", 9), sfx, sizeof sfx, &sl, NULL);
    f.suffix = sfx;
    f.suffix_len = sl;
    fx_env env = {.fills = &f, .n_fills = 1, .corr = 1, .wire_req_id = 5, .sent_at_ns = 1};
    size_t n;
    uint8_t *bytes = fx_envelope(&env, &n);
    deliver(b, 7, bytes, n);
    fx_log log = {0};
    fx_run(b, &log, 200, 5);
    const fx_rec *pr = fx_log_nth(&log, BB_STEP_PEER_RESOLVE_FAILED, 0);
    assert_non_null(pr);
    bb_peerid p7 = fx_peer(7);
    assert_true(bb_peerid_equal(&pr->peer, &p7));
    assert_int_equal(fx_log_count(&log, BB_STEP_SEND_ENVELOPE), 0);
    fx_log_free(&log);
    /* at most inbound_requests_max open requests: the oldest is forgotten */
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    cfg.caps.inbound_requests_max = 1;
    bb_engine *c = node(3, m, "Server", &cfg);
    uint8_t a1[32];
    bb_engine_addr src = {a1, fx_addr(7001, a1)};
    env.src = &src;
    env.n_src = 1;
    free(bytes);
    bytes = fx_envelope(&env, &n);
    deliver(c, 1, bytes, n);
    env.wire_req_id = 6;
    env.sent_at_ns = 2;
    free(bytes);
    bytes = fx_envelope(&env, &n);
    deliver(c, 1, bytes, n);
    fx_run(c, &log, 300, 5);
    assert_int_equal(fx_log_count(&log, BB_STEP_SEND_ENVELOPE), 1);
    assert_non_null(strstr(fx_log_nth(&log, BB_STEP_OP_FAILED, 0)->c, "unknown or expired request id"));
    free(bytes);
    fx_log_free(&log);
    bb__core__wire_envelope__free_unpacked(rq, NULL);
    bb_steps_free(&s);
    bb_engine_free(a);
    bb_engine_free(b);
    bb_engine_free(c);
    bb_model_free(m);
}

/* Envelope stamps went from varint to fixed64 (handshake version 2); an
 * envelope queued in an older snapshot carries varint stamps and must still
 * decode, stamps and all: B echoes the request's sent_at back. */
static void test_varint_stamps_still_decode(void **state)
{
    (void)state;
    bb_model *m;
    bb_engine *a, *b;
    bb_steps s;
    client_request(&m, &a, &b, &s);
    /* sent_at_ns = 100 as fixed64 (tag 5 << 3 | 1), rewritten as a varint */
    const uint8_t fixed[9] = {0x29, 100, 0, 0, 0, 0, 0, 0, 0};
    const uint8_t *env = s.v[0].u.send.bytes;
    size_t len = s.v[0].u.send.len, at = len;
    for (size_t i = 0; i + sizeof fixed <= len; i++)
        if (memcmp(env + i, fixed, sizeof fixed) == 0)
            at = i;
    assert_true(at < len);
    uint8_t *old = malloc(len);
    memcpy(old, env, at);
    old[at] = 0x28; /* 5 << 3 | varint */
    old[at + 1] = 100;
    memcpy(old + at + 2, env + at + sizeof fixed, len - at - sizeof fixed);
    size_t old_len = len - sizeof fixed + 2;
    assert_int_equal(bb_engine_deliver_envelope(b, bb_engine_peer_id(a), NULL, old, old_len, NULL),
                     BB_OK);
    free(old);
    bb_engine_poll(b, 150, &s);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.v[0].kind, BB_STEP_SEND_ENVELOPE);
    Bb__Core__WireEnvelope *rs = bb__core__wire_envelope__unpack(NULL, s.v[0].u.send.len, s.v[0].u.send.bytes);
    assert_non_null(rs);
    assert_int_equal(rs->echo_sent_at_ns, 100);
    bb__core__wire_envelope__free_unpacked(rs, NULL);
    bb_steps_free(&s);
    bb_engine_free(a);
    bb_engine_free(b);
    bb_model_free(m);
}

/* ---- a federated round (DESIGN.md "The federated round, as a graph") ------------------- */

static bb_model *fed_model(void)
{
    bb_model *m = fx_model();
    /* Server: start -> Params, Sample -> SendReqBatched -> RecvRespBatched ->
     * FedAvg -> LoadParameters; AppEmit("round", avg) */
    bb_function *s = fx_fn(m, "Server", "start", "");
    bb_node *n = fx_op(m, s, "ai.bytesandbrains.role.model", "Params", "start", "params");
    fx_meta(m, n, "ai.bytesandbrains.slot", "model_0_1");
    n = fx_op(m, s, "ai.bytesandbrains.role.peer_selector", "Sample", "start", "peers");
    fx_meta(m, n, "ai.bytesandbrains.slot", "selector");
    fx_str(m, n, "target", "Client");
    n = fx_op(m, s, FX_WIRE, "SendReqBatched", "params,peers", "rid");
    fx_meta(m, n, "ai.bytesandbrains.port", "round");
    fx_int(m, n, "deadline_ns", 1000000);
    fx_op(m, s, FX_WIRE, "RecvRespBatched", "rid", "rt,batch");
    n = fx_op(m, s, "test.agg", "FedAvg", "batch", "avg");
    fx_meta(m, n, "ai.bytesandbrains.slot", "agg");
    n = fx_op(m, s, "ai.bytesandbrains.role.model", "LoadParameters", "avg", "cmd");
    fx_meta(m, n, "ai.bytesandbrains.slot", "model_0_1");
    n = fx_op(m, s, FX_SYS, "AppEmit", "avg", "");
    fx_str(m, n, "name", "round");
    fx_bind(m, "Server", "model_0_1", "Model|test::Model|1");
    fx_bind(m, "Server", "selector", "PeerSelector|test::Selector|2");
    fx_bind(m, "Server", "agg", "Aggregator|test::Agg|3");
    /* Client: RecvReq -> LoadParameters -> Train -> Bundle(params, n) -> SendResp */
    bb_function *c = fx_fn(m, "Client", "", "");
    n = fx_op(m, c, FX_WIRE, "RecvReq", "", "t,params,rid");
    fx_meta(m, n, "ai.bytesandbrains.port", "round");
    fx_type(m, c, "params", &BB_TYPE_TENSOR_F32);
    n = fx_op(m, c, "ai.bytesandbrains.role.model", "LoadParameters", "params", "loaded");
    fx_meta(m, n, "ai.bytesandbrains.slot_id", "11");
    n = fx_op(m, c, "ai.bytesandbrains.role.model", "Train", "loaded", "trained");
    fx_meta(m, n, "ai.bytesandbrains.slot_id", "11");
    n = fx_op(m, c, "ai.bytesandbrains.role.model", "NumSamples", "loaded", "count");
    fx_meta(m, n, "ai.bytesandbrains.slot_id", "11");
    fx_op(m, c, FX_COMP, "Bundle", "trained,count", "bundle");
    fx_op(m, c, FX_WIRE, "SendResp", "bundle,rid", "");
    return m;
}

static void test_federated_round_three_engines(void **state)
{
    (void)state;
    bb_model *m = fed_model();
    /* clients train with different deltas and sample counts */
    bb_model *m1 = bb_model_clone(m), *m2 = bb_model_clone(m);
    fx_bind(m1, "Client", "model_1_10", "Model|test::Model|11");
    fx_bind(m2, "Client", "model_3_30", "Model|test::Model|11");
    bb_engine *srv = node(1, m, "Server", NULL);
    bb_engine *c1 = node(2, m1, "Client", NULL);
    bb_engine *c2 = node(3, m2, "Client", NULL);
    const char *client[1] = {"Client"};
    for (uint8_t k = 2; k <= 3; k++) {
        know(srv, k);
        bb_peerid p = fx_peer(k);
        assert_int_equal(bb_engine_peer_connected(srv, &p, client, 1, NULL), BB_OK);
    }
    fx_net net = {0};
    net.now = 1;
    fx_net_add(&net, srv);
    fx_net_add(&net, c1);
    fx_net_add(&net, c2);
    for (int round = 1; round <= 2; round++) {
        bb_value *t = bb_value_trigger();
        bb_engine_input in = {.name = "start", .value = t};
        assert_int_equal(bb_engine_invoke(srv, "Server", &in, 1, NULL, NULL), BB_OK);
        bb_value_unref(t);
        fx_net_run(&net, 30);
        const fx_rec *r = fx_log_app(&net.log[0], "round", (size_t)round - 1);
        assert_non_null(r);
        /* round 1: clients start from 0: (1*10 + 3*30) / 40 = 2.5
         * round 2: from 2.5: (3.5*10 + 5.5*30) / 40 = 5.0 */
        float want = round == 1 ? 2.5f : 5.0f;
        float w4[4] = {want, want, want, want};
        assert_true(fx_f32_eq(r->value, w4, 4));
    }
    for (int i = 0; i < 3; i++) {
        assert_int_equal(bb_engine_live_slots(net.e[i]), 0);
        assert_int_equal(bb_engine_live_executions(net.e[i]), 0);
        assert_int_equal(fx_log_count(&net.log[i], BB_STEP_OP_FAILED), 0);
    }
    fx_net_free(&net);
    bb_model_free(m);
    bb_model_free(m1);
    bb_model_free(m2);
}

/* A poll fanning out to many peers: every SendEnvelope keeps its own
 * address list (they share the steps buffer's storage, which grows past
 * its first chunk here) until the steps are cleared; a step carries the
 * peer's backoff; reporting sends says when a PeerDown/PeerUp is queued. */
static void test_send_steps_carry_addresses_and_backoff(void **state)
{
    (void)state;
    enum { PEERS = 48 };
    bb_model *m = rr_model(0, 0);
    bb_engine *a = node(1, m, "Client", NULL);
    bb_value *items[PEERS];
    for (int i = 0; i < PEERS; i++) {
        know(a, (uint8_t)(10 + i));
        bb_peerid p = fx_peer((uint8_t)(10 + i));
        items[i] = bb_value_bytes(&BB_TYPE_PEER_ID, p.bytes, p.len);
    }
    bb_peerid first = fx_peer(10);
    assert_false(bb_engine_report_send(a, &first, false)); /* one failure: backoff, no PeerDown */
    invoke2(a, "Client", "x", bb_value_u64(&BB_TYPE_U64, 5), "peers",
            bb_value_list(&BB_TYPE_PEER_ID_VEC, items, PEERS));
    bb_steps s;
    bb_steps_init(&s);
    bb_engine_poll(a, 100, &s);
    assert_int_equal(s.n, PEERS);
    for (int i = 0; i < PEERS; i++) {
        const bb_step *st = &s.v[i];
        assert_int_equal(st->kind, BB_STEP_SEND_ENVELOPE);
        bb_peerid p = fx_peer((uint8_t)(10 + i));
        assert_true(bb_peerid_equal(&st->u.send.peer, &p));
        uint8_t want[32];
        size_t wl = fx_addr((uint16_t)(7010 + i), want);
        assert_int_equal(st->u.send.n_addrs, 1);
        assert_int_equal(st->u.send.addrs[0].len, wl);
        assert_memory_equal(st->u.send.addrs[0].data, want, wl);
        bb_engine_peer_info pi;
        assert_true(bb_engine_peer_info_get(a, &p, &pi));
        assert_true(st->u.send.retry_at_ns == (i == 0 ? pi.next_retry_ns : 0));
    }
    assert_true(s.v[0].u.send.retry_at_ns > 100);
    /* the threshold's failures queue PeerDown (once); a success then PeerUp */
    int downs = 0;
    for (int k = 1; k < 8; k++)
        downs += bb_engine_report_send(a, &first, false);
    assert_int_equal(downs, 1);
    assert_true(bb_engine_report_send(a, &first, true));
    assert_false(bb_engine_report_send(a, &first, true));
    bb_steps_free(&s);
    bb_engine_free(a);
    bb_model_free(m);
}

/* Peers a component adds to the address book while handling another
 * node's fill (a gossip exchange) are that node's teaching: one node adds
 * at most 256; beyond that each newcomer replaces the oldest of its own
 * (book.taught_replaced), so one peer cannot fill the book, while another
 * node's share and the host's own entries stay as they are. */
static void learn_from(bb_engine *e, uint8_t from, unsigned first, unsigned count)
{
    uint8_t sfx[64];
    uint8_t payload[9] = {'l', 'e', 'a', 'r', 'n', (uint8_t)(first >> 8), (uint8_t)first,
                          (uint8_t)(count >> 8), (uint8_t)count};
    fx_fill f = control_fill("Control", sfx, payload, sizeof payload);
    deliver_fills(e, from, &f, 1, 0, 0);
    fx_log log = {0};
    fx_run(e, &log, 1, 5);
    fx_log_free(&log);
}

static void test_control_taught_peers_bounded(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = sink_model();
    bb_engine *e = node(2, m, "Sink", NULL);
    know(e, 1);
    know(e, 3);
    size_t base = bb_engine_peer_count(e);
    for (unsigned k = 0; k < 3; k++)
        learn_from(e, 1, k * 100, 100);
    fx_echo *echo = fx_echo_at(0);
    assert_non_null(echo);
    assert_int_equal(echo->n_control, 3);
    assert_int_equal(echo->learn_refused, 0);
    assert_int_equal(bb_engine_peer_count(e), base + 256);
    assert_int_equal(bb_engine_counter(e, "book.taught_replaced"), 300 - 256);
    bb_peerid first = fx_taught_peer(0), last = fx_taught_peer(299);
    assert_int_equal(bb_engine_peer_addrs(e, &first, NULL), 0); /* the oldest went */
    assert_int_equal(bb_engine_peer_addrs(e, &last, NULL), 1);
    /* another node's teaching has its own share */
    learn_from(e, 3, 1000, 10);
    assert_int_equal(bb_engine_peer_count(e), base + 266);
    assert_int_equal(bb_engine_counter(e, "book.taught_replaced"), 300 - 256);
    /* the host's own entries are nobody's teaching */
    bb_peerid one = fx_peer(1);
    assert_int_equal(bb_engine_peer_addrs(e, &one, NULL), 1);
    bb_engine_free(e);
    bb_model_free(m);
}

/* The address lists an envelope from a to peer 2 carries (-1 each when
 * the poll sent nothing). */
static void sent_addresses(bb_engine *a, uint64_t x, int *n_src, int *n_dest)
{
    uint8_t to = 2;
    invoke2(a, "Tx", "x", bb_value_u64(&BB_TYPE_U64, x), "peers", peers_of(&to, 1));
    bb_steps s;
    bb_steps_init(&s);
    bb_engine_poll(a, 100, &s);
    *n_src = *n_dest = -1;
    for (size_t i = 0; i < s.n; i++) {
        if (s.v[i].kind != BB_STEP_SEND_ENVELOPE)
            continue;
        assert_true(s.v[i].u.send.n_addrs >= 1);
        Bb__Core__WireEnvelope *env =
            bb__core__wire_envelope__unpack(NULL, s.v[i].u.send.len, s.v[i].u.send.bytes);
        assert_non_null(env);
        *n_src = (int)env->n_src_peer_addresses;
        *n_dest = (int)env->n_dest_peer_addresses;
        bb__core__wire_envelope__free_unpacked(env, NULL);
    }
    bb_steps_free(&s);
}

/* Addresses go once per connection: the first envelope after the host
 * reports the connection carries both lists, later ones neither, until
 * the connection comes up again, a send fails, or the book's list for
 * the peer changes. A host that reports no connections gets them on
 * every envelope. And the receiver learns them from that first one. */
static void test_addresses_told_once_per_connection(void **state)
{
    (void)state;
    bb_model *m = send_model(false, NULL);
    bb_engine *a = node(1, m, "Tx", NULL);
    know(a, 2);
    bb_peerid p2 = fx_peer(2);
    bb_error err = {0};
    int src, dest;
    sent_addresses(a, 1, &src, &dest); /* no connection reported: as before */
    assert_int_equal(src, 1);
    assert_int_equal(dest, 1);
    sent_addresses(a, 2, &src, &dest);
    assert_int_equal(src, 1);
    assert_int_equal(dest, 1);
    assert_int_equal(bb_engine_peer_connected(a, &p2, NULL, 0, &err), BB_OK);
    sent_addresses(a, 3, &src, &dest); /* the connection's first */
    assert_int_equal(src, 1);
    assert_int_equal(dest, 1);
    sent_addresses(a, 4, &src, &dest);
    assert_int_equal(src, 0);
    assert_int_equal(dest, 0);
    sent_addresses(a, 5, &src, &dest);
    assert_int_equal(src, 0);
    /* the peer's list changes: told again, once */
    uint8_t extra[32];
    bb_engine_addr ea = {extra, fx_addr(7102, extra)};
    assert_int_equal(bb_engine_add_peer(a, &p2, &ea, 1, &err), BB_OK);
    sent_addresses(a, 6, &src, &dest);
    assert_int_equal(src, 1);
    assert_int_equal(dest, 2);
    sent_addresses(a, 7, &src, &dest);
    assert_int_equal(src, 0);
    assert_int_equal(bb_engine_add_peer(a, &p2, &ea, 1, &err), BB_OK); /* known: no change */
    sent_addresses(a, 8, &src, &dest);
    assert_int_equal(src, 0);
    /* a failed send may have lost the telling envelope */
    bb_engine_report_send(a, &p2, false);
    sent_addresses(a, 9, &src, &dest);
    assert_int_equal(src, 1);
    sent_addresses(a, 10, &src, &dest);
    assert_int_equal(src, 0);
    /* a new connection tells them again; while down, every envelope does */
    bb_engine_peer_disconnected(a, &p2);
    sent_addresses(a, 11, &src, &dest);
    assert_int_equal(src, 1);
    sent_addresses(a, 12, &src, &dest);
    assert_int_equal(src, 1);
    assert_int_equal(bb_engine_peer_connected(a, &p2, NULL, 0, &err), BB_OK);
    sent_addresses(a, 13, &src, &dest);
    assert_int_equal(src, 1);
    sent_addresses(a, 14, &src, &dest);
    assert_int_equal(src, 0);
    bb_engine_free(a);

    /* the receiver learns the sender's addresses from the connection's
     * first envelope, and keeps them through the ones without */
    bb_engine *tx = node(1, m, "Tx", NULL), *rx = node(2, m, "Rx", NULL);
    know(tx, 2);
    bb_peerid p1 = fx_peer(1);
    assert_int_equal(bb_engine_peer_connected(tx, &p2, NULL, 0, &err), BB_OK);
    assert_int_equal(bb_engine_peer_connected(rx, &p1, NULL, 0, &err), BB_OK);
    fx_net net = {0};
    fx_net_add(&net, tx);
    fx_net_add(&net, rx);
    uint8_t to = 2;
    for (uint64_t x = 1; x <= 3; x++) {
        invoke2(tx, "Tx", "x", bb_value_u64(&BB_TYPE_U64, x), "peers", peers_of(&to, 1));
        fx_net_run(&net, 10);
    }
    for (int i = 0; i < 3; i++) {
        const fx_rec *got = fx_log_app(&net.log[1], "got", (size_t)i);
        assert_non_null(got);
        assert_int_equal(got->value->u.u64, (uint64_t)i + 1);
    }
    uint8_t want[32];
    size_t wl = fx_addr(7001, want);
    const bb_engine_addr *learned;
    assert_int_equal(bb_engine_peer_addrs(rx, &p1, &learned), 1);
    assert_memory_equal(learned[0].data, want, wl);
    fx_net_free(&net);
    bb_model_free(m);
}

/* ---- responses folded as they land ----------------------------------------------- */

/* Client: SendReqBatched(x, peers) -> RecvRespBatched -> Contribute of a
 * test::Fold (reading x as metadata too when read_meta) -> "cmd", and a
 * Clock the responses trigger -> "answered" (as the federated example
 * stamps its answers in). SendReqBatched's own responses output is
 * "whole", a result of the function when read_whole, else read by nobody.
 * Server: RecvReq -> PassThrough -> SendResp (echoes x). */
static bb_model *fold_model(bool read_meta, bool read_whole)
{
    bb_model *m = rr_model(0, -1);
    bb_function *c = m->functions.v[0];
    assert_string_equal(c->name, "Client");
    c->outputs.n = 0;
    bb_str_list_push(m->arena, &c->outputs, "cmd");
    bb_str_list_push(m->arena, &c->outputs, "answered");
    if (read_whole)
        bb_str_list_push(m->arena, &c->outputs, "whole");
    bb_node *send = c->nodes.v[0];
    assert_string_equal(send->op_type, "SendReqBatched");
    bb_str_list_push(m->arena, &send->outputs, "whole");
    fx_op(m, c, "ai.bytesandbrains.role.aggregator", "Contribute", read_meta ? "batch,x" : "batch",
          "cmd");
    fx_op(m, c, FX_SYS, "Clock", "batch", "answered");
    fx_bind(m, "Client", "agg", "Aggregator|test::Fold|0");
    return m;
}

/* Client (seed 1) and servers (seeds 2, 3, 4) on one net; a request with x
 * to all three is out, not answered yet. */
static void fold_start(fx_net *net, bb_model *m, uint64_t x)
{
    memset(net, 0, sizeof *net);
    bb_engine *c = node(1, m, "Client", NULL);
    fx_net_add(net, c);
    for (uint8_t s = 2; s <= 4; s++) {
        fx_net_add(net, node(s, m, "Server", NULL));
        know(c, s);
    }
    const uint8_t servers[3] = {2, 3, 4};
    invoke2(c, "Client", "x", bb_value_u64(&BB_TYPE_U64, x), "peers", peers_of(servers, 3));
    fx_net_poll(net, 0); /* the requests go out */
}

/* Each response reaches Contribute as it lands (a one-element batch tagged
 * with the request's RequestId), the batch keeps none, and the program's
 * Contribute then runs once on an empty batch and says how many there are. */
static void test_responses_fold_as_they_land(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = fold_model(false, false);
    fx_net net;
    fold_start(&net, m, 5);
    fx_fold *f = fx_fold_last();
    assert_non_null(f);
    fx_net_poll(&net, 1); /* server 2 answers */
    fx_net_poll(&net, 0);
    assert_int_equal(f->calls, 1); /* folded before the others answered */
    assert_int_equal(f->sizes[0], 1);
    assert_true(f->tags[0] != 0);
    assert_null(fx_log_app(&net.log[0], "cmd", 0));
    fx_net_run(&net, 20);
    assert_int_equal(f->calls, 4);
    for (int i = 1; i < 3; i++) {
        assert_int_equal(f->sizes[i], 1);
        assert_int_equal(f->tags[i], f->tags[0]);
    }
    assert_int_equal(f->sizes[3], 0); /* the program's own Contribute: an empty batch */
    assert_int_equal(f->tags[3], 0);
    assert_int_equal(f->sum, 15);
    const fx_rec *r = fx_log_app(&net.log[0], "cmd", 0);
    assert_non_null(r);
    assert_int_equal(r->value->u.u64, 3);
    assert_non_null(fx_log_app(&net.log[0], "answered", 0));
    assert_int_equal(bb_engine_counter(net.e[0], "responses.folded"), 3);
    assert_int_equal(bb_engine_live_slots(net.e[0]), 0);
    assert_int_equal(bb_engine_live_executions(net.e[0]), 0);
    fx_net_free(&net);
    bb_model_free(m);
}

/* A Contribute that also reads another value, or a request whose own
 * responses output is read: the op runs once, in its frame, on the whole
 * batch, and nothing is folded. */
static void test_responses_not_folded_when_read_whole(void **state)
{
    (void)state;
    for (int read_whole = 0; read_whole <= 1; read_whole++) {
        fx_reset();
        bb_model *m = fold_model(!read_whole, read_whole);
        fx_net net;
        fold_start(&net, m, 5);
        fx_net_run(&net, 20);
        fx_fold *f = fx_fold_last();
        assert_int_equal(f->calls, 1);
        assert_int_equal(f->sizes[0], 3);
        assert_int_equal(f->tags[0], 0);
        assert_int_equal(fx_log_app(&net.log[0], "cmd", 0)->value->u.u64, 3);
        assert_int_equal(bb_engine_counter(net.e[0], "responses.folded"), 0);
        if (read_whole)
            assert_int_equal(fx_log_app(&net.log[0], "whole", 0)->value->u.batch.n, 3);
        fx_net_free(&net);
        bb_model_free(m);
    }
}

/* A response the op refuses fails the batch at once with its message:
 * RecvRespBatched fails, the program's Contribute never runs. */
static void test_refused_response_fails_the_batch(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = fold_model(false, false);
    fx_net net;
    fold_start(&net, m, FX_FOLD_REFUSED);
    fx_net_run(&net, 20);
    fx_fold *f = fx_fold_last();
    assert_int_equal(f->calls, 1);
    assert_int_equal(f->count, 0);
    assert_null(fx_log_app(&net.log[0], "cmd", 0));
    const fx_rec *r = fx_log_nth(&net.log[0], BB_STEP_OP_FAILED, 0);
    assert_non_null(r);
    assert_non_null(strstr(r->b, "RecvRespBatched"));
    assert_non_null(strstr(r->c, "a response was refused"));
    assert_non_null(strstr(r->c, "666 is refused"));
    assert_int_equal(bb_engine_live_executions(net.e[0]), 0);
    fx_net_free(&net);
    bb_model_free(m);
}

/* A snapshot taken between two folded responses restores a batch that
 * keeps folding: the rest land in the restored component, the program's
 * Contribute sees all three. */
static void test_folding_batch_survives_a_snapshot(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = fold_model(false, false);
    fx_net net;
    fold_start(&net, m, 7);
    fx_net_poll(&net, 1);
    fx_net_poll(&net, 0);
    assert_int_equal(fx_fold_last()->calls, 1);
    uint8_t *snap = NULL;
    size_t len = 0;
    bb_error err = {0};
    if (bb_engine_snapshot(net.e[0], &snap, &len, &err))
        fail_msg("snapshot: %s", err.msg);
    bb_engine_free(net.e[0]);
    net.e[0] = node(1, m, "Client", NULL);
    if (bb_engine_restore(net.e[0], snap, len, &err))
        fail_msg("restore: %s", err.msg);
    free(snap);
    fx_fold *f = fx_fold_last();
    assert_int_equal(f->calls, 0);
    assert_int_equal(f->sum, 7);
    fx_net_run(&net, 20);
    assert_int_equal(f->calls, 3); /* two more responses, then the empty batch */
    assert_int_equal(f->sizes[0], 1);
    assert_int_equal(f->sizes[1], 1);
    assert_int_equal(f->sizes[2], 0);
    assert_int_equal(f->sum, 21);
    assert_int_equal(fx_log_app(&net.log[0], "cmd", 0)->value->u.u64, 3);
    fx_net_free(&net);
    bb_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_response_round_trip),
        cmocka_unit_test(test_send_steps_carry_addresses_and_backoff),
        cmocka_unit_test(test_addresses_told_once_per_connection),
        cmocka_unit_test(test_send_and_peer_resolve_failed),
        cmocka_unit_test(test_response_envelope_and_request_tracking),
        cmocka_unit_test(test_varint_stamps_still_decode),
        cmocka_unit_test(test_trigger_only_and_loopback),
        cmocka_unit_test(test_partial_delivery_and_rx_errors),
        cmocka_unit_test(test_budget_exceeded_fill),
        cmocka_unit_test(test_control_plane_and_backend_fill),
        cmocka_unit_test(test_control_fill_completed_later),
        cmocka_unit_test(test_control_requests_and_answers),
        cmocka_unit_test(test_control_from_an_older_type),
        cmocka_unit_test(test_control_taught_peers_bounded),
        cmocka_unit_test(test_unknown_correlation),
        cmocka_unit_test(test_batch_deadline_and_quorum),
        cmocka_unit_test(test_secure_send_refuses_blocked_runtime_peers),
        cmocka_unit_test(test_answered_batches_do_not_pile_up_timers),
        cmocka_unit_test(test_federated_round_three_engines),
        cmocka_unit_test(test_responses_fold_as_they_land),
        cmocka_unit_test(test_responses_not_folded_when_read_whole),
        cmocka_unit_test(test_refused_response_fails_the_batch),
        cmocka_unit_test(test_folding_batch_survives_a_snapshot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
