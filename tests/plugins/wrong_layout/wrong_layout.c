/* wrong_layout.c — test plugin built against a bb/value.h whose lists keep
 * 9 items inline instead of 10 (build.mk makes that copy of the header), as
 * a plugin built from another release's headers would be. Its ABI version
 * and struct sizes are right; only BB_PLUGIN_VALUE_LAYOUT differs, and the
 * loader must refuse it naming the file and both signatures. */
#include "plugins/common/plugin_type.h"

_Static_assert(BB_VALUE_LIST_INLINE == 9, "built against build.mk's copy of bb/value.h");

static int wl_create(const bb_create_args *args, void **out, bb_error *err)
{
    (void)args, (void)err;
    *out = NULL;
    return BB_OK;
}

static void wl_destroy(void *inst)
{
    (void)inst;
}

static bb_dispatch_result wl_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                      bb_value **outputs, bb_error *err)
{
    (void)inst, (void)ctx, (void)call, (void)outputs;
    bb_error_set(err, BB_EUNSUPPORTED, "wrong_layout: never dispatched");
    return BB_DISPATCH_NOW_ERR;
}

static const bb_component_type WL = {
    BBP_TYPE_ABI,
    .type_name = "wrong_layout::Codec",
    .role = BB_ROLE_CODEC,
    .create = wl_create,
    .destroy = wl_destroy,
    .dispatch = wl_dispatch,
};

static const bb_component_type *const TYPES[] = {&WL};

BBP_PLUGIN_ENTRY("wrong_layout", TYPES)
