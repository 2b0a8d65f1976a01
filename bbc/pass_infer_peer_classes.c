/*
 * pass_infer_peer_classes.c — stamps HOME_CLASS_KEY on every node of the
 * root with the peer class of the Node it runs on, and DEST_CLASS on every
 * wire send (DESIGN.md "Peer classes and partitions").
 *
 * A dataflow edge never crosses classes: sends belong to the class of their
 * data producers, receives to the class of their consumers, so every
 * connected component of the dataflow graph (undirected) is one class. The
 * recorder stamps the nodes of class modules; a component inherits the one
 * class its stamped nodes (or its net_in formals) carry. Two classes in one
 * component is CrossClassDataflow; a component with no class in a
 * multi-class program is UnresolvedPeerClass. A program without any class
 * is single-class: everything runs on SELF_CLASS "@self".
 *
 * A send's destination class is, in order: the recorder's dest_class (the
 * of_class tag of its peers), the peer_class of the PeerSelector node its
 * dest input comes from, that selector's own class (an untagged selector
 * samples peers of its own class), and for a SendResp without dest the
 * class of the requester. Otherwise UnresolvedPeerClass. A lookup_output or
 * receive of a port sent to another class is CrossClassDataflow naming the
 * port and both classes.
 */
#include <string.h>

#include "bb/meta.h"
#include "bbc/compiler_internal.h"
#include "bbc/util.h"
#include "bbc/wire.h"

static const char *nm(const bb_node *n)
{
    return n->name && *n->name ? n->name : "(unnamed)";
}

static size_t uf_find(size_t *parent, size_t x)
{
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

static void uf_union(size_t *parent, size_t a, size_t b)
{
    a = uf_find(parent, a);
    b = uf_find(parent, b);
    if (a != b)
        parent[a < b ? b : a] = a < b ? a : b;
}

static bool any_class(const bbc_state *st, const bb_function *f)
{
    for (size_t i = 0; i < f->nodes.n; i++) {
        const bb_node *n = f->nodes.v[i];
        if (bbc_meta(n, BB_META_HOME_CLASS) || bbc_meta(n, BB_META_PEER_CLASS) ||
            bbc_meta(n, BB_META_DEST_CLASS))
            return true;
    }
    for (size_t i = 0; i < st->net_ins.n; i++)
        if (st->net_ins.v[i].cls)
            return true;
    return bb_kv_get(&f->metadata, BB_META_HOME_CLASS) != NULL;
}

/* Assign every node its component's class. */
static int home_classes(bbc_state *st, bb_function *f)
{
    size_t n = f->nodes.n;
    bb_arena *a = st->scratch;
    /* Components over nodes plus one pseudo-node per net_in value. */
    size_t total = n + st->net_ins.n;
    size_t *parent = bb_arena_calloc(a, total + 1, sizeof *parent);
    const char **cls = bb_arena_calloc(a, total + 1, sizeof *cls);
    const char **who = bb_arena_calloc(a, total + 1, sizeof *who);
    const char **own = bb_arena_calloc(a, n + 1, sizeof *own); /* each node's stamped class */
    if (!parent || !cls || !who || !own)
        return bbc_oom(st);
    for (size_t i = 0; i < total; i++)
        parent[i] = i;
    bbc_map prod, net_in_of; /* net_in value -> index */
    if (bbc_producers(a, f, &prod, NULL) != BB_OK ||
        bbc_map_init(&net_in_of, a, st->net_ins.n) != BB_OK)
        return bbc_oom(st);
    for (size_t k = st->net_ins.n; k-- > 0;)
        if (st->net_ins.v[k].value && bbc_map_put(&net_in_of, st->net_ins.v[k].value, k) != BB_OK)
            return bbc_oom(st);
    for (size_t i = 0; i < n; i++) {
        const bb_node *nd = f->nodes.v[i];
        for (size_t j = 0; j < nd->inputs.n; j++) {
            size_t p;
            const char *v = nd->inputs.v[j];
            if (!v || !*v || !bbc_map_get(&prod, v, &p))
                continue;
            if (p != BBC_FORMAL) {
                uf_union(parent, i, p);
                continue;
            }
            size_t k;
            if (bbc_map_get(&net_in_of, v, &k))
                uf_union(parent, i, n + k);
        }
    }
    const char *fn_class = bb_kv_get(&f->metadata, BB_META_HOME_CLASS);
    for (size_t i = 0; i < total; i++) {
        const char *c = i < n ? (own[i] = bbc_meta(f->nodes.v[i], BB_META_HOME_CLASS))
                              : st->net_ins.v[i - n].cls;
        if (!c)
            continue;
        const char *label = i < n ? nm(f->nodes.v[i])
                                  : bb_arena_sprintf(a, "lookup_output '%s'", st->net_ins.v[i - n].port);
        size_t r = uf_find(parent, i);
        if (!cls[r]) {
            cls[r] = c;
            who[r] = label;
        } else if (!bbc_str_eq(cls[r], c)) {
            return bbc_fail(st, BBC_E_CROSS_CLASS_DATAFLOW,
                            "'%s' runs on class %s but exchanges values with '%s' on class %s "
                            "without a wire op (use net_out / lookup_output)",
                            label, c, who[r], cls[r]);
        }
    }
    for (size_t i = 0; i < n; i++) {
        bb_node *nd = f->nodes.v[i];
        if (own[i])
            continue;
        const char *c = cls[uf_find(parent, i)];
        if (!c)
            c = fn_class;
        if (!c)
            return bbc_fail(st, BBC_E_UNRESOLVED_PEER_CLASS,
                            "node '%s' (%s::%s) belongs to no peer class: nothing it exchanges "
                            "values with runs in a class module",
                            nm(nd), nd->domain ? nd->domain : "ai.onnx", nd->op_type);
        if (bbc_set_meta(st->model->arena, nd, BB_META_HOME_CLASS, c) != BB_OK)
            return bbc_oom(st);
    }
    for (size_t k = 0; k < st->net_ins.n; k++)
        if (!st->net_ins.v[k].cls) {
            const char *c = cls[uf_find(parent, n + k)];
            st->net_ins.v[k].cls = c ? c : fn_class;
        }
    return BB_OK;
}

static bool is_selector(const bb_node *n)
{
    return bbc_str_eq(n->domain, BB_DOMAIN_ROLE_PEER_SELECTOR) ||
           bbc_meta(n, BB_META_PEER_CLASS) != NULL;
}

static const char *dest_class(const bbc_wire_ix *x, bb_function *f, size_t si)
{
    const bb_node *s = f->nodes.v[si];
    const char *d = bbc_meta(s, BB_META_DEST_CLASS);
    if (d)
        return d;
    const char *dest = s->inputs.n > BBC_SEND_DEST ? s->inputs.v[BBC_SEND_DEST] : NULL;
    if (dest && *dest) {
        size_t p = bbc_wire_trace(x, dest, NULL);
        if (p == SIZE_MAX)
            return NULL;
        const bb_node *pn = f->nodes.v[p];
        if (bbc_meta(pn, BB_META_PEER_CLASS))
            return bbc_meta(pn, BB_META_PEER_CLASS);
        if (is_selector(pn))
            return bbc_meta(pn, BB_META_HOME_CLASS);
        return NULL;
    }
    if (bbc_node_is(s, BB_DOMAIN_WIRE, BB_OP_WIRE_SEND_RESP) && s->inputs.n > 2) {
        size_t q = bbc_wire_trace(x, s->inputs.v[2], NULL);
        if (q == SIZE_MAX)
            return NULL;
        size_t req = bbc_wire_sender(x, q);
        if (req != SIZE_MAX)
            return bbc_meta(f->nodes.v[req], BB_META_HOME_CLASS);
    }
    return NULL;
}

static int dest_classes(bbc_state *st, bb_function *f, bool single)
{
    const bbc_wire_ix *x = single ? NULL : bbc_wire_ix_new(st->scratch, f);
    if (!single && !x)
        return bbc_oom(st);
    for (size_t i = 0; i < f->nodes.n; i++) {
        bb_node *s = f->nodes.v[i];
        if (!bbc_is_wire_send(s) || bbc_meta(s, BB_META_DEST_CLASS))
            continue;
        const char *d = single ? BB_SELF_CLASS : dest_class(x, f, i);
        if (!d) {
            const char *peer = s->inputs.n > BBC_SEND_DEST ? s->inputs.v[BBC_SEND_DEST] : "";
            return bbc_fail(st, BBC_E_UNRESOLVED_PEER_CLASS,
                            "wire %s '%s': the peers in its dest input '%s' carry no peer class "
                            "(sample them from a PeerSelector, with of_class for another class)",
                            s->op_type, nm(s), peer && *peer ? peer : "(omitted)");
        }
        if (bbc_set_meta(st->model->arena, s, BB_META_DEST_CLASS, d) != BB_OK)
            return bbc_oom(st);
    }
    return BB_OK;
}

/* Receives and lookups of a port must sit in the class the port is sent to.
 * Indexed: lookups by port, receives by (op, port), sends by (op, port,
 * dest class), so the check costs the wire ops sharing a port. */
typedef struct port_index {
    bbc_map lookups; /* port -> first net_in; next_lookup chains the rest */
    size_t *next_lookup;
    bbc_map recvs;   /* "<op>\x1f<port>" -> first receive; next_recv chains */
    size_t *next_recv;
    bbc_map sends;   /* "<op>\x1f<port>\x1f<dest>" -> how many sends */
} port_index;

static const char *key2(bb_arena *a, const char *x, const char *y)
{
    return bb_arena_sprintf(a, "%s\x1f%s", x, y);
}

static int index_ports(bbc_state *st, const bb_function *f, port_index *px)
{
    bb_arena *a = st->scratch;
    size_t n = f->nodes.n;
    if (bbc_map_init(&px->lookups, a, st->net_ins.n) != BB_OK ||
        bbc_map_init(&px->recvs, a, 16) != BB_OK || bbc_map_init(&px->sends, a, 16) != BB_OK ||
        !(px->next_lookup = bb_arena_calloc(a, st->net_ins.n + 1, sizeof *px->next_lookup)) ||
        !(px->next_recv = bb_arena_calloc(a, n + 1, sizeof *px->next_recv)))
        return BB_ENOMEM;
    for (size_t k = st->net_ins.n; k-- > 0;) {
        const char *port = st->net_ins.v[k].port;
        px->next_lookup[k] = SIZE_MAX;
        bbc_map_get(&px->lookups, port, &px->next_lookup[k]);
        if (bbc_map_put(&px->lookups, port, k) != BB_OK)
            return BB_ENOMEM;
    }
    for (size_t i = n; i-- > 0;) {
        const bb_node *nd = f->nodes.v[i];
        const char *port = bbc_is_wire(nd) ? bbc_meta(nd, BB_META_PORT) : NULL;
        if (!port)
            continue;
        if (bbc_is_wire_recv(nd)) {
            const char *k = key2(a, nd->op_type, port);
            if (!k)
                return BB_ENOMEM;
            px->next_recv[i] = SIZE_MAX;
            bbc_map_get(&px->recvs, k, &px->next_recv[i]);
            if (bbc_map_put(&px->recvs, k, i) != BB_OK)
                return BB_ENOMEM;
        } else if (bbc_is_wire_send(nd) && bbc_meta(nd, BB_META_DEST_CLASS)) {
            const char *k = bb_arena_sprintf(a, "%s\x1f%s\x1f%s", nd->op_type, port,
                                             bbc_meta(nd, BB_META_DEST_CLASS));
            size_t c = 0;
            if (!k)
                return BB_ENOMEM;
            bbc_map_get(&px->sends, k, &c);
            if (bbc_map_put(&px->sends, k, c + 1) != BB_OK)
                return BB_ENOMEM;
        }
    }
    return BB_OK;
}

static int check_ports(bbc_state *st, bb_function *f)
{
    port_index px;
    if (index_ports(st, f, &px) != BB_OK)
        return bbc_oom(st);
    for (size_t i = 0; i < f->nodes.n; i++) {
        const bb_node *s = f->nodes.v[i];
        if (!bbc_is_wire_send(s))
            continue;
        const char *port = bbc_meta(s, BB_META_PORT);
        const char *dest = bbc_meta(s, BB_META_DEST_CLASS);
        if (!port || !dest)
            continue;
        size_t k = SIZE_MAX;
        bbc_map_get(&px.lookups, port, &k);
        for (; k != SIZE_MAX; k = px.next_lookup[k]) {
            const bbc_net_in *ni = &st->net_ins.v[k];
            if (ni->cls && !bbc_str_eq(ni->cls, dest))
                return bbc_fail(st, BBC_E_CROSS_CLASS_DATAFLOW,
                                "port '%s' is sent by '%s' to class %s but looked up in class %s",
                                port, nm(s), dest, ni->cls);
        }
        const char *rop = bbc_node_is(s, BB_DOMAIN_WIRE, BB_OP_WIRE_SEND)
                              ? BB_OP_WIRE_RECV
                              : bbc_node_is(s, BB_DOMAIN_WIRE, BB_OP_WIRE_SEND_REQ_BATCHED)
                                    ? BB_OP_WIRE_RECV_REQ
                                    : NULL;
        const char *rk = rop ? key2(st->scratch, rop, port) : NULL;
        if (rop && !rk)
            return bbc_oom(st);
        size_t j = SIZE_MAX;
        if (rk)
            bbc_map_get(&px.recvs, rk, &j);
        for (; j != SIZE_MAX; j = px.next_recv[j]) {
            const bb_node *r = f->nodes.v[j];
            const char *rc = bbc_meta(r, BB_META_HOME_CLASS);
            if (!rc || bbc_str_eq(rc, dest))
                continue;
            /* Another send of this port targets rc: that one feeds r. */
            const char *sk = bb_arena_sprintf(st->scratch, "%s\x1f%s\x1f%s", s->op_type, port, rc);
            if (!sk)
                return bbc_oom(st);
            if (bbc_map_get(&px.sends, sk, NULL))
                continue;
            return bbc_fail(st, BBC_E_CROSS_CLASS_DATAFLOW,
                            "port '%s' is sent by '%s' to class %s but received by '%s' in "
                            "class %s",
                            port, nm(s), dest, nm(r), rc);
        }
    }
    return BB_OK;
}

static int infer_function(bbc_state *st, bb_function *f)
{
    bool single = !any_class(st, f);
    int rc;
    if (single) {
        for (size_t i = 0; i < f->nodes.n; i++)
            if (!bbc_meta(f->nodes.v[i], BB_META_HOME_CLASS) &&
                bbc_set_meta(st->model->arena, f->nodes.v[i], BB_META_HOME_CLASS,
                             BB_SELF_CLASS) != BB_OK)
                return bbc_oom(st);
        for (size_t k = 0; k < st->net_ins.n; k++)
            if (!st->net_ins.v[k].cls)
                st->net_ins.v[k].cls = BB_SELF_CLASS;
    } else if ((rc = home_classes(st, f)) != BB_OK) {
        return rc;
    }
    if ((rc = dest_classes(st, f, single)) != BB_OK)
        return rc;
    return check_ports(st, f);
}

int bbc_pass_infer_peer_classes(bbc_state *st)
{
    if (st->parts.n > 0)
        return BB_OK; /* already partitioned: every node carries its class */
    return infer_function(st, st->root);
}
