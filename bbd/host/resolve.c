/*
 * resolve.c — the transport dials host names: /dns/NAME, /dns4/NAME and
 * /dns6/NAME multiaddrs (a seed, a registry or a --peer given by name).
 *
 * A dial of a name resolves it with libuv's resolver (uv_getaddrinfo, on
 * the loop's thread pool, so the loop never blocks), then dials the first
 * address of the wanted family (/dns4: IPv4, /dns6: IPv6, /dns: either)
 * as a dial of an IP address would; the operator's dial rules judge each
 * resolved address as they judge an IP address given directly. Nothing is cached: every dial resolves
 * again, so a node pointed at a service name follows it when it moves,
 * and each reconnect sees the name's current address.
 *
 * While a name resolves, the peer has a `resolving` record: sends queue
 * behind it like behind a connection being set up, and a second dial waits
 * for it. The record holds a reference on the peer and counts as one of
 * the transport's handles, so neither is freed under it; closing the
 * transport cancels what has not started (its callback still runs, with
 * UV_ECANCELED). A name that does not resolve fails the queued sends like
 * a refused connection (on_send_result false), which the daemon's backoff
 * and the engine's peer health already handle.
 */
#include <stdlib.h>
#include <string.h>

#include "bbd/host/transport_internal.h"

struct bbd_resolve {
    uv_getaddrinfo_t req;
    bbd_transport *t;
    bbd_peer *peer;
    bb_ma_endpoint ep;
};

/* The first resolved address the endpoint can use and the dial rules
 * allow, as an IP transport. */
static bool first_usable(bbd_transport *t, const struct addrinfo *ai,
                         const bb_ma_endpoint *ep, bb_ma_transport *out)
{
    for (; ai; ai = ai->ai_next) {
        if (bb_ma_transport_from_sockaddr(ai->ai_addr, ai->ai_addrlen, ep->proto, out, NULL) !=
            BB_OK)
            continue;
        if (ep->proto == BB_MA_UDP && !bbd__udp_can_reach(t, out->family))
            continue;
        out->port = ep->port;
        if (bbd__dial_allowed(t, out))
            return true;
    }
    return false;
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    bbd_resolve *r = req->data;
    bbd_transport *t = r->t;
    bbd_peer *p = r->peer;
    p->resolving = NULL;
    p->refs--;
    char pt[BB_PEERID_TEXT_MAX];
    bb_ma_transport ma;
    if (t->closing) {
        /* nothing more to do: the transport is going away */
    } else if (status != 0) {
        bbd__log(t, BB_LOG_WARN, "resolve %s for %s: %s", r->ep.name,
                 bbd__peer_text(&p->id, pt, sizeof pt), uv_strerror(status));
        bbd__peer_update(t, p); /* nothing carries the queue: it fails */
    } else if (!first_usable(t, res, &r->ep, &ma)) {
        bbd__log(t, BB_LOG_WARN, "resolve %s for %s: no usable %s address the dial rules allow",
                 r->ep.name,
                 bbd__peer_text(&p->id, pt, sizeof pt),
                 r->ep.family == AF_INET    ? "IPv4"
                 : r->ep.family == AF_INET6 ? "IPv6"
                                            : "IP");
        bbd__peer_update(t, p);
    } else if (!p->active && !p->udp && !p->dialing && !p->udp_dialing &&
               (ma.proto == BB_MA_TCP ? bbd__tcp_dial(t, p, &ma) : bbd__udp_dial(t, p, &ma)) !=
                   BB_OK) {
        bbd__peer_update(t, p); /* the peer connected to us meanwhile, or the dial failed */
    }
    uv_freeaddrinfo(res);
    free(r);
    bbd__handle_closed(t);
}

int bbd__resolve_dial(bbd_transport *t, bbd_peer *p, const bb_ma_endpoint *ep)
{
    if (p->resolving)
        return BB_OK;
    bbd_resolve *r = calloc(1, sizeof *r);
    if (!r)
        return BB_ENOMEM;
    r->t = t;
    r->peer = p;
    r->ep = *ep;
    r->req.data = r;
    struct addrinfo hints = {.ai_family = ep->family,
                             .ai_socktype = ep->proto == BB_MA_TCP ? SOCK_STREAM : SOCK_DGRAM};
    int rc = uv_getaddrinfo(t->loop, &r->req, on_resolved, ep->name, NULL, &hints);
    if (rc != 0) {
        char pt[BB_PEERID_TEXT_MAX];
        bbd__log(t, BB_LOG_WARN, "resolve %s for %s: %s", ep->name,
                 bbd__peer_text(&p->id, pt, sizeof pt), uv_strerror(rc));
        free(r);
        return BB_EIO;
    }
    p->resolving = r;
    p->refs++;
    bbd__handle_init(t);
    return BB_OK;
}

void bbd__resolve_cancel_all(bbd_transport *t)
{
    for (size_t i = 0; i < t->n_peers; i++)
        if (t->peers[i]->resolving)
            uv_cancel((uv_req_t *)&t->peers[i]->resolving->req);
}
