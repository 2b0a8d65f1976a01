/*
 * The ops nn::Mlp gives split learning (a model cut in two, each part on
 * its own node), through the plugin's dispatch entry:
 *
 *   top:    out = Forward(a); (g, loss, acc) = LossGradient(out, y);
 *           (da, cmd) = BackwardInput(g); StepOn(cmd)
 *   bottom: a = Forward(x); ...; Backward(da); StepOn(cmd)
 *
 * BackwardInput's input gradient and the bottom's parameter gradient
 * through the cut are checked against central finite differences of the
 * composite loss (every activation x loss); LossGradient against Evaluate;
 * StepOn against Step; the refusals (no Forward, no Backward, outputs
 * of the wrong width); and nn::MlpPart, the type without a data source.
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

static net make(const char *config)
{
    net n = {pfx_type("nn::Mlp"), NULL};
    assert_non_null(n.t);
    bb_error err = {0};
    n.inst = pfx_create(n.t, "model", config, NULL, 42, NULL, &err);
    if (!n.inst)
        fail_msg("create %s: %s", config, err.msg);
    return n;
}

static bb_value *run1(net *n, const char *op, bb_value *a, bb_value *b);

/* Biases start at zero, and a row whose hidden units are all off then
 * sends exact zeros up: the top sits on a relu kink in every direction.
 * Moving every parameter a little off its start makes the point generic. */
static net make_moved(const char *config)
{
    net n = make(config);
    bb_value *p = run1(&n, "Params", NULL, NULL);
    for (size_t i = 0; i < bb_tensor_numel(p); i++)
        bb_tensor_f32(p)[i] += 0.05f * sinf(1.7f * (float)i + 0.3f);
    bb_value_unref(run1(&n, "LoadParameters", p, NULL));
    bb_value_unref(p);
    return n;
}

static void drop(net *n) { n->t->destroy(n->inst); }

/* op(in[0..n_in)) -> out[0..n_out) (new refs); fails the test on error. */
static void run(net *n, const char *op, bb_value *a, bb_value *b, bb_value **out, uint32_t n_out)
{
    bb_value *in[2] = {a, b};
    bb_error err = {0};
    if (pfx_call(n->t, n->inst, NULL, op, NULL, in, b ? 2 : 1, out, n_out, &err))
        fail_msg("%s: %s", op, err.msg);
}

static bb_value *run1(net *n, const char *op, bb_value *a, bb_value *b)
{
    bb_value *out = NULL;
    run(n, op, a, b, &out, 1);
    return out;
}

static void refused(net *n, const char *op, bb_value *a, bb_value *b, int code, const char *what)
{
    bb_value *in[2] = {a, b}, *out[3] = {NULL};
    bb_error err = {0};
    assert_int_equal(pfx_call(n->t, n->inst, NULL, op, NULL, in, b ? 2 : 1, out, 3, &err), code);
    if (!strstr(err.msg, what))
        fail_msg("%s: \"%s\" does not say \"%s\"", op, err.msg, what);
}

static bb_value *mat(const float *v, int64_t rows, int64_t cols)
{
    int64_t d[2] = {rows, cols};
    return pfx_tensor(v, 2, d);
}

/* The composite's mean loss on (x, y): top(bottom(x)). */
static double composite_loss(net *bottom, net *top, bb_value *x, bb_value *y)
{
    bb_value *a = run1(bottom, "Forward", x, NULL);
    bb_value *out = run1(top, "Forward", a, NULL);
    bb_value *r[2] = {NULL};
    run(top, "LossGradient", out, y, r, 2);
    double loss = *bb_tensor_f32(r[1]);
    bb_value_unref(a);
    bb_value_unref(out);
    bb_value_unref(r[0]);
    bb_value_unref(r[1]);
    return loss;
}

/* One split step with plain SGD at learning rate 1 on both parts: each
 * part's parameters move by minus its gradient of the composite loss.
 * Returns the input gradient the top sent down (new ref). */
static bb_value *split_step(net *bottom, net *top, bb_value *x, bb_value *y)
{
    bb_value *a = run1(bottom, "Forward", x, NULL);
    bb_value *out = run1(top, "Forward", a, NULL);
    bb_value *lg[3] = {NULL}, *bi[2] = {NULL};
    run(top, "LossGradient", out, y, lg, 3);
    run(top, "BackwardInput", lg[0], NULL, bi, 2);
    assert_ptr_equal(bi[1]->type, &BB_TYPE_COMMAND_ID);
    bb_value_unref(run1(top, "StepOn", bi[1], NULL));
    bb_value *cmd = run1(bottom, "Backward", bi[0], NULL);
    bb_value_unref(run1(bottom, "StepOn", cmd, NULL));
    bb_value *values[] = {a, out, lg[0], lg[1], lg[2], bi[1], cmd};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++)
        bb_value_unref(values[i]);
    return bi[0];
}

/* A finite-difference slope of the composite loss around a point:
 * central, and the two one-sided ones (at a relu kink the gradient is one
 * of those, depending on which side the point sits). */
typedef struct slope {
    double central, left, right;
} slope;

static slope slope_of(double lm, double l0, double lp, double h)
{
    return (slope){(lp - lm) / (2 * h), (l0 - lm) / h, (lp - l0) / h};
}

/* |gradient - slope| within 2% (+ 2e-3), or at a kink within 5% of a side;
 * returns whether it was a kink. */
static bool check_slope(const char *what, size_t i, double g, slope d)
{
    double e = fabs(g - d.central);
    if (e <= 2e-3 + 2e-2 * fabs(d.central))
        return false;
    bool kink = fabs(d.right - d.left) > 1e-2 && fabs(d.right - d.left) >
                                                     0.1 * fmax(fabs(d.right), fabs(d.left));
    double side = fmin(fabs(g - d.left), fabs(g - d.right)) / fmax(1e-2, fabs(g));
    if (!kink || side > 5e-2)
        fail_msg("%s %zu: gradient %g, finite differences %g (one-sided %g / %g)", what, i, g,
                 d.central, d.left, d.right);
    return true;
}

static void gradient_through_the_cut(const char *activation, const char *loss)
{
    char bcfg[256], tcfg[256], what[96];
    int outputs = strcmp(loss, "mse") ? 3 : 1;
    snprintf(bcfg, sizeof bcfg,
             "{\"layers\": [3, 5, 4], \"activation\": \"%s\", \"learning_rate\": 1, \"seed\": 3}",
             activation);
    snprintf(tcfg, sizeof tcfg,
             "{\"layers\": [4, 6, %d], \"activation\": \"%s\", \"loss\": \"%s\", "
             "\"learning_rate\": 1, \"seed\": 4}",
             outputs, activation, loss);
    net bottom = make_moved(bcfg), top = make_moved(tcfg);
    const float xv[15] = {0.5f, -1, 0.25f, 1, 0.3f, -0.7f, -0.2f, 0.8f, 0.1f,
                          0.9f, -0.4f, 0.6f, -1.2f, 0.05f, 0.7f};
    const float yc[5] = {0, 2, 1, 2, 0}, yr[5] = {0.5f, -1, 2, 0.1f, 1.5f};
    int64_t five = 5;
    bb_value *x = mat(xv, 5, 3), *y = pfx_tensor(outputs == 1 ? yr : yc, 1, &five);
    bb_value *p0 = run1(&bottom, "Params", NULL, NULL), *q0 = run1(&top, "Params", NULL, NULL);
    size_t np = bb_tensor_numel(p0), kinks = 0;
    /* finite differences of the composite loss: w.r.t. the input, and
     * w.r.t. the bottom's parameters */
    const double h = 1e-3, l0 = composite_loss(&bottom, &top, x, y);
    slope fd_x[15], fd_p[64];
    assert_true(np <= 64);
    for (size_t i = 0; i < 15; i++) {
        float *v = bb_tensor_f32(x), keep = v[i];
        v[i] = keep + (float)h;
        double up = composite_loss(&bottom, &top, x, y);
        v[i] = keep - (float)h;
        fd_x[i] = slope_of(composite_loss(&bottom, &top, x, y), l0, up, h);
        v[i] = keep;
    }
    for (size_t i = 0; i < np; i++) {
        bb_value *p = bb_value_tensor_copy(BB_DT_FLOAT, 1, (int64_t[]){(int64_t)np},
                                           bb_tensor_f32(p0), np * 4);
        bb_tensor_f32(p)[i] += (float)h;
        bb_value_unref(run1(&bottom, "LoadParameters", p, NULL));
        double up = composite_loss(&bottom, &top, x, y);
        bb_tensor_f32(p)[i] -= (float)(2 * h);
        bb_value_unref(run1(&bottom, "LoadParameters", p, NULL));
        fd_p[i] = slope_of(composite_loss(&bottom, &top, x, y), l0, up, h);
        bb_value_unref(p);
    }
    bb_value_unref(run1(&bottom, "LoadParameters", p0, NULL));
    /* what the ops compute: one split step at learning rate 1 moves the
     * bottom's parameters by minus their gradient */
    bb_value *da = split_step(&bottom, &top, x, y);
    assert_int_equal(da->u.tensor.ndim, 2);
    assert_int_equal(da->u.tensor.dims[0], 5);
    assert_int_equal(da->u.tensor.dims[1], 4);
    bb_value *p1 = run1(&bottom, "Params", NULL, NULL), *q1 = run1(&top, "Params", NULL, NULL);
    snprintf(what, sizeof what, "%s/%s: bottom parameter", activation, loss);
    for (size_t i = 0; i < np; i++)
        kinks += check_slope(what, i, (double)bb_tensor_f32(p0)[i] - bb_tensor_f32(p1)[i],
                             fd_p[i]);
    assert_false(bb_value_equal(q0, q1)); /* the top stepped too */
    /* the whole model's input gradient: what a bottom that is itself cut
     * would send further down */
    net b2 = make_moved(bcfg), t2 = make_moved(tcfg);
    bb_value *a = run1(&b2, "Forward", x, NULL), *out = run1(&t2, "Forward", a, NULL);
    bb_value *lg[3] = {NULL}, *ti[2] = {NULL}, *bi[2] = {NULL};
    run(&t2, "LossGradient", out, y, lg, 3);
    run(&t2, "BackwardInput", lg[0], NULL, ti, 1);
    run(&b2, "BackwardInput", ti[0], NULL, bi, 2);
    snprintf(what, sizeof what, "%s/%s: input", activation, loss);
    double biggest = 0;
    for (size_t i = 0; i < 15; i++) {
        kinks += check_slope(what, i, bb_tensor_f32(bi[0])[i], fd_x[i]);
        biggest = fmax(biggest, fabs(bb_tensor_f32(bi[0])[i]));
    }
    assert_true(biggest > 1e-2); /* a zero gradient would pass trivially */
    assert_true(kinks <= (np + 15) / 4);
    printf("split learning %s/%s: %zu gradients match finite differences (%zu at a relu "
           "kink)\n",
           activation, loss, np + 15, kinks);
    bb_value *values[] = {x, y, p0, q0, p1, q1, da, a, out, lg[0], lg[1], lg[2], ti[0], bi[0],
                          bi[1]};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++)
        bb_value_unref(values[i]);
    drop(&bottom);
    drop(&top);
    drop(&b2);
    drop(&t2);
}

static void test_split_learning_gradients(void **state)
{
    (void)state;
    gradient_through_the_cut("relu", "softmax_cross_entropy");
    gradient_through_the_cut("tanh", "softmax_cross_entropy");
    gradient_through_the_cut("tanh", "mse");
}

/* LossGradient's loss is Evaluate's; its accuracy counts the argmax hits. */
static void test_split_learning_loss_gradient(void **state)
{
    (void)state;
    net top = make("{\"layers\": [2, 3], \"seed\": 1}");
    const float xv[8] = {1, 0, 0, 1, -1, 2, 0.5f, 0.5f}, yv[4] = {0, 1, 2, 1};
    int64_t four = 4;
    bb_value *x = mat(xv, 4, 2), *y = pfx_tensor(yv, 1, &four);
    bb_value *loss = run1(&top, "Evaluate", x, y), *out = run1(&top, "Forward", x, NULL);
    bb_value *r[3] = {NULL};
    run(&top, "LossGradient", out, y, r, 3);
    assert_float_equal(*bb_tensor_f32(r[1]), *bb_tensor_f32(loss), 1e-6);
    const float *o = bb_tensor_f32(out);
    int hits = 0;
    for (int i = 0; i < 4; i++) {
        int best = 0;
        for (int j = 1; j < 3; j++)
            best = o[i * 3 + j] > o[i * 3 + best] ? j : best;
        hits += best == (int)yv[i];
    }
    assert_float_equal(*bb_tensor_f32(r[2]), hits / 4.0, 1e-6);
    /* softmax cross-entropy: each row's gradient sums to 0 */
    for (int i = 0; i < 4; i++)
        assert_float_equal(bb_tensor_f32(r[0])[i * 3] + bb_tensor_f32(r[0])[i * 3 + 1] +
                               bb_tensor_f32(r[0])[i * 3 + 2],
                           0, 1e-6);
    /* outputs of the wrong width, targets of the wrong count */
    refused(&top, "LossGradient", x, y, BB_ETYPE, "f32 outputs [rows, 3]");
    int64_t three = 3;
    bb_value *y3 = pfx_tensor(yv, 1, &three);
    refused(&top, "LossGradient", out, y3, BB_ETYPE, "LossGradient");
    bb_value *values[] = {x, y, y3, loss, out, r[0], r[1], r[2]};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++)
        bb_value_unref(values[i]);
    drop(&top);
}

/* StepOn is Step with the accumulated gradient; both refuse when no
 * Backward ran; BackwardInput needs a Forward. */
static void test_split_learning_step_on(void **state)
{
    (void)state;
    const char *cfg = "{\"layers\": [2, 3], \"learning_rate\": 0.5, \"seed\": 1}";
    net a = make(cfg), b = make(cfg);
    const float xv[4] = {1, -1, 0.5f, 2}, gv[6] = {0.1f, -0.2f, 0.3f, 0, 0.5f, -0.5f};
    bb_value *x = mat(xv, 2, 2), *g = mat(gv, 2, 3);
    int64_t zero = 0;
    bb_value *empty = bb_value_tensor_new(BB_DT_FLOAT, 1, &zero);
    refused(&a, "BackwardInput", g, NULL, BB_ESTATE, "without a Forward");
    refused(&a, "StepOn", g, NULL, BB_ESTATE, "StepOn with no gradient: run Backward first");
    bb_value *outs[] = {run1(&a, "Forward", x, NULL), run1(&b, "Forward", x, NULL)};
    bb_value *bi[2] = {NULL};
    run(&a, "BackwardInput", g, NULL, bi, 2);
    bb_value *cmd = run1(&b, "Backward", g, NULL);
    bb_value *s1 = run1(&a, "StepOn", bi[1], NULL), *s2 = run1(&b, "Step", empty, NULL);
    assert_int_equal(s1->u.u64, 2); /* BackwardInput and StepOn each count a change */
    bb_value *pa = run1(&a, "Params", NULL, NULL), *pb = run1(&b, "Params", NULL, NULL);
    assert_true(bb_value_equal(pa, pb));
    bb_value *values[] = {x, g, empty, outs[0], outs[1], bi[0], bi[1], cmd, s1, s2, pa, pb};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++)
        bb_value_unref(values[i]);
    drop(&a);
    drop(&b);
}

/* nn::MlpPart: nn::Mlp without the data source — no dependency, no Train
 * or EvaluateMetrics — and the same network for the same config. */
static void test_split_learning_mlp_part(void **state)
{
    (void)state;
    const bb_component_type *part = pfx_type("nn::MlpPart");
    assert_non_null(part);
    assert_int_equal(part->role, BB_ROLE_MODEL);
    assert_int_equal(part->n_deps, 0);
    const char *role = "ai.bytesandbrains.role.model";
    assert_null(bb_component_type_find_op(part, role, "Train", NULL));
    assert_null(bb_component_type_find_op(part, role, "EvaluateMetrics", NULL));
    const char *ops[] = {"Forward", "Backward", "Step", "Params", "LoadParameters", "Evaluate",
                         "ApplyDelta"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        assert_non_null(bb_component_type_find_op(part, role, ops[i], NULL));
    assert_non_null(bb_component_type_find_op(part, "bb-nn.Mlp.atomic", "BackwardInput", NULL));
    const char *cfg = "{\"layers\": [3, 4, 2], \"seed\": 5}";
    bb_error err = {0};
    net p = {part, pfx_create(part, "bottom", cfg, NULL, 42, NULL, &err)}, m = make(cfg);
    assert_non_null(p.inst);
    bb_value *pp = run1(&p, "Params", NULL, NULL), *mp = run1(&m, "Params", NULL, NULL);
    assert_true(bb_value_equal(pp, mp));
    /* errors name the type */
    refused(&p, "StepOn", pp, NULL, BB_ESTATE, "nn::MlpPart at slot 'bottom'");
    bb_value_unref(pp);
    bb_value_unref(mp);
    drop(&p);
    drop(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_learning_gradients),
        cmocka_unit_test(test_split_learning_loss_gradient),
        cmocka_unit_test(test_split_learning_step_on),
        cmocka_unit_test(test_split_learning_mlp_part),
    };
    return cmocka_run_group_tests(tests, NULL, pfx_group_teardown);
}
