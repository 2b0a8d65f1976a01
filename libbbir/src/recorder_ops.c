/*
 * recorder_ops.c — one thin C function per op of every built-in catalog
 * (the DSL surface): ai.onnx on a Backend slot, the role.* ops on role
 * slots, syscalls, wire, address book, and Bundle / Unbundle. Each wraps
 * bb__rec_node with the op's attributes and output types; the catalogs
 * (bb/opsets.h) check arity and attribute types.
 */
#include "recorder_internal.h"

#include <string.h>

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ---- helpers ---------------------------------------------------------------- */

/* Record and copy outputs into the caller's (possibly NULL) pointers. */
static bb_node *rec(bb_rec *g, bb_slot *slot, const char *domain, const char *op,
                    const bb_val *in, size_t n_in, const bb_rec_attr *at, size_t n_at,
                    const bb_type_node *const *types, bb_val *const *outs, size_t n_out)
{
    bb_val tmp[16];
    if (n_out > N_OF(tmp)) {
        if (g && !bb__rec_ready(g, op))
            bb__rec_fail(g->r, g, op, "too many outputs (%zu)", n_out);
        return NULL;
    }
    for (size_t i = 0; i < n_out; i++)
        if (outs && outs[i])
            *outs[i] = BB_VAL_NONE;
    if (!g)
        return NULL;
    bb__op_req q = {.slot = slot, .node_domain = domain, .op_type = op, .in = in,
                    .n_in = n_in, .attrs = at, .n_attrs = n_at, .out_types = types,
                    .out = tmp, .n_out = n_out};
    bb_node *n = bb__rec_node(g, &q);
    if (n && outs)
        for (size_t i = 0; i < n_out; i++)
            if (outs[i])
                *outs[i] = tmp[i];
    return n;
}

static bb_val rec1(bb_rec *g, bb_slot *slot, const char *domain, const char *op,
                   const bb_val *in, size_t n_in, const bb_rec_attr *at, size_t n_at,
                   const bb_type_node *type)
{
    bb_val v = BB_VAL_NONE;
    bb_val *outs[1] = {&v};
    const bb_type_node *types[1] = {type};
    rec(g, slot, domain, op, in, n_in, at, n_at, type ? types : NULL, outs, 1);
    return v;
}

static int status_of(bb_rec *g, bb_node *n)
{
    if (n)
        return BB_OK;
    if (!g)
        return BB_EINVAL;
    return g->r->err.code ? g->r->err.code : BB_ERECORD;
}

/* The tensor leaf of v, else the polymorphic tensor. */
static const bb_type_node *tensor_like(bb_val v)
{
    if (v.g && v.type && bb_type_is_a(v.type, &BB_TYPE_TENSOR))
        return v.type;
    return &BB_TYPE_TENSOR;
}

/* The type of v, ANY when unknown. */
static const bb_type_node *type_of(bb_val v)
{
    return v.g && v.type ? v.type : &BB_TYPE_ANY;
}

/* Propagate v's peer-class tag onto out (same-typed pass-through ops). */
static void pass_class(bb_rec *g, bb_val from, bb_val to)
{
    if (!g || !bb_val_ok(to))
        return;
    rec_value *a = bb__rec_value(g, from), *b = bb__rec_value(g, to);
    if (a && b)
        b->of_class = a->of_class;
}

static bb_val onnx1(bb_rec *g, bb_slot *be, const char *op, const bb_val *in, size_t n_in,
                    const bb_rec_attr *at, size_t n_at, const bb_type_node *type)
{
    return rec1(g, be, BB_DOMAIN_ONNX, op, in, n_in, at, n_at, type);
}

/* A role op: recorded under the slot's atomic domain when it has one (with
 * original_op), else under the role's domain; checked against the role
 * catalog either way. */
static bb_node *role_rec(bb_rec *g, bb_slot *slot, const char *role_domain, const char *op,
                         const bb_val *in, size_t n_in, const bb_rec_attr *at, size_t n_at,
                         bb_val *const *outs, size_t n_out)
{
    bb_val tmp[4];
    for (size_t i = 0; i < n_out; i++)
        if (outs[i])
            *outs[i] = BB_VAL_NONE;
    if (!g)
        return NULL;
    bb__op_req q = {.slot = slot, .node_domain = role_domain, .catalog_domain = role_domain,
                    .op_type = op, .in = in, .n_in = n_in, .attrs = at, .n_attrs = n_at,
                    .out = tmp, .n_out = n_out};
    if (slot && slot->atomic_domain && slot->m == g->m) {
        q.node_domain = slot->atomic_domain;
        q.original_op = bb_arena_sprintf(g->r->arena, "%s::%s", role_domain, op);
        if (!q.original_op) {
            bb__rec_oom(g->r, g, op);
            return NULL;
        }
    }
    bb_node *n = bb__rec_node(g, &q);
    if (n)
        for (size_t i = 0; i < n_out; i++)
            if (outs[i])
                *outs[i] = tmp[i];
    return n;
}

static bb_val role1(bb_rec *g, bb_slot *slot, const char *dom, const char *op,
                    const bb_val *in, size_t n_in, const bb_rec_attr *at, size_t n_at)
{
    bb_val v = BB_VAL_NONE;
    bb_val *outs[1] = {&v};
    role_rec(g, slot, dom, op, in, n_in, at, n_at, outs, 1);
    return v;
}

/* Outputs to record for an op whose trailing output the caller may skip:
 * all of them when wanted, else the catalog minimum. */
static size_t outputs_wanted(const char *dom, const char *op, size_t all, bool want_last)
{
    if (want_last)
        return all;
    const bb_op_schema *s = bb_op_schema_find(dom, op);
    if (!s)
        return all;
    uint32_t lo, hi;
    bb_op_output_arity(s, &lo, &hi);
    return lo < all ? all - 1 : all;
}

/* ---- ai.onnx ------------------------------------------------------------------ */

#define BB__ONNX_DEF1(fn, op)                                              \
    bb_val bb_onnx_##fn(bb_rec *g, bb_slot *backend, bb_val x)             \
    {                                                                      \
        return onnx1(g, backend, op, &x, 1, NULL, 0, tensor_like(x));      \
    }
BB__ONNX_UNARY(BB__ONNX_DEF1)
#undef BB__ONNX_DEF1

static bool is_compare(const char *op)
{
    return !strcmp(op, "Equal") || !strcmp(op, "Greater") || !strcmp(op, "Less");
}

#define BB__ONNX_DEF2(fn, op)                                                       \
    bb_val bb_onnx_##fn(bb_rec *g, bb_slot *backend, bb_val a, bb_val b)            \
    {                                                                               \
        bb_val in[2] = {a, b};                                                      \
        return onnx1(g, backend, op, in, 2, NULL, 0,                                \
                     is_compare(op) ? &BB_TYPE_TENSOR_BOOL : tensor_like(a));       \
    }
BB__ONNX_BINARY(BB__ONNX_DEF2)
#undef BB__ONNX_DEF2

bb_val bb_onnx_argmax(bb_rec *g, bb_slot *backend, bb_val data, int64_t axis, int64_t keepdims)
{
    bb_rec_attr at[] = {BB_RA_INT("axis", axis), BB_RA_INT("keepdims", keepdims)};
    return onnx1(g, backend, "ArgMax", &data, 1, at, N_OF(at), &BB_TYPE_TENSOR_I64);
}

bb_val bb_onnx_flatten(bb_rec *g, bb_slot *backend, bb_val x, int64_t axis)
{
    bb_rec_attr at[] = {BB_RA_INT("axis", axis)};
    return onnx1(g, backend, "Flatten", &x, 1, at, N_OF(at), tensor_like(x));
}

bb_val bb_onnx_where(bb_rec *g, bb_slot *backend, bb_val cond, bb_val x, bb_val y)
{
    bb_val in[] = {cond, x, y};
    return onnx1(g, backend, "Where", in, N_OF(in), NULL, 0, tensor_like(x));
}

bb_val bb_onnx_gemm(bb_rec *g, bb_slot *backend, bb_val a, bb_val b, bb_val c, float alpha,
                    float beta, int64_t trans_a, int64_t trans_b)
{
    bb_val in[] = {a, b, c};
    bb_rec_attr at[] = {BB_RA_FLOAT("alpha", alpha), BB_RA_FLOAT("beta", beta),
                        BB_RA_INT("transA", trans_a), BB_RA_INT("transB", trans_b)};
    return onnx1(g, backend, "Gemm", in, N_OF(in), at, N_OF(at), tensor_like(a));
}

bb_val bb_onnx_softmax(bb_rec *g, bb_slot *backend, bb_val x, int64_t axis)
{
    bb_rec_attr at[] = {BB_RA_INT("axis", axis)};
    return onnx1(g, backend, "Softmax", &x, 1, at, N_OF(at), tensor_like(x));
}

bb_val bb_onnx_leaky_relu(bb_rec *g, bb_slot *backend, bb_val x, float alpha)
{
    bb_rec_attr at[] = {BB_RA_FLOAT("alpha", alpha)};
    return onnx1(g, backend, "LeakyRelu", &x, 1, at, N_OF(at), tensor_like(x));
}

bb_val bb_onnx_gelu(bb_rec *g, bb_slot *backend, bb_val x, const char *approximate)
{
    bb_rec_attr at[] = {BB_RA_STRING("approximate", approximate)};
    return onnx1(g, backend, "Gelu", &x, 1, at, approximate ? 1 : 0, tensor_like(x));
}

bb_val bb_onnx_transpose(bb_rec *g, bb_slot *backend, bb_val x, const int64_t *perm,
                         size_t n_perm)
{
    bb_rec_attr at[] = {{.name = "perm", .type = BB_ATTR_INTS, .ints = perm, .count = n_perm}};
    return onnx1(g, backend, "Transpose", &x, 1, at, perm ? 1 : 0, tensor_like(x));
}

bb_val bb_onnx_concat(bb_rec *g, bb_slot *backend, const bb_val *xs, size_t n, int64_t axis)
{
    bb_rec_attr at[] = {BB_RA_INT("axis", axis)};
    if (!xs && n) {
        if (!bb__rec_ready(g, "Concat"))
            bb__rec_fail(g->r, g, "ai.onnx::Concat", "NULL input array");
        return BB_VAL_NONE;
    }
    return onnx1(g, backend, "Concat", xs, n, at, N_OF(at), n ? tensor_like(xs[0]) : NULL);
}

int bb_onnx_split(bb_rec *g, bb_slot *backend, bb_val x, bb_val split, int64_t axis,
                  bb_val *out, size_t n_out)
{
    bb_val in[] = {x, split};
    bool sizes = bb_val_ok(split);
    bb_rec_attr at[] = {BB_RA_INT("axis", axis), BB_RA_INT("num_outputs", (int64_t)n_out)};
    const bb_type_node *types[16];
    bb_val *outs[16];
    if (n_out > 16 || (n_out && !out)) {
        if (!bb__rec_ready(g, "Split"))
            bb__rec_fail(g->r, g, "ai.onnx::Split", "bad output array (%zu)", n_out);
        return g ? g->r->err.code : BB_EINVAL;
    }
    for (size_t i = 0; i < n_out; i++) {
        types[i] = tensor_like(x);
        outs[i] = &out[i];
    }
    bb_node *n = rec(g, backend, BB_DOMAIN_ONNX, "Split", in, 2, at, sizes ? 1 : 2, types,
                     outs, n_out);
    return status_of(g, n);
}

bb_val bb_onnx_slice(bb_rec *g, bb_slot *backend, bb_val data, bb_val starts, bb_val ends,
                     bb_val axes, bb_val steps)
{
    bb_val in[] = {data, starts, ends, axes, steps};
    return onnx1(g, backend, "Slice", in, N_OF(in), NULL, 0, tensor_like(data));
}

bb_val bb_onnx_squeeze(bb_rec *g, bb_slot *backend, bb_val data, bb_val axes)
{
    bb_val in[] = {data, axes};
    return onnx1(g, backend, "Squeeze", in, N_OF(in), NULL, 0, tensor_like(data));
}

bb_val bb_onnx_unsqueeze(bb_rec *g, bb_slot *backend, bb_val data, bb_val axes)
{
    bb_val in[] = {data, axes};
    return onnx1(g, backend, "Unsqueeze", in, N_OF(in), NULL, 0, tensor_like(data));
}

bb_val bb_onnx_cast(bb_rec *g, bb_slot *backend, bb_val x, int32_t to)
{
    bb_rec_attr at[] = {BB_RA_INT("to", to)};
    const bb_type_node *t = bb_type_tensor_of(to);
    return onnx1(g, backend, "Cast", &x, 1, at, N_OF(at), t ? t : &BB_TYPE_TENSOR);
}

static bb_val reduce(bb_rec *g, bb_slot *be, const char *op, bb_val data, bb_val axes,
                     int64_t keepdims)
{
    bb_val in[] = {data, axes};
    bb_rec_attr at[] = {BB_RA_INT("keepdims", keepdims)};
    return onnx1(g, be, op, in, N_OF(in), at, N_OF(at), tensor_like(data));
}

bb_val bb_onnx_reduce_sum(bb_rec *g, bb_slot *backend, bb_val data, bb_val axes,
                          int64_t keepdims)
{
    return reduce(g, backend, "ReduceSum", data, axes, keepdims);
}

bb_val bb_onnx_reduce_mean(bb_rec *g, bb_slot *backend, bb_val data, bb_val axes,
                           int64_t keepdims)
{
    return reduce(g, backend, "ReduceMean", data, axes, keepdims);
}

bb_val bb_onnx_reduce_max(bb_rec *g, bb_slot *backend, bb_val data, bb_val axes,
                          int64_t keepdims)
{
    return reduce(g, backend, "ReduceMax", data, axes, keepdims);
}

bb_val bb_onnx_reduce_min(bb_rec *g, bb_slot *backend, bb_val data, bb_val axes,
                          int64_t keepdims)
{
    return reduce(g, backend, "ReduceMin", data, axes, keepdims);
}

bb_val bb_onnx_batch_normalization(bb_rec *g, bb_slot *backend, bb_val x, bb_val scale,
                                   bb_val bias, bb_val mean, bb_val var, float epsilon,
                                   float momentum)
{
    bb_val in[] = {x, scale, bias, mean, var};
    bb_rec_attr at[] = {BB_RA_FLOAT("epsilon", epsilon), BB_RA_FLOAT("momentum", momentum)};
    return onnx1(g, backend, "BatchNormalization", in, N_OF(in), at, N_OF(at), tensor_like(x));
}

bb_val bb_onnx_layer_normalization(bb_rec *g, bb_slot *backend, bb_val x, bb_val scale,
                                   bb_val bias, int64_t axis, float epsilon)
{
    bb_val in[] = {x, scale, bias};
    bb_rec_attr at[] = {BB_RA_INT("axis", axis), BB_RA_FLOAT("epsilon", epsilon)};
    return onnx1(g, backend, "LayerNormalization", in, N_OF(in), at, N_OF(at), tensor_like(x));
}

/* Window attributes into at[]; returns how many. */
static size_t window_attrs(const bb_onnx_window *w, bb_rec_attr *at, bool conv)
{
    size_t n = 0;
    if (!w)
        return 0;
#define WIN(field, nm)                                                                  \
    if (w->field && w->n_##field)                                                       \
        at[n++] = (bb_rec_attr){.name = nm, .type = BB_ATTR_INTS, .ints = w->field,     \
                                .count = w->n_##field};
    WIN(kernel_shape, "kernel_shape")
    WIN(strides, "strides")
    WIN(pads, "pads")
    WIN(dilations, "dilations")
#undef WIN
    if (conv && w->group)
        at[n++] = BB_RA_INT("group", w->group);
    return n;
}

bb_val bb_onnx_conv(bb_rec *g, bb_slot *backend, bb_val x, bb_val w, bb_val bias,
                    const bb_onnx_window *win)
{
    bb_val in[] = {x, w, bias};
    bb_rec_attr at[5];
    size_t n_at = window_attrs(win, at, true);
    return onnx1(g, backend, "Conv", in, N_OF(in), at, n_at, tensor_like(x));
}

bb_val bb_onnx_max_pool(bb_rec *g, bb_slot *backend, bb_val x, const bb_onnx_window *win)
{
    bb_rec_attr at[5];
    size_t n_at = window_attrs(win, at, false);
    return onnx1(g, backend, "MaxPool", &x, 1, at, n_at, tensor_like(x));
}

bb_val bb_onnx_average_pool(bb_rec *g, bb_slot *backend, bb_val x, const bb_onnx_window *win)
{
    bb_rec_attr at[5];
    size_t n_at = window_attrs(win, at, false);
    return onnx1(g, backend, "AveragePool", &x, 1, at, n_at, tensor_like(x));
}

static bb_val fill(bb_rec *g, bb_slot *be, const char *op, bb_val shape, int32_t dtype)
{
    bb_rec_attr at[] = {BB_RA_INT("dtype", dtype)};
    const bb_type_node *t = bb_type_tensor_of(dtype);
    return onnx1(g, be, op, &shape, 1, at, N_OF(at), t ? t : &BB_TYPE_TENSOR);
}

bb_val bb_onnx_zeros(bb_rec *g, bb_slot *backend, bb_val shape, int32_t dtype)
{
    return fill(g, backend, "Zeros", shape, dtype);
}

bb_val bb_onnx_ones(bb_rec *g, bb_slot *backend, bb_val shape, int32_t dtype)
{
    return fill(g, backend, "Ones", shape, dtype);
}

bb_val bb_onnx_constant(bb_rec *g, bb_slot *backend, const bb_tensor_proto *value)
{
    bb_rec_attr at[] = {{.name = "value", .type = BB_ATTR_TENSOR, .t = value}};
    const bb_type_node *t = value ? bb_type_tensor_of(value->data_type) : NULL;
    return onnx1(g, backend, "Constant", NULL, 0, at, N_OF(at), t ? t : &BB_TYPE_TENSOR);
}

bb_val bb_onnx_gather(bb_rec *g, bb_slot *backend, bb_val data, bb_val indices, int64_t axis)
{
    bb_val in[] = {data, indices};
    bb_rec_attr at[] = {BB_RA_INT("axis", axis)};
    return onnx1(g, backend, "Gather", in, N_OF(in), at, N_OF(at), tensor_like(data));
}

bb_val bb_onnx_scatter(bb_rec *g, bb_slot *backend, bb_val data, bb_val indices,
                       bb_val updates, int64_t axis)
{
    bb_val in[] = {data, indices, updates};
    bb_rec_attr at[] = {BB_RA_INT("axis", axis)};
    return onnx1(g, backend, "Scatter", in, N_OF(in), at, N_OF(at), tensor_like(data));
}

/* Multi-output ops with caller arrays of any size up to 16, typed ANY. */
static int rec_array(bb_rec *g, bb_slot *slot, const char *dom, const char *op,
                     const bb_val *in, size_t n_in, const bb_rec_attr *at, size_t n_at,
                     bb_val *out, size_t n_out)
{
    bb_val *outs[16];
    if (n_out > 16 || (n_out && !out)) {
        if (g && !bb__rec_ready(g, op))
            bb__rec_fail(g->r, g, op, "bad output array (%zu outputs)", n_out);
        return g ? (g->r->err.code ? g->r->err.code : BB_ERECORD) : BB_EINVAL;
    }
    for (size_t i = 0; i < n_out; i++)
        outs[i] = &out[i];
    return status_of(g, rec(g, slot, dom, op, in, n_in, at, n_at, NULL, outs, n_out));
}

int bb_onnx_if(bb_rec *g, bb_slot *backend, bb_val cond, const bb_graph *then_branch,
               const bb_graph *else_branch, bb_val *out, size_t n_out)
{
    bb_rec_attr at[] = {{.name = "then_branch", .type = BB_ATTR_GRAPH, .g = then_branch},
                        {.name = "else_branch", .type = BB_ATTR_GRAPH, .g = else_branch}};
    return rec_array(g, backend, BB_DOMAIN_ONNX, "If", &cond, 1, at, N_OF(at), out, n_out);
}

int bb_onnx_loop(bb_rec *g, bb_slot *backend, bb_val max_trip, bb_val cond,
                 const bb_val *carried, size_t n_carried, const bb_graph *body, bb_val *out,
                 size_t n_out)
{
    bb_val in[18];
    if (n_carried > 16 || (n_carried && !carried)) {
        if (g && !bb__rec_ready(g, "Loop"))
            bb__rec_fail(g->r, g, "ai.onnx::Loop", "bad carried array (%zu)", n_carried);
        return g ? (g->r->err.code ? g->r->err.code : BB_ERECORD) : BB_EINVAL;
    }
    in[0] = max_trip;
    in[1] = cond;
    for (size_t i = 0; i < n_carried; i++)
        in[2 + i] = carried[i];
    bb_rec_attr at[] = {{.name = "body", .type = BB_ATTR_GRAPH, .g = body}};
    return rec_array(g, backend, BB_DOMAIN_ONNX, "Loop", in, 2 + n_carried, at, N_OF(at), out,
                     n_out);
}

/* ---- role.model --------------------------------------------------------------- */

#define MODEL BB_DOMAIN_ROLE_MODEL

bb_val bb_role_model_forward(bb_rec *g, bb_slot *model, bb_val input)
{
    return role1(g, model, MODEL, "Forward", &input, 1, NULL, 0);
}

bb_val bb_role_model_backward(bb_rec *g, bb_slot *model, bb_val grad)
{
    return role1(g, model, MODEL, "Backward", &grad, 1, NULL, 0);
}

bb_val bb_role_model_step(bb_rec *g, bb_slot *model, bb_val grads)
{
    return role1(g, model, MODEL, "Step", &grads, 1, NULL, 0);
}

bb_val bb_role_model_evaluate(bb_rec *g, bb_slot *model, bb_val input, bb_val target)
{
    bb_val in[] = {input, target};
    return role1(g, model, MODEL, "Evaluate", in, N_OF(in), NULL, 0);
}

bb_val bb_role_model_apply_delta(bb_rec *g, bb_slot *model, bb_val delta)
{
    return role1(g, model, MODEL, "ApplyDelta", &delta, 1, NULL, 0);
}

bb_val bb_role_model_load_parameters(bb_rec *g, bb_slot *model, bb_val params)
{
    return role1(g, model, MODEL, "LoadParameters", &params, 1, NULL, 0);
}

bb_val bb_role_model_params(bb_rec *g, bb_slot *model)
{
    return role1(g, model, MODEL, "Params", NULL, 0, NULL, 0);
}

int bb_role_model_train(bb_rec *g, bb_slot *model, bb_val trigger, int64_t epochs,
                        bb_val *params, bb_val *num_samples)
{
    bb_rec_attr at[] = {BB_RA_INT("epochs", epochs)};
    bb_val *outs[] = {params, num_samples};
    return status_of(g, role_rec(g, model, MODEL, "Train", &trigger, 1, at, epochs > 0 ? 1 : 0,
                                 outs, N_OF(outs)));
}

int bb_role_model_evaluate_metrics(bb_rec *g, bb_slot *model, bb_val trigger, bb_val *loss,
                                   bb_val *accuracy)
{
    bb_val *outs[] = {loss, accuracy};
    return status_of(g, role_rec(g, model, MODEL, "EvaluateMetrics", &trigger, 1, NULL, 0,
                                 outs, N_OF(outs)));
}

/* ---- role.aggregator ------------------------------------------------------------ */

#define AGG BB_DOMAIN_ROLE_AGGREGATOR

bb_val bb_role_aggregator_contribute(bb_rec *g, bb_slot *agg, bb_val contribution,
                                     bb_val metadata)
{
    bb_val in[] = {contribution, metadata};
    return role1(g, agg, AGG, "Contribute", in, N_OF(in), NULL, 0);
}

bb_val bb_role_aggregator_aggregate(bb_rec *g, bb_slot *agg, bb_val trigger, bb_val *metadata)
{
    bb_val result = BB_VAL_NONE;
    bb_val *outs[] = {&result, metadata};
    role_rec(g, agg, AGG, "Aggregate", &trigger, 1, NULL, 0, outs,
             outputs_wanted(AGG, "Aggregate", 2, metadata != NULL));
    return result;
}

bb_val bb_role_aggregator_current_tensor(bb_rec *g, bb_slot *agg, bb_val trigger)
{
    return role1(g, agg, AGG, "CurrentTensor", &trigger, 1, NULL, 0);
}

/* ---- role.compressor / data_loader / index / peer_selector ----------------------- */

#define CODEC BB_DOMAIN_ROLE_COMPRESSOR

bb_val bb_role_compressor_train_codebook(bb_rec *g, bb_slot *codec, bb_val training)
{
    return role1(g, codec, CODEC, "TrainCodebook", &training, 1, NULL, 0);
}

bb_val bb_role_compressor_compress(bb_rec *g, bb_slot *codec, bb_val t)
{
    return role1(g, codec, CODEC, "Compress", &t, 1, NULL, 0);
}

bb_val bb_role_compressor_decompress(bb_rec *g, bb_slot *codec, bb_val code)
{
    return role1(g, codec, CODEC, "Decompress", &code, 1, NULL, 0);
}

#define DATA BB_DOMAIN_ROLE_DATA_LOADER

int bb_role_data_loader_next_batch(bb_rec *g, bb_slot *data, bb_val *batch, bb_val *labels)
{
    bb_val *outs[] = {batch, labels};
    return status_of(g, role_rec(g, data, DATA, "NextBatch", NULL, 0, NULL, 0, outs,
                                 outputs_wanted(DATA, "NextBatch", 2, labels != NULL)));
}

bb_val bb_role_data_loader_reset(bb_rec *g, bb_slot *data, bb_val trigger)
{
    return role1(g, data, DATA, "Reset", &trigger, 1, NULL, 0);
}

bb_val bb_role_data_loader_on_data_loaded(bb_rec *g, bb_slot *data)
{
    return role1(g, data, DATA, "OnDataLoaded", NULL, 0, NULL, 0);
}

#define INDEX BB_DOMAIN_ROLE_INDEX

bb_val bb_role_index_add(bb_rec *g, bb_slot *index, bb_val vec)
{
    return role1(g, index, INDEX, "Add", &vec, 1, NULL, 0);
}

bb_val bb_role_index_search(bb_rec *g, bb_slot *index, bb_val query, int64_t k)
{
    bb_rec_attr at[] = {BB_RA_INT("k", k)};
    return role1(g, index, INDEX, "Search", &query, 1, at, N_OF(at));
}

bb_val bb_role_index_remove(bb_rec *g, bb_slot *index, bb_val id)
{
    return role1(g, index, INDEX, "Remove", &id, 1, NULL, 0);
}

bb_val bb_role_index_train(bb_rec *g, bb_slot *index, bb_val samples)
{
    return role1(g, index, INDEX, "Train", &samples, 1, NULL, 0);
}

#define PEERS BB_DOMAIN_ROLE_PEER_SELECTOR

/* Stamp node n (which produced v) and tag v with the peer class v's peers
 * are drawn from. */
static bb_val stamp_class(bb_rec *g, bb_node *n, bb_val v, const char *of_class)
{
    if (!*of_class) {
        bb__rec_fail(g->r, g, "ai.bytesandbrains.role.peer_selector", "empty of_class");
        return BB_VAL_NONE;
    }
    rec_value *rv = bb__rec_value(g, v);
    bb_arena *ma = g->r->model->arena;
    if (bb__rec_meta(g, n, BB_META_PEER_CLASS, of_class))
        return BB_VAL_NONE;
    if (!(rv->of_class = bb_arena_strdup(ma, of_class))) {
        bb__rec_oom(g->r, g, "of_class");
        return BB_VAL_NONE;
    }
    return v;
}

/* Stamp and tag the peer class a selector's output is drawn from. */
static bb_val tag_class(bb_rec *g, bb_val v, const char *of_class)
{
    if (!of_class || !bb_val_ok(v))
        return v;
    return stamp_class(g, g->f->nodes.v[g->f->nodes.n - 1], v, of_class); /* just recorded */
}

bb_val bb_rec_of_class(bb_rec *g, bb_val peers, const char *of_class)
{
    if (!g || bb_recorder_error(g->r, NULL))
        return BB_VAL_NONE;
    rec_value *rv = bb__rec_value(g, peers);
    if (!rv || !of_class) {
        bb__rec_fail(g->r, g, "of_class", "%s", !rv ? "a value of another recording"
                                                    : "NULL of_class");
        return BB_VAL_NONE;
    }
    for (size_t i = g->f->nodes.n; i-- > 0;) {
        bb_node *n = g->f->nodes.v[i];
        for (size_t k = 0; k < n->outputs.n; k++)
            if (n->outputs.v[k] && strcmp(n->outputs.v[k], rv->name) == 0)
                return stamp_class(g, n, peers, of_class);
    }
    bb__rec_fail(g->r, g, "of_class", "value '%s' is not the output of a node", rv->name);
    return BB_VAL_NONE;
}

bb_val bb_role_peer_selector_sample(bb_rec *g, bb_slot *selector, int64_t n,
                                    const char *of_class)
{
    bb_rec_attr at[] = {BB_RA_INT("n", n)};
    return tag_class(g, role1(g, selector, PEERS, "Sample", NULL, 0, at, N_OF(at)), of_class);
}

bb_val bb_role_peer_selector_current_view(bb_rec *g, bb_slot *selector, const char *of_class)
{
    return tag_class(g, role1(g, selector, PEERS, "CurrentView", NULL, 0, NULL, 0), of_class);
}

/* ---- ai.bytesandbrains.syscall ------------------------------------------------------ */

#define SYS BB_DOMAIN_SYSCALL

static bb_val sys1(bb_rec *g, const char *op, const bb_val *in, size_t n_in,
                   const bb_rec_attr *at, size_t n_at, const bb_type_node *type)
{
    return rec1(g, NULL, SYS, op, in, n_in, at, n_at, type);
}

static int sys0(bb_rec *g, const char *op, const bb_val *in, size_t n_in,
                const bb_rec_attr *at, size_t n_at)
{
    return status_of(g, rec(g, NULL, SYS, op, in, n_in, at, n_at, NULL, NULL, 0));
}

bb_val bb_sys_pulse(bb_rec *g)
{
    return sys1(g, "Pulse", NULL, 0, NULL, 0, NULL);
}

bb_val bb_sys_on_trigger(bb_rec *g, bb_val trigger)
{
    return sys1(g, "OnTrigger", &trigger, 1, NULL, 0, NULL);
}

bb_val bb_sys_threshold(bb_rec *g, const bb_val *inputs, size_t n_inputs, int64_t n)
{
    bb_rec_attr at[] = {BB_RA_INT("n", n)};
    return sys1(g, "Threshold", inputs, n_inputs, at, N_OF(at), NULL);
}

bb_val bb_sys_interval(bb_rec *g, int64_t period_ns)
{
    bb_rec_attr at[] = {BB_RA_INT("period_ns", period_ns)};
    return sys1(g, "Interval", NULL, 0, at, N_OF(at), NULL);
}

bb_val bb_sys_event_source(bb_rec *g, int64_t kind)
{
    bb_rec_attr at[] = {BB_RA_INT("kind", kind)};
    return sys1(g, "EventSource", NULL, 0, at, N_OF(at), NULL);
}

bb_val bb_sys_after(bb_rec *g, bb_val trigger, int64_t delay_ns)
{
    bb_rec_attr at[] = {BB_RA_INT("delay_ns", delay_ns)};
    return sys1(g, "After", &trigger, 1, at, N_OF(at), NULL);
}

bb_val bb_sys_limit_acquire(bb_rec *g, bb_val trigger, const char *name, int64_t n)
{
    bb_rec_attr at[] = {BB_RA_STRING("name", name), BB_RA_INT("n", n)};
    return sys1(g, "Limit.Acquire", &trigger, 1, at, N_OF(at), NULL);
}

int bb_sys_limit_release(bb_rec *g, bb_val trigger, const char *name)
{
    bb_rec_attr at[] = {BB_RA_STRING("name", name)};
    return sys0(g, "Limit.Release", &trigger, 1, at, N_OF(at));
}

/* The common type of a set of values: theirs when all agree, else ANY. */
static const bb_type_node *common_type(const bb_val *v, size_t n)
{
    if (!n || !v)
        return &BB_TYPE_ANY;
    const bb_type_node *t = type_of(v[0]);
    for (size_t i = 1; i < n; i++)
        if (!bb_type_same(type_of(v[i]), t))
            return &BB_TYPE_ANY;
    return t;
}

bb_val bb_sys_any(bb_rec *g, const bb_val *inputs, size_t n_inputs, const char *group)
{
    bb_rec_attr at[] = {BB_RA_STRING("group", group)};
    bb_val out = sys1(g, "Any", inputs, n_inputs, at, group ? 1 : 0,
                      common_type(inputs, n_inputs));
    /* The peer class survives when every input agrees on it. */
    if (bb_val_ok(out) && n_inputs) {
        rec_value *o = bb__rec_value(g, out);
        rec_value *first = bb__rec_value(g, inputs[0]);
        const char *c = first ? first->of_class : NULL;
        for (size_t i = 1; c && i < n_inputs; i++) {
            rec_value *x = bb__rec_value(g, inputs[i]);
            if (!x || !x->of_class || strcmp(x->of_class, c) != 0)
                c = NULL;
        }
        o->of_class = c;
    }
    return out;
}

bb_val bb_sys_gate(bb_rec *g, bb_val value, bb_val trigger)
{
    bb_val in[] = {value, trigger};
    bb_val out = sys1(g, "Gate", in, N_OF(in), NULL, 0, type_of(value));
    pass_class(g, value, out);
    return out;
}

bb_val bb_sys_serialize_enqueue(bb_rec *g, bb_val value, const char *queue)
{
    bb_rec_attr at[] = {BB_RA_STRING("queue", queue)};
    return sys1(g, "Serialize.Enqueue", &value, 1, at, N_OF(at), NULL);
}

bb_val bb_sys_serialize_dequeue(bb_rec *g, bb_val trigger, const char *queue,
                                const bb_type_node *type)
{
    bb_rec_attr at[] = {BB_RA_STRING("queue", queue)};
    return sys1(g, "Serialize.Dequeue", &trigger, 1, at, N_OF(at), type);
}

bb_val bb_sys_correlate_tag(bb_rec *g, bb_val trigger)
{
    return sys1(g, "CorrelateTag", &trigger, 1, NULL, 0, NULL);
}

int bb_sys_hold_stash(bb_rec *g, bb_val value, const char *slot)
{
    bb_rec_attr at[] = {BB_RA_STRING("slot", slot)};
    return sys0(g, "Hold.Stash", &value, 1, at, N_OF(at));
}

bb_val bb_sys_hold_flush(bb_rec *g, bb_val trigger, const char *slot, const bb_type_node *type)
{
    bb_rec_attr at[] = {BB_RA_STRING("slot", slot)};
    return sys1(g, "Hold.Flush", &trigger, 1, at, N_OF(at), type);
}

int bb_sys_app_emit(bb_rec *g, bb_val value, const char *name)
{
    bb_rec_attr at[] = {BB_RA_STRING("name", name)};
    return sys0(g, "AppEmit", &value, 1, at, N_OF(at));
}

int bb_sys_app_notify(bb_rec *g, bb_val trigger, const char *name)
{
    bb_rec_attr at[] = {BB_RA_STRING("name", name)};
    return sys0(g, "AppNotify", &trigger, 1, at, N_OF(at));
}

int bb_sys_record(bb_rec *g, bb_val value, const char *name)
{
    bb_rec_attr at[] = {BB_RA_STRING("name", name)};
    return sys0(g, "Record", &value, 1, at, N_OF(at));
}

int bb_sys_incr_metric(bb_rec *g, bb_val trigger, const char *name, int64_t delta)
{
    bb_rec_attr at[] = {BB_RA_STRING("name", name), BB_RA_INT("delta", delta)};
    return sys0(g, "IncrMetric", &trigger, 1, at, N_OF(at));
}

bb_val bb_sys_lifecycle_phase(bb_rec *g, int64_t phase)
{
    bb_rec_attr at[] = {BB_RA_INT("phase", phase)};
    return sys1(g, "LifecyclePhase", NULL, 0, at, N_OF(at), NULL);
}

bb_val bb_sys_clock(bb_rec *g, bb_val trigger)
{
    return sys1(g, "Clock", &trigger, 1, NULL, 0, NULL);
}

bb_val bb_sys_rng_u64(bb_rec *g, bb_val trigger)
{
    return sys1(g, "RngU64", &trigger, 1, NULL, 0, NULL);
}

bb_val bb_sys_sleep(bb_rec *g, bb_val trigger, int64_t duration_ns)
{
    bb_rec_attr at[] = {BB_RA_INT("duration_ns", duration_ns)};
    return sys1(g, "Sleep", &trigger, 1, at, N_OF(at), NULL);
}

bb_val bb_sys_deadline_match(bb_rec *g, bb_val then, bb_val timeout)
{
    bb_val in[] = {then, timeout};
    return sys1(g, "DeadlineMatch", in, N_OF(in), NULL, 0, NULL);
}

bb_val bb_sys_pass_through(bb_rec *g, bb_val value)
{
    bb_val out = sys1(g, "PassThrough", &value, 1, NULL, 0, type_of(value));
    pass_class(g, value, out);
    return out;
}

int bb_sys_tee(bb_rec *g, bb_val value, bb_val *out, size_t fanout)
{
    bb_rec_attr at[] = {BB_RA_INT("fanout", (int64_t)fanout)};
    const bb_type_node *types[16];
    bb_val *outs[16];
    if (fanout > 16 || !fanout || !out) {
        if (g && !bb__rec_ready(g, "Tee"))
            bb__rec_fail(g->r, g, "ai.bytesandbrains.syscall::Tee", "fanout %zu (want 1..16)",
                         fanout);
        return g ? (g->r->err.code ? g->r->err.code : BB_ERECORD) : BB_EINVAL;
    }
    for (size_t i = 0; i < fanout; i++) {
        types[i] = type_of(value);
        outs[i] = &out[i];
    }
    bb_node *n = rec(g, NULL, SYS, "Tee", &value, 1, at, N_OF(at), types, outs, fanout);
    if (n)
        for (size_t i = 0; i < fanout; i++)
            pass_class(g, value, out[i]);
    return status_of(g, n);
}

bb_val bb_sys_constant(bb_rec *g, const bb_tensor_proto *value)
{
    bb_rec_attr at[] = {{.name = "value", .type = BB_ATTR_TENSOR, .t = value}};
    const bb_type_node *t = value ? bb_type_tensor_of(value->data_type) : NULL;
    return sys1(g, "Constant", NULL, 0, at, N_OF(at), t ? t : &BB_TYPE_TENSOR);
}

/* ---- ai.bytesandbrains.wire ----------------------------------------------------------- */

#define WIRE BB_DOMAIN_WIRE

/* Stamp port, destination class and correlation on a recorded wire node. */
static int wire_stamp(bb_rec *g, bb_node *n, const char *port, bb_val dest,
                      const char *correlation)
{
    int rc;
    if (!n)
        return status_of(g, n);
    if (port) {
        if (!*port)
            return bb__rec_fail(g->r, g, n->op_type, "empty port name");
        if ((rc = bb__rec_meta(g, n, BB_REC_META_PORT, port)))
            return rc;
    }
    rec_value *d = bb_val_ok(dest) ? bb__rec_value(g, dest) : NULL;
    if (d && d->of_class && (rc = bb__rec_meta(g, n, BB_META_DEST_CLASS, d->of_class)))
        return rc;
    return bb__rec_meta(g, n, BB_META_WIRE_CORRELATION, correlation);
}

int bb_wire_send(bb_rec *g, bb_slot *network, const char *port, bb_val data, bb_val dest)
{
    bb_val in[] = {data, dest};
    bb_node *n = rec(g, network, WIRE, BB_OP_WIRE_SEND, in, N_OF(in), NULL, 0, NULL, NULL, 0);
    return wire_stamp(g, n, port, dest, BB_WIRE_CORRELATION_NONE);
}

int bb_wire_send_req_batched(bb_rec *g, bb_slot *network, const char *port, bb_val data,
                             bb_val dest, int64_t quorum, int64_t deadline_ns, bb_val *req_id,
                             bb_val *responses)
{
    bb_val in[] = {data, dest};
    bb_rec_attr at[2];
    size_t n_at = 0;
    if (quorum > 0)
        at[n_at++] = BB_RA_INT("quorum", quorum);
    if (deadline_ns > 0)
        at[n_at++] = BB_RA_INT(BB_ATTR_NAME_DEADLINE_NS, deadline_ns);
    bb_val *outs[] = {req_id, responses};
    bb_node *n = rec(g, network, WIRE, BB_OP_WIRE_SEND_REQ_BATCHED, in, N_OF(in), at, n_at,
                     NULL, outs, N_OF(outs));
    return wire_stamp(g, n, port, dest, BB_WIRE_CORRELATION_REQUEST);
}

int bb_wire_send_resp(bb_rec *g, bb_slot *network, bb_val data, bb_val dest, bb_val req_id)
{
    bb_val in[] = {data, dest, req_id};
    bb_node *n = rec(g, network, WIRE, BB_OP_WIRE_SEND_RESP, in, N_OF(in), NULL, 0, NULL,
                     NULL, 0);
    return wire_stamp(g, n, NULL, dest, BB_WIRE_CORRELATION_RESPONSE);
}

static int recv_common(bb_rec *g, bb_slot *network, const char *op, const char *port,
                       const bb_type_node *payload_type, bb_val *const *outs, size_t n_out,
                       const char *correlation)
{
    bb_type_proto *tp = NULL;
    if (payload_type && g && !bb__rec_ready(g, op)) {
        tp = bb_type_to_proto(g->r->arena, payload_type);
        if (!tp)
            return bb__rec_oom(g->r, g, op);
    }
    bb_rec_attr at[] = {{.name = BB_ATTR_NAME_PAYLOAD_TYPE, .type = BB_ATTR_TYPE_PROTO,
                         .tp = tp}};
    const bb_type_node *types[3] = {&BB_TYPE_TRIGGER, payload_type, &BB_TYPE_REQUEST_ID};
    bb_node *n = rec(g, network, WIRE, op, NULL, 0, at, tp ? 1 : 0, types, outs, n_out);
    return wire_stamp(g, n, port, BB_VAL_NONE, correlation);
}

int bb_wire_recv(bb_rec *g, bb_slot *network, const char *port,
                 const bb_type_node *payload_type, bb_val *trigger, bb_val *payload)
{
    bb_val *outs[] = {trigger, payload};
    return recv_common(g, network, BB_OP_WIRE_RECV, port, payload_type, outs, N_OF(outs),
                       BB_WIRE_CORRELATION_NONE);
}

int bb_wire_recv_req(bb_rec *g, bb_slot *network, const char *port,
                     const bb_type_node *payload_type, bb_val *trigger, bb_val *payload,
                     bb_val *req_id)
{
    bb_val *outs[] = {trigger, payload, req_id};
    return recv_common(g, network, BB_OP_WIRE_RECV_REQ, port, payload_type, outs, N_OF(outs),
                       BB_WIRE_CORRELATION_REQUEST);
}

int bb_wire_recv_resp_batched(bb_rec *g, bb_slot *network, bb_val req_id, bb_val *trigger,
                              bb_val *responses)
{
    bb_val *outs[] = {trigger, responses};
    bb_node *n = rec(g, network, WIRE, BB_OP_WIRE_RECV_RESP_BATCHED, &req_id, 1, NULL, 0, NULL,
                     outs, N_OF(outs));
    return wire_stamp(g, n, NULL, BB_VAL_NONE, BB_WIRE_CORRELATION_RESPONSE);
}

/* ---- ai.bytesandbrains.address_book ---------------------------------------------------- */

int bb_addrbook_insert(bb_rec *g, bb_val peer, bb_val address)
{
    bb_val in[] = {peer, address};
    return status_of(g, rec(g, NULL, BB_DOMAIN_ADDRESS_BOOK, BB_OP_AB_INSERT, in, N_OF(in),
                            NULL, 0, NULL, NULL, 0));
}

int bb_addrbook_insert_many(bb_rec *g, bb_val peer, bb_val addresses)
{
    bb_val in[] = {peer, addresses};
    return status_of(g, rec(g, NULL, BB_DOMAIN_ADDRESS_BOOK, BB_OP_AB_INSERT_MANY, in,
                            N_OF(in), NULL, 0, NULL, NULL, 0));
}

bb_val bb_addrbook_lookup(bb_rec *g, bb_val peer)
{
    return rec1(g, NULL, BB_DOMAIN_ADDRESS_BOOK, BB_OP_AB_LOOKUP, &peer, 1, NULL, 0, NULL);
}

/* ---- ai.bytesandbrains.composite ---------------------------------------------------- */

/* "a,b,c" of the types' denotations, in the model arena. */
static char *join_denotations(bb_rec *g, const bb_type_node *const *types, size_t n)
{
    size_t len = 1;
    for (size_t i = 0; i < n; i++)
        len += strlen(types[i]->denotation) + 1;
    char *s = bb_arena_alloc(g->r->arena, len);
    if (!s)
        return NULL;
    char *p = s;
    for (size_t i = 0; i < n; i++) {
        if (i)
            *p++ = ',';
        size_t l = strlen(types[i]->denotation);
        memcpy(p, types[i]->denotation, l);
        p += l;
    }
    *p = '\0';
    return s;
}

bb_val bb_rec_bundle(bb_rec *g, const bb_val *parts, size_t n)
{
    static const char what[] = "ai.bytesandbrains.composite::Bundle";
    if (bb__rec_ready(g, what))
        return BB_VAL_NONE;
    if (!n || !parts) {
        bb__rec_fail(g->r, g, what, "bundle of zero values (needs at least one part)");
        return BB_VAL_NONE;
    }
    const bb_type_node *types[64];
    if (n > N_OF(types)) {
        bb__rec_fail(g->r, g, what, "%zu parts (at most %zu)", n, N_OF(types));
        return BB_VAL_NONE;
    }
    for (size_t i = 0; i < n; i++)
        types[i] = type_of(parts[i]);
    char *joined = join_denotations(g, types, n);
    if (!joined) {
        bb__rec_oom(g->r, g, what);
        return BB_VAL_NONE;
    }
    bb_rec_attr at[] = {BB_RA_INT(BB_META_COMPOSITE_CHILD_COUNT, (int64_t)n),
                        BB_RA_STRING(BB_META_COMPOSITE_CHILD_TYPES, joined)};
    return rec1(g, NULL, BB_DOMAIN_COMPOSITE, BB_OP_BUNDLE, parts, n, at, N_OF(at),
                &BB_TYPE_COMPOSITE);
}

int bb_rec_unbundle(bb_rec *g, bb_val composite, const bb_type_node *const *part_types,
                    size_t n, bb_val *out)
{
    static const char what[] = "ai.bytesandbrains.composite::Unbundle";
    int rc = bb__rec_ready(g, what);
    if (rc)
        return rc;
    if (!n || !part_types)
        return bb__rec_fail(g->r, g, what, "unbundle into zero values (needs part types)");
    if (n > 64)
        return bb__rec_fail(g->r, g, what, "%zu parts (at most 64)", n);
    if (!out)
        return bb__rec_fail(g->r, g, what, "NULL output array");
    for (size_t i = 0; i < n; i++) {
        out[i] = BB_VAL_NONE;
        if (!part_types[i])
            return bb__rec_fail(g->r, g, what, "part type %zu is NULL", i);
    }
    if (bb_val_ok(composite) && composite.g == g) {
        const bb_type_node *ct = type_of(composite);
        if (!bb_type_same(ct, &BB_TYPE_ANY) && !bb_type_same(ct, &BB_TYPE_COMPOSITE))
            return bb__rec_fail(g->r, g, what, "input is a %s, not a Composite", ct->name);
    }
    char *joined = join_denotations(g, part_types, n);
    if (!joined)
        return bb__rec_oom(g->r, g, what);
    bb_rec_attr at[] = {BB_RA_INT(BB_META_COMPOSITE_CHILD_COUNT, (int64_t)n),
                        BB_RA_STRING(BB_META_COMPOSITE_CHILD_TYPES, joined)};
    bb__op_req q = {.node_domain = BB_DOMAIN_COMPOSITE, .op_type = BB_OP_UNBUNDLE,
                    .in = &composite, .n_in = 1, .attrs = at, .n_attrs = N_OF(at),
                    .out_types = part_types, .out = out, .n_out = n};
    uint32_t first_site = g->last_site + 1;
    bb_node *node = bb__rec_node(g, &q);
    if (!node)
        return g->r->err.code;
    /* Children are named site_<k>_child_<i> after the first site. */
    bb_arena *ma = g->r->model->arena;
    for (size_t i = 0; i < n; i++) {
        rec_value *rv = bb__rec_value(g, out[i]);
        const char *nm = bb_arena_sprintf(ma, "site_%u_child_%zu", first_site, i);
        if (!nm)
            return bb__rec_oom(g->r, g, what);
        node->outputs.v[i] = nm;
        rv->vi->name = nm;
        rv->name = nm;
        out[i].name = nm;
    }
    g->last_site = first_site; /* one site number for the whole unbundle */
    return BB_OK;
}
