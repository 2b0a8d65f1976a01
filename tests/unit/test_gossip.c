/*
 * test_gossip.c — examples/gossip as shipped (recorded by its binary,
 * compiled by the real compiler against the real plugins) on 8 in-process
 * engines in virtual time, with no server: digits split non-IID (about two
 * classes per node), each node trains on its shard, sends its model to a
 * CYCLON-sampled peers every step and merges what it receives. Every node's
 * held-out accuracy must pass 85% and average over it in its last 10 of 100
 * steps. The real-process run with the same numbers is
 * tests/integration/gossip_digits.sh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/peerid.h"
#include "support/engine_fixtures.h"
#include "support/plugin_fixtures.h"

#define NODES 8
#define MS 1000000ULL
#define STEPS 100

/* Items of the "accuracy" report (examples/gossip/gossip.c). */
enum { G_ACCURACY, G_LOSS, G_AGE, G_CLOCK, G_N };

typedef struct gossip {
    fx_net net;
    bb_model *m;
    char data[NODES][512], peers[NODES][512];
    pfx_slot_config cfg[NODES][2];
} gossip;

static void gossip_start(gossip *g, const char *const *knobs)
{
    memset(g, 0, sizeof *g);
    if (!pfx_fetch_data())
        fail_msg("scripts/fetch-data could not provide data/digits.csv.gz");
    g->m = pfx_compile_example("gossip", knobs);
    const char *digits = pfx_repo_path("data/digits.csv.gz");
    bb_peerid seed = fx_peer(1);
    char id[BB_PEERID_TEXT_MAX];
    assert_int_equal(bb_peerid_to_text(&seed, id, sizeof id, NULL), BB_OK);
    for (int i = 0; i < NODES; i++) {
        snprintf(g->data[i], sizeof g->data[i],
                 "{\"path\": \"%s\", \"shard_count\": %d, \"shard_index\": %d, \"seed\": %d, "
                 "\"partition\": \"classes\", \"partition_seed\": 3}",
                 digits, NODES, i, 10 + i);
        snprintf(g->peers[i], sizeof g->peers[i],
                 "{\"seeds\": [\"/ip4/127.0.0.1/tcp/7001/p2p/%s\"]}", id);
        g->cfg[i][0] = (pfx_slot_config){"data", g->data[i]};
        g->cfg[i][1] = (pfx_slot_config){"peers", g->peers[i]};
        bb_error err = {0};
        bb_engine *e =
            pfx_net_node(&g->net, (uint8_t)(1 + i), g->m, "Peer", g->cfg[i], 2, NULL, &err);
        if (!e)
            fail_msg("node %d: %s", i, err.msg);
        bb_bootstrap_target fresh = {.kind = BB_BOOTSTRAP_FRESH}; /* as bbd does */
        assert_int_equal(bb_engine_run_bootstrap(e, &fresh, NULL), BB_OK);
    }
    g->net.now = 1000 * MS;
}

static size_t reports(const gossip *g, int i)
{
    size_t n = 0;
    while (fx_log_app(&g->net.log[i], "accuracy", n))
        n++;
    return n;
}

static float accuracy(const gossip *g, int i, size_t k)
{
    const fx_rec *r = fx_log_app(&g->net.log[i], "accuracy", k);
    assert_non_null(r);
    assert_int_equal(r->value->u.list.n, G_N);
    return *bb_tensor_f32(r->value->u.list.items[G_ACCURACY]);
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static void test_gossip_non_iid_digits_without_a_server(void **state)
{
    (void)state;
    gossip g;
    const char *knobs[] = {"--period-ms", "500", NULL}; /* the example's defaults otherwise */
    gossip_start(&g, knobs);
    bool all = false;
    for (size_t t = 0; t < 4 * STEPS * 10 && !all; t++) {
        g.net.now += 50 * MS;
        fx_net_run(&g.net, 1000);
        all = true;
        for (int i = 0; i < NODES; i++)
            all &= reports(&g, i) >= STEPS;
    }
    for (int i = 0; i < NODES; i++) {
        if (fx_log_count(&g.net.log[i], BB_STEP_OP_FAILED))
            fail_msg("node %d: %s failed: %s", i, fx_log_nth(&g.net.log[i], BB_STEP_OP_FAILED, 0)->b,
                     fx_log_nth(&g.net.log[i], BB_STEP_OP_FAILED, 0)->c);
        assert_true(reports(&g, i) >= STEPS);
    }
    for (size_t k = 0; k < STEPS; k += STEPS / 10) {
        float acc[NODES];
        for (int i = 0; i < NODES; i++)
            acc[i] = accuracy(&g, i, k);
        qsort(acc, NODES, sizeof *acc, cmp_float);
        print_message("gossip step %2zu: min %.3f median %.3f max %.3f\n", k, acc[0],
                      (acc[NODES / 2 - 1] + acc[NODES / 2]) / 2, acc[NODES - 1]);
    }
    /* every node passes 85%, and stays there: its last 10 steps average over it
     * (a step's model is what the merges made of it, so single steps dip) */
    for (int i = 0; i < NODES; i++) {
        size_t first = STEPS;
        float last10 = 0;
        for (size_t k = 0; k < STEPS; k++)
            first = first == STEPS && accuracy(&g, i, k) > 0.85f ? k : first;
        for (size_t k = STEPS - 10; k < STEPS; k++)
            last10 += accuracy(&g, i, k) / 10;
        print_message("node %d: passed 85%% at step %zu, last 10 steps %.3f\n", i, first, last10);
        if (first == STEPS || !(last10 > 0.85f))
            fail_msg("node %d: passed 85%% at step %zu of %d, last 10 steps %.3f", i, first,
                     STEPS, last10);
    }
    fx_net_free(&g.net);
    bb_model_free(g.m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gossip_non_iid_digits_without_a_server),
    };
    return cmocka_run_group_tests(tests, NULL, pfx_group_teardown);
}
