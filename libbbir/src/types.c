/*
 * types.c — the static type tree (IR_AND_DSL.md Part 4): one immutable
 * descriptor per node, lookups, subtyping, and TypeProto conversion.
 *
 * Wire hashes are FNV-1a-64 of "<name>@1", precomputed because static
 * const initialisers need constants; test_types checks every one against
 * bb_wire_hash. The tree is tiny (30 nodes): name lookups are linear scans,
 * wire-hash lookups (one per decoded value) a small hash table.
 */
#include "bb/types.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define BB__VERSION 1u

#define BB__NODE(sym, nm, par, knd, shp, elem, seq, hash)                     \
    const bb_type_node sym = {                                                \
        .name = nm,                                                           \
        .denotation = BB_TYPE_DOMAIN "." nm,                                  \
        .parent = par,                                                        \
        .kind = knd,                                                          \
        .shape = shp,                                                         \
        .elem_type = elem,                                                    \
        .seq_elem = seq,                                                      \
        .opset_version = BB__VERSION,                                         \
        .wire_hash = hash,                                                    \
    };

#define BB__TENSOR(sym, nm, dt, hash) \
    BB__NODE(sym, nm, &BB_TYPE_TENSOR, BB_VK_TENSOR, BB_TS_TENSOR, dt, NULL, hash)
#define BB__OPAQUE(sym, nm, knd, hash) \
    BB__NODE(sym, nm, &BB_TYPE_ANY, knd, BB_TS_OPAQUE, 0, NULL, hash)

BB__NODE(BB_TYPE_ANY, "any", NULL, BB_VK_ABSTRACT, BB_TS_ANY, 0, NULL, 0x43614ecd98c5d212u)
BB__NODE(BB_TYPE_TENSOR, "tensor", &BB_TYPE_ANY, BB_VK_ABSTRACT, BB_TS_TENSOR, 0, NULL,
         0xbaba199f6d53cd27u)

BB__TENSOR(BB_TYPE_TENSOR_F32, "tensor_f32", BB_DT_FLOAT, 0xde0b1255a2537213u)
BB__TENSOR(BB_TYPE_TENSOR_F64, "tensor_f64", BB_DT_DOUBLE, 0x5c72ce3df722121cu)
BB__TENSOR(BB_TYPE_TENSOR_F16, "tensor_f16", BB_DT_FLOAT16, 0x8a995a445a59b811u)
BB__TENSOR(BB_TYPE_TENSOR_BF16, "tensor_bf16", BB_DT_BFLOAT16, 0xbaef1a01e276cab9u)
BB__TENSOR(BB_TYPE_TENSOR_I8, "tensor_i8", BB_DT_INT8, 0x10adf847f2b99263u)
BB__TENSOR(BB_TYPE_TENSOR_I16, "tensor_i16", BB_DT_INT16, 0x0e68408afb6bc3fcu)
BB__TENSOR(BB_TYPE_TENSOR_I32, "tensor_i32", BB_DT_INT32, 0x638d189c44d748deu)
BB__TENSOR(BB_TYPE_TENSOR_I64, "tensor_i64", BB_DT_INT64, 0x3fa0d4b4b448e04du)
BB__TENSOR(BB_TYPE_TENSOR_U8, "tensor_u8", BB_DT_UINT8, 0x645c48aac1cd29efu)
BB__TENSOR(BB_TYPE_TENSOR_U16, "tensor_u16", BB_DT_UINT16, 0x77d3ac73c375e928u)
BB__TENSOR(BB_TYPE_TENSOR_U32, "tensor_u32", BB_DT_UINT32, 0xd2b5dc835d214022u)
BB__TENSOR(BB_TYPE_TENSOR_U64, "tensor_u64", BB_DT_UINT64, 0x7ed7c05990a4d311u)
BB__TENSOR(BB_TYPE_TENSOR_BOOL, "tensor_bool", BB_DT_BOOL, 0x5cb23b4bc4e496c6u)

BB__OPAQUE(BB_TYPE_TRIGGER, "Trigger", BB_VK_TRIGGER, 0x43f3abb298244398u)
BB__OPAQUE(BB_TYPE_PEER_ID, "PeerId", BB_VK_PEER_ID, 0x8fa3e38993c2032fu)
BB__OPAQUE(BB_TYPE_MULTIADDRESS, "Multiaddress", BB_VK_ADDRESS, 0xef661c462bf197adu)
BB__OPAQUE(BB_TYPE_REQUEST_ID, "RequestId", BB_VK_U64, 0xaf3233d3cd60cab4u)
BB__OPAQUE(BB_TYPE_WIRE_REQUEST_ID, "WireRequestId", BB_VK_U64, 0xc1f9088adf91c82fu)
BB__OPAQUE(BB_TYPE_COMMAND_ID, "CommandId", BB_VK_U64, 0x5dbd8496b008e594u)
BB__OPAQUE(BB_TYPE_TIMESTAMP, "Timestamp", BB_VK_U64, 0xc7933acac1693558u)
BB__OPAQUE(BB_TYPE_EVENT_KIND, "EventKind", BB_VK_U64, 0x9b147a9335fae75au)
BB__OPAQUE(BB_TYPE_CORRELATION_TOKEN, "CorrelationToken", BB_VK_U64, 0x628420d12d9e2b47u)
BB__OPAQUE(BB_TYPE_RESPONSE_BATCH, "ResponseBatch", BB_VK_RESPONSE_BATCH, 0xaf5a08576635341du)
BB__OPAQUE(BB_TYPE_ADDRESS_VEC, "address_vec", BB_VK_ADDRESS_VEC, 0x92c3e4560794cab1u)
BB__OPAQUE(BB_TYPE_COMPOSITE, "Composite", BB_VK_COMPOSITE, 0x6e3f003c3300cdb7u)
BB__OPAQUE(BB_TYPE_BYTES, "Bytes", BB_VK_BYTES, 0xdedd388637a4d1e7u)
BB__OPAQUE(BB_TYPE_U64, "U64", BB_VK_U64, 0x07e7d303a57580c5u)

BB__NODE(BB_TYPE_PEER_ID_VEC, "peer_id_vec", &BB_TYPE_ANY, BB_VK_PEER_ID_VEC, BB_TS_SEQUENCE, 0,
         &BB_TYPE_PEER_ID, 0x18f376d9dcf7fcb5u)

static const bb_type_node *const all_types[] = {
    &BB_TYPE_ANY,
    &BB_TYPE_TENSOR,
    &BB_TYPE_TENSOR_F32,
    &BB_TYPE_TENSOR_F64,
    &BB_TYPE_TENSOR_F16,
    &BB_TYPE_TENSOR_BF16,
    &BB_TYPE_TENSOR_I8,
    &BB_TYPE_TENSOR_I16,
    &BB_TYPE_TENSOR_I32,
    &BB_TYPE_TENSOR_I64,
    &BB_TYPE_TENSOR_U8,
    &BB_TYPE_TENSOR_U16,
    &BB_TYPE_TENSOR_U32,
    &BB_TYPE_TENSOR_U64,
    &BB_TYPE_TENSOR_BOOL,
    &BB_TYPE_TRIGGER,
    &BB_TYPE_PEER_ID,
    &BB_TYPE_MULTIADDRESS,
    &BB_TYPE_REQUEST_ID,
    &BB_TYPE_WIRE_REQUEST_ID,
    &BB_TYPE_COMMAND_ID,
    &BB_TYPE_TIMESTAMP,
    &BB_TYPE_EVENT_KIND,
    &BB_TYPE_CORRELATION_TOKEN,
    &BB_TYPE_RESPONSE_BATCH,
    &BB_TYPE_ADDRESS_VEC,
    &BB_TYPE_COMPOSITE,
    &BB_TYPE_BYTES,
    &BB_TYPE_U64,
    &BB_TYPE_PEER_ID_VEC,
};

#define BB__NTYPES (sizeof all_types / sizeof all_types[0])

#define FNV_OFFSET 0xcbf29ce484222325u
#define FNV_PRIME 0x100000001b3u

static uint64_t fnv_step(uint64_t h, const uint8_t *p, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= FNV_PRIME;
    }
    return h;
}

uint64_t bb_fnv1a64(const void *data, size_t len)
{
    return fnv_step(FNV_OFFSET, data, len);
}

uint64_t bb_wire_hash(const char *name, uint32_t version)
{
    char ver[16];
    int n = snprintf(ver, sizeof ver, "@%u", (unsigned)version);
    uint64_t h = fnv_step(FNV_OFFSET, (const uint8_t *)name, name ? strlen(name) : 0);
    return fnv_step(h, (const uint8_t *)ver, (size_t)n);
}

size_t bb_type_count(void)
{
    return BB__NTYPES;
}

const bb_type_node *bb_type_at(size_t i)
{
    return i < BB__NTYPES ? all_types[i] : NULL;
}

const bb_type_node *bb_type_by_name(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < BB__NTYPES; i++)
        if (strcmp(all_types[i]->name, name) == 0)
            return all_types[i];
    return NULL;
}

const bb_type_node *bb_type_by_denotation(const char *denotation)
{
    if (!denotation)
        return NULL;
    for (size_t i = 0; i < BB__NTYPES; i++)
        if (strcmp(all_types[i]->denotation, denotation) == 0)
            return all_types[i];
    return NULL;
}

/* Every decoded value names its type by wire hash: an open-addressed table
 * (linear probing, at most half full) instead of a scan of every node. */
#define BY_HASH_SLOTS 64
static const bb_type_node *by_hash[BY_HASH_SLOTS];
static pthread_once_t by_hash_once = PTHREAD_ONCE_INIT;

static void by_hash_build(void)
{
    for (size_t i = 0; i < BB__NTYPES; i++) {
        size_t k = all_types[i]->wire_hash & (BY_HASH_SLOTS - 1);
        while (by_hash[k])
            k = (k + 1) & (BY_HASH_SLOTS - 1);
        by_hash[k] = all_types[i];
    }
}

const bb_type_node *bb_type_by_wire_hash(uint64_t hash)
{
    _Static_assert(BB__NTYPES * 2 <= BY_HASH_SLOTS, "the wire-hash table is over half full");
    pthread_once(&by_hash_once, by_hash_build);
    for (size_t k = hash & (BY_HASH_SLOTS - 1);; k = (k + 1) & (BY_HASH_SLOTS - 1)) {
        if (!by_hash[k])
            return NULL;
        if (by_hash[k]->wire_hash == hash)
            return by_hash[k];
    }
}

const bb_type_node *bb_type_tensor_of(int32_t dtype)
{
    switch (dtype) {
    case BB_DT_FLOAT: return &BB_TYPE_TENSOR_F32;
    case BB_DT_DOUBLE: return &BB_TYPE_TENSOR_F64;
    case BB_DT_FLOAT16: return &BB_TYPE_TENSOR_F16;
    case BB_DT_BFLOAT16: return &BB_TYPE_TENSOR_BF16;
    case BB_DT_INT8: return &BB_TYPE_TENSOR_I8;
    case BB_DT_INT16: return &BB_TYPE_TENSOR_I16;
    case BB_DT_INT32: return &BB_TYPE_TENSOR_I32;
    case BB_DT_INT64: return &BB_TYPE_TENSOR_I64;
    case BB_DT_UINT8: return &BB_TYPE_TENSOR_U8;
    case BB_DT_UINT16: return &BB_TYPE_TENSOR_U16;
    case BB_DT_UINT32: return &BB_TYPE_TENSOR_U32;
    case BB_DT_UINT64: return &BB_TYPE_TENSOR_U64;
    case BB_DT_BOOL: return &BB_TYPE_TENSOR_BOOL;
    default: return NULL;
    }
}

bool bb_type_same(const bb_type_node *a, const bb_type_node *b)
{
    if (a == b)
        return true;
    return a && b && a->wire_hash == b->wire_hash;
}

bool bb_type_is_a(const bb_type_node *a, const bb_type_node *b)
{
    if (!a || !b)
        return false;
    for (const bb_type_node *t = a; t; t = t->parent)
        if (bb_type_same(t, b))
            return true;
    return false;
}

const bb_type_node *bb_type_meet(const bb_type_node *a, const bb_type_node *b)
{
    if (bb_type_is_a(a, b))
        return a;
    if (bb_type_is_a(b, a))
        return b;
    return NULL;
}

bool bb_type_is_leaf(const bb_type_node *t)
{
    return t && t->kind != BB_VK_ABSTRACT;
}

/* ---- TypeProto --------------------------------------------------------- */

bb_type_proto *bb_type_to_proto(bb_arena *a, const bb_type_node *t)
{
    if (!a || !t)
        return NULL;
    bb_type_proto *tp = bb_arena_alloc(a, sizeof *tp);
    if (!tp)
        return NULL;
    tp->denotation = bb_arena_strdup(a, t->denotation);
    if (!tp->denotation)
        return NULL;
    switch (t->shape) {
    case BB_TS_ANY:
        tp->kind = BB_TP_NONE;
        break;
    case BB_TS_TENSOR:
        tp->kind = BB_TP_TENSOR;
        tp->elem_type = t->elem_type; /* 0 for the abstract tensor */
        break;
    case BB_TS_OPAQUE:
        tp->kind = BB_TP_OPAQUE;
        tp->opaque_domain = bb_arena_strdup(a, BB_TYPE_DOMAIN);
        tp->opaque_name = bb_arena_strdup(a, t->name);
        if (!tp->opaque_domain || !tp->opaque_name)
            return NULL;
        break;
    case BB_TS_SEQUENCE:
        tp->kind = BB_TP_SEQUENCE;
        tp->elem = bb_type_to_proto(a, t->seq_elem);
        if (!tp->elem)
            return NULL;
        break;
    }
    return tp;
}

static const bb_type_node *opaque_by_name(const char *domain, const char *name)
{
    if (!domain || !name || strcmp(domain, BB_TYPE_DOMAIN) != 0)
        return NULL;
    const bb_type_node *t = bb_type_by_name(name);
    return t && t->shape == BB_TS_OPAQUE ? t : NULL;
}

const bb_type_node *bb_type_from_proto(const bb_type_proto *tp)
{
    if (!tp)
        return NULL;
    const bb_type_node *t = bb_type_by_denotation(tp->denotation);
    if (t)
        return t;
    switch (tp->kind) {
    case BB_TP_TENSOR:
        return tp->elem_type == BB_DT_UNDEFINED ? &BB_TYPE_TENSOR
                                                : bb_type_tensor_of(tp->elem_type);
    case BB_TP_OPAQUE:
        return opaque_by_name(tp->opaque_domain, tp->opaque_name);
    case BB_TP_SEQUENCE: {
        const bb_type_node *e = bb_type_from_proto(tp->elem);
        return e == &BB_TYPE_PEER_ID ? &BB_TYPE_PEER_ID_VEC : NULL;
    }
    default:
        return NULL;
    }
}
