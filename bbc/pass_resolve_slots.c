/*
 * pass_resolve_slots.c — per partition (its function, bootstraps and
 * sub-functions), matches every role node to the slot that runs it:
 * concrete nodes by (concrete_type, instance) / their slot stamp, generic
 * nodes by (required_trait, slot_id) / their slot stamp. Runs after
 * partitioning because different targets may bind different concretes.
 *
 * Stamps the resolved "slot" and the model-wide "slot_id" on every role node
 * (the engine's bootstrap touch set reads slot_id on every node) and
 * "slot_id.<slot>" on the partition function. Failures: a node naming a slot
 * nobody declares or binds is MissingBinding; a concrete node whose TYPE_NAME
 * fits several slots is AmbiguousRole; a bound type that does not declare a
 * role op used on its slot is RoleMethodFailed. Unbound generic slots are
 * left to validate_all_slots_bound (UnboundSlot).
 */
#include <stdio.h>
#include <string.h>

#include "bb/meta.h"
#include "bb/opsets.h"
#include "bbc/compiler_internal.h"
#include "bbc/util.h"

static const char *nm(const bb_node *n)
{
    return n->name && *n->name ? n->name : "(unnamed)";
}

static const char *dom(const bb_node *n)
{
    return bb_domain_is_onnx(n->domain) ? BB_DOMAIN_ONNX : n->domain;
}

/* Engine-native domains: no component declares these ops. */
static bool engine_native(const char *d)
{
    return bbc_str_eq(d, BB_DOMAIN_WIRE) || bbc_str_eq(d, BB_DOMAIN_SYSCALL) ||
           bbc_str_eq(d, BB_DOMAIN_COMPOSITE) || bbc_str_eq(d, BB_DOMAIN_ADDRESS_BOOK);
}

static int resolve_node(bbc_state *st, bb_model *pm, const bb_function *f, bb_node *n)
{
    if (!bbc_is_role_node(n))
        return BB_OK;
    bbc_slot *s = bbc_state_node_slot(st, n);
    const char *named = bbc_meta(n, BB_META_SLOT);
    const char *ct = bbc_meta(n, BB_META_CONCRETE_TYPE);
    /* A slot only nodes name (no module declares it, no binding fills it). */
    if (s && !s->declared && !s->binding)
        s = NULL;
    if (!s) {
        if (!named && ct) {
            size_t hits = 0;
            for (size_t i = 0; i < st->slots.n; i++)
                hits += bbc_str_eq(st->slots.v[i].type_name, ct);
            if (hits > 1)
                return bbc_fail(st, BBC_E_AMBIGUOUS_ROLE,
                                "function '%s': node '%s' (%s::%s) runs on a '%s' but %zu slots "
                                "hold that type and the node names none (role %s, slot_id %s)",
                                f->name, nm(n), dom(n), n->op_type, ct, hits,
                                bb_role_name(bb_domain_role(n->domain)),
                                bbc_meta(n, BB_META_SLOT_ID) ? bbc_meta(n, BB_META_SLOT_ID) : "-");
        }
        const char *sid = bbc_meta(n, BB_META_SLOT_ID);
        const char *what = named ? bb_arena_sprintf(st->scratch, "slot '%s'", named)
                           : ct  ? bb_arena_sprintf(st->scratch, "a '%s' slot", ct)
                                 : bb_arena_sprintf(st->scratch, "slot_id %s", sid ? sid : "?");
        return bbc_fail(st, BBC_E_MISSING_BINDING,
                        "function '%s': node '%s' (%s::%s) runs on %s, which no module declares "
                        "and no binding supplies",
                        f->name, nm(n), dom(n), n->op_type, what ? what : "?");
    }
    char buf[BBC_DECIMAL_MAX];
    const char *id = bbc_decimal(buf, s->slot_id);
    if ((!named && bbc_set_meta(pm->arena, n, BB_META_SLOT, s->name) != BB_OK) ||
        (!bbc_meta_is(n, BB_META_SLOT_ID, id) &&
         bbc_set_meta(pm->arena, n, BB_META_SLOT_ID, id) != BB_OK))
        return bbc_oom(st);
    if (!s->type || engine_native(n->domain))
        return BB_OK;
    uint32_t idx;
    if (bb_component_type_find_op(s->type, dom(n), n->op_type, &idx) ||
        (bb_domain_is_onnx(n->domain) && bb_component_type_find_op(s->type, "", n->op_type, &idx)))
        return BB_OK;
    return bbc_fail(st, BBC_E_ROLE_METHOD_FAILED,
                    "function '%s': node '%s' runs %s::%s on slot '%s', but '%s' declares no such "
                    "op",
                    f->name, nm(n), dom(n), n->op_type, s->name, s->type_name);
}

static int stamp_slot_ids(bbc_state *st, bbc_partition *p)
{
    bb_function *f = p->fn;
    char key[1200], id[16];
    for (size_t pass = 0; pass < 2; pass++) {
        size_t n = pass == 0 ? f->attributes.n : f->attribute_protos.n;
        for (size_t i = 0; i < n; i++) {
            const char *name = pass == 0 ? f->attributes.v[i] : f->attribute_protos.v[i]->name;
            const bbc_slot *s = bbc_state_slot(st, name);
            if (!s)
                continue;
            snprintf(key, sizeof key, "%s%s", BB_META_SLOT_ID_PREFIX, name);
            snprintf(id, sizeof id, "%u", s->slot_id);
            if (!bbc_str_eq(bb_kv_get(&f->metadata, key), id) &&
                bb_kv_set(p->model->arena, &f->metadata, key, id) != BB_OK)
                return bbc_oom(st);
        }
    }
    return BB_OK;
}

int bbc_pass_resolve_slots(bbc_state *st)
{
    for (size_t k = 0; k < st->parts.n; k++) {
        bbc_partition *p = st->parts.v[k];
        for (size_t i = 0; i < p->model->functions.n; i++) {
            const bb_function *f = p->model->functions.v[i];
            for (size_t j = 0; j < f->nodes.n; j++) {
                int rc = resolve_node(st, p->model, f, f->nodes.v[j]);
                if (rc != BB_OK)
                    return rc;
            }
        }
        int rc = stamp_slot_ids(st, p);
        if (rc != BB_OK)
            return rc;
    }
    return BB_OK;
}
