/*
 * federated.c — records the federated round of DESIGN.md ("The federated
 * round, as a graph") and writes it to argv[1].
 *
 * Root module "Federated" composes one class module per peer class:
 *
 * Server                                            Client
 *   Interval(period) -> Limit.Acquire("round", 1)
 *   Gate(Model.Params, acquired)
 *   Sample(K, of_class Client)
 *   SendReqBatched(params, peers) --- port "params" ---> RecvReq -> (params, req_id)
 *                                                        Model.LoadParameters(params)
 *                                                        Model.Train(E epochs) -> (params, n)
 *                                                        Bundle(params, n)
 *   RecvRespBatched(req_id) <------- response -------- SendResp(bundle, req_id)
 *   Aggregator.Contribute(responses) -> Aggregate -> Model.LoadParameters(result)
 *   Model.EvaluateMetrics -> Bundle(loss, accuracy) -> AppEmit("round")
 *   Limit.Release("round")
 * Server bootstrap: Model.Params -> AppEmit("initial_params").
 *
 * Wire shape: the request/response pair is user-authored (SendReqBatched /
 * RecvReq / SendResp / RecvRespBatched), paired by the port name "params"
 * and by req_id; the destination class comes from the selector's of_class
 * tag. "Contribute each": Contribute takes the whole ResponseBatch, whose
 * elements are Composite(params, num_samples); the aggregator contributes
 * each element with its num_samples as weight.
 */
#include <stdio.h>

#include "bb/recorder.h"

#define ROUND_PERIOD_NS 5000000000LL /* one round every 5 s */
#define COHORT 3                     /* clients asked per round (K) */
#define QUORUM 2                     /* answers needed at the deadline */
#define LOCAL_EPOCHS 1

/* Component configs (construction state, JSON). */
#define MLP_CONFIG "{\"layers\":[4,16,3],\"learning_rate\":0.05,\"batch_size\":16,\"seed\":7}"
#define FEDAVG_CONFIG "{}"
#define CSV_CONFIG "{}"
#define CONNECTED_CONFIG "{\"target\":\"Client\"}"
#define CPU_CONFIG "{}"

static bb_module *record_server(bb_recorder *r)
{
    bb_module *m = bb_rec_class_module(r, "Server");
    bb_rec_concrete(m, BB_ROLE_BACKEND, "backend", "cpu::CpuBackend", CPU_CONFIG, NULL);
    bb_slot *model = bb_rec_concrete(m, BB_ROLE_MODEL, "model", "nn::Mlp", MLP_CONFIG, NULL);
    bb_slot *agg =
        bb_rec_concrete(m, BB_ROLE_AGGREGATOR, "aggregator", "agg::FedAvg", FEDAVG_CONFIG, NULL);
    bb_slot *selector = bb_rec_concrete(m, BB_ROLE_PEER_SELECTOR, "selector",
                                        "peers::Connected", CONNECTED_CONFIG, NULL);
    /* The held-out evaluation set EvaluateMetrics reads. */
    bb_rec_concrete(m, BB_ROLE_DATA_SOURCE, "data", "data::Csv", CSV_CONFIG, NULL);

    bb_rec *g = bb_module_body(m);
    bb_val tick = bb_sys_interval(g, ROUND_PERIOD_NS);
    bb_val go = bb_sys_limit_acquire(g, tick, "round", 1);
    bb_val params = bb_sys_gate(g, bb_role_model_params(g, model), go);
    bb_val peers = bb_role_peer_selector_sample(g, selector, COHORT, "Client");
    bb_val req_id, responses;
    bb_wire_send_req_batched(g, NULL, "params", params, peers, QUORUM, &req_id, NULL);
    bb_wire_recv_resp_batched(g, NULL, req_id, NULL, &responses);
    bb_val contributed = bb_role_aggregator_contribute(g, agg, responses, BB_VAL_OMIT);
    bb_val global = bb_role_aggregator_aggregate(g, agg, contributed, NULL);
    bb_val loaded = bb_role_model_load_parameters(g, model, global);
    bb_val metric[2];
    bb_role_model_evaluate_metrics(g, model, loaded, &metric[0], &metric[1]);
    bb_val metrics = bb_rec_bundle(g, metric, 2);
    bb_sys_app_emit(g, metrics, "round");
    bb_sys_limit_release(g, metrics, "round");

    /* Bootstrap: the initial global parameters come from the model. */
    bb_rec *boot = bb_module_bootstrap(m);
    bb_sys_app_emit(boot, bb_role_model_params(boot, model), "initial_params");
    return m;
}

static bb_module *record_client(bb_recorder *r)
{
    bb_module *m = bb_rec_class_module(r, "Client");
    bb_rec_concrete(m, BB_ROLE_BACKEND, "backend", "cpu::CpuBackend", CPU_CONFIG, NULL);
    bb_slot *model = bb_rec_concrete(m, BB_ROLE_MODEL, "model", "nn::Mlp", MLP_CONFIG, NULL);
    /* The local training shard Train reads. */
    bb_rec_concrete(m, BB_ROLE_DATA_SOURCE, "data", "data::Csv", CSV_CONFIG, NULL);

    bb_rec *g = bb_module_body(m);
    bb_val params, req_id;
    bb_wire_recv_req(g, NULL, "params", &BB_TYPE_TENSOR_F32, NULL, &params, &req_id);
    bb_val loaded = bb_role_model_load_parameters(g, model, params);
    bb_val update[2];
    bb_role_model_train(g, model, loaded, LOCAL_EPOCHS, &update[0], &update[1]);
    bb_val reply = bb_rec_bundle(g, update, 2);
    bb_wire_send_resp(g, NULL, reply, BB_VAL_OMIT, req_id);
    return m;
}

static bb_module *record(bb_recorder *r)
{
    bb_module *root = bb_rec_module(r, "Federated");
    bb_module *server = record_server(r);
    bb_module *client = record_client(r);
    bb_rec *g = bb_module_body(root);
    bb_call_build(bb_rec_call(g, server));
    bb_call_build(bb_rec_call(g, client));
    return root;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT.onnx\n", argv[0]);
        return 2;
    }
    bb_recorder *r = bb_recorder_new("user.app");
    if (!r) {
        fprintf(stderr, "%s: error: out of memory\n", argv[0]);
        return 1;
    }
    bb_error err = {0};
    int rc = bb_recorder_write(r, record(r), argv[1], &err);
    bb_recorder_free(r);
    if (rc) {
        fprintf(stderr, "%s: error: %s\n", argv[0], err.msg);
        return 1;
    }
    return 0;
}
