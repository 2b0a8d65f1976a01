/*
 * vec.h — the float reductions the gradient rules run over planes and rows,
 * written so the compiler vectorizes them without -ffast-math: 16
 * independent float lanes (no reassociation of one sum), folded into a
 * double at the end. A plane of a few thousand values keeps float's error
 * far below what training notices; the fold is exact enough.
 */
#ifndef BB_ONNX_VEC_H
#define BB_ONNX_VEC_H

#include <stddef.h>

#define VEC_LANES 16

/* sum(x) */
static inline double vec_sum(const float *restrict x, size_t n)
{
    float acc[VEC_LANES] = {0};
    size_t i = 0;
    for (; i + VEC_LANES <= n; i += VEC_LANES)
        for (int l = 0; l < VEC_LANES; l++)
            acc[l] += x[i + l];
    double s = 0;
    for (; i < n; i++)
        s += x[i];
    for (int l = 0; l < VEC_LANES; l++)
        s += acc[l];
    return s;
}

/* sum((x - mu)^2) */
static inline double vec_sqdev(const float *restrict x, size_t n, float mu)
{
    float acc[VEC_LANES] = {0};
    size_t i = 0;
    for (; i + VEC_LANES <= n; i += VEC_LANES)
        for (int l = 0; l < VEC_LANES; l++)
            acc[l] += (x[i + l] - mu) * (x[i + l] - mu);
    double s = 0;
    for (; i < n; i++)
        s += (double)(x[i] - mu) * (x[i] - mu);
    for (int l = 0; l < VEC_LANES; l++)
        s += acc[l];
    return s;
}

/* sum(g) and sum(g (x - mu)) */
static inline void vec_gsums(const float *restrict g, const float *restrict x, size_t n, float mu,
                             double *sg, double *sgx)
{
    float a[VEC_LANES] = {0}, b[VEC_LANES] = {0};
    size_t i = 0;
    for (; i + VEC_LANES <= n; i += VEC_LANES)
        for (int l = 0; l < VEC_LANES; l++) {
            a[l] += g[i + l];
            b[l] += g[i + l] * (x[i + l] - mu);
        }
    double s = 0, t = 0;
    for (; i < n; i++) {
        s += g[i];
        t += (double)g[i] * (x[i] - mu);
    }
    for (int l = 0; l < VEC_LANES; l++) {
        s += a[l];
        t += b[l];
    }
    *sg += s;
    *sgx += t;
}

/* sum(a b) */
static inline double vec_dot(const float *restrict a, const float *restrict b, size_t n)
{
    float acc[VEC_LANES] = {0};
    size_t i = 0;
    for (; i + VEC_LANES <= n; i += VEC_LANES)
        for (int l = 0; l < VEC_LANES; l++)
            acc[l] += a[i + l] * b[i + l];
    double s = 0;
    for (; i < n; i++)
        s += (double)a[i] * b[i];
    for (int l = 0; l < VEC_LANES; l++)
        s += acc[l];
    return s;
}

#endif
