/* Unit tests for the text dump, bb_type_proto_str and the JSON dump (bb/model_io.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bb/model_io.h"
#include "libbbir/src/utf8.h"

typedef void (*dump_fn)(const bb_model *, FILE *);

/* Returns malloc'd output of fn(m). */
static char *dump_to_string(const bb_model *m, dump_fn fn)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    fn(m, f);
    assert_int_equal(fclose(f), 0);
    return buf;
}

static void assert_has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
        if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == 0))
            return;
    fail_msg("line not found: [%s] in:\n%s", line, text);
}

static void bytes_set(bb_arena *a, bb_bytes *b, const void *data, size_t len)
{
    b->data = bb_arena_alloc(a, len + 1); /* zeroed: NUL-terminated like loaded bytes */
    memcpy(b->data, data, len);
    b->len = len;
}

static bb_type_proto *tensor_type(bb_arena *a, int32_t dt, const char *p0, int64_t d1)
{
    bb_type_proto *t = bb_type_proto_tensor(a, dt);
    t->has_shape = true;
    bb_dim *d = BB_VEC_PUSH(a, &t->shape);
    d->param = p0;
    d = BB_VEC_PUSH(a, &t->shape);
    d->has_value = true;
    d->value = d1;
    return t;
}

/* A model with a function (slots, value_info, metadata, nodes with
 * attributes) and a main graph with an initializer. */
static bb_model *sample_model(void)
{
    bb_model *m = bb_model_new();
    bb_arena *a = m->arena;
    m->ir_version = 10;
    m->producer_name = "bytesandbrains";
    m->producer_version = "0.9.0";
    m->domain = "user.app";
    m->has_model_version = true;
    m->model_version = 1;
    bb_opset_list_add(a, &m->opset_imports, "", 17);
    bb_opset_list_add(a, &m->opset_imports, "ai.bytesandbrains.syscall", 1);
    bb_kv_set(a, &m->metadata, "bb.program", "demo");

    bb_function *f = bb_model_add_function(m, "user.app", "Client");
    bb_str_list_push(a, &f->inputs, "x");
    bb_str_list_push(a, &f->outputs, "y");
    bb_str_list_push(a, &f->attributes, "model");
    bb_attr *cs = bb_arena_alloc(a, sizeof *cs);
    cs->name = "codec";
    cs->type = BB_ATTR_STRING;
    bytes_set(a, &cs->s, "{\"level\":3}", 11);
    cs->has_s = true;
    *(bb_attr **)BB_VEC_PUSH(a, &f->attribute_protos) = cs;
    bb_opset_list_add(a, &f->opset_imports, "ai.bytesandbrains.syscall", 1);
    *(bb_value_info **)BB_VEC_PUSH(a, &f->value_info) =
        bb_value_info_new(a, "x", tensor_type(a, BB_DT_FLOAT, "N", 784));
    *(bb_value_info **)BB_VEC_PUSH(a, &f->value_info) =
        bb_value_info_new(a, "p", bb_type_proto_opaque(a, "ai.bytesandbrains", "PeerId"));
    bb_kv_set(a, &f->metadata, "bb.home_class", "Client");

    bb_node *n = bb_function_add_node(m, f, "ai.bytesandbrains.syscall", "Interval");
    n->name = "tick";
    bb_str_list_push(a, &n->outputs, "t");
    bb_node_set_attr_int(a, n, "period_ms", 500);
    bb_kv_set(a, &n->metadata, "bb.site", "3");
    n = bb_function_add_node(m, f, "", "Gemm");
    n->name = "fc";
    bb_str_list_push(a, &n->inputs, "x");
    bb_str_list_push(a, &n->inputs, "");
    bb_str_list_push(a, &n->outputs, "y");
    bb_node_set_attr_float(a, n, "alpha", 0.5f);
    bb_node_set_attr_float(a, n, "beta", 0.1f);
    const int64_t perm[] = {1, 0};
    bb_node_set_attr_ints(a, n, "perm", perm, 2);
    bb_attr *bin = bb_node_add_attr(a, n, "blob", BB_ATTR_STRING);
    bytes_set(a, &bin->s, "\x00\x01\xff", 3);
    bin->has_s = true;

    m->graph = bb_graph_new(a, "main");
    bb_tensor_proto *t = bb_arena_alloc(a, sizeof *t);
    t->name = "w";
    t->data_type = BB_DT_FLOAT;
    *(int64_t *)BB_VEC_PUSH(a, &t->dims) = 2;
    *(int64_t *)BB_VEC_PUSH(a, &t->dims) = 3;
    float w[6] = {0};
    bytes_set(a, &t->raw_data, w, sizeof w);
    t->has_raw_data = true;
    *(bb_tensor_proto **)BB_VEC_PUSH(a, &m->graph->initializers) = t;
    *(bb_value_info **)BB_VEC_PUSH(a, &m->graph->inputs) =
        bb_value_info_new(a, "x", tensor_type(a, BB_DT_FLOAT, "N", 784));
    bb_node *c = bb_graph_add_node(a, m->graph, "user.app", "Client");
    bb_str_list_push(a, &c->inputs, "x");
    return m;
}

static void test_text_dump(void **state)
{
    (void)state;
    bb_model *m = sample_model();
    char *s = dump_to_string(m, bb_model_dump);
    assert_has_line(s, "model");
    assert_has_line(s, "  ir_version: 10");
    assert_has_line(s, "  producer: \"bytesandbrains\" \"0.9.0\"");
    assert_has_line(s, "  model_version: 1");
    assert_has_line(s, "  opset_import: ai.onnx=17, ai.bytesandbrains.syscall=1");
    assert_has_line(s, "    bb.program = \"demo\"");
    assert_has_line(s, "function user.app::Client");
    assert_has_line(s, "  inputs: (x)");
    assert_has_line(s, "  outputs: (y)");
    assert_has_line(s, "  attribute: (model)");
    assert_has_line(s, "  attribute_proto:");
    assert_has_line(s, "    codec: string = \"{\\\"level\\\":3}\"");
    assert_has_line(s, "    x: tensor(float)[N,784]");
    assert_has_line(s, "    p: opaque(ai.bytesandbrains.PeerId)");
    assert_has_line(s, "    bb.home_class = \"Client\"");
    assert_has_line(s, "  [0] ai.bytesandbrains.syscall::Interval \"tick\" () -> (t)");
    assert_has_line(s, "      period_ms: int = 500");
    assert_has_line(s, "      meta bb.site = \"3\"");
    assert_has_line(s, "  [1] ai.onnx::Gemm \"fc\" (x, \"\") -> (y)");
    assert_has_line(s, "      alpha: float = 0.5");
    assert_has_line(s, "      beta: float = 0.1");
    assert_has_line(s, "      perm: ints = [1, 0]");
    assert_has_line(s, "      blob: string = <hex 0001ff (3 bytes)>");
    assert_has_line(s, "graph \"main\"");
    assert_has_line(s, "    float[2,3] \"w\" 24 bytes");
    assert_has_line(s, "  [0] user.app::Client \"\" (x) -> ()");
    /* deterministic */
    char *again = dump_to_string(m, bb_model_dump);
    assert_string_equal(s, again);
    free(again);
    free(s);
    bb_model_free(m);
}

static void test_text_dump_long_binary_is_cut(void **state)
{
    (void)state;
    bb_model *m = bb_model_new();
    bb_function *f = bb_model_add_function(m, "d", "F");
    bb_node *n = bb_function_add_node(m, f, "d", "Op");
    bb_attr *at = bb_node_add_attr(m->arena, n, "b", BB_ATTR_STRING);
    uint8_t raw[100];
    for (size_t i = 0; i < sizeof raw; i++)
        raw[i] = (uint8_t)(i * 7 + 1) | 0x80;
    bytes_set(m->arena, &at->s, raw, sizeof raw);
    at->has_s = true;
    char *s = dump_to_string(m, bb_model_dump);
    assert_non_null(strstr(s, "b: string = <hex 81888f"));
    assert_non_null(strstr(s, "... (100 bytes)>"));
    free(s);
    bb_model_free(m);
}

static void test_type_proto_str(void **state)
{
    (void)state;
    bb_arena *a = bb_arena_create();
    char buf[128];
    assert_string_equal(bb_type_proto_str(tensor_type(a, BB_DT_FLOAT, "N", 784), buf, sizeof buf),
                        "tensor(float)[N,784]");
    assert_string_equal(bb_type_proto_str(bb_type_proto_tensor(a, BB_DT_INT64), buf, sizeof buf),
                        "tensor(int64)");
    bb_type_proto *scalar = bb_type_proto_tensor(a, BB_DT_DOUBLE);
    scalar->has_shape = true;
    assert_string_equal(bb_type_proto_str(scalar, buf, sizeof buf), "tensor(double)[]");
    bb_type_proto *peer = bb_type_proto_opaque(a, "ai.bytesandbrains", "PeerId");
    assert_string_equal(bb_type_proto_str(peer, buf, sizeof buf),
                        "opaque(ai.bytesandbrains.PeerId)");
    assert_string_equal(bb_type_proto_str(bb_type_proto_sequence(a, peer), buf, sizeof buf),
                        "seq(opaque(ai.bytesandbrains.PeerId))");
    bb_type_proto *map = bb_type_proto_sequence(a, scalar);
    map->kind = BB_TP_MAP;
    map->map_key_type = BB_DT_STRING;
    assert_string_equal(bb_type_proto_str(map, buf, sizeof buf),
                        "map(string,tensor(double)[])");
    assert_string_equal(bb_type_proto_str(NULL, buf, sizeof buf), "?");
    /* truncation keeps the buffer terminated */
    char small[8];
    memset(small, 'x', sizeof small);
    bb_type_proto_str(peer, small, sizeof small);
    assert_string_equal(small, "opaque(");
    /* deep nesting is cut, not recursed without bound */
    bb_type_proto *deep = peer;
    for (int i = 0; i < 1000; i++)
        deep = bb_type_proto_sequence(a, deep);
    char big[8192];
    bb_type_proto_str(deep, big, sizeof big);
    assert_non_null(strstr(big, "..."));
    bb_arena_destroy(a);
}

/* Expected JSON, checked against python's
 * json_format.MessageToDict(m, preserving_proto_field_name=True). */
static const char SMALL_JSON[] =
    "{\n"
    "  \"ir_version\": \"10\",\n"
    "  \"producer_name\": \"bb\",\n"
    "  \"graph\": {\n"
    "    \"node\": [\n"
    "      {\n"
    "        \"input\": [\n"
    "          \"x\",\n"
    "          \"\"\n"
    "        ],\n"
    "        \"output\": [\n"
    "          \"y\"\n"
    "        ],\n"
    "        \"name\": \"n0\",\n"
    "        \"op_type\": \"LeakyRelu\",\n"
    "        \"attribute\": [\n"
    "          {\n"
    "            \"name\": \"alpha\",\n"
    "            \"f\": 0.1,\n"
    "            \"type\": \"FLOAT\"\n"
    "          },\n"
    "          {\n"
    "            \"name\": \"cfg\",\n"
    "            \"s\": \"e30=\",\n"
    "            \"type\": \"STRING\"\n"
    "          }\n"
    "        ],\n"
    "        \"domain\": \"\",\n"
    "        \"metadata_props\": [\n"
    "          {\n"
    "            \"key\": \"bb.site\",\n"
    "            \"value\": \"1\"\n"
    "          }\n"
    "        ]\n"
    "      }\n"
    "    ],\n"
    "    \"name\": \"g\",\n"
    "    \"initializer\": [\n"
    "      {\n"
    "        \"dims\": [\n"
    "          \"2\"\n"
    "        ],\n"
    "        \"data_type\": 7,\n"
    "        \"int64_data\": [\n"
    "          \"-1\",\n"
    "          \"5000000000\"\n"
    "        ],\n"
    "        \"name\": \"k\"\n"
    "      },\n"
    "      {\n"
    "        \"data_type\": 1,\n"
    "        \"name\": \"r\",\n"
    "        \"raw_data\": \"AACAPw==\"\n"
    "      }\n"
    "    ],\n"
    "    \"input\": [\n"
    "      {\n"
    "        \"name\": \"x\",\n"
    "        \"type\": {\n"
    "          \"tensor_type\": {\n"
    "            \"elem_type\": 1,\n"
    "            \"shape\": {\n"
    "              \"dim\": [\n"
    "                {\n"
    "                  \"dim_param\": \"N\"\n"
    "                },\n"
    "                {\n"
    "                  \"dim_value\": \"3\"\n"
    "                }\n"
    "              ]\n"
    "            }\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    ]\n"
    "  },\n"
    "  \"opset_import\": [\n"
    "    {\n"
    "      \"domain\": \"\",\n"
    "      \"version\": \"17\"\n"
    "    }\n"
    "  ],\n"
    "  \"functions\": [\n"
    "    {\n"
    "      \"name\": \"F\",\n"
    "      \"input\": [\n"
    "        \"a\"\n"
    "      ],\n"
    "      \"attribute\": [\n"
    "        \"model\"\n"
    "      ],\n"
    "      \"domain\": \"user.app\",\n"
    "      \"value_info\": [\n"
    "        {\n"
    "          \"name\": \"a\",\n"
    "          \"type\": {\n"
    "            \"denotation\": \"ai.bytesandbrains.PeerId\",\n"
    "            \"opaque_type\": {\n"
    "              \"domain\": \"ai.bytesandbrains\",\n"
    "              \"name\": \"PeerId\"\n"
    "            }\n"
    "          }\n"
    "        }\n"
    "      ],\n"
    "      \"metadata_props\": [\n"
    "        {\n"
    "          \"key\": \"k\",\n"
    "          \"value\": \"\\\"q\\\"\\n\"\n"
    "        }\n"
    "      ]\n"
    "    }\n"
    "  ]\n"
    "}\n";

static bb_model *small_model(void)
{
    bb_model *m = bb_model_new();
    bb_arena *a = m->arena;
    m->ir_version = 10;
    m->producer_name = "bb";
    bb_opset_list_add(a, &m->opset_imports, "", 17);
    m->graph = bb_graph_new(a, "g");
    bb_node *n = bb_graph_add_node(a, m->graph, "", "LeakyRelu");
    n->name = "n0";
    bb_str_list_push(a, &n->inputs, "x");
    bb_str_list_push(a, &n->inputs, "");
    bb_str_list_push(a, &n->outputs, "y");
    bb_node_set_attr_float(a, n, "alpha", 0.1f);
    bb_node_set_attr_string(a, n, "cfg", "{}");
    bb_kv_set(a, &n->metadata, "bb.site", "1");
    /* int64 data that came from int64_data (has_raw_data false) */
    bb_tensor_proto *k = bb_arena_alloc(a, sizeof *k);
    k->name = "k";
    k->data_type = BB_DT_INT64;
    *(int64_t *)BB_VEC_PUSH(a, &k->dims) = 2;
    const uint8_t kraw[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                              0x00, 0xf2, 0x05, 0x2a, 0x01, 0, 0, 0};
    bytes_set(a, &k->raw_data, kraw, sizeof kraw);
    *(bb_tensor_proto **)BB_VEC_PUSH(a, &m->graph->initializers) = k;
    bb_tensor_proto *r = bb_arena_alloc(a, sizeof *r);
    r->name = "r";
    r->data_type = BB_DT_FLOAT;
    const uint8_t one[4] = {0, 0, 0x80, 0x3f};
    bytes_set(a, &r->raw_data, one, sizeof one);
    r->has_raw_data = true;
    *(bb_tensor_proto **)BB_VEC_PUSH(a, &m->graph->initializers) = r;
    *(bb_value_info **)BB_VEC_PUSH(a, &m->graph->inputs) =
        bb_value_info_new(a, "x", tensor_type(a, BB_DT_FLOAT, "N", 3));

    bb_function *f = bb_model_add_function(m, "user.app", "F");
    bb_str_list_push(a, &f->inputs, "a");
    bb_str_list_push(a, &f->attributes, "model");
    bb_type_proto *peer = bb_type_proto_opaque(a, "ai.bytesandbrains", "PeerId");
    peer->denotation = "ai.bytesandbrains.PeerId";
    *(bb_value_info **)BB_VEC_PUSH(a, &f->value_info) = bb_value_info_new(a, "a", peer);
    bb_kv_set(a, &f->metadata, "k", "\"q\"\n");
    return m;
}

static void test_json_small_model(void **state)
{
    (void)state;
    bb_model *m = small_model();
    char *s = dump_to_string(m, bb_model_dump_json);
    assert_string_equal(s, SMALL_JSON);
    free(s);
    bb_model_free(m);
}

static void test_json_scalars(void **state)
{
    (void)state;
    bb_model *m = bb_model_new();
    bb_arena *a = m->arena;
    m->graph = bb_graph_new(a, NULL);
    bb_node *n = bb_graph_add_node(a, m->graph, NULL, "Op");
    bb_attr *fl = bb_node_add_attr(a, n, "fs", BB_ATTR_FLOATS);
    const float vals[] = {1.0f, 0.3f, 1e-7f, 3.4028235e38f, -0.0f};
    for (size_t i = 0; i < 5; i++)
        *(float *)BB_VEC_PUSH(a, &fl->floats) = vals[i];
    *(float *)BB_VEC_PUSH(a, &fl->floats) = __builtin_nanf("");
    *(float *)BB_VEC_PUSH(a, &fl->floats) = -__builtin_inff();
    bb_attr *ref = bb_node_add_attr(a, n, "r", BB_ATTR_INT);
    ref->ref_attr_name = "outer"; /* a reference holds no value */
    bb_attr *bs = bb_node_add_attr(a, n, "b", BB_ATTR_STRINGS);
    bytes_set(a, BB_VEC_PUSH(a, &bs->strings), "ab", 2);
    bytes_set(a, BB_VEC_PUSH(a, &bs->strings), "abcd", 4);
    char *s = dump_to_string(m, bb_model_dump_json);
    assert_non_null(strstr(s, "\"floats\": [\n"
                              "              1,\n"
                              "              0.3,\n"
                              "              1e-07,\n"
                              "              3.4028235e+38,\n"
                              "              -0,\n"
                              "              \"NaN\",\n"
                              "              \"-Infinity\"\n"));
    assert_non_null(strstr(s, "\"name\": \"r\",\n"
                              "            \"type\": \"INT\",\n"
                              "            \"ref_attr_name\": \"outer\"\n"));
    assert_non_null(strstr(s, "\"strings\": [\n"
                              "              \"YWI=\",\n"
                              "              \"YWJjZA==\"\n"));
    assert_null(strstr(s, "\"domain\"")); /* NULL domain is absent */
    assert_null(strstr(s, "\"ir_version\"")); /* 0: absent */
    free(s);
    bb_model_free(m);
}

/* Verbatim sub-messages are decoded and printed like the rest. */
static void test_json_verbatim(void **state)
{
    (void)state;
    bb_model *m = bb_model_new();
    bb_arena *a = m->arena;
    m->ir_version = 10;
    /* TrainingInfoProto{algorithm: GraphProto{name: "alg"}} */
    bytes_set(a, BB_VEC_PUSH(a, &m->training_info), "\x12\x05\x12\x03" "alg", 7);
    /* DeviceConfigurationProto{name: "c", num_devices: 2} */
    bytes_set(a, BB_VEC_PUSH(a, &m->configuration), "\x0a\x01" "c" "\x10\x02", 5);
    m->graph = bb_graph_new(a, NULL);
    bb_node *n = bb_graph_add_node(a, m->graph, NULL, "Op");
    bb_node_add_attr(a, n, "odd", (bb_attr_type)99); /* unknown enum value: omitted */
    char *s = dump_to_string(m, bb_model_dump_json);
    assert_string_equal(s, "{\n"
                           "  \"ir_version\": \"10\",\n"
                           "  \"graph\": {\n"
                           "    \"node\": [\n"
                           "      {\n"
                           "        \"op_type\": \"Op\",\n"
                           "        \"attribute\": [\n"
                           "          {\n"
                           "            \"name\": \"odd\"\n"
                           "          }\n"
                           "        ]\n"
                           "      }\n"
                           "    ]\n"
                           "  },\n"
                           "  \"training_info\": [\n"
                           "    {\n"
                           "      \"algorithm\": {\n"
                           "        \"name\": \"alg\"\n"
                           "      }\n"
                           "    }\n"
                           "  ],\n"
                           "  \"configuration\": [\n"
                           "    {\n"
                           "      \"name\": \"c\",\n"
                           "      \"num_devices\": 2\n"
                           "    }\n"
                           "  ]\n"
                           "}\n");
    free(s);
    s = dump_to_string(m, bb_model_dump);
    assert_has_line(s, "  training_info: 1 kept verbatim (7 bytes)");
    free(s);
    bb_model_free(m);
}

/* The UTF-8 check both dumps use: every way a sequence can be invalid. */
static void test_utf8_len(void **state)
{
    (void)state;
    static const struct {
        const char *bytes;
        size_t n, want;
    } cases[] = {
        {"a", 1, 1},
        {"\xc3\xa9", 2, 2},         /* U+00E9 */
        {"\xe2\x82\xac", 3, 3},     /* U+20AC */
        {"\xf0\x9f\x98\x80", 4, 4}, /* U+1F600 */
        {"\xf4\x8f\xbf\xbf", 4, 4}, /* U+10FFFF, the last code point */
        {"\x80", 1, 0},             /* a continuation byte first */
        {"\xff", 1, 0},             /* never in UTF-8 */
        {"\xc0\x80", 2, 0},         /* overlong NUL */
        {"\xe0\x80\xaf", 3, 0},     /* overlong '/' */
        {"\xed\xa0\x80", 3, 0},     /* a surrogate */
        {"\xf4\x90\x80\x80", 4, 0}, /* above U+10FFFF */
        {"\xe2\x82", 2, 0},         /* cut short */
        {"\xe2\x28\xac", 3, 0},     /* a missing continuation */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(bb__utf8_len((const uint8_t *)cases[i].bytes, cases[i].n),
                         cases[i].want);
}

/* Strings that are not UTF-8: hex in the text dump, U+FFFD in JSON. */
static void test_dumps_of_invalid_utf8(void **state)
{
    (void)state;
    bb_model *m = bb_model_new();
    bb_arena *a = m->arena;
    m->graph = bb_graph_new(a, NULL);
    bb_node *n = bb_graph_add_node(a, m->graph, NULL, "Op");
    n->name = "caf\xc3\xa9 \xc0\x80";
    bb_attr *ok = bb_node_add_attr(a, n, "ok", BB_ATTR_STRING);
    bytes_set(a, &ok->s, "\xe2\x82\xac", 3);
    ok->has_s = true;
    bb_attr *bad = bb_node_add_attr(a, n, "bad", BB_ATTR_STRING);
    bytes_set(a, &bad->s, "\xed\xa0\x80", 3);
    bad->has_s = true;
    char *s = dump_to_string(m, bb_model_dump);
    assert_has_line(s, "      ok: string = \"\xe2\x82\xac\"");
    assert_has_line(s, "      bad: string = <hex eda080 (3 bytes)>");
    free(s);
    s = dump_to_string(m, bb_model_dump_json);
    assert_non_null(strstr(s, "\"name\": \"caf\xc3\xa9 \\ufffd\\ufffd\""));
    free(s);
    bb_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_dump),
        cmocka_unit_test(test_text_dump_long_binary_is_cut),
        cmocka_unit_test(test_type_proto_str),
        cmocka_unit_test(test_json_small_model),
        cmocka_unit_test(test_json_scalars),
        cmocka_unit_test(test_json_verbatim),
        cmocka_unit_test(test_utf8_len),
        cmocka_unit_test(test_dumps_of_invalid_utf8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
