/*
 * daemon_dial.c — bbd keeps a connection open to every peer of its config
 * (--peer, "peers"): dialed when the node is ready, dialed again after the
 * connection drops or a dial fails, 100 ms later doubling to 5 s, until it
 * is open again.
 *
 * Why: a peer learns this node's targets from the handshake of a
 * connection (transport.h), and a node that only answers requests never
 * sends first. A federated client started with --peer SERVER therefore
 * joins the server's peers::Connected view at once, and again after either
 * side restarts — the server needs no list of its clients.
 */
#include <stdlib.h>

#include "bbd/host/daemon.h"

#define DIAL_FIRST_RETRY_MS 100
#define DIAL_MAX_RETRY_MS 5000

typedef struct bbd_dial_peer {
    uint64_t due_ms;   /* loop time of the next dial (0: now) */
    uint64_t delay_ms; /* the wait after the next failure (0: first) */
} bbd_dial_peer;

static void on_dial_timer(uv_timer_t *h) { bbd_daemon_dial(h->data); }

void bbd_daemon_dial(bbd_daemon *d)
{
    bbd_config *c = d->cfg;
    if (d->stopping || !d->handles_open || !d->transport || !c->n_peers)
        return;
    if (!d->dial && !(d->dial = calloc(c->n_peers, sizeof *d->dial)))
        return; /* out of memory: sends still dial on demand */
    uint64_t now = uv_now(&d->loop), next = UINT64_MAX;
    for (size_t i = 0; i < c->n_peers; i++) {
        bbd_dial_peer *p = &d->dial[i];
        bbd_addr a = {c->peers[i].addr, c->peers[i].addr_len};
        bool open = false;
        if (now >= p->due_ms) {
            int rc = bbd_transport_connect(d->transport, &c->peers[i].id, &a, 1, &open);
            if (rc == BB_EINVAL) /* this node itself: nothing to keep */
                continue;
            if (open) {
                p->delay_ms = 0;
                p->due_ms = 0;
                continue;
            }
            p->delay_ms = !p->delay_ms                         ? DIAL_FIRST_RETRY_MS
                          : p->delay_ms >= DIAL_MAX_RETRY_MS / 2 ? DIAL_MAX_RETRY_MS
                                                                 : 2 * p->delay_ms;
            p->due_ms = now + p->delay_ms; /* checked again then: open, or dial again */
        }
        next = p->due_ms < next ? p->due_ms : next;
    }
    if (next != UINT64_MAX)
        uv_timer_start(&d->dial_timer, on_dial_timer, next > now ? next - now : 0, 0);
    else
        uv_timer_stop(&d->dial_timer);
}

void bbd_daemon_dial_lost(bbd_daemon *d, const bb_peerid *peer)
{
    for (size_t i = 0; d->dial && i < d->cfg->n_peers; i++)
        if (bb_peerid_equal(&d->cfg->peers[i].id, peer))
            d->dial[i] = (bbd_dial_peer){0}; /* it was open: dial again now, then back off */
    bbd_daemon_dial(d);
}

void bbd_daemon_dial_init(bbd_daemon *d)
{
    uv_timer_init(&d->loop, &d->dial_timer);
    d->dial_timer.data = d;
}
