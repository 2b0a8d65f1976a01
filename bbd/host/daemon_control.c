/*
 * daemon_control.c — what the control socket's commands do (bbd(8),
 * "CONTROL SOCKET"): status, peers, invoke, event, bootstrap, snapshot,
 * watch, log_level, records. Requests are untrusted JSON: every field is
 * checked and a bad one is an error reply naming it; nothing here can stop
 * the daemon.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bb/multiaddr.h"
#include "bbd/host/daemon.h"
#include "bb/value_json.h"

#define WAIT_DEFAULT_MS 10000
#define WAIT_MAX_MS 3600000
#define MAX_INPUTS 1024
#define MAX_NAMES 256
#define RECORD_JSON_MAX_ELEMS 4096 /* tensor elements printed inline per record */

struct bbd_wait {
    bbd_daemon *d;
    bbd_control_client *client;
    char *topic;
    uint64_t exec;
    cJSON *id;
    uv_timer_t timer;
    bbd_wait *prev, *next;
};

/* ---- replies ---------------------------------------------------------------- */

static cJSON *reply_ok(void)
{
    cJSON *j = cJSON_CreateObject();
    if (j && !cJSON_AddTrueToObject(j, "ok")) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

static cJSON *reply_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static cJSON *reply_err(const char *fmt, ...)
{
    char msg[BB_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cJSON *j = cJSON_CreateObject();
    if (j && (!cJSON_AddFalseToObject(j, "ok") || !cJSON_AddStringToObject(j, "error", msg))) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

static const char *str_field(const cJSON *req, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void add_u64(cJSON *j, const char *k, uint64_t v)
{
    cJSON_AddNumberToObject(j, k, (double)v);
}

/* Every field of stats as "<prefix><key>": number. */
static void add_stat_fields(cJSON *j, const char *prefix, const bbd_stat_field *f,
                            const void *stats)
{
    for (; j && f->key; f++) {
        char k[96];
        snprintf(k, sizeof k, "%s%s", prefix, f->key);
        add_u64(j, k, bbd_stat_value(f, stats));
    }
}

static cJSON *addr_array(const bb_engine_addr *a, size_t n)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; arr && i < n; i++) {
        char t[BB_MULTIADDR_TEXT_MAX + 1];
        if (bb_multiaddr_format(a[i].data, a[i].len, t, sizeof t, NULL, NULL) == BB_OK)
            cJSON_AddItemToArray(arr, cJSON_CreateString(t));
    }
    return arr;
}

/* ---- status, peers, counters --------------------------------------------------- */

cJSON *bbd_daemon_counters_json(const bbd_daemon *d)
{
    cJSON *c = cJSON_CreateObject();
    if (!c)
        return NULL;
    const char *name;
    uint64_t v;
    for (size_t i = 0; d->engine && bb_engine_counter_at(d->engine, i, &name, &v); i++)
        add_u64(c, name, v);
    add_stat_fields(c, "daemon.", BBD_DAEMON_COUNTERS, d);
    return c;
}

static cJSON *peer_stats_json(const bbd_peer_stats *s)
{
    cJSON *j = cJSON_CreateObject();
    if (!j)
        return NULL;
    cJSON_AddStringToObject(j, "state", s->state ? s->state : "?");
    cJSON_AddBoolToObject(j, "connected", s->connected);
    add_stat_fields(j, "", BBD_PEER_TOTALS, s);
    return j;
}

typedef struct peers_ctx {
    bbd_daemon *d;
    cJSON *arr;
    uint64_t now;
} peers_ctx;

static void peer_entry(void *ud, const bb_engine_peer_info *p)
{
    peers_ctx *pc = ud;
    char pb[BB_PEERID_TEXT_MAX];
    cJSON *j = cJSON_CreateObject();
    if (!j)
        return;
    cJSON_AddStringToObject(j, "peer", bbd_daemon_peer_text(&p->peer, pb));
    cJSON_AddItemToObject(j, "addrs", addr_array(p->addrs, p->n_addrs));
    cJSON_AddBoolToObject(j, "connected", p->connected);
    cJSON_AddBoolToObject(j, "down", p->down);
    cJSON_AddBoolToObject(j, "blocked", p->blocked);
    add_u64(j, "failures", p->failures);
    add_u64(j, "backoff_attempts", p->attempts);
    add_u64(j, "backoff_ms",
            p->next_retry_ns > pc->now ? (p->next_retry_ns - pc->now) / 1000000 : 0);
    add_u64(j, "rtt_us", p->rtt_ns / 1000);
    bbd_peer_stats st; /* a lookup per peer: the command stays linear in peers */
    if (pc->d->transport && bbd_transport_peer_stats(pc->d->transport, &p->peer, &st))
        cJSON_AddItemToObject(j, "transport", peer_stats_json(&st));
    cJSON_AddItemToArray(pc->arr, j);
}

cJSON *bbd_daemon_peers_json(bbd_daemon *d)
{
    peers_ctx pc = {d, cJSON_CreateArray(), bbd_now_ns()};
    if (pc.arr && d->engine)
        bb_engine_peer_foreach(d->engine, peer_entry, &pc);
    return pc.arr;
}

static const char *bootstrap_name(bb_bootstrap_status s)
{
    return s == BB_BOOTSTRAP_RUNNING           ? "running"
           : s == BB_BOOTSTRAP_WAITING_FOR_INPUT ? "waiting_for_input"
                                                 : "idle";
}

static cJSON *cmd_status(bbd_daemon *d)
{
    cJSON *j = reply_ok();
    if (!j)
        return NULL;
    bbd_config *c = d->cfg;
    cJSON_AddStringToObject(j, "peer_id", d->self_text);
    cJSON *t = cJSON_AddArrayToObject(j, "targets");
    for (size_t i = 0; t && i < c->targets.n; i++)
        cJSON_AddItemToArray(t, cJSON_CreateString(c->targets.v[i]));
    cJSON_AddStringToObject(j, "artifact", c->artifact);
    add_u64(j, "incarnation", bb_engine_incarnation(d->engine));
    cJSON_AddBoolToObject(j, "restored", d->restored);
    cJSON_AddStringToObject(j, "bootstrap", bootstrap_name(bb_engine_bootstrap_status(d->engine)));
    const bbd_addr *la = NULL;
    size_t nla = d->transport ? bbd_transport_listen_addrs(d->transport, &la) : 0;
    cJSON_AddItemToObject(j, "listen", addr_array((const bb_engine_addr *)la, nla));
    cJSON_AddStringToObject(j, "control", c->control);
    char ma[BB_MULTIADDR_TEXT_MAX + 1];
    if (d->metrics && bbd_metrics_addr(d->metrics, ma, sizeof ma) == BB_OK)
        cJSON_AddStringToObject(j, "metrics", ma);
    cJSON_AddStringToObject(j, "state_dir", c->state_dir);
    add_u64(j, "pid", (uint64_t)getpid());
    add_u64(j, "uptime_ms", (bbd_now_ns() - d->started_ns) / 1000000);
    add_u64(j, "pending_async", bb_engine_pending_async_count(d->engine));
    add_u64(j, "live_executions", bb_engine_live_executions(d->engine));
    add_u64(j, "known_peers", bb_engine_peer_count(d->engine));
    add_u64(j, "control_clients", bbd_control_client_count(d->control));
    add_u64(j, "watchers", bbd_control_watcher_count(d->control));
    bbd_control_stats cs;
    bbd_control_stats_get(d->control, &cs);
    add_stat_fields(cJSON_AddObjectToObject(j, "control"), "", BBD_CONTROL_TOTALS, &cs);
    cJSON_AddItemToObject(j, "counters", bbd_daemon_counters_json(d));
    bbd_transport_stats ts = {0};
    if (d->transport)
        bbd_transport_stats_get(d->transport, &ts);
    add_stat_fields(cJSON_AddObjectToObject(j, "transport"), "", BBD_TRANSPORT_TOTALS, &ts);
    cJSON *conns = cJSON_AddArrayToObject(j, "connections");
    bbd_peer_stats st;
    for (size_t i = 0; conns && d->transport && bbd_transport_peer_stats_at(d->transport, i, &st);
         i++) {
        cJSON *pj = peer_stats_json(&st);
        char pb[BB_PEERID_TEXT_MAX];
        if (pj)
            cJSON_AddStringToObject(pj, "peer", bbd_daemon_peer_text(&st.peer, pb));
        cJSON_AddItemToArray(conns, pj);
    }
    return j;
}

static cJSON *cmd_peers(bbd_daemon *d)
{
    cJSON *j = reply_ok();
    if (j)
        cJSON_AddItemToObject(j, "peers", bbd_daemon_peers_json(d));
    return j;
}

/* ---- inputs ------------------------------------------------------------------------- */

typedef struct inputs {
    bb_json_input *v;
    bb_engine_input *e;
    size_t n;
} inputs;

static void inputs_free(inputs *in)
{
    for (size_t i = 0; i < in->n; i++)
        bb_json_input_free(&in->v[i]);
    free(in->v);
    free(in->e);
    memset(in, 0, sizeof *in);
}

/* "inputs": {"name": <value JSON>, ...} (absent: no inputs). */
static int inputs_parse(const cJSON *obj, inputs *in, bb_error *err)
{
    memset(in, 0, sizeof *in);
    if (!obj)
        return BB_OK;
    if (!cJSON_IsObject(obj))
        return bb_error_set(err, BB_EINVAL, "\"inputs\" must be an object of name: value");
    size_t n = (size_t)cJSON_GetArraySize(obj);
    if (n > MAX_INPUTS)
        return bb_error_set(err, BB_ELIMIT, "more than %d inputs", MAX_INPUTS);
    in->v = calloc(n ? n : 1, sizeof *in->v);
    in->e = calloc(n ? n : 1, sizeof *in->e);
    if (!in->v || !in->e) {
        inputs_free(in);
        return bb_error_set(err, BB_ENOMEM, "out of memory");
    }
    for (const cJSON *x = obj->child; x; x = x->next) {
        int rc = bb_json_input_parse(x->string, x, &in->v[in->n], err);
        if (rc) {
            inputs_free(in);
            return rc;
        }
        bb_json_input *i = &in->v[in->n];
        in->e[in->n++] = (bb_engine_input){i->name, i->value, i->bytes, i->len};
    }
    return BB_OK;
}

/* ---- invoke and its wait --------------------------------------------------------------- */

static void wait_closed(uv_handle_t *h)
{
    bbd_wait *w = h->data;
    free(w->topic);
    cJSON_Delete(w->id);
    free(w);
}

static void wait_remove(bbd_wait *w)
{
    bbd_daemon *d = w->d;
    if (w->prev)
        w->prev->next = w->next;
    else
        d->waits = w->next;
    if (w->next)
        w->next->prev = w->prev;
    uv_close((uv_handle_t *)&w->timer, wait_closed);
}

static void reply_with_id(bbd_control_client *c, cJSON *reply, const cJSON *id)
{
    if (reply && id)
        cJSON_AddItemToObject(reply, "id", cJSON_Duplicate(id, true));
    bbd_control_reply(c, reply);
}

static void wait_timeout(uv_timer_t *t)
{
    bbd_wait *w = t->data;
    cJSON *r = reply_err("no '%s' event within the wait timeout (exec %llu)", w->topic,
                         (unsigned long long)w->exec);
    if (r)
        add_u64(r, "exec_id", w->exec);
    reply_with_id(w->client, r, w->id);
    wait_remove(w);
}

void bbd_daemon_waits_event(bbd_daemon *d, const char *topic, const cJSON *ev)
{
    bbd_wait *next;
    for (bbd_wait *w = d->waits; w; w = next) {
        next = w->next;
        if (!topic || strcmp(w->topic, topic) != 0)
            continue;
        cJSON *r = reply_ok();
        if (r) {
            add_u64(r, "exec_id", w->exec);
            cJSON_AddItemToObject(r, "event", cJSON_Duplicate(ev, true));
        }
        reply_with_id(w->client, r, w->id);
        wait_remove(w);
    }
}

void bbd_daemon_waits_free(bbd_daemon *d)
{
    while (d->waits)
        wait_remove(d->waits);
}

static void client_closed(void *ud, bbd_control_client *c)
{
    bbd_daemon *d = ud;
    bbd_wait *next;
    for (bbd_wait *w = d->waits; w; w = next) {
        next = w->next;
        if (w->client == c)
            wait_remove(w);
    }
}

/* A request's "wait" (an AppEvent topic) and "timeout_ms": *w a new wait,
 * or NULL when it asks for none; an error reply when they are malformed. */
static cJSON *wait_parse(const cJSON *req, const char *cmd, bbd_wait **w, double *ms)
{
    const cJSON *wait = cJSON_GetObjectItemCaseSensitive(req, "wait");
    const cJSON *timeout = cJSON_GetObjectItemCaseSensitive(req, "timeout_ms");
    *w = NULL;
    *ms = WAIT_DEFAULT_MS;
    if (wait && (!cJSON_IsString(wait) || !*wait->valuestring))
        return reply_err("%s: \"wait\" must be an AppEvent topic", cmd);
    if (timeout) {
        if (!cJSON_IsNumber(timeout) || timeout->valuedouble < 0 ||
            timeout->valuedouble > WAIT_MAX_MS)
            return reply_err("%s: \"timeout_ms\" must be 0..%d", cmd, WAIT_MAX_MS);
        *ms = timeout->valuedouble;
    }
    if (!wait)
        return NULL;
    *w = calloc(1, sizeof **w);
    if (!*w || !((*w)->topic = strdup(wait->valuestring))) {
        free(*w);
        *w = NULL;
        return reply_err("out of memory");
    }
    return NULL;
}

static void wait_discard(bbd_wait *w)
{
    if (w)
        free(w->topic);
    free(w);
}

/* The reply to exec: at once ({"exec_id"}), or, with a wait, parked until
 * the first AppEvent of its topic (or its timeout). */
static cJSON *reply_exec(bbd_daemon *d, bbd_control_client *c, const cJSON *req, bbd_wait *w,
                         double ms, bb_exec_id exec, bool *deferred)
{
    if (!w) {
        cJSON *r = reply_ok();
        if (r)
            add_u64(r, "exec_id", exec);
        return r;
    }
    w->d = d;
    w->client = c;
    w->exec = exec;
    w->id = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(req, "id"), true);
    uv_timer_init(&d->loop, &w->timer);
    w->timer.data = w;
    uv_timer_start(&w->timer, wait_timeout, (uint64_t)ms, 0);
    w->next = d->waits;
    if (d->waits)
        d->waits->prev = w;
    d->waits = w;
    *deferred = true;
    return NULL;
}

/* Start the execution req asks for: NULL and *exec, or an error reply. */
typedef cJSON *(*start_fn)(bbd_daemon *d, const cJSON *req, bb_exec_id *exec);

static cJSON *start_invoke(bbd_daemon *d, const cJSON *req, bb_exec_id *exec)
{
    const char *target = str_field(req, "target");
    if (!target)
        return reply_err("invoke: \"target\" (a string) is required");
    inputs in;
    bb_error err = {0};
    if (inputs_parse(cJSON_GetObjectItemCaseSensitive(req, "inputs"), &in, &err))
        return reply_err("invoke %s: %s", target, err.msg);
    int rc = bb_engine_invoke(d->engine, target, in.e, in.n, exec, &err);
    inputs_free(&in);
    return rc ? reply_err("invoke %s: %s", target, err.msg) : NULL;
}

static cJSON *start_event(bbd_daemon *d, const cJSON *req, bb_exec_id *exec)
{
    const char *target = str_field(req, "target"), *input = str_field(req, "input");
    const cJSON *value = cJSON_GetObjectItemCaseSensitive(req, "value");
    if (!target || !input || !value)
        return reply_err("event: \"target\", \"input\" and \"value\" are required");
    bb_json_input in;
    bb_error err = {0};
    if (bb_json_input_parse(input, value, &in, &err))
        return reply_err("event %s.%s: %s", target, input, err.msg);
    bb_engine_input ei = {in.name, in.value, in.bytes, in.len};
    int rc = bb_engine_deliver_event(d->engine, target, input, &ei, exec, &err);
    bb_json_input_free(&in);
    return rc ? reply_err("event %s.%s: %s", target, input, err.msg) : NULL;
}

/* invoke and event: start the execution, reply at once or when the
 * awaited event comes (the wait is registered before the next poll, out of
 * which the event may come). */
static cJSON *cmd_run(bbd_daemon *d, bbd_control_client *c, const cJSON *req, bool *deferred,
                      const char *cmd, start_fn start)
{
    bbd_wait *w;
    double ms;
    bb_exec_id exec = 0;
    cJSON *bad = wait_parse(req, cmd, &w, &ms);
    if (!bad && (bad = start(d, req, &exec)))
        wait_discard(w);
    return bad ? bad : reply_exec(d, c, req, w, ms, exec, deferred);
}

/* ---- bootstrap ------------------------------------------------------------------------- */

static int names_parse(const cJSON *arr, const char **out, size_t *n, const char *what,
                       bb_error *err)
{
    *n = 0;
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) > MAX_NAMES)
        return bb_error_set(err, BB_EINVAL, "\"%s\" must be an array of at most %d names",
                            what, MAX_NAMES);
    for (const cJSON *x = arr->child; x; x = x->next) {
        if (!cJSON_IsString(x))
            return bb_error_set(err, BB_EINVAL, "\"%s\" must hold strings", what);
        out[(*n)++] = x->valuestring;
    }
    return BB_OK;
}

static cJSON *cmd_bootstrap(bbd_daemon *d, const cJSON *req)
{
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(req, "all");
    const cJSON *modules = cJSON_GetObjectItemCaseSensitive(req, "modules");
    const cJSON *requests = cJSON_GetObjectItemCaseSensitive(req, "requests");
    const cJSON *slots = cJSON_GetObjectItemCaseSensitive(req, "slots");
    int given = (all != NULL) + (modules != NULL) + (requests != NULL) + (slots != NULL);
    if (given != 1 || (all && !cJSON_IsTrue(all)))
        return reply_err("bootstrap: give exactly one of \"all\": true, \"modules\", "
                         "\"requests\" or \"slots\"");
    bb_bootstrap_target t = {.kind = BB_BOOTSTRAP_ALL};
    const char *names[MAX_NAMES];
    bb_bootstrap_request reqs[MAX_NAMES];
    inputs ins[MAX_NAMES];
    size_t n_reqs = 0;
    bb_error err = {0};
    int rc = BB_OK;
    if (modules || slots) {
        t.kind = modules ? BB_BOOTSTRAP_MODULE_NAMES : BB_BOOTSTRAP_SLOTS;
        rc = names_parse(modules ? modules : slots, names, &t.n_names,
                         modules ? "modules" : "slots", &err);
        t.names = names;
    } else if (requests) {
        t.kind = BB_BOOTSTRAP_MODULE_REQUESTS;
        if (!cJSON_IsArray(requests) || cJSON_GetArraySize(requests) > MAX_NAMES)
            rc = bb_error_set(&err, BB_EINVAL,
                              "\"requests\" must be an array of at most %d {target, inputs}",
                              MAX_NAMES);
        for (const cJSON *x = rc ? NULL : requests->child; x && !rc; x = x->next) {
            const char *target = str_field(x, "target");
            if (!target) {
                rc = bb_error_set(&err, BB_EINVAL, "every request needs a \"target\"");
                break;
            }
            if ((rc = inputs_parse(cJSON_GetObjectItemCaseSensitive(x, "inputs"), &ins[n_reqs],
                                   &err)))
                break;
            reqs[n_reqs] = (bb_bootstrap_request){target, ins[n_reqs].e, ins[n_reqs].n};
            n_reqs++;
        }
        t.requests = reqs;
        t.n_requests = n_reqs;
    }
    if (!rc)
        rc = bb_engine_run_bootstrap(d->engine, &t, &err);
    for (size_t i = 0; i < n_reqs; i++)
        inputs_free(&ins[i]);
    if (rc)
        return reply_err("bootstrap: %s", err.msg);
    cJSON *r = reply_ok();
    if (r)
        cJSON_AddStringToObject(r, "bootstrap",
                                bootstrap_name(bb_engine_bootstrap_status(d->engine)));
    return r;
}

/* ---- snapshot, watch, log level ----------------------------------------------------------- */

static cJSON *cmd_snapshot(bbd_daemon *d)
{
    size_t bytes = 0;
    bb_error err = {0};
    if (bbd_daemon_snapshot(d, &bytes, &err))
        return reply_err("snapshot: %s", err.msg);
    cJSON *r = reply_ok();
    if (r) {
        cJSON_AddStringToObject(r, "path", d->snapshot_path);
        add_u64(r, "bytes", bytes);
        add_u64(r, "incarnation", bb_engine_incarnation(d->engine));
    }
    return r;
}

static const struct {
    const char *name;
    unsigned bit;
} WATCH_KINDS[] = {{"app", BBD_WATCH_APP},           {"failure", BBD_WATCH_FAILURE},
                   {"peer", BBD_WATCH_PEER},         {"bootstrap", BBD_WATCH_BOOTSTRAP},
                   {"infra", BBD_WATCH_INFRA}};

static cJSON *cmd_watch(bbd_control_client *c, const cJSON *req)
{
    const cJSON *kinds = cJSON_GetObjectItemCaseSensitive(req, "kinds");
    const cJSON *topics = cJSON_GetObjectItemCaseSensitive(req, "topics");
    unsigned mask = kinds ? 0 : BBD_WATCH_ALL;
    const char *names[MAX_NAMES];
    size_t n_names = 0, n_kinds = 0;
    bb_error err = {0};
    if (kinds) {
        const char *k[MAX_NAMES];
        if (names_parse(kinds, k, &n_kinds, "kinds", &err))
            return reply_err("watch: %s", err.msg);
        for (size_t i = 0; i < n_kinds; i++) {
            size_t w = 0;
            while (w < sizeof WATCH_KINDS / sizeof *WATCH_KINDS && strcmp(WATCH_KINDS[w].name, k[i]))
                w++;
            if (w == sizeof WATCH_KINDS / sizeof *WATCH_KINDS)
                return reply_err("watch: unknown kind '%.64s' (app, failure, peer, bootstrap, "
                                 "infra)", k[i]);
            mask |= WATCH_KINDS[w].bit;
        }
    }
    if (topics && names_parse(topics, names, &n_names, "topics", &err))
        return reply_err("watch: %s", err.msg);
    if (bbd_control_watch(c, mask, names, n_names))
        return reply_err("watch: too many topics");
    cJSON *r = reply_ok();
    if (r)
        cJSON_AddTrueToObject(r, "watching");
    return r;
}

static cJSON *cmd_log_level(bbd_daemon *d, const cJSON *req)
{
    const char *level = str_field(req, "level");
    bb_log_level lv;
    bb_error err = {0};
    if (!level || bbd_log_level_parse(level, &lv, &err))
        return reply_err("log_level: %s", level ? err.msg : "\"level\" is required");
    d->log.level = lv;
    cJSON *r = reply_ok();
    if (r)
        cJSON_AddStringToObject(r, "level", bbd_log_level_name(lv));
    return r;
}

/* The Record ring, oldest first (only the records named "name" when
 * given): what a program recorded without anybody watching it, read in
 * one reply. */
static cJSON *cmd_records(bbd_daemon *d, const cJSON *req)
{
    const cJSON *nj = cJSON_GetObjectItemCaseSensitive(req, "name");
    if (nj && !cJSON_IsString(nj))
        return reply_err("records: \"name\" must be a string");
    const char *only = nj ? nj->valuestring : NULL;
    cJSON *r = reply_ok();
    cJSON *arr = r ? cJSON_AddArrayToObject(r, "records") : NULL;
    const char *name;
    const bb_value *v;
    for (size_t i = 0; arr && bb_engine_record_at(d->engine, i, &name, &v); i++) {
        if (only && strcmp(name, only) != 0)
            continue;
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddStringToObject(o, "name", name) ||
            !cJSON_AddItemToObject(o, "value", bb_value_to_json(v, RECORD_JSON_MAX_ELEMS))) {
            cJSON_Delete(o);
            arr = NULL;
            break;
        }
        cJSON_AddItemToArray(arr, o);
    }
    if (!arr) {
        cJSON_Delete(r);
        return reply_err("records: out of memory");
    }
    return r;
}

/* ---- dispatch ------------------------------------------------------------------------------ */

static cJSON *handle(void *ud, bbd_control_client *c, const cJSON *req, bool *deferred)
{
    bbd_daemon *d = ud;
    const char *cmd = str_field(req, "cmd");
    cJSON *r;
    if (d->stopping)
        r = reply_err("the daemon is stopping");
    else if (!cmd)
        r = reply_err("request needs \"cmd\" (status, peers, access, invoke, event, bootstrap, "
                      "snapshot, watch, log_level, records)");
    else if (!strcmp(cmd, "status"))
        r = cmd_status(d);
    else if (!strcmp(cmd, "peers"))
        r = cmd_peers(d);
    else if (!strcmp(cmd, "invoke"))
        r = cmd_run(d, c, req, deferred, "invoke", start_invoke);
    else if (!strcmp(cmd, "event"))
        r = cmd_run(d, c, req, deferred, "event", start_event);
    else if (!strcmp(cmd, "bootstrap"))
        r = cmd_bootstrap(d, req);
    else if (!strcmp(cmd, "snapshot"))
        r = cmd_snapshot(d);
    else if (!strcmp(cmd, "watch"))
        r = cmd_watch(c, req);
    else if (!strcmp(cmd, "log_level"))
        r = cmd_log_level(d, req);
    else if (!strcmp(cmd, "records"))
        r = cmd_records(d, req);
    else if (!strcmp(cmd, "access")) {
        char why[BB_ERROR_MSG_MAX];
        r = bbd_daemon_cmd_access(d, req, why, sizeof why);
        if (!r)
            r = reply_err("%s", why);
    }
    else
        r = reply_err("unknown command '%.64s'", cmd);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(req, "id");
    if (r && id)
        cJSON_AddItemToObject(r, "id", cJSON_Duplicate(id, true));
    return r;
}

const bbd_control_ops bbd_daemon_control_ops = {
    .handle = handle,
    .client_closed = client_closed,
};
