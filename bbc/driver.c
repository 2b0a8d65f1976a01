/*
 * driver.c — bbc_compile (COMPILER.md "The pass pipeline"): copy the
 * recorded model, check its IR version, build the state (root, slot table,
 * bindings), run refine_polymorphic_value_info, the pipeline
 * (validate_bootstrap_composition + the 17 canonical passes), the user
 * stages once per partition in push order, then the tail
 * (resolve_component_dependencies, validate_all_slots_bound,
 * stamp_compilation_metadata, merge_partitions_into_one).
 *
 * Every pass is idempotent, and a compiled input is re-assembled into one
 * root by bbc_state_init, so compiling a compiled model yields it unchanged.
 * bbc_check runs the structural front half only.
 */
#include <string.h>

#include "bbc/compiler_internal.h"

static int check_ir_version(bbc_state *st)
{
    st->pass = "pipeline";
    int64_t want = st->opts->target_ir_version;
    if (st->model->ir_version != want)
        return bbc_fail(st, BBC_E_IR_VERSION_MISMATCH,
                        "the model has ir_version %lld, the target is %lld (--target-version)",
                        (long long)st->model->ir_version, (long long)want);
    return BB_OK;
}

static int run_stages(bbc_state *st, const bb_stage *const *stages, size_t n_stages)
{
    for (size_t i = 0; i < n_stages; i++) {
        const bb_stage *s = stages[i];
        if (!s || !s->run || bbc_options_without(st->opts, s->name))
            continue;
        st->pass = s->name ? s->name : "stage";
        for (size_t k = 0; k < st->parts.n; k++) {
            bbc_partition *p = st->parts.v[k];
            bb_error e = {0};
            int rc = s->run(s->state, p->model, &e);
            if (rc != BB_OK)
                return bbc_fail(st, BBC_E_STAGE_FAILED, "partition `%s`: %s", p->cls,
                                e.msg[0] ? e.msg : bb_status_str(rc));
            if (!p->model->functions.n || !p->model->functions.v[0])
                return bbc_fail(st, BBC_E_STAGE_FAILED,
                                "partition `%s`: the stage removed the partition function", p->cls);
            p->fn = p->model->functions.v[0];
        }
    }
    return BB_OK;
}

static int run_phase(bbc_state *st, bbc_phase phase)
{
    for (size_t i = 0; i < bbc_pass_count(); i++) {
        const bbc_pass *p = bbc_pass_at(i);
        if (p->phase != phase)
            continue;
        /* The merge is how the output comes to exist: never skipped. */
        if (bbc_options_without(st->opts, p->name) && p->run != bbc_pass_merge_partitions_into_one)
            continue;
        int rc = bbc_run_pass(st, p);
        if (rc != BB_OK)
            return rc;
    }
    return BB_OK;
}

int bbc_compile(const bb_model *recorded, const bbc_options *opts,
                const bbc_bindings *bindings, const bb_type_source *types,
                const bb_stage *const *stages, size_t n_stages, bb_model **out,
                bbc_error *err)
{
    *out = NULL;
    bbc_error_clear(err);
    bb_model *m = recorded ? bb_model_clone(recorded) : NULL;
    if (!m)
        return bbc_error_set(err, BBC_E_INTERNAL, "pipeline",
                             recorded ? "out of memory" : "no model given");
    bbc_state st;
    int rc = bbc_state_init(&st, m, opts, bindings, types, err);
    if (rc == BB_OK)
        rc = check_ir_version(&st);
    if (rc == BB_OK)
        rc = run_phase(&st, BBC_PHASE_PRE);
    if (rc == BB_OK)
        rc = bbc_run_pipeline(&st);
    if (rc == BB_OK)
        rc = run_stages(&st, stages, n_stages);
    if (rc == BB_OK)
        rc = run_phase(&st, BBC_PHASE_TAIL);
    if (rc == BB_OK) {
        *out = st.out;
        st.out = NULL;
    }
    bbc_state_free(&st);
    return rc;
}

int bbc_check(const bb_model *recorded, const bbc_options *opts, const bb_type_source *types,
              bbc_error *err)
{
    bbc_error_clear(err);
    bb_model *m = recorded ? bb_model_clone(recorded) : NULL;
    if (!m)
        return bbc_error_set(err, BBC_E_INTERNAL, "pipeline",
                             recorded ? "out of memory" : "no model given");
    /* Structure only: types no plugin describes are not an error here. */
    bbc_options o;
    if (opts)
        o = *opts;
    else
        bbc_options_init(&o);
    o.allow_unknown_types = true;
    bbc_state st;
    int rc = bbc_state_init(&st, m, &o, NULL, types, err);
    if (rc == BB_OK)
        rc = check_ir_version(&st);
    static const char *const FRONT[] = {"validate_bootstrap_composition", "inline_for_partition",
                                        "validate"};
    for (size_t i = 0; rc == BB_OK && i < sizeof FRONT / sizeof *FRONT; i++)
        if (!bbc_options_without(st.opts, FRONT[i]))
            rc = bbc_run_pass(&st, bbc_pass_find(FRONT[i]));
    bbc_state_free(&st);
    return rc;
}
