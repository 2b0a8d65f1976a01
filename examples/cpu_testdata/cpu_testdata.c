/*
 * cpu_testdata.c — writes ONNX backend-test-layout cases for the ai.onnx
 * ops of cpu::CpuBackend, plus a small MLP model:
 *
 *   cpu_testdata <path>.onnx
 *     <path>.onnx                               the 784-128-10 MLP (random weights)
 *     <path>_x.pb                               an input for it: x, 2 rows of 784
 *     <dir of path>/cpu_testdata/<case>/model.onnx
 *     <dir of path>/cpu_testdata/<case>/test_data_set_0/input_K.pb, output_K.pb
 *
 * Each case is a one-node graph (If/Loop carry a subgraph) whose expected
 * outputs are hand-computed here, the same values the unit tests check —
 * never produced by the backend itself. `bbd run --test-dir` and
 * test_cpu_backend consume the directories. Zeros, Ones and Dot are BB
 * additions inside ai.onnx, and Scatter is ONNX's deprecated op, so those
 * models are for BytesAndBrains backends, not for onnx.checker.
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bb/ir.h"
#include "bb/model_io.h"
#include "bb/opsets.h"

/* ---- the case under construction ------------------------------------------------ */

typedef struct tensor_spec {
    const char *name;
    bb_tensor_proto *t;
} tensor_spec;

static struct {
    char root[PATH_MAX];
    bb_model *m;
    bb_graph *g;
    bb_node *n;
    const char *name;
    tensor_spec in[8], out[8];
    int n_in, n_out;
    int written, failed;
} C;

static void die(const char *what, const bb_error *err)
{
    fprintf(stderr, "cpu_testdata: %s: %s\n", what, err ? err->msg : strerror(errno));
    exit(1);
}

static void begin(const char *name, const char *op)
{
    C.m = bb_model_new();
    if (!C.m)
        die("out of memory", NULL);
    C.m->ir_version = BB_FRAMEWORK_IR_VERSION;
    C.m->producer_name = "bytesandbrains cpu_testdata";
    bb_opset_list_add(C.m->arena, &C.m->opset_imports, "", BB_ONNX_OPSET_VERSION);
    C.g = bb_graph_new(C.m->arena, name);
    C.m->graph = C.g;
    C.n = op ? bb_graph_add_node(C.m->arena, C.g, "", op) : NULL;
    if (C.n)
        C.n->name = "node";
    C.name = name;
    C.n_in = C.n_out = 0;
}

/* A TensorProto of dtype dt holding v[] converted. */
static bb_tensor_proto *tproto(bb_arena *a, const char *name, int32_t dt, uint32_t nd,
                               const int64_t *dims, const double *v, size_t nv)
{
    bb_tensor_proto *t = bb_arena_calloc(a, 1, sizeof *t);
    t->name = bb_arena_strdup(a, name);
    t->data_type = dt;
    size_t n = 1;
    for (uint32_t i = 0; i < nd; i++) {
        *(int64_t *)BB_VEC_PUSH(a, &t->dims) = dims[i];
        n *= (size_t)dims[i];
    }
    if (n && n != nv) {
        fprintf(stderr, "cpu_testdata: %s: %zu values for %zu elements\n", name, nv, n);
        exit(1);
    }
    size_t es = bb_dtype_size(dt);
    uint8_t *p = bb_arena_calloc(a, n ? n : 1, es);
    for (size_t i = 0; i < n; i++) {
        double x = v[i];
        switch (dt) {
        case BB_DT_FLOAT: ((float *)p)[i] = (float)x; break;
        case BB_DT_DOUBLE: ((double *)p)[i] = x; break;
        case BB_DT_INT64: ((int64_t *)p)[i] = (int64_t)x; break;
        case BB_DT_INT32: ((int32_t *)p)[i] = (int32_t)x; break;
        case BB_DT_INT8: ((int8_t *)p)[i] = (int8_t)x; break;
        default: p[i] = (uint8_t)x; break; /* uint8, bool */
        }
    }
    t->raw_data.data = p;
    t->raw_data.len = n * es;
    t->has_raw_data = true;
    return t;
}

static bb_value_info *vinfo(bb_arena *a, const char *name, int32_t dt, uint32_t nd,
                            const int64_t *dims)
{
    bb_type_proto *tp = bb_type_proto_tensor(a, dt);
    tp->has_shape = true;
    for (uint32_t i = 0; i < nd; i++) {
        bb_dim *d = BB_VEC_PUSH(a, &tp->shape);
        d->has_value = true;
        d->value = dims[i];
    }
    return bb_value_info_new(a, name, tp);
}

#define SHP(...) (uint32_t)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
    (const int64_t[]){__VA_ARGS__}
#define VALS(...) (const double[]){__VA_ARGS__}, \
    sizeof((const double[]){__VA_ARGS__}) / sizeof(double)

/* A graph input fed from input_K.pb (and a node input). */
static void in(const char *name, int32_t dt, uint32_t nd, const int64_t *dims, const double *v,
               size_t nv)
{
    bb_arena *a = C.m->arena;
    C.in[C.n_in].name = name;
    C.in[C.n_in].t = tproto(a, name, dt, nd, dims, v, nv);
    C.n_in++;
    *(bb_value_info **)BB_VEC_PUSH(a, &C.g->inputs) = vinfo(a, name, dt, nd, dims);
    if (C.n)
        bb_str_list_push(a, &C.n->inputs, name);
}
#define IN(name, dt, dims, ...) in(name, dt, SHP dims, VALS(__VA_ARGS__))
#define IN0(name, dt, ...) in(name, dt, 0, NULL, VALS(__VA_ARGS__))

/* An omitted optional node input. */
static void skip_in(void)
{
    bb_str_list_push(C.m->arena, &C.n->inputs, "");
}

static void out(const char *name, int32_t dt, uint32_t nd, const int64_t *dims, const double *v,
                size_t nv)
{
    bb_arena *a = C.m->arena;
    C.out[C.n_out].name = name;
    C.out[C.n_out].t = tproto(a, name, dt, nd, dims, v, nv);
    C.n_out++;
    *(bb_value_info **)BB_VEC_PUSH(a, &C.g->outputs) = vinfo(a, name, dt, nd, dims);
    if (C.n)
        bb_str_list_push(a, &C.n->outputs, name);
}
#define OUT(name, dt, dims, ...) out(name, dt, SHP dims, VALS(__VA_ARGS__))
#define OUT0(name, dt, ...) out(name, dt, 0, NULL, VALS(__VA_ARGS__))

static void attr_i(const char *k, int64_t v)
{
    bb_node_set_attr_int(C.m->arena, C.n, k, v);
}
static void attr_f(const char *k, float v)
{
    bb_node_set_attr_float(C.m->arena, C.n, k, v);
}
static void attr_s(const char *k, const char *v)
{
    bb_node_set_attr_string(C.m->arena, C.n, k, v);
}
#define ATTR_INTS(k, ...) \
    bb_node_set_attr_ints(C.m->arena, C.n, k, (const int64_t[]){__VA_ARGS__}, \
                          sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

static void mkdir_p(const char *path)
{
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        die(path, NULL);
}

static void write_pb_file(const char *path, const bb_tensor_proto *t)
{
    uint8_t *buf;
    size_t len;
    bb_error err = {0};
    if (bb_tensor_proto_encode(t, &buf, &len, &err))
        die(path, &err);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0)
        die(path, NULL);
    free(buf);
}

static void write_pb(const char *dir, const char *kind, int k, const bb_tensor_proto *t)
{
    char path[PATH_MAX + 256];
    snprintf(path, sizeof path, "%s/%s_%d.pb", dir, kind, k);
    write_pb_file(path, t);
}

static void end(void)
{
    char dir[PATH_MAX + 128], data[PATH_MAX + 160], model[PATH_MAX + 160];
    if (strlen(C.root) + strlen(C.name) + 2 > PATH_MAX) {
        errno = ENAMETOOLONG;
        die(C.root, NULL);
    }
    snprintf(dir, sizeof dir, "%s/%.*s", C.root, 100, C.name);
    mkdir_p(dir);
    snprintf(data, sizeof data, "%s/test_data_set_0", dir);
    mkdir_p(data);
    snprintf(model, sizeof model, "%s/model.onnx", dir);
    bb_error err = {0};
    if (bb_model_save_file(C.m, model, &err))
        die(model, &err);
    for (int i = 0; i < C.n_in; i++)
        write_pb(data, "input", i, C.in[i].t);
    for (int i = 0; i < C.n_out; i++)
        write_pb(data, "output", i, C.out[i].t);
    bb_model_free(C.m);
    C.m = NULL;
    C.written++;
}

enum { F32 = BB_DT_FLOAT, F64 = BB_DT_DOUBLE, I64 = BB_DT_INT64, I32 = BB_DT_INT32,
       I8 = BB_DT_INT8, U8 = BB_DT_UINT8, BOOL = BB_DT_BOOL };

/* ---- the cases ---------------------------------------------------------------------- */

static void elementwise(void)
{
    begin("test_add_bcast", "Add");
    IN("A", F32, (2, 3), 1, 2, 3, 4, 5, 6);
    IN("B", F32, (3), 10, 20, 30);
    OUT("C", F32, (2, 3), 11, 22, 33, 14, 25, 36);
    end();
    begin("test_sub_bcast_left", "Sub");
    IN("A", F32, (3), 10, 20, 30);
    IN("B", F32, (2, 3), 1, 2, 3, 4, 5, 6);
    OUT("C", F32, (2, 3), 9, 18, 27, 6, 15, 24);
    end();
    begin("test_mul_outer", "Mul");
    IN("A", F32, (2, 1), 100, 200);
    IN("B", F32, (3), 10, 20, 30);
    OUT("C", F32, (2, 3), 1000, 2000, 3000, 2000, 4000, 6000);
    end();
    begin("test_div_scalar", "Div");
    IN("A", F32, (2, 2), 1, 2, 3, 4);
    IN0("B", F32, 2);
    OUT("C", F32, (2, 2), 0.5, 1, 1.5, 2);
    end();
    begin("test_add_int32_wrap", "Add");
    IN("A", I32, (2), 2147483647, 5);
    IN("B", I32, (1), 1);
    OUT("C", I32, (2), -2147483648.0, 6);
    end();
    begin("test_div_int32", "Div");
    IN("A", I32, (3), 7, -7, 9);
    IN("B", I32, (3), 2, 2, -3);
    OUT("C", I32, (3), 3, -3, -3);
    end();
    begin("test_add_empty", "Add");
    IN("A", F32, (0, 3), 0);
    IN("B", F32, (3), 1, 2, 3);
    OUT("C", F32, (0, 3), 0);
    end();
    begin("test_neg", "Neg");
    IN("X", F32, (3), 1, -2, 0);
    OUT("Y", F32, (3), -1, 2, 0);
    end();
    begin("test_abs_int8", "Abs");
    IN("X", I8, (3), -7, 7, 0);
    OUT("Y", I8, (3), 7, 7, 0);
    end();
    begin("test_sqrt", "Sqrt");
    IN("X", F32, (2), 4, 2.25);
    OUT("Y", F32, (2), 2, 1.5);
    end();
    begin("test_exp", "Exp");
    IN("input", F32, (2), 0, 1);
    OUT("output", F32, (2), 1, 2.718281828459045);
    end();
    begin("test_log", "Log");
    IN("input", F32, (2), 1, 2.718281828459045);
    OUT("output", F32, (2), 0, 1);
    end();
    begin("test_pow_bcast", "Pow");
    IN("X", F32, (2, 1), 2, 3);
    IN("Y", F32, (2), 1, 2);
    OUT("Z", F32, (2, 2), 2, 4, 3, 9);
    end();
    begin("test_pow_int64_exp", "Pow");
    IN("X", F32, (3), 1, 2, 3);
    IN("Y", I64, (1), 3);
    OUT("Z", F32, (3), 1, 8, 27);
    end();
    begin("test_equal_bcast", "Equal");
    IN("A", F32, (2, 2), 1, 2, 3, 4);
    IN("B", F32, (2), 2, 2);
    OUT("C", BOOL, (2, 2), 0, 1, 0, 0);
    end();
    begin("test_greater", "Greater");
    IN("A", F32, (2, 2), 1, 2, 3, 4);
    IN("B", F32, (2), 2, 2);
    OUT("C", BOOL, (2, 2), 0, 0, 1, 1);
    end();
    begin("test_less_int64", "Less");
    IN("A", I64, (3), 1, 2, 3);
    IN0("B", I64, 2);
    OUT("C", BOOL, (3), 1, 0, 0);
    end();
    begin("test_where_bcast", "Where");
    IN("condition", BOOL, (2, 1), 1, 0);
    IN("X", F32, (3), 1, 2, 3);
    IN0("Y", F32, -1);
    OUT("output", F32, (2, 3), 1, 2, 3, -1, -1, -1);
    end();
}

static void linalg(void)
{
    begin("test_matmul_2d", "MatMul");
    IN("A", F32, (2, 3), 1, 2, 3, 4, 5, 6);
    IN("B", F32, (3, 2), 7, 8, 9, 10, 11, 12);
    OUT("Y", F32, (2, 2), 58, 64, 139, 154);
    end();
    begin("test_matmul_1d_2d", "MatMul");
    IN("A", F32, (3), 1, 2, 3);
    IN("B", F32, (3, 2), 7, 8, 9, 10, 11, 12);
    OUT("Y", F32, (2), 58, 64);
    end();
    begin("test_matmul_batch", "MatMul");
    IN("A", F32, (2, 2, 3), 1, 2, 3, 4, 5, 6, 0, 0, 1, 1, 0, 0);
    IN("B", F32, (2, 3, 2), 7, 8, 9, 10, 11, 12, 1, 0, 0, 1, 0, 0);
    OUT("Y", F32, (2, 2, 2), 58, 64, 139, 154, 0, 0, 1, 0);
    end();
    begin("test_matmul_int32", "MatMul");
    IN("A", I32, (2, 2), 1, 2, 3, 4);
    IN("B", I32, (2, 2), 5, 6, 7, 8);
    OUT("Y", I32, (2, 2), 19, 22, 43, 50);
    end();
    begin("test_gemm_default", "Gemm");
    IN("A", F32, (2, 3), 1, 2, 3, 4, 5, 6);
    IN("B", F32, (3, 2), 7, 8, 9, 10, 11, 12);
    OUT("Y", F32, (2, 2), 58, 64, 139, 154);
    end();
    begin("test_gemm_transB_bias", "Gemm");
    attr_i("transB", 1);
    IN("A", F32, (1, 3), 1, 2, 3);
    IN("B", F32, (2, 3), 7, 9, 11, 8, 10, 12);
    IN("C", F32, (2), 1, 1);
    OUT("Y", F32, (1, 2), 59, 65);
    end();
    begin("test_gemm_alpha_beta", "Gemm");
    attr_f("alpha", 2);
    attr_f("beta", 0.5);
    IN("A", F32, (2, 3), 1, 2, 3, 4, 5, 6);
    IN("B", F32, (3, 2), 7, 8, 9, 10, 11, 12);
    IN("C", F32, (2, 2), 2, 4, 6, 8);
    OUT("Y", F32, (2, 2), 117, 130, 281, 312);
    end();
    begin("test_gemm_transA_colC", "Gemm");
    attr_i("transA", 1);
    IN("A", F32, (3, 2), 1, 4, 2, 5, 3, 6);
    IN("B", F32, (3, 2), 7, 8, 9, 10, 11, 12);
    IN("C", F32, (2, 1), 1, 2);
    OUT("Y", F32, (2, 2), 59, 65, 141, 156);
    end();
    begin("test_dot_1d", "Dot");
    IN("A", F32, (3), 1, 2, 3);
    IN("B", F32, (3), 4, 5, 6);
    OUT0("Y", F32, 32);
    end();
}

static void activations(void)
{
    begin("test_relu", "Relu");
    IN("X", F32, (4), -2, -0.5, 0, 3);
    OUT("Y", F32, (4), 0, 0, 0, 3);
    end();
    begin("test_sigmoid", "Sigmoid");
    IN("X", F32, (3), 0, 2, -2);
    OUT("Y", F32, (3), 0.5, 0.8807970779778823, 0.11920292202211755);
    end();
    begin("test_tanh", "Tanh");
    IN("input", F32, (3), 0, 1, -1);
    OUT("output", F32, (3), 0, 0.7615941559557649, -0.7615941559557649);
    end();
    begin("test_leakyrelu_alpha", "LeakyRelu");
    attr_f("alpha", 0.5);
    IN("X", F32, (4), -2, -0.5, 0, 3);
    OUT("Y", F32, (4), -1, -0.25, 0, 3);
    end();
    begin("test_gelu_none", "Gelu");
    IN("X", F32, (3), -1, 0, 1);
    OUT("Y", F32, (3), -0.15865525393145707, 0, 0.8413447460685429);
    end();
    begin("test_gelu_tanh", "Gelu");
    attr_s("approximate", "tanh");
    IN("X", F32, (3), -1, 0, 1);
    OUT("Y", F32, (3), -0.15880800939172324, 0, 0.8411919906082768);
    end();
    begin("test_softmax_last", "Softmax");
    IN("input", F32, (2, 3), 1, 2, 3, 1, 1, 1);
    OUT("output", F32, (2, 3), 0.09003057317038046, 0.24472847105479764, 0.6652409557748219,
        1 / 3.0, 1 / 3.0, 1 / 3.0);
    end();
    begin("test_softmax_axis0", "Softmax");
    attr_i("axis", 0);
    IN("input", F32, (2, 3), 1, 2, 3, 1, 1, 1);
    OUT("output", F32, (2, 3), 0.5, 0.7310585786300049, 0.8807970779778823, 0.5,
        0.2689414213699951, 0.11920292202211755);
    end();
}

static void shapes(void)
{
    begin("test_reshape_infer", "Reshape");
    IN("data", F32, (2, 3), 1, 2, 3, 4, 5, 6);
    IN("shape", I64, (2), 0, -1);
    OUT("reshaped", F32, (2, 3), 1, 2, 3, 4, 5, 6);
    end();
    begin("test_reshape_flat", "Reshape");
    IN("data", F32, (2, 3), 1, 2, 3, 4, 5, 6);
    IN("shape", I64, (2), 3, 2);
    OUT("reshaped", F32, (3, 2), 1, 2, 3, 4, 5, 6);
    end();
    begin("test_flatten_axis2", "Flatten");
    attr_i("axis", 2);
    IN("input", F32, (2, 1, 2), 1, 2, 3, 4);
    OUT("output", F32, (2, 2), 1, 2, 3, 4);
    end();
    begin("test_transpose_default", "Transpose");
    IN("data", F32, (2, 3), 1, 2, 3, 4, 5, 6);
    OUT("transposed", F32, (3, 2), 1, 4, 2, 5, 3, 6);
    end();
    begin("test_transpose_perm", "Transpose");
    ATTR_INTS("perm", 2, 0, 1);
    IN("data", F32, (2, 2, 3), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11);
    OUT("transposed", F32, (3, 2, 2), 0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11);
    end();
    begin("test_concat_axis1", "Concat");
    attr_i("axis", 1);
    IN("a", F32, (2, 2), 1, 2, 3, 4);
    IN("b", F32, (2, 1), 7, 8);
    OUT("concat_result", F32, (2, 3), 1, 2, 7, 3, 4, 8);
    end();
    begin("test_concat_neg_axis_empty", "Concat");
    attr_i("axis", -2);
    IN("a", F32, (0, 2), 0);
    IN("b", F32, (1, 2), 5, 6);
    OUT("concat_result", F32, (1, 2), 5, 6);
    end();
    begin("test_split_equal", "Split");
    IN("input", F32, (6), 1, 2, 3, 4, 5, 6);
    OUT("o0", F32, (2), 1, 2);
    OUT("o1", F32, (2), 3, 4);
    OUT("o2", F32, (2), 5, 6);
    end();
    begin("test_split_sizes_axis1", "Split");
    attr_i("axis", 1);
    IN("input", F32, (2, 3), 1, 2, 3, 4, 5, 6);
    IN("split", I64, (2), 1, 2);
    OUT("o0", F32, (2, 1), 1, 4);
    OUT("o1", F32, (2, 2), 2, 3, 5, 6);
    end();
    begin("test_split_num_outputs", "Split");
    attr_i("num_outputs", 3);
    IN("input", F32, (5), 1, 2, 3, 4, 5);
    OUT("o0", F32, (2), 1, 2);
    OUT("o1", F32, (2), 3, 4);
    OUT("o2", F32, (1), 5);
    end();
    begin("test_slice_basic", "Slice");
    IN("data", F32, (3, 4), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11);
    IN("starts", I64, (2), 1, 0);
    IN("ends", I64, (2), 3, 2);
    OUT("output", F32, (2, 2), 4, 5, 8, 9);
    end();
    begin("test_slice_neg_steps", "Slice");
    IN("data", F32, (3, 4), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11);
    IN("starts", I64, (2), 2, 3);
    IN("ends", I64, (2), 0, 0);
    IN("axes", I64, (2), 0, 1);
    IN("steps", I64, (2), -2, -2);
    OUT("output", F32, (1, 2), 11, 9);
    end();
    begin("test_slice_axes_clamp", "Slice");
    IN("data", F32, (3, 4), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11);
    IN("starts", I64, (1), -3);
    IN("ends", I64, (1), 1000);
    IN("axes", I64, (1), -1);
    OUT("output", F32, (3, 3), 1, 2, 3, 5, 6, 7, 9, 10, 11);
    end();
    begin("test_squeeze_axes", "Squeeze");
    IN("data", F32, (1, 3, 1), 1, 2, 3);
    IN("axes", I64, (1), -1);
    OUT("squeezed", F32, (1, 3), 1, 2, 3);
    end();
    begin("test_squeeze_all", "Squeeze");
    IN("data", F32, (1, 3, 1), 1, 2, 3);
    OUT("squeezed", F32, (3), 1, 2, 3);
    end();
    begin("test_unsqueeze", "Unsqueeze");
    IN("data", F32, (3), 1, 2, 3);
    IN("axes", I64, (2), 0, -1);
    OUT("expanded", F32, (1, 3, 1), 1, 2, 3);
    end();
    begin("test_identity", "Identity");
    IN("input", I64, (2), 5, -5);
    OUT("output", I64, (2), 5, -5);
    end();
    begin("test_cast_float_int32", "Cast");
    attr_i("to", BB_DT_INT32);
    IN("input", F32, (3), 1.7, -1.7, 3e10);
    OUT("output", I32, (3), 1, -1, 2147483647);
    end();
    begin("test_cast_int64_float", "Cast");
    attr_i("to", BB_DT_FLOAT);
    IN("input", I64, (2), -3, 1099511627776.0);
    OUT("output", F32, (2), -3, 1099511627776.0);
    end();
    begin("test_cast_float_bool", "Cast");
    attr_i("to", BB_DT_BOOL);
    IN("input", F32, (3), 0, 0.5, -2);
    OUT("output", BOOL, (3), 0, 1, 1);
    end();
}

static void reductions(void)
{
    begin("test_reduce_sum_axes_keep", "ReduceSum");
    IN("data", F32, (2, 2, 2), 1, 2, 3, 4, 5, 6, 7, 8);
    IN("axes", I64, (1), 1);
    OUT("reduced", F32, (2, 1, 2), 4, 6, 12, 14);
    end();
    begin("test_reduce_sum_all_nokeep", "ReduceSum");
    attr_i("keepdims", 0);
    IN("data", F32, (2, 2, 2), 1, 2, 3, 4, 5, 6, 7, 8);
    OUT0("reduced", F32, 36);
    end();
    begin("test_reduce_sum_noop", "ReduceSum");
    attr_i("noop_with_empty_axes", 1);
    IN("data", F32, (2), 1, 2);
    OUT("reduced", F32, (2), 1, 2);
    end();
    begin("test_reduce_mean_neg_axis", "ReduceMean");
    attr_i("keepdims", 0);
    IN("data", F32, (2, 2, 2), 1, 2, 3, 4, 5, 6, 7, 8);
    IN("axes", I64, (2), 0, -1);
    OUT("reduced", F32, (2), 3.5, 5.5);
    end();
    begin("test_reduce_max", "ReduceMax");
    IN("data", F32, (2, 3), 1, 9, 3, -4, -5, -6);
    IN("axes", I64, (1), 1);
    OUT("reduced", F32, (2, 1), 9, -4);
    end();
    begin("test_reduce_min_int64", "ReduceMin");
    IN("data", I64, (2, 3), 1, 9, 3, -4, -5, -6);
    IN("axes", I64, (1), 0);
    OUT("reduced", I64, (1, 3), -4, -5, -6);
    end();
    begin("test_reduce_sum_empty", "ReduceSum");
    IN("data", F32, (2, 0), 0);
    IN("axes", I64, (1), 1);
    OUT("reduced", F32, (2, 1), 0, 0);
    end();
    begin("test_argmax_last_index", "ArgMax");
    attr_i("axis", 1);
    attr_i("select_last_index", 1);
    IN("data", F32, (2, 3), 1, 9, 9, 7, 2, 7);
    OUT("reduced", I64, (2, 1), 2, 2);
    end();
    begin("test_argmax_default", "ArgMax");
    IN("data", F32, (2, 3), 1, 9, 9, 7, 2, 7);
    OUT("reduced", I64, (1, 3), 1, 0, 0);
    end();
}

static void norms_conv(void)
{
    begin("test_batchnorm_inference", "BatchNormalization");
    attr_f("epsilon", 0);
    IN("X", F32, (1, 2, 1, 2), 3, 5, 1, -1);
    IN("scale", F32, (2), 1, 2);
    IN("B", F32, (2), 0, 1);
    IN("input_mean", F32, (2), 1, 0);
    IN("input_var", F32, (2), 4, 1);
    OUT("Y", F32, (1, 2, 1, 2), 1, 2, 3, -1);
    end();
    begin("test_layernorm_stats", "LayerNormalization");
    attr_f("epsilon", 0);
    IN("X", F32, (2, 3), 1, 2, 3, 0, 3, 6);
    IN("Scale", F32, (3), 1, 1, 2);
    IN("B", F32, (3), 0, 1, 0);
    OUT("Y", F32, (2, 3), -1.224744871391589, 1, 2.449489742783178, -1.224744871391589, 1,
        2.449489742783178);
    OUT("Mean", F32, (2, 1), 2, 3);
    OUT("InvStdDev", F32, (2, 1), 1.224744871391589, 0.4082482904638631);
    end();
    begin("test_conv_basic", "Conv");
    IN("X", F32, (1, 1, 3, 3), 0, 1, 2, 3, 4, 5, 6, 7, 8);
    IN("W", F32, (1, 1, 2, 2), 1, 2, 3, 4);
    IN("B", F32, (1), 10);
    OUT("Y", F32, (1, 1, 2, 2), 37, 47, 67, 77);
    end();
    begin("test_conv_pads_strides", "Conv");
    ATTR_INTS("pads", 1, 1, 1, 1);
    ATTR_INTS("strides", 2, 2);
    IN("X", F32, (1, 1, 3, 3), 0, 1, 2, 3, 4, 5, 6, 7, 8);
    IN("W", F32, (1, 1, 2, 2), 1, 2, 3, 4);
    OUT("Y", F32, (1, 1, 2, 2), 0, 11, 30, 67);
    end();
    begin("test_conv_dilations", "Conv");
    ATTR_INTS("dilations", 2, 2);
    IN("X", F32, (1, 1, 3, 3), 0, 1, 2, 3, 4, 5, 6, 7, 8);
    IN("W", F32, (1, 1, 2, 2), 1, 2, 3, 4);
    OUT("Y", F32, (1, 1, 1, 1), 54);
    end();
    begin("test_conv_same_upper", "Conv");
    attr_s("auto_pad", "SAME_UPPER");
    IN("X", F32, (1, 1, 3, 3), 0, 1, 2, 3, 4, 5, 6, 7, 8);
    IN("W", F32, (1, 1, 2, 2), 1, 2, 3, 4);
    OUT("Y", F32, (1, 1, 3, 3), 27, 37, 17, 57, 67, 29, 20, 23, 8);
    end();
    begin("test_conv_group", "Conv");
    attr_i("group", 2);
    IN("X", F32, (1, 2, 1, 2), 1, 2, 3, 4);
    IN("W", F32, (2, 1, 1, 1), 10, 100);
    OUT("Y", F32, (1, 2, 1, 2), 10, 20, 300, 400);
    end();
    begin("test_maxpool_indices", "MaxPool");
    ATTR_INTS("kernel_shape", 2, 2);
    ATTR_INTS("strides", 2, 2);
    IN("X", F32, (1, 1, 4, 4), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
    OUT("Y", F32, (1, 1, 2, 2), 6, 8, 14, 16);
    OUT("Indices", I64, (1, 1, 2, 2), 5, 7, 13, 15);
    end();
    begin("test_maxpool_ceil", "MaxPool");
    ATTR_INTS("kernel_shape", 1, 2);
    ATTR_INTS("strides", 1, 2);
    attr_i("ceil_mode", 1);
    IN("X", F32, (1, 1, 1, 5), 1, 5, 2, 4, 3);
    OUT("Y", F32, (1, 1, 1, 3), 5, 4, 3);
    end();
    begin("test_averagepool_pads", "AveragePool");
    ATTR_INTS("kernel_shape", 2, 2);
    ATTR_INTS("pads", 1, 1, 0, 0);
    IN("X", F32, (1, 1, 2, 2), 1, 2, 3, 4);
    OUT("Y", F32, (1, 1, 2, 2), 1, 1.5, 2, 2.5);
    end();
    begin("test_averagepool_include_pad", "AveragePool");
    ATTR_INTS("kernel_shape", 2, 2);
    ATTR_INTS("pads", 1, 1, 0, 0);
    attr_i("count_include_pad", 1);
    IN("X", F32, (1, 1, 2, 2), 1, 2, 3, 4);
    OUT("Y", F32, (1, 1, 2, 2), 0.25, 0.75, 1, 2.5);
    end();
    begin("test_globalaveragepool", "GlobalAveragePool");
    IN("X", F32, (1, 2, 2, 1), 1, 3, 5, 9);
    OUT("Y", F32, (1, 2, 1, 1), 2, 7);
    end();
}

static void creation_indexing(void)
{
    begin("test_zeros", "Zeros");
    IN("shape", I64, (2), 2, 2);
    OUT("output", F32, (2, 2), 0, 0, 0, 0);
    end();
    begin("test_ones_int64", "Ones");
    attr_i("dtype", BB_DT_INT64);
    IN("shape", I64, (1), 3);
    OUT("output", I64, (3), 1, 1, 1);
    end();
    begin("test_constant_value", "Constant");
    bb_attr *a = bb_node_add_attr(C.m->arena, C.n, "value", BB_ATTR_TENSOR);
    a->t = tproto(C.m->arena, "value", F32, SHP(1, 2), VALS(1.5, -2));
    OUT("output", F32, (1, 2), 1.5, -2);
    end();
    begin("test_constant_value_ints", "Constant");
    ATTR_INTS("value_ints", 1, 2, 3);
    OUT("output", I64, (3), 1, 2, 3);
    end();
    begin("test_gather_axis0", "Gather");
    IN("data", F32, (3, 2), 1, 2, 3, 4, 5, 6);
    IN("indices", I64, (2, 2), 0, 1, 1, 2);
    OUT("output", F32, (2, 2, 2), 1, 2, 3, 4, 3, 4, 5, 6);
    end();
    begin("test_gather_axis1_negative", "Gather");
    attr_i("axis", 1);
    IN("data", F32, (3, 2), 1, 2, 3, 4, 5, 6);
    IN("indices", I32, (2), 1, -2);
    OUT("output", F32, (3, 2), 2, 1, 4, 3, 6, 5);
    end();
    begin("test_scatter_axis0", "Scatter");
    IN("data", F32, (3, 3), 0, 0, 0, 0, 0, 0, 0, 0, 0);
    IN("indices", I64, (2, 3), 1, 0, 2, 0, 2, 1);
    IN("updates", F32, (2, 3), 1.0, 1.1, 1.2, 2.0, 2.1, 2.2);
    OUT("output", F32, (3, 3), 2.0, 1.1, 0.0, 1.0, 0.0, 2.2, 0.0, 2.1, 1.2);
    end();
    begin("test_scatter_axis1_negative", "Scatter");
    attr_i("axis", 1);
    IN("data", F32, (1, 5), 1, 2, 3, 4, 5);
    IN("indices", I64, (1, 2), 1, -3);
    IN("updates", F32, (1, 2), 1.1, 2.1);
    OUT("output", F32, (1, 5), 1.0, 1.1, 2.1, 4.0, 5.0);
    end();
}

/* A subgraph attribute on the current node. */
static bb_graph *subgraph(const char *attr, const char *name)
{
    bb_attr *at = bb_node_add_attr(C.m->arena, C.n, attr, BB_ATTR_GRAPH);
    at->g = bb_graph_new(C.m->arena, name);
    return at->g;
}

static bb_node *sub_node(bb_graph *g, const char *op, const char *const *ins, int nin,
                         const char *const *outs, int nout)
{
    bb_arena *a = C.m->arena;
    bb_node *n = bb_graph_add_node(a, g, "", op);
    for (int i = 0; i < nin; i++)
        bb_str_list_push(a, &n->inputs, ins[i]);
    for (int i = 0; i < nout; i++)
        bb_str_list_push(a, &n->outputs, outs[i]);
    return n;
}

static void control(void)
{
    /* If: cond ? x + x : -x, branches reading x from the outer scope */
    for (int c = 0; c < 2; c++) {
        begin(c ? "test_if_then" : "test_if_else", NULL);
        C.n = NULL;
        IN("x", F32, (2), 1, -3);
        IN0("cond", BOOL, c);
        C.n = bb_graph_add_node(C.m->arena, C.g, "", "If");
        C.n->name = "node";
        bb_str_list_push(C.m->arena, &C.n->inputs, "cond");
        bb_graph *tb = subgraph("then_branch", "then");
        *(bb_value_info **)BB_VEC_PUSH(C.m->arena, &tb->outputs) =
            vinfo(C.m->arena, "t_out", F32, SHP(2));
        sub_node(tb, "Add", (const char *[]){"x", "x"}, 2, (const char *[]){"t_out"}, 1);
        bb_graph *eb = subgraph("else_branch", "else");
        *(bb_value_info **)BB_VEC_PUSH(C.m->arena, &eb->outputs) =
            vinfo(C.m->arena, "e_out", F32, SHP(2));
        sub_node(eb, "Neg", (const char *[]){"x"}, 1, (const char *[]){"e_out"}, 1);
        if (c)
            OUT("out", F32, (2), 2, -6);
        else
            OUT("out", F32, (2), -1, 3);
        end();
    }
    /* Loop: acc += float(i) for i < M; scan output acc * 2 */
    begin("test_loop_scan", NULL);
    C.n = NULL;
    IN0("M", I64, 4);
    IN("init", F32, (1), 0);
    C.n = bb_graph_add_node(C.m->arena, C.g, "", "Loop");
    C.n->name = "node";
    bb_str_list_push(C.m->arena, &C.n->inputs, "M");
    skip_in();
    bb_str_list_push(C.m->arena, &C.n->inputs, "init");
    bb_graph *body = subgraph("body", "body");
    bb_arena *a = C.m->arena;
    *(bb_value_info **)BB_VEC_PUSH(a, &body->inputs) = vinfo(a, "i", I64, 0, NULL);
    *(bb_value_info **)BB_VEC_PUSH(a, &body->inputs) = vinfo(a, "cond_in", BOOL, 0, NULL);
    *(bb_value_info **)BB_VEC_PUSH(a, &body->inputs) = vinfo(a, "acc", F32, SHP(1));
    *(bb_value_info **)BB_VEC_PUSH(a, &body->outputs) = vinfo(a, "cond_out", BOOL, 0, NULL);
    *(bb_value_info **)BB_VEC_PUSH(a, &body->outputs) = vinfo(a, "acc2", F32, SHP(1));
    *(bb_value_info **)BB_VEC_PUSH(a, &body->outputs) = vinfo(a, "s", F32, SHP(1));
    *(bb_tensor_proto **)BB_VEC_PUSH(a, &body->initializers) =
        tproto(a, "two", F32, 0, NULL, VALS(2));
    bb_node *cast = sub_node(body, "Cast", (const char *[]){"i"}, 1, (const char *[]){"fi"}, 1);
    bb_node_set_attr_int(a, cast, "to", BB_DT_FLOAT);
    sub_node(body, "Add", (const char *[]){"acc", "fi"}, 2, (const char *[]){"acc2"}, 1);
    sub_node(body, "Identity", (const char *[]){"cond_in"}, 1, (const char *[]){"cond_out"}, 1);
    sub_node(body, "Mul", (const char *[]){"acc2", "two"}, 2, (const char *[]){"s"}, 1);
    OUT("final", F32, (1), 6);
    OUT("scan", F32, (4, 1), 0, 2, 6, 12);
    end();
}

/* ---- the MLP written to argv[1] ------------------------------------------------------- */

static void write_mlp(const char *path)
{
    enum { IN_ = 784, HID = 128, OUT_ = 10 };
    bb_model *m = bb_model_new();
    if (!m)
        die("out of memory", NULL);
    bb_arena *a = m->arena;
    m->ir_version = BB_FRAMEWORK_IR_VERSION;
    m->producer_name = "bytesandbrains cpu_testdata";
    bb_opset_list_add(a, &m->opset_imports, "", BB_ONNX_OPSET_VERSION);
    bb_graph *g = bb_graph_new(a, "mlp_784_128_10");
    m->graph = g;
    bb_type_proto *xt = bb_type_proto_tensor(a, F32);
    xt->has_shape = true;
    bb_dim *d0 = BB_VEC_PUSH(a, &xt->shape);
    d0->param = "N";
    bb_dim *d1 = BB_VEC_PUSH(a, &xt->shape);
    d1->has_value = true;
    d1->value = IN_;
    *(bb_value_info **)BB_VEC_PUSH(a, &g->inputs) = bb_value_info_new(a, "x", xt);
    *(bb_value_info **)BB_VEC_PUSH(a, &g->outputs) =
        bb_value_info_new(a, "y", bb_type_proto_tensor(a, F32));
    static const struct { const char *name; int64_t d0, d1; } W[] = {
        {"W1", HID, IN_}, {"b1", HID, 0}, {"W2", OUT_, HID}, {"b2", OUT_, 0}};
    unsigned seed = 12345;
    for (size_t k = 0; k < 4; k++) {
        size_t n = (size_t)W[k].d0 * (size_t)(W[k].d1 ? W[k].d1 : 1);
        double *v = malloc(n * sizeof *v);
        if (!v)
            die("out of memory", NULL);
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1664525u + 1013904223u;
            v[i] = ((double)((seed >> 9) % 2001) / 1000.0 - 1.0) * (k % 2 ? 0.1 : 0.05);
        }
        int64_t dims[2] = {W[k].d0, W[k].d1};
        *(bb_tensor_proto **)BB_VEC_PUSH(a, &g->initializers) =
            tproto(a, W[k].name, F32, W[k].d1 ? 2 : 1, dims, v, n);
        free(v);
    }
    static const char *const g1[] = {"x", "W1", "b1"}, *const g2[] = {"h2", "W2", "b2"};
    bb_node *n = bb_graph_add_node(a, g, "", "Gemm");
    for (int i = 0; i < 3; i++)
        bb_str_list_push(a, &n->inputs, g1[i]);
    bb_str_list_push(a, &n->outputs, "h1");
    bb_node_set_attr_int(a, n, "transB", 1);
    n = bb_graph_add_node(a, g, "", "Relu");
    bb_str_list_push(a, &n->inputs, "h1");
    bb_str_list_push(a, &n->outputs, "h2");
    n = bb_graph_add_node(a, g, "", "Gemm");
    for (int i = 0; i < 3; i++)
        bb_str_list_push(a, &n->inputs, g2[i]);
    bb_str_list_push(a, &n->outputs, "z");
    bb_node_set_attr_int(a, n, "transB", 1);
    n = bb_graph_add_node(a, g, "", "Softmax");
    bb_str_list_push(a, &n->inputs, "z");
    bb_str_list_push(a, &n->outputs, "y");
    bb_error err = {0};
    if (bb_model_save_file(m, path, &err))
        die(path, &err);
    bb_model_free(m);
}

/* x for the MLP, so `bbd run <path>.onnx x=<path>_x.pb` works as it is
 * (README's tour): two rows of 784 pixels in [0, 1). */
static void write_mlp_input(const char *mlp_path)
{
    enum { ROWS = 2, COLS = 784 };
    char path[PATH_MAX + 16];
    size_t n = strlen(mlp_path);
    if (n > 5 && strcmp(mlp_path + n - 5, ".onnx") == 0)
        n -= 5;
    snprintf(path, sizeof path, "%.*s_x.pb", (int)n, mlp_path);
    bb_model *m = bb_model_new();
    if (!m)
        die("out of memory", NULL);
    static double v[ROWS * COLS];
    unsigned seed = 784;
    for (size_t i = 0; i < ROWS * COLS; i++) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = (double)((seed >> 9) % 1000) / 1000.0;
    }
    write_pb_file(path, tproto(m->arena, "x", F32, 2, (const int64_t[]){ROWS, COLS}, v,
                               ROWS * COLS));
    bb_model_free(m);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: cpu_testdata OUT.onnx\n");
        return 2;
    }
    char copy[PATH_MAX];
    snprintf(copy, sizeof copy, "%s", argv[1]);
    snprintf(C.root, sizeof C.root, "%s/cpu_testdata", dirname(copy));
    mkdir_p(C.root);
    elementwise();
    linalg();
    activations();
    shapes();
    reductions();
    norms_conv();
    creation_indexing();
    control();
    write_mlp(argv[1]);
    write_mlp_input(argv[1]);
    printf("cpu_testdata: %d cases in %s, MLP model in %s\n", C.written, C.root, argv[1]);
    return 0;
}
