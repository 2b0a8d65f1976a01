/*
 * pass_expand_ops.c — materializes op-variant defaults (COMPILER.md "Pass
 * groups"): every catalog attribute with a default that a node leaves out
 * is written onto the node (INT / FLOAT / STRING / INTS from the catalog's
 * default text), so the engine never consults defaults at run time. A
 * required attribute that is missing, or a default the catalog spells
 * wrongly, is ExpansionFailed naming the op and the attribute.
 * Compiler-inserted ops are skipped (their passes write what they need).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bb/opsets.h"
#include "bbc/compiler_internal.h"
#include "bbc/util.h"

static const char *dom(const bb_node *n)
{
    return bb_domain_is_onnx(n->domain) ? BB_DOMAIN_ONNX : n->domain;
}

static int expand_node(bbc_state *st, bb_arena *a, bb_node *n)
{
    const bb_op_schema *op = bb_op_schema_find(n->domain, n->op_type);
    if (!op || (op->flags & BB_OPF_COMPILER_INSERTED))
        return BB_OK;
    for (uint32_t i = 0; i < op->n_attrs; i++) {
        const bb_attr_schema *as = &op->attrs[i];
        if (bb_node_attr(n, as->name))
            continue;
        if (as->required)
            return bbc_fail(st, BBC_E_EXPANSION_FAILED,
                            "node '%s' (%s::%s) lacks its required attribute '%s'",
                            n->name ? n->name : "", dom(n), n->op_type, as->name);
        if (!as->default_text)
            continue;
        const char *t = as->default_text;
        char *end = NULL;
        errno = 0;
        bool ok = true;
        switch (as->type) {
        case BB_ATTR_INT: {
            long long v = strtoll(t, &end, 10);
            ok = !errno && end && !*end && bb_node_set_attr_int(a, n, as->name, v);
            break;
        }
        case BB_ATTR_FLOAT: {
            float v = strtof(t, &end);
            ok = !errno && end && !*end && bb_node_set_attr_float(a, n, as->name, v);
            break;
        }
        case BB_ATTR_STRING:
            ok = bb_node_set_attr_string(a, n, as->name, t) != NULL;
            break;
        default:
            ok = false;
        }
        if (!ok)
            return bbc_fail(st, BBC_E_EXPANSION_FAILED,
                            "node '%s' (%s::%s): cannot materialize the default '%s' of "
                            "attribute '%s'",
                            n->name ? n->name : "", dom(n), n->op_type, t, as->name);
    }
    return BB_OK;
}

int bbc_pass_expand_ops(bbc_state *st)
{
    int rc;
    if (st->parts.n == 0) {
        for (size_t i = 0; i < st->root->nodes.n; i++)
            if ((rc = expand_node(st, st->model->arena, st->root->nodes.v[i])) != BB_OK)
                return rc;
        return BB_OK;
    }
    for (size_t k = 0; k < st->parts.n; k++)
        for (size_t i = 0; i < st->parts.v[k]->fn->nodes.n; i++)
            if ((rc = expand_node(st, st->parts.v[k]->model->arena,
                                  st->parts.v[k]->fn->nodes.v[i])) != BB_OK)
                return rc;
    return BB_OK;
}
