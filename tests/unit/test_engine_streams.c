/*
 * test_engine_streams.c — chunk streams between in-process engines
 * (libbbengine/src/streams.c): an envelope larger than stream_chunk_bytes
 * arrives whole and intact in chunks no larger than that, with at most
 * stream_window of them in flight; it resumes from the receiver's position
 * after a lost connection (reconnect) or lost chunks (RTO); a stream that
 * does not fit the receiver's byte budget waits its turn instead of being
 * lost, and so does one beyond max_streams_in; hostile chunks (too
 * large, a piece of an unknown stream, past its end, a stall) are refused
 * or dropped with the budget given back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bb_envelope.pb-c.h"
#include "support/engine_fixtures.h"

#define CHUNK (64 * 1024)
#define FLOATS (1u << 20) /* 4 MiB: 65 chunks */
#define SEC 1000000000ULL

/* Tx: Send(x) to /site/301 of the peers given. Rx: Recv(/site/301, f32)
 * -> out. */
static bb_model *model(void)
{
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Tx", "x,peers", "");
    bb_node *s = fx_op(m, f, FX_WIRE, "Send", "x,peers", "");
    fx_meta(m, s, "ai.bytesandbrains.wire_dest_site", "301");
    bb_function *r = fx_fn(m, "Rx", "", "out");
    fx_recv(m, r, 301, "t", "p", &BB_TYPE_TENSOR_F32);
    fx_op(m, r, FX_SYS, "PassThrough", "p", "out");
    return m;
}

/* budget, max_in: the receiver's ingress byte budget and max_streams_in
 * (0: the default). */
static bb_engine *node_with(uint8_t seed, bb_model *m, const char *target, size_t budget,
                            uint32_t max_in)
{
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    cfg.stream_chunk_bytes = CHUNK;
    cfg.send_gather = true;
    if (budget)
        cfg.caps.ingress_byte_budget = budget;
    if (max_in)
        cfg.caps.max_streams_in = max_in;
    bb_engine *e = fx_engine(seed, (uint16_t)(7000 + seed), &cfg);
    assert_non_null(e);
    bb_error err = {0};
    if (fx_install(e, m, target, &err))
        fail_msg("install %s: %s", target, err.msg);
    return e;
}

static bb_engine *node(uint8_t seed, bb_model *m, const char *target)
{
    return node_with(seed, m, target, 0, 0);
}

static void know(bb_engine *e, uint8_t seed) { assert_int_equal(fx_know(e, seed), BB_OK); }

static bb_value *tensor(float seed)
{
    int64_t d = FLOATS;
    bb_value *v = bb_value_tensor_new(BB_DT_FLOAT, 1, &d);
    for (size_t i = 0; i < FLOATS; i++)
        bb_tensor_f32(v)[i] = seed + (float)(i % 1000);
    return v;
}

static void send_to(bb_engine *tx, bb_value *x, uint8_t to)
{
    bb_peerid p = fx_peer(to);
    bb_value *items[1] = {bb_value_bytes(&BB_TYPE_PEER_ID, p.bytes, p.len)};
    bb_value *peers = bb_value_list(&BB_TYPE_PEER_ID_VEC, items, 1);
    bb_engine_input in[2] = {{.name = "x", .value = x}, {.name = "peers", .value = peers}};
    assert_int_equal(bb_engine_invoke(tx, "Tx", in, 2, NULL, NULL), BB_OK);
    bb_value_unref(peers);
}

/* The largest envelope engine i sent, and its SendEnvelope count. */
static size_t largest_sent(const fx_net *net, int i, size_t *count)
{
    size_t big = 0, n = 0;
    const fx_rec *r;
    while ((r = fx_log_nth(&net->log[i], BB_STEP_SEND_ENVELOPE, n))) {
        big = r->count > big ? r->count : big;
        n++;
    }
    *count = n;
    return big;
}

static void expect_tensor(const fx_net *net, int rx, size_t k, float seed)
{
    const fx_rec *r = fx_log_app(&net->log[rx], "out", k);
    assert_non_null(r);
    assert_int_equal(bb_tensor_numel(r->value), FLOATS);
    for (size_t i = 0; i < FLOATS; i++)
        if (bb_tensor_f32(r->value)[i] != seed + (float)(i % 1000))
            fail_msg("element %zu differs", i);
}

/* Every stream ended well (tx, rx: engine indexes in net), the receiver
 * holds no budget any more; then net and m are freed. */
static void expect_clean_end(fx_net *net, int tx, int rx, bb_model *m)
{
    assert_int_equal(bb_engine_counter(net->e[tx], "streams.failed"), 0);
    assert_int_equal(bb_engine_counter(net->e[rx], "streams.failed"), 0);
    assert_int_equal(bb_engine_counter(net->e[rx], "ingress.bytes_in_flight"), 0);
    fx_net_free(net);
    bb_model_free(m);
}

/* net: engine 0 (Tx) has sent a tensor of seed to engine 1 (Rx); nothing
 * polled yet. */
static void start_pair(fx_net *net, bb_model *m, float seed)
{
    net->now = SEC;
    fx_net_add(net, node(1, m, "Tx"));
    fx_net_add(net, node(2, m, "Rx"));
    know(net->e[0], 2);
    bb_value *x = tensor(seed);
    send_to(net->e[0], x, 2);
    bb_value_unref(x);
}

static void test_large_envelope_arrives_in_chunks(void **state)
{
    (void)state;
    bb_model *m = model();
    fx_net net = {0};
    start_pair(&net, m, 3);
    fx_net_poll(&net, 0); /* one chunk until the receiver took the stream */
    size_t sends;
    largest_sent(&net, 0, &sends);
    assert_int_equal(sends, 1);
    fx_net_poll(&net, 1); /* it did (ACK) */
    fx_net_poll(&net, 0); /* a window beyond what it acknowledged */
    largest_sent(&net, 0, &sends);
    assert_int_equal(sends, 1 + 4); /* stream_window */
    fx_net_run(&net, 500);
    expect_tensor(&net, 1, 0, 3);
    size_t big = largest_sent(&net, 0, &sends);
    assert_true(big <= CHUNK + 128); /* a chunk and its head: no frame larger */
    assert_true(sends >= FLOATS * 4 / CHUNK);
    assert_int_equal(bb_engine_counter(net.e[0], "streams.out"), 1);
    assert_int_equal(bb_engine_counter(net.e[1], "streams.in"), 1);
    expect_clean_end(&net, 0, 1, m);
}

/* The link dies mid-stream: what was in flight is lost. After the
 * reconnect, or after RTO without one, the sender goes on from what the
 * receiver holds, and the tensor arrives intact. */
static void test_stream_resumes_after_a_loss(void **state)
{
    (void)state;
    for (int reconnect = 1; reconnect >= 0; reconnect--) {
        bb_model *m = model();
        fx_net net = {0};
        start_pair(&net, m, 5);
        for (int i = 0; i < 4; i++) { /* part of the stream crosses */
            fx_net_poll(&net, 0);
            fx_net_poll(&net, 1);
        }
        net.drop_all = true;
        for (int i = 0; i < 6; i++) {
            fx_net_poll(&net, 0);
            fx_net_poll(&net, 1);
        }
        net.drop_all = false;
        if (reconnect) {
            bb_peerid rx = fx_peer(2);
            assert_int_equal(bb_engine_peer_connected(net.e[0], &rx, NULL, 0, NULL), BB_OK);
        } else {
            net.now += 3 * SEC; /* past the RTO */
        }
        fx_net_run(&net, 1000);
        expect_tensor(&net, 1, 0, 5);
        assert_true(bb_engine_counter(net.e[0], "streams.resumed") >= 1);
        expect_clean_end(&net, 0, 1, m);
    }
}

/* Two 4 MiB streams to a receiver that takes one at a time, by its budget
 * (it holds one) or by max_streams_in (1): the second waits (WAIT) while
 * the first is assembled, is admitted when the first one is done (offered
 * the budget again, or asking again after RTO), and arrives too. */
static void waits_its_turn(size_t budget, uint32_t max_in)
{
    bb_model *m = model();
    fx_net net = {0};
    net.now = SEC;
    fx_net_add(&net, node(1, m, "Tx"));
    fx_net_add(&net, node(3, m, "Tx"));
    fx_net_add(&net, node_with(2, m, "Rx", budget, max_in));
    know(net.e[0], 2);
    know(net.e[1], 2);
    bb_value *a = tensor(7), *b = tensor(9);
    send_to(net.e[0], a, 2);
    send_to(net.e[1], b, 2);
    bb_value_unref(a);
    bb_value_unref(b);
    for (int i = 0; i < 200 && !fx_log_app(&net.log[2], "out", 1); i++) {
        fx_net_run(&net, 50);
        net.now += 100000000ULL; /* past the receiver's 50 ms offers, towards the RTO */
    }
    const fx_rec *r0 = fx_log_app(&net.log[2], "out", 0);
    assert_non_null(r0);
    float first = bb_tensor_f32(r0->value)[0];
    assert_true(first == 7 || first == 9);
    expect_tensor(&net, 2, 0, first);
    expect_tensor(&net, 2, 1, first == 7 ? 9 : 7);
    assert_int_equal(bb_engine_counter(net.e[2], "streams.in"), 2);
    assert_int_equal(bb_engine_counter(net.e[0], "streams.waited") +
                         bb_engine_counter(net.e[1], "streams.waited"),
                     1);
    assert_int_equal(bb_engine_counter(net.e[1], "streams.failed"), 0);
    expect_clean_end(&net, 0, 2, m);
}

static void test_stream_waits_its_turn(void **state)
{
    (void)state;
    for (int by_slots = 0; by_slots < 2; by_slots++)
        waits_its_turn(by_slots ? 0 : 6u << 20, by_slots ? 1 : 0);
}

/* ---- hostile chunks ------------------------------------------------------------------------- */

/* A chunk envelope packed by protobuf-c, the reference encoder. */
static uint8_t *chunk_env(uint64_t id, uint64_t total, uint64_t offset, const uint8_t *data,
                          size_t n, size_t *len)
{
    Bb__Core__StreamChunk c = BB__CORE__STREAM_CHUNK__INIT;
    c.stream_id = id;
    c.total = total;
    c.offset = offset;
    c.data.data = (uint8_t *)data;
    c.data.len = n;
    Bb__Core__WireEnvelope env = BB__CORE__WIRE_ENVELOPE__INIT;
    env.chunk = &c;
    *len = bb__core__wire_envelope__get_packed_size(&env);
    uint8_t *b = malloc(*len ? *len : 1);
    bb__core__wire_envelope__pack(&env, b);
    return b;
}

/* The answers rx sent since the last call: how many of kind. */
static size_t answers(fx_log *log, int kind)
{
    size_t n = 0, k = 0;
    const fx_rec *r;
    while ((r = fx_log_nth(log, BB_STEP_SEND_ENVELOPE, k++))) {
        Bb__Core__WireEnvelope *env =
            bb__core__wire_envelope__unpack(NULL, r->bytes_len, r->bytes);
        if (env && env->chunk && (int)env->chunk->kind == kind)
            n++;
        bb__core__wire_envelope__free_unpacked(env, NULL);
    }
    fx_log_free(log);
    memset(log, 0, sizeof *log);
    return n;
}

static void deliver(bb_engine *rx, fx_log *log, uint8_t from, uint64_t id, uint64_t total,
                    uint64_t offset, size_t n, uint64_t now)
{
    uint8_t *data = calloc(n ? n : 1, 1);
    size_t len;
    uint8_t *b = chunk_env(id, total, offset, data, n, &len);
    free(data);
    bb_peerid src = fx_peer(from);
    assert_int_equal(bb_engine_deliver_envelope_owned(rx, &src, NULL, b, len, NULL), BB_OK);
    fx_run(rx, log, now, 5);
}

static void test_hostile_chunks(void **state)
{
    (void)state;
    bb_model *m = model();
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    cfg.caps.max_envelope_bytes = 8u << 20;
    cfg.caps.max_streams_in = 2;
    cfg.caps.stream_stall_ns = 10 * SEC;
    bb_engine *rx = fx_engine(2, 7002, &cfg);
    bb_error err = {0};
    if (fx_install(rx, m, "Rx", &err))
        fail_msg("%s", err.msg);
    know(rx, 1);
    know(rx, 3);
    fx_log log = {0};
    /* larger than max_envelope_bytes: refused, nothing held */
    deliver(rx, &log, 1, 10, 9u << 20, 0, 100, SEC);
    assert_int_equal(answers(&log, BB__CORE__CHUNK_KIND__REFUSE), 1);
    /* a piece of a stream it does not hold */
    deliver(rx, &log, 1, 11, 1u << 20, 4096, 100, SEC);
    assert_int_equal(answers(&log, BB__CORE__CHUNK_KIND__REFUSE), 1);
    assert_int_equal(bb_engine_counter(rx, "ingress.bytes_in_flight"), 0);
    /* a stream opens (its total charged at once) ... */
    deliver(rx, &log, 1, 12, 1u << 20, 0, 4096, SEC);
    assert_int_equal(answers(&log, BB__CORE__CHUNK_KIND__ACK), 1);
    assert_int_equal(bb_engine_counter(rx, "ingress.bytes_in_flight"), 1u << 20);
    /* ... a piece past its end refuses it and gives the budget back */
    deliver(rx, &log, 1, 12, 1u << 20, 4096, (1u << 20), SEC);
    assert_int_equal(answers(&log, BB__CORE__CHUNK_KIND__REFUSE), 1);
    assert_int_equal(bb_engine_counter(rx, "ingress.bytes_in_flight"), 0);
    /* another total for the same stream: refused as well */
    deliver(rx, &log, 1, 13, 1u << 20, 0, 4096, SEC);
    deliver(rx, &log, 1, 13, 2u << 20, 4096, 4096, SEC);
    assert_int_equal(answers(&log, BB__CORE__CHUNK_KIND__REFUSE), 1);
    /* a gap: answered with where the stream is, nothing written */
    deliver(rx, &log, 1, 14, 1u << 20, 0, 4096, SEC);
    deliver(rx, &log, 1, 14, 1u << 20, 3 * 4096, 4096, SEC);
    answers(&log, BB__CORE__CHUNK_KIND__ACK);
    /* max_streams_in: a third stream is told to wait, and nothing of it is
     * kept (it asks again) */
    deliver(rx, &log, 3, 15, 1u << 20, 0, 4096, SEC);
    assert_int_equal(answers(&log, BB__CORE__CHUNK_KIND__ACK), 1);
    deliver(rx, &log, 3, 16, 1u << 20, 0, 4096, SEC);
    assert_int_equal(answers(&log, BB__CORE__CHUNK_KIND__WAIT), 1);
    assert_int_equal(bb_engine_counter(rx, "ingress.bytes_in_flight"), 2u << 20);
    assert_int_equal(bb_engine_counter(rx, "streams.in"), 4);
    /* a stall: both streams go, their budget with them */
    assert_true(bb_engine_next_deadline(rx) <= 11 * SEC);
    fx_run(rx, &log, 12 * SEC, 5);
    fx_log_free(&log);
    assert_int_equal(bb_engine_counter(rx, "ingress.bytes_in_flight"), 0);
    assert_int_equal(bb_engine_counter(rx, "streams.failed"), 5); /* 10, 12, 13; 14, 15 */
    bb_engine_free(rx);
    /* larger than the whole byte budget: it could never fit, so it is
     * refused rather than left waiting */
    cfg.caps.ingress_byte_budget = 1u << 20;
    rx = fx_engine(2, 7002, &cfg);
    if (fx_install(rx, m, "Rx", &err))
        fail_msg("%s", err.msg);
    know(rx, 1);
    deliver(rx, &log, 1, 20, 2u << 20, 0, 4096, SEC);
    assert_int_equal(answers(&log, BB__CORE__CHUNK_KIND__REFUSE), 1);
    assert_int_equal(bb_engine_counter(rx, "ingress.bytes_in_flight"), 0);
    bb_engine_free(rx);
    bb_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_large_envelope_arrives_in_chunks),
        cmocka_unit_test(test_stream_resumes_after_a_loss),
        cmocka_unit_test(test_stream_waits_its_turn),
        cmocka_unit_test(test_hostile_chunks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
