/*
 * syscalls_state.c — framework ops with engine-side state or time: After /
 * Sleep (timer suspension), Limit.Acquire / Limit.Release (named counting
 * semaphores, auto-released when the holding execution finishes),
 * Serialize.Enqueue / Dequeue (named FIFOs; a dequeue on an empty queue
 * parks until a value arrives), Hold.Stash / Flush, and the install-time
 * parsing of the event sources (Interval, EventSource, LifecyclePhase).
 */
#include <stdlib.h>
#include <string.h>

#include "libbbengine/src/snapshot.h"
#include "libbbengine/src/syscalls.h"

/* ---- After / Sleep --------------------------------------------------------------- */

BBE__SYSCALL(bbe__sys_after)
{
    (void)in, (void)out;
    const bbe__op *op = &e->ops[opi];
    uint64_t at = e->now_ns + (uint64_t)op->st->i;
    if (bbe__timer_add(e, at, BBE__T_PARK, opi, 0, 0, x))
        return bbe__fail(e, "out of memory scheduling a timer");
    bbe__park_begin(e, x);
    return BBE__R_ASYNC;
}

static int init_delay(bbe__install *ins, bbe__op *op, bb_error *err, const char *attr)
{
    bool found;
    bbe__opst *st = bbe__opst_new(ins, op);
    if (!st)
        return BB_ENOMEM;
    st->i = bbe__attr_int(op->node, attr, 0, &found);
    if (!found || st->i < 0)
        return bbe__node_malformed(ins, op, err, "%s needs a non-negative %s attribute",
                                  op->op_type, attr);
    return 0;
}

BBE__SYSINIT(bbe__init_after) { return init_delay(ins, op, err, "delay_ns"); }
BBE__SYSINIT(bbe__init_sleep) { return init_delay(ins, op, err, "duration_ns"); }

BBE__SYSINIT(bbe__init_interval)
{
    bool found;
    bbe__opst *st = bbe__opst_new(ins, op);
    if (!st)
        return BB_ENOMEM;
    st->i = bbe__attr_int(op->node, "period_ns", 0, &found);
    if (st->i <= 0)
        return bbe__node_malformed(ins, op, err, "Interval needs period_ns > 0");
    return 0;
}

BBE__SYSINIT(bbe__init_event_source)
{
    bool found;
    bbe__opst *st = bbe__opst_new(ins, op);
    if (!st)
        return BB_ENOMEM;
    st->i = bbe__attr_int(op->node, "kind", -1, &found);
    if (st->i < 0)
        return bbe__node_malformed(ins, op, err, "EventSource needs kind >= 0");
    return 0;
}

BBE__SYSINIT(bbe__init_lifecycle)
{
    bool found;
    bbe__opst *st = bbe__opst_new(ins, op);
    if (!st)
        return BB_ENOMEM;
    st->i = bbe__attr_int(op->node, "phase", 0, &found);
    if (!found)
        return bbe__node_malformed(ins, op, err, "LifecyclePhase needs a phase attribute");
    return 0;
}

/* ---- Limit.Acquire / Limit.Release ------------------------------------------------- */

BBE__SYSINIT(bbe__init_limit)
{
    bool found;
    bbe__opst *st = bbe__opst_new(ins, op);
    if (!st)
        return BB_ENOMEM;
    const char *name = bbe__attr_str(ins, op->node, "name");
    if (!name)
        return bbe__node_malformed(ins, op, err, "%s needs a name attribute", op->op_type);
    st->i = bbe__attr_int(op->node, "n", 1, &found);
    if (st->i < 1)
        return bbe__node_malformed(ins, op, err, "%s n=%lld (must be >= 1)", op->op_type,
                                  (long long)st->i);
    st->name = name;
    st->idx = bbe__install_sema(ins, name, strcmp(op->op_type, "Limit.Acquire") == 0 ? st->i : 0, err);
    return st->idx == BBE__NONE ? BB_ENOMEM : 0;
}

static bool hold_add(bbe__exec *x, uint32_t sema)
{
    uint32_t *l = realloc(x->limits, (x->n_limits + 1) * sizeof *l);
    if (!l)
        return false;
    x->limits = l;
    x->limits[x->n_limits++] = sema;
    return true;
}

static bool hold_remove(bbe__exec *x, uint32_t sema)
{
    for (uint32_t i = 0; i < x->n_limits; i++) {
        if (x->limits[i] == sema) {
            x->limits[i] = x->limits[--x->n_limits];
            return true;
        }
    }
    return false;
}

void bbe__sema_release(bb_engine *e, uint32_t idx)
{
    bbe__sema *s = &e->semas[idx];
    if (s->held > 0)
        s->held--;
    while (s->waiters.n && s->held < s->cap) {
        struct bbe__waiter w = s->waiters.v[0];
        memmove(s->waiters.v, s->waiters.v + 1, (s->waiters.n - 1) * sizeof *s->waiters.v);
        s->waiters.n--;
        if (!hold_add(w.x, idx)) {
            bbe__park_fail(e, w.op, w.x, "out of memory acquiring a limit");
            continue;
        }
        s->held++;
        bb_value *t = bbe__trigger(e);
        bbe__park_resume(e, w.op, w.x, &t, 1);
    }
}

BBE__SYSCALL(bbe__sys_limit_acquire)
{
    (void)in;
    const bbe__op *op = &e->ops[opi];
    bbe__sema *s = &e->semas[op->st->idx];
    if (s->held < s->cap && !s->waiters.n) {
        if (!hold_add(x, op->st->idx))
            return bbe__fail(e, "out of memory acquiring limit %s", s->name);
        s->held++;
        out[0] = bbe__trigger(e);
        return BBE__R_DONE;
    }
    if (BBE__ARR_PUSH(&s->waiters, ((struct bbe__waiter){opi, x})))
        return bbe__fail(e, "out of memory waiting on limit %s", s->name);
    bbe__park_begin(e, x);
    return BBE__R_ASYNC;
}

BBE__SYSCALL(bbe__sys_limit_release)
{
    (void)in, (void)out;
    uint32_t idx = e->ops[opi].st->idx;
    for (bbe__exec *h = x; h; h = h->parent) {
        if (hold_remove(h, idx)) {
            bbe__sema_release(e, idx);
            return BBE__R_DONE;
        }
    }
    return BBE__R_DONE; /* nothing held by this execution: no-op */
}

void bbe__semas_free(bb_engine *e)
{
    for (uint32_t i = 0; i < e->n_semas; i++)
        BBE__ARR_FREE(&e->semas[i].waiters);
    for (uint32_t i = 0; i < e->n_queues; i++) {
        bbe__queue *q = &e->queues[i];
        for (size_t k = q->head; k < q->items.n; k++)
            bb_value_unref(q->items.v[k]);
        BBE__ARR_FREE(&q->items);
        BBE__ARR_FREE(&q->waiters);
    }
    for (uint32_t i = 0; i < e->n_holds; i++)
        bb_value_unref(e->holds[i].v);
}

/* ---- Serialize.Enqueue / Dequeue ------------------------------------------------------ */

BBE__SYSINIT(bbe__init_queue)
{
    bbe__opst *st = bbe__opst_new(ins, op);
    if (!st)
        return BB_ENOMEM;
    const char *name = bbe__attr_str(ins, op->node, "queue");
    if (!name)
        return bbe__node_malformed(ins, op, err, "%s needs a queue attribute", op->op_type);
    st->name = name;
    st->idx = bbe__install_queue(ins, name);
    return st->idx == BBE__NONE ? BB_ENOMEM : 0;
}

BBE__SYSCALL(bbe__sys_enqueue)
{
    (void)x;
    const bbe__op *op = &e->ops[opi];
    bbe__queue *q = &e->queues[op->st->idx];
    if (op->n_out)
        out[0] = bbe__trigger(e);
    if (q->waiters.n) {
        struct bbe__waiter w = q->waiters.v[0];
        memmove(q->waiters.v, q->waiters.v + 1, (q->waiters.n - 1) * sizeof *q->waiters.v);
        q->waiters.n--;
        bb_value *v = bb_value_ref(in[0]);
        bbe__park_resume(e, w.op, w.x, &v, 1);
        return BBE__R_DONE;
    }
    if (q->head && q->head == q->items.n)
        q->head = q->items.n = 0;
    bb_value *v = bb_value_ref(in[0]);
    if (BBE__ARR_PUSH(&q->items, v)) {
        bb_value_unref(v);
        return bbe__fail(e, "out of memory enqueueing on %s", q->name);
    }
    return BBE__R_DONE;
}

BBE__SYSCALL(bbe__sys_dequeue)
{
    (void)in;
    const bbe__op *op = &e->ops[opi];
    bbe__queue *q = &e->queues[op->st->idx];
    if (q->head < q->items.n) {
        out[0] = q->items.v[q->head++];
        if (q->head == q->items.n)
            q->head = q->items.n = 0;
        return BBE__R_DONE;
    }
    if (BBE__ARR_PUSH(&q->waiters, ((struct bbe__waiter){opi, x})))
        return bbe__fail(e, "out of memory waiting on %s", q->name);
    bbe__park_begin(e, x);
    return BBE__R_ASYNC;
}

/* ---- Hold.Stash / Hold.Flush ------------------------------------------------------------ */

BBE__SYSINIT(bbe__init_hold)
{
    bbe__opst *st = bbe__opst_new(ins, op);
    if (!st)
        return BB_ENOMEM;
    const char *name = bbe__attr_str(ins, op->node, "slot");
    if (!name)
        return bbe__node_malformed(ins, op, err, "%s needs a slot attribute", op->op_type);
    st->name = name;
    st->idx = bbe__install_hold(ins, name);
    return st->idx == BBE__NONE ? BB_ENOMEM : 0;
}

BBE__SYSCALL(bbe__sys_stash)
{
    (void)x, (void)out;
    bbe__hold *h = &e->holds[e->ops[opi].st->idx];
    bb_value_unref(h->v);
    h->v = bb_value_ref(in[0]);
    return BBE__R_DONE;
}

BBE__SYSCALL(bbe__sys_flush)
{
    (void)x, (void)in;
    bbe__hold *h = &e->holds[e->ops[opi].st->idx];
    out[0] = h->v; /* empty hold: nothing flows */
    h->v = NULL;
    return BBE__R_DONE;
}

/* ---- snapshot sections "semaphores", "queues", "holds" --------------------------------------
 * Each is the install's table in install order, its length first (checked
 * against the install's): a semaphore's held count and its waiting ops; a
 * queue's items then its waiting Dequeue ops; a hold's value (or none). */

int bbe__snap_write_semaphores(bb_engine *e, bbe__snap_out *o, bb_error *err)
{
    (void)err;
    bbe__snap_put_u(o, e->n_semas);
    for (uint32_t i = 0; i < e->n_semas; i++) {
        bbe__snap_put_u(o, (uint64_t)e->semas[i].held);
        bbe__snap_put_waiters(o, e->semas[i].waiters.v, e->semas[i].waiters.n);
    }
    return BB_OK;
}

int bbe__snap_read_semaphores(bb_engine *e, bbe__snap_in *in, bb_error *err)
{
    (void)err;
    bbe__snap_expect(in, e->n_semas, "a semaphore count that is not this install's");
    for (uint32_t i = 0; i < e->n_semas && !in->r.failed; i++) {
        e->semas[i].held = (int64_t)bbe__snap_u(in);
        bbe__snap_waiters(e, in, &e->semas[i].waiters);
    }
    return BB_OK;
}

int bbe__snap_write_queues(bb_engine *e, bbe__snap_out *o, bb_error *err)
{
    (void)err;
    bbe__snap_put_u(o, e->n_queues);
    for (uint32_t i = 0; i < e->n_queues; i++) {
        const bbe__queue *q = &e->queues[i];
        bbe__snap_put_u(o, q->items.n - q->head);
        for (size_t k = q->head; k < q->items.n; k++)
            bbe__snap_put_value(o, q->items.v[k]);
        bbe__snap_put_waiters(o, q->waiters.v, q->waiters.n);
    }
    return BB_OK;
}

int bbe__snap_read_queues(bb_engine *e, bbe__snap_in *in, bb_error *err)
{
    (void)err;
    bbe__snap_expect(in, e->n_queues, "a queue count that is not this install's");
    for (uint32_t i = 0; i < e->n_queues && !in->r.failed; i++) {
        bbe__queue *q = &e->queues[i];
        size_t n = bbe__snap_count(in, BBE__SNAP_MAX_COUNT, "too many queued values");
        for (size_t k = 0; k < n && !in->r.failed; k++) {
            bb_value *v = bbe__snap_value(in);
            if (v && BBE__ARR_PUSH(&q->items, v)) {
                bb_value_unref(v);
                bbe__snap_nomem(in);
            }
        }
        bbe__snap_waiters(e, in, &q->waiters);
    }
    return BB_OK;
}

int bbe__snap_write_holds(bb_engine *e, bbe__snap_out *o, bb_error *err)
{
    (void)err;
    bbe__snap_put_u(o, e->n_holds);
    for (uint32_t i = 0; i < e->n_holds; i++)
        bbe__snap_put_value(o, e->holds[i].v);
    return BB_OK;
}

int bbe__snap_read_holds(bb_engine *e, bbe__snap_in *in, bb_error *err)
{
    (void)err;
    bbe__snap_expect(in, e->n_holds, "a hold count that is not this install's");
    for (uint32_t i = 0; i < e->n_holds && !in->r.failed; i++)
        e->holds[i].v = bbe__snap_value_or_null(in);
    return BB_OK;
}
