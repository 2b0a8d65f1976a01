#!/usr/bin/env bash
# bbd_peer_down.sh — a peer that is down: the sender's sends fail, it logs
# PeerDown, backs off (visible in peers, status and metrics), and delivers
# once the peer is back (PeerUp). Ends with "N passed, N failed".
source "$(dirname "$0")/bbd_common.bash"

check "ping_pong compiles" compile_example ping_pong

# learn the Ponger's identity and a port, then take it down
start_node pong --targets Ponger --listen /ip4/127.0.0.1/tcp/0 "$TMP/ping_pong.onnx" ||
    not_ok "Ponger starts" "$TMP/pong.log"
PONG_ID=$(node_peer pong)
PONG_ADDR=$(node_addr pong tcp)
stop_node pong
[ "$STOP_RC" = 0 ] && ok "the Ponger is down" || not_ok "Ponger stop ($STOP_RC)" "$TMP/pong.log"

# backoff capped at 300 ms so the test does not wait out the 60 s default
cat >"$TMP/ping.json" <<JSON
{"targets": ["Pinger"], "listen": ["/ip4/127.0.0.1/tcp/0"],
 "peers": {"$PONG_ID": "$PONG_ADDR"},
 "metrics": "/ip4/127.0.0.1/tcp/0",
 "caps": {"backoff_base_ns": 10000000, "backoff_max_ns": 300000000}}
JSON
start_node ping --config "$TMP/ping.json" "$TMP/ping_pong.onnx" || not_ok "Pinger starts" "$TMP/ping.log"

ctl ping --timeout 20 watch --kind peer --count 1 >"$TMP/watch.out" 2>&1 &
WATCH=$!
wait_until 10 watchers_are ping 1 || not_ok "the watch is registered"
peer_down_logged() {
    ctl ping invoke Pinger 'x=[1]' >/dev/null 2>&1
    grep -q 'comp=engine msg=PeerDown peer='"$PONG_ID" "$TMP/ping.log"
}
if wait_until 20 peer_down_logged; then
    ok "sends to the dead peer fail until the Pinger logs PeerDown for it"
else
    not_ok "no PeerDown" "$TMP/ping.log"
fi
wait "$WATCH" && grep -q "^PeerDown peer=$PONG_ID\$" "$TMP/watch.out" &&
    ok "watch --kind peer streams the PeerDown" || not_ok "PeerDown streamed" "$TMP/watch.out"
ctl ping --json peers >"$TMP/peers.json"
if jget '[p for p in d["peers"] if p["peer"] == "'"$PONG_ID"'"][0]' <"$TMP/peers.json" >"$TMP/pong-entry.json" &&
    jget 'd["down"] and d["failures"] >= 5 and d["backoff_attempts"] >= 5 and not d["connected"]' \
        <"$TMP/pong-entry.json" | grep -q true; then
    ok "peers: down, consecutive failures and backoff attempts counted"
else
    not_ok "peers while down" "$TMP/peers.json"
fi
MPORT=$(ctl ping --json status | jget 'd["metrics"]')
MPORT=${MPORT##*/}
curl -sf "http://127.0.0.1:$MPORT/metrics" >"$TMP/metrics.txt"
if grep -q "^bbd_peer_down{peer=\"$PONG_ID\"} 1$" "$TMP/metrics.txt" &&
    grep -Eq "^bbd_peer_backoff_attempts\{peer=\"$PONG_ID\"\} ([5-9]|[1-9][0-9]+)$" "$TMP/metrics.txt"; then
    ok "metrics: bbd_peer_down and bbd_peer_backoff_attempts for the dead peer"
else
    not_ok "metrics while down" "$TMP/metrics.txt"
fi

# bring it back on the same address (same state dir: same PeerId)
start_node pong --targets Ponger --listen "$PONG_ADDR" --fresh "$TMP/ping_pong.onnx" ||
    not_ok "Ponger comes back on $PONG_ADDR" "$TMP/pong.log"
delivered() { ctl ping --timeout 2 invoke Pinger 'x=[7]' --wait pong 2>/dev/null | grep -q 'float\[1\] 7)$'; }
if wait_until 20 delivered; then
    ok "once the peer is back, a request is delivered and answered"
else
    not_ok "no delivery after the peer came back" "$TMP/ping.log"
fi
grep -q 'comp=engine msg=PeerUp peer='"$PONG_ID" "$TMP/ping.log" && ok "the Pinger logs PeerUp" ||
    not_ok "no PeerUp" "$TMP/ping.log"
ctl ping --json peers | jget '[p for p in d["peers"] if p["peer"] == "'"$PONG_ID"'"][0]' >"$TMP/pong-entry.json"
jget 'not d["down"] and d["failures"] == 0 and d["connected"]' <"$TMP/pong-entry.json" | grep -q true &&
    ok "peers: healthy and connected again, failures reset" || not_ok "peers after recovery" "$TMP/pong-entry.json"
stop_nodes "both nodes stop cleanly" ping pong
finish
