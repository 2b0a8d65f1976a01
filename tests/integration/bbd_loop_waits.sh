#!/usr/bin/env bash
# bbd_loop_waits.sh — while two bbd nodes keep a request loop busy
# (wire_loop: one 64-byte tensor in flight, every response starting the
# next request), neither node's event loop waits with a timeout. Every
# epoll_wait of each node is traced (strace) for a while and must pass -1
# (block until an event) or 0 (poll and come straight back): a uv timer
# pending anywhere in a daemon puts a finite timeout on every wait, and the
# kernel then sets up and cancels a timer once per message — about 0.6 us
# of every pinned round trip (bbd/host/timer.h). Both channels: security
# off and noise. Ends with "N passed, N failed".
source "$(dirname "$0")/bbd_common.bash"

if ! command -v strace >/dev/null; then
    echo "FAIL strace is not installed (scripts/deps installs it)"
    echo "0 passed, 1 failed"
    exit 1
fi
check "wire_loop compiles" compile_example wire_loop

envelopes_in_over() { # NAME N
    [ "$(ctl "$1" --json status | jget 'd["counters"]["envelopes.in"]')" -gt "$2" ]
}

completed_waits() { # FILE: the traced epoll_waits that returned
    local c
    c=$(grep -cE '^epoll_wait\(.*\) += ' "$1" 2>/dev/null)
    echo "${c:-0}"
}

# trace_waits NODE: trace NODE's epoll_wait calls until 200 completed (20 s
# at most); ok when there were that many and none had a finite timeout
trace_waits() {
    local n=$1 out=$TMP/$1.waits
    strace -qq -e trace=epoll_wait -o "$out" -p "$(node_pid "$n")" 2>"$TMP/$n.strace.err" &
    local tracer=$!
    local deadline=$((SECONDS + 20))
    while [ "$(completed_waits "$out")" -lt 200 ] && [ "$SECONDS" -lt "$deadline" ]; do
        sleep 0.05
    done
    kill -INT "$tracer" 2>/dev/null
    wait "$tracer" 2>/dev/null
    local total timed
    total=$(completed_waits "$out")
    # the timeout is the last argument: "epoll_wait(4, [...], 1024, -1) = 1"
    timed=$(grep -E '^epoll_wait\(.*\) += ' "$out" | grep -vcE ', (-1|0)\) += ')
    if [ "$total" -ge 200 ] && [ "$timed" = 0 ]; then
        ok "$n: $total loop waits while busy, none with a timeout"
    else
        echo "$total completed waits, $timed with a finite timeout:" >>"$TMP/$n.strace.err"
        grep -E '^epoll_wait\(.*\) += ' "$out" | grep -vE ', (-1|0)\) += ' | head -5 \
            >>"$TMP/$n.strace.err"
        not_ok "$n: the loop's waits carry no timeout while busy" "$TMP/$n.strace.err"
    fi
}

for sec in off noise; do
    if ! start_node "sink-$sec" --targets Sink --listen /ip4/127.0.0.1/tcp/0 --security "$sec" \
        "$TMP/wire_loop.onnx"; then
        not_ok "Sink starts (security $sec)" "$TMP/sink-$sec.log"
        continue
    fi
    if ! start_node "source-$sec" --targets Source --listen /ip4/127.0.0.1/tcp/0 \
        --security "$sec" --peer "$(node_peer "sink-$sec")=$(node_addr "sink-$sec" tcp)" \
        "$TMP/wire_loop.onnx"; then
        not_ok "Source starts (security $sec)" "$TMP/source-$sec.log"
        continue
    fi
    ctl "source-$sec" invoke Source 'x=[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]' >"$TMP/invoke.out" 2>&1
    if wait_until 20 envelopes_in_over "sink-$sec" 100; then
        ok "security $sec: the request loop runs"
        trace_waits "sink-$sec"
        trace_waits "source-$sec"
    else
        not_ok "security $sec: the request loop runs" "$TMP/source-$sec.log"
    fi
    stop_nodes "security $sec: both nodes stop cleanly" "source-$sec" "sink-$sec"
done
finish
