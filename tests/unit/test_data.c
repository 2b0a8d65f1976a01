/*
 * Unit tests for the data plugin (data::Csv, data::Synthetic), loaded from
 * the build's data.so and driven through its dispatch entry: parsing (plain
 * and gzip, header, skip_rows, label by index or name, unsupervised), every
 * bad-file error naming file, line and column, normalization, batching and
 * epochs, Reset, the held-out split, the IID / Dirichlet / classes shards
 * (disjoint, covering, deterministic), EvalSet and NumSamples, snapshots,
 * the prepared table shared through a host's cache (ctx->shared_get/put),
 * the generator, and the real digits file from scripts/fetch-data.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "support/plugin_fixtures.h"

static char g_dir[64];

static int group_setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/bb-test-data.XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        return -1;
    pfx_shutdown();
    return 0;
}

/* Writes text to <tmp>/name (gzip-compressed when gz) and returns the path. */
static const char *write_file(const char *name, const char *text, bool gz)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    if (gz) {
        gzFile f = gzopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(gzwrite(f, text, (unsigned)strlen(text)), (int)strlen(text));
        gzclose(f);
    } else {
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
    }
    return path;
}

typedef struct src {
    const bb_component_type *t;
    void *inst;
} src;

static void *try_make(const char *type, const char *config, bb_error *err)
{
    return pfx_create(pfx_type(type), "data", config, NULL, 99, NULL, err);
}

static src make(const char *type, const char *config)
{
    src s = {pfx_type(type), NULL};
    assert_non_null(s.t);
    bb_error err = {0};
    s.inst = try_make(type, config, &err);
    if (!s.inst)
        fail_msg("create %s %s: %s", type, config, err.msg);
    return s;
}

/* A Csv over path with extra config keys ("" for none). */
static src csv(const char *path, const char *extra)
{
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "{\"path\": \"%s\"%s%s}", path, *extra ? ", " : "", extra);
    return make("data::Csv", cfg);
}

static int csv_error(const char *path, const char *extra, bb_error *err)
{
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "{\"path\": \"%s\"%s%s}", path, *extra ? ", " : "", extra);
    void *inst = try_make("data::Csv", cfg, err);
    assert_null(inst);
    return err->code;
}

static void drop(src *s) { s->t->destroy(s->inst); }

static void call2(src *s, const char *op, bb_value **a, bb_value **b)
{
    bb_value *out[2] = {0};
    bb_error err = {0};
    if (pfx_call(s->t, s->inst, NULL, op, NULL, NULL, 0, out, 2, &err))
        fail_msg("%s: %s", op, err.msg);
    *a = out[0];
    *b = out[1];
}

static uint64_t num_samples(src *s)
{
    bb_value *out = NULL;
    bb_error err = {0};
    assert_int_equal(pfx_call(s->t, s->inst, NULL, "NumSamples", NULL, NULL, 0, &out, 1, &err),
                     BB_OK);
    uint64_t n = out->u.u64;
    bb_value_unref(out);
    return n;
}

static void reset(src *s)
{
    bb_value *trig = bb_value_trigger(), *out = NULL;
    bb_error err = {0};
    assert_int_equal(pfx_call(s->t, s->inst, NULL, "Reset", NULL, &trig, 1, &out, 1, &err), BB_OK);
    assert_int_equal(out->type->kind, BB_VK_TRIGGER);
    bb_value_unref(trig);
    bb_value_unref(out);
}

/* The ids (first feature) of one whole epoch, in batch order. */
static size_t epoch_ids(src *s, float *ids, size_t cap, size_t *batches)
{
    size_t n = num_samples(s), got = 0;
    *batches = 0;
    while (got < n) {
        bb_value *x, *y;
        call2(s, "NextBatch", &x, &y);
        size_t b = (size_t)x->u.tensor.dims[0], d = (size_t)x->u.tensor.dims[1];
        assert_true(got + b <= cap);
        for (size_t k = 0; k < b; k++)
            ids[got + k] = bb_tensor_f32(x)[k * d];
        got += b;
        (*batches)++;
        bb_value_unref(x);
        bb_value_unref(y);
    }
    assert_int_equal(got, n);
    return got;
}

static int cmpf(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* rows "i, 10*i, i % classes" for i in [0, n) */
static const char *id_file(const char *name, int n, int classes)
{
    size_t cap = (size_t)n * 40 + 1;
    char *text = malloc(cap), *p = text;
    for (int i = 0; i < n; i++)
        p += snprintf(p, cap - (size_t)(p - text), "%d,%d,%d\n", i, 10 * i, i % classes);
    const char *path = write_file(name, text, false);
    free(text);
    return path;
}

/* ---- parsing --------------------------------------------------------------------- */

static void test_csv_parses_features_and_labels(void **state)
{
    (void)state;
    const char *path = write_file("a.csv", "1, 2,0\r\n\n3 ,4 ,1\n5,6e-1,2\n", false);
    src s = csv(path, "\"shuffle\": false, \"batch_size\": 2");
    assert_int_equal(num_samples(&s), 3);
    bb_value *x, *y;
    call2(&s, "NextBatch", &x, &y);
    assert_int_equal(x->u.tensor.dims[0], 2);
    assert_int_equal(x->u.tensor.dims[1], 2);
    const float want_x[4] = {1, 2, 3, 4}, want_y[2] = {0, 1};
    assert_memory_equal(bb_tensor_f32(x), want_x, sizeof want_x);
    assert_memory_equal(bb_tensor_f32(y), want_y, sizeof want_y);
    bb_value_unref(x);
    bb_value_unref(y);
    call2(&s, "NextBatch", &x, &y); /* the short last batch of the epoch */
    assert_int_equal(x->u.tensor.dims[0], 1);
    assert_true(fabsf(bb_tensor_f32(x)[1] - 0.6f) < 1e-6f);
    assert_true(bb_tensor_f32(y)[0] == 2);
    bb_value_unref(x);
    bb_value_unref(y);
    bb_value *trig = NULL;
    bb_error err = {0};
    assert_int_equal(pfx_call(s.t, s.inst, NULL, "OnDataLoaded", NULL, NULL, 0, &trig, 1, &err),
                     BB_OK);
    assert_int_equal(trig->type->kind, BB_VK_TRIGGER);
    bb_value_unref(trig);
    drop(&s);
}

static void test_csv_gzip_header_skip_and_named_label(void **state)
{
    (void)state;
    const char *text = "3,2,setosa,other\n"  /* sklearn-style preamble */
                       "a,species,b\n"
                       "1.5,1,2.5\n"
                       "3.5,0,4.5\n";
    const char *path = write_file("b.csv.gz", text, true);
    src s = csv(path, "\"skip_rows\": 1, \"header\": true, \"label_column\": \"species\", "
                      "\"shuffle\": false");
    bb_value *x, *y;
    call2(&s, "NextBatch", &x, &y);
    const float want_x[4] = {1.5f, 2.5f, 3.5f, 4.5f}, want_y[2] = {1, 0};
    assert_memory_equal(bb_tensor_f32(x), want_x, sizeof want_x);
    assert_memory_equal(bb_tensor_f32(y), want_y, sizeof want_y);
    bb_value_unref(x);
    bb_value_unref(y);
    drop(&s);
    /* the first column as label, and an unsupervised source */
    path = write_file("c.csv", "7,1,2\n8,3,4\n", false);
    s = csv(path, "\"label_column\": 0, \"shuffle\": false");
    call2(&s, "NextBatch", &x, &y);
    const float wx[4] = {1, 2, 3, 4}, wy[2] = {7, 8};
    assert_memory_equal(bb_tensor_f32(x), wx, sizeof wx);
    assert_memory_equal(bb_tensor_f32(y), wy, sizeof wy);
    bb_value_unref(x);
    bb_value_unref(y);
    drop(&s);
    s = csv(path, "\"label_column\": null, \"shuffle\": false");
    call2(&s, "NextBatch", &x, &y);
    assert_int_equal(x->u.tensor.dims[1], 3);
    assert_int_equal(bb_tensor_numel(y), 0); /* labels empty for unsupervised sources */
    bb_value_unref(x);
    bb_value_unref(y);
    drop(&s);
}

static void expect_error(const char *path, const char *extra, int code, const char *a,
                         const char *b)
{
    bb_error err = {0};
    assert_int_equal(csv_error(path, extra, &err), code);
    if ((a && !strstr(err.msg, a)) || (b && !strstr(err.msg, b)))
        fail_msg("message \"%s\" lacks \"%s\" / \"%s\"", err.msg, a ? a : "", b ? b : "");
}

static void test_csv_bad_files_name_file_line_column(void **state)
{
    (void)state;
    char missing[300];
    snprintf(missing, sizeof missing, "%s/nope.csv", g_dir);
    expect_error(missing, "", BB_EIO, "nope.csv", "cannot open");
    expect_error(write_file("ragged.csv", "1,2,3\n4,5,6\n7,8\n", false), "", BB_EPARSE,
                 "ragged.csv: line 3 has 2 columns", "line 1 has 3");
    expect_error(write_file("nan.csv", "1,2,3\n\n4,x5,6\n", false), "", BB_EPARSE,
                 "nan.csv: line 3, column 2", "'x5' is not a number");
    expect_error(write_file("inf.csv", "1,inf,3\n", false), "", BB_EPARSE, "line 1, column 2",
                 "not a finite float");
    expect_error(write_file("empty_cell.csv", "1,,3\n", false), "", BB_EPARSE,
                 "line 1, column 2", "empty cell");
    expect_error(write_file("nolabel.csv", "1,2\n", false), "\"label_column\": 5", BB_EPARSE,
                 "nolabel.csv", "no label column 5");
    expect_error(write_file("hdr.csv", "a,b\n1,2\n", false),
                 "\"header\": true, \"label_column\": \"c\"", BB_EPARSE, "line 1",
                 "no column named \"c\"");
    expect_error(write_file("nohdr.csv", "1,2\n", false), "\"label_column\": \"c\"", BB_ECONFIG,
                 "header is false", NULL);
    expect_error(write_file("empty.csv", "\n\n", false), "", BB_EPARSE, "empty.csv",
                 "no data rows");
    expect_error(write_file("one.csv", "1\n2\n", false), "", BB_EPARSE, "only the label column",
                 NULL);
    expect_error(write_file("big.csv", "1,2,3\n4,5,6\n", false), "\"max_bytes\": 8", BB_ELIMIT,
                 "big.csv", "max_bytes");
    expect_error(write_file("bin.csv", "1,2\n", false), "\"delimiter\": \";;\"", BB_ECONFIG,
                 "one character", NULL);
    /* a truncated gzip stream */
    const char *gz = write_file("cut.csv.gz", "1,2,3\n4,5,6\n7,8,9\n10,11,12\n", true);
    FILE *f = fopen(gz, "r+");
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), 20), 0);
    fclose(f);
    bb_error err = {0};
    assert_int_not_equal(csv_error(gz, "", &err), BB_OK);
    assert_non_null(strstr(err.msg, "cut.csv.gz"));
    /* config surface */
    void *inst = try_make("data::Csv", "{}", &err);
    assert_null(inst);
    assert_non_null(strstr(err.msg, "'path'"));
    inst = try_make("data::Csv", "{\"path\": \"x\", \"normalization\": \"zscore\"}", &err);
    assert_null(inst);
    assert_non_null(strstr(err.msg, "\"standardize\""));
    inst = try_make("data::Csv", "{\"path\": \"x\", \"shard_index\": 3, \"shard_count\": 3}", &err);
    assert_null(inst);
    assert_non_null(strstr(err.msg, "shard_index"));
}

static void test_normalization(void **state)
{
    (void)state;
    const char *path = write_file("norm.csv", "0,10,0\n5,10,1\n10,10,0\n", false);
    src s = csv(path, "\"normalization\": \"min-max\", \"shuffle\": false, \"batch_size\": 3");
    bb_value *x, *y;
    call2(&s, "NextBatch", &x, &y);
    const float want[6] = {0, 0, 0.5f, 0, 1, 0}; /* a constant column maps to 0 */
    assert_memory_equal(bb_tensor_f32(x), want, sizeof want);
    bb_value_unref(x);
    bb_value_unref(y);
    drop(&s);
    s = csv(path, "\"normalization\": \"standardize\", \"shuffle\": false, \"batch_size\": 3");
    call2(&s, "NextBatch", &x, &y);
    float sd = sqrtf(50.0f / 3.0f);
    const float want_s[6] = {-5 / sd, 0, 0, 0, 5 / sd, 0};
    for (int i = 0; i < 6; i++)
        assert_true(fabsf(bb_tensor_f32(x)[i] - want_s[i]) < 1e-5f);
    bb_value_unref(x);
    bb_value_unref(y);
    drop(&s);
}

/* ---- epochs ------------------------------------------------------------------------- */

static void test_epochs_cover_every_row_and_reshuffle(void **state)
{
    (void)state;
    const char *path = id_file("ids.csv", 10, 2);
    src s = csv(path, "\"batch_size\": 4, \"seed\": 5");
    float e1[10], e2[10], sorted[10];
    size_t batches;
    epoch_ids(&s, e1, 10, &batches);
    assert_int_equal(batches, 3); /* 4 + 4 + 2 */
    epoch_ids(&s, e2, 10, &batches);
    assert_memory_not_equal(e1, e2, sizeof e1); /* reshuffled */
    memcpy(sorted, e2, sizeof sorted);
    qsort(sorted, 10, sizeof *sorted, cmpf);
    for (int i = 0; i < 10; i++)
        assert_true(sorted[i] == (float)i);
    /* same seed, same sequence */
    src t = csv(path, "\"batch_size\": 4, \"seed\": 5");
    float f1[10];
    epoch_ids(&t, f1, 10, &batches);
    assert_memory_equal(e1, f1, sizeof e1);
    /* shuffle off keeps file order */
    src u = csv(path, "\"batch_size\": 3, \"shuffle\": false");
    epoch_ids(&u, f1, 10, &batches);
    for (int i = 0; i < 10; i++)
        assert_true(f1[i] == (float)i);
    drop(&s);
    drop(&t);
    drop(&u);
}

static void test_reset_starts_a_new_epoch(void **state)
{
    (void)state;
    const char *path = id_file("ids2.csv", 6, 2);
    src s = csv(path, "\"batch_size\": 4, \"shuffle\": false");
    bb_value *x, *y;
    call2(&s, "NextBatch", &x, &y);
    assert_int_equal(x->u.tensor.dims[0], 4);
    bb_value_unref(x);
    bb_value_unref(y);
    reset(&s);
    float ids[6];
    size_t batches;
    epoch_ids(&s, ids, 6, &batches); /* a whole epoch from the first row */
    for (int i = 0; i < 6; i++)
        assert_true(ids[i] == (float)i);
    drop(&s);
}

static void test_snapshot_resumes_mid_epoch(void **state)
{
    (void)state;
    const char *path = id_file("ids3.csv", 9, 3);
    src a = csv(path, "\"batch_size\": 2, \"seed\": 1");
    bb_value *x, *y;
    call2(&a, "NextBatch", &x, &y);
    bb_value_unref(x);
    bb_value_unref(y);
    uint8_t *snap;
    size_t len;
    bb_error err = {0};
    assert_int_equal(a.t->snapshot(a.inst, &snap, &len, &err), BB_OK);
    src b = csv(path, "\"batch_size\": 2, \"seed\": 77");
    for (size_t cut = 0; cut < len; cut += 3)
        assert_int_not_equal(b.t->restore(b.inst, snap, cut, &err), BB_OK);
    snap[len - 1] = 200; /* an order entry out of range */
    assert_int_equal(b.t->restore(b.inst, snap, len, &err), BB_EDECODE);
    free(snap);
    assert_int_equal(a.t->snapshot(a.inst, &snap, &len, &err), BB_OK);
    assert_int_equal(b.t->restore(b.inst, snap, len, &err), BB_OK);
    for (int k = 0; k < 12; k++) { /* across the epoch boundary too */
        bb_value *xa, *ya, *xb, *yb;
        call2(&a, "NextBatch", &xa, &ya);
        call2(&b, "NextBatch", &xb, &yb);
        assert_true(bb_value_equal(xa, xb));
        assert_true(bb_value_equal(ya, yb));
        bb_value_unref(xa);
        bb_value_unref(ya);
        bb_value_unref(xb);
        bb_value_unref(yb);
    }
    free(snap);
    drop(&a);
    drop(&b);
    /* a source that never served a batch (an evaluation-only server) restores
     * from its own snapshot (the row order is valid before the first epoch) */
    src c = csv(path, "\"batch_size\": 2, \"seed\": 3"), d = csv(path, "\"batch_size\": 2");
    assert_int_equal(c.t->snapshot(c.inst, &snap, &len, &err), BB_OK);
    assert_int_equal(d.t->restore(d.inst, snap, len, &err), BB_OK);
    free(snap);
    drop(&c);
    drop(&d);
}

/* ---- split and shards ------------------------------------------------------------------ */

/* All ids a source serves, sorted. */
static size_t all_ids(src *s, float *ids, size_t cap)
{
    size_t batches, n = epoch_ids(s, ids, cap, &batches);
    qsort(ids, n, sizeof *ids, cmpf);
    return n;
}

static void test_holdout_split_is_disjoint_and_shared(void **state)
{
    (void)state;
    const char *path = id_file("split.csv", 50, 5);
    src tr = csv(path, "\"holdout\": 0.2, \"split_seed\": 3");
    src ho = csv(path, "\"holdout\": 0.2, \"split_seed\": 3, \"part\": \"holdout\"");
    src all = csv(path, "\"holdout\": 0.2, \"split_seed\": 3, \"part\": \"all\"");
    float a[50], b[50], c[50];
    size_t na = all_ids(&tr, a, 50), nb = all_ids(&ho, b, 50), nc = all_ids(&all, c, 50);
    assert_int_equal(na, 40);
    assert_int_equal(nb, 10);
    assert_int_equal(nc, 50);
    size_t i = 0, j = 0, common = 0;
    while (i < na && j < nb) { /* disjoint */
        if (a[i] == b[j])
            common++;
        a[i] < b[j] ? i++ : j++;
    }
    assert_int_equal(common, 0);
    /* the training source's EvalSet is the held-out rows */
    bb_value *ex, *ey;
    call2(&tr, "EvalSet", &ex, &ey);
    assert_int_equal(ex->u.tensor.dims[0], 10);
    float ev[10];
    for (int k = 0; k < 10; k++)
        ev[k] = bb_tensor_f32(ex)[k * 2];
    qsort(ev, 10, sizeof *ev, cmpf);
    assert_memory_equal(ev, b, sizeof ev);
    bb_value_unref(ex);
    bb_value_unref(ey);
    /* without a holdout, EvalSet is the source's own rows */
    src plain = csv(path, "\"shard_count\": 5, \"shard_index\": 1");
    call2(&plain, "EvalSet", &ex, &ey);
    assert_int_equal(ex->u.tensor.dims[0], 10);
    bb_value_unref(ex);
    bb_value_unref(ey);
    bb_error err = {0};
    char cfg[512];
    snprintf(cfg, sizeof cfg, "{\"path\": \"%s\", \"part\": \"holdout\"}", path);
    assert_null(try_make("data::Csv", cfg, &err));
    assert_non_null(strstr(err.msg, "needs holdout > 0"));
    drop(&tr);
    drop(&ho);
    drop(&all);
    drop(&plain);
}

/* ---- the prepared table, shared through the host ------------------------------------ */

/* A host's shared cache (bbsim keeps one per process): a few keyed values. */
typedef struct fake_host {
    bb_ctx ctx; /* first: the component's ctx points here */
    bb_ctx_api api;
    char *keys[4];
    bb_value *vals[4];
    int n, gets, hits;
} fake_host;

static bb_value *host_get(bb_ctx *ctx, const char *key)
{
    fake_host *h = (fake_host *)ctx;
    h->gets++;
    for (int i = 0; i < h->n; i++)
        if (strcmp(h->keys[i], key) == 0) {
            h->hits++;
            return bb_value_ref(h->vals[i]);
        }
    return NULL;
}

static bb_value *host_put(bb_ctx *ctx, const char *key, bb_value *v)
{
    fake_host *h = (fake_host *)ctx;
    assert_null(host_get(ctx, key)); /* the plugin asked first */
    assert_true(h->n < 4);
    h->keys[h->n] = strdup(key);
    h->vals[h->n++] = bb_value_ref(v);
    return bb_value_ref(v);
}

static src csv_on(fake_host *h, const char *path, const char *extra)
{
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "{\"path\": \"%s\", %s}", path, extra);
    src s = {pfx_type("data::Csv"), NULL};
    bb_error err = {0};
    s.inst = pfx_create(s.t, "data", cfg, NULL, 99, &h->ctx, &err);
    if (!s.inst)
        fail_msg("create %s: %s", cfg, err.msg);
    return s;
}

/* Nodes reading one file with one split share its prepared table (one
 * entry, one evaluation tensor), each still serving its own shard exactly
 * as a node of its own would; another split is another entry. */
static void test_prepared_table_shared_through_the_host(void **state)
{
    (void)state;
    fake_host h = {0};
    h.api.struct_size = sizeof h.api;
    h.api.shared_get = host_get;
    h.api.shared_put = host_put;
    h.ctx.api = &h.api;
    const char *path = id_file("shared.csv", 60, 3);
    static const char *const SHARD[2] = {
        "\"holdout\": 0.2, \"split_seed\": 3, \"shard_count\": 2, \"shard_index\": 0",
        "\"holdout\": 0.2, \"split_seed\": 3, \"shard_count\": 2, \"shard_index\": 1"};
    src shared[2], alone[2];
    bb_value *ex[2], *ey[2];
    for (int k = 0; k < 2; k++) {
        shared[k] = csv_on(&h, path, SHARD[k]);
        alone[k] = csv(path, SHARD[k]);
        float a[60], b[60];
        size_t na = all_ids(&shared[k], a, 60), nb = all_ids(&alone[k], b, 60);
        assert_int_equal(na, 24);
        assert_int_equal(nb, na);
        assert_memory_equal(a, b, na * sizeof *a); /* the same rows as unshared */
        call2(&shared[k], "EvalSet", &ex[k], &ey[k]);
    }
    assert_int_equal(h.n, 1);
    assert_int_equal(h.hits, 1);
    assert_ptr_equal(ex[0], ex[1]); /* one held-out copy for both nodes */
    assert_int_equal(ex[0]->u.tensor.dims[0], 12);
    src other = csv_on(&h, path, "\"holdout\": 0.5, \"split_seed\": 3");
    assert_int_equal(h.n, 2);
    assert_non_null(strstr(h.keys[1], "holdout=0.5"));
    assert_null(strstr(h.keys[1], "shard"));
    drop(&other);
    for (int k = 0; k < 2; k++) {
        bb_value_unref(ex[k]);
        bb_value_unref(ey[k]);
        drop(&shared[k]);
        drop(&alone[k]);
    }
    for (int i = 0; i < h.n; i++) {
        free(h.keys[i]);
        bb_value_unref(h.vals[i]);
    }
}

/* Shards of one partition: disjoint, covering, and identical on rebuild. */
static void check_shards(const char *path, const char *partition, int count, int n,
                         int classes, int *classes_seen)
{
    float *seen = calloc((size_t)n, sizeof *seen);
    float ids[256];
    for (int k = 0; k < count; k++) {
        char extra[256];
        snprintf(extra, sizeof extra,
                 "\"partition\": \"%s\", \"shard_count\": %d, \"shard_index\": %d, "
                 "\"dirichlet_alpha\": 0.3, \"classes_per_client\": 2, \"partition_seed\": 11",
                 partition, count, k);
        src s = csv(path, extra);
        size_t m = all_ids(&s, ids, 256);
        int cls[64] = {0}, distinct = 0;
        for (size_t i = 0; i < m; i++) {
            int id = (int)ids[i];
            assert_true(id >= 0 && id < n);
            assert_true(seen[id] == 0);
            seen[id] = 1;
            if (!cls[id % classes]++)
                distinct++;
        }
        classes_seen[k] = distinct;
        drop(&s);
    }
    for (int i = 0; i < n; i++)
        assert_true(seen[i] == 1);
    free(seen);
}

static void test_shards_iid_dirichlet_classes(void **state)
{
    (void)state;
    const char *path = id_file("shards.csv", 100, 10);
    int distinct[10];
    check_shards(path, "iid", 4, 100, 10, distinct);
    src s = csv(path, "\"shard_count\": 4, \"shard_index\": 2");
    assert_int_equal(num_samples(&s), 25);
    drop(&s);
    check_shards(path, "classes", 5, 100, 10, distinct);
    for (int k = 0; k < 5; k++) /* 10 pieces of 10 rows: one class each, two per shard */
        assert_int_equal(distinct[k], 2);
    check_shards(path, "dirichlet", 4, 100, 10, distinct);
    /* alpha 0.3 is skewed: some shard misses some class */
    int min = 10;
    for (int k = 0; k < 4; k++)
        min = distinct[k] < min ? distinct[k] : min;
    assert_true(min < 10);
    /* by-label partitions need whole-number labels */
    const char *bad = write_file("frac.csv", "1,0.5\n2,1\n", false);
    bb_error err = {0};
    assert_int_equal(csv_error(bad, "\"partition\": \"classes\", \"shard_count\": 2", &err),
                     BB_EINVAL);
    assert_non_null(strstr(err.msg, "label 0.5"));
    /* more shards than rows: an empty shard is an error */
    const char *tiny = write_file("tiny.csv", "1,0\n2,1\n", false);
    assert_int_equal(csv_error(tiny, "\"shard_count\": 3, \"shard_index\": 0", &err), BB_EINVAL);
    assert_non_null(strstr(err.msg, "shard 0 of 3 is empty"));
}

/* ---- synthetic ----------------------------------------------------------------------------- */

static void test_synthetic_blobs(void **state)
{
    (void)state;
    const char *cfg = "{\"samples\": 300, \"features\": 3, \"classes\": 3, \"cluster_std\": 0.5, "
                      "\"batch_size\": 300, \"shuffle\": false}";
    src a = make("data::Synthetic", cfg), b = make("data::Synthetic", cfg);
    bb_value *xa, *ya, *xb, *yb;
    call2(&a, "NextBatch", &xa, &ya);
    call2(&b, "NextBatch", &xb, &yb);
    assert_true(bb_value_equal(xa, xb)); /* deterministic */
    assert_int_equal(xa->u.tensor.dims[0], 300);
    assert_int_equal(xa->u.tensor.dims[1], 3);
    /* labels i mod 3; each row is closer to its class mean than to the others */
    double mean[3][3] = {{0}};
    for (int i = 0; i < 300; i++) {
        assert_true(bb_tensor_f32(ya)[i] == (float)(i % 3));
        for (int j = 0; j < 3; j++)
            mean[i % 3][j] += bb_tensor_f32(xa)[i * 3 + j] / 100.0;
    }
    int right = 0;
    for (int i = 0; i < 300; i++) {
        double best = INFINITY;
        int arg = -1;
        for (int c = 0; c < 3; c++) {
            double d = 0;
            for (int j = 0; j < 3; j++) {
                double v = bb_tensor_f32(xa)[i * 3 + j] - mean[c][j];
                d += v * v;
            }
            if (d < best) {
                best = d;
                arg = c;
            }
        }
        right += arg == i % 3;
    }
    assert_true(right >= 290);
    bb_value_unref(xa);
    bb_value_unref(ya);
    bb_value_unref(xb);
    bb_value_unref(yb);
    drop(&a);
    drop(&b);
    bb_error err = {0};
    assert_null(try_make("data::Synthetic", "{\"samples\": 0}", &err));
    assert_non_null(strstr(err.msg, "'samples'"));
    assert_null(try_make("data::Synthetic", "{\"samples\": 100000000, \"features\": 100000}", &err));
    assert_non_null(strstr(err.msg, "limit"));
}

/* ---- the real dataset ------------------------------------------------------------------------ */

static void test_digits_from_fetch_data(void **state)
{
    (void)state;
    if (!pfx_fetch_data())
        fail_msg("scripts/fetch-data could not provide data/digits.csv.gz");
    char cfg[512];
    snprintf(cfg, sizeof cfg, "{\"path\": \"%s\", \"part\": \"all\", \"batch_size\": 2000}",
             pfx_repo_path("data/digits.csv.gz"));
    src s = make("data::Csv", cfg);
    assert_int_equal(num_samples(&s), 1797);
    bb_value *x, *y;
    call2(&s, "NextBatch", &x, &y);
    assert_int_equal(x->u.tensor.dims[1], 64);
    int count[10] = {0};
    for (int i = 0; i < 1797; i++) {
        float l = bb_tensor_f32(y)[i];
        assert_true(l >= 0 && l <= 9 && l == floorf(l));
        count[(int)l]++;
    }
    for (int c = 0; c < 10; c++)
        assert_true(count[c] >= 170 && count[c] <= 190);
    float mx = 0;
    for (size_t i = 0; i < bb_tensor_numel(x); i++)
        mx = bb_tensor_f32(x)[i] > mx ? bb_tensor_f32(x)[i] : mx;
    assert_true(mx == 16.0f); /* 4-bit grey levels */
    bb_value_unref(x);
    bb_value_unref(y);
    drop(&s);
    /* iris: a one-line preamble */
    snprintf(cfg, sizeof cfg, "{\"path\": \"%s\", \"skip_rows\": 1, \"part\": \"all\"}",
             pfx_repo_path("data/iris.csv"));
    s = make("data::Csv", cfg);
    assert_int_equal(num_samples(&s), 150);
    drop(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_csv_parses_features_and_labels),
        cmocka_unit_test(test_csv_gzip_header_skip_and_named_label),
        cmocka_unit_test(test_csv_bad_files_name_file_line_column),
        cmocka_unit_test(test_normalization),
        cmocka_unit_test(test_epochs_cover_every_row_and_reshuffle),
        cmocka_unit_test(test_reset_starts_a_new_epoch),
        cmocka_unit_test(test_snapshot_resumes_mid_epoch),
        cmocka_unit_test(test_holdout_split_is_disjoint_and_shared),
        cmocka_unit_test(test_prepared_table_shared_through_the_host),
        cmocka_unit_test(test_shards_iid_dirichlet_classes),
        cmocka_unit_test(test_synthetic_blobs),
        cmocka_unit_test(test_digits_from_fetch_data),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
