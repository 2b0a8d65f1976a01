/*
 * split_learning.c — records split learning (IR_AND_DSL.md Part 9's
 * SplitLearning module, made to train) and writes it to OUT.onnx: one
 * program, two peer classes. The data owner keeps its rows and the bottom
 * of the model; the top of the model, on another node, sees only the
 * bottom's activations (and the labels). Activations go up and gradients
 * come back down across the wire, through a codec when one is given.
 *
 * The worked example's ops, by class (Part 9's names on the right):
 *
 * DataOwner (one training step = one execution started by the Interval)
 *   tick  = Interval(period); go = Limit.Acquire(tick, "step", 1)
 *   (x, y) = Data.NextBatch, gated by go
 *   a     = Bottom.Forward(x)                       model.forward
 *   code  = ActCodec.Compress(a)                    codec.compress
 *   peers = Sample(1, of_class Top)                 gossip.sample
 *   req   = SendReqBatched(Bundle(code, y), peers)  network_client.send_req_batched
 *   grads = RecvRespBatched(req)                    network_client.recv_responses
 *   grads = GradCodec.DecompressBatch(grads)        codec.decompress
 *   g     = Aggregator.Aggregate(Contribute(grads)) aggregator.aggregate
 *   Bottom.Backward(g) -> Bottom.StepOn             model.backward, model.step
 *   Limit.Release("step")
 * and every eval period the same path with the data's held-out rows
 * (EvalSet) to port "eval", answered with the held-out loss and accuracy.
 *
 * Top (one execution per request)
 *   (payload, req) = RecvReq("acts")                network_server.recv
 *   (code, y) = Unbundle(payload); a = ActCodec.Decompress(code)
 *   out = Top.Forward(a); (g, loss, accuracy) = Top.LossGradient(out, y)
 *   (da, cmd) = Top.BackwardInput(g); Top.StepOn(cmd)
 *   SendResp(GradCodec.Compress(da), req); AppEmit("train", (loss, accuracy))
 * and for port "eval": AppEmit("eval", Top.LossGradient's (loss, accuracy)),
 * answered with the same bundle.
 *
 * The model: 64 -> 32 (relu) -> 32 on the data owner, 32 -> 10 on the top
 * (softmax cross-entropy), both nn::MlpPart (an nn::Mlp fed through the
 * graph: the top holds no rows, so it binds no data source). As a whole the
 * 64-32-10 digits MLP of the federated example with a linear 32-wide layer
 * at the cut. Both parts train with Adam at 0.003, minibatches of 32.
 *
 * Knobs (argv): --codec TYPE (the activations' codec, e.g.
 * codec::Int8Affine), --grad-codec TYPE (the gradients'), --period-ms,
 * --eval-ms, --deadline-ms. The data file is each node's config (bbd.json
 * "components": {"data": {"path": ...}}).
 */
#include <stdio.h>
#include <string.h>

#include "bb/recorder.h"
#include "examples/record_main.h"

#define MLP_ATOMIC "bb-nn.Mlp.atomic"
#define DATA_ATOMIC "bb-data.DataSource.atomic"
#define CODEC_ATOMIC "bb-codec.Codec.atomic"

#define BOTTOM_CONFIG                                                                          \
    "{\"layers\":[64,32,32],\"activation\":\"relu\",\"optimizer\":\"adam\","                  \
    "\"learning_rate\":0.003,\"seed\":1}"
#define TOP_CONFIG                                                                             \
    "{\"layers\":[32,10],\"optimizer\":\"adam\",\"learning_rate\":0.003,\"seed\":2}"
/* The digits split the federated example uses (the same held-out 20%); a
 * fixed shuffle seed, so two runs differ only in what they are told to. */
#define DATA_CONFIG                                                                            \
    "{\"holdout\":0.2,\"split_seed\":0,\"normalization\":\"min-max\",\"batch_size\":32,"   \
    "\"seed\":1}"

typedef struct sl_knobs {
    long period_ms;         /* a training step every period */
    long eval_ms;           /* a held-out evaluation every eval period */
    long deadline_ms;       /* a step waits this long for its gradient */
    const char *codec;      /* the activations' codec, or NULL */
    const char *grad_codec; /* the gradients' codec, or NULL */
} sl_knobs;

/* One op of a component's own (atomic) domain. */
static int ext_op(bb_rec *g, bb_slot *slot, const char *domain, const char *op, const bb_val *in,
                  size_t n_in, const bb_type_node *const *types, bb_val *out, size_t n_out)
{
    return bb_rec_op(g, slot, domain, op, in, n_in, NULL, 0, types, out, n_out);
}

/* The codec slots, declared alike in both classes (each class compresses
 * one direction and decompresses the other). */
static void codec_slots(bb_module *m, const sl_knobs *k, bb_slot **act, bb_slot **grad)
{
    *act = k->codec ? bb_rec_concrete(m, BB_ROLE_CODEC, "act_codec", k->codec, "{}", NULL) : NULL;
    *grad = k->grad_codec
                ? bb_rec_concrete(m, BB_ROLE_CODEC, "grad_codec", k->grad_codec, "{}", NULL)
                : NULL;
}

/* Bottom.Forward(x), compressed, bundled with y and sent to the top on
 * port; the answers (RecvRespBatched). */
static bb_val ask_top(bb_rec *g, bb_slot *bottom, bb_slot *codec, bb_slot *selector,
                      const char *port, bb_val x, bb_val y, const sl_knobs *k)
{
    bb_val a = bb_role_model_forward(g, bottom, x);
    bb_val parts[2] = {codec ? bb_role_compressor_compress(g, codec, a) : a, y};
    bb_val peers = bb_role_peer_selector_sample(g, selector, 1, "Top");
    bb_val req_id, answers;
    bb_wire_send_req_batched(g, NULL, port, bb_rec_bundle(g, parts, 2), peers, 1,
                             (int64_t)k->deadline_ms * 1000000, &req_id, NULL);
    bb_wire_recv_resp_batched(g, NULL, req_id, NULL, &answers);
    return answers;
}

static bb_module *record_data_owner(bb_recorder *r, const sl_knobs *k)
{
    bb_module *m = bb_rec_class_module(r, "DataOwner");
    bb_slot *bottom =
        bb_rec_concrete(m, BB_ROLE_MODEL, "bottom", "nn::MlpPart", BOTTOM_CONFIG, NULL);
    bb_slot *data = bb_rec_concrete(m, BB_ROLE_DATA_SOURCE, "data", "data::Csv", DATA_CONFIG, NULL);
    bb_slot *selector = bb_rec_concrete(m, BB_ROLE_PEER_SELECTOR, "selector", "peers::Connected",
                                        "{\"target\":\"Top\"}", NULL);
    bb_slot *agg = bb_rec_concrete(m, BB_ROLE_AGGREGATOR, "aggregator", "agg::WeightAggregator",
                                   "{}", NULL);
    bb_slot *act_codec, *grad_codec;
    codec_slots(m, k, &act_codec, &grad_codec);
    bb_rec *g = bb_module_body(m);

    /* a training step; NextBatch runs at the tick, its batch waits for the limit */
    bb_val go = bb_sys_limit_acquire(g, bb_sys_interval(g, (int64_t)k->period_ms * 1000000),
                                     "step", 1);
    bb_val x, y;
    bb_role_data_loader_next_batch(g, data, &x, &y);
    bb_val answers = ask_top(g, bottom, act_codec, selector, "acts", bb_sys_gate(g, x, go),
                             bb_sys_gate(g, y, go), k),
           grads = answers;
    if (grad_codec)
        ext_op(g, grad_codec, CODEC_ATOMIC, "DecompressBatch", &answers, 1,
               (const bb_type_node *const[]){&BB_TYPE_RESPONSE_BATCH}, &grads, 1);
    bb_val n = bb_role_aggregator_contribute(g, agg, grads, BB_VAL_OMIT);
    bb_val grad = bb_role_aggregator_aggregate(g, agg, n, NULL);
    bb_val stepped;
    ext_op(g, bottom, MLP_ATOMIC, "StepOn", (bb_val[]){bb_role_model_backward(g, bottom, grad)}, 1,
           (const bb_type_node *const[]){&BB_TYPE_COMMAND_ID}, &stepped, 1);
    bb_sys_limit_release(g, stepped, "step");

    /* an evaluation on the held-out rows, between steps */
    bb_val ego = bb_sys_limit_acquire(g, bb_sys_interval(g, (int64_t)k->eval_ms * 1000000),
                                      "step", 1);
    bb_val held[2];
    ext_op(g, data, DATA_ATOMIC, "EvalSet", NULL, 0,
           (const bb_type_node *const[]){&BB_TYPE_TENSOR_F32, &BB_TYPE_TENSOR_F32}, held, 2);
    bb_val answer = ask_top(g, bottom, act_codec, selector, "eval", bb_sys_gate(g, held[0], ego),
                            bb_sys_gate(g, held[1], ego), k);
    bb_sys_limit_release(g, answer, "step");
    return m;
}

/* RecvReq(port) -> (the decoded activations, the labels), one request at a
 * time through the top model (its Forward keeps the batch its
 * BackwardInput goes back through). *req_id: the request to answer. */
static void receive(bb_rec *g, bb_slot *codec, const char *port, bb_val *acts, bb_val *labels,
                    bb_val *req_id)
{
    bb_val payload;
    bb_wire_recv_req(g, NULL, port, &BB_TYPE_COMPOSITE, NULL, &payload, req_id);
    payload = bb_sys_gate(g, payload, bb_sys_limit_acquire(g, payload, "top", 1));
    bb_val parts[2];
    bb_rec_unbundle(g, payload,
                    (const bb_type_node *const[]){codec ? &BB_TYPE_TENSOR : &BB_TYPE_TENSOR_F32,
                                                  &BB_TYPE_TENSOR_F32},
                    2, parts);
    *acts = codec ? bb_role_compressor_decompress(g, codec, parts[0]) : parts[0];
    *labels = parts[1];
}

/* Top.Forward then LossGradient: out[0..2] = (grad, loss, accuracy). */
static void loss_of(bb_rec *g, bb_slot *top, bb_val acts, bb_val labels, bb_val *out)
{
    bb_val in[2] = {bb_role_model_forward(g, top, acts), labels};
    ext_op(g, top, MLP_ATOMIC, "LossGradient", in, 2,
           (const bb_type_node *const[]){&BB_TYPE_TENSOR_F32, &BB_TYPE_TENSOR_F32,
                                         &BB_TYPE_TENSOR_F32},
           out, 3);
}

static bb_module *record_top(bb_recorder *r, const sl_knobs *k)
{
    bb_module *m = bb_rec_class_module(r, "Top");
    bb_slot *top = bb_rec_concrete(m, BB_ROLE_MODEL, "top", "nn::MlpPart", TOP_CONFIG, NULL);
    bb_slot *act_codec, *grad_codec;
    codec_slots(m, k, &act_codec, &grad_codec);
    bb_rec *g = bb_module_body(m);

    /* a training step */
    bb_val acts, labels, req_id, lg[3], back[2], stepped;
    receive(g, act_codec, "acts", &acts, &labels, &req_id);
    loss_of(g, top, acts, labels, lg);
    ext_op(g, top, MLP_ATOMIC, "BackwardInput", &lg[0], 1,
           (const bb_type_node *const[]){&BB_TYPE_TENSOR_F32, &BB_TYPE_COMMAND_ID}, back, 2);
    ext_op(g, top, MLP_ATOMIC, "StepOn", &back[1], 1,
           (const bb_type_node *const[]){&BB_TYPE_COMMAND_ID}, &stepped, 1);
    bb_val down = grad_codec ? bb_role_compressor_compress(g, grad_codec, back[0]) : back[0];
    bb_wire_send_resp(g, NULL, bb_sys_gate(g, down, stepped), BB_VAL_OMIT, req_id);
    bb_sys_app_emit(g, bb_rec_bundle(g, &lg[1], 2), "train");

    /* an evaluation on the data owner's held-out rows */
    bb_val eacts, elabels, ereq, elg[3];
    receive(g, act_codec, "eval", &eacts, &elabels, &ereq);
    loss_of(g, top, eacts, elabels, elg);
    bb_val metrics = bb_rec_bundle(g, &elg[1], 2);
    bb_sys_app_emit(g, metrics, "eval");
    bb_wire_send_resp(g, NULL, metrics, BB_VAL_OMIT, ereq);
    return m;
}

static bb_module *record(bb_recorder *r, const sl_knobs *k)
{
    bb_module *root = bb_rec_module(r, "SplitLearning");
    bb_module *owner = record_data_owner(r, k);
    bb_module *top = record_top(r, k);
    bb_rec *g = bb_module_body(root);
    bb_call_build(bb_rec_call(g, owner));
    bb_call_build(bb_rec_call(g, top));
    return root;
}

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s OUT.onnx [--codec TYPE] [--grad-codec TYPE] [--period-ms MS]\n"
            "       [--eval-ms MS] [--deadline-ms MS]\n"
            "  --codec TYPE        the activations' codec (codec::Int8Affine, codec::F16, ...;\n"
            "                      default: none, f32 activations)\n"
            "  --grad-codec TYPE   the gradients' codec (default: none)\n"
            "  --period-ms MS      a training step every MS (default 10; keep it above a\n"
            "                      step's time, or ticks queue on the step limit)\n"
            "  --eval-ms MS        a held-out evaluation every MS (default 1000)\n"
            "  --deadline-ms MS    a step waits at most MS for its gradient (default 2000)\n",
            prog);
}

static int other_option(const char *prog, const char *a, const char *v, void *ud)
{
    sl_knobs *k = ud;
    (void)prog;
    if (!strcmp(a, "--codec"))
        k->codec = v;
    else if (!strcmp(a, "--grad-codec"))
        k->grad_codec = v;
    else
        return -1;
    return 0;
}

static bb_module *record_knobs(bb_recorder *r, const void *k) { return record(r, k); }

int main(int argc, char **argv)
{
    sl_knobs k = {.period_ms = 10, .eval_ms = 1000, .deadline_ms = 2000};
    const bb_example_knob whole[] = {
        {"--period-ms", &k.period_ms, 1, 86400000},
        {"--eval-ms", &k.eval_ms, 1, 86400000},
        {"--deadline-ms", &k.deadline_ms, 1, 86400000},
    };
    const char *out;
    int rc = bb_example_args(argc, argv, usage, whole, sizeof whole / sizeof *whole,
                             other_option, &k, &out);
    return rc ? rc : bb_example_write(argv[0], out, record_knobs, &k);
}
