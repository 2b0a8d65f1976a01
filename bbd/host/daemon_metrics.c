/*
 * daemon_metrics.c — what the metrics page shows (bbd(8), "METRICS"):
 * the engine's counters, the transport's bytes and envelopes in and out
 * per peer, connection states, peer health and backoff, ingress drops and
 * byte-budget use, and the daemon's own counters.
 */
#include <stdio.h>
#include <string.h>

#include "bbd/host/daemon.h"

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
    static const struct {
        const char *name, *type, *help;
    } TR[] = {
        {"bbd_peer_bytes_in", "counter", "bytes received from the peer"},
        {"bbd_peer_bytes_out", "counter", "bytes sent to the peer"},
        {"bbd_peer_envelopes_in", "counter", "envelopes received from the peer"},
        {"bbd_peer_envelopes_out", "counter", "envelopes sent to the peer"},
        {"bbd_peer_queued_bytes", "gauge", "bytes queued for the peer"},
        {"bbd_peer_dropped", "counter", "envelopes dropped for the peer"},
        {"bbd_peer_connected", "gauge", "1 while connected, labelled with the state"},
    };
    for (size_t f = 0; f < sizeof TR / sizeof *TR; f++) {
        bbd_mtext_family(t, TR[f].name, TR[f].type, TR[f].help);
        bbd_peer_stats st;
        for (size_t i = 0; bbd_transport_peer_stats_at(d->transport, i, &st); i++) {
            char pb[BB_PEERID_TEXT_MAX];
            if (bb_peerid_to_text(&st.peer, pb, sizeof pb, NULL) != BB_OK)
                continue;
            uint64_t v[] = {st.bytes_in,   st.bytes_out,    st.envelopes_in, st.envelopes_out,
                            st.queued_bytes, st.dropped,    st.connected};
            bool counter = strcmp(TR[f].type, "counter") == 0;
            if (f == 6)
                bbd_mtext_sample(t, TR[f].name, false, v[f], "peer", pb, "state",
                                 st.state ? st.state : "?");
            else
                bbd_mtext_sample(t, TR[f].name, counter, v[f], "peer", pb, NULL, NULL);
        }
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
    one(t, "bbd_polls", "counter", "engine poll cycles", d->polls);
    one(t, "bbd_backoff_dropped", "counter",
        "envelopes held back because their peer was in backoff", d->backoff_dropped);
    one(t, "bbd_send_errors", "counter", "envelopes the transport refused", d->send_errors);
    one(t, "bbd_deliver_errors", "counter", "inbound envelopes the engine refused",
        d->deliver_errors);
    one(t, "bbd_app_events", "counter", "AppEvents emitted", d->app_events);
    one(t, "bbd_snapshots_written", "counter", "snapshots written", d->snapshots_written);
    one(t, "bbd_control_clients", "gauge", "connected control clients",
        bbd_control_client_count(d->control));
    one(t, "bbd_ingress_budget_bytes", "gauge", "the engine's ingress byte budget",
        d->cfg->caps.ingress_byte_budget);
    engine_counters(d, t);
    if (d->transport) {
        bbd_transport_stats s;
        bbd_transport_stats_get(d->transport, &s);
        one(t, "bbd_transport_bytes_in", "counter", "bytes received", s.bytes_in);
        one(t, "bbd_transport_bytes_out", "counter", "bytes sent", s.bytes_out);
        one(t, "bbd_transport_envelopes_in", "counter", "envelopes received", s.envelopes_in);
        one(t, "bbd_transport_envelopes_out", "counter", "envelopes sent", s.envelopes_out);
        one(t, "bbd_transport_frames_refused", "counter",
            "frames refused (over the cap or malformed)", s.frames_refused);
        one(t, "bbd_transport_queue_dropped", "counter",
            "envelopes dropped on queue bounds", s.queue_dropped);
        one(t, "bbd_transport_udp_fragments_in", "counter", "UDP fragments received",
            s.udp_fragments_in);
        one(t, "bbd_transport_udp_reassembly_dropped", "counter",
            "partial UDP envelopes dropped", s.udp_reassembly_dropped);
        one(t, "bbd_transport_connections_open", "gauge", "open connections",
            s.connections_open);
    }
    peer_metrics(d, t);
}
