/*
 * grad_linear.c — gradients of Gemm and MatMul, as GEMMs through
 * cpu_gemm (the CPU backend's one GEMM entry point).
 *
 * Gemm: Y = alpha op(A) op(B) + beta C, with op(A) [M, K], op(B) [K, N].
 *   d op(A) = alpha dY op(B)^T, d op(B) = alpha op(A)^T dY, dC = beta
 *   dY summed to C's shape; a transposed operand takes the transpose.
 * MatMul (numpy): dA = dY B^T and dB = A^T dY per batch, summed over the
 *   batch dims an operand was broadcast along; 1-D operands are promoted
 *   as in the forward (the memory layout does not change). When B has no
 *   batch dims, the batch folds into M: one GEMM each.
 */
#include <string.h>

#include "grad.h"

int ad_bwd_gemm(ad_ctx *c)
{
    const bb_value *a = ad_in(c, 0), *b = ad_in(c, 1), *cc = ad_in(c, 2), *g = ad_dout(c, 0);
    int rc = ad_need_f32(c, a, "A");
    if (!rc)
        rc = ad_need_f32(c, b, "B");
    if (!rc)
        rc = ad_need_f32(c, g, "the output gradient");
    if (rc)
        return rc;
    const bb_node *nd = c->n->node;
    bool ta = bb_node_attr_int(nd, "transA", 0) != 0, tb = bb_node_attr_int(nd, "transB", 0) != 0;
    float alpha = bb_node_attr_float(nd, "alpha", 1.0f), beta = bb_node_attr_float(nd, "beta", 1.0f);
    const int64_t *ad = a->u.tensor.dims, *bd = b->u.tensor.dims;
    size_t M = (size_t)(ta ? ad[1] : ad[0]), K = (size_t)(ta ? ad[0] : ad[1]);
    size_t N = (size_t)(tb ? bd[0] : bd[1]);
    const float *A = bb_tensor_f32(a), *B = bb_tensor_f32(b), *G = bb_tensor_f32(g);
    if (ad_wants(c, 0)) {
        bb_value *da;
        if ((rc = ad_new_uninit(c, a, &da)))
            return rc;
        if (!ta) /* dA [M, K] = dY [M, N] op(B)^T */
            cpu_gemm(BB_DT_FLOAT, false, !tb, M, N, K, alpha, G, B, 0.0f, bb_tensor_f32(da));
        else /* dA [K, M] = op(B) dY^T */
            cpu_gemm(BB_DT_FLOAT, tb, true, K, N, M, alpha, B, G, 0.0f, bb_tensor_f32(da));
        if ((rc = ad_give(c, 0, da)))
            return rc;
    }
    if (ad_wants(c, 1)) {
        bb_value *db;
        if ((rc = ad_new_uninit(c, b, &db)))
            return rc;
        if (!tb) /* dB [K, N] = op(A)^T dY */
            cpu_gemm(BB_DT_FLOAT, !ta, false, K, M, N, alpha, A, G, 0.0f, bb_tensor_f32(db));
        else /* dB [N, K] = dY^T op(A) */
            cpu_gemm(BB_DT_FLOAT, true, ta, N, M, K, alpha, G, A, 0.0f, bb_tensor_f32(db));
        if ((rc = ad_give(c, 1, db)))
            return rc;
    }
    if (cc && ad_wants(c, 2)) {
        bb_value *dc;
        if ((rc = ad_unbroadcast(c, g, cc->u.tensor.ndim, cc->u.tensor.dims, &dc)))
            return rc;
        if (beta != 1.0f) {
            bb_value *scaled = bb_value_tensor_copy(BB_DT_FLOAT, dc->u.tensor.ndim,
                                                    dc->u.tensor.dims, dc->u.tensor.data,
                                                    dc->u.tensor.nbytes);
            bb_value_unref(dc);
            if (!scaled)
                return ad_fail(c, BB_ENOMEM, "out of memory");
            float *p = bb_tensor_f32(scaled);
            for (size_t i = 0, n = bb_tensor_numel(scaled); i < n; i++)
                p[i] *= beta;
            dc = scaled;
        }
        return ad_give(c, 2, dc);
    }
    return BB_OK;
}

/* numpy matmul shapes: 1-D promoted, batch dims broadcast (forward checked them). */
typedef struct mm_shape {
    size_t M, K, N;
    uint32_t nb;
    int64_t batch[BB_MAX_DIMS];
    size_t sa[BB_MAX_DIMS], sb[BB_MAX_DIMS]; /* matrix strides per batch dim (0: broadcast) */
    bool b_shared, a_dense;
} mm_shape;

static void mm_promote(const bb_tensor_view *t, bool is_a, int64_t *d, uint32_t *n)
{
    if (t->ndim == 1) {
        d[0] = is_a ? 1 : t->dims[0];
        d[1] = is_a ? t->dims[0] : 1;
        *n = 2;
    } else {
        memcpy(d, t->dims, t->ndim * sizeof *d);
        *n = t->ndim;
    }
}

static void mm_shape_of(const bb_tensor_view *a, const bb_tensor_view *b, mm_shape *s)
{
    int64_t ad[BB_MAX_DIMS + 1], bd[BB_MAX_DIMS + 1];
    uint32_t an, bn;
    mm_promote(a, true, ad, &an);
    mm_promote(b, false, bd, &bn);
    s->M = (size_t)ad[an - 2];
    s->K = (size_t)ad[an - 1];
    s->N = (size_t)bd[bn - 1];
    uint32_t abn = an - 2, bbn = bn - 2;
    s->nb = abn > bbn ? abn : bbn;
    size_t stride_a = s->M * s->K, stride_b = s->K * s->N;
    s->b_shared = s->a_dense = true;
    for (int32_t d = (int32_t)s->nb - 1; d >= 0; d--) {
        int32_t ia = d - (int32_t)(s->nb - abn), ib = d - (int32_t)(s->nb - bbn);
        int64_t x = ia >= 0 ? ad[ia] : 1, y = ib >= 0 ? bd[ib] : 1;
        s->batch[d] = x == 1 ? y : x;
        s->sa[d] = x == 1 ? 0 : stride_a;
        s->sb[d] = y == 1 ? 0 : stride_b;
        stride_a *= (size_t)x;
        stride_b *= (size_t)y;
        s->b_shared = s->b_shared && (s->sb[d] == 0 || s->batch[d] == 1);
        s->a_dense = s->a_dense && (s->sa[d] != 0 || s->batch[d] == 1);
    }
}

int ad_bwd_matmul(ad_ctx *c)
{
    const bb_value *a = ad_in(c, 0), *b = ad_in(c, 1), *g = ad_dout(c, 0);
    int rc = ad_need_f32(c, a, "A");
    if (!rc)
        rc = ad_need_f32(c, b, "B");
    if (!rc)
        rc = ad_need_f32(c, g, "the output gradient");
    bb_value *da = NULL, *db = NULL;
    if (!rc && ad_wants(c, 0))
        rc = ad_new_like(c, a, &da);
    if (!rc && ad_wants(c, 1))
        rc = ad_new_like(c, b, &db);
    if (rc) {
        bb_value_unref(da);
        return rc;
    }
    mm_shape s;
    mm_shape_of(&a->u.tensor, &b->u.tensor, &s);
    const float *A = bb_tensor_f32(a), *B = bb_tensor_f32(b), *G = bb_tensor_f32(g);
    size_t nbatch = cpu_numel(s.nb, s.batch);
    if (s.b_shared && s.a_dense) { /* the batch folds into M */
        size_t rows = nbatch * s.M;
        if (da)
            cpu_gemm(BB_DT_FLOAT, false, true, rows, s.N, s.K, 1.0f, G, B, 0.0f,
                     bb_tensor_f32(da));
        if (db)
            cpu_gemm(BB_DT_FLOAT, true, false, s.K, rows, s.N, 1.0f, A, G, 0.0f,
                     bb_tensor_f32(db));
    } else {
        size_t idx[BB_MAX_DIMS] = {0}, oa = 0, ob = 0;
        for (size_t i = 0; i < nbatch; i++) {
            const float *gi = G + i * s.M * s.N;
            if (da)
                cpu_gemm(BB_DT_FLOAT, false, true, s.M, s.N, s.K, 1.0f, gi, B + ob, 1.0f,
                         bb_tensor_f32(da) + oa);
            if (db)
                cpu_gemm(BB_DT_FLOAT, true, false, s.K, s.M, s.N, 1.0f, A + oa, gi, 1.0f,
                         bb_tensor_f32(db) + ob);
            for (int32_t d = (int32_t)s.nb - 1; d >= 0; d--) {
                if (++idx[d] < (size_t)s.batch[d]) {
                    oa += s.sa[d];
                    ob += s.sb[d];
                    break;
                }
                idx[d] = 0;
                oa -= s.sa[d] * (size_t)(s.batch[d] - 1);
                ob -= s.sb[d] * (size_t)(s.batch[d] - 1);
            }
        }
    }
    if (da && (rc = ad_give(c, 0, da))) {
        bb_value_unref(db);
        return rc;
    }
    return db ? ad_give(c, 1, db) : BB_OK;
}
