/*
 * transport_peers.c — the transport's peer table and send queues.
 *
 * A peer exists from the first send to it or the first handshake from it.
 * Envelopes wait in its queue while a channel is being set up; queued and
 * being-written bytes are bounded per peer and in total (an envelope
 * larger than a bound still goes when nothing else is held, so the frame
 * cap, not the queue cap, limits one envelope). Peers with nothing
 * pointing at them are forgotten when the table is over its cap, so
 * handshakes with ever new PeerIds cannot grow it without bound.
 */
#include <stdlib.h>
#include <string.h>

#include "bbd/host/transport_internal.h"

static size_t peer_hash(const bb_peerid *id)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < id->len; i++)
        h = (h ^ id->bytes[i]) * 0x100000001b3ull;
    return (size_t)(h ^ (h >> 29));
}

int bbd__peers_init(bbd_transport *t)
{
    t->max_peers = 4 * t->cfg.max_connections + 64;
    t->n_peer_buckets = 64;
    t->peer_buckets = calloc(t->n_peer_buckets, sizeof *t->peer_buckets);
    return t->peer_buckets ? BB_OK : BB_ENOMEM;
}

static void queue_free(bbd_transport *t, bbd_peer *p)
{
    while (p->q_head) {
        bbd_pending *q = p->q_head;
        p->q_head = q->next;
        t->held_total -= q->pl.len;
        p->held_bytes -= q->pl.len;
        bbd__payload_free(&q->pl);
        free(q);
    }
    p->q_tail = NULL;
    p->q_count = 0;
}

void bbd__peers_free(bbd_transport *t)
{
    for (size_t i = 0; i < t->n_peers; i++) {
        queue_free(t, t->peers[i]);
        free(t->peers[i]);
    }
    free(t->peers);
    free(t->peer_buckets);
    t->last_found = NULL;
}

bbd_peer *bbd__peer_find(const bbd_transport *t, const bb_peerid *id)
{
    bbd_peer *p = t->last_found;
    if (p && bb_peerid_equal(&p->id, id))
        return p;
    p = t->peer_buckets[peer_hash(id) & (t->n_peer_buckets - 1)];
    while (p && !bb_peerid_equal(&p->id, id))
        p = p->hnext;
    if (p)
        ((bbd_transport *)t)->last_found = p; /* a hint, not state: const for callers */
    return p;
}

static bool peer_idle(const bbd_peer *p)
{
    return p->refs == 0 && p->q_count == 0 && !p->active && !p->dialing && !p->udp &&
           !p->udp_dialing && !p->resolving;
}

static void peer_remove(bbd_transport *t, bbd_peer *p)
{
    bbd_peer **pp = &t->peer_buckets[peer_hash(&p->id) & (t->n_peer_buckets - 1)];
    while (*pp != p)
        pp = &(*pp)->hnext;
    *pp = p->hnext;
    if (t->last_found == p)
        t->last_found = NULL;
    t->peers[p->index] = t->peers[--t->n_peers];
    t->peers[p->index]->index = p->index;
    free(p);
}

static int grow_buckets(bbd_transport *t)
{
    size_t n = t->n_peer_buckets * 2;
    bbd_peer **b = calloc(n, sizeof *b);
    if (!b)
        return BB_ENOMEM;
    for (size_t i = 0; i < t->n_peers; i++) {
        bbd_peer *p = t->peers[i];
        size_t h = peer_hash(&p->id) & (n - 1);
        p->hnext = b[h];
        b[h] = p;
    }
    free(t->peer_buckets);
    t->peer_buckets = b;
    t->n_peer_buckets = n;
    return BB_OK;
}

bbd_peer *bbd__peer_get(bbd_transport *t, const bb_peerid *id)
{
    bbd_peer *p = bbd__peer_find(t, id);
    if (p)
        return p;
    if (t->n_peers >= t->max_peers) {
        /* Forget one idle peer to make room; none idle means refuse. */
        size_t i = 0;
        while (i < t->n_peers && !peer_idle(t->peers[i]))
            i++;
        if (i == t->n_peers)
            return NULL;
        peer_remove(t, t->peers[i]);
    }
    if (t->n_peers == t->cap_peers) {
        size_t cap = t->cap_peers ? 2 * t->cap_peers : 16;
        bbd_peer **v = realloc(t->peers, cap * sizeof *v);
        if (!v)
            return NULL;
        t->peers = v;
        t->cap_peers = cap;
    }
    if (t->n_peers >= t->n_peer_buckets && grow_buckets(t) != BB_OK)
        return NULL;
    p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->id = *id;
    p->index = t->n_peers;
    t->peers[t->n_peers++] = p;
    size_t h = peer_hash(id) & (t->n_peer_buckets - 1);
    p->hnext = t->peer_buckets[h];
    t->peer_buckets[h] = p;
    return p;
}

bool bbd__peer_admit(bbd_transport *t, bbd_peer *p, size_t len)
{
    size_t cap = t->cfg.max_queue_per_peer_bytes, tcap = t->cfg.max_queue_total_bytes;
    bool peer_ok = p->held_bytes == 0 || (p->held_bytes <= cap && len <= cap - p->held_bytes);
    bool total_ok =
        t->held_total == 0 || (t->held_total <= tcap && len <= tcap - t->held_total);
    if (!peer_ok || !total_ok)
        return false;
    p->held_bytes += len;
    t->held_total += len;
    return true;
}

void bbd__peer_enqueue(bbd_transport *t, bbd_peer *p, bbd_payload *pl)
{
    bbd_pending *q = malloc(sizeof *q);
    if (!q) {
        bbd__send_failed(t, p, pl);
        return;
    }
    *q = (bbd_pending){NULL, *pl};
    if (p->q_tail)
        p->q_tail->next = q;
    else
        p->q_head = q;
    p->q_tail = q;
    p->q_count++;
}

/* Detach the queue first: a report may send again to the same peer. */
void bbd__peer_fail_queue(bbd_transport *t, bbd_peer *p)
{
    bbd_pending *q = p->q_head;
    p->q_head = p->q_tail = NULL;
    p->q_count = 0;
    p->refs++; /* keep p through the reports */
    while (q) {
        bbd_pending *next = q->next;
        bbd__send_failed(t, p, &q->pl);
        free(q);
        q = next;
    }
    p->refs--;
}

void bbd__peer_channel_send(bbd_transport *t, bbd_peer *p, bbd_payload *pl)
{
    if (p->active)
        bbd__tcp_send(t, p->active, pl);
    else
        bbd__udp_send(t, p->udp, pl);
}

void bbd__peer_flush(bbd_transport *t, bbd_peer *p)
{
    bbd_pending *q = p->q_head;
    p->q_head = p->q_tail = NULL;
    p->q_count = 0;
    while (q) {
        bbd_pending *next = q->next;
        if (p->active || p->udp) {
            bbd__peer_channel_send(t, p, &q->pl);
        } else { /* the channel went away while flushing */
            bbd__send_failed(t, p, &q->pl);
        }
        free(q);
        q = next;
    }
}

void bbd__send_done(bbd_transport *t, bbd_peer *p, size_t len, bool ok)
{
    p->held_bytes -= len;
    t->held_total -= len;
    if (ok) {
        p->envelopes_out++;
        t->stats.envelopes_out++;
    } else {
        p->dropped++;
    }
    if (!t->closing && t->cb.on_send_result)
        t->cb.on_send_result(t->cb.ud, &p->id, ok);
}

void bbd__send_failed(bbd_transport *t, bbd_peer *p, bbd_payload *pl)
{
    size_t len = pl->len;
    bbd__payload_free(pl);
    bbd__send_done(t, p, len, false);
}

/* ---- sends that completed at once ----------------------------------------------------- */

/* Report every pending send, also those that a report's callback adds by
 * sending again (by index: the array may grow meanwhile), so a sender that
 * answers each report with its next envelope never waits for the loop. */
static void on_reports(uv_prepare_t *h)
{
    bbd_transport *t = h->data;
    for (size_t i = 0; i < t->n_reports; i++) {
        bbd_report r = t->reports[i];
        r.peer->refs--;
        bbd__send_done(t, r.peer, r.len, true);
    }
    t->n_reports = 0;
    uv_prepare_stop(h);
}

int bbd__reports_init(bbd_transport *t)
{
    if (uv_prepare_init(t->loop, &t->report_prepare) != 0)
        return BB_ENOMEM;
    t->report_prepare.data = t;
    bbd__handle_init(t);
    return BB_OK;
}

void bbd__send_done_later(bbd_transport *t, bbd_peer *p, size_t len)
{
    if (t->n_reports == t->cap_reports) {
        size_t cap = t->cap_reports ? 2 * t->cap_reports : 16;
        bbd_report *r = realloc(t->reports, cap * sizeof *r);
        if (!r) { /* report now rather than lose it */
            bbd__send_done(t, p, len, true);
            return;
        }
        t->reports = r;
        t->cap_reports = cap;
    }
    p->refs++;
    t->reports[t->n_reports++] = (bbd_report){p, len};
    uv_prepare_start(&t->report_prepare, on_reports);
}

void bbd__reports_flush(bbd_transport *t)
{
    on_reports(&t->report_prepare);
}

void bbd__peer_update(bbd_transport *t, bbd_peer *p)
{
    if (t->closing)
        return;
    bool carrier = p->active || p->udp || p->dialing || p->udp_dialing || p->resolving;
    if (!carrier && p->q_count)
        bbd__peer_fail_queue(t, p);
    if (p->connected && !p->active && !p->udp) {
        p->connected = false;
        if (t->cb.on_peer_disconnected)
            t->cb.on_peer_disconnected(t->cb.ud, &p->id);
    }
}

/* ---- per-peer counters ------------------------------------------------------------- */

static void peer_stats(const bbd_peer *p, bbd_peer_stats *out)
{
    *out = (bbd_peer_stats){.peer = p->id,
                            .connected = p->active || p->udp,
                            .bytes_in = p->bytes_in,
                            .bytes_out = p->bytes_out,
                            .envelopes_in = p->envelopes_in,
                            .envelopes_out = p->envelopes_out,
                            .queued_bytes = p->held_bytes,
                            .dropped = p->dropped};
    /* the socket address of the channel: where the peer's traffic comes from */
    const uint8_t *remote = p->active ? p->active->remote : p->udp ? p->udp->observed : NULL;
    size_t rl = p->active ? p->active->remote_len : p->udp ? p->udp->observed_len : 0;
    if (remote && rl <= sizeof out->remote) {
        memcpy(out->remote, remote, rl);
        out->remote_len = rl;
    }
    if (p->active)
        out->state = "open";
    else if (p->dialing)
        out->state = p->dialing->state == CONN_CONNECTING ? "connecting" : "handshake";
    else if (p->udp)
        out->state = "udp";
    else if (p->udp_dialing)
        out->state = "handshake";
    else if (p->resolving)
        out->state = "resolving";
    else
        out->state = "closed";
}

bool bbd_transport_peer_stats_at(const bbd_transport *t, size_t i, bbd_peer_stats *out)
{
    if (i >= t->n_peers)
        return false;
    peer_stats(t->peers[i], out);
    return true;
}

bool bbd_transport_peer_stats(const bbd_transport *t, const bb_peerid *peer, bbd_peer_stats *out)
{
    const bbd_peer *p = bbd__peer_find(t, peer);
    if (!p)
        return false;
    peer_stats(p, out);
    return true;
}
