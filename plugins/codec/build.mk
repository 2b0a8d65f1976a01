# codec: the per-element loops (quantize, f16 conversion, k-means distances)
# are plain C written to vectorize.
PLUGIN_CFLAGS_codec = -O3 -fno-math-errno
PLUGIN_LIBS_codec =
