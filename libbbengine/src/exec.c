/*
 * exec.c — executions (ENGINE.md Part 5): frames, the slot table, the
 * frontier ring and liveness/GC.
 *
 * A frame is one (ExecId, graph) pair; its slots[] are indexed by the
 * graph's dense site numbers, so "slot table keyed by (NodeSiteId, ExecId)"
 * is a pointer plus an index. A frame counts what still refers to it
 * (frontier entries, suspended ops, timers, child function calls, request
 * batches); when the count drops to zero the execution is finished and every
 * slot it wrote is released (values unref'd, ingress budget given back).
 * A frame is one allocation: the header, slots[n_sites] and the list of
 * written sites (each site enters it once, so n_sites entries suffice).
 * Freed frames go to a per-graph pool bounded in bytes (one frame of any size
 * is always kept), so steady-state traffic does not call malloc; when the
 * last live execution finishes, every pool shrinks back to one frame, so a
 * burst of concurrent executions gives all its memory back.
 */
#include <stdlib.h>
#include <string.h>

#include "libbbengine/src/engine_internal.h"

#define POOL_BYTES ((size_t)1 << 20) /* pooled frames per graph */

bb_exec_id bbe__exec_id_new(bb_engine *e)
{
    return atomic_fetch_add_explicit(&e->next_exec, 1, memory_order_relaxed);
}

static size_t frame_size(const bbe__graph *g)
{
    return sizeof(bbe__exec) + (size_t)g->n_sites * (sizeof(bbe__slot) + sizeof(uint32_t));
}

bbe__exec *bbe__exec_new(bb_engine *e, bbe__graph *g, bb_exec_id id)
{
    bbe__exec *x = g->pool;
    if (x) {
        g->pool = x->next;
        e->pool_extra -= --g->pool_n > 0;
    } else {
        x = bbe__zalloc(frame_size(g));
        if (!x)
            return NULL;
        x->written = (uint32_t *)(x->slots + g->n_sites);
    }
    x->id = id;
    x->g = g;
    x->refs = 1;
    x->call_op = BBE__NONE;
    x->parent = NULL;
    x->boot = 0;
    x->n_written = 0;
    x->inbound = NULL;
    x->batches = NULL;
    x->n_limits = 0;
    x->prev = NULL;
    x->next = e->live;
    if (e->live)
        e->live->prev = x;
    e->live = x;
    e->n_live++;
    for (uint32_t i = 0; i < g->n_consts; i++) {
        uint32_t s = g->const_sites[i];
        if (!x->slots[s].v) {
            x->written[x->n_written++] = s;
            x->slots[s].v = bb_value_ref(g->const_vals[i]);
            e->live_slots++;
        }
    }
    return x;
}

static void release_slots(bb_engine *e, bbe__exec *x)
{
    for (uint32_t i = 0; i < x->n_written; i++) {
        bbe__slot *s = &x->slots[x->written[i]];
        if (s->v) {
            bb_value_unref(s->v);
            bbe__budget_release(e, s->charged);
            s->v = NULL;
            s->charged = 0;
            e->live_slots--;
        }
    }
    x->n_written = 0;
}

static void unlink_live(bb_engine *e, bbe__exec *x)
{
    if (x->prev)
        x->prev->next = x->next;
    else
        e->live = x->next;
    if (x->next)
        x->next->prev = x->prev;
    e->n_live--;
}

static void frame_recycle(bb_engine *e, bbe__exec *x)
{
    bbe__graph *g = x->g;
    if (!g->pool_n || (g->pool_n + 1) * frame_size(g) <= POOL_BYTES) {
        x->next = g->pool;
        g->pool = x;
        e->pool_extra += g->pool_n++ > 0;
    } else {
        free(x->limits);
        free(x);
    }
}

/* Nothing runs: keep one pooled frame per graph, free the rest of a burst. */
static void pools_trim(bb_engine *e)
{
    for (uint32_t i = 0; i < e->n_graphs && e->pool_extra; i++) {
        bbe__graph *g = &e->graphs[i];
        while (g->pool_n > 1) {
            bbe__exec *x = g->pool;
            g->pool = x->next;
            g->pool_n--;
            e->pool_extra--;
            free(x->limits);
            free(x);
        }
    }
}

/* Limit.Acquire holds are released when the holder finishes (ENGINE.md 5.5). */
void bbe__sema_release(bb_engine *e, uint32_t sema);

void bbe__exec_gc(bb_engine *e, bbe__exec *x)
{
    release_slots(e, x);
    if (x->batches)
        bbe__exec_drop_batches(e, x);
    while (x->n_limits)
        bbe__sema_release(e, x->limits[--x->n_limits]);
    x->inbound = NULL;
    unlink_live(e, x);
    uint32_t boot = x->boot;
    bbe__exec *parent = x->parent;
    frame_recycle(e, x);
    if (!e->n_live && e->pool_extra)
        pools_trim(e);
    if (boot)
        bbe__boot_frame_done(e, boot);
    if (parent)
        bbe__exec_unref(e, parent);
}

int bbe__frontier_reserve(bb_engine *e, size_t need)
{
    if (need <= e->fr_cap)
        return 0;
    size_t cap = e->fr_cap ? e->fr_cap : 1024;
    while (cap < need)
        cap *= 2;
    struct bbe__fentry *n = malloc(cap * sizeof *n);
    if (!n)
        return BB_ENOMEM;
    for (size_t i = 0; i < e->fr_n; i++)
        n[i] = e->fr[(e->fr_head + i) & (e->fr_cap - 1)];
    free(e->fr);
    e->fr = n;
    e->fr_cap = cap;
    e->fr_head = 0;
    return 0;
}

/* The frontier is full: grow it (the ring doubles, so this is rare), then
 * push. */
void bbe__frontier_push_grow(bb_engine *e, uint32_t op, bbe__exec *x)
{
    if (bbe__frontier_reserve(e, e->fr_n + 1)) {
        bbe__op_failed(e, op, x, "out of memory growing the frontier");
        return;
    }
    bbe__frontier_push(e, op, x);
}

static void forward(bb_engine *e, bbe__exec *x, uint32_t site, bb_value *v)
{
    const bbe__op *call = &e->ops[x->call_op];
    uint32_t j = x->g->fwd_index[site];
    if (j < call->n_out && call->out[j] != BBE__NONE)
        bbe__write(e, x->parent, call->out[j], bb_value_ref(v), 0);
}

static void app_event(bb_engine *e, bbe__exec *x, uint32_t site, bb_value *v)
{
    bb_step *st = bbe__step_push(e, BB_STEP_APP_EVENT, x->id);
    if (!st)
        return;
    st->u.app.target = x->g->target;
    st->u.app.topic = x->g->site_names[site];
    st->u.app.value = bb_value_ref(v);
    e->c[BBE__C_APP_EVENTS]++;
}

/* The rarer parts of a write (bbe__write_inline, engine_internal.h), out of
 * line so the common one stays small: a site written again, a function
 * output forwarded to the caller, an entry point's unconsumed output
 * surfaced as an AppEvent. */
void bbe__write_again(bb_engine *e, bbe__slot *s)
{
    bb_value_unref(s->v);
    bbe__budget_release(e, s->charged);
}

void bbe__write_flagged(bb_engine *e, bbe__exec *x, uint32_t site, bb_value *v, uint8_t fl)
{
    if ((fl & BBE__SITE_FWD) && x->parent)
        forward(e, x, site, v);
    if ((fl & BBE__SITE_APP_OUT) && !x->parent)
        app_event(e, x, site, v);
}

void bbe__write(bb_engine *e, bbe__exec *x, uint32_t site, bb_value *v, size_t charged)
{
    bbe__write_inline(e, x, site, v, charged);
}

void bbe__push_sources(bb_engine *e, bbe__exec *x)
{
    const bbe__graph *g = x->g;
    for (uint32_t i = 0; i < g->n_sources; i++)
        bbe__frontier_push(e, g->sources[i], x);
}

bbe__exec *bbe__fire_op_output(bb_engine *e, uint32_t opi, bb_value *v, uint32_t k)
{
    const bbe__op *op = &e->ops[opi];
    bbe__exec *x = bbe__exec_new(e, &e->graphs[op->graph], bbe__exec_id_new(e));
    if (!x) {
        bb_value_unref(v);
        return NULL;
    }
    if (k < op->n_out && op->out[k] != BBE__NONE)
        bbe__write(e, x, op->out[k], v, 0);
    else
        bb_value_unref(v);
    if (op->st)
        for (uint32_t i = 0; i < op->st->n_companions; i++)
            bbe__frontier_push(e, op->st->companions[i], x);
    bbe__exec_unref(e, x);
    return x;
}

/* Teardown: drop every execution without running anything. */
void bbe__exec_free_all(bb_engine *e)
{
    e->fr_n = 0;
    e->fr_head = 0;
    e->parked.n = 0;
    while (e->live) {
        bbe__exec *x = e->live;
        release_slots(e, x);
        unlink_live(e, x);
        free(x->limits);
        free(x);
    }
    for (uint32_t i = 0; i < e->n_graphs; i++) {
        bbe__graph *g = &e->graphs[i];
        while (g->pool) {
            bbe__exec *x = g->pool;
            g->pool = x->next;
            free(x->limits);
            free(x);
        }
        g->pool_n = 0;
    }
    e->pool_extra = 0;
}
