/*
 * agg.c — the agg plugin: seven Aggregator types over f32 tensors.
 *
 *   agg::FedAvg            mean weighted by num_samples (McMahan et al.);
 *                          Aggregate's metadata is the summed num_samples, so
 *                          a parent FedAvg weighs this layer's result by it
 *                          (hierarchical aggregation, ROLES.md Part 3)
 *   agg::WeightAggregator  plain mean
 *   agg::TrimmedMean       coordinate-wise mean after cutting the k lowest
 *                          and k highest values (Yin et al. 2018)
 *   agg::Median            coordinate-wise median
 *   agg::FedAdam, agg::FedYogi, agg::FedAdagrad
 *                          server optimizers (Reddi et al. 2021): FedAvg's
 *                          mean as a pseudo-gradient for an adaptive step
 *                          of the global model (server_opt.c)
 *
 * Ops (ai.bytesandbrains.role.aggregator):
 *   Contribute(contribution, metadata?) -> cmd   (count in the round)
 *   Aggregate(trigger) -> (result, metadata: U64 summed num_samples)
 *   CurrentTensor(trigger) -> tensor  (the current round reduced without
 *       closing it; the last result when the round is empty)
 * bb-agg.Aggregator.atomic:
 *   Rounds(trigger) -> rounds U64   (Aggregates so far, snapshotted: the
 *       round number a federated server reports, which survives a restart)
 *   SetModel(params) -> trigger   the global model the round's clients
 *       started from: what a server optimizer steps from (the averaging
 *       aggregators accept and ignore it, so one program serves every type)
 *   SetParamNames(names) -> trigger   the model's ParamNames (JSON Bytes):
 *       a server optimizer leaves the coordinates not trained (running
 *       statistics) at the round's mean (server_opt.c); ignored likewise
 *
 * A round runs from one Aggregate to the next. A sender that contributes
 * twice in a round replaces its earlier contribution. Everything runs
 * inline on the engine thread: Contribute only takes references, and
 * Aggregate is one pass over memory (reduce.c).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg.h"
#include "plugins/common/plugin_config.h"
#include "plugins/common/plugin_type.h"

void agg_warn(const agg *a, const char *msg)
{
    if (a->ctx && a->ctx->api && a->ctx->api->log)
        a->ctx->api->log(a->ctx, BB_LOG_WARN, msg);
}

/* ---- configuration ---------------------------------------------------------- */

#define COMMON_CONFIG                                                                       \
    {"max_contributions", "int", "65536",                                                   \
     "most contributions held in one round (a Contribute beyond it fails)"},                \
    {"on_bad_contribution", "string", "\"fail\"",                                           \
     "\"fail\": a malformed or mis-shaped contribution fails the Contribute naming its "     \
     "sender; \"skip\": it is logged and left out (one faulty client cannot sink a round)"},   \
    {"threads", "int", "0",                                                                 \
     "threads a reduction of a large model is split over (by element range; the result is " \
     "the same with any count); 0: the online CPUs, at most 8"}

static const bb_config_decl PLAIN_CONFIG[] = {COMMON_CONFIG};
static const bb_config_decl TRIMMED_CONFIG[] = {
    COMMON_CONFIG,
    {"trim", "float", "0.1",
     "fraction of contributions cut at EACH end per coordinate: k = floor(trim * n)"},
    {"trim_count", "int", "null", "cut exactly this many at each end (overrides trim)"},
};

/* server_lr's default by type: measured on the federated example (digits,
 * 10 clients, Dirichlet 0.3, three seeds; scripts/fedopt-compare, figures in
 * docs/DECISIONS.md): FedAdam and FedYogi do best near 0.1, FedAdagrad,
 * whose v only grows, near 0.3. */
#define SERVER_LR_BETA1(lr_default)                                                         \
    {"server_lr", "float", lr_default,                                                      \
     "the server learning rate (eta): each coordinate of the global model moves by at "     \
     "most about this much per round"},                                                     \
    {"beta1", "float", "0.9", "decay of the pseudo-gradient's first moment (momentum)"}
#define SERVER_TAU                                                                          \
    {"tau", "float", "0.001",                                                               \
     "adaptivity: added to sqrt(v) in the step's denominator; v starts at tau^2"}

static const bb_config_decl ADAPTIVE_CONFIG[] = {
    COMMON_CONFIG, SERVER_LR_BETA1("0.1"),
    {"beta2", "float", "0.99", "decay of the pseudo-gradient's second moment"},
    SERVER_TAU,
};
static const bb_config_decl ADAGRAD_CONFIG[] = {COMMON_CONFIG, SERVER_LR_BETA1("0.3"),
                                                SERVER_TAU};

static int read_server_config(agg *a, const bbp_config *cfg, bb_error *err)
{
    int rc = bbp_config_double(cfg, "server_lr", 1e-12, 1e3, &a->srv.lr, err);
    if (!rc)
        rc = bbp_config_double(cfg, "beta1", 0, 0.999999, &a->srv.beta1, err);
    if (!rc && bbp_config_decl(cfg, "beta2"))
        rc = bbp_config_double(cfg, "beta2", 0, 0.999999999, &a->srv.beta2, err);
    if (!rc)
        rc = bbp_config_double(cfg, "tau", 1e-12, 1e3, &a->srv.tau, err);
    return rc;
}

static int agg_create_kind(agg_kind kind, const char *name, const bb_config_decl *decls,
                           uint32_t n_decls, const bb_create_args *args, void **out, bb_error *err)
{
    bbp_config cfg;
    int rc = bbp_config_load(&cfg, args, name, decls, n_decls, err);
    if (rc)
        return rc;
    agg *a = calloc(1, sizeof *a);
    if (!a) {
        bbp_config_free(&cfg);
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", name);
    }
    a->kind = kind;
    a->type_name = name;
    a->ctx = args->ctx;
    a->trim_count = -1;
    int64_t maxc = 0, threads = 0;
    int bad = 0;
    static const char *const BAD[] = {"fail", "skip"};
    rc = bbp_config_int(&cfg, "max_contributions", 1, 1 << 24, &maxc, err);
    if (!rc)
        rc = bbp_config_enum(&cfg, "on_bad_contribution", BAD, 2, &bad, err);
    if (!rc)
        rc = bbp_config_int(&cfg, "threads", 0, AGG_MAX_THREADS, &threads, err);
    if (!rc && kind == AGG_TRIMMED) {
        rc = bbp_config_double(&cfg, "trim", 0.0, 0.4999, &a->trim, err);
        bool has = false;
        double tc = 0;
        if (!rc)
            rc = bbp_config_number(&cfg, "trim_count", true, 0, 1 << 24, &tc, &has, err);
        if (!rc && has)
            a->trim_count = (int64_t)tc;
    }
    if (!rc && agg_is_server_optimizer(kind))
        rc = read_server_config(a, &cfg, err);
    bbp_config_free(&cfg);
    if (rc) {
        free(a);
        return rc;
    }
    a->max_contributions = (size_t)maxc;
    a->skip_bad = bad == 1;
    a->threads = threads ? (unsigned)threads : agg_threads_auto();
    *out = a;
    return BB_OK;
}

#define CREATE_FN(fn, kind, name, decls)                                                  \
    static int fn(const bb_create_args *args, void **out, bb_error *err)                  \
    {                                                                                     \
        return agg_create_kind(kind, name, decls, sizeof decls / sizeof *decls, args, out, \
                               err);                                                      \
    }
CREATE_FN(create_fedavg, AGG_FEDAVG, "agg::FedAvg", PLAIN_CONFIG)
CREATE_FN(create_mean, AGG_MEAN, "agg::WeightAggregator", PLAIN_CONFIG)
CREATE_FN(create_trimmed, AGG_TRIMMED, "agg::TrimmedMean", TRIMMED_CONFIG)
CREATE_FN(create_median, AGG_MEDIAN, "agg::Median", PLAIN_CONFIG)
CREATE_FN(create_fedadam, AGG_FEDADAM, "agg::FedAdam", ADAPTIVE_CONFIG)
CREATE_FN(create_fedyogi, AGG_FEDYOGI, "agg::FedYogi", ADAPTIVE_CONFIG)
CREATE_FN(create_fedadagrad, AGG_FEDADAGRAD, "agg::FedAdagrad", ADAGRAD_CONFIG)

static void agg_destroy(void *inst)
{
    agg *a = inst;
    agg_round_clear(a);
    free(a->v);
    bb_value_unref(a->last);
    agg_fold_free(&a->fold);
    agg_server_free(&a->srv);
    agg_pool_free(a->pool);
    free(a);
}

/* ---- Aggregate / CurrentTensor ------------------------------------------------------ */

/* A server optimizer checks its global model before the round is reduced
 * (the reduction may recycle the last result's memory). */
static int prepare_server_step(agg *a, bb_error *err)
{
    return agg_is_server_optimizer(a->kind) && agg_round_count(a) ? agg_server_prepare(a, err)
                                                                   : BB_OK;
}

static int aggregate(agg *a, const bb_dispatch_call *call, bb_value **outputs, bb_error *err)
{
    bb_value *t;
    uint64_t total;
    int rc = prepare_server_step(a, err);
    if (!rc)
        rc = agg_reduce_round(a, true, &t, &total, err);
    if (rc)
        return rc;
    bb_value *meta = call->n_outputs > 1 ? bb_value_u64(&BB_TYPE_U64, total) : NULL;
    if (call->n_outputs > 1 && !meta) {
        bb_value_unref(t);
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", a->type_name);
    }
    if (agg_is_server_optimizer(a->kind))
        agg_server_step(a, bb_tensor_f32(t), true);
    bb_value_unref(a->last);
    a->last = bb_value_ref(t);
    a->last_samples = total;
    a->rounds++;
    agg_server_advance(a, t);
    agg_round_clear(a);
    outputs[0] = t;
    if (meta)
        outputs[1] = meta;
    return BB_OK;
}

static int current_tensor(agg *a, bb_value **out, bb_error *err)
{
    if (agg_round_count(a) == 0) {
        if (!a->last)
            return bb_error_set(err, BB_ESTATE, "%s: no contribution and no result yet",
                                a->type_name);
        *out = bb_value_ref(a->last);
        return BB_OK;
    }
    uint64_t total;
    /* agg_result_new may recycle last's memory: keep a second reference so
     * the previous result stays intact while the round is still open. */
    bb_value *keep = bb_value_ref(a->last);
    int rc = prepare_server_step(a, err);
    if (!rc)
        rc = agg_reduce_round(a, false, out, &total, err);
    bb_value_unref(keep);
    if (!rc && agg_is_server_optimizer(a->kind))
        agg_server_step(a, bb_tensor_f32(*out), false);
    return rc;
}

/* ---- dispatch --------------------------------------------------------------------- */

enum { OP_AGGREGATE, OP_CONTRIBUTE, OP_CURRENT_TENSOR, N_OPS };
enum { EXT_OP_ROUNDS, EXT_OP_SET_MODEL, EXT_OP_SET_PARAM_NAMES, N_EXT_OPS };
#define EXT_DOMAIN "bb-agg.Aggregator.atomic"

static bb_dispatch_result agg_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                       bb_value **outputs, bb_error *err)
{
    agg *a = inst;
    if (ctx)
        a->ctx = ctx;
    const bb_value *in0 = call->n_inputs > 0 ? call->inputs[0] : NULL;
    const bb_value *in1 = call->n_inputs > 1 ? call->inputs[1] : NULL;
    int rc;
    bool ext = call->domain && strcmp(call->domain, EXT_DOMAIN) == 0;
    if (call->n_outputs < 1)
        rc = bb_error_set(err, BB_EINVAL, "%s: %s needs an output", a->type_name, call->op_type);
    else if (ext && call->op_index == EXT_OP_ROUNDS)
        rc = (outputs[0] = bb_value_u64(&BB_TYPE_U64, a->rounds))
                 ? BB_OK
                 : bb_error_set(err, BB_ENOMEM, "%s: out of memory", a->type_name);
    else if (ext && (call->op_index == EXT_OP_SET_MODEL ||
                     call->op_index == EXT_OP_SET_PARAM_NAMES)) {
        rc = call->op_index == EXT_OP_SET_MODEL ? agg_server_set_model(a, in0, err)
                                                 : agg_server_set_param_names(a, in0, err);
        if (!rc && !(outputs[0] = bb_value_trigger()))
            rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory", a->type_name);
    }
    else if (ext)
        rc = bb_error_set(err, BB_EUNSUPPORTED, "%s: no op %s", a->type_name, call->op_type);
    else if (call->op_index == OP_CONTRIBUTE)
        rc = agg_contribute(a, in0, in1, &outputs[0], err);
    else if (call->op_index == OP_AGGREGATE)
        rc = aggregate(a, call, outputs, err);
    else if (call->op_index == OP_CURRENT_TENSOR)
        rc = current_tensor(a, &outputs[0], err);
    else
        rc = bb_error_set(err, BB_EUNSUPPORTED, "%s: no op %s", a->type_name, call->op_type);
    return rc == BB_OK ? BB_DISPATCH_NOW_OK : BB_DISPATCH_NOW_ERR;
}

/* A contribution folded piece by piece as the engine receives it (ABI
 * 2.3, bb_fold_piece): BEGIN checks it like a tagged Contribute, DATA
 * folds element ranges, END counts it, ABORT keeps what came. */
static int agg_fold_piece(void *inst, bb_ctx *ctx, const bb_fold_piece *p, bb_error *err)
{
    agg *a = inst;
    if (ctx)
        a->ctx = ctx;
    switch (p->step) {
    case BB_FOLD_BEGIN:
        return agg_contribute_begin(a, p, err);
    case BB_FOLD_DATA:
        return agg_fold_part_data(a, p->stream, p->offset, p->count, p->data, err);
    case BB_FOLD_END:
        return agg_fold_part_end(a, p->stream, err);
    case BB_FOLD_ABORT:
        agg_fold_part_cut(a, p->stream);
        return BB_OK;
    }
    return bb_error_set(err, BB_EINVAL, "%s: unknown fold step %d", a->type_name, (int)p->step);
}

/* ---- declarations ------------------------------------------------------------------ */

static const bb_port_decl CONTRIBUTE_IN[] = {
    {.name = "contribution", .type = &BB_TYPE_ANY},
    {.name = "metadata", .type = &BB_TYPE_ANY, .optional = true},
};
static const bb_port_decl TRIGGER_IN[] = {{.name = "trigger", .type = &BB_TYPE_ANY}};
static const bb_port_decl CMD_OUT[] = {{.name = "cmd", .type = &BB_TYPE_COMMAND_ID}};
static const bb_port_decl AGGREGATE_OUT[] = {
    {.name = "result", .type = &BB_TYPE_TENSOR_F32},
    {.name = "metadata", .type = &BB_TYPE_U64, .optional = true},
};
static const bb_port_decl TENSOR_OUT[] = {{.name = "tensor", .type = &BB_TYPE_TENSOR_F32}};

static const bb_op_decl OPS[N_OPS] = {
    [OP_AGGREGATE] = {"Aggregate", TRIGGER_IN, 1, AGGREGATE_OUT, 2,
                      "reduce the round; result and summed num_samples; starts the next round"},
    [OP_CONTRIBUTE] = {"Contribute", CONTRIBUTE_IN, 2, CMD_OUT, 1,
                       "add an f32 tensor (+ num_samples / sender metadata), a Composite(params, "
                       "num_samples) or a ResponseBatch of those; a sender replaces its earlier "
                       "contribution of the round; cmd = contributions in the round"},
    [OP_CURRENT_TENSOR] = {"CurrentTensor", TRIGGER_IN, 1, TENSOR_OUT, 1,
                           "the open round reduced without closing it, else the last result"},
};

static const bb_port_decl ROUNDS_OUT[] = {{.name = "rounds", .type = &BB_TYPE_U64}};
static const bb_port_decl MODEL_IN[] = {{.name = "params", .type = &BB_TYPE_TENSOR_F32}};
static const bb_port_decl NAMES_IN[] = {{.name = "names", .type = &BB_TYPE_BYTES}};
static const bb_port_decl TRIGGER_OUT[] = {{.name = "trigger", .type = &BB_TYPE_TRIGGER}};
static const bb_op_decl EXT_OPS[N_EXT_OPS] = {
    [EXT_OP_ROUNDS] = {"Rounds", TRIGGER_IN, 1, ROUNDS_OUT, 1,
                       "Aggregates so far (kept in the snapshot): the number of the round "
                       "just aggregated"},
    [EXT_OP_SET_MODEL] = {"SetModel", MODEL_IN, 1, TRIGGER_OUT, 1,
                          "the global model the round's clients started from: what a server "
                          "optimizer steps from (each result takes its place after an "
                          "Aggregate); the averaging aggregators ignore it"},
    [EXT_OP_SET_PARAM_NAMES] = {"SetParamNames", NAMES_IN, 1, TRIGGER_OUT, 1,
                                "the model's ParamNames (JSON): a server optimizer leaves the "
                                "coordinates not trained (BatchNormalization's running "
                                "statistics) at the round's mean; until the next call; the "
                                "averaging aggregators ignore it"},
};

static const bb_opset_decl OPSETS[] = {{"ai.bytesandbrains.role.aggregator", 1, OPS, N_OPS},
                                       {EXT_DOMAIN, 1, EXT_OPS, N_EXT_OPS}};

#define AGG_TYPE(sym, name, docstr, createfn, decls)                                   \
    static const bb_component_type sym = {                                             \
        BBP_TYPE_ABI,                                                                  \
        .type_name = name,                                                             \
        .role = BB_ROLE_AGGREGATOR,                                                    \
        .doc = docstr,                                                                 \
        .opsets = OPSETS,                                                              \
        .n_opsets = BBP_COUNT(OPSETS),                                                 \
        .config = decls,                                                               \
        .n_config = sizeof decls / sizeof *decls,                                      \
        .create = createfn,                                                            \
        .destroy = agg_destroy,                                                        \
        .dispatch = agg_dispatch,                                                      \
        .snapshot = agg_snapshot,                                                      \
        .restore = agg_restore,                                                        \
        .fold_piece = agg_fold_piece,                                                  \
    }

AGG_TYPE(FEDAVG, "agg::FedAvg",
         "federated averaging: the mean of the round's tensors weighted by num_samples; "
         "metadata = summed num_samples, so FedAvg layers compose",
         create_fedavg, PLAIN_CONFIG);
AGG_TYPE(MEAN, "agg::WeightAggregator", "the plain mean of the round's tensors", create_mean,
         PLAIN_CONFIG);
AGG_TYPE(TRIMMED, "agg::TrimmedMean",
         "coordinate-wise trimmed mean: robust to a minority of faulty or malicious senders",
         create_trimmed, TRIMMED_CONFIG);
AGG_TYPE(MEDIAN, "agg::Median",
         "coordinate-wise median: robust while fewer than half the senders are faulty",
         create_median, PLAIN_CONFIG);

AGG_TYPE(FEDADAM, "agg::FedAdam",
         "server optimizer FedAdam (Reddi et al. 2021): the num_samples-weighted mean minus the "
         "global model (SetModel) is a pseudo-gradient for an Adam step of the global model",
         create_fedadam, ADAPTIVE_CONFIG);
AGG_TYPE(FEDYOGI, "agg::FedYogi",
         "server optimizer FedYogi (Reddi et al. 2021): like FedAdam, with Yogi's additive "
         "second moment, which grows less after a large pseudo-gradient",
         create_fedyogi, ADAPTIVE_CONFIG);
AGG_TYPE(FEDADAGRAD, "agg::FedAdagrad",
         "server optimizer FedAdagrad (Reddi et al. 2021): like FedAdam, with Adagrad's summed "
         "second moment",
         create_fedadagrad, ADAGRAD_CONFIG);

static const bb_component_type *const TYPES[] = {&FEDAVG,  &MEAN,    &TRIMMED,   &MEDIAN,
                                                 &FEDADAM, &FEDYOGI, &FEDADAGRAD};

BBP_PLUGIN_ENTRY("agg", TYPES)
