# split_learning_common.bash — shared by split_learning.sh and
# scripts/codec-report (sourced, not run). Builds on bbd_common.bash (real
# bbd processes on 127.0.0.1, port 0, a temporary directory, every process
# killed on exit, waits bounded by deadlines) with the real component
# plugins and the program of examples/split_learning:
#
#   sl_record NAME ARGS...     record with the example's knobs and compile
#                              with bbc -> $TMP/NAME.onnx
#   sl_run NAME ONNX STEPS     a Top, then a DataOwner on digits connected to
#                              it, until the Top has done STEPS training steps
#                              and one held-out evaluation after them; the
#                              Top's events in $TMP/NAME.events; both nodes
#                              stopped (ok / not_ok "NAME: ...")
#   sl_figures NAME STEPS      "LOSS_FIRST LOSS_LAST ACCURACY BYTES_PER_STEP AT":
#                              mean training loss of the first and of the
#                              last 20 steps, the held-out accuracy of the
#                              first evaluation after them, the median bytes
#                              a step moved (the Top's transport totals, in
#                              and out, from one training step's report to the
#                              next), and the steps done when that evaluation
#                              came (evaluations follow a clock, steps go on)
source "$(dirname "${BASH_SOURCE[0]}")/bbd_common.bash"

SPLIT=$BB_BUILD/examples/split_learning
use_example "$SPLIT"

sl_record() { record_program "$SPLIT" "$@"; } # NAME ARGS...

# Has the Top done STEPS training steps, and an evaluation after them?
sl_evaluated_after() { # NAME STEPS
    "$PY" - "$TMP/$1.events" "$2" <<'PY'
import json, sys
topics = [json.loads(l).get("topic") for l in open(sys.argv[1]) if l.startswith("{")]
steps = [i for i, t in enumerate(topics) if t == "train"]
n = int(sys.argv[2])
sys.exit(not (len(steps) >= n and "eval" in topics[steps[n - 1]:]))
PY
}

sl_run() { # NAME ONNX STEPS
    local name=$1 onnx=$2 steps=$3 top=$1-top owner=$1-owner
    if ! start_node "$top" --targets Top --listen /ip4/127.0.0.1/tcp/0 "$onnx"; then
        not_ok "$name: the Top starts" "$TMP/$top.log"
        return 1
    fi
    ctl "$top" --json watch --kind app >"$TMP/$name.events" 2>&1 &
    local watcher=$!
    wait_until 10 watchers_are "$top" 1
    cat >"$TMP/$owner.json" <<JSON
{"components": {"data": {"path": "$DIGITS"}}}
JSON
    local rc=0 t0=$SECONDS
    if ! start_node "$owner" --config "$TMP/$owner.json" --targets DataOwner \
        --listen /ip4/127.0.0.1/tcp/0 --peer "$(node_peer "$top")=$(node_addr "$top" tcp)" "$onnx"; then
        not_ok "$name: the DataOwner starts" "$TMP/$owner.log"
        rc=1
    elif wait_until 180 sl_evaluated_after "$name" "$steps"; then
        ok "$name: $steps training steps and a held-out evaluation in $((SECONDS - t0)) s"
    else
        not_ok "$name: $steps steps and an evaluation did not come" "$TMP/$owner.log"
        rc=1
    fi
    kill "$watcher" 2>/dev/null
    wait "$watcher" 2>/dev/null
    stop_nodes "$name: both nodes stop cleanly" "$owner" "$top"
    return $rc
}

sl_figures() { # NAME STEPS
    "$PY" - "$TMP/$1.events" "$2" <<'PY'
import json, statistics, sys
evs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
n = int(sys.argv[2])
pos = [i for i, e in enumerate(evs) if e.get("topic") == "train"][:n]
def items(e):
    return [x["data"][0] for x in e["value"]["items"]]
loss = [items(evs[i])[0] for i in pos]
total = [evs[i]["transport"]["bytes_in"] + evs[i]["transport"]["bytes_out"] for i in pos]
at = next(i for i in range(pos[-1], len(evs)) if evs[i].get("topic") == "eval")
acc = items(evs[at])[1]
steps_then = sum(1 for e in evs[:at] if e.get("topic") == "train")
per_step = statistics.median(b - a for a, b in zip(total, total[1:]))
print("%.4f %.4f %.4f %d %d" % (sum(loss[:20]) / 20, sum(loss[-20:]) / 20, acc, per_step,
                                steps_then))
PY
}
