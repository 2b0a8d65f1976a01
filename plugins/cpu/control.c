/*
 * control.c — If and Loop, running their graph attributes through the
 * graph executor (graph.c).
 *
 * Inside execute_graph a subgraph sees the enclosing graphs' values
 * (ONNX outer scope) through r->scope. Dispatched per op there is no
 * enclosing graph: the scope is the node's extra trailing inputs named by
 * its outer_scope metadata (cpu_backend.c); a body reading any other outer
 * name fails with an error naming the name. Loop follows ONNX: inputs (M?, cond?, v_initial...),
 * body (iteration_num, cond_in, v...) -> (cond_out, v..., scan...),
 * outputs (v_final..., scan outputs stacked along a new first axis).
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

/* Child plan c of this node: precompiled by the executor, or from the
 * instance cache when dispatched per op. */
static int child_plan(cpu_run *r, uint32_t c, const char *key, cpu_plan **p, bool *owned)
{
    *owned = false;
    if (r->pn && (*p = cpu_plan_node_child(r->pn, c)))
        return BB_OK;
    const bb_attr *a = cpu_attr(r->node, key);
    if (!a || a->type != BB_ATTR_GRAPH || !a->g)
        return cpu_fail(r, BB_EINVAL, "graph attribute %s is missing", key);
    int rc = cpu_plan_get(r->be, a->g, p, owned, r->err);
    if (rc)
        bb_error_prefix(r->err, CPU_NAME ": %s: %s", cpu_op_name(r->op), key);
    return rc;
}

/* A one-element tensor read as a truth value. */
static int scalar_true(cpu_run *r, const bb_value *v, const char *what, bool *out)
{
    if (!v || !v->type || v->type->kind != BB_VK_TENSOR)
        return cpu_fail(r, BB_ETYPE, "%s must be a tensor", what);
    const bb_tensor_view *t = cpu_tv(v);
    if (cpu_numel(t->ndim, t->dims) != 1)
        return cpu_fail(r, BB_EINVAL, "%s must have exactly one element", what);
    if (t->dtype != BB_DT_BOOL)
        return cpu_fail(r, BB_ETYPE, "%s must be bool, got %s", what, cpu_dtype_name(t->dtype));
    *out = t->data[0] != 0;
    return BB_OK;
}

int cpu_k_If(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out, uint32_t n_out)
{
    (void)n_in;
    bool cond = false;
    int rc = scalar_true(r, in[0], "cond", &cond);
    if (rc)
        return rc;
    const char *key = cond ? "then_branch" : "else_branch";
    cpu_plan *p;
    bool owned;
    if ((rc = child_plan(r, cond ? 0 : 1, key, &p, &owned)))
        return rc;
    if (cpu_plan_n_outputs(p) < n_out) {
        rc = cpu_fail(r, BB_EINVAL, "%s has %u outputs, the node %u", key,
                      cpu_plan_n_outputs(p), n_out);
    } else if (cpu_plan_n_inputs(p) != 0) {
        rc = cpu_fail(r, BB_EINVAL, "%s must have no inputs", key);
    } else {
        rc = cpu_plan_run(r->be, p, r->scope, NULL, 0, out, n_out, r->err);
    }
    cpu_plan_release(p, owned);
    return rc;
}

/* Growable list of one scan output's per-iteration values. */
typedef struct scan_list {
    bb_value **v;
    size_t n, cap;
} scan_list;

static int scan_push(cpu_run *r, scan_list *s, bb_value *v)
{
    if (!v || !v->type || v->type->kind != BB_VK_TENSOR)
        return cpu_fail(r, BB_ETYPE, "scan outputs must be tensors");
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 8;
        bb_value **nv = realloc(s->v, cap * sizeof *nv);
        if (!nv)
            return cpu_fail(r, BB_ENOMEM, "out of memory");
        s->v = nv;
        s->cap = cap;
    }
    s->v[s->n++] = v;
    return BB_OK;
}

/* Stack a scan output's values along a new axis 0. */
static int scan_stack(cpu_run *r, const cpu_plan *body, uint32_t body_out, const scan_list *s,
                      bb_value **out)
{
    int64_t dims[BB_MAX_DIMS];
    if (s->n == 0) { /* no iteration: shape [0, declared...] if the body says */
        int32_t dt = BB_DT_FLOAT;
        uint32_t nd = 0;
        int64_t d[BB_MAX_DIMS];
        if (!cpu_plan_output_type(body, body_out, &dt, &nd, d))
            dt = BB_DT_FLOAT;
        dims[0] = 0;
        memcpy(dims + 1, d, nd * sizeof *d);
        return cpu_alloc(r, dt, nd + 1, dims, out);
    }
    const bb_tensor_view *t0 = cpu_tv(s->v[0]);
    if (t0->ndim + 1 > BB_MAX_DIMS)
        return cpu_fail(r, BB_ELIMIT, "scan output rank exceeds %d", BB_MAX_DIMS);
    for (size_t i = 1; i < s->n; i++) {
        const bb_tensor_view *t = cpu_tv(s->v[i]);
        if (t->dtype != t0->dtype || t->ndim != t0->ndim ||
            memcmp(t->dims, t0->dims, t0->ndim * sizeof *t0->dims))
            return cpu_fail(r, BB_EINVAL, "scan output %u changes shape or dtype at iteration "
                            "%zu", body_out, i);
    }
    dims[0] = (int64_t)s->n;
    memcpy(dims + 1, t0->dims, t0->ndim * sizeof *dims);
    int rc = cpu_alloc(r, t0->dtype, t0->ndim + 1, dims, out);
    if (rc)
        return rc;
    uint8_t *dst = cpu_tv(*out)->data;
    for (size_t i = 0; i < s->n; i++) {
        if (t0->nbytes)
            memcpy(dst, cpu_tv(s->v[i])->data, t0->nbytes);
        dst += t0->nbytes;
    }
    return BB_OK;
}

int cpu_k_Loop(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out, uint32_t n_out)
{
    int64_t max_trip = INT64_MAX;
    bool cond = true;
    int rc;
    if (n_in > 0 && in[0]) {
        const bb_tensor_view *m = cpu_tv(in[0]);
        if (cpu_numel(m->ndim, m->dims) != 1)
            return cpu_fail(r, BB_EINVAL, "M must have exactly one element");
        max_trip = cpu_elem_i64(m, 0);
    }
    if (n_in > 1 && in[1] && (rc = scalar_true(r, in[1], "cond", &cond)))
        return rc;
    uint32_t nv = n_in > 2 ? n_in - 2 : 0;
    for (uint32_t i = 0; i < nv; i++)
        if (!in[2 + i])
            return cpu_fail(r, BB_EINVAL, "loop-carried input %u is missing", i);
    cpu_plan *body;
    bool owned;
    if ((rc = child_plan(r, 0, "body", &body, &owned)))
        return rc;
    uint32_t bin = cpu_plan_n_inputs(body), bout = cpu_plan_n_outputs(body);
    if (bin != nv + 2 || bout < nv + 1 || n_out > bout - 1) {
        rc = cpu_fail(r, BB_EINVAL, "body has %u inputs and %u outputs; %u loop-carried values "
                      "need %u inputs and at least %u outputs (node has %u outputs)", bin, bout,
                      nv, nv + 2, nv + 1, n_out);
        cpu_plan_release(body, owned);
        return rc;
    }
    uint32_t nscan = bout - 1 - nv;
    bb_value **carried = calloc(nv + 1, sizeof *carried);
    bb_value **bi = calloc(bin, sizeof *bi);
    bb_value **bo = calloc(bout, sizeof *bo);
    scan_list *scans = calloc(nscan + 1, sizeof *scans);
    if (!carried || !bi || !bo || !scans) {
        rc = cpu_fail(r, BB_ENOMEM, "out of memory");
        goto done;
    }
    for (uint32_t i = 0; i < nv; i++)
        carried[i] = bb_value_ref(in[2 + i]);
    for (int64_t it = 0; it < max_trip && cond; it++) {
        if ((rc = cpu_alloc(r, BB_DT_INT64, 0, NULL, &bi[0])) ||
            (rc = cpu_alloc(r, BB_DT_BOOL, 0, NULL, &bi[1])))
            goto iter_done;
        *(int64_t *)(void *)cpu_tv(bi[0])->data = it;
        cpu_tv(bi[1])->data[0] = 1;
        for (uint32_t i = 0; i < nv; i++)
            bi[2 + i] = carried[i];
        rc = cpu_plan_run(r->be, body, r->scope, bi, bin, bo, bout, r->err);
        if (rc)
            goto iter_done;
        if ((rc = scalar_true(r, bo[0], "body output cond", &cond)))
            goto iter_done;
        for (uint32_t i = 0; i < nv; i++) {
            bb_value_unref(carried[i]);
            carried[i] = bo[1 + i];
            bo[1 + i] = NULL;
        }
        for (uint32_t i = 0; i < nscan; i++) {
            if ((rc = scan_push(r, &scans[i], bo[1 + nv + i])))
                goto iter_done;
            bo[1 + nv + i] = NULL;
        }
    iter_done:
        bb_value_unref(bi[0]);
        bb_value_unref(bi[1]);
        bi[0] = bi[1] = NULL;
        for (uint32_t i = 0; i < bout; i++) {
            bb_value_unref(bo[i]);
            bo[i] = NULL;
        }
        if (rc)
            goto done;
    }
    for (uint32_t i = 0; i < n_out; i++) {
        if (i < nv) {
            out[i] = carried[i];
            carried[i] = NULL;
        } else if ((rc = scan_stack(r, body, 1 + i, &scans[i - nv], &out[i]))) {
            goto done;
        }
    }
done:
    if (carried)
        for (uint32_t i = 0; i < nv; i++)
            bb_value_unref(carried[i]);
    if (scans)
        for (uint32_t i = 0; i < nscan; i++) {
            for (size_t j = 0; j < scans[i].n; j++)
                bb_value_unref(scans[i].v[j]);
            free(scans[i].v);
        }
    free(carried);
    free(bi);
    free(bo);
    free(scans);
    cpu_plan_release(body, owned);
    return rc;
}
