/* good2.c — a second well-formed test plugin: two component types (a
 * Protocol with its own atomic opset, a dependency and config keys, and a
 * Codec) plus a user compiler stage through BB_STAGE_ENTRY_SYMBOL. */
#include "bb/arena.h"
#include "bb/plugin.h"

/* ---- good2::Echo: returns its input ---- */
static int echo_create(const bb_create_args *args, void **out, bb_error *err)
{
    (void)args;
    (void)err;
    *out = NULL; /* stateless */
    return BB_OK;
}

static void echo_destroy(void *inst)
{
    (void)inst;
}

static bb_dispatch_result echo_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                        bb_value **outputs, bb_error *err)
{
    (void)inst, (void)ctx;
    if (call->n_inputs < 1 || call->n_outputs < 1 || !call->inputs[0]) {
        bb_error_set(err, BB_EINVAL, "good2::Echo: %s needs one input and one output",
                     call->op_type);
        return BB_DISPATCH_NOW_ERR;
    }
    outputs[0] = bb_value_ref(call->inputs[0]);
    return BB_DISPATCH_NOW_OK;
}

static const bb_port_decl PAYLOAD[] = {{.name = "payload", .type = &BB_TYPE_BYTES}};
static const bb_op_decl ECHO_OPS[] = {
    {.op_type = "Echo", .inputs = PAYLOAD, .n_inputs = 1, .outputs = PAYLOAD, .n_outputs = 1,
     .doc = "returns its input"},
};
static const bb_opset_decl ECHO_OPSETS[] = {
    {.domain = "good2.echo.atomic", .version = 1, .ops = ECHO_OPS, .n_ops = 1},
};
static const bb_dependency_decl ECHO_DEPS[] = {{.role = BB_ROLE_BACKEND, .slot = "compute"}};
static const bb_config_decl ECHO_CONFIG[] = {
    {.key = "prefix", .type = "string", .default_json = "\"\"", .doc = "prepended"},
    {.key = "limit", .type = "int", .default_json = NULL, .doc = "required"},
};

static const bb_component_type ECHO = {
    .struct_size = sizeof(bb_component_type),
    .abi_major = BB_PLUGIN_ABI_MAJOR,
    .abi_minor = 0,
    .type_name = "good2::Echo",
    .role = BB_ROLE_PROTOCOL,
    .doc = "echoes bytes",
    .opsets = ECHO_OPSETS,
    .n_opsets = 1,
    .deps = ECHO_DEPS,
    .n_deps = 1,
    .config = ECHO_CONFIG,
    .n_config = 2,
    .create = echo_create,
    .destroy = echo_destroy,
    .dispatch = echo_dispatch,
};

/* ---- good2::Null: an identity codec ---- */
static const bb_port_decl T_IN[] = {{.name = "t", .type = &BB_TYPE_TENSOR}};
static const bb_port_decl CODE_OUT[] = {{.name = "code", .type = &BB_TYPE_TENSOR}};
static const bb_port_decl CODE_IN[] = {{.name = "code", .type = &BB_TYPE_TENSOR}};
static const bb_port_decl T_OUT[] = {{.name = "t", .type = &BB_TYPE_TENSOR}};
static const bb_op_decl NULL_OPS[] = {
    {.op_type = "Compress", .inputs = T_IN, .n_inputs = 1, .outputs = CODE_OUT, .n_outputs = 1},
    {.op_type = "Decompress", .inputs = CODE_IN, .n_inputs = 1, .outputs = T_OUT,
     .n_outputs = 1},
};
static const bb_opset_decl NULL_OPSETS[] = {
    {.domain = "ai.bytesandbrains.role.compressor", .version = 1, .ops = NULL_OPS, .n_ops = 2},
};

static const bb_component_type NULLC = {
    .struct_size = sizeof(bb_component_type),
    .abi_major = BB_PLUGIN_ABI_MAJOR,
    .abi_minor = BB_PLUGIN_ABI_MINOR,
    .type_name = "good2::Null",
    .role = BB_ROLE_CODEC,
    .opsets = NULL_OPSETS,
    .n_opsets = 1,
    .create = echo_create,
    .destroy = echo_destroy,
    .dispatch = echo_dispatch,
};

static const bb_component_type *const TYPES[] = {&ECHO, &NULLC};

static const bb_plugin_info INFO = {
    .struct_size = sizeof(bb_plugin_info),
    .abi_major = BB_PLUGIN_ABI_MAJOR,
    .abi_minor = BB_PLUGIN_ABI_MINOR,
    .name = "good2",
    .version = "2.0",
    .types = TYPES,
    .n_types = 2,
    .value_layout = BB_PLUGIN_VALUE_LAYOUT,
};

BB_PLUGIN_EXPORT const bb_plugin_info *bb_plugin_entry(void)
{
    return &INFO;
}

/* ---- a user compiler stage: stamps the partition's doc_string ---- */
static int stamp_run(void *state, bb_model *partition, bb_error *err)
{
    (void)state;
    partition->doc_string = bb_arena_strdup(partition->arena, "stamped by good2");
    if (!partition->doc_string)
        return bb_error_set(err, BB_ENOMEM, "good2.stamp: out of memory");
    return BB_OK;
}

static const bb_stage STAMP = {
    .struct_size = sizeof(bb_stage),
    .name = "good2.stamp",
    .run = stamp_run,
};

static const bb_stage *const STAGES[] = {&STAMP};

static const bb_stage_info STAGE_INFO = {
    .struct_size = sizeof(bb_stage_info),
    .abi_major = BB_PLUGIN_ABI_MAJOR,
    .abi_minor = BB_PLUGIN_ABI_MINOR,
    .stages = STAGES,
    .n_stages = 1,
};

BB_PLUGIN_EXPORT const bb_stage_info *bb_stage_entry(void)
{
    return &STAGE_INFO;
}
