/*
 * sim_internal.h — what the simulator's files share (sim.h is the outside
 * view):
 *   sim.c        setup, the event loop, stop conditions;
 *   sim_node.c   a node's life: start (install, restore or bootstrap),
 *                polls and the steps they return, snapshots, death;
 *   sim_net.c    the network model: sends, deliveries, connections,
 *                redials, partitions;
 *   sim_churn.c  the scenario's kills and restarts;
 *   cache.c      the shared read-only values (ctx->shared_get/put);
 *   report.c     the event log (hash, JSON lines), rounds, metrics, the
 *                summary; svg.c its plots; progress.c the progress bar.
 *
 * Engine time is virtual time plus BBSIM_EPOCH_NS, so no Clock reads 0.
 * A node's incarnation counts its starts: an event scheduled for an
 * earlier life of a node (a delivery to a node that died and came back)
 * is dropped.
 */
#ifndef BBSIM_SIM_INTERNAL_H
#define BBSIM_SIM_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "bb/engine.h"
#include "bb/plugin_loader.h"
#include "bbsim/events.h"
#include "bbsim/scenario.h"
#include "bbsim/sim.h"
#include "bbsim/work.h"
#include "plugins/common/plugin_rng.h"

#define BBSIM_EPOCH_NS 1000000000ull
#define BBSIM_ADDR_LEN 8           /* /ip4/10.a.b.c/tcp/7000, binary */
#define BBSIM_DIAL_FIRST_NS 100000000ull  /* bbd's redial: 100 ms, doubling */
#define BBSIM_DIAL_MAX_NS 5000000000ull   /* to 5 s */
#define BBSIM_LOST_REDIAL_NS (600ull * 1000000000ull) /* a lost peer: 10 minutes */

/* One end of a connection a node keeps (sorted by peer: the first member,
 * as sim_net.c's sorted arrays want). */
enum { BBSIM_EDGE_CONFIGURED = 1, BBSIM_EDGE_CONNECTED = 2, BBSIM_EDGE_REDIALING = 4 };
typedef struct bbsim_edge {
    uint32_t peer;
    uint32_t flags;
    bbsim_ns lost_at;  /* when it dropped (redials of an unconfigured edge stop 10 min later) */
} bbsim_edge;

/* The state of the link to one destination (sorted by dst, the first
 * member): its queue
 * for the bandwidth and the last arrival, so envelopes keep their order. */
typedef struct bbsim_link {
    uint32_t dst;
    bbsim_ns busy_until, last_arrival;
} bbsim_link;

typedef struct bbsim_node {
    struct bbsim *sim;
    bb_peerid peer;
    uint8_t addr[BBSIM_ADDR_LEN];
    uint32_t group, index;
    bb_engine *engine;      /* NULL while down */
    uint32_t inc;           /* incarnation: starts so far */
    bbsim_ns poll_at;       /* the pending poll, UINT64_MAX: none */
    bbsim_ns cpu_free_at;   /* its work runs one job at a time, in virtual time */
    bbsim_job *measuring;   /* work cost "measured": its job of unknown cost */
    uint8_t *snapshot;      /* its last snapshot (a restart restores it) */
    size_t snapshot_len;
    bbsim_edge *edges;
    uint32_t n_edges, cap_edges;
    bbsim_link *links;
    uint32_t n_links, cap_links;
    uint64_t bytes_in, bytes_out;
    bool started;           /* started at least once */
} bbsim_node;

typedef struct bbsim_cache {
    char **keys;
    bb_value **vals;
    size_t n, cap;
} bbsim_cache;

/* A reported number: (virtual time, node, value) of a metric. */
typedef struct bbsim_point {
    bbsim_ns at;
    uint32_t node;
    double value;
} bbsim_point;

typedef struct bbsim_series {
    bbsim_point *v;
    size_t n, cap;
} bbsim_series;

/* A metric over one report bucket [at, at + report.bucket) of virtual time:
 * how many values, their 10th, 50th and 90th percentile. */
typedef struct bbsim_bucket {
    bbsim_ns at;
    size_t n;
    double p10, median, p90;
} bbsim_bucket;

typedef struct bbsim_round {
    bbsim_ns at;
    uint64_t bytes; /* on the wire since the previous round */
} bbsim_round;

struct bbsim {
    const bbsim_scenario *sc;
    bbsim_options opt;
    bbsim_summary sum;
    bb_plugin_loader *loader;
    bb_model *model;
    bbsim_node *nodes;
    uint32_t n_nodes;
    uint64_t seed;          /* the scenario's, or the one the options give */
    bbsim_queue q;
    bbsim_ns now;
    bbp_rng rng;            /* the network's and churn's draws */
    bbsim_pool *pool;
    bbsim_job **measuring;  /* measured work not yet charged, in submit order */
    size_t n_measuring, cap_measuring;
    bbsim_cache cache;
    bb_steps steps;
    bool *partition_on;     /* per scenario partition */
    /* install-time slot configs of the node being installed */
    uint32_t installing;
    char **slot_texts, **slot_names;
    size_t n_slot_texts;
    /* report */
    uint64_t log_hash;
    uint64_t until_seen;
    bbsim_round *rounds;
    size_t n_rounds, cap_rounds;
    uint64_t bytes_at_round;
    bbsim_series *series;   /* per scenario metric */
    double wall_start;
    double progress_next;
};

/* ---- sim.c -------------------------------------------------------------------------------- */
int bbsim__push(bbsim *s, bbsim_event *ev);
/* Poll node k at time at (coalesced with a pending earlier poll). */
void bbsim__wake(bbsim *s, uint32_t k, bbsim_ns at);
double bbsim__wall(void);
size_t bbsim__rss(bool peak);
const char *bbsim__node_name(const bbsim *s, uint32_t k, char *buf, size_t cap);

/* ---- sim_node.c -------------------------------------------------------------------------- */
int bbsim__node_start(bbsim *s, uint32_t k, bb_error *err);
void bbsim__node_poll(bbsim *s, uint32_t k);
void bbsim__node_kill(bbsim *s, uint32_t k, bool graceful, const char *why);
void bbsim__node_snapshot(bbsim *s, uint32_t k);
void bbsim__work_done(bbsim *s, const bbsim_event *ev);
/* Charge every measured job that started before `before` (waits for them). */
void bbsim__charge_measured(bbsim *s, bbsim_ns before);

/* ---- sim_net.c ---------------------------------------------------------------------------- */
/* The node whose address is addr (NULL: none of ours). */
bbsim_node *bbsim__node_at(bbsim *s, const uint8_t *addr, size_t len);
/* Make node k's configured connections (the groups' connect lists). */
int bbsim__connect_graph(bbsim *s, bb_error *err);
void bbsim__send(bbsim *s, uint32_t from, bb_step *st);
void bbsim__deliver(bbsim *s, const bbsim_event *ev);
void bbsim__connect(bbsim *s, const bbsim_event *ev);
void bbsim__redial(bbsim *s, const bbsim_event *ev);
/* Node k came up: dial its edges whose other end is up and reachable. */
void bbsim__dial_all(bbsim *s, uint32_t k);
/* Node k went down: every connected peer sees the connection close. */
void bbsim__drop_all(bbsim *s, uint32_t k);
void bbsim__partition(bbsim *s, uint32_t p, bool on);
bool bbsim__reachable(const bbsim *s, uint32_t a, uint32_t b);

/* ---- sim_churn.c -------------------------------------------------------------------------- */
int bbsim__churn_schedule(bbsim *s);
void bbsim__churn_tick(bbsim *s, uint32_t rule);

/* ---- cache.c ------------------------------------------------------------------------------ */
bb_value *bbsim__shared_get(void *ud, const char *key);
bb_value *bbsim__shared_put(void *ud, const char *key, bb_value *v);
void bbsim__cache_free(bbsim_cache *c);

/* ---- report.c ----------------------------------------------------------------------------- */
/* Fold a record into the event log hash. */
void bbsim__log(bbsim *s, uint32_t kind, uint32_t a, uint32_t b, uint64_t x, uint64_t y);
void bbsim__log_bytes(bbsim *s, uint32_t kind, uint32_t a, uint32_t b, const uint8_t *p,
                      size_t len);
/* An engine step worth reporting (AppEvent, failure, peer health). */
void bbsim__report_step(bbsim *s, uint32_t k, const bb_step *st);
/* Whether every value of a series comes from one node (plotted as a line). */
bool bbsim__series_one_node(const bbsim_series *sr);
/* Metric m per report bucket, in time order (returns new, free(); *n
 * buckets; NULL with *n = 0 when it has no value or memory ran out). */
bbsim_bucket *bbsim__metric_buckets(const bbsim *s, size_t m, size_t *n);
/* A simulator event line ("kill", "restart", "partition", ...). */
void bbsim__report_sim(bbsim *s, const char *what, int64_t node, const char *detail);
void bbsim__report_free(bbsim *s);

/* ---- progress.c --------------------------------------------------------------------------- */
void bbsim__progress(bbsim *s, bool last);

/* ---- svg.c -------------------------------------------------------------------------------- */
int bbsim__svg_metric(const bbsim *s, size_t m, const char *path, bb_error *err);
int bbsim__svg_traffic(const bbsim *s, const char *path, bb_error *err);

#endif
