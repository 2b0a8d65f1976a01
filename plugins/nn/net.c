/*
 * net.c — the multi-layer perceptron's math over one flat float32 parameter
 * vector (layout in mlp.h). Pure functions of their arguments: the engine
 * thread and worker threads each bring their own parameters, workspace and
 * optimizer state, so nothing here is shared.
 *
 * The GEMMs (forward X·W, backward A^T·dZ and dZ·W^T) go through CBLAS
 * (OpenBLAS); the elementwise parts are plain loops. Losses are means over
 * the batch rows, computed in double per row (log-sum-exp shifted by the
 * row maximum), so gradients match finite differences closely.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp.h"
#include "plugins/common/plugin_rng.h"

#define EVAL_CHUNK 1024 /* rows per forward while evaluating */

void mlp_shape_init(mlp_shape *s, const uint32_t *sizes, uint32_t n_sizes, mlp_act act,
                    mlp_loss loss)
{
    memset(s, 0, sizeof *s);
    s->n_layers = n_sizes - 1;
    s->act = act;
    s->loss = loss;
    size_t off = 0;
    for (uint32_t i = 0; i < n_sizes; i++) {
        s->size[i] = sizes[i];
        s->max_width = sizes[i] > s->max_width ? sizes[i] : s->max_width;
    }
    for (uint32_t l = 0; l < s->n_layers; l++) {
        s->w_off[l] = off;
        off += (size_t)sizes[l] * sizes[l + 1];
        s->b_off[l] = off;
        off += sizes[l + 1];
    }
    s->n_params = off;
}

/* Uniform fan-in initialization: He for relu (gain sqrt 2), LeCun for tanh;
 * biases zero. */
void mlp_init_params(const mlp_shape *s, uint64_t seed, float *p)
{
    bbp_rng rng;
    bbp_rng_seed(&rng, seed);
    memset(p, 0, s->n_params * sizeof *p);
    double gain = s->act == ACT_RELU ? sqrt(2.0) : 1.0;
    for (uint32_t l = 0; l < s->n_layers; l++) {
        double bound = gain * sqrt(3.0 / (double)s->size[l]);
        size_t n = (size_t)s->size[l] * s->size[l + 1];
        for (size_t i = 0; i < n; i++)
            p[s->w_off[l] + i] = (float)((2 * bbp_rng_uniform(&rng) - 1) * bound);
    }
}

uint64_t mlp_params_digest(const float *p, size_t n)
{
    /* Word-wise FNV-1a (8 bytes per multiply: a 10M-parameter model digests
     * in a few ms), then a final avalanche so every bit of the result
     * depends on every word. */
    const uint64_t prime = 0x100000001b3ULL;
    uint64_t h = 0xcbf29ce484222325ULL ^ (uint64_t)n;
    size_t i = 0;
    for (; i + 1 < n; i += 2) {
        uint32_t lo, hi;
        memcpy(&lo, &p[i], 4);
        memcpy(&hi, &p[i + 1], 4);
        h = (h ^ ((uint64_t)hi << 32 | lo)) * prime;
    }
    if (i < n) {
        uint32_t lo;
        memcpy(&lo, &p[i], 4);
        h = (h ^ lo) * prime;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

void mlp_ws_free(mlp_ws *w)
{
    for (uint32_t l = 1; l <= MLP_MAX_LAYERS; l++)
        free(w->a[l]);
    free(w->da);
    free(w->dz);
    memset(w, 0, sizeof *w);
}

int mlp_ws_reserve(mlp_ws *w, const mlp_shape *s, size_t rows)
{
    if (rows <= w->rows_cap)
        return BB_OK;
    mlp_ws n = {.rows_cap = rows};
    bool ok = true;
    for (uint32_t l = 1; l <= s->n_layers; l++)
        ok = ok && (n.a[l] = malloc(rows * s->size[l] * sizeof(float)));
    ok = ok && (n.da = malloc(rows * s->max_width * sizeof(float)));
    ok = ok && (n.dz = malloc(rows * s->max_width * sizeof(float)));
    if (!ok) {
        mlp_ws_free(&n);
        return BB_ENOMEM;
    }
    mlp_ws_free(w);
    *w = n;
    return BB_OK;
}

const float *mlp_forward(const mlp_shape *s, const float *p, const float *x, size_t rows,
                         mlp_ws *w)
{
    w->a[0] = (float *)x;
    w->rows = rows;
    for (uint32_t l = 0; l < s->n_layers; l++) {
        uint32_t in = s->size[l], out = s->size[l + 1];
        float *z = w->a[l + 1];
        const float *b = p + s->b_off[l];
        for (size_t r = 0; r < rows; r++)
            memcpy(z + r * out, b, out * sizeof *z);
        if (rows)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)out, (int)in,
                        1.0f, w->a[l], (int)in, p + s->w_off[l], (int)out, 1.0f, z, (int)out);
        if (l + 1 == s->n_layers)
            break; /* the output layer is linear */
        size_t n = rows * out;
        if (s->act == ACT_RELU)
            for (size_t i = 0; i < n; i++)
                z[i] = z[i] > 0 ? z[i] : 0;
        else
            for (size_t i = 0; i < n; i++)
                z[i] = tanhf(z[i]);
    }
    return w->a[s->n_layers];
}

static size_t argmax(const float *v, size_t n)
{
    size_t k = 0;
    for (size_t i = 1; i < n; i++)
        if (v[i] > v[k])
            k = i;
    return k;
}

void mlp_loss_grad(const mlp_shape *s, const mlp_ws *w, const mlp_target *t, float *dz,
                   mlp_stats *st)
{
    size_t rows = w->rows, k = s->size[s->n_layers];
    const float *y = w->a[s->n_layers];
    double inv = rows ? 1.0 / (double)rows : 0.0;
    for (size_t r = 0; r < rows; r++) {
        const float *yr = y + r * k;
        const float *tr = t->dense ? t->dense + r * k : NULL;
        float *gr = dz ? dz + r * k : NULL;
        double loss = 0;
        bool hit;
        if (s->loss == LOSS_CE) {
            double mx = yr[argmax(yr, k)], sum = 0, tsum = 0;
            for (size_t j = 0; j < k; j++)
                sum += exp((double)yr[j] - mx);
            double lse = mx + log(sum);
            for (size_t j = 0; j < k; j++) {
                double tj = tr ? tr[j] : (int32_t)j == t->cls[r];
                tsum += tj;
                loss -= tj * ((double)yr[j] - lse);
            }
            for (size_t j = 0; gr && j < k; j++) {
                double tj = tr ? tr[j] : (int32_t)j == t->cls[r];
                gr[j] = (float)((exp((double)yr[j] - lse) * tsum - tj) * inv);
            }
            hit = argmax(yr, k) == (tr ? argmax(tr, k) : (size_t)t->cls[r]);
        } else {
            double scale = 2.0 * inv / (double)k;
            for (size_t j = 0; j < k; j++) {
                double tj = tr ? tr[j] : k == 1 ? t->cls[r] : (int32_t)j == t->cls[r];
                double d = (double)yr[j] - tj;
                loss += d * d / (double)k;
                if (gr)
                    gr[j] = (float)(scale * d);
            }
            if (k == 1) /* regression: within half a unit counts as right */
                hit = fabs((double)yr[0] - (tr ? tr[0] : t->cls[r])) < 0.5;
            else
                hit = argmax(yr, k) == (tr ? argmax(tr, k) : (size_t)t->cls[r]);
        }
        st->loss_sum += loss;
        st->correct += hit;
    }
    st->rows += rows;
}

/* w->da (dLoss/dA_l) through layer l's activation; then the scratch buffers
 * trade places: da is the next layer's dz. */
static void through_activation(const mlp_shape *s, mlp_ws *w, uint32_t l)
{
    const float *a = w->a[l];
    size_t n = w->rows * s->size[l];
    if (s->act == ACT_RELU)
        for (size_t i = 0; i < n; i++)
            w->da[i] = a[i] > 0 ? w->da[i] : 0;
    else
        for (size_t i = 0; i < n; i++)
            w->da[i] *= 1.0f - a[i] * a[i];
    float *t = w->dz;
    w->dz = w->da;
    w->da = t;
}

void mlp_backward(const mlp_shape *s, const float *p, mlp_ws *w, float *g, bool accumulate)
{
    size_t rows = w->rows;
    float *dz = w->dz;
    float beta = accumulate ? 1.0f : 0.0f;
    for (uint32_t l = s->n_layers; l-- > 0;) {
        uint32_t in = s->size[l], out = s->size[l + 1];
        float *gw = g + s->w_off[l], *gb = g + s->b_off[l];
        if (rows)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)in, (int)out, (int)rows,
                        1.0f, w->a[l], (int)in, dz, (int)out, beta, gw, (int)out);
        else if (!accumulate)
            memset(gw, 0, (size_t)in * out * sizeof *gw);
        if (!accumulate)
            memset(gb, 0, out * sizeof *gb);
        for (size_t r = 0; r < rows; r++)
            for (uint32_t j = 0; j < out; j++)
                gb[j] += dz[r * out + j];
        if (l == 0 || !rows)
            break;
        /* dA_{l} = dZ W^T, then through the activation of layer l */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)in, (int)out, 1.0f,
                    dz, (int)out, p + s->w_off[l], (int)out, 0.0f, w->da, (int)in);
        through_activation(s, w, l);
        dz = w->dz;
    }
}

bool mlp_optim_has_moments(const mlp_optim *o)
{
    return o->kind == OPT_ADAM || o->momentum != 0;
}

int mlp_optim_init(mlp_optim *o, size_t n)
{
    /* plain SGD keeps no state: no n floats held (and touched) for nothing */
    o->m = mlp_optim_has_moments(o) ? calloc(n ? n : 1, sizeof *o->m) : NULL;
    o->v = o->kind == OPT_ADAM ? calloc(n ? n : 1, sizeof *o->v) : NULL;
    o->t = 0;
    return (o->m || !mlp_optim_has_moments(o)) && (o->kind != OPT_ADAM || o->v) ? BB_OK
                                                                                : BB_ENOMEM;
}

void mlp_optim_reset(mlp_optim *o, size_t n)
{
    if (o->m)
        memset(o->m, 0, n * sizeof *o->m);
    if (o->v)
        memset(o->v, 0, n * sizeof *o->v);
    o->t = 0;
}

void mlp_optim_free(mlp_optim *o)
{
    free(o->m);
    free(o->v);
    o->m = o->v = NULL;
}

void mlp_optim_step(mlp_optim *o, float *restrict p, const float *restrict g, size_t n)
{
    float lr = o->lr;
    if (o->kind == OPT_SGD && o->momentum == 0) {
        for (size_t i = 0; i < n; i++)
            p[i] -= lr * g[i];
    } else if (o->kind == OPT_SGD) {
        float mu = o->momentum, *restrict m = o->m;
        for (size_t i = 0; i < n; i++) {
            m[i] = mu * m[i] + g[i];
            p[i] -= lr * m[i];
        }
    } else {
        o->t++;
        float b1 = o->beta1, b2 = o->beta2, eps = o->eps;
        float c1 = (float)(1.0 / (1.0 - pow(b1, (double)o->t)));
        float c2 = (float)(1.0 / (1.0 - pow(b2, (double)o->t)));
        float *restrict m = o->m, *restrict v = o->v;
        for (size_t i = 0; i < n; i++) {
            m[i] = b1 * m[i] + (1 - b1) * g[i];
            v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
            p[i] -= lr * (m[i] * c1) / (sqrtf(v[i] * c2) + eps);
        }
    }
}

int mlp_target_from(const mlp_shape *s, const bb_value *y, size_t rows, int32_t *cls_buf,
                    float *fbuf, mlp_target *t, char *msg, size_t cap)
{
    size_t k = s->size[s->n_layers];
    memset(t, 0, sizeof *t);
    if (!y || y->type->kind != BB_VK_TENSOR) {
        snprintf(msg, cap, "the target is %s, not a tensor", y ? y->type->name : "missing");
        return BB_ETYPE;
    }
    const bb_tensor_view *v = &y->u.tensor;
    if (v->ndim == 2 && (size_t)v->dims[0] == rows && (size_t)v->dims[1] == k &&
        v->dtype == BB_DT_FLOAT) {
        t->dense = bb_tensor_f32(y);
        return BB_OK;
    }
    if (v->ndim != 1 || (size_t)v->dims[0] != rows) {
        snprintf(msg, cap, "the target has %u dimensions / %lld rows; want [%zu] labels or "
                 "[%zu, %zu] f32 targets", v->ndim, v->ndim ? (long long)v->dims[0] : 0LL, rows,
                 rows, k);
        return BB_ETYPE;
    }
    bool regression = s->loss == LOSS_MSE && k == 1;
    for (size_t r = 0; r < rows; r++) {
        double d;
        switch (v->dtype) {
        case BB_DT_FLOAT: d = ((const float *)(const void *)v->data)[r]; break;
        case BB_DT_DOUBLE: d = ((const double *)(const void *)v->data)[r]; break;
        case BB_DT_INT32: d = ((const int32_t *)(const void *)v->data)[r]; break;
        case BB_DT_INT64: d = (double)((const int64_t *)(const void *)v->data)[r]; break;
        default:
            snprintf(msg, cap, "labels of dtype %s", bb_dtype_name(v->dtype));
            return BB_ETYPE;
        }
        if (regression) {
            fbuf[r] = (float)d;
            continue;
        }
        if (!(d >= 0 && d < (double)k && d == floor(d))) {
            snprintf(msg, cap, "label %g of row %zu is not a class id in [0, %zu)", d, r, k);
            return BB_EINVAL;
        }
        cls_buf[r] = (int32_t)d;
    }
    if (regression)
        t->dense = fbuf;
    else
        t->cls = cls_buf;
    return BB_OK;
}

void mlp_add_proximal(const mlp_prox *prox, const float *restrict p, float *restrict g, size_t n)
{
    const float mu = prox->mu, *restrict center = prox->center;
    for (size_t i = 0; i < n; i++)
        g[i] += mu * (p[i] - center[i]);
}

/* mlp_backward and a plain SGD step in one: each layer's weights move by
 * -lr times their gradient as soon as the layer below has what it needs
 * from them (dA = dZ W^T first), so no gradient vector is ever held: the
 * GEMM that makes a layer's gradient adds it into the weights (beta 1). */
static void backward_sgd(const mlp_shape *s, float *p, mlp_ws *w, float lr)
{
    size_t rows = w->rows;
    for (uint32_t l = s->n_layers; rows && l-- > 0;) {
        uint32_t in = s->size[l], out = s->size[l + 1];
        const float *dz = w->dz;
        if (l > 0) /* dA_{l} = dZ W^T with the weights before this step */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)in, (int)out,
                        1.0f, dz, (int)out, p + s->w_off[l], (int)out, 0.0f, w->da, (int)in);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)in, (int)out, (int)rows, -lr,
                    w->a[l], (int)in, dz, (int)out, 1.0f, p + s->w_off[l], (int)out);
        float *b = p + s->b_off[l];
        for (uint32_t j = 0; j < out; j++) {
            float gb = 0;
            for (size_t r = 0; r < rows; r++)
                gb += dz[r * out + j];
            b[j] -= lr * gb;
        }
        if (l == 0)
            break;
        through_activation(s, w, l);
    }
}

bool mlp_pass_needs_grad(const mlp_optim *o, const mlp_prox *prox)
{
    return o && (mlp_optim_has_moments(o) || prox);
}

int mlp_pass(const mlp_shape *s, float *p, mlp_optim *o, const mlp_prox *prox, mlp_ws *w,
             float *grad, const float *x, const mlp_target *t, size_t rows, size_t mb,
             mlp_stats *st)
{
    size_t k = s->size[s->n_layers], in = s->size[0];
    if (!o) /* evaluation: bigger chunks, only to bound the workspace */
        mb = EVAL_CHUNK;
    if (mlp_ws_reserve(w, s, mb < rows ? mb : rows))
        return BB_ENOMEM;
    for (size_t r0 = 0; r0 < rows; r0 += mb) {
        size_t n = rows - r0 < mb ? rows - r0 : mb;
        mlp_target sub = {t->cls ? t->cls + r0 : NULL, t->dense ? t->dense + r0 * k : NULL};
        mlp_forward(s, p, x + r0 * in, n, w);
        mlp_loss_grad(s, w, &sub, o ? w->dz : NULL, st);
        if (o && !mlp_pass_needs_grad(o, prox)) {
            backward_sgd(s, p, w, o->lr);
        } else if (o) {
            mlp_backward(s, p, w, grad, false);
            if (prox)
                mlp_add_proximal(prox, p, grad, s->n_params);
            mlp_optim_step(o, p, grad, s->n_params);
        }
    }
    return BB_OK;
}
