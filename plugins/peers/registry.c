/*
 * registry.c — peers::GlobalRegistry: a registry of live nodes, kept by
 * one node (the registry server, "serve": true, typically the program's
 * Registry class) and used by the others (its clients, "registry": where
 * it is).
 *
 * Clients announce their node — its PeerId, the targets it runs (its peer
 * classes) and its addresses — with a time to live, and renew every third
 * of it; a node that stops renewing (dead, partitioned, shut down) drops
 * out when its last announcement expires, within one TTL. Sample (Random
 * {n}) and CurrentView (All) of a client ask the registry (a control-plane
 * request, answered when the registry answers: the op completes LATER) for
 * live nodes of the class the node samples (its of_class tag, else the
 * config's of_class, else any), learn their addresses into the address book
 * and answer their PeerIds. On the registry node they answer at once from
 * its table.
 *
 * Control plane (bb-peers.GlobalRegistry.atomic, requests to the server):
 *   Announce: uvarint ttl_ms, uvarint n, n x delimited(class name)
 *             -> empty. The addresses are the ones the announcer's
 *             envelopes carried (the engine's address book), the PeerId the
 *             transport authenticated: a node cannot announce another.
 *   Query:    delimited(class, "" = any), uvarint n (0 = all)
 *             -> uvarint count, count x record (record.c; aux = the
 *             entry's remaining lifetime in ms), drawn uniformly, without
 *             the asker.
 * Bounds: at most max_entries entries (a full table refuses newcomers
 * after dropping the expired), 8 classes of 63 bytes per entry, 1024
 * entries per answer, 64 Samples waiting per client, a TTL of at most a
 * day. The table is soft state and not snapshotted: after a restart the
 * clients fill it again within a third of their TTL.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peers.h"
#include "plugins/common/plugin_config.h"
#include "plugins/common/plugin_type.h"

#define NAME "peers::GlobalRegistry"
#define MAX_CLASSES 8
#define CLASS_MAX 64
#define ANSWER_MAX 1024
#define MAX_QUERIES 64
#define MAX_TTL_MS (24 * 3600 * 1000ull)
#define MS 1000000ull
#define TIMER_RENEW 1

typedef struct entry {
    bbp_peer_rec rec; /* PeerId and addresses (aux unused) */
    char classes[MAX_CLASSES][CLASS_MAX];
    uint8_t n_classes;
    uint64_t expires_ns;
} entry;

typedef struct query {
    uint64_t token;
    bb_completion *c;
} query;

typedef struct registry {
    selector sel;
    bool serve, announce;
    uint64_t ttl_ms, timeout_ns;
    size_t max_entries;
    bbp_peer_rec reg; /* a client's registry: its PeerId and address */
    /* server */
    entry *entries;
    size_t n;
    /* client */
    query queries[MAX_QUERIES];
    size_t n_queries;
    uint64_t announce_token;
    bool warned; /* the last announce failed and was logged */
} registry;

static const bb_config_decl CONFIG[] = {
    {"serve", "bool", "false",
     "keep the registry on this node (the registry server) instead of using one"},
    {"registry", "string", "null",
     "where the registry is, a multiaddr ending in /p2p/<its PeerId> (/ip4, /ip6 or a host "
     "name: /dns4, /dns6, /dns); required unless serve"},
    {"ttl_ms", "int", "10000", "how long an announcement lives; a client renews every third of it"},
    {"announce", "bool", "true",
     "a client announces its node (its targets and addresses); false: only query"},
    {"of_class", "string", "null",
     "the peer class this selector answers (a node sampling another is refused); default: "
     "the class each Sample is recorded with"},
    {"max_entries", "int", "4096", "server: most nodes the registry keeps"},
    {"timeout_ms", "int", "2000", "client: how long a query or an announce waits for the registry"},
};

static const bb_op_decl CONTROL_OPS[] = {
    {"Announce", CONTROL_IN, 3, CONTROL_OUT, 1,
     "control plane (server): register or renew the sender with a TTL and its classes"},
    {"Query", CONTROL_IN, 3, CONTROL_OUT, 1,
     "control plane (server): up to n live nodes of a class, with their addresses"},
};
static const bb_opset_decl OPSETS[] = {
    SELECTOR_ROLE_OPSET,
    SELECTOR_EXT_OPSET,
    {"bb-peers.GlobalRegistry.atomic", 1, CONTROL_OPS, BBP_COUNT(CONTROL_OPS)},
};

/* ---- create / destroy ---------------------------------------------------------------- */

/* Queries still waiting die with the engine that holds their handles. */
static void reg_destroy(void *inst)
{
    registry *r = inst;
    free(r->entries);
    free(r);
}

static int read_config(registry *r, const bbp_config *cfg, bb_error *err)
{
    int64_t ttl, max, timeout;
    char where[1024];
    int rc = bbp_config_bool(cfg, "serve", &r->serve, err);
    if (!rc)
        rc = bbp_config_bool(cfg, "announce", &r->announce, err);
    if (!rc)
        rc = bbp_config_int(cfg, "ttl_ms", 100, (int64_t)MAX_TTL_MS, &ttl, err);
    if (!rc)
        rc = bbp_config_int(cfg, "max_entries", 1, 1 << 20, &max, err);
    if (!rc)
        rc = bbp_config_int(cfg, "timeout_ms", 1, 3600 * 1000, &timeout, err);
    if (!rc)
        rc = bbp_config_string(cfg, "registry", where, sizeof where, err);
    if (rc)
        return rc;
    r->ttl_ms = (uint64_t)ttl;
    r->max_entries = (size_t)max;
    r->timeout_ns = (uint64_t)timeout * MS;
    if (r->serve && where[0])
        return bb_error_set(err, BB_ECONFIG,
                            "%s: 'serve' and 'registry' together: a node "
                            "either keeps the registry or uses one",
                            cfg->who);
    if (!r->serve && !where[0])
        return bb_error_set(err, BB_ECONFIG,
                            "%s: needs 'registry' (a multiaddr ending in "
                            "/p2p/<PeerId>) or 'serve': true",
                            cfg->who);
    return r->serve ? BB_OK : bbp_peer_addr_parse(cfg->who, "registry", where, &r->reg, err);
}

static int reg_create(const bb_create_args *args, void **out, bb_error *err)
{
    bbp_config cfg;
    int rc = bbp_config_load(&cfg, args, NAME, CONFIG, BBP_COUNT(CONFIG), err);
    if (rc)
        return rc;
    registry *r = calloc(1, sizeof *r);
    if (!r)
        rc = bb_error_set(err, BB_ENOMEM, NAME ": out of memory");
    if (!rc)
        rc = selector_init(&r->sel, &cfg, "of_class", args->seed, err);
    if (!rc)
        rc = read_config(r, &cfg, err);
    if (!rc && r->serve && !(r->entries = calloc(r->max_entries, sizeof *r->entries)))
        rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory for %zu entries", cfg.who,
                          r->max_entries);
    bbp_config_free(&cfg);
    if (rc) {
        if (r)
            reg_destroy(r);
        return rc;
    }
    *out = r;
    return BB_OK;
}

/* ---- the server's table ----------------------------------------------------------------- */

static void purge_expired(registry *r, uint64_t now)
{
    for (size_t i = 0; i < r->n;)
        if (r->entries[i].expires_ns <= now)
            r->entries[i] = r->entries[--r->n];
        else
            i++;
}

static bool entry_has_class(const entry *e, const char *cls)
{
    if (!cls || !*cls)
        return true;
    for (uint8_t k = 0; k < e->n_classes; k++)
        if (strcmp(e->classes[k], cls) == 0)
            return true;
    return false;
}

/* A class name from the wire: 1..CLASS_MAX-1 printable bytes. */
static bool class_ok(const uint8_t *p, size_t n)
{
    if (!n || n >= CLASS_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (p[i] < 0x21 || p[i] > 0x7e)
            return false;
    return true;
}

static int read_announce(const bb_value *payload, uint64_t *ttl_ms, entry *e, bb_error *err)
{
    bb_reader rd;
    bb_reader_init(&rd, payload->u.bytes.data, payload->u.bytes.len);
    uint64_t n = 0;
    bb_reader_uvarint(&rd, ttl_ms);
    bb_reader_uvarint(&rd, &n);
    if (!rd.failed && n > MAX_CLASSES)
        return bb_error_set(err, BB_ELIMIT, NAME ": announce with %llu classes (at most %d)",
                            (unsigned long long)n, MAX_CLASSES);
    for (uint64_t i = 0; i < n && !rd.failed; i++) {
        const uint8_t *p;
        size_t len;
        if (bb_reader_delimited(&rd, &p, &len) && !class_ok(p, len))
            return bb_error_set(err, BB_EPARSE, NAME ": announce: class %llu is not a name",
                                (unsigned long long)i);
        if (!rd.failed) {
            memcpy(e->classes[e->n_classes], p, len);
            e->classes[e->n_classes++][len] = '\0';
        }
    }
    if (rd.failed || bb_reader_left(&rd))
        return bb_error_set(err, BB_EPARSE, NAME ": malformed announce at byte %zu",
                            rd.failed ? rd.fail_at : rd.pos);
    return BB_OK;
}

static bb_dispatch_result serve_announce(registry *r, bb_ctx *ctx, const bb_dispatch_call *call,
                                         bb_value **out, bb_error *err)
{
    entry e = {0};
    uint64_t ttl_ms = 0, now = ctx->api->now_ns(ctx);
    bb_peerid sender;
    if (read_announce(call->inputs[0], &ttl_ms, &e, err))
        return BB_DISPATCH_NOW_ERR;
    if (!bbp_peer_id_of(call->inputs[2], &sender) || !bbp_peer_rec_of(ctx, &sender, 0, &e.rec)) {
        bb_error_set(err, BB_EINVAL, NAME ": announce from no PeerId");
        return BB_DISPATCH_NOW_ERR;
    }
    if (!e.rec.n_addrs) {
        bb_error_set(err, BB_ENOTFOUND,
                     NAME ": an announce needs an address to hand out: "
                          "listen on one");
        return BB_DISPATCH_NOW_ERR;
    }
    e.expires_ns = now + (ttl_ms < MAX_TTL_MS ? ttl_ms : MAX_TTL_MS) * MS;
    purge_expired(r, now);
    size_t i = 0;
    while (i < r->n && !bb_peerid_equal(&r->entries[i].rec.id, &sender))
        i++;
    if (i == r->n && r->n == r->max_entries) {
        bb_error_set(err, BB_EFULL, NAME ": the registry holds %zu nodes (max_entries)", r->n);
        return BB_DISPATCH_NOW_ERR;
    }
    r->entries[i] = e;
    r->n += i == r->n;
    out[0] = bb_value_bytes(&BB_TYPE_BYTES, NULL, 0);
    return out[0] ? BB_DISPATCH_NOW_OK : BB_DISPATCH_NOW_ERR;
}

/* Indexes of the live entries of class cls other than `skip`, shuffled
 * by ctx's generator when only k of them are wanted. Returns how many. */
static size_t pick(registry *r, bb_ctx *ctx, const char *cls, const bb_peerid *skip, size_t k,
                   size_t *idx)
{
    size_t m = 0;
    for (size_t i = 0; i < r->n; i++)
        if (entry_has_class(&r->entries[i], cls) &&
            !(skip && bb_peerid_equal(&r->entries[i].rec.id, skip)))
            idx[m++] = i;
    if (k && k < m)
        for (size_t i = 0; i < k; i++) { /* partial Fisher-Yates */
            size_t j = i + (size_t)(ctx->api->rng_u64(ctx) % (m - i));
            size_t t = idx[i];
            idx[i] = idx[j];
            idx[j] = t;
        }
    return k && k < m ? k : m;
}

static bb_dispatch_result serve_query(registry *r, bb_ctx *ctx, const bb_dispatch_call *call,
                                      bb_value **out, bb_error *err)
{
    const bb_value *payload = call->inputs[0];
    bb_reader rd;
    bb_reader_init(&rd, payload->u.bytes.data, payload->u.bytes.len);
    const uint8_t *c;
    size_t clen = 0;
    uint64_t n = 0;
    char cls[CLASS_MAX] = "";
    bb_reader_delimited(&rd, &c, &clen);
    bb_reader_uvarint(&rd, &n);
    if (rd.failed || bb_reader_left(&rd) || (clen && !class_ok(c, clen))) {
        bb_error_set(err, BB_EPARSE, NAME ": malformed query");
        return BB_DISPATCH_NOW_ERR;
    }
    memcpy(cls, c, clen);
    cls[clen] = '\0';
    uint64_t now = ctx->api->now_ns(ctx);
    purge_expired(r, now);
    bb_peerid asker;
    size_t *idx = malloc((r->n ? r->n : 1) * sizeof *idx);
    if (!idx) {
        bb_error_set(err, BB_ENOMEM, NAME ": out of memory");
        return BB_DISPATCH_NOW_ERR;
    }
    size_t want = !n || n > ANSWER_MAX ? ANSWER_MAX : (size_t)n;
    size_t m =
        pick(r, ctx, cls, bbp_peer_id_of(call->inputs[2], &asker) ? &asker : NULL, want, idx);
    bb_writer w = {0};
    bb_writer_put_uvarint(&w, m);
    for (size_t i = 0; i < m; i++) {
        entry *e = &r->entries[idx[i]];
        e->rec.aux = (e->expires_ns - now) / MS;
        bbp_peer_rec_put(&w, &e->rec);
    }
    free(idx);
    out[0] = w.failed ? NULL : bb_value_bytes(&BB_TYPE_BYTES, w.data, w.len);
    bb_writer_free(&w);
    if (!out[0])
        bb_error_set(err, BB_ENOMEM, NAME ": out of memory");
    return out[0] ? BB_DISPATCH_NOW_OK : BB_DISPATCH_NOW_ERR;
}

/* The server's own view: the live entries of the class. */
static int serve_view(void *inst, bb_ctx *ctx, const char *node_class, bb_value ***out, size_t *n,
                      bb_error *err)
{
    registry *r = inst;
    const char *cls = r->sel.of_class[0] ? r->sel.of_class : node_class;
    purge_expired(r, ctx->api->now_ns(ctx));
    size_t *idx = malloc((r->n ? r->n : 1) * sizeof *idx);
    *out = calloc(r->n ? r->n : 1, sizeof **out);
    if (!idx || !*out) {
        free(idx);
        free(*out);
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", r->sel.who);
    }
    size_t m = pick(r, ctx, cls, NULL, 0, idx);
    *n = 0;
    for (size_t i = 0; i < m; i++)
        if (((*out)[*n] = bbp_peer_id_value(&r->entries[idx[i]].rec.id)))
            (*n)++;
    free(idx);
    return BB_OK;
}

/* ---- the client -------------------------------------------------------------------------------
 */

static void announce(registry *r, bb_ctx *ctx)
{
    const char *targets[MAX_CLASSES];
    size_t n = ctx->api->local_targets(ctx, targets, MAX_CLASSES);
    bb_writer w = {0};
    bb_writer_put_uvarint(&w, r->ttl_ms);
    n = n < MAX_CLASSES ? n : MAX_CLASSES;
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        kept += class_ok((const uint8_t *)targets[i], strlen(targets[i]));
    bb_writer_put_uvarint(&w, kept);
    for (size_t i = 0; i < n; i++)
        if (class_ok((const uint8_t *)targets[i], strlen(targets[i])))
            bb_writer_put_str(&w, targets[i]);
    bb_value *reg = bbp_peer_id_value(&r->reg.id);
    bb_error err = {0};
    if (!w.failed && reg &&
        ctx->api->send_fill(ctx, reg, NULL, "Announce", w.data, w.len, r->timeout_ns,
                            &r->announce_token, &err) != BB_OK)
        ctx->api->log(ctx, BB_LOG_WARN, err.msg);
    bb_value_unref(reg);
    bb_writer_free(&w);
}

static bb_dispatch_result ask(registry *r, bb_ctx *ctx, const select_params *p,
                              const bb_dispatch_call *call, bb_error *err)
{
    if (r->n_queries == MAX_QUERIES) {
        bb_error_set(err, BB_EFULL, "%s: %d queries already wait for the registry", r->sel.who,
                     MAX_QUERIES);
        return BB_DISPATCH_NOW_ERR;
    }
    const char *cls = r->sel.of_class[0] ? r->sel.of_class : p->node_class ? p->node_class : "";
    bb_writer w = {0};
    bb_writer_put_str(&w, cls);
    bb_writer_put_uvarint(&w, p->kind == SELECT_ALL ? 0 : (uint64_t)p->n);
    bb_value *reg = bbp_peer_id_value(&r->reg.id);
    uint64_t token = 0;
    int rc = w.failed || !reg ? bb_error_set(err, BB_ENOMEM, "%s: out of memory", r->sel.who)
                              : ctx->api->send_fill(ctx, reg, NULL, "Query", w.data, w.len,
                                                    r->timeout_ns, &token, err);
    bb_value_unref(reg);
    bb_writer_free(&w);
    if (rc)
        return BB_DISPATCH_NOW_ERR;
    r->queries[r->n_queries++] = (query){token, call->completion};
    return BB_DISPATCH_LATER;
}

/* The registry's answer to a query: learn the addresses, answer the ids. */
static int answer_of(registry *r, bb_ctx *ctx, const uint8_t *p, size_t len, bb_value **out,
                     bb_error *err)
{
    bb_reader rd;
    bb_reader_init(&rd, p, len);
    uint64_t n = 0;
    bb_peerid self;
    bool have_self = bbp_peer_self(ctx, &self);
    if (!bb_reader_uvarint(&rd, &n) || n > ANSWER_MAX || !bb_reader_has(&rd, n, 2))
        return bb_error_set(err, BB_EPARSE, "%s: malformed answer from the registry", r->sel.who);
    bb_value **ids = calloc(n ? n : 1, sizeof *ids);
    size_t k = 0;
    int rc = ids ? BB_OK : bb_error_set(err, BB_ENOMEM, "%s: out of memory", r->sel.who);
    for (uint64_t i = 0; i < n && !rc; i++) {
        bbp_peer_rec rec;
        if (!bbp_peer_rec_get(&rd, &rec))
            rc = bb_error_set(err, BB_EPARSE, "%s: malformed answer from the registry at byte %zu",
                              r->sel.who, rd.fail_at);
        else if ((have_self && bb_peerid_equal(&rec.id, &self)) ||
                 bbp_peer_rec_learn(ctx, &rec, NULL))
            continue; /* itself, or an address the book refused: not reachable */
        else if (!(ids[k] = bbp_peer_id_value(&rec.id)))
            rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory", r->sel.who);
        else
            k++;
    }
    if (!rc && !(*out = bb_value_list(&BB_TYPE_PEER_ID_VEC, ids, k)))
        rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory", r->sel.who);
    if (rc)
        for (size_t i = 0; i < k; i++)
            bb_value_unref(ids[i]);
    free(ids);
    return rc;
}

static void reg_on_answer(void *inst, bb_ctx *ctx, uint64_t token, int status, const uint8_t *p,
                          size_t len)
{
    registry *r = inst;
    char msg[BB_ERROR_MSG_MAX];
    if (token == r->announce_token) {
        r->announce_token = 0;
        if (status != BB_OK && !r->warned) {
            snprintf(msg, sizeof msg, "%s: announce: %s: %.*s (retried at the next renewal)",
                     r->sel.who, bb_status_name(status), (int)(len < 200 ? len : 200),
                     (const char *)p);
            ctx->api->log(ctx, BB_LOG_WARN, msg);
        }
        r->warned = status != BB_OK;
        return;
    }
    size_t i = 0;
    while (i < r->n_queries && r->queries[i].token != token)
        i++;
    if (i == r->n_queries)
        return;
    bb_completion *c = r->queries[i].c;
    r->queries[i] = r->queries[--r->n_queries];
    bb_value *out = NULL;
    bb_error err = {0};
    if (status == BB_OK && !answer_of(r, ctx, p, len, &out, &err)) {
        bb_complete_ok(c, &out, 1);
        return;
    }
    if (status != BB_OK)
        snprintf(err.msg, sizeof err.msg, "%s: the registry did not answer: %s: %.*s", r->sel.who,
                 bb_status_name(status), (int)(len < 200 ? len : 200), (const char *)p);
    bb_complete_err(c, status != BB_OK ? status : err.code, err.msg);
}

/* ---- ops, bootstrap, timer ---------------------------------------------------------------- */

static bb_dispatch_result reg_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                       bb_value **outputs, bb_error *err)
{
    registry *r = inst;
    const char *op = call->op_type;
    if (!strcmp(op, "Announce") || !strcmp(op, "Query")) {
        if (!r->serve || !selector_is_control(call)) {
            bb_error_set(err, BB_EINVAL, "%s: %s is a control-plane op of the registry server",
                         r->sel.who, op);
            return BB_DISPATCH_NOW_ERR;
        }
        return op[0] == 'A' ? serve_announce(r, ctx, call, outputs, err)
                            : serve_query(r, ctx, call, outputs, err);
    }
    if (r->serve)
        return selector_dispatch(&r->sel, r, serve_view, ctx, call, outputs, err);
    select_params p;
    if (selector_params(&r->sel, call, &p, err))
        return BB_DISPATCH_NOW_ERR;
    if (p.kind == SELECT_NEAR_KEY) {
        bb_error_set(err, BB_EUNSUPPORTED,
                     "%s: SelectParams::NearKey is not supported: the "
                     "registry has no distance metric (peers::Dht answers NearKey)",
                     r->sel.who);
        return BB_DISPATCH_NOW_ERR;
    }
    if (!bbp_ctx_has_control(ctx)) {
        bb_error_set(err, BB_EUNSUPPORTED, "%s: this host has no control plane (ABI 2.2)",
                     r->sel.who);
        return BB_DISPATCH_NOW_ERR;
    }
    return ask(r, ctx, &p, call, err);
}

static void reg_on_timer(void *inst, bb_ctx *ctx, uint64_t token)
{
    registry *r = inst;
    if (token != TIMER_RENEW || r->serve)
        return;
    if (r->announce && !r->announce_token)
        announce(r, ctx);
    ctx->api->schedule(ctx, r->ttl_ms * MS / 3, TIMER_RENEW);
}

/* A client makes the registry reachable, announces itself and starts
 * renewing; the server has nothing to do. */
static bb_dispatch_result reg_bootstrap(void *inst, bb_ctx *ctx, bb_completion *c, bb_error *err)
{
    (void)c;
    registry *r = inst;
    if (r->serve)
        return BB_DISPATCH_NOW_OK;
    if (!bbp_ctx_has_control(ctx)) {
        bb_error_set(err, BB_EUNSUPPORTED, "%s: this host has no control plane (ABI 2.2)",
                     r->sel.who);
        return BB_DISPATCH_NOW_ERR;
    }
    if (bbp_peer_rec_learn(ctx, &r->reg, err))
        return BB_DISPATCH_NOW_ERR;
    reg_on_timer(r, ctx, TIMER_RENEW);
    return BB_DISPATCH_NOW_OK;
}

const bb_component_type PEERS_GLOBAL_REGISTRY = {
    BBP_TYPE_ABI,
    .type_name = NAME,
    .role = BB_ROLE_PEER_SELECTOR,
    .doc = "a registry of live nodes with a TTL: one node serves it, the others announce "
           "themselves and sample peers of a class from it; All and Random{n}",
    .opsets = OPSETS,
    .n_opsets = BBP_COUNT(OPSETS),
    .config = CONFIG,
    .n_config = BBP_COUNT(CONFIG),
    .create = reg_create,
    .destroy = reg_destroy,
    .dispatch = reg_dispatch,
    .bootstrap = reg_bootstrap,
    .on_timer = reg_on_timer,
    .on_answer = reg_on_answer,
};
