/*
 * gather.c — Gather (axis; output data[:axis] + indices + data[axis+1:])
 * and Scatter, with ScatterElements semantics as ONNX's deprecated Scatter
 * defines them (output = data with updates written at the positions the
 * indices name along axis). Indices are int32 or int64, negative counts
 * from the end, and an index outside [-dim, dim) is an error naming it.
 */
#include <string.h>

#include "cpu_internal.h"

static int check_index(cpu_run *r, int64_t ix, int64_t dim, uint32_t axis, int64_t *out)
{
    if (ix < -dim || ix >= dim)
        return cpu_fail(r, BB_EINVAL, "index %lld out of range [-%lld, %lld) on axis %u",
                        (long long)ix, (long long)dim, (long long)dim, axis);
    *out = ix < 0 ? ix + dim : ix;
    return BB_OK;
}

int cpu_k_Gather(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out,
                 uint32_t n_out)
{
    (void)n_in;
    (void)n_out;
    const bb_tensor_view *d = cpu_tv(in[0]), *ix = cpu_tv(in[1]);
    size_t es = bb_tensor_elem_size(d->dtype);
    if (!es)
        return cpu_fail_dtype(r, d->dtype);
    if (ix->dtype != BB_DT_INT32 && ix->dtype != BB_DT_INT64)
        return cpu_fail(r, BB_ETYPE, "indices must be int32 or int64, got %s",
                        cpu_dtype_name(ix->dtype));
    if (d->ndim == 0)
        return cpu_fail(r, BB_EINVAL, "data must have rank >= 1");
    uint32_t axis;
    int rc = cpu_axis(r, cpu_attr_i(r->node, "axis", 0), d->ndim, "axis", &axis);
    if (rc)
        return rc;
    uint32_t on = d->ndim - 1 + ix->ndim;
    if (on > BB_MAX_DIMS)
        return cpu_fail(r, BB_ELIMIT, "result rank %u exceeds %d", on, BB_MAX_DIMS);
    int64_t od[BB_MAX_DIMS];
    uint32_t k = 0;
    for (uint32_t i = 0; i < axis; i++)
        od[k++] = d->dims[i];
    for (uint32_t i = 0; i < ix->ndim; i++)
        od[k++] = ix->dims[i];
    for (uint32_t i = axis + 1; i < d->ndim; i++)
        od[k++] = d->dims[i];
    int64_t dim = d->dims[axis];
    size_t nidx = cpu_numel(ix->ndim, ix->dims);
    size_t outer = cpu_numel(axis, d->dims);
    size_t inner = cpu_numel(d->ndim - axis - 1, d->dims + axis + 1) * es;
    /* Validate every index before allocating. */
    for (size_t j = 0; j < nidx && outer && inner; j++) {
        int64_t v;
        if ((rc = check_index(r, cpu_elem_i64(ix, j), dim, axis, &v)))
            return rc;
    }
    if ((rc = cpu_alloc(r, d->dtype, on, od, out)))
        return rc;
    uint8_t *dst = cpu_tv(*out)->data;
    if (!inner || !outer)
        return BB_OK;
    for (size_t o = 0; o < outer; o++) {
        const uint8_t *src = d->data + o * (size_t)dim * inner;
        for (size_t j = 0; j < nidx; j++) {
            int64_t v = cpu_elem_i64(ix, j);
            if (v < 0)
                v += dim;
            if (inner == 4)
                memcpy(dst, src + (size_t)v * 4, 4);
            else
                memcpy(dst, src + (size_t)v * inner, inner);
            dst += inner;
        }
    }
    return BB_OK;
}

int cpu_k_Scatter(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out,
                  uint32_t n_out)
{
    (void)n_in;
    (void)n_out;
    const bb_tensor_view *d = cpu_tv(in[0]), *ix = cpu_tv(in[1]), *up = cpu_tv(in[2]);
    size_t es = bb_tensor_elem_size(d->dtype);
    if (!es)
        return cpu_fail_dtype(r, d->dtype);
    if (ix->dtype != BB_DT_INT32 && ix->dtype != BB_DT_INT64)
        return cpu_fail(r, BB_ETYPE, "indices must be int32 or int64, got %s",
                        cpu_dtype_name(ix->dtype));
    if (up->dtype != d->dtype)
        return cpu_fail(r, BB_ETYPE, "updates dtype %s differs from data's %s",
                        cpu_dtype_name(up->dtype), cpu_dtype_name(d->dtype));
    char s1[128], s2[128];
    if (d->ndim == 0)
        return cpu_fail(r, BB_EINVAL, "data must have rank >= 1");
    if (ix->ndim != d->ndim)
        return cpu_fail(r, BB_EINVAL, "indices rank %u differs from data rank %u", ix->ndim,
                        d->ndim);
    if (up->ndim != ix->ndim || memcmp(up->dims, ix->dims, ix->ndim * sizeof *ix->dims))
        return cpu_fail(r, BB_EINVAL, "updates shape %s differs from indices shape %s",
                        cpu_shape_str(up->ndim, up->dims, s1, sizeof s1),
                        cpu_shape_str(ix->ndim, ix->dims, s2, sizeof s2));
    uint32_t axis;
    int rc = cpu_axis(r, cpu_attr_i(r->node, "axis", 0), d->ndim, "axis", &axis);
    if (rc)
        return rc;
    for (uint32_t i = 0; i < d->ndim; i++)
        if (i != axis && ix->dims[i] > d->dims[i])
            return cpu_fail(r, BB_EINVAL, "indices shape %s exceeds data shape %s on axis %u",
                            cpu_shape_str(ix->ndim, ix->dims, s1, sizeof s1),
                            cpu_shape_str(d->ndim, d->dims, s2, sizeof s2), i);
    size_t n = cpu_numel(ix->ndim, ix->dims);
    int64_t dim = d->dims[axis];
    for (size_t j = 0; j < n; j++) {
        int64_t v;
        if ((rc = check_index(r, cpu_elem_i64(ix, j), dim, axis, &v)))
            return rc;
    }
    if ((rc = cpu_alloc(r, d->dtype, d->ndim, d->dims, out)))
        return rc;
    uint8_t *dst = cpu_tv(*out)->data;
    memcpy(dst, d->data, d->nbytes);
    if (!n)
        return BB_OK;
    size_t dst_st[BB_MAX_DIMS], s = 1;
    for (int32_t i = (int32_t)d->ndim - 1; i >= 0; i--) {
        dst_st[i] = s;
        s *= (size_t)d->dims[i];
    }
    int64_t idx[BB_MAX_DIMS] = {0};
    size_t base = 0; /* destination offset of idx with idx[axis] := 0 */
    for (size_t j = 0; j < n; j++) {
        int64_t v = cpu_elem_i64(ix, j);
        if (v < 0)
            v += dim;
        memcpy(dst + (base + (size_t)v * dst_st[axis]) * es, up->data + j * es, es);
        for (int32_t i = (int32_t)d->ndim - 1; i >= 0; i--) {
            if (++idx[i] < ix->dims[i]) {
                if ((uint32_t)i != axis)
                    base += dst_st[i];
                break;
            }
            if ((uint32_t)i != axis)
                base -= dst_st[i] * (size_t)(ix->dims[i] - 1);
            idx[i] = 0;
        }
    }
    return BB_OK;
}
