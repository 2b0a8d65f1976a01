/*
 * grad_conv.c — gradients of Conv (pads, strides, dilations, groups, any
 * number of spatial dims) and of the pools, over the CPU backend's window
 * geometry (cpu_geom_init, so the backward reads the attributes exactly
 * as the forward kernel did).
 *
 * Conv, per image n and group: with col = im2col(X_n) [C/g * k, O],
 *   dW_g += dY_{n,g} col^T        (one GEMM, accumulating over images)
 *   dcol  = W_g^T dY_{n,g},  dX_n += col2im(dcol)
 *   dB    = dY summed over images and positions.
 * A 1x1 kernel with unit stride and no padding needs no col: X_n is it.
 * MaxPool: a training forward keeps the argmax of every window (the CPU
 * kernel's Indices output) and backward sends each gradient there.
 * AveragePool: each window's gradient is spread over the positions the
 * forward averaged (count_include_pad decides the divisor).
 */
#include <string.h>

#include "grad.h"
#include "vec.h"

static int conv_geom(ad_ctx *c, const bb_value *x, const bb_value *w, cpu_geom *g)
{
    cpu_run r = ad_cpu_run(c, CPU_OP_Conv);
    int rc = cpu_geom_init(&r, &x->u.tensor, w->u.tensor.dims + 2, false, g);
    return rc ? ad_cpu_error(c, rc) : BB_OK;
}

/* dB [M] = dY summed over images and output positions. */
static int conv_bias_grad(ad_ctx *c, const bb_value *gy)
{
    const bb_tensor_view *t = &gy->u.tensor;
    int64_t M = t->dims[1];
    size_t N = (size_t)t->dims[0], O = cpu_numel(t->ndim - 2, t->dims + 2);
    bb_value *db;
    int rc = ad_new(c, 1, &M, &db);
    if (rc)
        return rc;
    float *d = bb_tensor_f32(db);
    const float *g = bb_tensor_f32(gy);
    for (size_t n = 0; n < N; n++)
        for (size_t m = 0; m < (size_t)M; m++)
            d[m] += (float)vec_sum(g + (n * (size_t)M + m) * O, O);
    return ad_give(c, 2, db);
}

int ad_bwd_conv(ad_ctx *c)
{
    const bb_value *x = ad_in(c, 0), *w = ad_in(c, 1), *gy = ad_dout(c, 0);
    int rc = ad_need_f32(c, x, "X");
    if (!rc)
        rc = ad_need_f32(c, w, "W");
    if (!rc)
        rc = ad_need_f32(c, gy, "the output gradient");
    cpu_geom g;
    if (rc || (rc = conv_geom(c, x, w, &g)))
        return rc;
    if (c->n->n_in > 2 && ad_in(c, 2) && ad_wants(c, 2) && (rc = conv_bias_grad(c, gy)))
        return rc;
    bool want_x = ad_wants(c, 0), want_w = ad_wants(c, 1);
    if (!want_x && !want_w)
        return BB_OK;
    size_t group = (size_t)bb_node_attr_int(c->n->node, "group", 1);
    size_t N = (size_t)x->u.tensor.dims[0], C = (size_t)x->u.tensor.dims[1];
    size_t M = (size_t)w->u.tensor.dims[0], Cg = C / group, Mg = M / group;
    size_t K = cpu_numel(g.ns, g.k), O = cpu_numel(g.ns, g.out), plane = cpu_numel(g.ns, g.in);
    size_t CK = Cg * K;
    bool direct = true;
    for (uint32_t i = 0; i < g.ns; i++)
        direct = direct && g.k[i] == 1 && g.s[i] == 1 && g.pb[i] == 0 && g.pe[i] == 0;
    bb_value *dx = NULL, *dw = NULL;
    if (want_x && (rc = ad_new_like(c, x, &dx)))
        return rc;
    if (want_w && (rc = ad_new_like(c, w, &dw))) {
        bb_value_unref(dx);
        return rc;
    }
    cpu_run r = ad_cpu_run(c, CPU_OP_Conv);
    float *col = direct || !CK || !O ? NULL : cpu_scratch(&r, 2 * CK * O * sizeof(float));
    if (!direct && CK && O && !col) {
        bb_value_unref(dx);
        bb_value_unref(dw);
        return ad_fail(c, BB_ENOMEM, "out of memory for %zu x %zu columns", CK, O);
    }
    float *dcol = col ? col + CK * O : NULL;
    const float *X = bb_tensor_f32(x), *W = bb_tensor_f32(w), *G = bb_tensor_f32(gy);
    for (size_t n = 0; n < N && CK && O; n++) {
        for (size_t gi = 0; gi < group; gi++) {
            const float *xg = X + (n * C + gi * Cg) * plane;
            const float *gg = G + (n * M + gi * Mg) * O;
            const float *wg = W + gi * Mg * CK;
            if (want_w) {
                const float *src = xg;
                if (!direct) {
                    cpu_im2col_f32(&g, xg, Cg, col);
                    src = col;
                }
                cpu_gemm(BB_DT_FLOAT, false, true, Mg, O, CK, 1.0f, gg, src, 1.0f,
                         bb_tensor_f32(dw) + gi * Mg * CK);
            }
            if (want_x) {
                float *dxg = bb_tensor_f32(dx) + (n * C + gi * Cg) * plane;
                if (direct) {
                    cpu_gemm(BB_DT_FLOAT, true, false, CK, Mg, O, 1.0f, wg, gg, 1.0f, dxg);
                } else {
                    cpu_gemm(BB_DT_FLOAT, true, false, CK, Mg, O, 1.0f, wg, gg, 0.0f, dcol);
                    cpu_col2im_add_f32(&g, dcol, Cg, dxg);
                }
            }
        }
    }
    if (dx && (rc = ad_give(c, 0, dx))) {
        bb_value_unref(dw);
        return rc;
    }
    return dw ? ad_give(c, 1, dw) : BB_OK;
}

/* ---- pools -------------------------------------------------------------------------- */

int ad_fwd_maxpool_train(ad_ctx *c, bb_value *const *in, bb_value **out)
{
    if (bb_node_attr_int(c->n->node, "storage_order", 0) != 0)
        return ad_fail(c, BB_EUNSUPPORTED, "storage_order=1 is not supported for training");
    bb_value *y[2] = {0};
    int rc = ad_kernel(c, CPU_OP_MaxPool, c->n->node, in, 1, y, 2);
    if (rc)
        return rc;
    out[0] = y[0];
    if (c->n->n_out > 1)
        out[1] = bb_value_ref(y[1]);
    ad_save(c, 0, y[1]);
    return BB_OK;
}

int ad_bwd_maxpool(ad_ctx *c)
{
    const bb_value *x = ad_in(c, 0), *gy = ad_dout(c, 0), *ind = ad_saved(c, 0);
    int rc = ad_need_f32(c, x, "X");
    if (!rc)
        rc = ad_need_f32(c, gy, "the output gradient");
    if (!rc && !ind)
        rc = ad_fail(c, BB_ESTATE, "no window indices from the forward");
    bb_value *dx;
    if (rc || (rc = ad_new_like(c, x, &dx)))
        return rc;
    const int64_t *ix = (const int64_t *)(const void *)ind->u.tensor.data;
    const float *g = bb_tensor_f32(gy);
    float *d = bb_tensor_f32(dx);
    size_t n = bb_tensor_numel(gy), nx = bb_tensor_numel(x);
    for (size_t i = 0; i < n; i++)
        if (ix[i] >= 0 && (size_t)ix[i] < nx)
            d[ix[i]] += g[i];
    return ad_give(c, 0, dx);
}

int ad_bwd_avgpool(ad_ctx *c)
{
    const bb_value *x = ad_in(c, 0), *gy = ad_dout(c, 0);
    int rc = ad_need_f32(c, x, "X");
    if (!rc)
        rc = ad_need_f32(c, gy, "the output gradient");
    const bb_attr *at = bb_node_attr(c->n->node, "kernel_shape");
    if (!rc && (!at || at->type != BB_ATTR_INTS || at->ints.n + 2 != x->u.tensor.ndim))
        rc = ad_fail(c, BB_EINVAL, "kernel_shape must have one entry per spatial dim");
    if (rc)
        return rc;
    const int64_t *ks = at->ints.v;
    cpu_geom g;
    cpu_run r = ad_cpu_run(c, CPU_OP_AveragePool);
    if ((rc = cpu_geom_init(&r, &x->u.tensor, ks, true, &g)))
        return ad_cpu_error(c, rc);
    size_t K = cpu_numel(g.ns, g.k), O = cpu_numel(g.ns, g.out), plane = cpu_numel(g.ns, g.in);
    size_t planes = cpu_numel(2, x->u.tensor.dims);
    bool include_pad = bb_node_attr_int(c->n->node, "count_include_pad", 0) != 0;
    size_t *offs = cpu_scratch(&r, K * sizeof *offs + 1);
    bb_value *dx;
    if (!offs)
        return ad_fail(c, BB_ENOMEM, "out of memory");
    if ((rc = ad_new_like(c, x, &dx)))
        return rc;
    const float *gp = bb_tensor_f32(gy);
    float *d = bb_tensor_f32(dx);
    int64_t oc[CPU_MAX_SPATIAL] = {0};
    for (size_t o = 0; o < O; o++) {
        size_t padded, n = cpu_pool_window(&g, oc, offs, &padded);
        size_t div = include_pad ? padded : n;
        for (size_t p = 0; div && p < planes; p++) {
            float v = gp[p * O + o] / (float)div;
            float *dp = d + p * plane;
            for (size_t i = 0; i < n; i++)
                dp[offs[i]] += v;
        }
        for (int32_t k = (int32_t)g.ns - 1; k >= 0; k--) {
            if (++oc[k] < g.out[k])
                break;
            oc[k] = 0;
        }
    }
    return ad_give(c, 0, dx);
}

int ad_bwd_global_avgpool(ad_ctx *c)
{
    const bb_value *x = ad_in(c, 0), *gy = ad_dout(c, 0);
    int rc = ad_need_f32(c, x, "X");
    if (!rc)
        rc = ad_need_f32(c, gy, "the output gradient");
    bb_value *dx;
    if (rc || (rc = ad_new_uninit(c, x, &dx)))
        return rc;
    size_t planes = cpu_numel(2, x->u.tensor.dims);
    size_t n = cpu_numel(x->u.tensor.ndim - 2, x->u.tensor.dims + 2);
    const float *g = bb_tensor_f32(gy);
    float *d = bb_tensor_f32(dx);
    for (size_t p = 0; p < planes; p++) {
        float v = g[p] / (float)(n ? n : 1);
        for (size_t i = 0; i < n; i++)
            d[p * n + i] = v;
    }
    return ad_give(c, 0, dx);
}
