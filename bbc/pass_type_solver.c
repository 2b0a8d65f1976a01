/*
 * pass_type_solver.c — narrows every value of the root to a node of the type
 * tree (bb/types.h) by walking the constraint network to a fixpoint:
 *
 *   - a value starts at its value_info type (ANY when absent);
 *   - every port of a node (bound type's declaration first, else the
 *     catalog) meets the value's type with the port's storage type, except
 *     Trigger inputs, which fire on the arrival of any value (the federated
 *     round feeds a CommandId into Aggregate's trigger);
 *   - forwarding ops (PassThrough, Gate, Any, Tee, the five wire gates,
 *     DeadlineCheck,
 *     shape-preserving ai.onnx ops) unify their inputs with their outputs;
 *     Cast yields the `to` leaf, comparisons a bool tensor, Recv/RecvReq
 *     their payload_type attribute;
 *   - across a wire edge the receive side adopts the send's type when its
 *     own is wider (the receive site's type is inferred from the send,
 *     IR_AND_DSL.md Update); a contradicting edge is left to the storage
 *     check, which reports IncompatibleStorageOnEdge.
 *
 * Types only narrow (meet), so the fixpoint terminates. A meet that fails is
 * TypeConstraintFailed naming the node, the port and both types. Strict
 * mode then requires every consumed value (and every function port) to sit
 * on a leaf (UnresolvedType); permissive mode leaves them at ANY. The
 * solved types are written back to value_info.
 *
 * bbc_check_wire_storage is the check after synthesize_wire_recvs. It needs
 * no second fixpoint: the solver already ran the edge rules against the
 * lookup_output formals (adopting a fitting send type), and each
 * synthesized Recv carries its formal's solved type, so solving again
 * would settle on the same types. It compares the two ends of every edge.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/meta.h"
#include "bb/opsets.h"
#include "bbc/compiler_internal.h"
#include "bbc/fnedit.h"
#include "bbc/util.h"
#include "bbc/wire.h"

typedef struct solver {
    bbc_state *st;
    bb_function *f;
    bbc_map idx;                    /* value -> index */
    BB_VEC(const char *) names;
    const bb_type_node **t;
    bool changed;
    /* The worklist: a value whose type narrows re-queues every node that
     * reads or writes it, so a fixpoint costs the ports times the depth of
     * the type tree, whatever the node order. */
    size_t *user_head, *user_next, *user_node; /* value -> nodes touching it */
    size_t n_users;
    size_t *queue;                  /* ring of node indices */
    size_t q_head, q_len;
    bool *queued;
    bool *consumed;                 /* per value: read by a node or a port */
    bbc_fnedit *types;              /* declared types (value_info) of the values */
    const bbc_wire_ix *wx;          /* the wire pairs (built on first use) */
    bbc_map by_port;                /* lookup_output formals by port */
    size_t *next_port;
} solver;

static const char *nm(const bb_node *n)
{
    return n->name && *n->name ? n->name : "(unnamed)";
}

static const char *dom(const bb_node *n)
{
    return bb_domain_is_onnx(n->domain) ? BB_DOMAIN_ONNX : n->domain;
}

static int add_value(solver *s, const char *v)
{
    if (!v || !*v || bbc_map_get(&s->idx, v, NULL))
        return BB_OK;
    const char **slot = BB_VEC_PUSH(s->st->scratch, &s->names);
    if (!slot)
        return BB_ENOMEM;
    *slot = v;
    return bbc_map_put(&s->idx, v, s->names.n - 1);
}

static long vindex(const solver *s, const char *v)
{
    size_t i;
    return (v && *v && bbc_map_get(&s->idx, v, &i)) ? (long)i : -1;
}

static void enqueue(solver *s, size_t node)
{
    size_t cap = s->f->nodes.n;
    if (s->queued[node] || s->q_len == cap)
        return;
    s->queue[(s->q_head + s->q_len++) % cap] = node;
    s->queued[node] = true;
}

/* Value i narrowed: every node touching it is looked at again. */
static void narrowed(solver *s, size_t i)
{
    s->changed = true;
    for (size_t u = s->user_head[i]; u != SIZE_MAX; u = s->user_next[u])
        enqueue(s, s->user_node[u]);
}

static int setup(solver *s)
{
    bb_function *f = s->f;
    bb_arena *a = s->st->scratch;
    size_t ports = 0;
    if (bbc_map_init(&s->idx, a, f->nodes.n + f->inputs.n) != BB_OK) /* ~a value per node */
        return BB_ENOMEM;
    for (size_t i = 0; i < f->inputs.n; i++)
        if (add_value(s, f->inputs.v[i]) != BB_OK)
            return BB_ENOMEM;
    for (size_t i = 0; i < f->nodes.n; i++) {
        const bb_node *n = f->nodes.v[i];
        ports += n->outputs.n + n->inputs.n;
        for (size_t j = 0; j < n->outputs.n; j++)
            if (add_value(s, n->outputs.v[j]) != BB_OK)
                return BB_ENOMEM;
        for (size_t j = 0; j < n->inputs.n; j++)
            if (add_value(s, n->inputs.v[j]) != BB_OK)
                return BB_ENOMEM;
    }
    if (!(s->types = bbc_fnedit_new_types(a, s->st->model->arena, f, &s->idx)))
        return BB_ENOMEM;
    size_t nv = s->names.n + 1, nn = f->nodes.n + 1;
    s->t = bb_arena_calloc(a, nv, sizeof *s->t);
    s->consumed = bb_arena_calloc(a, nv, sizeof *s->consumed);
    s->user_head = bb_arena_calloc(a, nv, sizeof *s->user_head);
    s->user_next = bb_arena_calloc(a, ports + 1, sizeof *s->user_next);
    s->user_node = bb_arena_calloc(a, ports + 1, sizeof *s->user_node);
    s->queue = bb_arena_calloc(a, nn, sizeof *s->queue);
    s->queued = bb_arena_calloc(a, nn, sizeof *s->queued);
    if (!s->t || !s->consumed || !s->user_head || !s->user_next || !s->user_node || !s->queue ||
        !s->queued)
        return BB_ENOMEM;
    for (size_t i = 0; i < s->names.n; i++) {
        const bb_type_node *t = bbc_fnedit_type(s->types, s->names.v[i]);
        s->t[i] = t ? t : &BB_TYPE_ANY;
        s->user_head[i] = SIZE_MAX;
    }
    for (size_t i = 0; i < f->nodes.n; i++) {
        const bb_node *n = f->nodes.v[i];
        for (size_t j = 0; j < n->outputs.n + n->inputs.n; j++) {
            bool in = j >= n->outputs.n;
            long v = vindex(s, in ? n->inputs.v[j - n->outputs.n] : n->outputs.v[j]);
            if (v < 0)
                continue;
            s->user_node[s->n_users] = i;
            s->user_next[s->n_users] = s->user_head[v];
            s->user_head[v] = s->n_users++;
            s->consumed[v] |= in;
        }
    }
    for (size_t i = 0; i < f->inputs.n + f->outputs.n; i++) {
        long v = vindex(s, i < f->inputs.n ? f->inputs.v[i] : f->outputs.v[i - f->inputs.n]);
        if (v >= 0)
            s->consumed[v] = true;
    }
    return BB_OK;
}

/* Narrow value v to port type p at node n. */
static int constrain(solver *s, const bb_node *n, const char *what, size_t pos,
                     const char *port, const char *v, const bb_type_node *p)
{
    long i = vindex(s, v);
    if (i < 0 || !p || p == &BB_TYPE_ANY)
        return BB_OK;
    const bb_type_node *m = bb_type_meet(s->t[i], p);
    if (!m)
        return bbc_fail(s->st, BBC_E_TYPE_CONSTRAINT_FAILED,
                        "node '%s' (%s::%s) %s %zu ('%s') takes %s but '%s' is %s", nm(n),
                        dom(n), n->op_type, what, pos, port ? port : "?", p->name, v,
                        s->t[i]->name);
    if (m != s->t[i]) {
        s->t[i] = m;
        narrowed(s, (size_t)i);
    }
    return BB_OK;
}

/* Unify values a and b (both narrowed to their meet). */
static int unify(solver *s, const bb_node *n, const char *a, const char *b)
{
    long i = vindex(s, a), j = vindex(s, b);
    if (i < 0 || j < 0 || i == j)
        return BB_OK;
    const bb_type_node *m = bb_type_meet(s->t[i], s->t[j]);
    if (!m)
        return bbc_fail(s->st, BBC_E_TYPE_CONSTRAINT_FAILED,
                        "node '%s' (%s::%s) forwards '%s' (%s) as '%s' (%s): the types differ",
                        nm(n), dom(n), n->op_type, a, s->t[i]->name, b, s->t[j]->name);
    if (m != s->t[i]) {
        s->t[i] = m;
        narrowed(s, (size_t)i);
    }
    if (m != s->t[j]) {
        s->t[j] = m;
        narrowed(s, (size_t)j);
    }
    return BB_OK;
}

static bool in_list(const char *op, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(op, *list) == 0)
            return true;
    return false;
}

/* ai.onnx ops whose tensor output has the dtype of their first input. */
static const char *const ONNX_SAME[] = {
    "Add", "Sub", "Mul", "Div", "Neg", "Abs", "Sqrt", "Exp", "Log", "Pow", "MatMul", "Gemm",
    "Dot", "Relu", "Sigmoid", "Tanh", "Softmax", "LeakyRelu", "Gelu", "Reshape", "Transpose",
    "Concat", "Split", "Slice", "Squeeze", "Unsqueeze", "Identity", "ReduceSum", "ReduceMean",
    "ReduceMax", "ReduceMin", "BatchNormalization", "LayerNormalization", "Conv", "MaxPool",
    "AveragePool", "GlobalAveragePool", "Gather", "Scatter", NULL};
/* Pow is not here: its exponent may have another dtype (ONNX T1). */
static const char *const ONNX_BINARY[] = {"Add", "Sub", "Mul", "Div", "MatMul", "Dot",
                                          "Concat", NULL};
static const char *const ONNX_COMPARE[] = {"Equal", "Greater", "Less", NULL};
static const char *const SYS_FORWARD[] = {"PassThrough", "Gate", BB_OP_DEDUP_GATE_RX,
                                          BB_OP_PEER_HEALTH_GATE_RX, BB_OP_BACKOFF_GATE_RX,
                                          BB_OP_PEER_HEALTH_GATE_TX, BB_OP_BACKOFF_GATE_TX,
                                          BB_OP_DEADLINE_CHECK, "GateDispatch",
                                          "GateManyDispatch", NULL};

static int op_rules(solver *s, const bb_node *n)
{
    int rc = BB_OK;
    if (bb_domain_is_onnx(n->domain) && n->op_type) {
        if (in_list(n->op_type, ONNX_SAME) && n->inputs.n > 0) {
            /* Only Split's outputs all share the input's dtype: MaxPool's
             * Indices is int64, the norms' statistics may be another float. */
            size_t n_same = strcmp(n->op_type, "Split") == 0 ? n->outputs.n
                                                              : (n->outputs.n > 0);
            for (size_t j = 0; j < n_same && rc == BB_OK; j++)
                rc = unify(s, n, n->inputs.v[0], n->outputs.v[j]);
            if (in_list(n->op_type, ONNX_BINARY))
                for (size_t j = 1; j < n->inputs.n && rc == BB_OK; j++)
                    rc = unify(s, n, n->inputs.v[0], n->inputs.v[j]);
        } else if (in_list(n->op_type, ONNX_COMPARE) && n->inputs.n >= 2) {
            rc = unify(s, n, n->inputs.v[0], n->inputs.v[1]);
            if (rc == BB_OK && n->outputs.n > 0)
                rc = constrain(s, n, "output", 0, "C", n->outputs.v[0], &BB_TYPE_TENSOR_BOOL);
        } else if (strcmp(n->op_type, "Cast") == 0 && n->outputs.n > 0) {
            const bb_type_node *to = bb_type_tensor_of((int32_t)bb_node_attr_int(n, "to", 0));
            if (to)
                rc = constrain(s, n, "output", 0, "output", n->outputs.v[0], to);
        }
        return rc;
    }
    if (bbc_str_eq(n->domain, BB_DOMAIN_SYSCALL) && n->op_type) {
        if (in_list(n->op_type, SYS_FORWARD) && n->inputs.n > 0 && n->outputs.n > 0)
            return unify(s, n, n->inputs.v[0], n->outputs.v[0]);
        if (strcmp(n->op_type, "Any") == 0 && n->outputs.n > 0) {
            for (size_t j = 0; j < n->inputs.n && rc == BB_OK; j++)
                rc = unify(s, n, n->inputs.v[j], n->outputs.v[0]);
            return rc;
        }
        if (strcmp(n->op_type, "Tee") == 0 && n->inputs.n > 0) {
            for (size_t j = 0; j < n->outputs.n && rc == BB_OK; j++)
                rc = unify(s, n, n->inputs.v[0], n->outputs.v[j]);
            return rc;
        }
        if (strcmp(n->op_type, "Constant") == 0 && n->outputs.n > 0) {
            const bb_attr *v = bb_node_attr(n, "value");
            const bb_type_node *t = v && v->t ? bb_type_tensor_of(v->t->data_type) : NULL;
            if (t)
                return constrain(s, n, "output", 0, "value", n->outputs.v[0], t);
        }
        return BB_OK;
    }
    if (bbc_is_wire_recv(n) && n->outputs.n > BBC_RECV_PAYLOAD) {
        const bb_attr *pt = bb_node_attr(n, BB_ATTR_NAME_PAYLOAD_TYPE);
        const bb_type_node *t = pt && pt->tp ? bb_type_from_proto(pt->tp) : NULL;
        if (t)
            return constrain(s, n, "output", BBC_RECV_PAYLOAD, "payload",
                             n->outputs.v[BBC_RECV_PAYLOAD], t);
    }
    return BB_OK;
}

static int port_rules(solver *s, const bb_node *n)
{
    bbc_sig sig;
    /* Compiler-inserted gates forward their input (TX gates too: see gates.h). */
    if (bb_op_is_gate(n->domain, n->op_type) || !bbc_node_sig(s->st, n, &sig))
        return BB_OK;
    int rc;
    for (size_t j = 0; j < n->inputs.n; j++) {
        const bb_port_decl *p = bbc_sig_in(&sig, j);
        /* A Trigger input fires on the arrival of any value. */
        if (p && p->type == &BB_TYPE_TRIGGER)
            continue;
        if (p && (rc = constrain(s, n, "input", j, p->name, n->inputs.v[j], p->type)) != BB_OK)
            return rc;
    }
    for (size_t j = 0; j < n->outputs.n; j++) {
        const bb_port_decl *p = bbc_sig_out(&sig, j);
        if (p && (rc = constrain(s, n, "output", j, p->name, n->outputs.v[j], p->type)) != BB_OK)
            return rc;
    }
    return BB_OK;
}

/* Receive side adopts the send's narrower type (never a contradiction). */
static void adopt(solver *s, const char *from, const char *to)
{
    long i = vindex(s, from), j = vindex(s, to);
    if (i < 0 || j < 0 || s->t[i] == s->t[j])
        return;
    if (bb_type_is_a(s->t[i], s->t[j])) {
        s->t[j] = s->t[i];
        narrowed(s, (size_t)j);
    }
}

static int edge_rules(solver *s)
{
    bb_function *f = s->f;
    const bbc_state *st = s->st;
    if (!s->wx) {
        /* lookup_output formals by port (the net_ins of the root). */
        if (!(s->wx = bbc_wire_ix_new(st->scratch, f)) ||
            bbc_map_init(&s->by_port, st->scratch, st->net_ins.n) != BB_OK ||
            !(s->next_port = bb_arena_calloc(st->scratch, st->net_ins.n + 1, sizeof *s->next_port)))
            return BB_ENOMEM;
        for (size_t k = st->net_ins.n; s->f == st->root && k-- > 0;) {
            s->next_port[k] = SIZE_MAX;
            bbc_map_get(&s->by_port, st->net_ins.v[k].port, &s->next_port[k]);
            if (bbc_map_put(&s->by_port, st->net_ins.v[k].port, k) != BB_OK)
                return BB_ENOMEM;
        }
    }
    const bbc_wire_ix *x = s->wx;
    const bbc_map *by_port = &s->by_port;
    const size_t *next = s->next_port;
    for (size_t i = 0; i < f->nodes.n; i++) {
        const bb_node *n = f->nodes.v[i];
        if (!bbc_is_wire_send(n) || n->inputs.n == 0)
            continue;
        if (bbc_node_is(n, BB_DOMAIN_WIRE, BB_OP_WIRE_SEND_RESP))
            continue; /* responses arrive as a ResponseBatch */
        const size_t *rx;
        size_t k;
        if (bbc_wire_receivers(x, i, st->scratch, &rx, &k) != BB_OK)
            return BB_ENOMEM;
        for (size_t r = 0; r < k; r++) {
            const bb_node *rn = f->nodes.v[rx[r]];
            if (rn->outputs.n > BBC_RECV_PAYLOAD)
                adopt(s, n->inputs.v[BBC_SEND_DATA], rn->outputs.v[BBC_RECV_PAYLOAD]);
        }
        /* lookup_output formals not yet materialized as a Recv. */
        const char *port = bbc_meta(n, BB_META_PORT);
        const char *dest = bbc_meta(n, BB_META_DEST_CLASS);
        size_t k2 = SIZE_MAX;
        if (port && s->f == st->root)
            bbc_map_get(by_port, port, &k2);
        for (; k2 != SIZE_MAX; k2 = next[k2]) {
            const bbc_net_in *ni = &st->net_ins.v[k2];
            if (!dest || !ni->cls || bbc_str_eq(dest, ni->cls))
                adopt(s, n->inputs.v[BBC_SEND_DATA], ni->value);
        }
    }
    return BB_OK;
}

static const char *producer_label(bb_arena *a, const bb_function *f, const char *v)
{
    for (size_t i = 0; i < f->nodes.n; i++) {
        const bb_node *n = f->nodes.v[i];
        if (bb_str_list_find(&n->outputs, v) >= 0)
            return bb_arena_sprintf(a, "node '%s' (%s::%s)", nm(n), dom(n), n->op_type);
    }
    return "a function input";
}

/* Solve f and write the types back to value_info; s keeps what the strict
 * check needs. */
static int solve_types(bbc_state *st, bb_function *f, solver *s)
{
    *s = (solver){.st = st, .f = f};
    if (setup(s) != BB_OK)
        return bbc_oom(st);
    /* Types only narrow: each value changes at most the depth of the type
     * tree times, so this bound is never reached by a correct solver. */
    size_t limit = (s->n_users + f->nodes.n + 1) * 16;
    size_t steps = 0;
    int rc;
    for (size_t i = 0; i < f->nodes.n; i++)
        enqueue(s, i);
    for (;;) {
        while (s->q_len > 0) {
            size_t i = s->queue[s->q_head];
            s->q_head = (s->q_head + 1) % f->nodes.n;
            s->q_len--;
            s->queued[i] = false;
            if (++steps > limit)
                return bbc_fail(st, BBC_E_INTERNAL,
                                "type solver did not converge in function '%s'", f->name);
            const bb_node *n = f->nodes.v[i];
            if ((rc = port_rules(s, n)) != BB_OK || (rc = op_rules(s, n)) != BB_OK)
                return rc;
        }
        s->changed = false;
        if (edge_rules(s) != BB_OK)
            return bbc_oom(st);
        if (!s->changed)
            break;
    }
    for (size_t i = 0; i < s->names.n; i++) {
        const char *v = s->names.v[i];
        const bb_type_node *t = s->t[i];
        if (bbc_fnedit_type(s->types, v) != t && bbc_fnedit_set_type(s->types, v, t) != BB_OK)
            return bbc_oom(st);
    }
    return BB_OK;
}

/* Strict mode: every consumed value (and every function port) must sit on a
 * leaf of the type tree. */
static int check_resolved(const solver *s)
{
    for (size_t i = 0; i < s->names.n; i++)
        if (!bb_type_is_leaf(s->t[i]) && s->consumed[i])
            return bbc_fail(s->st, BBC_E_UNRESOLVED_TYPE,
                            "function '%s': value '%s' (from %s) stays %s; a port or a binding "
                            "must narrow it (or compile with --permissive-types)",
                            s->f->name, s->names.v[i],
                            producer_label(s->st->scratch, s->f, s->names.v[i]), s->t[i]->name);
    return BB_OK;
}

static int solve(bbc_state *st, bb_function *f, bool strict)
{
    solver s;
    int rc = solve_types(st, f, &s);
    return rc == BB_OK && strict ? check_resolved(&s) : rc;
}

int bbc_pass_type_solver(bbc_state *st)
{
    if (st->parts.n > 0) {
        for (size_t i = 0; i < st->parts.n; i++) {
            bbc_partition *p = st->parts.v[i];
            bb_model *saved = st->model;
            st->model = p->model;
            int rc = solve(st, p->fn, !st->opts->permissive_types);
            st->model = saved;
            if (rc != BB_OK)
                return rc;
        }
        return BB_OK;
    }
    return solve(st, st->root, !st->opts->permissive_types);
}

/* ---- the re-run after synthesize_wire_recvs ----------------------------------------- */

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The Codec types whose `op` (Compress or Decompress) takes `from` and
 * gives `to`, per their plugins' port declarations: "a, b or c" into out
 * (empty when none). */
static void bridging_codecs(const bbc_state *st, const char *op, const bb_type_node *from,
                            const bb_type_node *to, char *out, size_t cap)
{
    const char *names[32];
    size_t n = 0, count = bb_type_source_count(st->types);
    for (size_t i = 0; i < count && n < sizeof names / sizeof *names; i++) {
        const bb_component_type *t = bb_type_source_at(st->types, i);
        const bb_op_decl *d = t && t->role == BB_ROLE_CODEC
                                  ? bb_component_type_find_op(t, BB_DOMAIN_ROLE_COMPRESSOR, op,
                                                              NULL)
                                  : NULL;
        if (d && d->n_inputs >= 1 && d->n_outputs >= 1 && d->inputs[0].type &&
            d->outputs[0].type && bb_type_is_a(from, d->inputs[0].type) &&
            bb_type_is_a(d->outputs[0].type, to))
            names[n++] = t->type_name;
    }
    qsort(names, n, sizeof *names, by_name);
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && used < cap; i++)
        used += (size_t)snprintf(out + used, cap - used, "%s%s", i == 0 ? ""
                                                                 : i + 1 < n ? ", " : " or ",
                                 names[i]);
}

/* What to do about an edge from `from` to `to`: bind a codec that bridges
 * them (named, when a plugin declares one), else the generic remedy. */
static void codec_hint(const bbc_state *st, const bb_type_node *from, const bb_type_node *to,
                       char *out, size_t cap)
{
    char names[200];
    bridging_codecs(st, "Compress", from, to, names, sizeof names);
    if (names[0]) {
        snprintf(out, cap,
                 "bind a Codec that bridges them (%s) and record its Compress on the sender",
                 names);
        return;
    }
    bridging_codecs(st, "Decompress", from, to, names, sizeof names);
    if (names[0]) {
        snprintf(out, cap,
                 "bind a Codec that bridges them (%s) and record its Decompress on the "
                 "receiver",
                 names);
        return;
    }
    bool ft = bb_type_is_a(from, &BB_TYPE_TENSOR), tt = bb_type_is_a(to, &BB_TYPE_TENSOR);
    snprintf(out, cap, "%s",
             ft && tt ? "bind a Codec slot and record Compress on the sender and Decompress on "
                        "the receiver (ai.bytesandbrains.role.compressor), or Cast the tensor "
                        "before the send"
             : ft || tt ? "bridge with a Codec (ai.bytesandbrains.role.compressor "
                          "Compress/Decompress)"
                        : "send a value of the receiver's type, or Bundle/Unbundle the parts "
                          "(ai.bytesandbrains.composite)");
}

int bbc_check_wire_storage(bbc_state *st)
{
    bb_function *f = st->root;
    const bbc_wire_ix *x = bbc_wire_ix_new(st->scratch, f);
    bbc_map focus; /* the two ends' values */
    if (!x || bbc_map_init(&focus, st->scratch, 16) != BB_OK || bbc_wire_ends(f, &focus) != BB_OK)
        return bbc_oom(st);
    bbc_fnedit *types = bbc_fnedit_new_types(st->scratch, st->model->arena, f, &focus);
    if (!types)
        return bbc_oom(st);
    for (size_t i = 0; i < f->nodes.n; i++) {
        const bb_node *s = f->nodes.v[i];
        if (!bbc_is_wire_send(s) || s->inputs.n == 0 ||
            bbc_node_is(s, BB_DOMAIN_WIRE, BB_OP_WIRE_SEND_RESP))
            continue;
        const size_t *rx;
        size_t k;
        if (bbc_wire_receivers(x, i, st->scratch, &rx, &k) != BB_OK)
            return bbc_oom(st);
        for (size_t r = 0; r < k; r++) {
            bb_node *rn = f->nodes.v[rx[r]];
            if (rn->outputs.n <= BBC_RECV_PAYLOAD)
                continue;
            const char *sv = s->inputs.v[BBC_SEND_DATA], *rv = rn->outputs.v[BBC_RECV_PAYLOAD];
            const bb_type_node *ts = bbc_fnedit_type(types, sv), *tr = bbc_fnedit_type(types, rv);
            if (!ts)
                ts = &BB_TYPE_ANY;
            if (!tr)
                tr = &BB_TYPE_ANY;
            if (!bb_type_meet(ts, tr)) {
                char hint[320];
                codec_hint(st, ts, tr, hint, sizeof hint);
                return bbc_fail(st, BBC_E_INCOMPATIBLE_STORAGE_ON_EDGE,
                                "wire edge %s '%s' -> %s '%s'%s%s%s: the sender's '%s' is "
                                "%s (type id 0x%016llx) but the receiver's '%s' is %s (type "
                                "id 0x%016llx); %s",
                                s->op_type, nm(s), rn->op_type, nm(rn),
                                bbc_meta(s, BB_META_PORT) ? " (port '" : "",
                                bbc_meta(s, BB_META_PORT) ? bbc_meta(s, BB_META_PORT) : "",
                                bbc_meta(s, BB_META_PORT) ? "')" : "", sv, ts->name,
                                (unsigned long long)ts->wire_hash, rv, tr->name,
                                (unsigned long long)tr->wire_hash, hint);
            }
            /* Record the accepted payload type on the receive site. */
            const bb_attr *pt = bb_node_attr(rn, BB_ATTR_NAME_PAYLOAD_TYPE);
            const bb_type_node *have = pt && pt->tp ? bb_type_from_proto(pt->tp) : NULL;
            if (bb_type_is_leaf(tr) && have != tr) {
                bb_attr *at = NULL;
                for (size_t j = 0; j < rn->attrs.n; j++)
                    if (bbc_str_eq(rn->attrs.v[j]->name, BB_ATTR_NAME_PAYLOAD_TYPE))
                        at = rn->attrs.v[j];
                if (!at && !(at = bb_node_add_attr(st->model->arena, rn,
                                                   BB_ATTR_NAME_PAYLOAD_TYPE,
                                                   BB_ATTR_TYPE_PROTO)))
                    return bbc_oom(st);
                at->type = BB_ATTR_TYPE_PROTO;
                if (!(at->tp = bb_type_to_proto(st->model->arena, tr)))
                    return bbc_oom(st);
            }
        }
    }
    return BB_OK;
}
