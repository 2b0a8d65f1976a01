/*
 * fuzz_control_lines.c — what a local client writes to the control socket:
 * the input is sent over a real connection to bbd's control socket
 * (control.c: accept, line framing, JSON parsing, replies) whose commands
 * run in bbd's own handler (daemon_control.c: status, peers, invoke, event,
 * bootstrap, snapshot, watch, log_level, records) over a daemon holding an
 * engine with the compiled fed_round artifact's Server and Client. The
 * client then closes; the target runs the loop until the daemon has let
 * the client go. Seeds: fuzz/seeds/fuzz_control_lines (every command).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "bbd/host/daemon.h"
#include "fuzz/support/fuzz_support.h"

#define INPUT_MAX_BYTES (64u << 10) /* fits the socket buffer: the write never blocks */

static bbd_daemon d;
static bbd_config cfg;
static char dir[] = "/tmp/bb-fuzz-control-XXXXXX";
static char sock_path[128];

static void setup(void)
{
    static const char *const targets[] = {"Server", "Client"};
    if (!mkdtemp(dir))
        fz_die("mkdtemp", strerror(errno));
    bbd_config_init(&cfg);
    bb_error err = {0};
    snprintf(sock_path, sizeof sock_path, "%s/control.sock", dir);
    if (bbd_config_set_str(&cfg.artifact, "fed_round.onnx", &err) ||
        bbd_config_set_str(&cfg.state_dir, dir, &err) ||
        bbd_config_set_str(&cfg.control, sock_path, &err) ||
        bbd_config_set_targets(&cfg, "Server,Client", &err))
        fz_die("config", err.msg);
    d.cfg = &cfg;
    if (uv_loop_init(&d.loop))
        fz_die("uv_loop_init", "failed");
    d.loop_ready = true;
    if (bbd_log_open(&d.log, BB_LOG_ERROR, "/dev/null", &err))
        fz_die("log", err.msg);
    d.engine = fz_engine(targets, 2, 7);
    snprintf(d.snapshot_path, sizeof d.snapshot_path, "%s/snapshot.bbs", dir);
    snprintf(d.self_text, sizeof d.self_text, "fuzz");
    d.started_ns = bbd_now_ns();
    bbd_control_limits lim = {64u << 10, 8, 1u << 20, 4u << 20, 0};
    bbd_control_ops ops = bbd_daemon_control_ops;
    ops.ud = &d;
    if (bbd_control_start(&d.loop, sock_path, &lim, &ops, &d.control, &err))
        fz_die("control socket", err.msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!d.control)
        setup();
    if (size > INPUT_MAX_BYTES)
        return 0;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock_path);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        fz_die("connect", strerror(errno));
    if (size && write(fd, data, size) != (ssize_t)size)
        fz_die("write", strerror(errno));
    shutdown(fd, SHUT_WR);
    fcntl(fd, F_SETFL, O_NONBLOCK);
    /* run until the daemon accepted, answered and dropped the client, and
     * the connection reads EOF */
    bool eof = false, seen = false;
    for (int i = 0; i < 100000 && !(eof && seen && !bbd_control_client_count(d.control)); i++) {
        uv_run(&d.loop, UV_RUN_NOWAIT);
        seen = seen || bbd_control_client_count(d.control) > 0 || eof;
        char buf[65536];
        ssize_t n;
        while ((n = read(fd, buf, sizeof buf)) > 0)
            ;
        if (n == 0)
            eof = true;
        else if (errno != EAGAIN && errno != EWOULDBLOCK)
            eof = true;
    }
    close(fd);
    bbd_daemon_waits_free(&d);
    uv_run(&d.loop, UV_RUN_NOWAIT); /* the waits' timers close */
    return 0;
}
