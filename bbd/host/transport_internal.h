/*
 * transport_internal.h — the state shared by the transport's files:
 * transport.c (public API, listen, routing, close), transport_peers.c
 * (peer table, send queues and their bounds, connect/disconnect reports),
 * transport_rules.c (dial rules, per-source limits), tcp.c (connections,
 * the handshake's checks, simultaneous-connect resolution, writes),
 * tcp_secure.c (the Noise handshake on a connection and sealing frames),
 * tcp_read.c (inbound records and frames with bounded buffers), udp.c
 * (sockets, sessions, fragmentation, reassembly) and resolve.c (host names).
 *
 * Ownership: the transport owns every peer, connection and session. A
 * connection or session is freed only from its libuv close callback, and a
 * peer only when nothing points at it (refs == 0), so pointers held across
 * a user callback stay valid; user callbacks may call bbd_transport_send and
 * bbd_transport_close.
 */
#ifndef BBD_HOST_TRANSPORT_INTERNAL_H
#define BBD_HOST_TRANSPORT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "bb/multiaddr.h"
#include "bb/peerid.h"
#include "bb/plugin.h" /* bb_log_level: the levels given to on_log */
#include "bbd/host/fragment.h"
#include "bbd/host/fragment_reassembly.h"
#include "bbd/host/frame.h"
#include "bbd/host/timer.h"
#include "bbd/host/handshake.h"
#include "bbd/host/noise.h"
#include "bbd/host/replay.h"
#include "bbd/host/transport.h"

#define BBD_ADDR_BYTES 24          /* a binary /ip6/../tcp/.. is 21 bytes */
#define BBD_MAX_LISTEN BBD_HANDSHAKE_MAX_ADDRS
#define BBD_RX_SHARED (256 * 1024) /* one read into the shared buffer */
/* A Noise message on a stream: u16 big-endian length, then the message. */
#define BBD_RECORD_HEADER 2
#define BBD_RECORD_OVERHEAD (BBD_RECORD_HEADER + BBD_NOISE_TAGLEN)
/* First allocation for a large frame: 1 MiB of payload and room for the
 * envelope around it, so a 1 MiB tensor lands without a realloc copy. */
#define BBD_RX_EAGER (1024 * 1024 + 64 * 1024)
#define BBD_UDP_TICK_MS 50         /* session and reassembly housekeeping */
#define BBD_LOG_BURST 20           /* peer-caused log lines per second */

typedef struct tcp_conn tcp_conn;
typedef struct udp_sock udp_sock;
typedef struct udp_session udp_session;
typedef struct bbd_resolve bbd_resolve;

/* An envelope on its way out: one malloc'd buffer (bytes), or pieces
 * borrowed until release(ud) (bytes NULL). len: its size. */
typedef struct bbd_payload {
    uint8_t *bytes;
    const bbd_iov *iov;
    size_t n_iov;
    size_t len;
    void (*release)(void *ud);
    void *ud;
} bbd_payload;

/* Free the bytes or release the pieces. */
void bbd__payload_free(bbd_payload *pl);

/* An envelope waiting for a channel to its peer. */
typedef struct bbd_pending {
    struct bbd_pending *next;
    bbd_payload pl;
} bbd_pending;

/* A send that completed inside the call that made it, reported later. */
typedef struct bbd_report {
    struct bbd_peer *peer;
    size_t len;
} bbd_report;

typedef struct bbd_peer {
    bb_peerid id;
    struct bbd_peer *hnext;   /* hash chain */
    size_t index;             /* in transport->peers */
    tcp_conn *active;         /* OPEN connection: sends go here */
    tcp_conn *dialing;        /* our connection being set up */
    udp_session *udp;         /* established UDP session (sends when no TCP) */
    udp_session *udp_dialing; /* HELLO sent, waiting for the answer */
    bbd_resolve *resolving;   /* a host name being resolved before a dial (resolve.c) */
    size_t refs;              /* conns, sessions and in-flight sends naming it */
    bool connected;           /* on_peer_connected reported, not yet disconnected */
    bbd_pending *q_head, *q_tail;
    size_t q_count;
    size_t held_bytes;        /* queued + being written: the per-peer bound */
    uint64_t bytes_in, bytes_out, envelopes_in, envelopes_out, dropped;
} bbd_peer;

typedef enum conn_state {
    CONN_CONNECTING, /* TCP connect in progress (outbound) */
    CONN_HANDSHAKE,  /* connected, waiting for the peer's handshake */
    CONN_OPEN,       /* the peer's one connection */
    CONN_DRAINING,   /* lost a simultaneous connect: read until EOF, no new writes */
    CONN_CLOSING
} conn_state;

struct tcp_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_connect_t connect_req;
    uv_shutdown_t shutdown_req;
    bbd_transport *t;
    tcp_conn *prev, *next;
    bbd_peer *peer;           /* expected (outbound) or announced (inbound) */
    conn_state state;
    bool outbound;
    bool shut_down;           /* our write side is shutting down ... */
    bool shutdown_done;       /* ... and has */
    bool eof;                 /* the peer shut its write side */
    bool paused;              /* reading stopped: receive budget spent */
    bool counted_source;      /* inbound: counted in its source's share */
    int handles;              /* uv handles still open */
    uint64_t deadline_ms;     /* connect / handshake / drain; 0 = none */
    uint64_t last_progress_ms;
    uint64_t last_active_ms;  /* anything read or written (idle timeout) */
    uint64_t opened_ms;       /* accepted or connected */
    uint64_t seq;             /* order of creation (the oldest is evicted first) */
    uint8_t remote[BBD_ADDR_BYTES];   /* remote socket address as a multiaddr */
    size_t remote_len;
    uint8_t observed[BBD_ADDR_BYTES]; /* reported to on_envelope */
    size_t observed_len;
    /* receive state (tcp_read.c) */
    uint8_t hdr[BBD_FRAME_HEADER_MAX];
    size_t hdr_len;
    bool in_body, direct;
    bbd_frame_kind body_kind;
    uint8_t *body;
    size_t body_len, body_cap, body_want;
    uint64_t body_started_ms;         /* when the frame in progress began (or resumed) */
    size_t body_started_len;          /* its bytes then */
    /* secure channel (tcp_secure.c; records parsed in tcp_read.c) */
    bbd_noise_hs *noise;              /* during the Noise handshake */
    bool sealed;                      /* tx/rx are set: records are transport messages */
    bool awaiting_admission;          /* initiator: handshake done, verdict pending */
    bool got_bytes;                   /* anything read yet (mode-mismatch check) */
    bbd_noise_cipher tx, rx;
    uint8_t *peer_hs;                 /* initiator: the responder's Handshake */
    size_t peer_hs_len;               /* until it admits us */
    uint8_t rec_hdr[BBD_RECORD_HEADER];
    size_t rec_hdr_len;
    uint8_t *rec;                     /* a record split across reads */
    size_t rec_len, rec_want;         /* rec_want: the record's size, 0 = none */
    bool rec_direct;                  /* this read goes straight into rec */
    /* large frames sealed as the socket drains, and the frames behind them (tcp.c) */
    struct seal_job *seal_head, *seal_tail;
    unsigned seal_pieces;             /* sealed pieces written, not yet taken */
    bool shutdown_after_seal;         /* shut the write side once the queue is written */
};

struct udp_sock {
    uv_udp_t udp;
    bbd_transport *t;
    int family;
    uint8_t buf[BBD_DGRAM_MAX_BYTES];
};

struct udp_session {
    udp_session *hnext;       /* hash chain */
    udp_session *prev, *next; /* all sessions */
    udp_sock *sock;
    struct sockaddr_storage addr;
    uint64_t id;              /* reassembly source key */
    bbd_peer *peer;           /* once a handshake named it */
    bbd_peer *expected;       /* the peer we sent HELLO for (dialing) */
    bool established;
    uint64_t created_ms, dial_started_ms, last_rx_ms, hello_sent_ms;
    uint32_t next_msg_id;
    uint8_t observed[BBD_ADDR_BYTES];
    size_t observed_len;
    /* secure sessions (udp_secure.c) */
    bbd_noise_hs *noise;      /* a handshake in progress, either role */
    uint64_t hs_started_ms;
    uint8_t *last_hs;         /* our last handshake datagram: retransmitted by an
                               * initiator, sent again on a duplicate */
    size_t last_hs_len;
    bool hs_retx;             /* initiator waiting for an answer: retransmit */
    uint8_t hs_e[32];         /* responder: the initiator's e it answered */
    uint8_t last_msg3[16];    /* responder: the tag of the message 3 it took */
    bool sealed;              /* tx / rx are the session's keys */
    bool pending;             /* ptx / prx: an initiator's keys until admitted */
    bbd_noise_cipher tx, rx, ptx, prx;
    uint64_t tx_nonce;
    bbd_replay replay, preplay;
    uint8_t *peer_hs;         /* initiator: the responder's Handshake until admitted */
    size_t peer_hs_len;
};

typedef struct tcp_listener {
    uv_tcp_t tcp;
    bbd_transport *t;
} tcp_listener;

struct bbd_transport {
    uv_loop_t *loop;
    bbd_transport_config cfg;
    char **targets;               /* owned copies of cfg.targets */
    bbd_transport_callbacks cb;
    bool closing;
    size_t handles;               /* uv handles not yet closed, resolutions under way */
    void (*done)(void *ud);
    void *done_ud;

    tcp_listener *tcp_listeners[BBD_MAX_LISTEN];
    size_t n_tcp_listeners;
    udp_sock *udp_socks[BBD_MAX_LISTEN];
    size_t n_udp_socks;
    uint8_t listen_bytes[BBD_MAX_LISTEN][BBD_ADDR_BYTES];
    bbd_addr listen[BBD_MAX_LISTEN];
    size_t n_listen;
    uint8_t *hs;                  /* our encoded Handshake */
    size_t hs_len;
    bool secure;                  /* cfg.security == BBD_SECURITY_NOISE */
    uint8_t static_priv[32], static_pub[32]; /* this transport's Noise key */
    uint8_t id_pk[BB_ED25519_PK_LEN], id_sig[BB_ED25519_SIG_LEN]; /* its signature */
    uint8_t *noise_payload;       /* our libp2p handshake payload (early data: hs) */
    size_t noise_payload_len;
    bbd_cidr *dial_allow, *dial_deny; /* owned copies of the dial rules */
    struct bbd_source *sources;   /* inbound connections per source IP */
    size_t n_sources, cap_sources;

    bbd_peer **peers;             /* dense, for stats */
    size_t n_peers, cap_peers, max_peers;
    bbd_peer **peer_buckets;
    size_t n_peer_buckets;        /* power of two */
    bbd_peer *last_found;         /* bbd__peer_find's hint: sends and reads name
                                     the same peer in a row (NULL when removed) */

    tcp_conn *conns;
    size_t n_conns;               /* not yet closing */
    bbd_timer sweep;             /* idle connections (tcp.c: on_sweep); fd -1 before it exists */
    uint64_t next_conn_seq;
    size_t n_paused;
    size_t rx_charged;            /* partial inbound frame buffers */
    size_t tx_sealed, tx_sealed_peak; /* sealed pieces written, not yet taken (tcp.c) */
    tcp_conn *rx_owner;           /* the one allowed past the budget */

    udp_session *sessions;
    udp_session **sess_buckets;
    size_t n_sess_buckets, n_sessions;
    uint64_t next_session_id;
    uv_timer_t udp_timer;
    bbd_reasm *reasm;
    uint64_t probe_window_ms;
    unsigned probes_in_window;
    uint64_t udp_hs_window_ms;    /* NOISE1s answered from new sources, per second */
    unsigned udp_handshakes_in_window;

    size_t held_total;            /* queued + being written, all peers */
    uv_prepare_t report_prepare;  /* reports sends that completed at once */
    bbd_report *reports;
    size_t n_reports, cap_reports;
    bbd_transport_stats stats;

    uint64_t log_window_ms;
    unsigned logs_in_window, logs_suppressed;
    uint8_t *udp_scratch;         /* BBD_DGRAM_MAX_BYTES + 1: sealing and opening */

    uint8_t rx[BBD_RX_SHARED];    /* shared TCP read buffer */
};

/* ---- transport.c ---------------------------------------------------------------- */
void bbd__log(bbd_transport *t, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), cold));
/* A log line caused by a remote peer: rate-limited to BBD_LOG_BURST/s. */
void bbd__log_remote(bbd_transport *t, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), cold));
void bbd__handle_init(bbd_transport *t);
void bbd__handle_closed(bbd_transport *t);
/* uv_close callback for a handle of the transport's own (data: t). */
void bbd__own_handle_closed(uv_handle_t *h);
/* Text of a binary multiaddr / PeerId for log lines. */
const char *bbd__addr_text(const uint8_t *a, size_t n, char *buf, size_t cap);
const char *bbd__peer_text(const bb_peerid *id, char *buf, size_t cap);
/* A listen socket was bound (rc: how that went): record its address (port
 * 0 resolved), or close it (closed) and fill err naming text. */
int bbd__listen_bound(bbd_transport *t, uv_handle_t *h, int rc, bb_ma_proto proto,
                      const char *text, uv_close_cb closed, bb_error *err);
/* Report a completed handshake (first channel to the peer only). */
void bbd__report_connected(bbd_transport *t, bbd_peer *p, const bbd_handshake *hs);
/* Ask the admit callback about peer: NULL admits, else the reason
 * (counted here; the caller logs it with the connection). */
const char *bbd__admit(bbd_transport *t, const bb_peerid *peer);

/* ---- transport_rules.c -------------------------------------------------------------- */
/* May the transport dial ma? False when the dial rules refuse it (counted
 * and logged). */
bool bbd__dial_allowed(bbd_transport *t, const bb_ma_transport *ma);
int bbd__rules_init(bbd_transport *t);
void bbd__rules_free(bbd_transport *t);
/* An inbound connection from ma's IP: count it against its source's
 * share. False when the source is at max_connections_per_source. */
bool bbd__source_add(bbd_transport *t, const bb_ma_transport *ma);
void bbd__source_remove(bbd_transport *t, const bb_ma_transport *ma);

/* ---- transport_peers.c ------------------------------------------------------------ */
int bbd__peers_init(bbd_transport *t);
void bbd__peers_free(bbd_transport *t);
bbd_peer *bbd__peer_find(const bbd_transport *t, const bb_peerid *id);
/* Find or create; NULL when the table is full of busy peers. */
bbd_peer *bbd__peer_get(bbd_transport *t, const bb_peerid *id);
/* Reserve len bytes of the peer's and the total bound (false: over). */
bool bbd__peer_admit(bbd_transport *t, bbd_peer *p, size_t len);
void bbd__peer_enqueue(bbd_transport *t, bbd_peer *p, bbd_payload *pl);
/* Give up every queued envelope (on_send_result false for each). */
void bbd__peer_fail_queue(bbd_transport *t, bbd_peer *p);
/* Send the queue through the peer's open channel, in order. */
void bbd__peer_flush(bbd_transport *t, bbd_peer *p);
/* Send one admitted envelope through the peer's open channel (takes pl). */
void bbd__peer_channel_send(bbd_transport *t, bbd_peer *p, bbd_payload *pl);
/* An admitted send finished (written, or failed): release and report. */
void bbd__send_done(bbd_transport *t, bbd_peer *p, size_t len, bool ok);
/* An admitted envelope that will not be sent: release it and report. */
void bbd__send_failed(bbd_transport *t, bbd_peer *p, bbd_payload *pl);
/* An admitted send was written within the call that made it: report it
 * from the prepare phase (the sender is not re-entered mid-work, and the
 * loop does not wait first). */
void bbd__send_done_later(bbd_transport *t, bbd_peer *p, size_t len);
int bbd__reports_init(bbd_transport *t);
/* Report what is pending (transport closing: no callbacks). */
void bbd__reports_flush(bbd_transport *t);
/* After a channel change: fail the queue if nothing can carry it and
 * report a disconnect when the last channel went. */
void bbd__peer_update(bbd_transport *t, bbd_peer *p);

/* ---- tcp.c -------------------------------------------------------------------------- */
int bbd__tcp_listen(bbd_transport *t, const struct sockaddr *sa, const char *text,
                    bb_error *err);
int bbd__tcp_dial(bbd_transport *t, bbd_peer *p, const bb_ma_transport *ma);
/* The idle sweep (a periodic timer.h timer); closed by bbd__tcp_close_all. */
int bbd__tcp_sweep_init(bbd_transport *t, bb_error *err);
/* Write one admitted envelope as a frame (takes pl). */
void bbd__tcp_send(bbd_transport *t, tcp_conn *c, bbd_payload *pl);
/* Write a frame on c (takes pl); peer NULL: not an envelope (no report). */
void bbd__tcp_write_frame(tcp_conn *c, bbd_frame_kind kind, bbd_peer *peer, bbd_payload *pl);
/* Write wire bytes as they are (takes buf, malloc'd): a Noise handshake
 * message. */
void bbd__tcp_write_raw(tcp_conn *c, uint8_t *buf, size_t len);
/* A plaintext Handshake frame arrived. */
void bbd__tcp_on_handshake(tcp_conn *c, const uint8_t *payload, size_t len);
/* The peer's identity is proven (or, plaintext, claimed): the checks
 * every connection passes (not this node, the PeerId dialed for, the
 * admit callback). NULL when it may open; else why not for the log (in
 * why), and *reason (may be NULL) the short reason to tell the peer. */
const char *bbd__tcp_check_peer(tcp_conn *c, const bb_peerid *peer, char *why, size_t cap,
                                const char **reason);
/* Open c as the channel to hs's peer (or drain it if another wins). */
void bbd__tcp_open(tcp_conn *c, const bbd_handshake *hs);
/* Stop reading c and close it once what was written to it is out (a
 * refusal the peer should read); why is logged. */
void bbd__tcp_close_when_written(tcp_conn *c, const char *why);
void bbd__tcp_on_eof(tcp_conn *c);
/* Close (why: log line, NULL for none). */
void bbd__tcp_close(tcp_conn *c, const char *why);
void bbd__tcp_arm_timer(tcp_conn *c);
void bbd__tcp_close_all(bbd_transport *t);

/* ---- tcp_secure.c ------------------------------------------------------------------- */
/* Our static Noise key, its signature and payload (bbd_transport_new). */
int bbd__secure_init(bbd_transport *t, const bb_keypair *identity, bb_error *err);
/* Re-encode our payload around the current Handshake. */
int bbd__secure_payload(bbd_transport *t, bb_error *err);
void bbd__secure_free(bbd_transport *t);
/* The connection is up: start the Noise handshake (the initiator writes). */
void bbd__tcp_secure_start(tcp_conn *c);
/* One whole Noise handshake message from the peer. */
void bbd__tcp_noise_message(tcp_conn *c, const uint8_t *msg, size_t len);
/* The responder's Admission frame (initiator). */
void bbd__tcp_on_admission(tcp_conn *c, const uint8_t *payload, size_t len);
/* Do p[0..n) start like a plaintext node's Handshake frame? */
bool bbd__looks_plaintext(const uint8_t *p, size_t n);
/* The first bytes from a peer on a secure connection are not Noise: say
 * whether it looks like a plaintext node (and refuse it), or close. */
void bbd__tcp_not_noise(tcp_conn *c, const uint8_t *data, size_t n);
/* Wire bytes of a frame of `plain` bytes sealed into records. */
size_t bbd__sealed_size(size_t plain);
/* Seal hdr[0..hl) followed by pl's bytes into out (bbd__sealed_size of
 * their total); returns the wire size, 0 when the nonces are used up. */
size_t bbd__tcp_seal(tcp_conn *c, const uint8_t *hdr, size_t hl, const bbd_payload *pl,
                     uint8_t *out);
/* A frame sealed a part at a time (tcp.c: large frames as the socket
 * drains): hdr and pl must stay valid until it is sealed whole. */
typedef struct bbd_seal_cursor {
    const uint8_t *hdr;
    size_t hl;
    const bbd_payload *pl;
    size_t k, off; /* the next byte: piece k (0 the header, then pl's), offset off */
    size_t left;   /* plaintext bytes not sealed yet */
} bbd_seal_cursor;
void bbd__seal_cursor_init(bbd_seal_cursor *cur, const uint8_t *hdr, size_t hl,
                           const bbd_payload *pl);
/* Seal the cursor's next max_plain plaintext bytes at most (whole records
 * but for the last) into out (bbd__sealed_size(max_plain) bytes); returns
 * the wire size, 0 when the nonces are used up. */
size_t bbd__tcp_seal_some(tcp_conn *c, bbd_seal_cursor *cur, size_t max_plain, uint8_t *out);
void bbd__tcp_secure_free(tcp_conn *c);

/* ---- tcp_read.c --------------------------------------------------------------------- */
void bbd__tcp_read_start(tcp_conn *c);
/* Free a partial frame and its budget (connection closing). */
void bbd__tcp_rx_reset(tcp_conn *c);
bool bbd__tcp_rx_partial(const tcp_conn *c);

/* ---- resolve.c ------------------------------------------------------------------------ */
/* Dial p at a host name: resolve it (every dial resolves again), then dial
 * the first usable address. BB_OK while under way (or already resolving). */
int bbd__resolve_dial(bbd_transport *t, bbd_peer *p, const bb_ma_endpoint *ep);
/* Transport closing: cancel the resolutions that have not started. */
void bbd__resolve_cancel_all(bbd_transport *t);

/* ---- udp.c -------------------------------------------------------------------------- */
udp_session *bbd__udp_session_find(bbd_transport *t, const struct sockaddr *sa);
/* A new session for sa (NULL: the table is full of dialing sessions). */
udp_session *bbd__udp_session_new(bbd_transport *t, udp_sock *sock, const struct sockaddr *sa);
void bbd__udp_session_free(bbd_transport *t, udp_session *s);
/* Send len wire bytes to s as one datagram (copied when it must wait). */
void bbd__udp_send_bytes(udp_session *s, const uint8_t *bytes, size_t len);
/* s's handshake named peer p (proven, or claimed with security off): it
 * carries p's traffic now; report the connection. */
void bbd__udp_establish(bbd_transport *t, udp_session *s, bbd_peer *p, const bbd_handshake *hs);
/* A plaintext ENVELOPE or FRAGMENT datagram on an established session
 * (wire: its size on the wire). */
void bbd__udp_on_data(bbd_transport *t, udp_session *s, const bbd_dgram *d, size_t wire);
/* Data from a source without a session: ask it for a handshake (rate-limited). */
void bbd__udp_unknown_source(udp_sock *sock, const struct sockaddr *addr);
/* Stop waiting for s's HELLO / handshake on behalf of its expected peer. */
void bbd__udp_drop_expected(bbd_transport *t, udp_session *s);
/* Tick the session timers within ms (no later than already armed). */
void bbd__udp_arm_tick(bbd_transport *t, uint64_t ms);
int bbd__udp_init(bbd_transport *t);
int bbd__udp_listen(bbd_transport *t, const struct sockaddr *sa, const char *text,
                    bb_error *err);
bool bbd__udp_can_reach(const bbd_transport *t, int family);
int bbd__udp_dial(bbd_transport *t, bbd_peer *p, const bb_ma_transport *ma);
void bbd__udp_send(bbd_transport *t, udp_session *s, bbd_payload *pl);
void bbd__udp_close_all(bbd_transport *t);
/* Forget every UDP session of p. */
void bbd__udp_drop_peer(bbd_transport *t, bbd_peer *p);

/* ---- udp_secure.c ------------------------------------------------------------------- */
/* Start a Noise handshake to s as the initiator (dial or probe). */
void bbd__udp_noise_start(bbd_transport *t, udp_session *s);
/* NOISE1..3 datagrams from addr. */
void bbd__udp_on_noise(udp_sock *sock, const struct sockaddr *addr, const bbd_dgram *d);
/* A SEALED datagram from addr (wire: its size). */
void bbd__udp_on_sealed(udp_sock *sock, const struct sockaddr *addr, const bbd_dgram *d,
                        size_t wire);
/* Seal the plaintext datagram hdr ‖ data (hdr[0] the magic) for s into
 * out[BBD_DGRAM_MAX_BYTES]; returns its size, 0 when it cannot be. */
size_t bbd__udp_seal(udp_session *s, const uint8_t *hdr, size_t hl, const uint8_t *data,
                     size_t n, uint8_t *out);
/* Give up s's handshake in progress (and the dial waiting on it). */
void bbd__udp_noise_drop(bbd_transport *t, udp_session *s);
/* Wipe s's keys and handshake. */
void bbd__udp_secure_free(udp_session *s);
/* The plaintext node's side of a mismatch: a Noise datagram from addr. */
void bbd__udp_security_mismatch(udp_sock *sock, const struct sockaddr *addr, bool peer_secure);

#endif
