#!/usr/bin/env bash
# bbsim_gossip_churn.sh — gossip learning with churn in the simulator
# (examples/sim/gossip-100-churn.json, the small version of gossip-1000.json):
# 100 nodes on IID digits shards, two seed nodes every other node connects
# to (peers::Cyclon starts from them), 2% of the nodes killed every 20 s of
# virtual time (10 kills) and restarted 10 s later from their last snapshot,
# 2 minutes of virtual time. The median node's held-out accuracy must reach
# the scenario's target (90%) with no failure, the restarted nodes must come
# back from their snapshots, and two runs give the same event log.
# Ends with "N passed, N failed".
source "$(dirname "$0")/bbd_common.bash"

source "$(dirname "$0")/bbsim_gossip_common.bash"
SCENARIO=examples/sim/gossip-100-churn.json

run() { sim_run "$SCENARIO" "$1" 240; }
if run "$TMP/a"; then
    ok "bbsim runs $SCENARIO"
else
    not_ok "bbsim $SCENARIO exit $?" "$TMP/a.txt"
fi
if grep -q "accuracy: converged: the median reached 0.9" "$TMP/a.txt" &&
    "$PY" - "$TMP/a/summary.json" <<'PY'; then
import json, sys
d = json.load(open(sys.argv[1]))
assert d["nodes"] == 100 and d["failures"] == 0, (d["nodes"], d["failures"])
m = d["metrics"][0]
assert m["target"] == 0.9 and m["converged_at_s"] is not None, m.get("converged_at_s")
buckets = m["median_per_bucket"]
assert all(b["p10"] <= b["median"] <= b["p90"] for b in buckets), buckets
print("     median (10th-90th pct) per 30 s:",
      "  ".join("%.1f (%.1f-%.1f)" % (100 * b["median"], 100 * b["p10"], 100 * b["p90"])
                for b in buckets))
assert buckets[-1]["median"] >= 0.9, buckets[-1]
PY
    ok "the median node passes 90% held-out accuracy, 0 failures"
else
    not_ok "the median never reached 90%, or failures" "$TMP/a.txt"
fi
if "$PY" - "$TMP/a/summary.json" "$TMP/a/events.jsonl" <<'PY'; then
import json, sys
d = json.load(open(sys.argv[1]))
assert d["kills"] == 10 and d["restarts"] == 10 and d["nodes_up"] == 100, \
    (d["kills"], d["restarts"], d["nodes_up"])
restored, back = {}, {}
for line in open(sys.argv[2]):
    e = json.loads(line)
    if e.get("event") == "sim" and e["what"].startswith("restart"):
        assert e["what"] == "restart", e  # from its snapshot, not fresh
        restored[e["node"]] = e["t_ns"]
    elif e.get("event") == "app" and e["node"] in restored and e["node"] not in back:
        back[e["node"]] = e
assert len(restored) >= 9 and set(back) == set(restored), (sorted(restored), sorted(back))
print("     %d nodes restarted from their snapshots and reported again" % len(restored))
PY
    ok "10 kills, every restart restored its snapshot and the node came back"
else
    not_ok "kills, restarts or snapshots wrong" "$TMP/a.txt"
fi
run "$TMP/b"
sim_same_log "$TMP/a" "$TMP/b"
finish
