/*
 * bus.c — the per-node event bus (ENGINE.md 13.1): a bounded ring of
 * NodeEvents (drop-oldest, counted in bus.dropped) routed in phase 3 of the
 * poll cycle to EventSource ops: each subscribed op gets a fresh execution
 * whose output site holds the EventKind, exactly like a wire fill lands.
 * Events nobody subscribed to are not even queued.
 */
#include "libbbengine/src/snapshot.h"
#include "libbbengine/src/syscalls.h"

void bbe__bus_publish(bb_engine *e, uint64_t kind)
{
    if (kind >= 64 || !(e->bus_subscribed & (1ULL << kind)))
        return;
    size_t cap = e->caps.bus_capacity;
    BBE__ASSERT(cap > 0 && e->bus_n <= cap && e->bus_head < cap);
    if (e->bus_n == cap) {
        e->bus_head = (e->bus_head + 1) % cap;
        e->bus_n--;
        e->c[BBE__C_BUS_DROPPED]++;
    }
    e->bus[(e->bus_head + e->bus_n) % cap].kind = kind;
    e->bus_n++;
}

void bbe__route_bus(bb_engine *e)
{
    /* Route only what was queued when the phase began: events published by
     * the cascades started here wait for the next cycle (no livelock). */
    size_t n = e->bus_n;
    for (size_t i = 0; i < n && e->bus_n; i++) {
        uint64_t kind = e->bus[e->bus_head].kind;
        e->bus_head = (e->bus_head + 1) % e->caps.bus_capacity;
        e->bus_n--;
        for (uint32_t k = 0; k < e->n_event_ops; k++) {
            uint32_t opi = e->event_ops[k];
            if ((uint64_t)e->ops[opi].st->i != kind)
                continue;
            bb_value *v = bb_value_u64(&BB_TYPE_EVENT_KIND, kind);
            if (v)
                bbe__fire_op_output(e, opi, v, 0);
        }
    }
}

/* ---- snapshot section "bus": the queued event kinds, oldest first (at
 * most bus_capacity of them). */

int bbe__snap_write_bus(bb_engine *e, bbe__snap_out *o, bb_error *err)
{
    (void)err;
    bbe__snap_put_u(o, e->bus_n);
    for (size_t i = 0; i < e->bus_n; i++)
        bbe__snap_put_u(o, e->bus[(e->bus_head + i) % e->caps.bus_capacity].kind);
    return BB_OK;
}

int bbe__snap_read_bus(bb_engine *e, bbe__snap_in *in, bb_error *err)
{
    (void)err;
    size_t n = bbe__snap_count(in, e->caps.bus_capacity, "more events than the bus holds");
    for (size_t i = 0; i < n && !in->r.failed; i++)
        e->bus[e->bus_n++].kind = bbe__snap_u(in);
    return BB_OK;
}
