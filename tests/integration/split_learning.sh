#!/usr/bin/env bash
# split_learning.sh — examples/split_learning on two real bbd processes on
# 127.0.0.1: a DataOwner (the digits and the bottom of the model) and a Top
# (the top of the model), activations up and gradients down over TCP.
# With f32 activations the training loss falls over 300 steps (the last 20
# steps' mean under half the first 20's) and the held-out accuracy passes
# 90%; a second run sends the activations through codec::Int8Affine: it
# learns as well and moves fewer bytes a step. Both runs' figures are
# printed. Ends with "N passed, N failed".
source "$(dirname "$0")/split_learning_common.bash"

STEPS=300
check "the split-learning program records and compiles" sl_record f32
check "... with Int8Affine activations" sl_record int8 --codec codec::Int8Affine

declare -A BYTES=()
for run in f32 int8; do
    sl_run "$run" "$TMP/$run.onnx" "$STEPS" || continue
    read -r first last acc bytes at <<<"$(sl_figures "$run" "$STEPS")"
    BYTES[$run]=$bytes
    echo "     $run activations: training loss $first (first 20 steps) -> $last (last 20)," \
        "held-out accuracy $acc (evaluated after $at steps), $bytes bytes a step"
    if "$PY" -c "import sys; f, l, a = map(float, sys.argv[1:]); sys.exit(not (l < f / 2 and a >= 0.9))" \
        "$first" "$last" "$acc"; then
        ok "$run: the loss falls ($first -> $last) and the held-out accuracy is $acc (>= 0.90)"
    else
        not_ok "$run: loss $first -> $last, accuracy $acc" "$TMP/$run.events"
    fi
done
if [ -n "${BYTES[f32]:-}" ] && [ -n "${BYTES[int8]:-}" ] &&
    [ $((BYTES[int8] * 4)) -lt $((BYTES[f32] * 3)) ]; then
    ok "Int8Affine activations: ${BYTES[int8]} bytes a step, under 3/4 of f32's ${BYTES[f32]}"
else
    not_ok "bytes a step: int8 ${BYTES[int8]:-?}, f32 ${BYTES[f32]:-?}"
fi
finish
