/* Robustness of libbbir's parsers and builders against hostile bytes and
 * failing allocations:
 *
 *   - a bounded, deterministic fuzz over bb_model_load_mem seeded with the
 *     recorded example models (testdata/split_learning.onnx,
 *     testdata/federated.onnx): every mutation loads cleanly or is refused
 *     with a parse/limit error naming the input; whatever loads also saves,
 *     reloads, dumps and validates against the catalogs without a crash;
 *   - allocation-failure sweeps (SQLite-style: fail the Nth allocation, for
 *     every N until the operation no longer allocates that often) over
 *     loading, saving, recording + building a module, and decoding a wire
 *     value: each run ends in BB_OK or BB_ENOMEM, never a crash, and leaves
 *     no block behind.
 *
 * The sweeps count and fail allocations through support/alloc_fail.h,
 * which interposes malloc and friends in this executable. Where another
 * allocator wins (AddressSanitizer in a SAN=1 build, valgrind's
 * replacement) the sweeps are skipped and the fuzz still runs. Paths are
 * relative to the repository root, where scripts/run-tests runs every test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bb/model_io.h"
#include "bb/opsets.h"
#include "bb/recorder.h"
#include "bb/value.h"

#include "support/alloc_fail.h"

static const char *const EXAMPLES[] = {"testdata/split_learning.onnx", "testdata/federated.onnx"};
#define N_EXAMPLES (sizeof EXAMPLES / sizeof EXAMPLES[0])

/* ---- allocation failure sweeps (support/alloc_fail.h) -------------------------- */

#if AF_ACTIVE
/* Runs op(arg) with the Nth allocation failing, for N = 1, 2, ... until a
 * run makes fewer than N allocations. Every run must return BB_OK or
 * BB_ENOMEM, and (after its own cleanup inside op) leave af_live as it
 * found it. Returns the number of failing runs. */
static long sweep(const char *what, int (*op)(void *arg, bb_error *err), void *arg)
{
    long runs = 0;
    for (long n = 1;; n++) {
        bb_error err = {0};
        long before = af_live;
        af_arm(n);
        int rc = op(arg, &err);
        bool failed_one = af_failed;
        af_arm(0);
        if (rc != BB_OK && rc != BB_ENOMEM)
            fail_msg("%s, allocation %ld failing: %s (%s), want ENOMEM", what, n,
                     bb_status_name(rc), err.msg);
        if (failed_one && rc == BB_OK)
            print_message("note: %s succeeded despite allocation %ld failing\n", what, n);
        if (af_live != before)
            fail_msg("%s, allocation %ld failing: %ld block(s) leaked (rc %s: %s)", what, n,
                     af_live - before, bb_status_name(rc), err.msg);
        if (!failed_one) {
            assert_int_equal(rc, BB_OK); /* the full run, nothing injected */
            break;
        }
        runs++;
        if (rc == BB_ENOMEM && !strstr(err.msg, "out of memory"))
            fail_msg("%s, allocation %ld failing: ENOMEM without saying so: %s", what, n,
                     err.msg);
    }
    return runs;
}
#endif /* AF_ACTIVE */

/* ---- helpers ----------------------------------------------------------------------- */

static uint8_t *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s (run the tests from the repository root, after make)", path);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long len = ftell(f);
    assert_true(len > 0);
    rewind(f);
    uint8_t *b = malloc((size_t)len);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

/* Validate every node that has a catalog schema (must not crash; the
 * verdict does not matter for mutated input). */
static void check_nodes_against_catalogs(const bb_model *m)
{
    for (size_t i = 0; i < m->functions.n; i++) {
        const bb_function *f = m->functions.v[i];
        for (size_t j = 0; j < f->nodes.n; j++) {
            const bb_node *n = f->nodes.v[j];
            const bb_op_schema *s = bb_op_schema_find(n->domain, n->op_type);
            bb_error err = {0};
            if (s && bb_op_schema_check_node(s, n, &err) != BB_OK)
                assert_int_equal(err.code, BB_EVALIDATE);
        }
    }
}

/* ---- the fuzz over the example models ---------------------------------------------- */

static void fuzz_one(const char *path, unsigned iterations)
{
    size_t seed_n;
    uint8_t *seed = read_file(path, &seed_n);
    bb_model *m = NULL;
    bb_error err = {0};
    if (bb_model_load_mem(seed, seed_n, path, &m, &err))
        fail_msg("%s does not load: %s", path, err.msg);
    check_nodes_against_catalogs(m);
    bb_model_free(m);

    FILE *devnull = fopen("/dev/null", "w");
    assert_non_null(devnull);
    size_t cap = seed_n + 64;
    uint8_t *buf = malloc(cap);
    assert_non_null(buf);
    unsigned loaded = 0, rejected = 0;
    for (unsigned iter = 0; iter < iterations; iter++) {
        size_t n = seed_n;
        memcpy(buf, seed, seed_n);
        switch (rnd() % 4) {
        case 0: /* flip a few bytes */
            for (unsigned k = 1 + rnd() % 4; k; k--)
                buf[rnd() % n] ^= (uint8_t)(1 + rnd() % 255);
            break;
        case 1: /* cut the tail */
            n = rnd() % seed_n;
            break;
        case 2: { /* splice a stretch of the model over another place */
            size_t len = 1 + rnd() % 32, from = rnd() % (seed_n - len), to = rnd() % (seed_n - len);
            memmove(buf + to, seed + from, len);
            break;
        }
        default: { /* insert random bytes */
            size_t at = rnd() % seed_n, k = 1 + rnd() % 32;
            memcpy(buf + at + k, seed + at, seed_n - at);
            for (size_t i = 0; i < k; i++)
                buf[at + i] = (uint8_t)rnd();
            n = seed_n + k;
            break;
        }
        }
        m = NULL;
        int rc = bb_model_load_mem(buf, n, path, &m, &err);
        if (rc != BB_OK) {
            if (rc != BB_EPARSE && rc != BB_ETRUNC && rc != BB_ELIMIT)
                fail_msg("%s iteration %u: %s (%s)", path, iter, bb_status_name(rc), err.msg);
            assert_null(m);
            /* "<file>: <what is wrong>" */
            if (strncmp(err.msg, path, strlen(path)) != 0 ||
                strncmp(err.msg + strlen(path), ": ", 2) != 0 || !err.msg[strlen(path) + 2])
                fail_msg("%s iteration %u: message does not name the input: %s", path, iter,
                         err.msg);
            rejected++;
            continue;
        }
        loaded++;
        bb_model_dump(m, devnull);
        bb_model_dump_json(m, devnull);
        check_nodes_against_catalogs(m);
        uint8_t *out = NULL;
        size_t out_n = 0;
        if (bb_model_save_mem(m, &out, &out_n, &err))
            fail_msg("%s iteration %u: a loaded model does not save: %s", path, iter, err.msg);
        bb_model *again = NULL;
        if (bb_model_load_mem(out, out_n, "resaved", &again, &err))
            fail_msg("%s iteration %u: the saved model does not reload: %s", path, iter,
                     err.msg);
        bb_model_free(again);
        free(out);
        bb_model_free(m);
    }
    /* the mutations reach both outcomes */
    if (loaded < iterations / 20 || rejected < iterations / 4)
        fail_msg("%s: %u loaded, %u rejected of %u", path, loaded, rejected, iterations);
    fclose(devnull);
    free(buf);
    free(seed);
}

static void test_fuzz_example_models(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_EXAMPLES; i++)
        fuzz_one(EXAMPLES[i], 3000);
}

/* ---- allocation-failure sweeps ------------------------------------------------------ */

#if AF_ACTIVE
typedef struct bytes {
    const uint8_t *p;
    size_t n;
} bytes;

static int op_load(void *arg, bb_error *err)
{
    const bytes *b = arg;
    bb_model *m = NULL;
    int rc = bb_model_load_mem(b->p, b->n, "example", &m, err);
    if (rc == BB_OK)
        bb_model_free(m);
    else
        assert_null(m);
    return rc;
}

static int op_save(void *arg, bb_error *err)
{
    uint8_t *out = NULL;
    size_t n = 0;
    int rc = bb_model_save_mem(arg, &out, &n, err);
    free(out);
    return rc;
}

static int op_type_protos(void *arg, bb_error *err)
{
    /* TypeProto of every node of the type tree (allocates in an arena) */
    bb_arena *a = bb_arena_create();
    if (!a)
        return bb_error_set(err, BB_ENOMEM, "arena: out of memory");
    int rc = BB_OK;
    for (size_t i = 0; i < bb_type_count() && rc == BB_OK; i++)
        if (!bb_type_to_proto(a, bb_type_at(i)))
            rc = bb_error_set(err, BB_ENOMEM, "type proto: out of memory");
    bb_arena_destroy(a);
    (void)arg;
    return rc;
}

/* A small recording touching slots, calls, scopes, bootstrap, bundles. */
static int op_record(void *arg, bb_error *err)
{
    (void)arg;
    bb_recorder *r = bb_recorder_new("user.app");
    if (!r)
        return bb_error_set(err, BB_ENOMEM, "recorder: out of memory");
    bb_module *child = bb_rec_module(r, "Child");
    bb_rec *cg = bb_module_body(child);
    bb_val q = bb_rec_input(cg, "q", &BB_TYPE_TENSOR_F32);
    bb_rec_output(cg, "r", bb_sys_pass_through(cg, q));

    bb_module *root = bb_rec_class_module(r, "Server");
    bb_slot *model = bb_rec_concrete(root, BB_ROLE_MODEL, "model", "nn::Mlp",
                                     "{\"layers\":[4,2]}", NULL);
    bb_slot *sel = bb_rec_generic(root, BB_ROLE_PEER_SELECTOR, "selector");
    bb_rec *g = bb_module_body(root);
    bb_rec_scope_begin(g, "round");
    bb_val tick = bb_sys_interval(g, 1000000);
    bb_val params = bb_role_model_params(g, model);
    bb_call *c = bb_rec_call(g, child);
    bb_call_input(c, "q", params);
    bb_call_build(c);
    bb_val parts[] = {bb_call_output(c, "r"), tick};
    bb_val bundle = bb_rec_bundle(g, parts, 2);
    bb_val peers = bb_role_peer_selector_sample(g, sel, 3, "Client");
    bb_rec_net_out(g, "params", peers, bundle);
    bb_rec_scope_end(g);
    bb_rec *boot = bb_module_bootstrap(root);
    bb_sys_record(boot, bb_rec_input(boot, "seed", &BB_TYPE_BYTES), "seed");

    bb_model *m = NULL;
    int rc = bb_recorder_build(r, root, &m, err);
    bb_recorder_free(r);
    if (rc == BB_ERECORD && strstr(err->msg, "out of memory"))
        rc = BB_ENOMEM; /* the recorder reports OOM as its first recording error */
    bb_model_free(m);
    return rc;
}

static int op_value_decode(void *arg, bb_error *err)
{
    const bytes *b = arg;
    bb_value *v = NULL;
    int rc = bb_value_decode(BB_TYPE_COMPOSITE.wire_hash, b->p, b->n, NULL, &v, err);
    if (rc == BB_OK) {
        /* and encode it back */
        uint8_t *out = NULL;
        size_t n = 0;
        rc = bb_value_encode(v, &out, &n, err);
        free(out);
        bb_value_unref(v);
    }
    return rc;
}

static void test_alloc_fail_load_save(void **state)
{
    (void)state;
    if (!af_interposed())
        skip(); /* valgrind or a sanitizer owns malloc */
    for (size_t i = 0; i < N_EXAMPLES; i++) {
        bytes b;
        uint8_t *data = read_file(EXAMPLES[i], &b.n);
        b.p = data;
        long runs = sweep(EXAMPLES[i], op_load, &b);
        print_message("%s: %ld allocations failed in turn while loading\n", EXAMPLES[i], runs);
        assert_true(runs > 0);
        bb_model *m = NULL;
        bb_error err = {0};
        assert_int_equal(bb_model_load_mem(b.p, b.n, EXAMPLES[i], &m, &err), BB_OK);
        runs = sweep("save", op_save, m);
        assert_true(runs > 0);
        bb_model_free(m);
        free(data);
    }
    assert_true(sweep("type protos", op_type_protos, NULL) > 0);
}

static void test_alloc_fail_record(void **state)
{
    (void)state;
    if (!af_interposed())
        skip(); /* valgrind or a sanitizer owns malloc */
    long runs = sweep("record and build", op_record, NULL);
    print_message("%ld allocations failed in turn while recording\n", runs);
    assert_true(runs > 2);
}

static void test_alloc_fail_value_decode(void **state)
{
    (void)state;
    if (!af_interposed())
        skip(); /* valgrind or a sanitizer owns malloc */
    /* a composite of a tensor, a PeerId vector, a nested composite and a
     * response batch */
    bb_value *peers[2] = {bb_value_bytes(&BB_TYPE_PEER_ID, "alice", 5),
                          bb_value_bytes(&BB_TYPE_PEER_ID, "bob", 3)};
    bb_value *inner_items[1] = {bb_value_u64(&BB_TYPE_TIMESTAMP, 42)};
    bb_value *resp[1] = {bb_value_trigger()};
    bb_value *resp_peer[1] = {bb_value_bytes(&BB_TYPE_PEER_ID, "carol", 5)};
    bb_value *items[4] = {
        bb_value_tensor_copy(BB_DT_FLOAT, 1, (int64_t[]){3}, (float[]){1, 2, 3}, 12),
        bb_value_list(&BB_TYPE_PEER_ID_VEC, peers, 2),
        bb_value_list(&BB_TYPE_COMPOSITE, inner_items, 1),
        bb_value_response_batch(resp, resp_peer, 1),
    };
    bb_value *v = bb_value_list(&BB_TYPE_COMPOSITE, items, 4);
    assert_non_null(v);
    uint8_t *enc = NULL;
    bytes b;
    assert_int_equal(bb_value_encode(v, &enc, &b.n, NULL), BB_OK);
    bb_value_unref(v);
    b.p = enc;
    assert_true(sweep("composite decode", op_value_decode, &b) > 5);
    free(enc);
}
#else
static void test_alloc_fail_load_save(void **state)
{
    (void)state;
    skip(); /* AddressSanitizer owns malloc in this build */
}
static void test_alloc_fail_record(void **state)
{
    (void)state;
    skip();
}
static void test_alloc_fail_value_decode(void **state)
{
    (void)state;
    skip();
}
#endif

int main(void)
{
    bb__value_cache_limit(0); /* every value is a malloc the sweeps can fail */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fuzz_example_models),
        cmocka_unit_test(test_alloc_fail_load_save),
        cmocka_unit_test(test_alloc_fail_record),
        cmocka_unit_test(test_alloc_fail_value_decode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
