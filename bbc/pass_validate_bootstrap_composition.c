/*
 * pass_validate_bootstrap_composition.c — runs at the top of the pipeline
 * (COMPILER.md "The pass pipeline"): walks the call graph of every
 * bootstrap function ("<module>__bootstrap" / module_phase "bootstrap").
 * A call to a target with no FunctionProto is BootstrapCompositionGap (a
 * node of a non-reserved domain that is neither a model function nor an op
 * a bound or known component type declares); a call chain that comes back
 * to a function on it is BootstrapCompositionCycle, naming the chain.
 * Leaves every slot_id stamp and call domain/op_type intact (the engine's
 * touch set reads them).
 */
#include <stdio.h>
#include <string.h>

#include "bb/artifact.h"
#include "bb/opsets.h"
#include "bbc/compiler_internal.h"
#include "bbc/util.h"

#define MAX_DEPTH 64

static bool declared_op(bbc_state *st, const bb_node *n)
{
    bbc_sig sig;
    if (bbc_node_sig(st, n, &sig))
        return true;
    if (!bb_type_source_count(st->types))
        return bbc_is_role_node(n); /* no types to ask: trust the slot stamps */
    return bb_type_source_find_op(st->types, n->domain, n->op_type) != NULL;
}

static int walk(bbc_state *st, const bb_function *boot, const bb_function *f,
                const bb_function **stack, size_t depth)
{
    for (size_t d = 0; d < depth; d++) {
        if (stack[d] != f)
            continue;
        char chain[400] = "";
        size_t len = 0;
        for (size_t k = d; k < depth && len < sizeof chain; k++)
            len += (size_t)snprintf(chain + len, sizeof chain - len, "%s -> ", stack[k]->name);
        return bbc_fail(st, BBC_E_BOOTSTRAP_COMPOSITION_CYCLE,
                        "bootstrap '%s' reaches a call cycle: %s%s", boot->name, chain, f->name);
    }
    if (depth >= MAX_DEPTH)
        return bbc_fail(st, BBC_E_BOOTSTRAP_COMPOSITION_CYCLE,
                        "bootstrap '%s' nests calls deeper than %d", boot->name, MAX_DEPTH);
    stack[depth] = f;
    for (size_t i = 0; i < f->nodes.n; i++) {
        const bb_node *n = f->nodes.v[i];
        if (bb_opset_is_reserved(n->domain))
            continue;
        const bb_function *callee = bbc_callee(st->model, n);
        if (!callee) {
            if (declared_op(st, n))
                continue;
            return bbc_fail(st, BBC_E_BOOTSTRAP_COMPOSITION_GAP,
                            "bootstrap '%s': '%s' calls target %s::%s, which has no FunctionProto",
                            boot->name, f->name, n->domain ? n->domain : "", n->op_type);
        }
        int rc = walk(st, boot, callee, stack, depth + 1);
        if (rc != BB_OK)
            return rc;
    }
    return BB_OK;
}

int bbc_pass_validate_bootstrap_composition(bbc_state *st)
{
    const bb_function *stack[MAX_DEPTH + 1];
    for (size_t i = 0; i < st->model->functions.n; i++) {
        const bb_function *f = st->model->functions.v[i];
        if (!bb_artifact_is_bootstrap(f))
            continue;
        int rc = walk(st, f, f, stack, 0);
        if (rc != BB_OK)
            return rc;
    }
    return BB_OK;
}
