/*
 * bbc_stage.c — a user compiler stage for `bbc compile --stage` tests
 * (COMPILER.md "A custom compiler stage"): stamps
 * "example.tracing_id" = "trace-<n>" on every wire send of each partition
 * and "example.stage" = "ran" on the partition function.
 */
#include <stdio.h>
#include <string.h>

#include <bb/plugin.h>

static int stamp(void *state, bb_model *partition, bb_error *err)
{
    (void)state;
    unsigned n = 0;
    for (size_t i = 0; i < partition->functions.n; i++) {
        bb_function *f = partition->functions.v[i];
        for (size_t j = 0; j < f->nodes.n; j++) {
            bb_node *nd = f->nodes.v[j];
            if (!nd->domain || strcmp(nd->domain, "ai.bytesandbrains.wire") != 0 ||
                strncmp(nd->op_type, "Send", 4) != 0)
                continue;
            char id[32];
            snprintf(id, sizeof id, "trace-%u", n++);
            if (bb_kv_set(partition->arena, &nd->metadata, "example.tracing_id", id) != BB_OK)
                return bb_error_set(err, BB_ENOMEM, "out of memory");
        }
    }
    if (partition->functions.n &&
        bb_kv_set(partition->arena, &partition->functions.v[0]->metadata, "example.stage", "ran"))
        return bb_error_set(err, BB_ENOMEM, "out of memory");
    return BB_OK;
}

static const bb_stage STAGE = {sizeof(bb_stage), "stamp_tracing_ids", stamp, NULL};
static const bb_stage *const STAGES[] = {&STAGE};
static const bb_stage_info INFO = {sizeof(bb_stage_info), BB_PLUGIN_ABI_MAJOR, BB_PLUGIN_ABI_MINOR,
                                   STAGES, 1};

BB_PLUGIN_EXPORT const bb_stage_info *bb_stage_entry(void)
{
    return &INFO;
}
