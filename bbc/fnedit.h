/*
 * fnedit.h — an index over one function for the passes that read and splice
 * its dataflow: the producer and the consumers of every value and the
 * value_info by name, so lookups, rewires and insertions cost what they
 * touch instead of a scan of the function.
 *
 * The index is focused: it covers only the values a pass asks about, plus
 * those it types or inserts itself, so it stays cheap on a big function;
 * questions about other values answer "unknown" / "not read".
 *
 * Insertions are queued (bbc_fnedit_insert) and applied in one rebuild of
 * the node list (bbc_fnedit_commit); until then node indices are those of
 * the function as indexed. Rewires and value types apply at once. The index
 * assumes nobody else edits the function's nodes meanwhile (node metadata
 * is free to change).
 */
#ifndef BBC_FNEDIT_H
#define BBC_FNEDIT_H

#include <stdbool.h>
#include <stddef.h>

#include "bb/arena.h"
#include "bb/ir.h"
#include "bb/types.h"

typedef struct bbc_fnedit bbc_fnedit;
struct bbc_map; /* bbc/util.h */

/* Index the values of f in focus (a set; borrowed for the call only).
 * side: the arena for the index itself (freed with it); ir: the arena new
 * IR objects (value_info, node lists) come from. NULL on OOM. */
bbc_fnedit *bbc_fnedit_new_focused(bb_arena *side, bb_arena *ir, bb_function *f,
                                   const struct bbc_map *focus);
/* For a pass that only types the values in focus and queues insertions: no
 * producer or consumer index (producer / consumed / rewire must not be
 * called on it). */
bbc_fnedit *bbc_fnedit_new_types(bb_arena *side, bb_arena *ir, bb_function *f,
                                 const struct bbc_map *focus);

/* Index of the node producing v (as indexed), SIZE_MAX for a formal, an
 * unknown value or a value only a queued node produces. */
size_t bbc_fnedit_producer(const bbc_fnedit *e, const char *v);
/* Does a node other than skip (or a function output) read v? */
bool bbc_fnedit_consumed(const bbc_fnedit *e, const char *v, const bb_node *skip);
/* Replace input `from` by `to` in every node except skip; returns how many. */
size_t bbc_fnedit_rewire(bbc_fnedit *e, const char *from, const char *to, const bb_node *skip);

const bb_type_node *bbc_fnedit_type(bbc_fnedit *e, const char *v);
int bbc_fnedit_set_type(bbc_fnedit *e, const char *v, const bb_type_node *t);

/* Queue n before node index `at` (f->nodes.n: at the end); several at one
 * place keep their queue order. n's inputs count as consumers at once. */
int bbc_fnedit_insert(bbc_fnedit *e, size_t at, bb_node *n);
/* Apply the queued insertions. The index is stale afterwards: free it with
 * its side arena, or make a new one. */
int bbc_fnedit_commit(bbc_fnedit *e);

#endif
