/*
 * creation.c — Zeros and Ones (input `shape`: an int64 tensor; attribute
 * `dtype`, default float) and Constant (exactly one of value, value_float,
 * value_floats, value_int, value_ints; strings and sparse tensors are not
 * numeric and are refused).
 */
#include <string.h>

#include "cpu_internal.h"

static int filled(cpu_run *r, bb_value *const *in, bb_value **out, double v)
{
    int64_t shape[BB_MAX_DIMS];
    size_t n;
    int rc = cpu_read_ints(r, in[0], "shape", shape, BB_MAX_DIMS, &n);
    if (rc)
        return rc;
    for (size_t i = 0; i < n; i++)
        if (shape[i] < 0)
            return cpu_fail(r, BB_EINVAL, "negative dimension %lld in shape",
                            (long long)shape[i]);
    int64_t dt = cpu_attr_i(r->node, "dtype", BB_DT_FLOAT);
    if (dt < 0 || dt > BB_DT_MAX || !cpu_cast_supported((int32_t)dt))
        return cpu_fail(r, BB_EUNSUPPORTED, "dtype %s not supported",
                        cpu_dtype_name(dt < 0 || dt > BB_DT_MAX ? 0 : (int32_t)dt));
    if ((rc = cpu_alloc(r, (int32_t)dt, (uint32_t)n, shape, out)))
        return rc;
    if (v == 0) /* cpu_alloc zeroes */
        return BB_OK;
    uint8_t one[8];
    size_t es = bb_tensor_elem_size((int32_t)dt), cnt = cpu_numel((uint32_t)n, shape);
    cpu_cast_buf(one, (int32_t)dt, &v, BB_DT_DOUBLE, 1);
    uint8_t *p = cpu_tv(*out)->data;
    if (dt == BB_DT_FLOAT) {
        float *f = (float *)(void *)p;
        for (size_t i = 0; i < cnt; i++)
            f[i] = (float)v;
        return BB_OK;
    }
    for (size_t i = 0; i < cnt; i++)
        memcpy(p + i * es, one, es);
    return BB_OK;
}

int cpu_k_Zeros(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out,
                uint32_t n_out)
{
    (void)n_in;
    (void)n_out;
    return filled(r, in, out, 0.0);
}

int cpu_k_Ones(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out, uint32_t n_out)
{
    (void)n_in;
    (void)n_out;
    return filled(r, in, out, 1.0);
}

int cpu_k_Constant(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out,
                   uint32_t n_out)
{
    (void)in;
    (void)n_in;
    (void)n_out;
    const bb_attr *a = NULL;
    int found = 0;
    static const char *const keys[] = {"value", "value_float", "value_floats", "value_int",
                                       "value_ints", "value_string", "value_strings",
                                       "sparse_value"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const bb_attr *x = cpu_attr(r->node, keys[i]);
        if (x) {
            a = x;
            found++;
        }
    }
    if (found != 1)
        return cpu_fail(r, BB_EINVAL, "exactly one value attribute is required, found %d",
                        found);
    if (strcmp(a->name, "value") == 0) {
        if (a->type != BB_ATTR_TENSOR || !a->t)
            return cpu_fail(r, BB_EINVAL, "attribute value is not a tensor");
        return cpu_tensor_from_proto(r, a->t, out);
    }
    if (strcmp(a->name, "value_float") == 0 && a->type == BB_ATTR_FLOAT) {
        int rc = cpu_alloc(r, BB_DT_FLOAT, 0, NULL, out);
        if (!rc)
            *(float *)(void *)cpu_tv(*out)->data = a->f;
        return rc;
    }
    if (strcmp(a->name, "value_int") == 0 && a->type == BB_ATTR_INT) {
        int rc = cpu_alloc(r, BB_DT_INT64, 0, NULL, out);
        if (!rc)
            *(int64_t *)(void *)cpu_tv(*out)->data = a->i;
        return rc;
    }
    if (strcmp(a->name, "value_floats") == 0 && a->type == BB_ATTR_FLOATS) {
        int64_t n = (int64_t)a->floats.n;
        int rc = cpu_alloc(r, BB_DT_FLOAT, 1, &n, out);
        if (!rc && n)
            memcpy(cpu_tv(*out)->data, a->floats.v, (size_t)n * sizeof(float));
        return rc;
    }
    if (strcmp(a->name, "value_ints") == 0 && a->type == BB_ATTR_INTS) {
        int64_t n = (int64_t)a->ints.n;
        int rc = cpu_alloc(r, BB_DT_INT64, 1, &n, out);
        if (!rc && n)
            memcpy(cpu_tv(*out)->data, a->ints.v, (size_t)n * sizeof(int64_t));
        return rc;
    }
    return cpu_fail(r, BB_EUNSUPPORTED, "attribute %s (type %d) not supported", a->name,
                    (int)a->type);
}
