/*
 * onnx_model.c — nn::Onnx, a Model that trains any ONNX inference graph
 * (the ai.onnx ops autodiff.h differentiates) by reverse-mode autodiff.
 *
 * Construction: the graph is the construction attribute's .g (a program
 * records it with bb_slot_set_graph), else the main graph of the ONNX file
 * the config's model_file names; the JSON config picks the loss, the
 * optimizer and the training knobs. The initial parameters are the graph's
 * initializers. Parameters and buffers (BatchNormalization's running
 * statistics) form one flat f32 vector in initializer order (autodiff.h).
 *
 * Ops (ai.bytesandbrains.role.model, IR_AND_DSL.md 5c.2):
 *   Forward(input) -> output   a TRAINING forward (batch statistics, Dropout;
 *       the running statistics move); remembered for Backward
 *   Backward(grad) -> cmd      dLoss/dOutput through the remembered Forward;
 *       the parameter gradient accumulates for Step
 *   Step(grads | []) -> cmd    an optimizer step with the given gradient, or
 *       the accumulated one when grads is empty
 *   Evaluate(input, target) -> (loss, accuracy?)   inference mode
 *   ApplyDelta(delta) -> cmd, LoadParameters(params) -> cmd (restarts the
 *       optimizer; the FedProx center becomes params), Params() -> params
 *   Train(trigger) -> (params, num_samples)   epochs over the "data"
 *       dependency off the engine thread (onnx_jobs.c)
 *   EvaluateMetrics(trigger) -> (loss, accuracy)   the source's held-out set
 * bb-nn.Onnx.atomic:
 *   Gradients(input, target) -> (grads, loss?)   the mean loss's gradient in
 *       training mode, on a copy (the model does not change)
 *   ParamsOn(trigger), ParamsDigest(trigger)   as nn::Mlp's
 *   ExportOnnx(trigger) -> Bytes   the trained model as a plain ONNX model
 *   ParamNames(trigger) -> Bytes   JSON: every initializer of the flat vector
 *       with its offset, shape and whether it is trained
 * While a Train runs, ops that change the model (LoadParameters, ApplyDelta,
 * Step, Forward, Backward, Train) wait in a FIFO and run when it has
 * committed; reads answer at once from the committed parameters.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bb/bytes.h>
#include <bb/model_io.h>

#include "onnx_model.h"
#include "plugins/common/plugin_config.h"
#include "plugins/common/plugin_model.h"
#include "plugins/common/plugin_type.h"

#define EXT_DOMAIN "bb-nn.Onnx.atomic"
#define MAX_FROZEN 4096

static const bb_config_decl CONFIG[] = {
    {"model_file", "string", "null",
     "an ONNX file whose main graph is the model, when the construction state carries no "
     "graph (AttributeProto.g)"},
    {"loss", "string", "\"softmax_cross_entropy\"",
     "\"softmax_cross_entropy\" (graph output 0 is [rows, classes] logits) or \"mse\""},
    {"optimizer", "string", "\"sgd\"", "\"sgd\" (with momentum), \"adam\" or \"adamw\""},
    {"learning_rate", "float", "0.01", "step size"},
    {"momentum", "float", "0", "SGD momentum (0: plain SGD)"},
    {"weight_decay", "float", "0",
     "L2 weight decay (sgd, adam: added to the gradient; adamw: decoupled)"},
    {"beta1", "float", "0.9", "Adam first-moment decay"},
    {"beta2", "float", "0.999", "Adam second-moment decay"},
    {"epsilon", "float", "1e-8", "Adam denominator guard"},
    {"batch_size", "int", "32",
     "training minibatch: larger batches from the source are split into minibatches"},
    {"epochs", "int", "null",
     "local epochs per Train; when set it overrides the Train node's epochs attribute"},
    {"batches_per_epoch", "int", "0",
     "epoch length in batches for data sources without a NumSamples op (0: ask the source)"},
    {"proximal_mu", "float", "0",
     "FedProx: Train and Step add mu/2 ||w - w_global||^2, w_global being the parameters of "
     "the last LoadParameters (0: off)"},
    {"frozen", "array", "[]", "initializer names that are not trained"},
    {"seed", "int", "null", "Dropout seed (default: the seed the host gives the slot)"},
    {"opset", "int", "17", "the ai.onnx opset an exported model imports (ExportOnnx)"},
};

/* ---- create / destroy ---------------------------------------------------------------------- */

static void onnx_destroy(void *inst)
{
    onnx_model *m = inst;
    if (!m)
        return;
    bbp_jobs_cancel_all(&m->jobs);
    bbp_queue_free(&m->queue);
    onnx_trainer_free(&m->tr);
    ad_session_free(m->scratch_sess);
    ad_plan_unref(m->plan);
    bbp_optim_free(&m->opt);
    free(m->params);
    free(m->center);
    free(m->scratch);
    free(m->grad_acc);
    free(m);
}

static int read_frozen(const bbp_config *cfg, const char **names, size_t *n, bb_error *err)
{
    cJSON *owned;
    const cJSON *v = bbp_config_get(cfg, "frozen", &owned);
    int rc = BB_OK;
    *n = 0;
    if (v && (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > MAX_FROZEN))
        rc = bb_error_set(err, BB_ECONFIG, "%s: config key 'frozen' must be an array of at "
                          "most %d initializer names", cfg->who, MAX_FROZEN);
    for (const cJSON *e = v && !rc ? v->child : NULL; e; e = e->next) {
        if (!cJSON_IsString(e)) {
            rc = bb_error_set(err, BB_ECONFIG, "%s: config key 'frozen' must list names",
                              cfg->who);
            break;
        }
        names[(*n)++] = e->valuestring;
    }
    if (rc)
        *n = 0;
    cJSON_Delete(owned); /* the default is an empty array: no names borrowed from it */
    return rc;
}

/* The graph: the construction's .g, else model_file's main graph. */
static int load_graph(const bbp_config *cfg, const bb_create_args *args, bb_model **file,
                      const bb_graph **g, bb_error *err)
{
    *file = NULL;
    *g = args->construction ? args->construction->g : NULL;
    if (*g)
        return BB_OK;
    char path[4096];
    bool has = bbp_config_has(cfg, "model_file");
    int rc = has ? bbp_config_string(cfg, "model_file", path, sizeof path, err) : BB_OK;
    if (rc)
        return rc;
    if (!has)
        return bb_error_set(err, BB_ECONFIG, "%s: no graph: the construction state has none "
                            "(AttributeProto.g) and config model_file is not set", cfg->who);
    if ((rc = bb_model_load_file(path, file, err))) {
        bb_error_prefix(err, "%s: model_file", cfg->who);
        return rc;
    }
    if (!(*file)->graph)
        return bb_error_set(err, BB_EINVAL, "%s: model_file %s has no main graph", cfg->who,
                            path);
    *g = (*file)->graph;
    return BB_OK;
}

static int read_knobs(onnx_model *m, const bbp_config *cfg, uint64_t host_seed, bb_error *err)
{
    static const char *const LOSS[] = {"softmax_cross_entropy", "mse"};
    static const char *const OPT[] = {"sgd", "adam", "adamw"};
    int loss = 0, opt = 0;
    double lr = 0, mu = 0, wd = 0, b1 = 0, b2 = 0, eps = 0, prox = 0, ep = 0, s = 0;
    bool has_epochs = false, has_seed = false;
    int rc = bbp_config_enum(cfg, "loss", LOSS, 2, &loss, err);
    if (!rc)
        rc = bbp_config_enum(cfg, "optimizer", OPT, 3, &opt, err);
    if (!rc)
        rc = bbp_config_double(cfg, "learning_rate", 1e-12, 1e3, &lr, err);
    if (!rc)
        rc = bbp_config_double(cfg, "momentum", 0, 0.999999, &mu, err);
    if (!rc)
        rc = bbp_config_double(cfg, "weight_decay", 0, 1e3, &wd, err);
    if (!rc)
        rc = bbp_config_double(cfg, "beta1", 0, 0.999999, &b1, err);
    if (!rc)
        rc = bbp_config_double(cfg, "beta2", 0, 0.999999999, &b2, err);
    if (!rc)
        rc = bbp_config_double(cfg, "epsilon", 1e-30, 1, &eps, err);
    if (!rc)
        rc = bbp_config_int(cfg, "batch_size", 1, 1 << 24, &m->batch_size, err);
    if (!rc)
        rc = bbp_config_number(cfg, "epochs", true, 1, 1 << 20, &ep, &has_epochs, err);
    if (!rc)
        rc = bbp_config_int(cfg, "batches_per_epoch", 0, INT64_C(1) << 40, &m->batches_per_epoch,
                            err);
    if (!rc)
        rc = bbp_config_double(cfg, "proximal_mu", 0, 1e6, &prox, err);
    if (!rc)
        rc = bbp_config_number(cfg, "seed", true, 0, 9007199254740992.0, &s, &has_seed, err);
    if (!rc)
        rc = bbp_config_int(cfg, "opset", 7, 100, &m->opset, err);
    if (rc)
        return rc;
    m->loss = (bbp_loss)loss;
    m->opt = (bbp_optim){.kind = (bbp_opt)opt, .lr = (float)lr, .momentum = (float)mu,
                         .beta1 = (float)b1, .beta2 = (float)b2, .eps = (float)eps,
                         .weight_decay = (float)wd};
    m->prox_mu = (float)prox;
    m->epochs_cfg = has_epochs ? (int64_t)ep : -1;
    m->seed = has_seed ? (uint64_t)s : host_seed;
    return BB_OK;
}

static int build_plan(onnx_model *m, const bbp_config *cfg, const bb_create_args *args,
                      bb_error *err)
{
    const char **frozen = calloc(MAX_FROZEN, sizeof *frozen);
    if (!frozen)
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", m->who);
    size_t n_frozen = 0;
    bb_model *file = NULL;
    const bb_graph *g = NULL;
    int rc = read_frozen(cfg, frozen, &n_frozen, err);
    if (!rc)
        rc = load_graph(cfg, args, &file, &g, err);
    if (!rc)
        rc = ad_plan_build(g, frozen, n_frozen, m->who, &m->plan, err);
    for (size_t i = 0; !rc && i < n_frozen; i++) {
        bool found = false;
        for (size_t k = 0; k < g->initializers.n && !found; k++)
            found = strcmp(g->initializers.v[k]->name, frozen[i]) == 0;
        if (!found)
            rc = bb_error_set(err, BB_ECONFIG, "%s: config 'frozen' names '%s', which is no "
                              "initializer of the graph", m->who, frozen[i]);
    }
    bb_model_free(file);
    free(frozen);
    return rc;
}

static int onnx_create(const bb_create_args *args, void **out, bb_error *err)
{
    bbp_config cfg;
    int rc = bbp_config_load(&cfg, args, ONNX_NAME, CONFIG, BBP_COUNT(CONFIG), err);
    if (rc)
        return rc;
    onnx_model *m = calloc(1, sizeof *m);
    if (!m) {
        bbp_config_free(&cfg);
        return bb_error_set(err, BB_ENOMEM, ONNX_NAME ": out of memory");
    }
    snprintf(m->who, sizeof m->who, "%s", cfg.who);
    m->ctx = args->ctx;
    rc = read_knobs(m, &cfg, args->seed, err);
    if (!rc)
        rc = build_plan(m, &cfg, args, err);
    bbp_config_free(&cfg);
    size_t n = rc ? 0 : m->plan->n_floats, bytes = (n ? n : 1) * sizeof(float);
    if (!rc) {
        m->params = malloc(bytes);
        m->center = malloc(bytes);
        m->scratch = malloc(bytes);
        m->grad_acc = calloc(n ? n : 1, sizeof *m->grad_acc);
        if (!m->params || !m->center || !m->scratch || !m->grad_acc ||
            bbp_optim_init(&m->opt, n) ||
            onnx_trainer_init(&m->tr, m->plan, m->params, m->seed, m->loss,
                              (size_t)m->batch_size, m->prox_mu, m->center) ||
            !(m->scratch_sess = ad_session_new(m->plan, m->scratch, m->seed)))
            rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory for %zu parameters", m->who, n);
    }
    if (rc) {
        onnx_destroy(m);
        return rc;
    }
    ad_plan_initial_params(m->plan, m->params);
    memcpy(m->center, m->params, bytes);
    *out = m;
    return BB_OK;
}

/* ---- the synchronous ops ------------------------------------------------------------------------ */

typedef enum onnx_op {
    OP_APPLY_DELTA, OP_BACKWARD, OP_EVALUATE, OP_EVALUATE_METRICS, OP_FORWARD,
    OP_LOAD_PARAMETERS, OP_PARAMS, OP_STEP, OP_TRAIN, OP_GRADIENTS, OP_PARAMS_ON,
    OP_PARAMS_DIGEST, OP_EXPORT_ONNX, OP_PARAM_NAMES, N_ONNX_OPS
} onnx_op;

static int oom(const onnx_model *m, bb_error *err)
{
    return bb_error_set(err, BB_ENOMEM, "%s: out of memory", m->who);
}

static bb_value *flat_copy(const onnx_model *m, const float *v)
{
    int64_t dim = (int64_t)m->plan->n_floats;
    return bb_value_tensor_copy(BB_DT_FLOAT, 1, &dim, v, m->plan->n_floats * sizeof(float));
}

/* A float tensor of exactly the flat vector's length (any shape), or empty
 * when allow_empty. */
static int check_flat(const onnx_model *m, const char *op, const bb_value *v, bool allow_empty,
                      bb_error *err)
{
    if (!v || v->type->kind != BB_VK_TENSOR || v->u.tensor.dtype != BB_DT_FLOAT)
        return bb_error_set(err, BB_ETYPE, "%s: %s takes an f32 tensor", m->who, op);
    size_t n = bb_tensor_numel(v);
    if (n != m->plan->n_floats && !(allow_empty && n == 0))
        return bb_error_set(err, BB_ETYPE, "%s: %s takes %zu floats%s, got %zu", m->who, op,
                            m->plan->n_floats, allow_empty ? " (or none)" : "", n);
    return BB_OK;
}

static int check_batch(const onnx_model *m, const char *op, const bb_value *x, bb_error *err)
{
    if (!x || x->type->kind != BB_VK_TENSOR || x->u.tensor.dtype != BB_DT_FLOAT ||
        x->u.tensor.ndim < 1 || x->u.tensor.dims[0] < 1)
        return bb_error_set(err, BB_ETYPE, "%s: %s takes an f32 batch [rows, ...] of at least "
                            "one row", m->who, op);
    return BB_OK;
}

/* Evaluate: the mean loss (and accuracy) in inference mode. */
static int evaluate(onnx_model *m, const bb_value *x, const bb_value *y, bb_value **out,
                    uint32_t n_out, bb_error *err)
{
    int rc = check_batch(m, "Evaluate", x, err);
    if (!rc && (!y || y->type->kind != BB_VK_TENSOR || y->u.tensor.ndim < 1 ||
                y->u.tensor.dims[0] != x->u.tensor.dims[0]))
        rc = bb_error_set(err, BB_ETYPE, "%s: Evaluate takes one target per input row", m->who);
    if (rc)
        return rc;
    bbp_stats st = {0};
    char msg[BB_ERROR_MSG_MAX];
    if ((rc = onnx_pass(&m->tr, m->params, NULL, x, y, &st, msg, sizeof msg)))
        return bb_error_set(err, rc, "%s: Evaluate: %s", m->who, msg);
    return bbp_stats_outputs(&st, out, n_out > 1) ? BB_OK : oom(m, err);
}

/* Gradients: forward + backward in training mode on a copy of the
 * parameters, with the model's Dropout seed every time. */
static int gradients(onnx_model *m, const bb_value *x, const bb_value *y, bb_value **out,
                     uint32_t n_out, bb_error *err)
{
    int rc = check_batch(m, "Gradients", x, err);
    if (rc)
        return rc;
    const ad_plan *p = m->plan;
    memcpy(m->scratch, m->params, p->n_floats * sizeof(float));
    ad_session_free(m->scratch_sess);
    m->scratch_sess = ad_session_new(m->plan, m->scratch, m->seed);
    if (!m->scratch_sess || !(out[0] = bb_value_tensor_new(BB_DT_FLOAT, 1, (int64_t[]){
                                  (int64_t)p->n_floats})))
        return oom(m, err);
    onnx_trainer t = m->tr;
    t.sess = m->scratch_sess;
    t.grad = bb_tensor_f32(out[0]);
    bbp_stats st = {0};
    bb_value *o = NULL, *dz = NULL;
    size_t rows = (size_t)x->u.tensor.dims[0];
    bbp_target tg;
    char msg[BB_ERROR_MSG_MAX] = "";
    rc = ad_forward(t.sess, x, true, &o, err);
    size_t k = rc ? 0 : bb_tensor_numel(o) / rows;
    if (!rc && (rc = onnx_targets(&m->tr, y, rows, k, &tg, msg, sizeof msg)))
        bb_error_set(err, rc, "%s: Gradients: %s", m->who, msg);
    if (!rc && !(dz = bb_value_tensor_new(BB_DT_FLOAT, o->u.tensor.ndim, o->u.tensor.dims)))
        rc = oom(m, err);
    if (!rc) {
        bbp_loss_grad(m->loss, bb_tensor_f32(o), rows, k, &tg, rows, bb_tensor_f32(dz), &st);
        rc = ad_backward(t.sess, dz, t.grad, false, err);
    }
    bb_value_unref(o);
    bb_value_unref(dz);
    ad_session_clear(t.sess);
    if (!rc && n_out > 1 && !(out[1] = bbp_scalar((float)(st.loss_sum / (double)rows))))
        rc = oom(m, err);
    return rc;
}

static int forward(onnx_model *m, const bb_value *x, bb_value **out, bb_error *err)
{
    int rc = check_batch(m, "Forward", x, err);
    if (!rc)
        rc = ad_forward(m->tr.sess, x, true, out, err);
    return rc;
}

static int backward(onnx_model *m, const bb_value *g, bb_error *err)
{
    if (!ad_session_rows(m->tr.sess))
        return bb_error_set(err, BB_ESTATE, "%s: Backward without a Forward to go back through",
                            m->who);
    int rc = ad_backward(m->tr.sess, g, m->grad_acc, m->grad_pending, err);
    if (!rc)
        m->grad_pending = true;
    return rc;
}

static int step(onnx_model *m, const bb_value *g, bb_error *err)
{
    int rc = check_flat(m, "Step", g, true, err);
    if (rc)
        return rc;
    const ad_plan *p = m->plan;
    bool given = bb_tensor_numel(g) == p->n_floats;
    if (!given && !m->grad_pending)
        return bb_error_set(err, BB_ESTATE,
                            "%s: Step with no gradient: pass one, or run Backward first", m->who);
    if (given)
        memcpy(m->tr.grad, bb_tensor_f32(g), p->n_floats * sizeof(float));
    else
        memcpy(m->tr.grad, m->grad_acc, p->n_floats * sizeof(float));
    bbp_prox_add(m->prox_mu, m->params, m->center, m->tr.grad, p->n_floats, p->trained,
                 p->n_trained_runs);
    bbp_optim_step(&m->opt, m->params, m->tr.grad, p->n_floats, p->trained, p->n_trained_runs);
    if (!given) {
        memset(m->grad_acc, 0, p->n_floats * sizeof *m->grad_acc);
        m->grad_pending = false;
    }
    return BB_OK;
}

/* ParamNames: JSON [{"name", "offset", "shape", "trained"}...] as Bytes. */
static int param_names(const onnx_model *m, bb_value **out, bb_error *err)
{
    bb_writer w = {0};
    char buf[256];
    bb_writer_put(&w, "[", 1);
    for (uint32_t i = 0; i < m->plan->n_params; i++) {
        const ad_param *pa = &m->plan->params[i];
        cJSON *name = cJSON_CreateString(pa->name);
        char *quoted = name ? cJSON_PrintUnformatted(name) : NULL;
        cJSON_Delete(name);
        if (!quoted) {
            bb_writer_free(&w);
            return oom(m, err);
        }
        int n = snprintf(buf, sizeof buf, "%s{\"name\": ", i ? ", " : "");
        bb_writer_put(&w, buf, (size_t)n);
        bb_writer_put(&w, quoted, strlen(quoted));
        free(quoted);
        n = snprintf(buf, sizeof buf, ", \"offset\": %zu, \"shape\": [", pa->offset);
        bb_writer_put(&w, buf, (size_t)n);
        for (uint32_t d = 0; d < pa->ndim; d++) {
            n = snprintf(buf, sizeof buf, "%s%lld", d ? ", " : "", (long long)pa->dims[d]);
            bb_writer_put(&w, buf, (size_t)n);
        }
        n = snprintf(buf, sizeof buf, "], \"trained\": %s}", pa->trained ? "true" : "false");
        bb_writer_put(&w, buf, (size_t)n);
    }
    bb_writer_put(&w, "]", 1);
    uint8_t *text = NULL;
    size_t len = 0;
    *out = bb_writer_take(&w, &text, &len) ? bb_value_bytes(&BB_TYPE_BYTES, text, len) : NULL;
    free(text);
    return *out ? BB_OK : oom(m, err);
}

static int export_onnx(const onnx_model *m, bb_value **out, bb_error *err)
{
    uint8_t *bytes = NULL;
    size_t len = 0;
    int rc = onnx_export(m->plan, m->params, m->opset, &bytes, &len, err);
    if (rc)
        return rc;
    *out = bb_value_bytes(&BB_TYPE_BYTES, bytes, len);
    free(bytes);
    return *out ? BB_OK : oom(m, err);
}

/* The ops that change the model; each answers a CommandId. */
static int change(onnx_model *m, onnx_op op, const bb_value *a, bb_error *err)
{
    int rc;
    const ad_plan *p = m->plan;
    switch (op) {
    case OP_LOAD_PARAMETERS:
        if ((rc = check_flat(m, "LoadParameters", a, false, err)))
            return rc;
        memcpy(m->params, bb_tensor_f32(a), p->n_floats * sizeof(float));
        memcpy(m->center, m->params, p->n_floats * sizeof(float));
        bbp_optim_reset(&m->opt, p->n_floats);
        ad_session_clear(m->tr.sess);
        return BB_OK;
    case OP_APPLY_DELTA:
        if ((rc = check_flat(m, "ApplyDelta", a, false, err)))
            return rc;
        for (size_t i = 0; i < p->n_floats; i++)
            m->params[i] += bb_tensor_f32(a)[i];
        return BB_OK;
    case OP_STEP:
        return step(m, a, err);
    default:
        return backward(m, a, err);
    }
}

/* Every op that completes inline. out[0..] receive new references. */
static int run_sync(void *model, int op_id, const bb_node *node, bb_value *const *in,
                    uint32_t n_in, bb_value **out, uint32_t n_out, bb_error *err)
{
    (void)node; /* no op reads attributes */
    onnx_model *m = model;
    onnx_op op = (onnx_op)op_id;
    const bb_value *a = n_in > 0 ? in[0] : NULL, *b = n_in > 1 ? in[1] : NULL;
    int rc;
    switch (op) {
    case OP_PARAMS:
    case OP_PARAMS_ON:
        return (out[0] = flat_copy(m, m->params)) ? BB_OK : oom(m, err);
    case OP_PARAMS_DIGEST:
        out[0] = bb_value_u64(&BB_TYPE_U64, bbp_params_digest(m->params, m->plan->n_floats));
        return out[0] ? BB_OK : oom(m, err);
    case OP_FORWARD:
        return forward(m, a, out, err);
    case OP_EVALUATE:
        return evaluate(m, a, b, out, n_out, err);
    case OP_GRADIENTS:
        return gradients(m, a, b, out, n_out, err);
    case OP_EXPORT_ONNX:
        return export_onnx(m, out, err);
    case OP_PARAM_NAMES:
        return param_names(m, out, err);
    case OP_LOAD_PARAMETERS:
    case OP_APPLY_DELTA:
    case OP_STEP:
    case OP_BACKWARD:
        if ((rc = change(m, op, a, err)))
            return rc;
        ad_session_params_changed(m->tr.sess); /* Evaluate packs the new weights */
        return (out[0] = bb_value_u64(&BB_TYPE_COMMAND_ID, ++m->version)) ? BB_OK : oom(m, err);
    default:
        return bb_error_set(err, BB_EUNSUPPORTED, "%s: op %d is not synchronous", m->who,
                            (int)op);
    }
}

/* ---- dispatch, and the queue behind a running Train ------------------------------------------------ */

static const char *const OP_NAMES[N_ONNX_OPS] = {
    [OP_APPLY_DELTA] = "ApplyDelta",   [OP_BACKWARD] = "Backward",
    [OP_EVALUATE] = "Evaluate",        [OP_EVALUATE_METRICS] = "EvaluateMetrics",
    [OP_FORWARD] = "Forward",          [OP_LOAD_PARAMETERS] = "LoadParameters",
    [OP_PARAMS] = "Params",            [OP_STEP] = "Step",
    [OP_TRAIN] = "Train",              [OP_GRADIENTS] = "Gradients",
    [OP_PARAMS_ON] = "ParamsOn",       [OP_PARAMS_DIGEST] = "ParamsDigest",
    [OP_EXPORT_ONNX] = "ExportOnnx",   [OP_PARAM_NAMES] = "ParamNames",
};

/* Forward changes the model too: a training forward moves the running
 * statistics, and Backward needs its tape. */
static bool changes_model(int op)
{
    return op == OP_APPLY_DELTA || op == OP_BACKWARD || op == OP_LOAD_PARAMETERS ||
           op == OP_STEP || op == OP_TRAIN || op == OP_FORWARD;
}

static const bbp_model_ops ONNX_OPS = {
    .names = OP_NAMES,
    .n_ops = N_ONNX_OPS,
    .op_train = OP_TRAIN,
    .op_evaluate_metrics = OP_EVALUATE_METRICS,
    .max_outputs = 2,
    .changes_model = changes_model,
    .run_sync = run_sync,
    .start_train = onnx_start_train,
    .start_eval = onnx_start_eval,
};

static bbp_model_state model_state(onnx_model *m)
{
    return (bbp_model_state){m, m->who, &m->ctx, m->epochs_cfg, &m->jobs, &m->queue};
}

void onnx_drain(void *model)
{
    bbp_model_state st = model_state(model);
    bbp_model_drain(&ONNX_OPS, &st);
}

static bb_dispatch_result onnx_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                        bb_value **outputs, bb_error *err)
{
    bbp_model_state st = model_state(inst);
    return bbp_model_dispatch(&ONNX_OPS, &st, ctx, call, outputs, err);
}

/* ---- snapshot --------------------------------------------------------------------------------------
 * "BBOX" u32 version=1, u64 n_floats, u32 optimizer, u64 adam steps, u64 changes,
 * params[n], center[n], first moment[n], [Adam / AdamW: second moment[n]]  (f32) */

#define MAGIC "BBOX"
#define SNAP_VERSION 1u

static int onnx_snapshot(void *inst, uint8_t **out, size_t *out_len, bb_error *err)
{
    const onnx_model *m = inst;
    size_t bytes = m->plan->n_floats * sizeof(float);
    bb_writer w = {0};
    bbp_snapshot_head_put(&w, MAGIC, SNAP_VERSION, m->plan->n_floats, &m->opt, m->version);
    bb_writer_put(&w, m->params, bytes);
    bb_writer_put(&w, m->center, bytes);
    bbp_optim_put_m(&m->opt, &w, bytes);
    if (m->opt.v)
        bb_writer_put(&w, m->opt.v, bytes);
    if (!bb_writer_take(&w, out, out_len))
        return oom(m, err);
    return BB_OK;
}

static int onnx_restore(void *inst, const uint8_t *data, size_t len, bb_error *err)
{
    onnx_model *m = inst;
    bb_reader r;
    bb_reader_init(&r, data, len);
    uint32_t version;
    uint64_t t = 0, changes = 0;
    size_t bytes = m->plan->n_floats * sizeof(float);
    int rc = bbp_snapshot_head_get(&r, MAGIC, SNAP_VERSION, m->plan->n_floats, &m->opt, m->who,
                                   &version, &t, &changes, err);
    if (rc)
        return rc;
    size_t want = bytes * (m->opt.v ? 4 : 3);
    if (bb_reader_left(&r) != want)
        return bb_error_set(err, BB_EDECODE, "%s: the snapshot has %zu state bytes, not %zu",
                            m->who, bb_reader_left(&r), want);
    bb_reader_get(&r, m->params, bytes);
    bb_reader_get(&r, m->center, bytes);
    const uint8_t *moment;
    bb_reader_view(&r, bytes, &moment);
    if (m->opt.m) /* plain SGD keeps none: the zeros it wrote are dropped */
        memcpy(m->opt.m, moment, bytes);
    if (m->opt.v)
        bb_reader_get(&r, m->opt.v, bytes);
    m->opt.t = t;
    m->version = changes;
    ad_session_clear(m->tr.sess);
    ad_session_params_changed(m->tr.sess);
    return BB_OK;
}

/* ---- declarations ------------------------------------------------------------------------------ */

static const bb_op_decl EXT_OPS[] = {
    BBP_MODEL_EXT_OPS,
    BBP_OPD("ExportOnnx", BBP_IN_TRIGGER, BBP_OUT_BYTES,
            "the model with its current parameters as a plain ONNX ModelProto (IR 8)"),
    BBP_OPD("ParamNames", BBP_IN_TRIGGER, BBP_OUT_BYTES,
            "JSON: each initializer of the flat vector with its offset, shape and whether it "
            "is trained"),
};
static const bb_opset_decl OPSETS[] = {
    {"ai.bytesandbrains.role.model", 1, BBP_MODEL_ROLE_OPS, BBP_COUNT(BBP_MODEL_ROLE_OPS)},
    {EXT_DOMAIN, 1, EXT_OPS, BBP_COUNT(EXT_OPS)},
};
static const bb_dependency_decl DEPS[] = {{BB_ROLE_DATA_SOURCE, "data"}};

static const bb_component_type ONNX_MODEL = {
    BBP_TYPE_ABI,
    .type_name = ONNX_NAME,
    .role = BB_ROLE_MODEL,
    .doc = "any ONNX inference graph, trained by reverse-mode autodiff (softmax cross-entropy "
           "/ MSE; SGD with momentum / Adam / AdamW; FedProx); trains on its \"data\" source "
           "off the engine thread",
    .opsets = OPSETS,
    .n_opsets = BBP_COUNT(OPSETS),
    .deps = DEPS,
    .n_deps = BBP_COUNT(DEPS),
    .config = CONFIG,
    .n_config = BBP_COUNT(CONFIG),
    .create = onnx_create,
    .destroy = onnx_destroy,
    .dispatch = onnx_dispatch,
    .snapshot = onnx_snapshot,
    .restore = onnx_restore,
};

static const bb_component_type *const TYPES[] = {&ONNX_MODEL};

BBP_PLUGIN_ENTRY("onnx", TYPES)
