/*
 * plugin.h — the component plugin ABI (DESIGN.md decision 4, ROLES.md).
 *
 * A plugin is a shared object exporting ONE symbol, BB_PLUGIN_ENTRY_SYMBOL,
 * a function returning a static bb_plugin_info: ABI version, struct size and
 * a table of component types. Tools read the table without running anything
 * (bbc learns roles, ports and dependencies from it); bbd instantiates the
 * types the artifact's bindings name.
 *
 * Versioning: abi_major must equal the host's; abi_minor may be older (the
 * host reads only the fields the plugin's struct_size covers). New fields
 * are appended to the END of a struct only, never reordered. The structs a
 * plugin reads in place (values, buffers, type nodes, errors) cannot grow
 * that way: bb_plugin_info.value_layout carries a signature of their layout
 * (BB_PLUGIN_VALUE_LAYOUT) and the host refuses one that differs from its
 * own. ABI 2.0 added it; 1.x plugins are refused (they carry none).
 * ABI 2.1 appended bb_ctx_api.shared_get/shared_put; 2.2 the control
 * plane: bb_ctx_api.send_fill and local_targets,
 * bb_component_type.on_answer (see "control plane" below); 2.3
 * bb_component_type.fold_piece (see "contributions folded piece by piece").
 *
 * Threading: create/destroy/dispatch/bootstrap/snapshot/restore run on the
 * engine thread. A dispatch that returns BB_DISPATCH_LATER keeps its
 * completion handle and may complete it exactly once from ANY thread.
 * Plugins keep all state in their instances (no globals): many engines may
 * run in one process.
 */
#ifndef BB_PLUGIN_H
#define BB_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bb/ir.h"
#include "bb/status.h"
#include "bb/types.h"
#include "bb/value.h"

#define BB_PLUGIN_ABI_MAJOR 2
#define BB_PLUGIN_ABI_MINOR 3
#define BB_PLUGIN_ENTRY_SYMBOL "bb_plugin_entry"
#define BB_STAGE_ENTRY_SYMBOL "bb_stage_entry"
#define BB_PLUGIN_EXPORT __attribute__((visibility("default")))

/* ---- roles ---------------------------------------------------------------- */
typedef enum bb_role {
    BB_ROLE_NONE = 0,
    BB_ROLE_BACKEND = 1,
    BB_ROLE_MODEL = 2,
    BB_ROLE_INDEX = 3,
    BB_ROLE_AGGREGATOR = 4,
    BB_ROLE_CODEC = 5,
    BB_ROLE_DATA_SOURCE = 6,
    BB_ROLE_PEER_SELECTOR = 7,
    BB_ROLE_PROTOCOL = 8
} bb_role;

/* "Backend", "Model", ... ("?" for unknown). */
const char *bb_role_name(bb_role role);
/* Parses "Backend" / "backend" / "BackendRuntime"; BB_ROLE_NONE if unknown. */
bb_role bb_role_parse(const char *name);
/* The opset domain the role's placeholder ops record under
 * ("ai.onnx" for Backend, "ai.bytesandbrains.role.model", ...; Codec ->
 * role.compressor, DataSource -> role.data_loader; NULL for Protocol). */
const char *bb_role_domain(bb_role role);

/* Whether op_type of a role's catalog domain folds a ResponseBatch response
 * by response. ROLES.md Part 3: Aggregator.Contribute "writes one peer's
 * update into an in-progress buffer", so dispatching it once per response
 * (a one-element ResponseBatch, metadata the batch's RequestId) and then
 * once more with an empty ResponseBatch and no metadata has the effect of
 * one dispatch with the whole batch. An engine may hand such an op each
 * response as it lands instead of keeping them all (the op must answer
 * those dispatches at once). */
bool bb_role_op_folds_responses(const char *domain, const char *op_type);

/* ---- declarations (static data in the plugin) ------------------------------ */
typedef struct bb_port_decl {
    const char *name;
    const bb_type_node *type; /* storage type of the port (e.g. &BB_TYPE_TENSOR_F32) */
    bool optional;
    bool variadic;
} bb_port_decl;

typedef struct bb_op_decl {
    const char *op_type;
    const bb_port_decl *inputs;
    uint32_t n_inputs;
    const bb_port_decl *outputs;
    uint32_t n_outputs;
    const char *doc;
} bb_op_decl;

typedef struct bb_opset_decl {
    const char *domain; /* role domain, or the type's own atomic domain */
    int64_t version;
    const bb_op_decl *ops;
    uint32_t n_ops;
} bb_opset_decl;

typedef struct bb_dependency_decl { /* #[depends(role = "slot")] */
    bb_role role;
    const char *slot;
} bb_dependency_decl;

typedef struct bb_config_decl { /* one key of the per-slot JSON config */
    const char *key;
    const char *type;         /* "int", "float", "string", "bool", "array", "object" */
    const char *default_json; /* NULL when required */
    const char *doc;
} bb_config_decl;

/* ---- runtime surfaces the engine gives a component -------------------------- */
struct bb_component_type; /* defined below; named by bb_ctx_api.dependency */
typedef struct bb_ctx bb_ctx;
typedef struct bb_completion bb_completion;

typedef enum bb_dispatch_result {
    BB_DISPATCH_NOW_OK = 0,  /* outputs[] filled (new references) */
    BB_DISPATCH_NOW_ERR = 1, /* err filled */
    BB_DISPATCH_LATER = 2    /* the component kept call->completion */
} bb_dispatch_result;

typedef struct bb_dispatch_call {
    const char *domain;
    const char *op_type;
    uint32_t op_index;          /* index into ops[] of the type's opset declaring `domain`
                                 * (bb_component_type_find_op), resolved at install */
    bb_value *const *inputs;    /* borrowed; NULL entries for absent optional inputs */
    uint32_t n_inputs;
    uint32_t n_outputs;         /* size of the outputs array */
    const bb_node *node;        /* the NodeProto: attributes + metadata (borrowed) */
    bb_completion *completion;  /* keep it only when returning LATER */
} bb_dispatch_call;

typedef struct bb_completion_api {
    uint32_t struct_size;
    /* Complete once, from any thread. status BB_OK: takes the references in
     * outputs[0..n). Otherwise errmsg describes the failure. Returns BB_OK,
     * BB_ESTATE when already completed or the engine dropped the op, or
     * BB_ELIMIT / BB_EBUDGET when the result is over
     * max_completion_result_bytes / the ingress byte budget: then the op
     * fails with that reason (the outputs are released either way). */
    int (*complete)(bb_completion *c, int status, bb_value **outputs, uint32_t n,
                    const char *errmsg);
    /* Give up the handle without completing (the op fails as abandoned). */
    void (*abandon)(bb_completion *c);
} bb_completion_api;

struct bb_completion {
    const bb_completion_api *api;
};

static inline int bb_complete_ok(bb_completion *c, bb_value **outputs, uint32_t n)
{
    return c->api->complete(c, BB_OK, outputs, n, NULL);
}
static inline int bb_complete_err(bb_completion *c, int status, const char *msg)
{
    return c->api->complete(c, status ? status : BB_ERUNTIME, NULL, 0, msg);
}

typedef enum bb_log_level {
    BB_LOG_ERROR = 0,
    BB_LOG_WARN = 1,
    BB_LOG_INFO = 2,
    BB_LOG_DEBUG = 3
} bb_log_level;

/* The host API table: append-only, first field is its size. */
typedef struct bb_ctx_api {
    uint32_t struct_size;
    /* A declared dependency's instance and type (NULL if the slot is not
     * declared by this component or not bound). */
    void *(*dependency)(bb_ctx *ctx, const char *slot, const struct bb_component_type **type);
    /* Run one op of a declared dependency synchronously (e.g. a Backend's
     * Gemm). outputs[] receive new references. */
    int (*call_dependency)(bb_ctx *ctx, const char *slot, const char *op_type,
                           bb_value *const *inputs, uint32_t n_inputs,
                           bb_value **outputs, uint32_t n_outputs, bb_error *err);
    uint64_t (*now_ns)(bb_ctx *ctx);  /* the host's clock, as handed to the engine */
    uint64_t (*rng_u64)(bb_ctx *ctx); /* seeded by the host */
    /* This node's PeerId (a PeerId value; borrowed). */
    const bb_value *(*local_peer)(bb_ctx *ctx);
    /* Known peers from the address book: writes up to cap new PeerId
     * references, returns the total count. */
    size_t (*peers)(bb_ctx *ctx, bb_value **out, size_t cap);
    /* Live connected peers that announced running target: same contract. */
    size_t (*peers_running)(bb_ctx *ctx, const char *target, bb_value **out, size_t cap);
    /* Address list of a peer (AddressVec value, new reference) or NULL. */
    bb_value *(*peer_addresses)(bb_ctx *ctx, const bb_value *peer);
    /* Mint a fresh completion handle (for work a component starts itself). */
    bb_completion *(*open_completion)(bb_ctx *ctx);
    /* Schedule a callback to the component's on_timer after delay_ns. */
    int (*schedule)(bb_ctx *ctx, uint64_t delay_ns, uint64_t token);
    /* Submit work to the host's worker pool: work(arg) runs on a worker
     * thread, then done(arg) on the engine thread. Without a pool, work runs
     * inline. */
    int (*submit_work)(bb_ctx *ctx, void (*work)(void *arg), void (*done)(void *arg), void *arg);
    void (*log)(bb_ctx *ctx, bb_log_level level, const char *msg);
    /* Slot name this component is bound to. */
    const char *(*slot)(bb_ctx *ctx);
    /* Add a peer to the address book, or give it the addresses it lacks
     * (addrs: a Multiaddress or AddressVec value, or NULL; both borrowed).
     * BB_EINVAL for a bad PeerId or multiaddr, BB_EFULL at the caps. A
     * selector with a configured peer list makes its peers reachable. Check
     * struct_size before calling: hosts older than this field lack it. */
    int (*add_peer)(bb_ctx *ctx, const bb_value *peer, const bb_value *addrs, bb_error *err);
    /* ABI 2.1: a read-only value the host shares among the nodes it runs
     * (bbsim runs thousands in one process) — large data a component
     * loads at create and never changes, such as a prepared dataset, keyed
     * by everything that determines it (at most BB_SHARED_KEY_MAX bytes).
     * shared_get returns a new reference to the value under key, or NULL.
     * shared_put offers v (borrowed) under key and returns a new reference
     * to what the key holds afterwards: v itself when the host stored it
     * or keeps no cache (bbd: one node per process), the earlier value when
     * the key was taken. A component uses what put returns, so its code is
     * the same with and without sharing; a shared value is never written
     * again. NULL from put: out of memory or a bad key. Engine thread only;
     * check struct_size before calling. */
    bb_value *(*shared_get)(bb_ctx *ctx, const char *key);
    bb_value *(*shared_put)(bb_ctx *ctx, const char *key, bb_value *v);
    /* ---- ABI 2.2: the control plane (see "control plane" below) ---- */
    /* Send payload[0..len) to op `op` of the component bound at `slot` on
     * node `peer` (a PeerId value; NULL or this node's own PeerId: this
     * node), as a control-plane fill /component/<slot id>/op/<op>. slot
     * NULL: the sender's own slot (the same component on another node).
     * timeout_ns 0: one-way. Otherwise a request: *token (may be NULL)
     * receives its token, and the sender's on_answer is called exactly once
     * for it, with the answer or a failure, within about timeout_ns.
     * BB_OK, or BB_ENOTFOUND (no such slot here, or no address known for
     * peer), BB_ELIMIT (payload over the envelope cap), BB_EFULL (too many
     * requests pending), BB_EUNSUPPORTED (a request from a type without
     * on_answer), BB_EINVAL (bad arguments); err names what. */
    int (*send_fill)(bb_ctx *ctx, const bb_value *peer, const char *slot, const char *op,
                     const uint8_t *payload, size_t len, uint64_t timeout_ns, uint64_t *token,
                     bb_error *err);
    /* The targets (peer classes) this node runs: writes up to cap names
     * (borrowed; they live as long as the engine) and returns the count. */
    size_t (*local_targets)(bb_ctx *ctx, const char **out, size_t cap);
} bb_ctx_api;

#define BB_SHARED_KEY_MAX 4096

/* Does a table of type T at p cover `field`? A host or plugin reads a field
 * appended after its first version only then (struct_size is the first
 * field of every table). */
#define BB_ABI_HAS(T, p, field) \
    ((p)->struct_size >= offsetof(T, field) + sizeof(((T *)0)->field))

/* ctx's host table has the member (a host built against an older header
 * lacks what was appended since). */
#define BB_CTX_HAS(ctx, member) BB_ABI_HAS(bb_ctx_api, (ctx)->api, member)

struct bb_ctx {
    const bb_ctx_api *api;
};

/* ---- a component type --------------------------------------------------------- */
typedef struct bb_create_args {
    uint32_t struct_size;
    const char *slot;              /* slot name in the model */
    const bb_attr *construction;   /* attribute_proto of a concrete slot (.s JSON, .t weights), or NULL */
    const char *config_json;       /* per-slot config from the node config, or NULL */
    uint64_t seed;                 /* deterministic seed from the host */
    bb_ctx *ctx;                   /* for dependencies and logging during create */
} bb_create_args;

/* ---- contributions folded piece by piece (ABI 2.3) ---------------------------------
 * An op that folds responses (bb_role_op_folds_responses) may also take a
 * response whose tensor is still arriving: the engine reads the response's
 * head and tail before its tensor's bytes (a chunk stream previews its
 * tail) and hands the tensor over in pieces as they land, so the node
 * never holds the whole update. One contribution, `stream` (unique among
 * the instance's open ones), is:
 *   BEGIN  request (RequestId), sender (PeerId), rest (a Composite of the
 *          response's other children: num_samples, ...), dtype and shape
 *          of the tensor. BB_EUNSUPPORTED: not this way (the engine then
 *          assembles the response and dispatches it whole, as before); any
 *          other error refuses the response as a dispatch would (the
 *          batch fails with the message).
 *   DATA   elements [offset, offset + count) of the tensor, in order
 *          without gaps, data aligned for dtype (borrowed for the call).
 *          An error refuses the response.
 *   END    every element arrived: the contribution is complete, and
 *          counts as one dispatched response would.
 *   ABORT  the rest will never come (the stream stalled, was refused, or
 *          its batch completed first); what was folded stays folded. The
 *          return value is ignored.
 * Calls come on the engine thread; the component answers at once. */
typedef enum bb_fold_step {
    BB_FOLD_BEGIN = 0,
    BB_FOLD_DATA = 1,
    BB_FOLD_END = 2,
    BB_FOLD_ABORT = 3
} bb_fold_step;

typedef struct bb_fold_piece {
    uint32_t struct_size;
    bb_fold_step step;
    uint64_t stream;
    /* BEGIN (borrowed) */
    const bb_value *request;
    const bb_value *sender;
    const bb_value *rest;
    int32_t dtype;
    uint32_t ndim;
    const int64_t *dims;
    /* DATA */
    uint64_t offset, count;
    const void *data;
} bb_fold_piece;

typedef struct bb_component_type {
    uint32_t struct_size;
    uint32_t abi_major, abi_minor;
    const char *type_name; /* TYPE_NAME, e.g. "cpu::CpuBackend" */
    bb_role role;
    const char *doc;
    const bb_opset_decl *opsets; /* the atomic opset(s) this type dispatches */
    uint32_t n_opsets;
    const bb_dependency_decl *deps;
    uint32_t n_deps;
    const bb_config_decl *config;
    uint32_t n_config;

    /* Required. *out is the new instance. */
    int (*create)(const bb_create_args *args, void **out, bb_error *err);
    /* Required. */
    void (*destroy)(void *inst);
    /* Required. */
    bb_dispatch_result (*dispatch)(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                   bb_value **outputs, bb_error *err);
    /* Optional: component-level Bootstrap (ROLES.md Part 11). May return
     * BB_DISPATCH_LATER and complete `completion` later. */
    bb_dispatch_result (*bootstrap)(void *inst, bb_ctx *ctx, bb_completion *completion,
                                    bb_error *err);
    /* Optional: state snapshot (malloc'd bytes) and restore. */
    int (*snapshot)(void *inst, uint8_t **out, size_t *out_len, bb_error *err);
    int (*restore)(void *inst, const uint8_t *data, size_t len, bb_error *err);
    /* Optional, backends: make a tensor from a wire payload (TensorProto bytes).
     * Takes a reference on payload only if it adopts it. */
    int (*materialize_from_wire)(void *inst, uint64_t type_hash, bb_buffer *payload,
                                 bb_value **out, bb_error *err);
    /* Optional: a timer scheduled through ctx->api->schedule fired. */
    void (*on_timer)(void *inst, bb_ctx *ctx, uint64_t token);
    /* Optional, backends (read only when struct_size covers it): run a
     * whole graph. inputs[i] (borrowed) binds the graph input named
     * input_names[i] (it overrides an initializer of that name); outputs[]
     * receive new references in graph->outputs order (n_outputs at most
     * graph->outputs.n). The backend may cache per graph pointer (plans,
     * converted initializers): graph must stay alive and unchanged for
     * the instance's lifetime. */
    int (*execute_graph)(void *inst, const bb_graph *graph, const char *const *input_names,
                         bb_value *const *inputs, uint32_t n_inputs, bb_value **outputs,
                         uint32_t n_outputs, bb_error *err);
    /* ---- ABI 2.2 ---- */
    /* Optional (required to send requests with ctx->api->send_fill): the
     * outcome of a request this instance sent, on the engine thread.
     * status BB_OK: payload is the answer. Otherwise the request failed:
     * BB_ETIMEOUT (no answer in time), BB_EIO (the peer is unreachable),
     * BB_ERUNTIME (the remote op failed; payload is its message, not
     * NUL-terminated), BB_ENOTFOUND (the remote node has no such component
     * or op). payload is borrowed for the call. */
    void (*on_answer)(void *inst, bb_ctx *ctx, uint64_t token, int status, const uint8_t *payload,
                      size_t len);
    /* ---- ABI 2.3 ---- */
    /* Optional: a contribution folded piece by piece (above). */
    int (*fold_piece)(void *inst, bb_ctx *ctx, const bb_fold_piece *piece, bb_error *err);
} bb_component_type;

/* ---- the control plane (ABI 2.2) -------------------------------------------------
 * Components talk to their counterparts on other nodes (a protocol's
 * messages, a selector's queries) with control-plane fills, addressed
 * /component/<slot id>/op/<op> (the slot id is the program-wide one of the
 * binding triple, the same on every node running the artifact).
 *   - ctx->api->send_fill sends one; the receiving engine dispatches the op
 *     with inputs (payload Bytes, correlation token U64, sender PeerId) and
 *     no node (call->node == NULL).
 *   - A request (send_fill with a timeout) is answered: output 0 of the op
 *     (its bytes when it is a Bytes value, else its wire encoding) goes back
 *     to the sender, whether the op answered NOW or LATER through its
 *     completion; a failure goes back as the error message. The sender's
 *     on_answer receives it. A one-way fill's outputs go nowhere.
 *   - Requests pending when the engine is freed or restored from a snapshot
 *     get no on_answer: a component re-asks after a restore.
 * Everything a peer sends is untrusted: a component bounds and checks every
 * payload before use. */

/* ---- the value layout ------------------------------------------------------------
 * A plugin reads and writes bb_value, bb_tensor_view, bb_buffer,
 * bb_type_node and bb_error in place (and so do the inline functions of
 * bb/value.h it compiles), so their layout is part of the ABI although no
 * struct_size guards it. BB_PLUGIN_VALUE_LAYOUT is a signature of that
 * layout as the compiler including this header sees it: every size, field
 * offset and inline capacity (BB_MAX_DIMS, BB_VALUE_LIST_INLINE, ...) mixed
 * into 64 bits, FNV-1a style, at compile time. A plugin built against a
 * header with another layout has another signature. */
#define BB__LAYOUT_MIX(h, x) (((h) ^ (uint64_t)(x)) * UINT64_C(0x100000001b3))
#define BB__LAYOUT_MIX3(h, a, b, c) BB__LAYOUT_MIX(BB__LAYOUT_MIX(BB__LAYOUT_MIX(h, a), b), c)
#define BB__LAYOUT_VALUE(h)                                                                \
    BB__LAYOUT_MIX3(BB__LAYOUT_MIX3(h, sizeof(bb_value), offsetof(bb_value, refs),         \
                                    offsetof(bb_value, type)),                             \
                    offsetof(bb_value, u), sizeof(atomic_uint), sizeof(((bb_value *)0)->u))
#define BB__LAYOUT_TENSOR(h)                                                               \
    BB__LAYOUT_MIX3(BB__LAYOUT_MIX3(BB__LAYOUT_MIX3(h, sizeof(bb_tensor_view),             \
                                                    offsetof(bb_tensor_view, dtype),       \
                                                    offsetof(bb_tensor_view, ndim)),       \
                                    offsetof(bb_tensor_view, dims), BB_MAX_DIMS,           \
                                    offsetof(bb_tensor_view, data)),                       \
                    offsetof(bb_tensor_view, nbytes), offsetof(bb_tensor_view, buf),       \
                    offsetof(bb_value, u.tensor))
#define BB__LAYOUT_BYTES(h)                                                                \
    BB__LAYOUT_MIX3(h, offsetof(bb_value, u.bytes.data), offsetof(bb_value, u.bytes.len),  \
                    offsetof(bb_value, u.bytes.buf))
#define BB__LAYOUT_LIST(h)                                                                 \
    BB__LAYOUT_MIX3(BB__LAYOUT_MIX(h, offsetof(bb_value, u.list.items)),                   \
                    offsetof(bb_value, u.list.n), offsetof(bb_value, u.list.small),        \
                    BB_VALUE_LIST_INLINE)
#define BB__LAYOUT_BATCH(h)                                                                \
    BB__LAYOUT_MIX3(BB__LAYOUT_MIX3(h, offsetof(bb_value, u.batch.items),                  \
                                    offsetof(bb_value, u.batch.peers),                     \
                                    offsetof(bb_value, u.batch.n)),                        \
                    offsetof(bb_value, u.batch.small), BB_VALUE_BATCH_INLINE,              \
                    sizeof(((bb_value *)0)->u.batch.small))
#define BB__LAYOUT_BUFFER(h)                                                               \
    BB__LAYOUT_MIX3(BB__LAYOUT_MIX3(h, sizeof(bb_buffer), offsetof(bb_buffer, refs),       \
                                    offsetof(bb_buffer, data)),                            \
                    offsetof(bb_buffer, len), offsetof(bb_buffer, free_fn),                \
                    offsetof(bb_buffer, free_ctx))
#define BB__LAYOUT_TYPE_NODE(h)                                                            \
    BB__LAYOUT_MIX3(                                                                       \
        BB__LAYOUT_MIX3(BB__LAYOUT_MIX3(BB__LAYOUT_MIX(h, sizeof(bb_type_node)),           \
                                        offsetof(bb_type_node, name),                      \
                                        offsetof(bb_type_node, denotation),                \
                                        offsetof(bb_type_node, parent)),                   \
                        offsetof(bb_type_node, kind), offsetof(bb_type_node, shape),       \
                        offsetof(bb_type_node, elem_type)),                                \
        offsetof(bb_type_node, seq_elem), offsetof(bb_type_node, opset_version),           \
        offsetof(bb_type_node, wire_hash))
#define BB__LAYOUT_ERROR(h)                                                                \
    BB__LAYOUT_MIX3(h, sizeof(bb_error), offsetof(bb_error, msg), BB_ERROR_MSG_MAX)
#define BB_PLUGIN_VALUE_LAYOUT                                                             \
    BB__LAYOUT_ERROR(BB__LAYOUT_TYPE_NODE(BB__LAYOUT_BUFFER(BB__LAYOUT_BATCH(              \
        BB__LAYOUT_LIST(BB__LAYOUT_BYTES(BB__LAYOUT_TENSOR(BB__LAYOUT_VALUE(               \
            UINT64_C(0xcbf29ce484222325)))))))))

/* ---- the plugin entry --------------------------------------------------------- */
typedef struct bb_plugin_info {
    uint32_t struct_size;
    uint32_t abi_major, abi_minor;
    const char *name;
    const char *version;
    const bb_component_type *const *types;
    uint32_t n_types;
    /* BB_PLUGIN_VALUE_LAYOUT as the plugin was compiled (ABI 2.0). */
    uint64_t value_layout;
} bb_plugin_info;

typedef const bb_plugin_info *(*bb_plugin_entry_fn)(void);

/* Plugins define:  BB_PLUGIN_EXPORT const bb_plugin_info *bb_plugin_entry(void); */

/* ---- user compiler stages (bbc --stage PLUGIN.so) -------------------------------- */
typedef struct bb_stage {
    uint32_t struct_size;
    const char *name;
    /* Runs once per emitted partition, on the partition's model. */
    int (*run)(void *state, bb_model *partition, bb_error *err);
    void *state;
} bb_stage;

typedef struct bb_stage_info {
    uint32_t struct_size;
    uint32_t abi_major, abi_minor;
    const bb_stage *const *stages;
    uint32_t n_stages;
} bb_stage_info;

typedef const bb_stage_info *(*bb_stage_entry_fn)(void);

/* Helpers over declarations (implemented in libbbir). */
const bb_op_decl *bb_component_type_find_op(const bb_component_type *t, const char *domain,
                                            const char *op_type, uint32_t *op_index);

#endif
