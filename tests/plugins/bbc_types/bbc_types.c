/*
 * bbc_types.c — component types and a user stage for the compiler's bad-model
 * tests (testdata/bad/compile, tests/unit/test_compile_bad.c), named
 * bbctest::* so they never collide with a real plugin:
 *
 *   bbctest::Dependent  a Model that declares only Params and depends on a
 *                       Backend at slot "backend" (UnboundDependency when that
 *                       slot is missing, RoleMethodFailed for any other
 *                       role.model op recorded on it)
 *   stage "refuse_on_purpose"  fails on every partition (StageFailed)
 *
 * The types are never instantiated by these tests; create/dispatch exist
 * because the ABI requires them.
 */
#include "bb/plugin.h"

static int dependent_create(const bb_create_args *args, void **out, bb_error *err)
{
    (void)args;
    (void)err;
    *out = NULL;
    return BB_OK;
}

static void dependent_destroy(void *inst)
{
    (void)inst;
}

static bb_dispatch_result dependent_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                             bb_value **outputs, bb_error *err)
{
    (void)inst, (void)ctx, (void)outputs;
    bb_error_set(err, BB_EUNSUPPORTED, "bbctest::Dependent does not run (%s)", call->op_type);
    return BB_DISPATCH_NOW_ERR;
}

static const bb_port_decl PARAMS_OUT[] = {{.name = "params", .type = &BB_TYPE_TENSOR_F32}};
static const bb_op_decl DEPENDENT_OPS[] = {
    {.op_type = "Params", .outputs = PARAMS_OUT, .n_outputs = 1, .doc = "the parameters"},
};
static const bb_opset_decl DEPENDENT_OPSETS[] = {
    {.domain = "ai.bytesandbrains.role.model", .version = 1, .ops = DEPENDENT_OPS, .n_ops = 1},
};
static const bb_dependency_decl DEPENDENT_DEPS[] = {{.role = BB_ROLE_BACKEND, .slot = "backend"}};

static const bb_component_type DEPENDENT = {
    .struct_size = sizeof(bb_component_type),
    .abi_major = BB_PLUGIN_ABI_MAJOR,
    .abi_minor = BB_PLUGIN_ABI_MINOR,
    .type_name = "bbctest::Dependent",
    .role = BB_ROLE_MODEL,
    .doc = "a model that only has Params and needs a Backend at slot \"backend\"",
    .opsets = DEPENDENT_OPSETS,
    .n_opsets = 1,
    .deps = DEPENDENT_DEPS,
    .n_deps = 1,
    .create = dependent_create,
    .destroy = dependent_destroy,
    .dispatch = dependent_dispatch,
};

static const bb_component_type *const TYPES[] = {&DEPENDENT};

static const bb_plugin_info INFO = {
    .struct_size = sizeof(bb_plugin_info),
    .abi_major = BB_PLUGIN_ABI_MAJOR,
    .abi_minor = BB_PLUGIN_ABI_MINOR,
    .name = "bbc_types",
    .version = "1.0",
    .types = TYPES,
    .n_types = 1,
    .value_layout = BB_PLUGIN_VALUE_LAYOUT,
};

BB_PLUGIN_EXPORT const bb_plugin_info *bb_plugin_entry(void)
{
    return &INFO;
}

static int refuse(void *state, bb_model *partition, bb_error *err)
{
    (void)state;
    const char *fn = partition->functions.n ? partition->functions.v[0]->name : "?";
    return bb_error_set(err, BB_EINVAL, "refusing partition '%s' on purpose", fn);
}

static const bb_stage REFUSE = {sizeof(bb_stage), "refuse_on_purpose", refuse, NULL};
static const bb_stage *const STAGES[] = {&REFUSE};
static const bb_stage_info STAGE_INFO = {sizeof(bb_stage_info), BB_PLUGIN_ABI_MAJOR,
                                         BB_PLUGIN_ABI_MINOR, STAGES, 1};

BB_PLUGIN_EXPORT const bb_stage_info *bb_stage_entry(void)
{
    return &STAGE_INFO;
}
