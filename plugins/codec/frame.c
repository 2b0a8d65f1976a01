/*
 * frame.c — the header every u8 code starts with (layout in codec.h), its
 * writer and its bounded reader. A code comes off the wire: the reader
 * trusts nothing — not the tensor's type, not the version, not the shape,
 * whose element count must fit max_elements before any kind allocates the
 * decoded tensor.
 */
#include <assert.h>

#include "codec.h"

static size_t header_size(uint32_t ndim, const int64_t *dims)
{
    size_t n = 3;
    for (uint32_t i = 0; i < ndim; i++)
        n += bb_uvarint_size((uint64_t)dims[i]);
    return n;
}

bb_value *codec_frame_begin(codec_format f, uint32_t ndim, const int64_t *dims, size_t payload,
                            bb_writer *w)
{
    size_t head = header_size(ndim, dims);
    int64_t len = (int64_t)(head + payload);
    bb_value *code = bb_value_tensor_new(BB_DT_UINT8, 1, &len);
    if (!code)
        return NULL;
    bb_writer_init_fixed(w, code->u.tensor.data, (size_t)len);
    uint8_t h[3] = {(uint8_t)f, CODEC_FRAME_VERSION, (uint8_t)ndim};
    bb_writer_put(w, h, 3);
    for (uint32_t i = 0; i < ndim; i++)
        bb_writer_put_uvarint(w, (uint64_t)dims[i]);
    assert(!w->failed && w->len == head); /* sized exactly beforehand */
    return code;
}

int codec_malformed(const codec *c, const bb_reader *r, const char *what, bb_error *err)
{
    return bb_error_set(err, BB_EDECODE, "%s: malformed code: %s at byte %zu", c->who, what,
                        r->failed ? r->fail_at : r->pos);
}

int codec_get_varint(const codec *c, bb_reader *r, const char *what, uint64_t *out,
                     bb_error *err)
{
    return bb_reader_uvarint_minimal(r, out) ? BB_OK : codec_malformed(c, r, what, err);
}

static const char *format_name(uint8_t f)
{
    switch (f) {
    case CODEC_FMT_INT8: return "an Int8Affine code";
    case CODEC_FMT_TOPK: return "a TopK code";
    case CODEC_FMT_PQ: return "a ProductQuantization code";
    default: return "no codec's code";
    }
}

int codec_frame_open(const codec *c, const bb_value *code, codec_format f, codec_shape *shape,
                     bb_reader *r, bb_error *err)
{
    if (code->type->kind != BB_VK_TENSOR || code->u.tensor.dtype != BB_DT_UINT8 ||
        code->u.tensor.ndim != 1)
        return bb_error_set(err, BB_ETYPE, "%s: Decompress takes a 1-D u8 code, not %s%s",
                            c->who,
                            code->type->kind == BB_VK_TENSOR
                                ? bb_dtype_name(code->u.tensor.dtype) : code->type->name,
                            code->type->kind == BB_VK_TENSOR ? " tensor" : "");
    bb_reader_init(r, code->u.tensor.data, code->u.tensor.nbytes);
    uint8_t h[3];
    if (!bb_reader_get(r, h, 3))
        return codec_malformed(c, r, "the header is truncated", err);
    if (h[0] != (uint8_t)f)
        return bb_error_set(err, BB_EDECODE, "%s: the code is %s (format byte 0x%02x)", c->who,
                            format_name(h[0]), h[0]);
    if (h[1] != CODEC_FRAME_VERSION)
        return bb_error_set(err, BB_EDECODE, "%s: code version %u (this codec reads %u)",
                            c->who, h[1], CODEC_FRAME_VERSION);
    if (h[2] > BB_MAX_DIMS)
        return bb_error_set(err, BB_EDECODE, "%s: malformed code: %u dimensions (at most %d)",
                            c->who, h[2], BB_MAX_DIMS);
    shape->ndim = h[2];
    uint64_t numel = 1;
    for (uint32_t i = 0; i < shape->ndim; i++) {
        uint64_t d;
        int rc = codec_get_varint(c, r, "a dimension", &d, err);
        if (rc)
            return rc;
        /* every dimension and every partial product stays within the cap */
        if (d > c->max_elements || (d && numel > c->max_elements / d))
            return bb_error_set(err, BB_ELIMIT,
                                "%s: the code's shape exceeds max_elements %llu (dimension %u "
                                "is %llu)",
                                c->who, (unsigned long long)c->max_elements, i,
                                (unsigned long long)d);
        numel *= d;
        shape->dims[i] = (int64_t)d;
    }
    shape->numel = (size_t)numel;
    return BB_OK;
}
