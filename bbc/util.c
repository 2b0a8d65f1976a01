/*
 * util.c — the IR helpers every compiler pass shares (see util.h). Graphs
 * are tens to a few thousand nodes; the helpers favour plain linear scans
 * and one arena-backed hash map for producer lookups.
 */
#include "bbc/util.h"

#include <stdio.h>
#include <string.h>

#include "bb/le.h"
#include "bb/meta.h"

/* ---- metadata, classification ---------------------------------------------- */

char *bbc_join(bb_arena *a, const char *x, const char *sep, const char *y)
{
    size_t nx = x ? strlen(x) : 0, ns = sep ? strlen(sep) : 0, ny = y ? strlen(y) : 0;
    char *s = bb_arena_alloc(a, nx + ns + ny + 1);
    if (!s)
        return NULL;
    memcpy(s, x ? x : "", nx);
    memcpy(s + nx, sep ? sep : "", ns);
    memcpy(s + nx + ns, y ? y : "", ny);
    s[nx + ns + ny] = '\0';
    return s;
}

const char *bbc_decimal(char buf[BBC_DECIMAL_MAX], size_t k)
{
    size_t d = BBC_DECIMAL_MAX;
    buf[--d] = '\0';
    do
        buf[--d] = (char)('0' + k % 10);
    while ((k /= 10) > 0);
    return buf + d;
}

char *bbc_join_num(bb_arena *a, const char *stem, size_t k)
{
    char digits[BBC_DECIMAL_MAX];
    return bbc_join(a, stem, "_", bbc_decimal(digits, k));
}

const char *bbc_meta(const bb_node *n, const char *key)
{
    return n ? bb_kv_get(&n->metadata, key) : NULL;
}

bool bbc_meta_is(const bb_node *n, const char *key, const char *value)
{
    return bbc_str_eq(bbc_meta(n, key), value);
}

int bbc_set_meta(bb_arena *a, bb_node *n, const char *key, const char *value)
{
    return bb_kv_set(a, &n->metadata, key, value);
}

bool bbc_node_is(const bb_node *n, const char *domain, const char *op_type)
{
    /* The op first: it tells most nodes apart by its first byte. */
    if (!bbc_str_eq(n->op_type, op_type))
        return false;
    if (bb_domain_is_onnx(domain)) {
        if (!bb_domain_is_onnx(n->domain))
            return false;
    } else if (!bbc_str_eq(n->domain, domain)) {
        return false;
    }
    return true;
}

bool bbc_is_wire(const bb_node *n)
{
    return bb_op_is_wire(n->domain, n->op_type);
}

bool bbc_is_wire_send(const bb_node *n)
{
    return bb_op_is_wire_send(n->domain, n->op_type);
}

bool bbc_is_wire_recv(const bb_node *n)
{
    return bb_op_is_wire_recv(n->domain, n->op_type);
}

bool bbc_is_role_node(const bb_node *n)
{
    if (bb_domain_is_role(n->domain))
        return true;
    return bbc_meta(n, BB_META_SLOT) || bbc_meta(n, BB_META_CONCRETE_TYPE) ||
           bbc_meta(n, BB_META_REQUIRED_TRAIT);
}

bb_function *bbc_callee(const bb_model *m, const bb_node *n)
{
    if (!m || bb_opset_is_reserved(n->domain))
        return NULL;
    for (size_t i = 0; i < m->functions.n; i++) {
        bb_function *f = m->functions.v[i];
        if (bbc_str_eq(f->name, n->op_type) && bbc_str_eq(f->domain, n->domain) &&
            bbc_str_eq(f->overload ? f->overload : "", n->overload ? n->overload : ""))
            return f;
    }
    return NULL;
}

const char *bbc_node_label(bb_arena *a, const bb_node *n, size_t index)
{
    if (n->name && *n->name)
        return n->name;
    return bb_arena_sprintf(a, "#%zu", index);
}

/* ---- copies within one model ---------------------------------------------------- */

/* Give a copied vec its own array (same elements); false on OOM. */
#define OWN_ARRAY(a, vec)                                                                  \
    ((vec)->cap = (vec)->n,                                                                \
     !(vec)->n || ((vec)->v = bb_arena_memdup((a), (vec)->v, (vec)->n * sizeof *(vec)->v)))

bb_node *bbc_node_copy(bb_arena *a, const bb_node *n)
{
    bb_node *c = bb_arena_alloc(a, sizeof *c);
    if (!c)
        return NULL;
    *c = *n;
    if (!OWN_ARRAY(a, &c->inputs) || !OWN_ARRAY(a, &c->outputs) || !OWN_ARRAY(a, &c->attrs) ||
        !OWN_ARRAY(a, &c->metadata) || !OWN_ARRAY(a, &c->device_configurations))
        return NULL;
    for (size_t i = 0; i < c->attrs.n; i++)
        if (c->attrs.v[i] && !(c->attrs.v[i] = bb_attr_clone(a, n->attrs.v[i])))
            return NULL;
    return c;
}

bb_value_info *bbc_value_info_copy(bb_arena *a, const bb_value_info *vi)
{
    bb_value_info *c = bb_arena_alloc(a, sizeof *c);
    if (!c)
        return NULL;
    *c = *vi;
    return OWN_ARRAY(a, &c->metadata) ? c : NULL;
}

/* ---- map --------------------------------------------------------------------- */

/* A string hash for the maps (not a wire hash: it never leaves the
 * process): eight bytes a step, the last step reading the final eight
 * (overlapping the one before; no variable-length memcpy), then a mix. */
static uint64_t hash_str(const char *s)
{
    size_t n = strlen(s);
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n, w = 0;
    if (n < 8) {
        for (size_t i = 0; i < n; i++)
            w = w << 8 | (unsigned char)s[i];
    } else {
        for (size_t i = 0; i + 8 < n; i += 8) {
            memcpy(&w, s + i, 8);
            h = (h ^ w) * 0xff51afd7ed558ccdull;
            h ^= h >> 32;
        }
        memcpy(&w, s + n - 8, 8);
    }
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

int bbc_map_init(bbc_map *m, bb_arena *a, size_t hint)
{
    memset(m, 0, sizeof *m);
    m->a = a;
    size_t cap = 16;
    while (cap < hint * 2 + 1)
        cap *= 2;
    m->keys = bb_arena_calloc(a, cap, sizeof *m->keys);
    m->vals = bb_arena_alloc(a, cap * sizeof *m->vals);
    m->hashes = bb_arena_alloc(a, cap * sizeof *m->hashes);
    if (!m->keys || !m->vals || !m->hashes)
        return BB_ENOMEM;
    m->cap = cap;
    return BB_OK;
}

static int map_grow(bbc_map *m)
{
    bbc_map bigger;
    if (bbc_map_init(&bigger, m->a, m->cap) != BB_OK)
        return BB_ENOMEM;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i])
            continue;
        size_t j = m->hashes[i] & (bigger.cap - 1);
        while (bigger.keys[j])
            j = (j + 1) & (bigger.cap - 1);
        bigger.keys[j] = m->keys[i];
        bigger.vals[j] = m->vals[i];
        bigger.hashes[j] = m->hashes[i];
        bigger.n++;
    }
    *m = bigger;
    return BB_OK;
}

int bbc_set_add(bbc_map *m, const char *v)
{
    return v && *v ? bbc_map_put(m, v, 0) : BB_OK;
}

int bbc_map_put(bbc_map *m, const char *key, size_t val)
{
    if ((m->n + 1) * 2 > m->cap && map_grow(m) != BB_OK)
        return BB_ENOMEM;
    uint32_t h = (uint32_t)hash_str(key);
    size_t i = h & (m->cap - 1);
    while (m->keys[i]) {
        if (m->hashes[i] == h && strcmp(m->keys[i], key) == 0) {
            m->vals[i] = val;
            return BB_OK;
        }
        i = (i + 1) & (m->cap - 1);
    }
    m->keys[i] = key;
    m->vals[i] = val;
    m->hashes[i] = h;
    m->n++;
    return BB_OK;
}

bool bbc_map_get(const bbc_map *m, const char *key, size_t *val)
{
    if (!key || m->cap == 0)
        return false;
    uint32_t h = (uint32_t)hash_str(key);
    size_t i = h & (m->cap - 1);
    while (m->keys[i]) {
        if (m->hashes[i] == h && strcmp(m->keys[i], key) == 0) {
            if (val)
                *val = m->vals[i];
            return true;
        }
        i = (i + 1) & (m->cap - 1);
    }
    return false;
}

int bbc_kv_set_indexed(bb_arena *a, bb_kv_list *l, bbc_map *index, const char *key,
                       const char *value)
{
    size_t at;
    if (!key) /* not indexed (and never in a recorded program) */
        return bb_kv_set(a, l, key, value);
    const char *v = value ? bb_arena_strdup(a, value) : NULL;
    if (value && !v)
        return BB_ENOMEM;
    if (bbc_map_get(index, key, &at)) {
        l->v[at].value = v;
        return BB_OK;
    }
    bb_kv *e = BB_VEC_PUSH(a, l);
    if (!e || !(e->key = bb_arena_strdup(a, key)))
        return BB_ENOMEM;
    e->value = v;
    return bbc_map_put(index, e->key, l->n - 1);
}

/* ---- function index ------------------------------------------------------------ */

/* "domain\x1fname\x1foverload" into buf; false when it does not fit. */
static bool fn_key(char *buf, size_t cap, const char *domain, const char *name,
                   const char *overload)
{
    int n = snprintf(buf, cap, "%s\x1f%s\x1f%s", domain ? domain : "", name ? name : "",
                     overload ? overload : "");
    return n >= 0 && (size_t)n < cap;
}

#define FN_KEY_MAX 1024

int bbc_fn_index_init(bbc_fn_index *ix, bb_arena *a, const bb_model *m)
{
    ix->m = m;
    if (bbc_map_init(&ix->map, a, m->functions.n) != BB_OK)
        return BB_ENOMEM;
    char key[FN_KEY_MAX];
    for (size_t i = 0; i < m->functions.n; i++) {
        const bb_function *f = m->functions.v[i];
        if (!fn_key(key, sizeof key, f->domain, f->name, f->overload) ||
            bbc_map_get(&ix->map, key, NULL))
            continue; /* an absurdly long name is never called by a fitting key */
        const char *k = bb_arena_strdup(a, key);
        if (!k || bbc_map_put(&ix->map, k, i) != BB_OK)
            return BB_ENOMEM;
    }
    return BB_OK;
}

size_t bbc_fn_index_callee(const bbc_fn_index *ix, const bb_node *n)
{
    if (!n->op_type || bb_opset_is_reserved(n->domain))
        return SIZE_MAX;
    char key[FN_KEY_MAX];
    size_t i;
    if (!fn_key(key, sizeof key, n->domain, n->op_type, n->overload) ||
        !bbc_map_get(&ix->map, key, &i))
        return SIZE_MAX;
    return i;
}

/* ---- producers / consumers -------------------------------------------------- */

int bbc_producers(bb_arena *a, const bb_function *f, bbc_map *out, const char **dup)
{
    if (dup)
        *dup = NULL;
    size_t values = f->inputs.n;
    for (size_t i = 0; i < f->nodes.n; i++)
        values += f->nodes.v[i]->outputs.n;
    if (bbc_map_init(out, a, values) != BB_OK)
        return BB_ENOMEM;
    for (size_t i = 0; i < f->inputs.n; i++) {
        const char *v = f->inputs.v[i];
        if (!v || !*v)
            continue;
        if (bbc_map_get(out, v, NULL)) {
            if (dup && !*dup)
                *dup = v;
            continue;
        }
        if (bbc_map_put(out, v, BBC_FORMAL) != BB_OK)
            return BB_ENOMEM;
    }
    for (size_t i = 0; i < f->nodes.n; i++) {
        const bb_node *n = f->nodes.v[i];
        for (size_t j = 0; j < n->outputs.n; j++) {
            const char *v = n->outputs.v[j];
            if (!v || !*v)
                continue;
            if (bbc_map_get(out, v, NULL)) {
                if (dup && !*dup)
                    *dup = v;
                continue;
            }
            if (bbc_map_put(out, v, i) != BB_OK)
                return BB_ENOMEM;
        }
    }
    return BB_OK;
}

size_t bbc_node_index(const bb_function *f, const bb_node *n)
{
    for (size_t i = 0; i < f->nodes.n; i++)
        if (f->nodes.v[i] == n)
            return i;
    return SIZE_MAX;
}

int bbc_topo_order(bb_arena *a, const bb_function *f, size_t *order, size_t *n_sorted)
{
    bbc_map prod;
    if (f->nodes.n > 0 && bbc_producers(a, f, &prod, NULL) != BB_OK)
        return BB_ENOMEM;
    return bbc_topo_order_with(a, f, &prod, order, n_sorted);
}

int bbc_topo_order_with(bb_arena *a, const bb_function *f, const bbc_map *producers,
                        size_t *order, size_t *n_sorted)
{
    size_t n = f->nodes.n;
    if (n_sorted)
        *n_sorted = 0;
    if (n == 0)
        return BB_OK;
    const bbc_map prod = *producers;
    /* indegree = number of inputs produced by a node; edges producer->consumer. */
    size_t *indeg = bb_arena_calloc(a, n, sizeof *indeg);
    size_t *head = bb_arena_calloc(a, n, sizeof *head);  /* adjacency via linked edges */
    size_t n_edges = 0;
    for (size_t i = 0; i < n; i++)
        n_edges += f->nodes.v[i]->inputs.n;
    size_t *next = bb_arena_calloc(a, n_edges + 1, sizeof *next);
    size_t *dst = bb_arena_calloc(a, n_edges + 1, sizeof *dst);
    size_t *queue = bb_arena_calloc(a, n, sizeof *queue);
    if (!indeg || !head || !next || !dst || !queue)
        return BB_ENOMEM;
    for (size_t i = 0; i < n; i++)
        head[i] = SIZE_MAX;
    size_t e = 0;
    for (size_t i = 0; i < n; i++) {
        const bb_node *nd = f->nodes.v[i];
        for (size_t j = 0; j < nd->inputs.n; j++) {
            size_t p;
            if (!nd->inputs.v[j] || !*nd->inputs.v[j] ||
                !bbc_map_get(&prod, nd->inputs.v[j], &p) || p == BBC_FORMAL)
                continue;
            dst[e] = i;
            next[e] = head[p];
            head[p] = e;
            e++;
            indeg[i]++;
        }
    }
    size_t qh = 0, qt = 0, k = 0;
    for (size_t i = 0; i < n; i++)
        if (indeg[i] == 0)
            queue[qt++] = i;
    while (qh < qt) {
        size_t u = queue[qh++];
        order[k++] = u;
        for (size_t ed = head[u]; ed != SIZE_MAX; ed = next[ed])
            if (--indeg[dst[ed]] == 0)
                queue[qt++] = dst[ed];
    }
    if (n_sorted)
        *n_sorted = k;
    return k < n ? BB_EVALIDATE : BB_OK;
}

/* ---- types -------------------------------------------------------------------- */

const bb_type_node *bbc_value_type(const bb_function *f, const char *value)
{
    const bb_value_info *vi = bb_value_info_find(&f->value_info, value);
    if (!vi || !vi->type)
        return NULL;
    return bb_type_from_proto(vi->type);
}

int bbc_set_value_type(bb_arena *a, bb_function *f, const char *value, const bb_type_node *t)
{
    bb_type_proto *tp = bb_type_to_proto(a, t);
    if (!tp)
        return BB_ENOMEM;
    bb_value_info *vi = bb_value_info_find(&f->value_info, value);
    if (vi) {
        vi->type = tp;
        return BB_OK;
    }
    vi = bb_value_info_new(a, value, tp);
    if (!vi)
        return BB_ENOMEM;
    bb_value_info **slot = BB_VEC_PUSH(a, &f->value_info);
    if (!slot)
        return BB_ENOMEM;
    *slot = vi;
    return BB_OK;
}

int bbc_value_info_index(bb_arena *a, const bb_function *f, bbc_map *out)
{
    if (bbc_map_init(out, a, f->value_info.n) != BB_OK)
        return BB_ENOMEM;
    for (size_t k = f->value_info.n; k-- > 0;) /* backwards: the first one wins */
        if (f->value_info.v[k]->name && bbc_map_put(out, f->value_info.v[k]->name, k) != BB_OK)
            return BB_ENOMEM;
    return BB_OK;
}

int bbc_type_cache_init(bbc_type_cache *c, bb_arena *a)
{
    return bbc_map_init(&c->by_denotation, a, 32);
}

const bb_type_node *bbc_type_cache_get(bbc_type_cache *c, const bb_type_proto *tp)
{
    if (!tp || !tp->denotation)
        return bb_type_from_proto(tp);
    size_t v;
    if (bbc_map_get(&c->by_denotation, tp->denotation, &v))
        return (const bb_type_node *)(uintptr_t)v;
    /* Only a denotation the tree knows decides the type by itself. */
    const bb_type_node *t = bb_type_by_denotation(tp->denotation);
    if (!t)
        return bb_type_from_proto(tp);
    bbc_map_put(&c->by_denotation, tp->denotation, (size_t)(uintptr_t)t); /* OOM: no cache */
    return t;
}

/* ---- signatures ---------------------------------------------------------------- */

bool bbc_node_sig(bbc_state *st, const bb_node *n, bbc_sig *out)
{
    memset(out, 0, sizeof *out);
    bbc_slot *s = st ? bbc_state_node_slot(st, n) : NULL;
    if (s && s->type) {
        uint32_t idx;
        const char *dom = bb_domain_is_onnx(n->domain) ? BB_DOMAIN_ONNX : n->domain;
        const bb_op_decl *d = bb_component_type_find_op(s->type, dom, n->op_type, &idx);
        if (!d && bb_domain_is_onnx(n->domain))
            d = bb_component_type_find_op(s->type, "", n->op_type, &idx);
        if (d) {
            out->decl = d;
            out->type = s->type;
            out->in = d->inputs;
            out->n_in = d->n_inputs;
            out->out = d->outputs;
            out->n_out = d->n_outputs;
        }
    }
    out->schema = bb_op_schema_find(n->domain, n->op_type);
    if (!out->decl && out->schema) {
        out->in = out->schema->inputs;
        out->n_in = out->schema->n_inputs;
        out->out = out->schema->outputs;
        out->n_out = out->schema->n_outputs;
    }
    return out->decl || out->schema;
}

static const bb_port_decl *port_at(const bb_port_decl *p, uint32_t n, size_t pos)
{
    if (n == 0)
        return NULL;
    if (pos < n)
        return &p[pos];
    return p[n - 1].variadic ? &p[n - 1] : NULL;
}

const bb_port_decl *bbc_sig_in(const bbc_sig *s, size_t pos)
{
    return port_at(s->in, s->n_in, pos);
}

const bb_port_decl *bbc_sig_out(const bbc_sig *s, size_t pos)
{
    return port_at(s->out, s->n_out, pos);
}

/* ---- hashing ------------------------------------------------------------------- */

typedef struct hasher {
    uint64_t h;
} hasher;

#define FNV_PRIME 0x100000001b3ull
#define FNV_STEP(x, byte) ((x) = ((x) ^ (byte)) * FNV_PRIME)

/* FNV-1a, eight bytes a round (the same hash, half the instructions of a
 * byte loop: two passes hash every node body). */
static void h_bytes(hasher *h, const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t x = h->h;
    for (; n >= 8; n -= 8, b += 8) {
        FNV_STEP(x, b[0]);
        FNV_STEP(x, b[1]);
        FNV_STEP(x, b[2]);
        FNV_STEP(x, b[3]);
        FNV_STEP(x, b[4]);
        FNV_STEP(x, b[5]);
        FNV_STEP(x, b[6]);
        FNV_STEP(x, b[7]);
    }
    for (; n > 0; n--, b++)
        FNV_STEP(x, *b);
    h->h = x;
}

static void h_str(hasher *h, const char *s)
{
    if (s)
        h_bytes(h, s, strlen(s) + 1);
    else
        h_bytes(h, "\xff", 1);
}

static void h_u64(hasher *h, uint64_t v)
{
    uint8_t b[8];
    bb_le_put(b, v, 8);
    h_bytes(h, b, 8);
}

static void h_attr(hasher *h, const bb_attr *at)
{
    h_str(h, at->name);
    h_u64(h, (uint64_t)at->type);
    h_u64(h, (uint64_t)at->i);
    uint32_t fb;
    memcpy(&fb, &at->f, 4);
    h_u64(h, fb);
    if (at->has_s)
        h_bytes(h, at->s.data, at->s.len);
    for (size_t i = 0; i < at->ints.n; i++)
        h_u64(h, (uint64_t)at->ints.v[i]);
    for (size_t i = 0; i < at->strings.n; i++)
        h_bytes(h, at->strings.v[i].data, at->strings.v[i].len);
    if (at->tp)
        h_str(h, at->tp->denotation);
}

uint64_t bbc_hash_nodes(const bb_function *f)
{
    hasher h = {0xcbf29ce484222325ull};
    for (size_t i = 0; i < f->nodes.n; i++) {
        const bb_node *n = f->nodes.v[i];
        h_str(&h, bb_domain_is_onnx(n->domain) ? "" : n->domain);
        h_str(&h, n->op_type);
        h_str(&h, n->name);
        h_u64(&h, n->inputs.n);
        for (size_t j = 0; j < n->inputs.n; j++)
            h_str(&h, n->inputs.v[j]);
        h_u64(&h, n->outputs.n);
        for (size_t j = 0; j < n->outputs.n; j++)
            h_str(&h, n->outputs.v[j]);
        h_u64(&h, n->attrs.n);
        for (size_t j = 0; j < n->attrs.n; j++)
            h_attr(&h, n->attrs.v[j]);
        h_u64(&h, n->metadata.n);
        for (size_t j = 0; j < n->metadata.n; j++) {
            h_str(&h, n->metadata.v[j].key);
            h_str(&h, n->metadata.v[j].value);
        }
    }
    return h.h;
}

