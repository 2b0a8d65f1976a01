#!/usr/bin/env bash
# federated_codec.sh — examples/federated with --codec codec::TopK on real
# bbd processes: four IID clients send 1% of their update each round (the
# rest kept as each client's residual, error feedback), the server
# decompresses the batch, averages the updates and adds the mean to the
# global model. Over 12 rounds the held-out accuracy climbs past 85%, every
# round has at least its quorum of three participants (a client slowed by a
# loaded machine may miss a deadline), and the updates that reach the server
# are under a tenth of what f32 parameters would be (4 x 2,410 floats).
# scripts/codec-report measures all the codecs side by side for the README.
# Ends with "N passed, N failed".
source "$(dirname "$0")/federated_common.bash"

ROUNDS=12
codecs_listed() {
    "$BBC" plugins --plugin-path "$PLUG" >"$TMP/plugins.txt" &&
        for t in codec::F16 codec::Int8Affine codec::TopK codec::ProductQuantization; do
            grep -qx "$t" "$TMP/plugins.txt" || return 1
        done &&
        grep -q 'Compress(t: tensor_f32) -> (code: tensor_f16)' "$TMP/plugins.txt" &&
        grep -q 'Decompress(code: tensor_u8) -> (t: tensor_f32)' "$TMP/plugins.txt"
}
check "bbc plugins lists the four codecs with their In/Out storage types" codecs_listed
check "the federated program records and compiles with --codec codec::TopK" \
    record topk --clients 4 --period-ms 500 --deadline-ms 400 --epochs 5 --codec codec::TopK
serve srv "$TMP/topk.onnx"
for ((i = 0; i < 4; i++)); do
    start_client "c$i" "$TMP/topk.onnx" srv "$i" 4 || not_ok "client $i starts" "$TMP/c$i.log"
done
wait_connected srv 4
if wait_rounds srv $((K0 + ROUNDS)) 120; then
    ok "$ROUNDS rounds with all four clients (after $K0)"
else
    not_ok "only $(rounds_seen srv) of $K0 + $ROUNDS rounds" "$TMP/srv.log"
fi
figures() {
    "$PY" - "$TMP/srv.events" "$K0" "$ROUNDS" <<'PY'
import json, statistics, sys
k0, n = int(sys.argv[2]), int(sys.argv[3])
evs = [json.loads(l) for l in open(sys.argv[1]) if '"topic":"round"' in l][k0:k0 + n]
items = [[x["data"][0] if "data" in x else int(x["value"]) for x in e["value"]["items"]]
         for e in evs]
assert all(it[1] >= 3 for it in items), "participants: %s" % [it[1] for it in items]
acc = [it[4] for it in items]
t = [e["transport"]["bytes_in"] for e in evs]
print("%.4f %.4f %d" % (acc[0], acc[-1], statistics.median(b - a for a, b in zip(t, t[1:]))))
PY
}
if read -r first last bytes_in <<<"$(figures)" && [ -n "$bytes_in" ]; then
    echo "     TopK 1%: held-out accuracy $first after the first round, $last after $ROUNDS;" \
        "$bytes_in bytes of updates in a round"
    if "$PY" -c "import sys; sys.exit(not float(sys.argv[1]) >= 0.85)" "$last"; then
        ok "the accuracy climbs to $last (>= 0.85) on 1% updates"
    else
        not_ok "accuracy $first -> $last" "$TMP/srv.events"
    fi
    if [ "$bytes_in" -lt $((4 * 2410 * 4 / 10)) ]; then
        ok "$bytes_in bytes of updates a round, under a tenth of f32's $((4 * 2410 * 4))"
    else
        not_ok "$bytes_in bytes of updates a round"
    fi
else
    not_ok "the rounds' reports are readable, with >= 3 participants each" "$TMP/srv.events"
fi
stop_watch srv
stop_nodes "every node stops cleanly" c0 c1 c2 c3 srv
finish
