/*
 * graph.c — the whole-graph executor of cpu::CpuBackend (execute_graph,
 * and the If/Loop bodies).
 *
 * A graph is compiled once into a plan: every value name becomes a slot
 * index, every node gets its kernel index and input/output slots,
 * initializers and Constant nodes are converted to values once, and each
 * node carries the list of slots whose last reader it is (so
 * intermediates are released as soon as they are dead). If/Loop subgraphs
 * become child plans; a name a subgraph reads but does not define is an
 * outer-scope reference, resolved at run time through the chain of
 * enclosing frames and counted as a read by the If/Loop node for
 * liveness. Running a plan is then array indexing only.
 *
 * Plans are cached per bb_graph pointer on the instance (checked against
 * a fingerprint of the graph's arrays); beyond max_cached_graphs a plan is
 * built for one call and freed after it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#define MAX_GRAPH_DEPTH 64

/* ---- name -> slot map (open addressing, borrowed keys) --------------------- */

static uint64_t name_hash(const char *s)
{
    return bb_fnv1a64(s, strlen(s));
}

int32_t cpu_name_map_get(const cpu_name_map *m, const char *k)
{
    if (!m->cap)
        return -1;
    for (size_t i = name_hash(k) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i])
            return -1;
        if (strcmp(m->keys[i], k) == 0)
            return m->vals[i];
    }
}

void cpu_name_map_put(cpu_name_map *m, const char *k, int32_t v)
{
    size_t i = name_hash(k) & (m->cap - 1);
    while (m->keys[i])
        i = (i + 1) & (m->cap - 1);
    m->keys[i] = k;
    m->vals[i] = v;
}

/* ---- plans ---------------------------------------------------------------- */

struct cpu_plan_node {
    const bb_node *node;
    cpu_op op;
    uint32_t n_in, n_out;
    int32_t *in;         /* slot per input, -1 for "" */
    int32_t *out;        /* slot per output, -1 for "" */
    uint32_t n_release;
    int32_t *release;    /* slots dead after this node */
    cpu_plan *child[2];  /* If: then, else; Loop: body */
    bb_value *fused_w;   /* Conv with a BatchNormalization folded in: its weights, */
    bb_value *fused_b;   /* and bias (owned), used instead of inputs 1 and 2 */
    bool fused_relu;     /* a Relu in its epilogue (f32 Conv or Gemm) */
    cpu_dnn_chain *dnn;  /* this node and the next n_absorbed as one oneDNN chain (owned) */
    cpu_plan_node *absorbed;      /* those nodes, run one by one where the chain cannot */
    uint32_t n_absorbed;
    const bb_value **dnn_w, **dnn_b; /* per layer: weights and bias (borrowed), or NULL */
};

struct cpu_plan {
    bb_arena *arena;
    const bb_graph *g;
    /* fingerprint: the cache entry is stale when these change */
    const void *fp_nodes, *fp_inits;
    size_t fp_n_nodes, fp_n_inits, fp_n_in, fp_n_out;
    uint32_t n_slots;
    const char **slot_name;
    bb_value **konst;    /* initializer / Constant value per slot (owned), or NULL */
    int32_t *def_node;   /* producing node index; -1 input/initializer/outer */
    cpu_name_map map;
    uint32_t n_in, n_out, n_outer;
    int32_t *in_slot, *out_slot, *outer_slot;
    uint32_t n_nodes;
    cpu_plan_node *nodes;
    uint32_t max_io;
};


static const char *gname(const bb_graph *g)
{
    return g && g->name ? g->name : "";
}

static const char *nname(const bb_node *n)
{
    return n->name && *n->name ? n->name : "";
}

static void plan_node_free(cpu_plan_node *pn)
{
    cpu_plan_free(pn->child[0]);
    cpu_plan_free(pn->child[1]);
    bb_value_unref(pn->fused_w);
    bb_value_unref(pn->fused_b);
    cpu_dnn_chain_free(pn->dnn);
    for (uint32_t j = 0; j < pn->n_absorbed; j++)
        plan_node_free(&pn->absorbed[j]);
}

void cpu_plan_free(cpu_plan *p)
{
    if (!p)
        return;
    for (uint32_t i = 0; i < p->n_nodes; i++)
        plan_node_free(&p->nodes[i]);
    for (uint32_t s = 0; s < p->n_slots; s++)
        bb_value_unref(p->konst[s]);
    bb_arena_destroy(p->arena);
}

uint32_t cpu_plan_n_inputs(const cpu_plan *p)
{
    return p->n_in;
}

uint32_t cpu_plan_n_outputs(const cpu_plan *p)
{
    return p->n_out;
}

cpu_plan *cpu_plan_node_child(const cpu_plan_node *pn, uint32_t i)
{
    return pn && i < 2 ? pn->child[i] : NULL;
}

bool cpu_plan_output_type(const cpu_plan *p, uint32_t i, int32_t *dtype, uint32_t *ndim,
                          int64_t *dims)
{
    if (i >= p->g->outputs.n)
        return false;
    const bb_value_info *vi = p->g->outputs.v[i];
    const bb_type_proto *t = vi ? vi->type : NULL;
    if (!t || t->kind != BB_TP_TENSOR || !bb_tensor_elem_size(t->elem_type))
        return false;
    *dtype = t->elem_type;
    *ndim = 0;
    if (t->has_shape && t->shape.n < BB_MAX_DIMS) {
        for (size_t d = 0; d < t->shape.n; d++)
            if (!t->shape.v[d].has_value || t->shape.v[d].value < 0)
                return true; /* dtype known, shape not */
        *ndim = (uint32_t)t->shape.n;
        for (size_t d = 0; d < t->shape.n; d++)
            dims[d] = t->shape.v[d].value;
    }
    return true;
}

/* Builder state. */
typedef struct builder {
    cpu_backend *be;
    cpu_plan *p;
    uint32_t cap_slots;
    bb_error *err;
    /* per slot, while planning the nodes: */
    uint32_t *last_use; /* the last executed node reading it (NO_NODE: none) */
    uint32_t *prod;     /* the executed node producing it (NO_NODE: none) */
    bool *is_out;       /* a graph output: never released */
} builder;

#define NO_NODE UINT32_MAX

static int bfail(builder *b, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bfail(builder *b, int code, const char *fmt, ...)
{
    char msg[BB_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return bb_error_set(b->err, code, CPU_NAME ": graph '%s': %s", gname(b->p->g), msg);
}

/* New slot for name (caller checked it is absent). */
static int32_t slot_add(builder *b, const char *name, int32_t def)
{
    cpu_plan *p = b->p;
    int32_t s = (int32_t)p->n_slots++;
    p->slot_name[s] = name;
    p->def_node[s] = def;
    cpu_name_map_put(&p->map, name, s);
    return s;
}

/* New slot for a name this graph reads from an enclosing scope. */
static int32_t outer_add(builder *b, const char *name)
{
    cpu_plan *p = b->p;
    int32_t s = slot_add(b, name, -1);
    p->outer_slot[p->n_outer++] = s;
    return s;
}

static int plan_build(cpu_backend *be, const bb_graph *g, uint32_t depth, cpu_plan **out,
                      bb_error *err);

/* Count every name the graph can define or read (upper bound of slots). */
static size_t count_names(const bb_graph *g)
{
    size_t n = g->inputs.n + g->initializers.n + g->outputs.n;
    for (size_t i = 0; i < g->nodes.n; i++)
        n += g->nodes.v[i]->inputs.n + g->nodes.v[i]->outputs.n;
    return n;
}

/* Node i as executed node k: its op and its input and output slots. */
static int plan_node_io(builder *b, size_t i, uint32_t k, cpu_plan_node *pn)
{
    cpu_plan *p = b->p;
    const bb_node *n = p->g->nodes.v[i];
    bool onnx = !n->domain || !*n->domain || strcmp(n->domain, "ai.onnx") == 0;
    int op = onnx ? cpu_op_lookup(n->op_type) : -1;
    if (op < 0)
        return bfail(b, BB_EUNSUPPORTED, "node '%s': op %s::%s not supported", nname(n),
                     onnx ? "ai.onnx" : n->domain, n->op_type ? n->op_type : "?");
    if (n->inputs.n > UINT32_MAX / 2 || n->outputs.n > UINT32_MAX / 2)
        return bfail(b, BB_ELIMIT, "node '%s': too many inputs/outputs", nname(n));
    pn->node = n;
    pn->op = (cpu_op)op;
    pn->n_in = (uint32_t)n->inputs.n;
    pn->n_out = (uint32_t)n->outputs.n;
    pn->in = bb_arena_calloc(p->arena, pn->n_in + 1, sizeof *pn->in);
    pn->out = bb_arena_calloc(p->arena, pn->n_out + 1, sizeof *pn->out);
    if (!pn->in || !pn->out)
        return bfail(b, BB_ENOMEM, "out of memory");
    if (pn->n_in > p->max_io)
        p->max_io = pn->n_in;
    if (pn->n_out > p->max_io)
        p->max_io = pn->n_out;
    /* inputs: defined earlier, or an outer-scope reference */
    for (uint32_t j = 0; j < pn->n_in; j++) {
        const char *nm = n->inputs.v[j];
        if (!nm || !*nm) {
            pn->in[j] = -1;
            continue;
        }
        int32_t s = cpu_name_map_get(&p->map, nm);
        if (s < 0)
            s = outer_add(b, nm);
        else if (p->def_node[s] >= (int32_t)i)
            return bfail(b, BB_EINVAL, "node '%s' (%s) reads '%s' before it is produced "
                         "(nodes are not topologically sorted)", nname(n), n->op_type, nm);
        pn->in[j] = s;
        b->last_use[s] = k;
    }
    for (uint32_t j = 0; j < pn->n_out; j++) {
        const char *nm = n->outputs.v[j];
        pn->out[j] = nm && *nm ? cpu_name_map_get(&p->map, nm) : -1;
        if (pn->out[j] >= 0)
            b->prod[pn->out[j]] = k;
    }
    return BB_OK;
}

/* If / Loop: child plans; their outer names are reads of this node. */
static int plan_subgraphs(builder *b, size_t i, uint32_t k, cpu_plan_node *pn, uint32_t depth)
{
    cpu_plan *p = b->p;
    const bb_node *n = pn->node;
    const char *keys[2] = {pn->op == CPU_OP_If ? "then_branch" : "body",
                           pn->op == CPU_OP_If ? "else_branch" : NULL};
    for (int c = 0; c < 2 && keys[c]; c++) {
        const bb_attr *at = cpu_attr(n, keys[c]);
        if (!at || at->type != BB_ATTR_GRAPH || !at->g)
            return bfail(b, BB_EINVAL, "node '%s' (%s): graph attribute %s is missing",
                         nname(n), n->op_type, keys[c]);
        int rc = plan_build(b->be, at->g, depth + 1, &pn->child[c], b->err);
        if (rc)
            return rc;
        const cpu_plan *ch = pn->child[c];
        for (uint32_t q = 0; q < ch->n_outer; q++) {
            const char *nm = ch->slot_name[ch->outer_slot[q]];
            int32_t s = cpu_name_map_get(&p->map, nm);
            if (s < 0) {
                if (p->n_slots >= b->cap_slots)
                    return bfail(b, BB_ELIMIT, "too many outer-scope names");
                s = outer_add(b, nm);
            } else if (p->def_node[s] >= (int32_t)i) {
                return bfail(b, BB_EINVAL, "node '%s' (%s): subgraph %s reads '%s' "
                             "before it is produced", nname(n), n->op_type, keys[c], nm);
            }
            b->last_use[s] = k;
        }
    }
    return BB_OK;
}

/* Constant: evaluate once, keep the value in the plan. */
static int plan_constant(builder *b, const cpu_plan_node *pn)
{
    const bb_node *n = pn->node;
    if (pn->n_out != 1 || pn->out[0] < 0)
        return bfail(b, BB_EINVAL, "node '%s' (Constant) must have one output", nname(n));
    cpu_run r = {.be = b->be, .node = n, .op = CPU_OP_Constant, .err = b->err};
    bb_value *v = NULL;
    int rc = cpu_run_kernel(&r, NULL, 0, &v, 1);
    if (rc)
        return rc;
    b->p->konst[pn->out[0]] = v;
    return BB_OK;
}

/* graph outputs: produced here, or passed through from an enclosing scope */
static int plan_outputs(builder *b)
{
    cpu_plan *p = b->p;
    const bb_graph *g = p->g;
    p->n_out = (uint32_t)g->outputs.n;
    p->out_slot = bb_arena_calloc(p->arena, p->n_out + 1, sizeof *p->out_slot);
    if (!p->out_slot)
        return bfail(b, BB_ENOMEM, "out of memory");
    for (uint32_t j = 0; j < p->n_out; j++) {
        const bb_value_info *vi = g->outputs.v[j];
        if (!vi || !vi->name || !*vi->name)
            return bfail(b, BB_EINVAL, "output %u has no name", j);
        int32_t s = cpu_name_map_get(&p->map, vi->name);
        if (s < 0) {
            if (p->n_slots >= b->cap_slots)
                return bfail(b, BB_ELIMIT, "too many names");
            s = outer_add(b, vi->name);
        }
        p->out_slot[j] = s;
        b->is_out[s] = true;
    }
    return BB_OK;
}

/* release lists: each dead intermediate goes right after its last
 * reader (a value nobody reads, right after its producer) */
static int plan_releases(builder *b)
{
    cpu_plan *p = b->p;
    uint32_t k = p->n_nodes;
    uint32_t *cnt = bb_arena_calloc(p->arena, k + 1, sizeof *cnt);
    if (!cnt)
        return bfail(b, BB_ENOMEM, "out of memory");
    for (uint32_t s = 0; s < p->n_slots; s++) {
        if (b->last_use[s] == NO_NODE && b->prod[s] != NO_NODE && !p->konst[s])
            b->last_use[s] = b->prod[s];
        if (b->last_use[s] != NO_NODE && !b->is_out[s])
            cnt[b->last_use[s]]++;
    }
    for (uint32_t i = 0; i < k; i++) {
        p->nodes[i].release = bb_arena_calloc(p->arena, cnt[i] + 1, sizeof(int32_t));
        if (!p->nodes[i].release)
            return bfail(b, BB_ENOMEM, "out of memory");
    }
    for (uint32_t s = 0; s < p->n_slots; s++)
        if (b->last_use[s] != NO_NODE && !b->is_out[s]) {
            cpu_plan_node *pn = &p->nodes[b->last_use[s]];
            pn->release[pn->n_release++] = (int32_t)s;
        }
    return BB_OK;
}

/* ---- inference fusion -----------------------------------------------------------
 * 1. A Conv whose output feeds only an inference BatchNormalization, with the
 * Conv's weights and bias and the normalization's four vectors constant,
 * becomes one Conv with the normalization folded into its weights:
 *   a = scale / sqrt(var + eps),  W' = W a (per output channel),
 *   B' = (B - mean) a + shift;
 * a Relu that alone reads the result of an f32 Conv or Gemm (folded or not)
 * runs in its epilogue. Two passes over a CNN's largest activations saved
 * (ONNX Runtime folds the same); the results equal the unfused ones up to
 * rounding.
 * 2. Then oneDNN chains (dnn.c): a Conv with constant f32 weights and the
 * Convs and 2-D pools that each read only the node before it become one
 * chain whose intermediates stay in oneDNN's blocked layout, and a Gemm with
 * constant weights one fully connected layer; both with their weights
 * packed once, for the life of the plan. A chain that cannot run a shape
 * hands it back: the absorbed nodes run one by one. */

static const bb_value *konst_vec(const cpu_plan *p, int32_t s, int64_t len)
{
    const bb_value *v = s >= 0 ? p->konst[s] : NULL;
    return v && cpu_tv(v)->dtype == BB_DT_FLOAT && cpu_tv(v)->ndim == 1 &&
                   cpu_tv(v)->dims[0] == len
               ? v
               : NULL;
}

/* The folded weights and bias of Conv c and BatchNormalization n, or false. */
static bool fold_bn(builder *b, const cpu_plan_node *c, const cpu_plan_node *n,
                    bb_value **w2, bb_value **b2)
{
    const cpu_plan *p = b->p;
    const bb_value *w = c->in[1] >= 0 ? p->konst[c->in[1]] : NULL;
    if (!w || cpu_tv(w)->dtype != BB_DT_FLOAT || cpu_tv(w)->ndim < 3)
        return false;
    int64_t M = cpu_tv(w)->dims[0];
    const bb_value *bias = c->n_in > 2 && c->in[2] >= 0 ? konst_vec(p, c->in[2], M) : NULL;
    const bb_value *bn[4];
    for (int i = 0; i < 4; i++)
        if (!(bn[i] = konst_vec(p, n->in[1 + i], M)))
            return false;
    if ((c->n_in > 2 && c->in[2] >= 0 && !bias) || M <= 0)
        return false;
    const float *sc = (const float *)(const void *)cpu_tv(bn[0])->data;
    const float *sh = (const float *)(const void *)cpu_tv(bn[1])->data;
    const float *mu = (const float *)(const void *)cpu_tv(bn[2])->data;
    const float *var = (const float *)(const void *)cpu_tv(bn[3])->data;
    double eps = cpu_attr_f(n->node, "epsilon", 1e-5f);
    *w2 = bb_value_tensor_copy(BB_DT_FLOAT, cpu_tv(w)->ndim, cpu_tv(w)->dims, cpu_tv(w)->data,
                               cpu_tv(w)->nbytes);
    *b2 = bb_value_tensor_new(BB_DT_FLOAT, 1, &M);
    if (!*w2 || !*b2) {
        bb_value_unref(*w2);
        bb_value_unref(*b2);
        return false; /* out of memory: run it unfused */
    }
    size_t per = bb_tensor_numel(w) / (size_t)M;
    float *wv = bb_tensor_f32(*w2), *bv = bb_tensor_f32(*b2);
    for (size_t m = 0; m < (size_t)M; m++) {
        double a = sc[m] / sqrt((double)var[m] + eps);
        for (size_t i = 0; i < per; i++)
            wv[m * per + i] = (float)(wv[m * per + i] * a);
        double b0 = bias ? ((const float *)(const void *)cpu_tv(bias)->data)[m] : 0.0;
        bv[m] = (float)((b0 - mu[m]) * a + sh[m]);
    }
    return true;
}

/* Node i's only output is read by node j alone, and is not a graph output. */
static bool feeds_only(const builder *b, const cpu_plan_node *ni, uint32_t j,
                       const cpu_plan_node *nj)
{
    int32_t y = ni->n_out == 1 ? ni->out[0] : -1;
    return y >= 0 && nj->n_in >= 1 && nj->in[0] == y && b->last_use[y] == j && !b->is_out[y];
}

/* Node k's output is f32 by its constant f32 weights (input 1). */
static bool f32_weights(const builder *b, const cpu_plan_node *n)
{
    const bb_value *w = n->fused_w ? n->fused_w
                                   : n->n_in > 1 && n->in[1] >= 0 ? b->p->konst[n->in[1]] : NULL;
    return w && cpu_tv(w)->dtype == BB_DT_FLOAT;
}

/* Fuse at node k (Conv [-> BatchNormalization] [-> Relu], Gemm [-> Relu]);
 * marks the nodes it absorbed. */
static void fuse_at(builder *b, uint32_t k, bool *gone)
{
    cpu_plan *p = b->p;
    cpu_plan_node *c = &p->nodes[k], *n = &p->nodes[k + 1];
    if (c->op != CPU_OP_Conv && c->op != CPU_OP_Gemm)
        return;
    uint32_t last = k; /* the node whose output the fused node writes */
    if (c->op == CPU_OP_Conv && n->op == CPU_OP_BatchNormalization && n->n_in == 5 &&
        feeds_only(b, c, k + 1, n) && cpu_attr_i(n->node, "training_mode", 0) == 0 &&
        n->out[0] >= 0) {
        bool stats_read = false; /* running statistics read: an exporter's training graph */
        for (uint32_t j = 1; j < n->n_out; j++)
            stats_read = stats_read || n->out[j] >= 0;
        if (!stats_read && fold_bn(b, c, n, &c->fused_w, &c->fused_b)) {
            gone[k + 1] = true;
            c->out[0] = n->out[0];
            last = k + 1;
        }
    }
    cpu_plan_node *r = last + 1 < p->n_nodes ? &p->nodes[last + 1] : NULL;
    if (r && r->op == CPU_OP_Relu && r->n_out == 1 && r->out[0] >= 0 && f32_weights(b, c) &&
        feeds_only(b, &p->nodes[last], last + 1, r)) {
        gone[last + 1] = true;
        c->out[0] = r->out[0];
        c->fused_relu = true;
        last++;
    }
    if (last != k)
        b->prod[c->out[0]] = k;
}

/* Close the gaps the gone nodes leave: node indices in last_use / prod
 * follow, and a removed node's index becomes the one that absorbed it (the
 * nearest kept node before it). */
static void plan_compact(builder *b, const bool *gone, uint32_t *to)
{
    cpu_plan *p = b->p;
    uint32_t n = 0;
    for (uint32_t k = 0; k < p->n_nodes; k++) {
        to[k] = gone[k] ? n - 1 : n;
        if (!gone[k])
            p->nodes[n++] = p->nodes[k];
    }
    if (n == p->n_nodes)
        return;
    for (uint32_t s = 0; s < p->n_slots; s++) {
        if (b->last_use[s] != NO_NODE)
            b->last_use[s] = to[b->last_use[s]];
        if (b->prod[s] != NO_NODE)
            b->prod[s] = to[b->prod[s]];
    }
    p->n_nodes = n;
}

/* Node n as a chain layer: kind, weights and bias; false when it cannot be
 * one (weights not constant f32, or attributes oneDNN does not take). */
static bool as_layer(const builder *b, const cpu_plan_node *n, cpu_dnn_layer *l,
                     const bb_value **w, const bb_value **bias)
{
    const cpu_plan *p = b->p;
    if (!cpu_dnn_layer_ok(n->op, n->node) || n->n_out != 1 || n->out[0] < 0)
        return false;
    *l = (cpu_dnn_layer){.node = n->node, .relu = n->fused_relu};
    *w = *bias = NULL;
    if (n->op == CPU_OP_MaxPool || n->op == CPU_OP_AveragePool) {
        l->kind = n->op == CPU_OP_MaxPool ? CPU_DNN_MAXPOOL : CPU_DNN_AVGPOOL;
        return n->n_in == 1;
    }
    l->kind = n->op == CPU_OP_Conv ? CPU_DNN_CONV : CPU_DNN_LINEAR;
    if (n->fused_w) {
        *w = n->fused_w;
        *bias = n->fused_b;
        return true;
    }
    if (n->n_in < 2 || n->n_in > 3 || !f32_weights(b, n))
        return false;
    *w = p->konst[n->in[1]];
    if (n->n_in == 3 && n->in[2] >= 0 && !(*bias = p->konst[n->in[2]]))
        return false; /* a bias computed at run time */
    return !*bias || cpu_tv(*bias)->dtype == BB_DT_FLOAT;
}

/* A chain starting at node k; marks the nodes it absorbed. */
static int chain_at(builder *b, uint32_t k, bool *gone)
{
    cpu_plan *p = b->p;
    cpu_plan_node *head = &p->nodes[k];
    cpu_dnn_layer layers[CPU_DNN_MAX_LAYERS];
    const bb_value *w[CPU_DNN_MAX_LAYERS], *bias[CPU_DNN_MAX_LAYERS];
    if ((head->op != CPU_OP_Conv && head->op != CPU_OP_Gemm) ||
        !as_layer(b, head, &layers[0], &w[0], &bias[0]))
        return BB_OK;
    uint32_t n = 1;
    while (head->op == CPU_OP_Conv && n < CPU_DNN_MAX_LAYERS && k + n < p->n_nodes) {
        const cpu_plan_node *prev = &p->nodes[k + n - 1], *next = &p->nodes[k + n];
        if ((next->op != CPU_OP_Conv && next->op != CPU_OP_MaxPool &&
             next->op != CPU_OP_AveragePool) ||
            !feeds_only(b, prev, k + n, next) || !as_layer(b, next, &layers[n], &w[n], &bias[n]))
            break;
        n++;
    }
    head->dnn_w = bb_arena_calloc(p->arena, n, sizeof *head->dnn_w);
    head->dnn_b = bb_arena_calloc(p->arena, n, sizeof *head->dnn_b);
    head->absorbed = bb_arena_calloc(p->arena, n, sizeof *head->absorbed);
    if (!head->dnn_w || !head->dnn_b || !head->absorbed ||
        !(head->dnn = cpu_dnn_chain_new(layers, n, b->be->winograd)))
        return bfail(b, BB_ENOMEM, "out of memory");
    memcpy(head->dnn_w, w, n * sizeof *w);
    memcpy(head->dnn_b, bias, n * sizeof *bias);
    for (uint32_t j = 1; j < n; j++) {
        head->absorbed[j - 1] = p->nodes[k + j];
        gone[k + j] = true;
    }
    head->n_absorbed = n - 1;
    b->prod[p->nodes[k + n - 1].out[0]] = k;
    return BB_OK;
}

/* Fuse what fits, then chain what oneDNN runs. */
static int plan_fuse(builder *b)
{
    cpu_plan *p = b->p;
    bool *gone = bb_arena_calloc(p->arena, p->n_nodes + 1, sizeof *gone);
    uint32_t *to = bb_arena_calloc(p->arena, p->n_nodes + 1, sizeof *to);
    if (!gone || !to)
        return bfail(b, BB_ENOMEM, "out of memory");
    for (uint32_t k = 0; k + 1 < p->n_nodes; k++)
        if (!gone[k])
            fuse_at(b, k, gone);
    plan_compact(b, gone, to);
    memset(gone, 0, (p->n_nodes + 1) * sizeof *gone);
    for (uint32_t k = 0; k < p->n_nodes; k++) {
        int rc = gone[k] ? BB_OK : chain_at(b, k, gone);
        if (rc)
            return rc;
    }
    plan_compact(b, gone, to);
    return BB_OK;
}

static int plan_nodes(builder *b, uint32_t depth)
{
    cpu_plan *p = b->p;
    const bb_graph *g = p->g;
    bb_arena *a = p->arena;
    size_t slots = b->cap_slots ? b->cap_slots : 1;
    b->last_use = bb_arena_calloc(a, slots, sizeof *b->last_use);
    b->is_out = bb_arena_calloc(a, slots, sizeof *b->is_out);
    b->prod = bb_arena_calloc(a, slots, sizeof *b->prod);
    p->nodes = bb_arena_calloc(a, g->nodes.n ? g->nodes.n : 1, sizeof *p->nodes);
    if (!b->last_use || !b->is_out || !b->prod || !p->nodes)
        return bfail(b, BB_ENOMEM, "out of memory");
    for (uint32_t s = 0; s < b->cap_slots; s++)
        b->last_use[s] = b->prod[s] = NO_NODE;
    uint32_t k = 0; /* executed nodes (Constant nodes fold away) */
    for (size_t i = 0; i < g->nodes.n; i++) {
        cpu_plan_node *pn = &p->nodes[k];
        int rc = plan_node_io(b, i, k, pn);
        if (rc == BB_OK && (pn->op == CPU_OP_If || pn->op == CPU_OP_Loop))
            rc = plan_subgraphs(b, i, k, pn, depth);
        if (rc == BB_OK && pn->op == CPU_OP_Constant) {
            rc = plan_constant(b, pn);
            if (rc == BB_OK)
                continue;
        }
        if (rc)
            return rc;
        k++;
    }
    p->n_nodes = k;
    int rc = plan_outputs(b);
    if (!rc)
        rc = plan_fuse(b);
    return rc ? rc : plan_releases(b);
}

static int plan_build(cpu_backend *be, const bb_graph *g, uint32_t depth, cpu_plan **out,
                      bb_error *err)
{
    *out = NULL;
    if (depth > MAX_GRAPH_DEPTH)
        return bb_error_set(err, BB_ELIMIT, CPU_NAME ": graph '%s': subgraphs nested deeper "
                            "than %d", gname(g), MAX_GRAPH_DEPTH);
    size_t names = count_names(g);
    if (names > (size_t)INT32_MAX / 4)
        return bb_error_set(err, BB_ELIMIT, CPU_NAME ": graph '%s': too many values", gname(g));
    bb_arena *a = bb_arena_create();
    cpu_plan *p = a ? bb_arena_calloc(a, 1, sizeof *p) : NULL;
    if (!p) {
        bb_arena_destroy(a);
        return bb_error_set(err, BB_ENOMEM, CPU_NAME ": out of memory");
    }
    p->arena = a;
    p->g = g;
    p->fp_nodes = g->nodes.v;
    p->fp_inits = g->initializers.v;
    p->fp_n_nodes = g->nodes.n;
    p->fp_n_inits = g->initializers.n;
    p->fp_n_in = g->inputs.n;
    p->fp_n_out = g->outputs.n;
    builder b = {be, p, (uint32_t)names + 1, err};
    size_t cap = 16;
    while (cap < 2 * (names + 1))
        cap <<= 1;
    p->map.cap = cap;
    p->map.keys = bb_arena_calloc(a, cap, sizeof *p->map.keys);
    p->map.vals = bb_arena_calloc(a, cap, sizeof *p->map.vals);
    p->slot_name = bb_arena_calloc(a, b.cap_slots, sizeof *p->slot_name);
    p->konst = bb_arena_calloc(a, b.cap_slots, sizeof *p->konst);
    p->def_node = bb_arena_calloc(a, b.cap_slots, sizeof *p->def_node);
    p->outer_slot = bb_arena_calloc(a, b.cap_slots, sizeof *p->outer_slot);
    p->n_in = (uint32_t)g->inputs.n;
    p->in_slot = bb_arena_calloc(a, p->n_in + 1, sizeof *p->in_slot);
    int rc = BB_OK;
    if (!p->map.keys || !p->map.vals || !p->slot_name || !p->konst || !p->def_node ||
        !p->outer_slot || !p->in_slot) {
        rc = bfail(&b, BB_ENOMEM, "out of memory");
        goto fail;
    }
    for (uint32_t i = 0; i < p->n_in; i++) {
        const bb_value_info *vi = g->inputs.v[i];
        if (!vi || !vi->name || !*vi->name) {
            rc = bfail(&b, BB_EINVAL, "input %u has no name", i);
            goto fail;
        }
        if (cpu_name_map_get(&p->map, vi->name) >= 0) {
            rc = bfail(&b, BB_EINVAL, "input '%s' declared twice", vi->name);
            goto fail;
        }
        p->in_slot[i] = slot_add(&b, vi->name, -1);
    }
    for (size_t i = 0; i < g->initializers.n; i++) {
        const bb_tensor_proto *tp = g->initializers.v[i];
        if (!tp || !tp->name || !*tp->name) {
            rc = bfail(&b, BB_EINVAL, "initializer %zu has no name", i);
            goto fail;
        }
        int32_t s = cpu_name_map_get(&p->map, tp->name);
        if (s >= 0 && p->konst[s]) {
            rc = bfail(&b, BB_EINVAL, "initializer '%s' declared twice", tp->name);
            goto fail;
        }
        if (s < 0)
            s = slot_add(&b, tp->name, -1);
        cpu_run r = {.be = be, .op = CPU_OP_Constant, .err = err};
        if ((rc = cpu_tensor_from_proto(&r, tp, &p->konst[s]))) {
            bb_error_prefix(err, CPU_NAME ": graph '%s': initializer '%s'", gname(g), tp->name);
            goto fail;
        }
    }
    for (size_t i = 0; i < g->nodes.n; i++) {
        const bb_node *n = g->nodes.v[i];
        for (size_t j = 0; j < n->outputs.n; j++) {
            const char *nm = n->outputs.v[j];
            if (!nm || !*nm)
                continue;
            if (cpu_name_map_get(&p->map, nm) >= 0) {
                rc = bfail(&b, BB_EINVAL, "node '%s' (%s): value '%s' is already defined",
                           nname(n), n->op_type ? n->op_type : "?", nm);
                goto fail;
            }
            slot_add(&b, nm, (int32_t)i);
        }
    }
    if ((rc = plan_nodes(&b, depth)))
        goto fail;
    *out = p;
    return BB_OK;
fail:
    cpu_plan_free(p);
    return rc;
}

/* ---- the cache ---------------------------------------------------------------- */

struct cpu_plan_cache {
    size_t max, n, cap; /* cap: power of two (open addressing on the pointer) */
    cpu_plan **slots;
};

cpu_plan_cache *cpu_plan_cache_new(size_t max_plans)
{
    cpu_plan_cache *c = calloc(1, sizeof *c);
    if (c)
        c->max = max_plans;
    return c;
}

void cpu_plan_cache_free(cpu_plan_cache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->cap; i++)
        cpu_plan_free(c->slots[i]);
    free(c->slots);
    free(c);
}

static size_t ptr_hash(const void *p)
{
    uintptr_t x = (uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

static bool plan_fresh(const cpu_plan *p, const bb_graph *g)
{
    return p->fp_nodes == g->nodes.v && p->fp_inits == g->initializers.v &&
           p->fp_n_nodes == g->nodes.n && p->fp_n_inits == g->initializers.n &&
           p->fp_n_in == g->inputs.n && p->fp_n_out == g->outputs.n;
}

int cpu_plan_get(cpu_backend *be, const bb_graph *g, cpu_plan **out, bool *owned, bb_error *err)
{
    cpu_plan_cache *c = be->plans;
    *owned = false;
    size_t at = SIZE_MAX;
    if (c->cap) {
        for (size_t i = ptr_hash(g) & (c->cap - 1);; i = (i + 1) & (c->cap - 1)) {
            cpu_plan *p = c->slots[i];
            if (!p)
                break;
            if (p->g == g) {
                if (plan_fresh(p, g)) {
                    *out = p;
                    return BB_OK;
                }
                at = i; /* stale: rebuild in place */
                break;
            }
        }
    }
    cpu_plan *p;
    int rc = plan_build(be, g, 0, &p, err);
    if (rc)
        return rc;
    if (at != SIZE_MAX) {
        cpu_plan_free(c->slots[at]);
        c->slots[at] = p;
        *out = p;
        return BB_OK;
    }
    if (c->n >= c->max) { /* cache full: one-shot plan */
        *owned = true;
        *out = p;
        return BB_OK;
    }
    if (2 * (c->n + 1) > c->cap) { /* grow and rehash */
        size_t ncap = c->cap ? 2 * c->cap : 16;
        cpu_plan **ns = calloc(ncap, sizeof *ns);
        if (!ns) {
            *owned = true;
            *out = p;
            return BB_OK;
        }
        for (size_t i = 0; i < c->cap; i++) {
            cpu_plan *q = c->slots[i];
            if (!q)
                continue;
            size_t j = ptr_hash(q->g) & (ncap - 1);
            while (ns[j])
                j = (j + 1) & (ncap - 1);
            ns[j] = q;
        }
        free(c->slots);
        c->slots = ns;
        c->cap = ncap;
    }
    size_t j = ptr_hash(g) & (c->cap - 1);
    while (c->slots[j])
        j = (j + 1) & (c->cap - 1);
    c->slots[j] = p;
    c->n++;
    *out = p;
    return BB_OK;
}

void cpu_plan_release(cpu_plan *p, bool owned)
{
    if (owned)
        cpu_plan_free(p);
}

/* ---- running ------------------------------------------------------------------ */

static bb_value *frame_lookup(const cpu_frame *f, const char *name)
{
    for (; f; f = f->parent) {
        if (!f->plan) { /* a per-op If/Loop's captured outer values */
            for (uint32_t i = 0; i < f->n_names; i++)
                if (f->vals[i] && strcmp(f->names[i], name) == 0)
                    return f->vals[i];
            continue;
        }
        int32_t s = cpu_name_map_get(&f->plan->map, name);
        if (s >= 0 && f->vals[s])
            return f->vals[s];
    }
    return NULL;
}

/* One node by its kernel: outputs into vals. */
static int node_run(cpu_backend *be, const cpu_plan_node *pn, const cpu_frame *f,
                    bb_value **vals, bb_value **ibuf, bb_value **obuf, bb_error *err)
{
    for (uint32_t j = 0; j < pn->n_in; j++)
        ibuf[j] = pn->in[j] >= 0 ? vals[pn->in[j]] : NULL;
    uint32_t n_in = pn->n_in;
    if (pn->fused_w) { /* a Conv with its BatchNormalization folded in */
        ibuf[1] = pn->fused_w;
        ibuf[2] = pn->fused_b;
        n_in = 3;
    }
    cpu_run r = {.be = be, .node = pn->node, .op = pn->op, .scope = f, .pn = pn, .err = err};
    int rc = cpu_run_kernel(&r, ibuf, n_in, obuf, pn->n_out);
    if (rc)
        return rc;
    if (pn->fused_relu)
        cpu_relu_f32(bb_tensor_f32(obuf[0]), bb_tensor_f32(obuf[0]), bb_tensor_numel(obuf[0]));
    for (uint32_t j = 0; j < pn->n_out; j++) {
        if (pn->out[j] >= 0) {
            bb_value_unref(vals[pn->out[j]]);
            vals[pn->out[j]] = obuf[j];
        } else {
            bb_value_unref(obuf[j]);
        }
    }
    return BB_OK;
}

/* Node pn, and the nodes it absorbed: as far as its oneDNN chain runs this
 * input, by the chain, the rest (or all, without a chain) by their
 * kernels. Outputs into vals. */
static int chain_run(cpu_backend *be, const cpu_plan_node *pn, const cpu_frame *f,
                     bb_value **vals, bb_value **ibuf, bb_value **obuf, bb_error *err)
{
    const bb_value *x = pn->dnn && pn->in[0] >= 0 ? vals[pn->in[0]] : NULL;
    uint32_t ran = 0;
    if (x && x->type->kind == BB_VK_TENSOR) {
        cpu_run r = {.be = be, .node = pn->node, .op = pn->op, .pn = pn, .err = err};
        bb_value *y = NULL;
        int rc = cpu_dnn_chain_run(&r, pn->dnn, x, pn->dnn_w, pn->dnn_b, 1, &ran, &y);
        if (rc && rc != BB_EUNSUPPORTED)
            return rc;
        if (ran) { /* the output of the last layer it ran */
            int32_t at = ran == 1 ? pn->out[0] : pn->absorbed[ran - 2].out[0];
            bb_value_unref(vals[at]);
            vals[at] = y;
        }
    }
    int rc = ran ? BB_OK : node_run(be, pn, f, vals, ibuf, obuf, err);
    for (uint32_t j = ran ? ran - 1 : 0; j < pn->n_absorbed && !rc; j++)
        rc = node_run(be, &pn->absorbed[j], f, vals, ibuf, obuf, err);
    return rc;
}

int cpu_plan_run(cpu_backend *be, const cpu_plan *p, const cpu_frame *parent,
                 bb_value *const *inputs, uint32_t n_in, bb_value **outputs, uint32_t n_out,
                 bb_error *err)
{
    const bb_graph *g = p->g;
    if (n_in > p->n_in)
        return bb_error_set(err, BB_EINVAL, CPU_NAME ": graph '%s': %u inputs given, %u "
                            "declared", gname(g), n_in, p->n_in);
    if (n_out > p->n_out)
        return bb_error_set(err, BB_EINVAL, CPU_NAME ": graph '%s': %u outputs requested, %u "
                            "declared", gname(g), n_out, p->n_out);
    size_t nv = (size_t)p->n_slots + 2 * (size_t)p->max_io;
    bb_value **mem = calloc(nv ? nv : 1, sizeof *mem);
    if (!mem)
        return bb_error_set(err, BB_ENOMEM, CPU_NAME ": out of memory");
    bb_value **vals = mem, **ibuf = mem + p->n_slots, **obuf = ibuf + p->max_io;
    cpu_frame f = {.plan = p, .vals = vals, .parent = parent};
    int rc = BB_OK;
    for (uint32_t s = 0; s < p->n_slots; s++)
        vals[s] = bb_value_ref(p->konst[s]);
    for (uint32_t i = 0; i < p->n_in; i++) {
        int32_t s = p->in_slot[i];
        if (i < n_in && inputs[i]) {
            bb_value_unref(vals[s]);
            vals[s] = bb_value_ref(inputs[i]);
        } else if (!vals[s]) {
            rc = bb_error_set(err, BB_EINVAL, CPU_NAME ": graph '%s': input '%s' not given",
                              gname(g), p->slot_name[s]);
            goto done;
        }
    }
    for (uint32_t i = 0; i < p->n_outer; i++) {
        int32_t s = p->outer_slot[i];
        bb_value *v = frame_lookup(parent, p->slot_name[s]);
        if (!v) {
            rc = bb_error_set(err, BB_EINVAL, CPU_NAME ": graph '%s': '%s' is not defined (no "
                              "node, initializer, graph input or enclosing scope produces it)",
                              gname(g), p->slot_name[s]);
            goto done;
        }
        vals[s] = bb_value_ref(v);
    }
    for (uint32_t k = 0; k < p->n_nodes; k++) {
        const cpu_plan_node *pn = &p->nodes[k];
        if ((rc = chain_run(be, pn, &f, vals, ibuf, obuf, err)))
            goto done;
        for (uint32_t j = 0; j < pn->n_release; j++) {
            bb_value_unref(vals[pn->release[j]]);
            vals[pn->release[j]] = NULL;
        }
    }
    for (uint32_t i = 0; i < n_out; i++) {
        bb_value *v = vals[p->out_slot[i]];
        if (!v) {
            rc = bb_error_set(err, BB_ERUNTIME, CPU_NAME ": graph '%s': output '%s' was not "
                              "produced", gname(g), p->slot_name[p->out_slot[i]]);
            for (uint32_t j = 0; j < i; j++) {
                bb_value_unref(outputs[j]);
                outputs[j] = NULL;
            }
            goto done;
        }
        outputs[i] = bb_value_ref(v);
    }
done:
    for (uint32_t s = 0; s < p->n_slots; s++)
        bb_value_unref(vals[s]);
    free(mem);
    return rc;
}

int cpu_execute_graph(void *inst, const bb_graph *graph, const char *const *input_names,
                      bb_value *const *inputs, uint32_t n_inputs, bb_value **outputs,
                      uint32_t n_outputs, bb_error *err)
{
    cpu_backend *be = inst;
    if (!graph)
        return bb_error_set(err, BB_EINVAL, CPU_NAME ": execute_graph: no graph");
    for (uint32_t i = 0; i < n_outputs; i++)
        outputs[i] = NULL;
    cpu_plan *p;
    bool owned;
    int rc = cpu_plan_get(be, graph, &p, &owned, err);
    if (rc)
        return rc;
    bb_value **pos = calloc(p->n_in + 1, sizeof *pos);
    if (!pos) {
        cpu_plan_release(p, owned);
        return bb_error_set(err, BB_ENOMEM, CPU_NAME ": out of memory");
    }
    for (uint32_t i = 0; i < n_inputs && rc == BB_OK; i++) {
        const char *nm = input_names ? input_names[i] : NULL;
        uint32_t j = p->n_in;
        if (nm) {
            int32_t s = cpu_name_map_get(&p->map, nm);
            for (j = 0; j < p->n_in && p->in_slot[j] != s; j++)
                ;
        }
        if (j == p->n_in)
            rc = bb_error_set(err, BB_EINVAL, CPU_NAME ": execute_graph: '%s' is not an input "
                              "of graph '%s'", nm ? nm : "(null)", gname(graph));
        else if (pos[j])
            rc = bb_error_set(err, BB_EINVAL, CPU_NAME ": execute_graph: input '%s' given twice",
                              nm);
        else
            pos[j] = inputs[i];
    }
    if (rc == BB_OK)
        rc = cpu_plan_run(be, p, NULL, pos, p->n_in, outputs, n_outputs, err);
    free(pos);
    cpu_plan_release(p, owned);
    return rc;
}
