/*
 * daemon.c — bbd's node: setup, the host loop around the engine, the steps
 * of every poll, signals, snapshot and shutdown (see daemon.h).
 */
#include "bbd/host/daemon.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bb/arena.h"
#include "bb/artifact.h"
#include "bb/model_io.h"
#include "bb/multiaddr.h"
#include "bb/types.h"
#include "bbd/host/keys.h"
#include "bbd/host/snapshot_file.h"
#include "bbd/host/state_dir.h"
#include "bb/value.h"
#include "bb/value_json.h"

#define DRAIN_POLLS 1000          /* polls to run a lifecycle phase at shutdown */
#define STATUS_PERIOD_MS 10000    /* STATUS= refresh */
#define LARGE_BLOCK_IDLE_MS 5000  /* on_housekeeping */
#define EVENT_JSON_MAX_ELEMS 4096 /* tensor elements printed inline for watchers */
#define MALLOC_KEEP_BYTES (32 << 20) /* freed memory malloc keeps (see bbd_daemon_main) */

struct bbd_job {
    uv_work_t req;
    bbd_daemon *d;
    void (*fn)(void *arg);
    void *arg;
    uint64_t token;
    bbd_job *prev, *next;
};

/* Test hook: $BBD_TEST_CLOCK_OFFSET_MS moves this node's clock (what the
 * engine sees, and so every stamp it sends) by that many milliseconds, so
 * the tests run nodes whose clocks disagree (bbd_skew.sh). Read once at
 * start; the kernel timer is armed on the real clock (arm_deadline). */
static int64_t clock_offset_ns;

static void clock_offset_init(void)
{
    const char *s = getenv("BBD_TEST_CLOCK_OFFSET_MS");
    if (s && *s)
        clock_offset_ns = (int64_t)strtoll(s, NULL, 10) * 1000000;
}

uint64_t bbd_now_ns(void)
{
    /* Wall-clock nanoseconds: the epoch every node's stamps share (the
     * engine corrects a peer's deadlines by its clock offset). */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + (uint64_t)clock_offset_ns;
}

const char *bbd_daemon_peer_text(const bb_peerid *p, char buf[BB_PEERID_TEXT_MAX])
{
    if (!p || !p->len || bb_peerid_to_text(p, buf, BB_PEERID_TEXT_MAX, NULL) != BB_OK)
        snprintf(buf, BB_PEERID_TEXT_MAX, "?");
    return buf;
}

/* v[0] SEP v[1] ... into out[cap], cut short when it does not fit. */
static void join(char *out, size_t cap, const char *const *v, size_t n, const char *sep)
{
    out[0] = '\0';
    for (size_t i = 0, k = 0; i < n && k + 1 < cap; i++)
        k += (size_t)snprintf(out + k, cap - k, "%s%s", i ? sep : "", v[i]);
}

/* ---- scheduling ---------------------------------------------------------------- */

static void poll_engine(bbd_daemon *d);

static void on_repoll(uv_idle_t *h) { poll_engine(h->data); }

static void log_errno(bbd_daemon *d, const char *what)
{
    int e = errno;
    bbd_logline l;
    if (bbd_log_begin(&l, &d->log, BB_LOG_WARN, "daemon", what)) {
        bbd_log_str(&l, "error", strerror(e));
        bbd_log_end(&l);
    }
}

/* The deadline timer expired (or was already due): poll. */
static void on_deadline(bbd_timer *t)
{
    bbd_daemon *d = t->data;
    d->deadline_armed = 0;
    poll_engine(d);
}
static void on_wake(uv_async_t *h) { poll_engine(h->data); }

/* Any thread: the engine's ingress got work. On the loop thread itself (a
 * transport or control callback delivered it) the idle handle polls when
 * the loop comes around: no eventfd write, wakeup and read as uv_async
 * costs, once per inbound envelope. */
static void engine_wake(void *ud)
{
    bbd_daemon *d = ud;
    uv_thread_t self = uv_thread_self();
    if (d->handles_open && !d->stopping && uv_thread_equal(&self, &d->loop_thread))
        uv_idle_start(&d->repoll, on_repoll);
    else
        uv_async_send(&d->wake);
}

void bbd_daemon_kick(bbd_daemon *d)
{
    if (d->handles_open && !d->stopping)
        uv_idle_start(&d->repoll, on_repoll);
}

/* The engine's next deadline arms a timer (timer.h: no uv timer), absolute
 * on the engine's CLOCK_REALTIME. It is only re-armed when the deadline
 * moves earlier than the armed one; a later or vanished deadline leaves it
 * armed, and its early expiry just polls the engine and re-arms. */
static void arm_deadline(bbd_daemon *d, uint64_t dl)
{
    if (d->deadline_armed && d->deadline_armed <= dl)
        return;
    if (bbd_timer_at(&d->deadline, dl - (uint64_t)clock_offset_ns) < 0) {
        log_errno(d, "deadline timer arm");
        uv_idle_start(&d->repoll, on_repoll); /* poll again rather than miss it */
        return;
    }
    d->deadline_armed = dl;
}

static void schedule(bbd_daemon *d)
{
    if (d->stopping)
        return;
    uint64_t dl = bb_engine_next_deadline(d->engine);
    if (dl == 0) {
        /* an idle handle makes the loop poll sockets with a zero timeout
         * and come straight back: I/O keeps flowing under load */
        uv_idle_start(&d->repoll, on_repoll);
        return;
    }
    uv_idle_stop(&d->repoll);
    if (dl != UINT64_MAX)
        arm_deadline(d, dl);
}

/* ---- steps ------------------------------------------------------------------------ */

static void publish(bbd_daemon *d, unsigned kind, const char *topic, cJSON *ev)
{
    if (ev) {
        bbd_control_publish(d->control, kind, topic, ev);
        if (kind == BBD_WATCH_APP)
            bbd_daemon_waits_event(d, topic, ev);
    }
    cJSON_Delete(ev);
}

static cJSON *event_json(const char *event, bb_exec_id exec)
{
    cJSON *j = cJSON_CreateObject();
    if (j && (!cJSON_AddStringToObject(j, "event", event) ||
              (exec && !cJSON_AddNumberToObject(j, "exec_id", (double)exec)))) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

static void add_str(cJSON *j, const char *k, const char *v)
{
    if (j && v)
        cJSON_AddStringToObject(j, k, v);
}

static void gather_release(void *ud) { bb_send_gather_free(ud); }

static void step_send(bbd_daemon *d, bb_step *s)
{
    char pb[BB_PEERID_TEXT_MAX];
    /* The engine's backoff table says when this peer may be tried again
     * (stamped on the step); until then the envelope is held back (dropped
     * and counted) instead of hammering a peer that is down. */
    uint64_t now = s->u.send.retry_at_ns ? bbd_now_ns() : 0;
    if (now < s->u.send.retry_at_ns) {
        d->backoff_dropped++;
        bbd_logline l;
        if (bbd_log_begin(&l, &d->log, BB_LOG_DEBUG, "transport", "send held back: peer in backoff")) {
            bbd_log_str(&l, "peer", bbd_daemon_peer_text(&s->u.send.peer, pb));
            bbd_log_u64(&l, "retry_in_ms", (s->u.send.retry_at_ns - now) / 1000000);
            bbd_log_end(&l);
        }
        return;
    }
    const bbd_addr *addrs = (const bbd_addr *)s->u.send.addrs;
    int rc;
    if (s->u.send.gather) { /* pieces: a large payload is written from the value itself */
        bb_send_gather *g = s->u.send.gather;
        s->u.send.gather = NULL; /* the transport releases it */
        rc = bbd_transport_send_gather(d->transport, &s->u.send.peer, addrs, s->u.send.n_addrs,
                                       (const bbd_iov *)g->iov, g->n_iov, g->len,
                                       gather_release, g);
    } else {
        uint8_t *bytes = s->u.send.bytes;
        s->u.send.bytes = NULL; /* the transport takes it */
        rc = bbd_transport_send(d->transport, &s->u.send.peer, addrs, s->u.send.n_addrs, bytes,
                                s->u.send.len);
    }
    if (rc == BB_OK)
        return;
    d->send_errors++;
    const char *why = rc == BB_EFULL       ? "send dropped: peer queue full"
                      : rc == BB_ENOTFOUND ? "send failed: no usable address"
                      : rc == BB_ELIMIT    ? "send refused: envelope over the frame cap"
                      : rc == BB_EINVAL    ? "send refused: the destination is this node"
                                           : "send refused: transport closing";
    bbd_logline l;
    if (bbd_log_begin(&l, &d->log, BB_LOG_WARN, "transport", why)) {
        bbd_log_str(&l, "peer", bbd_daemon_peer_text(&s->u.send.peer, pb));
        bbd_log_u64(&l, "bytes", s->u.send.len);
        bbd_log_end(&l);
    }
    if (rc == BB_ENOTFOUND)
        bb_engine_report_send(d->engine, &s->u.send.peer, false);
}

static void step_app(bbd_daemon *d, bb_step *s)
{
    d->app_events++;
    bbd_logline l;
    if (bbd_log_begin(&l, &d->log, BB_LOG_INFO, "app", "app event")) {
        bbd_log_str(&l, "target", s->u.app.target);
        bbd_log_str(&l, "topic", s->u.app.topic);
        bbd_log_u64(&l, "exec", s->exec_id);
        bbd_log_str(&l, "type", s->u.app.value && s->u.app.value->type
                                    ? s->u.app.value->type->name : "none");
        bbd_log_end(&l);
    }
    if (!bbd_control_has_watchers(d->control, BBD_WATCH_APP) && !d->waits)
        return;
    cJSON *ev = event_json("app", s->exec_id);
    add_str(ev, "target", s->u.app.target);
    add_str(ev, "topic", s->u.app.topic);
    if (ev)
        cJSON_AddItemToObject(ev, "value", bb_value_to_json(s->u.app.value, EVENT_JSON_MAX_ELEMS));
    /* the node's transport totals when the event happened: a watcher gets the
     * bytes between two events (e.g. per federated round) by subtraction */
    bbd_transport_stats ts = {0};
    if (d->transport)
        bbd_transport_stats_get(d->transport, &ts);
    cJSON *tj = ev ? cJSON_AddObjectToObject(ev, "transport") : NULL;
    if (tj) {
        cJSON_AddNumberToObject(tj, "bytes_in", (double)ts.bytes_in);
        cJSON_AddNumberToObject(tj, "bytes_out", (double)ts.bytes_out);
    }
    publish(d, BBD_WATCH_APP, s->u.app.topic, ev);
}

static void step_failure(bbd_daemon *d, bb_step *s)
{
    char pb[BB_PEERID_TEXT_MAX];
    bbd_logline l;
    cJSON *ev;
    if (s->kind == BB_STEP_OP_FAILED) {
        if (bbd_log_begin(&l, &d->log, BB_LOG_WARN, "engine", "OpFailed")) {
            bbd_log_str(&l, "node", s->u.op_failed.node);
            bbd_log_str(&l, "op", s->u.op_failed.op_type);
            bbd_log_str(&l, "domain", s->u.op_failed.domain);
            bbd_log_u64(&l, "exec", s->exec_id);
            bbd_log_str(&l, "error", s->u.op_failed.message);
            bbd_log_end(&l);
        }
        ev = event_json("OpFailed", s->exec_id);
        add_str(ev, "node", s->u.op_failed.node);
        add_str(ev, "op", s->u.op_failed.op_type);
        add_str(ev, "domain", s->u.op_failed.domain);
        add_str(ev, "error", s->u.op_failed.message);
    } else {
        const char *peer =
            s->u.resolve.has_peer ? bbd_daemon_peer_text(&s->u.resolve.peer, pb) : NULL;
        if (bbd_log_begin(&l, &d->log, BB_LOG_WARN, "engine", "PeerResolveFailed")) {
            bbd_log_str(&l, "node", s->u.resolve.node);
            bbd_log_str(&l, "peer", peer ? peer : "none");
            bbd_log_u64(&l, "exec", s->exec_id);
            bbd_log_end(&l);
        }
        ev = event_json("PeerResolveFailed", s->exec_id);
        add_str(ev, "node", s->u.resolve.node);
        add_str(ev, "peer", peer);
    }
    publish(d, BBD_WATCH_FAILURE, NULL, ev);
}

static void step_peer(bbd_daemon *d, bb_step *s)
{
    char pb[BB_PEERID_TEXT_MAX];
    const char *peer = bbd_daemon_peer_text(&s->u.peer.peer, pb); /* logged and published */
    bool down = s->kind == BB_STEP_PEER_DOWN;
    const char *name = down ? "PeerDown" : "PeerUp";
    bbd_logline l;
    /* a peer that announced an address nobody answers on goes down: peers
     * can cause these lines in numbers (forged identities) */
    if (bbd_daemon_log_remote_begin(d, &l, down ? BB_LOG_WARN : BB_LOG_INFO, "engine", name, peer,
                                    name)) {
        bbd_log_str(&l, "peer", peer);
        bb_engine_peer_info pi;
        if (bb_engine_peer_info_get(d->engine, &s->u.peer.peer, &pi)) {
            bbd_log_u64(&l, "failures", pi.failures);
            bbd_log_u64(&l, "attempts", pi.attempts);
        }
        bbd_log_end(&l);
    }
    cJSON *ev = event_json(name, 0);
    add_str(ev, "peer", peer);
    publish(d, BBD_WATCH_PEER, NULL, ev);
}

static void step_bootstrap(bbd_daemon *d, bb_step *s)
{
    const char *name = bb_step_kind_name(s->kind);
    bool failed = s->kind == BB_STEP_BOOTSTRAP_FAILED;
    bbd_logline l;
    if (bbd_log_begin(&l, &d->log, failed ? BB_LOG_WARN : BB_LOG_INFO, "engine", name)) {
        if (s->u.bootstrap.target)
            bbd_log_str(&l, "target", s->u.bootstrap.target);
        if (s->u.bootstrap.slot)
            bbd_log_str(&l, "slot", s->u.bootstrap.slot);
        if (s->u.bootstrap.message)
            bbd_log_str(&l, "error", s->u.bootstrap.message);
        bbd_log_end(&l);
    }
    cJSON *ev = event_json(name, s->exec_id);
    add_str(ev, "target", s->u.bootstrap.target);
    add_str(ev, "slot", s->u.bootstrap.slot);
    add_str(ev, "error", s->u.bootstrap.message);
    publish(d, failed ? BBD_WATCH_FAILURE : BBD_WATCH_BOOTSTRAP, NULL, ev);
}

static void step_infra(bbd_daemon *d, bb_step *s)
{
    char pb[BB_PEERID_TEXT_MAX];
    const char *kind = bb_infra_kind_name(s->u.infra.kind);
    const char *peer =
        s->u.infra.has_peer ? bbd_daemon_peer_text(&s->u.infra.peer, pb) : NULL;
    bbd_logline l;
    char what[96];
    snprintf(what, sizeof what, "InfraEvent %s %s", kind,
             s->u.infra.kind == BB_INFRA_WIRE_RECEIVE_ERROR && s->u.infra.sub
                 ? bb_wire_rx_error_name(s->u.infra.sub)
                 : "");
    if (bbd_daemon_log_remote_begin(d, &l, BB_LOG_WARN, "engine", what, peer, "InfraEvent")) {
        bbd_log_str(&l, "kind", kind);
        if (s->u.infra.kind == BB_INFRA_WIRE_RECEIVE_ERROR && s->u.infra.sub)
            bbd_log_str(&l, "error", bb_wire_rx_error_name(s->u.infra.sub));
        if (s->u.infra.count)
            bbd_log_u64(&l, "count", s->u.infra.count);
        if (peer)
            bbd_log_str(&l, "peer", peer);
        if (s->u.infra.detail)
            bbd_log_str(&l, "detail", s->u.infra.detail);
        bbd_log_end(&l);
    }
    cJSON *ev = event_json("InfraEvent", s->exec_id);
    add_str(ev, "kind", kind);
    add_str(ev, "peer", peer);
    add_str(ev, "detail", s->u.infra.detail);
    if (ev && s->u.infra.count)
        cJSON_AddNumberToObject(ev, "count", (double)s->u.infra.count);
    publish(d, BBD_WATCH_INFRA, NULL, ev);
}

static void act(bbd_daemon *d, bb_step *s)
{
    bbd_logline l;
    switch (s->kind) {
    case BB_STEP_SEND_ENVELOPE: step_send(d, s); break;
    case BB_STEP_APP_EVENT: step_app(d, s); break;
    case BB_STEP_PEER_RESOLVE_FAILED:
    case BB_STEP_OP_FAILED: step_failure(d, s); break;
    case BB_STEP_PEER_DOWN:
    case BB_STEP_PEER_UP: step_peer(d, s); break;
    case BB_STEP_BOOTSTRAP_COMPLETE:
    case BB_STEP_BOOTSTRAP_FAILED:
    case BB_STEP_WAITING_ON_BOOTSTRAP: step_bootstrap(d, s); break;
    case BB_STEP_INFRA_EVENT: step_infra(d, s); break;
    case BB_STEP_TELEMETRY:
        if (bbd_log_begin(&l, &d->log, BB_LOG_DEBUG, "engine", "telemetry")) {
            bbd_log_str(&l, "name", s->u.telemetry.name);
            bbd_log_i64(&l, "delta", s->u.telemetry.delta);
            bbd_log_u64(&l, "value", s->u.telemetry.value);
            bbd_log_end(&l);
        }
        break;
    case BB_STEP_CYCLE_BUDGET_EXCEEDED:
        if (bbd_log_begin(&l, &d->log, BB_LOG_DEBUG, "engine", "cycle budget exceeded")) {
            bbd_log_u64(&l, "ops", s->u.budget.ops);
            bbd_log_end(&l);
        }
        break;
    default: break;
    }
}

static void poll_engine(bbd_daemon *d)
{
    if (d->polling || !d->engine)
        return;
    d->polling = true;
    uv_idle_stop(&d->repoll);
    bb_engine_poll(d->engine, bbd_now_ns(), &d->steps);
    d->polls++;
    /* Envelopes first (in their order): the peer starts on its part while
     * this node logs and writes events for watchers. */
    for (size_t i = 0; i < d->steps.n; i++)
        if (d->steps.v[i].kind == BB_STEP_SEND_ENVELOPE)
            act(d, &d->steps.v[i]);
    for (size_t i = 0; i < d->steps.n; i++)
        if (d->steps.v[i].kind != BB_STEP_SEND_ENVELOPE)
            act(d, &d->steps.v[i]);
    d->polling = false;
    schedule(d);
}

/* ---- transport callbacks (loop thread) ---------------------------------------------- */

/* An inbound envelope the engine refused: counted, and logged. */
static void deliver_refused(bbd_daemon *d, const bb_peerid *from, size_t len, const bb_error *err)
{
    d->deliver_errors++;
    char pb[BB_PEERID_TEXT_MAX];
    bbd_logline l;
    if (bbd_daemon_log_remote_begin(d, &l, BB_LOG_WARN, "engine", "inbound envelope refused",
                                    bbd_daemon_peer_text(from, pb), "inbound envelope refused")) {
        bbd_log_str(&l, "peer", pb);
        bbd_log_u64(&l, "bytes", len);
        bbd_log_str(&l, "error", err->msg);
        bbd_log_u64(&l, "total", d->deliver_errors);
        bbd_log_end(&l);
    }
}

static void tr_envelope(void *ud, const bb_peerid *from, const bbd_addr *observed,
                        const uint8_t *bytes, size_t len)
{
    bbd_daemon *d = ud;
    bb_error err;
    bb_error_clear(&err);
    if (d->stopping)
        return;
    if (bb_engine_deliver_envelope(d->engine, from, (const bb_engine_addr *)observed, bytes, len,
                                   &err) != BB_OK)
        deliver_refused(d, from, len, &err);
}

/* A large frame in a buffer of its own: the engine takes it, no copy. */
static void tr_envelope_owned(void *ud, const bb_peerid *from, const bbd_addr *observed,
                              uint8_t *bytes, size_t len)
{
    bbd_daemon *d = ud;
    bb_error err;
    bb_error_clear(&err);
    if (d->stopping) {
        free(bytes);
        return;
    }
    if (bb_engine_deliver_envelope_owned(d->engine, from, (const bb_engine_addr *)observed,
                                         bytes, len, &err) != BB_OK)
        deliver_refused(d, from, len, &err);
}

static void tr_connected(void *ud, const bb_peerid *peer, const bbd_addr *addrs, size_t n_addrs,
                         const char *const *targets, size_t n_targets)
{
    bbd_daemon *d = ud;
    char pb[BB_PEERID_TEXT_MAX];
    bb_error err = {0};
    if (d->stopping)
        return;
    bbd_daemon_book_connected(d, peer); /* may make room in the book */
    /* its (proven) addresses merge into the book; a full book is not fatal */
    bb_engine_add_peer(d->engine, peer, (const bb_engine_addr *)addrs, n_addrs, NULL);
    int rc = bb_engine_peer_connected(d->engine, peer, targets, n_targets, &err);
    bbd_daemon_dial_found(d, peer);
    const char *peer_text = bbd_daemon_peer_text(peer, pb); /* logged and published */
    bbd_logline l;
    /* anyone can connect: through the limiter (forged identities) */
    if (bbd_daemon_log_remote_begin(d, &l, rc ? BB_LOG_WARN : BB_LOG_INFO, "transport",
                                    "peer connected", peer_text, "peer connected")) {
        bbd_log_str(&l, "peer", peer_text);
        char tl[512];
        join(tl, sizeof tl, targets, n_targets, ",");
        bbd_log_str(&l, "targets", tl);
        if (rc)
            bbd_log_str(&l, "error", err.msg);
        bbd_log_end(&l);
    }
    cJSON *ev = event_json("connected", 0);
    add_str(ev, "peer", peer_text);
    publish(d, BBD_WATCH_PEER, NULL, ev);
    bbd_daemon_kick(d);
}

static void tr_disconnected(void *ud, const bb_peerid *peer)
{
    bbd_daemon *d = ud;
    char pb[BB_PEERID_TEXT_MAX];
    if (d->stopping)
        return;
    bb_engine_peer_disconnected(d->engine, peer);
    bbd_daemon_book_lost(d, peer);
    bbd_daemon_dial_lost(d, peer);
    const char *peer_text = bbd_daemon_peer_text(peer, pb); /* logged and published */
    bbd_logline l;
    if (bbd_daemon_log_remote_begin(d, &l, BB_LOG_INFO, "transport", "peer disconnected",
                                    peer_text, "peer disconnected")) {
        bbd_log_str(&l, "peer", peer_text);
        bbd_log_end(&l);
    }
    cJSON *ev = event_json("disconnected", 0);
    add_str(ev, "peer", peer_text);
    publish(d, BBD_WATCH_PEER, NULL, ev);
}

static void tr_send_result(void *ud, const bb_peerid *peer, bool ok)
{
    bbd_daemon *d = ud;
    if (d->stopping)
        return;
    /* PeerDown / PeerUp steps come out of the next poll; a success to a
     * peer that is up makes none, so it needs no poll of its own (one per
     * envelope sent, otherwise) */
    if (bb_engine_report_send(d->engine, peer, ok) || !ok)
        bbd_daemon_kick(d);
}

/* ---- the rate limiter for lines remote parties cause --------------------------------------- */

static uint64_t loop_ms(bbd_daemon *d) { return d->loop_ready ? uv_now(&d->loop) : 0; }

bool bbd_daemon_log_remote_begin(bbd_daemon *d, bbd_logline *l, bb_log_level level,
                                 const char *comp, const char *kind, const char *source,
                                 const char *msg)
{
    if (level > d->log.level)
        return false; /* filtered anyway: nothing to count */
    if (!bbd_ratelimit_allow(&d->ratelimit, kind, source, loop_ms(d))) {
        d->log_suppressed++;
        return false;
    }
    return bbd_log_begin(l, &d->log, level, comp, msg);
}

static void ratelimit_report(void *ud, const char *kind, const char *source,
                             uint64_t suppressed, uint64_t window_ms)
{
    bbd_daemon *d = ud;
    bbd_logline l;
    char msg[160];
    snprintf(msg, sizeof msg, "%llu more lines suppressed", (unsigned long long)suppressed);
    if (bbd_log_begin(&l, &d->log, BB_LOG_WARN, "log", msg)) {
        bbd_log_str(&l, "kind", kind);
        if (source && *source)
            bbd_log_str(&l, "source", source);
        bbd_log_u64(&l, "suppressed", suppressed);
        bbd_log_u64(&l, "window_ms", window_ms);
        bbd_log_end(&l);
    }
}

/* Once a rate-limit window (a timer, timer.h): report the lines it suppressed, and give the
 * kernel back the large blocks kept for reuse (value.h) when no block of
 * its size came for LARGE_BLOCK_IDLE_MS — the next round of a large model
 * reuses it, an idle node does not hold it. */
static void on_housekeeping(bbd_timer *t)
{
    bbd_daemon *d = t->data;
    bbd_ratelimit_flush(&d->ratelimit, uv_now(&d->loop));
    bb_large_release_idle(LARGE_BLOCK_IDLE_MS);
}

static bb_log_level log_level_of(int level)
{
    return level < 0 ? BB_LOG_ERROR : level > 3 ? BB_LOG_DEBUG : (bb_log_level)level;
}

static void tr_log_remote(void *ud, int level, const char *kind, const char *source,
                          const char *msg)
{
    bbd_daemon *d = ud;
    bbd_logline l;
    if (bbd_daemon_log_remote_begin(d, &l, log_level_of(level), "transport", kind, source, msg))
        bbd_log_end(&l);
}

/* A control client dropped, evicted or refused: caused by a client. */
static void control_log(void *ud, int level, const char *msg)
{
    bbd_daemon *d = ud;
    bbd_logline l;
    /* the text up to the first ':' after "control: " is the kind */
    char kind[64];
    const char *p = strncmp(msg, "control: ", 9) == 0 ? msg + 9 : msg;
    snprintf(kind, sizeof kind, "control %.*s", (int)strcspn(p, ":("), p);
    if (bbd_daemon_log_remote_begin(d, &l, log_level_of(level), "control", kind, "control", msg))
        bbd_log_end(&l);
}

static void tr_log(void *ud, int level, const char *msg)
{
    bbd_daemon *d = ud;
    bbd_log_msg(&d->log, log_level_of(level), "transport", msg);
}

/* ---- engine host callbacks ---------------------------------------------------------------- */

static void component_log(void *ud, bb_log_level level, const char *slot, const char *msg)
{
    bbd_daemon *d = ud;
    bbd_logline l;
    if (bbd_log_begin(&l, &d->log, level, "component", msg)) {
        bbd_log_str(&l, "slot", slot);
        bbd_log_end(&l);
    }
}

static void job_run(uv_work_t *req)
{
    bbd_job *j = req->data;
    j->fn(j->arg);
}

static void job_done(uv_work_t *req, int status)
{
    bbd_job *j = req->data;
    bbd_daemon *d = j->d;
    if (j->prev)
        j->prev->next = j->next;
    else
        d->jobs = j->next;
    if (j->next)
        j->next->prev = j->prev;
    /* a job cancelled at shutdown never ran: nothing to complete */
    if (status == 0)
        bb_engine_work_done(d->engine, j->token);
    free(j);
}

static int submit_work(void *ud, void (*fn)(void *arg), void *arg, uint64_t token)
{
    bbd_daemon *d = ud;
    if (d->stopping)
        return BB_ESTATE; /* the engine then runs it inline */
    bbd_job *j = calloc(1, sizeof *j);
    if (!j)
        return BB_ENOMEM;
    j->req.data = j;
    j->d = d;
    j->fn = fn;
    j->arg = arg;
    j->token = token;
    if (uv_queue_work(&d->loop, &j->req, job_run, job_done) != 0) {
        free(j);
        return BB_ERUNTIME;
    }
    j->next = d->jobs;
    if (d->jobs)
        d->jobs->prev = j;
    d->jobs = j;
    return BB_OK;
}

/* ---- snapshot ------------------------------------------------------------------------------ */

int bbd_daemon_snapshot(bbd_daemon *d, size_t *bytes, bb_error *err)
{
    uint8_t *snap = NULL;
    size_t len = 0;
    int rc = bb_engine_snapshot(d->engine, &snap, &len, err);
    if (rc == BB_OK)
        rc = bbd_snapshot_write(d->snapshot_path, snap, len, err);
    free(snap);
    if (rc == BB_OK) {
        d->snapshots_written++;
        if (bytes)
            *bytes = len;
    }
    return rc;
}

void bbd_daemon_summary(const bbd_daemon *d, char *out, size_t cap)
{
    bbd_transport_stats ts = {0};
    if (d->transport)
        bbd_transport_stats_get(d->transport, &ts);
    snprintf(out, cap, "%s: %zu target%s, %" PRIu64 " connection%s, %" PRIu64
             " envelopes in, %" PRIu64 " out",
             d->stopping ? "stopping" : "running", d->cfg->targets.n,
             d->cfg->targets.n == 1 ? "" : "s", ts.connections_open,
             ts.connections_open == 1 ? "" : "s", ts.envelopes_in, ts.envelopes_out);
}

/* ---- shutdown --------------------------------------------------------------------------------- */

static void closed_one(bbd_daemon *d)
{
    d->closing--;
}

static void handle_closed(uv_handle_t *h) { closed_one(h->data); }
static void subsystem_closed(void *ud) { closed_one(ud); }

static void close_handle(bbd_daemon *d, uv_handle_t *h)
{
    if (!uv_is_closing(h)) {
        d->closing++;
        uv_close(h, handle_closed);
    }
}

static void close_timer(bbd_daemon *d, bbd_timer *t)
{
    if (t->fd >= 0) {
        d->closing++;
        bbd_timer_close(t, subsystem_closed);
    }
}

/* Close every handle and subsystem; the loop ends once they are gone. */
static void close_all(bbd_daemon *d)
{
    d->stopping = true;
    if (d->handles_open) {
        d->handles_open = false;
        close_handle(d, (uv_handle_t *)&d->wake);
        close_handle(d, (uv_handle_t *)&d->repoll);
        close_timer(d, &d->deadline);
        close_timer(d, &d->notify_tick);
        close_handle(d, (uv_handle_t *)&d->sig_term);
        close_handle(d, (uv_handle_t *)&d->sig_int);
        close_handle(d, (uv_handle_t *)&d->sig_hup);
        close_handle(d, (uv_handle_t *)&d->dial_timer);
        close_timer(d, &d->housekeeping);
    }
    bbd_daemon_waits_free(d);
    for (bbd_job *j = d->jobs; j; j = j->next)
        uv_cancel((uv_req_t *)&j->req); /* fails for running jobs: they finish */
    if (d->control) {
        d->closing++;
        bbd_control_close(d->control, subsystem_closed, d);
        d->control = NULL;
    }
    if (d->metrics) {
        d->closing++;
        bbd_metrics_close(d->metrics, subsystem_closed, d);
        d->metrics = NULL;
    }
    if (d->transport) {
        d->closing++;
        bbd_transport_close(d->transport, subsystem_closed, d);
        d->transport = NULL;
    }
}

/* Run polls until the engine has nothing pending right now (bounded). */
static void drain(bbd_daemon *d)
{
    for (int i = 0; i < DRAIN_POLLS; i++) {
        bb_engine_poll(d->engine, bbd_now_ns(), &d->steps);
        for (size_t k = 0; k < d->steps.n; k++)
            act(d, &d->steps.v[k]);
        if (bb_engine_next_deadline(d->engine) != 0)
            break;
    }
}

static void fire_phase(bbd_daemon *d, int64_t phase, const char *name)
{
    bb_error err = {0};
    if (bb_engine_fire_lifecycle(d->engine, phase, &err) != BB_OK) {
        bbd_logline l;
        if (bbd_log_begin(&l, &d->log, BB_LOG_WARN, "daemon", "lifecycle phase failed")) {
            bbd_log_str(&l, "phase", name);
            bbd_log_str(&l, "error", err.msg);
            bbd_log_end(&l);
        }
        return;
    }
    drain(d);
}

static void stop(bbd_daemon *d, const char *why)
{
    if (d->stopping)
        return;
    bbd_logline l;
    if (bbd_log_begin(&l, &d->log, BB_LOG_INFO, "daemon", "stopping")) {
        bbd_log_str(&l, "reason", why);
        bbd_log_end(&l);
    }
    bbd_notify_send(&d->notify, "STOPPING=1\nSTATUS=stopping");
    uv_idle_stop(&d->repoll);
    uv_poll_stop(&d->deadline.poll); /* no more polls from deadlines */
    fire_phase(d, 1, "Shutdown");
    if (d->cfg->snapshot_on_exit) {
        fire_phase(d, 2, "Snapshot");
        size_t bytes = 0;
        bb_error err = {0};
        if (bbd_daemon_snapshot(d, &bytes, &err) == BB_OK) {
            if (bbd_log_begin(&l, &d->log, BB_LOG_INFO, "daemon", "snapshot written")) {
                bbd_log_str(&l, "path", d->snapshot_path);
                bbd_log_u64(&l, "bytes", bytes);
                bbd_log_u64(&l, "incarnation", bb_engine_incarnation(d->engine));
                bbd_log_end(&l);
            }
        } else {
            d->exit_code = BBD_EXIT_FAIL;
            if (bbd_log_begin(&l, &d->log, BB_LOG_ERROR, "daemon", "snapshot failed")) {
                bbd_log_str(&l, "error", err.msg);
                bbd_log_end(&l);
            }
        }
    }
    close_all(d);
}

static void on_signal(uv_signal_t *h, int signum)
{
    bbd_daemon *d = h->data;
    if (signum == SIGHUP) {
        bb_error err = {0};
        if (bbd_log_reopen(&d->log, &err) != BB_OK)
            bbd_log_msg(&d->log, BB_LOG_ERROR, "daemon", err.msg);
        else
            bbd_log_msg(&d->log, BB_LOG_INFO, "daemon", "log reopened");
        return;
    }
    stop(d, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* The notify tick (a timer, not a uv timer: timer.h says why):
 * WATCHDOG=1 on every tick while systemd watches, STATUS= every
 * STATUS_PERIOD_MS. It runs on the loop, so a stuck loop stops both. */
static void on_notify_tick(bbd_timer *t)
{
    bbd_daemon *d = t->data;
    if (bbd_notify_watchdog_period_ms(&d->notify))
        bbd_notify_send(&d->notify, "WATCHDOG=1");
    uint64_t now = uv_now(&d->loop);
    if (now >= d->status_due_ms) {
        char s[256];
        bbd_daemon_summary(d, s, sizeof s);
        bbd_notify_status(&d->notify, s);
        d->status_due_ms = now + STATUS_PERIOD_MS;
    }
}

/* ---- setup ------------------------------------------------------------------------------------- */

/* The targets to install: those configured (each must be one of the
 * artifact's, bb_artifact_find_target), else the artifact's only one. */
static int pick_targets(bbd_daemon *d, bb_error *err)
{
    bbd_config *c = d->cfg;
    bb_arena *a = bb_arena_create();
    bb_artifact art;
    if (!a)
        return bb_error_set(err, BB_ENOMEM, "out of memory");
    int rc = bb_artifact_read(d->model, c->artifact, a, &art, err);
    char names[1024];
    if (rc == BB_OK)
        bb_artifact_target_names(&art, names, sizeof names);
    if (rc == BB_OK && c->targets.n == 0 && art.n_targets == 1)
        rc = bbd_config_strlist_add(&c->targets, art.targets[0].name, "targets", err);
    else if (rc == BB_OK && c->targets.n == 0)
        rc = bb_error_set(err, BB_ECONFIG, "no targets given: %s has %s (choose with --targets)",
                          c->artifact, names);
    for (size_t i = 0; rc == BB_OK && i < c->targets.n; i++) {
        const bb_artifact_target *t;
        rc = bb_artifact_find_target(&art, c->targets.v[i], &t, err);
        if (rc == BB_ENOTFOUND)
            rc = bb_error_set(err, BB_ECONFIG, "target '%s' is not in %s (it has %s)",
                              c->targets.v[i], c->artifact, names);
        else if (rc != BB_OK)
            rc = bb_error_prefix(err, "%s", c->artifact);
    }
    bb_arena_destroy(a);
    return rc;
}

static int load_registry(bbd_daemon *d, bb_error *err)
{
    bbd_config *c = d->cfg;
    bbd_registry_options o = {.plugin_dirs = (const char *const *)c->plugin_path.v,
                              .n_plugin_dirs = c->plugin_path.n};
    int rc = bbd_registry_new(&o, &d->reg, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < bbd_registry_warning_count(d->reg); i++)
        bbd_log_msg(&d->log, BB_LOG_WARN, "plugins", bbd_registry_warning_at(d->reg, i));
    if (c->components_json &&
        (rc = bbd_registry_load_slot_configs(d->reg, c->components_json,
                                             strlen(c->components_json), "components", err)))
        return rc;
    return bbd_registry_resolve_model(d->reg, d->model, (const char *const *)c->targets.v,
                                      c->targets.n, err);
}

static int start_transport(bbd_daemon *d, const bb_keypair *identity, bb_error *err)
{
    bbd_config *c = d->cfg;
    bbd_transport_callbacks cb = {
        .admit = bbd_daemon_admit,
        .on_envelope = tr_envelope,
        .on_envelope_owned = tr_envelope_owned,
        .on_peer_connected = tr_connected,
        .on_peer_disconnected = tr_disconnected,
        .on_send_result = tr_send_result,
        .on_log = tr_log,
        .on_log_remote = tr_log_remote,
        .ud = d,
    };
    bbd_transport_config tc = c->transport;
    tc.self = d->self;
    tc.identity = identity; /* signs the transport's Noise key, not kept */
    tc.dial_allow = c->dial_allow.v;
    tc.n_dial_allow = c->dial_allow.n;
    tc.dial_deny = c->dial_deny.v;
    tc.n_dial_deny = c->dial_deny.n;
    tc.targets = (const char *const *)c->targets.v;
    tc.n_targets = c->targets.n;
    if (!(d->transport = bbd_transport_new(&d->loop, &tc, &cb, err)))
        return err->code ? err->code : BB_ERUNTIME;
    for (size_t i = 0; i < c->listen.n; i++) {
        uint8_t a[BB_MULTIADDR_MAX_LEN];
        size_t n;
        int rc = bb_multiaddr_parse(c->listen.v[i], a, sizeof a, &n, err);
        if (!rc)
            rc = bbd_transport_listen(d->transport, a, n, err);
        if (rc)
            return rc;
    }
    return BB_OK;
}

size_t bbd_stream_chunk_bytes(const bbd_transport_config *t)
{
    size_t half = t->max_frame_bytes / 2;
    return half < BBD_STREAM_CHUNK_MAX ? half : BBD_STREAM_CHUNK_MAX;
}

static int start_engine(bbd_daemon *d, bb_error *err)
{
    bbd_config *c = d->cfg;
    const bbd_addr *la = NULL;
    size_t nla = bbd_transport_listen_addrs(d->transport, &la);
    bb_engine_config ec;
    bb_engine_config_init(&ec);
    ec.peer = d->self;
    ec.addrs = (const bb_engine_addr *)la;
    ec.n_addrs = nla;
    ec.seed = c->has_seed ? c->seed : bb_fnv1a64(d->self.bytes, d->self.len);
    ec.caps = c->caps;
    ec.cycle_op_budget = c->cycle_op_budget;
    ec.submit_work = submit_work;
    ec.submit_work_ud = d;
    ec.log = component_log;
    ec.log_ud = d;
    ec.send_gather = true; /* the TCP transport writes pieces: no copy of a large payload */
    ec.stream_chunk_bytes = bbd_stream_chunk_bytes(&c->transport);
    if (!(d->engine = bb_engine_new(&ec, err)))
        return err->code ? err->code : BB_ERUNTIME;
    bb_engine_set_wake(d->engine, engine_wake, d);
    int rc = bb_engine_install(d->engine, d->model, (const char *const *)c->targets.v,
                               c->targets.n, bbd_registry_engine(d->reg), err);
    if (rc)
        return bb_error_prefix(err, "install %s", c->artifact);
    for (size_t i = 0; i < c->n_peers; i++) {
        bb_engine_addr a = {c->peers[i].addr, c->peers[i].addr_len};
        if ((rc = bb_engine_add_peer(d->engine, &c->peers[i].id, &a, 1, err)))
            return bb_error_prefix(err, "peer %s", c->peers[i].addr_text);
    }
    return BB_OK;
}

/* A snapshot write killed before its rename left a temporary file: it was
 * never read, but it holds disk. Say that it was removed. */
static int remove_leftover_snapshot(bbd_daemon *d, bb_error *err)
{
    char removed[PATH_MAX];
    int rc = bbd_snapshot_remove_leftover(d->snapshot_path, removed, err);
    bbd_logline l;
    if (rc == BB_OK && removed[0] &&
        bbd_log_begin(&l, &d->log, BB_LOG_WARN, "daemon",
                      "removed the temporary file of an interrupted snapshot write")) {
        bbd_log_str(&l, "path", removed);
        bbd_log_end(&l);
    }
    return rc;
}

static int restore(bbd_daemon *d, bb_error *err)
{
    uint8_t *snap = NULL;
    size_t len = 0;
    int rc = remove_leftover_snapshot(d, err);
    if (rc || d->cfg->fresh)
        return rc;
    rc = bbd_snapshot_read(d->snapshot_path, d->cfg->max_snapshot_bytes, &snap, &len, err);
    if (rc == BB_ENOTFOUND) {
        bb_error_clear(err);
        bbd_logline l;
        if (bbd_log_begin(&l, &d->log, BB_LOG_INFO, "daemon",
                          "no snapshot in the state dir: starting fresh")) {
            bbd_log_str(&l, "path", d->snapshot_path);
            bbd_log_end(&l);
        }
        return BB_OK;
    }
    if (rc == BB_OK && (rc = bb_engine_restore(d->engine, snap, len, err)))
        bb_error_prefix(err, "snapshot %s", d->snapshot_path);
    free(snap);
    if (rc) {
        char msg[BB_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", err->msg);
        return bb_error_set(err, rc, "%.400s (start with --fresh to ignore it)", msg);
    }
    d->restored = true;
    bbd_logline l;
    if (bbd_log_begin(&l, &d->log, BB_LOG_INFO, "daemon", "snapshot restored")) {
        bbd_log_str(&l, "path", d->snapshot_path);
        bbd_log_u64(&l, "bytes", len);
        bbd_log_u64(&l, "incarnation", bb_engine_incarnation(d->engine));
        bbd_log_end(&l);
    }
    return BB_OK;
}

static int init_handles(bbd_daemon *d, bb_error *err)
{
    int rc;
    if ((rc = bbd_timer_init(&d->loop, &d->deadline, CLOCK_REALTIME, on_deadline, d,
                             "deadline timer", err)) ||
        (rc = bbd_timer_init(&d->loop, &d->notify_tick, CLOCK_MONOTONIC, on_notify_tick, d,
                             "notify timer", err)) ||
        (rc = bbd_timer_init(&d->loop, &d->housekeeping, CLOCK_MONOTONIC, on_housekeeping, d,
                             "housekeeping timer", err)) ||
        (rc = bbd_timer_every(&d->housekeeping, BBD_RATELIMIT_WINDOW_MS, "housekeeping timer",
                              err))) {
        /* the loop ends without running */
        bbd_timer_close(&d->deadline, NULL);
        bbd_timer_close(&d->notify_tick, NULL);
        bbd_timer_close(&d->housekeeping, NULL);
        return rc;
    }
    uv_async_init(&d->loop, &d->wake, on_wake);
    d->loop_thread = uv_thread_self();
    uv_idle_init(&d->loop, &d->repoll);
    uv_signal_init(&d->loop, &d->sig_term);
    uv_signal_init(&d->loop, &d->sig_int);
    uv_signal_init(&d->loop, &d->sig_hup);
    uv_handle_t *hs[] = {(uv_handle_t *)&d->wake,     (uv_handle_t *)&d->repoll,
                         (uv_handle_t *)&d->sig_term, (uv_handle_t *)&d->sig_int,
                         (uv_handle_t *)&d->sig_hup};
    for (size_t i = 0; i < sizeof hs / sizeof *hs; i++)
        hs[i]->data = d;
    bbd_daemon_dial_init(d);
    d->handles_open = true;
    uv_signal_start(&d->sig_term, on_signal, SIGTERM);
    uv_signal_start(&d->sig_int, on_signal, SIGINT);
    uv_signal_start(&d->sig_hup, on_signal, SIGHUP);
    return 0;
}

static void announce_ready(bbd_daemon *d)
{
    char listen[1024] = "", targets[512];
    const bbd_addr *la = NULL;
    size_t nla = bbd_transport_listen_addrs(d->transport, &la);
    for (size_t i = 0, k = 0; i < nla && k + 1 < sizeof listen; i++) {
        char t[BB_MULTIADDR_TEXT_MAX + 1];
        if (bb_multiaddr_format(la[i].data, la[i].len, t, sizeof t, NULL, NULL) == BB_OK)
            k += (size_t)snprintf(listen + k, sizeof listen - k, "%s%s", k ? "," : "", t);
    }
    join(targets, sizeof targets, (const char *const *)d->cfg->targets.v, d->cfg->targets.n,
         ",");
    d->ready_ns = bbd_now_ns();
    bbd_logline l;
    if (bbd_log_begin(&l, &d->log, BB_LOG_INFO, "daemon", "ready")) {
        bbd_log_str(&l, "peer", d->self_text);
        bbd_log_str(&l, "targets", targets);
        bbd_log_str(&l, "listen", listen);
        bbd_log_str(&l, "control", d->cfg->control);
        bbd_log_u64(&l, "incarnation", bb_engine_incarnation(d->engine));
        bbd_log_str(&l, "restored", d->restored ? "yes" : "no");
        bbd_log_u64(&l, "startup_us", (d->ready_ns - d->started_ns) / 1000);
        bbd_log_end(&l);
    }
    char s[320], summary[256];
    bbd_daemon_summary(d, summary, sizeof summary);
    snprintf(s, sizeof s, "READY=1\nMAINPID=%ld\nSTATUS=%s", (long)getpid(), summary);
    bbd_notify_send(&d->notify, s);
    uint64_t wd = bbd_notify_watchdog_period_ms(&d->notify);
    if (wd)
        bbd_notify_send(&d->notify, "WATCHDOG=1");
    if (!bbd_notify_enabled(&d->notify)) /* also no watchdog: it needs the socket */
        return;
    uint64_t period = wd && wd < STATUS_PERIOD_MS ? wd : STATUS_PERIOD_MS;
    d->status_due_ms = uv_now(&d->loop) + STATUS_PERIOD_MS;
    bb_error err = {0};
    if (bbd_timer_every(&d->notify_tick, period, "notify timer", &err) != BB_OK &&
        bbd_log_begin(&l, &d->log, BB_LOG_WARN, "daemon", "notify timer arm")) {
        bbd_log_str(&l, "error", err.msg);
        bbd_log_end(&l);
    }
}

/* A debug line per start-up phase with the time since start: where the
 * start-to-ready time goes (bench_bbd measures the whole). */
static void phase_done(bbd_daemon *d, const char *phase)
{
    bbd_logline l;
    if (bbd_log_begin(&l, &d->log, BB_LOG_DEBUG, "daemon", "start-up phase done")) {
        bbd_log_str(&l, "phase", phase);
        bbd_log_u64(&l, "since_start_us", (bbd_now_ns() - d->started_ns) / 1000);
        bbd_log_end(&l);
    }
}

static int start(bbd_daemon *d, bb_error *err)
{
    bbd_config *c = d->cfg;
    int rc;
    if ((rc = bbd_notify_init(&d->notify, err)))
        return rc;
    if ((rc = bbd_state_dir_lock(c->state_dir, &d->lock_fd, err)))
        return rc;
    if ((size_t)snprintf(d->snapshot_path, sizeof d->snapshot_path, "%s/%s", c->state_dir,
                         BBD_SNAPSHOT_FILE) >= sizeof d->snapshot_path)
        return bb_error_set(err, BB_ECONFIG, "state directory path is too long");
    bb_keypair kp;
    bool created = false;
    if ((rc = bbd_node_key(c->key_file, &kp, &d->self, &created, err)))
        return bb_error_prefix(err, "node key");
    bbd_daemon_peer_text(&d->self, d->self_text);
    if (created) {
        bbd_logline l;
        if (bbd_log_begin(&l, &d->log, BB_LOG_INFO, "daemon", "created a node key")) {
            bbd_log_str(&l, "path", c->key_file);
            bbd_log_str(&l, "peer", d->self_text);
            bbd_log_end(&l);
        }
    }
    phase_done(d, "node key");
    if ((rc = bbd_daemon_load_artifact(d, err))) {
        bb_keypair_wipe(&kp);
        return rc;
    }
    phase_done(d, "artifact loaded");
    /* the key is kept until the transport signed its Noise key with it */
    if (!(rc = pick_targets(d, err)) && !(rc = load_registry(d, err))) {
        phase_done(d, "plugins scanned, bindings resolved");
        if ((rc = uv_loop_init(&d->loop)))
            rc = bb_error_set(err, BB_ERUNTIME, "event loop: %s", uv_strerror(rc));
        d->loop_ready = rc == BB_OK;
    }
    if (!rc && !(rc = init_handles(d, err)))
        rc = start_transport(d, &kp, err);
    bb_keypair_wipe(&kp);
    if (rc)
        return rc;
    phase_done(d, "listening");
    if ((rc = start_engine(d, err)) || (rc = restore(d, err)) ||
        (rc = bbd_daemon_access_apply(d, err)))
        return rc;
    bbd_daemon_book_init(d);
    phase_done(d, "targets installed");
    bbd_control_ops ops = bbd_daemon_control_ops;
    ops.ud = d;
    ops.log = control_log;
    bbd_control_limits lim = {c->control_max_line_bytes, c->control_max_clients,
                              c->control_client_output_bytes, c->control_output_budget_bytes,
                              c->control_idle_timeout_ms};
    if ((rc = bbd_control_start(&d->loop, c->control, &lim, &ops, &d->control, err)))
        return rc;
    if (c->metrics) {
        uint8_t a[BB_MULTIADDR_MAX_LEN];
        size_t n;
        if ((rc = bb_multiaddr_parse(c->metrics, a, sizeof a, &n, err)) ||
            (rc = bbd_metrics_start(&d->loop, a, n, bbd_daemon_render_metrics, d, &d->metrics,
                                    err)))
            return rc;
    }
    if (!d->restored && c->bootstrap_all) {
        bb_bootstrap_target fresh = {.kind = BB_BOOTSTRAP_FRESH};
        if ((rc = bb_engine_run_bootstrap(d->engine, &fresh, err)))
            return bb_error_prefix(err, "bootstrap");
    }
    return BB_OK;
}

static void finish(bbd_daemon *d)
{
    if (d->loop_ready) {
        close_all(d);
        uv_run(&d->loop, UV_RUN_DEFAULT);
        uv_loop_close(&d->loop);
    }
    bb_steps_free(&d->steps);
    free(d->dial);
    free(d->learned);
    bb_engine_free(d->engine);
    bbd_registry_free(d->reg);
    bb_model_free(d->model);
    bbd_notify_close(&d->notify);
    if (d->lock_fd >= 0)
        close(d->lock_fd);
    bbd_log_close(&d->log);
}

int bbd_daemon_main(bbd_config *cfg)
{
    bbd_daemon d;
    memset(&d, 0, sizeof d);
    d.cfg = cfg;
    d.lock_fd = -1;
    d.deadline.fd = -1;
    d.notify_tick.fd = -1;
    d.housekeeping.fd = -1;
    d.notify.fd = -1;
    d.started_ns = bbd_now_ns();
    bb_steps_init(&d.steps);
    signal(SIGPIPE, SIG_IGN);
    /* Envelopes of a MiB and more are malloc'd and freed per message (frame,
     * envelope). glibc would hand each back to the kernel (munmap, heap
     * trim) and fault every 4 KiB page in again for the next one (~40k
     * faults/s at 1 GB/s of 1 MiB envelopes). Keeping up to
     * MALLOC_KEEP_BYTES of freed memory costs nothing at idle start; a
     * burst's memory stays resident after it. */
    mallopt(M_MMAP_THRESHOLD, MALLOC_KEEP_BYTES);
    mallopt(M_TRIM_THRESHOLD, MALLOC_KEEP_BYTES);
    bb_error err = {0};
    if (bbd_log_open(&d.log, cfg->log_level, cfg->log_file, &err) != BB_OK) {
        fprintf(stderr, "bbd: error: %s\n", err.msg);
        return BBD_EXIT_FAIL;
    }
    bbd_ratelimit_init(&d.ratelimit, ratelimit_report, &d);
    clock_offset_init();
    if (start(&d, &err) != BB_OK) {
        fprintf(stderr, "bbd: error: %s\n", err.msg);
        d.stopping = true;
        finish(&d);
        return BBD_EXIT_FAIL;
    }
    announce_ready(&d);
    bbd_daemon_dial(&d);
    poll_engine(&d);
    uv_run(&d.loop, UV_RUN_DEFAULT);
    finish(&d);
    return d.exit_code;
}
