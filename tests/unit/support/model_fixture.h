/*
 * model_fixture.h — test helper: an in-memory model that sets every field
 * of the IR (bb/ir.h), for round-trip and schema tests.
 */
#ifndef BB_TEST_MODEL_FIXTURE_H
#define BB_TEST_MODEL_FIXTURE_H

#include "bb/ir.h"

/* Returns new (free with bb_model_free), or NULL on out-of-memory. Uses
 * every IR field: model/graph/node/function/value/tensor metadata,
 * functions with attribute_protos and value_info, every attribute kind
 * (nested graphs three levels deep), tensors of several dtypes, opaque /
 * sequence / map / optional / sparse types and the verbatim sub-messages
 * (training_info, configuration, device_configurations, sparse tensors,
 * quantization annotations). */
bb_model *bb_test_model_full(void);

#endif
