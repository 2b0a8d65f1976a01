/*
 * main.c — bbctl, the client of a running bbd (bbctl(1)): builds one
 * control request from the command line, prints the reply (human-readable,
 * or as it came with --json) and exits 0, or 1 with the daemon's error, or
 * 2 on bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>
#include <sodium.h>

#include "bb/value.h"
#include "bb/value_json.h"
#include "client.h"
#include "format.h"

#define BBCTL_VERSION "0.9.0"
#define MAX_FILE_BYTES ((size_t)256 << 20)
#define DEFAULT_TIMEOUT_S 30

static const char USAGE[] =
    "usage: bbctl [--socket PATH | --state-dir DIR] [--json] [--timeout SECONDS] COMMAND ...\n"
    "\n"
    "commands:\n"
    "  status                          identity, targets, bootstrap, counters, connections\n"
    "  peers                           known peers with connection, health and backoff\n"
    "  peers allow|deny|clear PEERID...  admit only allowed peers / never admit a peer /\n"
    "                                  take peers off both lists (kept in the snapshot)\n"
    "  peers list                      the allow and deny lists\n"
    "  invoke TARGET [NAME=VALUE]... [--wait TOPIC [--output FILE]]\n"
    "                                  run TARGET once with named inputs (and wait for\n"
    "                                  the first AppEvent TOPIC; write its value to FILE)\n"
    "  event TARGET NAME=VALUE [--wait TOPIC [--output FILE]]\n"
    "                                  push one value into an input of TARGET (only its\n"
    "                                  consumers run; --wait, --output as for invoke)\n"
    "  bootstrap --all | --module NAME [NAME=VALUE]... | --slot NAME\n"
    "                                  run bootstrap (every option repeatable)\n"
    "  snapshot                        write a snapshot to the state directory now\n"
    "  watch [--kind KIND]... [--topic TOPIC]... [--count N]\n"
    "                                  stream events (kinds: app failure peer bootstrap infra)\n"
    "  log-level LEVEL                 change the daemon's log level\n"
    "\n"
    "VALUE: JSON ([1,2,3], {\"dtype\":\"int64\",\"shape\":[2],\"data\":[1,2]}, null, ...),\n"
    "@FILE.pb (a TensorProto) or @FILE.json. See bbctl(1).\n";

typedef struct opts {
    const char *socket, *state_dir;
    int json;
    double timeout_s;
} opts;

static int usage(const char *fmt, const char *what)
{
    fprintf(stderr, "bbctl: error: ");
    fprintf(stderr, fmt, what);
    fprintf(stderr, "\n%s", USAGE);
    return 2;
}

static int fail(const char *fmt, const char *what)
{
    fprintf(stderr, "bbctl: error: ");
    fprintf(stderr, fmt, what);
    fputs("\n", stderr);
    return 1;
}

/* The socket bbd uses by default (bbd(8) FILES): $STATE_DIRECTORY (under
 * systemd), /var/lib/bytesandbrains for root, else the XDG state dir. */
static int default_socket(const opts *o, char *out, size_t cap)
{
    const char *env = getenv("BBCTL_SOCKET");
    if (o->socket)
        return snprintf(out, cap, "%s", o->socket) < (int)cap ? 0 : -1;
    if (o->state_dir)
        return snprintf(out, cap, "%s/control.sock", o->state_dir) < (int)cap ? 0 : -1;
    if (env && *env)
        return snprintf(out, cap, "%s", env) < (int)cap ? 0 : -1;
    const char *sd = getenv("STATE_DIRECTORY"), *xdg = getenv("XDG_STATE_HOME"),
               *home = getenv("HOME");
    int n;
    if (sd && *sd)
        n = snprintf(out, cap, "%.*s/control.sock", (int)strcspn(sd, ":"), sd);
    else if (geteuid() == 0)
        n = snprintf(out, cap, "/var/lib/bytesandbrains/control.sock");
    else if (xdg && xdg[0] == '/')
        n = snprintf(out, cap, "%s/bytesandbrains/control.sock", xdg);
    else if (home && home[0] == '/')
        n = snprintf(out, cap, "%s/.local/state/bytesandbrains/control.sock", home);
    else
        return -1;
    return n < (int)cap ? 0 : -1;
}

/* ---- values from the command line ----------------------------------------------- */

static int read_file(const char *path, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f)
        return -1;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) ||
        (uint64_t)st.st_size > MAX_FILE_BYTES) {
        fclose(f);
        errno = EFBIG;
        return -1;
    }
    *len = (size_t)st.st_size;
    *out = malloc(*len + 1);
    if (!*out || fread(*out, 1, *len, f) != *len) {
        free(*out);
        fclose(f);
        return -1;
    }
    (*out)[*len] = '\0';
    fclose(f);
    return 0;
}

/* NAME=VALUE into obj[NAME]. Returns 0, or prints the problem and returns 1. */
static int add_input(cJSON *obj, const char *arg)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg) {
        fprintf(stderr, "bbctl: error: input '%s' is not NAME=VALUE\n", arg);
        return 1;
    }
    char name[256];
    size_t nl = (size_t)(eq - arg);
    if (nl >= sizeof name) {
        fprintf(stderr, "bbctl: error: input name in '%.64s...' is too long\n", arg);
        return 1;
    }
    memcpy(name, arg, nl);
    name[nl] = '\0';
    const char *v = eq + 1;
    cJSON *value = NULL;
    if (v[0] == '@') {
        char *data;
        size_t len;
        if (read_file(v + 1, &data, &len) != 0) {
            fprintf(stderr, "bbctl: error: input %s: cannot read %s: %s\n", name, v + 1,
                    strerror(errno));
            return 1;
        }
        size_t pl = strlen(v);
        if (pl > 5 && strcmp(v + pl - 5, ".json") == 0) {
            value = cJSON_ParseWithLength(data, len);
            if (!value)
                fprintf(stderr, "bbctl: error: input %s: %s is not valid JSON\n", name, v + 1);
        } else { /* TensorProto bytes */
            size_t bl = sodium_base64_ENCODED_LEN(len, sodium_base64_VARIANT_ORIGINAL);
            char *b64 = malloc(bl);
            if (b64) {
                sodium_bin2base64(b64, bl, (const unsigned char *)data, len,
                                  sodium_base64_VARIANT_ORIGINAL);
                value = cJSON_CreateObject();
                if (value)
                    cJSON_AddStringToObject(value, "tensor_proto", b64);
                free(b64);
            }
        }
        free(data);
    } else {
        value = cJSON_Parse(v);
        if (!value)
            fprintf(stderr, "bbctl: error: input %s: '%s' is not JSON (write @FILE for a file)\n",
                    name, v);
    }
    if (!value)
        return 1;
    cJSON_AddItemToObject(obj, name, value);
    return 0;
}

/* ---- request / reply ---------------------------------------------------------------- */

static const char *error_of(const cJSON *r)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
    return cJSON_IsString(e) ? e->valuestring : "the daemon refused the request";
}

static void print_json(const cJSON *r)
{
    char *t = cJSON_PrintUnformatted(r);
    if (t)
        puts(t);
    cJSON_free(t);
    fflush(stdout);
}

/* Send req, read one reply. Returns 0 with *reply, or the exit code. */
static int roundtrip(const opts *o, bbctl_conn *c, cJSON *req, int timeout_ms, cJSON **reply)
{
    char path[PATH_MAX];
    *reply = NULL;
    if (default_socket(o, path, sizeof path) != 0)
        return fail("%s", "no control socket: give --socket PATH or --state-dir DIR");
    if (bbctl_connect(c, path) != 0)
        return fail("%s", c->err);
    if (bbctl_send(c, req) != 0 || bbctl_recv(c, timeout_ms, reply, NULL) != 0)
        return fail("%s", c->err);
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(*reply, "ok"))) {
        if (o->json)
            print_json(*reply);
        fprintf(stderr, "bbctl: error: %s\n", error_of(*reply));
        cJSON_Delete(*reply);
        *reply = NULL;
        return 1;
    }
    return 0;
}

static int timeout_ms(const opts *o) { return (int)(o->timeout_s * 1000); }

/* ---- commands -------------------------------------------------------------------------- */

static int simple(const opts *o, cJSON *req, void (*print)(FILE *, const cJSON *))
{
    bbctl_conn c;
    cJSON *r;
    int rc = roundtrip(o, &c, req, timeout_ms(o), &r);
    if (rc == 0) {
        if (o->json || !print)
            print_json(r);
        else
            print(stdout, r);
    }
    cJSON_Delete(r);
    bbctl_close(&c);
    return rc;
}

static void print_snapshot(FILE *out, const cJSON *r)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(r, "path");
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(r, "bytes");
    fprintf(out, "snapshot written: %s (%.0f bytes)\n", cJSON_IsString(p) ? p->valuestring : "?",
            cJSON_IsNumber(b) ? b->valuedouble : 0);
}

static void print_invoke(FILE *out, const cJSON *r)
{
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(r, "event");
    if (ev)
        bbctl_print_event(out, ev);
    else
        fprintf(out, "exec %.0f\n",
                cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(r, "exec_id")));
}

static void print_level(FILE *out, const cJSON *r)
{
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(r, "level");
    fprintf(out, "log level %s\n", cJSON_IsString(l) ? l->valuestring : "?");
}

static void print_bootstrap(FILE *out, const cJSON *r)
{
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(r, "bootstrap");
    fprintf(out, "bootstrap staged (status: %s)\n", cJSON_IsString(b) ? b->valuestring : "?");
}

/* The value of the awaited event into path: Bytes as they are, a tensor
 * as a TensorProto (what @FILE.pb inputs read); anything else is refused. */
static int write_output(const char *path, const cJSON *reply)
{
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(reply, "event");
    const cJSON *value = ev ? cJSON_GetObjectItemCaseSensitive(ev, "value") : NULL;
    bb_json_input in;
    bb_error err = {0};
    if (!value || bb_json_input_parse("the event's value", value, &in, &err))
        return fail("--output: %s", value ? err.msg : "the reply carries no event value");
    const bb_value *v = in.value;
    uint8_t *enc = NULL;
    const uint8_t *data = NULL;
    size_t len = 0;
    int rc = 0;
    if (v && v->type->kind == BB_VK_BYTES) {
        data = v->u.bytes.data;
        len = v->u.bytes.len;
    } else if (v && v->type->kind == BB_VK_TENSOR) {
        if (bb_value_encode(v, &enc, &len, &err))
            rc = fail("--output: %s", err.msg);
        data = enc;
    } else {
        rc = fail("--output: the event's value is a %s; it writes Bytes and tensors",
                  v ? v->type->name : "wire payload");
    }
    FILE *f = rc ? NULL : fopen(path, "wb");
    if (!rc) {
        bool written = f && fwrite(data, 1, len, f) == len;
        if ((f && fclose(f) != 0) || !written)
            rc = fail("--output %s: cannot write it", path);
    }
    if (!rc)
        fprintf(stderr, "bbctl: wrote %zu bytes to %s\n", len, path);
    free(enc);
    bb_json_input_free(&in);
    return rc;
}

/* invoke and event: TARGET, NAME=VALUE inputs, --wait TOPIC and
 * --output FILE in any order. */
static int cmd_run(const opts *o, int argc, char **argv, cJSON *req, bool event)
{
    const char *cmd = event ? "event" : "invoke", *wait = NULL, *output = NULL, *target = NULL;
    cJSON *in = cJSON_CreateObject();
    int n_in = 0, rc = 0;
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i];
        bool w = !strcmp(a, "--wait") || !strcmp(a, "-w");
        bool out = !strcmp(a, "--output") || !strcmp(a, "-o");
        if ((w || out) && i + 1 >= argc)
            rc = usage("%s needs a value", a);
        else if (w)
            wait = argv[++i];
        else if (out)
            output = argv[++i];
        else if (a[0] == '-' && !strchr(a, '='))
            rc = usage("bad option '%s'", a);
        else if (!target)
            target = a;
        else if (!(rc = add_input(in, a)))
            n_in++;
    }
    if (!rc && !target)
        rc = usage("%s: TARGET is required", cmd);
    else if (!rc && event && n_in != 1)
        rc = usage("%s", "event: give TARGET NAME=VALUE");
    else if (!rc && output && !wait)
        rc = usage("%s: --output writes the awaited event: give --wait TOPIC", cmd);
    if (rc) {
        cJSON_Delete(in);
        return rc;
    }
    cJSON_AddStringToObject(req, "target", target);
    if (event) {
        cJSON *v = in->child;
        cJSON_AddStringToObject(req, "input", v->string);
        cJSON_AddItemToObject(req, "value", cJSON_DetachItemViaPointer(in, v));
        cJSON_Delete(in);
    } else {
        cJSON_AddItemToObject(req, "inputs", in);
    }
    if (wait) {
        cJSON_AddStringToObject(req, "wait", wait);
        cJSON_AddNumberToObject(req, "timeout_ms", timeout_ms(o));
    }
    /* the daemon answers a wait itself at the timeout: give it a moment more */
    bbctl_conn c;
    cJSON *r;
    rc = roundtrip(o, &c, req, timeout_ms(o) + (wait ? 5000 : 0), &r);
    if (rc == 0 && output)
        rc = write_output(output, r);
    else if (rc == 0 && o->json)
        print_json(r);
    else if (rc == 0)
        print_invoke(stdout, r);
    cJSON_Delete(r);
    bbctl_close(&c);
    return rc;
}

static int cmd_bootstrap(const opts *o, int argc, char **argv, cJSON *req)
{
    cJSON *modules = cJSON_CreateArray(), *slots = cJSON_CreateArray(),
          *requests = cJSON_CreateArray();
    cJSON *cur = NULL; /* inputs of the last --module */
    bool all = false, any_inputs = false;
    int rc = 0;
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--all")) {
            all = true;
        } else if (!strcmp(a, "--module") || !strcmp(a, "--slot")) {
            if (i + 1 >= argc) {
                rc = usage("bootstrap: %s needs a NAME", a);
                break;
            }
            const char *name = argv[++i];
            if (a[2] == 's') {
                cJSON_AddItemToArray(slots, cJSON_CreateString(name));
                cur = NULL;
            } else {
                cJSON_AddItemToArray(modules, cJSON_CreateString(name));
                cJSON *rq = cJSON_CreateObject();
                cJSON_AddStringToObject(rq, "target", name);
                cur = cJSON_AddObjectToObject(rq, "inputs");
                cJSON_AddItemToArray(requests, rq);
            }
        } else if (strchr(a, '=') && cur) {
            rc = add_input(cur, a);
            any_inputs = true;
        } else {
            rc = usage("bootstrap: unexpected '%s' (NAME=VALUE inputs follow a --module)", a);
        }
    }
    int kinds = all + (cJSON_GetArraySize(modules) > 0) + (cJSON_GetArraySize(slots) > 0);
    if (!rc && kinds != 1)
        rc = usage("%s", "bootstrap: give --all, --module NAME... or --slot NAME...");
    if (!rc) {
        if (all)
            cJSON_AddTrueToObject(req, "all");
        else if (cJSON_GetArraySize(slots))
            cJSON_AddItemToObject(req, "slots", slots), slots = NULL;
        else if (any_inputs)
            cJSON_AddItemToObject(req, "requests", requests), requests = NULL;
        else
            cJSON_AddItemToObject(req, "modules", modules), modules = NULL;
        rc = simple(o, req, print_bootstrap);
    }
    cJSON_Delete(modules);
    cJSON_Delete(slots);
    cJSON_Delete(requests);
    return rc;
}

static int cmd_watch(const opts *o, int argc, char **argv, cJSON *req)
{
    static const struct option lo[] = {{"kind", required_argument, NULL, 'k'},
                                       {"topic", required_argument, NULL, 't'},
                                       {"count", required_argument, NULL, 'n'},
                                       {NULL, 0, NULL, 0}};
    cJSON *kinds = NULL, *topics = NULL;
    long count = -1;
    int ch;
    while ((ch = getopt_long(argc, argv, "+:", lo, NULL)) != -1) {
        if (ch == 'k') {
            if (!kinds)
                kinds = cJSON_AddArrayToObject(req, "kinds");
            cJSON_AddItemToArray(kinds, cJSON_CreateString(optarg));
        } else if (ch == 't') {
            if (!topics)
                topics = cJSON_AddArrayToObject(req, "topics");
            cJSON_AddItemToArray(topics, cJSON_CreateString(optarg));
        } else if (ch == 'n') {
            char *end;
            count = strtol(optarg, &end, 10);
            if (*end || count < 1)
                return usage("watch: --count '%s' is not a positive number", optarg);
        } else {
            return usage("watch: bad option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc)
        return usage("watch: unexpected argument '%s'", argv[optind]);
    bbctl_conn c;
    cJSON *r;
    int rc = roundtrip(o, &c, req, DEFAULT_TIMEOUT_S * 1000, &r);
    cJSON_Delete(r);
    /* stream until --count events, --timeout, or the daemon goes away */
    for (long seen = 0; rc == 0 && (count < 0 || seen < count); seen++) {
        cJSON *ev;
        int timed_out = 0;
        if (bbctl_recv(&c, o->timeout_s > 0 ? timeout_ms(o) : -1, &ev, &timed_out) != 0) {
            rc = fail("%s", timed_out ? "timed out waiting for events" : c.err);
            break;
        }
        if (o->json)
            print_json(ev);
        else
            bbctl_print_event(stdout, ev);
        cJSON_Delete(ev);
    }
    bbctl_close(&c);
    return rc;
}

static void print_access(FILE *out, const cJSON *r)
{
    static const char *const LISTS[] = {"allow", "deny"};
    for (size_t i = 0; i < 2; i++) {
        const cJSON *l = cJSON_GetObjectItemCaseSensitive(r, LISTS[i]), *p;
        fprintf(out, "%s (%d):\n", LISTS[i], cJSON_GetArraySize(l));
        cJSON_ArrayForEach(p, l) {
            fprintf(out, "  %s\n", cJSON_IsString(p) ? p->valuestring : "?");
        }
    }
    const cJSON *active = cJSON_GetObjectItemCaseSensitive(r, "allowlist_active");
    fprintf(out, "%s; %.0f handshakes refused\n",
            cJSON_IsTrue(active) ? "only peers on the allow list are admitted"
                                 : "every peer not denied is admitted",
            cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(r, "refused")));
}

/* peers [allow|deny|clear PEERID... | list] */
static int cmd_peers(const opts *o, int argc, char **argv, cJSON *req)
{
    if (argc == 1) {
        cJSON_AddStringToObject(req, "cmd", "peers");
        return simple(o, req, bbctl_print_peers);
    }
    const char *action = argv[1];
    bool list = !strcmp(action, "list");
    if (!list && strcmp(action, "allow") && strcmp(action, "deny") && strcmp(action, "clear"))
        return usage("peers: unknown action '%s' (allow, deny, clear, list)", action);
    if (list != (argc == 2))
        return usage("peers %s: give PeerIds after allow, deny and clear, none after list",
                     action);
    cJSON_AddStringToObject(req, "cmd", "access");
    cJSON_AddStringToObject(req, "action", action);
    cJSON *ids = list ? NULL : cJSON_AddArrayToObject(req, "peers");
    for (int i = 2; ids && i < argc; i++)
        cJSON_AddItemToArray(ids, cJSON_CreateString(argv[i]));
    return simple(o, req, print_access);
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {{"socket", required_argument, NULL, 'S'},
                                       {"state-dir", required_argument, NULL, 's'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"timeout", required_argument, NULL, 'T'},
                                       {"help", no_argument, NULL, 'h'},
                                       {"version", no_argument, NULL, 'V'},
                                       {NULL, 0, NULL, 0}};
    opts o = {.timeout_s = -1};
    int ch;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "+:S:s:jT:hV", lo, NULL)) != -1) {
        switch (ch) {
        case 'S': o.socket = optarg; break;
        case 's': o.state_dir = optarg; break;
        case 'j': o.json = 1; break;
        case 'T': {
            char *end;
            o.timeout_s = strtod(optarg, &end);
            if (*end || !(o.timeout_s > 0) || o.timeout_s > 86400)
                return usage("--timeout '%s' is not a number of seconds (up to 86400)", optarg);
            break;
        }
        case 'h': fputs(USAGE, stdout); return 0;
        case 'V': printf("bbctl (BytesAndBrains) %s\n", BBCTL_VERSION); return 0;
        case ':': return usage("option '%s' needs an argument", argv[optind - 1]);
        default: return usage("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return usage("%s", "no command given");
    const char *cmd = argv[optind];
    int sub_argc = argc - optind;
    char **sub_argv = argv + optind;
    bool watch = !strcmp(cmd, "watch");
    if (o.timeout_s < 0 && !watch)
        o.timeout_s = DEFAULT_TIMEOUT_S;
    cJSON *req = cJSON_CreateObject();
    if (!req)
        return fail("%s", "out of memory");
    optind = 1; /* subcommands parse their own options */
    int rc;
    if (!strcmp(cmd, "status") || !strcmp(cmd, "snapshot")) {
        if (sub_argc != 1)
            rc = usage("%s takes no arguments", cmd);
        else {
            cJSON_AddStringToObject(req, "cmd", cmd);
            rc = simple(&o, req, !strcmp(cmd, "status") ? bbctl_print_status : print_snapshot);
        }
    } else if (!strcmp(cmd, "peers")) {
        rc = cmd_peers(&o, sub_argc, sub_argv, req);
    } else if (!strcmp(cmd, "invoke")) {
        cJSON_AddStringToObject(req, "cmd", "invoke");
        rc = cmd_run(&o, sub_argc, sub_argv, req, false);
    } else if (!strcmp(cmd, "event")) {
        cJSON_AddStringToObject(req, "cmd", "event");
        rc = cmd_run(&o, sub_argc, sub_argv, req, true);
    } else if (!strcmp(cmd, "bootstrap")) {
        cJSON_AddStringToObject(req, "cmd", "bootstrap");
        rc = cmd_bootstrap(&o, sub_argc, sub_argv, req);
    } else if (watch) {
        cJSON_AddStringToObject(req, "cmd", "watch");
        rc = cmd_watch(&o, sub_argc, sub_argv, req);
    } else if (!strcmp(cmd, "log-level")) {
        if (sub_argc != 2)
            rc = usage("%s", "log-level: give one LEVEL (error, warn, info, debug)");
        else {
            cJSON_AddStringToObject(req, "cmd", "log_level");
            cJSON_AddStringToObject(req, "level", sub_argv[1]);
            rc = simple(&o, req, print_level);
        }
    } else {
        rc = usage("unknown command '%s'", cmd);
    }
    cJSON_Delete(req);
    return rc;
}
