/*
 * test_envelope_codec.c — the engine's hand-rolled WireEnvelope codec
 * (libbbengine/src/envelope.c) against protobuf-c's, generated from
 * proto/bb_envelope.proto, as the oracle:
 *
 *   - random envelopes packed by protobuf-c decode to the same fields, and
 *     the engine's encoding of those fields is byte for byte protobuf-c's;
 *   - the same envelopes mutated (bytes flipped, cut short, spliced): what
 *     both accept has the same fields (caps set high); what protobuf-c
 *     accepts the engine refuses only for an unknown correlation kind or a
 *     known field in another wire type (protobuf-c reads a length-delimited
 *     bool, say); no input makes either read past its end (ASan, valgrind).
 *
 * The decoder reads the tags its encoder writes the short way and every
 * other the general way; the mutations reach both. Same seed, same run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/test_rng.h"

#include "bb_envelope.pb-c.h"
#include "libbbengine/src/engine_internal.h"

#define ENVELOPES 3000
#define MUTATIONS 8 /* per envelope */


/* A stamp-like or small number: both varint lengths and fixed64 zeros. */
static uint64_t number(void)
{
    switch (below(4)) {
    case 0: return 0;
    case 1: return below(300);
    case 2: return rnd() >> below(64);
    default: return 0x1700000000000000ULL + below(1u << 30); /* ns since 1970 */
    }
}

typedef struct pool { /* bytes the random envelope points into */
    uint8_t b[8192];
    size_t n;
} pool;

static ProtobufCBinaryData bytes_of(pool *p, size_t max)
{
    size_t n = below(max + 1);
    if (p->n + n > sizeof p->b)
        n = 0;
    ProtobufCBinaryData d = {n, p->b + p->n};
    for (size_t i = 0; i < n; i++)
        p->b[p->n++] = (uint8_t)rnd();
    return d;
}

/* A random envelope, packed by protobuf-c into out (malloc'd). */
static size_t random_envelope(uint8_t **out)
{
    static pool p;
    p.n = 0;
    Bb__Core__WireEnvelope env = BB__CORE__WIRE_ENVELOPE__INIT;
    ProtobufCBinaryData dest[4], src[4];
    Bb__Core__SlotFill fill_store[5], *fills[5];
    Bb__Core__WireCorrelation corr = BB__CORE__WIRE_CORRELATION__INIT;
    env.n_dest_peer_addresses = below(4);
    env.dest_peer_addresses = dest;
    for (size_t i = 0; i < env.n_dest_peer_addresses; i++)
        dest[i] = bytes_of(&p, 24);
    env.n_fills = below(5);
    env.fills = fills;
    for (size_t i = 0; i < env.n_fills; i++) {
        fills[i] = &fill_store[i];
        bb__core__slot_fill__init(fills[i]);
        fills[i]->dest_suffix = bytes_of(&p, 16);
        fills[i]->payload = bytes_of(&p, below(8) ? 100 : 2000);
        fills[i]->trigger_only = below(4) == 0;
    }
    corr.kind = (Bb__Core__CorrelationKind)below(3);
    corr.wire_req_id = number();
    if (corr.kind || corr.wire_req_id) /* proto3 writes an empty message; the engine none */
        env.correlation = &corr;
    env.deadline_ns = number();
    env.sent_at_ns = number();
    env.echo_sent_at_ns = number();
    env.echo_delay_ns = number();
    env.n_src_peer_addresses = below(4);
    env.src_peer_addresses = src;
    for (size_t i = 0; i < env.n_src_peer_addresses; i++)
        src[i] = bytes_of(&p, 24);
    size_t n = bb__core__wire_envelope__get_packed_size(&env);
    *out = malloc(n ? n : 1);
    assert_non_null(*out);
    assert_int_equal(bb__core__wire_envelope__pack(&env, *out), n);
    return n;
}

static bool same_bytes(const uint8_t *a, size_t an, const ProtobufCBinaryData *b)
{
    return an == b->len && (an == 0 || memcmp(a, b->data, an) == 0);
}

/* The engine's view of the bytes equals protobuf-c's. */
static void assert_same(const bbe__envelope *e, const Bb__Core__WireEnvelope *pc)
{
    assert_int_equal(e->n_dest, pc->n_dest_peer_addresses);
    for (size_t i = 0; i < e->n_dest; i++)
        assert_true(same_bytes(e->dest[i].data, e->dest[i].len, &pc->dest_peer_addresses[i]));
    assert_int_equal(e->n_src, pc->n_src_peer_addresses);
    for (size_t i = 0; i < e->n_src; i++)
        assert_true(same_bytes(e->src[i].data, e->src[i].len, &pc->src_peer_addresses[i]));
    assert_int_equal(e->n_fills, pc->n_fills);
    for (size_t i = 0; i < e->n_fills; i++) {
        const bbe__fill *f = &e->fills[i];
        assert_true(same_bytes(f->suffix, f->suffix_len, &pc->fills[i]->dest_suffix));
        assert_true(same_bytes(f->payload, f->payload_len, &pc->fills[i]->payload));
        assert_int_equal(f->trigger_only, pc->fills[i]->trigger_only != 0);
    }
    int kind = pc->correlation ? (int)pc->correlation->kind : 0;
    uint64_t id = pc->correlation ? pc->correlation->wire_req_id : 0;
    assert_int_equal(e->corr_kind, kind);
    assert_true(e->wire_req_id == id);
    assert_true(e->deadline_ns == pc->deadline_ns);
    assert_true(e->sent_at_ns == pc->sent_at_ns);
    assert_true(e->echo_sent_at_ns == pc->echo_sent_at_ns);
    assert_true(e->echo_delay_ns == pc->echo_delay_ns);
}

static const bbe__env_limits WIDE = {1000, 1000};

static void test_random_envelopes_match_protobuf_c(void **state)
{
    (void)state;
    for (int it = 0; it < ENVELOPES; it++) {
        uint8_t *bytes;
        size_t n = random_envelope(&bytes);
        Bb__Core__WireEnvelope *pc = bb__core__wire_envelope__unpack(NULL, n, bytes);
        assert_non_null(pc);
        bbe__envelope e;
        bb_error err;
        bb_error_clear(&err);
        if (bbe__envelope_decode(bytes, n, &WIDE, &e, &err) != BB_OK)
            fail_msg("envelope %d: %s", it, err.msg);
        assert_same(&e, pc);
        /* and back: the engine writes exactly protobuf-c's bytes */
        uint8_t *again;
        size_t again_len;
        assert_int_equal(bbe__envelope_encode(&e, &again, &again_len), BB_OK);
        assert_int_equal(again_len, n);
        assert_memory_equal(again, bytes, n);
        free(again);
        bbe__envelope_release(&e);
        bb__core__wire_envelope__free_unpacked(pc, NULL);
        free(bytes);
    }
}

/* Flip, cut or splice: one hostile variant of in[0..n) into out. */
static size_t mutate(const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
    size_t m = n < cap ? n : cap;
    memcpy(out, in, m);
    switch (below(5)) {
    case 0: /* a few random bytes */
        for (size_t k = 1 + below(3); k-- && m;)
            out[below(m)] = (uint8_t)rnd();
        return m;
    case 1: /* cut short */
        return below(m + 1);
    case 2: /* a tag byte of a field the encoder writes, somewhere */
        if (m)
            out[below(m)] = (const uint8_t[]){0x0a, 0x12, 0x1a, 0x21, 0x29, 0x31, 0x38, 0x42,
                                              0x20, 0x28, 0x30, 0x08, 0x10, 0x18}[below(14)];
        return m;
    case 3: /* a length byte made larger or smaller */
        if (m) {
            size_t at = below(m);
            out[at] = (uint8_t)(out[at] + (below(2) ? 1 : -1));
        }
        return m;
    default: { /* an unknown field appended (fields 9..15, any wire type) */
        if (m + 12 > cap)
            return m;
        uint8_t wt = (uint8_t)(below(2) ? 0 : below(2) ? 2 : 1);
        out[m++] = (uint8_t)((9 + below(7)) << 3 | wt);
        if (wt == 0) {
            out[m++] = 0x81;
            out[m++] = 0x01;
        } else if (wt == 2) {
            out[m++] = 3;
            out[m++] = 'a';
            out[m++] = 'b';
            out[m++] = 'c';
        } else {
            for (int i = 0; i < 8; i++)
                out[m++] = (uint8_t)rnd();
        }
        return m;
    }
    }
}

static void test_mutated_envelopes_agree_with_protobuf_c(void **state)
{
    (void)state;
    size_t accepted = 0, refused = 0;
    uint8_t *buf = malloc(16384);
    assert_non_null(buf);
    for (int it = 0; it < ENVELOPES; it++) {
        uint8_t *bytes;
        size_t n = random_envelope(&bytes);
        for (int k = 0; k < MUTATIONS; k++) {
            size_t m = mutate(bytes, n, buf, 16384);
            /* the exact length: a read past m is a heap overflow ASan sees */
            uint8_t *exact = malloc(m ? m : 1);
            assert_non_null(exact);
            memcpy(exact, buf, m);
            Bb__Core__WireEnvelope *pc = bb__core__wire_envelope__unpack(NULL, m, exact);
            bbe__envelope e;
            bb_error err;
            bb_error_clear(&err);
            int rc = bbe__envelope_decode(exact, m, &WIDE, &e, &err);
            if (rc == BB_OK) {
                accepted++;
                if (pc)
                    assert_same(&e, pc);
                bbe__envelope_release(&e);
            } else {
                refused++;
                assert_true(err.msg[0] != '\0');
                /* protobuf-c took it: the engine refuses only an unknown
                 * correlation kind, or a known field in another wire type
                 * than the schema's (protobuf-c reads some of those) */
                if (pc && !strstr(err.msg, "correlation kind") && !strstr(err.msg, "malformed"))
                    fail_msg("protobuf-c took what the engine refused: %s", err.msg);
            }
            if (pc)
                bb__core__wire_envelope__free_unpacked(pc, NULL);
            free(exact);
        }
        free(bytes);
    }
    free(buf);
    /* the mutations reach both outcomes */
    assert_true(accepted > ENVELOPES);
    assert_true(refused > ENVELOPES);
}

/* The short readers of a fill and a correlation stop at their
 * sub-message's end: a request id whose varint runs on into the next
 * field is truncated there, not read through (bytes follow in the
 * envelope, so a reader that looked at the envelope's end would take it). */
static void test_submessage_ends_bound_the_short_readers(void **state)
{
    (void)state;
    /* correlation {kind 1, id varint 0x80 | cut} then a stamp whose first
     * byte ends the varint */
    static const uint8_t corr_cut[] = {0x1a, 0x04, 0x08, 0x01, 0x10, 0x80,
                                       0x29, 1, 0, 0, 0, 0, 0, 0, 0};
    /* a fill whose suffix length runs past the fill */
    static const uint8_t fill_cut[] = {0x12, 0x02, 0x0a, 0x05, 0x29, 1, 0, 0, 0, 0, 0, 0, 0};
    /* the same fields in the other order, and the id alone: read the long way */
    static const uint8_t corr_swapped[] = {0x1a, 0x05, 0x10, 0x81, 0x01, 0x08, 0x02};
    static const uint8_t fill_swapped[] = {0x12, 0x06, 0x12, 0x01, 0x07, 0x0a, 0x01, 0x09};
    bbe__envelope e;
    bb_error err;
    assert_int_equal(bbe__envelope_decode(corr_cut, sizeof corr_cut, &WIDE, &e, &err), BB_ETRUNC);
    assert_non_null(strstr(err.msg, "truncated"));
    assert_int_equal(bbe__envelope_decode(fill_cut, sizeof fill_cut, &WIDE, &e, &err), BB_ETRUNC);
    assert_int_equal(bbe__envelope_decode(corr_swapped, sizeof corr_swapped, &WIDE, &e, &err),
                     BB_OK);
    assert_int_equal(e.corr_kind, 2);
    assert_int_equal(e.wire_req_id, 129);
    bbe__envelope_release(&e);
    assert_int_equal(bbe__envelope_decode(fill_swapped, sizeof fill_swapped, &WIDE, &e, &err),
                     BB_OK);
    assert_int_equal(e.n_fills, 1);
    assert_int_equal(e.fills[0].suffix_len, 1);
    assert_int_equal(e.fills[0].suffix[0], 0x09);
    assert_int_equal(e.fills[0].payload_len, 1);
    assert_int_equal(e.fills[0].payload[0], 0x07);
    bbe__envelope_release(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_envelopes_match_protobuf_c),
        cmocka_unit_test(test_mutated_envelopes_agree_with_protobuf_c),
        cmocka_unit_test(test_submessage_ends_bound_the_short_readers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
