#!/usr/bin/env bash
# federated_fault_netns.sh — the federated example across several hosts:
# one network namespace per node (server, four clients) and one for the
# fault relay, veth pairs into a bridge in a namespace of its own, distinct
# addresses (10.77.0.0/24, inside namespaces this test creates and deletes).
# The clients know the server only by the relay's address and listen on UDP
# only, so every byte between them crosses the relay: 5% loss, 5%
# duplication, 30 ms ± 10 ms. Rounds complete; then the link is cut
# mid-round for 3 s and restored, and rounds go on with their quorum.
# Skips, saying why, where namespaces cannot be made (no root, no ip(8)).
# Ends with "N passed, N failed".
source "$(dirname "$0")/federated_common.bash"
RELAY=$BB_BUILD/tests/tools/fault_relay
ROUNDS=6
NS="bbrel$$"
HOSTS=(hub srv relay c0 c1 c2 c3)
declare -A IP=([srv]=10.77.0.10 [relay]=10.77.0.20 [c0]=10.77.0.30 [c1]=10.77.0.31
    [c2]=10.77.0.32 [c3]=10.77.0.33)

netns_cleanup() {
    local h
    for n in "${!NODE_PID[@]}"; do kill -KILL "${NODE_PID[$n]}" 2>/dev/null; done
    [ -n "${RELAY_PID:-}" ] && kill -KILL "$RELAY_PID" 2>/dev/null
    wait 2>/dev/null
    for h in "${HOSTS[@]}"; do ip netns del "$NS-$h" 2>/dev/null; done
    cleanup
}
trap netns_cleanup EXIT

make_hosts() {
    ip netns add "$NS-hub" || return 1
    ip -n "$NS-hub" link add br0 type bridge && ip -n "$NS-hub" link set br0 up &&
        ip -n "$NS-hub" link set lo up || return 1
    local h i=0
    for h in srv relay c0 c1 c2 c3; do
        ip netns add "$NS-$h" &&
            ip link add "bbv$$$i" netns "$NS-$h" type veth peer name "p$i" netns "$NS-hub" &&
            ip -n "$NS-hub" link set "p$i" master br0 && ip -n "$NS-hub" link set "p$i" up &&
            ip -n "$NS-$h" link set "bbv$$$i" name eth0 && ip -n "$NS-$h" link set eth0 up &&
            ip -n "$NS-$h" link set lo up &&
            ip -n "$NS-$h" addr add "${IP[$h]}/24" dev eth0 || return 1
        i=$((i + 1))
    done
}
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! make_hosts >"$TMP/netns.err" 2>&1; then
    echo "ok   skipped: network namespaces cannot be made here ($( [ "$(id -u)" != 0 ] && echo "not root" || head -1 "$TMP/netns.err"))"
    echo "1 passed, 0 failed"
    exit 0
fi
ok "namespaces: a bridge and six hosts, 10.77.0.0/24"

# bbd in namespace H as node NAME (control socket and logs in $TMP as usual)
start_in() { # H NAME ARGS...
    local h=$1 n=$2
    shift 2
    ip netns exec "$NS-$h" "$BBD" --state-dir "$TMP/$n" --plugin-path "$PLUG" "$@" \
        >>"$TMP/$n.log" 2>&1 &
    NODE_PID[$n]=$!
    wait_until 20 ctl "$n" status
}

# security off: the relay mangles frames as units, which only the plaintext
# framing lets it find (federated_fault.sh says why).
check "the federated program records and compiles" \
    record fed --clients 4 --quorum 0.5 --period-ms 1000 --deadline-ms 800 --epochs 2
cat >"$TMP/srv.json" <<JSON
{"security": "off", "components": {"data": {"path": "$DIGITS", "part": "holdout"}}}
JSON
start_in srv srv --config "$TMP/srv.json" --targets Server --listen "/ip4/${IP[srv]}/tcp/7000" \
    "$TMP/fed.onnx" || not_ok "the server starts in its namespace" "$TMP/srv.log"
SERVER_ID=$(node_peer srv)
watch_rounds srv
ip netns exec "$NS-relay" "$RELAY" --proto tcp --listen "${IP[relay]}:7100" --to "${IP[srv]}:7000" \
    --drop 0.05 --dup 0.05 --delay 30 --jitter 10 --seed 3 >"$TMP/relay.out" 2>&1 &
RELAY_PID=$!
wait_until 5 grep -q '^listening' "$TMP/relay.out" || not_ok "the relay starts" "$TMP/relay.out"
for i in 0 1 2 3; do
    cat >"$TMP/c$i.json" <<JSON
{"security": "off", "components": {"data": {"path": "$DIGITS", "shard_count": 4, "shard_index": $i,
                         "partition": "iid", "seed": $((10 + i))}}}
JSON
    start_in "c$i" "c$i" --config "$TMP/c$i.json" --targets Client \
        --listen "/ip4/${IP[c$i]}/udp/7200" --peer "$SERVER_ID=/ip4/${IP[relay]}/tcp/7100" \
        "$TMP/fed.onnx" || not_ok "client $i starts in its namespace" "$TMP/c$i.log"
done
wait_connected srv 4
expect_rounds srv "$ROUNDS" 120 \
    "$ROUNDS rounds across six hosts through the relay (5% loss, 5% duplicates, 30 +- 10 ms)"
cut_and_restore srv
kill "$RELAY_PID"
wait "$RELAY_PID" 2>/dev/null
RELAY_PID=
units=$(sed -n 's/^units=\([0-9]*\).*/\1/p' "$TMP/relay.out")
refused=$(sed -n 's/.* refused=\([0-9]*\).*/\1/p' "$TMP/relay.out")
echo "     relay: $(tail -n1 "$TMP/relay.out")"
[ "${units:-0}" -gt 50 ] && [ "${refused:-0}" -ge 1 ] &&
    ok "every round crossed the relay ($units frames) and the cut refused the clients' dials" ||
    not_ok "relay counters" "$TMP/relay.out"
stop_watch srv
stop_nodes "every node stops cleanly" c0 c1 c2 c3 srv
finish
