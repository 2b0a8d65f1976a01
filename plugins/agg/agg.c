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

void agg_round_clear(agg *a)
{
    for (size_t i = 0; i < a->n; i++)
        bb_value_unref(a->v[i].tensor);
    a->n = 0;
    a->ndim = 0;
    a->numel = 0;
}

static void agg_destroy(void *inst)
{
    agg *a = inst;
    agg_round_clear(a);
    free(a->v);
    bb_value_unref(a->last);
    agg_server_free(&a->srv);
    agg_pool_free(a->pool);
    free(a);
}

/* ---- Contribute --------------------------------------------------------------- */

static bool same_shape(uint32_t nd, const int64_t *d, const bb_value *t)
{
    return t->u.tensor.ndim == nd && memcmp(t->u.tensor.dims, d, nd * sizeof *d) == 0;
}

static agg_contribution *find_peer(agg *a, const bb_value *peer)
{
    if (!peer)
        return NULL;
    bb_peerid id;
    if (bb_peerid_from_bytes(peer->u.bytes.data, peer->u.bytes.len, &id, NULL) != BB_OK)
        return NULL;
    for (size_t i = 0; i < a->n; i++)
        if (a->v[i].has_peer && bb_peerid_equal(&a->v[i].peer, &id))
            return &a->v[i];
    return NULL;
}

/* The items' shapes against the round's (the first item fixes an empty
 * round's). A mismatch fails the whole Contribute, or drops the item. */
static int check_shapes(agg *a, agg_item *it, size_t n, uint32_t *nd, int64_t *dims,
                        bb_error *err)
{
    bool have = a->n > 0;
    *nd = a->ndim;
    memcpy(dims, a->dims, sizeof a->dims);
    for (size_t i = 0; i < n; i++) {
        if (!it[i].tensor)
            continue;
        const bb_tensor_view *t = &it[i].tensor->u.tensor;
        if (bb_tensor_numel(it[i].tensor) == SIZE_MAX)
            return bb_error_set(err, BB_EINVAL, "%s: contribution has an invalid shape",
                                a->type_name);
        if (!have) {
            *nd = t->ndim;
            memcpy(dims, t->dims, sizeof t->dims);
            have = true;
            continue;
        }
        if (same_shape(*nd, dims, it[i].tensor))
            continue;
        char who[96], got[160], want[160];
        agg_describe_source(it[i].peer, who, sizeof who);
        agg_format_shape(t->ndim, t->dims, got, sizeof got);
        agg_format_shape(*nd, dims, want, sizeof want);
        bb_error_set(err, BB_ETYPE,
                     "%s: contribution from %s has shape %s, but this round's contributions "
                     "have shape %s",
                     a->type_name, who, got, want);
        if (!a->skip_bad)
            return err->code;
        agg_warn(a, err->msg);
        it[i].tensor = NULL;
    }
    return BB_OK;
}

static int contribute(agg *a, const bb_value *contribution, const bb_value *metadata,
                      bb_value **out, bb_error *err)
{
    agg_item *it;
    size_t n;
    int rc = agg_parse_contribute(a, contribution, metadata, &it, &n, err);
    if (rc)
        return rc;
    uint32_t nd;
    int64_t dims[BB_MAX_DIMS];
    rc = check_shapes(a, it, n, &nd, dims, err);
    size_t fresh = 0; /* items that add a contribution (not a replacement) */
    for (size_t i = 0; !rc && i < n; i++) {
        if (!it[i].tensor || find_peer(a, it[i].peer))
            continue;
        bool again = false;
        for (size_t j = 0; j < i && !again && it[i].peer; j++)
            again = it[j].tensor && it[j].peer && bb_value_equal(it[j].peer, it[i].peer);
        fresh += !again;
    }
    if (!rc && a->n + fresh > a->max_contributions)
        rc = bb_error_set(err, BB_EFULL, "%s: the round already holds %zu contributions "
                          "(max_contributions %zu)", a->type_name, a->n, a->max_contributions);
    if (!rc && a->n + fresh > a->cap) {
        size_t cap = a->cap ? a->cap : 8;
        while (cap < a->n + fresh)
            cap *= 2;
        agg_contribution *v = realloc(a->v, cap * sizeof *v);
        if (!v)
            rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory", a->type_name);
        else {
            a->v = v;
            a->cap = cap;
        }
    }
    bb_value *cmd = NULL;
    if (!rc && !(cmd = bb_value_u64(&BB_TYPE_COMMAND_ID, a->n + fresh)))
        rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory", a->type_name);
    if (rc) {
        free(it);
        return rc;
    }
    /* Nothing can fail from here on: the Contribute applies whole. */
    for (size_t i = 0; i < n; i++) {
        if (!it[i].tensor)
            continue;
        agg_contribution *c = find_peer(a, it[i].peer);
        if (c) { /* same sender, same round: replace */
            bb_value_unref(c->tensor);
        } else {
            c = &a->v[a->n++];
            memset(c, 0, sizeof *c);
            c->has_peer = it[i].peer &&
                          bb_peerid_from_bytes(it[i].peer->u.bytes.data, it[i].peer->u.bytes.len,
                                               &c->peer, NULL) == BB_OK;
        }
        c->tensor = bb_value_ref((bb_value *)it[i].tensor);
        c->num_samples = it[i].num_samples;
    }
    if (a->n) {
        a->ndim = nd;
        memcpy(a->dims, dims, sizeof a->dims);
        a->numel = bb_shape_numel(nd, dims);
    }
    free(it);
    *out = cmd; /* a->n + fresh == a->n now */
    return BB_OK;
}

/* ---- Aggregate ------------------------------------------------------------------ */

static void free_aligned(void *ctx, uint8_t *data, size_t len)
{
    (void)ctx;
    (void)len;
    free(data);
}

/* A result tensor of the round's shape. Reuses the last result's memory
 * when nobody else holds it (saves faulting in fresh pages every round). */
static bb_value *new_result(agg *a)
{
    size_t bytes = a->numel * sizeof(float);
    bb_value *l = a->last;
    if (l && atomic_load(&l->refs) == 1 && l->u.tensor.buf &&
        atomic_load(&l->u.tensor.buf->refs) == 1 && l->u.tensor.nbytes == bytes) {
        bb_value *t = bb_value_tensor_wrap(BB_DT_FLOAT, a->ndim, a->dims, l->u.tensor.buf,
                                           l->u.tensor.data);
        if (t) {
            bb_value_unref(l);
            a->last = NULL;
            return t;
        }
    }
    size_t alloc = (bytes + 63) & ~(size_t)63;
    uint8_t *data = aligned_alloc(64, alloc ? alloc : 64);
    if (!data)
        return NULL;
    bb_buffer *buf = bb_buffer_wrap(data, bytes, free_aligned, NULL);
    if (!buf) {
        free(data);
        return NULL;
    }
    bb_value *t = bb_value_tensor_wrap(BB_DT_FLOAT, a->ndim, a->dims, buf, data);
    bb_buffer_unref(buf);
    return t;
}

/* After a non-finite weighted sum at index j: name the sender. */
static int non_finite_error(const agg *a, size_t j, bb_error *err)
{
    for (size_t i = 0; i < a->n; i++) {
        float x = bb_tensor_f32(a->v[i].tensor)[j];
        if (x != x || x - x != 0.0f) {
            char who[96];
            bb_value *peer = NULL;
            if (a->v[i].has_peer)
                peer = bb_value_bytes(&BB_TYPE_PEER_ID, a->v[i].peer.bytes, a->v[i].peer.len);
            agg_describe_source(peer, who, sizeof who);
            bb_value_unref(peer);
            return bb_error_set(err, BB_EINVAL,
                                "%s: contribution from %s has a non-finite value (%g) at index "
                                "%zu",
                                a->type_name, who, (double)x, j);
        }
    }
    return bb_error_set(err, BB_EINVAL, "%s: the weighted sum overflows at index %zu",
                        a->type_name, j);
}

/* Reduce the current round into a new tensor; *samples = summed weights. */
static int reduce_round(agg *a, bb_value **out, uint64_t *samples, bb_error *err)
{
    if (a->n == 0)
        return bb_error_set(err, BB_ESTATE, "%s: Aggregate with no contribution in this round",
                            a->type_name);
    uint64_t total = 0;
    for (size_t i = 0; i < a->n; i++)
        total += a->v[i].num_samples;
    size_t k = 0;
    if (a->kind == AGG_TRIMMED) {
        k = a->trim_count >= 0 ? (size_t)a->trim_count : (size_t)(a->trim * (double)a->n);
        if (2 * k >= a->n)
            return bb_error_set(err, BB_EINVAL,
                                "%s: trimming %zu at each end of %zu contributions leaves none",
                                a->type_name, k, a->n);
    }
    bool weighted = a->kind == AGG_FEDAVG || agg_is_server_optimizer(a->kind);
    if (weighted && total == 0)
        return bb_error_set(err, BB_EINVAL,
                            "%s: every contribution of the round has num_samples 0",
                            a->type_name);
    const float **x = malloc(a->n * sizeof *x);
    float *w = malloc(a->n * sizeof *w);
    bb_value *t = x && w ? new_result(a) : NULL;
    int rc = BB_OK;
    if (!t) {
        rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory", a->type_name);
        goto done;
    }
    for (size_t i = 0; i < a->n; i++) {
        x[i] = bb_tensor_f32(a->v[i].tensor);
        w[i] = weighted ? (float)((double)a->v[i].num_samples / (double)total)
                        : 1.0f / (float)a->n;
    }
    if (weighted || a->kind == AGG_MEAN) {
        size_t bad = agg_reduce_weighted(agg_par_of(a), x, w, a->n, a->numel,
                                         bb_tensor_f32(t), false);
        if (bad != SIZE_MAX)
            rc = non_finite_error(a, bad, err);
    } else if (agg_reduce_sorted(agg_par_of(a), a->kind, x, a->n, k, a->numel,
                                      bb_tensor_f32(t)) != BB_OK) {
        rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory", a->type_name);
    }
done:
    free(x);
    free(w);
    if (rc) {
        bb_value_unref(t);
        return rc;
    }
    *out = t;
    *samples = total;
    return BB_OK;
}

/* A server optimizer checks its global model before the round is reduced
 * (reduce_round may recycle the last result's memory). */
static int prepare_server_step(agg *a, bb_error *err)
{
    return agg_is_server_optimizer(a->kind) && a->n ? agg_server_prepare(a, err) : BB_OK;
}

static int aggregate(agg *a, const bb_dispatch_call *call, bb_value **outputs, bb_error *err)
{
    bb_value *t;
    uint64_t total;
    int rc = prepare_server_step(a, err);
    if (!rc)
        rc = reduce_round(a, &t, &total, err);
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
    if (a->n == 0) {
        if (!a->last)
            return bb_error_set(err, BB_ESTATE, "%s: no contribution and no result yet",
                                a->type_name);
        *out = bb_value_ref(a->last);
        return BB_OK;
    }
    uint64_t total;
    /* new_result may recycle last's memory: keep a second reference so the
     * previous result stays intact while the round is still open. */
    bb_value *keep = bb_value_ref(a->last);
    int rc = prepare_server_step(a, err);
    if (!rc)
        rc = reduce_round(a, out, &total, err);
    bb_value_unref(keep);
    if (!rc && agg_is_server_optimizer(a->kind))
        agg_server_step(a, bb_tensor_f32(*out), false);
    return rc;
}

/* ---- dispatch --------------------------------------------------------------------- */

enum { OP_AGGREGATE, OP_CONTRIBUTE, OP_CURRENT_TENSOR, N_OPS };
enum { EXT_OP_ROUNDS, EXT_OP_SET_MODEL, N_EXT_OPS };
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
    else if (ext && call->op_index == EXT_OP_SET_MODEL) {
        rc = agg_server_set_model(a, in0, err);
        if (!rc && !(outputs[0] = bb_value_trigger()))
            rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory", a->type_name);
    }
    else if (ext)
        rc = bb_error_set(err, BB_EUNSUPPORTED, "%s: no op %s", a->type_name, call->op_type);
    else if (call->op_index == OP_CONTRIBUTE)
        rc = contribute(a, in0, in1, &outputs[0], err);
    else if (call->op_index == OP_AGGREGATE)
        rc = aggregate(a, call, outputs, err);
    else if (call->op_index == OP_CURRENT_TENSOR)
        rc = current_tensor(a, &outputs[0], err);
    else
        rc = bb_error_set(err, BB_EUNSUPPORTED, "%s: no op %s", a->type_name, call->op_type);
    return rc == BB_OK ? BB_DISPATCH_NOW_OK : BB_DISPATCH_NOW_ERR;
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
static const bb_port_decl TRIGGER_OUT[] = {{.name = "trigger", .type = &BB_TYPE_TRIGGER}};
static const bb_op_decl EXT_OPS[N_EXT_OPS] = {
    [EXT_OP_ROUNDS] = {"Rounds", TRIGGER_IN, 1, ROUNDS_OUT, 1,
                       "Aggregates so far (kept in the snapshot): the number of the round "
                       "just aggregated"},
    [EXT_OP_SET_MODEL] = {"SetModel", MODEL_IN, 1, TRIGGER_OUT, 1,
                          "the global model the round's clients started from: what a server "
                          "optimizer steps from (each result takes its place after an "
                          "Aggregate); the averaging aggregators ignore it"},
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
