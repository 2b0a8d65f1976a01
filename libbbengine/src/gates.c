/*
 * gates.c — the compiler-inserted wire gates (COMPILER.md "Wire-gate
 * insertion", "Per-op runtime semantics") and DeadlineCheck.
 *
 *   DedupGateRx       InboundDedup: sliding seen-set of envelope hashes
 *                     (default 8192, oldest evicted) -> reason=duplicate
 *   PeerHealthGateRx  governor inbound check of the envelope's src_peer
 *                     -> reason=blocklisted | not_allowlisted
 *   BackoffGateRx     BackoffTable::should_retry(src_peer) -> reason=cooldown
 *   PeerHealthGateTx  governor outbound check of the gate's `peer` attribute
 *                     -> blocklisted | not_allowlisted | cooldown
 *   BackoffGateTx     should_retry(peer) -> reason=cooldown
 *   DeadlineCheck     the execution's envelope deadline -> reason=deadline_exceeded
 *
 * Allow forwards the input value unchanged (the TX gates sit on wire.Send's
 * data input, so forwarding keeps the payload flowing); Deny fails the op
 * with a message carrying the stable reason label. RX gates on a value that
 * did not arrive by wire (no inbound envelope) allow.
 */
#include <string.h>

#include "libbbengine/src/snapshot.h"
#include "libbbengine/src/syscalls.h"

static int deny(bb_engine *e, uint32_t opi, bbe__exec *x, const char *gate, const char *reason,
                uint64_t retry_ns)
{
    e->c[BBE__C_GATE_DENIED]++;
    if (BBE__TRACING(e, BB_TRACE_GATE))
        bbe__trace(e, BB_TRACE_GATE, "gate_deny", x->id, opi, reason, retry_ns);
    if (retry_ns)
        return bbe__fail(e, "%s dropped envelope: reason=%s retry_ns=%llu", gate, reason,
                        (unsigned long long)retry_ns);
    return bbe__fail(e, "%s dropped envelope: reason=%s", gate, reason);
}

static int allow(bb_engine *e, uint32_t opi, bbe__exec *x, bb_value *const *in, bb_value **out)
{
    if (BBE__TRACING(e, BB_TRACE_GATE))
        bbe__trace(e, BB_TRACE_GATE, "gate_allow", x->id, opi, NULL, 0);
    out[0] = bb_value_ref(in[0]);
    return BBE__R_DONE;
}

/* ---- InboundDedup ---------------------------------------------------------------- */

/* True when h is already in the window; otherwise records it. */
static bool dedup_record(bb_engine *e, uint64_t h)
{
    if (bbe__map_get(&e->dedup_set, h, NULL))
        return true;
    size_t cap = e->caps.dedup_window;
    BBE__ASSERT(cap > 0 && e->dedup_n <= cap && e->dedup_head < cap);
    if (e->dedup_n == cap) {
        bbe__map_del(&e->dedup_set, e->dedup[e->dedup_head]);
        e->dedup_head = (e->dedup_head + 1) % cap;
        e->dedup_n--;
    }
    if (bbe__map_put(&e->dedup_set, h, 1))
        return false;
    e->dedup[(e->dedup_head + e->dedup_n) % cap] = h;
    e->dedup_n++;
    return false;
}

BBE__SYSCALL(bbe__sys_dedup_rx)
{
    if (!x->inbound)
        return allow(e, opi, x, in, out);
    uint64_t h = bbe__mix64(x->inbound->env_hash ^ ((uint64_t)opi * 0x9e3779b97f4a7c15ULL));
    if (dedup_record(e, h)) {
        e->c[BBE__C_DEDUP_DENIED]++;
        return deny(e, opi, x, "DedupGateRx", "duplicate", 0);
    }
    return allow(e, opi, x, in, out);
}

BBE__SYSCALL(bbe__sys_health_rx)
{
    if (!x->inbound)
        return allow(e, opi, x, in, out);
    const char *why = bbe__peer_check(e, &x->inbound->src, false);
    if (why)
        return deny(e, opi, x, "PeerHealthGateRx", why, 0);
    return allow(e, opi, x, in, out);
}

BBE__SYSCALL(bbe__sys_backoff_rx)
{
    if (!x->inbound)
        return allow(e, opi, x, in, out);
    if (!bbe__peer_should_retry(e, &x->inbound->src)) {
        const bbe__peer *p = bbe__peer_find(e, &x->inbound->src);
        return deny(e, opi, x, "BackoffGateRx", "cooldown", p ? p->next_retry_ns : 0);
    }
    return allow(e, opi, x, in, out);
}

BBE__SYSCALL(bbe__sys_health_tx)
{
    const bbe__opst *st = e->ops[opi].st;
    if (!st->has_peer)
        return allow(e, opi, x, in, out);
    const char *why = bbe__peer_check(e, &st->peer, true);
    if (why) {
        const bbe__peer *p = bbe__peer_find(e, &st->peer);
        return deny(e, opi, x, "PeerHealthGateTx", why,
                    strcmp(why, "cooldown") == 0 && p ? p->next_retry_ns : 0);
    }
    return allow(e, opi, x, in, out);
}

BBE__SYSCALL(bbe__sys_backoff_tx)
{
    const bbe__opst *st = e->ops[opi].st;
    if (!st->has_peer)
        return allow(e, opi, x, in, out);
    if (!bbe__peer_should_retry(e, &st->peer)) {
        const bbe__peer *p = bbe__peer_find(e, &st->peer);
        return deny(e, opi, x, "BackoffGateTx", "cooldown", p ? p->next_retry_ns : 0);
    }
    return allow(e, opi, x, in, out);
}

BBE__SYSINIT(bbe__init_tx_gate)
{
    bbe__opst *st = bbe__opst_new(ins, op);
    if (!st)
        return BB_ENOMEM;
    for (size_t i = 0; i < op->node->attrs.n; i++) {
        const bb_attr *a = op->node->attrs.v[i];
        if (!a->name || strcmp(a->name, BB_ATTR_NAME_PEER) != 0)
            continue;
        if (a->type != BB_ATTR_STRING ||
            bb_peerid_from_bytes(a->s.data, a->s.len, &st->peer, NULL) != BB_OK)
            return bbe__node_malformed(ins, op, err, "%s: peer attribute is not a PeerId",
                                      op->op_type);
        st->has_peer = true;
    }
    return 0;
}

BBE__SYSCALL(bbe__sys_deadline_check)
{
    uint64_t deadline = x->inbound ? x->inbound->deadline_ns : 0;
    if (deadline && e->now_ns > deadline)
        return deny(e, opi, x, "DeadlineCheck", "deadline_exceeded", 0);
    return allow(e, opi, x, in, out);
}

BBE__SYSINIT(bbe__init_deadline_check)
{
    (void)ins, (void)err;
    op->deadline_ns = 0;
    return 0;
}

/* ---- snapshot section "dedup": the window's envelope hashes, oldest
 * first (at most dedup_window of them). */

int bbe__snap_write_dedup(bb_engine *e, bbe__snap_out *o, bb_error *err)
{
    (void)err;
    bbe__snap_put_u(o, e->dedup_n);
    for (size_t i = 0; i < e->dedup_n; i++)
        bbe__snap_put_u(o, e->dedup[(e->dedup_head + i) % e->caps.dedup_window]);
    return BB_OK;
}

int bbe__snap_read_dedup(bb_engine *e, bbe__snap_in *in, bb_error *err)
{
    (void)err;
    size_t n = bbe__snap_count(in, e->caps.dedup_window, "more hashes than the dedup window");
    for (size_t i = 0; i < n && !in->r.failed; i++) {
        e->dedup[i] = bbe__snap_u(in);
        e->dedup_n++;
        if (bbe__map_put(&e->dedup_set, e->dedup[i], 1))
            bbe__snap_nomem(in);
    }
    return BB_OK;
}
