/*
 * f16.c — codec::F16: tensor_f32 -> tensor_f16 of the same shape, half the
 * bytes. IEEE 754 binary16 by bit manipulation (no F16C, no _Float16, so
 * every target rounds alike): round to nearest, ties to even; values from
 * 65520 up round to infinity; infinities keep their sign; a NaN stays a
 * NaN (quieted, the top payload bits kept); subnormal halves are produced
 * and read exactly. Decoding is exact, so a round trip's error is the
 * rounding alone: relative <= 2^-11 for |x| in [2^-14, 65504], absolute
 * <= 2^-25 below. Stateless: no TrainCodebook fit, nothing in a snapshot.
 */
#include <string.h>

#include "codec.h"

uint16_t codec_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t exp = x & 0x7f800000u, sig = x & 0x007fffffu;
    if (exp == 0x7f800000u) /* infinity, or a NaN made quiet */
        return sig ? (uint16_t)(sign | 0x7e00u | (sig >> 13)) : (uint16_t)(sign | 0x7c00u);
    if (exp >= 0x47800000u) /* 2^16 and up: beyond the largest half */
        return (uint16_t)(sign | 0x7c00u);
    if (exp <= 0x38000000u) { /* below 2^-14: a subnormal half, or zero */
        if (exp < 0x33000000u) /* below 2^-25: rounds to zero */
            return sign;
        uint32_t e = exp >> 23, m = 0x00800000u | sig;
        uint32_t lost = m & ((1u << (113 - e)) - 1); /* bits the shift drops */
        m >>= 113 - e;
        /* bit 12 is the half below the last kept bit: round up unless it
         * is an exact tie on an even result */
        if ((m & 0x3fffu) != 0x1000u || lost)
            m += 0x1000u;
        return (uint16_t)(sign | (m >> 13)); /* a carry makes the smallest normal */
    }
    uint32_t m = sig;
    if ((m & 0x3fffu) != 0x1000u)
        m += 0x1000u;
    /* a carry out of the significand bumps the exponent (to infinity at most) */
    return (uint16_t)(sign + (((exp - 0x38000000u) >> 13) + (m >> 13)));
}

float codec_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, sig = h & 0x3ffu;
    uint32_t x;
    if (exp == 0x1f) {
        x = sign | 0x7f800000u | (sig << 13);
    } else if (exp) {
        x = sign | ((exp + 112) << 23) | (sig << 13);
    } else if (!sig) {
        x = sign;
    } else { /* subnormal: shift the leading one into the implicit bit */
        uint32_t e = 113;
        while (!(sig & 0x400u)) {
            sig <<= 1;
            e--;
        }
        x = sign | (e << 23) | ((sig & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

static int f16_init(codec *c, const bbp_config *cfg, uint64_t seed, bb_error *err)
{
    (void)c, (void)cfg, (void)seed, (void)err;
    return BB_OK;
}

static int f16_encode(codec *c, const bb_value *t, bb_value **code, bb_error *err)
{
    const bb_tensor_view *v = &t->u.tensor;
    if (!(*code = bb_value_tensor_new(BB_DT_FLOAT16, v->ndim, v->dims)))
        return codec_oom(c, err);
    const float *src = bb_tensor_f32(t);
    uint16_t *dst = (uint16_t *)(void *)(*code)->u.tensor.data;
    size_t n = bb_tensor_numel(t);
    for (size_t i = 0; i < n; i++)
        dst[i] = codec_f32_to_f16(src[i]);
    return BB_OK;
}

static int f16_decode(const codec *c, const bb_value *code, bb_value **t, bb_error *err)
{
    if (code->type->kind != BB_VK_TENSOR || code->u.tensor.dtype != BB_DT_FLOAT16)
        return bb_error_set(err, BB_ETYPE, "%s: Decompress takes an f16 tensor, not %s%s",
                            c->who,
                            code->type->kind == BB_VK_TENSOR
                                ? bb_dtype_name(code->u.tensor.dtype) : code->type->name,
                            code->type->kind == BB_VK_TENSOR ? " tensor" : "");
    size_t n = bb_tensor_numel(code);
    if (n > c->max_elements)
        return bb_error_set(err, BB_ELIMIT, "%s: Decompress got %zu elements (max_elements %llu)",
                            c->who, n, (unsigned long long)c->max_elements);
    const bb_tensor_view *v = &code->u.tensor;
    if (!(*t = bb_value_tensor_new(BB_DT_FLOAT, v->ndim, v->dims)))
        return codec_oom(c, err);
    const uint16_t *src = (const uint16_t *)(const void *)v->data;
    float *dst = bb_tensor_f32(*t);
    for (size_t i = 0; i < n; i++)
        dst[i] = codec_f16_to_f32(src[i]);
    return BB_OK;
}

static const bb_config_decl F16_CONFIG[] = {CODEC_COMMON_DECLS};

static const codec_kind F16_KIND = {
    .type_name = "codec::F16",
    .code_type = &BB_TYPE_TENSOR_F16,
    .size = sizeof(codec),
    .config = F16_CONFIG,
    .n_config = BBP_COUNT(F16_CONFIG),
    .init = f16_init,
    .encode = f16_encode,
    .decode = f16_decode,
};

CODEC_COMPONENT(CODEC_TYPE_F16, "codec::F16", F16_KIND, F16_CONFIG, CODEC_OPSETS_F16,
                "f32 -> f16 (IEEE binary16, round to nearest even; infinities and NaNs kept): "
                "half the bytes, relative error <= 2^-11 in the normal range");
