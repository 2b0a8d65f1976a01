#!/bin/bash
# bbd_run_onnx_node.sh — ONNX's own node test cases through `bbd run --test-dir`.
#
# python3-onnx ships the generators of the ONNX backend test data
# (onnx.backend.test.case.node); tests/integration/bbd_run_onnx.py writes every
# case whose graph uses only the ops cpu::CpuBackend declares (as `bbc plugins`
# lists them) and only numeric tensors, in the test-data layout, and each must
# pass (rtol 1e-3, atol 1e-5). The few cases the backend refuses on purpose are
# listed in EXPECTED_REFUSALS and must fail with their reason, not crash.
# Environment: BB_BUILD = absolute build dir (default ./build).
# Ends with "N passed, N failed"; exits non-zero on any failure.
set -u
cd "$(dirname "$0")/../.." || exit 2
BB_BUILD=${BB_BUILD:-$PWD/build}
BBD="$BB_BUILD/bin/bbd"
PY=/usr/bin/python3
HELPER=tests/integration/bbd_run_onnx.py
export BB_PLUGIN_PATH="$BB_BUILD/lib/bytesandbrains/plugins"
passed=0
failed=0
TMP=$(mktemp -d /tmp/bb-onnx-node.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

ok() { echo "ok   $1"; passed=$((passed + 1)); }
fail() { # name [log]
    echo "FAIL $1"
    [ -n "${2:-}" ] && [ -s "$2" ] && sed 's/^/     | /' "$2" | head -20
    failed=$((failed + 1))
}

# case name -> the message the backend refuses it with
declare -A EXPECTED_REFUSALS=(
    [test_batchnorm_epsilon_training_mode]="training_mode=1 not supported (inference only)"
    [test_batchnorm_example_training_mode]="training_mode=1 not supported (inference only)"
)

"$BB_BUILD/bin/bbc" plugins 2>/dev/null | awk '/^cpu::CpuBackend/ {p = 1} /^[a-z]+::/ && !/^cpu::/ {p = 0}
    p && /^      [A-Z][A-Za-z]*\(/ { sub(/^ +/, ""); sub(/\(.*/, ""); print }' | sort -u >"$TMP/ops"
if [ "$(wc -l <"$TMP/ops")" -lt 51 ]; then
    fail "bbc plugins lists the 51 ops of cpu::CpuBackend (got $(wc -l <"$TMP/ops"))"
    echo "$passed passed, $failed failed"
    exit 1
fi
n=$("$PY" "$HELPER" onnx-node-cases "$TMP/cases" "$TMP/ops" 2>"$TMP/gen.err")
if [ -n "$n" ] && [ "$n" -ge 250 ]; then
    ok "python3-onnx wrote $n node test cases that use only the backend's ops"
else
    fail "python3-onnx node test cases (wrote '${n:-none}', want >= 250)" "$TMP/gen.err"
fi

for dir in "$TMP"/cases/*/; do
    dir=${dir%/}
    name=$(basename "$dir")
    "$BBD" run --test-dir "$dir" >"$TMP/out" 2>&1
    rc=$?
    want=${EXPECTED_REFUSALS[$name]:-}
    if [ -z "$want" ]; then
        if [ "$rc" -eq 0 ]; then ok "$name"; else fail "$name (exit $rc)" "$TMP/out"; fi
    elif [ "$rc" -eq 1 ] && grep -qF -- "$want" "$TMP/out"; then
        ok "$name: refused ($want)"
    else
        fail "$name: expected exit 1 with '$want' (exit $rc)" "$TMP/out"
    fi
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
