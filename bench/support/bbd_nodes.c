/*
 * bbd_nodes.c — starting, stopping and talking to bbd processes for the
 * benchmarks (bbd_nodes.h).
 */
#include "bench/support/bbd_nodes.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/support/bench_util.h"

#define CTL_LINE_MAX (64u << 20) /* bbd's own cap on what waits for a watcher */

extern char **environ;

int bench_build_dir(char *build, char *self, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", self, cap - 1);
    if (n <= 0)
        return -1;
    self[n] = '\0';
    snprintf(build, cap, "%s", self);
    for (int i = 0; i < 2; i++) {
        char *slash = strrchr(build, '/');
        if (!slash)
            return -1;
        *slash = '\0';
    }
    return 0;
}

int bench_run(char *const argv[])
{
    pid_t pid;
    if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) != 0)
        return -1;
    int st;
    if (waitpid(pid, &st, 0) < 0)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = a ? fopen(to, "wb") : NULL;
    char buf[65536];
    size_t n;
    int rc = a && b ? 0 : -1;
    while (rc == 0 && (n = fread(buf, 1, sizeof buf, a)) > 0)
        rc = fwrite(buf, 1, n, b) == n ? 0 : -1;
    if (a)
        fclose(a);
    if (b && fclose(b) != 0)
        rc = -1;
    return rc;
}

int bench_compile_example(const char *build, const char *tmp, const char *name, char *artifact,
                          size_t cap)
{
    char bbc[PATH_MAX + 16], plugin[PATH_MAX + 64], plugdir[PATH_MAX + 16];
    char copy[PATH_MAX + 32], source[PATH_MAX];
    snprintf(bbc, sizeof bbc, "%s/bin/bbc", build);
    snprintf(plugin, sizeof plugin, "%s/tests/plugins/bbd_test.so", build);
    snprintf(plugdir, sizeof plugdir, "%s/plugins", tmp);
    snprintf(copy, sizeof copy, "%s/bbd_test.so", plugdir);
    snprintf(source, sizeof source, "testdata/%s.onnx", name);
    snprintf(artifact, cap, "%s/%s.onnx", tmp, name);
    mkdir(plugdir, 0700);
    char *compile[] = {bbc, "compile", source, "-o", artifact, "--plugin-path", plugdir, NULL};
    if (copy_file(plugin, copy) != 0 || bench_run(compile) != 0) {
        fprintf(stderr, "%s: error: cannot compile %s with %s (run from the repository root "
                        "after make)\n", program_invocation_short_name, source, plugin);
        return -1;
    }
    return 0;
}

/* Wait on the notify socket for READY=1; 0, or -1 after timeout_ms. */
static int await_ready(int ns, double timeout_ms)
{
    double deadline = bench_now_ns() + timeout_ms * 1e6;
    for (;;) {
        int left = (int)((deadline - bench_now_ns()) / 1e6);
        struct pollfd p = {.fd = ns, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, left) <= 0)
            return -1;
        char buf[512];
        ssize_t n = recv(ns, buf, sizeof buf - 1, 0);
        if (n <= 0)
            return -1;
        buf[n] = '\0';
        if (strstr(buf, "READY=1"))
            return 0;
    }
}

pid_t bench_spawn_ready(char *const argv[], const char *notify_path, const char *log_path,
                        double timeout_ms, double *ready_ms)
{
    unlink(notify_path);
    int ns = socket(AF_UNIX, SOCK_DGRAM, 0);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    snprintf(un.sun_path, sizeof un.sun_path, "%s", notify_path);
    if (ns < 0 || bind(ns, (struct sockaddr *)&un, sizeof un) != 0) {
        if (ns >= 0)
            close(ns);
        return -1;
    }
    const char *out = log_path ? log_path : "/dev/null";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_APPEND, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    setenv("NOTIFY_SOCKET", notify_path, 1);
    pid_t pid;
    double t0 = bench_now_ns();
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    unsetenv("NOTIFY_SOCKET");
    posix_spawn_file_actions_destroy(&fa);
    if (rc == 0 && await_ready(ns, timeout_ms) == 0) {
        if (ready_ms)
            *ready_ms = (bench_now_ns() - t0) / 1e6;
    } else if (rc == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        pid = -1;
    } else {
        pid = -1;
    }
    close(ns);
    unlink(notify_path);
    return pid;
}

int bench_stop(pid_t pid)
{
    int st;
    if (pid <= 0 || kill(pid, SIGTERM) != 0 || waitpid(pid, &st, 0) < 0)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- the control socket ----------------------------------------------------------- */

int bench_ctl_open(bench_ctl *c, const char *socket_path)
{
    memset(c, 0, sizeof *c);
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    snprintf(un.sun_path, sizeof un.sun_path, "%s", socket_path);
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&un, sizeof un) != 0) {
        if (c->fd >= 0)
            close(c->fd);
        c->fd = -1;
        return -1;
    }
    return 0;
}

void bench_ctl_close(bench_ctl *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c->buf);
    memset(c, 0, sizeof *c);
    c->fd = -1;
}

int bench_ctl_send(bench_ctl *c, const char *request)
{
    size_t n = strlen(request);
    for (size_t off = 0; off <= n;) {
        /* the request, then its newline */
        const char *p = off < n ? request + off : "\n";
        size_t len = off < n ? n - off : 1;
        ssize_t w = write(c->fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        off += (size_t)w;
    }
    return 0;
}

/* Drop the line handed out last time (its end is c->next). */
static void consume(bench_ctl *c)
{
    if (c->next > c->start) {
        c->start = c->next;
        c->lines--;
    }
}

/* One read() of what is there (after waiting up to timeout_ms for it);
 * 1, 0 on timeout, -1 on EOF or error. */
static int read_some(bench_ctl *c, int timeout_ms)
{
    if (c->start) { /* compact: the lines handed out are gone */
        memmove(c->buf, c->buf + c->start, c->len - c->start);
        c->len -= c->start;
        c->next -= c->start;
        c->start = 0;
    }
    if (c->cap - c->len < 65536) {
        size_t cap = c->cap ? c->cap * 2 : 1u << 20;
        char *b = cap <= CTL_LINE_MAX ? realloc(c->buf, cap) : NULL;
        if (!b)
            return -1;
        c->buf = b;
        c->cap = cap;
    }
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    int rc = poll(&p, 1, timeout_ms > 0 ? timeout_ms : 0);
    if (rc <= 0)
        return rc < 0 && errno != EINTR ? -1 : 0;
    ssize_t r = read(c->fd, c->buf + c->len, c->cap - c->len);
    if (r <= 0)
        return -1;
    for (ssize_t i = 0; i < r; i++)
        c->lines += c->buf[c->len + (size_t)i] == '\n';
    c->len += (size_t)r;
    return 1;
}

size_t bench_ctl_fill(bench_ctl *c)
{
    consume(c);
    int rc;
    while ((rc = read_some(c, 0)) > 0)
        ;
    return rc < 0 ? (size_t)-1 : c->lines;
}

const char *bench_ctl_line(bench_ctl *c, int timeout_ms)
{
    consume(c);
    double deadline = bench_now_ns() + timeout_ms * 1e6;
    for (;;) {
        char *nl = c->lines ? memchr(c->buf + c->start, '\n', c->len - c->start) : NULL;
        if (nl) {
            *nl = '\0';
            c->next = (size_t)(nl - c->buf) + 1;
            return c->buf + c->start;
        }
        if (read_some(c, (int)((deadline - bench_now_ns()) / 1e6)) <= 0)
            return NULL;
    }
}

cJSON *bench_ctl_request(bench_ctl *c, const char *request, int timeout_ms)
{
    if (bench_ctl_send(c, request) != 0)
        return NULL;
    const char *line = bench_ctl_line(c, timeout_ms);
    cJSON *j = line ? cJSON_Parse(line) : NULL;
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "ok"))) {
        fprintf(stderr, "%s: control request failed: %s\n", program_invocation_short_name,
                line ? line : "no reply");
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* ---- nodes ------------------------------------------------------------------------- */

int bench_node_start(bench_node *n, const char *dir, const bench_node_spec *spec)
{
    snprintf(n->dir, sizeof n->dir, "%s", dir);
    snprintf(n->sock, sizeof n->sock, "%s/control.sock", n->dir);
    snprintf(n->log, sizeof n->log, "%s.log", n->dir);
    char notify[PATH_MAX + 8];
    snprintf(notify, sizeof notify, "%s.notify", n->dir);
    char *argv[24] = {(char *)spec->bbd, "--state-dir", n->dir, "--control", n->sock,
                      "--plugin-path", (char *)spec->plugdir, "--targets", (char *)spec->target,
                      "--listen", "/ip4/127.0.0.1/tcp/0", "--log-level", "warn", "--fresh"};
    int k = 14;
    if (spec->config) {
        argv[k++] = "--config";
        argv[k++] = (char *)spec->config;
    }
    if (spec->peer) {
        argv[k++] = "--peer";
        argv[k++] = (char *)spec->peer;
    }
    argv[k++] = (char *)spec->artifact;
    argv[k] = NULL;
    n->pid = bench_spawn_ready(argv, notify, n->log, spec->ready_timeout_ms, NULL);
    return n->pid < 0 ? -1 : 0;
}

int bench_node_peer(const bench_node *n, char *peer, size_t cap)
{
    bench_ctl c;
    if (bench_ctl_open(&c, n->sock) != 0)
        return -1;
    cJSON *st = bench_ctl_request(&c, "{\"cmd\":\"status\"}", 10000);
    bench_ctl_close(&c);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(st, "peer_id");
    const cJSON *la = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(st, "listen"), 0);
    int rc = cJSON_IsString(id) && cJSON_IsString(la) ? 0 : -1;
    if (rc == 0 && (size_t)snprintf(peer, cap, "%s=%s", id->valuestring, la->valuestring) >= cap)
        rc = -1;
    cJSON_Delete(st);
    return rc;
}

_Noreturn void bench_node_fail(const bench_node *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: error: ", program_invocation_short_name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    if (n) {
        char cmd[PATH_MAX + 32];
        snprintf(cmd, sizeof cmd, "tail -n 20 %s >&2", n->log);
        if (system(cmd) != 0)
            fprintf(stderr, "(no log at %s)\n", n->log);
    }
    exit(1);
}

double bench_proc_mb(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    size_t flen = strlen(field);
    long kb = -1;
    while (f && kb < 0 && fgets(line, sizeof line, f))
        if (strncmp(line, field, flen) == 0 && line[flen] == ':' &&
            sscanf(line + flen + 1, "%ld", &kb) != 1)
            kb = -1;
    if (f)
        fclose(f);
    return kb < 0 ? -1 : kb / 1024.0;
}

double bench_proc_cpu_s(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long ut = 0, st = 0;
    /* after ")": state (3), then fields 4..13, utime (14), stime (15) */
    if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

int bench_remove_tree(const char *dir)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) == 0)
        return 0;
    fprintf(stderr, "%s: cannot remove %s\n", program_invocation_short_name, dir);
    return -1;
}
