/*
 * shape.c — the structural ops: Reshape (0 / -1, allowzero), Flatten, Transpose
 * (perm), Concat, Split (split input, num_outputs, equal split), Slice
 * (starts/ends/axes/steps with ONNX clamping), Squeeze/Unsqueeze (axes
 * input or attribute), Identity and Cast.
 *
 * Values are immutable, so every op that keeps the bytes in order
 * (Reshape, Squeeze, Unsqueeze, Identity, a Split along the outermost
 * non-trivial axis) returns a view sharing the input's buffer: no copy.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

/* ---- Identity / Reshape / Squeeze / Unsqueeze -------------------------------- */

int cpu_k_Identity(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out,
                   uint32_t n_out)
{
    (void)r;
    (void)n_in;
    (void)n_out;
    *out = bb_value_ref(in[0]);
    return BB_OK;
}

int cpu_k_Reshape(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out,
                  uint32_t n_out)
{
    (void)n_in;
    (void)n_out;
    const bb_tensor_view *t = cpu_tv(in[0]);
    int64_t shape[BB_MAX_DIMS];
    size_t n;
    int rc = cpu_read_ints(r, in[1], "shape", shape, BB_MAX_DIMS, &n);
    if (rc)
        return rc;
    bool allowzero = cpu_attr_i(r->node, "allowzero", 0) != 0;
    int infer = -1;
    size_t known = 1, total = cpu_numel(t->ndim, t->dims);
    char s1[128], s2[128];
    for (size_t i = 0; i < n; i++) {
        if (shape[i] == -1) {
            if (infer >= 0)
                return cpu_fail(r, BB_EINVAL, "shape has more than one -1");
            infer = (int)i;
            continue;
        }
        if (shape[i] == 0 && !allowzero) {
            if (i >= t->ndim)
                return cpu_fail(r, BB_EINVAL, "shape[%zu] = 0 copies a dimension the input "
                                "of rank %u does not have", i, t->ndim);
            shape[i] = t->dims[i];
        }
        if (shape[i] < 0)
            return cpu_fail(r, BB_EINVAL, "invalid shape value %lld", (long long)shape[i]);
        if (shape[i] && known > SIZE_MAX / (size_t)shape[i])
            return cpu_fail(r, BB_EINVAL, "shape too large");
        known *= (size_t)shape[i];
    }
    if (infer >= 0) {
        if (known == 0 || total % known)
            return cpu_fail(r, BB_EINVAL, "cannot infer -1: %zu elements into %s", total,
                            cpu_shape_str((uint32_t)n, shape, s1, sizeof s1));
        shape[infer] = (int64_t)(total / known);
        known = total;
    }
    if (known != total)
        return cpu_fail(r, BB_EINVAL, "cannot reshape %s (%zu elements) to %s",
                        cpu_shape_str(t->ndim, t->dims, s1, sizeof s1), total,
                        cpu_shape_str((uint32_t)n, shape, s2, sizeof s2));
    return cpu_view(r, in[0], (uint32_t)n, shape, out);
}

int cpu_k_Flatten(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out,
                  uint32_t n_out)
{
    (void)n_in;
    (void)n_out;
    const bb_tensor_view *t = cpu_tv(in[0]);
    int64_t axis = cpu_attr_i(r->node, "axis", 1), nd = (int64_t)t->ndim;
    if (axis < -nd || axis > nd)
        return cpu_fail(r, BB_EINVAL, "axis %lld out of range [-%lld, %lld]", (long long)axis,
                        (long long)nd, (long long)nd);
    if (axis < 0)
        axis += nd;
    int64_t od[2] = {(int64_t)cpu_numel((uint32_t)axis, t->dims),
                     (int64_t)cpu_numel((uint32_t)(nd - axis), t->dims + axis)};
    return cpu_view(r, in[0], 2, od, out);
}

/* Axes from the optional second input or the "axes" attribute. *given is
 * false when neither is present. */
static int read_axes(cpu_run *r, bb_value *const *in, uint32_t n_in, int64_t *axes, size_t *n,
                     bool *given)
{
    *n = 0;
    *given = false;
    if (n_in > 1 && in[1]) {
        *given = true;
        return cpu_read_ints(r, in[1], "axes", axes, BB_MAX_DIMS, n);
    }
    const int64_t *v;
    size_t cnt;
    if (cpu_attr_ints(r->node, "axes", &v, &cnt)) {
        if (cnt > BB_MAX_DIMS)
            return cpu_fail(r, BB_ELIMIT, "%zu axes, more than %d", cnt, BB_MAX_DIMS);
        memcpy(axes, v, cnt * sizeof *v);
        *n = cnt;
        *given = true;
    }
    return BB_OK;
}

int cpu_k_Squeeze(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out,
                  uint32_t n_out)
{
    (void)n_out;
    const bb_tensor_view *t = cpu_tv(in[0]);
    int64_t axes[BB_MAX_DIMS];
    size_t n;
    bool given;
    int rc = read_axes(r, in, n_in, axes, &n, &given);
    if (rc)
        return rc;
    bool drop[BB_MAX_DIMS] = {false};
    if (!given || n == 0) {
        for (uint32_t i = 0; i < t->ndim; i++)
            drop[i] = t->dims[i] == 1;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t a;
        if ((rc = cpu_axis(r, axes[i], t->ndim, "axis", &a)))
            return rc;
        if (drop[a])
            return cpu_fail(r, BB_EINVAL, "axis %lld repeated", (long long)axes[i]);
        if (t->dims[a] != 1)
            return cpu_fail(r, BB_EINVAL, "cannot squeeze axis %lld of size %lld",
                            (long long)axes[i], (long long)t->dims[a]);
        drop[a] = true;
    }
    int64_t od[BB_MAX_DIMS];
    uint32_t on = 0;
    for (uint32_t i = 0; i < t->ndim; i++)
        if (!drop[i])
            od[on++] = t->dims[i];
    return cpu_view(r, in[0], on, od, out);
}

int cpu_k_Unsqueeze(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out,
                    uint32_t n_out)
{
    (void)n_out;
    const bb_tensor_view *t = cpu_tv(in[0]);
    int64_t axes[BB_MAX_DIMS];
    size_t n;
    bool given;
    int rc = read_axes(r, in, n_in, axes, &n, &given);
    if (rc)
        return rc;
    if (!given)
        return cpu_fail(r, BB_EINVAL, "axes are required");
    uint32_t on = t->ndim + (uint32_t)n;
    if (on > BB_MAX_DIMS)
        return cpu_fail(r, BB_ELIMIT, "result rank %u exceeds %d", on, BB_MAX_DIMS);
    bool ins[BB_MAX_DIMS] = {false};
    for (size_t i = 0; i < n; i++) {
        uint32_t a;
        if ((rc = cpu_axis(r, axes[i], on, "axis", &a)))
            return rc;
        if (ins[a])
            return cpu_fail(r, BB_EINVAL, "axis %lld repeated", (long long)axes[i]);
        ins[a] = true;
    }
    int64_t od[BB_MAX_DIMS];
    for (uint32_t i = 0, j = 0; i < on; i++)
        od[i] = ins[i] ? 1 : t->dims[j++];
    return cpu_view(r, in[0], on, od, out);
}

/* ---- strided copies (Transpose, Slice) ------------------------------------ */

/* Copy an nd-dim block: output is dense in dims order; the source element
 * for index (i0..) is src + sum(i_d * sst[d]) elements (strides may be
 * negative). */
static void strided_copy(uint8_t *dst, const uint8_t *src, size_t es, uint32_t nd,
                         const int64_t *dims, const ptrdiff_t *sst)
{
    size_t total = cpu_numel(nd, dims);
    if (total == 0)
        return;
    if (nd == 0) {
        memcpy(dst, src, es);
        return;
    }
    uint32_t last = nd - 1;
    size_t n = (size_t)dims[last];
    ptrdiff_t is = sst[last];
    int64_t idx[BB_MAX_DIMS] = {0};
    ptrdiff_t off = 0;
    for (;;) {
        const uint8_t *s = src + off * (ptrdiff_t)es;
        if (is == 1) {
            memcpy(dst, s, n * es);
        } else {
            switch (es) {
#define SCOPY(T)                                                            \
    {                                                                       \
        T *d_ = (T *)(void *)dst;                                           \
        const T *s_ = (const T *)(const void *)s;                           \
        for (size_t i = 0; i < n; i++)                                      \
            d_[i] = s_[(ptrdiff_t)i * is];                                  \
        break;                                                              \
    }
            case 1: SCOPY(uint8_t)
            case 2: SCOPY(uint16_t)
            case 4: SCOPY(uint32_t)
            default: SCOPY(uint64_t)
#undef SCOPY
            }
        }
        dst += n * es;
        int32_t d = (int32_t)last - 1;
        for (; d >= 0; d--) {
            if (++idx[d] < dims[d]) {
                off += sst[d];
                break;
            }
            idx[d] = 0;
            off -= sst[d] * (ptrdiff_t)(dims[d] - 1);
        }
        if (d < 0)
            return;
    }
}

/* 2-D tiled transpose of one [rows, cols] plane: dst[i][j] = src[j][i]. */
#define TILE 32
#define TRANSPOSE2D(T)                                                                  \
    do {                                                                                \
        T *d_ = (T *)(void *)dst;                                                       \
        const T *s_ = (const T *)(const void *)src;                                     \
        for (size_t i0 = 0; i0 < rows; i0 += TILE)                                      \
            for (size_t j0 = 0; j0 < cols; j0 += TILE) {                                \
                size_t i1 = i0 + TILE < rows ? i0 + TILE : rows;                        \
                size_t j1 = j0 + TILE < cols ? j0 + TILE : cols;                        \
                for (size_t i = i0; i < i1; i++)                                        \
                    for (size_t j = j0; j < j1; j++)                                    \
                        d_[i * cols + j] = s_[j * rows + i];                            \
            }                                                                           \
    } while (0)

static void transpose2d(uint8_t *dst, const uint8_t *src, size_t es, size_t rows, size_t cols)
{
    switch (es) {
    case 1: TRANSPOSE2D(uint8_t); break;
    case 2: TRANSPOSE2D(uint16_t); break;
    case 4: TRANSPOSE2D(uint32_t); break;
    default: TRANSPOSE2D(uint64_t); break;
    }
}

int cpu_k_Transpose(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out,
                    uint32_t n_out)
{
    (void)n_in;
    (void)n_out;
    const bb_tensor_view *t = cpu_tv(in[0]);
    uint32_t nd = t->ndim;
    size_t es = bb_tensor_elem_size(t->dtype);
    if (!es)
        return cpu_fail_dtype(r, t->dtype);
    int64_t perm[BB_MAX_DIMS];
    const int64_t *pv;
    size_t pn;
    if (cpu_attr_ints(r->node, "perm", &pv, &pn)) {
        if (pn != nd)
            return cpu_fail(r, BB_EINVAL, "perm has %zu entries for rank %u", pn, nd);
        bool seen[BB_MAX_DIMS] = {false};
        for (size_t i = 0; i < pn; i++) {
            int64_t p = pv[i] < 0 ? pv[i] + nd : pv[i];
            if (p < 0 || p >= (int64_t)nd || seen[p])
                return cpu_fail(r, BB_EINVAL, "perm is not a permutation of 0..%u", nd - 1);
            seen[p] = true;
            perm[i] = p;
        }
    } else {
        for (uint32_t i = 0; i < nd; i++)
            perm[i] = nd - 1 - i;
    }
    int64_t od[BB_MAX_DIMS];
    ptrdiff_t ist[BB_MAX_DIMS] = {0}, st[BB_MAX_DIMS] = {0};
    ptrdiff_t s = 1;
    for (int32_t d = (int32_t)nd - 1; d >= 0; d--) {
        ist[d] = s;
        s *= (ptrdiff_t)t->dims[d];
    }
    for (uint32_t i = 0; i < nd; i++) {
        od[i] = t->dims[perm[i]];
        st[i] = ist[perm[i]];
    }
    int rc = cpu_alloc_uninit(r, t->dtype, nd, od, out);
    if (rc)
        return rc;
    /* Collapse: drop size-1 dims, merge axes that stay adjacent. */
    int64_t cd[BB_MAX_DIMS];
    ptrdiff_t cs[BB_MAX_DIMS];
    uint32_t cn = 0;
    for (uint32_t i = 0; i < nd; i++) {
        if (od[i] == 1)
            continue;
        if (cn && cs[cn - 1] == st[i] * (ptrdiff_t)od[i]) {
            cd[cn - 1] *= od[i];
            cs[cn - 1] = st[i];
            continue;
        }
        cd[cn] = od[i];
        cs[cn] = st[i];
        cn++;
    }
    uint8_t *dst = cpu_tv(*out)->data;
    /* A plain 2-D transpose of each plane: tile it for the cache. */
    if (cn >= 2 && cs[cn - 1] == cd[cn - 2] && cs[cn - 2] == 1) {
        size_t rows = (size_t)cd[cn - 2], cols = (size_t)cd[cn - 1], plane = rows * cols;
        size_t planes = cpu_numel(cn - 2, cd);
        if (cn == 2 || planes == 1) {
            transpose2d(dst, t->data, es, rows, cols);
            return BB_OK;
        }
        /* planes of outer dims: enumerate their source offsets */
        int64_t idx[BB_MAX_DIMS] = {0};
        ptrdiff_t off = 0;
        for (size_t p = 0; p < planes; p++) {
            transpose2d(dst + p * plane * es, t->data + off * (ptrdiff_t)es, es, rows, cols);
            for (int32_t d = (int32_t)cn - 3; d >= 0; d--) {
                if (++idx[d] < cd[d]) {
                    off += cs[d];
                    break;
                }
                idx[d] = 0;
                off -= cs[d] * (ptrdiff_t)(cd[d] - 1);
            }
        }
        return BB_OK;
    }
    strided_copy(dst, t->data, es, cn, cd, cs);
    return BB_OK;
}

int cpu_slice_geom(cpu_run *r, bb_value *const *in, uint32_t n_in, int64_t *st, int64_t *step,
                   int64_t *od)
{
    const bb_tensor_view *t = cpu_tv(in[0]);
    uint32_t nd = t->ndim;
    int64_t starts[BB_MAX_DIMS], ends[BB_MAX_DIMS], axes[BB_MAX_DIMS], steps[BB_MAX_DIMS];
    size_t ns, ne, na, nst;
    int rc;
    if ((rc = cpu_read_ints(r, in[1], "starts", starts, BB_MAX_DIMS, &ns)) ||
        (rc = cpu_read_ints(r, in[2], "ends", ends, BB_MAX_DIMS, &ne)))
        return rc;
    if (ns != ne)
        return cpu_fail(r, BB_EINVAL, "starts has %zu entries, ends %zu", ns, ne);
    if (n_in > 3 && in[3]) {
        if ((rc = cpu_read_ints(r, in[3], "axes", axes, BB_MAX_DIMS, &na)))
            return rc;
        if (na != ns)
            return cpu_fail(r, BB_EINVAL, "axes has %zu entries, starts %zu", na, ns);
    } else {
        if (ns > nd)
            return cpu_fail(r, BB_EINVAL, "%zu starts for rank %u", ns, nd);
        for (size_t i = 0; i < ns; i++)
            axes[i] = (int64_t)i;
    }
    if (n_in > 4 && in[4]) {
        if ((rc = cpu_read_ints(r, in[4], "steps", steps, BB_MAX_DIMS, &nst)))
            return rc;
        if (nst != ns)
            return cpu_fail(r, BB_EINVAL, "steps has %zu entries, starts %zu", nst, ns);
    } else {
        for (size_t i = 0; i < ns; i++)
            steps[i] = 1;
    }
    bool seen[BB_MAX_DIMS] = {false};
    for (uint32_t d = 0; d < nd; d++) {
        st[d] = 0;
        step[d] = 1;
        od[d] = t->dims[d];
    }
    for (size_t i = 0; i < ns; i++) {
        uint32_t a;
        if ((rc = cpu_axis(r, axes[i], nd, "axis", &a)))
            return rc;
        if (seen[a])
            return cpu_fail(r, BB_EINVAL, "axis %lld repeated", (long long)axes[i]);
        seen[a] = true;
        int64_t dim = t->dims[a], s = starts[i], e = ends[i], k = steps[i];
        if (k == 0)
            return cpu_fail(r, BB_EINVAL, "step 0 on axis %u", a);
        if (s < 0)
            s += dim;
        if (e < 0)
            e += dim;
        int64_t len;
        if (k > 0) {
            s = s < 0 ? 0 : s > dim ? dim : s;
            e = e < 0 ? 0 : e > dim ? dim : e;
            len = e > s ? (e - s - 1) / k + 1 : 0;
        } else {
            s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
            e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
            len = s > e ? (s - e - 1) / (k == INT64_MIN ? INT64_MAX : -k) + 1 : 0;
        }
        st[a] = s;
        step[a] = k;
        od[a] = len;
    }
    return BB_OK;
}

ptrdiff_t cpu_slice_strides(const bb_tensor_view *t, const int64_t *st, const int64_t *step,
                            const int64_t *od, ptrdiff_t *sst)
{
    ptrdiff_t ist = 1, base = 0;
    for (int32_t d = (int32_t)t->ndim - 1; d >= 0; d--) {
        base += (ptrdiff_t)st[d] * ist;
        /* a single-element axis never steps: keep its stride small */
        sst[d] = od[d] > 1 ? (ptrdiff_t)step[d] * ist : 0;
        ist *= (ptrdiff_t)t->dims[d];
    }
    return base;
}

int cpu_k_Slice(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out,
                uint32_t n_out)
{
    (void)n_out;
    const bb_tensor_view *t = cpu_tv(in[0]);
    uint32_t nd = t->ndim;
    size_t es = bb_tensor_elem_size(t->dtype);
    if (!es)
        return cpu_fail_dtype(r, t->dtype);
    int64_t st[BB_MAX_DIMS], step[BB_MAX_DIMS], od[BB_MAX_DIMS];
    int rc = cpu_slice_geom(r, in, n_in, st, step, od);
    if (rc)
        return rc;
    if ((rc = cpu_alloc_uninit(r, t->dtype, nd, od, out)))
        return rc;
    if (cpu_numel(nd, od) == 0)
        return BB_OK;
    ptrdiff_t sst[BB_MAX_DIMS], base = cpu_slice_strides(t, st, step, od, sst);
    strided_copy(cpu_tv(*out)->data, t->data + base * (ptrdiff_t)es, es, nd, od, sst);
    return BB_OK;
}

/* ---- Concat / Split ---------------------------------------------------------- */

int cpu_k_Concat(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out,
                 uint32_t n_out)
{
    (void)n_out;
    const bb_tensor_view *t0 = cpu_tv(in[0]);
    uint32_t nd = t0->ndim;
    if (nd == 0)
        return cpu_fail(r, BB_EINVAL, "inputs must have rank >= 1");
    const bb_attr *ax = cpu_attr(r->node, "axis");
    if (!ax || ax->type != BB_ATTR_INT)
        return cpu_fail(r, BB_EINVAL, "attribute axis is required");
    uint32_t axis;
    int rc = cpu_axis(r, ax->i, nd, "axis", &axis);
    if (rc)
        return rc;
    size_t es = bb_tensor_elem_size(t0->dtype);
    if (!es)
        return cpu_fail_dtype(r, t0->dtype);
    int64_t od[BB_MAX_DIMS];
    memcpy(od, t0->dims, nd * sizeof *od);
    od[axis] = 0;
    char s1[128], s2[128];
    for (uint32_t i = 0; i < n_in; i++) {
        const bb_tensor_view *t = cpu_tv(in[i]);
        if (t->dtype != t0->dtype)
            return cpu_fail(r, BB_ETYPE, "input %u dtype %s differs from input 0's %s", i,
                            cpu_dtype_name(t->dtype), cpu_dtype_name(t0->dtype));
        bool ok = t->ndim == nd;
        for (uint32_t d = 0; ok && d < nd; d++)
            ok = d == axis || t->dims[d] == t0->dims[d];
        if (!ok)
            return cpu_fail(r, BB_EINVAL, "input %u shape %s does not match input 0 %s on "
                            "axes other than %u", i, cpu_shape_str(t->ndim, t->dims, s1, 128),
                            cpu_shape_str(nd, t0->dims, s2, 128), axis);
        od[axis] += t->dims[axis];
    }
    if ((rc = cpu_alloc_uninit(r, t0->dtype, nd, od, out)))
        return rc;
    size_t outer = cpu_numel(axis, od), inner = cpu_numel(nd - axis - 1, od + axis + 1) * es;
    size_t orow = (size_t)od[axis] * inner;
    uint8_t *dst = cpu_tv(*out)->data;
    if (!orow || !outer)
        return BB_OK;
    size_t at = 0;
    for (uint32_t i = 0; i < n_in; i++) {
        const bb_tensor_view *t = cpu_tv(in[i]);
        size_t row = (size_t)t->dims[axis] * inner;
        if (row)
            for (size_t o = 0; o < outer; o++)
                memcpy(dst + o * orow + at, t->data + o * row, row);
        at += row;
    }
    return BB_OK;
}

int cpu_k_Split(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out,
                uint32_t n_out)
{
    const bb_tensor_view *t = cpu_tv(in[0]);
    uint32_t nd = t->ndim, axis;
    if (nd == 0)
        return cpu_fail(r, BB_EINVAL, "input must have rank >= 1");
    int rc = cpu_axis(r, cpu_attr_i(r->node, "axis", 0), nd, "axis", &axis);
    if (rc)
        return rc;
    size_t es = bb_tensor_elem_size(t->dtype);
    if (!es)
        return cpu_fail_dtype(r, t->dtype);
    if (n_out == 0)
        return cpu_fail(r, BB_EINVAL, "no outputs");
    int64_t dim = t->dims[axis];
    int64_t *sizes = calloc(n_out, sizeof *sizes);
    if (!sizes)
        return cpu_fail(r, BB_ENOMEM, "out of memory");
    const int64_t *av;
    size_t an;
    int64_t num = cpu_attr_i(r->node, "num_outputs", 0);
    if (n_in > 1 && in[1]) {
        size_t n;
        if ((rc = cpu_read_ints(r, in[1], "split", sizes, n_out, &n)))
            goto done;
        if (n != n_out) {
            rc = cpu_fail(r, BB_EINVAL, "split has %zu entries for %u outputs", n, n_out);
            goto done;
        }
    } else if (cpu_attr_ints(r->node, "split", &av, &an)) {
        if (an != n_out) {
            rc = cpu_fail(r, BB_EINVAL, "split has %zu entries for %u outputs", an, n_out);
            goto done;
        }
        memcpy(sizes, av, an * sizeof *av);
    } else if (num > 0) {
        if (num != (int64_t)n_out) {
            rc = cpu_fail(r, BB_EINVAL, "num_outputs %lld but %u outputs", (long long)num,
                          n_out);
            goto done;
        }
        /* ceil-sized chunks; the last one takes what is left (ONNX's
         * reference: it may be smaller, never negative) */
        int64_t chunk = (dim + num - 1) / num, last = dim - chunk * (num - 1);
        if (last < 0) {
            rc = cpu_fail(r, BB_EINVAL, "axis of size %lld cannot split into %lld parts of %lld",
                          (long long)dim, (long long)num, (long long)chunk);
            goto done;
        }
        for (uint32_t i = 0; i < n_out; i++)
            sizes[i] = i + 1 < n_out ? chunk : last;
    } else {
        if (dim % (int64_t)n_out) {
            rc = cpu_fail(r, BB_EINVAL, "axis of size %lld does not split evenly into %u",
                          (long long)dim, n_out);
            goto done;
        }
        for (uint32_t i = 0; i < n_out; i++)
            sizes[i] = dim / (int64_t)n_out;
    }
    int64_t sum = 0;
    for (uint32_t i = 0; i < n_out; i++) {
        if (sizes[i] < 0 || sizes[i] > dim) {
            rc = cpu_fail(r, BB_EINVAL, "invalid split size %lld", (long long)sizes[i]);
            goto done;
        }
        sum += sizes[i];
    }
    if (sum != dim) {
        rc = cpu_fail(r, BB_EINVAL, "split sizes sum to %lld, axis has %lld", (long long)sum,
                      (long long)dim);
        goto done;
    }
    size_t outer = cpu_numel(axis, t->dims);
    size_t inner = cpu_numel(nd - axis - 1, t->dims + axis + 1) * es;
    size_t irow = (size_t)dim * inner, at = 0;
    int64_t od[BB_MAX_DIMS];
    memcpy(od, t->dims, nd * sizeof *od);
    for (uint32_t i = 0; i < n_out; i++) {
        od[axis] = sizes[i];
        size_t row = (size_t)sizes[i] * inner;
        if (outer == 1) { /* contiguous chunk: share the input's bytes */
            out[i] = bb_value_tensor_wrap(t->dtype, nd, od, t->buf, t->data + at);
            if (!out[i]) {
                rc = cpu_fail(r, BB_ENOMEM, "out of memory");
                goto done;
            }
        } else {
            if ((rc = cpu_alloc_uninit(r, t->dtype, nd, od, &out[i])))
                goto done;
            uint8_t *dst = cpu_tv(out[i])->data;
            if (row)
                for (size_t o = 0; o < outer; o++)
                    memcpy(dst + o * row, t->data + o * irow + at, row);
        }
        at += row;
    }
done:
    free(sizes);
    return rc;
}

/* ---- Cast -------------------------------------------------------------------- */

int cpu_k_Cast(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out, uint32_t n_out)
{
    (void)n_in;
    (void)n_out;
    const bb_tensor_view *t = cpu_tv(in[0]);
    const bb_attr *to = cpu_attr(r->node, "to");
    if (!to || to->type != BB_ATTR_INT)
        return cpu_fail(r, BB_EINVAL, "attribute to is required");
    int32_t to_dt = to->i < 0 || to->i > BB_DT_MAX ? BB_DT_UNDEFINED : (int32_t)to->i;
    if (!cpu_cast_supported(to_dt))
        return cpu_fail(r, BB_EUNSUPPORTED, "cast to dtype %s not supported",
                        cpu_dtype_name(to_dt));
    if (!cpu_cast_supported(t->dtype))
        return cpu_fail_dtype(r, t->dtype);
    int32_t dt = to_dt;
    if (dt == t->dtype) { /* same type: share */
        *out = bb_value_ref(in[0]);
        return BB_OK;
    }
    int rc = cpu_alloc(r, dt, t->ndim, t->dims, out);
    if (rc)
        return rc;
    cpu_cast_buf(cpu_tv(*out)->data, dt, t->data, t->dtype, cpu_numel(t->ndim, t->dims));
    return BB_OK;
}
