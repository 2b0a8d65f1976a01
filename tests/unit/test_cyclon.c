/*
 * test_cyclon.c — peers::Cyclon on 16 in-process engines in virtual time
 * (the control plane between them carried by fx_net): joining from one
 * seed, full views without self or duplicates, a connected overlay with
 * balanced in-degree, dead nodes purged and the overlay still connected
 * after 4 of 16 stop, the view through snapshot and restore, and hostile
 * shuffles refused. The real-process acceptance run is
 * tests/integration/cyclon_overlay.sh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/bytes.h"
#include "bb/multiaddr.h"
#include "bb/peerid.h"
#include "support/engine_fixtures.h"
#include "support/plugin_fixtures.h"

#define N 16
#define C 6
#define PERIOD_NS 100000000ull /* 100 ms */

static char g_cfg[1024];

/* Every node's config: view 6, shuffle 3, 100 ms, node 1 as the one seed. */
static const char *config(void)
{
    bb_peerid seed = fx_peer(1);
    char id[BB_PEERID_TEXT_MAX];
    assert_int_equal(bb_peerid_to_text(&seed, id, sizeof id, NULL), BB_OK);
    snprintf(g_cfg, sizeof g_cfg,
             "{\"view_size\": %d, \"shuffle_length\": 3, \"period_ms\": 100, "
             "\"seeds\": [\"/ip4/127.0.0.1/tcp/7001/p2p/%s\"]}",
             C, id);
    return g_cfg;
}

static bb_engine *start(fx_net *net, uint8_t seed, bb_model *m)
{
    return pfx_net_start(net, seed, m, config());
}

static void run_periods(fx_net *net, int periods)
{
    pfx_net_advance(net, (uint64_t)periods * PERIOD_NS);
}

static int seed_of_engine(bb_engine *e)
{
    bb_value *v = bb_value_bytes(&BB_TYPE_PEER_ID, bb_engine_peer_id(e)->bytes,
                                 bb_engine_peer_id(e)->len);
    int s = pfx_seed_of(v);
    bb_value_unref(v);
    return s;
}

/* Engine i's view as seeds (returns its size): Server invoked once. */
static int view_of(fx_net *net, int i, int *seeds)
{
    fx_log_free(&net->log[i]);
    memset(&net->log[i], 0, sizeof net->log[i]);
    bb_value *go = bb_value_trigger();
    bb_engine_input in = {.name = "go", .value = go};
    assert_int_equal(bb_engine_invoke(net->e[i], "Server", &in, 1, NULL, NULL), BB_OK);
    bb_value_unref(go);
    fx_net_poll(net, i);
    const fx_rec *v = fx_log_app(&net->log[i], "view", 0);
    assert_non_null(v);
    int n = (int)v->value->u.list.n;
    for (int k = 0; k < n; k++)
        seeds[k] = pfx_seed_of(v->value->u.list.items[k]);
    return n;
}

typedef struct graph {
    bool edge[N + 1][N + 1]; /* edge[a][b]: b is in a's view */
    bool live[N + 1];
} graph;

static void graph_of(fx_net *net, graph *g)
{
    memset(g, 0, sizeof *g);
    for (int i = 0; i < net->n; i++)
        g->live[seed_of_engine(net->e[i])] = true;
    for (int i = 0; i < net->n; i++) {
        int me = seed_of_engine(net->e[i]), s[64];
        int n = view_of(net, i, s);
        assert_true(n <= C);
        for (int k = 0; k < n; k++) {
            assert_true(s[k] >= 1 && s[k] <= N); /* a peer of the overlay */
            assert_int_not_equal(s[k], me);      /* never itself */
            assert_false(g->edge[me][s[k]]);     /* never twice */
            g->edge[me][s[k]] = true;
        }
    }
}

/* Every live node reaches every other along view edges (both ways). */
static bool strongly_connected(const graph *g)
{
    int root = 1;
    while (root <= N && !g->live[root])
        root++;
    for (int dir = 0; dir < 2; dir++) {
        bool seen[N + 1] = {false};
        int stack[N + 1], sp = 0;
        seen[root] = true;
        stack[sp++] = root;
        while (sp) {
            int a = stack[--sp];
            for (int b = 1; b <= N; b++)
                if (g->live[b] && !seen[b] && (dir ? g->edge[b][a] : g->edge[a][b])) {
                    seen[b] = true;
                    stack[sp++] = b;
                }
        }
        for (int b = 1; b <= N; b++)
            if (g->live[b] && !seen[b])
                return false;
    }
    return true;
}

static void in_degree(const graph *g, int *min, int *max)
{
    *min = N;
    *max = 0;
    for (int b = 1; b <= N; b++) {
        if (!g->live[b])
            continue;
        int d = 0;
        for (int a = 1; a <= N; a++)
            d += g->live[a] && g->edge[a][b];
        *min = d < *min ? d : *min;
        *max = d > *max ? d : *max;
    }
}

static void test_cyclon_overlay_from_one_seed(void **state)
{
    (void)state;
    bb_model *m = pfx_selector_model("peers::Cyclon", 2, NULL);
    fx_net net = {.now = 1};
    for (uint8_t s = 1; s <= N; s++)
        start(&net, s, m);
    run_periods(&net, 60);
    graph g;
    graph_of(&net, &g);
    for (int a = 1; a <= N; a++) { /* every view full */
        int d = 0;
        for (int b = 1; b <= N; b++)
            d += g.edge[a][b];
        assert_int_equal(d, C);
    }
    int lo, hi;
    in_degree(&g, &lo, &hi);
    print_message("cyclon, 16 nodes, C=6: in-degree min %d, max %d (mean 6)\n", lo, hi);
    assert_true(lo >= 2 && hi <= 12); /* no node forgotten, none a hub */
    assert_true(strongly_connected(&g));

    /* 4 nodes stop: their envelopes are lost, their neighbours' shuffles
     * with them time out, and they leave every view */
    for (int k = 0; k < 4; k++) {
        int i = net.n - 1 - k * 3 % net.n;
        bb_engine_free(net.e[i]);
        fx_log_free(&net.log[i]);
        net.e[i] = net.e[net.n - 1];
        net.log[i] = net.log[net.n - 1];
        net.n--;
    }
    run_periods(&net, 80);
    graph_of(&net, &g);
    int dead_refs = 0;
    for (int a = 1; a <= N; a++)
        for (int b = 1; b <= N; b++)
            dead_refs += g.live[a] && !g.live[b] && g.edge[a][b];
    assert_int_equal(dead_refs, 0);
    assert_true(strongly_connected(&g));
    for (int a = 1; a <= N; a++) {
        int d = 0;
        for (int b = 1; b <= N; b++)
            d += g.edge[a][b];
        assert_true(!g.live[a] || d == C); /* 11 others alive: still full */
    }
    fx_net_free(&net);
    bb_model_free(m);
}

/* The view survives snapshot and restore into a fresh engine. */
static void test_cyclon_view_survives_restore(void **state)
{
    (void)state;
    bb_model *m = pfx_selector_model("peers::Cyclon", 2, NULL);
    fx_net net = {.now = 1};
    for (uint8_t s = 1; s <= 6; s++)
        start(&net, s, m);
    run_periods(&net, 20);
    int before[64], after[64];
    int n = view_of(&net, 2, before);
    assert_true(n >= 3);
    uint8_t *snap = NULL;
    size_t len = 0;
    bb_error err = {0};
    assert_int_equal(bb_engine_snapshot(net.e[2], &snap, &len, &err), BB_OK);
    bb_engine *old = net.e[2];
    bb_engine *fresh = fx_engine(3, 7003, NULL);
    pfx_slot_config sc[1] = {{"selector", config()}}; /* installed by hand: no bootstrap */
    bb_engine_registry reg = pfx_registry(sc, 1);
    const char *target = "Server";
    assert_int_equal(bb_engine_install(fresh, m, &target, 1, &reg, &err), BB_OK);
    if (bb_engine_restore(fresh, snap, len, &err))
        fail_msg("restore: %s", err.msg);
    free(snap);
    net.e[2] = fresh;
    bb_engine_free(old);
    assert_int_equal(view_of(&net, 2, after), n);
    for (int k = 0; k < n; k++)
        assert_int_equal(after[k], before[k]);
    run_periods(&net, 10); /* and it keeps shuffling: its timer came back too */
    assert_int_equal(view_of(&net, 2, after), n);
    fx_net_free(&net);
    bb_model_free(m);
}

/* No seeds configured: a node starts from the peers its host knows (a bbd
 * --peer, a bbsim connect). Node 2 knows node 1's address, node 3 knows
 * node 2's; nobody is a seed, and all three end up in one overlay. */
static void test_cyclon_joins_from_known_peers(void **state)
{
    (void)state;
    bb_model *m = pfx_selector_model("peers::Cyclon", 2, NULL);
    fx_net net = {.now = 1};
    const char *no_seeds = "{\"view_size\": 4, \"shuffle_length\": 2, \"period_ms\": 100}";
    for (uint8_t s = 1; s <= 3; s++) {
        bb_engine *e = pfx_net_start(&net, s, m, no_seeds);
        if (s > 1)
            assert_int_equal(fx_know(e, (uint8_t)(s - 1)), BB_OK);
    }
    run_periods(&net, 20);
    for (int i = 0; i < 3; i++) {
        int v[64], me = seed_of_engine(net.e[i]);
        int n = view_of(&net, i, v);
        if (n != 2) /* the other two */
            fail_msg("node %d has %d neighbours", me, n);
        for (int k = 0; k < n; k++)
            assert_true(v[k] >= 1 && v[k] <= 3 && v[k] != me);
    }
    fx_net_free(&net);
    bb_model_free(m);
}

/* A node's first step may come before its first shuffle: a Sample on an
 * empty view answers from the peers its host knows by then (here: learned
 * after the bootstrap), not with nobody. */
static void test_cyclon_empty_view_samples_known_peers(void **state)
{
    (void)state;
    bb_model *m = pfx_selector_model("peers::Cyclon", 2, NULL);
    fx_net net = {.now = 1};
    const char *no_seeds = "{\"view_size\": 4, \"shuffle_length\": 2, \"period_ms\": 100}";
    pfx_net_start(&net, 1, m, no_seeds);
    bb_engine *e = pfx_net_start(&net, 2, m, no_seeds);
    int v[64];
    assert_int_equal(view_of(&net, 1, v), 0); /* knows nobody yet */
    assert_int_equal(fx_know(e, 1), BB_OK);
    assert_int_equal(view_of(&net, 1, v), 1); /* no shuffle since: the view rejoined */
    assert_int_equal(v[0], 1);
    fx_net_free(&net);
    bb_model_free(m);
}

/* A shuffle from a peer is bounded and checked: garbage and too many
 * entries are refused (answered with an error) and change nothing. */
static void test_cyclon_refuses_hostile_shuffles(void **state)
{
    (void)state;
    bb_model *m = pfx_selector_model("peers::Cyclon", 2, NULL);
    fx_net net = {.now = 1};
    for (uint8_t s = 1; s <= 3; s++)
        start(&net, s, m);
    run_periods(&net, 10);
    int before[64], after[64];
    int n = view_of(&net, 1, before);
    uint8_t payload[16];
    bb_writer w;
    bb_writer_init_fixed(&w, payload, sizeof payload);
    bb_writer_put_uvarint(&w, 65); /* more entries than any shuffle may hold */
    const uint8_t junk[] = {3, 0xff, 0xff, 0xff, 0x01};
    pfx_deliver_control(net.e[1], 40, 0, "Shuffle", payload, w.len, 77);
    pfx_deliver_control(net.e[1], 40, 0, "Shuffle", junk, sizeof junk, 78);
    fx_net_poll(&net, 1);
    assert_int_equal(fx_log_count(&net.log[1], BB_STEP_OP_FAILED), 2);
    assert_non_null(strstr(fx_log_nth(&net.log[1], BB_STEP_OP_FAILED, 0)->c, "at most 64"));
    assert_int_equal(view_of(&net, 1, after), n);
    for (int k = 0; k < n; k++)
        assert_int_equal(after[k], before[k]);
    fx_net_free(&net);
    bb_model_free(m);
}

static void test_cyclon_config_errors(void **state)
{
    (void)state;
    const pfx_bad_config cases[] = {
        {"{\"view_size\": 0}", "'view_size'"},
        {"{\"view_size\": 4, \"shuffle_length\": 5}", "exceeds view_size"},
        {"{\"seeds\": [\"/ip4/10.0.0.1/tcp/7000\"]}", "needs /p2p/<PeerId>"},
        {"{\"seeds\": [\"/site/3/p2p/12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5SA\"]}",
         "seeds[0]"},
        {"{\"seeds\": [7]}", "seeds[0] is not a string"},
        {"{\"bogus\": 1}", "bogus"},
    };
    pfx_assert_configs_refused("peers::Cyclon", cases, sizeof cases / sizeof *cases);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cyclon_overlay_from_one_seed),
        cmocka_unit_test(test_cyclon_view_survives_restore),
        cmocka_unit_test(test_cyclon_joins_from_known_peers),
        cmocka_unit_test(test_cyclon_empty_view_samples_known_peers),
        cmocka_unit_test(test_cyclon_refuses_hostile_shuffles),
        cmocka_unit_test(test_cyclon_config_errors),
    };
    return cmocka_run_group_tests(tests, NULL, pfx_group_teardown);
}
