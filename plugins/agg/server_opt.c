/*
 * server_opt.c — the adaptive server optimizers of Reddi et al. 2021
 * ("Adaptive Federated Optimization", Algorithm 2): agg::FedAdam,
 * agg::FedYogi and agg::FedAdagrad.
 *
 * The round's contributions are averaged as FedAvg does (weighted by
 * num_samples); the difference from the global model x the round started
 * from is a pseudo-gradient Delta, and the server steps
 *
 *   m = beta1 m + (1 - beta1) Delta
 *   v = v + Delta^2                                       FedAdagrad
 *   v = v - (1 - beta2) Delta^2 sign(v - Delta^2)         FedYogi
 *   v = beta2 v + (1 - beta2) Delta^2                     FedAdam
 *   x = x + server_lr m / (sqrt(v) + tau)
 *
 * per coordinate, from m = 0 and v = tau^2 (the paper's v_{-1} >= tau^2; no
 * bias correction, as in the paper). The result is the new x.
 *
 * x comes from the program: SetModel(params) hands the aggregator the model
 * the round's clients started from (the parameters the server sent); after
 * each Aggregate x is the result, so a program that loads every result into
 * its model may call SetModel once. The moments and x are state, kept in
 * the snapshot (snapshot.c calls agg_server_snapshot / _restore).
 *
 * Workload: one pass over the round's mean and the moments per Aggregate,
 * memory-bound like the reduction before it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agg.h"

bool agg_is_server_optimizer(agg_kind kind)
{
    return kind == AGG_FEDADAM || kind == AGG_FEDYOGI || kind == AGG_FEDADAGRAD;
}

void agg_server_free(agg_server *s)
{
    bb_value_unref(s->reference);
    free(s->m);
    free(s->v);
    s->reference = NULL;
    s->m = s->v = NULL;
    s->numel = 0;
    s->steps = 0;
}

static void forget_moments(agg_server *s)
{
    free(s->m);
    free(s->v);
    s->m = s->v = NULL;
    s->numel = 0;
    s->steps = 0;
}

int agg_server_set_model(agg *a, const bb_value *params, bb_error *err)
{
    if (!params || params->type->kind != BB_VK_TENSOR || params->u.tensor.dtype != BB_DT_FLOAT ||
        bb_tensor_numel(params) == SIZE_MAX)
        return bb_error_set(err, BB_ETYPE, "%s: SetModel takes the global model as an f32 "
                            "tensor, not a %s", a->type_name,
                            params ? params->type->name : "missing value");
    if (!agg_is_server_optimizer(a->kind))
        return BB_OK; /* the averaging aggregators need no reference */
    agg_server *s = &a->srv;
    if (s->m && bb_tensor_numel(params) != s->numel)
        forget_moments(s); /* another model: its moments start over */
    bb_value_unref(s->reference);
    s->reference = bb_value_ref((bb_value *)params);
    return BB_OK;
}

/* The v update of one coordinate. */
static inline float second_moment(agg_kind kind, float v, float d2, float beta2)
{
    switch (kind) {
    case AGG_FEDADAGRAD: return v + d2;
    case AGG_FEDYOGI: return v - (1 - beta2) * d2 * (float)((v > d2) - (v < d2));
    default: return beta2 * v + (1 - beta2) * d2;
    }
}

int agg_server_prepare(agg *a, bb_error *err)
{
    agg_server *s = &a->srv;
    if (!s->reference)
        return bb_error_set(err, BB_ESTATE,
                            "%s: no global model to step from: SetModel(params) "
                            "(bb-agg.Aggregator.atomic) must come before the first Aggregate",
                            a->type_name);
    if (bb_tensor_numel(s->reference) != a->numel) {
        char have[160], want[160];
        agg_format_shape(s->reference->u.tensor.ndim, s->reference->u.tensor.dims, have,
                         sizeof have);
        agg_format_shape(a->ndim, a->dims, want, sizeof want);
        return bb_error_set(err, BB_ETYPE,
                            "%s: this round's contributions have shape %s, but the global model "
                            "(SetModel) has shape %s",
                            a->type_name, want, have);
    }
    if (s->m)
        return BB_OK;
    size_t n = a->numel;
    s->m = calloc(n ? n : 1, sizeof *s->m);
    s->v = malloc((n ? n : 1) * sizeof *s->v);
    if (!s->m || !s->v) {
        forget_moments(s);
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", a->type_name);
    }
    float tau2 = (float)(s->tau * s->tau);
    for (size_t i = 0; i < n; i++)
        s->v[i] = tau2;
    s->numel = n;
    return BB_OK;
}

void agg_server_step(agg *a, float *inout, bool commit)
{
    agg_server *s = &a->srv;
    const float *x = bb_tensor_f32(s->reference);
    float *m = s->m, *v = s->v;
    float b1 = (float)s->beta1, b2 = (float)s->beta2, lr = (float)s->lr, tau = (float)s->tau;
    agg_kind kind = a->kind;
    for (size_t i = 0; i < s->numel; i++) {
        float d = inout[i] - x[i];
        float mi = b1 * m[i] + (1 - b1) * d;
        float vi = second_moment(kind, v[i], d * d, b2);
        inout[i] = x[i] + lr * mi / (sqrtf(vi) + tau);
        if (commit) {
            m[i] = mi;
            v[i] = vi;
        }
    }
    if (commit)
        s->steps++;
}

void agg_server_advance(agg *a, const bb_value *result)
{
    if (!agg_is_server_optimizer(a->kind))
        return;
    bb_value_unref(a->srv.reference);
    a->srv.reference = bb_value_ref((bb_value *)result);
}

/* ---- snapshot: u8 reference (0 none, 1 the last result, 2 its own tensor),
 * [shape, f32 data], u64 steps, u8 has_moments, [m, v: numel f32 each] ------ */

void agg_server_snapshot(const agg *a, bb_writer *w)
{
    const agg_server *s = &a->srv;
    uint8_t ref = !s->reference ? 0 : s->reference == a->last ? 1 : 2;
    bb_writer_put_u8(w, ref);
    if (ref == 2)
        agg_snapshot_put_tensor(w, s->reference);
    bb_writer_put_u64le(w, s->steps);
    bb_writer_put_u8(w, s->m != NULL);
    if (s->m) {
        bb_writer_put(w, s->m, s->numel * sizeof(float));
        bb_writer_put(w, s->v, s->numel * sizeof(float));
    }
}

int agg_server_restore(agg *into, bb_reader *r, bb_error *err)
{
    agg_server *s = &into->srv;
    uint8_t ref = 0, has_moments = 0;
    if (!bb_reader_u8(r, &ref) || ref > 2 || (ref == 1 && !into->last))
        return bb_error_set(err, BB_EDECODE, "%s: snapshot server state is truncated or out of "
                            "range", into->type_name);
    if (ref == 1)
        s->reference = bb_value_ref(into->last);
    if (ref == 2 && !(s->reference = agg_snapshot_get_tensor(r)))
        return bb_error_set(err, BB_EDECODE, "%s: snapshot global model is truncated",
                            into->type_name);
    if (!bb_reader_u64le(r, &s->steps) || !bb_reader_u8(r, &has_moments) || has_moments > 1 ||
        (has_moments && !s->reference))
        return bb_error_set(err, BB_EDECODE, "%s: snapshot server state is truncated or out of "
                            "range", into->type_name);
    if (!has_moments)
        return BB_OK;
    size_t n = bb_tensor_numel(s->reference);
    if (n > SIZE_MAX / 2 / sizeof(float) || !bb_reader_has(r, 2 * n, sizeof(float)))
        return bb_error_set(err, BB_EDECODE, "%s: snapshot optimizer moments are truncated",
                            into->type_name);
    s->m = malloc((n ? n : 1) * sizeof *s->m);
    s->v = malloc((n ? n : 1) * sizeof *s->v);
    if (!s->m || !s->v)
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", into->type_name);
    bb_reader_get(r, s->m, n * sizeof(float));
    bb_reader_get(r, s->v, n * sizeof(float));
    s->numel = n;
    return BB_OK;
}
