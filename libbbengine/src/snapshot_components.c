/*
 * snapshot_components.c — snapshot section "components": each component
 * instance's own state, as its type's snapshot / restore entry points
 * (bb/plugin.h) write and read it.
 *
 * Its own file because the subsystem that owns component instances is the
 * runtime linker (install.c makes them, bbe__uninstall unmakes them), and
 * this is not linking: it is the engine handing each instance's opaque
 * bytes to and from the plugin, the one section whose contents the engine
 * does not understand.
 *
 * Layout: the number of components, then per component in install order:
 * its slot name (checked against the install's), a flag, and when set the
 * bytes type->snapshot produced. A component whose type has no snapshot
 * entry, or that was never created, writes the flag 0 and keeps its
 * freshly created state on restore.
 */
#include <stdlib.h>
#include <string.h>

#include "libbbengine/src/snapshot.h"

int bbe__snap_write_components(bb_engine *e, bbe__snap_out *o, bb_error *err)
{
    bbe__snap_put_u(o, e->n_comps);
    for (uint32_t i = 0; i < e->n_comps; i++) {
        const bbe__comp *c = &e->comps[i];
        bb_writer_put_str(&o->w, c->slot);
        if (!c->type->snapshot || !c->created) {
            bbe__snap_put_u(o, 0);
            continue;
        }
        uint8_t *state = NULL;
        size_t len = 0;
        bb_error cerr;
        bb_error_clear(&cerr);
        if (c->type->snapshot(c->inst, &state, &len, &cerr) != BB_OK)
            return bb_error_set(err, BB_ERUNTIME, "snapshot: slot '%s' (%s): %s", c->slot,
                                c->type->type_name, cerr.msg);
        bbe__snap_put_u(o, 1);
        bb_writer_put_delimited(&o->w, state, len);
        free(state);
    }
    return BB_OK;
}

int bbe__snap_read_components(bb_engine *e, bbe__snap_in *in, bb_error *err)
{
    bbe__snap_expect(in, e->n_comps, "a component count that is not this install's");
    for (uint32_t i = 0; i < e->n_comps && !in->r.failed; i++) {
        const bbe__comp *c = &e->comps[i];
        size_t len, at = in->r.pos;
        const uint8_t *slot = bbe__snap_bytes(in, &len);
        if (!in->r.failed && (len != strlen(c->slot) || memcmp(slot, c->slot, len) != 0))
            bbe__snap_fail(in, at, "a slot name that is not this install's");
        if (!bbe__snap_flag(in))
            continue;
        const uint8_t *state = bbe__snap_bytes(in, &len);
        if (in->r.failed)
            break;
        if (!c->type->restore)
            return bb_error_set(err, BB_EVALIDATE, "restore: slot '%s' (%s) cannot restore state",
                                c->slot, c->type->type_name);
        bb_error cerr;
        bb_error_clear(&cerr);
        int rc = c->type->restore(c->inst, state, len, &cerr);
        if (rc != BB_OK)
            return bb_error_set(err, rc == BB_ENOMEM ? BB_ENOMEM : BB_EVALIDATE,
                                "restore: slot '%s' (%s): %s", c->slot, c->type->type_name,
                                cerr.msg);
    }
    return BB_OK;
}
