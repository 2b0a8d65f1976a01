/*
 * sim_net.c — the network between the simulated nodes (sim_internal.h).
 *
 * Connections. A node keeps a sorted list of edges: the connections the
 * scenario's connect lists make (configured, dialed whenever the node
 * starts and redialed while it lives, as bbd does its --peer list), and the
 * ones a send to an unconnected peer dials on demand (as bbd's transport
 * does; redialed for 10 minutes after they drop). A connection opens one
 * round trip after the dial when both ends are up and no partition is
 * between them: each end learns the other's address and targets (the
 * handshake: peers_running works), like bb_engine_peer_connected in bbd.
 * It closes when an end dies or a partition cuts it; the survivors see the
 * peer disconnect and redial (100 ms doubling to 5 s), each failed redial
 * reported as a failed send — so PeerDown comes from the engine's own
 * governor, as in bbd.
 *
 * Envelopes. A send goes over the connection to the node whose address the
 * step names: lost with the link's loss probability, queued behind the
 * link's earlier envelopes at its bandwidth, delayed by a latency draw,
 * kept in order unless the reorder probability lets it overtake, and
 * duplicated with the duplicate probability. A send to a dead or cut-off
 * peer fails one round trip later (bb_engine_report_send). An envelope in
 * flight when its receiver dies or a partition opens is dropped.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bbsim/sim_internal.h"

/* ---- addresses and edges ---------------------------------------------------------------- */

bbsim_node *bbsim__node_at(bbsim *s, const uint8_t *addr, size_t len)
{
    if (len != BBSIM_ADDR_LEN || addr[0] != 0x04 || addr[1] != 10)
        return NULL;
    uint32_t k = (uint32_t)addr[2] << 16 | (uint32_t)addr[3] << 8 | addr[4];
    if (k >= s->n_nodes || memcmp(s->nodes[k].addr, addr, len) != 0)
        return NULL;
    return &s->nodes[k];
}

/* Edges (by peer) and links (by destination) are arrays sorted by the
 * uint32 key each element starts with: found by binary search, inserted in
 * place. */
static uint32_t lower_bound(const void *v, uint32_t n, size_t size, uint32_t key)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        uint32_t k;
        memcpy(&k, (const char *)v + (size_t)mid * size, sizeof k);
        if (k < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Room for one element at index `at` (the array doubles when full); NULL
 * when out of memory. */
static void *insert_at(void **v, uint32_t *n, uint32_t *cap, size_t size, uint32_t at)
{
    if (*n == *cap) {
        uint32_t c = *cap ? *cap * 2 : 2;
        void *grown = realloc(*v, (size_t)c * size);
        if (!grown)
            return NULL;
        *v = grown;
        *cap = c;
    }
    char *p = (char *)*v + (size_t)at * size;
    memmove(p + size, p, (size_t)(*n - at) * size);
    (*n)++;
    return p;
}

static bbsim_edge *edge_find(bbsim_node *n, uint32_t peer)
{
    uint32_t i = lower_bound(n->edges, n->n_edges, sizeof *n->edges, peer);
    return i < n->n_edges && n->edges[i].peer == peer ? &n->edges[i] : NULL;
}

/* The edge to peer, added when missing; NULL when out of memory. */
static bbsim_edge *edge_add(bbsim_node *n, uint32_t peer, uint32_t flags)
{
    uint32_t i = lower_bound(n->edges, n->n_edges, sizeof *n->edges, peer);
    if (i < n->n_edges && n->edges[i].peer == peer) {
        n->edges[i].flags |= flags;
        return &n->edges[i];
    }
    bbsim_edge *e = insert_at((void **)&n->edges, &n->n_edges, &n->cap_edges, sizeof *e, i);
    if (e)
        *e = (bbsim_edge){peer, flags, UINT64_MAX}; /* never lost yet */
    return e;
}

static int connect_pair(bbsim *s, uint32_t a, uint32_t b, bb_error *err)
{
    if (!edge_add(&s->nodes[a], b, BBSIM_EDGE_CONFIGURED) ||
        !edge_add(&s->nodes[b], a, BBSIM_EDGE_CONFIGURED))
        return bb_error_set(err, BB_ENOMEM, "connections: out of memory");
    return BB_OK;
}

int bbsim__connect_graph(bbsim *s, bb_error *err)
{
    const bbsim_scenario *sc = s->sc;
    for (uint32_t a = 0; a < s->n_nodes; a++) {
        const bbsim_group *g = &sc->groups[s->nodes[a].group];
        for (size_t c = 0; c < g->n_connect; c++) {
            const bbsim_group *to = &sc->groups[g->connect[c].group];
            uint32_t want = g->connect[c].count, made = 0;
            for (uint32_t i = 0; !want && i < to->count; i++) /* every node of the group */
                if (to->first + i != a && connect_pair(s, a, to->first + i, err))
                    return err->code;
            /* `want` of them at random; a group of one connects to itself: none */
            for (uint32_t tries = 0; want && made < want && tries < 64 * want; tries++) {
                uint32_t b = to->first + (uint32_t)bbp_rng_below(&s->rng, to->count);
                bbsim_edge *e = b == a ? NULL : edge_find(&s->nodes[a], b);
                if (b == a || (e && e->flags & BBSIM_EDGE_CONFIGURED))
                    continue;
                if (connect_pair(s, a, b, err))
                    return err->code;
                made++;
            }
        }
    }
    return BB_OK;
}

/* ---- the link model ---------------------------------------------------------------------- */

/* The defaults, then every rule that matches a -> b, in order. */
static bbsim_link_model link_of(const bbsim *s, uint32_t a, uint32_t b)
{
    const bbsim_scenario *sc = s->sc;
    bbsim_link_model m = sc->net;
    const bbsim_node *na = &s->nodes[a], *nb = &s->nodes[b];
    for (size_t i = 0; i < sc->n_links; i++) {
        const bbsim_link_rule *r = &sc->links[i];
        if (!bbsim_sels_has(&r->from, na->group, na->index) ||
            !bbsim_sels_has(&r->to, nb->group, nb->index))
            continue;
        if (r->m.has_latency)
            m.latency = r->m.latency;
        if (r->m.has_bandwidth)
            m.bandwidth = r->m.bandwidth;
        if (r->m.has_loss)
            m.loss = r->m.loss;
        if (r->m.has_duplicate)
            m.duplicate = r->m.duplicate;
        if (r->m.has_reorder)
            m.reorder = r->m.reorder;
    }
    return m;
}

static bbsim_ns draw(bbsim *s, const bbsim_dist *d)
{
    double v = d->a;
    switch (d->kind) {
    case BBSIM_DIST_CONSTANT: break;
    case BBSIM_DIST_UNIFORM: v = d->a + (d->b - d->a) * bbp_rng_uniform(&s->rng); break;
    case BBSIM_DIST_NORMAL: v = d->a + d->b * bbp_rng_normal(&s->rng); break;
    case BBSIM_DIST_LOGNORMAL: v = d->a * exp(d->b * bbp_rng_normal(&s->rng)); break;
    case BBSIM_DIST_EXPONENTIAL: v = -d->a * log(1.0 - bbp_rng_uniform(&s->rng)); break;
    }
    return v > 0 ? (v < (double)BBSIM_MAX_DURATION_NS ? (bbsim_ns)v : BBSIM_MAX_DURATION_NS) : 0;
}

static bbsim_ns rtt(bbsim *s, uint32_t a, uint32_t b)
{
    bbsim_link_model ab = link_of(s, a, b), ba = link_of(s, b, a);
    return draw(s, &ab.latency) + draw(s, &ba.latency);
}

bool bbsim__reachable(const bbsim *s, uint32_t a, uint32_t b)
{
    const bbsim_node *na = &s->nodes[a], *nb = &s->nodes[b];
    for (size_t p = 0; p < s->sc->n_partitions; p++)
        if (s->partition_on[p] &&
            bbsim_sels_has(&s->sc->partitions[p].isolate, na->group, na->index) !=
                bbsim_sels_has(&s->sc->partitions[p].isolate, nb->group, nb->index))
            return false;
    return true;
}

/* The state of the link to dst, made when missing; NULL when out of memory. */
static bbsim_link *link_state(bbsim_node *n, uint32_t dst)
{
    uint32_t i = lower_bound(n->links, n->n_links, sizeof *n->links, dst);
    if (i < n->n_links && n->links[i].dst == dst)
        return &n->links[i];
    bbsim_link *l = insert_at((void **)&n->links, &n->n_links, &n->cap_links, sizeof *l, i);
    if (l)
        *l = (bbsim_link){dst, 0, 0};
    return l;
}

/* ---- connections ------------------------------------------------------------------------- */

static void schedule_connect(bbsim *s, uint32_t a, uint32_t b, bbsim_ns at, uint32_t attempt)
{
    bbsim_event ev = {.at = at, .kind = BBSIM_EV_CONNECT, .node = a, .other = b,
                      .inc = s->nodes[a].inc, .other_inc = s->nodes[b].inc, .u.attempt = attempt};
    bbsim_edge *e = edge_add(&s->nodes[a], b, 0);
    if (e && bbsim__push(s, &ev) == BB_OK)
        e->flags |= BBSIM_EDGE_REDIALING; /* a dial is under way */
}

static void schedule_redial(bbsim *s, uint32_t a, uint32_t b, uint32_t attempt)
{
    bbsim_ns wait = BBSIM_DIAL_FIRST_NS << (attempt < 10 ? attempt : 10);
    bbsim_event ev = {.at = s->now + (wait < BBSIM_DIAL_MAX_NS ? wait : BBSIM_DIAL_MAX_NS),
                      .kind = BBSIM_EV_REDIAL, .node = a, .other = b, .inc = s->nodes[a].inc,
                      .u.attempt = attempt};
    bbsim_edge *e = edge_find(&s->nodes[a], b);
    if (e && bbsim__push(s, &ev) == BB_OK)
        e->flags |= BBSIM_EDGE_REDIALING;
}

/* Whether a still wants the connection to b: configured, or lost less than
 * 10 minutes ago (bbd's redial of a dropped peer; a dial on demand that
 * never connected is not redialed). */
static bool wanted(const bbsim *s, const bbsim_edge *e)
{
    return (e->flags & BBSIM_EDGE_CONFIGURED) ||
           (e->lost_at != UINT64_MAX && s->now - e->lost_at < BBSIM_LOST_REDIAL_NS);
}

/* One end learns the other: address, then the handshake's targets. */
static void handshake(bbsim *s, uint32_t a, uint32_t b)
{
    bbsim_node *na = &s->nodes[a], *nb = &s->nodes[b];
    const bbsim_group *g = &s->sc->groups[nb->group];
    bb_engine_addr addr = {nb->addr, BBSIM_ADDR_LEN};
    bb_engine_add_peer(na->engine, &nb->peer, &addr, 1, NULL); /* a full book is not fatal */
    bb_engine_peer_connected(na->engine, &nb->peer, (const char *const *)g->targets,
                             g->n_targets, NULL);
    bbsim_edge *e = edge_find(na, b);
    e->flags = (e->flags | BBSIM_EDGE_CONNECTED) & ~(uint32_t)BBSIM_EDGE_REDIALING;
    bbsim__wake(s, a, s->now);
}

void bbsim__connect(bbsim *s, const bbsim_event *ev)
{
    uint32_t a = ev->node, b = ev->other;
    bbsim_node *na = &s->nodes[a], *nb = &s->nodes[b];
    if (!na->engine || na->inc != ev->inc)
        return; /* the dialer died meanwhile */
    bbsim_edge *e = edge_find(na, b);
    if (!e || (e->flags & BBSIM_EDGE_CONNECTED)) {
        if (e)
            e->flags &= ~(uint32_t)BBSIM_EDGE_REDIALING;
        return;
    }
    if (!nb->engine || !bbsim__reachable(s, a, b)) { /* the dial failed */
        if (bb_engine_report_send(na->engine, &nb->peer, false))
            bbsim__wake(s, a, s->now);
        bbsim__log(s, BBSIM_EV_CONNECT, a, b, 0, ev->u.attempt);
        if (wanted(s, e))
            schedule_redial(s, a, b, ev->u.attempt + 1);
        else
            e->flags &= ~(uint32_t)BBSIM_EDGE_REDIALING;
        return;
    }
    if (!edge_add(nb, a, 0))
        return;
    handshake(s, a, b);
    handshake(s, b, a);
    bbsim__log(s, BBSIM_EV_CONNECT, a, b, 1, ev->u.attempt);
}

void bbsim__redial(bbsim *s, const bbsim_event *ev)
{
    uint32_t a = ev->node, b = ev->other;
    bbsim_node *na = &s->nodes[a];
    if (!na->engine || na->inc != ev->inc)
        return;
    bbsim_edge *e = edge_find(na, b);
    if (!e)
        return;
    if ((e->flags & BBSIM_EDGE_CONNECTED) || !wanted(s, e)) {
        e->flags &= ~(uint32_t)BBSIM_EDGE_REDIALING;
        return;
    }
    schedule_connect(s, a, b, s->now + rtt(s, a, b), ev->u.attempt);
}

void bbsim__dial_all(bbsim *s, uint32_t k)
{
    bbsim_node *n = &s->nodes[k];
    for (uint32_t i = 0; i < n->n_edges; i++) {
        bbsim_edge *e = &n->edges[i];
        e->flags &= ~(uint32_t)(BBSIM_EDGE_CONNECTED | BBSIM_EDGE_REDIALING);
        if ((e->flags & BBSIM_EDGE_CONFIGURED) && s->nodes[e->peer].engine)
            schedule_connect(s, k, e->peer, s->now + rtt(s, k, e->peer), 0);
    }
}

/* The connection a-b closes: every live end sees the peer go and redials. */
static void disconnect(bbsim *s, uint32_t a, uint32_t b)
{
    uint32_t ends[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        bbsim_node *n = &s->nodes[ends[i]];
        bbsim_edge *e = edge_find(n, ends[1 - i]);
        if (!e || !(e->flags & BBSIM_EDGE_CONNECTED))
            continue;
        e->flags &= ~(uint32_t)BBSIM_EDGE_CONNECTED;
        e->lost_at = s->now;
        if (!n->engine)
            continue;
        bb_engine_peer_disconnected(n->engine, &s->nodes[ends[1 - i]].peer);
        bbsim__wake(s, ends[i], s->now);
        if (!(e->flags & BBSIM_EDGE_REDIALING))
            schedule_redial(s, ends[i], ends[1 - i], 0);
    }
    bbsim__log(s, BBSIM_EV_CONNECT, a, b, 2, 0); /* 2: closed */
}

void bbsim__drop_all(bbsim *s, uint32_t k)
{
    bbsim_node *n = &s->nodes[k];
    for (uint32_t i = 0; i < n->n_edges; i++)
        if (n->edges[i].flags & BBSIM_EDGE_CONNECTED)
            disconnect(s, k, n->edges[i].peer);
}

void bbsim__partition(bbsim *s, uint32_t p, bool on)
{
    const bbsim_sels *iso = &s->sc->partitions[p].isolate;
    s->partition_on[p] = on;
    bbsim__log(s, on ? BBSIM_EV_PARTITION : BBSIM_EV_HEAL, p, 0, 0, 0);
    bbsim__report_sim(s, on ? "partition" : "heal", -1, NULL);
    if (!on)
        return; /* the redials find the peers again */
    for (size_t i = 0; i < iso->n; i++) {
        const bbsim_group *g = &s->sc->groups[iso->v[i].group];
        for (uint32_t x = iso->v[i].lo; x < iso->v[i].hi; x++) {
            bbsim_node *n = &s->nodes[g->first + x];
            for (uint32_t j = 0; j < n->n_edges; j++)
                if ((n->edges[j].flags & BBSIM_EDGE_CONNECTED) &&
                    !bbsim__reachable(s, g->first + x, n->edges[j].peer))
                    disconnect(s, g->first + x, n->edges[j].peer);
        }
    }
}

/* ---- envelopes --------------------------------------------------------------------------- */

/* The destination of a SendEnvelope: the node at one of its addresses that
 * has its PeerId, or UINT32_MAX. */
static uint32_t destination(bbsim *s, const bb_step *st)
{
    for (size_t i = 0; i < st->u.send.n_addrs; i++) {
        bbsim_node *n = bbsim__node_at(s, st->u.send.addrs[i].data, st->u.send.addrs[i].len);
        if (n && bb_peerid_equal(&n->peer, &st->u.send.peer))
            return (uint32_t)(n - s->nodes);
    }
    return UINT32_MAX;
}

/* Put len bytes on the link a -> b from time t0: its queue, its latency,
 * its order. The arrival time. */
static bbsim_ns transmit(bbsim *s, uint32_t a, uint32_t b, const bbsim_link_model *m,
                         size_t len, bbsim_ns t0)
{
    bbsim_link *l = link_state(&s->nodes[a], b);
    bbsim_ns depart = l && l->busy_until > t0 ? l->busy_until : t0;
    if (m->bandwidth > 0)
        depart += (bbsim_ns)((double)len * 1e9 / m->bandwidth);
    bbsim_ns arrive = depart + draw(s, &m->latency);
    bool overtakes = m->reorder > 0 && bbp_rng_uniform(&s->rng) < m->reorder;
    if (l) {
        l->busy_until = depart;
        if (!overtakes && arrive < l->last_arrival)
            arrive = l->last_arrival; /* in order, like one TCP stream */
        if (arrive > l->last_arrival)
            l->last_arrival = arrive;
    }
    return arrive;
}

static void deliver_at(bbsim *s, uint32_t a, uint32_t b, bbsim_ns at, uint8_t *bytes, size_t len)
{
    bbsim_event ev = {.at = at, .kind = BBSIM_EV_DELIVER, .node = b, .other = a,
                      .inc = s->nodes[b].inc, .other_inc = s->nodes[a].inc,
                      .u.env = {bytes, len}};
    bbsim__push(s, &ev); /* frees the bytes when it cannot queue them */
}

/* The send cannot go: dropped, and the sender hears of it a round trip later. */
static void send_fails(bbsim *s, uint32_t a, uint32_t b, uint64_t *counter)
{
    (*counter)++;
    bbsim_event ev = {.at = s->now + rtt(s, a, b), .kind = BBSIM_EV_SEND_FAILED, .node = a,
                      .other = b, .inc = s->nodes[a].inc};
    bbsim__push(s, &ev);
}

void bbsim__send(bbsim *s, uint32_t a, bb_step *st)
{
    bbsim_node *na = &s->nodes[a];
    size_t len = st->u.send.len;
    s->sum.sent++;
    if (st->u.send.retry_at_ns && s->now + BBSIM_EPOCH_NS < st->u.send.retry_at_ns) {
        s->sum.dropped_backoff++; /* bbd holds sends to a peer in backoff back */
        bbsim__log(s, BBSIM_EV_SEND_FAILED, a, UINT32_MAX, len, 1);
        return;
    }
    uint32_t b = destination(s, st);
    if (b == UINT32_MAX) {
        s->sum.dropped_unroutable++;
        bbsim__log(s, BBSIM_EV_SEND_FAILED, a, UINT32_MAX, len, 2);
        if (bb_engine_report_send(na->engine, &st->u.send.peer, false))
            bbsim__wake(s, a, s->now);
        return;
    }
    bbsim__log_bytes(s, BBSIM_EV_DELIVER, a, b, st->u.send.bytes, len);
    bbsim_edge *e = edge_find(na, b);
    bbsim_ns t0 = s->now;
    if (!e || !(e->flags & BBSIM_EDGE_CONNECTED)) { /* dial first, as bbd's transport does */
        if (!s->nodes[b].engine)
            return send_fails(s, a, b, &s->sum.dropped_down);
        if (!bbsim__reachable(s, a, b))
            return send_fails(s, a, b, &s->sum.dropped_partition);
        t0 += rtt(s, a, b);
        if (!e || !(e->flags & BBSIM_EDGE_REDIALING))
            schedule_connect(s, a, b, t0, 0);
    }
    bbsim_link_model m = link_of(s, a, b);
    if (m.loss > 0 && bbp_rng_uniform(&s->rng) < m.loss) {
        s->sum.dropped_loss++;
        bbsim__log(s, BBSIM_EV_SEND_FAILED, a, b, len, 3);
        return;
    }
    uint8_t *bytes = st->u.send.bytes;
    st->u.send.bytes = NULL; /* the event owns them now */
    s->sum.bytes_sent += len;
    na->bytes_out += len;
    bbsim_ns at = transmit(s, a, b, &m, len, t0);
    if (m.duplicate > 0 && bbp_rng_uniform(&s->rng) < m.duplicate) {
        uint8_t *copy = malloc(len ? len : 1);
        if (copy) {
            memcpy(copy, bytes, len);
            s->sum.duplicated++;
            deliver_at(s, a, b, at + draw(s, &m.latency), copy, len);
        }
    }
    deliver_at(s, a, b, at, bytes, len);
    if (bb_engine_report_send(na->engine, &s->nodes[b].peer, true))
        bbsim__wake(s, a, s->now);
}

void bbsim__deliver(bbsim *s, const bbsim_event *ev)
{
    uint32_t a = ev->other, b = ev->node;
    bbsim_node *nb = &s->nodes[b];
    size_t len = ev->u.env.len;
    uint64_t *dropped = !nb->engine || nb->inc != ev->inc ? &s->sum.dropped_down
                        : !bbsim__reachable(s, a, b)      ? &s->sum.dropped_partition
                                                          : NULL;
    if (dropped) {
        (*dropped)++;
        free(ev->u.env.bytes);
        bbsim__log(s, BBSIM_EV_DELIVER, a, b, len, dropped == &s->sum.dropped_down ? 4 : 5);
        return;
    }
    bb_engine_addr observed = {s->nodes[a].addr, BBSIM_ADDR_LEN};
    bb_error err;
    bb_error_clear(&err);
    /* the engine takes the bytes on every path; a refusal it counts itself */
    int rc = bb_engine_deliver_envelope_owned(nb->engine, &s->nodes[a].peer, &observed,
                                              ev->u.env.bytes, len, &err);
    s->sum.delivered++;
    s->sum.bytes_delivered += len;
    nb->bytes_in += len;
    bbsim__log(s, BBSIM_EV_DELIVER, a, b, len, rc == BB_OK ? 0 : 6);
    bbsim__wake(s, b, s->now);
}
