# onnx: nn::Onnx, the trainer of ONNX graphs. Its forward pass runs the
# kernels of cpu::CpuBackend: onnx.so links the CPU plugin's objects (all
# but the component, cpu_backend.c), compiled once with the CPU plugin's
# flags — one implementation of every kernel, two plugins. The gradient
# rules are plain C loops written to vectorize; ARCH_FLAGS (Makefile) is
# empty unless NATIVE=1.
PLUGIN_CFLAGS_onnx = -O3 $(ARCH_FLAGS) -fno-math-errno
PLUGIN_LIBS_onnx = $(PLUGIN_LIBS_cpu)
ONNX_CPU_KERNELS = $(patsubst %.c,$(B)/obj/%.o,$(filter-out plugins/cpu/cpu_backend.c,$(wildcard plugins/cpu/*.c)))
$(B)/lib/bytesandbrains/plugins/onnx.so: $(ONNX_CPU_KERNELS)
