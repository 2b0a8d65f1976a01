/*
 * test_engine_fuzz.c — hostile envelopes. A deterministic, bounded fuzz
 * loop feeds an engine WireEnvelope bytes that are mutated from a corpus of
 * valid envelopes (requests, responses to an open batch, data fills of every
 * carrier type, backend tensor fills, control-plane fills, claimed and
 * observed addresses) or generated with random structure, from a crowd of
 * source peers, and polls between batches. It asserts the engine never
 * crashes (the test itself running to the end; ASan / valgrind catch memory
 * errors), keeps every table within its cap, gives back every byte of the
 * ingress budget, frees every execution it started, and that heap use stops
 * growing once the tables are full. Same seed, same run; BB_FUZZ_SEED and
 * BB_FUZZ_ITERATIONS explore further by hand.
 */
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/test_rng.h"

#include "bb/multiaddr.h"
#include "bb_envelope.pb-c.h"
#include "support/engine_fixtures.h"

#define ITERATIONS 4000
#define POLL_EVERY 16
#define SRC_PEERS 200
#define MAX_PEERS 64

/* ---- the node under attack ----------------------------------------------------------- */

/* Sites: Recv 301 U64, 302 Bytes, 303 f32 via the backend, 304 Composite,
 * 305 PeerIdVec, 306 AddressVec, 307 trigger-only; RecvReq 310 (answers with
 * SendResp); and a Client whose batched request stays open for responses. */
static const uint64_t SITES[] = {301, 302, 303, 304, 305, 306, 307, 310};
#define N_SITES (sizeof SITES / sizeof SITES[0])

static bb_model *target_model(void)
{
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Sink", "", "a_once,b,c,d,e,g");
    const char *outs[6] = {"a", "b", "c", "d", "e", "g"};
    const bb_type_node *types[6] = {&BB_TYPE_U64, &BB_TYPE_BYTES, &BB_TYPE_TENSOR_F32,
                                    &BB_TYPE_COMPOSITE, &BB_TYPE_PEER_ID_VEC, &BB_TYPE_ADDRESS_VEC};
    const char *trig[6] = {"t0", "t1", "t2", "t3", "t4", "t5"};
    for (int i = 0; i < 6; i++) {
        bb_node *r = fx_recv(m, f, 301 + (uint64_t)i, trig[i], outs[i], types[i]);
        if (i == 2)
            fx_meta(m, r, "ai.bytesandbrains.recv_slot_id", "1");
    }
    bb_node *r = fx_recv(m, f, 307, "tick", NULL, NULL);
    fx_op(m, f, FX_SYS, "DedupGateRx", "a", "a_once");
    bb_node *n = fx_op(m, f, FX_SYS, "AppNotify", "tick", "");
    fx_str(m, n, "name", "tick");
    fx_bind(m, "Sink", "compute", "Backend|test::Backend|1");
    fx_bind(m, "Sink", "echo", "Protocol|test::Echo|2");
    bb_function *s = fx_fn(m, "Server", "", "");
    r = fx_op(m, s, FX_WIRE, "RecvReq", "", "rt,p,rid");
    fx_meta(m, r, "ai.bytesandbrains.wire_site", "310");
    fx_type(m, s, "p", &BB_TYPE_U64);
    fx_op(m, s, FX_WIRE, "SendResp", "p,rid", "");
    bb_function *c = fx_fn(m, "Client", "x,peers", "batch");
    bb_node *q = fx_op(m, c, FX_WIRE, "SendReqBatched", "x,peers", "rid");
    fx_meta(m, q, "ai.bytesandbrains.wire_dest_site", "310");
    fx_op(m, c, FX_WIRE, "RecvRespBatched", "rid", "t,batch");
    return m;
}

/* ---- the corpus ---------------------------------------------------------------------------- */

typedef struct blob {
    uint8_t *p;
    size_t n;
} blob;

static blob g_corpus[64];
static size_t g_n_corpus;

static void corpus_add(uint8_t *p, size_t n)
{
    assert_true(g_n_corpus < 64);
    g_corpus[g_n_corpus++] = (blob){p, n};
}

static size_t value_bytes(bb_value *v, uint8_t *out, size_t cap)
{
    uint8_t *enc;
    size_t len;
    assert_int_equal(bb_value_encode(v, &enc, &len, NULL), BB_OK);
    bb_value_unref(v);
    assert_true(len <= cap);
    memcpy(out, enc, len);
    free(enc);
    return len;
}

/* One envelope: fills (suffix, payload) + correlation + addresses + deadline. */
static void pack_into_corpus(const uint8_t (*sfx)[64], const size_t *sl, const uint8_t (*pl)[256],
                             const size_t *pn, size_t nf, int corr, uint64_t wire_id,
                             uint64_t deadline, bool trig, int n_src)
{
    fx_fill fills[8];
    for (size_t i = 0; i < nf; i++)
        fills[i] = (fx_fill){.suffix = sfx[i], .suffix_len = sl[i], .payload = pl[i], .len = pn[i],
                             .trigger_only = trig};
    uint8_t addrs[4][32];
    bb_engine_addr src[4];
    for (int i = 0; i < n_src; i++)
        src[i] = (bb_engine_addr){addrs[i], fx_addr((uint16_t)(8000 + below(1000)), addrs[i])};
    fx_env env = {.fills = fills, .n_fills = nf, .corr = corr, .wire_req_id = wire_id,
                  .deadline_ns = deadline, .sent_at_ns = rnd() >> 20, .src = src,
                  .n_src = (size_t)n_src};
    size_t len;
    uint8_t *out = fx_envelope(&env, &len);
    assert_non_null(out);
    corpus_add(out, len);
}

static void build_corpus(uint64_t wire_req_id)
{
    uint8_t sfx[8][64], pl[8][256];
    size_t sl[8], pn[8];
    /* one valid fill per data site */
    float fv[4] = {1, 2, 3, 4};
    bb_peerid p1 = fx_peer(1), p2 = fx_peer(2);
    uint8_t a1[32];
    size_t al = fx_addr(9001, a1);
    bb_value *kids[2] = {bb_value_u64(&BB_TYPE_U64, 5), bb_value_trigger()};
    bb_value *pids[2] = {bb_value_bytes(&BB_TYPE_PEER_ID, p1.bytes, p1.len),
                         bb_value_bytes(&BB_TYPE_PEER_ID, p2.bytes, p2.len)};
    bb_value *ads[1] = {bb_value_bytes(&BB_TYPE_MULTIADDRESS, a1, al)};
    bb_value *vals[7] = {
        bb_value_u64(&BB_TYPE_U64, 42),
        bb_value_bytes(&BB_TYPE_BYTES, "hostile", 7),
        fx_f32(fv, 4),
        bb_value_list(&BB_TYPE_COMPOSITE, kids, 2),
        bb_value_list(&BB_TYPE_PEER_ID_VEC, pids, 2),
        bb_value_list(&BB_TYPE_ADDRESS_VEC, ads, 1),
        bb_value_u64(&BB_TYPE_U64, 1),
    };
    for (size_t i = 0; i < 7; i++) {
        bb_suffix_site(SITES[i], sfx[i], 64, &sl[i], NULL);
        pn[i] = value_bytes(vals[i], pl[i], 256);
        pack_into_corpus(&sfx[i], &sl[i], &pl[i], &pn[i], 1, 0, 0, 0, i == 6, (int)(i % 3));
    }
    /* all of them in one envelope, with a deadline */
    pack_into_corpus(sfx, sl, pl, pn, 7, 0, 0, 1u << 30, false, 2);
    /* a request to the RecvReq site */
    bb_suffix_site(310, sfx[0], 64, &sl[0], NULL);
    pn[0] = value_bytes(bb_value_u64(&BB_TYPE_U64, 7), pl[0], 256);
    pack_into_corpus(sfx, sl, pl, pn, 1, 1, 99, 0, false, 1);
    /* a response to the Client's open batch (a one-child Composite) */
    bb_value *one[1] = {bb_value_u64(&BB_TYPE_U64, 8)};
    pn[0] = value_bytes(bb_value_list(&BB_TYPE_COMPOSITE, one, 1), pl[0], 256);
    pack_into_corpus(sfx, sl, pl, pn, 1, 2, wire_req_id, 0, false, 0);
    /* control-plane fills to every component (addressed by slot id), known
     * and unknown ops, one-way and as requests */
    const char *ops[4] = {"Control", "Echo", "Nope", "Later"};
    const uint64_t refs[4] = {2, 2, 1, 2};
    for (int k = 0; k < 4; k++) {
        bb_suffix_component_op(refs[k], ops[k], sfx[0], 64, &sl[0], NULL);
        memcpy(pl[0], "ctl", 3);
        pn[0] = 3;
        pack_into_corpus(sfx, sl, pl, pn, 1, 1, 500 + (uint64_t)k, 0, false, 0);
        memcpy(pl[0], "ctl", 3);
        pn[0] = 3;
        pack_into_corpus(sfx, sl, pl, pn, 1, 0, 0, 0, false, 0);
    }
}

/* ---- mutations -------------------------------------------------------------------------------- */

static const uint8_t INTERESTING[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0x08, 0x0a, 0x12, 0x1a, 0x42};

/* A new malloc'd buffer mutated from b (out_len <= b.n + 64). */
static uint8_t *mutate(const blob *b, size_t *out_len)
{
    size_t n = b->n;
    uint8_t *p = malloc(n + 64);
    memcpy(p, b->p, n);
    int rounds = 1 + (int)below(2) + (below(4) == 0 ? 2 : 0);
    for (int r = 0; r < rounds; r++) {
        switch (below(8)) {
        case 0: /* bit flip */
            if (n)
                p[below(n)] ^= (uint8_t)(1u << below(8));
            break;
        case 1: /* interesting byte */
            if (n)
                p[below(n)] = INTERESTING[below(sizeof INTERESTING)];
            break;
        case 2: /* truncate */
            n = below(n + 1);
            break;
        case 3: /* insert random bytes */
            if (n + 8 <= b->n + 64) {
                size_t at = below(n + 1), k = 1 + below(8);
                memmove(p + at + k, p + at, n - at);
                for (size_t i = 0; i < k; i++)
                    p[at + i] = (uint8_t)rnd();
                n += k;
            }
            break;
        case 4: /* a huge varint where a length was */
            if (n > 2) {
                size_t at = below(n - 1);
                p[at] |= 0x80;
                p[at + 1] = 0xff;
            }
            break;
        case 5: /* splice the tail of another corpus item */
            if (g_n_corpus) {
                const blob *o = &g_corpus[below(g_n_corpus)];
                size_t at = below(n + 1), from = below(o->n + 1);
                size_t k = o->n - from;
                if (at + k > b->n + 64)
                    k = b->n + 64 - at;
                memcpy(p + at, o->p + from, k);
                n = at + k;
            }
            break;
        case 6: /* duplicate a chunk in place */
            if (n > 4) {
                size_t from = below(n / 2), k = 1 + below(n / 2);
                if (n + k <= b->n + 64) {
                    memmove(p + n, p + from, k);
                    n += k;
                }
            }
            break;
        default: /* random bytes */
            for (size_t i = 0; i < n; i++)
                if (below(16) == 0)
                    p[i] = (uint8_t)rnd();
            break;
        }
    }
    *out_len = n;
    return p;
}

/* Random structure: tags of the known fields with random contents. */
static uint8_t *generate(size_t *out_len)
{
    uint8_t *p = malloc(512);
    size_t n = 0;
    int fields = (int)below(8);
    for (int f = 0; f < fields && n < 400; f++) {
        uint8_t tags[] = {0x0a, 0x12, 0x1a, 0x20, 0x28, 0x30, 0x38, 0x42, 0x4a};
        p[n++] = tags[below(sizeof tags)];
        size_t k = below(40);
        if ((p[n - 1] & 7) == 0) { /* varint */
            p[n++] = (uint8_t)(rnd() | (below(2) ? 0x80 : 0));
            p[n++] = (uint8_t)(rnd() & 0x7f);
        } else {
            p[n++] = (uint8_t)k;
            for (size_t i = 0; i < k; i++)
                p[n++] = (uint8_t)rnd();
        }
    }
    *out_len = n;
    return p;
}

/* ---- the run ------------------------------------------------------------------------------------ */

static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

static void poll_all(bb_engine *e, uint64_t now)
{
    bb_steps s;
    bb_steps_init(&s);
    for (int r = 0; r < 4; r++) {
        bb_engine_poll(e, now, &s);
        if (bb_engine_next_deadline(e) > now)
            break;
    }
    bb_steps_free(&s);
}

static void test_hostile_envelopes(void **state)
{
    (void)state;
    fx_reset();
    const char *seed = getenv("BB_FUZZ_SEED"), *iters = getenv("BB_FUZZ_ITERATIONS");
    g_rng = seed ? strtoull(seed, NULL, 0) | 1 : 0x2545f4914f6cdd1dULL;
    int iterations = iters ? atoi(iters) : ITERATIONS;
    if (iterations < 64)
        iterations = 64;
    g_n_corpus = 0;
    bb_model *m = target_model();
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    cfg.caps.address_book_max_peers = MAX_PEERS;
    cfg.caps.address_book_max_addrs = 4;
    cfg.caps.inbound_requests_max = 32;
    cfg.caps.dedup_window = 128;
    cfg.caps.ingress_byte_budget = 1 << 20;
    bb_engine *e = fx_engine(1, 7001, &cfg);
    bb_error err = {0};
    if (fx_install(e, m, "Sink,Server,Client", &err))
        fail_msg("%s", err.msg);
    /* open a batched request to peer 2 and learn its wire id */
    bb_peerid p2 = fx_peer(2);
    uint8_t a2[32];
    bb_engine_addr ad2 = {a2, fx_addr(7002, a2)};
    assert_int_equal(bb_engine_add_peer(e, &p2, &ad2, 1, NULL), BB_OK);
    bb_value *items[1] = {bb_value_bytes(&BB_TYPE_PEER_ID, p2.bytes, p2.len)};
    bb_value *peers = bb_value_list(&BB_TYPE_PEER_ID_VEC, items, 1);
    bb_value *x = bb_value_u64(&BB_TYPE_U64, 1);
    bb_engine_input in[2] = {{.name = "x", .value = x}, {.name = "peers", .value = peers}};
    assert_int_equal(bb_engine_invoke(e, "Client", in, 2, NULL, NULL), BB_OK);
    bb_value_unref(x);
    bb_value_unref(peers);
    bb_steps s;
    bb_steps_init(&s);
    bb_engine_poll(e, 1, &s);
    assert_int_equal(s.n, 1);
    Bb__Core__WireEnvelope *req = bb__core__wire_envelope__unpack(NULL, s.v[0].u.send.len,
                                                                  s.v[0].u.send.bytes);
    assert_non_null(req);
    assert_non_null(req->correlation);
    build_corpus(req->correlation->wire_req_id);
    bb__core__wire_envelope__free_unpacked(req, NULL);
    bb_steps_free(&s);
    /* attack */
    size_t baseline = 0;
    uint64_t now = 10;
    size_t refused = 0;
    for (int it = 0; it < iterations; it++) {
        size_t len;
        uint8_t *bytes = below(4) ? mutate(&g_corpus[below(g_n_corpus)], &len) : generate(&len);
        bb_peerid src = below(4) == 0 ? p2 : fx_peer((uint8_t)(3 + below(SRC_PEERS)));
        uint8_t obs[40];
        bb_engine_addr observed = {obs, 0};
        if (below(3) == 0) { /* a transport-observed address: valid or junk */
            observed.len = below(2) ? fx_addr((uint16_t)below(65536), obs) : 1 + below(sizeof obs);
            if (observed.len > 20 && below(2))
                for (size_t i = 0; i < observed.len; i++)
                    obs[i] = (uint8_t)rnd();
        }
        int rc = bb_engine_deliver_envelope(e, &src, observed.len ? &observed : NULL, bytes, len,
                                            NULL);
        assert_true(rc == BB_OK || rc == BB_EFULL || rc == BB_EBUDGET);
        refused += rc != BB_OK;
        free(bytes);
        if (it % POLL_EVERY == POLL_EVERY - 1) {
            now += 1000 + below(1000000);
            poll_all(e, now);
        }
        if (it == iterations / 4)
            baseline = heap_in_use();
        /* every table stays within its cap */
        assert_true(bb_engine_peer_count(e) <= MAX_PEERS);
    }
    poll_all(e, now + 1);
    print_message("fuzz: %d envelopes (%zu refused at the door): %llu decoded, %llu fills routed, "
                  "%llu receive errors, %llu unroutable, %llu app events, %llu ops failed, %zu peers\n",
                  iterations, refused, (unsigned long long)bb_engine_counter(e, "envelopes.in"),
                  (unsigned long long)bb_engine_counter(e, "fills.in"),
                  (unsigned long long)bb_engine_counter(e, "wire.receive_errors"),
                  (unsigned long long)bb_engine_counter(e, "wire.unroutable"),
                  (unsigned long long)bb_engine_counter(e, "app.events"),
                  (unsigned long long)bb_engine_counter(e, "ops.failed"), bb_engine_peer_count(e));
    /* the storm is over: whatever it started has finished and given back its bytes */
    assert_true(bb_engine_counter(e, "envelopes.in") + refused >= (size_t)iterations / 2);
    assert_true(bb_engine_counter(e, "wire.receive_errors") > 0);
    assert_true(bb_engine_counter(e, "fills.in") > 0);
    assert_int_equal(bb_engine_counter(e, "ingress.bytes_in_flight"), 0);
    assert_true(bb_engine_live_executions(e) <= 1); /* at most the Client's open batch */
    assert_true(bb_engine_live_slots(e) <= 8);
    assert_int_equal(bb_engine_pending_async_count(e), bb_engine_live_executions(e));
    for (int k = 0; k < SRC_PEERS; k++) {
        bb_peerid q = fx_peer((uint8_t)(3 + k));
        assert_true(bb_engine_peer_addrs(e, &q, NULL) <= 4);
    }
    /* heap use levels off once the capped tables are full */
    size_t end = heap_in_use();
    if (end > baseline)
        assert_true(end - baseline < (8u << 20));
    /* and the engine still works: a clean envelope is delivered */
    size_t clen;
    uint8_t *clean = fx_envelope_u64(301, 4242, 1ULL << 62, 0, &clen); /* unique sent_at */
    assert_int_equal(bb_engine_deliver_envelope(e, &p2, NULL, clean, clen, NULL), BB_OK);
    free(clean);
    bb_steps_init(&s);
    bb_engine_poll(e, now + 2, &s);
    bool got = false;
    for (size_t i = 0; i < s.n; i++)
        got |= s.v[i].kind == BB_STEP_APP_EVENT && strcmp(s.v[i].u.app.topic, "a_once") == 0 &&
               s.v[i].u.app.value->u.u64 == 4242;
    assert_true(got);
    bb_steps_free(&s);
    for (size_t i = 0; i < g_n_corpus; i++)
        free(g_corpus[i].p);
    bb_engine_free(e);
    bb_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hostile_envelopes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
