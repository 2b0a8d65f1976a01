/*
 * activation.c — Relu, Sigmoid, Tanh, LeakyRelu (alpha) and Gelu
 * (approximate "none" | "tanh"). Flat loops over the element buffer: the
 * output has the input's shape and dtype.
 */
#include <math.h>

#include "cpu_internal.h"

/* Allocate the output like x and hand back both data pointers. */
static int like(cpu_run *r, const bb_value *x, bb_value **out, size_t *n)
{
    const bb_tensor_view *t = cpu_tv(x);
    *n = cpu_numel(t->ndim, t->dims);
    return cpu_alloc_uninit(r, t->dtype, t->ndim, t->dims, out);
}

#define RELU_LOOP(T)                                                        \
    do {                                                                    \
        const T *restrict a = (const T *)(const void *)t->data;             \
        T *restrict o = (T *)(void *)cpu_tv(*out)->data;                    \
        for (size_t i = 0; i < n; i++)                                      \
            o[i] = a[i] > 0 ? a[i] : (T)0;                                  \
    } while (0)

void cpu_relu_f32(const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] > 0 ? x[i] : 0.0f;
}

int cpu_k_Relu(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out, uint32_t n_out)
{
    (void)n_in;
    (void)n_out;
    const bb_tensor_view *t = cpu_tv(in[0]);
    int32_t dt = t->dtype;
    if (dt != BB_DT_FLOAT && dt != BB_DT_DOUBLE && dt != BB_DT_INT8 && dt != BB_DT_INT16 &&
        dt != BB_DT_INT32 && dt != BB_DT_INT64)
        return cpu_fail_dtype(r, dt);
    size_t n;
    int rc = like(r, in[0], out, &n);
    if (rc)
        return rc;
    switch (dt) {
    case BB_DT_FLOAT:
        cpu_relu_f32((const float *)(const void *)t->data, bb_tensor_f32(*out), n);
        break;
    case BB_DT_DOUBLE: RELU_LOOP(double); break;
    case BB_DT_INT8: RELU_LOOP(int8_t); break;
    case BB_DT_INT16: RELU_LOOP(int16_t); break;
    case BB_DT_INT32: RELU_LOOP(int32_t); break;
    default: RELU_LOOP(int64_t); break;
    }
    return BB_OK;
}

/* Float-only activations: one body per precision. */
#define FLOAT_ACT(Name, F32_EXPR, F64_EXPR, SETUP)                                        \
    int cpu_k_##Name(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out,      \
                     uint32_t n_out)                                                      \
    {                                                                                     \
        (void)n_in;                                                                       \
        (void)n_out;                                                                      \
        const bb_tensor_view *t = cpu_tv(in[0]);                                          \
        if (!cpu_dtype_is_float(t->dtype))                                                \
            return cpu_fail_dtype(r, t->dtype);                                           \
        SETUP                                                                             \
        size_t n;                                                                         \
        int rc = like(r, in[0], out, &n);                                                 \
        if (rc)                                                                           \
            return rc;                                                                    \
        if (t->dtype == BB_DT_FLOAT) {                                                    \
            const float *restrict a = (const float *)(const void *)t->data;               \
            float *restrict o = (float *)(void *)cpu_tv(*out)->data;                      \
            for (size_t i = 0; i < n; i++) {                                              \
                float x = a[i];                                                           \
                o[i] = F32_EXPR;                                                          \
            }                                                                             \
        } else {                                                                          \
            const double *restrict a = (const double *)(const void *)t->data;             \
            double *restrict o = (double *)(void *)cpu_tv(*out)->data;                    \
            for (size_t i = 0; i < n; i++) {                                              \
                double x = a[i];                                                          \
                o[i] = F64_EXPR;                                                          \
            }                                                                             \
        }                                                                                 \
        return BB_OK;                                                                     \
    }

static inline float sigmoidf(float x)
{
    if (x >= 0)
        return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

static inline double sigmoid(double x)
{
    if (x >= 0)
        return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}

#define SQRT1_2 0.70710678118654752440
#define SQRT_2_PI 0.79788456080286535588

FLOAT_ACT(Sigmoid, sigmoidf(x), sigmoid(x), )
FLOAT_ACT(Tanh, tanhf(x), tanh(x), )
FLOAT_ACT(LeakyRelu, x >= 0 ? x : x * alpha, x >= 0 ? x : x * (double)alpha,
          float alpha = cpu_attr_f(r->node, "alpha", 0.01f);)

int cpu_k_Gelu(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out, uint32_t n_out)
{
    (void)n_in;
    (void)n_out;
    const bb_tensor_view *t = cpu_tv(in[0]);
    if (!cpu_dtype_is_float(t->dtype))
        return cpu_fail_dtype(r, t->dtype);
    size_t slen;
    const uint8_t *s = cpu_attr_s(r->node, "approximate", &slen);
    bool tanh_approx = cpu_attr_s_is(r->node, "approximate", "tanh");
    if (s && !tanh_approx && !cpu_attr_s_is(r->node, "approximate", "none"))
        return cpu_fail(r, BB_EINVAL, "approximate must be \"none\" or \"tanh\", got \"%.*s\"",
                        (int)(slen > 32 ? 32 : slen), (const char *)s);
    size_t n;
    int rc = like(r, in[0], out, &n);
    if (rc)
        return rc;
    if (t->dtype == BB_DT_FLOAT) {
        const float *restrict a = (const float *)(const void *)t->data;
        float *restrict o = (float *)(void *)cpu_tv(*out)->data;
        if (tanh_approx)
            for (size_t i = 0; i < n; i++) {
                float x = a[i];
                o[i] = 0.5f * x *
                       (1.0f + tanhf((float)SQRT_2_PI * (x + 0.044715f * x * x * x)));
            }
        else
            for (size_t i = 0; i < n; i++)
                o[i] = 0.5f * a[i] * (1.0f + erff(a[i] * (float)SQRT1_2));
    } else {
        const double *restrict a = (const double *)(const void *)t->data;
        double *restrict o = (double *)(void *)cpu_tv(*out)->data;
        if (tanh_approx)
            for (size_t i = 0; i < n; i++) {
                double x = a[i];
                o[i] = 0.5 * x * (1.0 + tanh(SQRT_2_PI * (x + 0.044715 * x * x * x)));
            }
        else
            for (size_t i = 0; i < n; i++)
                o[i] = 0.5 * a[i] * (1.0 + erf(a[i] * SQRT1_2));
    }
    return BB_OK;
}
