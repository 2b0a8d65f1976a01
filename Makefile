# BytesAndBrains — one entry point: build, check, demo, bench, install.
#
#   make            build everything into build/
#   make check      install missing packages, build, run every test
#   make demo       install missing packages, build the programs, run the federated demo
#   make demo-gossip  the same for serverless gossip learning (or make demo DEMO=gossip)
#   make programs   libbbir, bbc, bbd, bbctl and the plugins only
#   make bench      run the benchmarks (tables of ratios against baselines;
#                   installs libfaiss-dev for bench_index's FAISS side), then the
#                   scale run of gossip learning (64 bbd processes, 2 minutes) and
#                   the soak (bench/soak_federated.sh: 10,000 federated rounds, ~17 min)
#   make install    PREFIX=/usr/local DESTDIR=
#   make SAN=1 ...  AddressSanitizer + UndefinedBehaviorSanitizer build (build-san/)
#   make fuzz       the libFuzzer targets fuzz/fuzz_*.c (clang, ASan + UBSan;
#                   build-fuzz/fuzz/); make fuzz-smoke runs each briefly
#                   (part of make check), FUZZ_SECONDS=600 make fuzz-smoke longer
#   make LTO=0 ...  bbd without link-time optimization (a faster build)
#   make NATIVE=1 ... the plugins' kernels (agg, codec, cpu, nn) for this machine's CPU
#                   (-march=native minus AVX-512; build-native/). Without it they
#                   target baseline x86-64, so installed plugins run on any
#                   x86-64 machine. ARCH_FLAGS=... sets the flags outright.
#
# Engine invariants (BBE__ASSERT: ring bounds, reference counts, site and op
# indexes; libbbengine/src/engine_internal.h) are compiled in by -DBBE_CHECKED.
# The engine is built twice into the same build dir: checked objects
# (obj-checked/ -> lib/libbbengine-checked.a) for the unit tests, which are
# compiled checked too, and release objects for the programs, the libraries
# and the benches, where the checks compile to nothing. So make check, make
# demo and make bench share build/ without rebuilding each other's objects.
# SAN=1 checks the release engine as well (bbd under the sanitizers asserts).
#
# Sources are found by wildcard, so adding a file needs no Makefile edit:
#   libbbir/src/*.c          -> lib/libbbir.so, lib/libbbir.a
#   libbbengine/src/*.c      -> lib/libbbengine.so, lib/libbbengine.a
#   bbc/*.c (not main.c)     -> lib/libbbc.a,     bbc/main.c  -> bin/bbc
#   bbd/host/*.c             -> lib/libbbdhost.a, bbd/main.c  -> bin/bbd
#   bbsim/*.c (not main.c)   -> lib/libbbsim.a,   bbsim/main.c -> bin/bbsim
#   bbctl/*.c                -> bin/bbctl
#   plugins/NAME/*.c         -> lib/bytesandbrains/plugins/NAME.so
#   tests/plugins/NAME/*.c   -> tests/plugins/NAME.so
#   tests/unit/test_X.c      -> tests/test_X (cmocka; + tests/unit/support/*.c)
#   examples/NAME/*.c        -> examples/NAME, run to write testdata/NAME.onnx
#   bench/bench_X.c          -> bench/bench_X     (+ bench/support/*.c)
#   tests/tools/X.c          -> tests/tools/X     (programs the integration tests run)
#   fuzz/fuzz_X.c            -> build-fuzz/fuzz/fuzz_X (make fuzz; + fuzz/support/*.c)
#   sim/federated-kK.onnx    the federated example for K clients a round, compiled:
#                            the artifacts of the bbsim scenarios in examples/sim/
#   sim/gossip.onnx          the gossip example, compiled (examples/sim/gossip-8.json)

PREFIX  ?= /usr/local
DESTDIR ?=
SAN     ?= 0
CC      ?= cc
FUZZ    ?= 0

# The fuzz build: clang with libFuzzer's coverage hooks, ASan and UBSan in
# every object (the plugins too: they are fuzzed through create()), its own
# build directory. Set by `make fuzz`, not by hand.
ifeq ($(FUZZ),1)
BUILD    = build-fuzz
CC       = clang
SANFLAGS = -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer \
	-fno-sanitize-recover=undefined
LTO      = 0
else ifeq ($(SAN),1)
BUILD   ?= build-san
SANFLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else
SANFLAGS =
endif
# Code for this machine only on request: a plugin built with -march=native
# dies with SIGILL on an older CPU. Its own build directory, because make
# does not rebuild objects when only flags change. AVX-512 stays off so the
# tests run under valgrind, which cannot decode it; OpenBLAS picks its own
# AVX-512 kernels at run time anyway. Measured: docs/DECISIONS.md.
NATIVE  ?= 0
ifeq ($(NATIVE),1)
BUILD   ?= build-native
ARCH_FLAGS ?= -march=native -mno-avx512f
else
ARCH_FLAGS ?=
endif
BUILD   ?= build

PLUGIN_DIR_INSTALLED = $(PREFIX)/lib/bytesandbrains/plugins
PKGS     = libprotobuf-c libuv libcjson libsodium libcrypto zlib
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) openblas 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
BLAS_LIBS  := $(shell pkg-config --libs openblas 2>/dev/null || echo -lopenblas)

OPT     ?= -O2
# bbd is linked as one link-time-optimized image (see its rule); objects
# carry both LTO bytecode and machine code, so every other link is as before.
# Off under the sanitizers.
ifeq ($(SAN),1)
LTO     ?= 0
else
LTO     ?= 1
endif
ifeq ($(LTO),1)
LTO_CFLAGS  = -flto=auto -ffat-lto-objects
LTO_LDFLAGS = -flto=auto $(OPT)
endif
# check / demo / bench build in parallel on every core.
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
CFLAGS_COMMON = -std=c11 -D_GNU_SOURCE $(OPT) -g -fPIC -pthread \
	-Wall -Wextra -Werror -Wno-missing-field-initializers \
	-I. -Ilibbbir/include -Ilibbbengine/include -I$(BUILD)/gen $(PKG_CFLAGS) $(SANFLAGS) $(LTO_CFLAGS) \
	-DBB_PLUGIN_DIR_INSTALLED='"$(PLUGIN_DIR_INSTALLED)"' -MMD -MP
# Generated protobuf-c code is not ours to keep warning-free.
CFLAGS_GEN = -std=c11 -D_GNU_SOURCE $(OPT) -g -fPIC -I$(BUILD)/gen $(SANFLAGS) -MMD -MP
LDFLAGS_COMMON = $(SANFLAGS) -pthread
SYS_LIBS = $(PKG_LIBS) $(BLAS_LIBS) -ldl -lm

B = $(BUILD)
RPATH_BIN = -Wl,-rpath,'$$ORIGIN/../lib'

# ---- sources -------------------------------------------------------------
PROTOS      = $(wildcard proto/*.proto)
GEN_C       = $(patsubst proto/%.proto,$(B)/gen/%.pb-c.c,$(PROTOS))
GEN_H       = $(GEN_C:.c=.h)
GEN_O       = $(patsubst $(B)/gen/%.c,$(B)/obj/gen/%.o,$(GEN_C))

LIBBBIR_SRC = $(wildcard libbbir/src/*.c)
LIBBBIR_O   = $(patsubst %.c,$(B)/obj/%.o,$(LIBBBIR_SRC)) $(GEN_O)
ENGINE_SRC  = $(wildcard libbbengine/src/*.c)
ENGINE_O    = $(patsubst %.c,$(B)/obj/%.o,$(ENGINE_SRC))
ENGINE_CHECKED_O = $(patsubst %.c,$(B)/obj-checked/%.o,$(ENGINE_SRC))
BBC_SRC     = $(filter-out bbc/main.c,$(wildcard bbc/*.c))
BBC_O       = $(patsubst %.c,$(B)/obj/%.o,$(BBC_SRC))
HOST_SRC    = $(wildcard bbd/host/*.c)
HOST_O      = $(patsubst %.c,$(B)/obj/%.o,$(HOST_SRC))
BBCTL_SRC   = $(wildcard bbctl/*.c)
BBSIM_SRC   = $(filter-out bbsim/main.c,$(wildcard bbsim/*.c))
BBSIM_O     = $(patsubst %.c,$(B)/obj/%.o,$(BBSIM_SRC))

LIBBBIR_SO  = $(B)/lib/libbbir.so
LIBBBIR_A   = $(B)/lib/libbbir.a
LIBENGINE_A = $(B)/lib/libbbengine.a
LIBENGINE_CHECKED_A = $(B)/lib/libbbengine-checked.a
LIBENGINE_SO = $(B)/lib/libbbengine.so
LIBBBC_A    = $(B)/lib/libbbc.a
LIBHOST_A   = $(B)/lib/libbbdhost.a
LIBBBSIM_A  = $(B)/lib/libbbsim.a

PLUGIN_NAMES = $(notdir $(patsubst %/,%,$(dir $(wildcard plugins/*/*.c))))
PLUGIN_NAMES := $(sort $(PLUGIN_NAMES))
PLUGINS      = $(patsubst %,$(B)/lib/bytesandbrains/plugins/%.so,$(PLUGIN_NAMES))
TPLUGIN_NAMES := $(sort $(notdir $(patsubst %/,%,$(dir $(wildcard tests/plugins/*/*.c)))))
TPLUGINS     = $(patsubst %,$(B)/tests/plugins/%.so,$(TPLUGIN_NAMES))

TEST_SRC     = $(wildcard tests/unit/test_*.c)
TEST_SUPPORT = $(wildcard tests/unit/support/*.c)
TEST_SUPPORT_O = $(patsubst %.c,$(B)/obj/%.o,$(TEST_SUPPORT))
TESTS        = $(patsubst tests/unit/%.c,$(B)/tests/%,$(TEST_SRC))

EXAMPLE_NAMES := $(sort $(notdir $(patsubst %/,%,$(dir $(wildcard examples/*/*.c)))))
EXAMPLES     = $(patsubst %,$(B)/examples/%,$(EXAMPLE_NAMES))
EXAMPLE_ONNX = $(patsubst %,testdata/%.onnx,$(EXAMPLE_NAMES))

SIM_ARTIFACTS = $(patsubst %,$(B)/sim/federated-k%.onnx,4 50 100) $(B)/sim/gossip.onnx

BENCH_SRC    = $(wildcard bench/bench_*.c)
BENCHES      = $(patsubst bench/%.c,$(B)/bench/%,$(BENCH_SRC))
BENCH_SUPPORT_O = $(patsubst %.c,$(B)/obj/%.o,$(wildcard bench/support/*.c))

TOOL_SRC     = $(wildcard tests/tools/*.c)
TOOLS        = $(patsubst tests/tools/%.c,$(B)/tests/tools/%,$(TOOL_SRC))

FUZZ_SRC     = $(wildcard fuzz/fuzz_*.c)
FUZZERS      = $(patsubst fuzz/%.c,$(B)/fuzz/%,$(FUZZ_SRC))
FUZZ_SUPPORT_O = $(patsubst %.c,$(B)/obj/%.o,$(wildcard fuzz/support/*.c))

BINS =
ifneq ($(wildcard bbc/main.c),)
BINS += $(B)/bin/bbc
endif
ifneq ($(wildcard bbd/main.c),)
BINS += $(B)/bin/bbd
endif
ifneq ($(BBCTL_SRC),)
BINS += $(B)/bin/bbctl
endif
ifneq ($(wildcard bbsim/main.c),)
BINS += $(B)/bin/bbsim
endif

# Per-plugin extra flags: plugins/NAME/build.mk may set
#   PLUGIN_CFLAGS_NAME and PLUGIN_LIBS_NAME (vector kernels add $(ARCH_FLAGS));
# tests/plugins/NAME/build.mk may set TPLUGIN_CFLAGS_NAME (placed before
# the common flags, so its -I directories come first) and add rules.
-include $(wildcard plugins/*/build.mk)
-include $(wildcard tests/plugins/*/build.mk)

.PHONY: all deps check check-unit check-integration demo demo-gossip bench footprint install clean \
	examples programs fuzz fuzz-smoke fuzzers
.SECONDARY:
# A recipe that fails or is cut off leaves no half-written target behind for
# the next make to take as up to date (a 0-byte bbd once failed every test).
.DELETE_ON_ERROR:

all: $(LIBBBIR_SO) $(LIBBBIR_A) $(LIBENGINE_SO) $(LIBENGINE_A) $(BINS) $(PLUGINS) $(TPLUGINS) \
     $(TESTS) $(TOOLS) $(EXAMPLES) $(EXAMPLE_ONNX) $(BENCHES) $(SIM_ARTIFACTS)

deps:
	@scripts/deps

# ---- generated protobuf code ---------------------------------------------
$(B)/gen/%.pb-c.c $(B)/gen/%.pb-c.h: proto/%.proto
	@mkdir -p $(B)/gen
	protoc-c --c_out=$(B)/gen -Iproto $<

# every object may include generated headers
$(B)/obj/%.o: %.c | $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) $(CFLAGS_EXTRA) -c $< -o $@

# the engine: release objects (checked under SAN=1) and checked ones (tests)
CHECK_CFLAGS = -DBBE_CHECKED
ifeq ($(SAN),1)
ENGINE_CFLAGS = $(CHECK_CFLAGS)
endif
$(B)/obj/libbbengine/%.o: libbbengine/%.c | $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) $(ENGINE_CFLAGS) $(CFLAGS_EXTRA) -c $< -o $@

$(B)/obj-checked/libbbengine/%.o: libbbengine/%.c | $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) $(CHECK_CFLAGS) $(CFLAGS_EXTRA) -c $< -o $@

$(B)/obj/tests/unit/%.o: tests/unit/%.c | $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) $(CHECK_CFLAGS) $(CFLAGS_EXTRA) -c $< -o $@

$(B)/obj/gen/%.o: $(B)/gen/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_GEN) -c $< -o $@

# ---- libraries -------------------------------------------------------------
$(LIBBBIR_SO): $(LIBBBIR_O)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libbbir.so $(LDFLAGS_COMMON) -o $@ $^ $(SYS_LIBS)

$(LIBBBIR_A): $(LIBBBIR_O)
	@mkdir -p $(dir $@)
	rm -f $@; ar rcs $@ $^

$(LIBENGINE_A): $(ENGINE_O)
	@mkdir -p $(dir $@)
	rm -f $@; ar rcs $@ $^

$(LIBENGINE_CHECKED_A): $(ENGINE_CHECKED_O)
	@mkdir -p $(dir $@)
	rm -f $@; ar rcs $@ $^

# The engine as a shared library for other hosts (a simulator, an embedding
# program); it takes libbbir from libbbir.so.
$(LIBENGINE_SO): $(ENGINE_O) $(LIBBBIR_SO)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libbbengine.so $(LDFLAGS_COMMON) -o $@ $(ENGINE_O) \
		-L$(B)/lib -lbbir $(SYS_LIBS)

$(LIBBBC_A): $(BBC_O)
	@mkdir -p $(dir $@)
	rm -f $@; ar rcs $@ $^

$(LIBHOST_A): $(HOST_O)
	@mkdir -p $(dir $@)
	rm -f $@; ar rcs $@ $^

$(LIBBBSIM_A): $(BBSIM_O)
	@mkdir -p $(dir $@)
	rm -f $@; ar rcs $@ $^

# ---- programs --------------------------------------------------------------
$(B)/bin/bbc: $(B)/obj/bbc/main.o $(LIBBBC_A) $(LIBBBIR_SO)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_COMMON) $(RPATH_BIN) -o $@ $(B)/obj/bbc/main.o $(LIBBBC_A) \
		-L$(B)/lib -lbbir $(SYS_LIBS)

# bbd: the host, the engine, the compiler and libbbir in one image (LTO=1:
# link-time optimized), because a message crosses all of them op by op — no
# PLT hop per libbbir call, the message path's code together (measured:
# make footprint, docs/DECISIONS.md). It exports libbbir's dynamic symbols
# (the list is read off libbbir.so) for the plugins it loads, and does not
# load libbbir.so itself: one copy of the library, one set of type nodes.
BBD_O = $(B)/obj/bbd/main.o $(HOST_O) $(ENGINE_O) $(BBC_O) $(LIBBBIR_O)

$(B)/bbd.dynlist: $(LIBBBIR_SO)
	{ echo '{'; nm -D --defined-only $< | awk 'NF == 3 && $$2 ~ /^[TDRBV]$$/ { print "  " $$3 ";" }'; \
	  echo '};'; } > $@

$(B)/bin/bbd: $(BBD_O) $(B)/bbd.dynlist
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_COMMON) $(LTO_LDFLAGS) -Wl,--dynamic-list=$(B)/bbd.dynlist \
		-o $@ $(BBD_O) $(SYS_LIBS)

# bbsim: the simulator links the engine and libbbir.so (the plugins it
# loads bind to it), never bbd's host.
$(B)/bin/bbsim: $(B)/obj/bbsim/main.o $(LIBBBSIM_A) $(LIBENGINE_A) $(LIBBBIR_SO)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_COMMON) $(RPATH_BIN) -o $@ $(B)/obj/bbsim/main.o $(LIBBBSIM_A) $(LIBENGINE_A) \
		-L$(B)/lib -lbbir $(SYS_LIBS)

$(B)/bin/bbctl: $(patsubst %.c,$(B)/obj/%.o,$(BBCTL_SRC)) $(LIBBBIR_SO)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_COMMON) $(RPATH_BIN) -o $@ $(filter %.o,$^) -L$(B)/lib -lbbir $(SYS_LIBS)

# ---- plugins ---------------------------------------------------------------
.SECONDEXPANSION:
# Plugins do not link libbbir: its symbols come from the program that loads
# them (bbd carries libbbir and exports it; bbc, the tests and the benches
# link libbbir.so), so a process holds one copy of it (bb-plugin(7)).
$(B)/lib/bytesandbrains/plugins/%.so: $$(addprefix $(B)/obj/,$$(subst .c,.o,$$(wildcard plugins/$$*/*.c)))
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS_COMMON) -o $@ $(filter %.o,$^) $(PLUGIN_LIBS_$*) $(SYS_LIBS)

$(B)/obj/plugins/%.o: plugins/%.c | $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) -fvisibility=hidden $(PLUGIN_CFLAGS_$(firstword $(subst /, ,$*))) -c $< -o $@

$(B)/tests/plugins/%.so: $$(addprefix $(B)/obj/,$$(subst .c,.o,$$(wildcard tests/plugins/$$*/*.c)))
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS_COMMON) -o $@ $(filter %.o,$^) $(SYS_LIBS)

$(B)/obj/tests/plugins/%.o: tests/plugins/%.c | $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(TPLUGIN_CFLAGS_$(firstword $(subst /, ,$*))) $(CFLAGS_COMMON) -fvisibility=hidden \
		-c $< -o $@

# ---- tests, examples, benchmarks -------------------------------------------
TEST_LINK = $(LIBBBC_A) $(LIBHOST_A) $(LIBBBSIM_A) $(LIBENGINE_CHECKED_A) -L$(B)/lib -lbbir -lcmocka $(SYS_LIBS)

$(B)/tests/test_%: $(B)/obj/tests/unit/test_%.o $(TEST_SUPPORT_O) $(LIBBBC_A) $(LIBHOST_A) $(LIBBBSIM_A) $(LIBENGINE_CHECKED_A) $(LIBBBIR_SO)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_COMMON) $(RPATH_BIN) -o $@ $< $(TEST_SUPPORT_O) $(TEST_LINK)

$(B)/examples/%: $$(addprefix $(B)/obj/,$$(subst .c,.o,$$(wildcard examples/$$*/*.c))) $(LIBBBIR_SO)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_COMMON) $(RPATH_BIN) -o $@ $(filter %.o,$^) -L$(B)/lib -lbbir $(SYS_LIBS)

testdata/%.onnx: $(B)/examples/%
	$< $@

# The scenarios in examples/sim/ run these (recorded with --clients K, compiled).
$(B)/sim/federated-k%.onnx: $(B)/examples/federated $(B)/bin/bbc $(PLUGINS)
	@mkdir -p $(dir $@)
	$(B)/examples/federated $@.recorded --clients $*
	$(B)/bin/bbc compile $@.recorded -o $@ --plugin-path $(B)/lib/bytesandbrains/plugins
	rm -f $@.recorded

$(B)/sim/gossip.onnx: $(B)/examples/gossip $(B)/bin/bbc $(PLUGINS)
	@mkdir -p $(dir $@)
	$(B)/examples/gossip $@.recorded
	$(B)/bin/bbc compile $@.recorded -o $@ --plugin-path $(B)/lib/bytesandbrains/plugins
	rm -f $@.recorded

$(B)/bench/bench_%: $(B)/obj/bench/bench_%.o $(BENCH_SUPPORT_O) $(LIBBBC_A) $(LIBHOST_A) $(LIBBBSIM_A) $(LIBENGINE_A) $(LIBBBIR_SO)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_COMMON) $(RPATH_BIN) -o $@ $< $(BENCH_SUPPORT_O) $(LIBBBC_A) $(LIBHOST_A) $(LIBBBSIM_A) $(LIBENGINE_A) \
		-L$(B)/lib -lbbir $(SYS_LIBS)

examples: $(EXAMPLE_ONNX)

# Programs the integration tests run (fault relay, flooding peer).
$(B)/tests/tools/%: $(B)/obj/tests/tools/%.o $(LIBHOST_A) $(LIBENGINE_A) $(LIBBBIR_SO)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_COMMON) -Wl,-rpath,'$$ORIGIN/../../lib' -o $@ $< $(LIBHOST_A) $(LIBENGINE_A) -L$(B)/lib -lbbir \
		$(SYS_LIBS)

# A fuzz target: libFuzzer's main, the checked engine (an invariant that
# breaks is a finding), the host, bbc and libbbir.so; -rdynamic so the
# plugins it opens find libFuzzer's coverage hooks and libbbir in it.
$(B)/fuzz/fuzz_%: $(B)/obj/fuzz/fuzz_%.o $(FUZZ_SUPPORT_O) $(LIBBBC_A) $(LIBHOST_A) $(LIBENGINE_CHECKED_A) $(LIBBBIR_SO)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_COMMON) -fsanitize=fuzzer $(RPATH_BIN) -rdynamic -o $@ $< $(FUZZ_SUPPORT_O) \
		$(LIBBBC_A) $(LIBHOST_A) $(LIBENGINE_CHECKED_A) -L$(B)/lib -lbbir $(SYS_LIBS)

# The targets that install fed_round bind its test model: that plugin alone
# in a directory (tests/plugins holds broken plugins on purpose).
$(B)/fuzz/plugins/bbd_test.so: $(B)/tests/plugins/bbd_test.so
	@mkdir -p $(dir $@)
	cp $< $@

# bench_bbd_wire's io_uring reference ping-pong (bench/uring_pingpong.c) over
# liburing, which scripts/bench-deps installs; built only by make bench.
$(B)/bench/uring_pingpong: bench/uring_pingpong.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -o $@ $< -luring

fuzzers: $(FUZZERS) $(PLUGINS) $(B)/fuzz/plugins/bbd_test.so

# FAISS's own indexes on bench_index's data (bench/faiss_side.cpp): C++ over
# Debian's libfaiss-dev (a static libfaiss.a with OpenMP and BLAS), which
# scripts/bench-deps installs; built only by make bench.
$(B)/bench/faiss_side: bench/faiss_side.cpp
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O2 -g -fopenmp -Wall -Wextra -Werror -o $@ $< -l:libfaiss.a -llapack \
		$(BLAS_LIBS)

# ---- entry points ------------------------------------------------------------
check: deps
	@$(MAKE) --no-print-directory -j$(JOBS) all
	@$(MAKE) --no-print-directory fuzz
	@BUILD=$(B) scripts/run-tests

# The fuzz build has its own directory and flags whatever this make's are.
fuzz: deps
	@$(MAKE) --no-print-directory -j$(JOBS) FUZZ=1 SAN=0 NATIVE=0 BUILD=build-fuzz CC=clang fuzzers

# the targets read testdata (fed_round.onnx and the others) the main build writes
fuzz-smoke: fuzz
	@$(MAKE) --no-print-directory -j$(JOBS) examples
	@scripts/fuzz-smoke

# The demo needs the programs, the plugins and the example's recorder (and
# examples/cnn for DEMO_MODEL=cnn, once it exists), not
# the test and bench binaries: a newcomer waits for a third of the build.
# DEMO=gossip (or make demo-gossip): serverless gossip learning instead.
DEMO ?= federated
demo: deps
	@$(MAKE) --no-print-directory -j$(JOBS) programs $(B)/examples/$(DEMO) \
		$(if $(wildcard examples/cnn/*.c),$(B)/examples/cnn)
	@BUILD=$(B) DEMO=$(DEMO) scripts/demo

demo-gossip: deps
	@$(MAKE) --no-print-directory -j$(JOBS) programs $(B)/examples/gossip
	@BUILD=$(B) scripts/demo-gossip

programs: $(LIBBBIR_SO) $(LIBBBIR_A) $(BINS) $(PLUGINS)

# The baselines the benches compare against (PyTorch, ONNX Runtime, FAISS)
# are bench-only: scripts/bench-deps installs them, not scripts/deps.
bench: deps
	@scripts/bench-deps $(B)
	@$(MAKE) --no-print-directory -j$(JOBS) all
	@$(MAKE) --no-print-directory $(B)/bench/faiss_side || \
		echo "bench: no FAISS (libfaiss-dev): bench_index runs without its FAISS side" >&2
	@$(MAKE) --no-print-directory $(B)/bench/uring_pingpong || \
		echo "bench: no liburing-dev: bench_bbd_wire runs without its io_uring row" >&2
	@for b in $(BENCHES); do echo "== $$b"; $$b || exit 1; done
	@echo "== bench/gossip_scale.sh"; BUILD=$(B) bench/gossip_scale.sh
	@echo "== bench/large_tensor.sh"; BUILD=$(B) bench/large_tensor.sh
	@echo "== bench/soak_federated.sh"; BUILD=$(B) bash bench/soak_federated.sh

# what one bbd->bbd round trip executes and touches, per node (callgrind)
footprint: deps
	@$(MAKE) --no-print-directory -j$(JOBS) programs $(TPLUGINS)
	@BUILD=$(B) scripts/footprint

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include/bb \
		$(DESTDIR)$(PLUGIN_DIR_INSTALLED) $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 0755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 $(LIBBBIR_A) $(DESTDIR)$(PREFIX)/lib/
	install -m 0755 $(LIBBBIR_SO) $(DESTDIR)$(PREFIX)/lib/
	install -m 0644 $(LIBENGINE_A) $(DESTDIR)$(PREFIX)/lib/
	install -m 0755 $(LIBENGINE_SO) $(DESTDIR)$(PREFIX)/lib/
	install -m 0644 libbbir/include/bb/*.h libbbengine/include/bb/*.h $(DESTDIR)$(PREFIX)/include/bb/
	$(if $(PLUGINS),install -m 0755 $(PLUGINS) $(DESTDIR)$(PLUGIN_DIR_INSTALLED)/)
	sed -e 's|@PREFIX@|$(PREFIX)|g' scripts/libbbir.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/libbbir.pc
	@for s in 1 5 7 8; do \
		ls man/*.$$s >/dev/null 2>&1 || continue; \
		install -d $(DESTDIR)$(PREFIX)/share/man/man$$s; \
		install -m 0644 man/*.$$s $(DESTDIR)$(PREFIX)/share/man/man$$s/; \
	done
	@if [ -f scripts/systemd/bbd@.service ]; then \
		install -d $(DESTDIR)$(PREFIX)/lib/systemd/system; \
		sed -e 's|@PREFIX@|$(PREFIX)|g' scripts/systemd/bbd@.service \
			> $(DESTDIR)$(PREFIX)/lib/systemd/system/bbd@.service; \
	fi

clean:
	rm -rf build build-san build-native build-fuzz $(EXAMPLE_ONNX)

-include $(shell find $(B)/obj $(B)/obj-checked -name '*.d' 2>/dev/null)
