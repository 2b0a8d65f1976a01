# index: the distance kernels (distance.c) use GCC vector extensions and are
# cloned for AVX2 at run time (target_clones); the scans are plain C loops
# and the bulk products (Flat's batches, k-means) OpenBLAS, which picks its
# own kernels. ARCH_FLAGS (Makefile) is empty unless NATIVE=1.
PLUGIN_CFLAGS_index = -O3 $(ARCH_FLAGS) -fno-math-errno
PLUGIN_LIBS_index =
