#!/usr/bin/env bash
# bbsim_cli.sh — bbsim as a command: usage and exit codes, a bad scenario
# refused in one line naming the key, every scenario under examples/sim
# checks, a run's outputs (event lines scripts/fed-report reads, summary.json,
# SVG plots that parse), the same hash from two runs, and bbsim(1): it
# renders without warnings and documents every option of --help and every
# key the scenario loader accepts. Ends with "N passed, N failed".
source "$(dirname "$0")/bbd_common.bash"

BBSIM=$BB_BUILD/bin/bbsim
K4=$BB_BUILD/sim/federated-k4.onnx
if [ ! -x "$BBSIM" ] || [ ! -f "$K4" ] || ! scripts/fetch-data >"$TMP/fetch.log" 2>&1; then
    echo "FAIL $BBSIM or $K4 is not built, or scripts/fetch-data failed"
    echo "0 passed, 1 failed"
    exit 1
fi

# ---- usage and refusals -----------------------------------------------------------------
expect "no scenario is a usage error" 2 '^bbsim: error: no scenario given' -- "$BBSIM"
expect "an unknown option is a usage error" 2 "unknown option '--frob'" -- "$BBSIM" --frob x.json
expect "--threads out of range" 2 "--threads: '65' is not a whole number from 0 to 64" -- \
    "$BBSIM" --threads 65 x.json
expect "two scenarios" 2 "one scenario at a time" -- "$BBSIM" a.json b.json
expect "--help lists the options" 0 '--plugin-path DIR' -- "$BBSIM" --help
echo '{"artifact": "a.onnx", "duration": "1s", "groups": [{"name": "c", "count": 2,
  "targets": ["C"], "conect": ["c"]}]}' >"$TMP/typo.json"
expect "an unknown key: exit 1 naming it by its path" 1 \
    "^bbsim: error: $TMP/typo.json: groups\[0\]: unknown key 'conect'" -- "$BBSIM" "$TMP/typo.json"
[ "$(wc -l <"$TMP/err")" = 1 ] && ok "one error line" || not_ok "one error line" "$TMP/err"
echo '{"artifact": ' >"$TMP/cut.json"
expect "not JSON" 1 "cut.json: not valid JSON" -- "$BBSIM" "$TMP/cut.json"
expect "no such scenario" 1 "$TMP/none.json: cannot open" -- "$BBSIM" "$TMP/none.json"
expect "no such artifact" 1 "$TMP/none.onnx" -- "$BBSIM" examples/sim/federated-4.json \
    --artifact "$TMP/none.onnx"
for f in examples/sim/*.json; do
    expect "$f checks" 0 "^$f: ok: [0-9]+ nodes" -- "$BBSIM" --check "$f"
done

# ---- a run and its outputs ------------------------------------------------------------------
expect "federated-4 runs its 20 rounds" 0 'rounds: 20' -- \
    "$BBSIM" examples/sim/federated-4.json --artifact "$K4" -o "$TMP/run1" --no-progress
hash1=$(grep -oE 'event log hash [0-9a-f]{16}' "$TMP/err")
for f in events.jsonl summary.json metric-accuracy.svg metric-loss.svg metric-trained_rows.svg traffic.svg; do
    [ -s "$TMP/run1/$f" ] || not_ok "$f written"
done
check "the plots are well-formed SVG" "$PY" -c '
import sys, xml.etree.ElementTree as ET
for f in sys.argv[1:]:
    assert ET.parse(f).getroot().tag.endswith("svg"), f' \
    "$TMP/run1/metric-accuracy.svg" "$TMP/run1/metric-loss.svg" \
    "$TMP/run1/metric-trained_rows.svg" "$TMP/run1/traffic.svg"
check "summary.json: 20 rounds, the hash the summary printed" "$PY" -c '
import json, sys
s = json.load(open(sys.argv[1]))
assert s["rounds"] == 20 and len(s["per_round"]) == 20, s["rounds"]
assert "event log hash " + s["log_hash"] == sys.argv[2], (s["log_hash"], sys.argv[2])
assert s["metrics"][0]["name"] == "accuracy" and len(s["metrics"][0]["points"]) == 20
m = s["metrics"][2]  # every client: 4 values a round, medians per bucket
assert m["name"] == "trained_rows" and len(m["points"]) == 80, m["name"]
assert all(b["median"] in (1795, 1797.5, 1800) and b["values"] >= 4 for b in m["median_per_bucket"])' \
    "$TMP/run1/summary.json" "$hash1"
expect "scripts/fed-report reads the event lines" 0 '20 rounds: held-out accuracy 98\.05%' -- \
    "$PY" scripts/fed-report --rounds 20 --min-accuracy 0.95 <"$TMP/run1/events.jsonl"
expect "again, one worker thread: the same event log" 0 "$hash1" -- \
    "$BBSIM" examples/sim/federated-4.json --artifact "$K4" -e none --threads 1 --no-progress
expect "without --out the event lines go to stdout" 0 '^\{"event":"app","t_ns":0,' -- \
    "$BBSIM" examples/sim/federated-4.json --artifact "$K4" -q
[ ! -s "$TMP/err" ] && ok "-q: nothing on stderr" || not_ok "-q: nothing on stderr" "$TMP/err"

# ---- bbsim(1) -----------------------------------------------------------------------------------
if LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l man/bbsim.1 >"$TMP/page.txt" 2>"$TMP/man.err" &&
    [ ! -s "$TMP/man.err" ] && [ "$(wc -l <"$TMP/page.txt")" -gt 100 ]; then
    ok "man/bbsim.1 renders with man -l, no warnings"
else
    not_ok "man/bbsim.1 renders without warnings" "$TMP/man.err"
fi
LC_ALL=C.UTF-8 MANWIDTH=200 man -l man/bbsim.1 2>/dev/null | col -bx >"$TMP/bbsim.txt"
missing=""
for opt in $("$BBSIM" --help | grep -oE -- '--[a-z][a-z-]*' | sort -u); do
    grep -qF -- "$opt" "$TMP/bbsim.txt" || missing="$missing $opt"
done
[ -z "$missing" ] && ok "bbsim(1) documents every option of --help" || not_ok "bbsim(1) lacks:$missing"
# every key of the loader's key tables
keys=$(sed -n '/KEYS\[\] = {/,/};/p' bbsim/scenario.c bbsim/scenario_net.c | grep -oE '"[a-z_]+"' |
    tr -d '"' | sort -u)
missing=""
n=0
for k in $keys; do
    n=$((n + 1))
    grep -qE "(^|[ \"{(])$k([ \":,)]|$)" "$TMP/bbsim.txt" || missing="$missing $k"
done
[ "$n" -gt 40 ] && [ -z "$missing" ] && ok "bbsim(1) documents all $n scenario keys" ||
    not_ok "bbsim(1) lacks ($n keys):$missing"
finish
