/*
 * cpu_backend.c — the cpu::CpuBackend component type: a Backend declaring
 * the ai.onnx opset (the 51 ops of bb/opsets.h's catalog, at its version;
 * their ports and kernels are the op table of ops.c), per-op dispatch,
 * whole-graph execution (graph.c), and materialize_from_wire adopting a
 * TensorProto payload's raw_data without a copy when it is aligned.
 *
 * dispatch trusts call->op_index (the engine resolves it at install time
 * against the declared ops[]): the hot path is one array index into the
 * kernel table, the same table the graph executor uses. An If / Loop
 * dispatched per op may carry captured outer-scope values as extra trailing
 * inputs, named by node metadata BB_META_OUTER_SCOPE_PREFIX "<k>"
 * (`bbd run` stamps them): they become the subgraphs' enclosing scope.
 *
 * Config (JSON, all optional): {"threads": 1, "max_cached_graphs": 256,
 * "pool_mb": 64, "winograd": true}. Results come from a pool of recycled blocks
 * (tensor_pool.c): at most pool_mb MiB of freed results are kept.
 * threads sets the GEMMs' thread count at create (OpenBLAS and oneDNN);
 * it is process-wide, so the default of 1 keeps many engines in one
 * process from oversubscribing the CPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include <bb/meta.h>
#include <bb/opsets.h>

#include "cpu_internal.h"

#define MAX_THREADS 256
#define DEFAULT_MAX_PLANS 256
#define DEFAULT_POOL_MB 64
#define MAX_OUTER_SCOPE 4096 /* captured outer values of one per-op If/Loop */
#define N_(a) (uint32_t)(sizeof(a) / sizeof *(a))

/* ---- the instance ------------------------------------------------------------ */

static bool domain_is_onnx(const char *d)
{
    return !d || !*d || strcmp(d, "ai.onnx") == 0;
}

static int parse_config(const char *json, int *threads, size_t *max_plans, size_t *pool_mb,
                        bool *winograd, bb_error *err)
{
    *threads = 1;
    *winograd = true;
    *max_plans = DEFAULT_MAX_PLANS;
    *pool_mb = DEFAULT_POOL_MB;
    if (!json || !*json)
        return BB_OK;
    cJSON *root = cJSON_Parse(json);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return bb_error_set(err, BB_ECONFIG, CPU_NAME ": config is not a JSON object");
    }
    int rc = BB_OK;
    for (cJSON *it = root->child; it && rc == BB_OK; it = it->next) {
        const char *k = it->string ? it->string : "";
        if (strcmp(k, "threads") == 0) {
            if (!cJSON_IsNumber(it) || it->valuedouble < 1 || it->valuedouble > MAX_THREADS ||
                it->valuedouble != (double)(int)it->valuedouble)
                rc = bb_error_set(err, BB_ECONFIG, CPU_NAME ": config threads must be an "
                                  "integer in 1..%d", MAX_THREADS);
            else
                *threads = (int)it->valuedouble;
        } else if (strcmp(k, "max_cached_graphs") == 0) {
            if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble > 1e6 ||
                it->valuedouble != (double)(long)it->valuedouble)
                rc = bb_error_set(err, BB_ECONFIG, CPU_NAME ": config max_cached_graphs must "
                                  "be an integer in 0..1000000");
            else
                *max_plans = (size_t)it->valuedouble;
        } else if (strcmp(k, "winograd") == 0) {
            if (!cJSON_IsBool(it))
                rc = bb_error_set(err, BB_ECONFIG, CPU_NAME ": config winograd must be true or "
                                  "false");
            else
                *winograd = cJSON_IsTrue(it);
        } else if (strcmp(k, "pool_mb") == 0) {
            if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble > 1 << 20 ||
                it->valuedouble != (double)(long)it->valuedouble)
                rc = bb_error_set(err, BB_ECONFIG, CPU_NAME ": config pool_mb must be an "
                                  "integer in 0..1048576");
            else
                *pool_mb = (size_t)it->valuedouble;
        } else {
            rc = bb_error_set(err, BB_ECONFIG, CPU_NAME ": unknown config key \"%s\"", k);
        }
    }
    cJSON_Delete(root);
    return rc;
}

static int cpu_create(const bb_create_args *args, void **out, bb_error *err)
{
    int threads;
    size_t max_plans, pool_mb;
    bool winograd;
    int rc = parse_config(args ? args->config_json : NULL, &threads, &max_plans, &pool_mb,
                          &winograd, err);
    if (rc)
        return rc;
    cpu_backend *be = calloc(1, sizeof *be);
    if (!be)
        return bb_error_set(err, BB_ENOMEM, CPU_NAME ": out of memory");
    be->threads = threads;
    be->winograd = winograd;
    be->plans = cpu_plan_cache_new(max_plans);
    be->pool = pool_mb ? cpu_tensor_pool_new(pool_mb << 20) : NULL;
    if (!be->plans || (pool_mb && !be->pool)) {
        cpu_plan_cache_free(be->plans);
        free(be);
        return bb_error_set(err, BB_ENOMEM, CPU_NAME ": out of memory");
    }
    cpu_gemm_set_threads(threads);
    *out = be;
    return BB_OK;
}

static void cpu_destroy(void *inst)
{
    cpu_backend *be = inst;
    if (!be)
        return;
    cpu_plan_cache_free(be->plans);
    cpu_dnn_ctx_release(be->dnn);
    cpu_tensor_pool_release(be->pool);
    free(be->scratch);
    free(be);
}

/* A per-op If/Loop's outer scope: the trailing inputs named by the node's
 * BB_META_OUTER_SCOPE_PREFIX "<k>" metadata (k = 0, 1, ...). *names is
 * malloc'd (NULL when there are none). */
static int outer_scope(cpu_run *r, const bb_dispatch_call *call, const char ***names,
                       cpu_frame *f)
{
    *names = NULL;
    const bb_kv_list *md = call->node ? &call->node->metadata : NULL;
    uint32_t n = 0;
    char key[sizeof BB_META_OUTER_SCOPE_PREFIX + 12];
    for (; md && n < MAX_OUTER_SCOPE; n++) {
        snprintf(key, sizeof key, "%s%u", BB_META_OUTER_SCOPE_PREFIX, n);
        if (!bb_kv_get(md, key))
            break;
    }
    if (n == 0)
        return BB_OK;
    if (n == MAX_OUTER_SCOPE || n > call->n_inputs)
        return cpu_fail(r, BB_EINVAL, "%u outer-scope names for %u inputs (at most %d)", n,
                        call->n_inputs, MAX_OUTER_SCOPE - 1);
    *names = malloc(n * sizeof **names);
    if (!*names)
        return cpu_fail(r, BB_ENOMEM, "out of memory");
    for (uint32_t k = 0; k < n; k++) {
        snprintf(key, sizeof key, "%s%u", BB_META_OUTER_SCOPE_PREFIX, k);
        (*names)[k] = bb_kv_get(md, key);
    }
    *f = (cpu_frame){.vals = call->inputs + (call->n_inputs - n), .names = *names, .n_names = n};
    return BB_OK;
}

static bb_dispatch_result cpu_dispatch(void *inst, bb_ctx *ctx, const bb_dispatch_call *call,
                                       bb_value **outputs, bb_error *err)
{
    (void)ctx;
    cpu_run r = {.be = inst, .node = call->node, .err = err};
    int op = -1;
    if (call->op_index < CPU_N_OPS) {
        const char *want = cpu_op_decls[call->op_index].op_type;
        if (!call->op_type || call->op_type == want || strcmp(call->op_type, want) == 0)
            op = (int)call->op_index;
    }
    if (op < 0)
        op = cpu_op_lookup(call->op_type);
    if (op < 0 || !domain_is_onnx(call->domain)) {
        bb_error_set(err, BB_EUNSUPPORTED, CPU_NAME ": op %s::%s not supported",
                     call->domain && *call->domain ? call->domain : "ai.onnx",
                     call->op_type ? call->op_type : "?");
        return BB_DISPATCH_NOW_ERR;
    }
    r.op = (cpu_op)op;
    uint32_t n_in = call->n_inputs;
    const char **names = NULL;
    cpu_frame captured = {0};
    if (r.op == CPU_OP_If || r.op == CPU_OP_Loop) {
        int rc = outer_scope(&r, call, &names, &captured);
        if (rc)
            return BB_DISPATCH_NOW_ERR;
        n_in -= captured.n_names;
        if (captured.n_names)
            r.scope = &captured;
    }
    int rc = cpu_run_kernel(&r, call->inputs, n_in, outputs, call->n_outputs);
    free(names);
    return rc == BB_OK ? BB_DISPATCH_NOW_OK : BB_DISPATCH_NOW_ERR;
}

static int cpu_materialize(void *inst, uint64_t type_hash, bb_buffer *payload, bb_value **out,
                           bb_error *err)
{
    (void)inst;
    const bb_type_node *t = bb_type_by_wire_hash(type_hash);
    if (!t || !bb_type_is_a(t, &BB_TYPE_TENSOR))
        return bb_error_set(err, BB_ETYPE, CPU_NAME ": materialize_from_wire: type hash "
                            "0x%016llx is not a tensor type", (unsigned long long)type_hash);
    if (!payload)
        return bb_error_set(err, BB_EINVAL, CPU_NAME ": materialize_from_wire: no payload");
    int rc = bb_value_decode_buf(type_hash, payload, NULL, out, err);
    if (rc)
        bb_error_prefix(err, CPU_NAME ": materialize_from_wire");
    return rc;
}

/* ---- declarations ------------------------------------------------------------ */

/* The catalog's ai.onnx version (bb/opsets.h): the op signatures follow it. */
static const bb_opset_decl OPSETS[] = {{"ai.onnx", BB_ONNX_OPSET_VERSION, cpu_op_decls, CPU_N_OPS}};

static const bb_config_decl CONFIG[] = {
    {"threads", "int", "1", "GEMM threads (OpenBLAS and oneDNN; a process-wide setting)"},
    {"max_cached_graphs", "int", "256",
     "graph plans kept per instance (keyed by graph pointer); 0 disables the cache"},
    {"winograd", "bool", "true",
     "graph plans may run 3x3 stride-1 convolutions by Winograd's algorithm (oneDNN; equal to "
     "the direct convolution up to rounding); false: direct only"},
    {"pool_mb", "int", "64",
     "MiB of freed result memory kept for reuse (results of the same sizes recur every run); "
     "0: every result from malloc"},
};

static const bb_component_type CPU_BACKEND = {
    .struct_size = sizeof(bb_component_type),
    .abi_major = BB_PLUGIN_ABI_MAJOR,
    .abi_minor = BB_PLUGIN_ABI_MINOR,
    .type_name = CPU_NAME,
    .role = BB_ROLE_BACKEND,
    .doc = "CPU tensor backend: the ai.onnx subset in plain C and OpenBLAS",
    .opsets = OPSETS,
    .n_opsets = 1,
    .config = CONFIG,
    .n_config = N_(CONFIG),
    .create = cpu_create,
    .destroy = cpu_destroy,
    .dispatch = cpu_dispatch,
    .materialize_from_wire = cpu_materialize,
    .execute_graph = cpu_execute_graph,
};

static const bb_component_type *const TYPES[] = {&CPU_BACKEND};

static const bb_plugin_info INFO = {
    .struct_size = sizeof(bb_plugin_info),
    .abi_major = BB_PLUGIN_ABI_MAJOR,
    .abi_minor = BB_PLUGIN_ABI_MINOR,
    .name = "cpu",
    .version = "1.0",
    .types = TYPES,
    .n_types = 1,
    .value_layout = BB_PLUGIN_VALUE_LAYOUT,
};

BB_PLUGIN_EXPORT const bb_plugin_info *bb_plugin_entry(void)
{
    return &INFO;
}
