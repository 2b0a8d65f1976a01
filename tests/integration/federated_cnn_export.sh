#!/usr/bin/env bash
# federated_cnn_export.sh — examples/federated with nn::Onnx training a CNN
# (examples/cnn --shape digits: the 8x8 digits, two conv + BN + pool blocks)
# on real bbd processes, a server and two clients; then the operator's way
# to the trained model: `bbctl event Server export=null --wait model
# --output FILE` writes the server's global model (its input "export" ->
# ExportOnnx -> AppEvent "model"), python3-onnx's checker accepts the file,
# its initializers hold the parameters of the last round (their
# digest matches the round's), bbd runs it, and an --output without
# --wait is a usage error.
# Ends with "N passed, N failed".
source "$(dirname "$0")/federated_common.bash"

if ! /usr/bin/python3 -c 'import onnx' 2>/dev/null; then
    not_ok "python3-onnx is installed (scripts/deps installs it)"
    finish
fi
CNN=$TMP/digits_cnn.onnx
check "examples/cnn writes the digits CNN" "$BB_BUILD/examples/cnn" "$CNN" --shape digits
MODEL="{\"model_file\": \"$CNN\", \"optimizer\": \"adam\", \"learning_rate\": 0.003, \"batch_size\": 32}"
check "the program records and compiles with nn::Onnx" \
    record cnn --clients 2 --period-ms 300 --deadline-ms 60000 --epochs 2 --model nn::Onnx \
    --model-config "$MODEL"
serve server "$TMP/cnn.onnx"
for i in 0 1; do
    start_client "c$i" "$TMP/cnn.onnx" server "$i" 2 || not_ok "client $i starts" "$TMP/c$i.log"
done
wait_connected server 2
if wait_rounds server $((K0 + 2)) 120; then
    ok "rounds of the CNN with both clients complete"
else
    not_ok "only $(rounds_seen server) rounds" "$TMP/server.log"
fi
echo "     held-out accuracy after round $(rounds_seen server): $(round_of server $(($(rounds_seen server) - 1)) 'r["accuracy"]')"

expect "event --output without --wait is a usage error" 2 'give --wait TOPIC' -- \
    "$BBCTL" --state-dir "$TMP/server" event Server export=null --output "$TMP/x.onnx"
# the period is short: stop the rounds (the clients) so that the model
# exported is the one the last reported round ended with
stop_node c0
stop_node c1
sleep 1
LAST=$(($(rounds_seen server) - 1))
AFTER=$(round_of server "$LAST" 'r["after"]')
OUT=$TMP/trained.onnx
if ctl server --timeout 60 event Server export=null --wait model --output "$OUT" \
    >"$TMP/export.log" 2>&1 && [ -s "$OUT" ]; then
    ok "bbctl event Server export=null --wait model --output writes the model ($(wc -c <"$OUT") bytes)"
else
    not_ok "the export" "$TMP/export.log"
fi
# python3-onnx's checker accepts it; its f32 initializers, in order, are the
# flat parameter vector of the last round (ParamsDigest, plugin_train.h)
if "$PY" - "$OUT" "$AFTER" >"$TMP/check.log" 2>&1 <<'PY'; then
import struct, sys, onnx
from onnx import numpy_helper
m = onnx.load(sys.argv[1])
onnx.checker.check_model(m, full_check=True)
assert [n.op_type for n in m.graph.node][:2] == ["Reshape", "Conv"], m.graph.node
flat = b"".join(numpy_helper.to_array(t).astype("<f4").tobytes()
                for t in m.graph.initializer if t.data_type == onnx.TensorProto.FLOAT)
w = struct.unpack("<%dI" % (len(flat) // 4), flat)
M = (1 << 64) - 1
P = 0x100000001b3
lane = [(0xcbf29ce484222325 ^ len(w)) + k for k in range(4)]
for j in range(len(w) // 2):  # 64-bit word j goes to lane j mod 4
    lane[j % 4] = ((lane[j % 4] ^ (w[2 * j + 1] << 32 | w[2 * j])) * P) & M
h = lane[0]
for k in range(1, 4):
    h = ((h ^ lane[k]) * P) & M
if len(w) % 2:
    h = ((h ^ w[-1]) * P) & M
h ^= h >> 33
h = (h * 0xff51afd7ed558ccd) & M
h ^= h >> 33
assert h == int(sys.argv[2]), "digest %d, the last round's %s" % (h, sys.argv[2])
print("checker ok; %d initializers; the parameters of the last round" % len(m.graph.initializer))
PY
    ok "python3-onnx's checker accepts it, and it holds the last round's parameters"
else
    not_ok "the exported model" "$TMP/check.log"
fi
# and bbd runs it as a plain ONNX model
"$PY" -c 'import sys, numpy as np; from onnx import numpy_helper
open(sys.argv[1], "wb").write(numpy_helper.from_array(
    np.linspace(0, 1, 128, dtype=np.float32).reshape(2, 64), "input").SerializeToString())' "$TMP/x.pb"
check "bbd run runs the exported model" "$BBD" run "$OUT" input="$TMP/x.pb" -o "$TMP/run"
finish
