#!/usr/bin/env bash
# federated_kill.sh — a client killed with SIGKILL while it trains for round
# 5: the round still completes, by quorum (3 of 4) at its deadline; the
# server logs the missing client (PeerDown: its redials fail, default threshold);
# training goes on with three; the client restarted from its state dir
# reconnects (bbd redials its --peer) and answers again in a later round.
# Ends with "N passed, N failed".
source "$(dirname "$0")/federated_common.bash"

DEADLINE_MS=2000
check "the federated program records and compiles" \
    record fed --clients 4 --quorum 0.75 --period-ms 2500 --deadline-ms $DEADLINE_MS --epochs 5
serve srv "$TMP/fed.onnx"
for i in 0 1 2; do
    start_client "c$i" "$TMP/fed.onnx" srv "$i" 4 || not_ok "client $i starts" "$TMP/c$i.log"
done
# the victim trains 1000 epochs a round (about half a second): long enough to
# be caught training, well below the deadline
start_client c3 "$TMP/fed.onnx" srv 3 4 iid '{"epochs": 1000}' || not_ok "client 3 starts" "$TMP/c3.log"
VICTIM=$(node_peer c3)

wait_rounds srv 4 40 && ok "rounds 1-4" || not_ok "rounds 1-4 ($(rounds_seen srv))" "$TMP/srv.log"
training() { [ "$(ctl c3 --json status | jget 'd["pending_async"]')" -ge 1 ]; }
if wait_until 10 training; then
    BEFORE=$(rounds_seen srv)
    kill -KILL "$(node_pid c3)"
    wait "$(node_pid c3)" 2>/dev/null
    unset "NODE_PID[c3]"
    ok "client 3 killed (SIGKILL) while it trains for round $((BEFORE + 1))"
else
    not_ok "client 3 never seen training" "$TMP/c3.log"
    BEFORE=$(rounds_seen srv)
fi
K=$BEFORE # 0-based index of the round under way at the kill
if wait_rounds srv $((K + 1)) 15; then
    N=$(round_of srv $K 'r["participants"]')
    MS=$(round_of srv $K 'int(r["ms"])')
    R=$(round_of srv $K 'r["round"]')
    echo "     round $R: $N participants after $MS ms (deadline $DEADLINE_MS ms)"
    [ "$N" = 3 ] && [ "$MS" -ge $DEADLINE_MS ] &&
        ok "round $R completes by quorum at its deadline, without the dead client" ||
        not_ok "round $R: $N participants, $MS ms" "$TMP/srv.events"
else
    not_ok "the round under way at the kill never completed" "$TMP/srv.log"
fi
peer_down_logged() { grep -q "comp=engine msg=PeerDown peer=$VICTIM" "$TMP/srv.log"; }
wait_until 15 peer_down_logged && ok "the server logs PeerDown for the dead client" ||
    not_ok "no PeerDown" "$TMP/srv.log"
if wait_rounds srv $((K + 2)) 15 && [ "$(round_of srv $((K + 1)) 'r["participants"]')" = 3 ]; then
    ok "training goes on with three clients"
else
    not_ok "no round with the three after the kill" "$TMP/srv.events"
fi

start_node c3 --config "$TMP/c3.json" --targets Client --listen /ip4/127.0.0.1/tcp/0 \
    --peer "$SERVER_ID=$SERVER_ADDR" "$TMP/fed.onnx" || not_ok "client 3 restarts" "$TMP/c3.log"
[ "$(node_peer c3)" = "$VICTIM" ] && ok "restarted with its PeerId (the key in its state dir)" ||
    not_ok "PeerId changed"
AT=$(rounds_seen srv)
rejoined() {
    local n=$(rounds_seen srv) i
    for ((i = AT; i < n; i++)); do
        [ "$(round_of srv $i 'r["participants"]')" = 4 ] && return 0
    done
    return 1
}
if wait_until 20 rejoined; then
    ok "the restarted client answers again: a later round has four participants"
else
    not_ok "the restarted client never rejoined" "$TMP/srv.events"
fi
grep -q "comp=engine msg=PeerUp peer=$VICTIM" "$TMP/srv.log" && ok "the server logs PeerUp for it" ||
    not_ok "no PeerUp" "$TMP/srv.log"
stop_watch srv
for n in c0 c1 c2 c3 srv; do stop_node "$n"; done
finish
