#!/usr/bin/env bash
# readme_tour.sh — the README's command blocks work when pasted.
#
# A block is run when the line before its opening fence is
#   <!-- readme-test: NAME -->
# Each runs as a reader would paste it at the top of a fresh clone after
# `make`: in a temporary directory holding `build` (a link to $BB_BUILD),
# `examples` (a link to the tree's, for the scripts it holds), links to
# scripts/ and data/ (so scripts/fetch-data finds the digits already
# fetched) and a copy of testdata/, without BB_PLUGIN_PATH, under `bash -e -o pipefail`
# (so every command must succeed). Two substitutions keep concurrent runs
# apart: /tmp/bb becomes a directory of this test's, and the ports
# 7001 / 7002 become free ones.
#
# Every block runs in a session of its own (setsid) with a deadline; after
# it ends, whatever it left running (a daemon started with `&`) must be
# gone within a deadline, and on every exit path the trap kills each session
# this test started, so no process outlives it.
#
# The blocks it must find are listed in EXPECTED: a marker removed or
# renamed fails the test instead of silently running less. A new marked
# block runs as well. Ends with "N passed, N failed".
set -u
cd "$(dirname "$0")/../.." || exit 2
BB_BUILD=${BB_BUILD:-$PWD/build}
README=README.md
EXPECTED=(tour ping-pong federated split-learning vector-store)
BLOCK_DEADLINE=120 # seconds a block may run
STOP_DEADLINE=20   # seconds its leftover processes get to exit

TMP=$(mktemp -d /tmp/readme-tour.XXXXXX)
SESSIONS=()
pass=0
fail=0

cleanup() {
    local sid
    for sid in "${SESSIONS[@]}"; do
        kill -KILL -- "-$sid" 2>/dev/null
    done
    [ -n "${BB_KEEP_TMP:-}" ] && echo "kept $TMP" || rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP

ok() { pass=$((pass + 1)); echo "ok   $1"; }
not_ok() {
    fail=$((fail + 1))
    echo "FAIL $1"
    if [ -n "${2:-}" ] && [ -f "$2" ]; then tail -n 30 "$2" | sed 's/^/     | /'; fi
}
finish() {
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
    exit $?
}

for f in "$BB_BUILD/bin/bbd" "$BB_BUILD/bin/bbc" "$BB_BUILD/bin/bbctl" testdata/cpu_testdata_x.pb; do
    if [ ! -e "$f" ]; then
        not_ok "$f exists (build first)"
        finish
    fi
done

# ---- the marked blocks ---------------------------------------------------------------
# blocks/NAME.sh per marker; a marker not followed by a fence is reported.
mkdir -p "$TMP/blocks"
if ! awk -v dir="$TMP/blocks" '
    match($0, /^<!-- readme-test: [a-z0-9-]+ -->$/) {
        name = substr($0, 19, length($0) - 22); want = NR + 1; next
    }
    want && NR == want {
        if ($0 !~ /^```(sh|bash)?$/) { print "marker " name " is not followed by a code block"; bad = 1 }
        else { file = dir "/" name ".sh"; printf "" > file; inside = 1 }
        want = 0; next
    }
    inside && /^```$/ { inside = 0; close(file); next }
    inside { print > file }
    END { exit bad }' "$README" >"$TMP/parse.log"; then
    not_ok "every readme-test marker opens a code block" "$TMP/parse.log"
fi
for name in "${EXPECTED[@]}"; do
    if [ -s "$TMP/blocks/$name.sh" ]; then
        ok "README has the marked block '$name'"
    else
        not_ok "README has no block marked <!-- readme-test: $name -->"
    fi
done

# ---- where they run ------------------------------------------------------------------
WORK=$TMP/work
mkdir -p "$WORK"
ln -s "$BB_BUILD" "$WORK/build"
cp -r testdata "$WORK/testdata"
ln -s "$PWD/scripts" "$WORK/scripts"
mkdir -p data && ln -s "$PWD/data" "$WORK/data"
ln -s "$PWD/examples" "$WORK/examples" # scripts a block runs (examples/vector_store/corpus.py)
read -r PORT1 PORT2 < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
for f in "$TMP"/blocks/*.sh; do
    sed -i -E -e "s#/tmp/bb([/ ]|\$)#$TMP/bb\1#g" -e "s#/tcp/7001\b#/tcp/$PORT1#g" \
        -e "s#/tcp/7002\b#/tcp/$PORT2#g" "$f"
    if grep -nE '/tmp/bb([/ ]|$)|/tcp/700[12]\b' "$f" >"$TMP/left.log"; then
        not_ok "$(basename "$f" .sh): every /tmp/bb and port 7001/7002 substituted" "$TMP/left.log"
    fi
done

# The state of a process (R, S, Z, ...), empty once it is gone.
proc_state() { ps -o stat= -p "$1" 2>/dev/null; }

# Run blocks/NAME.sh in its own session; ok when it exits 0 within the
# deadline and leaves no process behind.
run_block() { # NAME
    local name=$1
    local log=$TMP/$name.log
    (cd "$WORK" && exec setsid env -u BB_PLUGIN_PATH bash -e -o pipefail \
        "$TMP/blocks/$name.sh") >"$log" 2>&1 &
    local sid=$!
    SESSIONS+=("$sid")
    local deadline=$((SECONDS + BLOCK_DEADLINE)) st
    while st=$(proc_state "$sid") && [[ $st != Z* ]]; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            echo "still running after ${BLOCK_DEADLINE}s: killed" >>"$log"
            kill -KILL -- "-$sid" 2>/dev/null
            break
        fi
        sleep 0.1
    done
    { wait "$sid"; } 2>/dev/null # the exit status says it; no "Killed" notice
    local rc=$?
    if [ "$rc" = 0 ]; then ok "block '$name' runs"; else not_ok "block '$name' runs (exit $rc)" "$log"; fi
    deadline=$((SECONDS + STOP_DEADLINE))
    while pgrep -s "$sid" >"$TMP/left.pids"; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            ps -o pid=,args= -p "$(paste -sd, "$TMP/left.pids")" >>"$log"
            kill -KILL -- "-$sid" 2>/dev/null
            not_ok "block '$name' leaves no process running" "$log"
            return
        fi
        sleep 0.1
    done
    ok "block '$name' leaves no process running"
}

# What a block must have done besides exiting 0.
after_tour() {
    [ -s "$WORK/out/y.pb" ] && ok "tour: bbd run wrote out/y.pb" ||
        not_ok "tour: bbd run wrote out/y.pb" "$TMP/tour.log"
    grep -q '1 matched, 0 mismatched, 0 errors' "$TMP/tour.log" &&
        ok "tour: the Gemm test case matches" || not_ok "tour: the Gemm test case matches" "$TMP/tour.log"
}
after_ping-pong() {
    grep -Eq '^app exec_id=[0-9]+ target=Pinger topic=pong value=ResponseBatch\(12D3KooW[^:]+: float\[3\] 1 2 3\)$' \
        "$TMP/ping-pong.log" && ok "ping-pong: the answer came back" ||
        not_ok "ping-pong: the answer came back" "$TMP/ping-pong.log"
    [ -d "$TMP/bb/ping" ] && [ -d "$TMP/bb/pong" ] && ok "ping-pong: state directories under the test's /tmp/bb" ||
        not_ok "ping-pong: state directories under the test's /tmp/bb"
}
after_federated() {
    grep -q '^Server$' "$TMP/federated.log" && grep -q '^Client$' "$TMP/federated.log" &&
        ok "federated: bbc targets lists Server and Client" ||
        not_ok "federated: bbc targets lists Server and Client" "$TMP/federated.log"
}

after_split-learning() {
    python3 - "$TMP/split-learning.log" <<'PY' >"$TMP/split.check" 2>&1 &&
import re, sys
acc = [float(m.group(1)) for m in
       (re.match(r"^app exec_id=\d+ target=Top topic=eval "
                 r"value=Composite\(float\[\] [-0-9.e]+, float\[\] ([0-9.e-]+)\)$", l)
        for l in open(sys.argv[1])) if m]
assert len(acc) == 3, "%d evaluations" % len(acc)
assert acc[-1] >= 0.5, "held-out accuracy %s" % acc  # one digit in ten at random
print(acc)
PY
        ok "split-learning: three held-out evaluations, the last at $(cat "$TMP/split.check")" ||
        not_ok "split-learning: three held-out evaluations the model learned from" "$TMP/split.check"
}

for f in "$TMP"/blocks/*.sh; do
    [ -e "$f" ] || continue
    name=$(basename "$f" .sh)
    run_block "$name"
    if declare -F "after_$name" >/dev/null; then "after_$name"; fi
done
finish
