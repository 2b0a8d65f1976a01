/*
 * pass_analyze_wire_edges.c — classifies every cross-partition edge and
 * groups outbound sends for batching (COMPILER.md "Pass groups";
 * IR_AND_DSL.md 5b "TriggerOnly classification").
 *
 * An edge is "trigger_only" when its payload carries nothing the receiver
 * uses: the sent value is a Trigger, or no node reads the receive's payload
 * output. Otherwise "data". The class is stamped as wire_transport on both
 * the send and the receive (the engine skips payload encoding for
 * trigger-only fills); sends and receives without a partner in this program
 * are classified from their own side. Every wire node also gets its
 * wire_correlation (none / request / response) when the recording left it
 * out, and every send a wire_batch group = its destination class: sends of
 * one partition with the same group batch into one envelope per peer.
 */
#include <string.h>

#include "bb/meta.h"
#include "bbc/compiler_internal.h"
#include "bbc/fnedit.h"
#include "bbc/util.h"
#include "bbc/wire.h"

static const char *correlation(const bb_node *n)
{
    if (bbc_str_eq(n->op_type, BB_OP_WIRE_SEND_REQ_BATCHED) ||
        bbc_str_eq(n->op_type, BB_OP_WIRE_RECV_REQ))
        return BB_WIRE_CORRELATION_REQUEST;
    if (bbc_str_eq(n->op_type, BB_OP_WIRE_SEND_RESP) ||
        bbc_str_eq(n->op_type, BB_OP_WIRE_RECV_RESP_BATCHED))
        return BB_WIRE_CORRELATION_RESPONSE;
    return BB_WIRE_CORRELATION_NONE;
}

/* Every partition function's wire ops by "<class>\x1f<name>" (the first). */
typedef struct node_ref {
    size_t part;
    bb_node *n;
} node_ref;
typedef BB_VEC(node_ref) node_refs;

static int index_nodes(bbc_state *st, bbc_map *by_name, node_refs *refs)
{
    if (bbc_map_init(by_name, st->scratch, 64) != BB_OK)
        return BB_ENOMEM;
    for (size_t k = 0; k < st->parts.n; k++) {
        bbc_partition *p = st->parts.v[k];
        for (size_t i = 0; i < p->fn->nodes.n; i++) {
            bb_node *n = p->fn->nodes.v[i];
            if (!n->name || !bbc_is_wire(n)) /* edges join wire ops only */
                continue;
            const char *key = bbc_join(st->scratch, p->cls, "\x1f", n->name);
            if (!key)
                return BB_ENOMEM;
            if (bbc_map_get(by_name, key, NULL))
                continue;
            node_ref *r = BB_VEC_PUSH(st->scratch, refs);
            if (!r || bbc_map_put(by_name, key, refs->n - 1) != BB_OK)
                return BB_ENOMEM;
            *r = (node_ref){k, n};
        }
    }
    return BB_OK;
}

static bb_node *find_node(bbc_state *st, const bbc_map *by_name, const node_ref *refs,
                          const char *cls, const char *name, size_t *part)
{
    size_t i;
    const char *key = bbc_join(st->scratch, cls, "\x1f", name);
    if (!key || !bbc_map_get(by_name, key, &i))
        return NULL;
    *part = refs[i].part;
    return refs[i].n;
}

static bool send_is_trigger(bbc_fnedit *flow, const bb_node *s)
{
    if (s->inputs.n == 0)
        return true;
    const bb_type_node *t = bbc_fnedit_type(flow, s->inputs.v[BBC_SEND_DATA]);
    return t && bb_type_same(t, &BB_TYPE_TRIGGER);
}

static bool payload_unused(const bbc_fnedit *flow, const bb_node *r)
{
    if (r->outputs.n <= BBC_RECV_PAYLOAD)
        return false;
    const char *v = r->outputs.v[BBC_RECV_PAYLOAD];
    return !v || !*v || !bbc_fnedit_consumed(flow, v, r);
}

static int stamp(bbc_state *st, bbc_partition *p, bb_node *n, const char *key, const char *val)
{
    if (bbc_meta_is(n, key, val))
        return BB_OK;
    return bbc_set_meta(p->model->arena, n, key, val) == BB_OK ? BB_OK : bbc_oom(st);
}

int bbc_pass_analyze_wire_edges(bbc_state *st)
{
    int rc;
    bbc_map by_name;
    node_refs refs = {0};
    bbc_fnedit **flows = bb_arena_calloc(st->scratch, st->parts.n + 1, sizeof *flows);
    if (!flows || index_nodes(st, &by_name, &refs) != BB_OK)
        return bbc_oom(st);
    for (size_t k = 0; k < st->parts.n; k++) {
        /* What the classification asks: sends' data types, receives' payloads. */
        const bb_function *f = st->parts.v[k]->fn;
        bbc_map focus;
        if (bbc_map_init(&focus, st->scratch, 16) != BB_OK || bbc_wire_ends(f, &focus) != BB_OK)
            return bbc_oom(st);
        if (!(flows[k] = bbc_fnedit_new_focused(st->scratch, st->parts.v[k]->model->arena,
                                                st->parts.v[k]->fn, &focus)))
            return bbc_oom(st);
    }
    /* Edges with both ends in this program. */
    for (size_t i = 0; i < st->edges.n; i++) {
        bbc_wire_edge *e = &st->edges.v[i];
        size_t sp = 0, rp = 0;
        bb_node *s = find_node(st, &by_name, refs.v, e->producer_class, e->send_node, &sp);
        bb_node *r = find_node(st, &by_name, refs.v, e->consumer_class, e->recv_node, &rp);
        if (!s || !r)
            return bbc_fail(st, BBC_E_INTERNAL, "wire edge '%s' -> '%s' lost its %s",
                            e->send_node, e->recv_node, s ? "receive" : "send");
        e->trigger_only = bbc_node_is(s, BB_DOMAIN_WIRE, BB_OP_WIRE_SEND_RESP)
                              ? false
                              : send_is_trigger(flows[sp], s) || payload_unused(flows[rp], r);
        const char *t = e->trigger_only ? BB_WIRE_TRANSPORT_TRIGGER_ONLY : BB_WIRE_TRANSPORT_DATA;
        if ((rc = stamp(st, st->parts.v[sp], s, BB_META_WIRE_TRANSPORT, t)) != BB_OK ||
            (rc = stamp(st, st->parts.v[rp], r, BB_META_WIRE_TRANSPORT, t)) != BB_OK)
            return rc;
    }
    /* Every wire node: correlation, one-sided transport, batching group. */
    for (size_t k = 0; k < st->parts.n; k++) {
        bbc_partition *p = st->parts.v[k];
        for (size_t i = 0; i < p->fn->nodes.n; i++) {
            bb_node *n = p->fn->nodes.v[i];
            if (!bbc_is_wire(n))
                continue;
            if (!bbc_meta(n, BB_META_WIRE_CORRELATION) &&
                (rc = stamp(st, p, n, BB_META_WIRE_CORRELATION, correlation(n))) != BB_OK)
                return rc;
            if (!bbc_meta(n, BB_META_WIRE_TRANSPORT)) {
                bool trig = bbc_is_wire_send(n) ? send_is_trigger(flows[k], n)
                                                : payload_unused(flows[k], n);
                if (bbc_node_is(n, BB_DOMAIN_WIRE, BB_OP_WIRE_SEND_RESP) ||
                    bbc_node_is(n, BB_DOMAIN_WIRE, BB_OP_WIRE_RECV_RESP_BATCHED))
                    trig = false;
                if ((rc = stamp(st, p, n, BB_META_WIRE_TRANSPORT,
                                trig ? BB_WIRE_TRANSPORT_TRIGGER_ONLY : BB_WIRE_TRANSPORT_DATA)) !=
                    BB_OK)
                    return rc;
            }
            const char *dest = bbc_meta(n, BB_META_DEST_CLASS);
            if (bbc_is_wire_send(n) && dest &&
                (rc = stamp(st, p, n, BB_META_WIRE_BATCH, dest)) != BB_OK)
                return rc;
        }
    }
    return BB_OK;
}
