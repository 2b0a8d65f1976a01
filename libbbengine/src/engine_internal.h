/*
 * engine_internal.h — the engine's private data model, shared by the files
 * of libbbengine/src/ (one responsibility per file; see each file's header).
 *
 * Shape (ENGINE.md Parts 2-5, resolved to dense indexes at install):
 *   graphs[]  one per installed FunctionProto; value names -> local sites
 *   ops[]     one per NodeProto, global OpRef; dispatch pre-stamped
 *   exec      a frame = (ExecId, graph): slots[] indexed by local site, so
 *             the slot table keyed by (site, ExecId) is one array index
 *   frontier  FIFO ring of (OpRef, frame)
 * The hot path (frontier pop -> input gather -> dispatch -> output write ->
 * consumer readiness -> push) does no hashing and no string work.
 */
#ifndef BBE__ENGINE_INTERNAL_H
#define BBE__ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bb/arena.h"
#include "bb/engine.h"
#include "bb/meta.h"
#include "bb/multiaddr.h"

#define BBE__NONE UINT32_MAX
#define BBE__LIKELY(x) __builtin_expect(!!(x), 1)
#define BBE__UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- invariants ------------------------------------------------------------ */
/* BBE__ASSERT(cond): an invariant of the engine's own data (ring bounds,
 * reference counts, site and op indexes) — a programming error when false,
 * never a property of input: everything from a host, a plugin, a socket or
 * a snapshot is checked where it enters and answered with a status. Built
 * with BBE_CHECKED (the engine the unit tests link, and every SAN=1 build;
 * see the Makefile) a failure prints "file:line: engine invariant failed:
 * cond" and aborts. Without it the check compiles to nothing (cond is not
 * evaluated), so the release message path pays nothing. */
#ifdef BBE_CHECKED
#define BBE__ASSERT(cond) \
    (BBE__LIKELY(cond) ? (void)0 : bbe__assert_fail(__FILE__, __LINE__, #cond))
#else
#define BBE__ASSERT(cond) ((void)sizeof(cond))
#endif
void bbe__assert_fail(const char *file, int line, const char *cond)
    __attribute__((noreturn, cold));

/* ---- growable malloc arrays --------------------------------------------- */
#define BBE__ARR(T)     \
    struct {           \
        T *v;          \
        size_t n, cap; \
    }
/* Make room for `need` elements; 0 or BB_ENOMEM. */
int bbe__arr_reserve(void *arr, size_t elem, size_t need);
/* n zeroed bytes (malloc'd; at least 1): calloc for the per-message path,
 * where glibc's calloc, which bypasses the per-thread cache, costs ~10x. */
void *bbe__zalloc(size_t n);
#define BBE__ARR_PUSH(a, x)                                                         \
    (((a)->n < (a)->cap || bbe__arr_reserve((a), sizeof *(a)->v, (a)->n + 1) == 0) \
         ? ((a)->v[(a)->n++] = (x), 0)                                             \
         : BB_ENOMEM)
#define BBE__ARR_FREE(a) (free((a)->v), (a)->v = NULL, (a)->n = (a)->cap = 0)

/* ---- u64 -> u64 open-addressing map (map.c) ------------------------------ */
/* One slot: key, value and state together, so a probe reads one cache
 * line (three parallel arrays cost three per probe: the dedup window's map
 * is large and probed at random every envelope). */
typedef struct bbe__mslot {
    uint64_t key, val;
    uint8_t state; /* BBE__MAP_EMPTY, BBE__MAP_FULL or BBE__MAP_TOMB */
} bbe__mslot;
enum { BBE__MAP_EMPTY = 0, BBE__MAP_FULL = 1, BBE__MAP_TOMB = 2 };
typedef struct bbe__map {
    bbe__mslot *slots;
    size_t cap, n, tomb;
} bbe__map;
bool bbe__map_get(const bbe__map *m, uint64_t k, uint64_t *v);
int bbe__map_put(bbe__map *m, uint64_t k, uint64_t v);
bool bbe__map_del(bbe__map *m, uint64_t k);
void bbe__map_free(bbe__map *m);
/* A 64-bit hash of bytes, one 64x64->128-bit multiply per 16 bytes in
 * three independent lanes (wyhash's folding): for whole envelopes, where a
 * byte-at-a-time hash costs more than receiving them. Not cryptographic. */
uint64_t bbe__hash_bytes(const void *data, size_t len);
static inline uint64_t bbe__mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* ---- ops, graphs ----------------------------------------------------------- */
typedef struct bbe__exec bbe__exec;
typedef struct bbe__op bbe__op;

enum { BBE__R_DONE = 0, BBE__R_ASYNC = 1, BBE__R_FAIL = 2 };
/* A stateless (framework) op. in[] borrowed (NULL = absent), out[] receive
 * new references (NULL = not written). BBE__R_ASYNC: the op parked itself
 * (bbe__park_begin) and resumes through bbe__park_resume. BBE__R_FAIL: message
 * set with bbe__fail. */
typedef int (*bbe__syscall_fn)(bb_engine *e, uint32_t opi, bbe__exec *x, bb_value *const *in,
                              bb_value **out);

typedef enum bbe__disp {
    BBE__DISP_UNRESOLVED = 0,
    BBE__DISP_SYSCALL,
    BBE__DISP_ATOMIC,
    BBE__DISP_CALL,
    BBE__DISP_CONST /* Constant: its site is pre-filled in every frame */
} bbe__disp;

enum {
    BBE__READY_ALL = 0,  /* every named input present */
    BBE__READY_ANYOF = 1 /* any one input present (Any, Threshold, DeadlineMatch) */
};

enum {
    BBE__OPF_EVENT_SOURCE = 1u << 0, /* started by its own trigger (Recv, Interval...) */
    BBE__OPF_SOURCE = 1u << 1,       /* pushed at the start of invoke/bootstrap/call */
    BBE__OPF_RECV_REQ = 1u << 2,     /* RecvReq: a request fill opens an inbound request */
    BBE__OPF_TRIGGER_IN = 1u << 3    /* its inputs only trigger it: their values are never read */
};

/* Per-op pre-parsed attributes / state (only for ops that need it). */
typedef struct bbe__opst {
    int64_t i, i2;       /* n, delay, period, kind, phase, fanout, quorum, deadline */
    uint32_t idx;        /* counter / semaphore / queue / hold index */
    uint32_t comp;       /* Recv: backend for materialize_from_wire, else BBE__NONE */
    const char *name;    /* AppEmit topic, metric / record / queue name */
    bb_value *value;     /* Constant */
    uint64_t *dest_sites; /* Send*: /site id per data input */
    uint32_t n_dest_sites;
    bool trigger_only;
    uint64_t wire_site;  /* Recv / RecvReq routable id */
    uint32_t fold_op;    /* RecvRespBatched: the op its responses fold into, or BBE__NONE */
    bool responses_read; /* SendReqBatched: its responses output has a reader */
    bool has_peer;       /* TX gates: peer attribute */
    bb_peerid peer;
    /* Event sources: the zero-input ops (BBE__OPF_SOURCE) of the part of the
     * graph this source is connected to, pushed when it starts an
     * execution (a round started by Interval runs its Model.Params). */
    const uint32_t *companions;
    uint32_t n_companions;
} bbe__opst;

struct bbe__op { /* hot fields first */
    bbe__syscall_fn fn;
    const uint32_t *in;  /* local site per input, BBE__NONE when omitted */
    const uint32_t *out; /* local site per output, BBE__NONE when omitted */
    uint16_t n_in, n_out;
    uint8_t disp;
    uint8_t ready;
    uint8_t flags;
    uint8_t pad;
    uint32_t graph;
    uint32_t comp;     /* ATOMIC: component; CALL: callee graph */
    uint32_t op_index; /* ATOMIC: index in the type's opset ops[] */
    bbe__opst *st;
    const bb_node *node;
    const char *label;   /* node name or "<op_type>#<i>" */
    const char *op_type; /* never NULL */
    const char *domain;  /* never NULL ("" = ai.onnx) */
    uint64_t deadline_ns; /* async deadline (attribute deadline_ns), 0 = none */
};

enum {
    BBE__SITE_FWD = 1u << 0,     /* function output: forward to the caller */
    BBE__SITE_APP_OUT = 1u << 1  /* entry-point output with no consumer: AppEvent */
};

typedef struct bbe__graph {
    const bb_function *fn;
    const char *name;        /* function name */
    const char *target;      /* install target name when an entry point */
    uint32_t index;
    uint32_t n_sites;
    uint32_t op_begin, op_end;
    const char **site_names;
    const bb_type_node **site_type; /* declared type (BB_TYPE_ANY if unknown) */
    uint8_t *site_flags;
    uint32_t *fwd_index;     /* output position for FWD sites */
    uint32_t *cons_off;      /* CSR: consumers of site s are cons[cons_off[s]..cons_off[s+1]) */
    uint32_t *cons;
    uint32_t *formals;       /* function inputs -> sites */
    uint32_t n_formals;
    uint32_t *results;       /* function outputs -> sites */
    uint32_t n_results;
    uint32_t *sources;       /* ops pushed at execution start */
    uint32_t n_sources;
    uint32_t *const_sites;   /* pre-filled sites and their values */
    bb_value **const_vals;
    uint32_t n_consts;
    bool entry;
    bool is_bootstrap;
    uint32_t touch_words;    /* bootstrap: touch-set bitset over components */
    uint64_t *touch;
    bbe__exec *pool;          /* free frames */
    uint32_t pool_n;
} bbe__graph;

/* ---- executions ---------------------------------------------------------------- */
typedef struct bbe__slot {
    bb_value *v;
    size_t charged; /* ingress bytes charged against the budget */
} bbe__slot;

typedef struct bbe__inbound { /* set on executions started by an envelope */
    bb_peerid src;
    uint64_t env_hash;    /* bbe__envelope_dedup_key (DedupGateRx) */
    uint64_t deadline_ns; /* absolute, 0 = none */
} bbe__inbound;

struct bbe__exec {
    bb_exec_id id;
    bbe__graph *g;
    uint32_t refs;       /* frontier entries + suspensions + children + timers */
    uint32_t call_op;    /* the CALL op in the parent */
    bbe__exec *parent;
    bbe__exec *prev, *next; /* live list */
    uint32_t boot;       /* 1 + in-flight bootstrap slot, 0 = none */
    uint32_t n_written;
    uint32_t *written;   /* sites holding a value; inline after slots[] (n_sites) */
    bbe__inbound *inbound; /* NULL, or &inbound_store (bbe__exec_set_inbound) */
    bbe__inbound inbound_store;
    struct bbe__batch *batches; /* request batches started here */
    uint32_t n_limits;   /* Limit.Acquire holds */
    uint32_t *limits;
    bbe__slot slots[];
};

/* Mark x as started by an envelope (kept in the frame: no allocation). */
static inline bbe__inbound *bbe__exec_set_inbound(bbe__exec *x)
{
    x->inbound = &x->inbound_store;
    return x->inbound;
}

/* ---- components ------------------------------------------------------------------ */
typedef struct bbe__ctx {
    bb_ctx pub;
    bb_engine *e;
    uint32_t comp;
} bbe__ctx;

typedef struct bbe__comp {
    const char *slot;
    const bb_component_type *type;
    bb_role role;
    uint32_t slot_id;
    bool has_slot_id;
    const bb_attr *construction;
    void *inst;
    bool created;
    uint32_t *deps; /* component index per type->deps[] */
    bbe__ctx ctx;
} bbe__comp;

/* ---- completion handles ---------------------------------------------------------- */
enum { BBE__H_IDLE = 0, BBE__H_PENDING = 1, BBE__H_COMPLETED = 2, BBE__H_DROPPED = 3 };
enum { BBE__HK_OP = 0, BBE__HK_BOOTSTRAP = 1, BBE__HK_FREE = 2, BBE__HK_FILL = 3 };

typedef struct bbe__handle {
    bb_completion pub;
    bb_engine *e;
    _Atomic uint32_t state;
    uint32_t gen;
    uint32_t kind;
    bool attached;       /* engine registered it as a suspension */
    uint32_t op;
    bbe__exec *x;
    uint32_t boot;       /* bootstrap in-flight slot */
    uint32_t comp;       /* HK_FILL: the component a control fill went to */
    const bb_op_decl *fill_decl; /* HK_FILL: its op (the type's static table) */
    const char *fill_domain;
    struct bbe__route *route; /* HK_FILL of a request: where its answer goes (malloc'd) */
    uint64_t cmd_id;
    struct bbe__handle *next;
} bbe__handle;

#define BBE__HANDLE_SLAB 64 /* handles per slab */

/* A completion result travelling to the engine thread. */
typedef struct bbe__completion_ev {
    bbe__handle *h;
    uint32_t gen;
    int status;
    bb_value **outs;
    uint32_t n;
    char *msg;
    size_t charged;     /* ingress budget charged for outs (sum of bbe__value_size) */
} bbe__completion_ev;

/* ---- timers ------------------------------------------------------------------------- */
enum {
    BBE__T_PARK = 1,      /* After / Sleep: resume op with a Trigger */
    BBE__T_INTERVAL,      /* Interval op tick */
    BBE__T_COMPONENT,     /* component on_timer(token) */
    BBE__T_HANDLE_DEADLINE,
    BBE__T_BATCH_DEADLINE,
    BBE__T_CTL_DEADLINE   /* a control-plane request's deadline (b: token); not snapshotted */
};
typedef struct bbe__timer {
    uint64_t at, seq;
    uint32_t kind, op;
    uint32_t a;          /* component / handle gen */
    uint64_t b;          /* token / batch id */
    void *p;             /* exec / handle */
} bbe__timer;

/* ---- ingress ------------------------------------------------------------------------ */
enum {
    BBE__IN_ENVELOPE = 1,
    BBE__IN_INVOKE,       /* invoke and deliver_event */
    BBE__IN_LIFECYCLE,
    BBE__IN_COMPLETION,
    BBE__IN_BOOTSTRAP,
    BBE__IN_WORK_DONE,
    BBE__IN_NOTICE
};

typedef struct bbe__in_value {
    uint32_t site;
    bb_value *v;
    size_t charged;
} bbe__in_value;

typedef struct bbe__boot_req {
    int kind;          /* BB_BOOTSTRAP_* */
    uint32_t idx;      /* module bootstrap / component index */
    uint32_t n;
    bbe__in_value *in;
} bbe__boot_req;

typedef struct bbe__ingress_ev {
    struct bbe__ingress_ev *next;
    int kind;
    bool must;        /* not counted against the capacity */
    size_t charged;   /* budget charged at push (released after processing) */
    union {
        struct {
            bb_peerid src;
            bb_buffer *buf;  /* the bytes; owns the event (see bbe__envelope_ev_new) */
            uint8_t *obs;    /* in buf's block */
            size_t obs_len;
        } env;
        struct {
            uint32_t target; /* graph index */
            bb_exec_id exec;
            bool sources;    /* invoke: push the graph's sources */
            bool in_inline;  /* in[] lives in the event's own allocation */
            uint32_t n;
            bbe__in_value *in;
        } inv;
        struct {
            int64_t phase;
        } lc;
        bbe__completion_ev comp;
        struct {
            int all;         /* BB_BOOTSTRAP_ALL */
            uint32_t n;
            bbe__boot_req *reqs;
        } boot;
        struct {
            uint64_t token;
        } work;
        struct {
            int infra, sub;
            uint64_t count;
            char detail[96];
        } notice;
    } u;
} bbe__ingress_ev;

typedef struct bbe__ingress {
    _Atomic(bbe__ingress_ev *) head; /* Treiber stack; the consumer takes it whole */
    atomic_size_t count;            /* bounded events in the queue */
    size_t capacity;
    atomic_uint_fast64_t dropped;   /* overflow drops since start */
    uint64_t dropped_reported;
    atomic_bool wake_pending;
    void (*wake)(void *ud);
    void *wake_ud;
} bbe__ingress;

/* ---- framework tables -------------------------------------------------------------- */
typedef struct bbe__peer {
    bb_peerid id;
    uint64_t id_hash;    /* bbe__hash_bytes of id: the table's, and every dedup key's */
    bool live;           /* slot in use */
    uint32_t n_addrs;
    bb_engine_addr *addrs; /* malloc'd copies */
    bool connected;
    /* Address telling (issue 23): while connected, envelopes to this peer
     * carry this node's listen addresses and the peer's own only until one
     * has gone on the current connection with the book's list for the
     * peer at addrs_gen (told_gen). A new connection, a failed send or a
     * change of that list tells them again. */
    bool addrs_told;
    uint32_t addrs_gen, told_gen;
    char **targets;      /* announced targets */
    uint32_t n_targets;
    /* backoff table */
    uint32_t attempts;
    uint64_t next_retry_ns;
    /* governor */
    uint32_t failures;
    bool down;
    bool blocked, allowed;
    uint64_t rtt_ns;     /* from the echo_sent_at / echo_delay piggyback */
    uint64_t last_rx_sent_at, last_rx_at; /* echoed on the next send to it */
    /* Its clock against ours: the least (arrival - sent_at) seen over the
     * last BBE__CLOCK_OFFSET_WINDOW_NS (wire.c: local_deadline). */
    int64_t clock_offset_ns;
    uint64_t clock_offset_at; /* our time of that sample; 0: none yet */
    bb_value *id_value;  /* its PeerId as a value, made once (bbe__peer_cached_id_value) */
    /* a peer a component learned from another node's fill or answer
     * (bbe__peer_add_taught): that node's key (0: none) and the order */
    uint64_t taught_by, taught_seq;
} bbe__peer;

typedef struct bbe__peers {
    bbe__peer *v;          /* entries (index stable while live) */
    size_t n, cap;
    int32_t *slots;       /* open addressing over entries, -1 empty, -2 tomb */
    size_t nslots, used, tomb;
    uint32_t *free_idx;
    size_t n_free;
    size_t n_addr_peers;  /* peers with at least one address */
    size_t n_allowed;
    uint32_t last;        /* entry bbe__peer_find found last (a hint) */
    uint64_t taught_seq;  /* the last bbe__peer.taught_seq given */
} bbe__peers;

/* Peers one other node can add to this node's address book through its
 * fills and answers (components' add_peer while handling them): beyond
 * this, a newcomer replaces the oldest of that node's that is not
 * connected (book.taught_replaced), or is refused. */
#define BBE__TAUGHT_MAX_PER_PEER 256

typedef struct bbe__sema {
    const char *name;
    int64_t cap;
    int64_t held;
    BBE__ARR(struct bbe__waiter { uint32_t op; bbe__exec *x; }) waiters;
} bbe__sema;

typedef struct bbe__queue { /* Serialize.* */
    const char *name;
    BBE__ARR(bb_value *) items;
    size_t head;
    BBE__ARR(struct bbe__waiter) waiters;
} bbe__queue;

typedef struct bbe__hold {
    const char *name;
    bb_value *v;
} bbe__hold;

typedef struct bbe__metric {
    const char *name;
    uint64_t value;
} bbe__metric;

typedef struct bbe__record {
    const char *name;
    bb_value *v;
} bbe__record;

/* A batched request (SendReqBatched) waiting for its cohort. */
typedef struct bbe__batch {
    uint64_t id;          /* local RequestId */
    uint64_t wire_req_id;
    uint32_t op;          /* the SendReqBatched op */
    bbe__exec *x;          /* origin execution */
    struct bbe__batch *next_in_exec;
    uint32_t expected, quorum;
    /* in the batch's own block (bbe__batch_new), room for `expected` each:
     * a cohort member answers once */
    bb_peerid *cohort;
    bool *answered;
    bb_value **items;     /* the responses so far [n_items] */
    bb_value **peers;     /* PeerId of each response's sender */
    size_t n_items;
    bool done, failed;
    bool holds_ref;       /* holds a ref on x until done */
    bool folding;         /* responses go to fold_op as they land (wire.c); items stay NULL */
    uint32_t fold_op;
    BBE__ARR(struct bbe__waiter) waiters;
    bb_value *result;
} bbe__batch;
/* The batch of local RequestId id / of wire_req_id, or NULL. */
bbe__batch *bbe__batch_get(const bb_engine *e, uint64_t id);
bbe__batch *bbe__batch_of_wire(const bb_engine *e, uint64_t wire_req_id);
/* Cohort member `who` (src) answered a folding batch: counted as a
 * response that landed; refused: why its op refused it (the batch fails). */
void bbe__batch_response_landed(bb_engine *e, bbe__batch *b, uint32_t who, const bb_peerid *src,
                                const char *refused);
/* A response was refused (why): the batch fails at once. */
void bbe__batch_refused(bb_engine *e, bbe__batch *b, const char *why);
/* The cohort index of src in b while it may still answer (in the cohort,
 * not answered yet), else UINT32_MAX. */
uint32_t bbe__batch_cohort_index(const bbe__batch *b, const bb_peerid *src);
/* Whether b's SendReqBatched reads its responses whole (its own responses
 * output is read), so they cannot fold as they land. */
bool bbe__batch_read_whole(const bb_engine *e, const bbe__batch *b);
/* A zeroed batch for `expected` responses: one allocation. NULL on OOM. */
bbe__batch *bbe__batch_new(uint32_t expected);

/* The ring of inbound requests holds caps.inbound_requests_max of them (at
 * least one). */
static inline size_t bbe__inreq_ring_cap(const bb_engine_caps *caps)
{
    return caps->inbound_requests_max ? caps->inbound_requests_max : 1;
}

typedef struct bbe__inreq { /* an open inbound request (RecvReq) */
    uint64_t id;
    bb_peerid peer;
    uint64_t wire_req_id;
    uint64_t site;
    uint64_t sent_at_ns, recv_at_ns;
} bbe__inreq;

/* A control-plane request this node sent and waits on (control.c). */
typedef struct bbe__ctlreq {
    uint64_t token;       /* its wire_req_id; 0: a free entry */
    uint32_t comp;        /* the component that asked */
    bool unreachable;     /* a send to peer failed: ended at the next poll */
    bb_peerid peer;       /* the peer asked: only it may answer */
} bbe__ctlreq;

/* Where the answer to a control-plane request goes (control.c). */
typedef struct bbe__route {
    bb_peerid peer;       /* the asker */
    uint64_t token;       /* its wire_req_id */
    uint64_t ref;         /* the component ref of the suffix */
    const char *op;       /* the op (the type's static table, or the suffix's) */
} bbe__route;

typedef struct bbe__bus_ev {
    uint64_t kind;
} bbe__bus_ev;

/* ---- bootstrap ---------------------------------------------------------------------------- */
typedef struct bbe__modboot {
    uint32_t target;    /* index into targets */
    uint32_t graph;
    bool done;          /* completed once (ALL skips it) */
} bbe__modboot;

typedef struct bbe__inflight {
    bool used;
    bool component;
    uint32_t idx;       /* module bootstrap index or component index */
    uint32_t live;      /* frames tagged with this bootstrap */
    uint64_t *touch;    /* borrowed touch set */
    bool pending_handle;
    bool announced;     /* WaitingOnBootstrap emitted */
    bool failed;        /* an op of the bootstrap body failed */
    char why[160];      /* the first failure */
} bbe__inflight;

typedef struct bbe__bootstate {
    bbe__modboot *mods;
    uint32_t n_mods;
    uint32_t touch_words;
    BBE__ARR(bbe__inflight) inflight;
    uint32_t n_inflight;
    BBE__ARR(bbe__boot_req) waiting; /* staged requests not yet fired */
    bool all_armed;     /* ALL: walking mods in install order */
    bool all_blocked;   /* ALL stopped at a module that needs inputs (WaitingForInput) */
    uint32_t next_idx;
    bool pulses_fired;
    uint64_t *comp_touch; /* one-bit touch sets for component bootstraps */
} bbe__bootstate;

typedef struct bbe__target {
    const char *name;   /* as the host named it */
    uint32_t graph;
    uint32_t boot;      /* module bootstrap index or BBE__NONE */
} bbe__target;

/* ---- chunk streams (streams.c) ------------------------------------------------------------------ */
typedef struct bbe__stream_out {
    uint64_t id;
    bb_peerid peer;
    bb_send_gather *g;          /* the whole envelope in pieces (its values held) */
    size_t total;
    size_t acked;               /* the receiver holds [0, acked) */
    size_t sent;                /* chunks sent up to here (from acked again after a loss) */
    bool waiting;               /* the receiver said WAIT: nothing until an ACK */
    bool admitted;              /* an ACK came: the receiver holds the stream */
    uint64_t progress_ns;       /* when acked last moved (or the stream began / waited) */
    uint64_t resent_ns;         /* when it last went back to acked */
    bb_exec_id exec;
} bbe__stream_out;

typedef struct bbe__fold_in bbe__fold_in; /* chunk_fold.c */
typedef struct bbe__stream_in {
    uint64_t id;
    bb_peerid peer;
    uint8_t *buf;               /* total bytes, 64-byte aligned; NULL while waiting for the budget */
    bbe__fold_in *fold;         /* instead of buf: a response folded as its chunks land */
    bool gone;                  /* its fold ended early: refused at the next chunk or check */
    size_t total, got;          /* [0, got) assembled (or folded) */
    uint64_t progress_ns;
} bbe__stream_in;

/* ---- the engine ------------------------------------------------------------------------------- */
enum {
    BBE__C_OPS,
    BBE__C_FRONTIER_PEAK,
    BBE__C_PENDING_ASYNC,
    BBE__C_EXEC_LIVE,
    BBE__C_ENVELOPES_IN,
    BBE__C_ENVELOPES_OUT,
    BBE__C_FILLS_IN,
    BBE__C_WIRE_RX_ERRORS,
    BBE__C_UNROUTABLE,
    BBE__C_GATE_DENIED,
    BBE__C_OP_FAILED,
    BBE__C_BUS_DROPPED,
    BBE__C_PEER_RESOLVE_FAILED,
    BBE__C_APP_EVENTS,
    BBE__C_BUDGET_HITS,
    BBE__C_APP_INGRESS_ERRORS,
    BBE__C_SEND_REFUSED,
    BBE__C_TAUGHT_REPLACED,
    BBE__C_RESPONSES_FOLDED,
    BBE__C_STREAMS_OUT,
    BBE__C_STREAMS_IN,
    BBE__C_STREAMS_RESUMED,
    BBE__C_STREAMS_WAITED,
    BBE__C_STREAMS_FAILED,
    BBE__C_DEDUP_DENIED, /* of gate.denied: duplicates the dedup gate removed */
    BBE__C_STREAMS_FOLDED, /* responses folded chunk by chunk (chunk_fold.c) */
    BBE__C_COUNT
};

struct bb_engine {
    bb_engine_config cfg;
    bb_engine_caps caps;
    bb_engine_addr *local_addrs; /* owned copies */
    size_t n_local_addrs;
    bb_value *self_value;        /* PeerId value of cfg.peer */
    bb_value *trigger;           /* the Trigger every op writes shares (values are immutable) */
    uint64_t now_ns;
    uint64_t cycle_seq;
    uint64_t incarnation;
    uint64_t rng;                /* splitmix64 state */
    uint64_t last_sent_at;
    /* The last /site/<id> suffix a received fill named, as bytes, and its
     * site: a peer's fills name the same few sites over and over, and
     * comparing <= 14 bytes costs less than parsing them (wire.c); the
     * bytes alone decide the site, so nothing invalidates it */
    uint8_t rx_site_sfx[16];
    uint8_t rx_site_sfx_len; /* 0: none yet */
    uint64_t rx_site_id;
    /* The same the other way: the last site a sent fill named, encoded */
    uint8_t tx_site_sfx[16];
    uint8_t tx_site_sfx_len; /* 0: none yet */
    uint64_t tx_site_id;

    /* install */
    bool installed;
    bool ran;                    /* polled at least once (restore refuses) */
    bb_install_error install_err;
    bb_model *model; /* the installed clone, or the host's model (cfg.share_model) */
    bb_arena *arena;             /* immutable install tables */
    bbe__graph *graphs;
    uint32_t n_graphs;
    size_t pool_extra; /* pooled frames beyond the first of each graph (exec.c) */
    bbe__op *ops;
    uint32_t n_ops;
    bbe__target *targets;
    uint32_t n_targets;
    bbe__comp *comps;
    uint32_t n_comps;
    uint32_t *comp_order;        /* creation order (dependencies first) */
    bbe__map wire_sites;          /* wire site id -> (graph << 32 | site) */
    bbe__map recv_ops;            /* wire site id -> Recv/RecvReq op */
    uint32_t *lifecycle_ops;
    uint32_t n_lifecycle_ops;
    uint32_t *interval_ops;
    uint32_t n_interval_ops;
    uint32_t *pulse_ops;
    uint32_t n_pulse_ops;
    uint32_t *event_ops;         /* EventSource ops */
    uint32_t n_event_ops;
    uint32_t max_in, max_out;
    bb_value **in_buf, **out_buf;
    uint64_t fingerprint;        /* of the install, checked by restore */

    /* executions */
    _Atomic uint64_t next_exec;
    bbe__exec *live;
    size_t n_live;
    size_t live_slots;
    struct bbe__fentry {
        uint32_t op;
        bbe__exec *x;
    } *fr;
    size_t fr_cap, fr_head, fr_n;  /* ring, cap power of two */
    BBE__ARR(struct bbe__fentry) parked; /* ops locked by an in-flight bootstrap */
    size_t cycle_ops;
    bool budget_hit;
    char fail_msg[256];

    /* async */
    BBE__ARR(bbe__handle *) slabs;
    bbe__handle *free_handles;
    bbe__handle *quar_head, *quar_tail;
    size_t quar_n;
    bbe__handle *spare;
    uint64_t next_cmd;
    size_t pending_async;
    BBE__ARR(bbe__completion_ev) pending_completions;
    _Atomic bool in_cycle;
    pthread_t cycle_thread;

    /* timers */
    BBE__ARR(bbe__timer) timers;   /* binary min-heap on (at, seq) */
    uint64_t timer_seq;
    size_t timers_compact_at;    /* compact dead deadlines at this size (timers.c) */
    bool intervals_armed;

    /* bus */
    bbe__bus_ev *bus;
    size_t bus_head, bus_n;
    uint64_t bus_subscribed;     /* bit k: some EventSource listens to kind k (< 64) */

    /* steps */
    bb_steps acc;                /* steps produced since the last poll returned */
    BBE__ARR(bb_step) outbound;   /* SendEnvelope steps, emitted in phase 7 */
    BBE__ARR(struct bbe__loop { uint8_t *bytes; size_t len; }) loopback;
    BBE__ARR(bbe__stream_out) streams_out; /* chunk streams (streams.c) */
    BBE__ARR(bbe__stream_in) streams_in;
    uint64_t next_fold_id;       /* bb_fold_piece.stream (chunk_fold.c) */
    uint64_t next_stream_id;
    bool streams_pump;          /* an out stream may send */
    uint64_t streams_check_at;  /* when a stream is due a check (UINT64_MAX: none) */

    /* framework */
    bbe__peers peers;
    /* the node whose fill or answer a component is handling now (its
     * add_peer calls are that node's teaching), else NULL */
    const bb_peerid *teacher;
    bbe__sema *semas;
    uint32_t n_semas;
    bbe__queue *queues;
    uint32_t n_queues;
    bbe__hold *holds;
    uint32_t n_holds;
    bbe__metric *metrics;
    uint32_t n_metrics;
    bbe__record *records;         /* ring */
    size_t rec_head, rec_n;
    uint64_t *dedup;             /* ring of hashes */
    size_t dedup_head, dedup_n;
    bbe__map dedup_set;           /* hash -> count in window */
    bbe__map batches;             /* local request id -> bbe__batch* */
    bbe__map batches_wire;        /* wire_req_id -> local id */
    uint64_t next_req;
    uint64_t next_wire_req;
    bbe__inreq *inreqs;           /* ring of open inbound requests */
    size_t inreq_head, inreq_n;
    bbe__map inreq_map;           /* local id -> ring position */
    uint64_t next_inreq;
    uint64_t next_token;
    BBE__ARR(bbe__ctlreq) ctl;    /* control-plane requests in flight (control.c) */
    BBE__ARR(uint32_t) ctl_free;  /* free entries of ctl */
    bbe__map ctl_map;             /* token -> ctl index */
    size_t ctl_live;

    /* ingress */
    bbe__ingress ing;
    atomic_size_t bytes_in_flight;
    BBE__ARR(struct bbe__work { uint64_t token; void (*done)(void *); void *arg; }) works;
    uint64_t next_work;

    /* bootstrap */
    bbe__bootstate boot;

    /* observability */
    uint64_t c[BBE__C_COUNT];
    bb_trace_fn trace_fn;
    void *trace_ud;
    unsigned trace_mask;
    uint64_t (*trace_clock)(void *ud);
    void *trace_clock_ud;
    const char *phase_name;      /* the poll phase running now (NULL between polls) */
};

/* Give back n budget bytes (hot: every slot release). */
static inline void bbe__budget_release(bb_engine *e, size_t n)
{
    if (n)
        atomic_fetch_sub_explicit(&e->bytes_in_flight, n, memory_order_relaxed);
}

/* ---- engine.c ------------------------------------------------------------------------------------ */
int bbe__fail(bb_engine *e, const char *fmt, ...) __attribute__((format(printf, 2, 3), cold));
uint64_t bbe__rng_next(bb_engine *e);
/* Budget: charge n bytes (false when the budget would be exceeded). */
bool bbe__budget_charge(bb_engine *e, size_t n);
size_t bbe__value_size(const bb_value *v);

/* ---- steps.c ---------------------------------------------------------------------------------------- */
bb_step *bbe__step_push(bb_engine *e, bb_step_kind kind, bb_exec_id exec);
/* Copy a string into the accumulator's owned storage (NULL on OOM). */
const char *bbe__step_str(bb_engine *e, const char *s);
const char *bbe__step_strf(bb_engine *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void bbe__step_infra(bb_engine *e, bb_infra_kind kind, int sub, const bb_peerid *peer,
                    uint64_t count, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
void bbe__steps_release(bb_step *s);
void *bbe__owned_add(void **owned, void *p);
/* n bytes (16-aligned) owned by the same storage, valid until the buffer
 * is cleared (NULL on OOM). */
void *bbe__owned_alloc(void **owned, size_t n);
void bbe__owned_free(void **owned);

/* ---- exec.c ------------------------------------------------------------------------------------------ */
bbe__exec *bbe__exec_new(bb_engine *e, bbe__graph *g, bb_exec_id id);
static inline void bbe__exec_ref(bbe__exec *x) { x->refs++; }
/* The last reference gone: the execution is finished (exec.c). */
void bbe__exec_gc(bb_engine *e, bbe__exec *x);
static inline void bbe__exec_unref(bb_engine *e, bbe__exec *x)
{
    BBE__ASSERT(x->refs > 0);
    if (--x->refs == 0)
        bbe__exec_gc(e, x);
}
/* A Trigger value: a reference to the engine's one (a Trigger carries
 * nothing, and a value allocation per fired op was a measurable part of a
 * message's cost). */
static inline bb_value *bbe__trigger(bb_engine *e)
{
    return bb_value_ref(e->trigger);
}
/* Takes the reference v. charged: budget bytes the slot now accounts for. */
void bbe__write(bb_engine *e, bbe__exec *x, uint32_t site, bb_value *v, size_t charged);
void bbe__write_again(bb_engine *e, bbe__slot *s);
void bbe__write_flagged(bb_engine *e, bbe__exec *x, uint32_t site, bb_value *v, uint8_t fl);
void bbe__frontier_push_grow(bb_engine *e, uint32_t op, bbe__exec *x);
/* Queue op of x (the ring grows when full; out of memory is an OpFailed). */
static inline void bbe__frontier_push(bb_engine *e, uint32_t op, bbe__exec *x)
{
    BBE__ASSERT(op < e->n_ops && e->ops[op].graph == x->g->index);
    if (BBE__UNLIKELY(e->fr_n == e->fr_cap)) {
        bbe__frontier_push_grow(e, op, x);
        return;
    }
    BBE__ASSERT(e->fr_n < e->fr_cap && (e->fr_cap & (e->fr_cap - 1)) == 0 &&
                e->fr_head < e->fr_cap);
    e->fr[(e->fr_head + e->fr_n) & (e->fr_cap - 1)] = (struct bbe__fentry){op, x};
    e->fr_n++;
    x->refs++;
    if (BBE__UNLIKELY(e->fr_n > e->c[BBE__C_FRONTIER_PEAK]))
        e->c[BBE__C_FRONTIER_PEAK] = e->fr_n;
}

/* Every input of op present in x (an AnyOf op: the write that got here
 * was one). Inputs tend to arrive in order (FIFO), so the last ones are
 * the likely missing ones: scanning backwards settles a join early. */
static inline bool bbe__op_ready(const bbe__op *op, const bbe__exec *x)
{
    if (op->ready == BBE__READY_ANYOF)
        return true;
    for (uint32_t i = op->n_in; i-- > 0;) {
        uint32_t s = op->in[i];
        BBE__ASSERT(s == BBE__NONE || s < x->g->n_sites);
        if (s != BBE__NONE && !x->slots[s].v)
            return false;
    }
    return true;
}

/* bbe__write, inlined where ops hand on their outputs (the dispatch loop):
 * the slot, then every consumer that became ready onto the frontier. */
static inline __attribute__((always_inline)) void bbe__write_inline(bb_engine *e, bbe__exec *x,
                                                                    uint32_t site, bb_value *v,
                                                                    size_t charged)
{
    BBE__ASSERT(site < x->g->n_sites);
    bbe__slot *s = &x->slots[site];
    if (BBE__UNLIKELY(s->v != NULL)) {
        bbe__write_again(e, s);
    } else {
        BBE__ASSERT(x->n_written < x->g->n_sites);
        x->written[x->n_written++] = site;
        e->live_slots++;
    }
    s->v = v;
    s->charged = charged;
    const bbe__graph *g = x->g;
    uint8_t fl = g->site_flags[site];
    if (BBE__UNLIKELY(fl))
        bbe__write_flagged(e, x, site, v, fl);
    for (uint32_t k = g->cons_off[site], end = g->cons_off[site + 1]; k < end; k++) {
        uint32_t c = g->cons[k];
        BBE__ASSERT(c >= g->op_begin && c < g->op_end);
        if (bbe__op_ready(&e->ops[c], x))
            bbe__frontier_push(e, c, x);
    }
}
/* Room for need entries (0 or BB_ENOMEM). */
int bbe__frontier_reserve(bb_engine *e, size_t need);
/* Push every op of g that starts an execution (sources). */
void bbe__push_sources(bb_engine *e, bbe__exec *x);
/* Fresh execution of op's graph whose output k is written with v (taken). */
bbe__exec *bbe__fire_op_output(bb_engine *e, uint32_t opi, bb_value *v, uint32_t k);
bb_exec_id bbe__exec_id_new(bb_engine *e);
void bbe__exec_free_all(bb_engine *e);

/* ---- dispatch.c ----------------------------------------------------------------------------------------- */
/* Drain the frontier until empty or the op budget runs out. */
void bbe__drain_frontier(bb_engine *e);
void bbe__op_failed(bb_engine *e, uint32_t opi, bbe__exec *x, const char *msg) __attribute__((cold));
/* Async suspension bookkeeping for framework ops. */
void bbe__park_begin(bb_engine *e, bbe__exec *x);
/* Resume a parked op: write outs[0..n) (taken; NULL skips) and drop the park. */
void bbe__park_resume(bb_engine *e, uint32_t opi, bbe__exec *x, bb_value **outs, uint32_t n);
/* Same, for outputs whose bbe__value_size was charged against the byte budget:
 * each written slot carries its charge, an unwritten output gives it back. */
void bbe__park_resume_charged(bb_engine *e, uint32_t opi, bbe__exec *x, bb_value **outs,
                             uint32_t n);
void bbe__park_fail(bb_engine *e, uint32_t opi, bbe__exec *x, const char *msg) __attribute__((cold));
/* Is the op parked behind an in-flight bootstrap? */
bool bbe__op_locked(bb_engine *e, uint32_t opi, const bbe__exec *x);

/* ---- completion.c ------------------------------------------------------------------------------------------- */
bbe__handle *bbe__handle_new(bb_engine *e, uint32_t kind);
void bbe__handle_retire(bb_engine *e, bbe__handle *h);
/* Engine-side drop of a pending handle (deadline, shutdown): later
 * completions return BB_ESTATE. */
bool bbe__handle_drop(bb_engine *e, bbe__handle *h);
void bbe__completion_process(bb_engine *e, bbe__completion_ev *ev);
/* What a failed completion reports: its message and status name. */
const char *bbe__completion_failure_text(const bbe__completion_ev *ev, char *buf, size_t cap);
void bbe__drain_pending_completions(bb_engine *e);
void bbe__handles_free(bb_engine *e);
extern const bb_ctx_api bbe__ctx_api;
void bbe__ctx_init(bb_engine *e, uint32_t comp);

/* ---- timers.c ------------------------------------------------------------------------------------------------- */
int bbe__timer_add(bb_engine *e, uint64_t at, uint32_t kind, uint32_t op, uint32_t a, uint64_t b,
                  void *p);
void bbe__poll_timers(bb_engine *e);
uint64_t bbe__timer_next(const bb_engine *e);
/* Restore the heap order of timers.v (after a restore filled it). */
void bbe__timers_heapify(bb_engine *e);
void bbe__timers_free(bb_engine *e);

/* ---- bus.c ------------------------------------------------------------------------------------------------------ */
void bbe__bus_publish(bb_engine *e, uint64_t kind);
void bbe__route_bus(bb_engine *e);

/* ---- ingress.c --------------------------------------------------------------------------------------------------- */
int bbe__ingress_push(bb_engine *e, bbe__ingress_ev *ev);
/* An envelope event in one block with its buffer: the bb_buffer header,
 * the event, obs[obs_len], then bytes[len] (copied from `bytes`; NULL
 * leaves them unset) or, with owned, the caller's malloc'd bytes, freed
 * with the buffer. The event lives as long as the buffer: freeing the
 * event drops the event's reference, and values decoded in place keep
 * theirs. NULL on OOM (owned is then freed). */
bbe__ingress_ev *bbe__envelope_ev_new(const uint8_t *bytes, uint8_t *owned, size_t len,
                                    const uint8_t *obs, size_t obs_len);
bbe__ingress_ev *bbe__ingress_take(bb_engine *e);
void bbe__ingress_process(bb_engine *e, bbe__ingress_ev *ev);
void bbe__ingress_ev_free(bb_engine *e, bbe__ingress_ev *ev);
void bbe__ingress_free(bb_engine *e);
void bbe__notice(bb_engine *e, int infra, int sub, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int bbe__decode_input(bb_engine *e, const bbe__graph *g, uint32_t site, const bb_engine_input *in,
                     bbe__in_value *out, bb_error *err);

/* ---- peers.c (address book, governor, backoff) -------------------------------------------------------------------- */
bbe__peer *bbe__peer_find(const bb_engine *e, const bb_peerid *id);
bbe__peer *bbe__peer_get(bb_engine *e, const bb_peerid *id); /* find or create; NULL at cap */
int bbe__peer_add_addr(bb_engine *e, bbe__peer *p, const uint8_t *a, size_t len);
void bbe__peers_free(bb_engine *e);
/* Add peer (new to the book) as taught by teacher, within
 * BBE__TAUGHT_MAX_PER_PEER; bb_engine_add_peer's results, and BB_EFULL
 * when the teacher's share is full of connected peers. */
int bbe__peer_add_taught(bb_engine *e, const bb_peerid *teacher, const bb_peerid *peer,
                         const bb_engine_addr *addrs, size_t n, bb_error *err);
bool bbe__peer_failure(bb_engine *e, const bb_peerid *id);
bool bbe__peer_success(bb_engine *e, const bb_peerid *id);
bool bbe__peer_should_retry(const bb_engine *e, const bb_peerid *id);
/* Deny reason label (NULL = allowed). */
const char *bbe__peer_check(const bb_engine *e, const bb_peerid *id, bool outbound);
bool bbe__peerid_from_value(const bb_value *v, bb_peerid *out);
bb_value *bbe__peerid_value(const bb_peerid *id);
/* A new reference to p's PeerId value: made on first use and kept with the
 * peer (responses and peer lists name the same peers message after message). */
bb_value *bbe__peer_cached_id_value(bbe__peer *p);

/* ---- envelope.c ----------------------------------------------------------------------------------------------------- */
typedef struct bbe__fill {
    const uint8_t *suffix;
    size_t suffix_len;
    const uint8_t *payload;
    size_t payload_len;
    /* Outbound: when set, the payload is this value's encoding
     * (payload_len bytes), written straight into the envelope; with
     * wrap_head_len, the encoding of a Composite whose one child is value:
     * wrap_head (bb_value_wrap_head) then value's encoding. */
    const bb_value *value;
    uint8_t wrap_head[BB_VALUE_WRAP_HEAD_MAX];
    uint8_t wrap_head_len;
    bool trigger_only;
} bbe__fill;

#define BBE__ENV_INLINE 2 /* decoded addresses / fills held without a malloc */

/* A StreamChunk (field 9; the chunk streams of streams.c). */
enum { BBE__CHUNK_DATA = 0, BBE__CHUNK_ACK = 1, BBE__CHUNK_WAIT = 2, BBE__CHUNK_REFUSE = 3 };
typedef struct bbe__chunk {
    bool present;
    int kind;               /* BBE__CHUNK_*, -1 when unknown */
    uint64_t stream_id, total, offset;
    const uint8_t *data;    /* a view into the envelope */
    size_t data_len;
    const uint8_t *tail;    /* first DATA chunk: the envelope's last tail_len bytes (a view) */
    size_t tail_len;
} bbe__chunk;

typedef struct bbe__envelope {
    bb_engine_addr *dest;   /* borrowed views */
    size_t n_dest;
    bbe__fill *fills;
    size_t n_fills;
    int corr_kind;          /* 0 none, 1 request, 2 response */
    uint64_t wire_req_id;
    uint64_t deadline_ns, sent_at_ns, echo_sent_at_ns, echo_delay_ns;
    bb_engine_addr *src;
    size_t n_src;
    bbe__chunk chunk;
    /* decode: the first BBE__ENV_INLINE of each list live here (so a
     * decoded envelope must not be copied) */
    bb_engine_addr dest_inline[BBE__ENV_INLINE], src_inline[BBE__ENV_INLINE];
    bbe__fill fills_inline[BBE__ENV_INLINE];
} bbe__envelope;

typedef struct bbe__env_limits {
    size_t max_fills, max_addrs;
} bbe__env_limits;

/* Decode (views into data; free with bbe__envelope_release; do not copy
 * the struct: its first lists live inside it). */
int bbe__envelope_decode(const uint8_t *data, size_t len, const bbe__env_limits *lim,
                        bbe__envelope *out, bb_error *err);
void bbe__envelope_release(bbe__envelope *env);
/* DedupGateRx's identity of a decoded envelope (env: views into bytes):
 * the sender's PeerId, given as its hash (src_hash: bbe__hash_bytes of its
 * bytes, which the peer table keeps as bbe__peer.id_hash), and the
 * envelope's bytes, of a payload over 4 KiB only its first and last 2 KiB
 * (sent_at_ns, which every node makes strictly increasing, already tells
 * two sends apart). */
uint64_t bbe__envelope_dedup_key(uint64_t src_hash, const uint8_t *bytes, size_t len,
                                const bbe__envelope *env);
/* Encode into a new malloc'd buffer. */
int bbe__envelope_encode(const bbe__envelope *env, uint8_t **out, size_t *out_len);
/* An envelope holding the chunk c whose data (c->data_len bytes) follows
 * right after: its head (field 9 up to the data's length prefix, the
 * source addresses first when src, c->tail copied in) at out, which must
 * hold BBE__CHUNK_HEAD_MAX + the addresses' bytes + BBE__CHUNK_TAIL_MAX.
 * Returns the head's size. */
#define BBE__CHUNK_HEAD_MAX 64
#define BBE__CHUNK_TAIL_MAX 1024 /* the tail a first chunk previews, at most */
size_t bbe__chunk_head(const bbe__chunk *c, const bb_engine_addr *src, size_t n_src,
                       uint8_t *out);
/* Encode as a gather list: small parts copied, payloads of at least
 * min_ref bytes left in the values (bb_send_gather_free releases). *out
 * stays NULL when no payload is that large: encode contiguously then. */
int bbe__envelope_encode_gather(const bbe__envelope *env, size_t min_ref, bb_send_gather **out);

/* ---- streams.c ---------------------------------------------------------------------------------------------------------- */
/* Send the envelope (bytes or gather, taken) to peer as a chunk stream. */
int bbe__stream_start(bb_engine *e, const bb_peerid *peer, uint8_t *bytes, bb_send_gather *g,
                      size_t len, bb_exec_id exec);
/* A chunk envelope from src (data for a stream we receive, or an answer
 * about one we send). */
void bbe__stream_chunk(bb_engine *e, const bb_peerid *src, const bbe__chunk *c);
/* ---- chunk_fold.c: a streamed response folded as its chunks land ---- */
/* At a stream's first chunk: the fold state when the stream folds (it is
 * then admitted without a buffer), else NULL: assembled whole as before,
 * or, with *refused, answered REFUSE (a second stream of one answer, or
 * the component refused the response: its batch failed). */
bbe__fold_in *bbe__chunk_fold_open(bb_engine *e, const bb_peerid *src, const bbe__chunk *c,
                                   bool *refused);
/* Bytes [off, off + n) of the stream, the next in order. false: the fold
 * ended (f freed; the batch is gone, or failed with the refusal). */
bool bbe__chunk_fold_data(bb_engine *e, bbe__fold_in *f, size_t off, const uint8_t *d, size_t n);
/* The last byte arrived: the response counts (f freed). */
void bbe__chunk_fold_end(bb_engine *e, bbe__fold_in *f, const bb_peerid *src);
/* The stream died (tell: the component hears ABORT; not at engine free). */
void bbe__chunk_fold_abort(bb_engine *e, bbe__fold_in *f, bool tell);
/* Whether cohort member who of batch streams a response into it now. */
bool bbe__chunk_fold_busy(const bb_engine *e, uint64_t batch, uint32_t who);
/* The batch completed: its streams end (ABORT) and are refused later. */
void bbe__chunk_fold_batch_done(bb_engine *e, uint64_t batch);
/* The engine is restored from a snapshot: folding streams end untold
 * (refused later; what they folded is the snapshot's business). */
void bbe__chunk_fold_forget(bb_engine *e);
/* The peer (re)connected: our streams to it go on from what it holds. */
void bbe__streams_peer_connected(bb_engine *e, const bb_peerid *peer);
/* Each poll, before the outbound steps go: send, resend, give up, admit. */
void bbe__streams_poll(bb_engine *e);
/* When the streams want a poll: 0 now, UINT64_MAX never. */
uint64_t bbe__streams_due(const bb_engine *e);
void bbe__streams_free(bb_engine *e);

/* ---- wire.c ---------------------------------------------------------------------------------------------------------- */
/* A SendEnvelope step (takes bytes or gather): to addrs, or with addrs
 * NULL to the addresses the book has for peer (BB_ENOTFOUND: none). */
int bbe__push_send(bb_engine *e, const bb_peerid *peer, const bb_engine_addr *addrs, size_t n,
                   uint64_t retry_at, uint8_t *bytes, bb_send_gather *gather, size_t len,
                   bb_exec_id exec);
/* Read an envelope a chunk stream assembled (buf: its bytes; the caller
 * keeps its reference): as one that came whole, except that a chunk in it
 * is refused. */
void bbe__deliver_assembled(bb_engine *e, const bb_peerid *src, bb_buffer *buf);
/* Route one inbound envelope (ENGINE.md 6.2): buf holds its bytes; the
 * caller keeps its reference. */
void bbe__deliver_envelope(bb_engine *e, const bb_peerid *src, const uint8_t *obs, size_t obs_len,
                          bb_buffer *buf);
void bbe__flush_outbound(bb_engine *e);
void bbe__drain_loopback(bb_engine *e);
void bbe__batch_deadline(bb_engine *e, uint64_t id);
/* A request batch with this id exists and still waits for answers. */
bool bbe__batch_pending(const bb_engine *e, uint64_t id);
/* Install, for SendReqBatched and RecvRespBatched ops once the graph's
 * consumers are known: whether the request's own responses output is read
 * (st->responses_read), and the op a RecvRespBatched's responses fold into
 * (st->fold_op, BBE__NONE when none). */
int bbe__install_fold_target(bb_engine *e, const bbe__graph *g, bbe__op *op, bbe__opst *st);
/* Queue one envelope to peer (addresses from the address book, or the
 * `direct` ones); one larger than config.stream_chunk_bytes to a peer of
 * the book goes as a chunk stream (streams.c). BB_ENOTFOUND when the peer
 * has no address. */
int bbe__emit(bb_engine *e, const bb_peerid *peer, const bb_engine_addr *direct, size_t n_direct,
              bbe__envelope *env, bb_exec_id exec);
/* A per-fill receive failure: the WireReceiveError step and bus event. */
void bbe__rx_error(bb_engine *e, const bb_peerid *src, bb_wire_rx_error kind, const char *fmt,
                   const char *a, const char *b);
/* Routable id of a site: FNV-1a-64 of "<function name>/<value name>". */
uint64_t bbe__site_wire_id(const char *fn_name, const char *value);
/* Routable id of a wire port: FNV-1a-64 of "port:<port>". */
uint64_t bbe__port_wire_id(const char *port);
void bbe__exec_drop_batches(bb_engine *e, bbe__exec *x);
void bbe__wire_free(bb_engine *e);

/* ---- control.c (the control plane) ------------------------------------------------------------------------------------------------ */
/* The ref that addresses component comp on the wire, and back. */
uint64_t bbe__comp_wire_ref(const bb_engine *e, uint32_t comp);
uint32_t bbe__comp_by_wire_ref(const bb_engine *e, uint64_t ref);
/* An inbound fill /component/<ref>/op/<op>: dispatch, answer a request. */
void bbe__deliver_control_fill(bb_engine *e, const bb_peerid *src, const bbe__envelope *env,
                               const bbe__fill *f, const bb_suffix *sfx);
/* A control-plane fill's dispatch failed (at once, or later through its
 * HK_FILL handle): the OpFailed step naming slot/op. */
void bbe__control_fill_failed(bb_engine *e, uint32_t comp, const bb_op_decl *decl,
                              const char *domain, const char *msg);
/* An HK_FILL handle completed: report a failure, answer the asker. */
void bbe__control_fill_completed(bb_engine *e, bbe__handle *h, const bbe__completion_ev *ev);
/* ctx->api->send_fill of component comp (peer: the destination node). */
int bbe__control_send(bb_engine *e, uint32_t comp, const bb_peerid *peer, const char *slot,
                      const char *op, const uint8_t *payload, size_t len, uint64_t timeout_ns,
                      uint64_t *token, bb_error *err);
/* A RESPONSE envelope: true when it answered (or was refused for) one of
 * this node's control requests, false when its token is not one. */
bool bbe__control_answer_in(bb_engine *e, const bb_peerid *src, const bbe__envelope *env);
bool bbe__control_pending(const bb_engine *e, uint64_t token);
/* A request's deadline timer fired (or its peer proved unreachable). */
void bbe__control_deadline(bb_engine *e, uint64_t token);
/* A send to peer failed: its pending requests end at the next poll. */
void bbe__control_unreachable(bb_engine *e, const bb_peerid *peer);
void bbe__control_free(bb_engine *e);

/* ---- syscalls ------------------------------------------------------------------------------------------------------------ */
typedef struct bbe__install bbe__install;
typedef struct bbe__syscall_def {
    const char *domain, *op_type;
    bbe__syscall_fn fn;
    /* Validate the node and pre-parse its attributes into op->st. */
    int (*init)(bbe__install *ins, bbe__op *op, bb_error *err);
    uint8_t flags;       /* BBE__OPF_* */
    uint8_t ready;       /* BBE__READY_* */
    int16_t min_in, max_in, min_out, max_out; /* -1 = any */
    const bb_type_node *out_type; /* type of outputs (NULL: like input 0 / any) */
    bool is_const;
} bbe__syscall_def;

const bbe__syscall_def *bbe__syscall_find(const char *domain, const char *op_type);
bool bbe__domain_is_framework(const char *domain);

/* install-time helpers the syscall init functions use */
bbe__opst *bbe__opst_new(bbe__install *ins, bbe__op *op);
uint32_t bbe__install_sema(bbe__install *ins, const char *name, int64_t cap, bb_error *err);
uint32_t bbe__install_queue(bbe__install *ins, const char *name);
uint32_t bbe__install_hold(bbe__install *ins, const char *name);
uint32_t bbe__install_metric(bbe__install *ins, const char *name);
bb_engine *bbe__install_engine(bbe__install *ins);
bb_arena *bbe__install_arena(bbe__install *ins);
const char *bbe__install_fn_name(bbe__install *ins, const bbe__op *op);
int bbe__node_malformed(bbe__install *ins, const bbe__op *op, bb_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int64_t bbe__attr_int(const bb_node *n, const char *name, int64_t dflt, bool *found);
const char *bbe__attr_str(bbe__install *ins, const bb_node *n, const char *name);

/* syscall functions shared across files */
int bbe__sys_passthrough(bb_engine *e, uint32_t opi, bbe__exec *x, bb_value *const *in,
                        bb_value **out);

/* ---- bootstrap.c ------------------------------------------------------------------------------------------------------------- */
void bbe__boot_stage(bb_engine *e, bbe__ingress_ev *ev);
void bbe__boot_progress(bb_engine *e);
void bbe__boot_frame_done(bb_engine *e, uint32_t boot);
void bbe__boot_handle_done(bb_engine *e, uint32_t boot, int status, const char *msg);
void bbe__boot_free(bb_engine *e);
void bbe__boot_unpark(bb_engine *e);
/* An op of a bootstrap body failed: the bootstrap ends as BootstrapFailed. */
void bbe__boot_op_failed(bb_engine *e, uint32_t boot, const char *msg);
/* End of a cycle: WaitingOnBootstrap for bootstraps still in flight. */
void bbe__boot_announce(bb_engine *e);

/* ---- trace.c ------------------------------------------------------------------------------------------------------------------- */
#define BBE__TRACING(e, cat) BBE__UNLIKELY(((e)->trace_mask & (cat)) != 0)
void bbe__trace(bb_engine *e, bb_trace_cat cat, const char *name, bb_exec_id exec, uint32_t opi,
               const char *detail, uint64_t value);
/* The "invoke" span of one op, with its outcome and duration. */
void bbe__trace_op(bb_engine *e, bb_exec_id exec, uint32_t opi, const char *outcome,
                  uint64_t duration_ns);

/* ---- install.c ----------------------------------------------------------------------------------------------------------------- */
void bbe__uninstall(bb_engine *e);

/* ---- snapshot.c ----------------------------------------------------------------------------------------------------------------- */
uint64_t bbe__install_fingerprint(const bb_engine *e);

#endif
