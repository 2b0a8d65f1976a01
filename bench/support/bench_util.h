/*
 * bench_util.h — what every benchmark needs: a monotonic clock, order
 * statistics over samples, CPU placement and a fatal-error exit.
 * Linked into every benchmark (the Makefile adds bench/support/ to each).
 */
#ifndef BB_BENCH_UTIL_H
#define BB_BENCH_UTIL_H

#include <stdbool.h>
#include <stddef.h>

/* CLOCK_MONOTONIC in nanoseconds. */
double bench_now_ns(void);

/* The p-quantile (0..1, nearest rank) of v[n]; sorts v in place. */
double bench_percentile(double *v, size_t n, double p);
/* The median of v[n] (mean of the middle two when n is even); sorts v. */
double bench_median(double *v, size_t n);
double bench_mean(const double *v, size_t n);

/* Pin this process (and the children it forks or spawns later) to CPU 0,
 * or let it run on every online CPU. Exits on failure. */
void bench_place(bool pinned);

/* The build's plugin directory: $BB_BUILD/lib/bytesandbrains/plugins, else
 * the one beside this program's build (<build>/bench/X -> <build>/lib/...). */
void bench_plugin_dir(char *out, size_t cap);
/* This program's own directory (for programs built beside it). */
void bench_exe_dir(char *out, size_t cap);

/* Print "PROG: what: strerror(errno)" and exit 1. */
_Noreturn void bench_die(const char *what);

#endif
