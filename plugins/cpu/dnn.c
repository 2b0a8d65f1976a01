/*
 * dnn.c — oneDNN primitives for the layers that carry a network's
 * arithmetic: 2-D convolution, 2-D max / average pooling and the fully
 * connected layer (Gemm), each with an optional Relu in its epilogue, run
 * as a chain that keeps its intermediates in the layouts oneDNN picks
 * (blocked: nChw16c on AVX-512) and reorders only at its two ends.
 *
 * Why: a GEMM library takes its B operand as it comes, so im2col + GEMM
 * re-packs a layer's weights on every call and lays each image out again;
 * oneDNN's primitives take weights in their own layout, reordered once per
 * weight version (the `version` of cpu_dnn_chain_run), and run direct
 * (or Winograd) convolutions on blocked activations. Figures:
 * docs/DECISIONS.md, "CPU kernels".
 *
 * A chain is an accelerator, never the only way: a shape oneDNN has no
 * optimized kernel for (its reference implementations are slower than
 * ours), a layout it cannot take, or any failure while building the
 * primitives makes cpu_dnn_chain_run answer BB_EUNSUPPORTED without an
 * error, and the caller runs its own kernels (which report bad attributes
 * or shapes in their own words).
 *
 * Primitives are built per input shape (a handful are cached; batch sizes
 * recur) and hold the packed weights; intermediates come from the
 * instance's tensor pool for the duration of one run. The engine and
 * stream (cpu_dnn_ctx) are shared by the chains of one instance and
 * outlive them by reference counting; like the instance, a chain is used
 * by one thread at a time.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>

#include "cpu_internal.h"

#define MAX_SHAPES 3 /* per chain: a training batch, an eval chunk, its remainder */

struct cpu_dnn_ctx {
    atomic_uint refs;
    dnnl_engine_t engine;
    dnnl_stream_t stream;
};

/* One layer at one shape. */
typedef struct dnn_step {
    dnnl_primitive_t prim;
    dnnl_primitive_t src_reorder;  /* the previous output into this src layout, or NULL */
    dnnl_memory_t src;             /* this layer's src (the previous dst, or src_reorder's) */
    dnnl_memory_t dst;
    dnnl_memory_t weights;         /* packed (owned buffer); NULL for pools */
    dnnl_primitive_t w_reorder;    /* the caller's weights -> packed */
    dnnl_memory_t w_user;          /* the caller's weights (handle set per run) */
    dnnl_memory_t bias;            /* the caller's bias (handle set per run), or NULL */
    size_t src_bytes, dst_bytes;   /* of src when reordered, of dst */
} dnn_step;

/* Everything for one input shape. */
typedef struct dnn_shape {
    bool used;
    bool unsupported;              /* oneDNN has no fast kernel here: the caller's kernels */
    uint32_t ndim;
    int64_t dims[BB_MAX_DIMS];
    uint64_t last_run;
    uint32_t n_run;                /* the first layers oneDNN runs (the rest: the caller's) */
    dnn_step steps[CPU_DNN_MAX_LAYERS];
    dnnl_memory_t in_user;         /* the chain's input, plain */
    dnnl_primitive_t out_reorder;  /* last dst -> plain output, or NULL (written in place) */
    dnnl_memory_t out_user;
    uint32_t out_ndim;
    int64_t out_dims[BB_MAX_DIMS];
    uint64_t w_version;            /* the weights packed, or 0 */
    const void *w_data[CPU_DNN_MAX_LAYERS];
} dnn_shape;

struct cpu_dnn_chain {
    cpu_dnn_ctx *ctx;
    uint32_t n;
    cpu_dnn_layer layers[CPU_DNN_MAX_LAYERS];
    bool winograd;
    uint64_t runs;
    dnn_shape shapes[MAX_SHAPES];
};

/* ---- the engine ------------------------------------------------------------------ */

cpu_dnn_ctx *cpu_dnn_ctx_get(cpu_backend *be)
{
    if (be->dnn)
        return be->dnn;
    cpu_dnn_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    atomic_init(&c->refs, 1);
    if (dnnl_engine_create(&c->engine, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&c->stream, c->engine, dnnl_stream_default_flags) != dnnl_success) {
        if (c->engine)
            dnnl_engine_destroy(c->engine);
        free(c);
        return NULL;
    }
    return be->dnn = c;
}

void cpu_dnn_ctx_release(cpu_dnn_ctx *c)
{
    if (!c || atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    dnnl_stream_destroy(c->stream);
    dnnl_engine_destroy(c->engine);
    free(c);
}

/* ---- which nodes can be layers --------------------------------------------------- */

static bool ints_all(const bb_node *n, const char *name, int64_t want)
{
    const int64_t *v;
    size_t k;
    if (!cpu_attr_ints(n, name, &v, &k))
        return true;
    for (size_t i = 0; i < k; i++)
        if (v[i] != want)
            return false;
    return true;
}

bool cpu_dnn_layer_ok(cpu_op op, const bb_node *node)
{
    const int64_t *v;
    size_t k;
    switch (op) {
    case CPU_OP_Conv:
        return true; /* shapes are checked when the chain first runs */
    case CPU_OP_MaxPool:
    case CPU_OP_AveragePool:
        /* 2-D windows; ceil_mode, and the pads and dilations an average
         * would count differently, stay with pool.c */
        if (!cpu_attr_ints(node, "kernel_shape", &v, &k) || k != 2 ||
            cpu_attr_i(node, "ceil_mode", 0) != 0 || !ints_all(node, "dilations", 1) ||
            (node && node->outputs.n > 1 && node->outputs.v[1] && *node->outputs.v[1]))
            return false;
        return op == CPU_OP_MaxPool || (ints_all(node, "pads", 0) &&
                                        cpu_attr_s(node, "auto_pad", &k) == NULL);
    case CPU_OP_Gemm:
        return cpu_attr_i(node, "transA", 0) == 0 && cpu_attr_f(node, "alpha", 1.0f) == 1.0f &&
               cpu_attr_f(node, "beta", 1.0f) == 1.0f;
    default:
        return false;
    }
}

/* ---- building one shape's primitives ------------------------------------------------- */

typedef struct builder {
    cpu_dnn_chain *c;
    dnn_shape *s;
    dnnl_engine_t eng;
} builder;

static void step_free(dnn_step *st)
{
    if (st->prim)
        dnnl_primitive_destroy(st->prim);
    if (st->src_reorder)
        dnnl_primitive_destroy(st->src_reorder);
    if (st->w_reorder)
        dnnl_primitive_destroy(st->w_reorder);
    dnnl_memory_t mems[] = {st->src, st->dst, st->weights, st->w_user, st->bias};
    for (size_t i = 0; i < sizeof mems / sizeof *mems; i++)
        if (mems[i])
            dnnl_memory_destroy(mems[i]);
    memset(st, 0, sizeof *st);
}

static void shape_free(dnn_shape *s)
{
    for (uint32_t i = 0; i < CPU_DNN_MAX_LAYERS; i++)
        step_free(&s->steps[i]);
    if (s->out_reorder)
        dnnl_primitive_destroy(s->out_reorder);
    if (s->in_user)
        dnnl_memory_destroy(s->in_user);
    if (s->out_user)
        dnnl_memory_destroy(s->out_user);
    memset(s, 0, sizeof *s);
}

static bool ok(dnnl_status_t st)
{
    return st == dnnl_success;
}

static void plain_md(dnnl_memory_desc_t *md, uint32_t ndim, const int64_t *dims,
                     dnnl_format_tag_t tag)
{
    dnnl_dims_t d;
    for (uint32_t i = 0; i < ndim; i++)
        d[i] = dims[i];
    dnnl_memory_desc_init_by_tag(md, (int)ndim, d, dnnl_f32, tag);
}

static dnnl_format_tag_t plain_tag(uint32_t ndim)
{
    return ndim == 2 ? dnnl_ab : ndim == 4 ? dnnl_abcd : dnnl_format_tag_undef;
}

/* oneDNN's reference kernels and its im2col + GEMM convolution are slower
 * than ours: not worth a chain. */
static bool fast_impl(dnnl_primitive_desc_t pd, bool conv)
{
    const char *impl = NULL;
    if (!ok(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl)) || !impl)
        return false;
    return strncmp(impl, "ref", 3) != 0 && !(conv && strstr(impl, "gemm"));
}

static dnnl_primitive_attr_t relu_attr(bool relu)
{
    dnnl_primitive_attr_t at = NULL;
    dnnl_post_ops_t po = NULL;
    if (!ok(dnnl_primitive_attr_create(&at)))
        return NULL;
    if (relu && (!ok(dnnl_post_ops_create(&po)) ||
                 !ok(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f)) ||
                 !ok(dnnl_primitive_attr_set_post_ops(at, po)))) {
        dnnl_primitive_attr_destroy(at);
        at = NULL;
    }
    if (po)
        dnnl_post_ops_destroy(po);
    return at;
}

static int pool_init(void *od, const dnnl_memory_desc_t *src, void *ctx);

/* A primitive desc for op_desc with src as given; else with src "any"
 * (convolutions, fully connected layers: the layout they prefer) or plain
 * (pools, which need a layout), and a reorder in front. NULL when none is
 * fast. */
typedef int (*desc_fn)(void *od, const dnnl_memory_desc_t *src, void *ctx);

static dnnl_primitive_desc_t pick(builder *b, void *od, desc_fn init, void *ctx,
                                  const dnnl_memory_desc_t *src, bool relu, bool conv,
                                  bool *reorder)
{
    dnnl_primitive_attr_t at = relu_attr(relu);
    if (!at)
        return NULL;
    dnnl_primitive_desc_t pd = NULL;
    for (int attempt = 0; attempt < 2 && !pd; attempt++) {
        dnnl_memory_desc_t other = *src;
        if (attempt == 1) {
            dnnl_dims_t d;
            memcpy(d, src->dims, sizeof(dnnl_dim_t) * (size_t)src->ndims);
            dnnl_memory_desc_init_by_tag(&other, src->ndims, d, dnnl_f32,
                                         init == pool_init ? plain_tag((uint32_t)src->ndims)
                                                           : dnnl_format_tag_any);
        }
        if (init(od, &other, ctx) != BB_OK ||
            !ok(dnnl_primitive_desc_create(&pd, od, at, b->eng, NULL)))
            pd = NULL;
        else if (!fast_impl(pd, conv)) {
            dnnl_primitive_desc_destroy(pd);
            pd = NULL;
        }
    }
    dnnl_primitive_attr_destroy(at);
    const dnnl_memory_desc_t *want = pd ? dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0)
                                        : NULL;
    *reorder = want && !dnnl_memory_desc_equal(want, src);
    return pd;
}

/* A reorder primitive from -> to. */
static dnnl_primitive_t reorder(builder *b, const dnnl_memory_desc_t *from,
                                const dnnl_memory_desc_t *to)
{
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t p = NULL;
    if (ok(dnnl_reorder_primitive_desc_create(&pd, from, b->eng, to, b->eng, NULL))) {
        if (!ok(dnnl_primitive_create(&p, pd)))
            p = NULL;
        dnnl_primitive_desc_destroy(pd);
    }
    return p;
}

typedef struct conv_args {
    dnnl_alg_kind_t alg;
    dnnl_memory_desc_t w, b, dst;
    bool has_b;
    dnnl_dims_t strides, dil, pl, pr;
} conv_args;

static int conv_init(void *od, const dnnl_memory_desc_t *src, void *ctx)
{
    conv_args *a = ctx;
    return ok(dnnl_dilated_convolution_forward_desc_init(
               od, dnnl_forward_inference, a->alg, src, &a->w, a->has_b ? &a->b : NULL, &a->dst,
               a->strides, a->dil, a->pl, a->pr))
               ? BB_OK
               : BB_EUNSUPPORTED;
}

typedef struct pool_args {
    dnnl_alg_kind_t alg;
    dnnl_memory_desc_t dst;
    dnnl_dims_t strides, kernel, dil, pl, pr;
} pool_args;

static int pool_init(void *od, const dnnl_memory_desc_t *src, void *ctx)
{
    pool_args *a = ctx;
    return ok(dnnl_pooling_v2_forward_desc_init(od, dnnl_forward_inference, a->alg, src, &a->dst,
                                                a->strides, a->kernel, a->dil, a->pl, a->pr))
               ? BB_OK
               : BB_EUNSUPPORTED;
}

typedef struct linear_args {
    dnnl_memory_desc_t w, b, dst;
    bool has_b;
} linear_args;

static int linear_init(void *od, const dnnl_memory_desc_t *src, void *ctx)
{
    linear_args *a = ctx;
    return ok(dnnl_inner_product_forward_desc_init(od, dnnl_forward_inference, src, &a->w,
                                                   a->has_b ? &a->b : NULL, &a->dst))
               ? BB_OK
               : BB_EUNSUPPORTED;
}

/* The window geometry of layer i over an input of the given dims. */
static bool geometry(const cpu_dnn_layer *l, uint32_t ndim, const int64_t *dims,
                     const int64_t *kernel, cpu_geom *g)
{
    bb_tensor_view x = {.dtype = BB_DT_FLOAT, .ndim = ndim};
    memcpy(x.dims, dims, ndim * sizeof *dims);
    cpu_run r = {.node = l->node}; /* no err: the caller's kernels report bad geometry */
    if (cpu_geom_init(&r, &x, kernel, false, g))
        return false;
    for (uint32_t d = 0; d < 2; d++)
        if (g->out[d] < 1)
            return false;
    return true;
}

static void geom_dims(const cpu_geom *g, dnnl_dim_t *strides, dnnl_dim_t *dil, dnnl_dim_t *pl,
                      dnnl_dim_t *pr)
{
    for (uint32_t d = 0; d < 2; d++) {
        strides[d] = g->s[d];
        dil[d] = g->d[d] - 1; /* oneDNN counts the gaps */
        pl[d] = g->pb[d];
        pr[d] = g->pe[d];
    }
}

/* The packed weights of step st: a reorder from the caller's layout. */
static bool pack_weights(builder *b, dnn_step *st, dnnl_primitive_desc_t pd,
                         const dnnl_memory_desc_t *user)
{
    const dnnl_memory_desc_t *want = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    return want && ok(dnnl_memory_create(&st->weights, want, b->eng, DNNL_MEMORY_ALLOCATE)) &&
           ok(dnnl_memory_create(&st->w_user, user, b->eng, DNNL_MEMORY_NONE)) &&
           (st->w_reorder = reorder(b, user, want)) != NULL;
}

/* What one layer's primitive is made of: its desc, the caller's weights'
 * layout (conv, linear) and the output dims (rank 4 for windows, 2 for a
 * linear layer). */
typedef union layer_desc {
    dnnl_convolution_desc_t conv;
    dnnl_pooling_v2_desc_t pool;
    dnnl_inner_product_desc_t ip;
} layer_desc;

static dnnl_primitive_desc_t conv_pd(builder *b, const cpu_dnn_layer *l, const bb_value *w,
                                     const bb_value *bias, const int64_t *dims,
                                     const dnnl_memory_desc_t *in, layer_desc *od,
                                     dnnl_memory_desc_t *wuser, int64_t *odims, bool *reord)
{
    const bb_tensor_view *wt = cpu_tv(w);
    int64_t group = cpu_attr_i(l->node, "group", 1);
    cpu_geom g;
    if (wt->ndim != 4 || wt->dtype != BB_DT_FLOAT || group < 1 || wt->dims[0] % group ||
        wt->dims[1] * group != dims[1] ||
        (bias && (cpu_tv(bias)->ndim != 1 || cpu_tv(bias)->dims[0] != wt->dims[0] ||
                  cpu_tv(bias)->dtype != BB_DT_FLOAT)) ||
        !geometry(l, 4, dims, wt->dims + 2, &g))
        return NULL;
    conv_args a = {.has_b = bias != NULL};
    geom_dims(&g, a.strides, a.dil, a.pl, a.pr);
    int64_t out[4] = {dims[0], wt->dims[0], g.out[0], g.out[1]};
    memcpy(odims, out, sizeof out);
    plain_md(&a.dst, 4, odims, dnnl_format_tag_any);
    plain_md(&a.b, 1, wt->dims, dnnl_a);
    if (group == 1) {
        plain_md(wuser, 4, wt->dims, dnnl_abcd);
    } else {
        int64_t gd[5] = {group, wt->dims[0] / group, wt->dims[1], wt->dims[2], wt->dims[3]};
        plain_md(wuser, 5, gd, dnnl_abcde);
    }
    dnnl_dims_t wd;
    memcpy(wd, wuser->dims, sizeof(dnnl_dim_t) * (size_t)wuser->ndims);
    dnnl_memory_desc_init_by_tag(&a.w, wuser->ndims, wd, dnnl_f32, dnnl_format_tag_any);
    /* Winograd's blocks are 16 channels wide: a thinner layer pads them */
    bool wino = b->c->winograd && group == 1 && g.k[0] == 3 && g.k[1] == 3 && g.s[0] == 1 &&
                g.s[1] == 1 && g.d[0] == 1 && g.d[1] == 1 && dims[1] % 16 == 0 &&
                wt->dims[0] % 16 == 0;
    dnnl_primitive_desc_t pd = NULL;
    if (wino) {
        a.alg = dnnl_convolution_winograd;
        pd = pick(b, od, conv_init, &a, in, l->relu, true, reord);
    }
    if (!pd) {
        a.alg = dnnl_convolution_direct;
        pd = pick(b, od, conv_init, &a, in, l->relu, true, reord);
    }
    return pd;
}

static dnnl_primitive_desc_t linear_pd(builder *b, const cpu_dnn_layer *l, const bb_value *w,
                                       const bb_value *bias, const int64_t *dims,
                                       const dnnl_memory_desc_t *in, layer_desc *od,
                                       dnnl_memory_desc_t *wuser, int64_t *odims, bool *reord)
{
    const bb_tensor_view *wt = cpu_tv(w);
    bool tb = cpu_attr_i(l->node, "transB", 0) != 0;
    if (wt->ndim != 2 || wt->dtype != BB_DT_FLOAT)
        return NULL;
    int64_t K = dims[1], N = tb ? wt->dims[0] : wt->dims[1];
    if ((tb ? wt->dims[1] : wt->dims[0]) != K || N < 1 || K < 1 ||
        (bias && (cpu_tv(bias)->dtype != BB_DT_FLOAT || bb_tensor_numel(bias) != (size_t)N ||
                  cpu_tv(bias)->dims[cpu_tv(bias)->ndim - 1] != N)))
        return NULL;
    linear_args a = {.has_b = bias != NULL};
    int64_t wd[2] = {N, K};
    odims[0] = dims[0];
    odims[1] = N;
    plain_md(&a.dst, 2, odims, dnnl_ab);
    plain_md(&a.b, 1, &N, dnnl_a);
    plain_md(&a.w, 2, wd, dnnl_format_tag_any);
    plain_md(wuser, 2, wd, tb ? dnnl_ab : dnnl_ba);
    return pick(b, od, linear_init, &a, in, l->relu, false, reord);
}

static dnnl_primitive_desc_t pool_pd(builder *b, const cpu_dnn_layer *l, const int64_t *dims,
                                     const dnnl_memory_desc_t *in, layer_desc *od,
                                     int64_t *odims, bool *reord)
{
    const int64_t *ks;
    size_t kn;
    cpu_geom g;
    if (!cpu_attr_ints(l->node, "kernel_shape", &ks, &kn) || kn != 2 ||
        !geometry(l, 4, dims, ks, &g))
        return NULL;
    pool_args a = {.alg = l->kind == CPU_DNN_MAXPOOL ? dnnl_pooling_max
                          : cpu_attr_i(l->node, "count_include_pad", 0)
                              ? dnnl_pooling_avg_include_padding
                              : dnnl_pooling_avg_exclude_padding};
    geom_dims(&g, a.strides, a.dil, a.pl, a.pr);
    a.kernel[0] = g.k[0];
    a.kernel[1] = g.k[1];
    int64_t out[4] = {dims[0], dims[1], g.out[0], g.out[1]};
    memcpy(odims, out, sizeof out);
    plain_md(&a.dst, 4, odims, dnnl_format_tag_any);
    return pick(b, od, pool_init, &a, in, false, false, reord);
}

/* Layer i over in (dims, layout): its primitive into s->steps[i]; *out
 * dims and layout of its result. */
static bool layer_build(builder *b, uint32_t i, const bb_value *w, const bb_value *bias,
                        uint32_t ndim, const int64_t *dims, const dnnl_memory_desc_t *in,
                        uint32_t *ondim, int64_t *odims, dnnl_memory_desc_t *out)
{
    const cpu_dnn_layer *l = &b->c->layers[i];
    dnn_step *st = &b->s->steps[i];
    layer_desc od;
    dnnl_memory_desc_t wuser;
    bool reord = false, pool = l->kind == CPU_DNN_MAXPOOL || l->kind == CPU_DNN_AVGPOOL;
    *ondim = l->kind == CPU_DNN_LINEAR ? 2 : 4;
    if (ndim != *ondim)
        return false;
    dnnl_primitive_desc_t pd =
        l->kind == CPU_DNN_CONV     ? conv_pd(b, l, w, bias, dims, in, &od, &wuser, odims, &reord)
        : l->kind == CPU_DNN_LINEAR ? linear_pd(b, l, w, bias, dims, in, &od, &wuser, odims,
                                                &reord)
                                    : pool_pd(b, l, dims, in, &od, odims, &reord);
    if (!pd)
        return false;
    const dnnl_memory_desc_t *src = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *dst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    bool built = src && dst && ok(dnnl_primitive_create(&st->prim, pd)) &&
                 ok(dnnl_memory_create(&st->dst, dst, b->eng, DNNL_MEMORY_NONE));
    if (built && reord) {
        built = (st->src_reorder = reorder(b, in, src)) != NULL &&
                ok(dnnl_memory_create(&st->src, src, b->eng, DNNL_MEMORY_NONE));
        st->src_bytes = dnnl_memory_desc_get_size(src);
    }
    if (built && !pool) {
        built = pack_weights(b, st, pd, &wuser);
        if (built && bias)
            built = ok(dnnl_memory_create(
                &st->bias, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 1), b->eng,
                DNNL_MEMORY_NONE));
    }
    if (built) {
        *out = *dst;
        st->dst_bytes = dnnl_memory_desc_get_size(dst);
    }
    dnnl_primitive_desc_destroy(pd);
    return built;
}

/* The primitives for input dims: of every layer, or of the first ones up
 * to a layer oneDNN has no fast kernel for (the caller runs the rest);
 * false when not even the first has one. */
static bool shape_build(cpu_dnn_chain *c, dnn_shape *s, uint32_t ndim, const int64_t *dims,
                        const bb_value *const *w, const bb_value *const *bias)
{
    builder b = {.c = c, .s = s, .eng = c->ctx->engine};
    s->used = true;
    s->ndim = ndim;
    memcpy(s->dims, dims, ndim * sizeof *dims);
    dnnl_format_tag_t tag = plain_tag(ndim);
    if (tag == dnnl_format_tag_undef)
        return false;
    dnnl_memory_desc_t in, cur, plain;
    plain_md(&in, ndim, dims, tag);
    if (!ok(dnnl_memory_create(&s->in_user, &in, b.eng, DNNL_MEMORY_NONE)))
        return false;
    cur = in;
    uint32_t cn = ndim;
    int64_t cd[BB_MAX_DIMS];
    memcpy(cd, dims, ndim * sizeof *cd);
    for (s->n_run = 0; s->n_run < c->n; s->n_run++) {
        uint32_t on;
        int64_t od[BB_MAX_DIMS];
        dnnl_memory_desc_t out;
        if (!layer_build(&b, s->n_run, w[s->n_run], bias[s->n_run], cn, cd, &cur, &on, od,
                         &out)) {
            step_free(&s->steps[s->n_run]);
            break;
        }
        cur = out;
        cn = on;
        memcpy(cd, od, on * sizeof *od);
    }
    s->out_ndim = cn;
    memcpy(s->out_dims, cd, cn * sizeof *cd);
    if (s->n_run == 0 || (tag = plain_tag(cn)) == dnnl_format_tag_undef)
        return false;
    plain_md(&plain, cn, cd, tag);
    if (!ok(dnnl_memory_create(&s->out_user, &plain, b.eng, DNNL_MEMORY_NONE)))
        return false;
    if (!dnnl_memory_desc_equal(&plain, &cur) && !(s->out_reorder = reorder(&b, &cur, &plain)))
        return false;
    return true;
}

/* ---- chains ------------------------------------------------------------------------ */

cpu_dnn_chain *cpu_dnn_chain_new(const cpu_dnn_layer *layers, uint32_t n, bool winograd)
{
    if (n == 0 || n > CPU_DNN_MAX_LAYERS)
        return NULL;
    cpu_dnn_chain *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->n = n;
    memcpy(c->layers, layers, n * sizeof *layers);
    c->winograd = winograd;
    return c;
}

void cpu_dnn_chain_free(cpu_dnn_chain *c)
{
    if (!c)
        return;
    for (int i = 0; i < MAX_SHAPES; i++)
        shape_free(&c->shapes[i]);
    cpu_dnn_ctx_release(c->ctx);
    free(c);
}

/* The cached shape for dims, or a slot rebuilt for it (the least recently
 * run one); NULL when oneDNN cannot run this shape. */
static dnn_shape *shape_for(cpu_dnn_chain *c, uint32_t ndim, const int64_t *dims,
                            const bb_value *const *w, const bb_value *const *bias)
{
    dnn_shape *lru = &c->shapes[0];
    for (int i = 0; i < MAX_SHAPES; i++) {
        dnn_shape *s = &c->shapes[i];
        if (s->used && s->ndim == ndim && memcmp(s->dims, dims, ndim * sizeof *dims) == 0)
            return s->unsupported ? NULL : s;
        if (!s->used || (lru->used && s->last_run < lru->last_run))
            lru = s;
    }
    shape_free(lru);
    if (!shape_build(c, lru, ndim, dims, w, bias)) {
        shape_free(lru);
        lru->used = lru->unsupported = true; /* remembered: not tried again */
        lru->ndim = ndim;
        memcpy(lru->dims, dims, ndim * sizeof *dims);
        return NULL;
    }
    return lru;
}

static bool run_prim(cpu_dnn_ctx *ctx, dnnl_primitive_t p, dnnl_exec_arg_t *args, int n)
{
    return ok(dnnl_primitive_execute(p, ctx->stream, n, args));
}

static bool reorder_run(cpu_dnn_ctx *ctx, dnnl_primitive_t p, dnnl_memory_t from,
                        dnnl_memory_t to)
{
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    return run_prim(ctx, p, a, 2);
}

/* A pooled block of at least bytes for an intermediate, as a value that
 * holds it for the run. */
static void *scratch_block(cpu_run *r, size_t bytes, bb_value **hold)
{
    int64_t n = (int64_t)((bytes + sizeof(float) - 1) / sizeof(float));
    if (cpu_alloc_uninit(r, BB_DT_FLOAT, 1, &n, hold))
        return NULL;
    return cpu_tv(*hold)->data;
}

static bool pack_all(cpu_dnn_chain *c, dnn_shape *s, const bb_value *const *w, uint64_t version)
{
    bool same = version != 0 && s->w_version == version;
    for (uint32_t i = 0; same && i < c->n; i++)
        same = !w[i] || s->w_data[i] == cpu_tv(w[i])->data;
    if (same)
        return true;
    s->w_version = 0;
    for (uint32_t i = 0; i < s->n_run; i++) {
        dnn_step *st = &s->steps[i];
        if (!st->weights)
            continue;
        s->w_data[i] = cpu_tv(w[i])->data;
        if (!ok(dnnl_memory_set_data_handle(st->w_user, (void *)(uintptr_t)s->w_data[i])) ||
            !reorder_run(c->ctx, st->w_reorder, st->w_user, st->weights))
            return false;
    }
    s->w_version = version;
    return true;
}

static bool run_steps(cpu_run *r, cpu_dnn_chain *c, dnn_shape *s, const bb_value *const *bias,
                      void *x, void *y, bb_value **hold)
{
    dnnl_memory_t prev = s->in_user;
    if (!ok(dnnl_memory_set_data_handle(s->in_user, x)) ||
        !ok(dnnl_memory_set_data_handle(s->out_user, y)))
        return false;
    for (uint32_t i = 0; i < s->n_run; i++) {
        dnn_step *st = &s->steps[i];
        dnnl_memory_t src = prev;
        if (st->src_reorder) {
            void *p = scratch_block(r, st->src_bytes, &hold[2 * i]);
            if (!p || !ok(dnnl_memory_set_data_handle(st->src, p)) ||
                !reorder_run(c->ctx, st->src_reorder, prev, st->src))
                return false;
            src = st->src;
        }
        bool last = i + 1 == s->n_run;
        void *d = last && !s->out_reorder ? y : scratch_block(r, st->dst_bytes, &hold[2 * i + 1]);
        if (!d || !ok(dnnl_memory_set_data_handle(st->dst, d)))
            return false;
        dnnl_exec_arg_t a[5] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, st->dst}};
        int na = 2;
        if (st->weights)
            a[na++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, st->weights};
        if (st->bias) {
            if (!ok(dnnl_memory_set_data_handle(st->bias, cpu_tv(bias[i])->data)))
                return false;
            a[na++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, st->bias};
        }
        if (!run_prim(c->ctx, st->prim, a, na))
            return false;
        /* the input of the step before is dead now */
        if (i > 0) {
            bb_value_unref(hold[2 * (i - 1) + 1]);
            hold[2 * (i - 1) + 1] = NULL;
        }
        bb_value_unref(hold[2 * i]);
        hold[2 * i] = NULL;
        prev = st->dst;
    }
    return !s->out_reorder || reorder_run(c->ctx, s->out_reorder, prev, s->out_user);
}

int cpu_dnn_chain_run(cpu_run *r, cpu_dnn_chain *c, const bb_value *x, const bb_value *const *w,
                      const bb_value *const *bias, uint64_t version, uint32_t *ran, bb_value **y)
{
    *y = NULL;
    *ran = 0;
    const bb_tensor_view *xv = cpu_tv(x);
    if (xv->dtype != BB_DT_FLOAT || bb_tensor_numel(x) == 0)
        return BB_EUNSUPPORTED;
    if (!c->ctx) {
        if (!(c->ctx = cpu_dnn_ctx_get(r->be)))
            return BB_EUNSUPPORTED;
        atomic_fetch_add(&c->ctx->refs, 1);
    }
    cpu_gemm_threads_apply();
    dnn_shape *s = shape_for(c, xv->ndim, xv->dims, w, bias);
    if (!s)
        return BB_EUNSUPPORTED;
    s->last_run = ++c->runs;
    int rc = cpu_alloc_uninit(r, BB_DT_FLOAT, s->out_ndim, s->out_dims, y);
    if (rc)
        return rc;
    bb_value *hold[2 * CPU_DNN_MAX_LAYERS] = {0};
    bool done = pack_all(c, s, w, version) &&
                run_steps(r, c, s, bias, (void *)(uintptr_t)xv->data, cpu_tv(*y)->data, hold) &&
                ok(dnnl_stream_wait(c->ctx->stream));
    for (uint32_t i = 0; i < 2 * CPU_DNN_MAX_LAYERS; i++)
        bb_value_unref(hold[i]);
    if (!done) { /* never seen: the primitives were built for these shapes */
        bb_value_unref(*y);
        *y = NULL;
        s->w_version = 0;
        return BB_EUNSUPPORTED;
    }
    *ran = s->n_run;
    return BB_OK;
}
