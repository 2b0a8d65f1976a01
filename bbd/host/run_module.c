/*
 * run_module.c — a plain ONNX model (a main graph of ai.onnx ops with its
 * initializers, no functions) becomes a recorded single-module model that
 * bbc compiles like any recorded Module:
 *
 *   model.graph   one node bbd.run::Main (module_instance "Main#0")
 *   function      bbd.run::Main, generic Backend slot "backend" (slot id 0),
 *                 inputs = the graph inputs without an initializer,
 *                 outputs = the graph outputs, value_info from the graph;
 *                 every initializer as an ai.onnx Constant, then every
 *                 node (value names kept) stamped slot/required_trait/slot_id
 *
 * If / Loop subgraphs may read values of the enclosing graph. Dispatched
 * per op there is no enclosing graph, so those values become extra
 * trailing inputs of the node, named in order by outer_scope metadata the
 * backend binds as the subgraph's outer scope.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/meta.h"
#include "bb/opsets.h"
#include "bb/plugin.h"
#include "bbd/host/run_internal.h"

bool bbd_run_is_plain_onnx(const bb_model *m)
{
    return m && m->graph && m->functions.n == 0;
}

/* ---- small string sets (subgraphs are small; linear search) -------------------- */

typedef struct name_set {
    const char **v;
    size_t n, cap;
} name_set;

static bool set_has(const name_set *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i], name) == 0)
            return true;
    return false;
}

static int set_add(name_set *s, const char *name)
{
    if (!name || !*name || set_has(s, name))
        return BB_OK;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        const char **v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return BB_ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = name;
    return BB_OK;
}

/* Names g (and the subgraphs nested in it) read but do not define, in
 * first-read order, appended to free_names. */
static int graph_free_names(const bb_graph *g, name_set *free_names, int depth)
{
    if (depth > 64)
        return BB_ELIMIT;
    name_set defined = {0};
    int rc = BB_OK;
    for (size_t i = 0; rc == BB_OK && i < g->inputs.n; i++)
        rc = set_add(&defined, g->inputs.v[i] ? g->inputs.v[i]->name : NULL);
    for (size_t i = 0; rc == BB_OK && i < g->initializers.n; i++)
        rc = set_add(&defined, g->initializers.v[i] ? g->initializers.v[i]->name : NULL);
    for (size_t i = 0; rc == BB_OK && i < g->nodes.n; i++) {
        const bb_node *n = g->nodes.v[i];
        for (size_t k = 0; rc == BB_OK && k < n->inputs.n; k++)
            if (!set_has(&defined, n->inputs.v[k]))
                rc = set_add(free_names, n->inputs.v[k]);
        for (size_t a = 0; rc == BB_OK && a < n->attrs.n; a++) {
            const bb_attr *at = n->attrs.v[a];
            name_set inner = {0};
            if (at->g)
                rc = graph_free_names(at->g, &inner, depth + 1);
            for (size_t k = 0; rc == BB_OK && k < at->graphs.n; k++)
                rc = graph_free_names(at->graphs.v[k], &inner, depth + 1);
            for (size_t k = 0; rc == BB_OK && k < inner.n; k++)
                if (!set_has(&defined, inner.v[k]))
                    rc = set_add(free_names, inner.v[k]);
            free(inner.v);
        }
        for (size_t k = 0; rc == BB_OK && k < n->outputs.n; k++)
            rc = set_add(&defined, n->outputs.v[k]);
    }
    free(defined.v);
    return rc;
}

/* ---- building the module -------------------------------------------------------------- */

typedef struct builder {
    const bb_graph *g;
    const char *origin;
    bb_model *m;
    bb_function *f;
    bb_error *err;
} builder;

static int oom(builder *b)
{
    return bb_error_set(b->err, BB_ENOMEM, "%s: out of memory", b->origin);
}

static const char *node_label(const bb_node *n, size_t i, char *buf, size_t cap)
{
    if (n->name && *n->name)
        snprintf(buf, cap, "node '%s' (%s)", n->name, n->op_type ? n->op_type : "?");
    else
        snprintf(buf, cap, "node %zu (%s)", i, n->op_type ? n->op_type : "?");
    return buf;
}

static int stamp_slot(builder *b, bb_node *n)
{
    bb_arena *a = b->m->arena;
    if (bb_kv_set(a, &n->metadata, BB_META_SLOT, BBD_RUN_BACKEND_SLOT) ||
        bb_kv_set(a, &n->metadata, BB_META_REQUIRED_TRAIT, bb_role_name(BB_ROLE_BACKEND)) ||
        bb_kv_set(a, &n->metadata, BB_META_SLOT_ID, "0"))
        return oom(b);
    return BB_OK;
}

static bool is_initializer(const bb_graph *g, const char *name)
{
    for (size_t i = 0; i < g->initializers.n; i++)
        if (g->initializers.v[i] && g->initializers.v[i]->name &&
            strcmp(g->initializers.v[i]->name, name) == 0)
            return true;
    return false;
}

static int add_value_info(builder *b, bb_value_info_list *dst, const bb_value_info *vi)
{
    bb_value_info *c = bb_value_info_clone(b->m->arena, vi);
    bb_value_info **slot = c ? BB_VEC_PUSH(b->m->arena, dst) : NULL;
    if (!slot)
        return oom(b);
    *slot = c;
    return BB_OK;
}

static int add_constants(builder *b)
{
    bb_arena *a = b->m->arena;
    for (size_t i = 0; i < b->g->initializers.n; i++) {
        const bb_tensor_proto *t = b->g->initializers.v[i];
        if (!t || !t->name || !*t->name)
            return bb_error_set(b->err, BB_EPARSE, "%s: initializer %zu has no name", b->origin,
                                i);
        bb_node *n = bb_function_add_node(b->m, b->f, BB_DOMAIN_ONNX, "Constant");
        bb_attr *at = n ? bb_node_add_attr(a, n, "value", BB_ATTR_TENSOR) : NULL;
        if (!at || !(at->t = bb_tensor_proto_clone(a, t)) ||
            bb_str_list_push(a, &n->outputs, t->name))
            return oom(b);
        n->name = bb_arena_sprintf(a, "initializer:%s", t->name);
        int rc = stamp_slot(b, n);
        if (rc)
            return rc;
        if (!bb_value_info_find(&b->f->value_info, t->name)) {
            bb_type_proto *tp = bb_type_proto_tensor(a, t->data_type);
            bb_value_info *vi = tp ? bb_value_info_new(a, t->name, tp) : NULL;
            bb_value_info **slot = vi ? BB_VEC_PUSH(a, &b->f->value_info) : NULL;
            if (!slot)
                return oom(b);
            *slot = vi;
        }
    }
    return BB_OK;
}

/* Outer-scope reads of n's subgraphs become extra inputs + metadata. */
static int add_captures(builder *b, bb_node *n, const char *label)
{
    name_set captured = {0};
    int rc = BB_OK;
    for (size_t a = 0; rc == BB_OK && a < n->attrs.n; a++) {
        const bb_attr *at = n->attrs.v[a];
        if (at->g)
            rc = graph_free_names(at->g, &captured, 0);
        for (size_t k = 0; rc == BB_OK && k < at->graphs.n; k++)
            rc = graph_free_names(at->graphs.v[k], &captured, 0);
    }
    if (rc == BB_ELIMIT)
        rc = bb_error_set(b->err, BB_ELIMIT, "%s: %s: subgraphs nest deeper than 64", b->origin,
                          label);
    else if (rc)
        rc = oom(b);
    bb_arena *a = b->m->arena;
    for (size_t k = 0; rc == BB_OK && k < captured.n; k++) {
        char key[64];
        snprintf(key, sizeof key, "%s%zu", BB_META_OUTER_SCOPE_PREFIX, k);
        if (bb_str_list_push(a, &n->inputs, captured.v[k]) ||
            bb_kv_set(a, &n->metadata, key, captured.v[k]))
            rc = oom(b);
    }
    free(captured.v);
    return rc;
}

static int add_nodes(builder *b)
{
    for (size_t i = 0; i < b->g->nodes.n; i++) {
        const bb_node *src = b->g->nodes.v[i];
        char label[160];
        node_label(src, i, label, sizeof label);
        if (!src->op_type || !*src->op_type) /* a NodeProto without field 4 */
            return bb_error_set(b->err, BB_EPARSE, "%s: %s has no op_type", b->origin, label);
        if (!bb_domain_is_onnx(src->domain))
            return bb_error_set(b->err, BB_EUNSUPPORTED, "%s: %s is in domain '%s'; a plain "
                                "ONNX model may use ai.onnx ops only", b->origin, label,
                                src->domain);
        for (size_t k = 0; k < src->metadata.n; k++)
            if (src->metadata.v[k].key &&
                strncmp(src->metadata.v[k].key, BB_META_PREFIX, sizeof BB_META_PREFIX - 1) == 0)
                return bb_error_set(b->err, BB_EPARSE, "%s: %s carries BytesAndBrains metadata "
                                    "'%s' but the model has no functions", b->origin, label,
                                    src->metadata.v[k].key);
        bb_node *n = bb_node_clone(b->m->arena, src);
        bb_node **slot = n ? BB_VEC_PUSH(b->m->arena, &b->f->nodes) : NULL;
        if (!slot)
            return oom(b);
        *slot = n;
        n->domain = BB_DOMAIN_ONNX;
        int rc = stamp_slot(b, n);
        if (rc == BB_OK && (strcmp(n->op_type, "If") == 0 || strcmp(n->op_type, "Loop") == 0))
            rc = add_captures(b, n, label);
        if (rc)
            return rc;
    }
    return BB_OK;
}

/* One graph input or output becomes a port of the function, of the
 * top-level graph and of the call node. */
static int add_port(builder *b, const bb_value_info *vi, bb_str_list *fn_ports,
                    bb_value_info_list *top_ports, bb_str_list *call_ports)
{
    bb_arena *a = b->m->arena;
    int rc = add_value_info(b, &b->f->value_info, vi);
    if (rc == BB_OK)
        rc = add_value_info(b, top_ports, vi);
    if (rc == BB_OK &&
        (bb_str_list_push(a, fn_ports, vi->name) || bb_str_list_push(a, call_ports, vi->name)))
        rc = oom(b);
    return rc;
}

/* Is name read by a node of f (captured outer-scope reads included)? */
static bool consumed(const bb_function *f, const char *name)
{
    for (size_t i = 0; i < f->nodes.n; i++)
        if (bb_str_list_find(&f->nodes.v[i]->inputs, name) >= 0)
            return true;
    return false;
}

/* The engine surfaces an entry point's output as an AppEvent only when no
 * node consumes it (ENGINE.md 13.2 a). ONNX graph outputs may also feed
 * other nodes (or be a graph input): those get an explicit AppEmit with
 * the output's name as topic (13.2 b). */
static int add_app_emits(builder *b)
{
    bb_arena *a = b->m->arena;
    bool any = false;
    for (size_t i = 0; i < b->f->outputs.n; i++) {
        const char *name = b->f->outputs.v[i];
        if (!consumed(b->f, name) && bb_str_list_find(&b->f->inputs, name) < 0)
            continue;
        bb_node *n = bb_function_add_node(b->m, b->f, BB_DOMAIN_SYSCALL, "AppEmit");
        if (!n || bb_str_list_push(a, &n->inputs, name) ||
            !bb_node_set_attr_string(a, n, "name", name))
            return oom(b);
        n->name = bb_arena_sprintf(a, "output:%s", name);
        any = true;
    }
    if (any && (bb_opset_list_add(a, &b->m->opset_imports, BB_DOMAIN_SYSCALL, 1) ||
                bb_opset_list_add(a, &b->f->opset_imports, BB_DOMAIN_SYSCALL, 1)))
        return oom(b);
    return BB_OK;
}

static int add_ports(builder *b)
{
    bb_arena *a = b->m->arena;
    const bb_graph *g = b->g;
    bb_graph *top = b->m->graph;
    bb_node *call = bb_graph_add_node(a, top, BBD_RUN_MODULE_DOMAIN, BBD_RUN_MODULE_NAME);
    if (!call || bb_kv_set(a, &call->metadata, BB_META_MODULE_INSTANCE,
                           BBD_RUN_MODULE_NAME "#0"))
        return oom(b);
    if (g->outputs.n == 0)
        return bb_error_set(b->err, BB_EPARSE, "%s: the graph has no outputs", b->origin);
    const bb_value_info_list *lists[2] = {&g->inputs, &g->outputs};
    for (int io = 0; io < 2; io++) {
        for (size_t i = 0; i < lists[io]->n; i++) {
            const bb_value_info *vi = lists[io]->v[i];
            if (!vi || !vi->name || !*vi->name)
                return bb_error_set(b->err, BB_EPARSE, "%s: graph %s %zu has no name",
                                    b->origin, io ? "output" : "input", i);
            if (io == 0 && is_initializer(g, vi->name))
                continue; /* a constant with a default: the initializer wins */
            int rc = io ? add_port(b, vi, &b->f->outputs, &top->outputs, &call->outputs)
                        : add_port(b, vi, &b->f->inputs, &top->inputs, &call->inputs);
            if (rc)
                return rc;
        }
    }
    for (size_t i = 0; i < g->value_info.n; i++) {
        const bb_value_info *vi = g->value_info.v[i];
        if (vi && vi->name && !bb_value_info_find(&b->f->value_info, vi->name)) {
            int rc = add_value_info(b, &b->f->value_info, vi);
            if (rc)
                return rc;
        }
    }
    return BB_OK;
}

int bbd_run_module_from_onnx(const bb_model *plain, const char *origin, bb_model **out,
                             bb_error *err)
{
    *out = NULL;
    const char *from = origin ? origin : "model";
    if (!bbd_run_is_plain_onnx(plain))
        return bb_error_set(err, BB_EINVAL, "%s: not a plain ONNX model (a main graph and no "
                            "functions)", from);
    int64_t onnx_version = bb_opset_list_version(&plain->opset_imports, BB_DOMAIN_ONNX);
    if (onnx_version < 0)
        onnx_version = BB_ONNX_OPSET_VERSION;
    builder b = {.g = plain->graph, .origin = from, .m = bb_model_new(), .err = err};
    if (!b.m)
        return oom(&b);
    bb_arena *a = b.m->arena;
    b.m->ir_version = BB_FRAMEWORK_IR_VERSION;
    b.m->producer_name = bb_model_str(b.m, "bbd run");
    b.m->domain = bb_model_str(b.m, BBD_RUN_MODULE_DOMAIN);
    b.m->graph = bb_graph_new(a, plain->graph->name ? plain->graph->name : BBD_RUN_MODULE_NAME);
    b.f = b.m->graph ? bb_model_add_function(b.m, BBD_RUN_MODULE_DOMAIN, BBD_RUN_MODULE_NAME)
                     : NULL;
    int rc = BB_OK;
    if (!b.f || bb_opset_list_add(a, &b.m->opset_imports, BB_DOMAIN_ONNX, onnx_version) ||
        bb_opset_list_add(a, &b.m->opset_imports, BBD_RUN_MODULE_DOMAIN, 1) ||
        bb_opset_list_add(a, &b.f->opset_imports, BB_DOMAIN_ONNX, onnx_version) ||
        bb_str_list_push(a, &b.f->attributes, BBD_RUN_BACKEND_SLOT) ||
        bb_kv_set(a, &b.f->metadata, BB_META_SLOT_ROLE_PREFIX BBD_RUN_BACKEND_SLOT,
                  bb_role_name(BB_ROLE_BACKEND)) ||
        bb_kv_set(a, &b.f->metadata, BB_META_SLOT_ID_PREFIX BBD_RUN_BACKEND_SLOT, "0"))
        rc = oom(&b);
    if (rc == BB_OK)
        rc = add_ports(&b);
    if (rc == BB_OK)
        rc = add_constants(&b);
    if (rc == BB_OK)
        rc = add_nodes(&b);
    if (rc == BB_OK)
        rc = add_app_emits(&b);
    if (rc != BB_OK) {
        bb_model_free(b.m);
        return rc;
    }
    *out = b.m;
    return BB_OK;
}
