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
