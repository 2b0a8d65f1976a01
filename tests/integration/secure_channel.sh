#!/usr/bin/env bash
# secure_channel.sh — bbd's authenticated, encrypted channels between real
# processes on 127.0.0.1 (bbd(8) SECURITY, ACCESS CONTROL): what an observer
# of the connection sees (a relay in the middle, tests/integration/relay.py),
# with security on and off; a frame altered on the wire; a node dialed under
# another node's PeerId; security off on one side; the allow / deny lists,
# changed at run time and kept across a restart; the control socket's
# permissions. Ends with "N passed, N failed".
source "$(dirname "$0")/bbd_common.bash"

RELAY_PIDS=()
trap 'kill "${RELAY_PIDS[@]}" 2>/dev/null; cleanup' EXIT

check "ping_pong compiles" compile_example ping_pong

# relay NAME TARGET_ADDR [--flip-at N]: a relay to a node's TCP address;
# sets RELAY_ADDR; captures into $TMP/NAME.cap
relay() {
    local name=$1 port=${2##*/tcp/}
    shift 2
    rm -f "$TMP/$name.port"
    "$PY" tests/integration/relay.py "$TMP/$name.port" "$port" "$TMP/$name.cap" "$@" \
        >"$TMP/$name.relay.log" 2>&1 &
    RELAY_PIDS+=($!)
    wait_until 10 test -s "$TMP/$name.port" || not_ok "relay $name starts" "$TMP/$name.relay.log"
    RELAY_ADDR=/ip4/127.0.0.1/tcp/$(cat "$TMP/$name.port")
}

# A known tensor: 64 floats whose float32 bytes are easy to look for.
"$PY" -c 'import json; print(json.dumps({"dtype": "float", "shape": [64], "data": [1000.25 + i for i in range(64)]}))' \
    >"$TMP/known.json"
# in_capture FILE: the tensor's float32 bytes (any 32 in a row) appear in FILE
in_capture() {
    "$PY" - "$1" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
needle = struct.pack("<8f", *[1000.25 + i for i in range(8)])
sys.exit(0 if needle in data else 1)
PY
}

# run_pair MODE: a Ponger and a Pinger with security MODE, the Pinger
# reaching the Ponger through a relay; one round trip of the known tensor.
run_pair() {
    local mode=$1
    start_node "pong$mode" --security "$mode" --targets Ponger --listen /ip4/127.0.0.1/tcp/0 \
        "$TMP/ping_pong.onnx" || not_ok "Ponger ($mode) starts" "$TMP/pong$mode.log"
    relay "cap$mode" "$(node_addr "pong$mode" tcp)"
    start_node "ping$mode" --security "$mode" --targets Pinger --listen /ip4/127.0.0.1/tcp/0 \
        --peer "$(node_peer "pong$mode")=$RELAY_ADDR" "$TMP/ping_pong.onnx" ||
        not_ok "Pinger ($mode) starts" "$TMP/ping$mode.log"
    ctl "ping$mode" --json --timeout 15 invoke Pinger "x=@$TMP/known.json" --wait pong \
        >"$TMP/rt$mode.json" 2>&1
}

# ---- what an observer sees -------------------------------------------------------------
run_pair noise
jget 'd["event"]["value"]["items"][0]["value"]["shape"] == [64]' <"$TMP/rtnoise.json" |
    grep -q true && ok "security noise: the tensor goes through the relay and comes back" ||
    not_ok "round trip over the relay (noise)" "$TMP/rtnoise.json"
test -s "$TMP/capnoise.cap" && ! in_capture "$TMP/capnoise.cap" &&
    ! grep -qa 'Ponger' "$TMP/capnoise.cap" &&
    ok "security noise: the capture holds neither the tensor's bytes nor the target names" ||
    not_ok "plaintext in the encrypted capture ($(stat -c %s "$TMP/capnoise.cap" 2>/dev/null) bytes)"
ctl pongnoise --json status | jget 'd["transport"]["auth_failed"] == 0 and d["transport"]["handshakes_failed"] == 0' |
    grep -q true && ok "nothing failed authentication" || not_ok "auth counters (noise)"
grep -q 'security is off' "$TMP/pongnoise.log" && not_ok "a warning about security without cause" ||
    ok "no security warning when security is on"

run_pair off
jget 'd["event"]["value"]["items"][0]["value"]["shape"] == [64]' <"$TMP/rtoff.json" |
    grep -q true && ok "security off: the round trip works too" ||
    not_ok "round trip over the relay (off)" "$TMP/rtoff.json"
in_capture "$TMP/capoff.cap" && ok "security off: the capture shows the tensor (the check can fail)" ||
    not_ok "the plaintext capture lacks the tensor"
grep -q 'level=warn comp=daemon msg="security is off' "$TMP/pongoff.log" &&
    ok "security off: bbd warns at start" || not_ok "the security-off warning" "$TMP/pongoff.log"
stop_nodes "the plaintext pair stops" pingoff pongoff

# ---- a frame altered on the wire -----------------------------------------------------------
# The Pinger's 4000th byte to the Ponger is flipped (past the handshake, inside
# the envelope of the first invoke): the Ponger refuses the record and closes;
# the Pinger reconnects and the next invoke goes through.
relay tamper "$(node_addr pongnoise tcp)" --flip-at 4000
start_node tamp --targets Pinger --listen /ip4/127.0.0.1/tcp/0 \
    --peer "$(node_peer pongnoise)=$RELAY_ADDR" "$TMP/ping_pong.onnx" ||
    not_ok "the Pinger behind the tampering relay starts" "$TMP/tamp.log"
"$PY" -c 'import json; print(json.dumps({"dtype": "float", "shape": [2000], "data": [float(i) for i in range(2000)]}))' \
    >"$TMP/big.json"
ctl tamp --timeout 5 invoke Pinger "x=@$TMP/big.json" --wait pong >"$TMP/tamper1.out" 2>&1
auth_failed() { [ "$(ctl pongnoise --json status | jget 'd["transport"]["auth_failed"]')" -ge 1 ]; }
wait_until 10 auth_failed && ok "the altered record is refused and counted (auth_failed)" ||
    not_ok "auth_failed after a flipped bit" "$TMP/pongnoise.log"
grep -q 'failed authentication' "$TMP/pongnoise.log" && ok "the Ponger logs why it closed" ||
    not_ok "the auth failure log line" "$TMP/pongnoise.log"
retry_invoke() { ctl tamp --timeout 5 invoke Pinger 'x=[7,8]' --wait pong >"$TMP/tamper2.out" 2>&1; }
wait_until 20 retry_invoke && grep -q 'float\[2\] 7 8)$' "$TMP/tamper2.out" &&
    ok "the Pinger reconnects and traffic goes on" || not_ok "traffic after the tampering" "$TMP/tamper2.out"
stop_node tamp

# ---- someone else's PeerId ----------------------------------------------------------------
# A third node dials the Ponger's address under the Pinger's PeerId: the
# handshake proves the Ponger's key, so the dial is refused.
start_node liar --targets Pinger --listen /ip4/127.0.0.1/tcp/0 \
    --peer "$(node_peer pingnoise)=$(node_addr pongnoise tcp)" "$TMP/ping_pong.onnx" ||
    not_ok "the dialing node starts" "$TMP/liar.log"
refused_dial() { grep -q 'answered (its key proves it)' "$TMP/liar.log"; }
wait_until 10 refused_dial && ok "a dial for one PeerId answered by another key is refused" ||
    not_ok "the wrong-key dial" "$TMP/liar.log"
ctl liar --json status | jget 'd["transport"]["handshakes_failed"] >= 1 and d["connections"] == [] or all(c["state"] != "open" for c in d["connections"])' |
    grep -q true && ok "...and nothing is connected" || not_ok "no connection after the refusal"
stop_node liar
# the same as MULTIADDR/p2p/PEERID
start_node liar2 --targets Pinger --peer "$(node_addr pongnoise tcp)/p2p/$(node_peer pingnoise)" \
    "$TMP/ping_pong.onnx" || not_ok "a node with a /p2p/ peer address starts" "$TMP/liar2.log"
refused2() { grep -q 'answered (its key proves it)' "$TMP/liar2.log"; }
wait_until 10 refused2 && ok "--peer ADDR/p2p/ID: the same refusal" || not_ok "/p2p/ dial" "$TMP/liar2.log"
stop_node liar2
"$BBD" --peer "$(node_addr pongnoise tcp)/p2p/$(node_peer pingnoise)=x" "$TMP/ping_pong.onnx" \
    >"$TMP/badpeer.out" 2>&1
[ $? = 1 ] && grep -q '^bbd: error: peer' "$TMP/badpeer.out" && ok "a malformed --peer is refused (exit 1)" ||
    not_ok "bad --peer" "$TMP/badpeer.out"

# ---- security off on one side ----------------------------------------------------------------
start_node plain --security off --targets Pinger --listen /ip4/127.0.0.1/tcp/0 \
    --peer "$(node_peer pongnoise)=$(node_addr pongnoise tcp)" "$TMP/ping_pong.onnx" ||
    not_ok "the plaintext node starts" "$TMP/plain.log"
mismatch() {
    grep -q 'requires encrypted channels (security \\"noise\\") and this node runs with security \\"off\\"' "$TMP/plain.log" &&
        grep -q 'runs with security \\"off\\" and this node requires encrypted channels' "$TMP/pongnoise.log"
}
wait_until 10 mismatch && ok "security off against on: both sides log which side is off" ||
    not_ok "the mismatch messages" "$TMP/plain.log"
stop_node plain

# ---- access lists -------------------------------------------------------------------------------
PING_ID=$(node_peer pingnoise)
stop_nodes "the Pinger and Ponger stop" pingnoise pongnoise
start_node acl --targets Ponger --listen /ip4/127.0.0.1/tcp/0 --allow "$PING_ID" \
    "$TMP/ping_pong.onnx" || not_ok "a Ponger with an allow list starts" "$TMP/acl.log"
ACL_ID=$(node_peer acl)
ACL_ADDR=$(node_addr acl tcp)
start_node guest --targets Pinger --listen /ip4/127.0.0.1/tcp/0 --peer "$ACL_ID=$ACL_ADDR" \
    "$TMP/ping_pong.onnx" || not_ok "a Pinger not on the list starts" "$TMP/guest.log"
GUEST_ID=$(node_peer guest)
refused_guest() { grep -q "refused peer $GUEST_ID: not on the node's allow list" "$TMP/acl.log"; }
wait_until 10 refused_guest && ok "a peer not on the allow list is refused at the handshake, logged" ||
    not_ok "allow-list refusal" "$TMP/acl.log"
grep -q 'refused this node: not on the node.s allow list' "$TMP/guest.log" &&
    ok "...and the refused node hears why" || not_ok "the refused side's log" "$TMP/guest.log"
ctl acl --json status | jget 'd["transport"]["peers_refused"] >= 1' |
    grep -q true && ok "the refusals are counted" || not_ok "refusal counters"
ctl guest --timeout 3 invoke Pinger 'x=[1]' --wait pong >"$TMP/guest1.out" 2>&1
[ $? != 0 ] && ok "the refused Pinger gets no answer" || not_ok "a refused peer got through" "$TMP/guest1.out"
ctl acl peers allow "$GUEST_ID" >"$TMP/allow.out" 2>&1
grep -q "^  $GUEST_ID\$" "$TMP/allow.out" && ok "bbctl peers allow adds it (and prints the lists)" ||
    not_ok "bbctl peers allow" "$TMP/allow.out"
guest_ok() { ctl guest --timeout 3 invoke Pinger 'x=[2]' --wait pong 2>/dev/null | grep -q 'float\[1\] 2)$'; }
wait_until 20 guest_ok && ok "once allowed, its requests are answered" || not_ok "allowed at run time" "$TMP/acl.log"
ctl acl peers deny "$GUEST_ID" >/dev/null 2>&1
dropped_guest() { ctl acl --json status | jget 'not any(c["peer"] == "'"$GUEST_ID"'" and c["connected"] for c in d["connections"])' | grep -q true; }
wait_until 10 dropped_guest && ok "bbctl peers deny closes its connection at once" ||
    not_ok "deny at run time" "$TMP/acl.log"
ctl acl peers list >"$TMP/list.out"
grep -q "^deny (1):" "$TMP/list.out" && grep -A1 "^deny" "$TMP/list.out" | grep -q "$GUEST_ID" &&
    ok "bbctl peers list shows the deny list" || not_ok "peers list" "$TMP/list.out"
ctl acl peers deny nonsense >"$TMP/bad.out" 2>&1
[ $? = 1 ] && grep -q "^bbctl: error: access deny: 'nonsense' is not a PeerId" "$TMP/bad.out" &&
    ok "a bad PeerId is refused by name (exit 1)" || not_ok "bad PeerId" "$TMP/bad.out"
ctl acl peers frobnicate x >"$TMP/bad2.out" 2>&1
[ $? = 2 ] && ok "an unknown action is a usage error (exit 2)" || not_ok "peers usage" "$TMP/bad2.out"
stop_node guest
stop_nodes "the listed Ponger stops (snapshot written)" acl
start_node acl --targets Ponger --listen /ip4/127.0.0.1/tcp/0 "$TMP/ping_pong.onnx" ||
    not_ok "the Ponger restarts from its snapshot" "$TMP/acl.log"
ctl acl --json peers list | jget '"'"$GUEST_ID"'" in d["deny"]' | grep -q true &&
    ok "the deny list survives a restart (kept in the snapshot)" || not_ok "lists after restart"

# ---- the control socket ----------------------------------------------------------------------------
mode_of() { stat -c %a "$1"; }
[ "$(mode_of "$TMP/acl/control.sock")" = 600 ] && [ "$(mode_of "$TMP/acl")" = 700 ] &&
    ok "the control socket is 0600 in a 0700 state directory" ||
    not_ok "control socket mode $(mode_of "$TMP/acl/control.sock") dir $(mode_of "$TMP/acl")"
# another user (root: run bbctl as nobody; else make the socket unusable)
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    setpriv --reuid=65534 --regid=65534 --clear-groups \
        "$BBCTL" --socket "$TMP/acl/control.sock" status >"$TMP/perm.out" 2>&1
    rc=$?
else
    chmod 000 "$TMP/acl/control.sock"
    ctl acl status >"$TMP/perm.out" 2>&1
    rc=$?
    chmod 600 "$TMP/acl/control.sock"
fi
[ $rc = 1 ] && grep -q 'Permission denied (the control socket is reachable only by the user bbd runs as' "$TMP/perm.out" &&
    ok "another user's bbctl is refused, and told why" || not_ok "permission message" "$TMP/perm.out"
stop_nodes "the Ponger stops" acl
mkdir -m 0755 "$TMP/loose"
start_node loose --targets Ponger "$TMP/ping_pong.onnx" || not_ok "a node in a 0755 state dir" "$TMP/loose.log"
[ "$(mode_of "$TMP/loose")" = 700 ] && ok "a state directory made by hand with a looser mode becomes 0700" ||
    not_ok "state dir mode $(mode_of "$TMP/loose")"
stop_nodes "that node stops" loose

finish
