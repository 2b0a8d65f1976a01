/*
 * topk.c — codec::TopK: tensor_f32 -> tensor_u8 holding the k entries of
 * largest magnitude as (index, value) pairs; Decompress puts them back in a
 * tensor of zeros. With error feedback (Stich, Cordonnier and Jaggi,
 * "Sparsified SGD with Memory", 2018) the codec keeps what it did not send
 * — the residual — and adds it to the next tensor before choosing, so no
 * part of an update is lost, only delayed: after any number of Compress
 * calls, sum(decoded) + residual == sum(inputs). That makes the residual
 * state (kept in the snapshot), and one TopK slot serves one stream of
 * same-sized tensors (a client's updates).
 *
 * k = the `k` config, else ceil(ratio x elements), at least 1 and at most
 * the elements. Selection: the k-th largest magnitude by quickselect over a
 * copy (linear time), then one scan in index order takes every entry above
 * it and entries equal to it until k — deterministic, indices ascending.
 *
 * Payload after the frame header (codec.h):
 *   varint k, u8 index width (2 when the elements fit 16 bits, else 4),
 *   k indices (little-endian, strictly increasing), k f32 values
 * A decoder refuses indices out of range or out of order, non-finite values
 * and any length that does not match k exactly.
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"

typedef struct topk_codec {
    codec base;
    double ratio;
    int64_t k;            /* 0: from ratio */
    bool error_feedback;
    float *residual;      /* n_residual, when error_feedback */
    size_t n_residual;    /* 0 until the first Compress */
} topk_codec;

static size_t k_for(const topk_codec *t, size_t n)
{
    double k = t->k > 0 ? (double)t->k : ceil(t->ratio * (double)n - 1e-9);
    if (k < 1)
        k = 1;
    return n == 0 ? 0 : k > (double)n ? n : (size_t)k;
}

static void swap(float *m, size_t i, size_t j)
{
    float t = m[i];
    m[i] = m[j];
    m[j] = t;
}

/* The k-th largest of m[0..n) (1 <= k <= n), reordering m: quickselect
 * with a median-of-three pivot and a three-way partition, so runs of equal
 * magnitudes (zeros) cost one pass. */
static float kth_largest(float *m, size_t n, size_t k)
{
    size_t lo = 0, hi = n, want = k - 1; /* window [lo, hi); want: index, descending */
    for (;;) {
        float a = m[lo], b = m[lo + (hi - lo) / 2], c = m[hi - 1];
        float pivot = a < b ? (b < c ? b : a < c ? c : a) : (a < c ? a : b < c ? c : b);
        size_t gt = lo, i = lo, lt = hi; /* [lo, gt) > pivot, [gt, lt) == pivot, [lt, hi) < */
        while (i < lt) {
            if (m[i] > pivot)
                swap(m, gt++, i++);
            else if (m[i] < pivot)
                swap(m, i, --lt);
            else
                i++;
        }
        if (want < gt)
            hi = gt;
        else if (want >= lt)
            lo = lt;
        else
            return pivot;
    }
}

static int topk_encode(codec *c, const bb_value *in, bb_value **code, bb_error *err)
{
    topk_codec *t = (topk_codec *)c;
    size_t n = bb_tensor_numel(in), bad = codec_first_nonfinite(bb_tensor_f32(in), n);
    if (bad < n)
        return bb_error_set(err, BB_EINVAL, "%s: Compress: element %zu is %g", c->who, bad,
                            (double)bb_tensor_f32(in)[bad]);
    if (t->error_feedback && t->n_residual && t->n_residual != n)
        return bb_error_set(err, BB_ETYPE,
                            "%s: Compress got %zu elements but the residual holds %zu: error "
                            "feedback needs one stream of same-sized tensors (or set "
                            "\"error_feedback\": false)",
                            c->who, n, t->n_residual);
    float *v = malloc((n ? n : 1) * 2 * sizeof *v); /* v: what is sent from; m: magnitudes */
    if (!v)
        return codec_oom(c, err);
    if (t->error_feedback && !t->n_residual) {
        if (!(t->residual = calloc(n ? n : 1, sizeof *t->residual))) {
            free(v);
            return codec_oom(c, err);
        }
        t->n_residual = n;
    }
    float *m = v + n;
    const float *x = bb_tensor_f32(in);
    for (size_t i = 0; i < n; i++) {
        v[i] = t->error_feedback ? x[i] + t->residual[i] : x[i];
        m[i] = fabsf(v[i]);
    }
    size_t k = k_for(t, n), width = n <= 65536 ? 2 : 4;
    float tau = k ? kth_largest(m, n, k) : 0;
    bb_writer w;
    const bb_tensor_view *tv = &in->u.tensor;
    *code = codec_frame_begin(CODEC_FMT_TOPK, tv->ndim, tv->dims,
                              bb_uvarint_size(k) + 1 + k * (width + 4), &w);
    if (!*code) {
        free(v);
        return codec_oom(c, err);
    }
    bb_writer_put_uvarint(&w, k);
    bb_writer_put_u8(&w, (uint8_t)width);
    uint8_t *idx = NULL, *val = NULL; /* the entries, written in place */
    if (k) {
        idx = bb_writer_grow(&w, k * (width + 4));
        val = idx + k * width;
    }
    assert(!w.failed && w.len == w.cap); /* sized exactly */
    size_t taken = 0, ties = 0;
    for (size_t i = 0; i < n; i++) /* entries equal to tau fill what the larger leave */
        ties += fabsf(v[i]) > tau;
    ties = k - ties;
    for (size_t i = 0; i < n && taken < k; i++) {
        float a = fabsf(v[i]);
        if (a < tau || (a == tau && !ties))
            continue;
        if (a == tau)
            ties--;
        uint32_t ix = (uint32_t)i;
        memcpy(idx + taken * width, &ix, width); /* little-endian: the low bytes */
        memcpy(val + taken * 4, &v[i], 4);
        taken++;
        v[i] = 0; /* sent: nothing of it stays behind */
    }
    if (t->error_feedback)
        memcpy(t->residual, v, n * sizeof *v);
    free(v);
    return BB_OK;
}

static int topk_decode(const codec *c, const bb_value *code, bb_value **out, bb_error *err)
{
    codec_shape sh;
    bb_reader r;
    uint64_t k = 0;
    uint8_t width = 0;
    int rc = codec_frame_open(c, code, CODEC_FMT_TOPK, &sh, &r, err);
    if (!rc)
        rc = codec_get_varint(c, &r, "the entry count", &k, err);
    if (rc)
        return rc;
    if (k > sh.numel)
        return codec_malformed(c, &r, "more entries than elements", err);
    if (!bb_reader_u8(&r, &width) || (width != 2 && width != 4))
        return codec_malformed(c, &r, "index width", err);
    const uint8_t *idx = NULL;
    if (bb_reader_left(&r) != k * (width + 4u) || !bb_reader_view(&r, k * (width + 4u), &idx))
        return bb_error_set(err, BB_EDECODE,
                            "%s: malformed code: %zu bytes of entries, want %llu (%llu entries "
                            "of %u + 4 bytes)",
                            c->who, bb_reader_left(&r), (unsigned long long)(k * (width + 4u)),
                            (unsigned long long)k, width);
    const uint8_t *val = idx + k * width;
    if (!(*out = bb_value_tensor_new(BB_DT_FLOAT, sh.ndim, sh.dims)))
        return codec_oom(c, err);
    float *x = bb_tensor_f32(*out);
    uint64_t prev = 0;
    for (uint64_t i = 0; i < k; i++) {
        uint32_t ix = 0;
        float f;
        memcpy(&ix, idx + i * width, width);
        memcpy(&f, val + i * 4, 4);
        const char *bad = ix >= sh.numel          ? "an index beyond the tensor"
                          : i && ix <= prev       ? "indices out of order"
                          : !isfinite(f)          ? "a non-finite value"
                                                  : NULL;
        if (bad) {
            bb_value_unref(*out);
            *out = NULL;
            const uint8_t *at = ix >= sh.numel || (i && ix <= prev) ? idx + i * width
                                                                    : val + i * 4;
            bb_reader_fail(&r, (size_t)(at - r.data), BB_EPARSE, bad);
            return codec_malformed(c, &r, bad, err);
        }
        x[ix] = f;
        prev = ix;
    }
    return BB_OK;
}

/* ---- state: u64 residual elements, f32 residual[] -------------------------------------- */

static void topk_save(const codec *c, bb_writer *w)
{
    const topk_codec *t = (const topk_codec *)c;
    bb_writer_put_u64le(w, t->n_residual);
    bb_writer_put(w, t->residual, t->n_residual * sizeof *t->residual);
}

static int topk_load(codec *c, bb_reader *r, bb_error *err)
{
    topk_codec *t = (topk_codec *)c;
    uint64_t n = 0;
    if (!bb_reader_u64le(r, &n) || n > c->max_elements || !bb_reader_has(r, n, 4) ||
        (n && !t->error_feedback))
        return bb_error_set(err, BB_EDECODE, "%s: the snapshot's residual is malformed", c->who);
    float *res = n ? malloc(n * sizeof *res) : NULL;
    if (n && !res)
        return codec_oom(c, err);
    bb_reader_get(r, res, n * sizeof *res);
    if (codec_first_nonfinite(res, n) < n) {
        free(res);
        return bb_error_set(err, BB_EDECODE, "%s: the snapshot's residual is not finite", c->who);
    }
    free(t->residual);
    t->residual = res;
    t->n_residual = n;
    return BB_OK;
}

/* ---- config ---------------------------------------------------------------------------- */

static int topk_init(codec *c, const bbp_config *cfg, uint64_t seed, bb_error *err)
{
    topk_codec *t = (topk_codec *)c;
    double k = 0;
    bool has_k = false;
    (void)seed;
    int rc = bbp_config_double(cfg, "ratio", 1e-9, 1, &t->ratio, err);
    if (!rc)
        rc = bbp_config_number(cfg, "k", true, 1, 4294967295.0, &k, &has_k, err);
    if (!rc)
        rc = bbp_config_bool(cfg, "error_feedback", &t->error_feedback, err);
    t->k = has_k ? (int64_t)k : 0;
    return rc;
}

static void topk_fini(codec *c)
{
    free(((topk_codec *)c)->residual);
}

static const bb_config_decl TOPK_CONFIG[] = {
    {"ratio", "float", "0.01", "fraction of the elements sent: k = ceil(ratio x elements)"},
    {"k", "int", "null", "entries sent, whatever the size (overrides ratio)"},
    {"error_feedback", "bool", "true",
     "keep what was not sent and add it to the next tensor (Stich et al. 2018); needs "
     "same-sized tensors"},
    CODEC_COMMON_DECLS,
};

static const codec_kind TOPK_KIND = {
    .type_name = "codec::TopK",
    .code_type = &BB_TYPE_TENSOR_U8,
    .size = sizeof(topk_codec),
    .config = TOPK_CONFIG,
    .n_config = BBP_COUNT(TOPK_CONFIG),
    .init = topk_init,
    .fini = topk_fini,
    .encode = topk_encode,
    .decode = topk_decode,
    .save = topk_save,
    .load = topk_load,
};

CODEC_COMPONENT(CODEC_TYPE_TOPK, "codec::TopK", TOPK_KIND, TOPK_CONFIG, CODEC_OPSETS_U8,
                "f32 -> u8: the k largest-magnitude entries as (index, value) pairs, with "
                "error feedback (the unsent residual joins the next tensor; kept in the "
                "snapshot)");
