/*
 * pass_resolve_component_dependencies.c — every dependency a bound type
 * declares (#[depends(role = "slot")], bb_dependency_decl) must name a slot
 * the bind chain bound, to a type of the declared role; otherwise
 * UnboundDependency naming the component, the slot it is bound at and the
 * required role and slot.
 *
 * A dependency slot joins every partition whose components need it
 * (transitively), with its declaration copied from the module that declares
 * it (a binding-only slot becomes a generic attribute), so each partition
 * is self-contained for install.
 */
#include <string.h>

#include "bb/meta.h"
#include "bbc/compiler_internal.h"
#include "bbc/util.h"

static bool declares(const bb_function *f, const char *slot)
{
    if (bb_str_list_find(&f->attributes, slot) >= 0)
        return true;
    for (size_t i = 0; i < f->attribute_protos.n; i++)
        if (bbc_str_eq(f->attribute_protos.v[i]->name, slot))
            return true;
    return false;
}

/* Copy slot's declaration (and its metadata) into p's function. */
static int adopt_slot(bbc_state *st, bbc_partition *p, const char *slot)
{
    bb_function *pf = p->fn;
    bb_arena *a = p->model->arena;
    if (declares(pf, slot))
        return BB_OK;
    const bb_function *src = NULL;
    for (size_t i = 0; i < st->model->functions.n && !src; i++)
        if (declares(st->model->functions.v[i], slot))
            src = st->model->functions.v[i];
    if (!src)
        return bb_str_list_push(a, &pf->attributes, slot) == BB_OK ? BB_OK : bbc_oom(st);
    if (bb_str_list_find(&src->attributes, slot) >= 0) {
        if (bb_str_list_push(a, &pf->attributes, slot) != BB_OK)
            return bbc_oom(st);
    } else {
        for (size_t i = 0; i < src->attribute_protos.n; i++) {
            if (!bbc_str_eq(src->attribute_protos.v[i]->name, slot))
                continue;
            bb_attr *c = bb_attr_clone(a, src->attribute_protos.v[i]);
            bb_attr **dst = c ? BB_VEC_PUSH(a, &pf->attribute_protos) : NULL;
            if (!dst)
                return bbc_oom(st);
            *dst = c;
        }
    }
    static const char *const PREFIXES[] = {BB_META_SLOT_CONCRETE_TYPE_PREFIX,
                                           BB_META_SLOT_ROLE_PREFIX};
    for (size_t k = 0; k < 2; k++) {
        char *key = bb_arena_sprintf(st->scratch, "%s%s", PREFIXES[k], slot);
        const char *v = key ? bb_kv_get(&src->metadata, key) : NULL;
        if (!key)
            return bbc_oom(st);
        if (v && bb_kv_set(a, &pf->metadata, key, v) != BB_OK)
            return bbc_oom(st);
    }
    return BB_OK;
}

static int check_partition(bbc_state *st, bbc_partition *p)
{
    /* Fixpoint: adopting a dependency may bring its own dependencies. */
    for (size_t round = 0; round < 64; round++) {
        const char **names;
        size_t n;
        if (bbc_partition_slots(st, p, &names, &n) != BB_OK)
            return bbc_oom(st);
        bool added = false;
        for (size_t i = 0; i < n; i++) {
            const bbc_slot *s = bbc_state_slot(st, names[i]);
            if (!s || !s->type)
                continue;
            for (uint32_t d = 0; d < s->type->n_deps; d++) {
                const bb_dependency_decl *dep = &s->type->deps[d];
                const bbc_slot *ds = bbc_state_slot(st, dep->slot);
                if (!ds || !ds->type_name)
                    return bbc_fail(st, BBC_E_UNBOUND_DEPENDENCY,
                                    "component '%s' bound at slot '%s' depends on role %s at slot "
                                    "'%s', which is not bound (--bind %s=TYPE_NAME)",
                                    s->type_name, s->name, bb_role_name(dep->role), dep->slot,
                                    dep->slot);
                if (dep->role != BB_ROLE_NONE && ds->role != dep->role)
                    return bbc_fail(st, BBC_E_UNBOUND_DEPENDENCY,
                                    "component '%s' bound at slot '%s' depends on role %s at slot "
                                    "'%s', but that slot holds '%s' of role %s",
                                    s->type_name, s->name, bb_role_name(dep->role), dep->slot,
                                    ds->type_name, bb_role_name(ds->role));
                if (!declares(p->fn, dep->slot)) {
                    int rc = adopt_slot(st, p, dep->slot);
                    if (rc != BB_OK)
                        return rc;
                    added = true;
                }
            }
        }
        if (!added)
            return BB_OK;
    }
    return bbc_fail(st, BBC_E_INTERNAL, "partition `%s`: dependency closure did not converge",
                    p->cls);
}

int bbc_pass_resolve_component_dependencies(bbc_state *st)
{
    for (size_t k = 0; k < st->parts.n; k++) {
        int rc = check_partition(st, st->parts.v[k]);
        if (rc != BB_OK)
            return rc;
    }
    return BB_OK;
}
