/*
 * metrics.h — the metrics endpoint (--metrics MULTIADDR): a minimal
 * HTTP/1.x server answering GET /metrics with the Prometheus text format
 * (text/plain; version=0.0.4), or OpenMetrics 1.0 when the scraper's Accept
 * header asks for application/openmetrics-text. Anything else gets 404 /
 * 405; every connection is closed after one response.
 *
 * Requests are untrusted: the head is capped at BBD_METRICS_MAX_REQUEST
 * bytes (431 beyond), a connection has BBD_METRICS_TIMEOUT_MS to send it,
 * at most BBD_METRICS_MAX_CONNS are open at once and at most
 * BBD_METRICS_MAX_PER_SOURCE from one address. A new connection that would
 * pass either closes the oldest connection still waiting for its request
 * (its source's, or any), so idle connections cannot keep a scraper out
 * (bbd_metrics_evicted counts them).
 *
 * What the page says is the daemon's business: it supplies a render
 * callback that fills a bbd_mtext with families and samples.
 */
#ifndef BBD_HOST_METRICS_H
#define BBD_HOST_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "bb/status.h"

#define BBD_METRICS_MAX_REQUEST 8192
#define BBD_METRICS_TIMEOUT_MS 5000
#define BBD_METRICS_MAX_CONNS 16
#define BBD_METRICS_MAX_PER_SOURCE 4

/* The exposition text being built. */
typedef struct bbd_mtext {
    char *buf;
    size_t len, cap;
    bool openmetrics; /* OpenMetrics 1.0 (else Prometheus 0.0.4) */
    bool oom;
} bbd_mtext;

/* # HELP / # TYPE lines. name is the family name (counters without the
 * _total suffix); type "counter" or "gauge". */
void bbd_mtext_family(bbd_mtext *t, const char *name, const char *type, const char *help);
/* One sample: name_total for counters. Up to two labels (NULL keys skip);
 * label values are escaped. */
void bbd_mtext_sample(bbd_mtext *t, const char *name, bool counter, uint64_t value,
                      const char *k1, const char *v1, const char *k2, const char *v2);
/* Finish (OpenMetrics: "# EOF"). */
void bbd_mtext_end(bbd_mtext *t);
void bbd_mtext_free(bbd_mtext *t);
/* Turn an arbitrary name into [a-zA-Z_:][a-zA-Z0-9_:]* in out[cap]. */
void bbd_metric_name(const char *prefix, const char *name, char *out, size_t cap);

typedef struct bbd_metrics bbd_metrics;
typedef void (*bbd_metrics_render)(void *ud, bbd_mtext *out);

/* Listen on a /ip4|/ip6 .../tcp/PORT multiaddr. BB_EIO names it. */
int bbd_metrics_start(uv_loop_t *loop, const uint8_t *maddr, size_t len,
                      bbd_metrics_render render, void *ud, bbd_metrics **out, bb_error *err);
/* The bound address as multiaddr text (port 0 resolved). */
int bbd_metrics_addr(const bbd_metrics *m, char *out, size_t cap);
void bbd_metrics_close(bbd_metrics *m, void (*done)(void *ud), void *ud);
/* Connections closed to make room for newer ones. */
uint64_t bbd_metrics_evicted(const bbd_metrics *m);

#endif
