#!/usr/bin/env bash
# bbsim_gossip.sh — the gossip example in the simulator
# (examples/sim/gossip-8.json): 8 nodes, one of them the node the others
# connect to, no seeds configured (peers::Cyclon starts from the peers its
# host knows), the digits split non-IID, 40 s of virtual time. Every node
# must end above 85% held-out accuracy with no failure, and two runs of the
# same scenario give the same event log. Ends with "N passed, N failed".
source "$(dirname "$0")/bbd_common.bash"
source "$(dirname "$0")/bbsim_gossip_common.bash"

run() { sim_run examples/sim/gossip-8.json "$1" 120; }
if run "$TMP/a"; then
    ok "bbsim runs examples/sim/gossip-8.json"
else
    not_ok "bbsim gossip-8.json exit $?" "$TMP/a.txt"
fi
if "$PY" - "$TMP/a/summary.json" <<'PY'; then
import json, sys
d = json.load(open(sys.argv[1]))
assert d["failures"] == 0 and d["nodes_up"] == 8, (d["failures"], d["nodes_up"])
last, first_pass = {}, {}
for p in d["metrics"][0]["points"]:
    last[p["node"]] = p["value"]
    if p["value"] >= 0.85:
        first_pass.setdefault(p["node"], p["t_s"])
assert len(last) == 8, sorted(last)
print("     last accuracy per node:", " ".join("%.1f" % (100 * v) for v in sorted(last.values())))
print("     first above 85%% at (virtual s): %s" % " ".join("%.1f" % t for t in sorted(first_pass.values())))
assert min(last.values()) >= 0.85, last
PY
    ok "every node ends above 85% with no server, 0 failures"
else
    not_ok "a node ended below 85%, or failures" "$TMP/a.txt"
fi
run "$TMP/b"
sim_same_log "$TMP/a" "$TMP/b"
finish
