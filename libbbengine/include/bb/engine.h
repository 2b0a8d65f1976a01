/*
 * engine.h — the BytesAndBrains runtime engine (ENGINE.md): a sans-IO,
 * single-threaded dataflow executor for compiled artifacts.
 *
 * The engine never reads a clock or touches a socket. The host
 *   1. creates it (bb_engine_new) with an identity, addresses, a seed and caps,
 *   2. installs targets of a compiled ModelProto (bb_engine_install), which
 *      resolves every op's dispatch, every value name to a dense site index
 *      and instantiates the bound components through the plugin ABI,
 *   3. pushes work (envelopes, invocations, events, lifecycle phases,
 *      bootstrap requests) and polls: bb_engine_poll(now_ns) runs one cycle
 *      (ENGINE.md Part 7) and returns the EngineSteps it produced
 *      (SendEnvelope, AppEvent, OpFailed, PeerDown, ...), which the host acts
 *      on. bb_engine_next_deadline tells when to poll again.
 *
 * Threading: everything runs on the thread that polls ("engine thread")
 * except the functions marked THREAD-SAFE, which only push onto the bounded
 * ingress queue (the single thread-safe seam) and then call the wake
 * callback so the host's loop polls again (bbd maps it to uv_async_send).
 * Completion handles (bb/plugin.h) may be completed from any thread.
 *
 * No global state: many engines may live in one process.
 */
#ifndef BB_ENGINE_H
#define BB_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bb/ir.h"
#include "bb/peerid.h"
#include "bb/plugin.h"
#include "bb/status.h"
#include "bb/type_source.h"
#include "bb/value.h"

typedef struct bb_engine bb_engine;
/* Execution id: every entry point starts a fresh one (ENGINE.md Part 5). */
typedef uint64_t bb_exec_id;

/* ---- configuration ----------------------------------------------------------- */

/* Capacities and per-item caps (ENGINE.md Part 16). 0 means "unbounded" only
 * where noted. */
typedef struct bb_engine_caps {
    size_t bus_capacity;                /* 1024; drop-oldest */
    size_t ingress_capacity;            /* bus_capacity * 4 events; drop newest */
    size_t ingress_byte_budget;         /* 256 MiB (edge 8 MiB) in-flight external bytes */
    size_t max_app_event_bytes;         /* 1 MiB (edge 64 KiB) */
    size_t max_invoke_inputs;           /* 100 (edge 16) */
    size_t max_invoke_bytes;            /* 10 MiB (edge 256 KiB) */
    size_t max_completion_result_bytes; /* 4 MiB (edge 64 KiB); a completion over it (or over
                                         * the byte budget, which results are charged to) is
                                         * refused with BB_ELIMIT (BB_EBUDGET) and the handle
                                         * stays pending */
    size_t max_pending_async;           /* 0 = unbounded */
    size_t max_envelope_bytes;          /* 64 MiB (edge 1 MiB) one inbound envelope */
    size_t max_envelope_fills;          /* 4096 (edge 256) */
    size_t max_envelope_addresses;      /* 32 (edge 8) per address list */
    size_t address_book_max_peers;      /* 65536 (edge 1024) */
    size_t address_book_max_addrs;      /* 16 (edge 4) per peer */
    size_t dedup_window;                /* 8192 (edge 1024) */
    size_t inbound_requests_max;        /* 65536 (edge 1024) open RecvReq ids */
    size_t record_ring;                 /* 1024 (edge 64) Record entries kept */
    size_t completion_quarantine;       /* 4096: completed handles kept before reuse */
    uint32_t peer_failure_threshold;    /* 5 consecutive failures -> PeerDown */
    uint64_t backoff_base_ns;           /* 10 ms */
    uint64_t backoff_max_ns;            /* 60 s */
    /* Chunk streams (an envelope larger than config.stream_chunk_bytes goes
     * in pieces; see there). Inbound, a stream's whole envelope is charged
     * to ingress_byte_budget when it is admitted and is at most
     * max_envelope_bytes; one that does not fit the budget yet waits. */
    size_t max_streams_in;              /* 64 (edge 4): admitted and waiting, all peers */
    uint32_t stream_window;             /* 4: chunks a sender has in flight per stream */
    uint64_t stream_stall_ns;           /* 60 s: a stream that moves no byte for this long
                                         * is given up (both ends) */
} bb_engine_caps;

/* ENGINE.md Part 16 defaults. */
void bb_engine_caps_default(bb_engine_caps *caps);
/* The "edge" preset for 8 MiB-class devices. */
void bb_engine_caps_edge(bb_engine_caps *caps);

/* A binary multiaddr (borrowed). */
typedef struct bb_engine_addr {
    const uint8_t *data;
    size_t len;
} bb_engine_addr;

typedef struct bb_engine_config {
    bb_peerid peer;                     /* this node's PeerId */
    const bb_engine_addr *addrs;        /* local addresses (copied) */
    size_t n_addrs;
    uint64_t seed;                      /* every random number derives from it */
    bb_engine_caps caps;                /* fill with bb_engine_caps_default/_edge */
    size_t cycle_op_budget;             /* ops per poll; 0 = unlimited */
    bool emit_op_steps;                 /* also emit OpCompleted/AsyncSuspended steps */
    /* Optional host worker pool for ctx->submit_work: run work(arg) on a
     * worker, then call bb_engine_work_done(engine, token) from any thread.
     * Without it work runs inline. */
    int (*submit_work)(void *ud, void (*work)(void *arg), void *arg, uint64_t token);
    void *submit_work_ud;
    /* Optional sink for component ctx->log (engine thread). */
    void (*log)(void *ud, bb_log_level level, const char *slot, const char *msg);
    void *log_ud;
    /* Hand large payloads to the host without copying them into the
     * envelope: a SendEnvelope whose values hold a payload (tensor data,
     * bytes) of at least gather_min_bytes comes as u.send.gather instead of
     * u.send.bytes (for a host that writes with a scatter list). Off by
     * default; gather_min_bytes 0 means 64 KiB. */
    bool send_gather;
    size_t gather_min_bytes;
    /* Optional read-only cache shared by the engines of one host, behind
     * ctx->shared_get / shared_put (bb/plugin.h): get returns a new
     * reference or NULL; put stores a reference to v (borrowed) unless key
     * is taken and returns a new reference to what key holds, or NULL when
     * out of memory. Without them get answers NULL and put hands v back.
     * Called on the engine thread with keys the engine checked (non-empty,
     * at most BB_SHARED_KEY_MAX bytes). */
    bb_value *(*shared_get)(void *ud, const char *key);
    bb_value *(*shared_put)(void *ud, const char *key, bb_value *v);
    void *shared_ud;
    /* Envelopes larger than this (0: none) go to a peer as a chunk stream:
     * pieces of this size, at most caps.stream_window of them in flight,
     * each acknowledged; after a reconnect (bb_engine_peer_connected) the
     * stream goes on from the bytes the receiver acknowledged. So no frame
     * of the transport is larger than this plus a small head, however
     * large a tensor; a host sets it below its frame limit. */
    size_t stream_chunk_bytes;
    /* Install uses the caller's model instead of a clone of it: the host
     * keeps it alive and unchanged until bb_engine_free (bbsim's thousands
     * of engines share one artifact; a clone of the federated example is
     * ~45 KB of every node). */
    bool share_model;
} bb_engine_config;

/* Zeroed config with default caps. */
void bb_engine_config_init(bb_engine_config *cfg);

/* Returns new (cfg is copied), or NULL with err filled. */
bb_engine *bb_engine_new(const bb_engine_config *cfg, bb_error *err);
/* Destroys components (after their pending work is dropped) and frees
 * everything. Completion handles must not be used afterwards. */
void bb_engine_free(bb_engine *e);

/* ---- install ------------------------------------------------------------------ */

/* Where component types and per-slot configs come from: the types through
 * the one type-source interface (bb/type_source.h: bbd's is its plugin
 * loader, tests hand in arrays), the per-slot JSON configs through
 * slot_config (ud is its context; may be NULL: no slot has a config). */
typedef struct bb_engine_registry {
    bb_type_source types;
    const char *(*slot_config)(void *ud, const char *slot);
    void *ud;
} bb_engine_registry;

/* Install error variants (ENGINE.md Part 4.4, IR_AND_DSL.md Parts 3 & 7). The
 * message of a failed install starts with the variant name. */
typedef enum bb_install_error {
    BB_INSTALL_OK = 0,
    BB_INSTALL_EMPTY_TARGETS,
    BB_INSTALL_NOT_COMPILED,            /* no ai.bytesandbrains.compiled = v1 passport */
    BB_INSTALL_UNKNOWN_TARGET,
    BB_INSTALL_AMBIGUOUS_TARGET,        /* several <target>#<hash> functions */
    BB_INSTALL_MALFORMED_BINDING,
    BB_INSTALL_SLOT_BINDING_CONFLICT,
    BB_INSTALL_UNBOUND_GENERIC_SLOT,
    BB_INSTALL_UNREGISTERED_CONCRETE_TYPE,
    BB_INSTALL_ROLE_MISMATCH,
    BB_INSTALL_UNBOUND_DEPENDENCY,
    BB_INSTALL_FUNCTION_DEFINITION_CONFLICT,
    BB_INSTALL_RECURSIVE_FUNCTION_CALL,
    BB_INSTALL_INCOMPATIBLE_RUNTIME,
    BB_INSTALL_MALFORMED_GRAPH,         /* bad value names, attributes, limits */
    BB_INSTALL_COMPONENT_CREATE_FAILED,
    BB_INSTALL_ALREADY_INSTALLED
} bb_install_error;

const char *bb_install_error_name(bb_install_error k);

/* Install targets[0..n) of the compiled model (borrowed: the engine keeps a
 * clone, or the model itself with config.share_model). Targets, their
 * bootstraps and bindings are the artifact view's (bb/artifact.h): a name
 * is a target's exact name, else the one "<name>#<hash>"; a binding value
 * that does not parse is MalformedBinding.
 * On failure returns BB_EINSTALL (or BB_ENOMEM) with err naming the culprit
 * and bb_engine_install_error() telling the variant; nothing is installed. */
int bb_engine_install(bb_engine *e, const bb_model *model, const char *const *targets,
                      size_t n_targets, const bb_engine_registry *reg, bb_error *err);
bb_install_error bb_engine_install_error(const bb_engine *e);

/* ---- steps --------------------------------------------------------------------- */

typedef enum bb_step_kind {
    BB_STEP_SEND_ENVELOPE = 1,
    BB_STEP_APP_EVENT,
    BB_STEP_PEER_RESOLVE_FAILED,
    BB_STEP_OP_FAILED,
    BB_STEP_PEER_DOWN,
    BB_STEP_PEER_UP,
    BB_STEP_BOOTSTRAP_COMPLETE,
    BB_STEP_BOOTSTRAP_FAILED,
    BB_STEP_WAITING_ON_BOOTSTRAP,
    BB_STEP_INFRA_EVENT,
    BB_STEP_TELEMETRY,
    BB_STEP_CYCLE_BUDGET_EXCEEDED,
    BB_STEP_OP_COMPLETED,    /* only with emit_op_steps: an op wrote a value */
    BB_STEP_ASYNC_SUSPENDED, /* only with emit_op_steps */
    BB_STEP_OP_TRIGGER,      /* only with emit_op_steps: an op fired, writing only Triggers */
    BB_STEP_OP_SINK          /* only with emit_op_steps: an op fired, writing nothing */
} bb_step_kind;

const char *bb_step_kind_name(bb_step_kind k);

typedef enum bb_infra_kind {
    BB_INFRA_WIRE_RECEIVE_ERROR = 1, /* sub: bb_wire_rx_error */
    BB_INFRA_APP_INGRESS_ERROR,      /* sub: bb_app_ingress_error */
    BB_INFRA_INGRESS_DROPPED,        /* count: events dropped since last report */
    BB_INFRA_BUS_DROPPED,            /* count */
    BB_INFRA_ENVELOPE_MALFORMED,     /* the envelope bytes did not decode */
    BB_INFRA_UNROUTABLE_FILL,        /* unknown /site or /component, bad suffix */
    BB_INFRA_UNKNOWN_CORRELATION,    /* response for no open request */
    BB_INFRA_QUORUM_FAILED,          /* a batched request ended below quorum */
    BB_INFRA_BOOTSTRAP_REJECTED,     /* a queued bootstrap request was refused */
    BB_INFRA_STREAM_FAILED           /* a chunk stream was refused or given up; count: its size */
} bb_infra_kind;

typedef enum bb_wire_rx_error {
    BB_WIRE_RX_ALLOCATION_FAILED = 1,
    BB_WIRE_RX_BUDGET_EXCEEDED,
    BB_WIRE_RX_BACKEND_MATERIALIZE_FAILED,
    BB_WIRE_RX_TYPE_MISMATCH,
    BB_WIRE_RX_UNKNOWN_TYPE_HASH,
    BB_WIRE_RX_DECODE_FAILED
} bb_wire_rx_error;

typedef enum bb_app_ingress_error {
    BB_APP_INGRESS_PER_ITEM_CAP_EXCEEDED = 1,
    BB_APP_INGRESS_BUDGET_EXCEEDED,
    BB_APP_INGRESS_TOO_MANY_INPUTS,
    BB_APP_INGRESS_ALLOCATION_FAILED,
    BB_APP_INGRESS_DECODE_FAILED
} bb_app_ingress_error;

const char *bb_infra_kind_name(bb_infra_kind k);
const char *bb_wire_rx_error_name(bb_wire_rx_error k); /* "DecodeFailed", ... */

/* An outbound WireEnvelope in pieces (config.send_gather): the envelope is
 * iov[0] .. iov[n_iov-1] end to end, len bytes in all. The pieces are the
 * envelope's own small parts and the large payloads of the values sent,
 * which the gather keeps alive (values are immutable once written) until
 * bb_send_gather_free. Nothing in it is engine state: it may be written and
 * freed on any thread, after the engine is gone too. */
typedef struct bb_send_iov {
    const uint8_t *data;
    size_t len;
} bb_send_iov;
typedef struct bb_send_gather {
    const bb_send_iov *iov;
    size_t n_iov;
    size_t len;
    bb_value **held;   /* private: the values whose memory iov points into */
    size_t n_held;
} bb_send_gather;
void bb_send_gather_free(bb_send_gather *g);

/* One step. Strings and values are owned by the bb_steps buffer and valid
 * until the next poll (or bb_steps_clear); copy or take what you keep. */
typedef struct bb_step {
    bb_step_kind kind;
    bb_exec_id exec_id; /* 0 when not tied to an execution */
    union {
        struct {                 /* SEND_ENVELOPE */
            bb_peerid peer;      /* destination */
            bb_engine_addr *addrs; /* resolved address list (also in the envelope) */
            size_t n_addrs;
            uint8_t *bytes;      /* WireEnvelope; malloc'd: set to NULL to take it */
            size_t len;          /* its size (also with gather) */
            /* config.send_gather: an envelope with a large payload comes
             * as a gather list instead (bytes NULL); set to NULL to take
             * it, release it with bb_send_gather_free. */
            bb_send_gather *gather;
            /* the peer's backoff when the envelope was made: a host holds
             * back sends before this time (0: none) */
            uint64_t retry_at_ns;
        } send;
        struct {                 /* APP_EVENT */
            const char *target;  /* module (install target) */
            const char *topic;   /* output port name, or AppEmit/AppNotify name */
            bb_value *value;     /* set to NULL to take the reference */
        } app;
        struct {                 /* PEER_RESOLVE_FAILED */
            bool has_peer;
            bb_peerid peer;
            const char *node;
        } resolve;
        struct {                 /* OP_FAILED */
            const char *node, *op_type, *domain, *message;
        } op_failed;
        struct {                 /* PEER_DOWN, PEER_UP */
            bb_peerid peer;
        } peer;
        struct {                 /* BOOTSTRAP_*, WAITING_ON_BOOTSTRAP */
            const char *target;  /* module target, or NULL for a slot */
            const char *slot;    /* component slot, or NULL */
            const char *message; /* BOOTSTRAP_FAILED */
        } bootstrap;
        struct {                 /* INFRA_EVENT */
            bb_infra_kind kind;
            int sub;             /* bb_wire_rx_error / bb_app_ingress_error */
            uint64_t count;
            bool has_peer;
            bb_peerid peer;
            const char *detail;
        } infra;
        struct {                 /* TELEMETRY */
            const char *name;    /* IncrMetric / Record name */
            int64_t delta;       /* IncrMetric */
            uint64_t value;      /* counter value after the increment */
            bb_value *record;    /* Record: the recorded value */
        } telemetry;
        struct {                 /* OP_COMPLETED, ASYNC_SUSPENDED, OP_TRIGGER, OP_SINK */
            const char *node;
            uint64_t cmd_id;
        } op;
        struct {                 /* CYCLE_BUDGET_EXCEEDED */
            uint64_t ops;
        } budget;
    } u;
} bb_step;

typedef struct bb_steps {
    bb_step *v;
    size_t n, cap;
    void *owned; /* private: strings and address lists owned by the buffer */
} bb_steps;

void bb_steps_init(bb_steps *s);
/* Releases every payload still owned (envelope bytes, values, strings). */
void bb_steps_clear(bb_steps *s);
void bb_steps_free(bb_steps *s);

/* Bus event kinds (the `kind` attribute of EventSource ops; ENGINE.md 13.1). */
typedef enum bb_event_kind {
    BB_EVENT_OP_FAILURE = 1,
    BB_EVENT_PEER_RESOLVE_FAILURE = 2,
    BB_EVENT_WIRE_RECEIVE_ERROR = 3,
    BB_EVENT_APP_INGRESS_ERROR = 4, /* reserved: reported as InfraEvent steps */
    BB_EVENT_PEER_DOWN = 5,
    BB_EVENT_PEER_UP = 6,
    BB_EVENT_WIRE_RESPONSE_LANDED = 7,
    BB_EVENT_BOOTSTRAP_COMPLETE = 8,
    BB_EVENT_QUORUM_FAILED = 9
} bb_event_kind;

/* ---- driving ---------------------------------------------------------------------- */

/* One poll cycle at host time now_ns (a clock that goes backwards is held
 * at its last value). Clears *steps, then fills it with the steps produced
 * since the previous poll: the engine swaps buffers with the caller, so a
 * host that reuses one bb_steps allocates nothing in steady state.
 * Returns BB_OK (steps may be empty). */
int bb_engine_poll(bb_engine *e, uint64_t now_ns, bb_steps *steps);
/* When to poll next: 0 = work is pending now (frontier, ingress, bus, op
 * budget hit), UINT64_MAX = nothing scheduled, else the earliest timer. */
uint64_t bb_engine_next_deadline(const bb_engine *e);

/* The wake callback (any thread) runs after a successful ingress push,
 * coalesced until the next poll drains the queue. */
void bb_engine_set_wake(bb_engine *e, void (*wake)(void *ud), void *ud);

/* ---- entry points (all THREAD-SAFE) ------------------------------------------------ */

/* A named input: either a value (borrowed, a reference is taken) or wire
 * bytes (copied, decoded by the input's declared type). */
typedef struct bb_engine_input {
    const char *name;
    const bb_value *value;
    const uint8_t *bytes;
    size_t len;
} bb_engine_input;

/* Deliver inbound WireEnvelope bytes (copied) from src_peer, with the
 * transport-observed address of the sender (may be NULL). Returns BB_EFULL
 * when the ingress is full (counted as ingress.dropped), BB_ELIMIT when the
 * envelope exceeds max_envelope_bytes, BB_EBUDGET when the byte budget is
 * spent. Decoding happens in the next poll. */
int bb_engine_deliver_envelope(bb_engine *e, const bb_peerid *src_peer,
                               const bb_engine_addr *observed, const uint8_t *bytes,
                               size_t len, bb_error *err);
/* The same, taking bytes (malloc'd) instead of copying them: freed by the
 * engine on every path, errors included. For a host whose transport already
 * holds a frame in a buffer of its own (large envelopes: no second copy). */
int bb_engine_deliver_envelope_owned(bb_engine *e, const bb_peerid *src_peer,
                                     const bb_engine_addr *observed, uint8_t *bytes, size_t len,
                                     bb_error *err);
/* Invoke target with named inputs as ONE execution; *exec_id (may be NULL)
 * gets its id. Besides the consumers of the given inputs, the target's
 * zero-input ops (component ops such as Model.Params, calls) run at the start
 * of an invocation. Errors: BB_ENOTFOUND (unknown target / input), BB_ELIMIT
 * (too many inputs, oversize), BB_EBUDGET, BB_EDECODE, BB_ETYPE, BB_EFULL;
 * each also reported as an AppIngressError InfraEvent on the next poll. */
int bb_engine_invoke(bb_engine *e, const char *target, const bb_engine_input *inputs,
                     size_t n_inputs, bb_exec_id *exec_id, bb_error *err);
/* Push one value into target's named input (a fresh execution; only the
 * input's consumers run). */
int bb_engine_deliver_event(bb_engine *e, const char *target, const char *input,
                            const bb_engine_input *value, bb_exec_id *exec_id, bb_error *err);
/* Fire every LifecyclePhase op of phase (Shutdown = 1, Snapshot = 2). */
int bb_engine_fire_lifecycle(bb_engine *e, int64_t phase, bb_error *err);
/* Release a worker-pool job submitted through config.submit_work. */
int bb_engine_work_done(bb_engine *e, uint64_t token);

/* ---- bootstrap (ENGINE.md 6.8) --------------------------------------------------------- */

typedef enum bb_bootstrap_target_kind {
    BB_BOOTSTRAP_ALL = 0,
    BB_BOOTSTRAP_MODULE_NAMES,
    BB_BOOTSTRAP_MODULE_REQUESTS,
    BB_BOOTSTRAP_SLOTS,
    BB_BOOTSTRAP_COMPONENTS, /* SLOTS of every component that has a bootstrap */
    BB_BOOTSTRAP_FRESH       /* a fresh start: COMPONENTS, then ALL */
} bb_bootstrap_target_kind;

typedef struct bb_bootstrap_request {
    const char *target;
    const bb_engine_input *inputs;
    size_t n_inputs;
} bb_bootstrap_request;

typedef struct bb_bootstrap_target {
    bb_bootstrap_target_kind kind;
    const char *const *names;               /* MODULE_NAMES targets / SLOTS slots */
    size_t n_names;
    const bb_bootstrap_request *requests;   /* MODULE_REQUESTS */
    size_t n_requests;
} bb_bootstrap_target;

typedef enum bb_bootstrap_status {
    BB_BOOTSTRAP_IDLE = 0,
    BB_BOOTSTRAP_RUNNING,
    BB_BOOTSTRAP_WAITING_FOR_INPUT
} bb_bootstrap_status;

/* Validate (unknown target/slot/input, missing input, duplicate batch entry
 * -> BB_ENOTFOUND / BB_EINVAL, nothing staged) and stage a bootstrap run;
 * the next polls drive it and emit BootstrapComplete per target (or
 * BootstrapFailed when an op of its body, or the component's bootstrap,
 * fails). THREAD-SAFE.
 * ALL walks the targets' module bootstraps in install order, one at a time,
 * skipping those already done; it stops at one whose bootstrap function takes
 * inputs until the host stages them with MODULE_REQUESTS (status
 * WAITING_FOR_INPUT meanwhile), and fires every Pulse op once the walk ends.
 * COMPONENTS fires every component bootstrap, dependencies first (a
 * protocol joining its network, a selector announcing itself). FRESH is
 * what a host runs on a fresh start (not after a restore, whose state
 * already holds what the bootstraps did): COMPONENTS, then ALL. */
int bb_engine_run_bootstrap(bb_engine *e, const bb_bootstrap_target *t, bb_error *err);
/* RUNNING: a bootstrap is in flight; WAITING_FOR_INPUT: staged requests (or
 * an ALL walk) still wait; IDLE otherwise. Engine thread. */
bb_bootstrap_status bb_engine_bootstrap_status(const bb_engine *e);

/* ---- address book (engine thread) ---------------------------------------------------- */

/* Add a peer or append addresses it does not have yet (BB_EFULL at caps). */
int bb_engine_add_peer(bb_engine *e, const bb_peerid *peer, const bb_engine_addr *addrs,
                       size_t n, bb_error *err);
int bb_engine_remove_peer(bb_engine *e, const bb_peerid *peer);
/* The transport connected to peer, which announced it runs targets. While
 * a peer is reported connected, only the first envelope to it on the
 * connection (and the first after a failed send, bb_engine_report_send, or
 * after its addresses in the book changed) carries this node's listen
 * addresses and the peer's; a host that reports no connections gets them
 * on every envelope. */
int bb_engine_peer_connected(bb_engine *e, const bb_peerid *peer, const char *const *targets,
                             size_t n_targets, bb_error *err);
void bb_engine_peer_disconnected(bb_engine *e, const bb_peerid *peer);
/* Transport feedback: a send to peer failed / succeeded (drives the
 * backoff table and the peer-health governor: PeerDown / PeerUp steps).
 * True when it queued such a step (the next poll returns it). */
bool bb_engine_report_send(bb_engine *e, const bb_peerid *peer, bool ok);
/* Addresses of peer: *out borrows engine memory valid until the next
 * address-book change. Returns the count (0 if unknown). */
size_t bb_engine_peer_addrs(const bb_engine *e, const bb_peerid *peer,
                            const bb_engine_addr **out);
size_t bb_engine_peer_count(const bb_engine *e);
/* One address-book entry: addresses, connection and health (for hosts
 * that report peers, or hold sends back while a peer backs off). */
typedef struct bb_engine_peer_info {
    bb_peerid peer;
    const bb_engine_addr *addrs; /* borrowed until the next address-book change */
    size_t n_addrs;
    bool connected;              /* the transport reported it connected */
    bool down;                   /* the governor emitted PeerDown (until PeerUp) */
    bool blocked;
    uint32_t failures;           /* consecutive failed sends */
    uint32_t attempts;           /* backoff attempts since the last success */
    uint64_t next_retry_ns;      /* sends before this time are in cooldown (0: none) */
    uint64_t rtt_ns;             /* last measured round trip (0: unknown) */
    bool allowed;                /* on the allowlist */
} bb_engine_peer_info;
/* Call fn for every known peer (table order); fn must not change the
 * address book. */
void bb_engine_peer_foreach(const bb_engine *e,
                            void (*fn)(void *ud, const bb_engine_peer_info *p), void *ud);
/* The entry of peer; false when it is unknown. */
bool bb_engine_peer_info_get(const bb_engine *e, const bb_peerid *peer,
                             bb_engine_peer_info *out);
/* Peer-health policy: blocklist / allowlist (an empty allowlist allows all).
 * Both are kept in the snapshot, and apply to the RX gates, the TX gates
 * and every send (a send to a peer they refuse makes no envelope and is
 * counted as gate.send_refused). BB_EFULL when the address book is full. */
int bb_engine_block_peer(bb_engine *e, const bb_peerid *peer, bool blocked);
int bb_engine_allow_peer(bb_engine *e, const bb_peerid *peer, bool allowed);
/* The policy's verdict on peer: NULL when it may talk to this node, else
 * the gates' reason ("blocklisted", "not_allowlisted"). For hosts that
 * refuse a peer before the engine sees it (a transport handshake). */
const char *bb_engine_peer_access(const bb_engine *e, const bb_peerid *peer);

/* ---- snapshot / restore ------------------------------------------------------------------ */

/* Serialize the whole node state (components, executions, frontier, slots,
 * pending work, timers, framework tables, ingress contents) into *out
 * (malloc'd). The engine must be between polls. */
int bb_engine_snapshot(bb_engine *e, uint8_t **out, size_t *out_len, bb_error *err);
/* Restore into an engine that installed the same model and targets and has
 * not run yet. Suspended async ops stay parked (their handles are gone:
 * the host re-triggers the work, ENGINE.md 9.4). Bumps the incarnation. */
int bb_engine_restore(bb_engine *e, const uint8_t *data, size_t len, bb_error *err);
uint64_t bb_engine_incarnation(const bb_engine *e);

/* ---- introspection ------------------------------------------------------------------------- */

/* Counter by name ("frontier.depth_peak", "ingress.dropped", "bus.dropped",
 * "pending_async.count", "ops.invoked", "exec.live", "ingress.bytes_in_flight",
 * "timers.count", "frames.pooled_extra" (pooled frames beyond one per graph:
 * 0 whenever no execution is live), or any IncrMetric name). 0 if unknown. */
uint64_t bb_engine_counter(const bb_engine *e, const char *name);
/* Iterate counters: returns false past the end. */
bool bb_engine_counter_at(const bb_engine *e, size_t i, const char **name, uint64_t *value);
size_t bb_engine_pending_async_count(const bb_engine *e);
size_t bb_engine_live_executions(const bb_engine *e);
/* Live slot-table entries (values held across all executions). */
size_t bb_engine_live_slots(const bb_engine *e);
const bb_peerid *bb_engine_peer_id(const bb_engine *e);
size_t bb_engine_target_count(const bb_engine *e);
const char *bb_engine_target_at(const bb_engine *e, size_t i);
/* Records kept by the Record op (newest last): name and value borrowed. */
size_t bb_engine_record_count(const bb_engine *e);
bool bb_engine_record_at(const bb_engine *e, size_t i, const char **name, const bb_value **v);

/* ---- tracing ---------------------------------------------------------------------------------- */

typedef enum bb_trace_cat {
    BB_TRACE_POLL = 1u << 0,      /* node.poll + phases */
    BB_TRACE_INVOKE = 1u << 1,    /* every op invocation */
    BB_TRACE_INBOUND = 1u << 2,   /* deliver_inbound + deliver_fill */
    BB_TRACE_EVENT = 1u << 3,     /* deliver_event / invoke */
    BB_TRACE_WIRE = 1u << 4,      /* outbound envelopes */
    BB_TRACE_GATE = 1u << 5,      /* gate allow / deny */
    BB_TRACE_BOOTSTRAP = 1u << 6,
    BB_TRACE_ALL = 0x7fu
} bb_trace_cat;

typedef struct bb_trace_event {
    bb_trace_cat cat;
    const char *name;      /* span name: "node.poll", "invoke", "deliver_fill", ... */
    bb_exec_id exec_id;
    uint32_t op_ref;       /* UINT32_MAX when not an op */
    const char *op_type, *domain, *node;
    const char *detail;    /* free text (phase name, suffix, reason) */
    uint64_t value;        /* cycle_seq, fill count, ... */
    const char *phase;     /* poll phase it happened in ("engine.drain_frontier"), NULL outside a poll */
    const char *concrete_type; /* component ops: the bound TYPE_NAME, else NULL */
    const char *instance;  /* component ops: the slot (the instance), else NULL */
    uint64_t duration_ns;  /* "invoke": the op's duration by the trace clock (0 without one) */
} bb_trace_event;

typedef void (*bb_trace_fn)(void *ud, const bb_trace_event *ev);
void bb_engine_set_trace(bb_engine *e, bb_trace_fn fn, void *ud);
/* Optional host clock for span durations (read only while INVOKE tracing is
 * on: the engine itself never reads a clock). */
void bb_engine_set_trace_clock(bb_engine *e, uint64_t (*clock)(void *ud), void *ud);
/* Filter directive: comma-separated categories ("poll,invoke,inbound,event,
 * wire,gate,bootstrap", "all", "none", "off"). Changeable at any time on the
 * engine thread; when off each trace point costs one branch. */
int bb_engine_set_trace_filter(bb_engine *e, const char *directive, bb_error *err);
unsigned bb_engine_trace_mask(const bb_engine *e);

#endif
