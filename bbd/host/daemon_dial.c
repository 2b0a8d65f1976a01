/*
 * daemon_dial.c — bbd keeps connections to the peers it knows it needs:
 *   - every peer of its config (--peer, "peers"): dialed when the node is
 *     ready and redialed for as long as it runs;
 *   - every peer whose connection dropped (a client that died, a server
 *     that restarted): redialed at the addresses it announced, for
 *     LOST_REDIAL_MS after the drop, then forgotten until it connects again.
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

/* Dial p now. Returns true when a connection is open; false when the dial
 * was started or could not be (no usable address). */
static bool dial_one(bbd_daemon *d, const bbd_dial_peer *p, bool *forget)
{
    bool open = false;
    int rc;
    *forget = false;
    if (p->configured) {
        const bbd_peer_cfg *cp = &d->cfg->peers[p->cfg_index];
        bbd_addr a = {cp->addr, cp->addr_len};
        rc = bbd_transport_connect(d->transport, &cp->id, &a, 1, &open);
    } else {
        const bb_engine_addr *ea = NULL;
        size_t n = bb_engine_peer_addrs(d->engine, &p->id, &ea);
        bbd_addr a[LOST_ADDRS_MAX];
        n = n < LOST_ADDRS_MAX ? n : LOST_ADDRS_MAX;
        for (size_t i = 0; i < n; i++)
            a[i] = (bbd_addr){ea[i].data, ea[i].len};
        if (!n) {
            *forget = true; /* nothing announced to dial */
            return false;
        }
        rc = bbd_transport_connect(d->transport, &p->id, a, n, &open);
    }
    if (rc == BB_EINVAL) /* this node itself: nothing to keep */
        *forget = true;
    return open;
}

void bbd_daemon_dial(bbd_daemon *d)
{
    bbd_config *c = d->cfg;
    if (d->stopping || !d->handles_open || !d->transport)
        return;
    if (!d->dial_seeded) { /* the configured peers come first, in config order */
        d->dial_seeded = true;
        for (size_t i = 0; i < c->n_peers && d->n_dial < d->dial_cap; i++)
            d->dial[d->n_dial++] =
                (bbd_dial_peer){.id = c->peers[i].id, .configured = true, .cfg_index = (uint32_t)i};
    }
    uint64_t now = uv_now(&d->loop), next = UINT64_MAX;
    bool kick = false;
    for (size_t i = 0; i < d->n_dial;) {
        bbd_dial_peer *p = &d->dial[i];
        if (!p->configured && now - p->lost_ms >= LOST_REDIAL_MS) {
            drop_at(d, i);
            continue;
        }
        if (now >= p->due_ms) {
            if (p->dialing) { /* the last dial is still not open: a failure */
                bb_engine_report_send(d->engine, &p->id, false);
                kick = true;
            }
            bool forget;
            if (dial_one(d, p, &forget)) {
                dial_reset(p);
                if (!p->configured) { /* back: connected, nothing left to do */
                    drop_at(d, i);
                    continue;
                }
                i++;
                continue;
            }
            if (forget) {
                if (p->configured) {
                    p->due_ms = UINT64_MAX; /* never again */
                    i++;
                } else {
                    drop_at(d, i);
                }
                continue;
            }
            p->dialing = true;
            p->delay_ms = !p->delay_ms                         ? DIAL_FIRST_RETRY_MS
                          : p->delay_ms >= DIAL_MAX_RETRY_MS / 2 ? DIAL_MAX_RETRY_MS
                                                                 : 2 * p->delay_ms;
            p->due_ms = now + p->delay_ms; /* checked again then: open, or dial again */
        }
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

void bbd_daemon_dial_init(bbd_daemon *d)
{
    uv_timer_init(&d->loop, &d->dial_timer);
    d->dial_timer.data = d;
    /* configured peers, then up to LOST_MAX dropped ones: one allocation
     * (out of memory: no dialing; sends still connect on demand) */
    d->dial = calloc(d->cfg->n_peers + LOST_MAX, sizeof *d->dial);
    d->dial_cap = d->dial ? d->cfg->n_peers + LOST_MAX : 0;
}
