/*
 * syscalls_app.c — the host-facing framework ops: AppEmit / AppNotify
 * (EngineStep::AppEvent from anywhere in the graph, IR_AND_DSL.md 5a
 * "Engine event channels"), Record (bounded per-node ring + Telemetry step)
 * and IncrMetric (named counters resolved to dense indexes at install).
 */
#include <string.h>

#include "libbbengine/src/snapshot.h"
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
    BBE__ASSERT(cap > 0 && e->rec_n <= cap && e->rec_head < cap);
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

/* ---- snapshot sections "records", "metrics" --------------------------------------------------
 * records: the ring, oldest first, as (name, value); a name must be one an
 * op of the install records under (its string is then the install's).
 * metrics: the install's IncrMetric counters, their number first. */

int bbe__snap_write_records(bb_engine *e, bbe__snap_out *o, bb_error *err)
{
    (void)err;
    bbe__snap_put_u(o, e->rec_n);
    for (size_t i = 0; i < e->rec_n; i++) {
        const bbe__record *rec = &e->records[(e->rec_head + i) % e->caps.record_ring];
        bb_writer_put_str(&o->w, rec->name);
        bbe__snap_put_value(o, rec->v);
    }
    return BB_OK;
}

/* The install's copy of a record name (NULL: no op records under it). */
static const char *record_name(const bb_engine *e, const uint8_t *d, size_t len)
{
    for (uint32_t k = 0; k < e->n_ops; k++) {
        const bbe__op *op = &e->ops[k];
        if (op->st && op->st->name && strlen(op->st->name) == len &&
            memcmp(op->st->name, d, len) == 0)
            return op->st->name;
    }
    return NULL;
}

int bbe__snap_read_records(bb_engine *e, bbe__snap_in *in, bb_error *err)
{
    (void)err;
    size_t n = bbe__snap_count(in, e->caps.record_ring, "more records than the ring holds");
    for (size_t i = 0; i < n && !in->r.failed; i++) {
        size_t at = in->r.pos, len;
        const uint8_t *d = bbe__snap_bytes(in, &len);
        const char *name = in->r.failed ? NULL : record_name(e, d, len);
        if (!in->r.failed && !name)
            bbe__snap_fail(in, at, "a record name no op of this install records under");
        bb_value *v = bbe__snap_value(in);
        if (in->r.failed) {
            bb_value_unref(v);
            break;
        }
        e->records[e->rec_n].name = name;
        e->records[e->rec_n++].v = v;
    }
    return BB_OK;
}

int bbe__snap_write_metrics(bb_engine *e, bbe__snap_out *o, bb_error *err)
{
    (void)err;
    bbe__snap_put_u(o, e->n_metrics);
    for (uint32_t i = 0; i < e->n_metrics; i++)
        bbe__snap_put_u(o, e->metrics[i].value);
    return BB_OK;
}

int bbe__snap_read_metrics(bb_engine *e, bbe__snap_in *in, bb_error *err)
{
    (void)err;
    bbe__snap_expect(in, e->n_metrics, "a metric count that is not this install's");
    for (uint32_t i = 0; i < e->n_metrics && !in->r.failed; i++)
        e->metrics[i].value = bbe__snap_u(in);
    return BB_OK;
}
