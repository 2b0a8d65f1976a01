/*
 * pass_inline_for_partition.c — inline three classes of function at every
 * call site of the root (COMPILER.md "Pass groups"): wire-touching functions
 * (their closure holds an ai.bytesandbrains.wire op), pure-ONNX functions,
 * and functions called from exactly one site. Multi-call sub-modules
 * without wire ops survive as FunctionProtos referenced by call nodes.
 *
 * Inlining renames the callee's values "<prefix>/<value>" (formals map to
 * the call's actuals), carries its slot declarations and slot metadata up to
 * the root, stamps the callee's class on nodes without a home_class, and
 * turns an omitted lookup_output formal into a root net_in. Afterwards every
 * unnamed root node gets a stable name "<prefix>/<op_type>_<k>" (or
 * "<op_type>_<k>"): the gate passes and the wire sites address nodes by name.
 */
#include <stdio.h>
#include <string.h>

#include "bb/meta.h"
#include "bbc/compiler.h"
#include "bbc/util.h"

/* Upper bound on call sites inlined in one compile (defends against call
 * cycles in untrusted input; the recorder refuses cycles). */
#define MAX_INLINES 100000

static size_t call_sites(const bb_model *m, const bb_function *f)
{
    size_t n = 0;
    for (size_t i = 0; i < m->functions.n; i++) {
        const bb_function *g = m->functions.v[i];
        for (size_t j = 0; j < g->nodes.n; j++)
            if (bbc_callee(m, g->nodes.v[j]) == f)
                n++;
    }
    return n;
}

static bool should_inline(const bb_model *m, const bb_function *f)
{
    if (bbc_is_bootstrap_fn(f))
        return false;
    return bbc_fn_touches_wire(m, f, 0) || bbc_fn_pure_onnx(m, f, 0) || call_sites(m, f) == 1;
}

static bool has_prefix(const char *s, const char *p)
{
    return s && strncmp(s, p, strlen(p)) == 0;
}

/* The net_in port of formal v in f, or NULL. */
static const char *net_in_port(const bb_function *f, const char *v)
{
    size_t pl = strlen(BBC_META_NET_IN_PREFIX);
    for (size_t i = 0; i < f->metadata.n; i++)
        if (has_prefix(f->metadata.v[i].key, BBC_META_NET_IN_PREFIX) &&
            bbc_str_eq(f->metadata.v[i].value, v))
            return f->metadata.v[i].key + pl;
    return NULL;
}

typedef struct inliner {
    bbc_state *st;
    bb_arena *a;
    bb_function *root;
    const bb_function *callee;
    const bb_node *call;
    const char *prefix;
    bbc_map map; /* callee value -> root value (index into names) */
    BB_VEC(const char *) names;
} inliner;

static const char *map_value(inliner *in, const char *v)
{
    if (!v || !*v)
        return v;
    size_t idx;
    if (bbc_map_get(&in->map, v, &idx))
        return in->names.v[idx];
    const char *nv = bb_arena_sprintf(in->a, "%s/%s", in->prefix, v);
    const char **slot = nv ? BB_VEC_PUSH(in->a, &in->names) : NULL;
    if (!slot || bbc_map_put(&in->map, v, in->names.n - 1) != BB_OK)
        return NULL;
    *slot = nv;
    return nv;
}

static int bind_value(inliner *in, const char *from, const char *to)
{
    const char **slot = BB_VEC_PUSH(in->a, &in->names);
    if (!slot)
        return BB_ENOMEM;
    *slot = to;
    return bbc_map_put(&in->map, from, in->names.n - 1);
}

static int add_value_info(inliner *in, const char *callee_value, const char *root_value)
{
    const bb_value_info *vi = bb_value_info_find(&in->callee->value_info, callee_value);
    if (!vi || bb_value_info_find(&in->root->value_info, root_value))
        return BB_OK;
    bb_value_info *c = bb_value_info_clone(in->a, vi);
    bb_value_info **slot = c ? BB_VEC_PUSH(in->a, &in->root->value_info) : NULL;
    if (!slot)
        return BB_ENOMEM;
    c->name = root_value;
    *slot = c;
    return BB_OK;
}

/* Formals -> actuals; omitted lookup_output formals become root net_ins. */
static int bind_formals(inliner *in)
{
    bbc_state *st = in->st;
    const bb_function *f = in->callee;
    const char *cls = bb_kv_get(&f->metadata, BB_META_HOME_CLASS);
    for (size_t j = 0; j < f->inputs.n; j++) {
        const char *formal = f->inputs.v[j];
        const char *actual = j < in->call->inputs.n ? in->call->inputs.v[j] : NULL;
        if (actual && *actual) {
            if (bind_value(in, formal, actual) != BB_OK)
                return bbc_oom(st);
            continue;
        }
        const char *nv = map_value(in, formal);
        if (!nv || bb_str_list_push(in->a, &in->root->inputs, nv) != BB_OK ||
            add_value_info(in, formal, nv) != BB_OK)
            return bbc_oom(st);
        const char *port = net_in_port(f, formal);
        if (port) {
            bbc_net_in *ni = BB_VEC_PUSH(st->arena, &st->net_ins);
            if (!ni)
                return bbc_oom(st);
            ni->port = bb_arena_strdup(st->arena, port);
            ni->value = bb_arena_strdup(st->arena, nv);
            ni->cls = cls ? bb_arena_strdup(st->arena, cls) : bbc_meta(in->call, BB_META_HOME_CLASS);
        }
    }
    for (size_t j = 0; j < f->outputs.n; j++) {
        const char *actual = j < in->call->outputs.n ? in->call->outputs.v[j] : NULL;
        if (actual && *actual && bind_value(in, f->outputs.v[j], actual) != BB_OK)
            return bbc_oom(st);
    }
    return BB_OK;
}

/* Carry slot declarations and slot / network metadata up to the root. */
static int carry_declarations(inliner *in)
{
    bbc_state *st = in->st;
    const bb_function *f = in->callee;
    bb_function *r = in->root;
    for (size_t i = 0; i < f->attributes.n; i++)
        if (bb_str_list_find(&r->attributes, f->attributes.v[i]) < 0 &&
            bb_str_list_push(in->a, &r->attributes, f->attributes.v[i]) != BB_OK)
            return bbc_oom(st);
    for (size_t i = 0; i < f->attribute_protos.n; i++) {
        const bb_attr *ap = f->attribute_protos.v[i];
        bool have = false;
        for (size_t k = 0; k < r->attribute_protos.n; k++)
            have |= bbc_str_eq(r->attribute_protos.v[k]->name, ap->name);
        if (have)
            continue;
        bb_attr *c = bb_attr_clone(in->a, ap);
        bb_attr **slot = c ? BB_VEC_PUSH(in->a, &r->attribute_protos) : NULL;
        if (!slot)
            return bbc_oom(st);
        *slot = c;
    }
    static const char *const CARRIED[] = {BB_META_SLOT_CONCRETE_TYPE_PREFIX,
                                          BBC_META_SLOT_ROLE_PREFIX, BBC_META_SLOT_ID_PREFIX,
                                          BBC_META_NET_OUT_PREFIX};
    for (size_t i = 0; i < f->metadata.n; i++) {
        const bb_kv *kv = &f->metadata.v[i];
        bool carry = false;
        for (size_t k = 0; k < sizeof CARRIED / sizeof *CARRIED; k++)
            carry |= has_prefix(kv->key, CARRIED[k]);
        if (!carry || bb_kv_get(&r->metadata, kv->key))
            continue;
        if (bb_kv_set(in->a, &r->metadata, kv->key, kv->value) != BB_OK)
            return bbc_oom(st);
    }
    for (size_t i = 0; i < f->opset_imports.n; i++)
        if (bb_opset_list_version(&r->opset_imports, f->opset_imports.v[i].domain) < 0 &&
            bb_opset_list_add(in->a, &r->opset_imports, f->opset_imports.v[i].domain,
                              f->opset_imports.v[i].version) != BB_OK)
            return bbc_oom(st);
    return BB_OK;
}

/* Resolve ref_attr_name against the call's attributes or the callee's defaults. */
static bb_attr *resolve_attr_ref(inliner *in, const bb_attr *at)
{
    const bb_attr *src = NULL;
    for (size_t i = 0; i < in->call->attrs.n && !src; i++)
        if (bbc_str_eq(in->call->attrs.v[i]->name, at->ref_attr_name))
            src = in->call->attrs.v[i];
    for (size_t i = 0; i < in->callee->attribute_protos.n && !src; i++)
        if (bbc_str_eq(in->callee->attribute_protos.v[i]->name, at->ref_attr_name))
            src = in->callee->attribute_protos.v[i];
    if (!src)
        return NULL;
    bb_attr *c = bb_attr_clone(in->a, src);
    if (c)
        c->name = at->name;
    return c;
}

static int inline_call(bbc_state *st, size_t at, bb_function *callee, const char *prefix)
{
    inliner in = {.st = st, .a = st->model->arena, .root = st->root, .callee = callee,
                  .call = st->root->nodes.v[at], .prefix = prefix};
    if (bbc_map_init(&in.map, st->arena, callee->nodes.n * 2) != BB_OK)
        return bbc_oom(st);
    int rc;
    if ((rc = bind_formals(&in)) != BB_OK || (rc = carry_declarations(&in)) != BB_OK)
        return rc;
    const char *call_class = bbc_meta(in.call, BB_META_HOME_CLASS);
    const char *fn_class = bb_kv_get(&callee->metadata, BB_META_HOME_CLASS);
    const char *cls = fn_class ? fn_class : call_class;
    /* Build the inlined nodes, then splice them in place of the call. */
    size_t n = callee->nodes.n;
    bb_node **fresh = bb_arena_calloc(in.a, n ? n : 1, sizeof *fresh);
    if (!fresh)
        return bbc_oom(st);
    for (size_t i = 0; i < n; i++) {
        bb_node *c = bb_node_clone(in.a, callee->nodes.v[i]);
        if (!c)
            return bbc_oom(st);
        for (size_t j = 0; j < c->inputs.n; j++)
            if (!(c->inputs.v[j] = map_value(&in, c->inputs.v[j])))
                return bbc_oom(st);
        for (size_t j = 0; j < c->outputs.n; j++) {
            const char *orig = c->outputs.v[j];
            if (!(c->outputs.v[j] = map_value(&in, orig)) ||
                (orig && *orig && add_value_info(&in, orig, c->outputs.v[j]) != BB_OK))
                return bbc_oom(st);
        }
        for (size_t j = 0; j < c->attrs.n; j++) {
            if (!c->attrs.v[j]->ref_attr_name)
                continue;
            bb_attr *r = resolve_attr_ref(&in, c->attrs.v[j]);
            if (r)
                c->attrs.v[j] = r;
        }
        if (c->name && *c->name)
            c->name = bb_arena_sprintf(in.a, "%s/%s", prefix, c->name);
        if (cls && !bbc_meta(c, BB_META_HOME_CLASS) &&
            bbc_set_meta(in.a, c, BB_META_HOME_CLASS, cls) != BB_OK)
            return bbc_oom(st);
        /* The inlined body remembers which call it came from (naming). */
        if (!bbc_meta(c, BB_META_MODULE_INSTANCE) && bbc_meta(in.call, BB_META_MODULE_INSTANCE) &&
            bbc_set_meta(in.a, c, BB_META_MODULE_INSTANCE,
                         bbc_meta(in.call, BB_META_MODULE_INSTANCE)) != BB_OK)
            return bbc_oom(st);
        fresh[i] = c;
        /* Unnamed nodes keep "<prefix>/" until name_nodes completes it. */
        if ((!c->name || !*c->name) &&
            !(c->name = bb_arena_sprintf(in.a, "%s/", prefix)))
            return bbc_oom(st);
    }
    BB_VEC_REMOVE(&st->root->nodes, at);
    for (size_t i = 0; i < n; i++)
        if (bbc_insert_node(in.a, st->root, at + i, fresh[i]) != BB_OK)
            return bbc_oom(st);
    return BB_OK;
}

/* "Client", or "Client_1" for a second call of one callee. */
static const char *call_prefix(bbc_state *st, const bb_function *callee, size_t *counts,
                               size_t idx)
{
    size_t k = counts[idx]++;
    if (k == 0)
        return bb_arena_strdup(st->model->arena, callee->name);
    return bb_arena_sprintf(st->model->arena, "%s_%zu", callee->name, k);
}

static bool name_taken(const bb_function *f, const char *name)
{
    for (size_t i = 0; i < f->nodes.n; i++)
        if (bbc_str_eq(f->nodes.v[i]->name, name))
            return true;
    return false;
}

/* Name every unnamed node (and every inlined node whose name is only its
 * prefix "<prefix>/"): "<prefix><op_type>_<k>". */
static int name_nodes(bbc_state *st, bb_function *f)
{
    bb_arena *a = st->model->arena;
    for (size_t i = 0; i < f->nodes.n; i++) {
        bb_node *n = f->nodes.v[i];
        size_t len = n->name ? strlen(n->name) : 0;
        const char *prefix = "";
        if (len > 0 && n->name[len - 1] == '/')
            prefix = n->name;
        else if (len > 0)
            continue;
        const char *op = n->op_type && *n->op_type ? n->op_type : "node";
        for (size_t k = 0;; k++) {
            char *cand = bb_arena_sprintf(a, "%s%s_%zu", prefix, op, k);
            if (!cand)
                return bbc_oom(st);
            if (!name_taken(f, cand)) {
                n->name = cand;
                break;
            }
        }
    }
    return BB_OK;
}

int bbc_pass_inline_for_partition(bbc_state *st)
{
    bb_model *m = st->model;
    size_t *counts = bb_arena_calloc(st->arena, m->functions.n + 1, sizeof *counts);
    if (!counts)
        return bbc_oom(st);
    size_t inlined = 0;
    for (size_t i = 0; i < st->root->nodes.n;) {
        bb_node *n = st->root->nodes.v[i];
        bb_function *callee = bbc_callee(m, n);
        if (!callee || callee == st->root || !should_inline(m, callee)) {
            i++;
            continue;
        }
        if (++inlined > MAX_INLINES)
            return bbc_fail(st, BBC_E_INTERNAL,
                            "more than %d call sites inlined: call cycle through '%s'?",
                            MAX_INLINES, callee->name);
        size_t idx = 0;
        while (idx < m->functions.n && m->functions.v[idx] != callee)
            idx++;
        const char *prefix = n->name && *n->name ? n->name : call_prefix(st, callee, counts, idx);
        if (!prefix)
            return bbc_oom(st);
        int rc = inline_call(st, i, callee, prefix);
        if (rc != BB_OK)
            return rc;
        /* Re-scan from i: the inlined body may itself hold calls. */
    }
    /* Every function's nodes get names (bootstrap sites too). */
    for (size_t i = 0; i < m->functions.n; i++) {
        int rc = name_nodes(st, m->functions.v[i]);
        if (rc != BB_OK)
            return rc;
    }
    return BB_OK;
}
