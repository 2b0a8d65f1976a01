/*
 * dht.h — internal interface of the dht plugin: dht::Kademlia, a Kademlia
 * DHT (Maymounkov & Mazières 2002) as a Protocol component.
 *
 *   routing.c   256-bit keys (SHA-256), XOR distance, k-buckets with
 *               ping-before-evict, the k closest contacts to a key
 *   lookup.c    iterative lookups: α parallel FindNode / FindValue RPCs
 *               until the k closest live nodes have answered; Put's Stores
 *   store.c     the records this node keeps (small values with expiry)
 *   rpc.c       the RPC payloads, the answers to other nodes' RPCs, and
 *               the table of this node's RPCs in flight
 *   kademlia.c  the component: config, ops, bootstrap, refresh, snapshot
 *
 * Every RPC is a control-plane request between the Kademlia components of
 * two nodes (bb-plugin(7) CONTROL PLANE); the sender's PeerId is the one
 * the transport authenticated, and every node that talks to this one is a
 * contact seen. Everything a peer sends is untrusted and decoded with
 * bounds. State lives in the instance; randomness comes from
 * ctx->rng_u64, time from ctx->now_ns and the engine's timers.
 */
#ifndef BB_DHT_INTERNAL_H
#define BB_DHT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bb/bytes.h>
#include <bb/peerid.h>
#include <bb/plugin.h>

#include "plugins/common/plugin_peer.h"

#define KAD_NAME "dht::Kademlia"
#define KAD_DOMAIN "bb-dht.Kademlia.atomic"
#define KAD_KEY 32
#define KAD_BUCKETS 256
#define KAD_K_MAX 64
#define KAD_ALPHA_MAX 16
#define KAD_MAX_LOOKUPS 64
#define KAD_MAX_RPCS 1024
#define KAD_MAX_SEEDS 16
#define KAD_MAX_KEY_BYTES 1024   /* a key as given, before it is hashed */
#define KAD_MS 1000000ull
#define KAD_TIMER_REFRESH 1
#define KAD_TIMER_FINISH 0x100 /* + lookup index: a lookup that ended in its own dispatch */

typedef struct kad_key {
    uint8_t b[KAD_KEY];
} kad_key;

typedef struct kad_contact {
    bb_peerid id;
    kad_key key;
    uint64_t seen_ns;
} kad_contact;

/* A k-bucket: contacts whose key shares exactly `index` leading bits with
 * this node's, least recently seen first. */
typedef struct kad_bucket {
    kad_contact *c;      /* [k], allocated on first use */
    uint16_t n;
    uint64_t ping_token; /* ping of c[0] under way (0: none) */
    bool has_cand;
    kad_contact cand;    /* the newcomer waiting for c[0]'s slot */
    uint64_t used_ns;    /* last lookup into this bucket (refresh) */
} kad_bucket;

enum { CAND_NEW, CAND_ASKED, CAND_OK, CAND_FAILED };
typedef struct kad_cand {
    bb_peerid id;
    kad_key key;
    uint8_t state;
    uint8_t depth; /* 0: from this node's table; d: learned from a depth d-1 answer */
} kad_cand;

enum { LK_NODE, LK_VALUE, LK_PUT, LK_SELF };
typedef struct kad_lookup {
    bool used;
    uint8_t kind;
    kad_key target;
    kad_cand *cand; /* shortlist, closest first */
    uint16_t n, cap;
    uint16_t inflight;
    bb_completion *c; /* the op's (NULL: bootstrap / refresh) */
    bool boot;        /* the bootstrap's self lookup */
    uint8_t *value;   /* LK_PUT: to store; LK_VALUE: found */
    size_t value_len;
    bool found;
    uint64_t ttl_ms;
    uint16_t stores_pending, stores_ok;
} kad_lookup;

enum { RPC_FIND, RPC_PING, RPC_STORE };
typedef struct kad_rpc {
    uint64_t token;
    uint8_t kind;
    uint16_t lookup; /* RPC_FIND / RPC_STORE */
    uint16_t bucket; /* RPC_PING */
    bb_peerid peer;
} kad_rpc;

typedef struct kad_record {
    kad_key key;
    uint8_t *value;
    uint32_t len;
    uint64_t expires_ns;
} kad_record;

typedef struct kademlia {
    char who[160];
    uint32_t k, alpha;
    uint64_t rpc_timeout_ns, refresh_ns, record_ttl_ms;
    size_t max_records, max_value;
    bbp_peer_rec seeds[KAD_MAX_SEEDS];
    uint32_t n_seeds;
    bb_peerid self;
    kad_key self_key;
    bool have_self, started;
    kad_bucket buckets[KAD_BUCKETS];
    kad_lookup lookups[KAD_MAX_LOOKUPS];
    kad_rpc *rpcs; /* [KAD_MAX_RPCS] */
    size_t n_rpcs;
    kad_record *records; /* [max_records] */
    size_t n_records;
    bb_completion *boot; /* the component bootstrap, until its self lookup ends */
    bool dispatching;    /* inside a dispatch or bootstrap that may start a lookup */
    kad_contact *restored; /* a restored table, placed once this node's key is known */
    size_t n_restored;
} kademlia;

/* ---- routing.c ---------------------------------------------------------------------------- */
void kad_key_of(const uint8_t *p, size_t n, kad_key *out); /* SHA-256 */
void kad_key_of_peer(const bb_peerid *id, kad_key *out);
/* Leading bits a and b share (256 when equal). */
int kad_cpl(const kad_key *a, const kad_key *b);
/* Is a closer to target than b (XOR distance)? */
bool kad_closer(const kad_key *target, const kad_key *a, const kad_key *b);
/* peer was seen alive: insert it, refresh it, or ping the bucket's least
 * recently seen contact and keep peer as the candidate for its slot. */
void kad_table_seen(kademlia *kd, bb_ctx *ctx, const bb_peerid *peer);
/* peer failed an RPC: out of the table. */
void kad_table_forget(kademlia *kd, const bb_peerid *peer);
/* The ping of bucket b's least recently seen contact ended: alive (it
 * stays, most recent) or not (evicted, the candidate takes its place). */
void kad_table_ping_done(kademlia *kd, uint16_t b, const bb_peerid *pinged, bool alive,
                         uint64_t now);
/* Up to max contacts closest to key, closest first (skip: leave it out, or
 * NULL). Returns how many. */
size_t kad_table_closest(const kademlia *kd, const kad_key *key, const bb_peerid *skip,
                         kad_contact *out, size_t max);
size_t kad_table_count(const kademlia *kd);
/* Put a contact back in its bucket (a restore): at the end, when there is room. */
void kad_table_place(kademlia *kd, const kad_contact *c);
void kad_table_free(kademlia *kd);

/* ---- rpc.c -------------------------------------------------------------------------------- */
/* Send RPC op to peer (a control-plane request) and remember it. BB_OK, or
 * a status when it could not be sent (the peer then counts as failed). */
int kad_rpc_send(kademlia *kd, bb_ctx *ctx, const bb_peerid *peer, const char *op,
                 const uint8_t *payload, size_t len, uint8_t kind, uint16_t lookup,
                 uint16_t bucket);
/* Take the RPC with this token out of the table (false: not ours). */
bool kad_rpc_take(kademlia *kd, uint64_t token, kad_rpc *out);
/* Contacts as an answer: uvarint n, n x record (plugin_peer.h). */
void kad_put_contacts(bb_ctx *ctx, bb_writer *w, const kad_contact *c, size_t n);
/* Decode an answer's contacts (at most k); false when malformed. */
bool kad_get_contacts(bb_reader *rd, uint32_t k, bbp_peer_rec *out, size_t *n);
/* The answers to other nodes' RPCs (NOW; output 0 is the answer). */
bb_dispatch_result kad_rpc_answer(kademlia *kd, bb_ctx *ctx, const bb_dispatch_call *call,
                                  bb_value **outputs, bb_error *err);

/* ---- lookup.c ----------------------------------------------------------------------------- */
/* Start a lookup of target (kind LK_*) for completion c (NULL: internal).
 * value/ttl: what Put stores. The index, or -1 (err filled). */
int kad_lookup_start(kademlia *kd, bb_ctx *ctx, uint8_t kind, const kad_key *target,
                     bb_completion *c, const uint8_t *value, size_t value_len, uint64_t ttl_ms,
                     bb_error *err);
/* An RPC of a lookup ended (status and answer as on_answer got them). */
void kad_lookup_rpc_done(kademlia *kd, bb_ctx *ctx, const kad_rpc *rpc, int status,
                         const uint8_t *p, size_t len);
void kad_lookup_free(kad_lookup *l);
/* KAD_TIMER_FINISH: finish lookup i, which ended inside its dispatch. */
void kad_lookup_finish(kademlia *kd, bb_ctx *ctx, uint16_t i);

/* ---- store.c ------------------------------------------------------------------------------ */
/* Keep value under key for ttl_ms (replacing an older value). BB_OK,
 * BB_ELIMIT (too large), BB_EFULL (no room after dropping the expired). */
int kad_store_put(kademlia *kd, const kad_key *key, const uint8_t *value, size_t len,
                  uint64_t ttl_ms, uint64_t now, bb_error *err);
const kad_record *kad_store_get(kademlia *kd, const kad_key *key, uint64_t now);
void kad_store_expire(kademlia *kd, uint64_t now);
void kad_store_free(kademlia *kd);

#endif
