/*
 * plan.c — from an ONNX inference graph to the trainer's plan (the layout
 * and the steps are described in autodiff.h).
 *
 * The graph is untrusted input (it arrives in a program or a node config):
 * every name is checked to be defined once and before use, every node's op
 * against the rule table, the data input and the output against what the
 * trainer needs, and every size against the limits, each refusal naming
 * the value or the node and its op. The steps, in order:
 *   1. slots for the graph inputs and initializers (parameter, buffer or
 *      constant), then for every node output;
 *   2. nodes: rule, input / output slots; Constant nodes fold;
 *   3. which values depend on a trained parameter (forward sweep) and
 *      which of those reach the loss (backward sweep): the backward graph;
 *      a node on it without a gradient rule is refused;
 *   4. the flat layout of parameters and buffers, in initializer order.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff.h"

/* ---- the builder ----------------------------------------------------------------- */

typedef struct builder {
    ad_plan *p;
    cpu_name_map map;
    uint32_t cap_slots;
    const char *who;
    const char *const *frozen;
    size_t n_frozen;
    bb_error *err;
} builder;

static int bfail(builder *b, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bfail(builder *b, int code, const char *fmt, ...)
{
    char msg[BB_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return bb_error_set(b->err, code, "%s: graph: %s", b->who, msg);
}

static const char *nname(const bb_node *n)
{
    return n->name && *n->name ? n->name : "(unnamed)";
}

static int32_t slot_add(builder *b, const char *name, ad_slot_kind kind)
{
    ad_plan *p = b->p;
    int32_t s = (int32_t)p->n_slots++;
    p->slots[s] = (ad_slot){.name = name, .kind = kind, .param = -1, .last_use = -1};
    cpu_name_map_put(&b->map, name, s);
    return s;
}

static bool is_frozen(const builder *b, const char *name)
{
    for (size_t i = 0; i < b->n_frozen; i++)
        if (strcmp(b->frozen[i], name) == 0)
            return true;
    return false;
}

/* BatchNormalization's running statistics are buffers, not parameters. */
static bool is_bn_statistic(const bb_graph *g, const char *name)
{
    for (size_t i = 0; i < g->nodes.n; i++) {
        const bb_node *n = g->nodes.v[i];
        if (!n->op_type || strcmp(n->op_type, "BatchNormalization") != 0)
            continue;
        for (size_t j = 3; j < 5 && j < n->inputs.n; j++)
            if (n->inputs.v[j] && strcmp(n->inputs.v[j], name) == 0)
                return true;
    }
    return false;
}

/* Step 1a: one slot per initializer. */
static int add_initializers(builder *b)
{
    ad_plan *p = b->p;
    const bb_graph *g = p->graph;
    cpu_backend be = {0};
    for (size_t i = 0; i < g->initializers.n; i++) {
        const bb_tensor_proto *t = g->initializers.v[i];
        if (!t || !t->name || !*t->name)
            return bfail(b, BB_EINVAL, "initializer %zu has no name", i);
        if (cpu_name_map_get(&b->map, t->name) >= 0)
            return bfail(b, BB_EINVAL, "initializer '%s' is defined twice", t->name);
        bool flt = t->data_type == BB_DT_FLOAT && t->dims.n >= 1 && t->dims.n <= BB_MAX_DIMS;
        bool stat = flt && is_bn_statistic(g, t->name);
        if (flt && (stat || !is_frozen(b, t->name))) {
            int32_t s = slot_add(b, t->name, AD_SLOT_PARAM);
            ad_param *pa = &p->params[p->n_params];
            *pa = (ad_param){.name = t->name, .slot = (uint32_t)s, .offset = p->n_floats,
                             .numel = bb_shape_numel((uint32_t)t->dims.n, t->dims.v),
                             .ndim = (uint32_t)t->dims.n, .trained = !stat};
            memcpy(pa->dims, t->dims.v, t->dims.n * sizeof *pa->dims);
            if (pa->numel == SIZE_MAX || pa->numel > AD_MAX_FLOATS - p->n_floats)
                return bfail(b, BB_ELIMIT, "initializer '%s': more than %llu parameters",
                             t->name, (unsigned long long)AD_MAX_FLOATS);
            if (!t->has_raw_data || t->raw_data.len != pa->numel * sizeof(float) ||
                (t->has_data_location && t->data_location == 1))
                return bfail(b, BB_EINVAL, "initializer '%s': %zu data bytes for %zu floats "
                             "(external data is not supported)", t->name, t->raw_data.len,
                             pa->numel);
            p->slots[s].param = (int32_t)p->n_params++;
            p->n_floats += pa->numel;
            if (pa->trained)
                p->n_trained += pa->numel;
            continue;
        }
        int32_t s = slot_add(b, t->name, AD_SLOT_CONST);
        cpu_run r = {.be = &be, .op = CPU_OP_Constant, .err = b->err};
        int rc = cpu_tensor_from_proto(&r, t, &p->slots[s].konst);
        free(be.scratch);
        if (rc) {
            bb_error_prefix(b->err, "%s: graph: initializer '%s'", b->who, t->name);
            return rc;
        }
    }
    return BB_OK;
}

/* Step 1b: the one data input (graph inputs that are initializers are
 * constants, as older exporters list them). */
static int add_input(builder *b)
{
    ad_plan *p = b->p;
    const bb_graph *g = p->graph;
    int32_t data = -1;
    for (size_t i = 0; i < g->inputs.n; i++) {
        const bb_value_info *vi = g->inputs.v[i];
        if (!vi || !vi->name || !*vi->name)
            return bfail(b, BB_EINVAL, "input %zu has no name", i);
        int32_t s = cpu_name_map_get(&b->map, vi->name);
        if (s >= 0 && p->slots[s].kind != AD_SLOT_INPUT)
            continue; /* an initializer listed as an input */
        if (s >= 0)
            return bfail(b, BB_EINVAL, "input '%s' is declared twice", vi->name);
        if (data >= 0)
            return bfail(b, BB_EUNSUPPORTED, "inputs '%s' and '%s' both lack an initializer: "
                         "the model takes one data input", p->slots[data].name, vi->name);
        const bb_type_proto *t = vi->type;
        if (t && t->kind == BB_TP_TENSOR && t->elem_type && t->elem_type != BB_DT_FLOAT)
            return bfail(b, BB_EUNSUPPORTED, "input '%s' is %s; the model takes f32 data",
                         vi->name, bb_dtype_name(t->elem_type));
        data = slot_add(b, vi->name, AD_SLOT_INPUT);
        p->input_ndim = 0;
        if (t && t->kind == BB_TP_TENSOR && t->has_shape && t->shape.n <= BB_MAX_DIMS) {
            p->input_ndim = (uint32_t)t->shape.n;
            for (size_t d = 0; d < t->shape.n; d++)
                p->input_dims[d] = t->shape.v[d].has_value ? t->shape.v[d].value : -1;
        }
    }
    if (data < 0)
        return bfail(b, BB_EINVAL, "no data input (every graph input has an initializer)");
    p->input_slot = (uint32_t)data;
    return BB_OK;
}

/* Step 2 for one node. */
static int add_node(builder *b, const bb_node *n)
{
    ad_plan *p = b->p;
    bb_arena *a = p->arena;
    if (!bb_domain_is_onnx(n->domain))
        return bfail(b, BB_EUNSUPPORTED, "node '%s': op %s::%s is not an ai.onnx op", nname(n),
                     n->domain, n->op_type ? n->op_type : "?");
    const ad_rule *rule = ad_rule_find(n->op_type);
    if (!rule)
        return bfail(b, BB_EUNSUPPORTED, "node '%s': op %s is not supported", nname(n),
                     n->op_type ? n->op_type : "(none)");
    if (n->inputs.n > 64 || n->outputs.n > 64)
        return bfail(b, BB_ELIMIT, "node '%s' (%s): more than 64 inputs or outputs", nname(n),
                     n->op_type);
    ad_node *an = &p->nodes[p->n_nodes];
    *an = (ad_node){.node = n, .rule = rule, .n_in = (uint32_t)n->inputs.n,
                    .n_out = (uint32_t)n->outputs.n};
    an->in = bb_arena_calloc(a, an->n_in + 1, sizeof *an->in);
    an->out = bb_arena_calloc(a, an->n_out + 1, sizeof *an->out);
    if (!an->in || !an->out)
        return bfail(b, BB_ENOMEM, "out of memory");
    for (uint32_t j = 0; j < an->n_in; j++) {
        const char *nm = n->inputs.v[j];
        an->in[j] = nm && *nm ? cpu_name_map_get(&b->map, nm) : -1;
        if (nm && *nm && an->in[j] < 0)
            return bfail(b, BB_EINVAL, "node '%s' (%s) reads '%s', which nothing defines "
                         "before it (nodes must be in topological order)", nname(n),
                         n->op_type, nm);
        if (an->in[j] >= 0)
            p->slots[an->in[j]].last_use = (int32_t)p->n_nodes;
    }
    for (uint32_t j = 0; j < an->n_out; j++) {
        const char *nm = n->outputs.v[j];
        an->out[j] = -1;
        if (!nm || !*nm)
            continue;
        if (cpu_name_map_get(&b->map, nm) >= 0)
            return bfail(b, BB_EINVAL, "node '%s' (%s): value '%s' is already defined",
                         nname(n), n->op_type, nm);
        an->out[j] = slot_add(b, nm, AD_SLOT_VALUE);
    }
    if (strcmp(n->op_type, "Constant") == 0) { /* fold it: its output is a constant */
        if (an->n_out != 1 || an->out[0] < 0)
            return bfail(b, BB_EINVAL, "node '%s' (Constant) must have one output", nname(n));
        cpu_backend be = {0};
        cpu_run r = {.be = &be, .node = n, .op = CPU_OP_Constant, .err = b->err};
        ad_slot *s = &p->slots[an->out[0]];
        int rc = cpu_run_kernel(&r, NULL, 0, &s->konst, 1);
        free(be.scratch);
        if (rc) {
            bb_error_prefix(b->err, "%s: graph", b->who);
            return rc;
        }
        s->kind = AD_SLOT_CONST;
        return BB_OK;
    }
    if (strcmp(n->op_type, "Dropout") == 0)
        p->has_dropout = true;
    p->n_nodes++;
    return BB_OK;
}

/* Step 3: the backward graph. */
static int mark_gradients(builder *b)
{
    ad_plan *p = b->p;
    for (uint32_t s = 0; s < p->n_slots; s++) {
        ad_slot *sl = &p->slots[s];
        sl->depends = sl->kind == AD_SLOT_PARAM && p->params[sl->param].trained;
    }
    for (uint32_t k = 0; k < p->n_nodes; k++) { /* forward: what depends on a parameter */
        ad_node *n = &p->nodes[k];
        bool dep = false;
        for (uint32_t j = 0; j < n->n_in; j++)
            dep = dep || (n->in[j] >= 0 && !(n->rule->nondiff >> j & 1) &&
                          p->slots[n->in[j]].depends);
        for (uint32_t j = 0; j < n->n_out; j++)
            if (n->out[j] >= 0)
                p->slots[n->out[j]].depends = dep;
    }
    ad_slot *out = &p->slots[p->output_slot];
    if (!out->depends)
        return bfail(b, BB_EINVAL, "output '%s' depends on no trained parameter", out->name);
    out->grad = true;
    for (uint32_t k = p->n_nodes; k-- > 0;) { /* backward: what reaches the loss */
        ad_node *n = &p->nodes[k];
        bool reaches = false;
        for (uint32_t j = 0; j < n->n_out; j++)
            reaches = reaches || (n->out[j] >= 0 && p->slots[n->out[j]].grad);
        if (!reaches)
            continue;
        for (uint32_t j = 0; j < n->n_in; j++) {
            if (n->in[j] < 0 || (n->rule->nondiff >> j & 1) || !p->slots[n->in[j]].depends)
                continue;
            if (!n->rule->bwd)
                return bfail(b, BB_EUNSUPPORTED, "node '%s': op %s has no gradient rule, and "
                             "a trained parameter reaches the loss through it (input '%s')",
                             nname(n->node), n->node->op_type, p->slots[n->in[j]].name);
            p->slots[n->in[j]].grad = true;
            n->backward = true;
        }
    }
    return BB_OK;
}

/* Step 4: the trained runs of the flat vector (adjacent parameters merge). */
static int trained_runs(builder *b)
{
    ad_plan *p = b->p;
    p->trained = bb_arena_calloc(p->arena, p->n_params + 1, sizeof *p->trained);
    if (!p->trained)
        return bfail(b, BB_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < p->n_params; i++) {
        const ad_param *pa = &p->params[i];
        if (!pa->trained || !pa->numel)
            continue;
        bbp_range *last = p->n_trained_runs ? &p->trained[p->n_trained_runs - 1] : NULL;
        if (last && last->off + last->n == pa->offset)
            last->n += pa->numel;
        else
            p->trained[p->n_trained_runs++] = (bbp_range){pa->offset, pa->numel};
    }
    return BB_OK;
}

static int build(builder *b)
{
    ad_plan *p = b->p;
    const bb_graph *g = p->graph;
    int rc;
    if ((rc = add_initializers(b)) || (rc = add_input(b)))
        return rc;
    for (size_t i = 0; i < g->nodes.n; i++)
        if ((rc = add_node(b, g->nodes.v[i])))
            return rc;
    if (g->outputs.n < 1 || !g->outputs.v[0] || !g->outputs.v[0]->name)
        return bfail(b, BB_EINVAL, "the graph has no output");
    int32_t o = cpu_name_map_get(&b->map, g->outputs.v[0]->name);
    if (o < 0 || p->slots[o].kind != AD_SLOT_VALUE)
        return bfail(b, BB_EINVAL, "output '%s' is not computed by a node",
                     g->outputs.v[0]->name);
    p->output_slot = (uint32_t)o;
    p->slots[o].last_use = (int32_t)p->n_nodes; /* never released by inference */
    if ((rc = mark_gradients(b)) || (rc = trained_runs(b)))
        return rc;
    return ad_rules_prepare(p, b->who, b->err);
}

int ad_plan_build(const bb_graph *graph, const char *const *frozen, size_t n_frozen,
                  const char *who, ad_plan **out, bb_error *err)
{
    *out = NULL;
    if (!graph)
        return bb_error_set(err, BB_EINVAL, "%s: no graph", who);
    size_t names = graph->inputs.n + graph->initializers.n + 1;
    for (size_t i = 0; i < graph->nodes.n; i++)
        names += graph->nodes.v[i]->outputs.n;
    if (graph->nodes.n > AD_MAX_NODES || names > 4 * (size_t)AD_MAX_NODES)
        return bb_error_set(err, BB_ELIMIT, "%s: graph: more than %u nodes", who, AD_MAX_NODES);
    bb_arena *a = bb_arena_create();
    ad_plan *p = a ? bb_arena_calloc(a, 1, sizeof *p) : NULL;
    if (!p) {
        bb_arena_destroy(a);
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", who);
    }
    atomic_init(&p->refs, 1);
    p->arena = a;
    p->who = bb_arena_strdup(a, who);
    builder b = {.p = p, .cap_slots = (uint32_t)names, .who = who, .frozen = frozen,
                 .n_frozen = n_frozen, .err = err};
    size_t cap = 16;
    while (cap < 2 * names)
        cap <<= 1;
    b.map.cap = cap;
    b.map.keys = bb_arena_calloc(a, cap, sizeof *b.map.keys);
    b.map.vals = bb_arena_calloc(a, cap, sizeof *b.map.vals);
    p->graph = bb_graph_clone(a, graph);
    p->slots = bb_arena_calloc(a, names, sizeof *p->slots);
    p->nodes = bb_arena_calloc(a, graph->nodes.n + 1, sizeof *p->nodes);
    p->params = bb_arena_calloc(a, graph->initializers.n + 1, sizeof *p->params);
    int rc = !p->who || !b.map.keys || !b.map.vals || !p->graph || !p->slots || !p->nodes || !p->params
                 ? bb_error_set(err, BB_ENOMEM, "%s: out of memory", who)
                 : build(&b);
    if (rc) {
        ad_plan_unref(p);
        return rc;
    }
    *out = p;
    return BB_OK;
}

ad_plan *ad_plan_ref(ad_plan *p)
{
    atomic_fetch_add(&p->refs, 1);
    return p;
}

void ad_plan_unref(ad_plan *p)
{
    if (!p || atomic_fetch_sub(&p->refs, 1) != 1)
        return;
    for (uint32_t s = 0; s < p->n_slots; s++)
        bb_value_unref(p->slots[s].konst);
    bb_arena_destroy(p->arena);
}

void ad_plan_initial_params(const ad_plan *p, float *flat)
{
    for (uint32_t i = 0; i < p->n_params; i++) {
        const ad_param *pa = &p->params[i];
        const bb_tensor_proto *t = NULL;
        for (size_t k = 0; k < p->graph->initializers.n && !t; k++)
            if (strcmp(p->graph->initializers.v[k]->name, pa->name) == 0)
                t = p->graph->initializers.v[k];
        memcpy(flat + pa->offset, t->raw_data.data, pa->numel * sizeof(float));
    }
}

int32_t ad_plan_find_param(const ad_plan *p, const char *name)
{
    for (uint32_t i = 0; i < p->n_params; i++)
        if (strcmp(p->params[i].name, name) == 0)
            return (int32_t)i;
    return -1;
}
