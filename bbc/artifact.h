/*
 * artifact.h — a read-only view of a compiled ModelProto for the inspection
 * commands (`bbc targets`, `bbc dot`): its targets (one per partition
 * function), each target's entry function, bootstrap sibling and the
 * model-local functions they call, its binding triples, and the wire edges
 * between sends and receives (matched by the dest_site / src_site stamps the
 * compiler writes).
 *
 * A target is a function carrying ai.bytesandbrains.partition_id; a
 * compiled model whose stages dropped every such stamp falls back to the
 * functions no other function calls that are not bootstraps. Everything
 * points into the model and into the arena passed in: the view lives as
 * long as both. The model is untrusted: call depth is bounded and a stamp
 * naming a node that does not exist makes a one-sided edge, never an error.
 */
#ifndef BBC_ARTIFACT_H
#define BBC_ARTIFACT_H

#include <stdbool.h>
#include <stddef.h>

#include "bb/arena.h"
#include "bb/ir.h"
#include "bb/status.h"

typedef struct bbc_artifact_binding {
    const char *slot;
    const char *triple; /* "<role>|<TYPE_NAME>|<slot_id>" as stamped */
    const char *role, *type_name, *slot_id; /* parsed; NULL when malformed */
} bbc_artifact_binding;

typedef struct bbc_artifact_target {
    const char *name;              /* the target = the partition function's name */
    const char *partition_id;      /* "<class>#<hash>", or NULL */
    const bb_function *fn;         /* the entry function */
    const bb_function *bootstrap;  /* "<name>__bootstrap", or NULL */
    const bb_function **calls;     /* model-local functions fn / bootstrap reach */
    size_t n_calls;
    bbc_artifact_binding *bindings;
    size_t n_bindings;
} bbc_artifact_target;

/* One wire op's end: which target, which function of it (its entry or its
 * bootstrap), which node. */
typedef struct bbc_artifact_end {
    size_t target; /* index into targets, SIZE_MAX when there is no node */
    const bb_function *fn;
    size_t index;  /* of node in fn->nodes */
    const bb_node *node;
} bbc_artifact_end;

/* A send and the receive it addresses. A send whose dest_site names no
 * node has recv.node == NULL; a receive whose src_site names no node (or
 * that no send addresses) has send.node == NULL. */
typedef struct bbc_artifact_edge {
    bbc_artifact_end send, recv;
    const char *port;      /* ai.bytesandbrains.port of the send (or receive), or NULL */
    const char *transport; /* "data" / "trigger_only", or NULL */
} bbc_artifact_edge;

typedef struct bbc_artifact {
    const bb_model *model;
    const char *name; /* the program's name: model.graph's name, or NULL */
    bbc_artifact_target *targets;
    size_t n_targets;
    bbc_artifact_edge *edges;
    size_t n_edges;
} bbc_artifact;

/* Reads the view. BB_EINVAL naming `origin` when m carries no passport
 * ("run bbc compile first") or has no target; BB_ENOMEM. */
int bbc_artifact_read(const bb_model *m, const char *origin, bb_arena *a, bbc_artifact *out,
                      bb_error *err);

/* Is f a wire-gate or DeadlineCheck node the compiler inserted? */
bool bbc_artifact_is_gate(const bb_node *n);

#endif
