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
 *
 * "Called from exactly one site" counts live sites: inlining a call removes
 * its site and adds the sites its body holds; a function whose last call
 * was inlined no longer counts its own body's calls. The root is rebuilt in
 * one ordered pass (each inlined body is expanded in place, its own calls
 * next), so the whole pass is linear in the nodes it produces. A function
 * whose every call was inlined leaves the model: its body now lives in the
 * root, and later passes (validate above all) need not walk it twice.
 */
#include <stdio.h>
#include <string.h>

#include "bb/artifact.h"
#include "bb/meta.h"
#include "bbc/compiler_internal.h"
#include "bbc/util.h"

/* Upper bound on call sites inlined in one compile (defends against call
 * cycles in untrusted input; the recorder refuses cycles). */
#define MAX_INLINES 100000

/* What the pass knows about every function of the model, by index. */
typedef struct fn_facts {
    bbc_fn_index ix;
    size_t *sites;      /* live call sites */
    uint8_t *wire;      /* touches the wire: 0 unknown, 1 visiting, 2 yes, 3 no */
    uint8_t *onnx;      /* pure ONNX: same encoding */
    bbc_map **vinfo;    /* value_info name -> index, built on first use */
    bbc_map **net_in;   /* net_in formal -> metadata index, built on first use */
    bool *inlined;      /* some call of the function was inlined */
} fn_facts;

/* The root's value_info names and metadata keys -> index: a callee's
 * value_info and carried metadata (one net_out key per port) cost a lookup
 * each, never a scan of the root's growing lists. */
typedef struct root_maps {
    bbc_map vinfo;
    bbc_map meta;
} root_maps;

enum { UNKNOWN = 0, VISITING, YES, NO };

/* Memoized closure property: every node (or any, for the wire) satisfies
 * `own` or is a call of a function that has the property. */
static bool closure(const fn_facts *ff, uint8_t *memo, size_t i, bool any, int depth)
{
    if (memo[i] == YES || memo[i] == NO)
        return memo[i] == YES;
    if (memo[i] == VISITING || depth > BBC_MAX_CALL_DEPTH)
        return false; /* a call cycle adds nothing */
    memo[i] = VISITING;
    const bb_function *f = ff->ix.m->functions.v[i];
    bool result = !any && f->nodes.n > 0;
    for (size_t j = 0; j < f->nodes.n; j++) {
        const bb_node *n = f->nodes.v[j];
        bool own = any ? bbc_is_wire(n) : bb_domain_is_onnx(n->domain);
        size_t c = own ? SIZE_MAX : bbc_fn_index_callee(&ff->ix, n);
        bool hit = own || (c != SIZE_MAX && c != i && closure(ff, memo, c, any, depth + 1));
        if (any && hit) {
            result = true;
            break;
        }
        if (!any && !hit) {
            result = false;
            break;
        }
    }
    memo[i] = result ? YES : NO;
    return result;
}

static int facts_init(fn_facts *ff, bb_arena *a, const bb_model *m)
{
    size_t n = m->functions.n + 1;
    if (bbc_fn_index_init(&ff->ix, a, m) != BB_OK ||
        !(ff->sites = bb_arena_calloc(a, n, sizeof *ff->sites)) ||
        !(ff->wire = bb_arena_calloc(a, n, 1)) || !(ff->onnx = bb_arena_calloc(a, n, 1)) ||
        !(ff->vinfo = bb_arena_calloc(a, n, sizeof *ff->vinfo)) ||
        !(ff->net_in = bb_arena_calloc(a, n, sizeof *ff->net_in)) ||
        !(ff->inlined = bb_arena_calloc(a, n, sizeof *ff->inlined)))
        return BB_ENOMEM;
    for (size_t i = 0; i < m->functions.n; i++) {
        const bb_function *g = m->functions.v[i];
        for (size_t j = 0; j < g->nodes.n; j++) {
            size_t c = bbc_fn_index_callee(&ff->ix, g->nodes.v[j]);
            if (c != SIZE_MAX)
                ff->sites[c]++;
        }
    }
    return BB_OK;
}

static bool should_inline(fn_facts *ff, size_t i)
{
    const bb_function *f = ff->ix.m->functions.v[i];
    if (bb_artifact_is_bootstrap(f))
        return false;
    return closure(ff, ff->wire, i, true, 0) || closure(ff, ff->onnx, i, false, 0) ||
           ff->sites[i] == 1;
}

/* The call site of function i was inlined: its body's calls now sit in the
 * root (added by the caller as they are expanded); when that was the last
 * site, the function's own body no longer calls anything. */
static void site_inlined(fn_facts *ff, size_t i)
{
    ff->inlined[i] = true;
    if (ff->sites[i] > 0 && --ff->sites[i] > 0)
        return;
    const bb_function *f = ff->ix.m->functions.v[i];
    for (size_t j = 0; j < f->nodes.n; j++) {
        size_t c = bbc_fn_index_callee(&ff->ix, f->nodes.v[j]);
        if (c != SIZE_MAX && ff->sites[c] > 0)
            ff->sites[c]--;
    }
}

/* value_info of function i by name (index map built once). */
static const bb_value_info *fn_value_info(fn_facts *ff, bb_arena *a, size_t i, const char *v)
{
    const bb_function *f = ff->ix.m->functions.v[i];
    if (!ff->vinfo[i]) {
        bbc_map *map = bb_arena_alloc(a, sizeof *map);
        if (!map || bbc_value_info_index(a, f, map) != BB_OK)
            return bb_value_info_find(&f->value_info, v); /* OOM: answer by a scan */
        ff->vinfo[i] = map;
    }
    size_t k;
    return bbc_map_get(ff->vinfo[i], v, &k) ? f->value_info.v[k] : NULL;
}

static bool has_prefix(const char *s, const char *p)
{
    return s && strncmp(s, p, strlen(p)) == 0;
}

/* The net_in port of formal v in function i (the first such entry), or
 * NULL; the function's net_in entries are indexed by value on first use. */
static const char *net_in_port(fn_facts *ff, bb_arena *a, size_t i, const char *v)
{
    const bb_function *f = ff->ix.m->functions.v[i];
    size_t pl = strlen(BB_META_NET_IN_PREFIX), k;
    if (!ff->net_in[i]) {
        bbc_map *map = bb_arena_alloc(a, sizeof *map);
        if (!map || bbc_map_init(map, a, 16) != BB_OK)
            return NULL;
        for (k = 0; k < f->metadata.n; k++) {
            const bb_kv *kv = &f->metadata.v[k];
            if (kv->value && has_prefix(kv->key, BB_META_NET_IN_PREFIX) &&
                !bbc_map_get(map, kv->value, NULL) && bbc_map_put(map, kv->value, k) != BB_OK)
                return NULL;
        }
        ff->net_in[i] = map;
    }
    return v && bbc_map_get(ff->net_in[i], v, &k) ? f->metadata.v[k].key + pl : NULL;
}

typedef struct inliner {
    bbc_state *st;
    bb_arena *a;
    bb_function *root;
    fn_facts *ff;
    root_maps *rm;        /* shared by every call */
    size_t callee_index;
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
    const char *nv = bbc_join(in->a, in->prefix, "/", v);
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
    const bb_value_info *vi = fn_value_info(in->ff, in->a, in->callee_index, callee_value);
    if (!vi || bbc_map_get(&in->rm->vinfo, root_value, NULL))
        return BB_OK;
    bb_value_info *c = bbc_value_info_copy(in->a, vi);
    bb_value_info **slot = c ? BB_VEC_PUSH(in->a, &in->root->value_info) : NULL;
    if (!slot)
        return BB_ENOMEM;
    c->name = root_value;
    *slot = c;
    return bbc_map_put(&in->rm->vinfo, root_value, in->root->value_info.n - 1);
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
        const char *port = net_in_port(in->ff, st->scratch, in->callee_index, formal);
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
                                          BB_META_SLOT_ROLE_PREFIX, BB_META_SLOT_ID_PREFIX,
                                          BB_META_NET_OUT_PREFIX};
    for (size_t i = 0; i < f->metadata.n; i++) {
        const bb_kv *kv = &f->metadata.v[i];
        bool carry = false;
        for (size_t k = 0; k < sizeof CARRIED / sizeof *CARRIED; k++)
            carry |= has_prefix(kv->key, CARRIED[k]);
        size_t at;
        if (!carry || (bbc_map_get(&in->rm->meta, kv->key, &at) && r->metadata.v[at].value))
            continue;
        if (bbc_kv_set_indexed(in->a, &r->metadata, &in->rm->meta, kv->key, kv->value) != BB_OK)
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

/* The body of the call's callee as fresh root nodes (*out, *n_out), values
 * renamed and formals bound; the call itself is dropped by the caller. */
static int inline_call(bbc_state *st, fn_facts *ff, root_maps *rm, const bb_node *call,
                       size_t callee_index, const char *prefix, bb_node ***out, size_t *n_out)
{
    const bb_function *callee = ff->ix.m->functions.v[callee_index];
    inliner in = {.st = st, .a = st->model->arena, .root = st->root, .ff = ff,
                  .rm = rm, .callee_index = callee_index, .callee = callee,
                  .call = call, .prefix = prefix};
    if (bbc_map_init(&in.map, st->scratch, callee->nodes.n + callee->inputs.n + callee->outputs.n) !=
        BB_OK)
        return bbc_oom(st);
    int rc;
    if ((rc = bind_formals(&in)) != BB_OK || (rc = carry_declarations(&in)) != BB_OK)
        return rc;
    const char *call_class = bbc_meta(in.call, BB_META_HOME_CLASS);
    const char *fn_class = bb_kv_get(&callee->metadata, BB_META_HOME_CLASS);
    const char *cls = fn_class ? fn_class : call_class;
    const char *call_instance = bbc_meta(in.call, BB_META_MODULE_INSTANCE);
    /* Build the inlined nodes, then splice them in place of the call. */
    size_t n = callee->nodes.n;
    bb_node **fresh = bb_arena_calloc(in.a, n ? n : 1, sizeof *fresh);
    if (!fresh)
        return bbc_oom(st);
    for (size_t i = 0; i < n; i++) {
        bb_node *c = bbc_node_copy(in.a, callee->nodes.v[i]);
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
            c->name = bbc_join(in.a, prefix, "/", c->name);
        if (cls && !bbc_meta(c, BB_META_HOME_CLASS) &&
            bbc_set_meta(in.a, c, BB_META_HOME_CLASS, cls) != BB_OK)
            return bbc_oom(st);
        /* The inlined body remembers which call it came from (naming). */
        if (call_instance && !bbc_meta(c, BB_META_MODULE_INSTANCE) &&
            bbc_set_meta(in.a, c, BB_META_MODULE_INSTANCE, call_instance) != BB_OK)
            return bbc_oom(st);
        fresh[i] = c;
        /* Unnamed nodes keep "<prefix>/" until name_nodes completes it. */
        if ((!c->name || !*c->name) && !(c->name = bbc_join(in.a, prefix, "/", NULL)))
            return bbc_oom(st);
    }
    *out = fresh;
    *n_out = n;
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

/* Name every unnamed node (and every inlined node whose name is only its
 * prefix "<prefix>/"): "<prefix><op_type>_<k>", the lowest k not taken. */
static int name_nodes(bbc_state *st, bb_function *f)
{
    bb_arena *a = st->model->arena;
    bbc_map taken, next; /* names in use; "<prefix><op>" -> next k to try */
    if (bbc_map_init(&taken, st->scratch, f->nodes.n) != BB_OK ||
        bbc_map_init(&next, st->scratch, 16) != BB_OK)
        return bbc_oom(st);
    bool any = false;
    for (size_t i = 0; i < f->nodes.n; i++) {
        const char *nm = f->nodes.v[i]->name;
        size_t len = nm ? strlen(nm) : 0;
        if (len > 0 && nm[len - 1] != '/' && bbc_map_put(&taken, nm, i) != BB_OK)
            return bbc_oom(st);
        any |= len == 0 || nm[len - 1] == '/';
    }
    for (size_t i = 0; any && i < f->nodes.n; i++) {
        bb_node *n = f->nodes.v[i];
        size_t len = n->name ? strlen(n->name) : 0;
        if (len > 0 && n->name[len - 1] != '/')
            continue;
        const char *op = n->op_type && *n->op_type ? n->op_type : "node";
        const char *stem = bbc_join(a, len ? n->name : NULL, NULL, op);
        if (!stem)
            return bbc_oom(st);
        size_t k = 0;
        bbc_map_get(&next, stem, &k);
        for (;; k++) {
            char *cand = bbc_join_num(a, stem, k);
            if (!cand)
                return bbc_oom(st);
            if (!bbc_map_get(&taken, cand, NULL)) {
                n->name = cand;
                break;
            }
        }
        if (bbc_map_put(&taken, n->name, i) != BB_OK || bbc_map_put(&next, stem, k + 1) != BB_OK)
            return bbc_oom(st);
    }
    return BB_OK;
}

/* The prefix of one inlined call: its own name, or (unnamed, or only the
 * placeholder "<outer prefix>/" of a call inlined from another body) the
 * callee's name numbered per callee, so two calls never share value names. */
static const char *prefix_of(bbc_state *st, const bb_node *n, const bb_function *callee,
                             size_t *counts, size_t idx)
{
    size_t nl = n->name ? strlen(n->name) : 0;
    if (nl == 0)
        return call_prefix(st, callee, counts, idx);
    if (n->name[nl - 1] != '/')
        return n->name;
    const char *p = call_prefix(st, callee, counts, idx);
    return p ? bb_arena_sprintf(st->model->arena, "%s%s", n->name, p) : NULL;
}

/* Pending node sequences: the root's own nodes, then each inlined body. */
typedef struct frame {
    bb_node **nodes;
    size_t n, pos;
} frame;

int bbc_pass_inline_for_partition(bbc_state *st)
{
    bb_model *m = st->model;
    bb_function *root = st->root;
    fn_facts ff;
    root_maps rm;
    size_t *counts = bb_arena_calloc(st->scratch, m->functions.n + 1, sizeof *counts);
    if (!counts || facts_init(&ff, st->scratch, m) != BB_OK ||
        bbc_value_info_index(st->scratch, root, &rm.vinfo) != BB_OK ||
        bbc_map_init(&rm.meta, st->scratch, root->metadata.n) != BB_OK)
        return bbc_oom(st);
    for (size_t k = 0; k < root->metadata.n; k++) /* the first of a key counts */
        if (root->metadata.v[k].key && !bbc_map_get(&rm.meta, root->metadata.v[k].key, NULL) &&
            bbc_map_put(&rm.meta, root->metadata.v[k].key, k) != BB_OK)
            return bbc_oom(st);
    BB_VEC(frame) stack = {0};
    bb_node_list out = {0};
    frame *top = BB_VEC_PUSH(st->scratch, &stack);
    if (!top)
        return bbc_oom(st);
    *top = (frame){root->nodes.v, root->nodes.n, 0};
    size_t inlined = 0;
    while (stack.n > 0) {
        frame *fr = &stack.v[stack.n - 1];
        if (fr->pos == fr->n) {
            stack.n--;
            continue;
        }
        bb_node *n = fr->nodes[fr->pos++];
        size_t idx = bbc_fn_index_callee(&ff.ix, n);
        if (idx == SIZE_MAX || m->functions.v[idx] == root || !should_inline(&ff, idx)) {
            bb_node **slot = BB_VEC_PUSH(m->arena, &out);
            if (!slot)
                return bbc_oom(st);
            *slot = n;
            continue;
        }
        const bb_function *callee = m->functions.v[idx];
        if (++inlined > MAX_INLINES)
            return bbc_fail(st, BBC_E_INTERNAL,
                            "more than %d call sites inlined: call cycle through '%s'?",
                            MAX_INLINES, callee->name);
        const char *prefix = prefix_of(st, n, callee, counts, idx);
        bb_node **body = NULL;
        size_t n_body = 0;
        int rc = prefix ? inline_call(st, &ff, &rm, n, idx, prefix, &body, &n_body)
                        : bbc_oom(st);
        if (rc != BB_OK)
            return rc;
        /* The body's calls are live sites now; the call itself is gone. */
        for (size_t j = 0; j < n_body; j++) {
            size_t c = bbc_fn_index_callee(&ff.ix, body[j]);
            if (c != SIZE_MAX)
                ff.sites[c]++;
        }
        site_inlined(&ff, idx);
        frame *next = BB_VEC_PUSH(st->scratch, &stack);
        if (!next)
            return bbc_oom(st);
        *next = (frame){body, n_body, 0};
    }
    if (inlined > 0) {
        root->nodes = out;
        /* Drop the functions whose last call site was inlined. */
        size_t k = 0;
        for (size_t i = 0; i < m->functions.n; i++) {
            bb_function *f = m->functions.v[i];
            bool gone = ff.inlined[i] && ff.sites[i] == 0 && f != root && !bb_artifact_is_bootstrap(f);
            if (!gone)
                m->functions.v[k++] = f;
        }
        m->functions.n = k;
    }
    /* Every function's nodes get names (bootstrap sites too). */
    for (size_t i = 0; i < m->functions.n; i++) {
        int rc = name_nodes(st, m->functions.v[i]);
        if (rc != BB_OK)
            return rc;
    }
    return BB_OK;
}
