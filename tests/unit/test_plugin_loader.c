/*
 * Unit tests for the plugin loader (bb/plugin_loader.h), the role helpers,
 * the example plugin run through its function pointers, and the man page's
 * copy of the example source. Test plugins are real .so files under
 * $BB_BUILD/tests/plugins; directories for scans are temp dirs of symlinks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "bb/arena.h"
#include "bb/plugin.h"
#include "bb/plugin_loader.h"
#include "bb/type_source.h"
#include "bb/value.h"
#include "bbc/bbc.h"


/* ---- paths ------------------------------------------------------------------- */

static char g_build[2048]; /* absolute build dir (short enough to append to) */

static void find_build_dir(void)
{
    const char *env = getenv("BB_BUILD");
    char buf[PATH_MAX];
    if (env && *env) {
        snprintf(buf, sizeof buf, "%s", env);
    } else {
        /* <build>/tests/test_plugin_loader -> <build> */
        ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
        assert_true(n > 0);
        buf[n] = '\0';
        for (int i = 0; i < 2; i++) {
            char *s = strrchr(buf, '/');
            assert_non_null(s);
            *s = '\0';
        }
    }
    char real[PATH_MAX];
    assert_non_null(realpath(buf, real));
    assert_true(strlen(real) < sizeof g_build);
    memcpy(g_build, real, strlen(real) + 1);
}

/* $BB_BUILD/tests/plugins/NAME.so or $BB_BUILD/lib/bytesandbrains/plugins/NAME.so */
static const char *tplugin(const char *name)
{
    static char p[4][PATH_MAX];
    static int k;
    char *out = p[k++ % 4];
    snprintf(out, PATH_MAX, "%s/tests/plugins/%s.so", g_build, name);
    return out;
}

static const char *rplugin(const char *name)
{
    static char p[4][PATH_MAX];
    static int k;
    char *out = p[k++ % 4];
    snprintf(out, PATH_MAX, "%s/lib/bytesandbrains/plugins/%s.so", g_build, name);
    return out;
}

typedef struct tmpdir {
    char path[64];
    char names[16][64];
    int n;
} tmpdir;

static void tmpdir_make(tmpdir *d)
{
    memset(d, 0, sizeof *d);
    snprintf(d->path, sizeof d->path, "/tmp/bb-plugin-test.XXXXXX");
    assert_non_null(mkdtemp(d->path));
}

/* name -> target (a symlink), or a regular file with text when target is NULL. */
static void tmpdir_add(tmpdir *d, const char *name, const char *target, const char *text)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", d->path, name);
    if (target) {
        assert_int_equal(symlink(target, p), 0);
    } else {
        FILE *f = fopen(p, "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
    }
    assert_true(d->n < 16);
    snprintf(d->names[d->n++], 64, "%s", name);
}

static void tmpdir_remove(tmpdir *d)
{
    char p[PATH_MAX];
    for (int i = 0; i < d->n; i++) {
        snprintf(p, sizeof p, "%s/%s", d->path, d->names[i]);
        unlink(p);
    }
    rmdir(d->path);
}

static bb_plugin_loader *loader_new(unsigned flags)
{
    bb_plugin_loader *l = NULL;
    bb_error err;
    assert_int_equal(bb_plugin_loader_create(flags, &l, &err), BB_OK);
    assert_non_null(l);
    return l;
}

static void assert_contains(const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        fail_msg("expected \"%s\" in \"%s\"", needle, hay);
}

/* ---- roles ------------------------------------------------------------------------ */

static void test_roles(void **state)
{
    (void)state;
    assert_string_equal(bb_role_name(BB_ROLE_BACKEND), "Backend");
    assert_string_equal(bb_role_name(BB_ROLE_DATA_SOURCE), "DataSource");
    assert_string_equal(bb_role_name(BB_ROLE_PEER_SELECTOR), "PeerSelector");
    assert_string_equal(bb_role_name((bb_role)42), "?");
    assert_string_equal(bb_role_name(BB_ROLE_NONE), "?");
    for (int r = BB_ROLE_BACKEND; r <= BB_ROLE_PROTOCOL; r++)
        assert_int_equal(bb_role_parse(bb_role_name((bb_role)r)), r);
    assert_int_equal(bb_role_parse("backend"), BB_ROLE_BACKEND);
    assert_int_equal(bb_role_parse("BackendRuntime"), BB_ROLE_BACKEND);
    assert_int_equal(bb_role_parse("AggregatorRuntime"), BB_ROLE_AGGREGATOR);
    assert_int_equal(bb_role_parse("data_source"), BB_ROLE_DATA_SOURCE);
    assert_int_equal(bb_role_parse("DataLoader"), BB_ROLE_DATA_SOURCE);
    assert_int_equal(bb_role_parse("Compressor"), BB_ROLE_CODEC);
    assert_int_equal(bb_role_parse("peer_selector"), BB_ROLE_PEER_SELECTOR);
    assert_int_equal(bb_role_parse("Runtime"), BB_ROLE_NONE);
    assert_int_equal(bb_role_parse(""), BB_ROLE_NONE);
    assert_int_equal(bb_role_parse("Backends"), BB_ROLE_NONE);
    assert_int_equal(bb_role_parse("Back"), BB_ROLE_NONE);
    assert_int_equal(bb_role_parse(NULL), BB_ROLE_NONE);
    assert_string_equal(bb_role_domain(BB_ROLE_BACKEND), "ai.onnx");
    assert_string_equal(bb_role_domain(BB_ROLE_CODEC), "ai.bytesandbrains.role.compressor");
    assert_string_equal(bb_role_domain(BB_ROLE_DATA_SOURCE), "ai.bytesandbrains.role.data_loader");
    /* the role ops whose contract folds a batch of responses one at a time */
    const char *agg = bb_role_domain(BB_ROLE_AGGREGATOR);
    assert_true(bb_role_op_folds_responses(agg, "Contribute"));
    assert_false(bb_role_op_folds_responses(agg, "Aggregate"));
    assert_false(bb_role_op_folds_responses("test.agg", "Contribute"));
    assert_false(bb_role_op_folds_responses(NULL, "Contribute"));
    assert_false(bb_role_op_folds_responses(agg, NULL));
    assert_string_equal(bb_role_domain(BB_ROLE_AGGREGATOR), "ai.bytesandbrains.role.aggregator");
    assert_null(bb_role_domain(BB_ROLE_PROTOCOL));
    assert_null(bb_role_domain(BB_ROLE_NONE));
}

static const bb_op_decl ONNX_OPS[] = {{.op_type = "Add"}, {.op_type = "MatMul"}};
static const bb_op_decl OWN_OPS[] = {{.op_type = "Ping"}, {.op_type = "Add"}};
static const bb_opset_decl TWO_OPSETS[] = {
    {.domain = "ai.onnx", .version = 1, .ops = ONNX_OPS, .n_ops = 2},
    {.domain = "x.own.atomic", .version = 1, .ops = OWN_OPS, .n_ops = 2},
};
static const bb_component_type TWO = {.opsets = TWO_OPSETS, .n_opsets = 2};

static void test_find_op(void **state)
{
    (void)state;
    uint32_t idx = 99;
    const bb_op_decl *op = bb_component_type_find_op(&TWO, "", "MatMul", &idx);
    assert_ptr_equal(op, &ONNX_OPS[1]);
    assert_int_equal(idx, 1);
    assert_ptr_equal(bb_component_type_find_op(&TWO, NULL, "Add", &idx), &ONNX_OPS[0]);
    assert_int_equal(idx, 0);
    assert_ptr_equal(bb_component_type_find_op(&TWO, "ai.onnx", "Add", NULL), &ONNX_OPS[0]);
    /* the same op_type in another domain resolves to that opset's entry */
    assert_ptr_equal(bb_component_type_find_op(&TWO, "x.own.atomic", "Add", &idx), &OWN_OPS[1]);
    assert_int_equal(idx, 1);
    assert_null(bb_component_type_find_op(&TWO, "x.own.atomic", "MatMul", &idx));
    assert_null(bb_component_type_find_op(&TWO, "ai.onnx", "Ping", &idx));
    assert_null(bb_component_type_find_op(&TWO, "other", "Ping", &idx));
    assert_null(bb_component_type_find_op(&TWO, "x.own.atomic", NULL, &idx));
}

/* ---- loading files ------------------------------------------------------------------ */

static void test_load_example_and_good2(void **state)
{
    (void)state;
    bb_plugin_loader *l = loader_new(BB_PLUGIN_LOADER_ONLY_EXPLICIT);
    bb_error err;
    const bb_loaded_plugin *ex = NULL, *g2 = NULL;
    assert_int_equal(bb_plugin_loader_load_file(l, rplugin("example"), &ex, &err), BB_OK);
    assert_int_equal(bb_plugin_loader_load_file(l, tplugin("good2"), &g2, &err), BB_OK);
    assert_string_equal(ex->info->name, "example");
    assert_string_equal(g2->info->name, "good2");
    assert_null(g2->stages);
    assert_int_equal(bb_plugin_loader_plugin_count(l), 2);
    assert_int_equal(bb_plugin_loader_type_count(l), 3);
    assert_string_equal(bb_plugin_loader_type_at(l, 0)->type->type_name, "example::Counter");
    assert_string_equal(bb_plugin_loader_type_at(l, 1)->type->type_name, "good2::Echo");
    assert_string_equal(bb_plugin_loader_type_at(l, 2)->type->type_name, "good2::Null");
    assert_null(bb_plugin_loader_type_at(l, 3));

    const bb_loaded_type *t = bb_plugin_loader_find(l, "example::Counter");
    assert_non_null(t);
    assert_ptr_equal(t->plugin, ex);
    assert_int_equal(t->type->role, BB_ROLE_AGGREGATOR);
    char real[PATH_MAX];
    assert_non_null(realpath(rplugin("example"), real));
    assert_string_equal(t->plugin->path, real);
    uint32_t idx;
    assert_non_null(bb_component_type_find_op(t->type, "ai.bytesandbrains.role.aggregator",
                                              "CurrentTensor", &idx));
    assert_int_equal(idx, 2);

    const bb_loaded_type *echo = bb_plugin_loader_find(l, "good2::Echo");
    assert_non_null(echo);
    assert_int_equal(echo->type->role, BB_ROLE_PROTOCOL);
    assert_int_equal(echo->type->n_deps, 1);
    assert_string_equal(echo->type->deps[0].slot, "compute");
    assert_null(bb_plugin_loader_find(l, "good2::Nope"));
    bb_type_source ts;
    bb_type_source_from_loader(&ts, l, NULL);
    assert_ptr_equal(bb_type_source_find(&ts, "good2::Echo"), echo->type);
    assert_null(bb_type_source_find(&ts, "good2::Nope"));
    assert_int_equal(bb_type_source_count(&ts), bb_plugin_loader_type_count(l));
    assert_ptr_equal(bb_type_source_at(&ts, 0), bb_plugin_loader_type_at(l, 0)->type);
    assert_null(bb_type_source_at(&ts, bb_type_source_count(&ts)));
    assert_string_equal(ts.where, "the plugin search path");
    assert_null(bb_plugin_loader_find(l, NULL));

    /* the same file's stages, through the already-open handle */
    const bb_stage_info *si = NULL;
    assert_int_equal(bb_plugin_loader_load_stages(l, tplugin("good2"), &si, &err), BB_OK);
    assert_non_null(si);
    assert_ptr_equal(g2->stages, si);
    assert_int_equal(si->n_stages, 1);
    assert_string_equal(si->stages[0]->name, "good2.stamp");
    assert_int_equal(bb_plugin_loader_plugin_count(l), 2);
    bb_model m = {.arena = bb_arena_create()};
    assert_non_null(m.arena);
    assert_int_equal(si->stages[0]->run(si->stages[0]->state, &m, &err), BB_OK);
    assert_string_equal(m.doc_string, "stamped by good2");
    bb_arena_destroy(m.arena);

    /* a file without stages, named explicitly: fatal, names the file */
    assert_int_equal(bb_plugin_loader_load_stages(l, rplugin("example"), &si, &err),
                     BB_ENOTFOUND);
    assert_contains(err.msg, "example.so");
    assert_contains(err.msg, BB_STAGE_ENTRY_SYMBOL);
    bb_plugin_loader_destroy(l);
    bb_plugin_loader_destroy(NULL);
}

static void test_stages_only_then_plugin(void **state)
{
    (void)state;
    bb_plugin_loader *l = loader_new(BB_PLUGIN_LOADER_ONLY_EXPLICIT);
    bb_error err;
    const bb_stage_info *si = NULL;
    assert_int_equal(bb_plugin_loader_load_stages(l, tplugin("good2"), &si, &err), BB_OK);
    assert_int_equal(bb_plugin_loader_plugin_count(l), 1);
    assert_null(bb_plugin_loader_plugin_at(l, 0)->info);
    assert_int_equal(bb_plugin_loader_type_count(l), 0);
    const bb_loaded_plugin *p = NULL;
    assert_int_equal(bb_plugin_loader_load_file(l, tplugin("good2"), &p, &err), BB_OK);
    assert_ptr_equal(p, bb_plugin_loader_plugin_at(l, 0));
    assert_ptr_equal(p->stages, si);
    assert_int_equal(bb_plugin_loader_type_count(l), 2);
    bb_plugin_loader_destroy(l);
}

static void test_bad_abi(void **state)
{
    (void)state;
    bb_plugin_loader *l = loader_new(BB_PLUGIN_LOADER_ONLY_EXPLICIT);
    bb_error err;
    assert_int_equal(bb_plugin_loader_load_file(l, tplugin("bad_abi"), NULL, &err), BB_EABI);
    assert_int_equal(err.code, BB_EABI);
    assert_contains(err.msg, "bad_abi.so");
    assert_contains(err.msg, "99.0");
    char host[32];
    snprintf(host, sizeof host, "%d.%d", BB_PLUGIN_ABI_MAJOR, BB_PLUGIN_ABI_MINOR);
    assert_contains(err.msg, host);
    assert_int_equal(bb_plugin_loader_plugin_count(l), 0);
    assert_int_equal(bb_plugin_loader_type_count(l), 0);
    bb_plugin_loader_destroy(l);
}

/* A plugin compiled against another bb/value.h (lists keep 9 items inline,
 * not 10): its ABI version and struct sizes are right, its value layout is
 * not, and the message gives both signatures. */
static void test_wrong_layout(void **state)
{
    (void)state;
    void *h = dlopen(tplugin("wrong_layout"), RTLD_NOW | RTLD_LOCAL);
    assert_non_null(h);
    bb_plugin_entry_fn entry = (bb_plugin_entry_fn)(uintptr_t)dlsym(h, BB_PLUGIN_ENTRY_SYMBOL);
    assert_non_null(entry);
    const bb_plugin_info *info = entry();
    assert_int_equal(info->struct_size, sizeof(bb_plugin_info));
    assert_int_equal(info->abi_major, BB_PLUGIN_ABI_MAJOR);
    assert_int_equal(info->abi_minor, BB_PLUGIN_ABI_MINOR);
    uint64_t theirs = info->value_layout;
    dlclose(h);
    assert_true(theirs != BB_PLUGIN_VALUE_LAYOUT);
    char want_theirs[32], want_ours[32];
    snprintf(want_theirs, sizeof want_theirs, "0x%016" PRIx64, theirs);
    snprintf(want_ours, sizeof want_ours, "0x%016" PRIx64, (uint64_t)BB_PLUGIN_VALUE_LAYOUT);

    bb_plugin_loader *l = loader_new(BB_PLUGIN_LOADER_ONLY_EXPLICIT);
    bb_error err;
    assert_int_equal(bb_plugin_loader_load_file(l, tplugin("wrong_layout"), NULL, &err), BB_EABI);
    assert_contains(err.msg, "wrong_layout.so");
    assert_contains(err.msg, "plugin 'wrong_layout'");
    assert_contains(err.msg, "value layout");
    assert_contains(err.msg, want_theirs);
    assert_contains(err.msg, want_ours);
    assert_int_equal(bb_plugin_loader_plugin_count(l), 0);
    assert_int_equal(bb_plugin_loader_type_count(l), 0);
    bb_plugin_loader_destroy(l);

    /* in a scanned directory it is a warning; the other plugins load */
    tmpdir d;
    tmpdir_make(&d);
    tmpdir_add(&d, "example.so", rplugin("example"), NULL);
    tmpdir_add(&d, "wrong_layout.so", tplugin("wrong_layout"), NULL);
    l = loader_new(BB_PLUGIN_LOADER_ONLY_EXPLICIT);
    assert_int_equal(bb_plugin_loader_add_dirs(l, d.path, &err), BB_OK);
    assert_int_equal(bb_plugin_loader_scan(l, &err), BB_OK);
    assert_non_null(bb_plugin_loader_find(l, "example::Counter"));
    assert_null(bb_plugin_loader_find(l, "wrong_layout::Codec"));
    assert_int_equal(bb_plugin_loader_warning_count(l), 1);
    assert_contains(bb_plugin_loader_warning_at(l, 0), "wrong_layout.so");
    assert_contains(bb_plugin_loader_warning_at(l, 0), want_theirs);
    bb_plugin_loader_destroy(l);
    tmpdir_remove(&d);
}

static void test_no_entry(void **state)
{
    (void)state;
    bb_plugin_loader *l = loader_new(BB_PLUGIN_LOADER_ONLY_EXPLICIT);
    bb_error err;
    assert_int_equal(bb_plugin_loader_load_file(l, tplugin("no_entry"), NULL, &err),
                     BB_ENOTFOUND);
    assert_contains(err.msg, "no_entry.so");
    assert_contains(err.msg, BB_PLUGIN_ENTRY_SYMBOL);
    assert_int_equal(bb_plugin_loader_plugin_count(l), 0);
    /* not a file at all, and a file that is not a shared object */
    assert_int_equal(bb_plugin_loader_load_file(l, "/nonexistent/x.so", NULL, &err),
                     BB_ENOTFOUND);
    assert_contains(err.msg, "/nonexistent/x.so");
    tmpdir d;
    tmpdir_make(&d);
    tmpdir_add(&d, "junk.so", NULL, "this is not ELF\n");
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/junk.so", d.path);
    assert_int_equal(bb_plugin_loader_load_file(l, p, NULL, &err), BB_EIO);
    assert_contains(err.msg, "junk.so");
    assert_int_equal(bb_plugin_loader_load_file(l, d.path, NULL, &err), BB_EINVAL);
    assert_int_equal(bb_plugin_loader_plugin_count(l), 0);
    tmpdir_remove(&d);
    bb_plugin_loader_destroy(l);
}

static void test_duplicate_type_files(void **state)
{
    (void)state;
    bb_plugin_loader *l = loader_new(BB_PLUGIN_LOADER_ONLY_EXPLICIT);
    bb_error err;
    assert_int_equal(bb_plugin_loader_load_file(l, rplugin("example"), NULL, &err), BB_OK);
    assert_int_equal(bb_plugin_loader_load_file(l, tplugin("dup_type"), NULL, &err), BB_EEXIST);
    assert_contains(err.msg, "example::Counter");
    assert_contains(err.msg, "example.so");
    assert_contains(err.msg, "dup_type.so");
    /* the refused file is closed; the first stays usable */
    assert_int_equal(bb_plugin_loader_plugin_count(l), 1);
    assert_int_equal(bb_plugin_loader_type_count(l), 1);
    assert_string_equal(bb_plugin_loader_find(l, "example::Counter")->plugin->info->name,
                        "example");
    bb_plugin_loader_destroy(l);
}

static void test_duplicate_type_in_dir(void **state)
{
    (void)state;
    tmpdir d;
    tmpdir_make(&d);
    tmpdir_add(&d, "example.so", rplugin("example"), NULL);
    tmpdir_add(&d, "dup_type.so", tplugin("dup_type"), NULL);
    bb_plugin_loader *l = loader_new(BB_PLUGIN_LOADER_ONLY_EXPLICIT);
    bb_error err;
    assert_int_equal(bb_plugin_loader_add_dirs(l, d.path, &err), BB_OK);
    /* duplicates are fatal even while scanning (names sort dup_type first) */
    assert_int_equal(bb_plugin_loader_scan(l, &err), BB_EEXIST);
    assert_contains(err.msg, "dup_type.so");
    assert_contains(err.msg, "example.so");
    assert_contains(err.msg, "example::Counter");
    bb_plugin_loader_destroy(l);
    tmpdir_remove(&d);
}

static void test_create_fails(void **state)
{
    (void)state;
    bb_plugin_loader *l = loader_new(BB_PLUGIN_LOADER_ONLY_EXPLICIT);
    bb_error err;
    assert_int_equal(bb_plugin_loader_load_file(l, tplugin("create_fails"), NULL, &err), BB_OK);
    const bb_loaded_type *t = bb_plugin_loader_find(l, "test::CreateFails");
    assert_non_null(t);
    bb_create_args args = {.struct_size = sizeof args, .slot = "model"};
    void *inst = (void *)&args;
    /* directly: the plugin's own status and message */
    bb_error_clear(&err);
    assert_int_equal(t->type->create(&args, &inst, &err), BB_ECONFIG);
    assert_contains(err.msg, "rate");
    /* through the loader: prefixed with slot, TYPE_NAME and file */
    inst = NULL;
    assert_int_equal(bb_loaded_type_create(t, &args, &inst, &err), BB_ECONFIG);
    assert_int_equal(err.code, BB_ECONFIG);
    assert_null(inst);
    assert_contains(err.msg, "slot 'model'");
    assert_contains(err.msg, "test::CreateFails");
    assert_contains(err.msg, "create_fails.so");
    assert_contains(err.msg, "config key 'rate' of slot 'model' must be positive");
    bb_plugin_loader_destroy(l);
}

/* ---- directory scans ---------------------------------------------------------------- */

static void test_scan_warnings(void **state)
{
    (void)state;
    tmpdir d;
    tmpdir_make(&d);
    tmpdir_add(&d, "bad_abi.so", tplugin("bad_abi"), NULL);
    tmpdir_add(&d, "no_entry.so", tplugin("no_entry"), NULL);
    tmpdir_add(&d, "example.so", rplugin("example"), NULL);
    tmpdir_add(&d, "notes.so", NULL, "not a shared object\n");
    tmpdir_add(&d, "README", NULL, "ignored: not *.so\n");
    tmpdir_add(&d, ".hidden.so", tplugin("bad_abi"), NULL);
    tmpdir_add(&d, "dangling.so", "/nonexistent/target.so", NULL);
    bb_plugin_loader *l = loader_new(BB_PLUGIN_LOADER_ONLY_EXPLICIT);
    bb_error err;
    assert_int_equal(bb_plugin_loader_add_dirs(l, d.path, &err), BB_OK);
    assert_int_equal(bb_plugin_loader_scan(l, &err), BB_OK);
    assert_non_null(bb_plugin_loader_find(l, "example::Counter"));
    assert_int_equal(bb_plugin_loader_plugin_count(l), 1);
    assert_int_equal(bb_plugin_loader_warning_count(l), 4);
    /* alphabetical: bad_abi, dangling, no_entry, notes */
    assert_contains(bb_plugin_loader_warning_at(l, 0), "bad_abi.so");
    assert_contains(bb_plugin_loader_warning_at(l, 0), "99.0");
    assert_contains(bb_plugin_loader_warning_at(l, 1), "dangling.so");
    assert_contains(bb_plugin_loader_warning_at(l, 2), "no_entry.so");
    assert_contains(bb_plugin_loader_warning_at(l, 2), BB_PLUGIN_ENTRY_SYMBOL);
    assert_contains(bb_plugin_loader_warning_at(l, 3), "notes.so");
    assert_null(bb_plugin_loader_warning_at(l, 4));
    assert_int_equal(bb_plugin_loader_dir_count(l), 1);
    assert_true(bb_plugin_loader_dir_at(l, 0)->present);
    assert_int_equal(bb_plugin_loader_dir_at(l, 0)->origin, BB_PLUGIN_ORIGIN_EXPLICIT);
    bb_plugin_loader_destroy(l);
    tmpdir_remove(&d);
}

static void test_each_file_once(void **state)
{
    (void)state;
    tmpdir d;
    tmpdir_make(&d);
    tmpdir_add(&d, "a_alias.so", rplugin("example"), NULL);
    tmpdir_add(&d, "example.so", rplugin("example"), NULL);
    bb_plugin_loader *l = loader_new(BB_PLUGIN_LOADER_ONLY_EXPLICIT);
    bb_error err;
    /* the same directory twice, once with a trailing slash, and an empty entry */
    char dirs[256];
    snprintf(dirs, sizeof dirs, "%s::%s/", d.path, d.path);
    assert_int_equal(bb_plugin_loader_add_dirs(l, dirs, &err), BB_OK);
    assert_int_equal(bb_plugin_loader_scan(l, &err), BB_OK);
    assert_int_equal(bb_plugin_loader_dir_count(l), 1);
    assert_int_equal(bb_plugin_loader_plugin_count(l), 1);
    assert_int_equal(bb_plugin_loader_type_count(l), 1);
    assert_int_equal(bb_plugin_loader_warning_count(l), 0);
    const bb_loaded_plugin *first = bb_plugin_loader_plugin_at(l, 0), *again = NULL;
    /* explicit loads of the target and of the symlink return the same record */
    assert_int_equal(bb_plugin_loader_load_file(l, rplugin("example"), &again, &err), BB_OK);
    assert_ptr_equal(again, first);
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/a_alias.so", d.path);
    assert_int_equal(bb_plugin_loader_load_file(l, p, &again, &err), BB_OK);
    assert_ptr_equal(again, first);
    /* a second scan opens nothing new */
    assert_int_equal(bb_plugin_loader_scan(l, &err), BB_OK);
    assert_int_equal(bb_plugin_loader_plugin_count(l), 1);
    assert_int_equal(bb_plugin_loader_type_count(l), 1);
    bb_plugin_loader_destroy(l);
    tmpdir_remove(&d);
}

static void test_search_order(void **state)
{
    (void)state;
    tmpdir a, b;
    tmpdir_make(&a);
    tmpdir_make(&b);
    /* x.so in the explicit dir shadows x.so in BB_PLUGIN_PATH */
    tmpdir_add(&a, "x.so", rplugin("example"), NULL);
    tmpdir_add(&b, "x.so", tplugin("good2"), NULL);
    tmpdir_add(&b, "y.so", tplugin("create_fails"), NULL);
    char env[256];
    snprintf(env, sizeof env, "%s:/nonexistent/bb-plugins:", b.path);
    setenv(BB_PLUGIN_PATH_ENV, env, 1);

    bb_plugin_loader *l = loader_new(BB_PLUGIN_LOADER_NO_EXE_DIR | BB_PLUGIN_LOADER_NO_INSTALLED);
    bb_error err;
    assert_int_equal(bb_plugin_loader_add_dirs(l, a.path, &err), BB_OK);
    assert_int_equal(bb_plugin_loader_scan(l, &err), BB_OK);
    assert_int_equal(bb_plugin_loader_dir_count(l), 3);
    const bb_plugin_dir *d0 = bb_plugin_loader_dir_at(l, 0), *d1 = bb_plugin_loader_dir_at(l, 1),
                        *d2 = bb_plugin_loader_dir_at(l, 2);
    assert_int_equal(d0->origin, BB_PLUGIN_ORIGIN_EXPLICIT);
    assert_int_equal(d1->origin, BB_PLUGIN_ORIGIN_ENV);
    assert_int_equal(d2->origin, BB_PLUGIN_ORIGIN_ENV);
    assert_true(d0->present && d1->present);
    assert_false(d2->present);
    assert_string_equal(d2->path, "/nonexistent/bb-plugins");
    assert_non_null(bb_plugin_loader_find(l, "example::Counter"));
    assert_non_null(bb_plugin_loader_find(l, "test::CreateFails"));
    assert_null(bb_plugin_loader_find(l, "good2::Echo")); /* shadowed */
    assert_int_equal(bb_plugin_loader_plugin_count(l), 2);
    /* the missing BB_PLUGIN_PATH entry is a warning, not an error */
    assert_int_equal(bb_plugin_loader_warning_count(l), 1);
    assert_contains(bb_plugin_loader_warning_at(l, 0), "/nonexistent/bb-plugins");
    /* the directory list messages use, in search order */
    char dirs[1024], want_dirs[600];
    bb_plugin_loader_describe_dirs(l, dirs, sizeof dirs);
    snprintf(want_dirs, sizeof want_dirs, "searched: %s (--plugin-path), %s (BB_PLUGIN_PATH), "
             "/nonexistent/bb-plugins (BB_PLUGIN_PATH, missing)", d0->path, d1->path);
    assert_string_equal(dirs, want_dirs);
    bb_plugin_loader_describe_dirs(l, dirs, 12); /* cut, still terminated */
    assert_string_equal(dirs, "searched: /");
    bb_plugin_loader_destroy(l);

    /* NO_ENV ignores the variable */
    l = loader_new(BB_PLUGIN_LOADER_ONLY_EXPLICIT);
    assert_int_equal(bb_plugin_loader_scan(l, &err), BB_OK);
    assert_int_equal(bb_plugin_loader_dir_count(l), 0);
    assert_int_equal(bb_plugin_loader_type_count(l), 0);
    bb_plugin_loader_describe_dirs(l, dirs, sizeof dirs);
    assert_string_equal(dirs, "no plugin directory was searched");
    bb_plugin_loader_destroy(l);
    unsetenv(BB_PLUGIN_PATH_ENV);

    /* the default dirs: next to the executable (<build>/tests/..), then installed */
    l = loader_new(BB_PLUGIN_LOADER_NO_ENV);
    assert_int_equal(bb_plugin_loader_scan(l, &err), BB_OK);
    assert_true(bb_plugin_loader_dir_count(l) >= 1);
    const bb_plugin_dir *exe = bb_plugin_loader_dir_at(l, 0);
    assert_int_equal(exe->origin, BB_PLUGIN_ORIGIN_EXE);
    char want[PATH_MAX];
    snprintf(want, sizeof want, "%s/lib/bytesandbrains/plugins", g_build);
    assert_string_equal(exe->path, want);
    assert_true(exe->present);
    const bb_plugin_dir *last = bb_plugin_loader_dir_at(l, bb_plugin_loader_dir_count(l) - 1);
    assert_int_equal(last->origin, BB_PLUGIN_ORIGIN_INSTALLED);
    const bb_loaded_type *t = bb_plugin_loader_find(l, "example::Counter");
    assert_non_null(t);
    char real[PATH_MAX];
    assert_non_null(realpath(rplugin("example"), real));
    assert_string_equal(t->plugin->path, real);
    bb_plugin_loader_destroy(l);

    /* an explicit directory that does not exist is fatal */
    l = loader_new(BB_PLUGIN_LOADER_ONLY_EXPLICIT);
    assert_int_equal(bb_plugin_loader_add_dirs(l, "/nonexistent/explicit", &err), BB_OK);
    assert_int_equal(bb_plugin_loader_scan(l, &err), BB_ENOTFOUND);
    assert_contains(err.msg, "/nonexistent/explicit");
    bb_plugin_loader_destroy(l);
    tmpdir_remove(&a);
    tmpdir_remove(&b);
}

static void test_resolve_binding(void **state)
{
    (void)state;
    tmpdir d;
    tmpdir_make(&d);
    tmpdir_add(&d, "example.so", rplugin("example"), NULL);
    tmpdir_add(&d, "bad_abi.so", tplugin("bad_abi"), NULL);
    bb_plugin_loader *l = loader_new(BB_PLUGIN_LOADER_ONLY_EXPLICIT);
    bb_error err;
    assert_int_equal(bb_plugin_loader_add_dirs(l, d.path, &err), BB_OK);
    assert_int_equal(bb_plugin_loader_scan(l, &err), BB_OK);
    const bb_loaded_type *t = NULL;
    assert_int_equal(bb_plugin_loader_resolve(l, "Aggregator|example::Counter|3", "agg", &t,
                                              &err), BB_OK);
    assert_string_equal(t->type->type_name, "example::Counter");
    t = NULL;
    assert_int_equal(bb_plugin_loader_resolve(l, "AggregatorRuntime|example::Counter|3", "agg",
                                              &t, &err), BB_OK);
    assert_non_null(t);
    assert_int_equal(bb_plugin_loader_resolve(l, "example::Counter", "agg", &t, &err), BB_OK);

    /* missing: names the binding, the slot and every directory searched */
    assert_int_equal(bb_plugin_loader_resolve(l, "Aggregator|fedavg::FedAvg|7", "server_agg",
                                              &t, &err), BB_ENOTFOUND);
    assert_contains(err.msg, "Aggregator|fedavg::FedAvg|7");
    assert_contains(err.msg, "server_agg");
    assert_contains(err.msg, d.path);
    assert_contains(err.msg, "bad_abi.so"); /* the skipped file is mentioned */

    /* wrong role */
    assert_int_equal(bb_plugin_loader_resolve(l, "Backend|example::Counter|1", "compute", &t,
                                              &err), BB_ETYPE);
    assert_contains(err.msg, "Aggregator");
    assert_contains(err.msg, "Backend");
    assert_contains(err.msg, "compute");
    /* unreadable bindings */
    assert_int_equal(bb_plugin_loader_resolve(l, "Wizard|example::Counter|1", "s", &t, &err),
                     BB_EPARSE);
    assert_contains(err.msg, "Wizard");
    assert_int_equal(bb_plugin_loader_resolve(l, "Aggregator||1", "s", &t, &err), BB_EPARSE);
    assert_int_equal(bb_plugin_loader_resolve(l, "Aggregator|a|1|2", "s", &t, &err), BB_EPARSE);
    /* the triple is read by bb_binding_triple_parse: its message, after the slot */
    assert_int_equal(bb_plugin_loader_resolve(l, "Aggregator|example::Counter", "s", &t, &err),
                     BB_EPARSE);
    assert_contains(err.msg, "slot 's': binding value 'Aggregator|example::Counter': want "
                             "<role>|<TYPE_NAME>|<slot_id>");
    assert_int_equal(bb_plugin_loader_resolve(l, "Aggregator|example::Counter|-1", "s", &t, &err),
                     BB_EPARSE);
    assert_contains(err.msg, "slot_id is not a decimal number");
    assert_int_equal(bb_plugin_loader_resolve(l, "", "s", &t, &err), BB_EPARSE);
    assert_int_equal(bb_plugin_loader_resolve(l, NULL, "s", &t, &err), BB_EINVAL);
    bb_plugin_loader_destroy(l);

    /* with every default directory: the message lists each one */
    setenv(BB_PLUGIN_PATH_ENV, d.path, 1);
    l = loader_new(0);
    assert_int_equal(bb_plugin_loader_scan(l, &err), BB_OK);
    assert_int_equal(bb_plugin_loader_resolve(l, "Model|nope::Nope|2", "m", &t, &err),
                     BB_ENOTFOUND);
    assert_contains(err.msg, d.path);
    assert_contains(err.msg, "lib/bytesandbrains/plugins (next to the executable");
    assert_contains(err.msg, BB_PLUGIN_DIR_INSTALLED);
    unsetenv(BB_PLUGIN_PATH_ENV);
    bb_plugin_loader_destroy(l);
    tmpdir_remove(&d);
}

/* ---- the example plugin, end to end ------------------------------------------------------ */

typedef struct fake_ctx {
    bb_ctx base;
    int logs;
} fake_ctx;

static const char *fake_slot(bb_ctx *ctx)
{
    (void)ctx;
    return "agg";
}

static void fake_log(bb_ctx *ctx, bb_log_level level, const char *msg)
{
    (void)level, (void)msg;
    ((fake_ctx *)ctx)->logs++;
}

static const bb_ctx_api FAKE_API = {
    .struct_size = sizeof(bb_ctx_api),
    .log = fake_log,
    .slot = fake_slot,
};

typedef struct example_rig {
    bb_plugin_loader *l;
    const bb_component_type *t;
    fake_ctx ctx;
} example_rig;

static void rig_open(example_rig *r)
{
    bb_error err;
    r->l = loader_new(BB_PLUGIN_LOADER_ONLY_EXPLICIT);
    assert_int_equal(bb_plugin_loader_load_file(r->l, rplugin("example"), NULL, &err), BB_OK);
    const bb_loaded_type *lt = bb_plugin_loader_find(r->l, "example::Counter");
    assert_non_null(lt);
    r->t = lt->type;
    r->ctx.base.api = &FAKE_API;
}

static void *rig_create(example_rig *r)
{
    bb_create_args args = {.struct_size = sizeof args, .slot = "agg", .seed = 7,
                           .ctx = &r->ctx.base};
    void *inst = NULL;
    bb_error err;
    assert_int_equal(r->t->create(&args, &inst, &err), BB_OK);
    assert_non_null(inst);
    return inst;
}

/* Dispatch op_type with one input; returns the result and fills *out. */
static bb_dispatch_result rig_call(example_rig *r, void *inst, const char *op_type,
                                   bb_value *in, bb_value **out, bb_error *err)
{
    uint32_t idx;
    const char *dom = "ai.bytesandbrains.role.aggregator";
    assert_non_null(bb_component_type_find_op(r->t, dom, op_type, &idx));
    bb_value *inputs[1] = {in};
    bb_dispatch_call call = {.domain = dom, .op_type = op_type, .op_index = idx,
                             .inputs = inputs, .n_inputs = 1, .n_outputs = 1};
    *out = NULL;
    bb_error_clear(err);
    return r->t->dispatch(inst, &r->ctx.base, &call, out, err);
}

static bb_value *f32_tensor(const float *x, int64_t rows, int64_t cols)
{
    int64_t dims[2] = {rows, cols};
    bb_value *v = bb_value_tensor_copy(BB_DT_FLOAT, 2, dims, x,
                                       (size_t)(rows * cols) * sizeof(float));
    assert_non_null(v);
    return v;
}

static void assert_tensor(const bb_value *v, const float *want, size_t n)
{
    assert_non_null(v);
    assert_int_equal(v->type->kind, BB_VK_TENSOR);
    assert_int_equal(v->u.tensor.dtype, BB_DT_FLOAT);
    assert_int_equal(bb_tensor_numel(v), n);
    const float *got = bb_tensor_f32(v);
    for (size_t i = 0; i < n; i++)
        assert_float_equal(got[i], want[i], 1e-6);
}

static void test_example_end_to_end(void **state)
{
    (void)state;
    example_rig r = {0};
    rig_open(&r);
    void *inst = rig_create(&r);
    bb_error err;
    bb_value *out = NULL, *trig = bb_value_trigger();
    assert_non_null(trig);

    /* nothing contributed yet */
    assert_int_equal(rig_call(&r, inst, "Aggregate", trig, &out, &err), BB_DISPATCH_NOW_ERR);
    assert_int_equal(err.code, BB_ESTATE);
    assert_contains(err.msg, "example::Counter");
    assert_null(out);

    const float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {3, 4, 5, 6, 7, 8};
    bb_value *ta = f32_tensor(a, 2, 3), *tb = f32_tensor(b, 2, 3);
    assert_int_equal(rig_call(&r, inst, "Contribute", ta, &out, &err), BB_DISPATCH_NOW_OK);
    assert_ptr_equal(out->type, &BB_TYPE_COMMAND_ID);
    assert_int_equal(out->u.u64, 1);
    bb_value_unref(out);
    assert_int_equal(rig_call(&r, inst, "Contribute", tb, &out, &err), BB_DISPATCH_NOW_OK);
    assert_int_equal(out->u.u64, 2);
    bb_value_unref(out);

    /* a different shape or dtype is refused and changes nothing */
    bb_value *wrong = f32_tensor(a, 3, 2);
    assert_int_equal(rig_call(&r, inst, "Contribute", wrong, &out, &err), BB_DISPATCH_NOW_ERR);
    assert_int_equal(err.code, BB_ETYPE);
    assert_int_equal(rig_call(&r, inst, "Contribute", trig, &out, &err), BB_DISPATCH_NOW_ERR);
    assert_int_equal(err.code, BB_ETYPE);
    bb_value_unref(wrong);

    const float mean[6] = {2, 3, 4, 5, 6, 7}, sum[6] = {4, 6, 8, 10, 12, 14};
    bb_value *agg1 = NULL, *cur1 = NULL;
    assert_int_equal(rig_call(&r, inst, "Aggregate", trig, &agg1, &err), BB_DISPATCH_NOW_OK);
    assert_tensor(agg1, mean, 6);
    assert_int_equal(agg1->u.tensor.ndim, 2);
    assert_int_equal(agg1->u.tensor.dims[0], 2);
    assert_int_equal(agg1->u.tensor.dims[1], 3);
    assert_int_equal(rig_call(&r, inst, "CurrentTensor", trig, &cur1, &err),
                     BB_DISPATCH_NOW_OK);
    assert_tensor(cur1, sum, 6);

    /* snapshot, destroy, restore into a new instance: same results */
    uint8_t *snap = NULL;
    size_t snap_len = 0;
    assert_int_equal(r.t->snapshot(inst, &snap, &snap_len, &err), BB_OK);
    assert_true(snap_len > 16);
    r.t->destroy(inst);
    void *inst2 = rig_create(&r);
    assert_int_equal(r.t->restore(inst2, snap, snap_len, &err), BB_OK);
    bb_value *agg2 = NULL, *cur2 = NULL;
    assert_int_equal(rig_call(&r, inst2, "Aggregate", trig, &agg2, &err), BB_DISPATCH_NOW_OK);
    assert_true(bb_value_equal(agg1, agg2));
    assert_int_equal(rig_call(&r, inst2, "CurrentTensor", trig, &cur2, &err),
                     BB_DISPATCH_NOW_OK);
    assert_true(bb_value_equal(cur1, cur2));
    /* and the restored count continues */
    assert_int_equal(rig_call(&r, inst2, "Contribute", ta, &out, &err), BB_DISPATCH_NOW_OK);
    assert_int_equal(out->u.u64, 3);
    bb_value_unref(out);

    /* every truncation and a few corruptions of the snapshot are refused cleanly,
     * leaving the instance as it was */
    void *inst3 = rig_create(&r);
    for (size_t n = 0; n < snap_len; n++) {
        uint8_t *cut = malloc(n ? n : 1);
        assert_non_null(cut);
        memcpy(cut, snap, n);
        assert_int_equal(r.t->restore(inst3, cut, n, &err), BB_EDECODE);
        free(cut);
    }
    uint8_t *bad = malloc(snap_len + 4);
    memcpy(bad, snap, snap_len);
    memset(bad + snap_len, 0, 4);
    assert_int_equal(r.t->restore(inst3, bad, snap_len + 4, &err), BB_EDECODE);
    memcpy(bad, snap, snap_len);
    bad[12] = 200; /* ndim */
    assert_int_equal(r.t->restore(inst3, bad, snap_len, &err), BB_EDECODE);
    memcpy(bad, snap, snap_len);
    for (int i = 16; i < 24; i++)
        bad[i] = 0xff; /* dims[0] = -1 */
    assert_int_equal(r.t->restore(inst3, bad, snap_len, &err), BB_EDECODE);
    free(bad);
    assert_int_equal(rig_call(&r, inst3, "CurrentTensor", trig, &out, &err),
                     BB_DISPATCH_NOW_ERR);

    /* an empty instance round-trips too */
    uint8_t *empty = NULL;
    size_t empty_len = 0;
    assert_int_equal(r.t->snapshot(inst3, &empty, &empty_len, &err), BB_OK);
    assert_int_equal(r.t->restore(inst2, empty, empty_len, &err), BB_OK);
    assert_int_equal(rig_call(&r, inst2, "Aggregate", trig, &out, &err), BB_DISPATCH_NOW_ERR);
    free(empty);

    /* an op index the type never declared */
    bb_value *inputs[1] = {trig};
    bb_dispatch_call call = {.op_type = "Nope", .op_index = 17, .inputs = inputs,
                             .n_inputs = 1, .n_outputs = 1};
    assert_int_equal(r.t->dispatch(inst2, &r.ctx.base, &call, &out, &err),
                     BB_DISPATCH_NOW_ERR);
    assert_int_equal(err.code, BB_EUNSUPPORTED);

    free(snap);
    bb_value_unref(agg1);
    bb_value_unref(agg2);
    bb_value_unref(cur1);
    bb_value_unref(cur2);
    bb_value_unref(ta);
    bb_value_unref(tb);
    bb_value_unref(trig);
    r.t->destroy(inst2);
    r.t->destroy(inst3);
    bb_plugin_loader_destroy(r.l);
}

/* ---- bbc plugins ------------------------------------------------------------------------- */

static char *read_file(const char *path);

/* Run `bbc plugins ARGS` with stdout in a temp file; returns its status. */
static int run_bbc_plugins(int argc, char **argv, char **out)
{
    char path[] = "/tmp/bb-plugins-out.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stdout);
    int saved = dup(1);
    assert_true(saved >= 0);
    assert_true(dup2(fd, 1) >= 0);
    int status = bbc_cmd_plugins(argc, argv);
    fflush(stdout);
    assert_true(dup2(saved, 1) >= 0);
    close(saved);
    close(fd);
    *out = read_file(path);
    assert_non_null(*out);
    unlink(path);
    return status;
}

static void test_bbc_plugins(void **state)
{
    (void)state;
    tmpdir d;
    tmpdir_make(&d);
    tmpdir_add(&d, "example.so", rplugin("example"), NULL);
    tmpdir_add(&d, "cpu.so", rplugin("cpu"), NULL);
    tmpdir_add(&d, "good2.so", tplugin("good2"), NULL);
    tmpdir_add(&d, "no_entry.so", tplugin("no_entry"), NULL);
    unsetenv(BB_PLUGIN_PATH_ENV);
    char *out = NULL;

    char *argv_text[] = {"plugins", "--plugin-path", d.path, NULL};
    assert_int_equal(run_bbc_plugins(3, argv_text, &out), 0);
    assert_contains(out, "example::Counter\n    role:      Aggregator\n");
    assert_contains(out, "cpu::CpuBackend\n    role:      Backend\n");
    assert_contains(out, "opset:     ai.onnx v");
    assert_contains(out, "Gemm(A: tensor, B: tensor, C?: tensor) -> (Y: tensor)");
    assert_contains(out, "Loop(M?: tensor_i64, cond?: tensor_bool, v_initial?...: any)");
    assert_contains(out, "threads: int = 1");
    assert_contains(out, "provides:  materialize_from_wire");
    assert_contains(out, "Contribute(contribution: tensor_f32) -> (cmd: CommandId)");
    assert_contains(out, "Echo(payload: Bytes) -> (payload: Bytes)");
    assert_contains(out, "Backend = \"compute\"");
    assert_contains(out, "limit: int (required)");
    assert_contains(out, "provides:  snapshot, restore");
    free(out);

    char dirarg[128];
    snprintf(dirarg, sizeof dirarg, "--plugin-path=%s", d.path);
    char *argv_json[] = {"plugins", "--json", dirarg, NULL};
    assert_int_equal(run_bbc_plugins(3, argv_json, &out), 0);
    cJSON *root = cJSON_Parse(out);
    assert_non_null(root);
    cJSON *types = cJSON_GetObjectItem(root, "types");
    assert_true(cJSON_IsArray(types));
    cJSON *echo = NULL, *t;
    cJSON_ArrayForEach(t, types)
    {
        if (strcmp(cJSON_GetObjectItem(t, "type_name")->valuestring, "good2::Echo") == 0)
            echo = t;
    }
    assert_non_null(echo);
    assert_string_equal(cJSON_GetObjectItem(echo, "role")->valuestring, "Protocol");
    assert_contains(cJSON_GetObjectItem(echo, "file")->valuestring, "good2.so");
    cJSON *op = cJSON_GetArrayItem(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(echo, "opsets"), 0), "ops"), 0);
    assert_string_equal(cJSON_GetObjectItem(op, "op_type")->valuestring, "Echo");
    cJSON *in0 = cJSON_GetArrayItem(cJSON_GetObjectItem(op, "inputs"), 0);
    assert_string_equal(cJSON_GetObjectItem(in0, "name")->valuestring, "payload");
    assert_string_equal(cJSON_GetObjectItem(in0, "type")->valuestring, "Bytes");
    cJSON *dep = cJSON_GetArrayItem(cJSON_GetObjectItem(echo, "dependencies"), 0);
    assert_string_equal(cJSON_GetObjectItem(dep, "role")->valuestring, "Backend");
    assert_string_equal(cJSON_GetObjectItem(dep, "slot")->valuestring, "compute");
    cJSON *cfg = cJSON_GetArrayItem(cJSON_GetObjectItem(echo, "config"), 0);
    assert_string_equal(cJSON_GetObjectItem(cfg, "key")->valuestring, "prefix");
    assert_string_equal(cJSON_GetObjectItem(cfg, "default")->valuestring, "");
    cJSON *warnings = cJSON_GetObjectItem(root, "warnings");
    assert_int_equal(cJSON_GetArraySize(warnings), 1);
    assert_contains(cJSON_GetArrayItem(warnings, 0)->valuestring, "no_entry.so");
    cJSON_Delete(root);
    free(out);

    /* bad usage is 2, a search error 1 */
    char *argv_bad[] = {"plugins", "--frobnicate", NULL};
    assert_int_equal(run_bbc_plugins(2, argv_bad, &out), 2);
    free(out);
    char *argv_missing[] = {"plugins", "--plugin-path", "/nonexistent/dir", NULL};
    assert_int_equal(run_bbc_plugins(3, argv_missing, &out), 1);
    free(out);
    tmpdir_remove(&d);
}

/* ---- the man page carries the example verbatim ------------------------------------------ */

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

/* Undo the escapes scripts/man-example applies. */
static void roff_unescape(const char *in, size_t n, char *out)
{
    static const struct { const char *esc; char c; } MAP[] = {
        {"\\e", '\\'}, {"\\-", '-'}, {"\\(aq", '\''}, {"\\(ga", '`'},
        {"\\(ha", '^'}, {"\\(ti", '~'}, {"\\&", 0},
    };
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        bool done = false;
        for (size_t k = 0; in[i] == '\\' && k < sizeof MAP / sizeof MAP[0]; k++) {
            size_t el = strlen(MAP[k].esc);
            if (i + el <= n && strncmp(in + i, MAP[k].esc, el) == 0) {
                if (MAP[k].c)
                    out[o++] = MAP[k].c;
                i += el;
                done = true;
                break;
            }
        }
        if (!done)
            out[o++] = in[i++];
    }
    out[o] = '\0';
}

/* bbc plugins lists what loads and reports the refused plugin. */
static void test_bbc_plugins_wrong_layout(void **state)
{
    (void)state;
    tmpdir d;
    tmpdir_make(&d);
    tmpdir_add(&d, "example.so", rplugin("example"), NULL);
    tmpdir_add(&d, "wrong_layout.so", tplugin("wrong_layout"), NULL);
    unsetenv(BB_PLUGIN_PATH_ENV);
    char dirarg[128];
    snprintf(dirarg, sizeof dirarg, "--plugin-path=%s", d.path);
    char *argv_json[] = {"plugins", "--json", dirarg, NULL};
    char *out = NULL;
    assert_int_equal(run_bbc_plugins(3, argv_json, &out), 0);
    cJSON *root = cJSON_Parse(out);
    assert_non_null(root);
    bool example = false, wrong = false;
    cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(root, "types"))
    {
        const char *name = cJSON_GetObjectItem(t, "type_name")->valuestring;
        example |= strcmp(name, "example::Counter") == 0;
        wrong |= strncmp(name, "wrong_layout::", 14) == 0;
    }
    assert_true(example);
    assert_false(wrong);
    cJSON *warnings = cJSON_GetObjectItem(root, "warnings");
    assert_int_equal(cJSON_GetArraySize(warnings), 1);
    const char *w = cJSON_GetArrayItem(warnings, 0)->valuestring;
    assert_contains(w, "wrong_layout.so");
    assert_contains(w, "built against another value layout");
    cJSON_Delete(root);
    free(out);
    tmpdir_remove(&d);
}

static void test_man_page_has_example(void **state)
{
    (void)state;
    /* tests run from the source root; fall back to <build>/.. */
    char man_path[PATH_MAX], src_path[PATH_MAX];
    const char *root = ".";
    char parent[sizeof g_build + 8];
    if (access("man/bb-plugin.7", R_OK) != 0) {
        snprintf(parent, sizeof parent, "%s/..", g_build);
        root = parent;
    }
    snprintf(man_path, sizeof man_path, "%s/man/bb-plugin.7", root);
    snprintf(src_path, sizeof src_path, "%s/plugins/example/example.c", root);
    char *man = read_file(man_path), *src = read_file(src_path);
    assert_non_null(man);
    assert_non_null(src);
    const char *begin_mark = ".\\\" BEGIN plugins/example/example.c\n";
    const char *end_mark = ".\\\" END plugins/example/example.c\n";
    char *b = strstr(man, begin_mark), *e = strstr(man, end_mark);
    assert_non_null(b);
    assert_non_null(e);
    b += strlen(begin_mark);
    assert_true(e >= b);
    char *got = malloc((size_t)(e - b) + 1);
    assert_non_null(got);
    roff_unescape(b, (size_t)(e - b), got);
    if (strcmp(got, src) != 0) {
        size_t i = 0;
        while (got[i] && got[i] == src[i])
            i++;
        fail_msg("man/bb-plugin.7 differs from plugins/example/example.c at byte %zu; "
                 "run scripts/man-example", i);
    }
    /* and it documents the essentials */
    assert_contains(man, BB_PLUGIN_ENTRY_SYMBOL);
    assert_contains(man, BB_STAGE_ENTRY_SYMBOL);
    assert_contains(man, "BB_PLUGIN_PATH");
    assert_contains(man, "\\-fvisibility=hidden");
    free(got);
    free(man);
    free(src);
}

/* clash_a.so and clash_b.so both export bb_test_clash_value (1 and 2) and
 * call it from create. Loaded by the loader (RTLD_LOCAL) each binds to its
 * own; the control, loaded RTLD_GLOBAL in a child process, shows the clash
 * the loader avoids. */
static int clash_value(const bb_component_type *t)
{
    void *inst = NULL;
    bb_create_args args = {.struct_size = sizeof args, .slot = "s"};
    bb_error err;
    assert_int_equal(t->create(&args, &inst, &err), BB_OK);
    t->destroy(inst);
    return (int)(intptr_t)inst;
}

static void test_symbols_stay_local(void **state)
{
    (void)state;
    bb_plugin_loader *l = loader_new(BB_PLUGIN_LOADER_ONLY_EXPLICIT);
    bb_error err;
    assert_int_equal(bb_plugin_loader_load_file(l, tplugin("clash_a"), NULL, &err), BB_OK);
    assert_int_equal(bb_plugin_loader_load_file(l, tplugin("clash_b"), NULL, &err), BB_OK);
    assert_int_equal(clash_value(bb_plugin_loader_find(l, "clash::A")->type), 1);
    assert_int_equal(clash_value(bb_plugin_loader_find(l, "clash::B")->type), 2);
    bb_plugin_loader_destroy(l);

    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        void *a = dlopen(tplugin("clash_a"), RTLD_NOW | RTLD_GLOBAL);
        void *b = dlopen(tplugin("clash_b"), RTLD_NOW | RTLD_GLOBAL);
        if (!a || !b)
            _exit(3);
        bb_plugin_entry_fn eb = (bb_plugin_entry_fn)(uintptr_t)dlsym(b, BB_PLUGIN_ENTRY_SYMBOL);
        const bb_component_type *tb = eb()->types[0];
        void *inst = NULL;
        bb_create_args args = {.struct_size = sizeof args, .slot = "s"};
        bb_error e;
        if (tb->create(&args, &inst, &e) != BB_OK)
            _exit(4);
        _exit((int)(intptr_t)inst); /* 1: B bound to A's function */
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 1);
}

int main(void)
{
    find_build_dir();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roles),
        cmocka_unit_test(test_find_op),
        cmocka_unit_test(test_load_example_and_good2),
        cmocka_unit_test(test_stages_only_then_plugin),
        cmocka_unit_test(test_bad_abi),
        cmocka_unit_test(test_wrong_layout),
        cmocka_unit_test(test_no_entry),
        cmocka_unit_test(test_duplicate_type_files),
        cmocka_unit_test(test_duplicate_type_in_dir),
        cmocka_unit_test(test_create_fails),
        cmocka_unit_test(test_scan_warnings),
        cmocka_unit_test(test_each_file_once),
        cmocka_unit_test(test_symbols_stay_local),
        cmocka_unit_test(test_search_order),
        cmocka_unit_test(test_resolve_binding),
        cmocka_unit_test(test_example_end_to_end),
        cmocka_unit_test(test_bbc_plugins),
        cmocka_unit_test(test_bbc_plugins_wrong_layout),
        cmocka_unit_test(test_man_page_has_example),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
