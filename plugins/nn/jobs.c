/*
 * jobs.c — nn::Mlp's heavy ops, Train and EvaluateMetrics, run off the
 * engine thread so the node keeps serving while a model trains.
 *
 * A job alternates between the two threads:
 *   engine thread  pulls a chunk of batches from the "data" dependency
 *                  (ctx->call_dependency is engine-thread only), then hands
 *                  the chunk to the host's worker pool (ctx->submit_work);
 *   worker         trains on the chunk with the job's OWN copy of the
 *                  parameters and optimizer state (the committed ones stay
 *                  what reads see), or evaluates it with the committed
 *                  parameters themselves (a reference: nobody changes them);
 *   engine thread  (done) pulls the next chunk, or finishes: a Train
 *                  commits its parameters into the model and completes the
 *                  op with (params, num_samples).
 * A chunk is at most CHUNK_BYTES of batches, so a huge source is never held
 * in memory at once. Without a pool submit_work runs inline; the loop in
 * job_step then carries on without recursing.
 *
 * Lifetime (the host contract of bbd: at shutdown it waits for work that is
 * running and cancels work that has not started; done callbacks stop): the
 * model owns its jobs and frees them when they finish or when it is
 * destroyed — except a job whose work is running at that moment, which the
 * worker frees when it returns (a compare-and-swap on the job's state
 * decides who). The worker never touches the model.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp.h"

#define CHUNK_BYTES (32u << 20)
#define DATA_SLOT "data"

/* Where a job's work is; the transitions are compare-and-swaps. */
enum {
    JOB_IDLE,      /* on the engine thread: between chunks (no work submitted) */
    JOB_QUEUED,    /* submitted, not started */
    JOB_RUNNING,   /* a worker has it */
    JOB_FINISHED,  /* the work returned; done() has not run yet */
    JOB_ORPHANED   /* destroyed while running: the worker frees it */
};

struct mlp_job {
    atomic_int state;
    atomic_bool cancel;
    bool train;
    mlp *m;
    bb_ctx *ctx;
    bb_completion *completion;
    uint32_t n_out;            /* outputs the op takes */
    mlp_sync *sync;            /* set while the starting dispatch runs */
    mlp_shape shape;
    size_t minibatch;
    bb_value *pv;              /* the job's parameters: Train's own copy, which becomes the
                                * committed ones; EvaluateMetrics' a reference to those */
    float *params;             /* bb_tensor_f32(pv) */
    mlp_optim opt;             /* Train: the job's optimizer state (a copy) */
    mlp_prox prox;             /* Train with proximal_mu > 0: mu and the model's center */
    bb_value *center;          /* a reference behind prox.center (the worker may outlive the
                                * model; the value never changes) */
    float *grad;               /* Train, when the step needs the whole gradient */
    mlp_ws ws;
    int32_t *cls;              /* label scratch */
    float *fbuf;
    size_t lab_cap;
    bb_value **bx, **by;       /* the chunk */
    size_t n_batch, cap_batch;
    bool count_batches;        /* epochs measured in batches, not rows */
    uint64_t target, pulled;   /* rows (or batches) to pull / pulled */
    mlp_stats st;              /* over everything processed */
    int rc;
    char msg[BB_ERROR_MSG_MAX];
    bool in_submit, ran_inline;
};

static void job_free(mlp_job *j)
{
    for (size_t i = 0; i < j->n_batch; i++) {
        bb_value_unref(j->bx[i]);
        bb_value_unref(j->by[i]);
    }
    free(j->bx);
    free(j->by);
    bb_value_unref(j->pv);
    bb_value_unref(j->center);
    free(j->grad);
    free(j->cls);
    free(j->fbuf);
    mlp_optim_free(&j->opt);
    mlp_ws_free(&j->ws);
    free(j);
}

static void release_chunk(mlp_job *j)
{
    for (size_t i = 0; i < j->n_batch; i++) {
        bb_value_unref(j->bx[i]);
        bb_value_unref(j->by[i]);
    }
    j->n_batch = 0;
}

static int fail(mlp_job *j, int code, const char *fmt, const char *detail)
{
    j->rc = code;
    snprintf(j->msg, sizeof j->msg, fmt, j->m ? j->m->who : "nn::Mlp", detail ? detail : "");
    return code;
}

/* A (batch, labels) pair from the source, checked against the model. */
static int check_batch(mlp_job *j, const bb_value *x, const bb_value *y)
{
    char d[160];
    if (!x || x->type->kind != BB_VK_TENSOR || x->u.tensor.dtype != BB_DT_FLOAT ||
        x->u.tensor.ndim != 2 || x->u.tensor.dims[1] != j->shape.size[0]) {
        snprintf(d, sizeof d, "%u inputs", j->shape.size[0]);
        return fail(j, BB_ETYPE, "%s: the data source's batch is not f32 [rows, %s]", d);
    }
    if (x->u.tensor.dims[0] <= 0)
        return fail(j, BB_EINVAL, "%s: the data source returned an empty batch%s", NULL);
    if (!y || y->type->kind != BB_VK_TENSOR || bb_tensor_numel(y) == 0)
        return fail(j, BB_EINVAL, "%s: the data source gives no labels%s", NULL);
    return BB_OK;
}

/* Checks the pair and adds it to the chunk; takes both references. */
static int take_batch(mlp_job *j, bb_value *x, bb_value *y)
{
    int rc = check_batch(j, x, y);
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
            rc = fail(j, BB_ENOMEM, "%s: out of memory%s", NULL);
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

static int call_data(mlp_job *j, const char *op, bb_value **in, uint32_t n_in, bb_value **out,
                     uint32_t n_out, bb_error *err)
{
    return j->ctx->api->call_dependency(j->ctx, DATA_SLOT, op, in, n_in, out, n_out, err);
}

/* Engine thread: the next chunk of batches. */
static int pull_chunk(mlp_job *j)
{
    size_t bytes = 0;
    while (j->pulled < j->target && bytes < CHUNK_BYTES) {
        bb_value *out[2] = {0};
        bb_error err = {0};
        if (call_data(j, "NextBatch", NULL, 0, out, 2, &err) != BB_OK)
            return fail(j, err.code ? err.code : BB_ERUNTIME, "%s: NextBatch: %.300s", err.msg);
        uint64_t rows = out[0] && out[0]->type->kind == BB_VK_TENSOR && out[0]->u.tensor.ndim
                            ? (uint64_t)out[0]->u.tensor.dims[0]
                            : 0;
        size_t nbytes = rows ? out[0]->u.tensor.nbytes : 0;
        if (take_batch(j, out[0], out[1]))
            return j->rc;
        j->pulled += j->count_batches ? 1 : rows;
        bytes += nbytes;
    }
    return BB_OK;
}

/* Worker: the chunk, with the job's own parameters. */
static void job_work(void *arg)
{
    mlp_job *j = arg;
    int expect = JOB_QUEUED;
    if (!atomic_compare_exchange_strong(&j->state, &expect, JOB_RUNNING))
        return; /* not ours to run (the model went away; see the contract above) */
    for (size_t i = 0; i < j->n_batch && !j->rc; i++) {
        if (atomic_load(&j->cancel))
            break;
        const bb_value *x = j->bx[i];
        size_t rows = (size_t)x->u.tensor.dims[0];
        if (rows > j->lab_cap) {
            free(j->cls);
            free(j->fbuf);
            j->cls = malloc(rows * sizeof *j->cls);
            j->fbuf = malloc(rows * sizeof *j->fbuf);
            j->lab_cap = j->cls && j->fbuf ? rows : 0;
            if (!j->lab_cap) {
                fail(j, BB_ENOMEM, "%s: out of memory%s", NULL);
                break;
            }
        }
        mlp_target t;
        char why[200];
        int rc = mlp_target_from(&j->shape, j->by[i], rows, j->cls, j->fbuf, &t, why, sizeof why);
        if (rc) {
            fail(j, rc, "%s: the data source's labels: %s", why);
            break;
        }
        rc = mlp_pass(&j->shape, j->params, j->train ? &j->opt : NULL,
                      j->center ? &j->prox : NULL, &j->ws, j->grad, bb_tensor_f32(x), &t, rows,
                      j->minibatch, &j->st);
        if (rc)
            fail(j, rc, "%s: out of memory%s", NULL);
    }
    expect = JOB_RUNNING;
    if (!atomic_compare_exchange_strong(&j->state, &expect, JOB_FINISHED))
        job_free(j); /* orphaned: the model is gone */
}

static void remove_job(mlp *m, mlp_job *j)
{
    for (size_t i = 0; i < m->n_jobs; i++) {
        if (m->jobs[i] == j) {
            m->jobs[i] = m->jobs[--m->n_jobs];
            break;
        }
    }
    if (m->busy == j)
        m->busy = NULL;
}

static bb_value *scalar(float v)
{
    bb_value *t = bb_value_tensor_new(BB_DT_FLOAT, 0, NULL);
    if (t)
        *bb_tensor_f32(t) = v;
    return t;
}

/* Engine thread: commit (Train), complete the op, forget the job. */
static void job_finish(mlp_job *j)
{
    mlp *m = j->m;
    bb_value *out[2] = {0};
    bool train = j->train;
    if (!j->rc && train) { /* the job's parameters are the model's now, and the answer */
        bb_value *start = bb_value_ref(m->pv);
        mlp_commit_params(m, j->pv);
        j->pv = NULL;
        mlp_optim o = m->opt;
        m->opt = j->opt;
        j->opt = o;
        out[0] = bb_value_ref(m->pv);
        if (m->update_scale != 1.0f) { /* attack simulation: start + scale x update */
            bb_value_unref(out[0]);
            if ((out[0] = mlp_params_copy(m, m->params))) {
                float *o = bb_tensor_f32(out[0]);
                const float *s = bb_tensor_f32(start);
                for (size_t i = 0; i < m->shape.n_params; i++)
                    o[i] = s[i] + m->update_scale * (o[i] - s[i]);
            }
        }
        bb_value_unref(start);
        out[1] = bb_value_u64(&BB_TYPE_U64, j->st.rows);
    } else if (!j->rc) {
        double rows = j->st.rows ? (double)j->st.rows : 1.0;
        out[0] = scalar((float)(j->st.loss_sum / rows));
        out[1] = scalar((float)((double)j->st.correct / rows));
    }
    if (!j->rc && (!out[0] || !out[1])) {
        bb_value_unref(out[0]);
        bb_value_unref(out[1]);
        fail(j, BB_ENOMEM, "%s: out of memory%s", NULL);
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
    remove_job(m, j);
    job_free(j);
    if (train)
        mlp_drain(m);
}

static void job_done(void *arg);

/* Engine thread: pull and submit until the job is done or a worker has it. */
static void job_step(mlp_job *j)
{
    for (;;) {
        if (!j->rc && !j->n_batch && j->pulled < j->target)
            pull_chunk(j);
        if (j->rc || !j->n_batch) { /* failed, or nothing left to process */
            job_finish(j);
            return;
        }
        j->in_submit = true;
        j->ran_inline = false;
        atomic_store(&j->state, JOB_QUEUED);
        int rc = j->ctx->api->submit_work(j->ctx, job_work, job_done, j);
        j->in_submit = false;
        if (rc) {
            atomic_store(&j->state, JOB_IDLE);
            fail(j, rc, "%s: the host refused the work%s", NULL);
            job_finish(j);
            return;
        }
        if (!j->ran_inline)
            return; /* job_done will carry on */
        release_chunk(j);
    }
}

static void job_done(void *arg)
{
    mlp_job *j = arg;
    atomic_store(&j->state, JOB_IDLE);
    if (j->in_submit) { /* ran inline, inside submit_work: job_step's loop goes on */
        j->ran_inline = true;
        return;
    }
    release_chunk(j);
    job_step(j);
}

static mlp_job *job_new(mlp *m, bb_ctx *ctx, bb_completion *c, uint32_t n_out, mlp_sync *sync,
                        bool train, bb_error *err)
{
    if (!ctx || !ctx->api || !ctx->api->call_dependency || !ctx->api->submit_work) {
        bb_error_set(err, BB_ESTATE, "%s: %s needs the engine (a data dependency and a worker "
                     "pool)", m->who, train ? "Train" : "EvaluateMetrics");
        return NULL;
    }
    mlp_job *j = calloc(1, sizeof *j);
    size_t bytes = m->shape.n_params * sizeof(float);
    if (j) {
        atomic_init(&j->state, JOB_IDLE);
        atomic_init(&j->cancel, false);
        j->train = train;
        j->m = m;
        j->ctx = ctx;
        j->completion = c;
        j->n_out = n_out;
        j->sync = sync;
        j->shape = m->shape;
        j->minibatch = (size_t)m->batch_size;
        j->pv = train ? mlp_params_copy(m, m->params) : bb_value_ref(m->pv);
        j->params = j->pv ? bb_tensor_f32(j->pv) : NULL;
        j->opt = m->opt;
        j->opt.m = j->opt.v = NULL;
    }
    bool ok = j && j->pv;
    if (ok && train) {
        if (m->center) { /* the value itself: it never changes */
            j->center = bb_value_ref(m->center);
            j->prox = (mlp_prox){m->proximal_mu, bb_tensor_f32(j->center)};
        }
        ok = mlp_optim_init(&j->opt, m->shape.n_params) == BB_OK &&
             (!mlp_pass_needs_grad(&j->opt, j->center ? &j->prox : NULL) ||
              (j->grad = malloc(bytes)) != NULL);
        if (ok && m->opt.m)
            memcpy(j->opt.m, m->opt.m, bytes);
        if (ok && m->opt.v)
            memcpy(j->opt.v, m->opt.v, bytes);
    }
    if (ok && m->n_jobs == m->cap_jobs) {
        size_t cap = m->cap_jobs ? 2 * m->cap_jobs : 4;
        mlp_job **v = realloc(m->jobs, cap * sizeof *v);
        ok = v != NULL;
        if (ok) {
            m->jobs = v;
            m->cap_jobs = cap;
        }
    }
    if (!ok) {
        if (j)
            job_free(j);
        bb_error_set(err, BB_ENOMEM, "%s: out of memory", m->who);
        return NULL;
    }
    m->jobs[m->n_jobs++] = j;
    return j;
}

/* Runs the job; afterwards results go through the handle. */
static void job_begin(mlp_job *j, mlp_sync *sync)
{
    job_step(j);
    if (sync && !sync->done)
        j->sync = NULL; /* not finished, so still alive */
}

int mlp_start_train(mlp *m, bb_ctx *ctx, bb_completion *c, uint32_t n_out, int64_t epochs,
                    mlp_sync *sync, bb_error *err)
{
    mlp_job *j = job_new(m, ctx, c, n_out, sync, true, err);
    if (!j)
        return err->code;
    /* whole epochs: start the source at an epoch boundary */
    bb_value *trig = bb_value_trigger(), *out = NULL, *n = NULL;
    bb_error e = {0};
    int rc = call_data(j, "Reset", &trig, 1, &out, 1, &e);
    bb_value_unref(trig);
    bb_value_unref(out);
    if (rc && rc != BB_ENOTFOUND) {
        bb_error_set(err, rc, "%s: Reset of the data source: %s", m->who, e.msg);
    } else if (call_data(j, "NumSamples", NULL, 0, &n, 1, &e) == BB_OK && n &&
               n->type->kind == BB_VK_U64 && n->u.u64 > 0) {
        j->target = (uint64_t)epochs * n->u.u64;
        rc = BB_OK;
    } else if (m->batches_per_epoch > 0) {
        j->count_batches = true;
        j->target = (uint64_t)epochs * (uint64_t)m->batches_per_epoch;
        rc = BB_OK;
    } else {
        rc = bb_error_set(err, BB_EUNSUPPORTED,
                          "%s: the data source does not tell its size (no NumSamples op): set "
                          "batches_per_epoch",
                          m->who);
    }
    bb_value_unref(n);
    if (rc) {
        remove_job(m, j);
        job_free(j);
        return rc;
    }
    m->busy = j;
    job_begin(j, sync);
    return BB_OK;
}

int mlp_start_eval(mlp *m, bb_ctx *ctx, bb_completion *c, uint32_t n_out, mlp_sync *sync,
                   bb_error *err)
{
    mlp_job *j = job_new(m, ctx, c, n_out, sync, false, err);
    if (!j)
        return err->code;
    bb_value *out[2] = {0}, *n = NULL;
    bb_error e = {0};
    int rc = call_data(j, "EvalSet", NULL, 0, out, 2, &e);
    if (rc == BB_OK) {
        if (take_batch(j, out[0], out[1]) == BB_OK)
            j->pulled = j->target = 1; /* the whole set is the one chunk */
    } else if (call_data(j, "NumSamples", NULL, 0, &n, 1, &e) == BB_OK && n &&
               n->type->kind == BB_VK_U64) {
        j->target = n->u.u64; /* no EvalSet: one epoch of NextBatch */
    } else {
        fail(j, BB_EUNSUPPORTED, "%s: the data source has neither EvalSet nor NumSamples%s",
             NULL);
    }
    bb_value_unref(n);
    if (j->rc) {
        bb_error_set(err, j->rc, "%s", j->msg);
        remove_job(m, j);
        job_free(j);
        return err->code;
    }
    job_begin(j, sync);
    return BB_OK;
}

void mlp_jobs_cancel_all(mlp *m)
{
    for (size_t i = 0; i < m->n_jobs; i++) {
        mlp_job *j = m->jobs[i];
        atomic_store(&j->cancel, true); /* a running worker stops at its next batch */
        for (;;) {
            int s = atomic_load(&j->state);
            if (s == JOB_RUNNING) {
                if (atomic_compare_exchange_strong(&j->state, &s, JOB_ORPHANED))
                    break; /* the worker frees it */
            } else if (s == JOB_QUEUED) { /* the host cancels work not started */
                if (atomic_compare_exchange_strong(&j->state, &s, JOB_IDLE)) {
                    job_free(j);
                    break;
                }
            } else { /* idle, or finished without its done(): ours */
                job_free(j);
                break;
            }
        }
    }
    m->n_jobs = 0;
    m->busy = NULL;
}
