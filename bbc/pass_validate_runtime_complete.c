/*
 * pass_validate_runtime_complete.c — the final per-partition pre-flight
 * (COMPILER.md "Validation pairing"): every peer-routed send has its TX
 * gate chain and every peer-routed receive its RX chain (checked through
 * each registered gate contract, gates.h; a gap is Internal naming the
 * partition, as in the spec), and every node carrying deadline_ns is paired
 * with a DeadlineCheck (RuntimeIncomplete). Reads only.
 */
#include "bb/meta.h"
#include "bbc/compiler.h"
#include "bbc/gates.h"
#include "bbc/util.h"

static bool has_check(const bb_function *f, const bb_node *n)
{
    for (size_t i = 0; i < f->nodes.n; i++) {
        const bb_node *c = f->nodes.v[i];
        if (bbc_node_is(c, BB_DOMAIN_SYSCALL, BB_OP_DEADLINE_CHECK) &&
            bbc_meta_is(c, BBC_META_DEADLINE_SOURCE, n->name) && c->inputs.n == 1 &&
            c->outputs.n == 1 && bbc_value_consumed(f, c->outputs.v[0], c))
            return true;
    }
    return false;
}

int bbc_pass_validate_runtime_complete(bbc_state *st)
{
    for (size_t k = 0; k < st->parts.n; k++) {
        const bbc_partition *p = st->parts.v[k];
        const bb_function *f = p->fn;
        for (size_t i = 0; i < f->nodes.n; i++) {
            const bb_node *n = f->nodes.v[i];
            if (bbc_is_wire(n)) {
                for (size_t g = 0; g < BBC_N_GATE_CONTRACTS; g++) {
                    const char *why = bbc_gate_missing(st->arena, f, n, &BBC_GATE_CONTRACTS[g]);
                    if (why)
                        return bbc_fail(st, BBC_E_INTERNAL, "partition `%s`: %s", p->cls, why);
                }
            }
            if (!bbc_node_is(n, BB_DOMAIN_SYSCALL, BB_OP_DEADLINE_CHECK) &&
                bb_node_attr(n, BB_ATTR_NAME_DEADLINE_NS) && !has_check(f, n))
                return bbc_fail(st, BBC_E_RUNTIME_INCOMPLETE,
                                "partition `%s`: %s '%s' carries deadline_ns but no DeadlineCheck "
                                "is paired with it",
                                p->cls, n->op_type, n->name ? n->name : "");
        }
    }
    return BB_OK;
}
