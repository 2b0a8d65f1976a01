#!/bin/bash
# bbd_run.sh — `bbd run` end to end: real bbd processes, real plugin files.
#
#   - the recorded 784-128-10 MLP (testdata/cpu_testdata.onnx, written by
#     examples/cpu_testdata) runs at batch 1 and 5 with the outputs matching
#     a numpy evaluation of the same file (tests/integration/bbd_run_onnx.py);
#   - a recorded BytesAndBrains module (testdata/mlp_module.onnx) runs with
#     --bind, and compiled by bbc it runs as it is, with the same output;
#   - a standard ONNX MLP and an If/Loop model made by python3-onnx's
#     onnx.helper (checked by onnx.checker) pass `bbd run --test-dir`;
#   - every testdata/cpu_testdata/<case> passes --test-dir, and together they
#     use every op cpu::CpuBackend declares;
#   - a deliberately wrong expected output fails (exit 1, names the output);
#   - bad inputs are errors (exit 1) and bad usage exits 2, with messages
#     naming the culprit;
#   - a plugin binds every libbbir symbol to the copy inside bbd, and bbd
#     loads no libbbir.so.
# Environment: BB_BUILD = absolute build dir (default ./build).
# Ends with "N passed, N failed"; exits non-zero on any failure.
set -u
cd "$(dirname "$0")/../.." || exit 2
BB_BUILD=${BB_BUILD:-$PWD/build}
BBD="$BB_BUILD/bin/bbd"
BBC="$BB_BUILD/bin/bbc"
PY=/usr/bin/python3
HELPER=tests/integration/bbd_run_onnx.py
PLUGINS="$BB_BUILD/lib/bytesandbrains/plugins"
export BB_PLUGIN_PATH="$PLUGINS"
passed=0
failed=0
TMP=$(mktemp -d /tmp/bb-bbd-run.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

ok() { echo "ok   $1"; passed=$((passed + 1)); }
fail() { # name [log]
    echo "FAIL $1"
    [ -n "${2:-}" ] && [ -s "$2" ] && sed 's/^/     | /' "$2" | head -30
    failed=$((failed + 1))
}
# expect NAME STATUS PATTERN -- CMD...: exit status and a stderr/stdout line
expect() {
    local name=$1 want=$2 pat=$3
    shift 4
    "$@" >"$TMP/out" 2>&1
    local rc=$?
    if [ "$rc" -eq "$want" ] && grep -qE -- "$pat" "$TMP/out"; then
        ok "$name"
    else
        echo "exit $rc (want $want), pattern: $pat" >>"$TMP/out"
        fail "$name" "$TMP/out"
    fi
}

for f in "$BBD" "$BBC" "$PLUGINS/cpu.so" testdata/cpu_testdata.onnx testdata/mlp_module.onnx; do
    if [ ! -e "$f" ]; then
        fail "missing $f (build first)"
        echo "$passed passed, $failed failed"
        exit 1
    fi
done

# ---- the recorded MLP, outputs checked against numpy ---------------------------------
for batch in 1 5; do
    d="$TMP/mlp$batch"
    mkdir -p "$d"
    "$PY" "$HELPER" input "$d/x.pb" x "$batch" 784 "$batch"
    "$PY" "$HELPER" reference testdata/cpu_testdata.onnx "$d/want" "x=$d/x.pb"
    if "$BBD" run testdata/cpu_testdata.onnx "x=$d/x.pb" -o "$d/got" >"$d/stdout" 2>"$d/stderr"; then
        ok "MLP batch $batch: bbd run exits 0"
    else
        fail "MLP batch $batch: bbd run exits 0" "$d/stderr"
    fi
    if [ "$(cat "$d/stdout")" = "y: float [$batch,10]" ]; then
        ok "MLP batch $batch: one summary line 'y: float [$batch,10]'"
    else
        fail "MLP batch $batch: summary line" "$d/stdout"
    fi
    if "$PY" "$HELPER" compare "$d/got/y.pb" "$d/want/y.pb" >"$d/cmp" 2>&1; then
        ok "MLP batch $batch: y.pb matches numpy"
    else
        fail "MLP batch $batch: y.pb matches numpy" "$d/cmp"
    fi
done

# ---- a recorded BytesAndBrains module, then its compiled artifact --------------------------
d="$TMP/module"
mkdir -p "$d"
"$PY" "$HELPER" input "$d/x.pb" x 3 16 11
"$PY" "$HELPER" reference-function testdata/mlp_module.onnx "$d/want" "x=$d/x.pb"
expect "recorded module: runs with --bind compute=cpu::CpuBackend" 0 '^probs: float \[3,4\]$' -- \
    "$BBD" run testdata/mlp_module.onnx --bind compute=cpu::CpuBackend "x=$d/x.pb" -o "$d/got"
if "$PY" "$HELPER" compare "$d/got/probs.pb" "$d/want/probs.pb" >"$d/cmp" 2>&1; then
    ok "recorded module: probs.pb matches numpy"
else
    fail "recorded module: probs.pb matches numpy" "$d/cmp"
fi
expect "recorded module: an unbound slot is named" 1 "UnboundSlot: .*slot 'compute' \(Backend\)" -- \
    "$BBD" run testdata/mlp_module.onnx "x=$d/x.pb"
if "$BBC" compile testdata/mlp_module.onnx --bind compute=cpu::CpuBackend -o "$d/compiled.onnx" \
    >"$d/bbc" 2>&1; then
    expect "compiled artifact: runs as it is (stamped bindings)" 0 '^probs: float \[3,4\]$' -- \
        "$BBD" run "$d/compiled.onnx" "x=$d/x.pb" -o "$d/got2"
    if cmp -s "$d/got/probs.pb" "$d/got2/probs.pb"; then
        ok "compiled artifact: the same output as the recorded module"
    else
        fail "compiled artifact: the same output as the recorded module"
    fi
else
    fail "bbc compile testdata/mlp_module.onnx" "$d/bbc"
fi

# ---- standard ONNX models from onnx.helper, as backend test data ------------------------
for kind in standard-mlp control-flow; do
    if "$PY" "$HELPER" "$kind" "$TMP/$kind" >"$TMP/gen" 2>&1; then
        expect "--test-dir passes on onnx.helper's $kind" 0 '^4 matched, 0 mismatched, 0 errors$' -- \
            "$BBD" run --test-dir "$TMP/$kind"
    else
        fail "python3-onnx writes the $kind test directory" "$TMP/gen"
    fi
done
# the same standard model through NAME=FILE inputs: both outputs, one line each
expect "standard MLP: an output other nodes consume is still written" 0 '^logits: float \[8,5\]$' -- \
    "$BBD" run "$TMP/standard-mlp/model.onnx" "image=$TMP/standard-mlp/test_data_set_1/input_0.pb" \
    -o "$TMP/std-out"
if "$PY" "$HELPER" compare "$TMP/std-out/logits.pb" "$TMP/standard-mlp/test_data_set_1/output_1.pb" \
    >"$TMP/cmp" 2>&1 &&
    "$PY" "$HELPER" compare "$TMP/std-out/probs.pb" "$TMP/standard-mlp/test_data_set_1/output_0.pb" \
        >>"$TMP/cmp" 2>&1; then
    ok "standard MLP: probs.pb and logits.pb match numpy"
else
    fail "standard MLP: probs.pb and logits.pb match numpy" "$TMP/cmp"
fi

# ---- every op case the suite generates ---------------------------------------------------
cases=0
bad=0
for dir in testdata/cpu_testdata/*/; do
    dir=${dir%/}
    cases=$((cases + 1))
    if ! "$BBD" run --test-dir "$dir" >"$TMP/case" 2>&1 || ! grep -q ' 0 mismatched, 0 errors$' "$TMP/case"; then
        bad=$((bad + 1))
        fail "--test-dir $dir" "$TMP/case"
    fi
done
if [ "$cases" -ge 80 ] && [ "$bad" -eq 0 ]; then
    ok "--test-dir passes on all $cases testdata/cpu_testdata cases"
else
    fail "--test-dir on the $cases testdata/cpu_testdata cases ($bad failed)"
fi
# every op the backend declares is used by some case (subgraphs included)
"$BBC" plugins 2>/dev/null | awk '/opset:/ {on = ($2 == "ai.onnx")} on && /^      [A-Z][A-Za-z]*\(/ {
    sub(/^ +/, ""); sub(/\(.*/, ""); print }' | sort -u >"$TMP/declared"
"$PY" "$HELPER" ops testdata/cpu_testdata >"$TMP/used" 2>"$TMP/ops.err"
missing=$(comm -23 "$TMP/declared" "$TMP/used")
if [ "$(wc -l <"$TMP/declared")" -ge 51 ] && [ -z "$missing" ]; then
    ok "the cases use every one of the $(wc -l <"$TMP/declared") declared ops"
else
    echo "declared: $(wc -l <"$TMP/declared"); not covered: $missing" >>"$TMP/ops.err"
    fail "the cases use every declared op" "$TMP/ops.err"
fi

# ---- a wrong expectation fails, naming the output ------------------------------------------
cp -r testdata/cpu_testdata/test_gemm_alpha_beta "$TMP/wrong"
"$PY" "$HELPER" perturb "$TMP/wrong/test_data_set_0/output_0.pb"
expect "--test-dir: a wrong expected output exits 1 naming the output" 1 \
    'test_data_set_0: Y: MISMATCH: element 0 is' -- "$BBD" run --test-dir "$TMP/wrong"
expect "--test-dir: the summary counts the mismatch" 1 '^0 matched, 1 mismatched, 0 errors$' -- \
    "$BBD" run --test-dir "$TMP/wrong"

# a data set whose second input is unreadable: an error for that set, not a crash
cp -r testdata/cpu_testdata/test_add_bcast "$TMP/badset"
printf 'garbage' >"$TMP/badset/test_data_set_0/input_1.pb"
expect "--test-dir: an unreadable input file is an error naming it" 1 \
    "bbd: error: .*test_data_set_0/input_1.pb: " -- "$BBD" run --test-dir "$TMP/badset"
expect "--test-dir: the data set counts as an error" 1 '^0 matched, 0 mismatched, 1 errors$' -- \
    "$BBD" run --test-dir "$TMP/badset"

# ---- bad input: exit 1, the message names the culprit --------------------------------------
x1="$TMP/mlp1/x.pb"
expect "a missing input is named" 1 "bbd: error: input 'x' of target '@self' not given" -- \
    "$BBD" run testdata/cpu_testdata.onnx
expect "an unknown input is named with the inputs there are" 1 \
    "bbd: error: target '@self' has no input 'z' \(inputs: x\)" -- \
    "$BBD" run testdata/cpu_testdata.onnx "x=$x1" "z=$x1"
printf 'garbage' >"$TMP/garbage.pb"
expect "a corrupt tensor file is named" 1 "bbd: error: input 'x': $TMP/garbage.pb: " -- \
    "$BBD" run testdata/cpu_testdata.onnx "x=$TMP/garbage.pb"
expect "a missing tensor file is named" 1 "bbd: error: input 'x': $TMP/none.pb: No such file" -- \
    "$BBD" run testdata/cpu_testdata.onnx "x=$TMP/none.pb"
"$PY" "$HELPER" input "$TMP/wide.pb" x 1 783 1
expect "a shape the model cannot take fails naming the node" 1 \
    "bbd: error: node .*Gemm.* failed: " -- "$BBD" run testdata/cpu_testdata.onnx "x=$TMP/wide.pb"
expect "a missing model is named" 1 "bbd: error: $TMP/nothing.onnx: " -- \
    "$BBD" run "$TMP/nothing.onnx" "x=$x1"
expect "a model that is not protobuf is named" 1 "bbd: error: testdata/bad/not_protobuf.onnx: " -- \
    "$BBD" run testdata/bad/not_protobuf.onnx
expect "an unknown component type names binding, slot and directories" 1 \
    "slot 'backend' is bound to 'no::Such'.*searched $PLUGINS \\(BB_PLUGIN_PATH\\)" -- \
    "$BBD" run testdata/cpu_testdata.onnx --bind backend=no::Such "x=$x1"
expect "a binding of the wrong role is refused" 1 "example::Counter" -- \
    "$BBD" run testdata/cpu_testdata.onnx --bind backend=example::Counter "x=$x1"
"$PY" "$HELPER" rename-output testdata/cpu_testdata/test_relu/model.onnx "$TMP/evil.onnx" "../evil"
expect "an output name that is not a file name is refused" 1 \
    "bbd: error: output '../evil' cannot be written as a file name" -- \
    "$BBD" run "$TMP/evil.onnx" "X=testdata/cpu_testdata/test_relu/test_data_set_0/input_0.pb" \
    -o "$TMP/evil-out"
if [ ! -e "$TMP/evil.pb" ]; then ok "nothing was written outside -o DIR"; else fail "wrote $TMP/evil.pb"; fi
# issue 21: a node without op_type (NodeProto field 4 absent) crashed bbd run
cp -r testdata/cpu_testdata/test_relu "$TMP/no-op-type"
"$PY" "$HELPER" drop-op-type testdata/cpu_testdata/test_relu/model.onnx "$TMP/no-op-type/model.onnx"
expect "--test-dir: a node without op_type is an error naming the node" 1 \
    "bbd: error: .*node .* has no op_type" -- "$BBD" run --test-dir "$TMP/no-op-type"
expect "a node without op_type is an error naming the node" 1 "bbd: error: .*has no op_type" -- \
    "$BBD" run "$TMP/no-op-type/model.onnx" \
    "X=testdata/cpu_testdata/test_relu/test_data_set_0/input_0.pb"
expect "--test-dir without data sets is an error" 1 "no test_data_set_N" -- \
    bash -c "mkdir -p '$TMP/empty' && cp testdata/cpu_testdata/test_relu/model.onnx '$TMP/empty/' &&
             '$BBD' run --test-dir '$TMP/empty'"
expect "--plugin-path to a missing directory is an error" 1 "$TMP/no-plugins.*no such directory" -- \
    "$BBD" run testdata/cpu_testdata.onnx --plugin-path "$TMP/no-plugins" "x=$x1"

# ---- a plugin binds libbbir to bbd's own copy --------------------------------------------------
# bbd carries libbbir in its image and exports it (Makefile, DECISIONS.md): a plugin linked
# against libbbir.so must resolve every libbbir symbol to bbd, never to the shared library,
# or it would see other type nodes than the engine.
LD_DEBUG=bindings,files "$BBD" run --test-dir testdata/cpu_testdata/test_relu >"$TMP/bind" 2>&1
to_bbd=$(grep -cE "binding file .*/cpu\.so \[0\] to [^ ]*bin/bbd \[0\]: normal symbol .(bb_|BB_)" "$TMP/bind")
to_lib=$(grep -cE "binding file .*/cpu\.so \[0\] to [^ ]*libbbir\.so" "$TMP/bind")
if [ "$to_bbd" -gt 10 ] && [ "$to_lib" -eq 0 ]; then
    ok "cpu.so binds its $to_bbd libbbir symbols to bbd's copy, none to libbbir.so"
else
    fail "cpu.so bindings: $to_bbd to bbd, $to_lib to libbbir.so" "$TMP/bind"
fi
if grep -q 'file=.*cpu\.so' "$TMP/bind" && ! grep -q 'file=.*libbbir\.so' "$TMP/bind"; then
    ok "bbd loads cpu.so and no libbbir.so: one copy of libbbir in the process"
else
    fail "bbd loaded libbbir.so (or not cpu.so)" "$TMP/bind"
fi

# ---- bad usage: exit 2 -------------------------------------------------------------------------
expect "no model is a usage error" 2 "bbd: error: run: no model given" -- "$BBD" run
expect "an unknown option is a usage error" 2 "unknown option '--frobnicate'" -- \
    "$BBD" run testdata/cpu_testdata.onnx --frobnicate 1
expect "--test-dir with inputs is a usage error" 2 "--test-dir reads its inputs" -- \
    "$BBD" run --test-dir testdata/cpu_testdata/test_relu "X=$x1"
expect "a bad --timeout-ms is a usage error" 2 "--timeout-ms 'soon'" -- \
    "$BBD" run testdata/cpu_testdata.onnx --timeout-ms soon
expect "--help prints the usage and exits 0" 0 "^usage: bbd run MODEL.onnx" -- "$BBD" run --help

# ---- man/bbd.8 documents every option the usage names -------------------------------------
undocumented=""
for opt in $("$BBD" run --help | grep -oE -- '--[a-z-]+|-o' | sort -u) --output-dir; do
    grep -qF -- "$(printf '%s' "$opt" | sed 's/-/\\-/g')" man/bbd.8 || undocumented="$undocumented $opt"
done
if [ -z "$undocumented" ] && grep -q '^\.SH RUNNING A MODEL ONCE' man/bbd.8; then
    ok "man/bbd.8 documents every bbd run option"
else
    fail "man/bbd.8 does not document:$undocumented"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
