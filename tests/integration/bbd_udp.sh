#!/usr/bin/env bash
# bbd_udp.sh — the same flows as bbd_tcp.sh over UDP: ping_pong with an
# envelope far larger than one datagram (fragmented and reassembled), and a
# federated round. Ends with "N passed, N failed".
source "$(dirname "$0")/bbd_common.bash"

check "ping_pong compiles" compile_example ping_pong
check "fed_round compiles" compile_example fed_round

start_node pong --targets Ponger --listen /ip4/127.0.0.1/udp/0 "$TMP/ping_pong.onnx" ||
    not_ok "Ponger starts on UDP" "$TMP/pong.log"
PONG_ADDR=$(node_addr pong udp)
start_node ping --targets Pinger --listen /ip4/127.0.0.1/udp/0 \
    --peer "$(node_peer pong)=$PONG_ADDR" "$TMP/ping_pong.onnx" ||
    not_ok "Pinger starts on UDP" "$TMP/ping.log"
case "$PONG_ADDR" in
/ip4/127.0.0.1/udp/[1-9]*) ok "the Ponger listens on a UDP port of its own" ;;
*) not_ok "Ponger UDP address '$PONG_ADDR'" ;;
esac

# 5000 floats: a 20 kB tensor, many datagrams each way
"$PY" -c 'import json; print(json.dumps({"dtype": "float", "shape": [50, 100], "data": [i * 0.5 for i in range(5000)]}))' >"$TMP/big.json"
ctl ping --json --timeout 15 invoke Pinger "x=@$TMP/big.json" --wait pong >"$TMP/big.out" 2>&1
if jget 'd["event"]["value"]["items"][0]["value"]["shape"] == [50, 100]' <"$TMP/big.out" | grep -q true; then
    ok "a 20 kB tensor crosses UDP and comes back whole"
else
    not_ok "big envelope round trip over UDP" "$TMP/big.out"
fi
# the data survived (printed as TensorProto when large: compare a small one too)
ctl ping --timeout 15 invoke Pinger 'x=[0.25,-1,1e6]' --wait pong >"$TMP/small.out" 2>&1
grep -q 'float\[3\] 0.25 -1 1000000)$' "$TMP/small.out" && ok "a small tensor over UDP" ||
    not_ok "small envelope over UDP" "$TMP/small.out"
frags=$(ctl pong --json status | jget 'd["transport"]["udp_fragments_in"]')
[ "${frags:-0}" -ge 10 ] && ok "the Ponger reassembled the envelope from $frags fragments" ||
    not_ok "UDP fragments seen by the Ponger: ${frags:-none}"
ctl ping --json status | jget 'd["transport"]["udp_reassembly_dropped"] == 0 and d["counters"]["envelopes.in"] == 2' |
    grep -q true && ok "nothing dropped in reassembly" || not_ok "reassembly counters"
stop_nodes "both nodes stop cleanly" ping pong

# ---- a federated round over UDP -----------------------------------------------------------
start_node c1 --targets Client --listen /ip4/127.0.0.1/udp/0 "$TMP/fed_round.onnx" ||
    not_ok "client 1 starts" "$TMP/c1.log"
start_node c2 --targets Client --listen /ip4/127.0.0.1/udp/0 "$TMP/fed_round.onnx" ||
    not_ok "client 2 starts" "$TMP/c2.log"
start_fed_server udp
ctl srv --timeout 15 invoke Server --wait round >"$TMP/round.out" 2>&1
grep -q 'topic=round value=float\[4\] 1 1 1 1$' "$TMP/round.out" &&
    ok "federated round over UDP: both clients answered, mean of their updates" ||
    not_ok "round over UDP" "$TMP/round.out"
stop_nodes "the three federated nodes stop cleanly" srv c1 c2

finish
