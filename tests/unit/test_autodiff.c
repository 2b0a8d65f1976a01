/*
 * nn::Onnx's reverse-mode autodiff, rule by rule: for every op with a
 * gradient rule, a small graph of it on random shapes and attributes
 * (seeded) is trained by nn::Onnx (loaded from the build's onnx.so), and
 * its Gradients are checked against central finite differences of the
 * training-mode loss at coordinates of every parameter. The data input
 * goes through `x + p0` (p0 a parameter of x's shape), so p0's gradient
 * is the gradient the op hands its input.
 *
 * Also: the refusals at create (an op without a gradient rule on the path
 * to the loss names the node and the op; malformed graphs), the parameter
 * layout (initializer order and names, ParamNames), Forward + Backward +
 * Step against Gradients, the optimizers, BatchNormalization's running
 * statistics, snapshots, FedProx's proximal term, and ExportOnnx checked by
 * python3-onnx's checker with the trained values under their names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "examples/cnn/cnn_graph.h"
#include "examples/onnx_graph.h"
#include "support/plugin_fixtures.h"

static uint64_t g_rng = 1;

static float randn(void)
{
    return (float)og_normal(&g_rng);
}

static int64_t rand_in(int64_t lo, int64_t hi) /* [lo, hi] */
{
    g_rng = g_rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (int64_t)((g_rng >> 33) % (uint64_t)(hi - lo + 1));
}

static float *randv(size_t n, float scale)
{
    float *v = malloc((n ? n : 1) * sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = scale * randn();
    return v;
}

static size_t numel(uint32_t nd, const int64_t *d)
{
    size_t n = 1;
    for (uint32_t i = 0; i < nd; i++)
        n *= (size_t)d[i];
    return n;
}

/* A random f32 initializer. */
static void param(og *o, const char *name, uint32_t nd, const int64_t *d, float scale)
{
    float *v = randv(numel(nd, d), scale);
    og_param(o, name, nd, d, v);
    free(v);
}

/* ---- the model ------------------------------------------------------------------------ */

typedef struct model {
    const bb_component_type *t;
    void *inst;
} model;

static int try_make(og *o, const char *config, model *m, bb_error *err)
{
    m->t = pfx_type("nn::Onnx");
    assert_non_null(m->t);
    bb_attr at = {.name = "model", .type = BB_ATTR_STRING, .has_s = true, .g = o->g};
    at.s.data = (uint8_t *)(uintptr_t)config;
    at.s.len = strlen(config);
    m->inst = pfx_create(m->t, "model", NULL, &at, 7, NULL, err);
    return m->inst ? BB_OK : err->code;
}

static model make(og *o, const char *config)
{
    model m;
    bb_error err = {0};
    assert_false(o->oom);
    if (try_make(o, config, &m, &err))
        fail_msg("create: %s", err.msg);
    return m;
}

static void drop(model *m)
{
    m->t->destroy(m->inst);
}

static int call(model *m, const char *op, bb_value *a, bb_value *b, bb_value **out,
                uint32_t n_out, bb_error *err)
{
    bb_value *in[2] = {a, b};
    return pfx_call(m->t, m->inst, NULL, op, NULL, in, b ? 2 : a ? 1 : 0, out, n_out, err);
}

static bb_value *call_ok(model *m, const char *op, bb_value *a, bb_value *b);

/* An op that takes a trigger. */
static bb_value *call_trig(model *m, const char *op)
{
    bb_value *t = bb_value_trigger(), *out = call_ok(m, op, t, NULL);
    bb_value_unref(t);
    return out;
}

static bb_value *call_ok(model *m, const char *op, bb_value *a, bb_value *b)
{
    bb_value *out[2] = {0};
    bb_error err = {0};
    if (call(m, op, a, b, out, 1, &err))
        fail_msg("%s: %s", op, err.msg);
    return out[0];
}

static bb_value *tensor(const float *v, uint32_t nd, const int64_t *d)
{
    return pfx_tensor(v, nd, d);
}

static bb_value *rand_tensor(uint32_t nd, const int64_t *d, float scale)
{
    float *v = randv(numel(nd, d), scale);
    bb_value *t = tensor(v, nd, d);
    free(v);
    return t;
}

static void load(model *m, const float *p, size_t n)
{
    int64_t d = (int64_t)n;
    bb_value *v = tensor(p, 1, &d);
    bb_value_unref(call_ok(m, "LoadParameters", v, NULL));
    bb_value_unref(v);
}

/* Gradients(x, t) -> grads (new), *loss. */
static bb_value *grads(model *m, bb_value *x, bb_value *t, double *loss)
{
    bb_value *out[2] = {0};
    bb_error err = {0};
    if (call(m, "Gradients", x, t, out, 2, &err))
        fail_msg("Gradients: %s", err.msg);
    *loss = *bb_tensor_f32(out[1]);
    bb_value_unref(out[1]);
    return out[0];
}

/* ---- the finite-difference check ----------------------------------------------------------- */

/* The offsets and sizes of the flat vector's initializers (ParamNames). */
typedef struct layout {
    size_t n;
    size_t off[64], len[64];
    char name[64][48];
} layout;

static void read_layout(model *m, layout *l)
{
    bb_value *b = call_trig(m, "ParamNames");
    cJSON *j = cJSON_ParseWithLength((const char *)b->u.bytes.data, b->u.bytes.len);
    assert_non_null(j);
    l->n = 0;
    for (cJSON *e = j->child; e && l->n < 64; e = e->next, l->n++) {
        l->off[l->n] = (size_t)cJSON_GetObjectItem(e, "offset")->valuedouble;
        size_t len = 1;
        for (cJSON *d = cJSON_GetObjectItem(e, "shape")->child; d; d = d->next)
            len *= (size_t)d->valuedouble;
        l->len[l->n] = len;
        snprintf(l->name[l->n], sizeof l->name[l->n], "%s",
                 cJSON_GetObjectItem(e, "name")->valuestring);
    }
    cJSON_Delete(j);
    bb_value_unref(b);
}

/* Central differences of the training-mode loss at up to per_param
 * coordinates of every initializer, against Gradients. */
static void fd_check_h(og *o, const char *config, bb_value *x, float h, double atol,
                       double rtol, int per_param)
{
    model m = make(o, config);
    bb_value *y = call_ok(&m, "Forward", x, NULL); /* the output's shape, for a target */
    int64_t rows = x->u.tensor.dims[0], k = (int64_t)bb_tensor_numel(y) / rows;
    assert_int_equal((size_t)(rows * k), bb_tensor_numel(y));
    bb_value *t = rand_tensor(2, (int64_t[]){rows, k}, 1.0f);
    bb_value_unref(y);
    bb_value *p = call_ok(&m, "Params", NULL, NULL);
    size_t n = bb_tensor_numel(p);
    float *pv = malloc(n * sizeof *pv);
    memcpy(pv, bb_tensor_f32(p), n * sizeof *pv);
    load(&m, pv, n); /* Forward moved running statistics: start from these */
    double l0;
    bb_value *g = grads(&m, x, t, &l0);
    layout lay;
    read_layout(&m, &lay);
    int checked = 0;
    for (size_t q = 0; q < lay.n; q++) {
        for (int c = 0; c < per_param && c < (int)lay.len[q]; c++) {
            size_t i = lay.off[q] + (size_t)rand_in(0, (int64_t)lay.len[q] - 1);
            float keep = pv[i];
            double lp, lm;
            pv[i] = keep + h;
            load(&m, pv, n);
            bb_value_unref(grads(&m, x, t, &lp));
            pv[i] = keep - h;
            load(&m, pv, n);
            bb_value_unref(grads(&m, x, t, &lm));
            pv[i] = keep;
            double fd = (lp - lm) / (2.0 * h), an = bb_tensor_f32(g)[i];
            double tol = atol + rtol * fmax(fabs(fd), fabs(an));
            if (fabs(fd - an) > tol)
                fail_msg("%s[%zu]: autodiff %.6g, finite differences %.6g (loss %.6g)",
                         lay.name[q], i - lay.off[q], an, fd, l0);
            checked++;
        }
    }
    assert_true(checked > 0);
    free(pv);
    bb_value_unref(g);
    bb_value_unref(p);
    bb_value_unref(t);
    drop(&m);
}

/* The rule tests: smooth where they are evaluated, so a wide step and
 * tight tolerances (the loss is an f32: its rounding over 2h is ~1e-5). */
static void fd_check(og *o, const char *config, bb_value *x, int per_param)
{
    fd_check_h(o, config, x, 1e-2f, 2e-4, 3e-3, per_param);
}

#define MSE "{\"loss\": \"mse\"}"


/* Begins a graph whose data input x [nd dims] enters as xa = x + p0. */
static void begin(og *o, const char *name, uint32_t nd, const int64_t *d, float p0_scale)
{
    og_begin(o, name);
    int64_t dims[8];
    memcpy(dims, d, nd * sizeof *d);
    og_input(o, "x", nd, dims);
    param(o, "p0", nd, d, p0_scale);
    og_node(o, "Add", "add0", "x,p0", "xa");
}

/* ---- linear algebra ---------------------------------------------------------------------------- */

static void test_autodiff_gemm(void **state)
{
    (void)state;
    for (int v = 0; v < 8; v++) {
        g_rng = 100 + (uint64_t)v;
        int64_t R = rand_in(2, 5), K = rand_in(1, 6), N = rand_in(1, 5);
        bool ta = v & 1, tb = v & 2, with_c = v != 4;
        og o;
        begin(&o, "gemm", 2, (int64_t[]){R, K}, 0.5f);
        const char *a = "xa";
        if (ta) { /* A arrives as [K, R] */
            og_attr_ints(&o, og_node(&o, "Transpose", "t", "xa", "xt"), "perm", 2,
                         (int64_t[]){1, 0});
            a = "xt";
        }
        param(&o, "B", 2, tb ? (int64_t[]){N, K} : (int64_t[]){K, N}, 1.0f);
        int cs = (int)rand_in(0, 2); /* C: [N], [R, N] or [1, 1] */
        param(&o, "C", cs == 1 ? 2 : cs == 2 ? 2 : 1,
              cs == 1 ? (int64_t[]){R, N} : cs == 2 ? (int64_t[]){1, 1} : (int64_t[]){N}, 1.0f);
        char ins[32];
        snprintf(ins, sizeof ins, "%s,B%s", a, with_c ? ",C" : "");
        bb_node *n = og_node(&o, "Gemm", "gemm", ins, "y");
        og_attr_int(&o, n, "transA", ta);
        og_attr_int(&o, n, "transB", tb);
        og_attr_float(&o, n, "alpha", 0.5f + (float)rand_in(0, 3) * 0.5f);
        og_attr_float(&o, n, "beta", 1.5f);
        og_output(&o, "y", 2, (int64_t[]){R, N});
        bb_value *x = rand_tensor(2, (int64_t[]){R, K}, 1.0f);
        fd_check(&o, MSE, x, 4); /* without C, C is unused: gradient 0 */
        bb_value_unref(x);
        og_end(&o);
    }
}

static void test_autodiff_matmul(void **state)
{
    (void)state;
    for (int v = 0; v < 3; v++) {
        g_rng = 200 + (uint64_t)v;
        int64_t R = rand_in(2, 4), S = rand_in(1, 3), K = rand_in(2, 5), N = rand_in(1, 4);
        og o;
        bb_value *x;
        if (v == 0) { /* [R, S, K] x [K, N]: the batch folds into M */
            begin(&o, "mm", 3, (int64_t[]){R, S, K}, 0.5f);
            param(&o, "W", 2, (int64_t[]){K, N}, 1.0f);
            x = rand_tensor(3, (int64_t[]){R, S, K}, 1.0f);
        } else if (v == 1) { /* [R, S, M=2, K] x [S, K, N]: broadcast over R */
            begin(&o, "mm", 4, (int64_t[]){R, S, 2, K}, 0.5f);
            param(&o, "W", 3, (int64_t[]){S, K, N}, 1.0f);
            x = rand_tensor(4, (int64_t[]){R, S, 2, K}, 1.0f);
        } else { /* [R, K] x [K]: a 1-D right operand */
            begin(&o, "mm", 2, (int64_t[]){R, K}, 0.5f);
            param(&o, "W", 1, (int64_t[]){K}, 1.0f);
            x = rand_tensor(2, (int64_t[]){R, K}, 1.0f);
        }
        og_node(&o, "MatMul", "mm", "xa,W", "y");
        og_output(&o, "y", 1, (int64_t[]){-1});
        fd_check(&o, MSE, x, 4);
        bb_value_unref(x);
        og_end(&o);
    }
}

/* ---- convolution and pooling ------------------------------------------------------------------ */

static void test_autodiff_conv(void **state)
{
    (void)state;
    for (int v = 0; v < 10; v++) {
        g_rng = 300 + (uint64_t)v;
        uint32_t ns = v < 8 ? 2 : 1;
        int64_t R = rand_in(1, 2), group = rand_in(1, 2), Cg = rand_in(1, 2), Mg = rand_in(1, 3);
        int64_t C = Cg * group, M = Mg * group;
        int64_t k[2], s[2], d[2], pads[4], sp[2];
        for (uint32_t i = 0; i < ns; i++) {
            k[i] = rand_in(1, 3);
            s[i] = rand_in(1, 2);
            d[i] = rand_in(1, 2);
            pads[i] = rand_in(0, k[i] - 1);
            pads[ns + i] = rand_in(0, k[i] - 1);
            sp[i] = (k[i] - 1) * d[i] + 1 + rand_in(0, 4);
        }
        int64_t xd[4] = {R, C, sp[0], sp[1]};
        og o;
        begin(&o, "conv", 2 + ns, xd, 0.5f);
        int64_t wd[4] = {M, Cg, k[0], k[1]};
        param(&o, "W", 2 + ns, wd, 1.0f);
        param(&o, "B", 1, &M, 1.0f);
        bb_node *n = og_node(&o, "Conv", "conv", v == 3 ? "xa,W" : "xa,W,B", "y");
        og_attr_ints(&o, n, "kernel_shape", ns, k);
        og_attr_ints(&o, n, "strides", ns, s);
        og_attr_ints(&o, n, "dilations", ns, d);
        og_attr_ints(&o, n, "pads", 2 * ns, pads);
        og_attr_int(&o, n, "group", group);
        og_output(&o, "y", 1, (int64_t[]){-1});
        bb_value *x = rand_tensor(2 + ns, xd, 1.0f);
        fd_check(&o, MSE, x, 5);
        bb_value_unref(x);
        og_end(&o);
    }
}

/* x with well-separated values (a shuffled grid), so no window's maximum
 * changes under the finite-difference step. */
static bb_value *separated(uint32_t nd, const int64_t *d)
{
    size_t n = numel(nd, d);
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = -1.0f + 0.05f * (float)i;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)rand_in(0, (int64_t)i - 1);
        float t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
    bb_value *t = tensor(v, nd, d);
    free(v);
    return t;
}

static void test_autodiff_pool(void **state)
{
    (void)state;
    for (int v = 0; v < 9; v++) {
        g_rng = 400 + (uint64_t)v;
        bool max = v < 4, global = v == 8;
        int64_t k[2], s[2], pads[4];
        for (int i = 0; i < 2; i++) {
            k[i] = rand_in(2, 3);
            s[i] = rand_in(1, 2);
            pads[i] = rand_in(0, k[i] - 1);
            pads[2 + i] = rand_in(0, k[i] - 1);
        }
        int64_t xd[4] = {2, rand_in(1, 3), rand_in(4, 6), rand_in(4, 6)};
        og o;
        begin(&o, "pool", 4, xd, 0.0f);
        /* a scale after the pool gives the loss a second parameter */
        param(&o, "s", 1, (int64_t[]){1}, 1.0f);
        bb_node *n = og_node(&o, global ? "GlobalAveragePool" : max ? "MaxPool" : "AveragePool",
                             "pool", "xa", "p");
        if (!global) {
            og_attr_ints(&o, n, "kernel_shape", 2, k);
            og_attr_ints(&o, n, "strides", 2, s);
            og_attr_ints(&o, n, "pads", 4, pads);
            og_attr_int(&o, n, "ceil_mode", v % 2);
            if (!max)
                og_attr_int(&o, n, "count_include_pad", v % 3 == 0);
        }
        og_node(&o, "Mul", "scale", "p,s", "y");
        og_output(&o, "y", 1, (int64_t[]){-1});
        bb_value *x = separated(4, xd);
        fd_check(&o, MSE, x, 6);
        bb_value_unref(x);
        og_end(&o);
    }
}

/* ---- normalization, activations, softmax ------------------------------------------------------- */

static void test_autodiff_batchnorm(void **state)
{
    (void)state;
    for (int v = 0; v < 3; v++) {
        g_rng = 500 + (uint64_t)v;
        int64_t C = rand_in(1, 4), xd[4] = {rand_in(2, 4), C, rand_in(1, 3), rand_in(1, 3)};
        uint32_t nd = v == 2 ? 2 : 4; /* [N, C] too */
        og o;
        begin(&o, "bn", nd, xd, 0.5f);
        param(&o, "scale", 1, &C, 1.0f);
        param(&o, "B", 1, &C, 1.0f);
        og_param(&o, "mean", 1, &C, (float[]){0, 0, 0, 0});
        og_param(&o, "var", 1, &C, (float[]){1, 1, 1, 1});
        bb_node *n = og_node(&o, "BatchNormalization", "bn", "xa,scale,B,mean,var", "h");
        og_attr_float(&o, n, "epsilon", 1e-3f);
        /* a nonlinearity after it, so the loss is not a quadratic of xhat alone */
        param(&o, "w", 1, &C, 1.0f);
        og_node(&o, "Tanh", "t", "h", "ht");
        og_output(&o, "ht", 1, (int64_t[]){-1});
        bb_value *x = rand_tensor(nd, xd, 2.0f);
        fd_check(&o, MSE, x, 4);
        bb_value_unref(x);
        og_end(&o);
    }
}

/* Forward in training mode moves the running statistics as PyTorch does. */
static void test_autodiff_batchnorm_running_stats(void **state)
{
    (void)state;
    g_rng = 510;
    og o;
    begin(&o, "bn", 2, (int64_t[]){4, 2}, 0.0f);
    og_param(&o, "scale", 1, (int64_t[]){2}, (float[]){1, 1});
    og_param(&o, "B", 1, (int64_t[]){2}, (float[]){0, 0});
    og_param(&o, "mean", 1, (int64_t[]){2}, (float[]){1, 2});
    og_param(&o, "var", 1, (int64_t[]){2}, (float[]){3, 4});
    og_attr_float(&o, og_node(&o, "BatchNormalization", "bn", "xa,scale,B,mean,var", "y"),
                  "momentum", 0.75f);
    og_output(&o, "y", 2, (int64_t[]){-1, 2});
    model m = make(&o, MSE);
    float xv[8] = {1, 10, 2, 20, 3, 30, 6, 40};
    bb_value *x = tensor(xv, 2, (int64_t[]){4, 2});
    bb_value_unref(call_ok(&m, "Forward", x, NULL));
    bb_value *p = call_ok(&m, "Params", NULL, NULL);
    const float *pv = bb_tensor_f32(p); /* p0[8], scale[2], B[2], mean[2], var[2] */
    /* channel 0: mean 3, unbiased var 14/3; channel 1: mean 25, var 500/3 */
    assert_float_equal(pv[12], 0.75f * 1 + 0.25f * 3, 1e-5);
    assert_float_equal(pv[13], 0.75f * 2 + 0.25f * 25, 1e-4);
    assert_float_equal(pv[14], 0.75f * 3 + 0.25f * (14.0f / 3), 1e-4);
    assert_float_equal(pv[15], 0.75f * 4 + 0.25f * (500.0f / 3), 1e-3);
    /* Evaluate runs in inference mode: the statistics stay */
    bb_value *t = tensor((float[]){0, 0, 0, 0, 0, 0, 0, 0}, 2, (int64_t[]){4, 2});
    bb_value_unref(call_ok(&m, "Evaluate", x, t));
    bb_value *p2 = call_ok(&m, "Params", NULL, NULL);
    assert_true(bb_value_equal(p, p2));
    bb_value_unref(p);
    bb_value_unref(p2);
    bb_value_unref(t);
    bb_value_unref(x);
    drop(&m);
    og_end(&o);
}

static void test_autodiff_activations(void **state)
{
    (void)state;
    static const char *const ops[] = {"Relu", "LeakyRelu", "Gelu", "Gelu", "Sigmoid", "Tanh",
                                      "Exp", "Neg"};
    for (size_t v = 0; v < sizeof ops / sizeof *ops; v++) {
        g_rng = 600 + v;
        int64_t R = rand_in(2, 4), F = rand_in(2, 6);
        og o;
        begin(&o, ops[v], 2, (int64_t[]){R, F}, 0.0f);
        param(&o, "s", 1, &F, 1.0f);
        bb_node *n = og_node(&o, ops[v], "act", "xa", "a");
        if (v == 1)
            og_attr_float(&o, n, "alpha", 0.2f);
        if (v == 3)
            og_attr_string(&o, n, "approximate", "tanh");
        og_node(&o, "Mul", "scale", "a,s", "y");
        og_output(&o, "y", 2, (int64_t[]){-1, F});
        bb_value *x = separated(2, (int64_t[]){R, F}); /* no value at Relu's kink */
        fd_check(&o, MSE, x, 6);
        bb_value_unref(x);
        og_end(&o);
    }
}

static void test_autodiff_softmax_layernorm(void **state)
{
    (void)state;
    for (int v = 0; v < 4; v++) {
        g_rng = 700 + (uint64_t)v;
        int64_t xd[3] = {rand_in(2, 3), rand_in(2, 4), rand_in(2, 5)};
        int64_t axis = v % 2 ? 1 : -1;
        og o;
        begin(&o, "norm", 3, xd, 0.5f);
        if (v < 2) {
            param(&o, "s", 1, &xd[2], 1.0f);
            og_attr_int(&o, og_node(&o, "Softmax", "sm", "xa", "p"), "axis", axis);
            og_node(&o, "Mul", "scale", "p,s", "y");
        } else {
            uint32_t nn = axis == 1 ? 2 : 1;
            param(&o, "Scale", nn, xd + 3 - nn, 1.0f);
            param(&o, "Bias", nn, xd + 3 - nn, 1.0f);
            bb_node *n = og_node(&o, "LayerNormalization", "ln", "xa,Scale,Bias", "l");
            og_attr_int(&o, n, "axis", axis);
            og_attr_float(&o, n, "epsilon", 1e-3f);
            og_node(&o, "Tanh", "t", "l", "y");
        }
        og_output(&o, "y", 1, (int64_t[]){-1});
        bb_value *x = rand_tensor(3, xd, 1.5f);
        fd_check(&o, MSE, x, 5);
        bb_value_unref(x);
        og_end(&o);
    }
}

/* ---- elementwise with broadcasting ---------------------------------------------------------------- */

static void test_autodiff_broadcast(void **state)
{
    (void)state;
    static const char *const ops[] = {"Add", "Sub", "Mul", "Div"};
    for (int v = 0; v < 12; v++) {
        g_rng = 800 + (uint64_t)v;
        int64_t R = rand_in(2, 3), A = rand_in(2, 3), B = rand_in(2, 4);
        int64_t shapes[4][3] = {{B}, {A, 1}, {1, 1, 1}, {R, A, B}};
        uint32_t rank[4] = {1, 2, 3, 3};
        int sh = v % 4;
        og o;
        begin(&o, ops[v / 3], 3, (int64_t[]){R, A, B}, 0.5f);
        float *pv = randv(numel(rank[sh], shapes[sh]), 1.0f);
        if (v / 3 == 3) /* divisors away from 0 */
            for (size_t i = 0; i < numel(rank[sh], shapes[sh]); i++)
                pv[i] = 1.5f + fabsf(pv[i]);
        og_param(&o, "P", rank[sh], shapes[sh], pv);
        free(pv);
        /* the parameter on the left for Sub / Div half the time */
        og_node(&o, ops[v / 3], "op", v % 2 && v / 3 != 3 ? "P,xa" : "xa,P", "y");
        og_output(&o, "y", 1, (int64_t[]){-1});
        bb_value *x = rand_tensor(3, (int64_t[]){R, A, B}, 1.0f);
        fd_check(&o, MSE, x, 5);
        bb_value_unref(x);
        og_end(&o);
    }
}

/* ---- shapes ------------------------------------------------------------------------------------------ */

static void test_autodiff_reshape_flatten_transpose(void **state)
{
    (void)state;
    g_rng = 900;
    int64_t xd[4] = {2, 2, 3, 4};
    og o;
    begin(&o, "shapes", 4, xd, 0.5f);
    og_attr_ints(&o, og_node(&o, "Transpose", "tr", "xa", "t"), "perm", 4,
                 (int64_t[]){0, 3, 1, 2});
    og_ints(&o, "shape", 3, (int64_t[]){2, 4, -1});
    og_node(&o, "Reshape", "rs", "t,shape", "r");
    og_attr_int(&o, og_node(&o, "Flatten", "fl", "r", "f"), "axis", 1);
    param(&o, "W", 2, (int64_t[]){24, 3}, 1.0f);
    og_node(&o, "MatMul", "mm", "f,W", "m");
    og_node(&o, "Transpose", "tr2", "m", "y"); /* the default: axes reversed */
    og_output(&o, "y", 2, (int64_t[]){3, 2});
    bb_value *x = rand_tensor(4, xd, 1.0f);
    fd_check(&o, MSE, x, 6);
    bb_value_unref(x);
    og_end(&o);
}

static void test_autodiff_concat_split(void **state)
{
    (void)state;
    g_rng = 910;
    og o;
    begin(&o, "cs", 2, (int64_t[]){3, 6}, 0.5f);
    param(&o, "Q", 2, (int64_t[]){3, 2}, 1.0f);
    og_ints(&o, "split", 3, (int64_t[]){1, 2, 3});
    /* b is never read: its part of the gradient is zero */
    og_attr_int(&o, og_node(&o, "Split", "sp", "xa,split", "a,b,c"), "axis", 1);
    /* xa read twice: its gradients add up */
    og_attr_int(&o, og_node(&o, "Concat", "cat", "c,Q,a,xa", "y"), "axis", 1);
    param(&o, "s", 1, (int64_t[]){12}, 1.0f);
    og_node(&o, "Mul", "m", "y,s", "z");
    og_output(&o, "z", 2, (int64_t[]){3, 12});
    bb_value *x = rand_tensor(2, (int64_t[]){3, 6}, 1.0f);
    fd_check(&o, MSE, x, 8);
    bb_value_unref(x);
    og_end(&o);
}

static void test_autodiff_slice_gather(void **state)
{
    (void)state;
    g_rng = 920;
    og o;
    begin(&o, "sg", 3, (int64_t[]){2, 8, 5}, 0.5f);
    og_ints(&o, "starts", 2, (int64_t[]){6, 1});
    og_ints(&o, "ends", 2, (int64_t[]){0, 5});
    og_ints(&o, "axes", 2, (int64_t[]){1, -1});
    og_ints(&o, "steps", 2, (int64_t[]){-2, 2});
    og_node(&o, "Slice", "sl", "xa,starts,ends,axes,steps", "s"); /* [2, 3, 2] */
    og_ints(&o, "idx", 4, (int64_t[]){0, 2, 2, -1});
    og_attr_int(&o, og_node(&o, "Gather", "ga", "s,idx", "g"), "axis", 1); /* [2, 4, 2] */
    param(&o, "E", 2, (int64_t[]){5, 2}, 1.0f); /* an embedding table, gathered */
    og_ints(&o, "rows", 4, (int64_t[]){4, 0, 4, 1});
    og_node(&o, "Gather", "emb", "E,rows", "e"); /* [4, 2] */
    og_node(&o, "Add", "sum", "g,e", "y");
    og_output(&o, "y", 3, (int64_t[]){2, 4, 2});
    bb_value *x = rand_tensor(3, (int64_t[]){2, 8, 5}, 1.0f);
    fd_check(&o, MSE, x, 8);
    bb_value_unref(x);
    og_end(&o);
}

static void test_autodiff_reduce(void **state)
{
    (void)state;
    for (int v = 0; v < 4; v++) {
        g_rng = 930 + (uint64_t)v;
        og o;
        begin(&o, "red", 3, (int64_t[]){2, 3, 4}, 0.5f);
        param(&o, "P", 3, (int64_t[]){2, 3, 4}, 1.0f);
        og_node(&o, "Mul", "m", "xa,P", "xp");
        bb_node *n;
        if (v < 2) { /* opset 18: axes as an input */
            og_ints(&o, "axes", v ? 2 : 1, v ? (int64_t[]){1, 2} : (int64_t[]){-1});
            n = og_node(&o, v ? "ReduceMean" : "ReduceSum", "r", "xp,axes", "y");
        } else { /* older: an attribute */
            n = og_node(&o, v == 2 ? "ReduceMean" : "ReduceSum", "r", "xp", "y");
            og_attr_ints(&o, n, "axes", 1, (int64_t[]){1});
        }
        og_attr_int(&o, n, "keepdims", v % 2);
        og_output(&o, "y", 1, (int64_t[]){-1});
        bb_value *x = rand_tensor(3, (int64_t[]){2, 3, 4}, 1.0f);
        fd_check(&o, MSE, x, 6);
        bb_value_unref(x);
        og_end(&o);
    }
}

/* Dropout masks in training: Gradients draws the same mask every time
 * (the model's seed), so finite differences see one function. */
static void test_autodiff_dropout(void **state)
{
    (void)state;
    g_rng = 940;
    og o;
    begin(&o, "drop", 2, (int64_t[]){4, 6}, 0.5f);
    og_param(&o, "ratio", 0, NULL, (float[]){0.4f});
    og_tensor(&o, "training", BB_DT_BOOL, 0, NULL, (uint8_t[]){1});
    og_node(&o, "Dropout", "do", "xa,ratio,training", "d,mask");
    param(&o, "s", 1, (int64_t[]){6}, 1.0f);
    og_node(&o, "Mul", "m", "d,s", "y");
    og_output(&o, "y", 2, (int64_t[]){-1, 6});
    bb_value *x = rand_tensor(2, (int64_t[]){4, 6}, 1.0f);
    fd_check(&o, MSE, x, 8);
    /* some entries dropped, the rest scaled by 1 / (1 - 0.4); inference passes all */
    model m = make(&o, MSE);
    bb_value *y = call_ok(&m, "Forward", x, NULL);
    int zeros = 0;
    for (size_t i = 0; i < 24; i++)
        zeros += bb_tensor_f32(y)[i] == 0;
    assert_true(zeros > 0 && zeros < 24);
    bb_value_unref(y);
    drop(&m);
    bb_value_unref(x);
    og_end(&o);
}

/* ---- refusals ------------------------------------------------------------------------------------------ */

static void expect_refused(og *o, const char *config, const char *want1, const char *want2)
{
    model m;
    bb_error err = {0};
    assert_false(o->oom);
    if (try_make(o, config, &m, &err) == BB_OK) {
        drop(&m);
        fail_msg("created; expected a refusal naming %s", want1);
    }
    if (!strstr(err.msg, want1) || (want2 && !strstr(err.msg, want2)))
        fail_msg("message \"%s\" does not name %s / %s", err.msg, want1, want2 ? want2 : "");
}

static void test_autodiff_refusals(void **state)
{
    (void)state;
    g_rng = 950;
    og o;
    /* Abs has a forward kernel, no gradient rule, and sits on the path */
    begin(&o, "r", 2, (int64_t[]){2, 3}, 0.5f);
    og_node(&o, "Abs", "the_abs", "xa", "y");
    og_output(&o, "y", 2, (int64_t[]){2, 3});
    expect_refused(&o, MSE, "the_abs", "Abs");
    og_end(&o);
    /* ... but off the path it runs: ArgMax of the data only */
    begin(&o, "r", 2, (int64_t[]){2, 3}, 0.5f);
    og_attr_int(&o, og_node(&o, "ArgMax", "am", "x", "i"), "axis", 1);
    og_output(&o, "xa", 2, (int64_t[]){2, 3});
    model m = make(&o, MSE);
    drop(&m);
    og_end(&o);
    /* an op nobody knows */
    begin(&o, "r", 2, (int64_t[]){2, 3}, 0.5f);
    og_node(&o, "FancyOp", "fancy", "xa", "y");
    og_output(&o, "y", 2, (int64_t[]){2, 3});
    expect_refused(&o, MSE, "fancy", "FancyOp");
    og_end(&o);
    /* reading a value before it exists */
    begin(&o, "r", 2, (int64_t[]){2, 3}, 0.5f);
    og_node(&o, "Relu", "early", "late", "y");
    og_node(&o, "Relu", "producer", "xa", "late");
    og_output(&o, "y", 2, (int64_t[]){2, 3});
    expect_refused(&o, MSE, "early", "late");
    og_end(&o);
    /* two data inputs */
    begin(&o, "r", 2, (int64_t[]){2, 3}, 0.5f);
    og_input(&o, "x2", 2, (int64_t[]){2, 3});
    og_node(&o, "Add", "a2", "xa,x2", "y");
    og_output(&o, "y", 2, (int64_t[]){2, 3});
    expect_refused(&o, MSE, "x2", "one data input");
    og_end(&o);
    /* no trained parameter reaches the output */
    og_begin(&o, "r");
    og_input(&o, "x", 2, (int64_t[]){2, 3});
    og_node(&o, "Relu", "r", "x", "y");
    og_output(&o, "y", 2, (int64_t[]){2, 3});
    expect_refused(&o, MSE, "'y'", "no trained parameter");
    og_end(&o);
    /* bad config: unknown optimizer, frozen name that does not exist */
    begin(&o, "r", 2, (int64_t[]){2, 3}, 0.5f);
    og_node(&o, "Relu", "r", "xa", "y");
    og_output(&o, "y", 2, (int64_t[]){2, 3});
    expect_refused(&o, "{\"optimizer\": \"rmsprop\"}", "optimizer", NULL);
    expect_refused(&o, "{\"frozen\": [\"nope\"]}", "nope", NULL);
    /* no graph at all */
    bb_error err = {0};
    const bb_component_type *t = pfx_type("nn::Onnx");
    assert_null(pfx_create(t, "model", "{}", NULL, 1, NULL, &err));
    assert_non_null(strstr(err.msg, "no graph"));
    og_end(&o);
}

/* A run-time shape error names the node (the kernel's message). */
static void test_autodiff_runtime_error(void **state)
{
    (void)state;
    g_rng = 955;
    og o;
    begin(&o, "r", 2, (int64_t[]){2, 3}, 0.5f);
    param(&o, "W", 2, (int64_t[]){3, 4}, 1.0f);
    og_node(&o, "MatMul", "the_matmul", "x,W", "y");
    og_node(&o, "Add", "plus", "y,xa", "z"); /* [2,4] + [2,3]: does not broadcast */
    og_output(&o, "z", 2, (int64_t[]){2, 4});
    model m = make(&o, MSE);
    bb_value *x = rand_tensor(2, (int64_t[]){2, 3}, 1.0f), *out[1];
    bb_error err = {0};
    assert_int_not_equal(call(&m, "Forward", x, NULL, out, 1, &err), BB_OK);
    assert_non_null(strstr(err.msg, "plus"));
    /* a batch of the wrong width */
    bb_value *bad = rand_tensor(2, (int64_t[]){2, 5}, 1.0f);
    assert_int_not_equal(call(&m, "Forward", bad, NULL, out, 1, &err), BB_OK);
    assert_non_null(strstr(err.msg, "nn::Onnx"));
    bb_value_unref(bad);
    bb_value_unref(x);
    drop(&m);
    og_end(&o);
}

/* ---- the model around the gradients ------------------------------------------------------------------ */

/* A small CNN on 8x8 images (the shape of examples/cnn). */
static void small_cnn(og *o)
{
    og_begin(o, "cnn");
    cnn_shape s = {8, 3, 4, 6, 4, true};
    cnn_graph(o, &s, 11);
}

static void test_autodiff_cnn_gradients(void **state)
{
    (void)state;
    g_rng = 960;
    og o;
    small_cnn(&o);
    bb_value *x = rand_tensor(2, (int64_t[]){3, 64}, 1.0f);
    /* Relu and MaxPool kinks everywhere: a small step, looser tolerances */
    fd_check_h(&o, MSE, x, 1e-3f, 2e-3, 3e-2, 3);
    bb_value_unref(x);
    og_end(&o);
}

/* Parameters in initializer order, named; buffers are not trained. */
static void test_autodiff_param_layout(void **state)
{
    (void)state;
    og o;
    small_cnn(&o);
    model m = make(&o, "{}");
    layout l;
    read_layout(&m, &l);
    static const char *const names[] = {
        "conv1.weight", "conv1.bias", "bn1.weight", "bn1.bias", "bn1.running_mean",
        "bn1.running_var", "conv2.weight", "conv2.bias", "bn2.weight", "bn2.bias",
        "bn2.running_mean", "bn2.running_var", "fc1.weight", "fc1.bias", "fc2.weight",
        "fc2.bias"};
    assert_int_equal(l.n, 16); /* image_shape is int64: a constant */
    size_t off = 0;
    for (size_t i = 0; i < 16; i++) {
        assert_string_equal(l.name[i], names[i]);
        assert_int_equal(l.off[i], off);
        off += l.len[i];
    }
    bb_value *p = call_ok(&m, "Params", NULL, NULL);
    assert_int_equal(bb_tensor_numel(p), off);
    /* the initial values are the graph's: bn1.running_var starts at 1 */
    assert_float_equal(bb_tensor_f32(p)[l.off[5]], 1.0f, 0);
    bb_value *b = call_trig(&m, "ParamNames");
    static const char want[] = "{\"name\": \"bn1.running_mean\", \"offset\": 36, "
                               "\"shape\": [3], \"trained\": false}";
    assert_non_null(memmem(b->u.bytes.data, b->u.bytes.len, want, sizeof want - 1));
    bb_value_unref(b);
    bb_value_unref(p);
    drop(&m);
    og_end(&o);
}

/* Forward + Backward + Step (SGD, lr 1) moves the parameters by exactly
 * -Gradients; Step with a given gradient too. */
static void test_autodiff_forward_backward_step(void **state)
{
    (void)state;
    g_rng = 970;
    og o;
    begin(&o, "fbs", 2, (int64_t[]){3, 4}, 0.5f);
    param(&o, "W", 2, (int64_t[]){5, 4}, 1.0f);
    param(&o, "b", 1, (int64_t[]){5}, 1.0f);
    og_attr_int(&o, og_node(&o, "Gemm", "fc", "xa,W,b", "y"), "transB", 1);
    og_output(&o, "y", 2, (int64_t[]){-1, 5});
    model m = make(&o, "{\"loss\": \"mse\", \"learning_rate\": 1}");
    bb_value *x = rand_tensor(2, (int64_t[]){3, 4}, 1.0f);
    bb_value *t = rand_tensor(2, (int64_t[]){3, 5}, 1.0f);
    double l;
    bb_value *g = grads(&m, x, t, &l), *p0 = call_ok(&m, "Params", NULL, NULL);
    size_t n = bb_tensor_numel(p0);
    /* dLoss/dy of the mean MSE: 2 (y - t) / (rows * k) */
    bb_value *y = call_ok(&m, "Forward", x, NULL);
    float dy[15];
    for (int i = 0; i < 15; i++)
        dy[i] = 2.0f * (bb_tensor_f32(y)[i] - bb_tensor_f32(t)[i]) / 15.0f;
    bb_value *dyv = tensor(dy, 2, (int64_t[]){3, 5});
    bb_value_unref(call_ok(&m, "Backward", dyv, NULL));
    bb_value *empty = tensor(dy, 1, (int64_t[]){0});
    bb_value_unref(call_ok(&m, "Step", empty, NULL));
    bb_value *p1 = call_ok(&m, "Params", NULL, NULL);
    for (size_t i = 0; i < n; i++)
        assert_float_equal(bb_tensor_f32(p0)[i] - bb_tensor_f32(p1)[i], bb_tensor_f32(g)[i],
                           1e-5);
    /* Step without a pending gradient is refused */
    bb_value *out[1];
    bb_error err = {0};
    assert_int_equal(call(&m, "Step", empty, NULL, out, 1, &err), BB_ESTATE);
    /* Backward without a Forward too */
    assert_int_equal(call(&m, "Backward", dyv, NULL, out, 1, &err), BB_ESTATE);
    /* Step(g) moves by -g */
    bb_value_unref(call_ok(&m, "Step", g, NULL));
    bb_value *p2 = call_ok(&m, "Params", NULL, NULL);
    for (size_t i = 0; i < n; i++)
        assert_float_equal(bb_tensor_f32(p1)[i] - bb_tensor_f32(p2)[i], bb_tensor_f32(g)[i],
                           1e-5);
    bb_value *vals[] = {g, p0, y, dyv, empty, p1, p2, x, t};
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++)
        bb_value_unref(vals[i]);
    drop(&m);
    og_end(&o);
}

/* One step of each optimizer against the formula; FedProx's pull. */
static void test_autodiff_optimizers(void **state)
{
    (void)state;
    static const char *const cfg[] = {
        "{\"optimizer\": \"sgd\", \"learning_rate\": 0.1, \"momentum\": 0.9, "
        "\"weight_decay\": 0.01}",
        "{\"optimizer\": \"adam\", \"learning_rate\": 0.1, \"weight_decay\": 0.01}",
        "{\"optimizer\": \"adamw\", \"learning_rate\": 0.1, \"weight_decay\": 0.01}",
        "{\"optimizer\": \"sgd\", \"learning_rate\": 0.1, \"proximal_mu\": 0.5}"};
    for (int v = 0; v < 4; v++) {
        g_rng = 980;
        og o;
        og_begin(&o, "opt");
        og_input(&o, "x", 2, (int64_t[]){-1, 2});
        og_param(&o, "w", 1, (int64_t[]){2}, (float[]){1.0f, -2.0f});
        og_node(&o, "Mul", "m", "x,w", "y");
        og_output(&o, "y", 2, (int64_t[]){-1, 2});
        model m = make(&o, cfg[v]);
        float g[2] = {0.5f, -1.0f};
        bb_value *gv = tensor(g, 1, (int64_t[]){2});
        if (v == 3) { /* the center: w = (1, -2); then move w to (2, 0) */
            bb_value *d = tensor((float[]){1, 2}, 1, (int64_t[]){2});
            bb_value_unref(call_ok(&m, "ApplyDelta", d, NULL));
            bb_value_unref(d);
        }
        bb_value_unref(call_ok(&m, "Step", gv, NULL));
        bb_value *p = call_ok(&m, "Params", NULL, NULL);
        float w[2] = {1.0f, -2.0f}, want[2];
        for (int i = 0; i < 2; i++) {
            float gi;
            switch (v) {
            case 0: /* m = g + wd w; w -= lr m */
                want[i] = w[i] - 0.1f * (g[i] + 0.01f * w[i]);
                break;
            case 1: /* Adam, first step: w -= lr sign(g') with g' = g + wd w */
                gi = g[i] + 0.01f * w[i];
                want[i] = w[i] - 0.1f * gi / (fabsf(gi) + 1e-8f);
                break;
            case 2: /* AdamW: w = w (1 - lr wd) - lr sign(g) */
                want[i] = w[i] * (1 - 0.1f * 0.01f) - 0.1f * g[i] / (fabsf(g[i]) + 1e-8f);
                break;
            default: /* w = (2, 0), center (1, -2): g + mu (w - center) */
                want[i] = (i ? 0.0f : 2.0f) - 0.1f * (g[i] + 0.5f * (i ? 2.0f : 1.0f));
            }
            assert_float_equal(bb_tensor_f32(p)[i], want[i], 1e-5);
        }
        bb_value_unref(p);
        bb_value_unref(gv);
        drop(&m);
        og_end(&o);
    }
}

static void test_autodiff_snapshot(void **state)
{
    (void)state;
    og o;
    small_cnn(&o);
    model m = make(&o, "{\"optimizer\": \"adam\"}");
    bb_value *x = rand_tensor(2, (int64_t[]){2, 64}, 1.0f);
    bb_value *t = tensor((float[]){1, 3}, 1, (int64_t[]){2});
    double l;
    bb_value *g = grads(&m, x, t, &l);
    bb_value_unref(call_ok(&m, "Step", g, NULL));
    uint8_t *snap;
    size_t len;
    bb_error err = {0};
    assert_int_equal(m.t->snapshot(m.inst, &snap, &len, &err), BB_OK);
    model m2 = make(&o, "{\"optimizer\": \"adam\"}");
    assert_int_equal(m2.t->restore(m2.inst, snap, len, &err), BB_OK);
    bb_value *a = call_ok(&m, "Params", NULL, NULL), *b = call_ok(&m2, "Params", NULL, NULL);
    assert_true(bb_value_equal(a, b));
    /* a truncated snapshot, another optimizer: refused */
    assert_int_equal(m2.t->restore(m2.inst, snap, len - 1, &err), BB_EDECODE);
    model m3 = make(&o, "{\"optimizer\": \"sgd\"}");
    assert_int_equal(m3.t->restore(m3.inst, snap, len, &err), BB_EDECODE);
    free(snap);
    bb_value *vals[] = {x, t, g, a, b};
    for (size_t i = 0; i < 5; i++)
        bb_value_unref(vals[i]);
    drop(&m);
    drop(&m2);
    drop(&m3);
    og_end(&o);
}

/* Evaluate's loss and accuracy (inference mode). */
static double evaluate(model *m, bb_value *x, bb_value *t)
{
    bb_value *out[2] = {0};
    bb_error err = {0};
    if (call(m, "Evaluate", x, t, out, 2, &err))
        fail_msg("Evaluate: %s", err.msg);
    double loss = *bb_tensor_f32(out[0]);
    bb_value_unref(out[0]);
    bb_value_unref(out[1]);
    return loss;
}

/* Inference runs Conv and Gemm on oneDNN with their weights packed once per
 * parameter version: its loss equals the kernels' (a training forward,
 * which packs every time, on a graph without batch statistics), and every
 * op that changes the parameters (Step, Forward + Backward + Step,
 * ApplyDelta, LoadParameters, a restore) makes the next Evaluate see the
 * new weights: it equals a fresh model's given the same parameters. */
static void test_autodiff_packed_weights_follow_changes(void **state)
{
    (void)state;
    g_rng = 990;
    og o;
    og_begin(&o, "packed");
    og_input(&o, "x", 4, (int64_t[]){-1, 16, 6, 6});
    param(&o, "W1", 4, (int64_t[]){16, 16, 3, 3}, 0.1f);
    param(&o, "B1", 1, (int64_t[]){16}, 0.1f);
    param(&o, "W2", 2, (int64_t[]){5, 16 * 36}, 0.05f);
    param(&o, "B2", 1, (int64_t[]){5}, 0.1f);
    bb_node *cv = og_node(&o, "Conv", "conv", "x,W1,B1", "c");
    og_attr_ints(&o, cv, "kernel_shape", 2, (int64_t[]){3, 3});
    og_attr_ints(&o, cv, "pads", 4, (int64_t[]){1, 1, 1, 1});
    og_node(&o, "Relu", "relu", "c", "r");
    og_attr_int(&o, og_node(&o, "Flatten", "flat", "r", "f"), "axis", 1);
    og_attr_int(&o, og_node(&o, "Gemm", "fc", "f,W2,B2", "y"), "transB", 1);
    og_output(&o, "y", 2, (int64_t[]){-1, 5});
    const char *cfg = "{\"learning_rate\": 0.5}";
    model m = make(&o, cfg), fresh = make(&o, cfg);
    bb_value *x = rand_tensor(4, (int64_t[]){6, 16, 6, 6}, 1.0f);
    bb_value *t = tensor((float[]){0, 1, 2, 3, 4, 0}, 1, (int64_t[]){6});
    double l0, e0 = evaluate(&m, x, t);
    bb_value *g = grads(&m, x, t, &l0);
    assert_float_equal(e0, l0, 1e-4 * fmax(1, fabs(l0))); /* Winograd (16 channels) rounds */
    bb_value *d = rand_tensor(1, (int64_t[]){(int64_t)bb_tensor_numel(g)}, 0.05f);
    int64_t dy_dims[2] = {6, 5};
    bb_value *dy = rand_tensor(2, dy_dims, 0.1f);
    double last = e0;
    for (int change = 0; change < 5; change++) {
        switch (change) {
        case 0:
            bb_value_unref(call_ok(&m, "Step", g, NULL));
            break;
        case 1: {
            bb_value *empty = tensor(NULL, 1, (int64_t[]){0});
            bb_value_unref(call_ok(&m, "Forward", x, NULL));
            bb_value_unref(call_ok(&m, "Backward", dy, NULL));
            bb_value_unref(call_ok(&m, "Step", empty, NULL));
            bb_value_unref(empty);
            break;
        }
        case 2:
            bb_value_unref(call_ok(&m, "ApplyDelta", d, NULL));
            break;
        case 3: {
            bb_value *p = call_ok(&fresh, "Params", NULL, NULL); /* the initial values */
            bb_value_unref(call_ok(&m, "LoadParameters", p, NULL));
            bb_value_unref(p);
            break;
        }
        default: { /* a snapshot of a stepped model, restored */
            model other = make(&o, cfg);
            bb_value_unref(call_ok(&other, "Step", d, NULL));
            uint8_t *snap;
            size_t len;
            bb_error err = {0};
            assert_int_equal(other.t->snapshot(other.inst, &snap, &len, &err), BB_OK);
            assert_int_equal(m.t->restore(m.inst, snap, len, &err), BB_OK);
            free(snap);
            drop(&other);
        }
        }
        bb_value *p = call_ok(&m, "Params", NULL, NULL);
        bb_value_unref(call_ok(&fresh, "LoadParameters", p, NULL));
        bb_value_unref(p);
        double e = evaluate(&m, x, t), want = evaluate(&fresh, x, t);
        if (e != want || (change != 3 && e == last))
            fail_msg("change %d: Evaluate %.9g, a fresh model %.9g (before: %.9g)", change, e,
                     want, last);
        last = e;
    }
    bb_value *vals[] = {x, t, g, d, dy};
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++)
        bb_value_unref(vals[i]);
    drop(&m);
    drop(&fresh);
    og_end(&o);
}

/* ExportOnnx: python3-onnx's checker accepts it, and every parameter sits
 * under its initializer name with its current value. */
static void test_autodiff_export_onnx(void **state)
{
    (void)state;
    if (system("/usr/bin/python3 -c 'import onnx' 2>/dev/null") != 0) {
        fail_msg("python3-onnx is missing (scripts/deps installs it)");
    }
    og o;
    small_cnn(&o);
    model m = make(&o, "{\"learning_rate\": 0.5}");
    bb_value *x = rand_tensor(2, (int64_t[]){4, 64}, 1.0f);
    bb_value *t = tensor((float[]){0, 1, 2, 3}, 1, (int64_t[]){4});
    double l;
    bb_value *g = grads(&m, x, t, &l);
    bb_value_unref(call_ok(&m, "Step", g, NULL)); /* the values differ from the graph's now */
    bb_value *onnx = call_trig(&m, "ExportOnnx");
    bb_value *p = call_ok(&m, "Params", NULL, NULL);
    bb_value *names = call_trig(&m, "ParamNames");
    char dir[] = "/tmp/bb-autodiff.XXXXXX", path[128], cmd[1024];
    assert_non_null(mkdtemp(dir));
    const struct { const char *name; const void *data; size_t len; } files[] = {
        {"model.onnx", onnx->u.bytes.data, onnx->u.bytes.len},
        {"params.f32", p->u.tensor.data, p->u.tensor.nbytes},
        {"names.json", names->u.bytes.data, names->u.bytes.len}};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i].name);
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(files[i].data, 1, files[i].len, f), files[i].len);
        fclose(f);
    }
    snprintf(cmd, sizeof cmd,
             "cd %s && /usr/bin/python3 -c '\n"
             "import json, onnx, numpy as np\n"
             "from onnx import numpy_helper\n"
             "m = onnx.load(\"model.onnx\")\n"
             "onnx.checker.check_model(m, full_check=True)\n"
             "p = np.fromfile(\"params.f32\", dtype=np.float32)\n"
             "inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}\n"
             "for e in json.load(open(\"names.json\")):\n"
             "    a = inits[e[\"name\"]].ravel()\n"
             "    assert np.array_equal(a, p[e[\"offset\"]:e[\"offset\"] + a.size]), e[\"name\"]\n"
             "print(\"export ok:\", len(inits), \"initializers\")\n"
             "'",
             dir);
    int rc = system(cmd);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(rc, 0);
    bb_value *vals[] = {x, t, g, onnx, p, names};
    for (size_t i = 0; i < 6; i++)
        bb_value_unref(vals[i]);
    drop(&m);
    og_end(&o);
}

/* ---- against PyTorch's autograd ------------------------------------------------------------- */

static void *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
    p[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return p;
}

/* tests/integration/autodiff_torch.py exports a network of the supported
 * ops with torch.onnx.export and computes its softmax cross-entropy
 * gradient with autograd; nn::Onnx, loading that file, must agree on the
 * loss, on every parameter's gradient (by initializer name) and on how
 * BatchNormalization's running statistics move. Skipped, with a message,
 * where python3-torch is not installed (make bench installs it). */
static void test_autodiff_vs_pytorch(void **state)
{
    (void)state;
    if (system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0) {
        print_message("  PyTorch comparison skipped: python3-torch is not installed "
                      "(make bench installs it: scripts/bench-deps)\n");
        skip();
    }
    char dir[] = "/tmp/bb-autodiff-torch.XXXXXX", cmd[1024], path[256];
    assert_non_null(mkdtemp(dir));
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s 2>/dev/null",
             pfx_repo_path("tests/integration/autodiff_torch.py"), dir);
    assert_int_equal(system(cmd), 0);
    char cfg[512];
    snprintf(cfg, sizeof cfg, "{\"model_file\": \"%s/model.onnx\"}", dir);
    model m = {pfx_type("nn::Onnx"), NULL};
    bb_error err = {0};
    m.inst = pfx_create(m.t, "model", cfg, NULL, 1, NULL, &err);
    if (!m.inst)
        fail_msg("create from the PyTorch export: %s", err.msg);
    size_t len;
    snprintf(path, sizeof path, "%s/x.f32", dir);
    float *xv = read_file(path, &len);
    assert_int_equal(len, 8 * 64 * sizeof(float));
    snprintf(path, sizeof path, "%s/y.i64", dir);
    int64_t *yv = read_file(path, &len);
    bb_value *x = tensor(xv, 2, (int64_t[]){8, 64});
    bb_value *y = bb_value_tensor_copy(BB_DT_INT64, 1, (int64_t[]){8}, yv, 8 * sizeof *yv);
    snprintf(path, sizeof path, "%s/torch.json", dir);
    char *js = read_file(path, &len);
    cJSON *want = cJSON_Parse(js);
    assert_non_null(want);
    double loss;
    bb_value *g = grads(&m, x, y, &loss);
    double tl = cJSON_GetObjectItem(want, "loss")->valuedouble;
    if (fabs(loss - tl) > 1e-4 * fmax(1, fabs(tl)))
        fail_msg("loss: nn::Onnx %.7g, PyTorch %.7g", loss, tl);
    layout lay;
    read_layout(&m, &lay);
    int compared = 0;
    for (cJSON *e = cJSON_GetObjectItem(want, "grads")->child; e; e = e->next, compared++) {
        size_t q = 0;
        while (q < lay.n && strcmp(lay.name[q], e->string) != 0)
            q++;
        if (q == lay.n)
            fail_msg("PyTorch's parameter %s is no trained initializer of the export", e->string);
        assert_int_equal((size_t)cJSON_GetArraySize(e), lay.len[q]);
        size_t i = 0;
        for (cJSON *v = e->child; v; v = v->next, i++) {
            double an = bb_tensor_f32(g)[lay.off[q] + i], tv = v->valuedouble;
            if (fabs(an - tv) > 1e-5 + 2e-3 * fabs(tv))
                fail_msg("d loss / d %s[%zu]: nn::Onnx %.7g, PyTorch %.7g", e->string, i, an, tv);
        }
    }
    assert_int_equal(compared, 12);
    /* a training Forward moves bn1's running statistics as PyTorch does */
    bb_value *p0 = call_ok(&m, "Params", NULL, NULL);
    bb_value_unref(call_ok(&m, "Forward", x, NULL));
    bb_value *p1 = call_ok(&m, "Params", NULL, NULL);
    double mom = cJSON_GetObjectItem(want, "momentum")->valuedouble;
    static const char *const stats[2][2] = {{"bn1.running_mean", "batch_mean"},
                                            {"bn1.running_var", "batch_var_unbiased"}};
    for (int k = 0; k < 2; k++) {
        size_t q = 0;
        while (q < lay.n && strcmp(lay.name[q], stats[k][0]) != 0)
            q++;
        assert_true(q < lay.n);
        cJSON *b = cJSON_GetObjectItem(want, stats[k][1])->child;
        for (size_t i = 0; i < lay.len[q]; i++, b = b->next) {
            double before = bb_tensor_f32(p0)[lay.off[q] + i];
            double after = bb_tensor_f32(p1)[lay.off[q] + i];
            double expect = (1 - mom) * before + mom * b->valuedouble;
            assert_float_equal(after, expect, 1e-4 * fmax(1, fabs(expect)));
        }
    }
    print_message("  nn::Onnx agrees with PyTorch autograd: loss %.6f, 12 parameters' "
                  "gradients, running statistics\n", loss);
    cJSON_Delete(want);
    free(js);
    free(xv);
    free(yv);
    bb_value *vals[] = {x, y, g, p0, p1};
    for (size_t i = 0; i < 5; i++)
        bb_value_unref(vals[i]);
    drop(&m);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_autodiff_gemm),
        cmocka_unit_test(test_autodiff_matmul),
        cmocka_unit_test(test_autodiff_conv),
        cmocka_unit_test(test_autodiff_pool),
        cmocka_unit_test(test_autodiff_batchnorm),
        cmocka_unit_test(test_autodiff_batchnorm_running_stats),
        cmocka_unit_test(test_autodiff_activations),
        cmocka_unit_test(test_autodiff_softmax_layernorm),
        cmocka_unit_test(test_autodiff_broadcast),
        cmocka_unit_test(test_autodiff_reshape_flatten_transpose),
        cmocka_unit_test(test_autodiff_concat_split),
        cmocka_unit_test(test_autodiff_slice_gather),
        cmocka_unit_test(test_autodiff_reduce),
        cmocka_unit_test(test_autodiff_dropout),
        cmocka_unit_test(test_autodiff_refusals),
        cmocka_unit_test(test_autodiff_runtime_error),
        cmocka_unit_test(test_autodiff_cnn_gradients),
        cmocka_unit_test(test_autodiff_param_layout),
        cmocka_unit_test(test_autodiff_forward_backward_step),
        cmocka_unit_test(test_autodiff_optimizers),
        cmocka_unit_test(test_autodiff_snapshot),
        cmocka_unit_test(test_autodiff_packed_weights_follow_changes),
        cmocka_unit_test(test_autodiff_export_onnx),
        cmocka_unit_test(test_autodiff_vs_pytorch),
    };
    return cmocka_run_group_tests(tests, NULL, pfx_group_teardown);
}
