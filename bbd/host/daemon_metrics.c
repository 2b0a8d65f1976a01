/*
 * daemon_metrics.c — what the metrics page shows (bbd(8), "METRICS"):
 * the engine's counters, the transport's bytes and envelopes in and out
 * per peer, connection states, peer health and backoff, ingress drops and
 * byte-budget use, and the daemon's own counters. The lists of the daemon's
 * and the transport's counters live here; status (daemon_control.c) shows
 * the same lists.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "bbd/host/daemon.h"

/* The field k of struct type: its name is its key. bbd_stat_value reads
 * a uint64_t there; a field of another size does not compile. */
#define STAT_FIELD(type, k, gauge, help)                                                   \
    {#k, help, gauge,                                                                      \
     offsetof(type, k) + 0 * sizeof(char[sizeof(((type *)0)->k) == sizeof(uint64_t) ? 1 : -1])}
#define DAEMON_FIELD(k, gauge, help) STAT_FIELD(bbd_daemon, k, gauge, help)
const bbd_stat_field BBD_DAEMON_COUNTERS[] = {
    DAEMON_FIELD(polls, false, "engine poll cycles"),
    DAEMON_FIELD(backoff_dropped, false, "envelopes held back because their peer was in backoff"),
    DAEMON_FIELD(send_errors, false, "envelopes the transport refused"),
    DAEMON_FIELD(deliver_errors, false, "inbound envelopes the engine refused"),
    DAEMON_FIELD(app_events, false, "AppEvents emitted"),
    DAEMON_FIELD(snapshots_written, false, "snapshots written"),
    DAEMON_FIELD(book_evicted, false,
                 "learned peers dropped from the address book (max_peers_per_source)"),
    DAEMON_FIELD(log_suppressed, false, "log lines caused by remote parties that the rate "
                 "limiter held back"),
    {NULL, NULL, false, 0},
};
#undef DAEMON_FIELD

#define TRANSPORT_FIELD(k, gauge, help) STAT_FIELD(bbd_transport_stats, k, gauge, help)
const bbd_stat_field BBD_TRANSPORT_TOTALS[] = {
    TRANSPORT_FIELD(bytes_in, false, "bytes received"),
    TRANSPORT_FIELD(bytes_out, false, "bytes sent"),
    TRANSPORT_FIELD(envelopes_in, false, "envelopes received"),
    TRANSPORT_FIELD(envelopes_out, false, "envelopes sent"),
    TRANSPORT_FIELD(frames_refused, false, "frames refused (over the cap or malformed)"),
    TRANSPORT_FIELD(queue_dropped, false, "envelopes dropped on queue bounds"),
    TRANSPORT_FIELD(udp_fragments_in, false, "UDP fragments received"),
    TRANSPORT_FIELD(udp_reassembly_dropped, false, "partial UDP envelopes dropped"),
    TRANSPORT_FIELD(udp_fragments_duplicate, false, "UDP fragments received twice, dropped"),
    TRANSPORT_FIELD(connections_open, true, "open connections"),
    TRANSPORT_FIELD(auth_failed, false, "records and datagrams that failed authentication"),
    TRANSPORT_FIELD(replayed, false, "UDP datagrams refused by the replay window"),
    TRANSPORT_FIELD(unauthenticated, false, "UDP datagrams dropped before decoding: no session"),
    TRANSPORT_FIELD(handshakes_failed, false,
                    "handshakes that failed (malformed, bad signature, wrong peer, security mismatch)"),
    TRANSPORT_FIELD(peers_refused, false, "handshakes refused by access control"),
    TRANSPORT_FIELD(dials_refused, false, "dials refused by the dial rules"),
    TRANSPORT_FIELD(connections_refused, false,
                    "inbound connections refused: over the source's share or the table full"),
    TRANSPORT_FIELD(connections_evicted, false,
                    "unauthenticated connections closed to make room for a new one"),
    TRANSPORT_FIELD(slow_closed, false, "connections closed for idling or a too slow frame"),
    TRANSPORT_FIELD(rx_buffered_bytes, true, "bytes of partial inbound frames held"),
    TRANSPORT_FIELD(tx_sealed_bytes, true, "sealed bytes of large frames not yet taken by sockets"),
    TRANSPORT_FIELD(tx_sealed_peak, true, "the most sealed bytes of large frames held at once"),
    {NULL, NULL, false, 0},
};
#undef TRANSPORT_FIELD

#define PEER_FIELD(k, gauge, help) STAT_FIELD(bbd_peer_stats, k, gauge, help)
const bbd_stat_field BBD_PEER_TOTALS[] = {
    PEER_FIELD(bytes_in, false, "bytes received from the peer"),
    PEER_FIELD(bytes_out, false, "bytes sent to the peer"),
    PEER_FIELD(envelopes_in, false, "envelopes received from the peer"),
    PEER_FIELD(envelopes_out, false, "envelopes sent to the peer"),
    PEER_FIELD(queued_bytes, true, "bytes queued for the peer"),
    PEER_FIELD(dropped, false, "envelopes dropped for the peer"),
    {NULL, NULL, false, 0},
};
#undef PEER_FIELD

#define CONTROL_FIELD(k, gauge, help) STAT_FIELD(bbd_control_stats, k, gauge, help)
const bbd_stat_field BBD_CONTROL_TOTALS[] = {
    CONTROL_FIELD(queued_bytes, true, "control socket output waiting to be read"),
    CONTROL_FIELD(watchers_dropped, false, "watchers dropped for not reading their events"),
    CONTROL_FIELD(idle_closed, false, "control clients closed after control_idle_timeout_ms"),
    CONTROL_FIELD(evicted, false, "idle control clients closed to make room for a new one"),
    CONTROL_FIELD(refused, false, "control clients refused: every slot waiting for a reply"),
    CONTROL_FIELD(replies_refused, false, "control replies over control_output_budget_bytes"),
    {NULL, NULL, false, 0},
};
#undef CONTROL_FIELD
#undef STAT_FIELD

uint64_t bbd_stat_value(const bbd_stat_field *f, const void *stats)
{
    uint64_t v;
    memcpy(&v, (const char *)stats + f->offset, sizeof v);
    return v;
}

/* Engine counters that go up and down (everything else only grows). */
static bool is_gauge(const char *name)
{
    static const char *const GAUGES[] = {"frontier.depth_peak", "pending_async.count",
                                         "exec.live", "ingress.bytes_in_flight"};
    for (size_t i = 0; i < sizeof GAUGES / sizeof *GAUGES; i++)
        if (strcmp(name, GAUGES[i]) == 0)
            return true;
    return false;
}

static void one(bbd_mtext *t, const char *name, const char *type, const char *help,
                uint64_t v)
{
    bbd_mtext_family(t, name, type, help);
    bbd_mtext_sample(t, name, strcmp(type, "counter") == 0, v, NULL, NULL, NULL, NULL);
}

static const char *field_type(const bbd_stat_field *f) { return f->gauge ? "gauge" : "counter"; }

/* One unlabelled sample per field of stats, named <family><key>. */
static void stat_fields(bbd_mtext *t, const char *family, const bbd_stat_field *f,
                        const void *stats)
{
    for (; f->key; f++) {
        char m[160];
        snprintf(m, sizeof m, "%s%s", family, f->key);
        one(t, m, field_type(f), f->help, bbd_stat_value(f, stats));
    }
}

static void engine_counters(const bbd_daemon *d, bbd_mtext *t)
{
    const char *name;
    uint64_t v;
    for (size_t i = 0; bb_engine_counter_at(d->engine, i, &name, &v); i++) {
        char m[160], help[200];
        bool gauge = is_gauge(name);
        bbd_metric_name("bbd_engine_", name, m, sizeof m);
        /* counter names: strip a trailing _total the user may have written */
        size_t n = strlen(m);
        if (!gauge && n > 6 && strcmp(m + n - 6, "_total") == 0)
            m[n - 6] = '\0';
        snprintf(help, sizeof help, "engine counter %s", name);
        one(t, m, gauge ? "gauge" : "counter", help, v);
    }
}

typedef struct peer_walk {
    bbd_mtext *t;
    uint64_t now;
    int pass;
} peer_walk;

static void peer_health(void *ud, const bb_engine_peer_info *p)
{
    peer_walk *w = ud;
    char pb[BB_PEERID_TEXT_MAX];
    if (bb_peerid_to_text(&p->peer, pb, sizeof pb, NULL) != BB_OK)
        return;
    uint64_t v = w->pass == 0   ? p->down
                 : w->pass == 1 ? p->failures
                 : w->pass == 2 ? p->attempts
                                : (p->next_retry_ns > w->now ? (p->next_retry_ns - w->now) / 1000000 : 0);
    static const char *const NAMES[] = {"bbd_peer_down", "bbd_peer_failures",
                                        "bbd_peer_backoff_attempts", "bbd_peer_backoff_ms"};
    bbd_mtext_sample(w->t, NAMES[w->pass], false, v, "peer", pb, NULL, NULL);
}

static void peer_metrics(bbd_daemon *d, bbd_mtext *t)
{
    static const struct {
        const char *name, *help;
    } HEALTH[] = {
        {"bbd_peer_down", "1 while the peer-health governor has the peer down"},
        {"bbd_peer_failures", "consecutive failed sends to the peer"},
        {"bbd_peer_backoff_attempts", "backoff attempts since the last successful send"},
        {"bbd_peer_backoff_ms", "milliseconds until the peer may be tried again"},
    };
    peer_walk w = {t, bbd_now_ns(), 0};
    for (w.pass = 0; w.pass < 4; w.pass++) {
        bbd_mtext_family(t, HEALTH[w.pass].name, "gauge", HEALTH[w.pass].help);
        bb_engine_peer_foreach(d->engine, peer_health, &w);
    }
    if (!d->transport)
        return;
    for (const bbd_stat_field *f = BBD_PEER_TOTALS; f->key; f++) {
        char m[160];
        snprintf(m, sizeof m, "bbd_peer_%s", f->key);
        bbd_mtext_family(t, m, field_type(f), f->help);
        bbd_peer_stats st;
        for (size_t i = 0; bbd_transport_peer_stats_at(d->transport, i, &st); i++) {
            char pb[BB_PEERID_TEXT_MAX];
            if (bb_peerid_to_text(&st.peer, pb, sizeof pb, NULL) == BB_OK)
                bbd_mtext_sample(t, m, !f->gauge, bbd_stat_value(f, &st), "peer", pb, NULL,
                                 NULL);
        }
    }
    bbd_mtext_family(t, "bbd_peer_connected", "gauge",
                     "1 while connected, labelled with the state");
    bbd_peer_stats st;
    for (size_t i = 0; bbd_transport_peer_stats_at(d->transport, i, &st); i++) {
        char pb[BB_PEERID_TEXT_MAX];
        if (bb_peerid_to_text(&st.peer, pb, sizeof pb, NULL) == BB_OK)
            bbd_mtext_sample(t, "bbd_peer_connected", false, st.connected, "peer", pb, "state",
                             st.state ? st.state : "?");
    }
}

void bbd_daemon_render_metrics(void *daemon, bbd_mtext *t)
{
    bbd_daemon *d = daemon;
    one(t, "bbd_up", "gauge", "1 while the daemon runs", 1);
    one(t, "bbd_incarnation", "gauge", "engine incarnation (bumped by every restore)",
        bb_engine_incarnation(d->engine));
    one(t, "bbd_uptime_seconds", "gauge", "seconds since start",
        (bbd_now_ns() - d->started_ns) / 1000000000ull);
    stat_fields(t, "bbd_", BBD_DAEMON_COUNTERS, d);
    one(t, "bbd_control_clients", "gauge", "connected control clients",
        bbd_control_client_count(d->control));
    bbd_control_stats cs;
    bbd_control_stats_get(d->control, &cs);
    stat_fields(t, "bbd_control_", BBD_CONTROL_TOTALS, &cs);
    one(t, "bbd_metrics_evicted", "counter",
        "metrics connections closed, waiting for their request, to make room for a new one",
        bbd_metrics_evicted(d->metrics));
    one(t, "bbd_ingress_budget_bytes", "gauge", "the engine's ingress byte budget",
        d->cfg->caps.ingress_byte_budget);
    engine_counters(d, t);
    if (d->transport) {
        bbd_transport_stats s;
        bbd_transport_stats_get(d->transport, &s);
        stat_fields(t, "bbd_transport_", BBD_TRANSPORT_TOTALS, &s);
    }
    peer_metrics(d, t);
}
