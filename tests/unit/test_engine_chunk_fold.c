/*
 * Responses folded chunk by chunk (libbbengine/src/chunk_fold.c) with the
 * real agg::FedAvg on in-process engines:
 *
 *   - a federated round (one Server, three Clients training nn::Mlp on
 *     iris) whose updates travel as chunk streams of 512 bytes folds to the
 *     mean the whole-envelope path gives, while the server's ingress
 *     budget never holds more than the chunks in flight (the whole path
 *     charges every update being assembled);
 *   - hand-made responses streamed to a server: chunks resent after a
 *     reconnect are folded once; hostile chunks (a changed total, a piece
 *     past the end, a tail that differs from its preview) are refused and
 *     fold nothing twice; a stream cut part-way counts on the coordinates
 *     it brought; a batch that does not fold (TrimmedMean) takes the
 *     whole-envelope path as before.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/plugin_loader.h"
#include "bb/recorder.h"
#include "bb_envelope.pb-c.h"
#include "support/engine_fixtures.h"
#include "support/plugin_fixtures.h"

#define N_CLIENTS 3
#define SEC 1000000000ULL
#define MLP_CONFIG "{\"layers\":[4,512,3],\"learning_rate\":0.05,\"batch_size\":16,\"seed\":7}"
#define NUMEL (4 * 512 + 512 + 512 * 3 + 3)

/* Server: the model's parameters to K Clients, their answers through
 * `aggregator` (FedAvg, or another type), the result emitted as "round". */
static bb_module *record_server(bb_recorder *r, const char *agg_type, int64_t quorum,
                                int64_t deadline_ns)
{
    bb_module *m = bb_rec_class_module(r, "Server");
    bb_slot *model = bb_rec_concrete(m, BB_ROLE_MODEL, "model", "nn::Mlp", MLP_CONFIG, NULL);
    bb_slot *agg = bb_rec_concrete(m, BB_ROLE_AGGREGATOR, "aggregator", agg_type, "{}", NULL);
    bb_slot *sel = bb_rec_concrete(m, BB_ROLE_PEER_SELECTOR, "selector", "peers::Connected",
                                   "{}", NULL);
    bb_rec_concrete(m, BB_ROLE_DATA_SOURCE, "data", "data::Csv", "{}", NULL); /* the model's */
    bb_rec *g = bb_module_body(m);
    bb_val params = bb_role_model_params(g, model);
    bb_val peers = bb_role_peer_selector_sample(g, sel, N_CLIENTS, "Client");
    bb_val req_id, responses;
    bb_wire_send_req_batched(g, NULL, "params", params, peers, quorum, deadline_ns, &req_id,
                             NULL);
    bb_wire_recv_resp_batched(g, NULL, req_id, NULL, &responses);
    bb_val contributed = bb_role_aggregator_contribute(g, agg, responses, BB_VAL_OMIT);
    bb_val global = bb_role_aggregator_aggregate(g, agg, contributed, NULL);
    bb_sys_app_emit(g, global, "round");
    return m;
}

static bb_module *record_client(bb_recorder *r)
{
    bb_module *m = bb_rec_class_module(r, "Client");
    bb_slot *model = bb_rec_concrete(m, BB_ROLE_MODEL, "model", "nn::Mlp", MLP_CONFIG, NULL);
    bb_rec_concrete(m, BB_ROLE_DATA_SOURCE, "data", "data::Csv", "{}", NULL);
    bb_rec *g = bb_module_body(m);
    bb_val params, req_id;
    bb_wire_recv_req(g, NULL, "params", &BB_TYPE_TENSOR_F32, NULL, &params, &req_id);
    bb_val loaded = bb_role_model_load_parameters(g, model, params);
    bb_val update[2];
    bb_role_model_train(g, model, loaded, 1, &update[0], &update[1]);
    bb_wire_send_resp(g, NULL, bb_rec_bundle(g, update, 2), BB_VAL_OMIT, req_id);
    return m;
}

static bb_model *compile_round(const char *agg_type, int64_t quorum, int64_t deadline_ns)
{
    bb_recorder *r = bb_recorder_new("user.app");
    assert_non_null(r);
    bb_module *root = bb_rec_module(r, "Federated");
    bb_module *server = record_server(r, agg_type, quorum, deadline_ns);
    bb_module *client = record_client(r);
    bb_rec *g = bb_module_body(root);
    bb_call_build(bb_rec_call(g, server));
    bb_call_build(bb_rec_call(g, client));
    bb_model *in = NULL;
    bb_error e = {0};
    if (bb_recorder_build(r, root, &in, &e))
        fail_msg("record: %s", e.msg);
    bb_recorder_free(r);
    bb_model *out = pfx_compile(in, &e);
    if (!out)
        fail_msg("compile: %s", e.msg);
    bb_model_free(in);
    return out;
}

static bb_engine_config config(size_t chunk)
{
    bb_engine_config c;
    bb_engine_config_init(&c);
    c.stream_chunk_bytes = chunk;
    c.send_gather = true;
    c.caps.stream_stall_ns = 5 * SEC;
    return c;
}

static bb_engine *node(fx_net *net, uint8_t seed, bb_model *m, const char *target,
                       const pfx_slot_config *cfg, size_t n_cfg, const bb_engine_config *ecfg)
{
    bb_error err = {0};
    bb_engine *e = pfx_net_node(net, seed, m, target, cfg, n_cfg, ecfg, &err);
    if (!e)
        fail_msg("%s", err.msg);
    return e;
}

static void connect_client(bb_engine *server, uint8_t seed)
{
    assert_int_equal(fx_know(server, seed), BB_OK);
    bb_peerid cp = fx_peer(seed);
    const char *t = "Client";
    assert_int_equal(bb_engine_peer_connected(server, &cp, &t, 1, NULL), BB_OK);
}

static uint64_t counter(bb_engine *e, const char *name)
{
    return bb_engine_counter(e, name);
}

/* Poll every engine until none has work; *peak: the most the server's
 * ingress budget held between two polls. */
static void run_watching(fx_net *net, size_t *peak)
{
    for (int r = 0; r < 5000; r++) {
        bool any = false;
        for (int i = 0; i < net->n; i++) {
            if (bb_engine_next_deadline(net->e[i]) > net->now)
                continue;
            fx_net_poll(net, i);
            any = true;
            size_t held = (size_t)counter(net->e[0], "ingress.bytes_in_flight");
            *peak = held > *peak ? held : *peak;
        }
        if (!any)
            return;
    }
}

/* One round of the iris federation with chunks of `chunk` bytes: the
 * aggregate (new reference); *peak the server's largest ingress charge. */
static bb_value *iris_round(bb_model *m, size_t chunk, size_t *peak, uint64_t *folded_streams)
{
    const char *iris = pfx_repo_path("data/iris.csv");
    const char *common = "\"skip_rows\": 1, \"holdout\": 0.2, \"split_seed\": 5, "
                         "\"normalization\": \"standardize\", \"partition_seed\": 5";
    char client_data[N_CLIENTS][512], server_data[512];
    pfx_slot_config ccfg[N_CLIENTS][1];
    snprintf(server_data, sizeof server_data, "{\"path\": \"%s\", %s, \"part\": \"holdout\"}",
             iris, common);
    pfx_slot_config scfg[1] = {{"data", server_data}};
    bb_engine_config ecfg = config(chunk);
    fx_net net = {0};
    net.now = SEC;
    bb_engine *server = node(&net, 1, m, "Server", scfg, 1, &ecfg);
    for (int i = 0; i < N_CLIENTS; i++) {
        snprintf(client_data[i], sizeof client_data[i],
                 "{\"path\": \"%s\", %s, \"shard_count\": %d, \"shard_index\": %d, \"seed\": %d}",
                 iris, common, N_CLIENTS, i, i);
        ccfg[i][0] = (pfx_slot_config){"data", client_data[i]};
        bb_engine *c = node(&net, (uint8_t)(2 + i), m, "Client", ccfg[i], 1, &ecfg);
        assert_int_equal(fx_know(c, 1), BB_OK);
        connect_client(server, (uint8_t)(2 + i));
    }
    bb_error err = {0};
    if (bb_engine_invoke(server, "Server", NULL, 0, NULL, &err))
        fail_msg("invoke: %s", err.msg);
    *peak = 0;
    run_watching(&net, peak);
    for (int i = 0; i <= N_CLIENTS; i++)
        if (fx_log_count(&net.log[i], BB_STEP_OP_FAILED))
            fail_msg("node %d: %s failed: %s", i, fx_log_nth(&net.log[i], BB_STEP_OP_FAILED, 0)->b,
                     fx_log_nth(&net.log[i], BB_STEP_OP_FAILED, 0)->c);
    const fx_rec *ev = fx_log_app(&net.log[0], "round", 0);
    assert_non_null(ev);
    assert_int_equal(counter(server, "responses.folded"), N_CLIENTS);
    assert_int_equal(counter(server, "streams.failed"), 0);
    *folded_streams = counter(server, "streams.folded");
    bb_value *v = bb_value_ref(ev->value);
    fx_net_free(&net);
    return v;
}

static void test_chunk_fold_round_matches_whole_path(void **state)
{
    (void)state;
    if (!pfx_fetch_data())
        fail_msg("scripts/fetch-data could not provide data/iris.csv");
    bb_model *m = compile_round("agg::FedAvg", N_CLIENTS, 0);
    size_t whole_peak = 0, chunk_peak = 0, model_bytes = NUMEL * sizeof(float);
    uint64_t whole_streams = 0, chunk_streams = 0;
    bb_value *whole = iris_round(m, 0, &whole_peak, &whole_streams);     /* no streams */
    bb_value *chunked = iris_round(m, 512, &chunk_peak, &chunk_streams); /* 33 chunks each */
    assert_int_equal(whole_streams, 0);
    assert_int_equal(chunk_streams, N_CLIENTS);
    assert_int_equal(bb_tensor_numel(chunked), NUMEL);
    const float *a = bb_tensor_f32(whole), *b = bb_tensor_f32(chunked);
    for (size_t j = 0; j < NUMEL; j++)
        if (!(fabsf(a[j] - b[j]) <= 1e-5f * (1.0f + fabsf(a[j]))))
            fail_msg("[%zu]: whole %.9g, chunked %.9g", j, (double)a[j], (double)b[j]);
    print_message("  peak ingress charge: whole envelopes %zu bytes, chunks folded %zu bytes "
                  "(an update is %zu bytes)\n",
                  whole_peak, chunk_peak, model_bytes);
    assert_true(whole_peak >= model_bytes);  /* the whole path holds an update */
    assert_true(chunk_peak < model_bytes);   /* the chunks in flight only */
    bb_value_unref(whole);
    bb_value_unref(chunked);
    bb_model_free(m);
}

/* ---- hand-made responses streamed to a server ----------------------------------------- */

#define CHUNK 1024

typedef struct srv {
    fx_net net;
    bb_model *m;
    bb_engine *e;
    uint64_t now;
    uint64_t wire[8];  /* the wire_req_id the server sent to peer seed i */
    size_t refused;    /* REFUSE answers it sent */
} srv;

static int seed_of(const bb_peerid *p)
{
    for (uint8_t i = 2; i < 8; i++) {
        bb_peerid q = fx_peer(i);
        if (bb_peerid_equal(p, &q))
            return i;
    }
    return -1;
}

/* Poll until idle at s->now, noting the requests and refusals it sends. */
static void srv_poll(srv *s)
{
    bb_steps st;
    bb_steps_init(&st);
    for (int r = 0; r < 20; r++) {
        if (r && bb_engine_next_deadline(s->e) > s->now)
            break;
        bb_engine_poll(s->e, s->now, &st);
        for (size_t k = 0; k < st.n; k++) {
            fx_log_add(&s->net.log[0], &st.v[k]);
            if (st.v[k].kind != BB_STEP_SEND_ENVELOPE)
                continue;
            uint8_t *flat = fx_send_bytes(&st.v[k]);
            Bb__Core__WireEnvelope *env =
                bb__core__wire_envelope__unpack(NULL, st.v[k].u.send.len, flat);
            int seed = seed_of(&st.v[k].u.send.peer);
            if (env && env->correlation && env->correlation->kind == 1 && seed > 0)
                s->wire[seed] = env->correlation->wire_req_id;
            if (env && env->chunk && env->chunk->kind == BB__CORE__CHUNK_KIND__REFUSE)
                s->refused++;
            bb__core__wire_envelope__free_unpacked(env, NULL);
            free(flat);
        }
    }
    bb_steps_free(&st);
}

/* A server of agg_type whose round waits for `quorum` of clients 2, 3, 4
 * until deadline_ns; the round's request sent. */
static void srv_start(srv *s, const char *agg_type, int64_t quorum, int64_t deadline_ns)
{
    memset(s, 0, sizeof *s);
    if (!pfx_fetch_data())
        fail_msg("scripts/fetch-data could not provide data/iris.csv");
    s->m = compile_round(agg_type, quorum, deadline_ns);
    char data[512];
    snprintf(data, sizeof data, "{\"path\": \"%s\", \"skip_rows\": 1, \"holdout\": 0.2, "
             "\"part\": \"holdout\"}", pfx_repo_path("data/iris.csv"));
    pfx_slot_config scfg[1] = {{"data", data}};
    bb_engine_config ecfg = config(0);
    s->e = node(&s->net, 1, s->m, "Server", scfg, 1, &ecfg);
    for (uint8_t c = 2; c < 2 + N_CLIENTS; c++)
        connect_client(s->e, c);
    s->now = SEC;
    bb_error err = {0};
    if (bb_engine_invoke(s->e, "Server", NULL, 0, NULL, &err))
        fail_msg("invoke: %s", err.msg);
    srv_poll(s);
    for (uint8_t c = 2; c < 2 + N_CLIENTS; c++)
        assert_int_not_equal(s->wire[c], 0);
}

static void srv_free(srv *s)
{
    fx_net_free(&s->net);
    bb_model_free(s->m);
}

static float client_value(uint8_t seed, size_t j)
{
    return (float)seed - 3.0f + (float)((j * 7 + seed) % 50) * 0.125f;
}

static uint64_t client_samples(uint8_t seed) { return 2u + seed; }

/* Client seed's response to the server, as the client's engine would write
 * it (the update Composite-wrapped); values changed by `bias`. */
static uint8_t *response_of(const srv *s, uint8_t seed, float bias, size_t *len)
{
    float *x = malloc(NUMEL * sizeof *x);
    for (size_t j = 0; j < NUMEL; j++)
        x[j] = client_value(seed, j) + bias;
    int64_t d = NUMEL;
    bb_value *items[2] = {pfx_tensor(x, 1, &d), bb_value_u64(&BB_TYPE_U64, client_samples(seed))};
    free(x);
    bb_value *bundle = bb_value_list(&BB_TYPE_COMPOSITE, items, 2);
    bb_value *wrap = bb_value_list(&BB_TYPE_COMPOSITE, &bundle, 1);
    uint8_t *payload = NULL;
    size_t plen = 0;
    assert_int_equal(bb_value_encode(wrap, &payload, &plen, NULL), BB_OK);
    bb_value_unref(wrap);
    fx_fill f = {.site = 0, .payload = payload, .len = plen};
    fx_env env = {.fills = &f, .n_fills = 1, .corr = 2, .wire_req_id = s->wire[seed],
                  .sent_at_ns = s->now};
    uint8_t *b = fx_envelope(&env, len);
    free(payload);
    return b;
}

/* Chunk [off, off + n) of the envelope env (total bytes) as stream id; the
 * first previews its last bytes as the sender does (streams.c chunk_of);
 * total_as: the total it claims. */
static void send_chunk(srv *s, uint8_t from, uint64_t id, const uint8_t *env, size_t total,
                       size_t total_as, size_t off, size_t n)
{
    Bb__Core__StreamChunk c = BB__CORE__STREAM_CHUNK__INIT;
    c.stream_id = id;
    c.total = total_as;
    c.offset = off;
    c.data.data = (uint8_t *)env + off;
    c.data.len = n;
    size_t tail = off == 0 && total > n ? total - n : 0;
    tail = tail < 1024 ? tail : 1024;
    c.tail.data = (uint8_t *)env + total - tail;
    c.tail.len = tail;
    Bb__Core__WireEnvelope w = BB__CORE__WIRE_ENVELOPE__INIT;
    w.chunk = &c;
    size_t len = bb__core__wire_envelope__get_packed_size(&w);
    uint8_t *b = malloc(len);
    bb__core__wire_envelope__pack(&w, b);
    bb_peerid src = fx_peer(from);
    assert_int_equal(bb_engine_deliver_envelope_owned(s->e, &src, NULL, b, len, NULL), BB_OK);
    srv_poll(s);
}

/* Chunks of env from byte `from` up to `to`. */
static void send_range(srv *s, uint8_t seed, uint64_t id, const uint8_t *env, size_t total,
                       size_t from, size_t to)
{
    for (size_t off = from; off < to; off += CHUNK)
        send_chunk(s, seed, id, env, total, total, off, total - off < CHUNK ? total - off : CHUNK);
}

static void stream_whole(srv *s, uint8_t seed, uint64_t id)
{
    size_t total;
    uint8_t *env = response_of(s, seed, 0, &total);
    send_range(s, seed, id, env, total, 0, total);
    free(env);
}

/* Where the tensor's bytes start in a response of response_of. */
static size_t raw_at(const srv *s, uint8_t seed)
{
    size_t total;
    uint8_t *env = response_of(s, seed, 0, &total);
    float first[4];
    for (size_t j = 0; j < 4; j++)
        first[j] = client_value(seed, j);
    const uint8_t *p = memmem(env, total, first, sizeof first);
    assert_non_null(p);
    size_t at = (size_t)(p - env);
    free(env);
    return at;
}

/* The round's result, checked against the per-coordinate weighted mean
 * of the clients in `with`, where client cut_seed (0: none) counts on its
 * first cut_elems coordinates only. */
static void expect_round(srv *s, const uint8_t *with, size_t n, uint8_t cut_seed,
                         size_t cut_elems)
{
    const fx_rec *ev = fx_log_app(&s->net.log[0], "round", 0);
    if (!ev) {
        const fx_rec *f = fx_log_nth(&s->net.log[0], BB_STEP_OP_FAILED, 0);
        fail_msg("no round: %s", f ? f->c : "(no failure either)");
    }
    assert_int_equal(bb_tensor_numel(ev->value), NUMEL);
    const float *got = bb_tensor_f32(ev->value);
    for (size_t j = 0; j < NUMEL; j++) {
        double sum = 0, w = 0;
        for (size_t k = 0; k < n; k++) {
            if (with[k] == cut_seed && j >= cut_elems)
                continue;
            sum += (double)client_samples(with[k]) * client_value(with[k], j);
            w += (double)client_samples(with[k]);
        }
        if (!(fabs(got[j] - sum / w) <= 1e-5 * (1 + fabs(sum / w))))
            fail_msg("[%zu] = %.9g, want %.9g", j, (double)got[j], sum / w);
    }
}

/* A stream resumed after a reconnect: chunks resent from the start and one
 * behind the position are dropped, so each byte is folded once. */
static void test_chunk_fold_resume_folds_each_byte_once(void **state)
{
    (void)state;
    srv s;
    srv_start(&s, "agg::FedAvg", N_CLIENTS, 0);
    size_t total;
    uint8_t *env = response_of(&s, 2, 0, &total);
    send_range(&s, 2, 41, env, total, 0, 6 * CHUNK);
    send_range(&s, 2, 41, env, total, 0, 6 * CHUNK);     /* the reconnect resends them */
    send_range(&s, 2, 41, env, total, 5 * CHUNK, total); /* one behind, then the rest */
    free(env);
    stream_whole(&s, 3, 7);
    stream_whole(&s, 4, 7);
    assert_int_equal(counter(s.e, "streams.folded"), 3);
    assert_int_equal(counter(s.e, "streams.failed"), 0);
    assert_int_equal(counter(s.e, "ingress.bytes_in_flight"), 0);
    expect_round(&s, (const uint8_t[]){2, 3, 4}, 3, 0, 0);
    srv_free(&s);
}

/* A chunk that changes its stream's total or runs past its end is refused
 * (the stream ends there, cut: what it brought stays once, nothing more);
 * a tail that differs from the preview fails the round naming it. */
static void test_chunk_fold_hostile_chunks(void **state)
{
    (void)state;
    srv s;
    srv_start(&s, "agg::FedAvg", 2, 3 * (int64_t)SEC);
    size_t total;
    uint8_t *env = response_of(&s, 2, 0, &total);
    send_range(&s, 2, 5, env, total, 0, 4 * CHUNK);
    send_chunk(&s, 2, 5, env, total, total + 1, 4 * CHUNK, CHUNK); /* another total */
    assert_int_equal(s.refused, 1);
    send_range(&s, 2, 5, env, total, 4 * CHUNK, total); /* the rest: a stream it gave up */
    assert_true(s.refused >= 2);
    send_range(&s, 2, 6, env, total, 0, total); /* again, as a new stream: answered already */
    free(env);
    stream_whole(&s, 3, 1);
    stream_whole(&s, 4, 1);
    size_t elems = (4 * CHUNK - raw_at(&s, 2)) / sizeof(float);
    assert_int_equal(counter(s.e, "streams.folded"), 2);
    s.now += 4 * SEC; /* the deadline: 2 whole answers of 3, the quorum */
    srv_poll(&s);
    expect_round(&s, (const uint8_t[]){2, 3, 4}, 3, 2, elems);
    srv_free(&s);

    srv_start(&s, "agg::FedAvg", N_CLIENTS, 0);
    env = response_of(&s, 4, 0, &total);
    send_range(&s, 4, 9, env, total, 0, total - CHUNK); /* the data, then a forged end */
    env[total - 3] ^= 0x55;
    send_range(&s, 4, 9, env, total, (total - 1) / CHUNK * CHUNK, total);
    free(env);
    const fx_rec *f = fx_log_nth(&s.net.log[0], BB_STEP_OP_FAILED, 0);
    assert_non_null(f);
    assert_non_null(strstr(f->c, "differs from the tail its first chunk previewed"));
    assert_null(fx_log_app(&s.net.log[0], "round", 0));
    srv_free(&s);
}

/* A stream that stalls part-way is given up: its sender counts on the
 * coordinates it brought, the others on all. */
static void test_chunk_fold_cut_stream(void **state)
{
    (void)state;
    srv s;
    srv_start(&s, "agg::FedAvg", 2, 20 * (int64_t)SEC);
    size_t total;
    uint8_t *env = response_of(&s, 3, 0, &total);
    send_range(&s, 3, 77, env, total, 0, 9 * CHUNK);
    free(env);
    stream_whole(&s, 2, 1);
    stream_whole(&s, 4, 1);
    s.now += 6 * SEC; /* stream_stall_ns is 5 s */
    srv_poll(&s);
    assert_int_equal(counter(s.e, "streams.failed"), 1);
    s.now += 20 * SEC; /* the batch's deadline */
    srv_poll(&s);
    size_t elems = (9 * CHUNK - raw_at(&s, 3)) / sizeof(float);
    expect_round(&s, (const uint8_t[]){2, 3, 4}, 3, 3, elems);
    srv_free(&s);
}

/* The server restarts from a snapshot taken mid-stream: the stream is gone
 * (streams are transient; its next chunk is refused), the aggregator's
 * part comes back cut, and the round counts the sender on its prefix. */
static void test_chunk_fold_restart_mid_stream(void **state)
{
    (void)state;
    srv s;
    srv_start(&s, "agg::FedAvg", 2, 20 * (int64_t)SEC);
    size_t total;
    uint8_t *env = response_of(&s, 2, 0, &total);
    send_range(&s, 2, 12, env, total, 0, 5 * CHUNK);
    uint8_t *snap = NULL;
    size_t len = 0;
    bb_error err = {0};
    assert_int_equal(bb_engine_snapshot(s.e, &snap, &len, &err), BB_OK);
    char data[512];
    snprintf(data, sizeof data, "{\"path\": \"%s\", \"skip_rows\": 1, \"holdout\": 0.2, "
             "\"part\": \"holdout\"}", pfx_repo_path("data/iris.csv"));
    pfx_slot_config scfg[1] = {{"data", data}};
    bb_engine_config ecfg = config(0);
    bb_engine *again = node(&s.net, 1, s.m, "Server", scfg, 1, &ecfg);
    if (bb_engine_restore(again, snap, len, &err))
        fail_msg("restore: %s", err.msg);
    free(snap);
    s.e = again; /* srv_poll logs its steps where the first server's went */
    for (uint8_t c = 2; c < 2 + N_CLIENTS; c++)
        connect_client(s.e, c);
    size_t refused = s.refused;
    send_range(&s, 2, 12, env, total, 5 * CHUNK, total);
    free(env);
    assert_true(s.refused > refused);
    stream_whole(&s, 3, 1);
    stream_whole(&s, 4, 1);
    s.now += 21 * SEC;
    srv_poll(&s);
    size_t elems = (5 * CHUNK - raw_at(&s, 2)) / sizeof(float);
    expect_round(&s, (const uint8_t[]){2, 3, 4}, 3, 2, elems);
    srv_free(&s);
}

/* A batch whose aggregator needs whole contributions (TrimmedMean) takes
 * the whole-envelope path: streams assembled, nothing folded in pieces. */
static void test_chunk_fold_fallback_when_not_folding(void **state)
{
    (void)state;
    srv s;
    srv_start(&s, "agg::TrimmedMean", N_CLIENTS, 0);
    for (uint8_t c = 2; c < 2 + N_CLIENTS; c++)
        stream_whole(&s, c, 3);
    assert_int_equal(counter(s.e, "streams.in"), 3);
    assert_int_equal(counter(s.e, "streams.folded"), 0);
    const fx_rec *ev = fx_log_app(&s.net.log[0], "round", 0);
    assert_non_null(ev);
    for (size_t j = 0; j < NUMEL; j++) {
        float want = (client_value(2, j) + client_value(3, j) + client_value(4, j)) / 3;
        if (!(fabsf(bb_tensor_f32(ev->value)[j] - want) <= 1e-5f * (1 + fabsf(want))))
            fail_msg("[%zu] = %g, want %g", j, (double)bb_tensor_f32(ev->value)[j], (double)want);
    }
    srv_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunk_fold_round_matches_whole_path),
        cmocka_unit_test(test_chunk_fold_resume_folds_each_byte_once),
        cmocka_unit_test(test_chunk_fold_hostile_chunks),
        cmocka_unit_test(test_chunk_fold_cut_stream),
        cmocka_unit_test(test_chunk_fold_restart_mid_stream),
        cmocka_unit_test(test_chunk_fold_fallback_when_not_folding),
    };
    return cmocka_run_group_tests(tests, NULL, pfx_group_teardown);
}
