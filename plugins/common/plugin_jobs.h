/*
 * plugin_jobs.h — a Model's heavy ops (Train, EvaluateMetrics) off the
 * engine thread, over its "data" DataSource, and the FIFO of ops that
 * wait for a running Train. The model supplies what differs (a
 * bbp_job_class: check a batch, work on a chunk, finish); this file is the
 * protocol.
 *
 * A job alternates between the two threads:
 *   engine thread  pulls a chunk of batches from the data dependency
 *                  (ctx->call_dependency is engine-thread only), then hands
 *                  the chunk to the host's worker pool (ctx->submit_work);
 *   worker         works on the chunk with the job's OWN state (a copy of
 *                  the parameters and optimizer the model made for it);
 *   engine thread  (done) pulls the next chunk, or finishes: the class's
 *                  finish commits a Train and makes the op's outputs.
 * A chunk is at most BBP_JOB_CHUNK_BYTES of batches. Without a pool
 * submit_work runs inline; job_step's loop then carries on without
 * recursing, and a job that finishes inside the dispatch that started it
 * answers from that dispatch (bbp_sync): the engine refuses a handle
 * completed before its dispatch returned LATER.
 *
 * Train runs whole epochs: it Resets the source and pulls epochs x
 * NumSamples rows (or epochs x batches_per_epoch batches when the source
 * cannot tell its size). EvaluateMetrics takes the source's EvalSet as one
 * chunk, else one epoch of NextBatch.
 *
 * Lifetime (bbd's host contract: at shutdown it waits for work that is
 * running and cancels work that has not started; done callbacks stop): the
 * model owns its jobs and frees them when they finish or when it is
 * destroyed (bbp_jobs_cancel_all) — except a job whose work is running at
 * that moment, which the worker frees when it returns (a compare-and-swap
 * on the job's state decides who). The worker never touches the model.
 *
 * Header-only (static inline): each plugin .so compiles its own copy.
 */
#ifndef BBP_PLUGIN_JOBS_H
#define BBP_PLUGIN_JOBS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bb/plugin.h>

#define BBP_JOB_CHUNK_BYTES (32u << 20)
#define BBP_JOB_DATA_SLOT "data"

/* What a model supplies. state is the job's private state (from the
 * model's start call); it belongs to the job from then on. */
typedef struct bbp_job_class {
    /* engine thread: is this (batch, labels) pair from the source usable? */
    int (*check_batch)(void *model, const bb_value *x, const bb_value *y, char *msg, size_t cap);
    /* worker: train (or evaluate) on the chunk's n batches; stop early when
     * *cancel. A failure's reason goes to msg. */
    int (*work)(void *state, bb_value *const *x, bb_value *const *y, size_t n,
                const atomic_bool *cancel, char *msg, size_t cap);
    /* engine thread, after the last chunk: commit a Train into the model,
     * and make the op's outputs out[0..2) (new references). */
    int (*finish)(void *model, void *state, bool train, bb_value **out, char *msg, size_t cap);
    /* any thread: free the state */
    void (*free_state)(void *state);
    /* engine thread: a Train ended; run the ops queued behind it */
    void (*drained)(void *model);
} bbp_job_class;

/* Where a job that finishes inside its starting dispatch leaves its result. */
typedef struct bbp_sync {
    bb_value **out;            /* the dispatch's outputs */
    bb_error *err;
    bool done;                 /* finished inline: out / err hold the result */
    int rc;
} bbp_sync;

typedef struct bbp_job bbp_job;

/* A model's jobs: every live one, and the Train in flight (changes wait). */
typedef struct bbp_jobs {
    bbp_job *busy;
    bbp_job **live;
    size_t n, cap;
} bbp_jobs;

/* Where a job's work is; the transitions are compare-and-swaps. */
enum {
    BBP_JOB_IDLE,      /* on the engine thread: between chunks (no work submitted) */
    BBP_JOB_QUEUED,    /* submitted, not started */
    BBP_JOB_RUNNING,   /* a worker has it */
    BBP_JOB_FINISHED,  /* the work returned; done() has not run yet */
    BBP_JOB_ORPHANED   /* destroyed while running: the worker frees it */
};

struct bbp_job {
    atomic_int state;
    atomic_bool cancel;
    bool train;
    const bbp_job_class *cls;
    void *model;
    bbp_jobs *jobs;
    void *st;                  /* the class's state */
    bb_ctx *ctx;
    bb_completion *completion;
    uint32_t n_out;
    bbp_sync *sync;            /* set while the starting dispatch runs */
    const char *who;
    bb_value **bx, **by;       /* the chunk */
    size_t n_batch, cap_batch;
    bool count_batches;        /* epochs measured in batches, not rows */
    uint64_t target, pulled;   /* rows (or batches) to pull / pulled */
    int rc;
    char msg[BB_ERROR_MSG_MAX];
    bool in_submit, ran_inline;
};

static inline void bbp__job_release_chunk(bbp_job *j)
{
    for (size_t i = 0; i < j->n_batch; i++) {
        bb_value_unref(j->bx[i]);
        bb_value_unref(j->by[i]);
    }
    j->n_batch = 0;
}

static inline void bbp__job_free(bbp_job *j)
{
    bbp__job_release_chunk(j);
    free(j->bx);
    free(j->by);
    if (j->st)
        j->cls->free_state(j->st);
    free(j);
}

static inline int bbp__job_fail(bbp_job *j, int code, const char *what, const char *detail)
{
    j->rc = code;
    snprintf(j->msg, sizeof j->msg, "%.150s: %.150s%.200s", j->who, what, detail ? detail : "");
    return code;
}

/* Checks the pair and adds it to the chunk; takes both references. */
static inline int bbp__job_take(bbp_job *j, bb_value *x, bb_value *y)
{
    char why[BB_ERROR_MSG_MAX / 2] = "";
    int rc = j->cls->check_batch(j->model, x, y, why, sizeof why);
    if (rc)
        bbp__job_fail(j, rc, why, NULL);
    if (!rc && j->n_batch == j->cap_batch) {
        size_t cap = j->cap_batch ? 2 * j->cap_batch : 16;
        bb_value **bx = realloc(j->bx, cap * sizeof *bx);
        if (bx)
            j->bx = bx;
        bb_value **by = bx ? realloc(j->by, cap * sizeof *by) : NULL;
        if (by) {
            j->by = by;
            j->cap_batch = cap;
        } else {
            rc = bbp__job_fail(j, BB_ENOMEM, "out of memory", NULL);
        }
    }
    if (rc) {
        bb_value_unref(x);
        bb_value_unref(y);
        return rc;
    }
    j->bx[j->n_batch] = x;
    j->by[j->n_batch] = y;
    j->n_batch++;
    return BB_OK;
}

static inline int bbp__job_call_data(bbp_job *j, const char *op, bb_value **in, uint32_t n_in,
                                     bb_value **out, uint32_t n_out, bb_error *err)
{
    return j->ctx->api->call_dependency(j->ctx, BBP_JOB_DATA_SLOT, op, in, n_in, out, n_out,
                                        err);
}

/* Engine thread: the next chunk of batches. */
static inline int bbp__job_pull(bbp_job *j)
{
    size_t bytes = 0;
    while (j->pulled < j->target && bytes < BBP_JOB_CHUNK_BYTES) {
        bb_value *out[2] = {0};
        bb_error err = {0};
        if (bbp__job_call_data(j, "NextBatch", NULL, 0, out, 2, &err) != BB_OK)
            return bbp__job_fail(j, err.code ? err.code : BB_ERUNTIME, "NextBatch: ", err.msg);
        uint64_t rows = out[0] && out[0]->type->kind == BB_VK_TENSOR && out[0]->u.tensor.ndim
                            ? (uint64_t)out[0]->u.tensor.dims[0]
                            : 0;
        size_t nbytes = rows ? out[0]->u.tensor.nbytes : 0;
        if (bbp__job_take(j, out[0], out[1]))
            return j->rc;
        j->pulled += j->count_batches ? 1 : rows;
        bytes += nbytes;
    }
    return BB_OK;
}

/* Worker: the chunk, with the job's own state. */
static inline void bbp__job_work(void *arg)
{
    bbp_job *j = arg;
    int expect = BBP_JOB_QUEUED;
    if (!atomic_compare_exchange_strong(&j->state, &expect, BBP_JOB_RUNNING))
        return; /* not ours to run (the model went away; see the contract above) */
    char why[BB_ERROR_MSG_MAX / 2] = "";
    int rc = j->cls->work(j->st, j->bx, j->by, j->n_batch, &j->cancel, why, sizeof why);
    if (rc)
        bbp__job_fail(j, rc, why, NULL);
    expect = BBP_JOB_RUNNING;
    if (!atomic_compare_exchange_strong(&j->state, &expect, BBP_JOB_FINISHED))
        bbp__job_free(j); /* orphaned: the model is gone */
}

static inline void bbp__jobs_remove(bbp_jobs *js, bbp_job *j)
{
    for (size_t i = 0; i < js->n; i++) {
        if (js->live[i] == j) {
            js->live[i] = js->live[--js->n];
            break;
        }
    }
    if (js->busy == j)
        js->busy = NULL;
}

/* Engine thread: commit (Train), complete the op, forget the job. */
static inline void bbp__job_finish(bbp_job *j)
{
    bb_value *out[2] = {0};
    bool train = j->train;
    void *model = j->model;
    const bbp_job_class *cls = j->cls;
    if (!j->rc) {
        char why[BB_ERROR_MSG_MAX / 2] = "";
        int rc = cls->finish(model, j->st, train, out, why, sizeof why);
        if (rc) {
            bb_value_unref(out[0]);
            bb_value_unref(out[1]);
            out[0] = out[1] = NULL;
            bbp__job_fail(j, rc, why, NULL);
        }
    }
    uint32_t n = j->n_out < 2 ? j->n_out : 2;
    for (uint32_t k = n; k < 2; k++) {
        bb_value_unref(out[k]);
        out[k] = NULL;
    }
    if (j->sync) { /* still inside the dispatch that started it: answer there */
        j->sync->done = true;
        j->sync->rc = j->rc;
        if (j->rc)
            bb_error_set(j->sync->err, j->rc, "%s", j->msg);
        for (uint32_t k = 0; k < n && !j->rc; k++)
            j->sync->out[k] = out[k];
    } else if (j->rc) {
        bb_complete_err(j->completion, j->rc, j->msg);
    } else {
        bb_complete_ok(j->completion, out, n);
    }
    bbp__jobs_remove(j->jobs, j);
    bbp__job_free(j);
    if (train && cls->drained)
        cls->drained(model);
}

static inline void bbp__job_done(void *arg);

/* Engine thread: pull and submit until the job is done or a worker has it. */
static inline void bbp__job_step(bbp_job *j)
{
    for (;;) {
        if (!j->rc && !j->n_batch && j->pulled < j->target)
            bbp__job_pull(j);
        if (j->rc || !j->n_batch) { /* failed, or nothing left to process */
            bbp__job_finish(j);
            return;
        }
        j->in_submit = true;
        j->ran_inline = false;
        atomic_store(&j->state, BBP_JOB_QUEUED);
        int rc = j->ctx->api->submit_work(j->ctx, bbp__job_work, bbp__job_done, j);
        j->in_submit = false;
        if (rc) {
            atomic_store(&j->state, BBP_JOB_IDLE);
            bbp__job_fail(j, rc, "the host refused the work", NULL);
            bbp__job_finish(j);
            return;
        }
        if (!j->ran_inline)
            return; /* bbp__job_done will carry on */
        bbp__job_release_chunk(j);
    }
}

static inline void bbp__job_done(void *arg)
{
    bbp_job *j = arg;
    atomic_store(&j->state, BBP_JOB_IDLE);
    if (j->in_submit) { /* ran inline, inside submit_work: bbp__job_step's loop goes on */
        j->ran_inline = true;
        return;
    }
    bbp__job_release_chunk(j);
    bbp__job_step(j);
}

/* A new job (state taken: freed with the job, or here on failure). */
static inline bbp_job *bbp__job_new(bbp_jobs *js, const bbp_job_class *cls, void *model,
                                    const char *who, bb_ctx *ctx, bb_completion *c,
                                    uint32_t n_out, bbp_sync *sync, bool train, void *state,
                                    bb_error *err)
{
    if (!ctx || !ctx->api || !ctx->api->call_dependency || !ctx->api->submit_work) {
        if (state)
            cls->free_state(state);
        bb_error_set(err, BB_ESTATE, "%s: %s needs the engine (a data dependency and a worker "
                     "pool)", who, train ? "Train" : "EvaluateMetrics");
        return NULL;
    }
    bbp_job *j = state ? calloc(1, sizeof *j) : NULL;
    if (j && js->n == js->cap) {
        size_t cap = js->cap ? 2 * js->cap : 4;
        bbp_job **v = realloc(js->live, cap * sizeof *v);
        if (v) {
            js->live = v;
            js->cap = cap;
        }
    }
    if (!j || js->n == js->cap) {
        free(j);
        if (state)
            cls->free_state(state);
        bb_error_set(err, BB_ENOMEM, "%s: out of memory", who);
        return NULL;
    }
    atomic_init(&j->state, BBP_JOB_IDLE);
    atomic_init(&j->cancel, false);
    j->train = train;
    j->cls = cls;
    j->model = model;
    j->jobs = js;
    j->st = state;
    j->ctx = ctx;
    j->completion = c;
    j->n_out = n_out;
    j->sync = sync;
    j->who = who;
    js->live[js->n++] = j;
    return j;
}

static inline void bbp__job_drop(bbp_job *j)
{
    bbp__jobs_remove(j->jobs, j);
    bbp__job_free(j);
}

/* Runs the job; afterwards results go through the handle. */
static inline void bbp__job_begin(bbp_job *j, bbp_sync *sync)
{
    bbp__job_step(j);
    if (sync && !sync->done)
        j->sync = NULL; /* not finished, so still alive */
}

/* Train `epochs` whole epochs. Returns BB_OK when the job is under way or
 * done (see sync, which may be NULL when the op's dispatch has already
 * returned), else an error (c untouched; state freed). */
static inline int bbp_job_start_train(bbp_jobs *js, const bbp_job_class *cls, void *model,
                                      const char *who, bb_ctx *ctx, bb_completion *c,
                                      uint32_t n_out, int64_t epochs, int64_t batches_per_epoch,
                                      bbp_sync *sync, void *state, bb_error *err)
{
    bbp_job *j = bbp__job_new(js, cls, model, who, ctx, c, n_out, sync, true, state, err);
    if (!j)
        return err->code;
    bb_value *trig = bb_value_trigger(), *out = NULL, *n = NULL;
    bb_error e = {0};
    int rc = bbp__job_call_data(j, "Reset", &trig, 1, &out, 1, &e);
    bb_value_unref(trig);
    bb_value_unref(out);
    if (rc && rc != BB_ENOTFOUND) {
        bb_error_set(err, rc, "%s: Reset of the data source: %s", who, e.msg);
    } else if (bbp__job_call_data(j, "NumSamples", NULL, 0, &n, 1, &e) == BB_OK && n &&
               n->type->kind == BB_VK_U64 && n->u.u64 > 0) {
        j->target = (uint64_t)epochs * n->u.u64;
        rc = BB_OK;
    } else if (batches_per_epoch > 0) {
        j->count_batches = true;
        j->target = (uint64_t)epochs * (uint64_t)batches_per_epoch;
        rc = BB_OK;
    } else {
        rc = bb_error_set(err, BB_EUNSUPPORTED, "%s: the data source does not tell its size "
                          "(no NumSamples op): set batches_per_epoch", who);
    }
    bb_value_unref(n);
    if (rc) {
        bbp__job_drop(j);
        return rc;
    }
    js->busy = j;
    bbp__job_begin(j, sync);
    return BB_OK;
}

/* Loss and accuracy on the source's evaluation set; same contract. */
static inline int bbp_job_start_eval(bbp_jobs *js, const bbp_job_class *cls, void *model,
                                     const char *who, bb_ctx *ctx, bb_completion *c,
                                     uint32_t n_out, bbp_sync *sync, void *state, bb_error *err)
{
    bbp_job *j = bbp__job_new(js, cls, model, who, ctx, c, n_out, sync, false, state, err);
    if (!j)
        return err->code;
    bb_value *out[2] = {0}, *n = NULL;
    bb_error e = {0};
    if (bbp__job_call_data(j, "EvalSet", NULL, 0, out, 2, &e) == BB_OK) {
        if (bbp__job_take(j, out[0], out[1]) == BB_OK)
            j->pulled = j->target = 1; /* the whole set is the one chunk */
    } else if (bbp__job_call_data(j, "NumSamples", NULL, 0, &n, 1, &e) == BB_OK && n &&
               n->type->kind == BB_VK_U64) {
        j->target = n->u.u64; /* no EvalSet: one epoch of NextBatch */
    } else {
        bbp__job_fail(j, BB_EUNSUPPORTED, "the data source has neither EvalSet nor NumSamples",
                      NULL);
    }
    bb_value_unref(n);
    if (j->rc) {
        bb_error_set(err, j->rc, "%s", j->msg);
        bbp__job_drop(j);
        return err->code;
    }
    bbp__job_begin(j, sync);
    return BB_OK;
}

/* The model is going away: running workers stop at their next batch. */
static inline void bbp_jobs_cancel_all(bbp_jobs *js)
{
    for (size_t i = 0; i < js->n; i++) {
        bbp_job *j = js->live[i];
        atomic_store(&j->cancel, true);
        for (;;) {
            int s = atomic_load(&j->state);
            if (s == BBP_JOB_RUNNING) {
                if (atomic_compare_exchange_strong(&j->state, &s, BBP_JOB_ORPHANED))
                    break; /* the worker frees it */
            } else if (s == BBP_JOB_QUEUED) { /* the host cancels work not started */
                if (atomic_compare_exchange_strong(&j->state, &s, BBP_JOB_IDLE)) {
                    bbp__job_free(j);
                    break;
                }
            } else { /* idle, or finished without its done(): ours */
                bbp__job_free(j);
                break;
            }
        }
    }
    js->n = 0;
    js->busy = NULL;
    free(js->live);
    js->live = NULL;
    js->cap = 0;
}

/* The checks every model makes of a source's (batch, labels) pair after
 * its own of the batch's shape: at least one row, and labels. */
static inline int bbp_check_rows_and_labels(const bb_value *x, const bb_value *y, char *msg,
                                            size_t cap)
{
    if (x->u.tensor.ndim < 1 || x->u.tensor.dims[0] <= 0) {
        snprintf(msg, cap, "the data source returned an empty batch");
        return BB_EINVAL;
    }
    if (!y || y->type->kind != BB_VK_TENSOR || bb_tensor_numel(y) == 0) {
        snprintf(msg, cap, "the data source gives no labels");
        return BB_EINVAL;
    }
    return BB_OK;
}

/* The epochs of a Train: the config's when set (epochs_cfg > 0), else the
 * node's epochs attribute (1 when absent). */
static inline int bbp_train_epochs(int64_t epochs_cfg, const bb_dispatch_call *call,
                                   const char *who, int64_t *epochs, bb_error *err)
{
    *epochs = epochs_cfg > 0 ? epochs_cfg
                             : call->node ? bb_node_attr_int(call->node, "epochs", 1) : 1;
    if (*epochs < 1 || *epochs > (1 << 20))
        return bb_error_set(err, BB_EINVAL, "%s: Train with epochs = %lld", who,
                            (long long)*epochs);
    return BB_OK;
}

/* What a dispatch that started a job returns: rc is the start's status. */
static inline bb_dispatch_result bbp_job_dispatched(int rc, const bbp_sync *sync)
{
    if (rc || (sync->done && sync->rc))
        return BB_DISPATCH_NOW_ERR;
    return sync->done ? BB_DISPATCH_NOW_OK : BB_DISPATCH_LATER;
}

/* ---- ops waiting for a running Train ---------------------------------------------------- */

typedef struct bbp_deferred {
    int op;                    /* the model's op id */
    bb_value *in[2];
    uint32_t n_in, n_out;
    int64_t epochs;
    bb_completion *completion;
} bbp_deferred;

typedef struct bbp_queue {
    bbp_deferred *v;
    size_t head, n, cap;
} bbp_queue;

/* Queue a call (references its first two inputs). BB_ENOMEM on failure. */
static inline int bbp_queue_push(bbp_queue *q, int op, const bb_dispatch_call *call,
                                 int64_t epochs)
{
    if (q->n == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 8;
        bbp_deferred *v = malloc(cap * sizeof *v);
        if (!v)
            return BB_ENOMEM;
        for (size_t i = 0; i < q->n; i++)
            v[i] = q->v[(q->head + i) % q->cap];
        free(q->v);
        q->v = v;
        q->cap = cap;
        q->head = 0;
    }
    bbp_deferred *d = &q->v[(q->head + q->n++) % q->cap];
    memset(d, 0, sizeof *d);
    d->op = op;
    d->epochs = epochs;
    d->completion = call->completion;
    d->n_out = call->n_outputs;
    d->n_in = call->n_inputs < 2 ? call->n_inputs : 2;
    for (uint32_t k = 0; k < d->n_in; k++)
        d->in[k] = bb_value_ref(call->inputs[k]);
    return BB_OK;
}

/* The oldest queued call (the caller releases its inputs). */
static inline bool bbp_queue_pop(bbp_queue *q, bbp_deferred *out)
{
    if (!q->n)
        return false;
    *out = q->v[q->head];
    q->head = (q->head + 1) % q->cap;
    q->n--;
    return true;
}

/* Drop every queued call (the engine dropped their completions). */
static inline void bbp_queue_free(bbp_queue *q)
{
    bbp_deferred d;
    while (bbp_queue_pop(q, &d))
        for (uint32_t k = 0; k < d.n_in; k++)
            bb_value_unref(d.in[k]);
    free(q->v);
    memset(q, 0, sizeof *q);
}

/* ---- a trainable model's dispatch ---------------------------------------------------------
 * nn::Mlp and nn::Onnx serve their ops alike: find the op by name, take a
 * Train's epochs, queue an op that changes the model behind a running Train
 * (drained in arrival order when it ends), start Train and EvaluateMetrics
 * as jobs, and answer every other op inline. The model supplies its op
 * table and the ops themselves. */

#define BBP_MODEL_MAX_OUTPUTS 4

typedef struct bbp_model_ops {
    const char *const *names;  /* op id -> op name, n_ops of them */
    int n_ops;
    int op_train, op_evaluate_metrics;
    uint32_t max_outputs;      /* outputs an inline op may answer (at most
                                * BBP_MODEL_MAX_OUTPUTS) */
    bool (*changes_model)(int op);
    /* an inline op: out[0..n_out) get new references; node is the call's
     * (its attributes), NULL for an op that waited behind a Train */
    int (*run_sync)(void *model, int op, const bb_node *node, bb_value *const *in,
                    uint32_t n_in, bb_value **out, uint32_t n_out, bb_error *err);
    int (*start_train)(void *model, bb_ctx *ctx, bb_completion *c, uint32_t n_out,
                       int64_t epochs, bbp_sync *sync, bb_error *err);
    int (*start_eval)(void *model, bb_ctx *ctx, bb_completion *c, uint32_t n_out,
                      bbp_sync *sync, bb_error *err);
} bbp_model_ops;

/* The model's fields the dispatch reads (borrowed). */
typedef struct bbp_model_state {
    void *model;
    const char *who;           /* prefixes messages */
    bb_ctx **ctx;              /* the engine's ctx, kept for the queued ops */
    int64_t epochs_cfg;        /* config epochs, or <= 0: the node's attribute */
    bbp_jobs *jobs;
    bbp_queue *queue;
} bbp_model_state;

/* Runs every queued op that can run now (a Train ended). */
static inline void bbp_model_drain(const bbp_model_ops *ops, const bbp_model_state *m)
{
    bbp_deferred d;
    while (!m->jobs->busy && bbp_queue_pop(m->queue, &d)) {
        bb_error err = {0};
        if (d.op == ops->op_train) {
            if (ops->start_train(m->model, *m->ctx, d.completion, d.n_out, d.epochs, NULL, &err))
                bb_complete_err(d.completion, err.code, err.msg);
        } else {
            bb_value *out[BBP_MODEL_MAX_OUTPUTS] = {0};
            uint32_t n = d.n_out < ops->max_outputs ? d.n_out : ops->max_outputs;
            if (ops->run_sync(m->model, d.op, NULL, d.in, d.n_in, out, n, &err)) {
                for (uint32_t k = 0; k < n; k++)
                    bb_value_unref(out[k]);
                bb_complete_err(d.completion, err.code, err.msg);
            } else {
                bb_complete_ok(d.completion, out, n);
            }
        }
        for (uint32_t k = 0; k < d.n_in; k++)
            bb_value_unref(d.in[k]);
    }
}

static inline bb_dispatch_result bbp_model_dispatch(const bbp_model_ops *ops,
                                                    const bbp_model_state *m, bb_ctx *ctx,
                                                    const bb_dispatch_call *call,
                                                    bb_value **outputs, bb_error *err)
{
    if (ctx) /* the engine keeps one ctx per component: queued ops use it later */
        *m->ctx = ctx;
    int op = ops->n_ops;
    for (int i = 0; i < ops->n_ops; i++)
        if (call->op_type && strcmp(call->op_type, ops->names[i]) == 0)
            op = i;
    int64_t epochs = 1;
    int rc = BB_OK;
    if (op == ops->n_ops)
        rc = bb_error_set(err, BB_EUNSUPPORTED, "%s: no op %s", m->who,
                          call->op_type ? call->op_type : "(null)");
    else if (call->n_outputs < 1)
        rc = bb_error_set(err, BB_EINVAL, "%s: %s needs an output", m->who, ops->names[op]);
    else if (op == ops->op_train)
        rc = bbp_train_epochs(m->epochs_cfg, call, m->who, &epochs, err);
    if (rc)
        return BB_DISPATCH_NOW_ERR;
    if (m->jobs->busy && ops->changes_model(op)) {
        if (bbp_queue_push(m->queue, op, call, epochs)) {
            bb_error_set(err, BB_ENOMEM, "%s: out of memory", m->who);
            return BB_DISPATCH_NOW_ERR;
        }
        return BB_DISPATCH_LATER;
    }
    if (op == ops->op_train || op == ops->op_evaluate_metrics) {
        bbp_sync sync = {.out = outputs, .err = err};
        rc = op == ops->op_train ? ops->start_train(m->model, ctx, call->completion,
                                                    call->n_outputs, epochs, &sync, err)
                                 : ops->start_eval(m->model, ctx, call->completion,
                                                   call->n_outputs, &sync, err);
        return bbp_job_dispatched(rc, &sync);
    }
    rc = ops->run_sync(m->model, op, call->node, call->inputs, call->n_inputs, outputs,
                       call->n_outputs, err);
    return rc ? BB_DISPATCH_NOW_ERR : BB_DISPATCH_NOW_OK;
}

#endif
