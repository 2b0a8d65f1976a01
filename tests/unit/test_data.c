/*
 * Unit tests for the data plugin (data::Csv, data::Idx, data::Synthetic), loaded from
 * the build's data.so and driven through its dispatch entry: parsing (plain
 * and gzip, header, skip_rows, label by index or name, unsupervised), every
 * bad-file error naming file, line and column, normalization, batching and
 * epochs, Reset, the held-out split, the IID / Dirichlet / classes shards
 * (disjoint, covering, deterministic per seed; Dirichlet label skew growing
 * as alpha falls, starved draws redrawn), EvalSet and NumSamples, snapshots,
 * the prepared table shared through a host's cache (ctx->shared_get/put),
 * IDX files (every type, plain and gzip, every malformed header or body
 * naming the file), the generator, and the real digits and Fashion-MNIST
 * files from scripts/fetch-data.
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

/* Writes len bytes to <tmp>/name (gzip-compressed when gz) and returns the
 * path. */
static const char *write_bytes(const char *name, const void *data, size_t len, bool gz)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    if (gz) {
        gzFile f = gzopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(gzwrite(f, data, (unsigned)len), (int)len);
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(data, 1, len, f), len);
        fclose(f);
    }
    return path;
}

static const char *write_file(const char *name, const char *text, bool gz)
{
    return write_bytes(name, text, strlen(text), gz);
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

/* err carries code and a message containing a and b (either may be NULL). */
static void expect_message(const bb_error *err, int code, const char *a, const char *b)
{
    assert_int_equal(err->code, code);
    if ((a && !strstr(err->msg, a)) || (b && !strstr(err->msg, b)))
        fail_msg("message \"%s\" lacks \"%s\" / \"%s\"", err->msg, a ? a : "", b ? b : "");
}

static void expect_error(const char *path, const char *extra, int code, const char *a,
                         const char *b)
{
    bb_error err = {0};
    csv_error(path, extra, &err);
    expect_message(&err, code, a, b);
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

/* Shard `index` of `count` by `partition` as sorted ids (the rows' first
 * feature); returns the row count. */
static size_t shard_ids(const char *path, const char *partition, double alpha, int seed,
                        int count, int index, float *ids, size_t cap)
{
    char extra[320];
    snprintf(extra, sizeof extra,
             "\"partition\": \"%s\", \"shard_count\": %d, \"shard_index\": %d, "
             "\"dirichlet_alpha\": %g, \"partition_seed\": %d",
             partition, count, index, alpha, seed);
    src s = csv(path, extra);
    size_t n = all_ids(&s, ids, cap);
    drop(&s);
    return n;
}

static void test_partitions_are_deterministic_per_seed(void **state)
{
    (void)state;
    const char *path = id_file("seeded.csv", 300, 10);
    static const char *const KINDS[] = {"iid", "dirichlet", "classes"};
    float a[300], b[300], c[300];
    for (int k = 0; k < 3; k++) {
        size_t na = shard_ids(path, KINDS[k], 0.5, 7, 5, 2, a, 300);
        size_t nb = shard_ids(path, KINDS[k], 0.5, 7, 5, 2, b, 300);
        assert_int_equal(na, nb); /* the same seed: the same shard */
        assert_memory_equal(a, b, na * sizeof *a);
        bool differs = false; /* another seed: another shard (for some of three seeds) */
        for (int seed = 8; seed < 11 && !differs; seed++) {
            size_t nc = shard_ids(path, KINDS[k], 0.5, seed, 5, 2, c, 300);
            differs = nc != na || memcmp(a, c, na * sizeof *a) != 0;
        }
        if (!differs)
            fail_msg("partition %s: the shard does not depend on partition_seed", KINDS[k]);
    }
}

/* Mean total-variation distance between each shard's label mix and the
 * whole part's (uniform here): 0 for IID shards, near 1 when each shard
 * holds one class. Checks that the shards partition the rows. */
static double label_skew(const char *path, int n, int classes, int count, double alpha, int seed)
{
    float *ids = malloc((size_t)n * sizeof *ids);
    int *owner = malloc((size_t)n * sizeof *owner);
    for (int i = 0; i < n; i++)
        owner[i] = -1;
    size_t total = 0;
    double tv = 0;
    for (int k = 0; k < count; k++) {
        size_t m = shard_ids(path, "dirichlet", alpha, seed, count, k, ids, (size_t)n);
        int hist[64] = {0};
        for (size_t i = 0; i < m; i++) {
            int id = (int)ids[i];
            assert_true(id >= 0 && id < n && owner[id] < 0); /* disjoint */
            owner[id] = k;
            hist[id % classes]++;
        }
        total += m;
        double d = 0;
        for (int c = 0; c < classes; c++)
            d += fabs((double)hist[c] / (double)m - 1.0 / classes);
        tv += d / 2;
    }
    assert_int_equal(total, (size_t)n); /* the sizes sum to the part: it is covered */
    free(ids);
    free(owner);
    return tv / count;
}

static void test_dirichlet_skew_grows_as_alpha_falls(void **state)
{
    (void)state;
    const char *path = id_file("skew.csv", 2000, 10);
    for (int seed = 1; seed <= 2; seed++) {
        double flat = label_skew(path, 2000, 10, 10, 100.0, seed);
        double mid = label_skew(path, 2000, 10, 10, 1.0, seed);
        double sharp = label_skew(path, 2000, 10, 10, 0.1, seed);
        print_message("dirichlet seed %d: label skew (mean TV) %.3f at alpha 100, %.3f at 1, "
                      "%.3f at 0.1\n", seed, flat, mid, sharp);
        assert_true(flat < 0.15);
        assert_true(mid > flat + 0.1);
        assert_true(sharp > mid + 0.1);
        assert_true(sharp > 0.5);
    }
    /* a skewed draw that starves a shard is drawn again */
    float ids[2000];
    for (int k = 0; k < 10; k++) {
        char extra[256];
        snprintf(extra, sizeof extra,
                 "\"partition\": \"dirichlet\", \"shard_count\": 10, \"shard_index\": %d, "
                 "\"dirichlet_alpha\": 0.05, \"dirichlet_min_rows\": 60, \"partition_seed\": 4",
                 k);
        src s = csv(path, extra);
        assert_true(all_ids(&s, ids, 2000) >= 60);
        drop(&s);
    }
    /* ... a bounded number of times, then the error says what to change */
    bb_error err = {0};
    assert_int_equal(csv_error(path, "\"partition\": \"dirichlet\", \"shard_count\": 10, "
                                     "\"dirichlet_alpha\": 0.01, \"dirichlet_min_rows\": 190",
                               &err),
                     BB_EINVAL);
    assert_non_null(strstr(err.msg, "no Dirichlet(0.01) draw of 100"));
    assert_non_null(strstr(err.msg, "raise dirichlet_alpha"));
    assert_int_equal(csv_error(path, "\"partition\": \"dirichlet\", \"shard_count\": 10, "
                                     "\"dirichlet_min_rows\": 201",
                               &err),
                     BB_EINVAL);
    assert_non_null(strstr(err.msg, "cannot give 10 shards 201 rows each"));
}

/* ---- data::Idx ------------------------------------------------------------------- */

/* An IDX file: header (type, dims) then `len` bytes of values (already
 * big-endian), gzip-compressed when gz. */
static const char *write_idx(const char *name, uint8_t type, uint32_t ndims,
                             const uint32_t *dims, const void *values, size_t len, bool gz)
{
    uint8_t *b = malloc(4 + 4 * (size_t)ndims + len);
    b[0] = b[1] = 0;
    b[2] = type;
    b[3] = (uint8_t)ndims;
    for (uint32_t i = 0; i < ndims; i++)
        for (int k = 0; k < 4; k++)
            b[4 + 4 * i + (uint32_t)k] = (uint8_t)(dims[i] >> (24 - 8 * k));
    memcpy(b + 4 + 4 * ndims, values, len);
    const char *path = write_bytes(name, b, 4 + 4 * (size_t)ndims + len, gz);
    free(b);
    return path;
}

/* A data::Idx over images (and labels, may be NULL) with extra keys. */
static void *idx_try(const char *images, const char *labels, const char *extra, bb_error *err)
{
    char cfg[1024], lab[300] = "";
    if (labels)
        snprintf(lab, sizeof lab, ", \"label_path\": \"%s\"", labels);
    snprintf(cfg, sizeof cfg, "{\"path\": \"%s\"%s%s%s}", images, lab, *extra ? ", " : "", extra);
    return try_make("data::Idx", cfg, err);
}

static src idx(const char *images, const char *labels, const char *extra)
{
    src s = {pfx_type("data::Idx"), NULL};
    bb_error err = {0};
    s.inst = idx_try(images, labels, extra, &err);
    if (!s.inst)
        fail_msg("create data::Idx: %s", err.msg);
    return s;
}

/* 5 images of 2 x 3 u8 pixels (image i, pixel j = 50 i + j) and labels 4 - i. */
static void five_images(bool gz, const char **images, const char **labels)
{
    uint8_t px[30], lab[5];
    for (int i = 0; i < 5; i++) {
        for (int j = 0; j < 6; j++)
            px[i * 6 + j] = (uint8_t)(50 * i + j);
        lab[i] = (uint8_t)(4 - i);
    }
    static char a[256], b[256];
    snprintf(a, sizeof a, "%s", write_idx(gz ? "img.gz" : "img", 0x08, 3,
                                          (const uint32_t[]){5, 2, 3}, px, 30, gz));
    snprintf(b, sizeof b, "%s", write_idx(gz ? "lab.gz" : "lab", 0x08, 1,
                                          (const uint32_t[]){5}, lab, 5, gz));
    *images = a;
    *labels = b;
}

static void test_idx_reads_samples_and_labels(void **state)
{
    (void)state;
    for (int gz = 0; gz < 2; gz++) {
        const char *images, *labels;
        five_images(gz, &images, &labels);
        src s = idx(images, labels, "\"shuffle\": false, \"batch_size\": 5");
        assert_int_equal(num_samples(&s), 5);
        bb_value *x, *y;
        call2(&s, "NextBatch", &x, &y);
        assert_int_equal(x->u.tensor.dims[0], 5);
        assert_int_equal(x->u.tensor.dims[1], 6); /* 2 x 3 flattened */
        for (int i = 0; i < 5; i++) {
            assert_true(bb_tensor_f32(y)[i] == (float)(4 - i));
            for (int j = 0; j < 6; j++) /* u8 pixels scale to [0, 1] by default */
                assert_true(fabsf(bb_tensor_f32(x)[i * 6 + j] - (float)(50 * i + j) / 255.0f) <
                            1e-6f);
        }
        bb_value_unref(x);
        bb_value_unref(y);
        drop(&s);
        /* sample_shape: batches (and the evaluation rows) shaped for a CNN */
        s = idx(images, labels, "\"shuffle\": false, \"batch_size\": 4, "
                                "\"sample_shape\": [1, 2, 3]");
        call2(&s, "NextBatch", &x, &y);
        const int64_t want_dims[4] = {4, 1, 2, 3};
        assert_int_equal(x->u.tensor.ndim, 4);
        assert_memory_equal(x->u.tensor.dims, want_dims, sizeof want_dims);
        assert_true(fabsf(bb_tensor_f32(x)[6] - 50.0f / 255.0f) < 1e-6f); /* image 1, pixel 0 */
        bb_value_unref(x);
        bb_value_unref(y);
        call2(&s, "EvalSet", &x, &y);
        assert_int_equal(x->u.tensor.ndim, 4);
        assert_int_equal(x->u.tensor.dims[0], 5);
        bb_value_unref(x);
        bb_value_unref(y);
        drop(&s);
        bb_error err = {0};
        assert_null(idx_try(images, labels, "\"sample_shape\": [2, 2]", &err));
        assert_non_null(strstr(err.msg, "sample_shape holds 4 values per sample, the data has 6"));
        assert_null(idx_try(images, labels, "\"sample_shape\": [2, 0, 3]", &err));
        assert_non_null(strstr(err.msg, "sample_shape[1] must be a whole number"));
        assert_null(idx_try(images, labels, "\"sample_shape\": [1, 1, 1, 1, 1, 1, 1, 6]", &err));
        assert_non_null(strstr(err.msg, "an array of 1 to 7 dimensions"));
        /* an explicit scale; no labels: unsupervised */
        s = idx(images, NULL, "\"shuffle\": false, \"batch_size\": 5, \"scale\": 2");
        call2(&s, "NextBatch", &x, &y);
        assert_true(bb_tensor_f32(x)[7] == 2.0f * 51);
        assert_int_equal(bb_tensor_numel(y), 0);
        bb_value_unref(x);
        bb_value_unref(y);
        drop(&s);
    }
    /* multi-byte types are big-endian; i16 and f32 keep their values (scale 1) */
    const uint8_t i16[4] = {0xff, 0xfe, 0x01, 0x00}; /* -2, 256 */
    const uint8_t f32[8] = {0x3f, 0xc0, 0, 0, 0xc1, 0x20, 0, 0}; /* 1.5, -10 */
    const uint8_t lab[2] = {0, 1};
    const char *l2 = write_idx("l2", 0x08, 1, (const uint32_t[]){2}, lab, 2, false);
    char l2path[256];
    snprintf(l2path, sizeof l2path, "%s", l2);
    const float want_i16[2] = {-2, 256}, want_f32[2] = {1.5f, -10};
    const struct { const char *name; uint8_t type; const uint8_t *v; const float *want; } T[] = {
        {"i16", 0x0B, i16, want_i16}, {"f32", 0x0D, f32, want_f32}};
    for (int k = 0; k < 2; k++) {
        const char *p = write_idx(T[k].name, T[k].type, 2, (const uint32_t[]){2, 1}, T[k].v,
                                  T[k].type == 0x0B ? 4 : 8, false);
        src s = idx(p, l2path, "\"shuffle\": false");
        bb_value *x, *y;
        call2(&s, "NextBatch", &x, &y);
        assert_memory_equal(bb_tensor_f32(x), T[k].want, 2 * sizeof(float));
        bb_value_unref(x);
        bb_value_unref(y);
        drop(&s);
    }
}

static void expect_idx_error(const char *images, const char *labels, int code, const char *a,
                             const char *b)
{
    bb_error err = {0};
    assert_null(idx_try(images, labels, "", &err));
    expect_message(&err, code, a, b);
}

static void test_idx_bad_files_name_the_file(void **state)
{
    (void)state;
    const char *images, *labels;
    five_images(false, &images, &labels);
    char good[256], lab[256];
    snprintf(good, sizeof good, "%s", images);
    snprintf(lab, sizeof lab, "%s", labels);
    uint8_t px[30] = {0};
    char missing[300];
    snprintf(missing, sizeof missing, "%s/nope.idx", g_dir);
    expect_idx_error(missing, NULL, BB_EIO, "nope.idx", "cannot open");
    expect_idx_error(write_file("text.idx", "1,2,3\n", false), NULL, BB_EPARSE,
                     "text.idx: not an IDX file", "magic 0x312c322c");
    expect_idx_error(write_bytes("short.idx", "\0\0", 2, false), NULL, BB_EPARSE, "short.idx",
                     "too short");
    expect_idx_error(write_idx("type.idx", 0x07, 1, (const uint32_t[]){3}, px, 3, false), NULL,
                     BB_EPARSE, "type.idx: unknown IDX value type 0x07", NULL);
    expect_idx_error(write_idx("nodims.idx", 0x08, 0, NULL, px, 3, false), NULL, BB_EPARSE,
                     "nodims.idx: 0 dimensions", NULL);
    expect_idx_error(write_idx("zero.idx", 0x08, 2, (const uint32_t[]){4, 0}, px, 0, false),
                     NULL, BB_EPARSE, "zero.idx: dimension 1 is 0", NULL);
    expect_idx_error(write_bytes("hdr.idx", "\0\0\x08\x03\0\0\0\x05", 8, false), NULL,
                     BB_EPARSE, "hdr.idx: truncated header", "need 16 bytes");
    /* huge dimensions are refused from the header, before any allocation */
    expect_idx_error(write_idx("huge.idx", 0x0E, 3,
                               (const uint32_t[]){0xffffffffu, 0xffffffffu, 0xffffffffu}, px, 8,
                               false),
                     NULL, BB_ELIMIT, "huge.idx: the header describes more than max_bytes", NULL);
    expect_idx_error(write_idx("trunc.idx.gz", 0x08, 3, (const uint32_t[]){5, 2, 3}, px, 29,
                               true),
                     NULL, BB_EPARSE, "trunc.idx.gz: truncated", "ends after 29");
    expect_idx_error(write_idx("long.idx", 0x08, 2, (const uint32_t[]){4, 3}, px, 13, false),
                     NULL, BB_EPARSE, "long.idx: more bytes after the 12 data bytes", NULL);
    const uint8_t nan32[4] = {0x7f, 0xc0, 0, 0};
    expect_idx_error(write_idx("nan.idx", 0x0D, 2, (const uint32_t[]){1, 1}, nan32, 4, false),
                     NULL, BB_EPARSE, "nan.idx: value 0 (sample 0)", "not a finite float");
    /* the labels: one value per sample */
    const uint8_t six[6] = {0};
    expect_idx_error(good, write_idx("lab6.idx", 0x08, 1, (const uint32_t[]){6}, six, 6, false),
                     BB_EPARSE, "lab6.idx: 6 labels (1 dimensions) for the 5 samples", "img");
    expect_idx_error(good, write_idx("lab2d.idx", 0x08, 2, (const uint32_t[]){5, 1}, six, 5,
                                     false),
                     BB_EPARSE, "lab2d.idx: 5 labels (2 dimensions)", NULL);
    /* max_bytes caps the data of both files */
    bb_error err = {0};
    assert_null(idx_try(good, lab, "\"max_bytes\": 29", &err));
    assert_non_null(strstr(err.msg, "img: the header describes more than max_bytes (29 bytes)"));
    assert_null(idx_try(good, lab, "\"label_path\": 3", &err));
    assert_non_null(strstr(err.msg, "'label_path' must be a string"));
}

/* The common pipeline over IDX rows: held-out split and Dirichlet shards. */
static void test_idx_holdout_and_shards(void **state)
{
    (void)state;
    enum { N = 200 };
    uint8_t px[N * 2], lab[N];
    for (int i = 0; i < N; i++) { /* the first pixel is the row's id */
        px[2 * i] = (uint8_t)i;
        px[2 * i + 1] = 0;
        lab[i] = (uint8_t)(i % 4);
    }
    char images[256], labels[256];
    snprintf(images, sizeof images, "%s",
             write_idx("ids.idx", 0x08, 2, (const uint32_t[]){N, 2}, px, sizeof px, false));
    snprintf(labels, sizeof labels, "%s",
             write_idx("ids-lab.idx", 0x08, 1, (const uint32_t[]){N}, lab, sizeof lab, false));
    int owner[N];
    memset(owner, -1, sizeof owner);
    size_t total = 0;
    float ids[N];
    for (int k = 0; k < 3; k++) {
        char extra[256];
        snprintf(extra, sizeof extra,
                 "\"scale\": 1, \"holdout\": 0.25, \"partition\": \"dirichlet\", "
                 "\"dirichlet_alpha\": 0.5, \"shard_count\": 3, \"shard_index\": %d", k);
        src s = idx(images, labels, extra);
        size_t m = all_ids(&s, ids, N);
        for (size_t i = 0; i < m; i++) {
            assert_true(owner[(int)ids[i]] < 0);
            owner[(int)ids[i]] = k;
        }
        total += m;
        drop(&s);
    }
    assert_int_equal(total, N - 50); /* the shards cover the 75% training rows */
}

/* The real Fashion-MNIST files (scripts/fetch-data --set fashion-mnist). */
static void test_idx_fashion_mnist_from_fetch_data(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "'%s' --set fashion-mnist >&2", pfx_repo_path("scripts/fetch-data"));
    if (system(cmd) != 0)
        fail_msg("scripts/fetch-data --set fashion-mnist failed");
    char images[512], labels[512];
    snprintf(images, sizeof images, "%s",
             pfx_repo_path("data/fashion-mnist/t10k-images-idx3-ubyte.gz"));
    snprintf(labels, sizeof labels, "%s",
             pfx_repo_path("data/fashion-mnist/t10k-labels-idx1-ubyte.gz"));
    src s = idx(images, labels, "\"part\": \"all\", \"batch_size\": 10000, \"shuffle\": false");
    assert_int_equal(num_samples(&s), 10000);
    bb_value *x, *y;
    call2(&s, "NextBatch", &x, &y);
    assert_int_equal(x->u.tensor.dims[1], 784);
    int count[10] = {0};
    for (int i = 0; i < 10000; i++) {
        float l = bb_tensor_f32(y)[i];
        assert_true(l >= 0 && l <= 9 && l == floorf(l));
        count[(int)l]++;
    }
    for (int c = 0; c < 10; c++) /* the test set is balanced */
        assert_int_equal(count[c], 1000);
    float lo = 1, hi = 0;
    for (size_t i = 0; i < bb_tensor_numel(x); i++) {
        lo = bb_tensor_f32(x)[i] < lo ? bb_tensor_f32(x)[i] : lo;
        hi = bb_tensor_f32(x)[i] > hi ? bb_tensor_f32(x)[i] : hi;
    }
    assert_true(lo == 0.0f && hi == 1.0f); /* pixels 0..255 scaled to [0, 1] */
    bb_value_unref(x);
    bb_value_unref(y);
    drop(&s);
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
        cmocka_unit_test(test_partitions_are_deterministic_per_seed),
        cmocka_unit_test(test_dirichlet_skew_grows_as_alpha_falls),
        cmocka_unit_test(test_idx_reads_samples_and_labels),
        cmocka_unit_test(test_idx_bad_files_name_the_file),
        cmocka_unit_test(test_idx_holdout_and_shards),
        cmocka_unit_test(test_idx_fashion_mnist_from_fetch_data),
        cmocka_unit_test(test_synthetic_blobs),
        cmocka_unit_test(test_digits_from_fetch_data),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
