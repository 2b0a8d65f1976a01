#!/usr/bin/env bash
# bbd_tcp.sh — bbd nodes talking over TCP on 127.0.0.1: a request/response
# flow between two nodes (ping_pong; also with the peer given by host
# name, /dns4/localhost/...), a federated round (fed_round: one
# server, two clients), and what a running node shows through bbctl
# (status, peers, watch, event, snapshot) and its metrics endpoint.
# Ends with "N passed, N failed".
source "$(dirname "$0")/bbd_common.bash"

check "ping_pong compiles" compile_example ping_pong
check "fed_round compiles" compile_example fed_round

# ---- request / response ------------------------------------------------------------
if start_node pong --targets Ponger --listen /ip4/127.0.0.1/tcp/0 "$TMP/ping_pong.onnx"; then
    ok "Ponger starts and answers on its control socket"
else
    not_ok "Ponger starts" "$TMP/pong.log"
fi
PONG_ID=$(node_peer pong)
PONG_ADDR=$(node_addr pong tcp)
check "the Ponger reports a PeerId and a bound port" \
    test -n "$PONG_ID" -a -n "${PONG_ADDR##*/tcp/0}"
if start_node ping --targets Pinger --listen /ip4/127.0.0.1/tcp/0 \
    --metrics /ip4/127.0.0.1/tcp/0 --peer "$PONG_ID=$PONG_ADDR" "$TMP/ping_pong.onnx"; then
    ok "Pinger starts with the Ponger as a known peer"
else
    not_ok "Pinger starts" "$TMP/ping.log"
fi

# a watcher on the Ponger sees the request arrive
ctl pong --timeout 10 watch --kind app --topic ping --count 1 >"$TMP/watch.out" 2>&1 &
WATCH=$!
wait_until 10 watchers_are pong 1 || not_ok "the watch is registered"
ctl ping --timeout 10 invoke Pinger 'x=[1.5,2,3]' --wait pong >"$TMP/pong.out" 2>&1
if grep -q 'topic=pong value=ResponseBatch(.*float\[3\] 1.5 2 3)' "$TMP/pong.out"; then
    ok "invoke Pinger: the Ponger's answer comes back (ResponseBatch of the same tensor)"
else
    not_ok "invoke Pinger round trip" "$TMP/pong.out"
fi
ctl ping --json --timeout 10 invoke Pinger 'x={"dtype":"float","shape":[2,2],"data":[1,2,3,4]}' \
    --wait pong >"$TMP/pong.json" 2>&1
if jget 'd["event"]["value"]["items"][0]["value"]["shape"] == [2, 2] and d["event"]["value"]["items"][0]["peer"] == "'"$PONG_ID"'"' \
    <"$TMP/pong.json" | grep -q true; then
    ok "--json: the reply names the responding peer and keeps the shape"
else
    not_ok "--json invoke reply" "$TMP/pong.json"
fi
# a TensorProto file as the input (bbctl invoke Pinger x=@x.pb)
"$PY" -c 'import sys, numpy as np; from onnx import numpy_helper
open(sys.argv[1], "wb").write(numpy_helper.from_array(np.array([[0.5, -2], [8, 16]], dtype=np.float32), "x").SerializeToString())' "$TMP/x.pb"
ctl ping --timeout 10 invoke Pinger "x=@$TMP/x.pb" --wait pong >"$TMP/pb.out" 2>&1
grep -q 'float\[2,2\] 0.5 -2 8 16)$' "$TMP/pb.out" && ok "invoke with x=@FILE.pb (a TensorProto file)" ||
    not_ok "invoke with a .pb input" "$TMP/pb.out"
if wait "$WATCH" && grep -q '^app exec_id=[0-9]* target=Ponger topic=ping value=float\[3\] 1.5 2 3$' "$TMP/watch.out"; then
    ok "watch on the Ponger streamed the inbound ping"
else
    not_ok "watch --topic ping --count 1" "$TMP/watch.out"
fi
grep -q 'comp=transport msg="peer connected" peer='"$PONG_ID"' targets=Ponger' "$TMP/ping.log" &&
    ok "the Pinger logs the connection with the Ponger's targets" ||
    not_ok "peer connected log line" "$TMP/ping.log"

# status, peers and counters
ctl ping --json status >"$TMP/status.json"
if jget 'd["counters"]["envelopes.out"] >= 2 and d["counters"]["envelopes.in"] >= 2 and d["transport"]["connections_open"] == 1 and d["targets"] == ["Pinger"]' \
    <"$TMP/status.json" | grep -q true; then
    ok "status: envelope counters, one open connection, targets"
else
    not_ok "status counters" "$TMP/status.json"
fi
ctl ping peers >"$TMP/peers.out"
grep -q "^$PONG_ID *yes *no *0 *0 ms *$PONG_ADDR\$" "$TMP/peers.out" &&
    ok "peers: the Ponger is connected, healthy, with its address" ||
    not_ok "bbctl peers" "$TMP/peers.out"
ctl ping --json peers >"$TMP/peers.json"
if jget '[(t["state"], t["envelopes_out"] >= 2) for t in (p["transport"] for p in d["peers"] if p["peer"] == "'"$PONG_ID"'")] == [("open", True)]' \
    <"$TMP/peers.json" | grep -q true; then
    ok "peers --json: the Ponger's transport entry (open, envelopes out)"
else
    not_ok "peers --json transport entry" "$TMP/peers.json"
fi
ctl ping status >"$TMP/status.txt"
grep -q '^targets *Pinger$' "$TMP/status.txt" && grep -q '^ *envelopes.out ' "$TMP/status.txt" &&
    ok "status prints readable text by default" || not_ok "bbctl status text" "$TMP/status.txt"

# errors from the daemon come back as they are
ctl ping invoke Nosuch 'x=[1]' >"$TMP/err.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] && grep -q '^bbctl: error: invoke Nosuch: ' "$TMP/err.out" &&
    ok "invoke of an unknown target: exit 1, the daemon's message" ||
    not_ok "invoke unknown target (rc=$rc)" "$TMP/err.out"
ctl ping invoke Pinger 'x=[1,"a"]' >"$TMP/err.out" 2>&1
grep -q "bbctl: error: invoke Pinger: input 'x': element 1 is not a float" "$TMP/err.out" &&
    ok "a malformed input is refused, naming the input" || not_ok "bad input" "$TMP/err.out"
ctl ping event Pinger 'x=[5]' >"$TMP/event.out" 2>&1 && grep -q '^exec [0-9]*$' "$TMP/event.out" &&
    ok "event pushes a value into an input (a fresh execution)" || not_ok "event" "$TMP/event.out"
ctl ping event Pinger 'nosuch=[1]' >"$TMP/err.out" 2>&1
[ $? -eq 1 ] && grep -q 'bbctl: error: event Pinger.nosuch' "$TMP/err.out" &&
    ok "event on an unknown input: exit 1" || not_ok "event unknown input" "$TMP/err.out"

# malformed control requests: an error reply each, the daemon keeps serving
cat >"$TMP/raw.py" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
f = s.makefile("rwb")
for line in sys.stdin:
    f.write(line.encode()); f.flush()
    print(f.readline().decode().strip())
PY
cat >"$TMP/raw.in" <<'REQ'
{"no": "cmd"}
{"cmd": "frobnicate", "id": 7}
{"cmd": "invoke"}
{"cmd": "invoke", "target": "Pinger", "inputs": [1, 2]}
{"cmd": "invoke", "target": "Pinger", "inputs": {"x": [1]}, "wait": 5}
{"cmd": "invoke", "target": "Pinger", "inputs": {"x": [1]}, "timeout_ms": -1}
{"cmd": "event", "target": "Pinger"}
{"cmd": "bootstrap"}
{"cmd": "bootstrap", "all": true, "slots": ["x"]}
{"cmd": "bootstrap", "slots": "x"}
{"cmd": "bootstrap", "modules": ["Nosuch"]}
{"cmd": "watch", "kinds": ["nope"]}
{"cmd": "log_level", "level": "chatty"}
{"cmd": "records", "name": 5}
{"cmd": "records", "name": "none"}
{"cmd": "status", "id": "abc"}
REQ
"$PY" "$TMP/raw.py" "$TMP/ping/control.sock" <"$TMP/raw.in" >"$TMP/raw.out" 2>&1
if [ "$(grep -c '"ok":false' "$TMP/raw.out")" = 14 ] &&
    grep -q '"name\\" must be a string' "$TMP/raw.out" &&
    grep -q '^{"ok":true,"records":\[\]}$' "$TMP/raw.out" &&
    grep -q '"error":"unknown command .frobnicate.","id":7' "$TMP/raw.out" &&
    grep -q '"inputs\\" must be an object' "$TMP/raw.out" &&
    grep -q 'unknown kind .nope.' "$TMP/raw.out" &&
    tail -1 "$TMP/raw.out" | grep -q '^{"ok":true,"peer_id":.*"id":"abc"}$'; then
    ok "malformed control requests get an error reply each; the id is echoed"
else
    not_ok "malformed control requests" "$TMP/raw.out"
fi
ctl ping log-level debug >"$TMP/ll.out" && grep -q '^log level debug$' "$TMP/ll.out" &&
    ctl ping log-level info >/dev/null && ok "log-level changes the running daemon's level" ||
    not_ok "log-level" "$TMP/ll.out"
ctl ping bootstrap --all >"$TMP/boot.out" 2>&1 && grep -q '^bootstrap staged (status: ' "$TMP/boot.out" &&
    ok "bootstrap --all is staged" || not_ok "bootstrap --all" "$TMP/boot.out"

# snapshot on demand
ctl ping snapshot >"$TMP/snap.out" 2>&1
grep -q "^snapshot written: $TMP/ping/snapshot.bbs (" "$TMP/snap.out" && [ -s "$TMP/ping/snapshot.bbs" ] &&
    ok "snapshot writes the state dir's snapshot file" || not_ok "bbctl snapshot" "$TMP/snap.out"

# metrics over plain HTTP
METRICS=$(ctl ping --json status | jget 'd["metrics"]')
MPORT=${METRICS##*/}
curl -sf "http://127.0.0.1:$MPORT/metrics" >"$TMP/metrics.txt"
if grep -q '^bbd_up 1$' "$TMP/metrics.txt" &&
    grep -q "^bbd_peer_envelopes_out_total{peer=\"$PONG_ID\"} [1-9]" "$TMP/metrics.txt" &&
    grep -q "^bbd_peer_connected{peer=\"$PONG_ID\",state=\"[a-z]*\"} 1$" "$TMP/metrics.txt" &&
    grep -q '^bbd_engine_ingress_dropped_total 0$' "$TMP/metrics.txt" &&
    grep -q '^bbd_engine_ingress_bytes_in_flight ' "$TMP/metrics.txt" &&
    grep -q '^# TYPE bbd_transport_bytes_out_total counter$' "$TMP/metrics.txt"; then
    ok "metrics: per-peer envelopes, connection state, ingress drops and budget, Prometheus text"
else
    not_ok "metrics scrape" "$TMP/metrics.txt"
fi
curl -sf -H 'Accept: application/openmetrics-text; version=1.0.0' \
    "http://127.0.0.1:$MPORT/metrics" >"$TMP/om.txt"
tail -1 "$TMP/om.txt" | grep -q '^# EOF$' && grep -q '^# TYPE bbd_polls counter$' "$TMP/om.txt" &&
    ok "metrics: OpenMetrics when asked for it" || not_ok "OpenMetrics" "$TMP/om.txt"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$MPORT/other")
[ "$code" = 404 ] && ok "metrics: other paths are 404" || not_ok "metrics 404 (got $code)"

# a peer given by host name: --peer ID=/dns4/localhost/tcp/PORT, resolved when dialed
if start_node ping2 --targets Pinger --listen /ip4/127.0.0.1/tcp/0 \
    --peer "$PONG_ID=/dns4/localhost/tcp/${PONG_ADDR##*/tcp/}" "$TMP/ping_pong.onnx" &&
    ctl ping2 --timeout 10 invoke Pinger 'x=[4,5]' --wait pong >"$TMP/dns.out" 2>&1 &&
    grep -q 'topic=pong value=ResponseBatch(.*float\[2\] 4 5)' "$TMP/dns.out"; then
    ok "--peer by host name (/dns4/localhost/...): resolved, dialed, answered"
else
    not_ok "--peer /dns4/localhost" "$TMP/ping2.log"
fi
stop_node ping2
stop_node ping; rc=$STOP_RC
[ "$rc" = 0 ] && ok "Pinger stops on SIGTERM with exit 0" || not_ok "Pinger exit status $rc" "$TMP/ping.log"
stop_node pong; rc=$STOP_RC
[ "$rc" = 0 ] && ok "Ponger stops on SIGTERM with exit 0" || not_ok "Ponger exit status $rc" "$TMP/pong.log"
[ ! -e "$TMP/ping/control.sock" ] && ok "the control socket is removed on exit" ||
    not_ok "control socket left behind"

# ---- a federated round: one server, two clients -------------------------------------------
start_node c1 --targets Client --listen /ip4/127.0.0.1/tcp/0 "$TMP/fed_round.onnx" ||
    not_ok "client 1 starts" "$TMP/c1.log"
cat >"$TMP/c2.json" <<JSON
{"targets": ["Client"], "listen": ["/ip4/127.0.0.1/tcp/0"],
 "components": {"local_model": {"delta": 3, "num_samples": 30}}}
JSON
start_node c2 --config "$TMP/c2.json" "$TMP/fed_round.onnx" || not_ok "client 2 starts" "$TMP/c2.log"
start_fed_server tcp
# client 1 adds 1 (10 samples), client 2 adds 3 (30 samples): mean = 2.5
ctl srv --timeout 15 invoke Server --wait round >"$TMP/round1.out" 2>&1
grep -q 'topic=round value=float\[4\] 2.5 2.5 2.5 2.5$' "$TMP/round1.out" &&
    ok "federated round over TCP: the weighted mean of both clients' updates" ||
    not_ok "round 1" "$TMP/round1.out"
ctl srv --timeout 15 invoke Server --wait round >"$TMP/round2.out" 2>&1
grep -q 'topic=round value=float\[4\] 5 5 5 5$' "$TMP/round2.out" &&
    ok "a second round starts from the aggregated parameters" || not_ok "round 2" "$TMP/round2.out"
stop_nodes "the three federated nodes stop cleanly" srv c1 c2

finish
