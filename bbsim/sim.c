/*
 * sim.c — the simulator's setup and its event loop (sim.h).
 *
 * Setup loads the artifact and the plugins once, gives every node its
 * identity (an Ed25519 key drawn from the seed, so a PeerId is the same in
 * every run; an address 10.a.b.c that encodes its number), builds the
 * connection graph of the groups' connect lists and schedules the nodes'
 * starts, the partitions, the churn and the snapshots. No engine exists
 * before the loop starts them.
 *
 * The loop pops the earliest event, sets the virtual clock to it and acts;
 * acting schedules later events (never earlier than now). It ends at the
 * scenario's duration, at its "until" count, or when nothing is left to
 * happen. Work whose cost is measured is charged before any event that
 * could come after it (bbsim__charge_measured).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bb/model_io.h"
#include "bb/multiaddr.h"
#include "bbsim/sim_internal.h"

double bbsim__wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

size_t bbsim__rss(bool peak)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t kb = 0;
    const char *key = peak ? "VmHWM:" : "VmRSS:";
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, 6) == 0)
            kb = (size_t)strtoull(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kb * 1024;
}

const char *bbsim__node_name(const bbsim *s, uint32_t k, char *buf, size_t cap)
{
    const bbsim_node *n = &s->nodes[k];
    snprintf(buf, cap, "%s[%u]", s->sc->groups[n->group].name, n->index);
    return buf;
}

int bbsim__push(bbsim *s, bbsim_event *ev)
{
    if (ev->at < s->now)
        ev->at = s->now;
    int rc = bbsim_queue_push(&s->q, ev);
    if (rc && ev->kind == BBSIM_EV_DELIVER)
        free(ev->u.env.bytes);
    return rc;
}

void bbsim__wake(bbsim *s, uint32_t k, bbsim_ns at)
{
    bbsim_node *n = &s->nodes[k];
    if (!n->engine)
        return;
    if (at < s->now)
        at = s->now;
    if (n->poll_at <= at)
        return; /* a poll at or before then is already due */
    n->poll_at = at;
    bbsim_event ev = {.at = at, .kind = BBSIM_EV_POLL, .node = k, .inc = n->inc};
    bbsim__push(s, &ev);
}

/* ---- setup ------------------------------------------------------------------------------ */

static int load_plugins(bbsim *s, bb_error *err)
{
    int rc = bb_plugin_loader_create(0, &s->loader, err);
    for (size_t i = 0; !rc && i < s->opt.n_plugin_dirs; i++)
        rc = bb_plugin_loader_add_dirs(s->loader, s->opt.plugin_dirs[i], err);
    for (size_t i = 0; !rc && i < s->sc->n_plugin_dirs; i++)
        rc = bb_plugin_loader_add_dirs(s->loader, s->sc->plugin_dirs[i], err);
    if (!rc)
        rc = bb_plugin_loader_scan(s->loader, err);
    for (size_t i = 0; !rc && i < bb_plugin_loader_warning_count(s->loader); i++)
        fprintf(stderr, "bbsim: warning: %s\n", bb_plugin_loader_warning_at(s->loader, i));
    return rc;
}

/* Node k's identity: an Ed25519 key from (seed, k), an address that encodes k. */
static int make_identity(bbsim *s, uint32_t k, bb_error *err)
{
    bbsim_node *n = &s->nodes[k];
    uint8_t key_seed[BB_ED25519_SEED_LEN];
    uint64_t x = s->seed ^ ((uint64_t)k * 0x9e3779b97f4a7c15ull);
    for (size_t i = 0; i < sizeof key_seed; i += 8) {
        uint64_t w = bbp_splitmix64(&x);
        memcpy(key_seed + i, &w, 8);
    }
    bb_keypair kp;
    int rc = bb_keypair_from_seed(key_seed, &kp, err);
    if (rc)
        return rc;
    bb_peerid_from_pubkey(kp.pk, &n->peer);
    bb_keypair_wipe(&kp);
    char text[64];
    size_t len = 0;
    snprintf(text, sizeof text, "/ip4/10.%u.%u.%u/tcp/7000", (k >> 16) & 255, (k >> 8) & 255,
             k & 255);
    rc = bb_multiaddr_parse(text, n->addr, sizeof n->addr, &len, err);
    if (!rc && len != BBSIM_ADDR_LEN)
        rc = bb_error_set(err, BB_ERUNTIME, "%s: %zu bytes, not %d", text, len, BBSIM_ADDR_LEN);
    return rc;
}

static int make_nodes(bbsim *s, bb_error *err)
{
    const bbsim_scenario *sc = s->sc;
    s->n_nodes = sc->n_nodes;
    if (!(s->nodes = calloc(s->n_nodes, sizeof *s->nodes)))
        return bb_error_set(err, BB_ENOMEM, "%u nodes: out of memory", s->n_nodes);
    for (uint32_t k = 0; k < s->n_nodes; k++) {
        bbsim_node *n = &s->nodes[k];
        n->sim = s;
        n->group = bbsim_scenario_group_of(sc, k);
        n->index = k - sc->groups[n->group].first;
        n->poll_at = UINT64_MAX;
        int rc = make_identity(s, k, err);
        if (rc)
            return rc;
    }
    return BB_OK;
}

/* Starts, partitions, snapshots and churn, in that order. */
static int schedule(bbsim *s)
{
    const bbsim_scenario *sc = s->sc;
    int rc = BB_OK;
    for (uint32_t k = 0; !rc && k < s->n_nodes; k++) {
        bbsim_event ev = {.at = sc->groups[s->nodes[k].group].start, .kind = BBSIM_EV_START,
                          .node = k};
        rc = bbsim__push(s, &ev);
    }
    for (uint32_t p = 0; !rc && p < sc->n_partitions; p++) {
        bbsim_event on = {.at = sc->partitions[p].at, .kind = BBSIM_EV_PARTITION, .u.index = p};
        rc = bbsim__push(s, &on);
        bbsim_event off = {.at = sc->partitions[p].heal, .kind = BBSIM_EV_HEAL, .u.index = p};
        if (!rc && sc->partitions[p].heal != UINT64_MAX)
            rc = bbsim__push(s, &off);
    }
    for (uint32_t k = 0; !rc && k < s->n_nodes; k++) {
        const bbsim_group *g = &sc->groups[s->nodes[k].group];
        bbsim_event ev = {.at = g->start + g->snapshot_every, .kind = BBSIM_EV_SNAPSHOT,
                          .node = k};
        if (g->snapshot_every)
            rc = bbsim__push(s, &ev);
    }
    return rc ? rc : bbsim__churn_schedule(s);
}

static int default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 8 ? 8 : (int)n;
}

int bbsim_new(const bbsim_scenario *sc, const bbsim_options *o, bbsim **out, bb_error *err)
{
    *out = NULL;
    bbsim *s = calloc(1, sizeof *s);
    if (!s)
        return bb_error_set(err, BB_ENOMEM, "out of memory");
    s->sc = sc;
    if (o)
        s->opt = *o;
    else
        s->opt.threads = -1;
    s->wall_start = bbsim__wall();
    s->seed = s->opt.has_seed ? s->opt.seed : sc->seed;
    s->log_hash = bb_fnv1a64(&s->seed, sizeof s->seed); /* the log's hash starts from the seed */
    bbp_rng_seed(&s->rng, s->seed ^ 0x6262736d6e6574ull);
    int threads = s->opt.threads >= 0 ? s->opt.threads
                  : sc->threads >= 0  ? sc->threads
                                      : default_threads();
    bb_steps_init(&s->steps);
    const char *artifact = s->opt.artifact ? s->opt.artifact : sc->artifact;
    int rc = load_plugins(s, err);
    if (!rc)
        rc = bb_model_load_file(artifact, &s->model, err);
    if (!rc && !(s->pool = bbsim_pool_new(threads)))
        rc = bb_error_set(err, BB_ERUNTIME, "cannot start %d worker threads", threads);
    if (!rc && sc->n_partitions && !(s->partition_on = calloc(sc->n_partitions, 1)))
        rc = bb_error_set(err, BB_ENOMEM, "out of memory");
    if (!rc && sc->n_metrics && !(s->series = calloc(sc->n_metrics, sizeof *s->series)))
        rc = bb_error_set(err, BB_ENOMEM, "out of memory");
    s->sum.rss_before = bbsim__rss(false);
    if (!rc)
        rc = make_nodes(s, err);
    if (!rc)
        rc = bbsim__connect_graph(s, err);
    if (!rc && (rc = schedule(s)))
        bb_error_set(err, rc, "scheduling the run: out of memory");
    if (rc) {
        bbsim_free(s);
        return rc;
    }
    s->sum.nodes = s->n_nodes;
    *out = s;
    return BB_OK;
}

void bbsim_free(bbsim *s)
{
    if (!s)
        return;
    bbsim_pool_free(s->pool); /* first: no worker may run a node's work past its engine */
    for (uint32_t k = 0; s->nodes && k < s->n_nodes; k++) {
        bbsim_node *n = &s->nodes[k];
        bb_engine_free(n->engine);
        free(n->snapshot);
        free(n->edges);
        free(n->links);
    }
    free(s->nodes);
    bbsim_queue_free(&s->q);
    bb_steps_free(&s->steps);
    bbsim__cache_free(&s->cache);
    bbsim__report_free(s);
    free(s->measuring);
    free(s->partition_on);
    free(s->slot_names);
    free(s->slot_texts);
    bb_model_free(s->model);
    bb_plugin_loader_destroy(s->loader);
    free(s);
}

const bbsim_summary *bbsim_summary_get(const bbsim *s)
{
    return &s->sum;
}

/* ---- the loop ---------------------------------------------------------------------------- */

static int dispatch(bbsim *s, const bbsim_event *ev, bb_error *err)
{
    bbsim_node *n = &s->nodes[ev->node];
    switch (ev->kind) {
    case BBSIM_EV_START:
        return bbsim__node_start(s, ev->node, err);
    case BBSIM_EV_RESTART:
        return n->engine ? BB_OK : bbsim__node_start(s, ev->node, err);
    case BBSIM_EV_POLL:
        if (n->engine && ev->inc == n->inc && ev->at == n->poll_at) {
            n->poll_at = UINT64_MAX;
            bbsim__node_poll(s, ev->node);
        }
        return BB_OK;
    case BBSIM_EV_DELIVER: bbsim__deliver(s, ev); return BB_OK;
    case BBSIM_EV_SEND_FAILED:
        if (n->engine && ev->inc == n->inc &&
            bb_engine_report_send(n->engine, &s->nodes[ev->other].peer, false))
            bbsim__wake(s, ev->node, s->now);
        return BB_OK;
    case BBSIM_EV_CONNECT: bbsim__connect(s, ev); return BB_OK;
    case BBSIM_EV_REDIAL: bbsim__redial(s, ev); return BB_OK;
    case BBSIM_EV_WORK_DONE: bbsim__work_done(s, ev); return BB_OK;
    case BBSIM_EV_KILL:
        if (n->engine)
            bbsim__node_kill(s, ev->node, s->sc->churn[ev->u.index].graceful, "churn");
        return BB_OK;
    case BBSIM_EV_SNAPSHOT: {
        bbsim_event next = *ev;
        next.at = s->now + s->sc->groups[n->group].snapshot_every;
        if (n->engine)
            bbsim__node_snapshot(s, ev->node);
        return bbsim__push(s, &next);
    }
    case BBSIM_EV_PARTITION: bbsim__partition(s, ev->u.index, true); return BB_OK;
    case BBSIM_EV_HEAL: bbsim__partition(s, ev->u.index, false); return BB_OK;
    case BBSIM_EV_CHURN_TICK: bbsim__churn_tick(s, ev->u.index); return BB_OK;
    default: return bb_error_set(err, BB_ERUNTIME, "event of unknown kind %u", ev->kind);
    }
}

/* After an event: the first moment every node has started (memory per node). */
static void note_setup(bbsim *s)
{
    if (s->sum.setup_s || s->sum.nodes_up < s->n_nodes)
        return;
    s->sum.setup_s = bbsim__wall() - s->wall_start;
    s->sum.rss_nodes = bbsim__rss(false);
}

int bbsim_run(bbsim *s, bb_error *err)
{
    const bbsim_scenario *sc = s->sc;
    int rc = BB_OK;
    s->sum.stopped = "nothing left to happen";
    for (;;) {
        const bbsim_event *top = bbsim_queue_peek(&s->q);
        if (top && s->n_measuring) {
            bbsim__charge_measured(s, top->at);
            top = bbsim_queue_peek(&s->q);
        }
        if (!top)
            break;
        if (top->at > sc->duration) {
            s->sum.stopped = "duration reached";
            s->now = sc->duration;
            break;
        }
        bbsim_event ev;
        bbsim_queue_pop(&s->q, &ev);
        s->now = ev.at;
        s->sum.events++;
        if ((rc = dispatch(s, &ev, err)))
            break;
        note_setup(s);
        if (sc->until_topic && s->until_seen >= sc->until_count) {
            s->sum.stopped = "until count reached";
            break;
        }
        if (s->opt.progress && (s->sum.events & 255) == 0)
            bbsim__progress(s, false);
    }
    if (s->opt.progress)
        bbsim__progress(s, true);
    s->sum.virtual_ns = s->now;
    s->sum.wall_s = bbsim__wall() - s->wall_start;
    s->sum.rss_peak = bbsim__rss(true);
    s->sum.log_hash = s->log_hash;
    return rc;
}
