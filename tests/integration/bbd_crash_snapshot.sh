#!/usr/bin/env bash
# bbd_crash_snapshot.sh — SIGKILL at random points while a snapshot is
# being written (bbctl snapshot, and the snapshot of a SIGTERM stop) never
# leaves a torn or half-valid state: each of 30 restarts either restores
# the last complete snapshot (the incarnation goes on from it) or, when
# none was ever completed, starts fresh saying so; a temporary file a kill
# left behind is removed at the start, with a line naming it (issue 21).
# Ends with "N passed, N failed".
source "$(dirname "$0")/bbd_common.bash"

check "fed_round compiles" compile_example fed_round
KILLS=30
torn=0 refused=0 leftover=0 restored=0 fresh=0 tmp_seen=0 tmp_said=0
file_inc=0 # the incarnation the complete snapshot on disk was taken in (0: none)
sum() { md5sum "$TMP/c/snapshot.bbs" 2>/dev/null | cut -d' ' -f1; }
for i in $(seq 1 $KILLS); do
    : >"$TMP/c.log"
    if ! start_node c --targets Client --listen /ip4/127.0.0.1/tcp/0 "$TMP/fed_round.onnx"; then
        refused=$((refused + 1))
        echo "start $i refused:"; tail -3 "$TMP/c.log"
        rm -f "$TMP/c/snapshot.bbs" # go on from a clean state
        continue
    fi
    # what the start said about the state dir
    inc=$(ctl c --json status | jget 'd["incarnation"]')
    if grep -q 'msg="snapshot restored"' "$TMP/c.log"; then
        restored=$((restored + 1))
        # a restore goes on from exactly the last complete snapshot
        [ "$inc" = $((file_inc + 1)) ] || { torn=$((torn + 1)); echo "start $i: incarnation $inc, the snapshot on disk was taken in $file_inc"; }
    elif grep -q 'msg="no snapshot in the state dir: starting fresh"' "$TMP/c.log"; then
        fresh=$((fresh + 1))
        [ "$file_inc" = 0 ] || { torn=$((torn + 1)); echo "start $i: fresh, but a snapshot of $file_inc was on disk"; }
    fi
    before=$(sum)
    grep -q 'removed the temporary file of an interrupted snapshot write' "$TMP/c.log" &&
        tmp_said=$((tmp_said + 1))
    [ -e "$TMP/c/snapshot.bbs.tmp" ] && leftover=$((leftover + 1))
    # write snapshots and kill at a random point of one (or of the stop's)
    pid=$(node_pid c)
    if [ $((i % 2)) = 0 ]; then
        for k in 1 2 3; do ctl c snapshot >/dev/null 2>&1; done
        ctl c snapshot >/dev/null 2>&1 &
    else
        kill -TERM "$pid"
    fi
    sleep "0.00$((RANDOM % 10))"
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    unset "NODE_PID[c]"
    wait 2>/dev/null
    [ -e "$TMP/c/snapshot.bbs.tmp" ] && tmp_seen=$((tmp_seen + 1))
    # a snapshot completed in this run replaced the file (a rename: whole)
    [ "$(sum)" != "$before" ] && file_inc=$inc
done
echo "     $KILLS kills: $restored restores, $fresh fresh starts, $refused refused starts," \
    "a temporary file left by $tmp_seen kills and removed (and said) at $tmp_said starts"
[ "$refused" = 0 ] && ok "every restart after a SIGKILL mid-snapshot started (no torn snapshot refused)" ||
    not_ok "$refused starts refused a snapshot"
[ "$torn" = 0 ] && ok "every start went on from the last complete snapshot (or fresh when there was none)" ||
    not_ok "$torn starts did not go on from the last complete snapshot"
[ $((restored + fresh)) = $((KILLS - refused)) ] &&
    ok "every start either restored or said it starts fresh" || not_ok "starts that said neither"
[ "$leftover" = 0 ] && ok "no temporary file survives a start" || not_ok "$leftover starts kept the .tmp"
# one leftover made on purpose, so the removal is seen even when no kill left one
# the last kill's leftover is removed by this start
: >"$TMP/c.log"
start_node c --targets Client --listen /ip4/127.0.0.1/tcp/0 "$TMP/fed_round.onnx" ||
    not_ok "a last start" "$TMP/c.log"
grep -q 'removed the temporary file of an interrupted snapshot write' "$TMP/c.log" &&
    tmp_said=$((tmp_said + 1))
stop_node c
[ "$tmp_said" -ge "$tmp_seen" ] && ok "each leftover temporary file was removed with a log line" ||
    not_ok "$tmp_seen leftovers, $tmp_said removals said"
printf 'half a snapshot' >"$TMP/c/snapshot.bbs.tmp"
: >"$TMP/c.log"
start_node c --targets Client --listen /ip4/127.0.0.1/tcp/0 "$TMP/fed_round.onnx" ||
    not_ok "start with a leftover .tmp" "$TMP/c.log"
grep -q "removed the temporary file of an interrupted snapshot write\" path=$TMP/c/snapshot.bbs.tmp" "$TMP/c.log" &&
    [ ! -e "$TMP/c/snapshot.bbs.tmp" ] && grep -q 'msg="snapshot restored"' "$TMP/c.log" &&
    ok "a leftover .tmp is removed and named, and the snapshot beside it restored" ||
    not_ok "leftover .tmp" "$TMP/c.log"
stop_node c
finish
