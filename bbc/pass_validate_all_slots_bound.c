/*
 * pass_validate_all_slots_bound.c — every slot a partition declares or its
 * nodes run on has a TYPE_NAME (recorded concrete, or --bind / bindings
 * file); otherwise UnboundSlot naming the partition, the slot and its role.
 */
#include "bbc/compiler_internal.h"
#include "bbc/util.h"

int bbc_pass_validate_all_slots_bound(bbc_state *st)
{
    for (size_t k = 0; k < st->parts.n; k++) {
        const bbc_partition *p = st->parts.v[k];
        const char **names;
        size_t n;
        if (bbc_partition_slots(st, p, &names, &n) != BB_OK)
            return bbc_oom(st);
        for (size_t i = 0; i < n; i++) {
            const bbc_slot *s = bbc_state_slot(st, names[i]);
            if (s && s->type_name)
                continue;
            bb_role role = s ? s->role : BB_ROLE_NONE;
            return bbc_fail(st, BBC_E_UNBOUND_SLOT,
                            "partition `%s`: slot '%s'%s%s%s has no binding (bbc compile --bind "
                            "%s=TYPE_NAME, or a bindings file)",
                            p->cls, names[i], role ? " (" : "", role ? bb_role_name(role) : "",
                            role ? ")" : "", names[i]);
        }
    }
    return BB_OK;
}
