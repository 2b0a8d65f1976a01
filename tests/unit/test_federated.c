/*
 * The flagship program, examples/federated, as shipped: the recorder binary
 * writes it with its knobs (argv), the real compiler compiles it against the
 * real plugins, and five in-process engines — one Server, four Clients —
 * run it over the in-memory network of tests/unit/support/engine_fixtures.h
 * in virtual time. Nothing invokes a round: the Server's Interval starts
 * each one (Limit, ParamsOn, Sample, SendReqBatched with its quorum and
 * deadline, FedAvg, evaluation on the held-out 20% of digits).
 *
 *  - IID digits over four clients: 20 rounds reach the centralized
 *    baseline of test_nn_engine (a 64-32-10 relu Adam MLP, 40 epochs over
 *    80% of digits, >= 95%; ~98% measured) within 2 points; every round's
 *    report is checked (round number, participants, samples, timestamps,
 *    and that each round starts from the parameters the last one ended with),
 *    and every answer was folded into FedAvg as it landed.
 *  - A client that stops answering (hung: still connected, never polled):
 *    the next round completes by quorum at its deadline without it, the
 *    server reports PeerDown, and training goes on with three.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/engine_fixtures.h"
#include "support/plugin_fixtures.h"

#define N_CLIENTS 4 /* K, the clients asked per round */
#define MAX_CLIENTS 6
#define PERIOD_MS 1000
#define DEADLINE_MS 800 /* below the period: a round ends before the next tick */
#define STEP_NS 50000000ULL /* virtual time advances in 50 ms steps */
#define MS 1000000ULL

/* Items of the "round" report (examples/federated/federated.c). */
enum { R_ROUND, R_PARTICIPANTS, R_SAMPLES, R_LOSS, R_ACCURACY, R_STARTED, R_FINISHED,
       R_BEFORE, R_AFTER, R_COLLECTED, R_AGGREGATED, R_N };

static bb_model *compile_example(const char *const *knobs)
{
    return pfx_compile_example("federated", knobs);
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

static void know(bb_engine *e, uint8_t seed) { assert_int_equal(fx_know(e, seed), BB_OK); }

typedef struct fed_opts {
    int clients;              /* connected clients (at most MAX_CLIENTS) */
    const char *aggregator;   /* NULL: the recorder's default, agg::FedAvg */
    const char *partition;    /* how the training rows go to shards */
    const char *model_cfg;    /* every client's "model" slot config, or NULL */
    const char *attacker_cfg; /* client 0's "model" config instead, or NULL */
    uint32_t failure_threshold; /* the server's peer_failure_threshold, 0: default */
} fed_opts;

typedef struct fed {
    fx_net net;
    bb_model *m;
    char server_data[512], client_data[MAX_CLIENTS][512];
    pfx_slot_config ccfg[MAX_CLIENTS][2];
} fed;

/* One Server (engine 0, seed 1) and o->clients Clients (seeds 2..), each
 * client connected to the server and knowing its address. The program is
 * recorded for K = N_CLIENTS; with fewer connected, the server asks them all. */
static void fed_start(fed *f, const fed_opts *o)
{
    memset(f, 0, sizeof *f);
    if (!pfx_fetch_data())
        fail_msg("scripts/fetch-data could not provide data/digits.csv.gz");
    char clients[16], period[16], deadline[16];
    snprintf(clients, sizeof clients, "%d", N_CLIENTS);
    snprintf(period, sizeof period, "%d", PERIOD_MS);
    snprintf(deadline, sizeof deadline, "%d", DEADLINE_MS);
    const char *knobs[] = {"--clients", clients, "--quorum", "0.75", "--period-ms", period,
                           "--deadline-ms", deadline, "--epochs", "5",
                           o->aggregator ? "--aggregator" : NULL, o->aggregator, NULL};
    f->m = compile_example(knobs);
    const char *digits = pfx_repo_path("data/digits.csv.gz");
    snprintf(f->server_data, sizeof f->server_data, "{\"path\": \"%s\", \"part\": \"holdout\"}",
             digits);
    pfx_slot_config scfg[1] = {{"data", f->server_data}};
    bb_engine_config ecfg;
    bb_engine_config_init(&ecfg);
    if (o->failure_threshold)
        ecfg.caps.peer_failure_threshold = o->failure_threshold;
    bb_engine *server = node(&f->net, 1, f->m, "Server", scfg, 1, &ecfg);
    bb_bootstrap_target all = {BB_BOOTSTRAP_ALL}; /* as bbd does on a fresh start */
    assert_int_equal(bb_engine_run_bootstrap(server, &all, NULL), BB_OK);
    for (int i = 0; i < o->clients; i++) {
        snprintf(f->client_data[i], sizeof f->client_data[i],
                 "{\"path\": \"%s\", \"shard_count\": %d, \"shard_index\": %d, \"seed\": %d, "
                 "\"partition\": \"%s\", \"partition_seed\": 3}",
                 digits, o->clients, i, 10 + i, o->partition ? o->partition : "iid");
        const char *model = i == 0 && o->attacker_cfg ? o->attacker_cfg : o->model_cfg;
        f->ccfg[i][0] = (pfx_slot_config){"data", f->client_data[i]};
        f->ccfg[i][1] = (pfx_slot_config){"model", model};
        bb_engine *c =
            node(&f->net, (uint8_t)(2 + i), f->m, "Client", f->ccfg[i], model ? 2 : 1, NULL);
        know(c, 1);
        know(server, (uint8_t)(2 + i));
        bb_peerid cp = fx_peer((uint8_t)(2 + i));
        const char *t = "Client";
        assert_int_equal(bb_engine_peer_connected(server, &cp, &t, 1, NULL), BB_OK);
    }
    f->net.now = 1000 * MS;
}

static void fed_free(fed *f)
{
    fx_net_free(&f->net);
    bb_model_free(f->m);
}

/* Advance virtual time until the server has reported `rounds` rounds or
 * max_ns passed; returns the rounds reported. */
static size_t advance(fed *f, size_t rounds, uint64_t max_ns)
{
    uint64_t end = f->net.now + max_ns;
    while (!fx_log_app(&f->net.log[0], "round", rounds - 1) && f->net.now < end) {
        f->net.now += STEP_NS;
        fx_net_run(&f->net, 1000);
    }
    size_t n = 0;
    while (fx_log_app(&f->net.log[0], "round", n))
        n++;
    return n;
}

/* As advance, and every round must come, with no op failing anywhere. */
static void run_rounds(fed *f, size_t rounds, uint64_t max_ns)
{
    size_t got = advance(f, rounds, max_ns);
    for (int i = 0; i < f->net.n; i++)
        if (fx_log_count(&f->net.log[i], BB_STEP_OP_FAILED))
            fail_msg("node %d: %s failed: %s", i,
                     fx_log_nth(&f->net.log[i], BB_STEP_OP_FAILED, 0)->b,
                     fx_log_nth(&f->net.log[i], BB_STEP_OP_FAILED, 0)->c);
    if (got < rounds)
        fail_msg("only %zu of %zu rounds within %llu ms of virtual time", got, rounds,
                 (unsigned long long)(max_ns / MS));
}

static const bb_value *item(const fx_rec *ev, int i)
{
    assert_non_null(ev);
    assert_int_equal(ev->value->type->kind, BB_VK_COMPOSITE);
    assert_int_equal(ev->value->u.list.n, R_N);
    return ev->value->u.list.items[i];
}

static uint64_t u64_of(const fx_rec *ev, int i) { return item(ev, i)->u.u64; }
static float f32_of(const fx_rec *ev, int i) { return *bb_tensor_f32(item(ev, i)); }
static const fx_rec *round_ev(const fed *f, size_t i) { return fx_log_app(&f->net.log[0], "round", i); }

/* The accuracy after `rounds` rounds of a deployment (every round must come). */
static float accuracy_after(const fed_opts *o, size_t rounds)
{
    fed f;
    fed_start(&f, o);
    run_rounds(&f, rounds, (uint64_t)(rounds + 2) * PERIOD_MS * MS);
    float acc = f32_of(round_ev(&f, rounds - 1), R_ACCURACY);
    fed_free(&f);
    return acc;
}

/* The centralized baseline through the same program: ONE client holding
 * all the training rows trains 40 epochs in one round (the configuration
 * of test_nn_engine's baseline), and the server evaluates the result. */
static float centralized_baseline(void)
{
    fed_opts o = {.clients = 1, .model_cfg = "{\"epochs\": 40}"};
    return accuracy_after(&o, 1);
}

static void test_federated_iid_digits_by_interval(void **state)
{
    (void)state;
    enum { ROUNDS = 20 };
    float baseline = centralized_baseline();
    fed f;
    fed_opts o = {.clients = N_CLIENTS, .partition = "iid"};
    fed_start(&f, &o);
    run_rounds(&f, ROUNDS, (uint64_t)(ROUNDS + 2) * PERIOD_MS * MS);
    const fx_rec *initial = fx_log_app(&f.net.log[0], "initial", 0);
    assert_non_null(initial); /* the bootstrap's digest: round 1 starts from it */
    uint64_t prev_after = initial->value->u.u64, samples = 0, prev_started = 0;
    for (size_t r = 0; r < ROUNDS; r++) {
        const fx_rec *ev = round_ev(&f, r);
        assert_int_equal(u64_of(ev, R_ROUND), r + 1);
        assert_int_equal(u64_of(ev, R_PARTICIPANTS), N_CLIENTS);
        samples = u64_of(ev, R_SAMPLES);
        assert_true(u64_of(ev, R_STARTED) <= u64_of(ev, R_COLLECTED));
        assert_true(u64_of(ev, R_COLLECTED) <= u64_of(ev, R_AGGREGATED));
        assert_true(u64_of(ev, R_AGGREGATED) <= u64_of(ev, R_FINISHED));
        if (prev_started) /* rounds start on the Interval: one per period */
            assert_int_equal(u64_of(ev, R_STARTED) - prev_started, PERIOD_MS * MS);
        prev_started = u64_of(ev, R_STARTED);
        /* each round sends the parameters the last one loaded */
        assert_true(u64_of(ev, R_BEFORE) == prev_after);
        prev_after = u64_of(ev, R_AFTER);
        assert_true(u64_of(ev, R_BEFORE) != u64_of(ev, R_AFTER));
    }
    /* each client reports its own rounds: samples, arrival, end of training */
    uint64_t trained = 0;
    for (int c = 1; c <= N_CLIENTS; c++) {
        const fx_rec *t = fx_log_app(&f.net.log[c], "trained", ROUNDS - 1);
        assert_non_null(t);
        assert_int_equal(t->value->u.list.n, 3);
        trained += t->value->u.list.items[0]->u.u64;
        assert_true(t->value->u.list.items[2]->u.u64 >= t->value->u.list.items[1]->u.u64);
    }
    assert_int_equal(trained, 5 * 1438); /* the shards add up to the training rows */
    const fx_rec *last = round_ev(&f, ROUNDS - 1);
    float acc = f32_of(last, R_ACCURACY);
    print_message("  digits, centralized baseline (one client, 40 epochs): %.2f%%; federated, "
                  "%d IID clients, FedAvg, 5 local epochs: %.2f%% after round 1, %.2f%% after "
                  "round %d (loss %.4f, %llu samples per round)\n",
                  100.0 * baseline, N_CLIENTS, 100.0 * f32_of(round_ev(&f, 0), R_ACCURACY),
                  100.0 * acc, ROUNDS, (double)f32_of(last, R_LOSS),
                  (unsigned long long)samples);
    assert_int_equal(samples, 5 * 1438); /* the 80% of digits, five epochs, over four shards */
    assert_true(baseline >= 0.95f);
    assert_true(acc >= baseline - 0.02f); /* within 2 points of the centralized baseline */
    /* every answer went into FedAvg as it landed, none waited for the rest */
    assert_true(bb_engine_counter(f.net.e[0], "responses.folded") >= ROUNDS * N_CLIENTS);
    fed_free(&f);
}

static void test_federated_non_iid_digits(void **state)
{
    (void)state;
    enum { ROUNDS = 20 };
    fed_opts o = {.clients = N_CLIENTS, .partition = "classes"}; /* 2 classes per client */
    float acc = accuracy_after(&o, ROUNDS);
    print_message("  digits, %d non-IID clients (2 classes each), FedAvg: %.2f%% after round %d\n",
                  N_CLIENTS, 100.0 * acc, ROUNDS);
    assert_true(acc > 0.5f); /* lower than IID, far above chance (10%) */
}

/* Client 0 answers every round with its update scaled by 1e6. */
static float poisoned(const char *aggregator, size_t rounds, size_t *completed)
{
    fed f;
    fed_opts o = {.clients = N_CLIENTS, .partition = "iid", .aggregator = aggregator,
                  .attacker_cfg = "{\"attack_update_scale\": 1e6}"};
    fed_start(&f, &o);
    *completed = advance(&f, rounds, (uint64_t)(rounds + 2) * PERIOD_MS * MS);
    float acc = *completed ? f32_of(round_ev(&f, *completed - 1), R_ACCURACY) : 0.0f;
    fed_free(&f);
    return acc;
}

static void test_federated_trimmed_mean_survives_a_poisoned_client(void **state)
{
    (void)state;
    enum { ROUNDS = 10 };
    size_t trimmed_rounds, fedavg_rounds;
    float trimmed = poisoned("agg::TrimmedMean", ROUNDS, &trimmed_rounds);
    float fedavg = poisoned("agg::FedAvg", ROUNDS, &fedavg_rounds);
    print_message("  one client scales its update by 1e6: TrimmedMean %.2f%% after %zu rounds, "
                  "FedAvg %.2f%% after %zu of %d rounds\n",
                  100.0 * trimmed, trimmed_rounds, 100.0 * fedavg, fedavg_rounds, ROUNDS);
    assert_int_equal(trimmed_rounds, ROUNDS);
    assert_true(trimmed >= 0.9f);
    assert_true(fedavg < 0.5f); /* collapsed (or its rounds fail) */
}

static void test_federated_hung_client_costs_a_deadline(void **state)
{
    (void)state;
    fed f;
    fed_opts o = {.clients = N_CLIENTS, .partition = "iid", .failure_threshold = 1};
    fed_start(&f, &o);
    run_rounds(&f, 2, 4 * PERIOD_MS * MS);
    /* the last client stops answering: it stays connected but is never polled
     * again, so what the server sends it is lost */
    bb_engine *hung = f.net.e[N_CLIENTS];
    fx_log hung_log = f.net.log[N_CLIENTS];
    memset(&f.net.log[N_CLIENTS], 0, sizeof f.net.log[N_CLIENTS]);
    f.net.n--;
    uint64_t t_hung = f.net.now;
    run_rounds(&f, 5, 12 * PERIOD_MS * MS);
    const fx_rec *r3 = round_ev(&f, 2);
    uint64_t waited = u64_of(r3, R_FINISHED) - u64_of(r3, R_STARTED);
    print_message("  a hung client: round 3 completed by quorum after %llu ms (deadline %d ms)\n",
                  (unsigned long long)(waited / MS), DEADLINE_MS);
    assert_int_equal(u64_of(r3, R_PARTICIPANTS), N_CLIENTS - 1);
    assert_true(waited >= DEADLINE_MS * MS && waited < (DEADLINE_MS + 200) * MS);
    assert_true(u64_of(r3, R_STARTED) >= t_hung);
    const fx_rec *down = fx_log_nth(&f.net.log[0], BB_STEP_PEER_DOWN, 0);
    assert_non_null(down);
    bb_peerid hp = fx_peer(1 + N_CLIENTS);
    assert_true(bb_peerid_equal(&down->peer, &hp));
    /* the peer is down: later rounds ask only the three, and need no deadline */
    for (size_t r = 3; r < 5; r++) {
        const fx_rec *ev = round_ev(&f, r);
        assert_int_equal(u64_of(ev, R_ROUND), r + 1);
        assert_int_equal(u64_of(ev, R_PARTICIPANTS), N_CLIENTS - 1);
        assert_true(u64_of(ev, R_FINISHED) - u64_of(ev, R_STARTED) < DEADLINE_MS * MS);
    }
    fx_log_free(&hung_log);
    bb_engine_free(hung);
    fed_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_federated_iid_digits_by_interval),
        cmocka_unit_test(test_federated_non_iid_digits),
        cmocka_unit_test(test_federated_trimmed_mean_survives_a_poisoned_client),
        cmocka_unit_test(test_federated_hung_client_costs_a_deadline),
    };
    return cmocka_run_group_tests(tests, NULL, pfx_group_teardown);
}
