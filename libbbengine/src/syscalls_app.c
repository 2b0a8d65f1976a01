/*
 * syscalls_app.c — the host-facing framework ops: AppEmit / AppNotify
 * (EngineStep::AppEvent from anywhere in the graph, IR_AND_DSL.md 5a
 * "Engine event channels"), Record (bounded per-node ring + Telemetry step)
 * and IncrMetric (named counters resolved to dense indexes at install).
 */
#include <string.h>

#include "libbbengine/src/syscalls.h"

BBE__SYSINIT(bbe__init_named)
{
    bbe__opst *st = bbe__opst_new(ins, op);
    if (!st)
        return BB_ENOMEM;
    st->name = bbe__attr_str(ins, op->node, "name");
    if (!st->name)
        return bbe__node_malformed(ins, op, err, "%s needs a name attribute", op->op_type);
    return 0;
}

BBE__SYSINIT(bbe__init_incr_metric)
{
    int rc = bbe__init_named(ins, op, err);
    if (rc)
        return rc;
    bool found;
    op->st->i = bbe__attr_int(op->node, "delta", 1, &found);
    op->st->idx = bbe__install_metric(ins, op->st->name);
    return op->st->idx == BBE__NONE ? BB_ENOMEM : 0;
}

BBE__SYSCALL(bbe__sys_app_emit)
{
    (void)out;
    const bbe__op *op = &e->ops[opi];
    bb_step *st = bbe__step_push(e, BB_STEP_APP_EVENT, x->id);
    if (!st)
        return bbe__fail(e, "out of memory");
    st->u.app.target = x->g->target ? x->g->target : x->g->name;
    st->u.app.topic = op->st->name;
    st->u.app.value = bb_value_ref(in[0]);
    e->c[BBE__C_APP_EVENTS]++;
    return BBE__R_DONE;
}

BBE__SYSCALL(bbe__sys_record)
{
    (void)out;
    const bbe__op *op = &e->ops[opi];
    size_t cap = e->caps.record_ring;
    bbe__record *r;
    if (e->rec_n == cap) {
        r = &e->records[e->rec_head];
        bb_value_unref(r->v);
        e->rec_head = (e->rec_head + 1) % cap;
        e->rec_n--;
    }
    r = &e->records[(e->rec_head + e->rec_n) % cap];
    r->name = op->st->name;
    r->v = bb_value_ref(in[0]);
    e->rec_n++;
    bb_step *st = bbe__step_push(e, BB_STEP_TELEMETRY, x->id);
    if (st) {
        st->u.telemetry.name = op->st->name;
        st->u.telemetry.record = bb_value_ref(in[0]);
    }
    return BBE__R_DONE;
}

BBE__SYSCALL(bbe__sys_incr_metric)
{
    (void)in, (void)out;
    const bbe__op *op = &e->ops[opi];
    bbe__metric *m = &e->metrics[op->st->idx];
    m->value += (uint64_t)op->st->i;
    bb_step *st = bbe__step_push(e, BB_STEP_TELEMETRY, x->id);
    if (st) {
        st->u.telemetry.name = m->name;
        st->u.telemetry.delta = op->st->i;
        st->u.telemetry.value = m->value;
    }
    return BBE__R_DONE;
}
