/*
 * net.c — the multi-layer perceptron's math over one flat float32 parameter
 * vector (layout in mlp.h). Pure functions of their arguments: the engine
 * thread and worker threads each bring their own parameters, workspace and
 * optimizer state, so nothing here is shared.
 *
 * The GEMMs (forward X·W, backward A^T·dZ and dZ·W^T) go through CBLAS
 * (OpenBLAS); the elementwise parts are plain loops. The losses (means over
 * the batch rows, in double per row), targets and optimizer steps are
 * plugins/common/plugin_train.h's, shared with nn::Onnx.
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
                    bbp_loss loss)
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

void mlp_loss_grad(const mlp_shape *s, const mlp_ws *w, const bbp_target *t, float *dz,
                   bbp_stats *st)
{
    bbp_loss_grad(s->loss, w->a[s->n_layers], w->rows, s->size[s->n_layers], t, w->rows, dz, st);
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

bool mlp_pass_needs_grad(const bbp_optim *o, const mlp_prox *prox)
{
    return o && (bbp_optim_has_moments(o) || o->weight_decay != 0 || (prox && prox->mu != 0));
}

void mlp_input_grad(const mlp_shape *s, const float *p, const mlp_ws *w, float *dx)
{
    /* dX = dZ_0 W_0^T: the first layer's input has no activation */
    uint32_t in = s->size[0], out = s->size[1];
    if (w->rows)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)w->rows, (int)in, (int)out,
                    1.0f, w->dz, (int)out, p + s->w_off[0], (int)out, 0.0f, dx, (int)in);
}

int mlp_target_from(const mlp_shape *s, const bb_value *y, size_t rows, int32_t *cls_buf,
                    float *fbuf, bbp_target *t, char *msg, size_t cap)
{
    return bbp_target_from(s->loss, s->size[s->n_layers], y, rows, cls_buf, fbuf, t, msg, cap);
}


int mlp_pass(const mlp_shape *s, float *p, bbp_optim *o, const mlp_prox *prox, mlp_ws *w,
             float *grad, const float *x, const bbp_target *t, size_t rows, size_t mb,
             bbp_stats *st)
{
    size_t k = s->size[s->n_layers], in = s->size[0];
    if (!o) /* evaluation: bigger chunks, only to bound the workspace */
        mb = EVAL_CHUNK;
    if (mlp_ws_reserve(w, s, mb < rows ? mb : rows))
        return BB_ENOMEM;
    for (size_t r0 = 0; r0 < rows; r0 += mb) {
        size_t n = rows - r0 < mb ? rows - r0 : mb;
        bbp_target sub = {t->cls ? t->cls + r0 : NULL, t->dense ? t->dense + r0 * k : NULL};
        mlp_forward(s, p, x + r0 * in, n, w);
        mlp_loss_grad(s, w, &sub, o ? w->dz : NULL, st);
        if (o && !mlp_pass_needs_grad(o, prox)) {
            backward_sgd(s, p, w, o->lr);
        } else if (o) {
            mlp_backward(s, p, w, grad, false);
            if (prox)
                mlp_add_proximal(prox, p, grad, s->n_params);
            bbp_optim_step(o, p, grad, s->n_params, NULL, 0);
        }
    }
    return BB_OK;
}
