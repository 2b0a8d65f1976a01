/* Unit tests for runtime values: buffers, constructors, refcounts, equality,
 * varints, and the wire codec (round trips, malformed inputs, fuzzing). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <cmocka.h>

#include "bb/value.h"
#include "bb/uvarint.h"

/* ---- helpers ------------------------------------------------------------- */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rnd(rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545f4914f6cdd1dull;
}

static size_t rnd_below(rng *r, size_t n)
{
    return n ? (size_t)(rnd(r) % n) : 0;
}

static void rnd_fill(rng *r, uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)rnd(r);
}

static const int32_t leaf_dtypes[] = {BB_DT_FLOAT, BB_DT_DOUBLE, BB_DT_FLOAT16, BB_DT_BFLOAT16,
                                      BB_DT_INT8, BB_DT_INT16, BB_DT_INT32, BB_DT_INT64,
                                      BB_DT_UINT8, BB_DT_UINT16, BB_DT_UINT32, BB_DT_UINT64,
                                      BB_DT_BOOL};
#define N_DTYPES (sizeof leaf_dtypes / sizeof leaf_dtypes[0])

static size_t dt_size(int32_t dt)
{
    switch (dt) {
    case BB_DT_FLOAT: case BB_DT_INT32: case BB_DT_UINT32: return 4;
    case BB_DT_DOUBLE: case BB_DT_INT64: case BB_DT_UINT64: return 8;
    case BB_DT_FLOAT16: case BB_DT_BFLOAT16: case BB_DT_INT16: case BB_DT_UINT16: return 2;
    default: return 1;
    }
}

static bb_value *random_tensor(rng *r, int32_t dt)
{
    int64_t dims[BB_MAX_DIMS];
    uint32_t ndim = (uint32_t)rnd_below(r, 4);
    for (uint32_t i = 0; i < ndim; i++)
        dims[i] = (int64_t)rnd_below(r, 4);
    bb_value *v = bb_value_tensor_new(dt, ndim, dims);
    assert_non_null(v);
    rnd_fill(r, v->u.tensor.data, v->u.tensor.nbytes);
    return v;
}

static bb_value *sample_value(const bb_type_node *t, rng *r, int depth)
{
    uint8_t bytes[64];
    size_t n;
    switch (t->kind) {
    case BB_VK_TRIGGER:
        return bb_value_trigger();
    case BB_VK_U64:
        return bb_value_u64(t, rnd(r));
    case BB_VK_TENSOR:
        return random_tensor(r, t->elem_type);
    case BB_VK_BYTES:
    case BB_VK_PEER_ID:
    case BB_VK_ADDRESS:
        n = rnd_below(r, 40);
        rnd_fill(r, bytes, n);
        return bb_value_bytes(t, bytes, n);
    case BB_VK_PEER_ID_VEC:
    case BB_VK_ADDRESS_VEC: {
        bb_value *items[4];
        n = rnd_below(r, 5);
        for (size_t i = 0; i < n; i++)
            items[i] = sample_value(t->kind == BB_VK_PEER_ID_VEC ? &BB_TYPE_PEER_ID
                                                                 : &BB_TYPE_MULTIADDRESS,
                                    r, depth + 1);
        return bb_value_list(t, items, n);
    }
    case BB_VK_COMPOSITE:
    case BB_VK_RESPONSE_BATCH: {
        bb_value *items[3], *peers[3];
        n = depth > 2 ? 0 : rnd_below(r, 4);
        for (size_t i = 0; i < n; i++) {
            const bb_type_node *ct;
            do
                ct = bb_type_at(rnd_below(r, bb_type_count()));
            while (!bb_type_is_leaf(ct));
            items[i] = sample_value(ct, r, depth + 1);
            peers[i] = sample_value(&BB_TYPE_PEER_ID, r, depth + 1);
        }
        if (t->kind == BB_VK_COMPOSITE) {
            for (size_t i = 0; i < n; i++)
                bb_value_unref(peers[i]);
            return bb_value_list(t, items, n);
        }
        return bb_value_response_batch(items, peers, n);
    }
    default:
        return NULL;
    }
}

/* Encode, check the size, decode both ways, compare, release v. */
static void roundtrip(bb_value *v)
{
    bb_error err = {0};
    size_t sz = 0, len = 0;
    uint8_t *enc = NULL;
    assert_non_null(v);
    assert_int_equal(bb_value_encoded_size(v, &sz, &err), BB_OK);
    assert_int_equal(bb_value_encode(v, &enc, &len, &err), BB_OK);
    assert_int_equal(len, sz);

    bb_value *d = NULL;
    if (bb_value_decode(v->type->wire_hash, enc, len, NULL, &d, &err))
        fail_msg("decode %s: %s", v->type->name, err.msg);
    assert_ptr_equal(d->type, v->type);
    assert_true(bb_value_equal(v, d));
    assert_true(bb_value_equal(d, v));

    bb_buffer *b = bb_buffer_adopt(enc, len);
    bb_value *d2 = NULL;
    if (bb_value_decode_buf(v->type->wire_hash, b, NULL, &d2, &err))
        fail_msg("decode_buf %s: %s", v->type->name, err.msg);
    bb_buffer_unref(b); /* d2 keeps what it shares alive */
    assert_true(bb_value_equal(v, d2));
    bb_value_unref(d2);
    bb_value_unref(d);
    bb_value_unref(v);
}

/* ---- buffers ------------------------------------------------------------- */

/* Large blocks: aligned, zeroed when asked even when the freed block is
 * handed out again, and a block is only reused for one of its size. */
static void test_large_blocks_reused_zeroed(void **state)
{
    (void)state;
    size_t big = BB_LARGE_BYTES + 12345, other = 3 * BB_LARGE_BYTES;
    uint8_t *a = bb_large_alloc(big);
    assert_non_null(a);
    assert_int_equal((uintptr_t)a % 64, 0);
    memset(a, 0xAB, big);
    bb_large_free(a, big);
    uint8_t *b = bb_large_calloc(big); /* may be a again: must read zero */
    assert_non_null(b);
    for (size_t i = 0; i < big; i += 4093)
        assert_int_equal(b[i], 0);
    assert_int_equal(b[big - 1], 0);
    memset(b, 0xCD, big);
    bb_large_free(b, big);
    uint8_t *c = bb_large_alloc(other); /* another size: never the kept block */
    assert_non_null(c);
    assert_ptr_not_equal(c, b);
    memset(c, 1, other);
    bb_buffer *buf = bb_buffer_new(big); /* may take b: zero all the same */
    assert_non_null(buf);
    assert_int_equal((uintptr_t)buf->data % 64, 0);
    for (size_t i = 0; i < big; i += 4093)
        assert_int_equal(buf->data[i], 0);
    bb_buffer_unref(buf);
    bb_buffer *adopted = bb_buffer_adopt_large(c, other); /* its last unref frees c */
    assert_non_null(adopted);
    assert_ptr_equal(adopted->data, c);
    assert_int_equal(adopted->len, other);
    assert_int_equal(adopted->data[other - 1], 1);
    bb_buffer_unref(adopted);
    uint8_t *small = bb_large_calloc(100), *none = bb_large_alloc(0);
    assert_non_null(small);
    assert_non_null(none);
    assert_int_equal(small[99], 0);
    bb_large_free(small, 100);
    bb_large_free(none, 0);
    assert_null(bb_large_alloc(SIZE_MAX - 10));
    assert_null(bb_large_calloc(SIZE_MAX - 10));
    bb_large_free(NULL, big);
#if !defined(__SANITIZE_ADDRESS__) /* a mapping kept, not malloc: the same block comes back */
    uint8_t *k = bb_large_alloc(big);
    assert_non_null(k);
    bb_large_free(k, big);
    bb_large_release_idle(60000); /* kept for less than a minute: stays */
    uint8_t *again = bb_large_alloc(big);
    assert_ptr_equal(again, k);
    bb_large_free(again, big);
#endif
    bb_large_release_idle(0); /* gives it back; the next block is a fresh one */
    uint8_t *fresh = bb_large_calloc(big);
    assert_non_null(fresh);
    assert_int_equal(fresh[big / 2], 0);
    bb_large_free(fresh, big);
    bb_large_release_idle(0);
}

static void test_buffer_new_aligned_zeroed(void **state)
{
    (void)state;
    for (size_t len = 0; len < 300; len += 7) {
        bb_buffer *b = bb_buffer_new(len);
        assert_non_null(b);
        assert_int_equal((uintptr_t)b->data % 64, 0);
        assert_int_equal(b->len, len);
        for (size_t i = 0; i < len; i++)
            assert_int_equal(b->data[i], 0);
        memset(b->data, 0x5a, len);
        assert_ptr_equal(bb_buffer_ref(b), b);
        assert_int_equal(atomic_load(&b->refs), 2);
        bb_buffer_unref(b);
        bb_buffer_unref(b);
    }
    assert_null(bb_buffer_new(SIZE_MAX - 10));
    bb_buffer_unref(NULL);
    assert_null(bb_buffer_ref(NULL));
}

typedef struct free_probe {
    int calls;
    uint8_t *data;
    size_t len;
} free_probe;

static void probe_free(void *ctx, uint8_t *data, size_t len)
{
    free_probe *p = ctx;
    p->calls++;
    p->data = data;
    p->len = len;
}

static void test_buffer_wrap_adopt(void **state)
{
    (void)state;
    uint8_t mem[16];
    free_probe p = {0};
    bb_buffer *b = bb_buffer_wrap(mem, sizeof mem, probe_free, &p);
    assert_non_null(b);
    bb_buffer_ref(b);
    bb_buffer_unref(b);
    assert_int_equal(p.calls, 0);
    bb_buffer_unref(b);
    assert_int_equal(p.calls, 1);
    assert_ptr_equal(p.data, mem);
    assert_int_equal(p.len, 16);

    /* wrap without a free function borrows the memory */
    b = bb_buffer_wrap(mem, sizeof mem, NULL, NULL);
    bb_buffer_unref(b);

    uint8_t *heap = malloc(100); /* freed by the buffer (valgrind checks) */
    assert_non_null(heap);
    b = bb_buffer_adopt(heap, 100);
    assert_ptr_equal(b->data, heap);
    bb_buffer_unref(b);
}

/* ---- constructors -------------------------------------------------------- */

static void test_shape_numel(void **state)
{
    (void)state;
    int64_t d[BB_MAX_DIMS + 1] = {2, 3, 4};
    assert_int_equal(bb_shape_numel(0, NULL), 1);
    assert_int_equal(bb_shape_numel(3, d), 24);
    d[1] = 0;
    assert_int_equal(bb_shape_numel(3, d), 0);
    d[1] = -1;
    assert_true(bb_shape_numel(3, d) == SIZE_MAX);
    int64_t big[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
    assert_true(bb_shape_numel(2, big) == SIZE_MAX);
    big[1] = 0; /* a zero dim makes any shape empty */
    assert_int_equal(bb_shape_numel(2, big), 0);
    assert_true(bb_shape_numel(BB_MAX_DIMS + 1, d) == SIZE_MAX);
    assert_true(bb_shape_numel(2, NULL) == SIZE_MAX);
}

/* A tensor value's element size: the dtypes with a tensor leaf, nothing else. */
static void test_tensor_elem_size(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_DTYPES; i++)
        assert_int_equal(bb_tensor_elem_size(leaf_dtypes[i]), dt_size(leaf_dtypes[i]));
    /* ONNX gives these a size, but no tensor value carries them */
    assert_int_equal(bb_dtype_size(BB_DT_COMPLEX64), 8);
    assert_int_equal(bb_tensor_elem_size(BB_DT_COMPLEX64), 0);
    assert_int_equal(bb_tensor_elem_size(BB_DT_FLOAT8E4M3FN), 0);
    assert_int_equal(bb_tensor_elem_size(BB_DT_STRING), 0);
    assert_int_equal(bb_tensor_elem_size(BB_DT_UNDEFINED), 0);
    assert_int_equal(bb_tensor_elem_size(-1), 0);
    assert_int_equal(bb_tensor_elem_size(BB_DT_MAX + 1), 0);
}

static void test_constructors(void **state)
{
    (void)state;
    bb_value *v = bb_value_trigger();
    assert_ptr_equal(v->type, &BB_TYPE_TRIGGER);
    assert_int_equal(atomic_load(&v->refs), 1);
    bb_value_unref(v);

    v = bb_value_u64(&BB_TYPE_TIMESTAMP, 42);
    assert_int_equal(v->u.u64, 42);
    bb_value_unref(v);
    assert_null(bb_value_u64(&BB_TYPE_BYTES, 1));
    assert_null(bb_value_u64(NULL, 1));

    v = bb_value_bytes(&BB_TYPE_PEER_ID, "abc", 3);
    assert_int_equal(v->u.bytes.len, 3);
    assert_memory_equal(v->u.bytes.data, "abc", 3);
    bb_value_unref(v);
    v = bb_value_bytes(&BB_TYPE_BYTES, NULL, 0);
    assert_non_null(v);
    assert_int_equal(v->u.bytes.len, 0);
    bb_value_unref(v);
    assert_null(bb_value_bytes(&BB_TYPE_U64, "abc", 3));
    assert_null(bb_value_bytes(&BB_TYPE_BYTES, NULL, 3));

    bb_buffer *b = bb_buffer_new(32);
    v = bb_value_bytes_buf(&BB_TYPE_MULTIADDRESS, b, b->data + 8, 24);
    assert_non_null(v);
    assert_int_equal(atomic_load(&b->refs), 2);
    assert_null(bb_value_bytes_buf(&BB_TYPE_MULTIADDRESS, b, b->data + 8, 25));
    assert_int_equal(atomic_load(&b->refs), 2);
    bb_value_unref(v);
    assert_int_equal(atomic_load(&b->refs), 1);

    int64_t dims[3] = {2, 2, 2};
    v = bb_value_tensor_wrap(BB_DT_FLOAT, 2, dims, b, b->data + 16); /* 16 bytes at 16 */
    assert_non_null(v);
    assert_int_equal(v->u.tensor.nbytes, 16);
    assert_ptr_equal(bb_tensor_f32(v), (float *)(void *)(b->data + 16));
    assert_int_equal(bb_tensor_numel(v), 4);
    bb_value_unref(v);
    assert_null(bb_value_tensor_wrap(BB_DT_FLOAT, 2, dims, b, b->data + 20)); /* past end */
    assert_null(bb_value_tensor_wrap(BB_DT_FLOAT, 2, dims, b, b->data + 2));  /* misaligned */
    assert_null(bb_value_tensor_wrap(BB_DT_FLOAT, 2, dims, NULL, b->data));
    assert_int_equal(atomic_load(&b->refs), 1);
    bb_buffer_unref(b);

    v = bb_value_tensor_new(BB_DT_INT64, 3, dims);
    assert_int_equal(v->u.tensor.nbytes, 64);
    assert_int_equal((uintptr_t)v->u.tensor.data % 64, 0);
    for (size_t i = 0; i < 64; i++)
        assert_int_equal(v->u.tensor.data[i], 0);
    bb_value_unref(v);
    assert_null(bb_value_tensor_new(BB_DT_STRING, 0, NULL));
    assert_null(bb_value_tensor_new(BB_DT_FLOAT, BB_MAX_DIMS + 1, dims));
    int64_t neg[1] = {-2};
    assert_null(bb_value_tensor_new(BB_DT_FLOAT, 1, neg));

    float f[4] = {1, 2, 3, 4};
    v = bb_value_tensor_copy(BB_DT_FLOAT, 1, (int64_t[]){4}, f, sizeof f);
    assert_memory_equal(v->u.tensor.data, f, sizeof f);
    bb_value_unref(v);
    assert_null(bb_value_tensor_copy(BB_DT_FLOAT, 1, (int64_t[]){3}, f, sizeof f));
    v = bb_value_tensor_copy(BB_DT_FLOAT, 1, (int64_t[]){0}, NULL, 0);
    assert_non_null(v);
    bb_value_unref(v);
}

static void test_list_takes_refs(void **state)
{
    (void)state;
    bb_value *p = bb_value_bytes(&BB_TYPE_PEER_ID, "p", 1);
    bb_value *u = bb_value_u64(&BB_TYPE_U64, 7);
    /* wrong item type: fails and still consumes both references */
    bb_value_ref(p);
    bb_value_ref(u);
    bb_value *items[2] = {p, u};
    assert_null(bb_value_list(&BB_TYPE_PEER_ID_VEC, items, 2));
    assert_int_equal(atomic_load(&p->refs), 1);
    assert_int_equal(atomic_load(&u->refs), 1);
    /* non-list type */
    bb_value_ref(p);
    assert_null(bb_value_list(&BB_TYPE_BYTES, &p, 1));
    assert_int_equal(atomic_load(&p->refs), 1);
    /* a composite takes anything */
    bb_value *c = bb_value_list(&BB_TYPE_COMPOSITE, items, 2);
    assert_non_null(c);
    assert_int_equal(c->u.list.n, 2);
    bb_value *empty = bb_value_list(&BB_TYPE_ADDRESS_VEC, NULL, 0);
    assert_non_null(empty);
    assert_int_equal(empty->u.list.n, 0);
    bb_value_unref(empty);

    /* a batch needs PeerId senders */
    bb_value *peer = bb_value_bytes(&BB_TYPE_PEER_ID, "q", 1);
    bb_value *bad_peer = bb_value_u64(&BB_TYPE_U64, 1);
    bb_value_ref(c);
    assert_null(bb_value_response_batch(&c, &bad_peer, 1));
    assert_int_equal(atomic_load(&c->refs), 1);
    bb_value *batch = bb_value_response_batch(&c, &peer, 1);
    assert_non_null(batch);
    assert_ptr_equal(batch->u.batch.items[0], c);
    assert_ptr_equal(batch->u.batch.peers[0], peer);
    bb_value_unref(batch);
}

static void test_equality(void **state)
{
    (void)state;
    bb_value *a = bb_value_u64(&BB_TYPE_REQUEST_ID, 5), *b = bb_value_u64(&BB_TYPE_COMMAND_ID, 5);
    bb_value *c = bb_value_u64(&BB_TYPE_REQUEST_ID, 5), *d = bb_value_u64(&BB_TYPE_REQUEST_ID, 6);
    assert_false(bb_value_equal(a, b));
    assert_true(bb_value_equal(a, c));
    assert_false(bb_value_equal(a, d));
    assert_false(bb_value_equal(a, NULL));
    bb_value_unref(a);
    bb_value_unref(b);
    bb_value_unref(c);
    bb_value_unref(d);

    int64_t d23[2] = {2, 3}, d32[2] = {3, 2};
    bb_value *t1 = bb_value_tensor_new(BB_DT_FLOAT, 2, d23);
    bb_value *t2 = bb_value_tensor_new(BB_DT_FLOAT, 2, d32);
    bb_value *t3 = bb_value_tensor_new(BB_DT_INT32, 2, d23);
    bb_value *t4 = bb_value_tensor_new(BB_DT_FLOAT, 2, d23);
    assert_false(bb_value_equal(t1, t2));
    assert_false(bb_value_equal(t1, t3));
    assert_true(bb_value_equal(t1, t4));
    t4->u.tensor.data[5] = 1;
    assert_false(bb_value_equal(t1, t4));
    bb_value_unref(t1);
    bb_value_unref(t2);
    bb_value_unref(t3);
    bb_value_unref(t4);

    bb_value *x = bb_value_bytes(&BB_TYPE_BYTES, "ab", 2), *y = bb_value_bytes(&BB_TYPE_BYTES, "ac", 2);
    bb_value *cx = bb_value_list(&BB_TYPE_COMPOSITE, &x, 1);
    bb_value *cy = bb_value_list(&BB_TYPE_COMPOSITE, &y, 1);
    assert_false(bb_value_equal(cx, cy));
    bb_value_unref(cx);
    bb_value_unref(cy);
}

/* Two threads hammer one value's and one buffer's refcount. */
static void *hammer(void *arg)
{
    bb_value *v = arg;
    for (int i = 0; i < 1000000; i++) {
        bb_value_ref(v);
        bb_buffer_ref(v->u.tensor.buf);
        bb_buffer_unref(v->u.tensor.buf);
        bb_value_unref(v);
    }
    return NULL;
}

static void test_refcount_threads(void **state)
{
    (void)state;
    bb_value *v = bb_value_tensor_new(BB_DT_FLOAT, 1, (int64_t[]){16});
    pthread_t t1, t2;
    assert_int_equal(pthread_create(&t1, NULL, hammer, v), 0);
    assert_int_equal(pthread_create(&t2, NULL, hammer, v), 0);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    assert_int_equal(atomic_load(&v->refs), 1);
    assert_int_equal(atomic_load(&v->u.tensor.buf->refs), 1);
    bb_value_unref(v);
}

/* ---- round trips ------------------------------------------------------------ */

static void test_roundtrip_every_type(void **state)
{
    (void)state;
    rng r = {0x1234567};
    size_t leaves = 0;
    for (size_t i = 0; i < bb_type_count(); i++) {
        const bb_type_node *t = bb_type_at(i);
        if (!bb_type_is_leaf(t))
            continue;
        leaves++;
        for (int k = 0; k < 20; k++)
            roundtrip(sample_value(t, &r, 0));
    }
    assert_int_equal(leaves, 28);
}

static void test_roundtrip_tensors(void **state)
{
    (void)state;
    rng r = {99};
    static const struct {
        uint32_t ndim;
        int64_t dims[BB_MAX_DIMS];
    } shapes[] = {
        {0, {0}},          /* 0-d scalar */
        {1, {0}},          /* empty */
        {3, {3, 0, 2}},    /* empty in the middle */
        {1, {5}},
        {2, {2, 3}},
        {3, {2, 3, 4}},
        {8, {1, 2, 1, 2, 1, 2, 1, 3}},
        {1, {300}},        /* multi-byte varints in dims and length */
    };
    for (size_t i = 0; i < N_DTYPES; i++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            bb_value *v = bb_value_tensor_new(leaf_dtypes[i], shapes[s].ndim, shapes[s].dims);
            assert_non_null(v);
            assert_ptr_equal(v->type, bb_type_tensor_of(leaf_dtypes[i]));
            assert_int_equal(v->u.tensor.nbytes,
                             bb_shape_numel(shapes[s].ndim, shapes[s].dims) * dt_size(leaf_dtypes[i]));
            rnd_fill(&r, v->u.tensor.data, v->u.tensor.nbytes);
            /* the abstract tensor hash also decodes any dtype */
            uint8_t *enc;
            size_t len;
            bb_value *d;
            assert_int_equal(bb_value_encode(v, &enc, &len, NULL), BB_OK);
            assert_int_equal(bb_value_decode(BB_TYPE_TENSOR.wire_hash, enc, len, NULL, &d, NULL),
                             BB_OK);
            assert_true(bb_value_equal(v, d));
            bb_value_unref(d);
            free(enc);
            roundtrip(v);
        }
    }
}

static bb_value *peer(const char *s)
{
    return bb_value_bytes(&BB_TYPE_PEER_ID, s, strlen(s));
}

static void test_roundtrip_composites(void **state)
{
    (void)state;
    /* composite containing a composite, a tensor, vectors and scalars */
    bb_value *inner_items[3] = {
        bb_value_u64(&BB_TYPE_U64, 1000),
        bb_value_tensor_copy(BB_DT_FLOAT, 1, (int64_t[]){3}, (float[]){1, 2, 3}, 12),
        bb_value_list(&BB_TYPE_PEER_ID_VEC, NULL, 0),
    };
    bb_value *inner = bb_value_list(&BB_TYPE_COMPOSITE, inner_items, 3);
    bb_value *pv[2] = {peer("alice"), peer("bob")};
    bb_value *av[1] = {bb_value_bytes(&BB_TYPE_MULTIADDRESS, "\x04\x7f\x00\x00\x01", 5)};
    bb_value *outer_items[5] = {
        inner,
        bb_value_list(&BB_TYPE_PEER_ID_VEC, pv, 2),
        bb_value_list(&BB_TYPE_ADDRESS_VEC, av, 1),
        bb_value_trigger(),
        bb_value_list(&BB_TYPE_COMPOSITE, NULL, 0),
    };
    bb_value *outer = bb_value_list(&BB_TYPE_COMPOSITE, outer_items, 5);
    assert_non_null(outer);
    bb_value_ref(outer);
    roundtrip(outer);

    /* response batch of composites, with an empty PeerId */
    bb_value *items[2] = {outer, bb_value_u64(&BB_TYPE_CORRELATION_TOKEN, 77)};
    bb_value *peers[2] = {peer("carol"), bb_value_bytes(&BB_TYPE_PEER_ID, NULL, 0)};
    roundtrip(bb_value_response_batch(items, peers, 2));
    roundtrip(bb_value_response_batch(NULL, NULL, 0));
    roundtrip(bb_value_list(&BB_TYPE_ADDRESS_VEC, NULL, 0));

    /* large Bytes are shared with the source buffer by decode_buf */
    uint8_t *big = calloc(1, 10000);
    big[9999] = 7;
    roundtrip(bb_value_bytes(&BB_TYPE_BYTES, big, 10000));
    free(big);
}

/* Lists and batches up to BB_VALUE_LIST_INLINE / BB_VALUE_BATCH_INLINE
 * items live inside the value, longer ones in an array of their own: both
 * sides of each bound build, round-trip (the decoder has the same bound)
 * and keep their items in order. */
static void test_inline_and_heap_lists(void **state)
{
    (void)state;
    enum { MAX_N = BB_VALUE_LIST_INLINE + 1 };
    const size_t list_ns[] = {BB_VALUE_LIST_INLINE, BB_VALUE_LIST_INLINE + 1};
    for (size_t k = 0; k < 2; k++) {
        size_t n = list_ns[k];
        bb_value *pv[MAX_N], *cv[MAX_N];
        for (size_t i = 0; i < n; i++) {
            char name[32];
            snprintf(name, sizeof name, "peer%zu", i);
            pv[i] = peer(name);
            cv[i] = bb_value_u64(&BB_TYPE_U64, 100 + i);
        }
        bb_value *list = bb_value_list(&BB_TYPE_PEER_ID_VEC, pv, n);
        bb_value *comp = bb_value_list(&BB_TYPE_COMPOSITE, cv, n);
        assert_non_null(list);
        assert_non_null(comp);
        assert_int_equal(list->u.list.n, n);
        char last[32];
        int last_len = snprintf(last, sizeof last, "peer%zu", n - 1);
        assert_int_equal(list->u.list.items[n - 1]->u.bytes.len, last_len);
        assert_memory_equal(list->u.list.items[n - 1]->u.bytes.data, last, (size_t)last_len);
        assert_true(comp->u.list.items[n - 1]->u.u64 == 100 + n - 1);
        roundtrip(list);
        roundtrip(comp);
    }
    const size_t batch_ns[] = {BB_VALUE_BATCH_INLINE, BB_VALUE_BATCH_INLINE + 1};
    for (size_t k = 0; k < 2; k++) {
        size_t n = batch_ns[k];
        bb_value *items[BB_VALUE_BATCH_INLINE + 1], *peers[BB_VALUE_BATCH_INLINE + 1];
        for (size_t i = 0; i < n; i++) {
            char name[32];
            snprintf(name, sizeof name, "from%zu", i);
            items[i] = bb_value_u64(&BB_TYPE_U64, 7 * i);
            peers[i] = peer(name);
        }
        bb_value *batch = bb_value_response_batch(items, peers, n);
        assert_non_null(batch);
        assert_int_equal(batch->u.batch.n, n);
        assert_true(batch->u.batch.items[n - 1]->u.u64 == 7 * (n - 1));
        char last[32];
        int last_len = snprintf(last, sizeof last, "from%zu", n - 1);
        assert_int_equal(batch->u.batch.peers[n - 1]->u.bytes.len, last_len);
        assert_memory_equal(batch->u.batch.peers[n - 1]->u.bytes.data, last, (size_t)last_len);
        assert_memory_equal(batch->u.batch.peers[0]->u.bytes.data, "from0", 5);
        roundtrip(batch);
    }
}

static void test_exact_encodings(void **state)
{
    (void)state;
    uint8_t *enc;
    size_t len;
    bb_value *v = bb_value_u64(&BB_TYPE_TIMESTAMP, 0x0102030405060708u);
    assert_int_equal(bb_value_encode(v, &enc, &len, NULL), BB_OK);
    assert_int_equal(len, 8);
    assert_memory_equal(enc, "\x08\x07\x06\x05\x04\x03\x02\x01", 8);
    free(enc);
    bb_value_unref(v);

    v = bb_value_trigger();
    assert_int_equal(bb_value_encode(v, &enc, &len, NULL), BB_OK);
    assert_int_equal(len, 0);
    free(enc);

    /* composite of one Trigger: count, hash LE, length 0 */
    bb_value *c = bb_value_list(&BB_TYPE_COMPOSITE, &v, 1);
    assert_int_equal(bb_value_encode(c, &enc, &len, NULL), BB_OK);
    assert_int_equal(len, 10);
    assert_int_equal(enc[0], 1);
    uint64_t h = 0;
    for (int i = 0; i < 8; i++)
        h |= (uint64_t)enc[1 + i] << (8 * i);
    assert_true(h == BB_TYPE_TRIGGER.wire_hash);
    assert_int_equal(enc[9], 0);
    free(enc);
    bb_value_unref(c);

    /* peer_id_vec: count, then length-prefixed items */
    bb_value *pv[2] = {peer("ab"), peer("c")};
    v = bb_value_list(&BB_TYPE_PEER_ID_VEC, pv, 2);
    assert_int_equal(bb_value_encode(v, &enc, &len, NULL), BB_OK);
    assert_int_equal(len, 6);
    assert_memory_equal(enc, "\x02\x02" "ab" "\x01" "c", 6);
    free(enc);
    bb_value_unref(v);

    /* tensor: packed dims, data_type, raw_data */
    v = bb_value_tensor_copy(BB_DT_INT8, 2, (int64_t[]){1, 2}, "\x05\xfb", 2);
    assert_int_equal(bb_value_encode(v, &enc, &len, NULL), BB_OK);
    const uint8_t want[] = {0x0a, 0x02, 0x01, 0x02, 0x10, 0x03, 0x4a, 0x02, 0x05, 0xfb};
    assert_int_equal(len, sizeof want);
    assert_memory_equal(enc, want, sizeof want);
    /* the same bytes when the caller sized the value already */
    size_t n;
    assert_int_equal(bb_value_encoded_size(v, &n, NULL), BB_OK);
    uint8_t sized[sizeof want + 1];
    sized[sizeof want] = 0xee;
    assert_int_equal(bb_value_encode_sized(v, n, sized, 0, NULL), BB_OK);
    assert_memory_equal(sized, want, sizeof want);
    assert_int_equal(sized[sizeof want], 0xee); /* nothing past n */
    bb_error err;
    bb_error_clear(&err);
    assert_int_equal(bb_value_encode_sized(v, n - 1, sized, 0, &err), BB_ERUNTIME); /* a bug */
    assert_int_equal(bb_value_encode_sized(NULL, 0, sized, 0, &err), BB_EINVAL);
    free(enc);
    bb_value_unref(v);

    assert_int_equal(bb_value_encode(NULL, &enc, &len, NULL), BB_EINVAL);
}

/* TensorProto bytes written by python3-onnx (helper.make_tensor and
 * numpy_helper.from_array): unpacked dims, typed fields, a name. */
static void expect_tensor(const uint8_t *bytes, size_t len, const bb_type_node *t, uint32_t ndim,
                          const int64_t *dims, const void *data, size_t nbytes)
{
    bb_value *v = NULL;
    bb_error err = {0};
    if (bb_value_decode(t->wire_hash, bytes, len, NULL, &v, &err))
        fail_msg("%s: %s", t->name, err.msg);
    assert_ptr_equal(v->type, t);
    assert_int_equal(v->u.tensor.ndim, ndim);
    for (uint32_t i = 0; i < ndim; i++)
        assert_int_equal(v->u.tensor.dims[i], dims[i]);
    assert_int_equal(v->u.tensor.nbytes, nbytes);
    assert_memory_equal(v->u.tensor.data, data, nbytes);
    assert_int_equal((uintptr_t)v->u.tensor.data % dt_size(v->u.tensor.dtype), 0);
    bb_value_unref(v);
}

static void test_decode_onnx_tensors(void **state)
{
    (void)state;
    const int64_t d23[2] = {2, 3}, d2[1] = {2}, d3[1] = {3};
    const uint8_t float_data[] = {
        0x08, 0x02, 0x08, 0x03, 0x10, 0x01, 0x22, 0x18, 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00,
        0x00, 0x40, 0x00, 0x00, 0x40, 0x40, 0x00, 0x00, 0x80, 0x40, 0x00, 0x00, 0xa0, 0x40,
        0x00, 0x00, 0xd0, 0x40, 0x42, 0x01, 0x77};
    const float fv[6] = {1, 2, 3, 4, 5, 6.5f};
    expect_tensor(float_data, sizeof float_data, &BB_TYPE_TENSOR_F32, 2, d23, fv, sizeof fv);

    const uint8_t raw_f32[] = {
        0x08, 0x02, 0x08, 0x03, 0x10, 0x01, 0x42, 0x01, 0x77, 0x4a, 0x18, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x40, 0x40, 0x00,
        0x00, 0x80, 0x40, 0x00, 0x00, 0xa0, 0x40};
    const float rv[6] = {0, 1, 2, 3, 4, 5};
    expect_tensor(raw_f32, sizeof raw_f32, &BB_TYPE_TENSOR_F32, 2, d23, rv, sizeof rv);

    const uint8_t int64_data[] = {0x08, 0x03, 0x10, 0x07, 0x3a, 0x11, 0xff, 0xff, 0xff,
                                  0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00, 0x80,
                                  0x80, 0x80, 0x80, 0x80, 0x20, 0x42, 0x01, 0x69};
    const int64_t iv[3] = {-1, 0, INT64_C(1) << 40};
    expect_tensor(int64_data, sizeof int64_data, &BB_TYPE_TENSOR_I64, 1, d3, iv, sizeof iv);

    const uint8_t f16[] = {0x08, 0x02, 0x10, 0x0a, 0x2a, 0x05, 0x80, 0x78,
                           0x80, 0x80, 0x03, 0x42, 0x01, 0x68};
    const uint16_t hv[2] = {15360, 49152};
    expect_tensor(f16, sizeof f16, &BB_TYPE_TENSOR_F16, 1, d2, hv, sizeof hv);

    const uint8_t boolt[] = {0x08, 0x03, 0x10, 0x09, 0x2a, 0x03, 0x01, 0x00, 0x01, 0x42, 0x01, 0x62};
    expect_tensor(boolt, sizeof boolt, &BB_TYPE_TENSOR_BOOL, 1, d3, "\x01\x00\x01", 3);

    const uint8_t u64[] = {0x08, 0x02, 0x10, 0x0d, 0x42, 0x01, 0x75, 0x5a, 0x0b, 0x80, 0x80, 0x80,
                           0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x05};
    const uint64_t uv[2] = {UINT64_C(1) << 63, 5};
    expect_tensor(u64, sizeof u64, &BB_TYPE_TENSOR_U64, 1, d2, uv, sizeof uv);

    const uint8_t dbl[] = {0x10, 0x0b, 0x42, 0x01, 0x64, 0x52, 0x08, 0x00,
                           0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x40};
    const double dv = 2.5;
    expect_tensor(dbl, sizeof dbl, &BB_TYPE_TENSOR_F64, 0, NULL, &dv, sizeof dv);

    const uint8_t i8[] = {0x08, 0x02, 0x10, 0x03, 0x2a, 0x0b, 0xfd, 0xff, 0xff, 0xff,
                          0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x07, 0x42, 0x01, 0x73};
    expect_tensor(i8, sizeof i8, &BB_TYPE_TENSOR_I8, 1, d2, "\xfd\x07", 2);

    /* unpacked typed elements, uint32 via uint64_data, unknown fields of
     * every wire type skipped (doc_string 12, a fixed64 99, a fixed32 98) */
    const uint8_t mixed[] = {0x08, 0x02,                                  /* dim 2 */
                             0x62, 0x02, 'h', 'i',                        /* doc_string */
                             0x10, 0x0c,                                  /* UINT32 */
                             0x58, 0x07,                                  /* uint64_data 7 */
                             0x99, 0x06, 1, 2, 3, 4, 5, 6, 7, 8,          /* field 99 fixed64 */
                             0x95, 0x06, 1, 2, 3, 4,                      /* field 98 fixed32 */
                             0xf8, 0x07, 0x05,                            /* field 127 varint */
                             0x58, 0x80, 0x80, 0x80, 0x80, 0x08};         /* uint64_data 2^31 */
    const uint32_t mv[2] = {7, 0x80000000u};
    expect_tensor(mixed, sizeof mixed, &BB_TYPE_TENSOR_U32, 1, d2, mv, sizeof mv);

    /* float_data as unpacked fixed32 items, double_data packed */
    const uint8_t unpacked_f[] = {0x08, 0x02, 0x10, 0x01, 0x25, 0x00, 0x00, 0x80, 0x3f,
                                  0x25, 0x00, 0x00, 0x00, 0x40};
    expect_tensor(unpacked_f, sizeof unpacked_f, &BB_TYPE_TENSOR_F32, 1, d2, (float[]){1, 2}, 8);
}

/* The encoder's own layout is read by a one-pass decoder; the same fields
 * in another order, or the layout with anything off, by the general one.
 * Both must agree on every value, and the general one still explains. */
static void test_decode_canonical_matches_general(void **state)
{
    (void)state;
    const float fv[6] = {1, 2, 3, 4, 5, 6};
    const int64_t d23[2] = {2, 3};
    uint8_t canon[8 + 24] = {0x0a, 0x02, 0x02, 0x03, 0x10, 0x01, 0x4a, 0x18};
    memcpy(canon + 8, fv, sizeof fv);
    uint8_t reordered[8 + 24] = {0x10, 0x01, 0x0a, 0x02, 0x02, 0x03, 0x4a, 0x18};
    memcpy(reordered + 8, fv, sizeof fv);
    uint8_t raw_first[8 + 24] = {0x4a, 0x18};
    memcpy(raw_first + 2, fv, sizeof fv);
    memcpy(raw_first + 26, (uint8_t[]){0x0a, 0x02, 0x02, 0x03, 0x10, 0x01}, 6);
    expect_tensor(canon, sizeof canon, &BB_TYPE_TENSOR_F32, 2, d23, fv, sizeof fv);
    expect_tensor(reordered, sizeof reordered, &BB_TYPE_TENSOR_F32, 2, d23, fv, sizeof fv);
    expect_tensor(raw_first, sizeof raw_first, &BB_TYPE_TENSOR_F32, 2, d23, fv, sizeof fv);
    /* a scalar: no dims field */
    const uint8_t scalar[] = {0x10, 0x01, 0x4a, 0x04, 0, 0, 0x80, 0x3f};
    const float one = 1.0f;
    expect_tensor(scalar, sizeof scalar, &BB_TYPE_TENSOR_F32, 0, NULL, &one, 4);
    /* the layout, but wrong: each case gets the general decoder's message */
    bb_value *v = NULL;
    bb_error err;
    bb_error_clear(&err);
    canon[7] = 0x14; /* raw_data 20 bytes, shape needs 24 */
    assert_int_equal(bb_value_decode(BB_TYPE_TENSOR_F32.wire_hash, canon, 8 + 20, NULL, &v, &err), BB_EDECODE);
    assert_non_null(strstr(err.msg, "raw_data has 20 bytes, shape needs 24"));
    canon[7] = 0x18;
    bb_decode_limits lim = BB_DECODE_LIMITS_DEFAULT;
    lim.max_bytes = 16; /* the value is 24 bytes of data */
    assert_int_equal(bb_value_decode(BB_TYPE_TENSOR_F32.wire_hash, canon, sizeof canon, &lim, &v, &err), BB_ELIMIT);
    canon[5] = 11; /* data_type double where f32 is expected */
    assert_int_equal(bb_value_decode(BB_TYPE_TENSOR_F32.wire_hash, canon, sizeof canon, NULL, &v, &err), BB_EDECODE);
    assert_non_null(strstr(err.msg, "where tensor"));
    assert_null(v);
}

static void test_decode_tensor_buf_adopts(void **state)
{
    (void)state;
    /* our own encoding of f32 [2,3]: raw_data starts at byte 8 (aligned) */
    bb_value *v = bb_value_tensor_copy(BB_DT_FLOAT, 2, (int64_t[]){2, 3},
                                       (float[]){1, 2, 3, 4, 5, 6}, 24);
    uint8_t *enc;
    size_t len;
    assert_int_equal(bb_value_encode(v, &enc, &len, NULL), BB_OK);
    bb_buffer *b = bb_buffer_new(len);
    memcpy(b->data, enc, len);
    free(enc);
    bb_value *d = NULL;
    assert_int_equal(bb_value_decode_tensor_buf(b, NULL, &d, NULL), BB_OK);
    assert_ptr_equal(d->u.tensor.buf, b);
    assert_ptr_equal(d->u.tensor.data, b->data + 8);
    assert_int_equal(atomic_load(&b->refs), 2);
    bb_buffer_unref(b); /* the tensor keeps the buffer alive */
    assert_true(bb_value_equal(v, d));
    bb_value_unref(d);

    /* a name before raw_data puts it at byte 11: copied, buffer not shared */
    const uint8_t raw_f32[] = {
        0x08, 0x02, 0x08, 0x03, 0x10, 0x01, 0x42, 0x01, 0x77, 0x4a, 0x18, 0x00, 0x00, 0x80,
        0x3f, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x40, 0x40, 0x00, 0x00, 0x80, 0x40, 0x00,
        0x00, 0xa0, 0x40, 0x00, 0x00, 0xc0, 0x40};
    b = bb_buffer_new(sizeof raw_f32);
    memcpy(b->data, raw_f32, sizeof raw_f32);
    assert_int_equal(bb_value_decode_tensor_buf(b, NULL, &d, NULL), BB_OK);
    assert_ptr_not_equal(d->u.tensor.buf, b);
    assert_int_equal(atomic_load(&b->refs), 1);
    assert_int_equal((uintptr_t)d->u.tensor.data % 4, 0);
    assert_true(bb_value_equal(v, d));
    bb_value_unref(d);
    bb_buffer_unref(b);

    /* a tensor inside a composite is adopted by bb_value_decode_buf too */
    bb_value *c = bb_value_list(&BB_TYPE_COMPOSITE, &v, 1);
    assert_int_equal(bb_value_encode(c, &enc, &len, NULL), BB_OK);
    /* composite header is 1 + 8 + 1 bytes, so raw_data lands at byte 18: pad
     * the buffer so it is 4-aligned */
    b = bb_buffer_new(len + 2);
    memcpy(b->data + 2, enc, len);
    bb_buffer *view = bb_buffer_wrap(b->data + 2, len, NULL, NULL);
    assert_int_equal(bb_value_decode_buf(BB_TYPE_COMPOSITE.wire_hash, view, NULL, &d, NULL), BB_OK);
    assert_ptr_equal(d->u.list.items[0]->u.tensor.buf, view);
    assert_true(bb_value_equal(c, d));
    bb_value_unref(d);
    bb_buffer_unref(view);
    bb_buffer_unref(b);
    free(enc);
    bb_value_unref(c);

    /* not a tensor */
    b = bb_buffer_new(2);
    memcpy(b->data, "\x10\x08", 2);
    bb_error err;
    assert_int_equal(bb_value_decode_tensor_buf(b, NULL, &d, &err), BB_EDECODE);
    assert_null(d);
    bb_buffer_unref(b);
    assert_int_equal(bb_value_decode_tensor_buf(NULL, NULL, &d, &err), BB_EINVAL);
}

/* ---- malformed inputs ---------------------------------------------------- */

typedef struct bad_case {
    const char *what;
    uint64_t hash;
    const uint8_t *bytes;
    size_t len;
    int code;
    const char *substr;
} bad_case;

#define B(...) (const uint8_t[]){__VA_ARGS__}, sizeof((const uint8_t[]){__VA_ARGS__})
#define F32 BB_TYPE_TENSOR_F32.wire_hash
#define PVEC BB_TYPE_PEER_ID_VEC.wire_hash
#define COMP BB_TYPE_COMPOSITE.wire_hash
#define BATCH BB_TYPE_RESPONSE_BATCH.wire_hash
#define HASH_LE(h) (uint8_t)(h), (uint8_t)((h) >> 8), (uint8_t)((h) >> 16), \
    (uint8_t)((h) >> 24), (uint8_t)((h) >> 32), (uint8_t)((h) >> 40),          \
    (uint8_t)((h) >> 48), (uint8_t)((h) >> 56)
#define TRIG_LE HASH_LE(0x43f3abb298244398u)
#define BYTES_LE HASH_LE(0xdedd388637a4d1e7u)
#define U64_LE HASH_LE(0x07e7d303a57580c5u)

static void check_bad(const bad_case *c, const bb_decode_limits *lim)
{
    bb_error err = {0};
    bb_value *v = (bb_value *)(uintptr_t)1;
    int rc = bb_value_decode(c->hash, c->bytes, c->len, lim, &v, &err);
    if (rc != c->code)
        fail_msg("%s: got %s (%s), want %s", c->what, bb_status_name(rc), err.msg,
                 bb_status_name(c->code));
    assert_null(v);
    assert_int_equal(err.code, c->code);
    if (!strstr(err.msg, c->substr))
        fail_msg("%s: message \"%s\" lacks \"%s\"", c->what, err.msg, c->substr);
    if (!strstr(err.msg, "byte "))
        fail_msg("%s: message \"%s\" names no offset", c->what, err.msg);
    /* the same bytes through the buffer path fail the same way */
    bb_buffer *b = bb_buffer_new(c->len);
    if (c->len)
        memcpy(b->data, c->bytes, c->len);
    assert_int_equal(bb_value_decode_buf(c->hash, b, lim, &v, NULL), c->code);
    assert_int_equal(atomic_load(&b->refs), 1);
    bb_buffer_unref(b);
}

static void test_malformed(void **state)
{
    (void)state;
    const bad_case cases[] = {
        {"unknown hash", 0x1234, B(0), BB_EDECODE, "0x0000000000001234"},
        {"any", BB_TYPE_ANY.wire_hash, B(0), BB_EDECODE, "no wire encoding"},
        {"ndim 9", F32, B(0x0a, 9, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0x10, 1, 0x4a, 4, 0, 0, 0, 0),
         BB_ELIMIT, "byte 10: tensor: more than 8 dims"},
        {"ndim 9 unpacked", F32, B(0x08, 1, 0x08, 1, 0x08, 1, 0x08, 1, 0x08, 1, 0x08, 1, 0x08, 1,
                                   0x08, 1, 0x08, 1, 0x10, 1, 0x4a, 4, 0, 0, 0, 0),
         BB_ELIMIT, "byte 16"},
        {"negative dim", F32, B(0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
                                0x10, 1),
         BB_EDECODE, "negative dim -1"},
        {"raw short", F32, B(0x08, 2, 0x10, 1, 0x4a, 4, 0, 0, 0, 0), BB_EDECODE,
         "byte 4: tensor: raw_data has 4 bytes, shape needs 8"},
        {"raw long", F32, B(0x08, 1, 0x10, 1, 0x4a, 8, 0, 0, 0, 0, 0, 0, 0, 0), BB_EDECODE,
         "raw_data has 8 bytes, shape needs 4"},
        {"no data", F32, B(0x10, 1), BB_EDECODE, "raw_data has 0 bytes, shape needs 4"},
        {"numel overflow", F32, B(0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 0x08, 0x80, 0x80,
                                  0x80, 0x80, 0x80, 0x20, 0x10, 1),
         BB_EDECODE, "overflows"},
        {"missing data_type", F32, B(0x4a, 0), BB_EDECODE, "missing data_type"},
        {"string dtype", F32, B(0x10, 8), BB_EDECODE, "unsupported data_type 8"},
        {"dtype mismatch", BB_TYPE_TENSOR_I64.wire_hash, B(0x10, 1, 0x4a, 4, 0, 0, 0, 0),
         BB_EDECODE, "where tensor_i64 was expected"},
        {"truncated varint", F32, B(0x10, 0x81), BB_EDECODE, "byte 1: tensor field value: truncated"},
        {"varint too long", F32, B(0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                   0xff, 0x01),
         BB_EDECODE, "longer than 64 bits"},
        {"length past end", F32, B(0x10, 1, 0x4a, 5, 0, 0), BB_EDECODE,
         "byte 3: tensor field length: length 5 exceeds the 2 bytes left"},
        {"group", F32, B(0x0b), BB_EDECODE, "groups"},
        {"wire type 6", F32, B(0x0e), BB_EDECODE, "invalid wire type 6"},
        {"field 0", F32, B(0x00), BB_EDECODE, "invalid field number 0"},
        {"truncated fixed32", F32, B(0x10, 1, 0x25, 0, 0), BB_EDECODE, "truncated fixed32"},
        {"raw and typed", F32, B(0x10, 1, 0x25, 0, 0, 0, 0, 0x4a, 4, 0, 0, 0, 0), BB_EDECODE,
         "both raw_data and float_data"},
        {"typed wrong dtype", BB_TYPE_TENSOR.wire_hash, B(0x10, 7, 0x25, 0, 0, 0, 0),
         BB_EDECODE, "float_data cannot hold data_type 7"},
        {"typed count", F32, B(0x08, 2, 0x10, 1, 0x25, 0, 0, 0, 0), BB_EDECODE,
         "float_data has 1 elements, shape needs 2"},
        {"packed float len", F32, B(0x10, 1, 0x22, 3, 0, 0, 0), BB_EDECODE, "multiple of 4"},
        {"float_data varint", F32, B(0x10, 1, 0x20, 1), BB_EDECODE, "wrong wire type 0"},
        {"dims fixed32", F32, B(0x0d, 1, 0, 0, 0, 0x10, 1), BB_EDECODE, "dims: wrong wire type"},
        {"two typed fields", F32, B(0x10, 1, 0x25, 0, 0, 0, 0, 0x28, 1), BB_EDECODE,
         "both float_data and int32_data"},
        {"bad packed varint", BB_TYPE_TENSOR_I64.wire_hash, B(0x10, 7, 0x3a, 1, 0x80),
         BB_EDECODE, "int64_data: truncated varint"},
        {"u64 short", BB_TYPE_U64.wire_hash, B(1, 2, 3, 4, 5, 6, 7), BB_EDECODE,
         "truncated (7 of 8 bytes)"},
        {"u64 long", BB_TYPE_REQUEST_ID.wire_hash, B(1, 2, 3, 4, 5, 6, 7, 8, 9), BB_EDECODE,
         "byte 8: RequestId: 1 trailing bytes"},
        {"trigger bytes", BB_TYPE_TRIGGER.wire_hash, B(0), BB_EDECODE, "trailing"},
        {"vec count", PVEC, B(5, 1, 0), BB_EDECODE, "5 items cannot fit in 2 bytes"},
        {"vec count varint", PVEC, B(0x80), BB_EDECODE, "truncated varint"},
        {"vec item past end", PVEC, B(1, 5, 1, 2), BB_EDECODE, "length 5 exceeds"},
        {"vec trailing", BB_TYPE_ADDRESS_VEC.wire_hash, B(1, 1, 0xaa, 0xbb), BB_EDECODE,
         "byte 3: address_vec: 1 trailing bytes"},
        {"composite count", COMP, B(2, 0, 0, 0, 0, 0, 0, 0, 0, 0), BB_EDECODE, "cannot fit"},
        {"composite trunc hash", COMP, B(2, BYTES_LE, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9), BB_EDECODE,
         "byte 19: composite child 1: truncated type hash"},
        {"composite child hash", COMP, B(1, 1, 2, 3, 4, 5, 6, 7, 8, 0), BB_EDECODE,
         "composite child 0: byte 10: unknown type hash 0x0807060504030201"},
        {"composite child bad", COMP, B(1, U64_LE, 3, 1, 2, 3), BB_EDECODE,
         "composite child 0: byte 10: U64: truncated"},
        {"composite child len", COMP, B(1, TRIG_LE, 4), BB_EDECODE, "exceeds"},
        {"composite trailing", COMP, B(1, TRIG_LE, 0, 0xee), BB_EDECODE,
         "byte 10: Composite: 1 trailing bytes"},
        {"batch count", BATCH, B(1, 0, TRIG_LE), BB_EDECODE, "cannot fit"},
        {"batch peer len", BATCH, B(1, 30, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), BB_EDECODE,
         "response peer: length 30 exceeds"},
        {"batch child", BATCH, B(1, 1, 'p', TRIG_LE, 1, 0), BB_EDECODE,
         "response 0: byte 12: Trigger: 1 trailing bytes"},
        {"batch trailing", BATCH, B(1, 1, 'p', TRIG_LE, 0, 9), BB_EDECODE, "trailing"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_bad(&cases[i], NULL);

    /* limits */
    bb_decode_limits lim = BB_DECODE_LIMITS_DEFAULT;
    assert_int_equal(lim.max_bytes, 256u << 20);
    assert_int_equal(lim.max_items, 65536);
    assert_int_equal(lim.max_depth, 16);
    lim.max_bytes = 64;
    const bad_case big_tensor = {"tensor bytes", F32, B(0x08, 0xe8, 0x07, 0x10, 1), BB_ELIMIT,
                                 "4000 bytes exceed the 64-byte limit"};
    check_bad(&big_tensor, &lim);
    lim.max_bytes = 4;
    const bad_case big_input = {"input", BB_TYPE_U64.wire_hash, B(1, 2, 3, 4, 5, 6, 7, 8),
                                BB_ELIMIT, "value of 8 bytes exceeds the 4-byte limit"};
    check_bad(&big_input, &lim);
    lim = BB_DECODE_LIMITS_DEFAULT;
    lim.max_items = 2;
    const bad_case many = {"items", PVEC, B(3, 0, 0, 0), BB_ELIMIT, "3 items exceed the limit of 2"};
    check_bad(&many, &lim);
    const bad_case many_c = {"children", COMP, B(3, TRIG_LE, 0, TRIG_LE, 0, TRIG_LE, 0),
                             BB_ELIMIT, "exceed the limit"};
    check_bad(&many_c, &lim);

    bb_value *v;
    assert_int_equal(bb_value_decode(F32, NULL, 3, NULL, &v, NULL), BB_EINVAL);
    assert_int_equal(bb_value_decode(F32, (const uint8_t *)"", 0, NULL, NULL, NULL), BB_EINVAL);
}

/* depth nested composites around an empty one, as bytes; with batches,
 * the outermost level and every second one inside it is a ResponseBatch */
static bool level_is_batch(unsigned j, unsigned depth, bool batch_inside)
{
    return batch_inside && (depth - 1 - j) % 2 == 0;
}

static uint8_t *nested_composites(unsigned depth, bool batch_inside, size_t *len)
{
    size_t cap = 1 + depth * 32;
    uint8_t *buf = malloc(cap), *tmp = malloc(cap);
    size_t n = 1;
    buf[0] = 0; /* level 0: an empty composite / batch */
    for (unsigned j = 1; j < depth; j++) {
        uint64_t h = level_is_batch(j - 1, depth, batch_inside) ? BB_TYPE_RESPONSE_BATCH.wire_hash
                                                                 : BB_TYPE_COMPOSITE.wire_hash;
        size_t m = 0;
        tmp[m++] = 1;
        if (level_is_batch(j, depth, batch_inside))
            tmp[m++] = 0; /* empty PeerId */
        for (int k = 0; k < 8; k++)
            tmp[m++] = (uint8_t)(h >> (8 * k));
        m += bb_uvarint_encode(n, tmp + m);
        memcpy(tmp + m, buf, n);
        m += n;
        memcpy(buf, tmp, m);
        n = m;
    }
    free(tmp);
    *len = n;
    return buf;
}

static void test_depth_limit(void **state)
{
    (void)state;
    for (int batch = 0; batch < 2; batch++) {
        size_t len;
        bb_value *v = NULL;
        bb_error err;
        uint64_t top = batch ? BB_TYPE_RESPONSE_BATCH.wire_hash : BB_TYPE_COMPOSITE.wire_hash;
        uint8_t *ok = nested_composites(16, batch, &len);
        if (bb_value_decode(top, ok, len, NULL, &v, &err))
            fail_msg("16 levels: %s", err.msg);
        roundtrip(v);
        free(ok);
        uint8_t *deep = nested_composites(17, batch, &len);
        int rc = bb_value_decode(top, deep, len, NULL, &v, &err);
        if (rc != BB_ELIMIT)
            fail_msg("17 levels (batch %d): %s", batch, err.msg);
        assert_non_null(strstr(err.msg, "nesting deeper than 16"));
        free(deep);
    }
}

/* ---- fuzz ----------------------------------------------------------------- */

/* Returns whether the input decoded. */
static bool fuzz_one(uint64_t hash, const uint8_t *p, size_t n, bool via_buf)
{
    bb_value *v = NULL;
    bb_error err = {0};
    int rc;
    if (via_buf) {
        bb_buffer *b = bb_buffer_new(n);
        if (n)
            memcpy(b->data, p, n);
        rc = bb_value_decode_buf(hash, b, NULL, &v, &err);
        bb_buffer_unref(b);
    } else {
        rc = bb_value_decode(hash, p, n, NULL, &v, &err);
    }
    if (rc) {
        assert_null(v);
        assert_true(rc == BB_EDECODE || rc == BB_ELIMIT);
        assert_non_null(strstr(err.msg, "byte "));
        return false;
    }
    /* whatever decodes re-encodes to something that decodes to the same */
    uint8_t *enc;
    size_t len;
    bb_value *w = NULL;
    assert_int_equal(bb_value_encode(v, &enc, &len, NULL), BB_OK);
    assert_int_equal(bb_value_decode(v->type->wire_hash, enc, len, NULL, &w, NULL), BB_OK);
    assert_true(bb_value_equal(v, w));
    free(enc);
    bb_value_unref(w);
    bb_value_unref(v);
    return true;
}

static void mutate(rng *r, uint8_t *p, size_t *n, size_t cap)
{
    int k = 1 + (int)rnd_below(r, 4);
    while (k--) {
        switch (rnd_below(r, 6)) {
        case 0: /* flip a bit */
            if (*n)
                p[rnd_below(r, *n)] ^= (uint8_t)(1u << rnd_below(r, 8));
            break;
        case 1: /* interesting byte */
            if (*n) {
                static const uint8_t vals[] = {0, 1, 0x7f, 0x80, 0xff, 0x08, 0x10, 0x4a, 0x0a};
                p[rnd_below(r, *n)] = vals[rnd_below(r, sizeof vals)];
            }
            break;
        case 2: /* truncate */
            *n = rnd_below(r, *n + 1);
            break;
        case 3: /* insert */
            if (*n < cap) {
                size_t at = rnd_below(r, *n + 1);
                memmove(p + at + 1, p + at, *n - at);
                p[at] = (uint8_t)rnd(r);
                (*n)++;
            }
            break;
        case 4: /* delete */
            if (*n) {
                size_t at = rnd_below(r, *n);
                memmove(p + at, p + at + 1, *n - at - 1);
                (*n)--;
            }
            break;
        default: /* append random bytes */
            while (*n < cap && rnd_below(r, 3))
                p[(*n)++] = (uint8_t)rnd(r);
            break;
        }
    }
}

static void test_fuzz(void **state)
{
    (void)state;
    rng r = {0xfeedface};
    enum { CAP = 4096, ROUNDS = 3000 };
    uint8_t *buf = malloc(CAP);
    for (size_t i = 0; i <= bb_type_count(); i++) {
        const bb_type_node *t = bb_type_at(i); /* NULL: an unknown hash */
        uint64_t hash = t ? t->wire_hash : 0xdeadbeefu;
        size_t ok = 0;
        for (int round = 0; round < ROUNDS; round++) {
            size_t n;
            const bb_type_node *st = t == &BB_TYPE_TENSOR
                                         ? bb_type_tensor_of(leaf_dtypes[rnd_below(&r, N_DTYPES)])
                                         : t;
            if (round % 3 == 0 || !st || !bb_type_is_leaf(st)) {
                n = rnd_below(&r, 64);
                rnd_fill(&r, buf, n);
            } else {
                bb_value *v = sample_value(st, &r, 0);
                uint8_t *enc;
                assert_int_equal(bb_value_encode(v, &enc, &n, NULL), BB_OK);
                bb_value_unref(v);
                if (n > CAP / 2)
                    n = CAP / 2;
                memcpy(buf, enc, n);
                free(enc);
                mutate(&r, buf, &n, CAP);
            }
            ok += fuzz_one(hash, buf, n, round & 1);
        }
        /* both outcomes must be exercised for every decodable type */
        bool any_bytes_ok = t && (t->kind == BB_VK_BYTES || t->kind == BB_VK_PEER_ID ||
                                  t->kind == BB_VK_ADDRESS);
        if (any_bytes_ok)
            assert_int_equal(ok, ROUNDS);
        else if (t && t != &BB_TYPE_ANY && (ok == 0 || ok == ROUNDS))
            fail_msg("fuzz %s: %zu of %d inputs decoded", t->name, ok, ROUNDS);
        if (!t || t == &BB_TYPE_ANY)
            assert_int_equal(ok, 0);
    }
    free(buf);
}

/* bb_value_wrap_head then a value's encoding is, byte for byte, the
 * encoding of the one-child Composite holding it: every leaf type, and a
 * tensor large enough that its length takes more than one varint byte. */
static void test_wrap_head_is_the_composites_start(void **state)
{
    (void)state;
    rng r = {0x77a11ce};
    for (size_t k = 0; k <= bb_type_count(); k++) {
        bb_value *child;
        if (k < bb_type_count()) {
            const bb_type_node *t = bb_type_at(k);
            if (!bb_type_is_leaf(t) || !(child = sample_value(t, &r, 0)))
                continue;
        } else {
            int64_t dims[1] = {300};
            child = bb_value_tensor_new(BB_DT_FLOAT, 1, dims);
            assert_non_null(child);
        }
        size_t clen, hlen, wlen, blen;
        assert_int_equal(bb_value_encoded_size(child, &clen, NULL), BB_OK);
        uint8_t head[BB_VALUE_WRAP_HEAD_MAX];
        hlen = bb_value_wrap_head(child, clen, head);
        assert_true(hlen > 0 && hlen <= BB_VALUE_WRAP_HEAD_MAX);
        bb_value *one = bb_value_ref(child);
        bb_value *wrap = bb_value_list(&BB_TYPE_COMPOSITE, &one, 1);
        assert_non_null(wrap);
        uint8_t *whole, *body;
        assert_int_equal(bb_value_encode(wrap, &whole, &wlen, NULL), BB_OK);
        assert_int_equal(bb_value_encode(child, &body, &blen, NULL), BB_OK);
        assert_int_equal(wlen, hlen + blen);
        assert_memory_equal(whole, head, hlen);
        if (blen)
            assert_memory_equal(whole + hlen, body, blen);
        free(whole);
        free(body);
        bb_value_unref(wrap);
        bb_value_unref(child);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buffer_new_aligned_zeroed),
        cmocka_unit_test(test_large_blocks_reused_zeroed),
        cmocka_unit_test(test_buffer_wrap_adopt),
        cmocka_unit_test(test_shape_numel),
        cmocka_unit_test(test_tensor_elem_size),
        cmocka_unit_test(test_constructors),
        cmocka_unit_test(test_list_takes_refs),
        cmocka_unit_test(test_equality),
        cmocka_unit_test(test_refcount_threads),
        cmocka_unit_test(test_roundtrip_every_type),
        cmocka_unit_test(test_roundtrip_tensors),
        cmocka_unit_test(test_roundtrip_composites),
        cmocka_unit_test(test_inline_and_heap_lists),
        cmocka_unit_test(test_exact_encodings),
        cmocka_unit_test(test_decode_onnx_tensors),
        cmocka_unit_test(test_decode_canonical_matches_general),
        cmocka_unit_test(test_decode_tensor_buf_adopts),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_depth_limit),
        cmocka_unit_test(test_fuzz),
        cmocka_unit_test(test_wrap_head_is_the_composites_start),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
