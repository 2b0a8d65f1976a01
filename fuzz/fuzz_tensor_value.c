/*
 * fuzz_tensor_value.c — TensorProto bytes as a fill carries them: decoded
 * into a value sharing the buffer (bb_value_decode_tensor_buf, the
 * transport's path), copying (bb_value_decode with a tensor type) and into
 * the IR's tensor (bb_tensor_proto_decode, the model loader's path). A
 * tensor that decodes must encode, and decode again to the same bytes.
 * Seeds: the .pb tensors of testdata/cpu_testdata's data sets.
 */
#include <stdlib.h>
#include <string.h>

#include "bb/arena.h"
#include "bb/model_io.h"
#include "bb/types.h"
#include "bb/value.h"

static const bb_decode_limits LIMITS = {1u << 24, 4096, 8};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bb_error err = {0};
    bb_buffer *buf = bb_buffer_new(size);
    if (!buf)
        return 0;
    memcpy(buf->data, data, size);
    bb_value *v = NULL;
    if (bb_value_decode_tensor_buf(buf, &LIMITS, &v, &err) == BB_OK) {
        uint8_t *enc = NULL;
        size_t n = 0;
        if (bb_value_encode(v, &enc, &n, &err) != BB_OK)
            __builtin_trap(); /* what decodes, encodes */
        bb_value *again = NULL;
        if (bb_value_decode(BB_TYPE_TENSOR.wire_hash, enc, n, &LIMITS, &again, &err) != BB_OK)
            __builtin_trap(); /* and decodes again */
        uint8_t *enc2 = NULL;
        size_t n2 = 0;
        if (bb_value_encode(again, &enc2, &n2, &err) != BB_OK || n2 != n ||
            memcmp(enc, enc2, n) != 0)
            __builtin_trap(); /* to the same bytes */
        free(enc);
        free(enc2);
        bb_value_unref(again);
        bb_value_unref(v);
    }
    bb_buffer_unref(buf);
    bb_arena *a = bb_arena_create();
    bb_tensor_proto *t = NULL;
    if (a)
        bb_tensor_proto_decode(a, data, size, "fuzz.pb", &t, &err);
    bb_arena_destroy(a);
    return 0;
}
