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
#include "libbbengine/src/snapshot.h"

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
            BBE__ASSERT(e->live_slots > 0);
            e->live_slots--;
        }
    }
    x->n_written = 0;
}

static void unlink_live(bb_engine *e, bbe__exec *x)
{
    BBE__ASSERT(e->n_live > 0);
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
    BBE__ASSERT(x->refs == 0);
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
    BBE__ASSERT(e->fr_n <= e->fr_cap && e->fr_n < cap);
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

/* ---- snapshot section "executions" ---------------------------------------------------------
 * Every live frame, oldest first (restoring pushes each at the head of the
 * live list, so the restored list is in the same order and a snapshot of
 * the restored engine is the same bytes); a frame's 1-based position is
 * how every other section names it. Per frame: ExecId, graph, parent
 * frame (0: none), 1 + the CALL op in the parent (0: none), bootstrap tag,
 * the inbound envelope it started from (flag; PeerId, dedup key,
 * deadline), the semaphores it holds, then its written slots (site,
 * budget charge, value). On restore the frames are rebuilt blank
 * (constants included: the snapshot has their slots), their references
 * counted again from the sections that refer to them. */

static bbe__exec *oldest_frame(const bb_engine *e)
{
    bbe__exec *x = e->live;
    while (x && x->next)
        x = x->next;
    return x;
}

int bbe__snap_number_frames(const bb_engine *e, bbe__map *frames)
{
    uint64_t n = 0;
    for (bbe__exec *x = oldest_frame(e); x; x = x->prev)
        if (bbe__map_put(frames, (uint64_t)(uintptr_t)x, ++n))
            return BB_ENOMEM;
    return BB_OK;
}

int bbe__snap_write_executions(bb_engine *e, bbe__snap_out *o, bb_error *err)
{
    (void)err;
    bbe__snap_put_u(o, e->n_live);
    for (bbe__exec *x = oldest_frame(e); x; x = x->prev) {
        bbe__snap_put_u(o, x->id);
        bbe__snap_put_u(o, x->g->index);
        bbe__snap_put_frame(o, x->parent);
        bbe__snap_put_u(o, x->call_op == BBE__NONE ? 0 : (uint64_t)x->call_op + 1);
        bbe__snap_put_u(o, x->boot);
        bbe__snap_put_u(o, x->inbound != NULL);
        if (x->inbound) {
            bbe__snap_put_peer(o, &x->inbound->src);
            bbe__snap_put_u(o, x->inbound->env_hash);
            bbe__snap_put_u(o, x->inbound->deadline_ns);
        }
        bbe__snap_put_u(o, x->n_limits);
        for (uint32_t i = 0; i < x->n_limits; i++)
            bbe__snap_put_u(o, x->limits[i]);
        uint32_t live = 0;
        for (uint32_t i = 0; i < x->n_written; i++)
            live += x->slots[x->written[i]].v != NULL;
        bbe__snap_put_u(o, live);
        for (uint32_t i = 0; i < x->n_written; i++) {
            const bbe__slot *sl = &x->slots[x->written[i]];
            if (!sl->v)
                continue;
            bbe__snap_put_u(o, x->written[i]);
            bbe__snap_put_u(o, sl->charged);
            bbe__snap_put_value(o, sl->v);
        }
    }
    return BB_OK;
}

/* A blank frame of g (no constants pre-filled: the snapshot has them). */
static bbe__exec *frame_blank(bb_engine *e, bbe__graph *g, bb_exec_id id)
{
    uint32_t nconst = g->n_consts;
    g->n_consts = 0;
    bbe__exec *x = bbe__exec_new(e, g, id);
    g->n_consts = nconst;
    if (x)
        x->refs = 0; /* recounted from the restored references */
    return x;
}

/* The rest of frame x after its graph. Its parent (an index among the nf
 * frames, read at *parent_at) is linked once every frame exists. */
static void frame_read(bb_engine *e, bbe__snap_in *in, bbe__exec *x, size_t nf,
                       uint64_t *parent, size_t *parent_at)
{
    *parent_at = in->r.pos;
    *parent = bbe__snap_max(in, nf, "a parent frame index past the executions");
    uint64_t call = bbe__snap_max(in, e->n_ops, "a call op index out of range");
    x->call_op = call ? (uint32_t)(call - 1) : BBE__NONE;
    x->boot = (uint32_t)bbe__snap_max(in, 4096, "a bootstrap tag out of range");
    if (bbe__snap_flag(in)) {
        bbe__exec_set_inbound(x);
        bbe__snap_peer(in, &x->inbound->src);
        x->inbound->env_hash = bbe__snap_u(in);
        x->inbound->deadline_ns = bbe__snap_u(in);
    }
    size_t nl = bbe__snap_count(in, BBE__SNAP_MAX_COUNT, "too many semaphores held");
    if (nl && !(x->limits = malloc(nl * sizeof *x->limits)))
        bbe__snap_nomem(in);
    for (size_t k = 0; k < nl && !in->r.failed; k++)
        x->limits[x->n_limits++] =
            bbe__snap_index(in, e->n_semas, "a semaphore index out of range");
    size_t ns = bbe__snap_count(in, x->g->n_sites, "more slots than the graph has sites");
    for (size_t k = 0; k < ns && !in->r.failed; k++) {
        size_t at = in->r.pos;
        uint32_t site = bbe__snap_index(in, x->g->n_sites, "a site index out of range");
        size_t charged = (size_t)bbe__snap_u(in);
        bb_value *v = bbe__snap_value(in);
        if (!in->r.failed && x->slots[site].v)
            bbe__snap_fail(in, at, "a slot written twice");
        if (in->r.failed) {
            bb_value_unref(v);
            return;
        }
        x->written[x->n_written++] = site;
        x->slots[site].v = v;
        x->slots[site].charged = charged;
        atomic_fetch_add(&e->bytes_in_flight, charged);
        e->live_slots++;
    }
}

/* Link frames to their parents: a child is a CALL of its parent's graph. */
static void frames_link(bb_engine *e, bbe__snap_in *in, const uint64_t *parent,
                        const size_t *parent_at)
{
    for (size_t i = 0; i < in->n_frames && !in->r.failed; i++) {
        bbe__exec *x = in->frames[i];
        if (!parent[i])
            continue;
        if (parent[i] == i + 1) {
            bbe__snap_fail(in, parent_at[i], "an execution that is its own parent");
            return;
        }
        x->parent = in->frames[parent[i] - 1];
        const bbe__op *call = x->call_op < e->n_ops ? &e->ops[x->call_op] : NULL;
        if (!call || call->disp != BBE__DISP_CALL || call->comp != x->g->index ||
            call->graph != x->parent->g->index) {
            bbe__snap_fail(in, parent_at[i], "a parent that does not call this execution's graph");
            return;
        }
        x->parent->refs++;
    }
}

int bbe__snap_read_executions(bb_engine *e, bbe__snap_in *in, bb_error *err)
{
    (void)err;
    size_t nf = bbe__snap_count(in, BBE__SNAP_MAX_COUNT, "too many executions");
    in->frames = calloc(nf ? nf : 1, sizeof *in->frames);
    uint64_t *parent = calloc(nf ? nf : 1, sizeof *parent);
    size_t *parent_at = calloc(nf ? nf : 1, sizeof *parent_at);
    if (!in->frames || !parent || !parent_at)
        bbe__snap_nomem(in);
    in->n_frames = 0;
    /* parents may come later in the list: every frame first, links after */
    for (size_t i = 0; i < nf && !in->r.failed; i++) {
        bb_exec_id id = bbe__snap_u(in);
        uint32_t gi = bbe__snap_index(in, e->n_graphs, "a graph index out of range");
        if (in->r.failed)
            break;
        bbe__exec *x = frame_blank(e, &e->graphs[gi], id);
        if (!x) {
            bbe__snap_nomem(in);
            break;
        }
        in->frames[in->n_frames++] = x;
        frame_read(e, in, x, nf, &parent[i], &parent_at[i]);
    }
    frames_link(e, in, parent, parent_at);
    free(parent);
    free(parent_at);
    return BB_OK;
}

/* ---- snapshot section "frontier" -------------------------------------------------------------
 * The ops to dispatch, as (op, frame) pairs: the frontier ring in order,
 * then the ops parked behind an in-flight bootstrap, then the component
 * ops suspended on a completion handle (the handle does not survive a
 * restore: they dispatch again, ENGINE.md 9.4). Restored, all of them are
 * on the frontier. */

int bbe__snap_write_frontier(bb_engine *e, bbe__snap_out *o, bb_error *err)
{
    (void)err;
    size_t n_handles = 0;
    for (size_t s = 0; s < e->slabs.n; s++)
        for (size_t k = 0; k < BBE__HANDLE_SLAB; k++)
            n_handles += e->slabs.v[s][k].attached && e->slabs.v[s][k].x;
    bbe__snap_put_u(o, e->fr_n + e->parked.n + n_handles);
    for (size_t i = 0; i < e->fr_n; i++) {
        const struct bbe__fentry *f = &e->fr[(e->fr_head + i) & (e->fr_cap - 1)];
        bbe__snap_put_u(o, f->op);
        bbe__snap_put_frame(o, f->x);
    }
    for (size_t i = 0; i < e->parked.n; i++) {
        bbe__snap_put_u(o, e->parked.v[i].op);
        bbe__snap_put_frame(o, e->parked.v[i].x);
    }
    for (size_t s = 0; s < e->slabs.n; s++)
        for (size_t k = 0; k < BBE__HANDLE_SLAB; k++) {
            const bbe__handle *h = &e->slabs.v[s][k];
            if (h->attached && h->x) {
                bbe__snap_put_u(o, h->op);
                bbe__snap_put_frame(o, h->x);
            }
        }
    return BB_OK;
}

int bbe__snap_read_frontier(bb_engine *e, bbe__snap_in *in, bb_error *err)
{
    (void)err;
    size_t n = bbe__snap_count(in, BBE__SNAP_MAX_COUNT, "too many frontier entries");
    for (size_t i = 0; i < n; i++) {
        uint32_t op;
        bbe__exec *x;
        if (!bbe__snap_op_in_frame(e, in, &op, &x))
            break;
        if (bbe__frontier_reserve(e, e->fr_n + 1)) {
            bbe__snap_nomem(in);
            break;
        }
        bbe__frontier_push(e, op, x);
    }
    return BB_OK;
}
