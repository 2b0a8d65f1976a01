/*
 * cpu_backend.c — the cpu::CpuBackend component type: a Backend declaring
 * the ai.onnx opset (the 51 ops of bb/opsets.h's catalog, at its version)
 * with every op's ports, per-op dispatch,
 * whole-graph execution (graph.c), and materialize_from_wire adopting a
 * TensorProto payload's raw_data without a copy when it is aligned.
 *
 * dispatch trusts call->op_index (the engine resolves it at install time
 * against the declared ops[]): the hot path is one array index into the
 * kernel table, the same table the graph executor uses. An If / Loop
 * dispatched per op may carry captured outer-scope values as extra trailing
 * inputs, named by node metadata BB_META_OUTER_SCOPE_PREFIX "<k>"
 * (`bbd run` stamps them): they become the subgraphs' enclosing scope.
 *
 * Config (JSON, all optional): {"threads": 1, "max_cached_graphs": 256}.
 * threads sets OpenBLAS's thread count at create; OpenBLAS keeps that
 * setting process-wide, so the default of 1 keeps many engines in one
 * process from oversubscribing the CPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <cjson/cJSON.h>

#include <bb/meta.h>
#include <bb/opsets.h>

#include "cpu_internal.h"

#define MAX_THREADS 256
#define DEFAULT_MAX_PLANS 256
#define MAX_OUTER_SCOPE 4096 /* captured outer values of one per-op If/Loop */

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

/* ---- the instance ------------------------------------------------------------ */

static bool domain_is_onnx(const char *d)
{
    return !d || !*d || strcmp(d, "ai.onnx") == 0;
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

static int parse_config(const char *json, int *threads, size_t *max_plans, bb_error *err)
{
    *threads = 1;
    *max_plans = DEFAULT_MAX_PLANS;
    if (!json || !*json)
        return BB_OK;
    cJSON *root = cJSON_Parse(json);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return bb_error_set(err, BB_ECONFIG, CPU_NAME ": config is not a JSON object");
    }
    int rc = BB_OK;
    for (cJSON *it = root->child; it && rc == BB_OK; it = it->next) {
        const char *k = it->string ? it->string : "";
        if (strcmp(k, "threads") == 0) {
            if (!cJSON_IsNumber(it) || it->valuedouble < 1 || it->valuedouble > MAX_THREADS ||
                it->valuedouble != (double)(int)it->valuedouble)
                rc = bb_error_set(err, BB_ECONFIG, CPU_NAME ": config threads must be an "
                                  "integer in 1..%d", MAX_THREADS);
            else
                *threads = (int)it->valuedouble;
        } else if (strcmp(k, "max_cached_graphs") == 0) {
            if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble > 1e6 ||
                it->valuedouble != (double)(long)it->valuedouble)
                rc = bb_error_set(err, BB_ECONFIG, CPU_NAME ": config max_cached_graphs must "
                                  "be an integer in 0..1000000");
            else
                *max_plans = (size_t)it->valuedouble;
        } else {
            rc = bb_error_set(err, BB_ECONFIG, CPU_NAME ": unknown config key \"%s\"", k);
        }
    }
    cJSON_Delete(root);
    return rc;
}

static int cpu_create(const bb_create_args *args, void **out, bb_error *err)
{
    int threads;
    size_t max_plans;
    int rc = parse_config(args ? args->config_json : NULL, &threads, &max_plans, err);
    if (rc)
        return rc;
    cpu_backend *be = calloc(1, sizeof *be);
    if (!be)
        return bb_error_set(err, BB_ENOMEM, CPU_NAME ": out of memory");
    be->threads = threads;
    be->plans = cpu_plan_cache_new(max_plans);
    if (!be->plans) {
        free(be);
        return bb_error_set(err, BB_ENOMEM, CPU_NAME ": out of memory");
    }
    openblas_set_num_threads(threads);
    *out = be;
    return BB_OK;
}

static void cpu_destroy(void *inst)
{
    cpu_backend *be = inst;
    if (!be)
        return;
    cpu_plan_cache_free(be->plans);
    free(be->scratch);
    free(be);
}

/* A per-op If/Loop's outer scope: the trailing inputs named by the node's
 * BB_META_OUTER_SCOPE_PREFIX "<k>" metadata (k = 0, 1, ...). *names is
 * malloc'd (NULL when there are none). */
static int outer_scope(cpu_run *r, const bb_dispatch_call *call, const char ***names,
                       cpu_frame *f)
{
    *names = NULL;
    const bb_kv_list *md = call->node ? &call->node->metadata : NULL;
    uint32_t n = 0;
    char key[sizeof BB_META_OUTER_SCOPE_PREFIX + 12];
    for (; md && n < MAX_OUTER_SCOPE; n++) {
        snprintf(key, sizeof key, "%s%u", BB_META_OUTER_SCOPE_PREFIX, n);
        if (!bb_kv_get(md, key))
            break;
    }
    if (n == 0)
        return BB_OK;
    if (n == MAX_OUTER_SCOPE || n > call->n_inputs)
        return cpu_fail(r, BB_EINVAL, "%u outer-scope names for %u inputs (at most %d)", n,
                        call->n_inputs, MAX_OUTER_SCOPE - 1);
    *names = malloc(n * sizeof **names);
    if (!*names)
        return cpu_fail(r, BB_ENOMEM, "out of memory");
    for (uint32_t k = 0; k < n; k++) {
        snprintf(key, sizeof key, "%s%u", BB_META_OUTER_SCOPE_PREFIX, k);
        (*names)[k] = bb_kv_get(md, key);
    }
    *f = (cpu_frame){.vals = call->inputs + (call->n_inputs - n), .names = *names, .n_names = n};
    return BB_OK;
}

static bb_dispatch_result cpu_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                       bb_value **outputs, bb_error *err)
{
    (void)ctx;
    cpu_run r = {.be = inst, .node = call->node, .err = err};
    int op = -1;
    if (call->op_index < CPU_N_OPS) {
        const char *want = cpu_op_decls[call->op_index].op_type;
        if (!call->op_type || call->op_type == want || strcmp(call->op_type, want) == 0)
            op = (int)call->op_index;
    }
    if (op < 0)
        op = cpu_op_lookup(call->op_type);
    if (op < 0 || !domain_is_onnx(call->domain)) {
        bb_error_set(err, BB_EUNSUPPORTED, CPU_NAME ": op %s::%s not supported",
                     call->domain && *call->domain ? call->domain : "ai.onnx",
                     call->op_type ? call->op_type : "?");
        return BB_DISPATCH_NOW_ERR;
    }
    r.op = (cpu_op)op;
    uint32_t n_in = call->n_inputs;
    const char **names = NULL;
    cpu_frame captured = {0};
    if (r.op == CPU_OP_If || r.op == CPU_OP_Loop) {
        int rc = outer_scope(&r, call, &names, &captured);
        if (rc)
            return BB_DISPATCH_NOW_ERR;
        n_in -= captured.n_names;
        if (captured.n_names)
            r.scope = &captured;
    }
    int rc = cpu_run_kernel(&r, call->inputs, n_in, outputs, call->n_outputs);
    free(names);
    return rc == BB_OK ? BB_DISPATCH_NOW_OK : BB_DISPATCH_NOW_ERR;
}

static int cpu_materialize(void *inst, uint64_t type_hash, bb_buffer *payload, bb_value **out,
                           bb_error *err)
{
    (void)inst;
    const bb_type_node *t = bb_type_by_wire_hash(type_hash);
    if (!t || !bb_type_is_a(t, &BB_TYPE_TENSOR))
        return bb_error_set(err, BB_ETYPE, CPU_NAME ": materialize_from_wire: type hash "
                            "0x%016llx is not a tensor type", (unsigned long long)type_hash);
    if (!payload)
        return bb_error_set(err, BB_EINVAL, CPU_NAME ": materialize_from_wire: no payload");
    int rc = bb_value_decode_buf(type_hash, payload, NULL, out, err);
    if (rc)
        bb_error_prefix(err, CPU_NAME ": materialize_from_wire");
    return rc;
}

/* ---- declarations ------------------------------------------------------------ */

/* The catalog's ai.onnx version (bb/opsets.h): the op signatures follow it. */
static const bb_opset_decl OPSETS[] = {{"ai.onnx", BB_ONNX_OPSET_VERSION, cpu_op_decls, CPU_N_OPS}};

static const bb_config_decl CONFIG[] = {
    {"threads", "int", "1", "OpenBLAS threads (a process-wide OpenBLAS setting)"},
    {"max_cached_graphs", "int", "256",
     "graph plans kept per instance (keyed by graph pointer); 0 disables the cache"},
};

static const bb_component_type CPU_BACKEND = {
    .struct_size = sizeof(bb_component_type),
    .abi_major = BB_PLUGIN_ABI_MAJOR,
    .abi_minor = BB_PLUGIN_ABI_MINOR,
    .type_name = CPU_NAME,
    .role = BB_ROLE_BACKEND,
    .doc = "CPU tensor backend: the ai.onnx subset in plain C and OpenBLAS",
    .opsets = OPSETS,
    .n_opsets = 1,
    .config = CONFIG,
    .n_config = N_(CONFIG),
    .create = cpu_create,
    .destroy = cpu_destroy,
    .dispatch = cpu_dispatch,
    .materialize_from_wire = cpu_materialize,
    .execute_graph = cpu_execute_graph,
};

static const bb_component_type *const TYPES[] = {&CPU_BACKEND};

static const bb_plugin_info INFO = {
    .struct_size = sizeof(bb_plugin_info),
    .abi_major = BB_PLUGIN_ABI_MAJOR,
    .abi_minor = BB_PLUGIN_ABI_MINOR,
    .name = "cpu",
    .version = "1.0",
    .types = TYPES,
    .n_types = 1,
    .value_layout = BB_PLUGIN_VALUE_LAYOUT,
};

BB_PLUGIN_EXPORT const bb_plugin_info *bb_plugin_entry(void)
{
    return &INFO;
}
