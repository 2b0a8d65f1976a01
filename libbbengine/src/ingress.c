/*
 * ingress.c — the single thread-safe seam (ENGINE.md 2.2): a bounded
 * lock-free MPSC queue plus the host wake callback, and the entry points
 * that feed it (deliver_envelope, invoke, deliver_event, fire_lifecycle).
 *
 * Producers push onto a Treiber stack (one CAS); the engine takes the whole
 * stack at the start of phase 1 (one exchange) and reverses it into arrival
 * order, so there is no ABA hazard and no lock. Capacity is enforced with an
 * atomic counter: an overflowing push fails (BB_EFULL) and is counted in
 * ingress.dropped. Completions and worker-pool returns are "must" events that
 * bypass the capacity (they are bounded by the number of pending handles and
 * dropping them would strand a parked op). The wake callback is coalesced:
 * it runs on the first push after each drain.
 *
 * Entry points validate against the install tables (immutable after
 * install), apply the per-item caps, charge the byte budget before they
 * allocate, copy (Principle 1a: the caller's bytes are never retained) and
 * decode on the calling thread, so errors come back synchronously.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libbbengine/src/snapshot.h"
#include "libbbengine/src/syscalls.h"

int bbe__ingress_push(bb_engine *e, bbe__ingress_ev *ev)
{
    bbe__ingress *q = &e->ing;
    if (!ev->must) {
        size_t c = atomic_fetch_add_explicit(&q->count, 1, memory_order_relaxed);
        if (c >= q->capacity) {
            atomic_fetch_sub_explicit(&q->count, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&q->dropped, 1, memory_order_relaxed);
            return BB_EFULL;
        }
    }
    bbe__ingress_ev *head = atomic_load_explicit(&q->head, memory_order_relaxed);
    do {
        ev->next = head;
    } while (!atomic_compare_exchange_weak_explicit(&q->head, &head, ev, memory_order_release,
                                                    memory_order_relaxed));
    if (!atomic_exchange_explicit(&q->wake_pending, true, memory_order_acq_rel) && q->wake)
        q->wake(q->wake_ud);
    return BB_OK;
}

bbe__ingress_ev *bbe__ingress_take(bb_engine *e)
{
    bbe__ingress *q = &e->ing;
    atomic_store_explicit(&q->wake_pending, false, memory_order_release);
    bbe__ingress_ev *l = atomic_exchange_explicit(&q->head, NULL, memory_order_acquire);
    bbe__ingress_ev *fifo = NULL;
    size_t counted = 0;
    while (l) {
        bbe__ingress_ev *next = l->next;
        counted += !l->must;
        l->next = fifo;
        fifo = l;
        l = next;
    }
    if (counted)
        atomic_fetch_sub_explicit(&q->count, counted, memory_order_relaxed);
    return fifo;
}

static void in_values_release(bb_engine *e, bbe__in_value *in, uint32_t n)
{
    for (uint32_t i = 0; in && i < n; i++) {
        bb_value_unref(in[i].v);
        bbe__budget_release(e, in[i].charged);
    }
}

static void in_values_free(bb_engine *e, bbe__in_value *in, uint32_t n)
{
    in_values_release(e, in, n);
    free(in);
}

void bbe__ingress_ev_free(bb_engine *e, bbe__ingress_ev *ev)
{
    if (!ev)
        return;
    bbe__budget_release(e, ev->charged);
    switch (ev->kind) {
    case BBE__IN_ENVELOPE:
        bb_buffer_unref(ev->u.env.buf); /* the event is in the buffer's block */
        return;
    case BBE__IN_INVOKE:
        if (ev->u.inv.in_inline)
            in_values_release(e, ev->u.inv.in, ev->u.inv.n);
        else
            in_values_free(e, ev->u.inv.in, ev->u.inv.n);
        break;
    case BBE__IN_COMPLETION:
        for (uint32_t i = 0; ev->u.comp.outs && i < ev->u.comp.n; i++)
            bb_value_unref(ev->u.comp.outs[i]);
        bbe__budget_release(e, ev->u.comp.charged);
        free(ev->u.comp.outs);
        free(ev->u.comp.msg);
        break;
    case BBE__IN_BOOTSTRAP:
        for (uint32_t i = 0; ev->u.boot.reqs && i < ev->u.boot.n; i++)
            in_values_free(e, ev->u.boot.reqs[i].in, ev->u.boot.reqs[i].n);
        free(ev->u.boot.reqs);
        break;
    default:
        break;
    }
    free(ev);
}

void bbe__ingress_free(bb_engine *e)
{
    bbe__ingress_ev *l = bbe__ingress_take(e);
    while (l) {
        bbe__ingress_ev *next = l->next;
        if (l->kind == BBE__IN_COMPLETION && l->u.comp.h)
            bbe__handle_retire(e, l->u.comp.h);
        bbe__ingress_ev_free(e, l);
        l = next;
    }
}

static void process_invoke(bb_engine *e, bbe__ingress_ev *ev)
{
    bbe__graph *g = &e->graphs[ev->u.inv.target];
    if (BBE__TRACING(e, BB_TRACE_EVENT))
        bbe__trace(e, BB_TRACE_EVENT, ev->u.inv.sources ? "invoke" : "deliver_event",
                  ev->u.inv.exec, BBE__NONE, g->target, ev->u.inv.n);
    bbe__exec *x = bbe__exec_new(e, g, ev->u.inv.exec);
    if (!x)
        return; /* the event's values are released with it */
    for (uint32_t i = 0; i < ev->u.inv.n; i++) {
        bbe__in_value *iv = &ev->u.inv.in[i];
        bbe__write(e, x, iv->site, iv->v, iv->charged);
        iv->v = NULL;
        iv->charged = 0;
    }
    if (ev->u.inv.sources)
        bbe__push_sources(e, x);
    bbe__exec_unref(e, x);
}

static void process_lifecycle(bb_engine *e, int64_t phase)
{
    if (BBE__TRACING(e, BB_TRACE_EVENT))
        bbe__trace(e, BB_TRACE_EVENT, "fire_lifecycle", 0, BBE__NONE,
                  phase == 1 ? "Shutdown" : phase == 2 ? "Snapshot" : "custom", (uint64_t)phase);
    for (uint32_t k = 0; k < e->n_lifecycle_ops; k++) {
        uint32_t opi = e->lifecycle_ops[k];
        if (e->ops[opi].st->i != phase)
            continue;
        bbe__fire_op_output(e, opi, bbe__trigger(e), 0);
    }
}

static void process_work_done(bb_engine *e, uint64_t token)
{
    for (size_t i = 0; i < e->works.n; i++) {
        if (e->works.v[i].token != token)
            continue;
        struct bbe__work w = e->works.v[i];
        e->works.v[i] = e->works.v[--e->works.n];
        if (w.done)
            w.done(w.arg);
        return;
    }
}

void bbe__ingress_process(bb_engine *e, bbe__ingress_ev *ev)
{
    switch (ev->kind) {
    case BBE__IN_ENVELOPE:
        bbe__budget_release(e, ev->charged);
        ev->charged = 0;
        bbe__deliver_envelope(e, &ev->u.env.src, ev->u.env.obs, ev->u.env.obs_len, ev->u.env.buf);
        break;
    case BBE__IN_INVOKE:
        process_invoke(e, ev);
        break;
    case BBE__IN_LIFECYCLE:
        process_lifecycle(e, ev->u.lc.phase);
        break;
    case BBE__IN_COMPLETION:
        bbe__completion_process(e, &ev->u.comp);
        break;
    case BBE__IN_BOOTSTRAP:
        bbe__boot_stage(e, ev);
        break;
    case BBE__IN_WORK_DONE:
        process_work_done(e, ev->u.work.token);
        break;
    case BBE__IN_NOTICE:
        if (ev->u.notice.infra == BB_INFRA_APP_INGRESS_ERROR)
            e->c[BBE__C_APP_INGRESS_ERRORS]++;
        bbe__step_infra(e, (bb_infra_kind)ev->u.notice.infra, ev->u.notice.sub, NULL,
                       ev->u.notice.count, "%s", ev->u.notice.detail);
        break;
    }
    bbe__ingress_ev_free(e, ev);
}

void bbe__notice(bb_engine *e, int infra, int sub, const char *fmt, ...)
{
    bbe__ingress_ev *ev = bbe__zalloc(sizeof *ev);
    if (!ev)
        return;
    ev->kind = BBE__IN_NOTICE;
    ev->u.notice.infra = infra;
    ev->u.notice.sub = sub;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ev->u.notice.detail, sizeof ev->u.notice.detail, fmt, ap);
    va_end(ap);
    if (bbe__ingress_push(e, ev))
        free(ev);
}

/* ---- entry points ------------------------------------------------------------------ */

static void free_owned(void *ctx, uint8_t *data, size_t len)
{
    (void)ctx, (void)len;
    free(data);
}

bbe__ingress_ev *bbe__envelope_ev_new(const uint8_t *bytes, uint8_t *owned, size_t len,
                                    const uint8_t *obs, size_t obs_len)
{
    /* one malloc per envelope (was four: event, copy, observed address,
     * buffer header); the header first, as bb_buffer_unref frees it */
    size_t head = sizeof(bb_buffer) + sizeof(bbe__ingress_ev);
    size_t copied = owned ? 0 : len;
    if (copied > SIZE_MAX - head - obs_len) {
        free(owned);
        return NULL;
    }
    bb_buffer *b = malloc(head + obs_len + copied);
    if (!b) {
        free(owned);
        return NULL;
    }
    bbe__ingress_ev *ev = (bbe__ingress_ev *)(b + 1);
    uint8_t *tail = (uint8_t *)(ev + 1);
    atomic_init(&b->refs, 1);
    b->data = owned ? owned : tail + obs_len;
    b->len = len;
    b->free_fn = owned ? free_owned : NULL;
    b->free_ctx = NULL;
    memset(ev, 0, offsetof(bbe__ingress_ev, u));
    ev->kind = BBE__IN_ENVELOPE;
    ev->u.env.buf = b;
    ev->u.env.obs = obs_len ? tail : NULL;
    ev->u.env.obs_len = obs_len;
    if (obs_len)
        memcpy(tail, obs, obs_len);
    if (copied && bytes)
        memcpy(b->data, bytes, copied);
    return ev;
}

/* The sender's PeerId, checked once per distinct sender in a row: every
 * envelope of a connection repeats the same one. Validity depends on the
 * bytes alone, so the last valid one is remembered per thread (producers
 * may be any thread). */
static bool source_valid(const bb_peerid *src)
{
    static _Thread_local bb_peerid last_valid;
    if (src->len && bb_peerid_equal(src, &last_valid))
        return true;
    if (bb_peerid_validate(src->bytes, src->len, NULL) != BB_OK)
        return false;
    last_valid = *src;
    return true;
}

/* Queue one inbound envelope. owned: the bytes (malloc'd), taken on every
 * path; NULL: copy bytes[0..len). */
static int deliver_envelope(bb_engine *e, const bb_peerid *src, const bb_engine_addr *observed,
                            const uint8_t *bytes, uint8_t *owned, size_t len, bb_error *err)
{
    int rc = BB_OK;
    if (!src || !source_valid(src))
        rc = bb_error_set(err, BB_EINVAL, "deliver_envelope: invalid source PeerId");
    else if (len && !bytes)
        rc = bb_error_set(err, BB_EINVAL, "deliver_envelope: NULL bytes");
    else if (len > e->caps.max_envelope_bytes) {
        bbe__notice(e, BB_INFRA_WIRE_RECEIVE_ERROR, BB_WIRE_RX_BUDGET_EXCEEDED,
                   "envelope of %zu bytes exceeds max_envelope_bytes %zu", len,
                   e->caps.max_envelope_bytes);
        rc = bb_error_set(err, BB_ELIMIT, "deliver_envelope: %zu bytes exceeds the %zu cap", len,
                          e->caps.max_envelope_bytes);
    } else if (!bbe__budget_charge(e, len)) {
        bbe__notice(e, BB_INFRA_WIRE_RECEIVE_ERROR, BB_WIRE_RX_BUDGET_EXCEEDED,
                   "envelope of %zu bytes exceeds the ingress byte budget", len);
        rc = bb_error_set(err, BB_EBUDGET, "deliver_envelope: ingress byte budget exhausted");
    }
    if (rc) {
        free(owned);
        return rc;
    }
    bool with_obs = observed && observed->len && observed->len <= 1024;
    bbe__ingress_ev *ev = bbe__envelope_ev_new(bytes, owned, len, with_obs ? observed->data : NULL,
                                             with_obs ? observed->len : 0);
    if (!ev) {
        bbe__budget_release(e, len);
        return bb_error_set(err, BB_ENOMEM, "deliver_envelope: out of memory");
    }
    ev->charged = len;
    ev->u.env.src = *src;
    rc = bbe__ingress_push(e, ev);
    if (rc) {
        bbe__ingress_ev_free(e, ev);
        return bb_error_set(err, rc, "deliver_envelope: ingress full (%zu events)",
                            e->ing.capacity);
    }
    return BB_OK;
}

int bb_engine_deliver_envelope(bb_engine *e, const bb_peerid *src, const bb_engine_addr *observed,
                               const uint8_t *bytes, size_t len, bb_error *err)
{
    return deliver_envelope(e, src, observed, bytes, NULL, len, err);
}

int bb_engine_deliver_envelope_owned(bb_engine *e, const bb_peerid *src,
                                     const bb_engine_addr *observed, uint8_t *bytes, size_t len,
                                     bb_error *err)
{
    return deliver_envelope(e, src, observed, bytes, bytes, len, err);
}

static const bbe__target *target_find(const bb_engine *e, const char *name)
{
    if (!name)
        return NULL;
    for (uint32_t i = 0; i < e->n_targets; i++)
        if (strcmp(e->targets[i].name, name) == 0 ||
            strcmp(e->graphs[e->targets[i].graph].name, name) == 0)
            return &e->targets[i];
    return NULL;
}

static uint32_t formal_site(const bbe__graph *g, const char *name)
{
    for (uint32_t i = 0; name && i < g->n_formals; i++)
        if (strcmp(g->fn->inputs.v[i], name) == 0)
            return g->formals[i];
    return BBE__NONE;
}

int bbe__decode_input(bb_engine *e, const bbe__graph *g, uint32_t site, const bb_engine_input *in,
                     bbe__in_value *out, bb_error *err)
{
    (void)e;
    const bb_type_node *t = g->site_type[site];
    out->site = site;
    out->v = NULL;
    if (in->value) {
        if (t != &BB_TYPE_ANY && !bb_type_is_a(in->value->type, t))
            return bb_error_set(err, BB_ETYPE, "input '%s' of %s: value is %s, expected %s",
                                g->site_names[site], g->name, in->value->type->name, t->name);
        out->v = bb_value_ref((bb_value *)in->value);
        return BB_OK;
    }
    if (in->len && !in->bytes)
        return bb_error_set(err, BB_EINVAL, "input '%s': NULL bytes", g->site_names[site]);
    int rc;
    bb_error derr;
    bb_error_clear(&derr);
    if (t->kind == BB_VK_TRIGGER) {
        out->v = bbe__trigger(e);
        rc = 0;
    } else if (t == &BB_TYPE_ANY || (t->kind == BB_VK_ABSTRACT && t != &BB_TYPE_TENSOR)) {
        out->v = bb_value_bytes(&BB_TYPE_BYTES, in->bytes, in->len);
        rc = out->v ? 0 : BB_ENOMEM;
    } else {
        rc = bb_value_decode(t->wire_hash, in->bytes, in->len, NULL, &out->v, &derr);
    }
    if (rc)
        return bb_error_set(err, rc == BB_ENOMEM ? BB_ENOMEM : BB_EDECODE,
                            "input '%s' of %s: %s", g->site_names[site], g->name,
                            derr.msg[0] ? derr.msg : "decode failed");
    return BB_OK;
}

/* Shared by invoke and deliver_event. */
static int push_invoke(bb_engine *e, const char *target, const bb_engine_input *inputs, size_t n,
                       bool sources, size_t per_item_cap, bb_exec_id *exec, bb_error *err)
{
    const char *what = sources ? "invoke" : "deliver_event";
    if (!e->installed)
        return bb_error_set(err, BB_ESTATE, "%s: nothing installed", what);
    const bbe__target *t = target_find(e, target);
    if (!t)
        return bb_error_set(err, BB_ENOTFOUND, "%s: unknown module '%s'", what,
                            target ? target : "(null)");
    if (n > e->caps.max_invoke_inputs) {
        bbe__notice(e, BB_INFRA_APP_INGRESS_ERROR, BB_APP_INGRESS_TOO_MANY_INPUTS,
                   "%s %s: %zu inputs (max %zu)", what, target, n, e->caps.max_invoke_inputs);
        return bb_error_set(err, BB_ELIMIT, "%s %s: TooManyInputs (%zu > %zu)", what, target, n,
                            e->caps.max_invoke_inputs);
    }
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (inputs[i].len > per_item_cap) {
            bbe__notice(e, BB_INFRA_APP_INGRESS_ERROR, BB_APP_INGRESS_PER_ITEM_CAP_EXCEEDED,
                       "%s %s.%s: %zu bytes (cap %zu)", what, target, inputs[i].name,
                       inputs[i].len, per_item_cap);
            return bb_error_set(err, BB_ELIMIT, "%s %s.%s: OversizePayload (%zu > %zu bytes)",
                                what, target, inputs[i].name ? inputs[i].name : "?",
                                inputs[i].len, per_item_cap);
        }
        total += inputs[i].value ? 0 : inputs[i].len;
    }
    if (sources && total > e->caps.max_invoke_bytes) {
        bbe__notice(e, BB_INFRA_APP_INGRESS_ERROR, BB_APP_INGRESS_PER_ITEM_CAP_EXCEEDED,
                   "invoke %s: %zu bytes (cap %zu)", target, total, e->caps.max_invoke_bytes);
        return bb_error_set(err, BB_ELIMIT, "invoke %s: OversizePayload (%zu > %zu bytes)", target,
                            total, e->caps.max_invoke_bytes);
    }
    if (!bbe__budget_charge(e, total)) {
        bbe__notice(e, BB_INFRA_APP_INGRESS_ERROR, BB_APP_INGRESS_BUDGET_EXCEEDED,
                   "%s %s: %zu bytes exceed the ingress byte budget", what, target, total);
        return bb_error_set(err, BB_EBUDGET, "%s %s: BudgetExceeded (%zu bytes)", what, target,
                            total);
    }
    /* one allocation: the event and its inputs */
    bbe__ingress_ev *ev = bbe__zalloc(sizeof *ev + n * sizeof(bbe__in_value));
    bbe__in_value *iv = ev ? (bbe__in_value *)(ev + 1) : NULL;
    if (!ev) {
        bbe__budget_release(e, total);
        bbe__notice(e, BB_INFRA_APP_INGRESS_ERROR, BB_APP_INGRESS_ALLOCATION_FAILED,
                   "%s %s: allocation failed", what, target);
        return bb_error_set(err, BB_ENOMEM, "%s %s: AllocationFailed", what, target);
    }
    ev->kind = BBE__IN_INVOKE;
    ev->u.inv.target = t->graph;
    ev->u.inv.sources = sources;
    ev->u.inv.in_inline = true;
    ev->u.inv.in = iv;
    const bbe__graph *g = &e->graphs[t->graph];
    int rc = BB_OK;
    for (size_t i = 0; i < n; i++) {
        uint32_t site = formal_site(g, inputs[i].name);
        if (site == BBE__NONE) {
            rc = bb_error_set(err, BB_ENOTFOUND, "%s %s: unknown input '%s'", what, target,
                              inputs[i].name ? inputs[i].name : "(null)");
            break;
        }
        for (size_t k = 0; k < i; k++)
            if (iv[k].site == site) {
                rc = bb_error_set(err, BB_EINVAL, "%s %s: input '%s' given twice", what, target,
                                  inputs[i].name);
                break;
            }
        if (rc)
            break;
        rc = bbe__decode_input(e, g, site, &inputs[i], &iv[i], err);
        if (rc) {
            bbe__notice(e, BB_INFRA_APP_INGRESS_ERROR, BB_APP_INGRESS_DECODE_FAILED, "%s",
                       err ? err->msg : "decode failed");
            break;
        }
        iv[i].charged = inputs[i].value ? 0 : inputs[i].len;
        ev->u.inv.n = (uint32_t)i + 1;
    }
    if (rc) {
        size_t charged = 0;
        for (uint32_t i = 0; i < ev->u.inv.n; i++)
            charged += iv[i].charged;
        bbe__ingress_ev_free(e, ev); /* releases the per-input charges */
        bbe__budget_release(e, total - charged);
        return rc;
    }
    ev->u.inv.exec = bbe__exec_id_new(e);
    bb_exec_id id = ev->u.inv.exec;
    rc = bbe__ingress_push(e, ev);
    if (rc) {
        bbe__ingress_ev_free(e, ev);
        return bb_error_set(err, rc, "%s %s: ingress full (IngressClosed)", what, target);
    }
    if (exec)
        *exec = id;
    return BB_OK;
}

int bb_engine_invoke(bb_engine *e, const char *target, const bb_engine_input *inputs,
                     size_t n_inputs, bb_exec_id *exec_id, bb_error *err)
{
    if (n_inputs && !inputs)
        return bb_error_set(err, BB_EINVAL, "invoke: NULL inputs");
    return push_invoke(e, target, inputs, n_inputs, true, e->caps.max_invoke_bytes, exec_id, err);
}

int bb_engine_deliver_event(bb_engine *e, const char *target, const char *input,
                            const bb_engine_input *value, bb_exec_id *exec_id, bb_error *err)
{
    if (!value)
        return bb_error_set(err, BB_EINVAL, "deliver_event: NULL value");
    bb_engine_input one = *value;
    one.name = input;
    return push_invoke(e, target, &one, 1, false, e->caps.max_app_event_bytes, exec_id, err);
}

int bb_engine_fire_lifecycle(bb_engine *e, int64_t phase, bb_error *err)
{
    bbe__ingress_ev *ev = bbe__zalloc(sizeof *ev);
    if (!ev)
        return bb_error_set(err, BB_ENOMEM, "fire_lifecycle: out of memory");
    ev->kind = BBE__IN_LIFECYCLE;
    ev->u.lc.phase = phase;
    int rc = bbe__ingress_push(e, ev);
    if (rc) {
        free(ev);
        return bb_error_set(err, rc, "fire_lifecycle: ingress full");
    }
    return BB_OK;
}

/* ---- snapshot section "ingress" -----------------------------------------------------------------
 * The events not yet processed, oldest first: kind, budget charge, then
 * per kind an envelope (sender, observed address, bytes), an invocation
 * (graph, ExecId, sources flag, inputs), a lifecycle phase, a bootstrap
 * request list, or a notice. Completions and worker-pool returns are not
 * written: the work they finish does not survive a restore (ENGINE.md
 * 9.4). Writing takes the queue and puts it back as it was; restored
 * events are "must" events (restored work is never dropped). */

static void write_event(bbe__snap_out *o, const bbe__ingress_ev *ev)
{
    bbe__snap_put_u(o, (uint64_t)ev->kind);
    bbe__snap_put_u(o, ev->charged);
    switch (ev->kind) {
    case BBE__IN_ENVELOPE:
        bbe__snap_put_peer(o, &ev->u.env.src);
        bb_writer_put_delimited(&o->w, ev->u.env.obs, ev->u.env.obs_len);
        bb_writer_put_delimited(&o->w, ev->u.env.buf->data, ev->u.env.buf->len);
        break;
    case BBE__IN_INVOKE:
        bbe__snap_put_u(o, ev->u.inv.target);
        bbe__snap_put_u(o, ev->u.inv.exec);
        bbe__snap_put_u(o, ev->u.inv.sources);
        bbe__snap_put_in_values(o, ev->u.inv.in, ev->u.inv.n);
        break;
    case BBE__IN_LIFECYCLE:
        bbe__snap_put_u(o, (uint64_t)ev->u.lc.phase);
        break;
    case BBE__IN_BOOTSTRAP:
        bbe__snap_put_u(o, (uint64_t)ev->u.boot.all);
        bbe__snap_put_u(o, ev->u.boot.n);
        for (uint32_t k = 0; k < ev->u.boot.n; k++)
            bbe__snap_put_boot_req(o, &ev->u.boot.reqs[k]);
        break;
    case BBE__IN_NOTICE:
        bbe__snap_put_u(o, (uint64_t)ev->u.notice.infra);
        bbe__snap_put_u(o, (uint64_t)ev->u.notice.sub);
        bbe__snap_put_u(o, ev->u.notice.count);
        bb_writer_put_str(&o->w, ev->u.notice.detail);
        break;
    }
}

static bool event_snapshotted(const bbe__ingress_ev *ev)
{
    return ev->kind != BBE__IN_COMPLETION && ev->kind != BBE__IN_WORK_DONE;
}

int bbe__snap_write_ingress(bb_engine *e, bbe__snap_out *o, bb_error *err)
{
    (void)err;
    bbe__ingress_ev *ing = bbe__ingress_take(e);
    size_t n = 0;
    for (bbe__ingress_ev *ev = ing; ev; ev = ev->next)
        n += event_snapshotted(ev);
    bbe__snap_put_u(o, n);
    for (bbe__ingress_ev *ev = ing; ev; ev = ev->next)
        if (event_snapshotted(ev))
            write_event(o, ev);
    /* re-queue, oldest first, as it was */
    while (ing) {
        bbe__ingress_ev *next = ing->next;
        ing->next = NULL;
        bool must = ing->must;
        ing->must = true; /* never drop our own re-queue */
        bbe__ingress_push(e, ing);
        ing->must = must;
        if (!must)
            atomic_fetch_add(&e->ing.count, 1);
        ing = next;
    }
    return BB_OK;
}

/* An envelope event: its bytes and the event in one block. */
static bbe__ingress_ev *read_envelope_event(bbe__snap_in *in)
{
    bb_peerid src;
    size_t obs_len, len;
    bbe__snap_peer(in, &src);
    const uint8_t *obs = bbe__snap_bytes(in, &obs_len);
    const uint8_t *bytes = bbe__snap_bytes(in, &len);
    if (in->r.failed)
        return NULL;
    bbe__ingress_ev *ev = bbe__envelope_ev_new(bytes, NULL, len, obs_len ? obs : NULL, obs_len);
    if (!ev)
        bbe__snap_nomem(in);
    else
        ev->u.env.src = src;
    return ev;
}

/* The body of a non-envelope event (ev allocated, its kind set). */
static void read_event_body(bb_engine *e, bbe__snap_in *in, bbe__ingress_ev *ev)
{
    switch (ev->kind) {
    case BBE__IN_INVOKE:
        ev->u.inv.target = bbe__snap_index(in, e->n_graphs, "a graph index out of range");
        ev->u.inv.exec = bbe__snap_u(in);
        ev->u.inv.sources = bbe__snap_flag(in);
        if (!in->r.failed)
            ev->u.inv.in = bbe__snap_in_values(e, in, ev->u.inv.target, &ev->u.inv.n);
        break;
    case BBE__IN_LIFECYCLE:
        ev->u.lc.phase = (int64_t)bbe__snap_u(in);
        break;
    case BBE__IN_BOOTSTRAP: {
        ev->u.boot.all = (int)bbe__snap_max(in, 1, "a bootstrap-all flag out of range");
        size_t n = bbe__snap_count(in, BBE__SNAP_MAX_COUNT, "too many bootstrap requests");
        if (in->r.failed)
            break;
        if (!(ev->u.boot.reqs = calloc(n ? n : 1, sizeof *ev->u.boot.reqs))) {
            bbe__snap_nomem(in);
            break;
        }
        for (size_t k = 0; k < n && bbe__snap_read_boot_req(e, in, &ev->u.boot.reqs[k]); k++)
            ev->u.boot.n = (uint32_t)k + 1;
        break;
    }
    default: { /* BBE__IN_NOTICE */
        size_t len;
        ev->u.notice.infra = (int)bbe__snap_max(in, INT32_MAX, "a notice kind out of range");
        ev->u.notice.sub = (int)bbe__snap_max(in, INT32_MAX, "a notice kind out of range");
        ev->u.notice.count = bbe__snap_u(in);
        const uint8_t *d = bbe__snap_bytes(in, &len);
        if (!in->r.failed)
            snprintf(ev->u.notice.detail, sizeof ev->u.notice.detail, "%.*s",
                     (int)(len < sizeof ev->u.notice.detail ? len : sizeof ev->u.notice.detail - 1),
                     (const char *)d);
        break;
    }
    }
}

int bbe__snap_read_ingress(bb_engine *e, bbe__snap_in *in, bb_error *err)
{
    (void)err;
    size_t n = bbe__snap_count(in, BBE__SNAP_MAX_COUNT, "too many ingress events");
    for (size_t i = 0; i < n && !in->r.failed; i++) {
        size_t at = in->r.pos;
        int kind = (int)bbe__snap_max(in, BBE__IN_NOTICE, "an ingress event kind out of range");
        size_t charged = (size_t)bbe__snap_u(in);
        if (!in->r.failed && (kind < BBE__IN_ENVELOPE || kind == BBE__IN_COMPLETION ||
                              kind == BBE__IN_WORK_DONE))
            bbe__snap_fail(in, at, "an ingress event kind that is not snapshotted");
        if (in->r.failed)
            break;
        bbe__ingress_ev *ev = kind == BBE__IN_ENVELOPE ? read_envelope_event(in)
                                                       : calloc(1, sizeof *ev);
        if (!ev) {
            if (!in->r.failed)
                bbe__snap_nomem(in);
            break;
        }
        ev->kind = kind;
        ev->must = true; /* restored work is never dropped */
        if (kind != BBE__IN_ENVELOPE)
            read_event_body(e, in, ev);
        ev->charged = in->r.failed ? 0 : charged;
        atomic_fetch_add(&e->bytes_in_flight, ev->charged);
        bbe__ingress_push(e, ev); /* freed with the ingress if the restore fails */
    }
    return BB_OK;
}
