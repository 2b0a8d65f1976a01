/*
 * opsets_onnx.c — the ai.onnx subset every Backend must support
 * (IR_AND_DSL.md 5d), with the standard ONNX port and attribute names of
 * opset BB_ONNX_OPSET_VERSION. Ops sorted by op_type (strcmp).
 *
 * The spec's list names 48 ops and counts 51; the three added here are
 * Where (one of the 30 Backend primitives of ROLES.md Part 4), ArgMax
 * (classification accuracy) and Flatten (Conv -> Gemm). Dot, Zeros and Ones
 * are not standard ONNX: Dot is the inner product of two 1-D tensors,
 * Zeros / Ones fill a tensor of the given INT64 shape with dtype.
 */
#include "opsets_internal.h"

#define BB__DOM BB_DOMAIN_ONNX
#define BB__VER BB_ONNX_OPSET_VERSION

/* Signature families. */
#define UNARY(op, x, y, docstr) \
    BB__OP(op, BB__PORTS(BB__P(x, TENSOR)), BB__PORTS(BB__P(y, TENSOR)), BB__NONE, 0, docstr)
#define BINARY(op, docstr)                                                       \
    BB__OP(op, BB__PORTS(BB__P("A", TENSOR), BB__P("B", TENSOR)),                \
           BB__PORTS(BB__P("C", TENSOR)), BB__NONE, 0, docstr)
#define COMPARE(op, docstr)                                                      \
    BB__OP(op, BB__PORTS(BB__P("A", TENSOR), BB__P("B", TENSOR)),                \
           BB__PORTS(BB__P("C", TENSOR_BOOL)), BB__NONE, 0, docstr)
#define REDUCE(op, docstr)                                                       \
    BB__OP(op, BB__PORTS(BB__P("data", TENSOR), BB__P_OPT("axes", TENSOR_I64)),  \
           BB__PORTS(BB__P("reduced", TENSOR)),                                  \
           BB__ATTRS(BB__A("keepdims", INT, "1"), BB__A("noop_with_empty_axes", INT, "0")), \
           0, docstr)
#define FILL(op, docstr)                                                         \
    BB__OP(op, BB__PORTS(BB__P("shape", TENSOR_I64)), BB__PORTS(BB__P("output", TENSOR)), \
           BB__ATTRS(BB__A("dtype", INT, "1")), 0, docstr)

static const bb_op_schema ONNX_OPS[] = {
    UNARY("Abs", "X", "Y", "Elementwise |x|"),
    BINARY("Add", "Elementwise a + b (broadcasting)"),
    BB__OP("ArgMax", BB__PORTS(BB__P("data", TENSOR)), BB__PORTS(BB__P("reduced", TENSOR_I64)),
           BB__ATTRS(BB__A("axis", INT, "0"), BB__A("keepdims", INT, "1"),
                     BB__A("select_last_index", INT, "0")),
           0, "Indices of the maxima along axis"),
    BB__OP("AveragePool", BB__PORTS(BB__P("X", TENSOR)), BB__PORTS(BB__P("Y", TENSOR)),
           BB__ATTRS(BB__A("auto_pad", STRING, "NOTSET"), BB__A("ceil_mode", INT, "0"),
                     BB__A("count_include_pad", INT, "0"), BB__A_OPT("dilations", INTS),
                     BB__A_REQ("kernel_shape", INTS), BB__A_OPT("pads", INTS),
                     BB__A_OPT("strides", INTS)),
           0, "Average pooling"),
    BB__OP("BatchNormalization",
           BB__PORTS(BB__P("X", TENSOR), BB__P("scale", TENSOR), BB__P("B", TENSOR),
                     BB__P("input_mean", TENSOR), BB__P("input_var", TENSOR)),
           BB__PORTS(BB__P("Y", TENSOR), BB__P_OPT("running_mean", TENSOR),
                     BB__P_OPT("running_var", TENSOR)),
           BB__ATTRS(BB__A("epsilon", FLOAT, "1e-05"), BB__A("momentum", FLOAT, "0.9"),
                     BB__A("training_mode", INT, "0")),
           0, "Batch normalization"),
    BB__OP("Cast", BB__PORTS(BB__P("input", TENSOR)), BB__PORTS(BB__P("output", TENSOR)),
           BB__ATTRS(BB__A_REQ("to", INT), BB__A("saturate", INT, "1")), 0,
           "Converts to the element type `to`"),
    BB__OP("Concat", BB__PORTS(BB__P_VAR("inputs", TENSOR)),
           BB__PORTS(BB__P("concat_result", TENSOR)), BB__ATTRS(BB__A_REQ("axis", INT)), 0,
           "Concatenates along axis"),
    BB__OP("Constant", BB__NONE, BB__PORTS(BB__P("output", TENSOR)),
           BB__ATTRS(BB__A_OPT("sparse_value", SPARSE_TENSOR), BB__A_OPT("value", TENSOR),
                     BB__A_OPT("value_float", FLOAT), BB__A_OPT("value_floats", FLOATS),
                     BB__A_OPT("value_int", INT), BB__A_OPT("value_ints", INTS),
                     BB__A_OPT("value_string", STRING), BB__A_OPT("value_strings", STRINGS)),
           0, "Constant tensor from exactly one value* attribute"),
    BB__OP("Conv", BB__PORTS(BB__P("X", TENSOR), BB__P("W", TENSOR), BB__P_OPT("B", TENSOR)),
           BB__PORTS(BB__P("Y", TENSOR)),
           BB__ATTRS(BB__A("auto_pad", STRING, "NOTSET"), BB__A_OPT("dilations", INTS),
                     BB__A("group", INT, "1"), BB__A_OPT("kernel_shape", INTS),
                     BB__A_OPT("pads", INTS), BB__A_OPT("strides", INTS)),
           0, "N-d convolution"),
    BINARY("Div", "Elementwise a / b (broadcasting)"),
    BB__OP("Dot", BB__PORTS(BB__P("A", TENSOR), BB__P("B", TENSOR)),
           BB__PORTS(BB__P("Y", TENSOR)), BB__NONE, 0,
           "Inner product of two 1-D tensors (BB addition)"),
    COMPARE("Equal", "Elementwise a == b"),
    UNARY("Exp", "input", "output", "Elementwise e^x"),
    BB__OP("Flatten", BB__PORTS(BB__P("input", TENSOR)), BB__PORTS(BB__P("output", TENSOR)),
           BB__ATTRS(BB__A("axis", INT, "1")), 0, "Flattens to 2-D around axis"),
    BB__OP("Gather", BB__PORTS(BB__P("data", TENSOR), BB__P("indices", TENSOR)),
           BB__PORTS(BB__P("output", TENSOR)), BB__ATTRS(BB__A("axis", INT, "0")), 0,
           "Gathers entries along axis"),
    BB__OP("Gelu", BB__PORTS(BB__P("X", TENSOR)), BB__PORTS(BB__P("Y", TENSOR)),
           BB__ATTRS(BB__A("approximate", STRING, "none")), 0,
           "Gaussian error linear unit (approximate: none | tanh)"),
    BB__OP("Gemm", BB__PORTS(BB__P("A", TENSOR), BB__P("B", TENSOR), BB__P_OPT("C", TENSOR)),
           BB__PORTS(BB__P("Y", TENSOR)),
           BB__ATTRS(BB__A("alpha", FLOAT, "1.0"), BB__A("beta", FLOAT, "1.0"),
                     BB__A("transA", INT, "0"), BB__A("transB", INT, "0")),
           0, "alpha * A' B' + beta * C"),
    UNARY("GlobalAveragePool", "X", "Y", "Average over all spatial dimensions"),
    COMPARE("Greater", "Elementwise a > b"),
    UNARY("Identity", "input", "output", "Identity"),
    BB__OP("If", BB__PORTS(BB__P("cond", TENSOR_BOOL)), BB__PORTS(BB__P_VAR("outputs", ANY)),
           BB__ATTRS(BB__A_REQ("else_branch", GRAPH), BB__A_REQ("then_branch", GRAPH)), 0,
           "Runs then_branch or else_branch"),
    BB__OP("LayerNormalization",
           BB__PORTS(BB__P("X", TENSOR), BB__P("Scale", TENSOR), BB__P_OPT("B", TENSOR)),
           BB__PORTS(BB__P("Y", TENSOR), BB__P_OPT("Mean", TENSOR),
                     BB__P_OPT("InvStdDev", TENSOR)),
           BB__ATTRS(BB__A("axis", INT, "-1"), BB__A("epsilon", FLOAT, "1e-05"),
                     BB__A("stash_type", INT, "1")),
           0, "Layer normalization"),
    BB__OP("LeakyRelu", BB__PORTS(BB__P("X", TENSOR)), BB__PORTS(BB__P("Y", TENSOR)),
           BB__ATTRS(BB__A("alpha", FLOAT, "0.01")), 0, "x >= 0 ? x : alpha * x"),
    COMPARE("Less", "Elementwise a < b"),
    UNARY("Log", "input", "output", "Elementwise natural log"),
    BB__OP("Loop",
           BB__PORTS(BB__P_OPT("M", TENSOR_I64), BB__P_OPT("cond", TENSOR_BOOL),
                     BB__P_VAR_OPT("v_initial", ANY)),
           BB__PORTS(BB__P_VAR("v_final_and_scan_outputs", ANY)),
           BB__ATTRS(BB__A_REQ("body", GRAPH)), 0, "Runs body up to M times while cond"),
    BB__OP("MatMul", BB__PORTS(BB__P("A", TENSOR), BB__P("B", TENSOR)),
           BB__PORTS(BB__P("Y", TENSOR)), BB__NONE, 0, "Matrix product (numpy semantics)"),
    BB__OP("MaxPool", BB__PORTS(BB__P("X", TENSOR)),
           BB__PORTS(BB__P("Y", TENSOR), BB__P_OPT("Indices", TENSOR_I64)),
           BB__ATTRS(BB__A("auto_pad", STRING, "NOTSET"), BB__A("ceil_mode", INT, "0"),
                     BB__A_OPT("dilations", INTS), BB__A_REQ("kernel_shape", INTS),
                     BB__A_OPT("pads", INTS), BB__A("storage_order", INT, "0"),
                     BB__A_OPT("strides", INTS)),
           0, "Max pooling"),
    BINARY("Mul", "Elementwise a * b (broadcasting)"),
    UNARY("Neg", "X", "Y", "Elementwise -x"),
    FILL("Ones", "Tensor of the given shape filled with 1 (BB addition)"),
    BB__OP("Pow", BB__PORTS(BB__P("X", TENSOR), BB__P("Y", TENSOR)),
           BB__PORTS(BB__P("Z", TENSOR)), BB__NONE, 0, "Elementwise x ^ y"),
    REDUCE("ReduceMax", "Maximum over axes"),
    REDUCE("ReduceMean", "Mean over axes"),
    REDUCE("ReduceMin", "Minimum over axes"),
    REDUCE("ReduceSum", "Sum over axes"),
    UNARY("Relu", "X", "Y", "max(0, x)"),
    BB__OP("Reshape", BB__PORTS(BB__P("data", TENSOR), BB__P("shape", TENSOR_I64)),
           BB__PORTS(BB__P("reshaped", TENSOR)), BB__ATTRS(BB__A("allowzero", INT, "0")), 0,
           "Reshapes to shape"),
    BB__OP("Scatter",
           BB__PORTS(BB__P("data", TENSOR), BB__P("indices", TENSOR), BB__P("updates", TENSOR)),
           BB__PORTS(BB__P("output", TENSOR)), BB__ATTRS(BB__A("axis", INT, "0")), 0,
           "Writes updates at indices along axis (ScatterElements semantics)"),
    UNARY("Sigmoid", "X", "Y", "1 / (1 + e^-x)"),
    BB__OP("Slice",
           BB__PORTS(BB__P("data", TENSOR), BB__P("starts", TENSOR_I64),
                     BB__P("ends", TENSOR_I64), BB__P_OPT("axes", TENSOR_I64),
                     BB__P_OPT("steps", TENSOR_I64)),
           BB__PORTS(BB__P("output", TENSOR)), BB__NONE, 0, "Strided slice"),
    BB__OP("Softmax", BB__PORTS(BB__P("input", TENSOR)), BB__PORTS(BB__P("output", TENSOR)),
           BB__ATTRS(BB__A("axis", INT, "-1")), 0, "Softmax along axis"),
    BB__OP("Split", BB__PORTS(BB__P("input", TENSOR), BB__P_OPT("split", TENSOR_I64)),
           BB__PORTS(BB__P_VAR("outputs", TENSOR)),
           BB__ATTRS(BB__A("axis", INT, "0"), BB__A_OPT("num_outputs", INT)), 0,
           "Splits along axis by split sizes or into num_outputs parts"),
    UNARY("Sqrt", "X", "Y", "Elementwise square root"),
    BB__OP("Squeeze", BB__PORTS(BB__P("data", TENSOR), BB__P_OPT("axes", TENSOR_I64)),
           BB__PORTS(BB__P("squeezed", TENSOR)), BB__NONE, 0, "Removes size-1 dimensions"),
    BINARY("Sub", "Elementwise a - b (broadcasting)"),
    UNARY("Tanh", "input", "output", "Elementwise tanh"),
    BB__OP("Transpose", BB__PORTS(BB__P("data", TENSOR)), BB__PORTS(BB__P("transposed", TENSOR)),
           BB__ATTRS(BB__A_OPT("perm", INTS)), 0, "Permutes dimensions (default: reverse)"),
    BB__OP("Unsqueeze", BB__PORTS(BB__P("data", TENSOR), BB__P("axes", TENSOR_I64)),
           BB__PORTS(BB__P("expanded", TENSOR)), BB__NONE, 0, "Inserts size-1 dimensions"),
    BB__OP("Where",
           BB__PORTS(BB__P("condition", TENSOR_BOOL), BB__P("X", TENSOR), BB__P("Y", TENSOR)),
           BB__PORTS(BB__P("output", TENSOR)), BB__NONE, 0, "condition ? X : Y elementwise"),
    FILL("Zeros", "Tensor of the given shape filled with 0 (BB addition)"),
};

const bb_opset_schema bb__opset_onnx = {
    .domain = BB_DOMAIN_ONNX,
    .version = BB_ONNX_OPSET_VERSION,
    .role = BB_ROLE_BACKEND,
    .ops = ONNX_OPS,
    .n_ops = BB__COUNT(ONNX_OPS),
    .doc = "ai.onnx subset every Backend supports (canonical ONNX semantics)",
};
