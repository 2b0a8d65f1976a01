/* Unit tests for the opset catalogs (bb/opsets.h) and metadata spellings and
 * binding helpers (bb/meta.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bb/meta.h"
#include "bb/opsets.h"

/* ---- rendering a schema as "<ins> -> <outs> | <attrs>" ---------------------- */

static const char *attr_type_str(bb_attr_type t)
{
    switch (t) {
    case BB_ATTR_UNDEFINED: return "UNDEFINED";
    case BB_ATTR_FLOAT: return "FLOAT";
    case BB_ATTR_INT: return "INT";
    case BB_ATTR_STRING: return "STRING";
    case BB_ATTR_TENSOR: return "TENSOR";
    case BB_ATTR_GRAPH: return "GRAPH";
    case BB_ATTR_FLOATS: return "FLOATS";
    case BB_ATTR_INTS: return "INTS";
    case BB_ATTR_STRINGS: return "STRINGS";
    case BB_ATTR_TENSORS: return "TENSORS";
    case BB_ATTR_GRAPHS: return "GRAPHS";
    case BB_ATTR_SPARSE_TENSOR: return "SPARSE_TENSOR";
    case BB_ATTR_SPARSE_TENSORS: return "SPARSE_TENSORS";
    case BB_ATTR_TYPE_PROTO: return "TYPE_PROTO";
    case BB_ATTR_TYPE_PROTOS: return "TYPE_PROTOS";
    }
    return "?";
}

static void cat(char *buf, size_t cap, const char *s)
{
    size_t l = strlen(buf);
    snprintf(buf + l, cap - l, "%s", s);
}

static void render_ports(char *buf, size_t cap, const bb_port_decl *p, uint32_t n)
{
    if (n == 0) {
        cat(buf, cap, "-");
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (i)
            cat(buf, cap, ",");
        cat(buf, cap, p[i].name);
        if (p[i].variadic)
            cat(buf, cap, "...");
        if (p[i].optional)
            cat(buf, cap, "?");
    }
}

static int attr_cmp(const void *a, const void *b)
{
    const bb_attr_schema *x = *(const bb_attr_schema *const *)a;
    const bb_attr_schema *y = *(const bb_attr_schema *const *)b;
    return strcmp(x->name, y->name);
}

static void render(const bb_op_schema *op, char *buf, size_t cap)
{
    buf[0] = '\0';
    render_ports(buf, cap, op->inputs, op->n_inputs);
    cat(buf, cap, " -> ");
    render_ports(buf, cap, op->outputs, op->n_outputs);
    cat(buf, cap, " | ");
    if (op->n_attrs == 0) {
        cat(buf, cap, "-");
        return;
    }
    const bb_attr_schema *sorted[32];
    assert_true(op->n_attrs <= 32);
    for (uint32_t i = 0; i < op->n_attrs; i++)
        sorted[i] = &op->attrs[i];
    qsort(sorted, op->n_attrs, sizeof sorted[0], attr_cmp);
    for (uint32_t i = 0; i < op->n_attrs; i++) {
        if (i)
            cat(buf, cap, ",");
        cat(buf, cap, sorted[i]->name);
        cat(buf, cap, ":");
        cat(buf, cap, attr_type_str(sorted[i]->type));
        if (sorted[i]->required)
            cat(buf, cap, "!");
        else if (sorted[i]->default_text) {
            cat(buf, cap, "=");
            cat(buf, cap, sorted[i]->default_text);
        }
    }
}

typedef struct sig {
    const char *domain;
    const char *op;
    const char *want;
} sig;

/* Every op of IR_AND_DSL.md Part 5 (and the additions the brief names). */
static const sig SIGS[] = {
    /* 5a syscall */
    {BB_DOMAIN_SYSCALL, "Pulse", "- -> trigger | -"},
    {BB_DOMAIN_SYSCALL, "OnTrigger", "trigger -> trigger | -"},
    {BB_DOMAIN_SYSCALL, "Threshold", "inputs... -> trigger | n:INT!"},
    {BB_DOMAIN_SYSCALL, "Interval", "- -> tick | period_ns:INT!"},
    {BB_DOMAIN_SYSCALL, "EventSource", "- -> event | kind:INT!"},
    {BB_DOMAIN_SYSCALL, "After", "trigger -> trigger | delay_ns:INT!"},
    {BB_DOMAIN_SYSCALL, "Limit.Acquire", "trigger -> trigger | n:INT=1,name:STRING!"},
    {BB_DOMAIN_SYSCALL, "Limit.Release", "trigger -> - | name:STRING!"},
    {BB_DOMAIN_SYSCALL, "Any", "inputs... -> value | group:STRING="},
    {BB_DOMAIN_SYSCALL, "Gate", "value,trigger -> value | -"},
    {BB_DOMAIN_SYSCALL, "Serialize.Enqueue", "value -> trigger | queue:STRING!"},
    {BB_DOMAIN_SYSCALL, "Serialize.Dequeue", "trigger -> value | queue:STRING!"},
    {BB_DOMAIN_SYSCALL, "CorrelateTag", "trigger -> token | -"},
    {BB_DOMAIN_SYSCALL, "Hold.Stash", "value -> - | slot:STRING!"},
    {BB_DOMAIN_SYSCALL, "Hold.Flush", "trigger -> value | slot:STRING!"},
    {BB_DOMAIN_SYSCALL, "AppEmit", "value -> - | name:STRING!"},
    {BB_DOMAIN_SYSCALL, "AppNotify", "trigger -> - | name:STRING!"},
    {BB_DOMAIN_SYSCALL, "Record", "value -> - | name:STRING!"},
    {BB_DOMAIN_SYSCALL, "IncrMetric", "trigger -> - | delta:INT=1,name:STRING!"},
    {BB_DOMAIN_SYSCALL, "LifecyclePhase", "- -> trigger | phase:INT!"},
    {BB_DOMAIN_SYSCALL, "GateDispatch", "value -> value | -"},
    {BB_DOMAIN_SYSCALL, "MintDispatch", "trigger -> token | -"},
    {BB_DOMAIN_SYSCALL, "GateManyDispatch", "value,gates... -> value | -"},
    {BB_DOMAIN_SYSCALL, "Clock", "trigger -> now | -"},
    {BB_DOMAIN_SYSCALL, "RngU64", "trigger -> value | -"},
    {BB_DOMAIN_SYSCALL, "Sleep", "trigger -> trigger | duration_ns:INT!"},
    {BB_DOMAIN_SYSCALL, "DeadlineMatch", "then,timeout -> winner | -"},
    {BB_DOMAIN_SYSCALL, "PassThrough", "value -> value | -"},
    {BB_DOMAIN_SYSCALL, "Tee", "value -> outputs... | fanout:INT"},
    {BB_DOMAIN_SYSCALL, "Constant", "- -> value | value:UNDEFINED!"},
    /* compiler-inserted */
    {BB_DOMAIN_SYSCALL, BB_OP_DEDUP_GATE_RX, "value -> value | -"},
    {BB_DOMAIN_SYSCALL, BB_OP_PEER_HEALTH_GATE_RX, "value -> value | -"},
    {BB_DOMAIN_SYSCALL, BB_OP_BACKOFF_GATE_RX, "value -> value | -"},
    /* TX gates forward their value (docs/DECISIONS.md), not a Trigger */
    {BB_DOMAIN_SYSCALL, BB_OP_PEER_HEALTH_GATE_TX, "value -> value | peer:STRING!"},
    {BB_DOMAIN_SYSCALL, BB_OP_BACKOFF_GATE_TX, "value -> value | peer:STRING!"},
    {BB_DOMAIN_SYSCALL, BB_OP_DEADLINE_CHECK, "value -> value | deadline_ns:INT!"},
    /* 5a.1 address_book */
    {BB_DOMAIN_ADDRESS_BOOK, "Insert", "peer,address -> - | -"},
    {BB_DOMAIN_ADDRESS_BOOK, "InsertMany", "peer,addresses -> - | -"},
    {BB_DOMAIN_ADDRESS_BOOK, "Lookup", "peer -> addresses | -"},
    /* 5b wire */
    {BB_DOMAIN_WIRE, "Send", "data,dest -> - | deadline_ns:INT,peer:STRING"},
    {BB_DOMAIN_WIRE, "SendReqBatched",
     "data,dest -> req_id,responses | deadline_ns:INT,quorum:INT=0"},
    {BB_DOMAIN_WIRE, "SendResp", "data,dest?,req_id -> - | deadline_ns:INT"},
    {BB_DOMAIN_WIRE, "Recv", "- -> trigger,payload | payload_type:TYPE_PROTO"},
    {BB_DOMAIN_WIRE, "RecvReq", "- -> trigger,payload,req_id | payload_type:TYPE_PROTO"},
    {BB_DOMAIN_WIRE, "RecvRespBatched", "req_id -> trigger,responses | -"},
    /* composite */
    {BB_DOMAIN_COMPOSITE, "Bundle",
     "parts... -> composite | ai.bytesandbrains.composite.child_count:INT,"
     "ai.bytesandbrains.composite.child_types:STRING"},
    {BB_DOMAIN_COMPOSITE, "Unbundle",
     "composite -> children... | ai.bytesandbrains.composite.child_count:INT,"
     "ai.bytesandbrains.composite.child_types:STRING"},
    /* 5c.2 roles */
    {BB_DOMAIN_ROLE_INDEX, "Add", "vec -> cmd | -"},
    {BB_DOMAIN_ROLE_INDEX, "Search", "query -> results | k:INT!"},
    {BB_DOMAIN_ROLE_INDEX, "Remove", "id -> cmd | -"},
    {BB_DOMAIN_ROLE_INDEX, "Train", "samples -> trigger | -"},
    {BB_DOMAIN_ROLE_MODEL, "Forward", "input -> output | -"},
    {BB_DOMAIN_ROLE_MODEL, "Backward", "grad -> cmd | -"},
    {BB_DOMAIN_ROLE_MODEL, "Step", "grads -> cmd | -"},
    {BB_DOMAIN_ROLE_MODEL, "Evaluate", "input,target -> loss | -"},
    {BB_DOMAIN_ROLE_MODEL, "ApplyDelta", "delta -> cmd | -"},
    {BB_DOMAIN_ROLE_MODEL, "LoadParameters", "params -> cmd | -"},
    {BB_DOMAIN_ROLE_MODEL, "Params", "- -> params | -"},
    {BB_DOMAIN_ROLE_MODEL, "Train", "trigger -> params,num_samples | epochs:INT=1"},
    {BB_DOMAIN_ROLE_MODEL, "EvaluateMetrics", "trigger -> loss,accuracy | -"},
    {BB_DOMAIN_ROLE_AGGREGATOR, "Contribute", "contribution,metadata? -> cmd | -"},
    {BB_DOMAIN_ROLE_AGGREGATOR, "Aggregate", "trigger -> result,metadata? | -"},
    {BB_DOMAIN_ROLE_AGGREGATOR, "CurrentTensor", "trigger -> tensor | -"},
    {BB_DOMAIN_ROLE_COMPRESSOR, "TrainCodebook", "training -> cmd | -"},
    {BB_DOMAIN_ROLE_COMPRESSOR, "Compress", "t -> code | -"},
    {BB_DOMAIN_ROLE_COMPRESSOR, "Decompress", "code -> t | -"},
    {BB_DOMAIN_ROLE_DATA_LOADER, "NextBatch", "- -> batch,labels? | -"},
    {BB_DOMAIN_ROLE_DATA_LOADER, "Reset", "trigger -> trigger | -"},
    {BB_DOMAIN_ROLE_DATA_LOADER, "OnDataLoaded", "- -> trigger | -"},
    {BB_DOMAIN_ROLE_PEER_SELECTOR, "Sample", "- -> peers | n:INT!"},
    {BB_DOMAIN_ROLE_PEER_SELECTOR, "CurrentView", "- -> view | -"},
    /* 5d ai.onnx (port names as in the ONNX operator schemas) */
    {"", "Abs", "X -> Y | -"},
    {"", "Add", "A,B -> C | -"},
    {"", "ArgMax", "data -> reduced | axis:INT=0,keepdims:INT=1,select_last_index:INT=0"},
    {"", "AveragePool",
     "X -> Y | auto_pad:STRING=NOTSET,ceil_mode:INT=0,count_include_pad:INT=0,dilations:INTS,"
     "kernel_shape:INTS!,pads:INTS,strides:INTS"},
    {"", "BatchNormalization",
     "X,scale,B,input_mean,input_var -> Y,running_mean?,running_var? | "
     "epsilon:FLOAT=1e-05,momentum:FLOAT=0.9,training_mode:INT=0"},
    {"", "Cast", "input -> output | saturate:INT=1,to:INT!"},
    {"", "Concat", "inputs... -> concat_result | axis:INT!"},
    {"", "Constant",
     "- -> output | sparse_value:SPARSE_TENSOR,value:TENSOR,value_float:FLOAT,"
     "value_floats:FLOATS,value_int:INT,value_ints:INTS,value_string:STRING,"
     "value_strings:STRINGS"},
    {"", "Conv",
     "X,W,B? -> Y | auto_pad:STRING=NOTSET,dilations:INTS,group:INT=1,kernel_shape:INTS,"
     "pads:INTS,strides:INTS"},
    {"", "Div", "A,B -> C | -"},
    {"", "Dot", "A,B -> Y | -"},
    {"", "Equal", "A,B -> C | -"},
    {"", "Exp", "input -> output | -"},
    {"", "Flatten", "input -> output | axis:INT=1"},
    {"", "Gather", "data,indices -> output | axis:INT=0"},
    {"", "Gelu", "X -> Y | approximate:STRING=none"},
    {"", "Gemm", "A,B,C? -> Y | alpha:FLOAT=1.0,beta:FLOAT=1.0,transA:INT=0,transB:INT=0"},
    {"", "GlobalAveragePool", "X -> Y | -"},
    {"", "Greater", "A,B -> C | -"},
    {"", "Identity", "input -> output | -"},
    {"", "If", "cond -> outputs... | else_branch:GRAPH!,then_branch:GRAPH!"},
    {"", "LayerNormalization",
     "X,Scale,B? -> Y,Mean?,InvStdDev? | axis:INT=-1,epsilon:FLOAT=1e-05,stash_type:INT=1"},
    {"", "LeakyRelu", "X -> Y | alpha:FLOAT=0.01"},
    {"", "Less", "A,B -> C | -"},
    {"", "Log", "input -> output | -"},
    {"", "Loop", "M?,cond?,v_initial...? -> v_final_and_scan_outputs... | body:GRAPH!"},
    {"", "MatMul", "A,B -> Y | -"},
    {"", "MaxPool",
     "X -> Y,Indices? | auto_pad:STRING=NOTSET,ceil_mode:INT=0,dilations:INTS,"
     "kernel_shape:INTS!,pads:INTS,storage_order:INT=0,strides:INTS"},
    {"", "Mul", "A,B -> C | -"},
    {"", "Neg", "X -> Y | -"},
    {"", "Ones", "shape -> output | dtype:INT=1"},
    {"", "Pow", "X,Y -> Z | -"},
    {"", "ReduceMax", "data,axes? -> reduced | keepdims:INT=1,noop_with_empty_axes:INT=0"},
    {"", "ReduceMean", "data,axes? -> reduced | keepdims:INT=1,noop_with_empty_axes:INT=0"},
    {"", "ReduceMin", "data,axes? -> reduced | keepdims:INT=1,noop_with_empty_axes:INT=0"},
    {"", "ReduceSum", "data,axes? -> reduced | keepdims:INT=1,noop_with_empty_axes:INT=0"},
    {"", "Relu", "X -> Y | -"},
    {"", "Reshape", "data,shape -> reshaped | allowzero:INT=0"},
    {"", "Scatter", "data,indices,updates -> output | axis:INT=0"},
    {"", "Sigmoid", "X -> Y | -"},
    {"", "Slice", "data,starts,ends,axes?,steps? -> output | -"},
    {"", "Softmax", "input -> output | axis:INT=-1"},
    {"", "Split", "input,split? -> outputs... | axis:INT=0,num_outputs:INT"},
    {"", "Sqrt", "X -> Y | -"},
    {"", "Squeeze", "data,axes? -> squeezed | -"},
    {"", "Sub", "A,B -> C | -"},
    {"", "Tanh", "input -> output | -"},
    {"", "Transpose", "data -> transposed | perm:INTS"},
    {"", "Unsqueeze", "data,axes -> expanded | -"},
    {"", "Where", "condition,X,Y -> output | -"},
    {"", "Zeros", "shape -> output | dtype:INT=1"},
};
#define N_SIGS (sizeof SIGS / sizeof SIGS[0])

/* ---- tests --------------------------------------------------------------------- */

static void test_tables_sorted_and_well_formed(void **state)
{
    (void)state;
    size_t n = bb_opset_count();
    assert_int_equal(n, 11);
    assert_null(bb_opset_at(n));
    for (size_t i = 0; i < n; i++) {
        const bb_opset_schema *os = bb_opset_at(i);
        assert_non_null(os);
        if (i > 0 && strcmp(bb_opset_at(i - 1)->domain, os->domain) >= 0)
            fail_msg("domains out of order: %s then %s", bb_opset_at(i - 1)->domain, os->domain);
        assert_ptr_equal(bb_opset_find(os->domain), os);
        assert_true(os->doc && *os->doc);
        assert_true(os->n_ops > 0);
        for (uint32_t j = 0; j < os->n_ops; j++) {
            const bb_op_schema *op = &os->ops[j];
            if (j > 0 && strcmp(os->ops[j - 1].op_type, op->op_type) >= 0)
                fail_msg("%s: ops out of order: %s then %s", os->domain,
                         os->ops[j - 1].op_type, op->op_type);
            assert_string_equal(op->domain, os->domain);
            assert_int_equal(op->version, os->version);
            assert_true(op->doc && *op->doc);
            assert_ptr_equal(bb_op_schema_find(os->domain, op->op_type), op);
            for (uint32_t k = 0; k < op->n_inputs; k++) {
                assert_non_null(op->inputs[k].name);
                assert_non_null(op->inputs[k].type);
                if (op->inputs[k].variadic && k + 1 != op->n_inputs)
                    fail_msg("%s::%s: variadic input not last", os->domain, op->op_type);
            }
            for (uint32_t k = 0; k < op->n_outputs; k++) {
                assert_non_null(op->outputs[k].name);
                assert_non_null(op->outputs[k].type);
                if (op->outputs[k].variadic && k + 1 != op->n_outputs)
                    fail_msg("%s::%s: variadic output not last", os->domain, op->op_type);
            }
            for (uint32_t k = 0; k < op->n_attrs; k++) {
                const bb_attr_schema *a = &op->attrs[k];
                assert_non_null(a->name);
                /* a required attribute has no default */
                assert_false(a->required && a->default_text);
                for (uint32_t m = 0; m < k; m++)
                    assert_true(strcmp(op->attrs[m].name, a->name) != 0);
            }
        }
    }
}

static void test_counts_per_domain(void **state)
{
    (void)state;
    static const struct {
        const char *domain;
        uint32_t n;
        int64_t version;
    } want[] = {
        {BB_DOMAIN_ONNX, 51, BB_ONNX_OPSET_VERSION},
        {BB_DOMAIN_SYSCALL, 36, 1}, /* 30 of the 5a table + 5 gates + DeadlineCheck */
        {BB_DOMAIN_ADDRESS_BOOK, 3, 1},
        {BB_DOMAIN_WIRE, 6, 1},
        {BB_DOMAIN_COMPOSITE, 2, 1},
        {BB_DOMAIN_ROLE_INDEX, 4, 1},
        {BB_DOMAIN_ROLE_MODEL, 9, 1},
        {BB_DOMAIN_ROLE_AGGREGATOR, 3, 1},
        {BB_DOMAIN_ROLE_COMPRESSOR, 3, 1},
        {BB_DOMAIN_ROLE_DATA_LOADER, 3, 1},
        {BB_DOMAIN_ROLE_PEER_SELECTOR, 2, 1},
    };
    size_t total = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const bb_opset_schema *os = bb_opset_find(want[i].domain);
        assert_non_null(os);
        if (os->n_ops != want[i].n)
            fail_msg("%s has %u ops, want %u", want[i].domain, os->n_ops, want[i].n);
        assert_int_equal(os->version, want[i].version);
        total += want[i].n;
    }
    assert_int_equal(bb_op_schema_total(), total);
    /* the signature table covers every op exactly once */
    assert_int_equal(N_SIGS, total);
    /* NULL and "" name ai.onnx */
    assert_ptr_equal(bb_opset_find(NULL), bb_opset_find("ai.onnx"));
    assert_ptr_equal(bb_opset_find(""), bb_opset_find("ai.onnx"));
}

static void test_every_spec_op_signature(void **state)
{
    (void)state;
    char buf[1024];
    int bad = 0;
    for (size_t i = 0; i < N_SIGS; i++) {
        const bb_op_schema *op = bb_op_schema_find(SIGS[i].domain, SIGS[i].op);
        if (!op) {
            print_error("missing op %s::%s\n", SIGS[i].domain, SIGS[i].op);
            bad++;
            continue;
        }
        render(op, buf, sizeof buf);
        if (strcmp(buf, SIGS[i].want) != 0) {
            print_error("%s::%s\n  got  %s\n  want %s\n", SIGS[i].domain, SIGS[i].op, buf,
                        SIGS[i].want);
            bad++;
        }
        for (size_t j = 0; j < i; j++)
            if (strcmp(SIGS[j].op, SIGS[i].op) == 0 &&
                bb_op_schema_find(SIGS[j].domain, SIGS[j].op) == op)
                fail_msg("signature table lists %s twice", SIGS[i].op);
    }
    assert_int_equal(bad, 0);
}

static const bb_type_node *in_type(const char *d, const char *op, const char *port)
{
    const bb_op_schema *s = bb_op_schema_find(d, op);
    assert_non_null(s);
    const bb_port_decl *p = bb_op_input(s, port, NULL);
    assert_non_null(p);
    return p->type;
}

static const bb_type_node *out_type(const char *d, const char *op, const char *port)
{
    const bb_op_schema *s = bb_op_schema_find(d, op);
    assert_non_null(s);
    const bb_port_decl *p = bb_op_output(s, port, NULL);
    assert_non_null(p);
    return p->type;
}

static void test_port_types(void **state)
{
    (void)state;
    const char *S = BB_DOMAIN_SYSCALL;
    assert_ptr_equal(out_type(S, "Pulse", "trigger"), &BB_TYPE_TRIGGER);
    assert_ptr_equal(out_type(S, "Interval", "tick"), &BB_TYPE_TIMESTAMP);
    assert_ptr_equal(out_type(S, "Clock", "now"), &BB_TYPE_TIMESTAMP);
    assert_ptr_equal(out_type(S, "EventSource", "event"), &BB_TYPE_EVENT_KIND);
    assert_ptr_equal(out_type(S, "RngU64", "value"), &BB_TYPE_U64);
    assert_ptr_equal(out_type(S, "CorrelateTag", "token"), &BB_TYPE_CORRELATION_TOKEN);
    assert_ptr_equal(in_type(S, "Gate", "value"), &BB_TYPE_ANY);
    assert_ptr_equal(in_type(S, "Gate", "trigger"), &BB_TYPE_TRIGGER);
    assert_ptr_equal(out_type(S, BB_OP_BACKOFF_GATE_TX, "value"), &BB_TYPE_ANY);
    assert_ptr_equal(out_type(S, BB_OP_PEER_HEALTH_GATE_TX, "value"), &BB_TYPE_ANY);
    assert_ptr_equal(out_type(S, BB_OP_DEDUP_GATE_RX, "value"), &BB_TYPE_ANY);

    const char *AB = BB_DOMAIN_ADDRESS_BOOK;
    assert_ptr_equal(in_type(AB, "Insert", "peer"), &BB_TYPE_PEER_ID);
    assert_ptr_equal(in_type(AB, "Insert", "address"), &BB_TYPE_MULTIADDRESS);
    assert_ptr_equal(out_type(AB, "Lookup", "addresses"), &BB_TYPE_ADDRESS_VEC);

    const char *W = BB_DOMAIN_WIRE;
    assert_ptr_equal(in_type(W, "Send", "dest"), &BB_TYPE_PEER_ID_VEC);
    assert_ptr_equal(out_type(W, "SendReqBatched", "req_id"), &BB_TYPE_REQUEST_ID);
    assert_ptr_equal(out_type(W, "SendReqBatched", "responses"), &BB_TYPE_RESPONSE_BATCH);
    assert_ptr_equal(in_type(W, "SendResp", "req_id"), &BB_TYPE_REQUEST_ID);
    assert_ptr_equal(out_type(W, "RecvReq", "req_id"), &BB_TYPE_REQUEST_ID);
    assert_ptr_equal(out_type(W, "Recv", "payload"), &BB_TYPE_ANY);

    assert_ptr_equal(out_type(BB_DOMAIN_COMPOSITE, "Bundle", "composite"), &BB_TYPE_COMPOSITE);
    assert_ptr_equal(in_type(BB_DOMAIN_COMPOSITE, "Unbundle", "composite"), &BB_TYPE_COMPOSITE);

    assert_ptr_equal(in_type(BB_DOMAIN_ROLE_INDEX, "Remove", "id"), &BB_TYPE_TENSOR_U64);
    assert_ptr_equal(out_type(BB_DOMAIN_ROLE_INDEX, "Add", "cmd"), &BB_TYPE_COMMAND_ID);
    assert_ptr_equal(in_type(BB_DOMAIN_ROLE_MODEL, "Forward", "input"), &BB_TYPE_TENSOR);
    assert_ptr_equal(out_type(BB_DOMAIN_ROLE_MODEL, "Train", "num_samples"), &BB_TYPE_U64);
    assert_ptr_equal(out_type(BB_DOMAIN_ROLE_MODEL, "Train", "params"), &BB_TYPE_TENSOR);
    assert_ptr_equal(in_type(BB_DOMAIN_ROLE_AGGREGATOR, "Contribute", "metadata"), &BB_TYPE_ANY);
    assert_ptr_equal(out_type(BB_DOMAIN_ROLE_PEER_SELECTOR, "Sample", "peers"),
                     &BB_TYPE_PEER_ID_VEC);

    assert_ptr_equal(out_type("", "Equal", "C"), &BB_TYPE_TENSOR_BOOL);
    assert_ptr_equal(in_type("", "Where", "condition"), &BB_TYPE_TENSOR_BOOL);
    assert_ptr_equal(in_type("", "Reshape", "shape"), &BB_TYPE_TENSOR_I64);
    assert_ptr_equal(in_type("", "Zeros", "shape"), &BB_TYPE_TENSOR_I64);
    assert_ptr_equal(out_type("", "ArgMax", "reduced"), &BB_TYPE_TENSOR_I64);
    assert_ptr_equal(in_type("", "Gemm", "A"), &BB_TYPE_TENSOR);
}

static void test_attribute_types_and_defaults(void **state)
{
    (void)state;
    /* every attribute type the catalogs use, with one op carrying it */
    static const struct {
        bb_attr_type t;
        const char *domain, *op, *attr;
    } uses[] = {
        {BB_ATTR_INT, "", "Softmax", "axis"},
        {BB_ATTR_FLOAT, "", "Gemm", "alpha"},
        {BB_ATTR_STRING, "", "Conv", "auto_pad"},
        {BB_ATTR_INTS, "", "Conv", "kernel_shape"},
        {BB_ATTR_FLOATS, "", "Constant", "value_floats"},
        {BB_ATTR_STRINGS, "", "Constant", "value_strings"},
        {BB_ATTR_TENSOR, "", "Constant", "value"},
        {BB_ATTR_SPARSE_TENSOR, "", "Constant", "sparse_value"},
        {BB_ATTR_GRAPH, "", "If", "then_branch"},
        {BB_ATTR_TYPE_PROTO, BB_DOMAIN_WIRE, "Recv", "payload_type"},
        {BB_ATTR_UNDEFINED, BB_DOMAIN_SYSCALL, "Constant", "value"},
        {BB_ATTR_STRING, BB_DOMAIN_SYSCALL, BB_OP_PEER_HEALTH_GATE_TX, "peer"},
    };
    for (size_t i = 0; i < sizeof uses / sizeof uses[0]; i++) {
        const bb_op_schema *op = bb_op_schema_find(uses[i].domain, uses[i].op);
        assert_non_null(op);
        const bb_attr_schema *a = bb_op_attr(op, uses[i].attr);
        if (!a)
            fail_msg("%s has no attribute %s", uses[i].op, uses[i].attr);
        assert_int_equal(a->type, uses[i].t);
    }
    /* and the catalogs use no type outside that set */
    for (size_t id = 0; id < bb_op_schema_total(); id++) {
        const bb_op_schema *op = bb_op_schema_by_id(id);
        for (uint32_t k = 0; k < op->n_attrs; k++) {
            bool known = false;
            for (size_t i = 0; i < sizeof uses / sizeof uses[0]; i++)
                known |= uses[i].t == op->attrs[k].type;
            if (!known)
                fail_msg("%s::%s attribute %s has an unexpected type", op->domain,
                         op->op_type, op->attrs[k].name);
        }
    }
    const bb_op_schema *cast = bb_op_schema_find(NULL, "Cast");
    const bb_attr_schema *to = bb_op_attr(cast, "to");
    assert_true(to->required);
    assert_null(to->default_text);
    assert_null(bb_op_attr(cast, "nope"));
    assert_null(bb_op_attr(NULL, "to"));
    const bb_attr_schema *ap = bb_op_attr(bb_op_schema_find("ai.onnx", "Conv"), "auto_pad");
    assert_false(ap->required);
    assert_string_equal(ap->default_text, "NOTSET");
}

static void test_unknown_lookups(void **state)
{
    (void)state;
    assert_null(bb_op_schema_find("ai.onnx", "Foo"));
    assert_null(bb_op_schema_find("ai.onnx", "add")); /* case-sensitive */
    assert_null(bb_op_schema_find("ai.onnx", ""));
    assert_null(bb_op_schema_find("ai.onnx", NULL));
    assert_null(bb_op_schema_find(BB_DOMAIN_SYSCALL, "Send")); /* wire op, wrong domain */
    assert_null(bb_op_schema_find(BB_DOMAIN_WIRE, "Pulse"));
    assert_null(bb_op_schema_find("user.app", "Add"));
    assert_null(bb_op_schema_find(BB_DOMAIN_MODULE, "Hoist_x_0123"));
    assert_null(bb_op_schema_find("ai.onnx.ml", "Add"));
    assert_null(bb_opset_find(BB_DOMAIN_MODULE));
    assert_null(bb_opset_find("zzz"));
    assert_null(bb_opset_find("a"));
    assert_non_null(bb_op_schema_find(NULL, "Add"));
    assert_ptr_equal(bb_op_schema_find("", "Add"), bb_op_schema_find("ai.onnx", "Add"));
    /* same op_type, different domains, different schemas */
    const bb_op_schema *c1 = bb_op_schema_find("", "Constant");
    const bb_op_schema *c2 = bb_op_schema_find(BB_DOMAIN_SYSCALL, "Constant");
    assert_non_null(c1);
    assert_non_null(c2);
    assert_ptr_not_equal(c1, c2);
    assert_ptr_not_equal(bb_op_schema_find("", "Add"),
                         bb_op_schema_find(BB_DOMAIN_ROLE_INDEX, "Add"));
}

static void test_ids(void **state)
{
    (void)state;
    size_t total = bb_op_schema_total();
    for (size_t id = 0; id < total; id++) {
        const bb_op_schema *op = bb_op_schema_by_id(id);
        assert_non_null(op);
        assert_int_equal(bb_op_schema_id(op), id);
        assert_ptr_equal(bb_op_schema_find(op->domain, op->op_type), op);
    }
    assert_null(bb_op_schema_by_id(total));
    assert_null(bb_op_schema_by_id(SIZE_MAX));
}

static void test_domains_and_roles(void **state)
{
    (void)state;
    assert_true(bb_opset_is_reserved(NULL));
    assert_true(bb_opset_is_reserved(""));
    assert_true(bb_opset_is_reserved("ai.onnx"));
    assert_true(bb_opset_is_reserved("ai.onnx.ml"));
    assert_true(bb_opset_is_reserved("ai.bytesandbrains"));
    assert_true(bb_opset_is_reserved(BB_DOMAIN_SYSCALL));
    assert_true(bb_opset_is_reserved(BB_DOMAIN_MODULE));
    assert_true(bb_opset_is_reserved("ai.bytesandbrains.role.anything"));
    assert_true(bb_opset_is_reserved("ai.bytesandbrains."));
    assert_false(bb_opset_is_reserved("user.app"));
    assert_false(bb_opset_is_reserved("ai.bytesandbrainsx"));
    assert_false(bb_opset_is_reserved("ai.onnxx"));
    assert_false(bb_opset_is_reserved("bb-burn.BurnModel.atomic"));

    assert_int_equal(bb_domain_role(BB_DOMAIN_ROLE_INDEX), BB_ROLE_INDEX);
    assert_int_equal(bb_domain_role(BB_DOMAIN_ROLE_MODEL), BB_ROLE_MODEL);
    assert_int_equal(bb_domain_role(BB_DOMAIN_ROLE_AGGREGATOR), BB_ROLE_AGGREGATOR);
    assert_int_equal(bb_domain_role(BB_DOMAIN_ROLE_COMPRESSOR), BB_ROLE_CODEC);
    assert_int_equal(bb_domain_role(BB_DOMAIN_ROLE_CODEC_ALIAS), BB_ROLE_CODEC);
    assert_int_equal(bb_domain_role(BB_DOMAIN_ROLE_DATA_LOADER), BB_ROLE_DATA_SOURCE);
    assert_int_equal(bb_domain_role(BB_DOMAIN_ROLE_DATA_SOURCE_ALIAS), BB_ROLE_DATA_SOURCE);
    assert_int_equal(bb_domain_role(BB_DOMAIN_ROLE_PEER_SELECTOR), BB_ROLE_PEER_SELECTOR);
    assert_int_equal(bb_domain_role("ai.onnx"), BB_ROLE_BACKEND);
    assert_int_equal(bb_domain_role(""), BB_ROLE_BACKEND);
    assert_int_equal(bb_domain_role(NULL), BB_ROLE_BACKEND);
    assert_int_equal(bb_domain_role(BB_DOMAIN_SYSCALL), BB_ROLE_NONE);
    assert_int_equal(bb_domain_role("ai.bytesandbrains.role.unknown"), BB_ROLE_NONE);
    assert_int_equal(bb_domain_role("user.app"), BB_ROLE_NONE);
    /* the catalog's role agrees with role.c's placeholder domains */
    for (size_t i = 0; i < bb_opset_count(); i++) {
        const bb_opset_schema *os = bb_opset_at(i);
        if (os->role != BB_ROLE_NONE)
            assert_string_equal(bb_role_domain(os->role), os->domain);
    }

    assert_true(bb_domain_is_role(BB_DOMAIN_ROLE_MODEL));
    assert_true(bb_domain_is_role(BB_DOMAIN_ROLE_CODEC_ALIAS));
    assert_false(bb_domain_is_role(BB_DOMAIN_ROLE_PREFIX));
    assert_false(bb_domain_is_role("ai.onnx"));
    assert_false(bb_domain_is_role(NULL));
    assert_false(bb_domain_is_role(BB_DOMAIN_WIRE));
}

static void test_wire_and_gate_classification(void **state)
{
    (void)state;
    const char *W = BB_DOMAIN_WIRE;
    const char *sends[] = {BB_OP_WIRE_SEND, BB_OP_WIRE_SEND_REQ_BATCHED, BB_OP_WIRE_SEND_RESP};
    const char *recvs[] = {BB_OP_WIRE_RECV, BB_OP_WIRE_RECV_REQ, BB_OP_WIRE_RECV_RESP_BATCHED};
    for (int i = 0; i < 3; i++) {
        assert_true(bb_op_is_wire(W, sends[i]));
        assert_true(bb_op_is_wire_send(W, sends[i]));
        assert_false(bb_op_is_wire_recv(W, sends[i]));
        assert_true(bb_op_is_wire(W, recvs[i]));
        assert_true(bb_op_is_wire_recv(W, recvs[i]));
        assert_false(bb_op_is_wire_send(W, recvs[i]));
    }
    assert_false(bb_op_is_wire(W, "Nope"));
    assert_false(bb_op_is_wire(BB_DOMAIN_SYSCALL, "Gate"));
    assert_false(bb_op_is_wire("", "Add"));
    assert_false(bb_op_is_wire(BB_DOMAIN_SYSCALL, "Send"));
    assert_int_equal(bb_op_flags("x", "y"), 0);

    /* exactly the five gates and DeadlineCheck + the three dispatch ops are
     * compiler-inserted */
    const bb_opset_schema *sys = bb_opset_find(BB_DOMAIN_SYSCALL);
    int inserted = 0, rx = 0, tx = 0;
    for (uint32_t i = 0; i < sys->n_ops; i++) {
        uint32_t f = sys->ops[i].flags;
        inserted += (f & BB_OPF_COMPILER_INSERTED) != 0;
        rx += (f & BB_OPF_GATE_RX) != 0;
        tx += (f & BB_OPF_GATE_TX) != 0;
    }
    assert_int_equal(inserted, 9);
    assert_int_equal(rx, 3);
    assert_int_equal(tx, 2);
    assert_true(bb_op_is_gate(BB_DOMAIN_SYSCALL, BB_OP_DEDUP_GATE_RX));
    assert_true(bb_op_is_gate(BB_DOMAIN_SYSCALL, BB_OP_BACKOFF_GATE_TX));
    assert_false(bb_op_is_gate(BB_DOMAIN_SYSCALL, BB_OP_DEADLINE_CHECK));
    assert_false(bb_op_is_gate(BB_DOMAIN_SYSCALL, "Gate"));
    assert_true(bb_op_flags(BB_DOMAIN_SYSCALL, BB_OP_DEADLINE_CHECK) & BB_OPF_COMPILER_INSERTED);
    assert_true(bb_op_flags(BB_DOMAIN_ROLE_MODEL, "Train") & BB_OPF_ASYNC);
    assert_true(bb_op_flags(W, "SendReqBatched") & BB_OPF_ASYNC);
    assert_false(bb_op_flags("", "Add") & BB_OPF_ASYNC);
}

static void test_ports_and_arity(void **state)
{
    (void)state;
    uint32_t idx = 99, lo, hi;
    const bb_op_schema *gemm = bb_op_schema_find("", "Gemm");
    const bb_port_decl *c = bb_op_input(gemm, "C", &idx);
    assert_non_null(c);
    assert_int_equal(idx, 2);
    assert_true(c->optional);
    assert_null(bb_op_input(gemm, "D", NULL));
    assert_null(bb_op_input(gemm, NULL, NULL));
    assert_null(bb_op_input(NULL, "A", NULL));
    assert_null(bb_op_output(gemm, "A", NULL));
    bb_op_input_arity(gemm, &lo, &hi);
    assert_int_equal(lo, 2);
    assert_int_equal(hi, 3);
    assert_ptr_equal(bb_op_input_at(gemm, 0), &gemm->inputs[0]);
    assert_null(bb_op_input_at(gemm, 3));

    const bb_op_schema *mp = bb_op_schema_find("", "MaxPool");
    assert_non_null(bb_op_output(mp, "Indices", &idx));
    assert_int_equal(idx, 1);
    bb_op_output_arity(mp, &lo, &hi);
    assert_int_equal(lo, 1);
    assert_int_equal(hi, 2);

    const bb_op_schema *concat = bb_op_schema_find("", "Concat");
    bb_op_input_arity(concat, &lo, &hi);
    assert_int_equal(lo, 1);
    assert_int_equal(hi, UINT32_MAX);
    assert_ptr_equal(bb_op_input_at(concat, 7), &concat->inputs[0]);

    const bb_op_schema *loop = bb_op_schema_find("", "Loop");
    bb_op_input_arity(loop, &lo, &hi);
    assert_int_equal(lo, 0);
    assert_int_equal(hi, UINT32_MAX);
    assert_ptr_equal(bb_op_input_at(loop, 5), &loop->inputs[2]);

    const bb_op_schema *slice = bb_op_schema_find("", "Slice");
    bb_op_input_arity(slice, &lo, &hi);
    assert_int_equal(lo, 3);
    assert_int_equal(hi, 5);

    const bb_op_schema *resp = bb_op_schema_find(BB_DOMAIN_WIRE, "SendResp");
    bb_op_input_arity(resp, &lo, &hi);
    assert_int_equal(lo, 3);
    assert_int_equal(hi, 3);
    bb_op_output_arity(resp, &lo, &hi);
    assert_int_equal(lo, 0);
    assert_int_equal(hi, 0);
    assert_null(bb_op_output_at(resp, 0));

    const bb_op_schema *unb = bb_op_schema_find(BB_DOMAIN_COMPOSITE, "Unbundle");
    bb_op_output_arity(unb, &lo, &hi);
    assert_int_equal(lo, 1);
    assert_int_equal(hi, UINT32_MAX);
    assert_ptr_equal(bb_op_output_at(unb, 3), &unb->outputs[0]);
}

/* A node of (domain, op) with the given inputs / outputs ("|"-separated, "~"
 * for an empty name). */
static bb_node *mk_node(bb_arena *a, const char *domain, const char *op, const char *ins,
                        const char *outs)
{
    bb_node *n = bb_node_new(a, domain, op);
    assert_non_null(n);
    n->name = "n0";
    const char *lists[2] = {ins, outs};
    for (int k = 0; k < 2; k++) {
        if (!lists[k])
            continue;
        char buf[256];
        snprintf(buf, sizeof buf, "%s", lists[k]);
        for (char *save = NULL, *t = strtok_r(buf, "|", &save); t;
             t = strtok_r(NULL, "|", &save))
            assert_int_equal(bb_str_list_push(a, k ? &n->outputs : &n->inputs,
                                              strcmp(t, "~") == 0 ? "" : t),
                             BB_OK);
    }
    return n;
}

static void test_check_node(void **state)
{
    (void)state;
    bb_arena *a = bb_arena_create();
    assert_non_null(a);
    bb_error err = {0};
    const bb_op_schema *gemm = bb_op_schema_find("", "Gemm");

    assert_int_equal(bb_op_schema_check_node(gemm, mk_node(a, "", "Gemm", "a|b", "y"), &err),
                     BB_OK);
    assert_int_equal(bb_op_schema_check_node(gemm, mk_node(a, "", "Gemm", "a|b|c", "y"), &err),
                     BB_OK);
    assert_int_equal(bb_op_schema_check_node(gemm, mk_node(a, "", "Gemm", "a", "y"), &err),
                     BB_EVALIDATE);
    assert_non_null(strstr(err.msg, "at least 2"));
    assert_non_null(strstr(err.msg, "'n0'"));
    assert_non_null(strstr(err.msg, "Gemm"));
    assert_int_equal(
        bb_op_schema_check_node(gemm, mk_node(a, "", "Gemm", "a|b|c|d", "y"), &err),
        BB_EVALIDATE);
    assert_non_null(strstr(err.msg, "at most 3"));
    assert_int_equal(bb_op_schema_check_node(gemm, mk_node(a, "", "Gemm", "a|b", NULL), &err),
                     BB_EVALIDATE);
    assert_non_null(strstr(err.msg, "output"));

    const bb_op_schema *conv = bb_op_schema_find("", "Conv");
    assert_int_equal(bb_op_schema_check_node(conv, mk_node(a, "", "Conv", "x|w|~", "y"), &err),
                     BB_OK);
    assert_int_equal(bb_op_schema_check_node(conv, mk_node(a, "", "Conv", "x|~|b", "y"), &err),
                     BB_EVALIDATE);
    assert_non_null(strstr(err.msg, "'W'"));

    /* required attribute, then attribute type */
    const bb_op_schema *cast = bb_op_schema_find("", "Cast");
    bb_node *n = mk_node(a, "", "Cast", "x", "y");
    assert_int_equal(bb_op_schema_check_node(cast, n, &err), BB_EVALIDATE);
    assert_non_null(strstr(err.msg, "'to'"));
    assert_non_null(bb_node_set_attr_float(a, n, "to", 1.0f));
    assert_int_equal(bb_op_schema_check_node(cast, n, &err), BB_EVALIDATE);
    assert_non_null(strstr(err.msg, "FLOAT, want INT"));
    n = mk_node(a, "", "Cast", "x", "y");
    assert_non_null(bb_node_set_attr_int(a, n, "to", 1));
    assert_non_null(bb_node_set_attr_int(a, n, "not_in_schema", 3)); /* ignored */
    assert_int_equal(bb_op_schema_check_node(cast, n, &err), BB_OK);

    /* variadic */
    const bb_op_schema *concat = bb_op_schema_find("", "Concat");
    n = mk_node(a, "", "Concat", "a|b|c|d|e", "y");
    assert_non_null(bb_node_set_attr_int(a, n, "axis", 0));
    assert_int_equal(bb_op_schema_check_node(concat, n, &err), BB_OK);
    n = mk_node(a, "", "Concat", "a|~|c", "y");
    assert_non_null(bb_node_set_attr_int(a, n, "axis", 0));
    assert_int_equal(bb_op_schema_check_node(concat, n, &err), BB_EVALIDATE);
    n = mk_node(a, "", "Concat", NULL, "y");
    assert_non_null(bb_node_set_attr_int(a, n, "axis", 0));
    assert_int_equal(bb_op_schema_check_node(concat, n, &err), BB_EVALIDATE);

    /* syscall Constant takes a value of any attribute type */
    const bb_op_schema *k = bb_op_schema_find(BB_DOMAIN_SYSCALL, "Constant");
    n = mk_node(a, BB_DOMAIN_SYSCALL, "Constant", NULL, "v");
    assert_int_equal(bb_op_schema_check_node(k, n, &err), BB_EVALIDATE);
    assert_non_null(bb_node_set_attr_string(a, n, "value", "hello"));
    assert_int_equal(bb_op_schema_check_node(k, n, &err), BB_OK);

    /* SendResp with the optional dest left empty */
    const bb_op_schema *resp = bb_op_schema_find(BB_DOMAIN_WIRE, "SendResp");
    assert_int_equal(
        bb_op_schema_check_node(resp, mk_node(a, BB_DOMAIN_WIRE, "SendResp", "d|~|r", NULL),
                                &err),
        BB_OK);
    assert_int_equal(
        bb_op_schema_check_node(resp, mk_node(a, BB_DOMAIN_WIRE, "SendResp", "d|p|~", NULL),
                                &err),
        BB_EVALIDATE);
    assert_non_null(strstr(err.msg, "req_id"));

    assert_int_equal(bb_op_schema_check_node(NULL, n, &err), BB_EINVAL);
    assert_int_equal(bb_op_schema_check_node(k, NULL, NULL), BB_EINVAL);
    bb_arena_destroy(a);
}

static void test_meta_spellings(void **state)
{
    (void)state;
    assert_string_equal(BB_META_CONCRETE_TYPE, "ai.bytesandbrains.concrete_type");
    assert_string_equal(BB_META_INSTANCE, "ai.bytesandbrains.instance");
    assert_string_equal(BB_META_REQUIRED_TRAIT, "ai.bytesandbrains.required_trait");
    assert_string_equal(BB_META_SLOT_ID, "ai.bytesandbrains.slot_id");
    assert_string_equal(BB_META_SLOT, "ai.bytesandbrains.slot");
    assert_string_equal(BB_META_MODULE_INSTANCE, "ai.bytesandbrains.module_instance");
    assert_string_equal(BB_META_MODULE_PHASE, "ai.bytesandbrains.module_phase");
    assert_string_equal(BB_META_ORIGINAL_OP, "ai.bytesandbrains.original_op");
    assert_string_equal(BB_META_WIRE_CORRELATION, "ai.bytesandbrains.wire_correlation");
    assert_string_equal(BB_META_WIRE_TRANSPORT, "ai.bytesandbrains.wire_transport");
    assert_string_equal(BB_META_COMPILED, "ai.bytesandbrains.compiled");
    assert_string_equal(BB_COMPILED_PASSPORT, "v1");
    assert_string_equal(BB_META_BINDING_PREFIX, "ai.bytesandbrains.binding.");
    assert_string_equal(BB_META_RX_CHAIN_HEAD, "ai.bytesandbrains.rx_chain_head");
    assert_string_equal(BB_META_DEDUP_RX_GATED, "ai.bytesandbrains.dedup_rx_gated");
    assert_string_equal(BB_META_BACKOFF_TX_GATED, "ai.bytesandbrains.backoff_tx_gated");
    assert_string_equal(BB_META_PEER_HEALTH_RX_SOURCE,
                        "ai.bytesandbrains.peer_health_rx_source");
    assert_string_equal(BB_META_COMPOSITE_CHILD_COUNT,
                        "ai.bytesandbrains.composite.child_count");
    assert_string_equal(BB_META_COMPOSITE_CHILD_TYPES,
                        "ai.bytesandbrains.composite.child_types");
    assert_string_equal(BB_HOME_CLASS_KEY, "ai.bytesandbrains.home_class");
    assert_string_equal(BB_RECV_SLOT_ID_KEY, "ai.bytesandbrains.recv_slot_id");
    assert_string_equal(BB_META_DEST_CLASS, "ai.bytesandbrains.dest_class");
    assert_string_equal(BB_SELF_CLASS, "@self");
    assert_string_equal(BB_META_SLOT_CONCRETE_TYPE_PREFIX, "ai.bytesandbrains.concrete_type.");
    assert_string_equal(BB_DOMAIN_ROLE_DATA_LOADER, "ai.bytesandbrains.role.data_loader");
    assert_string_equal(BB_DOMAIN_COMPOSITE, "ai.bytesandbrains.composite");
    assert_string_equal(BB_DOMAIN_MODULE, "ai.bytesandbrains.module");
    /* the type-tree domain and ours agree */
    assert_string_equal(BB_DOMAIN_BB, BB_TYPE_DOMAIN);
}

static void test_binding_keys(void **state)
{
    (void)state;
    bb_arena *a = bb_arena_create();
    char *k = bb_meta_binding_key(a, "Client", "compute");
    assert_string_equal(k, "ai.bytesandbrains.binding.Client.compute");
    assert_string_equal(bb_meta_binding_key_slot(k, "Client"), "compute");
    assert_null(bb_meta_binding_key_slot(k, "Clien"));
    assert_null(bb_meta_binding_key_slot(k, "Server"));
    assert_null(bb_meta_binding_key_slot("ai.bytesandbrains.binding.Client.", "Client"));
    assert_null(bb_meta_binding_key_slot("ai.bytesandbrains.compiled", "Client"));
    assert_null(bb_meta_binding_key_slot(NULL, "Client"));
    assert_null(bb_meta_binding_key_slot(k, ""));
    /* targets with a content-hash suffix and slots with dots stay intact */
    k = bb_meta_binding_key(a, "Client#00ff", "a.b");
    assert_string_equal(bb_meta_binding_key_slot(k, "Client#00ff"), "a.b");
    assert_null(bb_meta_binding_key(a, "", "x"));
    assert_null(bb_meta_binding_key(a, "t", NULL));
    assert_string_equal(bb_meta_slot_concrete_type_key(a, "model"),
                        "ai.bytesandbrains.concrete_type.model");
    assert_null(bb_meta_slot_concrete_type_key(a, ""));
    bb_arena_destroy(a);
}

static void test_binding_triple(void **state)
{
    (void)state;
    bb_arena *a = bb_arena_create();
    bb_error err = {0};
    bb_binding_triple t = {.role = "Backend", .type_name = "cpu::CpuBackend", .slot_id = 7};
    char *s = NULL;
    assert_int_equal(bb_binding_triple_format(a, &t, &s, &err), BB_OK);
    assert_string_equal(s, "Backend|cpu::CpuBackend|7");
    bb_binding_triple back;
    assert_int_equal(bb_binding_triple_parse(a, s, &back, &err), BB_OK);
    assert_string_equal(back.role, "Backend");
    assert_string_equal(back.type_name, "cpu::CpuBackend");
    assert_int_equal(back.slot_id, 7);

    assert_int_equal(bb_binding_triple_parse(a, "Model|m::M|4294967295", &back, &err), BB_OK);
    assert_int_equal(back.slot_id, UINT32_MAX);
    assert_int_equal(bb_binding_triple_parse(a, "Model|m::M|0", &back, NULL), BB_OK);
    assert_int_equal(back.slot_id, 0);

    static const struct {
        const char *in, *why;
    } bad[] = {
        {"", "want"},
        {"Backend", "want"},
        {"Backend|x", "want"},
        {"Backend|x|1|2", "more than three"},
        {"|x|1", "empty role"},
        {"Backend||1", "empty TYPE_NAME"},
        {"Backend|x|", "empty slot_id"},
        {"Backend|x|1a", "decimal"},
        {"Backend|x|-1", "decimal"},
        {"Backend|x| 1", "decimal"},
        {"Backend|x|4294967296", "exceeds"},
        {"Backend|x|99999999999999999999999", "exceeds"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        if (bb_binding_triple_parse(a, bad[i].in, &back, &err) != BB_EPARSE)
            fail_msg("'%s' parsed", bad[i].in);
        if (!strstr(err.msg, bad[i].why))
            fail_msg("'%s': message '%s' lacks '%s'", bad[i].in, err.msg, bad[i].why);
        assert_null(back.role);
    }
    assert_int_equal(bb_binding_triple_parse(a, NULL, &back, &err), BB_EPARSE);
    char *huge = malloc(BB_BINDING_MAX_LEN + 16);
    assert_non_null(huge);
    memset(huge, 'x', BB_BINDING_MAX_LEN + 15);
    huge[0] = 'a';
    huge[1] = '|';
    huge[3] = '|';
    huge[4] = '1';
    huge[5] = '\0';
    assert_int_equal(bb_binding_triple_parse(a, huge, &back, &err), BB_OK);
    huge[5] = '0';
    huge[BB_BINDING_MAX_LEN + 15] = '\0';
    assert_int_equal(bb_binding_triple_parse(a, huge, &back, &err), BB_EPARSE);
    assert_non_null(strstr(err.msg, "longer"));
    free(huge);

    bb_binding_triple pipe = {.role = "Backend", .type_name = "a|b", .slot_id = 1};
    assert_int_equal(bb_binding_triple_format(a, &pipe, &s, &err), BB_EINVAL);
    assert_null(s);
    assert_non_null(strstr(err.msg, "TYPE_NAME"));
    bb_binding_triple empty = {.role = "", .type_name = "x", .slot_id = 1};
    assert_int_equal(bb_binding_triple_format(a, &empty, &s, &err), BB_EINVAL);
    assert_non_null(strstr(err.msg, "role"));
    bb_arena_destroy(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tables_sorted_and_well_formed),
        cmocka_unit_test(test_counts_per_domain),
        cmocka_unit_test(test_every_spec_op_signature),
        cmocka_unit_test(test_port_types),
        cmocka_unit_test(test_attribute_types_and_defaults),
        cmocka_unit_test(test_unknown_lookups),
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_domains_and_roles),
        cmocka_unit_test(test_wire_and_gate_classification),
        cmocka_unit_test(test_ports_and_arity),
        cmocka_unit_test(test_check_node),
        cmocka_unit_test(test_meta_spellings),
        cmocka_unit_test(test_binding_keys),
        cmocka_unit_test(test_binding_triple),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
