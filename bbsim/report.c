/*
 * report.c — what a run leaves behind (sim.h):
 *   - the event log's hash: every send (with its bytes), delivery, drop,
 *     connection, job completion, start, death, snapshot (with its bytes)
 *     and reported step (with its value's wire bytes) folds a record
 *     (kind, nodes, two numbers, the virtual time) into a running 64-bit
 *     FNV-1a (bulk bytes enter it as a word-wise hash of their own) —
 *     equal hashes, equal runs;
 *   - JSON lines on opt.events: AppEvents and failures in the shape of
 *     `bbctl --json watch` (so scripts/fed-report reads them), plus
 *     "t_ns" (virtual time) and "node"; and the simulator's own events
 *     ("event": "sim": kill, restart, partition, ...);
 *   - rounds (AppEvents of report.round_topic, with the bytes on the wire
 *     since the round before) and metric points (report.metrics);
 *   - the summary, as text and as summary.json beside the plots.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bb/value_json.h"
#include "bbsim/sim_internal.h"

#define EVENT_JSON_MAX_ELEMS 4096 /* tensor elements printed inline (bbd's) */

/* ---- the log's hash ---------------------------------------------------------------------- */

void bbsim__log(bbsim *s, uint32_t kind, uint32_t a, uint32_t b, uint64_t x, uint64_t y)
{
    uint64_t rec[6] = {s->log_hash, s->now, (uint64_t)kind << 32 | a, b, x, y};
    s->log_hash = bb_fnv1a64(rec, sizeof rec);
}

/* A hash of bulk bytes (envelopes, snapshots: gigabytes in a long run):
 * FNV-1a's one multiply per byte made it a quarter of a gossip run's time.
 * Four lanes take eight bytes each a step (independent multiplies overlap);
 * a lane's step is a bijection of its state for a given word and of the
 * word for a given state, so inputs that differ in one word always hash
 * apart. The lanes, the tail and the length are then mixed into one. */
static uint64_t mix(uint64_t h, uint64_t w)
{
    h = (h ^ w) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

static uint64_t bulk_hash(const uint8_t *p, size_t len)
{
    uint64_t lane[4] = {0x6262736d6c6f6721ull, 0x243f6a8885a308d3ull, 0x13198a2e03707344ull,
                        0xa4093822299f31d0ull};
    size_t i = 0;
    for (; i + 32 <= len; i += 32)
        for (int k = 0; k < 4; k++) {
            uint64_t w;
            memcpy(&w, p + i + 8 * k, 8);
            lane[k] = mix(lane[k], w);
        }
    uint64_t h = len;
    for (int k = 0; k < 4; k++)
        h = mix(h, lane[k]);
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = mix(h, w);
    }
    uint64_t tail = 0;
    memcpy(&tail, p + i, len - i);
    h = mix(h, tail) * 0xff51afd7ed558ccdull;
    return h ^ (h >> 32);
}

void bbsim__log_bytes(bbsim *s, uint32_t kind, uint32_t a, uint32_t b, const uint8_t *p,
                      size_t len)
{
    bbsim__log(s, kind, a, b, len, p ? bulk_hash(p, len) : 0);
}

static uint64_t text_hash(const char *t)
{
    return t ? bb_fnv1a64(t, strlen(t)) : 0;
}

/* ---- JSON lines --------------------------------------------------------------------------- */

static cJSON *line(bbsim *s, const char *event, int64_t node)
{
    cJSON *j = cJSON_CreateObject();
    char name[96];
    if (!j)
        return NULL;
    cJSON_AddStringToObject(j, "event", event);
    cJSON_AddNumberToObject(j, "t_ns", (double)s->now);
    if (node >= 0)
        cJSON_AddStringToObject(j, "node", bbsim__node_name(s, (uint32_t)node, name, sizeof name));
    return j;
}

static void add_str(cJSON *j, const char *k, const char *v)
{
    if (j && v)
        cJSON_AddStringToObject(j, k, v);
}

static void add_peer(cJSON *j, const char *k, const bb_peerid *p)
{
    char text[BB_PEERID_TEXT_MAX];
    if (bb_peerid_to_text(p, text, sizeof text, NULL) == BB_OK)
        add_str(j, k, text);
}

static void emit(bbsim *s, cJSON *j)
{
    char *text = j && s->opt.events ? cJSON_PrintUnformatted(j) : NULL;
    if (text) {
        fputs(text, s->opt.events);
        fputc('\n', s->opt.events);
        cJSON_free(text);
    }
    cJSON_Delete(j);
}

void bbsim__report_sim(bbsim *s, const char *what, int64_t node, const char *detail)
{
    bbsim__log(s, 0, node < 0 ? UINT32_MAX : (uint32_t)node, 0, text_hash(what),
               text_hash(detail));
    if (!s->opt.events)
        return;
    cJSON *j = line(s, "sim", node);
    add_str(j, "what", what);
    add_str(j, "detail", detail);
    emit(s, j);
}

/* ---- AppEvents: rounds, metrics ----------------------------------------------------------- */

/* A number out of v: a U64-like value or a tensor's first element. */
static bool scalar(const bb_value *v, double *out)
{
    if (!v)
        return false;
    if (v->type->kind == BB_VK_U64) {
        *out = (double)v->u.u64;
        return true;
    }
    if (v->type->kind != BB_VK_TENSOR || bb_tensor_numel(v) < 1)
        return false;
    const void *d = v->u.tensor.data;
    switch (v->u.tensor.dtype) {
    case BB_DT_FLOAT: *out = *(const float *)d; return true;
    case BB_DT_DOUBLE: *out = *(const double *)d; return true;
    case BB_DT_INT32: *out = *(const int32_t *)d; return true;
    case BB_DT_INT64: *out = (double)*(const int64_t *)d; return true;
    default: return false;
    }
}

static void add_point(bbsim_series *sr, bbsim_point p)
{
    if (sr->n == sr->cap) {
        size_t cap = sr->cap ? sr->cap * 2 : 64;
        bbsim_point *v = realloc(sr->v, cap * sizeof *v);
        if (!v)
            return; /* the report misses a point; the run goes on */
        sr->v = v;
        sr->cap = cap;
    }
    sr->v[sr->n++] = p;
}

static void app_event(bbsim *s, uint32_t k, const bb_step *st)
{
    const bbsim_scenario *sc = s->sc;
    const char *topic = st->u.app.topic;
    const bb_value *v = st->u.app.value;
    s->sum.app_events++;
    uint8_t *wire = NULL;
    size_t len = 0;
    if (v && bb_value_encode(v, &wire, &len, NULL) != BB_OK)
        wire = NULL;
    bbsim__log(s, BB_STEP_APP_EVENT, k, (uint32_t)text_hash(topic), len,
               wire ? bb_fnv1a64(wire, len) : 0);
    free(wire);
    if (sc->until_topic && topic && !strcmp(topic, sc->until_topic))
        s->until_seen++;
    if (sc->round_topic && topic && !strcmp(topic, sc->round_topic)) {
        s->sum.rounds++;
        if (s->n_rounds == s->cap_rounds) {
            size_t cap = s->cap_rounds ? s->cap_rounds * 2 : 64;
            bbsim_round *r = realloc(s->rounds, cap * sizeof *r);
            if (r) {
                s->rounds = r;
                s->cap_rounds = cap;
            }
        }
        if (s->n_rounds < s->cap_rounds)
            s->rounds[s->n_rounds++] = (bbsim_round){s->now, s->sum.bytes_sent - s->bytes_at_round};
        s->bytes_at_round = s->sum.bytes_sent;
    }
    for (size_t m = 0; topic && m < sc->n_metrics; m++) {
        const bbsim_metric *x = &sc->metrics[m];
        const bb_value *item = v;
        if (strcmp(x->topic, topic))
            continue;
        if (x->item >= 0)
            item = v && (v->type->kind == BB_VK_COMPOSITE) && (size_t)x->item < v->u.list.n
                       ? v->u.list.items[x->item]
                       : NULL;
        double d;
        if (scalar(item, &d))
            add_point(&s->series[m], (bbsim_point){s->now, k, d});
    }
    if (!s->opt.events)
        return;
    cJSON *j = line(s, "app", k);
    if (st->exec_id)
        cJSON_AddNumberToObject(j, "exec_id", (double)st->exec_id);
    add_str(j, "target", st->u.app.target);
    add_str(j, "topic", topic);
    cJSON_AddItemToObject(j, "value", bb_value_to_json(v, EVENT_JSON_MAX_ELEMS));
    cJSON *t = cJSON_AddObjectToObject(j, "transport"); /* bbd's shape: the node's totals */
    if (t) {
        cJSON_AddNumberToObject(t, "bytes_in", (double)s->nodes[k].bytes_in);
        cJSON_AddNumberToObject(t, "bytes_out", (double)s->nodes[k].bytes_out);
    }
    emit(s, j);
}

/* ---- failures and peer health ------------------------------------------------------------- */

static void failure(bbsim *s, uint32_t k, const bb_step *st)
{
    cJSON *j = NULL;
    const char *a = NULL, *b = NULL;
    s->sum.failures++;
    if (st->kind == BB_STEP_OP_FAILED) {
        a = st->u.op_failed.node;
        b = st->u.op_failed.message;
        j = s->opt.events ? line(s, "OpFailed", k) : NULL;
        add_str(j, "op_node", a);
        add_str(j, "op", st->u.op_failed.op_type);
        add_str(j, "domain", st->u.op_failed.domain);
        add_str(j, "error", b);
    } else if (st->kind == BB_STEP_PEER_RESOLVE_FAILED) {
        a = st->u.resolve.node;
        j = s->opt.events ? line(s, "PeerResolveFailed", k) : NULL;
        add_str(j, "op_node", a);
        if (j && st->u.resolve.has_peer)
            add_peer(j, "peer", &st->u.resolve.peer);
    } else {
        a = st->u.bootstrap.target ? st->u.bootstrap.target : st->u.bootstrap.slot;
        b = st->u.bootstrap.message;
        j = s->opt.events ? line(s, "BootstrapFailed", k) : NULL;
        add_str(j, "target", st->u.bootstrap.target);
        add_str(j, "slot", st->u.bootstrap.slot);
        add_str(j, "error", b);
    }
    bbsim__log(s, st->kind, k, 0, text_hash(a), text_hash(b));
    emit(s, j);
}

void bbsim__report_step(bbsim *s, uint32_t k, const bb_step *st)
{
    cJSON *j;
    switch (st->kind) {
    case BB_STEP_APP_EVENT: app_event(s, k, st); return;
    case BB_STEP_OP_FAILED:
    case BB_STEP_PEER_RESOLVE_FAILED:
    case BB_STEP_BOOTSTRAP_FAILED: failure(s, k, st); return;
    case BB_STEP_PEER_DOWN:
    case BB_STEP_PEER_UP:
        bbsim__log(s, st->kind, k, 0, bb_fnv1a64(st->u.peer.peer.bytes, st->u.peer.peer.len), 0);
        j = s->opt.events ? line(s, st->kind == BB_STEP_PEER_DOWN ? "PeerDown" : "PeerUp", k)
                          : NULL;
        if (j)
            add_peer(j, "peer", &st->u.peer.peer);
        emit(s, j);
        return;
    case BB_STEP_INFRA_EVENT:
        bbsim__log(s, st->kind, k, st->u.infra.kind, st->u.infra.count,
                   text_hash(st->u.infra.detail));
        j = s->opt.events ? line(s, "InfraEvent", k) : NULL;
        add_str(j, "kind", bb_infra_kind_name(st->u.infra.kind));
        add_str(j, "detail", st->u.infra.detail);
        if (j && st->u.infra.count)
            cJSON_AddNumberToObject(j, "count", (double)st->u.infra.count);
        emit(s, j);
        return;
    default: /* bootstrap progress, telemetry, op steps: in the hash only */
        bbsim__log(s, st->kind, k, 0, st->exec_id, 0);
        return;
    }
}

void bbsim__report_free(bbsim *s)
{
    free(s->rounds);
    for (size_t m = 0; s->series && m < s->sc->n_metrics; m++)
        free(s->series[m].v);
    free(s->series);
}

/* ---- the summary --------------------------------------------------------------------------- */

static const char *size_text(double bytes, char *buf, size_t cap)
{
    static const char *const UNIT[] = {"B", "KB", "MB", "GB", "TB"};
    int u = 0;
    while (bytes >= 1024 && u < 4) {
        bytes /= 1024;
        u++;
    }
    snprintf(buf, cap, u ? "%.1f %s" : "%.0f %s", bytes, UNIT[u]);
    return buf;
}

/* Bytes of memory per node: what starting them added to the resident set. */
static double per_node(const bbsim_summary *u)
{
    return u->nodes && u->rss_nodes > u->rss_before
               ? (double)(u->rss_nodes - u->rss_before) / u->nodes
               : 0;
}

bool bbsim__series_one_node(const bbsim_series *sr)
{
    for (size_t i = 1; i < sr->n; i++)
        if (sr->v[i].node != sr->v[0].node)
            return false;
    return true;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The p-quantile of n sorted values, interpolated between the two nearest
 * ranks (the median of an even count is the mean of the middle two). */
static double quantile(const double *sorted, size_t n, double p)
{
    double pos = p * (double)(n - 1);
    size_t lo = (size_t)pos;
    double frac = pos - (double)lo;
    return lo + 1 < n ? sorted[lo] + frac * (sorted[lo + 1] - sorted[lo]) : sorted[lo];
}

bbsim_bucket *bbsim__metric_buckets(const bbsim *s, size_t m, size_t *n_out)
{
    const bbsim_series *sr = &s->series[m];
    bbsim_ns w = s->sc->bucket;
    *n_out = 0;
    if (!sr->n)
        return NULL;
    size_t n_buckets = 1; /* points come in time order */
    for (size_t i = 1; i < sr->n; i++)
        n_buckets += sr->v[i].at / w != sr->v[i - 1].at / w;
    bbsim_bucket *b = calloc(n_buckets, sizeof *b);
    double *vals = malloc(sr->n * sizeof *vals);
    if (!b || !vals) {
        free(b);
        free(vals);
        return NULL;
    }
    for (size_t i = 0, k = 0; i < sr->n; k++) {
        bbsim_ns b0 = sr->v[i].at / w * w;
        size_t n = 0;
        for (; i < sr->n && sr->v[i].at / w * w == b0; i++)
            vals[n++] = sr->v[i].value;
        qsort(vals, n, sizeof *vals, cmp_double);
        b[k] = (bbsim_bucket){b0, n, quantile(vals, n, 0.1), quantile(vals, n, 0.5),
                              quantile(vals, n, 0.9)};
    }
    free(vals);
    *n_out = n_buckets;
    return b;
}

/* The first bucket whose median reaches the metric's target (NULL: none). */
static const bbsim_bucket *converged_at(const bbsim_metric *mt, const bbsim_bucket *b, size_t n)
{
    for (size_t i = 0; mt->has_target && i < n; i++)
        if (b[i].median >= mt->target)
            return &b[i];
    return NULL;
}

/* A metric many nodes report: its median (10th-90th percentile) per bucket,
 * and whether the median reached the target. */
static void print_buckets(const bbsim *s, size_t m, FILE *f)
{
    const bbsim_metric *mt = &s->sc->metrics[m];
    size_t n = 0;
    bbsim_bucket *b = bbsim__metric_buckets(s, m, &n);
    fprintf(f, "  %s per %g s of virtual time: median (10th-90th percentile) of the values\n",
            mt->name, (double)s->sc->bucket / 1e9);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "    %8.1f s  %.4f (%.4f-%.4f)  %zu values\n", (double)b[i].at / 1e9,
                b[i].median, b[i].p10, b[i].p90, b[i].n);
    const bbsim_bucket *c = converged_at(mt, b, n);
    if (c)
        fprintf(f, "  %s: converged: the median reached %g in the bucket at %.1f s\n", mt->name,
                mt->target, (double)c->at / 1e9);
    else if (mt->has_target)
        fprintf(f, "  %s: not converged: no bucket's median reached %g\n", mt->name,
                mt->target);
    free(b);
}

static void print_metric(const bbsim *s, size_t m, FILE *f)
{
    const bbsim_series *sr = &s->series[m];
    const char *name = s->sc->metrics[m].name;
    if (!sr->n) {
        fprintf(f, "  %s: no value reported\n", name);
        return;
    }
    bool one_node = bbsim__series_one_node(sr);
    const bbsim_point *a = &sr->v[0], *z = &sr->v[sr->n - 1];
    fprintf(f, "  %s: %.4f at %.3f s -> %.4f at %.3f s (%zu values%s)\n", name, a->value,
            (double)a->at / 1e9, z->value, (double)z->at / 1e9, sr->n,
            one_node ? ", one node" : ", from many nodes");
    if (!one_node || s->sc->metrics[m].has_target)
        print_buckets(s, m, f);
}

void bbsim_report_print(const bbsim *s, FILE *f)
{
    const bbsim_summary *u = &s->sum;
    char a[32], b[32], c[32], d[32], e[32];
    fprintf(f, "bbsim: %u nodes; stopped at %.3f s of virtual time (%s) after %.2f s of wall "
               "time (starting the nodes: %.2f s)\n",
            u->nodes, (double)u->virtual_ns / 1e9, u->stopped, u->wall_s, u->setup_s);
    if (s->sc->round_topic)
        fprintf(f, "rounds: %llu (\"%s\" events)\n", (unsigned long long)u->rounds,
                s->sc->round_topic);
    for (size_t m = 0; m < s->sc->n_metrics; m++)
        print_metric(s, m, f);
    fprintf(f, "wire: %llu envelopes sent, %s; %llu delivered, %s; %llu duplicated\n",
            (unsigned long long)u->sent, size_text((double)u->bytes_sent, a, sizeof a),
            (unsigned long long)u->delivered, size_text((double)u->bytes_delivered, b, sizeof b),
            (unsigned long long)u->duplicated);
    fprintf(f, "dropped: %llu lost, %llu partitioned, %llu to a dead node, %llu unroutable, "
               "%llu held back (peer in backoff)\n",
            (unsigned long long)u->dropped_loss, (unsigned long long)u->dropped_partition,
            (unsigned long long)u->dropped_down, (unsigned long long)u->dropped_unroutable,
            (unsigned long long)u->dropped_backoff);
    fprintf(f, "nodes: %u up at the end; %llu kills, %llu restarts; %llu jobs; %llu AppEvents, "
               "%llu failures\n",
            u->nodes_up, (unsigned long long)u->kills, (unsigned long long)u->restarts,
            (unsigned long long)u->jobs, (unsigned long long)u->app_events,
            (unsigned long long)u->failures);
    fprintf(f, "memory: %s per node (resident %s before the nodes, %s with them), peak %s; "
               "%zu shared value%s, %s\n",
            size_text(per_node(u), a, sizeof a), size_text((double)u->rss_before, b, sizeof b),
            size_text((double)u->rss_nodes, c, sizeof c), size_text((double)u->rss_peak, d, sizeof d),
            u->shared_values, u->shared_values == 1 ? "" : "s",
            size_text((double)u->shared_bytes, e, sizeof e));
    fprintf(f, "events: %llu (%llu polls); event log hash %016llx\n",
            (unsigned long long)u->events, (unsigned long long)u->polls,
            (unsigned long long)u->log_hash);
}

/* A metric's points; its median and 10th and 90th percentile per bucket;
 * its target and the bucket the median first reached it in. */
static cJSON *metric_json(const bbsim *s, size_t m)
{
    const bbsim_series *sr = &s->series[m];
    const bbsim_metric *mt = &s->sc->metrics[m];
    cJSON *j = cJSON_CreateObject(), *pts = cJSON_AddArrayToObject(j, "points");
    cJSON_AddStringToObject(j, "name", mt->name);
    for (size_t i = 0; pts && i < sr->n; i++) {
        cJSON *p = cJSON_CreateObject();
        char name[96];
        cJSON_AddNumberToObject(p, "t_s", (double)sr->v[i].at / 1e9);
        cJSON_AddStringToObject(p, "node", bbsim__node_name(s, sr->v[i].node, name, sizeof name));
        cJSON_AddNumberToObject(p, "value", sr->v[i].value);
        cJSON_AddItemToArray(pts, p);
    }
    cJSON *med = cJSON_AddArrayToObject(j, "median_per_bucket");
    size_t n = 0;
    bbsim_bucket *b = bbsim__metric_buckets(s, m, &n);
    for (size_t i = 0; med && i < n; i++) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddNumberToObject(p, "t_s", (double)b[i].at / 1e9);
        cJSON_AddNumberToObject(p, "median", b[i].median);
        cJSON_AddNumberToObject(p, "p10", b[i].p10);
        cJSON_AddNumberToObject(p, "p90", b[i].p90);
        cJSON_AddNumberToObject(p, "values", (double)b[i].n);
        cJSON_AddItemToArray(med, p);
    }
    if (mt->has_target) {
        const bbsim_bucket *c = converged_at(mt, b, n);
        cJSON_AddNumberToObject(j, "target", mt->target);
        if (c)
            cJSON_AddNumberToObject(j, "converged_at_s", (double)c->at / 1e9);
        else
            cJSON_AddNullToObject(j, "converged_at_s");
    }
    free(b);
    return j;
}

static cJSON *summary_json(const bbsim *s)
{
    const bbsim_summary *u = &s->sum;
    cJSON *j = cJSON_CreateObject();
    const struct {
        const char *k;
        double v;
    } NUM[] = {{"nodes", u->nodes}, {"virtual_s", (double)u->virtual_ns / 1e9},
               {"wall_s", u->wall_s}, {"setup_s", u->setup_s}, {"events", (double)u->events},
               {"polls", (double)u->polls}, {"sent", (double)u->sent},
               {"bytes_sent", (double)u->bytes_sent}, {"delivered", (double)u->delivered},
               {"bytes_delivered", (double)u->bytes_delivered},
               {"duplicated", (double)u->duplicated}, {"dropped_loss", (double)u->dropped_loss},
               {"dropped_partition", (double)u->dropped_partition},
               {"dropped_down", (double)u->dropped_down},
               {"dropped_unroutable", (double)u->dropped_unroutable},
               {"dropped_backoff", (double)u->dropped_backoff},
               {"app_events", (double)u->app_events}, {"failures", (double)u->failures},
               {"kills", (double)u->kills}, {"restarts", (double)u->restarts},
               {"jobs", (double)u->jobs}, {"rounds", (double)u->rounds},
               {"nodes_up", u->nodes_up}, {"rss_before", (double)u->rss_before},
               {"rss_nodes", (double)u->rss_nodes}, {"rss_peak", (double)u->rss_peak},
               {"bytes_per_node", per_node(u)}, {"shared_values", (double)u->shared_values},
               {"shared_bytes", (double)u->shared_bytes}};
    for (size_t i = 0; j && i < sizeof NUM / sizeof *NUM; i++)
        cJSON_AddNumberToObject(j, NUM[i].k, NUM[i].v);
    char hash[24];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)u->log_hash);
    cJSON_AddStringToObject(j, "stopped", u->stopped);
    cJSON_AddStringToObject(j, "log_hash", hash);
    cJSON *rounds = cJSON_AddArrayToObject(j, "per_round");
    for (size_t r = 0; rounds && r < s->n_rounds; r++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "round", (double)(r + 1));
        cJSON_AddNumberToObject(x, "t_s", (double)s->rounds[r].at / 1e9);
        cJSON_AddNumberToObject(x, "bytes", (double)s->rounds[r].bytes);
        cJSON_AddItemToArray(rounds, x);
    }
    cJSON *metrics = cJSON_AddArrayToObject(j, "metrics");
    for (size_t m = 0; metrics && m < s->sc->n_metrics; m++)
        cJSON_AddItemToArray(metrics, metric_json(s, m));
    return j;
}

int bbsim_report_write(const bbsim *s, const char *dir, bb_error *err)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return bb_error_set(err, BB_EIO, "%s: cannot create: %s", dir, strerror(errno));
    char path[4096];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    cJSON *j = summary_json(s);
    char *text = j ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    FILE *f = text ? fopen(path, "w") : NULL;
    int rc = !text ? bb_error_set(err, BB_ENOMEM, "summary: out of memory")
             : !f  ? bb_error_set(err, BB_EIO, "%s: cannot write: %s", path, strerror(errno))
                   : BB_OK;
    if (f) {
        fputs(text, f);
        fputc('\n', f);
        if (fclose(f) != 0)
            rc = bb_error_set(err, BB_EIO, "%s: cannot write: %s", path, strerror(errno));
    }
    cJSON_free(text);
    for (size_t m = 0; !rc && m < s->sc->n_metrics; m++) {
        snprintf(path, sizeof path, "%s/metric-%s.svg", dir, s->sc->metrics[m].name);
        rc = bbsim__svg_metric(s, m, path, err);
    }
    snprintf(path, sizeof path, "%s/traffic.svg", dir);
    return rc ? rc : bbsim__svg_traffic(s, path, err);
}
