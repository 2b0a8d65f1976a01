/*
 * arena.c — chunked bump allocator. Chunks grow geometrically (64 KiB up to
 * 4 MiB); a request larger than a chunk gets a chunk of its own. Memory is
 * never handed out twice, so a chunk is zeroed once: a big one by calloc
 * (fresh pages from the kernel need no memset), a small one ahead of the
 * bump pointer in steps of ZERO_STEP, so an arena that stays small zeroes
 * little. An allocation mostly needs no memset call of its own (one per
 * allocation was the compiler's most frequent libc call).
 */
#include "bb/arena.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN 16u
#define MIN_CHUNK (64u * 1024u)
#define MAX_CHUNK (4u * 1024u * 1024u)
#define ZERO_STEP 4096u
#define CALLOC_CHUNK (256u * 1024u)

typedef struct chunk {
    struct chunk *next;
    size_t size, used;
    size_t zeroed; /* data[0..zeroed) is zero beyond what was handed out */
    _Alignas(16) unsigned char data[];
} chunk;

struct bb_arena {
    chunk *head;
    size_t next_size;
    size_t total;
};

bb_arena *bb_arena_create(void)
{
    bb_arena *a = calloc(1, sizeof *a);
    if (a)
        a->next_size = MIN_CHUNK;
    return a;
}

void bb_arena_destroy(bb_arena *a)
{
    if (!a)
        return;
    if (getenv("BB_ARENA_DEBUG")) fprintf(stderr, "arena %zu\n", a->total);
    chunk *c = a->head;
    while (c) {
        chunk *n = c->next;
        free(c);
        c = n;
    }
    free(a);
}

void *bb_arena_alloc(bb_arena *a, size_t size)
{
    if (size > SIZE_MAX - ALIGN)
        return NULL;
    size_t need = (size + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    if (need == 0)
        need = ALIGN;
    chunk *c = a->head;
    if (!c || c->size - c->used < need) {
        size_t sz = a->next_size;
        if (sz < need)
            sz = need;
        if (sz > SIZE_MAX - sizeof(chunk))
            return NULL;
        /* A big chunk comes zeroed from calloc: fresh pages from the kernel
         * cost no memset (and calloc zeroes reused memory in one sweep). */
        bool big = sz >= CALLOC_CHUNK;
        c = big ? calloc(1, sizeof(chunk) + sz) : malloc(sizeof(chunk) + sz);
        if (!c)
            return NULL;
        c->size = sz;
        c->used = 0;
        c->zeroed = big ? sz : 0;
        c->next = a->head;
        a->head = c;
        if (a->next_size < MAX_CHUNK)
            a->next_size *= 2;
    }
    void *p = c->data + c->used;
    c->used += need;
    a->total += need;
    if (c->used > c->zeroed) {
        size_t z = c->used + ZERO_STEP - 1;
        z = z - z % ZERO_STEP;
        if (z > c->size)
            z = c->size;
        memset(c->data + c->zeroed, 0, z - c->zeroed);
        c->zeroed = z;
    }
    return p;
}

void *bb_arena_calloc(bb_arena *a, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    return bb_arena_alloc(a, n * size);
}

char *bb_arena_strndup(bb_arena *a, const char *s, size_t n)
{
    if (!s)
        return NULL;
    char *p = bb_arena_alloc(a, n + 1);
    if (p)
        memcpy(p, s, n);
    return p;
}

char *bb_arena_strdup(bb_arena *a, const char *s)
{
    return s ? bb_arena_strndup(a, s, strlen(s)) : NULL;
}

void *bb_arena_memdup(bb_arena *a, const void *p, size_t n)
{
    void *q = bb_arena_alloc(a, n);
    if (q && n)
        memcpy(q, p, n);
    return q;
}

char *bb_arena_sprintf(bb_arena *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (len < 0)
        return NULL;
    char *p = bb_arena_alloc(a, (size_t)len + 1);
    if (!p)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(p, (size_t)len + 1, fmt, ap);
    va_end(ap);
    return p;
}

size_t bb_arena_used(const bb_arena *a)
{
    return a->total;
}

void bb_arena_adopt(bb_arena *dst, bb_arena *src)
{
    if (dst == src || !src->head)
        return;
    /* src's chunks go behind dst's current one, which keeps serving. */
    chunk *last = src->head;
    while (last->next)
        last = last->next;
    if (dst->head) {
        last->next = dst->head->next;
        dst->head->next = src->head;
    } else {
        dst->head = src->head;
    }
    dst->total += src->total;
    src->head = NULL;
    src->total = 0;
}

/* Layout shared by every BB_VEC(T). */
typedef struct {
    void *v;
    size_t n, cap;
} any_vec;

static int vec_grow(bb_arena *a, any_vec *vec, size_t elem)
{
    if (vec->n < vec->cap)
        return 0;
    size_t ncap = vec->cap ? vec->cap * 2 : 4;
    void *nv = bb_arena_calloc(a, ncap, elem);
    if (!nv)
        return -1;
    if (vec->n)
        memcpy(nv, vec->v, vec->n * elem);
    vec->v = nv;
    vec->cap = ncap;
    return 0;
}

void *bb__vec_push(bb_arena *a, void *vecp, size_t elem)
{
    any_vec vec;
    memcpy(&vec, vecp, sizeof vec);
    if (vec_grow(a, &vec, elem) < 0)
        return NULL;
    void *slot = (unsigned char *)vec.v + vec.n * elem;
    memset(slot, 0, elem);
    vec.n++;
    memcpy(vecp, &vec, sizeof vec);
    return slot;
}

void *bb__vec_insert(bb_arena *a, void *vecp, size_t elem, size_t i)
{
    any_vec vec;
    memcpy(&vec, vecp, sizeof vec);
    if (i > vec.n)
        return NULL;
    if (vec_grow(a, &vec, elem) < 0)
        return NULL;
    unsigned char *base = vec.v;
    memmove(base + (i + 1) * elem, base + i * elem, (vec.n - i) * elem);
    memset(base + i * elem, 0, elem);
    vec.n++;
    memcpy(vecp, &vec, sizeof vec);
    return base + i * elem;
}

void bb__vec_remove(void *vecp, size_t elem, size_t i)
{
    any_vec vec;
    memcpy(&vec, vecp, sizeof vec);
    if (i >= vec.n)
        return;
    unsigned char *base = vec.v;
    memmove(base + i * elem, base + (i + 1) * elem, (vec.n - i - 1) * elem);
    vec.n--;
    memcpy(vecp, &vec, sizeof vec);
}
