/*
 * scenario.c — the scenario loader (scenario.h): the top level, the groups
 * and what reports; the network and churn sections are in
 * scenario_net.c. Every section checks its keys first, then reads its
 * members with their ranges; references between sections (a selector's
 * group, a connect's group) are resolved by name after the groups are read.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/io.h"
#include "bbsim/json_read.h"
#include "bbsim/scenario_internal.h"

static char *dup_str(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* p relative to dir (absolute paths as they are); malloc'd. */
static char *resolve_path(const char *dir, const char *p)
{
    if (p[0] == '/' || !dir || !strcmp(dir, "."))
        return strdup(p);
    size_t n = strlen(dir) + strlen(p) + 2;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s/%s", dir, p);
    return s;
}

static int oom(bb_error *err)
{
    return bb_error_set(err, BB_ENOMEM, "scenario: out of memory");
}

/* ---- names -------------------------------------------------------------------------- */

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (!n || n > BBSIM_MAX_NAME || !((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-", s[i]))
            return false;
    return true;
}

int bbsim__group_index(const bbsim_scenario *sc, const char *name, const char *path,
                       uint32_t *out, bb_error *err)
{
    for (size_t g = 0; g < sc->n_groups; g++)
        if (strcmp(sc->groups[g].name, name) == 0) {
            *out = (uint32_t)g;
            return BB_OK;
        }
    char known[512] = "";
    for (size_t g = 0, len = 0; g < sc->n_groups && len < sizeof known; g++)
        len += (size_t)snprintf(known + len, sizeof known - len, "%s%s", g ? ", " : "",
                                sc->groups[g].name);
    return bb_error_set(err, BB_ECONFIG, "%s: no group '%.64s' (groups: %s)", path, name, known);
}

/* ---- groups ------------------------------------------------------------------------- */

static int read_targets(bbsim_group *g, const cJSON *j, const char *path, bb_error *err)
{
    const cJSON *t = bbsim_json_get(j, "targets");
    int n = t ? cJSON_GetArraySize(t) : 0;
    if (!cJSON_IsArray(t) || n < 1 || n > (int)BBSIM_MAX_LIST)
        return bb_error_set(err, BB_ECONFIG, "%s.targets: must be a list of 1 to %u target names",
                            path, BBSIM_MAX_LIST);
    if (!(g->targets = calloc((size_t)n, sizeof *g->targets)))
        return oom(err);
    for (const cJSON *x = t->child; x; x = x->next) {
        if (!cJSON_IsString(x) || !x->valuestring[0] || strlen(x->valuestring) > 256)
            return bb_error_set(err, BB_ECONFIG, "%s.targets[%zu]: must be a target name", path,
                                g->n_targets);
        if (!(g->targets[g->n_targets++] = strdup(x->valuestring)))
            return oom(err);
    }
    return BB_OK;
}

static int read_caps(bbsim_group *g, const cJSON *j, const char *path, bb_error *err)
{
    static const char *const KEYS[] = {"preset", "peer_failure_threshold", "dedup_window",
                                       "backoff_base", "backoff_max", NULL};
    bb_engine_caps_default(&g->caps);
    const cJSON *c = bbsim_json_get(j, "caps");
    if (!c)
        return BB_OK;
    char sub[160];
    snprintf(sub, sizeof sub, "%s.caps", path);
    const char *preset = "default";
    uint64_t threshold = g->caps.peer_failure_threshold, dedup = g->caps.dedup_window;
    int rc = bbsim_json_object(c, sub, KEYS, err);
    if (!rc)
        rc = bbsim_json_string(c, "preset", sub, false, 16, &preset, err);
    if (!rc && strcmp(preset, "default") && strcmp(preset, "edge"))
        rc = bb_error_set(err, BB_ECONFIG, "%s.preset: \"default\" or \"edge\", not \"%.32s\"",
                          sub, preset);
    if (!rc && !strcmp(preset, "edge"))
        bb_engine_caps_edge(&g->caps);
    threshold = g->caps.peer_failure_threshold;
    dedup = g->caps.dedup_window;
    if (!rc)
        rc = bbsim_json_uint(c, "peer_failure_threshold", sub, false, 1, 1000000, &threshold, err);
    if (!rc)
        rc = bbsim_json_uint(c, "dedup_window", sub, false, 1, 1u << 24, &dedup, err);
    if (!rc)
        rc = bbsim_json_duration(c, "backoff_base", sub, false, &g->caps.backoff_base_ns, err);
    if (!rc)
        rc = bbsim_json_duration(c, "backoff_max", sub, false, &g->caps.backoff_max_ns, err);
    g->caps.peer_failure_threshold = (uint32_t)threshold;
    g->caps.dedup_window = (size_t)dedup;
    return rc;
}

/* "connect": ["server", {"group": "peers", "count": 8}]; names resolved later. */
static int read_connect(bbsim_group *g, const cJSON *j, const char *path, char ***names,
                        bb_error *err)
{
    static const char *const KEYS[] = {"group", "count", NULL};
    const cJSON *c = bbsim_json_get(j, "connect");
    if (!c)
        return BB_OK;
    int n = cJSON_GetArraySize(c);
    if (!cJSON_IsArray(c) || n > (int)BBSIM_MAX_LIST)
        return bb_error_set(err, BB_ECONFIG, "%s.connect: must be a list of at most %u groups",
                            path, BBSIM_MAX_LIST);
    g->connect = calloc((size_t)n + 1, sizeof *g->connect);
    *names = calloc((size_t)n + 1, sizeof **names);
    if (!g->connect || !*names)
        return oom(err);
    for (const cJSON *x = c->child; x; x = x->next, g->n_connect++) {
        char sub[160];
        snprintf(sub, sizeof sub, "%s.connect[%zu]", path, g->n_connect);
        const char *name = cJSON_IsString(x) ? x->valuestring : NULL;
        uint64_t count = 0;
        if (!name) {
            int rc = bbsim_json_object(x, sub, KEYS, err);
            if (!rc)
                rc = bbsim_json_string(x, "group", sub, true, BBSIM_MAX_NAME, &name, err);
            if (!rc)
                rc = bbsim_json_uint(x, "count", sub, true, 1, BBSIM_MAX_NODES, &count, err);
            if (rc)
                return rc;
        }
        g->connect[g->n_connect].count = (uint32_t)count;
        if (!((*names)[g->n_connect] = strdup(name)))
            return oom(err);
    }
    return BB_OK;
}

static int read_group(bbsim_scenario *sc, const cJSON *j, size_t gi, char ***connect_names,
                      bb_error *err)
{
    static const char *const KEYS[] = {"name",  "count", "targets",    "components",
                                       "connect", "bootstrap", "start", "caps", "work_scale",
                                       "snapshot_every", NULL};
    char path[64];
    snprintf(path, sizeof path, "groups[%zu]", gi);
    bbsim_group *g = &sc->groups[gi];
    g->bootstrap = true;
    g->work_scale = 1.0;
    const char *name = NULL;
    uint64_t count = 0;
    int rc = bbsim_json_object(j, path, KEYS, err);
    if (!rc)
        rc = bbsim_json_string(j, "name", path, true, BBSIM_MAX_NAME, &name, err);
    if (!rc && !name_ok(name))
        rc = bb_error_set(err, BB_ECONFIG, "%s.name: '%.64s' is not a name (a letter or _, then "
                          "letters, digits, _ or -)", path, name);
    for (size_t k = 0; !rc && k < gi; k++)
        if (!strcmp(sc->groups[k].name, name))
            rc = bb_error_set(err, BB_ECONFIG, "%s.name: groups[%zu] is '%s' too", path, k, name);
    if (!rc && !(g->name = strdup(name)))
        rc = oom(err);
    if (!rc)
        rc = bbsim_json_uint(j, "count", path, true, 1, BBSIM_MAX_NODES, &count, err);
    if (!rc && sc->n_nodes + count > BBSIM_MAX_NODES)
        rc = bb_error_set(err, BB_ELIMIT, "%s.count: the groups hold more than %u nodes", path,
                          BBSIM_MAX_NODES);
    g->count = (uint32_t)count;
    g->first = sc->n_nodes;
    sc->n_nodes += g->count;
    if (!rc)
        rc = read_targets(g, j, path, err);
    const cJSON *comp = bbsim_json_get(j, "components");
    if (!rc && comp && !cJSON_IsObject(comp))
        rc = bb_error_set(err, BB_ECONFIG, "%s.components: must be an object of slot configs",
                          path);
    if (!rc && comp && !(g->components = cJSON_Duplicate(comp, true)))
        rc = oom(err);
    if (!rc)
        rc = read_connect(g, j, path, &connect_names[gi], err);
    if (!rc)
        rc = bbsim_json_bool(j, "bootstrap", path, &g->bootstrap, err);
    if (!rc)
        rc = bbsim_json_duration(j, "start", path, false, &g->start, err);
    if (!rc)
        rc = read_caps(g, j, path, err);
    if (!rc)
        rc = bbsim_json_double(j, "work_scale", path, false, 0, 1e6, &g->work_scale, err);
    if (!rc)
        rc = bbsim_json_duration(j, "snapshot_every", path, false, &g->snapshot_every, err);
    return rc;
}

/* The connect names resolved to groups; the connections they make, counted
 * against BBSIM_MAX_EDGES before anything is built. */
static int resolve_connects(bbsim_scenario *sc, char ***names, bb_error *err)
{
    uint64_t edges = 0;
    for (size_t gi = 0; gi < sc->n_groups; gi++) {
        bbsim_group *g = &sc->groups[gi];
        for (size_t k = 0; k < g->n_connect; k++) {
            char path[96];
            snprintf(path, sizeof path, "groups[%zu].connect[%zu]", gi, k);
            int rc = bbsim__group_index(sc, names[gi][k], path, &g->connect[k].group, err);
            if (rc)
                return rc;
            uint32_t size = sc->groups[g->connect[k].group].count;
            if (g->connect[k].count > size)
                return bb_error_set(err, BB_ECONFIG, "%s.count: %u of a group of %u", path,
                                    g->connect[k].count, size);
            edges += (uint64_t)g->count * (g->connect[k].count ? g->connect[k].count : size);
        }
    }
    if (edges > BBSIM_MAX_EDGES)
        return bb_error_set(err, BB_ELIMIT, "groups: the connect lists make %llu connections "
                            "(at most %u)", (unsigned long long)edges, BBSIM_MAX_EDGES);
    return BB_OK;
}

/* Every template substituted for each group's first and last node, so a
 * bad placeholder fails the load, not the run (arithmetic that overflows
 * only in between still fails the run, at that node's start, by name). */
static int check_templates(const bbsim_scenario *sc, bb_error *err)
{
    for (size_t gi = 0; gi < sc->n_groups; gi++) {
        const bbsim_group *g = &sc->groups[gi];
        for (const cJSON *slot = g->components ? g->components->child : NULL; slot;
             slot = slot->next) {
            uint32_t ends[2] = {0, g->count - 1};
            for (int e = 0; e < 2; e++) {
                char *text = NULL;
                int rc = bbsim_slot_config(sc, (uint32_t)gi, ends[e], slot->string, &text, err);
                free(text);
                if (rc)
                    return rc;
            }
        }
    }
    return BB_OK;
}

static int read_groups(bbsim_scenario *sc, const cJSON *root, bb_error *err)
{
    const cJSON *gs = bbsim_json_get(root, "groups");
    int n = gs ? cJSON_GetArraySize(gs) : 0;
    if (!cJSON_IsArray(gs) || n < 1 || n > (int)BBSIM_MAX_GROUPS)
        return bb_error_set(err, BB_ECONFIG, "groups: must be a list of 1 to %u groups",
                            BBSIM_MAX_GROUPS);
    sc->groups = calloc((size_t)n, sizeof *sc->groups);
    char ***names = calloc((size_t)n, sizeof *names);
    int rc = sc->groups && names ? BB_OK : oom(err);
    for (const cJSON *g = gs->child; !rc && g; g = g->next)
        rc = read_group(sc, g, sc->n_groups++, names, err);
    if (!rc)
        rc = resolve_connects(sc, names, err);
    for (int gi = 0; names && gi < n; gi++) {
        for (size_t k = 0; names[gi] && names[gi][k]; k++)
            free(names[gi][k]);
        free(names[gi]);
    }
    free(names);
    return rc ? rc : check_templates(sc, err);
}

/* ---- what runs, when it stops, how work costs ---------------------------------------- */

static int read_until(bbsim_scenario *sc, const cJSON *root, bb_error *err)
{
    static const char *const KEYS[] = {"topic", "count", NULL};
    const cJSON *u = bbsim_json_get(root, "until");
    if (!u)
        return BB_OK;
    const char *topic = NULL;
    int rc = bbsim_json_object(u, "until", KEYS, err);
    if (!rc)
        rc = bbsim_json_string(u, "topic", "until", true, 256, &topic, err);
    if (!rc)
        rc = bbsim_json_uint(u, "count", "until", true, 1, UINT32_MAX, &sc->until_count, err);
    if (!rc && !(sc->until_topic = strdup(topic)))
        rc = oom(err);
    return rc;
}

static int read_work(bbsim_scenario *sc, const cJSON *root, bb_error *err)
{
    static const char *const KEYS[] = {"cost", "time", "scale", NULL};
    sc->work_mode = BBSIM_WORK_FIXED;
    sc->work_cost = 10000000; /* 10 ms */
    sc->work_scale = 1.0;
    const cJSON *w = bbsim_json_get(root, "work");
    if (!w)
        return BB_OK;
    const char *cost = "fixed";
    int rc = bbsim_json_object(w, "work", KEYS, err);
    if (!rc)
        rc = bbsim_json_string(w, "cost", "work", false, 16, &cost, err);
    if (!rc && strcmp(cost, "fixed") && strcmp(cost, "measured"))
        rc = bb_error_set(err, BB_ECONFIG, "work.cost: \"fixed\" or \"measured\", not \"%.32s\"",
                          cost);
    if (!rc)
        sc->work_mode = strcmp(cost, "measured") ? BBSIM_WORK_FIXED : BBSIM_WORK_MEASURED;
    if (!rc && sc->work_mode == BBSIM_WORK_MEASURED && bbsim_json_get(w, "time"))
        rc = bb_error_set(err, BB_ECONFIG, "work.time: a measured cost takes a scale, not a time");
    if (!rc)
        rc = bbsim_json_duration(w, "time", "work", false, &sc->work_cost, err);
    if (!rc)
        rc = bbsim_json_double(w, "scale", "work", false, 0, 1e6, &sc->work_scale, err);
    return rc;
}

static int read_report(bbsim_scenario *sc, const cJSON *root, bb_error *err)
{
    static const char *const KEYS[] = {"round_topic", "metrics", "bucket", NULL};
    static const char *const MKEYS[] = {"name", "topic", "item", "target", NULL};
    const cJSON *r = bbsim_json_get(root, "report");
    if (!r)
        return BB_OK;
    const char *topic = NULL;
    int rc = bbsim_json_object(r, "report", KEYS, err);
    if (!rc)
        rc = bbsim_json_string(r, "round_topic", "report", false, 256, &topic, err);
    if (!rc && topic && !(sc->round_topic = strdup(topic)))
        rc = oom(err);
    if (!rc)
        rc = bbsim_json_duration(r, "bucket", "report", false, &sc->bucket, err);
    if (!rc && sc->bucket == 0 && bbsim_json_get(r, "bucket"))
        rc = bb_error_set(err, BB_ECONFIG, "report.bucket: must be longer than 0");
    const cJSON *ms = bbsim_json_get(r, "metrics");
    int n = ms ? cJSON_GetArraySize(ms) : 0;
    if (!rc && ms && (!cJSON_IsArray(ms) || n > (int)BBSIM_MAX_LIST))
        rc = bb_error_set(err, BB_ECONFIG, "report.metrics: must be a list of at most %u",
                          BBSIM_MAX_LIST);
    if (!rc && n && !(sc->metrics = calloc((size_t)n, sizeof *sc->metrics)))
        rc = oom(err);
    for (const cJSON *m = ms ? ms->child : NULL; !rc && m; m = m->next) {
        char path[64];
        snprintf(path, sizeof path, "report.metrics[%zu]", sc->n_metrics);
        bbsim_metric *x = &sc->metrics[sc->n_metrics++];
        const char *name = NULL, *mt = NULL;
        uint64_t item = 0;
        x->item = -1;
        rc = bbsim_json_object(m, path, MKEYS, err);
        if (!rc)
            rc = bbsim_json_string(m, "name", path, true, BBSIM_MAX_NAME, &name, err);
        if (!rc && !name_ok(name))
            rc = bb_error_set(err, BB_ECONFIG, "%s.name: '%.64s' is not a name", path, name);
        if (!rc)
            rc = bbsim_json_string(m, "topic", path, true, 256, &mt, err);
        if (!rc && bbsim_json_get(m, "item") &&
            !(rc = bbsim_json_uint(m, "item", path, false, 0, 4095, &item, err)))
            x->item = (int)item;
        if (!rc && (x->has_target = bbsim_json_get(m, "target") != NULL))
            rc = bbsim_json_double(m, "target", path, false, -1e15, 1e15, &x->target, err);
        if (!rc && (!(x->name = strdup(name)) || !(x->topic = strdup(mt))))
            rc = oom(err);
    }
    return rc;
}

static int read_top(bbsim_scenario *sc, const cJSON *root, const char *dir, bb_error *err)
{
    static const char *const KEYS[] = {"artifact", "plugin_path", "seed", "duration", "until",
                                       "work", "threads", "groups", "network", "churn",
                                       "report", NULL};
    const char *artifact = NULL;
    uint64_t threads = 0;
    sc->seed = 1;
    sc->threads = -1;
    int rc = bbsim_json_object(root, "scenario", KEYS, err);
    if (!rc)
        rc = bbsim_json_string(root, "artifact", "scenario", true, 4096, &artifact, err);
    if (!rc && !(sc->artifact = resolve_path(dir, artifact)))
        rc = oom(err);
    if (!rc)
        rc = bbsim_json_uint(root, "seed", "scenario", false, 0, 1ull << 53, &sc->seed, err);
    if (!rc)
        rc = bbsim_json_duration(root, "duration", "scenario", true, &sc->duration, err);
    if (!rc && bbsim_json_get(root, "threads") &&
        !(rc = bbsim_json_uint(root, "threads", "scenario", false, 0, 64, &threads, err)))
        sc->threads = (int)threads;
    const cJSON *pp = bbsim_json_get(root, "plugin_path");
    int n = pp ? cJSON_GetArraySize(pp) : 0;
    if (!rc && pp && (!cJSON_IsArray(pp) || n > 64))
        rc = bb_error_set(err, BB_ECONFIG, "scenario.plugin_path: must be a list of at most 64 "
                          "directories");
    if (!rc && n && !(sc->plugin_dirs = calloc((size_t)n, sizeof *sc->plugin_dirs)))
        rc = oom(err);
    for (const cJSON *d = pp ? pp->child : NULL; !rc && d; d = d->next) {
        if (!cJSON_IsString(d) || !d->valuestring[0] || strlen(d->valuestring) > 4096)
            rc = bb_error_set(err, BB_ECONFIG, "scenario.plugin_path[%zu]: must be a directory",
                              sc->n_plugin_dirs);
        else if (!(sc->plugin_dirs[sc->n_plugin_dirs++] = resolve_path(dir, d->valuestring)))
            rc = oom(err);
    }
    if (!rc)
        rc = read_until(sc, root, err);
    if (!rc)
        rc = read_work(sc, root, err);
    return rc;
}

int bbsim_scenario_parse(const char *text, size_t len, const char *origin, const char *dir,
                         bbsim_scenario **out, bb_error *err)
{
    *out = NULL;
    if (len > BBSIM_MAX_SCENARIO_BYTES)
        return bb_error_set(err, BB_ELIMIT, "%s: %zu bytes (at most %u)", origin, len,
                            BBSIM_MAX_SCENARIO_BYTES);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!root)
        return bb_error_set(err, BB_EPARSE, "%s: not valid JSON (near byte %zu)", origin,
                            end && end >= text ? (size_t)(end - text) : (size_t)0);
    bbsim_scenario *sc = calloc(1, sizeof *sc);
    int rc = sc ? BB_OK : oom(err);
    if (!rc && !(sc->dir = dup_str(dir ? dir : ".")))
        rc = oom(err);
    if (!rc)
        rc = read_top(sc, root, sc->dir, err);
    if (!rc)
        rc = read_groups(sc, root, err);
    if (!rc)
        rc = bbsim__read_network(sc, root, err);
    if (!rc)
        rc = bbsim__read_churn(sc, root, err);
    if (!rc)
        rc = read_report(sc, root, err);
    if (!rc && !sc->bucket)
        sc->bucket = sc->duration / 50 ? sc->duration / 50 : 1;
    cJSON_Delete(root);
    if (rc) {
        bbsim_scenario_free(sc);
        return bb_error_prefix(err, "%s", origin);
    }
    *out = sc;
    return BB_OK;
}

int bbsim_scenario_load(const char *path, bbsim_scenario **out, bb_error *err)
{
    uint8_t *text = NULL;
    size_t len = 0;
    *out = NULL;
    int rc = bb_read_file(path, BBSIM_MAX_SCENARIO_BYTES, &text, &len, err);
    if (rc)
        return rc;
    char *dir = strdup(path);
    if (!dir) {
        free(text);
        return oom(err);
    }
    char *slash = strrchr(dir, '/');
    if (slash)
        slash[slash == dir ? 1 : 0] = '\0';
    rc = bbsim_scenario_parse((const char *)text, len, path, slash ? dir : ".", out, err);
    free(dir);
    free(text);
    return rc;
}

static void sels_free(bbsim_sels *s)
{
    free(s->v);
}

void bbsim_scenario_free(bbsim_scenario *sc)
{
    if (!sc)
        return;
    for (size_t g = 0; g < sc->n_groups; g++) {
        bbsim_group *x = &sc->groups[g];
        free(x->name);
        for (size_t t = 0; t < x->n_targets; t++)
            free(x->targets[t]);
        free(x->targets);
        cJSON_Delete(x->components);
        free(x->connect);
    }
    for (size_t i = 0; i < sc->n_links; i++) {
        sels_free(&sc->links[i].from);
        sels_free(&sc->links[i].to);
    }
    for (size_t i = 0; i < sc->n_partitions; i++)
        sels_free(&sc->partitions[i].isolate);
    for (size_t i = 0; i < sc->n_churn; i++)
        sels_free(&sc->churn[i].nodes);
    for (size_t i = 0; i < sc->n_metrics; i++) {
        free(sc->metrics[i].name);
        free(sc->metrics[i].topic);
    }
    for (size_t i = 0; i < sc->n_plugin_dirs; i++)
        free(sc->plugin_dirs[i]);
    free(sc->plugin_dirs);
    free(sc->groups);
    free(sc->links);
    free(sc->partitions);
    free(sc->churn);
    free(sc->metrics);
    free(sc->until_topic);
    free(sc->round_topic);
    free(sc->artifact);
    free(sc->dir);
    free(sc);
}

/* ---- lookups --------------------------------------------------------------------------- */

uint32_t bbsim_scenario_group_of(const bbsim_scenario *sc, uint32_t k)
{
    uint32_t lo = 0, hi = (uint32_t)sc->n_groups - 1;
    while (lo < hi) { /* the last group whose first node is <= k */
        uint32_t mid = (lo + hi + 1) / 2;
        if (sc->groups[mid].first <= k)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

bool bbsim_sels_has(const bbsim_sels *s, uint32_t group, uint32_t index)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].group == group && index >= s->v[i].lo && index < s->v[i].hi)
            return true;
    return false;
}

int bbsim_slot_config(const bbsim_scenario *sc, uint32_t g, uint32_t index, const char *slot,
                      char **out, bb_error *err)
{
    *out = NULL;
    const bbsim_group *grp = &sc->groups[g];
    const cJSON *t = grp->components ? cJSON_GetObjectItemCaseSensitive(grp->components, slot)
                                     : NULL;
    if (!t)
        return BB_OK;
    char path[160];
    snprintf(path, sizeof path, "groups[%u].components.%.64s", g, slot);
    cJSON *c = bbsim_template_apply(t, index, grp->count, (int64_t)grp->first + index, path, err);
    if (!c)
        return err->code ? err->code : BB_ENOMEM;
    *out = cJSON_PrintUnformatted(c);
    cJSON_Delete(c);
    return *out ? BB_OK : oom(err);
}
