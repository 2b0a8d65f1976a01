/*
 * grad_norm.c — BatchNormalization (training mode with batch statistics
 * and running statistics; inference mode through the CPU kernel),
 * LayerNormalization and Softmax, with their gradients.
 *
 * BatchNormalization, per channel over N x spatial (count values):
 *   training  y = (x - mean_b) istd scale + B with the batch's mean and
 *             biased variance; the running statistics (when they are
 *             buffers of the model) become momentum x running +
 *             (1 - momentum) x batch, the variance unbiased (x count /
 *             (count - 1)) as PyTorch keeps it;
 *   backward  xhat = (x - mean_b) istd, dscale = sum(g xhat), dB = sum(g),
 *             dx = scale istd / count x (count g - dB - xhat dscale).
 * LayerNormalization: the CPU kernel's Mean / InvStdDev outputs are what
 *   backward needs; per row dx = istd (dxhat - mean(dxhat) - xhat
 *   mean(dxhat xhat)) with dxhat = g scale.
 * Softmax: dx = y (g - sum_axis(g y)).
 */
#include <math.h>
#include <string.h>

#include "grad.h"
#include "vec.h"

/* ---- BatchNormalization -------------------------------------------------------------- */

int ad_prepare_batchnorm(ad_plan *p, ad_node *n, const char *who, bb_error *err)
{
    if (bb_node_attr_int(n->node, "training_mode", 0) == 0)
        return BB_OK;
    /* exported in training mode: inference runs it without the flag */
    bb_node *aux = bb_node_clone(p->arena, n->node);
    if (!aux)
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", who);
    for (size_t i = 0; i < aux->attrs.n; i++)
        if (aux->attrs.v[i] && strcmp(aux->attrs.v[i]->name, "training_mode") == 0)
            aux->attrs.v[i]->i = 0;
    n->aux = aux;
    return BB_OK;
}

int ad_fwd_batchnorm_infer(ad_ctx *c, bb_value *const *in, bb_value **out)
{
    const bb_node *node = c->n->aux ? c->n->aux : c->n->node;
    return ad_kernel(c, CPU_OP_BatchNormalization, node, in, 5, out, 1);
}

static int check_bn(ad_ctx *c, bb_value *const *in)
{
    static const char *const names[5] = {"X", "scale", "B", "input_mean", "input_var"};
    if (c->n->n_in < 5)
        return ad_fail(c, BB_EINVAL, "needs 5 inputs, has %u", c->n->n_in);
    for (int i = 0; i < 5; i++) {
        int rc = ad_need_f32(c, in[i], names[i]);
        if (rc)
            return rc;
    }
    const bb_tensor_view *x = &in[0]->u.tensor;
    if (x->ndim < 2)
        return ad_fail(c, BB_EINVAL, "X must have rank >= 2, got %u", x->ndim);
    for (int i = 1; i < 5; i++)
        if (in[i]->u.tensor.ndim != 1 || in[i]->u.tensor.dims[0] != x->dims[1])
            return ad_fail(c, BB_EINVAL, "%s must have shape [%lld]", names[i],
                           (long long)x->dims[1]);
    return BB_OK;
}

/* The running statistics are updated when they are the model's buffers. */
static float *running(ad_ctx *c, uint32_t i, bb_value *const *in)
{
    return ad_in_is_param(c, i) ? bb_tensor_f32(in[i]) : NULL;
}

int ad_fwd_batchnorm_train(ad_ctx *c, bb_value *const *in, bb_value **out)
{
    int rc = check_bn(c, in);
    if (rc)
        return rc;
    const bb_tensor_view *x = &in[0]->u.tensor;
    int64_t C = x->dims[1];
    size_t N = (size_t)x->dims[0], inner = cpu_numel(x->ndim - 2, x->dims + 2), count = N * inner;
    double eps = bb_node_attr_float(c->n->node, "epsilon", 1e-5f);
    float mom = bb_node_attr_float(c->n->node, "momentum", 0.9f);
    bb_value *mean, *istd;
    if ((rc = ad_new(c, 1, &C, &mean)))
        return rc;
    if ((rc = ad_new(c, 1, &C, &istd)) || (rc = ad_new_uninit(c, in[0], &out[0]))) {
        bb_value_unref(mean);
        bb_value_unref(istd);
        return rc;
    }
    ad_save(c, 0, mean);
    ad_save(c, 1, istd);
    const float *X = bb_tensor_f32(in[0]), *scale = bb_tensor_f32(in[1]), *B = bb_tensor_f32(in[2]);
    float *Y = bb_tensor_f32(out[0]), *rm = running(c, 3, in), *rv = running(c, 4, in);
    for (size_t ch = 0; ch < (size_t)C; ch++) {
        double s = 0, ss = 0;
        for (size_t n = 0; n < N; n++)
            s += vec_sum(X + (n * (size_t)C + ch) * inner, inner);
        double mu = count ? s / (double)count : 0;
        for (size_t n = 0; n < N; n++)
            ss += vec_sqdev(X + (n * (size_t)C + ch) * inner, inner, (float)mu);
        double var = count ? ss / (double)count : 0, is = 1.0 / sqrt(var + eps);
        bb_tensor_f32(mean)[ch] = (float)mu;
        bb_tensor_f32(istd)[ch] = (float)is;
        float a = (float)(scale[ch] * is), b = (float)(B[ch] - mu * scale[ch] * is);
        for (size_t n = 0; n < N; n++) {
            const float *xp = X + (n * (size_t)C + ch) * inner;
            float *yp = Y + (n * (size_t)C + ch) * inner;
            for (size_t i = 0; i < inner; i++)
                yp[i] = xp[i] * a + b;
        }
        if (rm)
            rm[ch] = mom * rm[ch] + (1 - mom) * (float)mu;
        if (rv)
            rv[ch] = mom * rv[ch] + (1 - mom) * (float)(count > 1 ? ss / (double)(count - 1) : var);
    }
    for (uint32_t k = 1; k < 3 && k < c->n->n_out; k++) { /* running_mean, running_var */
        bb_value *src = in[k + 2];
        out[k] = bb_value_tensor_copy(BB_DT_FLOAT, 1, &C, src->u.tensor.data, src->u.tensor.nbytes);
        if (!out[k])
            return ad_fail(c, BB_ENOMEM, "out of memory");
    }
    return BB_OK;
}

int ad_bwd_batchnorm(ad_ctx *c)
{
    const bb_value *x = ad_in(c, 0), *sc = ad_in(c, 1), *gy = ad_dout(c, 0);
    const bb_value *mean = ad_saved(c, 0), *istd = ad_saved(c, 1);
    int rc = ad_need_f32(c, gy, "the output gradient");
    if (!rc && (!mean || !istd))
        rc = ad_fail(c, BB_ESTATE, "no batch statistics from the forward");
    if (rc)
        return rc;
    int64_t C = x->u.tensor.dims[1];
    size_t N = (size_t)x->u.tensor.dims[0];
    size_t inner = cpu_numel(x->u.tensor.ndim - 2, x->u.tensor.dims + 2), count = N * inner;
    bb_value *dx = NULL, *dscale = NULL, *db = NULL;
    if ((ad_wants(c, 0) && (rc = ad_new_uninit(c, x, &dx))) ||
        (ad_wants(c, 1) && (rc = ad_new(c, 1, &C, &dscale))) ||
        (ad_wants(c, 2) && (rc = ad_new(c, 1, &C, &db)))) {
        bb_value_unref(dx);
        bb_value_unref(dscale);
        return rc;
    }
    const float *X = bb_tensor_f32(x), *G = bb_tensor_f32(gy), *S = bb_tensor_f32(sc);
    for (size_t ch = 0; ch < (size_t)C; ch++) {
        double mu = bb_tensor_f32(mean)[ch], is = bb_tensor_f32(istd)[ch], sg = 0, sgx = 0;
        for (size_t n = 0; n < N; n++) {
            size_t off = (n * (size_t)C + ch) * inner;
            vec_gsums(G + off, X + off, inner, (float)mu, &sg, &sgx);
        }
        sgx *= is;
        if (dscale)
            bb_tensor_f32(dscale)[ch] = (float)sgx;
        if (db)
            bb_tensor_f32(db)[ch] = (float)sg;
        if (!dx || !count)
            continue;
        float k = (float)(S[ch] * is / (double)count), fm = (float)mu, fi = (float)is;
        float msg = (float)sg, msgx = (float)sgx, fc = (float)count;
        for (size_t n = 0; n < N; n++) {
            size_t off = (n * (size_t)C + ch) * inner;
            float *d = bb_tensor_f32(dx) + off;
            for (size_t i = 0; i < inner; i++) {
                float xh = (X[off + i] - fm) * fi;
                d[i] = k * (fc * G[off + i] - msg - xh * msgx);
            }
        }
    }
    bb_value *give[3] = {dx, dscale, db};
    for (uint32_t i = 0; i < 3; i++) {
        if (give[i] && !rc)
            rc = ad_give(c, i, give[i]);
        else
            bb_value_unref(give[i]);
    }
    return rc;
}

/* ---- LayerNormalization --------------------------------------------------------------------- */

int ad_fwd_layernorm_train(ad_ctx *c, bb_value *const *in, bb_value **out)
{
    bb_value *y[3] = {0};
    int rc = ad_kernel(c, CPU_OP_LayerNormalization, c->n->node, in, c->n->n_in, y, 3);
    if (rc)
        return rc;
    for (uint32_t k = 0; k < 3; k++)
        out[k] = k < c->n->n_out ? bb_value_ref(y[k]) : NULL;
    ad_save(c, 0, y[1]);
    ad_save(c, 1, y[2]);
    bb_value_unref(y[0]);
    return BB_OK;
}

/* Scale (or B) broadcast to the normalized shape, into buf[norm]. */
static int norm_operand(ad_ctx *c, const bb_value *v, uint32_t nn, const int64_t *ndims,
                        float *buf, const char *what)
{
    cpu_run r = ad_cpu_run(c, CPU_OP_LayerNormalization);
    int rc = cpu_bcast_to(&r, v, nn, ndims, buf, what);
    return rc ? ad_cpu_error(c, rc) : BB_OK;
}

/* dScale / dB summed over the rows, then to the operand's own shape. */
static int give_norm_operand(ad_ctx *c, uint32_t i, float *full, uint32_t nn,
                             const int64_t *ndims)
{
    const bb_value *v = ad_in(c, i);
    bb_value *t = bb_value_tensor_copy(BB_DT_FLOAT, nn, ndims, full,
                                       cpu_numel(nn, ndims) * sizeof(float)), *r;
    if (!t)
        return ad_fail(c, BB_ENOMEM, "out of memory");
    int rc = ad_unbroadcast(c, t, v->u.tensor.ndim, v->u.tensor.dims, &r);
    bb_value_unref(t);
    return rc ? rc : ad_give(c, i, r);
}

int ad_bwd_layernorm(ad_ctx *c)
{
    const bb_value *x = ad_in(c, 0), *gy = ad_dout(c, 0);
    const bb_value *mean = ad_saved(c, 0), *istd = ad_saved(c, 1);
    int rc = ad_need_f32(c, x, "X");
    if (!rc)
        rc = ad_need_f32(c, gy, "the output gradient");
    if (!rc && (!mean || !istd))
        rc = ad_fail(c, BB_ESTATE, "no row statistics from the forward");
    uint32_t axis;
    cpu_run r = ad_cpu_run(c, CPU_OP_LayerNormalization);
    if (!rc && (rc = cpu_axis(&r, bb_node_attr_int(c->n->node, "axis", -1), x->u.tensor.ndim,
                              "axis", &axis)))
        rc = ad_cpu_error(c, rc);
    if (rc)
        return rc;
    uint32_t nn = x->u.tensor.ndim - axis;
    const int64_t *ndims = x->u.tensor.dims + axis;
    size_t norm = cpu_numel(nn, ndims), outer = cpu_numel(axis, x->u.tensor.dims);
    bb_value *work, *dx = NULL;
    int64_t wd = (int64_t)(3 * norm + 1);
    if ((rc = ad_new(c, 1, &wd, &work)))
        return rc;
    float *sfull = bb_tensor_f32(work), *dsc = sfull + norm, *dbias = dsc + norm;
    if ((rc = norm_operand(c, ad_in(c, 1), nn, ndims, sfull, "Scale")) ||
        (ad_wants(c, 0) && (rc = ad_new_uninit(c, x, &dx)))) {
        bb_value_unref(work);
        return rc;
    }
    const float *X = bb_tensor_f32(x), *G = bb_tensor_f32(gy);
    const float *M = bb_tensor_f32(mean), *I = bb_tensor_f32(istd);
    for (size_t o = 0; o < outer; o++) {
        const float *xr = X + o * norm, *gr = G + o * norm;
        double sd = 0, sdx = 0;
        for (size_t i = 0; i < norm; i++) {
            float xh = (xr[i] - M[o]) * I[o], dxh = gr[i] * sfull[i];
            dsc[i] += gr[i] * xh;
            dbias[i] += gr[i];
            sd += dxh;
            sdx += dxh * xh;
        }
        if (!dx)
            continue;
        float md = (float)(sd / (double)norm), mdx = (float)(sdx / (double)norm);
        float *d = bb_tensor_f32(dx) + o * norm;
        for (size_t i = 0; i < norm; i++) {
            float xh = (xr[i] - M[o]) * I[o];
            d[i] = I[o] * (gr[i] * sfull[i] - md - xh * mdx);
        }
    }
    if (dx)
        rc = ad_give(c, 0, dx);
    if (!rc && ad_wants(c, 1))
        rc = give_norm_operand(c, 1, dsc, nn, ndims);
    if (!rc && c->n->n_in > 2 && ad_in(c, 2) && ad_wants(c, 2))
        rc = give_norm_operand(c, 2, dbias, nn, ndims);
    bb_value_unref(work);
    return rc;
}

/* ---- Softmax ------------------------------------------------------------------------------ */

int ad_bwd_softmax(ad_ctx *c)
{
    const bb_value *y = ad_out(c, 0), *gy = ad_dout(c, 0);
    int rc = ad_need_f32(c, y, "the output");
    if (!rc)
        rc = ad_need_f32(c, gy, "the output gradient");
    const bb_tensor_view *t = &y->u.tensor;
    uint32_t axis = 0;
    cpu_run r = ad_cpu_run(c, CPU_OP_Softmax);
    if (!rc && t->ndim && (rc = cpu_axis(&r, bb_node_attr_int(c->n->node, "axis", -1), t->ndim,
                                         "axis", &axis)))
        rc = ad_cpu_error(c, rc);
    bb_value *dx;
    if (rc || (rc = ad_new_uninit(c, y, &dx)))
        return rc;
    size_t outer = cpu_numel(axis, t->dims), len = t->ndim ? (size_t)t->dims[axis] : 1;
    size_t inner = t->ndim ? cpu_numel(t->ndim - axis - 1, t->dims + axis + 1) : 1;
    const float *Y = bb_tensor_f32(y), *G = bb_tensor_f32(gy);
    float *D = bb_tensor_f32(dx);
    for (size_t o = 0; o < outer; o++)
        for (size_t in = 0; in < inner; in++) {
            size_t base = o * len * inner + in;
            double dot = 0;
            if (inner == 1)
                dot = vec_dot(G + base, Y + base, len);
            else
                for (size_t i = 0; i < len; i++)
                    dot += (double)G[base + i * inner] * Y[base + i * inner];
            for (size_t i = 0; i < len; i++)
                D[base + i * inner] = Y[base + i * inner] * (G[base + i * inner] - (float)dot);
        }
    return ad_give(c, 0, dx);
}
