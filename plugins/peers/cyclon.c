/*
 * cyclon.c — peers::Cyclon, the CYCLON peer-sampling protocol (Voulgaris,
 * Gavidia, van Steen 2005: "CYCLON: Inexpensive Membership Management for
 * Unstructured P2P Overlays").
 *
 * Each node keeps a partial view of at most C neighbours, each with an
 * age. Every period it shuffles (the enhanced shuffle of the paper):
 *   1. every age goes up by one;
 *   2. Q = the oldest neighbour;
 *   3. it sends Q L-1 random other neighbours and a fresh entry for itself
 *      (age 0) — a control-plane request to Q's Cyclon (op Shuffle);
 *   4. Q answers with up to L random neighbours of its own and merges what
 *      it got; the node drops Q and merges Q's answer.
 * Merging (both sides) drops entries for itself and for neighbours it
 * already has, fills empty slots, then replaces the entries it sent to the
 * other side. A dead Q never answers and leaves the view, so failed nodes
 * disappear without any failure detector; the number of pointers to each
 * node stays balanced because every shuffle destroys one pointer (to Q)
 * and creates one (to the shuffler).
 * Two departures from the paper, so that views stay full (docs/DECISIONS.md):
 * Q stays in the view while its shuffle is in flight (the paper drops it
 * first; observers would see C-1 entries), and an answer that brought
 * nothing new puts Q back (it just proved alive) instead of leaving the view
 * one short.
 *
 * Joining: the configured seeds (multiaddrs ending in /p2p/<PeerId>) are
 * the first view; the node's first shuffle goes to one of them, which hands
 * it L of its neighbours and keeps a pointer to it. A node whose view ran
 * empty (every neighbour died) goes back to its seeds. With no seeds
 * configured, the peers the host knows stand in for them (a bbd --peer, a
 * bbsim connect; those running of_class when it is set).
 *
 * Addresses: a shuffled entry carries the addresses the sender's address
 * book has for that peer (record.c); the receiver puts them into its own,
 * so a node can reach every neighbour it learns of. The fresh entry of the
 * sender carries none: the receiver knows the sender's addresses from the
 * envelope itself.
 *
 * Sample (Random{n}) and CurrentView (All) answer from the view (an empty
 * view rejoins first, so a first step before the first shuffle still
 * reaches a seed). The view
 * (PeerIds and ages) is the snapshot; the addresses are in the engine's
 * address book, which the engine snapshots. Randomness comes from the
 * host's generator (ctx->rng_u64), time from its clock and timers.
 *
 * Untrusted input: a shuffle holds at most 64 entries (at most
 * shuffle_length are used), each decoded with bounds (record.c); a
 * malformed one is refused whole; ages are capped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peers.h"
#include "plugins/common/plugin_config.h"
#include "plugins/common/plugin_type.h"

#define NAME "peers::Cyclon"
#define MAX_VIEW 256
#define MAX_SHUFFLE 64
#define MAX_SEEDS 16
#define MAX_AGE 1000000u
#define MS 1000000ull
#define TIMER_SHUFFLE 1
#define SNAPSHOT_VERSION 1

typedef struct nbr {
    bb_peerid id;
    uint64_t age;
} nbr;

typedef struct cyclon {
    selector sel;
    uint32_t c, l; /* view size, shuffle length */
    uint64_t period_ns, timeout_ns;
    nbr *view; /* [c] */
    uint32_t n;
    bbp_peer_rec seeds[MAX_SEEDS];
    uint32_t n_seeds;
    bb_peerid self;
    bool have_self, started;
    /* the shuffle in flight: its token, its peer q (still in the view until
     * the shuffle ends), and the entries sent (replaceable) */
    uint64_t token;
    bb_peerid q;
    bb_peerid sent[MAX_SHUFFLE];
    uint32_t n_sent;
} cyclon;

static const bb_config_decl CONFIG[] = {
    {"view_size", "int", "8", "C: the neighbours a node keeps (1..256)"},
    {"shuffle_length", "int", "4", "L: entries exchanged per shuffle (1..64, at most C)"},
    {"period_ms", "int", "1000", "a node shuffles once every period"},
    {"timeout_ms", "int", "null", "how long a shuffle waits for its answer (default: period_ms)"},
    {"seeds", "array", "[]",
     "where to join: multiaddrs ending in /p2p/<PeerId> (/ip4, /ip6 or a host name: /dns4, "
     "/dns6, /dns), at most 16; none: the peers the host knows (a --peer, a bbsim connect), "
     "else wait to be contacted"},
    {"of_class", "string", "null",
     "the peer class of the overlay; a Sample recorded with another of_class is refused"},
};

static const bb_op_decl CONTROL_OPS[] = {
    {"Shuffle", CONTROL_IN, 3, CONTROL_OUT, 1,
     "control plane: a neighbour's shuffle; answers up to L neighbours of this node"},
};
static const bb_opset_decl OPSETS[] = {
    SELECTOR_ROLE_OPSET,
    SELECTOR_EXT_OPSET,
    {"bb-peers.Cyclon.atomic", 1, CONTROL_OPS, BBP_COUNT(CONTROL_OPS)},
};

/* ---- create / destroy --------------------------------------------------------------------- */

static void cy_destroy(void *inst)
{
    cyclon *y = inst;
    free(y->view);
    free(y);
}

static int read_seeds(cyclon *y, const bbp_config *cfg, bb_error *err)
{
    cJSON *owned = NULL;
    const cJSON *list = bbp_config_get(cfg, "seeds", &owned);
    int n = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : -1, rc = BB_OK;
    if (n < 0 || n > MAX_SEEDS)
        rc = bb_error_set(err, BB_ECONFIG, "%s: 'seeds' must be a list of at most %d multiaddrs",
                          cfg->who, MAX_SEEDS);
    for (int i = 0; !rc && i < n; i++) {
        const cJSON *s = cJSON_GetArrayItem(list, i);
        char what[32];
        snprintf(what, sizeof what, "seeds[%d]", i);
        rc = cJSON_IsString(s)
                 ? bbp_peer_addr_parse(cfg->who, what, s->valuestring, &y->seeds[y->n_seeds++], err)
                 : bb_error_set(err, BB_ECONFIG, "%s: %s is not a string", cfg->who, what);
    }
    cJSON_Delete(owned);
    return rc;
}

static int read_config(cyclon *y, const bbp_config *cfg, bb_error *err)
{
    int64_t c, l, period, timeout = 0;
    int rc = bbp_config_int(cfg, "view_size", 1, MAX_VIEW, &c, err);
    if (!rc)
        rc = bbp_config_int(cfg, "shuffle_length", 1, MAX_SHUFFLE, &l, err);
    if (!rc)
        rc = bbp_config_int(cfg, "period_ms", 1, 24 * 3600 * 1000, &period, err);
    if (!rc && bbp_config_has(cfg, "timeout_ms"))
        rc = bbp_config_int(cfg, "timeout_ms", 1, 24 * 3600 * 1000, &timeout, err);
    if (!rc && l > c)
        rc = bb_error_set(err, BB_ECONFIG, "%s: shuffle_length %lld exceeds view_size %lld",
                          cfg->who, (long long)l, (long long)c);
    if (rc)
        return rc;
    y->c = (uint32_t)c;
    y->l = (uint32_t)l;
    y->period_ns = (uint64_t)period * MS;
    y->timeout_ns = (uint64_t)(timeout ? timeout : period) * MS;
    return read_seeds(y, cfg, err);
}

static int cy_create(const bb_create_args *args, void **out, bb_error *err)
{
    bbp_config cfg;
    int rc = bbp_config_load(&cfg, args, NAME, CONFIG, BBP_COUNT(CONFIG), err);
    if (rc)
        return rc;
    cyclon *y = calloc(1, sizeof *y);
    if (!y)
        rc = bb_error_set(err, BB_ENOMEM, NAME ": out of memory");
    if (!rc)
        rc = selector_init(&y->sel, &cfg, "of_class", args->seed, err);
    if (!rc)
        rc = read_config(y, &cfg, err);
    if (!rc && !(y->view = calloc(y->c, sizeof *y->view)))
        rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory", cfg.who);
    bbp_config_free(&cfg);
    if (rc) {
        if (y)
            cy_destroy(y);
        return rc;
    }
    *out = y;
    return BB_OK;
}

/* ---- the view ------------------------------------------------------------------------------ */

static int find(const cyclon *y, const bb_peerid *id)
{
    for (uint32_t i = 0; i < y->n; i++)
        if (bb_peerid_equal(&y->view[i].id, id))
            return (int)i;
    return -1;
}

static void remove_at(cyclon *y, uint32_t i)
{
    y->view[i] = y->view[--y->n];
}

/* Up to k random view indexes other than `skip` (-1: none), into idx. */
static uint32_t random_subset(cyclon *y, bb_ctx *ctx, int skip, uint32_t k, uint32_t *idx)
{
    uint32_t m = 0;
    for (uint32_t i = 0; i < y->n; i++)
        if ((int)i != skip)
            idx[m++] = i;
    k = k < m ? k : m;
    for (uint32_t i = 0; i < k; i++) { /* partial Fisher-Yates */
        uint32_t j = i + (uint32_t)(ctx->api->rng_u64(ctx) % (m - i));
        uint32_t t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
    return k;
}

/* The paper's merge: skip itself and known neighbours, fill empty slots,
 * then replace entries that were sent to the other side (sent[0..n_sent)). */
static void merge(cyclon *y, bb_ctx *ctx, const bbp_peer_rec *got, uint32_t n_got,
                  const bb_peerid *sent, uint32_t n_sent)
{
    bool used[MAX_SHUFFLE] = {false};
    for (uint32_t k = 0; k < n_got; k++) {
        const bbp_peer_rec *e = &got[k];
        if ((y->have_self && bb_peerid_equal(&e->id, &y->self)) || find(y, &e->id) >= 0)
            continue;
        bbp_peer_rec_learn(ctx, e, NULL); /* an address the book refuses: the entry stays useless */
        nbr fresh = {e->id, e->aux < MAX_AGE ? e->aux : MAX_AGE};
        if (y->n < y->c) {
            y->view[y->n++] = fresh;
            continue;
        }
        for (uint32_t s = 0; s < n_sent; s++) {
            int at = used[s] ? -1 : find(y, &sent[s]);
            if (at >= 0) {
                used[s] = true;
                y->view[at] = fresh;
                break;
            }
        }
    }
}

/* Encode view entries idx[0..k) (with addresses), after an optional fresh
 * entry for this node. */
static void put_entries(cyclon *y, bb_ctx *ctx, bb_writer *w, bool with_self, const uint32_t *idx,
                        uint32_t k)
{
    bb_writer_put_uvarint(w, k + with_self);
    bbp_peer_rec r;
    if (with_self) {
        memset(&r, 0, sizeof r);
        r.id = y->self; /* age 0, no address: the receiver has ours from the envelope */
        bbp_peer_rec_put(w, &r);
    }
    for (uint32_t i = 0; i < k; i++) {
        bbp_peer_rec_of(ctx, &y->view[idx[i]].id, y->view[idx[i]].age, &r);
        bbp_peer_rec_put(w, &r);
    }
}

/* Decode a shuffle's entries into got[] (at most MAX_SHUFFLE). */
static int get_entries(const uint8_t *p, size_t len, bbp_peer_rec *got, uint32_t *n, bb_error *err)
{
    bb_reader rd;
    bb_reader_init(&rd, p, len);
    uint64_t count = 0;
    if (bb_reader_uvarint(&rd, &count) && count > MAX_SHUFFLE)
        return bb_error_set(err, BB_ELIMIT, NAME ": a shuffle of %llu entries (at most %d)",
                            (unsigned long long)count, MAX_SHUFFLE);
    for (uint64_t i = 0; i < count && !rd.failed; i++)
        bbp_peer_rec_get(&rd, &got[i]);
    if (rd.failed || bb_reader_left(&rd))
        return bb_error_set(err, BB_EPARSE, NAME ": malformed shuffle at byte %zu",
                            rd.failed ? rd.fail_at : rd.pos);
    *n = (uint32_t)count;
    return BB_OK;
}

/* ---- the active side: shuffle with the oldest neighbour ------------------------------------- */

/* This node's PeerId (once the engine is there: after a restore no
 * bootstrap runs). */
static void know_self(cyclon *y, bb_ctx *ctx)
{
    if (!y->have_self)
        y->have_self = bbp_peer_self(ctx, &y->self);
}

/* Without seeds: the peers the host already knows (a bbd --peer, a bbsim
 * connect), those running of_class when it is set, as the first view. */
static void join_known(cyclon *y, bb_ctx *ctx)
{
    bb_value *ids[MAX_VIEW];
    size_t total = y->sel.of_class[0]
                       ? ctx->api->peers_running(ctx, y->sel.of_class, ids, y->c)
                       : ctx->api->peers(ctx, ids, y->c);
    for (size_t i = 0; i < total && i < y->c; i++) {
        bb_peerid id;
        if (bbp_peer_id_of(ids[i], &id) && y->n < y->c && find(y, &id) < 0 &&
            !(y->have_self && bb_peerid_equal(&id, &y->self)))
            y->view[y->n++] = (nbr){id, 0};
        bb_value_unref(ids[i]);
    }
}

static void rejoin(cyclon *y, bb_ctx *ctx)
{
    for (uint32_t i = 0; i < y->n_seeds && y->n < y->c; i++) {
        const bbp_peer_rec *s = &y->seeds[i];
        if ((y->have_self && bb_peerid_equal(&s->id, &y->self)) || find(y, &s->id) >= 0)
            continue;
        if (bbp_peer_rec_learn(ctx, s, NULL) == BB_OK)
            y->view[y->n++] = (nbr){s->id, 0};
    }
    if (!y->n_seeds)
        join_known(y, ctx);
}

/* The shuffle with q ended: q leaves the view (its slot is the first the
 * answer fills). An answer proves q alive: when it brought nothing new, q
 * goes back in (age 0) rather than leave the view short. */
static void shuffle_done(cyclon *y, bb_ctx *ctx, const bbp_peer_rec *got, uint32_t n_got)
{
    int at = find(y, &y->q);
    if (at >= 0)
        remove_at(y, (uint32_t)at);
    if (!got)
        return;
    merge(y, ctx, got, n_got, y->sent, y->n_sent);
    if (y->n < y->c && find(y, &y->q) < 0)
        y->view[y->n++] = (nbr){y->q, 0};
}

static void shuffle(cyclon *y, bb_ctx *ctx)
{
    if (y->token) /* no answer within a period: as good as dead */
        shuffle_done(y, ctx, NULL, 0);
    y->token = 0;
    y->n_sent = 0;
    for (uint32_t i = 0; i < y->n; i++)
        y->view[i].age += y->view[i].age < MAX_AGE;
    if (!y->n)
        rejoin(y, ctx);
    if (!y->n)
        return;
    uint32_t q = 0;
    for (uint32_t i = 1; i < y->n; i++)
        if (y->view[i].age > y->view[q].age)
            q = i;
    y->q = y->view[q].id;
    bb_value *target = bbp_peer_id_value(&y->q);
    uint32_t idx[MAX_VIEW];
    uint32_t k = random_subset(y, ctx, (int)q, y->l - 1, idx);
    bb_writer w = {0};
    put_entries(y, ctx, &w, true, idx, k);
    bb_error err = {0};
    if (!w.failed && target &&
        ctx->api->send_fill(ctx, target, NULL, "Shuffle", w.data, w.len, y->timeout_ns, &y->token,
                            &err) == BB_OK) {
        for (uint32_t i = 0; i < k; i++)
            y->sent[i] = y->view[idx[i]].id;
        y->n_sent = k;
    } else {
        if (err.msg[0])
            ctx->api->log(ctx, BB_LOG_DEBUG, err.msg);
        shuffle_done(y, ctx, NULL, 0); /* q unreachable: it leaves the view */
    }
    bb_writer_free(&w);
    bb_value_unref(target);
}

static void cy_on_timer(void *inst, bb_ctx *ctx, uint64_t token)
{
    cyclon *y = inst;
    if (token != TIMER_SHUFFLE)
        return;
    know_self(y, ctx);
    ctx->api->schedule(ctx, y->period_ns, TIMER_SHUFFLE);
    shuffle(y, ctx);
}

static void cy_on_answer(void *inst, bb_ctx *ctx, uint64_t token, int status, const uint8_t *p,
                         size_t len)
{
    cyclon *y = inst;
    if (!token || token != y->token)
        return; /* an answer to a shuffle already given up */
    y->token = 0;
    know_self(y, ctx);
    bbp_peer_rec *got = malloc(MAX_SHUFFLE * sizeof *got);
    uint32_t n = 0;
    bb_error err = {0};
    if (status == BB_OK && got && !get_entries(p, len, got, &n, &err)) {
        shuffle_done(y, ctx, got, n < y->l ? n : y->l);
    } else {
        if (err.msg[0])
            ctx->api->log(ctx, BB_LOG_DEBUG, err.msg);
        shuffle_done(y, ctx, NULL, 0);
    }
    free(got);
    y->n_sent = 0;
}

/* ---- the passive side: a neighbour's shuffle --------------------------------------------------
 */

static bb_dispatch_result answer_shuffle(cyclon *y, bb_ctx *ctx, const bb_dispatch_call *call,
                                         bb_value **out, bb_error *err)
{
    bb_peerid from;
    if (!bbp_peer_id_of(call->inputs[2], &from)) {
        bb_error_set(err, BB_EINVAL, "%s: a shuffle from no PeerId", y->sel.who);
        return BB_DISPATCH_NOW_ERR;
    }
    bbp_peer_rec *got = malloc(MAX_SHUFFLE * sizeof *got);
    uint32_t n = 0;
    if (!got ||
        get_entries(call->inputs[0]->u.bytes.data, call->inputs[0]->u.bytes.len, got, &n, err)) {
        if (!got)
            bb_error_set(err, BB_ENOMEM, "%s: out of memory", y->sel.who);
        free(got);
        return BB_DISPATCH_NOW_ERR;
    }
    uint32_t idx[MAX_VIEW];
    uint32_t k = random_subset(y, ctx, find(y, &from), y->l, idx);
    bb_writer w = {0};
    put_entries(y, ctx, &w, false, idx, k);
    bb_peerid replace[MAX_SHUFFLE];
    for (uint32_t i = 0; i < k; i++)
        replace[i] = y->view[idx[i]].id;
    merge(y, ctx, got, n < y->l ? n : y->l, replace, k);
    free(got);
    out[0] = w.failed ? NULL : bb_value_bytes(&BB_TYPE_BYTES, w.data, w.len);
    bb_writer_free(&w);
    if (!out[0])
        bb_error_set(err, BB_ENOMEM, "%s: out of memory", y->sel.who);
    return out[0] ? BB_DISPATCH_NOW_OK : BB_DISPATCH_NOW_ERR;
}

/* The view a Sample or CurrentView answers from. An empty one rejoins first:
 * a node whose first step comes before its first shuffle (or after every
 * neighbour died) samples its seeds, or the peers its host knows by now,
 * instead of sending to no one. */
static int cy_view(void *inst, bb_ctx *ctx, const char *node_class, bb_value ***out, size_t *n,
                   bb_error *err)
{
    (void)node_class;
    cyclon *y = inst;
    if (!y->n)
        rejoin(y, ctx);
    *out = calloc(y->n ? y->n : 1, sizeof **out);
    if (!*out)
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", y->sel.who);
    *n = 0;
    for (uint32_t i = 0; i < y->n; i++)
        if (((*out)[*n] = bbp_peer_id_value(&y->view[i].id)))
            (*n)++;
    return BB_OK;
}

static bb_dispatch_result cy_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                      bb_value **outputs, bb_error *err)
{
    cyclon *y = inst;
    know_self(y, ctx);
    if (strcmp(call->op_type, "Shuffle") != 0)
        return selector_dispatch(&y->sel, y, cy_view, ctx, call, outputs, err);
    if (!selector_is_control(call)) {
        bb_error_set(err, BB_EINVAL, "%s: Shuffle is a control-plane op", y->sel.who);
        return BB_DISPATCH_NOW_ERR;
    }
    return answer_shuffle(y, ctx, call, outputs, err);
}

/* Join: the seeds are the first view; the first shuffle comes at a random
 * point of the first period (nodes started together do not shuffle in
 * lockstep). */
static bb_dispatch_result cy_bootstrap(void *inst, bb_ctx *ctx, bb_completion *c, bb_error *err)
{
    (void)c;
    cyclon *y = inst;
    if (!bbp_ctx_has_control(ctx)) {
        bb_error_set(err, BB_EUNSUPPORTED, "%s: this host has no control plane (ABI 2.2)",
                     y->sel.who);
        return BB_DISPATCH_NOW_ERR;
    }
    know_self(y, ctx);
    if (y->started)
        return BB_DISPATCH_NOW_OK;
    y->started = true;
    rejoin(y, ctx);
    ctx->api->schedule(ctx, ctx->api->rng_u64(ctx) % y->period_ns + 1, TIMER_SHUFFLE);
    return BB_DISPATCH_NOW_OK;
}

/* ---- snapshot: the view -------------------------------------------------------------------------
 */

static int cy_snapshot(void *inst, uint8_t **out, size_t *len, bb_error *err)
{
    cyclon *y = inst;
    bb_writer w = {0};
    bb_writer_put_uvarint(&w, SNAPSHOT_VERSION);
    bb_writer_put_u8(&w, y->started);
    bb_writer_put_uvarint(&w, y->n);
    for (uint32_t i = 0; i < y->n; i++) {
        bb_writer_put_delimited(&w, y->view[i].id.bytes, y->view[i].id.len);
        bb_writer_put_uvarint(&w, y->view[i].age);
    }
    if (!bb_writer_take(&w, out, len))
        return bb_error_set(err, BB_ENOMEM, "%s: snapshot: out of memory", y->sel.who);
    return BB_OK;
}

static int cy_restore(void *inst, const uint8_t *data, size_t len, bb_error *err)
{
    cyclon *y = inst;
    bb_reader rd;
    bb_reader_init(&rd, data, len);
    uint64_t version = 0, n = 0;
    uint8_t started = 0;
    bb_reader_uvarint(&rd, &version);
    bb_reader_u8(&rd, &started);
    bb_reader_uvarint(&rd, &n);
    if (!rd.failed && (version != SNAPSHOT_VERSION || n > y->c))
        return bb_error_set(err, BB_EDECODE,
                            "%s: snapshot version %llu with %llu neighbours "
                            "(this build reads version %d, view_size %u)",
                            y->sel.who, (unsigned long long)version, (unsigned long long)n,
                            SNAPSHOT_VERSION, y->c);
    nbr *v = calloc(y->c, sizeof *v);
    for (uint64_t i = 0; v && i < n && !rd.failed; i++) {
        const uint8_t *p;
        size_t pl;
        if (bb_reader_delimited(&rd, &p, &pl) &&
            bb_peerid_from_bytes(p, pl, &v[i].id, NULL) != BB_OK)
            bb_reader_fail(&rd, rd.pos, BB_EDECODE, "not a PeerId");
        bb_reader_uvarint(&rd, &v[i].age);
    }
    if (!v || rd.failed || bb_reader_left(&rd)) {
        free(v);
        return bb_error_set(err, v ? BB_EDECODE : BB_ENOMEM, "%s: malformed snapshot at byte %zu",
                            y->sel.who, rd.failed ? rd.fail_at : rd.pos);
    }
    free(y->view);
    y->view = v;
    y->n = (uint32_t)n;
    y->started = started != 0; /* its shuffle timer comes back with the engine's */
    return BB_OK;
}

const bb_component_type PEERS_CYCLON = {
    BBP_TYPE_ABI,
    .type_name = NAME,
    .role = BB_ROLE_PEER_SELECTOR,
    .doc = "CYCLON peer sampling: a partial view of C neighbours kept fresh by periodic "
           "shuffles of L entries with the oldest; joins from seed addresses; All and Random{n}",
    .opsets = OPSETS,
    .n_opsets = BBP_COUNT(OPSETS),
    .config = CONFIG,
    .n_config = BBP_COUNT(CONFIG),
    .create = cy_create,
    .destroy = cy_destroy,
    .dispatch = cy_dispatch,
    .bootstrap = cy_bootstrap,
    .snapshot = cy_snapshot,
    .restore = cy_restore,
    .on_timer = cy_on_timer,
    .on_answer = cy_on_answer,
};
