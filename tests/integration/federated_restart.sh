#!/usr/bin/env bash
# federated_restart.sh — the server stopped with SIGTERM after round 8 and
# started again on the same address: it restores its snapshot and goes on
# at round 9 (the aggregator's round count), from the very parameters round
# 8 ended with (bit-identical: round 9's "before" digest is round 8's
# "after" digest), not from round 1; the clients redial it by themselves.
# Ends with "N passed, N failed".
source "$(dirname "$0")/federated_common.bash"

check "the federated program records and compiles" \
    record fed --clients 4 --period-ms 1000 --deadline-ms 800 --epochs 5
serve srv "$TMP/fed.onnx"
start_clients "$TMP/fed.onnx" srv 4
wait_rounds srv 8 30 && ok "rounds 1-8" || not_ok "rounds 1-8 ($(rounds_seen srv))" "$TMP/srv.log"
stop_node srv # right after round 8: the next tick is a second away
stop_watch srv
[ "$STOP_RC" = 0 ] && ok "SIGTERM after round 8: exit 0" || not_ok "exit $STOP_RC" "$TMP/srv.log"
R8=$(round_of srv 7 'r["round"]')
D8=$(round_of srv 7 'r["after"]')
SEEN=$(rounds_seen srv)
[ "$R8" = 8 ] && [ "$SEEN" = 8 ] && ok "the last round before the stop is round 8" ||
    not_ok "round 8 is $R8, $SEEN rounds seen" "$TMP/srv.events"
grep -q 'msg="snapshot written"' "$TMP/srv.log" && ok "the server wrote its snapshot" ||
    not_ok "no snapshot" "$TMP/srv.log"

start_server srv "$TMP/fed.onnx" "" "$SERVER_ADDR" || not_ok "server restarts on $SERVER_ADDR" "$TMP/srv.log"
grep -q 'msg="snapshot restored".* incarnation=2' "$TMP/srv.log" &&
    ok "restarted: the snapshot is restored (incarnation 2)" || not_ok "restore" "$TMP/srv.log"
watch_rounds srv
if wait_rounds srv 9 30; then
    R9=$(round_of srv 8 'r["round"]')
    B9=$(round_of srv 8 'r["before"]')
    N9=$(round_of srv 8 'r["participants"]')
    echo "     after the restart: round $R9 with $N9 clients; parameters $B9 (round 8 ended with $D8)"
    [ "$R9" = 9 ] && ok "the first round after the restart is round 9, not round 1" ||
        not_ok "the first round after the restart is round $R9"
    [ "$B9" = "$D8" ] && ok "round 9 starts from round 8's global parameters, bit for bit" ||
        not_ok "round 9 starts from $B9, round 8 ended with $D8"
    [ "$N9" -ge 3 ] && ok "the clients redialed the restarted server ($N9 answered round 9)" ||
        not_ok "round 9 had $N9 participants"
else
    not_ok "no round after the restart" "$TMP/srv.log"
fi
stop_watch srv
for n in c0 c1 c2 c3 srv; do stop_node "$n"; done
finish
