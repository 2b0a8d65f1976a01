/*
 * json_read.c — checked JSON members and the units of a scenario
 * (json_read.h, scenario.h): durations ("250ms") and rates ("100Mbit/s").
 */
#include "bbsim/json_read.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bbsim_json_object(const cJSON *j, const char *path, const char *const *keys, bb_error *err)
{
    if (!cJSON_IsObject(j))
        return bb_error_set(err, BB_ECONFIG, "%s: must be a JSON object", path);
    for (const cJSON *m = j->child; m; m = m->next) {
        size_t k = 0;
        while (keys[k] && strcmp(keys[k], m->string) != 0)
            k++;
        if (keys[k])
            continue;
        char known[512] = "";
        for (size_t i = 0, len = 0; keys[i] && len < sizeof known; i++)
            len += (size_t)snprintf(known + len, sizeof known - len, "%s%s", i ? ", " : "",
                                    keys[i]);
        return bb_error_set(err, BB_ECONFIG, "%s: unknown key '%.64s' (known: %s)", path,
                            m->string, known);
    }
    return BB_OK;
}

const cJSON *bbsim_json_get(const cJSON *obj, const char *key)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(obj, key);
    return m && !cJSON_IsNull(m) ? m : NULL;
}

static int missing(const char *path, const char *key, bb_error *err)
{
    return bb_error_set(err, BB_ECONFIG, "%s: '%s' is required", path, key);
}

int bbsim_json_uint(const cJSON *obj, const char *key, const char *path, bool required,
                    uint64_t lo, uint64_t hi, uint64_t *out, bb_error *err)
{
    const cJSON *m = bbsim_json_get(obj, key);
    if (!m)
        return required ? missing(path, key, err) : BB_OK;
    double v = m->valuedouble;
    if (!cJSON_IsNumber(m) || v != floor(v) || v < (double)lo || v > (double)hi)
        return bb_error_set(err, BB_ECONFIG, "%s.%s: must be a whole number in [%llu, %llu]",
                            path, key, (unsigned long long)lo, (unsigned long long)hi);
    *out = (uint64_t)v;
    return BB_OK;
}

int bbsim_json_double(const cJSON *obj, const char *key, const char *path, bool required,
                      double lo, double hi, double *out, bb_error *err)
{
    const cJSON *m = bbsim_json_get(obj, key);
    if (!m)
        return required ? missing(path, key, err) : BB_OK;
    if (!cJSON_IsNumber(m) || !(m->valuedouble >= lo && m->valuedouble <= hi))
        return bb_error_set(err, BB_ECONFIG, "%s.%s: must be a number in [%g, %g]", path, key,
                            lo, hi);
    *out = m->valuedouble;
    return BB_OK;
}

int bbsim_json_bool(const cJSON *obj, const char *key, const char *path, bool *out,
                    bb_error *err)
{
    const cJSON *m = bbsim_json_get(obj, key);
    if (!m)
        return BB_OK;
    if (!cJSON_IsBool(m))
        return bb_error_set(err, BB_ECONFIG, "%s.%s: must be true or false", path, key);
    *out = cJSON_IsTrue(m);
    return BB_OK;
}

int bbsim_json_string(const cJSON *obj, const char *key, const char *path, bool required,
                      size_t max_len, const char **out, bb_error *err)
{
    const cJSON *m = bbsim_json_get(obj, key);
    if (!m)
        return required ? missing(path, key, err) : BB_OK;
    if (!cJSON_IsString(m) || !m->valuestring[0] || strlen(m->valuestring) > max_len)
        return bb_error_set(err, BB_ECONFIG, "%s.%s: must be a string of 1 to %zu bytes", path,
                            key, max_len);
    *out = m->valuestring;
    return BB_OK;
}

int bbsim_json_duration(const cJSON *obj, const char *key, const char *path, bool required,
                        bbsim_ns *out, bb_error *err)
{
    const cJSON *m = bbsim_json_get(obj, key);
    if (!m)
        return required ? missing(path, key, err) : BB_OK;
    if (!cJSON_IsString(m) || bbsim_parse_duration(m->valuestring, out) != BB_OK)
        return bb_error_set(err, BB_ECONFIG,
                            "%s.%s: must be a duration with its unit (\"250ms\", \"1.5s\"; "
                            "ns, us, ms, s, m, h), at most a year",
                            path, key);
    return BB_OK;
}

/* A non-negative decimal number and the unit after it. */
static bool number_unit(const char *text, double *v, const char **unit)
{
    char *end = NULL;
    if (!text || !(text[0] >= '0' && text[0] <= '9'))
        return false;
    *v = strtod(text, &end);
    if (end == text || !isfinite(*v))
        return false;
    *unit = end;
    return true;
}

int bbsim_parse_duration(const char *text, bbsim_ns *out)
{
    static const struct {
        const char *unit;
        double ns;
    } UNITS[] = {{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}, {"m", 60e9}, {"h", 3600e9}};
    double v;
    const char *unit;
    if (!number_unit(text, &v, &unit))
        return BB_EPARSE;
    for (size_t i = 0; i < sizeof UNITS / sizeof *UNITS; i++) {
        if (strcmp(unit, UNITS[i].unit) != 0)
            continue;
        double ns = v * UNITS[i].ns;
        if (ns > (double)BBSIM_MAX_DURATION_NS)
            return BB_ELIMIT;
        *out = (bbsim_ns)llround(ns);
        return BB_OK;
    }
    return BB_EPARSE;
}

int bbsim_parse_bandwidth(const char *text, double *out)
{
    static const struct {
        const char *unit;
        double bytes;
    } UNITS[] = {{"bit/s", 0.125}, {"kbit/s", 125},  {"Mbit/s", 125e3}, {"Gbit/s", 125e6},
                 {"B/s", 1},       {"kB/s", 1e3},    {"MB/s", 1e6},     {"GB/s", 1e9}};
    if (text && strcmp(text, "unlimited") == 0) {
        *out = 0;
        return BB_OK;
    }
    double v;
    const char *unit;
    if (!number_unit(text, &v, &unit))
        return BB_EPARSE;
    for (size_t i = 0; i < sizeof UNITS / sizeof *UNITS; i++)
        if (strcmp(unit, UNITS[i].unit) == 0) {
            *out = v * UNITS[i].bytes;
            /* one byte a second at the least; at most a terabyte a second */
            return *out >= 1 && *out <= 1e12 ? BB_OK : BB_ELIMIT;
        }
    return BB_EPARSE;
}
