/*
 * rules.c — the op table of the trainer: for every ai.onnx op it can run,
 * the CPU kernel of its forward, a training / inference forward where
 * those differ, its gradient rule and which inputs take no gradient; and
 * the rules of the elementwise ops, the activations and the ops that only
 * change a view (Reshape, Flatten, Squeeze, Unsqueeze, Identity), plus
 * Dropout.
 *
 * The other rules live by kind: grad_linear.c (Gemm, MatMul), grad_conv.c
 * (Conv and the pools), grad_norm.c (BatchNormalization,
 * LayerNormalization, Softmax), grad_shape.c (Transpose, Concat, Split,
 * Slice, Gather, ReduceSum, ReduceMean). Every CPU op without a rule here
 * still runs forward (shape arithmetic, comparisons, casts): the plan
 * refuses it only where a trained parameter reaches the loss through it.
 */
#include <math.h>
#include <string.h>

#include "autodiff.h"
#include "grad.h"
#include "vec.h"

/* ---- broadcasting in reverse ------------------------------------------------------- */

int ad_unbroadcast(ad_ctx *c, const bb_value *g, uint32_t ndim, const int64_t *dims,
                   bb_value **out)
{
    const bb_tensor_view *t = &g->u.tensor;
    if (t->ndim == ndim && memcmp(t->dims, dims, ndim * sizeof *dims) == 0)
        return (*out = bb_value_ref((bb_value *)g)) ? BB_OK : BB_ENOMEM;
    uint32_t nd = t->ndim;
    if (ndim > nd)
        return ad_fail(c, BB_ERUNTIME, "cannot reduce rank %u to rank %u", nd, ndim);
    int rc = ad_new(c, ndim, dims, out);
    if (rc)
        return rc;
    /* the target's stride per axis of g (0 where g broadcast it) */
    size_t rst[BB_MAX_DIMS], s = 1;
    for (int32_t d = (int32_t)nd - 1; d >= 0; d--) {
        int32_t td = d - (int32_t)(nd - ndim);
        int64_t tdim = td >= 0 ? dims[td] : 1;
        rst[d] = tdim == 1 ? 0 : s;
        s *= (size_t)tdim;
    }
    float *r = bb_tensor_f32(*out);
    const float *src = bb_tensor_f32(g);
    size_t inner = nd ? (size_t)t->dims[nd - 1] : 1, outer = bb_tensor_numel(g) / (inner ? inner : 1);
    size_t istride = nd ? rst[nd - 1] : 0;
    int64_t idx[BB_MAX_DIMS] = {0};
    size_t roff = 0;
    for (size_t o = 0; o < outer; o++, src += inner) {
        if (istride) {
            for (size_t i = 0; i < inner; i++)
                r[roff + i] += src[i];
        } else {
            r[roff] += (float)vec_sum(src, inner);
        }
        for (int32_t d = (int32_t)nd - 2; d >= 0; d--) {
            if (++idx[d] < t->dims[d]) {
                roff += rst[d];
                break;
            }
            roff -= rst[d] * (size_t)(t->dims[d] - 1);
            idx[d] = 0;
        }
    }
    return BB_OK;
}

/* Give input i the output gradient g (out shape) summed to i's shape. */
static int give_unbroadcast(ad_ctx *c, uint32_t i, const bb_value *g)
{
    const bb_value *x = ad_in(c, i);
    bb_value *r;
    int rc = ad_unbroadcast(c, g, x->u.tensor.ndim, x->u.tensor.dims, &r);
    return rc ? rc : ad_give(c, i, r);
}

/* ---- Add, Sub, Mul, Div --------------------------------------------------------------- */

static int need_f32_io(ad_ctx *c)
{
    int rc = ad_need_f32(c, ad_dout(c, 0), "the output gradient");
    for (uint32_t i = 0; !rc && i < c->n->n_in; i++)
        if (ad_wants(c, i))
            rc = ad_need_f32(c, ad_in(c, i), "an input");
    return rc;
}

static void negate(bb_value *v)
{
    float *p = bb_tensor_f32(v);
    for (size_t i = 0, n = bb_tensor_numel(v); i < n; i++)
        p[i] = -p[i];
}

/* g op x through a CPU kernel (broadcasting), then unbroadcast to input i. */
static int give_product(ad_ctx *c, uint32_t i, cpu_op op, const bb_value *g, const bb_value *x,
                        bool neg)
{
    bb_value *in[2] = {(bb_value *)g, (bb_value *)x}, *t = NULL;
    int rc = ad_kernel(c, op, NULL, in, 2, &t, 1);
    if (!rc && neg)
        negate(t);
    if (!rc)
        rc = give_unbroadcast(c, i, t);
    bb_value_unref(t);
    return rc;
}

static int bwd_add_sub(ad_ctx *c)
{
    const bb_value *g = ad_dout(c, 0);
    int rc = need_f32_io(c);
    bool sub = strcmp(c->n->node->op_type, "Sub") == 0;
    if (!rc && ad_wants(c, 0))
        rc = give_unbroadcast(c, 0, g);
    if (!rc && ad_wants(c, 1)) {
        if (!sub)
            return give_unbroadcast(c, 1, g);
        bb_value *ng = bb_value_tensor_copy(BB_DT_FLOAT, g->u.tensor.ndim, g->u.tensor.dims,
                                            g->u.tensor.data, g->u.tensor.nbytes);
        if (!ng)
            return ad_fail(c, BB_ENOMEM, "out of memory");
        negate(ng);
        rc = give_unbroadcast(c, 1, ng);
        bb_value_unref(ng);
    }
    return rc;
}

static int bwd_mul(ad_ctx *c)
{
    const bb_value *g = ad_dout(c, 0);
    int rc = need_f32_io(c);
    if (!rc && ad_wants(c, 0))
        rc = give_product(c, 0, CPU_OP_Mul, g, ad_in(c, 1), false);
    if (!rc && ad_wants(c, 1))
        rc = give_product(c, 1, CPU_OP_Mul, g, ad_in(c, 0), false);
    return rc;
}

/* y = a / b: da = g / b, db = -g y / b. */
static int bwd_div(ad_ctx *c)
{
    const bb_value *g = ad_dout(c, 0);
    int rc = need_f32_io(c);
    if (!rc && ad_wants(c, 0))
        rc = give_product(c, 0, CPU_OP_Div, g, ad_in(c, 1), false);
    if (!rc && ad_wants(c, 1)) {
        bb_value *in[2] = {(bb_value *)g, (bb_value *)ad_out(c, 0)}, *gy = NULL;
        rc = ad_kernel(c, CPU_OP_Mul, NULL, in, 2, &gy, 1);
        if (!rc)
            rc = give_product(c, 1, CPU_OP_Div, gy, ad_in(c, 1), true);
        bb_value_unref(gy);
    }
    return rc;
}

/* ---- activations and unary math: dx = g * f'(x, y) ------------------------------------ */

#define SQRT1_2 0.70710678118654752440
#define SQRT_2_PI 0.79788456080286535588
#define INV_SQRT_2PI 0.39894228040143267794

typedef enum { U_RELU, U_LEAKY, U_SIGMOID, U_TANH, U_GELU, U_GELU_TANH, U_NEG, U_EXP, U_LOG,
               U_SQRT } unary_kind;

static void unary_grad(unary_kind k, float alpha, const float *restrict g,
                       const float *restrict x, const float *restrict y, float *restrict dx,
                       size_t n)
{
    switch (k) {
    case U_RELU:
        for (size_t i = 0; i < n; i++)
            dx[i] = x[i] > 0 ? g[i] : 0.0f;
        break;
    case U_LEAKY:
        for (size_t i = 0; i < n; i++)
            dx[i] = x[i] >= 0 ? g[i] : alpha * g[i];
        break;
    case U_SIGMOID:
        for (size_t i = 0; i < n; i++)
            dx[i] = g[i] * y[i] * (1.0f - y[i]);
        break;
    case U_TANH:
        for (size_t i = 0; i < n; i++)
            dx[i] = g[i] * (1.0f - y[i] * y[i]);
        break;
    case U_GELU: /* Phi(x) + x phi(x) */
        for (size_t i = 0; i < n; i++) {
            double v = x[i];
            double cdf = 0.5 * (1.0 + erf(v * SQRT1_2)), pdf = INV_SQRT_2PI * exp(-0.5 * v * v);
            dx[i] = (float)(g[i] * (cdf + v * pdf));
        }
        break;
    case U_GELU_TANH:
        for (size_t i = 0; i < n; i++) {
            double v = x[i], u = SQRT_2_PI * (v + 0.044715 * v * v * v), t = tanh(u);
            double du = SQRT_2_PI * (1.0 + 3.0 * 0.044715 * v * v);
            dx[i] = (float)(g[i] * (0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * du));
        }
        break;
    case U_NEG:
        for (size_t i = 0; i < n; i++)
            dx[i] = -g[i];
        break;
    case U_EXP:
        for (size_t i = 0; i < n; i++)
            dx[i] = g[i] * y[i];
        break;
    case U_LOG:
        for (size_t i = 0; i < n; i++)
            dx[i] = g[i] / x[i];
        break;
    case U_SQRT:
        for (size_t i = 0; i < n; i++)
            dx[i] = g[i] * 0.5f / y[i];
        break;
    }
}

static int bwd_unary(ad_ctx *c)
{
    const char *op = c->n->node->op_type;
    unary_kind k = U_RELU;
    float alpha = 0;
    if (strcmp(op, "LeakyRelu") == 0) {
        k = U_LEAKY;
        alpha = bb_node_attr_float(c->n->node, "alpha", 0.01f);
    } else if (strcmp(op, "Sigmoid") == 0) {
        k = U_SIGMOID;
    } else if (strcmp(op, "Tanh") == 0) {
        k = U_TANH;
    } else if (strcmp(op, "Gelu") == 0) {
        const char *ap = bb_node_attr_string(c->n->node, "approximate", "none");
        k = ap && strcmp(ap, "tanh") == 0 ? U_GELU_TANH : U_GELU;
    } else if (strcmp(op, "Neg") == 0) {
        k = U_NEG;
    } else if (strcmp(op, "Exp") == 0) {
        k = U_EXP;
    } else if (strcmp(op, "Log") == 0) {
        k = U_LOG;
    } else if (strcmp(op, "Sqrt") == 0) {
        k = U_SQRT;
    }
    int rc = need_f32_io(c);
    bb_value *dx = NULL;
    if (!rc)
        rc = ad_new_uninit(c, ad_in(c, 0), &dx);
    if (rc)
        return rc;
    unary_grad(k, alpha, bb_tensor_f32(ad_dout(c, 0)), bb_tensor_f32(ad_in(c, 0)),
               bb_tensor_f32(ad_out(c, 0)), bb_tensor_f32(dx), bb_tensor_numel(dx));
    return ad_give(c, 0, dx);
}

/* ---- views: the gradient is the output gradient in the input's shape ------------------- */

static int bwd_view(ad_ctx *c)
{
    const bb_value *x = ad_in(c, 0);
    bb_value *dx;
    int rc = ad_view(c, ad_dout(c, 0), x->u.tensor.ndim, x->u.tensor.dims, &dx);
    return rc ? rc : ad_give(c, 0, dx);
}

/* ---- Dropout ------------------------------------------------------------------------------ */

/* opset 12+: (data, ratio, training_mode) -> (output, mask); before: the
 * ratio attribute. */
static int dropout_ratio(ad_ctx *c, bb_value *const *in, double *ratio, bool *train)
{
    *ratio = bb_node_attr_float(c->n->node, "ratio", 0.5f);
    *train = true;
    if (c->n->n_in > 1 && in[1]) {
        if (bb_tensor_numel(in[1]) != 1 || !cpu_dtype_is_float(in[1]->u.tensor.dtype))
            return ad_fail(c, BB_EINVAL, "ratio must be a float scalar");
        *ratio = cpu_elem_f64(&in[1]->u.tensor, 0);
    }
    if (c->n->n_in > 2 && in[2])
        *train = bb_tensor_numel(in[2]) == 1 && cpu_elem_i64(&in[2]->u.tensor, 0) != 0;
    if (!(*ratio >= 0 && *ratio < 1))
        return ad_fail(c, BB_EINVAL, "ratio %g is not in [0, 1)", *ratio);
    return BB_OK;
}

/* Dropout that passes its input through (inference, ratio 0, training_mode
 * false); its mask output, when wired, keeps everything. */
static int dropout_passthrough(ad_ctx *c, bb_value *const *in, bb_value **out)
{
    const bb_tensor_view *t = &in[0]->u.tensor;
    int rc = ad_view(c, in[0], t->ndim, t->dims, &out[0]);
    if (rc || c->n->n_out < 2)
        return rc;
    out[1] = bb_value_tensor_new(BB_DT_BOOL, t->ndim, t->dims);
    if (!out[1])
        return ad_fail(c, BB_ENOMEM, "out of memory");
    memset(out[1]->u.tensor.data, 1, out[1]->u.tensor.nbytes);
    return BB_OK;
}

static int fwd_dropout_infer(ad_ctx *c, bb_value *const *in, bb_value **out)
{
    int rc = ad_need_f32(c, in[0], "data");
    return rc ? rc : dropout_passthrough(c, in, out);
}

static int fwd_dropout_train(ad_ctx *c, bb_value *const *in, bb_value **out)
{
    double ratio;
    bool train;
    int rc = ad_need_f32(c, in[0], "data");
    if (!rc)
        rc = dropout_ratio(c, in, &ratio, &train);
    if (rc || !train || ratio == 0)
        return rc ? rc : dropout_passthrough(c, in, out);
    bb_value *mask;
    if ((rc = ad_new_uninit(c, in[0], &mask)))
        return rc;
    float *m = bb_tensor_f32(mask), keep = (float)(1.0 / (1.0 - ratio));
    size_t n = bb_tensor_numel(mask);
    for (size_t i = 0; i < n; i++)
        m[i] = ad_uniform(c) >= ratio ? keep : 0.0f;
    rc = ad_new_uninit(c, in[0], &out[0]);
    if (!rc) {
        const float *x = bb_tensor_f32(in[0]);
        float *y = bb_tensor_f32(out[0]);
        for (size_t i = 0; i < n; i++)
            y[i] = x[i] * m[i];
        if (c->n->n_out > 1) {
            out[1] = bb_value_tensor_new(BB_DT_BOOL, mask->u.tensor.ndim, mask->u.tensor.dims);
            if (!out[1])
                rc = ad_fail(c, BB_ENOMEM, "out of memory");
            for (size_t i = 0; !rc && i < n; i++)
                out[1]->u.tensor.data[i] = m[i] != 0;
        }
    }
    ad_save(c, 0, mask);
    return rc;
}

static int bwd_dropout(ad_ctx *c)
{
    const bb_value *mask = ad_saved(c, 0);
    if (!mask)
        return bwd_view(c); /* it passed its input through */
    bb_value *dx;
    int rc = ad_new_uninit(c, ad_in(c, 0), &dx);
    if (rc)
        return rc;
    const float *g = bb_tensor_f32(ad_dout(c, 0)), *m = bb_tensor_f32(mask);
    float *d = bb_tensor_f32(dx);
    for (size_t i = 0, n = bb_tensor_numel(dx); i < n; i++)
        d[i] = g[i] * m[i];
    return ad_give(c, 0, dx);
}

/* ---- Conv and Gemm through oneDNN ------------------------------------------------------------ */

static int fwd_dnn_infer(ad_ctx *c, bb_value *const *in, bb_value **out)
{
    return ad_fwd_dnn(c, in, out);
}

/* ---- the table ------------------------------------------------------------------------------ */

#define BIT(i) (1u << (i))
#define ALL_BUT_0 (~1u)

static const ad_rule RULES[] = {
    {"Add", CPU_OP_Add, NULL, NULL, bwd_add_sub, 0},
    {"Sub", CPU_OP_Sub, NULL, NULL, bwd_add_sub, 0},
    {"Mul", CPU_OP_Mul, NULL, NULL, bwd_mul, 0},
    {"Div", CPU_OP_Div, NULL, NULL, bwd_div, 0},
    {"Neg", CPU_OP_Neg, NULL, NULL, bwd_unary, 0},
    {"Exp", CPU_OP_Exp, NULL, NULL, bwd_unary, 0},
    {"Log", CPU_OP_Log, NULL, NULL, bwd_unary, 0},
    {"Sqrt", CPU_OP_Sqrt, NULL, NULL, bwd_unary, 0},
    {"Relu", CPU_OP_Relu, NULL, NULL, bwd_unary, 0},
    {"LeakyRelu", CPU_OP_LeakyRelu, NULL, NULL, bwd_unary, 0},
    {"Sigmoid", CPU_OP_Sigmoid, NULL, NULL, bwd_unary, 0},
    {"Tanh", CPU_OP_Tanh, NULL, NULL, bwd_unary, 0},
    {"Gelu", CPU_OP_Gelu, NULL, NULL, bwd_unary, 0},
    {"Softmax", CPU_OP_Softmax, NULL, NULL, ad_bwd_softmax, 0},
    {"Gemm", CPU_OP_Gemm, NULL, fwd_dnn_infer, ad_bwd_gemm, 0},
    {"MatMul", CPU_OP_MatMul, NULL, NULL, ad_bwd_matmul, 0},
    {"Conv", CPU_OP_Conv, NULL, fwd_dnn_infer, ad_bwd_conv, 0},
    {"MaxPool", CPU_OP_MaxPool, ad_fwd_maxpool_train, NULL, ad_bwd_maxpool, 0},
    {"AveragePool", CPU_OP_AveragePool, NULL, NULL, ad_bwd_avgpool, 0},
    {"GlobalAveragePool", CPU_OP_GlobalAveragePool, NULL, NULL, ad_bwd_global_avgpool, 0},
    {"BatchNormalization", CPU_OP_BatchNormalization, ad_fwd_batchnorm_train,
     ad_fwd_batchnorm_infer, ad_bwd_batchnorm, BIT(3) | BIT(4)},
    {"LayerNormalization", CPU_OP_LayerNormalization, ad_fwd_layernorm_train, NULL,
     ad_bwd_layernorm, 0},
    {"Reshape", CPU_OP_Reshape, NULL, NULL, bwd_view, ALL_BUT_0},
    {"Flatten", CPU_OP_Flatten, NULL, NULL, bwd_view, ALL_BUT_0},
    {"Squeeze", CPU_OP_Squeeze, NULL, NULL, bwd_view, ALL_BUT_0},
    {"Unsqueeze", CPU_OP_Unsqueeze, NULL, NULL, bwd_view, ALL_BUT_0},
    {"Identity", CPU_OP_Identity, NULL, NULL, bwd_view, 0},
    {"Dropout", -1, fwd_dropout_train, fwd_dropout_infer, bwd_dropout, ALL_BUT_0},
    {"Transpose", CPU_OP_Transpose, NULL, NULL, ad_bwd_transpose, 0},
    {"Concat", CPU_OP_Concat, NULL, NULL, ad_bwd_concat, 0},
    {"Split", CPU_OP_Split, NULL, NULL, ad_bwd_split, ALL_BUT_0},
    {"Slice", CPU_OP_Slice, NULL, NULL, ad_bwd_slice, ALL_BUT_0},
    {"Gather", CPU_OP_Gather, NULL, NULL, ad_bwd_gather, ALL_BUT_0},
    {"ReduceSum", CPU_OP_ReduceSum, NULL, NULL, ad_bwd_reduce, ALL_BUT_0},
    {"ReduceMean", CPU_OP_ReduceMean, NULL, NULL, ad_bwd_reduce, ALL_BUT_0},
};

/* Every other CPU op runs forward only (If and Loop need the CPU backend's
 * graph executor, which the trainer does not run). */
static const ad_rule FORWARD_ONLY[CPU_N_OPS] = {
#define FWD_ONLY(n) [CPU_OP_##n] = {#n, CPU_OP_##n, NULL, NULL, NULL, 0},
    CPU_OPS(FWD_ONLY)
#undef FWD_ONLY
};

const ad_rule *ad_rule_find(const char *op_type)
{
    if (!op_type)
        return NULL;
    for (size_t i = 0; i < sizeof RULES / sizeof *RULES; i++)
        if (strcmp(RULES[i].op_type, op_type) == 0)
            return &RULES[i];
    int op = cpu_op_lookup(op_type);
    if (op < 0 || op == CPU_OP_If || op == CPU_OP_Loop)
        return NULL;
    return &FORWARD_ONLY[op];
}

int ad_rules_prepare(ad_plan *p, const char *who, bb_error *err)
{
    for (uint32_t k = 0; k < p->n_nodes; k++) {
        ad_node *n = &p->nodes[k];
        int rc = BB_OK;
        if (strcmp(n->rule->op_type, "Transpose") == 0)
            rc = ad_prepare_transpose(p, n, who, err);
        else if (strcmp(n->rule->op_type, "BatchNormalization") == 0)
            rc = ad_prepare_batchnorm(p, n, who, err);
        if (rc)
            return rc;
    }
    return BB_OK;
}
