/*
 * lookup.c — Kademlia's iterative lookups.
 *
 * A lookup keeps a shortlist of candidates ordered by distance to its
 * target, seeded with the k closest contacts of this node's table. It asks
 * the closest candidates it has not asked yet, at most α at a time, among
 * the k closest that have not failed; each answer adds the contacts it
 * names; a candidate that fails (no answer in time, unreachable, a
 * malformed answer) drops out of the shortlist's count and out of the
 * routing table. The lookup ends when the k closest candidates that have
 * not failed have all answered: they are the k closest live nodes it could
 * reach. A value lookup (FindValue) ends early when one node answers with
 * the value. Put looks the k closest up, then sends each a Store (and
 * keeps the record itself when it is among the k closest).
 *
 * Hops: a candidate from this node's table has depth 0, one learned from
 * the answer of a depth-d candidate depth d+1; a lookup's hops are the
 * depth of its closest result plus one (the RPC rounds that found it).
 *
 * A lookup that ends inside the dispatch that started it (nobody to ask)
 * finishes from a timer instead: a handle must not complete before its
 * dispatch returned LATER.
 *
 * Bounds: 64 lookups at once (more are refused), a shortlist of 3k, the
 * RPC table's 1024 requests in flight (a lookup that cannot send waits for
 * its next answer to try again, or ends).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dht.h"

void kad_lookup_free(kad_lookup *l)
{
    free(l->cand);
    free(l->value);
    memset(l, 0, sizeof *l);
}

static kad_cand *find_cand(kad_lookup *l, const bb_peerid *id)
{
    for (uint16_t i = 0; i < l->n; i++)
        if (bb_peerid_equal(&l->cand[i].id, id))
            return &l->cand[i];
    return NULL;
}

/* Into the shortlist at its place, unless known or beyond a full list. */
static void add_cand(kad_lookup *l, const bb_peerid *id, const kad_key *key, uint8_t depth)
{
    if (find_cand(l, id))
        return;
    uint16_t at = l->n;
    while (at > 0 && kad_closer(&l->target, key, &l->cand[at - 1].key))
        at--;
    if (at == l->cap)
        return;
    uint16_t last = l->n < l->cap ? l->n : (uint16_t)(l->cap - 1);
    memmove(&l->cand[at + 1], &l->cand[at], (size_t)(last - at) * sizeof *l->cand);
    l->cand[at] = (kad_cand){.id = *id, .key = *key, .state = CAND_NEW, .depth = depth};
    l->n += l->n < l->cap;
}

/* An RPC of lookup i in flight no longer has a lookup to report to. */
static void drop_rpcs_of(kademlia *kd, uint16_t i)
{
    for (size_t r = 0; r < kd->n_rpcs;)
        if (kd->rpcs[r].kind != RPC_PING && kd->rpcs[r].lookup == i)
            kd->rpcs[r] = kd->rpcs[--kd->n_rpcs];
        else
            r++;
}

static void complete_now(kademlia *kd, kad_lookup *l, uint16_t i, bb_value **outs, uint32_t n)
{
    drop_rpcs_of(kd, i);
    if (l->c)
        bb_complete_ok(l->c, outs, n);
    else
        for (uint32_t k = 0; k < n; k++)
            bb_value_unref(outs[k]);
    kad_lookup_free(l);
}

static void fail_now(kademlia *kd, kad_lookup *l, uint16_t i, int status, const char *msg)
{
    drop_rpcs_of(kd, i);
    if (l->c)
        bb_complete_err(l->c, status, msg);
    kad_lookup_free(l);
}

/* The k closest candidates that answered, closest first; *hops. */
static bb_value *results(const kademlia *kd, const kad_lookup *l, uint64_t *hops)
{
    bb_value *ids[KAD_K_MAX];
    size_t n = 0;
    *hops = 0;
    for (uint16_t i = 0; i < l->n && n < kd->k; i++) {
        if (l->cand[i].state != CAND_OK)
            continue;
        if (!n)
            *hops = (uint64_t)l->cand[i].depth + 1;
        if ((ids[n] = bbp_peer_id_value(&l->cand[i].id)))
            n++;
    }
    return bb_value_list(&BB_TYPE_PEER_ID_VEC, ids, n);
}

/* Put: store at the k closest that answered (and here when this node is
 * one of them); completes when every Store has ended. */
static void put_stores(kademlia *kd, bb_ctx *ctx, kad_lookup *l, uint16_t i)
{
    bb_writer w = {0};
    bb_writer_put(&w, l->target.b, KAD_KEY);
    bb_writer_put_uvarint(&w, l->ttl_ms);
    bb_writer_put_delimited(&w, l->value, l->value_len);
    size_t asked = 0, ok_seen = 0;
    bool here = true; /* this node is among the k closest unless k answered closer */
    for (uint16_t c = 0; c < l->n && ok_seen < kd->k && !w.failed; c++) {
        if (l->cand[c].state != CAND_OK)
            continue;
        if (++ok_seen == kd->k && kad_closer(&l->target, &l->cand[c].key, &kd->self_key))
            here = false;
        if (kad_rpc_send(kd, ctx, &l->cand[c].id, "Store", w.data, w.len, RPC_STORE, i, 0) ==
            BB_OK)
            asked++;
    }
    bb_writer_free(&w);
    if (here && kad_store_put(kd, &l->target, l->value, l->value_len, l->ttl_ms,
                              ctx->api->now_ns(ctx), NULL) == BB_OK)
        l->stores_ok++;
    l->stores_pending = (uint16_t)asked;
    if (!asked) {
        bb_value *n = bb_value_u64(&BB_TYPE_U64, l->stores_ok);
        complete_now(kd, l, i, &n, 1);
    }
}

static void finish(kademlia *kd, bb_ctx *ctx, uint16_t i)
{
    kad_lookup *l = &kd->lookups[i];
    uint64_t hops = 0;
    if (l->kind == LK_PUT) {
        l->inflight = 0;
        put_stores(kd, ctx, l, i);
        return;
    }
    if (l->kind == LK_SELF) {
        if (l->boot && kd->boot) { /* the bootstrap's self lookup: the node has joined */
            bb_complete_ok(kd->boot, NULL, 0);
            kd->boot = NULL;
        }
        complete_now(kd, l, i, NULL, 0);
        return;
    }
    if (l->kind == LK_VALUE) {
        bb_value *v = l->found ? bb_value_bytes(&BB_TYPE_BYTES, l->value, l->value_len) : NULL;
        if (v)
            complete_now(kd, l, i, &v, 1);
        else
            fail_now(kd, l, i, BB_ENOTFOUND, l->found ? "out of memory" : "no node has the key");
        return;
    }
    bb_value *outs[2] = {results(kd, l, &hops), bb_value_u64(&BB_TYPE_U64, hops)};
    if (outs[0] && outs[1]) {
        complete_now(kd, l, i, outs, 2);
    } else {
        bb_value_unref(outs[0]);
        bb_value_unref(outs[1]);
        fail_now(kd, l, i, BB_ENOMEM, "out of memory");
    }
}

/* Ask the closest unasked candidates among the k closest that have not
 * failed, at most α at a time; finish when none is left to ask or wait for. */
static void advance(kademlia *kd, bb_ctx *ctx, uint16_t i)
{
    kad_lookup *l = &kd->lookups[i];
    if (l->kind == LK_VALUE && l->found) {
        finish(kd, ctx, i);
        return;
    }
    const char *op = l->kind == LK_VALUE ? "FindValue" : "FindNode";
    uint32_t counted = 0;
    for (uint16_t c = 0; c < l->n && counted < kd->k && l->inflight < kd->alpha; c++) {
        kad_cand *cd = &l->cand[c];
        if (cd->state == CAND_FAILED)
            continue;
        counted++;
        if (cd->state != CAND_NEW)
            continue;
        int rc = kad_rpc_send(kd, ctx, &cd->id, op, l->target.b, KAD_KEY, RPC_FIND, i, 0);
        if (rc == BB_OK) {
            cd->state = CAND_ASKED;
            l->inflight++;
        } else if (rc != BB_EFULL) { /* no address, ...: as good as dead */
            cd->state = CAND_FAILED;
            counted--;
            kad_table_forget(kd, &cd->id);
        } else {
            break; /* the RPC table is full: the next answer tries again */
        }
    }
    if (!l->inflight && kd->dispatching) /* not inside the dispatch that started it */
        ctx->api->schedule(ctx, 0, KAD_TIMER_FINISH + i);
    else if (!l->inflight)
        finish(kd, ctx, i);
}

void kad_lookup_finish(kademlia *kd, bb_ctx *ctx, uint16_t i)
{
    if (i < KAD_MAX_LOOKUPS && kd->lookups[i].used && !kd->lookups[i].inflight &&
        !kd->lookups[i].stores_pending)
        finish(kd, ctx, i);
}

int kad_lookup_start(kademlia *kd, bb_ctx *ctx, uint8_t kind, const kad_key *target,
                     bb_completion *c, const uint8_t *value, size_t value_len, uint64_t ttl_ms,
                     bb_error *err)
{
    int i = 0;
    while (i < KAD_MAX_LOOKUPS && kd->lookups[i].used)
        i++;
    if (i == KAD_MAX_LOOKUPS)
        return bb_error_set(err, BB_EFULL, "%s: %d lookups already under way", kd->who,
                            KAD_MAX_LOOKUPS),
               -1;
    kad_lookup *l = &kd->lookups[i];
    memset(l, 0, sizeof *l);
    l->cap = (uint16_t)(3 * kd->k);
    l->cand = calloc(l->cap, sizeof *l->cand);
    if (value_len && (l->value = malloc(value_len)))
        memcpy(l->value, value, value_len);
    if (!l->cand || (value_len && !l->value)) {
        kad_lookup_free(l);
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", kd->who), -1;
    }
    l->used = true;
    l->kind = kind;
    l->target = *target;
    l->c = c;
    l->value_len = value_len;
    l->ttl_ms = ttl_ms;
    int b = kad_cpl(&kd->self_key, target);
    if (b < KAD_BUCKETS)
        kd->buckets[b].used_ns = ctx->api->now_ns(ctx);
    /* the shortlist starts with up to 3k of this node's closest contacts:
     * when the closest fail (stale entries), the next ones are already known */
    kad_contact *seed = malloc(l->cap * sizeof *seed);
    size_t n = seed ? kad_table_closest(kd, target, NULL, seed, l->cap) : 0;
    for (size_t k = 0; k < n; k++)
        add_cand(l, &seed[k].id, &seed[k].key, 0);
    free(seed);
    advance(kd, ctx, (uint16_t)i);
    return i;
}

/* A FindNode / FindValue answer: the value, or contacts to add. False when
 * malformed. */
static bool take_answer(kademlia *kd, bb_ctx *ctx, kad_lookup *l, uint8_t from_depth,
                        const uint8_t *p, size_t len)
{
    bb_reader rd;
    bb_reader_init(&rd, p, len);
    if (l->kind == LK_VALUE) {
        uint8_t has = 0;
        const uint8_t *v;
        size_t vl = 0;
        uint64_t ms = 0;
        if (!bb_reader_u8(&rd, &has) || has > 1)
            return false;
        if (has) {
            if (!bb_reader_delimited(&rd, &v, &vl) || !bb_reader_uvarint(&rd, &ms) ||
                bb_reader_left(&rd) || vl > kd->max_value || !(l->value = malloc(vl ? vl : 1)))
                return false;
            memcpy(l->value, v, vl);
            l->value_len = vl;
            l->found = true;
            return true;
        }
    }
    bbp_peer_rec *got = malloc(kd->k * sizeof *got);
    size_t n = 0;
    uint8_t depth = from_depth < 254 ? from_depth + 1 : 255;
    bool ok = got && kad_get_contacts(&rd, kd->k, got, &n) && !bb_reader_left(&rd);
    for (size_t k = 0; ok && k < n; k++) {
        if (bb_peerid_equal(&got[k].id, &kd->self))
            continue;
        bbp_peer_rec_learn(ctx, &got[k], NULL);
        kad_key key;
        kad_key_of_peer(&got[k].id, &key);
        add_cand(l, &got[k].id, &key, depth);
    }
    free(got);
    return ok;
}

void kad_lookup_rpc_done(kademlia *kd, bb_ctx *ctx, const kad_rpc *rpc, int status,
                         const uint8_t *p, size_t len)
{
    uint16_t i = rpc->lookup;
    if (i >= KAD_MAX_LOOKUPS || !kd->lookups[i].used)
        return;
    kad_lookup *l = &kd->lookups[i];
    if (rpc->kind == RPC_STORE) {
        l->stores_ok += status == BB_OK;
        if (--l->stores_pending == 0) {
            bb_value *n = bb_value_u64(&BB_TYPE_U64, l->stores_ok);
            complete_now(kd, l, i, &n, 1);
        }
        return;
    }
    l->inflight--;
    kad_cand *cd = find_cand(l, &rpc->peer);
    if (cd) { /* (else: pushed out of the shortlist by closer nodes meanwhile) */
        bool ok = status == BB_OK && take_answer(kd, ctx, l, cd->depth, p, len);
        cd = find_cand(l, &rpc->peer); /* the answer's contacts may have moved it */
        if (cd)
            cd->state = ok ? CAND_OK : CAND_FAILED;
    }
    if (status == BB_OK)
        kad_table_seen(kd, ctx, &rpc->peer);
    else
        kad_table_forget(kd, &rpc->peer);
    advance(kd, ctx, i);
}
