#!/usr/bin/env bash
# federated_fault.sh — the federated example through a faulty network
# (tests/tools/fault_relay between the server and its four clients): 10%
# of frames lost, 5% duplicated, 5% reordered, 50 ms ± 20 ms of delay, and
# a few corrupted. Every round still completes and the final held-out
# accuracy is within 1 point of a clean run of the same program; the
# duplicates are removed by the dedup gate (its counter proves it); the
# corrupted frames are refused and counted, never a crash. Then frames are
# truncated (the stream desynchronizes: the receiver closes, the client
# reconnects) and the link is cut mid-round and restored: rounds go on.
# Clients do not listen, so every byte between them and the server
# crosses the relay. Ends with "N passed, N failed".
source "$(dirname "$0")/federated_common.bash"
# The relay drops, duplicates, reorders and corrupts our frames as units,
# which only the plaintext framing lets it find: under the default Noise
# channel every record is sealed under a counter nonce, so any such fault
# just closes the connection (secure_channel and secure_flood test that).
# What this test is about is the engine over a lossy path: security off.
FED_NODE_JSON='"security": "off"'
RELAY=$BB_BUILD/tests/tools/fault_relay
ROUNDS=12

check "the federated program records and compiles" \
    record fed --clients 4 --quorum 0.5 --period-ms 1000 --deadline-ms 800 --epochs 5

# The clients listen on UDP only (start_client_at): the server resolves a
# client by the addresses it announces, and a TCP-only server cannot dial a
# UDP address, so it answers on the connection the client dialed: every
# byte crosses the relay.
start_relay() { # NAME ARGS... -> RELAY_PID, RELAY_PORT
    "$RELAY" --proto tcp --listen 127.0.0.1:0 --to "127.0.0.1:${SERVER_ADDR##*/tcp/}" "$@" \
        >"$TMP/$RELAY_NAME.out" 2>"$TMP/$RELAY_NAME.err" &
    RELAY_PID=$!
    wait_until 5 grep -q '^listening' "$TMP/$RELAY_NAME.out"
    RELAY_PORT=$(sed -n 's/^listening //p' "$TMP/$RELAY_NAME.out")
}

run_rounds() { # SERVER LABEL -> final accuracy in ACC
    local s=$1
    wait_connected "$s" 4
    expect_rounds "$s" "$ROUNDS" 120 "$2: $ROUNDS rounds after all four connected"
    ACC=$(round_of "$s" $((K0 + ROUNDS - 1)) 'r["accuracy"]' 2>/dev/null || echo 0)
}

counter() { ctl "$1" --json status | jget "d[\"counters\"].get(\"$2\", 0)"; }

# ---- clean: the same clients, through a relay without faults -----------------------------
serve clean "$TMP/fed.onnx" "clean server"
RELAY_NAME=relay_clean start_relay
for i in 0 1 2 3; do
    start_client_at "k$i" "$TMP/fed.onnx" "$i" "/ip4/127.0.0.1/tcp/$RELAY_PORT" || not_ok "clean client $i" "$TMP/k$i.log"
done
run_rounds clean "clean network"
CLEAN=$ACC
stop_watch clean
stop_nodes "clean run stops" k0 k1 k2 k3 clean
kill "$RELAY_PID"; wait "$RELAY_PID" 2>/dev/null

# ---- loss, duplication, reordering, delay, corruption -------------------------------------
serve srv "$TMP/fed.onnx"
RELAY_NAME=relay start_relay --drop 0.10 --dup 0.05 --reorder 0.05 --delay 50 --jitter 20 \
    --corrupt 0.02 --seed 7
for i in 0 1 2 3; do
    start_client_at "c$i" "$TMP/fed.onnx" "$i" "/ip4/127.0.0.1/tcp/$RELAY_PORT" || not_ok "client $i" "$TMP/c$i.log"
done
run_rounds srv "10% loss, 5% duplicates, 5% reordered, 50 +- 20 ms"
echo "     accuracy: clean $CLEAN, faulty $ACC"
"$PY" -c "import sys; sys.exit(not (abs(float(sys.argv[1]) - float(sys.argv[2])) <= 0.01))" "$ACC" "$CLEAN" &&
    ok "final accuracy $ACC within 1 point of the clean run's $CLEAN" ||
    not_ok "final accuracy $ACC vs clean $CLEAN"
dedup=0
for n in srv c0 c1 c2 c3; do
    dedup=$((dedup + $(counter "$n" "gate.dedup_denied")))
done
[ "$dedup" -gt 0 ] && ok "the dedup gate removed $dedup duplicate envelopes" ||
    not_ok "no duplicate removed by the dedup gate" "$TMP/srv.log"
rejected=0
for n in srv c0 c1 c2 c3; do
    rejected=$((rejected + $(ctl "$n" --json status | jget 'd["counters"]["wire.receive_errors"]')))
done
[ "$rejected" -gt 0 ] && ok "corrupted frames were refused and counted ($rejected)" ||
    not_ok "no corrupted frame counted"

# ---- truncated frames: the stream desynchronizes, the client reconnects -------------------
# a new relay on the same port: the clients dial what they were told
kill "$RELAY_PID"; wait "$RELAY_PID" 2>/dev/null
BEFORE=$(rounds_seen srv)
RELAY_NAME=relay_trunc start_relay --truncate 0.05 --delay 5 --seed 9 --listen-again "$RELAY_PORT"
if wait_rounds srv $((BEFORE + 6)) 120; then
    ok "with 5% of frames truncated rounds go on ($(($(rounds_seen srv) - BEFORE)) more)"
else
    not_ok "rounds stopped with truncated frames" "$TMP/srv.log"
fi
kill "$RELAY_PID"; wait "$RELAY_PID" 2>/dev/null
relay_stat() { sed -n "s/.* $2=\([0-9]*\).*/\1/p" "$TMP/$1.out" | tail -1; }
echo "     relay (truncation): $(tail -n1 "$TMP/relay_trunc.out")"
[ "$(relay_stat relay_trunc truncated)" -ge 1 ] && [ "$(relay_stat relay_trunc connections)" -gt 4 ] &&
    ok "truncated frames closed connections and the clients dialed again" ||
    not_ok "truncation: $(tail -n1 "$TMP/relay_trunc.out")"
for n in srv c0 c1 c2 c3; do node_alive "$n" || not_ok "$n died" "$TMP/$n.log"; done

# ---- the link cut mid-round and restored ------------------------------------------------
RELAY_NAME=relay_cut start_relay --delay 5 --listen-again "$RELAY_PORT"
cut_and_restore srv
kill "$RELAY_PID"; wait "$RELAY_PID" 2>/dev/null
[ "$(relay_stat relay_cut refused)" -ge 1 ] && ok "the cut refused the clients' dials until restored" ||
    not_ok "cut: $(tail -n1 "$TMP/relay_cut.out")"
echo "     relay (faults): $(tail -n1 "$TMP/relay.out")"
stop_watch srv
stop_nodes "every node stops cleanly" c0 c1 c2 c3 srv
finish
