/* clash.h — the body of the clash_a and clash_b test plugins. Both export a
 * default-visibility function of the same name, bb_test_clash_value, and
 * call it from create (through the PLT: -fPIC keeps it interposable), so
 * create's instance tells which definition the call bound to. Loaded with
 * RTLD_LOCAL each plugin binds to its own; loaded RTLD_GLOBAL the second
 * binds to the first's. Define CLASH_VALUE, CLASH_TYPE and CLASH_NAME first. */
#include <stdint.h>

#include "bb/plugin.h"

BB_PLUGIN_EXPORT __attribute__((noinline)) int bb_test_clash_value(void)
{
    return CLASH_VALUE;
}

static int clash_create(const bb_create_args *args, void **out, bb_error *err)
{
    (void)args, (void)err;
    *out = (void *)(intptr_t)bb_test_clash_value();
    return BB_OK;
}

static void clash_destroy(void *inst)
{
    (void)inst;
}

static bb_dispatch_result clash_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                         bb_value **outputs, bb_error *err)
{
    (void)inst, (void)ctx, (void)call, (void)outputs;
    bb_error_set(err, BB_EUNSUPPORTED, CLASH_TYPE ": never dispatched");
    return BB_DISPATCH_NOW_ERR;
}

static const bb_component_type CLASH = {
    .struct_size = sizeof(bb_component_type),
    .abi_major = BB_PLUGIN_ABI_MAJOR,
    .abi_minor = BB_PLUGIN_ABI_MINOR,
    .type_name = CLASH_TYPE,
    .role = BB_ROLE_CODEC,
    .create = clash_create,
    .destroy = clash_destroy,
    .dispatch = clash_dispatch,
};

static const bb_component_type *const TYPES[] = {&CLASH};

static const bb_plugin_info INFO = {
    .struct_size = sizeof(bb_plugin_info),
    .abi_major = BB_PLUGIN_ABI_MAJOR,
    .abi_minor = BB_PLUGIN_ABI_MINOR,
    .name = CLASH_NAME,
    .version = "0",
    .types = TYPES,
    .n_types = 1,
    .value_layout = BB_PLUGIN_VALUE_LAYOUT,
};

BB_PLUGIN_EXPORT const bb_plugin_info *bb_plugin_entry(void)
{
    return &INFO;
}
