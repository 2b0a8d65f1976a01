/* create_fails.c — test plugin whose create always fails with BB_ECONFIG
 * and a message naming the config key: callers must surface that error. */
#include "bb/plugin.h"

static int fail_create(const bb_create_args *args, void **out, bb_error *err)
{
    (void)out;
    return bb_error_set(err, BB_ECONFIG, "config key 'rate' of slot '%s' must be positive",
                        args && args->slot ? args->slot : "?");
}

static void fail_destroy(void *inst)
{
    (void)inst;
}

static bb_dispatch_result fail_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                        bb_value **outputs, bb_error *err)
{
    (void)inst, (void)ctx, (void)call, (void)outputs;
    bb_error_set(err, BB_EUNSUPPORTED, "create_fails: never dispatched");
    return BB_DISPATCH_NOW_ERR;
}

static const bb_config_decl CONFIG[] = {
    {.key = "rate", .type = "float", .default_json = NULL, .doc = "must be positive"},
};

static const bb_component_type FAILS = {
    .struct_size = sizeof(bb_component_type),
    .abi_major = BB_PLUGIN_ABI_MAJOR,
    .abi_minor = BB_PLUGIN_ABI_MINOR,
    .type_name = "test::CreateFails",
    .role = BB_ROLE_MODEL,
    .config = CONFIG,
    .n_config = 1,
    .create = fail_create,
    .destroy = fail_destroy,
    .dispatch = fail_dispatch,
};

static const bb_component_type *const TYPES[] = {&FAILS};

static const bb_plugin_info INFO = {
    .struct_size = sizeof(bb_plugin_info),
    .abi_major = BB_PLUGIN_ABI_MAJOR,
    .abi_minor = BB_PLUGIN_ABI_MINOR,
    .name = "create_fails",
    .version = "0",
    .types = TYPES,
    .n_types = 1,
    .value_layout = BB_PLUGIN_VALUE_LAYOUT,
};

BB_PLUGIN_EXPORT const bb_plugin_info *bb_plugin_entry(void)
{
    return &INFO;
}
