/*
 * bench_util.c — the clock, order statistics, CPU placement and fatal
 * errors of bench_util.h.
 */
#include "bench/support/bench_util.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bench_percentile(double *v, size_t n, double p)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof *v, cmp_double);
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i];
}

double bench_median(double *v, size_t n)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double bench_mean(const double *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += v[i];
    return n ? s / (double)n : 0;
}

void bench_place(bool pinned)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (pinned) {
        CPU_SET(0, &set);
    } else {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        for (long i = 0; i < n && i < CPU_SETSIZE; i++)
            CPU_SET((int)i, &set);
    }
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        bench_die("sched_setaffinity");
}

_Noreturn void bench_die(const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what, strerror(errno));
    exit(1);
}

void bench_exe_dir(char *out, size_t cap)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(out, cap, ".");
        return;
    }
    exe[n] = '\0';
    char *s = strrchr(exe, '/');
    if (s)
        *s = '\0';
    snprintf(out, cap, "%s", exe);
}

void bench_plugin_dir(char *out, size_t cap)
{
    const char *env = getenv("BB_BUILD");
    if (env && *env) {
        snprintf(out, cap, "%s/lib/bytesandbrains/plugins", env);
        return;
    }
    char dir[PATH_MAX];
    bench_exe_dir(dir, sizeof dir); /* <build>/bench */
    char *s = strrchr(dir, '/');
    if (s)
        *s = '\0';
    snprintf(out, cap, "%s/lib/bytesandbrains/plugins", dir);
}
