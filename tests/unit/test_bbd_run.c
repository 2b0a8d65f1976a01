/*
 * Unit tests for the pieces of `bbd run` (bbd/host/run_internal.h): a
 * plain ONNX graph becoming a module (constants, captured outer scope,
 * AppEmit for consumed outputs, refusals), TensorProto files as untrusted
 * input (truncated, wrong byte count, unsupported dtype), writing and the
 * allclose comparison, and target selection. The CLI end to end is
 * tests/integration/bbd_run.sh.
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

#include "bb/artifact.h"
#include "bb/meta.h"
#include "bb/model_io.h"
#include "bbc/compiler.h"
#include "bbd/host/run_internal.h"

static void assert_contains(const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        fail_msg("\"%s\" does not contain \"%s\"", hay, needle);
}

/* ---- building plain graphs --------------------------------------------------------- */

static bb_node *node(bb_arena *a, bb_graph *g, const char *op, const char *in0,
                     const char *in1, const char *out)
{
    bb_node *n = bb_graph_add_node(a, g, "", op);
    assert_non_null(n);
    if (in0)
        assert_int_equal(bb_str_list_push(a, &n->inputs, in0), BB_OK);
    if (in1)
        assert_int_equal(bb_str_list_push(a, &n->inputs, in1), BB_OK);
    assert_int_equal(bb_str_list_push(a, &n->outputs, out), BB_OK);
    return n;
}

static void port(bb_arena *a, bb_value_info_list *l, const char *name)
{
    *(bb_value_info **)BB_VEC_PUSH(a, l) =
        bb_value_info_new(a, name, bb_type_proto_tensor(a, BB_DT_FLOAT));
}

static bb_tensor_proto *scalar(bb_arena *a, const char *name, float v)
{
    bb_tensor_proto *t = bb_arena_calloc(a, 1, sizeof *t);
    t->name = bb_arena_strdup(a, name);
    t->data_type = BB_DT_FLOAT;
    t->raw_data.data = bb_arena_memdup(a, &v, sizeof v);
    t->raw_data.len = sizeof v;
    t->has_raw_data = true;
    return t;
}

/*
 *   h = Add(x, w)           w: initializer, also listed as a graph input
 *   y = If(c) then { t = Mul(h, x) } else { e = Neg(k) }   k: reads nested
 *   outputs: y, h           (h is consumed by the If's subgraph)
 */
static bb_model *plain_model(void)
{
    bb_model *m = bb_model_new();
    assert_non_null(m);
    bb_arena *a = m->arena;
    m->ir_version = 8;
    assert_int_equal(bb_opset_list_add(a, &m->opset_imports, "", 13), BB_OK);
    bb_graph *g = m->graph = bb_graph_new(a, "g");
    port(a, &g->inputs, "x");
    port(a, &g->inputs, "c");
    port(a, &g->inputs, "w");
    *(bb_tensor_proto **)BB_VEC_PUSH(a, &g->initializers) = scalar(a, "w", 2.0f);
    *(bb_tensor_proto **)BB_VEC_PUSH(a, &g->initializers) = scalar(a, "k", 3.0f);
    node(a, g, "Add", "x", "w", "h");
    bb_node *iff = node(a, g, "If", "c", NULL, "y");
    bb_attr *tb = bb_node_add_attr(a, iff, "then_branch", BB_ATTR_GRAPH);
    tb->g = bb_graph_new(a, "then");
    node(a, tb->g, "Mul", "h", "x", "t");
    port(a, &tb->g->outputs, "t");
    bb_attr *eb = bb_node_add_attr(a, iff, "else_branch", BB_ATTR_GRAPH);
    eb->g = bb_graph_new(a, "else");
    /* a nested If reading k from two levels up */
    bb_node *inner = node(a, eb->g, "If", "c", NULL, "e");
    bb_attr *itb = bb_node_add_attr(a, inner, "then_branch", BB_ATTR_GRAPH);
    itb->g = bb_graph_new(a, "inner");
    node(a, itb->g, "Neg", "k", NULL, "n");
    port(a, &itb->g->outputs, "n");
    port(a, &eb->g->outputs, "e");
    port(a, &g->outputs, "y");
    port(a, &g->outputs, "h");
    return m;
}

static const bb_node *find_node(const bb_function *f, const char *op)
{
    for (size_t i = 0; i < f->nodes.n; i++)
        if (strcmp(f->nodes.v[i]->op_type, op) == 0)
            return f->nodes.v[i];
    return NULL;
}

static void test_module_shape(void **state)
{
    (void)state;
    bb_model *plain = plain_model(), *m = NULL;
    bb_error err = {0};
    assert_true(bbd_run_is_plain_onnx(plain));
    assert_int_equal(bbd_run_module_from_onnx(plain, "p.onnx", &m, &err), BB_OK);
    assert_false(bbd_run_is_plain_onnx(m));
    assert_int_equal(m->functions.n, 1);
    const bb_function *f = m->functions.v[0];
    assert_string_equal(f->name, BBD_RUN_MODULE_NAME);
    assert_string_equal(f->domain, BBD_RUN_MODULE_DOMAIN);
    /* w has an initializer: a constant, not an input */
    assert_int_equal(f->inputs.n, 2);
    assert_string_equal(f->inputs.v[0], "x");
    assert_string_equal(f->inputs.v[1], "c");
    assert_int_equal(f->outputs.n, 2);
    assert_int_equal(f->attributes.n, 1);
    assert_string_equal(f->attributes.v[0], BBD_RUN_BACKEND_SLOT);
    assert_string_equal(bb_kv_get(&f->metadata, BB_META_SLOT_ROLE_PREFIX "backend"), "Backend");
    /* initializers first, as Constants with a typed value_info */
    assert_string_equal(f->nodes.v[0]->op_type, "Constant");
    assert_string_equal(f->nodes.v[0]->outputs.v[0], "w");
    assert_non_null(bb_value_info_find(&f->value_info, "k"));
    /* every ai.onnx node sits on the backend slot */
    const bb_node *add = find_node(f, "Add");
    assert_non_null(add);
    assert_string_equal(bb_kv_get(&add->metadata, BB_META_SLOT), "backend");
    assert_string_equal(bb_kv_get(&add->metadata, BB_META_SLOT_ID), "0");
    /* the If's subgraphs read h, x (then), c (the nested If's input) and k
     * (two levels down): captured once each, in first-read order */
    const bb_node *iff = find_node(f, "If");
    assert_non_null(iff);
    assert_int_equal(iff->inputs.n, 5);
    const char *want[] = {"h", "x", "c", "k"};
    for (int k = 0; k < 4; k++) {
        char key[64];
        snprintf(key, sizeof key, "%s%d", BB_META_OUTER_SCOPE_PREFIX, k);
        assert_string_equal(iff->inputs.v[1 + k], want[k]);
        assert_string_equal(bb_kv_get(&iff->metadata, key), want[k]);
    }
    assert_null(bb_kv_get(&iff->metadata, BB_META_OUTER_SCOPE_PREFIX "4"));
    /* the nested If is left as it is: the backend's executor resolves it */
    const bb_node *inner = iff->attrs.v[1]->g->nodes.v[0];
    assert_int_equal(inner->inputs.n, 1);
    /* h is an output the If consumes: it surfaces through AppEmit; y does not need it */
    const bb_node *emit = find_node(f, "AppEmit");
    assert_non_null(emit);
    assert_string_equal(emit->inputs.v[0], "h");
    assert_string_equal(bb_node_attr_string(emit, "name", ""), "h");
    size_t emits = 0;
    for (size_t i = 0; i < f->nodes.n; i++)
        emits += strcmp(f->nodes.v[i]->op_type, "AppEmit") == 0;
    assert_int_equal(emits, 1);
    /* the top-level graph calls the module */
    assert_int_equal(m->graph->nodes.n, 1);
    assert_string_equal(m->graph->nodes.v[0]->op_type, BBD_RUN_MODULE_NAME);
    bb_model_free(m);
    bb_model_free(plain);
}

static void test_module_refusals(void **state)
{
    (void)state;
    bb_error err = {0};
    bb_model *m = NULL;
    /* another domain */
    bb_model *p = plain_model();
    p->graph->nodes.v[0]->domain = "com.microsoft";
    p->graph->nodes.v[0]->name = "fused";
    assert_int_equal(bbd_run_module_from_onnx(p, "p.onnx", &m, &err), BB_EUNSUPPORTED);
    assert_null(m);
    assert_contains(err.msg, "p.onnx: node 'fused' (Add) is in domain 'com.microsoft'");
    bb_model_free(p);
    /* BB metadata without functions */
    p = plain_model();
    assert_int_equal(bb_kv_set(p->arena, &p->graph->nodes.v[0]->metadata, BB_META_SLOT, "s"),
                     BB_OK);
    assert_int_equal(bbd_run_module_from_onnx(p, "p.onnx", &m, &err), BB_EPARSE);
    assert_contains(err.msg, "BytesAndBrains metadata");
    bb_model_free(p);
    /* no outputs */
    p = plain_model();
    p->graph->outputs.n = 0;
    assert_int_equal(bbd_run_module_from_onnx(p, "p.onnx", &m, &err), BB_EPARSE);
    assert_contains(err.msg, "no outputs");
    bb_model_free(p);
    /* not plain at all */
    p = bb_model_new();
    assert_int_equal(bbd_run_module_from_onnx(p, "p.onnx", &m, &err), BB_EINVAL);
    bb_model_free(p);
}

/* ---- tensor files ---------------------------------------------------------------------- */

static char g_dir[64];

static const char *tmp_path(const char *name)
{
    static char buf[4][128];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 128, "%s/%s", g_dir, name);
    return p;
}

static void write_bytes(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static void write_proto(const char *path, int32_t dt, const int64_t *dims, size_t nd,
                        const void *raw, size_t raw_len)
{
    bb_tensor_proto t = {.name = "t", .data_type = dt, .has_raw_data = true};
    t.dims.v = (int64_t *)dims;
    t.dims.n = nd;
    t.raw_data.data = (uint8_t *)raw;
    t.raw_data.len = raw_len;
    uint8_t *bytes;
    size_t len;
    bb_error err = {0};
    assert_int_equal(bb_tensor_proto_encode(&t, &bytes, &len, &err), BB_OK);
    write_bytes(path, bytes, len);
    free(bytes);
}

static void test_tensor_round_trip(void **state)
{
    (void)state;
    float v[6] = {1, 2, 3, 4, 5, 6};
    int64_t dims[2] = {2, 3};
    bb_value *t = bb_value_tensor_copy(BB_DT_FLOAT, 2, dims, v, sizeof v);
    assert_non_null(t);
    bb_error err = {0};
    assert_int_equal(bbd_run_tensor_write(tmp_path("t.pb"), "probs", t, &err), BB_OK);
    bb_value *back = NULL;
    char *name = NULL;
    assert_int_equal(bbd_run_tensor_read(tmp_path("t.pb"), &back, &name, &err), BB_OK);
    assert_string_equal(name, "probs");
    assert_true(bb_value_equal(t, back));
    char line[128];
    assert_string_equal(bbd_run_summary("probs", back, line, sizeof line), "probs: float [2,3]");
    /* a non-tensor is not written */
    bb_value *trig = bb_value_trigger();
    assert_int_equal(bbd_run_tensor_write(tmp_path("u.pb"), "u", trig, &err), BB_ETYPE);
    assert_contains(err.msg, "output 'u' is a");
    assert_int_equal(access(tmp_path("u.pb"), F_OK), -1);
    bb_value_unref(trig);
    free(name);
    bb_value_unref(back);
    bb_value_unref(t);
}

static void test_tensor_untrusted(void **state)
{
    (void)state;
    bb_error err = {0};
    bb_value *v = NULL;
    assert_int_equal(bbd_run_tensor_read(tmp_path("none.pb"), &v, NULL, &err), BB_EIO);
    assert_contains(err.msg, "none.pb");
    /* not protobuf */
    write_bytes(tmp_path("junk.pb"), "\xff\xff\xff\xff\xff", 5);
    assert_int_not_equal(bbd_run_tensor_read(tmp_path("junk.pb"), &v, NULL, &err), BB_OK);
    assert_contains(err.msg, "junk.pb");
    assert_null(v);
    /* 5 bytes of data for 2 floats */
    int64_t dims[1] = {2};
    write_proto(tmp_path("short.pb"), BB_DT_FLOAT, dims, 1, "abcde", 5);
    assert_int_equal(bbd_run_tensor_read(tmp_path("short.pb"), &v, NULL, &err), BB_EPARSE);
    assert_contains(err.msg, "5 data bytes for 2 elements of float (want 8)");
    /* a dtype values cannot hold */
    write_proto(tmp_path("str.pb"), BB_DT_STRING, dims, 1, "", 0);
    assert_int_equal(bbd_run_tensor_read(tmp_path("str.pb"), &v, NULL, &err), BB_EUNSUPPORTED);
    assert_contains(err.msg, "dtype string");
    /* too many dimensions */
    int64_t many[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    float one = 1;
    write_proto(tmp_path("rank.pb"), BB_DT_FLOAT, many, 9, &one, 4);
    assert_int_equal(bbd_run_tensor_read(tmp_path("rank.pb"), &v, NULL, &err), BB_ELIMIT);
    assert_contains(err.msg, "rank 9");
    /* a directory is not a tensor file */
    assert_int_equal(bbd_run_tensor_read(g_dir, &v, NULL, &err), BB_EIO);
    assert_null(v);
}

static void test_tensor_close(void **state)
{
    (void)state;
    int64_t d3[1] = {3}, d13[2] = {1, 3};
    float a[3] = {1.0f, -2.0f, NAN}, b[3] = {1.0005f, -2.0f, NAN}, c[3] = {1.1f, -2.0f, NAN};
    bb_value *va = bb_value_tensor_copy(BB_DT_FLOAT, 1, d3, a, sizeof a);
    bb_value *vb = bb_value_tensor_copy(BB_DT_FLOAT, 1, d3, b, sizeof b);
    bb_value *vc = bb_value_tensor_copy(BB_DT_FLOAT, 1, d3, c, sizeof c);
    bb_value *vs = bb_value_tensor_copy(BB_DT_FLOAT, 2, d13, a, sizeof a);
    int32_t i1[3] = {1, 2, 3}, i2[3] = {1, 2, 4};
    bb_value *vi = bb_value_tensor_copy(BB_DT_INT32, 1, d3, i1, sizeof i1);
    bb_value *vj = bb_value_tensor_copy(BB_DT_INT32, 1, d3, i2, sizeof i2);
    char why[256];
    assert_true(bbd_run_tensor_close(va, vb, 1e-3, 1e-5, why, sizeof why));
    assert_false(bbd_run_tensor_close(va, vc, 1e-3, 1e-5, why, sizeof why));
    assert_contains(why, "element 0 is 1, expected 1.10000002");
    assert_false(bbd_run_tensor_close(va, vs, 1e-3, 1e-5, why, sizeof why));
    assert_contains(why, "shape float [3], expected float [1,3]");
    assert_false(bbd_run_tensor_close(va, vi, 1e-3, 1e-5, why, sizeof why));
    assert_contains(why, "dtype float, expected int32");
    assert_true(bbd_run_tensor_close(vi, vi, 0, 0, why, sizeof why));
    assert_false(bbd_run_tensor_close(vi, vj, 1, 1, why, sizeof why));
    assert_contains(why, "element 2 is 3, expected 4");
    bb_value *vals[] = {va, vb, vc, vs, vi, vj};
    for (size_t k = 0; k < 6; k++)
        bb_value_unref(vals[k]);
}

/* ---- targets ---------------------------------------------------------------------------- */

static void test_pick_target(void **state)
{
    (void)state;
    bb_model *m = bb_model_new();
    const bb_function *t = NULL;
    bb_error err = {0};
    assert_int_equal(bbd_run_pick_target(m, NULL, &t, &err), BB_EINVAL);
    assert_contains(err.msg, "not a compiled model");
    assert_int_equal(bb_artifact_stamp_passport(m), BB_OK);
    assert_int_equal(bbd_run_pick_target(m, NULL, &t, &err), BB_ENOTFOUND);
    const char *names[] = {"Server", "Client", "Client__bootstrap"};
    for (int i = 0; i < 3; i++) {
        bb_function *f = bb_model_add_function(m, "user.app", names[i]);
        assert_int_equal(bb_kv_set(m->arena, &f->metadata, BB_META_PARTITION_ID, "x#0"), BB_OK);
        if (i == 2)
            assert_int_equal(bb_kv_set(m->arena, &f->metadata, BB_META_MODULE_PHASE,
                                       BB_MODULE_PHASE_BOOTSTRAP),
                             BB_OK);
    }
    assert_int_equal(bbd_run_pick_target(m, NULL, &t, &err), BB_EINVAL);
    assert_contains(err.msg, "2 targets (Server, Client): choose one with --target");
    assert_int_equal(bbd_run_pick_target(m, "Client", &t, &err), BB_OK);
    assert_ptr_equal(t, m->functions.v[1]);
    assert_string_equal(t->name, "Client");
    assert_int_equal(bbd_run_pick_target(m, "Nobody", &t, &err), BB_ENOTFOUND);
    assert_contains(err.msg, "no target 'Nobody' (targets: Server, Client)");
    assert_null(t);
    bb_model_free(m);
}

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/bb-test-bbd-run.XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_module_shape),
        cmocka_unit_test(test_module_refusals),
        cmocka_unit_test(test_tensor_round_trip),
        cmocka_unit_test(test_tensor_untrusted),
        cmocka_unit_test(test_tensor_close),
        cmocka_unit_test(test_pick_target),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
