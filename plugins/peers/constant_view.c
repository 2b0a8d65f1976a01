/*
 * constant_view.c — peers::ConstantView: a fixed list of peers from the
 * config, each a PeerId (base58 text) with optional multiaddrs:
 *
 *   {"peers": ["12D3KooW...", {"id": "12D3KooW...", "addrs": ["/ip4/10.0.0.2/tcp/7001"]}],
 *    "of_class": "Client"}
 *
 * The addresses go into the node's address book (ctx->add_peer) before the
 * first answer, so the peers it hands out are reachable. Every entry is
 * checked at create: a bad PeerId or address names the entry.
 */
#include <stdlib.h>
#include <string.h>

#include <bb/multiaddr.h>
#include <bb/peerid.h>

#include "peers.h"
#include "plugins/common/plugin_config.h"
#include "plugins/common/plugin_type.h"

#define NAME "peers::ConstantView"
#define MAX_ADDRS 16

typedef struct constant_view {
    selector sel;              /* first: the shared head */
    bb_value **ids;            /* PeerId values */
    bb_value **addrs;          /* AddressVec values, or NULL */
    size_t n;
    bool announced;            /* addresses handed to the address book */
} constant_view;

static const bb_config_decl CONFIG[] = {
    {"peers", "array", NULL,
     "the view: PeerIds (base58 text), or objects {\"id\": PeerId, \"addrs\": [multiaddr, ...]}"},
    {"of_class", "string", "null",
     "the peer class the listed peers run; a Sample recorded with another of_class is refused"},
};

static void cv_destroy(void *inst)
{
    constant_view *v = inst;
    for (size_t i = 0; i < v->n; i++) {
        bb_value_unref(v->ids[i]);
        bb_value_unref(v->addrs[i]);
    }
    free(v->ids);
    free(v->addrs);
    free(v);
}

static int parse_addrs(const constant_view *v, size_t i, const cJSON *list, bb_value **out,
                       bb_error *err)
{
    int n = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : -1;
    if (n < 0 || n > MAX_ADDRS)
        return bb_error_set(err, BB_ECONFIG, "%s: peers[%zu].addrs must be a list of at most %d "
                            "multiaddrs", v->sel.who, i, MAX_ADDRS);
    bb_value *items[MAX_ADDRS];
    int made = 0, rc = BB_OK; /* items[0 .. made) exist */
    while (!rc && made < n) {
        const cJSON *a = cJSON_GetArrayItem(list, made);
        uint8_t *bin = NULL;
        size_t len = 0;
        bb_error e = {0};
        if (!cJSON_IsString(a) || bb_multiaddr_parse_alloc(a->valuestring, &bin, &len, &e))
            rc = bb_error_set(err, BB_ECONFIG, "%s: peers[%zu].addrs[%d]: %s", v->sel.who, i,
                              made, cJSON_IsString(a) ? e.msg : "not a string");
        else if (!(items[made] = bb_value_bytes(&BB_TYPE_MULTIADDRESS, bin, len)))
            rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory", v->sel.who);
        else
            made++;
        free(bin);
    }
    if (rc) {
        for (int j = 0; j < made; j++)
            bb_value_unref(items[j]);
        return rc;
    }
    *out = bb_value_list(&BB_TYPE_ADDRESS_VEC, items, (size_t)n);
    return *out ? BB_OK : bb_error_set(err, BB_ENOMEM, "%s: out of memory", v->sel.who);
}

static int parse_peer(constant_view *v, size_t i, const cJSON *e, bb_error *err)
{
    const cJSON *id = cJSON_IsObject(e) ? cJSON_GetObjectItemCaseSensitive(e, "id") : e;
    const cJSON *addrs = cJSON_IsObject(e) ? cJSON_GetObjectItemCaseSensitive(e, "addrs") : NULL;
    bb_peerid pid;
    bb_error pe = {0};
    if (!cJSON_IsString(id) || bb_peerid_from_text(id->valuestring, &pid, &pe))
        return bb_error_set(err, BB_ECONFIG, "%s: peers[%zu] is not a PeerId%s%s", v->sel.who, i,
                            pe.msg[0] ? ": " : "", pe.msg);
    for (size_t k = 0; k < v->n; k++)
        if (v->ids[k]->u.bytes.len == pid.len && !memcmp(v->ids[k]->u.bytes.data, pid.bytes, pid.len))
            return bb_error_set(err, BB_ECONFIG, "%s: peers[%zu] repeats %s", v->sel.who, i,
                                id->valuestring);
    bb_value *a = NULL;
    if (addrs) {
        int rc = parse_addrs(v, i, addrs, &a, err);
        if (rc)
            return rc;
    }
    v->ids[v->n] = bb_value_bytes(&BB_TYPE_PEER_ID, pid.bytes, pid.len);
    v->addrs[v->n] = a;
    if (!v->ids[v->n]) {
        bb_value_unref(a);
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", v->sel.who);
    }
    v->n++;
    return BB_OK;
}

static int cv_create(const bb_create_args *args, void **out, bb_error *err)
{
    bbp_config cfg;
    int rc = bbp_config_load(&cfg, args, NAME, CONFIG, BBP_COUNT(CONFIG), err);
    if (rc)
        return rc;
    constant_view *v = calloc(1, sizeof *v);
    cJSON *owned = NULL;
    const cJSON *list = bbp_config_get(&cfg, "peers", &owned);
    int n = list && cJSON_IsArray(list) ? cJSON_GetArraySize(list) : -1;
    if (!v)
        rc = bb_error_set(err, BB_ENOMEM, NAME ": out of memory");
    else if (n < 0 || (size_t)n > PEERS_MAX_VIEW)
        rc = bb_error_set(err, BB_ECONFIG, "%s: config key 'peers' must be a list of at most %u "
                          "peers", cfg.who, PEERS_MAX_VIEW);
    if (!rc) {
        rc = selector_init(&v->sel, &cfg, "of_class", args->seed, err);
        v->ids = calloc((size_t)n + 1, sizeof *v->ids);
        v->addrs = calloc((size_t)n + 1, sizeof *v->addrs);
        if (!rc && (!v->ids || !v->addrs))
            rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory", cfg.who);
    }
    for (int i = 0; !rc && i < n; i++)
        rc = parse_peer(v, (size_t)i, cJSON_GetArrayItem(list, i), err);
    cJSON_Delete(owned);
    bbp_config_free(&cfg);
    if (rc) {
        if (v)
            cv_destroy(v);
        return rc;
    }
    *out = v;
    return BB_OK;
}

/* The addresses, once, into the node's address book. */
static int announce(constant_view *v, bb_ctx *ctx, bb_error *err)
{
    if (v->announced || !ctx || !ctx->api)
        return BB_OK;
    if (ctx->api->struct_size < offsetof(bb_ctx_api, add_peer) + sizeof ctx->api->add_peer ||
        !ctx->api->add_peer) {
        if (ctx->api->log)
            ctx->api->log(ctx, BB_LOG_WARN, NAME ": this host cannot take peer addresses; "
                                            "the listed peers must already be known");
        v->announced = true;
        return BB_OK;
    }
    for (size_t i = 0; i < v->n; i++) {
        bb_error e = {0};
        if (v->addrs[i] && ctx->api->add_peer(ctx, v->ids[i], v->addrs[i], &e))
            return bb_error_set(err, e.code, "%s: peers[%zu]: %s", v->sel.who, i, e.msg);
    }
    v->announced = true;
    return BB_OK;
}

static int cv_view(void *inst, bb_ctx *ctx, const char *node_class, bb_value ***out, size_t *n,
                   bb_error *err)
{
    constant_view *v = inst;
    (void)node_class;
    int rc = announce(v, ctx, err);
    if (rc)
        return rc;
    *out = malloc((v->n ? v->n : 1) * sizeof **out);
    if (!*out)
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", v->sel.who);
    for (size_t i = 0; i < v->n; i++)
        (*out)[i] = bb_value_ref(v->ids[i]);
    *n = v->n;
    return BB_OK;
}

static bb_dispatch_result cv_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                      bb_value **outputs, bb_error *err)
{
    constant_view *v = inst;
    return selector_dispatch(&v->sel, v, cv_view, ctx, call, outputs, err);
}

/* Component bootstrap: make the peers reachable before the body runs. */
static bb_dispatch_result cv_bootstrap(void *inst, bb_ctx *ctx, bb_completion *c, bb_error *err)
{
    (void)c;
    return announce(inst, ctx, err) ? BB_DISPATCH_NOW_ERR : BB_DISPATCH_NOW_OK;
}

const bb_component_type PEERS_CONSTANT_VIEW = {
    BBP_TYPE_ABI,
    .type_name = NAME,
    .role = BB_ROLE_PEER_SELECTOR,
    .doc = "a fixed list of peers (PeerIds with addresses) from the config; All and Random{n}",
    .opsets = SELECTOR_OPSETS,
    .n_opsets = SELECTOR_N_OPSETS,
    .config = CONFIG,
    .n_config = BBP_COUNT(CONFIG),
    .create = cv_create,
    .destroy = cv_destroy,
    .dispatch = cv_dispatch,
    .bootstrap = cv_bootstrap,
};
