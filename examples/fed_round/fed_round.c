/*
 * fed_round.c — records a federated round small enough for bbd's
 * integration tests and writes it to argv[1]. One invocation of Server is
 * one round:
 *
 *   Server                                            Client
 *     Model.Params ── Sample(2, of_class Client)
 *     SendReqBatched(params, peers, quorum 2) ─ "params" ─► RecvReq -> (params, req_id)
 *                                                         Model.LoadParameters(params)
 *                                                         Model.Train -> (params, n)
 *     RecvRespBatched(req_id) ◄──── response ─────────── SendResp(Bundle(params, n))
 *     Mean.Contribute(responses) -> Mean.Aggregate
 *     Model.LoadParameters(result); AppEmit("round", result)
 *
 * Components come from tests/plugins/bbd_test (bbdtest::Model, ::Mean,
 * ::Peers); each client's per-slot config (bbd.json "components" for slot
 * "local_model") sets its delta, sample count and training time. The two
 * classes name their model slots differently: bbc keeps one construction
 * state per slot name for the whole program.
 */
#include "bb/recorder.h"
#include "examples/record_main.h"

#define COHORT 2
#define QUORUM 2

static bb_module *record_server(bb_recorder *r)
{
    bb_module *m = bb_rec_class_module(r, "Server");
    bb_slot *model = bb_rec_concrete(m, BB_ROLE_MODEL, "model", "bbdtest::Model",
                                     "{\"init\":[0,0,0,0],\"delta\":0}", NULL);
    bb_slot *agg = bb_rec_concrete(m, BB_ROLE_AGGREGATOR, "aggregator", "bbdtest::Mean", "{}",
                                   NULL);
    bb_slot *sel = bb_rec_concrete(m, BB_ROLE_PEER_SELECTOR, "selector", "bbdtest::Peers",
                                   "{\"mode\":\"known\"}", NULL);
    bb_rec *g = bb_module_body(m);
    bb_val params = bb_role_model_params(g, model);
    bb_val peers = bb_role_peer_selector_sample(g, sel, COHORT, "Client");
    bb_val req_id, responses;
    bb_wire_send_req_batched(g, NULL, "params", params, peers, QUORUM, 0, &req_id, NULL);
    bb_wire_recv_resp_batched(g, NULL, req_id, NULL, &responses);
    bb_val contributed = bb_role_aggregator_contribute(g, agg, responses, BB_VAL_OMIT);
    bb_val global = bb_role_aggregator_aggregate(g, agg, contributed, NULL);
    bb_role_model_load_parameters(g, model, global);
    bb_sys_app_emit(g, global, "round");
    return m;
}

static bb_module *record_client(bb_recorder *r)
{
    bb_module *m = bb_rec_class_module(r, "Client");
    bb_slot *model = bb_rec_concrete(m, BB_ROLE_MODEL, "local_model", "bbdtest::Model",
                                     "{\"init\":[0,0,0,0],\"delta\":1}", NULL);
    bb_rec *g = bb_module_body(m);
    bb_val params, req_id;
    bb_wire_recv_req(g, NULL, "params", &BB_TYPE_TENSOR_F32, NULL, &params, &req_id);
    bb_val loaded = bb_role_model_load_parameters(g, model, params);
    bb_val update[2];
    bb_role_model_train(g, model, loaded, 1, &update[0], &update[1]);
    bb_sys_app_emit(g, update[0], "trained");
    bb_wire_send_resp(g, NULL, bb_rec_bundle(g, update, 2), BB_VAL_OMIT, req_id);
    return m;
}

static bb_module *record(bb_recorder *r)
{
    bb_module *root = bb_rec_module(r, "FedRound");
    bb_module *server = record_server(r);
    bb_module *client = record_client(r);
    bb_rec *g = bb_module_body(root);
    bb_call_build(bb_rec_call(g, server));
    bb_call_build(bb_rec_call(g, client));
    return root;
}

int main(int argc, char **argv) { return bb_example_main(argc, argv, record); }
