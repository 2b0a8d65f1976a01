/*
 * bench_train.c — training and inference speed on one CPU core, against
 * the frameworks people would otherwise use, measured in the same run:
 *
 *   training step (forward + backward + SGD-momentum update) of nn::Onnx
 *     on the CNN of examples/cnn (Fashion-MNIST shape) at batch 32 and 64,
 *     and on the 784-128-10 MLP at batch 64, against PyTorch on the same
 *     shapes with torch.set_num_threads(1) (bench/bench_train_torch.py);
 *   inference: the MLP at batch 1 and 64 and the CNN at batch 64 through
 *     cpu::CpuBackend's execute_graph, against ONNX Runtime single-threaded
 *     (npm's onnxruntime-node, bench/bench_infer_ort.js) minus ORT's
 *     per-call binding overhead, measured on Identity models: half of an
 *     Identity of the model's input size plus half of one of its output
 *     size (an Identity moves its size in and out; the model moves its
 *     input in and its output out); and against ORT's own profiler (the
 *     shortest "model_run" it records: the session's run without the
 *     binding), a second figure that needs no model of the binding.
 * Target: every judged ratio (ours / theirs) <= 1.0. A baseline that is not
 * installed is skipped with a message (make bench installs both:
 * scripts/bench-deps). Training figures are the best of 7 trials (the
 * machine is shared: the best trial is the one least disturbed, on every
 * side alike). Inference is judged per call, the shortest of 700 on both
 * sides (ORT's profiled run; ORT's call minus the Identities' shortest
 * calls); the medians and the Identity-subtracted best trial mean are
 * shown beside them (a loaded machine moves a 0.4 s trial's mean by 10x).
 *
 * Usage: bench_train [--quick] [--no-baselines] [--only train|infer]
 *                    [--backend-config JSON]
 *   --no-baselines: ours only (e.g. under perf); --only: one half;
 *   --backend-config: cpu::CpuBackend's config for the inference rows
 *   (default {"threads": 1}; e.g. {"threads": 1, "winograd": false})
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cblas.h>

#include "bb/plugin_loader.h"
#include "bench/support/bench_util.h"
#include "bench/support/onnx_driver.h"
#include "examples/cnn/cnn_graph.h"

#define TRIALS 7

static double TRIAL_S = 0.4;
static char TMP[64];

/* Seconds per call of fn(ctx): the best of TRIALS trials of ~TRIAL_S. */
static double measure(void (*fn)(void *), void *ctx)
{
    fn(ctx); /* warm up: buffers, plans */
    long reps = 1;
    for (;;) {
        double t0 = bench_now_ns();
        for (long i = 0; i < reps; i++)
            fn(ctx);
        if ((bench_now_ns() - t0) * 1e-9 > TRIAL_S / 4 || reps > (1L << 24))
            break;
        reps *= 2;
    }
    double t[TRIALS];
    for (int k = 0; k < TRIALS; k++) {
        double t0 = bench_now_ns();
        for (long i = 0; i < reps; i++)
            fn(ctx);
        t[k] = (bench_now_ns() - t0) * 1e-9 / (double)reps;
    }
    return bench_percentile(t, TRIALS, 0);
}

static bb_value *random_tensor(uint32_t nd, const int64_t *dims, uint64_t seed)
{
    bb_value *v = bb_value_tensor_new(BB_DT_FLOAT, nd, dims);
    if (!v)
        drv_fail("tensor", "out of memory");
    float *p = bb_tensor_f32(v);
    for (size_t i = 0, n = bb_tensor_numel(v); i < n; i++)
        p[i] = (float)og_normal(&seed);
    return v;
}

/* ---- the models ------------------------------------------------------------------------ */

static void mlp_graph(og *o)
{
    uint64_t seed = 3;
    og_begin(o, "mlp");
    og_input(o, "input", 2, (int64_t[]){-1, 784});
    float *w1 = malloc(128 * 784 * sizeof *w1), *w2 = malloc(10 * 128 * sizeof *w2);
    float b1[128] = {0}, b2[10] = {0};
    og_he(w1, 128 * 784, 784, &seed);
    og_he(w2, 10 * 128, 128, &seed);
    og_param(o, "fc1.weight", 2, (int64_t[]){128, 784}, w1);
    og_param(o, "fc1.bias", 1, (int64_t[]){128}, b1);
    og_param(o, "fc2.weight", 2, (int64_t[]){10, 128}, w2);
    og_param(o, "fc2.bias", 1, (int64_t[]){10}, b2);
    og_attr_int(o, og_node(o, "Gemm", "fc1", "input,fc1.weight,fc1.bias", "h"), "transB", 1);
    og_node(o, "Relu", "relu", "h", "hr");
    og_attr_int(o, og_node(o, "Gemm", "fc2", "hr,fc2.weight,fc2.bias", "logits"), "transB", 1);
    og_output(o, "logits", 2, (int64_t[]){-1, 10});
    free(w1);
    free(w2);
}

static void cnn(og *o)
{
    og_begin(o, "cnn");
    cnn_shape s = CNN_SHAPE_FASHION;
    cnn_graph(o, &s, 2024);
}

/* Identity over [N, width]: ONNX Runtime's per-call cost at that size. */
static void identity_graph(og *o, int64_t width)
{
    og_begin(o, "identity");
    og_input(o, "input", 2, (int64_t[]){-1, width});
    og_node(o, "Identity", "id", "input", "output");
    og_output(o, "output", 2, (int64_t[]){-1, width});
}

static void save(og *o, const char *name)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s.onnx", TMP, name);
    bb_error err = {0};
    if (og_save(o, 17, path, &err))
        drv_fail(path, err.msg);
}

/* ---- a training step through nn::Onnx's ops ------------------------------------------------ */

typedef struct step_case {
    drv_comp m;
    bb_value *x;
    int32_t *labels;
    int64_t rows;
} step_case;

static void train_step(void *p)
{
    step_case *c = p;
    drv_train_step(&c->m, c->x, c->labels, c->rows);
}

static double time_training(bb_plugin_loader *l, og *o, int64_t batch)
{
    step_case c = {.rows = batch};
    c.m = drv_create(l, "nn::Onnx", o->g, "{\"learning_rate\": 0.01, \"momentum\": 0.9}");
    c.x = random_tensor(2, (int64_t[]){batch, 784}, 9);
    c.labels = malloc((size_t)batch * sizeof *c.labels);
    for (int64_t r = 0; r < batch; r++)
        c.labels[r] = (int32_t)(r * 7 % 10);
    double t = measure(train_step, &c);
    drv_destroy(&c.m);
    bb_value_unref(c.x);
    free(c.labels);
    return t;
}

/* ---- inference through cpu::CpuBackend ------------------------------------------------------- */

typedef struct infer_case {
    drv_comp be;
    const bb_graph *g;
    bb_value *x;
} infer_case;

static void infer(void *p)
{
    infer_case *c = p;
    const char *names[1] = {"input"};
    bb_value *out = NULL;
    bb_error err = {0};
    if (c->be.t->execute_graph(c->be.inst, c->g, names, &c->x, 1, &out, 1, &err))
        drv_fail("execute_graph", err.msg);
    bb_value_unref(out);
}

/* What the inference rows compare: per call, as ORT's profiler records its
 * runs (CALLS single calls after WARM ones: the shortest and the median),
 * and the best of TRIALS trial means (what the Identity-subtracted ORT
 * figure is made of). */
#define WARM 50
#define CALLS 700

typedef struct infer_times {
    double call_min, call_med, trial;
} infer_times;

static infer_times time_inference(drv_comp *be, og *o, int64_t batch)
{
    infer_case c = {*be, o->g, random_tensor(2, (int64_t[]){batch, 784}, 5)};
    infer_times t;
    t.trial = measure(infer, &c);
    static double call[CALLS];
    for (int i = 0; i < WARM; i++)
        infer(&c);
    for (int i = 0; i < CALLS; i++) {
        double t0 = bench_now_ns();
        infer(&c);
        call[i] = (bench_now_ns() - t0) * 1e-9;
    }
    t.call_min = bench_percentile(call, CALLS, 0);
    t.call_med = bench_median(call, CALLS);
    bb_value_unref(c.x);
    return t;
}

/* ---- the baselines (helper processes) ---------------------------------------------------------- */

/* Runs cmd; each output line "<key> <seconds>" fills the matching want[i]
 * (NAN when absent). False (and the reason printed) when cmd failed. */
static bool run_baseline(const char *cmd, const char *const *keys, double *vals, size_t n)
{
    for (size_t i = 0; i < n; i++)
        vals[i] = -1;
    FILE *f = popen(cmd, "r");
    if (!f)
        return false;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char key[64];
        double v;
        if (sscanf(line, "%63s %lf", key, &v) != 2) {
            fputs(line, stdout); /* a skip message */
            continue;
        }
        for (size_t i = 0; i < n; i++)
            if (strcmp(key, keys[i]) == 0)
                vals[i] = v;
    }
    return pclose(f) == 0;
}

static void repo_root(char *out, size_t cap)
{
    char exe[1000];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    snprintf(out, cap, ".");
    if (n <= 0)
        return;
    exe[n] = '\0';
    for (int i = 0; i < 3; i++) { /* <repo>/<build>/bench/bench_train -> <repo> */
        char *s = strrchr(exe, '/');
        if (s)
            *s = '\0';
    }
    snprintf(out, cap, "%s", exe);
}

static void build_dir(char *out, size_t cap)
{
    const char *env = getenv("BB_BUILD");
    char exe[1000];
    ssize_t n;
    if (env && *env) {
        snprintf(out, cap, "%s", env);
    } else if ((n = readlink("/proc/self/exe", exe, sizeof exe - 1)) > 0) {
        exe[n] = '\0';
        for (int i = 0; i < 2; i++) {
            char *s = strrchr(exe, '/');
            if (s)
                *s = '\0';
        }
        snprintf(out, cap, "%s", exe);
    } else {
        snprintf(out, cap, "build");
    }
}

/* The 1-minute load average, from /proc/loadavg (-1 when unreadable). */
static double load_avg(void)
{
    double v = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

/* One row: the medians over the rounds of ours and of the baseline, their
 * ratio and the range of the per-round ratios. */
static void row(const char *name, const double *ours, const double *base, int rounds,
                const char *base_name, int *over)
{
    double o[16], b[16], q[16];
    int n = 0;
    for (int i = 0; i < rounds; i++) {
        o[i] = ours[i];
        if (base[i] > 0) {
            b[n] = base[i];
            q[n++] = ours[i] / base[i];
        }
    }
    double om = bench_median(o, (size_t)rounds);
    if (n == 0) {
        printf("%-32s %10.3f ms %13s  %-18s %6s\n", name, om * 1e3, "-", base_name, "skip");
        return;
    }
    double bm = bench_median(b, (size_t)n), lo = q[0], hi = q[0];
    for (int i = 1; i < n; i++) {
        lo = q[i] < lo ? q[i] : lo;
        hi = q[i] > hi ? q[i] : hi;
    }
    printf("%-32s %10.3f ms %10.3f ms  %-18s %6.3f  %5.2f-%.2f\n", name, om * 1e3, bm * 1e3,
           base_name, om / bm, lo, hi);
    if (om / bm > 1.0)
        (*over)++;
}

#define MAX_ROUNDS 16
#define N_IKEYS 12 /* the inference figures bench_infer_ort.js prints */

int main(int argc, char **argv)
{
    bool baselines = true, train = true, inference = true;
    int rounds = 3;
    const char *backend_config = "{\"threads\": 1}";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            TRIAL_S = 0.05;
            rounds = 1;
        } else if (strcmp(argv[i], "--no-baselines") == 0) {
            baselines = false;
        } else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            rounds = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc &&
                   (strcmp(argv[i + 1], "train") == 0 || strcmp(argv[i + 1], "infer") == 0)) {
            train = strcmp(argv[++i], "train") == 0;
            inference = !train;
        } else if (strcmp(argv[i], "--backend-config") == 0 && i + 1 < argc) {
            backend_config = argv[++i];
        } else {
            fprintf(stderr, "usage: bench_train [--quick] [--no-baselines] [--rounds N] "
                            "[--only train|infer] [--backend-config JSON]\n");
            return 2;
        }
    }
    if (rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "bench_train: error: --rounds takes 1..%d\n", MAX_ROUNDS);
        return 2;
    }
    char build[1024], repo[1024], tcmd[4096], icmd[4096];
    build_dir(build, sizeof build);
    repo_root(repo, sizeof repo);
    snprintf(TMP, sizeof TMP, "/tmp/bb-bench-train.XXXXXX");
    if (!mkdtemp(TMP))
        bench_die("mkdtemp");
    bench_place(true); /* one core, as the baselines get */
    openblas_set_num_threads(1);
    bb_plugin_loader *l = drv_plugins();
    og mlp, conv, id_in, id_out;
    mlp_graph(&mlp);
    cnn(&conv);
    identity_graph(&id_in, 784);
    identity_graph(&id_out, 10);
    save(&mlp, "mlp");
    save(&conv, "cnn");
    save(&id_in, "identity_in");
    save(&id_out, "identity_out");
    snprintf(tcmd, sizeof tcmd, "/usr/bin/python3 %s/bench/bench_train_torch.py --trial-s %g",
             repo, TRIAL_S);
    snprintf(icmd, sizeof icmd,
             "NODE_PATH=%s/bench/ort/node_modules node %s/bench/bench_infer_ort.js %s %g", build,
             repo, TMP, TRIAL_S);
    static const char *const TKEYS[3] = {"cnn_32", "cnn_64", "mlp_64"};
    static const char *const IKEYS[N_IKEYS] = {
        "mlp_1_run",     "mlp_64_run",     "cnn_64_run", /* ORT's profiler: shortest */
        "mlp_1_run_med", "mlp_64_run_med", "cnn_64_run_med", /* median */
        "mlp_1",         "mlp_64",         "cnn_64", /* trial mean - Identity's */
        "mlp_1_call",    "mlp_64_call",    "cnn_64_call"}; /* shortest call - Identity's */
    /* [case][round]; the two sides take turns within each round */
    double tr[3][MAX_ROUNDS], tt[3][MAX_ROUNDS], ti[N_IKEYS][MAX_ROUNDS],
        to[N_IKEYS][MAX_ROUNDS];
    bool torch_ok = baselines, ort_ok = baselines;
    double load0 = load_avg();
    drv_comp be = drv_create(l, "cpu::CpuBackend", NULL, backend_config);
    for (int k = 0; k < rounds; k++) {
        double v[N_IKEYS];
        if (train) {
            tr[0][k] = time_training(l, &conv, 32);
            tr[1][k] = time_training(l, &conv, 64);
            tr[2][k] = time_training(l, &mlp, 64);
            torch_ok = torch_ok && run_baseline(tcmd, TKEYS, v, 3);
            for (int i = 0; i < 3; i++)
                tt[i][k] = torch_ok ? v[i] : -1;
        }
        if (inference) {
            static const int64_t batch[3] = {1, 64, 64};
            for (int i = 0; i < 3; i++) {
                infer_times t = time_inference(&be, i < 2 ? &mlp : &conv, batch[i]);
                ti[i][k] = t.call_min;
                ti[3 + i][k] = t.call_med;
                ti[6 + i][k] = t.trial;
                ti[9 + i][k] = t.call_min;
            }
            ort_ok = ort_ok && run_baseline(icmd, IKEYS, v, N_IKEYS);
            for (int i = 0; i < N_IKEYS; i++)
                to[i][k] = ort_ok ? v[i] : -1;
        }
        fprintf(stderr, "bench_train: round %d of %d done (load %.1f)\n", k + 1, rounds,
                load_avg());
    }
    double load1 = load_avg();

    printf("\nnn::Onnx and cpu::CpuBackend vs PyTorch / ONNX Runtime, one core each; each "
           "figure the best of %d trials, then the median of %d rounds in which the two sides "
           "took turns; load average %.1f at the start, %.1f at the end\n\n", TRIALS, rounds,
           load0, load1);
    printf("%-32s %13s %13s  %-18s %6s  %s\n", "case", "ours", "baseline", "baseline is",
           "ratio", "per round");
    int over = 0;
    static const char *const TNAMES[3] = {"train step CNN, batch 32", "train step CNN, batch 64",
                                          "train step MLP 784-128-10, b 64"};
    static const char *const INAMES[3] = {"infer MLP 784-128-10, batch 1",
                                          "infer MLP 784-128-10, batch 64", "infer CNN, batch 64"};
    for (int i = 0; train && i < 3; i++)
        row(TNAMES[i], tr[i], tt[i], rounds, "PyTorch 1 thread", &over);
    for (int i = 0; inference && i < 3; i++) {
        row(INAMES[i], ti[i], to[i], rounds, "ORT run, shortest", &over);
        row("", ti[9 + i], to[9 + i], rounds, "ORT call-Id, short", &over);
        int shown = 0; /* the trial means and medians are shown, not judged */
        row("", ti[3 + i], to[3 + i], rounds, "ORT run, median", &shown);
        row("", ti[6 + i], to[6 + i], rounds, "ORT call-Id, mean", &shown);
    }
    bool missing = (train && !torch_ok) || (inference && !ort_ok);
    if (missing)
        printf("\n(a baseline is missing: make bench installs python3-torch and "
               "onnxruntime-node, scripts/bench-deps)\n");
    printf("\ntarget: every ratio <= 1.0 (inference: the shortest of %d calls on both sides): "
           "%s\n", CALLS,
           over ? "MISSED" : missing ? "not judged (a baseline is missing)" : "met");
    drv_destroy(&be);
    og_end(&mlp);
    og_end(&conv);
    og_end(&id_in);
    og_end(&id_out);
    bb_plugin_loader_destroy(l);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", TMP);
    if (getenv("BENCH_KEEP")) /* e.g. to run a baseline's helper by hand */
        printf("models kept in %s\n", TMP);
    else if (system(cmd) != 0)
        fprintf(stderr, "bench_train: could not remove %s\n", TMP);
    return 0;
}
