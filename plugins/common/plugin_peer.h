/*
 * plugin_peer.h — a peer as components carry it between nodes (the
 * registry's answers, CYCLON's shuffles, Kademlia's contacts), and the
 * small helpers around PeerIds, seed addresses and keys that the peers and
 * dht plugins share:
 *
 *   record = delimited(PeerId bytes) uvarint(aux) uvarint(n_addrs)
 *            n_addrs x delimited(binary multiaddr)
 *
 * Decoding reads untrusted bytes: a PeerId must decode, at most
 * BBP_PEER_MAX_ADDRS addresses of at most BBP_PEER_ADDR_MAX bytes each,
 * each a valid multiaddr a transport can dial (IP or /dns host, /tcp or
 * /udp); anything else fails the whole message. Nothing is allocated
 * while decoding.
 *
 * Addresses live in the engine's address book: a record is made from it
 * (bbp_peer_rec_of) when a peer is handed on, and put back into the
 * receiver's (bbp_peer_rec_learn), which is how a node learns to reach the
 * peers it hears of.
 *
 * Header-only (static inline): plugins share no library, each .so compiles
 * its own copy.
 */
#ifndef BBP_PLUGIN_PEER_H
#define BBP_PLUGIN_PEER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <bb/bytes.h>
#include <bb/multiaddr.h>
#include <bb/peerid.h>
#include <bb/plugin.h>

#define BBP_PEER_MAX_ADDRS 4
#define BBP_PEER_ADDR_MAX 96 /* bytes of one binary multiaddr (a /dns name fits) */

/* A peer on the wire: its PeerId, up to BBP_PEER_MAX_ADDRS dialable
 * addresses, and one number (a CYCLON age, a registry entry's remaining
 * lifetime in ms). */
typedef struct bbp_peer_rec {
    bb_peerid id;
    uint64_t aux;
    uint8_t n_addrs;
    uint8_t addr_len[BBP_PEER_MAX_ADDRS];
    uint8_t addr[BBP_PEER_MAX_ADDRS][BBP_PEER_ADDR_MAX];
} bbp_peer_rec;

static inline void bbp_peer_rec_put(bb_writer *w, const bbp_peer_rec *r)
{
    bb_writer_put_delimited(w, r->id.bytes, r->id.len);
    bb_writer_put_uvarint(w, r->aux);
    bb_writer_put_uvarint(w, r->n_addrs);
    for (uint8_t i = 0; i < r->n_addrs; i++)
        bb_writer_put_delimited(w, r->addr[i], r->addr_len[i]);
}

/* A multiaddr a transport can dial (IP or host name, /tcp or /udp). */
static inline bool bbp_dialable(const uint8_t *a, size_t n)
{
    bb_ma_endpoint ep;
    return n && n <= BBP_PEER_ADDR_MAX && bb_multiaddr_endpoint(a, n, &ep, NULL) == BB_OK;
}

static inline bool bbp_peer_rec_get(bb_reader *rd, bbp_peer_rec *out)
{
    const uint8_t *p;
    size_t n, at = rd->pos;
    uint64_t n_addrs = 0;
    memset(out, 0, sizeof *out);
    if (!bb_reader_delimited(rd, &p, &n) || !bb_reader_uvarint(rd, &out->aux) ||
        !bb_reader_uvarint(rd, &n_addrs))
        return false;
    if (bb_peerid_from_bytes(p, n, &out->id, NULL) != BB_OK)
        return bb_reader_fail(rd, at, BB_EPARSE, "not a PeerId");
    if (n_addrs > BBP_PEER_MAX_ADDRS)
        return bb_reader_fail(rd, at, BB_ELIMIT, "too many addresses");
    for (uint64_t i = 0; i < n_addrs; i++) {
        size_t a_at = rd->pos;
        if (!bb_reader_delimited(rd, &p, &n))
            return false;
        if (!bbp_dialable(p, n))
            return bb_reader_fail(rd, a_at, BB_EPARSE, "not a dialable multiaddr");
        memcpy(out->addr[i], p, n);
        out->addr_len[i] = (uint8_t)n;
    }
    out->n_addrs = (uint8_t)n_addrs;
    return true;
}

static inline bool bbp_ctx_has_control(const bb_ctx *ctx)
{
    return ctx && ctx->api && BB_ABI_HAS(bb_ctx_api, ctx->api, local_targets) &&
           ctx->api->send_fill && ctx->api->local_targets;
}

static inline bb_value *bbp_peer_id_value(const bb_peerid *id)
{
    return bb_value_bytes(&BB_TYPE_PEER_ID, id->bytes, id->len);
}

static inline bool bbp_peer_id_of(const bb_value *v, bb_peerid *out)
{
    return v && v->type && v->type->kind == BB_VK_PEER_ID &&
           bb_peerid_from_bytes(v->u.bytes.data, v->u.bytes.len, out, NULL) == BB_OK;
}

static inline bool bbp_peer_self(bb_ctx *ctx, bb_peerid *out)
{
    return ctx && ctx->api && ctx->api->local_peer &&
           bbp_peer_id_of(ctx->api->local_peer(ctx), out);
}

static inline bool bbp_peer_rec_of(bb_ctx *ctx, const bb_peerid *peer, uint64_t aux,
                                   bbp_peer_rec *out)
{
    memset(out, 0, sizeof *out);
    out->id = *peer;
    out->aux = aux;
    bb_value *pv = bbp_peer_id_value(peer);
    bb_value *addrs = pv && ctx->api->peer_addresses ? ctx->api->peer_addresses(ctx, pv) : NULL;
    bb_value_unref(pv);
    for (size_t i = 0; addrs && i < addrs->u.list.n && out->n_addrs < BBP_PEER_MAX_ADDRS; i++) {
        const bb_value *a = addrs->u.list.items[i];
        if (!a || !bbp_dialable(a->u.bytes.data, a->u.bytes.len))
            continue; /* an address only this node can use (or too long to hand on) */
        memcpy(out->addr[out->n_addrs], a->u.bytes.data, a->u.bytes.len);
        out->addr_len[out->n_addrs++] = (uint8_t)a->u.bytes.len;
    }
    bb_value_unref(addrs);
    return pv != NULL;
}

static inline int bbp_peer_rec_learn(bb_ctx *ctx, const bbp_peer_rec *r, bb_error *err)
{
    if (!r->n_addrs || !ctx->api->add_peer)
        return BB_OK;
    bb_value *items[BBP_PEER_MAX_ADDRS];
    size_t n = 0;
    for (uint8_t i = 0; i < r->n_addrs; i++)
        if ((items[n] = bb_value_bytes(&BB_TYPE_MULTIADDRESS, r->addr[i], r->addr_len[i])))
            n++;
    bb_value *vec = bb_value_list(&BB_TYPE_ADDRESS_VEC, items, n); /* takes items */
    bb_value *id = bbp_peer_id_value(&r->id);
    int rc = vec && id ? ctx->api->add_peer(ctx, id, vec, err)
                       : bb_error_set(err, BB_ENOMEM, "out of memory");
    bb_value_unref(vec);
    bb_value_unref(id);
    return rc;
}

static inline int bbp_peer_addr_parse(const char *who, const char *what, const char *text,
                                      bbp_peer_rec *out, bb_error *err)
{
    memset(out, 0, sizeof *out);
    uint8_t *bin = NULL;
    size_t len = 0;
    bb_error e = {0};
    if (bb_multiaddr_parse_alloc(text, &bin, &len, &e))
        return bb_error_set(err, BB_ECONFIG, "%s: %s '%s': %s", who, what, text, e.msg);
    bb_multiaddr_component c[BB_MULTIADDR_MAX_COMPONENTS];
    size_t nc = 0, transport_len = len;
    int rc = bb_multiaddr_decode(bin, len, c, BB_MULTIADDR_MAX_COMPONENTS, &nc, &e);
    bool have_id = false;
    for (size_t i = 0; !rc && i < nc; i++)
        if (c[i].code == BB_MA_P2P) {
            have_id = bb_peerid_from_bytes(c[i].value, c[i].value_len, &out->id, NULL) == BB_OK;
            transport_len = c[i].offset; /* the address without /p2p (and what follows) */
            break;
        }
    if (!rc && !have_id)
        rc = bb_error_set(&e, BB_ECONFIG, "needs /p2p/<PeerId> (whom to expect there)");
    else if (!rc && !bbp_dialable(bin, transport_len))
        rc = bb_error_set(&e, BB_ECONFIG,
                          "needs /ip4, /ip6, /dns4, /dns6 or /dns, then /tcp or /udp, before /p2p");
    if (!rc) {
        memcpy(out->addr[0], bin, transport_len);
        out->addr_len[0] = (uint8_t)transport_len;
        out->n_addrs = 1;
    }
    free(bin);
    return rc ? bb_error_set(err, BB_ECONFIG, "%s: %s '%s': %s", who, what, text, e.msg) : BB_OK;
}

/* The bytes a key value stands for: a Bytes, PeerId or Multiaddress value's
 * own bytes, any other value's wire encoding (*owned: malloc'd, to free).
 * BB_OK, BB_EINVAL for no value, or the encoder's error. */
static inline int bbp_key_bytes(const bb_value *v, const uint8_t **p, size_t *n, uint8_t **owned)
{
    *owned = NULL;
    if (!v || !v->type)
        return BB_EINVAL;
    bb_value_kind k = v->type->kind;
    if (k == BB_VK_BYTES || k == BB_VK_PEER_ID || k == BB_VK_ADDRESS) {
        *p = v->u.bytes.data;
        *n = v->u.bytes.len;
        return BB_OK;
    }
    int rc = bb_value_encode(v, owned, n, NULL);
    *p = *owned;
    return rc;
}

#endif
