/*
 * control.h — the control socket: a Unix stream socket (mode 0600)
 * speaking JSON lines, one request object per line, one reply object per
 * line (bbctl(1) is the client; bbd(8) lists the commands).
 *
 * This file is the socket side only: accepting clients, framing lines,
 * parsing JSON, writing replies and streaming events to watchers. What a
 * command does is the daemon's handler (daemon_control.c).
 *
 * Every byte from a client is untrusted: a line longer than max_line gets
 * an error reply and the client is disconnected; a line that is not a
 * JSON object gets an error reply.
 *
 * Output is bounded per client and in total (bbd_control_limits):
 *   - a client whose replies wait unread (client_output_bytes or more
 *     queued) is not read from until they drain: pipelining requests
 *     without reading costs its socket buffers, not the daemon's memory;
 *   - a watcher whose events would take it past client_output_bytes, or
 *     all clients past output_budget_bytes, is dropped (a log line, the
 *     watchers_dropped counter): events are not held for a slow reader;
 *   - a reply that alone would take all clients past the budget is
 *     replaced by an error reply saying so.
 * Slots: at most max_clients are connected. A client that sent nothing
 * for idle_timeout_ms and waits for nothing (no deferred reply, not a
 * watcher) is closed (idle_closed). When every slot is taken, a new client
 * evicts the one idle longest (evicted; non-watchers first) — so clients
 * that connect and sit there cannot lock the operator out; only when every
 * client is waiting for a reply is the new one refused with an error line.
 *
 * A stale socket file left by a crashed bbd is replaced; a socket some
 * live process answers on is an error ("in use").
 */
#ifndef BBD_HOST_CONTROL_H
#define BBD_HOST_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>
#include <uv.h>

#include "bb/status.h"

typedef struct bbd_control bbd_control;
typedef struct bbd_control_client bbd_control_client;

/* Event kinds a watcher may select (bit mask). */
enum {
    BBD_WATCH_APP = 1u << 0,       /* AppEvent */
    BBD_WATCH_FAILURE = 1u << 1,   /* OpFailed, PeerResolveFailed, BootstrapFailed */
    BBD_WATCH_PEER = 1u << 2,      /* PeerDown, PeerUp, connected, disconnected */
    BBD_WATCH_BOOTSTRAP = 1u << 3, /* BootstrapComplete, WaitingOnBootstrap */
    BBD_WATCH_INFRA = 1u << 4,     /* InfraEvent */
    BBD_WATCH_ALL = 0x1fu
};

typedef struct bbd_control_ops {
    /* Run one request (a JSON object). Return the reply (the control takes
     * it), or NULL after setting *deferred when the reply comes later
     * through bbd_control_reply. */
    cJSON *(*handle)(void *ud, bbd_control_client *c, const cJSON *req, bool *deferred);
    /* The client is going away (its pointer dies after this returns). */
    void (*client_closed)(void *ud, bbd_control_client *c);
    void *ud;
    /* Optional: a client was dropped, evicted or refused (one line; level
     * is a bb_log_level). */
    void (*log)(void *ud, int level, const char *msg);
} bbd_control_ops;

typedef struct bbd_control_limits {
    size_t max_line;            /* longest request line */
    size_t max_clients;         /* connected at once */
    size_t client_output_bytes; /* queued for one client (see above) */
    size_t output_budget_bytes; /* queued for all clients together */
    uint64_t idle_timeout_ms;   /* 0: idle clients stay */
} bbd_control_limits;

/* What the limits did, for status and the metrics page. */
typedef struct bbd_control_stats {
    uint64_t queued_bytes;     /* output waiting now (gauge) */
    uint64_t watchers_dropped; /* watchers that did not keep up */
    uint64_t idle_closed;      /* clients closed after idle_timeout_ms */
    uint64_t evicted;          /* idle clients closed for a new one */
    uint64_t refused;          /* clients refused: every slot busy */
    uint64_t replies_refused;  /* replies over the output budget */
} bbd_control_stats;

/* Listen on path. BB_EIO / BB_ESTATE name the path. */
int bbd_control_start(uv_loop_t *loop, const char *path, const bbd_control_limits *limits,
                      const bbd_control_ops *ops, bbd_control **out, bb_error *err);
void bbd_control_stats_get(const bbd_control *ctl, bbd_control_stats *out);
/* Close every client and the socket, remove the socket file; done(ud)
 * runs once every handle closed, then the control is freed. */
void bbd_control_close(bbd_control *ctl, void (*done)(void *ud), void *ud);

/* Send a reply line (deferred replies, and streamed lines). Takes reply. */
void bbd_control_reply(bbd_control_client *c, cJSON *reply);

/* Make c a watcher of the given kinds; topics (NULL or empty: all) filter
 * AppEvents by topic (the control copies them). */
int bbd_control_watch(bbd_control_client *c, unsigned kinds, const char *const *topics,
                      size_t n_topics);
/* True when some watcher wants this kind (skip building events nobody reads). */
bool bbd_control_has_watchers(const bbd_control *ctl, unsigned kind);
/* Stream ev (not taken) to every watcher that selected kind (and, for
 * BBD_WATCH_APP, topic). */
void bbd_control_publish(bbd_control *ctl, unsigned kind, const char *topic, const cJSON *ev);

/* Per-client slot for the handler's own data. */
void bbd_control_client_set_user(bbd_control_client *c, void *user);
void *bbd_control_client_user(const bbd_control_client *c);
size_t bbd_control_client_count(const bbd_control *ctl);
/* Clients that asked to watch (status shows it, so a client knows its
 * watch is in place). */
size_t bbd_control_watcher_count(const bbd_control *ctl);

#endif
