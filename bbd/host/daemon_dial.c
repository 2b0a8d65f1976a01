/*
 * daemon_dial.c — bbd keeps connections to the peers it knows it needs:
 *   - every peer of its config (--peer, "peers"): dialed when the node is
 *     ready and redialed for as long as it runs;
 *   - every peer whose connection dropped (a client that died, a server
 *     that restarted): redialed at the addresses it announced, for
 *     LOST_REDIAL_MS after the drop, then forgotten until it connects again.
 * A dropped peer is redialed only at the addresses on the IP address it
 * came from (daemon_book.c), and no peer the access lists refuse is
 * dialed at all.
 * A dial is retried 100 ms after a failure, doubling to 5 s. Each dial that
 * found the peer still unreachable is reported to the engine as a failed
 * send, so the peer-health governor sees a dead peer (PeerDown after
 * caps.peer_failure_threshold failures) even when nothing is being sent to
 * it, and the backoff table holds sends back; a reconnect counts as a
 * success (PeerUp).
 *
 * Why dial at all: a peer learns this node's targets from the handshake of
 * a connection (transport.h), and a node that only answers requests never
 * sends first. A federated client started with --peer SERVER therefore
 * joins the server's peers::Connected view at once, and again after either
 * side restarts — the server needs no list of its clients.
 */
#include <stdlib.h>
#include <string.h>

#include "bbd/host/daemon.h"

#define DIAL_FIRST_RETRY_MS 100
#define DIAL_MAX_RETRY_MS 5000
#define LOST_REDIAL_MS (10 * 60 * 1000) /* how long a dropped peer is redialed */
#define LOST_MAX 1024                  /* dropped peers redialed at once */
#define LOST_ADDRS_MAX 8               /* addresses tried per dial */

struct bbd_dial_peer {
    bb_peerid id;
    bool configured;   /* from the config: redialed forever */
    uint32_t cfg_index; /* configured: its cfg->peers entry */
    bool dialing;      /* a dial was made and has not been seen open yet */
    uint64_t due_ms;   /* loop time of the next dial (0: now) */
    uint64_t delay_ms; /* the wait after the next failure (0: first) */
    uint64_t lost_ms;  /* dropped peers: when the connection closed */
};

static void on_dial_timer(uv_timer_t *h) { bbd_daemon_dial(h->data); }

static bbd_dial_peer *find(bbd_daemon *d, const bb_peerid *peer)
{
    for (size_t i = 0; i < d->n_dial; i++)
        if (bb_peerid_equal(&d->dial[i].id, peer))
            return &d->dial[i];
    return NULL;
}

/* Connected (or just dropped): the next dial is due at once, with no backoff. */
static void dial_reset(bbd_dial_peer *p)
{
    p->dialing = false;
    p->delay_ms = 0;
    p->due_ms = 0;
}

static void drop_at(bbd_daemon *d, size_t i)
{
    d->dial[i] = d->dial[--d->n_dial];
}

typedef enum {
    DIAL_STARTED, /* under way: seen open later, or counted a failure */
    DIAL_OPEN,    /* a connection is open now */
    DIAL_NOTHING, /* nothing to dial: no address announced, or this node */
    DIAL_REFUSED, /* the access lists refuse the peer: asked again later */
} dial_result;

static dial_result dial_one(bbd_daemon *d, const bbd_dial_peer *p)
{
    bool open = false;
    int rc;
    if (bb_engine_peer_access(d->engine, &p->id))
        return DIAL_REFUSED;
    if (p->configured) {
        const bbd_peer_cfg *cp = &d->cfg->peers[p->cfg_index];
        bbd_addr a = {cp->addr, cp->addr_len};
        rc = bbd_transport_connect(d->transport, &cp->id, &a, 1, &open);
    } else {
        const bb_engine_addr *ea = NULL;
        size_t n = bb_engine_peer_addrs(d->engine, &p->id, &ea);
        bbd_addr a[LOST_ADDRS_MAX];
        size_t k = 0;
        for (size_t i = 0; i < n && k < LOST_ADDRS_MAX; i++) {
            a[k] = (bbd_addr){ea[i].data, ea[i].len};
            k += bbd_daemon_book_source(d, &p->id, &a[k]); /* on the IP it came from */
        }
        if (!k)
            return DIAL_NOTHING;
        rc = bbd_transport_connect(d->transport, &p->id, a, k, &open);
    }
    if (rc == BB_EINVAL) /* this node itself: nothing to keep */
        return DIAL_NOTHING;
    return open ? DIAL_OPEN : DIAL_STARTED;
}

/* p is due: dial it and set when it is due next. False when p leaves the
 * list (a dropped peer that is back, or has nothing to dial); a configured
 * peer always stays. */
static bool dial_due(bbd_daemon *d, bbd_dial_peer *p, uint64_t now)
{
    switch (dial_one(d, p)) {
    case DIAL_OPEN:
        dial_reset(p);
        return p->configured;
    case DIAL_NOTHING:
        p->due_ms = UINT64_MAX; /* never again */
        return p->configured;
    case DIAL_REFUSED:
        p->dialing = false;
        p->due_ms = now + DIAL_MAX_RETRY_MS; /* the lists may change at run time */
        return true;
    case DIAL_STARTED:
        break;
    }
    p->dialing = true;
    p->delay_ms = !p->delay_ms                         ? DIAL_FIRST_RETRY_MS
                  : p->delay_ms >= DIAL_MAX_RETRY_MS / 2 ? DIAL_MAX_RETRY_MS
                                                         : 2 * p->delay_ms;
    p->due_ms = now + p->delay_ms; /* checked again then: open, or dial again */
    return true;
}

void bbd_daemon_dial(bbd_daemon *d)
{
    if (d->stopping || !d->handles_open || !d->transport)
        return;
    uint64_t now = uv_now(&d->loop), next = UINT64_MAX;
    bool kick = false;
    for (size_t i = 0; i < d->n_dial;) {
        bbd_dial_peer *p = &d->dial[i];
        bool keep = p->configured || now - p->lost_ms < LOST_REDIAL_MS;
        if (keep && now >= p->due_ms) {
            if (p->dialing) { /* the last dial is still not open: a failure */
                bb_engine_report_send(d->engine, &p->id, false);
                kick = true;
            }
            keep = dial_due(d, p, now);
        }
        if (!keep) {
            drop_at(d, i);
            continue;
        }
        if (p->dialing) /* only a dial under way has a retry; an open peer waits for dial_lost */
            next = p->due_ms < next ? p->due_ms : next;
        i++;
    }
    if (kick)
        bbd_daemon_kick(d);
    if (next != UINT64_MAX)
        uv_timer_start(&d->dial_timer, on_dial_timer, next > now ? next - now : 0, 0);
    else
        uv_timer_stop(&d->dial_timer);
}

void bbd_daemon_dial_lost(bbd_daemon *d, const bb_peerid *peer)
{
    bbd_dial_peer *p = find(d, peer);
    uint64_t now = uv_now(&d->loop);
    if (p) {
        dial_reset(p); /* it was open: dial again now, then back off */
        p->lost_ms = now;
    } else if (d->n_dial < d->dial_cap) {
        d->dial[d->n_dial++] = (bbd_dial_peer){.id = *peer, .lost_ms = now};
    }
    bbd_daemon_dial(d);
}

void bbd_daemon_dial_found(bbd_daemon *d, const bb_peerid *peer)
{
    bbd_dial_peer *p = find(d, peer);
    if (!p)
        return;
    if (p->configured)
        dial_reset(p);
    else
        drop_at(d, (size_t)(p - d->dial));
}

void bbd_daemon_dial_forget(bbd_daemon *d, const bb_peerid *peer)
{
    bbd_dial_peer *p = find(d, peer);
    if (p && !p->configured)
        drop_at(d, (size_t)(p - d->dial));
}

void bbd_daemon_dial_init(bbd_daemon *d)
{
    uv_timer_init(&d->loop, &d->dial_timer);
    d->dial_timer.data = d;
    /* configured peers, then up to LOST_MAX dropped ones: one allocation
     * (out of memory: no dialing; sends still connect on demand). The
     * configured ones go in now, in config order, so a drop reported before
     * the first dial finds them rather than adding them twice. */
    bbd_config *c = d->cfg;
    d->dial = calloc(c->n_peers + LOST_MAX, sizeof *d->dial);
    d->dial_cap = d->dial ? c->n_peers + LOST_MAX : 0;
    for (size_t i = 0; d->dial && i < c->n_peers; i++)
        d->dial[d->n_dial++] =
            (bbd_dial_peer){.id = c->peers[i].id, .configured = true, .cfg_index = (uint32_t)i};
}
