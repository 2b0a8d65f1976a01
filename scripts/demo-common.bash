# demo-common.bash — what the demos (scripts/demo: federated, scripts/
# demo-gossip: serverless) share, sourced after they set ROOT, B (the build
# directory), OUT (their output directory) and PROGRAM (the compiled
# program's path): say / die, every started node stopped when the demo
# leaves however it leaves (also on Ctrl-C), start_node, ctl.
PY=python3
PLUGINS=$B/lib/bytesandbrains/plugins

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
die() { echo "demo: error: $*" >&2; exit 1; }

PIDS=()     # the nodes
WATCHES=()  # the bbctl watches feeding the report
cleanup() {
    trap - EXIT INT TERM
    local p
    for p in "${WATCHES[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for _ in $(seq 50); do # up to 5 s for the snapshots, then no mercy
        local alive=0
        for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ $alive = 0 ] && break
        sleep 0.1
    done
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
    wait 2>/dev/null
}
trap cleanup EXIT
trap 'echo; echo "demo: interrupted; stopping every node"; exit 130' INT TERM

ctl() { "$B/bin/bbctl" --socket "$OUT/$1/control.sock" "${@:2}"; }

start_node() { # NAME ARGS... : start bbd on PROGRAM, wait for its control socket
    local name=$1
    shift
    "$B/bin/bbd" --state-dir "$OUT/$name" --plugin-path "$PLUGINS" "$@" "$PROGRAM" \
        2>"$OUT/$name.log" &
    local pid=$!
    PIDS+=("$pid")
    for _ in $(seq 300); do
        ctl "$name" status >/dev/null 2>&1 && return 0
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    tail -n 5 "$OUT/$name.log" >&2
    die "$name did not start (log: $OUT/$name.log)"
}

# The PeerId and the first /tcp listen address of a running node.
node_identity() { # NAME
    ctl "$1" --json status | $PY -c \
        'import json,sys; d=json.load(sys.stdin); print(d["peer_id"], [a for a in d["listen"] if "/tcp/" in a][0])'
}

# Stop every node (SIGTERM: each writes its snapshot); the count of nodes
# that had died before, and of those that did not stop cleanly.
stop_all() {
    DEAD=0
    STOP_FAIL=0
    local p
    for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null || DEAD=$((DEAD + 1)); done
    say "stopping the nodes (SIGTERM: each writes its snapshot)"
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" || STOP_FAIL=$((STOP_FAIL + 1)); done
    PIDS=()
}
