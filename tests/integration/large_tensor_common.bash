# large_tensor_common.bash — one tensor of N floats from node tx to node rx
# (examples/large_tensor: Blob.Fill, Send, Recv, a digest on both sides),
# shared by bbd_large_tensor.sh (make check: 64 MiB through 1 MiB frames,
# the connection cut mid-transfer) and bench/large_tensor.sh (make bench:
# 3 GiB). Sourced after bbd_common.bash.
#
# lt_config FILE MAX_FRAME MAX_ENVELOPE BUDGET QUEUE_PER_PEER (bytes): a
# node config; lt_start_rx CONFIG: the receiver (RX_ID, RX_PORT);
# lt_start_tx CONFIG PORT: the sender, reaching the receiver at
# 127.0.0.1:PORT, connected and the receiver watched; lt_send FLOATS
# SECONDS: the sender makes and sends its tensor, LT_SENT and LT_GOT the
# two digests, LT_SECONDS from the invoke to the receiver's event (1 when
# it did not arrive in time); lt_counter NAME COUNTER; lt_peak_mb NAME.

lt_config() { # FILE MAX_FRAME MAX_ENVELOPE BUDGET QUEUE_PER_PEER
    cat >"$1" <<JSON
{"caps": {"max_envelope_bytes": $3, "ingress_byte_budget": $4, "max_invoke_bytes": 1048576},
 "transport": {"max_frame_bytes": $2, "max_queue_per_peer_bytes": $5,
               "max_queue_total_bytes": $(($5 * 2))}}
JSON
}

lt_start_rx() { # CONFIG
    start_node rx --config "$1" --targets Receiver --listen /ip4/127.0.0.1/tcp/0 \
        "$TMP/large_tensor.onnx" || not_ok "the receiver starts" "$TMP/rx.log"
    RX_ID=$(node_peer rx)
    RX_PORT=$(node_addr rx tcp | sed 's|.*/tcp/||')
}

lt_start_tx() { # CONFIG PORT
    start_node tx --config "$1" --targets Sender --listen /ip4/127.0.0.1/tcp/0 \
        --peer "$RX_ID=/ip4/127.0.0.1/tcp/$2" "$TMP/large_tensor.onnx" ||
        not_ok "the sender starts" "$TMP/tx.log"
    ctl rx --json watch --kind app --topic received >"$TMP/rx.events" 2>&1 &
    LT_WATCH=$!
    wait_until 10 watchers_are rx 1 || not_ok "the receiver is watched" "$TMP/rx.log"
    lt_connected() { ctl tx --json peers | grep -q "$RX_ID"; }
    wait_until 10 lt_connected
}

lt_digest() { # FILE TOPIC: the U64 value of the first event of that topic
    "$PY" -c 'import json,sys
for l in open(sys.argv[1]):
    if sys.argv[2] not in l or not l.startswith("{"):
        continue
    d = json.loads(l)
    ev = d["event"] if isinstance(d.get("event"), dict) else d
    print(ev["value"]["value"]); break' "$1" "$2"
}

lt_send() { # FLOATS SECONDS
    local t0 rc=0
    t0=$(date +%s.%N)
    ctl tx --json --timeout "$2" invoke Sender "n={\"type\": \"U64\", \"value\": $1}" \
        --wait sent >"$TMP/sent.json" 2>&1 || rc=1
    lt_arrived() { grep -q '"received"' "$TMP/rx.events"; }
    wait_until "$2" lt_arrived || rc=1
    LT_SECONDS=$(echo "$(date +%s.%N) - $t0" | bc)
    LT_SENT=$(lt_digest "$TMP/sent.json" sent)
    LT_GOT=$(lt_digest "$TMP/rx.events" received)
    kill "$LT_WATCH" 2>/dev/null
    return $rc
}

lt_counter() { ctl "$1" --json status | jget "d['counters'].get('$2', 0)"; }
lt_peak_mb() { awk '/VmHWM/ {print int($2 / 1024)}' /proc/"$(node_pid "$1")"/status; }
