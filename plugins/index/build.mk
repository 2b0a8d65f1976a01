# index: the distance kernels (distance.c) use GCC vector extensions and the
# scans are plain C loops, compiled for the host's vector width; the bulk
# products (Flat's batches, k-means) are OpenBLAS. AVX-512 stays off so the
# tests run under valgrind (see plugins/cpu/build.mk).
INDEX_ARCH_FLAGS ?= -march=native -mno-avx512f
PLUGIN_CFLAGS_index = -O3 $(INDEX_ARCH_FLAGS) -fno-math-errno
PLUGIN_LIBS_index =
