/*
 * poll.c — one poll cycle (ENGINE.md Part 7), in order:
 *   1. drain the ingress (and last cycle's self-addressed envelopes)
 *      + stage/seed bootstrap work
 *   2. walk the frontier
 *   3. route bus events to EventSource sites
 *   4. fire matured timers (After/Sleep, Interval, deadlines, component timers)
 *   5. apply completions made in-cycle by components
 *   6. walk the frontier again (and bootstrap progression until quiet)
 *   7. emit the outbound envelopes as SendEnvelope steps
 * The op budget (config.cycle_op_budget) stops the walk early with a
 * CycleBudgetExceeded step; the remaining frontier runs on the next poll
 * (bb_engine_next_deadline returns 0 meanwhile).
 */
#include <string.h>

#include "libbbengine/src/syscalls.h"

static void phase(bb_engine *e, const char *name)
{
    e->phase_name = name;
    if (BBE__TRACING(e, BB_TRACE_POLL))
        bbe__trace(e, BB_TRACE_POLL, name, 0, BBE__NONE, NULL, e->cycle_seq);
}

static void report_drops(bb_engine *e)
{
    uint64_t d = atomic_load_explicit(&e->ing.dropped, memory_order_relaxed);
    if (d > e->ing.dropped_reported) {
        bbe__step_infra(e, BB_INFRA_INGRESS_DROPPED, 0, NULL, d - e->ing.dropped_reported,
                       "%llu ingress events dropped (capacity %zu)",
                       (unsigned long long)(d - e->ing.dropped_reported), e->ing.capacity);
        e->ing.dropped_reported = d;
    }
}

int bb_engine_poll(bb_engine *e, uint64_t now_ns, bb_steps *steps)
{
    bb_steps_clear(steps);
    if (now_ns > e->now_ns)
        e->now_ns = now_ns;
    e->ran = true;
    e->cycle_seq++;
    e->cycle_ops = 0;
    e->budget_hit = false;
    e->cycle_thread = pthread_self();
    atomic_store_explicit(&e->in_cycle, true, memory_order_release);
    uint64_t bus_dropped = e->c[BBE__C_BUS_DROPPED];
    phase(e, "node.poll");

    if (!e->intervals_armed && e->installed) {
        e->intervals_armed = true;
        for (uint32_t k = 0; k < e->n_interval_ops; k++) {
            uint32_t opi = e->interval_ops[k];
            bbe__timer_add(e, e->now_ns + (uint64_t)e->ops[opi].st->i, BBE__T_INTERVAL, opi, 0, 0, NULL);
        }
    }

    /* 1 */
    phase(e, "engine.drain_ingress");
    report_drops(e);
    bbe__drain_loopback(e);
    for (bbe__ingress_ev *ev = bbe__ingress_take(e); ev;) {
        bbe__ingress_ev *next = ev->next;
        bbe__ingress_process(e, ev);
        ev = next;
    }
    bbe__boot_progress(e);
    /* 2 */
    phase(e, "engine.drain_frontier");
    bbe__drain_frontier(e);
    if (!e->budget_hit) {
        /* 3 */
        phase(e, "engine.route_bus_events");
        bbe__route_bus(e);
        /* 4 */
        phase(e, "engine.poll_timers");
        bbe__poll_timers(e);
        /* 5 */
        phase(e, "engine.drain_pending_completions");
        bbe__drain_pending_completions(e);
        /* 6 */
        phase(e, "engine.drain_frontier");
        bbe__drain_frontier(e);
        while (!e->budget_hit) {
            bbe__boot_progress(e);
            if (!e->fr_n)
                break;
            bbe__drain_frontier(e);
        }
    }
    if (e->boot.n_inflight)
        bbe__boot_announce(e);
    /* 7: the chunk streams' pieces are outbound envelopes too */
    phase(e, "engine.drain_outbound");
    bbe__streams_poll(e);
    bbe__flush_outbound(e);
    if (e->c[BBE__C_BUS_DROPPED] > bus_dropped)
        bbe__step_infra(e, BB_INFRA_BUS_DROPPED, 0, NULL, e->c[BBE__C_BUS_DROPPED] - bus_dropped,
                       "%llu bus events dropped (capacity %zu)",
                       (unsigned long long)(e->c[BBE__C_BUS_DROPPED] - bus_dropped), e->caps.bus_capacity);
    e->phase_name = NULL;
    atomic_store_explicit(&e->in_cycle, false, memory_order_release);

    /* hand the accumulated steps over (the caller's cleared buffer comes back) */
    bb_steps tmp = *steps;
    *steps = e->acc;
    e->acc = tmp;
    return BB_OK;
}

uint64_t bb_engine_next_deadline(const bb_engine *e)
{
    bb_engine *m = (bb_engine *)e;
    if (e->fr_n || e->bus_n || e->pending_completions.n || e->loopback.n || e->acc.n ||
        e->outbound.n || atomic_load_explicit(&m->ing.head, memory_order_acquire) ||
        (e->boot.waiting.n && !e->boot.n_inflight) ||
        (e->boot.all_armed && !e->boot.n_inflight && !e->boot.all_blocked))
        return 0;
    if (!e->intervals_armed && e->n_interval_ops)
        return 0;
    uint64_t t = bbe__timer_next(e), s = bbe__streams_due(e);
    return s < t ? s : t;
}
