/*
 * test_engine_ingress.c — the thread-safe seam: producers on several
 * threads invoking while the engine thread polls (every accepted push runs
 * exactly once, every refused one is counted), coalesced wake-ups, and
 * completion handles completed concurrently from many threads (exactly once
 * each, duplicates refused).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/engine_fixtures.h"

#define THREADS 4
#define PER_THREAD 3000

typedef struct shared {
    bb_engine *e;
    atomic_int accepted, refused, done;
    atomic_int wakes;
} shared;

static void on_wake(void *ud) { atomic_fetch_add(&((shared *)ud)->wakes, 1); }

static void *producer(void *p)
{
    shared *s = p;
    for (int i = 0; i < PER_THREAD; i++) {
        bb_value *v = bb_value_u64(&BB_TYPE_U64, (uint64_t)i);
        bb_engine_input in = {.name = "in", .value = v};
        int rc = bb_engine_invoke(s->e, "Main", &in, 1, NULL, NULL);
        bb_value_unref(v);
        if (rc == BB_OK)
            atomic_fetch_add(&s->accepted, 1);
        else if (rc == BB_EFULL)
            atomic_fetch_add(&s->refused, 1);
    }
    atomic_fetch_add(&s->done, 1);
    return NULL;
}

static void test_concurrent_producers(void **state)
{
    (void)state;
    bb_model *m = fx_model();
    fx_chain(m, "Main", 3);
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    cfg.caps.ingress_capacity = 256; /* small enough that some pushes are refused */
    bb_engine *e = fx_engine(1, 7001, &cfg);
    assert_int_equal(fx_install(e, m, "Main", NULL), BB_OK);
    shared s = {.e = e};
    bb_engine_set_wake(e, on_wake, &s);
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, producer, &s);
    size_t events = 0;
    bb_steps st;
    bb_steps_init(&st);
    uint64_t last_exec = 0;
    bool ordered = true;
    (void)ordered;
    for (;;) {
        bool producers_done = atomic_load(&s.done) == THREADS;
        bb_engine_poll(e, 1, &st);
        for (size_t k = 0; k < st.n; k++) {
            if (st.v[k].kind == BB_STEP_APP_EVENT) {
                events++;
                last_exec = st.v[k].exec_id;
            }
        }
        if (producers_done && bb_engine_next_deadline(e) != 0)
            break;
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    fx_run(e, NULL, 1, 10);
    assert_int_equal(atomic_load(&s.accepted) + atomic_load(&s.refused), THREADS * PER_THREAD);
    assert_int_equal(events, (size_t)atomic_load(&s.accepted));
    assert_int_equal(bb_engine_counter(e, "ingress.dropped"), (uint64_t)atomic_load(&s.refused));
    assert_true(atomic_load(&s.wakes) >= 1);
    assert_true(atomic_load(&s.wakes) <= atomic_load(&s.accepted));
    assert_true(last_exec > 0);
    assert_int_equal(bb_engine_live_slots(e), 0);
    bb_steps_free(&st);
    bb_engine_free(e);
    bb_model_free(m);
}

typedef struct comp_arg {
    fx_echo *echo;
    int from, to;
    atomic_int *ok, *estate;
} comp_arg;

static void *completer(void *p)
{
    comp_arg *a = p;
    for (int i = a->from; i < a->to; i++) {
        /* two threads race on every handle: exactly one wins */
        bb_value *v = bb_value_u64(&BB_TYPE_U64, (uint64_t)i);
        int rc = bb_complete_ok(a->echo->pending[i], &v, 1);
        atomic_fetch_add(rc == BB_OK ? a->ok : a->estate, 1);
    }
    return NULL;
}

static void test_concurrent_completions(void **state)
{
    (void)state;
    fx_reset();
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Main", "x", "y");
    bb_node *n = fx_op(m, f, "test.echo", "Later", "x", "y");
    fx_meta(m, n, "ai.bytesandbrains.slot", "echo");
    fx_bind(m, "Main", "echo", "Protocol|test::Echo|1");
    bb_engine *e = fx_engine(1, 7001, NULL);
    assert_int_equal(fx_install(e, m, "Main", NULL), BB_OK);
    for (int i = 0; i < 64; i++) {
        bb_value *v = bb_value_u64(&BB_TYPE_U64, 0);
        bb_engine_input in = {.name = "x", .value = v};
        assert_int_equal(bb_engine_invoke(e, "Main", &in, 1, NULL, NULL), BB_OK);
        bb_value_unref(v);
    }
    fx_run(e, NULL, 1, 5);
    assert_int_equal(bb_engine_pending_async_count(e), 64);
    fx_echo *echo = fx_echo_at(0);
    assert_int_equal(echo->n_pending, 64);
    atomic_int ok = 0, estate = 0;
    pthread_t th[8];
    comp_arg args[8];
    for (int i = 0; i < 8; i++) {
        int base = (i % 4) * 16; /* threads i and i+4 share a range */
        args[i] = (comp_arg){echo, base, base + 16, &ok, &estate};
        pthread_create(&th[i], NULL, completer, &args[i]);
    }
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&ok), 64);
    assert_int_equal(atomic_load(&estate), 64);
    fx_log log = {0};
    fx_run(e, &log, 2, 5);
    assert_int_equal(fx_log_count(&log, BB_STEP_APP_EVENT), 64);
    assert_int_equal(bb_engine_pending_async_count(e), 0);
    assert_int_equal(bb_engine_live_slots(e), 0);
    for (int i = 0; i < echo->n_pending; i++)
        bb_value_unref(echo->pending_in[i]);
    echo->n_pending = 0;
    fx_log_free(&log);
    bb_engine_free(e);
    bb_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_producers),
        cmocka_unit_test(test_concurrent_completions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
