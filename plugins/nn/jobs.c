/*
 * jobs.c — nn::Mlp's heavy ops, Train and EvaluateMetrics, as jobs of
 * plugins/common/plugin_jobs.h (the protocol — chunks pulled from the
 * "data" source on the engine thread, worked on by the host's worker pool,
 * the lifetime rules — is shared with nn::Onnx). What is nn::Mlp's: the
 * batch check, the work on a chunk (mlp_pass with the job's own copy of the
 * parameters, optimizer state and FedProx center) and the commit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp.h"

typedef struct mlp_job {
    bool train;
    mlp_shape shape;
    size_t minibatch;
    float *params;             /* the job's parameters (a copy) */
    bbp_optim opt;             /* Train: the job's optimizer state (a copy) */
    mlp_prox prox;             /* Train with proximal_mu > 0: mu and the center below */
    float *center;             /* a copy: the worker may outlive the model */
    float *grad;
    mlp_ws ws;
    int32_t *cls;              /* label scratch */
    float *fbuf;
    size_t lab_cap;
    bbp_stats st;              /* over everything processed */
} mlp_job;

static void job_free(void *state)
{
    mlp_job *j = state;
    if (!j)
        return;
    free(j->params);
    free(j->grad);
    free(j->center);
    free(j->cls);
    free(j->fbuf);
    bbp_optim_free(&j->opt);
    mlp_ws_free(&j->ws);
    free(j);
}

/* A (batch, labels) pair from the source, checked against the model. */
static int job_check(void *model, const bb_value *x, const bb_value *y, char *msg, size_t cap)
{
    const mlp *m = model;
    if (!x || x->type->kind != BB_VK_TENSOR || x->u.tensor.dtype != BB_DT_FLOAT ||
        x->u.tensor.ndim != 2 || x->u.tensor.dims[1] != m->shape.size[0]) {
        snprintf(msg, cap, "the data source's batch is not f32 [rows, %u inputs]",
                 m->shape.size[0]);
        return BB_ETYPE;
    }
    return bbp_check_rows_and_labels(x, y, msg, cap);
}

/* Worker: the chunk, with the job's own parameters. */
static int job_work(void *state, bb_value *const *bx, bb_value *const *by, size_t n,
                    const atomic_bool *cancel, char *msg, size_t cap)
{
    mlp_job *j = state;
    for (size_t i = 0; i < n && !atomic_load(cancel); i++) {
        const bb_value *x = bx[i];
        size_t rows = (size_t)x->u.tensor.dims[0];
        if (rows > j->lab_cap) {
            free(j->cls);
            free(j->fbuf);
            j->cls = malloc(rows * sizeof *j->cls);
            j->fbuf = malloc(rows * sizeof *j->fbuf);
            j->lab_cap = j->cls && j->fbuf ? rows : 0;
            if (!j->lab_cap) {
                snprintf(msg, cap, "out of memory");
                return BB_ENOMEM;
            }
        }
        bbp_target t;
        char why[200];
        int rc = mlp_target_from(&j->shape, by[i], rows, j->cls, j->fbuf, &t, why, sizeof why);
        if (rc) {
            snprintf(msg, cap, "the data source's labels: %s", why);
            return rc;
        }
        rc = mlp_pass(&j->shape, j->params, j->train ? &j->opt : NULL,
                      j->center ? &j->prox : NULL, &j->ws, j->grad, bb_tensor_f32(x), &t, rows,
                      j->minibatch, &j->st);
        if (rc) {
            snprintf(msg, cap, "out of memory");
            return rc;
        }
    }
    return BB_OK;
}

/* Engine thread: a Train commits its parameters and optimizer; the outputs. */
static int job_finish(void *model, void *state, bool train, bb_value **out, char *msg,
                      size_t cap)
{
    mlp *m = model;
    mlp_job *j = state;
    bool made = train ? bbp_train_commit(&m->params, &j->params, &m->opt, &j->opt,
                                         m->shape.n_params, j->st.rows, out)
                      : bbp_stats_outputs(&j->st, out, true);
    if (train)
        m->age += j->st.rows; /* gossip learning: samples trained on */
    if (made && train && m->update_scale != 1.0f) { /* attack simulation: j->params = start */
        float *o = bb_tensor_f32(out[0]);
        for (size_t i = 0; i < m->shape.n_params; i++)
            o[i] = j->params[i] + m->update_scale * (o[i] - j->params[i]);
    }
    if (made) /* on OOM the caller releases both */
        return BB_OK;
    snprintf(msg, cap, "out of memory");
    return BB_ENOMEM;
}

static const bbp_job_class MLP_JOB = {
    .check_batch = job_check,
    .work = job_work,
    .finish = job_finish,
    .free_state = job_free,
    .drained = mlp_drain,
};

/* The job's private state: copies of what it works on. */
static mlp_job *job_state(const mlp *m, bool train)
{
    mlp_job *j = calloc(1, sizeof *j);
    size_t n = m->shape.n_params, bytes = n * sizeof(float);
    if (!j)
        return NULL;
    j->train = train;
    j->shape = m->shape;
    j->minibatch = (size_t)m->batch_size;
    j->params = malloc(bytes ? bytes : 1);
    bool ok = j->params != NULL;
    if (ok && train) {
        ok = bbp_optim_clone(&j->opt, &m->opt, n) == BB_OK &&
             (j->grad = malloc(bytes ? bytes : 1)) != NULL;
        if (ok && m->center) {
            ok = (j->center = malloc(bytes ? bytes : 1)) != NULL;
            if (ok) {
                memcpy(j->center, m->center, bytes);
                j->prox = (mlp_prox){m->proximal_mu, j->center};
            }
        }
    }
    if (!ok) {
        job_free(j);
        return NULL;
    }
    memcpy(j->params, m->params, bytes);
    return j;
}

int mlp_start_train(void *model, bb_ctx *ctx, bb_completion *c, uint32_t n_out,
                    int64_t epochs, bbp_sync *sync, bb_error *err)
{
    mlp *m = model;
    mlp_job *j = job_state(m, true);
    if (!j)
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", m->who);
    return bbp_job_start_train(&m->jobs, &MLP_JOB, m, m->who, ctx, c, n_out, epochs,
                               m->batches_per_epoch, sync, j, err);
}

int mlp_start_eval(void *model, bb_ctx *ctx, bb_completion *c, uint32_t n_out, bbp_sync *sync,
                   bb_error *err)
{
    mlp *m = model;
    mlp_job *j = job_state(m, false);
    if (!j)
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", m->who);
    return bbp_job_start_eval(&m->jobs, &MLP_JOB, m, m->who, ctx, c, n_out, sync, j, err);
}
