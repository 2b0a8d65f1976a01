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
#include "bbc/compiler_internal.h"
#include "bbc/fnedit.h"
#include "bbc/util.h"
#include "bbc/wire.h"

/* What materializing looks up, indexed once for all the net_ins. */
typedef struct synth {
    bbc_state *st;
    bb_function *f;
    bb_arena *a;        /* the model's (IR objects) */
    bbc_fnedit *e;      /* types, consumers, queued insertions */
    bbc_map names;      /* node names taken */
    bbc_map values;     /* value names used */
    bbc_map recvs;      /* "<port>\x1f<class>" -> index into made[] */
    bbc_map first_use;  /* value -> first node reading it */
    bbc_map sends;      /* port -> first Send with it; next_send chains the rest */
    size_t *next_send;
    bbc_map drop;       /* formals and metadata keys to remove */
    BB_VEC(bb_node *) made;
} synth;

static int synth_init(synth *y, bbc_state *st)
{
    bb_function *f = st->root;
    bb_arena *side = st->scratch;
    size_t n = f->nodes.n;
    y->st = st;
    y->f = f;
    y->a = st->model->arena;
    /* The editor covers the lookup values and what Sends send. */
    bbc_map focus;
    if (bbc_map_init(&focus, side, st->net_ins.n + 16) != BB_OK)
        return BB_ENOMEM;
    for (size_t k = 0; k < st->net_ins.n; k++)
        if (bbc_set_add(&focus, st->net_ins.v[k].value) != BB_OK)
            return BB_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const bb_node *nd = f->nodes.v[i];
        if (bbc_is_wire_send(nd) && nd->inputs.n > 0 &&
            bbc_set_add(&focus, nd->inputs.v[BBC_SEND_DATA]) != BB_OK)
            return BB_ENOMEM;
    }
    if (!(y->e = bbc_fnedit_new_focused(side, y->a, f, &focus)) ||
        bbc_map_init(&y->names, side, n) != BB_OK ||
        /* About one value per node (the maps grow when there are more). */
        bbc_map_init(&y->values, side, n + f->inputs.n + f->outputs.n) != BB_OK ||
        bbc_map_init(&y->recvs, side, 8) != BB_OK || bbc_map_init(&y->first_use, side, n) != BB_OK ||
        bbc_map_init(&y->sends, side, 8) != BB_OK || bbc_map_init(&y->drop, side, 8) != BB_OK ||
        !(y->next_send = bb_arena_calloc(side, n + 1, sizeof *y->next_send)))
        return BB_ENOMEM;
    const bb_str_list *ports[2] = {&f->inputs, &f->outputs};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < ports[k]->n; i++)
            if (ports[k]->v[i] && bbc_map_put(&y->values, ports[k]->v[i], 0) != BB_OK)
                return BB_ENOMEM;
    for (size_t i = n; i-- > 0;) {
        bb_node *nd = f->nodes.v[i];
        if (nd->name && bbc_map_put(&y->names, nd->name, i) != BB_OK)
            return BB_ENOMEM;
        for (size_t j = 0; j < nd->outputs.n; j++)
            if (nd->outputs.v[j] && bbc_map_put(&y->values, nd->outputs.v[j], i) != BB_OK)
                return BB_ENOMEM;
        for (size_t j = 0; j < nd->inputs.n; j++)
            if (nd->inputs.v[j] && (bbc_map_put(&y->values, nd->inputs.v[j], i) != BB_OK ||
                                    bbc_map_put(&y->first_use, nd->inputs.v[j], i) != BB_OK))
                return BB_ENOMEM;
        const char *port = bbc_node_is(nd, BB_DOMAIN_WIRE, BB_OP_WIRE_SEND)
                               ? bbc_meta(nd, BB_META_PORT)
                               : NULL;
        if (port) {
            y->next_send[i] = SIZE_MAX;
            bbc_map_get(&y->sends, port, &y->next_send[i]);
            if (bbc_map_put(&y->sends, port, i) != BB_OK)
                return BB_ENOMEM;
        }
    }
    /* Existing receives, the first per (port, class). */
    for (size_t i = 0; i < n; i++) {
        bb_node *r = f->nodes.v[i];
        const char *port = bbc_meta(r, BB_META_PORT), *cls = bbc_meta(r, BB_META_HOME_CLASS);
        if (!port || !cls || !bbc_node_is(r, BB_DOMAIN_WIRE, BB_OP_WIRE_RECV))
            continue;
        const char *k = bb_arena_sprintf(side, "%s\x1f%s", port, cls);
        if (!k)
            return BB_ENOMEM;
        if (bbc_map_get(&y->recvs, k, NULL))
            continue;
        bb_node **slot = BB_VEC_PUSH(side, &y->made);
        if (!slot)
            return BB_ENOMEM;
        *slot = r;
        if (bbc_map_put(&y->recvs, k, y->made.n - 1) != BB_OK)
            return BB_ENOMEM;
    }
    return BB_OK;
}

/* base, else base_1, base_2, ... not in taken; recorded as taken. */
static const char *fresh_in(bb_arena *a, bbc_map *taken, const char *base)
{
    const char *s = bb_arena_strdup(a, base);
    for (unsigned k = 1; s && bbc_map_get(taken, s, NULL); k++)
        s = bb_arena_sprintf(a, "%s_%u", base, k);
    return s && bbc_map_put(taken, s, 0) == BB_OK ? s : NULL;
}

/* The Send (index) with this port whose dest class is cls, or SIZE_MAX. */
static size_t port_sender(const synth *y, const char *port, const char *cls)
{
    size_t i = SIZE_MAX;
    bbc_map_get(&y->sends, port, &i);
    for (; i != SIZE_MAX; i = y->next_send[i]) {
        const bb_node *s = y->f->nodes.v[i];
        if (!cls || !bbc_meta(s, BB_META_DEST_CLASS) || bbc_meta_is(s, BB_META_DEST_CLASS, cls))
            return i;
    }
    return SIZE_MAX;
}

static int materialize(synth *y, const bbc_net_in *ni)
{
    bbc_state *st = y->st;
    bb_function *f = y->f;
    bb_arena *a = y->a;
    const char *cls = ni->cls ? ni->cls : BB_SELF_CLASS;
    const char *rkey = bb_arena_sprintf(st->scratch, "%s\x1f%s", ni->port, cls);
    const char *mkey = bb_arena_sprintf(st->scratch, "%s%s", BB_META_NET_IN_PREFIX, ni->port);
    if (!rkey || !mkey || bbc_map_put(&y->drop, ni->value, 0) != BB_OK ||
        bbc_map_put(&y->drop, mkey, 0) != BB_OK)
        return bbc_oom(st);
    size_t have;
    if (bbc_map_get(&y->recvs, rkey, &have)) {
        /* A second lookup of the port in this class shares the Recv. */
        const bb_node *r = y->made.v[have];
        if (r->outputs.n > BBC_RECV_PAYLOAD &&
            !bbc_str_eq(r->outputs.v[BBC_RECV_PAYLOAD], ni->value))
            bbc_fnedit_rewire(y->e, ni->value, r->outputs.v[BBC_RECV_PAYLOAD], NULL);
        return BB_OK;
    }
    char base[1100];
    snprintf(base, sizeof base, "%s/Recv_%s", cls, ni->port);
    bb_node *r = bb_node_new(a, BB_DOMAIN_WIRE, BB_OP_WIRE_RECV);
    const char *name = fresh_in(a, &y->names, base);
    char tb[1100];
    snprintf(tb, sizeof tb, "%s.trigger", ni->value);
    const char *trig = fresh_in(a, &y->values, tb);
    if (!r || !name || !trig || bb_str_list_push(a, &r->outputs, trig) != BB_OK ||
        bb_str_list_push(a, &r->outputs, ni->value) != BB_OK)
        return bbc_oom(st);
    r->name = name;
    if (bbc_set_meta(a, r, BB_META_HOME_CLASS, cls) != BB_OK ||
        bbc_set_meta(a, r, BB_META_PORT, ni->port) != BB_OK ||
        bbc_set_meta(a, r, BB_META_WIRE_CORRELATION, BB_WIRE_CORRELATION_NONE) != BB_OK ||
        bbc_set_meta(a, r, BB_META_SYNTHESIZED, "true") != BB_OK ||
        bbc_fnedit_set_type(y->e, trig, &BB_TYPE_TRIGGER) != BB_OK)
        return bbc_oom(st);
    /* The lookup's own type when it is a leaf, else the send's when it fits;
     * a contradiction is left to the storage check. */
    size_t s = port_sender(y, ni->port, cls);
    const bb_type_node *pt = bbc_fnedit_type(y->e, ni->value);
    if ((!pt || !bb_type_is_leaf(pt)) && s != SIZE_MAX && f->nodes.v[s]->inputs.n > 0) {
        const bb_type_node *st_ = bbc_fnedit_type(y->e, f->nodes.v[s]->inputs.v[BBC_SEND_DATA]);
        if (st_ && (!pt || bb_type_is_a(st_, pt)))
            pt = st_;
    }
    if (pt && bb_type_is_leaf(pt)) {
        bb_attr *at = bb_node_add_attr(a, r, BB_ATTR_NAME_PAYLOAD_TYPE, BB_ATTR_TYPE_PROTO);
        if (!at || !(at->tp = bb_type_to_proto(a, pt)))
            return bbc_oom(st);
    }
    size_t at = f->nodes.n;
    bbc_map_get(&y->first_use, ni->value, &at);
    bb_node **slot = BB_VEC_PUSH(st->scratch, &y->made);
    if (!slot || bbc_map_put(&y->recvs, rkey, y->made.n - 1) != BB_OK ||
        bbc_fnedit_insert(y->e, at, r) != BB_OK)
        return bbc_oom(st);
    *slot = r;
    return BB_OK;
}

/* Drop the materialized formals and their net_in metadata, in one pass. */
static void drop_formals(synth *y)
{
    bb_function *f = y->f;
    size_t k = 0;
    for (size_t i = 0; i < f->inputs.n; i++)
        if (!bbc_map_get(&y->drop, f->inputs.v[i], NULL))
            f->inputs.v[k++] = f->inputs.v[i];
    f->inputs.n = k;
    k = 0;
    for (size_t i = 0; i < f->metadata.n; i++)
        if (!bbc_map_get(&y->drop, f->metadata.v[i].key, NULL))
            f->metadata.v[k++] = f->metadata.v[i];
    f->metadata.n = k;
}

/* dest_site / src_site on every matched pair. */
static int link_pairs(bbc_state *st)
{
    bb_function *f = st->root;
    bb_arena *a = st->model->arena;
    const bbc_wire_ix *x = bbc_wire_ix_new(st->scratch, f);
    if (!x)
        return bbc_oom(st);
    for (size_t i = 0; i < f->nodes.n; i++) {
        bb_node *s = f->nodes.v[i];
        if (!bbc_is_wire_send(s))
            continue;
        const size_t *rx;
        size_t k;
        if (bbc_wire_receivers(x, i, st->scratch, &rx, &k) != BB_OK)
            return bbc_oom(st);
        if (k == 0)
            continue;
        if (k > 1 && !bbc_meta(s, BB_META_DEST_SITE)) {
            char list[256] = "";
            size_t len = 0;
            for (size_t r = 0; r < k && len < sizeof list; r++)
                len += (size_t)snprintf(list + len, sizeof list - len, "%s'%s'", r ? ", " : "",
                                        f->nodes.v[rx[r]]->name);
            return bbc_fail(st, BBC_E_INTERNAL,
                            "wire %s '%s' matches %zu receives (%s); one port feeds one receive "
                            "per destination class",
                            s->op_type, s->name, k, list);
        }
        bb_node *r = f->nodes.v[rx[0]];
        if (!bbc_meta(s, BB_META_DEST_SITE) && bbc_set_meta(a, s, BB_META_DEST_SITE, r->name))
            return bbc_oom(st);
        if (!bbc_meta(r, BB_META_SRC_SITE) && bbc_set_meta(a, r, BB_META_SRC_SITE, s->name))
            return bbc_oom(st);
    }
    return BB_OK;
}

int bbc_pass_synthesize_wire_recvs(bbc_state *st)
{
    if (st->parts.n > 0)
        return BB_OK;
    if (st->net_ins.n > 0) {
        synth y = {0};
        if (synth_init(&y, st) != BB_OK)
            return bbc_oom(st);
        for (size_t i = 0; i < st->net_ins.n; i++) {
            int rc = materialize(&y, &st->net_ins.v[i]);
            if (rc != BB_OK)
                return rc;
        }
        drop_formals(&y);
        if (bbc_fnedit_commit(y.e) != BB_OK)
            return bbc_oom(st);
    }
    st->net_ins.n = 0;
    return link_pairs(st);
}
