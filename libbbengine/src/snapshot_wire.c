/*
 * snapshot_wire.c — the snapshot sections of the wire opset's tables
 * (wire.c): "requests" (SendReqBatched batches waiting for their cohort),
 * "inbound_requests" (RecvReq requests not yet answered) and "loopback"
 * (envelopes this node sent itself, delivered next cycle).
 *
 * Their own file because wire.c is the message path, the engine's largest
 * file, read for what one envelope costs; these readers and writers run
 * once per snapshot and share nothing with it but the structures in
 * engine_internal.h.
 */
#include <stdlib.h>
#include <string.h>

#include "libbbengine/src/snapshot.h"
#include "libbbengine/src/syscalls.h"

#define MAX_COHORT 65536 /* a batch's members (bbe__batch_new takes a u32) */

/* ---- "requests": the local and wire request-id counters, then every batch:
 * ids, its SendReqBatched op and origin frame, cohort size and quorum, per
 * member its PeerId and whether it answered, the responses so far (value
 * and sender; none, written as absent values, when the batch folds them
 * into their op as they land), flags (done, failed, holds a reference on
 * its frame), the ops waiting for it, and its result. A batch folds when
 * its one waiter is a RecvRespBatched marked at install and nothing else
 * reads it (wire.c), so a restore derives that again from the waiter. */

static void write_batch(bbe__snap_out *o, const bbe__batch *b)
{
    bbe__snap_put_u(o, b->id);
    bbe__snap_put_u(o, b->wire_req_id);
    bbe__snap_put_u(o, b->op);
    bbe__snap_put_frame(o, b->x);
    bbe__snap_put_u(o, b->expected);
    bbe__snap_put_u(o, b->quorum);
    for (uint32_t k = 0; k < b->expected; k++) {
        bbe__snap_put_peer(o, &b->cohort[k]);
        bbe__snap_put_u(o, b->answered[k]);
    }
    bbe__snap_put_u(o, b->n_items);
    for (size_t k = 0; k < b->n_items; k++) {
        bbe__snap_put_value(o, b->items[k]);
        bbe__snap_put_value(o, b->peers[k]);
    }
    bbe__snap_put_u(o, (uint64_t)b->done | (uint64_t)b->failed << 1 | (uint64_t)b->holds_ref << 2);
    bbe__snap_put_waiters(o, b->waiters.v, b->waiters.n);
    bbe__snap_put_value(o, b->result);
}

int bbe__snap_write_requests(bb_engine *e, bbe__snap_out *o, bb_error *err)
{
    (void)err;
    bbe__snap_put_u(o, e->next_req);
    bbe__snap_put_u(o, e->next_wire_req);
    bbe__snap_put_u(o, e->batches.n);
    for (size_t i = 0; i < e->batches.cap; i++)
        if (e->batches.slots[i].state == BBE__MAP_FULL)
            write_batch(o, (const bbe__batch *)(uintptr_t)e->batches.slots[i].val);
    return BB_OK;
}

/* The members, responses, flags, waiters and result of b (linked into its
 * frame and the batch table already, so a failure frees it with them). */
static void read_batch_state(bb_engine *e, bbe__snap_in *in, bbe__batch *b)
{
    size_t answered = 0;
    for (uint32_t k = 0; k < b->expected && !in->r.failed; k++) {
        bbe__snap_peer(in, &b->cohort[k]);
        b->answered[k] = bbe__snap_flag(in);
        answered += b->answered[k];
    }
    /* one response per member that answered: the arrays have room for the
     * rest of the cohort's answers, no more */
    size_t at = in->r.pos;
    size_t n = bbe__snap_count(in, b->expected, "more responses than members");
    if (!in->r.failed && n != answered)
        bbe__snap_fail(in, at, "responses that do not match the members who answered");
    size_t absent = 0;
    for (size_t k = 0; k < n && !in->r.failed; k++) {
        bb_value *item = bbe__snap_value_or_null(in), *peer = bbe__snap_value_or_null(in);
        if (in->r.failed || !item != !peer) {
            bb_value_unref(item);
            bb_value_unref(peer);
            bbe__snap_fail(in, at, "a response without its sender");
            return;
        }
        absent += !item;
        b->items[b->n_items] = item;
        b->peers[b->n_items++] = peer;
    }
    uint64_t flags = bbe__snap_max(in, 7, "batch flags out of range");
    b->done = flags & 1;
    b->failed = (flags >> 1) & 1;
    b->holds_ref = !b->done && ((flags >> 2) & 1);
    if (b->holds_ref)
        b->x->refs++;
    bbe__snap_waiters(e, in, &b->waiters);
    const bbe__opst *st = b->waiters.n == 1 ? e->ops[b->waiters.v[0].op].st : NULL;
    if (!in->r.failed && !b->done && !bbe__batch_read_whole(e, b) && st &&
        e->ops[b->waiters.v[0].op].fn == bbe__sys_recv_resp && st->fold_op != BBE__NONE &&
        absent == b->n_items) {
        b->folding = true;
        b->fold_op = st->fold_op;
    } else if (absent && !b->done && !in->r.failed) {
        bbe__snap_fail(in, at, "responses missing from a batch that does not fold them");
    }
    b->result = bbe__snap_value_or_null(in);
    if (!b->done && !in->r.failed && bbe__map_put(&e->batches_wire, b->wire_req_id, b->id))
        bbe__snap_nomem(in);
}

static void read_batch(bb_engine *e, bbe__snap_in *in)
{
    size_t at = in->r.pos;
    uint64_t id = bbe__snap_u(in), wire_req_id = bbe__snap_u(in);
    if (!in->r.failed && bbe__map_get(&e->batches, id, NULL))
        bbe__snap_fail(in, at, "a request batch listed twice");
    uint32_t op;
    bbe__exec *x;
    if (!bbe__snap_op_in_frame(e, in, &op, &x))
        return;
    uint64_t expected = bbe__snap_max(in, MAX_COHORT, "a cohort of more than 65536 peers");
    uint64_t quorum = bbe__snap_max(in, expected, "a quorum larger than its cohort");
    if (in->r.failed)
        return;
    bbe__batch *b = bbe__batch_new((uint32_t)expected);
    if (!b) {
        bbe__snap_nomem(in);
        return;
    }
    b->id = id;
    b->wire_req_id = wire_req_id;
    b->op = op;
    b->x = x;
    b->quorum = (uint32_t)quorum;
    /* link first so a failure below frees it with the frame */
    b->next_in_exec = x->batches;
    x->batches = b;
    if (bbe__map_put(&e->batches, b->id, (uint64_t)(uintptr_t)b)) {
        bbe__snap_nomem(in);
        return;
    }
    read_batch_state(e, in, b);
}

int bbe__snap_read_requests(bb_engine *e, bbe__snap_in *in, bb_error *err)
{
    (void)err;
    e->next_req = bbe__snap_u(in);
    e->next_wire_req = bbe__snap_u(in);
    size_t n = bbe__snap_count(in, BBE__SNAP_MAX_COUNT, "too many request batches");
    for (size_t i = 0; i < n && !in->r.failed; i++)
        read_batch(e, in);
    return BB_OK;
}

/* ---- "inbound_requests": the local inbound-request counter, then the ring
 * oldest first: local id (0 once answered: kept for its place in the
 * ring), requester, wire request id, site, its sent_at and arrival. */

int bbe__snap_write_inbound_requests(bb_engine *e, bbe__snap_out *o, bb_error *err)
{
    (void)err;
    bbe__snap_put_u(o, e->next_inreq);
    size_t cap = bbe__inreq_ring_cap(&e->caps);
    bbe__snap_put_u(o, e->inreq_n);
    for (size_t i = 0; i < e->inreq_n; i++) {
        const bbe__inreq *q = &e->inreqs[(e->inreq_head + i) % cap];
        bool open = bbe__map_get(&e->inreq_map, q->id, NULL);
        bbe__snap_put_u(o, open ? q->id : 0);
        bbe__snap_put_peer(o, &q->peer);
        bbe__snap_put_u(o, q->wire_req_id);
        bbe__snap_put_u(o, q->site);
        bbe__snap_put_u(o, q->sent_at_ns);
        bbe__snap_put_u(o, q->recv_at_ns);
    }
    return BB_OK;
}

int bbe__snap_read_inbound_requests(bb_engine *e, bbe__snap_in *in, bb_error *err)
{
    (void)err;
    size_t cap = bbe__inreq_ring_cap(&e->caps);
    e->next_inreq = bbe__snap_u(in);
    size_t n = bbe__snap_count(in, cap, "more inbound requests than the ring holds");
    if (n && !in->r.failed && !e->inreqs && !(e->inreqs = calloc(cap, sizeof *e->inreqs)))
        bbe__snap_nomem(in);
    for (size_t i = 0; i < n && !in->r.failed; i++) {
        bbe__inreq *q = &e->inreqs[i];
        q->id = bbe__snap_u(in);
        bbe__snap_peer(in, &q->peer);
        q->wire_req_id = bbe__snap_u(in);
        q->site = bbe__snap_u(in);
        q->sent_at_ns = bbe__snap_u(in);
        q->recv_at_ns = bbe__snap_u(in);
        e->inreq_n++;
        if (q->id && bbe__map_put(&e->inreq_map, q->id, i))
            bbe__snap_nomem(in);
    }
    return BB_OK;
}

/* ---- "loopback": the self-addressed envelopes, in order, as bytes. */

int bbe__snap_write_loopback(bb_engine *e, bbe__snap_out *o, bb_error *err)
{
    (void)err;
    bbe__snap_put_u(o, e->loopback.n);
    for (size_t i = 0; i < e->loopback.n; i++)
        bb_writer_put_delimited(&o->w, e->loopback.v[i].bytes, e->loopback.v[i].len);
    return BB_OK;
}

int bbe__snap_read_loopback(bb_engine *e, bbe__snap_in *in, bb_error *err)
{
    (void)err;
    size_t n = bbe__snap_count(in, BBE__SNAP_MAX_COUNT, "too many loopback envelopes");
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const uint8_t *d = bbe__snap_bytes(in, &len);
        if (in->r.failed)
            break;
        uint8_t *copy = malloc(len ? len : 1);
        if (!copy || BBE__ARR_PUSH(&e->loopback, ((struct bbe__loop){copy, len}))) {
            free(copy);
            bbe__snap_nomem(in);
            break;
        }
        memcpy(copy, d, len);
    }
    return BB_OK;
}
