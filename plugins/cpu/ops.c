/*
 * ops.c — the op table of cpu::CpuBackend: every op's declared ports and
 * its kernel (in op_index order, CPU_OPS of cpu_internal.h), the checked
 * kernel call that per-op dispatch and the graph executor share, and the
 * instance scratch the kernels borrow.
 *
 * Everything here is independent of the component (cpu_backend.c), so
 * another plugin can link the kernels (plugins/onnx/build.mk does: its
 * trainer runs the same forward kernels).
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

/* ---- ports ------------------------------------------------------------------ */

#define T_ANY (&BB_TYPE_TENSOR)
#define P(n) {.name = n, .type = T_ANY}
#define PO(n) {.name = n, .type = T_ANY, .optional = true}
#define PV(n) {.name = n, .type = T_ANY, .variadic = true}
#define P_I64(n) {.name = n, .type = &BB_TYPE_TENSOR_I64}
#define PO_I64(n) {.name = n, .type = &BB_TYPE_TENSOR_I64, .optional = true}
#define P_BOOL(n) {.name = n, .type = &BB_TYPE_TENSOR_BOOL}

static const bb_port_decl IN_X[] = {P("X")};
static const bb_port_decl IN_INPUT[] = {P("input")};
static const bb_port_decl IN_DATA[] = {P("data")};
static const bb_port_decl IN_AB[] = {P("A"), P("B")};
static const bb_port_decl IN_XY[] = {P("X"), P("Y")};
static const bb_port_decl IN_GEMM[] = {P("A"), P("B"), PO("C")};
static const bb_port_decl IN_RESHAPE[] = {P("data"), P_I64("shape")};
static const bb_port_decl IN_CONCAT[] = {PV("inputs")};
static const bb_port_decl IN_SPLIT[] = {P("input"), PO_I64("split")};
static const bb_port_decl IN_SLICE[] = {P("data"), P_I64("starts"), P_I64("ends"),
                                        PO_I64("axes"), PO_I64("steps")};
static const bb_port_decl IN_AXES[] = {P("data"), PO_I64("axes")};
static const bb_port_decl IN_BN[] = {P("X"), P("scale"), P("B"), P("input_mean"),
                                     P("input_var")};
static const bb_port_decl IN_LN[] = {P("X"), P("Scale"), PO("B")};
static const bb_port_decl IN_CONV[] = {P("X"), P("W"), PO("B")};
static const bb_port_decl IN_SHAPE[] = {P_I64("shape")};
static const bb_port_decl IN_GATHER[] = {P("data"), P("indices")};
static const bb_port_decl IN_SCATTER[] = {P("data"), P("indices"), P("updates")};
static const bb_port_decl IN_IF[] = {P_BOOL("cond")};
static const bb_port_decl IN_LOOP[] = {
    {.name = "M", .type = &BB_TYPE_TENSOR_I64, .optional = true},
    {.name = "cond", .type = &BB_TYPE_TENSOR_BOOL, .optional = true},
    {.name = "v_initial", .type = &BB_TYPE_ANY, .optional = true, .variadic = true}};
static const bb_port_decl IN_WHERE[] = {P_BOOL("condition"), P("X"), P("Y")};

static const bb_port_decl OUT_Y[] = {P("Y")};
static const bb_port_decl OUT_C[] = {P("C")};
static const bb_port_decl OUT_Z[] = {P("Z")};
static const bb_port_decl OUT_OUTPUT[] = {P("output")};
static const bb_port_decl OUT_BOOL[] = {{.name = "C", .type = &BB_TYPE_TENSOR_BOOL}};
static const bb_port_decl OUT_RESHAPED[] = {P("reshaped")};
static const bb_port_decl OUT_TRANSPOSED[] = {P("transposed")};
static const bb_port_decl OUT_CONCAT[] = {P("concat_result")};
static const bb_port_decl OUT_SPLIT[] = {PV("outputs")};
static const bb_port_decl OUT_SQUEEZED[] = {P("squeezed")};
static const bb_port_decl OUT_EXPANDED[] = {P("expanded")};
static const bb_port_decl OUT_REDUCED[] = {P("reduced")};
static const bb_port_decl OUT_BN[] = {P("Y"), PO("running_mean"), PO("running_var")};
static const bb_port_decl OUT_LN[] = {P("Y"), PO("Mean"), PO("InvStdDev")};
static const bb_port_decl OUT_MAXPOOL[] = {P("Y"), {.name = "Indices",
                                                    .type = &BB_TYPE_TENSOR_I64,
                                                    .optional = true}};
static const bb_port_decl OUT_IF[] = {{.name = "outputs", .type = &BB_TYPE_ANY, .variadic = true}};
static const bb_port_decl OUT_LOOP[] = {{.name = "v_final_and_scan_outputs", .type = &BB_TYPE_ANY,
                                         .variadic = true}};
static const bb_port_decl OUT_ARGMAX[] = {P_I64("reduced")};

#define N_(a) (uint32_t)(sizeof(a) / sizeof *(a))
#define OP(name, in, out, doc) [CPU_OP_##name] = {#name, in, N_(in), out, N_(out), doc}
#define OP0(name, out, doc) [CPU_OP_##name] = {#name, NULL, 0, out, N_(out), doc}

const bb_op_decl cpu_op_decls[CPU_N_OPS] = {
    OP(Add, IN_AB, OUT_C, "A + B (broadcast)"),
    OP(Sub, IN_AB, OUT_C, "A - B (broadcast)"),
    OP(Mul, IN_AB, OUT_C, "A * B (broadcast)"),
    OP(Div, IN_AB, OUT_C, "A / B (broadcast)"),
    OP(Neg, IN_X, OUT_Y, "-X"),
    OP(Abs, IN_X, OUT_Y, "|X|"),
    OP(Sqrt, IN_X, OUT_Y, "sqrt(X)"),
    OP(Exp, IN_INPUT, OUT_OUTPUT, "exp(input)"),
    OP(Log, IN_INPUT, OUT_OUTPUT, "log(input)"),
    OP(Pow, IN_XY, OUT_Z, "X ^ Y (broadcast)"),
    OP(MatMul, IN_AB, OUT_Y, "numpy matmul"),
    OP(Gemm, IN_GEMM, OUT_Y, "alpha * A' B' + beta * C"),
    OP(Dot, IN_AB, OUT_Y, "1-D dot product, else matmul"),
    OP(Relu, IN_X, OUT_Y, "max(X, 0)"),
    OP(Sigmoid, IN_X, OUT_Y, "1 / (1 + exp(-X))"),
    OP(Tanh, IN_INPUT, OUT_OUTPUT, "tanh(input)"),
    OP(Softmax, IN_INPUT, OUT_OUTPUT, "softmax along axis (default -1)"),
    OP(LeakyRelu, IN_X, OUT_Y, "X >= 0 ? X : alpha * X"),
    OP(Gelu, IN_X, OUT_Y, "GELU, approximate none|tanh"),
    OP(Reshape, IN_RESHAPE, OUT_RESHAPED, "reshape (0 copies, -1 infers)"),
    OP(Transpose, IN_DATA, OUT_TRANSPOSED, "permute axes (perm)"),
    OP(Concat, IN_CONCAT, OUT_CONCAT, "concatenate along axis"),
    OP(Split, IN_SPLIT, OUT_SPLIT, "split along axis"),
    OP(Slice, IN_SLICE, OUT_OUTPUT, "starts/ends/axes/steps slice"),
    OP(Squeeze, IN_AXES, OUT_SQUEEZED, "remove size-1 axes"),
    /* axes optional: opset < 13 models give them as an attribute */
    OP(Unsqueeze, IN_AXES, OUT_EXPANDED, "insert size-1 axes"),
    OP(Identity, IN_INPUT, OUT_OUTPUT, "the input itself"),
    OP(Cast, IN_INPUT, OUT_OUTPUT, "convert to dtype `to`"),
    OP(ReduceSum, IN_AXES, OUT_REDUCED, "sum over axes"),
    OP(ReduceMean, IN_AXES, OUT_REDUCED, "mean over axes"),
    OP(ReduceMax, IN_AXES, OUT_REDUCED, "max over axes"),
    OP(ReduceMin, IN_AXES, OUT_REDUCED, "min over axes"),
    OP(Equal, IN_AB, OUT_BOOL, "A == B (broadcast)"),
    OP(Greater, IN_AB, OUT_BOOL, "A > B (broadcast)"),
    OP(Less, IN_AB, OUT_BOOL, "A < B (broadcast)"),
    OP(BatchNormalization, IN_BN, OUT_BN, "inference-mode batch normalization"),
    OP(LayerNormalization, IN_LN, OUT_LN, "layer normalization from axis"),
    OP(Conv, IN_CONV, OUT_Y, "convolution (im2col + GEMM)"),
    OP(MaxPool, IN_X, OUT_MAXPOOL, "max pooling"),
    OP(AveragePool, IN_X, OUT_Y, "average pooling"),
    OP(GlobalAveragePool, IN_X, OUT_Y, "mean over spatial dims"),
    OP(Zeros, IN_SHAPE, OUT_OUTPUT, "zeros of shape, attribute dtype"),
    OP(Ones, IN_SHAPE, OUT_OUTPUT, "ones of shape, attribute dtype"),
    OP0(Constant, OUT_OUTPUT, "the value attribute"),
    OP(Gather, IN_GATHER, OUT_OUTPUT, "gather along axis"),
    OP(Scatter, IN_SCATTER, OUT_OUTPUT, "scatter along axis (ScatterElements)"),
    OP(If, IN_IF, OUT_IF, "run then_branch or else_branch"),
    OP(Loop, IN_LOOP, OUT_LOOP, "run body while cond and i < M"),
    OP(Where, IN_WHERE, OUT_OUTPUT, "condition ? X : Y (broadcast)"),
    OP(ArgMax, IN_DATA, OUT_ARGMAX, "index of the maximum along axis"),
    OP(Flatten, IN_INPUT, OUT_OUTPUT, "2-D view split at axis"),
};

const cpu_kernel cpu_kernels[CPU_N_OPS] = {
#define K_(n) [CPU_OP_##n] = cpu_k_##n,
    CPU_OPS(K_)
#undef K_
};

int cpu_op_lookup(const char *op_type)
{
    if (!op_type)
        return -1;
    for (int i = 0; i < CPU_N_OPS; i++)
        if (strcmp(cpu_op_decls[i].op_type, op_type) == 0)
            return i;
    return -1;
}

/* ---- checks shared by dispatch and the graph executor ------------------------ */

static const bb_port_decl *port_at(const bb_port_decl *p, uint32_t n, uint32_t i)
{
    if (i < n)
        return &p[i];
    return n && p[n - 1].variadic ? &p[n - 1] : NULL;
}

static uint32_t required_count(const bb_port_decl *p, uint32_t n)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!p[i].optional)
            k = i + 1;
    return k;
}

int cpu_run_kernel(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out,
                   uint32_t n_out)
{
    const bb_op_decl *d = &cpu_op_decls[r->op];
    if (n_in < required_count(d->inputs, d->n_inputs))
        return cpu_fail(r, BB_EINVAL, "missing input '%s'",
                        d->inputs[n_in < d->n_inputs ? n_in : d->n_inputs - 1].name);
    for (uint32_t i = 0; i < n_in; i++) {
        const bb_port_decl *p = port_at(d->inputs, d->n_inputs, i);
        if (!p)
            return cpu_fail(r, BB_EINVAL, "%u inputs given, at most %u accepted", n_in,
                            d->n_inputs);
        const bb_value *v = in[i];
        if (!v) {
            if (!p->optional)
                return cpu_fail(r, BB_EINVAL, "missing input '%s'", p->name);
            continue;
        }
        if (p->type == &BB_TYPE_ANY)
            continue;
        if (!v->type || v->type->kind != BB_VK_TENSOR)
            return cpu_fail(r, BB_ETYPE, "input '%s' must be a tensor, got %s", p->name,
                            v->type ? v->type->name : "untyped value");
        if (p->type->elem_type && v->u.tensor.dtype != p->type->elem_type)
            return cpu_fail(r, BB_ETYPE, "input '%s' must be %s, got %s", p->name,
                            cpu_dtype_name(p->type->elem_type),
                            cpu_dtype_name(v->u.tensor.dtype));
    }
    uint32_t need = required_count(d->outputs, d->n_outputs);
    if (n_out < need || (n_out > d->n_outputs && !d->outputs[d->n_outputs - 1].variadic))
        return cpu_fail(r, BB_EINVAL, "%u outputs requested, %u..%u declared", n_out, need,
                        d->n_outputs);
    for (uint32_t i = 0; i < n_out; i++)
        out[i] = NULL;
    int rc = cpu_kernels[r->op](r, in, n_in, out, n_out);
    if (rc == BB_OK) {
        for (uint32_t i = 0; i < n_out && rc == BB_OK; i++) {
            const bb_port_decl *p = port_at(d->outputs, d->n_outputs, i);
            if (!out[i] && !(p && p->optional && !p->variadic))
                rc = cpu_fail(r, BB_ERUNTIME, "output %u was not produced", i);
        }
    }
    if (rc != BB_OK) {
        if (r->err && r->err->code == BB_OK) /* a kernel failed without a message */
            cpu_fail(r, rc, "failed (%s)", bb_status_name(rc));
        for (uint32_t i = 0; i < n_out; i++) {
            bb_value_unref(out[i]);
            out[i] = NULL;
        }
    }
    return rc;
}

void *cpu_scratch(cpu_run *r, size_t bytes)
{
    cpu_backend *be = r->be;
    if (bytes <= be->scratch_cap)
        return be->scratch;
    size_t cap = (bytes + 63) & ~(size_t)63;
    if (cap < bytes) {
        cpu_fail(r, BB_ELIMIT, "scratch of %zu bytes too large", bytes);
        return NULL;
    }
    free(be->scratch);
    be->scratch = aligned_alloc(64, cap);
    be->scratch_cap = be->scratch ? cap : 0;
    if (!be->scratch)
        cpu_fail(r, BB_ENOMEM, "out of memory for %zu bytes of scratch", bytes);
    return be->scratch;
}
