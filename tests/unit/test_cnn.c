/*
 * nn::Onnx training the CNN of examples/cnn through the engine (one node,
 * in-process), on the handwritten digits (scripts/fetch-data; 8x8 images,
 * so the CNN's small shape): EvaluateMetrics before and after a short
 * Train on 80% of the images — the held-out loss falls and the accuracy
 * clearly beats chance (10%); the figures are printed. Then the job
 * protocol on a real worker thread: the node answers reads from the
 * committed parameters while the CNN trains, and a LoadParameters waits
 * for the Train to commit.
 *
 * The long Fashion-MNIST run (>= 91%) is a benchmark: scripts/cnn-fashion.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bb/model_io.h"
#include "bb/recorder.h"
#include "bbc/compiler.h"
#include "examples/cnn/cnn_graph.h"
#include "support/engine_fixtures.h"
#include "support/plugin_fixtures.h"
#include "support/model_run.h"
#include "support/worker_pool.h"

#define MODEL "ai.bytesandbrains.role.model"
#define SLOT "ai.bytesandbrains.slot"

static char g_dir[64];
static char g_cnn[128]; /* the digits CNN as an ONNX file */

static int group_setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/bb-cnn.XXXXXX");
    if (!mkdtemp(g_dir))
        return -1;
    snprintf(g_cnn, sizeof g_cnn, "%s/digits_cnn.onnx", g_dir);
    og o;
    og_begin(&o, "digits_cnn");
    cnn_shape s = {8, 8, 16, 32, 10, true};
    cnn_graph(&o, &s, 5);
    bb_error err = {0};
    int rc = og_save(&o, 17, g_cnn, &err);
    og_end(&o);
    if (rc)
        fprintf(stderr, "writing %s: %s\n", g_cnn, err.msg);
    return rc ? -1 : 0;
}

static int group_teardown(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    return pfx_group_teardown(state);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Targets: Before(go) -> EvaluateMetrics -> loss0, acc0; Central(go) ->
 * Train(epochs) -> EvaluateMetrics -> loss, accuracy, num_samples;
 * Peek(go) -> Params -> p; Load(x) -> LoadParameters -> cmd. */
static bb_model *cnn_model(int64_t epochs)
{
    bb_model *m = fx_model();
    bb_function *b = fx_fn(m, "Before", "go", "loss0,acc0");
    fx_meta(m, fx_op(m, b, MODEL, "EvaluateMetrics", "go", "loss0,acc0"), SLOT, "model");
    bb_function *f = fx_fn(m, "Central", "go", "loss,accuracy,num_samples");
    bb_node *n = fx_op(m, f, MODEL, "Train", "go", "params,num_samples");
    fx_meta(m, n, SLOT, "model");
    fx_int(m, n, "epochs", epochs);
    fx_meta(m, fx_op(m, f, MODEL, "EvaluateMetrics", "params", "loss,accuracy"), SLOT, "model");
    bb_function *p = fx_fn(m, "Peek", "go", "p");
    fx_meta(m, fx_op(m, p, MODEL, "Params", "", "p"), SLOT, "model");
    bb_function *l = fx_fn(m, "Load", "x", "cmd");
    fx_meta(m, fx_op(m, l, MODEL, "LoadParameters", "x", "cmd"), SLOT, "model");
    fx_type(m, l, "x", &BB_TYPE_TENSOR_F32);
    const char *targets[4] = {"Before", "Central", "Peek", "Load"};
    for (int i = 0; i < 4; i++) {
        fx_bind(m, targets[i], "model", "Model|nn::Onnx|0");
        fx_bind(m, targets[i], "data", "DataSource|data::Csv|1");
    }
    return m;
}

static const char *const TARGETS[] = {"Before", "Central", "Peek", "Load"};

static bb_engine *install(bb_model *m, const char *model_cfg, const char *data_cfg, pool *w)
{
    return mr_install(m, TARGETS, sizeof TARGETS / sizeof *TARGETS, model_cfg, data_cfg, w);
}

static void data_config(char *out, size_t cap)
{
    snprintf(out, cap,
             "{\"path\": \"%s\", \"holdout\": 0.2, \"split_seed\": 0, \"normalization\": "
             "\"min-max\", \"batch_size\": 64, \"seed\": 1}",
             pfx_repo_path("data/digits.csv.gz"));
}

static void test_cnn_digits_loss_falls(void **state)
{
    (void)state;
    if (!pfx_fetch_data())
        fail_msg("scripts/fetch-data could not provide data/digits.csv.gz");
    enum { EPOCHS = 4 };
    char data_cfg[512], model_cfg[512];
    data_config(data_cfg, sizeof data_cfg);
    snprintf(model_cfg, sizeof model_cfg,
             "{\"model_file\": \"%s\", \"optimizer\": \"adam\", \"learning_rate\": 0.003, "
             "\"batch_size\": 32}", g_cnn);
    bb_model *m = cnn_model(EPOCHS);
    bb_engine *e = install(m, model_cfg, data_cfg, NULL);
    fx_log log = {0};
    mr_invoke(e, "Before", "go", bb_value_trigger());
    float loss0 = mr_scalar(mr_run_until(e, &log, "loss0", 60));
    float acc0 = mr_scalar(fx_log_app(&log, "acc0", 0));
    double t0 = now_s();
    mr_invoke(e, "Central", "go", bb_value_trigger());
    float acc = mr_scalar(mr_run_until(e, &log, "accuracy", 240));
    float loss = mr_scalar(fx_log_app(&log, "loss", 0));
    const fx_rec *ns = fx_log_app(&log, "num_samples", 0);
    assert_non_null(ns);
    print_message("  digits CNN (8x8, conv 8/16 + BN, fc 32): held-out loss %.4f -> %.4f, "
                  "accuracy %.2f%% -> %.2f%% after %d epochs over 1438 images (%.2f s)\n",
                  (double)loss0, (double)loss, 100.0 * acc0, 100.0 * acc, EPOCHS, now_s() - t0);
    assert_int_equal(ns->value->u.u64, (uint64_t)EPOCHS * 1438);
    assert_true(loss < 0.5f * loss0);
    assert_true(acc >= 0.8f); /* chance: 10% */
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

/* The node keeps serving while a worker trains the CNN. */
static void test_cnn_train_on_a_worker(void **state)
{
    (void)state;
    if (!pfx_fetch_data())
        fail_msg("scripts/fetch-data could not provide data/digits.csv.gz");
    char data_cfg[512], model_cfg[512];
    data_config(data_cfg, sizeof data_cfg);
    snprintf(model_cfg, sizeof model_cfg, "{\"model_file\": \"%s\"}", g_cnn);
    pool w;
    pool_init(&w);
    bb_model *m = cnn_model(1);
    bb_engine *e = install(m, model_cfg, data_cfg, &w);
    assert_int_equal(pool_start(&w, e), 0);
    fx_log log = {0};
    mr_invoke(e, "Peek", "go", bb_value_trigger());
    const fx_rec *p0 = mr_run_until(e, &log, "p", 5);
    assert_non_null(p0);
    bb_value *initial = bb_value_ref(p0->value);
    mr_invoke(e, "Central", "go", bb_value_trigger()); /* its work waits at the closed gate */
    fx_run(e, &log, 1, 10);
    assert_true(bb_engine_pending_async_count(e) >= 1);
    mr_invoke(e, "Peek", "go", bb_value_trigger()); /* answered from the committed parameters */
    fx_run(e, &log, 1, 10);
    assert_non_null(fx_log_app(&log, "p", 1));
    assert_true(bb_value_equal(fx_log_app(&log, "p", 1)->value, initial));
    size_t n = bb_tensor_numel(initial);
    float *zeros = calloc(n, sizeof *zeros);
    mr_invoke(e, "Load", "x", fx_f32(zeros, n)); /* waits for the Train */
    fx_run(e, &log, 1, 10);
    assert_null(fx_log_app(&log, "cmd", 0));
    pool_gate(&w, true);
    assert_non_null(mr_run_until(e, &log, "cmd", 120));
    assert_non_null(fx_log_app(&log, "num_samples", 0)); /* Train committed first */
    mr_invoke(e, "Peek", "go", bb_value_trigger());
    const fx_rec *p2 = NULL;
    for (double end = now_s() + 5; !p2 && now_s() < end;) {
        fx_run(e, &log, 1, 10);
        p2 = fx_log_app(&log, "p", 2);
    }
    assert_non_null(p2);
    assert_true(fx_f32_eq(p2->value, zeros, n));
    pthread_mutex_lock(&w.mu);
    assert_true(w.ran >= 1); /* the training ran on the worker */
    pthread_mutex_unlock(&w.mu);
    free(zeros);
    bb_value_unref(initial);
    pool_stop(&w);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

/* A recorded program binds nn::Onnx with the CNN in its construction state
 * (bb_slot_set_graph): the real compiler compiles it against the real
 * plugins and an engine runs Train and EvaluateMetrics — the way the
 * federated, gossip and split-learning programs bind a model. */
static void test_cnn_in_a_recorded_program(void **state)
{
    (void)state;
    if (!pfx_fetch_data())
        fail_msg("scripts/fetch-data could not provide data/digits.csv.gz");
    og o;
    og_begin(&o, "digits_cnn");
    cnn_shape s = {8, 8, 16, 32, 10, true};
    cnn_graph(&o, &s, 5);
    char data_cfg[512];
    data_config(data_cfg, sizeof data_cfg);
    bb_recorder *r = bb_recorder_new("user.app");
    bb_module *m = bb_rec_module(r, "Trainer");
    bb_slot *model = bb_rec_concrete(m, BB_ROLE_MODEL, "model", "nn::Onnx",
                                     "{\"optimizer\": \"adam\", \"learning_rate\": 0.003}", NULL);
    assert_int_equal(bb_slot_set_graph(model, o.g), BB_OK);
    bb_rec_concrete(m, BB_ROLE_DATA_SOURCE, "data", "data::Csv", data_cfg, NULL);
    bb_rec *g = bb_module_body(m);
    bb_val params, samples, loss, acc;
    bb_role_model_train(g, model, bb_rec_input(g, "go", &BB_TYPE_TRIGGER), 3, &params, &samples);
    bb_role_model_evaluate_metrics(g, model, params, &loss, &acc);
    bb_rec_output(g, "loss", loss);
    bb_rec_output(g, "accuracy", acc);
    bb_model *rec = NULL, *compiled = NULL;
    bb_error err = {0};
    if (bb_recorder_build(r, m, &rec, &err))
        fail_msg("record: %s", err.msg);
    bb_recorder_free(r);
    og_end(&o);
    /* the graph rides in the file: save and load it as bbc and bbd would */
    uint8_t *bytes;
    size_t len;
    assert_int_equal(bb_model_save_mem(rec, &bytes, &len, &err), BB_OK);
    bb_model_free(rec);
    assert_int_equal(bb_model_load_mem(bytes, len, "trainer.onnx", &rec, &err), BB_OK);
    free(bytes);
    bb_type_source ts;
    bb_type_source_from_loader(&ts, pfx_loader(), NULL);
    bbc_options opt;
    bbc_options_init(&opt);
    bbc_error cerr = {0};
    if (bbc_compile(rec, &opt, NULL, &ts, NULL, 0, &compiled, &cerr))
        fail_msg("compile: %s: %s", cerr.pass, cerr.msg);
    bb_model_free(rec);
    bb_engine *e = fx_engine(1, 7001, NULL);
    assert_non_null(e);
    bb_engine_registry reg = pfx_registry(NULL, 0);
    const char *target = "@self";
    if (bb_engine_install(e, compiled, &target, 1, &reg, &err))
        fail_msg("install: %s", err.msg);
    fx_log log = {0};
    mr_invoke(e, "@self", "go", bb_value_trigger());
    float a = mr_scalar(mr_run_until(e, &log, "accuracy", 120));
    print_message("  a recorded program binding nn::Onnx (the CNN in its construction state): "
                  "%.2f%% after 3 epochs\n", 100.0 * a);
    assert_true(a >= 0.8f);
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(compiled);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cnn_digits_loss_falls),
        cmocka_unit_test(test_cnn_train_on_a_worker),
        cmocka_unit_test(test_cnn_in_a_recorded_program),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
