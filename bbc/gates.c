/*
 * gates.c — the gate contracts and the two splicing shapes (RX chain off a
 * cursor, TX chain by rewriting the send's input[0]); see gates.h.
 */
#include "bbc/gates.h"

#include <string.h>

#include "bb/meta.h"
#include "bbc/fnedit.h"
#include "bbc/util.h"
#include "bbc/wire.h"

const bbc_gate_contract BBC_GATE_CONTRACTS[5] = {
    {BB_OP_DEDUP_GATE_RX, BB_META_DEDUP_RX_GATED, BB_META_DEDUP_RX_SOURCE, "dedup_rx_out", true},
    {BB_OP_PEER_HEALTH_GATE_RX, BB_META_PEER_HEALTH_RX_GATED, BB_META_PEER_HEALTH_RX_SOURCE,
     "peer_health_rx_out", true},
    {BB_OP_BACKOFF_GATE_RX, BB_META_BACKOFF_RX_GATED, BB_META_BACKOFF_RX_SOURCE,
     "backoff_rx_out", true},
    {BB_OP_PEER_HEALTH_GATE_TX, BB_META_PEER_HEALTH_TX_GATED, BB_META_PEER_HEALTH_TX_SOURCE,
     "peer_health_tx_gated", false},
    {BB_OP_BACKOFF_GATE_TX, BB_META_BACKOFF_TX_GATED, BB_META_BACKOFF_TX_SOURCE,
     "backoff_tx_gated", false},
};

bool bbc_rx_routed(const bb_node *n)
{
    return bbc_node_is(n, BB_DOMAIN_WIRE, BB_OP_WIRE_RECV) ||
           bbc_node_is(n, BB_DOMAIN_WIRE, BB_OP_WIRE_RECV_REQ);
}

bool bbc_tx_routed(const bb_node *n)
{
    return bbc_is_wire_send(n) && n->inputs.n > 0 && n->inputs.v[0] && *n->inputs.v[0];
}

/* The receive's chain head: the stamped cursor, else the payload when it is
 * read, else the trigger. */
static const char *rx_head(const bbc_fnedit *e, const bb_node *r)
{
    const char *h = bbc_meta(r, BB_META_RX_CHAIN_HEAD);
    if (h)
        return h;
    if (r->outputs.n > BBC_RECV_PAYLOAD) {
        const char *p = r->outputs.v[BBC_RECV_PAYLOAD];
        if (p && *p && bbc_fnedit_consumed(e, p, r))
            return p;
    }
    return r->outputs.n ? r->outputs.v[0] : NULL;
}

static bb_node *gate_node(bb_arena *a, const bbc_gate_contract *g, const bb_node *wire,
                          const char *in, const char *out)
{
    bb_node *n = bb_node_new(a, BB_DOMAIN_SYSCALL, g->op);
    if (!n || !out)
        return NULL;
    n->name = bb_arena_sprintf(a, "%s#%s", wire->name, g->op);
    const char *cls = bbc_meta(wire, BB_META_HOME_CLASS);
    if (!n->name || bbc_set_meta(a, n, g->source_key, wire->name) != BB_OK ||
        (cls && bbc_set_meta(a, n, BB_META_HOME_CLASS, cls) != BB_OK) ||
        bb_str_list_push(a, &n->inputs, in) != BB_OK ||
        bb_str_list_push(a, &n->outputs, out) != BB_OK)
        return NULL;
    return n;
}

/* The gate's output carries the type of what it guards. */
static int copy_type(bbc_fnedit *e, const char *from, const char *to)
{
    const bb_type_node *t = bbc_fnedit_type(e, from);
    return t ? bbc_fnedit_set_type(e, to, t) : BB_OK;
}

static int insert_rx(bbc_state *st, bbc_partition *p, const bbc_gate_contract *g)
{
    bb_function *f = p->fn;
    bb_arena *a = p->model->arena;
    /* The index covers the values a chain head can be. */
    bbc_map focus;
    if (bbc_map_init(&focus, st->scratch, 16) != BB_OK)
        return bbc_oom(st);
    for (size_t i = 0; i < f->nodes.n; i++) {
        const bb_node *r = f->nodes.v[i];
        if (!bbc_rx_routed(r) || bbc_meta(r, g->gated_key))
            continue;
        for (size_t j = 0; j < r->outputs.n && j <= BBC_RECV_PAYLOAD; j++)
            if (bbc_set_add(&focus, r->outputs.v[j]) != BB_OK)
                return bbc_oom(st);
        if (bbc_set_add(&focus, bbc_meta(r, BB_META_RX_CHAIN_HEAD)) != BB_OK)
            return bbc_oom(st);
    }
    if (focus.n == 0)
        return BB_OK;
    bbc_fnedit *e = bbc_fnedit_new_focused(st->scratch, a, f, &focus);
    if (!e)
        return bbc_oom(st);
    for (size_t i = 0; i < f->nodes.n; i++) {
        bb_node *r = f->nodes.v[i];
        if (!bbc_rx_routed(r) || bbc_meta(r, g->gated_key))
            continue;
        const char *head = rx_head(e, r);
        if (!head || !*head)
            continue;
        const char *out = bb_arena_sprintf(a, "%s#%s", r->name, g->suffix);
        bb_node *gn = gate_node(a, g, r, head, out);
        if (!gn)
            return bbc_oom(st);
        bbc_fnedit_rewire(e, head, out, gn);
        size_t at = bbc_fnedit_producer(e, head);
        if (copy_type(e, head, out) != BB_OK ||
            bbc_fnedit_insert(e, at == SIZE_MAX ? f->nodes.n : at + 1, gn) != BB_OK ||
            bbc_set_meta(a, r, g->gated_key, BB_META_GATED_VALUE) != BB_OK ||
            bbc_set_meta(a, r, BB_META_RX_CHAIN_HEAD, out) != BB_OK)
            return bbc_oom(st);
    }
    return bbc_fnedit_commit(e) == BB_OK ? BB_OK : bbc_oom(st);
}

static int insert_tx(bbc_state *st, bbc_partition *p, const bbc_gate_contract *g)
{
    bb_function *f = p->fn;
    bb_arena *a = p->model->arena;
    bbc_map focus; /* the values the TX gates take */
    if (bbc_map_init(&focus, st->scratch, 16) != BB_OK)
        return bbc_oom(st);
    for (size_t i = 0; i < f->nodes.n; i++) {
        const bb_node *s = f->nodes.v[i];
        if (bbc_tx_routed(s) && !bbc_meta(s, g->gated_key) &&
            bbc_set_add(&focus, s->inputs.v[0]) != BB_OK)
            return bbc_oom(st);
    }
    if (focus.n == 0)
        return BB_OK;
    bbc_fnedit *e = bbc_fnedit_new_types(st->scratch, a, f, &focus);
    if (!e)
        return bbc_oom(st);
    for (size_t i = 0; i < f->nodes.n; i++) {
        bb_node *s = f->nodes.v[i];
        if (!bbc_tx_routed(s) || bbc_meta(s, g->gated_key))
            continue;
        const char *gated = s->inputs.v[0];
        bb_node *gn = gate_node(a, g, s, gated, bb_arena_sprintf(a, "%s#%s", s->name, g->suffix));
        if (!gn)
            return bbc_oom(st);
        const bb_attr *peer = bb_node_attr(s, BB_ATTR_NAME_PEER);
        if (peer) {
            bb_attr *c = bb_attr_clone(a, peer);
            bb_attr **slot = c ? BB_VEC_PUSH(a, &gn->attrs) : NULL;
            if (!slot)
                return bbc_oom(st);
            *slot = c;
        }
        s->inputs.v[0] = gn->outputs.v[0];
        if (copy_type(e, gated, gn->outputs.v[0]) != BB_OK ||
            bbc_set_meta(a, s, g->gated_key, BB_META_GATED_VALUE) != BB_OK ||
            bbc_fnedit_insert(e, i, gn) != BB_OK)
            return bbc_oom(st);
    }
    return bbc_fnedit_commit(e) == BB_OK ? BB_OK : bbc_oom(st);
}

int bbc_insert_gate(bbc_state *st, const bbc_gate_contract *g)
{
    for (size_t k = 0; k < st->parts.n; k++) {
        int rc = g->rx ? insert_rx(st, st->parts.v[k], g) : insert_tx(st, st->parts.v[k], g);
        if (rc != BB_OK)
            return rc;
    }
    return BB_OK;
}

/* ---- the pre-flight check ------------------------------------------------------- */

struct bbc_gate_index {
    bbc_map gates; /* "<op>\x1f<protected wire op>" -> gate node index (first) */
    const bb_function *f;
    bbc_fnedit *flow;
};

static const char *gate_key(bb_arena *a, const char *op, const char *wire)
{
    return bb_arena_sprintf(a, "%s\x1f%s", op, wire ? wire : "");
}

bbc_gate_index *bbc_gate_index_new(bb_arena *a, const bb_function *f)
{
    bbc_gate_index *gx = bb_arena_alloc(a, sizeof *gx);
    bbc_map focus; /* what the checks ask: are the gates' and checks' outputs read? */
    if (!gx || bbc_map_init(&gx->gates, a, 16) != BB_OK || bbc_map_init(&focus, a, 16) != BB_OK)
        return NULL;
    for (size_t i = 0; i < f->nodes.n; i++) {
        const bb_node *n = f->nodes.v[i];
        if (bb_op_is_gate(n->domain, n->op_type) || bbc_node_is(n, BB_DOMAIN_SYSCALL, BB_OP_DEADLINE_CHECK))
            for (size_t j = 0; j < n->outputs.n; j++)
                if (bbc_set_add(&focus, n->outputs.v[j]) != BB_OK)
                    return NULL;
    }
    /* Read-only use: the editor never edits here. */
    if (!(gx->flow = bbc_fnedit_new_focused(a, a, (bb_function *)f, &focus)))
        return NULL;
    gx->f = f;
    for (size_t i = f->nodes.n; i-- > 0;) {
        const bb_node *n = f->nodes.v[i];
        if (!bbc_str_eq(n->domain, BB_DOMAIN_SYSCALL))
            continue;
        for (size_t g = 0; g < BBC_N_GATE_CONTRACTS; g++) {
            const bbc_gate_contract *c = &BBC_GATE_CONTRACTS[g];
            const char *src = bbc_str_eq(n->op_type, c->op) ? bbc_meta(n, c->source_key) : NULL;
            if (!src)
                continue;
            const char *k = gate_key(a, c->op, src);
            if (!k || bbc_map_put(&gx->gates, k, i) != BB_OK)
                return NULL;
        }
    }
    return gx;
}

const struct bbc_fnedit *bbc_gate_index_flow(const bbc_gate_index *gx)
{
    return gx->flow;
}

const char *bbc_gate_missing(bb_arena *a, const bbc_gate_index *gx, const bb_node *n,
                             const bbc_gate_contract *g)
{
    if (g->rx ? !bbc_rx_routed(n) : !bbc_tx_routed(n))
        return NULL;
    size_t i;
    const char *k = gate_key(a, g->op, n->name);
    if (!k || !bbc_map_get(&gx->gates, k, &i))
        return bb_arena_sprintf(a, "%s '%s' has no %s", n->op_type, n->name, g->op);
    const bb_node *gn = gx->f->nodes.v[i];
    if (!bbc_meta_is(n, g->gated_key, BB_META_GATED_VALUE))
        return bb_arena_sprintf(a, "%s '%s' lacks the %s stamp", n->op_type, n->name, g->gated_key);
    if (gn->inputs.n == 0 || gn->outputs.n != 1)
        return bb_arena_sprintf(a, "%s '%s' of '%s' is malformed", g->op, gn->name, n->name);
    /* RX: the output is read (by the next gate or the consumers) or is the
     * chain head; TX: it reaches the send's input[0] through the chain. */
    const char *o = gn->outputs.v[0];
    if (bbc_fnedit_consumed(gx->flow, o, gn) || (g->rx && bbc_meta_is(n, BB_META_RX_CHAIN_HEAD, o)))
        return NULL;
    return bb_arena_sprintf(a, "%s '%s' of '%s' feeds nothing", g->op, gn->name, n->name);
}
