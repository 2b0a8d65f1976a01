/*
 * compiler_internal.h — bbc's internals: the state the passes share, the
 * pass table and the runner. The public API (options, bindings, errors,
 * bbc_compile) is bbc/compiler.h, included here.
 *
 * The pipeline (COMPILER.md "The pass pipeline"):
 *
 *   refine_polymorphic_value_info                      (pre-pipeline, needs bindings)
 *   validate_bootstrap_composition                     (top of run_pipeline)
 *   inline_for_partition ... validate_runtime_complete (the 17 canonical passes)
 *   user stages (--stage), once per partition in push order
 *   resolve_component_dependencies, validate_all_slots_bound,
 *   stamp_compilation_metadata, merge_partitions_into_one   (the tail)
 *
 * Every pass is `int bbc_pass_<name>(bbc_state *st)`: it reads and rewrites
 * the IR held by the state and returns BB_OK or a failure recorded in
 * st->err (pass name, variant, message naming the node / value / slot).
 * Before partition_by_wire_ops the passes work on st->root (the recorded
 * root function inside st->model); from it on, on every st->parts[i]->fn.
 * Each pass is idempotent: the pipeline run on its own output changes nothing.
 *
 * Memory: the state owns the working model, every partition model and the
 * merged output until bbc_compile hands the output to the caller. Side
 * tables live in st->arena. Nothing here is global; compiles may run in
 * parallel threads on distinct states.
 */
#ifndef BBC_COMPILER_INTERNAL_H
#define BBC_COMPILER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bb/arena.h"
#include "bb/ir.h"
#include "bb/plugin.h"
#include "bb/status.h"
#include "bb/types.h"
#include "bbc/compiler.h"

/* ---- the state the passes share ------------------------------------------------------- */

/* One component slot, model-wide. */
typedef struct bbc_slot {
    const char *name;
    bb_role role;                  /* BB_ROLE_NONE until known */
    const char *type_name;         /* recorded concrete type or binding; NULL if unbound */
    uint32_t slot_id;
    bool generic;                  /* declared in function.attribute */
    bool declared;                 /* declared by some function (else only named by nodes) */
    const bbc_binding *binding;    /* explicit binding, or NULL */
    const bb_component_type *type; /* resolved type, or NULL */
} bbc_slot;

/* A value a lookup_output formal wires in from the network. */
typedef struct bbc_net_in {
    const char *port;
    const char *value; /* value name in the root function */
    const char *cls;   /* class of the module that looked it up (NULL: unknown) */
} bbc_net_in;

/* A slot a class declares (its class module, or its partition function in
 * a compiled input), with the class's own construction state for a
 * concrete slot: two classes may configure one slot name differently. */
typedef struct bbc_class_slot {
    const char *cls, *slot;
    const bb_attr *attr; /* the class's attribute_proto, or NULL (generic) */
} bbc_class_slot;

/* A matched send/receive pair between two partitions. */
typedef struct bbc_wire_edge {
    const char *producer_class, *consumer_class;
    const char *value_name;   /* the send's data value */
    const char *recv_value;   /* the receive's payload value */
    const char *send_node, *recv_node;
    const char *send_op, *recv_op;
    bool trigger_only;        /* set by analyze_wire_edges */
} bbc_wire_edge;

typedef struct bbc_partition {
    const char *cls;    /* the peer class = target = function name */
    char hash[17];      /* 16-hex content hash of the node bodies */
    bb_model *model;    /* owned: fn + sub-functions + bootstraps; fn's nodes and
                         * value_info are the root's objects moved here (they
                         * live in st->model's arena, which outlives this) */
    bb_function *fn;    /* the partition's main function (in model) */
} bbc_partition;

typedef struct bbc_state {
    bb_arena *arena;              /* state kept across passes (slots, ports, edges, ...) */
    bb_arena *scratch;            /* a pass's own tables: reset before every pass */
    bb_model *model;              /* owned working copy of the input */
    bb_function *root;            /* the root function (in model) */
    const bbc_options *opts;      /* borrowed */
    const bbc_bindings *bindings; /* borrowed (may be NULL) */
    const bb_type_source *types; /* borrowed (may be NULL) */
    BB_VEC(bbc_slot) slots;
    BB_VEC(bbc_net_in) net_ins;
    BB_VEC(bbc_class_slot) class_slots;
    BB_VEC(bbc_partition *) parts;
    BB_VEC(bbc_wire_edge) edges;
    bb_model *out;                /* merged output (owned until taken) */
    const char *pass;             /* the pass running (for errors) */
    bbc_error *err;
    bbc_options default_opts;
} bbc_state;

/* Takes model (freed by bbc_state_free even on failure). Finds the root
 * function (the one model.graph's single node calls; else the only
 * non-bootstrap function nobody calls), reads the slot table and the net_in
 * formals, and resolves bindings against types. opts may be NULL (defaults).
 * A compiled input (passport "v1") is first re-assembled into one root from
 * its partitions so the pipeline runs on it unchanged (idempotence). */
int bbc_state_init(bbc_state *st, bb_model *model, const bbc_options *opts,
                   const bbc_bindings *bindings, const bb_type_source *types,
                   bbc_error *err);
void bbc_state_free(bbc_state *st);
/* Record a failure for the running pass. Returns BB_EVALIDATE/BB_ECOMPILE. */
int bbc_fail(bbc_state *st, bbc_errkind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Out-of-memory as an Internal failure. */
int bbc_oom(bbc_state *st);

/* Adds a partition (takes m; its functions[0] is the main function).
 * Returns NULL on OOM. */
bbc_partition *bbc_state_add_partition(bbc_state *st, const char *cls, bb_model *m);
bbc_slot *bbc_state_slot(bbc_state *st, const char *name);
/* Does class cls declare slot (see bbc_class_slot)? */
bool bbc_state_class_declares(const bbc_state *st, const char *cls, const char *slot);
/* The construction state class cls gives slot, or NULL. */
const bb_attr *bbc_state_class_attr(const bbc_state *st, const char *cls, const char *slot);
/* The slot a role node runs on (by its "slot" stamp, or unique match), or NULL. */
bbc_slot *bbc_state_node_slot(bbc_state *st, const bb_node *n);

/* Slots partition p needs, in a stable order: its function's generic and
 * concrete declarations, then slots its nodes (function, bootstraps,
 * sub-functions) name that it does not declare. *out is an arena array of
 * slot names (borrowed). */
int bbc_partition_slots(bbc_state *st, const bbc_partition *p, const char ***out, size_t *n);

/* ---- the pass table (drives the runner, `bbc passes`, --without-stage, bbc(1)) ---- */

typedef enum bbc_phase {
    BBC_PHASE_PRE = 0,   /* before run_pipeline (needs bindings) */
    BBC_PHASE_SEAM,      /* top of run_pipeline */
    BBC_PHASE_CANONICAL, /* CANONICAL_PASS_NAMES, in order */
    BBC_PHASE_TAIL       /* after the pipeline and the user stages */
} bbc_phase;

#define BBC_PASS_MAP(X)                                                                  \
    X(refine_polymorphic_value_info, PRE,                                               \
      "narrow placeholder tensor types on role ports to the bound types' storage")       \
    X(validate_bootstrap_composition, SEAM,                                             \
      "every bootstrap call reaches a FunctionProto; no bootstrap call cycles")          \
    X(inline_for_partition, CANONICAL,                                                  \
      "inline wire-touching, pure-ONNX and single-call functions at their call sites")   \
    X(derive_wire_deadlines, CANONICAL,                                                 \
      "stamp deadline_ns = chain_depth x per-hop budget on every wire send")             \
    X(validate, CANONICAL,                                                              \
      "structural rules 1-8: known ops, producers, unique outputs, wire pairing, "      \
      "types, slot metadata, no cycles, opsets imported")                               \
    X(expand_ops, CANONICAL, "materialize every op's attribute defaults")                \
    X(type_solver, CANONICAL,                                                           \
      "narrow every value to a leaf type of the type tree (strict or permissive)")       \
    X(infer_peer_classes, CANONICAL,                                                    \
      "stamp home_class on every node and dest_class on every wire send")                \
    X(synthesize_wire_recvs, CANONICAL,                                                 \
      "materialize a wire.Recv in the consumer class of every net_out port")             \
    X(partition_by_wire_ops, CANONICAL,                                                 \
      "slice the root at wire ops into one function per peer class")                     \
    X(resolve_slots, CANONICAL,                                                         \
      "match every role node to its slot; stamp slot and slot_id")                       \
    X(analyze_wire_edges, CANONICAL,                                                    \
      "classify wire edges data / trigger_only; batch sends by destination")             \
    X(insert_dedup_gate_rx, CANONICAL, "splice DedupGateRx after every wire receive")    \
    X(insert_peer_health_gate_rx, CANONICAL,                                            \
      "splice PeerHealthGateRx after the dedup gate")                                    \
    X(insert_backoff_gate_rx, CANONICAL, "splice BackoffGateRx after the peer-health gate") \
    X(insert_peer_health_gate_tx, CANONICAL,                                            \
      "splice PeerHealthGateTx before every peer-routed wire send")                      \
    X(insert_backoff_gate_tx, CANONICAL,                                                \
      "splice BackoffGateTx between the peer-health gate and the send")                  \
    X(insert_async_deadlines, CANONICAL,                                                \
      "stamp deadline_ns on async ops and pair each with a DeadlineCheck")               \
    X(validate_runtime_complete, CANONICAL,                                             \
      "every partition has its gate chains and DeadlineCheck pairings")                  \
    X(resolve_component_dependencies, TAIL,                                             \
      "every bound type's declared dependencies name bound slots of the right role")     \
    X(validate_all_slots_bound, TAIL, "every slot a partition uses has a binding")       \
    X(stamp_compilation_metadata, TAIL,                                                 \
      "stamp the passport, per-target binding triples and Recv slot ids")                \
    X(merge_partitions_into_one, TAIL,                                                  \
      "one ModelProto whose functions[] hold every partition and sub-function")

typedef int (*bbc_pass_fn)(bbc_state *st);

typedef struct bbc_pass {
    const char *name;
    bbc_phase phase;
    bbc_pass_fn run;
    const char *summary;
} bbc_pass;

#define BBC__PASS_DECL(name, phase, summary) int bbc_pass_##name(bbc_state *st);
BBC_PASS_MAP(BBC__PASS_DECL)
#undef BBC__PASS_DECL

size_t bbc_pass_count(void);
const bbc_pass *bbc_pass_at(size_t i);
const bbc_pass *bbc_pass_find(const char *name);
const char *bbc_phase_name(bbc_phase p);

/* Runs one pass with st->pass set (and the verify check when asked). */
int bbc_run_pass(bbc_state *st, const bbc_pass *p);
/* validate_bootstrap_composition + the 17 canonical passes (honouring
 * opts->without), with the wire-edge storage check after synthesis. */
int bbc_run_pipeline(bbc_state *st);
/* The type check of every wire edge after synthesize_wire_recvs, on the
 * solved types: records the accepted payload_type on each receive,
 * IncompatibleStorageOnEdge (with a suggested codec) on a mismatch. */
int bbc_check_wire_storage(bbc_state *st);
/* Structural well-formedness of one function (producers, unique outputs,
 * acyclic); the verify-after-each-pass check. */
int bbc_verify_function(const bb_function *f, char *why, size_t cap);

#endif
