/*
 * trace.c — tracing spans (ENGINE.md Part 14) delivered to a host callback,
 * filtered by a category mask the host can change at any time. Call sites
 * test the mask first (BBE__TRACING), so a disabled category costs one branch.
 */
#include <string.h>

#include "libbbengine/src/engine_internal.h"

void bb_engine_set_trace(bb_engine *e, bb_trace_fn fn, void *ud)
{
    e->trace_fn = fn;
    e->trace_ud = ud;
}

unsigned bb_engine_trace_mask(const bb_engine *e) { return e->trace_mask; }

static const struct {
    const char *name;
    unsigned bit;
} CATS[] = {
    {"poll", BB_TRACE_POLL},   {"invoke", BB_TRACE_INVOKE}, {"inbound", BB_TRACE_INBOUND},
    {"event", BB_TRACE_EVENT}, {"wire", BB_TRACE_WIRE},     {"gate", BB_TRACE_GATE},
    {"bootstrap", BB_TRACE_BOOTSTRAP}, {"all", BB_TRACE_ALL},
};

int bb_engine_set_trace_filter(bb_engine *e, const char *directive, bb_error *err)
{
    unsigned mask = 0;
    if (!directive)
        directive = "";
    const char *p = directive;
    while (*p) {
        while (*p == ',' || *p == ' ')
            p++;
        if (!*p)
            break;
        size_t n = strcspn(p, ", ");
        /* "bb::engine=debug" style directives: take the part after "::" up to '=' */
        const char *w = p;
        size_t wl = n;
        const char *eq = memchr(w, '=', wl);
        if (eq)
            wl = (size_t)(eq - w);
        if (wl >= 4 && memcmp(w, "bb::", 4) == 0) {
            w += 4;
            wl -= 4;
        }
        bool ok = false;
        if ((wl == 4 && memcmp(w, "none", 4) == 0) || (wl == 3 && memcmp(w, "off", 3) == 0)) {
            mask = 0;
            ok = true;
        }
        for (size_t i = 0; !ok && i < sizeof CATS / sizeof CATS[0]; i++) {
            if (strlen(CATS[i].name) == wl && memcmp(CATS[i].name, w, wl) == 0) {
                mask |= CATS[i].bit;
                ok = true;
            }
        }
        if (!ok)
            return bb_error_set(err, BB_EINVAL, "trace filter: unknown category '%.*s' in \"%s\"",
                                (int)wl, w, directive);
        p += n;
    }
    e->trace_mask = mask;
    return BB_OK;
}

void bb_engine_set_trace_clock(bb_engine *e, uint64_t (*clock)(void *ud), void *ud)
{
    e->trace_clock = clock;
    e->trace_clock_ud = ud;
}

static void emit(bb_engine *e, bb_trace_cat cat, const char *name, bb_exec_id exec, uint32_t opi,
                 const char *detail, uint64_t value, uint64_t duration_ns)
{
    if (!e->trace_fn)
        return;
    bb_trace_event ev = {.cat = cat, .name = name, .exec_id = exec, .op_ref = opi,
                         .detail = detail, .value = value, .phase = e->phase_name,
                         .duration_ns = duration_ns};
    if (opi != BBE__NONE && opi < e->n_ops) {
        const bbe__op *op = &e->ops[opi];
        ev.op_type = op->op_type;
        ev.domain = op->domain;
        ev.node = op->label;
        if (op->disp == BBE__DISP_ATOMIC && op->comp < e->n_comps) {
            ev.concrete_type = e->comps[op->comp].type->type_name;
            ev.instance = e->comps[op->comp].slot;
        }
    }
    e->trace_fn(e->trace_ud, &ev);
}

void bbe__trace(bb_engine *e, bb_trace_cat cat, const char *name, bb_exec_id exec, uint32_t opi,
               const char *detail, uint64_t value)
{
    emit(e, cat, name, exec, opi, detail, value, 0);
}

void bbe__trace_op(bb_engine *e, bb_exec_id exec, uint32_t opi, const char *outcome,
                  uint64_t duration_ns)
{
    emit(e, BB_TRACE_INVOKE, "invoke", exec, opi, outcome, 0, duration_ns);
}
