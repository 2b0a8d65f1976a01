#!/usr/bin/env bash
# bbc_cli.sh — the bbc command line: global options, usage errors (exit 2),
# bad input (exit 1, "bbc: error:" naming the file) and `bbc dump` on good
# and bad models. Run from anywhere; BB_BUILD (default ./build, relative to
# the repository root) selects the build whose bin/bbc is tested.
# Ends with "N passed, N failed"; exits non-zero when anything failed.
set -u
cd "$(dirname "$0")/../.." || exit 1
BB_BUILD=${BB_BUILD:-./build}
BBC=$BB_BUILD/bin/bbc
PY=/usr/bin/python3

pass=0
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ok() { pass=$((pass + 1)); echo "ok   $1"; }
not_ok() { fail=$((fail + 1)); echo "FAIL $1"; [ -n "${2:-}" ] && sed 's/^/     | /' <<<"$2"; }

# run NAME EXPECTED_RC [GREP_STDOUT|-] [GREP_STDERR|-] -- ARGS...
run() {
    local name=$1 want=$2 out_pat=$3 err_pat=$4
    shift 5
    "$BBC" "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    local why=""
    [ "$rc" -eq "$want" ] || why="exit $rc, wanted $want"
    if [ -z "$why" ] && [ "$out_pat" != - ] && ! grep -qF -- "$out_pat" "$tmp/out"; then
        why="stdout lacks '$out_pat'"
    fi
    if [ -z "$why" ] && [ "$err_pat" != - ] && ! grep -qF -- "$err_pat" "$tmp/err"; then
        why="stderr lacks '$err_pat'"
    fi
    if [ -z "$why" ]; then
        ok "$name"
    else
        not_ok "$name: $why" "$(head -c 2000 "$tmp/err"; head -c 600 "$tmp/out")"
    fi
}

if [ ! -x "$BBC" ]; then
    echo "FAIL $BBC not built"
    echo "0 passed, 1 failed"
    exit 1
fi

# ---- global options and usage ------------------------------------------------
run "no arguments is a usage error" 2 - "usage: bbc" --
run "unknown command" 2 - "bbc: error: unknown command 'frobnicate'" -- frobnicate
run "unknown global option" 2 - "usage: bbc" -- --bogus
run "--help lists dump" 0 "  dump " - -- --help
run "-h" 0 "usage: bbc" - -- -h
run "--version" 0 "bbc (BytesAndBrains)" - -- --version
run "help dump" 0 "usage: bbc dump" - -- help dump
run "help of an unknown command" 2 - "bbc: error: unknown command 'nosuch'" -- help nosuch
run "dump --help" 0 "usage: bbc dump" - -- dump --help
run "dump without a file" 2 - "usage: bbc dump" -- dump
run "dump with an unknown option" 2 - "usage: bbc dump" -- dump --frob x.onnx
run "dump with two files" 2 - "usage: bbc dump" -- dump a.onnx b.onnx

# ---- bad input ----------------------------------------------------------------
run "missing file" 1 - "bbc: error:" -- dump "$tmp/does-not-exist.onnx"
grep -qF "$tmp/does-not-exist.onnx" "$tmp/err" && ok "missing file is named" ||
    not_ok "missing file is named" "$(cat "$tmp/err")"
: >"$tmp/empty.onnx"
run "empty file" 1 - "bbc: error:" -- dump "$tmp/empty.onnx"
printf '\377\377\377\377\377\377\377\377' >"$tmp/junk.onnx"
run "junk file" 1 - "bbc: error:" -- dump "$tmp/junk.onnx"
run "a directory" 1 - "bbc: error:" -- dump "$tmp"

for f in testdata/bad/*.onnx; do
    [ -f "$f" ] || continue
    run "bad input $f" 1 - "bbc: error:" -- dump "$f"
    grep -qF "$(basename "$f")" "$tmp/err" && ok "bad input $f is named" ||
        not_ok "bad input $f is named" "$(cat "$tmp/err")"
    run "bad input $f (--json)" 1 - "bbc: error:" -- dump --json "$f"
done

# ---- good models -----------------------------------------------------------------
good=()
for f in testdata/*.onnx; do
    [ -f "$f" ] && good+=("$f")
done
# A plain ONNX model written by the onnx python package (scripts/deps installs
# python3-onnx).
if "$PY" - "$tmp/onnx_helper.onnx" >"$tmp/onnx_helper.log" 2>&1 <<'EOF'
import sys
from onnx import helper, TensorProto
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
w = helper.make_tensor("w", TensorProto.FLOAT, [4], [1.0, 2.0, 3.0, 4.0])
n = helper.make_node("Add", ["x", "w"], ["y"], name="add0")
g = helper.make_graph([n], "g", [x], [y], [w])
m = helper.make_model(g, producer_name="bbc_cli", opset_imports=[helper.make_opsetid("", 17)])
open(sys.argv[1], "wb").write(m.SerializeToString())
EOF
then
    good+=("$tmp/onnx_helper.onnx")
else
    not_ok "writing a model with the onnx python package" "$(cat "$tmp/onnx_helper.log")"
fi

if [ ${#good[@]} -eq 0 ]; then
    not_ok "no good model to dump (testdata/*.onnx or python3-onnx)"
fi
for f in "${good[@]}"; do
    run "dump $f" 0 "ir_version:" - -- dump "$f"
    if [ -s "$tmp/err" ]; then not_ok "dump $f is quiet on stderr" "$(cat "$tmp/err")"; fi
    cp "$tmp/out" "$tmp/first"
    "$BBC" dump "$f" >"$tmp/second" 2>/dev/null
    cmp -s "$tmp/first" "$tmp/second" && ok "dump $f is deterministic" ||
        not_ok "dump $f is deterministic"
    run "dump --json $f" 0 '"ir_version"' - -- dump --json "$f"
    if "$PY" -c 'import json,sys; json.load(open(sys.argv[1]))' "$tmp/out" 2>"$tmp/jerr"; then
        ok "dump --json $f is valid JSON"
    else
        not_ok "dump --json $f is valid JSON" "$(cat "$tmp/jerr")"
    fi
done
if [ -f "$tmp/onnx_helper.onnx" ]; then
    run "onnx model: node line" 0 '[0] ai.onnx::Add "add0" (x, w) -> (y)' - -- dump "$tmp/onnx_helper.onnx"
    run "onnx model: initializer summary" 0 'float[4] "w"' - -- dump "$tmp/onnx_helper.onnx"
    run "onnx model: input type" 0 'x: tensor(float)[N,4]' - -- dump "$tmp/onnx_helper.onnx"
    # float_data [1,2,3,4] is normalised to little-endian raw_data on load
    run "onnx model: JSON float_data as raw_data" 0 '"raw_data": "AACAPwAAAEAAAEBAAACAQA=="' - -- \
        dump --json "$tmp/onnx_helper.onnx"
fi

# ---- output errors --------------------------------------------------------------
if [ -w /dev/full ] && [ ${#good[@]} -gt 0 ]; then
    "$BBC" dump "${good[0]}" >/dev/full 2>"$tmp/err"
    rc=$?
    [ "$rc" -eq 1 ] && grep -qF "bbc: error:" "$tmp/err" && ok "write error exits 1" ||
        not_ok "write error exits 1 (got $rc)" "$(cat "$tmp/err")"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
