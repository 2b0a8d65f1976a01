/*
 * nn::Mlp through the engine (one node, no network, in-process): compiled
 * artifacts built by hand (tests/unit/support/engine_fixtures.h) bind the
 * model and a data source from the build's plugins, and the engine drives
 * Train and EvaluateMetrics — inline, and on a real worker thread while the
 * node keeps answering other ops.
 *
 * FedProx's proximal_mu is checked step by step against the model's own
 * Gradients.
 *
 * The acceptance case: a 64-32-10 relu Adam MLP trained on 80% of the
 * handwritten digits (scripts/fetch-data) must reach >= 95% accuracy on the
 * held-out 20% within 10 s on one core; the figure is printed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "support/engine_fixtures.h"
#include "support/plugin_fixtures.h"
#include "support/model_run.h"
#include "support/worker_pool.h"

#define MODEL "ai.bytesandbrains.role.model"
#define SLOT "ai.bytesandbrains.slot"

static double now_s(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- artifacts and runs -------------------------------------------------------------------- */

/* Target Central(go) -> Train(epochs) -> EvaluateMetrics -> loss, accuracy,
 * num_samples; target Peek(go) -> Params -> p; target Load(x) ->
 * LoadParameters -> cmd. All on slot "model" (nn::Mlp) with "data". */
static bb_model *mlp_model(const char *data_type, int64_t epochs)
{
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Central", "go", "loss,accuracy,num_samples");
    bb_node *n = fx_op(m, f, MODEL, "Train", "go", "params,num_samples");
    fx_meta(m, n, SLOT, "model");
    if (epochs)
        fx_int(m, n, "epochs", epochs);
    n = fx_op(m, f, MODEL, "EvaluateMetrics", "params", "loss,accuracy");
    fx_meta(m, n, SLOT, "model");
    bb_function *p = fx_fn(m, "Peek", "go", "p");
    fx_meta(m, fx_op(m, p, MODEL, "Params", "", "p"), SLOT, "model");
    bb_function *l = fx_fn(m, "Load", "x", "cmd");
    fx_meta(m, fx_op(m, l, MODEL, "LoadParameters", "x", "cmd"), SLOT, "model");
    fx_type(m, l, "x", &BB_TYPE_TENSOR_F32);
    char triple[64];
    snprintf(triple, sizeof triple, "DataSource|%s|1", data_type);
    const char *targets[3] = {"Central", "Peek", "Load"};
    for (int i = 0; i < 3; i++) {
        fx_bind(m, targets[i], "model", "Model|nn::Mlp|0");
        fx_bind(m, targets[i], "data", triple);
    }
    return m;
}

static const char *const TARGETS[] = {"Central", "Peek", "Load"};

static bb_engine *install(bb_model *m, const char *model_cfg, const char *data_cfg, pool *w)
{
    return mr_install(m, TARGETS, sizeof TARGETS / sizeof *TARGETS, model_cfg, data_cfg, w);
}

static bool under_sanitizer_or_valgrind(void)
{
#if defined(__SANITIZE_ADDRESS__)
    return true;
#else
    const char *pre = getenv("LD_PRELOAD");
    return pre && strstr(pre, "valgrind");
#endif
}

/* ---- acceptance: digits ---------------------------------------------------------------------- */

static void test_digits_centralized_baseline(void **state)
{
    (void)state;
    if (!pfx_fetch_data())
        fail_msg("scripts/fetch-data could not provide data/digits.csv.gz");
    cpu_set_t one; /* one core: this thread, and the BLAS kernels it runs */
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu() >= 0 ? sched_getcpu() : 0, &one);
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    openblas_set_num_threads(1);

    enum { EPOCHS = 40 };
    char data_cfg[512];
    snprintf(data_cfg, sizeof data_cfg,
             "{\"path\": \"%s\", \"holdout\": 0.2, \"split_seed\": 0, \"normalization\": "
             "\"min-max\", \"batch_size\": 32, \"seed\": 1}",
             pfx_repo_path("data/digits.csv.gz"));
    const char *model_cfg = "{\"layers\": [64, 32, 10], \"activation\": \"relu\", \"optimizer\": "
                            "\"adam\", \"learning_rate\": 0.003, \"batch_size\": 32, \"seed\": 1}";
    bb_model *m = mlp_model("data::Csv", EPOCHS);
    double w0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
    bb_engine *e = install(m, model_cfg, data_cfg, NULL);
    fx_log log = {0};
    mr_invoke(e, "Central", "go", bb_value_trigger());
    const fx_rec *acc = mr_run_until(e, &log, "accuracy", 120);
    double wall = now_s(CLOCK_MONOTONIC) - w0, cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    float a = mr_scalar(acc), loss = mr_scalar(fx_log_app(&log, "loss", 0));
    const fx_rec *ns = fx_log_app(&log, "num_samples", 0);
    assert_non_null(ns);
    uint64_t seen = ns->value->u.u64;
    print_message("  digits 64-32-10 relu Adam: %.2f%% accuracy (loss %.4f) on the 359 held-out "
                  "images after %d epochs over the other 1438 (%llu samples); %.2f s wall, "
                  "%.2f s CPU, one core\n",
                  100.0 * a, (double)loss, EPOCHS, (unsigned long long)seen, wall, cpu);
    assert_int_equal(seen, (uint64_t)EPOCHS * 1438);
    assert_true(a >= 0.95f);
    if (!under_sanitizer_or_valgrind())
        assert_true(wall < 10.0);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

/* ---- the node keeps serving while a worker trains ------------------------------------------- */

static void test_train_on_a_worker_while_the_node_serves(void **state)
{
    (void)state;
    pool w;
    pool_init(&w);
    bb_model *m = mlp_model("data::Synthetic", 3);
    bb_engine *e = install(m, "{\"layers\": [2, 8, 2], \"learning_rate\": 0.1, \"seed\": 3}",
                           "{\"samples\": 200, \"cluster_std\": 0.5, \"batch_size\": 10}", &w);
    assert_int_equal(pool_start(&w, e), 0);
    fx_log log = {0};
    mr_invoke(e, "Peek", "go", bb_value_trigger());
    const fx_rec *p0 = mr_run_until(e, &log, "p", 5);
    assert_non_null(p0);
    bb_value *initial = bb_value_ref(p0->value);

    mr_invoke(e, "Central", "go", bb_value_trigger()); /* its work waits at the closed gate */
    fx_run(e, &log, 1, 10);
    assert_true(bb_engine_pending_async_count(e) >= 1);
    /* the node answers while the model trains, from the committed parameters */
    mr_invoke(e, "Peek", "go", bb_value_trigger());
    fx_run(e, &log, 1, 10);
    const fx_rec *p1 = fx_log_app(&log, "p", 1);
    assert_non_null(p1);
    assert_true(bb_value_equal(p1->value, initial));
    assert_null(fx_log_app(&log, "accuracy", 0));
    /* a change to the model waits for the running Train */
    float zeros[2 * 8 + 8 + 8 * 2 + 2] = {0};
    mr_invoke(e, "Load", "x", fx_f32(zeros, sizeof zeros / sizeof *zeros));
    fx_run(e, &log, 1, 10);
    assert_null(fx_log_app(&log, "cmd", 0));

    pool_gate(&w, true);
    assert_non_null(mr_run_until(e, &log, "cmd", 30));
    size_t i_ns = 0, i_cmd = 0;
    for (size_t i = 0; i < log.n; i++) {
        if (log.v[i].kind == BB_STEP_APP_EVENT && !strcmp(log.v[i].b, "num_samples"))
            i_ns = i;
        if (log.v[i].kind == BB_STEP_APP_EVENT && !strcmp(log.v[i].b, "cmd"))
            i_cmd = i;
    }
    assert_true(i_ns > 0 && i_cmd > i_ns); /* Train committed, then the load ran */
    assert_int_equal(fx_log_app(&log, "num_samples", 0)->value->u.u64, 3 * 200);
    mr_invoke(e, "Peek", "go", bb_value_trigger());
    const fx_rec *p2 = NULL;
    for (double end = now_s(CLOCK_MONOTONIC) + 5; !p2 && now_s(CLOCK_MONOTONIC) < end;) {
        fx_run(e, &log, 1, 10);
        p2 = fx_log_app(&log, "p", 2);
    }
    assert_non_null(p2);
    assert_true(fx_f32_eq(p2->value, zeros, sizeof zeros / sizeof *zeros));
    pthread_mutex_lock(&w.mu);
    assert_true(w.ran >= 1); /* the training really ran on the worker */
    pthread_mutex_unlock(&w.mu);
    bb_value_unref(initial);
    pool_stop(&w);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

static void test_train_and_evaluate_synthetic_inline(void **state)
{
    (void)state;
    bb_model *m = mlp_model("data::Synthetic", 0); /* no epochs attribute: the config's */
    bb_engine *e = install(m, "{\"layers\": [4, 16, 3], \"learning_rate\": 0.05, "
                              "\"momentum\": 0.9, \"epochs\": 5, \"seed\": 2}",
                           "{\"samples\": 600, \"features\": 4, \"classes\": 3, \"holdout\": "
                           "0.25, \"batch_size\": 50, \"normalization\": \"standardize\"}",
                           NULL);
    fx_log log = {0};
    mr_invoke(e, "Central", "go", bb_value_trigger());
    float a = mr_scalar(mr_run_until(e, &log, "accuracy", 30));
    assert_true(a >= 0.95f);
    assert_int_equal(fx_log_app(&log, "num_samples", 0)->value->u.u64, 5 * 450);
    assert_true(mr_scalar(fx_log_app(&log, "loss", 0)) < 0.3f);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

/* The engine (and the model) go away while a Train waits in the pool's
 * queue, and while one runs: nothing leaks, nothing is touched after it is
 * freed (ASan / valgrind runs of this test check both). */
static void test_model_destroyed_with_work_queued_or_running(void **state)
{
    (void)state;
    for (int running = 0; running < 2; running++) {
        pool w;
        pool_init(&w);
        bb_model *m = mlp_model("data::Synthetic", 50);
        bb_engine *e = install(m, "{\"layers\": [64, 256, 10], \"seed\": 1}",
                               "{\"samples\": 100000, \"features\": 64, \"classes\": 10, "
                               "\"batch_size\": 1000}",
                               &w);
        assert_int_equal(pool_start(&w, e), 0);
        fx_log log = {0};
        mr_invoke(e, "Central", "go", bb_value_trigger());
        fx_run(e, &log, 1, 10);
        assert_int_equal(bb_engine_pending_async_count(e), 1);
        if (running) { /* let the worker start, then pull the rug */
            pool_gate(&w, true);
            pthread_mutex_lock(&w.mu);
            while (!w.running)
                pthread_cond_wait(&w.cv, &w.mu);
            pthread_mutex_unlock(&w.mu);
        }
        pthread_mutex_lock(&w.mu);
        w.e = NULL;
        pthread_mutex_unlock(&w.mu);
        bb_engine_free(e); /* destroys the model: its job is orphaned or dropped */
        pool_stop(&w); /* a queued job never runs (as bbd cancels it) */
        assert_int_equal(w.ran, running);
        fx_log_free(&log);
        bb_model_free(m);
    }
}

/* ---- errors travel as OpFailed ------------------------------------------------------------------ */

static void test_train_errors_fail_the_op(void **state)
{
    (void)state;
    /* 5 classes of labels for a 3-output model */
    bb_model *m = mlp_model("data::Synthetic", 1);
    bb_engine *e = install(m, "{\"layers\": [2, 4, 3]}", "{\"classes\": 5}", NULL);
    fx_log log = {0};
    mr_invoke(e, "Central", "go", bb_value_trigger());
    fx_run(e, &log, 1, 20);
    const fx_rec *f = fx_log_nth(&log, BB_STEP_OP_FAILED, 0);
    assert_non_null(f);
    assert_string_equal(f->b, "Train");
    assert_non_null(strstr(f->c, "not a class id in [0, 3)"));
    fx_log_free(&log);
    bb_engine_free(e);
    /* a batch of the wrong width */
    e = install(m, "{\"layers\": [3, 4, 2]}", "{\"features\": 2}", NULL);
    mr_invoke(e, "Central", "go", bb_value_trigger());
    fx_run(e, &log, 1, 20);
    f = fx_log_nth(&log, BB_STEP_OP_FAILED, 0);
    assert_non_null(f);
    assert_non_null(strstr(f->c, "[rows, 3 inputs]"));
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

/* attack_update_scale (a poisoned client, for tests and demos): Train
 * answers start + scale x (trained - start); the node keeps the trained
 * parameters. Two nodes, same seeds, same data: one honest, one scaled. */
static void test_attack_update_scale(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "TrainOut", "go", "params");
    bb_node *n = fx_op(m, f, MODEL, "Train", "go", "params");
    fx_meta(m, n, SLOT, "model");
    bb_function *p = fx_fn(m, "Peek", "go", "p");
    fx_meta(m, fx_op(m, p, MODEL, "Params", "", "p"), SLOT, "model");
    const char *targets[2] = {"TrainOut", "Peek"};
    for (int i = 0; i < 2; i++) {
        fx_bind(m, targets[i], "model", "Model|nn::Mlp|0");
        fx_bind(m, targets[i], "data", "DataSource|data::Synthetic|1");
    }
    const char *data = "{\"samples\": 200, \"features\": 4, \"classes\": 3, \"seed\": 3}";
    const char *cfg[2] = {"{\"layers\": [4, 8, 3], \"learning_rate\": 0.05, \"seed\": 2}",
                          "{\"layers\": [4, 8, 3], \"learning_rate\": 0.05, \"seed\": 2, "
                          "\"attack_update_scale\": 1000}"};
    bb_value *start[2], *trained[2], *kept[2];
    for (int k = 0; k < 2; k++) {
        bb_engine *e = fx_engine(1, 7001, NULL);
        pfx_slot_config sc[2] = {{"model", cfg[k]}, {"data", data}};
        bb_engine_registry reg = pfx_registry(sc, 2);
        bb_error err = {0};
        if (bb_engine_install(e, m, targets, 2, &reg, &err) != BB_OK)
            fail_msg("install: %s", err.msg);
        fx_log log = {0};
        mr_invoke(e, "Peek", "go", bb_value_trigger());
        start[k] = bb_value_ref(mr_run_until(e, &log, "p", 10)->value);
        mr_invoke(e, "TrainOut", "go", bb_value_trigger());
        trained[k] = bb_value_ref(mr_run_until(e, &log, "params", 10)->value);
        mr_invoke(e, "Peek", "go", bb_value_trigger());
        fx_run(e, &log, 1, 10);
        kept[k] = bb_value_ref(fx_log_app(&log, "p", 1)->value);
        fx_log_free(&log);
        bb_engine_free(e);
    }
    assert_true(bb_value_equal(start[0], start[1]));
    assert_true(bb_value_equal(kept[0], trained[0]));  /* honest: answers what it keeps */
    assert_true(bb_value_equal(kept[1], trained[0]));  /* the attacker keeps the honest result */
    const float *s0 = bb_tensor_f32(start[0]), *h = bb_tensor_f32(trained[0]);
    const float *a = bb_tensor_f32(trained[1]);
    size_t moved = 0;
    for (size_t i = 0; i < bb_tensor_numel(start[0]); i++) {
        float want = s0[i] + 1000.0f * (h[i] - s0[i]);
        assert_true(fabsf(a[i] - want) <= 1e-3f * (1.0f + fabsf(want)));
        moved += h[i] != s0[i];
    }
    assert_true(moved > 0);
    for (int k = 0; k < 2; k++) {
        bb_value_unref(start[k]);
        bb_value_unref(trained[k]);
        bb_value_unref(kept[k]);
    }
    bb_model_free(m);
}

/* ---- FedProx ----------------------------------------------------------------------------------- */

/* One op of a directly created component (no engine), two inputs at most. */
static bb_value *direct_call(const bb_component_type *t, void *inst, const char *op, bb_value *a,
                             bb_value *b, bb_value **second)
{
    bb_value *in[2] = {a, b}, *out[2] = {0};
    bb_error err = {0};
    uint32_t n_in = b ? 2 : a ? 1 : 0, n_out = second ? 2 : 1;
    if (pfx_call(t, inst, NULL, op, NULL, in, n_in, out, n_out, &err))
        fail_msg("%s: %s", op, err.msg);
    if (second)
        *second = out[1];
    return out[0];
}

/* proximal_mu: Train's SGD steps gain mu (w - w0), w0 the center (here the
 * initial parameters: no LoadParameters). Two steps of one epoch (8 rows,
 * minibatches of 4) against the same steps by hand from the model's own
 * Gradients op: the first step equals plain SGD's (w = w0), the second
 * differs by -lr mu (w1 - w0). */
static void test_fedprox_steps_by_hand(void **state)
{
    (void)state;
    const char *data = "{\"samples\": 8, \"features\": 3, \"classes\": 2, \"batch_size\": 4, "
                       "\"shuffle\": false, \"generator_seed\": 5}";
    const float lr = 0.5f, mu = 2.0f;
    char plain[160], prox[200];
    snprintf(plain, sizeof plain, "{\"layers\": [3, 4, 2], \"learning_rate\": %g, "
             "\"batch_size\": 4, \"seed\": 3, \"epochs\": 1}", (double)lr);
    snprintf(prox, sizeof prox, "{\"layers\": [3, 4, 2], \"learning_rate\": %g, "
             "\"batch_size\": 4, \"seed\": 3, \"epochs\": 1, \"proximal_mu\": %g}",
             (double)lr, (double)mu);
    /* the hand computation, on components created directly */
    const bb_component_type *mt = pfx_type("nn::Mlp"), *dt = pfx_type("data::Synthetic");
    bb_error err = {0};
    void *net = pfx_create(mt, "model", plain, NULL, 1, NULL, &err);
    void *src = pfx_create(dt, "data", data, NULL, 1, NULL, &err);
    assert_non_null(net);
    assert_non_null(src);
    bb_value *x[2], *y[2];
    for (int b = 0; b < 2; b++)
        x[b] = direct_call(dt, src, "NextBatch", NULL, NULL, &y[b]);
    bb_value *w0 = direct_call(mt, net, "Params", NULL, NULL, NULL);
    size_t np = bb_tensor_numel(w0);
    bb_value *g0 = direct_call(mt, net, "Gradients", x[0], y[0], NULL);
    float *w1 = malloc(np * sizeof *w1), *w2 = malloc(np * sizeof *w2);
    for (size_t i = 0; i < np; i++)
        w1[i] = bb_tensor_f32(w0)[i] - lr * bb_tensor_f32(g0)[i];
    int64_t dim = (int64_t)np;
    bb_value *w1v = bb_value_tensor_copy(BB_DT_FLOAT, 1, &dim, w1, np * sizeof *w1);
    bb_value_unref(direct_call(mt, net, "LoadParameters", w1v, NULL, NULL));
    bb_value *g1 = direct_call(mt, net, "Gradients", x[1], y[1], NULL);
    for (size_t i = 0; i < np; i++)
        w2[i] = w1[i] - lr * (bb_tensor_f32(g1)[i] + mu * (w1[i] - bb_tensor_f32(w0)[i]));
    /* the same Train through the engine, with and without the proximal term */
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "TrainOut", "go", "params");
    fx_meta(m, fx_op(m, f, MODEL, "Train", "go", "params"), SLOT, "model");
    fx_bind(m, "TrainOut", "model", "Model|nn::Mlp|0");
    fx_bind(m, "TrainOut", "data", "DataSource|data::Synthetic|1");
    const char *targets[1] = {"TrainOut"};
    bb_value *trained[2];
    const char *cfg[2] = {plain, prox};
    for (int k = 0; k < 2; k++) {
        bb_engine *e = fx_engine(1, 7001, NULL);
        pfx_slot_config sc[2] = {{"model", cfg[k]}, {"data", data}};
        bb_engine_registry reg = pfx_registry(sc, 2);
        if (bb_engine_install(e, m, targets, 1, &reg, &err) != BB_OK)
            fail_msg("install: %s", err.msg);
        fx_log log = {0};
        mr_invoke(e, "TrainOut", "go", bb_value_trigger());
        trained[k] = bb_value_ref(mr_run_until(e, &log, "params", 10)->value);
        fx_log_free(&log);
        bb_engine_free(e);
    }
    const float *got = bb_tensor_f32(trained[1]), *sgd = bb_tensor_f32(trained[0]);
    size_t differ = 0;
    for (size_t i = 0; i < np; i++) {
        if (!(fabsf(got[i] - w2[i]) <= 1e-5f * (1.0f + fabsf(w2[i]))))
            fail_msg("param %zu: Train with proximal_mu gives %g, by hand %g", i, (double)got[i],
                     (double)w2[i]);
        differ += fabsf(sgd[i] - w2[i]) > 1e-4f; /* mu changed the result */
    }
    assert_true(differ > np / 2);
    for (int b = 0; b < 2; b++) {
        bb_value_unref(x[b]);
        bb_value_unref(y[b]);
        bb_value_unref(trained[b]);
    }
    bb_value_unref(w0);
    bb_value_unref(w1v);
    bb_value_unref(g0);
    bb_value_unref(g1);
    free(w1);
    free(w2);
    mt->destroy(net);
    dt->destroy(src);
    bb_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attack_update_scale),
        cmocka_unit_test(test_fedprox_steps_by_hand),
        cmocka_unit_test(test_digits_centralized_baseline),
        cmocka_unit_test(test_train_on_a_worker_while_the_node_serves),
        cmocka_unit_test(test_train_and_evaluate_synthetic_inline),
        cmocka_unit_test(test_model_destroyed_with_work_queued_or_running),
        cmocka_unit_test(test_train_errors_fail_the_op),
    };
    return cmocka_run_group_tests(tests, NULL, pfx_group_teardown);
}
