/*
 * example.c -- example::Counter, the example plugin of bb-plugin(7):
 * an Aggregator keeping a running sum of f32 tensors.
 *
 *   Contribute(contribution: tensor f32) -> cmd: CommandId
 *       adds the tensor to the sum; cmd is the new count
 *   Aggregate(trigger: Trigger) -> result: tensor f32
 *       the mean of every contribution so far (sum / count)
 *   CurrentTensor(trigger: Trigger) -> tensor: tensor f32
 *       the running sum itself
 *
 * The state survives snapshot/restore. Build it on its own with
 *   cc -shared -fPIC -fvisibility=hidden -o example.so example.c \
 *       $(pkg-config --cflags libbbir)
 * (no -lbbir: the program that loads it provides libbbir, bb-plugin(7))
 */
#include <stdlib.h>
#include <string.h>

#include <bb/plugin.h>

#define NAME "example::Counter"

typedef struct counter {
    uint64_t count;  /* contributions so far */
    uint32_t ndim;   /* shape of the first contribution */
    int64_t dims[BB_MAX_DIMS];
    size_t numel;
    float *sum;      /* numel floats; NULL while count == 0 */
} counter;

static int counter_create(const bb_create_args *args, void **out,
                          bb_error *err)
{
    (void)args; /* no construction state, no config keys */
    counter *c = calloc(1, sizeof *c);
    if (!c)
        return bb_error_set(err, BB_ENOMEM, NAME ": out of memory");
    *out = c;
    return BB_OK;
}

static void counter_destroy(void *inst)
{
    counter *c = inst;
    free(c->sum);
    free(c);
}

static int contribute(counter *c, const bb_value *t, bb_value **out,
                      bb_error *err)
{
    if (!t || t->type->kind != BB_VK_TENSOR ||
        t->u.tensor.dtype != BB_DT_FLOAT)
        return bb_error_set(err, BB_ETYPE,
                            NAME ": Contribute takes a float tensor");
    const bb_tensor_view *v = &t->u.tensor;
    size_t n = bb_tensor_numel(t);
    if (c->count > 0 &&
        (v->ndim != c->ndim ||
         memcmp(v->dims, c->dims, v->ndim * sizeof *v->dims) != 0))
        return bb_error_set(err, BB_ETYPE, NAME ": contribution shape "
                            "differs from the first contribution");
    bb_value *cmd = bb_value_u64(&BB_TYPE_COMMAND_ID, c->count + 1);
    if (!cmd)
        return bb_error_set(err, BB_ENOMEM, NAME ": out of memory");
    if (c->count == 0) {
        c->sum = calloc(n ? n : 1, sizeof *c->sum);
        if (!c->sum) {
            bb_value_unref(cmd);
            return bb_error_set(err, BB_ENOMEM, NAME ": out of memory");
        }
        c->ndim = v->ndim;
        memcpy(c->dims, v->dims, sizeof c->dims);
        c->numel = n;
    }
    const float *x = bb_tensor_f32(t);
    for (size_t i = 0; i < n; i++)
        c->sum[i] += x[i];
    c->count++;
    *out = cmd; /* the engine takes this reference */
    return BB_OK;
}

/* The running sum, or the mean, as a new tensor. */
static int emit(const counter *c, int mean, bb_value **out,
                bb_error *err)
{
    if (c->count == 0)
        return bb_error_set(err, BB_ESTATE,
                            NAME ": no contribution yet");
    bb_value *t = bb_value_tensor_new(BB_DT_FLOAT, c->ndim, c->dims);
    if (!t)
        return bb_error_set(err, BB_ENOMEM, NAME ": out of memory");
    float scale = mean ? 1.0f / (float)c->count : 1.0f;
    float *y = bb_tensor_f32(t);
    for (size_t i = 0; i < c->numel; i++)
        y[i] = c->sum[i] * scale;
    *out = t;
    return BB_OK;
}

enum { OP_CONTRIBUTE, OP_AGGREGATE, OP_CURRENT_TENSOR, N_OPS };

static bb_dispatch_result counter_dispatch(void *inst, bb_ctx *ctx,
                                           const bb_dispatch_call *call,
                                           bb_value **outputs,
                                           bb_error *err)
{
    counter *c = inst;
    (void)ctx; /* no dependencies: everything happens inline */
    int rc;
    if (call->n_outputs < 1)
        rc = bb_error_set(err, BB_EINVAL, NAME ": no output slot");
    else if (call->op_index == OP_CONTRIBUTE)
        rc = contribute(c, call->n_inputs ? call->inputs[0] : NULL,
                        &outputs[0], err);
    else if (call->op_index == OP_AGGREGATE)
        rc = emit(c, 1, &outputs[0], err);
    else if (call->op_index == OP_CURRENT_TENSOR)
        rc = emit(c, 0, &outputs[0], err);
    else
        rc = bb_error_set(err, BB_EUNSUPPORTED, NAME ": no op %s",
                          call->op_type);
    return rc == BB_OK ? BB_DISPATCH_NOW_OK : BB_DISPATCH_NOW_ERR;
}

/* ---- snapshot: little-endian, and checked like any input ---- */
#define MAGIC 0x31434242u /* "BBC1" */

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* magic, count, ndim, dims[ndim], then numel f32 (count > 0 only) */
static int counter_snapshot(void *inst, uint8_t **out, size_t *out_len,
                            bb_error *err)
{
    const counter *c = inst;
    size_t ndim = c->count ? c->ndim : 0;
    size_t len = 16 + 8 * ndim + (c->count ? 4 * c->numel : 0);
    uint8_t *p = malloc(len);
    if (!p)
        return bb_error_set(err, BB_ENOMEM, NAME ": out of memory");
    put32(p, MAGIC);
    put64(p + 4, c->count);
    put32(p + 12, (uint32_t)ndim);
    uint8_t *q = p + 16;
    for (size_t i = 0; i < ndim; i++, q += 8)
        put64(q, (uint64_t)c->dims[i]);
    for (size_t i = 0; c->count && i < c->numel; i++, q += 4) {
        uint32_t bits;
        memcpy(&bits, &c->sum[i], 4);
        put32(q, bits);
    }
    *out = p;
    *out_len = len;
    return BB_OK;
}

static int counter_restore(void *inst, const uint8_t *data, size_t len,
                           bb_error *err)
{
    counter *c = inst, s = {0};
    if (len < 16 || get32(data) != MAGIC)
        return bb_error_set(err, BB_EDECODE, NAME ": not a snapshot");
    s.count = get64(data + 4);
    uint32_t ndim = get32(data + 12);
    const uint8_t *q = data + 16, *end = data + len;
    if (s.count == 0 && (len != 16 || ndim != 0))
        return bb_error_set(err, BB_EDECODE, NAME ": bad empty state");
    if (ndim > BB_MAX_DIMS || (size_t)(end - q) < 8 * (size_t)ndim)
        return bb_error_set(err, BB_EDECODE, NAME ": bad shape");
    s.ndim = ndim;
    for (uint32_t i = 0; i < ndim; i++, q += 8)
        s.dims[i] = (int64_t)get64(q);
    s.numel = s.count ? bb_shape_numel(s.ndim, s.dims) : 0;
    if (s.numel == SIZE_MAX || (size_t)(end - q) / 4 != s.numel ||
        (size_t)(end - q) % 4)
        return bb_error_set(err, BB_EDECODE,
                            NAME ": data does not match the shape");
    if (s.count) {
        s.sum = malloc(s.numel ? 4 * s.numel : 1);
        if (!s.sum)
            return bb_error_set(err, BB_ENOMEM, NAME ": out of memory");
    }
    for (size_t i = 0; i < s.numel; i++, q += 4) {
        uint32_t bits = get32(q);
        memcpy(&s.sum[i], &bits, 4);
    }
    free(c->sum);
    *c = s;
    return BB_OK;
}

/* ---- the declarations bbc and bbd read ---- */
static const bb_port_decl CONTRIBUTION_IN[] = {
    {.name = "contribution", .type = &BB_TYPE_TENSOR_F32}};
static const bb_port_decl TRIGGER_IN[] = {
    {.name = "trigger", .type = &BB_TYPE_TRIGGER}};
static const bb_port_decl CMD_OUT[] = {
    {.name = "cmd", .type = &BB_TYPE_COMMAND_ID}};
static const bb_port_decl RESULT_OUT[] = {
    {.name = "result", .type = &BB_TYPE_TENSOR_F32}};
static const bb_port_decl TENSOR_OUT[] = {
    {.name = "tensor", .type = &BB_TYPE_TENSOR_F32}};

static const bb_op_decl OPS[N_OPS] = {
    [OP_CONTRIBUTE] = {"Contribute", CONTRIBUTION_IN, 1, CMD_OUT, 1,
                       "add a tensor to the running sum"},
    [OP_AGGREGATE] = {"Aggregate", TRIGGER_IN, 1, RESULT_OUT, 1,
                      "mean of the contributions so far"},
    [OP_CURRENT_TENSOR] = {"CurrentTensor", TRIGGER_IN, 1, TENSOR_OUT,
                           1, "the running sum"},
};

static const bb_opset_decl OPSETS[] = {
    {"ai.bytesandbrains.role.aggregator", 1, OPS, N_OPS}};

static const bb_component_type COUNTER = {
    .struct_size = sizeof(bb_component_type),
    .abi_major = BB_PLUGIN_ABI_MAJOR,
    .abi_minor = BB_PLUGIN_ABI_MINOR,
    .type_name = NAME,
    .role = BB_ROLE_AGGREGATOR,
    .doc = "running sum and mean of f32 tensors",
    .opsets = OPSETS,
    .n_opsets = 1,
    .create = counter_create,
    .destroy = counter_destroy,
    .dispatch = counter_dispatch,
    .snapshot = counter_snapshot,
    .restore = counter_restore,
};

static const bb_component_type *const TYPES[] = {&COUNTER};

static const bb_plugin_info INFO = {
    .struct_size = sizeof(bb_plugin_info),
    .abi_major = BB_PLUGIN_ABI_MAJOR,
    .abi_minor = BB_PLUGIN_ABI_MINOR,
    .name = "example",
    .version = "1.0",
    .types = TYPES,
    .n_types = 1,
    .value_layout = BB_PLUGIN_VALUE_LAYOUT,
};

BB_PLUGIN_EXPORT const bb_plugin_info *bb_plugin_entry(void)
{
    return &INFO;
}
