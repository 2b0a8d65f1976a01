/* bad_abi.c — test plugin built for a future ABI (major 99): the loader
 * must refuse it with a message naming the file and both versions. */
#include "bb/plugin.h"

static int bad_create(const bb_create_args *args, void **out, bb_error *err)
{
    (void)args;
    (void)err;
    *out = NULL;
    return BB_OK;
}

static void bad_destroy(void *inst)
{
    (void)inst;
}

static bb_dispatch_result bad_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                       bb_value **outputs, bb_error *err)
{
    (void)inst, (void)ctx, (void)call, (void)outputs;
    bb_error_set(err, BB_EUNSUPPORTED, "bad_abi: never dispatched");
    return BB_DISPATCH_NOW_ERR;
}

static const bb_component_type BAD = {
    .struct_size = sizeof(bb_component_type),
    .abi_major = 99,
    .abi_minor = 0,
    .type_name = "bad_abi::Future",
    .role = BB_ROLE_CODEC,
    .create = bad_create,
    .destroy = bad_destroy,
    .dispatch = bad_dispatch,
};

static const bb_component_type *const TYPES[] = {&BAD};

static const bb_plugin_info INFO = {
    .struct_size = sizeof(bb_plugin_info),
    .abi_major = 99,
    .abi_minor = 0,
    .name = "bad_abi",
    .version = "99.0",
    .types = TYPES,
    .n_types = 1,
    .value_layout = BB_PLUGIN_VALUE_LAYOUT,
};

BB_PLUGIN_EXPORT const bb_plugin_info *bb_plugin_entry(void)
{
    return &INFO;
}
