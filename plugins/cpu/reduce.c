/*
 * reduce.c — ReduceSum, ReduceMean, ReduceMax, ReduceMin (and ArgMax,
 * at the end): axes from the
 * optional input (opset 13/18) or the axes attribute (older opsets),
 * negative axes, keepdims (default 1) and noop_with_empty_axes.
 *
 * Adjacent input dims with the same reduced/kept role are merged, then the
 * input is walked once in order: a reduced innermost run folds into one
 * output element, a kept innermost run combines elementwise into an
 * output row. Both loops vectorize. An empty reduction gives 0 (Sum),
 * NaN for float / 0 for integer Mean, and the identity of Max/Min
 * (-inf/+inf or the type's limits).
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "cpu_internal.h"

enum { R_SUM, R_MEAN, R_MAX, R_MIN };

#define RED_TYPES(X)                                                          \
    X(BB_DT_FLOAT, float, f32, -INFINITY, INFINITY)                           \
    X(BB_DT_DOUBLE, double, f64, -INFINITY, INFINITY)                         \
    X(BB_DT_INT8, int8_t, i8, INT8_MIN, INT8_MAX)                             \
    X(BB_DT_UINT8, uint8_t, u8, 0, UINT8_MAX)                                 \
    X(BB_DT_INT32, int32_t, i32, INT32_MIN, INT32_MAX)                        \
    X(BB_DT_UINT32, uint32_t, u32, 0, UINT32_MAX)                             \
    X(BB_DT_INT64, int64_t, i64, INT64_MIN, INT64_MAX)                        \
    X(BB_DT_UINT64, uint64_t, u64, 0, UINT64_MAX)

/* Sums wrap for integers: add in uint64 and truncate. */
#define ADD_(T, x, y) ((T)((x) + (y)))
#define MAX_(T, x, y) (((y) > (x) || (y) != (y)) ? (y) : (x))
#define MIN_(T, x, y) (((y) < (x) || (y) != (y)) ? (y) : (x))

typedef struct red_fns {
    void (*row)(void *o, const void *a, size_t n);     /* o[0] = op(o[0], a[0..n)) */
    void (*elem)(void *o, const void *a, size_t n);    /* o[i] = op(o[i], a[i]) */
} red_fns;

#define DEF_RED(op, OPM, T, sfx)                                                      \
    static void row_##op##_##sfx(void *o_, const void *a_, size_t n)                  \
    {                                                                                 \
        T *o = o_;                                                                    \
        const T *restrict a = a_;                                                     \
        T acc = o[0];                                                                 \
        for (size_t i = 0; i < n; i++)                                                \
            acc = OPM(T, acc, a[i]);                                                  \
        o[0] = acc;                                                                   \
    }                                                                                 \
    static void elem_##op##_##sfx(void *o_, const void *a_, size_t n)                 \
    {                                                                                 \
        T *restrict o = o_;                                                           \
        const T *restrict a = a_;                                                     \
        for (size_t i = 0; i < n; i++)                                                \
            o[i] = OPM(T, o[i], a[i]);                                                \
    }

/* Integer sums go through the unsigned type of the same width (wraps). */
#define DEF_RED_ALL(dt, T, sfx, LO, HI)      \
    DEF_RED(max, MAX_, T, sfx)               \
    DEF_RED(min, MIN_, T, sfx)
RED_TYPES(DEF_RED_ALL)
DEF_RED(sum, ADD_, float, f32)
DEF_RED(sum, ADD_, double, f64)
DEF_RED(sum, ADD_, uint32_t, u32)
DEF_RED(sum, ADD_, uint64_t, u64)

static bool red_pick(int op, int32_t dt, red_fns *f)
{
    if (op == R_SUM || op == R_MEAN) {
        switch (dt) {
        case BB_DT_FLOAT: *f = (red_fns){row_sum_f32, elem_sum_f32}; return true;
        case BB_DT_DOUBLE: *f = (red_fns){row_sum_f64, elem_sum_f64}; return true;
        case BB_DT_INT32:
        case BB_DT_UINT32: *f = (red_fns){row_sum_u32, elem_sum_u32}; return true;
        case BB_DT_INT64:
        case BB_DT_UINT64: *f = (red_fns){row_sum_u64, elem_sum_u64}; return true;
        default: return false;
        }
    }
#define CASE_(d, T, sfx, LO, HI)                                                   \
    case d:                                                                        \
        *f = op == R_MAX ? (red_fns){row_max_##sfx, elem_max_##sfx}                 \
                         : (red_fns){row_min_##sfx, elem_min_##sfx};                \
        return true;
    switch (dt) {
        RED_TYPES(CASE_)
    default: return false;
    }
#undef CASE_
}

/* Fill n elements with the op's identity. */
static void red_init(int op, int32_t dt, void *o, size_t n)
{
    if (op == R_SUM || op == R_MEAN) {
        memset(o, 0, n * bb_tensor_elem_size(dt));
        return;
    }
#define CASE_(d, T, sfx, LO, HI)                         \
    case d: {                                            \
        T v = op == R_MAX ? (T)(LO) : (T)(HI);           \
        for (size_t i = 0; i < n; i++)                   \
            ((T *)o)[i] = v;                             \
        return;                                          \
    }
    switch (dt) {
        RED_TYPES(CASE_)
    default: return;
    }
#undef CASE_
}

static void mean_finish(int32_t dt, void *o, size_t n, size_t count)
{
    switch (dt) {
    case BB_DT_FLOAT: {
        float *p = o;
        for (size_t i = 0; i < n; i++)
            p[i] = count ? p[i] / (float)count : NAN;
        return;
    }
    case BB_DT_DOUBLE: {
        double *p = o;
        for (size_t i = 0; i < n; i++)
            p[i] = count ? p[i] / (double)count : NAN;
        return;
    }
    case BB_DT_INT32:
        for (size_t i = 0; i < n; i++)
            ((int32_t *)o)[i] = count ? (int32_t)(((int32_t *)o)[i] / (int64_t)count) : 0;
        return;
    case BB_DT_UINT32:
        for (size_t i = 0; i < n; i++)
            ((uint32_t *)o)[i] = count ? (uint32_t)(((uint32_t *)o)[i] / count) : 0;
        return;
    case BB_DT_INT64:
        for (size_t i = 0; i < n; i++) {
            int64_t v = ((int64_t *)o)[i];
            ((int64_t *)o)[i] = count ? (count > (size_t)INT64_MAX ? 0 : v / (int64_t)count) : 0;
        }
        return;
    case BB_DT_UINT64:
        for (size_t i = 0; i < n; i++)
            ((uint64_t *)o)[i] = count ? ((uint64_t *)o)[i] / count : 0;
        return;
    default: return;
    }
}

static int reduce(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out, int op)
{
    const bb_tensor_view *t = cpu_tv(in[0]);
    red_fns f;
    if (!red_pick(op, t->dtype, &f))
        return cpu_fail_dtype(r, t->dtype);
    int64_t axes[BB_MAX_DIMS];
    size_t na = 0;
    int rc;
    if (n_in > 1 && in[1]) {
        if ((rc = cpu_read_ints(r, in[1], "axes", axes, BB_MAX_DIMS, &na)))
            return rc;
    } else {
        const int64_t *v;
        if (cpu_attr_ints(r->node, "axes", &v, &na)) {
            if (na > BB_MAX_DIMS)
                return cpu_fail(r, BB_ELIMIT, "%zu axes, more than %d", na, BB_MAX_DIMS);
            memcpy(axes, v, na * sizeof *v);
        }
    }
    bool keep = cpu_attr_i(r->node, "keepdims", 1) != 0;
    uint32_t nd = t->ndim;
    bool red[BB_MAX_DIMS] = {false};
    if (na == 0) {
        if (cpu_attr_i(r->node, "noop_with_empty_axes", 0) != 0) {
            *out = bb_value_ref(in[0]);
            return BB_OK;
        }
        for (uint32_t d = 0; d < nd; d++)
            red[d] = true;
    }
    for (size_t i = 0; i < na; i++) {
        uint32_t a;
        if ((rc = cpu_axis(r, axes[i], nd, "axis", &a)))
            return rc;
        if (red[a])
            return cpu_fail(r, BB_EINVAL, "axis %lld repeated", (long long)axes[i]);
        red[a] = true;
    }
    int64_t od[BB_MAX_DIMS];
    uint32_t on = 0;
    size_t count = 1;
    for (uint32_t d = 0; d < nd; d++) {
        if (red[d]) {
            count *= (size_t)t->dims[d];
            if (keep)
                od[on++] = 1;
        } else {
            od[on++] = t->dims[d];
        }
    }
    if ((rc = cpu_alloc(r, t->dtype, on, od, out)))
        return rc;
    uint8_t *o = cpu_tv(*out)->data;
    size_t es = bb_tensor_elem_size(t->dtype), onum = cpu_numel(on, od);
    red_init(op, t->dtype, o, onum);
    size_t total = cpu_numel(nd, t->dims);
    if (total) {
        /* Merge runs of dims with the same role; drop size-1 dims. */
        int64_t cd[BB_MAX_DIMS];
        bool cr[BB_MAX_DIMS];
        uint32_t cn = 0;
        for (uint32_t d = 0; d < nd; d++) {
            if (t->dims[d] == 1)
                continue;
            if (cn && cr[cn - 1] == red[d]) {
                cd[cn - 1] *= t->dims[d];
                continue;
            }
            cd[cn] = t->dims[d];
            cr[cn] = red[d];
            cn++;
        }
        if (cn == 0) { /* a single element */
            cd[0] = 1;
            cr[0] = true;
            cn = 1;
        }
        /* Output stride of each merged dim (0 when reduced). */
        size_t ost[BB_MAX_DIMS], s = 1;
        for (int32_t d = (int32_t)cn - 1; d >= 0; d--) {
            ost[d] = cr[d] ? 0 : s;
            if (!cr[d])
                s *= (size_t)cd[d];
        }
        uint32_t last = cn - 1;
        size_t n = (size_t)cd[last], ooff = 0;
        int64_t idx[BB_MAX_DIMS] = {0};
        const uint8_t *a = t->data;
        for (;;) {
            if (cr[last])
                f.row(o + ooff * es, a, n);
            else
                f.elem(o + ooff * es, a, n);
            a += n * es;
            int32_t d = (int32_t)last - 1;
            for (; d >= 0; d--) {
                if (++idx[d] < cd[d]) {
                    ooff += ost[d];
                    break;
                }
                idx[d] = 0;
                ooff -= ost[d] * (size_t)(cd[d] - 1);
            }
            if (d < 0)
                break;
        }
    }
    if (op == R_MEAN)
        mean_finish(t->dtype, o, onum, total ? count : 0);
    return BB_OK;
}

#define RED_KERNEL(Name, op)                                                             \
    int cpu_k_##Name(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out,     \
                     uint32_t n_out)                                                     \
    {                                                                                    \
        (void)n_out;                                                                     \
        return reduce(r, in, n_in, out, op);                                             \
    }
RED_KERNEL(ReduceSum, R_SUM)
RED_KERNEL(ReduceMean, R_MEAN)
RED_KERNEL(ReduceMax, R_MAX)
RED_KERNEL(ReduceMin, R_MIN)

/* ---- ArgMax ------------------------------------------------------------------ */

/* First (or last) index of the maximum along the axis; NaN counts as the
 * maximum (numpy's argmax). Data seen as [outer, len, inner]. */
#define ARGMAX(T)                                                                  \
    do {                                                                           \
        const T *x = (const T *)(const void *)t->data;                             \
        for (size_t o = 0; o < outer; o++)                                         \
            for (size_t i = 0; i < inner; i++) {                                   \
                const T *p = x + o * len * inner + i;                              \
                T m = p[0];                                                        \
                size_t best = 0;                                                   \
                for (size_t k = 1; k < len && m == m; k++) {                       \
                    T v = p[k * inner];                                            \
                    if (v != v || v > m || (last && v == m)) {                     \
                        m = v;                                                     \
                        best = k;                                                  \
                    }                                                              \
                }                                                                  \
                y[o * inner + i] = (int64_t)best;                                  \
            }                                                                      \
    } while (0)

int cpu_k_ArgMax(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out,
                 uint32_t n_out)
{
    (void)n_in;
    (void)n_out;
    const bb_tensor_view *t = cpu_tv(in[0]);
    int32_t dt = t->dtype;
    red_fns f;
    if (!red_pick(R_MAX, dt, &f))
        return cpu_fail_dtype(r, dt);
    if (t->ndim == 0)
        return cpu_fail(r, BB_EINVAL, "data must have rank >= 1");
    uint32_t axis;
    int rc = cpu_axis(r, cpu_attr_i(r->node, "axis", 0), t->ndim, "axis", &axis);
    if (rc)
        return rc;
    bool keep = cpu_attr_i(r->node, "keepdims", 1) != 0;
    bool last = cpu_attr_i(r->node, "select_last_index", 0) != 0;
    size_t outer = cpu_numel(axis, t->dims), len = (size_t)t->dims[axis];
    size_t inner = cpu_numel(t->ndim - axis - 1, t->dims + axis + 1);
    if (len == 0 && outer * inner != 0)
        return cpu_fail(r, BB_EINVAL, "cannot take the ArgMax of an empty axis %u", axis);
    int64_t od[BB_MAX_DIMS];
    uint32_t on = 0;
    for (uint32_t d = 0; d < t->ndim; d++)
        if (d != axis)
            od[on++] = t->dims[d];
        else if (keep)
            od[on++] = 1;
    if ((rc = cpu_alloc(r, BB_DT_INT64, on, od, out)))
        return rc;
    int64_t *y = (int64_t *)(void *)cpu_tv(*out)->data;
    if (len == 0)
        return BB_OK;
    switch (dt) {
    case BB_DT_FLOAT: ARGMAX(float); break;
    case BB_DT_DOUBLE: ARGMAX(double); break;
    case BB_DT_INT8: ARGMAX(int8_t); break;
    case BB_DT_UINT8: ARGMAX(uint8_t); break;
    case BB_DT_INT32: ARGMAX(int32_t); break;
    case BB_DT_UINT32: ARGMAX(uint32_t); break;
    case BB_DT_INT64: ARGMAX(int64_t); break;
    default: ARGMAX(uint64_t); break;
    }
    return BB_OK;
}
