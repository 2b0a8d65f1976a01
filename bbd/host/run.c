/*
 * run.c — the `bbd run` command line:
 *
 *   bbd run MODEL.onnx [--bind SLOT=TYPE]... [--bindings FILE.json]...
 *           [--plugin-path DIR]... [--target NAME] [--timeout-ms N]
 *           NAME=FILE.pb ... [-o DIR]
 *   bbd run --test-dir DIR [same options, no inputs, no -o]
 *
 * The model is compiled in memory (libbbc), the target installed in an
 * in-process engine with the plugin types the registry finds, invoked once
 * with the given TensorProto files, and each output printed as one line
 * "name: dtype [shape]" (and written as DIR/<name>.pb with -o). A plain ONNX
 * model becomes a one-module program first (run_module.c) whose Backend
 * slot defaults to cpu::CpuBackend. --test-dir runs every
 * test_data_set_N of an ONNX backend test directory and compares each
 * output within rtol 1e-3 / atol 1e-5.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bb/artifact.h"
#include "bb/meta.h"
#include "bb/model_io.h"
#include "bbc/compiler.h"
#include "bbd/host/run.h"
#include "bbd/host/run_internal.h"

#define MAX_LIST 256
#define MAX_DATA_TENSORS 1024
#define TEST_RTOL 1e-3
#define TEST_ATOL 1e-5
#define DEFAULT_TIMEOUT_MS 60000

static const char USAGE[] =
    "usage: bbd run MODEL.onnx [--bind SLOT=TYPE]... [--bindings FILE.json]...\n"
    "               [--plugin-path DIR]... [--target NAME] [--timeout-ms N]\n"
    "               NAME=FILE.pb ... [-o DIR]\n"
    "       bbd run --test-dir DIR [--bind SLOT=TYPE]... [--plugin-path DIR]...\n"
    "               [--target NAME] [--timeout-ms N]\n";

typedef struct run_opts {
    const char *model, *test_dir, *out_dir, *target;
    uint64_t timeout_ms;
    const char *binds[MAX_LIST], *bindings_files[MAX_LIST], *dirs[MAX_LIST], *inputs[MAX_LIST];
    size_t n_binds, n_bindings_files, n_dirs, n_inputs;
} run_opts;

/* A compiled program ready to run. */
typedef struct program {
    bb_model *compiled;
    const char *target;     /* borrowed from compiled */
    const bb_function *fn;  /* the target's function, in compiled */
    bb_str_list declared;   /* the inputs the model declares, in order (in compiled's arena);
                             * the compiler drops those no node reads from the target */
} program;

static int usage_error(const char *fmt, const char *arg)
{
    fputs("bbd: error: run: ", stderr);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", USAGE);
    return 2;
}

static int fail(const bb_error *err)
{
    fprintf(stderr, "bbd: error: %s\n", err->msg[0] ? err->msg : bb_status_str(err->code));
    return 1;
}

static bool parse_ms(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v == 0 || v > 86400000ull)
        return false;
    *out = v;
    return true;
}

/* Returns -1 when parsed, else the exit status (usage error or --help). */
static int parse_args(int argc, char **argv, run_opts *o)
{
    memset(o, 0, sizeof *o);
    o->timeout_ms = DEFAULT_TIMEOUT_MS;
    bool no_more = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (no_more || a[0] != '-' || !a[1]) {
            if (strchr(a, '=')) {
                if (o->n_inputs == MAX_LIST)
                    return usage_error("more than 256 inputs ('%s')", a);
                o->inputs[o->n_inputs++] = a;
            } else if (o->model) {
                return usage_error("more than one model given ('%s')", a);
            } else {
                o->model = a;
            }
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(USAGE, stdout);
            return 0;
        }
        if (!strcmp(a, "--")) {
            no_more = true;
            continue;
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            return usage_error("option '%s' needs a value", a);
        i++;
        if (!strcmp(a, "-o") || !strcmp(a, "--output-dir")) {
            o->out_dir = v;
        } else if (!strcmp(a, "--test-dir")) {
            o->test_dir = v;
        } else if (!strcmp(a, "--target")) {
            o->target = v;
        } else if (!strcmp(a, "--timeout-ms")) {
            if (!parse_ms(v, &o->timeout_ms))
                return usage_error("--timeout-ms '%s': expected milliseconds (1..86400000)", v);
        } else if (!strcmp(a, "--bind") && o->n_binds < MAX_LIST) {
            o->binds[o->n_binds++] = v;
        } else if (!strcmp(a, "--bindings") && o->n_bindings_files < MAX_LIST) {
            o->bindings_files[o->n_bindings_files++] = v;
        } else if (!strcmp(a, "--plugin-path") && o->n_dirs < MAX_LIST) {
            o->dirs[o->n_dirs++] = v;
        } else {
            return usage_error("unknown option '%s' (or too many repeats)", a);
        }
    }
    if (o->test_dir) {
        if (o->model)
            return usage_error("--test-dir reads DIR/model.onnx: give no MODEL ('%s')", o->model);
        if (o->n_inputs)
            return usage_error("--test-dir reads its inputs from the data sets ('%s')",
                               o->inputs[0]);
        if (o->out_dir)
            return usage_error("%s", "--test-dir writes no outputs: -o is not allowed");
    } else if (!o->model) {
        return usage_error("%s", "no model given (MODEL.onnx or --test-dir DIR)");
    }
    return -1;
}

/* ---- load, bind, compile ------------------------------------------------------------ */

static int load_bindings(const run_opts *o, bool plain, bbc_bindings *b, bb_error *err)
{
    int rc = bbc_bindings_init(b);
    if (rc)
        return bb_error_set(err, rc, "out of memory");
    for (size_t i = 0; rc == BB_OK && i < o->n_bindings_files; i++)
        rc = bbc_bindings_load_file(b, o->bindings_files[i], err);
    for (size_t i = 0; rc == BB_OK && i < o->n_binds; i++)
        rc = bbc_bindings_add_arg(b, o->binds[i], err);
    /* A plain ONNX model's ai.onnx ops run on the CPU backend by default. */
    if (rc == BB_OK && plain && !bbc_bindings_find(b, BBD_RUN_BACKEND_SLOT))
        rc = bbc_bindings_add(b, BBD_RUN_BACKEND_SLOT, BBD_RUN_DEFAULT_BACKEND, NULL,
                              "bbd run default", err);
    return rc;
}

static bool target_reads(const program *p, const char *name)
{
    return bb_str_list_find(&p->fn->inputs, name) >= 0;
}

/* Pick the target to run (the one asked for, else the only one) and note
 * the inputs the model declares: its top-level graph's (a plain model's
 * after conversion, a recorded program's root formals), else the target's. */
static int pick_target(program *p, const char *want, const bb_graph *top, bb_error *err)
{
    int rc = bbd_run_pick_target(p->compiled, want, &p->fn, err);
    if (rc)
        return rc;
    p->target = p->fn->name;
    bb_arena *a = p->compiled->arena;
    if (top && top->inputs.n) {
        for (size_t i = 0; i < top->inputs.n; i++)
            if (top->inputs.v[i] && top->inputs.v[i]->name &&
                bb_str_list_push(a, &p->declared, top->inputs.v[i]->name))
                return bb_error_set(err, BB_ENOMEM, "out of memory");
        return BB_OK;
    }
    for (size_t i = 0; i < p->fn->inputs.n; i++)
        if (bb_str_list_push(a, &p->declared, p->fn->inputs.v[i]))
            return bb_error_set(err, BB_ENOMEM, "out of memory");
    return BB_OK;
}

static int compile_program(const run_opts *o, const bbd_registry *reg, const char *path,
                           program *p, bb_error *err)
{
    *p = (program){0};
    bb_model *m = NULL;
    int rc = bb_model_load_file(path, &m, err);
    if (rc)
        return rc;
    bool plain = bbd_run_is_plain_onnx(m);
    if (bb_artifact_is_compiled(m) && !o->n_binds && !o->n_bindings_files) {
        /* Compiled: its bindings are stamped; run it as it is. */
        p->compiled = m;
        rc = pick_target(p, o->target, NULL, err);
        if (rc) {
            bb_model_free(m);
            p->compiled = NULL;
        }
        return rc;
    }
    if (plain) {
        bb_model *mod = NULL;
        rc = bbd_run_module_from_onnx(m, path, &mod, err);
        bb_model_free(m);
        if (rc)
            return rc;
        m = mod;
    }
    bbc_bindings b;
    rc = load_bindings(o, plain, &b, err);
    if (rc == BB_OK) {
        bbc_options opts;
        bbc_options_init(&opts);
        /* ONNX graphs rarely type their intermediates (value_info is
         * optional): leave what the catalogs cannot narrow at ANY. */
        opts.permissive_types = plain;
        bbc_error cerr;
        if (bbc_compile(m, &opts, &b, bbd_registry_types(reg), NULL, 0, &p->compiled,
                        &cerr) != BB_OK)
            rc = bb_error_set(err, BB_ECOMPILE, "%s: compile: %s: %s: %s", path, cerr.pass,
                              bbc_errkind_name(cerr.kind), cerr.msg);
    }
    bbc_bindings_free(&b);
    if (rc == BB_OK)
        rc = pick_target(p, o->target, m->graph, err);
    bb_model_free(m);
    if (rc == BB_OK)
        return BB_OK;
    bb_model_free(p->compiled);
    p->compiled = NULL;
    return rc;
}

/* ---- one run with NAME=FILE.pb inputs ------------------------------------------------- */

/* An output name must be usable as a file name inside DIR. */
static bool safe_file_name(const char *s)
{
    return s[0] && s[0] != '.' && !strchr(s, '/') && strlen(s) < 200;
}

static int write_outputs(const char *dir, const bbd_run_result *res, bb_error *err)
{
    for (size_t i = 0; i < res->n; i++) /* all names first: nothing half-written */
        if (!safe_file_name(res->v[i].name))
            return bb_error_set(err, BB_EINVAL, "output '%s' cannot be written as a file name in "
                                "%s", res->v[i].name, dir);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return bb_error_set(err, BB_EIO, "%s: %s", dir, strerror(errno));
    for (size_t i = 0; i < res->n; i++) {
        const bbd_run_output *out = &res->v[i];
        size_t len = strlen(dir) + strlen(out->name) + 8;
        char *path = malloc(len);
        if (!path)
            return bb_error_set(err, BB_ENOMEM, "out of memory");
        snprintf(path, len, "%s/%s.pb", dir, out->name);
        int rc = bbd_run_tensor_write(path, out->name, out->value, err);
        free(path);
        if (rc)
            return rc;
    }
    return BB_OK;
}

static int run_model(const run_opts *o, const bbd_registry *reg)
{
    bb_error err = {0};
    program p;
    if (compile_program(o, reg, o->model, &p, &err))
        return fail(&err);
    bbd_run_input in[MAX_LIST];
    size_t n_in = 0;
    int status = 1, rc = BB_OK;
    for (size_t i = 0; i < o->n_inputs && rc == BB_OK; i++) {
        const char *arg = o->inputs[i], *eq = strchr(arg, '=');
        if (eq == arg || !eq[1]) {
            rc = bb_error_set(&err, BB_EINVAL, "input '%s': expected NAME=FILE.pb", arg);
            break;
        }
        char *name = strndup(arg, (size_t)(eq - arg));
        if (!name) {
            rc = bb_error_set(&err, BB_ENOMEM, "out of memory");
            break;
        }
        for (size_t k = 0; k < n_in && rc == BB_OK; k++)
            if (strcmp(in[k].name, name) == 0)
                rc = bb_error_set(&err, BB_EINVAL, "input '%s' given twice", name);
        if (rc == BB_OK && !target_reads(&p, name) && bb_str_list_find(&p.declared, name) >= 0) {
            free(name); /* declared, but no node reads it: compiled away */
            continue;
        }
        in[n_in] = (bbd_run_input){.name = name};
        if (rc == BB_OK && (rc = bbd_run_tensor_read(eq + 1, &in[n_in].value, NULL, &err)))
            bb_error_prefix(&err, "input '%s'", name);
        n_in++;
    }
    bbd_run_result res = {0};
    if (rc == BB_OK)
        rc = bbd_run_once(reg, p.compiled, p.target, in, n_in, o->timeout_ms, &res, &err);
    if (rc == BB_OK && o->out_dir)
        rc = write_outputs(o->out_dir, &res, &err);
    if (rc == BB_OK) {
        for (size_t i = 0; i < res.n; i++) {
            char line[512];
            puts(bbd_run_summary(res.v[i].name, res.v[i].value, line, sizeof line));
        }
        status = 0;
    } else {
        fail(&err);
    }
    bbd_run_result_free(&res);
    for (size_t i = 0; i < n_in; i++) {
        free((char *)in[i].name);
        bb_value_unref(in[i].value);
    }
    bb_model_free(p.compiled);
    return status;
}

/* ---- --test-dir -------------------------------------------------------------------------- */

typedef struct tensor_file {
    bb_value *value;
    char *name; /* the TensorProto's own name, or NULL */
} tensor_file;

static void tensor_files_free(tensor_file *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        bb_value_unref(v[i].value);
        free(v[i].name);
    }
    free(v);
}

/* DIR/<kind>_0.pb, DIR/<kind>_1.pb, ... until one is missing. On failure
 * *out is NULL and *n 0 (nothing to free). */
static int read_tensor_files(const char *dir, const char *kind, tensor_file **out, size_t *n,
                             bb_error *err)
{
    *out = NULL;
    *n = 0;
    tensor_file *v = NULL;
    size_t cap = 0, count = 0;
    int rc = BB_OK;
    for (size_t k = 0; k < MAX_DATA_TENSORS && rc == BB_OK; k++) {
        char path[4200];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s_%zu.pb", dir, kind, k);
        if (stat(path, &st) != 0)
            break;
        if (count == cap) {
            cap = cap ? 2 * cap : 8;
            tensor_file *nv = realloc(v, cap * sizeof *nv);
            if (!nv) {
                rc = bb_error_set(err, BB_ENOMEM, "out of memory");
                break;
            }
            v = nv;
        }
        v[count] = (tensor_file){0};
        rc = bbd_run_tensor_read(path, &v[count].value, &v[count].name, err);
        if (rc == BB_OK)
            count++;
    }
    if (rc != BB_OK) {
        tensor_files_free(v, count);
        return rc;
    }
    *out = v;
    *n = count;
    return BB_OK;
}

/* Port name of data tensor k: its own name when the target has such a
 * port, else the k-th port. */
static const char *port_for(const bb_str_list *ports, const tensor_file *t, size_t k)
{
    if (t->name && bb_str_list_find(ports, t->name) >= 0)
        return t->name;
    return k < ports->n ? ports->v[k] : NULL;
}

typedef struct tally {
    size_t matched, mismatched, errors;
} tally;

static void check_data_set(const char *set_dir, const char *label, const program *p,
                           const run_opts *o, const bbd_registry *reg, tally *t)
{
    bb_error err = {0};
    tensor_file *ins = NULL, *wants = NULL;
    size_t n_ins = 0, n_wants = 0;
    bbd_run_input in[MAX_DATA_TENSORS];
    bbd_run_result res = {0};
    int rc = read_tensor_files(set_dir, "input", &ins, &n_ins, &err);
    if (rc == BB_OK)
        rc = read_tensor_files(set_dir, "output", &wants, &n_wants, &err);
    if (rc == BB_OK && n_wants == 0)
        rc = bb_error_set(&err, BB_ENOTFOUND, "%s: no output_0.pb", set_dir);
    size_t n_in = 0;
    for (size_t k = 0; rc == BB_OK && k < n_ins; k++) {
        const char *name = port_for(&p->declared, &ins[k], k);
        if (!name)
            rc = bb_error_set(&err, BB_EINVAL, "%s: input_%zu.pb has no matching input of the "
                              "model (%zu inputs)", set_dir, k, p->declared.n);
        else if (target_reads(p, name)) /* else declared but read by no node */
            in[n_in++] = (bbd_run_input){.name = name, .value = ins[k].value};
    }
    if (rc == BB_OK)
        rc = bbd_run_once(reg, p->compiled, p->target, in, n_in, o->timeout_ms, &res, &err);
    if (rc != BB_OK) {
        fprintf(stderr, "bbd: error: %s: %s\n", label, err.msg);
        printf("%s: ERROR\n", label);
        t->errors++;
    }
    for (size_t k = 0; rc == BB_OK && k < n_wants; k++) {
        const char *port = port_for(&p->fn->outputs, &wants[k], k);
        const bbd_run_output *got = NULL;
        for (size_t i = 0; port && i < res.n && !got; i++)
            if (strcmp(res.v[i].name, port) == 0)
                got = &res.v[i];
        char why[256];
        if (!got) {
            printf("%s: output_%zu.pb: MISMATCH: the target has no output '%s'\n", label, k,
                   port ? port : "?");
            t->mismatched++;
        } else if (bbd_run_tensor_close(got->value, wants[k].value, TEST_RTOL, TEST_ATOL, why,
                                        sizeof why)) {
            printf("%s: %s: ok\n", label, got->name);
            t->matched++;
        } else {
            printf("%s: %s: MISMATCH: %s\n", label, got->name, why);
            t->mismatched++;
        }
    }
    bbd_run_result_free(&res);
    tensor_files_free(ins, n_ins);
    tensor_files_free(wants, n_wants);
}

static int set_filter(const struct dirent *d)
{
    return strncmp(d->d_name, "test_data_set_", 14) == 0;
}

static int set_compare(const struct dirent **a, const struct dirent **b)
{
    long x = strtol((*a)->d_name + 14, NULL, 10), y = strtol((*b)->d_name + 14, NULL, 10);
    return x < y ? -1 : x > y ? 1 : strcmp((*a)->d_name, (*b)->d_name);
}

static int run_test_dir(const run_opts *o, const bbd_registry *reg)
{
    bb_error err = {0};
    char model[4200];
    snprintf(model, sizeof model, "%s/model.onnx", o->test_dir);
    program p;
    if (compile_program(o, reg, model, &p, &err))
        return fail(&err);
    struct dirent **sets = NULL;
    int n = scandir(o->test_dir, &sets, set_filter, set_compare);
    if (n < 0) {
        bb_model_free(p.compiled);
        bb_error_set(&err, BB_EIO, "%s: %s", o->test_dir, strerror(errno));
        return fail(&err);
    }
    tally t = {0};
    for (int i = 0; i < n; i++) {
        char dir[4200], label[4200];
        snprintf(dir, sizeof dir, "%s/%s", o->test_dir, sets[i]->d_name);
        snprintf(label, sizeof label, "%s/%s", o->test_dir, sets[i]->d_name);
        check_data_set(dir, label, &p, o, reg, &t);
        free(sets[i]);
    }
    free(sets);
    bb_model_free(p.compiled);
    if (n == 0) {
        bb_error_set(&err, BB_ENOTFOUND, "%s: no test_data_set_N directory", o->test_dir);
        return fail(&err);
    }
    printf("%zu matched, %zu mismatched, %zu errors\n", t.matched, t.mismatched, t.errors);
    return t.mismatched || t.errors ? 1 : 0;
}

int bbd_run_main(int argc, char **argv)
{
    run_opts o;
    int st = parse_args(argc, argv, &o);
    if (st >= 0)
        return st;
    bb_error err = {0};
    bbd_registry *reg = NULL;
    bbd_registry_options ro = {.plugin_dirs = o.dirs, .n_plugin_dirs = o.n_dirs};
    if (bbd_registry_new(&ro, &reg, &err))
        return fail(&err);
    for (size_t i = 0; i < bbd_registry_warning_count(reg); i++)
        fprintf(stderr, "bbd: warning: %s\n", bbd_registry_warning_at(reg, i));
    st = o.test_dir ? run_test_dir(&o, reg) : run_model(&o, reg);
    bbd_registry_free(reg);
    return st;
}
