/*
 * matmul.c — MatMul (numpy semantics: 1-D promotion, broadcast batch
 * dims), Gemm (transA/transB, alpha, beta, C broadcast to [M,N]) and Dot
 * (1-D . 1-D is a scalar, otherwise MatMul).
 *
 * float products go through oneDNN's dnnl_sgemm, which JIT-compiles for
 * the CPU it runs on (AVX-512 where there is one); a product with one row
 * or one column, and every double, through CBLAS (OpenBLAS), whose gemv
 * beats both gemms at batch 1 (figures: docs/DECISIONS.md, "CPU kernels").
 * When B has no batch dims the batch of A is folded into M so a whole
 * batch is one gemm call. Integer types use a plain i-k-j loop that the
 * compiler vectorizes, accumulating in the unsigned carrier (wraps).
 * Zero-sized M, N or K never reach BLAS (its leading-dimension rules
 * reject 0).
 */
#include <limits.h>
#include <stdatomic.h>
#include <string.h>

#include <cblas.h>
#include <dnnl.h>
#include <omp.h>

#include "cpu_internal.h"

/* oneDNN's GEMM runs on OpenMP threads; like OpenBLAS's thread count, how
 * many is a process-wide setting (cpu_gemm_set_threads), applied to the
 * calling thread before each product (an OpenMP thread count is per
 * thread). */
static atomic_int g_gemm_threads = 1;

void cpu_gemm_set_threads(int n)
{
    atomic_store(&g_gemm_threads, n > 0 ? n : 1);
    openblas_set_num_threads(n > 0 ? n : 1);
}

static bool mm_dtype_ok(int32_t dt)
{
    return dt == BB_DT_FLOAT || dt == BB_DT_DOUBLE || dt == BB_DT_INT32 ||
           dt == BB_DT_INT64 || dt == BB_DT_UINT32 || dt == BB_DT_UINT64;
}

#define IMM(T, UT)                                                                 \
    do {                                                                           \
        const T *restrict a = A;                                                   \
        const T *restrict b = B;                                                   \
        T *restrict c = C;                                                         \
        memset(c, 0, M * N * sizeof(T));                                           \
        for (size_t i = 0; i < M; i++)                                             \
            for (size_t k = 0; k < K; k++) {                                       \
                UT av = (UT)a[ta ? k * M + i : i * K + k];                         \
                const T *brow = b + k * N;                                         \
                T *crow = c + i * N;                                               \
                if (!tb) {                                                         \
                    for (size_t j = 0; j < N; j++)                                 \
                        crow[j] = (T)(UT)((UT)crow[j] + av * (UT)brow[j]);         \
                } else {                                                           \
                    for (size_t j = 0; j < N; j++)                                 \
                        crow[j] = (T)(UT)((UT)crow[j] + av * (UT)b[j * K + k]);    \
                }                                                                  \
            }                                                                      \
    } while (0)

void cpu_gemm_threads_apply(void)
{
    int threads = atomic_load_explicit(&g_gemm_threads, memory_order_relaxed);
    if (omp_get_max_threads() != threads)
        omp_set_num_threads(threads);
}

void cpu_sgemm(bool ta, bool tb, size_t M, size_t K, size_t N, float alpha, const float *A,
               const float *B, float beta, float *C)
{
    cpu_gemm_threads_apply();
    dnnl_dim_t m = (dnnl_dim_t)M, k = (dnnl_dim_t)K, n = (dnnl_dim_t)N;
    dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, A, ta ? m : k,
                                  B, tb ? k : n, beta, C, n);
    if (st != dnnl_success) /* arguments are checked by the callers; never seen */
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    (int)M, (int)N, (int)K, alpha, A, ta ? (int)M : (int)K, B,
                    tb ? (int)K : (int)N, beta, C, (int)N);
}

/* C[M,N] = op(A) op(B) (overwrites C); A is [M,K] ([K,M] when ta), B is
 * [K,N] ([N,K] when tb); contiguous row-major. alpha/beta for BLAS types
 * only: C = alpha*AB + beta*C. */
void cpu_gemm(int32_t dt, bool ta, bool tb, size_t M, size_t K, size_t N, float alpha,
              const void *A, const void *B, float beta, void *C)
{
    if (M == 0 || N == 0)
        return;
    if (K == 0) { /* the product is zero */
        if (dt == BB_DT_FLOAT) {
            float *c = C;
            for (size_t i = 0; i < M * N; i++)
                c[i] = beta == 0 ? 0 : beta * c[i];
        } else if (dt == BB_DT_DOUBLE) {
            double *c = C;
            for (size_t i = 0; i < M * N; i++)
                c[i] = beta == 0 ? 0 : beta * c[i];
        } else {
            memset(C, 0, M * N * bb_tensor_elem_size(dt));
        }
        return;
    }
    int m = (int)M, k = (int)K, n = (int)N;
    int lda = ta ? m : k, ldb = tb ? k : n;
    if (dt == BB_DT_FLOAT) {
        if (M == 1) /* y[N] = op(B)^T a */
            cblas_sgemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans, tb ? n : k,
                        tb ? k : n, alpha, B, ldb, A, 1, beta, C, 1);
        else if (N == 1) /* y[M] = op(A) b; b is contiguous either way */
            cblas_sgemv(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, ta ? k : m,
                        ta ? m : k, alpha, A, lda, B, 1, beta, C, 1);
        else
            cpu_sgemm(ta, tb, M, K, N, alpha, A, B, beta, C);
    } else if (dt == BB_DT_DOUBLE) {
        if (M == 1)
            cblas_dgemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans, tb ? n : k,
                        tb ? k : n, alpha, B, ldb, A, 1, beta, C, 1);
        else if (N == 1)
            cblas_dgemv(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, ta ? k : m,
                        ta ? m : k, alpha, A, lda, B, 1, beta, C, 1);
        else
            cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                        tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, A, lda, B, ldb,
                        beta, C, n);
    } else if (dt == BB_DT_INT32 || dt == BB_DT_UINT32) {
        IMM(uint32_t, uint32_t);
    } else {
        IMM(uint64_t, uint64_t);
    }
}

static int dims_fit_blas(cpu_run *r, size_t M, size_t K, size_t N)
{
    if (M > INT_MAX || K > INT_MAX || N > INT_MAX || (M && N > SIZE_MAX / M))
        return cpu_fail(r, BB_ELIMIT, "matrix dimensions %zu x %zu x %zu too large", M, K, N);
    return BB_OK;
}

/* numpy matmul over a and b (already checked: same dtype). */
static int matmul(cpu_run *r, const bb_value *av, const bb_value *bv, bb_value **out)
{
    const bb_tensor_view *a = cpu_tv(av), *b = cpu_tv(bv);
    char s1[128], s2[128];
    if (a->ndim == 0 || b->ndim == 0)
        return cpu_fail(r, BB_EINVAL, "inputs must have rank >= 1, got %s and %s",
                        cpu_shape_str(a->ndim, a->dims, s1, sizeof s1),
                        cpu_shape_str(b->ndim, b->dims, s2, sizeof s2));
    /* Promote 1-D operands to matrices. */
    int64_t ad[BB_MAX_DIMS + 1], bd[BB_MAX_DIMS + 1];
    uint32_t an = a->ndim, bn = b->ndim;
    if (an == 1) {
        ad[0] = 1;
        ad[1] = a->dims[0];
        an = 2;
    } else {
        memcpy(ad, a->dims, an * sizeof *ad);
    }
    if (bn == 1) {
        bd[0] = b->dims[0];
        bd[1] = 1;
        bn = 2;
    } else {
        memcpy(bd, b->dims, bn * sizeof *bd);
    }
    size_t M = (size_t)ad[an - 2], K = (size_t)ad[an - 1], N = (size_t)bd[bn - 1];
    if ((size_t)bd[bn - 2] != K)
        return cpu_fail(r, BB_EINVAL, "inner dimensions differ: %s x %s",
                        cpu_shape_str(a->ndim, a->dims, s1, sizeof s1),
                        cpu_shape_str(b->ndim, b->dims, s2, sizeof s2));
    /* Broadcast the batch dims. */
    uint32_t abn = an - 2, bbn = bn - 2, nb = abn > bbn ? abn : bbn;
    int64_t batch[BB_MAX_DIMS];
    size_t sa[BB_MAX_DIMS], sb[BB_MAX_DIMS];
    size_t stride_a = M * K, stride_b = K * N;
    for (int32_t d = (int32_t)nb - 1; d >= 0; d--) {
        int32_t ia = d - (int32_t)(nb - abn), ib = d - (int32_t)(nb - bbn);
        int64_t x = ia >= 0 ? ad[ia] : 1, y = ib >= 0 ? bd[ib] : 1;
        if (x != y && x != 1 && y != 1)
            return cpu_fail(r, BB_EINVAL, "batch dimensions do not broadcast: %s x %s",
                            cpu_shape_str(a->ndim, a->dims, s1, sizeof s1),
                            cpu_shape_str(b->ndim, b->dims, s2, sizeof s2));
        batch[d] = x == 1 ? y : x;
        sa[d] = x == 1 ? 0 : stride_a;
        sb[d] = y == 1 ? 0 : stride_b;
        stride_a *= (size_t)x;
        stride_b *= (size_t)y;
    }
    /* Output shape: batch, then M and N unless they came from a 1-D input. */
    int64_t od[BB_MAX_DIMS];
    uint32_t on = 0;
    for (uint32_t d = 0; d < nb; d++)
        od[on++] = batch[d];
    if (a->ndim != 1)
        od[on++] = (int64_t)M;
    if (b->ndim != 1)
        od[on++] = (int64_t)N;
    int rc = dims_fit_blas(r, M, K, N);
    if (rc || (rc = cpu_alloc_uninit(r, a->dtype, on, od, out)))
        return rc;
    uint8_t *C = cpu_tv(*out)->data;
    size_t es = bb_tensor_elem_size(a->dtype), nbatch = cpu_numel(nb, batch);
    if (nbatch == 0)
        return BB_OK;
    bool b_shared = true; /* B identical for every batch: fold batch into M */
    for (uint32_t d = 0; d < nb; d++)
        b_shared = b_shared && (sb[d] == 0 || batch[d] == 1);
    bool a_dense = true;
    for (uint32_t d = 0; d < nb; d++)
        a_dense = a_dense && (sa[d] != 0 || batch[d] == 1);
    if (b_shared && a_dense) {
        if (nbatch > INT_MAX / (M ? M : 1))
            return cpu_fail(r, BB_ELIMIT, "batch too large");
        cpu_gemm(a->dtype, false, false, nbatch * M, K, N, 1.0f, a->data, b->data, 0.0f, C);
        return BB_OK;
    }
    size_t idx[BB_MAX_DIMS] = {0}, oa = 0, ob = 0;
    for (size_t i = 0; i < nbatch; i++) {
        cpu_gemm(a->dtype, false, false, M, K, N, 1.0f, a->data + oa * es, b->data + ob * es,
                0.0f, C + i * M * N * es);
        for (int32_t d = (int32_t)nb - 1; d >= 0; d--) {
            if (++idx[d] < (size_t)batch[d]) {
                oa += sa[d];
                ob += sb[d];
                break;
            }
            idx[d] = 0;
            oa -= sa[d] * (size_t)(batch[d] - 1);
            ob -= sb[d] * (size_t)(batch[d] - 1);
        }
    }
    return BB_OK;
}

static int same_mm_dtype(cpu_run *r, const bb_value *a, const bb_value *b)
{
    int32_t x = cpu_tv(a)->dtype, y = cpu_tv(b)->dtype;
    if (x != y)
        return cpu_fail(r, BB_ETYPE, "input dtypes %s and %s differ", cpu_dtype_name(x),
                        cpu_dtype_name(y));
    if (!mm_dtype_ok(x))
        return cpu_fail_dtype(r, x);
    return BB_OK;
}

int cpu_k_MatMul(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out,
                 uint32_t n_out)
{
    (void)n_in;
    (void)n_out;
    int rc = same_mm_dtype(r, in[0], in[1]);
    return rc ? rc : matmul(r, in[0], in[1], out);
}

int cpu_k_Dot(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out, uint32_t n_out)
{
    (void)n_in;
    (void)n_out;
    int rc = same_mm_dtype(r, in[0], in[1]);
    if (rc)
        return rc;
    const bb_tensor_view *a = cpu_tv(in[0]), *b = cpu_tv(in[1]);
    if (a->ndim != 1 || b->ndim != 1)
        return matmul(r, in[0], in[1], out);
    if (a->dims[0] != b->dims[0])
        return cpu_fail(r, BB_EINVAL, "vector lengths %lld and %lld differ",
                        (long long)a->dims[0], (long long)b->dims[0]);
    if ((rc = cpu_alloc(r, a->dtype, 0, NULL, out)))
        return rc;
    size_t n = (size_t)a->dims[0];
    void *o = cpu_tv(*out)->data;
    /* integers accumulate in the unsigned type of their width (wraps) */
#define DOT(T)                                                                \
    do {                                                                      \
        const T *x = (const T *)(const void *)a->data;                        \
        const T *y = (const T *)(const void *)b->data;                        \
        T s = 0;                                                              \
        for (size_t i = 0; i < n; i++)                                        \
            s += x[i] * y[i];                                                 \
        *(T *)o = s;                                                          \
    } while (0)
    switch (a->dtype) {
    case BB_DT_FLOAT: DOT(float); break;
    case BB_DT_DOUBLE: DOT(double); break;
    case BB_DT_INT32:
    case BB_DT_UINT32: DOT(uint32_t); break;
    default: DOT(uint64_t); break;
    }
#undef DOT
    return BB_OK;
}

/* Integer Gemm epilogue: Y = alpha*AB + beta*C in double, saturated back. */
static void gemm_int_epilogue(int32_t dt, void *Y, const void *AB, size_t n, float alpha,
                              float beta, bool has_c)
{
    for (size_t i = 0; i < n; i++) {
        bb_tensor_view ab = {.dtype = dt, .data = (uint8_t *)(uintptr_t)AB};
        bb_tensor_view y = {.dtype = dt, .data = Y};
        double v = (double)alpha * cpu_elem_f64(&ab, i);
        if (has_c)
            v += (double)beta * cpu_elem_f64(&y, i);
        cpu_cast_buf((uint8_t *)Y + i * bb_tensor_elem_size(dt), dt, &v, BB_DT_DOUBLE, 1);
    }
}

int cpu_k_Gemm(cpu_run *r, bb_value *const *in, uint32_t n_in, bb_value **out, uint32_t n_out)
{
    (void)n_out;
    int rc = same_mm_dtype(r, in[0], in[1]);
    if (rc)
        return rc;
    const bb_tensor_view *a = cpu_tv(in[0]), *b = cpu_tv(in[1]);
    const bb_value *cv = n_in > 2 ? in[2] : NULL;
    char s1[128], s2[128];
    if (a->ndim != 2 || b->ndim != 2)
        return cpu_fail(r, BB_EINVAL, "A and B must be 2-D, got %s and %s",
                        cpu_shape_str(a->ndim, a->dims, s1, sizeof s1),
                        cpu_shape_str(b->ndim, b->dims, s2, sizeof s2));
    if (cv && cpu_tv(cv)->dtype != a->dtype)
        return cpu_fail(r, BB_ETYPE, "C dtype %s differs from A's %s",
                        cpu_dtype_name(cpu_tv(cv)->dtype), cpu_dtype_name(a->dtype));
    bool ta = cpu_attr_i(r->node, "transA", 0) != 0, tb = cpu_attr_i(r->node, "transB", 0) != 0;
    float alpha = cpu_attr_f(r->node, "alpha", 1.0f), beta = cpu_attr_f(r->node, "beta", 1.0f);
    size_t M = (size_t)(ta ? a->dims[1] : a->dims[0]), K = (size_t)(ta ? a->dims[0] : a->dims[1]);
    size_t KB = (size_t)(tb ? b->dims[1] : b->dims[0]), N = (size_t)(tb ? b->dims[0] : b->dims[1]);
    if (K != KB)
        return cpu_fail(r, BB_EINVAL, "inner dimensions differ: A %s%s x B %s%s",
                        cpu_shape_str(2, a->dims, s1, sizeof s1), ta ? "^T" : "",
                        cpu_shape_str(2, b->dims, s2, sizeof s2), tb ? "^T" : "");
    if ((rc = dims_fit_blas(r, M, K, N)))
        return rc;
    int64_t od[2] = {(int64_t)M, (int64_t)N};
    if ((rc = cpu_alloc_uninit(r, a->dtype, 2, od, out)))
        return rc;
    void *Y = cpu_tv(*out)->data;
    bool use_c = cv && beta != 0.0f;
    if (use_c && (rc = cpu_bcast_to(r, cv, 2, od, Y, "C")))
        return rc;
    if (cpu_dtype_is_float(a->dtype)) {
        cpu_gemm(a->dtype, ta, tb, M, K, N, alpha, a->data, b->data, use_c ? beta : 0.0f, Y);
        return BB_OK;
    }
    /* Integers: exact product, then the float epilogue. */
    size_t es = bb_tensor_elem_size(a->dtype);
    void *ab = cpu_scratch(r, M * N * es + 1);
    if (!ab)
        return BB_ENOMEM;
    cpu_gemm(a->dtype, ta, tb, M, K, N, 1.0f, a->data, b->data, 0.0f, ab);
    gemm_int_epilogue(a->dtype, Y, ab, M * N, alpha, beta, use_c);
    return BB_OK;
}
