/*
 * syscalls_flow.c — dataflow-shaping framework ops: PassThrough,
 * GateDispatch, OnTrigger, Threshold, Any, DeadlineMatch, Gate,
 * GateManyDispatch, Tee, Constant, CorrelateTag / MintDispatch, Clock,
 * RngU64 and the composite Bundle / Unbundle pair.
 *
 * Values are immutable and refcounted, so forwarding a value anywhere is
 * one reference increment; nothing here copies payload bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "libbbengine/src/syscalls.h"

BBE__SYSCALL(bbe__sys_passthrough)
{
    (void)e, (void)opi, (void)x;
    out[0] = bb_value_ref(in[0]);
    return BBE__R_DONE;
}

BBE__SYSCALL(bbe__sys_ontrigger)
{
    (void)e, (void)opi, (void)x;
    out[0] = bb_value_ref(in[0]);
    return BBE__R_DONE;
}

/* Fires exactly once per execution, once N of its inputs have arrived. */
BBE__SYSCALL(bbe__sys_threshold)
{
    const bbe__op *op = &e->ops[opi];
    if (op->out[0] != BBE__NONE && x->slots[op->out[0]].v)
        return BBE__R_DONE;
    int64_t have = 0;
    for (uint32_t i = 0; i < op->n_in; i++)
        have += in[i] != NULL;
    if (have < op->st->i)
        return BBE__R_DONE;
    out[0] = bbe__trigger(e);
    return BBE__R_DONE;
}

BBE__SYSINIT(bbe__init_threshold)
{
    bool found;
    bbe__opst *st = bbe__opst_new(ins, op);
    if (!st)
        return BB_ENOMEM;
    st->i = bbe__attr_int(op->node, "n", op->n_in, &found);
    if (st->i < 1 || st->i > op->n_in)
        return bbe__node_malformed(ins, op, err, "Threshold n=%lld outside 1..%u",
                                  (long long)st->i, op->n_in);
    return 0;
}

/* First arrival wins; later arrivals in the same execution are ignored. */
BBE__SYSCALL(bbe__sys_any)
{
    const bbe__op *op = &e->ops[opi];
    if (op->out[0] != BBE__NONE && x->slots[op->out[0]].v)
        return BBE__R_DONE;
    for (uint32_t i = 0; i < op->n_in; i++) {
        if (in[i]) {
            out[0] = bb_value_ref(in[i]);
            break;
        }
    }
    return BBE__R_DONE;
}

/* Gate / GateManyDispatch: forward the value once every gate input is in. */
BBE__SYSCALL(bbe__sys_gate)
{
    (void)e, (void)opi, (void)x;
    out[0] = bb_value_ref(in[0]);
    return BBE__R_DONE;
}

BBE__SYSCALL(bbe__sys_tee)
{
    (void)x;
    const bbe__op *op = &e->ops[opi];
    for (uint32_t j = 0; j < op->n_out; j++)
        out[j] = bb_value_ref(in[0]);
    return BBE__R_DONE;
}

BBE__SYSINIT(bbe__init_tee)
{
    bool found;
    int64_t fanout = bbe__attr_int(op->node, "fanout", op->n_out, &found);
    if (found && fanout != op->n_out)
        return bbe__node_malformed(ins, op, err, "Tee fanout=%lld but %u outputs",
                                  (long long)fanout, op->n_out);
    return 0;
}

BBE__SYSCALL(bbe__sys_token)
{
    (void)opi, (void)x, (void)in;
    uint64_t t = bbe__rng_next(e) | 1;
    out[0] = bb_value_u64(&BB_TYPE_CORRELATION_TOKEN, t);
    return out[0] ? BBE__R_DONE : bbe__fail(e, "out of memory");
}

BBE__SYSCALL(bbe__sys_clock)
{
    (void)opi, (void)x, (void)in;
    out[0] = bb_value_u64(&BB_TYPE_TIMESTAMP, e->now_ns);
    return out[0] ? BBE__R_DONE : bbe__fail(e, "out of memory");
}

BBE__SYSCALL(bbe__sys_rng)
{
    (void)opi, (void)x, (void)in;
    out[0] = bb_value_u64(&BB_TYPE_U64, bbe__rng_next(e));
    return out[0] ? BBE__R_DONE : bbe__fail(e, "out of memory");
}

/* ---- Constant ------------------------------------------------------------------ */

static const bb_attr *find_attr(const bb_node *n, const char *name)
{
    for (size_t i = 0; i < n->attrs.n; i++)
        if (n->attrs.v[i]->name && strcmp(n->attrs.v[i]->name, name) == 0)
            return n->attrs.v[i];
    return NULL;
}

static bb_value *tensor_from_proto(const bb_tensor_proto *t, const char **why)
{
    if (t->dims.n > BB_MAX_DIMS) {
        *why = "too many dims";
        return NULL;
    }
    if (t->data_type == BB_DT_STRING || !bb_type_tensor_of(t->data_type)) {
        *why = "unsupported tensor data_type";
        return NULL;
    }
    size_t numel = bb_shape_numel((uint32_t)t->dims.n, t->dims.v);
    size_t nbytes = numel == SIZE_MAX ? SIZE_MAX : bb_dtype_nbytes(t->data_type, numel);
    if (nbytes == SIZE_MAX || nbytes != t->raw_data.len) {
        *why = "raw_data size does not match the shape";
        return NULL;
    }
    bb_value *v = bb_value_tensor_copy(t->data_type, (uint32_t)t->dims.n, t->dims.v,
                                       t->raw_data.data, t->raw_data.len);
    if (!v)
        *why = "out of memory";
    return v;
}

BBE__SYSINIT(bbe__init_constant)
{
    const bb_node *n = op->node;
    const bb_attr *a;
    bb_value *v = NULL;
    const char *why = "no value attribute";
    if ((a = find_attr(n, "value"))) {
        switch (a->type) {
        case BB_ATTR_TENSOR:
            if (a->t)
                v = tensor_from_proto(a->t, &why);
            break;
        case BB_ATTR_INT:
            v = bb_value_u64(&BB_TYPE_U64, (uint64_t)a->i);
            break;
        case BB_ATTR_FLOAT: {
            int64_t none = 0;
            v = bb_value_tensor_copy(BB_DT_FLOAT, 0, &none, &a->f, sizeof a->f);
            break;
        }
        case BB_ATTR_STRING:
            v = bb_value_bytes(&BB_TYPE_BYTES, a->s.data, a->s.len);
            break;
        default:
            why = "unsupported value attribute type";
            break;
        }
    } else if ((a = find_attr(n, "value_int"))) {
        int64_t none = 0;
        v = bb_value_tensor_copy(BB_DT_INT64, 0, &none, &a->i, sizeof a->i);
    } else if ((a = find_attr(n, "value_float"))) {
        int64_t none = 0;
        v = bb_value_tensor_copy(BB_DT_FLOAT, 0, &none, &a->f, sizeof a->f);
    } else if ((a = find_attr(n, "value_string"))) {
        v = bb_value_bytes(&BB_TYPE_BYTES, a->s.data, a->s.len);
    } else if ((a = find_attr(n, "value_ints"))) {
        int64_t dim = (int64_t)a->ints.n;
        v = bb_value_tensor_copy(BB_DT_INT64, 1, &dim, a->ints.v, a->ints.n * sizeof(int64_t));
    } else if ((a = find_attr(n, "value_floats"))) {
        int64_t dim = (int64_t)a->floats.n;
        v = bb_value_tensor_copy(BB_DT_FLOAT, 1, &dim, a->floats.v, a->floats.n * sizeof(float));
    }
    if (!v)
        return bbe__node_malformed(ins, op, err, "Constant: %s", why);
    bbe__opst *st = bbe__opst_new(ins, op);
    if (!st) {
        bb_value_unref(v);
        return BB_ENOMEM;
    }
    st->value = v;
    return 0;
}

/* ---- composite (IR_AND_DSL.md "Composition: bundling typed Outputs") ------------- */

BBE__SYSCALL(bbe__sys_bundle)
{
    (void)x;
    const bbe__op *op = &e->ops[opi];
    for (uint32_t i = 0; i < op->n_in; i++)
        if (!in[i])
            return bbe__fail(e, "Bundle: part %u is absent", i);
    bb_value **items = malloc(op->n_in * sizeof *items);
    if (!items)
        return bbe__fail(e, "Bundle: out of memory");
    for (uint32_t i = 0; i < op->n_in; i++)
        items[i] = bb_value_ref(in[i]);
    out[0] = bb_value_list(&BB_TYPE_COMPOSITE, items, op->n_in);
    free(items);
    return out[0] ? BBE__R_DONE : bbe__fail(e, "Bundle: out of memory");
}

BBE__SYSCALL(bbe__sys_unbundle)
{
    (void)x;
    const bbe__op *op = &e->ops[opi];
    const bb_value *c = in[0];
    if (!c->type || c->type->kind != BB_VK_COMPOSITE)
        return bbe__fail(e, "Unbundle: input is %s, not Composite", c->type ? c->type->name : "?");
    if (c->u.list.n != op->n_out)
        return bbe__fail(e, "Unbundle: composite has %zu children, node declares %u", c->u.list.n,
                        op->n_out);
    for (uint32_t j = 0; j < op->n_out; j++)
        out[j] = bb_value_ref(c->u.list.items[j]);
    return BBE__R_DONE;
}

BBE__SYSINIT(bbe__init_unbundle)
{
    bool found;
    int64_t cc = bbe__attr_int(op->node, BB_META_COMPOSITE_CHILD_COUNT, op->n_out, &found);
    if (found && cc != op->n_out)
        return bbe__node_malformed(ins, op, err, "Unbundle child_count=%lld but %u outputs",
                                  (long long)cc, op->n_out);
    return 0;
}
