/*
 * onnx_driver.c — see onnx_driver.h.
 */
#include "bench/support/onnx_driver.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Noreturn void drv_fail(const char *what, const char *msg)
{
    fprintf(stderr, "%s: error: %s: %s\n", program_invocation_short_name, what, msg);
    exit(1);
}

bb_plugin_loader *drv_plugins(void)
{
    char dir[PATH_MAX - 64], path[PATH_MAX];
    const char *env = getenv("BB_BUILD");
    ssize_t n;
    if (env && *env) {
        snprintf(dir, sizeof dir, "%s", env);
    } else if ((n = readlink("/proc/self/exe", dir, sizeof dir - 1)) > 0) {
        dir[n] = '\0';
        for (int i = 0; i < 2; i++) { /* <build>/bench/prog -> <build> */
            char *s = strrchr(dir, '/');
            if (s)
                *s = '\0';
        }
    } else {
        snprintf(dir, sizeof dir, "build");
    }
    snprintf(path, sizeof path, "%s/lib/bytesandbrains/plugins", dir);
    bb_plugin_loader *l = NULL;
    bb_error err = {0};
    if (bb_plugin_loader_create(BB_PLUGIN_LOADER_ONLY_EXPLICIT, &l, &err) ||
        bb_plugin_loader_add_dirs(l, path, &err) || bb_plugin_loader_scan(l, &err))
        drv_fail("plugins", err.msg);
    return l;
}

drv_comp drv_create(bb_plugin_loader *l, const char *type_name, const bb_graph *g,
                    const char *config)
{
    const bb_loaded_type *lt = bb_plugin_loader_find(l, type_name);
    if (!lt)
        drv_fail(type_name, "not found in the plugin directory");
    drv_comp c = {lt->type, NULL};
    bb_attr at = {.name = "model", .type = BB_ATTR_STRING, .has_s = true, .g = (bb_graph *)g};
    at.s.data = (uint8_t *)(uintptr_t)config;
    at.s.len = strlen(config);
    bb_create_args a = {.struct_size = sizeof a, .slot = "model", .seed = 1,
                        .construction = g ? &at : NULL, .config_json = g ? NULL : config};
    bb_error err = {0};
    if (c.t->create(&a, &c.inst, &err))
        drv_fail(type_name, err.msg);
    return c;
}

void drv_destroy(drv_comp *c)
{
    c->t->destroy(c->inst);
    c->inst = NULL;
}

void drv_call(drv_comp *c, const char *op, bb_value **in, uint32_t n_in, bb_value **out,
              uint32_t n_out)
{
    uint32_t idx = 0;
    const char *domain = NULL;
    for (uint32_t s = 0; s < c->t->n_opsets && !domain; s++)
        if (bb_component_type_find_op(c->t, c->t->opsets[s].domain, op, &idx))
            domain = c->t->opsets[s].domain;
    bb_dispatch_call call = {.domain = domain, .op_type = op, .op_index = idx, .inputs = in,
                             .n_inputs = n_in, .n_outputs = n_out};
    bb_error err = {0};
    if (!domain || c->t->dispatch(c->inst, NULL, &call, out, &err) != BB_DISPATCH_NOW_OK)
        drv_fail(op, domain ? err.msg : "no such op");
}

double drv_train_step(drv_comp *m, bb_value *x, const int32_t *labels, int64_t rows)
{
    bb_value *logits = NULL, *cmd = NULL;
    drv_call(m, "Forward", &x, 1, &logits, 1);
    int64_t k = (int64_t)bb_tensor_numel(logits) / rows;
    bb_value *dl = bb_value_tensor_new(BB_DT_FLOAT, 2, (int64_t[]){rows, k});
    if (!dl)
        drv_fail("train step", "out of memory");
    const float *y = bb_tensor_f32(logits);
    float *g = bb_tensor_f32(dl);
    double loss = 0;
    for (int64_t r = 0; r < rows; r++) {
        float mx = y[r * k];
        double sum = 0;
        for (int64_t j = 1; j < k; j++)
            mx = y[r * k + j] > mx ? y[r * k + j] : mx;
        for (int64_t j = 0; j < k; j++)
            sum += (g[r * k + j] = expf(y[r * k + j] - mx));
        loss += log(sum) - (y[r * k + labels[r]] - mx);
        for (int64_t j = 0; j < k; j++)
            g[r * k + j] = (float)((g[r * k + j] / sum - (j == labels[r])) / (double)rows);
    }
    drv_call(m, "Backward", &dl, 1, &cmd, 1);
    bb_value_unref(cmd);
    bb_value *empty = bb_value_tensor_new(BB_DT_FLOAT, 1, (int64_t[]){0});
    drv_call(m, "Step", &empty, 1, &cmd, 1);
    bb_value_unref(cmd);
    bb_value_unref(empty);
    bb_value_unref(dl);
    bb_value_unref(logits);
    return loss / (double)rows;
}
