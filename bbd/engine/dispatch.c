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

#include "bbd/engine/engine_internal.h"

void bb__op_failed(bb_engine *e, uint32_t opi, bb__exec *x, const char *msg)
{
    const bb__op *op = &e->ops[opi];
    e->c[BB__C_OP_FAILED]++;
    bb_step *st = bb__step_push(e, BB_STEP_OP_FAILED, x ? x->id : 0);
    if (st) {
        st->u.op_failed.node = op->label;
        st->u.op_failed.op_type = op->op_type;
        st->u.op_failed.domain = op->domain;
        st->u.op_failed.message = bb__step_str(e, msg);
    }
    if (BB__TRACING(e, BB_TRACE_INVOKE))
        bb__trace(e, BB_TRACE_INVOKE, "op_failed", x ? x->id : 0, opi, msg, 0);
    if (x && x->boot)
        bb__boot_op_failed(e, x->boot, msg);
    bb__bus_publish(e, BB_EVENT_OP_FAILURE);
}

void bb__park_begin(bb_engine *e, bb__exec *x)
{
    x->refs++;
    e->pending_async++;
}

static void resume(bb_engine *e, uint32_t opi, bb__exec *x, bb_value **outs, uint32_t n,
                   bool charged)
{
    const bb__op *op = &e->ops[opi];
    for (uint32_t j = 0; j < n; j++) {
        if (!outs[j])
            continue;
        size_t c = charged ? bb__value_size(outs[j]) : 0;
        if (j < op->n_out && op->out[j] != BB__NONE) {
            bb__write(e, x, op->out[j], outs[j], c);
        } else {
            bb_value_unref(outs[j]);
            bb__budget_release(e, c);
        }
    }
    e->pending_async--;
    bb__exec_unref(e, x);
}

void bb__park_resume(bb_engine *e, uint32_t opi, bb__exec *x, bb_value **outs, uint32_t n)
{
    resume(e, opi, x, outs, n, false);
}

void bb__park_resume_charged(bb_engine *e, uint32_t opi, bb__exec *x, bb_value **outs,
                             uint32_t n)
{
    resume(e, opi, x, outs, n, true);
}

void bb__park_fail(bb_engine *e, uint32_t opi, bb__exec *x, const char *msg)
{
    bb__op_failed(e, opi, x, msg);
    e->pending_async--;
    bb__exec_unref(e, x);
}

/* ---- component dispatch ---------------------------------------------------- */

static int run_atomic(bb_engine *e, uint32_t opi, const bb__op *op, bb__exec *x,
                      bb_value *const *in, bb_value **out)
{
    bb__comp *c = &e->comps[op->comp];
    bb__handle *h = e->spare;
    if (!h) {
        h = bb__handle_new(e, BB__HK_OP);
        if (!h)
            return bb__fail(e, "out of memory minting a completion handle");
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
    if (BB__UNLIKELY(atomic_load_explicit(&h->state, memory_order_acquire) != BB__H_PENDING)) {
        /* The component completed the handle although it did not return
         * LATER: the handle is spent; its completion is discarded. */
        e->spare = NULL;
    }
    switch (r) {
    case BB_DISPATCH_NOW_OK:
        return BB__R_DONE;
    case BB_DISPATCH_LATER:
        if (e->spare != h)
            return bb__fail(e, "%s returned LATER after completing its handle", c->slot);
        e->spare = NULL;
        if (e->caps.max_pending_async && e->pending_async >= e->caps.max_pending_async) {
            bb__handle_drop(e, h);
            bb__handle_retire(e, h);
            return bb__fail(e, "max_pending_async (%zu) reached", e->caps.max_pending_async);
        }
        h->attached = true;
        h->op = opi;
        h->x = x;
        bb__park_begin(e, x);
        if (op->deadline_ns)
            bb__timer_add(e, e->now_ns + op->deadline_ns, BB__T_HANDLE_DEADLINE, opi, h->gen, 0, h);
        if (BB__UNLIKELY(e->cfg.emit_op_steps)) {
            bb_step *st = bb__step_push(e, BB_STEP_ASYNC_SUSPENDED, x->id);
            if (st) {
                st->u.op.node = op->label;
                st->u.op.cmd_id = h->cmd_id;
            }
        }
        return BB__R_ASYNC;
    case BB_DISPATCH_NOW_ERR:
    default:
        for (uint32_t j = 0; j < op->n_out; j++) {
            bb_value_unref(out[j]);
            out[j] = NULL;
        }
        return bb__fail(e, "%s", err.msg[0] ? err.msg : "component dispatch failed");
    }
}

/* ---- function call splice ------------------------------------------------------ */

static int run_call(bb_engine *e, uint32_t opi, const bb__op *op, bb__exec *x,
                    bb_value *const *in)
{
    bb__graph *g = &e->graphs[op->comp];
    bb__exec *c = bb__exec_new(e, g, bb__exec_id_new(e));
    if (!c)
        return bb__fail(e, "out of memory calling %s", g->name);
    c->parent = x;
    c->call_op = opi;
    c->boot = x->boot;
    if (c->boot)
        e->boot.inflight.v[c->boot - 1].live++;
    x->refs++;
    if (x->inbound)
        *bb__exec_set_inbound(c) = *x->inbound;
    uint32_t n = op->n_in < g->n_formals ? op->n_in : g->n_formals;
    for (uint32_t i = 0; i < n; i++)
        if (in[i])
            bb__write(e, c, g->formals[i], bb_value_ref(in[i]), 0);
    bb__push_sources(e, c);
    bb__exec_unref(e, c);
    return BB__R_DONE;
}

/* ---- the loop --------------------------------------------------------------------- */

/* emit_op_steps: OpCompleted when a value was written, OpTrigger when only
 * Triggers were, OpSink when nothing was (ENGINE.md 12.3). */
static void op_step(bb_engine *e, const bb__op *op, const bb__exec *x, bb_value *const *out)
{
    bool wrote = false, value = false;
    for (uint32_t j = 0; j < op->n_out; j++) {
        if (!out[j] || op->out[j] == BB__NONE)
            continue;
        wrote = true;
        value |= !out[j]->type || out[j]->type->kind != BB_VK_TRIGGER;
    }
    bb_step *st = bb__step_push(e, value ? BB_STEP_OP_COMPLETED
                                          : wrote ? BB_STEP_OP_TRIGGER : BB_STEP_OP_SINK, x->id);
    if (st)
        st->u.op.node = op->label;
}

static inline __attribute__((always_inline)) int run_op(bb_engine *e, uint32_t opi, bb__exec *x)
{
    const bb__op *op = &e->ops[opi];
    /* out[] is all NULL between ops: each run hands on or drops what its
     * op wrote and clears the entry as it goes */
    bb_value **in = e->in_buf, **out = e->out_buf;
    for (uint32_t i = 0; i < op->n_in; i++) {
        uint32_t s = op->in[i];
        in[i] = s == BB__NONE ? NULL : x->slots[s].v;
    }
    int r;
    switch (op->disp) {
    case BB__DISP_SYSCALL:
        r = op->fn(e, opi, x, in, out);
        break;
    case BB__DISP_ATOMIC:
        r = run_atomic(e, opi, op, x, in, out);
        break;
    case BB__DISP_CALL:
        r = run_call(e, opi, op, x, in);
        break;
    case BB__DISP_CONST:
        r = BB__R_DONE;
        break;
    default:
        r = bb__fail(e, "unresolved dispatch for %s::%s", op->domain[0] ? op->domain : "ai.onnx",
                     op->op_type);
        break;
    }
    e->c[BB__C_OPS]++;
    if (BB__LIKELY(r == BB__R_DONE)) {
        if (BB__UNLIKELY(e->cfg.emit_op_steps))
            op_step(e, op, x, out);
        for (uint32_t j = 0; j < op->n_out; j++) {
            bb_value *v = out[j];
            if (!v)
                continue;
            out[j] = NULL;
            if (op->out[j] != BB__NONE)
                bb__write_inline(e, x, op->out[j], v, 0);
            else
                bb_value_unref(v);
        }
        return r;
    }
    for (uint32_t j = 0; j < op->n_out; j++) { /* a suspended op writes nothing */
        bb_value_unref(out[j]);
        out[j] = NULL;
    }
    if (r == BB__R_FAIL)
        bb__op_failed(e, opi, x, e->fail_msg);
    return r;
}

/* INVOKE tracing on: the same op run, timed by the host's trace clock. */
static __attribute__((noinline)) void run_op_traced(bb_engine *e, uint32_t opi, bb__exec *x)
{
    bb_exec_id id = x->id;
    uint64_t t0 = e->trace_clock ? e->trace_clock(e->trace_clock_ud) : 0;
    int r = run_op(e, opi, x);
    uint64_t t1 = e->trace_clock ? e->trace_clock(e->trace_clock_ud) : 0;
    if (BB__TRACING(e, BB_TRACE_INVOKE))
        bb__trace_op(e, id, opi, r == BB__R_FAIL ? "failed" : r == BB__R_ASYNC ? "suspended" : "ok",
                     t1 > t0 ? t1 - t0 : 0);
}

bool bb__op_locked(bb_engine *e, uint32_t opi, const bb__exec *x)
{
    if (x->boot)
        return false; /* the bootstrap body (and its calls) run freely */
    const bb__op *op = &e->ops[opi];
    if (op->disp != BB__DISP_ATOMIC)
        return false; /* reaches no component */
    uint32_t w = op->comp / 64;
    uint64_t bit = 1ULL << (op->comp % 64);
    for (size_t i = 0; i < e->boot.inflight.n; i++) {
        const bb__inflight *f = &e->boot.inflight.v[i];
        if (f->used && f->touch && (f->touch[w] & bit))
            return true;
    }
    return false;
}

void bb__drain_frontier(bb_engine *e)
{
    size_t budget = e->cfg.cycle_op_budget;
    while (e->fr_n) {
        if (BB__UNLIKELY(budget && e->cycle_ops >= budget)) {
            if (!e->budget_hit) {
                e->budget_hit = true;
                e->c[BB__C_BUDGET_HITS]++;
                bb_step *st = bb__step_push(e, BB_STEP_CYCLE_BUDGET_EXCEEDED, 0);
                if (st)
                    st->u.budget.ops = e->cycle_ops;
            }
            return;
        }
        struct bb__fentry f = e->fr[e->fr_head];
        e->fr_head = (e->fr_head + 1) & (e->fr_cap - 1);
        e->fr_n--;
        if (BB__UNLIKELY(e->boot.n_inflight) && bb__op_locked(e, f.op, f.x)) {
            if (BB__ARR_PUSH(&e->parked, f)) {
                bb__op_failed(e, f.op, f.x, "out of memory parking an op");
                bb__exec_unref(e, f.x);
            }
            continue;
        }
        e->cycle_ops++;
        if (BB__TRACING(e, BB_TRACE_INVOKE))
            run_op_traced(e, f.op, f.x);
        else
            run_op(e, f.op, f.x);
        bb__exec_unref(e, f.x);
    }
}
