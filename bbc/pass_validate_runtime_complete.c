/*
 * pass_validate_runtime_complete.c — the final per-partition pre-flight
 * (COMPILER.md "Validation pairing"): every peer-routed send has its TX
 * gate chain and every peer-routed receive its RX chain (checked through
 * each registered gate contract, gates.h; a gap is Internal naming the
 * partition, as in the spec), and every node carrying deadline_ns is paired
 * with a DeadlineCheck (RuntimeIncomplete). Reads only.
 */
#include "bb/meta.h"
#include "bbc/compiler_internal.h"
#include "bbc/fnedit.h"
#include "bbc/gates.h"
#include "bbc/util.h"

/* DeadlineCheck nodes by the carrier they guard (deadline_source), kept
 * only when well formed: one input, one output that something reads. */
static int index_checks(bbc_state *st, const bb_function *f, const bbc_fnedit *flow, bbc_map *out)
{
    if (bbc_map_init(out, st->scratch, 16) != BB_OK)
        return BB_ENOMEM;
    for (size_t i = 0; i < f->nodes.n; i++) {
        const bb_node *c = f->nodes.v[i];
        if (!bbc_node_is(c, BB_DOMAIN_SYSCALL, BB_OP_DEADLINE_CHECK))
            continue;
        const char *src = bbc_meta(c, BB_META_DEADLINE_SOURCE);
        if (!src ||
            c->inputs.n != 1 || c->outputs.n != 1 ||
            !bbc_fnedit_consumed(flow, c->outputs.v[0], c))
            continue;
        if (bbc_map_put(out, src, i) != BB_OK)
            return BB_ENOMEM;
    }
    return BB_OK;
}

int bbc_pass_validate_runtime_complete(bbc_state *st)
{
    for (size_t k = 0; k < st->parts.n; k++) {
        const bbc_partition *p = st->parts.v[k];
        const bb_function *f = p->fn;
        bbc_gate_index *gx = bbc_gate_index_new(st->scratch, f);
        bbc_map checks;
        if (!gx || index_checks(st, f, bbc_gate_index_flow(gx), &checks) != BB_OK)
            return bbc_oom(st);
        for (size_t i = 0; i < f->nodes.n; i++) {
            const bb_node *n = f->nodes.v[i];
            if (bbc_is_wire(n)) {
                for (size_t g = 0; g < BBC_N_GATE_CONTRACTS; g++) {
                    const char *why = bbc_gate_missing(st->scratch, gx, n, &BBC_GATE_CONTRACTS[g]);
                    if (why)
                        return bbc_fail(st, BBC_E_INTERNAL, "partition `%s`: %s", p->cls, why);
                }
            }
            if (!bbc_node_is(n, BB_DOMAIN_SYSCALL, BB_OP_DEADLINE_CHECK) &&
                bb_node_attr(n, BB_ATTR_NAME_DEADLINE_NS) &&
                !(n->name && bbc_map_get(&checks, n->name, NULL)))
                return bbc_fail(st, BBC_E_RUNTIME_INCOMPLETE,
                                "partition `%s`: %s '%s' carries deadline_ns but no DeadlineCheck "
                                "is paired with it",
                                p->cls, n->op_type, n->name ? n->name : "");
        }
    }
    return BB_OK;
}
