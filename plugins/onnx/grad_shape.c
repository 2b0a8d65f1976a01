/*
 * grad_shape.c — gradients of the ops that move elements without
 * arithmetic: Transpose (the inverse permutation, through the CPU
 * kernel), Concat (the output gradient cut back into the inputs), Split
 * (the output gradients joined, zeros for an output nobody read), Slice
 * (scattered back into a zero tensor at the sliced positions), Gather
 * (scatter-added at the gathered indices: an index taken twice gets both),
 * and ReduceSum / ReduceMean (the gradient broadcast back over the reduced
 * axes, divided by their size for the mean).
 */
#include <string.h>

#include "grad.h"

/* ---- Transpose ------------------------------------------------------------------------ */

int ad_prepare_transpose(ad_plan *p, ad_node *n, const char *who, bb_error *err)
{
    const bb_attr *perm = bb_node_attr(n->node, "perm");
    if (!perm)
        return BB_OK; /* reversed axes: its own inverse */
    size_t k = perm->ints.n;
    int64_t inv[BB_MAX_DIMS];
    bool seen[BB_MAX_DIMS] = {false};
    if (perm->type != BB_ATTR_INTS || k > BB_MAX_DIMS)
        return bb_error_set(err, BB_EINVAL, "%s: graph: node '%s' (Transpose): perm is not a "
                            "permutation", who, n->node->name ? n->node->name : "");
    for (size_t i = 0; i < k; i++) {
        int64_t a = perm->ints.v[i] < 0 ? perm->ints.v[i] + (int64_t)k : perm->ints.v[i];
        if (a < 0 || a >= (int64_t)k || seen[a])
            return bb_error_set(err, BB_EINVAL, "%s: graph: node '%s' (Transpose): perm is "
                                "not a permutation", who, n->node->name ? n->node->name : "");
        seen[a] = true;
        inv[a] = (int64_t)i;
    }
    n->aux = bb_node_new(p->arena, NULL, "Transpose");
    if (!n->aux || !bb_node_set_attr_ints(p->arena, n->aux, "perm", inv, k))
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", who);
    return BB_OK;
}

int ad_bwd_transpose(ad_ctx *c)
{
    bb_value *g = (bb_value *)ad_dout(c, 0), *dx = NULL;
    int rc = ad_kernel(c, CPU_OP_Transpose, c->n->aux ? c->n->aux : c->n->node, &g, 1, &dx, 1);
    return rc ? rc : ad_give(c, 0, dx);
}

/* ---- Concat / Split: [outer, axis, inner] blocks ------------------------------------------- */

static int axis_of(ad_ctx *c, int64_t dflt, uint32_t rank, uint32_t *axis)
{
    cpu_run r = ad_cpu_run(c, CPU_OP_Concat);
    int rc = cpu_axis(&r, bb_node_attr_int(c->n->node, "axis", dflt), rank, "axis", axis);
    return rc ? ad_cpu_error(c, rc) : BB_OK;
}

/* Copy the [outer, len, inner] block at offset `at` along the axis of a
 * tensor whose axis is `total` long, into / out of a dense [outer, len,
 * inner] tensor. */
static void block_copy(float *dense, float *big, size_t outer, size_t len, size_t total,
                       size_t at, size_t inner, bool to_big)
{
    for (size_t o = 0; o < outer; o++) {
        float *b = big + (o * total + at) * inner, *d = dense + o * len * inner;
        if (to_big)
            memcpy(b, d, len * inner * sizeof *d);
        else
            memcpy(d, b, len * inner * sizeof *d);
    }
}

int ad_bwd_concat(ad_ctx *c)
{
    const bb_value *g = ad_dout(c, 0);
    int rc = ad_need_f32(c, g, "the output gradient");
    uint32_t axis;
    if (rc || (rc = axis_of(c, 0, g->u.tensor.ndim, &axis)))
        return rc;
    const bb_tensor_view *t = &g->u.tensor;
    size_t outer = cpu_numel(axis, t->dims), total = (size_t)t->dims[axis];
    size_t inner = cpu_numel(t->ndim - axis - 1, t->dims + axis + 1), at = 0;
    for (uint32_t i = 0; i < c->n->n_in; i++) {
        const bb_value *x = ad_in(c, i);
        if (!x)
            continue;
        size_t len = (size_t)x->u.tensor.dims[axis];
        if (ad_wants(c, i)) {
            bb_value *dx;
            if ((rc = ad_new_uninit(c, x, &dx)))
                return rc;
            block_copy(bb_tensor_f32(dx), bb_tensor_f32(g), outer, len, total, at, inner, false);
            if ((rc = ad_give(c, i, dx)))
                return rc;
        }
        at += len;
    }
    return BB_OK;
}

/* The length of Split output j along the axis (its value is gone when its
 * output is not wired): from the split input or attribute, else equal parts. */
static int split_len(ad_ctx *c, uint32_t j, uint32_t axis, size_t *len)
{
    const bb_value *y = ad_out(c, j);
    if (y) {
        *len = (size_t)y->u.tensor.dims[axis];
        return BB_OK;
    }
    const bb_value *sp = ad_in(c, 1);
    const bb_attr *at = bb_node_attr(c->n->node, "split");
    if (sp && j < bb_tensor_numel(sp)) {
        *len = (size_t)cpu_elem_i64(&sp->u.tensor, j);
        return BB_OK;
    }
    if (at && at->type == BB_ATTR_INTS && j < at->ints.n) {
        *len = (size_t)at->ints.v[j];
        return BB_OK;
    }
    size_t dim = (size_t)ad_in(c, 0)->u.tensor.dims[axis], k = c->n->n_out;
    size_t part = (dim + k - 1) / k;
    *len = j + 1 < k ? part : dim - part * (k - 1);
    return *len <= dim ? BB_OK : ad_fail(c, BB_EINVAL, "cannot tell the length of output %u", j);
}

int ad_bwd_split(ad_ctx *c)
{
    const bb_value *x = ad_in(c, 0);
    int rc = ad_need_f32(c, x, "input");
    uint32_t axis;
    bb_value *dx;
    if (rc || (rc = axis_of(c, 0, x->u.tensor.ndim, &axis)) || (rc = ad_new_like(c, x, &dx)))
        return rc;
    const bb_tensor_view *t = &x->u.tensor;
    size_t outer = cpu_numel(axis, t->dims), total = (size_t)t->dims[axis];
    size_t inner = cpu_numel(t->ndim - axis - 1, t->dims + axis + 1), at = 0;
    for (uint32_t j = 0; j < c->n->n_out && !rc; j++) {
        size_t len;
        if ((rc = split_len(c, j, axis, &len)))
            break;
        const bb_value *g = ad_dout(c, j);
        if (g && at + len <= total && bb_tensor_numel(g) == outer * len * inner)
            block_copy(bb_tensor_f32(g), bb_tensor_f32(dx), outer, len, total, at, inner, true);
        at += len;
    }
    if (rc) {
        bb_value_unref(dx);
        return rc;
    }
    return ad_give(c, 0, dx);
}

/* ---- Slice ------------------------------------------------------------------------------- */

int ad_bwd_slice(ad_ctx *c)
{
    const bb_value *x = ad_in(c, 0), *g = ad_dout(c, 0);
    int rc = ad_need_f32(c, x, "data");
    int64_t st[BB_MAX_DIMS], step[BB_MAX_DIMS], od[BB_MAX_DIMS];
    bb_value *in[5];
    for (uint32_t i = 0; i < 5; i++)
        in[i] = (bb_value *)ad_in(c, i);
    cpu_run r = ad_cpu_run(c, CPU_OP_Slice);
    if (!rc && (rc = cpu_slice_geom(&r, in, c->n->n_in, st, step, od)))
        rc = ad_cpu_error(c, rc);
    bb_value *dx;
    if (rc || (rc = ad_new_like(c, x, &dx)))
        return rc;
    const bb_tensor_view *t = &x->u.tensor;
    uint32_t nd = t->ndim;
    ptrdiff_t sst[BB_MAX_DIMS], base = cpu_slice_strides(t, st, step, od, sst);
    size_t total = cpu_numel(nd, od);
    const float *src = bb_tensor_f32(g);
    float *dst = bb_tensor_f32(dx) + base;
    if (nd == 0 && total)
        dst[0] = src[0];
    int64_t idx[BB_MAX_DIMS] = {0};
    ptrdiff_t off = 0;
    size_t inner = nd ? (size_t)od[nd - 1] : 0;
    for (size_t k = 0; nd && total && k < total; k += inner) {
        for (size_t i = 0; i < inner; i++)
            dst[off + (ptrdiff_t)i * sst[nd - 1]] = src[k + i];
        for (int32_t d = (int32_t)nd - 2; d >= 0; d--) {
            if (++idx[d] < od[d]) {
                off += sst[d];
                break;
            }
            off -= sst[d] * (ptrdiff_t)(od[d] - 1);
            idx[d] = 0;
        }
    }
    return ad_give(c, 0, dx);
}

/* ---- Gather -------------------------------------------------------------------------------- */

int ad_bwd_gather(ad_ctx *c)
{
    const bb_value *x = ad_in(c, 0), *ind = ad_in(c, 1), *g = ad_dout(c, 0);
    int rc = ad_need_f32(c, x, "data");
    uint32_t axis;
    bb_value *dx;
    if (rc || (rc = axis_of(c, 0, x->u.tensor.ndim, &axis)) || (rc = ad_new_like(c, x, &dx)))
        return rc;
    const bb_tensor_view *t = &x->u.tensor;
    size_t outer = cpu_numel(axis, t->dims), D = (size_t)t->dims[axis];
    size_t inner = cpu_numel(t->ndim - axis - 1, t->dims + axis + 1), ni = bb_tensor_numel(ind);
    const float *G = bb_tensor_f32(g);
    float *d = bb_tensor_f32(dx);
    for (size_t j = 0; j < ni; j++) {
        int64_t ix = cpu_elem_i64(&ind->u.tensor, j);
        if (ix < 0)
            ix += (int64_t)D;
        if (ix < 0 || ix >= (int64_t)D) { /* the forward refused it already */
            bb_value_unref(dx);
            return ad_fail(c, BB_EINVAL, "index %lld out of range", (long long)ix);
        }
        for (size_t o = 0; o < outer; o++) {
            const float *gs = G + (o * ni + j) * inner;
            float *ds = d + (o * D + (size_t)ix) * inner;
            for (size_t i = 0; i < inner; i++)
                ds[i] += gs[i];
        }
    }
    return ad_give(c, 0, dx);
}

/* ---- ReduceSum / ReduceMean ------------------------------------------------------------------ */

/* The reduced axes: the axes input (opset 18), else the attribute (before);
 * none given: every axis, unless noop_with_empty_axes. */
static int reduced_axes(ad_ctx *c, uint32_t rank, bool *red, bool *noop)
{
    int64_t axes[BB_MAX_DIMS];
    size_t n = 0;
    const bb_value *av = ad_in(c, 1);
    const bb_attr *at = bb_node_attr(c->n->node, "axes");
    cpu_run r = ad_cpu_run(c, CPU_OP_ReduceSum);
    int rc = BB_OK;
    if (av)
        rc = cpu_read_ints(&r, av, "axes", axes, BB_MAX_DIMS, &n);
    else if (at && at->type == BB_ATTR_INTS && at->ints.n <= BB_MAX_DIMS)
        memcpy(axes, at->ints.v, (n = at->ints.n) * sizeof *axes);
    memset(red, 0, rank * sizeof *red);
    *noop = n == 0 && bb_node_attr_int(c->n->node, "noop_with_empty_axes", 0) != 0;
    for (size_t i = 0; !rc && i < n; i++) {
        uint32_t a;
        if (!(rc = cpu_axis(&r, axes[i], rank, "axis", &a)))
            red[a] = true;
    }
    for (uint32_t d = 0; n == 0 && d < rank; d++)
        red[d] = true;
    return rc ? ad_cpu_error(c, rc) : BB_OK;
}

int ad_bwd_reduce(ad_ctx *c)
{
    const bb_value *x = ad_in(c, 0), *g = ad_dout(c, 0);
    int rc = ad_need_f32(c, x, "data");
    const bb_tensor_view *t = &x->u.tensor;
    bool red[BB_MAX_DIMS], noop;
    if (rc || (rc = reduced_axes(c, t->ndim, red, &noop)))
        return rc;
    if (noop) { /* the output is the input */
        bb_value *dx;
        return (rc = ad_view(c, g, t->ndim, t->dims, &dx)) ? rc : ad_give(c, 0, dx);
    }
    int64_t kd[BB_MAX_DIMS];
    size_t count = 1;
    for (uint32_t d = 0; d < t->ndim; d++) {
        kd[d] = red[d] ? 1 : t->dims[d];
        count *= red[d] ? (size_t)t->dims[d] : 1;
    }
    bb_value *gk = NULL, *dx = NULL;
    if ((rc = ad_view(c, g, t->ndim, kd, &gk)) || (rc = ad_new_uninit(c, x, &dx))) {
        bb_value_unref(gk);
        return rc;
    }
    cpu_run r = ad_cpu_run(c, CPU_OP_ReduceSum);
    rc = cpu_bcast_to(&r, gk, t->ndim, t->dims, bb_tensor_f32(dx), "gradient");
    bb_value_unref(gk);
    if (rc) {
        bb_value_unref(dx);
        return ad_cpu_error(c, rc);
    }
    if (strcmp(c->n->node->op_type, "ReduceMean") == 0 && count > 1) {
        float *d = bb_tensor_f32(dx), k = 1.0f / (float)count;
        for (size_t i = 0, n = bb_tensor_numel(dx); i < n; i++)
            d[i] *= k;
    }
    return ad_give(c, 0, dx);
}
