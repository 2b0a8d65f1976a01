/*
 * recorder.c — the recorder's state: modules, component slots, values and
 * ports, with_module scopes, sub-module calls, and the one generic node
 * recorder (bb__rec_node) every DSL function goes through.
 *
 * Invariants: a recording error is kept once (the first) and every later
 * recording call returns at once with that code; handles (bb_val) name
 * their graph and an index into its value table, so a value's name can
 * change (bb_rec_output) without invalidating handles the author holds.
 */
#include "recorder_internal.h"
#include "json_check.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ------------------------------------------------------------- */

static const char *rec_label(const bb_rec *g)
{
    return g && g->f && g->f->name ? g->f->name : "?";
}

int bb__rec_fail(bb_recorder *r, const bb_rec *g, const char *what, const char *fmt, ...)
{
    if (!r)
        return BB_ERECORD;
    if (r->err.code)
        return r->err.code;
    char msg[BB_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (g)
        return bb_error_set(&r->err, BB_ERECORD, "%s: %s: %s", rec_label(g), what, msg);
    return bb_error_set(&r->err, BB_ERECORD, "%s: %s", what, msg);
}

int bb__rec_oom(bb_recorder *r, const bb_rec *g, const char *what)
{
    if (!r)
        return BB_ENOMEM;
    if (!r->err.code)
        bb_error_set(&r->err, BB_ENOMEM, "%s: %s: out of memory", rec_label(g), what);
    return r->err.code;
}

int bb__rec_ready(bb_rec *g, const char *what)
{
    if (!g)
        return BB_EINVAL; /* whoever produced the NULL recorded why */
    if (g->r->err.code)
        return g->r->err.code;
    if (g->r->built)
        return bb__rec_fail(g->r, g, what, "the recorder was already built");
    return BB_OK;
}

int bb_recorder_error(const bb_recorder *r, bb_error *err)
{
    if (!r)
        return bb_error_set(err, BB_EINVAL, "recorder: NULL recorder");
    if (err)
        *err = r->err;
    return r->err.code;
}

/* ---- recorder ------------------------------------------------------------ */

bb_recorder *bb_recorder_new(const char *domain)
{
    bb_recorder *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->arena = bb_arena_create();
    r->model = bb_model_new();
    if (!r->arena || !r->model)
        goto fail;
    r->domain = bb_arena_strdup(r->arena, domain && *domain ? domain : "user.app");
    if (!r->domain)
        goto fail;
    return r;
fail:
    bb_model_free(r->model);
    bb_arena_destroy(r->arena);
    free(r);
    return NULL;
}

void bb_recorder_free(bb_recorder *r)
{
    if (!r)
        return;
    bb_model_free(r->model);
    bb_arena_destroy(r->arena);
    free(r);
}

/* ---- modules ------------------------------------------------------------- */

static bool name_ok(const char *s)
{
    return s && *s;
}

static int rec_init(bb_recorder *r, bb_module *m, bb_rec *g, bool bootstrap)
{
    g->r = r;
    g->m = m;
    g->bootstrap = bootstrap;
    const char *fname = m->name;
    if (bootstrap) {
        fname = bb_arena_sprintf(r->arena, "%s%s", m->name, BB_BOOTSTRAP_SUFFIX);
        if (!fname)
            return BB_ENOMEM;
    }
    g->f = bb_model_add_function(r->model, m->domain, fname);
    if (!g->f)
        return BB_ENOMEM;
    bb_arena *ma = r->model->arena;
    if (bootstrap &&
        bb_kv_set(ma, &g->f->metadata, BB_META_MODULE_PHASE, BB_MODULE_PHASE_BOOTSTRAP))
        return BB_ENOMEM;
    if (m->klass && bb_kv_set(ma, &g->f->metadata, BB_META_HOME_CLASS, m->klass))
        return BB_ENOMEM;
    return BB_OK;
}

static bb_module *module_new(bb_recorder *r, const char *domain, const char *name, bool klass)
{
    static const char what[] = "module";
    if (!r)
        return NULL;
    if (r->err.code)
        return NULL;
    if (r->built) {
        bb__rec_fail(r, NULL, what, "the recorder was already built");
        return NULL;
    }
    if (!name_ok(name)) {
        bb__rec_fail(r, NULL, what, "a module needs a non-empty name");
        return NULL;
    }
    if (!domain || !*domain)
        domain = r->domain;
    if (bb_opset_is_reserved(domain)) {
        bb__rec_fail(r, NULL, what, "module '%s': domain '%s' is reserved", name, domain);
        return NULL;
    }
    size_t nl = strlen(name), sl = strlen(BB_BOOTSTRAP_SUFFIX);
    if (nl > sl && strcmp(name + nl - sl, BB_BOOTSTRAP_SUFFIX) == 0) {
        bb__rec_fail(r, NULL, what, "module '%s': the suffix '%s' is reserved", name,
                     BB_BOOTSTRAP_SUFFIX);
        return NULL;
    }
    for (size_t i = 0; i < r->modules.n; i++) {
        bb_module *o = r->modules.v[i];
        if (strcmp(o->name, name) == 0 && strcmp(o->domain, domain) == 0) {
            bb__rec_fail(r, NULL, what, "module %s::%s declared twice", domain, name);
            return NULL;
        }
        if (klass && o->klass && strcmp(o->klass, name) == 0) {
            bb__rec_fail(r, NULL, what, "peer class '%s' declared twice", name);
            return NULL;
        }
    }
    bb_module *m = bb_arena_alloc(r->arena, sizeof *m);
    bb_module **slot = m ? BB_VEC_PUSH(r->arena, &r->modules) : NULL;
    if (!slot)
        goto oom;
    *slot = m;
    m->r = r;
    m->domain = bb_arena_strdup(r->arena, domain);
    m->name = bb_arena_strdup(r->arena, name);
    if (!m->domain || !m->name)
        goto oom;
    if (klass)
        m->klass = m->name;
    if (rec_init(r, m, &m->body, false))
        goto oom;
    return m;
oom:
    bb__rec_oom(r, NULL, what);
    return NULL;
}

bb_module *bb_rec_module(bb_recorder *r, const char *name)
{
    return module_new(r, NULL, name, false);
}

bb_module *bb_rec_module_in(bb_recorder *r, const char *domain, const char *name)
{
    return module_new(r, domain, name, false);
}

bb_module *bb_rec_class_module(bb_recorder *r, const char *class_name)
{
    if (r && !r->err.code && class_name && strcmp(class_name, BB_SELF_CLASS) == 0) {
        bb__rec_fail(r, NULL, "module", "'%s' is the reserved self class", class_name);
        return NULL;
    }
    return module_new(r, NULL, class_name, true);
}

const char *bb_module_name(const bb_module *m)
{
    return m ? m->name : NULL;
}

const char *bb_module_class(const bb_module *m)
{
    return m ? m->klass : NULL;
}

bb_rec *bb_module_body(bb_module *m)
{
    return m ? &m->body : NULL;
}

bb_rec *bb_module_bootstrap(bb_module *m)
{
    if (!m)
        return NULL;
    if (m->boot)
        return m->boot;
    bb_recorder *r = m->r;
    if (r->err.code)
        return NULL;
    if (r->built) {
        bb__rec_fail(r, &m->body, "bootstrap", "the recorder was already built");
        return NULL;
    }
    bb_rec *g = bb_arena_alloc(r->arena, sizeof *g);
    if (!g || rec_init(r, m, g, true)) {
        bb__rec_oom(r, &m->body, "bootstrap");
        return NULL;
    }
    m->boot = g;
    return g;
}

bb_module *bb_rec_module_of(const bb_rec *g)
{
    return g ? g->m : NULL;
}

bb_recorder *bb_rec_recorder(const bb_rec *g)
{
    return g ? g->r : NULL;
}

/* ---- slots ----------------------------------------------------------------- */

static bool role_ok(bb_role role)
{
    return role >= BB_ROLE_BACKEND && role <= BB_ROLE_PROTOCOL;
}

static bb_slot *slot_new(bb_module *m, bb_role role, const char *name, const char *what)
{
    if (!m || m->r->err.code)
        return NULL;
    bb_recorder *r = m->r;
    if (r->built) {
        bb__rec_fail(r, &m->body, what, "the recorder was already built");
        return NULL;
    }
    if (!name_ok(name)) {
        bb__rec_fail(r, &m->body, what, "a slot needs a non-empty name");
        return NULL;
    }
    if (!role_ok(role)) {
        bb__rec_fail(r, &m->body, what, "slot '%s': invalid role %d", name, (int)role);
        return NULL;
    }
    for (size_t i = 0; i < m->slots.n; i++) {
        if (strcmp(m->slots.v[i]->name, name) == 0) {
            bb__rec_fail(r, &m->body, what, "slot '%s' declared twice", name);
            return NULL;
        }
    }
    bb_slot *s = bb_arena_alloc(r->arena, sizeof *s);
    bb_slot **p = s ? BB_VEC_PUSH(r->arena, &m->slots) : NULL;
    if (!p || !(s->name = bb_arena_strdup(r->arena, name))) {
        bb__rec_oom(r, &m->body, what);
        return NULL;
    }
    *p = s;
    s->m = m;
    s->role = role;
    return s;
}

static int fn_meta2(bb_rec *g, const char *prefix, const char *suffix, const char *value)
{
    bb_arena *ma = g->r->model->arena;
    char *key = bb_arena_sprintf(ma, "%s%s", prefix, suffix);
    if (!key || bb_kv_set(ma, &g->f->metadata, key, value))
        return BB_ENOMEM;
    return BB_OK;
}

bb_slot *bb_rec_generic(bb_module *m, bb_role role, const char *slot_name)
{
    static const char what[] = "generic slot";
    bb_slot *s = slot_new(m, role, slot_name, what);
    if (!s)
        return NULL;
    bb_recorder *r = m->r;
    bb_rec *g = &m->body;
    s->id = r->next_slot_id++;
    char id[16];
    snprintf(id, sizeof id, "%u", s->id);
    if (bb_str_list_push(r->model->arena, &g->f->attributes, s->name) ||
        fn_meta2(g, BB_REC_META_SLOT_ROLE_PREFIX, s->name, bb_role_name(role)) ||
        fn_meta2(g, BB_REC_META_SLOT_ID_PREFIX, s->name, id)) {
        bb__rec_oom(r, g, what);
        return NULL;
    }
    return s;
}

static uint32_t next_instance(bb_recorder *r, const char *type_name, bool *oom)
{
    for (size_t i = 0; i < r->instances.n; i++)
        if (strcmp(r->instances.v[i].type_name, type_name) == 0)
            return r->instances.v[i].next++;
    rec_instance *in = BB_VEC_PUSH(r->arena, &r->instances);
    if (!in || !(in->type_name = bb_arena_strdup(r->arena, type_name))) {
        *oom = true;
        return 0;
    }
    in->next = 1;
    return 0;
}

bb_slot *bb_rec_concrete(bb_module *m, bb_role role, const char *slot_name,
                         const char *type_name, const char *json_config,
                         const bb_tensor_proto *weights)
{
    static const char what[] = "concrete slot";
    if (!m || m->r->err.code)
        return NULL;
    bb_recorder *r = m->r;
    bb_rec *g = &m->body;
    if (!name_ok(type_name)) {
        bb__rec_fail(r, g, what, "slot '%s': a concrete slot needs a TYPE_NAME",
                     slot_name ? slot_name : "(null)");
        return NULL;
    }
    const char *json = json_config ? json_config : "{}";
    size_t bad_at = 0;
    const char *why = NULL;
    if (!bb__json_valid(json, strlen(json), &bad_at, &why)) {
        bb__rec_fail(r, g, what,
                     "slot '%s' (%s): construction state is not valid JSON (byte %zu: %s)",
                     slot_name ? slot_name : "(null)", type_name, bad_at, why);
        return NULL;
    }
    bb_slot *s = slot_new(m, role, slot_name, what);
    if (!s)
        return NULL;
    bool oom = false;
    s->concrete = true;
    s->type_name = bb_arena_strdup(r->arena, type_name);
    s->id = next_instance(r, type_name, &oom);
    bb_arena *ma = r->model->arena;
    bb_attr *at = bb_arena_alloc(ma, sizeof *at);
    bb_attr **p = at ? BB_VEC_PUSH(ma, &g->f->attribute_protos) : NULL;
    if (oom || !s->type_name || !p)
        goto oom;
    *p = at;
    at->name = bb_arena_strdup(ma, s->name);
    at->type = BB_ATTR_STRING;
    size_t jl = strlen(json);
    at->s.data = bb_arena_memdup(ma, json, jl + 1);
    at->s.len = jl;
    at->has_s = true;
    if (!at->name || !at->s.data)
        goto oom;
    if (weights && !(at->t = bb_tensor_proto_clone(ma, weights)))
        goto oom;
    if (fn_meta2(g, BB_META_SLOT_CONCRETE_TYPE_PREFIX, s->name, type_name) ||
        fn_meta2(g, BB_REC_META_SLOT_ROLE_PREFIX, s->name, bb_role_name(role)))
        goto oom;
    return s;
oom:
    bb__rec_oom(r, g, what);
    return NULL;
}

int bb_slot_set_atomic_domain(bb_slot *s, const char *domain)
{
    if (!s)
        return BB_EINVAL;
    bb_recorder *r = s->m->r;
    bb_rec *g = &s->m->body;
    int rc = bb__rec_ready(g, "atomic domain");
    if (rc)
        return rc;
    if (!s->concrete)
        return bb__rec_fail(r, g, "atomic domain",
                            "slot '%s' is generic: only a concrete has an atomic opset", s->name);
    if (!name_ok(domain) || bb_opset_is_reserved(domain))
        return bb__rec_fail(r, g, "atomic domain", "slot '%s': '%s' is not a plugin domain",
                            s->name, domain ? domain : "(null)");
    if (!(s->atomic_domain = bb_arena_strdup(r->arena, domain)))
        return bb__rec_oom(r, g, "atomic domain");
    return BB_OK;
}

int bb_slot_set_graph(bb_slot *s, const bb_graph *graph)
{
    static const char what[] = "construction graph";
    if (!s)
        return BB_EINVAL;
    bb_recorder *r = s->m->r;
    bb_rec *g = &s->m->body;
    int rc = bb__rec_ready(g, what);
    if (rc)
        return rc;
    if (!s->concrete)
        return bb__rec_fail(r, g, what, "slot '%s' is generic: only a concrete has construction "
                            "state", s->name);
    if (!graph)
        return bb__rec_fail(r, g, what, "slot '%s': no graph", s->name);
    bb_attr *at = NULL;
    for (size_t i = 0; i < g->f->attribute_protos.n && !at; i++)
        if (strcmp(g->f->attribute_protos.v[i]->name, s->name) == 0)
            at = g->f->attribute_protos.v[i];
    if (!at) /* every concrete slot records its attribute */
        return bb__rec_fail(r, g, what, "slot '%s' has no construction state", s->name);
    if (!(at->g = bb_graph_clone(r->model->arena, graph)))
        return bb__rec_oom(r, g, what);
    return BB_OK;
}

const char *bb_slot_name(const bb_slot *s)
{
    return s ? s->name : NULL;
}

bb_role bb_slot_role(const bb_slot *s)
{
    return s ? s->role : BB_ROLE_NONE;
}

/* ---- values ---------------------------------------------------------------- */

rec_value *bb__rec_value(bb_rec *g, bb_val v)
{
    return v.g == g && v.id < g->vals.n ? &g->vals.v[v.id] : NULL;
}

static long find_value(const bb_rec *g, const char *name)
{
    for (size_t i = 0; i < g->vals.n; i++)
        if (strcmp(g->vals.v[i].name, name) == 0)
            return (long)i;
    return -1;
}

/* "site_<digits>" names are the recorder's own. */
static bool reserved_value_name(const char *s)
{
    if (strncmp(s, "site_", 5) != 0 || !s[5])
        return false;
    for (s += 5; *s; s++)
        if ((*s < '0' || *s > '9') && *s != '_')
            return false;
    return true;
}

static bb_val handle_of(bb_rec *g, uint32_t id)
{
    rec_value *rv = &g->vals.v[id];
    return (bb_val){rv->name, rv->type, g, id};
}

bb_val bb__rec_new_value(bb_rec *g, const char *name, const bb_type_node *type,
                         rec_val_kind kind)
{
    bb_arena *ma = g->r->model->arena;
    if (!type)
        type = &BB_TYPE_ANY;
    const char *nm = name ? bb_arena_strdup(ma, name)
                          : bb_arena_sprintf(ma, "site_%u", g->last_site + 1);
    if (!nm)
        goto oom;
    if (!name)
        g->last_site++;
    bb_type_proto *tp = bb_type_to_proto(ma, type);
    bb_value_info *vi = tp ? bb_value_info_new(ma, nm, tp) : NULL;
    bb_value_info **vp = vi ? BB_VEC_PUSH(ma, &g->f->value_info) : NULL;
    rec_value *rv = vp ? BB_VEC_PUSH(g->r->arena, &g->vals) : NULL;
    if (!rv)
        goto oom;
    *vp = vi;
    rv->name = nm;
    rv->type = type;
    rv->vi = vi;
    rv->kind = kind;
    return handle_of(g, (uint32_t)(g->vals.n - 1));
oom:
    bb__rec_oom(g->r, g, "value");
    return BB_VAL_NONE;
}

/* ---- ports ------------------------------------------------------------------ */

bb_val bb_rec_input(bb_rec *g, const char *name, const bb_type_node *type)
{
    static const char what[] = "input";
    if (bb__rec_ready(g, what))
        return BB_VAL_NONE;
    if (!name_ok(name)) {
        bb__rec_fail(g->r, g, what, "an input needs a non-empty name");
        return BB_VAL_NONE;
    }
    long id = find_value(g, name);
    if (id >= 0) {
        if (g->vals.v[id].kind == REC_VAL_INPUT)
            return handle_of(g, (uint32_t)id);
        bb__rec_fail(g->r, g, what, "'%s' already names another value", name);
        return BB_VAL_NONE;
    }
    if (reserved_value_name(name)) {
        bb__rec_fail(g->r, g, what, "'%s': site_<n> names are reserved for the recorder", name);
        return BB_VAL_NONE;
    }
    bb_val v = bb__rec_new_value(g, name, type, REC_VAL_INPUT);
    uint32_t *p = bb_val_ok(v) ? BB_VEC_PUSH(g->r->arena, &g->input_ids) : NULL;
    if (!p) {
        bb__rec_oom(g->r, g, what);
        return BB_VAL_NONE;
    }
    *p = v.id;
    return v;
}

/* Check a handle used as an input of `what`; index names the position. */
static int check_input(bb_rec *g, bb_val v, const char *what, const char *port)
{
    if (!bb_val_ok(v))
        return bb__rec_fail(g->r, g, what, "input '%s' is NULL (no value)", port);
    if (v.g != g) {
        const bb_rec *o = v.g;
        return bb__rec_fail(g->r, g, what,
                            "input '%s' is a value of %s, not of this function (%s)", port,
                            o->f && o->f->name ? o->f->name : "another recording",
                            rec_label(g));
    }
    if (v.id >= g->vals.n)
        return bb__rec_fail(g->r, g, what, "input '%s' is not a recorded value", port);
    return BB_OK;
}

/* Rename value id to `to` everywhere in its function. */
static int rename_value(bb_rec *g, uint32_t id, const char *to)
{
    rec_value *rv = &g->vals.v[id];
    const char *from = rv->name;
    bb_function *f = g->f;
    for (size_t i = 0; i < f->nodes.n; i++) {
        bb_node *n = f->nodes.v[i];
        for (size_t k = 0; k < n->inputs.n; k++)
            if (n->inputs.v[k] && strcmp(n->inputs.v[k], from) == 0)
                n->inputs.v[k] = to;
        for (size_t k = 0; k < n->outputs.n; k++)
            if (n->outputs.v[k] && strcmp(n->outputs.v[k], from) == 0)
                n->outputs.v[k] = to;
    }
    rv->vi->name = to;
    rv->name = to;
    return BB_OK;
}

int bb_rec_output(bb_rec *g, const char *name, bb_val v)
{
    static const char what[] = "output";
    int rc = bb__rec_ready(g, what);
    if (rc)
        return rc;
    if (!name_ok(name))
        return bb__rec_fail(g->r, g, what, "an output needs a non-empty name");
    if ((rc = check_input(g, v, what, name)))
        return rc;
    if (find_value(g, name) >= 0 || reserved_value_name(name))
        return bb__rec_fail(g->r, g, what, "'%s' already names a value", name);
    bb_arena *ma = g->r->model->arena;
    const char *nm = bb_arena_strdup(ma, name);
    if (!nm)
        return bb__rec_oom(g->r, g, what);
    rec_value *rv = &g->vals.v[v.id];
    uint32_t id = v.id;
    if (rv->kind != REC_VAL_SITE || rv->is_port) {
        /* A formal or a value already carried by another port: a
         * PassThrough carries this port. */
        bb_val p = bb_sys_pass_through(g, v);
        if (!bb_val_ok(p))
            return g->r->err.code ? g->r->err.code : BB_ERECORD;
        id = p.id;
    }
    rename_value(g, id, nm);
    g->vals.v[id].is_port = true;
    if (bb_str_list_push(ma, &g->f->outputs, nm))
        return bb__rec_oom(g->r, g, what);
    return BB_OK;
}

bb_val bb_rec_lookup_output(bb_rec *g, const char *port, const bb_type_node *type)
{
    static const char what[] = "lookup_output";
    if (bb__rec_ready(g, what))
        return BB_VAL_NONE;
    if (!name_ok(port)) {
        bb__rec_fail(g->r, g, what, "a network port needs a non-empty name");
        return BB_VAL_NONE;
    }
    long id = find_value(g, port);
    if (id >= 0) {
        if (g->vals.v[id].kind == REC_VAL_NET_IN)
            return handle_of(g, (uint32_t)id);
        bb__rec_fail(g->r, g, what, "port '%s': the name already names another value", port);
        return BB_VAL_NONE;
    }
    if (reserved_value_name(port)) {
        bb__rec_fail(g->r, g, what, "'%s': site_<n> names are reserved for the recorder", port);
        return BB_VAL_NONE;
    }
    bb_val v = bb__rec_new_value(g, port, type, REC_VAL_NET_IN);
    if (!bb_val_ok(v))
        return BB_VAL_NONE;
    uint32_t *p = BB_VEC_PUSH(g->r->arena, &g->net_in_ids);
    if (!p || fn_meta2(g, BB_REC_META_NET_IN_PREFIX, port, v.name)) {
        bb__rec_oom(g->r, g, what);
        return BB_VAL_NONE;
    }
    *p = v.id;
    return v;
}

int bb_rec_net_out(bb_rec *g, const char *port, bb_val peers, bb_val value)
{
    static const char what[] = "net_out";
    int rc = bb__rec_ready(g, what);
    if (rc)
        return rc;
    if (!name_ok(port))
        return bb__rec_fail(g->r, g, what, "a network port needs a non-empty name");
    for (size_t i = 0; i < g->net_out_ports.n; i++)
        if (strcmp(g->net_out_ports.v[i], port) == 0)
            return bb__rec_fail(g->r, g, what, "port '%s' is sent from twice", port);
    if ((rc = check_input(g, peers, what, "peers")) || (rc = check_input(g, value, what, "value")))
        return rc;
    const bb_type_node *pt = g->vals.v[peers.id].type;
    if (!bb_type_same(pt, &BB_TYPE_ANY) && !bb_type_is_a(pt, &BB_TYPE_PEER_ID_VEC))
        return bb__rec_fail(g->r, g, what, "port '%s': peers must be a PeerId vector, not %s",
                            port, pt->name);
    const char *dest = g->vals.v[peers.id].of_class;
    bb_val in[2] = {value, peers};
    bb__op_req req = {.node_domain = BB_DOMAIN_WIRE, .op_type = BB_OP_WIRE_SEND, .in = in,
                      .n_in = 2};
    bb_node *n = bb__rec_node(g, &req);
    if (!n)
        return g->r->err.code;
    const char **p = BB_VEC_PUSH(g->r->arena, &g->net_out_ports);
    if (!p || !(*p = bb_arena_strdup(g->r->arena, port)))
        return bb__rec_oom(g->r, g, what);
    if ((rc = bb__rec_meta(g, n, BB_REC_META_PORT, port)) ||
        (dest && (rc = bb__rec_meta(g, n, BB_META_DEST_CLASS, dest))) ||
        (rc = bb__rec_meta(g, n, BB_META_WIRE_CORRELATION, BB_WIRE_CORRELATION_NONE)))
        return rc;
    if (fn_meta2(g, BB_REC_META_NET_OUT_PREFIX, port, dest ? dest : ""))
        return bb__rec_oom(g->r, g, what);
    return BB_OK;
}

/* ---- scopes ------------------------------------------------------------------- */

static const char *scope_chain(const bb_rec *g)
{
    return g->scopes.n ? g->scopes.v[g->scopes.n - 1] : NULL;
}

int bb_rec_scope_begin(bb_rec *g, const char *name)
{
    static const char what[] = "with_module";
    int rc = bb__rec_ready(g, what);
    if (rc)
        return rc;
    if (!name_ok(name))
        return bb__rec_fail(g->r, g, what, "a scope needs a non-empty name");
    const char *outer = scope_chain(g);
    bb_arena *ma = g->r->model->arena;
    const char *chain = outer ? bb_arena_sprintf(ma, "%s_%s", outer, name)
                              : bb_arena_strdup(ma, name);
    const char **p = chain ? BB_VEC_PUSH(g->r->arena, &g->scopes) : NULL;
    if (!p)
        return bb__rec_oom(g->r, g, what);
    *p = chain;
    return BB_OK;
}

int bb_rec_scope_end(bb_rec *g)
{
    static const char what[] = "with_module";
    int rc = bb__rec_ready(g, what);
    if (rc)
        return rc;
    if (!g->scopes.n)
        return bb__rec_fail(g->r, g, what, "scope end without a matching begin");
    g->scopes.n--;
    return BB_OK;
}

/* ---- calls ---------------------------------------------------------------------- */

bb_call *bb_rec_call(bb_rec *g, bb_module *child)
{
    static const char what[] = "call";
    if (bb__rec_ready(g, what))
        return NULL;
    if (!child) {
        bb__rec_fail(g->r, g, what, "the called module is NULL");
        return NULL;
    }
    if (child->r != g->r) {
        bb__rec_fail(g->r, g, what, "module '%s' belongs to another recorder", child->name);
        return NULL;
    }
    if (child == g->m) {
        bb__rec_fail(g->r, g, what, "module '%s' calls itself", child->name);
        return NULL;
    }
    bb_call *c = bb_arena_alloc(g->r->arena, sizeof *c);
    bb_call **p = c ? BB_VEC_PUSH(g->r->arena, &g->calls) : NULL;
    if (!p) {
        bb__rec_oom(g->r, g, what);
        return NULL;
    }
    *p = c;
    c->g = g;
    c->child = child;
    return c;
}

static rec_binding *binding_find(rec_binding *v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].name, name) == 0)
            return &v[i];
    return NULL;
}

int bb_call_input(bb_call *c, const char *name, bb_val v)
{
    if (!c)
        return BB_EINVAL;
    bb_rec *g = c->g;
    char what[160];
    snprintf(what, sizeof what, "call %s", c->child->name);
    int rc = bb__rec_ready(g, what);
    if (rc)
        return rc;
    if (c->node)
        return bb__rec_fail(g->r, g, what, "input '%s' bound after the call was built",
                            name ? name : "(null)");
    if (!name_ok(name))
        return bb__rec_fail(g->r, g, what, "an input binding needs a name");
    if ((rc = check_input(g, v, what, name)))
        return rc;
    if (binding_find(c->ins.v, c->ins.n, name))
        return bb__rec_fail(g->r, g, what, "input '%s' bound twice", name);
    rec_binding *b = BB_VEC_PUSH(g->r->arena, &c->ins);
    if (!b || !(b->name = bb_arena_strdup(g->r->arena, name)))
        return bb__rec_oom(g->r, g, what);
    b->val = v.id;
    return BB_OK;
}

int bb_call_build(bb_call *c)
{
    if (!c)
        return BB_EINVAL;
    bb_rec *g = c->g;
    char what[160];
    snprintf(what, sizeof what, "call %s", c->child->name);
    int rc = bb__rec_ready(g, what);
    if (rc)
        return rc;
    if (c->node)
        return bb__rec_fail(g->r, g, what, "the call was already built");
    bb_arena *ma = g->r->model->arena;
    bb_node *n = bb_function_add_node(g->r->model, g->f, c->child->domain, c->child->name);
    if (!n)
        return bb__rec_oom(g->r, g, what);
    c->node = n;
    uint32_t k = c->child->n_calls++;
    const char *outer = scope_chain(g);
    const char *mi = outer ? bb_arena_sprintf(ma, "%s_%s#%u", outer, c->child->name, k)
                           : bb_arena_sprintf(ma, "%s#%u", c->child->name, k);
    if (!mi || (rc = bb__rec_meta(g, n, BB_META_MODULE_INSTANCE, mi)))
        return mi ? rc : bb__rec_oom(g->r, g, what);
    const char *home = c->child->klass ? c->child->klass : g->m->klass;
    if (home && (rc = bb__rec_meta(g, n, BB_META_HOME_CLASS, home)))
        return rc;
    return BB_OK;
}

/* The value carried by the child's output port `name` (fetched after the
 * call was built or before; its type is fixed at build when the child
 * records the port later). */
bb_val bb_call_output(bb_call *c, const char *name)
{
    if (!c)
        return BB_VAL_NONE;
    bb_rec *g = c->g;
    char what[160];
    snprintf(what, sizeof what, "call %s", c->child->name);
    if (bb__rec_ready(g, what))
        return BB_VAL_NONE;
    if (!name_ok(name)) {
        bb__rec_fail(g->r, g, what, "an output binding needs a name");
        return BB_VAL_NONE;
    }
    rec_binding *b = binding_find(c->outs.v, c->outs.n, name);
    if (b)
        return handle_of(g, b->val);
    /* The child's port type, when it is already recorded. */
    const bb_type_node *type = &BB_TYPE_ANY;
    bb_rec *cg = &c->child->body;
    long id = find_value(cg, name);
    if (id >= 0 && cg->vals.v[id].is_port)
        type = cg->vals.v[id].type;
    bb_val v = bb__rec_new_value(g, NULL, type, REC_VAL_SITE);
    if (!bb_val_ok(v))
        return BB_VAL_NONE;
    b = BB_VEC_PUSH(g->r->arena, &c->outs);
    if (!b || !(b->name = bb_arena_strdup(g->r->arena, name))) {
        bb__rec_oom(g->r, g, what);
        return BB_VAL_NONE;
    }
    b->val = v.id;
    return v;
}

/* ---- the node recorder ----------------------------------------------------------- */

int bb__rec_meta(bb_rec *g, bb_node *n, const char *key, const char *value)
{
    if (bb_kv_set(g->r->model->arena, &n->metadata, key, value))
        return bb__rec_oom(g->r, g, "metadata");
    return BB_OK;
}

static bool is_omit(bb_val v)
{
    return !v.g && v.id == UINT32_MAX && v.name && !*v.name;
}

static const char *slot_domain(const bb_slot *s)
{
    if (s->atomic_domain)
        return s->atomic_domain;
    return bb_role_domain(s->role);
}

static int add_attr(bb_rec *g, bb_node *n, const bb_rec_attr *ra, const char *what)
{
    bb_arena *ma = g->r->model->arena;
    if (!name_ok(ra->name))
        return bb__rec_fail(g->r, g, what, "an attribute needs a name");
    if (bb_node_attr(n, ra->name))
        return bb__rec_fail(g->r, g, what, "attribute '%s' given twice", ra->name);
    bb_attr *at = bb_node_add_attr(ma, n, ra->name, ra->type);
    if (!at)
        return bb__rec_oom(g->r, g, what);
    switch (ra->type) {
    case BB_ATTR_INT:
        at->i = ra->i;
        break;
    case BB_ATTR_FLOAT:
        at->f = ra->f;
        break;
    case BB_ATTR_STRING: {
        if (!ra->s)
            return bb__rec_fail(g->r, g, what, "attribute '%s': NULL string", ra->name);
        size_t l = strlen(ra->s);
        at->s.data = bb_arena_memdup(ma, ra->s, l + 1);
        at->s.len = l;
        at->has_s = true;
        if (!at->s.data)
            return bb__rec_oom(g->r, g, what);
        break;
    }
    case BB_ATTR_INTS:
        if (ra->count && !ra->ints)
            return bb__rec_fail(g->r, g, what, "attribute '%s': NULL ints", ra->name);
        for (size_t i = 0; i < ra->count; i++) {
            int64_t *p = BB_VEC_PUSH(ma, &at->ints);
            if (!p)
                return bb__rec_oom(g->r, g, what);
            *p = ra->ints[i];
        }
        break;
    case BB_ATTR_FLOATS:
        if (ra->count && !ra->floats)
            return bb__rec_fail(g->r, g, what, "attribute '%s': NULL floats", ra->name);
        for (size_t i = 0; i < ra->count; i++) {
            float *p = BB_VEC_PUSH(ma, &at->floats);
            if (!p)
                return bb__rec_oom(g->r, g, what);
            *p = ra->floats[i];
        }
        break;
    case BB_ATTR_TENSOR:
        if (!ra->t)
            return bb__rec_fail(g->r, g, what, "attribute '%s': NULL tensor", ra->name);
        if (!(at->t = bb_tensor_proto_clone(ma, ra->t)))
            return bb__rec_oom(g->r, g, what);
        break;
    case BB_ATTR_GRAPH:
        if (!ra->g)
            return bb__rec_fail(g->r, g, what, "attribute '%s': NULL graph", ra->name);
        if (!(at->g = bb_graph_clone(ma, ra->g)))
            return bb__rec_oom(g->r, g, what);
        break;
    case BB_ATTR_TYPE_PROTO:
        if (!ra->tp)
            return bb__rec_fail(g->r, g, what, "attribute '%s': NULL TypeProto", ra->name);
        if (!(at->tp = bb_type_proto_clone(ma, ra->tp)))
            return bb__rec_oom(g->r, g, what);
        break;
    default:
        return bb__rec_fail(g->r, g, what, "attribute '%s': unsupported type %d", ra->name,
                            (int)ra->type);
    }
    return BB_OK;
}

/* Which slot, if any, an op of `domain` must be recorded on. */
static int check_slot(bb_rec *g, const bb__op_req *q, const char *cat, const char *what)
{
    bb_slot *s = q->slot;
    if (s && s->m != g->m)
        return bb__rec_fail(g->r, g, what, "slot '%s' belongs to module '%s', not '%s'",
                            s->name, s->m->name, g->m->name);
    if (!bb_opset_is_reserved(cat))
        return BB_OK; /* a plugin's own opset: any slot, or none */
    bb_role want = bb_domain_role(cat);
    if (want != BB_ROLE_NONE) {
        if (!s)
            return bb__rec_fail(g->r, g, what, "needs a %s slot, got NULL", bb_role_name(want));
        if (s->role != want)
            return bb__rec_fail(g->r, g, what, "slot '%s' has role %s; this op needs a %s",
                                s->name, bb_role_name(s->role), bb_role_name(want));
        return BB_OK;
    }
    if (s && strcmp(cat, BB_DOMAIN_WIRE) == 0 && s->role != BB_ROLE_PROTOCOL)
        return bb__rec_fail(g->r, g, what, "slot '%s' is a %s; wire ops take a Protocol slot",
                            s->name, bb_role_name(s->role));
    if (s && strcmp(cat, BB_DOMAIN_WIRE) != 0)
        return bb__rec_fail(g->r, g, what, "takes no component slot (got '%s')", s->name);
    return BB_OK;
}

static int stamp_node(bb_rec *g, bb_node *n, const bb__op_req *q)
{
    int rc;
    bb_slot *s = q->slot;
    if (s) {
        char id[16];
        snprintf(id, sizeof id, "%u", s->id);
        if (s->concrete) {
            if ((rc = bb__rec_meta(g, n, BB_META_CONCRETE_TYPE, s->type_name)) ||
                (rc = bb__rec_meta(g, n, BB_META_INSTANCE, id)))
                return rc;
        } else if ((rc = bb__rec_meta(g, n, BB_META_REQUIRED_TRAIT, bb_role_name(s->role))) ||
                   (rc = bb__rec_meta(g, n, BB_META_SLOT_ID, id))) {
            return rc;
        }
        if ((rc = bb__rec_meta(g, n, BB_META_SLOT, s->name)))
            return rc;
    }
    if (q->original_op && (rc = bb__rec_meta(g, n, BB_META_ORIGINAL_OP, q->original_op)))
        return rc;
    const char *chain = scope_chain(g);
    if (chain && (rc = bb__rec_meta(g, n, BB_META_MODULE_INSTANCE, chain)))
        return rc;
    if (g->m->klass && (rc = bb__rec_meta(g, n, BB_META_HOME_CLASS, g->m->klass)))
        return rc;
    return BB_OK;
}

bb_node *bb__rec_node(bb_rec *g, const bb__op_req *q)
{
    const char *op = q->op_type ? q->op_type : "(null)";
    const char *dom = q->node_domain;
    if (!dom && q->slot)
        dom = slot_domain(q->slot);
    char what[192];
    snprintf(what, sizeof what, "%s::%s", dom ? dom : "?", op);
    if (bb__rec_ready(g, what))
        return NULL;
    bb_recorder *r = g->r;
    if (!q->op_type || !*q->op_type) {
        bb__rec_fail(r, g, what, "an op needs an op_type");
        return NULL;
    }
    if (!dom) {
        bb__rec_fail(r, g, what, "no domain: give one or record on a slot");
        return NULL;
    }
    const char *cat = q->catalog_domain ? q->catalog_domain : dom;
    if (check_slot(g, q, cat, what))
        return NULL;
    const bb_op_schema *schema = NULL;
    if (bb_opset_is_reserved(cat)) {
        schema = bb_op_schema_find(cat, q->op_type);
        if (!schema) {
            bb__rec_fail(r, g, what, "unknown op: %s has no op '%s'", cat, q->op_type);
            return NULL;
        }
        if (schema->flags & BB_OPF_COMPILER_INSERTED) {
            bb__rec_fail(r, g, what, "is inserted by the compiler, not authored");
            return NULL;
        }
        uint32_t lo, hi;
        bb_op_input_arity(schema, &lo, &hi);
        if (q->n_in < lo || q->n_in > hi) {
            bb__rec_fail(r, g, what, "takes %u..%u inputs, got %zu", lo,
                         hi, q->n_in);
            return NULL;
        }
        bb_op_output_arity(schema, &lo, &hi);
        if (q->n_out < lo || q->n_out > hi) {
            bb__rec_fail(r, g, what, "has %u..%u outputs, asked for %zu", lo, hi, q->n_out);
            return NULL;
        }
    }
    /* Inputs. */
    for (size_t i = 0; i < q->n_in; i++) {
        const bb_port_decl *pd = schema ? bb_op_input_at(schema, (uint32_t)i) : NULL;
        char port[64];
        if (pd)
            snprintf(port, sizeof port, "%s", pd->name);
        else
            snprintf(port, sizeof port, "#%zu", i);
        if (is_omit(q->in[i])) {
            if (pd && !pd->optional) {
                bb__rec_fail(r, g, what, "input '%s' is required", port);
                return NULL;
            }
            continue;
        }
        if (check_input(g, q->in[i], what, port))
            return NULL;
    }
    bb_model *m = r->model;
    bb_node *n = bb_function_add_node(m, g->f, dom, q->op_type);
    if (!n) {
        bb__rec_oom(r, g, what);
        return NULL;
    }
    size_t n_in = q->n_in;
    while (n_in && is_omit(q->in[n_in - 1]))
        n_in--; /* trailing omitted inputs are dropped */
    for (size_t i = 0; i < n_in; i++) {
        const char *nm = is_omit(q->in[i]) ? "" : g->vals.v[q->in[i].id].name;
        const char **p = BB_VEC_PUSH(m->arena, &n->inputs);
        if (!p) {
            bb__rec_oom(r, g, what);
            return NULL;
        }
        *p = nm; /* names are model-arena strings already */
    }
    for (size_t i = 0; i < q->n_attrs; i++)
        if (add_attr(g, n, &q->attrs[i], what))
            return NULL;
    for (size_t i = 0; i < q->n_out; i++) {
        const bb_type_node *t = q->out_types ? q->out_types[i] : NULL;
        if (!t && schema) {
            const bb_port_decl *pd = bb_op_output_at(schema, (uint32_t)i);
            t = pd ? pd->type : NULL;
        }
        bb_val v = bb__rec_new_value(g, NULL, t, REC_VAL_SITE);
        const char **p = bb_val_ok(v) ? BB_VEC_PUSH(m->arena, &n->outputs) : NULL;
        if (!p) {
            bb__rec_oom(r, g, what);
            return NULL;
        }
        *p = v.name;
        if (q->out)
            q->out[i] = v;
    }
    if (stamp_node(g, n, q))
        return NULL;
    if (schema) {
        bb_error e = {0};
        /* The node carries node_domain; the schema is the catalog's. */
        if (bb_op_schema_check_node(schema, n, &e)) {
            bb__rec_fail(r, g, what, "%s", e.msg);
            return NULL;
        }
    }
    return n;
}

int bb_rec_op(bb_rec *g, bb_slot *slot, const char *domain, const char *op_type,
              const bb_val *in, size_t n_in, const bb_rec_attr *attrs, size_t n_attrs,
              const bb_type_node *const *out_types, bb_val *out, size_t n_out)
{
    static const char what[] = "op";
    int rc = bb__rec_ready(g, what);
    if (rc)
        return rc;
    if ((n_in && !in) || (n_attrs && !attrs) || (n_out && !out))
        return bb__rec_fail(g->r, g, op_type ? op_type : what,
                            "NULL array with a non-zero count");
    for (size_t i = 0; i < n_out; i++)
        out[i] = BB_VAL_NONE;
    bb__op_req q = {.slot = slot, .node_domain = domain, .op_type = op_type, .in = in,
                    .n_in = n_in, .attrs = attrs, .n_attrs = n_attrs, .out_types = out_types,
                    .out = out, .n_out = n_out};
    /* A role op on an atomic-domain concrete: catalog = role domain. */
    if (!domain && slot && slot->atomic_domain) {
        q.catalog_domain = bb_role_domain(slot->role);
        q.original_op = q.catalog_domain
                            ? bb_arena_sprintf(g->r->arena, "%s::%s", q.catalog_domain,
                                               op_type ? op_type : "")
                            : NULL;
    }
    return bb__rec_node(g, &q) ? BB_OK : (g->r->err.code ? g->r->err.code : BB_ERECORD);
}
