/*
 * bbd_test.c — components for bbd's integration tests (examples/ping_pong,
 * examples/fed_round): small, deterministic, and honest about what they do.
 *
 *   bbdtest::Peers  (PeerSelector)  Sample -> PeerIdVec, at most the node's
 *       attribute n peers: every peer of the address book (config
 *       "mode": "known", the default) or the connected peers that announced
 *       the node's peer_class target ("mode": "connected").
 *   bbdtest::Model  (Model)  parameters are an f32 vector.
 *       Params -> the parameters; LoadParameters(p) -> CommandId;
 *       Train(trigger) -> (parameters + delta, num_samples) and keeps them.
 *       Config (construction JSON, then the node's per-slot config over it):
 *       "init" [floats] (default [0,0,0,0]), "delta" (default 1),
 *       "num_samples" (default 10), "train_ms" (default 0: Train completes
 *       at once; otherwise it sleeps that long on the host's worker pool and
 *       completes later, so a test can stop a node mid-training).
 *       Snapshot/restore keep the parameters.
 *   bbdtest::Mean  (Aggregator)  Contribute(ResponseBatch of
 *       Composite(params, num_samples)) -> CommandId; Aggregate(trigger) ->
 *       the num_samples-weighted mean, then starts over.
 *   bbdtest::Blob  (Protocol, domain bbdtest.blob)  Fill(n U64) -> f32[n],
 *       element i = (i mod 1021) * 0.5 + n (a tensor of any size, made on
 *       the node); Digest(t) -> U64, FNV-1a over the tensor's bytes 8 at a
 *       time (the large-tensor tests compare both ends' digests).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cJSON.h>

#include <bb/meta.h>
#include <bb/plugin.h>

#define MAX_PARAMS 65536

/* ---- config -------------------------------------------------------------- */

static cJSON *parse_config(const bb_create_args *a, const char *key)
{
    /* the node's per-slot config wins over the recorded construction state */
    if (a->config_json) {
        cJSON *j = cJSON_Parse(a->config_json);
        cJSON *v = cJSON_DetachItemFromObjectCaseSensitive(j, key);
        cJSON_Delete(j);
        if (v)
            return v;
    }
    if (a->construction && a->construction->has_s) {
        cJSON *j = cJSON_ParseWithLength((const char *)a->construction->s.data,
                                         a->construction->s.len);
        cJSON *v = cJSON_DetachItemFromObjectCaseSensitive(j, key);
        cJSON_Delete(j);
        return v;
    }
    return NULL;
}

static double config_num(const bb_create_args *a, const char *key, double dflt)
{
    cJSON *v = parse_config(a, key);
    double d = cJSON_IsNumber(v) ? v->valuedouble : dflt;
    cJSON_Delete(v);
    return d;
}

/* ---- bbdtest::Peers -------------------------------------------------------- */

typedef struct peers {
    bool connected_only;
} peers;

static int peers_create(const bb_create_args *a, void **out, bb_error *err)
{
    peers *p = calloc(1, sizeof *p);
    if (!p)
        return bb_error_set(err, BB_ENOMEM, "bbdtest::Peers: out of memory");
    cJSON *mode = parse_config(a, "mode");
    if (mode && (!cJSON_IsString(mode) || (strcmp(mode->valuestring, "known") &&
                                           strcmp(mode->valuestring, "connected")))) {
        cJSON_Delete(mode);
        free(p);
        return bb_error_set(err, BB_ECONFIG,
                            "bbdtest::Peers: mode must be \"known\" or \"connected\"");
    }
    p->connected_only = mode && strcmp(mode->valuestring, "connected") == 0;
    cJSON_Delete(mode);
    *out = p;
    return BB_OK;
}

static bb_dispatch_result peers_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                         bb_value **out, bb_error *err)
{
    peers *p = inst;
    int64_t n = call->node ? bb_node_attr_int(call->node, "n", 16) : 16;
    if (n < 0 || n > 1024)
        n = 1024;
    bb_value *v[1024];
    size_t got;
    if (p->connected_only) {
        const char *cls = call->node ? bb_kv_get(&call->node->metadata, BB_META_PEER_CLASS) : NULL;
        got = ctx->api->peers_running(ctx, cls, v, (size_t)n);
    } else {
        got = ctx->api->peers(ctx, v, (size_t)n);
    }
    if (got > (size_t)n)
        got = (size_t)n;
    if (!(out[0] = bb_value_list(&BB_TYPE_PEER_ID_VEC, v, got))) {
        bb_error_set(err, BB_ENOMEM, "bbdtest::Peers: out of memory");
        return BB_DISPATCH_NOW_ERR;
    }
    return BB_DISPATCH_NOW_OK;
}

/* ---- bbdtest::Model --------------------------------------------------------------- */

typedef struct train_job train_job;

typedef struct model {
    float *w;
    size_t n;
    float delta;
    uint64_t num_samples;
    uint64_t train_ms;
    uint64_t loads;
    train_job *job; /* Train waiting for the worker pool (the engine drops it
                     * unfinished when it stops: destroy frees it then) */
} model;

static int model_create(const bb_create_args *a, void **out, bb_error *err)
{
    model *m = calloc(1, sizeof *m);
    if (!m)
        return bb_error_set(err, BB_ENOMEM, "bbdtest::Model: out of memory");
    cJSON *init = parse_config(a, "init");
    m->n = cJSON_IsArray(init) ? (size_t)cJSON_GetArraySize(init) : 4;
    if (m->n == 0 || m->n > MAX_PARAMS || !(m->w = calloc(m->n, sizeof *m->w))) {
        cJSON_Delete(init);
        free(m);
        return bb_error_set(err, BB_ECONFIG, "bbdtest::Model: init must hold 1..%d numbers",
                            MAX_PARAMS);
    }
    size_t i = 0;
    for (const cJSON *x = cJSON_IsArray(init) ? init->child : NULL; x; x = x->next)
        m->w[i++] = (float)x->valuedouble;
    cJSON_Delete(init);
    m->delta = (float)config_num(a, "delta", 1);
    double ns = config_num(a, "num_samples", 10), ms = config_num(a, "train_ms", 0);
    m->num_samples = ns > 0 ? (uint64_t)ns : 1;
    m->train_ms = ms > 0 && ms < 600000 ? (uint64_t)ms : 0;
    *out = m;
    return BB_OK;
}

static void model_destroy(void *inst)
{
    model *m = inst;
    free(m->job);
    free(m->w);
    free(m);
}

static bb_value *params_value(const model *m)
{
    int64_t dims[1] = {(int64_t)m->n};
    return bb_value_tensor_copy(BB_DT_FLOAT, 1, dims, m->w, m->n * sizeof *m->w);
}

static int train_outputs(model *m, bb_value **out)
{
    for (size_t i = 0; i < m->n; i++)
        m->w[i] += m->delta;
    out[0] = params_value(m);
    out[1] = bb_value_u64(&BB_TYPE_U64, m->num_samples);
    if (out[0] && out[1])
        return BB_OK;
    bb_value_unref(out[0]);
    bb_value_unref(out[1]);
    out[0] = out[1] = NULL;
    return BB_ENOMEM;
}

/* Train on the worker pool: sleep train_ms, then complete on the engine thread. */
struct train_job {
    model *m;
    bb_completion *done;
    uint64_t ms;
};

static void train_work(void *arg)
{
    train_job *j = arg;
    struct timespec ts = {(time_t)(j->ms / 1000), (long)(j->ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void train_done(void *arg)
{
    train_job *j = arg;
    bb_value *out[2];
    if (train_outputs(j->m, out) == BB_OK)
        bb_complete_ok(j->done, out, 2);
    else
        bb_complete_err(j->done, BB_ENOMEM, "bbdtest::Model: out of memory");
    j->m->job = NULL;
    free(j);
}

static bb_dispatch_result model_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                         bb_value **out, bb_error *err)
{
    model *m = inst;
    const char *op = call->op_type;
    if (!strcmp(op, "Params")) {
        if (!(out[0] = params_value(m)))
            goto oom;
        return BB_DISPATCH_NOW_OK;
    }
    if (!strcmp(op, "LoadParameters")) {
        const bb_value *p = call->n_inputs ? call->inputs[0] : NULL;
        if (!p || p->type->kind != BB_VK_TENSOR || p->u.tensor.dtype != BB_DT_FLOAT ||
            bb_tensor_numel(p) != m->n) {
            bb_error_set(err, BB_ETYPE, "bbdtest::Model: LoadParameters takes f32[%zu]", m->n);
            return BB_DISPATCH_NOW_ERR;
        }
        memcpy(m->w, bb_tensor_f32(p), m->n * sizeof *m->w);
        if (!(out[0] = bb_value_u64(&BB_TYPE_COMMAND_ID, ++m->loads)))
            goto oom;
        return BB_DISPATCH_NOW_OK;
    }
    if (!strcmp(op, "Train") && call->n_outputs >= 2) {
        if (!m->train_ms)
            return train_outputs(m, out) == BB_OK ? BB_DISPATCH_NOW_OK : BB_DISPATCH_NOW_ERR;
        if (m->job) {
            bb_error_set(err, BB_ESTATE, "bbdtest::Model: already training");
            return BB_DISPATCH_NOW_ERR;
        }
        train_job *j = malloc(sizeof *j);
        if (!j)
            goto oom;
        *j = (train_job){m, call->completion, m->train_ms};
        m->job = j;
        if (ctx->api->submit_work(ctx, train_work, train_done, j) != BB_OK) {
            m->job = NULL;
            free(j);
            bb_error_set(err, BB_ERUNTIME, "bbdtest::Model: cannot submit work");
            return BB_DISPATCH_NOW_ERR;
        }
        return BB_DISPATCH_LATER;
    }
    bb_error_set(err, BB_EUNSUPPORTED, "bbdtest::Model: no op %s", op);
    return BB_DISPATCH_NOW_ERR;
oom:
    bb_error_set(err, BB_ENOMEM, "bbdtest::Model: out of memory");
    return BB_DISPATCH_NOW_ERR;
}

static int model_snapshot(void *inst, uint8_t **out, size_t *len, bb_error *err)
{
    model *m = inst;
    *len = 8 + m->n * sizeof *m->w;
    if (!(*out = malloc(*len)))
        return bb_error_set(err, BB_ENOMEM, "bbdtest::Model: out of memory");
    uint64_t n = m->n;
    memcpy(*out, &n, 8);
    memcpy(*out + 8, m->w, m->n * sizeof *m->w);
    return BB_OK;
}

static int model_restore(void *inst, const uint8_t *data, size_t len, bb_error *err)
{
    model *m = inst;
    uint64_t n;
    if (len < 8 || (memcpy(&n, data, 8), n != m->n) || len != 8 + n * sizeof *m->w)
        return bb_error_set(err, BB_EDECODE, "bbdtest::Model: snapshot does not match");
    memcpy(m->w, data + 8, m->n * sizeof *m->w);
    return BB_OK;
}

/* ---- bbdtest::Mean ------------------------------------------------------------------ */

typedef struct mean {
    double *sum;
    size_t n;
    double weight;
    uint64_t contributions;
} mean;

static int mean_create(const bb_create_args *a, void **out, bb_error *err)
{
    (void)a;
    if (!(*out = calloc(1, sizeof(mean))))
        return bb_error_set(err, BB_ENOMEM, "bbdtest::Mean: out of memory");
    return BB_OK;
}

static void mean_destroy(void *inst)
{
    mean *m = inst;
    free(m->sum);
    free(m);
}

static int contribute_one(mean *m, const bb_value *item, bb_error *err)
{
    if (!item || item->type->kind != BB_VK_COMPOSITE || item->u.list.n != 2)
        return bb_error_set(err, BB_ETYPE, "bbdtest::Mean: a response must be Composite(params, n)");
    const bb_value *t = item->u.list.items[0], *w = item->u.list.items[1];
    if (t->type->kind != BB_VK_TENSOR || t->u.tensor.dtype != BB_DT_FLOAT ||
        w->type->kind != BB_VK_U64)
        return bb_error_set(err, BB_ETYPE, "bbdtest::Mean: expected (f32 tensor, U64)");
    size_t n = bb_tensor_numel(t);
    if (!m->sum) {
        if (n == 0 || n > MAX_PARAMS || !(m->sum = calloc(n, sizeof *m->sum)))
            return bb_error_set(err, BB_ELIMIT, "bbdtest::Mean: bad contribution size %zu", n);
        m->n = n;
    } else if (n != m->n) {
        return bb_error_set(err, BB_ETYPE, "bbdtest::Mean: contribution of %zu values, not %zu",
                            n, m->n);
    }
    for (size_t i = 0; i < n; i++)
        m->sum[i] += (double)bb_tensor_f32(t)[i] * (double)w->u.u64;
    m->weight += (double)w->u.u64;
    m->contributions++;
    return BB_OK;
}

static bb_dispatch_result mean_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                        bb_value **out, bb_error *err)
{
    (void)ctx;
    mean *m = inst;
    if (!strcmp(call->op_type, "Contribute")) {
        const bb_value *b = call->n_inputs ? call->inputs[0] : NULL;
        if (!b || b->type->kind != BB_VK_RESPONSE_BATCH) {
            bb_error_set(err, BB_ETYPE, "bbdtest::Mean: Contribute takes a ResponseBatch");
            return BB_DISPATCH_NOW_ERR;
        }
        for (size_t i = 0; i < b->u.batch.n; i++)
            if (contribute_one(m, b->u.batch.items[i], err))
                return BB_DISPATCH_NOW_ERR;
        out[0] = bb_value_u64(&BB_TYPE_COMMAND_ID, m->contributions);
        return out[0] ? BB_DISPATCH_NOW_OK : BB_DISPATCH_NOW_ERR;
    }
    if (!strcmp(call->op_type, "Aggregate")) {
        if (!m->sum || m->weight <= 0) {
            bb_error_set(err, BB_ESTATE, "bbdtest::Mean: nothing to aggregate");
            return BB_DISPATCH_NOW_ERR;
        }
        int64_t dims[1] = {(int64_t)m->n};
        bb_value *t = bb_value_tensor_new(BB_DT_FLOAT, 1, dims);
        if (!t) {
            bb_error_set(err, BB_ENOMEM, "bbdtest::Mean: out of memory");
            return BB_DISPATCH_NOW_ERR;
        }
        for (size_t i = 0; i < m->n; i++)
            bb_tensor_f32(t)[i] = (float)(m->sum[i] / m->weight);
        out[0] = t;
        if (call->n_outputs > 1)
            out[1] = bb_value_u64(&BB_TYPE_U64, (uint64_t)m->weight);
        free(m->sum);
        m->sum = NULL;
        m->weight = 0;
        return BB_DISPATCH_NOW_OK;
    }
    bb_error_set(err, BB_EUNSUPPORTED, "bbdtest::Mean: no op %s", call->op_type);
    return BB_DISPATCH_NOW_ERR;
}

/* ---- bbdtest::Blob ---------------------------------------------------------------------- */

#define BLOB_MAX_FLOATS ((uint64_t)1 << 31) /* 8 GiB */

static int blob_create(const bb_create_args *a, void **out, bb_error *err)
{
    (void)a, (void)err;
    *out = NULL;
    return BB_OK;
}

static void blob_destroy(void *inst) { (void)inst; }

static bb_dispatch_result blob_fill(const bb_value *n, bb_value **out, bb_error *err)
{
    if (!n || n->type->kind != BB_VK_U64 || !n->u.u64 || n->u.u64 > BLOB_MAX_FLOATS) {
        bb_error_set(err, BB_EINVAL, "bbdtest::Blob: Fill takes a count of 1 to 2^31 floats");
        return BB_DISPATCH_NOW_ERR;
    }
    int64_t dim = (int64_t)n->u.u64;
    bb_value *t = bb_value_tensor_new(BB_DT_FLOAT, 1, &dim);
    if (!t) {
        bb_error_set(err, BB_ENOMEM, "bbdtest::Blob: out of memory for %lld floats",
                     (long long)dim);
        return BB_DISPATCH_NOW_ERR;
    }
    float *f = bb_tensor_f32(t), base = (float)n->u.u64;
    for (uint64_t i = 0; i < n->u.u64; i++)
        f[i] = (float)(i % 1021) * 0.5f + base;
    out[0] = t;
    return BB_DISPATCH_NOW_OK;
}

static bb_dispatch_result blob_digest(const bb_value *t, bb_value **out, bb_error *err)
{
    if (!t || t->type->kind != BB_VK_TENSOR) {
        bb_error_set(err, BB_ETYPE, "bbdtest::Blob: Digest takes a tensor");
        return BB_DISPATCH_NOW_ERR;
    }
    const uint8_t *p = t->u.tensor.data;
    size_t n = t->u.tensor.nbytes, i = 0;
    uint64_t h = 0xcbf29ce484222325ULL ^ n;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ULL;
    }
    for (; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    out[0] = bb_value_u64(&BB_TYPE_U64, h);
    return out[0] ? BB_DISPATCH_NOW_OK : BB_DISPATCH_NOW_ERR;
}

static bb_dispatch_result blob_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                        bb_value **out, bb_error *err)
{
    (void)inst, (void)ctx;
    const bb_value *in = call->n_inputs ? call->inputs[0] : NULL;
    if (!strcmp(call->op_type, "Fill"))
        return blob_fill(in, out, err);
    if (!strcmp(call->op_type, "Digest"))
        return blob_digest(in, out, err);
    bb_error_set(err, BB_EUNSUPPORTED, "bbdtest::Blob: no op %s", call->op_type);
    return BB_DISPATCH_NOW_ERR;
}

/* ---- declarations ----------------------------------------------------------------------- */

static const bb_port_decl PEERS_OUT[] = {{.name = "peers", .type = &BB_TYPE_PEER_ID_VEC}};
static const bb_op_decl PEERS_OPS[] = {{"Sample", NULL, 0, PEERS_OUT, 1, "peers to talk to"}};
static const bb_opset_decl PEERS_SETS[] = {{BB_DOMAIN_ROLE_PEER_SELECTOR, 1, PEERS_OPS, 1}};
static const bb_config_decl PEERS_CONFIG[] = {
    {"mode", "string", "\"known\"", "\"known\" (address book) or \"connected\" (of the class)"}};

static const bb_port_decl PARAMS_OUT[] = {{.name = "params", .type = &BB_TYPE_TENSOR_F32}};
static const bb_port_decl PARAMS_IN[] = {{.name = "params", .type = &BB_TYPE_TENSOR_F32}};
static const bb_port_decl CMD_OUT[] = {{.name = "cmd", .type = &BB_TYPE_COMMAND_ID}};
static const bb_port_decl TRIGGER_IN[] = {{.name = "trigger", .type = &BB_TYPE_ANY}};
static const bb_port_decl TRAIN_OUT[] = {{.name = "params", .type = &BB_TYPE_TENSOR_F32},
                                         {.name = "num_samples", .type = &BB_TYPE_U64}};
static const bb_op_decl MODEL_OPS[] = {
    {"Params", NULL, 0, PARAMS_OUT, 1, "the parameters"},
    {"LoadParameters", PARAMS_IN, 1, CMD_OUT, 1, "replace the parameters"},
    {"Train", TRIGGER_IN, 1, TRAIN_OUT, 2, "parameters + delta (after train_ms)"},
};
static const bb_opset_decl MODEL_SETS[] = {{BB_DOMAIN_ROLE_MODEL, 1, MODEL_OPS, 3}};
static const bb_config_decl MODEL_CONFIG[] = {
    {"init", "array", "[0,0,0,0]", "initial parameters"},
    {"delta", "float", "1", "what Train adds to every parameter"},
    {"num_samples", "int", "10", "the sample count Train reports"},
    {"train_ms", "int", "0", "Train sleeps this long on the worker pool"},
};

static const bb_port_decl BATCH_IN[] = {{.name = "contribution", .type = &BB_TYPE_ANY},
                                        {.name = "metadata", .type = &BB_TYPE_ANY,
                                         .optional = true}};
static const bb_port_decl AGG_OUT[] = {{.name = "result", .type = &BB_TYPE_TENSOR_F32},
                                       {.name = "metadata", .type = &BB_TYPE_U64,
                                        .optional = true}};
static const bb_op_decl MEAN_OPS[] = {
    {"Contribute", BATCH_IN, 2, CMD_OUT, 1, "add every response of a batch"},
    {"Aggregate", TRIGGER_IN, 1, AGG_OUT, 2, "weighted mean, then start over"},
};
static const bb_opset_decl MEAN_SETS[] = {{BB_DOMAIN_ROLE_AGGREGATOR, 1, MEAN_OPS, 2}};

static const bb_port_decl COUNT_IN[] = {{.name = "n", .type = &BB_TYPE_U64}};
static const bb_port_decl TENSOR_IN[] = {{.name = "t", .type = &BB_TYPE_TENSOR_F32}};
static const bb_port_decl TENSOR_OUT[] = {{.name = "t", .type = &BB_TYPE_TENSOR_F32}};
static const bb_port_decl DIGEST_OUT[] = {{.name = "digest", .type = &BB_TYPE_U64}};
static const bb_op_decl BLOB_OPS[] = {
    {"Fill", COUNT_IN, 1, TENSOR_OUT, 1, "f32[n], a fixed pattern"},
    {"Digest", TENSOR_IN, 1, DIGEST_OUT, 1, "FNV-1a of the tensor's bytes"},
};
static const bb_opset_decl BLOB_SETS[] = {{"bbdtest.blob", 1, BLOB_OPS, 2}};

#define TYPE(var, name_, role_, sets, cfg, ncfg, create_, destroy_, dispatch_, snap, rest)    \
    static const bb_component_type var = {                                                  \
        .struct_size = sizeof(bb_component_type),                                           \
        .abi_major = BB_PLUGIN_ABI_MAJOR,                                                   \
        .abi_minor = BB_PLUGIN_ABI_MINOR,                                                   \
        .type_name = name_,                                                                 \
        .role = role_,                                                                      \
        .doc = "bbd integration-test component",                                            \
        .opsets = sets,                                                                     \
        .n_opsets = 1,                                                                      \
        .config = cfg,                                                                      \
        .n_config = ncfg,                                                                   \
        .create = create_,                                                                  \
        .destroy = destroy_,                                                                \
        .dispatch = dispatch_,                                                              \
        .snapshot = snap,                                                                   \
        .restore = rest,                                                                    \
    }

TYPE(PEERS, "bbdtest::Peers", BB_ROLE_PEER_SELECTOR, PEERS_SETS, PEERS_CONFIG, 1, peers_create,
     free, peers_dispatch, NULL, NULL);
TYPE(MODEL, "bbdtest::Model", BB_ROLE_MODEL, MODEL_SETS, MODEL_CONFIG, 4, model_create,
     model_destroy, model_dispatch, model_snapshot, model_restore);
TYPE(MEAN, "bbdtest::Mean", BB_ROLE_AGGREGATOR, MEAN_SETS, NULL, 0, mean_create, mean_destroy,
     mean_dispatch, NULL, NULL);

TYPE(BLOB, "bbdtest::Blob", BB_ROLE_PROTOCOL, BLOB_SETS, NULL, 0, blob_create, blob_destroy,
     blob_dispatch, NULL, NULL);

static const bb_component_type *const TYPES[] = {&PEERS, &MODEL, &MEAN, &BLOB};

static const bb_plugin_info INFO = {
    .struct_size = sizeof(bb_plugin_info),
    .abi_major = BB_PLUGIN_ABI_MAJOR,
    .abi_minor = BB_PLUGIN_ABI_MINOR,
    .name = "bbd_test",
    .version = "1.0",
    .types = TYPES,
    .n_types = sizeof TYPES / sizeof TYPES[0],
    .value_layout = BB_PLUGIN_VALUE_LAYOUT,
};

BB_PLUGIN_EXPORT const bb_plugin_info *bb_plugin_entry(void) { return &INFO; }
