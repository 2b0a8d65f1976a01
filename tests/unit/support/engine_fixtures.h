/*
 * engine_fixtures.h — test support for the engine: build compiled
 * artifacts by hand in the shape bbc emits (functions[] per partition,
 * binding triples, passport), in-process test component types, and an
 * in-memory network that polls several engines and carries their
 * SendEnvelope steps to each other.
 */
#ifndef BB_TEST_ENGINE_FIXTURES_H
#define BB_TEST_ENGINE_FIXTURES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bb/ir.h"
#include "bb/plugin.h"
#include "bb/value.h"
#include "bb/engine.h"

#define FX_SYS "ai.bytesandbrains.syscall"
#define FX_WIRE "ai.bytesandbrains.wire"
#define FX_AB "ai.bytesandbrains.address_book"
#define FX_COMP "ai.bytesandbrains.composite"

/* ---- artifacts ------------------------------------------------------------- */

/* New model carrying the ai.bytesandbrains.compiled = v1 passport. */
bb_model *fx_model(void);
/* Function with comma-separated formals / results ("" for none). */
bb_function *fx_fn(bb_model *m, const char *name, const char *inputs, const char *outputs);
/* Node; ports comma-separated, an empty entry ("a,,b") is an omitted input. */
bb_node *fx_op(bb_model *m, bb_function *f, const char *domain, const char *op_type,
               const char *inputs, const char *outputs);
void fx_meta(bb_model *m, bb_node *n, const char *key, const char *value);
void fx_int(bb_model *m, bb_node *n, const char *name, int64_t v);
void fx_str(bb_model *m, bb_node *n, const char *name, const char *v);
void fx_bytes_attr(bb_model *m, bb_node *n, const char *name, const void *data, size_t len);
/* value_info for a value of f. */
void fx_type(bb_model *m, bb_function *f, const char *value, const bb_type_node *t);
/* model metadata ai.bytesandbrains.binding.<target>.<slot> = triple */
void fx_bind(bb_model *m, const char *target, const char *slot, const char *triple);
/* A wire.Recv pinned to /site/<site> with outputs "trigger,payload" (payload
 * typed t when both are given). */
bb_node *fx_recv(bb_model *m, bb_function *f, uint64_t site, const char *trigger,
                 const char *payload, const bb_type_node *t);
/* A chain f: in -> PassThrough x n -> out. */
bb_function *fx_chain(bb_model *m, const char *name, uint32_t n);

/* ---- test component types ----------------------------------------------------- */
/*
 * test::Echo   (Protocol, domain "test.echo")  Echo(x)->x, Later(x)->x (LATER:
 *              the handle is kept, see fx_echo_*), Fail(x) (NOW_ERR), Count(x)->U64,
 *              Control(payload, corr) (control-plane fill target), Flush(x)
 *              (completes every pending Later in-cycle), Wait(x)->x (LATER, a
 *              component timer 100 ns later completes it from on_timer),
 *              Work(U64 n)->U64 2n (LATER, computed through ctx->submit_work),
 *              Peers(x)->PeerIdVec (ctx->peers), Addrs(PeerId)->AddressVec
 *              (ctx->peer_addresses), Share(x)->x (ctx->shared_get of "fx.share",
 *              else shared_put of x: the value the host shares), Bootstrap (NOW,
 *              or LATER for slots named "later*"); snapshot/restore of a
 *              counter; on_answer records the outcomes of control-plane
 *              requests (answer_*).
 * test::OldEcho test::Echo as a plugin built before ABI 2.2 declares it: its
 *              struct_size ends before on_answer (which the table still
 *              points at: the host must not read it).
 * test::Model  (Model, domain ai.bytesandbrains.role.model) Params(t)->f32[4],
 *              LoadParameters(p)->CommandId, Train(t)->f32[4] (params + delta,
 *              delta = config number, default 1), NumSamples(t)->U64 (config).
 * test::Agg    (Aggregator, "test.agg") FedAvg(ResponseBatch of Composite(params,
 *              n)) -> f32[4] weighted mean; Contribute(t)->CommandId; Count(t)->U64.
 * test::Fold   (Aggregator, the role domain: its Contribute folds responses as
 *              they land) Contribute(ResponseBatch of U64, metadata?) -> CommandId
 *              (responses so far); records every call (fx_fold_last); refuses a
 *              response of FX_FOLD_REFUSED; sum and count in its snapshot.
 * test::Selector (PeerSelector, role.peer_selector) Sample(t)->PeerIdVec of the
 *              connected peers running the node's "target" attribute.
 * test::Backend  (Backend, ai.onnx) Add(a,b), Relu(a); materialize_from_wire counts.
 * test::Dep    (Protocol, "test.dep") depends on Backend "compute"; Plus(a,b) calls
 *              compute.Add through ctx->call_dependency.
 */
const bb_engine_registry *fx_registry(void);
/* Forget instances recorded by earlier tests. */
void fx_reset(void);

typedef struct fx_echo {
    uint64_t calls;
    bb_completion *waits[16];   /* Wait: completed by on_timer */
    bb_value *wait_in[16];
    int n_waits, timers_fired;
    bb_completion *pending[64];
    bb_value *pending_in[64];
    int n_pending;
    int n_control;
    bb_value *last_control;
    int learn_refused; /* add_peer refusals of "learn" payloads */
    bool bootstrapped;
    bb_completion *boot_pending;
    const char *slot;
    bb_ctx *ctx;
    /* on_answer: the outcomes of control-plane requests it sent */
    uint64_t answer_token[16];
    int answer_status[16];
    bb_value *answer[16]; /* Bytes: the answer or the failure's message */
    int n_answers;
} fx_echo;
fx_echo *fx_echo_at(int i);
/* The live test::Echo instance created for slot (NULL if none). */
fx_echo *fx_echo_by_slot(const char *slot);
int fx_echo_count(void);

#define FX_FOLD_CALLS 16
#define FX_FOLD_REFUSED 666
typedef struct fx_fold {
    int calls;
    size_t sizes[FX_FOLD_CALLS];  /* responses in each call's batch */
    uint64_t tags[FX_FOLD_CALLS]; /* its RequestId metadata, 0 without */
    uint64_t sum, count;          /* of the U64 responses */
} fx_fold;
/* The test::Fold instance created last (NULL if none alive). */
fx_fold *fx_fold_last(void);
size_t fx_backend_materialized(void);

/* ---- hand-packed envelopes ------------------------------------------------------------ */

/* One SlotFill: /site/<site>, or the raw suffix when suffix is set. */
typedef struct fx_fill {
    uint64_t site;
    const uint8_t *suffix;
    size_t suffix_len;
    const uint8_t *payload;
    size_t len;
    bool trigger_only;
} fx_fill;

typedef struct fx_env {
    const fx_fill *fills;
    size_t n_fills;
    int corr;                   /* 0 none, 1 request, 2 response */
    uint64_t wire_req_id;
    uint64_t deadline_ns, sent_at_ns;
    const bb_engine_addr *src;  /* src_peer_addresses (also sent as the destination list) */
    size_t n_src;
} fx_env;

/* WireEnvelope bytes packed by protobuf-c, the reference encoder (malloc'd). */
uint8_t *fx_envelope(const fx_env *env, size_t *len);
/* An envelope with one fill carrying U64 v to /site/<site>. */
uint8_t *fx_envelope_u64(uint64_t site, uint64_t v, uint64_t sent_at, uint64_t deadline, size_t *len);

/* ---- engines and an in-memory network -------------------------------------------- */

/* Engine with PeerId from seed byte, address /ip4/127.0.0.1/tcp/<port>.
 * cfg may be NULL (defaults). */
bb_engine *fx_engine(uint8_t seed, uint16_t port, const bb_engine_config *cfg);
bb_peerid fx_peer(uint8_t seed);
/* Peer n of the ones an echo's "learn" Control payload adds. */
bb_peerid fx_taught_peer(uint16_t n);
/* Binary /ip4/127.0.0.1/tcp/<port> into out (returns length). */
size_t fx_addr(uint16_t port, uint8_t out[32]);
/* e learns the address of fx_peer(seed) (port 7000 + seed, as fx_engine
 * nodes are made in the tests). A bb status. */
int fx_know(bb_engine *e, uint8_t seed);
/* Install comma-separated targets with fx_registry(). */
int fx_install(bb_engine *e, bb_model *m, const char *targets, bb_error *err);

/* A recorded step (deep copy). */
typedef struct fx_rec {
    bb_step_kind kind;
    bb_exec_id exec;
    char *a, *b, *c, *d; /* target/topic, node/op_type, message/detail ... */
    bb_value *value;
    int infra, sub;
    uint64_t count;
    bb_peerid peer;
    size_t len;
    uint8_t *bytes;      /* SEND_ENVELOPE up to FX_REC_BYTES_MAX: the envelope (a copy) */
    size_t bytes_len;
} fx_rec;
#define FX_REC_BYTES_MAX 1024

typedef struct fx_log {
    fx_rec *v;
    size_t n, cap;
} fx_log;

void fx_log_add(fx_log *l, const bb_step *s);
/* A SendEnvelope's envelope as one malloc'd buffer (bytes, or the gather's
 * pieces end to end), or NULL when out of memory. */
uint8_t *fx_send_bytes(const bb_step *s);
void fx_log_free(fx_log *l);
size_t fx_log_count(const fx_log *l, bb_step_kind kind);
/* i-th AppEvent with this topic (NULL topic: any), or NULL. */
const fx_rec *fx_log_app(const fx_log *l, const char *topic, size_t i);
const fx_rec *fx_log_nth(const fx_log *l, bb_step_kind kind, size_t i);
/* First infra step of kind (and sub when sub >= 0). */
const fx_rec *fx_log_infra(const fx_log *l, int infra, int sub);

typedef struct fx_net {
    bb_engine *e[16];
    fx_log log[16];
    int n;
    uint64_t now;
    size_t delivered;
    bool drop_all; /* lose every envelope (a dead link) */
} fx_net;

int fx_net_add(fx_net *net, bb_engine *e);
/* Poll every engine until none has work (or rounds run out), carrying
 * envelopes between them. Returns the number of rounds. */
int fx_net_run(fx_net *net, int max_rounds);
/* Poll one engine once at net->now, logging its steps and carrying its
 * envelopes (a gathered one as its pieces end to end). */
void fx_net_poll(fx_net *net, int i);
void fx_net_free(fx_net *net); /* frees logs and engines */

/* Poll a single engine (no network) until idle, logging into log. */
int fx_run(bb_engine *e, fx_log *log, uint64_t now, int max_rounds);

/* Value helpers */
bb_value *fx_f32(const float *v, size_t n);
bool fx_f32_eq(const bb_value *v, const float *want, size_t n);

#endif
