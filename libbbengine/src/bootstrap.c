/*
 * bootstrap.c — host-driven bootstrap (ENGINE.md 6.8).
 *
 * Install records each target's "<target>__bootstrap" function and every
 * component type with a bootstrap entry, without arming anything. The host
 * stages work with bb_engine_run_bootstrap (ALL, module names, module
 * requests with inputs, component slots); polls drive it:
 *   - a module bootstrap runs its function body under a fresh ExecId whose
 *     frames carry the in-flight tag (calls inherit it);
 *   - a component bootstrap calls type->bootstrap (NOW or LATER);
 *   - while a bootstrap is in flight, body ops that would touch a component
 *     in its touch set (computed at install) park (bbe__op_locked); disjoint
 *     components keep firing; parked ops return to the frontier when it ends;
 *   - staged requests whose touch sets overlap an in-flight one wait;
 *   - ALL walks targets in install order, one at a time, then fires every
 *     Pulse op once.
 * Each finished bootstrap emits BootstrapComplete (or BootstrapFailed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libbbengine/src/snapshot.h"
#include "libbbengine/src/syscalls.h"

static bool touch_overlap(const bb_engine *e, const uint64_t *a, const uint64_t *b)
{
    if (!a || !b)
        return false;
    for (uint32_t w = 0; w < e->boot.touch_words; w++)
        if (a[w] & b[w])
            return true;
    return false;
}

static const uint64_t *req_touch(const bb_engine *e, const bbe__boot_req *r)
{
    if (r->kind == BB_BOOTSTRAP_SLOTS)
        return e->boot.comp_touch ? e->boot.comp_touch + (size_t)r->idx * e->boot.touch_words : NULL;
    return e->graphs[e->boot.mods[r->idx].graph].touch;
}

static bool in_flight(const bb_engine *e, bool component, uint32_t idx)
{
    for (size_t i = 0; i < e->boot.inflight.n; i++) {
        const bbe__inflight *f = &e->boot.inflight.v[i];
        if (f->used && f->component == component && f->idx == idx)
            return true;
    }
    return false;
}

static bool conflicts(const bb_engine *e, const uint64_t *touch)
{
    for (size_t i = 0; i < e->boot.inflight.n; i++) {
        const bbe__inflight *f = &e->boot.inflight.v[i];
        if (f->used && touch_overlap(e, f->touch, touch))
            return true;
    }
    return false;
}

static uint32_t slot_alloc(bb_engine *e, bool component, uint32_t idx, uint64_t *touch)
{
    size_t i;
    for (i = 0; i < e->boot.inflight.n; i++)
        if (!e->boot.inflight.v[i].used)
            break;
    if (i == e->boot.inflight.n && BBE__ARR_PUSH(&e->boot.inflight, (bbe__inflight){0}))
        return 0;
    bbe__inflight *f = &e->boot.inflight.v[i];
    memset(f, 0, sizeof *f);
    f->used = true;
    f->component = component;
    f->idx = idx;
    f->touch = touch;
    e->boot.n_inflight++;
    return (uint32_t)i + 1;
}

static void finish(bb_engine *e, uint32_t tag, bool ok, const char *msg)
{
    bbe__inflight *f = &e->boot.inflight.v[tag - 1];
    if (f->failed) {
        ok = false;
        if (!msg)
            msg = f->why;
    }
    if (ok && !f->component)
        e->boot.mods[f->idx].done = true;
    bb_step *st = bbe__step_push(e, ok ? BB_STEP_BOOTSTRAP_COMPLETE : BB_STEP_BOOTSTRAP_FAILED, 0);
    if (st) {
        if (f->component) {
            st->u.bootstrap.slot = e->comps[f->idx].slot;
        } else {
            const bbe__modboot *m = &e->boot.mods[f->idx];
            st->u.bootstrap.target = e->targets[m->target].name;
        }
        if (!ok)
            st->u.bootstrap.message = bbe__step_str(e, msg ? msg : "bootstrap failed");
    }
    if (BBE__TRACING(e, BB_TRACE_BOOTSTRAP))
        bbe__trace(e, BB_TRACE_BOOTSTRAP, ok ? "bootstrap_complete" : "bootstrap_failed", 0,
                  BBE__NONE, f->component ? e->comps[f->idx].slot : e->targets[e->boot.mods[f->idx].target].name, 0);
    bbe__bus_publish(e, BB_EVENT_BOOTSTRAP_COMPLETE);
    f->used = false;
    e->boot.n_inflight--;
    bbe__boot_unpark(e);
}

void bbe__boot_frame_done(bb_engine *e, uint32_t tag)
{
    bbe__inflight *f = &e->boot.inflight.v[tag - 1];
    if (f->live && --f->live == 0 && !f->component)
        finish(e, tag, true, NULL);
}

void bbe__boot_op_failed(bb_engine *e, uint32_t tag, const char *msg)
{
    if (!tag || tag > e->boot.inflight.n)
        return;
    bbe__inflight *f = &e->boot.inflight.v[tag - 1];
    if (f->used && !f->failed) {
        f->failed = true;
        snprintf(f->why, sizeof f->why, "%s", msg ? msg : "an op failed");
    }
}

void bbe__boot_handle_done(bb_engine *e, uint32_t tag, int status, const char *msg)
{
    if (!tag || tag > e->boot.inflight.n || !e->boot.inflight.v[tag - 1].used)
        return;
    finish(e, tag, status == BB_OK, msg);
}

/* Parked ops go back to the front of the frontier, in their order. */
void bbe__boot_unpark(bb_engine *e)
{
    size_t n = e->parked.n;
    if (!n)
        return;
    e->parked.n = 0;
    for (size_t k = n; k-- > 0;) {
        struct bbe__fentry f = e->parked.v[k];
        if (e->fr_n == e->fr_cap) {
            /* grow through a regular push, then rotate it to the front */
            bbe__frontier_push(e, f.op, f.x);
            f.x->refs--; /* the parked entry already held its reference */
            e->fr_n--;
        }
        e->fr_head = (e->fr_head + e->fr_cap - 1) & (e->fr_cap - 1);
        e->fr[e->fr_head] = f;
        e->fr_n++;
    }
}

static void fire_module(bb_engine *e, bbe__boot_req *r)
{
    const bbe__modboot *m = &e->boot.mods[r->idx];
    bbe__graph *g = &e->graphs[m->graph];
    uint32_t tag = slot_alloc(e, false, r->idx, g->touch);
    bbe__exec *x = tag ? bbe__exec_new(e, g, bbe__exec_id_new(e)) : NULL;
    if (!x) {
        if (tag)
            finish(e, tag, false, "out of memory");
        return;
    }
    if (BBE__TRACING(e, BB_TRACE_BOOTSTRAP))
        bbe__trace(e, BB_TRACE_BOOTSTRAP, "bootstrap_start", x->id, BBE__NONE,
                  e->targets[m->target].name, 0);
    x->boot = tag;
    e->boot.inflight.v[tag - 1].live = 1;
    for (uint32_t i = 0; i < r->n; i++) {
        bbe__write(e, x, r->in[i].site, r->in[i].v, r->in[i].charged);
        r->in[i].v = NULL;
        r->in[i].charged = 0;
    }
    bbe__push_sources(e, x);
    bbe__exec_unref(e, x);
}

static void fire_component(bb_engine *e, bbe__boot_req *r)
{
    bbe__comp *c = &e->comps[r->idx];
    uint64_t *touch = e->boot.comp_touch + (size_t)r->idx * e->boot.touch_words;
    uint32_t tag = slot_alloc(e, true, r->idx, touch);
    if (!tag)
        return;
    bbe__handle *h = bbe__handle_new(e, BBE__HK_BOOTSTRAP);
    if (!h) {
        finish(e, tag, false, "out of memory");
        return;
    }
    h->boot = tag;
    bb_error err = {0};
    bb_dispatch_result res = c->type->bootstrap(c->inst, &c->ctx.pub, &h->pub, &err);
    if (res == BB_DISPATCH_LATER) {
        e->boot.inflight.v[tag - 1].pending_handle = true;
        return;
    }
    /* Done inline: the handle is spent whatever the component did with it. */
    if (bbe__handle_drop(e, h))
        bbe__handle_retire(e, h);
    finish(e, tag, res == BB_DISPATCH_NOW_OK, err.msg[0] ? err.msg : NULL);
}

static void req_release(bb_engine *e, bbe__boot_req *r)
{
    for (uint32_t i = 0; r->in && i < r->n; i++) {
        bb_value_unref(r->in[i].v);
        bbe__budget_release(e, r->in[i].charged);
    }
    free(r->in);
    r->in = NULL;
    r->n = 0;
}

static void fire(bb_engine *e, bbe__boot_req *r)
{
    if (r->kind == BB_BOOTSTRAP_SLOTS)
        fire_component(e, r);
    else
        fire_module(e, r);
    req_release(e, r);
}

static bool queued(const bb_engine *e, const bbe__boot_req *r)
{
    bool comp = r->kind == BB_BOOTSTRAP_SLOTS;
    if (in_flight(e, comp, r->idx))
        return true;
    for (size_t i = 0; i < e->boot.waiting.n; i++) {
        const bbe__boot_req *w = &e->boot.waiting.v[i];
        if ((w->kind == BB_BOOTSTRAP_SLOTS) == comp && w->idx == r->idx)
            return true;
    }
    return false;
}

void bbe__boot_stage(bb_engine *e, bbe__ingress_ev *ev)
{
    e->boot.all_blocked = false; /* new requests may unblock the ALL walk */
    if (ev->u.boot.all && !e->boot.all_armed && !e->boot.pulses_fired) {
        e->boot.all_armed = true;
        e->boot.next_idx = 0;
    }
    for (uint32_t i = 0; i < ev->u.boot.n; i++) {
        bbe__boot_req *r = &ev->u.boot.reqs[i];
        if (queued(e, r)) {
            bbe__step_infra(e, BB_INFRA_BOOTSTRAP_REJECTED, 0, NULL, 0,
                           "AlreadyTransitivelyQueued: %s",
                           r->kind == BB_BOOTSTRAP_SLOTS ? e->comps[r->idx].slot
                                                         : e->targets[e->boot.mods[r->idx].target].name);
            continue;
        }
        if (BBE__ARR_PUSH(&e->boot.waiting, *r) == 0) {
            r->in = NULL; /* moved */
            r->n = 0;
        }
    }
}

void bbe__boot_progress(bb_engine *e)
{
    bbe__bootstate *b = &e->boot;
    /* staged requests whose touch set is free now */
    for (size_t i = 0; i < b->waiting.n;) {
        bbe__boot_req r = b->waiting.v[i];
        if (conflicts(e, req_touch(e, &r))) {
            i++;
            continue;
        }
        memmove(&b->waiting.v[i], &b->waiting.v[i + 1], (b->waiting.n - i - 1) * sizeof r);
        b->waiting.n--;
        fire(e, &r);
    }
    /* ALL: one module at a time, in install order. A module already done is
     * skipped; one whose bootstrap takes inputs waits for the host's
     * ModuleRequests (WaitingForInput) instead of running without them. */
    b->all_blocked = false;
    while (b->all_armed) {
        bool busy = false;
        for (size_t i = 0; i < b->inflight.n && !busy; i++)
            busy = b->inflight.v[i].used && !b->inflight.v[i].component;
        if (busy)
            return;
        if (b->next_idx < b->n_mods) {
            const bbe__modboot *m = &b->mods[b->next_idx];
            if (m->done) {
                b->next_idx++;
                continue;
            }
            bbe__boot_req r = {.kind = BB_BOOTSTRAP_MODULE_NAMES, .idx = b->next_idx};
            if (queued(e, &r))
                return; /* staged by the host: it fires when its touch set is free */
            if (e->graphs[m->graph].n_formals) {
                b->all_blocked = true;
                return;
            }
            b->next_idx++;
            fire(e, &r);
            continue; /* an empty body completes inline: seed the next one */
        }
        b->all_armed = false;
        if (!b->pulses_fired) {
            b->pulses_fired = true;
            for (uint32_t k = 0; k < e->n_pulse_ops; k++)
                bbe__fire_op_output(e, e->pulse_ops[k], bbe__trigger(e), 0);
        }
    }
}

void bbe__boot_announce(bb_engine *e)
{
    for (size_t i = 0; i < e->boot.inflight.n; i++) {
        bbe__inflight *f = &e->boot.inflight.v[i];
        if (!f->used || f->announced)
            continue;
        f->announced = true;
        bb_step *st = bbe__step_push(e, BB_STEP_WAITING_ON_BOOTSTRAP, 0);
        if (!st)
            continue;
        if (f->component)
            st->u.bootstrap.slot = e->comps[f->idx].slot;
        else
            st->u.bootstrap.target = e->targets[e->boot.mods[f->idx].target].name;
    }
}

/* A run_bootstrap request not staged yet. Only the engine thread takes from
 * the ingress, so walking the pushed nodes from it is safe. */
static bool staged_in_ingress(const bb_engine *e)
{
    for (const bbe__ingress_ev *ev = atomic_load_explicit(&((bb_engine *)e)->ing.head,
                                                         memory_order_acquire);
         ev; ev = ev->next)
        if (ev->kind == BBE__IN_BOOTSTRAP)
            return true;
    return false;
}

bb_bootstrap_status bb_engine_bootstrap_status(const bb_engine *e)
{
    if (e->boot.n_inflight)
        return BB_BOOTSTRAP_RUNNING;
    if (e->boot.waiting.n || (e->boot.all_armed && e->boot.next_idx < e->boot.n_mods) ||
        staged_in_ingress(e))
        return BB_BOOTSTRAP_WAITING_FOR_INPUT;
    return BB_BOOTSTRAP_IDLE;
}

void bbe__boot_free(bb_engine *e)
{
    for (size_t i = 0; i < e->boot.waiting.n; i++)
        req_release(e, &e->boot.waiting.v[i]);
    BBE__ARR_FREE(&e->boot.waiting);
    BBE__ARR_FREE(&e->boot.inflight);
    e->boot.n_inflight = 0;
}

/* ---- the host entry point (thread-safe: reads install tables only) ---------------------- */

static int find_module(const bb_engine *e, const char *name)
{
    for (uint32_t i = 0; name && i < e->n_targets; i++)
        if (e->targets[i].boot != BBE__NONE &&
            (strcmp(e->targets[i].name, name) == 0 ||
             strcmp(e->graphs[e->targets[i].graph].name, name) == 0))
            return (int)e->targets[i].boot;
    return -1;
}

static int find_slot(const bb_engine *e, const char *slot)
{
    for (uint32_t i = 0; slot && i < e->n_comps; i++)
        if (strcmp(e->comps[i].slot, slot) == 0 && e->comps[i].type->bootstrap)
            return (int)i;
    return -1;
}

/* COMPONENTS: SLOTS of every component that has a bootstrap, in creation
 * order (dependencies first); nothing to do when none has one. */
static int run_component_bootstraps(bb_engine *e, bb_error *err)
{
    const char **names = calloc(e->n_comps ? e->n_comps : 1, sizeof *names);
    if (!names)
        return bb_error_set(err, BB_ENOMEM, "run_bootstrap: out of memory");
    size_t n = 0;
    for (uint32_t k = 0; k < e->n_comps; k++) {
        const bbe__comp *c = &e->comps[e->comp_order ? e->comp_order[k] : k];
        if (c->type->bootstrap)
            names[n++] = c->slot;
    }
    bb_bootstrap_target slots = {.kind = BB_BOOTSTRAP_SLOTS, .names = names, .n_names = n};
    int rc = n ? bb_engine_run_bootstrap(e, &slots, err) : BB_OK;
    free(names);
    return rc;
}

int bb_engine_run_bootstrap(bb_engine *e, const bb_bootstrap_target *t, bb_error *err)
{
    if (!e->installed)
        return bb_error_set(err, BB_ESTATE, "run_bootstrap: nothing installed");
    if (!t)
        return bb_error_set(err, BB_EINVAL, "run_bootstrap: NULL target");
    if (t->kind == BB_BOOTSTRAP_COMPONENTS)
        return run_component_bootstraps(e, err);
    if (t->kind == BB_BOOTSTRAP_FRESH) {
        bb_bootstrap_target all = {.kind = BB_BOOTSTRAP_ALL};
        int rc = run_component_bootstraps(e, err);
        return rc ? rc : bb_engine_run_bootstrap(e, &all, err);
    }
    size_t n = t->kind == BB_BOOTSTRAP_MODULE_REQUESTS ? t->n_requests
               : t->kind == BB_BOOTSTRAP_ALL         ? 0
                                                     : t->n_names;
    if (n > 4096)
        return bb_error_set(err, BB_ELIMIT, "run_bootstrap: %zu entries", n);
    bbe__ingress_ev *ev = calloc(1, sizeof *ev);
    bbe__boot_req *reqs = calloc(n ? n : 1, sizeof *reqs);
    if (!ev || !reqs) {
        free(ev);
        free(reqs);
        return bb_error_set(err, BB_ENOMEM, "run_bootstrap: out of memory");
    }
    ev->kind = BBE__IN_BOOTSTRAP;
    ev->u.boot.all = t->kind == BB_BOOTSTRAP_ALL;
    ev->u.boot.reqs = reqs;
    int rc = BB_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        bbe__boot_req *r = &reqs[i];
        const char *name = t->kind == BB_BOOTSTRAP_MODULE_REQUESTS ? t->requests[i].target
                                                                    : t->names[i];
        r->kind = t->kind;
        int idx = t->kind == BB_BOOTSTRAP_SLOTS ? find_slot(e, name) : find_module(e, name);
        if (idx < 0) {
            rc = bb_error_set(err, BB_ENOTFOUND, "run_bootstrap: Unknown%s '%s'",
                              t->kind == BB_BOOTSTRAP_SLOTS ? "Slot" : "Target",
                              name ? name : "(null)");
            break;
        }
        r->idx = (uint32_t)idx;
        for (size_t k = 0; k < i; k++)
            if (reqs[k].idx == r->idx) {
                rc = bb_error_set(err, BB_EINVAL, "run_bootstrap: AlreadyTransitivelyQueued: '%s' twice in one batch", name);
                break;
            }
        if (rc || t->kind == BB_BOOTSTRAP_SLOTS)
            continue;
        const bbe__graph *g = &e->graphs[e->boot.mods[r->idx].graph];
        const bb_bootstrap_request *q = t->kind == BB_BOOTSTRAP_MODULE_REQUESTS ? &t->requests[i] : NULL;
        size_t nin = q ? q->n_inputs : 0;
        if (nin > g->n_formals) {
            rc = bb_error_set(err, BB_EINVAL, "run_bootstrap %s: UnknownInput (%zu inputs, %u formals)",
                              name, nin, g->n_formals);
            break;
        }
        r->in = calloc(g->n_formals ? g->n_formals : 1, sizeof *r->in);
        if (!r->in) {
            rc = bb_error_set(err, BB_ENOMEM, "run_bootstrap: out of memory");
            break;
        }
        for (uint32_t f = 0; f < g->n_formals && !rc; f++) {
            const char *formal = g->fn->inputs.v[f];
            const bb_engine_input *in = NULL;
            for (size_t k = 0; k < nin; k++)
                if (q->inputs[k].name && strcmp(q->inputs[k].name, formal) == 0)
                    in = &q->inputs[k];
            if (!in) {
                rc = bb_error_set(err, BB_EINVAL, "run_bootstrap %s: MissingInput '%s'", name, formal);
                break;
            }
            size_t len = in->value ? 0 : in->len;
            if (!bbe__budget_charge(e, len)) {
                rc = bb_error_set(err, BB_EBUDGET, "run_bootstrap %s: BudgetExceeded", name);
                break;
            }
            rc = bbe__decode_input(e, g, g->formals[f], in, &r->in[r->n], err);
            if (rc) {
                bbe__budget_release(e, len);
                break;
            }
            r->in[r->n++].charged = len;
        }
        for (size_t k = 0; k < nin && !rc; k++) {
            bool known = false;
            for (uint32_t f = 0; f < g->n_formals && !known; f++)
                known = q->inputs[k].name && strcmp(q->inputs[k].name, g->fn->inputs.v[f]) == 0;
            if (!known)
                rc = bb_error_set(err, BB_ENOTFOUND, "run_bootstrap %s: UnknownInput '%s'", name,
                                  q->inputs[k].name ? q->inputs[k].name : "(null)");
        }
    }
    ev->u.boot.n = (uint32_t)n;
    if (rc) {
        bbe__ingress_ev_free(e, ev);
        return rc;
    }
    rc = bbe__ingress_push(e, ev);
    if (rc) {
        bbe__ingress_ev_free(e, ev);
        return bb_error_set(err, rc, "run_bootstrap: ingress full");
    }
    return BB_OK;
}

/* ---- snapshot section "bootstrap" --------------------------------------------------------------
 * The ALL walk (armed, next module, Pulse fired), each module bootstrap's
 * done flag (their number checked against the install's), the in-flight
 * slots (used, component or module, index, live frames, failed and why)
 * and the staged requests (kind, index, input values). A component
 * bootstrap in flight cannot keep its completion handle: it is staged
 * again. Restored after the executions, whose bootstrap tags must name a
 * module bootstrap in flight. */

#define MAX_INFLIGHT 4096 /* bootstrap slots (frames carry a tag <= this) */

void bbe__snap_put_boot_req(bbe__snap_out *o, const bbe__boot_req *q)
{
    bbe__snap_put_u(o, (uint64_t)q->kind);
    bbe__snap_put_u(o, q->idx);
    bbe__snap_put_in_values(o, q->in, q->n);
}

/* A staged request: kind, index, then its inputs for the bootstrap's graph.
 * false (the section failed) when it names no bootstrap of the install. */
bool bbe__snap_read_boot_req(bb_engine *e, bbe__snap_in *in, bbe__boot_req *q)
{
    size_t at = in->r.pos;
    q->kind = (int)bbe__snap_max(in, BB_BOOTSTRAP_SLOTS, "a bootstrap kind out of range");
    q->idx = (uint32_t)bbe__snap_max(in, UINT32_MAX, "a bootstrap index over 32 bits");
    if (in->r.failed)
        return false;
    if (q->kind < BB_BOOTSTRAP_MODULE_NAMES ||
        (q->kind == BB_BOOTSTRAP_SLOTS ? q->idx >= e->n_comps : q->idx >= e->boot.n_mods)) {
        bbe__snap_fail(in, at, "a bootstrap request for no bootstrap of this install");
        return false;
    }
    uint32_t g = q->kind == BB_BOOTSTRAP_SLOTS ? 0 : e->boot.mods[q->idx].graph;
    q->in = bbe__snap_in_values(e, in, g, &q->n);
    return !in->r.failed;
}

int bbe__snap_write_bootstrap(bb_engine *e, bbe__snap_out *o, bb_error *err)
{
    (void)err;
    bbe__snap_put_u(o, e->boot.all_armed);
    bbe__snap_put_u(o, e->boot.next_idx);
    bbe__snap_put_u(o, e->boot.pulses_fired);
    bbe__snap_put_u(o, e->boot.n_mods);
    for (uint32_t i = 0; i < e->boot.n_mods; i++)
        bbe__snap_put_u(o, e->boot.mods[i].done);
    bbe__snap_put_u(o, e->boot.inflight.n);
    for (size_t i = 0; i < e->boot.inflight.n; i++) {
        const bbe__inflight *f = &e->boot.inflight.v[i];
        bbe__snap_put_u(o, f->used);
        bbe__snap_put_u(o, f->component);
        bbe__snap_put_u(o, f->idx);
        bbe__snap_put_u(o, f->live);
        bbe__snap_put_u(o, f->failed);
        bb_writer_put_str(&o->w, f->failed ? f->why : "");
    }
    bbe__snap_put_u(o, e->boot.waiting.n);
    for (size_t i = 0; i < e->boot.waiting.n; i++)
        bbe__snap_put_boot_req(o, &e->boot.waiting.v[i]);
    return BB_OK;
}

/* One in-flight slot. */
static void read_inflight(bb_engine *e, bbe__snap_in *in)
{
    size_t at = in->r.pos, wl;
    bbe__inflight f = {0};
    f.used = bbe__snap_flag(in);
    f.component = bbe__snap_flag(in);
    f.idx = (uint32_t)bbe__snap_max(in, UINT32_MAX, "a bootstrap index over 32 bits");
    f.live = (uint32_t)bbe__snap_max(in, UINT32_MAX, "a frame count over 32 bits");
    f.failed = bbe__snap_flag(in);
    const uint8_t *why = bbe__snap_bytes(in, &wl);
    if (in->r.failed)
        return;
    snprintf(f.why, sizeof f.why, "%.*s", (int)(wl < sizeof f.why ? wl : sizeof f.why - 1),
             (const char *)why);
    if (f.used && (f.component ? f.idx >= e->n_comps : f.idx >= e->boot.n_mods)) {
        bbe__snap_fail(in, at, "a bootstrap in flight that is not of this install");
        return;
    }
    if (f.used && f.component) {
        /* its completion handle is gone: stage it again */
        bbe__boot_req q = {.kind = BB_BOOTSTRAP_SLOTS, .idx = f.idx};
        if (BBE__ARR_PUSH(&e->boot.waiting, q))
            bbe__snap_nomem(in);
        f.used = false;
    } else if (f.used) {
        f.touch = e->graphs[e->boot.mods[f.idx].graph].touch;
        e->boot.n_inflight++;
    }
    if (BBE__ARR_PUSH(&e->boot.inflight, f))
        bbe__snap_nomem(in);
}

int bbe__snap_read_bootstrap(bb_engine *e, bbe__snap_in *in, bb_error *err)
{
    (void)err;
    e->boot.all_armed = bbe__snap_flag(in);
    e->boot.next_idx = (uint32_t)bbe__snap_max(in, e->boot.n_mods, "a next module past the last");
    e->boot.pulses_fired = bbe__snap_flag(in);
    bbe__snap_expect(in, e->boot.n_mods, "a module bootstrap count that is not this install's");
    for (uint32_t i = 0; i < e->boot.n_mods && !in->r.failed; i++)
        e->boot.mods[i].done = bbe__snap_flag(in);
    size_t at = in->r.pos;
    size_t n = bbe__snap_count(in, MAX_INFLIGHT, "too many bootstraps in flight");
    for (size_t i = 0; i < n && !in->r.failed; i++)
        read_inflight(e, in);
    for (size_t i = 0; i < in->n_frames && !in->r.failed; i++) {
        uint32_t tag = in->frames[i]->boot;
        if (tag && (tag > e->boot.inflight.n || !e->boot.inflight.v[tag - 1].used ||
                    e->boot.inflight.v[tag - 1].component))
            bbe__snap_fail(in, at, "an execution tagged with no module bootstrap in flight");
    }
    n = bbe__snap_count(in, BBE__SNAP_MAX_COUNT, "too many staged bootstraps");
    for (size_t i = 0; i < n && !in->r.failed; i++) {
        bbe__boot_req q = {0};
        if (!bbe__snap_read_boot_req(e, in, &q)) {
            free(q.in);
            break;
        }
        if (BBE__ARR_PUSH(&e->boot.waiting, q)) {
            free(q.in);
            bbe__snap_nomem(in);
        }
    }
    return BB_OK;
}
