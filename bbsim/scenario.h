/*
 * scenario.h — a bbsim scenario (bbsim(1) documents the JSON format): the
 * artifact, node groups, the network model, churn and what to report, read
 * from untrusted JSON into plain structs.
 *
 * Everything is checked at load: every object's keys (an unknown key is
 * refused with its path, "groups[1].conect"), every number's range, every
 * duration and rate's unit, every group a selector or a connect names,
 * every component-config template (substituted for a group's first and
 * last node). A loaded scenario cannot make the simulator fail on its own; only
 * the artifact and the components can.
 *
 * Node numbering: groups in file order, node k of group g is global node
 * groups[g].first + k. Times are virtual nanoseconds from the start of the
 * run (bbsim_ns).
 */
#ifndef BBSIM_SCENARIO_H
#define BBSIM_SCENARIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "bb/engine.h"
#include "bb/status.h"

#define BBSIM_MAX_SCENARIO_BYTES (16u << 20)
#define BBSIM_MAX_NODES 1000000u
#define BBSIM_MAX_GROUPS 256u
#define BBSIM_MAX_LIST 1024u            /* targets, connects, rules, partitions, churn, metrics */
#define BBSIM_MAX_EDGES (64u << 20)     /* connections the groups' "connect" lists make */
#define BBSIM_MAX_NAME 64
#define BBSIM_MAX_DURATION_NS (365ull * 24 * 3600 * 1000000000ull) /* a virtual year */

typedef uint64_t bbsim_ns;

/* Nodes [lo, hi) of one group. */
typedef struct bbsim_sel {
    uint32_t group, lo, hi;
} bbsim_sel;

typedef struct bbsim_sels {
    bbsim_sel *v;
    size_t n;
} bbsim_sels;

typedef enum bbsim_dist_kind {
    BBSIM_DIST_CONSTANT = 0, /* a */
    BBSIM_DIST_UNIFORM,      /* in [a, b] */
    BBSIM_DIST_NORMAL,       /* mean a, standard deviation b, cut at 0 */
    BBSIM_DIST_LOGNORMAL,    /* median a, sigma b (of the log) */
    BBSIM_DIST_EXPONENTIAL   /* mean a */
} bbsim_dist_kind;

typedef struct bbsim_dist {
    bbsim_dist_kind kind;
    double a, b; /* nanoseconds, except a lognormal's sigma */
} bbsim_dist;

/* A link's parameters; the has_* flags say which a rule sets. */
typedef struct bbsim_link_model {
    bool has_latency, has_bandwidth, has_loss, has_duplicate, has_reorder;
    bbsim_dist latency;
    double bandwidth; /* bytes per second; 0: unlimited */
    double loss, duplicate, reorder; /* probabilities per envelope */
} bbsim_link_model;

typedef struct bbsim_link_rule {
    bbsim_sels from, to;
    bbsim_link_model m;
} bbsim_link_rule;

typedef struct bbsim_partition {
    bbsim_ns at, heal;     /* heal UINT64_MAX: never */
    bbsim_sels isolate;    /* cut off from every other node */
} bbsim_partition;

typedef struct bbsim_connect {
    uint32_t group;
    uint32_t count; /* 0: every node of the group; else that many drawn at random */
} bbsim_connect;

typedef struct bbsim_group {
    char *name;
    uint32_t count, first;
    char **targets;
    size_t n_targets;
    cJSON *components;      /* slot -> config template; NULL: none */
    bbsim_connect *connect;
    size_t n_connect;
    bool bootstrap;         /* run_bootstrap(ALL) on a fresh start, as bbd does */
    bbsim_ns start;         /* when its nodes start */
    bb_engine_caps caps;
    double work_scale;      /* multiplies the work cost of its nodes */
    bbsim_ns snapshot_every;/* 0: never (a crash restarts fresh) */
} bbsim_group;

typedef struct bbsim_churn {
    bool is_rate;
    bbsim_sels nodes;
    bbsim_ns at;          /* event: when; rate: the first tick */
    bbsim_ns restart;     /* event: absolute restart time, UINT64_MAX: never */
    double rate;          /* rate: fraction of the live selected nodes per tick */
    bbsim_ns every, downtime, until; /* rate; downtime UINT64_MAX: no restart */
    bool graceful;        /* Shutdown and Snapshot phases + snapshot, as SIGTERM */
} bbsim_churn;

typedef struct bbsim_metric {
    char *name, *topic;
    int item; /* index into a Composite event value; -1: the value itself */
    bool has_target;
    double target; /* has_target: the bucket median the run converges at */
} bbsim_metric;

typedef enum bbsim_work_mode {
    BBSIM_WORK_FIXED = 0, /* every job costs work_cost (times the group's work_scale) */
    BBSIM_WORK_MEASURED   /* the job's thread CPU time times work_scale: not replayable */
} bbsim_work_mode;

typedef struct bbsim_scenario {
    char *dir;                 /* of the scenario file: relative paths start there */
    char *artifact;
    char **plugin_dirs;
    size_t n_plugin_dirs;
    uint64_t seed;
    bbsim_ns duration;
    char *until_topic;         /* NULL: run for the duration */
    uint64_t until_count;
    bbsim_work_mode work_mode;
    bbsim_ns work_cost;
    double work_scale;
    int threads;               /* -1: one per CPU */
    bbsim_group *groups;
    size_t n_groups;
    uint32_t n_nodes;
    bbsim_link_model net;      /* every link, before the rules */
    bbsim_link_rule *links;
    size_t n_links;
    bbsim_partition *partitions;
    size_t n_partitions;
    bbsim_churn *churn;
    size_t n_churn;
    char *round_topic;         /* NULL: no rounds */
    bbsim_metric *metrics;
    size_t n_metrics;
    bbsim_ns bucket;           /* metric medians over many nodes: per bucket */
} bbsim_scenario;

/* Read and check the scenario file (at most BBSIM_MAX_SCENARIO_BYTES). */
int bbsim_scenario_load(const char *path, bbsim_scenario **out, bb_error *err);
/* The same from text; dir is where relative paths start ("." if NULL).
 * origin names the text in messages. */
int bbsim_scenario_parse(const char *text, size_t len, const char *origin, const char *dir,
                         bbsim_scenario **out, bb_error *err);
void bbsim_scenario_free(bbsim_scenario *sc);

/* The group of global node k (k < n_nodes). */
uint32_t bbsim_scenario_group_of(const bbsim_scenario *sc, uint32_t k);
/* Whether node `index` of group `group` is selected. */
bool bbsim_sels_has(const bbsim_sels *s, uint32_t group, uint32_t index);

/* The config of one slot of node `index` of group g as compact JSON text
 * (malloc'd) with its template's placeholders substituted, or NULL in *out
 * when the group configures no such slot. */
int bbsim_slot_config(const bbsim_scenario *sc, uint32_t g, uint32_t index, const char *slot,
                      char **out, bb_error *err);

/* ---- scenario_read.c: the checked readers behind the loader ------------------------ */

/* "12ms", "1.5s", "2m", "1h": *out in ns, at most BBSIM_MAX_DURATION_NS. */
int bbsim_parse_duration(const char *text, bbsim_ns *out);
/* "100Mbit/s", "12.5MB/s", "unlimited" (0): *out in bytes per second. */
int bbsim_parse_bandwidth(const char *text, double *out);

/* ---- template.c ---------------------------------------------------------------------- */

/* A copy of the template t with every "{expr}" of its strings substituted:
 * expr is i (index in the group), n (group size) or node (global index),
 * followed by any of +K -K *K /K %K, left to right. A string that is one
 * placeholder becomes a number. NULL with err naming path on a bad
 * placeholder or out of memory. */
cJSON *bbsim_template_apply(const cJSON *t, int64_t i, int64_t n, int64_t node,
                            const char *path, bb_error *err);

#endif
