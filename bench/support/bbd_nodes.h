/*
 * bbd_nodes.h — real bbd processes for the benchmarks: find the build's
 * programs next to the running benchmark, run a command, start a program
 * and wait for its READY=1 (the sd_notify datagram bbd sends once it
 * listens and has installed its targets), talk JSON lines to a node's
 * control socket, stop a node.
 *
 * Nothing here is timed by the caller's figures except what it chooses to
 * time: starting and stopping happen outside the measured loops.
 */
#ifndef BB_BENCH_BBD_NODES_H
#define BB_BENCH_BBD_NODES_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

#include <cJSON.h>

/* The build directory this benchmark runs from (BUILD/bench/bench_x ->
 * BUILD) into build[cap], and this program's own path into self[cap].
 * Returns 0, or -1 when /proc/self/exe cannot be read. */
int bench_build_dir(char *build, char *self, size_t cap);

/* Run argv to its end; its exit status, or -1. */
int bench_run(char *const argv[]);

/* Copy the build's bbd_test plugin alone into TMP/plugins (tests/plugins
 * also holds broken plugins on purpose) and compile testdata/NAME.onnx
 * against it into TMP/NAME.onnx, its path into artifact[cap]. Run from the
 * repository root. 0, or -1 with a message on stderr. */
int bench_compile_example(const char *build, const char *tmp, const char *name, char *artifact,
                          size_t cap);

/* Spawn argv with NOTIFY_SOCKET=notify_path, standard output and error to
 * log_path (NULL: /dev/null), and wait up to timeout_ms for READY=1.
 * Returns the pid (*ready_ms: exec to READY=1, when not NULL), or -1 when
 * the program could not start, died or stayed silent (then it is killed). */
pid_t bench_spawn_ready(char *const argv[], const char *notify_path, const char *log_path,
                        double timeout_ms, double *ready_ms);

/* SIGTERM, then wait; the exit status, or -1. */
int bench_stop(pid_t pid);

/* A bbd node: its state directory, control socket (DIR/control.sock) and
 * log (DIR.log). */
typedef struct bench_node {
    pid_t pid;
    char dir[PATH_MAX], sock[PATH_MAX + 16], log[PATH_MAX + 8];
} bench_node;

/* What a node runs: the bbd program, the compiled artifact, the target to
 * install, the plugin directory, a config file and the peer "ID=ADDR" it
 * knows (either NULL: none), and how long READY=1 may take. */
typedef struct bench_node_spec {
    const char *bbd, *artifact, *target, *plugdir, *config, *peer;
    double ready_timeout_ms;
} bench_node_spec;

/* Start bbd as node n in the fresh state directory dir, listening on
 * loopback TCP (a free port), log level warn, its output to DIR.log, and
 * wait for READY=1. 0, or -1 (n->pid is then -1). */
int bench_node_start(bench_node *n, const char *dir, const bench_node_spec *spec);

/* The "ID=ADDR" other nodes reach n by (its peer id and first listen
 * address, from a status request) into peer[cap]. 0 or -1. */
int bench_node_peer(const bench_node *n, char *peer, size_t cap);

/* Print "PROG: error: " and the message, then the tail of n's log (n may
 * be NULL), and exit 1. */
_Noreturn void bench_node_fail(const bench_node *n, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A "Vm...:" field of /proc/PID/status (e.g. "VmRSS", "VmHWM") in MB, or
 * -1 when it cannot be read. */
double bench_proc_mb(pid_t pid, const char *field);

/* The CPU time (user + system) the process has used, in seconds, or -1
 * when /proc/PID/stat cannot be read. */
double bench_proc_cpu_s(pid_t pid);

/* rm -rf dir; 0, or -1 (with a message on stderr). */
int bench_remove_tree(const char *dir);

/* A control socket connection: requests out, reply and event lines in. */
typedef struct bench_ctl {
    int fd;
    char *buf;
    size_t start, next, len, cap; /* unread data: buf[start, len); the line
                                   * handed out last ends at next */
    size_t lines; /* complete lines in buf[start, len), the one handed out
                   * last included until the next call drops it */
} bench_ctl;

int bench_ctl_open(bench_ctl *c, const char *socket_path);
void bench_ctl_close(bench_ctl *c);
/* Send one request (a JSON object without the newline). 0 or -1. */
int bench_ctl_send(bench_ctl *c, const char *request);
/* The next line, NUL-terminated and valid until the next call, waiting up
 * to timeout_ms for it (0: only what has arrived); NULL on timeout, EOF or
 * error. */
const char *bench_ctl_line(bench_ctl *c, int timeout_ms);
/* Buffer whatever has arrived, without waiting; the number of complete
 * lines buffered, or (size_t)-1 on EOF or error. Lets a reader that must
 * not compete for the CPU take a stream in a few bulk reads. */
size_t bench_ctl_fill(bench_ctl *c);
/* send, then the reply parsed; NULL when none came in timeout_ms or it was
 * not JSON with "ok": true (the line goes to stderr). */
cJSON *bench_ctl_request(bench_ctl *c, const char *request, int timeout_ms);

#endif
