/*
 * codec_pingpong.c — bench_codec_pingpong (codec_pingpong.h): the libuv
 * ping-pong speaking bbd's frames and envelopes.
 *
 * Per message received, what any node on this wire must do and no more:
 * read the frame header (bbd_frame_header_decode), take the envelope into
 * a block of its own (bbd's ingress owns the bytes), decode it
 * (bbe__envelope_decode), find the sender's peer entry (hash and compare
 * of its PeerId) and the site its suffix names, check and remember the
 * dedup key (bbe__envelope_dedup_key), decode the payload as the site's
 * type (bb_value_decode), check the correlation. Per message sent: encode
 * the envelope with its value written in place (bbe__envelope_encode, the
 * response's Timestamp as a one-child Composite's head and the child, as
 * SendResp sends it), frame it, write header and envelope in one call.
 */
#include "bench/support/codec_pingpong.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "bb/types.h"
#include "bb/value.h"
#include "bbd/host/frame.h"
#include "bench/support/raw_tcp.h"
#include "libbbengine/src/engine_internal.h"

#define TENSOR_FLOATS 16
#define DEDUP_SLOTS 1024 /* direct-mapped: a repeat of a recent key is a duplicate */
#define PEER_SLOTS 64

/* The wire loop's "data" site suffix as a node sends it (13 bytes: the
 * port's hash and the site), and one peer's PeerId (an Ed25519 identity
 * multihash: 0x00 0x24 0x08 0x01 0x12 0x20 and 32 key bytes). */
static const uint8_t SITE_SUFFIX[13] = {0x81, 0x80, 0xc0, 0x01, 0xfc, 0xa7, 0x83,
                                        0xcc, 0xb5, 0xc5, 0xf4, 0xc8, 0x43};
static const uint8_t PEER_ID[38] = {0x00, 0x24, 0x08, 0x01, 0x12, 0x20, 1,  2,  3,  4,
                                    5,    6,    7,    8,    9,    10,   11, 12, 13, 14,
                                    15,   16,   17,   18,   19,   20,   21, 22, 23, 24,
                                    25,   26,   27,   28,   29,   30,   31, 32};

typedef struct {
    const uint8_t *id;
    size_t len;
    uint64_t hash;
} peer_entry;

typedef struct {
    bool requester;   /* sends requests (the measuring side) or answers them */
    bb_value *value;  /* what it sends: the tensor, or the Timestamp */
    uint64_t site_hash;
    peer_entry peers[PEER_SLOTS];
    uint64_t dedup[DEDUP_SLOTS];
    uint64_t req_id;  /* requester: the request in flight; responder: the last one read */
    uint64_t sent_at; /* strictly increasing, as every node makes it */
    uint64_t req_sent_at;
} codec_side;

/* Says why the message is refused; the harness ends the run (raw_tcp.h). */
static size_t refuse(const char *why)
{
    fprintf(stderr, "%s: codec ping-pong: %s\n", program_invocation_short_name, why);
    return BENCH_UV_MESSAGE_BAD;
}

static const peer_entry *peer_find(const codec_side *s, const uint8_t *id, size_t len)
{
    uint64_t h = bbe__hash_bytes(id, len);
    for (size_t i = 0; i < PEER_SLOTS; i++) {
        const peer_entry *p = &s->peers[(h + i) % PEER_SLOTS];
        if (!p->id)
            return NULL;
        if (p->hash == h && p->len == len && memcmp(p->id, id, len) == 0)
            return p;
    }
    return NULL;
}

static void *side_new(bool requester)
{
    codec_side *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->requester = requester;
    uint64_t h = bbe__hash_bytes(PEER_ID, sizeof PEER_ID);
    s->peers[h % PEER_SLOTS] = (peer_entry){.id = PEER_ID, .len = sizeof PEER_ID, .hash = h};
    s->site_hash = bbe__hash_bytes(SITE_SUFFIX, sizeof SITE_SUFFIX);
    if (requester) {
        float ones[TENSOR_FLOATS];
        for (int i = 0; i < TENSOR_FLOATS; i++)
            ones[i] = 1.0f;
        int64_t dims[1] = {TENSOR_FLOATS};
        s->value = bb_value_tensor_copy(BB_DT_FLOAT, 1, dims, ones, sizeof ones);
    } else {
        s->value = bb_value_u64(&BB_TYPE_TIMESTAMP, 1795883740736124206ull);
    }
    if (!s->value) {
        free(s);
        return NULL;
    }
    return s;
}

static void side_free(void *side)
{
    codec_side *s = side;
    bb_value_unref(s->value);
    free(s);
}

static size_t take(void *side, const uint8_t *p, size_t n)
{
    codec_side *s = side;
    static const bbd_frame_limits frame_lim = {.max_envelope = 1 << 20};
    bbd_frame_header h;
    bb_error err;
    bb_error_clear(&err);
    if (bbd_frame_header_decode(p, n, &frame_lim, &h, &err) != BB_OK)
        return refuse(err.msg);
    if (!h.complete || n - h.header_len < h.payload_len)
        return 0;
    if (h.kind != BBD_FRAME_ENVELOPE)
        return refuse("not an envelope frame");
    uint8_t *own = malloc(h.payload_len);
    if (!own)
        return refuse("out of memory");
    memcpy(own, p + h.header_len, h.payload_len);
    const char *why = NULL;
    bb_value *v = NULL;
    bbe__envelope env;
    static const bbe__env_limits env_lim = {.max_fills = 64, .max_addrs = 16};
    if (bbe__envelope_decode(own, h.payload_len, &env_lim, &env, &err) != 0) {
        free(own);
        return refuse(err.msg);
    }
    /* the connection's peer, its entry found as the engine finds it */
    const peer_entry *peer = peer_find(s, PEER_ID, sizeof PEER_ID);
    const bbe__fill *f = env.n_fills == 1 ? &env.fills[0] : NULL;
    uint64_t key = peer ? bbe__envelope_dedup_key(peer->hash, own, h.payload_len, &env) : 0;
    bb_decode_limits lim = BB_DECODE_LIMITS_DEFAULT;
    const bb_type_node *t = s->requester ? &BB_TYPE_COMPOSITE : &BB_TYPE_TENSOR_F32;
    if (!peer || !f || env.corr_kind != (s->requester ? 2 : 1))
        why = "unexpected envelope";
    else if (f->suffix_len != sizeof SITE_SUFFIX ||
             bbe__hash_bytes(f->suffix, f->suffix_len) != s->site_hash ||
             memcmp(f->suffix, SITE_SUFFIX, sizeof SITE_SUFFIX) != 0)
        why = "unknown site";
    else if (s->dedup[key % DEDUP_SLOTS] == key)
        why = "duplicate envelope";
    else if (bb_value_decode(t->wire_hash, f->payload, f->payload_len, &lim, &v, &err) != 0)
        why = err.msg;
    else if (s->requester && (env.wire_req_id != s->req_id || env.echo_sent_at_ns != s->sent_at))
        why = "response to no request in flight";
    if (!why) {
        s->dedup[key % DEDUP_SLOTS] = key;
        if (!s->requester) {
            s->req_id = env.wire_req_id;
            s->req_sent_at = env.sent_at_ns;
        }
    }
    size_t used = why ? refuse(why) : h.header_len + h.payload_len;
    bb_value_unref(v);
    bbe__envelope_release(&env);
    free(own);
    return used;
}

static bool send_message(void *side, uv_stream_t *stream)
{
    codec_side *s = side;
    size_t plen;
    bb_error err;
    if (bb_value_encoded_size(s->value, &plen, &err) != 0)
        return false;
    bbe__fill f = {.suffix = SITE_SUFFIX, .suffix_len = sizeof SITE_SUFFIX, .value = s->value,
                   .payload_len = plen};
    bbe__envelope env = {.fills = &f, .n_fills = 1, .sent_at_ns = ++s->sent_at};
    if (s->requester) {
        env.corr_kind = 1;
        env.wire_req_id = ++s->req_id;
        env.deadline_ns = s->sent_at + 10000000000ull;
    } else {
        f.wrap_head_len = (uint8_t)bb_value_wrap_head(s->value, plen, f.wrap_head);
        f.payload_len = f.wrap_head_len + plen;
        env.corr_kind = 2;
        env.wire_req_id = s->req_id;
        env.echo_sent_at_ns = s->req_sent_at;
    }
    uint8_t *bytes;
    size_t len;
    if (bbe__envelope_encode(&env, &bytes, &len) != 0)
        return false;
    uint8_t head[BBD_FRAME_HEADER_MAX];
    size_t hl = bbd_frame_header_encode(BBD_FRAME_ENVELOPE, len, head);
    uv_buf_t b[2] = {uv_buf_init((char *)head, (unsigned)hl),
                     uv_buf_init((char *)bytes, (unsigned)len)};
    int w = uv_try_write(stream, b, 2);
    free(bytes);
    return w == (int)(hl + len);
}

void bench_codec_pingpong(int warmup, int n, double *lat)
{
    static const bench_uv_messages codec = {
        .side_new = side_new, .take = take, .send = send_message, .side_free = side_free};
    bench_uv_pingpong_messages(&codec, warmup, n, lat);
}
