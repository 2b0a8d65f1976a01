/*
 * session.c — running a plan: forward (training or inference) over a flat
 * parameter vector, and backward from dLoss/dOutput into a flat gradient.
 *
 * Values are refcounted tensors (bb_value), one per slot; parameters are
 * views into the flat vector, so a training forward that updates running
 * statistics writes straight into it. A training forward keeps every
 * value until backward has used it (the tape); an inference forward
 * releases each value after its last reader, so evaluating a large batch
 * holds few activations at once.
 *
 * Backward walks the nodes of the backward graph in reverse. Gradients
 * accumulate per slot: the first contribution is adopted, later ones are
 * added (in place when no one else holds the buffer). A node's output
 * gradients are complete when it runs — every reader of its outputs came
 * after it — and are dropped right after. Parameter gradients go straight
 * into the caller's flat gradient.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff.h"

struct ad_session {
    const ad_plan *p;
    cpu_backend be;       /* scratch for the CPU kernels */
    float *params;        /* the flat vector (borrowed) */
    bb_buffer *pbuf;      /* wraps params for the views */
    bb_value **pview;     /* per parameter: a view into params */
    bb_value **val;       /* per slot (nodes' outputs and the input) */
    bb_value **grad;      /* per slot */
    bb_value **saved;     /* per node x AD_MAX_SAVED */
    bool *touched;        /* per parameter: gradient written by this backward */
    float *gflat;         /* during backward */
    bool gacc;
    bool tape;            /* a training forward's values are held */
    size_t rows;
    uint64_t rng;
    cpu_dnn_chain **dnn;  /* per node: inference on oneDNN, made on first use */
    uint64_t params_version; /* counts changes of the flat vector (>= 1) */
};

static void no_free(void *ctx, uint8_t *data, size_t len)
{
    (void)ctx;
    (void)data;
    (void)len;
}

static void drop_views(ad_session *s)
{
    for (uint32_t i = 0; i < s->p->n_params; i++) {
        bb_value_unref(s->pview[i]);
        s->pview[i] = NULL;
    }
    bb_buffer_unref(s->pbuf);
    s->pbuf = NULL;
}

static bool make_views(ad_session *s)
{
    const ad_plan *p = s->p;
    s->pbuf = bb_buffer_wrap((uint8_t *)s->params, p->n_floats * sizeof(float), no_free, NULL);
    if (!s->pbuf)
        return false;
    for (uint32_t i = 0; i < p->n_params; i++) {
        const ad_param *pa = &p->params[i];
        s->pview[i] = bb_value_tensor_wrap(BB_DT_FLOAT, pa->ndim, pa->dims, s->pbuf,
                                           (uint8_t *)(s->params + pa->offset));
        if (!s->pview[i])
            return false;
    }
    return true;
}

ad_session *ad_session_new(const ad_plan *p, float *params, uint64_t seed)
{
    ad_session *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->p = p;
    s->params = params;
    s->rng = seed ? seed : 0x9e3779b97f4a7c15ULL;
    s->be.threads = 1;
    s->be.pool = cpu_tensor_pool_new(AD_POOL_BYTES);
    s->pview = calloc(p->n_params + 1, sizeof *s->pview);
    s->val = calloc(p->n_slots + 1, sizeof *s->val);
    s->grad = calloc(p->n_slots + 1, sizeof *s->grad);
    s->saved = calloc((size_t)p->n_nodes * AD_MAX_SAVED + 1, sizeof *s->saved);
    s->touched = calloc(p->n_params + 1, sizeof *s->touched);
    s->dnn = calloc((size_t)p->n_nodes + 1, sizeof *s->dnn);
    s->params_version = 1;
    if (!s->be.pool || !s->pview || !s->val || !s->grad || !s->saved || !s->touched ||
        !s->dnn || !make_views(s)) {
        ad_session_free(s);
        return NULL;
    }
    return s;
}

void ad_session_clear(ad_session *s)
{
    for (uint32_t i = 0; i < s->p->n_slots; i++) {
        bb_value_unref(s->val[i]);
        bb_value_unref(s->grad[i]);
        s->val[i] = s->grad[i] = NULL;
    }
    for (size_t i = 0; i < (size_t)s->p->n_nodes * AD_MAX_SAVED; i++) {
        bb_value_unref(s->saved[i]);
        s->saved[i] = NULL;
    }
    s->tape = false;
    s->rows = 0;
}

void ad_session_free(ad_session *s)
{
    if (!s)
        return;
    if (s->val && s->grad && s->saved)
        ad_session_clear(s);
    if (s->pview)
        drop_views(s);
    free(s->pview);
    free(s->val);
    free(s->grad);
    free(s->saved);
    free(s->touched);
    for (size_t i = 0; s->dnn && i < (size_t)s->p->n_nodes; i++)
        cpu_dnn_chain_free(s->dnn[i]);
    free(s->dnn);
    cpu_dnn_ctx_release(s->be.dnn);
    free(s->be.scratch);
    cpu_tensor_pool_release(s->be.pool);
    free(s);
}

void ad_session_params_changed(ad_session *s)
{
    s->params_version++;
}

void ad_session_rebind(ad_session *s, float *params)
{
    if (params == s->params)
        return;
    s->params_version++;
    ad_session_clear(s);
    drop_views(s);
    s->params = params;
    make_views(s); /* a view that failed stays NULL and fails its reader */
}

size_t ad_session_rows(const ad_session *s)
{
    return s->tape ? s->rows : 0;
}

/* ---- what rules see ------------------------------------------------------------------ */

static bb_value *slot_value(const ad_session *s, int32_t slot)
{
    if (slot < 0)
        return NULL;
    const ad_slot *sl = &s->p->slots[slot];
    if (sl->kind == AD_SLOT_CONST)
        return sl->konst;
    if (sl->kind == AD_SLOT_PARAM)
        return s->pview[sl->param];
    return s->val[slot];
}

const bb_value *ad_in(const ad_ctx *c, uint32_t i)
{
    return i < c->n->n_in ? slot_value(c->s, c->n->in[i]) : NULL;
}

const bb_value *ad_out(const ad_ctx *c, uint32_t i)
{
    return i < c->n->n_out ? slot_value(c->s, c->n->out[i]) : NULL;
}

const bb_value *ad_dout(const ad_ctx *c, uint32_t i)
{
    return i < c->n->n_out && c->n->out[i] >= 0 ? c->s->grad[c->n->out[i]] : NULL;
}

bool ad_wants(const ad_ctx *c, uint32_t i)
{
    return i < c->n->n_in && c->n->in[i] >= 0 && !(c->n->rule->nondiff >> i & 1) &&
           c->s->p->slots[c->n->in[i]].grad;
}

bool ad_in_is_param(const ad_ctx *c, uint32_t i)
{
    return i < c->n->n_in && c->n->in[i] >= 0 &&
           c->s->p->slots[c->n->in[i]].kind == AD_SLOT_PARAM;
}

static size_t node_index(const ad_ctx *c)
{
    return (size_t)(c->n - c->s->p->nodes);
}

void ad_save(ad_ctx *c, uint32_t k, bb_value *v)
{
    bb_value **at = &c->s->saved[node_index(c) * AD_MAX_SAVED + k];
    bb_value_unref(*at);
    *at = v;
}

const bb_value *ad_saved(const ad_ctx *c, uint32_t k)
{
    return c->s->saved[node_index(c) * AD_MAX_SAVED + k];
}

int ad_fail(ad_ctx *c, int code, const char *fmt, ...)
{
    char msg[BB_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const bb_node *n = c->n->node;
    return bb_error_set(c->err, code, "%s: node '%s' (%s): %s", c->s->p->who,
                        n->name && *n->name ? n->name : "(unnamed)", n->op_type, msg);
}

int ad_need_f32(ad_ctx *c, const bb_value *v, const char *what)
{
    if (v && v->type->kind == BB_VK_TENSOR && v->u.tensor.dtype == BB_DT_FLOAT)
        return BB_OK;
    return ad_fail(c, BB_EUNSUPPORTED, "%s is %s: training takes f32 tensors", what,
                   v && v->type->kind == BB_VK_TENSOR ? bb_dtype_name(v->u.tensor.dtype)
                                                      : "not a tensor");
}

static int new_tensor(ad_ctx *c, uint32_t ndim, const int64_t *dims, bool zero, bb_value **out)
{
    size_t n = bb_shape_numel(ndim, dims);
    *out = n <= SIZE_MAX / sizeof(float)
               ? cpu_tensor_pool_value(c->s->be.pool, BB_DT_FLOAT, ndim, dims, n * sizeof(float),
                                       zero)
               : NULL;
    return *out ? BB_OK : ad_fail(c, BB_ENOMEM, "out of memory");
}

int ad_new(ad_ctx *c, uint32_t ndim, const int64_t *dims, bb_value **out)
{
    return new_tensor(c, ndim, dims, true, out);
}

int ad_new_like(ad_ctx *c, const bb_value *like, bb_value **out)
{
    return new_tensor(c, like->u.tensor.ndim, like->u.tensor.dims, true, out);
}

int ad_new_uninit(ad_ctx *c, const bb_value *like, bb_value **out)
{
    return new_tensor(c, like->u.tensor.ndim, like->u.tensor.dims, false, out);
}

int ad_view(ad_ctx *c, const bb_value *v, uint32_t ndim, const int64_t *dims, bb_value **out)
{
    const bb_tensor_view *t = &v->u.tensor;
    *out = bb_value_tensor_wrap(t->dtype, ndim, dims, t->buf, t->data);
    return *out ? BB_OK : ad_fail(c, BB_EINVAL, "cannot view %zu bytes as another shape",
                                  t->nbytes);
}

cpu_run ad_cpu_run(ad_ctx *c, cpu_op op)
{
    return (cpu_run){.be = &c->s->be, .node = c->n->node, .op = op, .err = c->err};
}

/* A CPU kernel's message names the backend; ours names the component. */
int ad_cpu_error(ad_ctx *c, int rc)
{
    static const char cpu_prefix[] = CPU_NAME ": ";
    char msg[BB_ERROR_MSG_MAX];
    const char *m = c->err->msg;
    if (strncmp(m, cpu_prefix, sizeof cpu_prefix - 1) == 0)
        m += sizeof cpu_prefix - 1;
    snprintf(msg, sizeof msg, "%s", m);
    const bb_node *n = c->n->node;
    bb_error_set(c->err, rc, "%s: node '%s': %s", c->s->p->who,
                 n->name && *n->name ? n->name : "(unnamed)", msg);
    return rc;
}

int ad_kernel(ad_ctx *c, cpu_op op, const bb_node *node, bb_value *const *in, uint32_t n_in,
              bb_value **out, uint32_t n_out)
{
    cpu_run r = {.be = &c->s->be, .node = node, .op = op, .err = c->err};
    int rc = cpu_run_kernel(&r, in, n_in, out, n_out);
    return rc ? ad_cpu_error(c, rc) : BB_OK;
}

/* Input i does not change between parameter versions. */
static bool fixed_input(const ad_ctx *c, uint32_t i)
{
    if (i >= c->n->n_in || c->n->in[i] < 0)
        return true;
    ad_slot_kind k = c->s->p->slots[c->n->in[i]].kind;
    return k == AD_SLOT_PARAM || k == AD_SLOT_CONST;
}

int ad_fwd_dnn(ad_ctx *c, bb_value *const *in, bb_value **out)
{
    ad_session *s = c->s;
    const ad_node *n = c->n;
    cpu_op op = (cpu_op)n->rule->cpu_op;
    cpu_dnn_chain **at = &s->dnn[node_index(c)];
    if (!*at && n->n_in >= 2 && n->n_out == 1 && cpu_dnn_layer_ok(op, n->node)) {
        cpu_dnn_layer l = {op == CPU_OP_Conv ? CPU_DNN_CONV : CPU_DNN_LINEAR, n->node, false};
        *at = cpu_dnn_chain_new(&l, 1, true);
    }
    if (*at && in[0] && in[1]) {
        const bb_value *w[1] = {in[1]}, *b[1] = {n->n_in > 2 ? in[2] : NULL};
        uint64_t version = fixed_input(c, 1) && fixed_input(c, 2) ? s->params_version : 0;
        uint32_t ran = 0;
        cpu_run r = ad_cpu_run(c, op);
        int rc = cpu_dnn_chain_run(&r, *at, in[0], w, b, version, &ran, &out[0]);
        if (rc == BB_OK)
            return BB_OK;
        if (rc != BB_EUNSUPPORTED)
            return ad_cpu_error(c, rc);
    }
    return ad_kernel(c, op, n->node, in, n->n_in, out, n->n_out);
}

double ad_uniform(ad_ctx *c)
{
    uint64_t x = c->s->rng += 0x9e3779b97f4a7c15ULL; /* splitmix64 */
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return (double)(x >> 11) * (1.0 / 9007199254740992.0);
}

static bool same_shape(const bb_value *a, const bb_value *b)
{
    const bb_tensor_view *x = &a->u.tensor, *y = &b->u.tensor;
    return x->ndim == y->ndim && memcmp(x->dims, y->dims, x->ndim * sizeof *x->dims) == 0;
}

static bool exclusive(const bb_value *v)
{
    return atomic_load(&v->refs) == 1 && atomic_load(&v->u.tensor.buf->refs) == 1;
}

int ad_give(ad_ctx *c, uint32_t i, bb_value *g)
{
    ad_session *s = c->s;
    const bb_value *x = ad_in(c, i);
    int32_t slot = c->n->in[i];
    if (!g || !x || g->u.tensor.dtype != BB_DT_FLOAT || !same_shape(g, x)) {
        bb_value_unref(g);
        return ad_fail(c, BB_ERUNTIME, "gradient of input %u does not match its shape", i);
    }
    const ad_slot *sl = &s->p->slots[slot];
    size_t n = bb_tensor_numel(g);
    const float *src = bb_tensor_f32(g);
    if (sl->kind == AD_SLOT_PARAM) {
        float *dst = s->gflat + s->p->params[sl->param].offset;
        if (!s->touched[sl->param] && !s->gacc)
            memcpy(dst, src, n * sizeof *dst);
        else
            for (size_t k = 0; k < n; k++)
                dst[k] += src[k];
        s->touched[sl->param] = true;
        bb_value_unref(g);
        return BB_OK;
    }
    bb_value **at = &s->grad[slot];
    if (!*at) {
        *at = g;
        return BB_OK;
    }
    if (!exclusive(*at)) { /* someone shares the buffer: add into a copy */
        bb_value *sum = bb_value_tensor_copy(BB_DT_FLOAT, g->u.tensor.ndim, g->u.tensor.dims,
                                             bb_tensor_f32(*at), n * sizeof(float));
        if (!sum) {
            bb_value_unref(g);
            return ad_fail(c, BB_ENOMEM, "out of memory");
        }
        bb_value_unref(*at);
        *at = sum;
    }
    float *dst = bb_tensor_f32(*at);
    for (size_t k = 0; k < n; k++)
        dst[k] += src[k];
    bb_value_unref(g);
    return BB_OK;
}

/* ---- forward ---------------------------------------------------------------------------- */

/* The batch as the graph's input: [rows, features] becomes the declared
 * [rows, d1, d2, ...] when the element counts agree. */
static int shape_input(ad_session *s, const bb_value *x, bb_value **out, bb_error *err)
{
    const ad_plan *p = s->p;
    if (!x || x->type->kind != BB_VK_TENSOR || x->u.tensor.dtype != BB_DT_FLOAT ||
        x->u.tensor.ndim < 1)
        return bb_error_set(err, BB_ETYPE, "%s: the input must be an f32 tensor [rows, ...]",
                            p->who);
    const bb_tensor_view *t = &x->u.tensor;
    int64_t dims[BB_MAX_DIMS];
    bool reshape = p->input_ndim >= 1 && p->input_ndim != t->ndim;
    size_t per_row = 1;
    for (uint32_t d = 1; reshape && d < p->input_ndim; d++) {
        reshape = p->input_dims[d] >= 0;
        per_row *= reshape ? (size_t)p->input_dims[d] : 1;
        dims[d] = p->input_dims[d];
    }
    if (reshape && per_row * (size_t)t->dims[0] == bb_tensor_numel(x)) {
        dims[0] = t->dims[0];
        *out = bb_value_tensor_wrap(BB_DT_FLOAT, p->input_ndim, dims, t->buf, t->data);
    } else {
        *out = bb_value_ref((bb_value *)x);
    }
    return *out ? BB_OK : bb_error_set(err, BB_ENOMEM, "%s: out of memory", p->who);
}

static int run_node(ad_session *s, const ad_node *n, bool training, bb_error *err)
{
    bb_value *in[65], *out[65] = {0};
    for (uint32_t j = 0; j < n->n_in; j++)
        in[j] = slot_value(s, n->in[j]);
    ad_ctx c = {s, n, err};
    ad_fwd_fn fn = training ? n->rule->fwd_train : n->rule->fwd_infer;
    int rc = fn ? fn(&c, in, out)
                : ad_kernel(&c, (cpu_op)n->rule->cpu_op, n->node, in, n->n_in, out, n->n_out);
    if (rc) {
        for (uint32_t j = 0; j < n->n_out; j++)
            bb_value_unref(out[j]);
        return rc;
    }
    for (uint32_t j = 0; j < n->n_out; j++) {
        if (n->out[j] >= 0)
            s->val[n->out[j]] = out[j];
        else
            bb_value_unref(out[j]);
    }
    return BB_OK;
}

int ad_forward(ad_session *s, const bb_value *x, bool training, bb_value **out, bb_error *err)
{
    const ad_plan *p = s->p;
    *out = NULL;
    ad_session_clear(s);
    if (!s->pbuf)
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", p->who);
    if (training) /* it moves the running statistics */
        s->params_version++;
    int rc = shape_input(s, x, &s->val[p->input_slot], err);
    if (rc)
        return rc;
    s->rows = (size_t)s->val[p->input_slot]->u.tensor.dims[0];
    for (uint32_t k = 0; k < p->n_nodes && !rc; k++) {
        rc = run_node(s, &p->nodes[k], training, err);
        for (uint32_t j = 0; !training && j < p->nodes[k].n_in; j++) {
            int32_t sl = p->nodes[k].in[j];
            if (sl >= 0 && p->slots[sl].last_use == (int32_t)k) {
                bb_value_unref(s->val[sl]);
                s->val[sl] = NULL;
            }
        }
    }
    bb_value *y = rc ? NULL : s->val[p->output_slot];
    if (!rc && (!y || y->u.tensor.dtype != BB_DT_FLOAT))
        rc = bb_error_set(err, BB_ETYPE, "%s: output '%s' is %s, not an f32 tensor", p->who,
                          p->slots[p->output_slot].name,
                          y ? bb_dtype_name(y->u.tensor.dtype) : "missing");
    if (!rc)
        *out = bb_value_ref(y);
    if (rc || !training)
        ad_session_clear(s);
    else
        s->tape = true;
    return rc;
}

/* ---- backward ------------------------------------------------------------------------------ */

int ad_backward(ad_session *s, const bb_value *dout, float *gflat, bool accumulate, bb_error *err)
{
    const ad_plan *p = s->p;
    if (!s->tape)
        return bb_error_set(err, BB_ESTATE, "%s: backward without a training forward to go "
                            "back through", p->who);
    const bb_value *y = s->val[p->output_slot];
    if (!dout || dout->type->kind != BB_VK_TENSOR || dout->u.tensor.dtype != BB_DT_FLOAT ||
        bb_tensor_numel(dout) != bb_tensor_numel(y)) {
        char buf[128];
        return bb_error_set(err, BB_ETYPE, "%s: the output gradient must be f32 with the "
                            "output's %zu elements (shape %s)", p->who, bb_tensor_numel(y),
                            cpu_shape_str(y->u.tensor.ndim, y->u.tensor.dims, buf, sizeof buf));
    }
    s->grad[p->output_slot] = bb_value_tensor_wrap(BB_DT_FLOAT, y->u.tensor.ndim, y->u.tensor.dims,
                                                   dout->u.tensor.buf, dout->u.tensor.data);
    if (!s->grad[p->output_slot])
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", p->who);
    s->gflat = gflat;
    s->gacc = accumulate;
    memset(s->touched, 0, p->n_params * sizeof *s->touched);
    int rc = BB_OK;
    for (uint32_t k = p->n_nodes; k-- > 0 && !rc;) {
        const ad_node *n = &p->nodes[k];
        bool any = false;
        for (uint32_t j = 0; j < n->n_out; j++)
            any = any || (n->out[j] >= 0 && s->grad[n->out[j]]);
        if (n->backward && any) {
            ad_ctx c = {s, n, err};
            rc = n->rule->bwd(&c);
        }
        for (uint32_t j = 0; j < n->n_out; j++) {
            if (n->out[j] >= 0) {
                bb_value_unref(s->grad[n->out[j]]);
                s->grad[n->out[j]] = NULL;
            }
        }
    }
    for (uint32_t i = 0; !rc && !accumulate && i < p->n_params; i++)
        if (!s->touched[i]) /* not trained, or no path to the loss this time */
            memset(gflat + p->params[i].offset, 0, p->params[i].numel * sizeof *gflat);
    s->gflat = NULL;
    ad_session_clear(s);
    return rc;
}
