/*
 * kademlia.c — dht::Kademlia, a Protocol component: a Kademlia DHT
 * (Maymounkov & Mazières 2002) with its own atomic opset
 * bb-dht.Kademlia.atomic.
 *
 * The four RPCs, between the Kademlia components of two nodes (control
 * plane only; payloads in rpc.c): Ping, FindNode, FindValue, Store.
 * The procedures, from a graph (typed values) or as a control-plane
 * request from any node (delegated: the payload is the key's bytes, for
 * Put delimited(key) then delimited(value)); they answer when done:
 *   Lookup(key) -> (peers, hops)   the k closest live nodes, closest first
 *                                  (iterative FindNode, α in parallel)
 *   Get(key) -> value              this node's record, else an iterative
 *                                  FindValue (BB_ENOTFOUND when nobody has it)
 *   Put(key, value) -> stored      Store at the k closest nodes found
 *   Contacts() -> peers            the routing table, at once
 * A key is a Bytes, PeerId or Multiaddress value's bytes, or any other
 * value's wire encoding; SHA-256 of it is where it lives. A value is kept
 * as bytes the same way and comes back from Get as Bytes.
 *
 * Bootstrap (the component's): the configured seeds go into the routing
 * table, then a lookup of this node's own key fills it; the bootstrap
 * completes when that lookup ends (graph ops on the DHT wait for it).
 * Every refresh period, a bucket no lookup touched for a period is
 * refreshed by a lookup of a random key in it, and expired records go.
 * The routing table and the records are the snapshot; the timers come back
 * with the engine's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dht.h"
#include "plugins/common/plugin_config.h"
#include "plugins/common/plugin_type.h"

#define SNAPSHOT_VERSION 1
#define REFRESH_PER_TICK 4

static const bb_config_decl CONFIG[] = {
    {"k", "int", "20", "bucket size and replication: contacts per bucket, results per lookup"},
    {"alpha", "int", "3", "RPCs a lookup keeps in flight"},
    {"seeds", "array", "[]",
     "where to join: multiaddrs ending in /p2p/<PeerId> (/ip4, /ip6 or a host name: /dns4, "
     "/dns6, /dns), at most 16; none: the first node"},
    {"rpc_timeout_ms", "int", "2000", "how long an RPC waits for its answer"},
    {"refresh_ms", "int", "60000", "a bucket no lookup touched for this long is refreshed"},
    {"max_records", "int", "1024", "records this node keeps for the network"},
    {"max_value_bytes", "int", "1024", "the largest value stored"},
    {"record_ttl_ms", "int", "3600000", "how long a record lives (and the longest a Store may ask)"},
};

static const bb_port_decl KEY_IN[] = {{.name = "key", .type = &BB_TYPE_ANY}};
static const bb_port_decl PUT_IN[] = {{.name = "key", .type = &BB_TYPE_ANY},
                                      {.name = "value", .type = &BB_TYPE_ANY}};
static const bb_port_decl TRIGGER_IN[] = {{.name = "trigger", .type = &BB_TYPE_ANY,
                                           .optional = true}};
static const bb_port_decl LOOKUP_OUT[] = {{.name = "peers", .type = &BB_TYPE_PEER_ID_VEC},
                                          {.name = "hops", .type = &BB_TYPE_U64}};
static const bb_port_decl GET_OUT[] = {{.name = "value", .type = &BB_TYPE_BYTES}};
static const bb_port_decl PUT_OUT[] = {{.name = "stored", .type = &BB_TYPE_U64}};
static const bb_port_decl PEERS_OUT[] = {{.name = "peers", .type = &BB_TYPE_PEER_ID_VEC}};
static const bb_port_decl RPC_IN[] = {{.name = "payload", .type = &BB_TYPE_BYTES},
                                      {.name = "correlation", .type = &BB_TYPE_CORRELATION_TOKEN},
                                      {.name = "sender", .type = &BB_TYPE_PEER_ID}};
static const bb_port_decl RPC_OUT[] = {{.name = "answer", .type = &BB_TYPE_BYTES}};

static const bb_op_decl OPS[] = {
    {"Ping", RPC_IN, 3, RPC_OUT, 1, "RPC (control plane): are you there"},
    {"FindNode", RPC_IN, 3, RPC_OUT, 1, "RPC (control plane): the k closest contacts to a key"},
    {"FindValue", RPC_IN, 3, RPC_OUT, 1,
     "RPC (control plane): the record of a key, else the k closest contacts"},
    {"Store", RPC_IN, 3, RPC_OUT, 1, "RPC (control plane): keep a record with a TTL"},
    {"Lookup", KEY_IN, 1, LOOKUP_OUT, 2,
     "the k closest live nodes to the key, closest first, and the hops it took"},
    {"Get", KEY_IN, 1, GET_OUT, 1, "the value stored under the key (BB_ENOTFOUND: none)"},
    {"Put", PUT_IN, 2, PUT_OUT, 1, "store the value at the k closest nodes; how many took it"},
    {"Contacts", TRIGGER_IN, 1, PEERS_OUT, 1, "every contact of the routing table"},
};
static const bb_opset_decl OPSETS[] = {{KAD_DOMAIN, 1, OPS, BBP_COUNT(OPS)}};

/* ---- create / destroy -------------------------------------------------------------------- */

static void kad_destroy(void *inst)
{
    kademlia *kd = inst;
    for (int i = 0; i < KAD_MAX_LOOKUPS; i++)
        kad_lookup_free(&kd->lookups[i]); /* their handles die with the engine */
    kad_table_free(kd);
    kad_store_free(kd);
    free(kd->records);
    free(kd->rpcs);
    free(kd->restored);
    free(kd);
}

static int read_seeds(kademlia *kd, const bbp_config *cfg, bb_error *err)
{
    cJSON *owned = NULL;
    const cJSON *list = bbp_config_get(cfg, "seeds", &owned);
    int n = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : -1, rc = BB_OK;
    if (n < 0 || n > KAD_MAX_SEEDS)
        rc = bb_error_set(err, BB_ECONFIG, "%s: 'seeds' must be a list of at most %d multiaddrs",
                          cfg->who, KAD_MAX_SEEDS);
    for (int i = 0; !rc && i < n; i++) {
        const cJSON *s = cJSON_GetArrayItem(list, i);
        char what[32];
        snprintf(what, sizeof what, "seeds[%d]", i);
        rc = cJSON_IsString(s) ? bbp_peer_addr_parse(cfg->who, what, s->valuestring,
                                                     &kd->seeds[kd->n_seeds++], err)
                               : bb_error_set(err, BB_ECONFIG, "%s: %s is not a string",
                                              cfg->who, what);
    }
    cJSON_Delete(owned);
    return rc;
}

static int read_config(kademlia *kd, const bbp_config *cfg, bb_error *err)
{
    int64_t k, alpha, timeout, refresh, records, value, ttl;
    int rc = bbp_config_int(cfg, "k", 1, KAD_K_MAX, &k, err);
    if (!rc)
        rc = bbp_config_int(cfg, "alpha", 1, KAD_ALPHA_MAX, &alpha, err);
    if (!rc)
        rc = bbp_config_int(cfg, "rpc_timeout_ms", 1, 3600 * 1000, &timeout, err);
    if (!rc)
        rc = bbp_config_int(cfg, "refresh_ms", 1, 24 * 3600 * 1000, &refresh, err);
    if (!rc)
        rc = bbp_config_int(cfg, "max_records", 0, 1 << 20, &records, err);
    if (!rc)
        rc = bbp_config_int(cfg, "max_value_bytes", 0, 64 * 1024, &value, err);
    if (!rc)
        rc = bbp_config_int(cfg, "record_ttl_ms", 1, 7 * 24 * 3600 * 1000ll, &ttl, err);
    if (rc)
        return rc;
    kd->k = (uint32_t)k;
    kd->alpha = (uint32_t)alpha;
    kd->rpc_timeout_ns = (uint64_t)timeout * KAD_MS;
    kd->refresh_ns = (uint64_t)refresh * KAD_MS;
    kd->max_records = (size_t)records;
    kd->max_value = (size_t)value;
    kd->record_ttl_ms = (uint64_t)ttl;
    return read_seeds(kd, cfg, err);
}

static int kad_create(const bb_create_args *args, void **out, bb_error *err)
{
    bbp_config cfg;
    int rc = bbp_config_load(&cfg, args, KAD_NAME, CONFIG, BBP_COUNT(CONFIG), err);
    if (rc)
        return rc;
    kademlia *kd = calloc(1, sizeof *kd);
    if (!kd)
        rc = bb_error_set(err, BB_ENOMEM, KAD_NAME ": out of memory");
    if (!rc) {
        snprintf(kd->who, sizeof kd->who, "%s", cfg.who);
        rc = read_config(kd, &cfg, err);
    }
    if (!rc && (!(kd->rpcs = calloc(KAD_MAX_RPCS, sizeof *kd->rpcs)) ||
                !(kd->records = calloc(kd->max_records ? kd->max_records : 1,
                                       sizeof *kd->records))))
        rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory", cfg.who);
    bbp_config_free(&cfg);
    if (rc) {
        if (kd)
            kad_destroy(kd);
        return rc;
    }
    *out = kd;
    return BB_OK;
}

/* ---- ops ----------------------------------------------------------------------------------- */

static void know_self(kademlia *kd, bb_ctx *ctx)
{
    if (kd->have_self || !bbp_peer_self(ctx, &kd->self))
        return;
    kad_key_of_peer(&kd->self, &kd->self_key);
    kd->have_self = true;
    for (size_t i = 0; i < kd->n_restored; i++) /* in their order: least recently seen first */
        kad_table_place(kd, &kd->restored[i]);
    free(kd->restored);
    kd->restored = NULL;
    kd->n_restored = 0;
}

static bool is_control(const bb_dispatch_call *call)
{
    return !call->node && call->n_inputs == 3 && call->inputs[0] &&
           call->inputs[0]->type->kind == BB_VK_BYTES && call->inputs[2] &&
           call->inputs[2]->type->kind == BB_VK_PEER_ID;
}

static bool is_rpc(const char *op)
{
    return !strcmp(op, "Ping") || !strcmp(op, "FindNode") || !strcmp(op, "FindValue") ||
           !strcmp(op, "Store");
}

static bb_dispatch_result contacts(kademlia *kd, bb_value **outputs, bb_error *err)
{
    size_t n = kad_table_count(kd), k = 0;
    bb_value **ids = calloc(n ? n : 1, sizeof *ids);
    for (int b = 0; ids && b < KAD_BUCKETS; b++)
        for (uint16_t i = 0; i < kd->buckets[b].n; i++)
            if ((ids[k] = bbp_peer_id_value(&kd->buckets[b].c[i].id)))
                k++;
    outputs[0] = ids ? bb_value_list(&BB_TYPE_PEER_ID_VEC, ids, k) : NULL;
    free(ids);
    if (!outputs[0])
        bb_error_set(err, BB_ENOMEM, "%s: out of memory", kd->who);
    return outputs[0] ? BB_DISPATCH_NOW_OK : BB_DISPATCH_NOW_ERR;
}

/* The key (and Put's value) of a procedure call: from the graph's values,
 * or from a control-plane request's payload. */
typedef struct proc_args {
    const uint8_t *key, *value;
    size_t key_len, value_len;
    uint8_t *owned[2];
} proc_args;

static int proc_args_of(kademlia *kd, const bb_dispatch_call *call, bool put, proc_args *a,
                        bb_error *err)
{
    memset(a, 0, sizeof *a);
    if (is_control(call)) {
        const bb_value *p = call->inputs[0];
        if (!put) {
            a->key = p->u.bytes.data;
            a->key_len = p->u.bytes.len;
        } else {
            bb_reader rd;
            bb_reader_init(&rd, p->u.bytes.data, p->u.bytes.len);
            bb_reader_delimited(&rd, &a->key, &a->key_len);
            bb_reader_delimited(&rd, &a->value, &a->value_len);
            if (rd.failed || bb_reader_left(&rd))
                return bb_error_set(err, BB_EPARSE, "%s: malformed Put request", kd->who);
        }
    } else if (call->n_inputs < (put ? 2u : 1u) ||
               bbp_key_bytes(call->inputs[0], &a->key, &a->key_len, &a->owned[0]) ||
               (put && bbp_key_bytes(call->inputs[1], &a->value, &a->value_len, &a->owned[1]))) {
        return bb_error_set(err, BB_EINVAL, "%s: %s needs its key%s", kd->who, call->op_type,
                            put ? " and value" : "");
    }
    if (a->key_len > KAD_MAX_KEY_BYTES)
        return bb_error_set(err, BB_ELIMIT, "%s: a key of %zu bytes (at most %d)", kd->who,
                            a->key_len, KAD_MAX_KEY_BYTES);
    if (put && a->value_len > kd->max_value)
        return bb_error_set(err, BB_ELIMIT, "%s: a value of %zu bytes (max_value_bytes %zu)",
                            kd->who, a->value_len, kd->max_value);
    return BB_OK;
}

static bb_dispatch_result procedure(kademlia *kd, bb_ctx *ctx, const bb_dispatch_call *call,
                                    bb_value **outputs, bb_error *err)
{
    const char *op = call->op_type;
    bool put = !strcmp(op, "Put"), get = !strcmp(op, "Get");
    proc_args a;
    int rc = proc_args_of(kd, call, put, &a, err);
    kad_key target;
    if (!rc)
        kad_key_of(a.key, a.key_len, &target);
    const kad_record *r = !rc && get ? kad_store_get(kd, &target, ctx->api->now_ns(ctx)) : NULL;
    bb_dispatch_result res = BB_DISPATCH_NOW_ERR;
    if (r) { /* this node has it */
        outputs[0] = bb_value_bytes(&BB_TYPE_BYTES, r->value, r->len);
        res = outputs[0] ? BB_DISPATCH_NOW_OK : BB_DISPATCH_NOW_ERR;
    } else if (!rc) {
        uint8_t kind = put ? LK_PUT : get ? LK_VALUE : LK_NODE;
        kd->dispatching = true;
        int i = kad_lookup_start(kd, ctx, kind, &target, call->completion, a.value, a.value_len,
                                 kd->record_ttl_ms, err);
        kd->dispatching = false;
        res = i < 0 ? BB_DISPATCH_NOW_ERR : BB_DISPATCH_LATER;
    }
    free(a.owned[0]);
    free(a.owned[1]);
    return res;
}

static bb_dispatch_result kad_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                       bb_value **outputs, bb_error *err)
{
    kademlia *kd = inst;
    know_self(kd, ctx);
    const char *op = call->op_type;
    if (!kd->have_self || !bbp_ctx_has_control(ctx)) {
        bb_error_set(err, BB_EUNSUPPORTED, "%s: needs an engine with the control plane (ABI 2.2)",
                     kd->who);
        return BB_DISPATCH_NOW_ERR;
    }
    if (is_rpc(op)) {
        if (is_control(call))
            return kad_rpc_answer(kd, ctx, call, outputs, err);
        bb_error_set(err, BB_EINVAL, "%s: %s is an RPC between DHT nodes (control plane); a "
                     "graph calls Lookup, Get or Put", kd->who, op);
        return BB_DISPATCH_NOW_ERR;
    }
    if (!strcmp(op, "Contacts"))
        return contacts(kd, outputs, err);
    if (!strcmp(op, "Lookup") || !strcmp(op, "Get") || !strcmp(op, "Put"))
        return procedure(kd, ctx, call, outputs, err);
    bb_error_set(err, BB_EUNSUPPORTED, "%s: no op %s", kd->who, op);
    return BB_DISPATCH_NOW_ERR;
}

static void kad_on_answer(void *inst, bb_ctx *ctx, uint64_t token, int status, const uint8_t *p,
                          size_t len)
{
    kademlia *kd = inst;
    kad_rpc rpc;
    if (!kad_rpc_take(kd, token, &rpc))
        return;
    if (rpc.kind == RPC_PING)
        kad_table_ping_done(kd, rpc.bucket, &rpc.peer, status == BB_OK, ctx->api->now_ns(ctx));
    else
        kad_lookup_rpc_done(kd, ctx, &rpc, status, p, len);
}

/* ---- bootstrap, refresh --------------------------------------------------------------------- */

/* A random key sharing exactly b leading bits with this node's. */
static void key_in_bucket(kademlia *kd, bb_ctx *ctx, int b, kad_key *out)
{
    *out = kd->self_key;
    for (int i = 0; i < KAD_KEY; i += 8) {
        uint64_t r = ctx->api->rng_u64(ctx);
        for (int j = 0; j < 8 && i + j < KAD_KEY; j++)
            if ((i + j) * 8 > b) /* whole bytes past bit b: random */
                out->b[i + j] = (uint8_t)(r >> (8 * j));
    }
    int byte = b / 8, bit = b % 8;
    uint8_t keep = (uint8_t)(0xff << (8 - bit)); /* the shared bits of that byte */
    uint8_t rnd = (uint8_t)ctx->api->rng_u64(ctx);
    out->b[byte] = (uint8_t)((kd->self_key.b[byte] & keep) |
                             (~kd->self_key.b[byte] & (0x80 >> bit)) |
                             (rnd & (uint8_t)(0xff >> (bit + 1))));
}

static void refresh(kademlia *kd, bb_ctx *ctx)
{
    uint64_t now = ctx->api->now_ns(ctx);
    kad_store_expire(kd, now);
    int top = -1;
    for (int b = 0; b < KAD_BUCKETS; b++)
        if (kd->buckets[b].n)
            top = b;
    int started = 0;
    for (int b = 0; b <= top + 1 && b < KAD_BUCKETS && started < REFRESH_PER_TICK; b++) {
        if (kd->buckets[b].used_ns + kd->refresh_ns > now)
            continue;
        kad_key key;
        key_in_bucket(kd, ctx, b, &key);
        if (kad_lookup_start(kd, ctx, LK_SELF, &key, NULL, NULL, 0, 0, NULL) >= 0)
            started++;
    }
}

static void kad_on_timer(void *inst, bb_ctx *ctx, uint64_t token)
{
    kademlia *kd = inst;
    know_self(kd, ctx);
    if (token == KAD_TIMER_REFRESH) {
        ctx->api->schedule(ctx, kd->refresh_ns, KAD_TIMER_REFRESH);
        if (kd->have_self)
            refresh(kd, ctx);
    } else if (token >= KAD_TIMER_FINISH && token < KAD_TIMER_FINISH + KAD_MAX_LOOKUPS) {
        kad_lookup_finish(kd, ctx, (uint16_t)(token - KAD_TIMER_FINISH));
    }
}

/* Join: the seeds into the table, then a lookup of this node's own key;
 * the bootstrap completes when it ends. */
static bb_dispatch_result kad_bootstrap(void *inst, bb_ctx *ctx, bb_completion *c, bb_error *err)
{
    kademlia *kd = inst;
    know_self(kd, ctx);
    if (!kd->have_self || !bbp_ctx_has_control(ctx)) {
        bb_error_set(err, BB_EUNSUPPORTED, "%s: needs an engine with the control plane (ABI 2.2)",
                     kd->who);
        return BB_DISPATCH_NOW_ERR;
    }
    if (kd->started)
        return BB_DISPATCH_NOW_OK;
    kd->started = true;
    ctx->api->schedule(ctx, kd->refresh_ns, KAD_TIMER_REFRESH);
    for (uint32_t i = 0; i < kd->n_seeds; i++)
        if (!bb_peerid_equal(&kd->seeds[i].id, &kd->self) &&
            bbp_peer_rec_learn(ctx, &kd->seeds[i], NULL) == BB_OK)
            kad_table_seen(kd, ctx, &kd->seeds[i].id);
    if (!kad_table_count(kd))
        return BB_DISPATCH_NOW_OK; /* the first node: nobody to ask */
    kd->dispatching = true;
    int i = kad_lookup_start(kd, ctx, LK_SELF, &kd->self_key, NULL, NULL, 0, 0, err);
    kd->dispatching = false;
    if (i < 0)
        return BB_DISPATCH_NOW_ERR;
    kd->lookups[i].boot = true;
    kd->boot = c;
    return BB_DISPATCH_LATER;
}

/* ---- snapshot: the routing table and the records ------------------------------------------ */

static int kad_snapshot(void *inst, uint8_t **out, size_t *len, bb_error *err)
{
    kademlia *kd = inst;
    bb_writer w = {0};
    bb_writer_put_uvarint(&w, SNAPSHOT_VERSION);
    bb_writer_put_u8(&w, kd->started);
    bb_writer_put_uvarint(&w, kad_table_count(kd));
    for (int b = 0; b < KAD_BUCKETS; b++)
        for (uint16_t i = 0; i < kd->buckets[b].n; i++) {
            const kad_contact *c = &kd->buckets[b].c[i];
            bb_writer_put_delimited(&w, c->id.bytes, c->id.len);
            bb_writer_put_uvarint(&w, c->seen_ns);
        }
    bb_writer_put_uvarint(&w, kd->n_records);
    for (size_t i = 0; i < kd->n_records; i++) {
        const kad_record *r = &kd->records[i];
        bb_writer_put(&w, r->key.b, KAD_KEY);
        bb_writer_put_delimited(&w, r->value, r->len);
        bb_writer_put_uvarint(&w, r->expires_ns);
    }
    if (!bb_writer_take(&w, out, len))
        return bb_error_set(err, BB_ENOMEM, "%s: snapshot: out of memory", kd->who);
    return BB_OK;
}

/* Contacts are restored into a pending list and placed in their buckets
 * once this node's key is known (the restore gets no context). */
static int kad_restore(void *inst, const uint8_t *data, size_t len, bb_error *err)
{
    kademlia *kd = inst;
    bb_reader rd;
    bb_reader_init(&rd, data, len);
    uint64_t version = 0, n = 0, nr = 0;
    uint8_t started = 0;
    bb_reader_uvarint(&rd, &version);
    bb_reader_u8(&rd, &started);
    bb_reader_uvarint(&rd, &n);
    if (!rd.failed && (version != SNAPSHOT_VERSION || n > (uint64_t)KAD_BUCKETS * kd->k))
        return bb_error_set(err, BB_EDECODE, "%s: snapshot version %llu with %llu contacts",
                            kd->who, (unsigned long long)version, (unsigned long long)n);
    kad_contact *cs = calloc(n ? n : 1, sizeof *cs);
    for (uint64_t i = 0; cs && i < n && !rd.failed; i++) {
        const uint8_t *p;
        size_t pl;
        if (bb_reader_delimited(&rd, &p, &pl) &&
            bb_peerid_from_bytes(p, pl, &cs[i].id, NULL) != BB_OK)
            bb_reader_fail(&rd, rd.pos, BB_EDECODE, "not a PeerId");
        bb_reader_uvarint(&rd, &cs[i].seen_ns);
        kad_key_of_peer(&cs[i].id, &cs[i].key);
    }
    if (!rd.failed && bb_reader_uvarint(&rd, &nr) && nr > kd->max_records)
        bb_reader_fail(&rd, rd.pos, BB_EDECODE, "more records than max_records");
    kad_store_free(kd);
    for (uint64_t i = 0; cs && i < nr && !rd.failed; i++) {
        kad_key key;
        const uint8_t *v = NULL;
        size_t vl = 0;
        uint64_t exp = 0;
        bb_reader_get(&rd, key.b, KAD_KEY);
        bb_reader_delimited(&rd, &v, &vl);
        bb_reader_uvarint(&rd, &exp);
        if (!rd.failed && kad_store_put(kd, &key, v, vl, kd->record_ttl_ms, 0, NULL) == BB_OK)
            kd->records[kd->n_records - 1].expires_ns = exp;
    }
    if (!cs || rd.failed || bb_reader_left(&rd)) {
        free(cs);
        kad_store_free(kd);
        return bb_error_set(err, cs ? BB_EDECODE : BB_ENOMEM, "%s: malformed snapshot at byte %zu",
                            kd->who, rd.failed ? rd.fail_at : rd.pos);
    }
    kad_table_free(kd);
    free(kd->restored);
    kd->started = started != 0;
    kd->restored = cs;
    kd->n_restored = (size_t)n;
    return BB_OK;
}

const bb_component_type DHT_KADEMLIA = {
    BBP_TYPE_ABI,
    .type_name = KAD_NAME,
    .role = BB_ROLE_PROTOCOL,
    .doc = "a Kademlia DHT: k-buckets with ping-before-evict, α-parallel lookups, small "
           "records with expiry; Lookup / Get / Put / Contacts, RPCs on the control plane",
    .opsets = OPSETS,
    .n_opsets = BBP_COUNT(OPSETS),
    .config = CONFIG,
    .n_config = BBP_COUNT(CONFIG),
    .create = kad_create,
    .destroy = kad_destroy,
    .dispatch = kad_dispatch,
    .bootstrap = kad_bootstrap,
    .snapshot = kad_snapshot,
    .restore = kad_restore,
    .on_timer = kad_on_timer,
    .on_answer = kad_on_answer,
};

static const bb_component_type *const TYPES[] = {&DHT_KADEMLIA};

BBP_PLUGIN_ENTRY("dht", TYPES)
