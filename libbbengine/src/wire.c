/*
 * wire.c — the engine-native wire opset (IR_AND_DSL.md 5b) and inbound
 * envelope delivery (ENGINE.md 6.2).
 *
 * Outbound: Send / SendReqBatched / SendResp encode each data input once,
 * leave out every destination the governor blocks or does not allow (the
 * TX side of access control, for peers chosen at run time as much as for
 * a gate's static `peer`: counted as gate.send_refused, never an
 * envelope), resolve every other destination PeerId through the address
 * book (a miss is a PeerResolveFailed step, never an envelope), stamp
 * src_peer_addresses,
 * sent_at_ns (strictly increasing per node), correlation and deadline, and
 * queue one SendEnvelope step per peer for phase 7. A destination equal to
 * this node loops back into the next cycle's phase 1.
 *
 * Inbound: decode the envelope (bounded), merge the sender's claimed
 * addresses then the transport-observed one into the address book, then
 * route each fill independently (partial delivery): /site/<id> fills
 * decode by the site's declared type (backend-bound tensor sites through
 * materialize_from_wire) into a fresh execution; /component/<c>/op/<name>
 * fills go to the control plane (control.c); responses route by
 * correlation to their request batch, or to the component that asked. Every per-fill failure is a WireReceiveError step
 * and never stops the sibling fills.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/multiaddr.h"
#include "libbbengine/src/syscalls.h"

#define LARGE_PAYLOAD 4096
#define GATHER_MIN_DEFAULT (64 * 1024) /* config.gather_min_bytes 0 */
#define SEND_FILLS_LOCAL 4                /* data inputs of a Send kept on the stack */

/* ---- inbound requests (RecvReq -> SendResp) ----------------------------------- */

static uint64_t inreq_open(bb_engine *e, const bb_peerid *peer, uint64_t wire_req_id,
                           uint64_t site, uint64_t sent_at)
{
    size_t cap = bbe__inreq_ring_cap(&e->caps);
    if (!e->inreqs) {
        e->inreqs = calloc(cap, sizeof *e->inreqs);
        if (!e->inreqs)
            return 0;
    }
    BBE__ASSERT(e->inreq_n <= cap && e->inreq_head < cap);
    if (e->inreq_n == cap) { /* evict the oldest open request */
        bbe__map_del(&e->inreq_map, e->inreqs[e->inreq_head].id);
        e->inreq_head = (e->inreq_head + 1) % cap;
        e->inreq_n--;
    }
    size_t pos = (e->inreq_head + e->inreq_n) % cap;
    bbe__inreq *r = &e->inreqs[pos];
    r->id = e->next_inreq++;
    r->peer = *peer;
    r->wire_req_id = wire_req_id;
    r->site = site;
    r->sent_at_ns = sent_at;
    r->recv_at_ns = e->now_ns;
    if (bbe__map_put(&e->inreq_map, r->id, pos))
        return 0;
    e->inreq_n++;
    return r->id;
}

static bbe__inreq *inreq_find(bb_engine *e, uint64_t id)
{
    uint64_t pos;
    if (!bbe__map_get(&e->inreq_map, id, &pos) || e->inreqs[pos].id != id)
        return NULL;
    return &e->inreqs[pos];
}

/* ---- outbound ------------------------------------------------------------------------ */

static uint64_t sent_at(bb_engine *e)
{
    uint64_t t = e->now_ns > e->last_sent_at ? e->now_ns : e->last_sent_at + 1;
    e->last_sent_at = t;
    return t;
}

/* A SendEnvelope step for the host (taking bytes or gather): to addrs
 * (copied), or, with addrs NULL, to the addresses the book has for peer
 * (BB_ENOTFOUND: none). */
int bbe__push_send(bb_engine *e, const bb_peerid *peer, const bb_engine_addr *addrs, size_t n,
                   uint64_t retry_at, uint8_t *bytes, bb_send_gather *gather, size_t len,
                   bb_exec_id exec)
{
    if (!addrs) {
        bbe__peer *p = bbe__peer_find(e, peer);
        if (!p || !p->n_addrs) {
            free(bytes);
            bb_send_gather_free(gather);
            return BB_ENOTFOUND;
        }
        addrs = p->addrs;
        n = p->n_addrs;
        retry_at = p->attempts ? p->next_retry_ns : 0;
    }
    /* One block: the address array followed by the address bytes, in the
     * storage of the steps buffer the step is handed over in (phase 7 of
     * this poll moves it there): valid until the host clears the steps. */
    size_t total = n * sizeof(bb_engine_addr);
    for (size_t i = 0; i < n; i++)
        total += addrs[i].len;
    bb_engine_addr *copy = bbe__owned_alloc(&e->acc.owned, total ? total : 1);
    if (!copy || BBE__ARR_PUSH(&e->outbound, (bb_step){0})) {
        free(bytes);
        bb_send_gather_free(gather);
        return BB_ENOMEM;
    }
    uint8_t *p = (uint8_t *)(copy + n);
    for (size_t i = 0; i < n; i++) {
        memcpy(p, addrs[i].data, addrs[i].len);
        copy[i].data = p;
        copy[i].len = addrs[i].len;
        p += addrs[i].len;
    }
    bb_step *st = &e->outbound.v[e->outbound.n - 1];
    st->kind = BB_STEP_SEND_ENVELOPE;
    st->exec_id = exec;
    st->u.send.peer = peer ? *peer : (bb_peerid){0};
    st->u.send.addrs = copy;
    st->u.send.n_addrs = n;
    st->u.send.bytes = bytes;
    st->u.send.len = len;
    st->u.send.gather = gather;
    st->u.send.retry_at_ns = retry_at;
    e->c[BBE__C_ENVELOPES_OUT]++;
    if (BBE__TRACING(e, BB_TRACE_WIRE))
        bbe__trace(e, BB_TRACE_WIRE, "send_envelope", exec, BBE__NONE, NULL, len);
    return BB_OK;
}

int bbe__emit(bb_engine *e, const bb_peerid *peer, const bb_engine_addr *direct, size_t n_direct,
              bbe__envelope *env, bb_exec_id exec)
{
    bool self = peer && bb_peerid_equal(peer, &e->cfg.peer) && !n_direct;
    const bb_engine_addr *addrs = direct;
    size_t n = n_direct;
    uint64_t retry_at = 0;
    bool tell = !self; /* the address lists: see bbe__peer.addrs_told */
    bbe__peer *p = NULL; /* peer's entry: nothing below adds peers, so it stays put */
    if (!self && !n_direct) {
        p = bbe__peer_find(e, peer);
        if (!p || !p->n_addrs)
            return BB_ENOTFOUND;
        tell = !(p->connected && p->addrs_told && p->told_gen == p->addrs_gen);
        addrs = p->addrs;
        n = p->n_addrs;
        retry_at = p->attempts ? p->next_retry_ns : 0;
        if (p->last_rx_sent_at && !env->echo_sent_at_ns) { /* RTT piggyback */
            env->echo_sent_at_ns = p->last_rx_sent_at;
            env->echo_delay_ns = e->now_ns - p->last_rx_at;
            p->last_rx_sent_at = 0;
        }
    }
    env->dest = tell ? (bb_engine_addr *)addrs : NULL;
    env->n_dest = tell ? n : 0;
    env->src = tell ? e->local_addrs : NULL;
    env->n_src = tell ? e->n_local_addrs : 0;
    env->sent_at_ns = sent_at(e);
    uint8_t *bytes = NULL;
    size_t len;
    bb_send_gather *gather = NULL;
    size_t min_ref = e->cfg.gather_min_bytes ? e->cfg.gather_min_bytes : GATHER_MIN_DEFAULT;
    int rc = BB_OK;
    if (e->cfg.send_gather && !self)
        rc = bbe__envelope_encode_gather(env, min_ref, &gather);
    if (gather)
        len = gather->len;
    else if (!rc)
        rc = bbe__envelope_encode(env, &bytes, &len);
    env->dest = NULL;
    env->src = NULL;
    if (rc)
        return BB_ENOMEM;
    if (self) {
        if (BBE__ARR_PUSH(&e->loopback, ((struct bbe__loop){bytes, len}))) {
            free(bytes);
            return BB_ENOMEM;
        }
        return BB_OK;
    }
    if (!n_direct && e->cfg.stream_chunk_bytes && len > e->cfg.stream_chunk_bytes)
        rc = bbe__stream_start(e, peer, bytes, gather, len, exec);
    else
        rc = bbe__push_send(e, peer, addrs, n, retry_at, bytes, gather, len, exec);
    if (rc)
        return rc == BB_ENOTFOUND ? BB_ENOMEM : rc;
    if (tell && p && p->connected) {
        p->addrs_told = true;
        p->told_gen = p->addrs_gen;
    }
    return BB_OK;
}

static void resolve_failed(bb_engine *e, uint32_t opi, bbe__exec *x, const bb_peerid *peer)
{
    e->c[BBE__C_PEER_RESOLVE_FAILED]++;
    bb_step *st = bbe__step_push(e, BB_STEP_PEER_RESOLVE_FAILED, x->id);
    if (st) {
        st->u.resolve.node = e->ops[opi].label;
        if (peer) {
            st->u.resolve.has_peer = true;
            st->u.resolve.peer = *peer;
        }
    }
    bbe__bus_publish(e, BB_EVENT_PEER_RESOLVE_FAILURE);
}

#define DESTS_INLINE 4 /* destinations of a Send kept on the stack */

/* Destinations of a Send: PeerIdVec, PeerId, or a Multiaddress (direct). */
typedef struct dests {
    bb_peerid *peers; /* inline, or malloc'd past DESTS_INLINE */
    size_t n;
    bool direct;
    bb_engine_addr addr; /* direct: transport part */
    uint8_t suffix[64];
    size_t suffix_len;
    bb_peerid inline_peers[DESTS_INLINE];
} dests;

static void dests_free(dests *d)
{
    if (d->peers != d->inline_peers)
        free(d->peers);
}

static int dests_of(bb_engine *e, const bb_value *d, dests *out)
{
    out->peers = out->inline_peers;
    out->n = 0;
    out->direct = false;
    out->suffix_len = 0;
    if (!d || !d->type)
        return bbe__fail(e, "destination input is absent");
    switch (d->type->kind) {
    case BB_VK_PEER_ID_VEC:
        if (d->u.list.n > DESTS_INLINE &&
            !(out->peers = malloc(d->u.list.n * sizeof *out->peers)))
            return bbe__fail(e, "out of memory");
        for (size_t i = 0; i < d->u.list.n; i++)
            if (bbe__peerid_from_value(d->u.list.items[i], &out->peers[out->n]))
                out->n++;
        return BBE__R_DONE;
    case BB_VK_PEER_ID:
        if (bbe__peerid_from_value(d, &out->peers[0]))
            out->n = 1;
        return BBE__R_DONE;
    case BB_VK_ADDRESS: {
        size_t tl;
        bb_multiaddr_component c[BB_MULTIADDR_MAX_COMPONENTS];
        size_t nc;
        if (bb_multiaddr_split(d->u.bytes.data, d->u.bytes.len, &tl, NULL) != BB_OK ||
            bb_multiaddr_decode(d->u.bytes.data, d->u.bytes.len, c, BB_MULTIADDR_MAX_COMPONENTS,
                                &nc, NULL) != BB_OK)
            return bbe__fail(e, "destination is not a valid multiaddr");
        out->direct = true;
        out->addr.data = d->u.bytes.data;
        out->addr.len = tl;
        if (d->u.bytes.len - tl <= sizeof out->suffix) {
            memcpy(out->suffix, d->u.bytes.data + tl, d->u.bytes.len - tl);
            out->suffix_len = d->u.bytes.len - tl;
        }
        memset(&out->peers[0], 0, sizeof out->peers[0]);
        out->n = 1;
        for (size_t i = 0; i < nc; i++)
            if (c[i].code == BB_MA_P2P)
                bb_peerid_from_bytes(c[i].value, c[i].value_len, &out->peers[0], NULL);
        if (!tl && out->peers[0].len == 0)
            out->peers[0] = e->cfg.peer; /* a bare suffix: this node */
        else if (!tl)
            out->direct = false;
        return BBE__R_DONE;
    }
    default:
        return bbe__fail(e, "destination is %s (PeerIdVec, PeerId or Multiaddress expected)",
                        d->type->name);
    }
}

/* /site/<site> encoded into out[16]; its length, 0 when it does not fit (a
 * bug: a site id is a u64). The last one is kept encoded (e->tx_site_sfx):
 * a loop sends to the same sites over and over. */
static size_t site_suffix(bb_engine *e, uint64_t site, uint8_t out[16])
{
    if (!e->tx_site_sfx_len || e->tx_site_id != site) {
        size_t sl = 0;
        if (bb_suffix_site(site, e->tx_site_sfx, sizeof e->tx_site_sfx, &sl, NULL))
            return 0;
        e->tx_site_sfx_len = (uint8_t)sl;
        e->tx_site_id = site;
    }
    memcpy(out, e->tx_site_sfx, e->tx_site_sfx_len);
    return e->tx_site_sfx_len;
}

/* The fills of a Send: one per data input, each encoded from its value when
 * an envelope is written. */
static int build_fills(bb_engine *e, uint32_t opi, bb_value *const *in, uint32_t n_data,
                       const dests *d, bbe__fill *fills, uint8_t (*suffix)[16])
{
    const bbe__op *op = &e->ops[opi];
    const bbe__opst *st = op->st;
    for (uint32_t i = 0; i < n_data; i++) {
        memset(&fills[i], 0, sizeof fills[i]);
        if (i < st->n_dest_sites) {
            size_t sl = site_suffix(e, st->dest_sites[i], suffix[i]);
            if (!sl)
                return bbe__fail(e, "cannot encode /site/%llu", (unsigned long long)st->dest_sites[i]);
            fills[i].suffix = suffix[i];
            fills[i].suffix_len = sl;
        } else if (d->suffix_len && n_data == 1) {
            fills[i].suffix = d->suffix;
            fills[i].suffix_len = d->suffix_len;
        } else {
            return bbe__fail(e, "data input %u has no destination site (%s metadata)", i,
                            BB_META_WIRE_DEST_SITE);
        }
        if (!in[i])
            return bbe__fail(e, "data input %u is absent", i);
        if (st->trigger_only || (in[i]->type && in[i]->type->kind == BB_VK_TRIGGER)) {
            fills[i].trigger_only = st->trigger_only;
            continue;
        }
        size_t len;
        bb_error err;
        if (bb_value_encoded_size(in[i], &len, &err))
            return bbe__fail(e, "cannot encode data input %u: %s", i, err.msg);
        fills[i].value = in[i]; /* encoded into each envelope: no copy of its own */
        fills[i].payload_len = len;
    }
    return BBE__R_DONE;
}

/* Shared by Send and SendReqBatched. d: the caller's, freed by it with
 * dests_free; on BBE__R_DONE d->peers[0..d->n) are the peers actually sent
 * to (the others were resolve failures). */
static int send_common(bb_engine *e, uint32_t opi, bbe__exec *x, bb_value *const *in, int corr,
                       uint64_t wire_req_id, dests *d)
{
    const bbe__op *op = &e->ops[opi];
    uint32_t n_data = op->n_in - 1;
    int r = dests_of(e, in[op->n_in - 1], d);
    if (r != BBE__R_DONE)
        return r;
    /* a Send has few data inputs: on the stack unless it has many */
    bbe__fill fills_local[SEND_FILLS_LOCAL];
    uint8_t sfx_local[SEND_FILLS_LOCAL][16];
    bool heap = n_data > SEND_FILLS_LOCAL;
    bbe__fill *fills = heap ? bbe__zalloc(n_data * sizeof *fills) : fills_local;
    uint8_t (*sfx)[16] = heap ? bbe__zalloc(n_data * sizeof *sfx) : sfx_local;
    if (!fills || !sfx) {
        r = bbe__fail(e, "out of memory");
        goto out;
    }
    r = build_fills(e, opi, in, n_data, d, fills, sfx);
    if (r != BBE__R_DONE)
        goto out;
    size_t n_sent = 0;
    for (size_t i = 0; i < d->n; i++) {
        const char *refused = d->peers[i].len && !bb_peerid_equal(&d->peers[i], &e->cfg.peer)
                                  ? bbe__peer_check(e, &d->peers[i], false)
                                  : NULL;
        if (refused) { /* blocked or not allowed: not sent, not in a batch's cohort */
            e->c[BBE__C_SEND_REFUSED]++;
            if (BBE__TRACING(e, BB_TRACE_GATE))
                bbe__trace(e, BB_TRACE_GATE, "send_refused", x->id, opi, refused, 0);
            continue;
        }
        bbe__envelope env = {.fills = fills, .n_fills = n_data, .corr_kind = corr,
                            .wire_req_id = wire_req_id};
        if (op->st->i2 > 0)
            env.deadline_ns = e->now_ns + (uint64_t)op->st->i2; /* absolute (bb_envelope.proto) */
        int rc = bbe__emit(e, &d->peers[i], d->direct ? &d->addr : NULL, d->direct ? 1 : 0, &env,
                      x->id);
        if (rc == BB_ENOTFOUND) {
            resolve_failed(e, opi, x, &d->peers[i]);
        } else if (rc) {
            r = bbe__fail(e, "out of memory sending");
            goto out;
        } else if (n_sent++ != i) {
            d->peers[n_sent - 1] = d->peers[i];
        }
    }
    if (d->n == 0)
        resolve_failed(e, opi, x, NULL);
    d->n = n_sent;
out:
    if (heap) {
        free(sfx);
        free(fills);
    }
    return r;
}

BBE__SYSCALL(bbe__sys_send)
{
    (void)out;
    dests d;
    int r = send_common(e, opi, x, in, 0, 0, &d);
    dests_free(&d);
    return r;
}

/* ---- request batches ---------------------------------------------------------------- */

static bbe__batch *batch_find(const bb_engine *e, uint64_t id)
{
    uint64_t p;
    return bbe__map_get(&e->batches, id, &p) ? (bbe__batch *)(uintptr_t)p : NULL;
}

bbe__batch *bbe__batch_get(const bb_engine *e, uint64_t id)
{
    return batch_find(e, id);
}

bbe__batch *bbe__batch_of_wire(const bb_engine *e, uint64_t wire_req_id)
{
    uint64_t id;
    return bbe__map_get(&e->batches_wire, wire_req_id, &id) ? batch_find(e, id) : NULL;
}

bool bbe__batch_pending(const bb_engine *e, uint64_t id)
{
    const bbe__batch *b = batch_find(e, id);
    return b && !b->done;
}

bbe__batch *bbe__batch_new(uint32_t expected)
{
    size_t n = expected ? expected : 1;
    size_t per = sizeof(bb_peerid) + 2 * sizeof(bb_value *) + sizeof(bool);
    if (n > (SIZE_MAX - sizeof(bbe__batch)) / per)
        return NULL;
    bbe__batch *b = bbe__zalloc(sizeof *b + n * per);
    if (!b)
        return NULL;
    /* pointer arrays first: after the struct they are aligned; a bb_peerid's
     * size is not a multiple of 8 */
    _Static_assert(sizeof(bbe__batch) % _Alignof(bb_value *) == 0, "batch arrays aligned");
    _Static_assert(_Alignof(bb_peerid) <= _Alignof(bb_value *), "cohort aligned");
    b->expected = expected;
    b->items = (bb_value **)(b + 1);
    b->peers = b->items + n;
    b->cohort = (bb_peerid *)(b->peers + n);
    b->answered = (bool *)(b->cohort + n);
    return b;
}

static void batch_free(bbe__batch *b)
{
    for (size_t i = 0; i < b->n_items; i++) {
        bb_value_unref(b->items[i]);
        bb_value_unref(b->peers[i]);
    }
    BBE__ARR_FREE(&b->waiters);
    bb_value_unref(b->result);
    free(b);
}

/* The batch's responses as one value: all of them, or none when they were
 * folded into their op as they landed. */
static bb_value *batch_result(bbe__batch *b)
{
    if (b->folding)
        return bb_value_response_batch(NULL, NULL, 0);
    /* the batch value copies the arrays and takes these refs */
    for (size_t i = 0; i < b->n_items; i++) {
        bb_value_ref(b->items[i]);
        bb_value_ref(b->peers[i]);
    }
    return bb_value_response_batch(b->items, b->peers, b->n_items);
}

/* why: the failure's message (NULL: the quorum was not met). */
static void batch_complete(bb_engine *e, bbe__batch *b, bool failed, const char *why)
{
    /* Waiters may live in the origin execution: keep it (and so b, which it
     * owns) alive until we are done with b. */
    bbe__exec *origin = b->x;
    origin->refs++;
    if (b->folding) /* its half-streamed responses end here (ABORT) */
        bbe__chunk_fold_batch_done(e, b->id);
    b->done = true;
    b->failed = failed;
    bbe__map_del(&e->batches_wire, b->wire_req_id);
    const bbe__op *op = &e->ops[b->op];
    if (!failed && !(b->result = batch_result(b)))
        failed = b->failed = true;
    char msg[BB_ERROR_MSG_MAX + 64];
    if (failed && why)
        snprintf(msg, sizeof msg, "batched request failed: a response was refused: %s", why);
    else
        snprintf(msg, sizeof msg, "batched request failed: quorum not met");
    if (failed && !why) {
        bbe__step_infra(e, BB_INFRA_QUORUM_FAILED, 0, NULL, b->n_items,
                       "%s: %zu of %u responses (quorum %u)", op->label, b->n_items, b->expected,
                       b->quorum);
        bbe__bus_publish(e, BB_EVENT_QUORUM_FAILED);
    }
    /* waiters (RecvRespBatched) */
    size_t nw = b->waiters.n;
    struct bbe__waiter *w = b->waiters.v;
    b->waiters.v = NULL;
    b->waiters.n = b->waiters.cap = 0;
    for (size_t i = 0; i < nw; i++) {
        if (failed) {
            bbe__park_fail(e, w[i].op, w[i].x, msg);
        } else {
            bb_value *o[2] = {bbe__trigger(e), bb_value_ref(b->result)};
            bbe__park_resume(e, w[i].op, w[i].x, o, 2);
        }
    }
    free(w);
    /* the SendReqBatched responses output */
    if (b->holds_ref) {
        b->holds_ref = false;
        if (failed)
            bbe__op_failed(e, b->op, origin, msg);
        else if (op->n_out > 1 && op->out[1] != BBE__NONE)
            bbe__write(e, origin, op->out[1], bb_value_ref(b->result), 0);
        origin->refs--; /* the batch's own hold; ours keeps the count above 0 */
    }
    bbe__exec_unref(e, origin); /* may free b through bbe__exec_drop_batches */
}

BBE__SYSCALL(bbe__sys_send_req)
{
    const bbe__op *op = &e->ops[opi];
    uint64_t wire_id = e->next_wire_req++;
    if (!wire_id)
        wire_id = e->next_wire_req++;
    dests d;
    int r = send_common(e, opi, x, in, 1, wire_id, &d);
    size_t n_sent = d.n;
    bbe__batch *b = r == BBE__R_DONE && n_sent <= UINT32_MAX ? bbe__batch_new((uint32_t)n_sent) : NULL;
    if (b && n_sent)
        memcpy(b->cohort, d.peers, n_sent * sizeof *d.peers);
    dests_free(&d);
    if (r != BBE__R_DONE)
        return r;
    if (!b)
        return bbe__fail(e, "out of memory");
    b->id = e->next_req++;
    b->wire_req_id = wire_id;
    b->op = opi;
    b->x = x;
    int64_t q = op->st->i;
    b->quorum = q < 0 || q > (int64_t)n_sent ? (uint32_t)n_sent : (uint32_t)q;
    out[0] = bb_value_u64(&BB_TYPE_REQUEST_ID, b->id);
    if (!out[0] || bbe__map_put(&e->batches, b->id, (uint64_t)(uintptr_t)b) ||
        bbe__map_put(&e->batches_wire, wire_id, b->id)) {
        bbe__map_del(&e->batches, b->id);
        batch_free(b);
        return bbe__fail(e, "out of memory");
    }
    b->next_in_exec = x->batches;
    x->batches = b;
    if (op->n_out > 1 && op->out[1] != BBE__NONE) {
        b->holds_ref = true;
        x->refs++;
    }
    if (op->st->i2 > 0)
        bbe__timer_add(e, e->now_ns + (uint64_t)op->st->i2, BBE__T_BATCH_DEADLINE, opi, 0, b->id, NULL);
    if (n_sent == 0) /* nobody to wait for */
        batch_complete(e, b, b->quorum > 0, NULL);
    return BBE__R_DONE;
}

static int fold_response(bb_engine *e, const bbe__batch *b, bb_value *item, bb_value *peer,
                         bb_error *err);

/* The batch's first waiter folds its responses: what landed before is
 * handed on now. BB_OK, or the first refusal (the rest are dropped). */
static int batch_start_folding(bb_engine *e, bbe__batch *b, uint32_t fold_op, bb_error *err)
{
    b->folding = true;
    b->fold_op = fold_op;
    int rc = BB_OK;
    for (size_t i = 0; i < b->n_items; i++) {
        if (!rc)
            rc = fold_response(e, b, b->items[i], b->peers[i], err);
        bb_value_unref(b->items[i]);
        bb_value_unref(b->peers[i]);
        b->items[i] = b->peers[i] = NULL;
    }
    return rc;
}

static int folded_elsewhere(bb_engine *e, const bbe__batch *b)
{
    const bbe__op *c = &e->ops[b->fold_op];
    return bbe__fail(e, "RecvRespBatched: the responses of request %llu are folded into %s/%s as "
                        "they land; a second reader cannot have them",
                     (unsigned long long)b->id, e->comps[c->comp].slot, c->op_type);
}

BBE__SYSCALL(bbe__sys_recv_resp)
{
    (void)out;
    if (!in[0] || !in[0]->type || in[0]->type->kind != BB_VK_U64)
        return bbe__fail(e, "RecvRespBatched: req_id is not a RequestId");
    bbe__batch *b = batch_find(e, in[0]->u.u64);
    if (!b)
        return bbe__fail(e, "RecvRespBatched: unknown request id %llu",
                        (unsigned long long)in[0]->u.u64);
    if (b->folding)
        return folded_elsewhere(e, b);
    if (b->done) {
        if (b->failed)
            return bbe__fail(e, "batched request failed: quorum not met");
        out[0] = bbe__trigger(e);
        out[1] = bb_value_ref(b->result);
        return BBE__R_DONE;
    }
    if (BBE__ARR_PUSH(&b->waiters, ((struct bbe__waiter){opi, x})))
        return bbe__fail(e, "out of memory");
    const bbe__opst *st = e->ops[opi].st;
    if (st && st->fold_op != BBE__NONE && b->waiters.n == 1 && !bbe__batch_read_whole(e, b)) {
        bb_error err;
        if (batch_start_folding(e, b, st->fold_op, &err)) {
            b->waiters.n = 0;
            b->done = b->failed = true;
            bbe__map_del(&e->batches_wire, b->wire_req_id);
            return bbe__fail(e, "batched request failed: a response was refused: %s", err.msg);
        }
    }
    bbe__park_begin(e, x);
    return BBE__R_ASYNC;
}

bool bbe__batch_read_whole(const bb_engine *e, const bbe__batch *b)
{
    const bbe__opst *st = e->ops[b->op].st;
    return !st || st->responses_read;
}

void bbe__batch_deadline(bb_engine *e, uint64_t id)
{
    bbe__batch *b = batch_find(e, id);
    if (!b || b->done)
        return;
    for (uint32_t i = 0; i < b->expected; i++)
        if (!b->answered[i])
            bbe__peer_failure(e, &b->cohort[i]);
    batch_complete(e, b, b->n_items < b->quorum, NULL);
}

void bbe__exec_drop_batches(bb_engine *e, bbe__exec *x)
{
    bbe__batch *b = x->batches;
    x->batches = NULL;
    while (b) {
        bbe__batch *next = b->next_in_exec;
        if (!b->done) {
            bbe__map_del(&e->batches_wire, b->wire_req_id);
            for (size_t i = 0; i < b->waiters.n; i++)
                bbe__park_fail(e, b->waiters.v[i].op, b->waiters.v[i].x,
                              "batched request abandoned by its execution");
        }
        bbe__map_del(&e->batches, b->id);
        batch_free(b);
        b = next;
    }
}

/* ---- SendResp ------------------------------------------------------------------------ */

BBE__SYSCALL(bbe__sys_send_resp)
{
    (void)out;
    const bbe__op *op = &e->ops[opi];
    const bb_value *rid = in[op->n_in - 1];
    if (!rid || !rid->type || rid->type->kind != BB_VK_U64)
        return bbe__fail(e, "SendResp: req_id is not a RequestId");
    bbe__inreq *rq = inreq_find(e, rid->u.u64);
    if (!rq)
        return bbe__fail(e, "SendResp: unknown or expired request id %llu",
                        (unsigned long long)rid->u.u64);
    if (!in[0])
        return bbe__fail(e, "SendResp: data is absent");
    /* Responses are self-describing: a one-child Composite carries the
     * child's wire hash, so the requester decodes without a site type.
     * Written as that Composite's head and the child (no Composite made). */
    size_t plen;
    bb_error err;
    int rc = bb_value_encoded_size(in[0], &plen, &err);
    if (rc)
        return bbe__fail(e, "SendResp: cannot encode data: %s", err.msg);
    uint8_t sfx[16];
    size_t sl = site_suffix(e, rq->site, sfx);
    bbe__fill f = {.suffix = sfx, .suffix_len = sl, .value = in[0]};
    f.wrap_head_len = (uint8_t)bb_value_wrap_head(in[0], plen, f.wrap_head);
    f.payload_len = f.wrap_head_len + plen;
    bbe__envelope env = {.fills = &f, .n_fills = 1, .corr_kind = 2, .wire_req_id = rq->wire_req_id,
                        .echo_sent_at_ns = rq->sent_at_ns,
                        .echo_delay_ns = e->now_ns - rq->recv_at_ns};
    bb_peerid peer = rq->peer;
    bbe__map_del(&e->inreq_map, rq->id);
    rc = bbe__emit(e, &peer, NULL, 0, &env, x->id);
    if (rc == BB_ENOTFOUND)
        resolve_failed(e, opi, x, &peer);
    else if (rc)
        return bbe__fail(e, "SendResp: out of memory");
    return BBE__R_DONE;
}

/* ---- install-time parsing ---------------------------------------------------------------- */

static bool parse_u64(const char *s, size_t n, uint64_t *out)
{
    if (!n || n > 20)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* "<u64>" or "<function>/<value>" (hashed like the receiver hashes its sites). */
uint64_t bbe__site_wire_id(const char *fn_name, const char *value)
{
    size_t a = strlen(fn_name), b = strlen(value);
    char stack[256];
    char *buf = a + b + 2 <= sizeof stack ? stack : malloc(a + b + 2);
    if (!buf)
        return 0;
    memcpy(buf, fn_name, a);
    buf[a] = '/';
    memcpy(buf + a + 1, value, b);
    uint64_t h = bb_fnv1a64(buf, a + b + 1);
    if (buf != stack)
        free(buf);
    return h;
}

/* FNV-1a-64 of "port:<port>" (docs/DECISIONS.md "Wire routing"). */
uint64_t bbe__port_wire_id(const char *port)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const char *p = "port:"; *p; p++)
        h = (h ^ (uint8_t)*p) * 0x100000001b3ULL;
    for (const char *p = port; *p; p++)
        h = (h ^ (uint8_t)*p) * 0x100000001b3ULL;
    return h;
}

BBE__SYSINIT(bbe__init_send)
{
    bbe__opst *st = bbe__opst_new(ins, op);
    if (!st)
        return BB_ENOMEM;
    bool found;
    st->i = bbe__attr_int(op->node, "quorum", -1, &found);
    st->i2 = bbe__attr_int(op->node, BB_ATTR_NAME_DEADLINE_NS, 0, &found);
    op->deadline_ns = 0; /* the deadline bounds the envelope / batch, not a suspension */
    const char *to = bb_kv_get(&op->node->metadata, BB_META_WIRE_TRANSPORT);
    st->trigger_only = to && strcmp(to, BB_WIRE_TRANSPORT_TRIGGER_ONLY) == 0;
    const char *ds = bb_kv_get(&op->node->metadata, BB_META_WIRE_DEST_SITE);
    if (strcmp(op->op_type, "SendResp") == 0)
        return 0;
    if (!ds) {
        const char *port = bb_kv_get(&op->node->metadata, BB_META_PORT);
        if (!port || !port[0])
            return 0;
        uint32_t n_data = op->n_in - 1;
        st->dest_sites = bb_arena_calloc(bbe__install_arena(ins), n_data, sizeof *st->dest_sites);
        if (!st->dest_sites)
            return BB_ENOMEM;
        for (uint32_t i = 0; i < n_data; i++) {
            if (n_data == 1) {
                st->dest_sites[i] = bbe__port_wire_id(port);
            } else {
                char *p = bb_arena_sprintf(bbe__install_arena(ins), "%s#%u", port, i);
                if (!p)
                    return BB_ENOMEM;
                st->dest_sites[i] = bbe__port_wire_id(p);
            }
        }
        st->n_dest_sites = n_data;
        return 0;
    }
    uint32_t n = 1;
    for (const char *p = ds; *p; p++)
        n += *p == ',';
    if (n > 4096)
        return bbe__node_malformed(ins, op, err, "too many %s entries", BB_META_WIRE_DEST_SITE);
    st->dest_sites = bb_arena_calloc(bbe__install_arena(ins), n, sizeof *st->dest_sites);
    if (!st->dest_sites)
        return BB_ENOMEM;
    const char *p = ds;
    for (uint32_t i = 0; i < n; i++) {
        size_t len = strcspn(p, ",");
        while (len && *p == ' ')
            p++, len--;
        while (len && p[len - 1] == ' ')
            len--;
        uint64_t v;
        if (parse_u64(p, len, &v)) {
            st->dest_sites[i] = v;
        } else {
            const char *slash = memchr(p, '/', len);
            if (!slash || slash == p || slash == p + len - 1)
                return bbe__node_malformed(ins, op, err, "bad %s entry '%.*s'",
                                          BB_META_WIRE_DEST_SITE, (int)len, p);
            char *fn = bb_arena_strndup(bbe__install_arena(ins), p, (size_t)(slash - p));
            char *val = bb_arena_strndup(bbe__install_arena(ins), slash + 1,
                                         len - (size_t)(slash - p) - 1);
            if (!fn || !val)
                return BB_ENOMEM;
            st->dest_sites[i] = bbe__site_wire_id(fn, val);
        }
        p += strcspn(p, ",");
        if (*p == ',')
            p++;
    }
    st->n_dest_sites = n;
    uint32_t n_data = op->n_in - 1;
    if (strcmp(op->op_type, "SendResp") != 0 && n != n_data)
        return bbe__node_malformed(ins, op, err, "%u data inputs but %u %s entries", n_data, n,
                                  BB_META_WIRE_DEST_SITE);
    return 0;
}

uint32_t bbe__install_comp_by_slot_id(bbe__install *ins, uint32_t slot_id);
int bbe__install_set_out_type(bbe__install *ins, bbe__op *op, uint32_t k, const bb_type_node *t);

BBE__SYSINIT(bbe__init_recv)
{
    bbe__opst *st = bbe__opst_new(ins, op);
    if (!st)
        return BB_ENOMEM;
    st->comp = BBE__NONE;
    const char *ws = bb_kv_get(&op->node->metadata, BB_META_WIRE_SITE);
    const char *port = bb_kv_get(&op->node->metadata, BB_META_PORT);
    if (ws) {
        if (!parse_u64(ws, strlen(ws), &st->wire_site))
            return bbe__node_malformed(ins, op, err, "bad %s '%s'", BB_META_WIRE_SITE, ws);
    } else if (port && port[0]) {
        st->wire_site = bbe__port_wire_id(port);
    } else {
        const bb_node *n = op->node;
        const char *v = n->outputs.n > 1 && n->outputs.v[1] && n->outputs.v[1][0]
                            ? n->outputs.v[1]
                            : n->outputs.v[0];
        st->wire_site = bbe__site_wire_id(bbe__install_fn_name(ins, op), v ? v : "");
    }
    const char *rs = bb_kv_get(&op->node->metadata, BB_META_RECV_SLOT_ID);
    if (rs) {
        uint64_t sid;
        if (!parse_u64(rs, strlen(rs), &sid) || sid > UINT32_MAX)
            return bbe__node_malformed(ins, op, err, "bad %s '%s'", BB_META_RECV_SLOT_ID, rs);
        st->comp = bbe__install_comp_by_slot_id(ins, (uint32_t)sid);
        if (st->comp == BBE__NONE)
            return bbe__node_malformed(ins, op, err, "%s %llu names no bound slot",
                                      BB_META_RECV_SLOT_ID, (unsigned long long)sid);
    }
    for (size_t i = 0; i < op->node->attrs.n; i++) {
        const bb_attr *a = op->node->attrs.v[i];
        if (a->name && strcmp(a->name, "payload_type") == 0 && a->type == BB_ATTR_TYPE_PROTO &&
            a->tp && op->n_out > 1) {
            const bb_type_node *t = bb_type_from_proto(a->tp);
            if (t && bbe__install_set_out_type(ins, op, 1, t))
                return BB_ENOMEM;
        }
    }
    if (op->n_out > 0)
        bbe__install_set_out_type(ins, op, 0, &BB_TYPE_TRIGGER);
    if ((op->flags & BBE__OPF_RECV_REQ) && op->n_out > 2)
        bbe__install_set_out_type(ins, op, 2, &BB_TYPE_REQUEST_ID);
    return 0;
}

/* ---- inbound ---------------------------------------------------------------------------- */

static void sub_free(void *ctx, uint8_t *data, size_t len)
{
    (void)data, (void)len;
    bb_buffer_unref(ctx);
}

static bb_buffer *sub_buffer(bb_buffer *parent, const uint8_t *data, size_t len)
{
    bb_buffer *b = bb_buffer_wrap((uint8_t *)data, len, sub_free, parent);
    if (b)
        bb_buffer_ref(parent);
    return b;
}

void bbe__rx_error(bb_engine *e, const bb_peerid *src, bb_wire_rx_error kind, const char *fmt,
                   const char *a, const char *b)
{
    e->c[BBE__C_WIRE_RX_ERRORS]++;
    bbe__step_infra(e, BB_INFRA_WIRE_RECEIVE_ERROR, kind, src, 0, fmt, a, b);
    bbe__bus_publish(e, BB_EVENT_WIRE_RECEIVE_ERROR);
}

/* Decode one fill payload for a site of type t. 0, or the bb_wire_rx_error. */
static int decode_payload(bb_engine *e, const bbe__fill *f, const bb_type_node *t, uint32_t comp,
                          bb_buffer *buf, bb_value **out, char *why, size_t why_len)
{
    *out = NULL;
    if (f->trigger_only || t->kind == BB_VK_TRIGGER) {
        *out = bbe__trigger(e);
        return 0;
    }
    bb_error err;
    bb_error_clear(&err);
    /* one value is at most what one envelope may be: the node's cap, which
     * a node moving large models raises past the library default */
    bb_decode_limits lim = BB_DECODE_LIMITS_DEFAULT;
    lim.max_bytes = e->caps.max_envelope_bytes;
    int rc;
    if (comp != BBE__NONE && (t->kind == BB_VK_TENSOR || t == &BB_TYPE_TENSOR) &&
        e->comps[comp].type->materialize_from_wire) {
        bbe__comp *c = &e->comps[comp];
        bb_buffer *sb = sub_buffer(buf, f->payload, f->payload_len);
        if (!sb)
            return BB_WIRE_RX_ALLOCATION_FAILED;
        rc = c->type->materialize_from_wire(c->inst, t->wire_hash, sb, out, &err);
        bb_buffer_unref(sb);
        if (rc || !*out) {
            snprintf(why, why_len, "%.200s", err.msg[0] ? err.msg : "materialize_from_wire failed");
            bb_value_unref(*out);
            *out = NULL;
            return BB_WIRE_RX_BACKEND_MATERIALIZE_FAILED;
        }
    } else if (t == &BB_TYPE_ANY || t->kind == BB_VK_ABSTRACT) {
        if (t == &BB_TYPE_TENSOR) {
            bb_buffer *sb = sub_buffer(buf, f->payload, f->payload_len);
            if (!sb)
                return BB_WIRE_RX_ALLOCATION_FAILED;
            rc = bb_value_decode_tensor_buf(sb, &lim, out, &err);
            bb_buffer_unref(sb);
        } else { /* untyped site: the raw bytes */
            *out = bb_value_bytes(&BB_TYPE_BYTES, f->payload, f->payload_len);
            rc = *out ? 0 : BB_ENOMEM;
        }
        if (rc)
            goto decode_failed;
    } else {
        if (!bb_type_by_wire_hash(t->wire_hash)) {
            snprintf(why, why_len, "no decoder for type hash 0x%016llx",
                     (unsigned long long)t->wire_hash);
            return BB_WIRE_RX_UNKNOWN_TYPE_HASH;
        }
        if (f->payload_len >= LARGE_PAYLOAD) {
            bb_buffer *sb = sub_buffer(buf, f->payload, f->payload_len);
            if (!sb)
                return BB_WIRE_RX_ALLOCATION_FAILED;
            rc = bb_value_decode_buf(t->wire_hash, sb, &lim, out, &err);
            bb_buffer_unref(sb);
        } else {
            rc = bb_value_decode(t->wire_hash, f->payload, f->payload_len, &lim, out, &err);
        }
        if (rc)
            goto decode_failed;
    }
    if (t != &BB_TYPE_ANY && !bb_type_is_a((*out)->type, t)) {
        snprintf(why, why_len, "got %s, site expects %s", (*out)->type->name, t->name);
        bb_value_unref(*out);
        *out = NULL;
        return BB_WIRE_RX_TYPE_MISMATCH;
    }
    return 0;
decode_failed:
    snprintf(why, why_len, "%.200s", err.msg[0] ? err.msg : "decode failed");
    if (rc == BB_ENOMEM)
        return BB_WIRE_RX_ALLOCATION_FAILED;
    /* a child carrier this build does not know (Composite / batch items) */
    return strstr(err.msg, "unknown type hash") ? BB_WIRE_RX_UNKNOWN_TYPE_HASH
                                                 : BB_WIRE_RX_DECODE_FAILED;
}

typedef struct inbound_ctx {
    bb_engine *e;
    const bb_peerid *src;
    uint64_t src_hash;    /* bbe__hash_bytes of src, when src_hashed */
    bool src_hashed;      /* the peer table had it: not hashed again per envelope */
    const bbe__envelope *env;
    const uint8_t *bytes; /* the envelope's, for its dedup key */
    size_t len;
    uint64_t env_hash; /* made with the first frame: a response needs none */
    bool hashed;
    bb_exec_id exec;
    bbe__exec *frames[8]; /* one frame per graph touched by this envelope */
    uint32_t n_frames;
    bb_buffer *buf;
} inbound_ctx;

static bbe__exec *frame_for(inbound_ctx *c, bbe__graph *g)
{
    for (uint32_t i = 0; i < c->n_frames; i++)
        if (c->frames[i]->g == g)
            return c->frames[i];
    bb_engine *e = c->e;
    if (!c->exec)
        c->exec = bbe__exec_id_new(e);
    bbe__exec *x = bbe__exec_new(e, g, c->exec);
    if (!x)
        return NULL;
    if (!c->hashed) {
        uint64_t src_hash = c->src_hashed ? c->src_hash
                                          : bbe__hash_bytes(c->src->bytes, c->src->len);
        c->env_hash = bbe__envelope_dedup_key(src_hash, c->bytes, c->len, c->env);
        c->hashed = true;
    }
    bbe__inbound *in = bbe__exec_set_inbound(x);
    in->src = *c->src;
    in->env_hash = c->env_hash;
    in->deadline_ns = c->env->deadline_ns;
    if (c->n_frames == sizeof c->frames / sizeof c->frames[0]) {
        /* rare: many graphs in one envelope; release the oldest seed ref */
        bbe__exec_unref(e, c->frames[0]);
        memmove(c->frames, c->frames + 1, (c->n_frames - 1) * sizeof c->frames[0]);
        c->n_frames--;
    }
    c->frames[c->n_frames++] = x;
    return x;
}

static void deliver_site_fill(inbound_ctx *c, const bbe__fill *f, uint64_t site_id)
{
    bb_engine *e = c->e;
    uint64_t v;
    uint32_t opi = BBE__NONE, site;
    bbe__graph *g;
    if (bbe__map_get(&e->recv_ops, site_id, &v)) {
        opi = (uint32_t)v;
        const bbe__op *op = &e->ops[opi];
        g = &e->graphs[op->graph];
        site = op->n_out > 1 ? op->out[1] : BBE__NONE;
    } else if (bbe__map_get(&e->wire_sites, site_id, &v)) {
        g = &e->graphs[v >> 32];
        site = (uint32_t)v;
    } else {
        e->c[BBE__C_UNROUTABLE]++;
        if (BBE__TRACING(e, BB_TRACE_INBOUND))
            bbe__trace(e, BB_TRACE_INBOUND, "deliver_fill", 0, BBE__NONE, "unknown /site id", site_id);
        return;
    }
    e->c[BBE__C_FILLS_IN]++;
    if (!bbe__budget_charge(e, f->payload_len)) {
        char n[32];
        snprintf(n, sizeof n, "%zu", f->payload_len);
        bbe__rx_error(e, c->src, BB_WIRE_RX_BUDGET_EXCEEDED,
                 "fill of %s bytes for %s exceeds the ingress byte budget", n,
                 site == BBE__NONE ? e->ops[opi].label : g->site_names[site]);
        return;
    }
    bb_value *val = NULL;
    char why[256];
    why[0] = '\0';
    if (site != BBE__NONE) {
        uint32_t comp = opi != BBE__NONE ? e->ops[opi].st->comp : BBE__NONE;
        int k = decode_payload(e, f, g->site_type[site], comp, c->buf, &val, why, sizeof why);
        if (k) {
            bbe__budget_release(e, f->payload_len);
            bbe__rx_error(e, c->src, (bb_wire_rx_error)k, "fill for site %s: %s", g->site_names[site],
                     why);
            return;
        }
    }
    bbe__exec *x = frame_for(c, g);
    if (!x) {
        bb_value_unref(val);
        bbe__budget_release(e, f->payload_len);
        bbe__rx_error(e, c->src, BB_WIRE_RX_ALLOCATION_FAILED, "fill for %s: %s", g->name,
                 "out of memory");
        return;
    }
    if (BBE__TRACING(e, BB_TRACE_INBOUND))
        bbe__trace(e, BB_TRACE_INBOUND, "deliver_fill", x->id, opi, "data", site_id);
    if (opi == BBE__NONE) {
        bbe__write(e, x, site, val, f->payload_len);
        return;
    }
    const bbe__op *op = &e->ops[opi];
    bbe__write(e, x, op->out[0], bbe__trigger(e), 0);
    if (val) {
        if (f->trigger_only && op->n_out > 1) {
            bb_value_unref(val); /* trigger-only edge: the payload never flows */
            bbe__budget_release(e, f->payload_len);
        } else {
            bbe__write(e, x, site, val, f->payload_len);
        }
    } else {
        bbe__budget_release(e, f->payload_len);
    }
    if ((op->flags & BBE__OPF_RECV_REQ) && op->n_out > 2 && op->out[2] != BBE__NONE) {
        uint64_t id = inreq_open(e, c->src, c->env->corr_kind == 1 ? c->env->wire_req_id : 0,
                                 site_id, c->env->sent_at_ns);
        bb_value *rid = id ? bb_value_u64(&BB_TYPE_REQUEST_ID, id) : NULL;
        if (rid)
            bbe__write(e, x, op->out[2], rid, 0);
    }
}

/* Dispatch op decl (index idx of domain) of component comp outside any
 * frame: its outputs go nowhere. A dispatch that returns LATER keeps an
 * HK_FILL handle, whose failure is reported like an immediate one
 * (bbe__completion_process); *later says so. BB_OK, or the failure in err
 * (not reported here). */
static int dispatch_detached(bb_engine *e, uint32_t comp, const char *domain,
                             const bb_op_decl *decl, uint32_t idx, const bb_node *node,
                             bb_value **ins, uint32_t n_in, bool *later, bb_error *err)
{
    bbe__comp *c = &e->comps[comp];
    uint32_t n_out = decl->n_outputs;
    bb_value **outs = bbe__zalloc((n_out ? n_out : 1) * sizeof *outs);
    bbe__handle *h = bbe__handle_new(e, BBE__HK_FILL);
    *later = false;
    int rc = BB_OK;
    if (!outs || !h) {
        rc = bb_error_set(err, BB_ENOMEM, "%s/%s: out of memory", c->slot, decl->op_type);
    } else {
        bb_dispatch_call call = {.domain = domain ? domain : "", .op_type = decl->op_type,
                                 .op_index = idx, .inputs = ins, .n_inputs = n_in,
                                 .n_outputs = n_out, .node = node, .completion = &h->pub};
        h->comp = comp;
        h->fill_decl = decl;
        h->fill_domain = domain;
        bb_error_clear(err);
        bb_dispatch_result r = c->type->dispatch(c->inst, &c->ctx.pub, &call, outs, err);
        if (r == BB_DISPATCH_NOW_ERR)
            rc = err->code ? err->code : BB_ERUNTIME;
        if (r == BB_DISPATCH_NOW_ERR && !err->msg[0])
            bb_error_set(err, rc, "%s/%s failed", c->slot, decl->op_type);
        *later = r == BB_DISPATCH_LATER;
        for (uint32_t j = 0; j < n_out; j++)
            bb_value_unref(outs[j]);
    }
    if (h && !*later) {
        bbe__handle_drop(e, h);
        bbe__handle_retire(e, h);
    }
    free(outs);
    return rc;
}

/* ---- responses folded as they land ------------------------------------------------
 *
 * A RecvRespBatched whose responses one op reads — a component op whose
 * role contract folds a ResponseBatch response by response
 * (bb_role_op_folds_responses: Aggregator.Contribute) and which reads
 * nothing else — and that otherwise only trigger ops that never read them
 * (a Clock), is marked at install (st->fold_op). When it parks on a
 * batch that nothing else reads, the batch folds: each response is handed
 * to that op as it lands — a one-element ResponseBatch with the batch's
 * RequestId as metadata — and then dropped, so a round holds what the
 * component keeps (one running model for FedAvg), not every response.
 * The batch completes as before (all answered, or the deadline with its
 * quorum) with an EMPTY ResponseBatch, so the op runs once more in its
 * frame and returns what a whole batch would have (the contributions in
 * the round). A response the op refuses fails the batch at once, with the
 * op's message: the round fails as if the op had refused the whole batch.
 * ENGINE.md has one delivery per batch; docs/DECISIONS.md records the
 * deviation. */

/* Whether anything reads output k of op (a consumer, or the graph's caller
 * or host). */
static bool output_read(const bbe__graph *g, const bbe__op *op, uint32_t k)
{
    uint32_t s = op->n_out > k ? op->out[k] : BBE__NONE;
    return s != BBE__NONE && ((g->site_flags[s] & (BBE__SITE_FWD | BBE__SITE_APP_OUT)) ||
                              g->cons_off[s + 1] > g->cons_off[s]);
}

/* Install, once the graph's consumers are known: whether a SendReqBatched's
 * own responses output is read (then its batches never fold), and which op
 * folds the responses of a RecvRespBatched (st->fold_op): the one op that
 * reads them, beside ops they only trigger (the clock a round stamps when
 * its answers are in), which see the empty batch. */
int bbe__install_fold_target(bb_engine *e, const bbe__graph *g, bbe__op *op, bbe__opst *st)
{
    st->fold_op = BBE__NONE;
    if (op->fn == bbe__sys_send_req) {
        st->responses_read = output_read(g, op, 1);
        return 0;
    }
    uint32_t s = op->n_out > 1 ? op->out[1] : BBE__NONE;
    if (s == BBE__NONE || (g->site_flags[s] & (BBE__SITE_FWD | BBE__SITE_APP_OUT)))
        return 0;
    uint32_t fold = BBE__NONE;
    for (uint32_t i = g->cons_off[s]; i < g->cons_off[s + 1]; i++) {
        uint32_t k = g->cons[i];
        const bbe__op *c = &e->ops[k];
        if (c->disp == BBE__DISP_SYSCALL && (c->flags & BBE__OPF_TRIGGER_IN))
            continue;
        if (fold != BBE__NONE || c->disp != BBE__DISP_ATOMIC || c->n_in < 1 || c->in[0] != s ||
            !bb_role_op_folds_responses(c->domain, c->op_type))
            return 0;
        for (uint32_t j = 1; j < c->n_in; j++)
            if (c->in[j] != BBE__NONE)
                return 0; /* it reads something else: it runs once, in its frame */
        fold = k;
    }
    st->fold_op = fold;
    return 0;
}

/* Hand one response to the batch's fold op. BB_OK, or why it was refused. */
static int fold_response(bb_engine *e, const bbe__batch *b, bb_value *item, bb_value *peer,
                         bb_error *err)
{
    const bbe__op *c = &e->ops[b->fold_op];
    const bb_component_type *t = e->comps[c->comp].type;
    uint32_t idx = 0;
    const bb_op_decl *decl = bb_component_type_find_op(t, c->domain, c->op_type, &idx);
    for (uint32_t s = 0; !decl && s < t->n_opsets; s++) /* as install resolved it */
        decl = bb_component_type_find_op(t, t->opsets[s].domain, c->op_type, &idx);
    if (!decl)
        return bb_error_set(err, BB_ESTATE, "%s: no op %s", e->comps[c->comp].slot, c->op_type);
    bb_value *one = bb_value_response_batch((bb_value *[]){bb_value_ref(item)},
                                            (bb_value *[]){bb_value_ref(peer)}, 1);
    bb_value *ins[2] = {one, bb_value_u64(&BB_TYPE_REQUEST_ID, b->id)};
    bool later = false;
    int rc = ins[0] && ins[1] ? dispatch_detached(e, c->comp, c->domain, decl, c->op_index,
                                                  c->node, ins, 2, &later, err)
                              : bb_error_set(err, BB_ENOMEM, "out of memory");
    bb_value_unref(ins[0]);
    bb_value_unref(ins[1]);
    e->c[BBE__C_RESPONSES_FOLDED] += !rc;
    if (!rc && later)
        rc = bb_error_set(err, BB_EUNSUPPORTED,
                          "%s/%s answered later; an op that folds responses must answer at once",
                          e->comps[c->comp].slot, c->op_type);
    return rc;
}

/* The sender answered: what deliver_response does before the response
 * goes anywhere. */
static void response_heard(bb_engine *e, bbe__batch *b, uint32_t who, const bb_peerid *src)
{
    b->answered[who] = true;
    bbe__peer_success(e, src);
    bbe__bus_publish(e, BB_EVENT_WIRE_RESPONSE_LANDED);
}

/* One more response counted; refused: why its op refused it. */
static void response_counted(bb_engine *e, bbe__batch *b, const char *refused)
{
    b->n_items++;
    if (refused)
        batch_complete(e, b, true, refused);
    else if (b->n_items == b->expected)
        batch_complete(e, b, false, NULL);
}

void bbe__batch_response_landed(bb_engine *e, bbe__batch *b, uint32_t who, const bb_peerid *src,
                                const char *refused)
{
    response_heard(e, b, who, src);
    e->c[BBE__C_FILLS_IN]++;
    e->c[BBE__C_RESPONSES_FOLDED] += !refused;
    response_counted(e, b, refused);
}

void bbe__batch_refused(bb_engine *e, bbe__batch *b, const char *why)
{
    if (!b->done)
        batch_complete(e, b, true, why);
}

uint32_t bbe__batch_cohort_index(const bbe__batch *b, const bb_peerid *src)
{
    for (uint32_t i = 0; i < b->expected; i++)
        if (!b->answered[i] && bb_peerid_equal(&b->cohort[i], src))
            return i;
    return UINT32_MAX;
}

static void deliver_response(inbound_ctx *c)
{
    bb_engine *e = c->e;
    bbe__batch *b = bbe__batch_of_wire(e, c->env->wire_req_id);
    if ((!b || b->done) && bbe__control_answer_in(e, c->src, c->env))
        return; /* the answer to a component's control-plane request */
    if (!b || b->done) {
        e->c[BBE__C_UNROUTABLE]++;
        bbe__step_infra(e, BB_INFRA_UNKNOWN_CORRELATION, 0, c->src, c->env->wire_req_id,
                       "response for no open request (wire_req_id %llu)",
                       (unsigned long long)c->env->wire_req_id);
        return;
    }
    uint32_t who = bbe__batch_cohort_index(b, c->src);
    if (who == UINT32_MAX || (b->folding && bbe__chunk_fold_busy(e, b->id, who))) {
        e->c[BBE__C_UNROUTABLE]++;
        return; /* not in the cohort, a duplicate answer, or one already streaming in */
    }
    if (c->env->n_fills < 1)
        return;
    const bbe__fill *f = &c->env->fills[0];
    e->c[BBE__C_FILLS_IN]++;
    if (!bbe__budget_charge(e, f->payload_len)) {
        bbe__rx_error(e, c->src, BB_WIRE_RX_BUDGET_EXCEEDED, "response of %s: %s", "request",
                 "exceeds the ingress byte budget");
        return;
    }
    bb_value *v = NULL;
    char why[256];
    why[0] = '\0';
    int k = decode_payload(e, f, &BB_TYPE_COMPOSITE, BBE__NONE, c->buf, &v, why, sizeof why);
    bbe__budget_release(e, f->payload_len);
    if (k) {
        bbe__rx_error(e, c->src, (bb_wire_rx_error)k, "response: %s%s", why, "");
        return;
    }
    bb_value *item = v;
    if (v->u.list.n == 1) {
        item = bb_value_ref(v->u.list.items[0]);
        bb_value_unref(v);
    }
    bbe__peer *sender = bbe__peer_find(e, c->src);
    bb_value *pv = sender ? bbe__peer_cached_id_value(sender) : bbe__peerid_value(c->src);
    if (!pv) {
        bb_value_unref(item);
        return;
    }
    response_heard(e, b, who, c->src);
    if (b->folding) { /* counted, handed on, not kept */
        bb_error err;
        int rc = fold_response(e, b, item, pv, &err);
        bb_value_unref(item);
        bb_value_unref(pv);
        response_counted(e, b, rc ? err.msg : NULL);
        return;
    }
    b->items[b->n_items] = item; /* room: each of `expected` answers once */
    b->peers[b->n_items] = pv;
    response_counted(e, b, NULL);
}

/* The sender's listen addresses and the address it was seen at go into
 * the book. Returns src's entry when one was looked up (the caller's
 * lookup of it then costs nothing), else NULL. */
static bbe__peer *merge_addresses(bb_engine *e, const bb_peerid *src, const bbe__envelope *env,
                                  const uint8_t *obs, size_t obs_len)
{
    bbe__peer *p = NULL;
    if (env->n_src) {
        p = bbe__peer_find(e, src);
        bool same = p && p->n_addrs == env->n_src;
        for (size_t i = 0; same && i < env->n_src; i++)
            same = p->addrs[i].len == env->src[i].len &&
                   memcmp(p->addrs[i].data, env->src[i].data, env->src[i].len) == 0;
        if (!same && (p = bbe__peer_get(e, src)))
            for (size_t i = 0; i < env->n_src; i++)
                bbe__peer_add_addr(e, p, env->src[i].data, env->src[i].len); /* caps swallowed */
    }
    if (obs && obs_len) {
        if (!p)
            p = bbe__peer_get(e, src);
        if (p)
            bbe__peer_add_addr(e, p, obs, obs_len);
    }
    return p;
}

static void deliver(bb_engine *e, const bb_peerid *src, const uint8_t *obs, size_t obs_len,
                    bb_buffer *buf, bool assembled);

/* Parse a received fill's suffix into sfx; a /site/<id> the last one
 * named is taken from e's one-entry cache without parsing again. */
static int fill_suffix(bb_engine *e, const bbe__fill *f, bb_suffix *sfx)
{
    if (f->suffix_len && f->suffix_len == e->rx_site_sfx_len &&
        memcmp(f->suffix, e->rx_site_sfx, f->suffix_len) == 0) {
        sfx->kind = BB_SUFFIX_SITE;
        sfx->site_id = e->rx_site_id;
        return BB_OK;
    }
    int rc = bb_suffix_parse(f->suffix, f->suffix_len, sfx, NULL);
    if (rc == BB_OK && sfx->kind == BB_SUFFIX_SITE && f->suffix_len <= sizeof e->rx_site_sfx) {
        memcpy(e->rx_site_sfx, f->suffix, f->suffix_len);
        e->rx_site_sfx_len = (uint8_t)f->suffix_len;
        e->rx_site_id = sfx->site_id;
    }
    return rc;
}

/* An envelope's deadline_ns is the sender's absolute time
 * (bb_envelope.proto), and clocks disagree by milliseconds to seconds: a
 * receiver whose clock runs ahead would drop every request. So the
 * deadline is moved onto this node's clock by the sender's offset, taken
 * as the least (arrival - sent_at_ns) seen from that peer over the last
 * BBE__CLOCK_OFFSET_WINDOW_NS: that is the clock offset plus the fastest
 * transit, so a deadline keeps its budget from send to arrival and an
 * envelope that took longer than the fastest one is charged the
 * difference (queues, retransmits). The window lets the estimate follow a
 * clock that was stepped back. Without a sent_at stamp the deadline is
 * taken as it is. docs/DECISIONS.md: "Deadlines across skewed clocks". */
#define BBE__CLOCK_OFFSET_WINDOW_NS (30ull * 1000000000ull)

static uint64_t local_deadline(bb_engine *e, bbe__peer *p, const bbe__envelope *env)
{
    if (!env->deadline_ns || !env->sent_at_ns)
        return env->deadline_ns;
    int64_t sample = (int64_t)(e->now_ns - env->sent_at_ns);
    int64_t offset = sample;
    if (p) {
        if (!p->clock_offset_at || sample < p->clock_offset_ns ||
            e->now_ns - p->clock_offset_at > BBE__CLOCK_OFFSET_WINDOW_NS) {
            p->clock_offset_ns = sample;
            p->clock_offset_at = e->now_ns ? e->now_ns : 1;
        }
        offset = p->clock_offset_ns;
    }
    /* unsigned arithmetic: stamps are the sender's to choose */
    uint64_t local = env->deadline_ns + (uint64_t)offset;
    if (offset >= 0 && local < env->deadline_ns)
        return UINT64_MAX;
    if (offset < 0 && (local > env->deadline_ns || local == 0))
        return 1; /* 0 would mean "none" */
    return local;
}

/* Not inlined: scripts/footprint counts one call of this function per
 * envelope a node receives (its round trips), and since it became a
 * one-line wrapper the LTO build folded it into its caller. */
__attribute__((noinline)) void bbe__deliver_envelope(bb_engine *e, const bb_peerid *src,
                                                     const uint8_t *obs, size_t obs_len,
                                                     bb_buffer *buf)
{
    deliver(e, src, obs, obs_len, buf, false);
}

void bbe__deliver_assembled(bb_engine *e, const bb_peerid *src, bb_buffer *buf)
{
    deliver(e, src, NULL, 0, buf, true);
}

static void deliver(bb_engine *e, const bb_peerid *src, const uint8_t *obs, size_t obs_len,
                    bb_buffer *buf, bool assembled)
{
    const uint8_t *bytes = buf->data;
    size_t len = buf->len;
    e->c[BBE__C_ENVELOPES_IN]++;
    bbe__envelope env;
    bb_error err;
    bb_error_clear(&err);
    bbe__env_limits lim = {e->caps.max_envelope_fills, e->caps.max_envelope_addresses};
    if (bbe__envelope_decode(bytes, len, &lim, &env, &err)) {
        e->c[BBE__C_WIRE_RX_ERRORS]++;
        bbe__step_infra(e, BB_INFRA_ENVELOPE_MALFORMED, 0, src, len, "%s", err.msg);
        bbe__bus_publish(e, BB_EVENT_WIRE_RECEIVE_ERROR);
        return;
    }
    if (BBE__TRACING(e, BB_TRACE_INBOUND))
        bbe__trace(e, BB_TRACE_INBOUND, "deliver_inbound", 0, BBE__NONE,
                  env.corr_kind == 2 ? "response" : env.corr_kind == 1 ? "request" : "none",
                  env.n_fills);
    bool self = bb_peerid_equal(src, &e->cfg.peer);
    bbe__peer *known = self ? NULL : merge_addresses(e, src, &env, obs, obs_len);
    if (env.chunk.present) { /* a piece of a stream, or an answer about one */
        if (!assembled && !self)
            bbe__stream_chunk(e, src, &env.chunk);
        else
            e->c[BBE__C_UNROUTABLE]++; /* a stream inside a stream: dropped */
        bbe__envelope_release(&env);
        return;
    }
    bbe__peer *from = NULL;
    if (!self) {
        bbe__peer *p = from = known ? known : bbe__peer_find(e, src);
        if (p) {
            if (env.sent_at_ns) {
                p->last_rx_sent_at = env.sent_at_ns;
                p->last_rx_at = e->now_ns;
            }
            if (env.echo_sent_at_ns && e->now_ns > env.echo_sent_at_ns + env.echo_delay_ns)
                p->rtt_ns = e->now_ns - env.echo_sent_at_ns - env.echo_delay_ns;
        }
    }
    env.deadline_ns = local_deadline(e, from, &env);
    inbound_ctx c = {.e = e, .src = src, .env = &env, .buf = buf, .bytes = bytes, .len = len,
                     .src_hash = from ? from->id_hash : 0, .src_hashed = from != NULL};
    if (env.corr_kind == 2) {
        deliver_response(&c);
    } else {
        uint64_t unroutable = e->c[BBE__C_UNROUTABLE];
        for (size_t i = 0; i < env.n_fills; i++) {
            const bbe__fill *f = &env.fills[i];
            bb_suffix sfx;
            if (fill_suffix(e, f, &sfx) != BB_OK) {
                e->c[BBE__C_UNROUTABLE]++; /* malformed suffix: dropped */
                continue;
            }
            if (sfx.kind == BB_SUFFIX_SITE)
                deliver_site_fill(&c, f, sfx.site_id);
            else
                bbe__deliver_control_fill(e, src, &env, f, &sfx);
        }
        /* ENGINE.md 6.2 drops these silently; one step per envelope (never
         * per fill) tells the host without letting a sender flood it */
        unroutable = e->c[BBE__C_UNROUTABLE] - unroutable;
        if (unroutable)
            bbe__step_infra(e, BB_INFRA_UNROUTABLE_FILL, 0, src, unroutable,
                           "%llu of %zu fills had no destination on this node",
                           (unsigned long long)unroutable, env.n_fills);
    }
    for (uint32_t i = 0; i < c.n_frames; i++)
        bbe__exec_unref(e, c.frames[i]);
    bbe__envelope_release(&env);
}

void bbe__drain_loopback(bb_engine *e)
{
    if (!e->loopback.n)
        return;
    size_t n = e->loopback.n;
    struct bbe__loop *l = e->loopback.v;
    e->loopback.v = NULL;
    e->loopback.n = e->loopback.cap = 0;
    for (size_t i = 0; i < n; i++) {
        bb_buffer *b = bb_buffer_adopt(l[i].bytes, l[i].len);
        if (!b) {
            free(l[i].bytes);
            continue;
        }
        bbe__deliver_envelope(e, &e->cfg.peer, NULL, 0, b);
        bb_buffer_unref(b);
    }
    free(l);
}

void bbe__flush_outbound(bb_engine *e)
{
    for (size_t i = 0; i < e->outbound.n; i++) {
        bb_step *st = bbe__step_push(e, BB_STEP_SEND_ENVELOPE, 0);
        if (!st) {
            bbe__steps_release(&e->outbound.v[i]);
            continue;
        }
        *st = e->outbound.v[i];
    }
    e->outbound.n = 0;
}

void bbe__wire_free(bb_engine *e)
{
    for (size_t i = 0; i < e->batches.cap; i++)
        if (e->batches.slots[i].state == BBE__MAP_FULL)
            batch_free((bbe__batch *)(uintptr_t)e->batches.slots[i].val);
    bbe__map_free(&e->batches);
    bbe__map_free(&e->batches_wire);
    bbe__map_free(&e->inreq_map);
    free(e->inreqs);
    e->inreqs = NULL;
    for (bbe__exec *x = e->live; x; x = x->next)
        x->batches = NULL;
}
