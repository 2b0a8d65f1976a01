# bbd_common.bash — shared by the bbd_*.sh integration tests (sourced, not
# run: the test runner only runs *.sh). Real bbd processes on 127.0.0.1,
# port 0 everywhere (each node reports the port it got), a temporary
# directory per script, every started process killed on exit, and every
# wait bounded by a deadline on a condition (no sleep-and-hope).
#
# Provides: BBD BBCTL BBC TMP PY, ok / not_ok / finish (the summary line),
# expect NAME RC PATTERN -- CMD... (a command's exit status and output),
# compile_example NAME (-> $TMP/NAME.onnx), record_program RECORDER NAME
# ARGS... (run an example recorder with its knobs, compile against $PLUG
# -> $TMP/NAME.onnx), use_example EXE (the example programs on the real
# plugins and digits), start_node NAME ARGS...,
# stop_node NAME, stop_nodes LABEL NAME..., start_fed_server tcp|udp,
# node_pid / node_peer / node_addr NAME [tcp|udp],
# ctl NAME ARGS... (bbctl on NAME's socket), jget EXPR (JSON on stdin,
# python expression over d), wait_until SECONDS CMD...
# Sourced twice (by two *_common.bash files), the second time does nothing.
[ -n "${BBD_COMMON_SOURCED:-}" ] && return 0
BBD_COMMON_SOURCED=1
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
BB_BUILD=${BB_BUILD:-$PWD/build}
BBD=$BB_BUILD/bin/bbd
BBCTL=$BB_BUILD/bin/bbctl
BBC=$BB_BUILD/bin/bbc
PY=/usr/bin/python3
TMP=$(mktemp -d /tmp/bbd-it.XXXXXX)
declare -A NODE_PID=()
pass=0
fail=0

cleanup() {
    local n
    for n in "${!NODE_PID[@]}"; do
        kill -KILL "${NODE_PID[$n]}" 2>/dev/null
    done
    wait 2>/dev/null
    [ -n "${BB_KEEP_TMP:-}" ] && echo "kept $TMP" || rm -rf "$TMP"
}
trap cleanup EXIT

ok() { pass=$((pass + 1)); echo "ok   $1"; }
not_ok() {
    fail=$((fail + 1))
    echo "FAIL $1"
    if [ -n "${2:-}" ] && [ -f "$2" ]; then tail -n 30 "$2" | sed 's/^/     | /'; fi
}
check() { # NAME CMD... : ok when CMD succeeds
    local name=$1
    shift
    if "$@" >"$TMP/check.out" 2>&1; then ok "$name"; else not_ok "$name" "$TMP/check.out"; fi
}
# expect NAME WANT_RC PATTERN -- CMD... : exit status and a line of stdout+stderr
expect() {
    local name=$1 want=$2 pat=$3
    shift 4
    "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    if [ "$rc" = "$want" ] && cat "$TMP/out" "$TMP/err" | grep -Eq -- "$pat"; then
        ok "$name"
    else
        echo "exit $rc, wanted $want; pattern: $pat" >>"$TMP/err"
        not_ok "$name" "$TMP/err"
    fi
}
finish() {
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
    exit $?
}

for b in "$BBD" "$BBCTL" "$BBC"; do
    if [ ! -x "$b" ]; then
        echo "FAIL $b not built"
        echo "0 passed, 1 failed"
        exit 1
    fi
done

# JSON on stdin, a python expression over d.
jget() { "$PY" -c 'import json,sys; d=json.load(sys.stdin); v=eval(sys.argv[1]); print(json.dumps(v) if isinstance(v,(dict,list,bool)) else v)' "$1"; }

wait_until() { # SECONDS CMD... : poll CMD until it succeeds or the deadline passes
    local deadline=$((SECONDS + $1))
    shift
    while ! "$@" >/dev/null 2>&1; do
        [ "$SECONDS" -ge "$deadline" ] && return 1
        sleep 0.05
    done
}

# The test plugin alone in a directory (tests/plugins also holds broken
# plugins on purpose), then the example compiled against it.
PLUG=$TMP/plugins
mkdir -p "$PLUG"
cp "$BB_BUILD/tests/plugins/bbd_test.so" "$PLUG/" 2>/dev/null
compile_example() { # NAME [bbc options...]
    local name=$1
    shift
    "$BBC" compile "testdata/$name.onnx" -o "$TMP/$name.onnx" --plugin-path "$PLUG" "$@" \
        >"$TMP/compile-$name.log" 2>&1
}

# The example programs on the real plugins and digits (PLUG, DIGITS): ends
# the script as a failure when EXE is not built or the data cannot be had.
use_example() { # EXE
    PLUG=$BB_BUILD/lib/bytesandbrains/plugins
    DIGITS=$PWD/data/digits.csv.gz
    if [ ! -x "$1" ] || ! scripts/fetch-data >"$TMP/fetch.log" 2>&1; then
        echo "FAIL $1 is not built or scripts/fetch-data failed"
        cat "$TMP/fetch.log" 2>/dev/null
        echo "0 passed, 1 failed"
        exit 1
    fi
}

record_program() { # RECORDER NAME [knobs...]
    local rec=$1 name=$2
    shift 2
    "$rec" "$TMP/$name.rec.onnx" "$@" >"$TMP/record-$name.log" 2>&1 &&
        "$BBC" compile "$TMP/$name.rec.onnx" -o "$TMP/$name.onnx" --plugin-path "$PLUG" \
            >>"$TMP/record-$name.log" 2>&1
}

ctl() { # NAME ARGS...
    local n=$1
    shift
    "$BBCTL" --socket "$TMP/$n/control.sock" "$@"
}

node_pid() { echo "${NODE_PID[$1]}"; }
node_alive() { kill -0 "${NODE_PID[$1]}" 2>/dev/null; }

# Start bbd as node NAME (state dir $TMP/NAME, log $TMP/NAME.log) and wait
# until its control socket answers. Returns 1 if it exits or times out.
start_node() {
    local n=$1
    shift
    "$BBD" --state-dir "$TMP/$n" --plugin-path "$PLUG" "$@" >>"$TMP/$n.log" 2>&1 &
    NODE_PID[$n]=$!
    local deadline=$((SECONDS + 15))
    while ! ctl "$n" status >/dev/null 2>&1; do
        if ! node_alive "$n" || [ "$SECONDS" -ge "$deadline" ]; then
            return 1
        fi
        sleep 0.02
    done
}

# SIGTERM and wait for the exit; the exit status goes to $STOP_RC (not
# echoed: a $(...) subshell cannot wait for this shell's children).
stop_node() {
    local n=$1 pid=${NODE_PID[$1]}
    kill -TERM "$pid" 2>/dev/null
    wait "$pid"
    STOP_RC=$?
    unset "NODE_PID[$n]"
}

# SIGTERM each NAME in turn: ok LABEL when every one exits 0, else a
# not_ok per node that did not.
stop_nodes() { # LABEL NAME...
    local label=$1 n clean=1
    shift
    for n in "$@"; do
        stop_node "$n"
        [ "$STOP_RC" = 0 ] || { not_ok "$n exits 0 (got $STOP_RC)" "$TMP/$n.log"; clean=0; }
    done
    [ "$clean" = 1 ] && ok "$label"
}

# The fed_round Server as node srv, with the running clients c1 and c2 as
# its peers over PROTO.
start_fed_server() { # tcp|udp
    start_node srv --targets Server --listen "/ip4/127.0.0.1/$1/0" \
        --peer "$(node_peer c1)=$(node_addr c1 "$1")" --peer "$(node_peer c2)=$(node_addr c2 "$1")" \
        "$TMP/fed_round.onnx" || not_ok "server starts" "$TMP/srv.log"
}

# Wait until NAME has N watching control clients.
watchers_are() { [ "$(ctl "$1" --json status | jget 'd["watchers"]')" = "$2" ]; }

node_peer() { ctl "$1" --json status | jget 'd["peer_id"]'; }
node_addr() { # NAME tcp|udp : the first listen address of that protocol
    ctl "$1" --json status | jget "[a for a in d['listen'] if '/$2/' in a][0]"
}
