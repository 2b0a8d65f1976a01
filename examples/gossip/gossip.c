/*
 * gossip.c — records serverless gossip learning (Ormándi, Hegedűs, Jelasity
 * 2013; Hegedűs, Danner, Jelasity 2019) and writes it to OUT.onnx: ONE peer
 * class, "Peer", and no server. Every node runs the same partition.
 *
 * Peer (one step = one execution started by the Interval)
 *   tick   = Interval(period)
 *   go     = Limit.Acquire(tick, "step", 1)        one step at a time
 *   (loss, accuracy) = Model.EvaluateMetrics(go)   the held-out 20%: the model
 *                                                  as merged since the last step
 *   (params, n) = Model.Train(accuracy)            E local epochs on its shard
 *   (sent, w) = Mlp.Share(params)                  the model and its weight in a
 *                                                  merge (its age; under push_sum
 *                                                  a share of its mass)
 *   peers  = Sample(fanout, of_class Peer)         peers::Cyclon
 *   net_out("model", peers, Bundle(sent, w))
 *   AppEmit("accuracy", Bundle(accuracy, loss, w, Clock))
 *   Limit.Release("step")
 * and for every model a peer sends (one execution per arrival)
 *   (q, q_w) = Unbundle(lookup_output("model"))
 *   Mlp.Merge(q, q_w)                              the merge rule: the model's
 *                                                  config "merge" (weighted by
 *                                                  age, average, replace,
 *                                                  push_sum)
 *
 * The overlay is CYCLON (peers::Cyclon): each node knows a few others and
 * shuffles with them, so the model a node sends goes to a fresh random peer
 * each step; seeds come from each node's config ("components": {"peers":
 * {"seeds": ["/ip4/.../tcp/7000/p2p/<PeerId>"]}}).
 *
 * Knobs (argv): --period-ms, --epochs E, --fanout F (peers sent to per
 * step), --merge weighted|average|replace|push_sum, --learning-rate,
 * --optimizer sgd|adam, --view C and --shuffle-length L and --shuffle-ms
 * (CYCLON), --data TYPE. Each node's data file and shard are its bbd config
 * (bbd.json(5) "components"). The defaults (SGD 0.3, fanout 3) are what
 * test_gossip measured best on non-IID digits: Adam's per-node moments,
 * which a merge does not average, made every node drift (docs/DECISIONS.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/recorder.h"
#include "examples/record_main.h"

#define MLP_ATOMIC "bb-nn.Mlp.atomic"
/* What every node's data source shares: the same held-out 20%, the same
 * normalization (as examples/federated). */
#define DATA_CONFIG                                                                            \
    "{\"holdout\":0.2,\"split_seed\":0,\"normalization\":\"min-max\",\"batch_size\":32}"

typedef struct gossip_knobs {
    long period_ms, epochs, fanout, view, shuffle_length, shuffle_ms;
    double learning_rate;
    const char *merge, *data, *optimizer;
} gossip_knobs;

static bb_val ext_op(bb_rec *g, bb_slot *slot, const char *op, const bb_val *in, size_t n_in,
                     const bb_type_node *const *types, bb_val *out, size_t n_out)
{
    bb_rec_op(g, slot, MLP_ATOMIC, op, in, n_in, NULL, 0, types, out, n_out);
    return out[0];
}

static bb_module *record_peer(bb_recorder *r, const gossip_knobs *k)
{
    char mlp[512], cyclon[256];
    snprintf(mlp, sizeof mlp,
             "{\"layers\":[64,32,10],\"activation\":\"relu\",\"optimizer\":\"%s\","
             "\"learning_rate\":%g,\"batch_size\":32,\"seed\":1,\"merge\":\"%s\"}",
             k->optimizer, k->learning_rate, k->merge);
    snprintf(cyclon, sizeof cyclon,
             "{\"view_size\":%ld,\"shuffle_length\":%ld,\"period_ms\":%ld,\"of_class\":\"Peer\"}",
             k->view, k->shuffle_length, k->shuffle_ms);
    bb_module *m = bb_rec_class_module(r, "Peer");
    bb_slot *model = bb_rec_concrete(m, BB_ROLE_MODEL, "model", "nn::Mlp", mlp, NULL);
    bb_rec_concrete(m, BB_ROLE_DATA_SOURCE, "data", k->data, DATA_CONFIG, NULL);
    bb_slot *peers = bb_rec_concrete(m, BB_ROLE_PEER_SELECTOR, "peers", "peers::Cyclon", cyclon,
                                     NULL);
    bb_rec *g = bb_module_body(m);

    /* a step: evaluate what the merges made, train, send to a random peer */
    bb_val go = bb_sys_limit_acquire(g, bb_sys_interval(g, (int64_t)k->period_ms * 1000000),
                                     "step", 1);
    bb_val loss, accuracy;
    bb_role_model_evaluate_metrics(g, model, go, &loss, &accuracy);
    bb_val trained[2];
    bb_role_model_train(g, model, accuracy, k->epochs, &trained[0], &trained[1]);
    const bb_type_node *pa_types[2] = {&BB_TYPE_TENSOR_F32, &BB_TYPE_U64};
    bb_val sent[2];
    bb_rec_attr ways = BB_RA_INT("ways", k->fanout + 1); /* push_sum: a share per peer, one kept */
    bb_rec_op(g, model, MLP_ATOMIC, "Share", &trained[0], 1, &ways, 1, pa_types, sent, 2);
    bb_val to = bb_role_peer_selector_sample(g, peers, k->fanout, "Peer");
    bb_rec_net_out(g, "model", to, bb_rec_bundle(g, sent, 2));
    bb_val report[] = {accuracy, loss, sent[1], bb_sys_clock(g, sent[1])};
    bb_sys_app_emit(g, bb_rec_bundle(g, report, 4), "accuracy");
    bb_sys_limit_release(g, sent[0], "step");

    /* a peer's model arrives: merge it */
    bb_val got[2];
    bb_rec_unbundle(g, bb_rec_lookup_output(g, "model", &BB_TYPE_COMPOSITE), pa_types, 2, got);
    const bb_type_node *age_type = &BB_TYPE_U64;
    bb_val merged;
    ext_op(g, model, "Merge", got, 2, &age_type, &merged, 1);
    return m;
}

static bb_module *record(bb_recorder *r, const gossip_knobs *k)
{
    bb_module *root = bb_rec_module(r, "Gossip");
    bb_call_build(bb_rec_call(bb_module_body(root), record_peer(r, k)));
    return root;
}

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s OUT.onnx [--period-ms MS] [--epochs E] [--fanout F]\n"
            "       [--merge weighted|average|replace|push_sum] [--learning-rate LR]\n"
            "       [--optimizer sgd|adam] [--view C]\n"
            "       [--shuffle-length L] [--shuffle-ms MS] [--data TYPE]\n"
            "  --period-ms MS      a node takes a step every MS (default 500)\n"
            "  --epochs E          local epochs per step (default 1)\n"
            "  --fanout F          peers a node sends its model to per step (default 3)\n"
            "  --merge RULE        how a node merges a peer's model: weighted (by the\n"
            "                      models' ages, default), average, replace, push_sum\n"
            "  --learning-rate LR  the optimizer's step size (default 0.3)\n"
            "  --optimizer OPT     sgd (default) or adam\n"
            "  --view C            CYCLON view size (default 4)\n"
            "  --shuffle-length L  CYCLON shuffle length (default 3)\n"
            "  --shuffle-ms MS     CYCLON shuffle period (default 500)\n"
            "  --data TYPE         data::Csv (default) or data::Synthetic\n",
            prog);
}

static int other_option(const char *prog, const char *a, const char *v, void *ud)
{
    gossip_knobs *k = ud;
    if (!strcmp(a, "--merge")) {
        k->merge = v;
        if (strcmp(v, "weighted") && strcmp(v, "average") && strcmp(v, "replace") &&
            strcmp(v, "push_sum")) {
            fprintf(stderr, "%s: error: --merge: '%s' (weighted, average, replace or push_sum)\n",
                    prog, v);
            return 2;
        }
    } else if (!strcmp(a, "--learning-rate")) {
        char *end = NULL;
        k->learning_rate = strtod(v, &end);
        if (!*v || *end || !(k->learning_rate > 0 && k->learning_rate < 10)) {
            fprintf(stderr, "%s: error: --learning-rate: '%s' is not in (0, 10)\n", prog, v);
            return 2;
        }
    } else if (!strcmp(a, "--data")) {
        k->data = v;
    } else if (!strcmp(a, "--optimizer")) {
        k->optimizer = v;
        if (strcmp(v, "adam") && strcmp(v, "sgd")) {
            fprintf(stderr, "%s: error: --optimizer: '%s' (adam or sgd)\n", prog, v);
            return 2;
        }
    } else {
        return -1;
    }
    return 0;
}

static bb_module *record_knobs(bb_recorder *r, const void *k) { return record(r, k); }

int main(int argc, char **argv)
{
    gossip_knobs k = {500, 1, 3, 4, 3, 500, 0.3, "weighted", "data::Csv", "sgd"};
    const bb_example_knob whole[] = {
        {"--period-ms", &k.period_ms, 1, 86400000},
        {"--epochs", &k.epochs, 1, 1000},
        {"--fanout", &k.fanout, 1, 64},
        {"--view", &k.view, 1, 256},
        {"--shuffle-length", &k.shuffle_length, 1, 64},
        {"--shuffle-ms", &k.shuffle_ms, 1, 86400000},
    };
    const char *out;
    int rc = bb_example_args(argc, argv, usage, whole, sizeof whole / sizeof *whole,
                             other_option, &k, &out);
    if (rc)
        return rc;
    if (k.shuffle_length > k.view) {
        fprintf(stderr, "%s: error: --shuffle-length %ld exceeds --view %ld\n", argv[0],
                k.shuffle_length, k.view);
        return 2;
    }
    return bb_example_write(argv[0], out, record_knobs, &k);
}
