#!/usr/bin/env bash
# federated_many_clients.sh — one server and 100 real bbd client processes
# of examples/federated on this machine (the digits MLP, one local epoch):
# the first round waits until all 100 have joined (peers::Connected
# min_peers_first), then three rounds complete, each answered by the
# cohort (quorum 90%: a client the loaded machine delays past the deadline
# costs a round nothing but its update), each folded into FedAvg as the
# answers landed, every round starting from the last one's parameters;
# every node stops cleanly. Prints the round times and the server's memory.
# Ends with "N passed, N failed".
source "$(dirname "$0")/federated_common.bash"

N=100
ROUNDS=3
export OPENBLAS_NUM_THREADS=1 # 101 processes on a few cores: no BLAS thread pools

check "the federated program records and compiles for $N clients" \
    record fed --clients $N --quorum 0.9 --period-ms 1000 --deadline-ms 20000 --epochs 1

# Every client dials from 127.0.0.1: the connections admitted per address
# (64 by default, one host's worth of peers) are raised to 2N. (The address
# book's max_peers_per_source only replaces peers that have left.)
cat >"$TMP/srv.json" <<JSON
{"components": {"data": {"path": "$DIGITS", "part": "holdout"},
                "selector": {"min_peers": 90, "min_peers_first": $N}},
 "transport": {"max_connections_per_source": $((2 * N))}}
JSON
start_node srv --config "$TMP/srv.json" --targets Server --listen /ip4/127.0.0.1/tcp/0 \
    "$TMP/fed.onnx" || not_ok "the server starts" "$TMP/srv.log"
server_identity srv
watch_rounds srv

# all clients at once, then wait for their control sockets
T0=$SECONDS
for ((i = 0; i < N; i++)); do
    cat >"$TMP/c$i.json" <<JSON
{"components": {"data": {"path": "$DIGITS", "shard_count": $N, "shard_index": $i, "seed": $((10 + i))}}}
JSON
    "$BBD" --state-dir "$TMP/c$i" --plugin-path "$PLUG" --config "$TMP/c$i.json" --targets Client \
        --listen /ip4/127.0.0.1/tcp/0 --peer "$SERVER_ID=$SERVER_ADDR" "$TMP/fed.onnx" \
        >>"$TMP/c$i.log" 2>&1 &
    NODE_PID[c$i]=$!
done
all_answer() {
    local i
    for ((i = 0; i < N; i++)); do
        [ -S "$TMP/c$i/control.sock" ] || return 1
        node_alive "c$i" || return 2
    done
}
if wait_until 90 all_answer; then
    ok "$N clients started in $((SECONDS - T0)) s"
else
    not_ok "the $N clients start" "$TMP/c0.log"
fi
if wait_until 60 connected_at_least srv $N; then
    ok "all $N clients connected to the server after $((SECONDS - T0)) s"
else
    not_ok "$(grep -c '"event":"connected"' "$TMP/srv.events") of $N clients connected" "$TMP/srv.log"
fi
if wait_rounds srv $ROUNDS 120; then
    ok "$ROUNDS rounds in $((SECONDS - T0)) s from the first client's start"
else
    not_ok "only $(rounds_seen srv) of $ROUNDS rounds" "$TMP/srv.log"
fi
rounds_ok() {
    "$PY" - "$TMP/srv.events" "$ROUNDS" "$N" <<'PY'
import json, sys
n, clients = int(sys.argv[2]), int(sys.argv[3])
evs = [json.loads(l) for l in open(sys.argv[1]) if '"topic":"round"' in l][:n]
assert len(evs) == n, "%d rounds" % len(evs)
prev_after = None
for k, e in enumerate(evs):
    it = [int(x["value"]) if "value" in x else x["data"][0] for x in e["value"]["items"]]
    assert it[0] == k + 1, "round %d reports number %d" % (k + 1, it[0])
    assert it[1] >= 0.9 * clients, "round %d: %d participants" % (k + 1, it[1])
    assert k > 0 or it[1] == clients, "the first round had %d of %d" % (it[1], clients)
    assert prev_after is None or it[7] == prev_after, "round %d does not start from round %d's parameters" % (k + 1, k)
    prev_after = it[8]
    print("round %d: %d clients, %d samples, %.0f ms, accuracy %.3f" %
          (it[0], it[1], it[2], (it[6] - it[5]) / 1e6, it[4]))
PY
}
check "every round: its number, >= 90% of the clients (all $N in the first), the last round's parameters" rounds_ok
sed 's/^/     /' "$TMP/check.out"
folded() { # the server folded every answer as it landed (its engine counter)
    local n
    n=$(ctl srv --json status | jget 'd["counters"]["responses.folded"]')
    [ "${n:-0}" -ge $((ROUNDS * N * 9 / 10)) ]
}
check "the server folded the answers into FedAvg as they landed" folded
echo "     server RSS $(awk '/VmRSS/ {print $2 / 1024 " MB"}' /proc/"$(node_pid srv)"/status)," \
    "peak $(awk '/VmHWM/ {print $2 / 1024 " MB"}' /proc/"$(node_pid srv)"/status)"
stop_watch srv
names=(srv)
for ((i = 0; i < N; i++)); do names+=("c$i"); done
stop_nodes "every node stops cleanly" "${names[@]}"
finish
