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
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>
#include <sodium.h>
#include <uv.h>

#include "bb/status.h"
#include "bench/support/bbd_nodes.h"
#include "bench/support/bench_util.h"

#define RUNS 15

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

/* Start argv, wait for READY=1 (*ready_ms), let it settle idle, read its
 * resident set (*rss_mb), stop it. Returns 0, or -1 when it never got ready. */
static int measure(char *const argv[], const char *notify_path, double *ready_ms, double *rss_mb)
{
    pid_t pid = bench_spawn_ready(argv, notify_path, NULL, 10000, ready_ms);
    if (pid < 0)
        return -1;
    struct timespec ts = {0, 300000000};
    nanosleep(&ts, NULL);
    *rss_mb = bench_proc_mb(pid, "VmRSS");
    bench_stop(pid);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--baseline-child") == 0)
        return baseline_child(argv[2]);

    char self[PATH_MAX], build[PATH_MAX];
    if (bench_build_dir(build, self, sizeof self) != 0)
        return 1;
    char bbd[PATH_MAX + 16], tmp[] = "/tmp/bench-bbd-XXXXXX";
    snprintf(bbd, sizeof bbd, "%s/bin/bbd", build);
    if (!mkdtemp(tmp))
        return 1;
    char plugdir[64], artifact[64], state[64], notify[64], baseline_sock[64];
    snprintf(plugdir, sizeof plugdir, "%s/plugins", tmp);
    snprintf(state, sizeof state, "%s/state", tmp);
    snprintf(notify, sizeof notify, "%s/notify", tmp);
    snprintf(baseline_sock, sizeof baseline_sock, "%s/baseline.sock", tmp);
    if (bench_compile_example(build, tmp, "ping_pong", artifact, sizeof artifact) != 0)
        return 1;
    char *node[] = {bbd, "--state-dir", state, "--plugin-path", plugdir, "--targets", "Ponger",
                    "--listen", "/ip4/127.0.0.1/tcp/0", "--listen", "/ip4/127.0.0.1/udp/0",
                    "--fresh", artifact, NULL};
    char *base[] = {self, "--baseline-child", baseline_sock, NULL};

    double t_bbd[RUNS], t_base[RUNS], r_bbd[RUNS], r_base[RUNS];
    double first_ms, first_mb;
    measure(node, notify, &first_ms, &first_mb); /* first start creates the key */
    for (int i = 0; i < RUNS; i++) {
        if (measure(node, notify, &t_bbd[i], &r_bbd[i]) != 0) {
            fprintf(stderr, "bench_bbd: error: bbd did not send READY=1\n");
            return 1;
        }
        if (measure(base, notify, &t_base[i], &r_base[i]) != 0) {
            fprintf(stderr, "bench_bbd: error: the baseline did not send READY=1\n");
            return 1;
        }
    }
    double tb = bench_median(t_bbd, RUNS), tr = bench_median(t_base, RUNS);
    double rb = bench_median(r_bbd, RUNS), rr = bench_median(r_base, RUNS);
    printf("bbd start and idle cost (median of %d runs; baseline: a minimal daemon linking\n"
           "the same libraries, re-executed from this binary)\n\n", RUNS);
    printf("%-28s %10s %10s %8s  %s\n", "", "bbd", "baseline", "ratio", "target");
    printf("%-28s %10.1f %10.1f %7.1fx  %s\n", "exec to READY=1 (ms)", tb, tr, tb / tr,
           tb < 50 ? "< 50 ms: met" : "< 50 ms: MISSED");
    printf("%-28s %10.1f %10.1f %7.1fx  %s\n", "idle RSS (MB)", rb, rr, rb / rr,
           rb < 8 ? "< 8 MB: met" : "< 8 MB: MISSED");
    return bench_remove_tree(tmp) == 0 ? 0 : 1;
}
