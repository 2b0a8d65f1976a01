/*
 * artifact.c — the one view of a compiled artifact (bb/artifact.h): the
 * passport, the targets with their bootstraps and parsed bindings, the
 * lookup a host asks a target by, and (on request) the calls and wire
 * edges the inspection tools draw.
 *
 * Workload: read once per install or inspection. The model is untrusted,
 * and a crafted one may have tens of thousands of targets, so nothing is
 * done per (target, function) or per (target, metadata entry) pair:
 * functions are found by (domain, name, overload), binding keys by target
 * name and wire ops by node name through sorted indexes (one sort each, a
 * binary search per lookup). The call walks of read_links are the one
 * per-target cost; their total work is capped (BB_ARTIFACT_MAX_WALK).
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

typedef struct fn_index {
    const bb_model *m;
    fn_key *keys; /* sorted */
    size_t n;
} fn_index;

static int cmp_domain_name(const fn_key *x, const fn_key *y)
{
    int c = strcmp(nz(x->domain), nz(y->domain));
    return c ? c : strcmp(nz(x->name), nz(y->name));
}

static int cmp_key(const fn_key *x, const fn_key *y)
{
    int c = cmp_domain_name(x, y);
    return c ? c : strcmp(nz(x->overload), nz(y->overload));
}

static int fn_key_cmp(const void *a, const void *b)
{
    const fn_key *x = a, *y = b;
    int c = cmp_key(x, y);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

static int fn_index_init(fn_index *ix, const bb_model *m, bb_arena *a)
{
    ix->m = m;
    ix->n = m->functions.n;
    ix->keys = bb_arena_calloc(a, ix->n + 1, sizeof *ix->keys);
    if (!ix->keys)
        return BB_ENOMEM;
    for (size_t i = 0; i < ix->n; i++) {
        const bb_function *f = m->functions.v[i];
        ix->keys[i] = (fn_key){f->domain, f->name, f->overload, i};
    }
    qsort(ix->keys, ix->n, sizeof *ix->keys, fn_key_cmp);
    return BB_OK;
}

/* The first key not below want by cmp. */
static size_t lower_bound(const fn_index *ix, const fn_key *want,
                          int (*cmp)(const fn_key *, const fn_key *))
{
    size_t lo = 0, hi = ix->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cmp(&ix->keys[mid], want) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The model-local function node n calls (the first of equal keys), or
 * SIZE_MAX. Reserved domains are never calls. */
static size_t callee(const fn_index *ix, const bb_node *n)
{
    if (!n->op_type || bb_opset_is_reserved(n->domain))
        return SIZE_MAX;
    fn_key want = {n->domain, n->op_type, n->overload, 0};
    size_t k = lower_bound(ix, &want, cmp_key);
    return k < ix->n && cmp_key(&ix->keys[k], &want) == 0 ? ix->keys[k].index : SIZE_MAX;
}

/* The first function (in model order) named name in domain whose
 * module_phase is absent or "bootstrap", or SIZE_MAX. */
static size_t find_bootstrap(const fn_index *ix, const char *domain, const char *name)
{
    fn_key want = {domain, name, NULL, 0};
    size_t best = SIZE_MAX;
    for (size_t k = lower_bound(ix, &want, cmp_domain_name);
         k < ix->n && cmp_domain_name(&ix->keys[k], &want) == 0; k++) {
        const bb_function *g = ix->m->functions.v[ix->keys[k].index];
        const char *phase = bb_kv_get(&g->metadata, BB_META_MODULE_PHASE);
        if ((!phase || strcmp(phase, BB_MODULE_PHASE_BOOTSTRAP) == 0) && ix->keys[k].index < best)
            best = ix->keys[k].index;
    }
    return best;
}

/* ---- targets ------------------------------------------------------------------------ */

/* "<name>__bootstrap", else "<class>__bootstrap" for a "<class>#<hash>". */
static int set_bootstrap(const fn_index *ix, bb_arena *a, bb_artifact_target *t)
{
    size_t lens[2] = {strlen(t->name), class_len(t->name)};
    t->bootstrap_index = SIZE_MAX;
    for (int k = 0; k < 2 && t->bootstrap_index == SIZE_MAX && lens[k]; k++) {
        const char *want = bb_arena_sprintf(a, "%.*s%s", (int)lens[k], t->name,
                                            BB_BOOTSTRAP_SUFFIX);
        if (!want)
            return BB_ENOMEM;
        t->bootstrap_index = find_bootstrap(ix, t->fn->domain, want);
    }
    t->bootstrap = t->bootstrap_index == SIZE_MAX ? NULL
                                                  : ix->m->functions.v[t->bootstrap_index];
    return BB_OK;
}

/* Which targets take the model's functions: the partitions, else the
 * uncalled non-bootstraps. */
static int choose_targets(const fn_index *ix, bb_arena *a, bool *take)
{
    const bb_model *m = ix->m;
    bool stamped = false;
    for (size_t i = 0; i < m->functions.n; i++)
        stamped |= bb_artifact_is_partition(m->functions.v[i]);
    bool *called = stamped ? NULL : bb_arena_calloc(a, m->functions.n + 1, sizeof *called);
    if (!stamped && !called)
        return BB_ENOMEM;
    for (size_t i = 0; !stamped && i < m->functions.n; i++) {
        const bb_function *f = m->functions.v[i];
        for (size_t j = 0; j < f->nodes.n; j++) {
            size_t c = callee(ix, f->nodes.v[j]);
            if (c != SIZE_MAX && c != i)
                called[c] = true;
        }
    }
    for (size_t i = 0; i < m->functions.n; i++) {
        const bb_function *f = m->functions.v[i];
        take[i] = stamped ? bb_artifact_is_partition(f) : !bb_artifact_is_bootstrap(f) && !called[i];
    }
    return BB_OK;
}

static int read_targets(const fn_index *ix, bb_arena *a, bb_artifact *out)
{
    const bb_model *m = ix->m;
    bool *take = bb_arena_calloc(a, m->functions.n + 1, sizeof *take);
    if (!take || choose_targets(ix, a, take) != BB_OK)
        return BB_ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < m->functions.n; i++)
        n += take[i];
    out->targets = bb_arena_calloc(a, n + 1, sizeof *out->targets);
    if (!out->targets)
        return BB_ENOMEM;
    for (size_t i = 0; i < m->functions.n; i++) {
        if (!take[i])
            continue;
        const bb_function *f = m->functions.v[i];
        bb_artifact_target *t = &out->targets[out->n_targets++];
        *t = (bb_artifact_target){.name = nz(f->name),
                                  .partition_id = bb_kv_get(&f->metadata, BB_META_PARTITION_ID),
                                  .fn_index = i,
                                  .fn = f};
        if (set_bootstrap(ix, a, t) != BB_OK)
            return BB_ENOMEM;
    }
    return BB_OK;
}

/* ---- bindings: each key to the targets it names ------------------------------------ */

/* A name a binding key may give a target: its name, or its class. */
typedef struct target_name {
    const char *s;
    size_t len;
    size_t target;
} target_name;

static int cmp_bytes(const char *x, size_t xl, const char *y, size_t yl)
{
    int c = memcmp(x, y, xl < yl ? xl : yl);
    return c ? c : (xl > yl) - (xl < yl);
}

static int target_name_cmp(const void *a, const void *b)
{
    const target_name *x = a, *y = b;
    int c = cmp_bytes(x->s, x->len, y->s, y->len);
    return c ? c : (x->target > y->target) - (x->target < y->target);
}

typedef struct binding_reader {
    const bb_artifact *art;
    target_name *names; /* sorted */
    size_t n_names;
    size_t *seen_key;   /* per target: 1 + the metadata entry last given to it */
} binding_reader;

/* Calls give(br, t, slot, entry, ctx) for every target key (entry `entry`)
 * names, once per target. */
static int for_each_named(binding_reader *br, const char *key, size_t entry,
                          int (*give)(binding_reader *, size_t, const char *, size_t, void *),
                          void *ctx)
{
    static const char prefix[] = BB_META_BINDING_PREFIX;
    size_t pl = sizeof prefix - 1;
    if (!key || strncmp(key, prefix, pl) != 0)
        return BB_OK;
    const char *rest = key + pl;
    for (const char *dot = strchr(rest, '.'); dot; dot = strchr(dot + 1, '.')) {
        size_t len = (size_t)(dot - rest);
        if (!len || !dot[1])
            continue;
        size_t lo = 0, hi = br->n_names;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (cmp_bytes(br->names[mid].s, br->names[mid].len, rest, len) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (; lo < br->n_names && cmp_bytes(br->names[lo].s, br->names[lo].len, rest, len) == 0;
             lo++) {
            size_t t = br->names[lo].target;
            if (br->seen_key[t] == entry + 1)
                continue;
            br->seen_key[t] = entry + 1;
            int rc = give(br, t, dot + 1, entry, ctx);
            if (rc != BB_OK)
                return rc;
        }
    }
    return BB_OK;
}

static int count_binding(binding_reader *br, size_t t, const char *slot, size_t entry, void *ctx)
{
    (void)slot, (void)entry, (void)ctx;
    br->art->targets[t].n_bindings++;
    return BB_OK;
}

static int fill_binding(binding_reader *br, size_t t, const char *slot, size_t entry, void *ctx)
{
    bb_arena *a = ctx;
    const bb_kv *kv = &br->art->model->metadata.v[entry];
    bb_artifact_target *tg = &br->art->targets[t];
    bb_artifact_binding *b = &tg->bindings[tg->n_bindings++];
    *b = (bb_artifact_binding){.key = kv->key, .slot = slot, .triple = nz(kv->value)};
    bb_error e;
    bb_error_clear(&e);
    int rc = bb_binding_triple_parse(a, kv->value, &b->parsed, &e);
    if (rc == BB_ENOMEM)
        return rc;
    if (rc != BB_OK && !(b->error = bb_arena_strdup(a, e.msg)))
        return BB_ENOMEM;
    return BB_OK;
}

/* Every binding key, in metadata order, to the targets it names: count,
 * then fill. */
static int read_bindings(bb_artifact *art, bb_arena *a)
{
    binding_reader br = {.art = art};
    br.names = bb_arena_calloc(a, 2 * art->n_targets + 1, sizeof *br.names);
    br.seen_key = bb_arena_calloc(a, art->n_targets + 1, sizeof *br.seen_key);
    if (!br.names || !br.seen_key)
        return BB_ENOMEM;
    for (size_t t = 0; t < art->n_targets; t++) {
        const char *name = art->targets[t].name;
        br.names[br.n_names++] = (target_name){name, strlen(name), t};
        if (class_len(name))
            br.names[br.n_names++] = (target_name){name, class_len(name), t};
    }
    qsort(br.names, br.n_names, sizeof *br.names, target_name_cmp);
    const bb_kv_list *md = &art->model->metadata;
    for (size_t i = 0; i < md->n; i++)
        for_each_named(&br, md->v[i].key, i, count_binding, NULL);
    for (size_t t = 0; t < art->n_targets; t++) {
        bb_artifact_target *tg = &art->targets[t];
        tg->bindings = bb_arena_calloc(a, tg->n_bindings + 1, sizeof *tg->bindings);
        if (!tg->bindings)
            return BB_ENOMEM;
        tg->n_bindings = 0;
        br.seen_key[t] = 0;
    }
    for (size_t i = 0; i < md->n; i++) {
        int rc = for_each_named(&br, md->v[i].key, i, fill_binding, a);
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
    fn_index ix;
    int rc = fn_index_init(&ix, m, a);
    if (rc == BB_OK)
        rc = read_targets(&ix, a, out);
    if (rc == BB_OK)
        rc = read_bindings(out, a);
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

/* ---- calls ------------------------------------------------------------------------ */

typedef struct walker {
    const fn_index *ix;
    bb_arena *a;
    size_t *stamp;  /* per function: 1 + the target whose walk met it */
    size_t target;
    size_t visits;  /* nodes looked at, all walks together */
    BB_VEC(const bb_function *) calls;
} walker;

static int walk_calls(walker *w, const bb_function *f, int depth)
{
    if (!f || depth > BB_ARTIFACT_MAX_CALL_DEPTH)
        return BB_OK;
    if ((w->visits += f->nodes.n) > BB_ARTIFACT_MAX_WALK)
        return BB_ELIMIT;
    for (size_t j = 0; j < f->nodes.n; j++) {
        size_t c = callee(w->ix, f->nodes.v[j]);
        if (c == SIZE_MAX || w->stamp[c] == w->target + 1)
            continue;
        w->stamp[c] = w->target + 1;
        const bb_function *g = w->ix->m->functions.v[c];
        const bb_function **slot = BB_VEC_PUSH(w->a, &w->calls);
        if (!slot)
            return BB_ENOMEM;
        *slot = g;
        int rc = walk_calls(w, g, depth + 1);
        if (rc != BB_OK)
            return rc;
    }
    return BB_OK;
}

static int read_calls(bb_artifact *art, walker *w)
{
    for (size_t t = 0; t < art->n_targets; t++) {
        bb_artifact_target *tg = &art->targets[t];
        w->target = t;
        w->stamp[tg->fn_index] = t + 1;
        w->calls.n = 0;
        int rc;
        if ((rc = walk_calls(w, tg->fn, 0)) != BB_OK ||
            (rc = walk_calls(w, tg->bootstrap, 0)) != BB_OK)
            return rc;
        tg->n_calls = w->calls.n;
        tg->calls = bb_arena_calloc(w->a, w->calls.n + 1, sizeof *tg->calls);
        if (!tg->calls)
            return BB_ENOMEM;
        for (size_t k = 0; k < w->calls.n; k++)
            tg->calls[k] = w->calls.v[k];
    }
    return BB_OK;
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

/* The wire ops of every target's entry and bootstrap, in target order (a
 * bootstrap two targets share is its first target's). */
static int collect_wire(const bb_artifact *art, bb_arena *a, wire_ops *w)
{
    bool *taken = bb_arena_calloc(a, art->model->functions.n + 1, sizeof *taken);
    if (!taken)
        return BB_ENOMEM;
    for (size_t t = 0; t < art->n_targets; t++) {
        const bb_artifact_target *tg = &art->targets[t];
        const bb_function *fns[2] = {tg->fn, tg->bootstrap};
        size_t idx[2] = {tg->fn_index, tg->bootstrap_index};
        for (int k = 0; k < 2; k++) {
            if (!fns[k] || taken[idx[k]])
                continue;
            taken[idx[k]] = true;
            for (size_t i = 0; i < fns[k]->nodes.n; i++) {
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

static const char *meta_of(const bb_node *n, const char *key)
{
    return n ? bb_kv_get(&n->metadata, key) : NULL;
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
    bb_artifact_edge *e = BB_VEC_PUSH(a, edges);
    if (!e)
        return BB_ENOMEM;
    *e = (bb_artifact_edge){.send.target = SIZE_MAX, .recv.target = SIZE_MAX};
    const bb_node *n = w->v.v[i].end.node;
    bb_artifact_end *mine = send ? &e->send : &e->recv, *other = send ? &e->recv : &e->send;
    *mine = w->v.v[i].end;
    size_t k = op_named(w, meta_of(n, send ? BB_META_DEST_SITE : BB_META_SRC_SITE));
    if (k != SIZE_MAX && (send ? is_recv : is_send)(w->v.v[k].end.node)) {
        *other = w->v.v[k].end;
        w->v.v[k].matched |= send;
    }
    const bb_node *s = e->send.node, *rv = e->recv.node;
    e->port = meta_of(s, BB_META_PORT) ? meta_of(s, BB_META_PORT) : meta_of(rv, BB_META_PORT);
    e->transport = meta_of(s, BB_META_WIRE_TRANSPORT) ? meta_of(s, BB_META_WIRE_TRANSPORT)
                                                      : meta_of(rv, BB_META_WIRE_TRANSPORT);
    return BB_OK;
}

static int read_edges(bb_artifact *art, bb_arena *a)
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
    art->edges = edges.v;
    art->n_edges = edges.n;
    return rc;
}

int bb_artifact_read_links(bb_artifact *art, bb_arena *a, bb_error *err)
{
    fn_index ix;
    walker w = {.ix = &ix, .a = a};
    int rc = fn_index_init(&ix, art->model, a);
    if (rc == BB_OK && !(w.stamp = bb_arena_calloc(a, art->model->functions.n + 1,
                                                   sizeof *w.stamp)))
        rc = BB_ENOMEM;
    if (rc == BB_OK)
        rc = read_calls(art, &w);
    if (rc == BB_ELIMIT)
        return bb_error_set(err, rc, "the targets' call graphs are larger than %d nodes",
                            BB_ARTIFACT_MAX_WALK);
    if (rc == BB_OK)
        rc = read_edges(art, a);
    if (rc != BB_OK)
        return bb_error_set(err, rc, "links: out of memory");
    return BB_OK;
}
