/*
 * bench_index.c — the index plugin (index::Flat, index::Hnsw, index::IvfPq)
 * against FAISS's IndexFlatL2, IndexHNSWFlat and IndexIVFPQ at the same
 * parameters, on the same data, in the same run.
 *
 * Data: N x DIM synthetic clustered points (N / 100 centres, each spread
 * along 16 random directions plus isotropic noise: structure like an
 * embedding set's) and NQ held-out queries from the same distribution;
 * seeded, so every run measures the same set. k = 10.
 * For each index: build time (Add, plus Train for IvfPq), recall@10
 * against exact search (our Flat; FAISS's Flat recall against it checks
 * the ground truth), and queries per second — all NQ queries as one
 * Search of [NQ, DIM] through the plugin's dispatch entry. Hnsw is built
 * once and swept over ef_search (and IvfPq over nprobe) by restoring its
 * snapshot into instances configured with each value. One thread on both
 * sides (the plugin runs on the engine thread): OpenBLAS and OpenMP are set
 * to one thread.
 *
 * The FAISS side is bench/faiss_side.cpp (C++, Debian's libfaiss-dev), which
 * `make bench` builds beside this program; without it only our side runs.
 * It runs as a coprocess that builds its indexes and then answers one
 * measurement per request, and the two sides take turns point by point
 * for ROUNDS rounds (each measurement the best of two searches; the best
 * round kept): on a shared machine, load from elsewhere falls on both.
 * Targets (issue 18): Hnsw recall@10 >= 0.95 at >= 0.9x FAISS HNSW's QPS at
 * equal recall (each side's QPS interpolated at recall 0.95), Flat >= 0.9x
 * FAISS Flat's QPS.
 *
 *   bench_index [--quick]      (--quick: 20k points, 200 queries)
 */
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bb/plugin.h"
#include "bb/plugin_loader.h"
#include "bb/value.h"
#include "bench/support/bench_util.h"

#define DIM 128
#define K 10
#define HNSW_M 16
#define HNSW_EFC 100
#define IVF_NLIST 256
#define IVF_PQ_M 16
#define IVF_ITERS 10
#define TARGET_RECALL 0.95
#define ROUNDS 3

static const int EF_SWEEP[] = {10, 16, 24, 32, 48, 64, 96, 128, 256};
static const int NPROBE_SWEEP[] = {4, 8, 16, 32, 64};
#define N_EF (sizeof EF_SWEEP / sizeof *EF_SWEEP)
#define N_NPROBE (sizeof NPROBE_SWEEP / sizeof *NPROBE_SWEEP)

typedef struct point {
    double build_s, qps, recall;
    bool have;
} point;

typedef struct results {
    point flat, hnsw[N_EF], ivf[N_NPROBE];
} results;

static bb_plugin_loader *g_loader;

/* ---- data -------------------------------------------------------------------------- */

static uint64_t g_seed = 0x9e3779b97f4a7c15ULL;
static double uniform(void)
{
    g_seed ^= g_seed << 13;
    g_seed ^= g_seed >> 7;
    g_seed ^= g_seed << 17;
    return ((double)(g_seed >> 11) + 0.5) / 9007199254740992.0;
}
static double gauss(void)
{
    return sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform());
}

/* rows x DIM: the first n are the base, the rest the queries. */
static float *clustered(size_t rows, size_t n)
{
    size_t clusters = n / 100 ? n / 100 : 1, spread = 16;
    float *centre = malloc(clusters * DIM * sizeof *centre);
    float *dir = malloc(clusters * spread * DIM * sizeof *dir);
    float *x = malloc(rows * DIM * sizeof *x);
    if (!centre || !dir || !x)
        bench_die("out of memory");
    for (size_t i = 0; i < clusters * DIM; i++)
        centre[i] = (float)(1.0 * gauss());
    for (size_t i = 0; i < clusters * spread * DIM; i++)
        dir[i] = (float)(gauss() / sqrt((double)spread));
    for (size_t i = 0; i < rows; i++) {
        size_t c = (size_t)(uniform() * (double)clusters) % clusters;
        double w[16];
        for (size_t t = 0; t < spread; t++)
            w[t] = gauss();
        for (size_t j = 0; j < DIM; j++) {
            double v = centre[c * DIM + j] + 1.0 * gauss();
            for (size_t t = 0; t < spread; t++)
                v += w[t] * dir[(c * spread + t) * DIM + j];
            x[i * DIM + j] = (float)v;
        }
    }
    free(centre);
    free(dir);
    return x;
}

/* ---- the plugin ---------------------------------------------------------------------- */

typedef struct index_inst {
    const bb_component_type *t;
    void *inst;
} index_inst;

static index_inst make(const char *type, const char *config)
{
    const bb_loaded_type *lt = bb_plugin_loader_find(g_loader, type);
    if (!lt) {
        fprintf(stderr, "bench_index: error: %s is not in the plugin directory\n", type);
        exit(1);
    }
    bb_create_args a = {.struct_size = sizeof a, .slot = "index", .config_json = config,
                        .seed = 1};
    index_inst ix = {lt->type, NULL};
    bb_error err = {0};
    if (ix.t->create(&a, &ix.inst, &err)) {
        fprintf(stderr, "bench_index: error: %s\n", err.msg);
        exit(1);
    }
    return ix;
}

/* One op; takes in. The output (new reference) or exit. */
static bb_value *op(index_inst *ix, const char *name, const bb_node *node, bb_value *in)
{
    uint32_t idx = 0;
    const char *dom = ix->t->opsets[0].domain;
    if (!bb_component_type_find_op(ix->t, dom, name, &idx))
        bench_die(name);
    bb_value *out = NULL;
    bb_dispatch_call call = {.domain = dom, .op_type = name, .op_index = idx, .inputs = &in,
                             .n_inputs = 1, .n_outputs = 1, .node = node};
    bb_error err = {0};
    if (ix->t->dispatch(ix->inst, NULL, &call, &out, &err) != BB_DISPATCH_NOW_OK) {
        fprintf(stderr, "bench_index: %s.%s: %s\n", ix->t->type_name, name, err.msg);
        exit(1);
    }
    bb_value_unref(in);
    return out;
}

static bb_value *rows_of(const float *x, size_t rows)
{
    int64_t dims[2] = {(int64_t)rows, DIM};
    bb_value *v = bb_value_tensor_copy(BB_DT_FLOAT, 2, dims, x, rows * DIM * sizeof(float));
    if (!v)
        bench_die("out of memory");
    return v;
}

/* Build: Train (when asked) and Add every base row. Seconds. */
static double build(index_inst *ix, const float *x, size_t n, bool train)
{
    double t0 = bench_now_ns();
    if (train)
        bb_value_unref(op(ix, "Train", NULL, rows_of(x, n)));
    bb_value_unref(op(ix, "Add", NULL, rows_of(x, n)));
    return (bench_now_ns() - t0) / 1e9;
}

/* Best of two Searches of all queries (QPS); the ids of the last (malloc'd). */
static double search(index_inst *ix, const float *q, size_t nq, uint64_t **ids_out)
{
    /* k is a node attribute; without a node the plugin's default is 10 = K */
    double best = INFINITY;
    bb_value *res = NULL;
    for (int r = 0; r < 2; r++) {
        bb_value_unref(res);
        double t0 = bench_now_ns();
        res = op(ix, "Search", NULL, rows_of(q, nq));
        double dt = (bench_now_ns() - t0) / 1e9;
        best = dt < best ? dt : best;
    }
    const bb_value *ids = res->u.list.items[0];
    if (ids->u.tensor.ndim != 2 || ids->u.tensor.dims[1] != K)
        bench_die("Search answered another shape");
    *ids_out = malloc(nq * K * sizeof **ids_out);
    if (!*ids_out)
        bench_die("out of memory");
    memcpy(*ids_out, ids->u.tensor.data, nq * K * sizeof **ids_out);
    bb_value_unref(res);
    return (double)nq / best;
}

static double recall(const uint64_t *gt, const uint64_t *got, size_t nq)
{
    size_t hit = 0;
    for (size_t i = 0; i < nq; i++)
        for (int a = 0; a < K; a++)
            for (int b = 0; b < K; b++)
                hit += got[i * K + b] == gt[i * K + a];
    return (double)hit / (double)(nq * K);
}

/* ---- our side -------------------------------------------------------------------------- */

/* The built indexes: Flat kept, Hnsw and IvfPq as snapshots that each
 * measurement restores into an instance configured with its ef_search /
 * nprobe (search-time knobs are config, not state). */
typedef struct ours {
    index_inst flat;
    uint8_t *hnsw, *ivf;
    size_t hnsw_len, ivf_len;
} ours;

static uint8_t *snapshot_of(index_inst *ix, size_t *len)
{
    uint8_t *snap = NULL;
    bb_error err = {0};
    if (ix->t->snapshot(ix->inst, &snap, len, &err)) {
        fprintf(stderr, "bench_index: snapshot: %s\n", err.msg);
        exit(1);
    }
    ix->t->destroy(ix->inst);
    return snap;
}

static void ours_build(ours *o, const float *x, size_t n, results *r)
{
    char cfg[256];
    o->flat = make("index::Flat", NULL);
    r->flat.build_s = build(&o->flat, x, n, false);
    snprintf(cfg, sizeof cfg, "{\"m\": %d, \"ef_construction\": %d}", HNSW_M, HNSW_EFC);
    index_inst h = make("index::Hnsw", cfg);
    double hb = build(&h, x, n, false);
    o->hnsw = snapshot_of(&h, &o->hnsw_len);
    snprintf(cfg, sizeof cfg, "{\"nlist\": %d, \"pq_m\": %d, \"train_iterations\": %d}",
             IVF_NLIST, IVF_PQ_M, IVF_ITERS);
    index_inst v = make("index::IvfPq", cfg);
    double ib = build(&v, x, n, true);
    o->ivf = snapshot_of(&v, &o->ivf_len);
    for (size_t i = 0; i < N_EF; i++)
        r->hnsw[i].build_s = hb;
    for (size_t i = 0; i < N_NPROBE; i++)
        r->ivf[i].build_s = ib;
}

/* Keep the better QPS of a measurement. */
static void keep(point *p, double qps, double rec)
{
    if (!p->have || qps > p->qps)
        p->qps = qps;
    p->recall = rec;
    p->have = true;
}

/* One measurement of point (kind 0 Flat, 1 Hnsw, 2 IvfPq; i its sweep index). */
static void ours_measure(ours *o, int kind, size_t i, const float *q, size_t nq,
                         const uint64_t *gt, results *r)
{
    uint64_t *ids;
    if (kind == 0) {
        double qps = search(&o->flat, q, nq, &ids);
        keep(&r->flat, qps, recall(gt, ids, nq));
        free(ids);
        return;
    }
    char cfg[256];
    if (kind == 1)
        snprintf(cfg, sizeof cfg, "{\"m\": %d, \"ef_construction\": %d, \"ef_search\": %d}",
                 HNSW_M, HNSW_EFC, EF_SWEEP[i]);
    else
        snprintf(cfg, sizeof cfg, "{\"nlist\": %d, \"pq_m\": %d, \"nprobe\": %d}", IVF_NLIST,
                 IVF_PQ_M, NPROBE_SWEEP[i]);
    index_inst s = make(kind == 1 ? "index::Hnsw" : "index::IvfPq", cfg);
    bb_error err = {0};
    if (s.t->restore(s.inst, kind == 1 ? o->hnsw : o->ivf, kind == 1 ? o->hnsw_len : o->ivf_len,
                     &err)) {
        fprintf(stderr, "bench_index: restore: %s\n", err.msg);
        exit(1);
    }
    double qps = search(&s, q, nq, &ids);
    keep(kind == 1 ? &r->hnsw[i] : &r->ivf[i], qps, recall(gt, ids, nq));
    free(ids);
    s.t->destroy(s.inst);
}

/* ---- the FAISS side: a coprocess answering one measurement per request ----------------- */

typedef struct faiss_proc {
    pid_t pid;
    FILE *to, *from;
    char dir[64];
} faiss_proc;

static void write_matrix(const char *path, const void *p, uint32_t rows, uint32_t cols,
                         size_t item)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(&rows, 4, 1, f) != 1 || fwrite(&cols, 4, 1, f) != 1 ||
        fwrite(p, item, (size_t)rows * cols, f) != (size_t)rows * cols || fclose(f))
        bench_die(path);
}

static void data_files(faiss_proc *fp, bool remove, const float *x, size_t n, const float *q,
                       size_t nq, const uint64_t *gt)
{
    static const char *const NAMES[] = {"base.f32", "query.f32", "gt.u64"};
    char path[128];
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", fp->dir, NAMES[i]);
        if (remove)
            unlink(path);
        else if (i == 0)
            write_matrix(path, x, (uint32_t)n, DIM, sizeof(float));
        else if (i == 1)
            write_matrix(path, q, (uint32_t)nq, DIM, sizeof(float));
        else
            write_matrix(path, gt, (uint32_t)nq, K, sizeof(uint64_t));
    }
    if (remove)
        rmdir(fp->dir);
}

/* Starts faiss_side on the data and reads its build times; false when it
 * is not built. */
static bool faiss_start(faiss_proc *fp, const float *x, size_t n, const float *q, size_t nq,
                        const uint64_t *gt, results *r)
{
    char exe[PATH_MAX], args[5][16];
    bench_exe_dir(exe, sizeof exe - 16);
    strcat(exe, "/faiss_side");
    if (access(exe, X_OK) != 0)
        return false;
    snprintf(fp->dir, sizeof fp->dir, "/tmp/bench_index.XXXXXX");
    if (!mkdtemp(fp->dir))
        bench_die("mkdtemp");
    data_files(fp, false, x, n, q, nq, gt);
    int in[2], out[2];
    if (pipe(in) || pipe(out))
        bench_die("pipe");
    const int vals[5] = {HNSW_M, HNSW_EFC, IVF_NLIST, IVF_PQ_M, IVF_ITERS};
    for (int i = 0; i < 5; i++)
        snprintf(args[i], sizeof args[i], "%d", vals[i]);
    fflush(stdout);
    if ((fp->pid = fork()) < 0)
        bench_die("fork");
    if (fp->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        execl(exe, exe, fp->dir, args[0], args[1], args[2], args[3], args[4], (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    fp->to = fdopen(in[1], "w");
    fp->from = fdopen(out[0], "r");
    char line[256];
    point b = {.have = true};
    double hb = 0, ib = 0;
    if (!fp->to || !fp->from || !fgets(line, sizeof line, fp->from) ||
        sscanf(line, "built flat=%lf hnsw=%lf ivfpq=%lf", &b.build_s, &hb, &ib) != 3) {
        fprintf(stderr, "bench_index: faiss_side did not start\n");
        exit(1);
    }
    r->flat.build_s = b.build_s;
    for (size_t i = 0; i < N_EF; i++)
        r->hnsw[i].build_s = hb;
    for (size_t i = 0; i < N_NPROBE; i++)
        r->ivf[i].build_s = ib;
    return true;
}

static void faiss_measure(faiss_proc *fp, int kind, size_t i, results *r)
{
    char line[256];
    double qps, rec;
    if (kind == 0)
        fprintf(fp->to, "flat\n");
    else
        fprintf(fp->to, "%s %d\n", kind == 1 ? "hnsw" : "ivfpq",
                kind == 1 ? EF_SWEEP[i] : NPROBE_SWEEP[i]);
    fflush(fp->to);
    if (!fgets(line, sizeof line, fp->from) ||
        sscanf(line, "qps=%lf recall=%lf", &qps, &rec) != 2) {
        fprintf(stderr, "bench_index: faiss_side stopped answering\n");
        exit(1);
    }
    keep(kind == 0 ? &r->flat : kind == 1 ? &r->hnsw[i] : &r->ivf[i], qps, rec);
}

static void faiss_stop(faiss_proc *fp)
{
    fclose(fp->to);
    fclose(fp->from);
    int status = 0;
    waitpid(fp->pid, &status, 0);
    data_files(fp, true, NULL, 0, NULL, 0, NULL);
    if (!WIFEXITED(status) || WEXITSTATUS(status)) {
        fprintf(stderr, "bench_index: faiss_side failed (status %d)\n", status);
        exit(1);
    }
}

/* ---- report ---------------------------------------------------------------------------- */

/* QPS at recall target on a sweep (log-QPS interpolated between the two
 * points around it); 0 when the sweep never reaches it. */
static double qps_at(const point *v, size_t n, double target)
{
    for (size_t i = 0; i < n; i++) {
        if (!v[i].have || v[i].recall < target)
            continue;
        if (i == 0 || !v[i - 1].have || v[i - 1].recall >= v[i].recall)
            return v[i].qps;
        double f = (target - v[i - 1].recall) / (v[i].recall - v[i - 1].recall);
        return exp(log(v[i - 1].qps) + f * (log(v[i].qps) - log(v[i - 1].qps)));
    }
    return 0;
}

static void row(const char *name, const point *a, const point *b)
{
    printf("%-22s %9.2f %8.4f %10.0f", name, a->build_s, a->recall, a->qps);
    if (b->have)
        printf("   | %9.2f %8.4f %10.0f   | %6.2f\n", b->build_s, b->recall, b->qps,
               a->qps / b->qps);
    else
        printf("   | (FAISS side not run)\n");
}

static void report(const results *o, const results *f, bool have_faiss)
{
    char name[64];
    printf("\n%-22s %9s %8s %10s   | %9s %8s %10s   | %6s\n", "index (ours | FAISS)", "build s",
           "recall", "QPS", "build s", "recall", "QPS", "QPS x");
    row("Flat | IndexFlatL2", &o->flat, &f->flat);
    for (size_t i = 0; i < N_EF; i++) {
        snprintf(name, sizeof name, "Hnsw ef_search=%d", EF_SWEEP[i]);
        row(name, &o->hnsw[i], &f->hnsw[i]);
    }
    for (size_t i = 0; i < N_NPROBE; i++) {
        snprintf(name, sizeof name, "IvfPq nprobe=%d", NPROBE_SWEEP[i]);
        row(name, &o->ivf[i], &f->ivf[i]);
    }
    double oq = qps_at(o->hnsw, N_EF, TARGET_RECALL), fq = qps_at(f->hnsw, N_EF, TARGET_RECALL);
    printf("\nHnsw QPS at recall@10 = %.2f (interpolated): ours %.0f, FAISS %.0f", TARGET_RECALL,
           oq, fq);
    if (have_faiss && fq > 0)
        printf(", ratio %.2f", oq / fq);
    printf("\ntargets:\n  Hnsw reaches recall@10 >= %.2f: %s\n", TARGET_RECALL,
           oq > 0 ? "met" : "MISSED");
    if (!have_faiss) {
        printf("  (no FAISS baseline: `make bench` builds bench/faiss_side.cpp)\n");
        return;
    }
    printf("  Hnsw >= 0.9x FAISS HNSW's QPS at equal recall: %s (%.2fx)\n",
           fq > 0 && oq / fq >= 0.9 ? "met" : "MISSED", fq > 0 ? oq / fq : 0);
    printf("  Flat >= 0.9x FAISS Flat's QPS: %s (%.2fx)\n",
           o->flat.qps / f->flat.qps >= 0.9 ? "met" : "MISSED", o->flat.qps / f->flat.qps);
}

int main(int argc, char **argv)
{
    bool quick = argc > 1 && !strcmp(argv[1], "--quick");
    size_t n = quick ? 20000 : 100000, nq = quick ? 200 : 1000;
    openblas_set_num_threads(1);
    char dir[PATH_MAX + 64];
    bench_plugin_dir(dir, sizeof dir);
    bb_error err = {0};
    if (bb_plugin_loader_create(BB_PLUGIN_LOADER_ONLY_EXPLICIT, &g_loader, &err) ||
        bb_plugin_loader_add_dirs(g_loader, dir, &err) || bb_plugin_loader_scan(g_loader, &err)) {
        fprintf(stderr, "bench_index: error: %s\n", err.msg);
        return 1;
    }
    printf("vector indexes vs FAISS (IndexFlatL2, IndexHNSWFlat, IndexIVFPQ): %zu x %d clustered "
           "synthetic points, %zu held-out queries, k = %d, one thread each\n"
           "Hnsw m = %d, ef_construction = %d; IvfPq nlist = %d, pq_m = %d (8-bit codes), %d "
           "k-means iterations; QPS: best of %d rounds, the two sides taking turns\n",
           n, DIM, nq, K, HNSW_M, HNSW_EFC, IVF_NLIST, IVF_PQ_M, IVF_ITERS, ROUNDS);
    float *x = clustered(n + nq, n), *q = x + n * DIM;
    results o = {0}, f = {0};
    ours mine;
    ours_build(&mine, x, n, &o);
    uint64_t *gt = NULL;
    search(&mine.flat, q, nq, &gt); /* exact: the ground truth */
    faiss_proc fp;
    bool have = faiss_start(&fp, x, n, q, nq, gt, &f);
    for (int round = 0; round < ROUNDS; round++) {
        for (int kind = 0; kind < 3; kind++) {
            size_t count = kind == 0 ? 1 : kind == 1 ? N_EF : N_NPROBE;
            for (size_t i = 0; i < count; i++) {
                ours_measure(&mine, kind, i, q, nq, gt, &o);
                if (have)
                    faiss_measure(&fp, kind, i, &f);
            }
        }
    }
    if (have)
        faiss_stop(&fp);
    report(&o, &f, have);
    mine.flat.t->destroy(mine.flat.inst);
    free(mine.hnsw);
    free(mine.ivf);
    free(gt);
    free(x);
    bb_plugin_loader_destroy(g_loader);
    return 0;
}
