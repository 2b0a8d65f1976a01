/*
 * wire.c — send/receive pairing inside one function (see wire.h), through
 * an index built once per function: producers by value, nodes by name, and
 * the wire ops bucketed by port, by dest_site and by src_site. A query
 * gathers the candidates from those buckets and checks each one against the
 * live metadata with the same rule (port_match) a full scan would apply.
 */
#include "bbc/wire.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bb/meta.h"
#include "bbc/util.h"

/* Output positions at or past this are not indexed (no wire op has them). */
#define PORT_STRIDE 4096u
#define NONE SIZE_MAX

struct bbc_wire_ix {
    const bb_function *f;
    bbc_map prod;       /* value -> node * PORT_STRIDE + output position */
    bbc_map names;      /* node name -> first node index */
    bbc_map recv_port;  /* port -> first receive (Recv / RecvReq) with it */
    bbc_map send_port;  /* port -> first send (Send / SendReqBatched) with it */
    bbc_map recv_src;   /* src_site (as indexed) -> first receive carrying it */
    bbc_map send_dest;  /* dest_site (as indexed) -> first send carrying it */
    size_t *next_port;  /* per node: next wire op in its port bucket */
    size_t *next_site;  /* per node: next wire op in its site bucket */
    size_t *resp_head;  /* per SendReqBatched: first RecvRespBatched tracing to it */
    size_t *next_resp;  /* per RecvRespBatched: the next one tracing to the same request */
    size_t *responders; /* the SendResp nodes, in node order */
    size_t n_responders;
};

static bool is_op(const bb_node *n, const char *op)
{
    return bbc_node_is(n, BB_DOMAIN_WIRE, op);
}

static bool forwards_input0(const bb_node *n)
{
    if (bbc_str_eq(n->domain, BB_DOMAIN_SYSCALL))
        return bbc_str_eq(n->op_type, "PassThrough") || bbc_str_eq(n->op_type, "Gate") ||
               bbc_str_eq(n->op_type, BB_OP_DEDUP_GATE_RX) ||
               bbc_str_eq(n->op_type, BB_OP_PEER_HEALTH_GATE_RX) ||
               bbc_str_eq(n->op_type, BB_OP_BACKOFF_GATE_RX) ||
               bbc_str_eq(n->op_type, BB_OP_DEADLINE_CHECK);
    return bb_domain_is_onnx(n->domain) && bbc_str_eq(n->op_type, "Identity");
}

size_t bbc_wire_trace(const bbc_wire_ix *x, const char *v, size_t *port)
{
    const bb_function *f = x->f;
    for (size_t hops = 0; v && *v && hops <= f->nodes.n; hops++) {
        size_t code;
        if (!bbc_map_get(&x->prod, v, &code))
            return NONE;
        size_t i = code / PORT_STRIDE, p = code % PORT_STRIDE;
        const bb_node *n = f->nodes.v[i];
        if (forwards_input0(n) && p == 0 && n->inputs.n > 0) {
            v = n->inputs.v[0];
            continue;
        }
        if (port)
            *port = p;
        return i;
    }
    return NONE;
}

/* Does receive r accept what send s sends (port + class)? Live metadata. */
static bool port_match(const bb_node *s, const bb_node *r)
{
    const char *site = bbc_meta(s, BB_META_DEST_SITE);
    if (site)
        return bbc_str_eq(site, r->name);
    const char *src = bbc_meta(r, BB_META_SRC_SITE);
    if (src)
        return bbc_str_eq(src, s->name);
    const char *ps = bbc_meta(s, BB_META_PORT), *pr = bbc_meta(r, BB_META_PORT);
    if (!ps || !pr || !bbc_str_eq(ps, pr))
        return false;
    const char *dest = bbc_meta(s, BB_META_DEST_CLASS), *rc = bbc_meta(r, BB_META_HOME_CLASS);
    return !dest || !rc || bbc_str_eq(dest, rc);
}

/* Prepend node i to the bucket of key in map (heads) through next[]. */
static int bucket_add(bbc_map *map, size_t *next, const char *key, size_t i)
{
    size_t head = NONE;
    bbc_map_get(map, key, &head);
    next[i] = head;
    return bbc_map_put(map, key, i);
}

static size_t bucket_head(const bbc_map *map, const char *key)
{
    size_t head = NONE;
    if (key)
        bbc_map_get(map, key, &head);
    return head;
}

static bool is_pair_send(const bb_node *n)
{
    return is_op(n, BB_OP_WIRE_SEND) || is_op(n, BB_OP_WIRE_SEND_REQ_BATCHED);
}

static bool is_pair_recv(const bb_node *n)
{
    return is_op(n, BB_OP_WIRE_RECV) || is_op(n, BB_OP_WIRE_RECV_REQ);
}

/* The SendReqBatched whose req_id input pos of n traces to, or NONE. */
static size_t traced(const bbc_wire_ix *x, const bb_node *n, size_t pos, const char *op)
{
    if (pos >= n->inputs.n)
        return NONE;
    size_t i = bbc_wire_trace(x, n->inputs.v[pos], NULL);
    return (i != NONE && is_op(x->f->nodes.v[i], op)) ? i : NONE;
}

bbc_wire_ix *bbc_wire_ix_new(bb_arena *a, const bb_function *f)
{
    size_t n = f->nodes.n;
    bbc_wire_ix *x = bb_arena_alloc(a, sizeof *x);
    if (!x)
        return NULL;
    x->f = f;
    if (bbc_map_init(&x->prod, a, n) != BB_OK || bbc_map_init(&x->names, a, n) != BB_OK ||
        bbc_map_init(&x->recv_port, a, 16) != BB_OK || bbc_map_init(&x->send_port, a, 16) != BB_OK ||
        bbc_map_init(&x->recv_src, a, 16) != BB_OK || bbc_map_init(&x->send_dest, a, 16) != BB_OK ||
        !(x->next_port = bb_arena_calloc(a, n + 1, sizeof *x->next_port)) ||
        !(x->next_site = bb_arena_calloc(a, n + 1, sizeof *x->next_site)) ||
        !(x->resp_head = bb_arena_calloc(a, n + 1, sizeof *x->resp_head)) ||
        !(x->next_resp = bb_arena_calloc(a, n + 1, sizeof *x->next_resp)) ||
        !(x->responders = bb_arena_calloc(a, n + 1, sizeof *x->responders)))
        return NULL;
    /* Backwards, so every bucket lists its nodes in node order. */
    for (size_t k = n; k-- > 0;) {
        const bb_node *nd = f->nodes.v[k];
        x->resp_head[k] = x->next_resp[k] = NONE;
        for (size_t j = 0; j < nd->outputs.n && j < PORT_STRIDE; j++) {
            const char *v = nd->outputs.v[j];
            if (v && *v && bbc_map_put(&x->prod, v, k * PORT_STRIDE + j) != BB_OK)
                return NULL;
        }
        if (nd->name && *nd->name && bbc_map_put(&x->names, nd->name, k) != BB_OK)
            return NULL;
        if (!bbc_str_eq(nd->domain, BB_DOMAIN_WIRE))
            continue;
        const char *port = bbc_meta(nd, BB_META_PORT);
        int rc = BB_OK;
        if (is_pair_recv(nd)) {
            if (port)
                rc = bucket_add(&x->recv_port, x->next_port, port, k);
            const char *src = bbc_meta(nd, BB_META_SRC_SITE);
            if (rc == BB_OK && src)
                rc = bucket_add(&x->recv_src, x->next_site, src, k);
        } else if (is_pair_send(nd)) {
            if (port)
                rc = bucket_add(&x->send_port, x->next_port, port, k);
            const char *dest = bbc_meta(nd, BB_META_DEST_SITE);
            if (rc == BB_OK && dest)
                rc = bucket_add(&x->send_dest, x->next_site, dest, k);
        }
        if (rc != BB_OK)
            return NULL;
    }
    /* Producers are indexed: trace the request ids once. */
    for (size_t k = n; k-- > 0;) {
        const bb_node *nd = f->nodes.v[k];
        if (!is_op(nd, BB_OP_WIRE_RECV_RESP_BATCHED))
            continue;
        size_t req = traced(x, nd, 0, BB_OP_WIRE_SEND_REQ_BATCHED);
        if (req != NONE) {
            x->next_resp[k] = x->resp_head[req];
            x->resp_head[req] = k;
        }
    }
    for (size_t k = 0; k < n; k++)
        if (is_op(f->nodes.v[k], BB_OP_WIRE_SEND_RESP))
            x->responders[x->n_responders++] = k;
    return x;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* Candidates gathered from the buckets, checked, deduplicated; in the
 * caller's arena, so the answer needs no copy. */
typedef BB_VEC(size_t) hits;

static int hit(bb_arena *a, hits *h, size_t i)
{
    for (size_t k = 0; k < h->n; k++)
        if (h->v[k] == i)
            return BB_OK;
    size_t *slot = BB_VEC_PUSH(a, h);
    if (!slot)
        return BB_ENOMEM;
    *slot = i;
    return BB_OK;
}

int bbc_wire_receivers(const bbc_wire_ix *x, size_t s, bb_arena *a, const size_t **out, size_t *n)
{
    const bb_function *f = x->f;
    const bb_node *sn = f->nodes.v[s];
    hits h = {0};
    int rc = BB_OK;
    *out = NULL;
    *n = 0;
    if (is_pair_send(sn)) {
        const char *rop = is_op(sn, BB_OP_WIRE_SEND) ? BB_OP_WIRE_RECV : BB_OP_WIRE_RECV_REQ;
        const char *site = bbc_meta(sn, BB_META_DEST_SITE);
        size_t cands[3] = {site ? bucket_head(&x->names, site) : NONE,
                           site ? NONE : bucket_head(&x->recv_port, bbc_meta(sn, BB_META_PORT)),
                           site ? NONE : bucket_head(&x->recv_src, sn->name)};
        for (int b = 0; b < 3 && rc == BB_OK; b++) {
            /* the site bucket holds one node; the others are chained */
            const size_t *next = b == 1 ? x->next_port : x->next_site;
            for (size_t i = cands[b]; i != NONE && rc == BB_OK; i = b == 0 ? NONE : next[i])
                if (is_op(f->nodes.v[i], rop) && port_match(sn, f->nodes.v[i]))
                    rc = hit(a, &h, i);
        }
    } else if (is_op(sn, BB_OP_WIRE_SEND_RESP)) {
        size_t q = traced(x, sn, 2, BB_OP_WIRE_RECV_REQ);
        size_t req = q == NONE ? NONE : bbc_wire_sender(x, q);
        size_t first = req == NONE ? NONE : x->resp_head[req];
        for (size_t i = first; i != NONE && rc == BB_OK; i = x->next_resp[i])
            rc = hit(a, &h, i);
    }
    if (rc != BB_OK)
        return rc; /* never a short answer */
    if (h.n > 1)
        qsort(h.v, h.n, sizeof *h.v, cmp_size);
    *out = h.v;
    *n = h.n;
    return BB_OK;
}

size_t bbc_wire_sender(const bbc_wire_ix *x, size_t r)
{
    const bb_function *f = x->f;
    const bb_node *rn = f->nodes.v[r];
    if (is_pair_recv(rn)) {
        const char *sop = is_op(rn, BB_OP_WIRE_RECV) ? BB_OP_WIRE_SEND : BB_OP_WIRE_SEND_REQ_BATCHED;
        const char *src = bbc_meta(rn, BB_META_SRC_SITE);
        size_t cands[3] = {bucket_head(&x->send_dest, rn->name),
                           src ? bucket_head(&x->names, src) : NONE,
                           bucket_head(&x->send_port, bbc_meta(rn, BB_META_PORT))};
        size_t best = NONE;
        for (int b = 0; b < 3; b++)
            for (size_t i = cands[b]; i != NONE; i = b == 1 ? NONE : b == 0 ? x->next_site[i] : x->next_port[i])
                if (i < best && is_op(f->nodes.v[i], sop) && port_match(f->nodes.v[i], rn))
                    best = i;
        return best;
    }
    if (is_op(rn, BB_OP_WIRE_RECV_RESP_BATCHED)) {
        size_t req = traced(x, rn, 0, BB_OP_WIRE_SEND_REQ_BATCHED);
        for (size_t k = 0; req != NONE && k < x->n_responders; k++) {
            size_t q = traced(x, f->nodes.v[x->responders[k]], 2, BB_OP_WIRE_RECV_REQ);
            if (q != NONE && bbc_wire_sender(x, q) == req)
                return x->responders[k];
        }
    }
    return NONE;
}

int bbc_wire_ends(const bb_function *f, bbc_map *set)
{
    for (size_t i = 0; i < f->nodes.n; i++) {
        const bb_node *n = f->nodes.v[i];
        const char *v = NULL;
        if (bbc_is_wire_send(n) && n->inputs.n > 0)
            v = n->inputs.v[BBC_SEND_DATA];
        else if (bbc_is_wire_recv(n) && n->outputs.n > BBC_RECV_PAYLOAD)
            v = n->outputs.v[BBC_RECV_PAYLOAD];
        if (bbc_set_add(set, v) != BB_OK)
            return BB_ENOMEM;
    }
    return BB_OK;
}
