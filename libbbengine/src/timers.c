/*
 * timers.c — the scheduler (ENGINE.md 6.3): a binary min-heap of timers
 * ordered by (at, seq), so equal deadlines fire in scheduling order.
 * Polled in phase 4 of each cycle with the host's now_ns; the host learns
 * the earliest deadline from bb_engine_next_deadline.
 *
 * Deadline timers are not cancelled when what they guard ends first (a
 * request batch answered, a completion handle done): they stay in the heap
 * and fire as no-ops. So that a node sending requests faster than their
 * deadline does not grow the heap without bound (one dead timer per
 * request, for deadline_ns), the heap is compacted — dead timers dropped,
 * the rest re-heapified — whenever it doubled since the last compaction:
 * O(1) amortized per timer, and the heap stays within twice its live
 * timers.
 */
#include <stdlib.h>
#include <string.h>

#include "libbbengine/src/snapshot.h"
#include "libbbengine/src/syscalls.h"

#define COMPACT_MIN 64 /* timers before the first compaction */

static bool before(const bbe__timer *a, const bbe__timer *b)
{
    return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

static void sift_down(bbe__timer *h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && before(&h[l], &h[m]))
            m = l;
        if (r < n && before(&h[r], &h[m]))
            m = r;
        if (m == i)
            return;
        bbe__timer tmp = h[i];
        h[i] = h[m];
        h[m] = tmp;
        i = m;
    }
}

void bbe__timers_heapify(bb_engine *e)
{
    for (size_t i = e->timers.n / 2; i-- > 0;)
        sift_down(e->timers.v, e->timers.n, i);
}

/* False for a deadline whose batch or handle already ended: firing it
 * would do nothing. */
static bool timer_live(const bb_engine *e, const bbe__timer *t)
{
    if (t->kind == BBE__T_BATCH_DEADLINE)
        return bbe__batch_pending(e, t->b);
    if (t->kind == BBE__T_CTL_DEADLINE)
        return bbe__control_pending(e, t->b);
    if (t->kind == BBE__T_HANDLE_DEADLINE) {
        const bbe__handle *h = t->p;
        return h->gen == t->a && h->attached;
    }
    return true;
}

static void compact(bb_engine *e)
{
    size_t k = 0;
    for (size_t i = 0; i < e->timers.n; i++)
        if (timer_live(e, &e->timers.v[i]))
            e->timers.v[k++] = e->timers.v[i];
    e->timers.n = k;
    bbe__timers_heapify(e);
    e->timers_compact_at = k * 2 > COMPACT_MIN ? k * 2 : COMPACT_MIN;
}

int bbe__timer_add(bb_engine *e, uint64_t at, uint32_t kind, uint32_t op, uint32_t a, uint64_t b,
                  void *p)
{
    bbe__timer t = {.at = at, .seq = e->timer_seq++, .kind = kind, .op = op, .a = a, .b = b, .p = p};
    if (e->timers.n >= e->timers_compact_at && e->timers.n >= COMPACT_MIN)
        compact(e);
    if (BBE__ARR_PUSH(&e->timers, t))
        return BB_ENOMEM;
    bbe__timer *h = e->timers.v;
    size_t i = e->timers.n - 1;
    while (i) {
        size_t parent = (i - 1) / 2;
        if (!before(&h[i], &h[parent]))
            break;
        bbe__timer tmp = h[i];
        h[i] = h[parent];
        h[parent] = tmp;
        i = parent;
    }
    return 0;
}

static bbe__timer pop(bb_engine *e)
{
    bbe__timer *h = e->timers.v;
    bbe__timer top = h[0];
    h[0] = h[--e->timers.n];
    sift_down(h, e->timers.n, 0);
    return top;
}

uint64_t bbe__timer_next(const bb_engine *e)
{
    return e->timers.n ? e->timers.v[0].at : UINT64_MAX;
}

static void fire(bb_engine *e, const bbe__timer *t)
{
    switch (t->kind) {
    case BBE__T_PARK: {
        bb_value *trig = bbe__trigger(e);
        bbe__park_resume(e, t->op, t->p, &trig, 1);
        break;
    }
    case BBE__T_INTERVAL: {
        const bbe__op *op = &e->ops[t->op];
        uint64_t period = (uint64_t)op->st->i;
        uint64_t next = t->at + period;
        if (next <= e->now_ns)
            next = e->now_ns + period;
        bbe__timer_add(e, next, BBE__T_INTERVAL, t->op, 0, 0, NULL);
        bb_value *ts = bb_value_u64(&BB_TYPE_TIMESTAMP, e->now_ns);
        if (ts)
            bbe__fire_op_output(e, t->op, ts, 0);
        break;
    }
    case BBE__T_COMPONENT: {
        bbe__comp *c = &e->comps[t->a];
        if (c->type->on_timer)
            c->type->on_timer(c->inst, &c->ctx.pub, t->b);
        break;
    }
    case BBE__T_HANDLE_DEADLINE: {
        bbe__handle *h = t->p;
        if (timer_live(e, t) && bbe__handle_drop(e, h)) {
            uint32_t op = h->op;
            bbe__exec *x = h->x;
            h->attached = false;
            h->x = NULL;
            bbe__handle_retire(e, h);
            bbe__park_fail(e, op, x, "timed out waiting for completion (deadline_ns)");
        }
        break;
    }
    case BBE__T_BATCH_DEADLINE:
        bbe__batch_deadline(e, t->b);
        break;
    case BBE__T_CTL_DEADLINE:
        bbe__control_deadline(e, t->b);
        break;
    }
}

void bbe__poll_timers(bb_engine *e)
{
    while (e->timers.n && e->timers.v[0].at <= e->now_ns) {
        bbe__timer t = pop(e);
        fire(e, &t);
    }
}

void bbe__timers_free(bb_engine *e)
{
    BBE__ARR_FREE(&e->timers);
}

/* ---- snapshot section "timers" ----------------------------------------------------------------
 * The scheduling sequence number and whether the Interval ops are armed,
 * then every timer but handle deadlines (they die with their handles):
 * deadline, sequence, kind, 1 + op (0: none), a, b and, for a parked op,
 * its frame. A restored timer is checked against the install: a parked
 * op in its frame's graph, an Interval op with a period, a component
 * that exists. */

int bbe__snap_write_timers(bb_engine *e, bbe__snap_out *o, bb_error *err)
{
    (void)err;
    bbe__snap_put_u(o, e->timer_seq);
    bbe__snap_put_u(o, e->intervals_armed);
    /* handle deadlines die with their handles, control-plane request
     * deadlines with the requests (not kept: bb-plugin(7)) */
    size_t n = 0;
    for (size_t i = 0; i < e->timers.n; i++)
        n += e->timers.v[i].kind != BBE__T_HANDLE_DEADLINE &&
             e->timers.v[i].kind != BBE__T_CTL_DEADLINE;
    bbe__snap_put_u(o, n);
    for (size_t i = 0; i < e->timers.n; i++) {
        const bbe__timer *t = &e->timers.v[i];
        if (t->kind == BBE__T_HANDLE_DEADLINE || t->kind == BBE__T_CTL_DEADLINE)
            continue;
        bbe__snap_put_u(o, t->at);
        bbe__snap_put_u(o, t->seq);
        bbe__snap_put_u(o, t->kind);
        bbe__snap_put_u(o, t->op == BBE__NONE ? 0 : (uint64_t)t->op + 1);
        bbe__snap_put_u(o, t->a);
        bbe__snap_put_u(o, t->b);
        bbe__snap_put_frame(o, t->kind == BBE__T_PARK ? t->p : NULL);
    }
    return BB_OK;
}

/* What timer t (read at offset at) refers to exists in this install. */
static bool timer_valid(bb_engine *e, bbe__snap_in *in, const bbe__timer *t, size_t at)
{
    const bbe__op *op = t->op == BBE__NONE ? NULL : &e->ops[t->op];
    const char *why = NULL;
    if (t->kind == BBE__T_PARK && (!op || !t->p || op->graph != ((bbe__exec *)t->p)->g->index))
        why = "a sleeping op that is not in its frame's graph";
    else if (t->kind != BBE__T_PARK && t->p)
        why = "a frame on a timer that has none";
    else if (t->kind == BBE__T_INTERVAL &&
             (!op || strcmp(op->op_type, "Interval") != 0 || !op->st || op->st->i <= 0))
        why = "an interval timer whose op is not an Interval with a period";
    else if (t->kind == BBE__T_COMPONENT && t->a >= e->n_comps)
        why = "a component timer for a component that does not exist";
    if (why)
        bbe__snap_fail(in, at, why);
    return !why;
}

int bbe__snap_read_timers(bb_engine *e, bbe__snap_in *in, bb_error *err)
{
    (void)err;
    e->timer_seq = bbe__snap_u(in);
    e->intervals_armed = bbe__snap_flag(in);
    size_t n = bbe__snap_count(in, BBE__SNAP_MAX_COUNT, "too many timers");
    for (size_t i = 0; i < n && !in->r.failed; i++) {
        size_t at = in->r.pos;
        bbe__timer t = {0};
        t.at = bbe__snap_u(in);
        t.seq = bbe__snap_u(in);
        size_t kind_at = in->r.pos;
        t.kind = (uint32_t)bbe__snap_max(in, BBE__T_BATCH_DEADLINE, "a timer kind out of range");
        if (!in->r.failed && (t.kind < BBE__T_PARK || t.kind == BBE__T_HANDLE_DEADLINE))
            bbe__snap_fail(in, kind_at, "a timer kind that is not restored");
        uint64_t op = bbe__snap_max(in, e->n_ops, "an op index out of range");
        t.op = op ? (uint32_t)(op - 1) : BBE__NONE;
        t.a = (uint32_t)bbe__snap_max(in, UINT32_MAX, "a timer argument over 32 bits");
        t.b = bbe__snap_u(in);
        t.p = bbe__snap_frame_or_null(in);
        if (in->r.failed || !timer_valid(e, in, &t, at))
            break;
        if (t.kind == BBE__T_PARK) {
            ((bbe__exec *)t.p)->refs++;
            e->pending_async++;
        }
        if (BBE__ARR_PUSH(&e->timers, t)) {
            bbe__snap_nomem(in);
            break;
        }
    }
    /* the snapshot left out the handle deadlines: what remains of the heap
     * array is not a heap in general (and a snapshot is input) */
    bbe__timers_heapify(e);
    return BB_OK;
}
