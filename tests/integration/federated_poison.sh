#!/usr/bin/env bash
# federated_poison.sh — one of four clients is poisoned: its node config sets
# nn::Mlp's attack_update_scale to 1e6, so every update it sends is 10^6
# times its honest one. With agg::TrimmedMean (trim 0.25: one of four cut at
# each end, per coordinate) training still converges; with agg::FedAvg,
# the same deployment's accuracy collapses — the contrast. Ends with
# "N passed, N failed".
source "$(dirname "$0")/federated_common.bash"

ROUNDS=10
run() { # NAME AGGREGATOR: ROUNDS rounds with client 0 poisoned; prints the last accuracy
    local name=$1 agg=$2 i
    record "$name" --clients 4 --period-ms 500 --deadline-ms 400 --epochs 5 --aggregator "$agg" ||
        { not_ok "$agg: the program records and compiles" "$TMP/record-$name.log"; return; }
    serve "$name" "$TMP/$name.onnx" "$agg: server"
    # the honest clients first: a round with the attacker and fewer than three
    # honest clients would trim nothing (k = floor(0.25 n))
    for i in 1 2 3; do
        start_client "${name}_c$i" "$TMP/$name.onnx" "$name" "$i" 4 ||
            not_ok "$agg: client $i starts" "$TMP/${name}_c$i.log"
    done
    start_client "${name}_c0" "$TMP/$name.onnx" "$name" 0 4 iid '{"attack_update_scale": 1e6}' ||
        not_ok "$agg: the poisoned client starts" "$TMP/${name}_c0.log"
    wait_rounds "$name" $ROUNDS 60
    stop_watch "$name"
    for i in 0 1 2 3; do stop_node "${name}_c$i"; done
    stop_node "$name"
}

run trimmed agg::TrimmedMean
if has_rounds trimmed $ROUNDS; then
    TRIMMED=$(round_of trimmed $((ROUNDS - 1)) 'r["accuracy"]')
    N=$(round_of trimmed $((ROUNDS - 1)) 'r["participants"]')
    echo "     TrimmedMean with a client scaling its update by 1e6: $TRIMMED after $ROUNDS rounds ($N answered)"
    "$PY" -c "import sys; sys.exit(not float(sys.argv[1]) >= 0.9)" "$TRIMMED" &&
        ok "TrimmedMean converges despite the poisoned client ($TRIMMED)" ||
        not_ok "TrimmedMean accuracy $TRIMMED" "$TMP/trimmed.events"
else
    not_ok "TrimmedMean: only $(rounds_seen trimmed) of $ROUNDS rounds" "$TMP/trimmed.log"
fi

run fedavg agg::FedAvg
FEDAVG_ROUNDS=$(rounds_seen fedavg)
if [ "$FEDAVG_ROUNDS" -ge 1 ]; then
    FEDAVG=$(round_of fedavg $((FEDAVG_ROUNDS - 1)) 'r["accuracy"]')
else
    FEDAVG=0 # no round completed at all: collapsed
fi
echo "     FedAvg under the same attack: $FEDAVG after $FEDAVG_ROUNDS of $ROUNDS rounds"
"$PY" -c "import sys; sys.exit(not float(sys.argv[1]) < 0.5)" "$FEDAVG" &&
    ok "FedAvg's accuracy collapses under the same attack ($FEDAVG)" ||
    not_ok "FedAvg accuracy $FEDAVG did not collapse" "$TMP/fedavg.events"
finish
