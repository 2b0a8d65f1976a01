#!/bin/bash
# onnx_schema_fields.sh — our .proto files against their references, field by
# field (helper: onnx_schema_fields.py):
#   proto/onnx-ml.proto    vs the official ONNX schema Debian ships
#                          (python3-onnx 1.12) plus the later official
#                          additions (IR 9-12) the helper lists;
#   proto/bb_envelope.proto vs IR_AND_DSL.md Part 8 (+ fields 4-7, framing).
# Needs protoc and /usr/bin/python3 with google.protobuf (scripts/deps).
# Ends with "N passed, N failed"; exits non-zero on any failure.
set -u
cd "$(dirname "$0")/../.." || exit 2
PY=/usr/bin/python3
HELPER=tests/integration/onnx_schema_fields.py
OFFICIAL_DIR=/usr/lib/python3/dist-packages/onnx
TMP=$(mktemp -d /tmp/bb-schema-fields.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
passed=0
failed=0

# run_helper LOG ARGS...: print the helper's lines, add up its counts
run_helper() {
    local log=$1
    shift
    "$PY" "$HELPER" "$@" >"$log" 2>&1
    local rc=$?
    grep -v -E '^[0-9]+ passed, [0-9]+ failed$' "$log"
    local line p f
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)
    p=$(echo "$line" | sed -nE 's/^([0-9]+) passed.*/\1/p')
    f=$(echo "$line" | sed -nE 's/.* ([0-9]+) failed$/\1/p')
    passed=$((passed + ${p:-0}))
    failed=$((failed + ${f:-0}))
    if [ $rc -ne 0 ] && [ "${f:-0}" -eq 0 ]; then
        echo "FAIL $HELPER $1 exited $rc"
        failed=$((failed + 1))
    fi
}

describe() { # NAME OUT.pb -I DIR FILE
    local name=$1 out=$2
    shift 2
    if protoc --descriptor_set_out="$out" "$@" 2>"$TMP/protoc.log"; then
        echo "ok   protoc reads $name"
        passed=$((passed + 1))
        return 0
    fi
    echo "FAIL protoc reads $name"
    sed 's/^/     | /' "$TMP/protoc.log" | head -20
    failed=$((failed + 1))
    return 1
}

if describe proto/onnx-ml.proto "$TMP/ours.pb" -I proto proto/onnx-ml.proto &&
   describe "$OFFICIAL_DIR/onnx-ml.proto" "$TMP/official.pb" -I "$OFFICIAL_DIR" \
       "$OFFICIAL_DIR/onnx-ml.proto"; then
    run_helper "$TMP/onnx.log" onnx "$TMP/ours.pb" "$TMP/official.pb"
fi
if describe proto/bb_envelope.proto "$TMP/envelope.pb" -I proto proto/bb_envelope.proto; then
    run_helper "$TMP/envelope.log" envelope "$TMP/envelope.pb"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
