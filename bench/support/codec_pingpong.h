/*
 * codec_pingpong.h — the round trip's floor with bbd's wire format: the
 * libuv ping-pong (bench_uv_pingpong_messages) whose messages are the wire
 * loop's request and response envelopes, framed, decoded and encoded with
 * bbd's own frame reader and the engine's envelope and value codecs, and
 * nothing of the engine: no execution, no op, no gate but the sender's
 * peer entry and the dedup key, no step. What a node speaking this wire
 * pays before it runs any of the program (bench_bbd_wire's "codec floor").
 */
#ifndef BB_BENCH_CODEC_PINGPONG_H
#define BB_BENCH_CODEC_PINGPONG_H

/* warmup round trips, then n more whose durations (ns) go to lat[n]; the
 * measuring side sends 64-byte tensors in requests, the peer answers each
 * with a Timestamp in a response. A malformed or unexpected message exits
 * the benchmark. */
void bench_codec_pingpong(int warmup, int n, double *lat);

#endif
