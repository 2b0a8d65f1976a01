/*
 * jobs.c — nn::Mlp's heavy ops, Train and EvaluateMetrics, as jobs of
 * plugins/common/plugin_jobs.h (the protocol — chunks pulled from the
 * "data" source on the engine thread, worked on by the host's worker pool,
 * the lifetime rules — is shared with nn::Onnx). What is nn::Mlp's: the
 * batch check, the work on a chunk (mlp_pass with the job's own copy of the
 * parameters and optimizer state; an evaluation reads the committed
 * parameters where they are) and the commit: Train's copy becomes the
 * model's parameters and its answer, no third copy.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp.h"

typedef struct mlp_job {
    bool train;
    mlp_shape shape;
    size_t minibatch;
    bb_value *pv;              /* the job's parameters: Train's own copy, which becomes the
                                * committed ones; EvaluateMetrics' a reference to those */
    float *params;             /* bb_tensor_f32(pv) */
    bbp_optim opt;             /* Train: the job's optimizer state (a copy) */
    mlp_prox prox;             /* Train with proximal_mu > 0: mu and the center below */
    bb_value *center;          /* a reference (the worker may outlive the model; the value
                                * never changes) */
    float *grad;               /* Train, when the step needs the whole gradient */
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
    bb_value_unref(j->pv);
    free(j->grad);
    bb_value_unref(j->center);
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
    if (!train) {
        if (bbp_stats_outputs(&j->st, out, true)) /* on OOM the caller releases both */
            return BB_OK;
        snprintf(msg, cap, "out of memory");
        return BB_ENOMEM;
    }
    /* the job's parameters are the model's now, and the answer */
    bb_value *start = bb_value_ref(m->pv);
    mlp_commit_params(m, j->pv);
    j->pv = NULL;
    bbp_optim o = m->opt;
    m->opt = j->opt;
    j->opt = o;
    m->age += j->st.rows; /* gossip learning: samples trained on */
    out[0] = bb_value_ref(m->pv);
    if (m->update_scale != 1.0f) { /* attack simulation: start + scale x update */
        bb_value_unref(out[0]);
        if ((out[0] = mlp_params_copy(m, m->params))) {
            float *u = bb_tensor_f32(out[0]);
            const float *s0 = bb_tensor_f32(start);
            for (size_t i = 0; i < m->shape.n_params; i++)
                u[i] = s0[i] + m->update_scale * (u[i] - s0[i]);
        }
    }
    bb_value_unref(start);
    out[1] = bb_value_u64(&BB_TYPE_U64, j->st.rows);
    if (out[0] && out[1]) /* on OOM the caller releases both */
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

/* The job's private state: Train's own copy of the parameters and the
 * optimizer, references to what does not change. */
static mlp_job *job_state(const mlp *m, bool train)
{
    mlp_job *j = calloc(1, sizeof *j);
    size_t n = m->shape.n_params, bytes = n * sizeof(float);
    if (!j)
        return NULL;
    j->train = train;
    j->shape = m->shape;
    j->minibatch = (size_t)m->batch_size;
    j->pv = train ? mlp_params_copy(m, m->params) : bb_value_ref(m->pv);
    j->params = j->pv ? bb_tensor_f32(j->pv) : NULL;
    bool ok = j->pv != NULL;
    if (ok && train) {
        if (m->center) {
            j->center = bb_value_ref(m->center);
            j->prox = (mlp_prox){m->proximal_mu, bb_tensor_f32(j->center)};
        }
        ok = bbp_optim_clone(&j->opt, &m->opt, n) == BB_OK &&
             (!mlp_pass_needs_grad(&j->opt, j->center ? &j->prox : NULL) ||
              (j->grad = malloc(bytes ? bytes : 1)) != NULL);
    }
    if (!ok) {
        job_free(j);
        return NULL;
    }
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
