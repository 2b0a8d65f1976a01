/*
 * arena.h — a bump allocator that owns every IR object of one model.
 *
 * IR passes allocate from the model's arena and never free objects one by
 * one; bb_arena_destroy frees everything at once. Allocations are 16-byte
 * aligned and zeroed. Not thread-safe: one arena belongs to one thread.
 */
#ifndef BB_ARENA_H
#define BB_ARENA_H

#include <stddef.h>
#include <stdint.h>

typedef struct bb_arena bb_arena;

/* Returns new, or NULL when out of memory. */
bb_arena *bb_arena_create(void);
void bb_arena_destroy(bb_arena *a);

/* Zeroed, 16-byte aligned; NULL when out of memory or size overflows. */
void *bb_arena_alloc(bb_arena *a, size_t size);
/* n * size with overflow check. */
void *bb_arena_calloc(bb_arena *a, size_t n, size_t size);
/* Copies; s may be NULL (returns NULL). */
char *bb_arena_strdup(bb_arena *a, const char *s);
char *bb_arena_strndup(bb_arena *a, const char *s, size_t n);
void *bb_arena_memdup(bb_arena *a, const void *p, size_t n);
/* printf into the arena. */
char *bb_arena_sprintf(bb_arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Bytes handed out so far (for budgets and benchmarks). */
size_t bb_arena_used(const bb_arena *a);
/* Forget every allocation, keeping the memory for the next ones (already
 * faulted in and likely cached): for scratch tables rebuilt over and over.
 * Every pointer the arena handed out is invalid afterwards; bb_arena_used
 * counts from zero again. */
void bb_arena_reset(bb_arena *a);
/* Move every chunk of src into dst: what src handed out now lives until dst
 * is destroyed. src stays a valid, empty arena (new allocations get new
 * chunks of its own). Lets a model keep objects another arena built
 * instead of deep-copying them; no-op when dst == src. Chunks src keeps
 * from a reset stay with src. */
void bb_arena_adopt(bb_arena *dst, bb_arena *src);

/*
 * Growable arrays inside an arena. Every BB_VEC(T) has the layout
 * { T *v; size_t n, cap; }. Growth copies into a larger arena block; the
 * old block is simply abandoned (freed with the arena).
 */
#define BB_VEC(T)        \
    struct {             \
        T *v;            \
        size_t n, cap;   \
    }

/* Reserve one more zeroed element; returns a pointer to it or NULL. */
void *bb__vec_push(bb_arena *a, void *vec, size_t elem_size);
/* Insert a zeroed element at index i (0..n); returns it or NULL. */
void *bb__vec_insert(bb_arena *a, void *vec, size_t elem_size, size_t i);
/* Remove element i, shifting the tail down. */
void bb__vec_remove(void *vec, size_t elem_size, size_t i);

#define BB_VEC_PUSH(arena, vecp) bb__vec_push((arena), (vecp), sizeof *(vecp)->v)
#define BB_VEC_INSERT(arena, vecp, i) \
    bb__vec_insert((arena), (vecp), sizeof *(vecp)->v, (i))
#define BB_VEC_REMOVE(vecp, i) bb__vec_remove((vecp), sizeof *(vecp)->v, (i))

#endif
