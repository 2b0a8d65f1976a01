/*
 * artifact.c — the one view of a compiled artifact (bb/artifact.h): the
 * passport, the targets with their bootstraps, calls and parsed bindings,
 * the lookup a host asks a target by, and the wire edges.
 *
 * Workload: read once per install or inspection, so clarity over speed,
 * but nothing quadratic in the model's size: functions are found by
 * (domain, name, overload) and wire ops by node name through sorted
 * indexes (one sort each, a binary search per lookup). The per-target
 * work (bootstrap, call walk) is linear in the functions per target, and
 * a model has a handful of targets.
 */
#include "bb/artifact.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/opsets.h"

static const char *nz(const char *s)
{
    return s ? s : "";
}

static bool str_is(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

/* ---- passport, bootstraps, partitions ------------------------------------------- */

bool bb_artifact_is_compiled(const bb_model *m)
{
    return m && str_is(bb_kv_get(&m->metadata, BB_META_COMPILED), BB_COMPILED_PASSPORT);
}

int bb_artifact_stamp_passport(bb_model *m)
{
    return bb_kv_set(m->arena, &m->metadata, BB_META_COMPILED, BB_COMPILED_PASSPORT);
}

bool bb_artifact_is_bootstrap(const bb_function *f)
{
    if (str_is(bb_kv_get(&f->metadata, BB_META_MODULE_PHASE), BB_MODULE_PHASE_BOOTSTRAP))
        return true;
    size_t n = f->name ? strlen(f->name) : 0, sl = strlen(BB_BOOTSTRAP_SUFFIX);
    return n > sl && strcmp(f->name + n - sl, BB_BOOTSTRAP_SUFFIX) == 0;
}

bool bb_artifact_is_partition(const bb_function *f)
{
    return bb_kv_get(&f->metadata, BB_META_PARTITION_ID) && !bb_artifact_is_bootstrap(f);
}

/* The length of name's "<class>" when it reads "<class>#<hash>", else 0. */
static size_t class_len(const char *name)
{
    const char *hash = name ? strchr(name, '#') : NULL;
    return hash && hash != name ? (size_t)(hash - name) : 0;
}

/* ---- functions by (domain, name, overload) ------------------------------------------ */

typedef struct fn_key {
    const char *domain, *name, *overload;
    size_t index; /* in model->functions; ties keep the first */
} fn_key;

typedef struct reader {
    const bb_model *m;
    bb_arena *a;
    fn_key *fns; /* sorted */
    size_t n_fns;
    bool *visited; /* per function, for one target's call walk */
    BB_VEC(const bb_function *) calls;
} reader;

static int fn_key_cmp_name(const fn_key *x, const fn_key *y)
{
    int c = strcmp(nz(x->domain), nz(y->domain));
    if (c == 0)
        c = strcmp(nz(x->name), nz(y->name));
    return c ? c : strcmp(nz(x->overload), nz(y->overload));
}

static int fn_key_cmp(const void *a, const void *b)
{
    const fn_key *x = a, *y = b;
    int c = fn_key_cmp_name(x, y);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

static int index_functions(reader *r)
{
    r->n_fns = r->m->functions.n;
    r->fns = bb_arena_calloc(r->a, r->n_fns + 1, sizeof *r->fns);
    r->visited = bb_arena_calloc(r->a, r->n_fns + 1, sizeof *r->visited);
    if (!r->fns || !r->visited)
        return BB_ENOMEM;
    for (size_t i = 0; i < r->n_fns; i++) {
        const bb_function *f = r->m->functions.v[i];
        r->fns[i] = (fn_key){f->domain, f->name, f->overload, i};
    }
    qsort(r->fns, r->n_fns, sizeof *r->fns, fn_key_cmp);
    return BB_OK;
}

/* The model-local function node n calls (the first of equal keys), or
 * SIZE_MAX. Reserved domains are never calls. */
static size_t callee(const reader *r, const bb_node *n)
{
    if (!n->op_type || bb_opset_is_reserved(n->domain))
        return SIZE_MAX;
    fn_key want = {n->domain, n->op_type, n->overload, 0};
    size_t lo = 0, hi = r->n_fns;
    while (lo < hi) { /* the first key not below want */
        size_t mid = lo + (hi - lo) / 2;
        if (fn_key_cmp_name(&r->fns[mid], &want) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < r->n_fns && fn_key_cmp_name(&r->fns[lo], &want) == 0 ? r->fns[lo].index
                                                                       : SIZE_MAX;
}

/* called[i]: does another function call function i? */
static void mark_called(const reader *r, bool *called)
{
    for (size_t i = 0; i < r->m->functions.n; i++) {
        const bb_function *f = r->m->functions.v[i];
        for (size_t j = 0; j < f->nodes.n; j++) {
            size_t c = callee(r, f->nodes.v[j]);
            if (c != SIZE_MAX && c != i)
                called[c] = true;
        }
    }
}

static int walk_calls(reader *r, const bb_function *f, int depth)
{
    if (!f || depth > BB_ARTIFACT_MAX_CALL_DEPTH)
        return BB_OK;
    for (size_t j = 0; j < f->nodes.n; j++) {
        size_t c = callee(r, f->nodes.v[j]);
        if (c == SIZE_MAX || r->visited[c])
            continue;
        r->visited[c] = true;
        const bb_function **slot = BB_VEC_PUSH(r->a, &r->calls);
        if (!slot)
            return BB_ENOMEM;
        *slot = r->m->functions.v[c];
        int rc = walk_calls(r, r->m->functions.v[c], depth + 1);
        if (rc != BB_OK)
            return rc;
    }
    return BB_OK;
}

/* ---- targets ------------------------------------------------------------------------ */

static size_t find_bootstrap(const reader *r, const bb_function *f, const char *name, size_t len)
{
    size_t sl = strlen(BB_BOOTSTRAP_SUFFIX);
    for (size_t i = 0; i < r->m->functions.n; i++) {
        const bb_function *g = r->m->functions.v[i];
        const char *phase = bb_kv_get(&g->metadata, BB_META_MODULE_PHASE);
        if (g->name && strlen(g->name) == len + sl && strncmp(g->name, name, len) == 0 &&
            strcmp(g->name + len, BB_BOOTSTRAP_SUFFIX) == 0 &&
            strcmp(nz(g->domain), nz(f->domain)) == 0 &&
            (!phase || strcmp(phase, BB_MODULE_PHASE_BOOTSTRAP) == 0))
            return i;
    }
    return SIZE_MAX;
}

/* "<name>__bootstrap", else "<class>__bootstrap" for a "<class>#<hash>". */
static void set_bootstrap(const reader *r, bb_artifact_target *t)
{
    size_t i = find_bootstrap(r, t->fn, t->name, strlen(t->name));
    if (i == SIZE_MAX && class_len(t->name))
        i = find_bootstrap(r, t->fn, t->name, class_len(t->name));
    t->bootstrap_index = i;
    t->bootstrap = i == SIZE_MAX ? NULL : r->m->functions.v[i];
}

/* The slot of a binding key naming the target by its name or its class
 * (NULL: none), or NULL when key names neither. */
static const char *binding_slot(const char *key, const char *name, const char *cls)
{
    const char *slot = bb_meta_binding_key_slot(key, name);
    return slot || !cls ? slot : bb_meta_binding_key_slot(key, cls);
}

static int read_bindings(reader *r, bb_artifact_target *t)
{
    const bb_kv_list *md = &r->m->metadata;
    size_t cl = class_len(t->name);
    const char *cls = cl ? bb_arena_strndup(r->a, t->name, cl) : NULL;
    if (cl && !cls)
        return BB_ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < md->n; i++)
        n += binding_slot(md->v[i].key, t->name, cls) != NULL;
    t->bindings = bb_arena_calloc(r->a, n + 1, sizeof *t->bindings);
    if (!t->bindings)
        return BB_ENOMEM;
    for (size_t i = 0; i < md->n; i++) {
        const char *slot = binding_slot(md->v[i].key, t->name, cls);
        if (!slot)
            continue;
        bb_artifact_binding *b = &t->bindings[t->n_bindings++];
        b->key = md->v[i].key;
        b->slot = slot;
        b->triple = nz(md->v[i].value);
        bb_error e;
        bb_error_clear(&e);
        int rc = bb_binding_triple_parse(r->a, md->v[i].value, &b->parsed, &e);
        if (rc == BB_ENOMEM)
            return rc;
        if (rc != BB_OK && !(b->error = bb_arena_strdup(r->a, e.msg)))
            return BB_ENOMEM;
    }
    return BB_OK;
}

static int read_target(reader *r, size_t fi, bb_artifact_target *t)
{
    const bb_function *f = r->m->functions.v[fi];
    t->name = nz(f->name);
    t->partition_id = bb_kv_get(&f->metadata, BB_META_PARTITION_ID);
    t->fn_index = fi;
    t->fn = f;
    set_bootstrap(r, t);
    memset(r->visited, 0, r->m->functions.n * sizeof *r->visited);
    r->visited[fi] = true;
    r->calls.n = 0;
    int rc;
    if ((rc = walk_calls(r, f, 0)) != BB_OK || (rc = walk_calls(r, t->bootstrap, 0)) != BB_OK)
        return rc;
    t->n_calls = r->calls.n;
    t->calls = bb_arena_calloc(r->a, r->calls.n + 1, sizeof *t->calls);
    if (!t->calls)
        return BB_ENOMEM;
    for (size_t k = 0; k < r->calls.n; k++)
        t->calls[k] = r->calls.v[k];
    return read_bindings(r, t);
}

static int read_targets(reader *r, bb_artifact *out)
{
    const bb_model *m = r->m;
    bool stamped = false;
    for (size_t i = 0; i < m->functions.n; i++)
        stamped |= bb_artifact_is_partition(m->functions.v[i]);
    bool *take = bb_arena_calloc(r->a, m->functions.n + 1, sizeof *take);
    bool *called = bb_arena_calloc(r->a, m->functions.n + 1, sizeof *called);
    if (!take || !called)
        return BB_ENOMEM;
    if (!stamped)
        mark_called(r, called);
    size_t n = 0;
    for (size_t i = 0; i < m->functions.n; i++) {
        const bb_function *f = m->functions.v[i];
        take[i] = stamped ? bb_artifact_is_partition(f) : !bb_artifact_is_bootstrap(f) && !called[i];
        n += take[i];
    }
    out->targets = bb_arena_calloc(r->a, n + 1, sizeof *out->targets);
    if (!out->targets)
        return BB_ENOMEM;
    for (size_t i = 0; i < m->functions.n; i++) {
        if (!take[i])
            continue;
        int rc = read_target(r, i, &out->targets[out->n_targets++]);
        if (rc != BB_OK)
            return rc;
    }
    return BB_OK;
}

int bb_artifact_read(const bb_model *m, const char *origin, bb_arena *a, bb_artifact *out,
                     bb_error *err)
{
    memset(out, 0, sizeof *out);
    out->model = m;
    origin = origin ? origin : "model";
    if (!bb_artifact_is_compiled(m))
        return bb_error_set(err, BB_EINVAL,
                            "%s: not a compiled model (no %s = \"%s\" passport); run 'bbc "
                            "compile' first",
                            origin, BB_META_COMPILED, BB_COMPILED_PASSPORT);
    out->name = m->graph && m->graph->name && *m->graph->name ? m->graph->name : NULL;
    reader r = {.m = m, .a = a};
    int rc = index_functions(&r);
    if (rc == BB_OK)
        rc = read_targets(&r, out);
    if (rc != BB_OK)
        return bb_error_set(err, rc, "%s: out of memory", origin);
    if (out->n_targets == 0)
        return bb_error_set(err, BB_ENOTFOUND, "%s: the compiled model has no partition function",
                            origin);
    return BB_OK;
}

/* ---- finding a target ------------------------------------------------------------- */

const char *bb_artifact_target_names(const bb_artifact *art, char *buf, size_t cap)
{
    if (!cap)
        return buf;
    buf[0] = '\0';
    size_t used = 0;
    for (size_t i = 0; i < art->n_targets && used + 1 < cap; i++) {
        int w = snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", art->targets[i].name);
        used += w > 0 ? (size_t)w : 0;
    }
    if (art->n_targets == 0)
        snprintf(buf, cap, "none");
    return buf;
}

int bb_artifact_find_target(const bb_artifact *art, const char *name,
                            const bb_artifact_target **out, bb_error *err)
{
    *out = NULL;
    if (!name || !*name)
        return bb_error_set(err, BB_EINVAL, "an empty target name");
    for (size_t i = 0; i < art->n_targets; i++)
        if (strcmp(art->targets[i].name, name) == 0) {
            *out = &art->targets[i];
            return BB_OK;
        }
    size_t nl = strlen(name);
    for (size_t i = 0; i < art->n_targets; i++) {
        const char *tn = art->targets[i].name;
        if (strncmp(tn, name, nl) != 0 || tn[nl] != '#')
            continue;
        if (*out) {
            const char *first = (*out)->name;
            *out = NULL;
            return bb_error_set(err, BB_EINVAL, "target '%s' is ambiguous: it matches both %s "
                                "and %s", name, first, tn);
        }
        *out = &art->targets[i];
    }
    if (*out)
        return BB_OK;
    char names[512];
    return bb_error_set(err, BB_ENOTFOUND, "no target '%s' (targets: %s)", name,
                        bb_artifact_target_names(art, names, sizeof names));
}

/* ---- wire edges ------------------------------------------------------------------- */

typedef struct wire_op {
    bb_artifact_end end;
    bool matched;
} wire_op;

/* A wire op's node name, for the site lookups. */
typedef struct named_op {
    const char *name;
    size_t op; /* index into the wire ops; ties keep the first */
} named_op;

typedef struct wire_ops {
    BB_VEC(wire_op) v;
    named_op *by_name; /* sorted, only named ops */
    size_t n_named;
} wire_ops;

static int named_op_cmp(const void *a, const void *b)
{
    const named_op *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->op > y->op) - (x->op < y->op);
}

/* The wire op named name (the first of equal names), or SIZE_MAX. */
static size_t op_named(const wire_ops *w, const char *name)
{
    if (!name)
        return SIZE_MAX;
    size_t lo = 0, hi = w->n_named;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(w->by_name[mid].name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < w->n_named && strcmp(w->by_name[lo].name, name) == 0 ? w->by_name[lo].op
                                                                      : SIZE_MAX;
}

static int collect_wire(const bb_artifact *art, bb_arena *a, wire_ops *w)
{
    for (size_t t = 0; t < art->n_targets; t++) {
        const bb_function *fns[2] = {art->targets[t].fn, art->targets[t].bootstrap};
        for (int k = 0; k < 2; k++) {
            for (size_t i = 0; fns[k] && i < fns[k]->nodes.n; i++) {
                const bb_node *n = fns[k]->nodes.v[i];
                if (!bb_op_is_wire(n->domain, n->op_type))
                    continue;
                wire_op *op = BB_VEC_PUSH(a, &w->v);
                if (!op)
                    return BB_ENOMEM;
                *op = (wire_op){.end = {.target = t, .fn = fns[k], .index = i, .node = n}};
            }
        }
    }
    w->by_name = bb_arena_calloc(a, w->v.n + 1, sizeof *w->by_name);
    if (!w->by_name)
        return BB_ENOMEM;
    for (size_t i = 0; i < w->v.n; i++) {
        const char *name = w->v.v[i].end.node->name;
        if (name && *name)
            w->by_name[w->n_named++] = (named_op){name, i};
    }
    qsort(w->by_name, w->n_named, sizeof *w->by_name, named_op_cmp);
    return BB_OK;
}

typedef BB_VEC(bb_artifact_edge) edge_vec;

static bb_artifact_edge *add_edge(bb_arena *a, edge_vec *edges)
{
    bb_artifact_edge *e = BB_VEC_PUSH(a, edges);
    if (e)
        *e = (bb_artifact_edge){.send.target = SIZE_MAX, .recv.target = SIZE_MAX};
    return e;
}

static const char *meta_of(const bb_node *n, const char *key)
{
    return n ? bb_kv_get(&n->metadata, key) : NULL;
}

static void describe(bb_artifact_edge *e)
{
    const bb_node *s = e->send.node, *rv = e->recv.node;
    e->port = meta_of(s, BB_META_PORT);
    if (!e->port)
        e->port = meta_of(rv, BB_META_PORT);
    e->transport = meta_of(s, BB_META_WIRE_TRANSPORT);
    if (!e->transport)
        e->transport = meta_of(rv, BB_META_WIRE_TRANSPORT);
}

static bool is_send(const bb_node *n)
{
    return bb_op_is_wire_send(n->domain, n->op_type);
}

static bool is_recv(const bb_node *n)
{
    return bb_op_is_wire_recv(n->domain, n->op_type);
}

/* The edge of wire op i: a send with the receive its dest_site names (now
 * matched), or an unmatched receive with the send its src_site names. */
static int add_edge_of(bb_arena *a, edge_vec *edges, wire_ops *w, size_t i, bool send)
{
    bb_artifact_edge *e = add_edge(a, edges);
    if (!e)
        return BB_ENOMEM;
    const bb_node *n = w->v.v[i].end.node;
    bb_artifact_end *mine = send ? &e->send : &e->recv, *other = send ? &e->recv : &e->send;
    *mine = w->v.v[i].end;
    size_t k = op_named(w, meta_of(n, send ? BB_META_DEST_SITE : BB_META_SRC_SITE));
    if (k != SIZE_MAX && (send ? is_recv : is_send)(w->v.v[k].end.node)) {
        *other = w->v.v[k].end;
        w->v.v[k].matched |= send;
    }
    describe(e);
    return BB_OK;
}

int bb_artifact_read_edges(bb_artifact *art, bb_arena *a, bb_error *err)
{
    wire_ops w = {0};
    edge_vec edges = {0};
    int rc = collect_wire(art, a, &w);
    /* Sends, in target order; then the receives no send addresses. */
    for (size_t i = 0; rc == BB_OK && i < w.v.n; i++)
        if (is_send(w.v.v[i].end.node))
            rc = add_edge_of(a, &edges, &w, i, true);
    for (size_t i = 0; rc == BB_OK && i < w.v.n; i++)
        if (is_recv(w.v.v[i].end.node) && !w.v.v[i].matched)
            rc = add_edge_of(a, &edges, &w, i, false);
    if (rc != BB_OK)
        return bb_error_set(err, BB_ENOMEM, "wire edges: out of memory");
    art->edges = edges.v;
    art->n_edges = edges.n;
    return BB_OK;
}
