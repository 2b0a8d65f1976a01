/*
 * connected.c — peers::Connected: the live peers that announced, in the
 * transport handshake, that they run a given target (ctx->peers_running).
 * This is how a server finds its clients without listing them: a client
 * that connects joins the view, one that disconnects or goes down
 * (PeerDown) leaves it, and comes back when it reconnects.
 *
 * The target is the config's "target", else the of_class the Sample node
 * was recorded with (the class the compiler routes its sends to).
 *
 * min_peers (Flower's min_available_clients): while fewer peers run the
 * target, the view fails, so a federated round does not start with the
 * first client that connected — every round of a comparison then has the
 * same clients from the first. min_peers_first raises that floor until the
 * view has once been answered (the first round): a server of 100 clients
 * starts when all 100 have joined, then goes on while min_peers remain.
 * The first view is this instance's: a restarted server waits again (its
 * clients reconnect to it).
 */
#include <stdlib.h>
#include <string.h>

#include "peers.h"
#include "plugins/common/plugin_config.h"
#include "plugins/common/plugin_type.h"

#define NAME "peers::Connected"

typedef struct connected {
    selector sel; /* of_class = the configured target */
    int64_t min_peers;
    int64_t min_peers_first; /* before the first view answered (at least min_peers) */
    bool answered;           /* a view has been answered */
} connected;

static const bb_config_decl CONFIG[] = {
    {"target", "string", "null",
     "the target (peer class) the peers must have announced, e.g. \"Client\"; default: the "
     "of_class the Sample node was recorded with"},
    {"min_peers", "int", "0",
     "Sample and CurrentView fail while fewer peers run the target (a federated round "
     "waits until that many clients are connected)"},
    {"min_peers_first", "int", "null",
     "the same floor until the first view is answered (the first round waits for this many "
     "clients, later rounds for min_peers); default: min_peers"},
};

static int conn_create(const bb_create_args *args, void **out, bb_error *err)
{
    bbp_config cfg;
    int rc = bbp_config_load(&cfg, args, NAME, CONFIG, BBP_COUNT(CONFIG), err);
    if (rc)
        return rc;
    connected *c = calloc(1, sizeof *c);
    if (!c)
        rc = bb_error_set(err, BB_ENOMEM, NAME ": out of memory");
    else
        rc = selector_init(&c->sel, &cfg, "target", args->seed, err);
    if (!rc)
        rc = bbp_config_int(&cfg, "min_peers", 0, PEERS_MAX_VIEW, &c->min_peers, err);
    double first = 0;
    bool has_first = false;
    if (!rc)
        rc = bbp_config_number(&cfg, "min_peers_first", true, 0, PEERS_MAX_VIEW, &first,
                               &has_first, err);
    if (!rc)
        c->min_peers_first = has_first && (int64_t)first > c->min_peers ? (int64_t)first
                                                                        : c->min_peers;
    bbp_config_free(&cfg);
    if (rc) {
        free(c);
        return rc;
    }
    *out = c;
    return BB_OK;
}

static void conn_destroy(void *inst) { free(inst); }

static int conn_view(void *inst, bb_ctx *ctx, const char *node_class, bb_value ***out, size_t *n,
                     bb_error *err)
{
    connected *c = inst;
    const char *target = c->sel.of_class[0] ? c->sel.of_class : node_class;
    if (!target)
        return bb_error_set(err, BB_ECONFIG,
                            "%s: no target: set config 'target', or record the Sample with "
                            "of_class",
                            c->sel.who);
    if (!ctx || !ctx->api || !ctx->api->peers_running)
        return bb_error_set(err, BB_ESTATE, "%s: needs the engine's peer table", c->sel.who);
    size_t total = ctx->api->peers_running(ctx, target, NULL, 0);
    if (total > PEERS_MAX_VIEW)
        total = PEERS_MAX_VIEW;
    if (!c->answered && c->min_peers_first > c->min_peers && total < (size_t)c->min_peers_first)
        return bb_error_set(err, BB_ESTATE,
                            "%s: %zu peers run '%s', fewer than min_peers_first %lld (the first "
                            "round waits for them)",
                            c->sel.who, total, target, (long long)c->min_peers_first);
    if (total < (size_t)c->min_peers)
        return bb_error_set(err, BB_ESTATE, "%s: %zu peers run '%s', fewer than min_peers %lld",
                            c->sel.who, total, target, (long long)c->min_peers);
    *out = calloc(total ? total : 1, sizeof **out);
    if (!*out)
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", c->sel.who);
    size_t got = ctx->api->peers_running(ctx, target, *out, total);
    *n = got < total ? got : total;
    c->answered = true;
    return BB_OK;
}

static bb_dispatch_result conn_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                        bb_value **outputs, bb_error *err)
{
    connected *c = inst;
    return selector_dispatch(&c->sel, c, conn_view, ctx, call, outputs, err);
}

const bb_component_type PEERS_CONNECTED = {
    BBP_TYPE_ABI,
    .type_name = NAME,
    .role = BB_ROLE_PEER_SELECTOR,
    .doc = "the live connected peers that announced running a target (e.g. Client); All and "
           "Random{n}",
    .opsets = SELECTOR_OPSETS,
    .n_opsets = SELECTOR_N_OPSETS,
    .config = CONFIG,
    .n_config = BBP_COUNT(CONFIG),
    .create = conn_create,
    .destroy = conn_destroy,
    .dispatch = conn_dispatch,
};
