# nn: the GEMMs are OpenBLAS (which picks its own kernels at run time); the
# elementwise loops (activations, optimizer steps) are plain C written to
# vectorize. ARCH_FLAGS (Makefile) is empty unless NATIVE=1.
PLUGIN_CFLAGS_nn = -O3 $(ARCH_FLAGS) -fno-math-errno
PLUGIN_LIBS_nn =
