# nn: the GEMMs are OpenBLAS (which picks its own kernels at run time); the
# elementwise loops (activations, optimizer steps) are plain C written to
# vectorize. AVX-512 stays off so the tests run under valgrind.
NN_ARCH_FLAGS ?= -march=native -mno-avx512f
PLUGIN_CFLAGS_nn = -O3 $(NN_ARCH_FLAGS) -fno-math-errno
PLUGIN_LIBS_nn =
