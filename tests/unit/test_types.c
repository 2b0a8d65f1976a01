/* Unit tests for the type tree: wire hashes, lookups, is_a/meet, TypeProto. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "bb/types.h"

static void test_fnv_vectors(void **state)
{
    (void)state;
    assert_true(bb_fnv1a64("", 0) == 0xcbf29ce484222325u);
    assert_true(bb_fnv1a64("a", 1) == 0xaf63dc4c8601ec8cu);
    assert_true(bb_fnv1a64("foobar", 6) == 0x85944171f73967e8u);
    /* wire hash is the FNV of "<name>@<version>" */
    assert_true(bb_wire_hash("foobar", 1) == bb_fnv1a64("foobar@1", 8));
    assert_true(bb_wire_hash("PeerId", 12) == bb_fnv1a64("PeerId@12", 9));
    assert_true(bb_wire_hash("PeerId", 1) != bb_wire_hash("PeerId", 2));
}

/* Wire hashes computed outside libbbir (a separate FNV-1a-64 over the UTF-8
 * text "<name>@<version>", in Python), so a wrong constant or a wrong
 * hash function cannot agree with itself. */
static void test_known_wire_hashes(void **state)
{
    (void)state;
    static const struct {
        const bb_type_node *t;
        uint64_t hash;
    } known[] = {
        {&BB_TYPE_ANY, 0x43614ecd98c5d212u},
        {&BB_TYPE_TENSOR, 0xbaba199f6d53cd27u},
        {&BB_TYPE_TENSOR_F32, 0xde0b1255a2537213u},
        {&BB_TYPE_TENSOR_I64, 0x3fa0d4b4b448e04du},
        {&BB_TYPE_TENSOR_BOOL, 0x5cb23b4bc4e496c6u},
        {&BB_TYPE_TRIGGER, 0x43f3abb298244398u},
        {&BB_TYPE_PEER_ID, 0x8fa3e38993c2032fu},
        {&BB_TYPE_MULTIADDRESS, 0xef661c462bf197adu},
        {&BB_TYPE_REQUEST_ID, 0xaf3233d3cd60cab4u},
        {&BB_TYPE_WIRE_REQUEST_ID, 0xc1f9088adf91c82fu},
        {&BB_TYPE_COMMAND_ID, 0x5dbd8496b008e594u},
        {&BB_TYPE_TIMESTAMP, 0xc7933acac1693558u},
        {&BB_TYPE_EVENT_KIND, 0x9b147a9335fae75au},
        {&BB_TYPE_CORRELATION_TOKEN, 0x628420d12d9e2b47u},
        {&BB_TYPE_RESPONSE_BATCH, 0xaf5a08576635341du},
        {&BB_TYPE_ADDRESS_VEC, 0x92c3e4560794cab1u},
        {&BB_TYPE_COMPOSITE, 0x6e3f003c3300cdb7u},
        {&BB_TYPE_BYTES, 0xdedd388637a4d1e7u},
        {&BB_TYPE_U64, 0x07e7d303a57580c5u},
        {&BB_TYPE_PEER_ID_VEC, 0x18f376d9dcf7fcb5u},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        const bb_type_node *t = known[i].t;
        if (t->wire_hash != known[i].hash || bb_wire_hash(t->name, 1) != known[i].hash)
            fail_msg("%s@1: table 0x%016llx, computed 0x%016llx, want 0x%016llx", t->name,
                     (unsigned long long)t->wire_hash,
                     (unsigned long long)bb_wire_hash(t->name, 1),
                     (unsigned long long)known[i].hash);
        assert_ptr_equal(bb_type_by_wire_hash(known[i].hash), t);
    }
    /* the opset version is part of the hashed text */
    assert_true(bb_wire_hash("PeerId", 12) == 0xd57ebfc612ab4a47u);
    assert_true(bb_wire_hash("Trigger", 2) == 0x43f3aeb2982448b1u);
    assert_true(bb_wire_hash("tensor_f32", 17) == 0xa0424b82d3caf32cu);
}

static void test_every_node_hash_and_denotation(void **state)
{
    (void)state;
    size_t n = bb_type_count();
    assert_int_equal(n, 30);
    assert_ptr_equal(bb_type_at(0), &BB_TYPE_ANY);
    assert_null(bb_type_at(n));
    for (size_t i = 0; i < n; i++) {
        const bb_type_node *t = bb_type_at(i);
        assert_non_null(t);
        assert_int_equal(t->opset_version, 1);
        if (t->wire_hash != bb_wire_hash(t->name, 1))
            fail_msg("precomputed hash of %s is 0x%016llx, want 0x%016llx", t->name,
                     (unsigned long long)t->wire_hash,
                     (unsigned long long)bb_wire_hash(t->name, 1));
        char want[128];
        snprintf(want, sizeof want, "ai.bytesandbrains.%s", t->name);
        assert_string_equal(t->denotation, want);
        /* lookups find the node itself */
        assert_ptr_equal(bb_type_by_name(t->name), t);
        assert_ptr_equal(bb_type_by_denotation(t->denotation), t);
        assert_ptr_equal(bb_type_by_wire_hash(t->wire_hash), t);
        /* parents come before children in the listing, root first */
        if (i == 0) {
            assert_null(t->parent);
        } else {
            assert_non_null(t->parent);
            int found = 0;
            for (size_t j = 0; j < i; j++)
                found |= bb_type_at(j) == t->parent;
            assert_true(found);
        }
        for (size_t j = 0; j < i; j++) {
            const bb_type_node *u = bb_type_at(j);
            assert_true(strcmp(u->name, t->name) != 0);
            assert_true(strcmp(u->denotation, t->denotation) != 0);
            assert_true(u->wire_hash != t->wire_hash);
        }
    }
    assert_null(bb_type_by_name("nope"));
    assert_null(bb_type_by_name(NULL));
    assert_null(bb_type_by_denotation("ai.bytesandbrains.nope"));
    assert_null(bb_type_by_wire_hash(0));
}

static void test_tree_shape(void **state)
{
    (void)state;
    assert_ptr_equal(BB_TYPE_TENSOR.parent, &BB_TYPE_ANY);
    assert_ptr_equal(BB_TYPE_TENSOR_F32.parent, &BB_TYPE_TENSOR);
    assert_ptr_equal(BB_TYPE_PEER_ID.parent, &BB_TYPE_ANY);
    assert_ptr_equal(BB_TYPE_PEER_ID_VEC.seq_elem, &BB_TYPE_PEER_ID);
    assert_int_equal(BB_TYPE_PEER_ID_VEC.shape, BB_TS_SEQUENCE);
    assert_int_equal(BB_TYPE_ANY.shape, BB_TS_ANY);
    assert_int_equal(BB_TYPE_ANY.kind, BB_VK_ABSTRACT);
    assert_int_equal(BB_TYPE_TENSOR.kind, BB_VK_ABSTRACT);
    assert_int_equal(BB_TYPE_TIMESTAMP.kind, BB_VK_U64);
    assert_int_equal(BB_TYPE_MULTIADDRESS.kind, BB_VK_ADDRESS);
    assert_string_equal(BB_TYPE_MULTIADDRESS.name, "Multiaddress");
    assert_string_equal(BB_TYPE_ADDRESS_VEC.name, "address_vec");

    static const int32_t dts[] = {BB_DT_FLOAT, BB_DT_DOUBLE, BB_DT_FLOAT16, BB_DT_BFLOAT16,
                                  BB_DT_INT8, BB_DT_INT16, BB_DT_INT32, BB_DT_INT64,
                                  BB_DT_UINT8, BB_DT_UINT16, BB_DT_UINT32, BB_DT_UINT64,
                                  BB_DT_BOOL};
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
        const bb_type_node *t = bb_type_tensor_of(dts[i]);
        assert_non_null(t);
        assert_int_equal(t->elem_type, dts[i]);
        assert_int_equal(t->kind, BB_VK_TENSOR);
        assert_ptr_equal(t->parent, &BB_TYPE_TENSOR);
    }
    assert_null(bb_type_tensor_of(BB_DT_STRING));
    assert_null(bb_type_tensor_of(BB_DT_UNDEFINED));
    assert_null(bb_type_tensor_of(BB_DT_COMPLEX64));
    assert_null(bb_type_tensor_of(999));

    size_t leaves = 0;
    for (size_t i = 0; i < bb_type_count(); i++)
        leaves += bb_type_is_leaf(bb_type_at(i));
    assert_int_equal(leaves, 28);
    assert_false(bb_type_is_leaf(NULL));
}

static void test_is_a_and_meet(void **state)
{
    (void)state;
    assert_true(bb_type_is_a(&BB_TYPE_TENSOR_F32, &BB_TYPE_TENSOR));
    assert_true(bb_type_is_a(&BB_TYPE_TENSOR_F32, &BB_TYPE_ANY));
    assert_true(bb_type_is_a(&BB_TYPE_TENSOR_F32, &BB_TYPE_TENSOR_F32));
    assert_false(bb_type_is_a(&BB_TYPE_TENSOR, &BB_TYPE_TENSOR_F32));
    assert_false(bb_type_is_a(&BB_TYPE_TENSOR_F32, &BB_TYPE_TENSOR_I64));
    assert_false(bb_type_is_a(&BB_TYPE_PEER_ID, &BB_TYPE_TENSOR));
    assert_true(bb_type_is_a(&BB_TYPE_PEER_ID_VEC, &BB_TYPE_ANY));
    assert_false(bb_type_is_a(NULL, &BB_TYPE_ANY));
    assert_false(bb_type_is_a(&BB_TYPE_ANY, NULL));

    for (size_t i = 0; i < bb_type_count(); i++) {
        const bb_type_node *t = bb_type_at(i);
        assert_true(bb_type_is_a(t, &BB_TYPE_ANY));
        assert_ptr_equal(bb_type_meet(t, &BB_TYPE_ANY), t);
        assert_ptr_equal(bb_type_meet(&BB_TYPE_ANY, t), t);
        assert_ptr_equal(bb_type_meet(t, t), t);
    }
    assert_ptr_equal(bb_type_meet(&BB_TYPE_TENSOR, &BB_TYPE_TENSOR_I8), &BB_TYPE_TENSOR_I8);
    assert_ptr_equal(bb_type_meet(&BB_TYPE_TENSOR_I8, &BB_TYPE_TENSOR), &BB_TYPE_TENSOR_I8);
    assert_null(bb_type_meet(&BB_TYPE_TENSOR_I8, &BB_TYPE_TENSOR_U8));
    assert_null(bb_type_meet(&BB_TYPE_TENSOR, &BB_TYPE_PEER_ID));
    assert_null(bb_type_meet(&BB_TYPE_REQUEST_ID, &BB_TYPE_WIRE_REQUEST_ID));
    assert_null(bb_type_meet(NULL, &BB_TYPE_ANY));

    /* same by hash, even for a copy at another address */
    bb_type_node copy = BB_TYPE_PEER_ID;
    assert_true(bb_type_same(&copy, &BB_TYPE_PEER_ID));
    assert_true(bb_type_is_a(&copy, &BB_TYPE_ANY));
    assert_false(bb_type_same(&BB_TYPE_PEER_ID, &BB_TYPE_BYTES));
    assert_false(bb_type_same(NULL, &BB_TYPE_BYTES));
    assert_true(bb_type_same(NULL, NULL));
}

static void check_proto_shape(const bb_type_node *t, const bb_type_proto *tp)
{
    assert_string_equal(tp->denotation, t->denotation);
    switch (t->shape) {
    case BB_TS_ANY:
        assert_int_equal(tp->kind, BB_TP_NONE);
        break;
    case BB_TS_TENSOR:
        assert_int_equal(tp->kind, BB_TP_TENSOR);
        assert_int_equal(tp->elem_type, t->elem_type);
        break;
    case BB_TS_OPAQUE:
        assert_int_equal(tp->kind, BB_TP_OPAQUE);
        assert_string_equal(tp->opaque_domain, "ai.bytesandbrains");
        assert_string_equal(tp->opaque_name, t->name);
        break;
    case BB_TS_SEQUENCE:
        assert_int_equal(tp->kind, BB_TP_SEQUENCE);
        assert_non_null(tp->elem);
        assert_int_equal(tp->elem->kind, BB_TP_OPAQUE);
        assert_string_equal(tp->elem->opaque_domain, "ai.bytesandbrains");
        assert_string_equal(tp->elem->opaque_name, "PeerId");
        break;
    }
}

static void strip_denotations(bb_type_proto *tp)
{
    for (; tp; tp = tp->elem)
        tp->denotation = NULL;
}

static void test_type_proto_round_trip(void **state)
{
    (void)state;
    bb_arena *a = bb_arena_create();
    assert_non_null(a);
    for (size_t i = 0; i < bb_type_count(); i++) {
        const bb_type_node *t = bb_type_at(i);
        bb_type_proto *tp = bb_type_to_proto(a, t);
        assert_non_null(tp);
        check_proto_shape(t, tp);
        assert_ptr_equal(bb_type_from_proto(tp), t);
        /* shape alone identifies every node except `any` */
        strip_denotations(tp);
        if (t == &BB_TYPE_ANY)
            assert_null(bb_type_from_proto(tp));
        else
            assert_ptr_equal(bb_type_from_proto(tp), t);
    }
    assert_null(bb_type_to_proto(a, NULL));
    assert_null(bb_type_from_proto(NULL));

    /* denotation wins over shape */
    bb_type_proto *tp = bb_type_to_proto(a, &BB_TYPE_TENSOR_F32);
    tp->denotation = "ai.bytesandbrains.Timestamp";
    assert_ptr_equal(bb_type_from_proto(tp), &BB_TYPE_TIMESTAMP);
    /* unknown denotation falls back to the shape */
    tp->denotation = "ai.other.thing";
    assert_ptr_equal(bb_type_from_proto(tp), &BB_TYPE_TENSOR_F32);
    /* tensor of a dtype with no leaf, foreign opaque, other sequences */
    tp->elem_type = BB_DT_STRING;
    assert_null(bb_type_from_proto(tp));
    bb_type_proto *op = bb_type_to_proto(a, &BB_TYPE_PEER_ID);
    op->denotation = NULL;
    op->opaque_domain = "com.other";
    assert_null(bb_type_from_proto(op));
    op->opaque_domain = "ai.bytesandbrains";
    op->opaque_name = "NoSuchType";
    assert_null(bb_type_from_proto(op));
    op->opaque_name = "tensor_f32"; /* a name in the tree, but not an Opaque leaf */
    assert_null(bb_type_from_proto(op));
    bb_type_proto *sq = bb_type_to_proto(a, &BB_TYPE_PEER_ID_VEC);
    strip_denotations(sq);
    sq->elem->opaque_name = "Multiaddress";
    assert_null(bb_type_from_proto(sq));
    sq->elem = NULL;
    assert_null(bb_type_from_proto(sq));
    bb_arena_destroy(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fnv_vectors),
        cmocka_unit_test(test_known_wire_hashes),
        cmocka_unit_test(test_every_node_hash_and_denotation),
        cmocka_unit_test(test_tree_shape),
        cmocka_unit_test(test_is_a_and_meet),
        cmocka_unit_test(test_type_proto_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
