/*
 * scenario_net.c — the scenario's "network" and "churn" sections and the
 * node selectors they use (scenario.h, bbsim(1)):
 *
 *   "network": {"latency": "10ms" | {"dist": ..., ...}, "bandwidth": "100Mbit/s",
 *               "loss": 0.01, "duplicate": 0, "reorder": 0,
 *               "links": [{"from": SEL, "to": SEL, <any of the five>}],
 *               "partitions": [{"at": "5s", "heal": "8s", "isolate": SEL}]}
 *   "churn":   [{"at": "10s", "kill": SEL, "restart": "15s", "graceful": false},
 *               {"rate": 0.1, "of": SEL, "every": "60s", "downtime": "10s",
 *                "from": "0s", "until": "5m", "graceful": false}]
 *
 * A selector SEL is "group", "group[i]" or "group[lo:hi]" (hi exclusive), or
 * a list of them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bbsim/json_read.h"
#include "bbsim/scenario_internal.h"

static int oom(bb_error *err)
{
    return bb_error_set(err, BB_ENOMEM, "scenario: out of memory");
}

/* ---- selectors ----------------------------------------------------------------------- */

static bool read_index(const char **p, uint32_t *out)
{
    char *end = NULL;
    if (**p < '0' || **p > '9')
        return false;
    unsigned long long v = strtoull(*p, &end, 10);
    if (v > BBSIM_MAX_NODES)
        return false;
    *out = (uint32_t)v;
    *p = end;
    return true;
}

static int read_sel(const bbsim_scenario *sc, const char *text, const char *path, bbsim_sel *out,
                    bb_error *err)
{
    char name[BBSIM_MAX_NAME + 1];
    size_t n = strcspn(text, "[");
    if (n == 0 || n > BBSIM_MAX_NAME)
        return bb_error_set(err, BB_ECONFIG, "%s: '%.80s' is not group, group[i] or group[lo:hi]",
                            path, text);
    memcpy(name, text, n);
    name[n] = '\0';
    int rc = bbsim__group_index(sc, name, path, &out->group, err);
    if (rc)
        return rc;
    uint32_t count = sc->groups[out->group].count;
    out->lo = 0;
    out->hi = count;
    const char *p = text + n;
    if (!*p)
        return BB_OK;
    p++;
    bool ok = read_index(&p, &out->lo);
    out->hi = out->lo + 1;
    if (ok && *p == ':') {
        p++;
        ok = read_index(&p, &out->hi);
    }
    if (!ok || strcmp(p, "]") != 0)
        return bb_error_set(err, BB_ECONFIG, "%s: '%.80s' is not group, group[i] or group[lo:hi]",
                            path, text);
    if (out->lo >= out->hi || out->hi > count)
        return bb_error_set(err, BB_ECONFIG, "%s: '%.80s' selects nothing of the %u nodes of %s",
                            path, text, count, name);
    return BB_OK;
}

int bbsim__read_sels(const bbsim_scenario *sc, const cJSON *j, const char *path,
                     bbsim_sels *out, bb_error *err)
{
    int n = cJSON_IsArray(j) ? cJSON_GetArraySize(j) : 1;
    if (!j || (!cJSON_IsString(j) && !cJSON_IsArray(j)) || n < 1 || n > (int)BBSIM_MAX_LIST)
        return bb_error_set(err, BB_ECONFIG, "%s: must be a selector (\"clients\", "
                            "\"clients[3]\", \"clients[0:500]\") or a list of 1 to %u",
                            path, BBSIM_MAX_LIST);
    if (!(out->v = calloc((size_t)n, sizeof *out->v)))
        return oom(err);
    for (const cJSON *x = cJSON_IsArray(j) ? j->child : j; x; x = cJSON_IsArray(j) ? x->next : NULL) {
        char sub[160];
        snprintf(sub, sizeof sub, "%s[%zu]", path, out->n);
        if (!cJSON_IsString(x))
            return bb_error_set(err, BB_ECONFIG, "%s: must be a selector string", sub);
        int rc = read_sel(sc, x->valuestring, cJSON_IsArray(j) ? sub : path, &out->v[out->n++],
                          err);
        if (rc)
            return rc;
    }
    return BB_OK;
}

/* ---- links ---------------------------------------------------------------------------- */

static int read_dist(const cJSON *j, const char *path, bbsim_dist *d, bb_error *err)
{
    static const char *const KEYS[] = {"dist", "value", "min", "max", "mean", "stddev",
                                       "median", "sigma", NULL};
    static const struct {
        const char *name, *a, *b;
        bbsim_dist_kind kind;
    } DISTS[] = {{"constant", "value", NULL, BBSIM_DIST_CONSTANT},
                 {"uniform", "min", "max", BBSIM_DIST_UNIFORM},
                 {"normal", "mean", "stddev", BBSIM_DIST_NORMAL},
                 {"lognormal", "median", NULL, BBSIM_DIST_LOGNORMAL},
                 {"exponential", "mean", NULL, BBSIM_DIST_EXPONENTIAL}};
    bbsim_ns a = 0, b = 0;
    if (cJSON_IsString(j)) {
        if (bbsim_parse_duration(j->valuestring, &a) != BB_OK)
            return bb_error_set(err, BB_ECONFIG, "%s: '%.40s' is not a duration (\"10ms\")",
                                path, j->valuestring);
        *d = (bbsim_dist){BBSIM_DIST_CONSTANT, (double)a, 0};
        return BB_OK;
    }
    const char *name = NULL;
    int rc = bbsim_json_object(j, path, KEYS, err);
    if (!rc)
        rc = bbsim_json_string(j, "dist", path, true, 16, &name, err);
    size_t k = 0;
    while (!rc && k < sizeof DISTS / sizeof *DISTS && strcmp(DISTS[k].name, name))
        k++;
    if (!rc && k == sizeof DISTS / sizeof *DISTS)
        return bb_error_set(err, BB_ECONFIG, "%s.dist: '%.32s' is none of constant, uniform, "
                            "normal, lognormal, exponential", path, name);
    for (size_t i = 0; !rc && KEYS[i]; i++) { /* only the keys of this distribution */
        bool mine = !strcmp(KEYS[i], "dist") || !strcmp(KEYS[i], DISTS[k].a) ||
                    (DISTS[k].b && !strcmp(KEYS[i], DISTS[k].b)) ||
                    (DISTS[k].kind == BBSIM_DIST_LOGNORMAL && !strcmp(KEYS[i], "sigma"));
        if (!mine && bbsim_json_get(j, KEYS[i]))
            rc = bb_error_set(err, BB_ECONFIG, "%s: a %s distribution has no '%s'", path, name,
                              KEYS[i]);
    }
    if (!rc)
        rc = bbsim_json_duration(j, DISTS[k].a, path, true, &a, err);
    if (!rc && DISTS[k].b)
        rc = bbsim_json_duration(j, DISTS[k].b, path, true, &b, err);
    d->kind = DISTS[k].kind;
    d->a = (double)a;
    d->b = (double)b;
    if (!rc && d->kind == BBSIM_DIST_LOGNORMAL)
        rc = bbsim_json_double(j, "sigma", path, true, 0, 10, &d->b, err);
    if (!rc && d->kind == BBSIM_DIST_UNIFORM && b < a)
        rc = bb_error_set(err, BB_ECONFIG, "%s: max is below min", path);
    return rc;
}

static const char *const MODEL_KEYS[] = {"latency", "bandwidth", "loss", "duplicate", "reorder"};
#define N_MODEL_KEYS 5

/* The five link parameters of j (those it sets). */
static int read_model(const cJSON *j, const char *path, bbsim_link_model *m, bb_error *err)
{
    char sub[192];
    int rc = BB_OK;
    const cJSON *lat = bbsim_json_get(j, "latency");
    if (lat) {
        snprintf(sub, sizeof sub, "%s.latency", path);
        rc = read_dist(lat, sub, &m->latency, err);
        m->has_latency = true;
    }
    const char *bw = NULL;
    if (!rc && !(rc = bbsim_json_string(j, "bandwidth", path, false, 32, &bw, err)) && bw) {
        if (bbsim_parse_bandwidth(bw, &m->bandwidth) != BB_OK)
            rc = bb_error_set(err, BB_ECONFIG, "%s.bandwidth: '%s' is not a rate from 1 B/s to "
                              "1000 GB/s (\"100Mbit/s\", \"12.5MB/s\", \"unlimited\")",
                              path, bw);
        m->has_bandwidth = true;
    }
    double *p[3] = {&m->loss, &m->duplicate, &m->reorder};
    bool *has[3] = {&m->has_loss, &m->has_duplicate, &m->has_reorder};
    for (int i = 0; !rc && i < 3; i++) {
        *has[i] = bbsim_json_get(j, MODEL_KEYS[2 + i]) != NULL;
        rc = bbsim_json_double(j, MODEL_KEYS[2 + i], path, false, 0, 1, p[i], err);
    }
    return rc;
}

static int read_links(bbsim_scenario *sc, const cJSON *net, bb_error *err)
{
    const char *keys[N_MODEL_KEYS + 3] = {"from", "to"};
    memcpy(keys + 2, MODEL_KEYS, sizeof MODEL_KEYS);
    const cJSON *ls = bbsim_json_get(net, "links");
    int n = ls ? cJSON_GetArraySize(ls) : 0;
    if (!ls)
        return BB_OK;
    if (!cJSON_IsArray(ls) || n > (int)BBSIM_MAX_LIST)
        return bb_error_set(err, BB_ECONFIG, "network.links: must be a list of at most %u rules",
                            BBSIM_MAX_LIST);
    if (n && !(sc->links = calloc((size_t)n, sizeof *sc->links)))
        return oom(err);
    for (const cJSON *l = ls->child; l; l = l->next) {
        char path[64], sub[80];
        snprintf(path, sizeof path, "network.links[%zu]", sc->n_links);
        bbsim_link_rule *r = &sc->links[sc->n_links++];
        int rc = bbsim_json_object(l, path, keys, err);
        snprintf(sub, sizeof sub, "%s.from", path);
        if (!rc)
            rc = bbsim__read_sels(sc, bbsim_json_get(l, "from"), sub, &r->from, err);
        snprintf(sub, sizeof sub, "%s.to", path);
        if (!rc)
            rc = bbsim__read_sels(sc, bbsim_json_get(l, "to"), sub, &r->to, err);
        if (!rc)
            rc = read_model(l, path, &r->m, err);
        if (rc)
            return rc;
    }
    return BB_OK;
}

static int read_partitions(bbsim_scenario *sc, const cJSON *net, bb_error *err)
{
    static const char *const KEYS[] = {"at", "heal", "isolate", NULL};
    const cJSON *ps = bbsim_json_get(net, "partitions");
    int n = ps ? cJSON_GetArraySize(ps) : 0;
    if (!ps)
        return BB_OK;
    if (!cJSON_IsArray(ps) || n > (int)BBSIM_MAX_LIST)
        return bb_error_set(err, BB_ECONFIG, "network.partitions: must be a list of at most %u",
                            BBSIM_MAX_LIST);
    if (n && !(sc->partitions = calloc((size_t)n, sizeof *sc->partitions)))
        return oom(err);
    for (const cJSON *x = ps->child; x; x = x->next) {
        char path[64], sub[80];
        snprintf(path, sizeof path, "network.partitions[%zu]", sc->n_partitions);
        bbsim_partition *p = &sc->partitions[sc->n_partitions++];
        p->heal = UINT64_MAX;
        int rc = bbsim_json_object(x, path, KEYS, err);
        if (!rc)
            rc = bbsim_json_duration(x, "at", path, true, &p->at, err);
        if (!rc)
            rc = bbsim_json_duration(x, "heal", path, false, &p->heal, err);
        if (!rc && p->heal <= p->at)
            rc = bb_error_set(err, BB_ECONFIG, "%s.heal: must come after 'at'", path);
        snprintf(sub, sizeof sub, "%s.isolate", path);
        if (!rc)
            rc = bbsim__read_sels(sc, bbsim_json_get(x, "isolate"), sub, &p->isolate, err);
        if (rc)
            return rc;
    }
    return BB_OK;
}

int bbsim__read_network(bbsim_scenario *sc, const cJSON *root, bb_error *err)
{
    const char *keys[N_MODEL_KEYS + 3];
    memcpy(keys, MODEL_KEYS, sizeof MODEL_KEYS);
    keys[N_MODEL_KEYS] = "links";
    keys[N_MODEL_KEYS + 1] = "partitions";
    keys[N_MODEL_KEYS + 2] = NULL;
    /* the defaults: 1 ms, unlimited, no loss */
    sc->net = (bbsim_link_model){.latency = {BBSIM_DIST_CONSTANT, 1e6, 0}};
    const cJSON *net = bbsim_json_get(root, "network");
    if (!net)
        return BB_OK;
    int rc = bbsim_json_object(net, "network", keys, err);
    if (!rc)
        rc = read_model(net, "network", &sc->net, err);
    if (!rc)
        rc = read_links(sc, net, err);
    return rc ? rc : read_partitions(sc, net, err);
}

/* ---- churn ---------------------------------------------------------------------------- */

static int read_churn_event(bbsim_scenario *sc, const cJSON *x, const char *path,
                            bbsim_churn *c, bb_error *err)
{
    static const char *const KEYS[] = {"at", "kill", "restart", "graceful", NULL};
    char sub[80];
    snprintf(sub, sizeof sub, "%s.kill", path);
    c->restart = UINT64_MAX;
    int rc = bbsim_json_object(x, path, KEYS, err);
    if (!rc)
        rc = bbsim_json_duration(x, "at", path, true, &c->at, err);
    if (!rc)
        rc = bbsim__read_sels(sc, bbsim_json_get(x, "kill"), sub, &c->nodes, err);
    if (!rc)
        rc = bbsim_json_duration(x, "restart", path, false, &c->restart, err);
    if (!rc && c->restart <= c->at)
        rc = bb_error_set(err, BB_ECONFIG, "%s.restart: must come after 'at'", path);
    if (!rc)
        rc = bbsim_json_bool(x, "graceful", path, &c->graceful, err);
    return rc;
}

static int read_churn_rate(bbsim_scenario *sc, const cJSON *x, const char *path,
                           bbsim_churn *c, bb_error *err)
{
    static const char *const KEYS[] = {"rate", "of", "every", "downtime", "from", "until",
                                       "graceful", NULL};
    char sub[80];
    snprintf(sub, sizeof sub, "%s.of", path);
    c->is_rate = true;
    c->downtime = UINT64_MAX;
    c->until = UINT64_MAX;
    int rc = bbsim_json_object(x, path, KEYS, err);
    if (!rc)
        rc = bbsim_json_double(x, "rate", path, true, 0, 1, &c->rate, err);
    if (!rc)
        rc = bbsim__read_sels(sc, bbsim_json_get(x, "of"), sub, &c->nodes, err);
    if (!rc)
        rc = bbsim_json_duration(x, "every", path, true, &c->every, err);
    if (!rc && c->every < 1000000)
        rc = bb_error_set(err, BB_ECONFIG, "%s.every: at least 1ms", path);
    if (!rc)
        rc = bbsim_json_duration(x, "downtime", path, false, &c->downtime, err);
    if (!rc)
        rc = bbsim_json_duration(x, "from", path, false, &c->at, err);
    if (!rc)
        rc = bbsim_json_duration(x, "until", path, false, &c->until, err);
    if (!rc)
        rc = bbsim_json_bool(x, "graceful", path, &c->graceful, err);
    return rc;
}

int bbsim__read_churn(bbsim_scenario *sc, const cJSON *root, bb_error *err)
{
    const cJSON *cs = bbsim_json_get(root, "churn");
    int n = cs ? cJSON_GetArraySize(cs) : 0;
    if (!cs)
        return BB_OK;
    if (!cJSON_IsArray(cs) || n > (int)BBSIM_MAX_LIST)
        return bb_error_set(err, BB_ECONFIG, "churn: must be a list of at most %u entries",
                            BBSIM_MAX_LIST);
    if (n && !(sc->churn = calloc((size_t)n, sizeof *sc->churn)))
        return oom(err);
    for (const cJSON *x = cs->child; x; x = x->next) {
        char path[32];
        snprintf(path, sizeof path, "churn[%zu]", sc->n_churn);
        bbsim_churn *c = &sc->churn[sc->n_churn++];
        int rc;
        if (cJSON_IsObject(x) && bbsim_json_get(x, "kill"))
            rc = read_churn_event(sc, x, path, c, err);
        else if (cJSON_IsObject(x) && bbsim_json_get(x, "rate"))
            rc = read_churn_rate(sc, x, path, c, err);
        else
            rc = bb_error_set(err, BB_ECONFIG, "%s: an object with \"kill\" (an event) or "
                              "\"rate\" (a rate)", path);
        if (rc)
            return rc;
    }
    return BB_OK;
}
