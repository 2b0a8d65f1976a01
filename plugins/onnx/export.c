/*
 * export.c — nn::Onnx's trained model as a plain ONNX inference model: the
 * construction graph as it came (nodes, inputs, outputs, value_info), its
 * parameter and buffer initializers replaced by the current flat vector,
 * IR version 8 importing ai.onnx at the configured opset — what ONNX tools
 * of that generation open and check (python3-onnx's checker in the tests).
 */
#include <stdlib.h>
#include <string.h>

#include <bb/model_io.h>

#include "onnx_model.h"

#define EXPORT_IR_VERSION 8

int onnx_export(const ad_plan *plan, const float *params, int64_t opset, uint8_t **out,
                size_t *len, bb_error *err)
{
    bb_model *m = bb_model_new();
    if (!m)
        return bb_error_set(err, BB_ENOMEM, "%s: ExportOnnx: out of memory", plan->who);
    m->ir_version = EXPORT_IR_VERSION;
    m->producer_name = bb_model_str(m, "bytesandbrains");
    m->producer_version = bb_model_str(m, "nn::Onnx");
    m->graph = bb_graph_clone(m->arena, plan->graph);
    bool ok = m->producer_name && m->producer_version && m->graph &&
              bb_opset_list_add(m->arena, &m->opset_imports, "", opset) == BB_OK;
    for (size_t i = 0; ok && i < m->graph->initializers.n; i++) {
        bb_tensor_proto *t = m->graph->initializers.v[i];
        int32_t k = ad_plan_find_param(plan, t->name);
        if (k < 0)
            continue;
        const ad_param *pa = &plan->params[k];
        t->raw_data.data = bb_arena_memdup(m->arena, params + pa->offset,
                                           pa->numel * sizeof(float));
        t->raw_data.len = pa->numel * sizeof(float);
        ok = t->raw_data.data != NULL || pa->numel == 0;
    }
    int rc = ok ? bb_model_save_mem(m, out, len, err)
                : bb_error_set(err, BB_ENOMEM, "%s: ExportOnnx: out of memory", plan->who);
    bb_model_free(m);
    return rc;
}
