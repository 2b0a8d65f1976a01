/*
 * fuzz_support.c — the registry, the compiled artifact and the engines the
 * fuzz targets share (see fuzz_support.h).
 */
#include "fuzz/support/fuzz_support.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bb/model_io.h"
#include "bb/multiaddr.h"
#include "bb/peerid.h"
#include "bb/type_source.h"
#include "bbc/compiler.h"

void fz_die(const char *what, const char *msg)
{
    fprintf(stderr, "fuzz: error: %s: %s\n", what, msg ? msg : "");
    abort();
}

/* build-fuzz/fuzz/plugins: the test plugin fed_round binds (bbdtest::Model,
 * a model light enough to install once per input), alone (Makefile). */
static void test_plugin_dir(char *out, size_t cap)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        fz_die("/proc/self/exe", strerror(errno));
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    snprintf(out, cap, "%s/plugins", exe);
}

bbd_registry *fz_registry(void)
{
    static bbd_registry *reg;
    if (!reg) {
        char dir[PATH_MAX + 32];
        test_plugin_dir(dir, sizeof dir);
        const char *dirs[] = {dir};
        bbd_registry_options o = {.plugin_dirs = dirs, .n_plugin_dirs = 1};
        bb_error err = {0};
        if (bbd_registry_new(&o, &reg, &err))
            fz_die("plugin registry", err.msg);
    }
    return reg;
}

/* The repository's testdata: from the working directory (make runs the
 * targets from the top) or next to the binary (build-fuzz/fuzz/..). */
static void testdata_path(const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "testdata/%s", name);
    if (access(out, R_OK) == 0)
        return;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = '\0';
        snprintf(out, cap, "%s/../../testdata/%s", exe, name);
    }
}

static bb_model *artifact;
static uint8_t *artifact_bytes;
static size_t artifact_len;

static void compile_artifact(void)
{
    char path[PATH_MAX];
    testdata_path("fed_round.onnx", path, sizeof path);
    bb_model *recorded = NULL;
    bb_error err = {0};
    if (bb_model_load_file(path, &recorded, &err))
        fz_die(path, err.msg);
    bbc_options o;
    bbc_options_init(&o);
    bbc_bindings b;
    if (bbc_bindings_init(&b))
        fz_die("bindings", "out of memory");
    bbc_error cerr;
    if (bbc_compile(recorded, &o, &b, bbd_registry_types(fz_registry()), NULL, 0, &artifact,
                    &cerr) != BB_OK)
        fz_die("bbc_compile fed_round.onnx", cerr.msg);
    bbc_bindings_free(&b);
    bb_model_free(recorded);
    if (bb_model_save_mem(artifact, &artifact_bytes, &artifact_len, &err))
        fz_die("save the artifact", err.msg);
}

const bb_model *fz_artifact(void)
{
    if (!artifact)
        compile_artifact();
    return artifact;
}

const uint8_t *fz_artifact_bytes(size_t *len)
{
    fz_artifact();
    *len = artifact_len;
    return artifact_bytes;
}

bb_engine *fz_engine(const char *const *targets, size_t n_targets, uint8_t who)
{
    bb_engine_config cfg;
    bb_engine_config_init(&cfg);
    bb_engine_caps_edge(&cfg.caps); /* small tables: a finding shows sooner */
    uint8_t seed[32] = {who};
    bb_peerid_from_seed(seed, NULL, &cfg.peer, NULL);
    uint8_t a[32];
    size_t alen = 0;
    bb_multiaddr_parse("/ip4/127.0.0.1/tcp/7001", a, sizeof a, &alen, NULL);
    bb_engine_addr addr = {a, alen};
    cfg.addrs = &addr;
    cfg.n_addrs = 1;
    cfg.seed = who;
    bb_error err = {0};
    bb_engine *e = bb_engine_new(&cfg, &err);
    if (!e)
        fz_die("bb_engine_new", err.msg);
    if (bb_engine_install(e, fz_artifact(), targets, n_targets,
                          bbd_registry_engine(fz_registry()), &err))
        fz_die("bb_engine_install", err.msg);
    return e;
}

void fz_drain(bb_engine *e, uint64_t now_ns)
{
    bb_steps steps;
    bb_steps_init(&steps);
    for (int i = 0; i < 4; i++) {
        bb_engine_poll(e, now_ns + (uint64_t)i * 1000000000ull, &steps);
        bb_steps_clear(&steps);
    }
    bb_steps_free(&steps);
}

const char *fz_seed_dir(void)
{
    const char *d = getenv("FUZZ_WRITE_SEEDS");
    return d && *d ? d : NULL;
}

void fz_seed_write(const char *name, const void *data, size_t len)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", fz_seed_dir(), name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len)
        fz_die(path, strerror(errno));
    fclose(f);
}
