/*
 * sim.h — bbsim, the simulator: every node of a scenario (scenario.h) is a
 * real engine (libbbengine) with real components (the plugins, dlopen'd
 * once per process), all in one process, driven by one discrete-event loop
 * in virtual time. The envelopes nodes exchange are the bytes their
 * SendEnvelope steps produce, carried by a network model (latency,
 * bandwidth, loss, duplication, reordering, partitions); the host's part
 * of a node (connections and the handshake that announces targets, the
 * address book, redials, PeerDown through failed sends, snapshots) is
 * modelled, and off-thread work is charged virtual time.
 *
 * Same scenario and seed, same run: events are ordered by (virtual time,
 * the order they were scheduled in), every random draw comes from the
 * scenario's seed, and work that ran on a worker thread is applied at its
 * virtual completion time whatever thread finished first. The hash of the
 * event log (every send, delivery, drop, AppEvent, failure, kill and
 * restart, with the bytes) tells two runs apart (summary.log_hash) — unless
 * work is charged its measured time.
 *
 *   bbsim *s;
 *   if (bbsim_new(scenario, &opts, &s, &err) || bbsim_run(s, &err)) ...
 *   bbsim_report_print(s, stderr); bbsim_report_write(s, "out", &err);
 *   bbsim_free(s);
 *
 * Not thread-safe: one simulator per thread (its workers are its own).
 */
#ifndef BBSIM_SIM_H
#define BBSIM_SIM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "bb/status.h"
#include "bbsim/scenario.h"

typedef struct bbsim bbsim;

typedef struct bbsim_options {
    const char *const *plugin_dirs; /* searched before the scenario's plugin_path */
    size_t n_plugin_dirs;
    const char *artifact;           /* instead of the scenario's (NULL: the scenario's) */
    bool has_seed;                  /* seed instead of the scenario's */
    uint64_t seed;
    int threads;                    /* worker threads; -1: the scenario's, else one per CPU */
    FILE *events;                   /* JSON lines: AppEvents, failures, churn (NULL: none) */
    bool progress;                  /* a progress bar on stderr (the caller checks it is a tty) */
} bbsim_options;

typedef struct bbsim_summary {
    const char *stopped;            /* why the run ended */
    bbsim_ns virtual_ns;            /* virtual time at the end */
    double wall_s, setup_s;         /* wall time of the whole run, of starting the nodes */
    uint64_t events, polls;
    uint64_t sent, delivered, bytes_sent, bytes_delivered, duplicated;
    uint64_t dropped_loss, dropped_partition, dropped_down, dropped_unroutable,
        dropped_backoff;
    uint64_t app_events, failures, kills, restarts, jobs;
    uint64_t rounds;                /* AppEvents of report.round_topic */
    uint32_t nodes, nodes_up;
    size_t rss_before, rss_nodes, rss_peak; /* bytes: before the nodes, with them, peak */
    size_t shared_values, shared_bytes;     /* what the nodes share (ctx->shared_put) */
    uint64_t log_hash;
} bbsim_summary;

/* Loads the artifact and the plugins and makes every node (none runs yet).
 * sc is borrowed and must outlive the simulator. */
int bbsim_new(const bbsim_scenario *sc, const bbsim_options *o, bbsim **out, bb_error *err);
/* Runs until the duration, the "until" count or the last event. */
int bbsim_run(bbsim *s, bb_error *err);
const bbsim_summary *bbsim_summary_get(const bbsim *s);
void bbsim_free(bbsim *s);

/* ---- report.c ------------------------------------------------------------------------ */

/* The summary as text (rounds, metrics, traffic, drops, memory). */
void bbsim_report_print(const bbsim *s, FILE *f);
/* summary.json, one SVG per metric (metric-NAME.svg: the value over virtual
 * time) and traffic.svg (bytes on the wire per round) into dir. */
int bbsim_report_write(const bbsim *s, const char *dir, bb_error *err);

#endif
