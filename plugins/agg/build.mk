# agg: the aggregation kernels (reduce.c) are plain C loops written to
# vectorize; -O3 makes them memory-bound. ARCH_FLAGS (Makefile) is empty
# unless NATIVE=1.
PLUGIN_CFLAGS_agg = -O3 $(ARCH_FLAGS) -fno-math-errno
PLUGIN_LIBS_agg =
