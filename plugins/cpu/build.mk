# cpu::CpuBackend: the kernels are plain C written to vectorize, so this
# plugin gets its own optimisation flags (the Makefile includes
# plugins/*/build.mk and applies PLUGIN_CFLAGS_cpu to plugins/cpu/*.c).
# The heavy kernels are OpenBLAS, which picks its own code for the CPU at
# run time; ARCH_FLAGS (Makefile) is empty unless NATIVE=1.
PLUGIN_CFLAGS_cpu = -O3 $(ARCH_FLAGS) -fno-math-errno
PLUGIN_LIBS_cpu =
