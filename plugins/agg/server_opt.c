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
 * Coordinates that are not trained parameters — BatchNormalization's
 * running statistics, which a model's forward passes move, not its
 * optimizer — take the round's mean as FedAvg would (TensorFlow Federated's
 * FedOpt averages its non-trainable weights the same way): an adaptive step
 * on a running variance, scaled as if it were a gradient, is no estimate of
 * anything. The program names them with SetParamNames(the model's
 * ParamNames); without it every coordinate is stepped. docs/DECISIONS.md
 * has the CNN run that collapsed without it.
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

#include <cjson/cJSON.h>

#include "agg.h"

#define PARAM_NAMES_MAX_BYTES ((size_t)16 << 20) /* ParamNames of a model with ~100k tensors */

bool agg_is_server_optimizer(agg_kind kind)
{
    return kind == AGG_FEDADAM || kind == AGG_FEDYOGI || kind == AGG_FEDADAGRAD;
}

void agg_server_free(agg_server *s)
{
    bb_value_unref(s->reference);
    free(s->m);
    free(s->v);
    free(s->averaged);
    s->reference = NULL;
    s->m = s->v = NULL;
    s->averaged = NULL;
    s->n_averaged = 0;
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

/* ---- SetParamNames ---------------------------------------------------------------- */

static int cmp_range(const void *x, const void *y)
{
    const size_t *a = x, *b = y;
    return a[0] < b[0] ? -1 : a[0] > b[0];
}

/* j is a whole number a double holds exactly (an offset, a dimension). */
static bool json_count(const cJSON *j, size_t *out)
{
    if (!cJSON_IsNumber(j) || j->valuedouble < 0 ||
        j->valuedouble > 9007199254740992.0 /* 2^53 */ ||
        j->valuedouble != (double)(size_t)j->valuedouble)
        return false;
    *out = (size_t)j->valuedouble;
    return true;
}

/* Entry i of ParamNames: its coordinates [*lo, *hi) and whether trained. */
static int param_entry(const agg *a, const cJSON *e, size_t i, size_t *lo, size_t *hi,
                       bool *trained, bb_error *err)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "offset");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(e, "trained");
    const char *who = cJSON_IsString(name) ? name->valuestring : "?";
    size_t at = 0, n = 1, k;
    const char *bad = !cJSON_IsObject(e)       ? "is not an object"
                      : !json_count(off, &at)  ? "has no \"offset\" that is a non-negative integer"
                      : !cJSON_IsArray(shape)  ? "has no \"shape\" array"
                      : !cJSON_IsBool(tr)      ? "has no \"trained\" true or false"
                                               : NULL;
    const cJSON *d, *dims = bad ? NULL : shape;
    cJSON_ArrayForEach(d, dims)
    {
        if (!json_count(d, &k)) {
            bad = "has a dimension that is not a non-negative integer";
            break;
        }
        if (k && n > SIZE_MAX / k) {
            bad = "has a shape too large to count";
            break;
        }
        n *= k;
    }
    if (!bad && at > SIZE_MAX - n)
        bad = "ends past any tensor";
    if (bad)
        return bb_error_set(err, BB_EINVAL, "%s: SetParamNames: entry %zu (\"%.64s\") %s",
                            a->type_name, i, who, bad);
    *lo = at;
    *hi = at + n;
    *trained = cJSON_IsTrue(tr);
    return BB_OK;
}

int agg_server_set_param_names(agg *a, const bb_value *names, bb_error *err)
{
    if (!names || names->type->kind != BB_VK_BYTES)
        return bb_error_set(err, BB_ETYPE, "%s: SetParamNames takes the model's ParamNames "
                            "(Bytes), not a %s", a->type_name,
                            names ? names->type->name : "missing value");
    size_t len = names->u.bytes.len;
    if (len > PARAM_NAMES_MAX_BYTES)
        return bb_error_set(err, BB_ELIMIT, "%s: SetParamNames: %zu bytes (limit %zu)",
                            a->type_name, len, PARAM_NAMES_MAX_BYTES);
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts((const char *)names->u.bytes.data, len, &end, false);
    if (!cJSON_IsArray(j)) {
        size_t at = j || !end ? 0 : (size_t)(end - (const char *)names->u.bytes.data);
        cJSON_Delete(j);
        return j ? bb_error_set(err, BB_EINVAL, "%s: SetParamNames: not a JSON array",
                                a->type_name)
                 : bb_error_set(err, BB_EINVAL, "%s: SetParamNames: not valid JSON (near byte "
                                "%zu)", a->type_name, at);
    }
    size_t n = (size_t)cJSON_GetArraySize(j), k = 0, i = 0;
    size_t(*r)[2] = malloc((n ? n : 1) * sizeof *r);
    if (!r) {
        cJSON_Delete(j);
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", a->type_name);
    }
    const cJSON *e;
    int rc = BB_OK;
    cJSON_ArrayForEach(e, j)
    {
        bool trained = true;
        if ((rc = param_entry(a, e, i++, &r[k][0], &r[k][1], &trained, err)))
            break;
        if (!trained && r[k][1] > r[k][0])
            k++;
    }
    cJSON_Delete(j);
    if (rc) {
        free(r);
        return rc;
    }
    qsort(r, k, sizeof *r, cmp_range);
    size_t m = 0; /* merge touching and overlapping ranges */
    for (size_t t = 0; t < k; t++) {
        if (m && r[t][0] <= r[m - 1][1]) {
            if (r[t][1] > r[m - 1][1])
                r[m - 1][1] = r[t][1];
        } else {
            r[m][0] = r[t][0];
            r[m][1] = r[t][1];
            m++;
        }
    }
    agg_server *s = &a->srv;
    free(s->averaged);
    s->averaged = m ? r : NULL;
    s->n_averaged = m;
    if (!m)
        free(r);
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
    if (s->n_averaged && s->averaged[s->n_averaged - 1][1] > a->numel)
        return bb_error_set(err, BB_ETYPE,
                            "%s: SetParamNames names coordinates up to %zu, but this round's "
                            "contributions have %zu",
                            a->type_name, s->averaged[s->n_averaged - 1][1], a->numel);
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

/* The step over coordinates [lo, hi). */
static void step_range(agg *a, float *inout, size_t lo, size_t hi, bool commit)
{
    agg_server *s = &a->srv;
    const float *x = bb_tensor_f32(s->reference);
    float *m = s->m, *v = s->v;
    float b1 = (float)s->beta1, b2 = (float)s->beta2, lr = (float)s->lr, tau = (float)s->tau;
    agg_kind kind = a->kind;
    for (size_t i = lo; i < hi; i++) {
        float d = inout[i] - x[i];
        float mi = b1 * m[i] + (1 - b1) * d;
        float vi = second_moment(kind, v[i], d * d, b2);
        inout[i] = x[i] + lr * mi / (sqrtf(vi) + tau);
        if (commit) {
            m[i] = mi;
            v[i] = vi;
        }
    }
}

void agg_server_step(agg *a, float *inout, bool commit)
{
    agg_server *s = &a->srv;
    size_t at = 0; /* the averaged ranges keep the mean (and their moments) */
    for (size_t r = 0; r < s->n_averaged; r++) {
        step_range(a, inout, at, s->averaged[r][0], commit);
        at = s->averaged[r][1];
    }
    step_range(a, inout, at, s->numel, commit);
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
