#!/usr/bin/env bash
# registry_federated.sh — peers::GlobalRegistry with real bbd processes:
# examples/federated recorded with --discovery registry, so a third class,
# Registry, keeps the registry, and NO node is given a --peer: the server
# and three clients announce themselves there (TTL 2 s, renewed every
# third), and the server's Sample finds its clients through it. Federated
# rounds complete with all three; a SIGKILLed client (it stops renewing)
# leaves the registry within 2 TTLs, and the rounds go on with the other
# two. Ends with "N passed, N failed".
source "$(dirname "$0")/federated_common.bash"

TTL_MS=2000
check "the federated program records with --discovery registry and compiles" \
    record fed --clients 3 --quorum 0.5 --period-ms 500 --deadline-ms 400 --epochs 1 \
    --discovery registry

echo '{"components": {"selector": {"serve": true}}}' >"$TMP/reg.json"
start_node reg --config "$TMP/reg.json" --targets Registry --listen /ip4/127.0.0.1/tcp/0 \
    "$TMP/fed.onnx" || not_ok "the registry starts" "$TMP/reg.log"
REG="$(node_addr reg tcp)/p2p/$(node_peer reg)"
SELECTOR="\"selector\": {\"registry\": \"$REG\", \"ttl_ms\": $TTL_MS}"
cat >"$TMP/srv.json" <<JSON
{"components": {"data": {"path": "$DIGITS", "part": "holdout"}, $SELECTOR}}
JSON
start_node srv --config "$TMP/srv.json" --targets Server --listen /ip4/127.0.0.1/tcp/0 \
    "$TMP/fed.onnx" || not_ok "the server starts with the registry" "$TMP/srv.log"
watch_rounds srv
for i in 0 1 2; do
    cat >"$TMP/c$i.json" <<JSON
{"components": {"data": {"path": "$DIGITS", "shard_count": 3, "shard_index": $i, "seed": $((10 + i))},
                $SELECTOR}}
JSON
    start_node "c$i" --config "$TMP/c$i.json" --targets Client --listen /ip4/127.0.0.1/tcp/0 \
        "$TMP/fed.onnx" || not_ok "client $i starts (no --peer)" "$TMP/c$i.log"
done

members() { ctl reg --json --timeout 10 invoke Registry --wait members | jget 'sorted(i["peer"] for i in d["event"]["value"]["items"])'; }
has_members() { [ "$(members)" = "$1" ]; }
ALL=$("$PY" -c 'import json, sys; print(json.dumps(sorted(sys.argv[1:])))' \
    "$(node_peer srv)" "$(node_peer c0)" "$(node_peer c1)" "$(node_peer c2)")
if wait_until 20 has_members "$ALL"; then
    ok "the server and the three clients announced themselves to the registry"
else
    not_ok "registry members: $(members)" "$TMP/reg.log"
fi
round_with() { # N [SKIP]: a round with N participants, among the rounds after the first SKIP
    "$PY" - "$TMP/srv.events" "$1" "${2:-0}" <<'PY'
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1]) if '"topic":"round"' in l]
n = [int(e["value"]["items"][1]["value"]) for e in evs][int(sys.argv[3]):]
sys.exit(0 if int(sys.argv[2]) in n else 1)
PY
}
if wait_until 30 round_with 3; then
    ok "a federated round with all three clients, found through the registry (no --peer anywhere)"
else
    not_ok "rounds with 3 clients ($(rounds_seen srv) rounds)" "$TMP/srv.log"
fi

# c2 dies: it stops renewing and leaves the registry within 2 TTLs
GONE=$("$PY" -c 'import json, sys; print(json.dumps(sorted(sys.argv[1:])))' \
    "$(node_peer srv)" "$(node_peer c0)" "$(node_peer c1)")
BEFORE=$(rounds_seen srv)
kill -KILL "${NODE_PID[c2]}"
wait "${NODE_PID[c2]}" 2>/dev/null
unset "NODE_PID[c2]"
t0=$(date +%s%N)
if wait_until 20 has_members "$GONE"; then
    ms=$((($(date +%s%N) - t0) / 1000000))
    if [ "$ms" -le $((2 * TTL_MS)) ]; then
        ok "the killed client left the registry ${ms} ms after it died (TTL $TTL_MS ms)"
    else
        not_ok "the killed client left the registry only after ${ms} ms (2 TTLs: $((2 * TTL_MS)))"
    fi
    echo "     registry: a node that stops renewing is gone after ${ms} ms (TTL $TTL_MS ms)"
else
    not_ok "the killed client is still registered: $(members)" "$TMP/reg.log"
fi
if wait_until 30 round_with 2 "$BEFORE"; then
    ok "rounds go on with the two clients the registry still lists"
else
    not_ok "no round with 2 clients after the kill" "$TMP/srv.log"
fi
stop_watch srv
stop_nodes "registry, server and clients stop cleanly" c0 c1 srv reg
finish
