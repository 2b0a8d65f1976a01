/*
 * control.c — the control plane (bb/plugin.h, "the control plane"): fills
 * addressed /component/<ref>/op/<op> that components send each other.
 *
 * Addressing. <ref> on the wire is the component's program-wide slot id,
 * the third field of its binding triple, which every node running the
 * artifact agrees on; the engine's comps[] index is this node's own order,
 * which another node cannot know. A component without a slot id (a model
 * built by hand) is addressed as 2^32 + its index.
 *
 * Inbound. A fill dispatches the addressed op at once with the inputs
 * (payload Bytes, correlation token U64, sender PeerId) and no node. When
 * the envelope is a REQUEST of that one fill, the op's answer goes back as a
 * RESPONSE with the same wire_req_id and suffix: output 0 (its bytes when
 * it is a Bytes value, else its wire encoding) at once when the op answered
 * NOW, or when its completion lands (the HK_FILL handle carries the
 * route); a failure, or a request for no such component or op, goes back
 * as the message in a fill marked trigger_only. A one-way fill's outputs
 * go nowhere.
 *
 * Outbound. send_fill (ctx.c) sends one fill. A request waits in a bounded
 * table (token -> component, peer) until its answer, its deadline (a
 * BBE__T_CTL_DEADLINE timer) or a failed send to its peer ends it; each
 * ending calls the component's on_answer exactly once, on the engine
 * thread, inside a poll. An answer from any other peer than the one asked
 * is dropped and counted unroutable: a peer cannot answer for another.
 * Pending requests are not snapshotted (bb-plugin(7)).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/multiaddr.h"
#include "libbbengine/src/syscalls.h"

#define CTL_MAX_PENDING 4096 /* requests in flight per engine */
#define NO_SLOT_ID_BASE (UINT64_C(1) << 32)
#define ANSWER_ENVELOPE_SLACK 1024 /* envelope bytes around a payload */

/* ---- addressing ----------------------------------------------------------------------- */

uint64_t bbe__comp_wire_ref(const bb_engine *e, uint32_t comp)
{
    const bbe__comp *c = &e->comps[comp];
    return c->has_slot_id ? c->slot_id : NO_SLOT_ID_BASE + comp;
}

uint32_t bbe__comp_by_wire_ref(const bb_engine *e, uint64_t ref)
{
    if (ref >= NO_SLOT_ID_BASE)
        return ref - NO_SLOT_ID_BASE < e->n_comps && !e->comps[ref - NO_SLOT_ID_BASE].has_slot_id
                   ? (uint32_t)(ref - NO_SLOT_ID_BASE)
                   : BBE__NONE;
    for (uint32_t i = 0; i < e->n_comps; i++)
        if (e->comps[i].has_slot_id && e->comps[i].slot_id == ref)
            return i;
    return BBE__NONE;
}

/* The op named `op` among the type's opsets (its domain and index). */
static const bb_op_decl *find_op(const bb_component_type *t, const char *op, const char **domain,
                                 uint32_t *idx)
{
    for (uint32_t s = 0; s < t->n_opsets; s++) {
        const bb_opset_decl *os = &t->opsets[s];
        for (uint32_t i = 0; i < os->n_ops; i++)
            if (os->ops[i].op_type && strcmp(os->ops[i].op_type, op) == 0) {
                *domain = os->domain;
                *idx = i;
                return &os->ops[i];
            }
    }
    return NULL;
}

/* ---- answers (this node answers a request) --------------------------------------------- */

static void answer_bytes(bb_engine *e, const bbe__route *r, bool failed, const uint8_t *p, size_t n)
{
    uint8_t sfx[BB_MULTIADDR_NAME_MAX + 32];
    size_t sl;
    if (bb_suffix_component_op(r->ref, r->op, sfx, sizeof sfx, &sl, NULL) != BB_OK)
        return;
    if (n + ANSWER_ENVELOPE_SLACK > e->caps.max_envelope_bytes) { /* too large to travel */
        failed = true;
        p = (const uint8_t *)"answer exceeds the envelope cap";
        n = strlen((const char *)p);
    }
    bbe__fill f = {
        .suffix = sfx, .suffix_len = sl, .payload = p, .payload_len = n, .trigger_only = failed};
    bbe__envelope env = {.fills = &f, .n_fills = 1, .corr_kind = 2, .wire_req_id = r->token};
    if (bbe__emit(e, &r->peer, NULL, 0, &env, 0) == BB_ENOTFOUND)
        e->c[BBE__C_PEER_RESOLVE_FAILED]++; /* the asker left no address: it times out */
}

static void answer_error(bb_engine *e, const bbe__route *r, const char *msg)
{
    answer_bytes(e, r, true, (const uint8_t *)msg, strlen(msg));
}

/* Output 0 of the answering op: a Bytes value as it is, anything else in
 * its wire encoding, nothing as an empty answer. */
static void answer_value(bb_engine *e, const bbe__route *r, const bb_value *v)
{
    if (!v) {
        answer_bytes(e, r, false, NULL, 0);
    } else if (v->type && v->type->kind == BB_VK_BYTES) {
        answer_bytes(e, r, false, v->u.bytes.data, v->u.bytes.len);
    } else {
        uint8_t *b = NULL;
        size_t n = 0;
        bb_error err;
        bb_error_clear(&err);
        if (bb_value_encode(v, &b, &n, &err) == BB_OK)
            answer_bytes(e, r, false, b, n);
        else
            answer_error(e, r, err.msg[0] ? err.msg : "cannot encode the answer");
        free(b);
    }
}

void bbe__control_fill_failed(bb_engine *e, uint32_t comp, const bb_op_decl *decl,
                              const char *domain, const char *msg)
{
    bb_step *st = bbe__step_push(e, BB_STEP_OP_FAILED, 0);
    if (st) {
        st->u.op_failed.node = bbe__step_strf(e, "%s/%s", e->comps[comp].slot, decl->op_type);
        st->u.op_failed.op_type = decl->op_type;
        st->u.op_failed.domain = domain ? domain : "";
        st->u.op_failed.message = bbe__step_str(e, msg);
    }
    e->c[BBE__C_OP_FAILED]++;
}

void bbe__control_fill_completed(bb_engine *e, bbe__handle *h, const bbe__completion_ev *ev)
{
    char buf[320];
    if (ev->status != BB_OK)
        bbe__control_fill_failed(e, h->comp, h->fill_decl, h->fill_domain,
                                 bbe__completion_failure_text(ev, buf, sizeof buf));
    if (h->route) {
        if (ev->status == BB_OK)
            answer_value(e, h->route, ev->n ? ev->outs[0] : NULL);
        else
            answer_error(e, h->route, buf);
        free(h->route);
        h->route = NULL;
    }
}

/* Dispatch the op with (payload, token, sender); answer a request. */
static void dispatch_fill(bb_engine *e, uint32_t ci, const bb_op_decl *decl, const char *domain,
                          uint32_t idx, const bb_peerid *src, const bbe__fill *f,
                          const bbe__route *route)
{
    bbe__comp *comp = &e->comps[ci];
    bbe__peer *sp = bbe__peer_find(e, src);
    bb_value *ins[3] = {bb_value_bytes(&BB_TYPE_BYTES, f->payload, f->payload_len),
                        bb_value_u64(&BB_TYPE_CORRELATION_TOKEN, route ? route->token : 0),
                        sp ? bbe__peer_cached_id_value(sp) : bbe__peerid_value(src)};
    uint32_t n_out = decl->n_outputs;
    bb_value **outs = bbe__zalloc((n_out ? n_out : 1) * sizeof *outs);
    bbe__handle *h = bbe__handle_new(e, BBE__HK_FILL);
    bool later = false; /* then h lives on until the op completes */
    if (ins[0] && ins[1] && ins[2] && outs && h) {
        bb_dispatch_call call = {.domain = domain ? domain : "",
                                 .op_type = decl->op_type,
                                 .op_index = idx,
                                 .inputs = ins,
                                 .n_inputs = 3,
                                 .n_outputs = n_out,
                                 .node = NULL,
                                 .completion = &h->pub};
        bb_error err;
        bb_error_clear(&err);
        h->comp = ci;
        h->fill_decl = decl;
        h->fill_domain = domain;
        const bb_peerid *teacher = e->teacher;
        e->teacher = src; /* what the op adds to the book, src taught it */
        bb_dispatch_result r = comp->type->dispatch(comp->inst, &comp->ctx.pub, &call, outs, &err);
        e->teacher = teacher;
        const char *why = err.msg[0] ? err.msg : "failed";
        if (r == BB_DISPATCH_NOW_ERR)
            bbe__control_fill_failed(e, ci, decl, domain, why);
        later = r == BB_DISPATCH_LATER;
        if (route && r == BB_DISPATCH_NOW_OK)
            answer_value(e, route, n_out ? outs[0] : NULL);
        else if (route && r == BB_DISPATCH_NOW_ERR)
            answer_error(e, route, why);
        else if (route && later && !(h->route = malloc(sizeof *route)))
            answer_error(e, route, "out of memory keeping the request"); /* its answer is lost */
        else if (route && later)
            *h->route = *route;
        for (uint32_t j = 0; j < n_out; j++)
            bb_value_unref(outs[j]);
    } else if (route) {
        answer_error(e, route, "out of memory");
    }
    if (h && !later) {
        bbe__handle_drop(e, h);
        bbe__handle_retire(e, h);
    }
    free(outs);
    for (int i = 0; i < 3; i++)
        bb_value_unref(ins[i]);
}

void bbe__deliver_control_fill(bb_engine *e, const bb_peerid *src, const bbe__envelope *env,
                               const bbe__fill *f, const bb_suffix *sfx)
{
    bbe__route route = {.peer = *src, .token = env->wire_req_id, .ref = sfx->cref};
    /* a control-plane request is a REQUEST of this one fill (a graph's
     * request that also carries a control fill is answered by its graph) */
    bool request = env->corr_kind == 1 && env->wire_req_id && env->n_fills == 1;
    uint32_t ci = bbe__comp_by_wire_ref(e, sfx->cref);
    const char *domain = NULL;
    uint32_t idx = 0;
    const bb_op_decl *decl =
        ci != BBE__NONE ? find_op(e->comps[ci].type, sfx->op, &domain, &idx) : NULL;
    if (!decl) {
        e->c[BBE__C_UNROUTABLE]++;
        if (request) {
            char why[BB_MULTIADDR_NAME_MAX + 96];
            snprintf(why, sizeof why, "no component op /component/%llu/op/%s on this node",
                     (unsigned long long)sfx->cref, sfx->op);
            route.op = sfx->op; /* the answer names what was asked */
            answer_error(e, &route, why);
        }
        return;
    }
    route.op = decl->op_type;
    e->c[BBE__C_FILLS_IN]++;
    if (!bbe__budget_charge(e, f->payload_len)) {
        bbe__rx_error(e, src, BB_WIRE_RX_BUDGET_EXCEEDED,
                      "control fill for %s/%s exceeds the budget", e->comps[ci].slot, sfx->op);
        if (request)
            answer_error(e, &route, "the receiver's ingress byte budget is spent");
        return;
    }
    if (BBE__TRACING(e, BB_TRACE_INBOUND))
        bbe__trace(e, BB_TRACE_INBOUND, "deliver_fill", 0, BBE__NONE, "control", sfx->cref);
    dispatch_fill(e, ci, decl, domain, idx, src, f, request ? &route : NULL);
    bbe__budget_release(e, f->payload_len);
}

/* ---- requests (this node asks) ----------------------------------------------------------- */

static bbe__ctlreq *req_find(const bb_engine *e, uint64_t token)
{
    uint64_t i;
    return bbe__map_get(&e->ctl_map, token, &i) ? &e->ctl.v[i] : NULL;
}

/* End request r: free its entry, then tell its component (which may send
 * again from on_answer). */
static void req_end(bb_engine *e, bbe__ctlreq *r, int status, const uint8_t *p, size_t n)
{
    uint32_t ci = r->comp;
    uint64_t token = r->token;
    bb_peerid asked = r->peer; /* r may move while on_answer sends again */
    bbe__map_del(&e->ctl_map, token);
    r->token = 0;
    if (BBE__ARR_PUSH(&e->ctl_free, (uint32_t)(r - e->ctl.v)))
        r->comp = BBE__NONE; /* leaked slot, never reused: harmless */
    e->ctl_live--;
    bbe__comp *c = &e->comps[ci];
    if (c->created && BB_ABI_HAS(bb_component_type, c->type, on_answer) && c->type->on_answer) {
        const bb_peerid *teacher = e->teacher;
        e->teacher = status == BB_OK ? &asked : NULL; /* only an answer teaches */
        c->type->on_answer(c->inst, &c->ctx.pub, token, status, p, n);
        e->teacher = teacher;
    }
}

static int req_add(bb_engine *e, uint32_t comp, const bb_peerid *peer, uint64_t token)
{
    uint32_t i;
    if (e->ctl_free.n) {
        i = e->ctl_free.v[--e->ctl_free.n];
    } else {
        if (BBE__ARR_PUSH(&e->ctl, ((bbe__ctlreq){0})))
            return BB_ENOMEM;
        i = (uint32_t)e->ctl.n - 1;
    }
    if (bbe__map_put(&e->ctl_map, token, i)) {
        BBE__ARR_PUSH(&e->ctl_free, i); /* cannot fail: it was just taken from there or added */
        return BB_ENOMEM;
    }
    e->ctl.v[i] = (bbe__ctlreq){.token = token, .comp = comp, .peer = *peer};
    e->ctl_live++;
    return BB_OK;
}

int bbe__control_send(bb_engine *e, uint32_t comp, const bb_peerid *peer, const char *slot,
                      const char *op, const uint8_t *payload, size_t len, uint64_t timeout_ns,
                      uint64_t *token, bb_error *err)
{
    const bbe__comp *me = &e->comps[comp];
    uint32_t dest = comp;
    if (slot) {
        dest = BBE__NONE;
        for (uint32_t i = 0; i < e->n_comps && dest == BBE__NONE; i++)
            if (strcmp(e->comps[i].slot, slot) == 0)
                dest = i;
        if (dest == BBE__NONE)
            return bb_error_set(err, BB_ENOTFOUND, "%s: send_fill: no slot '%s' on this node",
                                me->slot, slot);
    }
    uint8_t sfx[BB_MULTIADDR_NAME_MAX + 32];
    size_t sl;
    if (!op ||
        bb_suffix_component_op(bbe__comp_wire_ref(e, dest), op, sfx, sizeof sfx, &sl, err) != BB_OK)
        return bb_error_set(err, BB_EINVAL, "%s: send_fill: bad op name '%s'", me->slot,
                            op ? op : "(null)");
    if (len + ANSWER_ENVELOPE_SLACK > e->caps.max_envelope_bytes)
        return bb_error_set(err, BB_ELIMIT, "%s: send_fill %s: %zu bytes exceed the envelope cap",
                            me->slot, op, len);
    if (timeout_ns && !(BB_ABI_HAS(bb_component_type, me->type, on_answer) && me->type->on_answer))
        return bb_error_set(err, BB_EUNSUPPORTED,
                            "%s: send_fill %s: a request needs the type's on_answer", me->slot, op);
    if (timeout_ns && e->ctl_live >= CTL_MAX_PENDING)
        return bb_error_set(err, BB_EFULL, "%s: send_fill %s: %d requests already pending",
                            me->slot, op, CTL_MAX_PENDING);
    uint64_t t = timeout_ns ? e->next_wire_req++ : 0;
    uint64_t at = e->now_ns + timeout_ns < e->now_ns ? UINT64_MAX : e->now_ns + timeout_ns;
    bbe__fill f = {.suffix = sfx, .suffix_len = sl, .payload = payload, .payload_len = len};
    bbe__envelope env = {.fills = &f,
                         .n_fills = 1,
                         .corr_kind = timeout_ns ? 1 : 0,
                         .wire_req_id = t,
                         .deadline_ns = timeout_ns ? at : 0};
    int rc = bbe__emit(e, peer, NULL, 0, &env, 0);
    if (rc == BB_ENOTFOUND) {
        char pt[BB_PEERID_TEXT_MAX];
        if (bb_peerid_to_text(peer, pt, sizeof pt, NULL) != BB_OK)
            snprintf(pt, sizeof pt, "(peer)");
        e->c[BBE__C_PEER_RESOLVE_FAILED]++;
        return bb_error_set(err, BB_ENOTFOUND, "%s: send_fill %s: no address known for %s",
                            me->slot, op, pt);
    }
    if (!rc && timeout_ns && !(rc = req_add(e, comp, peer, t)))
        rc = bbe__timer_add(e, at, BBE__T_CTL_DEADLINE, BBE__NONE, 0, t, NULL);
    if (rc)
        return bb_error_set(err, BB_ENOMEM, "%s: send_fill %s: out of memory", me->slot, op);
    if (token)
        *token = t;
    return BB_OK;
}

bool bbe__control_answer_in(bb_engine *e, const bb_peerid *src, const bbe__envelope *env)
{
    bbe__ctlreq *r = req_find(e, env->wire_req_id);
    if (!r)
        return false;
    if (!bb_peerid_equal(&r->peer, src) || env->n_fills != 1) {
        e->c[BBE__C_UNROUTABLE]++; /* not the peer asked: it cannot answer for it */
        return true;
    }
    const bbe__fill *f = &env->fills[0];
    e->c[BBE__C_FILLS_IN]++;
    bbe__peer_success(e, src);
    req_end(e, r, f->trigger_only ? BB_ERUNTIME : BB_OK, f->payload, f->payload_len);
    return true;
}

bool bbe__control_pending(const bb_engine *e, uint64_t token)
{
    return req_find(e, token) != NULL;
}

void bbe__control_deadline(bb_engine *e, uint64_t token)
{
    bbe__ctlreq *r = req_find(e, token);
    if (!r)
        return;
    static const char timeout_msg[] = "no answer in time", gone_msg[] = "peer unreachable";
    if (r->unreachable)
        req_end(e, r, BB_EIO, (const uint8_t *)gone_msg, sizeof gone_msg - 1);
    else
        req_end(e, r, BB_ETIMEOUT, (const uint8_t *)timeout_msg, sizeof timeout_msg - 1);
}

void bbe__control_unreachable(bb_engine *e, const bb_peerid *peer)
{
    for (size_t i = 0; e->ctl_live && i < e->ctl.n; i++) {
        bbe__ctlreq *r = &e->ctl.v[i];
        if (r->token && !r->unreachable && bb_peerid_equal(&r->peer, peer)) {
            r->unreachable = true; /* ended by the next poll's timers, not from inside here */
            bbe__timer_add(e, 0, BBE__T_CTL_DEADLINE, BBE__NONE, 0, r->token, NULL);
        }
    }
}

void bbe__control_free(bb_engine *e)
{
    BBE__ARR_FREE(&e->ctl);
    BBE__ARR_FREE(&e->ctl_free);
    bbe__map_free(&e->ctl_map);
    e->ctl_live = 0;
}
