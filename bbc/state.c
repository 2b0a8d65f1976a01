/*
 * state.c — the compile state the passes share: the working model and its
 * root function, the model-wide slot table (declarations, roles, slot ids,
 * bindings resolved against the type source), the net_in formals and the
 * partitions. A compiled input (passport "v1") is re-assembled into one root
 * here so the pipeline runs on it exactly as on a recording.
 */
#include <stdlib.h>
#include <string.h>

#include "bb/artifact.h"
#include "bb/meta.h"
#include "bb/opsets.h"
#include "bbc/compiler_internal.h"
#include "bbc/util.h"

#define BIND_PASS "bind"

void bbc_options_init(bbc_options *o)
{
    memset(o, 0, sizeof *o);
    o->per_hop_budget_ns = BBC_DEFAULT_PER_HOP_BUDGET_NS;
    o->target_ir_version = BB_FRAMEWORK_IR_VERSION;
}

bool bbc_options_without(const bbc_options *o, const char *name)
{
    if (!o || !name)
        return false;
    for (size_t i = 0; i < o->n_without; i++)
        if (o->without[i] && strcmp(o->without[i], name) == 0)
            return true;
    return false;
}

/* ---- slots -------------------------------------------------------------------- */

bbc_slot *bbc_state_slot(bbc_state *st, const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < st->slots.n; i++)
        if (strcmp(st->slots.v[i].name, name) == 0)
            return &st->slots.v[i];
    return NULL;
}

static bbc_slot *slot_get(bbc_state *st, const char *name)
{
    bbc_slot *s = bbc_state_slot(st, name);
    if (s)
        return s;
    s = BB_VEC_PUSH(st->arena, &st->slots);
    if (!s)
        return NULL;
    s->name = bb_arena_strdup(st->arena, name);
    s->slot_id = UINT32_MAX;
    return s->name ? s : NULL;
}

bbc_slot *bbc_state_node_slot(bbc_state *st, const bb_node *n)
{
    const char *name = bbc_meta(n, BB_META_SLOT);
    if (name)
        return bbc_state_slot(st, name);
    const char *ct = bbc_meta(n, BB_META_CONCRETE_TYPE);
    const char *sid = bbc_meta(n, BB_META_SLOT_ID);
    bbc_slot *hit = NULL;
    for (size_t i = 0; i < st->slots.n; i++) {
        bbc_slot *s = &st->slots.v[i];
        bool match = false;
        if (ct)
            match = bbc_str_eq(s->type_name, ct);
        else if (sid)
            match = s->slot_id != UINT32_MAX && (unsigned long)s->slot_id == strtoul(sid, NULL, 10);
        if (match) {
            if (hit)
                return NULL; /* ambiguous: resolve_slots reports it */
            hit = s;
        }
    }
    return hit;
}

static bool parse_u32(const char *s, uint32_t *out)
{
    if (!s || !*s || strlen(s) > 10)
        return false;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v > UINT32_MAX)
        return false;
    *out = (uint32_t)v;
    return true;
}

static int declare_slots(bbc_state *st, const bb_function *f)
{
    char key[1200];
    for (size_t pass = 0; pass < 2; pass++) {
        size_t n = pass == 0 ? f->attributes.n : f->attribute_protos.n;
        for (size_t i = 0; i < n; i++) {
            const char *name = pass == 0 ? f->attributes.v[i] : f->attribute_protos.v[i]->name;
            if (!name || !*name)
                continue;
            bbc_slot *s = slot_get(st, name);
            if (!s)
                return bbc_oom(st);
            snprintf(key, sizeof key, "%s%s", BB_META_SLOT_CONCRETE_TYPE_PREFIX, name);
            const char *ct = bb_kv_get(&f->metadata, key);
            snprintf(key, sizeof key, "%s%s", BB_META_SLOT_ROLE_PREFIX, name);
            bb_role role = bb_role_parse(bb_kv_get(&f->metadata, key));
            snprintf(key, sizeof key, "%s%s", BB_META_SLOT_ID_PREFIX, name);
            uint32_t sid;
            bool has_sid = parse_u32(bb_kv_get(&f->metadata, key), &sid);
            if (pass == 1 && ct) {
                if (s->type_name && !bbc_str_eq(s->type_name, ct))
                    return bbc_fail(st, BBC_E_SLOT_CONFLICT,
                                    "slot '%s' is declared as '%s' and as '%s' (function '%s')",
                                    name, s->type_name, ct, f->name);
                s->type_name = ct;
            }
            if (role != BB_ROLE_NONE) {
                if (s->role != BB_ROLE_NONE && s->role != role)
                    return bbc_fail(st, BBC_E_SLOT_CONFLICT,
                                    "slot '%s' is declared with roles %s and %s (function '%s')",
                                    name, bb_role_name(s->role), bb_role_name(role), f->name);
                s->role = role;
            }
            if (has_sid && s->slot_id == UINT32_MAX)
                s->slot_id = sid;
            if (pass == 0)
                s->generic = true;
            s->declared = true;
        }
    }
    return BB_OK;
}

static int slots_from_nodes(bbc_state *st, const bb_function *f)
{
    for (size_t i = 0; i < f->nodes.n; i++) {
        const bb_node *n = f->nodes.v[i];
        const char *name = bbc_meta(n, BB_META_SLOT);
        if (!name)
            continue;
        bbc_slot *s = slot_get(st, name);
        if (!s)
            return bbc_oom(st);
        bb_role role = bb_role_parse(bbc_meta(n, BB_META_REQUIRED_TRAIT));
        if (role == BB_ROLE_NONE)
            role = bb_domain_role(n->domain);
        if (s->role == BB_ROLE_NONE && role != BB_ROLE_NONE && !bb_domain_is_onnx(n->domain))
            s->role = role;
        else if (s->role == BB_ROLE_NONE && bbc_meta(n, BB_META_REQUIRED_TRAIT))
            s->role = role;
        uint32_t sid;
        if (s->slot_id == UINT32_MAX && parse_u32(bbc_meta(n, BB_META_SLOT_ID), &sid))
            s->slot_id = sid;
        if (!s->type_name && bbc_meta(n, BB_META_CONCRETE_TYPE))
            s->type_name = bbc_meta(n, BB_META_CONCRETE_TYPE);
    }
    return BB_OK;
}

static int assign_slot_ids(bbc_state *st)
{
    uint32_t next = 0;
    for (size_t i = 0; i < st->slots.n; i++)
        if (st->slots.v[i].slot_id != UINT32_MAX && st->slots.v[i].slot_id >= next)
            next = st->slots.v[i].slot_id + 1;
    for (size_t i = 0; i < st->slots.n; i++)
        if (st->slots.v[i].slot_id == UINT32_MAX)
            st->slots.v[i].slot_id = next++;
    return BB_OK;
}

static int resolve_bindings(bbc_state *st)
{
    if (st->bindings) {
        for (size_t i = 0; i < st->bindings->v.n; i++) {
            const bbc_binding *b = &st->bindings->v.v[i];
            bbc_slot *s = slot_get(st, b->slot);
            if (!s)
                return bbc_oom(st);
            s->binding = b;
            s->type_name = b->type_name;
        }
    }
    for (size_t i = 0; i < st->slots.n; i++) {
        bbc_slot *s = &st->slots.v[i];
        if (!s->type_name || !st->types)
            continue;
        s->type = bb_type_source_find(st->types, s->type_name);
        if (!s->type && st->opts->allow_unknown_types)
            continue;
        if (!s->type) {
            const char *where = st->types->where;
            return bbc_fail(st, BBC_E_UNKNOWN_COMPONENT_TYPE,
                            "slot '%s' is bound to '%s' (%s), which no plugin exports%s%s",
                            s->name, s->type_name, s->binding ? s->binding->origin : "recorded",
                            where ? "; searched " : "", where ? where : "");
        }
        if (s->role == BB_ROLE_NONE) {
            s->role = s->type->role;
        } else if (s->type->role != s->role) {
            return bbc_fail(st, BBC_E_WRONG_ROLE,
                            "slot '%s' needs role %s but '%s' (%s) has role %s", s->name,
                            bb_role_name(s->role), s->type_name,
                            s->binding ? s->binding->origin : "recorded",
                            bb_role_name(s->type->role));
        }
    }
    return BB_OK;
}

/* Remember the slots a class-homed function declares. */
static int note_class_slots(bbc_state *st, const bb_function *f)
{
    const char *cls = bb_kv_get(&f->metadata, BB_META_HOME_CLASS);
    if (!cls || bb_artifact_is_bootstrap(f))
        return BB_OK;
    size_t na = f->attributes.n, np = f->attribute_protos.n;
    for (size_t i = 0; i < na + np; i++) {
        const char *slot = i < na ? f->attributes.v[i] : f->attribute_protos.v[i - na]->name;
        if (!slot || bbc_state_class_declares(st, cls, slot))
            continue;
        bbc_class_slot *cs = BB_VEC_PUSH(st->arena, &st->class_slots);
        if (!cs)
            return bbc_oom(st);
        cs->cls = cls;
        cs->slot = slot;
        cs->attr = i < na ? NULL : f->attribute_protos.v[i - na];
    }
    return BB_OK;
}

const bb_attr *bbc_state_class_attr(const bbc_state *st, const char *cls, const char *slot)
{
    for (size_t i = 0; i < st->class_slots.n; i++)
        if (bbc_str_eq(st->class_slots.v[i].cls, cls) && bbc_str_eq(st->class_slots.v[i].slot, slot))
            return st->class_slots.v[i].attr;
    return NULL;
}

bool bbc_state_class_declares(const bbc_state *st, const char *cls, const char *slot)
{
    for (size_t i = 0; i < st->class_slots.n; i++)
        if (bbc_str_eq(st->class_slots.v[i].cls, cls) && bbc_str_eq(st->class_slots.v[i].slot, slot))
            return true;
    return false;
}

/* ---- root finding, compiled-input re-assembly ------------------------------------ */

static bool fn_called(const bb_model *m, const bb_function *f)
{
    for (size_t i = 0; i < m->functions.n; i++) {
        const bb_function *g = m->functions.v[i];
        if (g == f)
            continue;
        for (size_t j = 0; j < g->nodes.n; j++)
            if (bbc_callee(m, g->nodes.v[j]) == f)
                return true;
    }
    return false;
}

static bool has_prefix(const char *s, const char *prefix)
{
    return s && strncmp(s, prefix, strlen(prefix)) == 0;
}

static int push_unique(bb_arena *a, bb_str_list *l, const char *s)
{
    if (bb_str_list_find(l, s) >= 0)
        return BB_OK;
    return bb_str_list_push(a, l, s);
}

/* Concatenate every partition function of a compiled model into one root,
 * drop the passport and binding metadata (the tail re-stamps them). */
static int reassemble_compiled(bbc_state *st)
{
    bb_model *m = st->model;
    bb_arena *a = m->arena;
    bb_function *root = bb_arena_alloc(a, sizeof *root);
    if (!root)
        return bbc_oom(st);
    root->name = bb_arena_strdup(a, "__bbc_root");
    root->domain = NULL; /* the partitions' domain (the recorded root's), below */
    bbc_map seen_vi; /* value_info names already taken (the first wins) */
    if (bbc_map_init(&seen_vi, st->arena, 64) != BB_OK)
        return bbc_oom(st);
    size_t kept = 0;
    for (size_t i = 0; i < m->functions.n; i++) {
        bb_function *f = m->functions.v[i];
        if (!bb_artifact_is_partition(f)) {
            m->functions.v[kept++] = f;
            continue;
        }
        if (!root->domain) {
            root->domain = f->domain;
            root->doc_string = f->doc_string;
        }
        for (size_t j = 0; j < f->nodes.n; j++) {
            bb_node **slot = BB_VEC_PUSH(a, &root->nodes);
            if (!slot)
                return bbc_oom(st);
            *slot = f->nodes.v[j];
        }
        for (size_t j = 0; j < f->inputs.n; j++)
            if (push_unique(a, &root->inputs, f->inputs.v[j]) != BB_OK)
                return bbc_oom(st);
        for (size_t j = 0; j < f->outputs.n; j++)
            if (push_unique(a, &root->outputs, f->outputs.v[j]) != BB_OK)
                return bbc_oom(st);
        for (size_t j = 0; j < f->attributes.n; j++)
            if (push_unique(a, &root->attributes, f->attributes.v[j]) != BB_OK)
                return bbc_oom(st);
        for (size_t j = 0; j < f->attribute_protos.n; j++) {
            bb_attr *ap = f->attribute_protos.v[j];
            bool dup = false;
            for (size_t k = 0; k < root->attribute_protos.n; k++)
                dup |= bbc_str_eq(root->attribute_protos.v[k]->name, ap->name);
            if (dup)
                continue;
            bb_attr **slot = BB_VEC_PUSH(a, &root->attribute_protos);
            if (!slot)
                return bbc_oom(st);
            *slot = ap;
        }
        for (size_t j = 0; j < f->value_info.n; j++) {
            bb_value_info *vi = f->value_info.v[j];
            if (!vi->name || bbc_map_get(&seen_vi, vi->name, NULL))
                continue;
            bb_value_info **slot = BB_VEC_PUSH(a, &root->value_info);
            if (!slot || bbc_map_put(&seen_vi, vi->name, j) != BB_OK)
                return bbc_oom(st);
            *slot = vi;
        }
        for (size_t j = 0; j < f->opset_imports.n; j++)
            if (bb_opset_list_version(&root->opset_imports, f->opset_imports.v[j].domain) < 0 &&
                bb_opset_list_add(a, &root->opset_imports, f->opset_imports.v[j].domain,
                                  f->opset_imports.v[j].version) != BB_OK)
                return bbc_oom(st);
        for (size_t j = 0; j < f->metadata.n; j++) {
            const bb_kv *kv = &f->metadata.v[j];
            if (bbc_str_eq(kv->key, BB_META_PARTITION_HASH) ||
                bbc_str_eq(kv->key, BB_META_PARTITION_ID) ||
                bbc_str_eq(kv->key, BB_META_HOME_CLASS) || bb_kv_get(&root->metadata, kv->key))
                continue;
            if (bb_kv_set(a, &root->metadata, kv->key, kv->value) != BB_OK)
                return bbc_oom(st);
        }
    }
    m->functions.n = kept;
    bb_function **slot = BB_VEC_INSERT(a, &m->functions, 0);
    if (!slot)
        return bbc_oom(st);
    *slot = root;
    for (size_t i = 0; i < m->metadata.n;) {
        const char *k = m->metadata.v[i].key;
        if (bbc_str_eq(k, BB_META_COMPILED) || has_prefix(k, BB_META_BINDING_PREFIX))
            BB_VEC_REMOVE(&m->metadata, i);
        else
            i++;
    }
    st->root = root;
    return BB_OK;
}

static int find_root(bbc_state *st)
{
    bb_model *m = st->model;
    if (m->functions.n == 0)
        return bbc_fail(st, BBC_E_EMPTY_FUNCTION_TABLE,
                        "the model has no functions: nothing to compile (is it a recording?)");
    for (size_t i = 0; i < m->functions.n; i++) {
        int rc = note_class_slots(st, m->functions.v[i]);
        if (rc != BB_OK)
            return rc;
    }
    if (bb_artifact_is_compiled(m)) {
        for (size_t i = 0; i < m->functions.n; i++)
            if (bb_artifact_is_partition(m->functions.v[i]))
                return reassemble_compiled(st);
    }
    if (m->graph && m->graph->nodes.n == 1) {
        bb_function *f = bbc_callee(m, m->graph->nodes.v[0]);
        if (f) {
            st->root = f;
            return BB_OK;
        }
    }
    bb_function *found = NULL;
    for (size_t i = 0; i < m->functions.n; i++) {
        bb_function *f = m->functions.v[i];
        if (bb_artifact_is_bootstrap(f) || fn_called(m, f))
            continue;
        if (found)
            return bbc_fail(st, BBC_E_INTERNAL,
                            "cannot tell the root module: functions '%s' and '%s' are both "
                            "uncalled and the graph does not name one",
                            found->name, f->name);
        found = f;
    }
    if (!found)
        return bbc_fail(st, BBC_E_EMPTY_FUNCTION_TABLE,
                        "the model has only bootstrap functions: nothing to compile");
    st->root = found;
    return BB_OK;
}

static int collect_net_ins(bbc_state *st)
{
    const bb_function *f = st->root;
    const char *cls = bb_kv_get(&f->metadata, BB_META_HOME_CLASS);
    size_t pl = strlen(BB_META_NET_IN_PREFIX);
    for (size_t i = 0; i < f->metadata.n; i++) {
        const bb_kv *kv = &f->metadata.v[i];
        if (!has_prefix(kv->key, BB_META_NET_IN_PREFIX) || !kv->value)
            continue;
        bbc_net_in *ni = BB_VEC_PUSH(st->arena, &st->net_ins);
        if (!ni)
            return bbc_oom(st);
        ni->port = kv->key + pl;
        ni->value = kv->value;
        ni->cls = cls;
    }
    return BB_OK;
}

int bbc_state_init(bbc_state *st, bb_model *model, const bbc_options *opts,
                   const bbc_bindings *bindings, const bb_type_source *types, bbc_error *err)
{
    memset(st, 0, sizeof *st);
    st->model = model;
    st->err = err;
    st->pass = BIND_PASS;
    bbc_options_init(&st->default_opts);
    st->opts = opts ? opts : &st->default_opts;
    st->bindings = bindings;
    st->types = types;
    st->arena = bb_arena_create();
    st->scratch = bb_arena_create();
    if (!st->arena || !st->scratch || !model)
        return bbc_error_set(err, BBC_E_INTERNAL, BIND_PASS, "out of memory");
    int rc;
    st->pass = "pipeline";
    if ((rc = find_root(st)) != BB_OK)
        return rc;
    st->pass = BIND_PASS;
    for (size_t i = 0; i < model->functions.n; i++)
        if ((rc = declare_slots(st, model->functions.v[i])) != BB_OK)
            return rc;
    for (size_t i = 0; i < model->functions.n; i++)
        if ((rc = slots_from_nodes(st, model->functions.v[i])) != BB_OK)
            return rc;
    if ((rc = resolve_bindings(st)) != BB_OK || (rc = assign_slot_ids(st)) != BB_OK ||
        (rc = collect_net_ins(st)) != BB_OK)
        return rc;
    return BB_OK;
}

void bbc_state_free(bbc_state *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->parts.n; i++)
        bb_model_free(st->parts.v[i]->model);
    bb_model_free(st->model);
    bb_model_free(st->out);
    bb_arena_destroy(st->arena);
    bb_arena_destroy(st->scratch);
    memset(st, 0, sizeof *st);
}

bbc_partition *bbc_state_add_partition(bbc_state *st, const char *cls, bb_model *m)
{
    bbc_partition *p = bb_arena_alloc(st->arena, sizeof *p);
    bbc_partition **slot = p ? BB_VEC_PUSH(st->arena, &st->parts) : NULL;
    if (!slot) {
        bb_model_free(m);
        return NULL;
    }
    p->cls = bb_arena_strdup(st->arena, cls);
    p->model = m;
    p->fn = m->functions.n ? m->functions.v[0] : NULL;
    *slot = p;
    return p;
}

static int push_slot_name(bbc_state *st, const char ***v, size_t *n, size_t *cap,
                          const char *name)
{
    if (!name || !*name)
        return BB_OK;
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*v)[i], name) == 0)
            return BB_OK;
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        const char **nv = bb_arena_calloc(st->arena, nc, sizeof *nv);
        if (!nv)
            return BB_ENOMEM;
        if (*n)
            memcpy(nv, *v, *n * sizeof *nv);
        *v = nv;
        *cap = nc;
    }
    (*v)[(*n)++] = name;
    return BB_OK;
}

int bbc_partition_slots(bbc_state *st, const bbc_partition *p, const char ***out, size_t *n)
{
    const char **v = NULL;
    size_t cnt = 0, cap = 0;
    const bb_function *f = p->fn;
    for (size_t i = 0; i < f->attributes.n; i++)
        if (push_slot_name(st, &v, &cnt, &cap, f->attributes.v[i]) != BB_OK)
            return BB_ENOMEM;
    for (size_t i = 0; i < f->attribute_protos.n; i++)
        if (push_slot_name(st, &v, &cnt, &cap, f->attribute_protos.v[i]->name) != BB_OK)
            return BB_ENOMEM;
    for (size_t k = 0; k < p->model->functions.n; k++) {
        const bb_function *g = p->model->functions.v[k];
        for (size_t i = 0; i < g->nodes.n; i++) {
            const char *s = bbc_meta(g->nodes.v[i], BB_META_SLOT);
            if (s && push_slot_name(st, &v, &cnt, &cap, s) != BB_OK)
                return BB_ENOMEM;
        }
    }
    *out = v;
    *n = cnt;
    return BB_OK;
}
