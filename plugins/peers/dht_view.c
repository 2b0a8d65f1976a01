/*
 * dht_view.c — peers::Dht, the selector over a DHT: it answers
 * SelectParams::NearKey{key, n} with the n live nodes closest to the key,
 * and Random{n} / All from the DHT's routing table.
 *
 * The DHT is the Protocol bound at slot "dht" (dht::Kademlia, or any
 * protocol with the same two ops):
 *   Lookup(key) -> peers     the k closest live nodes, closest first (an
 *                            iterative lookup that asks other nodes)
 *   Contacts() -> peers      the routing table, at once
 * NearKey asks Lookup through the control plane — a request to this
 * node's own "dht" component, which answers when its lookup is done (bb-
 * plugin(7) CONTROL PLANE) — and answers the first n; the Select op
 * completes LATER. Contacts is a synchronous dependency call.
 *
 * The key (Select's input) is a Bytes, PeerId or Multiaddress value's
 * bytes, or any other value's wire encoding; the DHT hashes it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peers.h"
#include "plugins/common/plugin_config.h"
#include "plugins/common/plugin_type.h"

#define NAME "peers::Dht"
#define DHT_SLOT "dht"
#define MAX_PENDING 64
#define MS 1000000ull

typedef struct pending {
    uint64_t token;
    bb_completion *c;
    int64_t n;
} pending;

typedef struct dht_view {
    selector sel;
    uint64_t timeout_ns;
    pending p[MAX_PENDING];
    size_t n_pending;
} dht_view;

static const bb_config_decl CONFIG[] = {
    {"of_class", "string", "null",
     "the peer class of the DHT's nodes; a node sampling another class is refused"},
    {"timeout_ms", "int", "10000", "how long a NearKey lookup may take"},
};

static const bb_dependency_decl DEPS[] = {{BB_ROLE_PROTOCOL, DHT_SLOT}};

static int dv_create(const bb_create_args *args, void **out, bb_error *err)
{
    bbp_config cfg;
    int rc = bbp_config_load(&cfg, args, NAME, CONFIG, BBP_COUNT(CONFIG), err);
    if (rc)
        return rc;
    dht_view *v = calloc(1, sizeof *v);
    int64_t timeout = 0;
    if (!v)
        rc = bb_error_set(err, BB_ENOMEM, NAME ": out of memory");
    if (!rc)
        rc = selector_init(&v->sel, &cfg, "of_class", args->seed, err);
    if (!rc)
        rc = bbp_config_int(&cfg, "timeout_ms", 1, 3600 * 1000, &timeout, err);
    bbp_config_free(&cfg);
    if (rc) {
        free(v);
        return rc;
    }
    v->timeout_ns = (uint64_t)timeout * MS;
    *out = v;
    return BB_OK;
}

/* Pending lookups die with the engine that holds their handles. */
static void dv_destroy(void *inst) { free(inst); }

static int contacts(void *inst, bb_ctx *ctx, const char *node_class, bb_value ***out, size_t *n,
                    bb_error *err)
{
    (void)node_class;
    dht_view *v = inst;
    bb_value *table = NULL;
    int rc = ctx && ctx->api ? ctx->api->call_dependency(ctx, DHT_SLOT, "Contacts", NULL, 0,
                                                         &table, 1, err)
                             : bb_error_set(err, BB_ESTATE, "%s: needs the engine", v->sel.who);
    if (rc)
        return rc;
    if (!table || table->type->kind != BB_VK_PEER_ID_VEC) {
        bb_value_unref(table);
        return bb_error_set(err, BB_ETYPE, "%s: the dht's Contacts answered no PeerIdVec",
                            v->sel.who);
    }
    *n = table->u.list.n;
    *out = calloc(*n ? *n : 1, sizeof **out);
    for (size_t i = 0; *out && i < *n; i++)
        (*out)[i] = bb_value_ref(table->u.list.items[i]);
    bb_value_unref(table);
    return *out ? BB_OK : bb_error_set(err, BB_ENOMEM, "%s: out of memory", v->sel.who);
}

static bb_dispatch_result near_key(dht_view *v, bb_ctx *ctx, const select_params *p,
                                   const bb_dispatch_call *call, bb_error *err)
{
    const uint8_t *key = NULL;
    size_t len = 0;
    uint8_t *owned = NULL;
    int rc = BB_OK;
    if (v->n_pending == MAX_PENDING)
        rc = bb_error_set(err, BB_EFULL, "%s: %d lookups already under way", v->sel.who,
                          MAX_PENDING);
    else if (!bbp_ctx_has_control(ctx))
        rc = bb_error_set(err, BB_EUNSUPPORTED, "%s: this host has no control plane (ABI 2.2)",
                          v->sel.who);
    else if (bbp_key_bytes(p->key, &key, &len, &owned) != BB_OK)
        rc = bb_error_set(err, BB_EINVAL, "%s: NearKey needs a key (Select's input)", v->sel.who);
    uint64_t token = 0;
    if (!rc)
        rc = ctx->api->send_fill(ctx, NULL, DHT_SLOT, "Lookup", key, len, v->timeout_ns, &token,
                                 err);
    free(owned);
    if (rc)
        return BB_DISPATCH_NOW_ERR;
    v->p[v->n_pending++] = (pending){token, call->completion, p->n};
    return BB_DISPATCH_LATER;
}

static void dv_on_answer(void *inst, bb_ctx *ctx, uint64_t token, int status, const uint8_t *data,
                         size_t len)
{
    (void)ctx;
    dht_view *v = inst;
    size_t i = 0;
    while (i < v->n_pending && v->p[i].token != token)
        i++;
    if (i == v->n_pending)
        return;
    pending q = v->p[i];
    v->p[i] = v->p[--v->n_pending];
    bb_value *found = NULL, *out = NULL;
    bb_error err = {0};
    if (status == BB_OK &&
        bb_value_decode(BB_TYPE_PEER_ID_VEC.wire_hash, data, len, &BB_DECODE_LIMITS_DEFAULT,
                        &found, &err) == BB_OK) {
        size_t k = (uint64_t)q.n < found->u.list.n ? (size_t)q.n : found->u.list.n;
        bb_value *first[BB_VALUE_LIST_INLINE];
        bb_value **ids = k <= BB_VALUE_LIST_INLINE ? first : malloc(k * sizeof *ids);
        for (size_t j = 0; ids && j < k; j++)
            ids[j] = bb_value_ref(found->u.list.items[j]); /* closest first */
        out = ids ? bb_value_list(&BB_TYPE_PEER_ID_VEC, ids, k) : NULL;
        if (ids != first)
            free(ids);
        bb_value_unref(found);
        if (out) {
            bb_complete_ok(q.c, &out, 1);
            return;
        }
    }
    char msg[BB_ERROR_MSG_MAX];
    if (status == BB_OK)
        snprintf(msg, sizeof msg, "%s: the dht's lookup answered no PeerIdVec: %.200s",
                 v->sel.who, err.msg[0] ? err.msg : "out of memory");
    else
        snprintf(msg, sizeof msg, "%s: the dht's lookup failed: %s: %.*s", v->sel.who,
                 bb_status_name(status), (int)(len < 200 ? len : 200), (const char *)data);
    bb_complete_err(q.c, status != BB_OK ? status : BB_EDECODE, msg);
}

static bb_dispatch_result dv_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                      bb_value **outputs, bb_error *err)
{
    dht_view *v = inst;
    select_params p;
    if (selector_params(&v->sel, call, &p, err))
        return BB_DISPATCH_NOW_ERR;
    if (p.kind == SELECT_NEAR_KEY)
        return near_key(v, ctx, &p, call, err);
    return selector_dispatch(&v->sel, v, contacts, ctx, call, outputs, err);
}

const bb_component_type PEERS_DHT = {
    BBP_TYPE_ABI,
    .type_name = NAME,
    .role = BB_ROLE_PEER_SELECTOR,
    .doc = "the nodes of a DHT (the Protocol at slot \"dht\"): NearKey{key, n} through its "
           "lookup, All and Random{n} from its routing table",
    .opsets = SELECTOR_OPSETS,
    .n_opsets = SELECTOR_N_OPSETS,
    .deps = DEPS,
    .n_deps = BBP_COUNT(DEPS),
    .config = CONFIG,
    .n_config = BBP_COUNT(CONFIG),
    .create = dv_create,
    .destroy = dv_destroy,
    .dispatch = dv_dispatch,
    .on_answer = dv_on_answer,
};
