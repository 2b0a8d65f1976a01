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
source "$(dirname "$0")/large_tensor_common.bash"

FLOATS=16777216 # 64 MiB
CUT_AT=$((24 << 20)) # bytes forwarded to the receiver before the cut

check "the large-tensor program compiles" compile_example large_tensor

# the receiver's budget 96 MiB, its largest envelope 80 MiB, 1 MiB frames
lt_config "$TMP/node.json" 1048576 83886080 100663296 134217728
lt_start_rx "$TMP/node.json"

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

lt_start_tx "$TMP/node.json" "$PROXY_PORT"

if lt_send "$FLOATS" 120; then
    ok "the $((FLOATS * 4 >> 20)) MiB tensor arrived in $(echo "$LT_SECONDS" | cut -c1-5) s"
else
    not_ok "the tensor never arrived" "$TMP/rx.log"
fi
if [ -n "$LT_SENT" ] && [ "$LT_SENT" = "$LT_GOT" ]; then
    ok "the digests match ($LT_SENT)"
else
    not_ok "digest sent '$LT_SENT', received '$LT_GOT'" "$TMP/rx.events"
fi
grep -q "^cut after" "$TMP/proxy.out" && ok "the proxy cut the connection mid-transfer" ||
    not_ok "the proxy never cut" "$TMP/proxy.out"
[ "$(lt_counter tx streams.resumed)" -ge 1 ] && [ "$(lt_counter tx streams.failed)" = 0 ] &&
    ok "the stream resumed after the cut ($(lt_counter tx streams.resumed) times) and did not fail" ||
    not_ok "streams.resumed $(lt_counter tx streams.resumed), failed $(lt_counter tx streams.failed)" "$TMP/tx.log"
[ "$(lt_counter rx streams.in)" -ge 1 ] && [ "$(lt_counter rx ingress.bytes_in_flight)" = 0 ] &&
    ok "the receiver assembled it as a stream and gave its budget back" ||
    not_ok "streams.in $(lt_counter rx streams.in), bytes in flight $(lt_counter rx ingress.bytes_in_flight)" "$TMP/rx.log"
PEAK=$(lt_peak_mb rx)
echo "     receiver peak RSS $PEAK MB, sender peak $(lt_peak_mb tx) MB"
# AddressSanitizer's shadow memory and quarantine make RSS say nothing there.
if ldd "$BBD" | grep -q libasan; then
    ok "the receiver's peak is not judged under the sanitizers"
elif [ "$PEAK" -lt $((64 + 96)) ]; then
    ok "the receiver's peak ($PEAK MB) is within the tensor plus its budget"
else
    not_ok "the receiver's peak is $PEAK MB" "$TMP/rx.log"
fi
kill "$PROXY_PID" 2>/dev/null
stop_nodes "both nodes stop cleanly" tx rx
finish
