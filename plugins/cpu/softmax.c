/*
 * softmax.c — Softmax (opset 13: one axis, default -1), numerically stable:
 * each slice subtracts its max before exponentiating. The tensor is seen
 * as [outer, axis, inner]; inner == 1 (the usual last-axis case) walks
 * contiguous rows.
 */
#include <math.h>

#include "cpu_internal.h"

#define SOFTMAX_BODY(T, EXP)                                                       \
    do {                                                                           \
        const T *restrict x = (const T *)(const void *)t->data;                    \
        T *restrict y = (T *)(void *)cpu_tv(*out)->data;                           \
        for (size_t o = 0; o < outer; o++) {                                       \
            for (size_t in = 0; in < inner; in++) {                                \
                const T *xs = x + o * len * inner + in;                            \
                T *ys = y + o * len * inner + in;                                  \
                T m = xs[0];                                                       \
                for (size_t i = 1; i < len; i++)                                   \
                    if (xs[i * inner] > m || xs[i * inner] != xs[i * inner])       \
                        m = xs[i * inner];                                         \
                T sum = 0;                                                         \
                for (size_t i = 0; i < len; i++) {                                 \
                    T e = EXP(xs[i * inner] - m);                                  \
                    ys[i * inner] = e;                                             \
                    sum += e;                                                      \
                }                                                                  \
                T inv = (T)1 / sum;                                                \
                for (size_t i = 0; i < len; i++)                                   \
                    ys[i * inner] *= inv;                                          \
            }                                                                      \
        }                                                                          \
    } while (0)

int cpu_k_Softmax(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out,
                  uint32_t n_out)
{
    (void)n_in;
    (void)n_out;
    const bb_tensor_view *t = cpu_tv(in[0]);
    if (!cpu_dtype_is_float(t->dtype))
        return cpu_fail_dtype(r, t->dtype);
    int rc;
    uint32_t axis = 0;
    if (t->ndim > 0 && (rc = cpu_axis(r, cpu_attr_i(r->node, "axis", -1), t->ndim, "axis", &axis)))
        return rc;
    if (t->ndim == 0) { /* a scalar is its own one-element slice */
        int64_t a = cpu_attr_i(r->node, "axis", -1);
        if (a != -1 && a != 0)
            return cpu_fail(r, BB_EINVAL, "axis %lld out of range for rank 0", (long long)a);
    }
    if ((rc = cpu_alloc_uninit(r, t->dtype, t->ndim, t->dims, out)))
        return rc;
    size_t outer = 1, len = t->ndim ? (size_t)t->dims[axis] : 1, inner = 1;
    for (uint32_t i = 0; i < axis; i++)
        outer *= (size_t)t->dims[i];
    for (uint32_t i = axis + 1; i < t->ndim; i++)
        inner *= (size_t)t->dims[i];
    if (len == 0 || outer == 0 || inner == 0)
        return BB_OK;
    if (t->dtype == BB_DT_FLOAT)
        SOFTMAX_BODY(float, expf);
    else
        SOFTMAX_BODY(double, exp);
    return BB_OK;
}
