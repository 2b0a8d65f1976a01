/*
 * test_wire_path.c — the large-envelope paths of the wire: the byte hash
 * DedupGateRx keys on (bbe__hash_bytes), envelopes handed to the engine
 * without a copy (bb_engine_deliver_envelope_owned), values encoded in
 * place (bb_value_encode_into, which the engine's Send uses) or with their
 * large payloads left in place (bb_value_encode_gather), and the engine's
 * SendEnvelope as a gather list (config.send_gather).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "libbbengine/src/engine_internal.h"
#include "support/engine_fixtures.h"

#define SHORT 300

static uint8_t *pattern(size_t len)
{
    uint8_t *b = malloc(len ? len : 1);
    assert_non_null(b);
    for (size_t i = 0; i < len; i++)
        b[i] = (uint8_t)(i * 131u + 7u);
    return b;
}

/* Every prefix hashes differently, the same bytes at another alignment
 * hash the same, and any one flipped bit (short and long inputs) changes
 * the hash. */
static void test_hash_bytes(void **state)
{
    (void)state;
    uint8_t *b = pattern(SHORT), *moved = malloc(SHORT + 8);
    assert_non_null(moved);
    uint64_t h[SHORT + 1];
    for (size_t n = 0; n <= SHORT; n++) {
        h[n] = bbe__hash_bytes(b, n);
        for (size_t k = 0; k < n; k++)
            assert_true(h[k] != h[n]);
        memcpy(moved + 3, b, n);
        assert_true(bbe__hash_bytes(moved + 3, n) == h[n]);
    }
    for (size_t n = 1; n <= 100; n += 33) {
        for (size_t bit = 0; bit < n * 8; bit++) {
            b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            assert_true(bbe__hash_bytes(b, n) != h[n]);
            b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        }
    }
    free(b);
    free(moved);
    size_t big = 1u << 20;
    uint8_t *l = pattern(big);
    uint64_t whole = bbe__hash_bytes(l, big);
    size_t at[] = {0, 47, 48, big / 2, big - 17, big - 1};
    for (size_t i = 0; i < sizeof at / sizeof *at; i++) {
        l[at[i]] ^= 0x10;
        assert_true(bbe__hash_bytes(l, big) != whole);
        l[at[i]] ^= 0x10;
    }
    free(l);
}

/* An engine running Rx: Recv(/site/201, u64) -> DedupGateRx -> out. The
 * engine borrows *m: free it after the engine. */
static bb_engine *rx_engine(size_t max_envelope_bytes, bb_model **mp)
{
    bb_model *m = *mp = fx_model();
    bb_function *f = fx_fn(m, "Rx", "", "out");
    fx_recv(m, f, 201, "t", "p", &BB_TYPE_U64);
    fx_op(m, f, FX_SYS, "DedupGateRx", "p", "out");
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    if (max_envelope_bytes)
        cfg.caps.max_envelope_bytes = max_envelope_bytes;
    bb_engine *e = fx_engine(9, 7009, &cfg);
    bb_error err = {0};
    if (fx_install(e, m, "Rx", &err))
        fail_msg("%s", err.msg);
    return e;
}

static size_t outs(bb_engine *e, uint64_t now, uint64_t *last)
{
    fx_log log = {0};
    fx_run(e, &log, now, 5);
    size_t n = 0;
    const fx_rec *r;
    while ((r = fx_log_app(&log, "out", n))) {
        *last = r->value->u.u64;
        n++;
    }
    fx_log_free(&log);
    return n;
}

/* The owned entry point takes the bytes on every path (the leak checkers
 * see a refused one freed) and delivers like the copying one: the value
 * arrives, and the same envelope again is a duplicate. */
static void test_deliver_owned(void **state)
{
    (void)state;
    bb_model *m;
    bb_engine *e = rx_engine(0, &m);
    bb_peerid src = fx_peer(4), bad = {0};
    size_t n;
    bb_error err = {0};
    uint8_t *buf = fx_envelope_u64(201, 7, 100, 0, &n);
    assert_int_equal(bb_engine_deliver_envelope_owned(e, &bad, NULL, buf, n, &err), BB_EINVAL);
    buf = fx_envelope_u64(201, 7, 100, 0, &n);
    uint8_t *copy = malloc(n);
    assert_non_null(copy);
    memcpy(copy, buf, n);
    assert_int_equal(bb_engine_deliver_envelope_owned(e, &src, NULL, buf, n, &err), BB_OK);
    uint64_t v = 0;
    assert_int_equal(outs(e, 1000, &v), 1);
    assert_int_equal(v, 7);
    assert_int_equal(bb_engine_deliver_envelope_owned(e, &src, NULL, copy, n, &err), BB_OK);
    assert_int_equal(outs(e, 2000, &v), 0); /* a retransmission: DedupGateRx drops it */
    bb_engine_free(e);
    bb_model_free(m);

    e = rx_engine(16, &m);
    buf = fx_envelope_u64(201, 8, 100, 0, &n);
    assert_true(n > 16);
    assert_int_equal(bb_engine_deliver_envelope_owned(e, &src, NULL, buf, n, &err), BB_ELIMIT);
    assert_non_null(strstr(err.msg, "exceeds the 16 cap"));
    bb_engine_free(e);
    bb_model_free(m);
}

/* In place, the encoding is byte for byte bb_value_encode's; a buffer one
 * byte short is refused before anything is written. */
static void test_encode_into(void **state)
{
    (void)state;
    float f[5] = {1, 2, 3, 4, 5};
    bb_value *parts[2] = {fx_f32(f, 5), bb_value_u64(&BB_TYPE_U64, 42)};
    bb_value *values[2] = {fx_f32(f, 5), bb_value_list(&BB_TYPE_COMPOSITE, parts, 2)};
    for (int i = 0; i < 2; i++) {
        uint8_t *want;
        size_t wlen, len = 0;
        bb_error err = {0};
        assert_int_equal(bb_value_encode(values[i], &want, &wlen, &err), BB_OK);
        uint8_t *out = malloc(wlen + 1);
        assert_non_null(out);
        memset(out, 0xee, wlen + 1);
        assert_int_equal(bb_value_encode_into(values[i], out, wlen - 1, &len, &err), BB_ELIMIT);
        assert_int_equal(out[0], 0xee);
        assert_int_equal(bb_value_encode_into(values[i], out, wlen + 1, &len, &err), BB_OK);
        assert_int_equal(len, wlen);
        assert_memory_equal(out, want, wlen);
        assert_int_equal(out[wlen], 0xee);
        assert_int_equal(bb_value_encode_into(values[i], NULL, 8, &len, &err), BB_EINVAL);
        free(out);
        free(want);
        bb_value_unref(values[i]);
    }
}

/* The refs' bytes put back where they belong: the whole encoding. */
static uint8_t *reassemble(const uint8_t *out, size_t len, const bb_encode_ref *refs, size_t n,
                           size_t total)
{
    uint8_t *w = malloc(total);
    assert_non_null(w);
    size_t at = 0, k = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(w + k, out + at, refs[i].at - at);
        k += refs[i].at - at;
        memcpy(w + k, refs[i].data, refs[i].len);
        k += refs[i].len;
        at = refs[i].at;
    }
    memcpy(w + k, out + at, len - at);
    assert_int_equal(k + len - at, total);
    return w;
}

/* Payloads of min_ref bytes and more stay where they are, pointing into
 * the value; put back in place they give bb_value_encode's bytes; max_refs
 * bounds them (the rest are copied); a cap under the copied part is
 * refused. */
static void test_encode_gather(void **state)
{
    (void)state;
    float big[3000] = {0}, small[4] = {1, 2, 3, 4};
    for (int i = 0; i < 3000; i++)
        big[i] = (float)i;
    bb_value *parts[3] = {fx_f32(big, 3000), fx_f32(small, 4), fx_f32(big, 2000)};
    const uint8_t *data0 = parts[0]->u.tensor.data, *data2 = parts[2]->u.tensor.data;
    bb_value *v = bb_value_list(&BB_TYPE_COMPOSITE, parts, 3);
    uint8_t *want;
    size_t wlen, copied, nr, len;
    bb_error err = {0};
    assert_int_equal(bb_value_encode(v, &want, &wlen, &err), BB_OK);
    struct { size_t max_refs, n_refs; } cases[] = {{8, 2}, {1, 1}, {0, 0}};
    for (size_t c = 0; c < 3; c++) {
        bb_encode_ref refs[8];
        assert_int_equal(bb_value_gather_size(v, 1024, cases[c].max_refs, &copied, &nr, &err),
                         BB_OK);
        assert_int_equal(nr, cases[c].n_refs);
        uint8_t *out = malloc(copied);
        assert_non_null(out);
        if (copied)
            assert_int_equal(bb_value_encode_gather(v, out, 0, copied - 1, 1024, refs,
                                                    cases[c].max_refs, &nr, &len, &err),
                             BB_ELIMIT);
        assert_int_equal(bb_value_encode_gather(v, out, 0, copied, 1024, refs, cases[c].max_refs,
                                                &nr, &len, &err), BB_OK);
        assert_int_equal(nr, cases[c].n_refs);
        assert_int_equal(len, copied);
        if (nr >= 1)
            assert_ptr_equal(refs[0].data, data0); /* no copy: the tensor's own bytes */
        if (nr == 2)
            assert_ptr_equal(refs[1].data, data2);
        uint8_t *w = reassemble(out, len, refs, nr, wlen);
        assert_memory_equal(w, want, wlen);
        free(w);
        free(out);
    }
    free(want);
    bb_value_unref(v);
}

/* Tx: Send(x) to /site/301 of the peers given. */
static bb_engine *tx_engine(bool gather, bb_model **mp)
{
    bb_model *m = *mp = fx_model();
    bb_function *f = fx_fn(m, "Tx", "x,peers", "");
    bb_node *s = fx_op(m, f, FX_WIRE, "Send", "x,peers", "");
    fx_meta(m, s, "ai.bytesandbrains.wire_dest_site", "301");
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    cfg.send_gather = gather;
    bb_engine *e = fx_engine(1, 7001, &cfg);
    bb_error err = {0};
    if (fx_install(e, m, "Tx", &err))
        fail_msg("%s", err.msg);
    uint8_t a[32];
    bb_engine_addr addr = {a, fx_addr(7002, a)};
    bb_peerid to = fx_peer(2);
    assert_int_equal(bb_engine_add_peer(e, &to, &addr, 1, NULL), BB_OK);
    return e;
}

/* Send x from a fresh Tx engine at time 100; its one SendEnvelope step. */
static void send_once(bb_engine *e, bb_value *x, bb_steps *s)
{
    bb_peerid to = fx_peer(2);
    bb_value *items[1] = {bb_value_bytes(&BB_TYPE_PEER_ID, to.bytes, to.len)};
    bb_value *peers = bb_value_list(&BB_TYPE_PEER_ID_VEC, items, 1);
    bb_engine_input in[2] = {{.name = "x", .value = x}, {.name = "peers", .value = peers}};
    assert_int_equal(bb_engine_invoke(e, "Tx", in, 2, NULL, NULL), BB_OK);
    bb_value_unref(peers);
    bb_steps_init(s);
    bb_engine_poll(e, 100, s);
    assert_int_equal(s->n, 1);
    assert_int_equal(s->v[0].kind, BB_STEP_SEND_ENVELOPE);
}

/* With send_gather, a large tensor's envelope comes in pieces: the tensor
 * data is one piece (its own memory, not a copy) and the pieces end to end
 * are the bytes an engine without it sends. The gather keeps the tensor
 * alive after the engine and every other reference are gone. Small
 * envelopes still come as bytes. */
static void test_send_gather(void **state)
{
    (void)state;
    size_t n = 1 << 18; /* 1 MiB of floats */
    float *f = malloc(n * sizeof *f);
    assert_non_null(f);
    for (size_t i = 0; i < n; i++)
        f[i] = (float)i;
    bb_model *m1, *m2;
    bb_engine *plain = tx_engine(false, &m1), *gather = tx_engine(true, &m2);
    bb_value *x = fx_f32(f, n);
    const uint8_t *data = x->u.tensor.data;
    bb_steps a, b;
    send_once(plain, x, &a);
    send_once(gather, x, &b);
    assert_null(a.v[0].u.send.gather);
    bb_send_gather *g = b.v[0].u.send.gather;
    assert_non_null(g);
    assert_null(b.v[0].u.send.bytes);
    assert_int_equal(g->len, a.v[0].u.send.len);
    assert_int_equal(b.v[0].u.send.len, g->len);
    b.v[0].u.send.gather = NULL; /* taken */
    bb_steps_free(&b);
    bb_engine_free(gather);
    bb_model_free(m2);
    bb_value_unref(x); /* the gather's reference is the last one */
    size_t at = 0, pieces_in_tensor = 0;
    for (size_t i = 0; i < g->n_iov; i++) {
        assert_memory_equal(g->iov[i].data, a.v[0].u.send.bytes + at, g->iov[i].len);
        pieces_in_tensor += g->iov[i].data == data;
        at += g->iov[i].len;
    }
    assert_int_equal(at, g->len);
    assert_int_equal(pieces_in_tensor, 1);
    bb_send_gather_free(g);
    bb_steps_free(&a);
    bb_engine_free(plain);
    bb_model_free(m1);
    /* a small value: contiguous bytes as before */
    bb_steps c;
    plain = tx_engine(false, &m1);
    x = fx_f32(f, 16);
    send_once(plain, x, &c);
    bb_value_unref(x);
    bb_engine_free(plain);
    bb_model_free(m1);
    bb_model *m3;
    bb_engine *small = tx_engine(true, &m3);
    x = fx_f32(f, 16);
    bb_steps d;
    send_once(small, x, &d);
    bb_value_unref(x);
    assert_null(d.v[0].u.send.gather);
    assert_non_null(d.v[0].u.send.bytes);
    assert_int_equal(d.v[0].u.send.len, c.v[0].u.send.len);
    assert_memory_equal(d.v[0].u.send.bytes, c.v[0].u.send.bytes, c.v[0].u.send.len);
    bb_steps_free(&c);
    bb_steps_free(&d); /* an untaken gather or bytes are freed with the steps */
    bb_engine_free(small);
    bb_model_free(m3);
    free(f);
}

/* A tensor of BB_VALUE_ALIGN_MIN bytes or more: its raw_data starts at a
 * multiple of 64 from the start of the message wherever the encoding
 * starts in it, at no change of size. */
static void test_large_raw_data_aligned(void **state)
{
    (void)state;
    size_t n = BB_VALUE_ALIGN_MIN / sizeof(float) + 3;
    float *f = malloc(n * sizeof *f);
    assert_non_null(f);
    for (size_t i = 0; i < n; i++)
        f[i] = (float)i;
    bb_value *x = fx_f32(f, n), *small = fx_f32(f, 16);
    bb_value *parts[2] = {bb_value_ref(small), bb_value_ref(x)};
    bb_value *v = bb_value_list(&BB_TYPE_COMPOSITE, parts, 2);
    size_t size, copied, nr, len;
    bb_error err = {0};
    assert_int_equal(bb_value_encoded_size(v, &size, &err), BB_OK);
    assert_int_equal(bb_value_gather_size(v, 1024, 1, &copied, &nr, &err), BB_OK);
    uint8_t *out = malloc(copied), *whole = malloc(size);
    assert_non_null(out);
    assert_non_null(whole);
    for (size_t at = 0; at < 2 * BB_VALUE_ALIGN; at++) {
        bb_encode_ref ref;
        assert_int_equal(bb_value_encode_gather(v, out, at, copied, 1024, &ref, 1, &nr, &len,
                                                &err), BB_OK);
        assert_int_equal(nr, 1);
        assert_int_equal(len, copied); /* the same size at every position */
        assert_int_equal((at + ref.at) % BB_VALUE_ALIGN, 0);
        /* the contiguous encode at the same position lays it out the same */
        assert_int_equal(bb_value_encode_sized(v, size, whole, at, &err), BB_OK);
        assert_memory_equal(whole, out, ref.at);
        assert_memory_equal(whole + ref.at, ref.data, ref.len);
        assert_memory_equal(whole + ref.at + ref.len, out + ref.at, copied - ref.at);
        /* and it decodes back (the canonical path and the general one agree) */
        bb_value *back = NULL;
        assert_int_equal(bb_value_decode(BB_TYPE_COMPOSITE.wire_hash, whole, size, NULL, &back,
                                         &err), BB_OK);
        assert_true(bb_value_equal(back, v));
        bb_value_unref(back);
    }
    free(out);
    free(whole);
    bb_value_unref(v);
    bb_value_unref(small);
    bb_value_unref(x);
    free(f);
}

/* Rx: Recv(/site/301, f32 tensor) -> out. */
static bb_engine *tensor_rx_engine(bb_model **mp)
{
    bb_model *m = *mp = fx_model();
    bb_function *f = fx_fn(m, "Rx", "", "out");
    fx_recv(m, f, 301, "t", "p", &BB_TYPE_TENSOR_F32);
    fx_op(m, f, FX_SYS, "PassThrough", "p", "out");
    bb_engine *e = fx_engine(2, 7002, NULL);
    bb_error err = {0};
    if (fx_install(e, m, "Rx", &err))
        fail_msg("%s", err.msg);
    return e;
}

/* A large tensor sent to a node that reads the envelope into 64-byte
 * aligned memory is used where it landed: the value the receiving program
 * sees points into that memory, aligned, and holds the sender's floats. */
static void test_large_tensor_used_where_it_lands(void **state)
{
    (void)state;
    size_t n = 1 << 18;
    float *f = malloc(n * sizeof *f);
    assert_non_null(f);
    for (size_t i = 0; i < n; i++)
        f[i] = (float)i * 0.5f;
    for (int gathered = 0; gathered <= 1; gathered++) {
        bb_model *mt, *mr;
        bb_engine *tx = tx_engine(gathered, &mt), *rx = tensor_rx_engine(&mr);
        bb_value *x = fx_f32(f, n);
        bb_steps s;
        send_once(tx, x, &s);
        bb_value_unref(x);
        const bb_send_gather *g = s.v[0].u.send.gather;
        size_t len = s.v[0].u.send.len;
        uint8_t *buf = aligned_alloc(64, (len + 63) & ~(size_t)63);
        assert_non_null(buf);
        if (g) {
            size_t at = 0;
            for (size_t i = 0; i < g->n_iov; i++, at += g->iov[i - 1].len)
                memcpy(buf + at, g->iov[i].data, g->iov[i].len);
        } else {
            memcpy(buf, s.v[0].u.send.bytes, len);
        }
        bb_steps_free(&s);
        bb_peerid from = fx_peer(1);
        bb_error err = {0};
        assert_int_equal(bb_engine_deliver_envelope_owned(rx, &from, NULL, buf, len, &err), BB_OK);
        fx_log log = {0};
        fx_run(rx, &log, 1000, 5);
        const fx_rec *r = fx_log_app(&log, "out", 0);
        assert_non_null(r);
        const uint8_t *d = r->value->u.tensor.data;
        assert_true(d >= buf && d + n * sizeof(float) <= buf + len); /* no copy */
        assert_int_equal((d - buf) % 64, 0);
        assert_memory_equal(d, f, n * sizeof(float));
        fx_log_free(&log);
        bb_engine_free(rx);
        bb_engine_free(tx);
        bb_model_free(mr);
        bb_model_free(mt);
    }
    free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash_bytes),
        cmocka_unit_test(test_deliver_owned),
        cmocka_unit_test(test_encode_into),
        cmocka_unit_test(test_encode_gather),
        cmocka_unit_test(test_send_gather),
        cmocka_unit_test(test_large_raw_data_aligned),
        cmocka_unit_test(test_large_tensor_used_where_it_lands),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
