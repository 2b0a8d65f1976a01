# onnx: nn::Onnx, the trainer of ONNX graphs. Its forward pass runs the
# kernels of cpu::CpuBackend: onnx.so links the CPU plugin's objects (all
# but the component, cpu_backend.c), compiled once with the CPU plugin's
# flags — one implementation of every kernel, two plugins. The gradient
# rules are plain C loops written to vectorize, with the same flags (AVX-512
# off so the tests run under valgrind; see plugins/cpu/build.mk).
ONNX_ARCH_FLAGS ?= -march=native -mno-avx512f
PLUGIN_CFLAGS_onnx = -O3 $(ONNX_ARCH_FLAGS) -fno-math-errno
PLUGIN_LIBS_onnx = $(PLUGIN_LIBS_cpu)
ONNX_CPU_KERNELS = $(patsubst %.c,$(B)/obj/%.o,$(filter-out plugins/cpu/cpu_backend.c,$(wildcard plugins/cpu/*.c)))
$(B)/lib/bytesandbrains/plugins/onnx.so: $(ONNX_CPU_KERNELS)
