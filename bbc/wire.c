/*
 * wire.c — send/receive pairing inside one function (see wire.h). Linear
 * scans: a function has few wire ops.
 */
#include "bbc/wire.h"

#include <stdint.h>

#include "bb/meta.h"
#include "bbc/util.h"

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

static size_t producer_of(const bb_function *f, const char *v, size_t *port)
{
    for (size_t i = 0; i < f->nodes.n; i++) {
        const bb_node *n = f->nodes.v[i];
        for (size_t j = 0; j < n->outputs.n; j++)
            if (bbc_str_eq(n->outputs.v[j], v)) {
                if (port)
                    *port = j;
                return i;
            }
    }
    return SIZE_MAX;
}

size_t bbc_trace_producer(const bb_function *f, const char *v, size_t *port)
{
    for (size_t hops = 0; v && *v && hops <= f->nodes.n; hops++) {
        size_t p = 0;
        size_t i = producer_of(f, v, &p);
        if (i == SIZE_MAX)
            return SIZE_MAX;
        const bb_node *n = f->nodes.v[i];
        if (forwards_input0(n) && p == 0 && n->inputs.n > 0) {
            v = n->inputs.v[0];
            continue;
        }
        if (port)
            *port = p;
        return i;
    }
    return SIZE_MAX;
}

static const char *node_class(const bb_node *n)
{
    return bbc_meta(n, BB_META_HOME_CLASS);
}

/* Does receive r accept what send s sends (port + class)? */
static bool port_match(const bb_node *s, const bb_node *r)
{
    const char *site = bbc_meta(s, BBC_META_DEST_SITE);
    if (site)
        return bbc_str_eq(site, r->name);
    const char *src = bbc_meta(r, BBC_META_SRC_SITE);
    if (src)
        return bbc_str_eq(src, s->name);
    const char *ps = bbc_meta(s, BBC_META_PORT), *pr = bbc_meta(r, BBC_META_PORT);
    if (!ps || !pr || !bbc_str_eq(ps, pr))
        return false;
    const char *dest = bbc_meta(s, BB_META_DEST_CLASS), *rc = node_class(r);
    return !dest || !rc || bbc_str_eq(dest, rc);
}

static bool is_op(const bb_node *n, const char *op)
{
    return bbc_node_is(n, BB_DOMAIN_WIRE, op);
}

/* The SendReqBatched a RecvReq (index q) is paired with, or SIZE_MAX. */
static size_t request_sender(const bb_function *f, size_t q)
{
    for (size_t i = 0; i < f->nodes.n; i++)
        if (is_op(f->nodes.v[i], BB_OP_WIRE_SEND_REQ_BATCHED) &&
            port_match(f->nodes.v[i], f->nodes.v[q]))
            return i;
    return SIZE_MAX;
}

/* The SendReqBatched whose req_id a RecvRespBatched / SendResp reads. */
static size_t traced(const bb_function *f, const bb_node *n, size_t pos, const char *op)
{
    if (pos >= n->inputs.n)
        return SIZE_MAX;
    size_t i = bbc_trace_producer(f, n->inputs.v[pos], NULL);
    return (i != SIZE_MAX && is_op(f->nodes.v[i], op)) ? i : SIZE_MAX;
}

size_t bbc_wire_receivers(const bb_function *f, size_t s, size_t *out, size_t cap)
{
    const bb_node *sn = f->nodes.v[s];
    size_t count = 0;
    if (is_op(sn, BB_OP_WIRE_SEND) || is_op(sn, BB_OP_WIRE_SEND_REQ_BATCHED)) {
        const char *rop = is_op(sn, BB_OP_WIRE_SEND) ? BB_OP_WIRE_RECV : BB_OP_WIRE_RECV_REQ;
        for (size_t i = 0; i < f->nodes.n; i++) {
            if (!is_op(f->nodes.v[i], rop) || !port_match(sn, f->nodes.v[i]))
                continue;
            if (count < cap)
                out[count] = i;
            count++;
        }
    } else if (is_op(sn, BB_OP_WIRE_SEND_RESP)) {
        size_t q = traced(f, sn, 2, BB_OP_WIRE_RECV_REQ);
        size_t req = q == SIZE_MAX ? SIZE_MAX : request_sender(f, q);
        if (req == SIZE_MAX)
            return 0;
        for (size_t i = 0; i < f->nodes.n; i++) {
            if (!is_op(f->nodes.v[i], BB_OP_WIRE_RECV_RESP_BATCHED) ||
                traced(f, f->nodes.v[i], 0, BB_OP_WIRE_SEND_REQ_BATCHED) != req)
                continue;
            if (count < cap)
                out[count] = i;
            count++;
        }
    }
    return count;
}

size_t bbc_wire_sender(const bb_function *f, size_t r)
{
    const bb_node *rn = f->nodes.v[r];
    if (is_op(rn, BB_OP_WIRE_RECV) || is_op(rn, BB_OP_WIRE_RECV_REQ)) {
        const char *sop = is_op(rn, BB_OP_WIRE_RECV) ? BB_OP_WIRE_SEND : BB_OP_WIRE_SEND_REQ_BATCHED;
        for (size_t i = 0; i < f->nodes.n; i++)
            if (is_op(f->nodes.v[i], sop) && port_match(f->nodes.v[i], rn))
                return i;
        return SIZE_MAX;
    }
    if (is_op(rn, BB_OP_WIRE_RECV_RESP_BATCHED)) {
        size_t req = traced(f, rn, 0, BB_OP_WIRE_SEND_REQ_BATCHED);
        if (req == SIZE_MAX)
            return SIZE_MAX;
        for (size_t i = 0; i < f->nodes.n; i++) {
            if (!is_op(f->nodes.v[i], BB_OP_WIRE_SEND_RESP))
                continue;
            size_t q = traced(f, f->nodes.v[i], 2, BB_OP_WIRE_RECV_REQ);
            if (q != SIZE_MAX && request_sender(f, q) == req)
                return i;
        }
    }
    return SIZE_MAX;
}
