/*
 * broadcast.c — ONNX multidirectional broadcasting for up to three operands.
 *
 * The output shape is computed right-aligned (each dim equal across
 * operands or 1). Output dims of size 1 are dropped and adjacent dims that
 * every operand walks contiguously are merged, so "same shape" becomes one
 * flat run and "[N,M] + [M]" becomes N runs of M: kernels see long inner
 * loops with unit or zero strides, which the compiler vectorizes.
 */
#include <string.h>

#include "cpu_internal.h"

int cpu_bcast_init(cpu_run *r, cpu_bcast *bc, uint32_t k, const bb_value *const *ops)
{
    memset(bc, 0, sizeof *bc);
    bc->k = k;
    uint32_t rank = 0;
    for (uint32_t j = 0; j < k; j++)
        if (cpu_tv(ops[j])->ndim > rank)
            rank = cpu_tv(ops[j])->ndim;
    bc->out_nd = rank;
    for (uint32_t d = 0; d < rank; d++) {
        int64_t od = 1;
        for (uint32_t j = 0; j < k; j++) {
            const bb_tensor_view *t = cpu_tv(ops[j]);
            int64_t off = (int64_t)d - (int64_t)(rank - t->ndim);
            int64_t dd = off < 0 ? 1 : t->dims[off];
            if (dd == 1)
                continue;
            if (od == 1) {
                od = dd;
            } else if (od != dd) {
                char s[3][128];
                const bb_tensor_view *t0 = cpu_tv(ops[0]), *t1 = cpu_tv(ops[k > 1 ? 1 : 0]);
                if (k == 3)
                    return cpu_fail(r, BB_EINVAL, "shapes %s, %s and %s are not broadcastable",
                                    cpu_shape_str(t0->ndim, t0->dims, s[0], 128),
                                    cpu_shape_str(t1->ndim, t1->dims, s[1], 128),
                                    cpu_shape_str(cpu_tv(ops[2])->ndim, cpu_tv(ops[2])->dims,
                                                  s[2], 128));
                return cpu_fail(r, BB_EINVAL, "shapes %s and %s are not broadcastable",
                                cpu_shape_str(t0->ndim, t0->dims, s[0], 128),
                                cpu_shape_str(t1->ndim, t1->dims, s[1], 128));
            }
        }
        bc->out_dims[d] = od;
    }
    bc->numel = cpu_numel(rank, bc->out_dims);

    /* Aligned strides per operand: 0 where the operand broadcasts. */
    size_t st[CPU_BC_MAX][BB_MAX_DIMS];
    for (uint32_t j = 0; j < k; j++) {
        const bb_tensor_view *t = cpu_tv(ops[j]);
        size_t s = 1;
        for (int64_t d = (int64_t)rank - 1; d >= 0; d--) {
            int64_t off = d - (int64_t)(rank - t->ndim);
            int64_t dd = off < 0 ? 1 : t->dims[off];
            st[j][d] = dd == 1 ? 0 : s;
            s *= (size_t)dd;
        }
    }
    /* Drop output dims of size 1, then merge contiguous neighbours. */
    uint32_t nd = 0;
    for (uint32_t d = 0; d < rank; d++) {
        if (bc->out_dims[d] == 1)
            continue;
        if (nd > 0) {
            bool merge = true;
            for (uint32_t j = 0; j < k && merge; j++)
                merge = bc->st[j][nd - 1] == st[j][d] * (size_t)bc->out_dims[d];
            if (merge) {
                bc->dims[nd - 1] *= bc->out_dims[d];
                for (uint32_t j = 0; j < k; j++)
                    bc->st[j][nd - 1] = st[j][d];
                continue;
            }
        }
        bc->dims[nd] = bc->out_dims[d];
        for (uint32_t j = 0; j < k; j++)
            bc->st[j][nd] = st[j][d];
        nd++;
    }
    if (nd == 0) {
        bc->dims[0] = 1;
        for (uint32_t j = 0; j < k; j++)
            bc->st[j][0] = 0;
        nd = 1;
    }
    bc->nd = nd;
    return BB_OK;
}

void cpu_bcast_each(const cpu_bcast *bc, cpu_bcast_fn fn, void *ctx)
{
    if (bc->numel == 0)
        return;
    uint32_t k = bc->k, nd = bc->nd, last = nd - 1;
    size_t off[CPU_BC_MAX + 1] = {0}, inner[CPU_BC_MAX];
    size_t n = (size_t)bc->dims[last];
    for (uint32_t j = 0; j < k; j++)
        inner[j] = bc->st[j][last];
    int64_t idx[BB_MAX_DIMS] = {0};
    for (;;) {
        fn(ctx, off, inner, n);
        off[0] += n;
        /* advance the outer counters (dims 0..last-1) */
        int32_t d = (int32_t)last - 1;
        for (; d >= 0; d--) {
            if (++idx[d] < bc->dims[d]) {
                for (uint32_t j = 0; j < k; j++)
                    off[j + 1] += bc->st[j][d];
                break;
            }
            idx[d] = 0;
            for (uint32_t j = 0; j < k; j++)
                off[j + 1] -= bc->st[j][d] * (size_t)(bc->dims[d] - 1);
        }
        if (d < 0)
            return;
    }
}

/* Unidirectional broadcast copy (Gemm's C, LayerNormalization's scale). */
typedef struct copy_ctx {
    uint8_t *dst;
    const uint8_t *src;
    size_t es;
} copy_ctx;

static void copy_run(void *c, const size_t *off, const size_t *inner, size_t n)
{
    copy_ctx *x = c;
    uint8_t *d = x->dst + off[0] * x->es;
    const uint8_t *s = x->src + off[2] * x->es;
    if (inner[1]) {
        memcpy(d, s, n * x->es);
    } else {
        for (size_t i = 0; i < n; i++)
            memcpy(d + i * x->es, s, x->es);
    }
}

int cpu_bcast_to(cpu_run *r, const bb_value *src, uint32_t ndim, const int64_t *dims, void *dst,
                 const char *what)
{
    const bb_tensor_view *t = cpu_tv(src);
    char s1[128], s2[128];
    if (t->ndim > ndim)
        return cpu_fail(r, BB_EINVAL, "%s of shape %s cannot broadcast to %s", what,
                        cpu_shape_str(t->ndim, t->dims, s1, sizeof s1),
                        cpu_shape_str(ndim, dims, s2, sizeof s2));
    for (uint32_t i = 0; i < t->ndim; i++) {
        int64_t want = dims[ndim - t->ndim + i];
        if (t->dims[i] != 1 && t->dims[i] != want)
            return cpu_fail(r, BB_EINVAL, "%s of shape %s cannot broadcast to %s", what,
                            cpu_shape_str(t->ndim, t->dims, s1, sizeof s1),
                            cpu_shape_str(ndim, dims, s2, sizeof s2));
    }
    /* A zero-sized target shape operand drives the iteration. */
    bb_value target = {.type = &BB_TYPE_TENSOR_F32};
    target.u.tensor.dtype = t->dtype;
    target.u.tensor.ndim = ndim;
    memcpy(target.u.tensor.dims, dims, ndim * sizeof *dims);
    const bb_value *ops[2] = {&target, src};
    cpu_bcast bc;
    int rc = cpu_bcast_init(r, &bc, 2, ops);
    if (rc)
        return rc;
    copy_ctx c = {dst, t->data, bb_tensor_elem_size(t->dtype)};
    cpu_bcast_each(&bc, copy_run, &c);
    return BB_OK;
}
