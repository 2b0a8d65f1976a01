#!/bin/bash
# demo.sh — scripts/demo, as `make demo` runs it, shortened to 3 rounds:
# it ends "demo: ok", the report follows the server from before the first
# client connects (a "connected" line per client, the first ahead of any
# round), the last round has all four clients, and the CSV and the plot are
# written. (Which round is the first with clients depends on how fast they
# start next to the server's 1 s tick: the checks do not count on round 1.)
# The demo's own nodes run on 127.0.0.1 with free ports; it stops them.
source "$(dirname "$0")/bbd_common.bash"

OUT=$TMP/demo
BUILD_REL=$(realpath --relative-to="$PWD" "$BB_BUILD")
BUILD=$BUILD_REL DEMO_ROUNDS=3 DEMO_OUT=$OUT timeout -k 5 120 scripts/demo >"$TMP/demo.out" 2>&1
rc=$?
[ $rc = 0 ] && tail -n 1 "$TMP/demo.out" | grep -q '^demo: ok$' &&
    ok "scripts/demo with 3 rounds ends 'demo: ok'" || not_ok "demo exit $rc" "$TMP/demo.out"

# the watch was attached before the clients: it saw every client connect,
# the first before any round (a client may still join after round 1)
first_round=$(grep -n '^round  *[0-9]*/3 ' "$TMP/demo.out" | head -n 1 | cut -d: -f1)
connected=$(grep -c '^  connected 12D3KooW' "$TMP/demo.out")
first_connected=$(grep -n '^  connected 12D3KooW' "$TMP/demo.out" | head -n 1 | cut -d: -f1)
[ "$connected" = 4 ] && [ -n "$first_round" ] && [ "${first_connected:-999999}" -lt "$first_round" ] &&
    ok "the report shows the 4 clients connecting, the first before any round" ||
    not_ok "connected lines (got $connected, the first at line ${first_connected:-none}, first round at line ${first_round:-none})" \
        "$TMP/demo.out"

if [ -f "$OUT/rounds.csv" ] &&
    "$PY" - "$OUT/rounds.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 3, rows
assert all(1 <= int(r["participants"]) <= 4 for r in rows), rows
assert int(rows[-1]["participants"]) == 4, rows
assert all(0.0 <= float(r["accuracy"]) <= 1.0 for r in rows), rows
PY
then
    ok "rounds.csv: 3 rounds with clients, all 4 in the last"
else
    not_ok "rounds.csv" "$OUT/rounds.csv"
fi
grep -q '<svg' "$OUT/accuracy.svg" 2>/dev/null && ok "accuracy.svg written" ||
    not_ok "accuracy.svg" "$TMP/demo.out"
pgrep -f "$OUT/" >/dev/null && not_ok "a demo process outlived the demo" || ok "no demo process left"

finish
