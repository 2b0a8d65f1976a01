/*
 * int8_affine.c — codec::Int8Affine: tensor_f32 -> tensor_u8, one byte per
 * element, the asymmetric affine quantization of ONNX's QuantizeLinear:
 *
 *   lo = min(range_min, 0), hi = max(range_max, 0)   (0 is exact)
 *   scale = (hi - lo) / 255, zero_point = round(-lo / scale)
 *   q = clamp(round(x / scale) + zero_point, 0, 255)
 *   x' = (q - zero_point) * scale
 *
 * per tensor (one range) or per channel (one range per index of `axis`).
 * The range is the calibration TrainCodebook fitted (the samples' min and
 * max; values beyond it saturate), or, before any TrainCodebook, the
 * encoded tensor's own (dynamic quantization). Within the range a round
 * trip is off by at most scale / 2 per element.
 *
 * Payload after the frame header (codec.h):
 *   u8 granularity (0 tensor, 1 channel), u8 axis (0 per tensor)
 *   f32 scale[C], u8 zero_point[C]   C = 1, or dims[axis]
 *   u8 q[numel]
 * Non-finite input has no code and is refused, naming the element.
 */
#include <assert.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"

typedef struct int8_codec {
    codec base;
    bool per_channel;
    int64_t axis;     /* as configured: may count from the end */
    bool calibrated;  /* a TrainCodebook fixed the ranges */
    uint32_t channels;
    float *lo, *hi;   /* channels each */
} int8_codec;

/* How a tensor splits into channels: element i is in channel
 * (i / inner) % channels. */
typedef struct layout {
    uint32_t axis, channels;
    size_t inner, outer;
} layout;

static int layout_of(const codec *c, bool per_channel, int64_t axis, uint32_t ndim,
                     const int64_t *dims, layout *l, bb_error *err)
{
    *l = (layout){0, 1, bb_shape_numel(ndim, dims), 1};
    if (!per_channel)
        return BB_OK;
    int64_t a = axis < 0 ? axis + (int64_t)ndim : axis;
    if (a < 0 || a >= (int64_t)ndim)
        return bb_error_set(err, BB_ETYPE,
                            "%s: per-channel axis %lld does not exist in a %u-dimensional tensor",
                            c->who, (long long)axis, ndim);
    if (dims[a] > UINT32_MAX)
        return bb_error_set(err, BB_ELIMIT, "%s: %lld channels on axis %lld (at most %u)",
                            c->who, (long long)dims[a], (long long)a, UINT32_MAX);
    l->axis = (uint32_t)a;
    l->channels = (uint32_t)dims[a];
    l->inner = bb_shape_numel(ndim - l->axis - 1, dims + l->axis + 1);
    l->outer = bb_shape_numel(l->axis, dims);
    return BB_OK;
}

/* Per-channel min and max of x (finite: checked by the caller). */
static void ranges(const float *x, const layout *l, float *lo, float *hi)
{
    for (uint32_t c = 0; c < l->channels; c++) {
        lo[c] = INFINITY;
        hi[c] = -INFINITY;
    }
    for (size_t o = 0; o < l->outer; o++) {
        for (uint32_t c = 0; c < l->channels; c++) {
            const float *p = x + (o * l->channels + c) * l->inner;
            float mn = lo[c], mx = hi[c];
            for (size_t j = 0; j < l->inner; j++) {
                mn = p[j] < mn ? p[j] : mn;
                mx = p[j] > mx ? p[j] : mx;
            }
            lo[c] = mn;
            hi[c] = mx;
        }
    }
}

static void affine(float lo, float hi, float *scale, uint8_t *zero_point)
{
    double a = lo < 0 ? lo : 0, b = hi > 0 ? hi : 0; /* an empty range is [0, 0] */
    double s = (b - a) / 255.0;
    if (!(s >= FLT_MIN)) /* all zeros, or a range too small for a float scale */
        s = b > a ? FLT_MIN : 1.0;
    double z = nearbyint(-a / s);
    *scale = (float)s;
    *zero_point = (uint8_t)(z < 0 ? 0 : z > 255 ? 255 : z);
}

static int refuse_nonfinite(const codec *c, const char *op, const bb_value *t, bb_error *err)
{
    size_t n = bb_tensor_numel(t), bad = codec_first_nonfinite(bb_tensor_f32(t), n);
    if (bad == n)
        return BB_OK;
    return bb_error_set(err, BB_EINVAL, "%s: %s: element %zu is %g, which has no 8-bit code",
                        c->who, op, bad, (double)bb_tensor_f32(t)[bad]);
}

static int set_channels(int8_codec *q, uint32_t channels)
{
    float *lo = realloc(q->lo, (channels ? channels : 1) * sizeof *lo);
    if (lo)
        q->lo = lo;
    float *hi = lo ? realloc(q->hi, (channels ? channels : 1) * sizeof *hi) : NULL;
    if (hi)
        q->hi = hi;
    if (!lo || !hi)
        return BB_ENOMEM;
    q->channels = channels;
    return BB_OK;
}

static int int8_train(codec *c, const bb_value *samples, bb_error *err)
{
    int8_codec *q = (int8_codec *)c;
    const bb_tensor_view *v = &samples->u.tensor;
    layout l;
    int rc = layout_of(c, q->per_channel, q->axis, v->ndim, v->dims, &l, err);
    if (!rc)
        rc = refuse_nonfinite(c, "TrainCodebook", samples, err);
    if (!rc && bb_tensor_numel(samples) == 0)
        rc = bb_error_set(err, BB_EINVAL, "%s: TrainCodebook got no samples", c->who);
    if (rc)
        return rc;
    if (set_channels(q, l.channels))
        return codec_oom(c, err);
    ranges(bb_tensor_f32(samples), &l, q->lo, q->hi);
    q->calibrated = true;
    return BB_OK;
}

static void quantize(const float *x, const layout *l, const float *scale, const uint8_t *zp,
                     uint8_t *out)
{
    for (size_t o = 0; o < l->outer; o++) {
        for (uint32_t c = 0; c < l->channels; c++) {
            size_t base = (o * l->channels + c) * l->inner;
            float inv = 1.0f / scale[c], z = (float)zp[c];
            for (size_t j = 0; j < l->inner; j++) {
                float v = nearbyintf(x[base + j] * inv) + z;
                out[base + j] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
        }
    }
}

static int int8_encode(codec *c, const bb_value *t, bb_value **code, bb_error *err)
{
    int8_codec *q = (int8_codec *)c;
    const bb_tensor_view *v = &t->u.tensor;
    layout l;
    int rc = layout_of(c, q->per_channel, q->axis, v->ndim, v->dims, &l, err);
    if (!rc)
        rc = refuse_nonfinite(c, "Compress", t, err);
    if (!rc && q->calibrated && q->per_channel && l.channels != q->channels)
        rc = bb_error_set(err, BB_ETYPE,
                          "%s: Compress got %u channels on axis %u; TrainCodebook calibrated %u",
                          c->who, l.channels, l.axis, q->channels);
    if (rc)
        return rc;
    size_t ch = l.channels, numel = bb_tensor_numel(t);
    /* per channel: lo, hi (this tensor's own when not calibrated), scale, zero point */
    float *work = malloc((ch ? ch : 1) * (3 * sizeof(float) + 1));
    if (!work)
        return codec_oom(c, err);
    float *lo = q->calibrated ? q->lo : work, *hi = q->calibrated ? q->hi : work + ch;
    float *scale = work + 2 * ch;
    uint8_t *zp = (uint8_t *)(work + 3 * ch);
    if (!q->calibrated)
        ranges(bb_tensor_f32(t), &l, lo, hi);
    for (size_t i = 0; i < ch; i++)
        affine(lo[i], hi[i], &scale[i], &zp[i]);
    bb_writer w;
    *code = codec_frame_begin(CODEC_FMT_INT8, v->ndim, v->dims, 2 + ch * 5 + numel, &w);
    if (*code) {
        uint8_t head[2] = {q->per_channel, (uint8_t)l.axis};
        bb_writer_put(&w, head, 2);
        bb_writer_put(&w, scale, ch * 4);
        bb_writer_put(&w, zp, ch);
        if (numel) /* the codes, in place */
            quantize(bb_tensor_f32(t), &l, scale, zp, bb_writer_grow(&w, numel));
        assert(!w.failed && w.len == w.cap); /* sized exactly */
    }
    free(work);
    return *code ? BB_OK : codec_oom(c, err);
}

static int int8_decode(const codec *c, const bb_value *code, bb_value **t, bb_error *err)
{
    codec_shape sh;
    bb_reader r;
    int rc = codec_frame_open(c, code, CODEC_FMT_INT8, &sh, &r, err);
    if (rc)
        return rc;
    uint8_t head[2];
    if (!bb_reader_get(&r, head, 2) || head[0] > 1)
        return codec_malformed(c, &r, "granularity", err);
    layout l;
    if ((head[0] ? head[1] >= sh.ndim : head[1] != 0) ||
        layout_of(c, head[0], head[1], sh.ndim, sh.dims, &l, NULL))
        return codec_malformed(c, &r, "channel axis", err);
    size_t want = (size_t)l.channels * 5 + sh.numel;
    const uint8_t *scales;
    if (bb_reader_left(&r) != want || !bb_reader_view(&r, want, &scales))
        return bb_error_set(err, BB_EDECODE,
                            "%s: malformed code: %zu bytes after the header, want %zu "
                            "(%u channels, %zu elements)",
                            c->who, bb_reader_left(&r), want, l.channels, sh.numel);
    const uint8_t *zp = scales + (size_t)l.channels * 4, *codes = zp + l.channels;
    for (uint32_t ch = 0; ch < l.channels; ch++) {
        float s;
        memcpy(&s, scales + (size_t)ch * 4, 4);
        if (!(isfinite(s) && s > 0)) {
            bb_reader_fail(&r, (size_t)(scales - r.data) + (size_t)ch * 4, BB_EPARSE, "scale");
            return codec_malformed(c, &r, "a scale that is not a positive finite number", err);
        }
    }
    if (!(*t = bb_value_tensor_new(BB_DT_FLOAT, sh.ndim, sh.dims)))
        return codec_oom(c, err);
    float *x = bb_tensor_f32(*t);
    for (size_t o = 0; o < l.outer; o++) {
        for (uint32_t ch = 0; ch < l.channels; ch++) {
            float s;
            memcpy(&s, scales + (size_t)ch * 4, 4);
            size_t base = (o * l.channels + ch) * l.inner;
            for (size_t j = 0; j < l.inner; j++)
                x[base + j] = ((float)codes[base + j] - (float)zp[ch]) * s;
        }
    }
    return BB_OK;
}

/* ---- state ---------------------------------------------------------------------------
 * u8 calibrated, u32 channels, f32 lo[channels], f32 hi[channels] */

static void int8_save(const codec *c, bb_writer *w)
{
    const int8_codec *q = (const int8_codec *)c;
    uint32_t n = q->calibrated ? q->channels : 0;
    bb_writer_put_u8(w, q->calibrated);
    bb_writer_put_u32le(w, n);
    bb_writer_put(w, q->lo, (size_t)n * 4);
    bb_writer_put(w, q->hi, (size_t)n * 4);
}

static int int8_load(codec *c, bb_reader *r, bb_error *err)
{
    int8_codec *q = (int8_codec *)c;
    uint8_t calibrated = 0;
    uint32_t n = 0;
    if (!bb_reader_u8(r, &calibrated) || calibrated > 1 || !bb_reader_u32le(r, &n) ||
        !bb_reader_has(r, n, 8) || (calibrated && (n == 0 || (!q->per_channel && n != 1))) ||
        (!calibrated && n))
        return bb_error_set(err, BB_EDECODE, "%s: the snapshot's calibration is malformed",
                            c->who);
    q->calibrated = false;
    if (!calibrated)
        return BB_OK;
    if (set_channels(q, n))
        return codec_oom(c, err);
    bb_reader_get(r, q->lo, (size_t)n * 4);
    bb_reader_get(r, q->hi, (size_t)n * 4);
    for (uint32_t i = 0; i < n; i++)
        if (!(isfinite(q->lo[i]) && isfinite(q->hi[i]) && q->lo[i] <= q->hi[i]))
            return bb_error_set(err, BB_EDECODE, "%s: the snapshot's range %u is malformed",
                                c->who, i);
    q->calibrated = true;
    return BB_OK;
}

/* ---- config ----------------------------------------------------------------------------- */

static int int8_init(codec *c, const bbp_config *cfg, uint64_t seed, bb_error *err)
{
    static const char *const GRAN[] = {"per_tensor", "per_channel"};
    int8_codec *q = (int8_codec *)c;
    int g = 0;
    (void)seed;
    int rc = bbp_config_enum(cfg, "granularity", GRAN, 2, &g, err);
    if (!rc)
        rc = bbp_config_int(cfg, "axis", -BB_MAX_DIMS, BB_MAX_DIMS - 1, &q->axis, err);
    q->per_channel = g == 1;
    return rc;
}

static void int8_fini(codec *c)
{
    int8_codec *q = (int8_codec *)c;
    free(q->lo);
    free(q->hi);
}

static const bb_config_decl INT8_CONFIG[] = {
    {"granularity", "string", "\"per_tensor\"",
     "\"per_tensor\" (one scale and zero point) or \"per_channel\" (one per index of axis)"},
    {"axis", "int", "-1", "the channel axis of per_channel (negative counts from the end)"},
    CODEC_COMMON_DECLS,
};

static const codec_kind INT8_KIND = {
    .type_name = "codec::Int8Affine",
    .code_type = &BB_TYPE_TENSOR_U8,
    .size = sizeof(int8_codec),
    .config = INT8_CONFIG,
    .n_config = BBP_COUNT(INT8_CONFIG),
    .init = int8_init,
    .fini = int8_fini,
    .train = int8_train,
    .encode = int8_encode,
    .decode = int8_decode,
    .save = int8_save,
    .load = int8_load,
};

CODEC_COMPONENT(CODEC_TYPE_INT8_AFFINE, "codec::Int8Affine", INT8_KIND, INT8_CONFIG,
                CODEC_OPSETS_U8,
                "f32 -> u8 affine quantization (scale, zero point), per tensor or per channel; "
                "ranges calibrated by TrainCodebook, else each tensor's own; a round trip is "
                "off by at most scale/2 within the range");
