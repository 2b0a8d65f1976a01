/*
 * test_kademlia.c — dht::Kademlia (and peers::Dht over it) on 16
 * in-process engines in virtual time: every node joins from one seed;
 * Lookup of random keys returns the true k closest nodes (checked against
 * the whole membership) and reports its hops; Put on one node, Get on
 * another; NearKey through peers::Dht (whose answer reaches it through the
 * control plane, LATER); lookups still right after 4 nodes stop;
 * ping-before-evict; hostile RPCs refused; the table and the records
 * through snapshot and restore. The real-process acceptance run is
 * tests/integration/kademlia_dht.sh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "bb/peerid.h"
#include "support/engine_fixtures.h"
#include "support/plugin_fixtures.h"

#define MS 1000000ull
#define KAD "bb-dht.Kademlia.atomic"
#define K 4

/* Targets Look(key) -> Lookup -> (closest, hops); Store(key, value) -> Put
 * -> stored; Fetch(key) -> Get -> got; Near(key) -> Select(near_key, n=2)
 * on the peers::Dht at slot "selector" -> near; Table(go) -> Contacts ->
 * table. The DHT at slot "dht". */
static bb_model *dht_model(void)
{
    bb_model *m = fx_model();
    struct {
        const char *fn, *in, *op, *out, *slot;
    } t[] = {{"Look", "key", "Lookup", "closest,hops", "dht"},
             {"Store", "key,value", "Put", "stored", "dht"},
             {"Fetch", "key", "Get", "got", "dht"},
             {"Near", "key", "Select", "near", "selector"},
             {"Table", "go", "Contacts", "table", "dht"}};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        bb_function *f = fx_fn(m, t[i].fn, t[i].in, t[i].out);
        bool sel = !strcmp(t[i].slot, "selector");
        bb_node *n = fx_op(m, f, sel ? "bb-peers.PeerSelector.atomic" : KAD, t[i].op, t[i].in,
                           t[i].out);
        fx_meta(m, n, "ai.bytesandbrains.slot", t[i].slot);
        if (sel) {
            fx_str(m, n, "params", "near_key");
            fx_int(m, n, "n", 2);
        }
        fx_type(m, f, "key", &BB_TYPE_BYTES);
        fx_bind(m, t[i].fn, "dht", "Protocol|dht::Kademlia|0");
        if (sel)
            fx_bind(m, t[i].fn, "selector", "PeerSelector|peers::Dht|1");
    }
    return m;
}

static char g_cfg[1024];

static const char *config(uint8_t seed, int k, const char *extra)
{
    bb_peerid id = fx_peer(seed);
    char text[BB_PEERID_TEXT_MAX];
    assert_int_equal(bb_peerid_to_text(&id, text, sizeof text, NULL), BB_OK);
    snprintf(g_cfg, sizeof g_cfg,
             "{\"k\": %d, \"alpha\": 2, \"rpc_timeout_ms\": 200, \"refresh_ms\": 5000, "
             "\"seeds\": [\"/ip4/127.0.0.1/tcp/%u/p2p/%s\"]%s}",
             k, 7000u + seed, text, extra);
    return g_cfg;
}

static bb_engine *start(fx_net *net, uint8_t seed, bb_model *m, const char *cfg)
{
    pfx_slot_config sc[2] = {{"dht", cfg}, {"selector", NULL}};
    bb_error err = {0};
    bb_engine *e = fx_engine(seed, (uint16_t)(7000 + seed), NULL);
    bb_engine_registry reg = pfx_registry(sc, 2);
    const char *targets[5] = {"Look", "Store", "Fetch", "Near", "Table"};
    if (bb_engine_install(e, m, targets, 5, &reg, &err))
        fail_msg("node %u: %s", seed, err.msg);
    fx_net_add(net, e);
    bb_bootstrap_target fresh = {.kind = BB_BOOTSTRAP_FRESH}; /* as bbd does */
    assert_int_equal(bb_engine_run_bootstrap(e, &fresh, &err), BB_OK);
    return e;
}

static int index_of_seed(fx_net *net, uint8_t seed)
{
    bb_peerid p = fx_peer(seed);
    for (int i = 0; i < net->n; i++)
        if (bb_peerid_equal(bb_engine_peer_id(net->e[i]), &p))
            return i;
    return -1;
}

/* Invoke target on node i with inputs and run the network until topic
 * arrives (its value, a new reference) or an op fails (NULL, why). */
static bb_value *call(fx_net *net, int i, const char *target, const bb_engine_input *in,
                      size_t n_in, const char *topic, char *why)
{
    fx_log_free(&net->log[i]);
    memset(&net->log[i], 0, sizeof net->log[i]);
    bb_error err = {0};
    if (bb_engine_invoke(net->e[i], target, in, n_in, NULL, &err))
        fail_msg("invoke %s: %s", target, err.msg);
    for (int t = 0; t < 300; t++) {
        const fx_rec *r = fx_log_app(&net->log[i], topic, 0);
        if (r)
            return bb_value_ref(r->value);
        if (fx_log_count(&net->log[i], BB_STEP_OP_FAILED)) {
            snprintf(why, 512, "%s", fx_log_nth(&net->log[i], BB_STEP_OP_FAILED, 0)->c);
            return NULL;
        }
        pfx_net_advance(net, 10 * MS);
    }
    snprintf(why, 512, "%s: no %s in time", target, topic);
    return NULL;
}

/* An input value given up (bb_engine_input holds it const). */
static void drop(const bb_value *v) { bb_value_unref((bb_value *)v); }

static bb_value *key_value(const char *text)
{
    return bb_value_bytes(&BB_TYPE_BYTES, (const uint8_t *)text, strlen(text));
}

/* The seeds of the k live nodes closest to SHA-256(key), closest first. */
static int true_closest(fx_net *net, const char *key, int k, int *out)
{
    uint8_t t[32];
    crypto_hash_sha256(t, (const uint8_t *)key, strlen(key));
    int n = 0;
    uint8_t d[16][32];
    int seed[16];
    for (int i = 0; i < net->n; i++) {
        const bb_peerid *p = bb_engine_peer_id(net->e[i]);
        uint8_t h[32];
        crypto_hash_sha256(h, p->bytes, p->len);
        for (int b = 0; b < 32; b++)
            d[n][b] = h[b] ^ t[b];
        bb_value *v = bb_value_bytes(&BB_TYPE_PEER_ID, p->bytes, p->len);
        seed[n++] = pfx_seed_of(v);
        bb_value_unref(v);
    }
    for (int a = 1; a < n; a++) /* insertion sort by distance */
        for (int b = a; b > 0 && memcmp(d[b], d[b - 1], 32) < 0; b--) {
            uint8_t tmp[32];
            memcpy(tmp, d[b], 32);
            memcpy(d[b], d[b - 1], 32);
            memcpy(d[b - 1], tmp, 32);
            int s = seed[b];
            seed[b] = seed[b - 1];
            seed[b - 1] = s;
        }
    int m = 0;
    for (int i = 0; i < n && m < k; i++)
        out[m++] = seed[i];
    return m;
}

/* Lookups of `tries` keys from rotating nodes: how many gave exactly the k
 * closest nodes other than the asker; *hops gets their sum. */
static int exact_lookups(fx_net *net, int tries, const char *tag, uint64_t *hops)
{
    int exact = 0;
    *hops = 0;
    for (int q = 0; q < tries; q++) {
        char key[64], why[512] = "";
        snprintf(key, sizeof key, "%s-key-%d", tag, q);
        int i = q % net->n;
        bb_engine_input in = {.name = "key", .value = key_value(key)};
        bb_value *got = call(net, i, "Look", &in, 1, "closest", why);
        const fx_rec *h = fx_log_app(&net->log[i], "hops", 0);
        drop(in.value);
        if (!got)
            fail_msg("lookup %s: %s", key, why);
        int want[17];
        int n = true_closest(net, key, K + 1, want);
        bb_value *self = bb_value_bytes(&BB_TYPE_PEER_ID, bb_engine_peer_id(net->e[i])->bytes,
                                        bb_engine_peer_id(net->e[i])->len);
        int asker = pfx_seed_of(self), w = 0, ok = 1;
        bb_value_unref(self);
        for (int j = 0; j < n && w < K; j++) { /* the asker is not among its own results */
            if (want[j] == asker)
                continue;
            ok &= (size_t)w < got->u.list.n && pfx_seed_of(got->u.list.items[w]) == want[j];
            w++;
        }
        exact += ok && got->u.list.n == (size_t)w;
        *hops += h ? h->value->u.u64 : 0;
        bb_value_unref(got);
    }
    return exact;
}

static void test_kademlia_lookups_store_and_near_key(void **state)
{
    (void)state;
    bb_model *m = dht_model();
    fx_net net = {.now = 1};
    for (uint8_t s = 1; s <= 16; s++)
        start(&net, s, m, config(1, K, ""));
    pfx_net_advance(&net, 2000 * MS);
    for (int i = 0; i < net.n; i++) /* every bootstrap (its self lookup) ended */
        assert_int_equal(bb_engine_bootstrap_status(net.e[i]), BB_BOOTSTRAP_IDLE);
    uint64_t hops;
    int exact = exact_lookups(&net, 32, "a", &hops);
    print_message("kademlia, 16 nodes, k=%d: %d/32 lookups exact, mean hops %.2f\n", K, exact,
                  hops / 32.0);
    assert_int_equal(exact, 32);

    /* Put on one node, Get on another; a key nobody stored */
    char why[512] = "";
    bb_engine_input put[2] = {{.name = "key", .value = key_value("model-digest")},
                              {.name = "value", .value = key_value("0x5eed")}};
    bb_value *stored = call(&net, 2, "Store", put, 2, "stored", why);
    assert_non_null(stored);
    assert_true(stored->u.u64 >= K); /* the k closest took it (and maybe this node) */
    bb_value_unref(stored);
    bb_engine_input get = {.name = "key", .value = key_value("model-digest")};
    bb_value *got = call(&net, 11, "Fetch", &get, 1, "got", why);
    assert_non_null(got);
    assert_int_equal(got->u.bytes.len, 6);
    assert_memory_equal(got->u.bytes.data, "0x5eed", 6);
    bb_value_unref(got);
    bb_engine_input none = {.name = "key", .value = key_value("nobody stored this")};
    assert_null(call(&net, 7, "Fetch", &none, 1, "got", why));
    assert_non_null(strstr(why, "no node has the key"));

    /* NearKey through peers::Dht: the first n of the lookup */
    bb_engine_input near = {.name = "key", .value = key_value("a-key-3")};
    bb_value *n2 = call(&net, 5, "Near", &near, 1, "near", why);
    if (!n2)
        fail_msg("near: %s", why);
    int want[17];
    true_closest(&net, "a-key-3", 3, want);
    int w = 0;
    for (int j = 0; j < 3 && w < 2; j++) {
        if (want[j] == 6) /* node index 5 is seed 6: never its own result */
            continue;
        assert_int_equal(pfx_seed_of(n2->u.list.items[w]), want[j]);
        w++;
    }
    assert_int_equal(n2->u.list.n, 2);
    bb_value_unref(n2);
    for (int k = 0; k < 2; k++)
        drop(put[k].value);
    drop(get.value);
    drop(none.value);
    drop(near.value);

    /* 4 nodes stop: lookups still find the k closest of those alive */
    for (uint8_t s = 13; s <= 16; s++) {
        int i = index_of_seed(&net, s);
        bb_engine_free(net.e[i]);
        fx_log_free(&net.log[i]);
        net.e[i] = net.e[net.n - 1];
        net.log[i] = net.log[net.n - 1];
        net.n--;
    }
    exact = exact_lookups(&net, 24, "b", &hops);
    print_message("kademlia, 4 of 16 stopped: %d/24 lookups exact, mean hops %.2f\n", exact,
                  hops / 24.0);
    assert_int_equal(exact, 24);
    fx_net_free(&net);
    bb_model_free(m);
}

/* Node i's routing table, as seeds, sorted. */
static int table_of(fx_net *net, int i, int *seeds)
{
    char why[512] = "";
    bb_engine_input go = {.name = "go", .value = bb_value_trigger()};
    bb_value *t = call(net, i, "Table", &go, 1, "table", why);
    drop(go.value);
    if (!t)
        fail_msg("table: %s", why);
    int n = (int)t->u.list.n;
    for (int k = 0; k < n; k++)
        seeds[k] = pfx_seed_of(t->u.list.items[k]);
    bb_value_unref(t);
    return n;
}

/* k = 1: a newcomer for a full bucket waits while the occupant is pinged;
 * it gets the slot only when the occupant fails to answer. */
static void test_kademlia_ping_before_evict(void **state)
{
    (void)state;
    /* b and c: two peers in the same bucket of node 1 (their keys share the
     * same number of leading bits with node 1's, fewer than 7) */
    uint8_t h1[32], h[32];
    bb_peerid p1 = fx_peer(1);
    crypto_hash_sha256(h1, p1.bytes, p1.len);
    int cpl_of[65] = {0};
    for (int s = 2; s <= 64; s++) {
        bb_peerid p = fx_peer((uint8_t)s);
        crypto_hash_sha256(h, p.bytes, p.len);
        cpl_of[s] = __builtin_clz((unsigned)(h1[0] ^ h[0]) | 1u) - 24;
    }
    int b = 0, c = 0;
    for (int s = 2; s <= 64 && !c; s++)
        for (int t = s + 1; t <= 64 && !c; t++)
            if (cpl_of[s] == cpl_of[t] && cpl_of[s] < 7)
                b = s, c = t;
    assert_true(b && c);
    bb_model *m = dht_model();
    fx_net net = {.now = 1};
    char cfg1[1024];
    snprintf(cfg1, sizeof cfg1, "%s", config((uint8_t)b, 1, ""));
    start(&net, 1, m, cfg1);                      /* node 1: k = 1, joins through b */
    start(&net, (uint8_t)b, m, config(1, 1, "")); /* b joins through 1 */
    pfx_net_advance(&net, 500 * MS);
    int t[8];
    assert_int_equal(table_of(&net, 0, t), 1);
    assert_int_equal(t[0], b);
    /* c joins through 1: its bucket is full, 1 pings b, b answers: b stays */
    start(&net, (uint8_t)c, m, config(1, 1, ""));
    pfx_net_advance(&net, 500 * MS);
    assert_int_equal(table_of(&net, 0, t), 1);
    assert_int_equal(t[0], b);
    /* b stops; c talks to 1 again: the ping goes unanswered, c takes the slot */
    int bi = index_of_seed(&net, (uint8_t)b);
    bb_engine_free(net.e[bi]);
    fx_log_free(&net.log[bi]);
    net.e[bi] = net.e[net.n - 1];
    net.log[bi] = net.log[net.n - 1];
    net.n--;
    char why[512] = "";
    bb_engine_input look = {.name = "key", .value = key_value("y")};
    bb_value *r = call(&net, index_of_seed(&net, (uint8_t)c), "Look", &look, 1, "closest", why);
    drop(look.value);
    bb_value_unref(r);
    pfx_net_advance(&net, 1000 * MS);
    assert_int_equal(table_of(&net, 0, t), 1);
    assert_int_equal(t[0], c);
    fx_net_free(&net);
    bb_model_free(m);
}

static void test_kademlia_refuses_hostile_rpcs(void **state)
{
    (void)state;
    bb_model *m = dht_model();
    fx_net net = {.now = 1};
    start(&net, 1, m, config(1, K, ", \"max_records\": 1, \"max_value_bytes\": 8"));
    pfx_net_advance(&net, 50 * MS);
    uint8_t key[32] = {1}, store[64];
    memcpy(store, key, 32);
    store[32] = 10;   /* ttl */
    store[33] = 9;    /* 9 bytes: over max_value_bytes */
    memset(store + 34, 'v', 9);
    struct {
        const char *op;
        const uint8_t *p;
        size_t n;
        const char *want;
    } bad[] = {{"FindNode", key, 5, "a 32-byte key"},
               {"Store", store, 43, "max_value_bytes"},
               {"Store", store, 40, "malformed Store"}};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        pfx_deliver_control(net.e[0], 40, 0, bad[k].op, bad[k].p, bad[k].n, 90 + k);
        fx_net_poll(&net, 0);
        const fx_rec *f = fx_log_nth(&net.log[0], BB_STEP_OP_FAILED, k);
        assert_non_null(f);
        if (!strstr(f->c, bad[k].want))
            fail_msg("%s: \"%s\" lacks \"%s\"", bad[k].op, f->c, bad[k].want);
    }
    /* the store is bounded: a second key does not fit */
    store[33] = 2;
    pfx_deliver_control(net.e[0], 40, 0, "Store", store, 36, 95);
    store[0] = 2;
    pfx_deliver_control(net.e[0], 40, 0, "Store", store, 36, 96);
    fx_net_poll(&net, 0);
    const fx_rec *f = fx_log_nth(&net.log[0], BB_STEP_OP_FAILED, 3);
    assert_non_null(f);
    assert_non_null(strstr(f->c, "max_records"));
    fx_net_free(&net);
    bb_model_free(m);
}

/* The routing table and the records survive snapshot and restore. */
static void test_kademlia_state_survives_restore(void **state)
{
    (void)state;
    bb_model *m = dht_model();
    fx_net net = {.now = 1};
    for (uint8_t s = 1; s <= 5; s++)
        start(&net, s, m, config(1, K, ""));
    pfx_net_advance(&net, 1000 * MS);
    char why[512] = "";
    bb_engine_input put[2] = {{.name = "key", .value = key_value("k")},
                              {.name = "value", .value = key_value("v1")}};
    bb_value *n = call(&net, 3, "Store", put, 2, "stored", why);
    assert_non_null(n);
    bb_value_unref(n);
    int before[32], after[32];
    int nb = table_of(&net, 3, before);
    assert_true(nb >= 3);
    uint8_t *snap = NULL;
    size_t len = 0;
    bb_error err = {0};
    assert_int_equal(bb_engine_snapshot(net.e[3], &snap, &len, &err), BB_OK);
    bb_engine *fresh = fx_engine(4, 7004, NULL);
    pfx_slot_config sc[2] = {{"dht", config(1, K, "")}, {"selector", NULL}};
    bb_engine_registry reg = pfx_registry(sc, 2);
    const char *targets[5] = {"Look", "Store", "Fetch", "Near", "Table"};
    assert_int_equal(bb_engine_install(fresh, m, targets, 5, &reg, &err), BB_OK);
    if (bb_engine_restore(fresh, snap, len, &err))
        fail_msg("restore: %s", err.msg);
    free(snap);
    bb_engine_free(net.e[3]);
    net.e[3] = fresh;
    assert_int_equal(table_of(&net, 3, after), nb);
    for (int k = 0; k < nb; k++)
        assert_int_equal(after[k], before[k]);
    /* its records too, if it kept one: Get answers from any node anyway */
    bb_engine_input get = {.name = "key", .value = key_value("k")};
    bb_value *v = call(&net, 3, "Fetch", &get, 1, "got", why);
    assert_non_null(v);
    assert_memory_equal(v->u.bytes.data, "v1", 2);
    bb_value_unref(v);
    drop(get.value);
    drop(put[0].value);
    drop(put[1].value);
    fx_net_free(&net);
    bb_model_free(m);
}

static void test_kademlia_config_errors(void **state)
{
    (void)state;
    const pfx_bad_config cases[] = {
        {"{\"k\": 0}", "'k'"},
        {"{\"alpha\": 17}", "'alpha'"},
        {"{\"seeds\": [\"/ip4/10.0.0.1/tcp/7000\"]}", "needs /p2p/<PeerId>"},
        {"{\"max_value_bytes\": 1000000}", "'max_value_bytes'"},
    };
    pfx_assert_configs_refused("dht::Kademlia", cases, sizeof cases / sizeof *cases);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kademlia_lookups_store_and_near_key),
        cmocka_unit_test(test_kademlia_ping_before_evict),
        cmocka_unit_test(test_kademlia_refuses_hostile_rpcs),
        cmocka_unit_test(test_kademlia_state_survives_restore),
        cmocka_unit_test(test_kademlia_config_errors),
    };
    return cmocka_run_group_tests(tests, NULL, pfx_group_teardown);
}
