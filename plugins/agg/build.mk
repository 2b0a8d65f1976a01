# agg: the aggregation kernels (reduce.c) are plain C loops written to
# vectorize; -O3 and the host's vector width make them memory-bound.
# AVX-512 stays off so the tests run under valgrind (see plugins/cpu/build.mk).
AGG_ARCH_FLAGS ?= -march=native -mno-avx512f
PLUGIN_CFLAGS_agg = -O3 $(AGG_ARCH_FLAGS) -fno-math-errno
PLUGIN_LIBS_agg =
