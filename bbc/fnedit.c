/*
 * fnedit.c — the function index of fnedit.h: a producer map, a consumer
 * multimap (value -> (node, input position) entries, moved on rewire), a
 * value_info map and a queue of insertions applied in one rebuild.
 */
#include "bbc/fnedit.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bbc/util.h"

#define NONE SIZE_MAX

typedef struct use {
    bb_node *node;
    size_t pos;  /* input position */
    size_t next; /* next use of the same value */
} use;

typedef struct insertion {
    size_t at, seq;
    bb_node *node;
} insertion;

struct bbc_fnedit {
    bb_arena *side, *ir;
    bb_function *f;
    bbc_map prod;   /* value -> producing node index */
    bbc_map heads;  /* value -> first use */
    bbc_map vinfo;  /* value -> index in f->value_info */
    bbc_map outs;   /* function outputs */
    bbc_type_cache tc;
    BB_VEC(use) uses;
    BB_VEC(insertion) queue;
};

static int add_use(bbc_fnedit *e, const char *v, bb_node *n, size_t pos)
{
    if (!v || !*v)
        return BB_OK;
    use *u = BB_VEC_PUSH(e->side, &e->uses);
    if (!u)
        return BB_ENOMEM;
    u->node = n;
    u->pos = pos;
    u->next = NONE;
    bbc_map_get(&e->heads, v, &u->next);
    return bbc_map_put(&e->heads, v, e->uses.n - 1);
}

static bool in_focus(const bbc_map *focus, const char *v)
{
    return v && *v && bbc_map_get(focus, v, NULL);
}

static bbc_fnedit *fnedit_new(bb_arena *side, bb_arena *ir, bb_function *f, bool flow,
                              const bbc_map *focus)
{
    bbc_fnedit *e = bb_arena_alloc(side, sizeof *e);
    if (!e)
        return NULL;
    e->side = side;
    e->ir = ir;
    e->f = f;
    if (bbc_map_init(&e->prod, side, focus->n) != BB_OK ||
        bbc_map_init(&e->heads, side, focus->n) != BB_OK ||
        bbc_map_init(&e->vinfo, side, focus->n) != BB_OK ||
        bbc_map_init(&e->outs, side, f->outputs.n) != BB_OK ||
        bbc_type_cache_init(&e->tc, side) != BB_OK)
        return NULL;
    for (size_t i = 0; i < f->outputs.n; i++)
        if (f->outputs.v[i] && bbc_map_put(&e->outs, f->outputs.v[i], i) != BB_OK)
            return NULL;
    for (size_t i = 0; i < f->value_info.n; i++) {
        const char *v = f->value_info.v[i]->name;
        if (in_focus(focus, v) && !bbc_map_get(&e->vinfo, v, NULL) &&
            bbc_map_put(&e->vinfo, v, i) != BB_OK)
            return NULL;
    }
    /* Backwards, so the first producer wins and uses list in node order. */
    for (size_t i = flow ? f->nodes.n : 0; i-- > 0;) {
        bb_node *nd = f->nodes.v[i];
        for (size_t j = 0; j < nd->outputs.n; j++)
            if (in_focus(focus, nd->outputs.v[j]) &&
                bbc_map_put(&e->prod, nd->outputs.v[j], i) != BB_OK)
                return NULL;
        for (size_t j = nd->inputs.n; j-- > 0;)
            if (in_focus(focus, nd->inputs.v[j]) && add_use(e, nd->inputs.v[j], nd, j) != BB_OK)
                return NULL;
    }
    return e;
}

bbc_fnedit *bbc_fnedit_new_focused(bb_arena *side, bb_arena *ir, bb_function *f,
                                   const bbc_map *focus)
{
    return fnedit_new(side, ir, f, true, focus);
}

bbc_fnedit *bbc_fnedit_new_types(bb_arena *side, bb_arena *ir, bb_function *f,
                                 const bbc_map *focus)
{
    return fnedit_new(side, ir, f, false, focus);
}

size_t bbc_fnedit_producer(const bbc_fnedit *e, const char *v)
{
    size_t i;
    return v && bbc_map_get(&e->prod, v, &i) ? i : NONE;
}

bool bbc_fnedit_consumed(const bbc_fnedit *e, const char *v, const bb_node *skip)
{
    if (!v || !*v)
        return false;
    if (bbc_map_get(&e->outs, v, NULL))
        return true;
    size_t u = NONE;
    bbc_map_get(&e->heads, v, &u);
    for (; u != NONE; u = e->uses.v[u].next) {
        const use *x = &e->uses.v[u];
        if (x->node != skip && x->pos < x->node->inputs.n &&
            bbc_str_eq(x->node->inputs.v[x->pos], v))
            return true;
    }
    return false;
}

size_t bbc_fnedit_rewire(bbc_fnedit *e, const char *from, const char *to, const bb_node *skip)
{
    size_t u = NONE, count = 0, kept = NONE, kept_tail = NONE;
    bbc_map_get(&e->heads, from, &u);
    while (u != NONE) {
        use *x = &e->uses.v[u];
        size_t next = x->next;
        bool live = x->pos < x->node->inputs.n && bbc_str_eq(x->node->inputs.v[x->pos], from);
        if (live && x->node != skip) {
            x->node->inputs.v[x->pos] = to;
            count++;
            /* Move the use to `to`'s list. */
            x->next = NONE;
            bbc_map_get(&e->heads, to, &x->next);
            if (bbc_map_put(&e->heads, to, u) != BB_OK)
                return count; /* OOM: the rewire happened, the index lost the use */
        } else if (live) {
            x->next = NONE;
            if (kept_tail == NONE)
                kept = u;
            else
                e->uses.v[kept_tail].next = u;
            kept_tail = u;
        }
        u = next;
    }
    if (kept != NONE || bbc_map_get(&e->heads, from, NULL))
        bbc_map_put(&e->heads, from, kept);
    return count;
}

const bb_type_node *bbc_fnedit_type(bbc_fnedit *e, const char *v)
{
    size_t i;
    if (!v || !bbc_map_get(&e->vinfo, v, &i))
        return NULL;
    const bb_value_info *vi = e->f->value_info.v[i];
    return vi->type ? bbc_type_cache_get(&e->tc, vi->type) : NULL;
}

int bbc_fnedit_set_type(bbc_fnedit *e, const char *v, const bb_type_node *t)
{
    bb_type_proto *tp = bb_type_to_proto(e->ir, t);
    if (!tp)
        return BB_ENOMEM;
    size_t i;
    if (bbc_map_get(&e->vinfo, v, &i)) {
        e->f->value_info.v[i]->type = tp;
        return BB_OK;
    }
    bb_value_info *vi = bb_value_info_new(e->ir, v, tp);
    bb_value_info **slot = vi ? BB_VEC_PUSH(e->ir, &e->f->value_info) : NULL;
    if (!slot)
        return BB_ENOMEM;
    *slot = vi;
    return bbc_map_put(&e->vinfo, vi->name, e->f->value_info.n - 1);
}

int bbc_fnedit_insert(bbc_fnedit *e, size_t at, bb_node *n)
{
    insertion *q = BB_VEC_PUSH(e->side, &e->queue);
    if (!q)
        return BB_ENOMEM;
    q->at = at > e->f->nodes.n ? e->f->nodes.n : at;
    q->seq = e->queue.n - 1;
    q->node = n;
    for (size_t j = 0; j < n->inputs.n; j++)
        if (add_use(e, n->inputs.v[j], n, j) != BB_OK)
            return BB_ENOMEM;
    return BB_OK;
}

static int cmp_insertion(const void *a, const void *b)
{
    const insertion *x = a, *y = b;
    if (x->at != y->at)
        return x->at < y->at ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int bbc_fnedit_commit(bbc_fnedit *e)
{
    if (e->queue.n == 0)
        return BB_OK;
    qsort(e->queue.v, e->queue.n, sizeof *e->queue.v, cmp_insertion);
    bb_function *f = e->f;
    size_t total = f->nodes.n + e->queue.n;
    bb_node **v = bb_arena_calloc(e->ir, total, sizeof *v);
    if (!v)
        return BB_ENOMEM;
    size_t k = 0, q = 0;
    for (size_t i = 0; i <= f->nodes.n; i++) {
        while (q < e->queue.n && e->queue.v[q].at == i)
            v[k++] = e->queue.v[q++].node;
        if (i < f->nodes.n)
            v[k++] = f->nodes.v[i];
    }
    f->nodes.v = v;
    f->nodes.n = f->nodes.cap = total;
    e->queue.n = 0;
    return BB_OK;
}
