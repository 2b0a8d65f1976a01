// faiss_side.cpp — FAISS's own indexes on bench_index's data, so the
// index plugin is measured against them in the same run, turn about.
//
//   faiss_side DIR M EF_CONSTRUCTION NLIST PQ_M ITERS
//
// DIR holds what bench_index wrote: base.f32 and query.f32 (u32 rows,
// u32 dim, rows*dim f32) and gt.u64 (u32 rows, u32 k, the exact ids).
// Builds IndexFlatL2, IndexHNSWFlat and IndexIVFPQ at those parameters and
// prints "built flat=S hnsw=S ivfpq=S" (seconds); then answers one request
// per stdin line — "flat", "hnsw EF_SEARCH", "ivfpq NPROBE" — with
// "qps=Q recall=R" (the best of two searches of every query), until EOF.
// bench_index alternates these with its own measurements, so load from
// elsewhere on the machine falls on both sides alike.
// Built only by `make bench` (C++, Debian's libfaiss-dev: a static
// libfaiss.a with OpenMP and BLAS). One thread, like the plugin on the
// engine thread: omp_set_num_threads(1), openblas_set_num_threads(1).
#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIVFPQ.h>
#include <omp.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" void openblas_set_num_threads(int);

namespace {

struct Matrix {
    uint32_t rows = 0, cols = 0;
    std::vector<float> f;
    std::vector<uint64_t> u;
};

bool read_matrix(const std::string &path, bool ids, Matrix &m)
{
    FILE *fp = std::fopen(path.c_str(), "rb");
    if (!fp)
        return false;
    bool ok = std::fread(&m.rows, 4, 1, fp) == 1 && std::fread(&m.cols, 4, 1, fp) == 1 &&
              m.rows > 0 && m.cols > 0 && m.cols <= 65536 && m.rows <= 100000000;
    size_t n = ok ? (size_t)m.rows * m.cols : 0;
    if (ok && ids) {
        m.u.resize(n);
        ok = std::fread(m.u.data(), 8, n, fp) == n;
    } else if (ok) {
        m.f.resize(n);
        ok = std::fread(m.f.data(), 4, n, fp) == n;
    }
    std::fclose(fp);
    return ok;
}

double now_s()
{
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// Best of two timed searches of every query; recall@k against gt.
void measure(faiss::Index &idx, const Matrix &q, const Matrix &gt, double &qps, double &recall)
{
    uint32_t k = gt.cols;
    std::vector<float> d((size_t)q.rows * k);
    std::vector<faiss::Index::idx_t> ids((size_t)q.rows * k);
    double best = 1e30;
    for (int r = 0; r < 2; r++) {
        double t0 = now_s();
        idx.search(q.rows, q.f.data(), k, d.data(), ids.data());
        double dt = now_s() - t0;
        best = dt < best ? dt : best;
    }
    size_t hit = 0;
    for (size_t i = 0; i < q.rows; i++)
        for (uint32_t a = 0; a < k; a++)
            for (uint32_t b = 0; b < k; b++)
                hit += (uint64_t)ids[i * k + b] == gt.u[i * k + a];
    qps = q.rows / best;
    recall = (double)hit / ((double)q.rows * k);
}

} // namespace

int main(int argc, char **argv)
{
    if (argc != 7) {
        std::fprintf(stderr, "usage: %s DIR M EF_CONSTRUCTION NLIST PQ_M ITERS\n", argv[0]);
        return 2;
    }
    std::string dir = argv[1];
    int M = std::atoi(argv[2]), efc = std::atoi(argv[3]), nlist = std::atoi(argv[4]);
    int pqm = std::atoi(argv[5]), iters = std::atoi(argv[6]);
    Matrix base, q, gt;
    if (M < 2 || efc < 1 || nlist < 1 || pqm < 1 || iters < 1) {
        std::fprintf(stderr, "faiss_side: error: bad parameters\n");
        return 2;
    }
    if (!read_matrix(dir + "/base.f32", false, base) || !read_matrix(dir + "/query.f32", false, q) ||
        !read_matrix(dir + "/gt.u64", true, gt) || q.cols != base.cols || gt.rows != q.rows) {
        std::fprintf(stderr, "faiss_side: error: cannot read the data in %s\n", dir.c_str());
        return 1;
    }
    omp_set_num_threads(1);
    openblas_set_num_threads(1);
    uint32_t d = base.cols;

    faiss::IndexFlatL2 flat(d);
    double t0 = now_s();
    flat.add(base.rows, base.f.data());
    double flat_s = now_s() - t0;

    faiss::IndexHNSWFlat hnsw(d, M);
    hnsw.hnsw.efConstruction = efc;
    t0 = now_s();
    hnsw.add(base.rows, base.f.data());
    double hnsw_s = now_s() - t0;

    faiss::IndexFlatL2 coarse(d);
    faiss::IndexIVFPQ ivfpq(&coarse, d, nlist, pqm, 8);
    ivfpq.cp.niter = iters;
    ivfpq.pq.cp.niter = iters;
    t0 = now_s();
    ivfpq.train(base.rows, base.f.data());
    ivfpq.add(base.rows, base.f.data());
    double ivfpq_s = now_s() - t0;
    std::printf("built flat=%.4f hnsw=%.4f ivfpq=%.4f\n", flat_s, hnsw_s, ivfpq_s);
    std::fflush(stdout);

    char line[128];
    while (std::fgets(line, sizeof line, stdin)) {
        int v = 0;
        double qps = 0, recall = 0;
        if (!std::strncmp(line, "flat", 4)) {
            measure(flat, q, gt, qps, recall);
        } else if (std::sscanf(line, "hnsw %d", &v) == 1 && v > 0) {
            hnsw.hnsw.efSearch = v;
            measure(hnsw, q, gt, qps, recall);
        } else if (std::sscanf(line, "ivfpq %d", &v) == 1 && v > 0) {
            ivfpq.nprobe = v;
            measure(ivfpq, q, gt, qps, recall);
        } else {
            std::fprintf(stderr, "faiss_side: error: unknown request %s", line);
            return 2;
        }
        std::printf("qps=%.1f recall=%.4f\n", qps, recall);
        std::fflush(stdout);
    }
    return 0;
}
