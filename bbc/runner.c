/*
 * runner.c — the pass table (one row per pass, from BBC_PASS_MAP) and the
 * pass orchestrator: run_pipeline walks validate_bootstrap_composition and
 * the 17 canonical passes in CANONICAL_PASS_NAMES order, skipping the ones
 * named in --without-stage, re-checks wire-edge storage after synthesis and,
 * with verify_each, checks every function's well-formedness after each pass
 * so a pass that breaks the IR is named. Each pass starts with the state's
 * scratch arena reset: pass-local tables reuse one block of memory instead
 * of piling up (they were most of a compile's memory).
 */
#include <stdio.h>
#include <string.h>

#include "bbc/compiler_internal.h"
#include "bbc/util.h"

static const bbc_pass PASSES[] = {
#define BBC__PASS_ROW(name, phase, summary) {#name, BBC_PHASE_##phase, bbc_pass_##name, summary},
    BBC_PASS_MAP(BBC__PASS_ROW)
#undef BBC__PASS_ROW
};

#define N_PASSES (sizeof PASSES / sizeof PASSES[0])

size_t bbc_pass_count(void)
{
    return N_PASSES;
}

const bbc_pass *bbc_pass_at(size_t i)
{
    return i < N_PASSES ? &PASSES[i] : NULL;
}

const bbc_pass *bbc_pass_find(const char *name)
{
    for (size_t i = 0; name && i < N_PASSES; i++)
        if (strcmp(PASSES[i].name, name) == 0)
            return &PASSES[i];
    return NULL;
}

const char *bbc_phase_name(bbc_phase p)
{
    switch (p) {
    case BBC_PHASE_PRE: return "pre-pipeline";
    case BBC_PHASE_SEAM: return "pipeline seam";
    case BBC_PHASE_CANONICAL: return "canonical";
    case BBC_PHASE_TAIL: return "tail";
    }
    return "?";
}

int bbc_verify_function(const bb_function *f, char *why, size_t cap)
{
    bb_arena *a = bb_arena_create();
    if (!a) {
        snprintf(why, cap, "out of memory");
        return BB_ENOMEM;
    }
    int rc = BB_OK;
    bbc_map prod;
    const char *dup = NULL;
    if (bbc_producers(a, f, &prod, &dup) != BB_OK) {
        snprintf(why, cap, "out of memory");
        rc = BB_ENOMEM;
        goto out;
    }
    if (dup) {
        snprintf(why, cap, "function '%s': value '%s' has two producers", f->name, dup);
        rc = BB_EVALIDATE;
        goto out;
    }
    for (size_t i = 0; i < f->nodes.n; i++) {
        const bb_node *n = f->nodes.v[i];
        for (size_t j = 0; j < n->inputs.n; j++) {
            const char *v = n->inputs.v[j];
            if (v && *v && !bbc_map_get(&prod, v, NULL)) {
                snprintf(why, cap, "function '%s': node '%s' (%s::%s) reads '%s', which nothing produces",
                         f->name, n->name ? n->name : "", n->domain ? n->domain : "",
                         n->op_type, v);
                rc = BB_EVALIDATE;
                goto out;
            }
        }
    }
    size_t *order = bb_arena_calloc(a, f->nodes.n + 1, sizeof *order);
    size_t sorted = 0;
    if (!order) {
        rc = BB_ENOMEM;
        snprintf(why, cap, "out of memory");
        goto out;
    }
    if (bbc_topo_order(a, f, order, &sorted) != BB_OK) {
        snprintf(why, cap, "function '%s': the dataflow has a cycle (%zu of %zu nodes ordered)",
                 f->name, sorted, f->nodes.n);
        rc = BB_EVALIDATE;
    }
out:
    bb_arena_destroy(a);
    return rc;
}

static int verify_state(bbc_state *st, const char *after)
{
    char why[512];
    if (st->parts.n == 0) {
        if (st->root && bbc_verify_function(st->root, why, sizeof why) != BB_OK)
            return bbc_fail(st, BBC_E_INTERNAL, "IR broken after pass %s: %s", after, why);
        return BB_OK;
    }
    for (size_t i = 0; i < st->parts.n; i++)
        if (st->parts.v[i]->fn &&
            bbc_verify_function(st->parts.v[i]->fn, why, sizeof why) != BB_OK)
            return bbc_fail(st, BBC_E_INTERNAL, "IR broken after pass %s: partition %s: %s",
                            after, st->parts.v[i]->cls, why);
    return BB_OK;
}

int bbc_run_pass(bbc_state *st, const bbc_pass *p)
{
    st->pass = p->name;
    /* What the last pass indexed is dead: its memory (already faulted in,
     * likely cached) serves this one. */
    bb_arena_reset(st->scratch);
    int rc = p->run(st);
    if (rc != BB_OK)
        return rc;
    if (st->opts->verify_each && p->phase != BBC_PHASE_TAIL)
        return verify_state(st, p->name);
    return BB_OK;
}

int bbc_run_pipeline(bbc_state *st)
{
    int rc;
    for (size_t i = 0; i < N_PASSES; i++) {
        const bbc_pass *p = &PASSES[i];
        if (p->phase != BBC_PHASE_SEAM && p->phase != BBC_PHASE_CANONICAL)
            continue;
        if (bbc_options_without(st->opts, p->name))
            continue;
        if ((rc = bbc_run_pass(st, p)) != BB_OK)
            return rc;
        if (p->run == bbc_pass_synthesize_wire_recvs &&
            !bbc_options_without(st->opts, "type_solver")) {
            st->pass = "type_solver";
            if ((rc = bbc_check_wire_storage(st)) != BB_OK)
                return rc;
        }
    }
    return BB_OK;
}
