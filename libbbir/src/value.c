/*
 * value.c — runtime values (DESIGN.md decision 2): refcounted byte buffers,
 * refcounted typed values, their constructors and deep equality.
 *
 * A bb_buffer from bb_buffer_new is one malloc'd block (a large one: its
 * data a bb_large_alloc mapping of its own, see value.h): the header at its
 * start, the payload at the first 64-byte boundary after it, so the payload
 * is aligned for any element type and SIMD loads (malloc, unlike
 * aligned_alloc, takes small blocks from glibc's per-thread cache: values
 * and their buffers are made and freed per message). Values never change
 * after their constructor returns; sharing is by refcount only. The wire
 * codec lives in value_wire.c.
 */
#include "bb/value.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "value_internal.h"

#define BUF_ALIGN 64u

/* ---- large blocks ---------------------------------------------------------- */

#if defined(__SANITIZE_ADDRESS__)
#define LARGE_FROM_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LARGE_FROM_MALLOC 1
#endif
#endif
#ifndef LARGE_FROM_MALLOC
#define LARGE_FROM_MALLOC 0
#endif

#define HUGE_PAGE ((size_t)2 << 20)

static size_t huge_round(size_t len)
{
    return (len + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
}

static bool large_mapped(size_t len)
{
    return !LARGE_FROM_MALLOC && len >= BB_LARGE_BYTES && len <= SIZE_MAX - 2 * HUGE_PAGE;
}

/* The blocks bb_large_free kept (p NULL: an empty slot), for the next ones
 * of their size. Two: a round of a large model frees two model-sized blocks
 * and allocates two (the server: the old parameters and an update it
 * assembled; one slot left it a fresh 400 MB every round). */
#define KEPT_BLOCKS 2
typedef struct kept_block {
    uint8_t *p;
    size_t len;
    uint64_t since_ns; /* CLOCK_MONOTONIC when it was kept */
} kept_block;
static struct {
    pthread_mutex_t mu;
    kept_block b[KEPT_BLOCKS];
} kept = {.mu = PTHREAD_MUTEX_INITIALIZER};

static uint64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint8_t *take_idle(size_t len)
{
    uint8_t *p = NULL;
    pthread_mutex_lock(&kept.mu);
    for (int i = 0; i < KEPT_BLOCKS && !p; i++)
        if (kept.b[i].p && huge_round(kept.b[i].len) == huge_round(len)) {
            p = kept.b[i].p;
            kept.b[i].p = NULL;
        }
    pthread_mutex_unlock(&kept.mu);
    return p;
}

/* A fresh mapping (zero): one huge page more than needed, the ends that are
 * not 2 MiB aligned unmapped, so every huge page of the block can be one. */
static uint8_t *map_fresh(size_t len)
{
    size_t want = huge_round(len), span = want + HUGE_PAGE;
    uint8_t *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    uint8_t *at = (uint8_t *)(((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (at > m)
        munmap(m, (size_t)(at - m));
    if (m + span > at + want)
        munmap(at + want, (size_t)(m + span - (at + want)));
#ifdef MADV_HUGEPAGE
    (void)madvise(at, want, MADV_HUGEPAGE); /* a hint: without it, 4 KiB pages */
#endif
    return at;
}

void *bb_large_alloc(size_t len)
{
    if (len > SIZE_MAX - 2 * HUGE_PAGE)
        return NULL;
    if (!large_mapped(len)) /* a 0-byte block is 64 bytes: NULL means out of memory */
        return aligned_alloc(BUF_ALIGN, len ? (len + BUF_ALIGN - 1) & ~(size_t)(BUF_ALIGN - 1)
                                            : BUF_ALIGN);
    uint8_t *p = take_idle(len);
    return p ? p : map_fresh(len);
}

void *bb_large_calloc(size_t len)
{
    uint8_t *p = large_mapped(len) ? take_idle(len) : bb_large_alloc(len);
    if (p) {
        memset(p, 0, len);
        return p;
    }
    return large_mapped(len) ? map_fresh(len) : NULL; /* a fresh mapping is zero */
}

void bb_large_free(void *p, size_t len)
{
    if (!p)
        return;
    if (!large_mapped(len)) {
        free(p);
        return;
    }
    /* an empty slot, else the one kept longest goes */
    uint64_t now = monotonic_ns();
    pthread_mutex_lock(&kept.mu);
    int at = 0;
    for (int i = 0; i < KEPT_BLOCKS; i++)
        if (!kept.b[i].p || (kept.b[at].p && kept.b[i].since_ns < kept.b[at].since_ns))
            at = i;
    kept_block old = kept.b[at];
    kept.b[at] = (kept_block){.p = p, .len = len, .since_ns = now};
    pthread_mutex_unlock(&kept.mu);
    if (old.p)
        munmap(old.p, huge_round(old.len));
}

void bb_large_release_idle(uint64_t idle_ms)
{
    uint64_t now = monotonic_ns();
    kept_block gone[KEPT_BLOCKS];
    int n = 0;
    pthread_mutex_lock(&kept.mu);
    for (int i = 0; i < KEPT_BLOCKS; i++)
        if (kept.b[i].p && now - kept.b[i].since_ns >= idle_ms * 1000000ull) {
            gone[n++] = kept.b[i];
            kept.b[i].p = NULL;
        }
    pthread_mutex_unlock(&kept.mu);
    for (int i = 0; i < n; i++)
        munmap(gone[i].p, huge_round(gone[i].len));
}

/* A buffer whose data is a large block. */
static bb_buffer *large_buffer(size_t len, bool zero)
{
    uint8_t *data = zero ? bb_large_calloc(len) : bb_large_alloc(len);
    return data ? bb_buffer_adopt_large(data, len) : NULL;
}

/* ---- buffers -------------------------------------------------------------- */

bb_buffer *bb__buffer_new_uninit(size_t len)
{
    if (len >= BB_LARGE_BYTES)
        return large_buffer(len, false);
    if (len > SIZE_MAX - sizeof(bb_buffer) - BUF_ALIGN)
        return NULL;
    bb_buffer *b = malloc(sizeof *b + BUF_ALIGN - 1 + len);
    if (!b)
        return NULL;
    atomic_init(&b->refs, 1);
    uintptr_t at = ((uintptr_t)(b + 1) + BUF_ALIGN - 1) & ~(uintptr_t)(BUF_ALIGN - 1);
    b->data = (uint8_t *)at;
    b->len = len;
    b->free_fn = NULL;
    b->free_ctx = NULL;
    return b;
}

bb_buffer *bb_buffer_new(size_t len)
{
    if (len >= BB_LARGE_BYTES)
        return large_buffer(len, true);
    bb_buffer *b = bb__buffer_new_uninit(len);
    if (b && len)
        memset(b->data, 0, len);
    return b;
}

bb_buffer *bb_buffer_wrap(uint8_t *data, size_t len,
                          void (*free_fn)(void *, uint8_t *, size_t), void *ctx)
{
    bb_buffer *b = malloc(sizeof *b);
    if (!b)
        return NULL;
    atomic_init(&b->refs, 1);
    b->data = data;
    b->len = len;
    b->free_fn = free_fn;
    b->free_ctx = ctx;
    return b;
}

static void free_adopted(void *ctx, uint8_t *data, size_t len)
{
    (void)ctx;
    (void)len;
    free(data);
}

bb_buffer *bb_buffer_adopt(uint8_t *data, size_t len)
{
    return bb_buffer_wrap(data, len, free_adopted, NULL);
}

static void free_large(void *ctx, uint8_t *data, size_t len)
{
    (void)ctx;
    bb_large_free(data, len);
}

/* On failure the block is freed, so the caller has nothing left to undo. */
bb_buffer *bb_buffer_adopt_large(uint8_t *data, size_t len)
{
    bb_buffer *b = bb_buffer_wrap(data, len, free_large, NULL);
    if (!b)
        bb_large_free(data, len);
    return b;
}

bb_buffer *bb_buffer_ref(bb_buffer *b)
{
    if (b)
        atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}

void bb_buffer_unref(bb_buffer *b)
{
    if (!b || atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1)
        return;
    /* Either way the header is its own (or the block's) malloc: free(b). */
    if (b->free_fn)
        b->free_fn(b->free_ctx, b->data, b->len);
    free(b);
}

/* ---- shapes ----------------------------------------------------------------- */

size_t bb_tensor_elem_size(int32_t dtype)
{
    return bb_type_tensor_of(dtype) ? bb_dtype_size(dtype) : 0;
}

size_t bb_shape_numel(uint32_t ndim, const int64_t *dims)
{
    if (ndim > BB_MAX_DIMS || (ndim && !dims))
        return SIZE_MAX;
    bool zero = false;
    for (uint32_t i = 0; i < ndim; i++) {
        if (dims[i] < 0)
            return SIZE_MAX;
        if (dims[i] == 0)
            zero = true;
    }
    if (zero)
        return 0;
    size_t n = 1;
    for (uint32_t i = 0; i < ndim; i++) {
        if ((uint64_t)dims[i] >= SIZE_MAX || n > (SIZE_MAX - 1) / (size_t)dims[i])
            return SIZE_MAX;
        n *= (size_t)dims[i];
    }
    return n;
}

/* Bytes of a tensor of dtype/shape, or SIZE_MAX for an invalid one. */
static size_t tensor_nbytes(int32_t dtype, uint32_t ndim, const int64_t *dims)
{
    size_t es = bb_tensor_elem_size(dtype);
    size_t n = bb_shape_numel(ndim, dims);
    if (!es || n == SIZE_MAX || n > (SIZE_MAX - 1) / es)
        return SIZE_MAX;
    return n * es;
}

/* ---- values -------------------------------------------------------------- */

/* Freed values wait in a per-thread stack for the next value_alloc: a
 * message makes and drops ~15 values, more than glibc's per-thread cache
 * keeps of one size (7), so most of their frees took malloc's slow path.
 * Bounded per thread and freed at thread exit. ASan builds skip it, so a
 * use after free stays visible there. */
#if defined(__SANITIZE_ADDRESS__)
#define VALUE_CACHE_MAX 0u
#else
#define VALUE_CACHE_MAX 64u
#endif

typedef struct value_cache {
    bb_value *top; /* linked through the first word of u */
    unsigned n;
    bool registered;
} value_cache;

/* initial-exec: a plain %fs-relative access; the general-dynamic default
 * of a shared library calls __tls_get_addr on every use. libbbir is loaded
 * with the program (plugins that link it find it loaded). */
static _Thread_local value_cache cache __attribute__((tls_model("initial-exec")));
static _Atomic unsigned cache_max = VALUE_CACHE_MAX;
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static bool cache_key_ok;

static void cache_drain(void *arg)
{
    value_cache *c = arg;
    while (c->top) {
        bb_value *v = c->top;
        memcpy(&c->top, &v->u, sizeof c->top);
        free(v);
    }
    c->n = 0;
}

static void cache_key_init(void)
{
    cache_key_ok = pthread_key_create(&cache_key, cache_drain) == 0;
}

void bb__value_cache_limit(unsigned max)
{
    unsigned limit = VALUE_CACHE_MAX; /* a variable: 0 under ASan */
    if (max < limit)
        limit = max;
    atomic_store_explicit(&cache_max, limit, memory_order_relaxed);
    cache_drain(&cache);
}

static void value_release(bb_value *v)
{
    if (cache.n >= atomic_load_explicit(&cache_max, memory_order_relaxed)) {
        free(v);
        return;
    }
    if (!cache.registered) { /* so the thread's exit frees what it kept */
        pthread_once(&cache_once, cache_key_init);
        if (!cache_key_ok || pthread_setspecific(cache_key, &cache) != 0) {
            free(v);
            return;
        }
        cache.registered = true;
    }
    memcpy(&v->u, &cache.top, sizeof cache.top);
    cache.top = v;
    cache.n++;
}

static bb_value *value_alloc(const bb_type_node *type)
{
    bb_value *v = cache.top;
    if (v) {
        memcpy(&cache.top, &v->u, sizeof cache.top);
        cache.n--;
    } else if (!(v = malloc(sizeof *v))) {
        return NULL;
    }
    /* the payload zeroed field by field: a memset of the whole block right
     * after malloc is turned into calloc by the compiler, and glibc's
     * calloc skips the per-thread cache (~250 instructions a value, and
     * their frees then overflow that cache too) */
    atomic_init(&v->refs, 1);
    v->type = type;
    memset(&v->u, 0, sizeof v->u);
    return v;
}

static void unref_array(bb_value **items, size_t n)
{
    if (!items)
        return;
    for (size_t i = 0; i < n; i++)
        bb_value_unref(items[i]);
}

void bb_value__free(bb_value *v)
{
    if (!v)
        return;
    switch (v->type->kind) {
    case BB_VK_TENSOR:
        bb_buffer_unref(v->u.tensor.buf);
        break;
    case BB_VK_BYTES:
    case BB_VK_PEER_ID:
    case BB_VK_ADDRESS:
        bb_buffer_unref(v->u.bytes.buf);
        break;
    case BB_VK_PEER_ID_VEC:
    case BB_VK_ADDRESS_VEC:
    case BB_VK_COMPOSITE:
        unref_array(v->u.list.items, v->u.list.n);
        if (v->u.list.items != v->u.list.small)
            free(v->u.list.items);
        break;
    case BB_VK_RESPONSE_BATCH:
        unref_array(v->u.batch.items, v->u.batch.n);
        unref_array(v->u.batch.peers, v->u.batch.n);
        if (v->u.batch.items != v->u.batch.small) {
            free(v->u.batch.items);
            free(v->u.batch.peers);
        }
        break;
    default:
        break;
    }
    value_release(v);
}

bb_value *bb_value_trigger(void)
{
    return value_alloc(&BB_TYPE_TRIGGER);
}

bb_value *bb_value_u64(const bb_type_node *type, uint64_t x)
{
    if (!type || type->kind != BB_VK_U64)
        return NULL;
    bb_value *v = value_alloc(type);
    if (v)
        v->u.u64 = x;
    return v;
}

static bool is_bytes_kind(const bb_type_node *type)
{
    return type && (type->kind == BB_VK_BYTES || type->kind == BB_VK_PEER_ID ||
                    type->kind == BB_VK_ADDRESS);
}

bb_value *bb_value_bytes(const bb_type_node *type, const void *data, size_t len)
{
    if (!is_bytes_kind(type) || (len && !data))
        return NULL;
    bb_buffer *b = bb__buffer_new_uninit(len);
    if (!b)
        return NULL;
    if (len)
        memcpy(b->data, data, len);
    bb_value *v = bb_value_bytes_buf(type, b, b->data, len);
    bb_buffer_unref(b);
    return v;
}

bb_value *bb_value_bytes_buf(const bb_type_node *type, bb_buffer *buf,
                             const uint8_t *data, size_t len)
{
    if (!is_bytes_kind(type))
        return NULL;
    if (len && (!buf || !data || data < buf->data || (size_t)(data - buf->data) > buf->len ||
                len > buf->len - (size_t)(data - buf->data)))
        return NULL;
    bb_value *v = value_alloc(type);
    if (!v)
        return NULL;
    v->u.bytes.buf = bb_buffer_ref(buf);
    v->u.bytes.data = len ? data : (buf ? buf->data : NULL);
    v->u.bytes.len = len;
    return v;
}

bb_value *bb_value_tensor_wrap(int32_t dtype, uint32_t ndim, const int64_t *dims,
                               bb_buffer *buf, uint8_t *data)
{
    const bb_type_node *type = bb_type_tensor_of(dtype);
    size_t nbytes = tensor_nbytes(dtype, ndim, dims);
    if (!type || nbytes == SIZE_MAX || !buf || !data)
        return NULL;
    if (data < buf->data || (size_t)(data - buf->data) > buf->len ||
        nbytes > buf->len - (size_t)(data - buf->data))
        return NULL;
    if ((uintptr_t)data % bb_tensor_elem_size(dtype) != 0)
        return NULL;
    return bb__value_tensor_checked(type, dtype, ndim, dims, buf, data, nbytes);
}

bb_value *bb__value_tensor_checked(const bb_type_node *type, int32_t dtype, uint32_t ndim,
                                   const int64_t *dims, bb_buffer *buf, uint8_t *data,
                                   size_t nbytes)
{
    bb_value *v = value_alloc(type);
    if (!v)
        return NULL;
    bb_tensor_view *t = &v->u.tensor;
    t->dtype = dtype;
    t->ndim = ndim;
    if (ndim)
        memcpy(t->dims, dims, ndim * sizeof dims[0]);
    t->data = data;
    t->nbytes = nbytes;
    t->buf = bb_buffer_ref(buf);
    return v;
}

bb_value *bb_value_tensor_new(int32_t dtype, uint32_t ndim, const int64_t *dims)
{
    size_t nbytes = tensor_nbytes(dtype, ndim, dims);
    if (!bb_type_tensor_of(dtype) || nbytes == SIZE_MAX)
        return NULL;
    bb_buffer *b = bb_buffer_new(nbytes);
    if (!b)
        return NULL;
    bb_value *v = bb_value_tensor_wrap(dtype, ndim, dims, b, b->data);
    bb_buffer_unref(b);
    return v;
}

bb_value *bb_value_tensor_copy(int32_t dtype, uint32_t ndim, const int64_t *dims,
                               const void *data, size_t nbytes)
{
    size_t want = tensor_nbytes(dtype, ndim, dims);
    if (!bb_type_tensor_of(dtype) || want == SIZE_MAX || want != nbytes || (nbytes && !data))
        return NULL;
    bb_buffer *b = bb__buffer_new_uninit(nbytes);
    if (!b)
        return NULL;
    if (nbytes)
        memcpy(b->data, data, nbytes);
    bb_value *v = bb_value_tensor_wrap(dtype, ndim, dims, b, b->data);
    bb_buffer_unref(b);
    return v;
}

/* Copy of the caller's pointer array: into small (room for n_small) when
 * it fits, else malloc'd (NULL for n == 0). */
static bool dup_array(bb_value **src, size_t n, bb_value ***out, bb_value **small, size_t n_small)
{
    *out = NULL;
    if (!n)
        return true;
    if (n <= n_small) {
        *out = small;
    } else {
        if (n > SIZE_MAX / sizeof *src)
            return false;
        if (!(*out = malloc(n * sizeof *src)))
            return false;
    }
    memcpy(*out, src, n * sizeof *src);
    return true;
}

static bool items_ok(bb_value **items, size_t n, bb_value_kind want)
{
    if (n && !items)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!items[i])
            return false;
        if (want != BB_VK_ABSTRACT && items[i]->type->kind != want)
            return false;
    }
    return true;
}

bb_value *bb_value_list(const bb_type_node *type, bb_value **items, size_t n)
{
    bb_value_kind want;
    bb_value *v = NULL;
    if (!type)
        goto fail;
    switch (type->kind) {
    case BB_VK_PEER_ID_VEC: want = BB_VK_PEER_ID; break;
    case BB_VK_ADDRESS_VEC: want = BB_VK_ADDRESS; break;
    case BB_VK_COMPOSITE: want = BB_VK_ABSTRACT; break; /* any value */
    default: goto fail;
    }
    if (!items_ok(items, n, want) || !(v = value_alloc(type)))
        goto fail;
    if (!dup_array(items, n, &v->u.list.items, v->u.list.small, BB_VALUE_LIST_INLINE))
        goto fail;
    v->u.list.n = n;
    return v;
fail:
    free(v);
    if (items)
        unref_array(items, n);
    return NULL;
}

bb_value *bb_value_response_batch(bb_value **items, bb_value **peers, size_t n)
{
    bb_value *v = NULL;
    if (n && (!items || !peers))
        goto fail;
    if (!items_ok(items, n, BB_VK_ABSTRACT) || !items_ok(peers, n, BB_VK_PEER_ID))
        goto fail;
    if (!(v = value_alloc(&BB_TYPE_RESPONSE_BATCH)))
        goto fail;
    if (n <= BB_VALUE_BATCH_INLINE) {
        dup_array(items, n, &v->u.batch.items, v->u.batch.small, n);
        dup_array(peers, n, &v->u.batch.peers, v->u.batch.small + n, n);
        v->u.batch.items = v->u.batch.small; /* also for n == 0: bb_value__free's test */
    } else if (!dup_array(items, n, &v->u.batch.items, NULL, 0) ||
               !dup_array(peers, n, &v->u.batch.peers, NULL, 0)) {
        free(v->u.batch.items);
        goto fail;
    }
    v->u.batch.n = n;
    return v;
fail:
    free(v);
    if (items)
        unref_array(items, n);
    if (peers)
        unref_array(peers, n);
    return NULL;
}

/* ---- equality ----------------------------------------------------------- */

static bool arrays_equal(bb_value *const *a, bb_value *const *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!bb_value_equal(a[i], b[i]))
            return false;
    return true;
}

bool bb_value_equal(const bb_value *a, const bb_value *b)
{
    if (a == b)
        return true;
    if (!a || !b || !bb_type_same(a->type, b->type))
        return false;
    switch (a->type->kind) {
    case BB_VK_TRIGGER:
        return true;
    case BB_VK_U64:
        return a->u.u64 == b->u.u64;
    case BB_VK_TENSOR: {
        const bb_tensor_view *x = &a->u.tensor, *y = &b->u.tensor;
        if (x->dtype != y->dtype || x->ndim != y->ndim || x->nbytes != y->nbytes)
            return false;
        for (uint32_t i = 0; i < x->ndim; i++)
            if (x->dims[i] != y->dims[i])
                return false;
        return !x->nbytes || memcmp(x->data, y->data, x->nbytes) == 0;
    }
    case BB_VK_BYTES:
    case BB_VK_PEER_ID:
    case BB_VK_ADDRESS:
        return a->u.bytes.len == b->u.bytes.len &&
               (!a->u.bytes.len || memcmp(a->u.bytes.data, b->u.bytes.data, a->u.bytes.len) == 0);
    case BB_VK_PEER_ID_VEC:
    case BB_VK_ADDRESS_VEC:
    case BB_VK_COMPOSITE:
        return a->u.list.n == b->u.list.n &&
               arrays_equal(a->u.list.items, b->u.list.items, a->u.list.n);
    case BB_VK_RESPONSE_BATCH:
        return a->u.batch.n == b->u.batch.n &&
               arrays_equal(a->u.batch.items, b->u.batch.items, a->u.batch.n) &&
               arrays_equal(a->u.batch.peers, b->u.batch.peers, a->u.batch.n);
    default:
        return false;
    }
}
