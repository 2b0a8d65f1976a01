/*
 * daemon_book.c — how much other nodes can put in this node's address
 * book, and where they can make it dial.
 *
 * Every peer in the book that this node did not configure came from a
 * handshake that proved its key (transport.h): an identity enters the
 * book only once its key is proven. Keys are cheap to make, though, so
 * one machine could still fill the book with identities. The book
 * therefore remembers, for every peer it learned this way, the IP address
 * its channel came from, and holds at most max_peers_per_source such
 * peers per address: a new one beyond that replaces the one of that
 * address that left longest ago (its entry leaves the book, and this node
 * stops redialing it). Peers this node configured and peers on its allow
 * or deny list are never counted nor replaced.
 *
 * A peer whose connection dropped is redialed for a while (daemon_dial.c)
 * at the addresses it announced — but only those on the IP address it
 * actually came from, so a peer cannot point this node's dials at a
 * third party's address; the dial rules (dial_allow, dial_deny) apply on
 * top.
 */
#include <stdlib.h>
#include <string.h>

#include "bb/multiaddr.h"
#include "bbd/host/daemon.h"

struct bbd_learned {
    bb_peerid peer;
    int family;
    uint8_t ip[16];
    bool connected;
    uint64_t left_ms; /* when it disconnected (connected: 0) */
};

static bbd_learned *find(bbd_daemon *d, const bb_peerid *peer)
{
    for (size_t i = 0; i < d->n_learned; i++)
        if (bb_peerid_equal(&d->learned[i].peer, peer))
            return &d->learned[i];
    return NULL;
}

/* Configured, or on an access list: the operator's, never replaced. */
static bool operator_peer(const bbd_daemon *d, const bb_peerid *peer)
{
    for (size_t i = 0; i < d->cfg->n_peers; i++)
        if (bb_peerid_equal(&d->cfg->peers[i].id, peer))
            return true;
    bb_engine_peer_info pi;
    return bb_engine_peer_info_get(d->engine, peer, &pi) && (pi.allowed || pi.blocked);
}

static bool same_ip(const bbd_learned *l, int family, const uint8_t *ip)
{
    return l->family == family && memcmp(l->ip, ip, family == AF_INET ? 4 : 16) == 0;
}

/* Drop entry i: out of the book and the redial list. */
static void forget(bbd_daemon *d, size_t i)
{
    bb_engine_remove_peer(d->engine, &d->learned[i].peer);
    bbd_daemon_dial_forget(d, &d->learned[i].peer);
    d->book_evicted++;
    d->learned[i] = d->learned[--d->n_learned];
}

/* The entry (of family/ip, or of any address: family 0) that left the
 * longest ago; SIZE_MAX when every one is connected. */
static size_t oldest_gone(const bbd_daemon *d, int family, const uint8_t *ip)
{
    size_t v = SIZE_MAX;
    for (size_t i = 0; i < d->n_learned; i++) {
        const bbd_learned *l = &d->learned[i];
        if (!l->connected && (!family || same_ip(l, family, ip)) &&
            (v == SIZE_MAX || l->left_ms < d->learned[v].left_ms))
            v = i;
    }
    return v;
}

/* Room for one more entry (the array doubles, up to max_learned). */
static bool grow(bbd_daemon *d)
{
    if (d->n_learned < d->cap_learned)
        return true;
    size_t cap = d->cap_learned ? 2 * d->cap_learned : 64;
    bbd_learned *v = realloc(d->learned, cap * sizeof *v);
    if (!v)
        return false;
    d->learned = v;
    d->cap_learned = cap;
    return true;
}

void bbd_daemon_book_connected(bbd_daemon *d, const bb_peerid *peer)
{
    bbd_peer_stats st;
    bb_ma_transport src;
    if (!d->transport || !bbd_transport_peer_stats(d->transport, peer, &st) ||
        bb_multiaddr_transport(st.remote, st.remote_len, &src, NULL) != BB_OK)
        return;
    bbd_learned *l = find(d, peer);
    if (!l && operator_peer(d, peer))
        return;
    if (!l) {
        size_t same = 0, cap = d->cfg->max_peers_per_source;
        for (size_t i = 0; i < d->n_learned; i++)
            same += same_ip(&d->learned[i], src.family, src.ip);
        size_t v;
        while (same >= cap && (v = oldest_gone(d, src.family, src.ip)) != SIZE_MAX) {
            forget(d, v);
            same--;
        }
        if (d->n_learned == d->max_learned && (v = oldest_gone(d, 0, NULL)) != SIZE_MAX)
            forget(d, v);
        if (d->n_learned == d->max_learned || !grow(d))
            return; /* every one connected: the connection limits bound them */
        l = &d->learned[d->n_learned++];
        l->peer = *peer;
    }
    l->family = src.family;
    memcpy(l->ip, src.ip, sizeof l->ip);
    l->connected = true;
    l->left_ms = 0;
}

void bbd_daemon_book_lost(bbd_daemon *d, const bb_peerid *peer)
{
    bbd_learned *l = find(d, peer);
    if (l) {
        l->connected = false;
        l->left_ms = uv_now(&d->loop);
    }
}

bool bbd_daemon_book_source(bbd_daemon *d, const bb_peerid *peer, const bbd_addr *addr)
{
    const bbd_learned *l = find(d, peer);
    bb_ma_transport ma;
    if (!l)
        return true; /* not learned from a connection: the operator's */
    return bb_multiaddr_transport(addr->data, addr->len, &ma, NULL) == BB_OK &&
           same_ip(l, ma.family, ma.ip);
}

void bbd_daemon_book_init(bbd_daemon *d)
{
    d->max_learned = d->cfg->caps.address_book_max_peers;
}
