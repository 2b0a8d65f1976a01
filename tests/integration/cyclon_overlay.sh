#!/usr/bin/env bash
# cyclon_overlay.sh — peers::Cyclon with 16 real bbd processes on
# 127.0.0.1 (examples/overlay: C = 8, L = 4, a shuffle every 500 ms), all
# started from ONE seed address given by host name (/dns4/localhost/...).
# Checked from the views the nodes report (bbctl invoke Peer --wait view):
# after the overlay settles every view is full, nobody is forgotten and
# nobody is a hub (in-degree min/max reported), the overlay is strongly
# connected; after 4 nodes are SIGKILLed it stays connected and the dead
# leave every view. Ends with "N passed, N failed".
source "$(dirname "$0")/bbd_common.bash"

PLUG=$BB_BUILD/lib/bytesandbrains/plugins
N=16
C=8
check "the overlay program compiles" compile_example overlay

start_peer() { # I SEED_ADDR
    local cfg="{}"
    [ -n "$2" ] && cfg="{\"components\": {\"peers\": {\"seeds\": [\"$2\"]}}}"
    echo "$cfg" >"$TMP/p$1.json"
    start_node "p$1" --config "$TMP/p$1.json" --targets Peer --listen /ip4/127.0.0.1/tcp/0 \
        "$TMP/overlay.onnx" || not_ok "peer $1 starts" "$TMP/p$1.log"
}

start_peer 0 ""
SEED_ID=$(node_peer p0)
SEED_PORT=$(node_addr p0 tcp)
SEED_PORT=${SEED_PORT##*/tcp/}
for ((i = 1; i < N; i++)); do
    start_peer "$i" "/dns4/localhost/tcp/$SEED_PORT/p2p/$SEED_ID"
done
declare -A ID=()
for ((i = 0; i < N; i++)); do ID[p$i]=$(node_peer "p$i"); done

# Every live node's view, one line each: "<its PeerId> <PeerIds of its view>".
views() {
    local n
    for n in "$@"; do
        printf '%s ' "${ID[$n]}"
        ctl "$n" --json --timeout 10 invoke Peer --wait view |
            jget '" ".join(i["peer"] for i in d["event"]["value"]["items"])'
    done
}

# python over the views (stdin) and the live PeerIds (argv): prints a
# summary line, exits 0 when EXPR (over full, lo, hi, strong, weak, dead)
# holds.
analyze() { # EXPR LIVE_ID...
    cat >"$TMP/views"
    "$PY" - "$TMP/views" "$@" <<'PY'
import sys
path, expr, live = sys.argv[1], sys.argv[2], set(sys.argv[3:])
view = {}
for line in open(path):
    p = line.split()
    if p:
        view[p[0]] = p[1:]
C = 8
full = sum(len(v) == C for v in view.values())
dead = sum(q not in live for v in view.values() for q in v)
indeg = {p: 0 for p in live}
for v in view.values():
    for q in v:
        if q in indeg:
            indeg[q] += 1
lo, hi = min(indeg.values()), max(indeg.values())
def reach(adj):
    start = next(iter(live))
    seen, todo = {start}, [start]
    while todo:
        a = todo.pop()
        for b in adj.get(a, ()):
            if b in live and b not in seen:
                seen.add(b)
                todo.append(b)
    return seen == live
fwd = {a: v for a, v in view.items()}
back = {}
for a, v in view.items():
    for b in v:
        back.setdefault(b, []).append(a)
und = {p: fwd.get(p, []) + back.get(p, []) for p in live}
strong, weak = reach(fwd) and reach(back), reach(und)
print(f"views full {full}/{len(view)}, in-degree min {lo} max {hi}, strongly connected {strong}, "
      f"weakly {weak}, references to dead nodes {dead}")
sys.exit(0 if eval(expr) else 1)
PY
}

LIVE=()
for ((i = 0; i < N; i++)); do LIVE+=("p$i"); done
live_ids() { local n; for n in "${LIVE[@]}"; do echo "${ID[$n]}"; done; }
settled() { views "${LIVE[@]}" | analyze "$1" $(live_ids) >"$TMP/summary" 2>&1; }

if wait_until 60 settled "full == len(view) and strong and lo >= 2"; then
    ok "16 nodes from one seed: every view full, strongly connected ($(cat "$TMP/summary"))"
else
    not_ok "the overlay settles ($(cat "$TMP/summary"))" "$TMP/p0.log"
fi
views "${LIVE[@]}" | analyze "hi <= 3 * $C" $(live_ids) >"$TMP/summary" &&
    ok "in-degree balanced: $(cat "$TMP/summary")" || not_ok "in-degree: $(cat "$TMP/summary")"
echo "     cyclon, $N nodes, C=$C: $(cat "$TMP/summary")"

# 4 nodes SIGKILLed (the seed among them): the rest stay connected, and
# the dead leave every view
for n in p0 p5 p10 p15; do
    kill -KILL "${NODE_PID[$n]}"
    wait "${NODE_PID[$n]}" 2>/dev/null
    unset "NODE_PID[$n]"
done
LIVE=()
for ((i = 0; i < N; i++)); do
    case $i in 0 | 5 | 10 | 15) ;; *) LIVE+=("p$i") ;; esac
done
views "${LIVE[@]}" | analyze "weak" $(live_ids) >"$TMP/summary" &&
    ok "right after 4 of 16 were killed the live nodes are still connected ($(cat "$TMP/summary"))" ||
    not_ok "connected after the kill: $(cat "$TMP/summary")"
if wait_until 60 settled "dead == 0 and strong and full == len(view)"; then
    ok "the dead left every view; full views, strongly connected ($(cat "$TMP/summary"))"
else
    not_ok "after the kill: $(cat "$TMP/summary")" "$TMP/p1.log"
fi
echo "     cyclon, 4 of $N killed: $(cat "$TMP/summary")"
stop_nodes "the 12 live nodes stop cleanly" "${LIVE[@]}"
finish
