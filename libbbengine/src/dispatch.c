/*
 * dispatch.c — the hot loop: pop the frontier, gather inputs, dispatch by
 * the kind stamped at install (ENGINE.md 8.1), write outputs.
 *
 *   SYSCALL     framework op: one indirect call to its C function
 *   ATOMIC      component op: type->dispatch(inst, ctx, call) with the
 *               op_index resolved at install
 *   CALL        function call: a fresh execution of the callee graph whose
 *               formals are the caller's values (refcounted, not copied) and
 *               whose results forward into the caller (ENGINE.md 8.4)
 *   UNRESOLVED  fails at invoke: "unresolved dispatch for <domain>::<op>"
 * Suspensions (component LATER, timers, semaphores, queues, batched
 * requests) keep a reference on the frame until they resume or fail.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libbbengine/src/engine_internal.h"

void bbe__op_failed(bb_engine *e, uint32_t opi, bbe__exec *x, const char *msg)
{
    const bbe__op *op = &e->ops[opi];
    e->c[BBE__C_OP_FAILED]++;
    bb_step *st = bbe__step_push(e, BB_STEP_OP_FAILED, x ? x->id : 0);
    if (st) {
        st->u.op_failed.node = op->label;
        st->u.op_failed.op_type = op->op_type;
        st->u.op_failed.domain = op->domain;
        st->u.op_failed.message = bbe__step_str(e, msg);
    }
    if (BBE__TRACING(e, BB_TRACE_INVOKE))
        bbe__trace(e, BB_TRACE_INVOKE, "op_failed", x ? x->id : 0, opi, msg, 0);
    if (x && x->boot)
        bbe__boot_op_failed(e, x->boot, msg);
    bbe__bus_publish(e, BB_EVENT_OP_FAILURE);
}

void bbe__park_begin(bb_engine *e, bbe__exec *x)
{
    x->refs++;
    e->pending_async++;
}

static void resume(bb_engine *e, uint32_t opi, bbe__exec *x, bb_value **outs, uint32_t n,
                   bool charged)
{
    const bbe__op *op = &e->ops[opi];
    for (uint32_t j = 0; j < n; j++) {
        if (!outs[j])
            continue;
        size_t c = charged ? bbe__value_size(outs[j]) : 0;
        if (j < op->n_out && op->out[j] != BBE__NONE) {
            bbe__write(e, x, op->out[j], outs[j], c);
        } else {
            bb_value_unref(outs[j]);
            bbe__budget_release(e, c);
        }
    }
    BBE__ASSERT(e->pending_async > 0);
    e->pending_async--;
    bbe__exec_unref(e, x);
}

void bbe__park_resume(bb_engine *e, uint32_t opi, bbe__exec *x, bb_value **outs, uint32_t n)
{
    resume(e, opi, x, outs, n, false);
}

void bbe__park_resume_charged(bb_engine *e, uint32_t opi, bbe__exec *x, bb_value **outs,
                             uint32_t n)
{
    resume(e, opi, x, outs, n, true);
}

void bbe__park_fail(bb_engine *e, uint32_t opi, bbe__exec *x, const char *msg)
{
    bbe__op_failed(e, opi, x, msg);
    BBE__ASSERT(e->pending_async > 0);
    e->pending_async--;
    bbe__exec_unref(e, x);
}

/* ---- component dispatch ---------------------------------------------------- */

static int run_atomic(bb_engine *e, uint32_t opi, const bbe__op *op, bbe__exec *x,
                      bb_value *const *in, bb_value **out)
{
    bbe__comp *c = &e->comps[op->comp];
    bbe__handle *h = e->spare;
    if (!h) {
        h = bbe__handle_new(e, BBE__HK_OP);
        if (!h)
            return bbe__fail(e, "out of memory minting a completion handle");
        e->spare = h;
    }
    bb_dispatch_call call = {
        .domain = op->domain,
        .op_type = op->op_type,
        .op_index = op->op_index,
        .inputs = in,
        .n_inputs = op->n_in,
        .n_outputs = op->n_out,
        .node = op->node,
        .completion = &h->pub,
    };
    bb_error err;
    bb_error_clear(&err);
    bb_dispatch_result r = c->type->dispatch(c->inst, &c->ctx.pub, &call, out, &err);
    if (BBE__UNLIKELY(atomic_load_explicit(&h->state, memory_order_acquire) != BBE__H_PENDING)) {
        /* The component completed the handle although it did not return
         * LATER: the handle is spent; its completion is discarded. */
        e->spare = NULL;
    }
    switch (r) {
    case BB_DISPATCH_NOW_OK:
        return BBE__R_DONE;
    case BB_DISPATCH_LATER:
        if (e->spare != h)
            return bbe__fail(e, "%s returned LATER after completing its handle", c->slot);
        e->spare = NULL;
        if (e->caps.max_pending_async && e->pending_async >= e->caps.max_pending_async) {
            bbe__handle_drop(e, h);
            bbe__handle_retire(e, h);
            return bbe__fail(e, "max_pending_async (%zu) reached", e->caps.max_pending_async);
        }
        h->attached = true;
        h->op = opi;
        h->x = x;
        bbe__park_begin(e, x);
        if (op->deadline_ns)
            bbe__timer_add(e, e->now_ns + op->deadline_ns, BBE__T_HANDLE_DEADLINE, opi, h->gen, 0, h);
        if (BBE__UNLIKELY(e->cfg.emit_op_steps)) {
            bb_step *st = bbe__step_push(e, BB_STEP_ASYNC_SUSPENDED, x->id);
            if (st) {
                st->u.op.node = op->label;
                st->u.op.cmd_id = h->cmd_id;
            }
        }
        return BBE__R_ASYNC;
    case BB_DISPATCH_NOW_ERR:
    default:
        for (uint32_t j = 0; j < op->n_out; j++) {
            bb_value_unref(out[j]);
            out[j] = NULL;
        }
        return bbe__fail(e, "%s", err.msg[0] ? err.msg : "component dispatch failed");
    }
}

/* ---- function call splice ------------------------------------------------------ */

static int run_call(bb_engine *e, uint32_t opi, const bbe__op *op, bbe__exec *x,
                    bb_value *const *in)
{
    bbe__graph *g = &e->graphs[op->comp];
    bbe__exec *c = bbe__exec_new(e, g, bbe__exec_id_new(e));
    if (!c)
        return bbe__fail(e, "out of memory calling %s", g->name);
    c->parent = x;
    c->call_op = opi;
    c->boot = x->boot;
    if (c->boot)
        e->boot.inflight.v[c->boot - 1].live++;
    x->refs++;
    if (x->inbound)
        *bbe__exec_set_inbound(c) = *x->inbound;
    uint32_t n = op->n_in < g->n_formals ? op->n_in : g->n_formals;
    for (uint32_t i = 0; i < n; i++)
        if (in[i])
            bbe__write(e, c, g->formals[i], bb_value_ref(in[i]), 0);
    bbe__push_sources(e, c);
    bbe__exec_unref(e, c);
    return BBE__R_DONE;
}

/* ---- the loop --------------------------------------------------------------------- */

/* emit_op_steps: OpCompleted when a value was written, OpTrigger when only
 * Triggers were, OpSink when nothing was (ENGINE.md 12.3). */
static void op_step(bb_engine *e, const bbe__op *op, const bbe__exec *x, bb_value *const *out)
{
    bool wrote = false, value = false;
    for (uint32_t j = 0; j < op->n_out; j++) {
        if (!out[j] || op->out[j] == BBE__NONE)
            continue;
        wrote = true;
        value |= !out[j]->type || out[j]->type->kind != BB_VK_TRIGGER;
    }
    bb_step *st = bbe__step_push(e, value ? BB_STEP_OP_COMPLETED
                                          : wrote ? BB_STEP_OP_TRIGGER : BB_STEP_OP_SINK, x->id);
    if (st)
        st->u.op.node = op->label;
}

static inline __attribute__((always_inline)) int run_op(bb_engine *e, uint32_t opi, bbe__exec *x)
{
    const bbe__op *op = &e->ops[opi];
    /* out[] is all NULL between ops: each run hands on or drops what its
     * op wrote and clears the entry as it goes */
    bb_value **in = e->in_buf, **out = e->out_buf;
    BBE__ASSERT(op->graph == x->g->index && op->n_in <= e->max_in && op->n_out <= e->max_out);
    for (uint32_t i = 0; i < op->n_in; i++) {
        uint32_t s = op->in[i];
        BBE__ASSERT(s == BBE__NONE || s < x->g->n_sites);
        in[i] = s == BBE__NONE ? NULL : x->slots[s].v;
    }
    int r;
    switch (op->disp) {
    case BBE__DISP_SYSCALL:
        r = op->fn(e, opi, x, in, out);
        break;
    case BBE__DISP_ATOMIC:
        r = run_atomic(e, opi, op, x, in, out);
        break;
    case BBE__DISP_CALL:
        r = run_call(e, opi, op, x, in);
        break;
    case BBE__DISP_CONST:
        r = BBE__R_DONE;
        break;
    default:
        r = bbe__fail(e, "unresolved dispatch for %s::%s", op->domain[0] ? op->domain : "ai.onnx",
                     op->op_type);
        break;
    }
    e->c[BBE__C_OPS]++;
    if (BBE__LIKELY(r == BBE__R_DONE)) {
        if (BBE__UNLIKELY(e->cfg.emit_op_steps))
            op_step(e, op, x, out);
        for (uint32_t j = 0; j < op->n_out; j++) {
            bb_value *v = out[j];
            if (!v)
                continue;
            out[j] = NULL;
            if (op->out[j] != BBE__NONE)
                bbe__write_inline(e, x, op->out[j], v, 0); /* asserts the site */
            else
                bb_value_unref(v);
        }
        return r;
    }
    for (uint32_t j = 0; j < op->n_out; j++) { /* a suspended op writes nothing */
        bb_value_unref(out[j]);
        out[j] = NULL;
    }
    if (r == BBE__R_FAIL)
        bbe__op_failed(e, opi, x, e->fail_msg);
    return r;
}

/* INVOKE tracing on: the same op run, timed by the host's trace clock. */
static __attribute__((noinline)) void run_op_traced(bb_engine *e, uint32_t opi, bbe__exec *x)
{
    bb_exec_id id = x->id;
    uint64_t t0 = e->trace_clock ? e->trace_clock(e->trace_clock_ud) : 0;
    int r = run_op(e, opi, x);
    uint64_t t1 = e->trace_clock ? e->trace_clock(e->trace_clock_ud) : 0;
    if (BBE__TRACING(e, BB_TRACE_INVOKE))
        bbe__trace_op(e, id, opi, r == BBE__R_FAIL ? "failed" : r == BBE__R_ASYNC ? "suspended" : "ok",
                     t1 > t0 ? t1 - t0 : 0);
}

bool bbe__op_locked(bb_engine *e, uint32_t opi, const bbe__exec *x)
{
    if (x->boot)
        return false; /* the bootstrap body (and its calls) run freely */
    const bbe__op *op = &e->ops[opi];
    if (op->disp != BBE__DISP_ATOMIC)
        return false; /* reaches no component */
    uint32_t w = op->comp / 64;
    uint64_t bit = 1ULL << (op->comp % 64);
    for (size_t i = 0; i < e->boot.inflight.n; i++) {
        const bbe__inflight *f = &e->boot.inflight.v[i];
        if (f->used && f->touch && (f->touch[w] & bit))
            return true;
    }
    return false;
}

void bbe__drain_frontier(bb_engine *e)
{
    size_t budget = e->cfg.cycle_op_budget;
    while (e->fr_n) {
        if (BBE__UNLIKELY(budget && e->cycle_ops >= budget)) {
            if (!e->budget_hit) {
                e->budget_hit = true;
                e->c[BBE__C_BUDGET_HITS]++;
                bb_step *st = bbe__step_push(e, BB_STEP_CYCLE_BUDGET_EXCEEDED, 0);
                if (st)
                    st->u.budget.ops = e->cycle_ops;
            }
            return;
        }
        BBE__ASSERT(e->fr_head < e->fr_cap && e->fr_n <= e->fr_cap);
        struct bbe__fentry f = e->fr[e->fr_head];
        e->fr_head = (e->fr_head + 1) & (e->fr_cap - 1);
        e->fr_n--;
        BBE__ASSERT(f.x->refs > 0); /* the entry holds one */
        if (BBE__UNLIKELY(e->boot.n_inflight) && bbe__op_locked(e, f.op, f.x)) {
            if (BBE__ARR_PUSH(&e->parked, f)) {
                bbe__op_failed(e, f.op, f.x, "out of memory parking an op");
                bbe__exec_unref(e, f.x);
            }
            continue;
        }
        e->cycle_ops++;
        if (BBE__TRACING(e, BB_TRACE_INVOKE))
            run_op_traced(e, f.op, f.x);
        else
            run_op(e, f.op, f.x);
        bbe__exec_unref(e, f.x);
    }
}
