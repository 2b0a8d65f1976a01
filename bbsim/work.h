/*
 * work.h — the simulator's worker pool: the off-thread work of the nodes'
 * components (ctx->submit_work: nn::Mlp's Train and EvaluateMetrics) runs
 * on a few threads while the event loop goes on; the loop applies a job's
 * result (bb_engine_work_done) at the job's virtual completion time, after
 * waiting for it here if it is not done yet. So which thread finishes first
 * never shows in the run.
 *
 * With 0 threads a job runs inside bbsim_pool_submit. A job's thread CPU
 * time is measured (for work cost "measured"). Every job the pool was
 * given stays its until bbsim_pool_release (or bbsim_pool_free).
 */
#ifndef BBSIM_WORK_H
#define BBSIM_WORK_H

#include <stdbool.h>
#include <stdint.h>

#include "bbsim/scenario.h"

typedef struct bbsim_job {
    void (*fn)(void *arg);
    void *arg;
    uint64_t token;       /* the engine's, for bb_engine_work_done */
    uint32_t node, inc;   /* whose, in which incarnation */
    bbsim_ns start;       /* virtual start */
    uint64_t cpu_ns;      /* measured once done */
    int state;            /* pool-private */
    struct bbsim_job *next_queued, *prev_all, *next_all; /* pool-private */
} bbsim_job;

typedef struct bbsim_pool bbsim_pool;

/* threads: 0 (inline) to 64. NULL when out of memory or a thread could not start. */
bbsim_pool *bbsim_pool_new(int threads);
/* Stops the threads (queued jobs never run) and frees every job. */
void bbsim_pool_free(bbsim_pool *p);
/* A zeroed job owned by the pool, or NULL. */
bbsim_job *bbsim_pool_job(bbsim_pool *p);
void bbsim_pool_submit(bbsim_pool *p, bbsim_job *j);
/* Blocks until j ran (true) or was cancelled (false). */
bool bbsim_pool_wait(bbsim_pool *p, bbsim_job *j);
/* Node `node` dies: its queued jobs never run; returns once its running
 * ones returned (their plugin may free what they used only then). */
void bbsim_pool_cancel_node(bbsim_pool *p, uint32_t node);
/* The pool forgets and frees j (done or cancelled). */
void bbsim_pool_release(bbsim_pool *p, bbsim_job *j);

#endif
