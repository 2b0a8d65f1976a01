/*
 * transport.h — bbd's network layer on a libuv loop: TCP and UDP carriers
 * of WireEnvelope bytes between nodes (DESIGN.md decision 7, ENGINE.md 6.2,
 * IR_AND_DSL.md Part 8).
 *
 * The transport knows nothing of the engine: it moves opaque envelope bytes
 * between PeerIds and reports what happened through callbacks, all on the
 * loop thread. The daemon wires those callbacks to the engine
 * (bb_engine_deliver_envelope, bb_engine_peer_connected/_disconnected,
 * bb_engine_report_send, bb_engine_add_peer).
 *
 * Security (cfg.security). By default every channel is authenticated and
 * encrypted: TCP runs the libp2p Noise handshake (Noise_XX_25519_
 * ChaChaPoly_SHA256, noise.h; the node's Ed25519 identity signs the Noise
 * static key, noise_payload.h) and then carries its frames in Noise
 * transport messages; UDP runs the same handshake in datagrams and seals
 * every later datagram with an explicit nonce and a replay window. The
 * PeerId a callback names is then the one the peer's key proved — never a
 * claimed field — and a connection dialed for one PeerId that proves
 * another is refused. The daemon's admit callback (access control) runs
 * once the identity is proven, before a channel opens. With security off
 * (debugging only) the same handshake travels in plaintext and proves
 * nothing; two nodes that disagree both fail the handshake with a message
 * saying so.
 *
 * TCP: one connection per peer pair, reused in both directions. The
 * handshake (its PeerId, its listen multiaddrs, the targets it runs) comes
 * first; then envelope frames — uvarint length + the bb_envelope.proto
 * Frame holding the WireEnvelope (frame.h). A simultaneous connect in both
 * directions keeps exactly one connection (the one initiated by the
 * smaller PeerId; the other is drained, not cut). Frames over
 * cfg.max_frame_bytes are refused before allocating and the connection is
 * closed. Envelopes queued for a peer that is not connected are bounded
 * (per peer and in total) and dropped with a counter; reconnects follow
 * the backoff the daemon asks for (a send to a peer without a connection
 * dials it).
 *
 * UDP: one envelope per datagram; envelopes above the datagram payload size
 * are split into fragments and reassembled with bounded memory, a timeout
 * and duplicate fragments ignored (fragment.h). UDP gives no delivery
 * feedback beyond the handshake.
 *
 * Layering (DESIGN.md "Where this is going"): framing (frame.c), then a
 * channel that seals/opens frames (tcp_secure.c: Noise transport messages,
 * or nothing with security off), then the socket.
 */
#ifndef BBD_HOST_TRANSPORT_H
#define BBD_HOST_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "bb/peerid.h"
#include "bb/status.h"

typedef struct bbd_transport bbd_transport;

/* How channels are protected (cfg.security). */
typedef enum bbd_security {
    BBD_SECURITY_NOISE = 0, /* authenticated and encrypted (the default) */
    BBD_SECURITY_OFF = 1    /* plaintext, identities unproven: debugging only */
} bbd_security;

/* A binary multiaddr (borrowed). Same layout as bb_engine_addr. */
typedef struct bbd_addr {
    const uint8_t *data;
    size_t len;
} bbd_addr;

typedef struct bbd_transport_callbacks {
    /* One inbound envelope from `from`; `observed` is the socket address the
     * bytes came from as a multiaddr (may be NULL). bytes are borrowed for
     * the call only. */
    void (*on_envelope)(void *ud, const bb_peerid *from, const bbd_addr *observed,
                        const uint8_t *bytes, size_t len);
    /* A handshake completed: the peer, the listen addresses it claims and
     * the targets it runs (all borrowed for the call). Runs when the peer
     * gets its first open channel (TCP connection or UDP session), not for
     * further ones while it stays connected. */
    void (*on_peer_connected)(void *ud, const bb_peerid *peer, const bbd_addr *listen_addrs,
                              size_t n_addrs, const char *const *targets, size_t n_targets);
    /* The last connection to peer closed (or its UDP session expired). */
    void (*on_peer_disconnected)(void *ud, const bb_peerid *peer);
    /* A send to peer was written to the socket (ok) or given up (connect
     * refused, reset, queue overflow): feeds backoff and peer health. */
    void (*on_send_result)(void *ud, const bb_peerid *peer, bool ok);
    /* A problem worth one log line (bad frame, refused handshake, ...);
     * level is a bb_log_level (bb/plugin.h). Lines caused by remote peers
     * are rate-limited. */
    void (*on_log)(void *ud, int level, const char *msg);
    void *ud;
    /* Optional: on_envelope, but bytes (malloc'd) are given to the callee,
     * which frees them. Used instead of on_envelope for a TCP frame that
     * arrived in a buffer of its own (one that spanned reads: every large
     * frame), so a receiver that keeps the bytes needs no copy. (Last, so
     * positional initializers of the fields above stay valid.) */
    void (*on_envelope_owned)(void *ud, const bb_peerid *from, const bbd_addr *observed,
                              uint8_t *bytes, size_t len);
    /* Optional: may peer (its identity proven, unless security is off)
     * open a channel? NULL admits it; otherwise a short reason, which the
     * transport logs, counts (peers_refused) and — on TCP, when this node
     * is the responder — tells the peer before closing. Asked for every
     * new channel, inbound and outbound. */
    const char *(*admit)(void *ud, const bb_peerid *peer);
    /* Optional: a line caused by a remote peer, for the host's rate limiter
     * (ratelimit.h): kind identifies the line's call site (its format),
     * source the remote address it names ("" when none). Without it such
     * lines go to on_log, BBD_LOG_BURST a second. */
    void (*on_log_remote)(void *ud, int level, const char *kind, const char *source,
                          const char *msg);
} bbd_transport_callbacks;

/* An IPv4 or IPv6 address range (CIDR) for the dial rules. */
typedef struct bbd_cidr {
    int family;          /* AF_INET or AF_INET6 */
    uint8_t addr[16];    /* network address (first 4 bytes for IPv4) */
    uint8_t prefix;      /* 0..32 / 0..128 */
} bbd_cidr;

/* Parse "10.0.0.0/8", "::1/128" or a bare address (a full-length prefix).
 * BB_EINVAL naming text. */
int bbd_cidr_parse(const char *text, bbd_cidr *out, bb_error *err);
/* Does ip (4 bytes for AF_INET, 16 for AF_INET6) fall in c? */
bool bbd_cidr_contains(const bbd_cidr *c, int family, const uint8_t *ip);

typedef struct bbd_transport_config {
    bb_peerid self;                  /* this node's PeerId */
    const char *const *targets;      /* targets this node runs (announced) */
    size_t n_targets;
    size_t max_frame_bytes;          /* one envelope; default 64 MiB */
    size_t max_queue_per_peer_bytes; /* queued while connecting; default 16 MiB */
    size_t max_queue_total_bytes;    /* all peers; default 64 MiB */
    size_t max_connections;          /* default 1024 */
    size_t udp_payload_bytes;        /* fragment size; default 1200 */
    size_t udp_reassembly_bytes;     /* all partial envelopes; default 32 MiB */
    uint64_t udp_reassembly_timeout_ms; /* default 5000 */
    uint64_t connect_timeout_ms;     /* default 3000 */
    uint64_t handshake_timeout_ms;   /* default 3000; also bounds a losing
                                      * connection's drain */
    /* Zero in any field above or below means its default. */
    size_t max_rx_buffer_total_bytes; /* partial inbound frames, all
                                       * connections; default 256 MiB (a
                                       * connection over it stops reading) */
    uint64_t stall_timeout_ms;       /* a partial inbound frame with no new
                                      * bytes for this long closes its
                                      * connection; default 30000 */
    uint64_t udp_session_timeout_ms; /* a UDP session with nothing received
                                      * for this long expires; default 60000 */
    bbd_security security;           /* default BBD_SECURITY_NOISE */
    const bb_keypair *identity;      /* the node's key (NOISE: required); read
                                      * by bbd_transport_new only: it signs the
                                      * transport's static Noise key once and
                                      * is not kept */
    /* Dial rules: an address is dialed only if it is in some dial_allow
     * range (when any is given) and in no dial_deny range; a refused dial
     * is counted (dials_refused). Borrowed, copied by bbd_transport_new. */
    const bbd_cidr *dial_allow, *dial_deny;
    size_t n_dial_allow, n_dial_deny;
    size_t max_connections_per_source; /* TCP connections from one IP at a
                                        * time (inbound); default 64 */
    uint64_t idle_timeout_ms;        /* an open connection with nothing sent or
                                      * received for this long closes; default
                                      * 600000 */
    size_t min_rx_bytes_per_s;       /* a frame in progress must arrive at this
                                      * rate (measured after its first second);
                                      * default 16384 */
} bbd_transport_config;

/* Zeroed config with the defaults above. */
void bbd_transport_config_init(bbd_transport_config *cfg);

/* New transport on loop (cfg and cb copied). NULL with err on failure. */
bbd_transport *bbd_transport_new(uv_loop_t *loop, const bbd_transport_config *cfg,
                                 const bbd_transport_callbacks *cb, bb_error *err);

/* Listen on a /ip4|/ip6 .../tcp/PORT or .../udp/PORT multiaddr (port 0
 * picks a free port). BB_EIO with a message naming the address on failure
 * (e.g. "address already in use"). */
int bbd_transport_listen(bbd_transport *t, const uint8_t *maddr, size_t len, bb_error *err);
/* The bound listen addresses (port 0 resolved), borrowed until the next
 * listen call. */
size_t bbd_transport_listen_addrs(const bbd_transport *t, const bbd_addr **out);

/* Send envelope bytes to peer (takes `bytes`, malloc'd, in every case).
 * The first address of addrs the transport supports is used when no
 * connection exists. Never blocks; BB_EFULL when the peer's queue is over
 * its bound (the envelope is dropped and counted), BB_ENOTFOUND when no
 * address is usable. Also BB_ELIMIT (len over max_frame_bytes), BB_EINVAL
 * (peer is this node), BB_ESTATE (closing). BB_OK means accepted: the
 * outcome comes later through on_send_result (also for a connection that
 * cannot even be started; a frame the socket took at once is reported
 * from the loop's prepare phase, after the caller's work and before the
 * loop waits again); BB_EFULL is reported there too, the other errors
 * only by the return value. */
int bbd_transport_send(bbd_transport *t, const bb_peerid *peer, const bbd_addr *addrs,
                       size_t n_addrs, uint8_t *bytes, size_t len);

/* A piece of an envelope (bbd_transport_send_gather). */
typedef struct bbd_iov {
    const uint8_t *data;
    size_t len;
} bbd_iov;

/* bbd_transport_send for an envelope in pieces: iov[0..n_iov) end to end,
 * len bytes in all, so that a large payload goes out from where it is
 * instead of being copied into one buffer first (TCP writes the pieces as
 * they are; UDP copies them into its datagrams). The transport borrows
 * iov and the memory it points into until it calls release(release_ud):
 * exactly once, on every path (errors too, possibly before this returns).
 * Results as for bbd_transport_send. */
int bbd_transport_send_gather(bbd_transport *t, const bb_peerid *peer, const bbd_addr *addrs,
                              size_t n_addrs, const bbd_iov *iov, size_t n_iov, size_t len,
                              void (*release)(void *ud), void *release_ud);

/* Open a channel to peer unless one is open or being opened: dial the first
 * address of addrs the transport supports (as a send would, without an
 * envelope). *open (may be NULL) tells whether a channel is open now.
 * BB_OK when open or opening; BB_ENOTFOUND when no address is usable;
 * BB_EINVAL (peer is this node), BB_ESTATE (closing), BB_EFULL / BB_EIO
 * when the dial cannot start. A failed dial reports no send result. */
int bbd_transport_connect(bbd_transport *t, const bb_peerid *peer, const bbd_addr *addrs,
                          size_t n_addrs, bool *open);

/* Close every channel to peer (TCP connections, UDP sessions) and fail
 * what is queued for it: the daemon cut it off (access control). */
void bbd_transport_disconnect(bbd_transport *t, const bb_peerid *peer);

/* Counters for metrics and status. */
typedef struct bbd_peer_stats {
    bb_peerid peer;
    bool connected;
    const char *state;          /* "connecting", "handshake", "open", "closed", "udp" */
    uint8_t remote[24];         /* the open channel's socket address (binary
                                 * multiaddr; remote_len 0 without one) */
    size_t remote_len;
    uint64_t bytes_in, bytes_out;
    uint64_t envelopes_in, envelopes_out;
    uint64_t queued_bytes;
    uint64_t dropped;           /* envelopes dropped for this peer */
} bbd_peer_stats;

typedef struct bbd_transport_stats {
    uint64_t bytes_in, bytes_out; /* on the wire, headers and handshakes included */
    uint64_t envelopes_in, envelopes_out;
    uint64_t frames_refused;    /* over the frame cap or malformed (TCP frames,
                                 * handshakes, datagrams) */
    uint64_t queue_dropped;     /* envelopes dropped on queue bounds */
    uint64_t udp_fragments_in, udp_reassembly_dropped; /* dropped: refused
                                 * fragments and timed-out partial envelopes */
    uint64_t udp_fragments_duplicate; /* fragments already received (or of an
                                 * envelope just completed), dropped */
    uint64_t connections_open;  /* TCP connections in any state */
    /* security and admission */
    uint64_t auth_failed;       /* TCP records and UDP datagrams that failed
                                 * authentication (a TCP one closes its
                                 * connection) */
    uint64_t replayed;          /* UDP datagrams refused by the replay window */
    uint64_t unauthenticated;   /* UDP datagrams dropped before decoding: no
                                 * session to open them, or plaintext on a
                                 * secure node */
    uint64_t handshakes_failed; /* handshakes that failed: malformed, bad
                                 * signature, wrong peer, security mismatch */
    uint64_t peers_refused;     /* handshakes refused by the admit callback */
    uint64_t dials_refused;     /* dials refused by the dial rules */
    uint64_t connections_refused; /* inbound connections refused: the source's
                                   * share, or the table full of open ones */
    uint64_t connections_evicted; /* unauthenticated connections closed to make
                                   * room for a new one */
    uint64_t slow_closed;       /* connections closed for idling or for a frame
                                 * arriving under min_rx_bytes_per_s */
    uint64_t rx_buffered_bytes; /* buffers of partial inbound frames (the
                                 * receive budget's use) */
    uint64_t tx_sealed_bytes;   /* large frames' sealed pieces handed to sockets,
                                 * not yet taken (each connection holds at most
                                 * two pieces of ~1 MiB) */
    uint64_t tx_sealed_peak;    /* the most tx_sealed_bytes has been */
} bbd_transport_stats;

void bbd_transport_stats_get(const bbd_transport *t, bbd_transport_stats *out);
/* i-th known peer's stats; false past the end. */
bool bbd_transport_peer_stats_at(const bbd_transport *t, size_t i, bbd_peer_stats *out);
/* The stats of peer (a hash lookup); false when the transport does not know it. */
bool bbd_transport_peer_stats(const bbd_transport *t, const bb_peerid *peer, bbd_peer_stats *out);

/* Close every socket; done(ud) runs on the loop once all handles closed,
 * after which the transport is freed. */
void bbd_transport_close(bbd_transport *t, void (*done)(void *ud), void *ud);

#endif
