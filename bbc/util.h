/*
 * util.h — small IR helpers the compiler passes share: metadata access, op
 * classification, a string->index map, producer lookup, topological order,
 * value types, node signatures (catalog or bound plugin type) and the
 * content hash. Internal to bbc.
 */
#ifndef BBC_UTIL_H
#define BBC_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "bb/ir.h"
#include "bb/opsets.h"
#include "bb/types.h"
#include "bbc/compiler_internal.h"

/* ---- metadata, op classification ---------------------------------------- */

const char *bbc_meta(const bb_node *n, const char *key);
bool bbc_meta_is(const bb_node *n, const char *key, const char *value);
int bbc_set_meta(bb_arena *a, bb_node *n, const char *key, const char *value);

/* NULL-safe string equality; inline, and most unequal strings differ in
 * their first byte, which needs no strcmp call. */
static inline bool bbc_str_eq(const char *a, const char *b)
{
    if (!a || !b)
        return a == b;
    return a[0] == b[0] && strcmp(a, b) == 0;
}
/* x + sep + y as a new arena string (NULL on OOM; NULL parts count as ""). */
char *bbc_join(bb_arena *a, const char *x, const char *sep, const char *y);
/* "<stem>_<k>" as a new arena string. */
char *bbc_join_num(bb_arena *a, const char *stem, size_t k);
/* k in decimal, written at the end of buf; returns where the digits start
 * (no printf: ids are formatted per node). */
#define BBC_DECIMAL_MAX 24
const char *bbc_decimal(char buf[BBC_DECIMAL_MAX], size_t k);
bool bbc_node_is(const bb_node *n, const char *domain, const char *op_type);
bool bbc_is_wire(const bb_node *n);
bool bbc_is_wire_send(const bb_node *n);
bool bbc_is_wire_recv(const bb_node *n);
/* A node that runs on a component slot: role.* domain, or slot metadata. */
bool bbc_is_role_node(const bb_node *n);
/* A call of a model-local function (non-reserved domain, function exists). */
bb_function *bbc_callee(const bb_model *m, const bb_node *n);
/* "name" or "#<index>" when the node is unnamed, for messages (arena copy). */
const char *bbc_node_label(bb_arena *a, const bb_node *n, size_t index);

/* ---- copies within one model ---------------------------------------------- */

/* A copy of n for the model whose arena a holds n's strings: its own lists
 * (inputs, outputs, attributes, metadata entries) and attribute objects
 * (attributes are set in place), sharing the strings and byte buffers,
 * which the IR never writes into. Cheaper than bb_node_clone, which copies
 * every string. NULL when out of memory. */
bb_node *bbc_node_copy(bb_arena *a, const bb_node *n);
/* The same for a value_info: its own metadata entries; name, doc and the
 * TypeProto shared (passes replace a type, never edit one). */
bb_value_info *bbc_value_info_copy(bb_arena *a, const bb_value_info *vi);

/* ---- string -> size_t map (open addressing, arena-backed) ---------------- */

typedef struct bbc_map {
    bb_arena *a;
    const char **keys;
    size_t *vals;
    uint32_t *hashes; /* of each key: most probes are told apart without strcmp */
    size_t cap, n;
} bbc_map;

int bbc_map_init(bbc_map *m, bb_arena *a, size_t hint);
/* Add v to a map used as a set (NULL and "" are skipped). */
int bbc_set_add(bbc_map *m, const char *v);
int bbc_map_put(bbc_map *m, const char *key, size_t val); /* key borrowed */
bool bbc_map_get(const bbc_map *m, const char *key, size_t *val);

/* bb_kv_set through an index of l's keys (key -> entry of the first of
 * each), kept up to date: for lists that grow with the program (one
 * net_out key per port), where bb_kv_set's scan would be quadratic. */
int bbc_kv_set_indexed(bb_arena *a, bb_kv_list *l, bbc_map *index, const char *key,
                       const char *value);

/* ---- model-local functions by (domain, name, overload) --------------------------- */

typedef struct bbc_fn_index {
    const bb_model *m;
    bbc_map map; /* "domain\x1fname\x1foverload" -> index in m->functions */
} bbc_fn_index;

/* Index m's functions (the first of duplicates wins). Borrows m. */
int bbc_fn_index_init(bbc_fn_index *ix, bb_arena *a, const bb_model *m);
/* Index of the model-local function node n calls (non-reserved domain), or
 * SIZE_MAX. Never allocates. */
size_t bbc_fn_index_callee(const bbc_fn_index *ix, const bb_node *n);

/* ---- producers and consumers ---------------------------------------------- */

#define BBC_FORMAL ((size_t)-2) /* producer "index" of a function input */

/* value -> producing node index (BBC_FORMAL for function inputs). On a
 * duplicate producer the first one wins; *dup (may be NULL) receives the
 * first duplicated value name. */
int bbc_producers(bb_arena *a, const bb_function *f, bbc_map *out, const char **dup);
/* Index of node in f->nodes, or SIZE_MAX. */
size_t bbc_node_index(const bb_function *f, const bb_node *n);

/* Topological order of f's nodes into order[f->nodes.n]. *n_sorted (may be
 * NULL) receives how many were ordered; on a cycle returns BB_EVALIDATE and
 * the nodes missing from order[0..*n_sorted) sit on or behind the cycle. */
int bbc_topo_order(bb_arena *a, const bb_function *f, size_t *order, size_t *n_sorted);
/* The same with f's producer map already built (bbc_producers). */
int bbc_topo_order_with(bb_arena *a, const bb_function *f, const bbc_map *producers,
                        size_t *order, size_t *n_sorted);

/* ---- value types ------------------------------------------------------------ */

/* Type of value from f->value_info (NULL when absent or unknown). */
const bb_type_node *bbc_value_type(const bb_function *f, const char *value);
/* Set (replace or add) value's value_info to t. */
int bbc_set_value_type(bb_arena *a, bb_function *f, const char *value, const bb_type_node *t);
/* out = value_info name -> index in f->value_info (the first of
 * duplicates), so a lookup costs no scan of the list. BB_OK / BB_ENOMEM. */
int bbc_value_info_index(bb_arena *a, const bb_function *f, bbc_map *out);

/* TypeProto -> type tree node, memoized by denotation (the tree's own lookup
 * compares the denotation with every type name). */
typedef struct bbc_type_cache {
    bbc_map by_denotation; /* denotation -> (uintptr_t) type node */
} bbc_type_cache;
int bbc_type_cache_init(bbc_type_cache *c, bb_arena *a);
/* bb_type_from_proto(tp), from the cache when tp's denotation was seen. */
const bb_type_node *bbc_type_cache_get(bbc_type_cache *c, const bb_type_proto *tp);

/* ---- node signatures -------------------------------------------------------- */

typedef struct bbc_sig {
    const bb_port_decl *in;
    uint32_t n_in;
    const bb_port_decl *out;
    uint32_t n_out;
    const bb_op_schema *schema;          /* catalog entry, or NULL */
    const bb_op_decl *decl;              /* bound type's declaration, or NULL */
    const bb_component_type *type;       /* type of decl */
} bbc_sig;

/* The bound slot type's declaration for (domain, op_type) first, else the
 * catalog's. False when neither knows the op. */
bool bbc_node_sig(bbc_state *st, const bb_node *n, bbc_sig *out);
/* Port at position pos (the variadic last port absorbs the tail). */
const bb_port_decl *bbc_sig_in(const bbc_sig *s, size_t pos);
const bb_port_decl *bbc_sig_out(const bbc_sig *s, size_t pos);

/* ---- hashing ------------------------------------------------------------------ */

/* FNV-1a-64 over the canonical text of f's node bodies (domain, op_type,
 * inputs, outputs, attributes, metadata). */
uint64_t bbc_hash_nodes(const bb_function *f);

/* Call chains deeper than this are not followed (the model is untrusted). */
#define BBC_MAX_CALL_DEPTH 64

#endif
