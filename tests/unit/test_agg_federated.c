/*
 * The federated round of examples/federated with the real components,
 * compiled by the real compiler against the real plugins and run by four
 * in-process engines — one Server, three Clients — over the in-memory
 * network of tests/unit/support/engine_fixtures.h: the server samples the
 * connected clients (peers::Connected, of_class Client), each client loads
 * the global parameters and trains nn::Mlp on its own third of iris
 * (data::Csv shards), the server averages the answers (agg::FedAvg over the
 * ResponseBatch of Composite(params, num_samples)), loads the result and
 * evaluates it on the held-out rows no client reads (EvaluateMetrics).
 *
 * Each round here is one invocation of Server (a round without the
 * example's Interval / Limit prelude): the invoke path. test_federated.c runs
 * the example itself, its rounds started by the Interval.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/plugin_loader.h"
#include "bb/recorder.h"
#include "bbc/compiler.h"
#include "support/engine_fixtures.h"
#include "support/plugin_fixtures.h"

#define N_CLIENTS 3
#define ROUNDS 30
#define MLP_CONFIG "{\"layers\":[4,16,3],\"learning_rate\":0.05,\"batch_size\":16,\"seed\":7}"

static bb_module *record_server(bb_recorder *r)
{
    bb_module *m = bb_rec_class_module(r, "Server");
    bb_slot *model = bb_rec_concrete(m, BB_ROLE_MODEL, "model", "nn::Mlp", MLP_CONFIG, NULL);
    bb_slot *agg = bb_rec_concrete(m, BB_ROLE_AGGREGATOR, "aggregator", "agg::FedAvg", "{}", NULL);
    bb_slot *sel = bb_rec_concrete(m, BB_ROLE_PEER_SELECTOR, "selector", "peers::Connected",
                                   "{}", NULL);
    bb_rec_concrete(m, BB_ROLE_DATA_SOURCE, "data", "data::Csv", "{}", NULL);
    bb_rec *g = bb_module_body(m);
    bb_val params = bb_role_model_params(g, model);
    bb_val peers = bb_role_peer_selector_sample(g, sel, N_CLIENTS, "Client");
    bb_val req_id, responses;
    bb_wire_send_req_batched(g, NULL, "params", params, peers, 2, 0, &req_id, NULL);
    bb_wire_recv_resp_batched(g, NULL, req_id, NULL, &responses);
    bb_val contributed = bb_role_aggregator_contribute(g, agg, responses, BB_VAL_OMIT);
    bb_val meta, global = bb_role_aggregator_aggregate(g, agg, contributed, &meta);
    bb_val loaded = bb_role_model_load_parameters(g, model, global);
    bb_val metric[3];
    bb_role_model_evaluate_metrics(g, model, loaded, &metric[0], &metric[1]);
    metric[2] = meta;
    bb_sys_app_emit(g, bb_rec_bundle(g, metric, 3), "round");
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

static bb_model *compile_round(void)
{
    bb_recorder *r = bb_recorder_new("user.app");
    assert_non_null(r);
    bb_module *root = bb_rec_module(r, "Federated");
    bb_module *server = record_server(r), *client = record_client(r);
    bb_rec *g = bb_module_body(root);
    bb_call_build(bb_rec_call(g, server));
    bb_call_build(bb_rec_call(g, client));
    bb_model *in = NULL, *out = NULL;
    bb_error e = {0};
    if (bb_recorder_build(r, root, &in, &e))
        fail_msg("record: %s", e.msg);
    bb_recorder_free(r);
    bb_type_source ts;
    bb_type_source_from_loader(&ts, pfx_loader(), NULL);
    bbc_options o;
    bbc_options_init(&o);
    bbc_error err = {0};
    if (bbc_compile(in, &o, NULL, &ts, NULL, 0, &out, &err))
        fail_msg("compile: %s: %s", err.pass, err.msg);
    bb_model_free(in);
    return out;
}

static bb_engine *node(fx_net *net, uint8_t seed, bb_model *m, const char *target,
                       const pfx_slot_config *cfg, size_t n_cfg)
{
    bb_error err = {0};
    bb_engine *e = pfx_net_node(net, seed, m, target, cfg, n_cfg, NULL, &err);
    if (!e)
        fail_msg("%s", err.msg);
    return e;
}

static void know(bb_engine *e, uint8_t seed) { assert_int_equal(fx_know(e, seed), BB_OK); }

static void test_federated_round_learns_iris(void **state)
{
    (void)state;
    if (!pfx_fetch_data())
        fail_msg("scripts/fetch-data could not provide data/iris.csv");
    bb_model *m = compile_round();
    const char *iris = pfx_repo_path("data/iris.csv");
    /* every node reads the same file with the same split: the server the held-out 20%,
     * client i its third of the other 80% */
    char server_data[512], client_data[N_CLIENTS][512];
    const char *common = "\"skip_rows\": 1, \"holdout\": 0.2, \"split_seed\": 5, "
                         "\"normalization\": \"standardize\", \"partition_seed\": 5";
    snprintf(server_data, sizeof server_data, "{\"path\": \"%s\", %s, \"part\": \"holdout\"}",
             iris, common);
    fx_net net = {0};
    pfx_slot_config scfg[1] = {{"data", server_data}};
    bb_engine *server = node(&net, 1, m, "Server", scfg, 1);
    pfx_slot_config ccfg[N_CLIENTS][2];
    for (int i = 0; i < N_CLIENTS; i++) {
        snprintf(client_data[i], sizeof client_data[i],
                 "{\"path\": \"%s\", %s, \"shard_count\": %d, \"shard_index\": %d, \"seed\": %d}",
                 iris, common, N_CLIENTS, i, i);
        ccfg[i][0] = (pfx_slot_config){"data", client_data[i]};
        /* the node config tunes the recorded model: 2 local epochs, not the recorded 1 */
        ccfg[i][1] = (pfx_slot_config){"model", "{\"epochs\": 2}"};
        bb_engine *c = node(&net, (uint8_t)(2 + i), m, "Client", ccfg[i], 2);
        know(c, 1);
        know(server, (uint8_t)(2 + i));
        bb_peerid cp = fx_peer((uint8_t)(2 + i));
        const char *t = "Client";
        assert_int_equal(bb_engine_peer_connected(server, &cp, &t, 1, NULL), BB_OK);
    }
    /* rounds: one invocation of Server each, run until the network is quiet */
    float first = -1, last = -1;
    uint64_t samples = 0;
    for (int r = 0; r < ROUNDS; r++) {
        net.now = (uint64_t)(r + 1) * 1000000000ULL;
        bb_error err = {0};
        if (bb_engine_invoke(server, "Server", NULL, 0, NULL, &err))
            fail_msg("invoke: %s", err.msg);
        fx_net_run(&net, 500);
        const fx_rec *ev = fx_log_app(&net.log[0], "round", (size_t)r);
        if (!ev)
            break;
        assert_int_equal(ev->value->type->kind, BB_VK_COMPOSITE);
        assert_int_equal(ev->value->u.list.n, 3);
        float acc = *bb_tensor_f32(ev->value->u.list.items[1]);
        samples = ev->value->u.list.items[2]->u.u64;
        first = first < 0 ? acc : first;
        last = acc;
    }
    for (int i = 0; i <= N_CLIENTS; i++)
        if (fx_log_count(&net.log[i], BB_STEP_OP_FAILED))
            fail_msg("node %d: %s failed: %s", i, fx_log_nth(&net.log[i], BB_STEP_OP_FAILED, 0)->b,
                     fx_log_nth(&net.log[i], BB_STEP_OP_FAILED, 0)->c);
    size_t rounds = fx_log_count(&net.log[0], BB_STEP_APP_EVENT);
    print_message("  federated iris, %d clients: held-out accuracy %.1f%% after round 1, %.1f%% "
                  "after round %zu (FedAvg weight %llu samples per round)\n",
                  N_CLIENTS, 100.0 * first, 100.0 * last, rounds, (unsigned long long)samples);
    assert_int_equal(rounds, ROUNDS);
    assert_int_equal(samples, 2 * 120); /* the 80% of iris in thirds, two epochs each */
    assert_true(last >= 0.9f);
    fx_net_free(&net);
    bb_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_federated_round_learns_iris),
    };
    return cmocka_run_group_tests(tests, NULL, pfx_group_teardown);
}
