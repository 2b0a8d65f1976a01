/*
 * model_run.h — the cmocka side of running a model on one node
 * (plugin_fixtures.h's pfx_model_engine / pfx_invoke / pfx_run_until):
 * each helper fails the test, naming what went wrong, instead of returning
 * a status. Header-only and static, for test files that include cmocka.h
 * first.
 */
#ifndef BB_TEST_MODEL_RUN_H
#define BB_TEST_MODEL_RUN_H

#include "engine_fixtures.h"
#include "plugin_fixtures.h"
#include "worker_pool.h"

/* targets[0..n) of m on one node; w (may be NULL) runs its work. */
static inline bb_engine *mr_install(bb_model *m, const char *const *targets, size_t n,
                                    const char *model_cfg, const char *data_cfg, pool *w)
{
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    if (w) {
        cfg.submit_work = pool_submit;
        cfg.submit_work_ud = w;
    }
    bb_error err = {0};
    bb_engine *e = pfx_model_engine(m, targets, n, model_cfg, data_cfg, &cfg, &err);
    if (!e)
        fail_msg("install: %s", err.msg);
    return e;
}

static inline void mr_invoke(bb_engine *e, const char *target, const char *input, bb_value *v)
{
    bb_error err = {0};
    if (pfx_invoke(e, target, input, v, &err))
        fail_msg("invoke %s: %s", target, err.msg);
}

/* The AppEvent topic (owned by log) once it arrives, NULL at the deadline;
 * fails on an op failure. */
static inline const fx_rec *mr_run_until(bb_engine *e, fx_log *log, const char *topic,
                                         double seconds)
{
    const fx_rec *r = pfx_run_until(e, log, topic, seconds);
    if (!r && fx_log_count(log, BB_STEP_OP_FAILED))
        fail_msg("op failed: %s", fx_log_nth(log, BB_STEP_OP_FAILED, 0)->c);
    return r;
}

/* The f32 scalar an event carries. */
static inline float mr_scalar(const fx_rec *r)
{
    assert_non_null(r);
    assert_int_equal(r->value->type->kind, BB_VK_TENSOR);
    return *bb_tensor_f32(r->value);
}

#endif
