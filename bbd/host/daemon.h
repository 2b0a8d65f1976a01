/*
 * daemon.h — bbd, the daemon (bbd(8)): one node running the targets of a
 * compiled artifact on a libuv loop.
 *
 * The loop owns everything and everything runs on it (the engine thread):
 * the transport's callbacks feed the engine, the engine's wake callback
 * (any thread: pushes onto its ingress) is a uv_async, one timerfd follows
 * bb_engine_next_deadline, an idle handle re-polls while work is pending so
 * sockets are still served between polls, and the steps of every poll are
 * acted on (daemon.c). The control socket's commands (daemon_control.c)
 * and the metrics page (daemon_metrics.c) read the same state.
 *
 * Shutdown (SIGTERM / SIGINT): Shutdown lifecycle phase, Snapshot phase,
 * snapshot written to the state dir, every handle closed, exit 0.
 */
#ifndef BBD_HOST_DAEMON_H
#define BBD_HOST_DAEMON_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "bb/ir.h"
#include "bb/peerid.h"
#include "bb/engine.h"
#include "bbd/host/config.h"
#include "bbd/host/control.h"
#include "bbd/host/log.h"
#include "bbd/host/metrics.h"
#include "bbd/host/notify.h"
#include "bbd/host/ratelimit.h"
#include "bbd/host/timer.h"
#include "bbd/host/registry.h"
#include "bbd/host/transport.h"

/* Exit codes (bbd(8)). */
enum { BBD_EXIT_OK = 0, BBD_EXIT_FAIL = 1, BBD_EXIT_USAGE = 2 };

typedef struct bbd_wait bbd_wait;   /* an invoke waiting for an AppEvent */
typedef struct bbd_job bbd_job;     /* a worker-pool job */
typedef struct bbd_dial_peer bbd_dial_peer; /* a peer kept connected (daemon_dial.c) */
typedef struct bbd_learned bbd_learned; /* a peer learned from a connection (daemon_book.c) */

typedef struct bbd_daemon {
    bbd_config *cfg;
    uv_loop_t loop;
    bool loop_ready;
    bbd_log log;
    bbd_ratelimit ratelimit; /* every line a remote party can cause */
    bbd_timer housekeeping; /* once a second: suppressed lines, the idle large block */
    bbd_notify notify;
    int lock_fd;

    bb_peerid self;
    char self_text[BB_PEERID_TEXT_MAX];
    bb_model *model;
    bbd_registry *reg;
    bb_engine *engine;
    bbd_transport *transport;
    bbd_control *control;
    bbd_metrics *metrics;
    char snapshot_path[4096];

    uv_async_t wake;
    uv_thread_t loop_thread; /* engine_wake from it needs no uv_async */
    uv_idle_t repoll;
    bbd_timer deadline; /* the engine's next deadline (daemon.c: arm_deadline) */
    uint64_t deadline_armed; /* the engine time it is armed for, 0: none */
    bbd_timer notify_tick; /* WATCHDOG=1 and STATUS= (daemon.c: on_notify_tick) */
    uint64_t status_due_ms; /* loop time of the next STATUS= refresh */
    uv_signal_t sig_term, sig_int, sig_hup;
    bool handles_open;
    int closing; /* handles and subsystems still closing */

    bb_steps steps;
    bool polling;
    bool stopping;
    int exit_code;
    bool restored;
    uint64_t started_ns, ready_ns;

    /* daemon counters (metrics, status) */
    uint64_t polls;
    uint64_t backoff_dropped;  /* sends held back: the peer was in cooldown */
    uint64_t send_errors;      /* the transport refused a send */
    uint64_t deliver_errors;   /* inbound envelopes the engine refused */
    uint64_t app_events;
    uint64_t snapshots_written;
    uint64_t book_evicted;     /* learned peers dropped for max_peers_per_source */
    uint64_t log_suppressed;   /* lines the rate limiter held back */

    bbd_wait *waits;
    bbd_job *jobs;

    uv_timer_t dial_timer;     /* daemon_dial.c */
    bbd_dial_peer *dial;       /* configured peers first, then dropped ones */
    size_t n_dial, dial_cap;

    bbd_learned *learned;      /* daemon_book.c */
    size_t n_learned, cap_learned, max_learned;
} bbd_daemon;

/* Run a node with a finished config (bbd_config_finish). Returns the exit
 * code. Errors before the loop starts print "bbd: error: ..." on stderr. */
int bbd_daemon_main(bbd_config *cfg);

/* ---- shared between daemon*.c ---------------------------------------------------- */

/* Envelopes larger than this go to a peer as a chunk stream (the engine's
 * stream_chunk_bytes): half the frame limit, at most BBD_STREAM_CHUNK_MAX,
 * so no frame exceeds the limit however large a tensor. */
#define BBD_STREAM_CHUNK_MAX ((size_t)16 << 20)
size_t bbd_stream_chunk_bytes(const bbd_transport_config *t);

uint64_t bbd_now_ns(void);
/* A PeerId as text for logs and replies ("?" when there is none). */
const char *bbd_daemon_peer_text(const bb_peerid *p, char buf[BB_PEERID_TEXT_MAX]);
/* Ask for a poll as soon as the loop comes around. */
void bbd_daemon_kick(bbd_daemon *d);
/* Write a snapshot now (between polls). *bytes gets its size. */
int bbd_daemon_snapshot(bbd_daemon *d, size_t *bytes, bb_error *err);
/* "ready", "restoring", "stopping" and a one-line summary for STATUS=. */
void bbd_daemon_summary(const bbd_daemon *d, char *out, size_t cap);

/* A log line someone outside the node caused (kind: what happened, a
 * static text; source: who, or NULL), through the host's one rate limiter
 * (ratelimit.h). Returns false when it was suppressed. The line is built
 * only when allowed: begin with bbd_daemon_log_remote_begin, which returns
 * false when suppressed (or filtered by level), then add fields and end. */
bool bbd_daemon_log_remote_begin(bbd_daemon *d, bbd_logline *l, bb_log_level level,
                                 const char *comp, const char *kind, const char *source,
                                 const char *msg);

/* daemon_control.c */
extern const bbd_control_ops bbd_daemon_control_ops;
/* An AppEvent arrived: answer invokes waiting for its topic. */
void bbd_daemon_waits_event(bbd_daemon *d, const char *topic, const cJSON *ev);
void bbd_daemon_waits_free(bbd_daemon *d);
/* JSON objects describing peers and counters (status, peers). */
cJSON *bbd_daemon_peers_json(bbd_daemon *d);
cJSON *bbd_daemon_counters_json(const bbd_daemon *d);

/* daemon_dial.c: keep a connection to every configured peer and redial
 * dropped ones for a while, reporting failed dials to the engine. init with
 * the other handles; dial when ready (and from its timer); dial_lost when
 * the last connection to a peer closed, dial_found when one opened. */
void bbd_daemon_dial_init(bbd_daemon *d);
void bbd_daemon_dial(bbd_daemon *d);
void bbd_daemon_dial_lost(bbd_daemon *d, const bb_peerid *peer);
void bbd_daemon_dial_found(bbd_daemon *d, const bb_peerid *peer);
/* Stop redialing peer (it left the address book). */
void bbd_daemon_dial_forget(bbd_daemon *d, const bb_peerid *peer);

/* daemon_book.c: what peers may put in the address book (at most
 * max_peers_per_source learned peers per IP address) and where a dropped
 * peer is redialed (only at addresses on the IP it came from). init with
 * the engine; connected / lost from the transport's callbacks; source:
 * may addr be dialed to reach peer? */
void bbd_daemon_book_init(bbd_daemon *d);
void bbd_daemon_book_connected(bbd_daemon *d, const bb_peerid *peer);
void bbd_daemon_book_lost(bbd_daemon *d, const bb_peerid *peer);
bool bbd_daemon_book_source(bbd_daemon *d, const bb_peerid *peer, const bbd_addr *addr);

/* daemon_access.c: the allow / deny lists (bbd(8) ACCESS CONTROL).
 * admit is the transport's admit callback (ud: the daemon); access_apply
 * puts the config's lists on the engine (after a restore) and warns when
 * security is off; cmd_access runs the control command "access" (NULL
 * with why on a bad request). */
const char *bbd_daemon_admit(void *ud, const bb_peerid *peer);
/* Load the artifact into d->model; with require_signed_by, only when it
 * carries a valid signature by one of those keys (bb/model_sign.h), the
 * bytes verified being the bytes loaded. */
int bbd_daemon_load_artifact(bbd_daemon *d, bb_error *err);
int bbd_daemon_access_apply(bbd_daemon *d, bb_error *err);
cJSON *bbd_daemon_cmd_access(bbd_daemon *d, const cJSON *req, char *why, size_t cap);

/* daemon_metrics.c */
void bbd_daemon_render_metrics(void *daemon, bbd_mtext *out);

/* A uint64_t field of a stats struct as status shows it (its key) and as
 * the metrics page does (bbd_<family>_<key>): one list per struct, so the
 * two always agree. Each list ends with a NULL key. */
typedef struct bbd_stat_field {
    const char *key;
    const char *help;
    bool gauge;    /* goes up and down (else it only grows) */
    size_t offset; /* of the uint64_t in its struct */
} bbd_stat_field;

extern const bbd_stat_field BBD_DAEMON_COUNTERS[];  /* of bbd_daemon */
extern const bbd_stat_field BBD_TRANSPORT_TOTALS[]; /* of bbd_transport_stats */
extern const bbd_stat_field BBD_PEER_TOTALS[];      /* of bbd_peer_stats */
extern const bbd_stat_field BBD_CONTROL_TOTALS[];   /* of bbd_control_stats */
uint64_t bbd_stat_value(const bbd_stat_field *f, const void *stats);

#endif
