/*
 * format.c — human-readable renderings of control replies (see format.h).
 */
#include "format.h"

#include <math.h>
#include <string.h>

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static void print_number(FILE *out, const cJSON *x)
{
    if (cJSON_IsNumber(x)) {
        double d = x->valuedouble;
        if (d == floor(d) && fabs(d) < 1e15)
            fprintf(out, "%.0f", d);
        else
            fprintf(out, "%.7g", d);
    } else if (cJSON_IsBool(x)) {
        fputs(cJSON_IsTrue(x) ? "true" : "false", out);
    } else if (cJSON_IsString(x)) {
        fputs(x->valuestring, out);
    } else {
        fputs("?", out);
    }
}

void bbctl_print_value(FILE *out, const cJSON *v, int max_elems)
{
    const char *type = str(v, "type");
    if (!type) {
        fputs("?", out);
        return;
    }
    if (!strcmp(type, "tensor")) {
        fprintf(out, "%s[", str(v, "dtype") ? str(v, "dtype") : "?");
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(v, "shape"), *x;
        int i = 0;
        cJSON_ArrayForEach(x, shape) {
            fputs(i++ ? "," : "", out);
            print_number(out, x);
        }
        fputs("]", out);
        const cJSON *data = cJSON_GetObjectItemCaseSensitive(v, "data");
        if (data) {
            i = 0;
            cJSON_ArrayForEach(x, data) {
                if (i++ == max_elems) {
                    fprintf(out, " ... (%d values)", cJSON_GetArraySize(data));
                    break;
                }
                fputs(" ", out);
                print_number(out, x);
            }
        } else if (str(v, "tensor_proto")) {
            fprintf(out, " (TensorProto, %zu base64 characters)", strlen(str(v, "tensor_proto")));
        }
        return;
    }
    fputs(type, out);
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(v, "items");
    if (cJSON_IsArray(items)) {
        fputs("(", out);
        const cJSON *x;
        int i = 0;
        cJSON_ArrayForEach(x, items) {
            fputs(i++ ? ", " : "", out);
            if (str(x, "peer") && cJSON_GetObjectItemCaseSensitive(x, "value")) {
                fprintf(out, "%s: ", str(x, "peer"));
                bbctl_print_value(out, cJSON_GetObjectItemCaseSensitive(x, "value"), max_elems);
            } else {
                bbctl_print_value(out, x, max_elems);
            }
        }
        fputs(")", out);
        return;
    }
    static const char *const FIELDS[] = {"value", "peer", "addr", "base64"};
    for (size_t i = 0; i < sizeof FIELDS / sizeof *FIELDS; i++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(v, FIELDS[i]);
        if (f) {
            fputs(" ", out);
            print_number(out, f);
            return;
        }
    }
}

static void row(FILE *out, const char *key, const char *fmt_value)
{
    fprintf(out, "%-12s %s\n", key, fmt_value ? fmt_value : "-");
}

static void join(const cJSON *arr, char *buf, size_t cap)
{
    size_t k = 0;
    buf[0] = '\0';
    const cJSON *x;
    cJSON_ArrayForEach(x, arr) {
        if (cJSON_IsString(x) && k + 1 < cap)
            k += (size_t)snprintf(buf + k, cap - k, "%s%s", k ? " " : "", x->valuestring);
    }
}

void bbctl_print_status(FILE *out, const cJSON *r)
{
    char buf[2048];
    row(out, "peer", str(r, "peer_id"));
    join(cJSON_GetObjectItemCaseSensitive(r, "targets"), buf, sizeof buf);
    row(out, "targets", buf);
    row(out, "artifact", str(r, "artifact"));
    snprintf(buf, sizeof buf, "%.0f%s", num(r, "incarnation"),
             cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "restored")) ? " (restored)" : "");
    row(out, "incarnation", buf);
    row(out, "bootstrap", str(r, "bootstrap"));
    join(cJSON_GetObjectItemCaseSensitive(r, "listen"), buf, sizeof buf);
    row(out, "listen", buf[0] ? buf : "-");
    row(out, "control", str(r, "control"));
    if (str(r, "metrics"))
        row(out, "metrics", str(r, "metrics"));
    row(out, "state dir", str(r, "state_dir"));
    snprintf(buf, sizeof buf, "%.1f s (pid %.0f)", num(r, "uptime_ms") / 1000, num(r, "pid"));
    row(out, "uptime", buf);
    snprintf(buf, sizeof buf, "%.0f live, %.0f waiting on async work",
             num(r, "live_executions"), num(r, "pending_async"));
    row(out, "executions", buf);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(r, "transport");
    snprintf(buf, sizeof buf, "%.0f known, %.0f connection(s)", num(r, "known_peers"),
             num(t, "connections_open"));
    row(out, "peers", buf);
    snprintf(buf, sizeof buf, "in %.0f envelopes (%.0f bytes), out %.0f envelopes (%.0f bytes)",
             num(t, "envelopes_in"), num(t, "bytes_in"), num(t, "envelopes_out"),
             num(t, "bytes_out"));
    row(out, "transport", buf);
    fputs("counters:\n", out);
    const cJSON *x;
    cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "counters")) {
        fprintf(out, "  %-30s ", x->string);
        print_number(out, x);
        fputs("\n", out);
    }
    const cJSON *conns = cJSON_GetObjectItemCaseSensitive(r, "connections");
    if (cJSON_GetArraySize(conns) > 0) {
        fprintf(out, "connections:\n  %-54s %-10s %10s %10s\n", "PEER", "STATE", "IN", "OUT");
        cJSON_ArrayForEach(x, conns) {
            fprintf(out, "  %-54s %-10s %10.0f %10.0f\n", str(x, "peer") ? str(x, "peer") : "?",
                    str(x, "state") ? str(x, "state") : "?", num(x, "envelopes_in"),
                    num(x, "envelopes_out"));
        }
    }
}

void bbctl_print_peers(FILE *out, const cJSON *r)
{
    const cJSON *peers = cJSON_GetObjectItemCaseSensitive(r, "peers"), *p;
    fprintf(out, "%-54s %-9s %-5s %8s %10s  %s\n", "PEER", "CONNECTED", "DOWN", "FAILURES",
            "BACKOFF", "ADDRESSES");
    cJSON_ArrayForEach(p, peers) {
        char addrs[1024], backoff[32];
        join(cJSON_GetObjectItemCaseSensitive(p, "addrs"), addrs, sizeof addrs);
        snprintf(backoff, sizeof backoff, "%.0f ms", num(p, "backoff_ms"));
        fprintf(out, "%-54s %-9s %-5s %8.0f %10s  %s\n", str(p, "peer") ? str(p, "peer") : "?",
                cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "connected")) ? "yes" : "no",
                cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "down")) ? "yes" : "no",
                num(p, "failures"), backoff, addrs[0] ? addrs : "-");
    }
}

void bbctl_print_event(FILE *out, const cJSON *ev)
{
    fputs(str(ev, "event") ? str(ev, "event") : "?", out);
    const cJSON *x;
    cJSON_ArrayForEach(x, ev) {
        if (!strcmp(x->string, "event") || !strcmp(x->string, "value") || cJSON_IsObject(x) ||
            cJSON_IsArray(x)) /* nested fields (an AppEvent's transport totals): --json */
            continue;
        fprintf(out, " %s=", x->string);
        if (cJSON_IsString(x) && strpbrk(x->valuestring, " \t\""))
            fprintf(out, "\"%s\"", x->valuestring);
        else
            print_number(out, x);
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(ev, "value");
    if (v) {
        fputs(" value=", out);
        bbctl_print_value(out, v, 16);
    }
    fputs("\n", out);
    fflush(out);
}
