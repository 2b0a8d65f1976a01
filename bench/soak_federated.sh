#!/bin/bash
# soak_federated.sh — the federated example for a long run (make bench, not
# make check): one server and four clients on 127.0.0.1, a round every
# 100 ms (10 rounds a second), SOAK_ROUNDS rounds (10,000 by default: about
# 17 minutes). Every SOAK_SAMPLE rounds the RSS of every node is sampled
# into build/soak/rss.csv; open file descriptors and the engine's timer heap
# (timers.count) are reported after the warm-up (SOAK_WARMUP rounds) and at
# the end. It fails when a node's RSS grew by more than SOAK_MAX_GROWTH_KB
# (2048) between the end of the warm-up and the end, or its descriptors or
# timers grew: after warm-up a node must stay flat.
# Environment: BUILD (default build), SOAK_ROUNDS, SOAK_WARMUP (300),
# SOAK_SAMPLE (250), SOAK_MAX_GROWTH_KB.
set -u
cd "$(dirname "$0")/.." || exit 2
B=$PWD/${BUILD:-build}
ROUNDS=${SOAK_ROUNDS:-10000}
WARMUP=${SOAK_WARMUP:-300}
SAMPLE=${SOAK_SAMPLE:-250}
MAX_GROWTH=${SOAK_MAX_GROWTH_KB:-2048}
OUT=$B/soak
PLUG=$B/lib/bytesandbrains/plugins
DIGITS=$PWD/data/digits.csv.gz
TMP=$(mktemp -d /tmp/bb-soak.XXXXXX)
declare -A PID=()
cleanup() {
    for n in "${!PID[@]}"; do kill -KILL "${PID[$n]}" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
die() { echo "soak: error: $*" >&2; exit 1; }

scripts/fetch-data >/dev/null 2>&1 || die "scripts/fetch-data failed (the digits data set)"
mkdir -p "$OUT"
"$B/examples/federated" "$TMP/fed.rec.onnx" --clients 4 --period-ms 100 --deadline-ms 90 \
    --epochs 1 >/dev/null && "$B/bin/bbc" compile "$TMP/fed.rec.onnx" -o "$TMP/fed.onnx" \
    --plugin-path "$PLUG" >/dev/null || die "recording or compiling the federated example"

ctl() { "$B/bin/bbctl" --socket "$TMP/$1/control.sock" "${@:2}"; }
jget() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }
start() { # NAME CONFIG ARGS...
    local n=$1
    "$B/bin/bbd" --state-dir "$TMP/$n" --plugin-path "$PLUG" --config "$2" "${@:3}" \
        >"$TMP/$n.log" 2>&1 &
    PID[$n]=$!
    for _ in $(seq 300); do ctl "$n" status >/dev/null 2>&1 && return 0; sleep 0.05; done
    die "$n did not start: $(tail -3 "$TMP/$n.log")"
}
echo "{\"components\": {\"data\": {\"path\": \"$DIGITS\", \"part\": \"holdout\"}}}" >"$TMP/srv.json"
start srv "$TMP/srv.json" --targets Server --listen /ip4/127.0.0.1/tcp/0 "$TMP/fed.onnx"
SRV="$(ctl srv --json status | jget 'd["peer_id"]')=$(ctl srv --json status | jget '[a for a in d["listen"] if "/tcp/" in a][0]')"
for i in 0 1 2 3; do
    echo "{\"components\": {\"data\": {\"path\": \"$DIGITS\", \"shard_count\": 4, \"shard_index\": $i, \"seed\": $((10 + i))}}}" >"$TMP/c$i.json"
    start "c$i" "$TMP/c$i.json" --targets Client --listen /ip4/127.0.0.1/tcp/0 --peer "$SRV" "$TMP/fed.onnx"
done
NODES=(srv c0 c1 c2 c3)

rounds() { ctl srv --json status | jget 'd["counters"].get("app.events", 0)'; }
rss() { awk '/^VmRSS/ {print $2}' "/proc/${PID[$1]}/status"; }
fds() { ls "/proc/${PID[$1]}/fd" | wc -l; }
timers() { ctl "$1" --json status | jget 'd["counters"]["timers.count"]'; }
snapshot() { # LABEL -> one line per node
    for n in "${NODES[@]}"; do
        printf '%-8s %-4s rss %7s kB  fds %4s  timers %5s\n' "$1" "$n" "$(rss "$n")" "$(fds "$n")" "$(timers "$n")"
    done
}

echo "round,seconds,$(IFS=,; echo "${NODES[*]}")" >"$OUT/rss.csv"
T0=$(date +%s)
next=0
declare -A WARM_RSS WARM_FDS WARM_TIMERS
warm_done=0
while :; do
    r=$(rounds)
    [ -n "$r" ] || die "the server stopped answering"
    for n in "${NODES[@]}"; do kill -0 "${PID[$n]}" 2>/dev/null || die "$n died: $(tail -3 "$TMP/$n.log")"; done
    if [ "$r" -ge "$next" ]; then
        line="$r,$(($(date +%s) - T0))"
        for n in "${NODES[@]}"; do line="$line,$(rss "$n")"; done
        echo "$line" >>"$OUT/rss.csv"
        next=$((next + SAMPLE))
    fi
    if [ "$warm_done" = 0 ] && [ "$r" -ge "$WARMUP" ]; then
        warm_done=1
        snapshot "warm-up" | tee "$OUT/start.txt"
        for n in "${NODES[@]}"; do
            WARM_RSS[$n]=$(rss "$n"); WARM_FDS[$n]=$(fds "$n"); WARM_TIMERS[$n]=$(timers "$n")
        done
    fi
    [ "$r" -ge "$ROUNDS" ] && break
    [ $(($(date +%s) - T0)) -gt $((ROUNDS / 2 + 600)) ] && die "only $r of $ROUNDS rounds after $(($(date +%s) - T0)) s"
    sleep 2
done
ELAPSED=$(($(date +%s) - T0))
snapshot "end" | tee "$OUT/end.txt"
echo "$ROUNDS rounds in $ELAPSED s ($(echo "scale=1; $ROUNDS / $ELAPSED" | bc) rounds/s); RSS samples: $OUT/rss.csv"
bad=0
for n in "${NODES[@]}"; do
    g=$(($(rss "$n") - WARM_RSS[$n]))
    echo "$n: RSS $((WARM_RSS[$n])) -> $(rss "$n") kB after warm-up ($g kB), fds ${WARM_FDS[$n]} -> $(fds "$n"), timers ${WARM_TIMERS[$n]} -> $(timers "$n")"
    [ "$g" -le "$MAX_GROWTH" ] || { echo "soak: $n grew $g kB after warm-up (limit $MAX_GROWTH)"; bad=1; }
    [ "$(fds "$n")" -le $((WARM_FDS[$n] + 2)) ] || { echo "soak: $n's descriptors grew"; bad=1; }
    [ "$(timers "$n")" -le $((WARM_TIMERS[$n] * 2 + 16)) ] || { echo "soak: $n's timer heap grew"; bad=1; }
done
exit $bad
