#!/usr/bin/env bash
# bbd_notify.sh — bbd under a systemd-like supervisor: READY=1 once it
# listens, STATUS= lines, WATCHDOG=1 keep-alives at half $WATCHDOG_USEC,
# STOPPING=1 on SIGTERM, all over $NOTIFY_SOCKET (no libsystemd); and the
# journal's priority prefixes when stderr is $JOURNAL_STREAM.
# Ends with "N passed, N failed".
source "$(dirname "$0")/bbd_common.bash"

check "ping_pong compiles" compile_example ping_pong

# the supervisor: a datagram socket that logs what it receives
cat >"$TMP/listen.py" <<'PY'
import socket, sys, time
path, out, deadline = sys.argv[1], sys.argv[2], time.time() + 30
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
s.settimeout(0.5)
with open(out, "w", buffering=1) as f:
    print("listening", file=f)
    while time.time() < deadline:
        try:
            msg = s.recv(4096).decode()
        except socket.timeout:
            continue
        print(msg.replace("\n", " | "), file=f)
        if "STOPPING=1" in msg:
            break
PY
"$PY" "$TMP/listen.py" "$TMP/notify.sock" "$TMP/notify.log" &
LISTENER=$!
wait_until 10 grep -q listening "$TMP/notify.log" || not_ok "the notify listener starts"

NOTIFY_SOCKET=$TMP/notify.sock WATCHDOG_USEC=200000 start_node n --targets Ponger \
    --listen /ip4/127.0.0.1/tcp/0 "$TMP/ping_pong.onnx" || not_ok "bbd starts under NOTIFY_SOCKET" "$TMP/n.log"
PID=$(node_pid n)
if wait_until 10 grep -q "^READY=1 | MAINPID=$PID | STATUS=running: 1 target, 0 connections" "$TMP/notify.log"; then
    ok "READY=1 with MAINPID and a STATUS summary"
else
    not_ok "READY=1" "$TMP/notify.log"
fi
watchdogs() { [ "$(grep -c '^WATCHDOG=1$' "$TMP/notify.log")" -ge 5 ]; }
wait_until 10 watchdogs && ok "WATCHDOG=1 keeps coming (every 100 ms for a 200 ms watchdog)" ||
    not_ok "watchdog keep-alives" "$TMP/notify.log"
stop_node n
wait "$LISTENER"
[ "$STOP_RC" = 0 ] && grep -q '^STOPPING=1 | STATUS=stopping$' "$TMP/notify.log" &&
    ok "SIGTERM: STOPPING=1, then exit 0" || not_ok "STOPPING=1 (exit $STOP_RC)" "$TMP/notify.log"
# READY only once everything is up: the control socket answered after it
grep -n . "$TMP/notify.log" | grep -q '^2:READY=1' && ok "READY=1 is the first message" ||
    not_ok "message order" "$TMP/notify.log"

# a watchdog meant for another process is not ours
"$PY" "$TMP/listen.py" "$TMP/notify2.sock" "$TMP/notify2.log" &
LISTENER=$!
wait_until 10 grep -q listening "$TMP/notify2.log"
NOTIFY_SOCKET=$TMP/notify2.sock WATCHDOG_USEC=100000 WATCHDOG_PID=1 start_node m --targets Ponger \
    "$TMP/ping_pong.onnx" || not_ok "bbd starts" "$TMP/m.log"
wait_until 10 grep -q '^READY=1' "$TMP/notify2.log"
ctl m status >/dev/null # a round trip through the loop after READY
stop_node m
wait "$LISTENER"
! grep -q WATCHDOG "$TMP/notify2.log" && grep -q '^STOPPING=1' "$TMP/notify2.log" &&
    ok "WATCHDOG_PID of another process: no keep-alives" || not_ok "foreign watchdog" "$TMP/notify2.log"

# the journal: stderr is $JOURNAL_STREAM -> "<N>" priorities, no timestamps
exec 3>"$TMP/journal.log"
JS=$(stat -c '%d:%i' "$TMP/journal.log")
JOURNAL_STREAM=$JS "$BBD" --state-dir "$TMP/j" --plugin-path "$PLUG" --targets Ponger \
    "$TMP/ping_pong.onnx" 2>&3 &
NODE_PID[j]=$!
exec 3>&-
wait_until 10 grep -q 'msg=ready' "$TMP/journal.log"
stop_node j
if grep -q '^<6>level=info comp=daemon msg=ready ' "$TMP/journal.log" && ! grep -qE '(^|>)ts=' "$TMP/journal.log"; then
    ok "under the journal: <6> priority prefixes and no timestamps"
else
    not_ok "journal format" "$TMP/journal.log"
fi

finish
