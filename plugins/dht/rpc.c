/*
 * rpc.c — Kademlia's four RPCs on the control plane, both ends.
 *
 * Payloads (a key is the 32-byte hash; contacts as in plugin_peer.h):
 *   Ping       ""                                -> ""
 *   FindNode   key                               -> uvarint n, n x contact
 *   FindValue  key                               -> u8 1, delimited(value),
 *                                                   uvarint(ms left)
 *                                                 | u8 0, uvarint n, n x contact
 *   Store      key, uvarint ttl_ms, delimited(value) -> ""
 * A contact is a record (plugin_peer.h): PeerId and the dialable addresses
 * the answering node's address book has for it. At most k contacts per
 * answer; a malformed request is refused (answered with the error), a
 * malformed answer fails the RPC. Whoever sends this node an RPC is a
 * contact seen (routing.c).
 *
 * This node's RPCs in flight are kept in a bounded table (token -> what
 * they are for), matched with on_answer.
 */
#include <stdlib.h>
#include <string.h>

#include "dht.h"

int kad_rpc_send(kademlia *kd, bb_ctx *ctx, const bb_peerid *peer, const char *op,
                 const uint8_t *payload, size_t len, uint8_t kind, uint16_t lookup,
                 uint16_t bucket)
{
    if (kd->n_rpcs == KAD_MAX_RPCS)
        return BB_EFULL;
    bb_value *to = bbp_peer_id_value(peer);
    uint64_t token = 0;
    int rc = to ? ctx->api->send_fill(ctx, to, NULL, op, payload, len, kd->rpc_timeout_ns,
                                      &token, NULL)
                : BB_ENOMEM;
    bb_value_unref(to);
    if (rc)
        return rc;
    kd->rpcs[kd->n_rpcs++] = (kad_rpc){token, kind, lookup, bucket, *peer};
    if (kind == RPC_PING)
        kd->buckets[bucket].ping_token = token;
    return BB_OK;
}

bool kad_rpc_take(kademlia *kd, uint64_t token, kad_rpc *out)
{
    for (size_t i = 0; i < kd->n_rpcs; i++)
        if (kd->rpcs[i].token == token) {
            *out = kd->rpcs[i];
            kd->rpcs[i] = kd->rpcs[--kd->n_rpcs];
            return true;
        }
    return false;
}

void kad_put_contacts(bb_ctx *ctx, bb_writer *w, const kad_contact *c, size_t n)
{
    bb_writer_put_uvarint(w, n);
    for (size_t i = 0; i < n; i++) {
        bbp_peer_rec r;
        bbp_peer_rec_of(ctx, &c[i].id, 0, &r);
        bbp_peer_rec_put(w, &r);
    }
}

bool kad_get_contacts(bb_reader *rd, uint32_t k, bbp_peer_rec *out, size_t *n)
{
    uint64_t count = 0;
    size_t at = rd->pos;
    if (!bb_reader_uvarint(rd, &count))
        return false;
    if (count > k)
        return bb_reader_fail(rd, at, BB_ELIMIT, "more contacts than k");
    for (uint64_t i = 0; i < count; i++)
        if (!bbp_peer_rec_get(rd, &out[i]))
            return false;
    *n = (size_t)count;
    return true;
}

/* ---- the answers to other nodes' RPCs --------------------------------------------------- */

static bb_value *bytes_of(bb_writer *w)
{
    bb_value *v = w->failed ? NULL : bb_value_bytes(&BB_TYPE_BYTES, w->data, w->len);
    bb_writer_free(w);
    return v;
}

/* The k closest contacts to key that this node knows, the asker left out. */
static void put_closest(kademlia *kd, bb_ctx *ctx, bb_writer *w, const kad_key *key,
                        const bb_peerid *asker)
{
    kad_contact close[KAD_K_MAX];
    size_t n = kad_table_closest(kd, key, asker, close, kd->k);
    kad_put_contacts(ctx, w, close, n);
}

static int answer_store(kademlia *kd, bb_ctx *ctx, bb_reader *rd, const kad_key *key,
                        bb_error *err)
{
    uint64_t ttl_ms = 0;
    const uint8_t *v;
    size_t len = 0;
    bb_reader_uvarint(rd, &ttl_ms);
    bb_reader_delimited(rd, &v, &len);
    if (rd->failed || bb_reader_left(rd))
        return bb_error_set(err, BB_EPARSE, "%s: malformed Store", kd->who);
    return kad_store_put(kd, key, v, len, ttl_ms, ctx->api->now_ns(ctx), err);
}

bb_dispatch_result kad_rpc_answer(kademlia *kd, bb_ctx *ctx, const bb_dispatch_call *call,
                                  bb_value **outputs, bb_error *err)
{
    const bb_value *payload = call->inputs[0];
    bb_peerid asker;
    bool known = bbp_peer_id_of(call->inputs[2], &asker);
    if (known)
        kad_table_seen(kd, ctx, &asker);
    const char *op = call->op_type;
    bb_writer w = {0};
    if (!strcmp(op, "Ping")) {
        outputs[0] = bytes_of(&w);
        return outputs[0] ? BB_DISPATCH_NOW_OK : BB_DISPATCH_NOW_ERR;
    }
    bb_reader rd;
    bb_reader_init(&rd, payload->u.bytes.data, payload->u.bytes.len);
    kad_key key;
    if (!bb_reader_get(&rd, key.b, KAD_KEY) || (strcmp(op, "Store") && bb_reader_left(&rd))) {
        bb_error_set(err, BB_EPARSE, "%s: malformed %s (a 32-byte key first)", kd->who, op);
        return BB_DISPATCH_NOW_ERR;
    }
    if (!strcmp(op, "Store")) {
        if (answer_store(kd, ctx, &rd, &key, err))
            return BB_DISPATCH_NOW_ERR;
    } else if (!strcmp(op, "FindValue")) {
        uint64_t now = ctx->api->now_ns(ctx);
        const kad_record *r = kad_store_get(kd, &key, now);
        bb_writer_put_u8(&w, r != NULL);
        if (r) {
            bb_writer_put_delimited(&w, r->value, r->len);
            bb_writer_put_uvarint(&w, (r->expires_ns - now) / KAD_MS);
        } else {
            put_closest(kd, ctx, &w, &key, known ? &asker : NULL);
        }
    } else { /* FindNode */
        put_closest(kd, ctx, &w, &key, known ? &asker : NULL);
    }
    outputs[0] = bytes_of(&w);
    if (!outputs[0])
        bb_error_set(err, BB_ENOMEM, "%s: out of memory", kd->who);
    return outputs[0] ? BB_DISPATCH_NOW_OK : BB_DISPATCH_NOW_ERR;
}
