/*
 * pool.c — MaxPool (optional Indices output, storage_order), AveragePool
 * (count_include_pad) and GlobalAveragePool over 1..6 spatial dims, with
 * the window geometry of conv.c (pads, strides, dilations, auto_pad,
 * ceil_mode).
 *
 * For each output position the window's in-bounds input offsets are
 * listed once and shared by every plane (N*C) — the geometry does not
 * depend on the plane — so the per-plane work is a straight gather.
 */
#include <math.h>
#include <string.h>

#include "cpu_internal.h"

#define MAX_WINDOW ((size_t)1 << 24)

size_t cpu_pool_window(const cpu_geom *g, const int64_t *oc, size_t *offs, size_t *padded)
{
    uint32_t ns = g->ns;
    int64_t kk[CPU_MAX_SPATIAL] = {0};
    size_t n = 0, pc = 0, K = cpu_numel(ns, g->k);
    for (size_t q = 0; q < K; q++) {
        bool in = true, inpad = true;
        size_t off = 0;
        for (uint32_t d = 0; d < ns; d++) {
            int64_t c = oc[d] * g->s[d] + kk[d] * g->d[d] - g->pb[d];
            in = in && c >= 0 && c < g->in[d];
            inpad = inpad && c >= -g->pb[d] && c < g->in[d] + g->pe[d];
            off = off * (size_t)g->in[d] + (size_t)(c >= 0 ? c : 0);
        }
        if (in)
            offs[n++] = off;
        if (inpad)
            pc++;
        for (int32_t d = (int32_t)ns - 1; d >= 0; d--) {
            if (++kk[d] < g->k[d])
                break;
            kk[d] = 0;
        }
    }
    *padded = pc;
    return n;
}

/* Column-major (storage_order=1) flat index of a row-major plane offset. */
static int64_t colmajor(const cpu_geom *g, size_t off)
{
    int64_t idx = 0, mul = 1;
    size_t coords[CPU_MAX_SPATIAL] = {0};
    for (int32_t d = (int32_t)g->ns - 1; d >= 0; d--) {
        coords[d] = off % (size_t)g->in[d];
        off /= (size_t)g->in[d];
    }
    for (uint32_t d = 0; d < g->ns; d++) {
        idx += (int64_t)coords[d] * mul;
        mul *= g->in[d];
    }
    return idx;
}

typedef struct pool_job {
    const cpu_geom *g;
    size_t planes, plane, O;
    const uint8_t *x;
    uint8_t *y;
    int64_t *ind;      /* MaxPool Indices, or NULL */
    bool colmajor;
    bool include_pad;  /* AveragePool */
} pool_job;

#define MAXPOOL(T, LOWEST)                                                               \
    static void maxpool_##T(const pool_job *j, const size_t *offs, size_t n, size_t o)   \
    {                                                                                    \
        for (size_t p = 0; p < j->planes; p++) {                                         \
            const T *xp = (const T *)(const void *)j->x + p * j->plane;                  \
            T m = LOWEST;                                                                \
            size_t arg = n ? offs[0] : 0;                                                \
            for (size_t i = 0; i < n; i++) {                                             \
                T v = xp[offs[i]];                                                       \
                if (v > m) {                                                             \
                    m = v;                                                               \
                    arg = offs[i];                                                       \
                }                                                                        \
            }                                                                            \
            ((T *)(void *)j->y)[p * j->O + o] = m;                                       \
            if (j->ind)                                                                  \
                j->ind[p * j->O + o] = (int64_t)(p * j->plane) +                         \
                                       (j->colmajor ? colmajor(j->g, arg) : (int64_t)arg); \
        }                                                                                \
    }
MAXPOOL(float, -INFINITY)
MAXPOOL(double, -INFINITY)
MAXPOOL(int8_t, INT8_MIN)
MAXPOOL(uint8_t, 0)

#define AVGPOOL(T)                                                                       \
    static void avgpool_##T(const pool_job *j, const size_t *offs, size_t n, size_t o,   \
                            size_t padded)                                               \
    {                                                                                    \
        size_t div = j->include_pad ? padded : n;                                        \
        for (size_t p = 0; p < j->planes; p++) {                                         \
            const T *xp = (const T *)(const void *)j->x + p * j->plane;                  \
            T s = 0;                                                                     \
            for (size_t i = 0; i < n; i++)                                               \
                s += xp[offs[i]];                                                        \
            ((T *)(void *)j->y)[p * j->O + o] = div ? s / (T)div : (T)NAN;               \
        }                                                                                \
    }
AVGPOOL(float)
AVGPOOL(double)

/* The common case — float, two spatial dims, no dilation, row-major
 * indices — walks each plane's window rows directly instead of gathering
 * through an offset list: the same windows, maxima (the first of equals,
 * in row-major order) and divisors as the general path. */
static bool pool2d_fast_fits(const pool_job *j, int32_t dt)
{
    const cpu_geom *g = j->g;
    return dt == BB_DT_FLOAT && g->ns == 2 && g->d[0] == 1 && g->d[1] == 1 && !j->colmajor;
}

/* 2x2 windows at stride 2 without padding and without indices (a CNN's
 * inference pool): one select per element, in loops the compiler
 * vectorizes ("a > b ? a : b" is x86's maxps, NaN handling included). */
static bool pool2x2(const pool_job *j, bool is_max)
{
    const cpu_geom *g = j->g;
    for (int d = 0; d < 2; d++)
        if (g->k[d] != 2 || g->s[d] != 2 || g->pb[d] || g->pe[d] || g->out[d] * 2 > g->in[d])
            return false;
    if (!is_max || j->ind)
        return false;
    int64_t W = g->in[1], OH = g->out[0], OW = g->out[1];
    for (size_t p = 0; p < j->planes; p++) {
        const float *xp = (const float *)(const void *)j->x + p * j->plane;
        float *yp = (float *)(void *)j->y + p * j->O;
        for (int64_t oh = 0; oh < OH; oh++) {
            const float *restrict r0 = xp + 2 * oh * W, *restrict r1 = r0 + W;
            float *restrict y = yp + oh * OW;
            for (int64_t ow = 0; ow < OW; ow++) {
                float a = r0[2 * ow] > -INFINITY ? r0[2 * ow] : -INFINITY;
                float b = r0[2 * ow + 1] > a ? r0[2 * ow + 1] : a;
                float c = r1[2 * ow] > b ? r1[2 * ow] : b;
                y[ow] = r1[2 * ow + 1] > c ? r1[2 * ow + 1] : c;
            }
        }
    }
    return true;
}

static void pool2d_fast(const pool_job *j, bool is_max)
{
    const cpu_geom *g = j->g;
    int64_t H = g->in[0], W = g->in[1], OH = g->out[0], OW = g->out[1];
    if (pool2x2(j, is_max))
        return;
    for (size_t p = 0; p < j->planes; p++) {
        const float *xp = (const float *)(const void *)j->x + p * j->plane;
        float *yp = (float *)(void *)j->y + p * j->O;
        int64_t *ip = j->ind ? j->ind + p * j->O : NULL;
        for (int64_t oh = 0; oh < OH; oh++) {
            int64_t h0 = oh * g->s[0] - g->pb[0], h1 = h0 + g->k[0];
            int64_t hs = h0 < 0 ? 0 : h0, he = h1 < H ? h1 : H;
            int64_t ph = (h1 < H + g->pe[0] ? h1 : H + g->pe[0]) - (h0 > -g->pb[0] ? h0 : -g->pb[0]);
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t w0 = ow * g->s[1] - g->pb[1], w1 = w0 + g->k[1];
                int64_t ws = w0 < 0 ? 0 : w0, we = w1 < W ? w1 : W;
                size_t o = (size_t)(oh * OW + ow);
                if (is_max) {
                    float m = -INFINITY;
                    int64_t arg = hs < he && ws < we ? hs * W + ws : 0;
                    for (int64_t h = hs; h < he; h++)
                        for (int64_t w = ws; w < we; w++) { /* selects, not branches */
                            float v = xp[h * W + w];
                            bool gt = v > m;
                            m = gt ? v : m;
                            arg = gt ? h * W + w : arg;
                        }
                    yp[o] = m;
                    if (ip)
                        ip[o] = (int64_t)(p * j->plane) + arg;
                    continue;
                }
                float sum = 0;
                for (int64_t h = hs; h < he; h++)
                    for (int64_t w = ws; w < we; w++)
                        sum += xp[h * W + w];
                int64_t pw = (w1 < W + g->pe[1] ? w1 : W + g->pe[1]) -
                             (w0 > -g->pb[1] ? w0 : -g->pb[1]);
                int64_t n = (he > hs ? he - hs : 0) * (we > ws ? we - ws : 0);
                int64_t div = j->include_pad ? (ph > 0 && pw > 0 ? ph * pw : 0) : n;
                yp[o] = div ? sum / (float)div : NAN;
            }
        }
    }
}

static int pool(cpu_run *r, bb_value *const *in, bb_value **out, uint32_t n_out, bool is_max)
{
    const bb_tensor_view *x = cpu_tv(in[0]);
    int32_t dt = x->dtype;
    if (!cpu_dtype_is_float(dt) && !(is_max && (dt == BB_DT_INT8 || dt == BB_DT_UINT8)))
        return cpu_fail_dtype(r, dt);
    if (x->ndim < 3)
        return cpu_fail(r, BB_EINVAL, "X must have rank >= 3 (N, C, spatial...), got rank %u",
                        x->ndim);
    const int64_t *ks;
    size_t kn;
    if (!cpu_attr_ints(r->node, "kernel_shape", &ks, &kn))
        return cpu_fail(r, BB_EINVAL, "attribute kernel_shape is required");
    if (kn != x->ndim - 2)
        return cpu_fail(r, BB_EINVAL, "kernel_shape has %zu entries for %u spatial dims", kn,
                        x->ndim - 2);
    cpu_geom g;
    int rc = cpu_geom_init(r, x, ks, true, &g);
    if (rc)
        return rc;
    size_t K = cpu_numel(g.ns, g.k);
    if (K > MAX_WINDOW)
        return cpu_fail(r, BB_ELIMIT, "window of %zu elements exceeds %zu", K, MAX_WINDOW);
    int64_t od[BB_MAX_DIMS];
    od[0] = x->dims[0];
    od[1] = x->dims[1];
    memcpy(od + 2, g.out, g.ns * sizeof *od);
    if ((rc = cpu_alloc_uninit(r, dt, x->ndim, od, &out[0])))
        return rc;
    pool_job j = {&g, cpu_numel(2, x->dims), cpu_numel(g.ns, g.in), cpu_numel(g.ns, g.out),
                  x->data, cpu_tv(out[0])->data, NULL, false, false};
    if (is_max && n_out > 1) {
        if ((rc = cpu_alloc_uninit(r, BB_DT_INT64, x->ndim, od, &out[1])))
            return rc;
        j.ind = (int64_t *)(void *)cpu_tv(out[1])->data;
        j.colmajor = cpu_attr_i(r->node, "storage_order", 0) != 0;
    }
    j.include_pad = cpu_attr_i(r->node, "count_include_pad", 0) != 0;
    if (!j.planes || !j.O)
        return BB_OK;
    if (pool2d_fast_fits(&j, dt)) {
        pool2d_fast(&j, is_max);
        return BB_OK;
    }
    size_t *offs = cpu_scratch(r, K * sizeof *offs);
    if (!offs)
        return BB_ENOMEM;
    int64_t oc[CPU_MAX_SPATIAL] = {0};
    for (size_t o = 0; o < j.O; o++) {
        size_t padded, n = cpu_pool_window(&g, oc, offs, &padded);
        if (is_max) {
            switch (dt) {
            case BB_DT_FLOAT: maxpool_float(&j, offs, n, o); break;
            case BB_DT_DOUBLE: maxpool_double(&j, offs, n, o); break;
            case BB_DT_INT8: maxpool_int8_t(&j, offs, n, o); break;
            default: maxpool_uint8_t(&j, offs, n, o); break;
            }
        } else if (dt == BB_DT_FLOAT) {
            avgpool_float(&j, offs, n, o, padded);
        } else {
            avgpool_double(&j, offs, n, o, padded);
        }
        for (int32_t d = (int32_t)g.ns - 1; d >= 0; d--) {
            if (++oc[d] < g.out[d])
                break;
            oc[d] = 0;
        }
    }
    return BB_OK;
}

int cpu_k_MaxPool(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out,
                  uint32_t n_out)
{
    (void)n_in;
    return pool(r, in, out, n_out, true);
}

int cpu_k_AveragePool(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out,
                      uint32_t n_out)
{
    (void)n_in;
    return pool(r, in, out, n_out, false);
}

int cpu_k_GlobalAveragePool(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out,
                            uint32_t n_out)
{
    (void)n_in;
    (void)n_out;
    const bb_tensor_view *x = cpu_tv(in[0]);
    if (!cpu_dtype_is_float(x->dtype))
        return cpu_fail_dtype(r, x->dtype);
    if (x->ndim < 2)
        return cpu_fail(r, BB_EINVAL, "X must have rank >= 2 (N, C, ...), got rank %u",
                        x->ndim);
    int64_t od[BB_MAX_DIMS];
    for (uint32_t d = 0; d < x->ndim; d++)
        od[d] = d < 2 ? x->dims[d] : 1;
    int rc = cpu_alloc_uninit(r, x->dtype, x->ndim, od, out);
    if (rc)
        return rc;
    size_t planes = cpu_numel(2, x->dims), n = cpu_numel(x->ndim - 2, x->dims + 2);
    for (size_t p = 0; p < planes; p++) {
        if (x->dtype == BB_DT_FLOAT) {
            const float *xp = (const float *)(const void *)x->data + p * n;
            float s = 0;
            for (size_t i = 0; i < n; i++)
                s += xp[i];
            ((float *)(void *)cpu_tv(*out)->data)[p] = n ? s / (float)n : NAN;
        } else {
            const double *xp = (const double *)(const void *)x->data + p * n;
            double s = 0;
            for (size_t i = 0; i < n; i++)
                s += xp[i];
            ((double *)(void *)cpu_tv(*out)->data)[p] = n ? s / (double)n : NAN;
        }
    }
    return BB_OK;
}
