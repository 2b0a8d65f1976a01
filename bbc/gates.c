/*
 * gates.c — the gate contracts and the two splicing shapes (RX chain off a
 * cursor, TX chain by rewriting the send's input[0]); see gates.h.
 */
#include "bbc/gates.h"

#include <string.h>

#include "bb/meta.h"
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
static const char *rx_head(const bb_function *f, const bb_node *r)
{
    const char *h = bbc_meta(r, BB_META_RX_CHAIN_HEAD);
    if (h)
        return h;
    if (r->outputs.n > BBC_RECV_PAYLOAD) {
        const char *p = r->outputs.v[BBC_RECV_PAYLOAD];
        if (p && *p && (bbc_value_consumed(f, p, r) || bb_str_list_find(&f->outputs, p) >= 0))
            return p;
    }
    return r->outputs.n ? r->outputs.v[0] : NULL;
}

static size_t producer_index(const bb_function *f, const char *v)
{
    for (size_t i = 0; i < f->nodes.n; i++)
        if (bb_str_list_find(&f->nodes.v[i]->outputs, v) >= 0)
            return i;
    return SIZE_MAX;
}

static bb_node *gate_node(bbc_state *st, bb_arena *a, const bbc_gate_contract *g,
                          const bb_node *wire)
{
    bb_node *n = bb_node_new(a, BB_DOMAIN_SYSCALL, g->op);
    if (!n)
        return NULL;
    n->name = bb_arena_sprintf(a, "%s#%s", wire->name, g->op);
    const char *cls = bbc_meta(wire, BB_META_HOME_CLASS);
    if (!n->name || bbc_set_meta(a, n, g->source_key, wire->name) != BB_OK ||
        (cls && bbc_set_meta(a, n, BB_META_HOME_CLASS, cls) != BB_OK))
        return NULL;
    (void)st;
    return n;
}

static int insert_rx(bbc_state *st, bbc_partition *p, const bbc_gate_contract *g)
{
    bb_function *f = p->fn;
    bb_arena *a = p->model->arena;
    /* Collect first: insertion shifts indices. */
    BB_VEC(bb_node *) recvs = {0};
    for (size_t i = 0; i < f->nodes.n; i++) {
        bb_node *n = f->nodes.v[i];
        if (!bbc_rx_routed(n) || bbc_meta(n, g->gated_key))
            continue;
        bb_node **slot = BB_VEC_PUSH(st->arena, &recvs);
        if (!slot)
            return bbc_oom(st);
        *slot = n;
    }
    for (size_t k = 0; k < recvs.n; k++) {
        bb_node *r = recvs.v[k];
        const char *head = rx_head(f, r);
        if (!head || !*head)
            continue;
        const char *out = bb_arena_sprintf(a, "%s#%s", r->name, g->suffix);
        bb_node *gn = gate_node(st, a, g, r);
        if (!out || !gn || bb_str_list_push(a, &gn->inputs, head) != BB_OK ||
            bb_str_list_push(a, &gn->outputs, out) != BB_OK)
            return bbc_oom(st);
        bbc_rewire_consumers(f, head, out, gn);
        const bb_type_node *t = bbc_value_type(f, head);
        if (t && bbc_set_value_type(a, f, out, t) != BB_OK)
            return bbc_oom(st);
        size_t at = producer_index(f, head);
        if (bbc_insert_node(a, f, at == SIZE_MAX ? f->nodes.n : at + 1, gn) != BB_OK ||
            bbc_set_meta(a, r, g->gated_key, BB_META_GATED_VALUE) != BB_OK ||
            bbc_set_meta(a, r, BB_META_RX_CHAIN_HEAD, out) != BB_OK)
            return bbc_oom(st);
    }
    return BB_OK;
}

static int insert_tx(bbc_state *st, bbc_partition *p, const bbc_gate_contract *g)
{
    bb_function *f = p->fn;
    bb_arena *a = p->model->arena;
    for (size_t i = 0; i < f->nodes.n; i++) {
        bb_node *s = f->nodes.v[i];
        if (!bbc_tx_routed(s) || bbc_meta(s, g->gated_key))
            continue;
        const char *gated = s->inputs.v[0];
        const char *out = bb_arena_sprintf(a, "%s#%s", s->name, g->suffix);
        bb_node *gn = gate_node(st, a, g, s);
        if (!out || !gn || bb_str_list_push(a, &gn->inputs, gated) != BB_OK ||
            bb_str_list_push(a, &gn->outputs, out) != BB_OK)
            return bbc_oom(st);
        const bb_attr *peer = bb_node_attr(s, BB_ATTR_NAME_PEER);
        if (peer) {
            bb_attr *c = bb_attr_clone(a, peer);
            bb_attr **slot = c ? BB_VEC_PUSH(a, &gn->attrs) : NULL;
            if (!slot)
                return bbc_oom(st);
            *slot = c;
        }
        const bb_type_node *t = bbc_value_type(f, gated);
        if (t && bbc_set_value_type(a, f, out, t) != BB_OK)
            return bbc_oom(st);
        s->inputs.v[0] = out;
        if (bbc_set_meta(a, s, g->gated_key, BB_META_GATED_VALUE) != BB_OK ||
            bbc_insert_node(a, f, i, gn) != BB_OK)
            return bbc_oom(st);
        i++; /* skip the send we just passed */
    }
    return BB_OK;
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

/* The gate of contract g for wire node n, or NULL. */
static const bb_node *find_gate(const bb_function *f, const bb_node *n, const bbc_gate_contract *g)
{
    for (size_t i = 0; i < f->nodes.n; i++) {
        const bb_node *x = f->nodes.v[i];
        if (bbc_node_is(x, BB_DOMAIN_SYSCALL, g->op) && bbc_meta_is(x, g->source_key, n->name))
            return x;
    }
    return NULL;
}

const char *bbc_gate_missing(bb_arena *a, const bb_function *f, const bb_node *n,
                             const bbc_gate_contract *g)
{
    if (g->rx ? !bbc_rx_routed(n) : !bbc_tx_routed(n))
        return NULL;
    const bb_node *gn = find_gate(f, n, g);
    if (!gn)
        return bb_arena_sprintf(a, "%s '%s' has no %s", n->op_type, n->name, g->op);
    if (!bbc_meta_is(n, g->gated_key, BB_META_GATED_VALUE))
        return bb_arena_sprintf(a, "%s '%s' lacks the %s stamp", n->op_type, n->name, g->gated_key);
    if (gn->inputs.n == 0 || gn->outputs.n != 1)
        return bb_arena_sprintf(a, "%s '%s' of '%s' is malformed", g->op, gn->name, n->name);
    if (g->rx) {
        /* The gate output must be read (by the next gate or the consumers),
         * or be the chain head. */
        const char *o = gn->outputs.v[0];
        if (!bbc_value_consumed(f, o, gn) && !bbc_meta_is(n, BB_META_RX_CHAIN_HEAD, o) &&
            bb_str_list_find(&f->outputs, o) < 0)
            return bb_arena_sprintf(a, "%s '%s' of '%s' feeds nothing", g->op, gn->name, n->name);
        return NULL;
    }
    /* TX: the gate output reaches the send's input[0] through the chain. */
    const char *o = gn->outputs.v[0];
    if (!bbc_value_consumed(f, o, gn))
        return bb_arena_sprintf(a, "%s '%s' of '%s' feeds nothing", g->op, gn->name, n->name);
    return NULL;
}
