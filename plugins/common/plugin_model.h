/*
 * plugin_model.h — the ops every trainable Model of this tree declares:
 * the Model role's catalog (ROLES.md; the ports of IR_AND_DSL.md 5c.2) and
 * the extension ops nn::Mlp and nn::Onnx both serve in their own atomic
 * domains (Gradients, ParamsOn, ParamsDigest), with their ports and docs,
 * so the two models declare one signature per op.
 *
 *   static const bb_op_decl EXT_OPS[] = {BBP_MODEL_EXT_OPS, <the model's own>};
 *   {"ai.bytesandbrains.role.model", 1, BBP_MODEL_ROLE_OPS, BBP_COUNT(BBP_MODEL_ROLE_OPS)}
 *
 * Header-only (static const): each plugin .so compiles its own copy.
 */
#ifndef BBP_PLUGIN_MODEL_H
#define BBP_PLUGIN_MODEL_H

#include <bb/plugin.h>
#include <bb/types.h>

#include "plugins/common/plugin_type.h"

#define BBP__P(nm, ty) {.name = nm, .type = &BB_TYPE_##ty}
#define BBP__P_OPT(nm, ty) {.name = nm, .type = &BB_TYPE_##ty, .optional = true}
static const bb_port_decl BBP_IN_INPUT[] = {BBP__P("input", TENSOR_F32)};
static const bb_port_decl BBP_IN_GRAD[] = {BBP__P("grad", TENSOR_F32)};
static const bb_port_decl BBP_IN_GRADS[] = {BBP__P("grads", TENSOR_F32)};
static const bb_port_decl BBP_IN_DELTA[] = {BBP__P("delta", TENSOR_F32)};
static const bb_port_decl BBP_IN_PARAMS[] = {BBP__P("params", TENSOR_F32)};
static const bb_port_decl BBP_IN_EVAL[] = {BBP__P("input", TENSOR_F32), BBP__P("target", TENSOR)};
static const bb_port_decl BBP_IN_TRIGGER[] = {BBP__P("trigger", ANY)};
static const bb_port_decl BBP_OUT_OUTPUT[] = {BBP__P("output", TENSOR_F32)};
static const bb_port_decl BBP_OUT_CMD[] = {BBP__P("cmd", COMMAND_ID)};
static const bb_port_decl BBP_OUT_PARAMS[] = {BBP__P("params", TENSOR_F32)};
static const bb_port_decl BBP_OUT_GRADS[] = {BBP__P("grads", TENSOR_F32),
                                             BBP__P_OPT("loss", TENSOR_F32)};
static const bb_port_decl BBP_OUT_TRAIN[] = {BBP__P("params", TENSOR_F32),
                                             BBP__P_OPT("num_samples", U64)};
static const bb_port_decl BBP_OUT_METRICS[] = {BBP__P("loss", TENSOR_F32),
                                               BBP__P_OPT("accuracy", TENSOR_F32)};
static const bb_port_decl BBP_OUT_DIGEST[] = {BBP__P("digest", U64)};
static const bb_port_decl BBP_OUT_BYTES[] = {BBP__P("bytes", BYTES)};
#undef BBP__P
#undef BBP__P_OPT

#define BBP_OPD(name, in, out, doc) {name, in, BBP_COUNT(in), out, BBP_COUNT(out), doc}

/* The ops that read the data source come last (BBP_MODEL_DATA_OPS of them):
 * a model without a data source (nn::MlpPart) declares the ones before. */
#define BBP_MODEL_DATA_OPS 2
static const bb_op_decl BBP_MODEL_ROLE_OPS[] = {
    BBP_OPD("ApplyDelta", BBP_IN_DELTA, BBP_OUT_CMD, "params += delta"),
    BBP_OPD("Backward", BBP_IN_GRAD, BBP_OUT_CMD,
            "back-propagates dLoss/dOutput through the last Forward; the gradient accumulates "
            "for Step"),
    BBP_OPD("Evaluate", BBP_IN_EVAL, BBP_OUT_METRICS,
            "the mean loss (compute_loss) on (input, target) in inference mode, and the "
            "accuracy when asked"),
    BBP_OPD("Forward", BBP_IN_INPUT, BBP_OUT_OUTPUT,
            "outputs (logits for cross-entropy) of a batch in training mode, remembered for "
            "Backward"),
    BBP_OPD("LoadParameters", BBP_IN_PARAMS, BBP_OUT_CMD,
            "replaces the parameters, restarts the optimizer; the FedProx center"),
    {"Params", NULL, 0, BBP_OUT_PARAMS, 1, "the flat parameter vector"},
    BBP_OPD("Step", BBP_IN_GRADS, BBP_OUT_CMD,
            "an optimizer step with grads, or with Backward's accumulated gradient when empty"),
    /* the BBP_MODEL_DATA_OPS */
    BBP_OPD("EvaluateMetrics", BBP_IN_TRIGGER, BBP_OUT_METRICS,
            "loss and accuracy on the data source's evaluation set (off the engine thread)"),
    BBP_OPD("Train", BBP_IN_TRIGGER, BBP_OUT_TRAIN,
            "epochs whole epochs over the data source (off the engine thread); the new "
            "parameters and the samples seen"),
};

#define BBP_MODEL_EXT_OPS                                                                    \
    BBP_OPD("Gradients", BBP_IN_EVAL, BBP_OUT_GRADS,                                         \
            "the mean loss's gradient (and the loss) on (input, target) in training mode; "  \
            "the model does not change"),                                                    \
        BBP_OPD("ParamsOn", BBP_IN_TRIGGER, BBP_OUT_PARAMS,                                  \
                "the flat parameter vector, read when the trigger arrives (Params runs "     \
                "when its execution starts)"),                                               \
        BBP_OPD("ParamsDigest", BBP_IN_TRIGGER, BBP_OUT_DIGEST,                              \
                "FNV-1a-64 of the committed parameters' 64-bit words: which model version "  \
                "this node holds")

#endif
