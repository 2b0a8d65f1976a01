#!/usr/bin/env bash
# secure_federated.sh — examples/federated with the defaults (security on):
# one client reaches the server through a relay (tests/integration/relay.py)
# that captures what crosses the connection, and the server admits only the
# clients on its allow list: a third client is refused at the handshake,
# the refusal is logged and counted, and the rounds go on with the two it
# knows. Ends with "N passed, N failed".
source "$(dirname "$0")/federated_common.bash"

RELAY=
trap 'kill $RELAY 2>/dev/null; cleanup' EXIT
check "the federated program records and compiles" \
    record fed --clients 3 --period-ms 500 --deadline-ms 400 --epochs 1

# the clients' identities first: the server's allow list names two of them
for i in 0 1 2; do
    KEY[$i]=$("$BBD" keygen --state-dir "$TMP/c$i" 2>>"$TMP/keygen.err")
done
[ -n "${KEY[0]}" ] && [ -n "${KEY[2]}" ] && ok "three client keys made (bbd keygen)" ||
    not_ok "bbd keygen" "$TMP/keygen.err"
start_server srv "$TMP/fed.onnx" '"allow": ["'"${KEY[0]}"'", "'"${KEY[1]}"'"]' ||
    not_ok "the server with an allow list starts" "$TMP/srv.log"
server_identity srv
watch_rounds srv

# client 0 through the relay: everything it exchanges with the server is captured
"$PY" tests/integration/relay.py "$TMP/relay.port" "${SERVER_ADDR##*/}" "$TMP/c0.cap" \
    >"$TMP/relay.log" 2>&1 &
RELAY=$!
wait_until 10 test -s "$TMP/relay.port" || not_ok "the relay starts" "$TMP/relay.log"
REAL_ADDR=$SERVER_ADDR
SERVER_ADDR=/ip4/127.0.0.1/tcp/$(cat "$TMP/relay.port")
start_client c0 "$TMP/fed.onnx" srv 0 3 || not_ok "client 0 starts (through the relay)" "$TMP/c0.log"
SERVER_ADDR=$REAL_ADDR
start_client c1 "$TMP/fed.onnx" srv 1 3 || not_ok "client 1 starts" "$TMP/c1.log"
start_client c2 "$TMP/fed.onnx" srv 2 3 || not_ok "client 2 starts" "$TMP/c2.log"

refused_c2() { grep -q "refused peer ${KEY[2]}: not on the node's allow list" "$TMP/srv.log"; }
wait_until 15 refused_c2 && ok "the client not on the allow list is refused at the handshake (logged)" ||
    not_ok "allow-list refusal of client 2" "$TMP/srv.log"
wait_connected srv 2
if wait_rounds srv $((K0 + 3)) 60; then
    ok "rounds go on with the two known clients"
else
    not_ok "rounds after the refusal: $(rounds_seen srv)" "$TMP/srv.log"
fi
participants=$(round_of srv $((K0 + 2)) 'r["participants"]' 2>/dev/null)
[ "$participants" = 2 ] && ok "each round has exactly the two allowed participants" ||
    not_ok "participants in a round: ${participants:-none}" "$TMP/srv.events"
ctl srv --json status | jget 'd["transport"]["peers_refused"] >= 1' | grep -q true &&
    ok "the refusal is counted (peers_refused)" || not_ok "peers_refused"
grep -q 'refused this node: not on the node.s allow list' "$TMP/c2.log" &&
    ok "the refused client hears why" || not_ok "the refused client's log" "$TMP/c2.log"

# the relay saw the rounds go by: model parameters each way, all sealed
size=$(stat -c %s "$TMP/c0.cap")
[ "$size" -ge $((3 * 2 * 2410 * 4)) ] && ok "the relay carried client 0's rounds ($size bytes)" ||
    not_ok "capture size $size"
if grep -qa -e 'Client' -e 'Server' -e '/ip4' "$TMP/c0.cap"; then
    not_ok "the capture holds plaintext (target names or addresses)"
else
    ok "the capture holds no target name, no address: the handshake is encrypted too"
fi
"$PY" - "$TMP/c0.cap" <<'PY' >"$TMP/entropy.out"
import collections, math, sys
b = open(sys.argv[1], "rb").read()
c = collections.Counter(b)
print("%.3f" % -sum(v / len(b) * math.log2(v / len(b)) for v in c.values()))
PY
"$PY" -c 'import sys; sys.exit(not float(open(sys.argv[1]).read()) > 7.9)' "$TMP/entropy.out" &&
    ok "the captured bytes look random ($(cat "$TMP/entropy.out") bits per byte; the same run with security off measured 7.3)" ||
    not_ok "entropy of the capture: $(cat "$TMP/entropy.out")"

stop_watch srv
stop_nodes "every node stops cleanly" c0 c1 c2 srv
finish
