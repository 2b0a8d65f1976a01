#!/usr/bin/env bash
# gossip_digits.sh — serverless gossip learning with 8 real bbd processes
# on 127.0.0.1, as `make demo-gossip` runs it (scripts/demo-gossip): the
# digits split non-IID (about two classes per node), one seed address, the
# overlay from CYCLON, no server; 60 steps of every node (one every
# 300 ms). Every node's held-out accuracy must pass 85% and average over it
# in its last 10 steps (the demo's exit status checks that); the median
# curve is printed (README compares it with FedAvg on the same split).
# Ends with "N passed, N failed".
source "$(dirname "$0")/bbd_common.bash"

OUT=$TMP/demo-gossip
BUILD_REL=$(realpath --relative-to="$PWD" "$BB_BUILD")
BUILD=$BUILD_REL DEMO_NODES=8 DEMO_STEPS=60 DEMO_OUT=$OUT timeout -k 5 240 scripts/demo-gossip \
    >"$TMP/demo.out" 2>&1
rc=$?
if [ $rc = 0 ] && tail -n 1 "$TMP/demo.out" | grep -q '^demo: ok$'; then
    ok "8 nodes, no server: every node passed 85% and stayed over it ('demo: ok')"
else
    not_ok "scripts/demo-gossip exit $rc" "$TMP/demo.out"
fi
grep -E '^n[0-9]+ +passed' "$TMP/demo.out" | sed 's/^/     /'
if [ -f "$OUT/steps.csv" ] && "$PY" - "$OUT/steps.csv" <<'PY'; then
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
nodes = sorted({r["node"] for r in rows})
assert len(nodes) == 8, nodes
by = {n: [float(r["accuracy"]) for r in rows if r["node"] == n] for n in nodes}
assert all(len(v) == 60 for v in by.values()), {n: len(v) for n, v in by.items()}
ages = [int(r["age"]) for r in rows if r["node"] == nodes[0]]
assert ages == sorted(ages) and ages[-1] > ages[0], "a model's age never decreases"
curve = [statistics.median(by[n][k] for n in nodes) for k in range(60)]
print("     median node, steps 1,10,20,..,60: " +
      " ".join("%.1f" % (100 * curve[k]) for k in [0] + list(range(9, 60, 10))))
PY
    ok "steps.csv: 60 steps of 8 nodes, ages only grow; the median curve above"
else
    not_ok "steps.csv" "$OUT/steps.csv"
fi
[ -s "$OUT/accuracy.svg" ] && grep -q '</svg>' "$OUT/accuracy.svg" &&
    ok "the min / median / max plot is written" || not_ok "accuracy.svg"
finish
