#!/bin/bash
# onnx_schema.sh — our .onnx files are plain ONNX for other tools.
#
# For every testdata/*.onnx, plus the every-field model written by
# write_full_model.c through libbbir:
#   (a) protoc --decode=onnx.ModelProto with proto/onnx-ml.proto decodes it;
#   (b) python's MessageToDict of the file (pb2 generated from our schema at
#       test time) equals `bbc dump --json FILE` field for field;
#   (c) Debian's python3-onnx (official 1.12 schema) loads it and sees the
#       same model-local functions.
# Environment: BB_BUILD = absolute build dir (default ./build).
# Ends with "N passed, N failed"; exits non-zero on any failure.
set -u
cd "$(dirname "$0")/../.." || exit 2
BB_BUILD=${BB_BUILD:-$PWD/build}
PY=/usr/bin/python3
HELPER=tests/integration/onnx_schema_compare.py
passed=0
failed=0
TMP=$(mktemp -d /tmp/bb-onnx-schema.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

ok() { echo "ok   $1"; passed=$((passed + 1)); }
fail() { # name [log]
    echo "FAIL $1"
    [ -n "${2:-}" ] && [ -s "$2" ] && sed 's/^/     | /' "$2" | head -30
    failed=$((failed + 1))
}

# Our schema compiles for python (used by every (b) and (c) check).
if protoc --python_out="$TMP" -I proto proto/onnx-ml.proto 2>"$TMP/protoc.log"; then
    ok "protoc --python_out proto/onnx-ml.proto"
else
    fail "protoc --python_out proto/onnx-ml.proto" "$TMP/protoc.log"
fi

# The every-field model, written through libbbir.
models=()
lib="$BB_BUILD/lib/libbbir.so"
san=()
if [ -f "$lib" ] && ldd "$lib" 2>/dev/null | grep -q libasan; then
    san=(-fsanitize=address,undefined)
fi
if [ ! -f "$lib" ]; then
    echo "missing $lib (build libbbir first)" >"$TMP/cc.log"
    fail "write the every-field model" "$TMP/cc.log"
elif cc -std=c11 -D_GNU_SOURCE "${san[@]}" -I. -Ilibbbir/include \
        tests/integration/write_full_model.c tests/unit/support/model_fixture.c \
        -L"$BB_BUILD/lib" -lbbir -Wl,-rpath,"$BB_BUILD/lib" -o "$TMP/write_full_model" \
        >"$TMP/cc.log" 2>&1 &&
     "$TMP/write_full_model" "$TMP/full.onnx" >>"$TMP/cc.log" 2>&1; then
    ok "write the every-field model"
    models+=("$TMP/full.onnx")
else
    fail "write the every-field model" "$TMP/cc.log"
fi
for f in testdata/*.onnx; do
    [ -f "$f" ] && models+=("$f")
done

for f in "${models[@]}"; do
    name=$(basename "$f")
    log="$TMP/$name.log"
    # (a)
    if protoc --decode=onnx.ModelProto -I proto proto/onnx-ml.proto <"$f" >"$TMP/$name.txt" 2>"$log" &&
       [ -s "$TMP/$name.txt" ]; then
        ok "$name: protoc --decode=onnx.ModelProto"
    else
        fail "$name: protoc --decode=onnx.ModelProto" "$log"
    fi
    # (b)
    if "$PY" "$HELPER" json --pb2-dir "$TMP" --bbc "$BB_BUILD/bin/bbc" "$f" >"$log" 2>&1; then
        ok "$name: bbc dump --json == MessageToDict"
    else
        fail "$name: bbc dump --json == MessageToDict" "$log"
    fi
    # (c)
    if "$PY" "$HELPER" onnx --pb2-dir "$TMP" "$f" >"$log" 2>&1; then
        ok "$name: onnx.load sees the model-local functions ($(sed -n 's/^ok: //p' "$log"))"
    else
        fail "$name: onnx.load sees the model-local functions" "$log"
    fi
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
