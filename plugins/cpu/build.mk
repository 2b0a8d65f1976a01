# cpu::CpuBackend: the kernels are plain C written to vectorize, so this
# plugin gets its own optimisation flags (the Makefile includes
# plugins/*/build.mk and applies PLUGIN_CFLAGS_cpu to plugins/cpu/*.c).
#
# -march=native, minus AVX-512: valgrind cannot decode AVX-512 (EVEX)
# instructions, and the tests must run under it. The cost is small: the
# heavy kernels are OpenBLAS, which picks its own (AVX-512) code at run time.
# For a build with everything the CPU has:
#   make CPU_ARCH_FLAGS=-march=native
CPU_ARCH_FLAGS ?= -march=native -mno-avx512f
PLUGIN_CFLAGS_cpu = -O3 $(CPU_ARCH_FLAGS) -fno-math-errno
PLUGIN_LIBS_cpu = -ldnnl -lgomp
