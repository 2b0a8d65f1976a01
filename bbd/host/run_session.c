/*
 * run_session.c — one invocation of a compiled target in an in-process
 * engine: no network, no daemon, no event loop. The engine is created with
 * a fixed identity, the target installed with the registry's plugin types,
 * invoked once, then polled on this thread until every output of the
 * target has surfaced as an AppEvent. Between polls the thread sleeps until
 * the engine's next deadline or until a completion from another thread
 * wakes it (the engine's wake callback signals a condition variable).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bb/artifact.h"
#include "bb/peerid.h"
#include "bbd/host/run_internal.h"

void bbd_run_result_free(bbd_run_result *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++) {
        free(r->v[i].name);
        bb_value_unref(r->v[i].value);
    }
    free(r->v);
    r->v = NULL;
    r->n = 0;
}

/* ---- targets ------------------------------------------------------------------------ */

int bbd_run_pick_target(const bb_model *compiled, const char *want, const bb_function **out,
                        bb_error *err)
{
    *out = NULL;
    bb_arena *a = bb_arena_create();
    if (!a)
        return bb_error_set(err, BB_ENOMEM, "out of memory");
    bb_artifact art;
    const bb_artifact_target *t = NULL;
    int rc = bb_artifact_read(compiled, "the model", a, &art, err);
    if (rc == BB_OK && want) {
        rc = bb_artifact_find_target(&art, want, &t, err);
    } else if (rc == BB_OK && art.n_targets == 1) {
        t = &art.targets[0];
    } else if (rc == BB_OK) {
        char names[512];
        rc = bb_error_set(err, BB_EINVAL, "the model has %zu targets (%s): choose one with "
                          "--target", art.n_targets,
                          bb_artifact_target_names(&art, names, sizeof names));
    }
    if (t)
        *out = t->fn;
    bb_arena_destroy(a);
    return rc;
}

/* ---- the session ---------------------------------------------------------------------- */

typedef struct waker {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool woken;
} waker;

static void wake(void *ud)
{
    waker *w = ud;
    pthread_mutex_lock(&w->mu);
    w->woken = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Sleep until `until` (monotonic ns) or a wake. */
static void wait_until(waker *w, uint64_t until)
{
    struct timespec ts = {.tv_sec = (time_t)(until / 1000000000ull),
                          .tv_nsec = (long)(until % 1000000000ull)};
    pthread_mutex_lock(&w->mu);
    while (!w->woken) {
        int rc = pthread_cond_timedwait(&w->cv, &w->mu, &ts);
        if (rc == ETIMEDOUT || rc != 0)
            break;
    }
    w->woken = false;
    pthread_mutex_unlock(&w->mu);
}

static void log_component(void *ud, bb_log_level level, const char *slot, const char *msg)
{
    (void)ud;
    static const char *const names[] = {"error", "warning", "info", "debug"};
    if (level <= BB_LOG_WARN)
        fprintf(stderr, "bbd: %s: slot '%s': %s\n", names[level], slot ? slot : "?", msg);
}

typedef struct session {
    const bb_function *fn;
    const char *target;
    bbd_run_result *res;
    size_t got;
    bool failed;
    bb_error *err;
} session;

static int check_inputs(const session *s, const bbd_run_input *in, size_t n, bb_error *err)
{
    const bb_function *f = s->fn;
    for (size_t i = 0; i < n; i++)
        if (bb_str_list_find(&f->inputs, in[i].name) < 0) {
            char names[400] = "";
            size_t used = 0;
            for (size_t k = 0; k < f->inputs.n && used < sizeof names; k++)
                used += (size_t)snprintf(names + used, sizeof names - used, "%s%s",
                                         k ? ", " : "", f->inputs.v[k]);
            return bb_error_set(err, BB_ENOTFOUND, "target '%s' has no input '%s' (inputs: %s)",
                                s->target, in[i].name, f->inputs.n ? names : "none");
        }
    for (size_t k = 0; k < f->inputs.n; k++) {
        bool given = false;
        for (size_t i = 0; i < n && !given; i++)
            given = strcmp(in[i].name, f->inputs.v[k]) == 0;
        if (!given)
            return bb_error_set(err, BB_EINVAL, "input '%s' of target '%s' not given (NAME=FILE.pb)",
                                f->inputs.v[k], s->target);
    }
    return BB_OK;
}

/* Act on one poll's steps: collect outputs, remember the first failure. */
static void take_steps(session *s, bb_steps *steps)
{
    for (size_t i = 0; i < steps->n; i++) {
        bb_step *st = &steps->v[i];
        if (st->kind == BB_STEP_APP_EVENT && st->u.app.target && st->u.app.topic &&
            strcmp(st->u.app.target, s->target) == 0) {
            for (size_t k = 0; k < s->res->n; k++) {
                bbd_run_output *o = &s->res->v[k];
                if (!o->value && strcmp(o->name, st->u.app.topic) == 0) {
                    o->value = st->u.app.value;
                    st->u.app.value = NULL;
                    s->got++;
                    break;
                }
            }
        } else if (st->kind == BB_STEP_OP_FAILED && !s->failed) {
            s->failed = true;
            const char *dom = st->u.op_failed.domain;
            bb_error_set(s->err, BB_ERUNTIME, "node '%s' (%s::%s) failed: %s",
                         st->u.op_failed.node ? st->u.op_failed.node : "?",
                         dom && *dom ? dom : "ai.onnx",
                         st->u.op_failed.op_type ? st->u.op_failed.op_type : "?",
                         st->u.op_failed.message ? st->u.op_failed.message : "no message");
        } else if (st->kind == BB_STEP_INFRA_EVENT && !s->failed &&
                   (st->u.infra.kind == BB_INFRA_APP_INGRESS_ERROR ||
                    st->u.infra.kind == BB_INFRA_INGRESS_DROPPED)) {
            s->failed = true;
            bb_error_set(s->err, BB_ERUNTIME, "the invocation was refused: %s (%s)",
                         bb_infra_kind_name(st->u.infra.kind),
                         st->u.infra.detail ? st->u.infra.detail : "no detail");
        }
    }
}

/* Does a node of f read value? */
static bool consumed(const bb_function *f, const char *value)
{
    for (size_t i = 0; i < f->nodes.n; i++)
        if (bb_str_list_find(&f->nodes.v[i]->inputs, value) >= 0)
            return true;
    return false;
}

static int missing_outputs(const session *s, const char *why, bb_error *err)
{
    char names[400] = "";
    size_t used = 0;
    bool inner = false;
    for (size_t k = 0; k < s->res->n && used < sizeof names; k++) {
        if (s->res->v[k].value)
            continue;
        used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "",
                                 s->res->v[k].name);
        inner = inner || consumed(s->fn, s->res->v[k].name);
    }
    return bb_error_set(err, BB_ERUNTIME, "%s before target '%s' produced: %s%s", why, s->target,
                        names, inner ? " (an output other nodes consume is not an event: "
                                       "ENGINE.md 13.2 wants an AppEmit for it)" : "");
}

static int drive(bb_engine *e, session *s, waker *w, uint64_t timeout_ms)
{
    uint64_t start = now_ns();
    uint64_t limit = start + timeout_ms * 1000000ull;
    bb_steps steps;
    bb_steps_init(&steps);
    int rc = BB_OK;
    for (;;) {
        uint64_t now = now_ns();
        bb_engine_poll(e, now - start, &steps);
        take_steps(s, &steps);
        bb_steps_clear(&steps);
        if (s->failed) {
            rc = s->err->code ? s->err->code : BB_ERUNTIME;
            break;
        }
        if (s->got == s->res->n)
            break;
        uint64_t next = bb_engine_next_deadline(e);
        if (next == 0)
            continue;
        if (bb_engine_live_executions(e) == 0) {
            rc = missing_outputs(s, "the execution ended", s->err);
            break;
        }
        now = now_ns();
        if (now >= limit) {
            rc = missing_outputs(s, "timed out", s->err);
            bb_error_prefix(s->err, "after %llu ms", (unsigned long long)timeout_ms);
            break;
        }
        uint64_t until = next == UINT64_MAX ? limit : start + next;
        wait_until(w, until < limit ? until : limit);
    }
    bb_steps_free(&steps);
    return rc;
}

int bbd_run_once(const bbd_registry *reg, const bb_model *compiled, const char *target,
                 const bbd_run_input *inputs, size_t n_inputs, uint64_t timeout_ms,
                 bbd_run_result *out, bb_error *err)
{
    out->v = NULL;
    out->n = 0;
    session s = {.target = target, .res = out, .err = err};
    for (size_t i = 0; i < compiled->functions.n && !s.fn; i++)
        if (compiled->functions.v[i]->name && strcmp(compiled->functions.v[i]->name, target) == 0)
            s.fn = compiled->functions.v[i];
    if (!s.fn)
        return bb_error_set(err, BB_ENOTFOUND, "the model has no target '%s'", target);
    int rc = check_inputs(&s, inputs, n_inputs, err);
    if (rc)
        return rc;
    out->v = calloc(s.fn->outputs.n ? s.fn->outputs.n : 1, sizeof *out->v);
    if (!out->v)
        return bb_error_set(err, BB_ENOMEM, "out of memory");
    for (size_t k = 0; k < s.fn->outputs.n; k++) {
        if (!(out->v[k].name = strdup(s.fn->outputs.v[k]))) {
            bbd_run_result_free(out);
            return bb_error_set(err, BB_ENOMEM, "out of memory");
        }
        out->n++;
    }
    if ((rc = bbd_registry_resolve_model(reg, compiled, &target, 1, err))) {
        bbd_run_result_free(out);
        return rc;
    }

    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    uint8_t seed[BB_ED25519_SEED_LEN] = {0};
    if ((rc = bb_peerid_from_seed(seed, NULL, &cfg.peer, err))) {
        bbd_run_result_free(out);
        return rc;
    }
    cfg.log = log_component;
    waker w = {.woken = false};
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, &ca);
    pthread_condattr_destroy(&ca);

    bb_engine *e = bb_engine_new(&cfg, err);
    if (!e) {
        rc = err && err->code ? err->code : BB_ENOMEM;
    } else {
        bb_engine_set_wake(e, wake, &w);
        rc = bb_engine_install(e, compiled, &target, 1, bbd_registry_engine(reg), err);
    }
    if (rc == BB_OK) {
        bb_engine_input *ein = calloc(n_inputs ? n_inputs : 1, sizeof *ein);
        if (!ein) {
            rc = bb_error_set(err, BB_ENOMEM, "out of memory");
        } else {
            for (size_t i = 0; i < n_inputs; i++)
                ein[i] = (bb_engine_input){.name = inputs[i].name, .value = inputs[i].value};
            rc = bb_engine_invoke(e, target, ein, n_inputs, NULL, err);
            free(ein);
        }
    }
    if (rc == BB_OK)
        rc = drive(e, &s, &w, timeout_ms);
    bb_engine_free(e);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    if (rc)
        bbd_run_result_free(out);
    return rc;
}
