#!/usr/bin/env bash
# federated_iid.sh — the acceptance run of examples/federated with real bbd
# processes: first the centralized baseline through the same program and
# processes (one client holding all the training rows trains 40 epochs in one
# round, the configuration of test_nn_engine's baseline), measured here;
# then one server and four clients on IID shards for 20 rounds: the final
# held-out accuracy must be within 2 points of that baseline. Every round
# is checked (number, participants, samples, bytes, parameter continuity).
# Ends with "N passed, N failed".
source "$(dirname "$0")/federated_common.bash"

ROUNDS=20
check "the federated program records and compiles" \
    record fed --clients 4 --period-ms 500 --deadline-ms 400 --epochs 5

# ---- the centralized baseline ----------------------------------------------------------
serve base_srv "$TMP/fed.onnx" "baseline server"
start_client base_c0 "$TMP/fed.onnx" base_srv 0 1 iid '{"epochs": 40}' ||
    not_ok "baseline client starts" "$TMP/base_c0.log"
if wait_rounds base_srv 1 60; then
    BASELINE=$(round_of base_srv 0 'r["accuracy"]')
    ok "baseline: one client, 40 epochs over all 1438 training rows: $BASELINE"
else
    not_ok "the baseline round never came" "$TMP/base_srv.log"
    BASELINE=0
fi
stop_watch base_srv
stop_node base_c0
stop_node base_srv

# ---- four IID clients, 20 rounds ---------------------------------------------------------
serve srv "$TMP/fed.onnx"
start_clients "$TMP/fed.onnx" srv 4 iid
wait_connected srv 4 # the 20 rounds counted start at K0
T0=$SECONDS
if wait_rounds srv $((K0 + ROUNDS)) 90; then
    ok "$ROUNDS rounds with all four clients in $((SECONDS - T0)) s (after $K0)"
else
    not_ok "only $(rounds_seen srv) of $K0 + $ROUNDS rounds" "$TMP/srv.log"
fi
ACC=$(round_of srv $((K0 + ROUNDS - 1)) 'r["accuracy"]' 2>/dev/null || echo 0)
FIRST=$(round_of srv "$K0" 'r["accuracy"]' 2>/dev/null || echo 0)
echo "     digits: centralized baseline $BASELINE; 4 IID clients: $FIRST after the first round with all four, $ACC after $ROUNDS"
if "$PY" -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(not (b >= 0.95 and a >= b - 0.02))" "$ACC" "$BASELINE"; then
    ok "final accuracy $ACC is within 2 points of the centralized baseline $BASELINE"
else
    not_ok "final accuracy $ACC vs baseline $BASELINE" "$TMP/srv.events"
fi
rounds_ok() {
    "$PY" - "$TMP/srv.events" "$K0" "$ROUNDS" <<'PY'
import json, sys
k0, n = int(sys.argv[2]), int(sys.argv[3])
evs = [json.loads(l) for l in open(sys.argv[1]) if '"topic":"round"' in l][:k0 + n]
prev_after, prev_bytes = None, None
for k, e in enumerate(evs):
    it = [int(x["value"]) if "value" in x else x["data"][0] for x in e["value"]["items"]]
    assert it[0] == k + 1, "round %d reports number %d" % (k + 1, it[0])
    assert it[1] == 4 or k < k0, "round %d: %d participants" % (k + 1, it[1])
    assert it[2] == 5 * 1438 or k < k0, "round %d: %d samples" % (k + 1, it[2])
    assert it[6] >= it[5], "round %d ends before it starts" % (k + 1)
    assert prev_after is None or it[7] == prev_after, "round %d does not start from round %d's parameters" % (k + 1, k)
    prev_after = it[8]
    t = e["transport"]["bytes_in"] + e["transport"]["bytes_out"]
    # 4 x the 2,410-float model each way, at least
    # (counted from K0 too: a slow build may connect the last client late)
    assert prev_bytes is None or k < k0 or t - prev_bytes >= 2 * 4 * 2410 * 4, "round %d moved %d bytes" % (k + 1, t - prev_bytes)
    prev_bytes = t
print("ok")
PY
}
check "every round: its number, 4 participants, 5 x 1438 samples, the last round's parameters, >= 77 KB moved" rounds_ok
stop_watch srv
stop_nodes "every node stops cleanly" c0 c1 c2 c3 srv
finish
