/* dup_type.c — test plugin exporting "example::Counter", the TYPE_NAME the
 * example plugin exports: loading both must fail naming both files. */
#include "bb/plugin.h"

static int dup_create(const bb_create_args *args, void **out, bb_error *err)
{
    (void)args;
    (void)err;
    *out = NULL;
    return BB_OK;
}

static void dup_destroy(void *inst)
{
    (void)inst;
}

static bb_dispatch_result dup_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                       bb_value **outputs, bb_error *err)
{
    (void)inst, (void)ctx, (void)call, (void)outputs;
    bb_error_set(err, BB_EUNSUPPORTED, "dup_type: never dispatched");
    return BB_DISPATCH_NOW_ERR;
}

static const bb_component_type DUP = {
    .struct_size = sizeof(bb_component_type),
    .abi_major = BB_PLUGIN_ABI_MAJOR,
    .abi_minor = BB_PLUGIN_ABI_MINOR,
    .type_name = "example::Counter",
    .role = BB_ROLE_AGGREGATOR,
    .create = dup_create,
    .destroy = dup_destroy,
    .dispatch = dup_dispatch,
};

static const bb_component_type *const TYPES[] = {&DUP};

static const bb_plugin_info INFO = {
    .struct_size = sizeof(bb_plugin_info),
    .abi_major = BB_PLUGIN_ABI_MAJOR,
    .abi_minor = BB_PLUGIN_ABI_MINOR,
    .name = "dup_type",
    .version = "0",
    .types = TYPES,
    .n_types = 1,
    .value_layout = BB_PLUGIN_VALUE_LAYOUT,
};

BB_PLUGIN_EXPORT const bb_plugin_info *bb_plugin_entry(void)
{
    return &INFO;
}
