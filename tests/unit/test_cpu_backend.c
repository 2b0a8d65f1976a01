/*
 * Unit tests for the cpu::CpuBackend plugin, loaded with dlopen from
 * $BB_BUILD/lib/bytesandbrains/plugins/cpu.so (BB_BUILD defaults to the
 * build directory this binary sits in). Every op is checked against
 * hand-computed values for its ordinary case and each attribute, plus
 * broadcasting, empty and zero-size tensors and error cases; then the
 * whole-graph executor (an MLP against a naive reference, If/Loop with
 * outer-scope names), materialize_from_wire and the declarations against
 * the ai.onnx catalog of bb/opsets.h.
 *
 * Values made by the helpers and outputs of run() go to a pool released
 * after each test, so the tests read as data.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bb/arena.h"
#include "bb/ir.h"
#include "bb/meta.h"
#include "bb/model_io.h"
#include "bb/opsets.h"
#include "bb/plugin.h"
#include "bb/value.h"
#include "examples/cnn/cnn_graph.h"

/* ---- fixture ---------------------------------------------------------------- */

static void *g_dl;
static const bb_component_type *g_type;
static void *g_inst;
static bb_arena *A;      /* per-test arena for nodes and graphs */
static bb_error g_err;   /* error of the last run() */
static bb_value **g_pool;
static size_t g_pool_n, g_pool_cap;

static bb_value *keep(bb_value *v)
{
    if (!v)
        return v;
    if (g_pool_n == g_pool_cap) {
        g_pool_cap = g_pool_cap ? 2 * g_pool_cap : 256;
        g_pool = realloc(g_pool, g_pool_cap * sizeof *g_pool);
        assert_non_null(g_pool);
    }
    g_pool[g_pool_n++] = v;
    return v;
}

static void plugin_path(char *out, size_t cap)
{
    const char *env = getenv("BB_BUILD");
    if (env && *env) {
        snprintf(out, cap, "%s/lib/bytesandbrains/plugins/cpu.so", env);
        return;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) { /* <build>/tests/test_cpu_backend -> <build> */
        exe[n] = '\0';
        for (int i = 0; i < 2; i++) {
            char *s = strrchr(exe, '/');
            if (s)
                *s = '\0';
        }
        snprintf(out, cap, "%s/lib/bytesandbrains/plugins/cpu.so", exe);
        return;
    }
    snprintf(out, cap, "build/lib/bytesandbrains/plugins/cpu.so");
}

static int group_setup(void **state)
{
    (void)state;
    char path[PATH_MAX + 64];
    plugin_path(path, sizeof path);
    g_dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!g_dl) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        return -1;
    }
    bb_plugin_entry_fn entry = (bb_plugin_entry_fn)dlsym(g_dl, BB_PLUGIN_ENTRY_SYMBOL);
    if (!entry)
        return -1;
    const bb_plugin_info *info = entry();
    if (!info || info->n_types != 1)
        return -1;
    g_type = info->types[0];
    bb_create_args args = {.struct_size = sizeof args, .slot = "compute",
                           .config_json = "{\"threads\": 1}"};
    bb_error err = {0};
    if (g_type->create(&args, &g_inst, &err) != BB_OK) {
        fprintf(stderr, "create: %s\n", err.msg);
        return -1;
    }
    return 0;
}

/* Arenas of finished tests: the instance caches plans per graph pointer,
 * so graphs must outlive it (freed after destroy, in group_teardown). */
static bb_arena **g_old;
static size_t g_old_n;

static int group_teardown(void **state)
{
    (void)state;
    if (g_inst)
        g_type->destroy(g_inst);
    for (size_t i = 0; i < g_old_n; i++)
        bb_arena_destroy(g_old[i]);
    free(g_old);
    free(g_pool);
    if (g_dl)
        dlclose(g_dl);
    return 0;
}

static int setup(void **state)
{
    (void)state;
    A = bb_arena_create();
    g_pool_n = 0;
    return A ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < g_pool_n; i++)
        bb_value_unref(g_pool[i]);
    g_pool_n = 0;
    bb_arena **o = realloc(g_old, (g_old_n + 1) * sizeof *o);
    if (!o)
        return -1;
    g_old = o;
    g_old[g_old_n++] = A;
    A = NULL;
    return 0;
}

/* ---- tensors ------------------------------------------------------------------ */

#define D(...) ((const int64_t[]){__VA_ARGS__})

static bb_value *mk(int32_t dt, uint32_t nd, const int64_t *dims, const void *data, size_t nbytes)
{
    size_t n = bb_shape_numel(nd, dims);
    size_t es = dt == BB_DT_FLOAT || dt == BB_DT_INT32 ? 4
                : dt == BB_DT_DOUBLE || dt == BB_DT_INT64 ? 8
                : dt == BB_DT_FLOAT16 ? 2 : 1;
    if (n == 0) {
        bb_value *v = bb_value_tensor_new(dt, nd, dims);
        assert_non_null(v);
        return keep(v);
    }
    assert_int_equal(n * es, nbytes);
    bb_value *v = bb_value_tensor_copy(dt, nd, dims, data, nbytes);
    assert_non_null(v);
    return keep(v);
}

#define MKT(dt, CT, nd, dims, ...) \
    mk(dt, nd, dims, (const CT[]){__VA_ARGS__}, sizeof((const CT[]){__VA_ARGS__}))
#define TF(nd, dims, ...) MKT(BB_DT_FLOAT, float, nd, dims, __VA_ARGS__)
#define TD(nd, dims, ...) MKT(BB_DT_DOUBLE, double, nd, dims, __VA_ARGS__)
#define TI64(nd, dims, ...) MKT(BB_DT_INT64, int64_t, nd, dims, __VA_ARGS__)
#define TI32(nd, dims, ...) MKT(BB_DT_INT32, int32_t, nd, dims, __VA_ARGS__)
#define TU8(nd, dims, ...) MKT(BB_DT_UINT8, uint8_t, nd, dims, __VA_ARGS__)
#define TI8(nd, dims, ...) MKT(BB_DT_INT8, int8_t, nd, dims, __VA_ARGS__)
#define TB(nd, dims, ...) MKT(BB_DT_BOOL, uint8_t, nd, dims, __VA_ARGS__)
/* zero-filled tensor of any shape (including zero-size) */
static bb_value *tz(int32_t dt, uint32_t nd, const int64_t *dims)
{
    bb_value *v = bb_value_tensor_new(dt, nd, dims);
    assert_non_null(v);
    return keep(v);
}

static void expect_shape_(const bb_value *v, const int64_t *dims, uint32_t nd, int line)
{
    if (!v)
        fail_msg("line %d: no value", line);
    if (v->u.tensor.ndim != nd)
        fail_msg("line %d: rank %u, expected %u", line, v->u.tensor.ndim, nd);
    for (uint32_t i = 0; i < nd; i++)
        if (v->u.tensor.dims[i] != dims[i])
            fail_msg("line %d: dim %u is %lld, expected %lld", line, i,
                     (long long)v->u.tensor.dims[i], (long long)dims[i]);
}
#define EXPECT_SHAPE(v, ...) \
    expect_shape_(v, D(__VA_ARGS__), sizeof(D(__VA_ARGS__)) / sizeof(int64_t), __LINE__)
#define EXPECT_SCALAR(v) expect_shape_(v, NULL, 0, __LINE__)

static void expect_f_(const bb_value *v, int32_t dt, const double *want, size_t n, double tol,
                      int line)
{
    if (!v)
        fail_msg("line %d: no value", line);
    if (v->u.tensor.dtype != dt)
        fail_msg("line %d: dtype %d, expected %d", line, v->u.tensor.dtype, dt);
    size_t got = bb_tensor_numel(v);
    if (got != n)
        fail_msg("line %d: %zu elements, expected %zu", line, got, n);
    for (size_t i = 0; i < n; i++) {
        double x = dt == BB_DT_FLOAT ? ((const float *)(const void *)v->u.tensor.data)[i]
                                     : ((const double *)(const void *)v->u.tensor.data)[i];
        if (isnan(want[i]) && isnan(x))
            continue;
        if (isinf(want[i]) && x == want[i])
            continue;
        if (!(fabs(x - want[i]) <= tol * (1 + fabs(want[i]))))
            fail_msg("line %d: element %zu is %.9g, expected %.9g", line, i, x, want[i]);
    }
}
#define EXPECT_F32(v, ...)                                                                   \
    expect_f_(v, BB_DT_FLOAT, (const double[]){__VA_ARGS__},                                 \
              sizeof((const double[]){__VA_ARGS__}) / sizeof(double), 1e-5, __LINE__)
#define EXPECT_F64(v, ...)                                                                   \
    expect_f_(v, BB_DT_DOUBLE, (const double[]){__VA_ARGS__},                                \
              sizeof((const double[]){__VA_ARGS__}) / sizeof(double), 1e-12, __LINE__)

static void expect_i_(const bb_value *v, int32_t dt, const int64_t *want, size_t n, int line)
{
    if (!v)
        fail_msg("line %d: no value", line);
    if (v->u.tensor.dtype != dt)
        fail_msg("line %d: dtype %d, expected %d", line, v->u.tensor.dtype, dt);
    size_t got = bb_tensor_numel(v);
    if (got != n)
        fail_msg("line %d: %zu elements, expected %zu", line, got, n);
    const uint8_t *p = v->u.tensor.data;
    for (size_t i = 0; i < n; i++) {
        int64_t x;
        switch (dt) {
        case BB_DT_INT64: x = ((const int64_t *)(const void *)p)[i]; break;
        case BB_DT_INT32: x = ((const int32_t *)(const void *)p)[i]; break;
        case BB_DT_INT8: x = ((const int8_t *)(const void *)p)[i]; break;
        case BB_DT_UINT16:
        case BB_DT_FLOAT16: x = ((const uint16_t *)(const void *)p)[i]; break;
        default: x = p[i]; break;
        }
        if (x != want[i])
            fail_msg("line %d: element %zu is %lld, expected %lld", line, i, (long long)x,
                     (long long)want[i]);
    }
}
#define EXPECT_I_(dt, v, ...)                                                               \
    expect_i_(v, dt, (const int64_t[]){__VA_ARGS__},                                        \
              sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t), __LINE__)
#define EXPECT_I64(v, ...) EXPECT_I_(BB_DT_INT64, v, __VA_ARGS__)
#define EXPECT_I32(v, ...) EXPECT_I_(BB_DT_INT32, v, __VA_ARGS__)
#define EXPECT_I8(v, ...) EXPECT_I_(BB_DT_INT8, v, __VA_ARGS__)
#define EXPECT_U8(v, ...) EXPECT_I_(BB_DT_UINT8, v, __VA_ARGS__)
#define EXPECT_BOOL(v, ...) EXPECT_I_(BB_DT_BOOL, v, __VA_ARGS__)

/* ---- nodes and dispatch -------------------------------------------------------- */

static bb_node *N(const char *op)
{
    bb_node *n = bb_node_new(A, "", op);
    assert_non_null(n);
    n->name = "n0";
    return n;
}
static bb_node *ai(bb_node *n, const char *k, int64_t v)
{
    assert_non_null(bb_node_set_attr_int(A, n, k, v));
    return n;
}
static bb_node *af(bb_node *n, const char *k, float v)
{
    assert_non_null(bb_node_set_attr_float(A, n, k, v));
    return n;
}
static bb_node *as(bb_node *n, const char *k, const char *v)
{
    assert_non_null(bb_node_set_attr_string(A, n, k, v));
    return n;
}
#define AIS(n, k, ...) \
    ais_(n, k, D(__VA_ARGS__), sizeof(D(__VA_ARGS__)) / sizeof(int64_t))
static bb_node *ais_(bb_node *n, const char *k, const int64_t *v, size_t c)
{
    assert_non_null(bb_node_set_attr_ints(A, n, k, v, c));
    return n;
}

static uint32_t op_index(const char *op)
{
    const bb_opset_decl *os = &g_type->opsets[0];
    for (uint32_t i = 0; i < os->n_ops; i++)
        if (strcmp(os->ops[i].op_type, op) == 0)
            return i;
    return UINT32_MAX;
}

/* Dispatch op; outputs land in the pool. Returns the status. */
static int run(const char *op, const bb_node *node, bb_value *const *in, uint32_t n_in,
               bb_value **out, uint32_t n_out)
{
    bb_dispatch_call call = {.domain = "ai.onnx", .op_type = op, .op_index = op_index(op),
                             .inputs = in, .n_inputs = n_in, .n_outputs = n_out,
                             .node = node};
    memset(&g_err, 0, sizeof g_err);
    for (uint32_t i = 0; i < n_out; i++)
        out[i] = NULL;
    bb_dispatch_result r = g_type->dispatch(g_inst, NULL, &call, out, &g_err);
    if (r == BB_DISPATCH_NOW_OK) {
        for (uint32_t i = 0; i < n_out; i++)
            keep(out[i]);
        return BB_OK;
    }
    assert_int_equal(r, BB_DISPATCH_NOW_ERR);
    for (uint32_t i = 0; i < n_out; i++)
        assert_null(out[i]); /* nothing leaks on failure */
    assert_int_not_equal(g_err.code, BB_OK);
    return g_err.code;
}

#define INS(...) (bb_value *[]){__VA_ARGS__}, \
    (uint32_t)(sizeof((bb_value *[]){__VA_ARGS__}) / sizeof(bb_value *))

static bb_value *run1_(const char *op, const bb_node *node, bb_value *const *in, uint32_t n,
                       int line)
{
    bb_value *out = NULL;
    if (run(op, node, in, n, &out, 1) != BB_OK)
        fail_msg("line %d: %s failed: %s", line, op, g_err.msg);
    return out;
}
#define RUN1(op, node, ...) run1_(op, node, INS(__VA_ARGS__), __LINE__)
#define RUN0(op, node) run1_(op, node, NULL, 0, __LINE__)

/* Expect failure with code and a message containing sub. */
static void err_(const char *op, const bb_node *node, bb_value *const *in, uint32_t n,
                 uint32_t n_out, int code, const char *sub, int line)
{
    bb_value *out[8];
    int rc = run(op, node, in, n, out, n_out);
    if (rc == BB_OK)
        fail_msg("line %d: %s succeeded, expected failure '%s'", line, op, sub);
    if (code && rc != code)
        fail_msg("line %d: %s failed with %s (%s), expected %s", line, op, bb_status_name(rc),
                 g_err.msg, bb_status_name(code));
    if (!strstr(g_err.msg, sub))
        fail_msg("line %d: message '%s' lacks '%s'", line, g_err.msg, sub);
    if (!strstr(g_err.msg, "cpu::CpuBackend"))
        fail_msg("line %d: message '%s' does not name the backend", line, g_err.msg);
}
#define ERR(op, node, code, sub, ...) err_(op, node, INS(__VA_ARGS__), 1, code, sub, __LINE__)

/* ---- declarations ---------------------------------------------------------------- */

static void test_declarations(void **state)
{
    (void)state;
    assert_string_equal(g_type->type_name, "cpu::CpuBackend");
    assert_int_equal(g_type->role, BB_ROLE_BACKEND);
    assert_int_equal(g_type->abi_major, BB_PLUGIN_ABI_MAJOR);
    assert_true(g_type->struct_size >= offsetof(bb_component_type, execute_graph) +
                                           sizeof(void *));
    assert_non_null(g_type->execute_graph);
    assert_non_null(g_type->materialize_from_wire);
    assert_int_equal(g_type->n_opsets, 1);
    const bb_opset_decl *os = &g_type->opsets[0];
    assert_string_equal(os->domain, "ai.onnx");
    assert_int_equal(os->version, BB_ONNX_OPSET_VERSION);
    assert_int_equal(os->n_ops, 51);
    /* Every catalog op is declared with the catalog's port names, order,
     * variadic flags and compatible types. */
    const bb_opset_schema *cat = bb_opset_find("ai.onnx");
    assert_non_null(cat);
    assert_int_equal(cat->n_ops, os->n_ops);
    for (uint32_t i = 0; i < cat->n_ops; i++) {
        const bb_op_schema *s = &cat->ops[i];
        uint32_t k = op_index(s->op_type);
        if (k == UINT32_MAX)
            fail_msg("catalog op %s not declared", s->op_type);
        const bb_op_decl *d = &os->ops[k];
        if (d->n_inputs != s->n_inputs || d->n_outputs != s->n_outputs)
            fail_msg("%s: port counts differ", s->op_type);
        for (uint32_t j = 0; j < s->n_inputs; j++) {
            if (strcmp(d->inputs[j].name, s->inputs[j].name) ||
                d->inputs[j].variadic != s->inputs[j].variadic ||
                d->inputs[j].type != s->inputs[j].type)
                fail_msg("%s: input %u (%s) differs from the catalog (%s)", s->op_type, j,
                         d->inputs[j].name, s->inputs[j].name);
            /* optional where the catalog requires it only for an older
             * opset's attribute form (Unsqueeze's axes before opset 13) */
            if (d->inputs[j].optional && !s->inputs[j].optional &&
                !(strcmp(s->op_type, "Unsqueeze") == 0 && strcmp(s->inputs[j].name, "axes") == 0))
                fail_msg("%s: input %s optional here only", s->op_type, d->inputs[j].name);
        }
        for (uint32_t j = 0; j < s->n_outputs; j++)
            if (strcmp(d->outputs[j].name, s->outputs[j].name) ||
                d->outputs[j].variadic != s->outputs[j].variadic ||
                d->outputs[j].optional != s->outputs[j].optional ||
                !bb_type_is_a(d->outputs[j].type, s->outputs[j].type))
                fail_msg("%s: output %u (%s) differs from the catalog", s->op_type, j,
                         d->outputs[j].name);
    }
}

static void test_create_config(void **state)
{
    (void)state;
    static const char *const bad[] = {"{\"threads\": 0}", "{\"threads\": 1.5}", "{\"bogus\": 1}",
                                      "not json", "[1]", "{\"max_cached_graphs\": -1}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        bb_create_args args = {.struct_size = sizeof args, .config_json = bad[i]};
        void *inst = NULL;
        bb_error err = {0};
        assert_int_equal(g_type->create(&args, &inst, &err), BB_ECONFIG);
        assert_null(inst);
        assert_non_null(strstr(err.msg, "cpu::CpuBackend"));
    }
    bb_create_args args = {.struct_size = sizeof args};
    void *inst = NULL;
    assert_int_equal(g_type->create(&args, &inst, NULL), BB_OK);
    g_type->destroy(inst);
    args.config_json = "{\"threads\": 1, \"max_cached_graphs\": 4}";
    assert_int_equal(g_type->create(&args, &inst, NULL), BB_OK);
    g_type->destroy(inst);
}

/* ---- dispatch contract ---------------------------------------------------------------- */

static void test_dispatch_contract(void **state)
{
    (void)state;
    bb_value *a = TF(1, D(2), 1, 2), *b = TF(1, D(2), 3, 4);
    /* a wrong op_index falls back to the op name */
    bb_value *ab[2] = {a, b};
    bb_dispatch_call call = {.domain = "", .op_type = "Add", .op_index = op_index("Mul"),
                             .inputs = ab, .n_inputs = 2, .n_outputs = 1};
    bb_value *out = NULL;
    bb_error err = {0};
    assert_int_equal(g_type->dispatch(g_inst, NULL, &call, &out, &err), BB_DISPATCH_NOW_OK);
    keep(out);
    EXPECT_F32(out, 4, 6);
    /* node NULL means default attributes */
    EXPECT_F32(RUN1("Softmax", NULL, TF(1, D(2), 0, 0)), 0.5, 0.5);
    /* unknown op, other domain */
    call.op_type = "Frobnicate";
    call.op_index = 999;
    assert_int_equal(g_type->dispatch(g_inst, NULL, &call, &out, &err), BB_DISPATCH_NOW_ERR);
    assert_non_null(strstr(err.msg, "Frobnicate"));
    call.op_type = "Add";
    call.domain = "com.example";
    assert_int_equal(g_type->dispatch(g_inst, NULL, &call, &out, &err), BB_DISPATCH_NOW_ERR);
    assert_non_null(strstr(err.msg, "com.example"));
    /* missing required input, non-tensor input, wrong fixed dtype, arity */
    ERR("Add", N("Add"), BB_EINVAL, "missing input 'B'", a, NULL);
    bb_value *trig = keep(bb_value_trigger());
    ERR("Relu", N("Relu"), BB_ETYPE, "must be a tensor", trig);
    ERR("Reshape", N("Reshape"), BB_ETYPE, "input 'shape' must be int64", a, TI32(1, D(1), 2));
    ERR("Relu", N("Relu"), BB_EINVAL, "at most", a, a);
    bb_value *outs[3];
    assert_int_equal(run("Relu", N("Relu"), INS(a), outs, 2), BB_EINVAL);
    assert_int_equal(run("Relu", N("Relu"), INS(a), outs, 0), BB_EINVAL);
    /* error names the node */
    ERR("Sqrt", N("Sqrt"), BB_EUNSUPPORTED, "(node 'n0')", TI32(1, D(1), 4));
}

/* ---- arithmetic ------------------------------------------------------------------------- */

static void test_arith_f32(void **state)
{
    (void)state;
    bb_value *a = TF(2, D(2, 3), 1, 2, 3, 4, 5, 6);
    bb_value *row = TF(1, D(3), 10, 20, 30);
    bb_value *col = TF(2, D(2, 1), 100, 200);
    bb_value *s = TF(0, NULL, 2);
    bb_value *y = RUN1("Add", N("Add"), a, a);
    EXPECT_SHAPE(y, 2, 3);
    EXPECT_F32(y, 2, 4, 6, 8, 10, 12);
    y = RUN1("Add", N("Add"), a, row);
    EXPECT_SHAPE(y, 2, 3);
    EXPECT_F32(y, 11, 22, 33, 14, 25, 36);
    y = RUN1("Sub", N("Sub"), row, a); /* broadcast on the left */
    EXPECT_F32(y, 9, 18, 27, 6, 15, 24);
    y = RUN1("Mul", N("Mul"), col, row); /* [2,1] x [3] -> [2,3] */
    EXPECT_SHAPE(y, 2, 3);
    EXPECT_F32(y, 1000, 2000, 3000, 2000, 4000, 6000);
    y = RUN1("Div", N("Div"), a, s);
    EXPECT_F32(y, 0.5, 1, 1.5, 2, 2.5, 3);
    y = RUN1("Div", N("Div"), s, s);
    EXPECT_SCALAR(y);
    EXPECT_F32(y, 1);
    /* rank-3 broadcast [2,1,3] + [1,2,1] */
    bb_value *p = TF(3, D(2, 1, 3), 1, 2, 3, 4, 5, 6), *q = TF(3, D(1, 2, 1), 10, 20);
    y = RUN1("Add", N("Add"), p, q);
    EXPECT_SHAPE(y, 2, 2, 3);
    EXPECT_F32(y, 11, 12, 13, 21, 22, 23, 14, 15, 16, 24, 25, 26);
    /* float division by zero is IEEE */
    y = RUN1("Div", N("Div"), TF(1, D(3), 1, -1, 0), TF(1, D(1), 0));
    EXPECT_F32(y, INFINITY, -INFINITY, NAN);
    /* double */
    y = RUN1("Mul", N("Mul"), TD(1, D(2), 1.5, 2.5), TD(0, NULL, 2));
    EXPECT_F64(y, 3, 5);
}

static void test_arith_int(void **state)
{
    (void)state;
    bb_value *y = RUN1("Add", N("Add"), TI32(1, D(2), INT32_MAX, 5), TI32(1, D(1), 1));
    EXPECT_I32(y, INT32_MIN, 6); /* wraps */
    y = RUN1("Mul", N("Mul"), TI64(1, D(3), 3, -4, 5), TI64(1, D(3), 7, 8, -9));
    EXPECT_I64(y, 21, -32, -45);
    y = RUN1("Sub", N("Sub"), TU8(1, D(2), 5, 250), TU8(1, D(2), 10, 5));
    EXPECT_U8(y, 251, 245);
    y = RUN1("Add", N("Add"), TU8(1, D(1), 250), TU8(1, D(1), 10));
    EXPECT_U8(y, 4);
    y = RUN1("Div", N("Div"), TI32(1, D(4), 7, -7, 9, INT32_MIN), TI32(1, D(4), 2, 2, -3, -1));
    EXPECT_I32(y, 3, -3, -3, INT32_MIN); /* truncates; INT_MIN / -1 wraps */
    y = RUN1("Div", N("Div"), TI8(1, D(2), -128, 100), TI8(1, D(2), -1, 3));
    EXPECT_I8(y, -128, 33);
    y = RUN1("Mul", N("Mul"), TI64(1, D(1), INT64_MAX), TI64(1, D(1), 2));
    EXPECT_I64(y, -2);
    ERR("Div", N("Div"), BB_EINVAL, "division by zero", TI32(1, D(2), 1, 2), TI32(1, D(2), 1, 0));
    ERR("Add", N("Add"), BB_ETYPE, "dtypes float and int32 differ", TF(1, D(1), 1),
        TI32(1, D(1), 1));
    ERR("Add", N("Add"), BB_EINVAL, "[2,3] and [4] are not broadcastable",
        TF(2, D(2, 3), 1, 2, 3, 4, 5, 6), TF(1, D(4), 1, 2, 3, 4));
    ERR("Add", N("Add"), BB_EUNSUPPORTED, "Add: dtype bool not supported", TB(1, D(1), 1),
        TB(1, D(1), 0));
}

static void test_arith_empty(void **state)
{
    (void)state;
    bb_value *e = tz(BB_DT_FLOAT, 2, D(0, 3));
    bb_value *y = RUN1("Add", N("Add"), e, TF(1, D(3), 1, 2, 3));
    EXPECT_SHAPE(y, 0, 3);
    y = RUN1("Mul", N("Mul"), tz(BB_DT_FLOAT, 2, D(1, 0)), tz(BB_DT_FLOAT, 2, D(3, 1)));
    EXPECT_SHAPE(y, 3, 0);
    y = RUN1("Div", N("Div"), tz(BB_DT_INT32, 1, D(0)), tz(BB_DT_INT32, 1, D(1)));
    EXPECT_SHAPE(y, 0); /* no element divides, so no zero-division error */
    y = RUN1("Neg", N("Neg"), e);
    EXPECT_SHAPE(y, 0, 3);
    ERR("Add", N("Add"), BB_EINVAL, "not broadcastable", e, tz(BB_DT_FLOAT, 1, D(2)));
}

static void test_unary(void **state)
{
    (void)state;
    EXPECT_F32(RUN1("Neg", N("Neg"), TF(1, D(3), 1, -2, 0)), -1, 2, 0);
    EXPECT_I32(RUN1("Neg", N("Neg"), TI32(1, D(2), 5, INT32_MIN)), -5, INT32_MIN);
    EXPECT_F32(RUN1("Abs", N("Abs"), TF(1, D(3), -1.5, 2, -0.0)), 1.5, 2, 0);
    EXPECT_I8(RUN1("Abs", N("Abs"), TI8(1, D(3), -7, 7, -128)), 7, 7, -128);
    EXPECT_U8(RUN1("Abs", N("Abs"), TU8(1, D(1), 200)), 200);
    EXPECT_F32(RUN1("Sqrt", N("Sqrt"), TF(1, D(3), 4, 2.25, -1)), 2, 1.5, NAN);
    EXPECT_F32(RUN1("Exp", N("Exp"), TF(1, D(2), 0, 1)), 1, 2.718281828);
    EXPECT_F32(RUN1("Log", N("Log"), TF(1, D(3), 1, 2.718281828, 0)), 0, 1, -INFINITY);
    EXPECT_F64(RUN1("Sqrt", N("Sqrt"), TD(1, D(1), 2)), 1.4142135623730951);
    ERR("Sqrt", N("Sqrt"), BB_EUNSUPPORTED, "cpu::CpuBackend: Sqrt: dtype int32 not supported",
        TI32(1, D(1), 4));
    ERR("Neg", N("Neg"), BB_EUNSUPPORTED, "dtype uint8 not supported", TU8(1, D(1), 4));
    ERR("Exp", N("Exp"), BB_EUNSUPPORTED, "dtype int64", TI64(1, D(1), 4));
}

static void test_pow(void **state)
{
    (void)state;
    bb_value *x = TF(1, D(3), 1, 2, 3);
    EXPECT_F32(RUN1("Pow", N("Pow"), x, TF(1, D(3), 2, 3, 0.5)), 1, 8, 1.7320508);
    EXPECT_F32(RUN1("Pow", N("Pow"), x, TF(0, NULL, 2)), 1, 4, 9);
    EXPECT_F32(RUN1("Pow", N("Pow"), x, TF(0, NULL, 0.5)), 1, 1.4142135, 1.7320508);
    EXPECT_F32(RUN1("Pow", N("Pow"), x, TF(0, NULL, 1)), 1, 2, 3);
    EXPECT_F32(RUN1("Pow", N("Pow"), x, TI64(1, D(1), 3)), 1, 8, 27);
    EXPECT_F32(RUN1("Pow", N("Pow"), TF(2, D(2, 1), 2, 3), TF(1, D(2), 1, 2)), 2, 4, 3, 9);
    EXPECT_I32(RUN1("Pow", N("Pow"), TI32(1, D(3), 2, -3, 2), TI32(1, D(3), 10, 3, -1)), 1024,
               -27, 0);
    EXPECT_I64(RUN1("Pow", N("Pow"), TI64(1, D(2), 3, 4), TF(1, D(2), 1.5, 0.5)), 5, 2);
    ERR("Pow", N("Pow"), BB_EUNSUPPORTED, "Pow: dtype uint8 not supported", TU8(1, D(1), 2),
        TU8(1, D(1), 2));
}

/* ---- linear algebra ------------------------------------------------------------------ */

static void test_matmul(void **state)
{
    (void)state;
    bb_value *a = TF(2, D(2, 3), 1, 2, 3, 4, 5, 6);
    bb_value *b = TF(2, D(3, 2), 7, 8, 9, 10, 11, 12);
    bb_value *y = RUN1("MatMul", N("MatMul"), a, b);
    EXPECT_SHAPE(y, 2, 2);
    EXPECT_F32(y, 58, 64, 139, 154);
    y = RUN1("MatMul", N("MatMul"), TF(1, D(3), 1, 2, 3), b); /* 1-D x 2-D: gemv */
    EXPECT_SHAPE(y, 2);
    EXPECT_F32(y, 58, 64);
    y = RUN1("MatMul", N("MatMul"), a, TF(1, D(3), 1, 0, -1)); /* 2-D x 1-D */
    EXPECT_SHAPE(y, 2);
    EXPECT_F32(y, -2, -2);
    y = RUN1("MatMul", N("MatMul"), TF(1, D(3), 1, 2, 3), TF(1, D(3), 4, 5, 6));
    EXPECT_SCALAR(y);
    EXPECT_F32(y, 32);
    y = RUN1("MatMul", N("MatMul"), TF(2, D(1, 3), 1, 2, 3), b); /* M = 1 */
    EXPECT_SHAPE(y, 1, 2);
    EXPECT_F32(y, 58, 64);
    y = RUN1("MatMul", N("MatMul"), a, TF(2, D(3, 1), 1, 1, 1)); /* N = 1 */
    EXPECT_F32(y, 6, 15);
    /* batched A with shared B (folded into one gemm) */
    bb_value *a3 = TF(3, D(2, 2, 3), 1, 2, 3, 4, 5, 6, 0, 0, 1, 1, 0, 0);
    y = RUN1("MatMul", N("MatMul"), a3, b);
    EXPECT_SHAPE(y, 2, 2, 2);
    EXPECT_F32(y, 58, 64, 139, 154, 11, 12, 7, 8);
    /* batched both, and broadcast batch [2,1,2,3] x [3,3,2] */
    bb_value *b3 = TF(3, D(2, 3, 2), 7, 8, 9, 10, 11, 12, 1, 0, 0, 1, 0, 0);
    y = RUN1("MatMul", N("MatMul"), a3, b3);
    EXPECT_F32(y, 58, 64, 139, 154, 0, 0, 1, 0);
    y = RUN1("MatMul", N("MatMul"), a, b3); /* shared A, batched B */
    EXPECT_SHAPE(y, 2, 2, 2);
    EXPECT_F32(y, 58, 64, 139, 154, 1, 2, 4, 5);
    bb_value *b4 = TF(4, D(1, 2, 3, 1), 1, 1, 1, 1, 0, 0);
    y = RUN1("MatMul", N("MatMul"), TF(3, D(2, 1, 3), 1, 2, 3, 4, 5, 6), b4);
    EXPECT_SHAPE(y, 1, 2, 1, 1);
    EXPECT_F32(y, 6, 4);
    /* integers and double */
    y = RUN1("MatMul", N("MatMul"), TI32(2, D(2, 2), 1, 2, 3, 4), TI32(2, D(2, 2), 5, 6, 7, 8));
    EXPECT_I32(y, 19, 22, 43, 50);
    y = RUN1("MatMul", N("MatMul"), TI64(2, D(1, 2), 1, -2), TI64(2, D(2, 1), 3, 4));
    EXPECT_I64(y, -5);
    y = RUN1("MatMul", N("MatMul"), TD(2, D(1, 2), 0.5, 2), TD(2, D(2, 2), 2, 4, 1, 1));
    EXPECT_F64(y, 3, 4);
    /* zero sizes: K = 0 gives zeros, M = 0 / batch 0 give empty */
    y = RUN1("MatMul", N("MatMul"), tz(BB_DT_FLOAT, 2, D(2, 0)), tz(BB_DT_FLOAT, 2, D(0, 3)));
    EXPECT_SHAPE(y, 2, 3);
    EXPECT_F32(y, 0, 0, 0, 0, 0, 0);
    y = RUN1("MatMul", N("MatMul"), tz(BB_DT_FLOAT, 2, D(0, 3)), b);
    EXPECT_SHAPE(y, 0, 2);
    y = RUN1("MatMul", N("MatMul"), tz(BB_DT_FLOAT, 3, D(0, 2, 3)), b);
    EXPECT_SHAPE(y, 0, 2, 2);
    ERR("MatMul", N("MatMul"), BB_EINVAL, "inner dimensions differ: [2,3] x [2,3]", a, a);
    ERR("MatMul", N("MatMul"), BB_EINVAL, "batch dimensions do not broadcast",
        tz(BB_DT_FLOAT, 3, D(2, 2, 3)), tz(BB_DT_FLOAT, 3, D(3, 3, 2)));
    ERR("MatMul", N("MatMul"), BB_EINVAL, "rank >= 1", TF(0, NULL, 1), b);
    ERR("MatMul", N("MatMul"), BB_EUNSUPPORTED, "MatMul: dtype int8 not supported",
        TI8(1, D(1), 1), TI8(1, D(1), 1));
    ERR("MatMul", N("MatMul"), BB_ETYPE, "differ", a, TD(2, D(3, 1), 1, 2, 3));
}

static void test_gemm(void **state)
{
    (void)state;
    bb_value *a = TF(2, D(2, 3), 1, 2, 3, 4, 5, 6);
    bb_value *b = TF(2, D(3, 2), 7, 8, 9, 10, 11, 12);
    bb_value *bt = TF(2, D(2, 3), 7, 9, 11, 8, 10, 12); /* b transposed */
    bb_value *at = TF(2, D(3, 2), 1, 4, 2, 5, 3, 6);    /* a transposed */
    EXPECT_F32(RUN1("Gemm", N("Gemm"), a, b), 58, 64, 139, 154);
    EXPECT_F32(RUN1("Gemm", ai(N("Gemm"), "transB", 1), a, bt), 58, 64, 139, 154);
    EXPECT_F32(RUN1("Gemm", ai(N("Gemm"), "transA", 1), at, b), 58, 64, 139, 154);
    EXPECT_F32(RUN1("Gemm", ai(ai(N("Gemm"), "transA", 1), "transB", 1), at, bt), 58, 64, 139,
               154);
    /* C broadcast: [N], [M,1], scalar, full; alpha and beta */
    EXPECT_F32(RUN1("Gemm", N("Gemm"), a, b, TF(1, D(2), 1, 2)), 59, 66, 140, 156);
    EXPECT_F32(RUN1("Gemm", N("Gemm"), a, b, TF(2, D(2, 1), 1, 2)), 59, 65, 141, 156);
    EXPECT_F32(RUN1("Gemm", N("Gemm"), a, b, TF(0, NULL, 1)), 59, 65, 140, 155);
    bb_node *n = af(af(N("Gemm"), "alpha", 2), "beta", 0.5);
    EXPECT_F32(RUN1("Gemm", n, a, b, TF(2, D(2, 2), 2, 4, 6, 8)), 117, 130, 281, 312);
    EXPECT_F32(RUN1("Gemm", af(N("Gemm"), "beta", 0), a, b, TF(0, NULL, 100)), 58, 64, 139, 154);
    /* batch 1 with transB (the Linear layer shape: gemv) and a bias */
    bb_value *x = TF(2, D(1, 3), 1, 2, 3);
    EXPECT_F32(RUN1("Gemm", ai(N("Gemm"), "transB", 1), x, bt, TF(1, D(2), 1, 1)), 59, 65);
    EXPECT_F32(RUN1("Gemm", N("Gemm"), x, b, TF(1, D(2), 1, 1)), 59, 65);
    /* N = 1 with transA */
    EXPECT_F32(RUN1("Gemm", ai(N("Gemm"), "transA", 1), at, TF(2, D(3, 1), 1, 1, 1)), 6, 15);
    /* integers: exact product, float epilogue */
    EXPECT_I32(RUN1("Gemm", af(N("Gemm"), "alpha", 2), TI32(2, D(1, 2), 1, 2),
                    TI32(2, D(2, 1), 3, 4), TI32(1, D(1), 5)),
               27);
    EXPECT_F64(RUN1("Gemm", N("Gemm"), TD(2, D(1, 1), 2), TD(2, D(1, 1), 3)), 6);
    /* zero sizes: K = 0 leaves beta * C */
    bb_value *y = RUN1("Gemm", N("Gemm"), tz(BB_DT_FLOAT, 2, D(2, 0)), tz(BB_DT_FLOAT, 2, D(0, 2)),
                       TF(0, NULL, 3));
    EXPECT_F32(y, 3, 3, 3, 3);
    y = RUN1("Gemm", N("Gemm"), tz(BB_DT_FLOAT, 2, D(0, 3)), b);
    EXPECT_SHAPE(y, 0, 2);
    ERR("Gemm", N("Gemm"), BB_EINVAL, "A and B must be 2-D", TF(1, D(3), 1, 2, 3), b);
    ERR("Gemm", N("Gemm"), BB_EINVAL, "inner dimensions differ", a, a);
    bb_value *in3[3] = {a, b, TF(1, D(3), 1, 2, 3)};
    bb_value *o;
    assert_int_equal(run("Gemm", N("Gemm"), in3, 3, &o, 1), BB_EINVAL);
    assert_non_null(strstr(g_err.msg, "C of shape [3] cannot broadcast to [2,2]"));
}

static void test_dot(void **state)
{
    (void)state;
    bb_value *y = RUN1("Dot", N("Dot"), TF(1, D(3), 1, 2, 3), TF(1, D(3), 4, 5, 6));
    EXPECT_SCALAR(y);
    EXPECT_F32(y, 32);
    EXPECT_I64(RUN1("Dot", N("Dot"), TI64(1, D(2), 2, 3), TI64(1, D(2), -1, 4)), 10);
    EXPECT_I32(RUN1("Dot", N("Dot"), TI32(1, D(2), 2, 3), TI32(1, D(2), -1, 4)), 10);
    EXPECT_F64(RUN1("Dot", N("Dot"), TD(1, D(2), 0.5, 1), TD(1, D(2), 2, 2)), 3);
    y = RUN1("Dot", N("Dot"), TF(2, D(1, 2), 1, 2), TF(2, D(2, 1), 3, 4));
    EXPECT_SHAPE(y, 1, 1);
    EXPECT_F32(y, 11);
    y = RUN1("Dot", N("Dot"), tz(BB_DT_FLOAT, 1, D(0)), tz(BB_DT_FLOAT, 1, D(0)));
    EXPECT_F32(y, 0);
    ERR("Dot", N("Dot"), BB_EINVAL, "vector lengths 2 and 3 differ", TF(1, D(2), 1, 2),
        TF(1, D(3), 1, 2, 3));
}

/* ---- activations and softmax --------------------------------------------------------------- */

static void test_activations(void **state)
{
    (void)state;
    bb_value *x = TF(1, D(4), -2, -0.5, 0, 3);
    EXPECT_F32(RUN1("Relu", N("Relu"), x), 0, 0, 0, 3);
    EXPECT_I32(RUN1("Relu", N("Relu"), TI32(1, D(3), -5, 0, 7)), 0, 0, 7);
    EXPECT_I8(RUN1("Relu", N("Relu"), TI8(1, D(2), -5, 7)), 0, 7);
    EXPECT_F64(RUN1("Relu", N("Relu"), TD(1, D(2), -1, 1)), 0, 1);
    EXPECT_F32(RUN1("Sigmoid", N("Sigmoid"), TF(1, D(4), 0, 2, -2, -100)), 0.5, 0.880797078,
               0.119202922, 3.720075976e-44);
    EXPECT_F32(RUN1("Tanh", N("Tanh"), TF(1, D(3), 0, 1, -1)), 0, 0.761594156, -0.761594156);
    EXPECT_F32(RUN1("LeakyRelu", N("LeakyRelu"), x), -0.02, -0.005, 0, 3);
    EXPECT_F32(RUN1("LeakyRelu", af(N("LeakyRelu"), "alpha", 0.5), x), -1, -0.25, 0, 3);
    /* Gelu: 0.5 x (1 + erf(x / sqrt 2)) and the tanh approximation */
    bb_value *g = TF(1, D(3), -1, 0, 1);
    EXPECT_F32(RUN1("Gelu", N("Gelu"), g), -0.158655254, 0, 0.841344746);
    EXPECT_F32(RUN1("Gelu", as(N("Gelu"), "approximate", "none"), g), -0.158655254, 0,
               0.841344746);
    EXPECT_F32(RUN1("Gelu", as(N("Gelu"), "approximate", "tanh"), g), -0.158808009, 0,
               0.841191991);
    ERR("Gelu", as(N("Gelu"), "approximate", "fast"), BB_EINVAL, "approximate", g);
    ERR("Relu", N("Relu"), BB_EUNSUPPORTED, "Relu: dtype uint8 not supported", TU8(1, D(1), 1));
    ERR("Sigmoid", N("Sigmoid"), BB_EUNSUPPORTED, "Sigmoid: dtype int32 not supported",
        TI32(1, D(1), 1));
    EXPECT_SHAPE(RUN1("Tanh", N("Tanh"), tz(BB_DT_FLOAT, 2, D(3, 0))), 3, 0);
}

static void test_softmax(void **state)
{
    (void)state;
    bb_value *x = TF(2, D(2, 3), 1, 2, 3, 1, 1, 1);
    bb_value *y = RUN1("Softmax", N("Softmax"), x);
    EXPECT_SHAPE(y, 2, 3);
    EXPECT_F32(y, 0.090030573, 0.244728471, 0.665240956, 1 / 3.0, 1 / 3.0, 1 / 3.0);
    y = RUN1("Softmax", ai(N("Softmax"), "axis", 0), x);
    EXPECT_F32(y, 0.5, 0.731058579, 0.880797078, 0.5, 0.268941421, 0.119202922);
    y = RUN1("Softmax", ai(N("Softmax"), "axis", -2), x);
    EXPECT_F32(y, 0.5, 0.731058579, 0.880797078, 0.5, 0.268941421, 0.119202922);
    /* 3-D, middle axis; large values stay finite (max subtracted) */
    y = RUN1("Softmax", ai(N("Softmax"), "axis", 1), TF(3, D(1, 2, 2), 1000, 0, 1001, 0));
    EXPECT_F32(y, 0.268941421, 0.5, 0.731058579, 0.5);
    EXPECT_F64(RUN1("Softmax", N("Softmax"), TD(1, D(2), 0, 0)), 0.5, 0.5);
    EXPECT_SHAPE(RUN1("Softmax", N("Softmax"), tz(BB_DT_FLOAT, 2, D(0, 4))), 0, 4);
    EXPECT_SHAPE(RUN1("Softmax", N("Softmax"), tz(BB_DT_FLOAT, 2, D(4, 0))), 4, 0);
    ERR("Softmax", N("Softmax"), BB_EUNSUPPORTED,
        "cpu::CpuBackend: Softmax: dtype int64 not supported", TI64(1, D(2), 1, 2));
    ERR("Softmax", ai(N("Softmax"), "axis", 2), BB_EINVAL, "axis 2 out of range for rank 2", x);
}

/* ---- shape ops ------------------------------------------------------------------------------ */

static void test_reshape_flatten(void **state)
{
    (void)state;
    bb_value *x = TF(3, D(2, 3, 4), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,
                     18, 19, 20, 21, 22, 23);
    bb_value *y = RUN1("Reshape", N("Reshape"), x, TI64(1, D(2), 6, 4));
    EXPECT_SHAPE(y, 6, 4);
    assert_ptr_equal(y->u.tensor.buf, x->u.tensor.buf); /* a view, no copy */
    EXPECT_SHAPE(RUN1("Reshape", N("Reshape"), x, TI64(1, D(2), -1, 4)), 6, 4);
    EXPECT_SHAPE(RUN1("Reshape", N("Reshape"), x, TI64(1, D(3), 0, -1, 2)), 2, 6, 2);
    EXPECT_SHAPE(RUN1("Reshape", N("Reshape"), x, TI64(1, D(1), -1)), 24);
    y = RUN1("Reshape", N("Reshape"), TF(1, D(1), 5), TI64(1, D(0), 0));
    EXPECT_SCALAR(y);
    EXPECT_F32(y, 5);
    /* allowzero: 0 is a real zero dim */
    EXPECT_SHAPE(RUN1("Reshape", ai(N("Reshape"), "allowzero", 1), tz(BB_DT_FLOAT, 2, D(0, 3)),
                      TI64(1, D(2), 3, 0)),
                 3, 0);
    EXPECT_SHAPE(RUN1("Reshape", N("Reshape"), tz(BB_DT_FLOAT, 2, D(0, 3)), TI64(1, D(2), 0, 3)),
                 0, 3);
    ERR("Reshape", N("Reshape"), BB_EINVAL, "more than one -1", x, TI64(1, D(2), -1, -1));
    ERR("Reshape", N("Reshape"), BB_EINVAL, "cannot reshape [2,3,4] (24 elements) to [5,5]", x,
        TI64(1, D(2), 5, 5));
    ERR("Reshape", N("Reshape"), BB_EINVAL, "cannot infer -1", x, TI64(1, D(2), -1, 5));
    ERR("Reshape", N("Reshape"), BB_EINVAL, "invalid shape value -2", x, TI64(1, D(2), -2, 12));
    /* Flatten */
    y = RUN1("Flatten", N("Flatten"), x);
    EXPECT_SHAPE(y, 2, 12);
    EXPECT_SHAPE(RUN1("Flatten", ai(N("Flatten"), "axis", 0), x), 1, 24);
    EXPECT_SHAPE(RUN1("Flatten", ai(N("Flatten"), "axis", 3), x), 24, 1);
    EXPECT_SHAPE(RUN1("Flatten", ai(N("Flatten"), "axis", -1), x), 6, 4);
    ERR("Flatten", ai(N("Flatten"), "axis", 4), BB_EINVAL, "axis 4 out of range", x);
}

static void test_transpose(void **state)
{
    (void)state;
    bb_value *x = TF(2, D(2, 3), 1, 2, 3, 4, 5, 6);
    bb_value *y = RUN1("Transpose", N("Transpose"), x);
    EXPECT_SHAPE(y, 3, 2);
    EXPECT_F32(y, 1, 4, 2, 5, 3, 6);
    bb_value *z = TF(3, D(2, 2, 3), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11);
    y = RUN1("Transpose", AIS(N("Transpose"), "perm", 1, 0, 2), z);
    EXPECT_SHAPE(y, 2, 2, 3);
    EXPECT_F32(y, 0, 1, 2, 6, 7, 8, 3, 4, 5, 9, 10, 11);
    y = RUN1("Transpose", AIS(N("Transpose"), "perm", 2, 0, 1), z);
    EXPECT_SHAPE(y, 3, 2, 2);
    EXPECT_F32(y, 0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11);
    y = RUN1("Transpose", AIS(N("Transpose"), "perm", 0, 2, 1), z); /* batched 2-D planes */
    EXPECT_SHAPE(y, 2, 3, 2);
    EXPECT_F32(y, 0, 3, 1, 4, 2, 5, 6, 9, 7, 10, 8, 11);
    y = RUN1("Transpose", N("Transpose"), z); /* reverse */
    EXPECT_SHAPE(y, 3, 2, 2);
    EXPECT_F32(y, 0, 6, 3, 9, 1, 7, 4, 10, 2, 8, 5, 11);
    /* a larger plane exercises the tiled path */
    int64_t big[40 * 37];
    for (int i = 0; i < 40 * 37; i++)
        big[i] = i;
    bb_value *bi = mk(BB_DT_INT64, 2, D(40, 37), big, sizeof big);
    y = RUN1("Transpose", N("Transpose"), bi);
    EXPECT_SHAPE(y, 37, 40);
    const int64_t *yv = (const int64_t *)(const void *)y->u.tensor.data;
    for (int i = 0; i < 37; i++)
        for (int j = 0; j < 40; j++)
            assert_int_equal(yv[i * 40 + j], j * 37 + i);
    EXPECT_U8(RUN1("Transpose", N("Transpose"), TU8(2, D(1, 3), 1, 2, 3)), 1, 2, 3);
    EXPECT_SHAPE(RUN1("Transpose", N("Transpose"), tz(BB_DT_FLOAT, 2, D(0, 3))), 3, 0);
    ERR("Transpose", AIS(N("Transpose"), "perm", 0, 0), BB_EINVAL, "not a permutation", x);
    ERR("Transpose", AIS(N("Transpose"), "perm", 0), BB_EINVAL, "perm has 1 entries", x);
}

static void test_concat(void **state)
{
    (void)state;
    bb_value *a = TF(2, D(2, 2), 1, 2, 3, 4), *b = TF(2, D(1, 2), 5, 6);
    bb_value *c = TF(2, D(2, 1), 7, 8);
    bb_value *y = RUN1("Concat", ai(N("Concat"), "axis", 0), a, b);
    EXPECT_SHAPE(y, 3, 2);
    EXPECT_F32(y, 1, 2, 3, 4, 5, 6);
    y = RUN1("Concat", ai(N("Concat"), "axis", 1), a, c, a);
    EXPECT_SHAPE(y, 2, 5);
    EXPECT_F32(y, 1, 2, 7, 1, 2, 3, 4, 8, 3, 4);
    y = RUN1("Concat", ai(N("Concat"), "axis", -1), a, tz(BB_DT_FLOAT, 2, D(2, 0)), c);
    EXPECT_F32(y, 1, 2, 7, 3, 4, 8);
    EXPECT_I64(RUN1("Concat", ai(N("Concat"), "axis", 0), TI64(1, D(1), 1), TI64(1, D(2), 2, 3)),
               1, 2, 3);
    EXPECT_SHAPE(RUN1("Concat", ai(N("Concat"), "axis", 0), tz(BB_DT_FLOAT, 1, D(0))), 0);
    ERR("Concat", ai(N("Concat"), "axis", 0), BB_EINVAL, "does not match", a, c);
    ERR("Concat", N("Concat"), BB_EINVAL, "attribute axis is required", a);
    ERR("Concat", ai(N("Concat"), "axis", 2), BB_EINVAL, "axis 2 out of range", a);
    bb_value *in2[2] = {a, TI64(2, D(1, 2), 1, 2)}, *o;
    assert_int_equal(run("Concat", ai(N("Concat"), "axis", 0), in2, 2, &o, 1), BB_ETYPE);
}

static void test_split(void **state)
{
    (void)state;
    bb_value *x = TF(1, D(6), 1, 2, 3, 4, 5, 6), *o[4];
    assert_int_equal(run("Split", N("Split"), INS(x), o, 3), BB_OK);
    EXPECT_F32(o[0], 1, 2);
    EXPECT_F32(o[1], 3, 4);
    EXPECT_F32(o[2], 5, 6);
    assert_ptr_equal(o[1]->u.tensor.buf, x->u.tensor.buf); /* contiguous chunks are views */
    assert_int_equal(run("Split", N("Split"), INS(x, TI64(1, D(2), 2, 4)), o, 2), BB_OK);
    EXPECT_F32(o[0], 1, 2);
    EXPECT_F32(o[1], 3, 4, 5, 6);
    assert_int_equal(run("Split", ai(N("Split"), "num_outputs", 4), INS(x), o, 4), BB_OK);
    EXPECT_F32(o[0], 1, 2);
    EXPECT_F32(o[2], 5, 6);
    EXPECT_SHAPE(o[3], 0);
    assert_int_equal(run("Split", ai(N("Split"), "num_outputs", 3),
                         INS(TF(1, D(5), 1, 2, 3, 4, 5)), o, 3), BB_OK);
    EXPECT_F32(o[1], 3, 4);
    EXPECT_F32(o[2], 5);
    assert_int_equal(run("Split", ai(N("Split"), "num_outputs", 4),
                         INS(TF(1, D(5), 1, 2, 3, 4, 5)), o, 4), BB_EINVAL);
    assert_non_null(strstr(g_err.msg, "cannot split into 4 parts"));
    /* axis 1 copies; zero-sized pieces; the old split attribute */
    bb_value *m = TF(2, D(2, 3), 1, 2, 3, 4, 5, 6);
    assert_int_equal(run("Split", ai(N("Split"), "axis", 1), INS(m, TI64(1, D(3), 1, 0, 2)), o, 3),
                     BB_OK);
    EXPECT_SHAPE(o[0], 2, 1);
    EXPECT_F32(o[0], 1, 4);
    EXPECT_SHAPE(o[1], 2, 0);
    EXPECT_F32(o[2], 2, 3, 5, 6);
    assert_int_equal(run("Split", AIS(ai(N("Split"), "axis", -1), "split", 2, 1), INS(m), o, 2),
                     BB_OK);
    EXPECT_F32(o[0], 1, 2, 4, 5);
    EXPECT_F32(o[1], 3, 6);
    assert_int_equal(run("Split", N("Split"), INS(x), o, 4), BB_EINVAL);
    assert_non_null(strstr(g_err.msg, "does not split evenly"));
    assert_int_equal(run("Split", N("Split"), INS(x, TI64(1, D(2), 2, 3)), o, 2), BB_EINVAL);
    assert_non_null(strstr(g_err.msg, "sum to 5"));
    assert_int_equal(run("Split", N("Split"), INS(x, TI64(1, D(2), 2, 4)), o, 3), BB_EINVAL);
    assert_int_equal(run("Split", N("Split"), INS(x, TI64(1, D(2), 8, -2)), o, 2), BB_EINVAL);
}

static void test_slice(void **state)
{
    (void)state;
    bb_value *x = TF(2, D(3, 4), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11);
    bb_value *y = RUN1("Slice", N("Slice"), x, TI64(1, D(2), 1, 0), TI64(1, D(2), 3, 2));
    EXPECT_SHAPE(y, 2, 2);
    EXPECT_F32(y, 4, 5, 8, 9);
    /* axes (negative) and steps */
    y = RUN1("Slice", N("Slice"), x, TI64(1, D(1), 0), TI64(1, D(1), 4), TI64(1, D(1), -1),
             TI64(1, D(1), 2));
    EXPECT_SHAPE(y, 3, 2);
    EXPECT_F32(y, 0, 2, 4, 6, 8, 10);
    /* negative starts/ends, clamping of huge ends */
    y = RUN1("Slice", N("Slice"), x, TI64(1, D(2), -2, -3), TI64(1, D(2), INT64_MAX, -1));
    EXPECT_F32(y, 5, 6, 9, 10);
    /* negative step reverses */
    y = RUN1("Slice", N("Slice"), x, TI64(1, D(1), -1), TI64(1, D(1), INT64_MIN),
             TI64(1, D(1), 1), TI64(1, D(1), -1));
    EXPECT_SHAPE(y, 3, 4);
    EXPECT_F32(y, 3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8);
    y = RUN1("Slice", N("Slice"), x, TI64(1, D(2), 2, 3), TI64(1, D(2), 0, 0), TI64(1, D(2), 0, 1),
             TI64(1, D(2), -2, -2));
    EXPECT_SHAPE(y, 1, 2);
    EXPECT_F32(y, 11, 9);
    /* empty result, start past the end */
    EXPECT_SHAPE(RUN1("Slice", N("Slice"), x, TI64(1, D(1), 2), TI64(1, D(1), 1)), 0, 4);
    EXPECT_SHAPE(RUN1("Slice", N("Slice"), x, TI64(1, D(1), 10), TI64(1, D(1), 20)), 0, 4);
    EXPECT_SHAPE(RUN1("Slice", N("Slice"), tz(BB_DT_FLOAT, 1, D(0)), TI64(1, D(1), 0),
                      TI64(1, D(1), 5)),
                 0);
    EXPECT_I32(RUN1("Slice", N("Slice"), TI32(1, D(5), 1, 2, 3, 4, 5), TI64(1, D(1), 1),
                    TI64(1, D(1), -1)),
               2, 3, 4);
    ERR("Slice", N("Slice"), BB_EINVAL, "step 0", x, TI64(1, D(1), 0), TI64(1, D(1), 1),
        TI64(1, D(1), 0), TI64(1, D(1), 0));
    ERR("Slice", N("Slice"), BB_EINVAL, "axis 2 out of range", x, TI64(1, D(1), 0),
        TI64(1, D(1), 1), TI64(1, D(1), 2));
    ERR("Slice", N("Slice"), BB_EINVAL, "repeated", x, TI64(1, D(2), 0, 0), TI64(1, D(2), 1, 1),
        TI64(1, D(2), 0, -2));
    ERR("Slice", N("Slice"), BB_EINVAL, "starts has 2 entries, ends 1", x, TI64(1, D(2), 0, 0),
        TI64(1, D(1), 1));
}

static void test_squeeze_unsqueeze(void **state)
{
    (void)state;
    bb_value *x = TF(4, D(1, 3, 1, 2), 1, 2, 3, 4, 5, 6);
    bb_value *y = RUN1("Squeeze", N("Squeeze"), x);
    EXPECT_SHAPE(y, 3, 2);
    EXPECT_F32(y, 1, 2, 3, 4, 5, 6);
    EXPECT_SHAPE(RUN1("Squeeze", N("Squeeze"), x, TI64(1, D(1), 0)), 3, 1, 2);
    EXPECT_SHAPE(RUN1("Squeeze", N("Squeeze"), x, TI64(1, D(1), -2)), 1, 3, 2);
    EXPECT_SHAPE(RUN1("Squeeze", AIS(N("Squeeze"), "axes", 2), x), 1, 3, 2);
    EXPECT_SCALAR(RUN1("Squeeze", N("Squeeze"), TF(2, D(1, 1), 7)));
    ERR("Squeeze", N("Squeeze"), BB_EINVAL, "cannot squeeze axis 1 of size 3", x,
        TI64(1, D(1), 1));
    ERR("Squeeze", N("Squeeze"), BB_EINVAL, "axis 4 out of range", x, TI64(1, D(1), 4));
    y = RUN1("Unsqueeze", N("Unsqueeze"), TF(1, D(3), 1, 2, 3), TI64(1, D(2), 0, -1));
    EXPECT_SHAPE(y, 1, 3, 1);
    EXPECT_F32(y, 1, 2, 3);
    EXPECT_SHAPE(RUN1("Unsqueeze", N("Unsqueeze"), TF(2, D(2, 1), 1, 2), TI64(1, D(2), 1, 3)), 2,
                 1, 1, 1);
    EXPECT_SHAPE(RUN1("Unsqueeze", N("Unsqueeze"), TF(0, NULL, 5), TI64(1, D(1), 0)), 1);
    EXPECT_SHAPE(RUN1("Unsqueeze", N("Unsqueeze"), tz(BB_DT_FLOAT, 1, D(0)), TI64(1, D(1), 1)), 0,
                 1);
    /* opset < 13: axes as an attribute; neither input nor attribute is an error */
    EXPECT_SHAPE(RUN1("Unsqueeze", AIS(N("Unsqueeze"), "axes", 0, 2), TF(1, D(2), 1, 2)), 1, 2,
                 1);
    ERR("Unsqueeze", N("Unsqueeze"), BB_EINVAL, "axes are required", TF(1, D(1), 1));
    ERR("Unsqueeze", N("Unsqueeze"), BB_EINVAL, "repeated", TF(1, D(1), 1),
        TI64(1, D(2), 0, -3));
    ERR("Unsqueeze", N("Unsqueeze"), BB_EINVAL, "axis 3 out of range", TF(1, D(1), 1),
        TI64(1, D(1), 3));
}

static void test_identity_cast(void **state)
{
    (void)state;
    bb_value *x = TF(1, D(5), 1.7f, -1.7f, 3e10f, NAN, -0.0f);
    assert_ptr_equal(RUN1("Identity", N("Identity"), x), x);
    EXPECT_I32(RUN1("Cast", ai(N("Cast"), "to", BB_DT_INT32), x), 1, -1, INT32_MAX, 0, 0);
    EXPECT_U8(RUN1("Cast", ai(N("Cast"), "to", BB_DT_UINT8), x), 1, 0, 255, 0, 0);
    EXPECT_BOOL(RUN1("Cast", ai(N("Cast"), "to", BB_DT_BOOL), x), 1, 1, 1, 1, 0);
    EXPECT_F64(RUN1("Cast", ai(N("Cast"), "to", BB_DT_DOUBLE), TF(1, D(2), 0.5, -2)), 0.5, -2);
    EXPECT_F32(RUN1("Cast", ai(N("Cast"), "to", BB_DT_FLOAT), TI64(1, D(2), -3, 1LL << 40)), -3,
               1099511627776.0);
    EXPECT_F32(RUN1("Cast", ai(N("Cast"), "to", BB_DT_FLOAT), TB(1, D(2), 1, 0)), 1, 0);
    EXPECT_I8(RUN1("Cast", ai(N("Cast"), "to", BB_DT_INT8), TI32(1, D(2), 300, -129)), 44, 127);
    EXPECT_I64(RUN1("Cast", ai(N("Cast"), "to", BB_DT_INT64), TU8(1, D(2), 255, 0)), 255, 0);
    /* float16 round trip */
    bb_value *h = RUN1("Cast", ai(N("Cast"), "to", BB_DT_FLOAT16), TF(1, D(4), 1, -2.5, 65504, 1e-7));
    EXPECT_I_(BB_DT_FLOAT16, h, 0x3c00, 0xc100, 0x7bff, 0x0002);
    EXPECT_F32(RUN1("Cast", ai(N("Cast"), "to", BB_DT_FLOAT), h), 1, -2.5, 65504, 1.1920929e-7);
    assert_ptr_equal(RUN1("Cast", ai(N("Cast"), "to", BB_DT_FLOAT), x), x); /* same type */
    ERR("Cast", ai(N("Cast"), "to", BB_DT_STRING), BB_EUNSUPPORTED, "cast to dtype string", x);
    ERR("Cast", N("Cast"), BB_EINVAL, "attribute to is required", x);
    EXPECT_SHAPE(RUN1("Cast", ai(N("Cast"), "to", BB_DT_INT64), tz(BB_DT_FLOAT, 2, D(0, 2))), 0,
                 2);
}

/* ---- reductions ----------------------------------------------------------------------------------- */

static void test_reduce(void **state)
{
    (void)state;
    bb_value *x = TF(3, D(2, 2, 2), 1, 2, 3, 4, 5, 6, 7, 8);
    bb_value *y = RUN1("ReduceSum", N("ReduceSum"), x, TI64(1, D(1), 1));
    EXPECT_SHAPE(y, 2, 1, 2);
    EXPECT_F32(y, 4, 6, 12, 14);
    y = RUN1("ReduceSum", ai(N("ReduceSum"), "keepdims", 0), x, TI64(1, D(2), 0, -1));
    EXPECT_SHAPE(y, 2);
    EXPECT_F32(y, 14, 22);
    y = RUN1("ReduceSum", N("ReduceSum"), x); /* no axes: everything */
    EXPECT_SHAPE(y, 1, 1, 1);
    EXPECT_F32(y, 36);
    y = RUN1("ReduceSum", ai(N("ReduceSum"), "keepdims", 0), x, TI64(1, D(0), 0));
    EXPECT_SCALAR(y);
    EXPECT_F32(y, 36);
    assert_ptr_equal(RUN1("ReduceSum", ai(N("ReduceSum"), "noop_with_empty_axes", 1), x), x);
    y = RUN1("ReduceSum", AIS(N("ReduceSum"), "axes", 2), x); /* axes as attribute */
    EXPECT_F32(y, 3, 7, 11, 15);
    y = RUN1("ReduceMean", N("ReduceMean"), x, TI64(1, D(1), 0));
    EXPECT_F32(y, 3, 4, 5, 6);
    y = RUN1("ReduceMean", ai(N("ReduceMean"), "keepdims", 0), x);
    EXPECT_F32(y, 4.5);
    y = RUN1("ReduceMax", N("ReduceMax"), TF(2, D(2, 3), 1, 9, 3, -4, -5, -6), TI64(1, D(1), 1));
    EXPECT_F32(y, 9, -4);
    y = RUN1("ReduceMin", N("ReduceMin"), TF(2, D(2, 3), 1, 9, 3, -4, -5, -6), TI64(1, D(1), 0));
    EXPECT_F32(y, -4, -5, -6);
    EXPECT_F32(RUN1("ReduceMax", N("ReduceMax"), TF(1, D(3), 1, NAN, 3)), NAN);
    /* integer types */
    EXPECT_I32(RUN1("ReduceSum", N("ReduceSum"), TI32(2, D(2, 2), 1, 2, 3, INT32_MAX),
                    TI64(1, D(1), 1)),
               3, INT32_MIN + 2);
    EXPECT_I64(RUN1("ReduceMean", N("ReduceMean"), TI64(1, D(3), 1, 2, 4)), 2);
    EXPECT_I8(RUN1("ReduceMin", N("ReduceMin"), TI8(1, D(3), 5, -7, 3)), -7);
    EXPECT_U8(RUN1("ReduceMax", N("ReduceMax"), TU8(1, D(3), 5, 200, 3)), 200);
    EXPECT_F64(RUN1("ReduceSum", N("ReduceSum"), TD(1, D(2), 0.25, 0.5)), 0.75);
    /* empty reductions */
    bb_value *e = tz(BB_DT_FLOAT, 2, D(2, 0));
    EXPECT_F32(RUN1("ReduceSum", N("ReduceSum"), e, TI64(1, D(1), 1)), 0, 0);
    EXPECT_F32(RUN1("ReduceMax", N("ReduceMax"), e, TI64(1, D(1), 1)), -INFINITY, -INFINITY);
    EXPECT_F32(RUN1("ReduceMin", N("ReduceMin"), e, TI64(1, D(1), 1)), INFINITY, INFINITY);
    EXPECT_F32(RUN1("ReduceMean", N("ReduceMean"), e, TI64(1, D(1), 1)), NAN, NAN);
    EXPECT_SHAPE(RUN1("ReduceSum", N("ReduceSum"), e, TI64(1, D(1), 0)), 1, 0);
    ERR("ReduceSum", N("ReduceSum"), BB_EINVAL, "axis 3 out of range for rank 3", x,
        TI64(1, D(1), 3));
    ERR("ReduceSum", N("ReduceSum"), BB_EINVAL, "repeated", x, TI64(1, D(2), 1, -2));
    ERR("ReduceSum", N("ReduceSum"), BB_EUNSUPPORTED, "ReduceSum: dtype int8 not supported",
        TI8(1, D(1), 1));
    ERR("ReduceMean", N("ReduceMean"), BB_EUNSUPPORTED, "dtype bool", TB(1, D(1), 1));
}

static void test_argmax(void **state)
{
    (void)state;
    bb_value *x = TF(2, D(2, 3), 1, 9, 9, 7, 2, 7);
    bb_value *y = RUN1("ArgMax", N("ArgMax"), x);
    EXPECT_SHAPE(y, 1, 3);
    EXPECT_I64(y, 1, 0, 0);
    y = RUN1("ArgMax", ai(ai(N("ArgMax"), "axis", -1), "keepdims", 0), x);
    EXPECT_SHAPE(y, 2);
    EXPECT_I64(y, 1, 0);
    y = RUN1("ArgMax", ai(ai(N("ArgMax"), "axis", 1), "select_last_index", 1), x);
    EXPECT_SHAPE(y, 2, 1);
    EXPECT_I64(y, 2, 2);
    EXPECT_I64(RUN1("ArgMax", N("ArgMax"), TI32(1, D(4), -5, 3, -1, 3)), 1);
    ERR("ArgMax", N("ArgMax"), BB_EINVAL, "empty axis", tz(BB_DT_FLOAT, 2, D(0, 3)));
    EXPECT_SHAPE(RUN1("ArgMax", ai(N("ArgMax"), "axis", 1), tz(BB_DT_FLOAT, 2, D(0, 3))), 0, 1);
}

/* ---- comparisons and Where ---------------------------------------------------------------------- */

static void test_compare_where(void **state)
{
    (void)state;
    bb_value *a = TF(2, D(2, 2), 1, 2, 3, 4), *b = TF(1, D(2), 2, 2);
    bb_value *y = RUN1("Equal", N("Equal"), a, b);
    EXPECT_SHAPE(y, 2, 2);
    EXPECT_BOOL(y, 0, 1, 0, 0);
    EXPECT_BOOL(RUN1("Greater", N("Greater"), a, b), 0, 0, 1, 1);
    EXPECT_BOOL(RUN1("Less", N("Less"), a, b), 1, 0, 0, 0);
    EXPECT_BOOL(RUN1("Equal", N("Equal"), TI64(1, D(3), 1, 2, 3), TI64(0, NULL, 2)), 0, 1, 0);
    EXPECT_BOOL(RUN1("Greater", N("Greater"), TU8(1, D(2), 200, 1), TU8(1, D(1), 100)), 1, 0);
    EXPECT_BOOL(RUN1("Equal", N("Equal"), TB(1, D(2), 1, 0), TB(1, D(2), 1, 1)), 1, 0);
    EXPECT_BOOL(RUN1("Equal", N("Equal"), TF(1, D(1), NAN), TF(1, D(1), NAN)), 0);
    ERR("Less", N("Less"), BB_EUNSUPPORTED, "dtype bool", TB(1, D(1), 1), TB(1, D(1), 0));
    /* Where broadcasts all three */
    y = RUN1("Where", N("Where"), TB(2, D(2, 1), 1, 0), TF(1, D(3), 1, 2, 3), TF(0, NULL, -1));
    EXPECT_SHAPE(y, 2, 3);
    EXPECT_F32(y, 1, 2, 3, -1, -1, -1);
    EXPECT_I64(RUN1("Where", N("Where"), TB(1, D(3), 1, 0, 1), TI64(1, D(3), 1, 2, 3),
                    TI64(1, D(3), 4, 5, 6)),
               1, 5, 3);
    ERR("Where", N("Where"), BB_ETYPE, "X and Y dtypes", TB(1, D(1), 1), TF(1, D(1), 1),
        TI64(1, D(1), 1));
    ERR("Where", N("Where"), BB_EINVAL, "not broadcastable", TB(1, D(2), 1, 0),
        TF(1, D(3), 1, 2, 3), TF(1, D(1), 1));
}

/* ---- normalization --------------------------------------------------------------------------------- */

static void test_batchnorm(void **state)
{
    (void)state;
    /* X [1,2,1,2]; channel 0: scale 1, B 0, mean 1, var 4 (eps 0); channel 1:
     * scale 2, B 1, mean 0, var 1 */
    bb_value *x = TF(4, D(1, 2, 1, 2), 3, 5, 1, -1);
    bb_value *sc = TF(1, D(2), 1, 2), *b = TF(1, D(2), 0, 1), *m = TF(1, D(2), 1, 0);
    bb_value *v = TF(1, D(2), 4, 1);
    bb_value *y = RUN1("BatchNormalization", af(N("BatchNormalization"), "epsilon", 0), x, sc, b,
                       m, v);
    EXPECT_SHAPE(y, 1, 2, 1, 2);
    EXPECT_F32(y, 1, 2, 3, -1);
    /* default epsilon 1e-5 on a [2,2] input */
    y = RUN1("BatchNormalization", N("BatchNormalization"), TF(2, D(2, 2), 1, 2, 3, 4),
             TF(1, D(2), 1, 1), TF(1, D(2), 0, 0), TF(1, D(2), 0, 0), TF(1, D(2), 1, 1));
    EXPECT_F32(y, 0.999995, 1.99999, 2.999985, 3.99998);
    ERR("BatchNormalization", ai(N("BatchNormalization"), "training_mode", 1), BB_EUNSUPPORTED,
        "training_mode", x, sc, b, m, v);
    bb_value *in[5] = {x, TF(1, D(3), 1, 1, 1), b, m, v}, *o;
    assert_int_equal(run("BatchNormalization", N("BatchNormalization"), in, 5, &o, 1), BB_EINVAL);
    assert_non_null(strstr(g_err.msg, "scale must have shape [2]"));
    ERR("BatchNormalization", N("BatchNormalization"), BB_EUNSUPPORTED, "dtype int32",
        TI32(2, D(1, 2), 1, 2), sc, b, m, v);
}

static void test_layernorm(void **state)
{
    (void)state;
    bb_value *x = TF(2, D(2, 3), 1, 2, 3, 0, 3, 6);
    bb_value *sc = TF(1, D(3), 1, 1, 2), *b = TF(1, D(3), 0, 1, 0);
    bb_value *o[3];
    bb_value *in[3] = {x, sc, b};
    assert_int_equal(run("LayerNormalization", af(N("LayerNormalization"), "epsilon", 0), in, 3, o,
                         3),
                     BB_OK);
    const double k = 1.224744871; /* rows normalize to [-k, 0, k] */
    EXPECT_SHAPE(o[0], 2, 3);
    EXPECT_F32(o[0], -k, 1, 2 * k, -k, 1, 2 * k);
    EXPECT_SHAPE(o[1], 2, 1);
    EXPECT_F32(o[1], 2, 3);
    EXPECT_SHAPE(o[2], 2, 1);
    EXPECT_F32(o[2], k, 1 / sqrt(6.0));
    /* only Y requested */
    assert_int_equal(run("LayerNormalization", N("LayerNormalization"), in, 2, o, 1), BB_OK);
    EXPECT_SHAPE(o[0], 2, 3);
}

static void test_layernorm_more(void **state)
{
    (void)state;
    bb_value *x = TF(2, D(2, 2), 1, 3, 5, 7);
    /* axis 0 normalizes everything (mean 4, var 5), no bias, scalar-like scale */
    bb_value *y = RUN1("LayerNormalization", af(ai(N("LayerNormalization"), "axis", 0), "epsilon", 0),
                       x, TF(1, D(1), 1));
    double s = 1 / sqrt(5.0);
    EXPECT_F32(y, -3 * s, -1 * s, 1 * s, 3 * s);
    y = RUN1("LayerNormalization", N("LayerNormalization"), x, TF(1, D(2), 1, 1));
    EXPECT_F32(y, -0.999995, 0.999995, -0.999995, 0.999995);
    EXPECT_F64(RUN1("LayerNormalization", af(N("LayerNormalization"), "epsilon", 0),
                    TD(1, D(2), 0, 2), TD(1, D(2), 1, 1), TD(1, D(2), 0, 0)),
               -1, 1);
    ERR("LayerNormalization", N("LayerNormalization"), BB_EINVAL, "Scale of shape [3]", x,
        TF(1, D(3), 1, 1, 1));
    ERR("LayerNormalization", N("LayerNormalization"), BB_EUNSUPPORTED, "dtype int64",
        TI64(1, D(1), 1), TI64(1, D(1), 1));
}

/* ---- conv and pools ------------------------------------------------------------------------------- */

static void test_conv(void **state)
{
    (void)state;
    /* X 1x1x3x3 = 0..8; W 1x1x2x2 = [1,2,3,4] */
    bb_value *x = TF(4, D(1, 1, 3, 3), 0, 1, 2, 3, 4, 5, 6, 7, 8);
    bb_value *w = TF(4, D(1, 1, 2, 2), 1, 2, 3, 4);
    bb_value *y = RUN1("Conv", N("Conv"), x, w);
    EXPECT_SHAPE(y, 1, 1, 2, 2);
    EXPECT_F32(y, 27, 37, 57, 67);
    y = RUN1("Conv", N("Conv"), x, w, TF(1, D(1), 10));
    EXPECT_F32(y, 37, 47, 67, 77);
    /* pads 1 all round, stride 2 -> 2x2 */
    y = RUN1("Conv", AIS(AIS(N("Conv"), "pads", 1, 1, 1, 1), "strides", 2, 2), x, w);
    EXPECT_SHAPE(y, 1, 1, 2, 2);
    EXPECT_F32(y, 0, 11, 30, 67);
    /* dilation 2 on a 2x2 kernel covers the 3x3 corners */
    y = RUN1("Conv", AIS(N("Conv"), "dilations", 2, 2), x, w);
    EXPECT_SHAPE(y, 1, 1, 1, 1);
    EXPECT_F32(y, 0 * 1 + 2 * 2 + 6 * 3 + 8 * 4);
    /* SAME_UPPER keeps 3x3 (padding at the end) */
    y = RUN1("Conv", as(N("Conv"), "auto_pad", "SAME_UPPER"), x, w);
    EXPECT_SHAPE(y, 1, 1, 3, 3);
    EXPECT_F32(y, 27, 37, 17, 57, 67, 29, 20, 23, 8);
    y = RUN1("Conv", as(N("Conv"), "auto_pad", "SAME_LOWER"), x, w);
    EXPECT_F32(y, 0, 4, 11, 12, 27, 37, 30, 57, 67);
    y = RUN1("Conv", as(N("Conv"), "auto_pad", "VALID"), x, w);
    EXPECT_F32(y, 27, 37, 57, 67);
    /* group 2: each channel its own 1x1 filter; 1x1 direct path */
    bb_value *x2 = TF(4, D(1, 2, 1, 2), 1, 2, 3, 4);
    y = RUN1("Conv", ai(N("Conv"), "group", 2), x2, TF(4, D(2, 1, 1, 1), 10, 100));
    EXPECT_SHAPE(y, 1, 2, 1, 2);
    EXPECT_F32(y, 10, 20, 300, 400);
    /* 1x1 mixing channels, batch 2 */
    y = RUN1("Conv", N("Conv"), TF(4, D(2, 2, 1, 1), 1, 2, 3, 4), TF(4, D(1, 2, 1, 1), 1, 1));
    EXPECT_SHAPE(y, 2, 1, 1, 1);
    EXPECT_F32(y, 3, 7);
    /* 1-D conv with stride and kernel_shape, and a double one */
    y = RUN1("Conv", AIS(AIS(N("Conv"), "strides", 2), "kernel_shape", 2),
             TF(3, D(1, 1, 5), 1, 2, 3, 4, 5), TF(3, D(1, 1, 2), 1, -1));
    EXPECT_SHAPE(y, 1, 1, 2);
    EXPECT_F32(y, -1, -1);
    EXPECT_F64(RUN1("Conv", N("Conv"), TD(3, D(1, 1, 2), 1, 2), TD(3, D(1, 1, 2), 3, 4)), 11);
    /* 3-D */
    y = RUN1("Conv", N("Conv"), TF(5, D(1, 1, 2, 2, 2), 1, 2, 3, 4, 5, 6, 7, 8),
             TF(5, D(1, 1, 2, 1, 1), 1, 1));
    EXPECT_SHAPE(y, 1, 1, 1, 2, 2);
    EXPECT_F32(y, 6, 8, 10, 12);
    /* zero batch */
    EXPECT_SHAPE(RUN1("Conv", N("Conv"), tz(BB_DT_FLOAT, 4, D(0, 1, 3, 3)), w), 0, 1, 2, 2);
    ERR("Conv", N("Conv"), BB_EINVAL, "group 1 does not fit X channels 2", x2, w);
    ERR("Conv", AIS(N("Conv"), "kernel_shape", 3, 3), BB_EINVAL, "kernel_shape does not match",
        x, w);
    ERR("Conv", N("Conv"), BB_EINVAL, "smaller than the dilated kernel", x,
        tz(BB_DT_FLOAT, 4, D(1, 1, 4, 4)));
    ERR("Conv", as(N("Conv"), "auto_pad", "FULL"), BB_EINVAL, "auto_pad \"FULL\"", x, w);
    ERR("Conv", AIS(N("Conv"), "strides", 0, 1), BB_EINVAL, "stride 0", x, w);
    ERR("Conv", AIS(N("Conv"), "pads", 1, 1), BB_EINVAL, "pads has 2 entries", x, w);
    ERR("Conv", N("Conv"), BB_EUNSUPPORTED, "Conv: dtype int32 not supported",
        TI32(4, D(1, 1, 1, 1), 1), TI32(4, D(1, 1, 1, 1), 1));
}

static void test_pools(void **state)
{
    (void)state;
    bb_value *x = TF(4, D(1, 1, 4, 4), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
    bb_node *mp = AIS(AIS(N("MaxPool"), "kernel_shape", 2, 2), "strides", 2, 2);
    bb_value *o[2];
    assert_int_equal(run("MaxPool", mp, INS(x), o, 2), BB_OK);
    EXPECT_SHAPE(o[0], 1, 1, 2, 2);
    EXPECT_F32(o[0], 6, 8, 14, 16);
    EXPECT_I64(o[1], 5, 7, 13, 15);
    assert_int_equal(run("MaxPool", ai(mp, "storage_order", 1), INS(x), o, 2), BB_OK);
    EXPECT_I64(o[1], 5, 13, 7, 15); /* column-major: h + w * H */
    /* stride 1 default, pads, ceil_mode */
    bb_value *y = RUN1("MaxPool", AIS(N("MaxPool"), "kernel_shape", 3, 3), x);
    EXPECT_F32(y, 11, 12, 15, 16);
    y = RUN1("MaxPool", AIS(AIS(N("MaxPool"), "kernel_shape", 2, 2), "pads", 1, 1, 1, 1),
             TF(4, D(1, 1, 2, 2), 1, 2, 3, 4));
    EXPECT_SHAPE(y, 1, 1, 3, 3);
    EXPECT_F32(y, 1, 2, 2, 3, 4, 4, 3, 4, 4);
    bb_value *x5 = TF(4, D(1, 1, 1, 5), 1, 5, 2, 4, 3);
    bb_node *cm = AIS(AIS(N("MaxPool"), "kernel_shape", 1, 2), "strides", 1, 2);
    EXPECT_F32(RUN1("MaxPool", cm, x5), 5, 4);
    y = RUN1("MaxPool", ai(cm, "ceil_mode", 1), x5);
    EXPECT_SHAPE(y, 1, 1, 1, 3);
    EXPECT_F32(y, 5, 4, 3);
    y = RUN1("MaxPool", as(AIS(AIS(N("MaxPool"), "kernel_shape", 1, 2), "strides", 1, 2),
                           "auto_pad", "SAME_UPPER"), x5);
    EXPECT_F32(y, 5, 4, 3);
    EXPECT_F32(RUN1("MaxPool", AIS(AIS(N("MaxPool"), "kernel_shape", 1, 2), "dilations", 1, 2),
                    x5), 2, 5, 3);
    EXPECT_U8(RUN1("MaxPool", AIS(N("MaxPool"), "kernel_shape", 2),
                   TU8(3, D(1, 1, 3), 3, 200, 1)), 200, 200);
    EXPECT_I8(RUN1("MaxPool", AIS(N("MaxPool"), "kernel_shape", 2),
                   TI8(3, D(1, 1, 3), -3, -100, -1)), -3, -1);
    /* AveragePool: with and without counting padding */
    bb_value *x2 = TF(4, D(1, 1, 2, 2), 1, 2, 3, 4);
    bb_node *ap = AIS(AIS(N("AveragePool"), "kernel_shape", 2, 2), "pads", 1, 1, 0, 0);
    y = RUN1("AveragePool", ap, x2);
    EXPECT_SHAPE(y, 1, 1, 2, 2);
    EXPECT_F32(y, 1, 1.5, 2, 2.5);
    y = RUN1("AveragePool", ai(ap, "count_include_pad", 1), x2);
    EXPECT_F32(y, 0.25, 0.75, 1, 2.5);
    EXPECT_F32(RUN1("AveragePool", AIS(N("AveragePool"), "kernel_shape", 2, 2), x), 3.5, 4.5, 5.5,
               7.5, 8.5, 9.5, 11.5, 12.5, 13.5);
    EXPECT_F64(RUN1("AveragePool", AIS(N("AveragePool"), "kernel_shape", 2),
                    TD(3, D(1, 1, 2), 1, 2)), 1.5);
    /* GlobalAveragePool */
    y = RUN1("GlobalAveragePool", N("GlobalAveragePool"), TF(4, D(1, 2, 2, 1), 1, 3, 5, 9));
    EXPECT_SHAPE(y, 1, 2, 1, 1);
    EXPECT_F32(y, 2, 7);
    EXPECT_SHAPE(RUN1("GlobalAveragePool", N("GlobalAveragePool"), tz(BB_DT_FLOAT, 3, D(0, 2, 5))),
                 0, 2, 1);
    EXPECT_SHAPE(RUN1("MaxPool", AIS(N("MaxPool"), "kernel_shape", 2), tz(BB_DT_FLOAT, 3, D(0, 2, 5))),
                 0, 2, 4);
    ERR("MaxPool", N("MaxPool"), BB_EINVAL, "kernel_shape is required", x);
    ERR("MaxPool", AIS(N("MaxPool"), "kernel_shape", 2), BB_EINVAL, "kernel_shape has 1 entries",
        x);
    ERR("AveragePool", AIS(N("AveragePool"), "kernel_shape", 5, 5), BB_EINVAL, "smaller than", x);
    ERR("AveragePool", AIS(N("AveragePool"), "kernel_shape", 1), BB_EUNSUPPORTED,
        "AveragePool: dtype uint8 not supported", TU8(3, D(1, 1, 1), 1));
    ERR("GlobalAveragePool", N("GlobalAveragePool"), BB_EUNSUPPORTED, "dtype int64",
        TI64(3, D(1, 1, 1), 1));
}

/* ---- creation ------------------------------------------------------------------------------------- */

static bb_tensor_proto *tproto(int32_t dt, uint32_t nd, const int64_t *dims, const void *data,
                               size_t nbytes)
{
    bb_tensor_proto *t = bb_arena_calloc(A, 1, sizeof *t);
    assert_non_null(t);
    t->name = "t";
    t->data_type = dt;
    for (uint32_t i = 0; i < nd; i++)
        *(int64_t *)BB_VEC_PUSH(A, &t->dims) = dims[i];
    t->raw_data.data = bb_arena_memdup(A, data, nbytes ? nbytes : 1);
    t->raw_data.len = nbytes;
    t->has_raw_data = true;
    return t;
}

static void test_creation(void **state)
{
    (void)state;
    bb_value *y = RUN1("Zeros", N("Zeros"), TI64(1, D(2), 2, 3));
    EXPECT_SHAPE(y, 2, 3);
    EXPECT_F32(y, 0, 0, 0, 0, 0, 0);
    y = RUN1("Ones", N("Ones"), TI64(1, D(2), 1, 2));
    EXPECT_F32(y, 1, 1);
    EXPECT_I64(RUN1("Ones", ai(N("Ones"), "dtype", BB_DT_INT64), TI64(1, D(1), 3)), 1, 1, 1);
    EXPECT_I32(RUN1("Zeros", ai(N("Zeros"), "dtype", BB_DT_INT32), TI64(1, D(1), 2)), 0, 0);
    EXPECT_BOOL(RUN1("Ones", ai(N("Ones"), "dtype", BB_DT_BOOL), TI64(1, D(1), 2)), 1, 1);
    EXPECT_F64(RUN1("Ones", ai(N("Ones"), "dtype", BB_DT_DOUBLE), TI64(1, D(1), 1)), 1);
    EXPECT_SCALAR(RUN1("Ones", N("Ones"), tz(BB_DT_INT64, 1, D(0))));
    EXPECT_SHAPE(RUN1("Zeros", N("Zeros"), TI64(1, D(2), 0, 5)), 0, 5);
    ERR("Zeros", N("Zeros"), BB_EINVAL, "negative dimension -1", TI64(1, D(1), -1));
    ERR("Ones", ai(N("Ones"), "dtype", BB_DT_STRING), BB_EUNSUPPORTED, "dtype string",
        TI64(1, D(1), 1));
    /* Constant */
    bb_node *c = N("Constant");
    bb_attr *a = bb_node_add_attr(A, c, "value", BB_ATTR_TENSOR);
    a->t = tproto(BB_DT_FLOAT, 2, D(1, 2), (const float[]){1.5f, -2}, 8);
    y = RUN0("Constant", c);
    EXPECT_SHAPE(y, 1, 2);
    EXPECT_F32(y, 1.5, -2);
    y = RUN0("Constant", af(N("Constant"), "value_float", 0.25f));
    EXPECT_SCALAR(y);
    EXPECT_F32(y, 0.25);
    y = RUN0("Constant", ai(N("Constant"), "value_int", 7));
    EXPECT_I64(y, 7);
    y = RUN0("Constant", AIS(N("Constant"), "value_ints", 1, 2, 3));
    EXPECT_SHAPE(y, 3);
    EXPECT_I64(y, 1, 2, 3);
    bb_node *cf = N("Constant");
    bb_attr *fl = bb_node_add_attr(A, cf, "value_floats", BB_ATTR_FLOATS);
    *(float *)BB_VEC_PUSH(A, &fl->floats) = 0.5f;
    *(float *)BB_VEC_PUSH(A, &fl->floats) = 4;
    EXPECT_F32(RUN0("Constant", cf), 0.5, 4);
    bb_value *o;
    assert_int_equal(run("Constant", ai(af(N("Constant"), "value_float", 1), "value_int", 1), NULL,
                         0, &o, 1),
                     BB_EINVAL);
    assert_non_null(strstr(g_err.msg, "exactly one value attribute"));
    assert_int_equal(run("Constant", as(N("Constant"), "value_string", "x"), NULL, 0, &o, 1),
                     BB_EUNSUPPORTED);
    bb_node *bad = N("Constant");
    bb_node_add_attr(A, bad, "value", BB_ATTR_TENSOR)->t =
        tproto(BB_DT_FLOAT, 1, D(3), (const float[]){1, 2}, 8);
    assert_int_equal(run("Constant", bad, NULL, 0, &o, 1), BB_EINVAL);
    assert_non_null(strstr(g_err.msg, "8 data bytes for 3 elements"));
}

/* ---- indexing ------------------------------------------------------------------------------------------ */

static void test_gather(void **state)
{
    (void)state;
    bb_value *d = TF(2, D(3, 2), 1, 2, 3, 4, 5, 6);
    bb_value *y = RUN1("Gather", N("Gather"), d, TI64(2, D(2, 2), 0, 1, 1, 2));
    EXPECT_SHAPE(y, 2, 2, 2);
    EXPECT_F32(y, 1, 2, 3, 4, 3, 4, 5, 6);
    y = RUN1("Gather", ai(N("Gather"), "axis", 1), d, TI32(1, D(2), 1, -2));
    EXPECT_SHAPE(y, 3, 2);
    EXPECT_F32(y, 2, 1, 4, 3, 6, 5);
    y = RUN1("Gather", N("Gather"), d, TI64(0, NULL, -1)); /* scalar index drops the axis */
    EXPECT_SHAPE(y, 2);
    EXPECT_F32(y, 5, 6);
    y = RUN1("Gather", N("Gather"), d, tz(BB_DT_INT64, 1, D(0)));
    EXPECT_SHAPE(y, 0, 2);
    EXPECT_I64(RUN1("Gather", N("Gather"), TI64(1, D(3), 10, 20, 30), TI64(1, D(2), 2, 0)), 30, 10);
    ERR("Gather", N("Gather"), BB_EINVAL, "index 3 out of range [-3, 3) on axis 0", d,
        TI64(1, D(1), 3));
    ERR("Gather", N("Gather"), BB_EINVAL, "index -4 out of range", d, TI64(1, D(1), -4));
    ERR("Gather", N("Gather"), BB_ETYPE, "indices must be int32 or int64", d, TF(1, D(1), 0));
    ERR("Gather", ai(N("Gather"), "axis", 2), BB_EINVAL, "axis 2 out of range", d,
        TI64(1, D(1), 0));
}

static void test_scatter(void **state)
{
    (void)state;
    /* the ONNX ScatterElements examples */
    bb_value *d = tz(BB_DT_FLOAT, 2, D(3, 3));
    bb_value *y = RUN1("Scatter", N("Scatter"), d, TI64(2, D(2, 3), 1, 0, 2, 0, 2, 1),
                       TF(2, D(2, 3), 1.0, 1.1, 1.2, 2.0, 2.1, 2.2));
    EXPECT_SHAPE(y, 3, 3);
    EXPECT_F32(y, 2.0, 1.1, 0.0, 1.0, 0.0, 2.2, 0.0, 2.1, 1.2);
    y = RUN1("Scatter", ai(N("Scatter"), "axis", 1), TF(2, D(1, 5), 1, 2, 3, 4, 5),
             TI64(2, D(1, 2), 1, 3), TF(2, D(1, 2), 1.1, 2.1));
    EXPECT_F32(y, 1.0, 1.1, 3.0, 2.1, 5.0);
    y = RUN1("Scatter", ai(N("Scatter"), "axis", 1), TF(2, D(1, 5), 1, 2, 3, 4, 5),
             TI32(2, D(1, 2), 1, -3), TF(2, D(1, 2), 1.1, 2.1));
    EXPECT_F32(y, 1.0, 1.1, 2.1, 4.0, 5.0);
    assert_ptr_not_equal(y->u.tensor.buf, d->u.tensor.buf);
    EXPECT_F32(d, 0, 0, 0, 0, 0, 0, 0, 0, 0); /* the input is not touched */
    y = RUN1("Scatter", N("Scatter"), d, tz(BB_DT_INT64, 2, D(0, 3)), tz(BB_DT_FLOAT, 2, D(0, 3)));
    EXPECT_SHAPE(y, 3, 3);
    ERR("Scatter", N("Scatter"), BB_EINVAL, "index 3 out of range", d, TI64(2, D(1, 1), 3),
        TF(2, D(1, 1), 1));
    ERR("Scatter", N("Scatter"), BB_EINVAL, "updates shape [1,2] differs", d,
        TI64(2, D(1, 1), 0), TF(2, D(1, 2), 1, 2));
    ERR("Scatter", N("Scatter"), BB_EINVAL, "indices rank 1 differs", d, TI64(1, D(1), 0),
        TF(1, D(1), 1));
    ERR("Scatter", N("Scatter"), BB_ETYPE, "updates dtype", d, TI64(2, D(1, 1), 0),
        TI64(2, D(1, 1), 1));
}

/* ---- wire --------------------------------------------------------------------------------------------- */

static void test_materialize(void **state)
{
    (void)state;
    /* dims [1,4], float, raw_data at offset 8 of a 64-byte aligned buffer */
    static const uint8_t hdr[] = {0x08, 0x01, 0x08, 0x04, 0x10, 0x01, 0x4a, 0x10};
    const float vals[4] = {1, -2, 3.5f, 4};
    bb_buffer *buf = bb_buffer_new(sizeof hdr + sizeof vals);
    assert_non_null(buf);
    memcpy(buf->data, hdr, sizeof hdr);
    memcpy(buf->data + sizeof hdr, vals, sizeof vals);
    bb_value *v = NULL;
    bb_error err = {0};
    assert_int_equal(g_type->materialize_from_wire(g_inst, BB_TYPE_TENSOR_F32.wire_hash, buf, &v,
                                                   &err),
                     BB_OK);
    keep(v);
    EXPECT_SHAPE(v, 1, 4);
    EXPECT_F32(v, 1, -2, 3.5, 4);
    assert_ptr_equal(v->u.tensor.buf, buf); /* adopted, not copied */
    assert_ptr_equal(v->u.tensor.data, buf->data + sizeof hdr);
    /* the abstract tensor hash accepts any dtype */
    assert_int_equal(g_type->materialize_from_wire(g_inst, BB_TYPE_TENSOR.wire_hash, buf, &v,
                                                   &err),
                     BB_OK);
    keep(v);
    /* a non-tensor type, a dtype mismatch and garbage are refused */
    assert_int_equal(g_type->materialize_from_wire(g_inst, BB_TYPE_PEER_ID.wire_hash, buf, &v,
                                                   &err),
                     BB_ETYPE);
    assert_non_null(strstr(err.msg, "not a tensor type"));
    assert_int_not_equal(g_type->materialize_from_wire(g_inst, BB_TYPE_TENSOR_I64.wire_hash, buf,
                                                       &v, &err),
                         BB_OK);
    assert_int_equal(atomic_load(&buf->refs), 3); /* the two adopting values only */
    bb_buffer_unref(buf);
    bb_buffer *bad = bb_buffer_new(sizeof hdr + 4);
    assert_non_null(bad);
    memcpy(bad->data, hdr, sizeof hdr);
    bad->data[7] = 0x7f; /* raw_data longer than the payload */
    assert_int_not_equal(g_type->materialize_from_wire(g_inst, BB_TYPE_TENSOR_F32.wire_hash, bad,
                                                       &v, &err),
                         BB_OK);
    assert_non_null(strstr(err.msg, "materialize_from_wire"));
    assert_int_equal(atomic_load(&bad->refs), 1);
    bb_buffer_unref(bad);
}

/* ---- graphs -------------------------------------------------------------------------------------------- */

/* Node with comma-separated input / output names ("" entries allowed). */
static bb_node *gnode(bb_graph *g, const char *op, const char *ins, const char *outs)
{
    bb_node *n = bb_graph_add_node(A, g, "", op);
    assert_non_null(n);
    n->name = bb_arena_sprintf(A, "%s_%zu", op, g->nodes.n);
    const char *lists[2] = {ins, outs};
    for (int k = 0; k < 2; k++) {
        const char *s = lists[k];
        while (s && *s) {
            const char *e = strchr(s, ',');
            size_t len = e ? (size_t)(e - s) : strlen(s);
            char *nm = bb_arena_strndup(A, s, len);
            assert_int_equal(bb_str_list_push(A, k ? &n->outputs : &n->inputs, nm), 0);
            s = e ? e + 1 : NULL;
        }
    }
    return n;
}

static void gio(bb_value_info_list *l, const char *name, int32_t dt)
{
    bb_value_info *vi = bb_value_info_new(A, name, bb_type_proto_tensor(A, dt));
    assert_non_null(vi);
    *(bb_value_info **)BB_VEC_PUSH(A, l) = vi;
}

static void ginit(bb_graph *g, const char *name, uint32_t nd, const int64_t *dims,
                  const float *v)
{
    size_t n = bb_shape_numel(nd, dims);
    bb_tensor_proto *t = tproto(BB_DT_FLOAT, nd, dims, v, n * sizeof *v);
    t->name = name;
    *(bb_tensor_proto **)BB_VEC_PUSH(A, &g->initializers) = t;
}

static int exec(const bb_graph *g, const char *const *names, bb_value *const *in, uint32_t n_in,
                bb_value **out, uint32_t n_out)
{
    memset(&g_err, 0, sizeof g_err);
    int rc = g_type->execute_graph(g_inst, g, names, in, n_in, out, n_out, &g_err);
    if (rc == BB_OK)
        for (uint32_t i = 0; i < n_out; i++)
            keep(out[i]);
    else
        for (uint32_t i = 0; i < n_out; i++)
            assert_null(out[i]);
    return rc;
}

static uint32_t lcg(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

static void fill(float *v, size_t n, uint32_t seed, float scale)
{
    for (size_t i = 0; i < n; i++)
        v[i] = ((float)(lcg(&seed) % 2001) / 1000.0f - 1.0f) * scale;
}

enum { IN = 784, HID = 128, OUT = 10 };

/* y = softmax(relu(x W1^T + b1) W2^T + b2), in double */
static void mlp_ref(const float *x, size_t batch, const float *w1, const float *b1,
                    const float *w2, const float *b2, double *y)
{
    for (size_t b = 0; b < batch; b++) {
        double h[HID], z[OUT], mx = -INFINITY, sum = 0;
        for (int j = 0; j < HID; j++) {
            double s = b1[j];
            for (int k = 0; k < IN; k++)
                s += (double)x[b * IN + k] * w1[j * IN + k];
            h[j] = s > 0 ? s : 0;
        }
        for (int j = 0; j < OUT; j++) {
            double s = b2[j];
            for (int k = 0; k < HID; k++)
                s += h[k] * w2[j * HID + k];
            z[j] = s;
            if (s > mx)
                mx = s;
        }
        for (int j = 0; j < OUT; j++)
            sum += exp(z[j] - mx);
        for (int j = 0; j < OUT; j++)
            y[b * OUT + j] = exp(z[j] - mx) / sum;
    }
}

static void test_graph_mlp(void **state)
{
    (void)state;
    float *w1 = malloc(HID * IN * sizeof *w1), *b1 = malloc(HID * sizeof *b1);
    float *w2 = malloc(OUT * HID * sizeof *w2), *b2 = malloc(OUT * sizeof *b2);
    float *x = malloc(64 * IN * sizeof *x);
    double *ref = malloc(64 * OUT * sizeof *ref);
    assert_true(w1 && b1 && w2 && b2 && x && ref);
    fill(w1, HID * IN, 1, 0.05f);
    fill(b1, HID, 2, 0.1f);
    fill(w2, OUT * HID, 3, 0.2f);
    fill(b2, OUT, 4, 0.1f);
    fill(x, 64 * IN, 5, 1.0f);

    bb_graph *g = bb_graph_new(A, "mlp");
    gio(&g->inputs, "x", BB_DT_FLOAT);
    gio(&g->outputs, "y", BB_DT_FLOAT);
    ginit(g, "W1", 2, D(HID, IN), w1);
    ginit(g, "b1", 1, D(HID), b1);
    ginit(g, "W2", 2, D(OUT, HID), w2);
    ginit(g, "b2", 1, D(OUT), b2);
    ai(gnode(g, "Gemm", "x,W1,b1", "h1"), "transB", 1);
    gnode(g, "Relu", "h1", "h2");
    ai(gnode(g, "Gemm", "h2,W2,b2", "logits"), "transB", 1);
    gnode(g, "Softmax", "logits", "y");

    static const size_t batches[] = {1, 64, 3, 1};
    for (size_t t = 0; t < sizeof batches / sizeof *batches; t++) { /* reruns hit the cache */
        size_t B = batches[t];
        bb_value *xv = mk(BB_DT_FLOAT, 2, D((int64_t)B, IN), x, B * IN * sizeof *x);
        bb_value *y = NULL;
        const char *names[] = {"x"};
        assert_int_equal(exec(g, names, &xv, 1, &y, 1), BB_OK);
        expect_shape_(y, D((int64_t)B, OUT), 2, __LINE__);
        mlp_ref(x, B, w1, b1, w2, b2, ref);
        expect_f_(y, BB_DT_FLOAT, ref, B * OUT, 1e-4, __LINE__);
    }
    /* the same graph through per-op dispatch gives the same numbers */
    bb_value *xv = mk(BB_DT_FLOAT, 2, D(2, IN), x, 2 * IN * sizeof *x);
    bb_value *w1v = mk(BB_DT_FLOAT, 2, D(HID, IN), w1, HID * IN * 4);
    bb_value *b1v = mk(BB_DT_FLOAT, 1, D(HID), b1, HID * 4);
    bb_value *w2v = mk(BB_DT_FLOAT, 2, D(OUT, HID), w2, OUT * HID * 4);
    bb_value *b2v = mk(BB_DT_FLOAT, 1, D(OUT), b2, OUT * 4);
    bb_value *h = RUN1("Gemm", g->nodes.v[0], xv, w1v, b1v);
    h = RUN1("Relu", g->nodes.v[1], h);
    h = RUN1("Gemm", g->nodes.v[2], h, w2v, b2v);
    h = RUN1("Softmax", g->nodes.v[3], h);
    mlp_ref(x, 2, w1, b1, w2, b2, ref);
    expect_f_(h, BB_DT_FLOAT, ref, 2 * OUT, 1e-4, __LINE__);
    free(w1);
    free(b1);
    free(w2);
    free(b2);
    free(x);
    free(ref);
}

static void test_graph_features(void **state)
{
    (void)state;
    /* initializer overridden by an input, Constant folded, an unused
     * output, a graph output that is an input, Split with a skipped output */
    bb_graph *g = bb_graph_new(A, "features");
    gio(&g->inputs, "a", BB_DT_FLOAT);
    gio(&g->inputs, "k", BB_DT_FLOAT);
    gio(&g->outputs, "sum", BB_DT_FLOAT);
    gio(&g->outputs, "a", BB_DT_FLOAT);
    gio(&g->outputs, "second", BB_DT_FLOAT);
    ginit(g, "k", 1, D(1), (const float[]){100});
    bb_node *c = gnode(g, "Constant", "", "c");
    bb_node_add_attr(A, c, "value", BB_ATTR_TENSOR)->t =
        tproto(BB_DT_FLOAT, 1, D(2), (const float[]){1, 2}, 8);
    gnode(g, "Add", "a,c", "t");
    gnode(g, "Add", "t,k", "sum");
    gnode(g, "Neg", "t", "unused");
    gnode(g, "Split", "a", ",second");
    bb_value *a = TF(1, D(2), 10, 20), *out[4];
    const char *n1[] = {"a"};
    assert_int_equal(exec(g, n1, &a, 1, out, 3), BB_OK);
    EXPECT_F32(out[0], 111, 122);
    assert_ptr_equal(out[1], a);
    EXPECT_F32(out[2], 20);
    const char *n2[] = {"k", "a"};
    bb_value *in2[] = {TF(1, D(1), 1000), a};
    assert_int_equal(exec(g, n2, in2, 2, out, 1), BB_OK);
    EXPECT_F32(out[0], 1011, 1022);
    /* errors: unknown input name, missing input, twice */
    const char *n3[] = {"zzz"};
    assert_int_equal(exec(g, n3, &a, 1, out, 1), BB_EINVAL);
    assert_non_null(strstr(g_err.msg, "'zzz' is not an input of graph 'features'"));
    assert_int_equal(exec(g, NULL, NULL, 0, out, 1), BB_EINVAL);
    assert_non_null(strstr(g_err.msg, "input 'a' not given"));
    const char *n4[] = {"a", "a"};
    bb_value *in4[] = {a, a};
    assert_int_equal(exec(g, n4, in4, 2, out, 1), BB_EINVAL);
    assert_int_equal(exec(g, n1, &a, 1, out, 4), BB_EINVAL);
    /* a failing node names itself */
    assert_int_equal(exec(g, n1, (bb_value *[]){TF(1, D(3), 1, 2, 3)}, 1, out, 1), BB_EINVAL);
    assert_non_null(strstr(g_err.msg, "Add: shapes [3] and [2] are not broadcastable"));
    assert_non_null(strstr(g_err.msg, "node 'Add_"));
}

static void test_graph_errors(void **state)
{
    (void)state;
    bb_value *a = TF(1, D(1), 1), *out[1];
    const char *n1[] = {"a"};
    bb_graph *g = bb_graph_new(A, "bad_op");
    gio(&g->inputs, "a", BB_DT_FLOAT);
    gio(&g->outputs, "b", BB_DT_FLOAT);
    gnode(g, "Frob", "a", "b");
    assert_int_equal(exec(g, n1, &a, 1, out, 1), BB_EUNSUPPORTED);
    assert_non_null(strstr(g_err.msg, "graph 'bad_op': node 'Frob_1': op ai.onnx::Frob not supported"));
    g = bb_graph_new(A, "bad_domain");
    gio(&g->inputs, "a", BB_DT_FLOAT);
    gio(&g->outputs, "b", BB_DT_FLOAT);
    gnode(g, "Relu", "a", "b")->domain = "com.x";
    assert_int_equal(exec(g, n1, &a, 1, out, 1), BB_EUNSUPPORTED);
    g = bb_graph_new(A, "unsorted");
    gio(&g->inputs, "a", BB_DT_FLOAT);
    gio(&g->outputs, "c", BB_DT_FLOAT);
    gnode(g, "Relu", "b", "c");
    gnode(g, "Relu", "a", "b");
    assert_int_equal(exec(g, n1, &a, 1, out, 1), BB_EINVAL);
    assert_non_null(strstr(g_err.msg, "not topologically sorted"));
    g = bb_graph_new(A, "undefined");
    gio(&g->inputs, "a", BB_DT_FLOAT);
    gio(&g->outputs, "c", BB_DT_FLOAT);
    gnode(g, "Add", "a,nowhere", "c");
    assert_int_equal(exec(g, n1, &a, 1, out, 1), BB_EINVAL);
    assert_non_null(strstr(g_err.msg, "'nowhere' is not defined"));
    g = bb_graph_new(A, "twice");
    gio(&g->inputs, "a", BB_DT_FLOAT);
    gio(&g->outputs, "c", BB_DT_FLOAT);
    gnode(g, "Relu", "a", "c");
    gnode(g, "Neg", "a", "c");
    assert_int_equal(exec(g, n1, &a, 1, out, 1), BB_EINVAL);
    assert_non_null(strstr(g_err.msg, "value 'c' is already defined"));
    g = bb_graph_new(A, "no_body");
    gio(&g->inputs, "a", BB_DT_FLOAT);
    gio(&g->outputs, "c", BB_DT_FLOAT);
    gnode(g, "Loop", ",,a", "c");
    assert_int_equal(exec(g, n1, &a, 1, out, 1), BB_EINVAL);
    assert_non_null(strstr(g_err.msg, "graph attribute body is missing"));
    /* a required output the kernel cannot produce: BatchNorm's optional outputs */
    g = bb_graph_new(A, "missing_out");
    gio(&g->inputs, "a", BB_DT_FLOAT);
    gio(&g->outputs, "m", BB_DT_FLOAT);
    ginit(g, "one", 1, D(1), (const float[]){1});
    ginit(g, "zero", 1, D(1), (const float[]){0});
    gnode(g, "BatchNormalization", "a,one,zero,zero,one", "y,m");
    bb_value *x = TF(2, D(1, 1), 3);
    assert_int_equal(exec(g, n1, &x, 1, out, 1), BB_ERUNTIME);
    assert_non_null(strstr(g_err.msg, "output 'm' was not produced"));
}

/* Subgraph helper: a graph attribute on node n. */
static bb_graph *subgraph(bb_node *n, const char *attr, const char *name)
{
    bb_attr *at = bb_node_add_attr(A, n, attr, BB_ATTR_GRAPH);
    assert_non_null(at);
    at->g = bb_graph_new(A, name);
    return at->g;
}

static void test_graph_if(void **state)
{
    (void)state;
    /* out = c ? x + x : -x, both branches reading x from the outer scope */
    bb_graph *g = bb_graph_new(A, "if_graph");
    gio(&g->inputs, "x", BB_DT_FLOAT);
    gio(&g->inputs, "c", BB_DT_BOOL);
    gio(&g->outputs, "out", BB_DT_FLOAT);
    bb_node *n = gnode(g, "If", "c", "out");
    bb_graph *tb = subgraph(n, "then_branch", "then");
    gio(&tb->outputs, "t_out", BB_DT_FLOAT);
    gnode(tb, "Add", "x,x", "t_out");
    bb_graph *eb = subgraph(n, "else_branch", "else");
    gio(&eb->outputs, "e_out", BB_DT_FLOAT);
    gnode(eb, "Neg", "x", "e_out");
    bb_value *x = TF(1, D(2), 1, -3), *out[1];
    const char *names[] = {"x", "c"};
    assert_int_equal(exec(g, names, (bb_value *[]){x, TB(0, NULL, 1)}, 2, out, 1), BB_OK);
    EXPECT_F32(out[0], 2, -6);
    assert_int_equal(exec(g, names, (bb_value *[]){x, TB(0, NULL, 0)}, 2, out, 1), BB_OK);
    EXPECT_F32(out[0], -1, 3);
    assert_int_equal(exec(g, names, (bb_value *[]){x, TB(1, D(2), 1, 1)}, 2, out, 1), BB_EINVAL);
    assert_non_null(strstr(g_err.msg, "cond must have exactly one element"));
    /* per-op If: self-contained branches work, outer names fail clearly */
    bb_node *pn = N("If");
    bb_graph *t2 = subgraph(pn, "then_branch", "t2");
    gio(&t2->outputs, "k", BB_DT_FLOAT);
    ginit(t2, "k", 1, D(1), (const float[]){42});
    bb_graph *e2 = subgraph(pn, "else_branch", "e2");
    gio(&e2->outputs, "z", BB_DT_FLOAT);
    gnode(e2, "Neg", "x", "z");
    EXPECT_F32(RUN1("If", pn, TB(0, NULL, 1)), 42);
    ERR("If", pn, BB_EINVAL, "'x' is not defined", TB(0, NULL, 0));
    ERR("If", pn, BB_ETYPE, "input 'cond' must be bool", TF(0, NULL, 0));
    /* per-op If with x captured: an extra trailing input named by the
     * node's outer_scope metadata (what bbd run stamps) */
    bb_kv_set(A, &pn->metadata, BB_META_OUTER_SCOPE_PREFIX "0", "x");
    EXPECT_F32(RUN1("If", pn, TB(0, NULL, 0), TF(1, D(2), 1, -3)), -1, 3);
    EXPECT_F32(RUN1("If", pn, TB(0, NULL, 1), TF(1, D(2), 1, -3)), 42);
    /* a capture the subgraphs do not read is harmless; a missing input is not */
    bb_kv_set(A, &pn->metadata, BB_META_OUTER_SCOPE_PREFIX "1", "unused");
    EXPECT_F32(RUN1("If", pn, TB(0, NULL, 0), TF(1, D(2), 1, -3), TF(0, NULL, 7)), -1, 3);
    ERR("If", pn, BB_EINVAL, "2 outer-scope names for 1 inputs", TB(0, NULL, 0));
}

static void test_graph_loop(void **state)
{
    (void)state;
    /* acc starts at init; each iteration adds float(i); a scan output
     * records acc * k, with k read from the outer graph */
    bb_graph *g = bb_graph_new(A, "loop_graph");
    gio(&g->inputs, "M", BB_DT_INT64);
    gio(&g->inputs, "init", BB_DT_FLOAT);
    gio(&g->inputs, "k", BB_DT_FLOAT);
    gio(&g->outputs, "final", BB_DT_FLOAT);
    gio(&g->outputs, "scan", BB_DT_FLOAT);
    bb_node *n = gnode(g, "Loop", "M,,init", "final,scan");
    bb_graph *body = subgraph(n, "body", "body");
    gio(&body->inputs, "i", BB_DT_INT64);
    gio(&body->inputs, "cond_in", BB_DT_BOOL);
    gio(&body->inputs, "acc", BB_DT_FLOAT);
    gio(&body->outputs, "cond_out", BB_DT_BOOL);
    gio(&body->outputs, "acc2", BB_DT_FLOAT);
    gio(&body->outputs, "s", BB_DT_FLOAT);
    ai(gnode(body, "Cast", "i", "fi"), "to", BB_DT_FLOAT);
    gnode(body, "Add", "acc,fi", "acc2");
    gnode(body, "Identity", "cond_in", "cond_out");
    gnode(body, "Mul", "acc2,k", "s");
    const char *names[] = {"M", "init", "k"};
    bb_value *out[2];
    assert_int_equal(exec(g, names,
                          (bb_value *[]){TI64(0, NULL, 4), TF(1, D(1), 0), TF(0, NULL, 2)}, 3,
                          out, 2),
                     BB_OK);
    EXPECT_F32(out[0], 6);
    EXPECT_SHAPE(out[1], 4, 1);
    EXPECT_F32(out[1], 0, 2, 6, 12);
    /* zero iterations: the carried value passes through, scan is empty */
    assert_int_equal(exec(g, names,
                          (bb_value *[]){TI64(0, NULL, 0), TF(1, D(1), 5), TF(0, NULL, 2)}, 3,
                          out, 2),
                     BB_OK);
    EXPECT_F32(out[0], 5);
    EXPECT_SHAPE(out[1], 0);
    /* a body that stops itself: cond_out = acc2 < 3, no trip count */
    bb_graph *g2 = bb_graph_new(A, "while_graph");
    gio(&g2->inputs, "init", BB_DT_FLOAT);
    gio(&g2->outputs, "final", BB_DT_FLOAT);
    bb_node *w = gnode(g2, "Loop", ",,init", "final");
    bb_graph *b2 = subgraph(w, "body", "b2");
    gio(&b2->inputs, "i", BB_DT_INT64);
    gio(&b2->inputs, "c", BB_DT_BOOL);
    gio(&b2->inputs, "acc", BB_DT_FLOAT);
    gio(&b2->outputs, "more", BB_DT_BOOL);
    gio(&b2->outputs, "acc2", BB_DT_FLOAT);
    ginit(b2, "one", 0, NULL, (const float[]){1});
    ginit(b2, "three", 0, NULL, (const float[]){3});
    gnode(b2, "Add", "acc,one", "acc2");
    gnode(b2, "Less", "acc2,three", "more");
    const char *n2[] = {"init"};
    assert_int_equal(exec(g2, n2, (bb_value *[]){TF(0, NULL, 0)}, 1, out, 1), BB_OK);
    EXPECT_F32(out[0], 3);
    /* per-op Loop: M and cond given, no outer names needed */
    EXPECT_F32(RUN1("Loop", w, TI64(0, NULL, 2), TB(0, NULL, 1), TF(0, NULL, 10)), 11);
    EXPECT_F32(RUN1("Loop", w, TI64(0, NULL, 2), TB(0, NULL, 1), TF(0, NULL, 0)), 2);
    EXPECT_F32(RUN1("Loop", w, TI64(0, NULL, 5), TB(0, NULL, 0), TF(0, NULL, 10)), 10);
    bb_value *lo[2];
    assert_int_equal(run("Loop", w, INS(TI64(0, NULL, 2), TB(0, NULL, 1)), lo, 1), BB_EINVAL);
    assert_non_null(strstr(g_err.msg, "body has 3 inputs"));
    /* per-op Loop whose body reads k from outside: k is captured after the
     * carried value, so it is not mistaken for a second carried value */
    bb_kv_set(A, &n->metadata, BB_META_OUTER_SCOPE_PREFIX "0", "k");
    assert_int_equal(run("Loop", n, INS(TI64(0, NULL, 3), NULL, TF(1, D(1), 0), TF(0, NULL, 10)),
                         lo, 2),
                     BB_OK);
    EXPECT_F32(lo[0], 3);
    EXPECT_F32(lo[1], 0, 10, 30);
}

static void test_graph_cache(void **state)
{
    (void)state;
    /* an instance without a plan cache builds a plan per call (no leaks),
     * and a cached plan notices a graph that changed */
    bb_create_args args = {.struct_size = sizeof args, .config_json = "{\"max_cached_graphs\": 0}"};
    void *inst = NULL;
    assert_int_equal(g_type->create(&args, &inst, NULL), BB_OK);
    bb_graph *g = bb_graph_new(A, "tiny");
    gio(&g->inputs, "a", BB_DT_FLOAT);
    gio(&g->outputs, "b", BB_DT_FLOAT);
    gnode(g, "Relu", "a", "b");
    bb_value *a = TF(1, D(2), -1, 1), *out = NULL;
    const char *names[] = {"a"};
    bb_error err = {0};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(g_type->execute_graph(inst, g, names, &a, 1, &out, 1, &err), BB_OK);
        keep(out);
        EXPECT_F32(out, 0, 1);
    }
    g_type->destroy(inst);
    assert_int_equal(exec(g, names, &a, 1, &out, 1), BB_OK);
    EXPECT_F32(out, 0, 1);
    gnode(g, "Neg", "b", "c"); /* nodes.n changes: the plan is rebuilt */
    g->outputs.v[0]->name = "c";
    assert_int_equal(exec(g, names, &a, 1, &out, 1), BB_OK);
    EXPECT_F32(out, 0, -1);
}

/* ---- the ONNX backend-test-layout cases (examples/cpu_testdata) ------------------------ */

static bb_value *read_pb(bb_arena *a, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static uint8_t buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    bb_tensor_proto *t = NULL;
    bb_error err = {0};
    if (bb_tensor_proto_decode(a, buf, n, path, &t, &err) != BB_OK)
        fail_msg("%s: %s", path, err.msg);
    bb_value *v = bb_value_tensor_copy(t->data_type, (uint32_t)t->dims.n, t->dims.v,
                                       t->raw_data.data, t->raw_data.len);
    if (!v)
        fail_msg("%s: not a tensor value", path);
    return keep(v);
}

/* Run one case directory; every output must match output_K.pb. */
static void run_case(const char *dir)
{
    char path[2 * PATH_MAX];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    bb_model *m = NULL;
    bb_error err = {0};
    if (bb_model_load_file(path, &m, &err) != BB_OK)
        fail_msg("%s: %s", path, err.msg);
    const bb_graph *g = m->graph;
    bb_value *in[8], *want[8], *got[8] = {0};
    const char *names[8];
    size_t n_in = g->inputs.n, n_out = g->outputs.n;
    assert_true(n_in <= 8 && n_out <= 8);
    for (size_t i = 0; i < n_in; i++) {
        snprintf(path, sizeof path, "%s/test_data_set_0/input_%zu.pb", dir, i);
        in[i] = read_pb(m->arena, path);
        names[i] = g->inputs.v[i]->name;
        assert_non_null(in[i]);
    }
    for (size_t i = 0; i < n_out; i++) {
        snprintf(path, sizeof path, "%s/test_data_set_0/output_%zu.pb", dir, i);
        want[i] = read_pb(m->arena, path);
        assert_non_null(want[i]);
    }
    bb_error e2 = {0};
    int rc = g_type->execute_graph(g_inst, g, names, in, (uint32_t)n_in, got, (uint32_t)n_out,
                                   &e2);
    if (rc != BB_OK)
        fail_msg("%s: %s", dir, e2.msg);
    for (size_t i = 0; i < n_out; i++) {
        keep(got[i]);
        const bb_tensor_view *a = &got[i]->u.tensor, *b = &want[i]->u.tensor;
        if (a->dtype != b->dtype || a->ndim != b->ndim ||
            memcmp(a->dims, b->dims, a->ndim * sizeof *a->dims))
            fail_msg("%s: output %zu has the wrong dtype or shape", dir, i);
        size_t n = bb_tensor_numel(got[i]);
        for (size_t k = 0; k < n; k++) {
            if (a->dtype == BB_DT_FLOAT) {
                float x = ((const float *)(const void *)a->data)[k];
                float y = ((const float *)(const void *)b->data)[k];
                if (!(fabsf(x - y) <= 1e-5f * (1 + fabsf(y))))
                    fail_msg("%s: output %zu[%zu] = %.9g, expected %.9g", dir, i, k, x, y);
            } else if (a->nbytes != b->nbytes || memcmp(a->data, b->data, a->nbytes)) {
                fail_msg("%s: output %zu differs", dir, i);
            }
        }
    }
    bb_model_free(m); /* safe: this instance caches no plans */
}

static void test_onnx_testdata(void **state)
{
    (void)state;
    const char *env = getenv("BB_TESTDATA");
    char root[PATH_MAX];
    snprintf(root, sizeof root, "%s/cpu_testdata", env && *env ? env : "testdata");
    DIR *d = opendir(root);
    if (!d) {
        fprintf(stderr, "test_onnx_testdata: %s not found (make testdata/cpu_testdata.onnx); "
                        "skipped\n", root);
        skip();
    }
    /* A separate instance: its plan cache dies before the models are freed. */
    void *saved = g_inst;
    bb_create_args args = {.struct_size = sizeof args, .config_json = "{\"max_cached_graphs\": 0}"};
    assert_int_equal(g_type->create(&args, &g_inst, NULL), BB_OK);
    int cases = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char dir[PATH_MAX + 256];
        snprintf(dir, sizeof dir, "%s/%s", root, e->d_name);
        run_case(dir);
        cases++;
    }
    closedir(d);
    g_type->destroy(g_inst);
    g_inst = saved;
    assert_true(cases >= 51);
}

/* A plan folds Conv -> BatchNormalization (-> Relu) into one Conv; the
 * same CNN with the conv outputs also wired as graph outputs (so nothing
 * folds) gives the same logits up to rounding. The batch normalizations
 * get statistics far from the identity, so a wrong fold shows. */
static void test_graph_conv_bn_fusion(void **state)
{
    (void)state;
    og o[2];
    cnn_shape shape = {8, 3, 4, 6, 5, true};
    for (int k = 0; k < 2; k++) {
        og_begin(&o[k], k ? "unfused" : "fused");
        cnn_graph(&o[k], &shape, 3);
        for (size_t i = 0; i < o[k].g->initializers.n; i++) {
            bb_tensor_proto *t = o[k].g->initializers.v[i];
            float *v = (float *)(void *)t->raw_data.data;
            size_t n = t->raw_data.len / sizeof *v;
            bool stat = strstr(t->name, "bn") && t->data_type == BB_DT_FLOAT;
            for (size_t j = 0; stat && j < n; j++) /* positive for the variances */
                v[j] = 0.5f + 0.1f * (float)((j * 7 + i) % 11);
        }
        if (k) { /* conv1 and conv2 read elsewhere too: no fold */
            og_output(&o[k], "conv1", 1, (int64_t[]){-1});
            og_output(&o[k], "conv2", 1, (int64_t[]){-1});
        }
    }
    float x[2 * 64];
    for (int i = 0; i < 2 * 64; i++)
        x[i] = (float)((i * 13) % 17) * 0.1f - 0.8f;
    int64_t d[2] = {2, 64};
    bb_value *in = bb_value_tensor_copy(BB_DT_FLOAT, 2, d, x, sizeof x), *y[2] = {0};
    const char *names[1] = {"input"};
    for (int k = 0; k < 2; k++)
        assert_int_equal(g_type->execute_graph(g_inst, o[k].g, names, &in, 1, &y[k], 1, &g_err),
                         BB_OK);
    assert_int_equal(bb_tensor_numel(y[0]), 2 * 5);
    for (int i = 0; i < 10; i++)
        assert_float_equal(bb_tensor_f32(y[0])[i], bb_tensor_f32(y[1])[i],
                           1e-4 * fmax(1, fabs(bb_tensor_f32(y[1])[i])));
    bb_value_unref(in);
    bb_value_unref(y[0]);
    bb_value_unref(y[1]);
    og_end(&o[0]);
    og_end(&o[1]);
}

/* ---- oneDNN chains in plans --------------------------------------------------------- */

/* g run node by node through dispatch (each kernel on its own: no plan, no
 * fusion, no oneDNN chain) on input "input" = x; graph output 0. */
static bb_value *reference_run(const bb_graph *g, bb_value *x)
{
    const char *names[64];
    bb_value *vals[64];
    size_t n = 0;
    names[n] = "input";
    vals[n++] = x;
    for (size_t i = 0; i < g->initializers.n; i++) {
        const bb_tensor_proto *t = g->initializers.v[i];
        names[n] = t->name;
        vals[n++] = mk(t->data_type, (uint32_t)t->dims.n, t->dims.v, t->raw_data.data,
                       t->raw_data.len);
    }
    for (size_t k = 0; k < g->nodes.n; k++) {
        const bb_node *node = g->nodes.v[k];
        bb_value *in[8] = {0}, *out[2] = {0};
        for (size_t j = 0; j < node->inputs.n; j++)
            for (size_t q = 0; q < n; q++)
                if (strcmp(names[q], node->inputs.v[j]) == 0)
                    in[j] = vals[q];
        if (run(node->op_type, node, in, (uint32_t)node->inputs.n, out, 1))
            fail_msg("reference: node %s: %s", node->name, g_err.msg);
        assert_true(n < 64);
        names[n] = node->outputs.v[0];
        vals[n++] = out[0];
    }
    for (size_t q = 0; q < n; q++)
        if (strcmp(names[q], g->outputs.v[0]->name) == 0)
            return vals[q];
    fail_msg("reference: no output");
    return NULL;
}

static bb_value *rand_f32(uint32_t nd, const int64_t *dims, uint64_t seed)
{
    bb_value *v = tz(BB_DT_FLOAT, nd, dims);
    float *p = bb_tensor_f32(v);
    for (size_t i = 0; i < bb_tensor_numel(v); i++)
        p[i] = (float)og_normal(&seed);
    return v;
}

static void expect_close(const bb_value *got, const bb_value *want, double tol, const char *what)
{
    assert_non_null(got);
    assert_int_equal(got->u.tensor.ndim, want->u.tensor.ndim);
    for (uint32_t d = 0; d < want->u.tensor.ndim; d++)
        assert_int_equal(got->u.tensor.dims[d], want->u.tensor.dims[d]);
    const float *a = bb_tensor_f32(got), *b = bb_tensor_f32(want);
    for (size_t i = 0; i < bb_tensor_numel(want); i++)
        if (!(fabs(a[i] - b[i]) <= tol * (1 + fabs(b[i]))))
            fail_msg("%s: element %zu is %.7g, the kernels' %.7g", what, i, a[i], b[i]);
}

/* A conv layer into o: weights [m, c/group, k, k] from the seed. */
static bb_node *chain_conv(og *o, const char *name, const char *in, int64_t c, int64_t m,
                           int64_t k, int64_t group, bool bias, uint64_t seed)
{
    char wn[32], bn[32], ins[96];
    size_t nw = (size_t)(m * (c / group) * k * k);
    static float w[8192];
    float b[64];
    assert_true(nw <= 8192 && m <= 64);
    og_he(w, nw, (size_t)((c / group) * k * k), &seed);
    for (int64_t i = 0; i < m; i++)
        b[i] = 0.1f * (float)(i % 5) - 0.2f;
    snprintf(wn, sizeof wn, "%s.w", name);
    snprintf(bn, sizeof bn, "%s.b", name);
    og_param(o, wn, 4, (int64_t[]){m, c / group, k, k}, w);
    if (bias)
        og_param(o, bn, 1, &m, b);
    snprintf(ins, sizeof ins, bias ? "%s,%s,%s" : "%s,%s", in, wn, bn);
    bb_node *n = og_node(o, "Conv", name, ins, name);
    og_attr_ints(o, n, "kernel_shape", 2, (int64_t[]){k, k});
    if (group > 1)
        og_attr_int(o, n, "group", group);
    return n;
}

/* Graphs a plan runs as oneDNN chains (Conv / pools / Gemm, Relu in the
 * epilogue) give the kernels' results, run node by node: every attribute
 * the chains take, a batch size that changes and comes back (primitives
 * per shape), Winograd on and off, and shapes a chain hands back (a 1-D
 * convolution; a wrong channel count, whose error is the kernel's). */
static void test_graph_dnn_chains(void **state)
{
    (void)state;
    og o[4];
    /* 0: conv (pads, Relu) -> maxpool (pads) -> grouped, strided conv ->
     *    avgpool -> conv (dilated, SAME_UPPER, no bias) -> Relu */
    og_begin(&o[0], "convs");
    og_input(&o[0], "input", 4, (int64_t[]){-1, 16, 9, 9});
    og_attr_ints(&o[0], chain_conv(&o[0], "c1", "input", 16, 16, 3, 1, true, 1), "pads", 4,
                 (int64_t[]){1, 1, 1, 1});
    og_node(&o[0], "Relu", "r1", "c1", "r1");
    bb_node *mp = og_node(&o[0], "MaxPool", "p1", "r1", "p1");
    og_attr_ints(&o[0], mp, "kernel_shape", 2, (int64_t[]){3, 3});
    og_attr_ints(&o[0], mp, "pads", 4, (int64_t[]){1, 1, 1, 1});
    og_attr_ints(&o[0], mp, "strides", 2, (int64_t[]){2, 2});
    og_attr_ints(&o[0], chain_conv(&o[0], "c2", "p1", 16, 32, 3, 4, true, 2), "strides", 2,
                 (int64_t[]){1, 2});
    bb_node *ap = og_node(&o[0], "AveragePool", "p2", "c2", "p2");
    og_attr_ints(&o[0], ap, "kernel_shape", 2, (int64_t[]){2, 1});
    bb_node *c3 = chain_conv(&o[0], "c3", "p2", 32, 16, 3, 1, false, 3);
    og_attr_ints(&o[0], c3, "dilations", 2, (int64_t[]){2, 1});
    og_attr_string(&o[0], c3, "auto_pad", "SAME_UPPER");
    og_node(&o[0], "Relu", "y", "c3", "y");
    og_output(&o[0], "y", 4, (int64_t[]){-1, 16, -1, -1});
    /* 1: 3x3 stride-1 convs Winograd can take (16-channel multiples) */
    og_begin(&o[1], "wino");
    og_input(&o[1], "input", 4, (int64_t[]){-1, 16, 12, 12});
    og_attr_ints(&o[1], chain_conv(&o[1], "c1", "input", 16, 32, 3, 1, true, 4), "pads", 4,
                 (int64_t[]){1, 1, 1, 1});
    og_attr_ints(&o[1], chain_conv(&o[1], "y", "c1", 32, 16, 3, 1, true, 5), "pads", 4,
                 (int64_t[]){0, 1, 2, 1});
    og_output(&o[1], "y", 4, (int64_t[]){-1, 16, -1, -1});
    /* 2: Gemm with transB (+ Relu), and without, bias [1, N] */
    og_begin(&o[2], "gemms");
    og_input(&o[2], "input", 2, (int64_t[]){-1, 20});
    float w1[20 * 12], w2[12 * 7], b1[12], b2[7];
    uint64_t seed = 9;
    og_he(w1, 20 * 12, 20, &seed);
    og_he(w2, 12 * 7, 12, &seed);
    for (int i = 0; i < 12; i++)
        b1[i] = 0.05f * (float)i - 0.3f;
    for (int i = 0; i < 7; i++)
        b2[i] = 0.1f * (float)i;
    og_param(&o[2], "w1", 2, (int64_t[]){12, 20}, w1);
    og_param(&o[2], "b1", 1, (int64_t[]){12}, b1);
    og_param(&o[2], "w2", 2, (int64_t[]){12, 7}, w2);
    og_param(&o[2], "b2", 2, (int64_t[]){1, 7}, b2);
    og_attr_int(&o[2], og_node(&o[2], "Gemm", "g1", "input,w1,b1", "g1"), "transB", 1);
    og_node(&o[2], "Relu", "r", "g1", "r");
    og_node(&o[2], "Gemm", "y", "r,w2,b2", "y");
    og_output(&o[2], "y", 2, (int64_t[]){-1, 7});
    /* 3: a 1-D convolution (no chain takes it) */
    og_begin(&o[3], "conv1d");
    og_input(&o[3], "input", 3, (int64_t[]){-1, 2, 10});
    float w3[4 * 2 * 3];
    og_he(w3, 24, 6, &seed);
    og_param(&o[3], "w", 3, (int64_t[]){4, 2, 3}, w3);
    og_node(&o[3], "Conv", "y", "input,w", "y");
    og_output(&o[3], "y", 3, (int64_t[]){-1, 4, 8});

    static const int64_t in_dims[4][4] = {{0, 16, 9, 9}, {0, 16, 12, 12}, {0, 20}, {0, 2, 10}};
    static const uint32_t in_nd[4] = {4, 4, 2, 3};
    const char *names[1] = {"input"};
    for (int wino = 0; wino < 2; wino++) {
        void *inst = NULL;
        bb_create_args args = {.struct_size = sizeof args, .slot = "compute",
                               .config_json = wino ? "{\"winograd\": true}"
                                                   : "{\"winograd\": false}"};
        assert_int_equal(g_type->create(&args, &inst, &g_err), BB_OK);
        for (int k = 0; k < 4; k++) {
            static const int64_t batches[3] = {2, 3, 2};
            for (int b = 0; b < 3; b++) {
                int64_t d[4];
                memcpy(d, in_dims[k], sizeof d);
                d[0] = batches[b];
                bb_value *x = rand_f32(in_nd[k], d, (uint64_t)(100 * k + b)), *y = NULL;
                assert_int_equal(g_type->execute_graph(inst, o[k].g, names, &x, 1, &y, 1, &g_err),
                                 BB_OK);
                keep(y);
                /* Winograd's transforms round differently: ~1e-6 of unit-scale data */
                const bb_value *want = reference_run(o[k].g, x);
                expect_close(y, want, wino ? 2e-4 : 2e-5, o[k].g->name);
                /* oneDNN sums in another order than im2col + GEMM: a result equal
                 * to the kernels' bit for bit is one no chain computed (as the 1-D
                 * convolution's must be) */
                bool same = memcmp(bb_tensor_f32(y), bb_tensor_f32(want),
                                   bb_tensor_numel(want) * sizeof(float)) == 0;
                if (same != (k == 3))
                    fail_msg("%s, batch %lld: %s", o[k].g->name, (long long)d[0],
                             same ? "no chain ran it" : "a chain ran a 1-D convolution");
            }
        }
        /* a wrong channel count: the chain hands it back, the kernel says why */
        bb_value *x = rand_f32(4, (int64_t[]){1, 15, 12, 12}, 7), *y = NULL;
        assert_int_equal(g_type->execute_graph(inst, o[1].g, names, &x, 1, &y, 1, &g_err),
                         BB_EINVAL);
        assert_non_null(strstr(g_err.msg, "group 1 does not fit X channels 15"));
        assert_null(y);
        g_type->destroy(inst);
    }
    for (int k = 0; k < 4; k++)
        og_end(&o[k]);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_declarations),     T(test_create_config),   T(test_dispatch_contract),
        T(test_arith_f32),        T(test_arith_int),       T(test_arith_empty),
        T(test_unary),            T(test_pow),             T(test_matmul),
        T(test_gemm),             T(test_dot),             T(test_activations),
        T(test_softmax),          T(test_reshape_flatten), T(test_transpose),
        T(test_concat),           T(test_split),           T(test_slice),
        T(test_squeeze_unsqueeze), T(test_identity_cast),  T(test_reduce),
        T(test_argmax),           T(test_compare_where),   T(test_batchnorm),
        T(test_layernorm),        T(test_layernorm_more),  T(test_conv),
        T(test_pools),            T(test_creation),        T(test_gather),
        T(test_scatter),          T(test_materialize),     T(test_graph_mlp),
        T(test_graph_features),   T(test_graph_errors),    T(test_graph_if),
        T(test_graph_loop),       T(test_graph_cache),     T(test_onnx_testdata),
        T(test_graph_conv_bn_fusion),  T(test_graph_dnn_chains),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
