/*
 * tensor_pool.c — recycled tensor memory for the kernels' results.
 *
 * A network's forward (and a trainer's backward) allocates the same sizes
 * over and over, megabytes each; from malloc every one was a fresh mmap or
 * heap growth, page-faulted in and zeroed, and handed back to the kernel
 * when freed: a third of a CNN training step went to that. A pool keeps the
 * blocks instead. A value made from it wraps its block in a bb_buffer whose
 * free_fn gives the block back, so blocks return by plain refcounting,
 * whoever drops the last reference and on whatever thread (a mutex guards
 * the free lists). Blocks are binned by power-of-two size (at most 2x the
 * bytes asked for); at most max_bytes are kept idle, the rest are freed.
 *
 * Lifetime: the owner's reference plus one per block out; the pool goes
 * when the owner has released it and the last block came back, so a value
 * may outlive the backend that made it.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#define N_BINS 48
#define MIN_SHIFT 6 /* 64-byte blocks and up, 64-byte aligned */

typedef struct block {
    struct block *next;
} block;

struct cpu_tensor_pool {
    pthread_mutex_t mu;
    size_t refs;          /* the owner + blocks out */
    size_t idle_bytes, max_bytes;
    block *bins[N_BINS];
};

cpu_tensor_pool *cpu_tensor_pool_new(size_t max_bytes)
{
    cpu_tensor_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    if (pthread_mutex_init(&p->mu, NULL)) {
        free(p);
        return NULL;
    }
    p->refs = 1;
    p->max_bytes = max_bytes;
    return p;
}

static void pool_free(cpu_tensor_pool *p)
{
    for (int b = 0; b < N_BINS; b++)
        for (block *k = p->bins[b], *next; k; k = next) {
            next = k->next;
            free(k);
        }
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* Drops one reference (under the lock); true when it was the last. */
static bool unref_locked(cpu_tensor_pool *p)
{
    return --p->refs == 0;
}

void cpu_tensor_pool_release(cpu_tensor_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    bool last = unref_locked(p);
    pthread_mutex_unlock(&p->mu);
    if (last)
        pool_free(p);
}

static int bin_of(size_t bytes, size_t *cap)
{
    int b = 0;
    size_t c = (size_t)1 << MIN_SHIFT;
    while (c < bytes && b < N_BINS - 1) {
        c <<= 1;
        b++;
    }
    *cap = c;
    return c >= bytes ? b : -1;
}

static void give_back(void *ctx, uint8_t *data, size_t len)
{
    cpu_tensor_pool *p = ctx;
    size_t cap;
    int b = bin_of(len, &cap);
    pthread_mutex_lock(&p->mu);
    bool keep = b >= 0 && p->idle_bytes + cap <= p->max_bytes && p->refs > 1;
    if (keep) {
        block *k = (block *)(void *)data;
        k->next = p->bins[b];
        p->bins[b] = k;
        p->idle_bytes += cap;
    }
    bool last = unref_locked(p);
    pthread_mutex_unlock(&p->mu);
    if (!keep)
        free(data);
    if (last)
        pool_free(p);
}

bb_value *cpu_tensor_pool_value(cpu_tensor_pool *p, int32_t dtype, uint32_t ndim,
                                const int64_t *dims, size_t nbytes, bool zero)
{
    size_t cap;
    int b = bin_of(nbytes ? nbytes : 1, &cap);
    if (b < 0)
        return NULL;
    pthread_mutex_lock(&p->mu);
    block *k = p->bins[b];
    if (k) {
        p->bins[b] = k->next;
        p->idle_bytes -= cap;
    }
    p->refs++;
    pthread_mutex_unlock(&p->mu);
    uint8_t *data = k ? (uint8_t *)k : aligned_alloc(64, cap);
    bb_buffer *buf = data ? bb_buffer_wrap(data, nbytes, give_back, p) : NULL;
    bb_value *v = buf ? bb_value_tensor_wrap(dtype, ndim, dims, buf, data) : NULL;
    if (buf)
        bb_buffer_unref(buf); /* the value holds it; the last unref gives the block back */
    else if (data)
        give_back(p, data, nbytes); /* and drops the reference taken above */
    else
        cpu_tensor_pool_release(p);
    if (v && zero)
        memset(data, 0, nbytes);
    return v;
}
