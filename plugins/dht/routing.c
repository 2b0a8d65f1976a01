/*
 * routing.c — Kademlia's routing table.
 *
 * Keys: a node's key is SHA-256 of its PeerId's bytes (the multihash), a
 * record's key SHA-256 of the key it is stored under, so both spread
 * uniformly over 256 bits whatever the PeerId or the key look like.
 * Distance is XOR, compared as a 256-bit big-endian number.
 *
 * Buckets: bucket i holds up to k contacts whose key shares exactly i
 * leading bits with this node's, least recently seen first. A contact
 * seen again moves to the end. A newcomer for a full bucket does not evict
 * anybody at once: the least recently seen contact is pinged, and only if
 * it fails to answer is it evicted for the newcomer (the paper's rule:
 * long-lived nodes are the likeliest to stay, and an attacker cannot flush
 * a table by sending from many new PeerIds). One newcomer waits per bucket
 * (a later one replaces it). A contact that fails an RPC leaves the table.
 *
 * Workload: tables hold k x (log2 n + a few) contacts; closest() is a
 * linear scan with an insertion into a k-sized result, ample at that size.
 */
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "dht.h"

void kad_key_of(const uint8_t *p, size_t n, kad_key *out)
{
    crypto_hash_sha256(out->b, p, n);
}

void kad_key_of_peer(const bb_peerid *id, kad_key *out)
{
    kad_key_of(id->bytes, id->len, out);
}

int kad_cpl(const kad_key *a, const kad_key *b)
{
    for (int i = 0; i < KAD_KEY; i++) {
        uint8_t x = a->b[i] ^ b->b[i];
        if (x)
            return i * 8 + __builtin_clz((unsigned)x) - 24;
    }
    return KAD_KEY * 8;
}

bool kad_closer(const kad_key *t, const kad_key *a, const kad_key *b)
{
    for (int i = 0; i < KAD_KEY; i++) {
        uint8_t da = a->b[i] ^ t->b[i], db = b->b[i] ^ t->b[i];
        if (da != db)
            return da < db;
    }
    return false;
}

static kad_bucket *bucket_of(kademlia *kd, const kad_key *key)
{
    int b = kad_cpl(&kd->self_key, key);
    return b < KAD_BUCKETS ? &kd->buckets[b] : NULL; /* 256: this node itself */
}

static int index_in(const kad_bucket *bk, const bb_peerid *id)
{
    for (uint16_t i = 0; i < bk->n; i++)
        if (bb_peerid_equal(&bk->c[i].id, id))
            return i;
    return -1;
}

static void remove_at(kad_bucket *bk, uint16_t i)
{
    memmove(&bk->c[i], &bk->c[i + 1], (size_t)(bk->n - i - 1) * sizeof *bk->c);
    bk->n--;
}

void kad_table_seen(kademlia *kd, bb_ctx *ctx, const bb_peerid *peer)
{
    kad_contact c = {.id = *peer, .seen_ns = ctx->api->now_ns(ctx)};
    kad_key_of_peer(peer, &c.key);
    kad_bucket *bk = bucket_of(kd, &c.key);
    if (!bk)
        return;
    int at = index_in(bk, peer);
    if (at >= 0) { /* known: now the most recently seen */
        remove_at(bk, (uint16_t)at);
        bk->c[bk->n++] = c;
        return;
    }
    if (!bk->c && !(bk->c = calloc(kd->k, sizeof *bk->c)))
        return;
    if (bk->n < kd->k) {
        bk->c[bk->n++] = c;
        return;
    }
    bk->cand = c; /* full: it waits while the least recently seen is pinged */
    bk->has_cand = true;
    if (bk->ping_token)
        return;
    uint16_t b = (uint16_t)(bk - kd->buckets);
    bb_peerid head = bk->c[0].id;
    if (kad_rpc_send(kd, ctx, &head, "Ping", NULL, 0, RPC_PING, 0, b) != BB_OK)
        kad_table_ping_done(kd, b, &head, false, c.seen_ns); /* could not even be asked */
}

void kad_table_ping_done(kademlia *kd, uint16_t b, const bb_peerid *pinged, bool alive,
                         uint64_t now)
{
    kad_bucket *bk = &kd->buckets[b];
    bk->ping_token = 0;
    int at = index_in(bk, pinged);
    if (at >= 0) {
        kad_contact c = bk->c[at];
        remove_at(bk, (uint16_t)at);
        if (alive) { /* it stays, now the most recent; the newcomer does not get in */
            c.seen_ns = now;
            bk->c[bk->n++] = c;
            bk->has_cand = false;
        }
    }
    if (bk->has_cand && bk->n < kd->k) /* evicted (or gone meanwhile): the newcomer's turn */
        bk->c[bk->n++] = bk->cand;
    bk->has_cand = false;
}

void kad_table_forget(kademlia *kd, const bb_peerid *peer)
{
    kad_key key;
    kad_key_of_peer(peer, &key);
    kad_bucket *bk = bucket_of(kd, &key);
    int at = bk ? index_in(bk, peer) : -1;
    if (at < 0)
        return;
    remove_at(bk, (uint16_t)at);
    if (bk->has_cand && !bk->ping_token) { /* the waiting newcomer takes the slot */
        bk->c[bk->n++] = bk->cand;
        bk->has_cand = false;
    }
}

size_t kad_table_closest(const kademlia *kd, const kad_key *key, const bb_peerid *skip,
                         kad_contact *out, size_t max)
{
    size_t n = 0;
    for (int b = 0; b < KAD_BUCKETS; b++) {
        const kad_bucket *bk = &kd->buckets[b];
        for (uint16_t i = 0; i < bk->n; i++) {
            const kad_contact *c = &bk->c[i];
            if (skip && bb_peerid_equal(&c->id, skip))
                continue;
            size_t at = n < max ? n : max; /* insertion into the sorted result */
            while (at > 0 && kad_closer(key, &c->key, &out[at - 1].key))
                at--;
            if (at == max)
                continue;
            size_t last = n < max ? n : max - 1;
            memmove(&out[at + 1], &out[at], (last - at) * sizeof *out);
            out[at] = *c;
            n += n < max;
        }
    }
    return n;
}

void kad_table_place(kademlia *kd, const kad_contact *c)
{
    kad_bucket *bk = bucket_of(kd, &c->key);
    if (!bk || index_in(bk, &c->id) >= 0 || (!bk->c && !(bk->c = calloc(kd->k, sizeof *bk->c))))
        return;
    if (bk->n < kd->k)
        bk->c[bk->n++] = *c;
}

size_t kad_table_count(const kademlia *kd)
{
    size_t n = 0;
    for (int b = 0; b < KAD_BUCKETS; b++)
        n += kd->buckets[b].n;
    return n;
}

void kad_table_free(kademlia *kd)
{
    for (int b = 0; b < KAD_BUCKETS; b++) {
        free(kd->buckets[b].c);
        kd->buckets[b].c = NULL;
        kd->buckets[b].n = 0;
    }
}
