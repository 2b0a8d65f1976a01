/*
 * mlp.c — nn::Mlp, a multi-layer perceptron Model on one flat float32
 * parameter vector (layout in mlp.h).
 *
 * Ops (ai.bytesandbrains.role.model, IR_AND_DSL.md 5c.2):
 *   Forward(input [B, in]) -> output [B, out]   logits (CE) or values (MSE);
 *       remembers the batch for Backward
 *   Backward(grad [B, out]) -> cmd   dLoss/dOutput through the remembered
 *       Forward; the parameter gradient accumulates for Step
 *   Step(grads [P] | []) -> cmd      an optimizer step with the given
 *       gradient, or with the accumulated one when grads is empty
 *   Evaluate(input, target) -> (loss, accuracy?)  the mean loss (compute_loss)
 *   ApplyDelta(delta [P]) -> cmd     params += delta
 *   LoadParameters(params [P]) -> cmd   replaces the parameters and restarts
 *       the optimizer (moments, step count)
 *   Params() -> params [P]
 *   Train(trigger) -> (params [P], num_samples U64)   `epochs` whole epochs
 *       over the "data" dependency, off the engine thread (jobs.c)
 * FedProx: with proximal_mu > 0, every step of Train and Step gains mu (w -
 * center), center the parameters of the last LoadParameters (the global
 * model a federated client received; the initial parameters before one).
 *   EvaluateMetrics(trigger) -> (loss, accuracy)   on the source's
 *       evaluation set (its held-out rows), off the engine thread
 * bb-nn.Mlp.atomic:
 *   Gradients(input, target) -> grads [P]   the mean loss's gradient
 *       (FedSGD-style updates; the gradient check of the tests)
 *   ParamsOn(trigger) -> params [P]   Params, read when the trigger arrives
 *       (Params has no input, so it runs when its execution starts: a
 *       round that waited for a Limit would send stale parameters)
 *   ParamsDigest(trigger) -> digest U64   a digest of the committed
 *       parameters (which model version a node holds, e.g. across a restart)
 *   split learning (a model cut in two, each part on its own node):
 *   BackwardInput(grad) -> (input_grad [B, in], cmd?)   Backward, plus
 *       dLoss/dInput of the remembered Forward: what the upper part sends
 *       back down to the part whose outputs were its inputs
 *   LossGradient(output [B, out], target) -> (grad [B, out], loss,
 *       accuracy?)   the model's mean loss of given outputs, and its
 *       gradient w.r.t. them (the input of BackwardInput); reads no
 *       parameters
 *   StepOn(trigger) -> cmd   Step with Backward's accumulated gradient,
 *       when the trigger (the Backward's cmd) arrives: Step's own input is
 *       a gradient, so it could not wait for a Backward
 * nn::MlpPart (below) is the same network and ops as one part of a model
 * cut across nodes: no data source, no Train or EvaluateMetrics.
 *   Share(trigger) -> (params [P], weight U64)   what gossip learning sends
 *       a peer: the parameters and their weight in the peer's Merge. The
 *       weight is the model's age (the samples it was trained on, its own
 *       and, through merges, its peers'), or under "push_sum" a 1/ways share
 *       of its mass (attribute ways: the peers it goes to plus one; the
 *       node keeps the same share), in units of 2^-32
 *   Merge(params [P], weight U64) -> age U64   combine a peer's model with
 *       this one by the config's rule: "weighted" (by age: (a p + b q) /
 *       (a + b)), "average" ((p + q) / 2), "replace" (q), or "push_sum"
 *       (by mass: (m p + w q) / (m + w), and the mass becomes m + w, so the
 *       network's total weight stays constant: Kempe et al.'s push-sum, an
 *       unbiased average however many models arrive between two steps). The
 *       age becomes max(a, b) (q's for replace). Queued behind a running
 *       Train like every change; the optimizer state is kept.
 *
 * Targets: class ids [B] (any numeric dtype) or f32 [B, out]. While a Train
 * runs, ops that change the model (LoadParameters, ApplyDelta, Step,
 * Backward, another Train) wait in a FIFO and run when it has committed;
 * reads (Params, Forward, Evaluate, Gradients, EvaluateMetrics) answer at
 * once from the committed parameters.
 *
 * The committed parameters are a value (m->pv), handed out by reference:
 * Params, ParamsOn and Train answer with it, LoadParameters takes the
 * value it is given (the received tensor, where the wire left it), an
 * evaluation reads it where it is. Nothing of the model is copied but for
 * Train's working parameters; an op that changes the parameters in place
 * (ApplyDelta, Step) copies them first while anyone else holds them.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp.h"
#include "bb/bytes.h"
#include "plugins/common/plugin_config.h"
#include "plugins/common/plugin_model.h"
#include "plugins/common/plugin_type.h"

#define NAME "nn::Mlp"
#define PART_NAME "nn::MlpPart" /* a part of a model whose batches come through the graph */
#define EXT_DOMAIN "bb-nn.Mlp.atomic"

static const bb_config_decl CONFIG[] = {
    {"layers", "array", NULL,
     "layer widths, inputs first, outputs last (e.g. [64, 32, 10]); 2 to 17 entries"},
    {"activation", "string", "\"relu\"", "hidden-layer activation: \"relu\" or \"tanh\""},
    {"loss", "string", "\"softmax_cross_entropy\"",
     "\"softmax_cross_entropy\" (classification; the outputs are logits) or \"mse\""},
    {"optimizer", "string", "\"sgd\"", "\"sgd\" (with momentum) or \"adam\""},
    {"learning_rate", "float", "0.01", "step size"},
    {"momentum", "float", "0", "SGD momentum (0: plain SGD)"},
    {"beta1", "float", "0.9", "Adam first-moment decay"},
    {"beta2", "float", "0.999", "Adam second-moment decay"},
    {"epsilon", "float", "1e-8", "Adam denominator guard"},
    {"batch_size", "int", "32",
     "training minibatch: larger batches from the source are split into minibatches"},
    {"seed", "int", "null",
     "seed of the fan-in initialization (default: the seed the host gives the slot); "
     "weights in the construction state's tensor take precedence"},
    {"epochs", "int", "null",
     "local epochs per Train; when set it overrides the Train node's epochs attribute "
     "(default: the attribute, 1 when absent)"},
    {"batches_per_epoch", "int", "0",
     "epoch length in batches for data sources without a NumSamples op (0: ask the source)"},
    {"merge", "string", "\"weighted\"",
     "how Merge combines a peer's model: \"weighted\" by the models' ages, \"average\", "
     "\"replace\", or \"push_sum\" (by mass, which Share splits and Merge adds up)"},
    {"proximal_mu", "float", "0",
     "FedProx (Li et al. 2020): Train and Step minimize loss + proximal_mu/2 ||w - "
     "w_global||^2, w_global the parameters of the last LoadParameters (the global model a "
     "federated client received), so local training cannot drift far on a skewed shard; 0: "
     "off"},
    {"attack_update_scale", "float", "1",
     "attack simulation for tests and demos, not for training: Train answers start + scale x "
     "(trained - start), a poisoned client's update (e.g. 1e6); the node keeps the trained "
     "parameters itself"},
};

/* ---- create / destroy ------------------------------------------------------------ */

static int read_layers(const bbp_config *cfg, uint32_t *sizes, uint32_t *n, bb_error *err)
{
    cJSON *owned;
    const cJSON *v = bbp_config_get(cfg, "layers", &owned);
    int rc = BB_OK, count = v && cJSON_IsArray(v) ? cJSON_GetArraySize(v) : -1;
    if (count < 2 || count > MLP_MAX_LAYERS + 1)
        rc = bb_error_set(err, BB_ECONFIG,
                          "%s: config key 'layers' must be an array of 2 to %d layer widths",
                          cfg->who, MLP_MAX_LAYERS + 1);
    uint64_t params = 0;
    for (int i = 0; !rc && i < count; i++) {
        const cJSON *e = cJSON_GetArrayItem(v, i);
        if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < 1 ||
            e->valuedouble > MLP_MAX_WIDTH) {
            rc = bb_error_set(err, BB_ECONFIG, "%s: layers[%d] must be a width in [1, %u]",
                              cfg->who, i, MLP_MAX_WIDTH);
            break;
        }
        sizes[i] = (uint32_t)e->valuedouble;
        if (i)
            params += (uint64_t)sizes[i - 1] * sizes[i] + sizes[i];
    }
    if (!rc && params > MLP_MAX_PARAMS)
        rc = bb_error_set(err, BB_ELIMIT, "%s: %llu parameters exceed the limit of %llu",
                          cfg->who, (unsigned long long)params,
                          (unsigned long long)MLP_MAX_PARAMS);
    *n = rc ? 0 : (uint32_t)count;
    cJSON_Delete(owned);
    return rc;
}

static int read_config(mlp *m, const bbp_config *cfg, uint64_t host_seed, uint64_t *seed,
                       bb_error *err)
{
    static const char *const ACT[] = {"relu", "tanh"};
    static const char *const LOSS[] = {"softmax_cross_entropy", "mse"};
    static const char *const OPT[] = {"sgd", "adam"};
    static const char *const MERGE[] = {"weighted", "average", "replace", "push_sum"};
    uint32_t sizes[MLP_MAX_LAYERS + 1], n = 0;
    int act = 0, loss = 0, opt = 0, merge = 0;
    double lr = 0, mu = 0, b1 = 0, b2 = 0, eps = 0, s = 0, ep = 0, scale = 1, prox = 0;
    bool has_seed = false, has_epochs = false;
    int rc = read_layers(cfg, sizes, &n, err);
    if (!rc)
        rc = bbp_config_enum(cfg, "activation", ACT, 2, &act, err);
    if (!rc)
        rc = bbp_config_enum(cfg, "loss", LOSS, 2, &loss, err);
    if (!rc)
        rc = bbp_config_enum(cfg, "optimizer", OPT, 2, &opt, err);
    if (!rc)
        rc = bbp_config_double(cfg, "learning_rate", 1e-12, 1e3, &lr, err);
    if (!rc)
        rc = bbp_config_double(cfg, "momentum", 0, 0.999999, &mu, err);
    if (!rc)
        rc = bbp_config_double(cfg, "beta1", 0, 0.999999, &b1, err);
    if (!rc)
        rc = bbp_config_double(cfg, "beta2", 0, 0.999999999, &b2, err);
    if (!rc)
        rc = bbp_config_double(cfg, "epsilon", 1e-30, 1, &eps, err);
    if (!rc)
        rc = bbp_config_int(cfg, "batch_size", 1, 1 << 24, &m->batch_size, err);
    if (!rc)
        rc = bbp_config_number(cfg, "seed", true, 0, 9007199254740992.0, &s, &has_seed, err);
    if (!rc)
        rc = bbp_config_number(cfg, "epochs", true, 1, 1 << 20, &ep, &has_epochs, err);
    if (!rc)
        rc = bbp_config_int(cfg, "batches_per_epoch", 0, INT64_C(1) << 40, &m->batches_per_epoch,
                            err);
    if (!rc)
        rc = bbp_config_double(cfg, "proximal_mu", 0, 1e6, &prox, err);
    if (!rc)
        rc = bbp_config_double(cfg, "attack_update_scale", -1e12, 1e12, &scale, err);
    if (!rc)
        rc = bbp_config_enum(cfg, "merge", MERGE, 4, &merge, err);
    if (!rc && loss == BBP_LOSS_CE && sizes[n - 1] < 2)
        rc = bb_error_set(err, BB_ECONFIG,
                          "%s: softmax cross-entropy needs at least 2 outputs (layers ends in 1)",
                          cfg->who);
    if (rc)
        return rc;
    mlp_shape_init(&m->shape, sizes, n, (mlp_act)act, (bbp_loss)loss);
    m->opt.kind = (bbp_opt)opt;
    m->opt.lr = (float)lr;
    m->opt.momentum = (float)mu;
    m->opt.beta1 = (float)b1;
    m->opt.beta2 = (float)b2;
    m->opt.eps = (float)eps;
    m->epochs_cfg = has_epochs ? (int64_t)ep : -1;
    m->update_scale = (float)scale;
    m->merge = (mlp_merge)merge;
    m->mass = 1.0;
    m->proximal_mu = (float)prox;
    *seed = has_seed ? (uint64_t)s : host_seed;
    return BB_OK;
}

/* Initial weights from the construction state's TensorProto. */
static int load_weights(mlp *m, const bb_tensor_proto *t, bb_error *err)
{
    uint64_t numel = 1;
    for (size_t i = 0; i < t->dims.n; i++)
        numel = t->dims.v[i] >= 0 && numel <= UINT32_MAX ? numel * (uint64_t)t->dims.v[i] : 0;
    if (t->data_type != BB_DT_FLOAT || !t->has_raw_data || numel != m->shape.n_params ||
        t->raw_data.len != m->shape.n_params * sizeof(float))
        return bb_error_set(err, BB_ETYPE,
                            "%s: the construction weights are %s with %llu elements; the model "
                            "needs %zu float parameters",
                            m->who, bb_dtype_name(t->data_type), (unsigned long long)numel,
                            m->shape.n_params);
    memcpy(mlp_params_mut(m), t->raw_data.data, t->raw_data.len); /* fresh: ours */
    return BB_OK;
}

static void mlp_destroy(void *inst)
{
    mlp *m = inst;
    bbp_jobs_cancel_all(&m->jobs);
    bbp_queue_free(&m->queue); /* the engine dropped their completions */
    mlp_ws_free(&m->ws);
    bb_value_unref(m->fwd_input);
    bbp_optim_free(&m->opt);
    bb_value_unref(m->pv);
    free(m->grad_acc);
    bb_value_unref(m->center);
    free(m->step_grad);
    free(m);
}

void mlp_commit_params(mlp *m, bb_value *v)
{
    bb_value_unref(m->pv);
    m->pv = v;
    m->params = bb_tensor_f32(v);
}

bb_value *mlp_params_copy(const mlp *m, const void *p)
{
    int64_t dim = (int64_t)m->shape.n_params;
    return bb_value_tensor_copy(BB_DT_FLOAT, 1, &dim, p, m->shape.n_params * sizeof(float));
}

float *mlp_params_mut(mlp *m)
{
    const bb_value *v = m->pv;
    if (atomic_load(&v->refs) == 1 && v->u.tensor.buf && atomic_load(&v->u.tensor.buf->refs) == 1)
        return m->params;
    bb_value *c = mlp_params_copy(m, m->params);
    if (!c)
        return NULL;
    mlp_commit_params(m, c);
    return m->params;
}

static int create_as(const char *type_name, const bb_create_args *args, void **out,
                     bb_error *err)
{
    bbp_config cfg;
    int rc = bbp_config_load(&cfg, args, type_name, CONFIG, BBP_COUNT(CONFIG), err);
    if (rc)
        return rc;
    mlp *m = calloc(1, sizeof *m);
    uint64_t seed = 0;
    if (!m) {
        bbp_config_free(&cfg);
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", type_name);
    }
    snprintf(m->who, sizeof m->who, "%s", cfg.who);
    m->ctx = args->ctx;
    rc = read_config(m, &cfg, args->seed, &seed, err);
    bbp_config_free(&cfg);
    if (!rc) {
        size_t n = m->shape.n_params;
        int64_t dim = (int64_t)n;
        bb_value *pv = bb_value_tensor_new(BB_DT_FLOAT, 1, &dim);
        if (pv)
            mlp_commit_params(m, pv);
        m->grad_acc = calloc(n, sizeof *m->grad_acc);
        if (m->proximal_mu > 0)
            m->step_grad = malloc(n * sizeof *m->step_grad);
        if (!pv || !m->grad_acc || bbp_optim_init(&m->opt, n) ||
            (m->proximal_mu > 0 && !m->step_grad))
            rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory for %zu parameters", m->who, n);
    }
    if (!rc) {
        const bb_tensor_proto *w = args->construction ? args->construction->t : NULL;
        if (w)
            rc = load_weights(m, w, err);
        else
            mlp_init_params(&m->shape, seed, m->params);
        if (!rc && m->proximal_mu > 0)
            m->center = bb_value_ref(m->pv);
    }
    if (rc) {
        mlp_destroy(m);
        return rc;
    }
    *out = m;
    return BB_OK;
}

static int mlp_create(const bb_create_args *args, void **out, bb_error *err)
{
    return create_as(NAME, args, out, err);
}

static int part_create(const bb_create_args *args, void **out, bb_error *err)
{
    return create_as(PART_NAME, args, out, err);
}

/* ---- the synchronous ops ----------------------------------------------------------- */

static int oom(const mlp *m, bb_error *err)
{
    return bb_error_set(err, BB_ENOMEM, "%s: out of memory", m->who);
}

/* A float tensor of exactly the parameter count (any shape), or empty when
 * allow_empty. */
static int check_flat(const mlp *m, const char *op, const bb_value *v, bool allow_empty,
                      bb_error *err)
{
    if (!v || v->type->kind != BB_VK_TENSOR || v->u.tensor.dtype != BB_DT_FLOAT)
        return bb_error_set(err, BB_ETYPE, "%s: %s takes an f32 tensor", m->who, op);
    size_t n = bb_tensor_numel(v);
    if (n != m->shape.n_params && !(allow_empty && n == 0))
        return bb_error_set(err, BB_ETYPE,
                            "%s: %s got %zu floats; the model has %zu parameters", m->who, op, n,
                            m->shape.n_params);
    return BB_OK;
}

/* The rows of an input batch: f32 [B, in], or [in] for one row. */
static int input_rows(const mlp *m, const char *op, const bb_value *x, size_t *rows, bb_error *err)
{
    uint32_t in = m->shape.size[0];
    if (x && x->type->kind == BB_VK_TENSOR && x->u.tensor.dtype == BB_DT_FLOAT) {
        const bb_tensor_view *t = &x->u.tensor;
        if (t->ndim == 2 && t->dims[1] == in) {
            *rows = (size_t)t->dims[0];
            return BB_OK;
        }
        if (t->ndim == 1 && t->dims[0] == in) {
            *rows = 1;
            return BB_OK;
        }
    }
    return bb_error_set(err, BB_ETYPE, "%s: %s takes an f32 input [rows, %u]", m->who, op, in);
}

static void forget_forward(mlp *m)
{
    bb_value_unref(m->fwd_input);
    m->fwd_input = NULL;
    m->fwd_cached = false;
}

/* Forward on the engine-thread workspace; keeps the input for Backward. */
static int forward(mlp *m, const char *op, const bb_value *x, size_t *rows, bb_error *err)
{
    int rc = input_rows(m, op, x, rows, err);
    if (rc)
        return rc;
    if (mlp_ws_reserve(&m->ws, &m->shape, *rows))
        return oom(m, err);
    forget_forward(m);
    mlp_forward(&m->shape, m->params, bb_tensor_f32(x), *rows, &m->ws);
    m->fwd_input = bb_value_ref((bb_value *)x);
    return BB_OK;
}

/* The targets of rows outputs, read from y; *scratch (the caller frees it,
 * also on failure) holds them. */
static int targets_of(mlp *m, const char *op, const bb_value *y, size_t rows, void **scratch,
                      bbp_target *t, bb_error *err)
{
    size_t n = rows ? rows : 1;
    if (!(*scratch = malloc(n * (sizeof(int32_t) + sizeof(float)))))
        return oom(m, err);
    int32_t *cls = *scratch;
    char why[200];
    int rc = mlp_target_from(&m->shape, y, rows, cls, (float *)(void *)(cls + n), t, why,
                             sizeof why);
    return rc ? bb_error_set(err, rc, "%s: %s: %s", m->who, op, why) : BB_OK;
}

/* Forward then the loss against target; dz filled when want_grad. */
static int forward_loss(mlp *m, const char *op, const bb_value *x, const bb_value *y,
                        bool want_grad, bbp_stats *st, bb_error *err)
{
    size_t rows = 0;
    int rc = forward(m, op, x, &rows, err);
    if (rc)
        return rc;
    m->fwd_cached = false; /* the workspace now serves this op */
    void *scratch = NULL;
    bbp_target t;
    if (!(rc = targets_of(m, op, y, rows, &scratch, &t, err)))
        mlp_loss_grad(&m->shape, &m->ws, &t, want_grad ? m->ws.dz : NULL, st);
    free(scratch);
    return rc;
}

static int backward(mlp *m, const bb_value *g, bb_error *err)
{
    size_t k = m->shape.size[m->shape.n_layers];
    if (!m->fwd_cached)
        return bb_error_set(err, BB_ESTATE, "%s: Backward without a Forward to go back through",
                            m->who);
    if (!g || g->type->kind != BB_VK_TENSOR || g->u.tensor.dtype != BB_DT_FLOAT ||
        bb_tensor_numel(g) != m->ws.rows * k)
        return bb_error_set(err, BB_ETYPE,
                            "%s: Backward takes the f32 gradient of the last Forward's output "
                            "[%zu, %zu]",
                            m->who, m->ws.rows, k);
    memcpy(m->ws.dz, bb_tensor_f32(g), m->ws.rows * k * sizeof(float));
    mlp_backward(&m->shape, m->params, &m->ws, m->grad_acc, m->grad_pending);
    m->grad_pending = true;
    return BB_OK;
}

/* An optimizer step with Backward's accumulated gradient, FedProx's
 * proximal term added when set (op and the remedy name the caller in the
 * error). */
static int step_accumulated(mlp *m, const char *op, const char *remedy, bb_error *err)
{
    if (!m->grad_pending)
        return bb_error_set(err, BB_ESTATE, "%s: %s with no gradient: %s", m->who, op, remedy);
    float *p = mlp_params_mut(m);
    if (!p)
        return oom(m, err);
    mlp_prox prox = {m->proximal_mu, m->center ? bb_tensor_f32(m->center) : NULL};
    if (m->center)
        mlp_add_proximal(&prox, p, m->grad_acc, m->shape.n_params);
    bbp_optim_step(&m->opt, p, m->grad_acc, m->shape.n_params, NULL, 0);
    memset(m->grad_acc, 0, m->shape.n_params * sizeof *m->grad_acc);
    m->grad_pending = false;
    return BB_OK;
}

static int step(mlp *m, const bb_value *g, bb_error *err)
{
    int rc = check_flat(m, "Step", g, true, err);
    if (rc)
        return rc;
    size_t n = m->shape.n_params;
    mlp_prox prox = {m->proximal_mu, m->center ? bb_tensor_f32(m->center) : NULL};
    if (bb_tensor_numel(g) == n) {
        float *p = mlp_params_mut(m);
        if (!p)
            return oom(m, err);
        const float *grad = bb_tensor_f32(g);
        if (m->center) { /* the input is not ours to change */
            memcpy(m->step_grad, grad, n * sizeof *m->step_grad);
            mlp_add_proximal(&prox, p, m->step_grad, n);
            grad = m->step_grad;
        }
        bbp_optim_step(&m->opt, p, grad, n, NULL, 0);
        return BB_OK;
    }
    return step_accumulated(m, "Step", "pass one, or run Backward first", err);
}

/* The given tensor becomes the parameters, where it is: a 1-D view of its
 * memory when it has another shape (check_flat passed). FedProx's center
 * is that same value. */
static int load_parameters(mlp *m, const bb_value *a, bb_error *err)
{
    int64_t dim = (int64_t)m->shape.n_params;
    bb_value *v = a->u.tensor.ndim == 1
                      ? bb_value_ref((bb_value *)a)
                      : bb_value_tensor_wrap(BB_DT_FLOAT, 1, &dim, a->u.tensor.buf,
                                             a->u.tensor.data);
    if (!v)
        return oom(m, err);
    mlp_commit_params(m, v);
    if (m->center) {
        bb_value_unref(m->center);
        m->center = bb_value_ref(v);
    }
    return BB_OK;
}

/* Backward, then the gradient of the remembered Forward's input (same
 * shape as that input) into out[0] and the CommandId into out[1]. */
static int backward_input(mlp *m, const bb_value *g, uint32_t n_out, bb_value **out,
                          bb_error *err)
{
    int rc = backward(m, g, err);
    if (rc)
        return rc;
    const bb_tensor_view *x = &m->fwd_input->u.tensor;
    if (!(out[0] = bb_value_tensor_new(BB_DT_FLOAT, x->ndim, x->dims)))
        return oom(m, err);
    mlp_input_grad(&m->shape, m->params, &m->ws, bb_tensor_f32(out[0]));
    ++m->version;
    if (n_out > 1 && !(out[1] = bb_value_u64(&BB_TYPE_COMMAND_ID, m->version))) {
        bb_value_unref(out[0]);
        out[0] = NULL;
        return oom(m, err);
    }
    return BB_OK;
}

/* The mean loss of outputs y (f32 [rows, out], or [out] for one row)
 * against target, its gradient w.r.t. y, and the accuracy. */
static int loss_gradient(mlp *m, const bb_value *y, const bb_value *target, uint32_t n_out,
                         bb_value **out, bb_error *err)
{
    uint32_t k = m->shape.size[m->shape.n_layers];
    const bb_tensor_view *v = y && y->type->kind == BB_VK_TENSOR ? &y->u.tensor : NULL;
    if (!v || v->dtype != BB_DT_FLOAT || !((v->ndim == 2 && v->dims[1] == k) ||
                                           (v->ndim == 1 && v->dims[0] == k)))
        return bb_error_set(err, BB_ETYPE, "%s: LossGradient takes f32 outputs [rows, %u]",
                            m->who, k);
    size_t rows = v->ndim == 2 ? (size_t)v->dims[0] : 1;
    void *scratch = NULL;
    bbp_target t;
    bbp_stats st = {0};
    int rc = targets_of(m, "LossGradient", target, rows, &scratch, &t, err);
    if (!rc && !(out[0] = bb_value_tensor_new(BB_DT_FLOAT, v->ndim, v->dims)))
        rc = oom(m, err);
    if (!rc)
        bbp_loss_grad(m->shape.loss, bb_tensor_f32(y), rows, k, &t, rows, bb_tensor_f32(out[0]),
                      &st);
    free(scratch);
    if (!rc && n_out > 1 && !bbp_stats_outputs(&st, out + 1, n_out > 2))
        rc = oom(m, err);
    for (uint32_t i = 0; rc && i < n_out && i < MLP_MAX_OUTPUTS; i++) {
        bb_value_unref(out[i]);
        out[i] = NULL;
    }
    return rc;
}

/* Merge: a peer's parameters q with weight b (an age, or a push-sum mass)
 * into this model, by the rule m->merge. */
static int merge(mlp *m, const bb_value *q, const bb_value *weight, bb_error *err)
{
    int rc = check_flat(m, "Merge", q, false, err);
    if (rc)
        return rc;
    if (!weight || weight->type->kind != BB_VK_U64)
        return bb_error_set(err, BB_ETYPE, "%s: Merge takes the peer model's weight (U64)",
                            m->who);
    uint64_t a = m->age, b = weight->u.u64;
    double w = (double)b / MLP_MASS_ONE, wq;
    switch (m->merge) {
    case MERGE_REPLACE: wq = 1.0; break;
    case MERGE_AVERAGE: wq = 0.5; break;
    case MERGE_PUSH_SUM: wq = m->mass + w > 0 ? w / (m->mass + w) : 0.5; break;
    default: wq = a + b ? (double)b / ((double)a + (double)b) : 0.5; break;
    }
    const float *in = bb_tensor_f32(q);
    float *p = mlp_params_mut(m);
    if (!p)
        return oom(m, err);
    for (size_t i = 0; i < m->shape.n_params; i++)
        p[i] = (float)((1.0 - wq) * p[i] + wq * in[i]);
    if (m->merge == MERGE_PUSH_SUM)
        m->mass += w; /* the age is the sender's business then: it stays */
    else
        m->age = m->merge == MERGE_REPLACE ? b : a > b ? a : b;
    forget_forward(m);
    return BB_OK;
}

/* Share: the parameters and their weight for a peer (the age, or under
 * push_sum a 1/ways share of the mass, which this node keeps too). */
static int share(mlp *m, const bb_node *node, uint32_t n_out, bb_value **out, bb_error *err)
{
    int64_t ways = node ? bb_node_attr_int(node, "ways", 2) : 2;
    if (ways < 1 || ways > 1 << 20)
        return bb_error_set(err, BB_EINVAL, "%s: Share with ways = %lld", m->who,
                            (long long)ways);
    uint64_t weight = m->age;
    if (m->merge == MERGE_PUSH_SUM) {
        m->mass /= (double)ways;
        weight = (uint64_t)(m->mass * MLP_MASS_ONE);
    }
    out[0] = bb_value_ref(m->pv); /* shared: a later change goes to a copy */
    if (n_out > 1)
        out[1] = bb_value_u64(&BB_TYPE_U64, weight);
    return out[0] && (n_out < 2 || out[1]) ? BB_OK : oom(m, err);
}

/* Every op that completes inline. outputs[0..] receive new references. */
static int run_sync(void *model, int op_id, const bb_node *node, bb_value *const *in,
                    uint32_t n_in, bb_value **out, uint32_t n_out, bb_error *err)
{
    mlp *m = model;
    mlp_op op = (mlp_op)op_id;
    const bb_value *a = n_in > 0 ? in[0] : NULL, *b = n_in > 1 ? in[1] : NULL;
    bbp_stats st = {0};
    size_t rows = 0;
    int rc = BB_OK;
    bool changes = false; /* the op answers a CommandId */
    switch (op) {
    case OP_PARAMS:
    case OP_PARAMS_ON: /* the committed value itself: nobody changes it */
        out[0] = bb_value_ref(m->pv);
        return BB_OK;
    case OP_PARAMS_DIGEST:
        out[0] = bb_value_u64(&BB_TYPE_U64, bbp_params_digest(m->params, m->shape.n_params));
        return out[0] ? BB_OK : oom(m, err);
    case OP_SHARE: /* reads the node's attribute; changes only the mass */
        return share(m, node, n_out, out, err);
    case OP_MERGE:
        if ((rc = merge(m, a, b, err)))
            return rc;
        m->version++;
        return (out[0] = bb_value_u64(&BB_TYPE_U64, m->age)) ? BB_OK : oom(m, err);
    case OP_LOAD_PARAMETERS:
        if (!(rc = check_flat(m, "LoadParameters", a, false, err)) &&
            !(rc = load_parameters(m, a, err))) {
            bbp_optim_reset(&m->opt, m->shape.n_params);
            forget_forward(m);
        }
        changes = true;
        break;
    case OP_APPLY_DELTA:
        if (!(rc = check_flat(m, "ApplyDelta", a, false, err))) {
            const float *d = bb_tensor_f32(a);
            float *p = mlp_params_mut(m);
            if (!p)
                rc = oom(m, err);
            for (size_t i = 0; p && i < m->shape.n_params; i++)
                p[i] += d[i];
        }
        changes = true;
        break;
    case OP_STEP:
        rc = step(m, a, err);
        changes = true;
        break;
    case OP_BACKWARD:
        rc = backward(m, a, err);
        changes = true;
        break;
    case OP_BACKWARD_INPUT: /* answers its own CommandId, second */
        return backward_input(m, a, n_out, out, err);
    case OP_STEP_ON:
        rc = step_accumulated(m, "StepOn", "run Backward first", err);
        changes = true;
        break;
    case OP_LOSS_GRADIENT:
        return loss_gradient(m, a, b, n_out, out, err);
    case OP_FORWARD:
        if (!(rc = forward(m, "Forward", a, &rows, err))) {
            size_t k = m->shape.size[m->shape.n_layers];
            int64_t dims[2] = {(int64_t)rows, (int64_t)k};
            bool flat = a->u.tensor.ndim == 1;
            out[0] = bb_value_tensor_copy(BB_DT_FLOAT, flat ? 1 : 2, flat ? &dims[1] : dims,
                                          m->ws.a[m->shape.n_layers], rows * k * sizeof(float));
            m->fwd_cached = true;
            rc = out[0] ? BB_OK : oom(m, err);
        }
        break;
    case OP_EVALUATE:
        if (!(rc = forward_loss(m, "Evaluate", a, b, false, &st, err))) {
            /* the accuracy is an optional output */
            rc = bbp_stats_outputs(&st, out, n_out > 1) ? BB_OK : oom(m, err);
        }
        break;
    case OP_GRADIENTS:
        if (!(rc = forward_loss(m, "Gradients", a, b, true, &st, err))) {
            int64_t dim = (int64_t)m->shape.n_params;
            out[0] = bb_value_tensor_new(BB_DT_FLOAT, 1, &dim);
            if (out[0])
                mlp_backward(&m->shape, m->params, &m->ws, bb_tensor_f32(out[0]), false);
            if (out[0] && n_out > 1) /* the loss, an optional output */
                out[1] = bbp_scalar((float)(st.loss_sum / (double)(st.rows ? st.rows : 1)));
            rc = out[0] && (n_out < 2 || out[1]) ? BB_OK : oom(m, err);
        }
        break;
    default:
        rc = bb_error_set(err, BB_EUNSUPPORTED, "%s: op %d is not synchronous", m->who, (int)op);
    }
    if (!rc && changes) /* the CommandId counts the changes to the model */
        rc = (out[0] = bb_value_u64(&BB_TYPE_COMMAND_ID, ++m->version)) ? BB_OK : oom(m, err);
    return rc;
}

/* ---- dispatch, and the queue behind a running Train ------------------------------------ */

static const char *const OP_NAMES[N_MLP_OPS] = {
    [OP_APPLY_DELTA] = "ApplyDelta",   [OP_BACKWARD] = "Backward",
    [OP_EVALUATE] = "Evaluate",        [OP_EVALUATE_METRICS] = "EvaluateMetrics",
    [OP_FORWARD] = "Forward",          [OP_LOAD_PARAMETERS] = "LoadParameters",
    [OP_PARAMS] = "Params",            [OP_STEP] = "Step",
    [OP_TRAIN] = "Train",              [OP_GRADIENTS] = "Gradients",
    [OP_PARAMS_ON] = "ParamsOn",       [OP_PARAMS_DIGEST] = "ParamsDigest",
    [OP_BACKWARD_INPUT] = "BackwardInput", [OP_LOSS_GRADIENT] = "LossGradient",
    [OP_STEP_ON] = "StepOn",
    [OP_MERGE] = "Merge",              [OP_SHARE] = "Share",
};

static bool changes_model(int op)
{
    return op == OP_APPLY_DELTA || op == OP_BACKWARD || op == OP_LOAD_PARAMETERS ||
           op == OP_STEP || op == OP_TRAIN || op == OP_BACKWARD_INPUT || op == OP_STEP_ON ||
           op == OP_MERGE;
}

static const bbp_model_ops MLP_OPS = {
    .names = OP_NAMES,
    .n_ops = N_MLP_OPS,
    .op_train = OP_TRAIN,
    .op_evaluate_metrics = OP_EVALUATE_METRICS,
    .max_outputs = MLP_MAX_OUTPUTS,
    .changes_model = changes_model,
    .run_sync = run_sync,
    .start_train = mlp_start_train,
    .start_eval = mlp_start_eval,
};

static bbp_model_state model_state(mlp *m)
{
    return (bbp_model_state){m, m->who, &m->ctx, m->epochs_cfg, &m->jobs, &m->queue};
}

void mlp_drain(void *model)
{
    bbp_model_state st = model_state(model);
    bbp_model_drain(&MLP_OPS, &st);
}

static bb_dispatch_result mlp_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                       bb_value **outputs, bb_error *err)
{
    bbp_model_state st = model_state(inst);
    return bbp_model_dispatch(&MLP_OPS, &st, ctx, call, outputs, err);
}

/* ---- snapshot ----------------------------------------------------------------------------
 * "BBNN" u32 version=3, u64 n_params, u32 optimizer, u64 adam steps, u64 changes,
 * [version 3: u64 age, u64 mass (2^-32 units)], params[n], momentum / first
 * moment[n], [Adam: second moment[n]]  (f32), [version 2 and 3: u8 has_center,
 * [FedProx center[n]]]. Older versions are still read: without age and mass
 * (before 3) age 0 and mass 1; without the center flag (version 1) the center
 * is the restored parameters. */

#define MAGIC "BBNN"
#define SNAP_VERSION 3u

static int mlp_snapshot(void *inst, uint8_t **out, size_t *out_len, bb_error *err)
{
    const mlp *m = inst;
    size_t bytes = m->shape.n_params * sizeof(float);
    bb_writer w = {0};
    bbp_snapshot_head_put(&w, MAGIC, SNAP_VERSION, m->shape.n_params, &m->opt, m->version);
    bb_writer_put_u64le(&w, m->age);
    bb_writer_put_u64le(&w, (uint64_t)(m->mass * MLP_MASS_ONE));
    bb_writer_put(&w, m->params, bytes);
    bbp_optim_put_m(&m->opt, &w, bytes);
    if (m->opt.v)
        bb_writer_put(&w, m->opt.v, bytes);
    bb_writer_put_u8(&w, m->center != NULL);
    if (m->center)
        bb_writer_put(&w, bb_tensor_f32(m->center), bytes);
    if (!bb_writer_take(&w, out, out_len))
        return oom(m, err);
    return BB_OK;
}

static int mlp_restore(void *inst, const uint8_t *data, size_t len, bb_error *err)
{
    mlp *m = inst;
    bb_reader r;
    bb_reader_init(&r, data, len);
    uint32_t version;
    uint64_t t = 0, changes = 0, age = 0, mass = (uint64_t)MLP_MASS_ONE;
    size_t bytes = m->shape.n_params * sizeof(float);
    int rc = bbp_snapshot_head_get(&r, MAGIC, SNAP_VERSION, m->shape.n_params, &m->opt, m->who,
                                   &version, &t, &changes, err);
    if (rc)
        return rc;
    if (version >= 3 && (!bb_reader_u64le(&r, &age) || !bb_reader_u64le(&r, &mass)))
        return bb_error_set(err, BB_EDECODE, "%s: the snapshot ends in its age and mass", m->who);
    size_t want = bytes * (m->opt.v ? 3 : 2), left = bb_reader_left(&r);
    uint8_t has_center = 0;
    if (version >= 2) { /* the center flag follows the moments */
        const uint8_t *flag = left > want ? r.data + r.pos + want : NULL;
        if (!flag || *flag > 1)
            return bb_error_set(err, BB_EDECODE, "%s: the snapshot's state is truncated or out "
                                "of range", m->who);
        has_center = *flag;
        want += 1 + (has_center ? bytes : 0);
    }
    if (left != want)
        return bb_error_set(err, BB_EDECODE, "%s: the snapshot has %zu state bytes, not %zu",
                            m->who, left, want);
    const uint8_t *params, *moment, *second = NULL, *center = NULL;
    bb_reader_view(&r, bytes, &params);
    bb_reader_view(&r, bytes, &moment);
    if (m->opt.v)
        bb_reader_view(&r, bytes, &second);
    if (version >= 2)
        bb_reader_u8(&r, &has_center);
    if (has_center)
        bb_reader_view(&r, bytes, &center);
    /* everything that can fail first: the model changes whole or not at all */
    bb_value *pv = mlp_params_copy(m, params), *cv = NULL;
    if (pv && m->center && center && !(cv = mlp_params_copy(m, center)))
        pv = (bb_value_unref(pv), NULL);
    if (!pv)
        return oom(m, err);
    mlp_commit_params(m, pv);
    if (m->opt.m) /* plain SGD keeps none: the zeros it wrote are dropped */
        memcpy(m->opt.m, moment, bytes);
    if (m->opt.v)
        memcpy(m->opt.v, second, bytes);
    if (m->center) { /* a snapshot without a center (mu was 0, or version 1): the parameters */
        bb_value_unref(m->center);
        m->center = cv ? cv : bb_value_ref(m->pv);
    }
    m->opt.t = t;
    m->version = changes;
    m->age = age;
    m->mass = (double)mass / MLP_MASS_ONE;
    forget_forward(m);
    return BB_OK;
}

/* ---- declarations ---------------------------------------------------------------------------- */

#define P(nm, ty) {.name = nm, .type = &BB_TYPE_##ty}
#define P_OPT(nm, ty) {.name = nm, .type = &BB_TYPE_##ty, .optional = true}
static const bb_port_decl IN_LOSS_GRAD[] = {P("output", TENSOR_F32), P("target", TENSOR)};
static const bb_port_decl OUT_BACKWARD_INPUT[] = {P("input_grad", TENSOR_F32),
                                                  P_OPT("cmd", COMMAND_ID)};
static const bb_port_decl OUT_LOSS_GRAD[] = {P("grad", TENSOR_F32), P("loss", TENSOR_F32),
                                             P_OPT("accuracy", TENSOR_F32)};
static const bb_port_decl IN_MERGE[] = {P("params", TENSOR_F32), P("weight", U64)};
static const bb_port_decl OUT_AGE[] = {P("age", U64)};
static const bb_port_decl OUT_SHARE[] = {P("params", TENSOR_F32), P_OPT("weight", U64)};
#undef P
#undef P_OPT

static const bb_op_decl EXT_OPS[] = {
    BBP_MODEL_EXT_OPS,
    BBP_OPD("BackwardInput", BBP_IN_GRAD, OUT_BACKWARD_INPUT,
            "Backward, and dLoss/dInput of the last Forward: what split learning sends back "
            "to the part below"),
    BBP_OPD("LossGradient", IN_LOSS_GRAD, OUT_LOSS_GRAD,
            "the mean loss of given outputs against targets, its gradient w.r.t. the outputs "
            "and the accuracy (no parameters read)"),
    BBP_OPD("StepOn", BBP_IN_TRIGGER, BBP_OUT_CMD,
            "an optimizer step with Backward's accumulated gradient, when the trigger arrives"),
    BBP_OPD("Share", BBP_IN_TRIGGER, OUT_SHARE,
            "what a node sends a peer: the parameters and their weight (the model's age, or "
            "under push_sum a 1/ways share of its mass, attribute ways)"),
    BBP_OPD("Merge", IN_MERGE, OUT_AGE,
            "combine a peer's model (params, weight) with this one by the config's merge "
            "rule; the age after it (gossip learning)"),
};
static const bb_opset_decl OPSETS[] = {
    {"ai.bytesandbrains.role.model", 1, BBP_MODEL_ROLE_OPS, BBP_COUNT(BBP_MODEL_ROLE_OPS)},
    {EXT_DOMAIN, 1, EXT_OPS, BBP_COUNT(EXT_OPS)},
};
static const bb_dependency_decl DEPS[] = {{BB_ROLE_DATA_SOURCE, "data"}};

static const bb_component_type MLP = {
    BBP_TYPE_ABI,
    .type_name = NAME,
    .role = BB_ROLE_MODEL,
    .doc = "multi-layer perceptron (relu / tanh; softmax cross-entropy / MSE; SGD with "
           "momentum / Adam) on one flat float32 parameter vector; trains on its \"data\" "
           "source off the engine thread",
    .opsets = OPSETS,
    .n_opsets = BBP_COUNT(OPSETS),
    .deps = DEPS,
    .n_deps = BBP_COUNT(DEPS),
    .config = CONFIG,
    .n_config = BBP_COUNT(CONFIG),
    .create = mlp_create,
    .destroy = mlp_destroy,
    .dispatch = mlp_dispatch,
    .snapshot = mlp_snapshot,
    .restore = mlp_restore,
};

/* nn::MlpPart: the same network and ops for one part of a model cut across
 * nodes (split learning's bottom and top), whose batches come through the
 * graph: no data source dependency, so a node that holds no rows (the top)
 * binds none, and no Train or EvaluateMetrics, which would read one. */
static const bb_opset_decl PART_OPSETS[] = {
    {"ai.bytesandbrains.role.model", 1, BBP_MODEL_ROLE_OPS,
     BBP_COUNT(BBP_MODEL_ROLE_OPS) - BBP_MODEL_DATA_OPS},
    {EXT_DOMAIN, 1, EXT_OPS, BBP_COUNT(EXT_OPS)},
};

static const bb_component_type MLP_PART = {
    BBP_TYPE_ABI,
    .type_name = PART_NAME,
    .role = BB_ROLE_MODEL,
    .doc = "nn::Mlp as one part of a model cut across nodes (split learning): fed through the "
           "graph, so no data source dependency and no Train / EvaluateMetrics (Train's config "
           "keys are accepted and unused)",
    .opsets = PART_OPSETS,
    .n_opsets = BBP_COUNT(PART_OPSETS),
    .config = CONFIG,
    .n_config = BBP_COUNT(CONFIG),
    .create = part_create,
    .destroy = mlp_destroy,
    .dispatch = mlp_dispatch,
    .snapshot = mlp_snapshot,
    .restore = mlp_restore,
};

static const bb_component_type *const TYPES[] = {&MLP, &MLP_PART};

BBP_PLUGIN_ENTRY("nn", TYPES)
