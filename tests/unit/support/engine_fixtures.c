/*
 * engine_fixtures.c — see engine_fixtures.h. Test-only code: the component
 * instances are recorded in file-level lists so tests can reach them.
 */
#include "engine_fixtures.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/multiaddr.h"
#include "bb/peerid.h"
#include "bb/types.h"
#include "bb_envelope.pb-c.h"

/* ---- artifacts ------------------------------------------------------------------ */

bb_model *fx_model(void)
{
    bb_model *m = bb_model_new();
    if (m)
        bb_kv_set(m->arena, &m->metadata, "ai.bytesandbrains.compiled", "v1");
    return m;
}

static void push_csv(bb_model *m, bb_str_list *l, const char *csv)
{
    if (!csv || !*csv)
        return;
    const char *p = csv;
    for (;;) {
        size_t n = strcspn(p, ",");
        char buf[256];
        snprintf(buf, sizeof buf, "%.*s", (int)n, p);
        bb_str_list_push(m->arena, l, buf);
        if (!p[n])
            break;
        p += n + 1;
    }
}

bb_function *fx_fn(bb_model *m, const char *name, const char *inputs, const char *outputs)
{
    bb_function *f = bb_model_add_function(m, "", name);
    push_csv(m, &f->inputs, inputs);
    push_csv(m, &f->outputs, outputs);
    return f;
}

bb_node *fx_op(bb_model *m, bb_function *f, const char *domain, const char *op_type,
               const char *inputs, const char *outputs)
{
    bb_node *n = bb_function_add_node(m, f, domain, op_type);
    push_csv(m, &n->inputs, inputs);
    push_csv(m, &n->outputs, outputs);
    return n;
}

void fx_meta(bb_model *m, bb_node *n, const char *key, const char *value)
{
    bb_kv_set(m->arena, &n->metadata, key, value);
}

void fx_int(bb_model *m, bb_node *n, const char *name, int64_t v)
{
    bb_node_set_attr_int(m->arena, n, name, v);
}

void fx_str(bb_model *m, bb_node *n, const char *name, const char *v)
{
    bb_node_set_attr_string(m->arena, n, name, v);
}

void fx_bytes_attr(bb_model *m, bb_node *n, const char *name, const void *data, size_t len)
{
    bb_attr *a = bb_node_add_attr(m->arena, n, name, BB_ATTR_STRING);
    a->s.data = bb_arena_memdup(m->arena, data, len);
    a->s.len = len;
    a->has_s = true;
}

void fx_type(bb_model *m, bb_function *f, const char *value, const bb_type_node *t)
{
    bb_value_info *vi = bb_value_info_new(m->arena, value, bb_type_to_proto(m->arena, t));
    bb_value_info **slot = BB_VEC_PUSH(m->arena, &f->value_info);
    *slot = vi;
}

void fx_bind(bb_model *m, const char *target, const char *slot, const char *triple)
{
    char key[512];
    snprintf(key, sizeof key, "ai.bytesandbrains.binding.%s.%s", target, slot);
    bb_kv_set(m->arena, &m->metadata, key, triple);
}

bb_node *fx_recv(bb_model *m, bb_function *f, uint64_t site, const char *trigger,
                 const char *payload, const bb_type_node *t)
{
    char outs[128], id[24];
    snprintf(outs, sizeof outs, "%s%s%s", trigger, payload ? "," : "", payload ? payload : "");
    bb_node *r = fx_op(m, f, FX_WIRE, "Recv", "", outs);
    snprintf(id, sizeof id, "%llu", (unsigned long long)site);
    fx_meta(m, r, "ai.bytesandbrains.wire_site", id);
    if (payload && t)
        fx_type(m, f, payload, t);
    return r;
}

bb_function *fx_chain(bb_model *m, const char *name, uint32_t n)
{
    bb_function *f = fx_fn(m, name, "in", "out");
    char a[32], b[32];
    for (uint32_t i = 0; i < n; i++) {
        if (i == 0)
            snprintf(a, sizeof a, "in");
        else
            snprintf(a, sizeof a, "v%u", i - 1);
        if (i == n - 1)
            snprintf(b, sizeof b, "out");
        else
            snprintf(b, sizeof b, "v%u", i);
        fx_op(m, f, FX_SYS, "PassThrough", a, b);
    }
    return f;
}

/* ---- values -------------------------------------------------------------------------- */

bb_value *fx_f32(const float *v, size_t n)
{
    int64_t dim = (int64_t)n;
    return bb_value_tensor_copy(BB_DT_FLOAT, 1, &dim, v, n * sizeof(float));
}

bool fx_f32_eq(const bb_value *v, const float *want, size_t n)
{
    if (!v || v->type->kind != BB_VK_TENSOR || v->u.tensor.dtype != BB_DT_FLOAT ||
        bb_tensor_numel(v) != n)
        return false;
    const float *p = bb_tensor_f32(v);
    for (size_t i = 0; i < n; i++) {
        float d = p[i] - want[i];
        if (d > 1e-4f || d < -1e-4f)
            return false;
    }
    return true;
}

/* ---- component types --------------------------------------------------------------------- */

static fx_echo *g_echo[32];
static int g_n_echo;
static size_t g_materialized;

void fx_reset(void)
{
    g_n_echo = 0;
    g_materialized = 0;
}

fx_echo *fx_echo_at(int i) { return i < g_n_echo ? g_echo[i] : NULL; }

fx_echo *fx_echo_by_slot(const char *slot)
{
    for (int i = 0; i < g_n_echo; i++)
        if (g_echo[i]->slot && strcmp(g_echo[i]->slot, slot) == 0)
            return g_echo[i];
    return NULL;
}
int fx_echo_count(void) { return g_n_echo; }
size_t fx_backend_materialized(void) { return g_materialized; }

#define P(name, type) {name, type, false, false}
static const bb_port_decl ANY1[] = {P("x", &BB_TYPE_ANY)};
static const bb_port_decl ANY2[] = {P("a", &BB_TYPE_ANY), P("b", &BB_TYPE_ANY)};
static const bb_port_decl U64_1[] = {P("n", &BB_TYPE_U64)};
static const bb_port_decl F32_1[] = {P("t", &BB_TYPE_TENSOR_F32)};
static const bb_port_decl CMD_1[] = {P("cmd", &BB_TYPE_COMMAND_ID)};
static const bb_port_decl PEERS_1[] = {P("peers", &BB_TYPE_PEER_ID_VEC)};

static const bb_op_decl ECHO_OPS[] = {
    {"Echo", ANY1, 1, ANY1, 1, "identity"},
    {"Later", ANY1, 1, ANY1, 1, "completes later"},
    {"Fail", ANY1, 1, ANY1, 1, "fails"},
    {"Count", ANY1, 1, U64_1, 1, "call count"},
    {"Control", ANY2, 2, NULL, 0, "control-plane target"},
    {"Flush", ANY1, 1, ANY1, 1, "completes every pending Later in-cycle"},
    {"Wait", ANY1, 1, ANY1, 1, "completes from a component timer"},
    {"Work", U64_1, 1, U64_1, 1, "doubles n on the host's worker pool"},
    {"Peers", ANY1, 1, PEERS_1, 1, "ctx->peers"},
    {"Addrs", ANY1, 1, ANY1, 1, "ctx->peer_addresses"},
    {"Share", ANY1, 1, ANY1, 1, "the value the host shares under \"fx.share\", else x shared"},
};
static const bb_opset_decl ECHO_SETS[] = {{"test.echo", 1, ECHO_OPS, 11}};

static int echo_create(const bb_create_args *a, void **out, bb_error *err)
{
    (void)err;
    fx_echo *s = calloc(1, sizeof *s);
    if (!s)
        return BB_ENOMEM;
    s->slot = a->slot;
    s->ctx = a->ctx;
    if (a->config_json && strcmp(a->config_json, "fail") == 0) {
        free(s);
        return bb_error_set(err, BB_ECONFIG, "echo: asked to fail");
    }
    if (g_n_echo < 32)
        g_echo[g_n_echo++] = s;
    *out = s;
    return BB_OK;
}

static void echo_destroy(void *inst)
{
    fx_echo *s = inst;
    for (int i = 0; i < s->n_pending; i++)
        bb_value_unref(s->pending_in[i]);
    for (int i = 0; i < s->n_waits; i++)
        bb_value_unref(s->wait_in[i]);
    bb_value_unref(s->last_control);
    for (int i = 0; i < s->n_answers; i++)
        bb_value_unref(s->answer[i]);
    for (int i = 0; i < g_n_echo; i++)
        if (g_echo[i] == s)
            g_echo[i] = g_echo[--g_n_echo];
    free(s);
}

/* Work: computed on a worker thread, completed back on the engine thread. */
typedef struct work_job {
    bb_completion *c;
    uint64_t n, result;
} work_job;

static void work_run(void *arg)
{
    work_job *j = arg;
    j->result = j->n * 2;
}

static void work_done(void *arg)
{
    work_job *j = arg;
    bb_value *v = bb_value_u64(&BB_TYPE_U64, j->result);
    bb_complete_ok(j->c, &v, 1);
    free(j);
}

static bb_dispatch_result echo_ctx_op(fx_echo *s, bb_ctx *ctx, const bb_dispatch_call *call,
                                      bb_value **out, bb_error *err)
{
    const char *op = call->op_type;
    if (strcmp(op, "Wait") == 0) {
        if (s->n_waits == 16 || ctx->api->schedule(ctx, 100, (uint64_t)s->n_waits) != BB_OK) {
            bb_error_set(err, BB_EFULL, "echo: cannot wait");
            return BB_DISPATCH_NOW_ERR;
        }
        s->waits[s->n_waits] = call->completion;
        s->wait_in[s->n_waits++] = bb_value_ref(call->inputs[0]);
        return BB_DISPATCH_LATER;
    }
    if (strcmp(op, "Work") == 0) {
        work_job *j = malloc(sizeof *j);
        if (!j || !call->inputs[0] || call->inputs[0]->type->kind != BB_VK_U64) {
            free(j);
            bb_error_set(err, BB_ETYPE, "Work: want a U64");
            return BB_DISPATCH_NOW_ERR;
        }
        j->c = call->completion;
        j->n = call->inputs[0]->u.u64;
        ctx->api->submit_work(ctx, work_run, work_done, j);
        return BB_DISPATCH_LATER;
    }
    if (strcmp(op, "Peers") == 0) {
        bb_value *peers[16];
        size_t n = ctx->api->peers(ctx, peers, 16);
        out[0] = bb_value_list(&BB_TYPE_PEER_ID_VEC, peers, n < 16 ? n : 16);
        return BB_DISPATCH_NOW_OK;
    }
    if (strcmp(op, "Share") == 0) {
        if (!BB_CTX_HAS(ctx, shared_put)) {
            bb_error_set(err, BB_EUNSUPPORTED, "Share: the host table has no shared_put");
            return BB_DISPATCH_NOW_ERR;
        }
        out[0] = ctx->api->shared_get(ctx, "fx.share");
        if (!out[0])
            out[0] = ctx->api->shared_put(ctx, "fx.share", call->inputs[0]);
        return BB_DISPATCH_NOW_OK;
    }
    out[0] = ctx->api->peer_addresses(ctx, call->inputs[0]); /* Addrs */
    if (!out[0]) {
        bb_error_set(err, BB_ENOTFOUND, "Addrs: no addresses for that peer");
        return BB_DISPATCH_NOW_ERR;
    }
    return BB_DISPATCH_NOW_OK;
}

static void echo_on_timer(void *inst, bb_ctx *ctx, uint64_t token)
{
    (void)ctx;
    fx_echo *s = inst;
    s->timers_fired++;
    if (token < (uint64_t)s->n_waits && s->waits[token]) {
        bb_value *v = s->wait_in[token];
        s->wait_in[token] = NULL;
        bb_complete_ok(s->waits[token], &v, 1); /* in-cycle: drained in phase 5 */
        s->waits[token] = NULL;
    }
}

/* A Control payload "learn" + u16 first + u16 count (big-endian) adds the
 * peers fx_taught_peer(first ..) to the book with ctx->add_peer, as a
 * gossip component adds what another node told it; refusals are counted. */
static void echo_learn(fx_echo *s, bb_ctx *ctx, const bb_value *payload)
{
    const uint8_t *b = payload->u.bytes.data;
    if (payload->u.bytes.len != 9 || memcmp(b, "learn", 5) != 0)
        return;
    unsigned first = (unsigned)b[5] << 8 | b[6], count = (unsigned)b[7] << 8 | b[8];
    for (unsigned i = first; i < first + count; i++) {
        bb_peerid id = fx_taught_peer((uint16_t)i);
        uint8_t a[32];
        size_t alen = fx_addr((uint16_t)(20000 + i % 40000), a);
        bb_value *pv = bb_value_bytes(&BB_TYPE_PEER_ID, id.bytes, id.len);
        bb_value *av = bb_value_bytes(&BB_TYPE_MULTIADDRESS, a, alen);
        if (!pv || !av || ctx->api->add_peer(ctx, pv, av, NULL) != BB_OK)
            s->learn_refused++;
        bb_value_unref(pv);
        bb_value_unref(av);
    }
}

static bb_dispatch_result echo_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                        bb_value **out, bb_error *err)
{
    fx_echo *s = inst;
    s->calls++;
    const char *op = call->op_type;
    if (strcmp(op, "Echo") == 0) {
        out[0] = bb_value_ref(call->inputs[0]);
        return BB_DISPATCH_NOW_OK;
    }
    if (strcmp(op, "Later") == 0) {
        if (s->n_pending == 64) {
            bb_error_set(err, BB_EFULL, "too many pending");
            return BB_DISPATCH_NOW_ERR;
        }
        s->pending[s->n_pending] = call->completion;
        s->pending_in[s->n_pending++] = bb_value_ref(call->inputs[0]);
        return BB_DISPATCH_LATER;
    }
    if (strcmp(op, "Flush") == 0) {
        for (int i = 0; i < s->n_pending; i++) {
            bb_value *v = s->pending_in[i];
            bb_complete_ok(s->pending[i], &v, 1);
        }
        s->n_pending = 0;
        if (call->n_outputs)
            out[0] = bb_value_ref(call->inputs[0]);
        return BB_DISPATCH_NOW_OK;
    }
    if (strcmp(op, "Count") == 0) {
        out[0] = bb_value_u64(&BB_TYPE_U64, s->calls);
        return BB_DISPATCH_NOW_OK;
    }
    if (strcmp(op, "Control") == 0) {
        s->n_control++;
        bb_value_unref(s->last_control);
        s->last_control = bb_value_ref(call->inputs[0]);
        echo_learn(s, ctx, call->inputs[0]);
        return BB_DISPATCH_NOW_OK;
    }
    if (strcmp(op, "Wait") == 0 || strcmp(op, "Work") == 0 || strcmp(op, "Peers") == 0 ||
        strcmp(op, "Addrs") == 0 || strcmp(op, "Share") == 0)
        return echo_ctx_op(s, ctx, call, out, err);
    bb_error_set(err, BB_ERUNTIME, "echo failed on purpose");
    return BB_DISPATCH_NOW_ERR;
}

static bb_dispatch_result echo_bootstrap(void *inst, bb_ctx *ctx, bb_completion *c, bb_error *err)
{
    (void)ctx, (void)err;
    fx_echo *s = inst;
    if (s->slot && strstr(s->slot, "later")) {
        s->boot_pending = c;
        return BB_DISPATCH_LATER;
    }
    s->bootstrapped = true;
    return BB_DISPATCH_NOW_OK;
}

static void echo_on_answer(void *inst, bb_ctx *ctx, uint64_t token, int status,
                           const uint8_t *payload, size_t len)
{
    (void)ctx;
    fx_echo *s = inst;
    if (s->n_answers == 16)
        return;
    s->answer_token[s->n_answers] = token;
    s->answer_status[s->n_answers] = status;
    s->answer[s->n_answers++] = bb_value_bytes(&BB_TYPE_BYTES, payload, len);
}

static int echo_snapshot(void *inst, uint8_t **out, size_t *len, bb_error *err)
{
    (void)err;
    fx_echo *s = inst;
    *out = malloc(8);
    if (!*out)
        return BB_ENOMEM;
    memcpy(*out, &s->calls, 8);
    *len = 8;
    return BB_OK;
}

static int echo_restore(void *inst, const uint8_t *data, size_t len, bb_error *err)
{
    fx_echo *s = inst;
    if (len != 8)
        return bb_error_set(err, BB_EDECODE, "echo: bad snapshot");
    memcpy(&s->calls, data, 8);
    return BB_OK;
}

/* What test::Echo and test::OldEcho share. */
#define ECHO_TABLE                                                                             \
    .abi_major = BB_PLUGIN_ABI_MAJOR, .role = BB_ROLE_PROTOCOL, .opsets = ECHO_SETS,           \
    .n_opsets = 1, .create = echo_create, .destroy = echo_destroy, .dispatch = echo_dispatch,  \
    .on_answer = echo_on_answer

static const bb_component_type ECHO = {
    .struct_size = sizeof(bb_component_type),
    .type_name = "test::Echo",
    ECHO_TABLE,
    .bootstrap = echo_bootstrap,
    .on_timer = echo_on_timer,
    .snapshot = echo_snapshot,
    .restore = echo_restore,
};

/* on_answer lies past its struct_size: the host must never call it */
static const bb_component_type OLD_ECHO = {
    .struct_size = offsetof(bb_component_type, on_answer),
    .type_name = "test::OldEcho",
    ECHO_TABLE,
};

/* test::Model */
typedef struct fx_model_inst {
    float params[4];
    float delta;
    uint64_t samples;
} fx_model_inst;

static const bb_op_decl MODEL_OPS[] = {
    {"Params", ANY1, 1, F32_1, 1, NULL},
    {"LoadParameters", F32_1, 1, CMD_1, 1, NULL},
    {"Train", ANY1, 1, F32_1, 1, NULL},
    {"NumSamples", ANY1, 1, U64_1, 1, NULL},
};
static const bb_opset_decl MODEL_SETS[] = {{"ai.bytesandbrains.role.model", 1, MODEL_OPS, 4}};

static int model_create(const bb_create_args *a, void **out, bb_error *err)
{
    (void)err;
    fx_model_inst *s = calloc(1, sizeof *s);
    if (!s)
        return BB_ENOMEM;
    s->delta = 1;
    s->samples = 1;
    if (a->config_json) {
        double d = 1;
        unsigned long long n = 1;
        if (sscanf(a->config_json, "%lf_%llu", &d, &n) >= 1) {
            s->delta = (float)d;
            s->samples = n;
        }
    }
    *out = s;
    return BB_OK;
}

static bb_dispatch_result model_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                         bb_value **out, bb_error *err)
{
    (void)ctx;
    fx_model_inst *s = inst;
    const char *op = call->op_type;
    if (strcmp(op, "Params") == 0) {
        out[0] = fx_f32(s->params, 4);
    } else if (strcmp(op, "LoadParameters") == 0) {
        const bb_value *p = call->inputs[0];
        if (!p || p->type->kind != BB_VK_TENSOR || bb_tensor_numel(p) != 4) {
            bb_error_set(err, BB_ETYPE, "LoadParameters: want f32[4]");
            return BB_DISPATCH_NOW_ERR;
        }
        memcpy(s->params, bb_tensor_f32(p), sizeof s->params);
        out[0] = bb_value_u64(&BB_TYPE_COMMAND_ID, 1);
    } else if (strcmp(op, "Train") == 0) {
        for (int i = 0; i < 4; i++)
            s->params[i] += s->delta;
        out[0] = fx_f32(s->params, 4);
    } else if (strcmp(op, "NumSamples") == 0) {
        out[0] = bb_value_u64(&BB_TYPE_U64, s->samples);
    } else {
        bb_error_set(err, BB_EUNSUPPORTED, "model: no op %s", op);
        return BB_DISPATCH_NOW_ERR;
    }
    return BB_DISPATCH_NOW_OK;
}

static const bb_component_type MODEL = {
    .struct_size = sizeof(bb_component_type),
    .abi_major = BB_PLUGIN_ABI_MAJOR,
    .type_name = "test::Model",
    .role = BB_ROLE_MODEL,
    .opsets = MODEL_SETS,
    .n_opsets = 1,
    .create = model_create,
    .destroy = free,
    .dispatch = model_dispatch,
};

/* test::Agg */
static const bb_op_decl AGG_OPS[] = {
    {"FedAvg", ANY1, 1, F32_1, 1, NULL},
    {"Contribute", ANY1, 1, CMD_1, 1, NULL},
    {"Count", ANY1, 1, U64_1, 1, NULL},
};
static const bb_opset_decl AGG_SETS[] = {{"test.agg", 1, AGG_OPS, 3}};

static int agg_create(const bb_create_args *a, void **out, bb_error *err)
{
    (void)a, (void)err;
    *out = calloc(1, sizeof(uint64_t));
    return *out ? BB_OK : BB_ENOMEM;
}

static bb_dispatch_result agg_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                       bb_value **out, bb_error *err)
{
    (void)ctx;
    uint64_t *count = inst;
    const char *op = call->op_type;
    if (strcmp(op, "Contribute") == 0) {
        ++*count;
        out[0] = bb_value_u64(&BB_TYPE_COMMAND_ID, *count);
        return BB_DISPATCH_NOW_OK;
    }
    if (strcmp(op, "Count") == 0) {
        out[0] = bb_value_u64(&BB_TYPE_U64, *count);
        return BB_DISPATCH_NOW_OK;
    }
    const bb_value *b = call->inputs[0];
    if (!b || b->type->kind != BB_VK_RESPONSE_BATCH || !b->u.batch.n) {
        bb_error_set(err, BB_ETYPE, "FedAvg: want a non-empty ResponseBatch");
        return BB_DISPATCH_NOW_ERR;
    }
    float sum[4] = {0};
    double total = 0;
    for (size_t i = 0; i < b->u.batch.n; i++) {
        const bb_value *c = b->u.batch.items[i];
        if (c->type->kind != BB_VK_COMPOSITE || c->u.list.n != 2 ||
            c->u.list.items[0]->type->kind != BB_VK_TENSOR) {
            bb_error_set(err, BB_ETYPE, "FedAvg: item %zu is not Composite(params, n)", i);
            return BB_DISPATCH_NOW_ERR;
        }
        const float *p = bb_tensor_f32(c->u.list.items[0]);
        double w = (double)c->u.list.items[1]->u.u64;
        for (int k = 0; k < 4; k++)
            sum[k] += (float)(p[k] * w);
        total += w;
    }
    for (int k = 0; k < 4; k++)
        sum[k] = (float)(sum[k] / total);
    ++*count;
    out[0] = fx_f32(sum, 4);
    return BB_DISPATCH_NOW_OK;
}

static const bb_component_type AGG = {
    .struct_size = sizeof(bb_component_type),
    .abi_major = BB_PLUGIN_ABI_MAJOR,
    .type_name = "test::Agg",
    .role = BB_ROLE_AGGREGATOR,
    .opsets = AGG_SETS,
    .n_opsets = 1,
    .create = agg_create,
    .destroy = free,
    .dispatch = agg_dispatch,
};

/* test::Fold */
static const bb_port_decl CONTRIB_IN[] = {P("contribution", &BB_TYPE_ANY),
                                          {.name = "metadata", .type = &BB_TYPE_ANY,
                                           .optional = true}};
static const bb_op_decl FOLD_OPS[] = {{"Contribute", CONTRIB_IN, 2, CMD_1, 1, NULL}};
static const bb_opset_decl FOLD_SETS[] = {{"ai.bytesandbrains.role.aggregator", 1, FOLD_OPS, 1}};
static fx_fold *g_fold[8];
static int g_n_fold;

fx_fold *fx_fold_last(void) { return g_n_fold ? g_fold[g_n_fold - 1] : NULL; }

static int fold_create(const bb_create_args *a, void **out, bb_error *err)
{
    (void)a, (void)err;
    fx_fold *f = calloc(1, sizeof *f);
    if (!f)
        return BB_ENOMEM;
    if (g_n_fold < 8)
        g_fold[g_n_fold++] = f;
    *out = f;
    return BB_OK;
}

static void fold_destroy(void *inst)
{
    for (int i = 0; i < g_n_fold; i++)
        if (g_fold[i] == inst)
            g_fold[i] = g_fold[--g_n_fold];
    free(inst);
}

static bb_dispatch_result fold_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                        bb_value **out, bb_error *err)
{
    (void)ctx;
    fx_fold *f = inst;
    const bb_value *b = call->inputs[0];
    const bb_value *meta = call->n_inputs > 1 ? call->inputs[1] : NULL;
    if (!b || b->type->kind != BB_VK_RESPONSE_BATCH) {
        bb_error_set(err, BB_ETYPE, "Contribute: want a ResponseBatch");
        return BB_DISPATCH_NOW_ERR;
    }
    if (f->calls < FX_FOLD_CALLS) {
        f->sizes[f->calls] = b->u.batch.n;
        f->tags[f->calls] = meta && meta->type == &BB_TYPE_REQUEST_ID ? meta->u.u64 : 0;
    }
    f->calls++;
    for (size_t i = 0; i < b->u.batch.n; i++) {
        const bb_value *v = b->u.batch.items[i];
        uint64_t x = v->type->kind == BB_VK_U64 ? v->u.u64 : 0;
        if (x == FX_FOLD_REFUSED) {
            bb_error_set(err, BB_EINVAL, "Contribute: %llu is refused", (unsigned long long)x);
            return BB_DISPATCH_NOW_ERR;
        }
        f->sum += x;
        f->count++;
    }
    out[0] = bb_value_u64(&BB_TYPE_COMMAND_ID, f->count);
    return BB_DISPATCH_NOW_OK;
}

static int fold_snapshot(void *inst, uint8_t **out, size_t *len, bb_error *err)
{
    (void)err;
    const fx_fold *f = inst;
    *out = malloc(16);
    if (!*out)
        return BB_ENOMEM;
    memcpy(*out, &f->sum, 8);
    memcpy(*out + 8, &f->count, 8);
    *len = 16;
    return BB_OK;
}

static int fold_restore(void *inst, const uint8_t *data, size_t len, bb_error *err)
{
    fx_fold *f = inst;
    if (len != 16)
        return bb_error_set(err, BB_EDECODE, "test::Fold: bad snapshot");
    memcpy(&f->sum, data, 8);
    memcpy(&f->count, data + 8, 8);
    return BB_OK;
}

static const bb_component_type FOLD = {
    .struct_size = sizeof(bb_component_type),
    .abi_major = BB_PLUGIN_ABI_MAJOR,
    .type_name = "test::Fold",
    .role = BB_ROLE_AGGREGATOR,
    .opsets = FOLD_SETS,
    .n_opsets = 1,
    .create = fold_create,
    .destroy = fold_destroy,
    .dispatch = fold_dispatch,
    .snapshot = fold_snapshot,
    .restore = fold_restore,
};

/* test::Selector */
static const bb_op_decl SEL_OPS[] = {{"Sample", ANY1, 1, PEERS_1, 1, NULL}};
static const bb_opset_decl SEL_SETS[] = {{"ai.bytesandbrains.role.peer_selector", 1, SEL_OPS, 1}};

static bb_dispatch_result sel_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                       bb_value **out, bb_error *err)
{
    (void)inst, (void)err;
    const char *target = call->node ? bb_node_attr_string(call->node, "target", "Client") : "Client";
    bb_value *peers[16];
    size_t n = ctx->api->peers_running(ctx, target, peers, 16);
    if (n > 16)
        n = 16;
    out[0] = bb_value_list(&BB_TYPE_PEER_ID_VEC, peers, n);
    return BB_DISPATCH_NOW_OK;
}

static const bb_component_type SEL = {
    .struct_size = sizeof(bb_component_type),
    .abi_major = BB_PLUGIN_ABI_MAJOR,
    .type_name = "test::Selector",
    .role = BB_ROLE_PEER_SELECTOR,
    .opsets = SEL_SETS,
    .n_opsets = 1,
    .create = agg_create,
    .destroy = free,
    .dispatch = sel_dispatch,
};

/* test::Backend */
static const bb_op_decl BK_OPS[] = {
    {"Add", ANY2, 2, F32_1, 1, NULL},
    {"Relu", ANY1, 1, F32_1, 1, NULL},
};
static const bb_opset_decl BK_SETS[] = {{"ai.onnx", 20, BK_OPS, 2}};

static bb_dispatch_result bk_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                      bb_value **out, bb_error *err)
{
    (void)inst, (void)ctx;
    const bb_value *a = call->inputs[0];
    if (!a || a->type->kind != BB_VK_TENSOR || a->u.tensor.dtype != BB_DT_FLOAT) {
        bb_error_set(err, BB_ETYPE, "backend: f32 tensors only");
        return BB_DISPATCH_NOW_ERR;
    }
    size_t n = bb_tensor_numel(a);
    float *r = malloc((n ? n : 1) * sizeof *r);
    const float *x = bb_tensor_f32(a);
    if (strcmp(call->op_type, "Add") == 0) {
        const bb_value *b = call->inputs[1];
        if (!b || bb_tensor_numel(b) != n) {
            free(r);
            bb_error_set(err, BB_ETYPE, "Add: shape mismatch");
            return BB_DISPATCH_NOW_ERR;
        }
        for (size_t i = 0; i < n; i++)
            r[i] = x[i] + bb_tensor_f32(b)[i];
    } else {
        for (size_t i = 0; i < n; i++)
            r[i] = x[i] > 0 ? x[i] : 0;
    }
    out[0] = fx_f32(r, n);
    free(r);
    return BB_DISPATCH_NOW_OK;
}

static int bk_materialize(void *inst, uint64_t hash, bb_buffer *payload, bb_value **out,
                          bb_error *err)
{
    (void)inst, (void)hash;
    g_materialized++;
    return bb_value_decode_tensor_buf(payload, NULL, out, err);
}

static const bb_component_type BACKEND = {
    .struct_size = sizeof(bb_component_type),
    .abi_major = BB_PLUGIN_ABI_MAJOR,
    .type_name = "test::Backend",
    .role = BB_ROLE_BACKEND,
    .opsets = BK_SETS,
    .n_opsets = 1,
    .create = agg_create,
    .destroy = free,
    .dispatch = bk_dispatch,
    .materialize_from_wire = bk_materialize,
};

/* test::Dep */
static const bb_op_decl DEP_OPS[] = {{"Plus", ANY2, 2, F32_1, 1, NULL}};
static const bb_opset_decl DEP_SETS[] = {{"test.dep", 1, DEP_OPS, 1}};
static const bb_dependency_decl DEP_DEPS[] = {{BB_ROLE_BACKEND, "compute"}};

static int dep_create(const bb_create_args *a, void **out, bb_error *err)
{
    const bb_component_type *t = NULL;
    void *d = a->ctx->api->dependency(a->ctx, "compute", &t);
    if (!d || !t)
        return bb_error_set(err, BB_ESTATE, "dep: compute not created first");
    return agg_create(a, out, err);
}

static bb_dispatch_result dep_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                       bb_value **out, bb_error *err)
{
    (void)inst;
    if (ctx->api->call_dependency(ctx, "compute", "Add", call->inputs, 2, out, 1, err) != BB_OK)
        return BB_DISPATCH_NOW_ERR;
    return BB_DISPATCH_NOW_OK;
}

static const bb_component_type DEP = {
    .struct_size = sizeof(bb_component_type),
    .abi_major = BB_PLUGIN_ABI_MAJOR,
    .type_name = "test::Dep",
    .role = BB_ROLE_PROTOCOL,
    .opsets = DEP_SETS,
    .n_opsets = 1,
    .deps = DEP_DEPS,
    .n_deps = 1,
    .create = dep_create,
    .destroy = free,
    .dispatch = dep_dispatch,
};

static const bb_component_type *const TYPES[] = {&ECHO, &OLD_ECHO, &MODEL,   &AGG,
                                                  &FOLD, &SEL,      &BACKEND, &DEP};

/* Slot configs: slots named model_<d>_<n> get "<d>_<n>" (delta, samples). */
static const char *slot_config(void *ud, const char *slot)
{
    (void)ud;
    if (strncmp(slot, "model_", 6) == 0)
        return slot + 6;
    if (strcmp(slot, "failing") == 0)
        return "fail";
    return NULL;
}

static const bb_type_array TYPE_ARRAY = {TYPES, sizeof TYPES / sizeof TYPES[0]};

const bb_engine_registry *fx_registry(void)
{
    static bb_engine_registry reg = {.slot_config = slot_config};
    if (!reg.types.find)
        bb_type_source_from_array(&reg.types, &TYPE_ARRAY);
    return &reg;
}

/* ---- envelopes --------------------------------------------------------------------------------- */

#define FX_MAX_FILLS 16
#define FX_MAX_ADDRS 8

uint8_t *fx_envelope(const fx_env *in, size_t *len)
{
    Bb__Core__WireEnvelope env = BB__CORE__WIRE_ENVELOPE__INIT;
    Bb__Core__SlotFill fills[FX_MAX_FILLS], *fp[FX_MAX_FILLS];
    uint8_t sfx[FX_MAX_FILLS][16];
    size_t nf = in->n_fills < FX_MAX_FILLS ? in->n_fills : FX_MAX_FILLS;
    for (size_t i = 0; i < nf; i++) {
        const fx_fill *f = &in->fills[i];
        bb__core__slot_fill__init(&fills[i]);
        size_t sl = f->suffix_len;
        if (!f->suffix)
            bb_suffix_site(f->site, sfx[i], sizeof sfx[i], &sl, NULL);
        fills[i].dest_suffix.data = f->suffix ? (uint8_t *)f->suffix : sfx[i];
        fills[i].dest_suffix.len = sl;
        fills[i].payload.data = (uint8_t *)f->payload;
        fills[i].payload.len = f->len;
        fills[i].trigger_only = f->trigger_only;
        fp[i] = &fills[i];
    }
    env.n_fills = nf;
    env.fills = fp;
    Bb__Core__WireCorrelation c = BB__CORE__WIRE_CORRELATION__INIT;
    if (in->corr) {
        c.kind = (Bb__Core__CorrelationKind)in->corr;
        c.wire_req_id = in->wire_req_id;
        env.correlation = &c;
    }
    env.deadline_ns = in->deadline_ns;
    env.sent_at_ns = in->sent_at_ns;
    ProtobufCBinaryData src[FX_MAX_ADDRS];
    size_t na = in->n_src < FX_MAX_ADDRS ? in->n_src : FX_MAX_ADDRS;
    for (size_t i = 0; i < na; i++) {
        src[i].data = (uint8_t *)in->src[i].data;
        src[i].len = in->src[i].len;
    }
    env.n_src_peer_addresses = env.n_dest_peer_addresses = na;
    env.src_peer_addresses = env.dest_peer_addresses = src;
    *len = bb__core__wire_envelope__get_packed_size(&env);
    uint8_t *out = malloc(*len ? *len : 1);
    if (out)
        bb__core__wire_envelope__pack(&env, out);
    return out;
}

uint8_t *fx_envelope_u64(uint64_t site, uint64_t v, uint64_t sent_at, uint64_t deadline, size_t *len)
{
    uint8_t payload[8];
    for (int i = 0; i < 8; i++)
        payload[i] = (uint8_t)(v >> (8 * i)); /* U64 on the wire: 8 bytes little-endian */
    fx_fill f = {.site = site, .payload = payload, .len = 8};
    fx_env env = {.fills = &f, .n_fills = 1, .sent_at_ns = sent_at, .deadline_ns = deadline};
    return fx_envelope(&env, len);
}

/* ---- engines ------------------------------------------------------------------------------------ */

bb_peerid fx_taught_peer(uint16_t n)
{
    uint8_t s[32] = {0};
    s[0] = (uint8_t)n;
    s[1] = (uint8_t)(n >> 8);
    s[31] = 0x77;
    bb_peerid id;
    bb_peerid_from_seed(s, NULL, &id, NULL);
    return id;
}

bb_peerid fx_peer(uint8_t seed)
{
    uint8_t s[32] = {0};
    s[0] = seed;
    s[31] = 0x5a;
    bb_peerid id;
    bb_peerid_from_seed(s, NULL, &id, NULL);
    return id;
}

size_t fx_addr(uint16_t port, uint8_t out[32])
{
    char text[64];
    size_t len = 0;
    snprintf(text, sizeof text, "/ip4/127.0.0.1/tcp/%u", port);
    bb_multiaddr_parse(text, out, 32, &len, NULL);
    return len;
}

int fx_know(bb_engine *e, uint8_t seed)
{
    bb_peerid p = fx_peer(seed);
    uint8_t a[32];
    bb_engine_addr addr = {a, fx_addr((uint16_t)(7000 + seed), a)};
    return bb_engine_add_peer(e, &p, &addr, 1, NULL);
}

bb_engine *fx_engine(uint8_t seed, uint16_t port, const bb_engine_config *base)
{
    bb_engine_config cfg;
    if (base)
        cfg = *base;
    else
        bb_engine_config_init(&cfg);
    cfg.peer = fx_peer(seed);
    uint8_t a[32];
    bb_engine_addr addr = {a, fx_addr(port, a)};
    cfg.addrs = &addr;
    cfg.n_addrs = 1;
    if (!cfg.seed)
        cfg.seed = seed;
    return bb_engine_new(&cfg, NULL);
}

int fx_install(bb_engine *e, bb_model *m, const char *targets, bb_error *err)
{
    char buf[256];
    const char *t[8];
    size_t n = 0;
    snprintf(buf, sizeof buf, "%s", targets);
    for (char *p = strtok(buf, ","); p && n < 8; p = strtok(NULL, ","))
        t[n++] = p;
    return bb_engine_install(e, m, t, n, fx_registry(), err);
}

/* ---- logs ------------------------------------------------------------------------------------------ */

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

uint8_t *fx_send_bytes(const bb_step *s)
{
    uint8_t *b = malloc(s->u.send.len ? s->u.send.len : 1);
    if (!b)
        return NULL;
    const bb_send_gather *g = s->u.send.gather;
    if (!g) {
        memcpy(b, s->u.send.bytes, s->u.send.len);
        return b;
    }
    size_t at = 0;
    for (size_t i = 0; i < g->n_iov; i++) {
        memcpy(b + at, g->iov[i].data, g->iov[i].len);
        at += g->iov[i].len;
    }
    return b;
}

void fx_log_add(fx_log *l, const bb_step *s)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
    }
    fx_rec *r = &l->v[l->n++];
    memset(r, 0, sizeof *r);
    r->kind = s->kind;
    r->exec = s->exec_id;
    switch (s->kind) {
    case BB_STEP_APP_EVENT:
        r->a = dup_or_null(s->u.app.target);
        r->b = dup_or_null(s->u.app.topic);
        r->value = bb_value_ref(s->u.app.value);
        break;
    case BB_STEP_OP_FAILED:
        r->a = dup_or_null(s->u.op_failed.node);
        r->b = dup_or_null(s->u.op_failed.op_type);
        r->c = dup_or_null(s->u.op_failed.message);
        r->d = dup_or_null(s->u.op_failed.domain);
        break;
    case BB_STEP_PEER_RESOLVE_FAILED:
        r->a = dup_or_null(s->u.resolve.node);
        r->peer = s->u.resolve.peer;
        r->count = s->u.resolve.has_peer;
        break;
    case BB_STEP_PEER_DOWN:
    case BB_STEP_PEER_UP:
        r->peer = s->u.peer.peer;
        break;
    case BB_STEP_BOOTSTRAP_COMPLETE:
    case BB_STEP_BOOTSTRAP_FAILED:
    case BB_STEP_WAITING_ON_BOOTSTRAP:
        r->a = dup_or_null(s->u.bootstrap.target);
        r->b = dup_or_null(s->u.bootstrap.slot);
        r->c = dup_or_null(s->u.bootstrap.message);
        break;
    case BB_STEP_INFRA_EVENT:
        r->infra = s->u.infra.kind;
        r->sub = s->u.infra.sub;
        r->count = s->u.infra.count;
        r->c = dup_or_null(s->u.infra.detail);
        break;
    case BB_STEP_TELEMETRY:
        r->a = dup_or_null(s->u.telemetry.name);
        r->count = s->u.telemetry.value;
        r->value = bb_value_ref(s->u.telemetry.record);
        break;
    case BB_STEP_SEND_ENVELOPE:
        r->peer = s->u.send.peer;
        r->len = s->u.send.len;
        r->count = s->u.send.n_addrs;
        if (s->u.send.len <= FX_REC_BYTES_MAX && (r->bytes = fx_send_bytes(s))) /* flattened */
            r->bytes_len = s->u.send.len;
        break;
    case BB_STEP_CYCLE_BUDGET_EXCEEDED:
        r->count = s->u.budget.ops;
        break;
    default:
        break;
    }
}

void fx_log_free(fx_log *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].bytes);
        free(l->v[i].a);
        free(l->v[i].b);
        free(l->v[i].c);
        free(l->v[i].d);
        bb_value_unref(l->v[i].value);
    }
    free(l->v);
    memset(l, 0, sizeof *l);
}

size_t fx_log_count(const fx_log *l, bb_step_kind kind)
{
    size_t n = 0;
    for (size_t i = 0; i < l->n; i++)
        n += l->v[i].kind == kind;
    return n;
}

const fx_rec *fx_log_app(const fx_log *l, const char *topic, size_t i)
{
    for (size_t k = 0; k < l->n; k++)
        if (l->v[k].kind == BB_STEP_APP_EVENT && (!topic || (l->v[k].b && strcmp(l->v[k].b, topic) == 0)) &&
            i-- == 0)
            return &l->v[k];
    return NULL;
}

const fx_rec *fx_log_nth(const fx_log *l, bb_step_kind kind, size_t i)
{
    for (size_t k = 0; k < l->n; k++)
        if (l->v[k].kind == kind && i-- == 0)
            return &l->v[k];
    return NULL;
}

const fx_rec *fx_log_infra(const fx_log *l, int infra, int sub)
{
    for (size_t k = 0; k < l->n; k++)
        if (l->v[k].kind == BB_STEP_INFRA_EVENT && l->v[k].infra == infra && (sub < 0 || l->v[k].sub == sub))
            return &l->v[k];
    return NULL;
}

/* ---- network ------------------------------------------------------------------------------------- */

int fx_net_add(fx_net *net, bb_engine *e)
{
    net->e[net->n] = e;
    memset(&net->log[net->n], 0, sizeof net->log[net->n]);
    return net->n++;
}

static int find_engine(fx_net *net, const bb_peerid *p)
{
    for (int i = 0; i < net->n; i++)
        if (bb_peerid_equal(bb_engine_peer_id(net->e[i]), p))
            return i;
    return -1;
}

void fx_net_poll(fx_net *net, int i)
{
    bb_steps s;
    bb_steps_init(&s);
    bb_engine_poll(net->e[i], net->now, &s);
    for (size_t k = 0; k < s.n; k++) {
        bb_step *st = &s.v[k];
        fx_log_add(&net->log[i], st);
        if (st->kind != BB_STEP_SEND_ENVELOPE || net->drop_all)
            continue;
        int d = find_engine(net, &st->u.send.peer);
        if (d < 0)
            continue;
        uint8_t *flat = st->u.send.gather ? fx_send_bytes(st) : NULL;
        bb_engine_deliver_envelope(net->e[d], bb_engine_peer_id(net->e[i]), NULL,
                                   flat ? flat : st->u.send.bytes, st->u.send.len, NULL);
        free(flat);
        net->delivered++;
    }
    bb_steps_free(&s);
}

int fx_net_run(fx_net *net, int max_rounds)
{
    int r;
    for (r = 0; r < max_rounds; r++) {
        bool any = false;
        for (int i = 0; i < net->n; i++) {
            if (bb_engine_next_deadline(net->e[i]) <= net->now) {
                fx_net_poll(net, i);
                any = true;
            }
        }
        if (!any)
            break;
    }
    return r;
}

void fx_net_free(fx_net *net)
{
    for (int i = 0; i < net->n; i++) {
        fx_log_free(&net->log[i]);
        bb_engine_free(net->e[i]);
    }
    net->n = 0;
}

int fx_run(bb_engine *e, fx_log *log, uint64_t now, int max_rounds)
{
    int r;
    bb_steps s;
    bb_steps_init(&s);
    for (r = 0; r < max_rounds; r++) {
        if (r && bb_engine_next_deadline(e) > now)
            break; /* always poll once: the engine learns the time */
        bb_engine_poll(e, now, &s);
        for (size_t k = 0; k < s.n; k++)
            if (log)
                fx_log_add(log, &s.v[k]);
    }
    bb_steps_free(&s);
    return r;
}
