/*
 * bench_bbd.c — what a bbd node costs when it does nothing: the time from
 * exec to READY=1 (the sd_notify message bbd sends once it listens and has
 * installed its targets) and its resident memory once idle, next to a
 * baseline measured in the same run: this program re-executed as a minimal
 * daemon linking the same libraries (libbbir, libuv, libsodium, cJSON,
 * protobuf-c, ...) that opens a uv loop, a TCP listener and a Unix socket,
 * then sends READY=1.
 *
 * The node runs the Ponger target of examples/ping_pong (compiled with bbc
 * against the bbd_test plugin), listening on TCP and UDP, with its control
 * socket, and scans the build's plugin directory as a deployed node would.
 * Each run uses --fresh. Figures are medians of RUNS runs.
 *
 * Targets: start to ready < 50 ms, idle RSS < 8 MB.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>
#include <sodium.h>
#include <uv.h>

#include "bb/status.h"

#define RUNS 15

extern char **environ;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- the baseline child: same libraries, a loop, a listener, READY=1 ---- */

static void on_sig(uv_signal_t *h, int sig)
{
    (void)sig;
    uv_stop(h->loop);
}

static int baseline_child(const char *sock_path)
{
    uv_loop_t loop;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
    uv_signal_t sig;
    struct sockaddr_in sa;
    uv_loop_init(&loop);
    uv_tcp_init(&loop, &tcp);
    uv_ip4_addr("127.0.0.1", 0, &sa);
    uv_tcp_bind(&tcp, (struct sockaddr *)&sa, 0);
    uv_pipe_init(&loop, &pipe, 0);
    uv_pipe_bind(&pipe, sock_path);
    uv_signal_init(&loop, &sig);
    uv_signal_start(&sig, on_sig, SIGTERM);
    if (sodium_init() < 0)
        return 1;
    cJSON_Delete(cJSON_Parse("{}"));
    const char *ns = getenv("NOTIFY_SOCKET");
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    snprintf(un.sun_path, sizeof un.sun_path, "%s", ns ? ns : "");
    sendto(fd, "READY=1", 7, 0, (struct sockaddr *)&un, sizeof un);
    close(fd);
    uv_run(&loop, UV_RUN_DEFAULT);
    unlink(sock_path);
    return bb_status_name(BB_OK)[0] == '\0'; /* uses libbbir, like bbd */
}

/* ---- measuring a child ----------------------------------------------------- */

static long rss_kb(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

/* Spawn argv with NOTIFY_SOCKET, wait for READY=1: *ready_ms and *rss.
 * Returns 0, or -1 when the child died or timed out. */
static int measure(char *const argv[], const char *notify_path, double *ready_ms, long *rss)
{
    unlink(notify_path);
    int ns = socket(AF_UNIX, SOCK_DGRAM, 0);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    snprintf(un.sun_path, sizeof un.sun_path, "%s", notify_path);
    if (bind(ns, (struct sockaddr *)&un, sizeof un) != 0)
        return -1;
    setenv("NOTIFY_SOCKET", notify_path, 1);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    double t0 = now_ms();
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    unsetenv("NOTIFY_SOCKET");
    if (rc != 0) {
        close(ns);
        return -1;
    }
    int ok = -1;
    for (;;) {
        struct pollfd p = {.fd = ns, .events = POLLIN};
        if (poll(&p, 1, 10000) <= 0)
            break;
        char buf[512];
        ssize_t n = recv(ns, buf, sizeof buf - 1, 0);
        if (n <= 0)
            break;
        buf[n] = '\0';
        if (strstr(buf, "READY=1")) {
            *ready_ms = now_ms() - t0;
            ok = 0;
            break;
        }
    }
    if (ok == 0) {
        /* idle: let it settle, then read the resident set */
        struct timespec ts = {0, 300000000};
        nanosleep(&ts, NULL);
        *rss = rss_kb(pid);
    }
    kill(pid, SIGTERM);
    int st;
    waitpid(pid, &st, 0);
    close(ns);
    unlink(notify_path);
    return ok;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int run_cmd(char *const argv[])
{
    pid_t pid;
    if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) != 0)
        return -1;
    int st;
    waitpid(pid, &st, 0);
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
    if (b)
        fclose(b);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--baseline-child") == 0)
        return baseline_child(argv[2]);

    /* BUILD/bench/bench_bbd -> BUILD */
    char self[PATH_MAX], build[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 1;
    self[n] = '\0';
    snprintf(build, sizeof build, "%s", self);
    for (int i = 0; i < 2; i++)
        *strrchr(build, '/') = '\0';
    char bbd[PATH_MAX + 16], bbc[PATH_MAX + 16], plugin[PATH_MAX + 64];
    snprintf(bbd, sizeof bbd, "%s/bin/bbd", build);
    snprintf(bbc, sizeof bbc, "%s/bin/bbc", build);
    snprintf(plugin, sizeof plugin, "%s/tests/plugins/bbd_test.so", build);

    char tmp[] = "/tmp/bench-bbd-XXXXXX";
    if (!mkdtemp(tmp))
        return 1;
    char plugdir[64], plugcopy[96], artifact[64], state[64], notify[64], baseline_sock[64];
    snprintf(plugdir, sizeof plugdir, "%s/plugins", tmp);
    snprintf(plugcopy, sizeof plugcopy, "%s/bbd_test.so", plugdir);
    snprintf(artifact, sizeof artifact, "%s/pp.onnx", tmp);
    snprintf(state, sizeof state, "%s/state", tmp);
    snprintf(notify, sizeof notify, "%s/notify", tmp);
    snprintf(baseline_sock, sizeof baseline_sock, "%s/baseline.sock", tmp);
    mkdir(plugdir, 0700);
    char *compile[] = {bbc, "compile", "testdata/ping_pong.onnx", "-o", artifact,
                       "--plugin-path", plugdir, NULL};
    if (copy_file(plugin, plugcopy) != 0 || run_cmd(compile) != 0) {
        fprintf(stderr, "bench_bbd: error: cannot compile testdata/ping_pong.onnx with %s "
                        "(run from the repository root after make)\n", plugin);
        return 1;
    }
    char *node[] = {bbd, "--state-dir", state, "--plugin-path", plugdir, "--targets", "Ponger",
                    "--listen", "/ip4/127.0.0.1/tcp/0", "--listen", "/ip4/127.0.0.1/udp/0",
                    "--fresh", artifact, NULL};
    char *base[] = {self, "--baseline-child", baseline_sock, NULL};

    double t_bbd[RUNS], t_base[RUNS], r_bbd[RUNS], r_base[RUNS];
    double dummy;
    long rss;
    measure(node, notify, &dummy, &rss); /* first start creates the key */
    for (int i = 0; i < RUNS; i++) {
        if (measure(node, notify, &t_bbd[i], &rss) != 0) {
            fprintf(stderr, "bench_bbd: error: bbd did not send READY=1\n");
            return 1;
        }
        r_bbd[i] = rss / 1024.0;
        if (measure(base, notify, &t_base[i], &rss) != 0) {
            fprintf(stderr, "bench_bbd: error: the baseline did not send READY=1\n");
            return 1;
        }
        r_base[i] = rss / 1024.0;
    }
    double tb = median(t_bbd, RUNS), tr = median(t_base, RUNS);
    double rb = median(r_bbd, RUNS), rr = median(r_base, RUNS);
    printf("bbd start and idle cost (median of %d runs; baseline: a minimal daemon linking\n"
           "the same libraries, re-executed from this binary)\n\n", RUNS);
    printf("%-28s %10s %10s %8s  %s\n", "", "bbd", "baseline", "ratio", "target");
    printf("%-28s %10.1f %10.1f %7.1fx  %s\n", "exec to READY=1 (ms)", tb, tr, tb / tr,
           tb < 50 ? "< 50 ms: met" : "< 50 ms: MISSED");
    printf("%-28s %10.1f %10.1f %7.1fx  %s\n", "idle RSS (MB)", rb, rr, rb / rr,
           rb < 8 ? "< 8 MB: met" : "< 8 MB: MISSED");
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    return system(cmd) == 0 ? 0 : 1;
}
