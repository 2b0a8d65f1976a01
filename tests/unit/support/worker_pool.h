/*
 * worker_pool.h — a host worker pool of one thread for engine tests, with
 * a gate the test holds: submitted work waits until the gate opens, so a
 * test can look at the node while a job is queued, then let it run (and
 * see the node keep serving while it runs).
 *
 *   pool w;  pool_init(&w);            gate closed
 *   cfg.submit_work = pool_submit;  cfg.submit_work_ud = &w;
 *   ... bb_engine_install ...;  pool_start(&w, e);
 *   pool_gate(&w, true);  ...  pool_stop(&w);
 */
#ifndef BB_TEST_WORKER_POOL_H
#define BB_TEST_WORKER_POOL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "bb/engine.h"

typedef struct pool_job {
    void (*work)(void *);
    void *arg;
    uint64_t token;
} pool_job;

typedef struct pool {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pool_job q[64];
    int n;
    bool open, stop, running;
    int ran;      /* jobs that ran (under mu) */
    bb_engine *e; /* NULL once the engine is gone: results are dropped */
} pool;

void pool_init(pool *w);
/* Starts the thread; finished work is reported to e. 0 or an errno. */
int pool_start(pool *w, bb_engine *e);
/* bb_engine_config.submit_work. */
int pool_submit(void *ud, void (*work)(void *), void *arg, uint64_t token);
void pool_gate(pool *w, bool open);
/* Stops and joins the thread; queued work never runs (as bbd cancels it). */
void pool_stop(pool *w);

#endif
