/*
 * federated.c — records the federated round of DESIGN.md ("The federated
 * round, as a graph") and writes it to OUT.onnx: one program, two peer
 * classes, compiled once by bbc and run by one bbd per node.
 *
 * Server (one round = one execution started by the Interval)
 *   tick  = Interval(period)
 *   go    = Limit.Acquire(tick, "round", 1)      one round at a time
 *   t0    = Clock(go)
 *   sent  = Model.ParamsOn(go)                  the global parameters now
 *   set   = Aggregator.SetModel(sent)            what a server optimizer steps from
 *   peers = Sample(K, of_class Client)           peers::Connected
 *   req   = SendReqBatched(sent, peers, quorum)  port "params", round deadline
 *   resp  = RecvRespBatched(req)    all K answered, or >= quorum at the deadline
 *   n     = Aggregator.Contribute(resp)           contributions in the round
 *   (global, samples) = Aggregator.Aggregate(Bundle(n, set[, names]))
 *   round = Aggregator.Rounds(global)            survives a restart (snapshot)
 *   Model.LoadParameters(global) -> Model.EvaluateMetrics -> (loss, accuracy)
 *   t1    = Clock(accuracy)
 *   AppEmit("round", Bundle(round, participants n, samples, loss, accuracy,
 *                           t0, t1, digest before, digest after,
 *                           Clock when the answers were in, Clock after Aggregate))
 *   Limit.Release("round")
 * Server, with --model nn::Onnx, before each Aggregate:
 *   names = Aggregator.SetParamNames(Model.ParamNames(go))   a server optimizer
 *           leaves BatchNormalization's running statistics at the round's mean
 * and on its input "export" (a Trigger):
 *   AppEmit("model", Model.ExportOnnx)           the global model as plain ONNX
 *   (bbctl event Server export=null --wait model --output model.onnx)
 * Server bootstrap: AppEmit("initial", digest of the initial parameters).
 *
 * Client (one execution per inbound request)
 *   (params, req) = RecvReq("params") -> Model.LoadParameters(params)
 *   (params, num_samples) = Model.Train(E epochs on its "data" shard)
 *   SendResp(Bundle(params, num_samples), req)
 *   AppEmit("trained", Bundle(num_samples, Clock on arrival, Clock after Train))
 *
 * With --codec TYPE a client sends its update through a codec: the
 * difference trained - received (ai.onnx Sub on a cpu::CpuBackend slot),
 * compressed; the server decompresses the batch (DecompressBatch), FedAvg
 * averages the updates and Model.ApplyDelta adds the mean to the global
 * parameters instead of loading it. A TopK codec keeps each client's
 * unsent residual for its next round (error feedback). The server
 * optimizers take parameters, not updates (their pseudo-gradient is the
 * mean minus the global model), so --codec refuses them.
 *
 * Knobs (argv, so no C is edited): --clients K, --quorum FRACTION (of K,
 * rounded up), --period-ms, --deadline-ms (authored on SendReqBatched as
 * deadline_ns: bbc keeps an authored deadline), --epochs E (the Train
 * attribute; a node's "model": {"epochs": N} overrides it), --aggregator
 * TYPE, --data TYPE, --model TYPE, and the construction states recorded for
 * the three (--model-config, --aggregator-config, --data-config JSON);
 * --discovery connected|registry (registry: a third class, Registry, keeps a
 * peers::GlobalRegistry; every node announces itself there and the server
 * samples its clients from it, so no node needs a --peer); --codec TYPE.
 * Everything else a node needs — the data file and its shard, the
 * selector's target, FedProx's mu, a server optimizer's learning rate — is
 * per-slot JSON config of each bbd (bbd.json(5) "components"), over the
 * construction states recorded here.
 *
 * The model's own ops (ParamsOn, ParamsDigest) are in its atomic domain,
 * "bb-<crate>.<Type>.atomic" (IR_AND_DSL.md 5c.1): nn::Mlp's is
 * bb-nn.Mlp.atomic, so another Model type that serves the same two ops in
 * its own domain (nn::Onnx: bb-nn.Onnx.atomic) binds with --model.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/recorder.h"
#include "examples/record_main.h"

#define AGG_ATOMIC "bb-agg.Aggregator.atomic"
#define CODEC_ATOMIC "bb-codec.Codec.atomic"

/* The digits MLP of the centralized baseline (tests/unit/test_nn_engine.c). */
#define MLP_CONFIG                                                                             \
    "{\"layers\":[64,32,10],\"activation\":\"relu\",\"optimizer\":\"adam\","                  \
    "\"learning_rate\":0.003,\"batch_size\":32,\"seed\":1}"
/* What every node's data source shares: the same held-out 20%, the same
 * normalization. Each node's config adds its file, part and shard. */
#define DATA_CONFIG                                                                            \
    "{\"holdout\":0.2,\"split_seed\":0,\"normalization\":\"min-max\",\"batch_size\":32}"
#define CONNECTED_CONFIG "{\"target\":\"Client\"}"
#define REGISTRY "peers::GlobalRegistry"

typedef struct fed_knobs {
    long clients;        /* K: clients asked per round */
    double quorum;       /* fraction of K that must answer by the deadline */
    long period_ms;      /* one round every period */
    long deadline_ms;    /* a round's answers are awaited this long */
    long epochs;         /* local epochs per round */
    const char *aggregator, *aggregator_config; /* config NULL: by type */
    const char *data, *data_config;
    const char *model, *model_config;
    char model_atomic[160]; /* the model's own ops' domain */
    bool registry;          /* --discovery registry: the server finds its clients there */
    const char *codec;      /* the clients' updates go through it; NULL: parameters, f32 */
} fed_knobs;

/* The selector slot: peers::Connected (the clients that connected, given
 * the server as --peer), or with --discovery registry the registry's
 * client, declared in every class so each node's partition binds it (and
 * announces itself); where the registry is, is each node's config. */
static bb_slot *declare_selector(bb_module *m, const fed_knobs *k)
{
    return k->registry
               ? bb_rec_concrete(m, BB_ROLE_PEER_SELECTOR, "selector", REGISTRY, "{}", NULL)
               : bb_rec_concrete(m, BB_ROLE_PEER_SELECTOR, "selector", "peers::Connected",
                                 CONNECTED_CONFIG, NULL);
}

static long quorum_of(const fed_knobs *k)
{
    long q = (long)ceil(k->quorum * (double)k->clients - 1e-9);
    return q < 1 ? 1 : q > k->clients ? k->clients : q;
}

/* One op of a component's own (atomic) domain, with one output. */
static bb_val ext_op(bb_rec *g, bb_slot *slot, const char *domain, const char *op, bb_val in,
                     const bb_type_node *out_type)
{
    bb_val out = BB_VAL_NONE;
    bb_rec_op(g, slot, domain, op, &in, 1, NULL, 0, &out_type, &out, 1);
    return out;
}

static bb_module *record_server(bb_recorder *r, const fed_knobs *k)
{
    bb_module *m = bb_rec_class_module(r, "Server");
    bb_slot *model =
        bb_rec_concrete(m, BB_ROLE_MODEL, "model", k->model, k->model_config, NULL);
    const char *agg_config = k->aggregator_config          ? k->aggregator_config
                             : strcmp(k->aggregator, "agg::TrimmedMean") == 0
                                 ? "{\"trim\":0.25}" /* one of four cut at each end */
                                 : "{}";
    bb_slot *agg =
        bb_rec_concrete(m, BB_ROLE_AGGREGATOR, "aggregator", k->aggregator, agg_config, NULL);
    bb_slot *selector = declare_selector(m, k);
    /* The held-out evaluation set EvaluateMetrics reads. */
    bb_rec_concrete(m, BB_ROLE_DATA_SOURCE, "data", k->data, k->data_config, NULL);
    bb_slot *codec = k->codec ? bb_rec_concrete(m, BB_ROLE_CODEC, "codec", k->codec, "{}", NULL)
                              : NULL;

    bb_rec *g = bb_module_body(m);
    bb_val tick = bb_sys_interval(g, (int64_t)k->period_ms * 1000000);
    bb_val go = bb_sys_limit_acquire(g, tick, "round", 1);
    bb_val started = bb_sys_clock(g, go);
    bb_val before = ext_op(g, model, k->model_atomic, "ParamsDigest", go, &BB_TYPE_U64);
    bb_val params = ext_op(g, model, k->model_atomic, "ParamsOn", go, &BB_TYPE_TENSOR_F32);
    /* a server optimizer steps from the model the clients start from */
    bb_val set = ext_op(g, agg, AGG_ATOMIC, "SetModel", params, &BB_TYPE_TRIGGER);
    bb_val peers = bb_role_peer_selector_sample(g, selector, k->clients, "Client");
    bb_val req_id, responses;
    bb_wire_send_req_batched(g, NULL, "params", params, peers, quorum_of(k),
                             (int64_t)k->deadline_ms * 1000000, &req_id, NULL);
    bb_wire_recv_resp_batched(g, NULL, req_id, NULL, &responses);
    if (codec) /* the clients' compressed updates, decoded */
        responses = ext_op(g, codec, CODEC_ATOMIC, "DecompressBatch", responses,
                           &BB_TYPE_RESPONSE_BATCH);
    bb_val collected = bb_sys_clock(g, responses);
    bb_val participants = bb_role_aggregator_contribute(g, agg, responses, BB_VAL_OMIT);
    /* the contributions are in, the model is set (and, for nn::Onnx, which
     * of its coordinates are trained) */
    bb_val ready[3] = {participants, set};
    size_t n_ready = 2;
    if (strcmp(k->model, "nn::Onnx") == 0)
        ready[n_ready++] =
            ext_op(g, agg, AGG_ATOMIC, "SetParamNames",
                   ext_op(g, model, k->model_atomic, "ParamNames", go, &BB_TYPE_BYTES),
                   &BB_TYPE_TRIGGER);
    bb_val samples,
        global = bb_role_aggregator_aggregate(g, agg, bb_rec_bundle(g, ready, n_ready), &samples);
    bb_val aggregated = bb_sys_clock(g, global);
    bb_val round = ext_op(g, agg, AGG_ATOMIC, "Rounds", global, &BB_TYPE_U64);
    bb_val loaded = codec ? bb_role_model_apply_delta(g, model, global) /* the mean update */
                          : bb_role_model_load_parameters(g, model, global);
    bb_val loss, accuracy;
    bb_role_model_evaluate_metrics(g, model, loaded, &loss, &accuracy);
    bb_val after = ext_op(g, model, k->model_atomic, "ParamsDigest", loaded, &BB_TYPE_U64);
    bb_val finished = bb_sys_clock(g, accuracy);
    bb_val report[] = {round,   participants, samples, loss,      accuracy,  started,
                       finished, before,      after,   collected, aggregated};
    bb_val metrics = bb_rec_bundle(g, report, sizeof report / sizeof *report);
    bb_sys_app_emit(g, metrics, "round");
    bb_sys_limit_release(g, metrics, "round");
    /* nn::Onnx: the global model as a plain ONNX file, on request */
    if (strcmp(k->model, "nn::Onnx") == 0) {
        bb_val want = bb_rec_input(g, "export", &BB_TYPE_TRIGGER);
        bb_sys_app_emit(g, ext_op(g, model, k->model_atomic, "ExportOnnx", want, &BB_TYPE_BYTES),
                        "model");
    }

    /* Bootstrap: which initial parameters this server starts from. */
    bb_rec *boot = bb_module_bootstrap(m);
    bb_val initial = bb_role_model_params(boot, model);
    bb_sys_app_emit(boot,
                    ext_op(boot, model, k->model_atomic, "ParamsDigest", initial, &BB_TYPE_U64),
                    "initial");
    return m;
}

static bb_module *record_client(bb_recorder *r, const fed_knobs *k)
{
    bb_module *m = bb_rec_class_module(r, "Client");
    if (k->registry)
        declare_selector(m, k); /* the client announces itself to the registry */
    bb_slot *model =
        bb_rec_concrete(m, BB_ROLE_MODEL, "model", k->model, k->model_config, NULL);
    /* The local training shard Train reads. */
    bb_rec_concrete(m, BB_ROLE_DATA_SOURCE, "data", k->data, k->data_config, NULL);
    bb_slot *codec = k->codec ? bb_rec_concrete(m, BB_ROLE_CODEC, "codec", k->codec, "{}", NULL)
                              : NULL;
    bb_slot *cpu = k->codec ? bb_rec_concrete(m, BB_ROLE_BACKEND, "backend", "cpu::CpuBackend",
                                              "{}", NULL)
                            : NULL;

    bb_rec *g = bb_module_body(m);
    bb_val params, req_id;
    bb_wire_recv_req(g, NULL, "params", &BB_TYPE_TENSOR_F32, NULL, &params, &req_id);
    bb_val received = bb_sys_clock(g, params);
    bb_val loaded = bb_role_model_load_parameters(g, model, params);
    bb_val update[2], sent[2];
    bb_role_model_train(g, model, loaded, k->epochs, &update[0], &update[1]);
    sent[0] = codec ? bb_role_compressor_compress(g, codec, bb_onnx_sub(g, cpu, update[0], params))
                    : update[0];
    sent[1] = update[1];
    bb_wire_send_resp(g, NULL, bb_rec_bundle(g, sent, 2), BB_VAL_OMIT, req_id);
    /* the client's own record of its round: when the parameters came, when
     * its training ended (where a round's time goes, seen from a client) */
    bb_val local[] = {update[1], received, bb_sys_clock(g, update[1])};
    bb_sys_app_emit(g, bb_rec_bundle(g, local, 3), "trained");
    return m;
}

/* --discovery registry: the node that keeps the registry ("serve": true in
 * its config). An invoke answers the live nodes it holds ("members"), of
 * every class, hence no of_class. */
static bb_module *record_registry(bb_recorder *r, const fed_knobs *k)
{
    bb_module *m = bb_rec_class_module(r, "Registry");
    bb_slot *selector = declare_selector(m, k);
    bb_rec *g = bb_module_body(m);
    bb_sys_app_emit(g, bb_role_peer_selector_current_view(g, selector, NULL), "members");
    return m;
}

static bb_module *record(bb_recorder *r, const fed_knobs *k)
{
    bb_module *root = bb_rec_module(r, "Federated");
    bb_module *server = record_server(r, k);
    bb_module *client = record_client(r, k);
    bb_rec *g = bb_module_body(root);
    bb_call *c = bb_rec_call(g, server);
    if (strcmp(k->model, "nn::Onnx") == 0)
        bb_call_input(c, "export", bb_rec_input(g, "export", &BB_TYPE_TRIGGER));
    bb_call_build(c);
    bb_call_build(bb_rec_call(g, client));
    if (k->registry)
        bb_call_build(bb_rec_call(g, record_registry(r, k)));
    return root;
}

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s OUT.onnx [--clients K] [--quorum FRACTION] [--period-ms MS]\n"
            "       [--deadline-ms MS] [--epochs E] [--aggregator TYPE] [--data TYPE]\n"
            "       [--model TYPE] [--model-config JSON] [--aggregator-config JSON]\n"
            "       [--data-config JSON] [--discovery connected|registry] [--codec TYPE]\n"
            "  --clients K         clients asked per round (default 4)\n"
            "  --quorum FRACTION   fraction of K that must answer by the deadline, rounded\n"
            "                      up (default 0.75)\n"
            "  --period-ms MS      a round starts every MS (default 1000)\n"
            "  --deadline-ms MS    a round waits at most MS for answers (default 800)\n"
            "  --epochs E          local epochs per round (default 5)\n"
            "  --aggregator TYPE   agg::FedAvg (default), agg::TrimmedMean, agg::Median,\n"
            "                      agg::WeightAggregator, or a server optimizer:\n"
            "                      agg::FedAdam, agg::FedYogi, agg::FedAdagrad\n"
            "  --data TYPE         data::Csv (default), data::Idx or data::Synthetic\n"
            "  --model TYPE        nn::Mlp (default), or another Model type whose atomic\n"
            "                      domain bb-<crate>.<Type>.atomic has ParamsOn, ParamsDigest\n"
            "                      (nn::Onnx: the server also exports its model, input\n"
            "                      \"export\" -> AppEvent \"model\")\n"
            "  --model-config JSON     the model's recorded construction state (default:\n"
            "                      the digits 64-32-10 MLP)\n"
            "  --aggregator-config JSON    the aggregator's (default {}; TrimmedMean:\n"
            "                      {\"trim\":0.25})\n"
            "  --data-config JSON  the data sources' (default: 20%% held out, min-max)\n"
            "  --discovery HOW     connected (default): the server's clients are the nodes\n"
            "                      connected to it (each client names it with --peer);\n"
            "                      registry: a third class, Registry, keeps a registry of\n"
            "                      live nodes (peers::GlobalRegistry) where every node\n"
            "                      announces itself and the server finds its clients\n"
            "  --codec TYPE        clients send their update (trained - received) through it:\n"
            "                      codec::F16, codec::Int8Affine, codec::TopK, ... (default:\n"
            "                      none, the trained parameters in f32); not with a server\n"
            "                      optimizer\n"
            "Nodes add to these in their bbd config (\"components\").\n",
            prog);
}

/* "nn::Mlp" -> "bb-nn.Mlp.atomic" (IR_AND_DSL.md 5c.1). 0, or 2 after
 * printing why the type name has no such domain. */
static int model_atomic_domain(const char *prog, fed_knobs *k)
{
    const char *sep = strstr(k->model, "::");
    int n = sep ? snprintf(k->model_atomic, sizeof k->model_atomic, "bb-%.*s.%s.atomic",
                           (int)(sep - k->model), k->model, sep + 2)
                : -1;
    if (!sep || sep == k->model || !sep[2] || strstr(sep + 2, "::") || n < 0 ||
        (size_t)n >= sizeof k->model_atomic) {
        fprintf(stderr, "%s: error: --model: '%s' is not a component type 'crate::Type'\n",
                prog, k->model);
        return 2;
    }
    return 0;
}

static int other_option(const char *prog, const char *a, const char *v, void *ud)
{
    fed_knobs *k = ud;
    const struct {
        const char *opt;
        const char **dst;
    } text[] = {
        {"--aggregator", &k->aggregator},
        {"--data", &k->data},
        {"--model", &k->model},
        {"--model-config", &k->model_config},
        {"--aggregator-config", &k->aggregator_config},
        {"--data-config", &k->data_config},
        {"--codec", &k->codec},
    };
    for (size_t t = 0; t < sizeof text / sizeof *text; t++)
        if (!strcmp(a, text[t].opt)) {
            *text[t].dst = v;
            return 0;
        }
    if (!strcmp(a, "--quorum")) {
        char *end = NULL;
        k->quorum = strtod(v, &end);
        if (!*v || *end || !(k->quorum > 0 && k->quorum <= 1)) {
            fprintf(stderr, "%s: error: --quorum: '%s' is not a fraction in (0, 1]\n", prog, v);
            return 2;
        }
    } else if (!strcmp(a, "--discovery")) {
        k->registry = !strcmp(v, "registry");
        if (!k->registry && strcmp(v, "connected")) {
            fprintf(stderr, "%s: error: --discovery: '%s' (connected or registry)\n", prog, v);
            return 2;
        }
    } else {
        return -1;
    }
    return 0;
}

/* --codec sends updates; a server optimizer takes parameters. 0, or 2
 * after printing why. */
static int codec_fits_aggregator(const char *prog, const fed_knobs *k)
{
    static const char *const OPTIMIZERS[] = {"agg::FedAdam", "agg::FedYogi", "agg::FedAdagrad"};
    for (size_t o = 0; k->codec && o < sizeof OPTIMIZERS / sizeof *OPTIMIZERS; o++) {
        if (!strcmp(k->aggregator, OPTIMIZERS[o])) {
            fprintf(stderr,
                    "%s: error: --codec sends updates, and the server optimizer %s takes "
                    "parameters; use it without --codec, or --aggregator agg::FedAvg\n",
                    prog, k->aggregator);
            return 2;
        }
    }
    return 0;
}

static bb_module *record_knobs(bb_recorder *r, const void *k) { return record(r, k); }

int main(int argc, char **argv)
{
    fed_knobs k = {.clients = 4,
                   .quorum = 0.75,
                   .period_ms = 1000,
                   .deadline_ms = 800,
                   .epochs = 5,
                   .aggregator = "agg::FedAvg",
                   .data = "data::Csv",
                   .data_config = DATA_CONFIG,
                   .model = "nn::Mlp",
                   .model_config = MLP_CONFIG};
    const bb_example_knob whole[] = {
        {"--clients", &k.clients, 1, 65536},
        {"--period-ms", &k.period_ms, 1, 86400000}, /* a day */
        {"--deadline-ms", &k.deadline_ms, 1, 86400000},
        {"--epochs", &k.epochs, 1, 1000000},
    };
    const char *out;
    int rc = bb_example_args(argc, argv, usage, whole, sizeof whole / sizeof *whole,
                             other_option, &k, &out);
    if (!rc)
        rc = model_atomic_domain(argv[0], &k);
    if (!rc)
        rc = codec_fits_aggregator(argv[0], &k);
    return rc ? rc : bb_example_write(argv[0], out, record_knobs, &k);
}
