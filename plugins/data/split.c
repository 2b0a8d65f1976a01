/*
 * split.c — from a table to the rows one source serves (the pipeline of
 * data.h) in two steps:
 *   data_prepare       held-out split, normalization statistics from the
 *                      training rows applied to every row, the held-out rows
 *                      as evaluation tensors: what every node reading the
 *                      same table shares (the host's shared cache keeps one
 *                      copy for all its nodes);
 *   data_source_build  the part, then the shard: the node's own rows.
 * Every random draw here uses a seed from the config that all nodes share
 * (split_seed, partition_seed), never the host seed, so clients reading one
 * file agree on who holds which row.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"

typedef struct idx_list {
    uint32_t *v;
    size_t n;
} idx_list;

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static void sort_idx(idx_list *l) { qsort(l->v, l->n, sizeof *l->v, cmp_u32); }

static int oom(const data_source *s, bb_error *err)
{
    return bb_error_set(err, BB_ENOMEM, "%s: out of memory", s->who);
}

/* Per-feature (v - shift) * scale from the training rows. */
static int norm_stats(const data_table *t, const idx_list *train, data_norm norm, double **shift,
                      double **scale)
{
    size_t d = t->cols;
    *shift = calloc(d, sizeof **shift);
    *scale = malloc(d * sizeof **scale);
    if (!*shift || !*scale)
        return BB_ENOMEM;
    for (size_t j = 0; j < d; j++)
        (*scale)[j] = 1.0;
    if (norm == NORM_NONE || train->n == 0)
        return BB_OK;
    for (size_t j = 0; j < d; j++) {
        double a = INFINITY, b = -INFINITY, sum = 0, sq = 0;
        for (size_t k = 0; k < train->n; k++) {
            double v = t->x[(size_t)train->v[k] * d + j];
            a = v < a ? v : a;
            b = v > b ? v : b;
            sum += v;
        }
        double mean = sum / (double)train->n;
        for (size_t k = 0; k < train->n; k++) {
            double v = t->x[(size_t)train->v[k] * d + j] - mean;
            sq += v * v;
        }
        double sd = sqrt(sq / (double)train->n);
        if (norm == NORM_MINMAX) {
            (*shift)[j] = a;
            (*scale)[j] = b > a ? 1.0 / (b - a) : 0.0;
        } else {
            (*shift)[j] = mean;
            (*scale)[j] = sd > 0 ? 1.0 / sd : 0.0;
        }
    }
    return BB_OK;
}

/* Tensors [n, sample shape] (or [n, d] when s has none) and [n] of the
 * listed rows of t (already normalized). */
static int gather_rows(const data_source *s, const data_table *t, const idx_list *rows,
                       bb_value **x, bb_value **y, bb_error *err)
{
    int64_t dx[BB_MAX_DIMS] = {(int64_t)rows->n, (int64_t)t->cols}, dy = (int64_t)rows->n;
    if (s->sample_nd)
        memcpy(dx + 1, s->sample_dims, s->sample_nd * sizeof *dx);
    *x = bb_value_tensor_new(BB_DT_FLOAT, s->sample_nd ? 1 + s->sample_nd : 2, dx);
    *y = t->y ? bb_value_tensor_new(BB_DT_FLOAT, 1, &dy) : NULL;
    if (!*x || (t->y && !*y)) {
        bb_value_unref(*x);
        bb_value_unref(*y);
        *x = *y = NULL;
        return oom(s, err);
    }
    float *px = bb_tensor_f32(*x);
    for (size_t k = 0; k < rows->n; k++) {
        memcpy(px + k * t->cols, t->x + (size_t)rows->v[k] * t->cols, t->cols * sizeof *px);
        if (t->y)
            bb_tensor_f32(*y)[k] = t->y[rows->v[k]];
    }
    return BB_OK;
}

/* Class ids of the rows (for the by-label partitions). */
static int class_of(const data_source *s, const data_table *t, uint32_t row, uint32_t *out,
                    bb_error *err)
{
    float v = t->y[row];
    if (!(v >= 0 && v <= DATA_MAX_LABEL && v == floorf(v)))
        return bb_error_set(err, BB_EINVAL,
                            "%s: row %u has label %g; partitioning by label needs class ids "
                            "0..%d",
                            s->who, row + 1, (double)v, DATA_MAX_LABEL);
    *out = (uint32_t)v;
    return BB_OK;
}

/* Dirichlet label skew. For every class, the shares of its rows that go
 * to the shards are drawn from Dir(alpha, ..., alpha); a class's rows,
 * shuffled, are cut at the cumulative shares (rounded), so the shards
 * partition the part exactly. A draw that leaves some shard with fewer than
 * dirichlet_min_rows rows is thrown away and drawn again (as NIID-Bench and
 * Flower's DirichletPartitioner do: small alpha leaves shards empty), a
 * bounded number of times; the draws come before any shuffle, so the seed
 * alone decides the outcome. */

#define DIRICHLET_MAX_DRAWS 100
#define DIRICHLET_DRAW_BUDGET (UINT64_C(1) << 26) /* gamma draws over every attempt */

typedef struct class_rows {
    uint32_t *row;          /* the part's rows grouped by class */
    size_t *start;          /* class c: row[start[c] .. start[c + 1]) */
    uint32_t n_classes;     /* max class id + 1 */
} class_rows;

static int group_by_class(const data_source *s, const data_table *t, const idx_list *part,
                          class_rows *g, bb_error *err)
{
    uint32_t *cls = malloc((part->n ? part->n : 1) * sizeof *cls);
    g->row = malloc((part->n ? part->n : 1) * sizeof *g->row);
    g->start = NULL;
    g->n_classes = 0;
    int rc = cls && g->row ? BB_OK : oom(s, err);
    for (size_t k = 0; !rc && k < part->n; k++) {
        rc = class_of(s, t, part->v[k], &cls[k], err);
        g->n_classes = !rc && cls[k] >= g->n_classes ? cls[k] + 1 : g->n_classes;
    }
    if (!rc && !(g->start = calloc((size_t)g->n_classes + 1, sizeof *g->start)))
        rc = oom(s, err);
    if (!rc) { /* a counting sort keeps each class's rows in part order */
        for (size_t k = 0; k < part->n; k++)
            g->start[cls[k] + 1]++;
        for (uint32_t c = 0; c < g->n_classes; c++)
            g->start[c + 1] += g->start[c];
        size_t *fill = malloc(((size_t)g->n_classes + 1) * sizeof *fill);
        if (!fill) {
            rc = oom(s, err);
        } else {
            memcpy(fill, g->start, ((size_t)g->n_classes + 1) * sizeof *fill);
            for (size_t k = 0; k < part->n; k++)
                g->row[fill[cls[k]]++] = part->v[k];
            free(fill);
        }
    }
    free(cls);
    return rc;
}

/* One draw: every shard's size in *size, this shard's cut of class c in
 * [lo[c], hi[c]) of that class's rows. */
static void dirichlet_draw(const class_rows *g, const data_options *o, bbp_rng *rng,
                           double *share, size_t *size, size_t *lo, size_t *hi)
{
    memset(size, 0, (size_t)o->shard_count * sizeof *size);
    for (uint32_t c = 0; c < g->n_classes; c++) {
        size_t m = g->start[c + 1] - g->start[c];
        lo[c] = hi[c] = 0;
        if (!m)
            continue;
        double total = 0, acc = 0;
        for (int64_t i = 0; i < o->shard_count; i++)
            total += share[i] = bbp_rng_gamma(rng, o->dirichlet_alpha);
        size_t prev = 0;
        for (int64_t i = 0; i < o->shard_count; i++) {
            acc += share[i];
            size_t cut = i == o->shard_count - 1 ? m : (size_t)llround(acc / total * (double)m);
            cut = cut < prev ? prev : cut > m ? m : cut;
            size[i] += cut - prev;
            if (i == o->shard_index) {
                lo[c] = prev;
                hi[c] = cut;
            }
            prev = cut;
        }
    }
}

static int shard_dirichlet(const data_source *s, const data_table *t, const idx_list *part,
                           const data_options *o, bbp_rng *rng, idx_list *out, bb_error *err)
{
    class_rows g;
    int rc = group_by_class(s, t, part, &g, err);
    size_t k = (size_t)o->shard_count, want = (size_t)o->dirichlet_min_rows;
    uint32_t present = 0;
    for (uint32_t c = 0; !rc && c < g.n_classes; c++)
        present += g.start[c + 1] > g.start[c];
    uint64_t per_draw = (uint64_t)present * k;
    uint64_t draws = per_draw ? DIRICHLET_DRAW_BUDGET / per_draw : DIRICHLET_MAX_DRAWS;
    draws = draws > DIRICHLET_MAX_DRAWS ? DIRICHLET_MAX_DRAWS : draws;
    if (!rc && (k * want > part->n || draws == 0))
        rc = bb_error_set(err, BB_EINVAL,
                          "%s: %zu rows of %u classes cannot give %zu shards %zu rows each "
                          "(dirichlet_min_rows)%s",
                          s->who, part->n, present, k, want,
                          draws ? "" : ": too many classes x shards to draw");
    double *share = rc ? NULL : malloc(k * sizeof *share);
    size_t *size = rc ? NULL : malloc(k * sizeof *size);
    size_t *lo = rc ? NULL : malloc(((size_t)g.n_classes + 1) * sizeof *lo);
    size_t *hi = rc ? NULL : malloc(((size_t)g.n_classes + 1) * sizeof *hi);
    if (!rc && !(share && size && lo && hi))
        rc = oom(s, err);
    uint64_t d = 0;
    size_t smallest = 0;
    for (; !rc && d < draws; d++) {
        dirichlet_draw(&g, o, rng, share, size, lo, hi);
        smallest = SIZE_MAX;
        for (size_t i = 0; i < k; i++)
            smallest = size[i] < smallest ? size[i] : smallest;
        if (smallest >= want)
            break;
    }
    if (!rc && d == draws)
        rc = bb_error_set(err, BB_EINVAL,
                          "%s: no Dirichlet(%g) draw of %llu gave each of %zu shards at least "
                          "%zu rows (the last: %zu); raise dirichlet_alpha or lower "
                          "shard_count or dirichlet_min_rows",
                          s->who, o->dirichlet_alpha, (unsigned long long)draws, k, want,
                          smallest);
    for (uint32_t c = 0; !rc && c < g.n_classes; c++) {
        uint32_t *rows = g.row + g.start[c];
        bbp_rng_shuffle_u32(rng, rows, g.start[c + 1] - g.start[c]);
        for (size_t j = lo[c]; j < hi[c]; j++)
            out->v[out->n++] = rows[j];
    }
    free(g.row);
    free(g.start);
    free(share);
    free(size);
    free(lo);
    free(hi);
    return rc;
}

typedef struct keyed {
    uint32_t cls, pos, row;
} keyed;

static int cmp_keyed(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    if (x->cls != y->cls)
        return x->cls < y->cls ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* classes: shuffle, sort by label, cut into shard_count * classes_per_client
 * pieces, deal the pieces out at random, classes_per_client per shard. */
static int shard_classes(const data_source *s, const data_table *t, const idx_list *part,
                         const data_options *o, bbp_rng *rng, idx_list *out, bb_error *err)
{
    size_t n = part->n, pieces = (size_t)(o->shard_count * o->classes_per_client);
    keyed *k = malloc((n ? n : 1) * sizeof *k);
    uint32_t *order = malloc((n ? n : 1) * sizeof *order);
    uint32_t *deal = malloc(pieces * sizeof *deal);
    int rc = k && order && deal ? BB_OK : oom(s, err);
    for (size_t i = 0; !rc && i < n; i++)
        order[i] = (uint32_t)i;
    if (!rc)
        bbp_rng_shuffle_u32(rng, order, n);
    for (size_t i = 0; !rc && i < n; i++) {
        k[i].pos = order[i];
        k[i].row = part->v[i];
        rc = class_of(s, t, part->v[i], &k[i].cls, err);
    }
    if (!rc) {
        qsort(k, n, sizeof *k, cmp_keyed);
        for (size_t p = 0; p < pieces; p++)
            deal[p] = (uint32_t)p;
        bbp_rng_shuffle_u32(rng, deal, pieces);
        for (int64_t c = 0; c < o->classes_per_client; c++) {
            size_t p = deal[(size_t)(o->shard_index * o->classes_per_client + c)];
            for (size_t i = p * n / pieces; i < (p + 1) * n / pieces; i++)
                out->v[out->n++] = k[i].row;
        }
    }
    free(k);
    free(order);
    free(deal);
    return rc;
}

static int shard(const data_source *s, const data_table *t, const idx_list *part,
                 const data_options *o, idx_list *out, bb_error *err)
{
    out->v = malloc((part->n ? part->n : 1) * sizeof *out->v);
    out->n = 0;
    if (!out->v)
        return oom(s, err);
    bbp_rng rng;
    bbp_rng_seed(&rng, o->partition_seed);
    if (o->partition != PARTITION_IID && !t->y)
        return bb_error_set(err, BB_ECONFIG, "%s: partition by label needs a label column",
                            s->who);
    int rc = BB_OK;
    if (o->shard_count == 1) {
        memcpy(out->v, part->v, part->n * sizeof *out->v);
        out->n = part->n;
    } else if (o->partition == PARTITION_IID) {
        memcpy(out->v, part->v, part->n * sizeof *out->v);
        bbp_rng_shuffle_u32(&rng, out->v, part->n);
        size_t lo = (size_t)o->shard_index * part->n / (size_t)o->shard_count;
        size_t hi = (size_t)(o->shard_index + 1) * part->n / (size_t)o->shard_count;
        memmove(out->v, out->v + lo, (hi - lo) * sizeof *out->v);
        out->n = hi - lo;
    } else if (o->partition == PARTITION_DIRICHLET) {
        rc = shard_dirichlet(s, t, part, o, &rng, out, err);
    } else {
        rc = shard_classes(s, t, part, o, &rng, out, err);
    }
    if (!rc && out->n == 0)
        rc = bb_error_set(err, BB_EINVAL, "%s: shard %lld of %lld is empty (%zu rows to share)",
                          s->who, (long long)o->shard_index, (long long)o->shard_count, part->n);
    if (!rc)
        sort_idx(out);
    return rc;
}

/* Every row index, the held-out ones first: the first n_hold of a shuffle
 * by split_seed (all.v[0, n_hold)), then the training rows, each part
 * sorted. The same draw on every node and in data_prepare. The rows are a
 * permutation of 0..n-1, so the parts are put in order by marking the
 * held-out rows and reading the marks back, in one pass: every node of a
 * simulated thousand splits the table (60,000 rows), and two qsorts a node
 * were most of a simulation's start-up. */
static int split_rows(const data_source *s, size_t n, const data_options *o, idx_list *all,
                      size_t *n_hold, bb_error *err)
{
    all->v = malloc((n ? n : 1) * sizeof *all->v);
    all->n = n;
    *n_hold = 0;
    if (!all->v)
        return oom(s, err);
    if (n > UINT32_MAX)
        return bb_error_set(err, BB_ELIMIT, "%s: %zu rows (at most %u)", s->who, n, UINT32_MAX);
    for (size_t i = 0; i < n; i++)
        all->v[i] = (uint32_t)i;
    if (o->holdout > 0) {
        bbp_rng rng;
        bbp_rng_seed(&rng, o->split_seed);
        bbp_rng_shuffle_u32(&rng, all->v, n);
        *n_hold = (size_t)llround(o->holdout * (double)n);
        *n_hold = *n_hold ? *n_hold : 1;
        if (*n_hold >= n)
            return bb_error_set(err, BB_EINVAL, "%s: holdout %g of %zu rows leaves no "
                                "training rows", s->who, o->holdout, n);
    }
    if (!*n_hold)
        return BB_OK; /* 0..n-1 in order already */
    uint8_t *held = calloc(n, 1);
    if (!held)
        return oom(s, err);
    for (size_t i = 0; i < *n_hold; i++)
        held[all->v[i]] = 1;
    for (size_t r = 0, h = 0, t = *n_hold; r < n; r++)
        all->v[held[r] ? h++ : t++] = (uint32_t)r;
    free(held);
    return BB_OK;
}

/* Normalize every row of t in place with the training rows' statistics. */
static int normalize(const data_source *s, data_table *t, const idx_list *train, data_norm norm,
                     bb_error *err)
{
    double *shift = NULL, *scale = NULL;
    int rc = norm_stats(t, train, norm, &shift, &scale) ? oom(s, err) : BB_OK;
    for (size_t i = 0; !rc && norm != NORM_NONE && i < t->rows; i++)
        for (size_t j = 0; j < t->cols; j++) {
            float *v = &t->x[i * t->cols + j];
            *v = (float)(((double)*v - shift[j]) * scale[j]);
        }
    free(shift);
    free(scale);
    return rc;
}

/* A tensor of shape dims over t's array *data (adopted: *data is NULL after). */
static bb_value *adopt_tensor(float **data, uint32_t ndim, const int64_t *dims)
{
    size_t bytes = bb_shape_numel(ndim, dims) * sizeof(float);
    bb_buffer *b = bb_buffer_adopt((uint8_t *)*data, bytes);
    if (!b)
        return NULL;
    *data = NULL;
    bb_value *v = bb_value_tensor_wrap(BB_DT_FLOAT, ndim, dims, b, b->data);
    bb_buffer_unref(b);
    return v;
}

enum { PREP_X, PREP_Y, PREP_EVAL_X, PREP_EVAL_Y, PREP_N };

int data_prepare(const data_source *s, data_table *t, const data_options *o, bb_value **out,
                 bb_error *err)
{
    *out = NULL;
    idx_list all = {0};
    size_t n_hold = 0;
    int rc = split_rows(s, t->rows, o, &all, &n_hold, err);
    idx_list hold = {all.v, n_hold}, train = {all.v + n_hold, t->rows - n_hold};
    if (!rc)
        rc = normalize(s, t, &train, o->norm, err);
    bb_value *item[PREP_N] = {NULL};
    int64_t none = 0, dx[2] = {(int64_t)t->rows, (int64_t)t->cols}, dy = (int64_t)t->rows;
    if (!rc && n_hold)
        rc = gather_rows(s, t, &hold, &item[PREP_EVAL_X], &item[PREP_EVAL_Y], err);
    if (!rc) { /* absent parts are empty tensors: no labels, no held-out rows */
        item[PREP_X] = adopt_tensor(&t->x, 2, dx);
        item[PREP_Y] = t->y ? adopt_tensor(&t->y, 1, &dy) : bb_value_tensor_new(BB_DT_FLOAT, 1, &none);
        if (!item[PREP_EVAL_X])
            item[PREP_EVAL_X] = bb_value_tensor_new(BB_DT_FLOAT, 1, &none);
        if (!item[PREP_EVAL_Y])
            item[PREP_EVAL_Y] = bb_value_tensor_new(BB_DT_FLOAT, 1, &none);
        for (int i = 0; i < PREP_N; i++)
            rc = rc ? rc : item[i] ? BB_OK : oom(s, err);
    }
    if (!rc && !(*out = bb_value_list(&BB_TYPE_COMPOSITE, item, PREP_N)))
        rc = oom(s, err); /* bb_value_list took the items either way */
    else if (rc)
        for (int i = 0; i < PREP_N; i++)
            bb_value_unref(item[i]);
    free(all.v);
    data_table_free(t);
    return rc;
}

/* sample_shape against the table's features. */
static int set_sample_shape(data_source *s, const data_table *t, const data_options *o,
                            bb_error *err)
{
    uint64_t prod = 1;
    for (uint32_t i = 0; i < o->sample_nd; i++)
        prod = prod <= UINT32_MAX ? prod * (uint64_t)o->sample_dims[i] : prod;
    if (o->sample_nd && prod != t->cols)
        return bb_error_set(err, BB_ECONFIG,
                            "%s: sample_shape holds %llu values per sample, the data has %zu "
                            "features",
                            s->who, (unsigned long long)prod, t->cols);
    s->sample_nd = o->sample_nd;
    memcpy(s->sample_dims, o->sample_dims, sizeof s->sample_dims);
    return BB_OK;
}

/* Whether v is what data_prepare makes (a shared value may come from any
 * node of the host: checked before it is read). */
static bool prepared_ok(const bb_value *v)
{
    if (!v || v->type->kind != BB_VK_COMPOSITE || v->u.list.n != PREP_N)
        return false;
    for (int i = 0; i < PREP_N; i++) {
        const bb_value *x = v->u.list.items[i];
        if (!x || x->type->kind != BB_VK_TENSOR || x->u.tensor.dtype != BB_DT_FLOAT)
            return false;
    }
    const bb_value *x = v->u.list.items[PREP_X], *y = v->u.list.items[PREP_Y];
    return x->u.tensor.ndim == 2 && y->u.tensor.ndim == 1 &&
           (y->u.tensor.dims[0] == 0 || y->u.tensor.dims[0] == x->u.tensor.dims[0]);
}

/* The shared flat [n, d] tensor x as [n, sample shape] (the same bytes),
 * or another reference to x when the source has no sample shape. */
static bb_value *shaped_view(const data_source *s, bb_value *x)
{
    if (!s->sample_nd)
        return bb_value_ref(x);
    int64_t dims[BB_MAX_DIMS] = {x->u.tensor.dims[0]};
    memcpy(dims + 1, s->sample_dims, s->sample_nd * sizeof *dims);
    return bb_value_tensor_wrap(BB_DT_FLOAT, 1 + s->sample_nd, dims, x->u.tensor.buf,
                                x->u.tensor.data);
}

int data_source_build(data_source *s, const bb_value *prepared, const data_options *o,
                      bb_error *err)
{
    if (!prepared_ok(prepared))
        return bb_error_set(err, BB_EINVAL, "%s: the shared prepared table is malformed", s->who);
    bb_value *const *it = prepared->u.list.items;
    data_table t = {(size_t)it[PREP_X]->u.tensor.dims[0], (size_t)it[PREP_X]->u.tensor.dims[1],
                    bb_tensor_f32(it[PREP_X]), NULL}; /* borrowed */
    if (it[PREP_Y]->u.tensor.dims[0])
        t.y = bb_tensor_f32(it[PREP_Y]);
    size_t n = t.rows, n_hold = 0;
    idx_list all = {0}, rows = {0};
    int rc = set_sample_shape(s, &t, o, err);
    if (!rc)
        rc = split_rows(s, n, o, &all, &n_hold, err);
    idx_list hold = {all.v, n_hold}, train = {all.v + n_hold, n - n_hold};
    /* part "all": every row in file order (hold and train alias all.v) */
    idx_list every = {NULL, n};
    if (!rc && o->part == PART_ALL) {
        every.v = malloc((n ? n : 1) * sizeof *every.v);
        if (!every.v)
            rc = oom(s, err);
        for (size_t i = 0; !rc && i < n; i++)
            every.v[i] = (uint32_t)i;
    }
    const idx_list *part = o->part == PART_TRAIN ? &train : o->part == PART_HOLDOUT ? &hold : &every;
    if (!rc && o->part == PART_HOLDOUT && !n_hold)
        rc = bb_error_set(err, BB_ECONFIG, "%s: part \"holdout\" needs holdout > 0", s->who);
    if (!rc)
        rc = shard(s, &t, part, o, &rows, err);
    if (!rc)
        rc = gather_rows(s, &t, &rows, &s->x, &s->y, err);
    if (!rc && n_hold) { /* the held-out rows, shared (flat: shaped here when asked) */
        s->eval_x = shaped_view(s, it[PREP_EVAL_X]);
        if (!s->eval_x)
            rc = oom(s, err);
        s->eval_y = t.y ? bb_value_ref(it[PREP_EVAL_Y]) : NULL;
    } else if (!rc) {
        s->eval_x = bb_value_ref(s->x);
        s->eval_y = bb_value_ref(s->y);
    }
    if (!rc) {
        s->n = rows.n;
        s->d = t.cols;
        s->order = malloc(rows.n * sizeof *s->order);
        if (!s->order)
            rc = oom(s, err);
    }
    free(all.v);
    free(every.v);
    free(rows.v);
    return rc;
}
