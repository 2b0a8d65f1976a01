/*
 * raw_tcp.h — the raw socket baselines the wire benchmarks compare with,
 * and the harness that runs a measured path against them round by round
 * and prints the table rows.
 *
 * A baseline is two processes (this one and a forked child, so both pay
 * the same wakeups as two daemons) on loopback TCP with TCP_NODELAY, plain
 * blocking read() and write(), nothing else (bench_uv_pingpong: a libuv
 * loop on each side instead). The child inherits this
 * process's CPU placement (bench_place). A socket error exits the
 * benchmark.
 */
#ifndef BB_BENCH_RAW_TCP_H
#define BB_BENCH_RAW_TCP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A ping-pong of size-byte messages: warmup round trips, then n more whose
 * durations (ns) go to lat[n]. */
void bench_raw_pingpong(size_t size, int warmup, int n, double *lat);

/* The same ping-pong with a libuv loop on each side (read callback, then
 * uv_try_write): the floor of any event-loop daemon, what bbd pays before
 * its own work. */
void bench_uv_pingpong(size_t size, int warmup, int n, double *lat);

/* The libuv ping-pong with messages of a protocol instead of size-byte
 * echoes. Each side (this process measuring, the forked peer answering)
 * makes its state with side_new(measuring); take(side, p, n) handles the
 * one whole message at the start of p[0..n) and returns its length, 0 when
 * more bytes are needed, BENCH_UV_MESSAGE_BAD when it is malformed or
 * unexpected (having said why on stderr); send(side, stream) writes the
 * side's next message whole (uv_try_write), false on failure. The measuring
 * side sends first. A failure on either side exits the benchmark. */
#define BENCH_UV_MESSAGE_BAD ((size_t)-1)
typedef struct uv_stream_s uv_stream_t;
typedef struct bench_uv_messages {
    void *(*side_new)(bool measuring);
    size_t (*take)(void *side, const uint8_t *p, size_t n);
    bool (*send)(void *side, uv_stream_t *stream);
    void (*side_free)(void *side);
} bench_uv_messages;
void bench_uv_pingpong_messages(const bench_uv_messages *m, int warmup, int n, double *lat);

/* mib MiB written in 1 MiB write() calls, timed until the child has read
 * the last byte and answered one byte; MiB/s. */
double bench_raw_stream(int mib);

/* ---- comparing a path with the baselines ---- */

/* The round-trip table's header; bench_rtt_compare prints its rows. */
void bench_rtt_header(void);

/* In the current placement, `rounds` rounds, each a raw ping-pong of size
 * bytes (warmup + trips round trips) then path(lat, ud) filling lat[trips]
 * (ns); prints the raw row and the path's row (p50, p99 and mean over all
 * rounds; the ratio is the median over rounds of path p50 / raw p50, each
 * pair run back to back; the row says whether it is <= target). Returns
 * whether the target was met. */
bool bench_rtt_compare(const char *placement, const char *path_name, size_t size, int rounds,
                       int warmup, int trips, double target,
                       void (*path)(double *lat, void *ud), void *ud);

/* bench_rtt_compare for a path that is no target of its own but a figure to
 * read the others by (a floor, the same path on another channel): the row
 * carries `label` (e.g. "floor (reference)") where a verdict would be. */
void bench_rtt_reference(const char *placement, const char *path_name, const char *label,
                         size_t size, int rounds, int warmup, int trips,
                         void (*path)(double *lat, void *ud), void *ud);

/* `rounds` rounds, each a raw stream of mib MiB then path(ud) (MiB/s),
 * back to back so a pair sees the same load from elsewhere; prints the
 * table under title: MiB/s the best round of each, the ratio the median
 * of the rounds' path/raw (target >= 0.70), then note. Returns whether the
 * target was met. */
bool bench_stream_compare(const char *title, const char *path_name, const char *note, int mib,
                          int rounds, double (*path)(void *ud), void *ud);

#endif
