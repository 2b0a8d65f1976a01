/*
 * onnx_jobs.c — nn::Onnx's minibatch passes (train and evaluate), and
 * Train / EvaluateMetrics as jobs of plugins/common/plugin_jobs.h: each
 * job works on its own copy of the parameters and optimizer state with its
 * own session, and a Train commits them when it ends.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_model.h"

/* ---- the passes ------------------------------------------------------------------------ */

int onnx_trainer_init(onnx_trainer *t, ad_plan *plan, float *params, uint64_t seed,
                      bbp_loss loss, size_t batch_size, float prox_mu, const float *center)
{
    memset(t, 0, sizeof *t);
    t->plan = ad_plan_ref(plan);
    t->loss = loss;
    t->batch_size = batch_size;
    t->prox_mu = prox_mu;
    t->center = center;
    t->sess = ad_session_new(plan, params, seed);
    t->grad = malloc((plan->n_floats ? plan->n_floats : 1) * sizeof *t->grad);
    return t->sess && t->grad ? BB_OK : BB_ENOMEM;
}

void onnx_trainer_free(onnx_trainer *t)
{
    ad_session_free(t->sess);
    free(t->grad);
    free(t->cls);
    free(t->fbuf);
    ad_plan_unref(t->plan);
    memset(t, 0, sizeof *t);
}

int onnx_targets(onnx_trainer *t, const bb_value *y, size_t rows, size_t k, bbp_target *out,
                 char *msg, size_t cap)
{
    if (rows > t->lab_cap) {
        free(t->cls);
        free(t->fbuf);
        t->cls = malloc(rows * sizeof *t->cls);
        t->fbuf = malloc(rows * sizeof *t->fbuf);
        t->lab_cap = t->cls && t->fbuf ? rows : 0;
        if (!t->lab_cap) {
            snprintf(msg, cap, "out of memory for %zu labels", rows);
            return BB_ENOMEM;
        }
    }
    return bbp_target_from(t->loss, k, y, rows, t->cls, t->fbuf, out, msg, cap);
}

bb_value *onnx_rows(const bb_value *x, size_t r0, size_t n)
{
    const bb_tensor_view *v = &x->u.tensor;
    int64_t dims[BB_MAX_DIMS];
    memcpy(dims, v->dims, v->ndim * sizeof *dims);
    dims[0] = (int64_t)n;
    size_t row_bytes = v->dims[0] ? v->nbytes / (size_t)v->dims[0] : 0;
    return bb_value_tensor_wrap(v->dtype, v->ndim, dims, v->buf, v->data + r0 * row_bytes);
}

/* Outputs per row of a forward's output (the loss sees [rows, k]). */
static size_t per_row(const bb_value *out, size_t rows)
{
    return rows ? bb_tensor_numel(out) / rows : 0;
}

/* One minibatch: forward, loss (and with o: backward and a step). The
 * labels are those of x's rows r0..r0+n, already parsed into all. */
static int minibatch(onnx_trainer *t, float *params, bbp_optim *o, const bb_value *xb,
                     bbp_target *all, const bb_value *y, size_t r0, bbp_stats *st,
                     char *msg, size_t cap)
{
    bb_error err = {0};
    bb_value *out = NULL, *dz = NULL;
    size_t n = (size_t)xb->u.tensor.dims[0];
    int rc = ad_forward(t->sess, xb, o != NULL, &out, &err);
    size_t k = rc ? 0 : per_row(out, n);
    bbp_target sub = {0};
    if (!rc && (!all->cls && !all->dense)) /* labels parsed once k is known */
        rc = onnx_targets(t, y, (size_t)y->u.tensor.dims[0], k, all, msg, cap);
    else if (rc)
        snprintf(msg, cap, "%s", err.msg);
    if (!rc) {
        sub.cls = all->cls ? all->cls + r0 : NULL;
        sub.dense = all->dense ? all->dense + r0 * k : NULL;
        if (o && !(dz = bb_value_tensor_new(BB_DT_FLOAT, out->u.tensor.ndim, out->u.tensor.dims)))
            rc = BB_ENOMEM;
    }
    if (!rc)
        bbp_loss_grad(t->loss, bb_tensor_f32(out), n, k, &sub, n, dz ? bb_tensor_f32(dz) : NULL,
                      st);
    bb_value_unref(out);
    if (!rc && o) {
        rc = ad_backward(t->sess, dz, t->grad, false, &err);
        if (rc)
            snprintf(msg, cap, "%s", err.msg);
        const ad_plan *p = t->plan;
        if (!rc && t->center)
            bbp_prox_add(t->prox_mu, params, t->center, t->grad, p->n_floats, p->trained,
                         p->n_trained_runs);
        if (!rc) {
            bbp_optim_step(o, params, t->grad, p->n_floats, p->trained, p->n_trained_runs);
            ad_session_params_changed(t->sess);
        }
    }
    if (rc == BB_ENOMEM && !msg[0])
        snprintf(msg, cap, "out of memory");
    bb_value_unref(dz);
    ad_session_clear(t->sess);
    return rc;
}

int onnx_pass(onnx_trainer *t, float *params, bbp_optim *o, const bb_value *x,
              const bb_value *y, bbp_stats *st, char *msg, size_t cap)
{
    ad_session_rebind(t->sess, params);
    size_t rows = (size_t)x->u.tensor.dims[0];
    size_t mb = o ? t->batch_size : ONNX_EVAL_CHUNK;
    bbp_target all = {0};
    msg[0] = 0;
    for (size_t r0 = 0; r0 < rows; r0 += mb) {
        size_t n = rows - r0 < mb ? rows - r0 : mb;
        bb_value *xb = onnx_rows(x, r0, n);
        if (!xb) {
            snprintf(msg, cap, "out of memory");
            return BB_ENOMEM;
        }
        int rc = minibatch(t, params, o, xb, &all, y, r0, st, msg, cap);
        bb_value_unref(xb);
        if (rc)
            return rc;
    }
    return BB_OK;
}

/* ---- Train and EvaluateMetrics as jobs ---------------------------------------------------- */

typedef struct onnx_job {
    onnx_trainer tr;
    float *params;             /* the job's parameters (a copy) */
    float *center;             /* the job's FedProx center (a copy), or NULL */
    bbp_optim opt;             /* Train: the job's optimizer state (a copy) */
    bool train;
    bbp_stats st;
} onnx_job;

static void job_free_state(void *state)
{
    onnx_job *j = state;
    if (!j)
        return;
    onnx_trainer_free(&j->tr);
    free(j->params);
    free(j->center);
    bbp_optim_free(&j->opt);
    free(j);
}

static int job_check(void *model, const bb_value *x, const bb_value *y, char *msg, size_t cap)
{
    (void)model;
    if (!x || x->type->kind != BB_VK_TENSOR || x->u.tensor.dtype != BB_DT_FLOAT ||
        x->u.tensor.ndim < 1) {
        snprintf(msg, cap, "the data source's batch is not an f32 tensor [rows, ...]");
        return BB_ETYPE;
    }
    return bbp_check_rows_and_labels(x, y, msg, cap);
}

static int job_work(void *state, bb_value *const *x, bb_value *const *y, size_t n,
                    const atomic_bool *cancel, char *msg, size_t cap)
{
    onnx_job *j = state;
    for (size_t i = 0; i < n; i++) {
        if (atomic_load(cancel))
            break;
        int rc = onnx_pass(&j->tr, j->params, j->train ? &j->opt : NULL, x[i], y[i], &j->st,
                           msg, cap);
        if (rc)
            return rc;
    }
    return BB_OK;
}

static int job_finish(void *model, void *state, bool train, bb_value **out, char *msg,
                      size_t cap)
{
    onnx_model *m = model;
    onnx_job *j = state;
    bool made = train ? bbp_train_commit(&m->params, &j->params, &m->opt, &j->opt,
                                         m->plan->n_floats, j->st.rows, out)
                      : bbp_stats_outputs(&j->st, out, true);
    if (train) { /* the model's parameters moved */
        ad_session_rebind(m->tr.sess, m->params);
        m->grad_pending = false;
        m->version++;
    }
    if (made) /* on OOM the caller releases both */
        return BB_OK;
    snprintf(msg, cap, "out of memory");
    return BB_ENOMEM;
}

static const bbp_job_class ONNX_JOB = {
    .check_batch = job_check,
    .work = job_work,
    .finish = job_finish,
    .free_state = job_free_state,
    .drained = onnx_drain,
};

static onnx_job *job_state(onnx_model *m, bool train)
{
    size_t n = m->plan->n_floats, bytes = (n ? n : 1) * sizeof(float);
    onnx_job *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->train = train;
    j->params = malloc(bytes);
    j->center = train && m->prox_mu != 0 ? malloc(bytes) : NULL;
    bool ok = j->params && (!train || m->prox_mu == 0 || j->center);
    if (ok && train)
        ok = bbp_optim_clone(&j->opt, &m->opt, n) == BB_OK;
    uint64_t seed = m->seed ^ (0x9e3779b97f4a7c15ULL * ++m->jobs_started);
    if (ok)
        ok = onnx_trainer_init(&j->tr, m->plan, j->params, seed, m->loss, (size_t)m->batch_size,
                               m->prox_mu, j->center) == BB_OK;
    if (!ok) {
        job_free_state(j);
        return NULL;
    }
    memcpy(j->params, m->params, n * sizeof(float));
    if (j->center)
        memcpy(j->center, m->center, n * sizeof(float));
    return j;
}

int onnx_start_train(void *model, bb_ctx *ctx, bb_completion *c, uint32_t n_out,
                     int64_t epochs, bbp_sync *sync, bb_error *err)
{
    onnx_model *m = model;
    onnx_job *j = job_state(m, true);
    if (!j)
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", m->who);
    return bbp_job_start_train(&m->jobs, &ONNX_JOB, m, m->who, ctx, c, n_out, epochs,
                               m->batches_per_epoch, sync, j, err);
}

int onnx_start_eval(void *model, bb_ctx *ctx, bb_completion *c, uint32_t n_out,
                    bbp_sync *sync, bb_error *err)
{
    onnx_model *m = model;
    onnx_job *j = job_state(m, false);
    if (!j)
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", m->who);
    return bbp_job_start_eval(&m->jobs, &ONNX_JOB, m, m->who, ctx, c, n_out, sync, j, err);
}
