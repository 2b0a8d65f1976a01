# cpu::CpuBackend: the kernels are plain C written to vectorize, so this
# plugin gets its own optimisation flags (the Makefile includes
# plugins/*/build.mk and applies PLUGIN_CFLAGS_cpu to plugins/cpu/*.c).
# The heavy kernels are oneDNN's f32 GEMM (JIT-compiled at run time for the
# CPU it runs on) and OpenBLAS's gemv and f64 GEMM (which pick their own
# code at run time); ARCH_FLAGS (Makefile) is empty unless NATIVE=1.
PLUGIN_CFLAGS_cpu = -O3 $(ARCH_FLAGS) -fno-math-errno
PLUGIN_LIBS_cpu = -ldnnl -lgomp
