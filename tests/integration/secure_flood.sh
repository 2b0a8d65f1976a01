#!/usr/bin/env bash
# secure_flood.sh — what one hostile machine can make a node hold or do
# (bbd(8) SECURITY; issues 20 and 21): hundreds of identities with genuine
# keys (tests/integration/forge_peers.c) become at most max_peers_per_source
# address-book entries, and the addresses they announce on another IP are
# never dialed; a flood of half-begun handshakes from one address holds at
# most its share of the connection table, each until the handshake
# deadline, while a real peer from another address is served; anonymous
# connections announcing large messages and trickling them hold no more
# than a record each and go at the deadline. Ends with "N passed, N failed".
source "$(dirname "$0")/bbd_common.bash"

check "ping_pong compiles" compile_example ping_pong
san=() # a sanitizer build's library needs the helper built the same way
if ldd "$BB_BUILD/lib/libbbir.so" 2>/dev/null | grep -q libasan; then
    san=(-fsanitize=address,undefined)
fi
if cc -std=c11 -D_GNU_SOURCE -O1 "${san[@]}" -I. -Ilibbbir/include -Ilibbbengine/include -I"$BB_BUILD/gen" \
    tests/integration/forge_peers.c "$BB_BUILD/lib/libbbdhost.a" -L"$BB_BUILD/lib" -lbbir \
    -Wl,-rpath,"$BB_BUILD/lib" -luv -lsodium -lcrypto -lprotobuf-c -o "$TMP/forge_peers" >"$TMP/cc.log" 2>&1; then
    ok "the forging helper builds"
else
    not_ok "build forge_peers" "$TMP/cc.log"
fi

start_node victim --targets Ponger --listen /ip4/127.0.0.1/tcp/0 "$TMP/ping_pong.onnx" ||
    not_ok "the node starts" "$TMP/victim.log"
VICTIM_PORT=$(node_addr victim tcp)
VICTIM_PORT=${VICTIM_PORT##*/}
SENTINEL_PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.2", 0)); print(s.getsockname()[1])')

# ---- 600 identities from one machine -----------------------------------------------------
"$TMP/forge_peers" 127.0.0.1 "$VICTIM_PORT" 600 127.0.0.2 "$SENTINEL_PORT" 1500 >"$TMP/forge.out" 2>&1
read -r _ admitted _ refused _ sentinel <"$TMP/forge.out"
[ "${admitted:-0}" = 600 ] && ok "600 forged identities each proved a key and were admitted" ||
    not_ok "forged handshakes: $(cat "$TMP/forge.out")" "$TMP/victim.log"
ctl victim --json peers >"$TMP/peers.json"
n_peers=$(jget 'len(d["peers"])' <"$TMP/peers.json")
size=$(stat -c %s "$TMP/peers.json")
[ "${n_peers:-999}" -le 64 ] && [ "$size" -lt 100000 ] &&
    ok "the address book keeps $n_peers of them (max_peers_per_source 64); bbctl peers is $size bytes" ||
    not_ok "address book after the forgery: $n_peers peers, $size bytes"
ctl victim --json status | jget 'd["counters"]["daemon.book_evicted"] >= 500' | grep -q true &&
    ok "the replaced ones are counted (book_evicted)" || not_ok "book_evicted"
[ "${sentinel:-1}" = 0 ] && ok "the address they announced on another IP was never dialed" ||
    not_ok "the node dialed the forged peers' announced address ${sentinel:-?} times" "$TMP/victim.log"

# ---- connections from one address that start a handshake and stop (issue 21, item 3) ----------
# 200 sockets from 127.0.0.2, each sending the first two bytes of a Noise
# message 1 (its length) and then nothing, held while a real peer (from
# 127.0.0.1) connects. The flood's side reports how many of its sockets the
# node closed: those over the share at once, the ones it held at the
# handshake deadline (3 s) — without the deadline they would stay open.
"$PY" - "$VICTIM_PORT" "$TMP/flood.ready" "$TMP/flood.closed" >"$TMP/flood.out" 2>&1 <<'PY' &
import select, socket, sys, time
socks = []
for i in range(200):
    s = socket.socket()
    s.bind(("127.0.0.2", 0))
    try:
        s.connect(("127.0.0.1", int(sys.argv[1])))
        s.sendall(b"\x00\x20")
        socks.append(s)
    except OSError:
        pass
open(sys.argv[2], "w").write(str(len(socks)))
def gone(s):
    try:
        return s.recv(64) == b""
    except OSError:
        return True
closed, deadline = set(), time.time() + 25
while len(closed) < len(socks) and time.time() < deadline:
    r, _, _ = select.select([s for s in socks if s.fileno() not in closed], [], [], 0.5)
    closed.update(s.fileno() for s in r if gone(s))
open(sys.argv[3], "w").write("%d of %d" % (len(closed), len(socks)))
time.sleep(30)
PY
FLOOD=$!
wait_until 20 test -s "$TMP/flood.ready" || not_ok "the flood starts" "$TMP/flood.out"
refused_some() { ctl victim --json status | jget 'd["transport"]["connections_refused"] >= 130' | grep -q true; }
wait_until 10 refused_some && ok "one address holds at most its share: the rest are refused" ||
    not_ok "per-source limit" "$TMP/victim.log"
start_node real --targets Pinger --listen /ip4/127.0.0.1/tcp/0 \
    --peer "$(node_peer victim)=$(node_addr victim tcp)" "$TMP/ping_pong.onnx" ||
    not_ok "a real peer starts" "$TMP/real.log"
ctl real --timeout 15 invoke Pinger 'x=[4,2]' --wait pong >"$TMP/real.out" 2>&1
grep -q 'float\[2\] 4 2)$' "$TMP/real.out" && ok "a real peer from another address is served during the flood" ||
    not_ok "the real peer during the flood" "$TMP/real.out"
wait_until 30 test -s "$TMP/flood.closed" || not_ok "the flood's report" "$TMP/flood.out"
read -r n_closed _ n_socks <"$TMP/flood.closed"
[ -n "$n_socks" ] && [ "$n_closed" = "$n_socks" ] &&
    ok "all $n_socks half-begun handshakes were closed: over the share at once, the rest at the deadline" ||
    not_ok "half-begun handshakes closed: $(cat "$TMP/flood.closed" 2>/dev/null)" "$TMP/flood.out"
kill "$FLOOD" 2>/dev/null
wait "$FLOOD" 2>/dev/null

# ---- anonymous connections announcing large messages (issue 21, item 4) ---------------------------
# 24 connections (the reproducer's count) from 127.0.0.3, each announcing
# the largest record a stream can carry and trickling bytes of it: before
# its handshake a connection can announce nothing bigger (no frame of any
# size), holds at most that record, and is closed at the handshake
# deadline; the node's memory stays put and its peer is served meanwhile.
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$(node_pid victim)/status"; }
rss_before=$(rss_kb)
"$PY" - "$VICTIM_PORT" "$TMP/trickle.out" <<'PY' &
import socket, sys, time
socks = []
for i in range(24):
    s = socket.socket()
    s.bind(("127.0.0.3", 0))
    s.connect(("127.0.0.1", int(sys.argv[1])))
    s.sendall(b"\xff\xff")
    socks.append(s)
closed, end = 0, time.time() + 15
while socks and time.time() < end:
    for s in list(socks):
        try:
            s.sendall(b"x" * 512)
        except OSError:
            socks.remove(s)
            closed += 1
    time.sleep(0.1)
open(sys.argv[2], "w").write("%d" % closed)
PY
TRICKLE=$!
ctl real --timeout 15 invoke Pinger 'x=[6]' --wait pong >"$TMP/real2.out" 2>&1
grep -q 'float\[1\] 6)$' "$TMP/real2.out" && ok "the peer is served while 24 anonymous connections trickle" ||
    not_ok "the real peer during the trickle" "$TMP/real2.out"
wait "$TRICKLE"
[ "$(cat "$TMP/trickle.out" 2>/dev/null)" = 24 ] &&
    ok "all 24 trickling connections were closed before their handshake ended" ||
    not_ok "trickling connections closed: $(cat "$TMP/trickle.out" 2>/dev/null)" "$TMP/victim.log"
rss_after=$(rss_kb)
[ $((rss_after - rss_before)) -lt 16384 ] &&
    ok "the node's RSS moved $((rss_after - rss_before)) KB (under 16 MB) during the trickle" ||
    not_ok "RSS grew from $rss_before to $rss_after KB"
stop_nodes "both nodes stop cleanly" real victim

finish
