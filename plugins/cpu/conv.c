/*
 * conv.c — Conv over 1..6 spatial dims (pads, strides, dilations, group,
 * auto_pad) by im2col + GEMM, and the window geometry it shares with the
 * pools (pool.c).
 *
 * For each image and group, the input patch matrix col [C/g * K, O]
 * (K = kernel elements, O = output positions) is built in the instance
 * scratch buffer, then Y_g [M/g, O] = W_g [M/g, C/g * K] x col is one BLAS
 * gemm. A 1x1 kernel with unit stride and no padding needs no col: X is
 * already that matrix.
 */
#include <string.h>

#include "cpu_internal.h"

int cpu_geom_init(cpu_run *r, const bb_tensor_view *x, const int64_t *kernel, bool allow_ceil,
                  cpu_geom *g)
{
    memset(g, 0, sizeof *g);
    uint32_t ns = x->ndim - 2;
    g->ns = ns;
    const int64_t *v;
    size_t n;
    for (uint32_t i = 0; i < ns; i++) {
        g->in[i] = x->dims[2 + i];
        g->k[i] = kernel[i];
        g->s[i] = 1;
        g->d[i] = 1;
        if (kernel[i] < 1)
            return cpu_fail(r, BB_EINVAL, "kernel size %lld on spatial axis %u must be >= 1",
                            (long long)kernel[i], i);
    }
    if (cpu_attr_ints(r->node, "strides", &v, &n)) {
        if (n != ns)
            return cpu_fail(r, BB_EINVAL, "strides has %zu entries for %u spatial dims", n, ns);
        for (uint32_t i = 0; i < ns; i++) {
            if (v[i] < 1)
                return cpu_fail(r, BB_EINVAL, "stride %lld must be >= 1", (long long)v[i]);
            g->s[i] = v[i];
        }
    }
    if (cpu_attr_ints(r->node, "dilations", &v, &n)) {
        if (n != ns)
            return cpu_fail(r, BB_EINVAL, "dilations has %zu entries for %u spatial dims", n,
                            ns);
        for (uint32_t i = 0; i < ns; i++) {
            if (v[i] < 1)
                return cpu_fail(r, BB_EINVAL, "dilation %lld must be >= 1", (long long)v[i]);
            g->d[i] = v[i];
        }
    }
    bool ceil_mode = allow_ceil && cpu_attr_i(r->node, "ceil_mode", 0) != 0;
    size_t plen;
    const uint8_t *ap = cpu_attr_s(r->node, "auto_pad", &plen);
    enum { NOTSET, SAME_UPPER, SAME_LOWER, VALID } mode = NOTSET;
    if (ap && !cpu_attr_s_is(r->node, "auto_pad", "NOTSET")) {
        if (cpu_attr_s_is(r->node, "auto_pad", "SAME_UPPER"))
            mode = SAME_UPPER;
        else if (cpu_attr_s_is(r->node, "auto_pad", "SAME_LOWER"))
            mode = SAME_LOWER;
        else if (cpu_attr_s_is(r->node, "auto_pad", "VALID"))
            mode = VALID;
        else
            return cpu_fail(r, BB_EINVAL, "auto_pad \"%.*s\" is not NOTSET, SAME_UPPER, "
                            "SAME_LOWER or VALID", (int)(plen > 32 ? 32 : plen),
                            (const char *)ap);
    }
    if (mode == NOTSET && cpu_attr_ints(r->node, "pads", &v, &n)) {
        if (n != 2 * ns)
            return cpu_fail(r, BB_EINVAL, "pads has %zu entries for %u spatial dims", n, ns);
        for (uint32_t i = 0; i < ns; i++) {
            if (v[i] < 0 || v[ns + i] < 0)
                return cpu_fail(r, BB_EINVAL, "negative pads not supported");
            g->pb[i] = v[i];
            g->pe[i] = v[ns + i];
        }
    }
    for (uint32_t i = 0; i < ns; i++) {
        if (g->k[i] > INT64_MAX / 2 / g->d[i] || g->in[i] > INT64_MAX / 4 ||
            g->pb[i] > INT64_MAX / 4 || g->pe[i] > INT64_MAX / 4)
            return cpu_fail(r, BB_ELIMIT, "window geometry too large on spatial axis %u", i);
        int64_t dk = (g->k[i] - 1) * g->d[i] + 1, in = g->in[i], s = g->s[i];
        if (mode == SAME_UPPER || mode == SAME_LOWER) {
            int64_t o = (in + s - 1) / s;
            int64_t total = (o - 1) * s + dk - in;
            if (total < 0)
                total = 0;
            g->pb[i] = mode == SAME_UPPER ? total / 2 : total - total / 2;
            g->pe[i] = total - g->pb[i];
            g->out[i] = o;
            continue;
        }
        int64_t span = in + g->pb[i] + g->pe[i] - dk;
        if (span < 0)
            return cpu_fail(r, BB_EINVAL, "spatial axis %u: input %lld (padded %lld) is smaller "
                            "than the dilated kernel %lld", i, (long long)in,
                            (long long)(in + g->pb[i] + g->pe[i]), (long long)dk);
        int64_t o = ceil_mode ? (span + s - 1) / s + 1 : span / s + 1;
        /* A last window that starts in the end padding is dropped. */
        if (ceil_mode && (o - 1) * s >= in + g->pb[i])
            o--;
        g->out[i] = o;
    }
    return BB_OK;
}

/* Build col [C * K, O] for one image (C channels starting at x). */
#define IM2COL(T)                                                                        \
    static void im2col_##T(const cpu_geom *g, const T *x, size_t C, T *col)              \
    {                                                                                    \
        uint32_t ns = g->ns, last = ns - 1;                                              \
        size_t K = cpu_numel(ns, g->k), O = cpu_numel(ns, g->out);                       \
        size_t plane = cpu_numel(ns, g->in), on = (size_t)g->out[last];                  \
        size_t outer_o = O / (on ? on : 1);                                              \
        int64_t kk[CPU_MAX_SPATIAL], oc[CPU_MAX_SPATIAL];                                \
        for (size_t c = 0; c < C; c++) {                                                 \
            const T *xc = x + c * plane;                                                 \
            for (size_t kidx = 0; kidx < K; kidx++) {                                    \
                size_t rem = kidx;                                                       \
                for (int32_t d = (int32_t)last; d >= 0; d--) {                           \
                    kk[d] = (int64_t)(rem % (size_t)g->k[d]);                            \
                    rem /= (size_t)g->k[d];                                              \
                }                                                                        \
                T *row = col + (c * K + kidx) * O;                                       \
                int64_t s = g->s[last], koff = kk[last] * g->d[last] - g->pb[last];      \
                int64_t in = g->in[last];                                                \
                /* output columns whose input coordinate lies in [0, in) */              \
                int64_t lo = koff >= 0 ? 0 : (-koff + s - 1) / s;                        \
                int64_t hi = in - koff <= 0 ? 0 : (in - koff - 1) / s + 1;               \
                if (hi > (int64_t)on)                                                    \
                    hi = (int64_t)on;                                                    \
                if (lo > hi)                                                             \
                    lo = hi;                                                             \
                memset(oc, 0, sizeof oc);                                                \
                for (size_t q = 0; q < outer_o; q++, row += on) {                        \
                    size_t off = 0;                                                      \
                    bool valid = true;                                                   \
                    for (uint32_t d = 0; d < last; d++) {                                \
                        int64_t ic = oc[d] * g->s[d] + kk[d] * g->d[d] - g->pb[d];       \
                        valid = valid && ic >= 0 && ic < g->in[d];                       \
                        off = off * (size_t)g->in[d] + (size_t)(valid ? ic : 0);         \
                    }                                                                    \
                    off *= (size_t)in;                                                   \
                    if (!valid) {                                                        \
                        memset(row, 0, on * sizeof(T));                                  \
                    } else {                                                             \
                        for (int64_t o = 0; o < lo; o++)                                 \
                            row[o] = 0;                                                  \
                        const T *xs = xc + off;                                          \
                        if (s == 1 && hi > lo)                                           \
                            memcpy(row + lo, xs + (koff + lo),                           \
                                   (size_t)(hi - lo) * sizeof(T));                       \
                        else                                                             \
                            for (int64_t o = lo; o < hi; o++)                            \
                                row[o] = xs[koff + o * s];                               \
                        for (int64_t o = hi; o < (int64_t)on; o++)                       \
                            row[o] = 0;                                                  \
                    }                                                                    \
                    for (int32_t d = (int32_t)last - 1; d >= 0; d--) {                   \
                        if (++oc[d] < g->out[d])                                         \
                            break;                                                       \
                        oc[d] = 0;                                                       \
                    }                                                                    \
                }                                                                        \
            }                                                                            \
        }                                                                                \
    }
IM2COL(float)
IM2COL(double)

void cpu_im2col_f32(const cpu_geom *g, const float *x, size_t C, float *col)
{
    im2col_float(g, x, C, col);
}

/* The adjoint of im2col: x[c, position] += every col entry that im2col
 * read from it (zeros of the padding go nowhere). */
void cpu_col2im_add_f32(const cpu_geom *g, const float *col, size_t C, float *x)
{
    uint32_t ns = g->ns, last = ns - 1;
    size_t K = cpu_numel(ns, g->k), O = cpu_numel(ns, g->out);
    size_t plane = cpu_numel(ns, g->in), on = (size_t)g->out[last];
    size_t outer_o = O / (on ? on : 1);
    int64_t kk[CPU_MAX_SPATIAL], oc[CPU_MAX_SPATIAL];
    for (size_t c = 0; c < C; c++) {
        float *xc = x + c * plane;
        for (size_t kidx = 0; kidx < K; kidx++) {
            size_t rem = kidx;
            for (int32_t d = (int32_t)last; d >= 0; d--) {
                kk[d] = (int64_t)(rem % (size_t)g->k[d]);
                rem /= (size_t)g->k[d];
            }
            const float *row = col + (c * K + kidx) * O;
            int64_t s = g->s[last], koff = kk[last] * g->d[last] - g->pb[last];
            int64_t in = g->in[last];
            int64_t lo = koff >= 0 ? 0 : (-koff + s - 1) / s;
            int64_t hi = in - koff <= 0 ? 0 : (in - koff - 1) / s + 1;
            if (hi > (int64_t)on)
                hi = (int64_t)on;
            memset(oc, 0, sizeof oc);
            for (size_t q = 0; q < outer_o; q++, row += on) {
                size_t off = 0;
                bool valid = true;
                for (uint32_t d = 0; d < last; d++) {
                    int64_t ic = oc[d] * g->s[d] + kk[d] * g->d[d] - g->pb[d];
                    valid = valid && ic >= 0 && ic < g->in[d];
                    off = off * (size_t)g->in[d] + (size_t)(valid ? ic : 0);
                }
                off *= (size_t)in;
                if (valid) {
                    float *xs = xc + off + koff;
                    if (s == 1)
                        for (int64_t o = lo; o < hi; o++)
                            xs[o] += row[o];
                    else
                        for (int64_t o = lo; o < hi; o++)
                            xs[o * s] += row[o];
                }
                for (int32_t d = (int32_t)last - 1; d >= 0; d--) {
                    if (++oc[d] < g->out[d])
                        break;
                    oc[d] = 0;
                }
            }
        }
    }
}

int cpu_k_Conv(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out, uint32_t n_out)
{
    (void)n_out;
    const bb_tensor_view *x = cpu_tv(in[0]), *w = cpu_tv(in[1]);
    const bb_tensor_view *b = n_in > 2 && in[2] ? cpu_tv(in[2]) : NULL;
    if (!cpu_dtype_is_float(x->dtype))
        return cpu_fail_dtype(r, x->dtype);
    if (w->dtype != x->dtype || (b && b->dtype != x->dtype))
        return cpu_fail(r, BB_ETYPE, "W and B must have X's dtype %s", cpu_dtype_name(x->dtype));
    char s1[128], s2[128];
    if (x->ndim < 3 || w->ndim != x->ndim)
        return cpu_fail(r, BB_EINVAL, "X %s and W %s must have the same rank >= 3",
                        cpu_shape_str(x->ndim, x->dims, s1, sizeof s1),
                        cpu_shape_str(w->ndim, w->dims, s2, sizeof s2));
    int64_t group = cpu_attr_i(r->node, "group", 1);
    int64_t N = x->dims[0], C = x->dims[1], M = w->dims[0];
    if (group < 1 || C % group || M % group || w->dims[1] * group != C)
        return cpu_fail(r, BB_EINVAL, "group %lld does not fit X channels %lld and W %s",
                        (long long)group, (long long)C,
                        cpu_shape_str(w->ndim, w->dims, s2, sizeof s2));
    if (b && (b->ndim != 1 || b->dims[0] != M))
        return cpu_fail(r, BB_EINVAL, "B must have shape [%lld]", (long long)M);
    const int64_t *ks;
    size_t kn;
    if (cpu_attr_ints(r->node, "kernel_shape", &ks, &kn)) {
        if (kn != x->ndim - 2 || memcmp(ks, w->dims + 2, kn * sizeof *ks))
            return cpu_fail(r, BB_EINVAL, "kernel_shape does not match W %s",
                            cpu_shape_str(w->ndim, w->dims, s2, sizeof s2));
    }
    cpu_geom g;
    int rc = cpu_geom_init(r, x, w->dims + 2, false, &g);
    if (rc)
        return rc;
    int64_t od[BB_MAX_DIMS];
    od[0] = N;
    od[1] = M;
    memcpy(od + 2, g.out, g.ns * sizeof *od);
    if ((rc = cpu_alloc_uninit(r, x->dtype, x->ndim, od, out)))
        return rc;
    size_t es = bb_tensor_elem_size(x->dtype);
    size_t Cg = (size_t)(C / group), Mg = (size_t)(M / group), K = cpu_numel(g.ns, g.k);
    size_t O = cpu_numel(g.ns, g.out), plane = cpu_numel(g.ns, g.in);
    if (Cg * K > (size_t)INT32_MAX || O > (size_t)INT32_MAX || Mg > (size_t)INT32_MAX)
        return cpu_fail(r, BB_ELIMIT, "convolution too large for BLAS");
    uint8_t *y = cpu_tv(*out)->data;
    if (cpu_numel(x->ndim, od) == 0)
        return BB_OK;
    bool direct = true; /* 1x1, stride 1, no padding: X is the col matrix */
    for (uint32_t i = 0; i < g.ns; i++)
        direct = direct && g.k[i] == 1 && g.s[i] == 1 && g.pb[i] == 0 && g.pe[i] == 0;
    uint8_t *col = NULL;
    if (!direct && Cg * K * O != 0) {
        if (Cg * K > SIZE_MAX / es / O)
            return cpu_fail(r, BB_ELIMIT, "im2col buffer too large");
        if (!(col = cpu_scratch(r, Cg * K * O * es)))
            return BB_ENOMEM;
    }
    for (size_t n = 0; n < (size_t)N; n++) {
        for (size_t gi = 0; gi < (size_t)group; gi++) {
            const uint8_t *xg = x->data + ((n * (size_t)C) + gi * Cg) * plane * es;
            const uint8_t *src = xg;
            if (!direct && Cg * K * O != 0) {
                if (x->dtype == BB_DT_FLOAT)
                    im2col_float(&g, (const float *)(const void *)xg, Cg, (float *)(void *)col);
                else
                    im2col_double(&g, (const double *)(const void *)xg, Cg, (double *)(void *)col);
                src = col;
            }
            const uint8_t *wg = w->data + gi * Mg * Cg * K * es;
            uint8_t *yg = y + (n * (size_t)M + gi * Mg) * O * es;
            cpu_gemm(x->dtype, false, false, Mg, Cg * K, O, 1.0f, wg, src, 0.0f, yg);
        }
        if (b) {
            for (size_t m = 0; m < (size_t)M; m++) {
                if (x->dtype == BB_DT_FLOAT) {
                    float *yo = (float *)(void *)y + (n * (size_t)M + m) * O;
                    float bv = ((const float *)(const void *)b->data)[m];
                    for (size_t i = 0; i < O; i++)
                        yo[i] += bv;
                } else {
                    double *yo = (double *)(void *)y + (n * (size_t)M + m) * O;
                    double bv = ((const double *)(const void *)b->data)[m];
                    for (size_t i = 0; i < O; i++)
                        yo[i] += bv;
                }
            }
        }
    }
    return BB_OK;
}
