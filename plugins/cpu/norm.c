/*
 * norm.c — BatchNormalization (inference mode: running statistics) and
 * LayerNormalization (axis, epsilon; optional Mean and InvStdDev outputs,
 * which are float as ONNX's stash_type=1 defines).
 *
 * BatchNormalization folds each channel into y = x * a + b with
 * a = scale / sqrt(var + eps), b = B - mean * a. LayerNormalization works on
 * [outer, norm] rows with double accumulators; Scale and B broadcast
 * unidirectionally to the normalized shape.
 */
#include <math.h>
#include <string.h>

#include "cpu_internal.h"

int cpu_k_BatchNormalization(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out,
                             uint32_t n_out)
{
    (void)n_in;
    (void)n_out;
    const bb_tensor_view *x = cpu_tv(in[0]);
    if (!cpu_dtype_is_float(x->dtype))
        return cpu_fail_dtype(r, x->dtype);
    if (cpu_attr_i(r->node, "training_mode", 0) != 0)
        return cpu_fail(r, BB_EUNSUPPORTED, "training_mode=1 not supported (inference only)");
    if (x->ndim < 2)
        return cpu_fail(r, BB_EINVAL, "X must have rank >= 2 (N, C, ...), got rank %u",
                        x->ndim);
    static const char *const names[5] = {"X", "scale", "B", "input_mean", "input_var"};
    int64_t C = x->dims[1];
    for (int i = 1; i < 5; i++) {
        const bb_tensor_view *p = cpu_tv(in[i]);
        if (p->dtype != x->dtype)
            return cpu_fail(r, BB_ETYPE, "%s dtype %s differs from X's %s", names[i],
                            cpu_dtype_name(p->dtype), cpu_dtype_name(x->dtype));
        if (p->ndim != 1 || p->dims[0] != C)
            return cpu_fail(r, BB_EINVAL, "%s must have shape [%lld]", names[i], (long long)C);
    }
    double eps = cpu_attr_f(r->node, "epsilon", 1e-5f);
    int rc = cpu_alloc_uninit(r, x->dtype, x->ndim, x->dims, out);
    if (rc)
        return rc;
    size_t N = (size_t)x->dims[0], inner = cpu_numel(x->ndim - 2, x->dims + 2);
    for (size_t c = 0; c < (size_t)C; c++) {
        double s = cpu_elem_f64(cpu_tv(in[1]), c), b = cpu_elem_f64(cpu_tv(in[2]), c);
        double m = cpu_elem_f64(cpu_tv(in[3]), c), v = cpu_elem_f64(cpu_tv(in[4]), c);
        double a = s / sqrt(v + eps), bb = b - m * a;
        for (size_t n = 0; n < N; n++) {
            size_t off = (n * (size_t)C + c) * inner;
            if (x->dtype == BB_DT_FLOAT) {
                const float *restrict xi = (const float *)(const void *)x->data + off;
                float *restrict yo = (float *)(void *)cpu_tv(*out)->data + off;
                float fa = (float)a, fb = (float)bb;
                for (size_t i = 0; i < inner; i++)
                    yo[i] = xi[i] * fa + fb;
            } else {
                const double *restrict xi = (const double *)(const void *)x->data + off;
                double *restrict yo = (double *)(void *)cpu_tv(*out)->data + off;
                for (size_t i = 0; i < inner; i++)
                    yo[i] = xi[i] * a + bb;
            }
        }
    }
    return BB_OK;
}

int cpu_k_LayerNormalization(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out,
                             uint32_t n_out)
{
    const bb_tensor_view *x = cpu_tv(in[0]);
    if (!cpu_dtype_is_float(x->dtype))
        return cpu_fail_dtype(r, x->dtype);
    if (x->ndim == 0)
        return cpu_fail(r, BB_EINVAL, "X must have rank >= 1");
    uint32_t axis;
    int rc = cpu_axis(r, cpu_attr_i(r->node, "axis", -1), x->ndim, "axis", &axis);
    if (rc)
        return rc;
    const bb_value *scale = in[1], *bias = n_in > 2 ? in[2] : NULL;
    if (cpu_tv(scale)->dtype != x->dtype || (bias && cpu_tv(bias)->dtype != x->dtype))
        return cpu_fail(r, BB_ETYPE, "Scale and B must have X's dtype %s",
                        cpu_dtype_name(x->dtype));
    double eps = cpu_attr_f(r->node, "epsilon", 1e-5f);
    uint32_t nn = x->ndim - axis;
    const int64_t *ndims = x->dims + axis;
    size_t norm = cpu_numel(nn, ndims), outer = cpu_numel(axis, x->dims);
    size_t es = bb_tensor_elem_size(x->dtype);
    uint8_t *sb = cpu_scratch(r, 2 * norm * es + 1);
    if (!sb)
        return BB_ENOMEM;
    if ((rc = cpu_bcast_to(r, scale, nn, ndims, sb, "Scale")))
        return rc;
    if (bias) {
        if ((rc = cpu_bcast_to(r, bias, nn, ndims, sb + norm * es, "B")))
            return rc;
    } else {
        memset(sb + norm * es, 0, norm * es);
    }
    if ((rc = cpu_alloc_uninit(r, x->dtype, x->ndim, x->dims, &out[0])))
        return rc;
    /* Mean / InvStdDev: X's leading dims, then 1s. */
    int64_t sd[BB_MAX_DIMS];
    for (uint32_t d = 0; d < x->ndim; d++)
        sd[d] = d < axis ? x->dims[d] : 1;
    float *mean_o = NULL, *inv_o = NULL;
    if (n_out > 1) {
        if ((rc = cpu_alloc_uninit(r, BB_DT_FLOAT, x->ndim, sd, &out[1])))
            return rc;
        mean_o = (float *)(void *)cpu_tv(out[1])->data;
    }
    if (n_out > 2) {
        if ((rc = cpu_alloc_uninit(r, BB_DT_FLOAT, x->ndim, sd, &out[2])))
            return rc;
        inv_o = (float *)(void *)cpu_tv(out[2])->data;
    }
    for (size_t o = 0; o < outer; o++) {
        double mean = 0, var = 0;
        if (x->dtype == BB_DT_FLOAT) {
            const float *xi = (const float *)(const void *)x->data + o * norm;
            for (size_t i = 0; i < norm; i++)
                mean += xi[i];
            mean = norm ? mean / (double)norm : 0;
            for (size_t i = 0; i < norm; i++)
                var += (xi[i] - mean) * (xi[i] - mean);
        } else {
            const double *xi = (const double *)(const void *)x->data + o * norm;
            for (size_t i = 0; i < norm; i++)
                mean += xi[i];
            mean = norm ? mean / (double)norm : 0;
            for (size_t i = 0; i < norm; i++)
                var += (xi[i] - mean) * (xi[i] - mean);
        }
        var = norm ? var / (double)norm : 0;
        double inv = 1.0 / sqrt(var + eps);
        if (mean_o)
            mean_o[o] = (float)mean;
        if (inv_o)
            inv_o[o] = (float)inv;
        if (x->dtype == BB_DT_FLOAT) {
            const float *restrict xi = (const float *)(const void *)x->data + o * norm;
            const float *restrict s = (const float *)(void *)sb, *restrict b = s + norm;
            float *restrict y = (float *)(void *)cpu_tv(out[0])->data + o * norm;
            float fm = (float)mean, fi = (float)inv;
            for (size_t i = 0; i < norm; i++)
                y[i] = (xi[i] - fm) * fi * s[i] + b[i];
        } else {
            const double *restrict xi = (const double *)(const void *)x->data + o * norm;
            const double *restrict s = (const double *)(void *)sb, *restrict b = s + norm;
            double *restrict y = (double *)(void *)cpu_tv(out[0])->data + o * norm;
            for (size_t i = 0; i < norm; i++)
                y[i] = (xi[i] - mean) * inv * s[i] + b[i];
        }
    }
    return BB_OK;
}
