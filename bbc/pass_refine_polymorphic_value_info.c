/*
 * pass_refine_polymorphic_value_info.c — the pre-pipeline pass (COMPILER.md
 * "Pass groups"): the recorder stamps the polymorphic BB_TYPE_TENSOR
 * placeholder on every role-op port; each bound type's declared per-port
 * storage type (bb_port_decl.type, e.g. tensor_f32) narrows it before the
 * type solver runs. Runs over every function of the model (class modules
 * are not inlined yet). Only widening placeholders are narrowed: a value
 * whose type is not an ancestor of the port's is left for the type solver
 * to report.
 */
#include "bb/meta.h"
#include "bbc/compiler_internal.h"
#include "bbc/util.h"

static int narrow(bbc_state *st, bb_function *f, const char *v, const bb_port_decl *p)
{
    if (!v || !*v || !p || !p->type || !bb_type_is_leaf(p->type))
        return BB_OK;
    const bb_type_node *t = bbc_value_type(f, v);
    if (!t)
        t = &BB_TYPE_ANY;
    if (t == p->type || !bb_type_is_a(p->type, t))
        return BB_OK;
    return bbc_set_value_type(st->model->arena, f, v, p->type) == BB_OK ? BB_OK : bbc_oom(st);
}

int bbc_pass_refine_polymorphic_value_info(bbc_state *st)
{
    for (size_t k = 0; k < st->model->functions.n; k++) {
        bb_function *f = st->model->functions.v[k];
        for (size_t i = 0; i < f->nodes.n; i++) {
            const bb_node *n = f->nodes.v[i];
            if (!bbc_is_role_node(n))
                continue;
            bbc_sig sig;
            if (!bbc_node_sig(st, n, &sig) || !sig.decl)
                continue; /* no bound declaration: nothing to narrow with */
            int rc;
            for (size_t j = 0; j < n->inputs.n; j++)
                if ((rc = narrow(st, f, n->inputs.v[j], bbc_sig_in(&sig, j))) != BB_OK)
                    return rc;
            for (size_t j = 0; j < n->outputs.n; j++)
                if ((rc = narrow(st, f, n->outputs.v[j], bbc_sig_out(&sig, j))) != BB_OK)
                    return rc;
        }
    }
    return BB_OK;
}
