// faiss_side.cpp — FAISS's own indexes on bench_index's data, so the
// index plugin is measured against them in the same run.
//
//   faiss_side DIR M EF_CONSTRUCTION EF_LIST NLIST PQ_M NPROBE_LIST ITERS
//
// DIR holds what bench_index wrote: base.f32 and query.f32 (u32 rows,
// u32 dim, rows*dim f32) and gt.u64 (u32 rows, u32 k, the exact ids).
// Built only by `make bench` (C++, Debian's libfaiss-dev: a static
// libfaiss.a with OpenMP and BLAS). One thread, like the plugin on the
// engine thread: omp_set_num_threads(1), openblas_set_num_threads(1).
// Prints one line per measurement:
//   flat build_s=B qps=Q recall=R
//   hnsw ef=E build_s=B qps=Q recall=R
//   ivfpq nprobe=P build_s=B qps=Q recall=R
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

std::vector<int> parse_list(const char *s)
{
    std::vector<int> v;
    for (const char *p = s; *p;) {
        char *end;
        long x = std::strtol(p, &end, 10);
        if (end == p || x < 1)
            return {};
        v.push_back((int)x);
        p = *end == ',' ? end + 1 : end;
    }
    return v;
}

// Best of five timed searches of every query; recall@k against gt.
void measure(faiss::Index &idx, const Matrix &q, const Matrix &gt, double &qps, double &recall)
{
    uint32_t k = gt.cols;
    std::vector<float> d((size_t)q.rows * k);
    std::vector<faiss::Index::idx_t> ids((size_t)q.rows * k);
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
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
    if (argc != 9) {
        std::fprintf(stderr, "usage: %s DIR M EF_CONSTRUCTION EF_LIST NLIST PQ_M NPROBE_LIST "
                             "ITERS\n", argv[0]);
        return 2;
    }
    std::string dir = argv[1];
    int M = std::atoi(argv[2]), efc = std::atoi(argv[3]), nlist = std::atoi(argv[5]);
    int pqm = std::atoi(argv[6]), iters = std::atoi(argv[8]);
    std::vector<int> efs = parse_list(argv[4]), nprobes = parse_list(argv[7]);
    Matrix base, q, gt;
    if (M < 2 || efc < 1 || nlist < 1 || pqm < 1 || iters < 1 || efs.empty() ||
        nprobes.empty()) {
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
    double qps, recall;

    faiss::IndexFlatL2 flat(d);
    double t0 = now_s();
    flat.add(base.rows, base.f.data());
    double build = now_s() - t0;
    measure(flat, q, gt, qps, recall);
    std::printf("flat build_s=%.4f qps=%.1f recall=%.4f\n", build, qps, recall);
    std::fflush(stdout);

    faiss::IndexHNSWFlat hnsw(d, M);
    hnsw.hnsw.efConstruction = efc;
    t0 = now_s();
    hnsw.add(base.rows, base.f.data());
    build = now_s() - t0;
    for (int ef : efs) {
        hnsw.hnsw.efSearch = ef;
        measure(hnsw, q, gt, qps, recall);
        std::printf("hnsw ef=%d build_s=%.4f qps=%.1f recall=%.4f\n", ef, build, qps, recall);
        std::fflush(stdout);
    }

    faiss::IndexFlatL2 coarse(d);
    faiss::IndexIVFPQ ivfpq(&coarse, d, nlist, pqm, 8);
    ivfpq.cp.niter = iters;
    ivfpq.pq.cp.niter = iters;
    ivfpq.verbose = false;
    t0 = now_s();
    ivfpq.train(base.rows, base.f.data());
    ivfpq.add(base.rows, base.f.data());
    build = now_s() - t0;
    for (int np : nprobes) {
        ivfpq.nprobe = np;
        measure(ivfpq, q, gt, qps, recall);
        std::printf("ivfpq nprobe=%d build_s=%.4f qps=%.1f recall=%.4f\n", np, build, qps, recall);
        std::fflush(stdout);
    }
    return 0;
}
