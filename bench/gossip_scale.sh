#!/bin/bash
# gossip_scale.sh — the scale run of serverless gossip learning (make bench
# runs it): 64 bbd processes on this machine run examples/gossip (CYCLON
# view 8, shuffle 4, a step and a shuffle every second, fanout 3) on
# non-IID digits for two minutes, from one seed address. Reported, as a
# table: each process's resident memory (now and peak; target under
# 12 MB), ingress drops and transport queue drops (target 0), envelopes
# and bytes moved, the accuracy of the first and the last ten steps of
# every node (every node must improve), steps per node, the load.
#
# Environment: BUILD (default build), SCALE_NODES (64), SCALE_SECONDS
# (120), SCALE_PERIOD_MS (1000), SCALE_OUT (BUILD/bench-gossip-scale).
# Exit status 0 when every node ran and improved, with no ingress drop.
set -u
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
BUILD=${BUILD:-build}
B=$ROOT/$BUILD
NODES=${SCALE_NODES:-64}
RUN_S=${SCALE_SECONDS:-120}
PERIOD_MS=${SCALE_PERIOD_MS:-1000}
OUT=${SCALE_OUT:-$B/bench-gossip-scale}
PROGRAM=$OUT/gossip.onnx
source "$ROOT/scripts/demo-common.bash"
export OPENBLAS_NUM_THREADS=1 # 64 processes on 2 cores: no BLAS thread pools

for x in "$B/bin/bbd" "$B/bin/bbctl" "$B/bin/bbc" "$B/examples/gossip"; do
    [ -x "$x" ] || die "$x is not built (make all first)"
done
scripts/fetch-data >/dev/null || die "scripts/fetch-data could not provide the digits"
DIGITS=$ROOT/data/digits.csv.gz
rm -rf "$OUT"
mkdir -p "$OUT" || die "cannot create $OUT"
"$B/examples/gossip" "$OUT/gossip.recorded.onnx" --period-ms "$PERIOD_MS" --view 8 \
    --shuffle-length 4 --shuffle-ms "$PERIOD_MS" --fanout 3 || die "recording failed"
"$B/bin/bbc" compile "$OUT/gossip.recorded.onnx" -o "$PROGRAM" --plugin-path "$PLUGINS" \
    >/dev/null || die "bbc compile failed"

say "gossip at scale: $NODES bbd processes, ${RUN_S} s, a step every $PERIOD_MS ms"
config() { # I SEED
    local seeds=""
    [ -n "$2" ] && seeds=", \"peers\": {\"seeds\": [\"$2\"]}"
    echo "{\"components\": {\"data\": {\"path\": \"$DIGITS\", \"shard_count\": $NODES,
      \"shard_index\": $1, \"partition\": \"classes\", \"partition_seed\": 3}$seeds}}" >"$OUT/n$1.json"
}
watch_node() {
    "$B/bin/bbctl" --socket "$OUT/$1/control.sock" --json --timeout 30 watch --kind app \
        --topic accuracy 2>>"$OUT/watch.log" | sed -u "s/^/$1 /" >>"$OUT/watch.jsonl" &
    WATCHES+=("$!")
}
: >"$OUT/watch.jsonl"
config 0 ""
start_node n0 --config "$OUT/n0.json" --targets Peer --listen /ip4/127.0.0.1/tcp/0
read -r SEED_ID SEED_ADDR < <(node_identity n0)
SEED="/dns4/localhost/tcp/${SEED_ADDR##*/tcp/}/p2p/$SEED_ID"
watch_node n0
for i in $(seq 1 $((NODES - 1))); do
    config "$i" "$SEED"
    start_node "n$i" --config "$OUT/n$i.json" --targets Peer --listen /ip4/127.0.0.1/tcp/0
    watch_node "n$i"
done
echo "    $NODES nodes up; running ${RUN_S} s"
sleep "$RUN_S"

# ---- figures ------------------------------------------------------------------------------
: >"$OUT/nodes.txt"
for i in $(seq 0 $((NODES - 1))); do
    pid=${PIDS[$i]}
    rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null)
    hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null)
    ctl "n$i" --json status 2>/dev/null | $PY -c '
import json, sys
d = json.load(sys.stdin)
c, t = d["counters"], d["transport"]
print(sys.argv[1], sys.argv[2] or 0, sys.argv[3] or 0, c["ingress.dropped"], t["queue_dropped"],
      t["envelopes_in"], t["envelopes_out"], t["bytes_in"], t["bytes_out"], d["known_peers"])
' "n$i" "$rss" "$hwm" >>"$OUT/nodes.txt" || echo "n$i 0 0 dead" >>"$OUT/nodes.txt"
done
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
for p in "${WATCHES[@]}"; do kill "$p" 2>/dev/null; done
WATCHES=()
stop_all
$PY - "$OUT/nodes.txt" "$OUT/watch.jsonl" "$NODES" "$RUN_S" "$LOAD" <<'PY'
import json, statistics, sys
nodes_txt, watch, n, run_s, load = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
rows = [l.split() for l in open(nodes_txt)]
dead = [r[0] for r in rows if len(r) < 10]
live = [r for r in rows if len(r) >= 10]
acc = {}
for line in open(watch):
    name, _, rest = line.partition(" ")
    try:
        ev = json.loads(rest)
    except ValueError:
        continue
    if ev.get("topic") == "accuracy":
        it = ev["value"]["items"][0]
        acc.setdefault(name, []).append(float(it["data"][0]))
def stat(xs):
    return "%s / %s / %s" % (min(xs), statistics.median(xs), max(xs))
rss = [int(r[1]) / 1024 for r in live]
hwm = [int(r[2]) / 1024 for r in live]
drops = sum(int(r[3]) for r in live)
qdrops = sum(int(r[4]) for r in live)
env_in = sum(int(r[5]) for r in live)
mb_in = sum(int(r[7]) for r in live) / 2**20
first = {k: statistics.mean(v[:10]) for k, v in acc.items() if len(v) >= 20}
last = {k: statistics.mean(v[-10:]) for k, v in acc.items() if len(v) >= 20}
improved = [k for k in last if last[k] > first[k]]
steps = [len(v) for v in acc.values()]
print("\n%-44s %s" % ("figure", "value"))
print("-" * 78)
print("%-44s %d (%d died)" % ("bbd processes", n, len(dead)))
print("%-44s %.1f / %.1f / %.1f MB" % ("RSS now, min / median / max", min(rss), statistics.median(rss), max(rss)))
print("%-44s %.1f / %.1f / %.1f MB" % ("RSS peak (VmHWM), min / median / max", min(hwm), statistics.median(hwm), max(hwm)))
print("%-44s %d" % ("engine ingress drops, all nodes", drops))
print("%-44s %d" % ("transport queue drops, all nodes", qdrops))
print("%-44s %d envelopes, %.1f MB" % ("received in %s s, all nodes" % run_s, env_in, mb_in))
print("%-44s %d / %d / %d" % ("steps per node, min / median / max", min(steps), statistics.median(steps), max(steps)))
print("%-44s %.1f%% / %.1f%% / %.1f%%" % ("first 10 steps' accuracy, min / median / max",
      100 * min(first.values()), 100 * statistics.median(first.values()), 100 * max(first.values())))
print("%-44s %.1f%% / %.1f%% / %.1f%%" % ("last 10 steps' accuracy, min / median / max",
      100 * min(last.values()), 100 * statistics.median(last.values()), 100 * max(last.values())))
print("%-44s %d of %d" % ("nodes whose last 10 beat their first 10", len(improved), len(last)))
print("%-44s %s" % ("load average at the end (1, 5, 15 min)", load))
ok = not dead and drops == 0 and len(improved) == n == len(last)
print("\ngossip_scale: %s" % ("ok" if ok else "FAILED"))
sys.exit(0 if ok else 1)
PY
