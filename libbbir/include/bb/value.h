/*
 * value.h — runtime values: reference-counted, typed, immutable once
 * written (DESIGN.md decision 2).
 *
 * A bb_value is tagged with its type node; its carrier (value->type->kind)
 * says which union member is live. Tensors and byte strings keep their
 * payload in a refcounted bb_buffer so a tensor can be shared by many
 * slots, adopted from a wire payload without a copy, or owned by a backend.
 *
 * Ownership: constructors return a new reference (refs = 1). bb_value_ref
 * adds one; bb_value_unref drops one and frees at zero. Refcounts are
 * atomic, so a value may be released on another thread (a completion).
 *
 * Wire encoding (bb_value_encode / bb_value_decode), selected by the type's
 * wire hash:
 *   tensor            ONNX TensorProto bytes (dims, data_type, raw_data LE);
 *                     raw_data of BB_VALUE_ALIGN_MIN bytes or more sits
 *                     between two doc_string fields of spaces (67 bytes in
 *                     all, whatever the position) that put its first byte
 *                     at a multiple of BB_VALUE_ALIGN from the start of
 *                     the message it is encoded into, so a receiver that
 *                     reads the message into aligned memory can use the
 *                     tensor where it landed
 *   Trigger           empty
 *   U64-like scalars  8 bytes little-endian
 *   Bytes, PeerId,    the bytes themselves (PeerId: multihash,
 *   Multiaddress      Multiaddress: binary multiaddr)
 *   vectors           varint count, then per item varint length + bytes
 *   Composite         varint count, then per child: u64 LE wire hash,
 *                     varint length, child encoding
 *   ResponseBatch     varint count, then per response: varint length +
 *                     PeerId bytes, u64 LE wire hash, varint length + value
 * Decoding is bounded by bb_decode_limits; every malformed input is an
 * error (BB_EDECODE / BB_ELIMIT) with a message naming the offset.
 */
#ifndef BB_VALUE_H
#define BB_VALUE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bb/status.h"
#include "bb/types.h"

#define BB_MAX_DIMS 8

/* Refcounted byte storage. free_fn releases data (NULL: data was malloc'd
 * together with the header and is freed with it). */
typedef struct bb_buffer {
    atomic_uint refs;
    uint8_t *data;
    size_t len;
    void (*free_fn)(void *ctx, uint8_t *data, size_t len);
    void *free_ctx;
} bb_buffer;

/* New buffer of len bytes, 64-byte aligned, zeroed. NULL on OOM. From
 * BB_LARGE_BYTES on its data is a bb_large_calloc block. */
bb_buffer *bb_buffer_new(size_t len);

/* Memory for a large block — a model's tensor, an assembled envelope: 64-byte
 * aligned, NULL on OOM, freed with bb_large_free(p, len) (the same len);
 * bb_large_alloc's contents are unspecified, bb_large_calloc's zero. From
 * BB_LARGE_BYTES on a block is a mapping of its own, 2 MiB aligned, with
 * transparent huge pages asked for (MADV_HUGEPAGE), and the two most
 * recently freed ones are kept for the next blocks of their size (so a
 * process holds at most two such blocks more than it uses, and
 * bb_large_release_idle gives back those that waited idle_ms): a node of a
 * 100M-parameter model frees and allocates the same 400 MB every round, and
 * fresh memory costs ~100,000 page faults, each zeroing, charging and
 * listing a page, and as many unmaps — measured, a third of such a round's
 * CPU on loopback (docs/DECISIONS.md, "Large blocks"). Built with
 * AddressSanitizer every block comes from malloc, so overruns and leaks of
 * large blocks stay visible to it. */
#define BB_LARGE_BYTES ((size_t)4 << 20)
void *bb_large_alloc(size_t len);
void *bb_large_calloc(size_t len);
void bb_large_free(void *p, size_t len);
void bb_large_release_idle(uint64_t idle_ms);
/* Wrap foreign memory; free_fn(ctx, data, len) runs at the last unref. */
bb_buffer *bb_buffer_wrap(uint8_t *data, size_t len,
                          void (*free_fn)(void *, uint8_t *, size_t), void *ctx);
/* Adopt malloc'd memory (freed with free()). */
bb_buffer *bb_buffer_adopt(uint8_t *data, size_t len);
/* Adopt a bb_large_alloc/bb_large_calloc block of len bytes (freed with
 * bb_large_free). */
bb_buffer *bb_buffer_adopt_large(uint8_t *data, size_t len);
bb_buffer *bb_buffer_ref(bb_buffer *b);
void bb_buffer_unref(bb_buffer *b);

typedef struct bb_value bb_value;

typedef struct bb_tensor_view {
    int32_t dtype;
    uint32_t ndim;
    int64_t dims[BB_MAX_DIMS];
    uint8_t *data;   /* points into buf (aligned to the element size) */
    size_t nbytes;
    bb_buffer *buf;
} bb_tensor_view;

#define BB_VALUE_LIST_INLINE 10 /* list items kept inside the value */
#define BB_VALUE_BATCH_INLINE 4 /* batch (response, peer) pairs kept inside the value */

struct bb_value {
    atomic_uint refs;
    const bb_type_node *type;
    union {
        uint64_t u64;                 /* BB_VK_U64 */
        bb_tensor_view tensor;        /* BB_VK_TENSOR */
        struct {                      /* BB_VK_BYTES, PEER_ID, ADDRESS */
            const uint8_t *data;
            size_t len;
            bb_buffer *buf;
        } bytes;
        struct {                      /* PEER_ID_VEC, ADDRESS_VEC, COMPOSITE */
            bb_value **items;         /* = small when n <= BB_VALUE_LIST_INLINE */
            size_t n;
            bb_value *small[BB_VALUE_LIST_INLINE];
        } list;
        struct {                      /* RESPONSE_BATCH */
            bb_value **items;         /* the responses */
            bb_value **peers;         /* PeerId of each response's sender */
            size_t n;
            bb_value *small[2 * BB_VALUE_BATCH_INLINE]; /* items, then peers */
        } batch;
    } u;
};
/* Short lists and batches live inside the value (the union is as large as
 * a tensor view anyway): no array allocation per message. */
_Static_assert(sizeof(((bb_value *)0)->u.list) <= sizeof(bb_tensor_view), "list fits the union");
_Static_assert(sizeof(((bb_value *)0)->u.batch) <= sizeof(bb_tensor_view), "batch fits the union");

/* ---- lifetime ---------------------------------------------------------- */
static inline bb_value *bb_value_ref(bb_value *v)
{
    if (v)
        atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
    return v;
}
void bb_value__free(bb_value *v);
/* Freed values are kept per thread for reuse (at most `max`, 64 by
 * default). Tests that count allocations set 0; the calling thread's kept
 * values are freed now. */
void bb__value_cache_limit(unsigned max);
static inline void bb_value_unref(bb_value *v)
{
    if (v && atomic_fetch_sub_explicit(&v->refs, 1, memory_order_acq_rel) == 1)
        bb_value__free(v);
}

/* ---- constructors (return new, or NULL on OOM / bad argument) ---------- */
bb_value *bb_value_trigger(void);
/* type must have kind BB_VK_U64 (U64, RequestId, CommandId, Timestamp, ...). */
bb_value *bb_value_u64(const bb_type_node *type, uint64_t v);
/* Copies the bytes. type: Bytes, PeerId or Multiaddress. */
bb_value *bb_value_bytes(const bb_type_node *type, const void *data, size_t len);
/* Shares buf (takes a new ref on it). */
bb_value *bb_value_bytes_buf(const bb_type_node *type, bb_buffer *buf,
                             const uint8_t *data, size_t len);
/* New zeroed tensor of dtype and shape. */
bb_value *bb_value_tensor_new(int32_t dtype, uint32_t ndim, const int64_t *dims);
/* Tensor over an existing buffer (takes a new ref on buf); data must lie in
 * buf and hold exactly the shape's bytes. */
bb_value *bb_value_tensor_wrap(int32_t dtype, uint32_t ndim, const int64_t *dims,
                               bb_buffer *buf, uint8_t *data);
/* Copy of data (nbytes must match the shape). */
bb_value *bb_value_tensor_copy(int32_t dtype, uint32_t ndim, const int64_t *dims,
                               const void *data, size_t nbytes);
/* List values: takes the caller's references to items (on failure too). */
bb_value *bb_value_list(const bb_type_node *type, bb_value **items, size_t n);
bb_value *bb_value_response_batch(bb_value **items, bb_value **peers, size_t n);

/* Bytes per element of a tensor value of dtype: bb_dtype_size for the
 * dtypes with a tensor leaf in the type tree (bb_type_tensor_of), 0 for
 * every other dtype, which no tensor value carries. */
size_t bb_tensor_elem_size(int32_t dtype);
/* Element count of a tensor shape; SIZE_MAX on overflow / negative dims. */
size_t bb_shape_numel(uint32_t ndim, const int64_t *dims);
static inline size_t bb_tensor_numel(const bb_value *v)
{
    return bb_shape_numel(v->u.tensor.ndim, v->u.tensor.dims);
}
static inline float *bb_tensor_f32(const bb_value *v)
{
    return (float *)(void *)v->u.tensor.data;
}

/* Deep equality (type, shape, bytes, children). */
bool bb_value_equal(const bb_value *a, const bb_value *b);

/* ---- wire encoding ------------------------------------------------------ */
#define BB_VALUE_ALIGN 64                  /* large raw_data starts at a multiple of this */
#define BB_VALUE_ALIGN_MIN ((size_t)64 << 10) /* raw_data from this size is aligned */

typedef struct bb_decode_limits {
    size_t max_bytes;      /* largest single value accepted */
    size_t max_items;      /* largest vector / composite / batch */
    uint32_t max_depth;    /* composite nesting */
} bb_decode_limits;
extern const bb_decode_limits BB_DECODE_LIMITS_DEFAULT; /* 256 MiB, 65536, 16 */

/* Encoded size of v (for budget checks before allocating). */
int bb_value_encoded_size(const bb_value *v, size_t *out, bb_error *err);
/* Append the encoding to a malloc'd buffer: *out is new. */
int bb_value_encode(const bb_value *v, uint8_t **out, size_t *out_len, bb_error *err);
/* Write the encoding into out[0..cap) (*len: its size, as
 * bb_value_encoded_size says); BB_ELIMIT when it does not fit. For an
 * encoder that places a value inside a larger message without copying it
 * twice. */
int bb_value_encode_into(const bb_value *v, uint8_t *out, size_t cap, size_t *len,
                         bb_error *err);
/* bb_value_encode_into for a caller that already sized v: n must be what
 * bb_value_encoded_size said for it (values do not change), and out must
 * hold n bytes. Saves the second walk over v a message encoder would do.
 * at: where out[0] sits in the message being written (large raw_data is
 * aligned from the message's start; bb_value_encode_into counts from
 * out[0]). */
int bb_value_encode_sized(const bb_value *v, size_t n, uint8_t *out, size_t at, bb_error *err);
/* A part of a value's encoding left in the value's own memory
 * (bb_value_encode_gather): len bytes at data, which come right after the
 * first `at` bytes the encoder wrote to its output. */
typedef struct bb_encode_ref {
    size_t at;
    const uint8_t *data;
    size_t len;
} bb_encode_ref;
/* bb_value_encode_into, except that each tensor raw_data and Bytes-like
 * payload of at least min_ref bytes is not copied but listed in
 * refs[0..*n_refs), in encoding order (at most max_refs; further ones are
 * copied). The encoding is then out[0, refs[0].at), refs[0]'s bytes,
 * out[refs[0].at, refs[1].at), ..., out[refs[k-1].at, *len). The refs
 * borrow v's memory: hold a reference on v while they are in use. cap
 * must hold the copied part (bb_value_gather_size); *len is what was
 * written to out. For a sender that hands large payloads to a scatter
 * write instead of copying them. at: where the encoding starts in the
 * message, counting the refs' bytes (as bb_value_encode_sized). */
int bb_value_encode_gather(const bb_value *v, uint8_t *out, size_t at, size_t cap,
                           size_t min_ref, bb_encode_ref *refs, size_t max_refs, size_t *n_refs,
                           size_t *len, bb_error *err);
/* The bytes a Composite whose one child is `child` (child_len: the child's
 * encoded size) starts with: bb_value_encode of
 * bb_value_list(&BB_TYPE_COMPOSITE, &child, 1) is these bytes, then the
 * child's encoding. For an encoder that sends a value as a Composite's one
 * child without making the Composite. out holds BB_VALUE_WRAP_HEAD_MAX;
 * returns how many were written. */
#define BB_VALUE_WRAP_HEAD_MAX 19 /* count, wire hash, length */
size_t bb_value_wrap_head(const bb_value *child, size_t child_len, uint8_t *out);
/* What bb_value_encode_gather(v, .., min_ref, .., max_refs, ..) writes:
 * *copied bytes to out and *n_refs refs. */
int bb_value_gather_size(const bb_value *v, size_t min_ref, size_t max_refs, size_t *copied,
                         size_t *n_refs, bb_error *err);
/* Decode bytes as a value of the type whose wire hash is type_hash. */
int bb_value_decode(uint64_t type_hash, const uint8_t *data, size_t len,
                    const bb_decode_limits *lim, bb_value **out, bb_error *err);
/* Tensor decode that adopts buf's memory without copying when the raw_data
 * is suitably aligned inside it (takes a new ref on buf when it does). */
int bb_value_decode_tensor_buf(bb_buffer *buf, const bb_decode_limits *lim,
                               bb_value **out, bb_error *err);
/* bb_value_decode over buf's bytes, sharing buf instead of copying where it
 * pays: aligned tensor raw_data anywhere in the value (composite children
 * too) and large Bytes payloads (takes new refs on buf as needed). */
int bb_value_decode_buf(uint64_t type_hash, bb_buffer *buf, const bb_decode_limits *lim,
                        bb_value **out, bb_error *err);

#endif
