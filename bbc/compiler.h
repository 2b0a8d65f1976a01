/*
 * compiler.h — bbc's public API, what a program that compiles needs (bbd run,
 * the tests, an embedding tool): the options, the bindings (the bind
 * chain), the error variants and the two entry points, bbc_compile and
 * bbc_check. Component types come in through a bb_type_source
 * (bb/type_source.h).
 *
 *   bbc_bindings b;  bbc_bindings_init(&b);
 *   bbc_bindings_add_arg(&b, "compute=cpu::CpuBackend", &err);
 *   bbc_options o;   bbc_options_init(&o);
 *   if (bbc_compile(recorded, &o, &b, types, NULL, 0, &compiled, &cerr)) ...
 *
 * The passes, the state they share and the pass table are bbc's internals
 * (bbc/compiler_internal.h): only bbc/, its tests and bench_compile include
 * them, never bbd. Nothing here is global; compiles may run in parallel
 * threads.
 */
#ifndef BBC_COMPILER_H
#define BBC_COMPILER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bb/arena.h"
#include "bb/ir.h"
#include "bb/plugin.h"
#include "bb/status.h"
#include "bb/type_source.h"

/* ---- defaults ------------------------------------------------------------- */

/* The spec names DEFAULT_PER_HOP_BUDGET_NS without giving its value. One hop
 * of a federated round includes a client's local training, so the default
 * is generous: 10 s. derive_wire_deadlines stamps chain_depth x budget on
 * every wire send; insert_async_deadlines stamps it on async carriers. */
#define BBC_DEFAULT_PER_HOP_BUDGET_NS 10000000000ull

/* ---- error variants (COMPILER.md "Error variants") -------------------------- */

/* X(ID, Name, doc). The first block is ValidationError (the validate pass),
 * the rest CompileError and bbc's additions. */
#define BBC_ERROR_MAP(X)                                                                  \
    X(UNKNOWN_OP, UnknownOp, "a node's (domain, op_type) is in no catalog, model function " \
                             "or plugin opset")                                           \
    X(DANGLING_INPUT, DanglingInput, "a node input has no producer")                       \
    X(DUPLICATE_OUTPUT, DuplicateOutput, "two producers write the same value name")        \
    X(UNPAIRED_WIRE_REQUEST, UnpairedWireRequest,                                         \
      "a SendReqBatched is not paired with exactly one SendResp")                         \
    X(MISSING_TYPE_INFO, MissingTypeInfo, "a function input has no declared type")         \
    X(MALFORMED_SLOT_METADATA, MalformedSlotMetadata,                                     \
      "a role node lacks (concrete_type, instance) and (required_trait, slot_id)")        \
    X(CYCLIC_GRAPH, CyclicGraph, "the dataflow graph has a cycle")                         \
    X(OPSET_NOT_IMPORTED, OpsetNotImported, "a node's domain is not in opset_import")      \
    X(EXPANSION_FAILED, ExpansionFailed, "an op's defaults could not be materialized")     \
    X(ROLE_METHOD_FAILED, RoleMethodFailed, "a bound type does not declare a role op used " \
                                            "on its slot")                                \
    X(AMBIGUOUS_ROLE, AmbiguousRole, "a role node matches more than one slot")             \
    X(UNRESOLVED_PEER_CLASS, UnresolvedPeerClass,                                         \
      "a wire send's destination peers carry no peer class")                              \
    X(CROSS_CLASS_DATAFLOW, CrossClassDataflow,                                           \
      "a value flows between peer classes without a wire op")                             \
    X(IR_VERSION_MISMATCH, IrVersionMismatch, "the model's ir_version is not the target")  \
    X(MISSING_BINDING, MissingBinding, "a node names a slot no module declares")           \
    X(EMPTY_FUNCTION_TABLE, EmptyFunctionTable, "the model has no function to compile")    \
    X(RUNTIME_INCOMPLETE, RuntimeIncomplete, "a partition lacks a runtime piece "         \
                                             "(DeadlineCheck pairing, gate chain)")       \
    X(INTERNAL, Internal, "an invariant a pass relies on does not hold")                  \
    X(TYPE_CONSTRAINT_FAILED, TypeConstraintFailed, "a value's type contradicts a port")   \
    X(UNRESOLVED_TYPE, UnresolvedType, "strict mode: a value did not narrow to a leaf type") \
    X(UNBOUND_DEPENDENCY, UnboundDependency,                                              \
      "a bound type depends on a slot that is unbound or of another role")               \
    X(UNBOUND_SLOT, UnboundSlot, "a slot the partitions use has no binding")               \
    X(INCOMPATIBLE_STORAGE_ON_EDGE, IncompatibleStorageOnEdge,                            \
      "a wire edge's two ends resolve to different storage types")                        \
    X(BOOTSTRAP_COMPOSITION_GAP, BootstrapCompositionGap,                                 \
      "a bootstrap calls a target with no FunctionProto")                                 \
    X(BOOTSTRAP_COMPOSITION_CYCLE, BootstrapCompositionCycle,                             \
      "bootstrap functions call each other in a cycle")                                   \
    X(WRONG_ROLE, WrongRole, "a slot is bound to a type of another role")                  \
    X(UNKNOWN_COMPONENT_TYPE, UnknownComponentType, "no plugin exports the TYPE_NAME")     \
    X(SLOT_CONFLICT, SlotConflict, "one slot name is declared with different types/roles") \
    X(STAGE_FAILED, StageFailed, "a user stage (--stage) failed")

typedef enum bbc_errkind {
    BBC_E_NONE = 0,
#define BBC__ERR_ENUM(id, name, doc) BBC_E_##id,
    BBC_ERROR_MAP(BBC__ERR_ENUM)
#undef BBC__ERR_ENUM
        BBC_E__COUNT
} bbc_errkind;

typedef struct bbc_error {
    bbc_errkind kind;
    char pass[64];
    char msg[BB_ERROR_MSG_MAX];
} bbc_error;

/* "UnknownOp", ...; "None" for BBC_E_NONE, "?" out of range. */
const char *bbc_errkind_name(bbc_errkind k);
const char *bbc_errkind_doc(bbc_errkind k);
/* BBC_E_NONE when the name is unknown. */
bbc_errkind bbc_errkind_parse(const char *name);
/* Fill e (may be NULL). Returns BB_EVALIDATE for the ValidationError
 * variants, BB_ECOMPILE otherwise. */
int bbc_error_set(bbc_error *e, bbc_errkind kind, const char *pass, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void bbc_error_clear(bbc_error *e);
/* "bbc: error: <pass>: <Variant>: <message>\n" */
void bbc_error_print(const bbc_error *e, FILE *out);

/* ---- options ------------------------------------------------------------------ */

typedef struct bbc_options {
    bool permissive_types;      /* type_solver leaves unresolved values at ANY */
    uint64_t per_hop_budget_ns; /* derive_wire_deadlines / insert_async_deadlines */
    int64_t target_ir_version;  /* the ir_version the input must carry */
    const char *const *without; /* canonical passes or user stages to skip (borrowed) */
    size_t n_without;
    bool verify_each;           /* check IR well-formedness after every pass */
    bool allow_unknown_types;   /* bbc check: a TYPE_NAME no plugin describes is
                                 * tolerated (its ports and role stay unknown) */
} bbc_options;

/* Defaults: strict types, BBC_DEFAULT_PER_HOP_BUDGET_NS, BB_FRAMEWORK_IR_VERSION. */
void bbc_options_init(bbc_options *o);
bool bbc_options_without(const bbc_options *o, const char *name);

/* ---- bindings (the bind chain) ---------------------------------------------------------- */

typedef struct bbc_binding {
    const char *slot;
    const char *type_name;
    const char *config_json; /* per-slot JSON config, or NULL */
    const char *origin;      /* "--bind" or the bindings file, for messages */
} bbc_binding;

typedef struct bbc_bindings {
    bb_arena *arena;
    BB_VEC(bbc_binding) v;
} bbc_bindings;

int bbc_bindings_init(bbc_bindings *b);
void bbc_bindings_free(bbc_bindings *b);
/* Adds or replaces the slot's binding (a later binding wins). Copies. */
int bbc_bindings_add(bbc_bindings *b, const char *slot, const char *type_name,
                     const char *config_json, const char *origin, bb_error *err);
/* "SLOT=TYPE_NAME" (a --bind argument). BB_EINVAL names the argument. */
int bbc_bindings_add_arg(bbc_bindings *b, const char *arg, bb_error *err);
/* {"bindings": {"slot": "TYPE_NAME" | {"type": "TYPE_NAME", "config": {...}}}}.
 * Untrusted: BB_EPARSE naming the origin and the offending key. */
int bbc_bindings_load_json(bbc_bindings *b, const char *text, size_t len, const char *origin,
                           bb_error *err);
int bbc_bindings_load_file(bbc_bindings *b, const char *path, bb_error *err);
const bbc_binding *bbc_bindings_find(const bbc_bindings *b, const char *slot);

/* ---- the driver ---------------------------------------------------------------------- */

/* Compiles recorded (borrowed; copied) into *out (new; free with
 * bb_model_free). opts, bindings, types may be NULL. User stages run after
 * the canonical pipeline once per partition in array order (a stage named
 * in opts->without is skipped). */
int bbc_compile(const bb_model *recorded, const bbc_options *opts,
                const bbc_bindings *bindings, const bb_type_source *types,
                const bb_stage *const *stages, size_t n_stages, bb_model **out,
                bbc_error *err);

/* `bbc check`: the pre-partition structural checks only (bootstrap
 * composition, inline, validate). A recorded TYPE_NAME no plugin in types
 * describes is tolerated (opts->allow_unknown_types is forced on). */
int bbc_check(const bb_model *recorded, const bbc_options *opts, const bb_type_source *types,
              bbc_error *err);

#endif
