/*
 * pass_derive_wire_deadlines.c — stamps every wire send's deadline_ns
 * attribute with chain_depth x per_hop_budget_ns (COMPILER.md "Pass
 * groups"). chain_depth is the send's optional "ai.bytesandbrains.chain_depth"
 * metadata (decimal, 1..1000), 1 when absent. A send that already carries
 * deadline_ns (authored, or stamped by an earlier run) keeps it.
 */
#include <stdint.h>
#include <string.h>

#include "bb/meta.h"
#include "bbc/compiler_internal.h"
#include "bbc/util.h"

#define MAX_CHAIN_DEPTH 1000

static int stamp_function(bbc_state *st, bb_model *m, bb_function *f)
{
    uint64_t budget = st->opts->per_hop_budget_ns;
    for (size_t i = 0; i < f->nodes.n; i++) {
        bb_node *n = f->nodes.v[i];
        if (!bbc_is_wire_send(n) || bb_node_attr(n, BB_ATTR_NAME_DEADLINE_NS))
            continue;
        uint64_t depth = 1;
        const char *d = bbc_meta(n, BB_META_CHAIN_DEPTH);
        if (d) {
            depth = 0;
            for (const char *p = d; *p && depth <= MAX_CHAIN_DEPTH; p++)
                depth = (*p >= '0' && *p <= '9') ? depth * 10 + (uint64_t)(*p - '0') : UINT64_MAX;
            if (depth == 0 || depth > MAX_CHAIN_DEPTH)
                return bbc_fail(st, BBC_E_INTERNAL,
                                "wire %s '%s': chain_depth '%s' is not a number in 1..%d",
                                n->op_type, n->name ? n->name : "", d, MAX_CHAIN_DEPTH);
        }
        if (budget > (uint64_t)INT64_MAX / depth)
            return bbc_fail(st, BBC_E_INTERNAL,
                            "wire %s '%s': deadline %llu x %llu ns overflows", n->op_type,
                            n->name ? n->name : "", (unsigned long long)depth,
                            (unsigned long long)budget);
        if (!bb_node_set_attr_int(m->arena, n, BB_ATTR_NAME_DEADLINE_NS, (int64_t)(depth * budget)))
            return bbc_oom(st);
    }
    return BB_OK;
}

int bbc_pass_derive_wire_deadlines(bbc_state *st)
{
    if (st->parts.n == 0)
        return stamp_function(st, st->model, st->root);
    for (size_t k = 0; k < st->parts.n; k++) {
        int rc = stamp_function(st, st->parts.v[k]->model, st->parts.v[k]->fn);
        if (rc != BB_OK)
            return rc;
    }
    return BB_OK;
}
