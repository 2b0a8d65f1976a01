#!/usr/bin/env bash
# federated_skew.sh — clocks that disagree (issue 21): deadlines cross the
# wire as the sender's absolute time, and a client whose clock ran 3 s
# ahead dropped every request as deadline_exceeded. Here two of four
# clients run 5 s ahead of the server and two 5 s behind (bbd's test clock
# hook, $BBD_TEST_CLOCK_OFFSET_MS: every stamp they send and read moves),
# with a 400 ms round deadline: every round completes with all four.
# Ends with "N passed, N failed".
source "$(dirname "$0")/federated_common.bash"

ROUNDS=8
check "the federated program records and compiles" \
    record fed --clients 4 --period-ms 500 --deadline-ms 400 --epochs 1
serve srv "$TMP/fed.onnx"
for i in 0 1 2 3; do
    offset=$((i < 2 ? 5000 : -5000))
    BBD_TEST_CLOCK_OFFSET_MS=$offset start_client "c$i" "$TMP/fed.onnx" srv "$i" 4 iid ||
        not_ok "client $i starts ($offset ms)" "$TMP/c$i.log"
done
wait_connected srv 4
T0=$SECONDS
if wait_rounds srv $((K0 + ROUNDS)) 90; then
    ok "$ROUNDS rounds in $((SECONDS - T0)) s with clients 5 s ahead and 5 s behind (after $K0)"
else
    not_ok "only $(rounds_seen srv) of $K0 + $ROUNDS rounds" "$TMP/srv.log"
fi
all_four() {
    local k
    for ((k = K0; k < K0 + ROUNDS; k++)); do
        [ "$(round_of srv "$k" 'r["participants"]')" = 4 ] || { echo "round $((k + 1)): $(round_of srv "$k" 'r["participants"]') participants"; return 1; }
    done
}
check "every round has all four clients" all_four
dropped() { grep -h 'deadline_exceeded' "$TMP"/c[0-3].log | head -3; }
[ -z "$(dropped)" ] && ok "no client dropped a request as deadline_exceeded" ||
    not_ok "requests dropped: $(dropped)"
stop_watch srv
stop_nodes "every node stops cleanly" c0 c1 c2 c3 srv
finish
