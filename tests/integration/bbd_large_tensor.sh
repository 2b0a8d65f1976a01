#!/usr/bin/env bash
# bbd_large_tensor.sh — a tensor far larger than the frame limit crosses
# between two bbd processes as a chunk stream: 64 MiB of floats through
# 1 MiB frames (transport max_frame_bytes), the sender's and the
# receiver's digests equal. The sender reaches the receiver through a TCP
# proxy that cuts the connection once, mid-transfer: the stream resumes
# per chunk after the reconnect and completes. The receiver stays within
# its byte budget (96 MiB: the tensor's 64 MiB are charged whole while it
# is assembled). Ends with "N passed, N failed".
source "$(dirname "$0")/bbd_common.bash"

FLOATS=16777216 # 64 MiB
CUT_AT=$((24 << 20)) # bytes forwarded to the receiver before the cut

check "the large-tensor program compiles" compile_example large_tensor

cat >"$TMP/node.json" <<'JSON'
{"caps": {"max_envelope_bytes": 83886080, "ingress_byte_budget": 100663296,
          "max_invoke_bytes": 1048576},
 "transport": {"max_frame_bytes": 1048576, "max_queue_per_peer_bytes": 134217728,
               "max_queue_total_bytes": 268435456}}
JSON
start_node rx --config "$TMP/node.json" --targets Receiver --listen /ip4/127.0.0.1/tcp/0 \
    "$TMP/large_tensor.onnx" || not_ok "the receiver starts" "$TMP/rx.log"
RX_ID=$(node_peer rx)
RX_PORT=$(node_addr rx tcp | sed 's|.*/tcp/||')

# The proxy: forwards every connection to the receiver; the first one is
# cut (both ways) once CUT_AT bytes went through.
cat >"$TMP/proxy.py" <<'PY'
import socket, sys, threading
listen, target, cut_at = socket.socket(), int(sys.argv[1]), int(sys.argv[2])
listen.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listen.bind(("127.0.0.1", 0))
listen.listen(8)
print(listen.getsockname()[1], flush=True)
state = {"cut": False}
def pipe(a, b, counted):
    sent = 0
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
            sent += len(d)
            if counted and not state["cut"] and sent >= cut_at:
                state["cut"] = True
                print("cut after %d bytes" % sent, flush=True)
                break
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()
while True:
    c, _ = listen.accept()
    u = socket.create_connection(("127.0.0.1", target))
    counted = not state["cut"]
    threading.Thread(target=pipe, args=(c, u, counted), daemon=True).start()
    threading.Thread(target=pipe, args=(u, c, False), daemon=True).start()
PY
"$PY" "$TMP/proxy.py" "$RX_PORT" "$CUT_AT" >"$TMP/proxy.out" 2>&1 &
PROXY_PID=$!
proxy_port() { head -1 "$TMP/proxy.out" 2>/dev/null | grep -qE '^[0-9]+$'; }
wait_until 10 proxy_port || not_ok "the proxy listens" "$TMP/proxy.out"
PROXY_PORT=$(head -1 "$TMP/proxy.out")

start_node tx --config "$TMP/node.json" --targets Sender --listen /ip4/127.0.0.1/tcp/0 \
    --peer "$RX_ID=/ip4/127.0.0.1/tcp/$PROXY_PORT" "$TMP/large_tensor.onnx" ||
    not_ok "the sender starts" "$TMP/tx.log"
ctl rx --json watch --kind app --topic received >"$TMP/rx.events" 2>&1 &
WATCH=$!
watching() { [ "$(ctl rx --json status | jget 'd["watchers"]')" -ge 1 ]; }
wait_until 10 watching || not_ok "the receiver is watched" "$TMP/rx.log"
connected() { ctl tx --json peers | grep -q "$RX_ID"; }
wait_until 10 connected

T0=$(date +%s.%N)
if ctl tx --json --timeout 60 invoke Sender "n={\"type\": \"U64\", \"value\": $FLOATS}" --wait sent >"$TMP/sent.json" 2>&1; then
    ok "the sender made its tensor ($((FLOATS * 4 >> 20)) MiB)"
else
    not_ok "the sender makes its tensor" "$TMP/sent.json"
fi
arrived() { grep -q '"received"' "$TMP/rx.events"; }
if wait_until 120 arrived; then
    ok "the tensor arrived in $(echo "$(date +%s.%N) - $T0" | bc | cut -c1-5) s"
else
    not_ok "the tensor never arrived" "$TMP/rx.log"
fi
digest() { # FILE TOPIC: the U64 value of the first event of that topic
    "$PY" -c 'import json,sys
for l in open(sys.argv[1]):
    if sys.argv[2] not in l or not l.startswith("{"):
        continue
    d = json.loads(l)
    ev = d["event"] if isinstance(d.get("event"), dict) else d
    print(ev["value"]["value"]); break' "$1" "$2"
}
SENT=$(digest "$TMP/sent.json" sent)
GOT=$(digest "$TMP/rx.events" received)
if [ -n "$SENT" ] && [ "$SENT" = "$GOT" ]; then
    ok "the digests match ($SENT)"
else
    not_ok "digest sent '$SENT', received '$GOT'" "$TMP/rx.events"
fi
grep -q "^cut after" "$TMP/proxy.out" && ok "the proxy cut the connection mid-transfer" ||
    not_ok "the proxy never cut" "$TMP/proxy.out"
counter() { ctl "$1" --json status | jget "d['counters'].get('$2', 0)"; }
[ "$(counter tx streams.resumed)" -ge 1 ] && [ "$(counter tx streams.failed)" = 0 ] &&
    ok "the stream resumed after the cut ($(counter tx streams.resumed) times) and did not fail" ||
    not_ok "streams.resumed $(counter tx streams.resumed), failed $(counter tx streams.failed)" "$TMP/tx.log"
[ "$(counter rx streams.in)" -ge 1 ] && [ "$(counter rx ingress.bytes_in_flight)" = 0 ] &&
    ok "the receiver assembled it as a stream and gave its budget back" ||
    not_ok "streams.in $(counter rx streams.in), bytes in flight $(counter rx ingress.bytes_in_flight)" "$TMP/rx.log"
PEAK=$(awk '/VmHWM/ {print int($2 / 1024)}' /proc/"$(node_pid rx)"/status)
echo "     receiver peak RSS $PEAK MB, sender peak $(awk '/VmHWM/ {print int($2 / 1024)}' /proc/"$(node_pid tx)"/status) MB"
# AddressSanitizer's shadow memory and quarantine make RSS say nothing there.
if ldd "$BBD" | grep -q libasan; then
    ok "the receiver's peak is not judged under the sanitizers"
elif [ "$PEAK" -lt $((64 + 96)) ]; then
    ok "the receiver's peak ($PEAK MB) is within the tensor plus its budget"
else
    not_ok "the receiver's peak is $PEAK MB" "$TMP/rx.log"
fi
kill "$WATCH" 2>/dev/null
kill "$PROXY_PID" 2>/dev/null
stop_nodes "both nodes stop cleanly" tx rx
finish
