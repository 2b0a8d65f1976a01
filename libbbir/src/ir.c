/*
 * ir.c — construction, lookup and deep-copy helpers over the in-memory ONNX
 * IR of bb/ir.h, plus the dtype table.
 *
 * Every object is allocated from an arena and never freed on its own.
 * Byte buffers (bb_bytes) created here carry one extra NUL byte after len,
 * so a STRING attribute can be read as a C string without copying.
 * Lists are small (attributes per node, opsets per model), so lookups are
 * linear scans.
 */
#include "bb/ir.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- small helpers ------------------------------------------------------ */

static bool str_eq(const char *x, const char *y)
{
    if (!x || !y)
        return x == y;
    return strcmp(x, y) == 0;
}

/* NULL and "" are the same (absent proto string). */
static bool str_eq_empty(const char *x, const char *y)
{
    return strcmp(x ? x : "", y ? y : "") == 0;
}

/* Copy a string into the arena: returns false only when s was non-NULL and
 * the copy failed. */
static bool dup_str(bb_arena *a, const char **dst, const char *s)
{
    *dst = NULL;
    if (!s)
        return true;
    *dst = bb_arena_strdup(a, s);
    return *dst != NULL;
}

/* ---- one copy of each repeated string while a model is cloned ----------
 *
 * bb_model_clone copies domains, op types, metadata keys and values and type
 * denotations once each: a program repeats a few dozen of them on every
 * node, and one copy per node scattered them over the heap, where every
 * pass reading a node's domain or metadata missed the cache. IR strings are
 * const (nothing writes into one), so nodes can share them. The pool lives
 * for one bb_model_clone call on its thread; other copies are plain. */

#define SHARED_MAX 64 /* longer strings are names, rarely repeated */

typedef struct pool_slot {
    const char *s; /* NULL: empty */
    uint32_t hash;
} pool_slot;

typedef struct str_pool {
    bb_arena *a; /* the clone's arena: what the pool hands out lives there */
    pool_slot *slot;
    size_t cap, n;
} str_pool;

static _Thread_local str_pool *t_pool;

static bool pool_grow(str_pool *p)
{
    size_t cap = p->cap ? p->cap * 2 : 256;
    pool_slot *slot = calloc(cap, sizeof *slot);
    if (!slot)
        return false;
    for (size_t i = 0; i < p->cap; i++) {
        if (!p->slot[i].s)
            continue;
        size_t j = p->slot[i].hash & (cap - 1);
        while (slot[j].s)
            j = (j + 1) & (cap - 1);
        slot[j] = p->slot[i];
    }
    free(p->slot);
    p->slot = slot;
    p->cap = cap;
    return true;
}

/* The pool's copy of s (len n, hash h), made on first sight; NULL on OOM. */
static const char *pool_get(str_pool *p, const char *s, size_t n, uint32_t h)
{
    if ((p->n + 1) * 2 > p->cap && !pool_grow(p))
        return NULL;
    size_t j = h & (p->cap - 1);
    for (; p->slot[j].s; j = (j + 1) & (p->cap - 1))
        if (p->slot[j].hash == h && strcmp(p->slot[j].s, s) == 0)
            return p->slot[j].s;
    const char *c = bb_arena_strndup(p->a, s, n);
    if (c) {
        p->slot[j] = (pool_slot){c, h};
        p->n++;
    }
    return c;
}

/* A fixed-cost hash of a short string: its length, first and last eight
 * bytes (the pool compares in full, so look-alikes only cost a probe). */
static uint32_t short_hash(const char *s, size_t n)
{
    uint64_t head = 0, tail = 0;
    if (n >= 8) {
        memcpy(&head, s, 8);
        memcpy(&tail, s + n - 8, 8);
    } else {
        for (size_t i = 0; i < n; i++)
            head = head << 8 | (unsigned char)s[i];
    }
    uint64_t h = (head ^ n) * 0x9e3779b97f4a7c15ull ^ tail * 0xc2b2ae3d27d4eb4full;
    return (uint32_t)(h ^ h >> 29);
}

/* dup_str, sharing one copy per distinct short string while a model is
 * cloned into a. */
static bool dup_shared(bb_arena *a, const char **dst, const char *s)
{
    if (!s || !t_pool || t_pool->a != a)
        return dup_str(a, dst, s);
    size_t n = strlen(s);
    if (n > SHARED_MAX)
        return dup_str(a, dst, s);
    *dst = pool_get(t_pool, s, n, short_hash(s, n));
    return *dst != NULL;
}

/* Copy bytes with a trailing NUL; a NULL source stays NULL. */
static bool dup_bytes(bb_arena *a, bb_bytes *dst, const bb_bytes *src)
{
    dst->data = NULL;
    dst->len = 0;
    if (!src->data)
        return true;
    if (src->len == SIZE_MAX)
        return false;
    uint8_t *p = bb_arena_alloc(a, src->len + 1);
    if (!p)
        return false;
    if (src->len)
        memcpy(p, src->data, src->len);
    p[src->len] = 0;
    dst->data = p;
    dst->len = src->len;
    return true;
}

/* Generic deep copy of a BB_VEC whose elements are plain values. */
typedef struct {
    void *v;
    size_t n, cap;
} any_vec;

static bool vec_copy_raw(bb_arena *a, void *dstp, const void *srcp, size_t elem)
{
    any_vec src, dst = {0};
    memcpy(&src, srcp, sizeof src);
    if (src.n) {
        dst.v = bb_arena_calloc(a, src.n, elem);
        if (!dst.v)
            return false;
        memcpy(dst.v, src.v, src.n * elem);
        dst.n = dst.cap = src.n;
    }
    memcpy(dstp, &dst, sizeof dst);
    return true;
}
#define VEC_COPY(a, dst, src) vec_copy_raw((a), (dst), (src), sizeof *(src)->v)

static bool str_list_copy(bb_arena *a, bb_str_list *dst, const bb_str_list *src)
{
    if (!VEC_COPY(a, dst, src))
        return false;
    for (size_t i = 0; i < dst->n; i++)
        if (!dup_str(a, &dst->v[i], src->v[i]))
            return false;
    return true;
}

static bool kv_list_copy(bb_arena *a, bb_kv_list *dst, const bb_kv_list *src)
{
    if (!VEC_COPY(a, dst, src))
        return false;
    for (size_t i = 0; i < dst->n; i++)
        if (!dup_shared(a, &dst->v[i].key, src->v[i].key) ||
            !dup_shared(a, &dst->v[i].value, src->v[i].value))
            return false;
    return true;
}

static bool opset_list_copy(bb_arena *a, bb_opset_list *dst, const bb_opset_list *src)
{
    if (!VEC_COPY(a, dst, src))
        return false;
    for (size_t i = 0; i < dst->n; i++)
        if (!dup_str(a, &dst->v[i].domain, src->v[i].domain))
            return false;
    return true;
}

/* The vec type is anonymous per declaration, so this takes the parts. */
static bool bytes_array_copy(bb_arena *a, bb_bytes **dv, size_t *dn, size_t *dcap,
                             const bb_bytes *sv, size_t sn)
{
    *dv = NULL;
    *dn = *dcap = 0;
    if (!sn)
        return true;
    bb_bytes *v = bb_arena_calloc(a, sn, sizeof *v);
    if (!v)
        return false;
    for (size_t i = 0; i < sn; i++)
        if (!dup_bytes(a, &v[i], &sv[i]))
            return false;
    *dv = v;
    *dn = *dcap = sn;
    return true;
}
#define BYTES_VEC_COPY(a, dst, src) \
    bytes_array_copy((a), &(dst)->v, &(dst)->n, &(dst)->cap, (src)->v, (src)->n)

/* ---- model -------------------------------------------------------------- */

bb_model *bb_model_new(void)
{
    bb_arena *a = bb_arena_create();
    if (!a)
        return NULL;
    bb_model *m = bb_arena_alloc(a, sizeof *m);
    if (!m) {
        bb_arena_destroy(a);
        return NULL;
    }
    m->arena = a;
    return m;
}

void bb_model_free(bb_model *m)
{
    if (m)
        bb_arena_destroy(m->arena); /* m itself lives in the arena */
}

const char *bb_model_str(bb_model *m, const char *s)
{
    return bb_arena_strdup(m->arena, s);
}

bb_graph *bb_graph_new(bb_arena *a, const char *name)
{
    bb_graph *g = bb_arena_alloc(a, sizeof *g);
    if (!g || !dup_str(a, &g->name, name))
        return NULL;
    return g;
}

bb_function *bb_model_add_function(bb_model *m, const char *domain, const char *name)
{
    bb_function *f = bb_arena_alloc(m->arena, sizeof *f);
    if (!f || !dup_str(m->arena, &f->domain, domain) || !dup_str(m->arena, &f->name, name))
        return NULL;
    bb_function **slot = BB_VEC_PUSH(m->arena, &m->functions);
    if (!slot)
        return NULL;
    *slot = f;
    return f;
}

bb_node *bb_node_new(bb_arena *a, const char *domain, const char *op_type)
{
    bb_node *n = bb_arena_alloc(a, sizeof *n);
    if (!n || !dup_str(a, &n->domain, domain) || !dup_str(a, &n->op_type, op_type))
        return NULL;
    return n;
}

static bb_node *node_list_add(bb_arena *a, bb_node_list *l, const char *domain,
                              const char *op_type)
{
    bb_node *n = bb_node_new(a, domain, op_type);
    if (!n)
        return NULL;
    bb_node **slot = BB_VEC_PUSH(a, l);
    if (!slot)
        return NULL;
    *slot = n;
    return n;
}

bb_node *bb_function_add_node(bb_model *m, bb_function *f, const char *domain,
                              const char *op_type)
{
    return node_list_add(m->arena, &f->nodes, domain, op_type);
}

bb_node *bb_graph_add_node(bb_arena *a, bb_graph *g, const char *domain,
                           const char *op_type)
{
    return node_list_add(a, &g->nodes, domain, op_type);
}

/* ---- lists -------------------------------------------------------------- */

int bb_str_list_push(bb_arena *a, bb_str_list *l, const char *s)
{
    const char *copy;
    if (!dup_str(a, &copy, s))
        return BB_ENOMEM;
    const char **slot = BB_VEC_PUSH(a, l);
    if (!slot)
        return BB_ENOMEM;
    *slot = copy;
    return BB_OK;
}

long bb_str_list_find(const bb_str_list *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (str_eq(l->v[i], s))
            return (long)i;
    return -1;
}

int bb_kv_set(bb_arena *a, bb_kv_list *l, const char *key, const char *value)
{
    const char *v;
    if (!dup_str(a, &v, value))
        return BB_ENOMEM;
    for (size_t i = 0; i < l->n; i++) {
        if (str_eq(l->v[i].key, key)) {
            l->v[i].value = v;
            return BB_OK;
        }
    }
    const char *k;
    if (!dup_str(a, &k, key))
        return BB_ENOMEM;
    bb_kv *slot = BB_VEC_PUSH(a, l);
    if (!slot)
        return BB_ENOMEM;
    slot->key = k;
    slot->value = v;
    return BB_OK;
}

const char *bb_kv_get(const bb_kv_list *l, const char *key)
{
    for (size_t i = 0; i < l->n; i++)
        if (str_eq(l->v[i].key, key))
            return l->v[i].value;
    return NULL;
}

bool bb_kv_remove(bb_kv_list *l, const char *key)
{
    bool removed = false;
    for (size_t i = 0; i < l->n;) {
        if (str_eq(l->v[i].key, key)) {
            BB_VEC_REMOVE(l, i);
            removed = true;
        } else {
            i++;
        }
    }
    return removed;
}

static bool domain_eq(const char *x, const char *y)
{
    if (bb_domain_is_onnx(x) || bb_domain_is_onnx(y))
        return bb_domain_is_onnx(x) && bb_domain_is_onnx(y);
    return str_eq(x, y);
}

int bb_opset_list_add(bb_arena *a, bb_opset_list *l, const char *domain, int64_t version)
{
    /* One entry per domain: a second add updates the version. */
    for (size_t i = 0; i < l->n; i++) {
        if (domain_eq(l->v[i].domain, domain)) {
            l->v[i].version = version;
            return BB_OK;
        }
    }
    const char *d;
    if (!dup_str(a, &d, domain ? domain : ""))
        return BB_ENOMEM;
    bb_opset_id *slot = BB_VEC_PUSH(a, l);
    if (!slot)
        return BB_ENOMEM;
    slot->domain = d;
    slot->version = version;
    return BB_OK;
}

int64_t bb_opset_list_version(const bb_opset_list *l, const char *domain)
{
    for (size_t i = 0; i < l->n; i++)
        if (domain_eq(l->v[i].domain, domain))
            return l->v[i].version;
    return -1;
}

/* ---- attributes --------------------------------------------------------- */

bb_attr *bb_node_add_attr(bb_arena *a, bb_node *n, const char *name, bb_attr_type type)
{
    bb_attr *at = bb_arena_alloc(a, sizeof *at);
    if (!at || !dup_str(a, &at->name, name))
        return NULL;
    at->type = type;
    bb_attr **slot = BB_VEC_PUSH(a, &n->attrs);
    if (!slot)
        return NULL;
    *slot = at;
    return at;
}

/* Replace an attribute of the same name in place (keeping its position),
 * or append a new one. */
static bb_attr *attr_set(bb_arena *a, bb_node *n, const char *name, bb_attr_type type)
{
    for (size_t i = 0; i < n->attrs.n; i++) {
        if (n->attrs.v[i] && str_eq(n->attrs.v[i]->name, name)) {
            bb_attr *at = bb_arena_alloc(a, sizeof *at);
            if (!at)
                return NULL;
            at->name = n->attrs.v[i]->name;
            at->type = type;
            n->attrs.v[i] = at;
            return at;
        }
    }
    return bb_node_add_attr(a, n, name, type);
}

bb_attr *bb_node_set_attr_int(bb_arena *a, bb_node *n, const char *name, int64_t v)
{
    bb_attr *at = attr_set(a, n, name, BB_ATTR_INT);
    if (at)
        at->i = v;
    return at;
}

bb_attr *bb_node_set_attr_float(bb_arena *a, bb_node *n, const char *name, float v)
{
    bb_attr *at = attr_set(a, n, name, BB_ATTR_FLOAT);
    if (at)
        at->f = v;
    return at;
}

bb_attr *bb_node_set_attr_string(bb_arena *a, bb_node *n, const char *name, const char *v)
{
    bb_bytes src = {(uint8_t *)(v ? v : ""), v ? strlen(v) : 0};
    bb_bytes copy;
    if (!dup_bytes(a, &copy, &src))
        return NULL;
    bb_attr *at = attr_set(a, n, name, BB_ATTR_STRING);
    if (at) {
        at->s = copy;
        at->has_s = true;
    }
    return at;
}

bb_attr *bb_node_set_attr_ints(bb_arena *a, bb_node *n, const char *name,
                               const int64_t *v, size_t count)
{
    int64_t *copy = NULL;
    if (count) {
        copy = bb_arena_calloc(a, count, sizeof *copy);
        if (!copy)
            return NULL;
        memcpy(copy, v, count * sizeof *copy);
    }
    bb_attr *at = attr_set(a, n, name, BB_ATTR_INTS);
    if (at) {
        at->ints.v = copy;
        at->ints.n = at->ints.cap = count;
    }
    return at;
}

const bb_attr *bb_node_attr(const bb_node *n, const char *name)
{
    for (size_t i = 0; i < n->attrs.n; i++)
        if (n->attrs.v[i] && str_eq(n->attrs.v[i]->name, name))
            return n->attrs.v[i];
    return NULL;
}

int64_t bb_node_attr_int(const bb_node *n, const char *name, int64_t dflt)
{
    const bb_attr *at = bb_node_attr(n, name);
    return at && at->type == BB_ATTR_INT ? at->i : dflt;
}

float bb_node_attr_float(const bb_node *n, const char *name, float dflt)
{
    const bb_attr *at = bb_node_attr(n, name);
    return at && at->type == BB_ATTR_FLOAT ? at->f : dflt;
}

const char *bb_node_attr_string(const bb_node *n, const char *name, const char *dflt)
{
    const bb_attr *at = bb_node_attr(n, name);
    if (!at || at->type != BB_ATTR_STRING)
        return dflt;
    /* IR byte buffers are NUL-terminated one past len (see top comment). */
    return at->s.data ? (const char *)at->s.data : "";
}

/* ---- value infos and types ---------------------------------------------- */

bb_value_info *bb_value_info_new(bb_arena *a, const char *name, bb_type_proto *type)
{
    bb_value_info *vi = bb_arena_alloc(a, sizeof *vi);
    if (!vi || !dup_str(a, &vi->name, name))
        return NULL;
    vi->type = type;
    return vi;
}

bb_value_info *bb_value_info_find(const bb_value_info_list *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i] && str_eq(l->v[i]->name, name))
            return l->v[i];
    return NULL;
}

bb_type_proto *bb_type_proto_tensor(bb_arena *a, int32_t elem_type)
{
    bb_type_proto *t = bb_arena_alloc(a, sizeof *t);
    if (!t)
        return NULL;
    t->kind = BB_TP_TENSOR;
    t->elem_type = elem_type;
    return t;
}

bb_type_proto *bb_type_proto_opaque(bb_arena *a, const char *domain, const char *name)
{
    bb_type_proto *t = bb_arena_alloc(a, sizeof *t);
    if (!t || !dup_str(a, &t->opaque_domain, domain) || !dup_str(a, &t->opaque_name, name))
        return NULL;
    t->kind = BB_TP_OPAQUE;
    return t;
}

bb_type_proto *bb_type_proto_sequence(bb_arena *a, bb_type_proto *elem)
{
    bb_type_proto *t = bb_arena_alloc(a, sizeof *t);
    if (!t)
        return NULL;
    t->kind = BB_TP_SEQUENCE;
    t->elem = elem;
    return t;
}

/* Structural equality; denotations are annotations and are ignored.
 * NULL equals NULL only. */
bool bb_type_proto_equal(const bb_type_proto *x, const bb_type_proto *y)
{
    while (x && y) {
        if (x->kind != y->kind)
            return false;
        switch (x->kind) {
        case BB_TP_NONE:
            return true;
        case BB_TP_TENSOR:
        case BB_TP_SPARSE_TENSOR:
            if (x->elem_type != y->elem_type || x->has_shape != y->has_shape)
                return false;
            if (!x->has_shape)
                return true;
            if (x->shape.n != y->shape.n)
                return false;
            for (size_t i = 0; i < x->shape.n; i++) {
                const bb_dim *dx = &x->shape.v[i], *dy = &y->shape.v[i];
                if (dx->has_value != dy->has_value)
                    return false;
                if (dx->has_value ? dx->value != dy->value : !str_eq(dx->param, dy->param))
                    return false;
            }
            return true;
        case BB_TP_OPAQUE:
            return str_eq_empty(x->opaque_domain, y->opaque_domain) &&
                   str_eq_empty(x->opaque_name, y->opaque_name);
        case BB_TP_MAP:
            if (x->map_key_type != y->map_key_type)
                return false;
            break;
        case BB_TP_SEQUENCE:
        case BB_TP_OPTIONAL:
            break;
        default:
            return false;
        }
        x = x->elem;
        y = y->elem;
    }
    return x == y;
}

bb_function *bb_model_find_function(const bb_model *m, const char *domain,
                                    const char *name, const char *overload)
{
    for (size_t i = 0; i < m->functions.n; i++) {
        bb_function *f = m->functions.v[i];
        if (f && str_eq_empty(f->name, name) && str_eq_empty(f->overload, overload) &&
            (str_eq_empty(f->domain, domain) || domain_eq(f->domain, domain)))
            return f;
    }
    return NULL;
}

/* ---- deep copies -------------------------------------------------------- */

bb_tensor_proto *bb_tensor_proto_clone(bb_arena *a, const bb_tensor_proto *t)
{
    if (!t)
        return NULL;
    bb_tensor_proto *c = bb_arena_alloc(a, sizeof *c);
    if (!c)
        return NULL;
    *c = *t;
    if (!dup_str(a, &c->name, t->name) || !dup_str(a, &c->doc_string, t->doc_string) ||
        !VEC_COPY(a, &c->dims, &t->dims) || !dup_bytes(a, &c->raw_data, &t->raw_data) ||
        !BYTES_VEC_COPY(a, &c->string_data, &t->string_data) ||
        !kv_list_copy(a, &c->external_data, &t->external_data) ||
        !kv_list_copy(a, &c->metadata, &t->metadata))
        return NULL;
    return c;
}

bb_type_proto *bb_type_proto_clone(bb_arena *a, const bb_type_proto *t)
{
    if (!t)
        return NULL;
    bb_type_proto *c = bb_arena_alloc(a, sizeof *c);
    if (!c)
        return NULL;
    *c = *t;
    c->elem = NULL;
    if (!dup_shared(a, &c->denotation, t->denotation) ||
        !dup_shared(a, &c->opaque_domain, t->opaque_domain) ||
        !dup_shared(a, &c->opaque_name, t->opaque_name) || !VEC_COPY(a, &c->shape, &t->shape))
        return NULL;
    for (size_t i = 0; i < c->shape.n; i++)
        if (!dup_str(a, &c->shape.v[i].param, t->shape.v[i].param) ||
            !dup_str(a, &c->shape.v[i].denotation, t->shape.v[i].denotation))
            return NULL;
    if (t->elem && !(c->elem = bb_type_proto_clone(a, t->elem)))
        return NULL;
    return c;
}

bb_attr *bb_attr_clone(bb_arena *a, const bb_attr *at)
{
    if (!at)
        return NULL;
    bb_attr *c = bb_arena_alloc(a, sizeof *c);
    if (!c)
        return NULL;
    *c = *at;
    c->t = NULL;
    c->g = NULL;
    c->tp = NULL;
    if (!dup_str(a, &c->name, at->name) || !dup_str(a, &c->ref_attr_name, at->ref_attr_name) ||
        !dup_str(a, &c->doc_string, at->doc_string) || !dup_bytes(a, &c->s, &at->s) ||
        !dup_bytes(a, &c->sparse_tensor, &at->sparse_tensor) ||
        !VEC_COPY(a, &c->floats, &at->floats) || !VEC_COPY(a, &c->ints, &at->ints) ||
        !BYTES_VEC_COPY(a, &c->strings, &at->strings) ||
        !BYTES_VEC_COPY(a, &c->sparse_tensors, &at->sparse_tensors) ||
        !VEC_COPY(a, &c->tensors, &at->tensors) || !VEC_COPY(a, &c->graphs, &at->graphs) ||
        !VEC_COPY(a, &c->type_protos, &at->type_protos))
        return NULL;
    if (at->t && !(c->t = bb_tensor_proto_clone(a, at->t)))
        return NULL;
    if (at->g && !(c->g = bb_graph_clone(a, at->g)))
        return NULL;
    if (at->tp && !(c->tp = bb_type_proto_clone(a, at->tp)))
        return NULL;
    for (size_t i = 0; i < c->tensors.n; i++)
        if (at->tensors.v[i] && !(c->tensors.v[i] = bb_tensor_proto_clone(a, at->tensors.v[i])))
            return NULL;
    for (size_t i = 0; i < c->graphs.n; i++)
        if (at->graphs.v[i] && !(c->graphs.v[i] = bb_graph_clone(a, at->graphs.v[i])))
            return NULL;
    for (size_t i = 0; i < c->type_protos.n; i++)
        if (at->type_protos.v[i] &&
            !(c->type_protos.v[i] = bb_type_proto_clone(a, at->type_protos.v[i])))
            return NULL;
    return c;
}

static bool attr_list_copy(bb_arena *a, bb_attr_list *dst, const bb_attr_list *src)
{
    if (!VEC_COPY(a, dst, src))
        return false;
    for (size_t i = 0; i < dst->n; i++)
        if (src->v[i] && !(dst->v[i] = bb_attr_clone(a, src->v[i])))
            return false;
    return true;
}

bb_node *bb_node_clone(bb_arena *a, const bb_node *n)
{
    if (!n)
        return NULL;
    bb_node *c = bb_arena_alloc(a, sizeof *c);
    if (!c)
        return NULL;
    *c = *n;
    if (!dup_str(a, &c->name, n->name) || !dup_shared(a, &c->op_type, n->op_type) ||
        !dup_shared(a, &c->domain, n->domain) || !dup_shared(a, &c->overload, n->overload) ||
        !dup_str(a, &c->doc_string, n->doc_string) ||
        !str_list_copy(a, &c->inputs, &n->inputs) ||
        !str_list_copy(a, &c->outputs, &n->outputs) ||
        !attr_list_copy(a, &c->attrs, &n->attrs) ||
        !kv_list_copy(a, &c->metadata, &n->metadata) ||
        !BYTES_VEC_COPY(a, &c->device_configurations, &n->device_configurations))
        return NULL;
    return c;
}

static bool node_list_copy(bb_arena *a, bb_node_list *dst, const bb_node_list *src)
{
    if (!VEC_COPY(a, dst, src))
        return false;
    for (size_t i = 0; i < dst->n; i++)
        if (src->v[i] && !(dst->v[i] = bb_node_clone(a, src->v[i])))
            return false;
    return true;
}

bb_value_info *bb_value_info_clone(bb_arena *a, const bb_value_info *vi)
{
    if (!vi)
        return NULL;
    bb_value_info *c = bb_arena_alloc(a, sizeof *c);
    if (!c)
        return NULL;
    *c = *vi;
    c->type = NULL;
    if (!dup_str(a, &c->name, vi->name) || !dup_str(a, &c->doc_string, vi->doc_string) ||
        !kv_list_copy(a, &c->metadata, &vi->metadata))
        return NULL;
    if (vi->type && !(c->type = bb_type_proto_clone(a, vi->type)))
        return NULL;
    return c;
}

static bool vi_list_copy(bb_arena *a, bb_value_info_list *dst, const bb_value_info_list *src)
{
    if (!VEC_COPY(a, dst, src))
        return false;
    for (size_t i = 0; i < dst->n; i++)
        if (src->v[i] && !(dst->v[i] = bb_value_info_clone(a, src->v[i])))
            return false;
    return true;
}

bb_graph *bb_graph_clone(bb_arena *a, const bb_graph *g)
{
    if (!g)
        return NULL;
    bb_graph *c = bb_arena_alloc(a, sizeof *c);
    if (!c)
        return NULL;
    *c = *g;
    if (!dup_str(a, &c->name, g->name) || !dup_str(a, &c->doc_string, g->doc_string) ||
        !node_list_copy(a, &c->nodes, &g->nodes) ||
        !VEC_COPY(a, &c->initializers, &g->initializers) ||
        !BYTES_VEC_COPY(a, &c->sparse_initializers, &g->sparse_initializers) ||
        !BYTES_VEC_COPY(a, &c->quantization_annotations, &g->quantization_annotations) ||
        !vi_list_copy(a, &c->inputs, &g->inputs) || !vi_list_copy(a, &c->outputs, &g->outputs) ||
        !vi_list_copy(a, &c->value_info, &g->value_info) ||
        !kv_list_copy(a, &c->metadata, &g->metadata))
        return NULL;
    for (size_t i = 0; i < c->initializers.n; i++)
        if (g->initializers.v[i] &&
            !(c->initializers.v[i] = bb_tensor_proto_clone(a, g->initializers.v[i])))
            return NULL;
    return c;
}

bb_function *bb_function_clone(bb_arena *a, const bb_function *f)
{
    if (!f)
        return NULL;
    bb_function *c = bb_arena_alloc(a, sizeof *c);
    if (!c)
        return NULL;
    *c = *f;
    if (!dup_str(a, &c->name, f->name) || !dup_str(a, &c->domain, f->domain) ||
        !dup_str(a, &c->overload, f->overload) || !dup_str(a, &c->doc_string, f->doc_string) ||
        !str_list_copy(a, &c->inputs, &f->inputs) ||
        !str_list_copy(a, &c->outputs, &f->outputs) ||
        !str_list_copy(a, &c->attributes, &f->attributes) ||
        !attr_list_copy(a, &c->attribute_protos, &f->attribute_protos) ||
        !node_list_copy(a, &c->nodes, &f->nodes) ||
        !opset_list_copy(a, &c->opset_imports, &f->opset_imports) ||
        !vi_list_copy(a, &c->value_info, &f->value_info) ||
        !kv_list_copy(a, &c->metadata, &f->metadata))
        return NULL;
    return c;
}

static bb_model *model_clone_into(bb_model *c, const bb_model *m);

bb_model *bb_model_clone(const bb_model *m)
{
    bb_model *c = bb_model_new();
    if (!c)
        return NULL;
    str_pool pool = {.a = c->arena}, *outer = t_pool;
    t_pool = &pool;
    bb_model *r = model_clone_into(c, m);
    t_pool = outer;
    free(pool.slot);
    return r;
}

static bb_model *model_clone_into(bb_model *c, const bb_model *m)
{
    bb_arena *a = c->arena;
    *c = *m;
    c->arena = a;
    c->graph = NULL;
    if (!dup_str(a, &c->producer_name, m->producer_name) ||
        !dup_str(a, &c->producer_version, m->producer_version) ||
        !dup_str(a, &c->domain, m->domain) || !dup_str(a, &c->doc_string, m->doc_string) ||
        !opset_list_copy(a, &c->opset_imports, &m->opset_imports) ||
        !VEC_COPY(a, &c->functions, &m->functions) ||
        !kv_list_copy(a, &c->metadata, &m->metadata) ||
        !BYTES_VEC_COPY(a, &c->training_info, &m->training_info) ||
        !BYTES_VEC_COPY(a, &c->configuration, &m->configuration))
        goto fail;
    if (m->graph && !(c->graph = bb_graph_clone(a, m->graph)))
        goto fail;
    for (size_t i = 0; i < c->functions.n; i++)
        if (m->functions.v[i] && !(c->functions.v[i] = bb_function_clone(a, m->functions.v[i])))
            goto fail;
    return c;
fail:
    bb_model_free(c);
    return NULL;
}

bool bb_domain_is_onnx(const char *domain)
{
    /* Called per node by every pass; most domains are "ai.bytesandbrains.*",
     * told apart by their fourth byte without a call. */
    return !domain || !domain[0] ||
           (domain[0] == 'a' && domain[1] == 'i' && domain[2] == '.' && domain[3] == 'o' &&
            domain[4] == 'n' && domain[5] == 'n' && domain[6] == 'x' && domain[7] == '\0');
}

/* ---- dtypes ------------------------------------------------------------- */

static const struct {
    const char *name;
    size_t size;
} dtypes[BB_DT_MAX + 1] = {
    [BB_DT_UNDEFINED] = {"undefined", 0},
    [BB_DT_FLOAT] = {"float", 4},
    [BB_DT_UINT8] = {"uint8", 1},
    [BB_DT_INT8] = {"int8", 1},
    [BB_DT_UINT16] = {"uint16", 2},
    [BB_DT_INT16] = {"int16", 2},
    [BB_DT_INT32] = {"int32", 4},
    [BB_DT_INT64] = {"int64", 8},
    [BB_DT_STRING] = {"string", 0},
    [BB_DT_BOOL] = {"bool", 1},
    [BB_DT_FLOAT16] = {"float16", 2},
    [BB_DT_DOUBLE] = {"double", 8},
    [BB_DT_UINT32] = {"uint32", 4},
    [BB_DT_UINT64] = {"uint64", 8},
    [BB_DT_COMPLEX64] = {"complex64", 8},
    [BB_DT_COMPLEX128] = {"complex128", 16},
    [BB_DT_BFLOAT16] = {"bfloat16", 2},
    [BB_DT_FLOAT8E4M3FN] = {"float8e4m3fn", 1},
    [BB_DT_FLOAT8E4M3FNUZ] = {"float8e4m3fnuz", 1},
    [BB_DT_FLOAT8E5M2] = {"float8e5m2", 1},
    [BB_DT_FLOAT8E5M2FNUZ] = {"float8e5m2fnuz", 1},
    [BB_DT_UINT4] = {"uint4", 0},
    [BB_DT_INT4] = {"int4", 0},
    [BB_DT_FLOAT4E2M1] = {"float4e2m1", 0},
    [BB_DT_FLOAT8E8M0] = {"float8e8m0", 1},
    [BB_DT_UINT2] = {"uint2", 0},
    [BB_DT_INT2] = {"int2", 0},
};

/* Elements per byte of the packed sub-byte types; 0 for the others. */
static unsigned dtype_per_byte(int32_t dt)
{
    switch (dt) {
    case BB_DT_UINT4:
    case BB_DT_INT4:
    case BB_DT_FLOAT4E2M1:
        return 2;
    case BB_DT_UINT2:
    case BB_DT_INT2:
        return 4;
    }
    return 0;
}

size_t bb_dtype_size(int32_t dtype)
{
    return dtype >= 0 && dtype <= BB_DT_MAX ? dtypes[dtype].size : 0;
}

size_t bb_dtype_nbytes(int32_t dtype, uint64_t n)
{
    unsigned per_byte = dtype_per_byte(dtype);
    if (per_byte) {
        uint64_t b = n / per_byte + (n % per_byte != 0);
        return b > SIZE_MAX ? SIZE_MAX : (size_t)b;
    }
    size_t sz = bb_dtype_size(dtype);
    if (sz == 0 || n == 0)
        return 0;
    if (n > SIZE_MAX / sz)
        return SIZE_MAX;
    return (size_t)n * sz;
}

const char *bb_dtype_name(int32_t dtype)
{
    return dtype >= 0 && dtype <= BB_DT_MAX ? dtypes[dtype].name : "undefined";
}
