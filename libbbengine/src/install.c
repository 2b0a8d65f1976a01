/*
 * install.c — the runtime linker (ENGINE.md 3.1, 4.4; IR_AND_DSL.md 3, 7).
 *
 * bb_engine_install takes a compiled ModelProto and the host's targets and
 * resolves EVERYTHING the hot path needs, once:
 *   1. passport check, ODR dedupe of functions[] (identical bodies share,
 *      different bodies under one (domain, name, overload) conflict);
 *   2. targets, their bootstrap siblings and binding triples as the
 *      artifact view reads them (bb/artifact.h: exact function name, else
 *      the unique "<target>#<hash>");
 *   3. reachability over call sites (recursion is an error);
 *   4. binding triples "<role>|<TYPE_NAME>|<slot_id>" per target, deduped
 *      across targets (one component per slot, conflicts listed), generic
 *      slots checked bound, concrete slots bound from their construction
 *      attribute, types resolved through the registry, dependencies ordered;
 *   5. per graph: every value name -> dense site index, every node -> an op
 *      with its dispatch stamped (syscall fn / component + op_index /
 *      function call / unresolved), consumer lists, outputs that forward or
 *      surface as AppEvents, constants, routable wire ids;
 *   6. the IncompatibleRuntime pre-flight (missing ops listed per opset);
 *   7. component instances created dependencies-first.
 * A failure leaves the engine uninstalled, with the variant recorded.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/artifact.h"
#include "libbbengine/src/syscalls.h"

#define MAX_FUNCTIONS 65536
#define MAX_NESTING 256

typedef struct binding {
    const char *slot;
    const char *role;
    const char *type_name;
    uint32_t slot_id;
    bool has_slot_id;
    const char *contrib; /* "target=TYPE(role)" list for conflict messages */
    bool conflict;
    const bb_attr *construction;
} binding;

typedef struct missing_op {
    const char *domain, *op_type;
} missing_op;

struct bbe__install {
    bb_engine *e;
    bb_model *m;
    bb_arena *a;
    const bb_engine_registry *reg;
    bb_error *err;
    size_t n_fn;
    uint32_t *canon;   /* function -> canonical function (ODR) */
    int32_t *graph_of; /* canonical function -> graph */
    uint8_t *color;
    bbe__map fn_index;  /* key hash -> canonical function */
    BBE__ARR(uint32_t) order; /* graph index -> function */
    bb_artifact art;                     /* the view of m (bb/artifact.h) */
    const bb_artifact_target **target;   /* the view's target of each installed one */
    uint32_t *target_fn;                 /* its canonical entry function */
    const char **target_name;            /* as the host asked for it */
    int32_t *boot_fn;                    /* its canonical bootstrap, or -1 */
    uint32_t n_targets;
    BBE__ARR(binding) binds;
    bbe__graph *g; /* graph under construction */
    BBE__ARR(bbe__sema) semas;
    BBE__ARR(bbe__queue) queues;
    BBE__ARR(bbe__hold) holds;
    BBE__ARR(bbe__metric) metrics;
    BBE__ARR(missing_op) missing;
    BBE__ARR(uint32_t) lifecycle, intervals, pulses, events;
};

static int fail(bbe__install *ins, bb_install_error kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(bbe__install *ins, bb_install_error kind, const char *fmt, ...)
{
    char buf[BB_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    ins->e->install_err = kind;
    return bb_error_set(ins->err, BB_EINSTALL, "%s: %s", bb_install_error_name(kind), buf);
}

static const char *nz(const char *s) { return s ? s : ""; }
static const char *dom_norm(const char *d) { return !d || strcmp(d, "ai.onnx") == 0 ? "" : d; }

/* ---- helpers used by the syscall init functions ---------------------------------- */

bbe__opst *bbe__opst_new(bbe__install *ins, bbe__op *op)
{
    if (!op->st) {
        op->st = bb_arena_alloc(ins->a, sizeof *op->st);
        if (op->st)
            op->st->comp = BBE__NONE;
    }
    return op->st;
}

bb_engine *bbe__install_engine(bbe__install *ins) { return ins->e; }
bb_arena *bbe__install_arena(bbe__install *ins) { return ins->a; }

const char *bbe__install_fn_name(bbe__install *ins, const bbe__op *op)
{
    (void)op;
    return ins->g->name;
}

int bbe__node_malformed(bbe__install *ins, const bbe__op *op, bb_error *err, const char *fmt, ...)
{
    char buf[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    (void)err;
    return fail(ins, BB_INSTALL_MALFORMED_GRAPH, "function %s, node %s (%s::%s): %s", ins->g->name,
                op->label, op->domain[0] ? op->domain : "ai.onnx", op->op_type, buf);
}

int64_t bbe__attr_int(const bb_node *n, const char *name, int64_t dflt, bool *found)
{
    *found = false;
    for (size_t i = 0; i < n->attrs.n; i++) {
        const bb_attr *a = n->attrs.v[i];
        if (a->name && strcmp(a->name, name) == 0 && a->type == BB_ATTR_INT) {
            *found = true;
            return a->i;
        }
    }
    return dflt;
}

const char *bbe__attr_str(bbe__install *ins, const bb_node *n, const char *name)
{
    for (size_t i = 0; i < n->attrs.n; i++) {
        const bb_attr *a = n->attrs.v[i];
        if (a->name && strcmp(a->name, name) == 0 && a->type == BB_ATTR_STRING && a->s.len &&
            a->s.len < 4096)
            return bb_arena_strndup(ins->a, (const char *)a->s.data, a->s.len);
    }
    return NULL;
}

uint32_t bbe__install_sema(bbe__install *ins, const char *name, int64_t cap, bb_error *err)
{
    (void)err;
    for (size_t i = 0; i < ins->semas.n; i++) {
        if (strcmp(ins->semas.v[i].name, name) == 0) {
            if (cap > 0 && ins->semas.v[i].cap == 0)
                ins->semas.v[i].cap = cap;
            return (uint32_t)i;
        }
    }
    bbe__sema s = {.name = name, .cap = cap};
    return BBE__ARR_PUSH(&ins->semas, s) ? BBE__NONE : (uint32_t)ins->semas.n - 1;
}

uint32_t bbe__install_queue(bbe__install *ins, const char *name)
{
    for (size_t i = 0; i < ins->queues.n; i++)
        if (strcmp(ins->queues.v[i].name, name) == 0)
            return (uint32_t)i;
    bbe__queue q = {.name = name};
    return BBE__ARR_PUSH(&ins->queues, q) ? BBE__NONE : (uint32_t)ins->queues.n - 1;
}

uint32_t bbe__install_hold(bbe__install *ins, const char *name)
{
    for (size_t i = 0; i < ins->holds.n; i++)
        if (strcmp(ins->holds.v[i].name, name) == 0)
            return (uint32_t)i;
    bbe__hold h = {.name = name};
    return BBE__ARR_PUSH(&ins->holds, h) ? BBE__NONE : (uint32_t)ins->holds.n - 1;
}

uint32_t bbe__install_metric(bbe__install *ins, const char *name)
{
    for (size_t i = 0; i < ins->metrics.n; i++)
        if (strcmp(ins->metrics.v[i].name, name) == 0)
            return (uint32_t)i;
    bbe__metric m = {.name = name};
    return BBE__ARR_PUSH(&ins->metrics, m) ? BBE__NONE : (uint32_t)ins->metrics.n - 1;
}

uint32_t bbe__install_comp_by_slot_id(bbe__install *ins, uint32_t slot_id)
{
    for (uint32_t i = 0; i < ins->e->n_comps; i++)
        if (ins->e->comps[i].has_slot_id && ins->e->comps[i].slot_id == slot_id)
            return i;
    return BBE__NONE;
}

int bbe__install_set_out_type(bbe__install *ins, bbe__op *op, uint32_t k, const bb_type_node *t)
{
    if (k < op->n_out && op->out[k] != BBE__NONE)
        ins->g->site_type[op->out[k]] = t;
    return 0;
}

/* ---- functions: keys, ODR, lookup ------------------------------------------------------ */

static uint64_t fn_key(const char *domain, const char *name, const char *overload)
{
    uint64_t h = bb_fnv1a64(dom_norm(domain), strlen(dom_norm(domain)));
    h = bbe__mix64(h ^ bb_fnv1a64(nz(name), strlen(nz(name))));
    return bbe__mix64(h ^ bb_fnv1a64(nz(overload), strlen(nz(overload))));
}

static bool same_key(const bb_function *f, const char *domain, const char *name, const char *overload)
{
    return strcmp(dom_norm(f->domain), dom_norm(domain)) == 0 && strcmp(nz(f->name), nz(name)) == 0 &&
           strcmp(nz(f->overload), nz(overload)) == 0;
}

static bool strs_equal(const bb_str_list *a, const bb_str_list *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(nz(a->v[i]), nz(b->v[i])) != 0)
            return false;
    return true;
}

static bool bytes_equal(const bb_bytes *a, const bb_bytes *b)
{
    return a->len == b->len && (!a->len || memcmp(a->data, b->data, a->len) == 0);
}

static bool attrs_equal(const bb_attr_list *a, const bb_attr_list *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++) {
        const bb_attr *x = a->v[i], *y = b->v[i];
        if (strcmp(nz(x->name), nz(y->name)) != 0 || x->type != y->type || x->i != y->i ||
            x->f != y->f || !bytes_equal(&x->s, &y->s) || x->ints.n != y->ints.n ||
            x->floats.n != y->floats.n)
            return false;
        if (x->ints.n && memcmp(x->ints.v, y->ints.v, x->ints.n * sizeof *x->ints.v) != 0)
            return false;
        if (x->floats.n && memcmp(x->floats.v, y->floats.v, x->floats.n * sizeof *x->floats.v) != 0)
            return false;
        if ((x->t == NULL) != (y->t == NULL) ||
            (x->t && (x->t->data_type != y->t->data_type || !bytes_equal(&x->t->raw_data, &y->t->raw_data))))
            return false;
    }
    return true;
}

static bool bodies_equal(const bb_function *a, const bb_function *b)
{
    if (!strs_equal(&a->inputs, &b->inputs) || !strs_equal(&a->outputs, &b->outputs) ||
        !strs_equal(&a->attributes, &b->attributes) || a->nodes.n != b->nodes.n)
        return false;
    for (size_t i = 0; i < a->nodes.n; i++) {
        const bb_node *x = a->nodes.v[i], *y = b->nodes.v[i];
        if (strcmp(nz(x->op_type), nz(y->op_type)) != 0 ||
            strcmp(dom_norm(x->domain), dom_norm(y->domain)) != 0 ||
            strcmp(nz(x->overload), nz(y->overload)) != 0 || !strs_equal(&x->inputs, &y->inputs) ||
            !strs_equal(&x->outputs, &y->outputs) || !attrs_equal(&x->attrs, &y->attrs))
            return false;
    }
    return true;
}

static int index_functions(bbe__install *ins)
{
    bb_model *m = ins->m;
    ins->n_fn = m->functions.n;
    if (ins->n_fn > MAX_FUNCTIONS)
        return fail(ins, BB_INSTALL_MALFORMED_GRAPH, "%zu functions (max %d)", ins->n_fn, MAX_FUNCTIONS);
    ins->canon = bb_arena_calloc(ins->a, ins->n_fn + 1, sizeof *ins->canon);
    ins->graph_of = bb_arena_calloc(ins->a, ins->n_fn + 1, sizeof *ins->graph_of);
    ins->color = bb_arena_calloc(ins->a, ins->n_fn + 1, 1);
    if (!ins->canon || !ins->graph_of || !ins->color)
        return BB_ENOMEM;
    for (size_t i = 0; i < ins->n_fn; i++) {
        const bb_function *f = m->functions.v[i];
        ins->graph_of[i] = -1;
        ins->canon[i] = (uint32_t)i;
        if (!f->name || !f->name[0])
            return fail(ins, BB_INSTALL_MALFORMED_GRAPH, "function %zu has no name", i);
        uint64_t key = fn_key(f->domain, f->name, f->overload), prev;
        if (bbe__map_get(&ins->fn_index, key, &prev)) {
            const bb_function *p = m->functions.v[prev];
            if (!same_key(p, f->domain, f->name, f->overload)) {
                /* a 64-bit key collision: fall back to a scan at lookup time */
                continue;
            }
            if (!bodies_equal(p, f))
                return fail(ins, BB_INSTALL_FUNCTION_DEFINITION_CONFLICT,
                            "two different bodies for %s::%s%s%s",
                            f->domain && f->domain[0] ? f->domain : "ai.onnx", f->name,
                            f->overload && f->overload[0] ? "#" : "", nz(f->overload));
            ins->canon[i] = (uint32_t)prev;
        } else if (bbe__map_put(&ins->fn_index, key, i)) {
            return BB_ENOMEM;
        }
    }
    return 0;
}

/* Canonical function called by node, or -1. */
static int32_t callee_of(bbe__install *ins, const bb_node *n)
{
    if (bbe__domain_is_framework(n->domain) || !n->op_type)
        return -1;
    uint64_t v;
    if (bbe__map_get(&ins->fn_index, fn_key(n->domain, n->op_type, n->overload), &v) &&
        same_key(ins->m->functions.v[v], n->domain, n->op_type, n->overload))
        return (int32_t)v;
    for (size_t i = 0; i < ins->n_fn; i++) /* collision fallback (never in practice) */
        if (ins->canon[i] == i && same_key(ins->m->functions.v[i], n->domain, n->op_type, n->overload))
            return (int32_t)i;
    return -1;
}

static int add_graph(bbe__install *ins, uint32_t fn)
{
    fn = ins->canon[fn];
    if (ins->graph_of[fn] >= 0)
        return 0;
    ins->graph_of[fn] = (int32_t)ins->order.n;
    return BBE__ARR_PUSH(&ins->order, fn);
}

/* DFS over call sites: discover callees, reject recursion. */
static int visit(bbe__install *ins, uint32_t fn, uint32_t depth, const char *path)
{
    const bb_function *f = ins->m->functions.v[fn];
    if (depth > MAX_NESTING)
        return fail(ins, BB_INSTALL_MALFORMED_GRAPH, "function calls nest deeper than %d", MAX_NESTING);
    ins->color[fn] = 1;
    for (size_t k = 0; k < f->nodes.n; k++) {
        int32_t c = callee_of(ins, f->nodes.v[k]);
        if (c < 0)
            continue;
        if (ins->color[c] == 1)
            return fail(ins, BB_INSTALL_RECURSIVE_FUNCTION_CALL, "%s -> %s calls back into %s", path,
                        ins->m->functions.v[c]->name, ins->m->functions.v[c]->name);
        if (add_graph(ins, (uint32_t)c))
            return BB_ENOMEM;
        if (ins->color[c] == 0) {
            char *p = bb_arena_sprintf(ins->a, "%s -> %s", path, ins->m->functions.v[c]->name);
            int rc = visit(ins, (uint32_t)c, depth + 1, p ? p : "");
            if (rc)
                return rc;
        }
    }
    ins->color[fn] = 2;
    return 0;
}

/* The view's target a host name asks for (bb_artifact_find_target); when
 * the view could not be read (a model with no target), every name is
 * unknown. */
static int find_target(bbe__install *ins, const char *name, int read_rc, const bb_error *read_err,
                       const bb_artifact_target **out)
{
    if (read_rc == BB_ENOMEM)
        return BB_ENOMEM;
    if (read_rc != BB_OK)
        return fail(ins, BB_INSTALL_UNKNOWN_TARGET, "'%s': %s", name, read_err->msg);
    bb_error err;
    bb_error_clear(&err);
    int rc = bb_artifact_find_target(&ins->art, name, out, &err);
    if (rc == BB_OK || rc == BB_ENOMEM)
        return rc;
    return fail(ins, rc == BB_EINVAL ? BB_INSTALL_AMBIGUOUS_TARGET : BB_INSTALL_UNKNOWN_TARGET,
                "%s", err.msg);
}

static int resolve_targets(bbe__install *ins, const char *const *targets, size_t n)
{
    bb_error read_err;
    bb_error_clear(&read_err);
    int read_rc = bb_artifact_read(ins->m, "the model", ins->a, &ins->art, &read_err);
    ins->target = bb_arena_calloc(ins->a, n, sizeof *ins->target);
    ins->target_fn = bb_arena_calloc(ins->a, n, sizeof *ins->target_fn);
    ins->target_name = bb_arena_calloc(ins->a, n, sizeof *ins->target_name);
    ins->boot_fn = bb_arena_calloc(ins->a, n, sizeof *ins->boot_fn);
    if (!ins->target || !ins->target_fn || !ins->target_name || !ins->boot_fn)
        return BB_ENOMEM;
    for (size_t t = 0; t < n; t++) {
        const char *name = targets[t];
        if (!name || !name[0])
            return fail(ins, BB_INSTALL_UNKNOWN_TARGET, "target %zu is empty", t);
        const bb_artifact_target *at = NULL;
        int rc = find_target(ins, name, read_rc, &read_err, &at);
        if (rc)
            return rc;
        uint32_t found = ins->canon[at->fn_index];
        bool dup = false;
        for (uint32_t k = 0; k < ins->n_targets; k++)
            dup |= ins->target_fn[k] == found;
        if (dup)
            continue;
        uint32_t ti = ins->n_targets++;
        ins->target[ti] = at;
        ins->target_fn[ti] = found;
        ins->target_name[ti] = bb_arena_strdup(ins->a, name);
        ins->boot_fn[ti] = at->bootstrap ? (int32_t)ins->canon[at->bootstrap_index] : -1;
        if (!ins->target_name[ti])
            return BB_ENOMEM;
    }
    for (uint32_t t = 0; t < ins->n_targets; t++)
        if (add_graph(ins, ins->target_fn[t]))
            return BB_ENOMEM;
    for (uint32_t t = 0; t < ins->n_targets; t++)
        if (ins->boot_fn[t] >= 0 && add_graph(ins, (uint32_t)ins->boot_fn[t]))
            return BB_ENOMEM;
    size_t roots = ins->order.n;
    for (size_t i = 0; i < roots; i++) {
        uint32_t fn = ins->order.v[i];
        if (ins->color[fn] == 0) {
            int rc = visit(ins, fn, 0, ins->m->functions.v[fn]->name);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* ---- bindings ------------------------------------------------------------------------------ */

static binding *find_binding(bbe__install *ins, const char *slot)
{
    for (size_t i = 0; i < ins->binds.n; i++)
        if (strcmp(ins->binds.v[i].slot, slot) == 0)
            return &ins->binds.v[i];
    return NULL;
}

/* One binding of the installed target t (its triple parsed by the view). */
static int add_binding(bbe__install *ins, uint32_t t, const bb_artifact_binding *ab)
{
    if (ab->error)
        return fail(ins, BB_INSTALL_MALFORMED_BINDING, "%s: %s", ab->key, ab->error);
    binding b = {.slot = ab->slot,
                 .role = ab->parsed.role,
                 .type_name = ab->parsed.type_name,
                 .slot_id = ab->parsed.slot_id,
                 .has_slot_id = true};
    binding *have = find_binding(ins, b.slot);
    const char *me = bb_arena_sprintf(ins->a, "%s binds %s|%s", ins->target_name[t], b.role,
                                      b.type_name);
    if (!me)
        return BB_ENOMEM;
    if (!have) {
        b.contrib = me;
        return BBE__ARR_PUSH(&ins->binds, b);
    }
    if (strcmp(have->type_name, b.type_name) != 0 || bb_role_parse(have->role) != bb_role_parse(b.role))
        have->conflict = true;
    have->contrib = bb_arena_sprintf(ins->a, "%s; %s", have->contrib, me);
    return have->contrib ? 0 : BB_ENOMEM;
}

static int read_bindings(bbe__install *ins)
{
    for (uint32_t t = 0; t < ins->n_targets; t++) {
        for (size_t i = 0; i < ins->target[t]->n_bindings; i++) {
            int rc = add_binding(ins, t, &ins->target[t]->bindings[i]);
            if (rc)
                return rc;
        }
    }
    for (size_t i = 0; i < ins->binds.n; i++)
        if (ins->binds.v[i].conflict)
            return fail(ins, BB_INSTALL_SLOT_BINDING_CONFLICT, "slot '%s': %s", ins->binds.v[i].slot,
                        ins->binds.v[i].contrib);
    /* generic slots must be bound; concrete slots carry their construction */
    for (size_t gi = 0; gi < ins->order.n; gi++) {
        const bb_function *f = ins->m->functions.v[ins->order.v[gi]];
        for (size_t k = 0; k < f->attributes.n; k++) {
            const char *slot = f->attributes.v[k];
            if (slot && !find_binding(ins, slot))
                return fail(ins, BB_INSTALL_UNBOUND_GENERIC_SLOT,
                            "slot '%s' of function %s has no binding", slot, f->name);
        }
        for (size_t k = 0; k < f->attribute_protos.n; k++) {
            const bb_attr *a = f->attribute_protos.v[k];
            if (!a->name)
                continue;
            binding *b = find_binding(ins, a->name);
            if (b) {
                if (!b->construction)
                    b->construction = a;
                continue;
            }
            char *mk = bb_arena_sprintf(ins->a, "%s%s", BB_META_SLOT_CONCRETE_TYPE_PREFIX, a->name);
            const char *tn = mk ? bb_kv_get(&f->metadata, mk) : NULL;
            if (!tn)
                continue; /* an ordinary defaulted attribute, not a component slot */
            binding nb = {.slot = a->name, .role = "", .type_name = tn, .construction = a,
                          .contrib = f->name};
            if (BBE__ARR_PUSH(&ins->binds, nb))
                return BB_ENOMEM;
        }
    }
    return 0;
}

static int make_components(bbe__install *ins)
{
    bb_engine *e = ins->e;
    size_t n = ins->binds.n;
    e->comps = bb_arena_calloc(ins->a, n ? n : 1, sizeof *e->comps);
    e->comp_order = bb_arena_calloc(ins->a, n ? n : 1, sizeof *e->comp_order);
    if (!e->comps || !e->comp_order)
        return BB_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        binding *b = &ins->binds.v[i];
        const bb_component_type *t =
            ins->reg ? bb_type_source_find(&ins->reg->types, b->type_name) : NULL;
        if (!t)
            return fail(ins, BB_INSTALL_UNREGISTERED_CONCRETE_TYPE,
                        "type '%s' bound at slot '%s' is not registered", b->type_name, b->slot);
        if (!t->create || !t->destroy || !t->dispatch)
            return fail(ins, BB_INSTALL_UNREGISTERED_CONCRETE_TYPE,
                        "type '%s' lacks create/destroy/dispatch", b->type_name);
        bb_role want = b->role[0] ? bb_role_parse(b->role) : t->role;
        if (b->role[0] && want == BB_ROLE_NONE)
            return fail(ins, BB_INSTALL_MALFORMED_BINDING, "slot '%s': unknown role '%s'", b->slot,
                        b->role);
        if (t->role != want)
            return fail(ins, BB_INSTALL_ROLE_MISMATCH, "slot '%s' is bound as %s but %s is a %s",
                        b->slot, bb_role_name(want), b->type_name, bb_role_name(t->role));
        bbe__comp *c = &e->comps[i];
        c->slot = b->slot;
        c->type = t;
        c->role = t->role;
        c->slot_id = b->slot_id;
        c->has_slot_id = b->has_slot_id;
        c->construction = b->construction;
        e->n_comps++;
    }
    /* dependencies, then a creation order with dependencies first */
    for (uint32_t i = 0; i < e->n_comps; i++) {
        bbe__comp *c = &e->comps[i];
        if (!c->type->n_deps)
            continue;
        c->deps = bb_arena_calloc(ins->a, c->type->n_deps, sizeof *c->deps);
        if (!c->deps)
            return BB_ENOMEM;
        for (uint32_t k = 0; k < c->type->n_deps; k++) {
            const bb_dependency_decl *d = &c->type->deps[k];
            uint32_t j;
            for (j = 0; j < e->n_comps; j++)
                if (d->slot && strcmp(e->comps[j].slot, d->slot) == 0)
                    break;
            if (j == e->n_comps)
                return fail(ins, BB_INSTALL_UNBOUND_DEPENDENCY,
                            "%s at slot '%s' depends on a %s at slot '%s', which is not bound",
                            c->type->type_name, c->slot, bb_role_name(d->role), nz(d->slot));
            if (d->role != BB_ROLE_NONE && e->comps[j].role != d->role)
                return fail(ins, BB_INSTALL_ROLE_MISMATCH,
                            "%s at slot '%s' wants a %s at slot '%s', found a %s", c->type->type_name,
                            c->slot, bb_role_name(d->role), d->slot, bb_role_name(e->comps[j].role));
            c->deps[k] = j;
        }
    }
    uint8_t *mark = bb_arena_calloc(ins->a, e->n_comps ? e->n_comps : 1, 1);
    if (!mark)
        return BB_ENOMEM;
    uint32_t placed = 0;
    while (placed < e->n_comps) {
        bool progress = false;
        for (uint32_t i = 0; i < e->n_comps; i++) {
            if (mark[i])
                continue;
            bool ready = true;
            for (uint32_t k = 0; k < e->comps[i].type->n_deps && ready; k++)
                ready = mark[e->comps[i].deps[k]] || e->comps[i].deps[k] == i;
            if (ready) {
                mark[i] = 1;
                e->comp_order[placed++] = i;
                progress = true;
            }
        }
        if (!progress)
            return fail(ins, BB_INSTALL_UNBOUND_DEPENDENCY, "dependency cycle among component slots");
    }
    return 0;
}

/* ---- graphs ---------------------------------------------------------------------------------- */

typedef struct site_tab {
    const char **keys;
    uint32_t *vals;
    size_t cap;
    BBE__ARR(const char *) names;
} site_tab;

static int tab_init(site_tab *t, size_t expect)
{
    size_t cap = 16;
    while (cap < expect * 2)
        cap *= 2;
    t->cap = cap;
    t->keys = calloc(cap, sizeof *t->keys);
    t->vals = calloc(cap, sizeof *t->vals);
    return t->keys && t->vals ? 0 : BB_ENOMEM;
}

static void tab_free(site_tab *t)
{
    free(t->keys);
    free(t->vals);
    BBE__ARR_FREE(&t->names);
}

static uint32_t tab_find(const site_tab *t, const char *name)
{
    for (size_t i = (size_t)bb_fnv1a64(name, strlen(name)) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        if (!t->keys[i])
            return BBE__NONE;
        if (strcmp(t->keys[i], name) == 0)
            return t->vals[i];
    }
}

static uint32_t tab_add(site_tab *t, const char *name)
{
    size_t i = (size_t)bb_fnv1a64(name, strlen(name)) & (t->cap - 1);
    for (;; i = (i + 1) & (t->cap - 1)) {
        if (!t->keys[i])
            break;
        if (strcmp(t->keys[i], name) == 0)
            return t->vals[i];
    }
    uint32_t idx = (uint32_t)t->names.n;
    if (BBE__ARR_PUSH(&t->names, name))
        return BBE__NONE;
    t->keys[i] = name;
    t->vals[i] = idx;
    return idx;
}

static int add_missing(bbe__install *ins, const char *domain, const char *op_type)
{
    for (size_t i = 0; i < ins->missing.n; i++)
        if (strcmp(ins->missing.v[i].domain, domain) == 0 && strcmp(ins->missing.v[i].op_type, op_type) == 0)
            return 0;
    return BBE__ARR_PUSH(&ins->missing, ((missing_op){domain, op_type}));
}

static uint32_t comp_by_slot(const bb_engine *e, const char *slot)
{
    for (uint32_t i = 0; i < e->n_comps; i++)
        if (strcmp(e->comps[i].slot, slot) == 0)
            return i;
    return BBE__NONE;
}

static bool type_serves(const bb_component_type *t, const char *domain)
{
    for (uint32_t s = 0; s < t->n_opsets; s++)
        if (strcmp(dom_norm(t->opsets[s].domain), domain) == 0)
            return true;
    return false;
}

/* The component a role / component op routes to (BBE__NONE: nobody). */
static int component_for(bbe__install *ins, bbe__op *op, uint32_t *out)
{
    bb_engine *e = ins->e;
    const bb_node *n = op->node;
    const char *dom = dom_norm(n->domain);
    const char *v;
    *out = BBE__NONE;
    if ((v = bb_kv_get(&n->metadata, BB_META_SLOT_ID))) {
        char *end;
        unsigned long long id = strtoull(v, &end, 10);
        if (*end || !*v || id > UINT32_MAX)
            return bbe__node_malformed(ins, op, NULL, "bad %s '%s'", BB_META_SLOT_ID, v);
        *out = bbe__install_comp_by_slot_id(ins, (uint32_t)id);
        if (*out == BBE__NONE)
            return fail(ins, BB_INSTALL_UNBOUND_GENERIC_SLOT,
                        "node %s of %s references slot_id %s, which no binding carries", op->label,
                        ins->g->name, v);
        return 0;
    }
    if ((v = bb_kv_get(&n->metadata, BB_META_SLOT))) {
        *out = comp_by_slot(e, v);
        if (*out == BBE__NONE)
            return fail(ins, BB_INSTALL_UNBOUND_GENERIC_SLOT, "node %s of %s uses slot '%s', which is not bound",
                        op->label, ins->g->name, v);
        return 0;
    }
    if ((v = bb_kv_get(&n->metadata, BB_META_CONCRETE_TYPE))) {
        uint32_t count = 0;
        for (uint32_t i = 0; i < e->n_comps; i++)
            if (strcmp(e->comps[i].type->type_name, v) == 0 && count++ == 0)
                *out = i;
        if (!count)
            return fail(ins, BB_INSTALL_UNREGISTERED_CONCRETE_TYPE,
                        "node %s of %s was recorded on %s, which no slot binds", op->label,
                        ins->g->name, v);
        if (count > 1)
            return bbe__node_malformed(ins, op, NULL, "%u slots bind %s: add %s metadata", count, v,
                                      BB_META_SLOT);
        return 0;
    }
    uint32_t count = 0, backends = 0, backend = BBE__NONE;
    for (uint32_t i = 0; i < e->n_comps; i++) {
        if (!type_serves(e->comps[i].type, dom))
            continue;
        if (count++ == 0)
            *out = i;
        if (e->comps[i].role == BB_ROLE_BACKEND && backends++ == 0)
            backend = i;
    }
    if (count > 1 && !dom[0] && backends == 1)
        *out = backend;
    else if (count > 1)
        return bbe__node_malformed(ins, op, NULL, "%u components serve domain '%s': add %s metadata",
                                  count, dom[0] ? dom : "ai.onnx", BB_META_SLOT);
    if (*out == BBE__NONE && !dom[0]) { /* ai.onnx with no declaring backend: the backend */
        for (uint32_t i = 0; i < e->n_comps; i++)
            if (e->comps[i].role == BB_ROLE_BACKEND && backends++ == 0)
                *out = i;
        if (backends > 1)
            *out = BBE__NONE;
    }
    return 0;
}

static int classify(bbe__install *ins, bbe__op *op, uint32_t opi)
{
    bb_engine *e = ins->e;
    bbe__graph *g = ins->g;
    const bb_node *n = op->node;
    const char *dom = dom_norm(n->domain);
    bool found;
    int64_t dl = bbe__attr_int(n, BB_ATTR_NAME_DEADLINE_NS, 0, &found);
    op->deadline_ns = dl > 0 ? (uint64_t)dl : 0;
    op->disp = BBE__DISP_UNRESOLVED;
    op->comp = BBE__NONE;
    op->ready = BBE__READY_ALL;
    if (bbe__domain_is_framework(dom)) {
        const bbe__syscall_def *d = bbe__syscall_find(dom, op->op_type);
        if (!d)
            return add_missing(ins, op->domain, op->op_type);
        if (op->n_in < d->min_in || (d->max_in >= 0 && op->n_in > d->max_in) ||
            op->n_out < d->min_out || (d->max_out >= 0 && op->n_out > d->max_out))
            return bbe__node_malformed(ins, op, NULL, "%u inputs / %u outputs (expects %d..%d / %d..%d)",
                                      op->n_in, op->n_out, d->min_in, d->max_in, d->min_out, d->max_out);
        op->fn = d->fn;
        op->disp = d->is_const ? BBE__DISP_CONST : BBE__DISP_SYSCALL;
        op->ready = d->ready;
        op->flags = d->flags;
        if (d->out_type)
            for (uint32_t k = 0; k < op->n_out; k++)
                if (op->out[k] != BBE__NONE && g->site_type[op->out[k]] == &BB_TYPE_ANY)
                    g->site_type[op->out[k]] = d->out_type;
        if (d->init) {
            int rc = d->init(ins, op, ins->err);
            if (rc)
                return rc;
        }
        const char *t = op->op_type;
        int rc = 0;
        if (strcmp(t, "Interval") == 0)
            rc = BBE__ARR_PUSH(&ins->intervals, opi);
        else if (strcmp(t, "LifecyclePhase") == 0)
            rc = BBE__ARR_PUSH(&ins->lifecycle, opi);
        else if (strcmp(t, "Pulse") == 0)
            rc = BBE__ARR_PUSH(&ins->pulses, opi);
        else if (strcmp(t, "EventSource") == 0) {
            rc = BBE__ARR_PUSH(&ins->events, opi);
            if (op->st->i < 64)
                e->bus_subscribed |= 1ULL << op->st->i;
        } else if (strcmp(dom, BB_DOMAIN_WIRE) == 0 && (strcmp(t, "Recv") == 0 || strcmp(t, "RecvReq") == 0)) {
            if (bbe__map_get(&e->recv_ops, op->st->wire_site, NULL))
                return bbe__node_malformed(ins, op, NULL, "two receivers share wire site %llu",
                                          (unsigned long long)op->st->wire_site);
            rc = bbe__map_put(&e->recv_ops, op->st->wire_site, opi);
        }
        return rc;
    }
    int32_t callee = callee_of(ins, n);
    if (callee >= 0) {
        const bb_function *f = ins->m->functions.v[callee];
        if (op->n_in > f->inputs.n || op->n_out > f->outputs.n)
            return bbe__node_malformed(ins, op, NULL, "call passes %u inputs / %u outputs to %s (%zu / %zu)",
                                      op->n_in, op->n_out, f->name, f->inputs.n, f->outputs.n);
        op->disp = BBE__DISP_CALL;
        op->comp = (uint32_t)ins->graph_of[callee];
        return 0;
    }
    uint32_t c;
    int rc = component_for(ins, op, &c);
    if (rc)
        return rc;
    if (c == BBE__NONE)
        return 0; /* Unresolved: fails when invoked */
    const bb_component_type *t = e->comps[c].type;
    uint32_t idx = 0;
    const bb_op_decl *decl = bb_component_type_find_op(t, dom, op->op_type, &idx);
    if (!decl && strncmp(dom, BB_DOMAIN_ROLE_PREFIX, sizeof BB_DOMAIN_ROLE_PREFIX - 1) == 0) {
        for (uint32_t s = 0; s < t->n_opsets && !decl; s++)
            decl = bb_component_type_find_op(t, t->opsets[s].domain, op->op_type, &idx);
    }
    if (!decl)
        return add_missing(ins, op->domain, op->op_type);
    op->disp = BBE__DISP_ATOMIC;
    op->comp = c;
    op->op_index = idx;
    for (uint32_t k = 0; k < op->n_out && k < decl->n_outputs; k++)
        if (op->out[k] != BBE__NONE && g->site_type[op->out[k]] == &BB_TYPE_ANY && decl->outputs[k].type)
            g->site_type[op->out[k]] = decl->outputs[k].type;
    return 0;
}


/* Union-find root with path halving. */
static uint32_t uf_root(uint32_t *parent, uint32_t x)
{
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

/* For each event source of g, the zero-input ops weakly connected to it
 * (through non-constant sites): an execution that source starts pushes them,
 * as invoke pushes all of g's sources. Ops in unrelated parts of the graph
 * (another Interval's branch, a request handler) do not run. */
static int companion_sources(bbe__install *ins, bbe__graph *g, const uint8_t *is_const)
{
    bb_engine *e = ins->e;
    uint32_t nops = g->op_end - g->op_begin, n = nops + g->n_sites;
    if (!g->n_sources)
        return BB_OK;
    uint32_t *parent = malloc((size_t)n * sizeof *parent);
    if (!parent)
        return BB_ENOMEM;
    for (uint32_t i = 0; i < n; i++)
        parent[i] = i;
    for (uint32_t k = g->op_begin; k < g->op_end; k++) {
        const bbe__op *op = &e->ops[k];
        uint32_t a = uf_root(parent, k - g->op_begin);
        for (uint32_t i = 0; i < op->n_in + op->n_out; i++) {
            uint32_t s = i < op->n_in ? op->in[i] : op->out[i - op->n_in];
            if (s == BBE__NONE || is_const[s] == 2)
                continue;
            uint32_t b = uf_root(parent, nops + s);
            if (a != b)
                parent[b] = a;
        }
    }
    int rc = BB_OK;
    for (uint32_t k = g->op_begin; k < g->op_end && !rc; k++) {
        bbe__op *op = &e->ops[k];
        if (!(op->flags & BBE__OPF_EVENT_SOURCE))
            continue;
        uint32_t root = uf_root(parent, k - g->op_begin), m = 0;
        for (uint32_t i = 0; i < g->n_sources; i++)
            m += uf_root(parent, g->sources[i] - g->op_begin) == root;
        if (!m)
            continue;
        bbe__opst *st = bbe__opst_new(ins, op);
        uint32_t *v = bb_arena_calloc(ins->a, m, sizeof *v);
        if (!st || !v) {
            rc = BB_ENOMEM;
            break;
        }
        m = 0;
        for (uint32_t i = 0; i < g->n_sources; i++)
            if (uf_root(parent, g->sources[i] - g->op_begin) == root)
                v[m++] = g->sources[i];
        st->companions = v;
        st->n_companions = m;
    }
    free(parent);
    return rc;
}

/* Pass 1 for one node: its op record, its ports named in tab. */
static int name_op_ports(bbe__install *ins, const bb_function *f, size_t k, site_tab *tab)
{
    bb_engine *e = ins->e;
    bbe__graph *g = ins->g;
    const bb_node *n = f->nodes.v[k];
    bbe__op *op = &e->ops[g->op_begin + k];
    op->node = n;
    op->graph = g->index;
    op->op_type = n->op_type ? n->op_type : "";
    op->domain = n->domain ? n->domain : "";
    op->label = n->name && n->name[0] ? n->name : bb_arena_sprintf(ins->a, "%s#%zu", op->op_type, k);
    if (!n->op_type || !n->op_type[0])
        return fail(ins, BB_INSTALL_MALFORMED_GRAPH, "function %s: node %zu has no op_type", f->name, k);
    if (!op->label)
        return BB_ENOMEM;
    if (n->inputs.n > UINT16_MAX || n->outputs.n > UINT16_MAX)
        return fail(ins, BB_INSTALL_MALFORMED_GRAPH, "function %s: node %s has too many ports", f->name, op->label);
    op->n_in = (uint16_t)n->inputs.n;
    op->n_out = (uint16_t)n->outputs.n;
    uint32_t *in = bb_arena_calloc(ins->a, op->n_in + 1, sizeof *in);
    uint32_t *outp = bb_arena_calloc(ins->a, op->n_out + 1, sizeof *outp);
    if (!in || !outp)
        return BB_ENOMEM;
    for (uint32_t i = 0; i < op->n_in; i++) {
        const char *nm = n->inputs.v[i];
        in[i] = !nm || !nm[0] ? BBE__NONE : tab_add(tab, nm);
        if (nm && nm[0] && in[i] == BBE__NONE)
            return BB_ENOMEM;
    }
    for (uint32_t j = 0; j < op->n_out; j++) {
        const char *nm = n->outputs.v[j];
        outp[j] = !nm || !nm[0] ? BBE__NONE : tab_add(tab, nm);
        if (nm && nm[0] && outp[j] == BBE__NONE)
            return BB_ENOMEM;
    }
    op->in = in;
    op->out = outp;
    if (op->n_in > e->max_in)
        e->max_in = op->n_in;
    if (op->n_out > e->max_out)
        e->max_out = op->n_out;
    return 0;
}

/* Pass 1: name every value (formals, node ports, results) in tab. */
static int name_values(bbe__install *ins, const bb_function *f, site_tab *tab)
{
    bbe__graph *g = ins->g;
    g->n_formals = (uint32_t)f->inputs.n;
    g->formals = bb_arena_calloc(ins->a, f->inputs.n + 1, sizeof *g->formals);
    g->n_results = (uint32_t)f->outputs.n;
    g->results = bb_arena_calloc(ins->a, f->outputs.n + 1, sizeof *g->results);
    if (!g->formals || !g->results)
        return BB_ENOMEM;
    for (size_t i = 0; i < f->inputs.n; i++) {
        const char *nm = f->inputs.v[i];
        if (!nm || !nm[0] || tab_find(tab, nm) != BBE__NONE)
            return fail(ins, BB_INSTALL_MALFORMED_GRAPH, "function %s: input %zu is empty or repeated", f->name, i);
        if ((g->formals[i] = tab_add(tab, nm)) == BBE__NONE)
            return BB_ENOMEM;
    }
    for (size_t k = 0; k < f->nodes.n; k++) {
        int rc = name_op_ports(ins, f, k, tab);
        if (rc)
            return rc;
    }
    for (size_t i = 0; i < f->outputs.n; i++) {
        const char *nm = f->outputs.v[i];
        if (!nm || !nm[0])
            return fail(ins, BB_INSTALL_MALFORMED_GRAPH, "function %s: output %zu is empty", f->name, i);
        if ((g->results[i] = tab_add(tab, nm)) == BBE__NONE)
            return BB_ENOMEM;
    }
    return 0;
}

/* The site tables: names, declared types (value_info, else Any), and the
 * one-definition check; defined[s] is set for every defined site. */
static int site_tables(bbe__install *ins, const bb_function *f, const site_tab *tab, uint8_t *defined)
{
    bbe__graph *g = ins->g;
    uint32_t ns = g->n_sites = (uint32_t)tab->names.n;
    g->site_names = bb_arena_calloc(ins->a, ns + 1, sizeof *g->site_names);
    g->site_type = bb_arena_calloc(ins->a, ns + 1, sizeof *g->site_type);
    g->site_flags = bb_arena_calloc(ins->a, ns + 1, 1);
    g->fwd_index = bb_arena_calloc(ins->a, ns + 1, sizeof *g->fwd_index);
    g->cons_off = bb_arena_calloc(ins->a, ns + 2, sizeof *g->cons_off);
    if (!g->site_names || !g->site_type || !g->site_flags || !g->fwd_index || !g->cons_off)
        return BB_ENOMEM;
    for (uint32_t s = 0; s < ns; s++) {
        g->site_names[s] = tab->names.v[s];
        g->site_type[s] = &BB_TYPE_ANY;
    }
    for (uint32_t i = 0; i < g->n_formals; i++)
        defined[g->formals[i]] = 1;
    for (uint32_t k = g->op_begin; k < g->op_end; k++) {
        const bbe__op *op = &ins->e->ops[k];
        for (uint32_t j = 0; j < op->n_out; j++) {
            uint32_t s = op->out[j];
            if (s == BBE__NONE)
                continue;
            if (defined[s])
                return fail(ins, BB_INSTALL_MALFORMED_GRAPH, "function %s: value '%s' is defined twice (node %s)",
                            f->name, g->site_names[s], op->label);
            defined[s] = 1;
        }
    }
    for (size_t i = 0; i < f->value_info.n; i++) {
        const bb_value_info *vi = f->value_info.v[i];
        uint32_t s = vi && vi->name ? tab_find(tab, vi->name) : BBE__NONE;
        const bb_type_node *t = s != BBE__NONE && vi->type ? bb_type_from_proto(vi->type) : NULL;
        if (t)
            g->site_type[s] = t;
    }
    return 0;
}

/* Constants (folded: their sites are pre-filled in every frame) and
 * sources (ops whose inputs are all omitted or constant); is_const[s] is
 * set to 2 for a constant site. */
static int constants_and_sources(bbe__install *ins, uint8_t *is_const)
{
    bb_engine *e = ins->e;
    bbe__graph *g = ins->g;
    uint32_t nc = 0, nsrc = 0;
    for (uint32_t k = g->op_begin; k < g->op_end; k++)
        nc += e->ops[k].disp == BBE__DISP_CONST && e->ops[k].out[0] != BBE__NONE;
    g->const_sites = bb_arena_calloc(ins->a, nc + 1, sizeof *g->const_sites);
    g->const_vals = bb_arena_calloc(ins->a, nc + 1, sizeof *g->const_vals);
    if (!g->const_sites || !g->const_vals)
        return BB_ENOMEM;
    for (uint32_t k = g->op_begin; k < g->op_end; k++) {
        const bbe__op *op = &e->ops[k];
        if (op->disp == BBE__DISP_CONST && op->out[0] != BBE__NONE) {
            g->const_sites[g->n_consts] = op->out[0];
            g->const_vals[g->n_consts++] = op->st->value;
            is_const[op->out[0]] = 2;
        }
    }
    for (uint32_t pass = 0; pass < 2; pass++) { /* count, then fill */
        for (uint32_t k = g->op_begin; k < g->op_end; k++) {
            bbe__op *op = &e->ops[k];
            if (op->disp == BBE__DISP_CONST || (op->flags & BBE__OPF_EVENT_SOURCE))
                continue;
            bool src = true;
            for (uint32_t i = 0; i < op->n_in && src; i++)
                src = op->in[i] == BBE__NONE || is_const[op->in[i]] == 2;
            if (!src)
                continue;
            if (pass == 1)
                g->sources[g->n_sources++] = k;
            else
                nsrc++;
            op->flags |= BBE__OPF_SOURCE;
        }
        if (pass == 0 && !(g->sources = bb_arena_calloc(ins->a, nsrc + 1, sizeof *g->sources)))
            return BB_ENOMEM;
    }
    return companion_sources(ins, g, is_const);
}

/* Is input i of op the first of its ports to read its site? (An op is a
 * consumer of a site once, however many of its ports read it.) */
static bool first_read(const bbe__op *op, uint32_t i)
{
    uint32_t s = op->in[i];
    if (s == BBE__NONE)
        return false;
    for (uint32_t p = 0; p < i; p++)
        if (op->in[p] == s)
            return false;
    return true;
}

/* Consumer lists in CSR form: g->cons[cons_off[s] .. cons_off[s + 1]). */
static int build_consumers(bbe__install *ins)
{
    bb_engine *e = ins->e;
    bbe__graph *g = ins->g;
    uint32_t *cnt = g->cons_off + 1;
    size_t total = 0;
    for (uint32_t k = g->op_begin; k < g->op_end; k++)
        for (uint32_t i = 0; i < e->ops[k].n_in; i++)
            if (first_read(&e->ops[k], i)) {
                cnt[e->ops[k].in[i]]++;
                total++;
            }
    for (uint32_t s = 0; s < g->n_sites; s++)
        g->cons_off[s + 1] += g->cons_off[s];
    g->cons = bb_arena_calloc(ins->a, total + 1, sizeof *g->cons);
    uint32_t *fill = calloc(g->n_sites + 1, sizeof *fill);
    if (!g->cons || !fill) {
        free(fill);
        return BB_ENOMEM;
    }
    for (uint32_t k = g->op_begin; k < g->op_end; k++)
        for (uint32_t i = 0; i < e->ops[k].n_in; i++)
            if (first_read(&e->ops[k], i)) {
                uint32_t s = e->ops[k].in[i];
                g->cons[g->cons_off[s] + fill[s]++] = k;
            }
    free(fill);
    return 0;
}

/* Results forward to callers; entry-point results with no consumer
 * surface as AppEvents; every site is addressable by its wire id. */
static int results_and_wire_ids(bbe__install *ins)
{
    bb_engine *e = ins->e;
    bbe__graph *g = ins->g;
    for (uint32_t j = 0; j < g->n_results; j++) {
        uint32_t s = g->results[j];
        if (!(g->site_flags[s] & BBE__SITE_FWD)) {
            g->site_flags[s] |= BBE__SITE_FWD;
            g->fwd_index[s] = j;
        }
        if (g->entry && g->cons_off[s + 1] == g->cons_off[s])
            g->site_flags[s] |= BBE__SITE_APP_OUT;
    }
    for (uint32_t s = 0; s < g->n_sites; s++) {
        uint64_t id = bbe__site_wire_id(g->name, g->site_names[s]);
        if (!bbe__map_get(&e->wire_sites, id, NULL) &&
            bbe__map_put(&e->wire_sites, id, ((uint64_t)g->index << 32) | s))
            return BB_ENOMEM;
    }
    return 0;
}

/* Request batches whose responses one op folds as they land (wire.c). */
static int fold_targets(bbe__install *ins)
{
    bb_engine *e = ins->e;
    bbe__graph *g = ins->g;
    for (uint32_t k = g->op_begin; k < g->op_end; k++) {
        bbe__op *op = &e->ops[k];
        if (op->fn != bbe__sys_recv_resp && op->fn != bbe__sys_send_req)
            continue;
        bbe__opst *st = op->st ? op->st : bbe__opst_new(ins, op);
        if (!st)
            return BB_ENOMEM;
        int rc = bbe__install_fold_target(e, g, op, st);
        if (rc)
            return rc;
    }
    return 0;
}

static int build_graph(bbe__install *ins, uint32_t gi, uint32_t *next_op)
{
    bb_engine *e = ins->e;
    bbe__graph *g = &e->graphs[gi];
    const bb_function *f = ins->m->functions.v[ins->order.v[gi]];
    ins->g = g;
    g->fn = f;
    g->name = f->name;
    g->index = gi;
    g->op_begin = *next_op;
    g->op_end = *next_op + (uint32_t)f->nodes.n;
    *next_op = g->op_end;
    size_t expect = f->inputs.n + f->outputs.n;
    for (size_t k = 0; k < f->nodes.n; k++)
        expect += f->nodes.v[k]->inputs.n + f->nodes.v[k]->outputs.n;
    site_tab tab = {0};
    uint8_t *defined = NULL; /* per site; reused by constants_and_sources */
    int rc = tab_init(&tab, expect + 1);
    if (!rc)
        rc = name_values(ins, f, &tab);
    if (!rc && !(defined = calloc(tab.names.n + 1, 1)))
        rc = BB_ENOMEM;
    if (!rc)
        rc = site_tables(ins, f, &tab, defined);
    /* pass 2: dispatch */
    for (uint32_t k = g->op_begin; !rc && k < g->op_end; k++)
        rc = classify(ins, &e->ops[k], k);
    if (!rc)
        rc = constants_and_sources(ins, defined);
    if (!rc)
        rc = build_consumers(ins);
    if (!rc)
        rc = results_and_wire_ids(ins);
    if (!rc)
        rc = fold_targets(ins);
    free(defined);
    tab_free(&tab);
    return rc;
}

static int touch_sets(bbe__install *ins)
{
    bb_engine *e = ins->e;
    uint32_t words = (e->n_comps + 63) / 64;
    if (!words)
        words = 1;
    e->boot.touch_words = words;
    e->boot.comp_touch = bb_arena_calloc(ins->a, (size_t)words * (e->n_comps + 1), sizeof(uint64_t));
    if (!e->boot.comp_touch)
        return BB_ENOMEM;
    for (uint32_t c = 0; c < e->n_comps; c++)
        e->boot.comp_touch[(size_t)c * words + c / 64] |= 1ULL << (c % 64);
    uint8_t *seen = calloc(e->n_graphs + 1, 1);
    uint32_t *stack = calloc(e->n_graphs + 1, sizeof *stack);
    if (!seen || !stack) {
        free(seen);
        free(stack);
        return BB_ENOMEM;
    }
    int rc = 0;
    for (uint32_t gi = 0; gi < e->n_graphs && !rc; gi++) {
        bbe__graph *g = &e->graphs[gi];
        if (!g->is_bootstrap)
            continue;
        g->touch_words = words;
        g->touch = bb_arena_calloc(ins->a, words, sizeof(uint64_t));
        if (!g->touch) {
            rc = BB_ENOMEM;
            break;
        }
        memset(seen, 0, e->n_graphs + 1);
        uint32_t sp = 0;
        stack[sp++] = gi;
        seen[gi] = 1;
        while (sp) {
            const bbe__graph *h = &e->graphs[stack[--sp]];
            for (uint32_t k = h->op_begin; k < h->op_end; k++) {
                const bbe__op *op = &e->ops[k];
                if (op->disp == BBE__DISP_ATOMIC)
                    g->touch[op->comp / 64] |= 1ULL << (op->comp % 64);
                else if (op->disp == BBE__DISP_CALL && !seen[op->comp]) {
                    seen[op->comp] = 1;
                    stack[sp++] = op->comp;
                }
            }
        }
    }
    free(seen);
    free(stack);
    return rc;
}

static int create_components(bbe__install *ins)
{
    bb_engine *e = ins->e;
    for (uint32_t k = 0; k < e->n_comps; k++) {
        uint32_t i = e->comp_order[k];
        bbe__comp *c = &e->comps[i];
        bbe__ctx_init(e, i);
        bb_create_args args = {
            .struct_size = sizeof args,
            .slot = c->slot,
            .construction = c->construction,
            .config_json = ins->reg && ins->reg->slot_config ? ins->reg->slot_config(ins->reg->ud, c->slot) : NULL,
            .seed = bbe__mix64(e->cfg.seed ^ bb_fnv1a64(c->slot, strlen(c->slot))),
            .ctx = &c->ctx.pub,
        };
        bb_error cerr = {0};
        void *inst = NULL;
        int rc = c->type->create(&args, &inst, &cerr);
        if (rc != BB_OK) {
            fail(ins, BB_INSTALL_COMPONENT_CREATE_FAILED, "slot '%s' (%s): %s", c->slot,
                 c->type->type_name, cerr.msg[0] ? cerr.msg : "create failed");
            if (rc != BB_ENOMEM)
                return BB_EINSTALL;
            if (ins->err)
                ins->err->code = BB_ENOMEM; /* same message, but the caller may retry */
            return BB_ENOMEM;
        }
        c->inst = inst;
        c->created = true;
    }
    return 0;
}

static int finish_tables(bbe__install *ins)
{
    bb_engine *e = ins->e;
#define MOVE(dst, n_dst, arr)                                                         \
    do {                                                                              \
        (dst) = bb_arena_calloc(ins->a, (arr).n + 1, sizeof *(arr).v);                \
        if (!(dst))                                                                   \
            return BB_ENOMEM;                                                         \
        if ((arr).n)                                                                  \
            memcpy((dst), (arr).v, (arr).n * sizeof *(arr).v);                        \
        (n_dst) = (uint32_t)(arr).n;                                                  \
    } while (0)
    MOVE(e->semas, e->n_semas, ins->semas);
    MOVE(e->queues, e->n_queues, ins->queues);
    MOVE(e->holds, e->n_holds, ins->holds);
    MOVE(e->metrics, e->n_metrics, ins->metrics);
    MOVE(e->lifecycle_ops, e->n_lifecycle_ops, ins->lifecycle);
    MOVE(e->interval_ops, e->n_interval_ops, ins->intervals);
    MOVE(e->pulse_ops, e->n_pulse_ops, ins->pulses);
    MOVE(e->event_ops, e->n_event_ops, ins->events);
#undef MOVE
    size_t mi = e->max_in ? e->max_in : 1, mo = e->max_out ? e->max_out : 1;
    e->in_buf = calloc(mi, sizeof *e->in_buf);
    e->out_buf = calloc(mo, sizeof *e->out_buf);
    if (!e->in_buf || !e->out_buf)
        return BB_ENOMEM;
    e->targets = bb_arena_calloc(ins->a, ins->n_targets, sizeof *e->targets);
    e->boot.mods = bb_arena_calloc(ins->a, ins->n_targets + 1, sizeof *e->boot.mods);
    if (!e->targets || !e->boot.mods)
        return BB_ENOMEM;
    for (uint32_t t = 0; t < ins->n_targets; t++) {
        bbe__target *tg = &e->targets[t];
        tg->name = ins->target_name[t];
        tg->graph = (uint32_t)ins->graph_of[ins->target_fn[t]];
        tg->boot = BBE__NONE;
        if (ins->boot_fn[t] >= 0) {
            tg->boot = e->boot.n_mods++;
            e->boot.mods[tg->boot].target = t;
            e->boot.mods[tg->boot].graph = (uint32_t)ins->graph_of[ins->canon[ins->boot_fn[t]]];
        }
    }
    e->n_targets = ins->n_targets;
    e->fingerprint = bbe__install_fingerprint(e);
    return 0;
}

void bbe__uninstall(bb_engine *e)
{
    for (uint32_t k = e->n_comps; k-- > 0;) {
        bbe__comp *c = &e->comps[e->comp_order ? e->comp_order[k] : k];
        if (c->created && c->type->destroy)
            c->type->destroy(c->inst);
        c->created = false;
        c->inst = NULL;
    }
    for (uint32_t k = 0; k < e->n_ops; k++)
        if (e->ops[k].st && e->ops[k].st->value) {
            bb_value_unref(e->ops[k].st->value);
            e->ops[k].st->value = NULL;
        }
    bbe__semas_free(e);
    bbe__map_free(&e->wire_sites);
    bbe__map_free(&e->recv_ops);
    free(e->in_buf);
    free(e->out_buf);
    e->in_buf = e->out_buf = NULL;
    if (!e->cfg.share_model)
        bb_model_free(e->model);
    e->model = NULL;
    if (e->arena)
        bb_arena_destroy(e->arena);
    e->arena = NULL;
    e->graphs = NULL;
    e->ops = NULL;
    e->comps = NULL;
    e->comp_order = NULL;
    e->targets = NULL;
    e->semas = NULL;
    e->queues = NULL;
    e->holds = NULL;
    e->metrics = NULL;
    e->lifecycle_ops = e->interval_ops = e->pulse_ops = e->event_ops = NULL;
    e->n_graphs = e->n_ops = e->n_comps = e->n_targets = 0;
    e->n_semas = e->n_queues = e->n_holds = e->n_metrics = 0;
    e->n_lifecycle_ops = e->n_interval_ops = e->n_pulse_ops = e->n_event_ops = 0;
    e->max_in = e->max_out = 0;
    e->bus_subscribed = 0;
    memset(&e->boot.mods, 0, sizeof e->boot.mods);
    e->boot.n_mods = 0;
    e->boot.comp_touch = NULL;
    e->installed = false;
}

static void ins_free(bbe__install *ins)
{
    bbe__map_free(&ins->fn_index);
    BBE__ARR_FREE(&ins->order);
    BBE__ARR_FREE(&ins->binds);
    BBE__ARR_FREE(&ins->semas);
    BBE__ARR_FREE(&ins->queues);
    BBE__ARR_FREE(&ins->holds);
    BBE__ARR_FREE(&ins->metrics);
    BBE__ARR_FREE(&ins->missing);
    BBE__ARR_FREE(&ins->lifecycle);
    BBE__ARR_FREE(&ins->intervals);
    BBE__ARR_FREE(&ins->pulses);
    BBE__ARR_FREE(&ins->events);
}

static int preflight(bbe__install *ins)
{
    if (!ins->missing.n)
        return 0;
    char buf[400];
    size_t len = 0;
    buf[0] = 0;
    for (size_t i = 0; i < ins->missing.n; i++) {
        const missing_op *m = &ins->missing.v[i];
        bool first = true;
        for (size_t k = 0; k < i; k++)
            first &= strcmp(dom_norm(ins->missing.v[k].domain), dom_norm(m->domain)) != 0;
        if (!first)
            continue;
        int w = snprintf(buf + len, sizeof buf - len, "%sopset %s missing", len ? "; " : "",
                         dom_norm(m->domain)[0] ? m->domain : "ai.onnx");
        len += w > 0 && (size_t)w < sizeof buf - len ? (size_t)w : 0;
        for (size_t k = i; k < ins->missing.n; k++) {
            if (strcmp(dom_norm(ins->missing.v[k].domain), dom_norm(m->domain)) != 0)
                continue;
            w = snprintf(buf + len, sizeof buf - len, " %s", ins->missing.v[k].op_type);
            len += w > 0 && (size_t)w < sizeof buf - len ? (size_t)w : 0;
        }
    }
    return fail(ins, BB_INSTALL_INCOMPATIBLE_RUNTIME, "%s", buf);
}

int bb_engine_install(bb_engine *e, const bb_model *model, const char *const *targets,
                      size_t n_targets, const bb_engine_registry *reg, bb_error *err)
{
    bbe__install ins = {.e = e, .reg = reg, .err = err};
    e->install_err = BB_INSTALL_OK;
    if (e->installed) {
        e->install_err = BB_INSTALL_ALREADY_INSTALLED;
        return bb_error_set(err, BB_EINSTALL, "AlreadyInstalled: an engine installs once");
    }
    if (!n_targets || !targets) {
        e->install_err = BB_INSTALL_EMPTY_TARGETS;
        return bb_error_set(err, BB_EINSTALL, "EmptyTargets: install needs at least one target");
    }
    if (!model)
        return bb_error_set(err, BB_EINVAL, "install: NULL model");
    int rc = BB_ENOMEM;
    e->arena = ins.a = bb_arena_create();
    /* install and the engine only read the model: a host that keeps it
     * alive and unchanged may have it shared instead of cloned */
    e->model = ins.m = !e->arena          ? NULL
                       : e->cfg.share_model ? (bb_model *)model
                                            : bb_model_clone(model);
    if (!ins.a || !ins.m)
        goto fail;
    if (!bb_artifact_is_compiled(ins.m)) {
        rc = fail(&ins, BB_INSTALL_NOT_COMPILED, "model has no %s = \"%s\" passport (run bbc compile)",
                  BB_META_COMPILED, BB_COMPILED_PASSPORT);
        goto fail;
    }
    if ((rc = index_functions(&ins)) || (rc = resolve_targets(&ins, targets, n_targets)) ||
        (rc = read_bindings(&ins)) || (rc = make_components(&ins)))
        goto fail;
    e->n_graphs = (uint32_t)ins.order.n;
    size_t total_ops = 0;
    for (size_t gi = 0; gi < ins.order.n; gi++)
        total_ops += ins.m->functions.v[ins.order.v[gi]]->nodes.n;
    if (total_ops > UINT32_MAX / 2) {
        rc = fail(&ins, BB_INSTALL_MALFORMED_GRAPH, "%zu nodes", total_ops);
        goto fail;
    }
    e->graphs = bb_arena_calloc(ins.a, e->n_graphs + 1, sizeof *e->graphs);
    e->ops = bb_arena_calloc(ins.a, total_ops + 1, sizeof *e->ops);
    if (!e->graphs || !e->ops) {
        rc = BB_ENOMEM;
        goto fail;
    }
    e->n_ops = (uint32_t)total_ops;
    for (uint32_t t = 0; t < ins.n_targets; t++) {
        bbe__graph *g = &e->graphs[ins.graph_of[ins.target_fn[t]]];
        g->entry = true;
        g->target = ins.target_name[t];
        if (ins.boot_fn[t] >= 0)
            e->graphs[ins.graph_of[ins.canon[ins.boot_fn[t]]]].is_bootstrap = true;
    }
    uint32_t next_op = 0;
    for (uint32_t gi = 0; gi < e->n_graphs; gi++)
        if ((rc = build_graph(&ins, gi, &next_op)))
            goto fail;
    if ((rc = preflight(&ins)) || (rc = touch_sets(&ins)) || (rc = finish_tables(&ins)) ||
        (rc = create_components(&ins)))
        goto fail;
    ins_free(&ins);
    e->installed = true;
    return BB_OK;
fail:
    if (rc == BB_ENOMEM && e->install_err == BB_INSTALL_OK)
        bb_error_set(err, BB_ENOMEM, "install: out of memory");
    ins_free(&ins);
    bbe__uninstall(e);
    return rc;
}
