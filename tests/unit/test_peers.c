/*
 * Unit tests for the peers plugin (peers::ConstantView, peers::Connected):
 * ConstantView through its dispatch entry (All, Random{n}, Select, NearKey
 * refused, the of_class check, config errors naming the entry) and through
 * the engine (its addresses reach the address book); Connected through the
 * engine, whose peer table it reads: peers join the view when they connect
 * announcing the target, leave it on disconnect or PeerDown, and come back
 * on reconnect.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/multiaddr.h"
#include "bb/peerid.h"
#include "support/engine_fixtures.h"
#include "support/plugin_fixtures.h"

#define SEL "ai.bytesandbrains.role.peer_selector"
#define EXT "bb-peers.PeerSelector.atomic"
#define PEER_CLASS "ai.bytesandbrains.peer_class"

static void peer_text(uint8_t seed, char *out)
{
    bb_peerid id = fx_peer(seed);
    assert_int_equal(bb_peerid_to_text(&id, out, BB_PEERID_TEXT_MAX, NULL), BB_OK);
}

/* {"peers": [p1, ..., pn]} with peers seeded 1..n; extra appended. */
static char *view_config(int n, const char *extra)
{
    char *cfg = malloc(4096), id[BB_PEERID_TEXT_MAX];
    size_t used = (size_t)snprintf(cfg, 4096, "{\"peers\": [");
    for (int i = 1; i <= n; i++) {
        peer_text((uint8_t)i, id);
        used += (size_t)snprintf(cfg + used, 4096 - used, "%s\"%s\"", i > 1 ? ", " : "", id);
    }
    snprintf(cfg + used, 4096 - used, "]%s%s}", *extra ? ", " : "", extra);
    return cfg;
}

typedef struct sel_t {
    const bb_component_type *t;
    void *inst;
    bb_model *m; /* owns the nodes handed to dispatch */
    bb_function *f;
} sel_t;

static sel_t make_view(int n, const char *extra)
{
    char *cfg = view_config(n, extra);
    sel_t s = {pfx_type("peers::ConstantView"), NULL, fx_model(), NULL};
    s.f = fx_fn(s.m, "F", "", "");
    bb_error err = {0};
    s.inst = pfx_create(s.t, "selector", cfg, NULL, 5, NULL, &err);
    free(cfg);
    if (!s.inst)
        fail_msg("create: %s", err.msg);
    return s;
}

static void drop(sel_t *s)
{
    s->t->destroy(s->inst);
    bb_model_free(s->m);
}

/* A node for op with attribute n (n < 0: none) and an of_class tag. */
static bb_node *node(sel_t *s, const char *domain, const char *op, int64_t n, const char *params,
                     const char *of_class)
{
    bb_node *nd = fx_op(s->m, s->f, domain, op, "", "peers");
    if (n >= 0)
        fx_int(s->m, nd, "n", n);
    if (params)
        fx_str(s->m, nd, "params", params);
    if (of_class)
        fx_meta(s->m, nd, PEER_CLASS, of_class);
    return nd;
}

static int select_(sel_t *s, bb_node *nd, bb_value **out, bb_error *err)
{
    return pfx_call(s->t, s->inst, NULL, nd->op_type, nd, NULL, 0, out, 1, err);
}

static bb_value *select_ok(sel_t *s, bb_node *nd)
{
    bb_value *out = NULL;
    bb_error err = {0};
    if (select_(s, nd, &out, &err))
        fail_msg("%s: %s", nd->op_type, err.msg);
    assert_ptr_equal(out->type, &BB_TYPE_PEER_ID_VEC);
    return out;
}

/* ---- ConstantView -------------------------------------------------------------- */

static void test_constant_view_all_and_random(void **state)
{
    (void)state;
    sel_t s = make_view(5, "");
    bb_value *all = select_ok(&s, node(&s, SEL, "CurrentView", -1, NULL, NULL));
    assert_int_equal(all->u.list.n, 5);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(pfx_seed_of(all->u.list.items[i]), (int)i + 1);
    bb_value_unref(all);
    int hits[6] = {0};
    bb_node *sample2 = node(&s, SEL, "Sample", 2, NULL, NULL);
    for (int k = 0; k < 200; k++) {
        bb_value *v = select_ok(&s, sample2);
        assert_int_equal(v->u.list.n, 2);
        int a = pfx_seed_of(v->u.list.items[0]), b = pfx_seed_of(v->u.list.items[1]);
        assert_true(a && b && a != b); /* without replacement */
        hits[a]++;
        hits[b]++;
        bb_value_unref(v);
    }
    for (int i = 1; i <= 5; i++) /* uniform: 80 expected each */
        assert_true(hits[i] > 40 && hits[i] < 120);
    /* n beyond the view: all of it, once each */
    bb_value *v = select_ok(&s, node(&s, SEL, "Sample", 9, NULL, NULL));
    assert_int_equal(v->u.list.n, 5);
    int seen[6] = {0};
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(seen[pfx_seed_of(v->u.list.items[i])]++, 0);
    bb_value_unref(v);
    drop(&s);
}

static void test_select_params_and_near_key_refused(void **state)
{
    (void)state;
    sel_t s = make_view(4, "");
    bb_value *v = select_ok(&s, node(&s, EXT, "Select", -1, "all", NULL));
    assert_int_equal(v->u.list.n, 4);
    bb_value_unref(v);
    v = select_ok(&s, node(&s, EXT, "Select", 3, "random", NULL));
    assert_int_equal(v->u.list.n, 3);
    bb_value_unref(v);
    bb_error err = {0};
    assert_int_equal(select_(&s, node(&s, EXT, "Select", 2, "near_key", NULL), &v, &err),
                     BB_EUNSUPPORTED);
    assert_non_null(strstr(err.msg, "NearKey is not supported"));
    assert_non_null(strstr(err.msg, "peers::ConstantView"));
    assert_int_equal(select_(&s, node(&s, EXT, "Select", 2, "closest", NULL), &v, &err), BB_EINVAL);
    assert_int_equal(select_(&s, node(&s, SEL, "Sample", -1, NULL, NULL), &v, &err), BB_EINVAL);
    assert_non_null(strstr(err.msg, "n >= 1"));
    assert_int_equal(select_(&s, node(&s, SEL, "Sample", 0, NULL, NULL), &v, &err), BB_EINVAL);
    drop(&s);
}

static void test_of_class_must_agree(void **state)
{
    (void)state;
    sel_t s = make_view(2, "\"of_class\": \"Client\"");
    bb_value *v = select_ok(&s, node(&s, SEL, "Sample", 1, NULL, "Client"));
    assert_int_equal(v->u.list.n, 1);
    bb_value_unref(v);
    v = select_ok(&s, node(&s, SEL, "CurrentView", -1, NULL, NULL)); /* untagged: fine */
    bb_value_unref(v);
    bb_error err = {0};
    assert_int_equal(select_(&s, node(&s, SEL, "Sample", 1, NULL, "Server"), &v, &err), BB_EINVAL);
    assert_non_null(strstr(err.msg, "class 'Client'"));
    assert_non_null(strstr(err.msg, "of_class 'Server'"));
    drop(&s);
}

static void test_constant_view_config_errors(void **state)
{
    (void)state;
    const bb_component_type *t = pfx_type("peers::ConstantView");
    char id[BB_PEERID_TEXT_MAX], cfg[512];
    peer_text(1, id);
    const struct {
        const char *fmt, *want;
    } cases[] = {
        {"{}", "'peers'"},
        {"{\"peers\": \"%s\"}", "'peers'"},
        {"{\"peers\": [\"%s\", \"notapeer\"]}", "peers[1] is not a PeerId"},
        {"{\"peers\": [\"%s\", 7]}", "peers[1] is not a PeerId"},
        {"{\"peers\": [\"%s\", \"%s\"]}", "peers[1] repeats"},
        {"{\"peers\": [{\"id\": \"%s\", \"addrs\": [\"/ip4/1.2.3/tcp/1\"]}]}", "peers[0].addrs[0]"},
        {"{\"peers\": [{\"id\": \"%s\", \"addrs\": \"/ip4/1.2.3.4/tcp/1\"}]}", "peers[0].addrs"},
        {"{\"peers\": [], \"of_class\": 3}", "'of_class'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(cfg, sizeof cfg, cases[i].fmt, id, id);
        bb_error err = {0};
        assert_null(pfx_create(t, "selector", cfg, NULL, 1, NULL, &err));
        if (!strstr(err.msg, cases[i].want))
            fail_msg("%s: \"%s\" lacks \"%s\"", cfg, err.msg, cases[i].want);
    }
}

/* ---- through the engine ------------------------------------------------------------- */

static bb_engine *install(bb_model *m, const char *config)
{
    bb_engine *e = fx_engine(100, 7100, NULL);
    pfx_slot_config sc[1] = {{"selector", config}};
    bb_engine_registry reg = pfx_registry(sc, 1);
    const char *target = "Server";
    bb_error err = {0};
    if (bb_engine_install(e, m, &target, 1, &reg, &err))
        fail_msg("install: %s", err.msg);
    return e;
}

/* Invokes Server once and runs the engine until it is quiet. */
static uint64_t g_now = 1; /* the engine time run_server polls at */

static void run_server(bb_engine *e, fx_log *log)
{
    bb_value *go = bb_value_trigger();
    bb_engine_input in = {.name = "go", .value = go};
    assert_int_equal(bb_engine_invoke(e, "Server", &in, 1, NULL, NULL), BB_OK);
    bb_value_unref(go);
    fx_run(e, log, g_now, 10);
}

/* Invokes Server: an op must fail, with a message containing want. */
static void assert_server_fails(bb_engine *e, const char *want)
{
    fx_log log = {0};
    run_server(e, &log);
    const fx_rec *f = fx_log_nth(&log, BB_STEP_OP_FAILED, 0);
    assert_non_null(f);
    if (!strstr(f->c, want))
        fail_msg("\"%s\" lacks \"%s\"", f->c, want);
    fx_log_free(&log);
}

/* Invokes Server and returns the sorted seeds of its "view" (and the size
 * of "peers" in *sampled). */
static int view_seeds(bb_engine *e, int *seeds, size_t *sampled)
{
    fx_log log = {0};
    run_server(e, &log);
    if (fx_log_count(&log, BB_STEP_OP_FAILED))
        fail_msg("op failed: %s", fx_log_nth(&log, BB_STEP_OP_FAILED, 0)->c);
    const fx_rec *v = fx_log_app(&log, "view", 0), *p = fx_log_app(&log, "peers", 0);
    assert_non_null(v);
    assert_non_null(p);
    int n = (int)v->value->u.list.n;
    for (int i = 0; i < n; i++)
        seeds[i] = pfx_seed_of(v->value->u.list.items[i]);
    for (int i = 1; i < n; i++) /* insertion sort */
        for (int j = i; j > 0 && seeds[j - 1] > seeds[j]; j--) {
            int t = seeds[j];
            seeds[j] = seeds[j - 1];
            seeds[j - 1] = t;
        }
    if (sampled)
        *sampled = p->value->u.list.n;
    fx_log_free(&log);
    return n;
}

static void connect_peer(bb_engine *e, uint8_t seed, const char *target)
{
    bb_peerid id = fx_peer(seed);
    const char *t[1] = {target};
    bb_error err = {0};
    if (bb_engine_peer_connected(e, &id, t, 1, &err))
        fail_msg("peer_connected: %s", err.msg);
}

static void test_connected_follows_the_peer_table(void **state)
{
    (void)state;
    bb_model *m = pfx_selector_model("peers::Connected", 1, "Client");
    bb_engine *e = install(m, NULL); /* no target in the config: the of_class tag */
    int s[8];
    size_t sampled = 9;
    assert_int_equal(view_seeds(e, s, &sampled), 0); /* nobody yet */
    assert_int_equal(sampled, 0);
    connect_peer(e, 1, "Client");
    connect_peer(e, 2, "Client");
    connect_peer(e, 3, "Trainer"); /* another target */
    assert_int_equal(view_seeds(e, s, &sampled), 2);
    assert_int_equal(s[0], 1);
    assert_int_equal(s[1], 2);
    assert_int_equal(sampled, 1);
    bb_peerid p1 = fx_peer(1);
    bb_engine_peer_disconnected(e, &p1); /* leaves */
    assert_int_equal(view_seeds(e, s, NULL), 1);
    assert_int_equal(s[0], 2);
    connect_peer(e, 1, "Client"); /* comes back */
    assert_int_equal(view_seeds(e, s, NULL), 2);
    /* PeerDown: enough failed sends, and it leaves while still connected */
    bb_peerid p2 = fx_peer(2);
    for (int i = 0; i < 5; i++)
        bb_engine_report_send(e, &p2, false);
    assert_int_equal(view_seeds(e, s, NULL), 1);
    assert_int_equal(s[0], 1);
    /* still out a while later (a down peer sits out backoff_max_ns, 60 s)... */
    g_now = 30000000000ull;
    assert_int_equal(view_seeds(e, s, NULL), 1);
    /* ...then it is offered again (half-open): a round may ask it; left
     * out for good it never would be */
    g_now = 61000000000ull;
    assert_int_equal(view_seeds(e, s, NULL), 2);
    g_now = 1;
    connect_peer(e, 2, "Client"); /* a reconnect is proof of life */
    assert_int_equal(view_seeds(e, s, NULL), 2);
    bb_engine_free(e);
    /* the config's target wins over the tag, and must agree with it */
    e = install(m, "{\"target\": \"Client\"}");
    connect_peer(e, 4, "Client");
    assert_int_equal(view_seeds(e, s, NULL), 1);
    bb_engine_free(e);
    e = install(m, "{\"target\": \"Trainer\"}");
    assert_server_fails(e, "class 'Trainer'");
    bb_engine_free(e);
    /* min_peers: no view until that many peers run the target */
    e = install(m, "{\"min_peers\": 2}");
    connect_peer(e, 4, "Client");
    assert_server_fails(e, "1 peers run 'Client', fewer than min_peers 2");
    connect_peer(e, 5, "Client");
    assert_int_equal(view_seeds(e, s, NULL), 2);
    bb_engine_free(e);
    /* min_peers_first: the first view waits for 3, later ones for min_peers 1 */
    e = install(m, "{\"min_peers\": 1, \"min_peers_first\": 3}");
    connect_peer(e, 4, "Client");
    connect_peer(e, 5, "Client");
    assert_server_fails(e, "2 peers run 'Client', fewer than min_peers_first 3");
    connect_peer(e, 6, "Client");
    assert_int_equal(view_seeds(e, s, NULL), 3);
    bb_peerid p5 = fx_peer(5), p6 = fx_peer(6), p4 = fx_peer(4);
    bb_engine_peer_disconnected(e, &p5);
    bb_engine_peer_disconnected(e, &p6);
    assert_int_equal(view_seeds(e, s, NULL), 1);
    bb_engine_peer_disconnected(e, &p4);
    assert_server_fails(e, "0 peers run 'Client', fewer than min_peers 1");
    bb_engine_free(e);
    /* below min_peers it is min_peers, and a bad value is refused */
    e = install(m, "{\"min_peers\": 2, \"min_peers_first\": 1}");
    connect_peer(e, 4, "Client");
    assert_server_fails(e, "1 peers run 'Client', fewer than min_peers 2");
    bb_engine_free(e);
    bb_model_free(m);
    /* untagged and unconfigured: no target to look for */
    m = pfx_selector_model("peers::Connected", 1, NULL);
    e = install(m, NULL);
    assert_server_fails(e, "no target");
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_constant_view_addresses_reach_the_address_book(void **state)
{
    (void)state;
    char id[BB_PEERID_TEXT_MAX], cfg[512];
    peer_text(7, id);
    snprintf(cfg, sizeof cfg,
             "{\"peers\": [{\"id\": \"%s\", \"addrs\": [\"/ip4/10.1.2.3/tcp/7007\", "
             "\"/ip4/10.1.2.3/udp/7007\"]}], \"of_class\": \"Client\"}",
             id);
    bb_model *m = pfx_selector_model("peers::ConstantView", 1, "Client");
    bb_engine *e = install(m, cfg);
    bb_peerid p7 = fx_peer(7);
    const bb_engine_addr *a = NULL;
    assert_int_equal(bb_engine_peer_addrs(e, &p7, &a), 0);
    int s[4];
    assert_int_equal(view_seeds(e, s, NULL), 1);
    assert_int_equal(s[0], 7);
    assert_int_equal(bb_engine_peer_addrs(e, &p7, &a), 2);
    char text[128];
    assert_int_equal(bb_multiaddr_format(a[0].data, a[0].len, text, sizeof text, NULL, NULL), BB_OK);
    assert_string_equal(text, "/ip4/10.1.2.3/tcp/7007");
    bb_engine_free(e);
    bb_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_constant_view_all_and_random),
        cmocka_unit_test(test_select_params_and_near_key_refused),
        cmocka_unit_test(test_of_class_must_agree),
        cmocka_unit_test(test_constant_view_config_errors),
        cmocka_unit_test(test_connected_follows_the_peer_table),
        cmocka_unit_test(test_constant_view_addresses_reach_the_address_book),
    };
    return cmocka_run_group_tests(tests, NULL, pfx_group_teardown);
}
