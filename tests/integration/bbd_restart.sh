#!/usr/bin/env bash
# bbd_restart.sh — stopping and restarting a node mid-run: kill -TERM a
# client while it trains (work parked on the worker pool), check it exits 0
# with a snapshot, restart it, and see the round it was part of complete.
# Also: --fresh ignores the snapshot, a snapshot in an older engine format
# and a damaged one are refused with one line naming the file, SIGHUP
# reopens the log file. Ends with "N passed, N failed".
source "$(dirname "$0")/bbd_common.bash"

# a generous per-hop budget: the round must outlive the client's restart
check "fed_round compiles" compile_example fed_round --per-hop-budget-ns 60000000000

start_node c1 --targets Client --listen /ip4/127.0.0.1/tcp/0 "$TMP/fed_round.onnx" ||
    not_ok "client 1 starts" "$TMP/c1.log"
cat >"$TMP/slow.json" <<JSON
{"targets": "Client", "listen": "/ip4/127.0.0.1/tcp/0",
 "components": {"local_model": {"delta": 3, "train_ms": 1500}}}
JSON
start_node c2 --config "$TMP/slow.json" "$TMP/fed_round.onnx" || not_ok "client 2 starts" "$TMP/c2.log"
C2_ID=$(node_peer c2)
start_fed_server tcp

ctl srv --timeout 40 invoke Server --wait round >"$TMP/round.out" 2>&1 &
ROUND=$!
pending() { [ "$(ctl c2 --json status | jget 'd["pending_async"]')" -ge 1 ]; }
if wait_until 10 pending; then
    ok "client 2 is training (an op parked on the worker pool)"
else
    not_ok "client 2 never started training" "$TMP/c2.log"
fi
stop_node c2
[ "$STOP_RC" = 0 ] && ok "kill -TERM mid-training: exit 0" || not_ok "exit status $STOP_RC" "$TMP/c2.log"
grep -q 'msg="snapshot written" path='"$TMP/c2/snapshot.bbs" "$TMP/c2.log" && [ -s "$TMP/c2/snapshot.bbs" ] &&
    ok "the snapshot is in the state dir" || not_ok "snapshot written" "$TMP/c2.log"
kill -0 "$ROUND" 2>/dev/null && ok "the round is still waiting for client 2" ||
    not_ok "the round ended early" "$TMP/round.out"

start_node c2 --config "$TMP/slow.json" "$TMP/fed_round.onnx" || not_ok "client 2 restarts" "$TMP/c2.log"
grep -q 'msg="snapshot restored" path='"$TMP/c2/snapshot.bbs"'.* incarnation=2' "$TMP/c2.log" &&
    ok "restarted, it restores the snapshot (incarnation 2)" || not_ok "restore" "$TMP/c2.log"
[ "$(node_peer c2)" = "$C2_ID" ] && ok "same PeerId after restart (the key stays in the state dir)" ||
    not_ok "PeerId changed"
wait "$ROUND"
# client 1 (delta 1, 10 samples) and client 2 (delta 3, 10 samples): 2
grep -q 'topic=round value=float\[4\] 2 2 2 2$' "$TMP/round.out" &&
    ok "the round completes with client 2's update after its restart" ||
    not_ok "round after restart" "$TMP/round.out"
ctl c2 --json status | jget 'd["incarnation"] == 2 and d["restored"]' | grep -q true &&
    ok "status reports the incarnation and the restore" || not_ok "status after restore"

# --fresh ignores the snapshot
stop_node c2
start_node c2 --config "$TMP/slow.json" --fresh "$TMP/fed_round.onnx" ||
    not_ok "client 2 starts with --fresh" "$TMP/c2.log"
ctl c2 --json status | jget 'd["incarnation"] == 1 and not d["restored"]' | grep -q true &&
    ok "--fresh: incarnation 1, nothing restored" || not_ok "--fresh" "$TMP/c2.log"
stop_node c2

# a snapshot in an older engine format (BBSNAP2, checksum intact): refused
# with one line naming the file and both formats
python3 - "$TMP/c2/snapshot.bbs" "$TMP/old.bbs" <<'PY'
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
data[32:40] = b"BBSNAP2\0"
h = 0xcbf29ce484222325
for b in data[32:]:
    h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
data[24:32] = struct.pack("<Q", h)
open(sys.argv[2], "wb").write(data)
PY
mkdir -p "$TMP/old" && cp "$TMP/old.bbs" "$TMP/old/snapshot.bbs"

# bbd refuses to start from state dir $1: exit 1, one error line matching $2
refuses_start() {
    "$BBD" --config "$TMP/slow.json" --state-dir "$1" --plugin-path "$PLUG" \
        "$TMP/fed_round.onnx" >"$TMP/refused.out" 2>"$TMP/refused.err"
    local rc=$?
    [ "$rc" = 1 ] && [ "$(grep -c '^bbd: error:' "$TMP/refused.err")" = 1 ] &&
        grep -q "^bbd: error: snapshot $1/snapshot.bbs: $2" "$TMP/refused.err"
}
if refuses_start "$TMP/old" "restore: snapshot format BBSNAP2 is older than this engine's (BBSNAP3).*--fresh"; then
    ok "an older snapshot format: exit 1 with one line naming the file and both formats"
else
    not_ok "older snapshot format" "$TMP/refused.err"
fi

# a damaged snapshot: one line naming it, exit 1, nothing started
printf 'garbage' | dd of="$TMP/c2/snapshot.bbs" bs=1 seek=40 conv=notrunc 2>/dev/null
if refuses_start "$TMP/c2" "checksum mismatch.*--fresh"; then
    ok "a damaged snapshot: exit 1 with one line naming the file"
else
    not_ok "damaged snapshot" "$TMP/refused.err"
fi

# SIGHUP reopens the log file (logrotate)
start_node c3 --targets Client --log-file "$TMP/c3-file.log" "$TMP/fed_round.onnx" ||
    not_ok "client 3 starts with --log-file" "$TMP/c3.log"
mv "$TMP/c3-file.log" "$TMP/c3-file.log.1"
kill -HUP "$(node_pid c3)"
if wait_until 5 grep -q 'msg="log reopened"' "$TMP/c3-file.log" &&
    grep -q 'msg=ready' "$TMP/c3-file.log.1"; then
    ok "SIGHUP: the log file is reopened, the old one keeps the earlier lines"
else
    not_ok "SIGHUP reopen" "$TMP/c3-file.log.1"
fi
stop_nodes "the remaining nodes stop cleanly" c3 srv c1

finish
