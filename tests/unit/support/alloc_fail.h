/*
 * alloc_fail.h — allocation-failure injection for one test binary
 * (SQLite-style sweeps: fail the Nth allocation, for every N).
 *
 * Include it in exactly ONE test file: it defines malloc, calloc, realloc,
 * aligned_alloc, posix_memalign and free for the whole executable, counting
 * live blocks and failing the af_fail_at-th allocation call, on top of
 * glibc's __libc_* allocator. Where another allocator owns malloc
 * (AddressSanitizer, valgrind) nothing can be counted: AF_ACTIVE is 0 under
 * ASan (the af_* names then do nothing), and af_interposed() tells at run
 * time.
 */
#ifndef BB_TEST_ALLOC_FAIL_H
#define BB_TEST_ALLOC_FAIL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__)
#define AF_ACTIVE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AF_ACTIVE 0
#endif
#endif
#ifndef AF_ACTIVE
#define AF_ACTIVE 1
#endif

#if AF_ACTIVE
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

/* volatile: malloc is a builtin the compiler assumes touches no visible memory */
static volatile long af_live;    /* blocks allocated and not freed */
static volatile long af_calls;   /* allocation calls since the counter was reset */
static volatile long af_fail_at; /* fail the af_fail_at-th call (1-based); 0 = never */
static volatile bool af_failed;  /* the injected failure happened */

static bool af_inject(void)
{
    if (af_fail_at == 0)
        return false;
    if (++af_calls == af_fail_at) {
        af_failed = true;
        errno = ENOMEM;
        return true;
    }
    return false;
}

void *malloc(size_t n)
{
    void *p = af_inject() ? NULL : __libc_malloc(n);
    if (p)
        af_live++;
    return p;
}

void *calloc(size_t n, size_t size)
{
    void *p = af_inject() ? NULL : __libc_calloc(n, size);
    if (p)
        af_live++;
    return p;
}

void *realloc(void *old, size_t n)
{
    if (af_inject())
        return NULL;
    void *p = __libc_realloc(old, n);
    if (!old && p)
        af_live++;
    else if (old && !p && n == 0)
        af_live--;
    return p;
}

void *aligned_alloc(size_t align, size_t n)
{
    void *p = af_inject() ? NULL : __libc_memalign(align, n);
    if (p)
        af_live++;
    return p;
}

int posix_memalign(void **out, size_t align, size_t n)
{
    void *p = af_inject() ? NULL : __libc_memalign(align, n);
    if (!p)
        return ENOMEM;
    af_live++;
    *out = p;
    return 0;
}

void free(void *p)
{
    if (p)
        af_live--;
    __libc_free(p);
}

/* Whether these functions are the malloc in use (valgrind replaces them). */
static bool af_interposed(void)
{
    long before = af_live;
    void *volatile p = malloc(16);
    bool ours = p && af_live == before + 1;
    free(p);
    return ours;
}

/* Arm: the n-th allocation from now fails (0 disarms). */
static void af_arm(long n)
{
    af_calls = 0;
    af_failed = false;
    af_fail_at = n;
}
#else /* another allocator: nothing is counted or failed */
static const long af_live = 0;
static const bool af_failed = false;
static __attribute__((unused)) bool af_interposed(void) { return false; }
static __attribute__((unused)) void af_arm(long n) { (void)n; }
#endif

#endif
