/*
 * pass_insert_async_deadlines.c — stamps deadline_ns on every async-
 * suspending wire op (the wire catalog's BB_OPF_ASYNC ops: SendReqBatched,
 * RecvRespBatched) that lacks one, and pairs every node carrying deadline_ns
 * with a syscall DeadlineCheck (COMPILER.md "insert_async_deadlines").
 *
 * A RecvRespBatched inherits the deadline of the SendReqBatched whose req_id
 * it reads (the round's cohort deadline); others get per_hop_budget_ns.
 *
 * The DeadlineCheck(value) -> value guards the carrier's input[0]: it sits
 * at the head of the carrier's input chain — before the TX gate chain of a
 * send, so the chain stays PeerHealthGateTx -> BackoffGateTx -> send — and
 * fails the execution when the value arrives after deadline_ns (stale data
 * is not sent). A carrier without inputs is guarded on its output[0]
 * instead. Pairing: the check carries deadline_source = carrier, the carrier
 * deadline_check = the check's name (the idempotence stamp).
 */
#include <stdint.h>
#include <string.h>

#include "bb/meta.h"
#include "bb/opsets.h"
#include "bbc/compiler_internal.h"
#include "bbc/fnedit.h"
#include "bbc/util.h"
#include "bbc/wire.h"

static bool async_wire(const bb_node *n)
{
    return bbc_str_eq(n->domain, BB_DOMAIN_WIRE) &&
           (bb_op_flags(n->domain, n->op_type) & BB_OPF_ASYNC);
}

/* The node (index) whose input[0] the check guards: follow the TX gates of
 * carrier i. */
static size_t chain_head(const bb_function *f, const bbc_fnedit *e, size_t i)
{
    const bb_node *n = f->nodes.v[i];
    size_t cur = i;
    for (size_t hops = 0; hops < 8 && f->nodes.v[cur]->inputs.n > 0; hops++) {
        size_t pi = bbc_fnedit_producer(e, f->nodes.v[cur]->inputs.v[0]);
        const bb_node *p = pi == SIZE_MAX ? NULL : f->nodes.v[pi];
        if (!p || !bb_op_is_gate(p->domain, p->op_type) ||
            !(bbc_meta_is(p, BB_META_PEER_HEALTH_TX_SOURCE, n->name) ||
              bbc_meta_is(p, BB_META_BACKOFF_TX_SOURCE, n->name)))
            break;
        cur = pi;
    }
    return cur;
}

static int stamp_deadlines(bbc_state *st, bbc_partition *p)
{
    bb_function *f = p->fn;
    const bbc_wire_ix *x = NULL;
    for (size_t i = 0; i < f->nodes.n; i++) {
        bb_node *n = f->nodes.v[i];
        if (!async_wire(n) || bb_node_attr(n, BB_ATTR_NAME_DEADLINE_NS))
            continue;
        int64_t d = (int64_t)st->opts->per_hop_budget_ns;
        if (bbc_node_is(n, BB_DOMAIN_WIRE, BB_OP_WIRE_RECV_RESP_BATCHED) && n->inputs.n > 0) {
            if (!x && !(x = bbc_wire_ix_new(st->scratch, f)))
                return bbc_oom(st);
            size_t s = bbc_wire_trace(x, n->inputs.v[0], NULL);
            if (s != SIZE_MAX)
                d = bb_node_attr_int(f->nodes.v[s], BB_ATTR_NAME_DEADLINE_NS, d);
        }
        if (!bb_node_set_attr_int(p->model->arena, n, BB_ATTR_NAME_DEADLINE_NS, d))
            return bbc_oom(st);
    }
    return BB_OK;
}

static int pair(bbc_state *st, bbc_partition *p, bbc_fnedit *e, size_t i)
{
    bb_function *f = p->fn;
    bb_node *n = f->nodes.v[i];
    bb_arena *a = p->model->arena;
    int64_t d = bb_node_attr_int(n, BB_ATTR_NAME_DEADLINE_NS, 0);
    bb_node *c = bb_node_new(a, BB_DOMAIN_SYSCALL, BB_OP_DEADLINE_CHECK);
    const char *out = bb_arena_sprintf(a, "%s#deadline_checked", n->name);
    if (!c || !out || !(c->name = bb_arena_sprintf(a, "%s#%s", n->name, BB_OP_DEADLINE_CHECK)) ||
        !bb_node_set_attr_int(a, c, BB_ATTR_NAME_DEADLINE_NS, d) ||
        bbc_set_meta(a, c, BB_META_DEADLINE_SOURCE, n->name) != BB_OK ||
        (bbc_meta(n, BB_META_HOME_CLASS) &&
         bbc_set_meta(a, c, BB_META_HOME_CLASS, bbc_meta(n, BB_META_HOME_CLASS)) != BB_OK) ||
        bb_str_list_push(a, &c->outputs, out) != BB_OK)
        return bbc_oom(st);
    size_t hi = chain_head(f, e, i);
    bb_node *head = f->nodes.v[hi];
    const char *v;
    size_t at;
    if (head->inputs.n > 0 && head->inputs.v[0] && *head->inputs.v[0]) {
        v = head->inputs.v[0];
        head->inputs.v[0] = out;
        at = hi;
    } else if (n->outputs.n > 0 && n->outputs.v[0] && *n->outputs.v[0]) {
        v = n->outputs.v[0];
        bbc_fnedit_rewire(e, v, out, NULL);
        at = i + 1;
    } else {
        return BB_OK; /* nothing to guard: validate_runtime_complete reports it */
    }
    if (bb_str_list_push(a, &c->inputs, v) != BB_OK)
        return bbc_oom(st);
    const bb_type_node *t = bbc_fnedit_type(e, v);
    if ((t && bbc_fnedit_set_type(e, out, t) != BB_OK) || bbc_fnedit_insert(e, at, c) != BB_OK ||
        bbc_set_meta(a, n, BB_META_DEADLINE_CHECK, c->name) != BB_OK)
        return bbc_oom(st);
    return BB_OK;
}

int bbc_pass_insert_async_deadlines(bbc_state *st)
{
    for (size_t k = 0; k < st->parts.n; k++) {
        bbc_partition *p = st->parts.v[k];
        int rc = stamp_deadlines(st, p);
        if (rc != BB_OK)
            return rc;
        /* What pairing touches: the carriers' input[0] / output[0] and the TX
         * gate chains in front of them. */
        bbc_map focus;
        if (bbc_map_init(&focus, st->scratch, 16) != BB_OK)
            return bbc_oom(st);
        for (size_t i = 0; i < p->fn->nodes.n; i++) {
            const bb_node *n = p->fn->nodes.v[i];
            bool gate = bb_op_is_gate(n->domain, n->op_type);
            if (!gate && !bb_node_attr(n, BB_ATTR_NAME_DEADLINE_NS))
                continue;
            if ((n->inputs.n && bbc_set_add(&focus, n->inputs.v[0]) != BB_OK) ||
                (n->outputs.n && bbc_set_add(&focus, n->outputs.v[0]) != BB_OK))
                return bbc_oom(st);
        }
        bbc_fnedit *e = bbc_fnedit_new_focused(st->scratch, p->model->arena, p->fn, &focus);
        if (!e)
            return bbc_oom(st);
        for (size_t i = 0; i < p->fn->nodes.n; i++) {
            bb_node *n = p->fn->nodes.v[i];
            if (bbc_node_is(n, BB_DOMAIN_SYSCALL, BB_OP_DEADLINE_CHECK) ||
                !bb_node_attr(n, BB_ATTR_NAME_DEADLINE_NS) || bbc_meta(n, BB_META_DEADLINE_CHECK))
                continue;
            if ((rc = pair(st, p, e, i)) != BB_OK)
                return rc;
        }
        if (bbc_fnedit_commit(e) != BB_OK)
            return bbc_oom(st);
    }
    return BB_OK;
}
