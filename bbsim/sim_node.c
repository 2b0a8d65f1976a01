/*
 * sim_node.c — one simulated node's life, as bbd lives it (sim_internal.h):
 *
 *   start    a new engine with the node's identity, seed and caps; install
 *            the group's targets with the node's component configs (the
 *            group's templates, substituted); restore the last snapshot if
 *            there is one, else stage bootstrap FRESH as bbd does on a fresh
 *            start; dial its connections;
 *   poll     poll at virtual time, act on the steps (sends first, as bbd
 *            does), poll again when the engine's next deadline says so;
 *   work     ctx->submit_work: the job runs on the pool now, its completion
 *            lands at its virtual finish time — the node's jobs queue one
 *            after the other on its one virtual CPU, each costing the fixed
 *            time or its measured CPU time;
 *   die      graceful (SIGTERM: the Shutdown and Snapshot phases, drained,
 *            then a snapshot) or a crash; either way its queued work is
 *            cancelled, its running work waited for, its engine freed, and
 *            every peer sees the connection close.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bbsim/sim_internal.h"

#define DRAIN_POLLS 1000 /* polls to run a lifecycle phase at a graceful death (bbd's) */

static uint32_t node_no(const bbsim *s, const bbsim_node *n)
{
    return (uint32_t)(n - s->nodes);
}

/* ---- host callbacks ----------------------------------------------------------------------- */

static int submit_work(void *ud, void (*fn)(void *), void *arg, uint64_t token)
{
    bbsim_node *n = ud;
    bbsim *s = n->sim;
    uint32_t k = node_no(s, n);
    if (n->measuring) /* its start waits for the cost of the one before */
        bbsim__charge_measured(s, UINT64_MAX);
    bbsim_job *j = bbsim_pool_job(s->pool);
    if (!j)
        return BB_ENOMEM; /* the engine runs it inline */
    j->fn = fn;
    j->arg = arg;
    j->token = token;
    j->node = k;
    j->inc = n->inc;
    j->start = s->now > n->cpu_free_at ? s->now : n->cpu_free_at;
    s->sum.jobs++;
    if (s->sc->work_mode == BBSIM_WORK_MEASURED) {
        if (s->n_measuring == s->cap_measuring) {
            size_t cap = s->cap_measuring ? s->cap_measuring * 2 : 64;
            bbsim_job **v = realloc(s->measuring, cap * sizeof *v);
            if (!v) {
                bbsim_pool_release(s->pool, j);
                return BB_ENOMEM;
            }
            s->measuring = v;
            s->cap_measuring = cap;
        }
        s->measuring[s->n_measuring++] = n->measuring = j;
        bbsim_pool_submit(s->pool, j);
        return BB_OK;
    }
    double cost = (double)s->sc->work_cost * s->sc->groups[n->group].work_scale;
    n->cpu_free_at = j->start + (bbsim_ns)cost;
    bbsim_event ev = {.at = n->cpu_free_at, .kind = BBSIM_EV_WORK_DONE, .node = k,
                      .inc = n->inc, .u.job = j};
    if (bbsim__push(s, &ev)) {
        bbsim_pool_release(s->pool, j);
        return BB_ENOMEM;
    }
    bbsim_pool_submit(s->pool, j);
    return BB_OK;
}

void bbsim__charge_measured(bbsim *s, bbsim_ns before)
{
    size_t kept = 0;
    for (size_t i = 0; i < s->n_measuring; i++) {
        bbsim_job *j = s->measuring[i];
        if (j->start >= before) {
            s->measuring[kept++] = j;
            continue;
        }
        bbsim_node *n = &s->nodes[j->node];
        n->measuring = n->measuring == j ? NULL : n->measuring;
        if (!bbsim_pool_wait(s->pool, j)) {
            bbsim_pool_release(s->pool, j); /* cancelled: its node died */
            continue;
        }
        double cost = (double)j->cpu_ns * s->sc->work_scale * s->sc->groups[n->group].work_scale;
        bbsim_event ev = {.at = j->start + (bbsim_ns)cost, .kind = BBSIM_EV_WORK_DONE,
                          .node = j->node, .inc = j->inc, .u.job = j};
        if (j->inc == n->inc && ev.at > n->cpu_free_at)
            n->cpu_free_at = ev.at;
        if (bbsim__push(s, &ev))
            bbsim_pool_release(s->pool, j);
    }
    s->n_measuring = kept;
}

void bbsim__work_done(bbsim *s, const bbsim_event *ev)
{
    bbsim_job *j = ev->u.job;
    bbsim_node *n = &s->nodes[ev->node];
    if (n->engine && j->inc == n->inc && bbsim_pool_wait(s->pool, j)) {
        bb_engine_work_done(n->engine, j->token);
        bbsim__log(s, BBSIM_EV_WORK_DONE, ev->node, 0, j->token, 0);
        bbsim__wake(s, ev->node, s->now);
    }
    bbsim_pool_release(s->pool, j);
}

static void component_log(void *ud, bb_log_level level, const char *slot, const char *msg)
{
    bbsim_node *n = ud;
    if (level > BB_LOG_WARN)
        return;
    char detail[BB_ERROR_MSG_MAX + 80];
    snprintf(detail, sizeof detail, "%s: %s", slot ? slot : "?", msg ? msg : "");
    bbsim__report_sim(n->sim, level == BB_LOG_ERROR ? "log.error" : "log.warn",
                      node_no(n->sim, n), detail);
}

/* The engine's slot_config while node s->installing installs: the group's
 * template substituted for it, made once per slot and kept until the install
 * ends. NULL: the group configures no such slot (or out of memory: the
 * templates were all substituted once at load, nothing else can fail). */
static const char *slot_config(void *ud, const char *slot)
{
    bbsim *s = ud;
    for (size_t i = 0; i < s->n_slot_texts; i++)
        if (strcmp(s->slot_names[i], slot) == 0)
            return s->slot_texts[i];
    const bbsim_node *n = &s->nodes[s->installing];
    char *text = NULL, *name = NULL;
    bb_error err = {0};
    if (bbsim_slot_config(s->sc, n->group, n->index, slot, &text, &err) != BB_OK || !text)
        return NULL;
    char **names = realloc(s->slot_names, (s->n_slot_texts + 1) * sizeof *names);
    if (names)
        s->slot_names = names;
    char **texts = names ? realloc(s->slot_texts, (s->n_slot_texts + 1) * sizeof *texts) : NULL;
    if (texts)
        s->slot_texts = texts;
    if (!texts || !(name = strdup(slot))) {
        free(text);
        return NULL;
    }
    s->slot_names[s->n_slot_texts] = name;
    s->slot_texts[s->n_slot_texts++] = text;
    return text;
}

static void slot_texts_clear(bbsim *s)
{
    for (size_t i = 0; i < s->n_slot_texts; i++) {
        free(s->slot_names[i]);
        free(s->slot_texts[i]);
    }
    s->n_slot_texts = 0;
}

/* ---- start -------------------------------------------------------------------------------- */

static bb_engine *make_engine(bbsim *s, uint32_t k, bb_error *err)
{
    bbsim_node *n = &s->nodes[k];
    const bbsim_group *g = &s->sc->groups[n->group];
    bb_engine_config c;
    bb_engine_config_init(&c);
    bb_engine_addr addr = {n->addr, BBSIM_ADDR_LEN};
    uint64_t x = s->seed + k;
    c.peer = n->peer;
    c.addrs = &addr;
    c.n_addrs = 1;
    c.seed = bbp_splitmix64(&x); /* the same in every life of the node, as bbd's */
    c.caps = g->caps;
    c.submit_work = submit_work;
    c.submit_work_ud = n;
    c.log = component_log;
    c.log_ud = n;
    c.shared_get = bbsim__shared_get;
    c.shared_put = bbsim__shared_put;
    c.shared_ud = s;
    c.share_model = true; /* one artifact for every node: the simulator keeps it */
    return bb_engine_new(&c, err);
}

static int install(bbsim *s, uint32_t k, bb_engine *e, bb_error *err)
{
    bbsim_node *n = &s->nodes[k];
    const bbsim_group *g = &s->sc->groups[n->group];
    bb_engine_registry reg = {.slot_config = slot_config, .ud = s};
    bb_type_source_from_loader(&reg.types, s->loader, NULL);
    s->installing = k;
    int rc = bb_engine_install(e, s->model, (const char *const *)g->targets, g->n_targets,
                               &reg, err);
    slot_texts_clear(s);
    if (rc == BB_OK && n->snapshot && (rc = bb_engine_restore(e, n->snapshot, n->snapshot_len, err)))
        bb_error_prefix(err, "restoring its snapshot (%zu bytes)", n->snapshot_len);
    if (rc == BB_OK && !n->snapshot && g->bootstrap) {
        bb_bootstrap_target fresh = {.kind = BB_BOOTSTRAP_FRESH};
        if ((rc = bb_engine_run_bootstrap(e, &fresh, err)))
            bb_error_prefix(err, "bootstrap");
    }
    return rc;
}

int bbsim__node_start(bbsim *s, uint32_t k, bb_error *err)
{
    bbsim_node *n = &s->nodes[k];
    char name[96];
    bb_engine *e = make_engine(s, k, err);
    int rc = e ? install(s, k, e, err) : (err->code ? err->code : BB_ENOMEM);
    if (rc) {
        bb_engine_free(e);
        return bb_error_prefix(err, "%s", bbsim__node_name(s, k, name, sizeof name));
    }
    n->engine = e;
    n->inc++;
    n->poll_at = UINT64_MAX;
    n->cpu_free_at = s->now;
    s->sum.nodes_up++;
    bbsim__log(s, BBSIM_EV_START, k, n->inc, n->snapshot_len, 0);
    if (n->started) {
        s->sum.restarts++;
        bbsim__report_sim(s, n->snapshot ? "restart" : "restart.fresh", k, NULL);
    }
    n->started = true;
    bbsim__dial_all(s, k);
    bbsim__wake(s, k, s->now);
    return BB_OK;
}

/* ---- polls -------------------------------------------------------------------------------- */

void bbsim__node_poll(bbsim *s, uint32_t k)
{
    bbsim_node *n = &s->nodes[k];
    bb_engine_poll(n->engine, s->now + BBSIM_EPOCH_NS, &s->steps);
    s->sum.polls++;
    for (size_t i = 0; i < s->steps.n; i++) /* envelopes first, as bbd does */
        if (s->steps.v[i].kind == BB_STEP_SEND_ENVELOPE)
            bbsim__send(s, k, &s->steps.v[i]);
    for (size_t i = 0; i < s->steps.n; i++)
        if (s->steps.v[i].kind != BB_STEP_SEND_ENVELOPE)
            bbsim__report_step(s, k, &s->steps.v[i]);
    bb_steps_clear(&s->steps);
    if (!n->engine)
        return;
    uint64_t dl = bb_engine_next_deadline(n->engine);
    if (dl == 0)
        bbsim__wake(s, k, s->now);
    else if (dl != UINT64_MAX)
        bbsim__wake(s, k, dl > BBSIM_EPOCH_NS ? dl - BBSIM_EPOCH_NS : 0);
}

/* ---- snapshots and death ------------------------------------------------------------------- */

void bbsim__node_snapshot(bbsim *s, uint32_t k)
{
    bbsim_node *n = &s->nodes[k];
    uint8_t *snap = NULL;
    size_t len = 0;
    bb_error err = {0};
    if (bb_engine_snapshot(n->engine, &snap, &len, &err) != BB_OK) {
        bbsim__report_sim(s, "snapshot.failed", k, err.msg);
        return;
    }
    free(n->snapshot);
    n->snapshot = snap;
    n->snapshot_len = len;
    bbsim__log_bytes(s, BBSIM_EV_SNAPSHOT, k, n->inc, snap, len);
}

/* bbd's stop: fire a lifecycle phase and poll until nothing is pending. */
static void fire_phase(bbsim *s, uint32_t k, int64_t phase)
{
    bbsim_node *n = &s->nodes[k];
    if (bb_engine_fire_lifecycle(n->engine, phase, NULL) != BB_OK)
        return;
    for (int i = 0; i < DRAIN_POLLS && n->engine; i++) {
        bbsim__node_poll(s, k);
        if (bb_engine_next_deadline(n->engine) != 0)
            break;
    }
}

/* Its measured jobs leave the list (the pool cancelled or finished them). */
static void forget_measuring(bbsim *s, uint32_t k)
{
    size_t kept = 0;
    for (size_t i = 0; i < s->n_measuring; i++) {
        if (s->measuring[i]->node == k)
            bbsim_pool_release(s->pool, s->measuring[i]);
        else
            s->measuring[kept++] = s->measuring[i];
    }
    s->n_measuring = kept;
    s->nodes[k].measuring = NULL;
}

void bbsim__node_kill(bbsim *s, uint32_t k, bool graceful, const char *why)
{
    bbsim_node *n = &s->nodes[k];
    if (graceful) {
        fire_phase(s, k, 1); /* Shutdown */
        fire_phase(s, k, 2); /* Snapshot */
        bbsim__node_snapshot(s, k);
    }
    bbsim_pool_cancel_node(s->pool, k);
    forget_measuring(s, k);
    bb_engine_free(n->engine);
    n->engine = NULL;
    n->poll_at = UINT64_MAX;
    s->sum.kills++;
    s->sum.nodes_up--;
    bbsim__log(s, BBSIM_EV_KILL, k, n->inc, graceful, 0);
    bbsim__report_sim(s, graceful ? "stop" : "kill", k, why);
    bbsim__drop_all(s, k);
}
