/*
 * pass_synthesize_wire_recvs.c — materializes the wire.Recv of every
 * lookup_output (IR_AND_DSL.md "Network primitives at module boundaries"):
 * for each net_in formal (port P, class C) one Recv homed in C produces the
 * formal's value as its payload, so consumers need no rewiring; the formal
 * leaves function.input. Recv nodes are compiler-synthesized: they never
 * appear in authored bodies.
 *
 * Every matched send/receive pair (net_out -> synthesized Recv, and the
 * user-authored Send/Recv, SendReqBatched/RecvReq, SendResp/RecvRespBatched
 * pairs) is linked by name: the send gets dest_site = the receive node (the
 * NodeSiteId it addresses), the receive gets src_site = the send. The
 * payload_type of a synthesized Recv is the send's type; the storage check
 * that follows (bbc_check_wire_storage) refines it or reports
 * IncompatibleStorageOnEdge.
 */
#include <stdio.h>
#include <string.h>

#include "bb/meta.h"
#include "bbc/compiler.h"
#include "bbc/util.h"
#include "bbc/wire.h"

static bool name_taken(const bb_function *f, const char *name)
{
    for (size_t i = 0; i < f->nodes.n; i++)
        if (bbc_str_eq(f->nodes.v[i]->name, name))
            return true;
    return false;
}

static const char *fresh_node_name(bb_arena *a, const bb_function *f, const char *base)
{
    if (!name_taken(f, base))
        return bb_arena_strdup(a, base);
    for (unsigned k = 1;; k++) {
        char *s = bb_arena_sprintf(a, "%s_%u", base, k);
        if (!s || !name_taken(f, s))
            return s;
    }
}

/* The Send (index) with this port whose dest class is cls, or SIZE_MAX. */
static size_t port_sender(const bb_function *f, const char *port, const char *cls)
{
    for (size_t i = 0; i < f->nodes.n; i++) {
        const bb_node *s = f->nodes.v[i];
        if (bbc_node_is(s, BB_DOMAIN_WIRE, BB_OP_WIRE_SEND) && bbc_meta_is(s, BBC_META_PORT, port) &&
            (!cls || !bbc_meta(s, BB_META_DEST_CLASS) || bbc_meta_is(s, BB_META_DEST_CLASS, cls)))
            return i;
    }
    return SIZE_MAX;
}

/* An existing Recv of port in class cls, or NULL. */
static bb_node *existing_recv(const bb_function *f, const char *port, const char *cls)
{
    for (size_t i = 0; i < f->nodes.n; i++) {
        bb_node *r = f->nodes.v[i];
        if (bbc_node_is(r, BB_DOMAIN_WIRE, BB_OP_WIRE_RECV) && bbc_meta_is(r, BBC_META_PORT, port) &&
            (!cls || bbc_meta_is(r, BB_META_HOME_CLASS, cls)))
            return r;
    }
    return NULL;
}

static size_t first_consumer(const bb_function *f, const char *v)
{
    for (size_t i = 0; i < f->nodes.n; i++)
        if (bb_str_list_find(&f->nodes.v[i]->inputs, v) >= 0)
            return i;
    return f->nodes.n;
}

static int materialize(bbc_state *st, const bbc_net_in *ni)
{
    bb_function *f = st->root;
    bb_arena *a = st->model->arena;
    const char *cls = ni->cls ? ni->cls : BB_SELF_CLASS;
    bb_node *have = existing_recv(f, ni->port, cls);
    long fi = bb_str_list_find(&f->inputs, ni->value);
    if (fi >= 0)
        BB_VEC_REMOVE(&f->inputs, (size_t)fi);
    char key[1100];
    snprintf(key, sizeof key, "%s%s", BBC_META_NET_IN_PREFIX, ni->port);
    bb_kv_remove(&f->metadata, key);
    if (have) {
        /* A second lookup of the port in this class shares the Recv. */
        if (have->outputs.n > BBC_RECV_PAYLOAD &&
            !bbc_str_eq(have->outputs.v[BBC_RECV_PAYLOAD], ni->value))
            bbc_rewire_consumers(f, ni->value, have->outputs.v[BBC_RECV_PAYLOAD], NULL);
        return BB_OK;
    }
    char base[1100];
    snprintf(base, sizeof base, "%s/Recv_%s", cls, ni->port);
    bb_node *r = bb_node_new(a, BB_DOMAIN_WIRE, BB_OP_WIRE_RECV);
    const char *name = fresh_node_name(a, f, base);
    char tb[1100];
    snprintf(tb, sizeof tb, "%s.trigger", ni->value);
    const char *trig = bbc_fresh_value(a, f, tb);
    if (!r || !name || !trig || bb_str_list_push(a, &r->outputs, trig) != BB_OK ||
        bb_str_list_push(a, &r->outputs, ni->value) != BB_OK)
        return bbc_oom(st);
    r->name = name;
    if (bbc_set_meta(a, r, BB_META_HOME_CLASS, cls) != BB_OK ||
        bbc_set_meta(a, r, BBC_META_PORT, ni->port) != BB_OK ||
        bbc_set_meta(a, r, BB_META_WIRE_CORRELATION, BB_WIRE_CORRELATION_NONE) != BB_OK ||
        bbc_set_meta(a, r, BBC_META_SYNTHESIZED, "true") != BB_OK ||
        bbc_set_value_type(a, f, trig, &BB_TYPE_TRIGGER) != BB_OK)
        return bbc_oom(st);
    /* The lookup's own type when it is a leaf, else the send's when it fits;
     * a contradiction is left to the storage check. */
    size_t s = port_sender(f, ni->port, cls);
    const bb_type_node *pt = bbc_value_type(f, ni->value);
    if ((!pt || !bb_type_is_leaf(pt)) && s != SIZE_MAX && f->nodes.v[s]->inputs.n > 0) {
        const bb_type_node *st_ = bbc_value_type(f, f->nodes.v[s]->inputs.v[BBC_SEND_DATA]);
        if (st_ && (!pt || bb_type_is_a(st_, pt)))
            pt = st_;
    }
    if (pt && bb_type_is_leaf(pt)) {
        bb_attr *at = bb_node_add_attr(a, r, BB_ATTR_NAME_PAYLOAD_TYPE, BB_ATTR_TYPE_PROTO);
        if (!at || !(at->tp = bb_type_to_proto(a, pt)))
            return bbc_oom(st);
    }
    if (bbc_insert_node(a, f, first_consumer(f, ni->value), r) != BB_OK)
        return bbc_oom(st);
    return BB_OK;
}

/* dest_site / src_site on every matched pair. */
static int link_pairs(bbc_state *st)
{
    bb_function *f = st->root;
    bb_arena *a = st->model->arena;
    size_t rx[16];
    for (size_t i = 0; i < f->nodes.n; i++) {
        bb_node *s = f->nodes.v[i];
        if (!bbc_is_wire_send(s))
            continue;
        size_t k = bbc_wire_receivers(f, i, rx, 16);
        if (k == 0)
            continue;
        if (k > 1 && !bbc_meta(s, BBC_META_DEST_SITE)) {
            char list[256] = "";
            size_t len = 0;
            for (size_t r = 0; r < k && r < 16 && len < sizeof list; r++)
                len += (size_t)snprintf(list + len, sizeof list - len, "%s'%s'", r ? ", " : "",
                                        f->nodes.v[rx[r]]->name);
            return bbc_fail(st, BBC_E_INTERNAL,
                            "wire %s '%s' matches %zu receives (%s); one port feeds one receive "
                            "per destination class",
                            s->op_type, s->name, k, list);
        }
        bb_node *r = f->nodes.v[rx[0]];
        if (!bbc_meta(s, BBC_META_DEST_SITE) && bbc_set_meta(a, s, BBC_META_DEST_SITE, r->name))
            return bbc_oom(st);
        if (!bbc_meta(r, BBC_META_SRC_SITE) && bbc_set_meta(a, r, BBC_META_SRC_SITE, s->name))
            return bbc_oom(st);
    }
    return BB_OK;
}

int bbc_pass_synthesize_wire_recvs(bbc_state *st)
{
    if (st->parts.n > 0)
        return BB_OK;
    for (size_t i = 0; i < st->net_ins.n; i++) {
        int rc = materialize(st, &st->net_ins.v[i]);
        if (rc != BB_OK)
            return rc;
    }
    st->net_ins.n = 0;
    return link_pairs(st);
}
