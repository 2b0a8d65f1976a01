/*
 * artifact.c — the read-only view of a compiled ModelProto that `bbc
 * targets` and `bbc dot` print: targets, their entry / bootstrap / called
 * functions, binding triples and wire edges (see artifact.h).
 */
#include <stdint.h>
#include <string.h>

#include "bb/meta.h"
#include "bbc/artifact.h"
#include "bbc/compiler_internal.h"
#include "bbc/util.h"

typedef struct reader {
    const bb_model *m;
    bb_arena *a;
    bbc_fn_index fns;
    bool *visited; /* per function, for one target's call walk */
    BB_VEC(const bb_function *) calls;
} reader;

static bool is_target(const bb_function *f)
{
    return bb_kv_get(&f->metadata, BB_META_PARTITION_ID) != NULL;
}

/* The model-local function node n calls, or SIZE_MAX. */
static size_t callee(const reader *r, const bb_node *n)
{
    return bbc_fn_index_callee(&r->fns, n);
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
    if (!f || depth > BBC_MAX_CALL_DEPTH)
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

static const bb_function *bootstrap_of(const reader *r, const bb_function *f)
{
    const char *want = bb_arena_sprintf(r->a, "%s%s", f->name, BB_BOOTSTRAP_SUFFIX);
    for (size_t i = 0; want && i < r->m->functions.n; i++) {
        const bb_function *g = r->m->functions.v[i];
        if (bbc_str_eq(g->name, want) && bbc_str_eq(g->domain, f->domain) &&
            bbc_is_bootstrap_fn(g))
            return g;
    }
    return NULL;
}

static int read_bindings(reader *r, bbc_artifact_target *t)
{
    size_t n = 0;
    const bb_kv_list *md = &r->m->metadata;
    for (size_t i = 0; i < md->n; i++)
        n += bb_meta_binding_key_slot(md->v[i].key, t->name) != NULL;
    t->bindings = bb_arena_calloc(r->a, n + 1, sizeof *t->bindings);
    if (!t->bindings)
        return BB_ENOMEM;
    for (size_t i = 0; i < md->n; i++) {
        const char *slot = bb_meta_binding_key_slot(md->v[i].key, t->name);
        if (!slot)
            continue;
        bbc_artifact_binding *b = &t->bindings[t->n_bindings++];
        b->slot = slot;
        b->triple = md->v[i].value ? md->v[i].value : "";
        bb_binding_triple tr;
        if (bb_binding_triple_parse(r->a, b->triple, &tr, NULL) == BB_OK) {
            b->role = tr.role;
            b->type_name = tr.type_name;
            b->slot_id = bb_arena_sprintf(r->a, "%u", tr.slot_id);
        }
    }
    return BB_OK;
}

static int read_targets(reader *r, bbc_artifact *out)
{
    const bb_model *m = r->m;
    size_t n = 0;
    bool stamped = false;
    for (size_t i = 0; i < m->functions.n; i++)
        stamped |= is_target(m->functions.v[i]);
    bool *take = bb_arena_calloc(r->a, m->functions.n + 1, sizeof *take);
    bool *called = bb_arena_calloc(r->a, m->functions.n + 1, sizeof *called);
    if (!take || !called)
        return BB_ENOMEM;
    if (!stamped)
        mark_called(r, called);
    for (size_t i = 0; i < m->functions.n; i++) {
        const bb_function *f = m->functions.v[i];
        take[i] = stamped ? is_target(f) : !bbc_is_bootstrap_fn(f) && !called[i];
        n += take[i];
    }
    out->targets = bb_arena_calloc(r->a, n + 1, sizeof *out->targets);
    if (!out->targets)
        return BB_ENOMEM;
    for (size_t i = 0; i < m->functions.n; i++) {
        if (!take[i])
            continue;
        const bb_function *f = m->functions.v[i];
        bbc_artifact_target *t = &out->targets[out->n_targets++];
        t->name = f->name ? f->name : "";
        t->partition_id = bb_kv_get(&f->metadata, BB_META_PARTITION_ID);
        t->fn = f;
        t->bootstrap = bootstrap_of(r, f);
        memset(r->visited, 0, m->functions.n * sizeof *r->visited);
        r->visited[i] = true;
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
        if ((rc = read_bindings(r, t)) != BB_OK)
            return rc;
    }
    return BB_OK;
}

/* ---- wire edges ------------------------------------------------------------------ */

typedef struct wire_op {
    bbc_artifact_end end;
    bool matched;
} wire_op;
typedef BB_VEC(wire_op) wire_op_vec;
typedef BB_VEC(bbc_artifact_edge) edge_vec;

static int collect_wire(reader *r, const bbc_artifact *out, wire_op_vec *ops, bbc_map *by_name)
{
    for (size_t t = 0; t < out->n_targets; t++) {
        const bb_function *fns[2] = {out->targets[t].fn, out->targets[t].bootstrap};
        for (int k = 0; k < 2; k++) {
            for (size_t i = 0; fns[k] && i < fns[k]->nodes.n; i++) {
                const bb_node *n = fns[k]->nodes.v[i];
                if (!bbc_is_wire(n))
                    continue;
                wire_op *w = BB_VEC_PUSH(r->a, ops);
                if (!w)
                    return BB_ENOMEM;
                w->end.target = t;
                w->end.fn = fns[k];
                w->end.index = i;
                w->end.node = n;
                size_t dummy;
                if (n->name && *n->name && !bbc_map_get(by_name, n->name, &dummy) &&
                    bbc_map_put(by_name, n->name, ops->n - 1) != BB_OK)
                    return BB_ENOMEM;
            }
        }
    }
    return BB_OK;
}

static bbc_artifact_edge *add_edge(reader *r, edge_vec *edges)
{
    bbc_artifact_edge *e = BB_VEC_PUSH(r->a, edges);
    if (e)
        e->send.target = e->recv.target = SIZE_MAX;
    return e;
}

static void describe(bbc_artifact_edge *e)
{
    const bb_node *s = e->send.node, *rv = e->recv.node;
    e->port = s ? bbc_meta(s, BB_META_PORT) : NULL;
    if (!e->port && rv)
        e->port = bbc_meta(rv, BB_META_PORT);
    e->transport = s ? bbc_meta(s, BB_META_WIRE_TRANSPORT) : NULL;
    if (!e->transport && rv)
        e->transport = bbc_meta(rv, BB_META_WIRE_TRANSPORT);
}

static int read_edges(reader *r, bbc_artifact *out)
{
    wire_op_vec ops = {0};
    edge_vec edges = {0};
    bbc_map by_name;
    if (bbc_map_init(&by_name, r->a, 64) != BB_OK)
        return BB_ENOMEM;
    int rc = collect_wire(r, out, &ops, &by_name);
    if (rc != BB_OK)
        return rc;
    /* Sends, in target order, each with the receive its dest_site names. */
    for (size_t i = 0; i < ops.n; i++) {
        const bb_node *n = ops.v[i].end.node;
        if (!bbc_is_wire_send(n))
            continue;
        bbc_artifact_edge *e = add_edge(r, &edges);
        if (!e)
            return BB_ENOMEM;
        e->send = ops.v[i].end;
        const char *site = bbc_meta(n, BB_META_DEST_SITE);
        size_t k;
        if (site && bbc_map_get(&by_name, site, &k) && bbc_is_wire_recv(ops.v[k].end.node)) {
            e->recv = ops.v[k].end;
            ops.v[k].matched = true;
        }
        describe(e);
    }
    /* Receives no send addresses: their src_site, or nothing. */
    for (size_t i = 0; i < ops.n; i++) {
        const bb_node *n = ops.v[i].end.node;
        if (!bbc_is_wire_recv(n) || ops.v[i].matched)
            continue;
        bbc_artifact_edge *e = add_edge(r, &edges);
        if (!e)
            return BB_ENOMEM;
        e->recv = ops.v[i].end;
        const char *site = bbc_meta(n, BB_META_SRC_SITE);
        size_t k;
        if (site && bbc_map_get(&by_name, site, &k) && bbc_is_wire_send(ops.v[k].end.node))
            e->send = ops.v[k].end;
        describe(e);
    }
    out->edges = edges.v;
    out->n_edges = edges.n;
    return BB_OK;
}

int bbc_artifact_read(const bb_model *m, const char *origin, bb_arena *a, bbc_artifact *out,
                      bb_error *err)
{
    memset(out, 0, sizeof *out);
    out->model = m;
    out->name = m->graph && m->graph->name && *m->graph->name ? m->graph->name : NULL;
    if (!bbc_str_eq(bb_kv_get(&m->metadata, BB_META_COMPILED), BB_COMPILED_PASSPORT))
        return bb_error_set(err, BB_EINVAL,
                            "%s: not a compiled model (no %s = \"%s\" passport); run 'bbc "
                            "compile' first",
                            origin, BB_META_COMPILED, BB_COMPILED_PASSPORT);
    reader r = {.m = m, .a = a};
    r.visited = bb_arena_calloc(a, m->functions.n + 1, sizeof *r.visited);
    if (!r.visited || bbc_fn_index_init(&r.fns, a, m) != BB_OK)
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", origin);
    int rc = read_targets(&r, out);
    if (rc == BB_OK)
        rc = read_edges(&r, out);
    if (rc != BB_OK)
        return bb_error_set(err, rc, "%s: out of memory", origin);
    if (out->n_targets == 0)
        return bb_error_set(err, BB_EINVAL, "%s: the compiled model has no partition function",
                            origin);
    return BB_OK;
}

bool bbc_artifact_is_gate(const bb_node *n)
{
    static const char *const GATES[] = {BB_OP_DEDUP_GATE_RX, BB_OP_PEER_HEALTH_GATE_RX,
                                        BB_OP_BACKOFF_GATE_RX, BB_OP_PEER_HEALTH_GATE_TX,
                                        BB_OP_BACKOFF_GATE_TX, BB_OP_DEADLINE_CHECK};
    if (!bbc_str_eq(n->domain, BB_DOMAIN_SYSCALL))
        return false;
    for (size_t i = 0; i < sizeof GATES / sizeof *GATES; i++)
        if (bbc_str_eq(n->op_type, GATES[i]))
            return true;
    return false;
}
