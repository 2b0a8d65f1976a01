# codec: the per-element loops (quantize, f16 conversion, k-means distances)
# are plain C written to vectorize. ARCH_FLAGS (Makefile) is empty unless
# NATIVE=1.
PLUGIN_CFLAGS_codec = -O3 $(ARCH_FLAGS) -fno-math-errno
PLUGIN_LIBS_codec =
