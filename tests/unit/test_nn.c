/*
 * Unit tests for nn::Mlp, loaded from the build's nn.so and driven through
 * its dispatch entry (the synchronous ops; Train and EvaluateMetrics run
 * through the engine in test_nn_engine.c): the parameter layout and
 * initialization, construction weights, a hand-computed forward pass, the
 * gradient of every activation x loss combination against central finite
 * differences, Backward + Step against Gradients, the optimizers against
 * hand-computed steps, FedProx's proximal term in Step, the error surface,
 * snapshots, and the extension reads ParamsOn / ParamsDigest.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/plugin_fixtures.h"

typedef struct net {
    const bb_component_type *t;
    void *inst;
} net;

static void *try_make(const char *config, const bb_attr *construction, bb_error *err)
{
    return pfx_create(pfx_type("nn::Mlp"), "model", config, construction, 42, NULL, err);
}

static net make(const char *config)
{
    net n = {pfx_type("nn::Mlp"), NULL};
    assert_non_null(n.t);
    bb_error err = {0};
    n.inst = try_make(config, NULL, &err);
    if (!n.inst)
        fail_msg("create %s: %s", config, err.msg);
    return n;
}

static void drop(net *n) { n->t->destroy(n->inst); }

/* op with up to two inputs (borrowed) -> one output (new ref) or error. */
static int call(net *n, const char *op, bb_value *a, bb_value *b, bb_value **out, bb_error *err)
{
    bb_value *in[2] = {a, b};
    uint32_t k = b ? 2 : a ? 1 : 0;
    bb_value *o[2] = {0};
    int rc = pfx_call(n->t, n->inst, NULL, op, NULL, in, k, o, 1, err);
    if (out)
        *out = o[0];
    else
        bb_value_unref(o[0]);
    return rc;
}

static bb_value *call_ok(net *n, const char *op, bb_value *a, bb_value *b)
{
    bb_value *out = NULL;
    bb_error err = {0};
    if (call(n, op, a, b, &out, &err))
        fail_msg("%s: %s", op, err.msg);
    return out;
}

static bb_value *mat(const float *v, int64_t rows, int64_t cols)
{
    int64_t d[2] = {rows, cols};
    return pfx_tensor(v, 2, d);
}

static bb_value *vecf(const float *v, int64_t n) { return pfx_tensor(v, 1, &n); }

static float loss_of(net *n, bb_value *x, bb_value *y)
{
    bb_value *l = call_ok(n, "Evaluate", x, y);
    assert_int_equal(l->u.tensor.ndim, 0);
    float v = *bb_tensor_f32(l);
    bb_value_unref(l);
    return v;
}

static void load(net *n, const float *p, size_t np)
{
    bb_value *v = vecf(p, (int64_t)np);
    bb_value_unref(call_ok(n, "LoadParameters", v, NULL));
    bb_value_unref(v);
}

/* ---- layout, init, construction --------------------------------------------------- */

static void test_layout_and_init(void **state)
{
    (void)state;
    net a = make("{\"layers\": [3, 4, 2], \"seed\": 1}");
    bb_value *p = call_ok(&a, "Params", NULL, NULL);
    assert_int_equal(bb_tensor_numel(p), 3 * 4 + 4 + 4 * 2 + 2);
    const float *v = bb_tensor_f32(p);
    float bound1 = sqrtf(2.0f) * sqrtf(3.0f / 3.0f); /* He-uniform, fan-in 3 */
    for (int i = 0; i < 12; i++)
        assert_true(fabsf(v[i]) <= bound1 && v[i] != 0);
    for (int i = 12; i < 16; i++) /* biases start at zero */
        assert_true(v[i] == 0);
    net b = make("{\"layers\": [3, 4, 2], \"seed\": 1}");
    net c = make("{\"layers\": [3, 4, 2], \"seed\": 2}");
    bb_value *pb = call_ok(&b, "Params", NULL, NULL), *pc = call_ok(&c, "Params", NULL, NULL);
    assert_true(bb_value_equal(p, pb));
    assert_false(bb_value_equal(p, pc));
    bb_value_unref(p);
    bb_value_unref(pb);
    bb_value_unref(pc);
    drop(&a);
    drop(&b);
    drop(&c);
}

static void test_construction_weights(void **state)
{
    (void)state;
    float w10[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}; /* layers [1, 2, 2]: 2 + 2 + 4 + 2 */
    int64_t dim = 10;
    bb_tensor_proto tp = {.data_type = BB_DT_FLOAT, .has_raw_data = true};
    tp.dims.v = &dim;
    tp.dims.n = 1;
    tp.raw_data.data = (uint8_t *)w10;
    tp.raw_data.len = sizeof w10;
    const char *json = "{\"layers\": [1, 2, 2]}";
    bb_attr at = {.name = "model", .type = BB_ATTR_STRING, .has_s = true, .t = &tp};
    at.s.data = (uint8_t *)json;
    at.s.len = strlen(json);
    bb_error err = {0};
    net n = {pfx_type("nn::Mlp"), try_make(NULL, &at, &err)};
    if (!n.inst)
        fail_msg("create: %s", err.msg);
    bb_value *p = call_ok(&n, "Params", NULL, NULL);
    assert_memory_equal(bb_tensor_f32(p), w10, sizeof w10);
    bb_value_unref(p);
    drop(&n);
    /* the node config overrides the construction state key by key */
    assert_null(try_make("{\"layers\": [1, 3, 2]}", &at, &err));
    assert_non_null(strstr(err.msg, "10 elements"));
    assert_non_null(strstr(err.msg, "14 float parameters"));
    tp.data_type = BB_DT_DOUBLE;
    assert_null(try_make(NULL, &at, &err));
    assert_non_null(strstr(err.msg, "double"));
}

static void test_config_errors(void **state)
{
    (void)state;
    bb_error err = {0};
    const struct {
        const char *cfg, *want;
    } cases[] = {
        {"{}", "'layers'"},
        {"{\"layers\": [4]}", "'layers'"},
        {"{\"layers\": [4, 0]}", "layers[1]"},
        {"{\"layers\": [4, 2.5]}", "layers[1]"},
        {"{\"layers\": [4, 1]}", "at least 2 outputs"},
        {"{\"layers\": [4, 2], \"activation\": \"gelu\"}", "\"tanh\""},
        {"{\"layers\": [4, 2], \"loss\": \"hinge\"}", "\"mse\""},
        {"{\"layers\": [4, 2], \"optimizer\": \"lbfgs\"}", "\"adam\""},
        {"{\"layers\": [4, 2], \"learning_rate\": -1}", "'learning_rate'"},
        {"{\"layers\": [4, 2], \"epochs\": 0}", "'epochs'"},
        {"{\"layers\": [4, 2], \"lr\": 0.1}", "unknown config key 'lr'"},
        {"{\"layers\": [100000, 100000, 100000]}", "exceed"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        assert_null(try_make(cases[i].cfg, NULL, &err));
        if (!strstr(err.msg, cases[i].want))
            fail_msg("%s: \"%s\" lacks \"%s\"", cases[i].cfg, err.msg, cases[i].want);
    }
    /* MSE with one output is regression, and allowed */
    net n = make("{\"layers\": [4, 1], \"loss\": \"mse\"}");
    drop(&n);
}

/* ---- forward, hand-computed ---------------------------------------------------------------- */

static void test_forward_by_hand(void **state)
{
    (void)state;
    /* [2, 2, 2] relu: W1 = [[1, -1], [2, 1]] (row-major [in, out]), b1 = [0, 1],
     * W2 = [[1, 0], [0, 2]], b2 = [0.5, -0.5]. x = [1, 1]:
     * z1 = x W1 + b1 = [3, 1], a1 = [3, 1]; y = a1 W2 + b2 = [3.5, 1.5].
     * x = [-1, 0]: z1 = [-1, 2] -> a1 = [0, 2]; y = [0.5, 3.5]. */
    net n = make("{\"layers\": [2, 2, 2]}");
    const float p[12] = {1, -1, 2, 1, 0, 1, 1, 0, 0, 2, 0.5f, -0.5f};
    load(&n, p, 12);
    const float xv[4] = {1, 1, -1, 0};
    bb_value *x = mat(xv, 2, 2), *y = call_ok(&n, "Forward", x, NULL);
    const float want[4] = {3.5f, 1.5f, 0.5f, 3.5f};
    assert_int_equal(y->u.tensor.ndim, 2);
    assert_memory_equal(bb_tensor_f32(y), want, sizeof want);
    bb_value_unref(y);
    /* an empty batch is an empty answer */
    bb_value *x0 = mat(xv, 0, 2), *y0 = call_ok(&n, "Forward", x0, NULL);
    assert_int_equal(y0->u.tensor.dims[0], 0);
    assert_int_equal(y0->u.tensor.dims[1], 2);
    bb_value_unref(y0);
    bb_value_unref(x0);
    /* one row as a vector in, a vector out */
    bb_value *x1 = vecf(xv, 2);
    y = call_ok(&n, "Forward", x1, NULL);
    assert_int_equal(y->u.tensor.ndim, 1);
    assert_memory_equal(bb_tensor_f32(y), want, 2 * sizeof(float));
    bb_value_unref(y);
    /* cross-entropy of row 0 with label 0: log(1 + e^(1.5 - 3.5)) */
    const float lab[2] = {0, 0};
    bb_value *l = vecf(lab, 1);
    assert_true(fabsf(loss_of(&n, x1, l) - log1pf(expf(-2.0f))) < 1e-6f);
    bb_value_unref(l);
    /* and the accuracy, when asked: row 0 right (3.5 > 1.5), row 1 wrong */
    bb_value *l2 = vecf(lab, 2), *in[2] = {x, l2}, *o[2] = {0};
    bb_error err = {0};
    assert_int_equal(pfx_call(n.t, n.inst, NULL, "Evaluate", NULL, in, 2, o, 2, &err), BB_OK);
    assert_true(*bb_tensor_f32(o[1]) == 0.5f);
    bb_value_unref(o[0]);
    bb_value_unref(o[1]);
    bb_value_unref(l2);
    bb_value_unref(x1);
    bb_value_unref(x);
    drop(&n);
}

/* ---- gradients ------------------------------------------------------------------------------- */

static uint64_t g_lcg = 7;
static float rnd(void)
{
    g_lcg = g_lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((g_lcg >> 40) % 20001) / 10000.0f - 1.0f;
}

/* Every parameter's gradient against (L(p + e) - L(p - e)) / 2e. */
static void grad_check(const char *act, const char *loss, int outputs, bool dense)
{
    char cfg[256];
    snprintf(cfg, sizeof cfg,
             "{\"layers\": [3, 5, 4, %d], \"activation\": \"%s\", \"loss\": \"%s\", \"seed\": 9}",
             outputs, act, loss);
    net n = make(cfg);
    enum { B = 4 };
    float xv[B * 3], yv[B * 8];
    for (int i = 0; i < B * 3; i++)
        xv[i] = rnd();
    bb_value *x = mat(xv, B, 3), *y;
    if (dense) {
        for (int r = 0; r < B; r++) { /* soft targets summing to 1 (or values for MSE) */
            float s = 0;
            for (int k = 0; k < outputs; k++)
                s += yv[r * outputs + k] = rnd() + 1.5f;
            for (int k = 0; k < outputs && !strcmp(loss, "softmax_cross_entropy"); k++)
                yv[r * outputs + k] /= s;
        }
        y = mat(yv, B, outputs);
    } else {
        for (int r = 0; r < B; r++)
            yv[r] = outputs == 1 ? rnd() * 3 : (float)(r % outputs);
        y = vecf(yv, B);
    }
    bb_value *p = call_ok(&n, "Params", NULL, NULL);
    /* move the biases off zero so every path is exercised */
    float *pv = bb_tensor_f32(p);
    size_t np = bb_tensor_numel(p);
    for (size_t i = 0; i < np; i++)
        pv[i] += 0.05f * rnd();
    load(&n, pv, np);
    bb_value *g = call_ok(&n, "Gradients", x, y);
    assert_int_equal(bb_tensor_numel(g), np);
    float *work = malloc(np * sizeof *work);
    double worst = 0, biggest = 0, l0 = loss_of(&n, x, y);
    size_t kinks = 0;
    const float eps = 1e-3f;
    for (size_t i = 0; i < np; i++) {
        memcpy(work, pv, np * sizeof *work);
        work[i] = pv[i] + eps;
        load(&n, work, np);
        double lp = loss_of(&n, x, y);
        work[i] = pv[i] - eps;
        load(&n, work, np);
        double lm = loss_of(&n, x, y);
        double num = (lp - lm) / (2.0 * (double)eps), ana = bb_tensor_f32(g)[i];
        double right = (lp - l0) / eps, left = (l0 - lm) / eps;
        if (!strcmp(act, "relu") && fabs(right - left) > 0.1 * fmax(fabs(right), fabs(left)) &&
            fabs(right - left) > 1e-2) {
            /* a relu switches inside [p - eps, p + eps]: the gradient is one of the two
             * one-sided slopes (which side depends on where p sits) */
            double el = fabs(left - ana) / fmax(1e-2, fabs(ana));
            double er = fabs(right - ana) / fmax(1e-2, fabs(ana));
            if (fmin(el, er) > 5e-2)
                fail_msg("%s/%s: d/dp[%zu] analytic %g, one-sided %g / %g", act, loss, i, ana,
                         left, right);
            kinks++;
            continue;
        }
        double e = fabs(num - ana) / fmax(1e-2, fmax(fabs(num), fabs(ana)));
        worst = fmax(worst, e);
        biggest = fmax(biggest, fabs(ana));
        if (e > 2e-2)
            fail_msg("%s/%s%s: d/dp[%zu] analytic %g, numeric %g", act, loss,
                     dense ? " (dense targets)" : "", i, ana, num);
    }
    assert_true(biggest > 1e-2); /* a zero gradient would pass trivially */
    assert_true(kinks <= np / 4);
    print_message("  gradient check %-5s %-22s %-10s: worst relative error %.2e over %zu params "
                  "(%zu at a relu kink)\n",
                  act, loss, dense ? "dense" : outputs == 1 ? "regression" : "labels", worst,
                  np - kinks, kinks);
    free(work);
    bb_value_unref(g);
    bb_value_unref(p);
    bb_value_unref(x);
    bb_value_unref(y);
    drop(&n);
}

static void test_gradients_match_finite_differences(void **state)
{
    (void)state;
    static const char *const ACTS[] = {"relu", "tanh"};
    for (int a = 0; a < 2; a++) {
        grad_check(ACTS[a], "softmax_cross_entropy", 3, false);
        grad_check(ACTS[a], "softmax_cross_entropy", 3, true);
        grad_check(ACTS[a], "mse", 3, false);
        grad_check(ACTS[a], "mse", 3, true);
        grad_check(ACTS[a], "mse", 1, false); /* regression */
    }
}

/* Forward + Backward(dL/dy) + Step(empty) == Step(Gradients). */
static void test_backward_step_matches_gradients(void **state)
{
    (void)state;
    const char *cfg = "{\"layers\": [3, 4, 2], \"loss\": \"mse\", \"learning_rate\": 0.5, "
                      "\"seed\": 4}";
    net a = make(cfg), b = make(cfg);
    const float xv[6] = {0.5f, -1, 2, 1, 0.25f, -0.5f}, tv[4] = {1, 0, 0, 1};
    bb_value *x = mat(xv, 2, 3), *t = mat(tv, 2, 2);
    bb_value *y = call_ok(&a, "Forward", x, NULL);
    float dy[4];
    for (int i = 0; i < 4; i++) /* MSE mean over 2 rows x 2 outputs */
        dy[i] = 2.0f * (bb_tensor_f32(y)[i] - tv[i]) / 4.0f;
    bb_value *dyv = mat(dy, 2, 2), *empty = vecf(dy, 0);
    bb_value *cmd = call_ok(&a, "Backward", dyv, NULL);
    assert_ptr_equal(cmd->type, &BB_TYPE_COMMAND_ID);
    bb_value_unref(cmd);
    bb_value_unref(call_ok(&a, "Step", empty, NULL));
    bb_value *g = call_ok(&b, "Gradients", x, t);
    bb_value_unref(call_ok(&b, "Step", g, NULL));
    bb_value *pa = call_ok(&a, "Params", NULL, NULL), *pb = call_ok(&b, "Params", NULL, NULL);
    for (size_t i = 0; i < bb_tensor_numel(pa); i++)
        assert_true(fabsf(bb_tensor_f32(pa)[i] - bb_tensor_f32(pb)[i]) < 1e-6f);
    /* the accumulated gradient was used up */
    bb_error err = {0};
    assert_int_equal(call(&a, "Step", empty, NULL, NULL, &err), BB_ESTATE);
    bb_value_unref(pa);
    bb_value_unref(pb);
    bb_value_unref(g);
    bb_value_unref(y);
    bb_value_unref(dyv);
    bb_value_unref(empty);
    bb_value_unref(x);
    bb_value_unref(t);
    drop(&a);
    drop(&b);
}

/* ---- optimizers --------------------------------------------------------------------------- */

static void test_optimizers_by_hand(void **state)
{
    (void)state;
    /* [1, 2]: 4 params. SGD lr 0.1 momentum 0.9 with g twice:
     * v1 = g, p1 = p0 - 0.1 g; v2 = 1.9 g, p2 = p1 - 0.19 g. */
    net s = make("{\"layers\": [1, 2], \"learning_rate\": 0.1, \"momentum\": 0.9}");
    const float p0[4] = {1, 2, 3, 4}, g[4] = {1, -2, 0.5f, 0};
    load(&s, p0, 4);
    bb_value *gv = vecf(g, 4);
    bb_value_unref(call_ok(&s, "Step", gv, NULL));
    bb_value_unref(call_ok(&s, "Step", gv, NULL));
    bb_value *p = call_ok(&s, "Params", NULL, NULL);
    for (int i = 0; i < 4; i++)
        assert_true(fabsf(bb_tensor_f32(p)[i] - (p0[i] - 0.29f * g[i])) < 1e-6f);
    bb_value_unref(p);
    /* LoadParameters restarts the momentum */
    load(&s, p0, 4);
    bb_value_unref(call_ok(&s, "Step", gv, NULL));
    p = call_ok(&s, "Params", NULL, NULL);
    for (int i = 0; i < 4; i++)
        assert_true(fabsf(bb_tensor_f32(p)[i] - (p0[i] - 0.1f * g[i])) < 1e-6f);
    bb_value_unref(p);
    drop(&s);
    /* Adam's first step moves each parameter by lr * g / (|g| + eps) */
    net a = make("{\"layers\": [1, 2], \"optimizer\": \"adam\", \"learning_rate\": 0.01}");
    load(&a, p0, 4);
    bb_value_unref(call_ok(&a, "Step", gv, NULL));
    p = call_ok(&a, "Params", NULL, NULL);
    for (int i = 0; i < 4; i++) {
        float want = p0[i] - (g[i] > 0 ? 0.01f : g[i] < 0 ? -0.01f : 0.0f);
        assert_true(fabsf(bb_tensor_f32(p)[i] - want) < 1e-6f);
    }
    bb_value_unref(p);
    /* ApplyDelta adds */
    bb_value_unref(call_ok(&a, "ApplyDelta", gv, NULL));
    bb_value *q = call_ok(&a, "Params", NULL, NULL);
    assert_true(fabsf(bb_tensor_f32(q)[1] - (p0[1] + 0.01f - 2)) < 1e-6f);
    bb_value_unref(q);
    bb_value_unref(gv);
    drop(&a);
}

/* ---- errors --------------------------------------------------------------------------------- */

static void test_error_surface(void **state)
{
    (void)state;
    net n = make("{\"layers\": [2, 3]}");
    bb_error err = {0};
    const float v[8] = {0};
    bb_value *five = vecf(v, 5), *x = mat(v, 2, 2), *x3 = mat(v, 2, 3);
    assert_int_equal(call(&n, "LoadParameters", five, NULL, NULL, &err), BB_ETYPE);
    assert_non_null(strstr(err.msg, "got 5 floats"));
    assert_non_null(strstr(err.msg, "9 parameters"));
    assert_int_equal(call(&n, "ApplyDelta", five, NULL, NULL, &err), BB_ETYPE);
    assert_int_equal(call(&n, "Forward", x3, NULL, NULL, &err), BB_ETYPE);
    assert_non_null(strstr(err.msg, "[rows, 2]"));
    assert_int_equal(call(&n, "Backward", x3, NULL, NULL, &err), BB_ESTATE);
    assert_non_null(strstr(err.msg, "without a Forward"));
    bb_value *bad_labels = vecf((const float[]){0, 7}, 2);
    assert_int_equal(call(&n, "Evaluate", x, bad_labels, NULL, &err), BB_EINVAL);
    assert_non_null(strstr(err.msg, "label 7"));
    assert_int_equal(call(&n, "Evaluate", x, five, NULL, &err), BB_ETYPE);
    /* Train and EvaluateMetrics need the engine */
    bb_value *trig = bb_value_trigger();
    assert_int_equal(call(&n, "Train", trig, NULL, NULL, &err), BB_ESTATE);
    assert_non_null(strstr(err.msg, "needs the engine"));
    assert_int_equal(call(&n, "Frobnicate", trig, NULL, NULL, &err), BB_ENOTFOUND);
    bb_value_unref(trig);
    bb_value_unref(bad_labels);
    bb_value_unref(five);
    bb_value_unref(x);
    bb_value_unref(x3);
    drop(&n);
}

/* Rewrite a current (version 3) snapshot of a model with no Adam moments
 * in place as an older version writes it: version 2 lacks age and mass
 * (16 bytes after the header), version 1 also the trailing center flag
 * (the model must have no center). The new length. */
static size_t downgrade_snapshot(uint8_t *snap, size_t len, uint32_t version)
{
    const size_t age_at = 4 + 4 + 8 + 4 + 8 + 8; /* magic, version, n, optimizer, t, changes */
    memmove(snap + age_at, snap + age_at + 16, len - age_at - 16);
    len -= 16;
    memcpy(snap + 4, &version, 4);
    return version == 1 ? len - 1 : len;
}

static void test_snapshot_roundtrip(void **state)
{
    (void)state;
    const char *cfg = "{\"layers\": [2, 3], \"optimizer\": \"adam\", \"seed\": 1}";
    net a = make(cfg), b = make("{\"layers\": [2, 3], \"optimizer\": \"adam\", \"seed\": 2}");
    const float g[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    bb_value *gv = vecf(g, 9);
    bb_value_unref(call_ok(&a, "Step", gv, NULL));
    uint8_t *snap;
    size_t len;
    bb_error err = {0};
    assert_int_equal(a.t->snapshot(a.inst, &snap, &len, &err), BB_OK);
    for (size_t cut = 0; cut < len; cut += 7)
        assert_int_not_equal(b.t->restore(b.inst, snap, cut, &err), BB_OK);
    assert_int_equal(b.t->restore(b.inst, snap, len, &err), BB_OK);
    /* same state: the next step lands in the same place (Adam's moments too) */
    bb_value_unref(call_ok(&a, "Step", gv, NULL));
    bb_value_unref(call_ok(&b, "Step", gv, NULL));
    bb_value *pa = call_ok(&a, "Params", NULL, NULL), *pb = call_ok(&b, "Params", NULL, NULL);
    assert_true(bb_value_equal(pa, pb));
    net c = make("{\"layers\": [2, 4]}");
    assert_int_equal(c.t->restore(c.inst, snap, len, &err), BB_EDECODE);
    assert_non_null(strstr(err.msg, "9 parameters"));
    free(snap);
    bb_value_unref(pa);
    bb_value_unref(pb);
    bb_value_unref(gv);
    drop(&a);
    drop(&b);
    drop(&c);
}

/* Merge (gossip learning): weighted by age, plain average, replace; the
 * age becomes the larger one (the peer's for replace), Share reads both;
 * bad inputs and an unknown rule are refused. */
static void test_merge_rules(void **state)
{
    (void)state;
    const char *rules[3] = {"weighted", "average", "replace"};
    const float mine[6] = {0, 0, 0, 0, 0, 0}, theirs[6] = {4, 4, 4, 4, 4, 4};
    const float want[3] = {3, 2, 4}; /* after merging 4s of age 30 into 0s of age 10 */
    for (int r = 0; r < 3; r++) {
        char cfg[128];
        snprintf(cfg, sizeof cfg, "{\"layers\": [2, 2], \"merge\": \"%s\"}", rules[r]);
        net a = make(cfg);
        load(&a, mine, 6);
        /* first merge an age-10 model equal to ours: the age becomes 10 */
        bb_value *p0 = vecf(mine, 6), *age10 = bb_value_u64(&BB_TYPE_U64, 10);
        bb_value *age = call_ok(&a, "Merge", p0, age10);
        assert_int_equal(age->u.u64, 10);
        bb_value_unref(age);
        /* then an age-30 model of 4s: weighted 10:30 -> 3, average -> 2, replace -> 4 */
        bb_value *p1 = vecf(theirs, 6), *age30 = bb_value_u64(&BB_TYPE_U64, 30);
        age = call_ok(&a, "Merge", p1, age30);
        assert_int_equal(age->u.u64, 30);
        bb_value_unref(age);
        bb_value *trig = bb_value_trigger();
        bb_value *in[1] = {trig}, *out[2] = {0};
        bb_error err = {0};
        assert_int_equal(pfx_call(a.t, a.inst, NULL, "Share", NULL, in, 1, out, 2, &err), BB_OK);
        for (int i = 0; i < 6; i++)
            assert_float_equal(bb_tensor_f32(out[0])[i], want[r], 1e-5);
        assert_int_equal(out[1]->u.u64, 30);
        bb_value_unref(out[0]);
        bb_value_unref(out[1]);
        bb_value *bad = NULL;
        assert_int_equal(call(&a, "Merge", p1, trig, &bad, &err), BB_ETYPE); /* no age */
        assert_non_null(strstr(err.msg, "weight"));
        bb_value *short_p = vecf(theirs, 5);
        assert_int_equal(call(&a, "Merge", short_p, age30, &bad, &err), BB_ETYPE);
        bb_value *done[] = {p0, age10, p1, age30, trig, short_p};
        for (size_t k = 0; k < sizeof done / sizeof *done; k++)
            bb_value_unref(done[k]);
        drop(&a);
    }
    bb_error err = {0};
    assert_null(try_make("{\"layers\": [2, 2], \"merge\": \"max\"}", NULL, &err));
    assert_non_null(strstr(err.msg, "merge"));
}

/* push_sum: Share halves the mass (ways 2 without a node) and sends the
 * half; Merge weighs by mass and adds it up, so the total stays 1 + 1. */
static void test_merge_push_sum(void **state)
{
    (void)state;
    const char *cfg = "{\"layers\": [2, 2], \"merge\": \"push_sum\"}";
    net a = make(cfg), b = make(cfg);
    const float zeros[6] = {0}, sixes[6] = {6, 6, 6, 6, 6, 6};
    load(&a, zeros, 6);
    load(&b, sixes, 6);
    bb_value *trig = bb_value_trigger(), *in[1] = {trig}, *sent[2] = {0};
    bb_error err = {0};
    assert_int_equal(pfx_call(b.t, b.inst, NULL, "Share", NULL, in, 1, sent, 2, &err), BB_OK);
    assert_true(sent[1]->u.u64 == UINT64_C(1) << 31); /* half of b's mass 1, in 2^-32 units */
    /* a (mass 1) merges b's half: (1 * 0 + 0.5 * 6) / 1.5 = 2, a's mass 1.5 */
    bb_value_unref(call_ok(&a, "Merge", sent[0], sent[1]));
    bb_value *p = call_ok(&a, "Params", NULL, NULL);
    for (int i = 0; i < 6; i++)
        assert_float_equal(bb_tensor_f32(p)[i], 2.0f, 1e-5);
    bb_value *again[2] = {0};
    assert_int_equal(pfx_call(a.t, a.inst, NULL, "Share", NULL, in, 1, again, 2, &err), BB_OK);
    assert_true(again[1]->u.u64 == UINT64_C(3) << 30); /* 1.5 / 2 */
    /* the mass left (0.75) travels in the snapshot; a version-2 snapshot
     * (before age and mass) restores with mass 1 */
    uint8_t *snap;
    size_t len;
    assert_int_equal(a.t->snapshot(a.inst, &snap, &len, &err), BB_OK);
    net c = make(cfg);
    for (int v = 3; v >= 2; v--) {
        if (v == 2)
            len = downgrade_snapshot(snap, len, 2);
        assert_int_equal(c.t->restore(c.inst, snap, len, &err), BB_OK);
        bb_value *share[2] = {0};
        assert_int_equal(pfx_call(c.t, c.inst, NULL, "Share", NULL, in, 1, share, 2, &err),
                         BB_OK);
        assert_true(share[1]->u.u64 == (v == 3 ? UINT64_C(3) << 29 : UINT64_C(1) << 31));
        bb_value_unref(share[0]);
        bb_value_unref(share[1]);
    }
    free(snap);
    drop(&c);
    for (int i = 0; i < 2; i++) {
        bb_value_unref(sent[i]);
        bb_value_unref(again[i]);
    }
    bb_value_unref(p);
    bb_value_unref(trig);
    drop(&a);
    drop(&b);
}

/* proximal_mu (FedProx): Step's gradient gains mu (w - center), center the
 * parameters of the last LoadParameters; a snapshot keeps the center. By
 * hand, SGD lr 0.1, mu 2: load c = [1, 2, 3, 4], ApplyDelta d = [1, -1, 0,
 * 2] (w = c + d), Step(g): w - 0.1 (g + 2 d). */
static void test_proximal_step_by_hand(void **state)
{
    (void)state;
    const char *cfg = "{\"layers\": [1, 2], \"learning_rate\": 0.1, \"proximal_mu\": 2}";
    net a = make(cfg), b = make(cfg);
    const float c[4] = {1, 2, 3, 4}, d[4] = {1, -1, 0, 2}, g[4] = {1, -2, 0.5f, 0};
    load(&a, c, 4);
    bb_value *dv = vecf(d, 4), *gv = vecf(g, 4);
    bb_value_unref(call_ok(&a, "ApplyDelta", dv, NULL));
    /* the center travels in the snapshot */
    uint8_t *snap;
    size_t len;
    bb_error err = {0};
    assert_int_equal(a.t->snapshot(a.inst, &snap, &len, &err), BB_OK);
    for (size_t cut = 0; cut < len; cut++)
        assert_int_not_equal(b.t->restore(b.inst, snap, cut, &err), BB_OK);
    assert_int_equal(b.t->restore(b.inst, snap, len, &err), BB_OK);
    net *both[2] = {&a, &b};
    for (int k = 0; k < 2; k++) {
        bb_value_unref(call_ok(both[k], "Step", gv, NULL));
        bb_value *p = call_ok(both[k], "Params", NULL, NULL);
        for (int i = 0; i < 4; i++) {
            float want = c[i] + d[i] - 0.1f * (g[i] + 2 * d[i]);
            if (!(fabsf(bb_tensor_f32(p)[i] - want) < 1e-6f))
                fail_msg("%s [%d] = %g, by hand %g", k ? "restored" : "original", i,
                         (double)bb_tensor_f32(p)[i], (double)want);
        }
        bb_value_unref(p);
    }
    /* without proximal_mu the same Step is plain SGD (a version-2 snapshot
     * with a center restores into it too) */
    net plain = make("{\"layers\": [1, 2], \"learning_rate\": 0.1}");
    assert_int_equal(plain.t->restore(plain.inst, snap, len, &err), BB_OK);
    bb_value_unref(call_ok(&plain, "Step", gv, NULL));
    bb_value *p = call_ok(&plain, "Params", NULL, NULL);
    for (int i = 0; i < 4; i++)
        assert_true(fabsf(bb_tensor_f32(p)[i] - (c[i] + d[i] - 0.1f * g[i])) < 1e-6f);
    bb_value_unref(p);
    free(snap);
    /* a version-1 snapshot (no center flag): the center is the restored
     * parameters, so the first Step is plain SGD's */
    assert_int_equal(plain.t->snapshot(plain.inst, &snap, &len, &err), BB_OK);
    assert_int_equal(a.t->restore(a.inst, snap, downgrade_snapshot(snap, len, 1), &err), BB_OK);
    bb_value *before = call_ok(&a, "Params", NULL, NULL);
    bb_value_unref(call_ok(&a, "Step", gv, NULL));
    p = call_ok(&a, "Params", NULL, NULL);
    for (int i = 0; i < 4; i++)
        assert_true(fabsf(bb_tensor_f32(p)[i] - (bb_tensor_f32(before)[i] - 0.1f * g[i])) <
                    1e-6f);
    bb_value_unref(before);
    bb_value_unref(p);
    free(snap);
    bb_value_unref(dv);
    bb_value_unref(gv);
    drop(&a);
    drop(&b);
    drop(&plain);
}

/* ParamsOn answers Params when its trigger arrives; ParamsDigest names the
 * parameters: equal vectors give equal digests, one flipped bit another. */
static void test_params_on_and_digest(void **state)
{
    (void)state;
    net a = make("{\"layers\": [3, 4, 2], \"seed\": 5}");
    net b = make("{\"layers\": [3, 4, 2], \"seed\": 6}");
    bb_value *trig = bb_value_trigger();
    bb_value *pa = call_ok(&a, "Params", NULL, NULL), *on = call_ok(&a, "ParamsOn", trig, NULL);
    assert_true(bb_value_equal(pa, on));
    bb_value *da = call_ok(&a, "ParamsDigest", trig, NULL);
    bb_value *db = call_ok(&b, "ParamsDigest", trig, NULL);
    assert_ptr_equal(da->type, &BB_TYPE_U64);
    assert_true(da->u.u64 != db->u.u64); /* other seed, other weights */
    bb_value_unref(call_ok(&b, "LoadParameters", pa, NULL));
    bb_value *db2 = call_ok(&b, "ParamsDigest", trig, NULL);
    assert_true(da->u.u64 == db2->u.u64); /* same weights, same digest */
    size_t n = bb_tensor_numel(pa);
    for (size_t i = 0; i < n; i += n - 1) { /* first and last word: every word counts */
        float *w = malloc(n * sizeof *w);
        memcpy(w, bb_tensor_f32(pa), n * sizeof *w);
        uint32_t bits;
        memcpy(&bits, &w[i], 4);
        bits ^= 1u; /* the lowest mantissa bit */
        memcpy(&w[i], &bits, 4);
        load(&b, w, n);
        bb_value *d = call_ok(&b, "ParamsDigest", trig, NULL);
        assert_true(d->u.u64 != da->u.u64);
        bb_value_unref(d);
        free(w);
    }
    bb_value *bad = NULL;
    bb_error err = {0};
    net c = make("{\"layers\": [3, 4, 2], \"attack_update_scale\": 1e6}");
    assert_int_equal(call(&c, "Params", NULL, NULL, &bad, &err), BB_OK); /* a valid knob */
    bb_value_unref(bad);
    assert_null(try_make("{\"layers\": [3, 2], \"attack_update_scale\": 1e13}", NULL, &err));
    assert_non_null(strstr(err.msg, "attack_update_scale"));
    bb_value_unref(trig);
    bb_value_unref(pa);
    bb_value_unref(on);
    bb_value_unref(da);
    bb_value_unref(db);
    bb_value_unref(db2);
    drop(&a);
    drop(&b);
    drop(&c);
}

/* The committed parameters are one value, handed out and taken in by
 * reference: Params answers with it, LoadParameters keeps the tensor it is
 * given (any shape, seen as [P]); a change made while anyone holds them
 * goes to a copy, so what was handed out never changes. */
static void test_parameters_shared_not_copied(void **state)
{
    (void)state;
    net a = make("{\"layers\": [3, 4, 2], \"seed\": 5}");
    bb_value *p1 = call_ok(&a, "Params", NULL, NULL), *p2 = call_ok(&a, "Params", NULL, NULL);
    size_t n = bb_tensor_numel(p1);
    assert_ptr_equal(p1->u.tensor.data, p2->u.tensor.data);
    float *before = malloc(n * sizeof *before), *ones = malloc(n * sizeof *ones);
    assert_non_null(before);
    assert_non_null(ones);
    memcpy(before, bb_tensor_f32(p1), n * sizeof *before);
    for (size_t i = 0; i < n; i++)
        ones[i] = 1;
    bb_value *delta = vecf(ones, (int64_t)n);
    bb_value_unref(call_ok(&a, "ApplyDelta", delta, NULL));
    assert_memory_equal(bb_tensor_f32(p1), before, n * sizeof *before); /* copied on write */
    bb_value *p3 = call_ok(&a, "Params", NULL, NULL);
    for (size_t i = 0; i < n; i++)
        assert_true(bb_tensor_f32(p3)[i] == before[i] + 1);
    /* a loaded tensor is used where it is, also under another shape */
    int64_t dims[2] = {(int64_t)n / 2, 2};
    bb_value *x = pfx_tensor(before, 2, dims);
    bb_value_unref(call_ok(&a, "LoadParameters", x, NULL));
    bb_value *p4 = call_ok(&a, "Params", NULL, NULL);
    assert_ptr_equal(p4->u.tensor.data, x->u.tensor.data);
    assert_int_equal(p4->u.tensor.ndim, 1);
    assert_int_equal(p4->u.tensor.dims[0], (int64_t)n);
    bb_value_unref(call_ok(&a, "ApplyDelta", delta, NULL));
    assert_memory_equal(bb_tensor_f32(x), before, n * sizeof *before); /* not the caller's */
    bb_value *p5 = call_ok(&a, "Params", NULL, NULL);
    assert_true(bb_tensor_f32(p5)[0] == before[0] + 1);
    /* nobody else holds them: the next change is made in place */
    const uint8_t *d5 = p5->u.tensor.data;
    bb_value_unref(p5);
    bb_value_unref(call_ok(&a, "ApplyDelta", delta, NULL));
    bb_value *p6 = call_ok(&a, "Params", NULL, NULL);
    assert_ptr_equal(p6->u.tensor.data, d5);
    bb_value_unref(call_ok(&a, "ApplyDelta", delta, NULL)); /* p6 is held: a copy */
    bb_value *p7 = call_ok(&a, "Params", NULL, NULL);
    assert_ptr_not_equal(p7->u.tensor.data, d5);
    assert_true(bb_tensor_f32(p6)[0] == before[0] + 2);
    assert_true(bb_tensor_f32(p7)[0] == before[0] + 3);
    bb_value_unref(p6);
    bb_value *vals[] = {p1, p2, p3, p4, p7, delta, x};
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++)
        bb_value_unref(vals[i]);
    free(before);
    free(ones);
    drop(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_and_init),
        cmocka_unit_test(test_construction_weights),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_forward_by_hand),
        cmocka_unit_test(test_gradients_match_finite_differences),
        cmocka_unit_test(test_backward_step_matches_gradients),
        cmocka_unit_test(test_optimizers_by_hand),
        cmocka_unit_test(test_error_surface),
        cmocka_unit_test(test_snapshot_roundtrip),
        cmocka_unit_test(test_proximal_step_by_hand),
        cmocka_unit_test(test_params_on_and_digest),
        cmocka_unit_test(test_parameters_shared_not_copied),
        cmocka_unit_test(test_merge_rules),
        cmocka_unit_test(test_merge_push_sum),
    };
    return cmocka_run_group_tests(tests, NULL, pfx_group_teardown);
}
