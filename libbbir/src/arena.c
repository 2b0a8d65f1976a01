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

/* Under AddressSanitizer, memory a reset forgot is poisoned until handed out
 * again, so a pointer kept across bb_arena_reset is caught when used. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define ALIGN 16u
#define MIN_CHUNK (64u * 1024u)
#define MAX_CHUNK (4u * 1024u * 1024u)
#define ZERO_STEP 4096u
#define CALLOC_CHUNK (256u * 1024u)

typedef struct chunk {
    struct chunk *next;
    size_t size, used;
    size_t zeroed; /* data[0..zeroed) is zero beyond what was handed out */
    bool poisoned; /* reset once: what is not handed out is poisoned (ASan) */
    _Alignas(16) unsigned char data[];
} chunk;

struct bb_arena {
    chunk *head;  /* serving; the chunks behind it are full */
    chunk *spare; /* kept by bb_arena_reset for reuse */
    size_t next_size;
    size_t total;
};

static void free_chunks(chunk *c)
{
    while (c) {
        chunk *n = c->next;
        free(c);
        c = n;
    }
}

/* A spare chunk of at least `need` bytes, unlinked, or NULL. */
static chunk *take_spare(bb_arena *a, size_t need)
{
    for (chunk **pp = &a->spare; *pp; pp = &(*pp)->next) {
        chunk *c = *pp;
        if (c->size >= need) {
            *pp = c->next;
            return c;
        }
    }
    return NULL;
}

/* A fresh chunk of at least `need` bytes (the arena's next size), unlinked,
 * or NULL. */
static chunk *chunk_new(bb_arena *a, size_t need)
{
    size_t sz = a->next_size;
    if (sz < need)
        sz = need;
    if (sz > SIZE_MAX - sizeof(chunk))
        return NULL;
    /* A big chunk comes zeroed from calloc: fresh pages from the kernel
     * cost no memset (and calloc zeroes reused memory in one sweep). */
    bool big = sz >= CALLOC_CHUNK;
    chunk *c = big ? calloc(1, sizeof(chunk) + sz) : malloc(sizeof(chunk) + sz);
    if (!c)
        return NULL;
    c->size = sz;
    c->used = 0;
    c->zeroed = big ? sz : 0;
    c->poisoned = false;
    if (a->next_size < MAX_CHUNK)
        a->next_size *= 2;
    return c;
}

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
    free_chunks(a->head);
    free_chunks(a->spare);
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
        if (!(c = take_spare(a, need)) && !(c = chunk_new(a, need)))
            return NULL;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += need;
    a->total += need;
    if (c->used > c->zeroed) {
        size_t z = c->used + ZERO_STEP - 1;
        z = z - z % ZERO_STEP;
        if (z > c->size)
            z = c->size;
        UNPOISON(c->data + c->zeroed, z - c->zeroed);
        memset(c->data + c->zeroed, 0, z - c->zeroed);
        if (c->poisoned)
            POISON(c->data + c->used, z - c->used);
        c->zeroed = z;
    }
    UNPOISON(p, need);
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

void bb_arena_reset(bb_arena *a)
{
    /* Handed-out memory is dirty again: zeroed lazily as it is reused. */
    while (a->head) {
        chunk *c = a->head;
        a->head = c->next;
        c->used = c->zeroed = 0;
        c->poisoned = true;
        POISON(c->data, c->size);
        c->next = a->spare;
        a->spare = c;
    }
    a->total = 0;
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
