# bbsim_gossip_common.bash — sourced by the bbsim gossip scripts (after
# bbd_common.bash): the simulator and the gossip artifact must be built and
# the data fetched; one run of a scenario; two runs' event logs compared.

BBSIM=$BB_BUILD/bin/bbsim
ART=$BB_BUILD/sim/gossip.onnx
if [ ! -x "$BBSIM" ] || [ ! -f "$ART" ] || ! scripts/fetch-data >"$TMP/fetch.log" 2>&1; then
    echo "FAIL $BBSIM or $ART is not built, or scripts/fetch-data failed"
    echo "0 passed, 1 failed"
    exit 1
fi

# Run SCENARIO with the built artifact into OUT (its summary in OUT.txt),
# killed after LIMIT seconds.
sim_run() { # SCENARIO OUT LIMIT
    timeout -k 5 "$3" "$BBSIM" "$1" --artifact "$ART" -o "$2" --no-progress >"$2.txt" 2>&1
}

sim_log_hash() { # OUT
    "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["log_hash"])' \
        "$1/summary.json" 2>/dev/null
}

# The event logs of two runs of one scenario must hash the same.
sim_same_log() { # OUT_A OUT_B
    local a b
    a=$(sim_log_hash "$1")
    b=$(sim_log_hash "$2")
    if [ -n "$a" ] && [ "$a" = "$b" ]; then
        ok "the same scenario gives the same event log (hash $a)"
    else
        not_ok "two runs differ: $a vs $b"
    fi
}
