#!/usr/bin/env bash
# federated_fedopt.sh — the server optimizers (agg::FedAdam, agg::FedYogi,
# agg::FedAdagrad) and FedProx (nn::Mlp's proximal_mu on every client) in
# examples/federated with real bbd processes, on digits split over four
# clients with Dirichlet(0.5) label skew (partition seed 3). Each method runs
# 12 rounds that all four clients answer, and the held-out accuracy climbs:
# the last of them is at least 5 points above the run's first round (which
# already has one round of training in it) and at least 80%. The first
# round, not the first with all four: clients that start slowly (ASan, a
# loaded machine) join rounds late, and the rounds before train the model
# (at 300 ms, 13 rounds of it under make SAN=1 check once).
# FedAdam's server is then stopped (SIGTERM) and restarted: its snapshot,
# now carrying the optimizer's state, restores, and the rounds go on from
# the next round number and the parameters the last round ended with. Ends with "N passed, N
# failed". (The long comparison at alpha 0.3 is scripts/fedopt-compare.)
source "$(dirname "$0")/federated_common.bash"

ROUNDS=12
SKEW='"dirichlet_alpha": 0.5, "partition_seed": 3'

# NAME AGGREGATOR [CLIENT_MODEL_JSON] [PERIOD_MS]: record, serve, four
# clients, the rounds.
run_method() {
    local name=$1 agg=$2 model=${3:-} period=${4:-300} i
    check "$name: the program records and compiles with $agg" \
        record "$name" --clients 4 --period-ms "$period" --deadline-ms 10000 --epochs 5 \
        --aggregator "$agg"
    serve "$name" "$TMP/$name.onnx" "$name server"
    for i in 0 1 2 3; do
        start_client "$name-c$i" "$TMP/$name.onnx" "$name" "$i" 4 dirichlet "$model" "$SKEW" ||
            not_ok "$name: client $i starts" "$TMP/$name-c$i.log"
    done
    wait_connected "$name" 4
    local first=0 last=$((K0 + ROUNDS - 1))
    if wait_rounds "$name" $((last + 1)) 120; then
        ok "$name: $ROUNDS rounds with all four clients complete"
    else
        not_ok "$name: only $(rounds_seen "$name") of $((last + 1)) rounds" "$TMP/$name.log"
    fi
    local a0 a1 n
    a0=$(round_of "$name" "$first" 'r["accuracy"]' 2>/dev/null || echo 0)
    a1=$(round_of "$name" "$last" 'r["accuracy"]' 2>/dev/null || echo 0)
    n=$(round_of "$name" "$last" 'r["participants"]' 2>/dev/null || echo 0)
    echo "     $name ($agg${model:+, client model $model}): accuracy $a0 (round 1) -> $a1 (round $((last + 1)))"
    [ "$n" = 4 ] && ok "$name: the last round has all four clients" ||
        not_ok "$name: the last round has $n participants"
    if "$PY" -c "import sys; a, b = map(float, sys.argv[1:]); sys.exit(not (b >= a + 0.05 and b >= 0.8))" \
        "$a0" "$a1"; then
        ok "$name: the accuracy climbs ($a0 -> $a1)"
    else
        not_ok "$name: accuracy $a0 -> $a1 (want +0.05 and >= 0.8)" "$TMP/$name.events"
    fi
}

stop_method() { # NAME
    local i
    stop_watch "$1"
    for i in 0 1 2 3; do stop_node "$1-c$i"; done
    stop_node "$1"
}

# FedAdam's rounds come a second apart, so the SIGTERM right after a round
# was reported lands between rounds (as in federated_restart.sh): the last
# round reported is the last one in the snapshot.
run_method fedadam agg::FedAdam "" 1000
# the server restarts from its snapshot, optimizer state and all
SEEN=$(rounds_seen fedadam)
wait_rounds fedadam $((SEEN + 1)) 30 || not_ok "fedadam: another round before the stop"
stop_node fedadam
stop_watch fedadam
[ "$STOP_RC" = 0 ] && ok "fedadam: SIGTERM: the server exits 0" || not_ok "exit $STOP_RC" "$TMP/fedadam.log"
LAST=$(($(rounds_seen fedadam) - 1))
R_BEFORE=$(round_of fedadam "$LAST" 'r["round"]')
D_BEFORE=$(round_of fedadam "$LAST" 'r["after"]')
start_server fedadam "$TMP/fedadam.onnx" "" "$SERVER_ADDR" ||
    not_ok "fedadam: the server restarts on $SERVER_ADDR" "$TMP/fedadam.log"
grep -q 'msg="snapshot restored".* incarnation=2' "$TMP/fedadam.log" &&
    ok "fedadam: the snapshot with the optimizer's state restores" ||
    not_ok "fedadam: restore" "$TMP/fedadam.log"
watch_rounds fedadam
if wait_rounds fedadam $((LAST + 2)) 60; then
    R_AFTER=$(round_of fedadam $((LAST + 1)) 'r["round"]')
    B_AFTER=$(round_of fedadam $((LAST + 1)) 'r["before"]')
    [ "$R_AFTER" = $((R_BEFORE + 1)) ] && [ "$B_AFTER" = "$D_BEFORE" ] &&
        ok "fedadam: round $R_AFTER follows round $R_BEFORE from its parameters, bit for bit" ||
        not_ok "fedadam: after the restart round $R_AFTER from $B_AFTER (before: round $R_BEFORE ended with $D_BEFORE)"
else
    not_ok "fedadam: no round after the restart" "$TMP/fedadam.log"
fi
stop_method fedadam

run_method fedyogi agg::FedYogi
stop_method fedyogi
run_method fedadagrad agg::FedAdagrad
stop_method fedadagrad
run_method fedprox agg::FedAvg '{"proximal_mu": 0.1}'
stop_method fedprox
finish
