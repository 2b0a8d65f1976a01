/*
 * plugin_train.h — what every trainable Model of the standard plugins
 * shares: targets read from a data source's labels, the losses (softmax
 * cross-entropy over logits, mean squared error) with their gradient, and
 * the optimizers (SGD with momentum, Adam, AdamW; weight decay; FedProx's
 * proximal term).
 *
 * Conventions: outputs are [rows, k] row-major; a loss is the MEAN over
 * rows of the per-row loss, so its gradient carries 1/rows; MSE's per-row
 * loss is the mean over the k outputs. An optimizer steps only the ranges
 * of the flat vector that are trained (a model's running statistics live
 * in the same vector and must not decay or move).
 *
 * Header-only (static inline): plugins share no library, each .so compiles
 * its own copy.
 */
#ifndef BBP_PLUGIN_TRAIN_H
#define BBP_PLUGIN_TRAIN_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bb/bytes.h>
#include <bb/value.h>

typedef enum bbp_loss { BBP_LOSS_CE, BBP_LOSS_MSE } bbp_loss;
typedef enum bbp_opt { BBP_OPT_SGD, BBP_OPT_ADAM, BBP_OPT_ADAMW } bbp_opt;

/* Targets of a batch: class ids, or a dense [rows, k] matrix. */
typedef struct bbp_target {
    const int32_t *cls;
    const float *dense;
} bbp_target;

/* Sums over the rows seen. */
typedef struct bbp_stats {
    double loss_sum;
    uint64_t correct, rows;
} bbp_stats;

/* Targets from a labels tensor: f32 [rows, k] (dense), or [rows] (f32 /
 * f64 / i32 / i64): class ids in [0, k), except for MSE with k = 1, where
 * they are the regression targets. cls_buf and fbuf are the caller's
 * scratch of rows entries. On error msg says why. */
static inline int bbp_target_from(bbp_loss loss, size_t k, const bb_value *y, size_t rows,
                                  int32_t *cls_buf, float *fbuf, bbp_target *t, char *msg,
                                  size_t cap)
{
    memset(t, 0, sizeof *t);
    if (!y || y->type->kind != BB_VK_TENSOR) {
        snprintf(msg, cap, "the target is %s, not a tensor", y ? y->type->name : "missing");
        return BB_ETYPE;
    }
    const bb_tensor_view *v = &y->u.tensor;
    if (v->ndim == 2 && (size_t)v->dims[0] == rows && (size_t)v->dims[1] == k &&
        v->dtype == BB_DT_FLOAT) {
        t->dense = (const float *)(const void *)v->data;
        return BB_OK;
    }
    if (v->ndim != 1 || (size_t)v->dims[0] != rows) {
        snprintf(msg, cap, "the target has %u dimensions / %lld rows; want [%zu] labels or "
                 "[%zu, %zu] f32 targets", v->ndim, v->ndim ? (long long)v->dims[0] : 0LL, rows,
                 rows, k);
        return BB_ETYPE;
    }
    bool regression = loss == BBP_LOSS_MSE && k == 1;
    for (size_t r = 0; r < rows; r++) {
        double d;
        switch (v->dtype) {
        case BB_DT_FLOAT: d = ((const float *)(const void *)v->data)[r]; break;
        case BB_DT_DOUBLE: d = ((const double *)(const void *)v->data)[r]; break;
        case BB_DT_INT32: d = ((const int32_t *)(const void *)v->data)[r]; break;
        case BB_DT_INT64: d = (double)((const int64_t *)(const void *)v->data)[r]; break;
        default:
            snprintf(msg, cap, "labels of dtype %s", bb_dtype_name(v->dtype));
            return BB_ETYPE;
        }
        if (regression) {
            fbuf[r] = (float)d;
            continue;
        }
        if (!(d >= 0 && d < (double)k && d == floor(d))) {
            snprintf(msg, cap, "label %g of row %zu is not a class id in [0, %zu)", d, r, k);
            return BB_EINVAL;
        }
        cls_buf[r] = (int32_t)d;
    }
    if (regression)
        t->dense = fbuf;
    else
        t->cls = cls_buf;
    return BB_OK;
}

static inline size_t bbp_argmax(const float *v, size_t k)
{
    size_t best = 0;
    for (size_t i = 1; i < k; i++)
        if (v[i] > v[best])
            best = i;
    return best;
}

/* Loss of outputs y [rows, k] against t (rows counted from row0 of t);
 * dz (rows x k, may be NULL) receives dLoss/dy of the mean loss over
 * `mean_rows` rows (usually rows). Adds to st. */
static inline void bbp_loss_grad(bbp_loss loss, const float *y, size_t rows, size_t k,
                                 const bbp_target *t, size_t mean_rows, float *dz, bbp_stats *st)
{
    double inv = mean_rows ? 1.0 / (double)mean_rows : 0.0;
    for (size_t r = 0; r < rows; r++) {
        const float *yr = y + r * k;
        const float *tr = t->dense ? t->dense + r * k : NULL;
        float *gr = dz ? dz + r * k : NULL;
        double l = 0;
        bool hit;
        if (loss == BBP_LOSS_CE) {
            double mx = yr[bbp_argmax(yr, k)], sum = 0, tsum = 0;
            for (size_t j = 0; j < k; j++)
                sum += exp((double)yr[j] - mx);
            double lse = mx + log(sum);
            for (size_t j = 0; j < k; j++) {
                double tj = tr ? tr[j] : (int32_t)j == t->cls[r];
                tsum += tj;
                l -= tj * ((double)yr[j] - lse);
            }
            for (size_t j = 0; gr && j < k; j++) {
                double tj = tr ? tr[j] : (int32_t)j == t->cls[r];
                gr[j] = (float)((exp((double)yr[j] - lse) * tsum - tj) * inv);
            }
            hit = bbp_argmax(yr, k) == (tr ? bbp_argmax(tr, k) : (size_t)t->cls[r]);
        } else {
            double scale = 2.0 * inv / (double)k;
            for (size_t j = 0; j < k; j++) {
                double tj = tr ? tr[j] : k == 1 ? t->cls[r] : (int32_t)j == t->cls[r];
                double d = (double)yr[j] - tj;
                l += d * d / (double)k;
                if (gr)
                    gr[j] = (float)(scale * d);
            }
            if (k == 1) /* regression: within half a unit counts as right */
                hit = fabs((double)yr[0] - (tr ? tr[0] : t->cls[r])) < 0.5;
            else
                hit = bbp_argmax(yr, k) == (tr ? bbp_argmax(tr, k) : (size_t)t->cls[r]);
        }
        st->loss_sum += l;
        st->correct += hit;
    }
    st->rows += rows;
}

/* An f32 scalar tensor (new reference), NULL on OOM. */
static inline bb_value *bbp_scalar(float v)
{
    bb_value *t = bb_value_tensor_new(BB_DT_FLOAT, 0, NULL);
    if (t)
        *bb_tensor_f32(t) = v;
    return t;
}

/* The mean loss and the accuracy of st as f32 scalars into out[0], and
 * out[1] when want_accuracy; false on OOM (the caller releases out[]). */
static inline bool bbp_stats_outputs(const bbp_stats *st, bb_value **out, bool want_accuracy)
{
    double rows = st->rows ? (double)st->rows : 1.0;
    out[0] = bbp_scalar((float)(st->loss_sum / rows));
    if (want_accuracy)
        out[1] = bbp_scalar((float)((double)st->correct / rows));
    return out[0] && (!want_accuracy || out[1]);
}

/* ---- optimizers ---------------------------------------------------------------------- */

/* A run of trained floats in the flat vector. */
typedef struct bbp_range {
    size_t off, n;
} bbp_range;

typedef struct bbp_optim {
    bbp_opt kind;
    float lr, momentum, beta1, beta2, eps;
    float weight_decay;  /* SGD, Adam: L2 added to the gradient; AdamW: decoupled */
    uint64_t t;          /* Adam steps */
    float *m, *v;        /* n each (v: Adam / AdamW only) */
} bbp_optim;

/* Momentum or Adam moments: plain SGD (momentum 0) keeps none (m, v NULL),
 * so a plain-SGD model holds no second vector of its size. */
static inline bool bbp_optim_has_moments(const bbp_optim *o)
{
    return o->kind != BBP_OPT_SGD || o->momentum != 0;
}

static inline int bbp_optim_init(bbp_optim *o, size_t n)
{
    o->m = bbp_optim_has_moments(o) ? calloc(n ? n : 1, sizeof *o->m) : NULL;
    o->v = o->kind != BBP_OPT_SGD ? calloc(n ? n : 1, sizeof *o->v) : NULL;
    o->t = 0;
    return (o->m || !bbp_optim_has_moments(o)) && (o->kind == BBP_OPT_SGD || o->v) ? BB_OK
                                                                                  : BB_ENOMEM;
}

static inline void bbp_optim_reset(bbp_optim *o, size_t n)
{
    if (o->m)
        memset(o->m, 0, n * sizeof *o->m);
    if (o->v)
        memset(o->v, 0, n * sizeof *o->v);
    o->t = 0;
}

static inline void bbp_optim_free(bbp_optim *o)
{
    free(o->m);
    free(o->v);
    o->m = o->v = NULL;
}

/* dst becomes a copy of src (settings and state) with its own buffers;
 * BB_ENOMEM (dst freed) on failure. */
static inline int bbp_optim_clone(bbp_optim *dst, const bbp_optim *src, size_t n)
{
    *dst = *src;
    dst->m = dst->v = NULL;
    if (bbp_optim_init(dst, n)) {
        bbp_optim_free(dst);
        return BB_ENOMEM;
    }
    if (src->m && dst->m)
        memcpy(dst->m, src->m, n * sizeof *dst->m);
    if (src->v && dst->v)
        memcpy(dst->v, src->v, n * sizeof *dst->v);
    dst->t = src->t;
    return BB_OK;
}

/* The first moment into a snapshot: bytes of it, zeros for plain SGD (the
 * layouts keep one; a reader drops them again). */
static inline void bbp_optim_put_m(const bbp_optim *o, bb_writer *w, size_t bytes)
{
    if (o->m) {
        bb_writer_put(w, o->m, bytes);
        return;
    }
    uint8_t *z = bb_writer_grow(w, bytes);
    if (z)
        memset(z, 0, bytes);
}

static inline void bbp__optim_run(bbp_optim *o, float *restrict p, const float *restrict g,
                                  float *restrict m, float *restrict v, size_t n, float c1,
                                  float c2)
{
    float lr = o->lr, wd = o->weight_decay;
    if (o->kind == BBP_OPT_SGD && o->momentum == 0) {
        for (size_t i = 0; i < n; i++)
            p[i] -= lr * (g[i] + wd * p[i]);
    } else if (o->kind == BBP_OPT_SGD) {
        float mu = o->momentum;
        for (size_t i = 0; i < n; i++) {
            m[i] = mu * m[i] + g[i] + wd * p[i];
            p[i] -= lr * m[i];
        }
    } else {
        float b1 = o->beta1, b2 = o->beta2, eps = o->eps;
        float l2 = o->kind == BBP_OPT_ADAM ? wd : 0.0f;
        float decay = o->kind == BBP_OPT_ADAMW ? 1.0f - lr * wd : 1.0f;
        for (size_t i = 0; i < n; i++) {
            float gi = g[i] + l2 * p[i];
            m[i] = b1 * m[i] + (1 - b1) * gi;
            v[i] = b2 * v[i] + (1 - b2) * gi * gi;
            p[i] = p[i] * decay - lr * (m[i] * c1) / (sqrtf(v[i] * c2) + eps);
        }
    }
}

/* One step on the trained ranges of p with gradient g (both the flat
 * vector's length; ranges NULL: all n floats). */
static inline void bbp_optim_step(bbp_optim *o, float *p, const float *g, size_t n,
                                  const bbp_range *ranges, size_t n_ranges)
{
    float c1 = 1, c2 = 1;
    if (o->kind != BBP_OPT_SGD) {
        o->t++;
        c1 = (float)(1.0 / (1.0 - pow(o->beta1, (double)o->t)));
        c2 = (float)(1.0 / (1.0 - pow(o->beta2, (double)o->t)));
    }
    if (!ranges) {
        bbp__optim_run(o, p, g, o->m, o->v, n, c1, c2);
        return;
    }
    for (size_t k = 0; k < n_ranges; k++) {
        size_t off = ranges[k].off;
        bbp__optim_run(o, p + off, g + off, o->m ? o->m + off : NULL, o->v ? o->v + off : NULL,
                       ranges[k].n, c1, c2);
    }
}

/* FedProx (Li et al. 2020): the gradient of mu/2 ||p - center||^2 added to
 * g on the trained ranges. */
static inline void bbp_prox_add(float mu, const float *p, const float *center, float *g,
                                size_t n, const bbp_range *ranges, size_t n_ranges)
{
    if (mu == 0)
        return;
    for (size_t k = 0; k < (ranges ? n_ranges : 1); k++) {
        size_t off = ranges ? ranges[k].off : 0, len = ranges ? ranges[k].n : n;
        for (size_t i = off; i < off + len; i++)
            g[i] += mu * (p[i] - center[i]);
    }
}

/* ---- which parameters a node holds ---------------------------------------------------- */

/* FNV-1a over the parameters' 64-bit little-endian words, in four lanes,
 * avalanched (the ParamsDigest op): which model version a node holds, e.g.
 * across a restart, without shipping the parameters. */
static inline uint64_t bbp_params_digest(const float *p, size_t n)
{
    /* Word-wise FNV-1a in four independent lanes (word k goes to lane k mod
     * 4): one lane's multiply chain ran at ~5 GB/s, 73-120 ms for a
     * 100M-parameter model at the start of every round; four keep up with
     * memory. The lanes are folded into the first in order, an odd last
     * float joins it alone, then a final avalanche so every bit of the
     * result depends on every word. */
    const uint64_t prime = 0x100000001b3ULL;
    uint64_t lane[4];
    for (int k = 0; k < 4; k++)
        lane[k] = (0xcbf29ce484222325ULL ^ (uint64_t)n) + (uint64_t)k;
    size_t words = n / 2, i = 0;
    for (; i + 4 <= words; i += 4)
        for (int k = 0; k < 4; k++) {
            uint64_t w;
            memcpy(&w, &p[2 * (i + (size_t)k)], 8);
            lane[k] = (lane[k] ^ w) * prime;
        }
    for (size_t j = 2 * i; j + 2 <= n; j += 2) { /* the last 0-3 words */
        uint64_t w;
        memcpy(&w, &p[j], 8);
        lane[(j / 2) % 4] = (lane[(j / 2) % 4] ^ w) * prime;
    }
    uint64_t h = lane[0];
    for (int k = 1; k < 4; k++)
        h = (h ^ lane[k]) * prime;
    if (n % 2) {
        uint32_t lo;
        memcpy(&lo, &p[n - 1], 4);
        h = (h ^ lo) * prime;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

/* A Train job's commit: the job's parameters and optimizer state become
 * the model's, and the model's old ones go to the job (which frees them);
 * out[0] a copy of the new parameters (n floats), out[1] the rows trained
 * on. False on OOM (the caller releases out[]). */
static inline bool bbp_train_commit(float **params, float **job_params, bbp_optim *opt,
                                    bbp_optim *job_opt, size_t n, uint64_t rows, bb_value **out)
{
    float *p = *params;
    *params = *job_params;
    *job_params = p;
    bbp_optim o = *opt;
    *opt = *job_opt;
    *job_opt = o;
    int64_t dim = (int64_t)n;
    out[0] = bb_value_tensor_copy(BB_DT_FLOAT, 1, &dim, *params, n * sizeof(float));
    out[1] = bb_value_u64(&BB_TYPE_U64, rows);
    return out[0] && out[1];
}

/* ---- a model snapshot's head ----------------------------------------------------------
 * magic (4 bytes), u32 version, u64 floats, u32 optimizer, u64 optimizer
 * steps, u64 changes (the CommandIds answered so far); the model's state
 * follows. nn::Mlp and nn::Onnx write it alike. */
static inline void bbp_snapshot_head_put(bb_writer *w, const char *magic, uint32_t version,
                                         size_t n, const bbp_optim *o, uint64_t changes)
{
    bb_writer_put(w, magic, 4);
    bb_writer_put_u32le(w, version);
    bb_writer_put_u64le(w, n);
    bb_writer_put_u32le(w, (uint32_t)o->kind);
    bb_writer_put_u64le(w, o->t);
    bb_writer_put_u64le(w, changes);
}

/* Reads the head into *version (1..max_version), *steps and *changes; an
 * error naming who when it is not a snapshot of this model (the magic, a
 * version, the float count or the optimizer differ). */
static inline int bbp_snapshot_head_get(bb_reader *r, const char *magic, uint32_t max_version,
                                        size_t n, const bbp_optim *o, const char *who,
                                        uint32_t *version, uint64_t *steps, uint64_t *changes,
                                        bb_error *err)
{
    char got[4];
    uint32_t kind = 0;
    uint64_t floats = 0;
    *version = 0;
    if (!bb_reader_get(r, got, 4) || memcmp(got, magic, 4) || !bb_reader_u32le(r, version) ||
        *version < 1 || *version > max_version || !bb_reader_u64le(r, &floats) ||
        !bb_reader_u32le(r, &kind) || !bb_reader_u64le(r, steps) ||
        !bb_reader_u64le(r, changes))
        return bb_error_set(err, BB_EDECODE, "%s: not a snapshot of this model type (\"%.4s\" "
                            "version 1..%u)", who, magic, max_version);
    if (floats != n || kind != (uint32_t)o->kind)
        return bb_error_set(err, BB_EDECODE,
                            "%s: the snapshot holds %llu parameters for optimizer %u; this model "
                            "has %zu for optimizer %u",
                            who, (unsigned long long)floats, kind, n, (unsigned)o->kind);
    return BB_OK;
}

#endif
