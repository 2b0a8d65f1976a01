#!/usr/bin/env bash
# federated_non_iid.sh — examples/federated with real bbd processes on a
# non-IID split: each of four clients holds the training rows of about two
# digit classes (data::Csv partition "classes", 2 pieces per client). 20
# rounds of FedAvg must complete; the accuracy is reported (README records
# it next to the IID one) and must stay far above chance. Ends with
# "N passed, N failed".
source "$(dirname "$0")/federated_common.bash"

ROUNDS=20
check "the federated program records and compiles" \
    record fed --clients 4 --period-ms 500 --deadline-ms 400 --epochs 5
serve srv "$TMP/fed.onnx"
start_clients "$TMP/fed.onnx" srv 4 classes
wait_connected srv 4
if wait_rounds srv $((K0 + ROUNDS)) 90; then
    ok "$ROUNDS non-IID rounds with all four clients complete"
else
    not_ok "only $(rounds_seen srv) of $K0 + $ROUNDS rounds" "$TMP/srv.log"
fi
ACC=$(round_of srv $((K0 + ROUNDS - 1)) 'r["accuracy"]' 2>/dev/null || echo 0)
N=$(round_of srv $((K0 + ROUNDS - 1)) 'r["participants"]' 2>/dev/null || echo 0)
echo "     digits, 4 non-IID clients (2 classes each): accuracy $ACC after $ROUNDS rounds"
[ "$N" = 4 ] && ok "the last round has all four clients" || not_ok "last round: $N participants"
if "$PY" -c "import sys; sys.exit(not float(sys.argv[1]) > 0.5)" "$ACC"; then
    ok "non-IID accuracy $ACC: lower than IID, far above chance (10%)"
else
    not_ok "non-IID accuracy $ACC" "$TMP/srv.events"
fi
stop_watch srv
for n in c0 c1 c2 c3 srv; do stop_node "$n"; done
finish
