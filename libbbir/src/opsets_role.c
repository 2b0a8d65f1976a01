/*
 * opsets_role.c — the six ai.bytesandbrains.role.* v1 catalogs
 * (IR_AND_DSL.md 5c.2), with the additions ROLES.md's DSL surfaces need:
 * role.index Train; role.model Train and EvaluateMetrics; role.aggregator
 * Contribute(contribution, metadata?) and Aggregate -> (result, metadata).
 * Ops sorted by op_type (strcmp). Every role op may complete later
 * (ContractResponse::Later), hence BB_OPF_ASYNC.
 */
#include "opsets_internal.h"

#define BB__VER BB_OPSET_VERSION
#define ASYNC BB_OPF_ASYNC

#define BB__ROLE_OPSET(sym, dom, rl, arr, docstr) \
    const bb_opset_schema sym = {                  \
        .domain = dom,                             \
        .version = BB_OPSET_VERSION,               \
        .role = rl,                                \
        .ops = arr,                                \
        .n_ops = BB__COUNT(arr),                   \
        .doc = docstr,                             \
    }

/* ---- role.index ---------------------------------------------------------- */
#define BB__DOM BB_DOMAIN_ROLE_INDEX
static const bb_op_schema INDEX_OPS[] = {
    BB__OP("Add", BB__PORTS(BB__P("vec", TENSOR)), BB__PORTS(BB__P("cmd", COMMAND_ID)),
           BB__NONE, ASYNC, "Adds a vector to the index"),
    BB__OP("Remove", BB__PORTS(BB__P("id", TENSOR_U64)), BB__PORTS(BB__P("cmd", COMMAND_ID)),
           BB__NONE, ASYNC, "Removes a vector by id"),
    BB__OP("Search", BB__PORTS(BB__P("query", TENSOR)), BB__PORTS(BB__P("results", ANY)),
           BB__ATTRS(BB__A_REQ("k", INT)), ASYNC,
           "k nearest neighbours as a sequence of (id, distance)"),
    BB__OP("Train", BB__PORTS(BB__P("samples", TENSOR)), BB__PORTS(BB__P("trigger", TRIGGER)),
           BB__NONE, ASYNC, "Fits the index (IVF centroids, PQ codebooks) to samples"),
};
BB__ROLE_OPSET(bb__opset_role_index, BB_DOMAIN_ROLE_INDEX, BB_ROLE_INDEX, INDEX_OPS,
               "Vector index role");
#undef BB__DOM

/* ---- role.model ---------------------------------------------------------- */
#define BB__DOM BB_DOMAIN_ROLE_MODEL
static const bb_op_schema MODEL_OPS[] = {
    BB__OP("ApplyDelta", BB__PORTS(BB__P("delta", TENSOR)), BB__PORTS(BB__P("cmd", COMMAND_ID)),
           BB__NONE, ASYNC, "Adds a delta to the parameters"),
    BB__OP("Backward", BB__PORTS(BB__P("grad", TENSOR)), BB__PORTS(BB__P("cmd", COMMAND_ID)),
           BB__NONE, ASYNC, "Back-propagates a gradient"),
    BB__OP("Evaluate", BB__PORTS(BB__P("input", TENSOR), BB__P("target", TENSOR)),
           BB__PORTS(BB__P("loss", TENSOR)), BB__NONE, ASYNC,
           "Loss of the model on (input, target)"),
    BB__OP("EvaluateMetrics", BB__PORTS(BB__P("trigger", TRIGGER)),
           BB__PORTS(BB__P("loss", TENSOR), BB__P("accuracy", TENSOR)), BB__NONE, ASYNC,
           "Loss and accuracy on the bound data source's evaluation set"),
    BB__OP("Forward", BB__PORTS(BB__P("input", TENSOR)), BB__PORTS(BB__P("output", TENSOR)),
           BB__NONE, ASYNC, "Inference"),
    BB__OP("LoadParameters", BB__PORTS(BB__P("params", TENSOR)),
           BB__PORTS(BB__P("cmd", COMMAND_ID)), BB__NONE, ASYNC,
           "Replaces the parameters (flat tensor)"),
    BB__OP("Params", BB__NONE, BB__PORTS(BB__P("params", TENSOR)), BB__NONE, ASYNC,
           "Snapshot of the parameters (flat tensor)"),
    BB__OP("Step", BB__PORTS(BB__P("grads", TENSOR)), BB__PORTS(BB__P("cmd", COMMAND_ID)),
           BB__NONE, ASYNC, "Optimizer step with the given gradients"),
    BB__OP("Train", BB__PORTS(BB__P("trigger", TRIGGER)),
           BB__PORTS(BB__P("params", TENSOR), BB__P("num_samples", U64)),
           BB__ATTRS(BB__A("epochs", INT, "1")), ASYNC,
           "Trains epochs passes over the bound data source; returns params and sample count"),
};
BB__ROLE_OPSET(bb__opset_role_model, BB_DOMAIN_ROLE_MODEL, BB_ROLE_MODEL, MODEL_OPS,
               "ML model role");
#undef BB__DOM

/* ---- role.aggregator ----------------------------------------------------- */
#define BB__DOM BB_DOMAIN_ROLE_AGGREGATOR
static const bb_op_schema AGGREGATOR_OPS[] = {
    BB__OP("Aggregate", BB__PORTS(BB__P("trigger", TRIGGER)),
           BB__PORTS(BB__P("result", TENSOR), BB__P_OPT("metadata", ANY)), BB__NONE, ASYNC,
           "Reduces the contributions; emits the result and its typed metadata"),
    BB__OP("Contribute", BB__PORTS(BB__P("contribution", TENSOR), BB__P_OPT("metadata", ANY)),
           BB__PORTS(BB__P("cmd", COMMAND_ID)), BB__NONE, ASYNC,
           "Writes one contribution (and its metadata, e.g. num_samples) into the buffer"),
    BB__OP("CurrentTensor", BB__PORTS(BB__P("trigger", TRIGGER)),
           BB__PORTS(BB__P("tensor", TENSOR)), BB__NONE, ASYNC, "Reads the current state"),
};
BB__ROLE_OPSET(bb__opset_role_aggregator, BB_DOMAIN_ROLE_AGGREGATOR, BB_ROLE_AGGREGATOR,
               AGGREGATOR_OPS, "Federated / decentralized aggregator role");
#undef BB__DOM

/* ---- role.compressor ----------------------------------------------------- */
#define BB__DOM BB_DOMAIN_ROLE_COMPRESSOR
static const bb_op_schema COMPRESSOR_OPS[] = {
    BB__OP("Compress", BB__PORTS(BB__P("t", TENSOR)), BB__PORTS(BB__P("code", TENSOR)),
           BB__NONE, ASYNC, "Encodes a tensor"),
    BB__OP("Decompress", BB__PORTS(BB__P("code", TENSOR)), BB__PORTS(BB__P("t", TENSOR)),
           BB__NONE, ASYNC, "Decodes a tensor"),
    BB__OP("TrainCodebook", BB__PORTS(BB__P("training", TENSOR)),
           BB__PORTS(BB__P("cmd", COMMAND_ID)), BB__NONE, ASYNC,
           "Fits the codec (codebooks, scale / zero point) to samples"),
};
BB__ROLE_OPSET(bb__opset_role_compressor, BB_DOMAIN_ROLE_COMPRESSOR, BB_ROLE_CODEC,
               COMPRESSOR_OPS, "Codec role");
#undef BB__DOM

/* ---- role.data_loader ---------------------------------------------------- */
#define BB__DOM BB_DOMAIN_ROLE_DATA_LOADER
static const bb_op_schema DATA_LOADER_OPS[] = {
    BB__OP("NextBatch", BB__NONE, BB__PORTS(BB__P("batch", TENSOR), BB__P_OPT("labels", TENSOR)),
           BB__NONE, ASYNC, "Next (batch, labels); labels empty for unsupervised sources"),
    BB__OP("OnDataLoaded", BB__NONE, BB__PORTS(BB__P("trigger", TRIGGER)), BB__NONE, ASYNC,
           "Fires once the source's data is ready"),
    BB__OP("Reset", BB__PORTS(BB__P("trigger", TRIGGER)), BB__PORTS(BB__P("trigger", TRIGGER)),
           BB__NONE, ASYNC, "Rewinds the source"),
};
BB__ROLE_OPSET(bb__opset_role_data_loader, BB_DOMAIN_ROLE_DATA_LOADER, BB_ROLE_DATA_SOURCE,
               DATA_LOADER_OPS, "Data source role");
#undef BB__DOM

/* ---- role.peer_selector -------------------------------------------------- */
#define BB__DOM BB_DOMAIN_ROLE_PEER_SELECTOR
static const bb_op_schema PEER_SELECTOR_OPS[] = {
    BB__OP("CurrentView", BB__NONE, BB__PORTS(BB__P("view", PEER_ID_VEC)), BB__NONE, ASYNC,
           "Every peer in the selector's current view"),
    BB__OP("Sample", BB__NONE, BB__PORTS(BB__P("peers", PEER_ID_VEC)),
           BB__ATTRS(BB__A_REQ("n", INT)), ASYNC, "n peers sampled from the view"),
};
BB__ROLE_OPSET(bb__opset_role_peer_selector, BB_DOMAIN_ROLE_PEER_SELECTOR,
               BB_ROLE_PEER_SELECTOR, PEER_SELECTOR_OPS, "Peer selection role");
#undef BB__DOM
