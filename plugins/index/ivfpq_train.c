/*
 * ivfpq_train.c — IvfPq's Train as a job on the host's worker pool.
 *
 * The job owns what it reads (a reference on the samples value, or the
 * normalized copy for cosine) and what it writes (centroids, codebooks);
 * the worker never touches the index. train_done, on the engine thread,
 * commits the result and completes the op. Without a pool, submit_work
 * runs both inline inside the dispatch, which then answers NOW.
 *
 * Lifetime: the index owns its job. Destroyed while the worker runs it,
 * the job is orphaned and the worker frees it when it returns (a
 * compare-and-swap on its state decides who); queued work the host
 * cancels at shutdown (bbd's contract) is freed by the index.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index.h"

enum { JOB_QUEUED, JOB_RUNNING, JOB_FINISHED, JOB_ORPHANED };

typedef struct ix_train_job {
    atomic_int state;
    atomic_bool cancel;
    ix_index *ix;
    bb_completion *completion;
    bb_value *samples;       /* held while the job reads it (x may point into it) */
    ix_rows rows;
    /* the parameters, copied: the worker reads nothing of the index */
    uint32_t dim, nlist, pq_m, dsub, iters;
    uint64_t max_train, seed;
    float *centroids, *codebooks;
    int rc;
    char msg[BB_ERROR_MSG_MAX];
    bool in_dispatch, done_inline;
} ix_train_job;

static void job_free(ix_train_job *j)
{
    bb_value_unref(j->samples);
    ix_rows_free(&j->rows);
    free(j->centroids);
    free(j->codebooks);
    free(j);
}

static int job_fail(ix_train_job *j, int rc, const char *what)
{
    j->rc = rc;
    snprintf(j->msg, sizeof j->msg, "%s", what);
    return rc;
}

/* The training rows: all of them, or max_train drawn from the seed. */
static const float *training_rows(ix_train_job *j, size_t *n, float **owned)
{
    *owned = NULL;
    *n = j->rows.rows;
    if (j->rows.rows <= j->max_train)
        return j->rows.x;
    bbp_rng rng;
    bbp_rng_seed(&rng, j->seed ^ 0x7361);
    size_t want = (size_t)j->max_train;
    uint32_t *perm = malloc(j->rows.rows * sizeof *perm);
    float *x = malloc(want * j->dim * sizeof *x);
    if (!perm || !x) {
        free(perm);
        free(x);
        return NULL;
    }
    for (size_t i = 0; i < j->rows.rows; i++)
        perm[i] = (uint32_t)i;
    for (size_t i = 0; i < want; i++) {
        size_t r = i + (size_t)bbp_rng_below(&rng, j->rows.rows - i);
        uint32_t t = perm[i];
        perm[i] = perm[r];
        perm[r] = t;
        memcpy(x + i * j->dim, j->rows.x + (size_t)perm[i] * j->dim, j->dim * sizeof(float));
    }
    free(perm);
    *n = want;
    *owned = x;
    return x;
}

/* Worker: coarse k-means, residuals, one codebook per sub-space. */
static void train(ix_train_job *j)
{
    size_t n;
    float *owned;
    const float *x = training_rows(j, &n, &owned);
    uint32_t *assign = malloc(n * sizeof *assign);
    float *res = malloc(n * j->dim * sizeof *res), *sub = malloc(n * j->dsub * sizeof *sub);
    j->centroids = malloc((size_t)j->nlist * j->dim * sizeof(float));
    j->codebooks = malloc((size_t)j->pq_m * IX_KSUB * j->dsub * sizeof(float));
    int rc = x && assign && res && sub && j->centroids && j->codebooks ? BB_OK : BB_ENOMEM;
    if (!rc)
        rc = ix_kmeans(x, n, j->dim, j->nlist, j->iters, j->seed, j->centroids, &j->cancel);
    if (!rc)
        rc = ix_assign(x, n, j->centroids, j->nlist, j->dim, false, assign, NULL);
    for (size_t i = 0; !rc && i < n; i++)
        for (uint32_t d = 0; d < j->dim; d++)
            res[i * j->dim + d] = x[i * j->dim + d] - j->centroids[(size_t)assign[i] * j->dim + d];
    for (uint32_t m = 0; !rc && m < j->pq_m; m++) {
        for (size_t i = 0; i < n; i++)
            memcpy(sub + i * j->dsub, res + i * j->dim + (size_t)m * j->dsub,
                   j->dsub * sizeof(float));
        rc = ix_kmeans(sub, n, j->dsub, IX_KSUB, j->iters, j->seed + 1 + m,
                       j->codebooks + (size_t)m * IX_KSUB * j->dsub, &j->cancel);
    }
    if (rc)
        job_fail(j, rc, rc == BB_ENOMEM ? "out of memory" : "cancelled");
    free(owned);
    free(assign);
    free(res);
    free(sub);
}

static void job_work(void *arg)
{
    ix_train_job *j = arg;
    int expect = JOB_QUEUED;
    if (!atomic_compare_exchange_strong(&j->state, &expect, JOB_RUNNING))
        return;
    train(j);
    expect = JOB_RUNNING;
    if (!atomic_compare_exchange_strong(&j->state, &expect, JOB_FINISHED))
        job_free(j); /* orphaned: the index is gone */
}

/* Engine thread: the trained quantizers become the index's. */
static int commit(ix_train_job *j, bb_error *err)
{
    ix_index *ix = j->ix;
    ix_ivfpq *v = &ix->u.ivf;
    if (j->rc)
        return bb_error_set(err, j->rc, "%s: Train: %s", ix->who, j->msg);
    ix_list *lists = v->lists ? v->lists : calloc(v->nlist, sizeof *lists);
    if (!lists)
        return bb_error_set(err, BB_ENOMEM, "%s: Train: out of memory", ix->who);
    v->lists = lists;
    free(v->centroids);
    free(v->codebooks);
    v->centroids = j->centroids;
    v->codebooks = j->codebooks;
    j->centroids = j->codebooks = NULL;
    v->dsub = j->dsub;
    v->trained = true;
    ix_ivfpq_prepare(ix);
    return BB_OK;
}

static void job_done(void *arg)
{
    ix_train_job *j = arg;
    if (j->in_dispatch) { /* ran inline: the dispatch answers */
        j->done_inline = true;
        return;
    }
    j->ix->u.ivf.job = NULL;
    bb_error err = {0};
    if (commit(j, &err)) {
        bb_complete_err(j->completion, err.code, err.msg);
    } else {
        bb_value *t = bb_value_trigger();
        if (t)
            bb_complete_ok(j->completion, &t, 1);
        else
            bb_complete_err(j->completion, BB_ENOMEM, "index: out of memory");
    }
    job_free(j);
}

/* The refusals of a Train, before any work. */
static int train_check(ix_index *ix, const ix_rows *rows, bb_error *err)
{
    ix_ivfpq *v = &ix->u.ivf;
    if (v->job)
        return bb_error_set(err, BB_ESTATE, "%s: Train while another Train is running", ix->who);
    if (ix->n)
        return bb_error_set(err, BB_ESTATE,
                            "%s: Train after %llu vectors were added: their codes belong to the "
                            "current quantizers (train a fresh index)",
                            ix->who, (unsigned long long)ix->n);
    if (ix->dim % v->pq_m || ix->dim / v->pq_m > IX_MAX_DSUB)
        return bb_error_set(err, BB_ECONFIG,
                            "%s: dimension %u does not split into pq_m = %u sub-vectors of at "
                            "most %u floats",
                            ix->who, ix->dim, v->pq_m, IX_MAX_DSUB);
    size_t need = v->nlist > IX_KSUB ? v->nlist : IX_KSUB;
    if (rows->rows < need)
        return bb_error_set(err, BB_EINVAL,
                            "%s: Train needs at least %zu samples (nlist = %u lists, %u "
                            "codewords per sub-space), got %zu",
                            ix->who, need, v->nlist, IX_KSUB, rows->rows);
    return BB_OK;
}

bb_dispatch_result ix_ivfpq_train(ix_index *ix, bb_ctx *ctx, const bb_dispatch_call *call,
                                  const bb_value *samples, ix_rows *rows, bb_value **outputs,
                                  bb_error *err)
{
    ix_ivfpq *v = &ix->u.ivf;
    ix_train_job *j = NULL;
    if (train_check(ix, rows, err) ||
        (!(j = calloc(1, sizeof *j)) && bb_error_set(err, BB_ENOMEM, "%s: out of memory", ix->who))) {
        ix_rows_free(rows);
        return BB_DISPATCH_NOW_ERR;
    }
    atomic_init(&j->state, JOB_QUEUED);
    atomic_init(&j->cancel, false);
    j->ix = ix;
    j->completion = call->completion;
    j->samples = bb_value_ref((bb_value *)samples);
    j->rows = *rows; /* the job takes the rows (and an owned copy) */
    rows->owned = NULL;
    j->dim = ix->dim;
    j->nlist = v->nlist;
    j->pq_m = v->pq_m;
    j->dsub = ix->dim / v->pq_m;
    j->iters = v->iters;
    j->max_train = v->max_train;
    j->seed = ix->seed;
    j->in_dispatch = true;
    int rc = ctx && ctx->api && ctx->api->submit_work
                 ? ctx->api->submit_work(ctx, job_work, job_done, j)
                 : (job_work(j), job_done(j), BB_OK);
    j->in_dispatch = false;
    if (rc || j->done_inline) {
        if (rc)
            bb_error_set(err, rc, "%s: the host refused the Train work", ix->who);
        else
            commit(j, err);
        bool ok = !rc && !err->code;
        job_free(j);
        if (ok && !(outputs[0] = bb_value_trigger()))
            ok = !bb_error_set(err, BB_ENOMEM, "%s: out of memory", ix->who);
        return ok ? BB_DISPATCH_NOW_OK : BB_DISPATCH_NOW_ERR;
    }
    v->job = j;
    return BB_DISPATCH_LATER;
}

void ix_ivfpq_cancel(ix_index *ix)
{
    ix_train_job *j = ix->u.ivf.job;
    if (!j)
        return;
    ix->u.ivf.job = NULL;
    atomic_store(&j->cancel, true); /* a running k-means stops at its next iteration */
    for (;;) {
        int s = atomic_load(&j->state);
        if (s == JOB_RUNNING) {
            if (atomic_compare_exchange_strong(&j->state, &s, JOB_ORPHANED))
                return; /* the worker frees it */
        } else { /* queued (the host cancels work not started) or finished */
            job_free(j);
            return;
        }
    }
}
