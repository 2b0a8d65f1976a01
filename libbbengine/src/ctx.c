/*
 * ctx.c — the host API table (bb_ctx_api) the engine hands every component:
 * declared dependencies, synchronous dependency calls, the host's clock and
 * seeded randomness, the address book views (peers, peers_running,
 * peer_addresses), fresh completion handles, component timers, worker-pool
 * submission, logging, the host's shared read-only cache and the control
 * plane (send_fill: control.c; local_targets). One bbe__ctx lives in each
 * component record, so a component may keep the pointer it was given.
 */
#include <stdlib.h>
#include <string.h>

#include "libbbengine/src/syscalls.h"

static bbe__comp *comp_of(bb_ctx *ctx, bb_engine **e)
{
    bbe__ctx *c = (bbe__ctx *)ctx;
    *e = c->e;
    return &c->e->comps[c->comp];
}

static bbe__comp *dep_of(bb_engine *e, bbe__comp *c, const char *slot)
{
    if (!slot)
        return NULL;
    for (uint32_t k = 0; k < c->type->n_deps; k++)
        if (c->type->deps[k].slot && strcmp(c->type->deps[k].slot, slot) == 0)
            return &e->comps[c->deps[k]];
    return NULL;
}

static void *ctx_dependency(bb_ctx *ctx, const char *slot, const bb_component_type **type)
{
    bb_engine *e;
    bbe__comp *c = comp_of(ctx, &e);
    bbe__comp *d = dep_of(e, c, slot);
    if (type)
        *type = d ? d->type : NULL;
    return d && d->created ? d->inst : NULL;
}

static int ctx_call_dependency(bb_ctx *ctx, const char *slot, const char *op_type,
                               bb_value *const *inputs, uint32_t n_inputs, bb_value **outputs,
                               uint32_t n_outputs, bb_error *err)
{
    bb_engine *e;
    bbe__comp *c = comp_of(ctx, &e);
    bbe__comp *d = dep_of(e, c, slot);
    if (!d || !d->created)
        return bb_error_set(err, BB_ENOTFOUND, "%s: no dependency bound at slot '%s'", c->slot,
                            slot ? slot : "(null)");
    const bb_op_decl *decl = NULL;
    const char *domain = NULL;
    uint32_t idx = 0;
    for (uint32_t s = 0; s < d->type->n_opsets && !decl; s++) {
        const bb_opset_decl *os = &d->type->opsets[s];
        for (uint32_t i = 0; i < os->n_ops; i++) {
            if (os->ops[i].op_type && op_type && strcmp(os->ops[i].op_type, op_type) == 0) {
                decl = &os->ops[i];
                domain = os->domain;
                idx = i;
                break;
            }
        }
    }
    if (!decl)
        return bb_error_set(err, BB_ENOTFOUND, "%s: %s (%s) has no op %s", c->slot, d->slot,
                            d->type->type_name, op_type ? op_type : "(null)");
    bbe__handle *h = bbe__handle_new(e, BBE__HK_FREE);
    if (!h)
        return bb_error_set(err, BB_ENOMEM, "out of memory");
    for (uint32_t j = 0; j < n_outputs; j++)
        outputs[j] = NULL;
    bb_dispatch_call call = {
        .domain = domain ? domain : "",
        .op_type = op_type,
        .op_index = idx,
        .inputs = inputs,
        .n_inputs = n_inputs,
        .n_outputs = n_outputs,
        .node = NULL,
        .completion = &h->pub,
    };
    bb_error derr;
    bb_error_clear(&derr);
    bb_dispatch_result r = d->type->dispatch(d->inst, &d->ctx.pub, &call, outputs, &derr);
    bbe__handle_drop(e, h);
    bbe__handle_retire(e, h);
    if (r == BB_DISPATCH_NOW_OK)
        return BB_OK;
    for (uint32_t j = 0; j < n_outputs; j++) {
        bb_value_unref(outputs[j]);
        outputs[j] = NULL;
    }
    if (r == BB_DISPATCH_LATER)
        return bb_error_set(err, BB_EUNSUPPORTED,
                            "%s: %s.%s went asynchronous (call_dependency is synchronous)",
                            c->slot, d->slot, op_type);
    return bb_error_set(err, derr.code ? derr.code : BB_ERUNTIME, "%s: %s.%s: %s", c->slot,
                        d->slot, op_type, derr.msg[0] ? derr.msg : "failed");
}

static uint64_t ctx_now(bb_ctx *ctx) { return ((bbe__ctx *)ctx)->e->now_ns; }
static uint64_t ctx_rng(bb_ctx *ctx) { return bbe__rng_next(((bbe__ctx *)ctx)->e); }
static const bb_value *ctx_local_peer(bb_ctx *ctx) { return ((bbe__ctx *)ctx)->e->self_value; }

static size_t ctx_peers_filtered(bb_engine *e, const char *target, bb_value **out, size_t cap)
{
    size_t total = 0;
    for (size_t i = 0; i < e->peers.n; i++) {
        bbe__peer *p = &e->peers.v[i];
        if (!p->live || bb_peerid_equal(&p->id, &e->cfg.peer))
            continue;
        if (target) {
            /* A PeerDown peer leaves for backoff_max_ns (peers.c), then is
             * offered again (half-open): a round that asks it either hears
             * from it (PeerUp) or backs it off again. Left out for good, a
             * peer connected all along would never be asked again, and a
             * node whose peers all went down under a transient overload
             * would stall for ever (found by bench/soak_federated.sh). */
            if (!p->connected || (p->down && e->now_ns < p->next_retry_ns))
                continue;
            bool runs = false;
            for (uint32_t k = 0; k < p->n_targets && !runs; k++)
                runs = strcmp(p->targets[k], target) == 0;
            if (!runs)
                continue;
        } else if (!p->n_addrs) {
            continue;
        }
        if (out && total < cap)
            out[total] = bbe__peer_cached_id_value(p);
        total++;
    }
    return total;
}

static size_t ctx_peers(bb_ctx *ctx, bb_value **out, size_t cap)
{
    return ctx_peers_filtered(((bbe__ctx *)ctx)->e, NULL, out, cap);
}

static size_t ctx_peers_running(bb_ctx *ctx, const char *target, bb_value **out, size_t cap)
{
    if (!target)
        return 0;
    return ctx_peers_filtered(((bbe__ctx *)ctx)->e, target, out, cap);
}

bb_value *bbe__addr_vec_value(const bb_engine_addr *a, size_t n);

static bb_value *ctx_peer_addresses(bb_ctx *ctx, const bb_value *peer)
{
    bb_engine *e = ((bbe__ctx *)ctx)->e;
    bb_peerid id;
    if (!bbe__peerid_from_value(peer, &id))
        return NULL;
    const bbe__peer *p = bbe__peer_find(e, &id);
    if (!p || !p->n_addrs)
        return NULL;
    return bbe__addr_vec_value(p->addrs, p->n_addrs);
}

static bb_completion *ctx_open_completion(bb_ctx *ctx)
{
    bbe__handle *h = bbe__handle_new(((bbe__ctx *)ctx)->e, BBE__HK_FREE);
    return h ? &h->pub : NULL;
}

static int ctx_schedule(bb_ctx *ctx, uint64_t delay_ns, uint64_t token)
{
    bbe__ctx *c = (bbe__ctx *)ctx;
    uint64_t at = c->e->now_ns + delay_ns;
    if (at < c->e->now_ns)
        at = UINT64_MAX;
    return bbe__timer_add(c->e, at, BBE__T_COMPONENT, BBE__NONE, c->comp, token, NULL);
}

static int ctx_submit_work(bb_ctx *ctx, void (*work)(void *), void (*done)(void *), void *arg)
{
    bb_engine *e = ((bbe__ctx *)ctx)->e;
    if (!work)
        return BB_EINVAL;
    if (e->cfg.submit_work) {
        uint64_t token = e->next_work++;
        if (BBE__ARR_PUSH(&e->works, ((struct bbe__work){token, done, arg})) == 0) {
            if (e->cfg.submit_work(e->cfg.submit_work_ud, work, arg, token) == BB_OK)
                return BB_OK;
            e->works.n--;
        }
    }
    work(arg);
    if (done)
        done(arg);
    return BB_OK;
}

static void ctx_log(bb_ctx *ctx, bb_log_level level, const char *msg)
{
    bb_engine *e;
    bbe__comp *c = comp_of(ctx, &e);
    if (e->cfg.log)
        e->cfg.log(e->cfg.log_ud, level, c->slot, msg ? msg : "");
}

static const char *ctx_slot(bb_ctx *ctx)
{
    bb_engine *e;
    return comp_of(ctx, &e)->slot;
}

#define ADD_PEER_MAX_ADDRS 64

static int ctx_add_peer(bb_ctx *ctx, const bb_value *peer, const bb_value *addrs, bb_error *err)
{
    bb_engine *e = ((bbe__ctx *)ctx)->e;
    bb_peerid id;
    if (!bbe__peerid_from_value(peer, &id))
        return bb_error_set(err, BB_EINVAL, "add_peer: not a PeerId value");
    bb_engine_addr a[ADD_PEER_MAX_ADDRS];
    size_t n = 0;
    if (addrs && addrs->type->kind == BB_VK_ADDRESS) {
        a[n++] = (bb_engine_addr){addrs->u.bytes.data, addrs->u.bytes.len};
    } else if (addrs && addrs->type->kind == BB_VK_ADDRESS_VEC) {
        if (addrs->u.list.n > ADD_PEER_MAX_ADDRS)
            return bb_error_set(err, BB_ELIMIT, "add_peer: %zu addresses (max %d)",
                                addrs->u.list.n, ADD_PEER_MAX_ADDRS);
        for (size_t i = 0; i < addrs->u.list.n; i++) {
            const bb_value *x = addrs->u.list.items[i];
            if (!x || x->type->kind != BB_VK_ADDRESS)
                return bb_error_set(err, BB_EINVAL, "add_peer: address %zu is not a Multiaddress",
                                    i);
            a[n++] = (bb_engine_addr){x->u.bytes.data, x->u.bytes.len};
        }
    } else if (addrs) {
        return bb_error_set(err, BB_EINVAL, "add_peer: addresses are a %s", addrs->type->name);
    }
    /* handling another node's fill or answer: a peer new to the book is
     * that node's teaching, and one node's share is bounded */
    const bbe__peer *known = bbe__peer_find(e, &id);
    if (e->teacher && !bb_peerid_equal(e->teacher, &id) &&
        (!known || (!known->n_addrs && !known->connected)))
        return bbe__peer_add_taught(e, e->teacher, &id, a, n, err);
    return bb_engine_add_peer(e, &id, a, n, err);
}

static bool shared_key_ok(const char *key)
{
    return key && key[0] && strnlen(key, BB_SHARED_KEY_MAX + 1) <= BB_SHARED_KEY_MAX;
}

static bb_value *ctx_shared_get(bb_ctx *ctx, const char *key)
{
    bb_engine *e = ((bbe__ctx *)ctx)->e;
    if (!e->cfg.shared_get || !shared_key_ok(key))
        return NULL;
    return e->cfg.shared_get(e->cfg.shared_ud, key);
}

static bb_value *ctx_shared_put(bb_ctx *ctx, const char *key, bb_value *v)
{
    bb_engine *e = ((bbe__ctx *)ctx)->e;
    if (!v || !shared_key_ok(key))
        return NULL;
    if (!e->cfg.shared_put)
        return bb_value_ref(v); /* no cache: the caller keeps its own */
    return e->cfg.shared_put(e->cfg.shared_ud, key, v);
}

static int ctx_send_fill(bb_ctx *ctx, const bb_value *peer, const char *slot, const char *op,
                         const uint8_t *payload, size_t len, uint64_t timeout_ns, uint64_t *token,
                         bb_error *err)
{
    bbe__ctx *c = (bbe__ctx *)ctx;
    bb_peerid id = c->e->cfg.peer;
    if (peer && !bbe__peerid_from_value(peer, &id))
        return bb_error_set(err, BB_EINVAL, "%s: send_fill: peer is not a PeerId value",
                            c->e->comps[c->comp].slot);
    if (len && !payload)
        return bb_error_set(err, BB_EINVAL, "%s: send_fill: %zu bytes at NULL",
                            c->e->comps[c->comp].slot, len);
    return bbe__control_send(c->e, c->comp, &id, slot, op, payload, len, timeout_ns, token, err);
}

static size_t ctx_local_targets(bb_ctx *ctx, const char **out, size_t cap)
{
    bb_engine *e = ((bbe__ctx *)ctx)->e;
    for (size_t i = 0; out && i < e->n_targets && i < cap; i++)
        out[i] = e->targets[i].name;
    return e->n_targets;
}

const bb_ctx_api bbe__ctx_api = {
    .struct_size = sizeof(bb_ctx_api),
    .dependency = ctx_dependency,
    .call_dependency = ctx_call_dependency,
    .now_ns = ctx_now,
    .rng_u64 = ctx_rng,
    .local_peer = ctx_local_peer,
    .peers = ctx_peers,
    .peers_running = ctx_peers_running,
    .peer_addresses = ctx_peer_addresses,
    .open_completion = ctx_open_completion,
    .schedule = ctx_schedule,
    .submit_work = ctx_submit_work,
    .log = ctx_log,
    .slot = ctx_slot,
    .add_peer = ctx_add_peer,
    .shared_get = ctx_shared_get,
    .shared_put = ctx_shared_put,
    .send_fill = ctx_send_fill,
    .local_targets = ctx_local_targets,
};

void bbe__ctx_init(bb_engine *e, uint32_t comp)
{
    bbe__ctx *c = &e->comps[comp].ctx;
    c->pub.api = &bbe__ctx_api;
    c->e = e;
    c->comp = comp;
}

int bb_engine_work_done(bb_engine *e, uint64_t token)
{
    bbe__ingress_ev *ev = bbe__zalloc(sizeof *ev);
    if (!ev)
        return BB_ENOMEM;
    ev->kind = BBE__IN_WORK_DONE;
    ev->must = true;
    ev->u.work.token = token;
    return bbe__ingress_push(e, ev);
}
