/*
 * artifact.h — the one view of a compiled artifact (the ModelProto bbc
 * writes): its passport, its targets, each target's bindings, and the wire
 * edges between them. bbc's inspection commands print it, the engine
 * installs from it, bbd and `bbd run` choose their targets with it; none of
 * them decides on its own which function is a target.
 *
 * The passport is model.metadata ai.bytesandbrains.compiled = "v1"
 * (BB_META_COMPILED = BB_COMPILED_PASSPORT).
 *
 * A target is a partition function: one carrying ai.bytesandbrains.
 * partition_id that is not a bootstrap. A compiled model whose stages
 * dropped every such stamp falls back to the functions no other function
 * calls that are not bootstraps. A bootstrap is a function whose
 * module_phase is "bootstrap" or whose name ends in "__bootstrap".
 * Each target has:
 *   - its bootstrap sibling: the function "<name>__bootstrap" of the same
 *     domain (or, for a target named "<class>#<hash>", "<class>__bootstrap")
 *     whose module_phase is absent or "bootstrap";
 *   - the model-local functions its entry and bootstrap reach (in the order
 *     a depth-first walk meets them; read by bb_artifact_read_links);
 *   - its bindings: model.metadata "ai.bytesandbrains.binding.<T>.<slot>"
 *     with <T> its name (or its <class>), value "<role>|<TYPE_NAME>|<slot_id>"
 *     parsed by bb_binding_triple_parse. A value that does not parse stays
 *     in the view with its error, so a tool can show it and an installer
 *     refuse it naming the key.
 * A host asks for a target by name: the exact function name, else the one
 * function named "<name>#<hash>" (bb_artifact_find_target).
 *
 * Wire edges (bb_artifact_read_links) pair every wire send of a target's
 * entry or bootstrap with the receive its dest_site stamp names; a receive
 * no send addresses is paired with the send its src_site names, or with
 * nothing.
 *
 * The model is untrusted: reading the view costs O(size log size) however
 * many targets it has; the call walks are bounded in depth and in total
 * work; names may be missing; a stamp naming a node that does not exist
 * makes a one-sided edge, never an error. Everything points into the model
 * and into the arena passed in: the view lives as long as both. Reading
 * allocates only from that arena.
 */
#ifndef BB_ARTIFACT_H
#define BB_ARTIFACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bb/arena.h"
#include "bb/ir.h"
#include "bb/meta.h"
#include "bb/status.h"

/* Call chains deeper than this are not followed. */
#define BB_ARTIFACT_MAX_CALL_DEPTH 64
/* The call walks of all targets together look at no more nodes than this. */
#define BB_ARTIFACT_MAX_WALK (1 << 24)

typedef struct bb_artifact_binding {
    const char *key;        /* "ai.bytesandbrains.binding.<T>.<slot>" */
    const char *slot;       /* the key's <slot> */
    const char *triple;     /* the value as stamped ("" when it has none) */
    bb_binding_triple parsed; /* role, TYPE_NAME, slot_id; valid when error is NULL */
    const char *error;      /* why the value does not parse (names it), or NULL */
} bb_artifact_binding;

typedef struct bb_artifact_target {
    const char *name;              /* the partition function's name */
    const char *partition_id;      /* "<class>#<hash>", or NULL */
    size_t fn_index;               /* of fn in model->functions */
    const bb_function *fn;         /* the entry function */
    size_t bootstrap_index;        /* SIZE_MAX when there is no bootstrap */
    const bb_function *bootstrap;  /* or NULL */
    const bb_function **calls;     /* model-local functions fn / bootstrap reach */
    size_t n_calls;                /* (both 0 until bb_artifact_read_links) */
    bb_artifact_binding *bindings; /* in model.metadata order */
    size_t n_bindings;
} bb_artifact_target;

/* One wire op's end: which target, which function of it (its entry or its
 * bootstrap), which node. */
typedef struct bb_artifact_end {
    size_t target; /* index into targets, SIZE_MAX when there is no node */
    const bb_function *fn;
    size_t index;  /* of node in fn->nodes */
    const bb_node *node;
} bb_artifact_end;

/* A send and the receive it addresses. A send whose dest_site names no
 * receive has recv.node == NULL; a receive whose src_site names no send (or
 * that no send addresses) has send.node == NULL. */
typedef struct bb_artifact_edge {
    bb_artifact_end send, recv;
    const char *port;      /* ai.bytesandbrains.port of the send (or receive), or NULL */
    const char *transport; /* "data" / "trigger_only", or NULL */
} bb_artifact_edge;

typedef struct bb_artifact {
    const bb_model *model;
    const char *name;      /* the program's name: model.graph's name, or NULL */
    bb_artifact_target *targets;
    size_t n_targets;
    bb_artifact_edge *edges; /* empty until bb_artifact_read_links */
    size_t n_edges;
} bb_artifact;

/* Does m carry the passport? */
bool bb_artifact_is_compiled(const bb_model *m);
/* Stamp the passport on m (bbc's last passes). BB_ENOMEM. */
int bb_artifact_stamp_passport(bb_model *m);
/* Is f a bootstrap function (module_phase "bootstrap" or the name suffix)? */
bool bb_artifact_is_bootstrap(const bb_function *f);
/* Is f a partition function (partition_id stamped, not a bootstrap)? */
bool bb_artifact_is_partition(const bb_function *f);

/* Reads the view of m: the targets with their bootstraps and bindings (what
 * an installer needs; not the calls and wire edges). origin names m in
 * messages (a file name). Errors:
 * BB_EINVAL when m carries no passport ("not a compiled model ... run 'bbc
 * compile' first"), BB_ENOTFOUND when it has no target, BB_ENOMEM; each
 * message starts with origin. */
int bb_artifact_read(const bb_model *m, const char *origin, bb_arena *a, bb_artifact *out,
                     bb_error *err);

/* Adds what the inspection tools draw to a view bb_artifact_read filled:
 * each target's calls and the wire edges (a the same arena or one that
 * lives as long). BB_ELIMIT when the call walks would look at more than
 * BB_ARTIFACT_MAX_WALK nodes; BB_ENOMEM. */
int bb_artifact_read_links(bb_artifact *art, bb_arena *a, bb_error *err);

/* The target a host asks for by name: the target whose function is named
 * name, else the only one named "<name>#<hash>". *out borrows the view.
 * Errors: BB_ENOTFOUND "no target '<name>' (targets: A, B)"; BB_EINVAL when
 * name is empty or when two "<name>#<hash>" targets match (both named). */
int bb_artifact_find_target(const bb_artifact *art, const char *name,
                            const bb_artifact_target **out, bb_error *err);

/* "A, B, C": the target names into buf (always NUL-terminated, cut at cap;
 * "none" when there is no target). Returns buf. */
const char *bb_artifact_target_names(const bb_artifact *art, char *buf, size_t cap);

#endif
