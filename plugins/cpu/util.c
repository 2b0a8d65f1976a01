/*
 * util.c — cpu::CpuBackend helpers shared by every kernel file: error
 * messages that name the op and node, dtype names and sizes, attribute
 * lookup on a bb_node, tensor allocation and views, integer inputs, axes,
 * TensorProto conversion and the numeric cast table.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

/* ---- errors ---------------------------------------------------------------- */

static const char *const OP_NAMES[CPU_N_OPS] = {
#define NAME_(n) #n,
    CPU_OPS(NAME_)
#undef NAME_
};

const char *cpu_op_name(cpu_op op)
{
    return (unsigned)op < CPU_N_OPS ? OP_NAMES[op] : "?";
}

int cpu_fail(cpu_run *r, int code, const char *fmt, ...)
{
    if (!r->err)
        return code;
    char detail[BB_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    const char *nn = r->node && r->node->name && *r->node->name ? r->node->name : NULL;
    if (nn)
        return bb_error_set(r->err, code, CPU_NAME ": %s: %s (node '%s')", cpu_op_name(r->op),
                            detail, nn);
    return bb_error_set(r->err, code, CPU_NAME ": %s: %s", cpu_op_name(r->op), detail);
}

int cpu_fail_dtype(cpu_run *r, int32_t dtype)
{
    return cpu_fail(r, BB_EUNSUPPORTED, "dtype %s not supported", cpu_dtype_name(dtype));
}

/* ---- dtypes ---------------------------------------------------------------- */

const char *cpu_dtype_name(int32_t dt)
{
    return bb_dtype_name(dt);
}

bool cpu_dtype_is_float(int32_t dt)
{
    return dt == BB_DT_FLOAT || dt == BB_DT_DOUBLE;
}

/* ---- attributes ------------------------------------------------------------ */

const bb_attr *cpu_attr(const bb_node *n, const char *name)
{
    if (!n)
        return NULL;
    for (size_t i = 0; i < n->attrs.n; i++) {
        const bb_attr *a = n->attrs.v[i];
        if (a && a->name && strcmp(a->name, name) == 0)
            return a;
    }
    return NULL;
}

int64_t cpu_attr_i(const bb_node *n, const char *name, int64_t dflt)
{
    const bb_attr *a = cpu_attr(n, name);
    return a && a->type == BB_ATTR_INT ? a->i : dflt;
}

float cpu_attr_f(const bb_node *n, const char *name, float dflt)
{
    const bb_attr *a = cpu_attr(n, name);
    if (!a)
        return dflt;
    if (a->type == BB_ATTR_FLOAT)
        return a->f;
    if (a->type == BB_ATTR_INT) /* tolerated: alpha=1 written as an int */
        return (float)a->i;
    return dflt;
}

const uint8_t *cpu_attr_s(const bb_node *n, const char *name, size_t *len)
{
    const bb_attr *a = cpu_attr(n, name);
    if (!a || a->type != BB_ATTR_STRING) {
        *len = 0;
        return NULL;
    }
    *len = a->s.len;
    return a->s.data ? a->s.data : (const uint8_t *)"";
}

bool cpu_attr_s_is(const bb_node *n, const char *name, const char *s)
{
    size_t len;
    const uint8_t *v = cpu_attr_s(n, name, &len);
    return v && len == strlen(s) && memcmp(v, s, len) == 0;
}

bool cpu_attr_ints(const bb_node *n, const char *name, const int64_t **v, size_t *count)
{
    const bb_attr *a = cpu_attr(n, name);
    if (!a || a->type != BB_ATTR_INTS) {
        *v = NULL;
        *count = 0;
        return false;
    }
    *v = a->ints.v;
    *count = a->ints.n;
    return true;
}

/* ---- tensors --------------------------------------------------------------- */

size_t cpu_numel(uint32_t ndim, const int64_t *dims)
{
    size_t n = 1;
    for (uint32_t i = 0; i < ndim; i++)
        n *= (size_t)dims[i];
    return n;
}

const char *cpu_shape_str(uint32_t ndim, const int64_t *dims, char *buf, size_t cap)
{
    size_t at = 0;
    at += (size_t)snprintf(buf + at, cap - at, "[");
    for (uint32_t i = 0; i < ndim && at < cap; i++)
        at += (size_t)snprintf(buf + at, cap - at, i ? ",%lld" : "%lld", (long long)dims[i]);
    if (at < cap)
        snprintf(buf + at, cap - at, "]");
    return buf;
}

static int alloc_result(cpu_run *r, int32_t dtype, uint32_t ndim, const int64_t *dims, bool zero,
                        bb_value **out)
{
    if (ndim > BB_MAX_DIMS)
        return cpu_fail(r, BB_ELIMIT, "result rank %u exceeds %d", ndim, BB_MAX_DIMS);
    for (uint32_t i = 0; i < ndim; i++)
        if (dims[i] < 0)
            return cpu_fail(r, BB_EINVAL, "negative result dimension %lld",
                            (long long)dims[i]);
    size_t n = bb_shape_numel(ndim, dims);
    size_t es = bb_tensor_elem_size(dtype);
    if (n == SIZE_MAX || !es || n > (SIZE_MAX / 2) / es) {
        char s[128];
        return cpu_fail(r, BB_ELIMIT, "result shape %s of %s is too large",
                        cpu_shape_str(ndim, dims, s, sizeof s), cpu_dtype_name(dtype));
    }
    cpu_tensor_pool *pool = r->be ? r->be->pool : NULL;
    *out = pool ? cpu_tensor_pool_value(pool, dtype, ndim, dims, n * es, zero)
                : bb_value_tensor_new(dtype, ndim, dims);
    if (!*out)
        return cpu_fail(r, BB_ENOMEM, "out of memory for a %zu-byte result", n * es);
    return BB_OK;
}

int cpu_alloc(cpu_run *r, int32_t dtype, uint32_t ndim, const int64_t *dims, bb_value **out)
{
    return alloc_result(r, dtype, ndim, dims, true, out);
}

int cpu_alloc_uninit(cpu_run *r, int32_t dtype, uint32_t ndim, const int64_t *dims,
                     bb_value **out)
{
    return alloc_result(r, dtype, ndim, dims, false, out);
}

int cpu_view(cpu_run *r, const bb_value *src, uint32_t ndim, const int64_t *dims,
             bb_value **out)
{
    const bb_tensor_view *t = cpu_tv(src);
    *out = bb_value_tensor_wrap(t->dtype, ndim, dims, t->buf, t->data);
    if (!*out)
        return cpu_fail(r, BB_ENOMEM, "out of memory");
    return BB_OK;
}

int cpu_read_ints(cpu_run *r, const bb_value *v, const char *what, int64_t *out, size_t cap,
                  size_t *n)
{
    const bb_tensor_view *t = cpu_tv(v);
    if (t->dtype != BB_DT_INT64 && t->dtype != BB_DT_INT32)
        return cpu_fail(r, BB_ETYPE, "%s must be int64 or int32, got %s", what,
                        cpu_dtype_name(t->dtype));
    if (t->ndim > 1)
        return cpu_fail(r, BB_EINVAL, "%s must be a 1-D tensor, got rank %u", what, t->ndim);
    size_t cnt = cpu_numel(t->ndim, t->dims);
    if (cnt > cap)
        return cpu_fail(r, BB_ELIMIT, "%s has %zu entries, more than %zu", what, cnt, cap);
    for (size_t i = 0; i < cnt; i++)
        out[i] = cpu_elem_i64(t, i);
    *n = cnt;
    return BB_OK;
}

int cpu_axis(cpu_run *r, int64_t axis, uint32_t rank, const char *what, uint32_t *out)
{
    int64_t a = axis < 0 ? axis + (int64_t)rank : axis;
    if (a < 0 || a >= (int64_t)rank)
        return cpu_fail(r, BB_EINVAL, "%s %lld out of range for rank %u", what,
                        (long long)axis, rank);
    *out = (uint32_t)a;
    return BB_OK;
}

int cpu_tensor_from_proto(cpu_run *r, const bb_tensor_proto *tp, bb_value **out)
{
    const char *nm = tp->name ? tp->name : "";
    if (tp->has_data_location && tp->data_location == 1)
        return cpu_fail(r, BB_EUNSUPPORTED, "tensor '%s': external data not supported", nm);
    if (!bb_tensor_elem_size(tp->data_type))
        return cpu_fail(r, BB_EUNSUPPORTED, "tensor '%s': dtype %s not supported", nm,
                        cpu_dtype_name(tp->data_type));
    if (tp->dims.n > BB_MAX_DIMS)
        return cpu_fail(r, BB_ELIMIT, "tensor '%s': rank %zu exceeds %d", nm, tp->dims.n,
                        BB_MAX_DIMS);
    size_t n = bb_shape_numel((uint32_t)tp->dims.n, tp->dims.v);
    size_t es = bb_tensor_elem_size(tp->data_type);
    if (n == SIZE_MAX || n > SIZE_MAX / es)
        return cpu_fail(r, BB_EINVAL, "tensor '%s': invalid dims", nm);
    if (tp->raw_data.len != n * es)
        return cpu_fail(r, BB_EINVAL, "tensor '%s': %zu data bytes for %zu elements of %s",
                        nm, tp->raw_data.len, n, cpu_dtype_name(tp->data_type));
    *out = bb_value_tensor_copy(tp->data_type, (uint32_t)tp->dims.n, tp->dims.v,
                                tp->raw_data.data, tp->raw_data.len);
    if (!*out)
        return cpu_fail(r, BB_ENOMEM, "tensor '%s': out of memory", nm);
    return BB_OK;
}

/* ---- element access and casts ---------------------------------------------- */

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: renormalize */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) {
                man <<= 1;
                exp--;
            }
            man &= 0x3ff;
            bits = sign | (exp << 23) | (man << 13);
        }
    } else if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    int32_t exp = (int32_t)((x >> 23) & 0xff);
    uint32_t man = x & 0x7fffff;
    if (exp == 0xff) /* inf / nan */
        return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    int32_t e = exp - 127 + 15;
    if (e >= 0x1f)
        return (uint16_t)(sign | 0x7c00);
    if (e <= 0) {
        if (e < -10)
            return (uint16_t)sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
        h++; /* may carry into the exponent: still correct (up to inf) */
    return (uint16_t)(sign | h);
}

static float bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

double cpu_elem_f64(const bb_tensor_view *t, size_t i)
{
    const uint8_t *p = t->data;
    switch (t->dtype) {
    case BB_DT_FLOAT: return ((const float *)p)[i];
    case BB_DT_DOUBLE: return ((const double *)p)[i];
    case BB_DT_INT8: return ((const int8_t *)p)[i];
    case BB_DT_UINT8: return ((const uint8_t *)p)[i];
    case BB_DT_BOOL: return ((const uint8_t *)p)[i] != 0;
    case BB_DT_INT16: return ((const int16_t *)p)[i];
    case BB_DT_UINT16: return ((const uint16_t *)p)[i];
    case BB_DT_INT32: return ((const int32_t *)p)[i];
    case BB_DT_UINT32: return ((const uint32_t *)p)[i];
    case BB_DT_INT64: return (double)((const int64_t *)p)[i];
    case BB_DT_UINT64: return (double)((const uint64_t *)p)[i];
    case BB_DT_FLOAT16: return half_to_float(((const uint16_t *)p)[i]);
    case BB_DT_BFLOAT16: return bf16_to_float(((const uint16_t *)p)[i]);
    default: return 0;
    }
}

/* Saturating double -> int64 (NaN -> 0). */
static int64_t sat_i64(double d)
{
    if (d != d)
        return 0;
    if (d >= 9223372036854775807.0)
        return INT64_MAX;
    if (d <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)d;
}

int64_t cpu_elem_i64(const bb_tensor_view *t, size_t i)
{
    switch (t->dtype) {
    case BB_DT_INT64: return ((const int64_t *)(const void *)t->data)[i];
    case BB_DT_UINT64: {
        uint64_t u = ((const uint64_t *)(const void *)t->data)[i];
        return u > INT64_MAX ? INT64_MAX : (int64_t)u;
    }
    case BB_DT_INT32: return ((const int32_t *)(const void *)t->data)[i];
    default: return sat_i64(cpu_elem_f64(t, i));
    }
}

bool cpu_cast_supported(int32_t dt)
{
    return bb_tensor_elem_size(dt) != 0;
}

/* The cast matrix: every source type is read into one of three carriers
 * (double, int64, uint64) chosen so no value is lost where it fits, then
 * stored with saturation. Specialised loops cover the common pairs. */
#define CAST_FAST(ST, DT)                          \
    do {                                           \
        const ST *s_ = src;                        \
        DT *d_ = dst;                              \
        for (size_t i_ = 0; i_ < n; i_++)          \
            d_[i_] = (DT)s_[i_];                   \
        return;                                    \
    } while (0)

static double load_f(const void *src, int32_t dt, size_t i)
{
    bb_tensor_view t = {.dtype = dt, .data = (uint8_t *)(uintptr_t)src};
    return cpu_elem_f64(&t, i);
}

static int64_t clamp_i64(int64_t x, int64_t lo, int64_t hi)
{
    return x < lo ? lo : x > hi ? hi : x;
}

/* Store v into element i of dst: floats round, integers saturate. */
static void store_from_f64(void *dst, int32_t dt, size_t i, double v)
{
    switch (dt) {
    case BB_DT_FLOAT: ((float *)dst)[i] = (float)v; return;
    case BB_DT_DOUBLE: ((double *)dst)[i] = v; return;
    case BB_DT_FLOAT16: ((uint16_t *)dst)[i] = float_to_half((float)v); return;
    case BB_DT_BFLOAT16: ((uint16_t *)dst)[i] = float_to_bf16((float)v); return;
    case BB_DT_BOOL: ((uint8_t *)dst)[i] = v != 0; return;
    default: break;
    }
    int64_t x = sat_i64(v);
    switch (dt) {
    case BB_DT_INT8: ((int8_t *)dst)[i] = (int8_t)clamp_i64(x, INT8_MIN, INT8_MAX); return;
    case BB_DT_UINT8: ((uint8_t *)dst)[i] = (uint8_t)clamp_i64(x, 0, UINT8_MAX); return;
    case BB_DT_INT16: ((int16_t *)dst)[i] = (int16_t)clamp_i64(x, INT16_MIN, INT16_MAX); return;
    case BB_DT_UINT16: ((uint16_t *)dst)[i] = (uint16_t)clamp_i64(x, 0, UINT16_MAX); return;
    case BB_DT_INT32: ((int32_t *)dst)[i] = (int32_t)clamp_i64(x, INT32_MIN, INT32_MAX); return;
    case BB_DT_UINT32: ((uint32_t *)dst)[i] = (uint32_t)clamp_i64(x, 0, UINT32_MAX); return;
    case BB_DT_INT64: ((int64_t *)dst)[i] = x; return;
    case BB_DT_UINT64:
        ((uint64_t *)dst)[i] = v != v || v <= 0              ? 0
                               : v >= 18446744073709551615.0 ? UINT64_MAX
                                                             : (uint64_t)v;
        return;
    default: return;
    }
}

static bool is_int_dt(int32_t dt)
{
    return dt == BB_DT_INT8 || dt == BB_DT_UINT8 || dt == BB_DT_INT16 || dt == BB_DT_UINT16 ||
           dt == BB_DT_INT32 || dt == BB_DT_UINT32 || dt == BB_DT_INT64 ||
           dt == BB_DT_UINT64 || dt == BB_DT_BOOL;
}

/* Integer source read exactly as int64 (uint64 above INT64_MAX handled by caller). */
static int64_t load_i(const void *src, int32_t dt, size_t i)
{
    switch (dt) {
    case BB_DT_INT8: return ((const int8_t *)src)[i];
    case BB_DT_UINT8: return ((const uint8_t *)src)[i];
    case BB_DT_BOOL: return ((const uint8_t *)src)[i] != 0;
    case BB_DT_INT16: return ((const int16_t *)src)[i];
    case BB_DT_UINT16: return ((const uint16_t *)src)[i];
    case BB_DT_INT32: return ((const int32_t *)src)[i];
    case BB_DT_UINT32: return ((const uint32_t *)src)[i];
    case BB_DT_INT64: return ((const int64_t *)src)[i];
    default: return 0;
    }
}

/* Integer -> integer: ONNX Cast between integers wraps (two's complement,
 * as numpy astype does); to bool is != 0. */
static void store_from_int(void *dst, int32_t dt, size_t i, uint64_t bits, bool nonzero)
{
    switch (dt) {
    case BB_DT_INT8:
    case BB_DT_UINT8: ((uint8_t *)dst)[i] = (uint8_t)bits; return;
    case BB_DT_BOOL: ((uint8_t *)dst)[i] = nonzero; return;
    case BB_DT_INT16:
    case BB_DT_UINT16: ((uint16_t *)dst)[i] = (uint16_t)bits; return;
    case BB_DT_INT32:
    case BB_DT_UINT32: ((uint32_t *)dst)[i] = (uint32_t)bits; return;
    case BB_DT_INT64:
    case BB_DT_UINT64: ((uint64_t *)dst)[i] = bits; return;
    default: return;
    }
}

void cpu_cast_buf(void *dst, int32_t ddt, const void *src, int32_t sdt, size_t n)
{
    if (ddt == sdt) {
        if (n)
            memcpy(dst, src, n * bb_tensor_elem_size(sdt));
        return;
    }
    if (sdt == BB_DT_FLOAT && ddt == BB_DT_DOUBLE)
        CAST_FAST(float, double);
    if (sdt == BB_DT_DOUBLE && ddt == BB_DT_FLOAT)
        CAST_FAST(double, float);
    if (sdt == BB_DT_INT32 && ddt == BB_DT_FLOAT)
        CAST_FAST(int32_t, float);
    if (sdt == BB_DT_INT64 && ddt == BB_DT_FLOAT)
        CAST_FAST(int64_t, float);
    if (sdt == BB_DT_UINT8 && ddt == BB_DT_FLOAT)
        CAST_FAST(uint8_t, float);
    if (sdt == BB_DT_INT32 && ddt == BB_DT_INT64)
        CAST_FAST(int32_t, int64_t);
    if (is_int_dt(sdt) && is_int_dt(ddt)) {
        for (size_t i = 0; i < n; i++) {
            uint64_t bits;
            if (sdt == BB_DT_UINT64)
                bits = ((const uint64_t *)src)[i];
            else
                bits = (uint64_t)load_i(src, sdt, i);
            store_from_int(dst, ddt, i, bits, bits != 0);
        }
        return;
    }
    if (sdt == BB_DT_UINT64 || sdt == BB_DT_INT64) { /* exact big ints -> float types */
        for (size_t i = 0; i < n; i++) {
            double v = sdt == BB_DT_UINT64 ? (double)((const uint64_t *)src)[i]
                                           : (double)((const int64_t *)src)[i];
            store_from_f64(dst, ddt, i, v);
        }
        return;
    }
    for (size_t i = 0; i < n; i++)
        store_from_f64(dst, ddt, i, load_f(src, sdt, i));
}
