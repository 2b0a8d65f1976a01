/*
 * The vector store of examples/vector_store (testdata/vector_store.onnx,
 * as make records it), compiled against the real plugins and run on two
 * in-process engines — a VectorStore and a Client — over the in-memory
 * network of tests/unit/support/engine_fixtures.h. The store's worker
 * pool is one the test holds, so "while the bootstrap runs" is a state,
 * not a race:
 *
 *  - a query before any bootstrap fails (the index is not trained): the
 *    op lock is what the next query relies on;
 *  - with the seed corpus staged and index::IvfPq's Train held on the
 *    pool, a local query and a Client's query over the wire wait: no
 *    answer, no failure, the bootstrap still running;
 *  - the pool runs Train: BootstrapComplete, then both answers, equal,
 *    nearest first the corpus row the query was drawn from.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/model_io.h"
#include "support/engine_fixtures.h"
#include "support/plugin_fixtures.h"
#include "support/test_rng.h"

#define ROWS 2000
#define DIM 32
#define SOURCE_ROW 123 /* the query is this corpus row, nudged */

/* ---- a worker pool the test holds: work runs when the test says ---------------- */

typedef struct held_job {
    void (*work)(void *);
    void *arg;
    uint64_t token;
} held_job;

typedef struct held_pool {
    held_job q[8];
    int n;
} held_pool;

static int held_submit(void *ud, void (*work)(void *), void *arg, uint64_t token)
{
    held_pool *p = ud;
    if (p->n == 8)
        return BB_EFULL;
    p->q[p->n++] = (held_job){work, arg, token};
    return BB_OK;
}

static void held_run(held_pool *p, bb_engine *e)
{
    for (int i = 0; i < p->n; i++) {
        p->q[i].work(p->q[i].arg);
        assert_int_equal(bb_engine_work_done(e, p->q[i].token), BB_OK);
    }
    p->n = 0;
}

/* ---- data ------------------------------------------------------------------------- */

/* ROWS x DIM around 20 centres, each point spread along two directions. */
static bb_value *corpus(void)
{
    int64_t dims[2] = {ROWS, DIM};
    bb_value *t = bb_value_tensor_new(BB_DT_FLOAT, 2, dims);
    assert_non_null(t);
    float *x = bb_tensor_f32(t), centre[20][DIM], dir[20][2][DIM];
    g_rng = 99;
    for (int c = 0; c < 20; c++)
        for (int j = 0; j < DIM; j++) {
            centre[c][j] = (float)((double)below(2001) / 250.0 - 4.0);
            dir[c][0][j] = (float)((double)below(2001) / 1000.0 - 1.0);
            dir[c][1][j] = (float)((double)below(2001) / 1000.0 - 1.0);
        }
    for (size_t i = 0; i < ROWS; i++) {
        size_t c = below(20);
        float a = (float)((double)below(2001) / 1000.0 - 1.0);
        float b = (float)((double)below(2001) / 1000.0 - 1.0);
        for (int j = 0; j < DIM; j++)
            x[i * DIM + j] = centre[c][j] + a * dir[c][0][j] + b * dir[c][1][j] +
                             (float)((double)below(201) / 1000.0 - 0.1);
    }
    return t;
}

static bb_value *query_near(const bb_value *c, size_t row)
{
    float q[DIM];
    memcpy(q, bb_tensor_f32(c) + row * DIM, sizeof q);
    q[0] += 0.01f;
    int64_t d = DIM;
    return pfx_tensor(q, 1, &d);
}

/* ---- the program -------------------------------------------------------------------- */

static bb_model *program(void)
{
    bb_model *in = NULL;
    bb_error err = {0};
    if (bb_model_load_file(pfx_repo_path("testdata/vector_store.onnx"), &in, &err))
        fail_msg("load testdata/vector_store.onnx (make records it): %s", err.msg);
    bb_model *m = pfx_compile(in, &err);
    bb_model_free(in);
    if (!m)
        fail_msg("compile: %s", err.msg);
    return m;
}

/* Position of a step in the log (SIZE_MAX for none). */
static size_t position(const fx_log *l, const fx_rec *r)
{
    return r ? (size_t)(r - l->v) : SIZE_MAX;
}

static const fx_rec *failure_saying(const fx_log *l, const char *needle)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].kind == BB_STEP_OP_FAILED && l->v[i].c && strstr(l->v[i].c, needle))
            return &l->v[i];
    return NULL;
}

static void invoke(bb_engine *e, const char *target, bb_value *q)
{
    bb_engine_input in = {.name = "query", .value = q};
    bb_error err = {0};
    if (bb_engine_invoke(e, target, &in, 1, NULL, &err))
        fail_msg("invoke %s: %s", target, err.msg);
}

static void test_vector_store_query_waits_on_the_op_lock(void **state)
{
    (void)state;
    bb_model *m = program();
    held_pool pool = {0};
    bb_engine_config ecfg;
    bb_engine_config_init(&ecfg);
    ecfg.submit_work = held_submit;
    ecfg.submit_work_ud = &pool;
    fx_net net = {0};
    net.now = 1000000;
    bb_error err = {0};
    const pfx_slot_config cfg[] = {{"index", "{\"train_iterations\": 4}"}};
    bb_engine *store = pfx_net_node(&net, 1, m, "VectorStore", cfg, 1, &ecfg, &err);
    if (!store)
        fail_msg("store: %s", err.msg);
    bb_engine *client = pfx_net_node(&net, 2, m, "Client", NULL, 0, NULL, &err);
    if (!client)
        fail_msg("client: %s", err.msg);
    assert_int_equal(fx_know(store, 2), BB_OK);
    assert_int_equal(fx_know(client, 1), BB_OK);
    bb_peerid sp = fx_peer(1);
    const char *t = "VectorStore";
    assert_int_equal(bb_engine_peer_connected(client, &sp, &t, 1, NULL), BB_OK);
    fx_log *slog = &net.log[0], *clog = &net.log[1];

    bb_value *c = corpus(), *q = query_near(c, SOURCE_ROW);
    /* before any bootstrap the gate is open, and the untrained index says so */
    invoke(store, "VectorStore", q);
    fx_net_run(&net, 20);
    assert_non_null(failure_saying(slog, "Search before Train"));
    assert_int_not_equal(bb_engine_bootstrap_status(store), BB_BOOTSTRAP_RUNNING);
    fx_log_free(slog);

    /* the seed corpus staged: Train goes to the (held) pool */
    bb_engine_input seed = {.name = "seed_corpus", .value = c};
    bb_bootstrap_request req = {.target = "VectorStore", .inputs = &seed, .n_inputs = 1};
    bb_bootstrap_target bt = {.kind = BB_BOOTSTRAP_MODULE_REQUESTS, .requests = &req,
                              .n_requests = 1};
    assert_int_equal(bb_engine_run_bootstrap(store, &bt, &err), BB_OK);
    fx_net_run(&net, 20);
    assert_int_equal(pool.n, 1);
    assert_int_equal(bb_engine_bootstrap_status(store), BB_BOOTSTRAP_RUNNING);

    /* queries now wait: no answer, no failure */
    invoke(store, "VectorStore", q);
    invoke(client, "Client", q);
    fx_net_run(&net, 50);
    assert_null(fx_log_app(slog, "results", 0));
    assert_null(fx_log_app(clog, "results", 0));
    assert_int_equal(fx_log_count(slog, BB_STEP_OP_FAILED), 0);
    assert_int_equal(fx_log_count(clog, BB_STEP_OP_FAILED), 0);
    assert_int_equal(bb_engine_bootstrap_status(store), BB_BOOTSTRAP_RUNNING);

    /* Train finishes: the bootstrap completes, then both queries are answered */
    held_run(&pool, store);
    fx_net_run(&net, 50);
    size_t done = position(slog, fx_log_nth(slog, BB_STEP_BOOTSTRAP_COMPLETE, 0));
    size_t answered = position(slog, fx_log_app(slog, "results", 0));
    assert_true(done != SIZE_MAX && answered != SIZE_MAX && done < answered);
    assert_int_equal(fx_log_count(slog, BB_STEP_OP_FAILED), 0);
    const fx_rec *seeded = fx_log_app(slog, "seeded", 0);
    assert_non_null(seeded);
    assert_int_equal(seeded->value->u.u64, 0); /* the corpus took ids 0..ROWS-1 */
    const fx_rec *local = fx_log_app(slog, "results", 0), *remote = fx_log_app(clog, "results", 0);
    assert_non_null(local);
    assert_non_null(remote);
    const bb_value *ids = local->value->u.list.items[0];
    assert_int_equal(ids->u.tensor.dims[0], 10);
    assert_int_equal(((const uint64_t *)(const void *)ids->u.tensor.data)[0], SOURCE_ROW);
    /* the client's ResponseBatch carries the store's answer */
    const bb_value *rb = remote->value;
    assert_int_equal(rb->u.batch.n, 1);
    const bb_value *got = rb->u.batch.items[0];
    while (got->type == &BB_TYPE_COMPOSITE && got->u.list.n == 1) /* a response's wrapper */
        got = got->u.list.items[0];
    assert_true(bb_value_equal(got, local->value));
    assert_int_equal(bb_engine_bootstrap_status(store), BB_BOOTSTRAP_IDLE);

    bb_value_unref(q);
    bb_value_unref(c);
    fx_net_free(&net);
    bb_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vector_store_query_waits_on_the_op_lock),
    };
    return cmocka_run_group_tests(tests, NULL, pfx_group_teardown);
}
