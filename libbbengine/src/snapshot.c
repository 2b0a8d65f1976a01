/*
 * snapshot.c — node snapshot / restore (ENGINE.md Part 15).
 *
 * A snapshot captures everything a restored engine needs to carry on from
 * the same point: component states (type->snapshot), every live execution
 * with its slots (values in their wire encoding, tagged by type hash), the
 * frontier, suspended ops (timers, semaphore / queue / request waiters),
 * request batches and open inbound requests, framework tables (address
 * book with health and backoff state, dedup window, semaphores, queues,
 * holds, records, metrics, counters), the bus, the bootstrap state and the
 * not-yet-processed ingress (drained and re-queued). The install itself is
 * not serialized: the host re-installs the same artifact and targets into a
 * fresh engine (checked by a fingerprint) and calls bb_engine_restore
 * before the first poll.
 *
 * Component ops that were suspended on a completion handle cannot keep it
 * (the work it stood for is gone): on restore they go back to the frontier
 * and dispatch again, which re-triggers the work (ENGINE.md 9.4). In-flight
 * component bootstraps are re-staged the same way.
 *
 * Format: "BBSNAP1\0", then varint-encoded fields. Restore treats the bytes
 * as untrusted: every count and index is bounded and checked, and a failed
 * restore leaves the engine as installed (no transient state).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libbbengine/src/syscalls.h"

#define MAGIC "BBSNAP2"
#define MAX_COUNT (1u << 26)

uint64_t bbe__install_fingerprint(const bb_engine *e)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (uint32_t gi = 0; gi < e->n_graphs; gi++) {
        const bbe__graph *g = &e->graphs[gi];
        h = bbe__mix64(h ^ bb_fnv1a64(g->name, strlen(g->name)) ^ g->n_sites);
        for (uint32_t k = g->op_begin; k < g->op_end; k++)
            h = bbe__mix64(h ^ bb_fnv1a64(e->ops[k].op_type, strlen(e->ops[k].op_type)) ^ k);
    }
    for (uint32_t c = 0; c < e->n_comps; c++)
        h = bbe__mix64(h ^ bb_fnv1a64(e->comps[c].slot, strlen(e->comps[c].slot)));
    return h;
}

/* ---- writer --------------------------------------------------------------------------- */

typedef struct wr {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} wr;

static void w_raw(wr *w, const void *d, size_t n)
{
    if (w->oom)
        return;
    if (w->n + n > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->n + n)
            cap *= 2;
        uint8_t *p = realloc(w->p, cap);
        if (!p) {
            w->oom = true;
            return;
        }
        w->p = p;
        w->cap = cap;
    }
    if (n)
        memcpy(w->p + w->n, d, n);
    w->n += n;
}

static void w_u(wr *w, uint64_t v)
{
    uint8_t b[10];
    w_raw(w, b, bb_varint_put(b, v));
}

static void w_bytes(wr *w, const void *d, size_t n)
{
    w_u(w, n);
    w_raw(w, d, n);
}

static void w_str(wr *w, const char *s) { w_bytes(w, s ? s : "", s ? strlen(s) : 0); }

static void w_value(wr *w, const bb_value *v)
{
    if (!v) {
        w_u(w, 0);
        return;
    }
    uint8_t *enc = NULL;
    size_t len = 0;
    if (bb_value_encode(v, &enc, &len, NULL) != BB_OK) {
        w->oom = true;
        return;
    }
    w_u(w, 1);
    w_raw(w, &v->type->wire_hash, 8);
    w_bytes(w, enc, len);
    free(enc);
}

static void w_peer(wr *w, const bb_peerid *p) { w_bytes(w, p->bytes, p->len); }

/* ---- reader ---------------------------------------------------------------------------- */

typedef struct rd {
    const uint8_t *p;
    size_t n, pos;
    bool bad;
    bool oom; /* an allocation failed: the snapshot may be fine */
} rd;

static void nomem(rd *r) { r->bad = r->oom = true; }

static uint64_t r_u(rd *r)
{
    uint64_t v = 0;
    if (r->bad || bb_varint_get(r->p, r->n, &r->pos, &v) != BB_OK) {
        r->bad = true;
        return 0;
    }
    return v;
}

/* A count bounded by the remaining bytes (each item takes at least one). */
static size_t r_count(rd *r)
{
    uint64_t v = r_u(r);
    if (v > MAX_COUNT || v > r->n - r->pos) {
        r->bad = true;
        return 0;
    }
    return (size_t)v;
}

static const uint8_t *r_bytes(rd *r, size_t *len)
{
    uint64_t l = r_u(r);
    if (r->bad || l > r->n - r->pos) {
        r->bad = true;
        *len = 0;
        return NULL;
    }
    const uint8_t *d = r->p + r->pos;
    r->pos += (size_t)l;
    *len = (size_t)l;
    return d;
}

static uint32_t r_idx(rd *r, uint32_t limit)
{
    uint64_t v = r_u(r);
    if (v >= limit) {
        r->bad = true;
        return 0;
    }
    return (uint32_t)v;
}

static bb_value *r_value(rd *r)
{
    uint64_t has = r_u(r);
    if (r->bad || !has)
        return NULL;
    if (r->n - r->pos < 8) {
        r->bad = true;
        return NULL;
    }
    uint64_t hash;
    memcpy(&hash, r->p + r->pos, 8);
    r->pos += 8;
    size_t len;
    const uint8_t *d = r_bytes(r, &len);
    bb_value *v = NULL;
    int rc = r->bad ? BB_EDECODE : bb_value_decode(hash, d, len, NULL, &v, NULL);
    if (rc) {
        if (rc == BB_ENOMEM)
            nomem(r);
        r->bad = true;
        return NULL;
    }
    return v;
}

static bool r_peer(rd *r, bb_peerid *p)
{
    size_t len;
    const uint8_t *d = r_bytes(r, &len);
    if (r->bad || bb_peerid_from_bytes(d, len, p, NULL) != BB_OK) {
        r->bad = true;
        return false;
    }
    return true;
}

/* ---- snapshot ---------------------------------------------------------------------------- */

/* frame -> 1-based index (0 = none) */
static uint64_t fidx(const bbe__map *m, const bbe__exec *x)
{
    uint64_t v = 0;
    if (x)
        bbe__map_get(m, (uint64_t)(uintptr_t)x, &v);
    return v;
}

static void w_waiters(wr *w, const bbe__map *fm, const struct bbe__waiter *v, size_t n)
{
    w_u(w, n);
    for (size_t i = 0; i < n; i++) {
        w_u(w, v[i].op);
        w_u(w, fidx(fm, v[i].x));
    }
}

static void w_in_values(wr *w, const bbe__in_value *in, uint32_t n)
{
    w_u(w, n);
    for (uint32_t i = 0; i < n; i++) {
        w_u(w, in[i].site);
        w_u(w, in[i].charged);
        w_value(w, in[i].v);
    }
}

int bb_engine_snapshot(bb_engine *e, uint8_t **out, size_t *out_len, bb_error *err)
{
    if (!e->installed)
        return bb_error_set(err, BB_ESTATE, "snapshot: nothing installed");
    if (atomic_load(&e->in_cycle))
        return bb_error_set(err, BB_ESTATE, "snapshot: inside a poll");
    wr w = {0};
    bbe__map fm = {0};
    uint64_t nf = 0;
    for (bbe__exec *x = e->live; x; x = x->next)
        if (bbe__map_put(&fm, (uint64_t)(uintptr_t)x, ++nf))
            w.oom = true;
    w_raw(&w, MAGIC, 8);
    w_u(&w, e->fingerprint);
    w_u(&w, e->incarnation);
    w_u(&w, atomic_load(&e->next_exec));
    w_u(&w, e->rng);
    w_u(&w, e->now_ns);
    w_u(&w, e->last_sent_at);
    w_u(&w, e->next_req);
    w_u(&w, e->next_wire_req);
    w_u(&w, e->next_inreq);
    w_u(&w, e->timer_seq);
    w_u(&w, e->intervals_armed);
    w_u(&w, e->cycle_seq);
    w_u(&w, BBE__C_COUNT);
    for (int i = 0; i < BBE__C_COUNT; i++)
        w_u(&w, e->c[i]);
    w_u(&w, e->n_metrics);
    for (uint32_t i = 0; i < e->n_metrics; i++)
        w_u(&w, e->metrics[i].value);
    /* components */
    w_u(&w, e->n_comps);
    for (uint32_t i = 0; i < e->n_comps; i++) {
        bbe__comp *c = &e->comps[i];
        w_str(&w, c->slot);
        uint8_t *s = NULL;
        size_t sl = 0;
        if (c->type->snapshot && c->created) {
            bb_error cerr = {0};
            if (c->type->snapshot(c->inst, &s, &sl, &cerr) != BB_OK) {
                free(w.p);
                bbe__map_free(&fm);
                return bb_error_set(err, BB_ERUNTIME, "snapshot: slot '%s' (%s): %s", c->slot,
                                    c->type->type_name, cerr.msg);
            }
            w_u(&w, 1);
            w_bytes(&w, s, sl);
            free(s);
        } else {
            w_u(&w, 0);
        }
    }
    /* executions */
    w_u(&w, nf);
    for (bbe__exec *x = e->live; x; x = x->next) {
        w_u(&w, x->id);
        w_u(&w, x->g->index);
        w_u(&w, fidx(&fm, x->parent));
        w_u(&w, x->call_op == BBE__NONE ? 0 : (uint64_t)x->call_op + 1);
        w_u(&w, x->boot);
        w_u(&w, x->inbound != NULL);
        if (x->inbound) {
            w_peer(&w, &x->inbound->src);
            w_u(&w, x->inbound->env_hash);
            w_u(&w, x->inbound->deadline_ns);
        }
        w_u(&w, x->n_limits);
        for (uint32_t i = 0; i < x->n_limits; i++)
            w_u(&w, x->limits[i]);
        uint32_t live = 0;
        for (uint32_t i = 0; i < x->n_written; i++)
            live += x->slots[x->written[i]].v != NULL;
        w_u(&w, live);
        for (uint32_t i = 0; i < x->n_written; i++) {
            const bbe__slot *s = &x->slots[x->written[i]];
            if (!s->v)
                continue;
            w_u(&w, x->written[i]);
            w_u(&w, s->charged);
            w_value(&w, s->v);
        }
    }
    /* frontier (+ parked behind bootstraps + component ops waiting on a handle) */
    size_t n_handles = 0;
    for (size_t s = 0; s < e->slabs.n; s++)
        for (size_t k = 0; k < BBE__HANDLE_SLAB; k++)
            n_handles += e->slabs.v[s][k].attached && e->slabs.v[s][k].x;
    w_u(&w, e->fr_n + e->parked.n + n_handles);
    for (size_t i = 0; i < e->fr_n; i++) {
        const struct bbe__fentry *f = &e->fr[(e->fr_head + i) & (e->fr_cap - 1)];
        w_u(&w, f->op);
        w_u(&w, fidx(&fm, f->x));
    }
    for (size_t i = 0; i < e->parked.n; i++) {
        w_u(&w, e->parked.v[i].op);
        w_u(&w, fidx(&fm, e->parked.v[i].x));
    }
    for (size_t s = 0; s < e->slabs.n; s++)
        for (size_t k = 0; k < BBE__HANDLE_SLAB; k++) {
            const bbe__handle *h = &e->slabs.v[s][k];
            if (h->attached && h->x) {
                w_u(&w, h->op);
                w_u(&w, fidx(&fm, h->x));
            }
        }
    /* timers (handle deadlines die with their handles, control-plane
     * request deadlines with the requests, which are not kept) */
    size_t nt = 0;
    for (size_t i = 0; i < e->timers.n; i++)
        nt += e->timers.v[i].kind != BBE__T_HANDLE_DEADLINE &&
              e->timers.v[i].kind != BBE__T_CTL_DEADLINE;
    w_u(&w, nt);
    for (size_t i = 0; i < e->timers.n; i++) {
        const bbe__timer *t = &e->timers.v[i];
        if (t->kind == BBE__T_HANDLE_DEADLINE || t->kind == BBE__T_CTL_DEADLINE)
            continue;
        w_u(&w, t->at);
        w_u(&w, t->seq);
        w_u(&w, t->kind);
        w_u(&w, t->op == BBE__NONE ? 0 : (uint64_t)t->op + 1);
        w_u(&w, t->a);
        w_u(&w, t->b);
        w_u(&w, t->kind == BBE__T_PARK ? fidx(&fm, t->p) : 0);
    }
    /* semaphores, queues, holds */
    w_u(&w, e->n_semas);
    for (uint32_t i = 0; i < e->n_semas; i++) {
        w_u(&w, (uint64_t)e->semas[i].held);
        w_waiters(&w, &fm, e->semas[i].waiters.v, e->semas[i].waiters.n);
    }
    w_u(&w, e->n_queues);
    for (uint32_t i = 0; i < e->n_queues; i++) {
        const bbe__queue *q = &e->queues[i];
        w_u(&w, q->items.n - q->head);
        for (size_t k = q->head; k < q->items.n; k++)
            w_value(&w, q->items.v[k]);
        w_waiters(&w, &fm, q->waiters.v, q->waiters.n);
    }
    w_u(&w, e->n_holds);
    for (uint32_t i = 0; i < e->n_holds; i++)
        w_value(&w, e->holds[i].v);
    /* records */
    w_u(&w, e->rec_n);
    for (size_t i = 0; i < e->rec_n; i++) {
        const bbe__record *rec = &e->records[(e->rec_head + i) % e->caps.record_ring];
        w_str(&w, rec->name);
        w_value(&w, rec->v);
    }
    /* batches */
    w_u(&w, e->batches.n);
    for (size_t i = 0; i < e->batches.cap; i++) {
        if (e->batches.slots[i].state != BBE__MAP_FULL)
            continue;
        const bbe__batch *b = (const bbe__batch *)(uintptr_t)e->batches.slots[i].val;
        w_u(&w, b->id);
        w_u(&w, b->wire_req_id);
        w_u(&w, b->op);
        w_u(&w, fidx(&fm, b->x));
        w_u(&w, b->expected);
        w_u(&w, b->quorum);
        for (uint32_t k = 0; k < b->expected; k++) {
            w_peer(&w, &b->cohort[k]);
            w_u(&w, b->answered[k]);
        }
        w_u(&w, b->n_items);
        for (size_t k = 0; k < b->n_items; k++) {
            w_value(&w, b->items[k]);
            w_value(&w, b->peers[k]);
        }
        w_u(&w, (uint64_t)b->done | (uint64_t)b->failed << 1 | (uint64_t)b->holds_ref << 2);
        w_waiters(&w, &fm, b->waiters.v, b->waiters.n);
        w_value(&w, b->result);
    }
    /* open inbound requests */
    w_u(&w, e->inreq_n);
    for (size_t i = 0; i < e->inreq_n; i++) {
        const bbe__inreq *q = &e->inreqs[(e->inreq_head + i) % e->caps.inbound_requests_max];
        bool open = bbe__map_get(&e->inreq_map, q->id, NULL);
        w_u(&w, open ? q->id : 0);
        w_peer(&w, &q->peer);
        w_u(&w, q->wire_req_id);
        w_u(&w, q->site);
        w_u(&w, q->sent_at_ns);
        w_u(&w, q->recv_at_ns);
    }
    /* dedup window */
    w_u(&w, e->dedup_n);
    for (size_t i = 0; i < e->dedup_n; i++)
        w_u(&w, e->dedup[(e->dedup_head + i) % e->caps.dedup_window]);
    /* peers */
    size_t np = 0;
    for (size_t i = 0; i < e->peers.n; i++)
        np += e->peers.v[i].live;
    w_u(&w, np);
    for (size_t i = 0; i < e->peers.n; i++) {
        const bbe__peer *p = &e->peers.v[i];
        if (!p->live)
            continue;
        w_peer(&w, &p->id);
        w_u(&w, p->n_addrs);
        for (uint32_t k = 0; k < p->n_addrs; k++)
            w_bytes(&w, p->addrs[k].data, p->addrs[k].len);
        w_u(&w, p->connected);
        w_u(&w, p->n_targets);
        for (uint32_t k = 0; k < p->n_targets; k++)
            w_str(&w, p->targets[k]);
        w_u(&w, p->attempts);
        w_u(&w, p->next_retry_ns);
        w_u(&w, p->failures);
        w_u(&w, (uint64_t)p->down | (uint64_t)p->blocked << 1 | (uint64_t)p->allowed << 2);
        w_u(&w, p->rtt_ns);
        w_u(&w, p->last_rx_sent_at);
        w_u(&w, p->last_rx_at);
    }
    /* bus */
    w_u(&w, e->bus_n);
    for (size_t i = 0; i < e->bus_n; i++)
        w_u(&w, e->bus[(e->bus_head + i) % e->caps.bus_capacity].kind);
    /* loopback envelopes */
    w_u(&w, e->loopback.n);
    for (size_t i = 0; i < e->loopback.n; i++)
        w_bytes(&w, e->loopback.v[i].bytes, e->loopback.v[i].len);
    /* bootstrap */
    w_u(&w, e->boot.all_armed);
    w_u(&w, e->boot.next_idx);
    w_u(&w, e->boot.pulses_fired);
    w_u(&w, e->boot.n_mods);
    for (uint32_t i = 0; i < e->boot.n_mods; i++)
        w_u(&w, e->boot.mods[i].done);
    w_u(&w, e->boot.inflight.n);
    for (size_t i = 0; i < e->boot.inflight.n; i++) {
        const bbe__inflight *f = &e->boot.inflight.v[i];
        w_u(&w, f->used);
        w_u(&w, f->component);
        w_u(&w, f->idx);
        w_u(&w, f->live);
        w_u(&w, f->failed);
        w_str(&w, f->failed ? f->why : "");
    }
    w_u(&w, e->boot.waiting.n);
    for (size_t i = 0; i < e->boot.waiting.n; i++) {
        const bbe__boot_req *q = &e->boot.waiting.v[i];
        w_u(&w, (uint64_t)q->kind);
        w_u(&w, q->idx);
        w_in_values(&w, q->in, q->n);
    }
    /* ingress: take it, serialize, put it back in order */
    bbe__ingress_ev *ing = bbe__ingress_take(e);
    size_t ni = 0;
    for (bbe__ingress_ev *ev = ing; ev; ev = ev->next)
        ni += ev->kind != BBE__IN_COMPLETION && ev->kind != BBE__IN_WORK_DONE;
    w_u(&w, ni);
    for (bbe__ingress_ev *ev = ing; ev; ev = ev->next) {
        if (ev->kind == BBE__IN_COMPLETION || ev->kind == BBE__IN_WORK_DONE)
            continue;
        w_u(&w, (uint64_t)ev->kind);
        w_u(&w, ev->charged);
        switch (ev->kind) {
        case BBE__IN_ENVELOPE:
            w_peer(&w, &ev->u.env.src);
            w_bytes(&w, ev->u.env.obs, ev->u.env.obs_len);
            w_bytes(&w, ev->u.env.buf->data, ev->u.env.buf->len);
            break;
        case BBE__IN_INVOKE:
            w_u(&w, ev->u.inv.target);
            w_u(&w, ev->u.inv.exec);
            w_u(&w, ev->u.inv.sources);
            w_in_values(&w, ev->u.inv.in, ev->u.inv.n);
            break;
        case BBE__IN_LIFECYCLE:
            w_u(&w, (uint64_t)ev->u.lc.phase);
            break;
        case BBE__IN_BOOTSTRAP:
            w_u(&w, (uint64_t)ev->u.boot.all);
            w_u(&w, ev->u.boot.n);
            for (uint32_t k = 0; k < ev->u.boot.n; k++) {
                w_u(&w, (uint64_t)ev->u.boot.reqs[k].kind);
                w_u(&w, ev->u.boot.reqs[k].idx);
                w_in_values(&w, ev->u.boot.reqs[k].in, ev->u.boot.reqs[k].n);
            }
            break;
        case BBE__IN_NOTICE:
            w_u(&w, (uint64_t)ev->u.notice.infra);
            w_u(&w, (uint64_t)ev->u.notice.sub);
            w_u(&w, ev->u.notice.count);
            w_str(&w, ev->u.notice.detail);
            break;
        }
    }
    /* re-queue (the take reversed nothing visible: push back oldest first) */
    while (ing) {
        bbe__ingress_ev *next = ing->next;
        ing->next = NULL;
        bool must = ing->must;
        ing->must = true; /* never drop our own re-queue */
        bbe__ingress_push(e, ing);
        ing->must = must;
        if (!must)
            atomic_fetch_add(&e->ing.count, 1);
        ing = next;
    }
    bbe__map_free(&fm);
    if (w.oom) {
        free(w.p);
        return bb_error_set(err, BB_ENOMEM, "snapshot: out of memory (or an unencodable value)");
    }
    *out = w.p;
    *out_len = w.n;
    return BB_OK;
}

/* ---- restore ------------------------------------------------------------------------------ */

static bbe__exec *frame_at(rd *r, bbe__exec **frames, size_t n)
{
    uint64_t v = r_u(r);
    if (!v || v > n) {
        r->bad = true;
        return NULL;
    }
    return frames[v - 1];
}

static int r_waiters(rd *r, bb_engine *e, bbe__exec **frames, size_t nf, void *arr)
{
    size_t n = r_count(r);
    for (size_t i = 0; i < n && !r->bad; i++) {
        struct bbe__waiter wt;
        wt.op = r_idx(r, e->n_ops);
        wt.x = frame_at(r, frames, nf);
        if (r->bad || e->ops[wt.op].graph != wt.x->g->index) {
            r->bad = true;
            break;
        }
        BBE__ARR(struct bbe__waiter) *a = arr;
        if (BBE__ARR_PUSH(a, wt))
            return BB_ENOMEM;
        wt.x->refs++;
        e->pending_async++;
    }
    return 0;
}

static bbe__in_value *r_in_values(rd *r, bb_engine *e, uint32_t graph, uint32_t *n_out)
{
    size_t n = r_count(r);
    bbe__in_value *in = calloc(n ? n : 1, sizeof *in);
    *n_out = 0;
    if (!in) {
        nomem(r);
        return NULL;
    }
    for (size_t i = 0; i < n && !r->bad; i++) {
        in[i].site = r_idx(r, e->graphs[graph].n_sites);
        in[i].charged = (size_t)r_u(r);
        in[i].v = r_value(r);
        if (!r->bad && !in[i].v)
            r->bad = true;
        if (!r->bad) {
            atomic_fetch_add(&e->bytes_in_flight, in[i].charged);
            *n_out = (uint32_t)i + 1;
        }
    }
    return in;
}

/* Drop every restored transient structure (restore failed). */
static void reset_transient(bb_engine *e)
{
    bbe__ingress_free(e);
    bbe__timers_free(e);
    bbe__wire_free(e);
    bbe__control_free(e);
    bbe__exec_free_all(e);
    bbe__boot_free(e);
    for (uint32_t i = 0; i < e->boot.n_mods; i++)
        e->boot.mods[i].done = false;
    e->boot.all_armed = e->boot.all_blocked = e->boot.pulses_fired = false;
    e->boot.next_idx = 0;
    bbe__peers_free(e);
    for (uint32_t i = 0; i < e->n_semas; i++) {
        e->semas[i].held = 0;
        e->semas[i].waiters.n = 0;
    }
    for (uint32_t i = 0; i < e->n_queues; i++) {
        bbe__queue *q = &e->queues[i];
        for (size_t k = q->head; k < q->items.n; k++)
            bb_value_unref(q->items.v[k]);
        q->items.n = q->head = 0;
        q->waiters.n = 0;
    }
    for (uint32_t i = 0; i < e->n_holds; i++) {
        bb_value_unref(e->holds[i].v);
        e->holds[i].v = NULL;
    }
    for (size_t i = 0; i < e->rec_n; i++)
        bb_value_unref(e->records[(e->rec_head + i) % e->caps.record_ring].v);
    e->rec_n = e->rec_head = 0;
    for (size_t i = 0; i < e->loopback.n; i++)
        free(e->loopback.v[i].bytes);
    e->loopback.n = 0;
    e->dedup_n = e->dedup_head = 0;
    bbe__map_free(&e->dedup_set);
    e->bus_n = e->bus_head = 0;
    e->pending_async = 0;
    e->inreq_n = e->inreq_head = 0;
    atomic_store(&e->bytes_in_flight, 0);
}

static const char *record_name(const bb_engine *e, const uint8_t *d, size_t len)
{
    for (uint32_t k = 0; k < e->n_ops; k++) {
        const bbe__op *op = &e->ops[k];
        if (op->st && op->st->name && strlen(op->st->name) == len && memcmp(op->st->name, d, len) == 0)
            return op->st->name;
    }
    return NULL;
}

static int restore_body(bb_engine *e, rd *r, bb_error *err)
{
    r->pos = 8;
    if (r_u(r) != e->fingerprint)
        return bb_error_set(err, BB_EVALIDATE,
                            "restore: the snapshot was taken on a different install (model or targets)");
    uint64_t incarnation = r_u(r);
    atomic_store(&e->next_exec, r_u(r));
    e->rng = r_u(r);
    e->now_ns = r_u(r);
    e->last_sent_at = r_u(r);
    e->next_req = r_u(r);
    e->next_wire_req = r_u(r);
    e->next_inreq = r_u(r);
    e->timer_seq = r_u(r);
    e->intervals_armed = r_u(r) != 0;
    e->cycle_seq = r_u(r);
    size_t nc = r_count(r);
    for (size_t i = 0; i < nc; i++) {
        uint64_t v = r_u(r);
        if (i < BBE__C_COUNT)
            e->c[i] = v;
    }
    if (r_u(r) != e->n_metrics)
        r->bad = true;
    for (uint32_t i = 0; i < e->n_metrics && !r->bad; i++)
        e->metrics[i].value = r_u(r);
    /* components */
    if (r_u(r) != e->n_comps)
        r->bad = true;
    for (uint32_t i = 0; i < e->n_comps && !r->bad; i++) {
        bbe__comp *c = &e->comps[i];
        size_t sl;
        const uint8_t *s = r_bytes(r, &sl);
        if (r->bad || sl != strlen(c->slot) || memcmp(s, c->slot, sl) != 0) {
            r->bad = true;
            break;
        }
        if (r_u(r)) {
            size_t len;
            const uint8_t *d = r_bytes(r, &len);
            if (r->bad)
                break;
            if (!c->type->restore)
                return bb_error_set(err, BB_EVALIDATE, "restore: slot '%s' (%s) cannot restore state",
                                    c->slot, c->type->type_name);
            bb_error cerr = {0};
            int rc = c->type->restore(c->inst, d, len, &cerr);
            if (rc != BB_OK)
                return bb_error_set(err, rc == BB_ENOMEM ? BB_ENOMEM : BB_EVALIDATE,
                                    "restore: slot '%s' (%s): %s", c->slot, c->type->type_name,
                                    cerr.msg);
        }
    }
    if (r->bad)
        goto bad;
    /* executions */
    size_t nf = r_count(r);
    bbe__exec **frames = calloc(nf ? nf : 1, sizeof *frames);
    uint64_t *parents = calloc(nf ? nf : 1, sizeof *parents);
    if (!frames || !parents) {
        free(frames);
        free(parents);
        return bb_error_set(err, BB_ENOMEM, "restore: out of memory");
    }
    for (size_t i = 0; i < nf && !r->bad; i++) {
        bb_exec_id id = r_u(r);
        uint32_t gi = r_idx(r, e->n_graphs);
        if (r->bad)
            break;
        bbe__graph *g = &e->graphs[gi];
        /* a blank frame: no constants pre-filled (the snapshot has them) */
        uint32_t nconst = g->n_consts;
        g->n_consts = 0;
        bbe__exec *x = bbe__exec_new(e, g, id);
        g->n_consts = nconst;
        if (!x) {
            nomem(r);
            break;
        }
        frames[i] = x;
        x->refs = 0; /* recounted from the restored references below */
        parents[i] = r_u(r);
        uint64_t call = r_u(r);
        x->call_op = call ? (uint32_t)(call - 1) : BBE__NONE;
        if (call > e->n_ops)
            r->bad = true;
        uint64_t boot = r_u(r);
        x->boot = (uint32_t)boot;
        if (boot > 4096)
            r->bad = true;
        if (r_u(r)) {
            bbe__exec_set_inbound(x);
            r_peer(r, &x->inbound->src);
            x->inbound->env_hash = r_u(r);
            x->inbound->deadline_ns = r_u(r);
        }
        size_t nl = r_count(r);
        for (size_t k = 0; k < nl && !r->bad; k++) {
            uint32_t s = r_idx(r, e->n_semas);
            uint32_t *l = realloc(x->limits, (x->n_limits + 1) * sizeof *l);
            if (!l) {
                nomem(r);
                break;
            }
            x->limits = l;
            x->limits[x->n_limits++] = s;
        }
        size_t ns = r_count(r);
        for (size_t k = 0; k < ns && !r->bad; k++) {
            uint32_t site = r_idx(r, g->n_sites);
            size_t charged = (size_t)r_u(r);
            bb_value *v = r_value(r);
            if (r->bad || !v || x->slots[site].v) {
                bb_value_unref(v);
                r->bad = true;
                break;
            }
            x->written[x->n_written++] = site;
            x->slots[site].v = v;
            x->slots[site].charged = charged;
            atomic_fetch_add(&e->bytes_in_flight, charged);
            e->live_slots++;
        }
    }
    for (size_t i = 0; i < nf && !r->bad; i++) {
        bbe__exec *x = frames[i];
        if (parents[i] > nf || parents[i] == i + 1) {
            r->bad = true;
            break;
        }
        x->parent = parents[i] ? frames[parents[i] - 1] : NULL;
        if (x->parent) {
            const bbe__op *call = x->call_op < e->n_ops ? &e->ops[x->call_op] : NULL;
            if (!call || call->disp != BBE__DISP_CALL || call->comp != x->g->index ||
                call->graph != x->parent->g->index) {
                r->bad = true;
                break;
            }
            x->parent->refs++;
        }
    }
    free(parents);
    if (r->bad)
        goto bad_frames;
    /* frontier */
    size_t nfr = r_count(r);
    for (size_t i = 0; i < nfr && !r->bad; i++) {
        uint32_t op = r_idx(r, e->n_ops);
        bbe__exec *x = frame_at(r, frames, nf);
        if (r->bad)
            break;
        if (e->ops[op].graph != x->g->index) {
            r->bad = true;
            break;
        }
        if (bbe__frontier_reserve(e, e->fr_n + 1)) {
            nomem(r);
            break;
        }
        bbe__frontier_push(e, op, x);
    }
    /* timers */
    size_t nt = r_count(r);
    for (size_t i = 0; i < nt && !r->bad; i++) {
        bbe__timer t = {0};
        t.at = r_u(r);
        t.seq = r_u(r);
        t.kind = (uint32_t)r_u(r);
        uint64_t op = r_u(r);
        t.a = (uint32_t)r_u(r);
        t.b = r_u(r);
        uint64_t fx = r_u(r);
        if (r->bad || op > e->n_ops || t.kind < BBE__T_PARK || t.kind > BBE__T_BATCH_DEADLINE ||
            t.kind == BBE__T_HANDLE_DEADLINE) {
            r->bad = true;
            break;
        }
        t.op = op ? (uint32_t)(op - 1) : BBE__NONE;
        if (t.kind == BBE__T_PARK) {
            if (!fx || fx > nf || t.op == BBE__NONE || e->ops[t.op].graph != frames[fx - 1]->g->index) {
                r->bad = true;
                break;
            }
            t.p = frames[fx - 1];
            frames[fx - 1]->refs++;
            e->pending_async++;
        }
        if ((t.kind == BBE__T_INTERVAL &&
             (t.op == BBE__NONE || strcmp(e->ops[t.op].op_type, "Interval") != 0 || !e->ops[t.op].st ||
              e->ops[t.op].st->i <= 0)) ||
            (t.kind == BBE__T_COMPONENT && t.a >= e->n_comps)) {
            r->bad = true;
            break;
        }
        if (BBE__ARR_PUSH(&e->timers, t)) {
            nomem(r);
            break;
        }
    }
    /* the snapshot left out the handle deadlines: what remains of the heap
     * array is not a heap in general (and a snapshot is input) */
    bbe__timers_heapify(e);
    /* semaphores, queues, holds */
    if (r_u(r) != e->n_semas)
        r->bad = true;
    for (uint32_t i = 0; i < e->n_semas && !r->bad; i++) {
        e->semas[i].held = (int64_t)r_u(r);
        if (r_waiters(r, e, frames, nf, &e->semas[i].waiters))
            nomem(r);
    }
    if (r_u(r) != e->n_queues)
        r->bad = true;
    for (uint32_t i = 0; i < e->n_queues && !r->bad; i++) {
        bbe__queue *q = &e->queues[i];
        size_t n = r_count(r);
        for (size_t k = 0; k < n && !r->bad; k++) {
            bb_value *v = r_value(r);
            if (!v) {
                r->bad = true;
            } else if (BBE__ARR_PUSH(&q->items, v)) {
                bb_value_unref(v);
                nomem(r);
            }
        }
        if (!r->bad && r_waiters(r, e, frames, nf, &q->waiters))
            nomem(r);
    }
    if (r_u(r) != e->n_holds)
        r->bad = true;
    for (uint32_t i = 0; i < e->n_holds && !r->bad; i++)
        e->holds[i].v = r_value(r);
    /* records */
    size_t nr = r_count(r);
    for (size_t i = 0; i < nr && !r->bad; i++) {
        size_t len;
        const uint8_t *d = r_bytes(r, &len);
        const char *name = r->bad ? NULL : record_name(e, d, len);
        bb_value *v = r_value(r);
        if (!name || !v || e->rec_n == e->caps.record_ring) {
            bb_value_unref(v);
            r->bad = true;
            break;
        }
        e->records[e->rec_n].name = name;
        e->records[e->rec_n++].v = v;
    }
    /* batches */
    size_t nb = r_count(r);
    for (size_t i = 0; i < nb && !r->bad; i++) {
        uint64_t id = r_u(r), wire_req_id = r_u(r);
        uint32_t op = r_idx(r, e->n_ops);
        bbe__exec *x = frame_at(r, frames, nf);
        uint64_t exp = r_u(r), quorum = r_u(r);
        if (r->bad || exp > 65536 || quorum > exp || e->ops[op].graph != x->g->index) {
            r->bad = true;
            break;
        }
        bbe__batch *b = bbe__batch_new((uint32_t)exp);
        if (!b) {
            nomem(r);
            break;
        }
        b->id = id;
        b->wire_req_id = wire_req_id;
        b->op = op;
        b->x = x;
        b->quorum = (uint32_t)quorum;
        /* link first so a failure below frees it with the frame */
        b->next_in_exec = b->x->batches;
        b->x->batches = b;
        if (bbe__map_put(&e->batches, b->id, (uint64_t)(uintptr_t)b)) {
            nomem(r);
            break;
        }
        size_t n_answered = 0;
        for (uint32_t k = 0; k < b->expected && !r->bad; k++) {
            r_peer(r, &b->cohort[k]);
            b->answered[k] = r_u(r) != 0;
            n_answered += b->answered[k];
        }
        /* one response per answered member: the arrays have room for the
         * rest of the cohort's answers, no more */
        size_t ni = r_count(r);
        if (ni != n_answered)
            r->bad = true;
        for (size_t k = 0; k < ni && !r->bad; k++) {
            bb_value *it = r_value(r), *pv = r_value(r);
            if (!it || !pv) {
                bb_value_unref(it);
                bb_value_unref(pv);
                r->bad = true;
            } else {
                b->items[b->n_items] = it;
                b->peers[b->n_items++] = pv;
            }
        }
        uint64_t fl = r_u(r);
        b->done = fl & 1;
        b->failed = (fl >> 1) & 1;
        b->holds_ref = !b->done && ((fl >> 2) & 1);
        if (b->holds_ref)
            b->x->refs++;
        if (!r->bad && r_waiters(r, e, frames, nf, &b->waiters))
            nomem(r);
        b->result = r_value(r);
        if (!b->done && !r->bad && bbe__map_put(&e->batches_wire, b->wire_req_id, b->id))
            nomem(r);
    }
    /* inbound requests */
    size_t nq = r_count(r);
    if (nq > e->caps.inbound_requests_max)
        r->bad = true;
    if (nq && !r->bad && !e->inreqs && !(e->inreqs = calloc(e->caps.inbound_requests_max, sizeof *e->inreqs)))
        nomem(r);
    for (size_t i = 0; i < nq && !r->bad; i++) {
        bbe__inreq *q = &e->inreqs[i];
        q->id = r_u(r);
        r_peer(r, &q->peer);
        q->wire_req_id = r_u(r);
        q->site = r_u(r);
        q->sent_at_ns = r_u(r);
        q->recv_at_ns = r_u(r);
        e->inreq_n++;
        if (q->id && bbe__map_put(&e->inreq_map, q->id, i))
            nomem(r);
    }
    /* dedup */
    size_t nd = r_count(r);
    if (nd > e->caps.dedup_window)
        r->bad = true;
    for (size_t i = 0; i < nd && !r->bad; i++) {
        e->dedup[i] = r_u(r);
        e->dedup_n++;
        if (bbe__map_put(&e->dedup_set, e->dedup[i], 1))
            nomem(r);
    }
    /* peers */
    size_t np = r_count(r);
    for (size_t i = 0; i < np && !r->bad; i++) {
        bb_peerid id;
        if (!r_peer(r, &id))
            break;
        bbe__peer *p = bbe__peer_get(e, &id);
        if (!p) {
            r->bad = true;
            break;
        }
        size_t na = r_count(r);
        for (size_t k = 0; k < na && !r->bad; k++) {
            size_t len;
            const uint8_t *a = r_bytes(r, &len);
            int rc = r->bad ? BB_OK : bbe__peer_add_addr(e, p, a, len);
            if (rc == BB_ENOMEM)
                nomem(r);
            else if (rc)
                r->bad = true;
        }
        p->connected = r_u(r) != 0;
        size_t nt2 = r_count(r);
        if (nt2 > 64)
            r->bad = true;
        if (nt2 && !r->bad) {
            p->targets = calloc(nt2, sizeof *p->targets);
            if (!p->targets)
                nomem(r);
        }
        for (size_t k = 0; k < nt2 && !r->bad; k++) {
            size_t len;
            const uint8_t *s = r_bytes(r, &len);
            if (r->bad)
                break;
            if (!(p->targets[k] = strndup((const char *)s, len)))
                nomem(r);
            else
                p->n_targets++;
        }
        p->attempts = (uint32_t)r_u(r);
        p->next_retry_ns = r_u(r);
        p->failures = (uint32_t)r_u(r);
        uint64_t fl = r_u(r);
        p->down = fl & 1;
        p->blocked = (fl >> 1) & 1;
        if ((fl >> 2) & 1)
            bb_engine_allow_peer(e, &id, true);
        p = bbe__peer_find(e, &id);
        p->rtt_ns = r_u(r);
        p->last_rx_sent_at = r_u(r);
        p->last_rx_at = r_u(r);
    }
    /* bus */
    size_t nbus = r_count(r);
    if (nbus > e->caps.bus_capacity)
        r->bad = true;
    for (size_t i = 0; i < nbus && !r->bad; i++)
        e->bus[e->bus_n++].kind = r_u(r);
    /* loopback */
    size_t nlb = r_count(r);
    for (size_t i = 0; i < nlb && !r->bad; i++) {
        size_t len;
        const uint8_t *d = r_bytes(r, &len);
        if (r->bad)
            break;
        uint8_t *copy = malloc(len ? len : 1);
        if (!copy || BBE__ARR_PUSH(&e->loopback, ((struct bbe__loop){copy, len}))) {
            free(copy);
            nomem(r);
            break;
        }
        memcpy(copy, d, len);
    }
    /* bootstrap */
    e->boot.all_armed = r_u(r) != 0;
    e->boot.next_idx = (uint32_t)r_u(r);
    e->boot.pulses_fired = r_u(r) != 0;
    if (e->boot.next_idx > e->boot.n_mods || r_u(r) != e->boot.n_mods)
        r->bad = true;
    for (uint32_t i = 0; i < e->boot.n_mods && !r->bad; i++)
        e->boot.mods[i].done = r_u(r) != 0;
    size_t nif = r_count(r);
    if (nif > 4096)
        r->bad = true;
    for (size_t i = 0; i < nif && !r->bad; i++) {
        bbe__inflight f = {0};
        f.used = r_u(r) != 0;
        f.component = r_u(r) != 0;
        f.idx = (uint32_t)r_u(r);
        f.live = (uint32_t)r_u(r);
        f.failed = r_u(r) != 0;
        size_t wl;
        const uint8_t *wd = r_bytes(r, &wl);
        if (!r->bad)
            snprintf(f.why, sizeof f.why, "%.*s", (int)(wl < sizeof f.why ? wl : sizeof f.why - 1),
                     (const char *)wd);
        if (f.used && (f.component ? f.idx >= e->n_comps : f.idx >= e->boot.n_mods))
            r->bad = true;
        if (r->bad)
            break;
        if (f.used && f.component) {
            /* its completion handle is gone: stage it again */
            bbe__boot_req q = {.kind = BB_BOOTSTRAP_SLOTS, .idx = f.idx};
            if (BBE__ARR_PUSH(&e->boot.waiting, q))
                nomem(r);
            f.used = false;
        } else if (f.used) {
            f.touch = e->graphs[e->boot.mods[f.idx].graph].touch;
            e->boot.n_inflight++;
        }
        if (BBE__ARR_PUSH(&e->boot.inflight, f))
            nomem(r);
    }
    for (size_t i = 0; i < nf && !r->bad; i++) {
        uint32_t tag = frames[i]->boot;
        if (tag && (tag > e->boot.inflight.n || !e->boot.inflight.v[tag - 1].used ||
                    e->boot.inflight.v[tag - 1].component))
            r->bad = true;
    }
    size_t nw = r_count(r);
    for (size_t i = 0; i < nw && !r->bad; i++) {
        bbe__boot_req q = {0};
        q.kind = (int)r_u(r);
        q.idx = (uint32_t)r_u(r);
        if (q.kind < BB_BOOTSTRAP_MODULE_NAMES || q.kind > BB_BOOTSTRAP_SLOTS ||
            (q.kind == BB_BOOTSTRAP_SLOTS ? q.idx >= e->n_comps : q.idx >= e->boot.n_mods)) {
            r->bad = true;
            break;
        }
        uint32_t g = q.kind == BB_BOOTSTRAP_SLOTS ? 0 : e->boot.mods[q.idx].graph;
        q.in = r_in_values(r, e, g, &q.n);
        if (BBE__ARR_PUSH(&e->boot.waiting, q)) {
            free(q.in);
            nomem(r);
        }
    }
    /* ingress */
    size_t ni = r_count(r);
    for (size_t i = 0; i < ni && !r->bad; i++) {
        int kind = (int)r_u(r);
        size_t charged = (size_t)r_u(r);
        size_t len;
        const uint8_t *d;
        bbe__ingress_ev *ev;
        if (kind == BBE__IN_ENVELOPE) { /* one block with its bytes */
            bb_peerid src;
            size_t obs_len;
            r_peer(r, &src);
            const uint8_t *obs = r_bytes(r, &obs_len);
            d = r_bytes(r, &len);
            if (r->bad)
                break;
            ev = bbe__envelope_ev_new(d, NULL, len, obs_len ? obs : NULL, obs_len);
            if (ev)
                ev->u.env.src = src;
        } else {
            ev = calloc(1, sizeof *ev);
            if (ev)
                ev->kind = kind;
        }
        if (!ev) {
            nomem(r);
            break;
        }
        ev->charged = charged;
        ev->must = true; /* restored work is never dropped */
        switch (ev->kind) {
        case BBE__IN_ENVELOPE:
            break;
        case BBE__IN_INVOKE:
            ev->u.inv.target = r_idx(r, e->n_graphs);
            ev->u.inv.exec = r_u(r);
            ev->u.inv.sources = r_u(r) != 0;
            if (!r->bad)
                ev->u.inv.in = r_in_values(r, e, ev->u.inv.target, &ev->u.inv.n);
            break;
        case BBE__IN_LIFECYCLE:
            ev->u.lc.phase = (int64_t)r_u(r);
            break;
        case BBE__IN_BOOTSTRAP: {
            ev->u.boot.all = (int)r_u(r);
            size_t nq2 = r_count(r);
            ev->u.boot.reqs = calloc(nq2 ? nq2 : 1, sizeof *ev->u.boot.reqs);
            if (!ev->u.boot.reqs) {
                nomem(r);
                break;
            }
            for (size_t k = 0; k < nq2 && !r->bad; k++) {
                bbe__boot_req *q = &ev->u.boot.reqs[k];
                q->kind = (int)r_u(r);
                q->idx = (uint32_t)r_u(r);
                if (q->kind < BB_BOOTSTRAP_MODULE_NAMES || q->kind > BB_BOOTSTRAP_SLOTS ||
                    (q->kind == BB_BOOTSTRAP_SLOTS ? q->idx >= e->n_comps : q->idx >= e->boot.n_mods)) {
                    r->bad = true;
                    break;
                }
                ev->u.boot.n = (uint32_t)k + 1;
                q->in = r_in_values(r, e, q->kind == BB_BOOTSTRAP_SLOTS ? 0 : e->boot.mods[q->idx].graph, &q->n);
            }
            break;
        }
        case BBE__IN_NOTICE:
            ev->u.notice.infra = (int)r_u(r);
            ev->u.notice.sub = (int)r_u(r);
            ev->u.notice.count = r_u(r);
            d = r_bytes(r, &len);
            if (!r->bad)
                snprintf(ev->u.notice.detail, sizeof ev->u.notice.detail, "%.*s", (int)len, (const char *)d);
            break;
        default:
            r->bad = true;
            break;
        }
        if (!r->bad)
            atomic_fetch_add(&e->bytes_in_flight, ev->charged);
        else
            ev->charged = 0;
        bbe__ingress_push(e, ev); /* freed with the ingress if the restore fails */
    }
    if (r->bad || r->pos != r->n)
        goto bad_frames;
    /* an execution nothing refers to any more is finished */
    for (size_t i = 0; i < nf; i++) {
        if (!frames[i]->refs) {
            frames[i]->refs = 1;
            bbe__exec_unref(e, frames[i]);
        }
    }
    free(frames);
    e->incarnation = incarnation + 1;
    return BB_OK;
bad_frames:
    free(frames);
bad:
    if (r->oom)
        return bb_error_set(err, BB_ENOMEM, "restore: out of memory");
    return bb_error_set(err, BB_EDECODE, "restore: malformed snapshot at byte %zu", r->pos);
}

int bb_engine_restore(bb_engine *e, const uint8_t *data, size_t len, bb_error *err)
{
    if (!e->installed)
        return bb_error_set(err, BB_ESTATE, "restore: install the same targets first");
    if (e->ran || e->live || e->fr_n || e->timers.n)
        return bb_error_set(err, BB_ESTATE, "restore: the engine has already run");
    if (!data || len < 8 || memcmp(data, MAGIC, 8) != 0)
        return bb_error_set(err, BB_EDECODE, "restore: not an engine snapshot");
    rd r = {data, len, 8, false};
    int rc = restore_body(e, &r, err);
    if (rc)
        reset_transient(e);
    return rc;
}
