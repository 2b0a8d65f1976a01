/*
 * bbc_programs.h — the two programs the compiler tests compile with the
 * fixture component types (bbc_fixture.h), recorded in-process:
 *
 *   fx_federated()      the federated round of DESIGN.md in its plain form:
 *                       classes Server and Client, a user-authored request /
 *                       response pair on port "params", role ops only
 *   fx_split_learning() the SplitLearning module of IR_AND_DSL.md Part 9,
 *                       node for node (one @self partition)
 *
 * examples/ records the same programs for the real plugins and evolves with
 * them (atomic opsets, more knobs); these stay put, so the pass and driver
 * tests assert exact shapes. tests/integration/bbc_compiled.sh compiles the
 * real examples with the real plugins. Header-only (static functions).
 */
#ifndef BBC_PROGRAMS_H
#define BBC_PROGRAMS_H

#include <stdio.h>
#include <stdlib.h>

#include "bb/model_io.h"
#include "bb/recorder.h"

/* split_learning leaves its backend slot open: this binding fills it. */
#define FX_SPLIT_LEARNING_BINDING "backend=cpu::CpuBackend"

#define FX_MLP_CONFIG "{\"layers\":[4,16,3],\"learning_rate\":0.05,\"batch_size\":16,\"seed\":7}"

static bb_model *fx_build(bb_recorder *r, bb_module *root, bb_error *err)
{
    bb_model *m = NULL;
    if (!root || bb_recorder_build(r, root, &m, err) != BB_OK)
        m = NULL;
    bb_recorder_free(r);
    return m;
}

static bb_module *fx_federated_server(bb_recorder *r)
{
    bb_module *m = bb_rec_class_module(r, "Server");
    bb_rec_concrete(m, BB_ROLE_BACKEND, "backend", "cpu::CpuBackend", "{}", NULL);
    bb_slot *model = bb_rec_concrete(m, BB_ROLE_MODEL, "model", "nn::Mlp", FX_MLP_CONFIG, NULL);
    bb_slot *agg = bb_rec_concrete(m, BB_ROLE_AGGREGATOR, "aggregator", "agg::FedAvg", "{}", NULL);
    bb_slot *selector = bb_rec_concrete(m, BB_ROLE_PEER_SELECTOR, "selector", "peers::Connected",
                                        "{\"target\":\"Client\"}", NULL);
    bb_rec_concrete(m, BB_ROLE_DATA_SOURCE, "data", "data::Csv", "{}", NULL);

    bb_rec *g = bb_module_body(m);
    bb_val tick = bb_sys_interval(g, 5000000000LL);
    bb_val go = bb_sys_limit_acquire(g, tick, "round", 1);
    bb_val params = bb_sys_gate(g, bb_role_model_params(g, model), go);
    bb_val peers = bb_role_peer_selector_sample(g, selector, 3, "Client");
    bb_val req_id, responses;
    bb_wire_send_req_batched(g, NULL, "params", params, peers, 2, 0, &req_id, NULL);
    bb_wire_recv_resp_batched(g, NULL, req_id, NULL, &responses);
    bb_val contributed = bb_role_aggregator_contribute(g, agg, responses, BB_VAL_OMIT);
    bb_val global = bb_role_aggregator_aggregate(g, agg, contributed, NULL);
    bb_val loaded = bb_role_model_load_parameters(g, model, global);
    bb_val metric[2];
    bb_role_model_evaluate_metrics(g, model, loaded, &metric[0], &metric[1]);
    bb_val metrics = bb_rec_bundle(g, metric, 2);
    bb_sys_app_emit(g, metrics, "round");
    bb_sys_limit_release(g, metrics, "round");

    bb_rec *boot = bb_module_bootstrap(m);
    bb_sys_app_emit(boot, bb_role_model_params(boot, model), "initial_params");
    return m;
}

static bb_module *fx_federated_client(bb_recorder *r)
{
    bb_module *m = bb_rec_class_module(r, "Client");
    bb_rec_concrete(m, BB_ROLE_BACKEND, "backend", "cpu::CpuBackend", "{}", NULL);
    bb_slot *model = bb_rec_concrete(m, BB_ROLE_MODEL, "model", "nn::Mlp", FX_MLP_CONFIG, NULL);
    bb_rec_concrete(m, BB_ROLE_DATA_SOURCE, "data", "data::Csv", "{}", NULL);

    bb_rec *g = bb_module_body(m);
    bb_val params, req_id;
    bb_wire_recv_req(g, NULL, "params", &BB_TYPE_TENSOR_F32, NULL, &params, &req_id);
    bb_val loaded = bb_role_model_load_parameters(g, model, params);
    bb_val update[2];
    bb_role_model_train(g, model, loaded, 1, &update[0], &update[1]);
    bb_val reply = bb_rec_bundle(g, update, 2);
    bb_wire_send_resp(g, NULL, reply, BB_VAL_OMIT, req_id);
    return m;
}

static __attribute__((unused)) bb_model *fx_federated(bb_error *err)
{
    bb_recorder *r = bb_recorder_new("user.app");
    bb_module *root = bb_rec_module(r, "Federated");
    bb_module *server = fx_federated_server(r);
    bb_module *client = fx_federated_client(r);
    bb_rec *g = bb_module_body(root);
    bb_call_build(bb_rec_call(g, server));
    bb_call_build(bb_rec_call(g, client));
    return fx_build(r, root, err);
}

static __attribute__((unused)) bb_model *fx_split_learning(bb_error *err)
{
    bb_recorder *r = bb_recorder_new("user.app");
    bb_module *m = bb_rec_module(r, "SplitLearning");
    bb_rec_generic(m, BB_ROLE_BACKEND, "backend");
    bb_slot *server = bb_rec_concrete(m, BB_ROLE_PROTOCOL, "network_server",
                                      "framework_wire::NoBarrierOneShot", "{\"barrier\":false}",
                                      NULL);
    bb_slot *client = bb_rec_concrete(m, BB_ROLE_PROTOCOL, "network_client",
                                      "framework_wire::BarrierNetworkReqResp",
                                      "{\"barrier\":true}", NULL);
    bb_slot *model = bb_rec_concrete(m, BB_ROLE_MODEL, "model", "burn_integration::BurnModel",
                                     "{\"layers\":[64,32],\"learning_rate\":0.01}", NULL);
    bb_slot *codec = bb_rec_concrete(m, BB_ROLE_CODEC, "codec",
                                     "framework_compressors::ProductQuantization",
                                     "{\"m\":8,\"n\":256}", NULL);
    bb_slot *gossip = bb_rec_concrete(m, BB_ROLE_PEER_SELECTOR, "gossip",
                                      "framework_peer_selector::Cyclone",
                                      "{\"c\":20,\"h\":1,\"s\":10}", NULL);
    bb_slot *aggregator = bb_rec_concrete(m, BB_ROLE_AGGREGATOR, "aggregator",
                                          "framework_aggregators::WeightAggregator", "{}", NULL);

    bb_rec *g = bb_module_body(m);
    bb_val enc_in, req_id, batched_grads;
    bb_wire_recv(g, server, NULL, &BB_TYPE_TENSOR_F32, NULL, &enc_in);
    bb_val dec_in = bb_role_compressor_decompress(g, codec, enc_in);
    bb_val dec_out = bb_role_model_forward(g, model, dec_in);
    bb_val enc_out = bb_role_compressor_compress(g, codec, dec_out);
    bb_val peers = bb_role_peer_selector_sample(g, gossip, 5, NULL);
    bb_wire_send_req_batched(g, client, NULL, enc_out, peers, 0, 0, &req_id, NULL);
    bb_wire_recv_resp_batched(g, client, req_id, NULL, &batched_grads);
    bb_val dec_grads = bb_role_compressor_decompress(g, codec, batched_grads);
    bb_val avg_grad = bb_role_aggregator_aggregate(g, aggregator, dec_grads, NULL);
    bb_role_model_step(g, model, avg_grad);
    bb_role_model_backward(g, model, avg_grad);
    return fx_build(r, m, err);
}

/* A fixture program by name ("federated", "split_learning"), or NULL. */
static __attribute__((unused)) bb_model *fx_program(const char *name, bb_error *err)
{
    if (strcmp(name, "federated") == 0)
        return fx_federated(err);
    if (strcmp(name, "split_learning") == 0)
        return fx_split_learning(err);
    bb_error_set(err, BB_EINVAL, "no fixture program '%s'", name);
    return NULL;
}

/* A fixture program as bbc reads it: recorded, then saved and loaded back
 * (a model of its own, as from a file), or NULL (err says why). */
static __attribute__((unused)) bb_model *fx_program_loaded(const char *name, bb_error *err)
{
    bb_model *rec = fx_program(name, err), *m = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    if (rec && bb_model_save_mem(rec, &buf, &len, err) == BB_OK &&
        bb_model_load_mem(buf, len, name, &m, err) != BB_OK)
        m = NULL;
    free(buf);
    bb_model_free(rec);
    return m;
}

#endif
