/*
 * recorder_build.c — bb_recorder_build: turn the recording into the final
 * recorded ModelProto.
 *
 * Order: check scopes and calls (cycles, reachability from the root),
 * write every function's formals, resolve call nodes against their
 * callees (children first, so output types flow up), derive home classes
 * of non-class modules, compute opset_imports, order model.functions
 * (each module's body, then its bootstrap, in declaration order), and add
 * the top-level graph that calls the root.
 */
#include "recorder_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static size_t module_recs(bb_module *m, bb_rec **out)
{
    size_t n = 0;
    out[n++] = &m->body;
    if (m->boot)
        out[n++] = m->boot;
    return n;
}

/* ---- structure checks ------------------------------------------------------ */

static int check_scopes(bb_recorder *r)
{
    for (size_t i = 0; i < r->modules.n; i++) {
        bb_rec *recs[2];
        size_t nr = module_recs(r->modules.v[i], recs);
        for (size_t k = 0; k < nr; k++) {
            bb_rec *g = recs[k];
            if (g->scopes.n)
                return bb__rec_fail(r, g, "with_module", "scope '%s' was never ended",
                                    g->scopes.v[g->scopes.n - 1]);
            for (size_t c = 0; c < g->calls.n; c++)
                if (!g->calls.v[c]->node)
                    return bb__rec_fail(r, g, "call",
                                        "the call of '%s' was never built (bb_call_build)",
                                        g->calls.v[c]->child->name);
        }
    }
    return BB_OK;
}

/* Depth-first walk from m: marks reachability, refuses cycles, and appends
 * modules in post-order (callees before callers). */
static int walk(bb_recorder *r, bb_module *m, bb_module **order, size_t *n_order)
{
    if (m->visit == 2)
        return BB_OK;
    if (m->visit == 1)
        return bb__rec_fail(r, &m->body, "call", "module '%s' is part of a call cycle", m->name);
    m->visit = 1;
    m->reachable = true;
    bb_rec *recs[2];
    size_t nr = module_recs(m, recs);
    for (size_t k = 0; k < nr; k++) {
        for (size_t c = 0; c < recs[k]->calls.n; c++) {
            int rc = walk(r, recs[k]->calls.v[c]->child, order, n_order);
            if (rc)
                return rc;
        }
    }
    m->visit = 2;
    order[(*n_order)++] = m;
    return BB_OK;
}

/* ---- formals and calls ------------------------------------------------------- */

static int write_formals(bb_rec *g)
{
    bb_arena *ma = g->r->model->arena;
    g->f->inputs.n = 0;
    for (size_t i = 0; i < g->input_ids.n; i++)
        if (bb_str_list_push(ma, &g->f->inputs, g->vals.v[g->input_ids.v[i]].name))
            return bb__rec_oom(g->r, g, "inputs");
    for (size_t i = 0; i < g->net_in_ids.n; i++)
        if (bb_str_list_push(ma, &g->f->inputs, g->vals.v[g->net_in_ids.v[i]].name))
            return bb__rec_oom(g->r, g, "inputs");
    return BB_OK;
}

static rec_value *port_value(bb_rec *child, const char *name)
{
    for (size_t i = 0; i < child->vals.n; i++)
        if (child->vals.v[i].is_port && strcmp(child->vals.v[i].name, name) == 0)
            return &child->vals.v[i];
    return NULL;
}

static rec_value *formal_value(bb_rec *child, const char *name)
{
    for (size_t i = 0; i < child->vals.n; i++) {
        rec_value *v = &child->vals.v[i];
        if (v->kind != REC_VAL_SITE && strcmp(v->name, name) == 0)
            return v;
    }
    return NULL;
}

static int set_type(bb_rec *g, rec_value *v, const bb_type_node *t)
{
    bb_type_proto *tp = bb_type_to_proto(g->r->model->arena, t);
    if (!tp)
        return bb__rec_oom(g->r, g, "value_info");
    v->type = t;
    v->vi->type = tp;
    return BB_OK;
}

static int resolve_call(bb_call *c)
{
    bb_rec *g = c->g;
    bb_recorder *r = g->r;
    bb_rec *child = &c->child->body;
    bb_arena *ma = r->model->arena;
    bb_node *n = c->node;
    char what[160];
    snprintf(what, sizeof what, "call %s", c->child->name);

    for (size_t i = 0; i < c->ins.n; i++) {
        rec_value *fv = formal_value(child, c->ins.v[i].name);
        if (!fv || fv->kind != REC_VAL_INPUT)
            return bb__rec_fail(r, g, what, "module '%s' has no input '%s'", c->child->name,
                                c->ins.v[i].name);
    }
    n->inputs.n = 0;
    size_t used = 0;
    for (size_t i = 0; i < child->f->inputs.n; i++) {
        const char *formal = child->f->inputs.v[i];
        rec_value *fv = formal_value(child, formal);
        const char *arg = "";
        if (fv && fv->kind == REC_VAL_INPUT) {
            rec_binding *b = NULL;
            for (size_t k = 0; k < c->ins.n && !b; k++)
                if (strcmp(c->ins.v[k].name, formal) == 0)
                    b = &c->ins.v[k];
            if (!b)
                return bb__rec_fail(r, g, what, "input '%s' of module '%s' is not bound",
                                    formal, c->child->name);
            arg = g->vals.v[b->val].name;
            used = n->inputs.n + 1;
        }
        if (bb_str_list_push(ma, &n->inputs, arg))
            return bb__rec_oom(r, g, what);
    }
    n->inputs.n = used; /* trailing network formals are omitted */

    for (size_t i = 0; i < c->outs.n; i++)
        if (bb_str_list_find(&child->f->outputs, c->outs.v[i].name) < 0)
            return bb__rec_fail(r, g, what, "module '%s' has no output '%s'", c->child->name,
                                c->outs.v[i].name);
    n->outputs.n = 0;
    for (size_t i = 0; i < child->f->outputs.n; i++) {
        const char *port = child->f->outputs.v[i];
        rec_value *pv = port_value(child, port);
        const bb_type_node *t = pv ? pv->type : &BB_TYPE_ANY;
        rec_binding *b = NULL;
        for (size_t k = 0; k < c->outs.n && !b; k++)
            if (strcmp(c->outs.v[k].name, port) == 0)
                b = &c->outs.v[k];
        uint32_t id;
        if (b) {
            id = b->val;
            rec_value *v = &g->vals.v[id];
            if (!bb_type_same(v->type, t) && set_type(g, v, t))
                return r->err.code;
        } else {
            bb_val v = bb__rec_new_value(g, NULL, t, REC_VAL_SITE);
            if (!bb_val_ok(v))
                return r->err.code;
            id = v.id;
        }
        if (bb_str_list_push(ma, &n->outputs, g->vals.v[id].name))
            return bb__rec_oom(r, g, what);
    }
    return BB_OK;
}

/* ---- peer classes ---------------------------------------------------------------- */

static const char *class_of(bb_recorder *r, bb_module *m)
{
    if (m->klass)
        return m->klass;
    if (m->class_done)
        return m->derived_class;
    m->class_done = true; /* cycles were refused before */
    const char *cls = NULL;
    bool any = false;
    for (size_t i = 0; i < r->modules.n; i++) {
        bb_module *p = r->modules.v[i];
        bb_rec *recs[2];
        size_t nr = module_recs(p, recs);
        for (size_t k = 0; k < nr; k++) {
            for (size_t c = 0; c < recs[k]->calls.n; c++) {
                if (recs[k]->calls.v[c]->child != m)
                    continue;
                const char *pc = class_of(r, p);
                if (!pc || (any && (!cls || strcmp(cls, pc) != 0))) {
                    m->derived_class = NULL;
                    return NULL;
                }
                cls = pc;
                any = true;
            }
        }
    }
    m->derived_class = cls;
    return cls;
}

static int stamp_classes(bb_recorder *r)
{
    for (size_t i = 0; i < r->modules.n; i++) {
        bb_module *m = r->modules.v[i];
        if (m->klass)
            continue;
        const char *cls = class_of(r, m);
        if (!cls)
            continue;
        bb_rec *recs[2];
        size_t nr = module_recs(m, recs);
        for (size_t k = 0; k < nr; k++) {
            bb_function *f = recs[k]->f;
            for (size_t j = 0; j < f->nodes.n; j++) {
                bb_node *n = f->nodes.v[j];
                if (!bb_kv_get(&n->metadata, BB_META_HOME_CLASS) &&
                    bb_kv_set(r->model->arena, &n->metadata, BB_META_HOME_CLASS, cls))
                    return bb__rec_oom(r, recs[k], "home_class");
            }
        }
    }
    return BB_OK;
}

/* ---- opset_import ------------------------------------------------------------------ */

static int domain_cmp(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    bool ox = bb_domain_is_onnx(x), oy = bb_domain_is_onnx(y);
    if (ox || oy)
        return ox && oy ? 0 : (ox ? -1 : 1);
    return strcmp(x, y);
}

/* Add the domains of nodes to the set (deduplicated, ai.onnx spelled
 * "ai.onnx"). */
static int collect_domains(bb_arena *a, bb_str_list *set, const bb_node_list *nodes)
{
    for (size_t i = 0; i < nodes->n; i++) {
        const char *d = nodes->v[i]->domain;
        if (bb_domain_is_onnx(d))
            d = BB_DOMAIN_ONNX;
        bool seen = false;
        for (size_t k = 0; k < set->n && !seen; k++)
            seen = strcmp(set->v[k], d) == 0;
        if (seen)
            continue;
        const char **p = BB_VEC_PUSH(a, set);
        if (!p)
            return BB_ENOMEM;
        *p = d;
    }
    return BB_OK;
}

static int write_opsets(bb_arena *ma, bb_opset_list *dst, bb_str_list *set)
{
    if (set->n > 1)
        qsort(set->v, set->n, sizeof *set->v, domain_cmp);
    dst->n = 0;
    for (size_t i = 0; i < set->n; i++) {
        int64_t v = bb_domain_is_onnx(set->v[i]) ? BB_ONNX_OPSET_VERSION : BB_OPSET_VERSION;
        if (bb_opset_list_add(ma, dst, set->v[i], v))
            return BB_ENOMEM;
    }
    return BB_OK;
}

static int opsets(bb_recorder *r, bb_module **order, size_t n_order, bb_graph *top)
{
    bb_arena *ma = r->model->arena;
    bb_str_list all = {0};
    for (size_t i = 0; i < n_order; i++) {
        bb_rec *recs[2];
        size_t nr = module_recs(order[i], recs);
        for (size_t k = 0; k < nr; k++) {
            bb_str_list set = {0};
            if (collect_domains(r->arena, &set, &recs[k]->f->nodes) ||
                collect_domains(r->arena, &all, &recs[k]->f->nodes) ||
                write_opsets(ma, &recs[k]->f->opset_imports, &set))
                return bb__rec_oom(r, recs[k], "opset_import");
        }
    }
    if (collect_domains(r->arena, &all, &top->nodes) ||
        write_opsets(ma, &r->model->opset_imports, &all))
        return bb__rec_oom(r, NULL, "opset_import");
    return BB_OK;
}

/* ---- top level ---------------------------------------------------------------------- */

static int top_graph(bb_recorder *r, bb_module *root, bb_graph **out)
{
    bb_model *m = r->model;
    bb_arena *ma = m->arena;
    bb_rec *g = &root->body;
    bb_graph *top = bb_graph_new(ma, root->name);
    bb_node *n = top ? bb_graph_add_node(ma, top, root->domain, root->name) : NULL;
    if (!n)
        goto oom;
    size_t used = 0;
    for (size_t i = 0; i < g->f->inputs.n; i++) {
        const char *formal = g->f->inputs.v[i];
        rec_value *fv = formal_value(g, formal);
        const char *arg = "";
        if (fv && fv->kind == REC_VAL_INPUT) {
            bb_value_info *vi = bb_value_info_clone(ma, fv->vi);
            bb_value_info **p = vi ? BB_VEC_PUSH(ma, &top->inputs) : NULL;
            if (!p)
                goto oom;
            *p = vi;
            arg = formal;
            used = i + 1;
        }
        if (bb_str_list_push(ma, &n->inputs, arg))
            goto oom;
    }
    n->inputs.n = used;
    for (size_t i = 0; i < g->f->outputs.n; i++) {
        rec_value *pv = port_value(g, g->f->outputs.v[i]);
        bb_value_info *vi = pv ? bb_value_info_clone(ma, pv->vi) : NULL;
        bb_value_info **p = vi ? BB_VEC_PUSH(ma, &top->outputs) : NULL;
        if (!p || bb_str_list_push(ma, &n->outputs, g->f->outputs.v[i]))
            goto oom;
        *p = vi;
    }
    char *mi = bb_arena_sprintf(ma, "%s#%u", root->name, root->n_calls);
    if (!mi || bb_kv_set(ma, &n->metadata, BB_META_MODULE_INSTANCE, mi))
        goto oom;
    if (root->klass && bb_kv_set(ma, &n->metadata, BB_META_HOME_CLASS, root->klass))
        goto oom;
    *out = top;
    return BB_OK;
oom:
    return bb__rec_oom(r, NULL, "graph");
}

static int order_functions(bb_recorder *r)
{
    bb_model *m = r->model;
    size_t k = 0;
    for (size_t i = 0; i < r->modules.n; i++) {
        bb_rec *recs[2];
        size_t nr = module_recs(r->modules.v[i], recs);
        for (size_t j = 0; j < nr; j++)
            m->functions.v[k++] = recs[j]->f;
    }
    m->functions.n = k; /* every function belongs to exactly one recording */
    return BB_OK;
}

int bb__rec_finalize(bb_recorder *r, bb_module *root)
{
    int rc;
    if ((rc = check_scopes(r)))
        return rc;
    bb_module **order = bb_arena_calloc(r->arena, r->modules.n + 1, sizeof *order);
    if (!order)
        return bb__rec_oom(r, NULL, "build");
    size_t n_order = 0;
    if ((rc = walk(r, root, order, &n_order)))
        return rc;
    for (size_t i = 0; i < r->modules.n; i++)
        if (!r->modules.v[i]->reachable)
            return bb__rec_fail(r, &r->modules.v[i]->body, "build",
                                "module '%s' is never called from the root '%s'",
                                r->modules.v[i]->name, root->name);
    for (size_t i = 0; i < r->modules.n; i++) {
        bb_rec *recs[2];
        size_t nr = module_recs(r->modules.v[i], recs);
        for (size_t k = 0; k < nr; k++)
            if ((rc = write_formals(recs[k])))
                return rc;
    }
    for (size_t i = 0; i < n_order; i++) { /* callees first */
        bb_rec *recs[2];
        size_t nr = module_recs(order[i], recs);
        for (size_t k = 0; k < nr; k++)
            for (size_t c = 0; c < recs[k]->calls.n; c++)
                if ((rc = resolve_call(recs[k]->calls.v[c])))
                    return rc;
    }
    if ((rc = stamp_classes(r)) || (rc = order_functions(r)))
        return rc;
    bb_graph *top = NULL;
    if ((rc = top_graph(r, root, &top)) || (rc = opsets(r, order, n_order, top)))
        return rc;
    bb_model *m = r->model;
    bb_arena *ma = m->arena;
    m->graph = top;
    m->ir_version = BB_FRAMEWORK_IR_VERSION;
    m->has_model_version = true;
    m->model_version = 1;
    m->producer_name = bb_arena_strdup(ma, BB_RECORDER_PRODUCER);
    m->producer_version = bb_arena_strdup(ma, BB_RECORDER_PRODUCER_VERSION);
    m->domain = bb_arena_strdup(ma, r->domain);
    if (!m->producer_name || !m->producer_version || !m->domain)
        return bb__rec_oom(r, NULL, "build");
    return BB_OK;
}

int bb_recorder_build(bb_recorder *r, bb_module *root, bb_model **out, bb_error *err)
{
    if (out)
        *out = NULL;
    if (!r || !out)
        return bb_error_set(err, BB_EINVAL, "recorder build: NULL %s", r ? "out" : "recorder");
    if (r->err.code)
        return bb_recorder_error(r, err);
    if (r->built) {
        bb__rec_fail(r, NULL, "build", "the recorder was already built");
        return bb_recorder_error(r, err);
    }
    if (!root)
        bb__rec_fail(r, NULL, "build", "the root module is NULL");
    else if (root->r != r)
        bb__rec_fail(r, NULL, "build", "root module '%s' belongs to another recorder",
                     root->name);
    if (!r->err.code)
        bb__rec_finalize(r, root);
    r->built = true;
    if (r->err.code)
        return bb_recorder_error(r, err);
    *out = r->model;
    r->model = NULL;
    return BB_OK;
}
